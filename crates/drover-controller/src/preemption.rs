//! Preemption's policy (`PreemptType=preempt/qos` or `preempt/partition_prio`): a job's class
//! (its QoS, or its partition), the classes it may preempt, what preemption does to a class
//! (`PreemptMode`) and the grace a victim gets (`GraceTime`). Pure functions of the
//! configuration and accounting's QoS, used by the controller's owner and by `drover sim`'s
//! replays ([`crate::replay`]).

use crate::acct::Admin;
use drover_model::conf::{Config, PreemptMode};
use drover_model::job::JobSpec;
use std::sync::Arc;

/// Preemption classes of partitions (`preempt/partition_prio`) are their names behind this,
/// so they never meet a QoS's.
pub(crate) const PARTITION_CLASS: &str = "partition:";

pub(crate) fn partition_class(name: &str) -> String {
    format!("{PARTITION_CLASS}{name}")
}

/// A preemption class as the log names it: `partition lowprio`, `QoS normal`.
pub(crate) fn class_text(class: &str) -> String {
    match class.strip_prefix(PARTITION_CLASS) {
        Some(p) => format!("partition {p}"),
        None => format!("QoS {class}"),
    }
}

/// The class of a job of request `spec` running in `partition`: its partition under
/// `preempt/partition_prio`, else its QoS.
pub fn class_of(cfg: &Config, spec: &JobSpec, partition: &str) -> String {
    if cfg.preempt_partition {
        partition_class(partition)
    } else {
        crate::policy::JobPolicy::of(spec).qos.to_string()
    }
}

/// What preemption does to a job of class `class`: its QoS's (or partition's) own
/// `PreemptMode`, else the cluster's.
pub fn mode_of(cfg: &Config, admin: Option<&Admin>, class: &str) -> PreemptMode {
    if let Some(part) = class.strip_prefix(PARTITION_CLASS) {
        return cfg.partition(part).and_then(|p| p.preempt_mode).unwrap_or(cfg.preempt_mode);
    }
    let own = admin.and_then(|a| a.qos.iter().find(|q| q.name == class)).map(|q| q.preempt_mode.clone());
    match own.as_deref().map(str::to_ascii_lowercase).as_deref() {
        Some("cancel") => PreemptMode::Cancel,
        Some("requeue") => PreemptMode::Requeue,
        Some("suspend") => PreemptMode::Suspend,
        Some("off") => PreemptMode::Off,
        _ => cfg.preempt_mode,
    }
}

/// The grace a preempted job of class `class` gets (`GraceTime`), in seconds.
pub fn grace_of(cfg: &Config, admin: Option<&Admin>, class: &str) -> i64 {
    match class.strip_prefix(PARTITION_CLASS) {
        Some(part) => cfg.partition(part).map_or(0, |p| i64::from(p.grace_time)),
        None => admin.and_then(|a| a.qos.iter().find(|q| q.name == class)).map_or(0, |q| q.grace_time_secs as i64),
    }
}

/// A waiting job's part in preemption: its class, and the classes whose running jobs it may
/// preempt (of lower-tier partitions, or its QoS's `Preempt` list, less those whose mode is
/// off). `None` without preemption.
pub fn of_job(
    cfg: &Config,
    admin: Option<&Admin>,
    spec: &JobSpec,
    intern: &mut dyn FnMut(&str) -> Arc<str>,
) -> Option<drover_sched::Preempt> {
    if cfg.preempt_partition {
        let mine = spec.partitions.first().and_then(|p| cfg.partition(p))?;
        let can_preempt = cfg
            .partitions
            .iter()
            .filter(|p| p.priority_tier < mine.priority_tier)
            .map(|p| partition_class(&p.name))
            .filter(|c| mode_of(cfg, admin, c) != PreemptMode::Off)
            .map(|c| intern(&c))
            .collect();
        return Some(drover_sched::Preempt { qos: intern(&partition_class(&mine.name)), can_preempt });
    }
    if !cfg.preempt_qos {
        return None;
    }
    let qos = crate::policy::JobPolicy::of(spec).qos;
    let can_preempt = admin
        .and_then(|a| a.qos.iter().find(|q| q.name == qos))
        .map(|q| {
            q.preempt
                .iter()
                .filter(|victim| mode_of(cfg, admin, victim) != PreemptMode::Off)
                .map(|v| intern(v))
                .collect()
        })
        .unwrap_or_default();
    Some(drover_sched::Preempt { qos: intern(qos), can_preempt })
}
