//! What a `slurm.conf` tells the scheduler ([`events`]): its nodes, licenses, topology,
//! scheduling parameters and partitions, as the events the core is configured by. The
//! controller configures its core with them at start and on reconfigure; `drover sim --config`
//! replays a workload on the same.

use crate::core::{Event, NodeRes, PartitionRes};
use crate::plan::SchedConfig;
use drover_model::conf::{Config, PartitionState};
use drover_model::state::PendingReason;

/// The scheduling parameters of a configuration (`SchedulerType`, `SchedulerParameters`).
pub fn sched_config(cfg: &Config) -> SchedConfig {
    let base = if cfg.backfill { SchedConfig::named(&cfg.bf_policy) } else { None };
    SchedConfig {
        max_job_test: cfg.bf_max_job_test as usize,
        window: i64::from(cfg.bf_window_min) * 60,
        interval: i64::from(cfg.bf_interval),
        preempt_exempt: cfg.preempt_exempt_secs as i64,
        max_job_user: cfg.bf_max_job_user as usize,
        min_age_reserve: i64::from(cfg.bf_min_age_reserve),
        slip_limit: i64::from(cfg.bf_slip_limit),
        // sched/builtin: strict priority order.
        ..base.unwrap_or_else(|| SchedConfig::named("fcfs").unwrap_or_default())
    }
}

/// The events that configure a core for `cfg` (nodes, licenses, topology, parameters,
/// partitions, in that order); `gres` is the `gres.conf` beside it, where there is one
/// (which CPUs are near each GPU, and the GPUs' links, for placement).
pub fn events(cfg: &Config, gres: Option<&drover_model::gres::GresConf>) -> Vec<Event> {
    let mut out = Vec::with_capacity(cfg.nodes.len() + cfg.partitions.len() + 3);
    for n in &cfg.nodes {
        let near = gres.map(|gc| drover_model::gres::gpu_cpus(gc, n)).unwrap_or_default();
        let links = gres.map(|gc| drover_model::gres::gpu_links(gc, n)).unwrap_or_default();
        out.push(Event::NodeDefined(
            NodeRes::new(&n.name, n.cpus, n.real_memory_mb, n.features.clone(), n.weight)
                .with_gres(&n.gres_list)
                .with_gpu_cpus(near)
                .with_gpu_links(links),
        ));
    }
    out.push(Event::LicensesDefined(cfg.licenses.clone()));
    out.push(Event::TopologyDefined(cfg.topology.clone()));
    out.push(Event::Configure(sched_config(cfg)));
    for p in &cfg.partitions {
        out.push(Event::PartitionDefined(PartitionRes {
            name: p.name.clone(),
            nodes: p.nodes.clone(),
            down: match p.state {
                PartitionState::Up => None,
                PartitionState::Down | PartitionState::Drain => Some(PendingReason::PartitionDown),
                PartitionState::Inactive => Some(PendingReason::PartitionInactive),
            },
            max_time: p.max_time,
            default_time: p.default_time,
            max_nodes: p.max_nodes,
            min_nodes: p.min_nodes,
        }));
    }
    out
}

/// Partitions of a higher `PriorityTier` come first in the scheduler's queue, whatever
/// preempts: the tier of the job's first partition rides above its priority in the queue's key.
pub fn apply_tier(cfg: &Config, sj: &mut crate::core::SchedJob) {
    if let Some(p) = sj.partitions.first().and_then(|p| cfg.partition(p)) {
        sj.priority |= u64::from(p.priority_tier.min(u32::from(u16::MAX))) << 32;
    }
}
