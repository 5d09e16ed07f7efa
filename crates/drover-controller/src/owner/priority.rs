//! Multifactor priority and fairshare: what a job's run counts for, and each pending job's priority.

use super::*;

impl Owner {
    /// What a job's run counts for fairshare and `GrpTRESMins`: its account and user, what it
    /// holds (CPUs, memory, nodes, billing (its CPUs), GPUs), and its QoS's `UsageFactor`.
    pub(super) fn fairshare_of(&self, j: &Job) -> (String, String, [f64; 5], f64) {
        let w = j.spec.wire();
        let account = drover_proto::jobinfo::account(&w).to_string();
        let qos = drover_proto::jobinfo::qos(&w);
        let nodes = j.status.alloc.as_ref().map_or(&[][..], |a| a.nodes.as_slice());
        let cpus = nodes.iter().map(|n| n.cpu_ids.len()).sum::<usize>() as f64;
        let mem = nodes.iter().map(|n| n.mem_mb).sum::<u64>() as f64;
        let gpus = nodes.iter().map(|n| n.gpus().len()).sum::<usize>() as f64;
        let factor = crate::fairshare::usage_factor(self.acct_admin.as_deref().map(|a| &a.st), qos);
        (account, w.user.clone(), [cpus, mem, nodes.len() as f64, cpus, gpus], factor)
    }

    /// Credits a job's run up to `to` to its association: from where it was last credited,
    /// else from `since` (its start, or the last calculation before this controller started).
    pub(super) fn credit_run(&mut self, j: &Job, since: i64, to: i64) {
        if !self.cfg.priority.multifactor || j.status.start_time == 0 {
            return;
        }
        let from = self.fs.credited.get(&j.id).copied().unwrap_or(since).max(j.status.start_time);
        self.fs.credited.insert(j.id, to.max(from));
        if to <= from {
            return;
        }
        let (account, user, held, factor) = self.fairshare_of(j);
        let hl = self.cfg.priority.decay_half_life;
        self.fs.usage.credit(&account, &user, (to - from) as f64, held, factor, hl);
        self.fs.touched.insert((account, user));
        self.fs.stale = true;
    }

    /// `PriorityCalcPeriod`: usage decays to `t`, running jobs' runs since the last
    /// calculation count, the usage is saved, and priorities follow.
    pub(super) fn priority_calc(&mut self, t: i64) {
        let from = self.fs.usage.at;
        self.fs.usage.decay_to(t, self.cfg.priority.decay_half_life);
        self.reset_usage_if_due(t);
        if from > 0 {
            let running: Vec<Arc<Job>> =
                self.durable.jobs.values().filter(|j| j.status.state == JobState::Running).cloned().collect();
            for j in running {
                self.credit_run(&j, j.status.start_time.max(from), t);
            }
        }
        let tmp = self.fs.path.with_extension("new");
        if std::fs::write(&tmp, self.fs.usage.encode()).and_then(|_| std::fs::rename(&tmp, &self.fs.path)).is_err() {
            eprintln!("drover controller: error: cannot save {}", self.fs.path.display());
        }
        self.fs.full = true;
        self.refresh_priorities(t);
    }

    /// `PriorityUsageResetPeriod`: usage starts from nothing when a period begins on the
    /// local calendar (`NOW`: once, when this controller starts).
    pub(super) fn reset_usage_if_due(&mut self, t: i64) {
        use drover_model::priority_conf::UsageReset;
        let period = self.cfg.priority.usage_reset;
        let clear = |u: &mut crate::fairshare::Usage| {
            u.raw.clear();
            u.tres.clear();
        };
        if period == UsageReset::Now {
            if !self.fs.reset_now_done {
                clear(&mut self.fs.usage);
                self.fs.usage.last_reset = t;
                self.fs.reset_now_done = true;
            }
            return;
        }
        if self.fs.usage.last_reset == 0 {
            self.fs.usage.last_reset = t;
            return;
        }
        if let Some(next) = crate::fairshare::next_reset(period, self.fs.usage.last_reset, t) {
            if t >= next {
                clear(&mut self.fs.usage);
                self.fs.usage.last_reset = next;
            }
        }
    }

    /// Fair Tree from the current usage, then waiting jobs' priorities; the scheduler hears
    /// of those that changed. After a full calculation (`PriorityCalcPeriod`: ages move,
    /// usage decays) or a change of the association tree, QoS or limits (`fs.full`), every
    /// waiting job's; otherwise (a job started or ended) only those of the associations whose
    /// fairshare factor moved, and, where `GrpTRESMins` limits are set, those under a limited
    /// account whose subtree's usage moved: with 100,000 waiting jobs, a job's end costs the
    /// jobs it concerns, not the queue.
    pub(super) fn refresh_priorities(&mut self, t: i64) {
        self.fs.stale = false;
        self.refresh(t, true);
    }

    /// A job's end moved its association's usage: the factors and the priorities they move,
    /// before the pass that may start another job in its place. sshare's rows (with the
    /// TRES-minutes every running job still holds, a pass over them) wait for the next
    /// second's refresh.
    pub(super) fn refresh_after_end(&mut self, t: i64) {
        self.refresh(t, false);
    }

    fn refresh(&mut self, t: i64, with_rows: bool) {
        let full = std::mem::take(&mut self.fs.full);
        let touched = std::mem::take(&mut self.fs.touched);
        let old_factors = match self.acct_admin.as_deref() {
            None => Default::default(),
            Some(st) => {
                let (factors, mut rows) = crate::fairshare::compute(st, &self.cfg.cluster_name, &self.fs.usage);
                if with_rows {
                    // TRES-minutes running jobs still hold (their time limit less the time they ran).
                    let mut run_mins: std::collections::HashMap<(String, String), [f64; 5]> = Default::default();
                    for j in self.durable.jobs.values().filter(|j| j.status.state == JobState::Running) {
                        let Some(limit) = j.status.time_limit else { continue };
                        let left =
                            (j.status.start_time + limit as i64 + j.status.suspended_secs - t).max(0) as f64 / 60.0;
                        let (account, user, held, _) = self.fairshare_of(j);
                        let e = run_mins.entry((account, user)).or_default();
                        for (k, n) in held.iter().enumerate() {
                            e[k] += n * left;
                        }
                    }
                    crate::fairshare::add_run_mins(&mut rows, &run_mins);
                    self.fs.rows = Arc::new(rows);
                    self.dirty = true;
                }
                std::mem::replace(&mut self.fs.factors, factors)
            }
        };
        // Usage moved: GrpTRESMins may now hold (or free) waiting jobs.
        let minutes_limits = crate::policy::minutes_limits(&self.cfg, self.acct_admin.as_deref());
        if full {
            self.reprioritize_all(t, minutes_limits);
            return;
        }
        // Associations whose factor moved (or appeared, or went).
        let mut concerned: BTreeSet<(String, String)> =
            crate::fairshare::moved(&old_factors, &self.fs.factors).into_iter().collect();
        // Those whose usage moved, and every association under a limited account above one.
        let mut resend: HashSet<(String, String)> = HashSet::new();
        if minutes_limits && !touched.is_empty() {
            let admin = self.acct_admin.as_deref().expect("invariant: limits come from accounting");
            resend.extend(touched.iter().cloned());
            for x in admin.assocs.iter().filter(|x| {
                x.cluster == self.cfg.cluster_name
                    && x.user.is_empty()
                    && x.limits.as_ref().is_some_and(|l| !l.grp_tres_mins.is_empty())
            }) {
                let under = crate::policy::subtree(&self.cfg, admin, &x.account);
                if touched.iter().any(|(a, _)| under.contains(a)) {
                    resend.extend(self.fs.waiting.keys().filter(|(a, _)| under.contains(a)).cloned());
                }
            }
            concerned.extend(resend.iter().cloned());
        }
        let mut prio = Vec::new();
        for key in concerned {
            let Some(ids) = self.fs.waiting.get_mut(&key) else { continue };
            let jobs = &self.durable.jobs;
            ids.retain(|id| jobs.get(id).is_some_and(|j| j.status.state == JobState::Pending));
            let mut ids: Vec<JobId> = ids.iter().copied().collect();
            ids.sort_unstable();
            let always = resend.contains(&key);
            for id in ids {
                if let Some(f) = self.reprioritize(id, t, always) {
                    prio.push((id, f));
                }
            }
        }
        if !prio.is_empty() {
            self.fs.prio.extend(prio);
            self.dirty = true;
        }
    }

    /// Every waiting job's priority (and the index of waiting jobs by association, afresh).
    fn reprioritize_all(&mut self, t: i64, resend: bool) {
        let pending: Vec<JobId> =
            self.durable.jobs.values().filter(|j| j.status.state == JobState::Pending).map(|j| j.id).collect();
        let mut prio = Vec::with_capacity(pending.len());
        self.fs.waiting.clear();
        for id in pending {
            if let Some(f) = self.reprioritize(id, t, resend) {
                prio.push((id, f));
            }
        }
        self.fs.prio = prio.into_iter().collect();
        self.dirty = true;
    }

    /// One waiting job's priority at `t` (one an administrator fixed stays as it is), kept in
    /// the index by association; the scheduler hears of it if it changed (or always, with
    /// `resend`). The weighted factors, for sprio.
    fn reprioritize(&mut self, id: JobId, t: i64, resend: bool) -> Option<drover_sched::priority::Factors> {
        let j = self.durable.jobs.get(&id)?;
        let spec = j.spec.unpack();
        let w = crate::policy::JobPolicy::of(&spec);
        self.fs.waiting.entry((w.account.to_string(), w.user.to_string())).or_default().insert(id);
        if j.status.priority_set {
            return None;
        }
        let (p, f) = self.multifactor_priority(&spec, j.status.eligible_time, t);
        if u64::from(p) != j.status.priority || resend {
            if let Some(m) = self.durable.jobs.get_mut(&id) {
                // Derived, like reasons: recomputed after recovery, never journalled.
                Arc::make_mut(m).status.priority = u64::from(p);
            }
            if let Some(m) = self.durable.jobs.get(&id).cloned() {
                self.core.handle(Event::Updated(self.sched_job(&m)));
            }
            self.dirty = true;
        }
        Some(drover_sched::priority::weighted(&self.cfg.priority, &f))
    }

    /// A job waits (submitted, changed while waiting, or requeued): the index by association
    /// learns of it, so that a refresh after another job's end finds it.
    pub(super) fn note_waiting(&mut self, id: JobId, spec: &JobSpec) {
        if self.cfg.priority.multifactor {
            let w = crate::policy::JobPolicy::of(spec);
            self.fs.waiting.entry((w.account.to_string(), w.user.to_string())).or_default().insert(id);
        }
    }

    /// A job's multifactor priority and its factors.
    pub(super) fn multifactor_priority(
        &self,
        spec: &JobSpec,
        eligible: i64,
        t: i64,
    ) -> (u32, drover_sched::priority::Factors) {
        multifactor(&self.cfg, self.acct_admin.as_deref(), &self.fs.factors, spec, eligible, t)
    }
}

/// A job's multifactor priority at `t` and its factors, from the configuration's weights,
/// accounting's QoS and association priorities, and the fairshare `factors` of the last
/// calculation. Shared with `drover sim`'s replay ([`crate::replay`]).
pub(crate) fn multifactor(
    cfg: &Config,
    admin: Option<&crate::acct::Admin>,
    factors: &HashMap<(String, String), f64>,
    spec: &JobSpec,
    eligible: i64,
    t: i64,
) -> (u32, drover_sched::priority::Factors) {
    use drover_sched::priority::{self, ClusterSize, JobInput};
    let w = crate::policy::JobPolicy::of(spec);
    let qos_prio = |name: &str| admin.and_then(|a| a.qos.iter().find(|q| q.name == name)).map_or(0, |q| q.priority);
    let max_qos = admin.map_or(0, |a| a.qos.iter().map(|q| q.priority).max().unwrap_or(0));
    let assoc_prio = admin
        .and_then(|a| a.assoc(w.account, w.user, ""))
        .and_then(|a| a.limits.as_ref().and_then(|l| l.priority))
        .unwrap_or(0);
    let max_assoc = admin
        .map_or(0, |a| a.assocs.iter().filter_map(|x| x.limits.as_ref().and_then(|l| l.priority)).max().unwrap_or(0));
    let input = JobInput {
        eligible: if spec.hold { 0 } else { eligible },
        fairshare: factors.get(&(w.account.to_string(), w.user.to_string())).copied().unwrap_or(0.0),
        min_nodes: spec.min_nodes.unwrap_or(1),
        cpus: spec.task_count().max(1) * spec.cpus_per_task().max(1),
        partition: (1, 1),
        qos: (qos_prio(w.qos), max_qos),
        assoc: (assoc_prio, max_assoc),
        nice: i64::from(spec.nice),
    };
    let size = ClusterSize { nodes: cfg.nodes.len() as u32, cpus: cfg.nodes.iter().map(|n| n.cpus).sum() };
    let f = priority::factors(&cfg.priority, &input, size, t);
    (priority::priority(&cfg.priority, &f), f)
}
