//! What users and operators do to jobs: cancel, hold, release, requeue, suspend, update, top.

use super::*;

/// Slurm's ESLURM_ALREADY_DONE: what a hold, release or update of a finished job is told.
const ALREADY_DONE: &str = "Job has already finished";

impl Owner {
    pub(super) fn can_modify(&self, j: &Job, caller: Caller) -> bool {
        caller.uid == j.uid || self.operator(caller)
    }

    /// Slurm's operator: root, `SlurmUser`, or a user accounting names an `Operator` or
    /// `Administrator`. May act on every job and node (cancel, hold, update, reservations).
    pub(crate) fn operator(&self, caller: Caller) -> bool {
        self.admin(caller) || self.admin_level(caller.uid).as_deref() == Some("Operator")
    }

    /// Slurm's super user: root, `SlurmUser`, or an accounting `Administrator`. May also
    /// reconfigure the cluster.
    pub(crate) fn admin(&self, caller: Caller) -> bool {
        caller.is_root()
            || Some(caller.uid) == self.slurm_user_uid
            || self.admin_level(caller.uid).as_deref() == Some("Administrator")
    }

    /// `uid`'s AdminLevel in accounting (by its user name), if accounting names one.
    pub(super) fn admin_level(&self, uid: u32) -> Option<String> {
        let admin = self.acct_admin.as_deref()?;
        // Few users have a level: look the name up only when someone has one.
        if admin.st.users.iter().all(|u| matches!(u.admin_level.as_str(), "" | "None")) {
            return None;
        }
        let name = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)).ok().flatten()?.name;
        admin.user(&name).map(|u| u.admin_level.clone()).filter(|l| l != "None")
    }

    pub(super) fn select_jobs(&self, req: &v1::CancelRequest) -> Vec<JobId> {
        let nodes: Option<Vec<String>> =
            if req.nodelist.is_empty() { None } else { Hostlist::parse(&req.nodelist).ok().map(|h| h.names()) };
        self.durable
            .jobs
            .values()
            .filter(|j| !j.status.state.is_finished())
            .filter(|j| {
                if !req.has_user && req.name.is_empty() {
                    return true;
                }
                let s = j.spec.unpack();
                (!req.has_user || s.user == req.user || s.uid.to_string() == req.user)
                    && (req.name.is_empty() || s.name == req.name)
            })
            .filter(|j| req.partition.is_empty() || *j.status.partition == *req.partition)
            .filter(|j| req.state.is_empty() || JobState::parse(&req.state).is_some_and(|s| s == j.status.state))
            .filter(|j| match &nodes {
                None => true,
                Some(ns) => j.status.alloc.as_ref().is_some_and(|a| a.nodes.iter().any(|n| ns.contains(&n.node))),
            })
            .map(|j| j.id)
            .collect()
    }

    pub(super) fn cancel(&mut self, mut req: v1::CancelRequest, caller: Caller) -> v1::CancelReply {
        let mut results = Vec::new();
        let (steps, jobs): (Vec<v1::JobTarget>, Vec<v1::JobTarget>) =
            std::mem::take(&mut req.targets).into_iter().partition(|t| t.step_id.is_some());
        req.targets = jobs;
        for t in &steps {
            results.push(self.cancel_step(t, req.signal, req.step_terminate, caller));
        }
        if !steps.is_empty() && req.targets.is_empty() && req.job_ids.is_empty() {
            return v1::CancelReply { results };
        }
        let filtered = req.has_user
            || !req.name.is_empty()
            || !req.partition.is_empty()
            || !req.state.is_empty()
            || !req.nodelist.is_empty();
        // Pending tasks of an array cancelled by name leave it without a record, as Slurm's
        // job_str_signal clears them from the array's task bitmap (`scontrol show job A_T` then
        // finds nothing, sacct lists nothing); a remainder's last task is cancelled as a job.
        let mut dropped: Vec<(String, Result<JobId, String>)> = Vec::new();
        if !filtered && (req.signal == 0 || req.signal == libc_sigkill()) {
            for target in &mut req.targets {
                let Some(expr) = target.tasks.clone() else { continue };
                let Ok(spec) = drover_model::array::ArraySpec::parse(&expr) else { continue };
                let array = target.job_id;
                let Some(rest) = self
                    .durable
                    .jobs
                    .get(&array)
                    .filter(|j| self.can_modify(j, caller))
                    .and_then(|j| j.array_remainder())
                else {
                    continue;
                };
                // The remainder keeps one task at least: its last is cancelled as a job.
                let (mut drop, mut left) = (Vec::new(), Vec::new());
                let mut keeps = rest.pending.len();
                for task in spec.tasks.iter() {
                    if keeps > 1 && rest.pending.contains(task) {
                        drop.push(task);
                        keeps -= 1;
                    } else {
                        left.push(task);
                    }
                }
                if drop.is_empty() {
                    continue;
                }
                dropped.extend(drop.iter().map(|t| (format!("{array}_{t}"), Err(String::new()))));
                self.diag.canceled += drop.len() as u64;
                self.record(Record::ArrayDrop { array, tasks: drop });
                self.core.handle(Event::Updated(self.sched_job(&self.durable.jobs[&array])));
                // The rest go on as named; none left, the target is done.
                target.tasks =
                    (!left.is_empty()).then(|| left.iter().map(u32::to_string).collect::<Vec<_>>().join(","));
                if target.tasks.is_none() {
                    target.job_id = 0;
                }
            }
            req.targets.retain(|t| t.job_id != 0);
        }
        let named = req.job_ids.is_empty() && req.targets.is_empty() && dropped.is_empty();
        let ids: Vec<(String, Result<JobId, String>)> = if named {
            self.select_jobs(&req).into_iter().map(|id| (String::new(), Ok(id))).collect()
        } else if filtered {
            let sel = self.select_jobs(&req);
            self.resolve(&req.job_ids, &req.targets, false)
                .into_iter()
                .filter(|(_, r)| r.as_ref().is_ok_and(|i| sel.contains(i)))
                .collect()
        } else {
            self.resolve(&req.job_ids, &req.targets, true)
        };
        let t = now();
        for (target, id) in dropped.into_iter().chain(ids) {
            let id = match id {
                Ok(id) => id,
                Err(e) => {
                    // (A task dropped from its array above: done, with no error.)
                    results.push(v1::CancelResult { job_id: 0, error: e, target });
                    continue;
                }
            };
            let err = |m: &str| v1::CancelResult { job_id: id, error: m.to_string(), target: target.clone() };
            let Some(j) = self.durable.jobs.get(&id).cloned() else {
                results.push(err("Invalid job id specified"));
                continue;
            };
            if !self.can_modify(&j, caller) {
                results.push(err("Access/permission denied"));
                continue;
            }
            if !j.status.state.is_finished() && j.spec.cron().is_some() {
                if !req.cron {
                    results.push(err(cron::CANCEL_NEEDS_CRON));
                    continue;
                }
                // Ended for good (not only signalled): its entry is disabled.
                let ends = req.signal == 0 || (req.signal == libc_sigkill() && !req.batch_only);
                if ends && j.status.state != JobState::Completing {
                    self.disable_cron_entry(id);
                }
            }
            match j.status.state {
                s if s.is_finished() => results.push(err("Job/step already completing or completed")),
                JobState::Pending => {
                    if req.signal != 0 && req.signal != libc_sigkill() {
                        results.push(err("Job is pending execution"));
                        continue;
                    }
                    self.end_pending(id, Some(caller.uid), PendingReason::None, t);
                    self.diag.canceled += 1;
                    results.push(err(""));
                }
                _ => {
                    // SIGKILL to the whole job cancels it, as no signal does (Slurm's
                    // job_signal); other signals reach only its steps unless --batch (the batch
                    // shell only) or --full (everything) says otherwise.
                    let terminate = req.signal == 0 || (req.signal == libc_sigkill() && !req.batch_only);
                    if req.batch_only && !j.batch {
                        results.push(err("Job script not specified"));
                        continue;
                    }
                    if terminate {
                        if j.status.state == JobState::Completing {
                            results.push(err("Job/step already completing or completed"));
                            continue;
                        }
                        let mut st = j.status.clone();
                        st.cancelled_by = Some(caller.uid);
                        self.diag.canceled += 1;
                        if !j.batch {
                            // Nothing on a node ends an allocation: it ends now, and its
                            // steps are terminated.
                            self.finish(id, st, "CANCELLED", t);
                            results.push(err(""));
                            continue;
                        }
                        st.state = JobState::Completing;
                        self.set_status(id, st);
                    }
                    let step = if req.batch_only { Some(BATCH_STEP) } else { None };
                    let signal = if terminate { 0 } else { req.signal };
                    let steps_only = !terminate && !req.batch_only && !req.full;
                    for n in Self::busy_nodes(&j) {
                        if steps_only {
                            self.signal_steps(&n, id, signal);
                        } else {
                            self.signal_node(&n, id, step, signal, terminate);
                        }
                    }
                    results.push(err(""));
                }
            }
        }
        v1::CancelReply { results }
    }

    /// A pending job ends `CANCELLED` without running (by `by`, or by the scheduler).
    pub(super) fn end_pending(&mut self, id: JobId, by: Option<u32>, reason: PendingReason, t: i64) {
        self.end_pending_as(id, by, (JobState::Cancelled, 0), reason, t);
    }

    /// Ends a pending job in `state` with a raw wait status (its start and end now, as Slurm
    /// records them).
    pub(super) fn end_pending_as(
        &mut self,
        id: JobId,
        by: Option<u32>,
        (state, exit_status): (JobState, i32),
        reason: PendingReason,
        t: i64,
    ) {
        let Some(j) = self.durable.jobs.get(&id) else { return };
        let mut st = j.status.clone();
        st.cancelled_by = by;
        st.state = state;
        st.end_time = t;
        st.start_time = t;
        st.reason = reason;
        st.exit_status = exit_status;
        self.set_status(id, st);
        self.core.handle(Event::Ended { job: id, outcome: Outcome::Failed });
        self.purge_queue.insert((t, id));
        let job = self.durable.jobs.get(&id).cloned().expect("invariant: exists");
        self.notify(&job);
    }

    pub(super) fn job_control(
        &mut self,
        req: v1::JobControlRequest,
        caller: Caller,
    ) -> Result<v1::JobControlReply, Status> {
        let mut results = Vec::new();
        let named = self.resolve(&req.job_ids, &req.targets, true);
        if req.action == "top" {
            let error = match named.into_iter().map(|(_, id)| id).collect::<Result<Vec<_>, _>>() {
                Ok(ids) => self.set_top(&ids, caller).err().unwrap_or_default(),
                Err(e) => e,
            };
            return Ok(v1::JobControlReply {
                results: vec![v1::CancelResult { job_id: 0, error, target: String::new() }],
            });
        }
        let mut array_ok: HashMap<JobId, bool> = HashMap::new();
        let mut array_errors = Vec::new();
        for (target, id) in named {
            let (job_id, error) = match id {
                Ok(id) => (id, self.job_control_one(&req, id, caller).err().unwrap_or_default()),
                Err(e) => (0, e),
            };
            // A whole array is held, released or updated where that applies (its pending
            // tasks); its ended tasks are no error unless nothing of it applied.
            let whole = req.job_ids.iter().chain(req.targets.iter().filter(|t| t.tasks.is_none()).map(|t| &t.job_id));
            let array = self.durable.jobs.get(&job_id).and_then(|j| j.array.as_ref()).map(|a| a.array_job_id);
            if let Some(a) = array.filter(|a| whole.clone().any(|w| w == a)) {
                *array_ok.entry(a).or_default() |= error.is_empty();
                if !error.is_empty() {
                    array_errors.push((a, v1::CancelResult { job_id, error, target }));
                }
                continue;
            }
            results.push(v1::CancelResult { job_id, error, target });
        }
        for (a, r) in array_errors {
            if !array_ok.get(&a).copied().unwrap_or(false) {
                results.push(r);
            }
        }
        Ok(v1::JobControlReply { results })
    }

    /// The records a request names, each with the id as the user wrote it. A plain id that
    /// is an array's names every record of the array; `N_M` names one task, which `split`
    /// takes out of the array's pending remainder into a record of its own (so it can be
    /// held, updated or cancelled alone, as Slurm does).
    pub(super) fn resolve(
        &mut self,
        job_ids: &[u32],
        targets: &[v1::JobTarget],
        split: bool,
    ) -> Vec<(String, Result<JobId, String>)> {
        let mut out = Vec::new();
        let mut tasks: Option<HashMap<(JobId, u32), JobId>> = None;
        let plain = job_ids.iter().map(|&id| (id, None)).chain(targets.iter().map(|t| (t.job_id, t.tasks.as_deref())));
        for (id, expr) in plain.collect::<Vec<_>>() {
            let Some(expr) = expr else {
                let members: Vec<&Arc<Job>> = self.durable.jobs.values().filter(|j| j.in_array(id)).collect();
                if members.is_empty() {
                    out.push((id.to_string(), Ok(id)));
                }
                for j in members {
                    let label = match j.array_task() {
                        Some((a, t)) => format!("{a}_{t}"),
                        None => id.to_string(),
                    };
                    out.push((label, Ok(j.id)));
                }
                continue;
            };
            let Ok(spec) = drover_model::array::ArraySpec::parse(expr) else {
                out.push((format!("{id}_{expr}"), Err("Invalid job id specified".into())));
                continue;
            };
            let index = tasks.get_or_insert_with(|| {
                self.durable.jobs.values().filter_map(|j| j.array_task().map(|at| (at, j.id))).collect()
            });
            let mut wanted = Vec::new();
            for task in spec.tasks.iter() {
                wanted.push((task, index.get(&(id, task)).copied()));
            }
            for (task, known) in wanted {
                let label = format!("{id}_{task}");
                let r = match known {
                    Some(j) => Ok(j),
                    None if split => self.split_task(id, task).ok_or_else(|| "Invalid job id specified".to_string()),
                    None => Err("Invalid job id specified".to_string()),
                };
                out.push((label, r));
            }
        }
        out
    }

    /// Takes pending task `task` out of array `array`'s remainder into a record of its own.
    pub(super) fn split_task(&mut self, array: JobId, task: u32) -> Option<JobId> {
        let rest = self.durable.jobs.get(&array)?.array_remainder()?;
        if !rest.pending.contains(task) {
            return None;
        }
        let last = rest.pending.len() == 1;
        let id = if last { array } else { self.durable.next_job_id };
        self.record(Record::ArraySplit { array, task, id });
        self.core.handle(Event::Updated(self.sched_job(&self.durable.jobs[&array])));
        if !last {
            self.core.handle(Event::Submitted(self.sched_job(&self.durable.jobs[&id])));
        }
        Some(id)
    }

    pub(super) fn job_control_one(
        &mut self,
        req: &v1::JobControlRequest,
        id: JobId,
        caller: Caller,
    ) -> Result<(), String> {
        let j = self.durable.jobs.get(&id).cloned().ok_or("Invalid job id specified")?;
        if !self.can_modify(&j, caller) {
            return Err("Access/permission denied".into());
        }
        if j.spec.cron().is_some() {
            return Err(cron::NO_SCONTROL.into());
        }
        let mut st = j.status.clone();
        match req.action.as_str() {
            "hold" | "uhold" => {
                if j.status.state.is_finished() {
                    return Err(ALREADY_DONE.into());
                }
                if j.status.state != JobState::Pending {
                    return Err("Job is no longer pending execution".into());
                }
                st.hold =
                    Some(if req.action == "hold" && self.operator(caller) { HoldKind::Admin } else { HoldKind::User });
                self.set_status(id, st);
                self.core.handle(Event::Updated(self.sched_job(&self.durable.jobs[&id])));
            }
            "release" => {
                if j.status.state.is_finished() {
                    return Err(ALREADY_DONE.into());
                }
                if j.status.state != JobState::Pending {
                    // Nothing holds a started job: Slurm's release of one succeeds, changing
                    // nothing.
                    return Ok(());
                }
                if matches!(j.status.hold, Some(HoldKind::Admin | HoldKind::LaunchFailed)) && !self.operator(caller) {
                    return Err("Access/permission denied".into());
                }
                st.hold = None;
                if !self.cfg.priority.multifactor && !st.priority_set {
                    st.priority = u64::from(self.next_basic_priority(j.spec.unpack().nice));
                }
                self.set_status(id, st);
                self.core.handle(Event::Updated(self.sched_job(&self.durable.jobs[&id])));
            }
            "requeue" | "requeuehold" => {
                if !j.batch || matches!(j.status.state, JobState::Pending | JobState::Completing) {
                    return Err("Only batch jobs that are running, suspended or finished can be requeued".into());
                }
                if j.spec.unpack().requeue == Some(false) {
                    return Err("Requeue of this job is disabled (--no-requeue)".into());
                }
                if req.action == "requeuehold" {
                    // Held as `scontrol hold` would hold it: by an administrator or its user.
                    st.hold = Some(if self.operator(caller) { HoldKind::Admin } else { HoldKind::User });
                }
                if j.status.state.is_finished() {
                    // A finished job goes straight back to the queue.
                    st.state_desc = "REQUEUE".into();
                    self.finish(id, st, "REQUEUE", now());
                    return Ok(());
                }
                let was_suspended = j.status.state == JobState::Suspended;
                st.state = JobState::Completing;
                st.state_desc = "REQUEUE".into();
                self.set_status(id, st);
                if was_suspended {
                    for n in Self::busy_nodes(&j) {
                        let msg = v1::Signal { job_id: id, resume: true, ..Default::default() };
                        self.outbox.push((n, controller_to_node::Msg::Signal(msg)));
                    }
                }
                for n in Self::busy_nodes(&j) {
                    let msg = v1::Signal { job_id: id, terminate: true, requeue: true, ..Default::default() };
                    self.outbox.push((n, controller_to_node::Msg::Signal(msg)));
                }
            }
            "suspend" | "resume" => {
                if !self.operator(caller) {
                    return Err("Access/permission denied".into());
                }
                if req.action == "resume" && self.core.suspended_by_preemption(id) {
                    return Err("Job was suspended by preemption: it resumes when its resources are free".into());
                }
                self.suspend_or_resume(id, req.action == "suspend", now())?;
            }
            "update" if j.status.state.is_finished() => return Err(ALREADY_DONE.into()),
            "update" => self.update_job(&j, st, &req.fields, caller)?,
            other => return Err(format!("unknown job action {other}")),
        }
        Ok(())
    }

    /// `scontrol top`: moves jobs ahead of the other waiting jobs of the same user, account,
    /// QoS and (single) partition, in the order given, by trading priority through nice
    /// values, as Slurm's `_set_top` does: the listed jobs take the highest priorities of
    /// that group, and the rest give up, between them, what the listed jobs gained.
    pub(super) fn set_top(&mut self, ids: &[JobId], caller: Caller) -> Result<(), String> {
        const DENIED: &str = "Access/permission denied";
        if !self.operator(caller) && !self.cfg.enable_user_top {
            return Err(DENIED.into());
        }
        let mut tops: Vec<Arc<Job>> = Vec::new();
        let mut soft = None;
        for &id in ids {
            let j = self.durable.jobs.get(&id).cloned().ok_or("Invalid job id specified")?;
            if !self.operator(caller) && j.uid != caller.uid {
                return Err(DENIED.into());
            }
            if j.status.state != JobState::Pending {
                soft = Some("Job is no longer pending execution");
                continue;
            }
            if j.spec.unpack().partitions.len() > 1 {
                return Err("Requested partition configuration not available now".into());
            }
            if j.status.hold.is_some() {
                soft = Some("Job is in held state, pending scheduler release");
                continue;
            }
            if !tops.iter().any(|t| t.id == id) {
                tops.push(j);
            }
        }
        let Some(first) = tops.first().cloned() else {
            return soft.map_or(Ok(()), |e| Err(e.into()));
        };
        let group = |j: &Job| {
            let s = j.spec.unpack();
            (s.uid, s.partitions, s.account, s.qos)
        };
        let key = group(&first);
        let others: Vec<Arc<Job>> = self
            .durable
            .jobs
            .values()
            .filter(|j| {
                j.status.state == JobState::Pending
                    && j.status.hold.is_none()
                    && j.status.priority > 1
                    && !tops.iter().any(|t| t.id == j.id)
                    && group(j) == key
            })
            .cloned()
            .collect();
        let mut prios: Vec<u64> = tops.iter().chain(others.iter()).map(|j| j.status.priority).collect();
        prios.sort_unstable_by(|a, b| b.cmp(a));
        let mut prios = prios.into_iter();
        let nice_of = |v: i64| v.clamp(-drover_model::job::NICE_MAX, drover_model::job::NICE_MAX) as i32;
        let mut last: Option<u64> = None;
        let mut total: i64 = 0;
        let mut changed: Vec<(JobId, u64, i32)> = Vec::new();
        for j in &tops {
            let mut next = prios.next().expect("one priority per listed job");
            if let Some(l) = last.filter(|&l| l == next && l > 2) {
                next = l - 1;
            }
            last = Some(next);
            let delta = next as i64 - j.status.priority as i64;
            let nice = i64::from(j.spec.unpack().nice);
            // Slurm keeps nice offset by 2^31 and never takes it below 0.
            let delta_nice = delta.min(nice + (1 << 31));
            total += delta_nice;
            changed.push((j.id, next, nice_of(nice - delta_nice)));
        }
        let last = last.expect("at least one listed job");
        let mut left = others.len() as i64;
        for j in &others {
            let mut delta = total / left;
            let mut next = j.status.priority as i64 - delta;
            if next >= last as i64 {
                next = last as i64 - 1;
                delta = j.status.priority as i64 - next;
            }
            total -= delta;
            left -= 1;
            changed.push((j.id, next.max(1) as u64, nice_of(i64::from(j.spec.unpack().nice) + delta)));
        }
        for (id, priority, nice) in changed {
            let j = &self.durable.jobs[&id];
            let mut spec = j.spec.unpack();
            let mut status = j.status.clone();
            spec.nice = nice;
            status.priority = priority;
            self.record(Record::Update { id, spec, status });
            self.core.handle(Event::Updated(self.sched_job(&self.durable.jobs[&id])));
        }
        Ok(())
    }

    /// Stops (SIGSTOP) or continues every process of a job (`scontrol suspend|resume`, or
    /// preemption); time suspended does not count toward its limit.
    pub(super) fn suspend_or_resume(&mut self, id: JobId, suspend: bool, t: i64) -> Result<(), String> {
        let j = self.durable.jobs.get(&id).cloned().ok_or("Invalid job id specified")?;
        let mut st = j.status.clone();
        match (j.status.state, suspend) {
            (JobState::Pending, _) => return Err("Job is pending execution".into()),
            // Suspending a suspended job changes nothing, as in Slurm.
            (JobState::Suspended, true) => return Ok(()),
            (JobState::Running, true) => {
                // Its run so far counts; its time suspended will not.
                self.credit_run(&j, j.status.start_time.max(self.fs.usage.at), t);
                st.state = JobState::Suspended;
                st.pre_suspend_secs = t - st.start_time - st.suspended_secs;
                st.suspend_time = t;
                self.deadlines.retain(|&(_, d)| d != id);
            }
            (JobState::Suspended, false) => {
                if self.cfg.priority.multifactor {
                    self.fs.credited.insert(id, t);
                }
                st.state = JobState::Running;
                st.suspended_secs += t - st.suspend_time;
                st.suspend_time = t;
            }
            (_, false) => return Err("Job is not suspended".into()),
            _ => return Err("Job/step already completing or completed".into()),
        }
        self.set_status(id, st);
        let job = self.durable.jobs.get(&id).cloned().expect("invariant: exists");
        if !suspend {
            if let Some(d) = Self::deadline(&job) {
                self.deadlines.insert((d, id));
            }
        }
        for n in Self::busy_nodes(&job) {
            let msg = v1::Signal { job_id: id, suspend, resume: !suspend, ..Default::default() };
            self.outbox.push((n, controller_to_node::Msg::Signal(msg)));
        }
        self.notify(&job);
        Ok(())
    }

    pub(super) fn update_job(
        &mut self,
        j: &Job,
        mut st: JobStatus,
        fields: &[v1::KeyValue],
        caller: Caller,
    ) -> Result<(), String> {
        let mut spec = j.spec.unpack();
        let pending = j.status.state == JobState::Pending;
        let mut throttle = None;
        // Slurm applies a user's lowered priority but says it will not last.
        let mut transient = None;
        let mut reprioritize = false;
        for kv in fields {
            let v = kv.value.as_str();
            match kv.key.to_ascii_lowercase().as_str() {
                "nice" => {
                    if st.state.is_finished() {
                        return Err("Job/step already completing or completed".into());
                    }
                    let n: i32 = v.parse().map_err(|_| "Invalid nice value".to_string())?;
                    if n == spec.nice || st.priority_set {
                        // Unchanged, or a fixed priority that nice does not move (as Slurm).
                        continue;
                    }
                    if n < 0 && !self.operator(caller) {
                        return Err("Access/permission denied".into());
                    }
                    if !self.cfg.priority.multifactor {
                        st.priority = (st.priority as i64 + i64::from(spec.nice) - i64::from(n)).max(2) as u64;
                    }
                    spec.nice = n;
                    reprioritize = true;
                }
                "priority" => {
                    if st.state.is_finished() {
                        return Err("Job/step already completing or completed".into());
                    }
                    let p: u32 = v.parse().map_err(|_| "Invalid Priority value".to_string())?;
                    if u64::from(p) == st.priority {
                        continue;
                    }
                    if !self.operator(caller) && u64::from(p) > st.priority {
                        return Err("Access/permission denied".into());
                    }
                    if p == 0 {
                        if !pending {
                            return Err("Job is no longer pending execution".into());
                        }
                        st.hold = Some(if self.operator(caller) { HoldKind::Admin } else { HoldKind::User });
                        continue;
                    }
                    spec.nice = 0;
                    st.priority = u64::from(p);
                    if self.operator(caller) {
                        st.priority_set = true;
                    } else {
                        transient = Some("Changes to job priority are not persistent, change nice instead".to_string());
                    }
                }
                "arraytaskthrottle" => {
                    if j.array.is_none() {
                        return Err("Job is not an array job".into());
                    }
                    throttle = Some(v.parse::<u32>().map_err(|_| "Invalid ArrayTaskThrottle value".to_string())?);
                }
                "timelimit" => {
                    let l = drover_model::duration::parse_time_limit(v)
                        .map_err(|_| "Invalid time limit specification".to_string())?;
                    if !pending {
                        if !self.operator(caller) && (l.is_none() || st.time_limit.is_some_and(|c| l.unwrap_or(0) > c))
                        {
                            return Err("Access/permission denied".into());
                        }
                        st.time_limit = l;
                    }
                    spec.time_limit = Some(l);
                }
                "partition" => {
                    if !pending {
                        return Err("Job is no longer pending execution".into());
                    }
                    let parts: Vec<String> = v.split(',').map(String::from).collect();
                    if parts.iter().any(|p| self.cfg.partition(p).is_none()) {
                        return Err("Invalid partition name specified".into());
                    }
                    st.partition = intern(&parts[0]);
                    spec.partitions = parts;
                }
                "jobname" | "name" => spec.name = v.to_string(),
                "comment" => spec.comment = Some(v.to_string()),
                "numnodes" | "minnodes" => {
                    if !pending {
                        return Err("Job is no longer pending execution".into());
                    }
                    let (lo, hi) = match v.split_once('-') {
                        Some((a, b)) => (a, Some(b)),
                        None => (v, None),
                    };
                    spec.min_nodes = Some(lo.parse().map_err(|_| "Invalid node count specification".to_string())?);
                    spec.max_nodes = match hi {
                        Some(h) => Some(h.parse().map_err(|_| "Invalid node count specification".to_string())?),
                        None => spec.min_nodes,
                    };
                }
                "reqnodelist" | "nodelist" => {
                    let hl = Hostlist::parse(v).map_err(|e| e.to_string())?;
                    spec.nodelist = hl.names();
                }
                "excnodelist" => spec.exclude = Hostlist::parse(v).map_err(|e| e.to_string())?.names(),
                "features" => spec.constraint = if v.is_empty() { None } else { Some(v.to_string()) },
                "dependency" => {
                    spec.dependency =
                        if v.is_empty() { Default::default() } else { drover_model::job::parse_dependency(v)? }
                }
                "starttime" | "begintime" => {
                    spec.begin_time = Some(v.parse::<i64>().map_err(|_| "Invalid time specification".to_string())?);
                }
                other => return Err(format!("Update of {other} is not supported")),
            }
        }
        let id = j.id;
        if reprioritize && pending && self.cfg.priority.multifactor {
            let (p, f) = self.multifactor_priority(&spec, st.eligible_time, now());
            self.fs.prio.insert(id, drover_sched::priority::weighted(&self.cfg.priority, &f));
            st.priority = u64::from(p);
        }
        let new_end = (st.state == JobState::Running && st.time_limit != j.status.time_limit)
            .then(|| st.time_limit.map_or(0, |l| st.start_time + l as i64));
        self.record(Record::Update { id, spec, status: st });
        if let Some(end) = new_end {
            // The supervisors enforce the limit (and --signal before it): tell them; an
            // allocation without a batch script is timed here.
            let job = self.durable.jobs[&id].clone();
            self.deadlines.retain(|&(_, j)| j != id);
            if let Some(d) = Self::deadline(&job) {
                self.deadlines.insert((d, id));
            }
            for n in Self::busy_nodes(&job) {
                let msg = v1::Signal { job_id: id, end_time: Some(end), ..Default::default() };
                self.outbox.push((n, controller_to_node::Msg::Signal(msg)));
            }
        }
        if let (Some(throttle), Some(a)) = (throttle, &j.array) {
            let array = a.array_job_id;
            self.record(Record::ArrayThrottle { array, throttle });
            let waiting: Vec<Arc<Job>> = self
                .durable
                .jobs
                .values()
                .filter(|m| m.in_array(array) && m.status.state == JobState::Pending && m.id != id)
                .cloned()
                .collect();
            for m in waiting {
                self.core.handle(Event::Updated(self.sched_job(&m)));
            }
        }
        if pending {
            self.core.handle(Event::Updated(self.sched_job(&self.durable.jobs[&id])));
        }
        transient.map_or(Ok(()), Err)
    }
}
