//! The controller's accounting policy, for `drover sim`'s replays of a site's own jobs
//! ([`Site`]): the multifactor priority — fairshare usage credited as jobs end and decayed as
//! the controller does ([`crate::fairshare::Usage`]), Fair Tree factors over accounting's
//! associations ([`crate::fairshare::compute`]), each job's priority from them and the
//! configuration's weights — and accounting's limits (`AccountingStorageEnforce=limits`: the
//! association and QoS caps the scheduler holds jobs to, and the per-job limits), each through
//! the controller's own functions, so that a replay orders and holds its queue as the live
//! controller would. What the controller does every `PriorityCalcPeriod` a replay does at the
//! first event after each period's end.

use crate::acct::Admin;
use crate::fairshare::Usage;
use drover_model::conf::Config;
use drover_model::job::JobSpec;
use drover_proto::v1;
use drover_sched::{Event, SchedJob};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// What preempting a running job does ([`Site::preemption`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preemption {
    Suspend,
    End { grace: i64, requeue: bool },
}

pub struct Site {
    cfg: Config,
    admin: Option<Admin>,
    usage: Usage,
    factors: HashMap<(String, String), f64>,
    /// The limit groups the scheduler was given.
    keys: HashSet<Arc<str>>,
}

impl Site {
    /// The policy of `cfg`'s cluster with accounting's associations and QoS `st`.
    pub fn new(cfg: &Config, st: Option<v1::AdminState>) -> Site {
        let admin = st.map(|st| Admin::new(&cfg.cluster_name, st));
        let mut s =
            Site { cfg: cfg.clone(), admin, usage: Usage::default(), factors: HashMap::new(), keys: HashSet::new() };
        s.refresh();
        s
    }

    /// The site orders its queue by the multifactor priority.
    pub fn multifactor(&self) -> bool {
        self.cfg.priority.multifactor
    }

    /// `PriorityCalcPeriod`, in seconds.
    pub fn calc_period(&self) -> i64 {
        self.cfg.priority.calc_period.max(1) as i64
    }

    /// The association and QoS caps the scheduler holds jobs to, where limits are enforced.
    pub fn limits(&mut self) -> Option<Event> {
        let (Some(st), true) = (self.admin.as_ref(), self.cfg.enforce.limits) else { return None };
        let caps = crate::policy::caps(&self.cfg, st);
        self.keys = caps.iter().map(|(k, _)| k.clone()).collect();
        Some(Event::LimitsDefined(caps))
    }

    /// `GrpTRESMins` limits are set: usage moving may hold or free any waiting job.
    pub fn minutes_limits(&self) -> bool {
        crate::policy::minutes_limits(&self.cfg, self.admin.as_ref())
    }

    /// A waiting job's limit groups and per-job limit, as the controller gives them.
    pub fn apply_limits(&self, sj: &mut SchedJob, spec: &JobSpec) {
        let (Some(st), true) = (self.admin.as_ref(), self.cfg.enforce.limits) else { return };
        crate::policy::apply_limits(&self.cfg, st, &self.keys, &self.usage, sj, spec);
    }

    /// A waiting job's part in preemption (its class, and those it may preempt).
    pub fn apply_preempt(&self, sj: &mut SchedJob, spec: &JobSpec) {
        if let Some(p) = crate::preemption::of_job(&self.cfg, self.admin.as_ref(), spec, &mut |s| Arc::from(s)) {
            sj.more_mut().preempt = Some(p);
        }
    }

    /// What preempting a running job of request `spec` in `partition` does: suspend it, or
    /// end it after its grace time (seconds) and requeue it (`true`: a batch job that may be
    /// requeued, under `PreemptMode=REQUEUE`) or not, as the controller does.
    pub fn preemption(&self, spec: &JobSpec, partition: &str) -> Preemption {
        use drover_model::conf::PreemptMode;
        let class = crate::preemption::class_of(&self.cfg, spec, partition);
        match crate::preemption::mode_of(&self.cfg, self.admin.as_ref(), &class) {
            PreemptMode::Suspend => Preemption::Suspend,
            mode => Preemption::End {
                grace: crate::preemption::grace_of(&self.cfg, self.admin.as_ref(), &class),
                requeue: mode == PreemptMode::Requeue && spec.batch && spec.requeue != Some(false),
            },
        }
    }

    /// A job's run of `secs` seconds ended, holding what `sj` asks for: its association is
    /// credited (billing = its CPUs, times its QoS's `UsageFactor`), as the controller credits it.
    pub fn ended(&mut self, spec: &JobSpec, sj: &SchedJob, secs: i64) {
        let w = crate::policy::JobPolicy::of(spec);
        let factor = crate::fairshare::usage_factor(self.admin.as_ref().map(|a| &a.st), w.qos);
        let n = sj.need();
        let held = [n.cpus as f64, n.mem_mb as f64, n.nodes as f64, n.cpus as f64, n.gpus as f64];
        let hl = self.cfg.priority.decay_half_life;
        self.usage.credit(w.account, w.user, secs.max(0) as f64, held, factor, hl);
    }

    /// A calculation at `t`: usage decays to `t`, and the factors follow.
    pub fn calc(&mut self, t: i64) {
        self.usage.decay_to(t, self.cfg.priority.decay_half_life);
        self.refresh();
    }

    /// The factors from the usage as it is (after a job's end): the associations whose factor
    /// moved, as (account, user).
    pub fn refresh(&mut self) -> Vec<(String, String)> {
        let Some(admin) = self.admin.as_ref().filter(|_| self.cfg.priority.multifactor) else { return Vec::new() };
        let (factors, _) = crate::fairshare::compute(admin, &self.cfg.cluster_name, &self.usage);
        let old = std::mem::replace(&mut self.factors, factors);
        crate::fairshare::moved(&old, &self.factors)
    }

    /// The (account, user) a request charges.
    pub fn assoc_of(spec: &JobSpec) -> (String, String) {
        let w = crate::policy::JobPolicy::of(spec);
        (w.account.to_string(), w.user.to_string())
    }

    /// A job's multifactor priority at `t`, eligible since `eligible` (`None` without it).
    pub fn priority(&self, spec: &JobSpec, eligible: i64, t: i64) -> Option<u32> {
        self.cfg.priority.multifactor.then(|| {
            crate::owner::priority::multifactor(&self.cfg, self.admin.as_ref(), &self.factors, spec, eligible, t).0
        })
    }
}
