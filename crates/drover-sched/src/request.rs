//! What the scheduler sees of a job's request ([`sched_job`]): the controller's conversion of
//! a `JobSpec` into a [`SchedJob`], shared with `drover sim`, which replays requests read from
//! accounting through the same code. What only the controller knows (singletons, accounting
//! limits, partition tiers, preemption, nodes too small for the request) it adds itself.

use crate::core::{Hold, SchedArray, SchedJob, SchedMore};
use crate::gres::GresNeed;
use drover_model::job::{Constraint, JobId, JobSpec};
use std::sync::Arc;

/// The scheduler's view of request `s` of job `id`, at `priority`, eligible since
/// `eligible`; `intern` shares partition and reservation names.
pub fn sched_job(
    id: JobId,
    s: &JobSpec,
    priority: u64,
    eligible: i64,
    hold: Option<Hold>,
    array: Option<SchedArray>,
    intern: &mut dyn FnMut(&str) -> Arc<str>,
) -> SchedJob {
    let min_nodes = s.min_nodes.unwrap_or(1).max(1);
    let max_nodes = s.max_nodes.or(s.min_nodes);
    // -O: allocated as if one task per node were asked for (its -c CPUs on each); the
    // tasks are laid out over those nodes when it starts.
    let overcommit = s.overcommit && !s.exclusive;
    SchedJob {
        id,
        priority,
        partitions: s.partitions.iter().map(|p| intern(p)).collect(),
        min_nodes,
        max_nodes,
        ntasks: if overcommit { min_nodes } else { s.task_count().max(min_nodes) },
        cpus_per_task: s.cpus_per_task(),
        mem_per_node_mb: s.mem_per_node_mb,
        mem_per_cpu_mb: s.mem_per_cpu_mb,
        time_limit: s.time_limit,
        exclusive: s.exclusive,
        uid: s.uid,
        queued: eligible,
        hold,
        more: SchedMore {
            ntasks_per_node: if overcommit { None } else { s.ntasks_per_node },
            min_cpus: s.min_cpus_per_node.unwrap_or(0),
            deadline: s.deadline.map(|d| (d, s.time_min.or(s.time_limit.flatten()).unwrap_or(0))),
            nodelist: s.nodelist.clone(),
            exclude: s.exclude.clone(),
            constraint: s.constraint.as_deref().and_then(|c| Constraint::parse(c).ok()),
            begin_time: s.begin_time,
            dependency: s.dependency.clone(),
            singleton_after: Vec::new(),
            array,
            gres: gres_needs(s),
            licenses: licenses_of(s),
            limits: Vec::new(),
            policy: None,
            preempt: None,
            reservation: s.reservation.as_deref().map(&mut *intern),
            switches: s.switches.map(|n| (n, eligible + i64::from(s.switch_wait.unwrap_or(0)))),
            exclusive_user: s.exclusive_user,
            contiguous: s.contiguous,
            spread: s.spread_job,
            use_min_nodes: s.use_min_nodes,
            segment: s.segment,
        }
        .boxed(),
    }
}

/// Cluster licenses a request asks for (`-L name[:count],...`).
pub fn licenses_of(s: &JobSpec) -> Vec<(String, u32)> {
    s.licenses.as_deref().and_then(|l| drover_model::job::parse_licenses(l).ok()).unwrap_or_default()
}

/// A request's GRES as the scheduler places them: per node, and per task. `--gpus` (for
/// the whole job) is spread evenly over the job's minimum node count.
pub fn gres_needs(s: &JobSpec) -> Vec<GresNeed> {
    let mut out: Vec<GresNeed> = s
        .gres
        .iter()
        .chain(s.gpus_per_node.iter())
        .map(|g| GresNeed { name: g.name.clone(), kind: g.kind.clone(), per_node: g.count, per_task: 0 })
        .collect();
    if let Some(g) = &s.gpus {
        let nodes = u64::from(s.min_nodes.unwrap_or(1).max(1));
        out.push(GresNeed {
            name: g.name.clone(),
            kind: g.kind.clone(),
            per_node: g.count.div_ceil(nodes),
            per_task: 0,
        });
    }
    if let Some(g) = &s.gpus_per_task {
        out.push(GresNeed { name: g.name.clone(), kind: g.kind.clone(), per_node: 0, per_task: g.count });
    }
    out
}
