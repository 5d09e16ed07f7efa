//! The controller's multifactor priority, for `drover sim`'s replays of a site's own jobs:
//! fairshare usage credited as jobs end and decayed as the controller does
//! ([`crate::fairshare::Usage`]), Fair Tree factors over accounting's associations
//! ([`crate::fairshare::compute`]), and each job's priority from them and the configuration's
//! weights (the controller's own function), so that a replay orders its queue as the live
//! controller would. What the controller does every `PriorityCalcPeriod` a replay does at the
//! first event after each period's end.

use crate::acct::Admin;
use crate::fairshare::Usage;
use drover_model::conf::Config;
use drover_model::job::JobSpec;
use drover_proto::v1;
use std::collections::HashMap;

pub struct Priorities {
    cfg: Config,
    admin: Option<Admin>,
    usage: Usage,
    factors: HashMap<(String, String), f64>,
}

impl Priorities {
    /// The priorities of `cfg`'s cluster with accounting's associations and QoS `st`; `None`
    /// unless `cfg` has `PriorityType=priority/multifactor`.
    pub fn new(cfg: &Config, st: Option<v1::AdminState>) -> Option<Priorities> {
        if !cfg.priority.multifactor {
            return None;
        }
        let admin = st.map(|st| Admin::new(&cfg.cluster_name, st));
        let mut p = Priorities { cfg: cfg.clone(), admin, usage: Usage::default(), factors: HashMap::new() };
        p.refresh();
        Some(p)
    }

    /// `PriorityCalcPeriod`, in seconds.
    pub fn calc_period(&self) -> i64 {
        self.cfg.priority.calc_period.max(1) as i64
    }

    /// A job's run of `secs` seconds on `cpus` CPUs ended: its association is credited (its
    /// billing is its CPUs, times its QoS's `UsageFactor`), as the controller credits it.
    pub fn ended(&mut self, spec: &JobSpec, cpus: u32, secs: i64) {
        let w = crate::policy::JobPolicy::of(spec);
        let factor = self.admin.as_ref().and_then(|a| a.qos.iter().find(|q| q.name == w.qos)).map_or(1.0, |q| {
            if q.usage_factor >= 0.0 {
                q.usage_factor
            } else {
                1.0
            }
        });
        let c = f64::from(cpus);
        let hl = self.cfg.priority.decay_half_life;
        self.usage.credit(w.account, w.user, secs.max(0) as f64, [c, 0.0, 0.0, c, 0.0], factor, hl);
    }

    /// A calculation at `t`: usage decays to `t`, and the factors follow.
    pub fn calc(&mut self, t: i64) {
        self.usage.decay_to(t, self.cfg.priority.decay_half_life);
        self.refresh();
    }

    /// The factors from the usage as it is (after a job's end). Which associations' factor
    /// moved, as (account, user).
    pub fn refresh(&mut self) -> Vec<(String, String)> {
        let Some(admin) = &self.admin else { return Vec::new() };
        let (factors, _) = crate::fairshare::compute(admin, &self.cfg.cluster_name, &self.usage);
        let old = std::mem::replace(&mut self.factors, factors);
        let mut moved: Vec<(String, String)> = self
            .factors
            .iter()
            .filter(|(k, v)| old.get(*k) != Some(*v))
            .map(|(k, _)| k.clone())
            .chain(old.keys().filter(|k| !self.factors.contains_key(*k)).cloned())
            .collect();
        moved.sort();
        moved
    }

    /// The (account, user) a request charges.
    pub fn assoc_of(spec: &JobSpec) -> (String, String) {
        let w = crate::policy::JobPolicy::of(spec);
        (w.account.to_string(), w.user.to_string())
    }

    /// A job's priority at `t`, eligible since `eligible`.
    pub fn priority(&self, spec: &JobSpec, eligible: i64, t: i64) -> u32 {
        crate::owner::priority::multifactor(&self.cfg, self.admin.as_ref(), &self.factors, spec, eligible, t).0
    }
}
