//! What the scheduler sees of a job: its request, limits, QoS preemption and tiers.

use super::*;

impl Owner {
    pub(super) fn sched_job(&self, j: &Job) -> SchedJob {
        self.sched_job_of(j.id, &j.spec.unpack(), &j.status, j.array.as_deref())
    }

    /// What the scheduler sees of a job: its request, with what the controller knows that
    /// the scheduler does not (singletons, limits, tiers, preemption, node properties).
    pub(super) fn sched_job_of(
        &self,
        id: JobId,
        spec: &JobSpec,
        status: &JobStatus,
        array: Option<&crate::state::ArrayPart>,
    ) -> SchedJob {
        let mut sj = Self::sched_job_from(id, spec, status, array);
        if self.durable.fences.contains_key(&id) {
            sj.hold = Some(Hold::Fenced);
        }
        // Nodes too small for the request are out, as Slurm's job_req_node_filter: --tmp
        // (what TmpDisk holds is not tracked), --mincpus, and -B's sockets, cores and threads.
        let at_least = |want: Option<u64>, has: u64| want.is_none_or(|w| has >= w);
        let to_u64 = |v: Option<u32>| v.map(u64::from);
        if spec.tmp_mb.is_some()
            || spec.min_cpus_per_node.is_some()
            || spec.sockets_per_node.is_some()
            || spec.cores_per_socket.is_some()
            || spec.threads_per_core.is_some()
        {
            let small = self
                .cfg
                .nodes
                .iter()
                .filter(|n| {
                    !(at_least(spec.tmp_mb, n.tmp_disk_mb)
                        && at_least(to_u64(spec.min_cpus_per_node), u64::from(n.cpus))
                        && at_least(to_u64(spec.sockets_per_node), u64::from(n.sockets))
                        && at_least(to_u64(spec.cores_per_socket), u64::from(n.cores_per_socket))
                        && at_least(to_u64(spec.threads_per_core), u64::from(n.threads_per_core)))
                })
                .map(|n| n.name.clone());
            sj.more_mut().exclude.extend(small);
        }

        self.add_singleton(&mut sj, spec);
        self.apply_limits(&mut sj, spec);
        drover_sched::conf::apply_tier(&self.cfg, &mut sj);
        self.apply_preempt(&mut sj, spec);
        sj
    }

    /// Preemption: the job's class and the classes it may preempt ([`crate::preemption`]).
    pub(super) fn apply_preempt(&self, sj: &mut SchedJob, spec: &JobSpec) {
        if let Some(p) = crate::preemption::of_job(&self.cfg, self.acct_admin.as_deref(), spec, &mut |s| intern(s)) {
            sj.more_mut().preempt = Some(p);
        }
    }

    /// What preemption does to a job of class `qos`: its own `PreemptMode`, else the cluster's.
    pub(super) fn preempt_mode_of(&self, qos: &str) -> drover_model::conf::PreemptMode {
        crate::preemption::mode_of(&self.cfg, self.acct_admin.as_deref(), qos)
    }

    /// The scheduler chose running `victim` to make room for waiting `by`: its processes get
    /// SIGTERM now and, once its QoS's `GraceTime` is over, it is requeued (or cancelled,
    /// as its mode says); without a grace time at once.
    pub(super) fn preempt_job(&mut self, victim: JobId, by: JobId, t: i64) {
        use drover_model::conf::PreemptMode;
        let Some(j) = self.durable.jobs.get(&victim).cloned() else { return };
        if j.status.state != JobState::Running || self.preempting.contains_key(&victim) {
            return;
        }
        // Its class: its partition (partition_prio) or its QoS.
        let qos = crate::preemption::class_of(&self.cfg, &j.spec.unpack(), &j.status.partition);
        let mode = self.preempt_mode_of(&qos);
        if mode == PreemptMode::Suspend {
            // Stopped now, its resources lent to the preempting job; the scheduler resumes it
            // when they are free again.
            crate::log(&format!("preempting job {victim} ({}) for job {by}: suspended", class_text(&qos)));
            if self.suspend_or_resume(victim, true, t).is_ok() {
                // Noted (journalled) so that a restarted controller lends its resources again.
                if let Some(mut st) = self.durable.jobs.get(&victim).map(|j| j.status.clone()) {
                    st.state_desc = "PREEMPTED".into();
                    self.set_status(victim, st);
                }
                self.core.handle(Event::Suspended { job: victim, alloc: None });
            }
            return;
        }
        let grace = crate::preemption::grace_of(&self.cfg, self.acct_admin.as_deref(), &qos);
        let deadline = t + grace;
        self.preempting.insert(victim, (deadline, mode));
        self.core.handle(Event::Preempting { job: victim, end: deadline });
        crate::log(&format!(
            "preempting job {victim} ({}) for job {by}: {mode:?} after GraceTime {grace}s",
            class_text(&qos)
        ));
        if grace > 0 {
            for n in Self::busy_nodes(&j) {
                let msg = v1::Signal { job_id: victim, signal: libc_sigterm(), ..Default::default() };
                self.outbox.push((n, controller_to_node::Msg::Signal(msg)));
            }
        } else {
            self.preempt_now(victim);
        }
    }

    /// Whether preempting this job requeues it: its mode is REQUEUE and it is a batch job
    /// that may be requeued.
    pub(super) fn preempt_requeues(&self, j: &Job) -> bool {
        let mode = self.preempting.get(&j.id).map(|&(_, m)| m);
        mode == Some(drover_model::conf::PreemptMode::Requeue) && j.batch && j.spec.unpack().requeue != Some(false)
    }

    /// A preempted job's grace time is over: it is requeued (a batch job that may be) or
    /// ends `PREEMPTED`.
    pub(super) fn preempt_now(&mut self, id: JobId) {
        if !self.preempting.contains_key(&id) {
            return;
        }
        let Some(j) = self.durable.jobs.get(&id).cloned() else { return };
        if j.status.state != JobState::Running {
            return;
        }
        let requeue = self.preempt_requeues(&j);
        let mut st = j.status.clone();
        st.state = JobState::Completing;
        st.state_desc = "PREEMPTED".into();
        self.set_status(id, st);
        for n in Self::busy_nodes(&j) {
            let msg = v1::Signal { job_id: id, terminate: true, requeue, ..Default::default() };
            self.outbox.push((n, controller_to_node::Msg::Signal(msg)));
        }
    }

    /// A job's accounting limits (`AccountingStorageEnforce=limits`): the groups it counts
    /// in and a per-job limit it exceeds, from its account, user, partition and QoS.
    pub(super) fn apply_limits(&self, sj: &mut SchedJob, spec: &JobSpec) {
        let (Some(st), true) = (self.acct_admin.as_deref(), self.cfg.enforce.limits) else { return };
        crate::policy::apply_limits(&self.cfg, st, &self.limit_keys, &self.fs.usage, sj, spec);
    }

    /// Accounting's associations or QoS changed (or were read): the scheduler gets the new
    /// caps, and with `resend`, every pending job its groups and per-job limit again.
    pub(super) fn refresh_limits(&mut self, resend: bool) {
        let (Some(st), true) = (self.acct_admin.as_deref(), self.cfg.enforce.limits) else { return };
        let caps = crate::policy::caps(&self.cfg, st);
        if caps != self.limit_caps {
            self.limit_keys = caps.iter().map(|(k, _)| k.clone()).collect();
            self.limit_caps = caps.clone();
            self.core.handle(Event::LimitsDefined(caps));
        }
        if resend {
            let pending: Vec<Arc<Job>> =
                self.durable.jobs.values().filter(|j| j.status.state == JobState::Pending).cloned().collect();
            for j in pending {
                self.core.handle(Event::Updated(self.sched_job(&j)));
            }
        }
    }

    /// Submit limits (`MaxSubmitJobs`, `GrpSubmitJobs`, a QoS's `MaxSubmitJobsPerUser`):
    /// whether one more unfinished job of this account, user and QoS would go over one.
    pub(super) fn over_submit_limit(&self, spec: &JobSpec) -> bool {
        let (Some(st), true) = (self.acct_admin.as_deref(), self.cfg.enforce.limits) else { return false };
        let j = crate::policy::JobPolicy::of(spec);
        let limits = crate::policy::submit_limits(&self.cfg, st, &j);
        if limits.is_empty() {
            return false;
        }
        let mut counts = vec![0u32; limits.len()];
        for job in self.durable.jobs.values().filter(|j| !j.status.state.is_finished()) {
            let w = job.spec.wire();
            let (account, qos) = (drover_proto::jobinfo::account(&w), drover_proto::jobinfo::qos(&w));
            for (n, l) in counts.iter_mut().zip(&limits) {
                if l.counts(account, &w.user, qos) {
                    *n += 1;
                }
            }
        }
        counts.iter().zip(&limits).any(|(n, l)| *n >= l.max)
    }

    /// `singleton`: the job waits for every earlier job of its user with its name that has not
    /// ended (the core knows no names; the controller lists them once).
    pub(super) fn add_singleton(&self, sj: &mut SchedJob, spec: &JobSpec) {
        if !spec.dependency.singleton() {
            return;
        }
        let earlier: Vec<JobId> = self
            .durable
            .jobs
            .range(..sj.id)
            .filter(|(_, j)| j.uid == spec.uid && !j.status.state.is_finished())
            .filter(|(_, j)| j.spec.wire().name == spec.name)
            .map(|(id, _)| *id)
            .collect();
        sj.more_mut().singleton_after = earlier;
    }

    /// Whether a dependency names a job (or array task) this controller knows.
    pub(super) fn dependency_target_known(&self, d: &drover_model::job::Dependency) -> bool {
        use drover_model::job::DependencyKind;
        if matches!(d.kind, DependencyKind::Singleton | DependencyKind::AfterBurstBuffer) {
            return true;
        }
        match d.task {
            None => self.durable.jobs.contains_key(&d.job) || self.durable.jobs.values().any(|j| j.in_array(d.job)),
            Some(t) => self.durable.jobs.values().any(|j| {
                j.array_task() == Some((d.job, t))
                    || j.array_remainder().is_some_and(|a| a.array_job_id == d.job && a.pending.contains(t))
            }),
        }
    }

    pub(super) fn sched_job_from(
        id: JobId,
        s: &JobSpec,
        status: &JobStatus,
        array: Option<&crate::state::ArrayPart>,
    ) -> SchedJob {
        let hold = status.hold.map(|h| match h {
            HoldKind::User | HoldKind::ResvDeleted => Hold::User,
            HoldKind::Admin | HoldKind::LaunchFailed => Hold::Admin,
        });
        let array = array.map(|a| SchedArray {
            array_id: a.array_job_id,
            throttle: a.throttle,
            task: a.task_id,
            pending: a.pending.clone(),
        });
        drover_sched::request::sched_job(id, s, status.priority, status.eligible_time, hold, array, &mut |p| intern(p))
    }
}
