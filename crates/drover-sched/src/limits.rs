//! Policy limits (accounting's associations and QoS): groups of jobs — an account's subtree,
//! a user's association, a QoS, a user within a QoS — with caps on what their running jobs
//! hold together. A job may start only if no group it belongs to would go over a cap; else it
//! waits with that cap's reason (`AssocGrpCpuLimit`, `QOSMaxJobsPerUserLimit`, ...). Like
//! licenses, limits are checked when a job would start and hold nothing for waiting jobs.

use drover_model::alloc::Allocation;
use drover_model::job::JobId;
use drover_model::state::PendingReason;
use std::collections::HashMap;
use std::sync::Arc;

/// What running jobs of a group hold together (or one job needs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    pub jobs: u32,
    pub cpus: u64,
    pub nodes: u64,
    pub mem_mb: u64,
    pub gpus: u64,
}

impl Usage {
    /// What a started job holds.
    pub fn of(alloc: &Allocation) -> Usage {
        Usage {
            jobs: 1,
            cpus: u64::from(alloc.cpus()),
            nodes: alloc.nodes.len() as u64,
            mem_mb: alloc.nodes.iter().map(|n| n.mem_mb).sum(),
            gpus: alloc.nodes.iter().flat_map(|n| n.gres.iter()).filter(|g| g.name == "gpu").map(|g| g.count).sum(),
        }
    }

    fn add(&mut self, u: &Usage) {
        self.jobs += u.jobs;
        self.cpus += u.cpus;
        self.nodes += u.nodes;
        self.mem_mb += u.mem_mb;
        self.gpus += u.gpus;
    }

    fn sub(&mut self, u: &Usage) {
        self.jobs = self.jobs.saturating_sub(u.jobs);
        self.cpus = self.cpus.saturating_sub(u.cpus);
        self.nodes = self.nodes.saturating_sub(u.nodes);
        self.mem_mb = self.mem_mb.saturating_sub(u.mem_mb);
        self.gpus = self.gpus.saturating_sub(u.gpus);
    }
}

/// A group's caps, each with the reason a job waits for when it would go over.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Caps {
    pub jobs: Option<(u32, PendingReason)>,
    pub cpus: Option<(u64, PendingReason)>,
    pub nodes: Option<(u64, PendingReason)>,
    pub mem_mb: Option<(u64, PendingReason)>,
    pub gpus: Option<(u64, PendingReason)>,
}

impl Caps {
    pub fn is_empty(&self) -> bool {
        *self == Caps::default()
    }

    /// The first cap that `used` plus `need` would go over.
    fn exceeded(&self, used: &Usage, need: &Usage) -> Option<PendingReason> {
        let over = |cap: Option<(u64, PendingReason)>, used: u64, need: u64| {
            cap.filter(|(max, _)| used.saturating_add(need) > *max).map(|(_, r)| r)
        };
        over(self.jobs.map(|(m, r)| (u64::from(m), r)), u64::from(used.jobs), u64::from(need.jobs))
            .or_else(|| over(self.cpus, used.cpus, need.cpus))
            .or_else(|| over(self.nodes, used.nodes, need.nodes))
            .or_else(|| over(self.mem_mb, used.mem_mb, need.mem_mb))
            .or_else(|| over(self.gpus, used.gpus, need.gpus))
    }
}

#[derive(Debug, Default, Clone)]
pub struct Limits {
    caps: HashMap<Arc<str>, Caps>,
    used: HashMap<Arc<str>, Usage>,
    held: HashMap<JobId, (Vec<Arc<str>>, Usage)>,
}

impl Limits {
    /// Replaces every group's caps (usage stays: it is what runs).
    pub fn define(&mut self, caps: Vec<(Arc<str>, Caps)>) {
        self.caps = caps.into_iter().filter(|(_, c)| !c.is_empty()).collect();
    }

    /// Why a job of these groups needing `need` may not start now, if it may not.
    pub fn blocked(&self, groups: &[Arc<str>], need: &Usage) -> Option<PendingReason> {
        let none = Usage::default();
        groups.iter().find_map(|g| self.caps.get(g)?.exceeded(self.used.get(g).unwrap_or(&none), need))
    }

    /// A job of these groups started holding `u`.
    pub fn take(&mut self, job: JobId, groups: &[Arc<str>], u: Usage) {
        if groups.is_empty() {
            return;
        }
        for g in groups {
            self.used.entry(g.clone()).or_default().add(&u);
        }
        self.held.insert(job, (groups.to_vec(), u));
    }

    /// A job ended: what it held is free. Whether it held anything.
    pub fn release(&mut self, job: JobId) -> bool {
        let Some((groups, u)) = self.held.remove(&job) else { return false };
        for g in groups {
            if let Some(used) = self.used.get_mut(&g) {
                used.sub(&u);
                if *used == Usage::default() {
                    self.used.remove(&g);
                }
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_holds_jobs_to_its_caps() {
        let mut l = Limits::default();
        let g: Arc<str> = Arc::from("a:physics");
        let q: Arc<str> = Arc::from("qu:normal/alice");
        l.define(vec![
            (g.clone(), Caps { cpus: Some((4, PendingReason::AssocGrpCpuLimit)), ..Default::default() }),
            (q.clone(), Caps { jobs: Some((1, PendingReason::QOSMaxJobsPerUserLimit)), ..Default::default() }),
        ]);
        let two = Usage { jobs: 1, cpus: 2, ..Default::default() };
        assert_eq!(l.blocked(std::slice::from_ref(&g), &two), None);
        l.take(1, std::slice::from_ref(&g), two);
        l.take(2, &[g.clone(), q.clone()], two);
        assert_eq!(l.blocked(std::slice::from_ref(&g), &two), Some(PendingReason::AssocGrpCpuLimit));
        assert_eq!(
            l.blocked(std::slice::from_ref(&q), &Usage { jobs: 1, ..Default::default() }),
            Some(PendingReason::QOSMaxJobsPerUserLimit)
        );
        assert!(l.release(2));
        assert!(!l.release(2));
        assert_eq!(l.blocked(&[g.clone(), q], &two), None);
        // New caps apply to what runs now.
        l.define(vec![(g.clone(), Caps { jobs: Some((1, PendingReason::AssocGrpJobsLimit)), ..Default::default() })]);
        assert_eq!(l.blocked(&[g], &two), Some(PendingReason::AssocGrpJobsLimit));
    }
}
