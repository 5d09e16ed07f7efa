//! Steps: creating, placing, launching, sstat/sattach, and their end.

use super::*;

impl Owner {
    /// The job is over (or requeued): what still runs of its steps is terminated, and step
    /// requests waiting for room in it fail.
    pub(super) fn end_steps_of(&mut self, id: JobId, st: &JobStatus) {
        self.deadlines.retain(|&(_, j)| j != id);
        for w in self.step_waiters.remove(&id).unwrap_or_default() {
            self.reply(w.reply, Err(Status::failed_precondition("Job/step already completing or completed")));
        }
        let Some(j) = self.durable.jobs.get(&id).cloned() else { return };
        // Each step by its id (SIGTERM, then KillWait): a job-wide terminate on a node where
        // nothing of the job runs any more is answered "ended, CANCELLED" for the job, and a
        // requeued job relaunched there at once would take that answer as its new run's.
        let mut units: Vec<(String, StepId)> = Vec::new();
        for s in j.running_steps() {
            for n in s.nodes_running.iter().filter(|n| !st.nodes_running.contains(n)) {
                units.push((n.clone(), s.id));
            }
        }
        for (n, step) in units {
            self.signal_node(&n, id, Some(step), libc_sigterm(), true);
        }
    }

    /// sstat: asks every node running the steps asked about for a sample now; the answer
    /// goes out when all have answered (or after two seconds, with what came).
    pub(super) fn step_stat(&mut self, req: v1::StepStatRequest, caller: Caller, reply: Reply<v1::StepStatReply>) {
        let Some(j) = self.durable.jobs.get(&req.job_id).cloned() else {
            self.reply(reply, Err(Status::not_found("Invalid job id specified")));
            return;
        };
        if !self.can_modify(&j, caller) {
            self.reply(reply, Err(Status::permission_denied("Access/permission denied")));
            return;
        }
        let mut units: Vec<(Option<u32>, String, Vec<String>)> = Vec::new();
        if matches!(j.status.state, JobState::Running | JobState::Suspended) {
            let steps = j.running_steps();
            let batch = || (None, "batch".to_string(), j.status.nodes_running.clone());
            if req.batch {
                if j.batch {
                    units.push(batch());
                }
            } else if let Some(id) = req.step_id {
                if let Some(s) = steps.iter().find(|s| s.id == id) {
                    units.push((Some(id), drover_model::step::step_name(id), s.nodes_running.clone()));
                }
            } else {
                if req.all_steps && j.batch {
                    units.push(batch());
                }
                let mut ids: Vec<&crate::state::Step> = steps.iter().collect();
                ids.sort_by_key(|s| s.id);
                // Without --allsteps, the first running step (the batch script's if none).
                let take = if req.all_steps { ids.len() } else { 1 };
                for s in ids.into_iter().take(take) {
                    units.push((Some(s.id), drover_model::step::step_name(s.id), s.nodes_running.clone()));
                }
                if units.is_empty() && j.batch {
                    units.push(batch());
                }
            }
        }
        let id = self.next_stat;
        self.next_stat += 1;
        let mut waiting = 0;
        let mut steps = BTreeMap::new();
        for (step_id, name, nodes) in units {
            steps.insert(name.clone(), Vec::new());
            for n in nodes {
                let part = self.next_stat;
                self.next_stat += 1;
                self.stat_parts.insert(part, (id, name.clone()));
                let msg = v1::StatRequest { req_id: part, job_id: j.id, step_id };
                self.outbox.push((n, controller_to_node::Msg::Stat(msg)));
                waiting += 1;
            }
        }
        let pending = PendingStat { reply, waiting, steps, deadline: now() + 2 };
        if waiting == 0 {
            self.answer_stat(pending);
        } else {
            self.stats.insert(id, pending);
        }
    }

    /// sattach: every node running the step connects its I/O to `io_addr` too.
    pub(super) fn attach_step(
        &mut self,
        req: v1::AttachRequest,
        caller: Caller,
    ) -> Result<v1::StepCreateReply, Status> {
        let j =
            self.durable.jobs.get(&req.job_id).cloned().ok_or_else(|| Status::not_found("Invalid job id specified"))?;
        if !self.can_modify(&j, caller) {
            return Err(Status::permission_denied("Access/permission denied"));
        }
        let steps = j.running_steps();
        let s =
            steps.iter().find(|s| s.id == req.step_id).ok_or_else(|| Status::not_found("Invalid job id specified"))?;
        // No address: only the step's layout is wanted (`sattach --layout`).
        let io_key = self.io_key(j.id, Some(s.id), j.status.submit_time);
        for n in s.nodes_running.iter().filter(|_| !req.io_addr.is_empty()) {
            let req = v1::AttachRequest { io_key: io_key.clone().into(), ..req.clone() };
            self.outbox.push((n.clone(), controller_to_node::Msg::Attach(req)));
        }
        Ok(v1::StepCreateReply {
            step: Some(crate::view::step_info(&j, s)),
            job: Some(crate::view::job_info(&j)),
            io_key: io_key.into(),
        })
    }

    pub(super) fn stat_reply(&mut self, r: v1::StatReply) {
        let Some((id, step)) = self.stat_parts.remove(&r.req_id) else { return };
        let Some(p) = self.stats.get_mut(&id) else { return };
        p.steps.entry(step).or_default().extend(r.tasks);
        p.waiting -= 1;
        if p.waiting == 0 {
            let p = self.stats.remove(&id).expect("invariant: just found");
            self.answer_stat(p);
        }
    }

    pub(super) fn answer_stat(&mut self, p: PendingStat) {
        let mut steps: Vec<v1::StepUsage> = p
            .steps
            .into_iter()
            .map(|(step, mut tasks)| {
                tasks.sort_by_key(|t| t.task);
                v1::StepUsage { step, tasks }
            })
            .collect();
        // The batch step first, then steps by number, as sstat lists them.
        steps.sort_by_key(|s| (s.step != "batch", drover_model::step::parse_step(&s.step).unwrap_or(0)));
        self.reply(p.reply, Ok(v1::StepStatReply { steps }));
    }

    pub(super) fn create_step(
        &mut self,
        spec: v1::StepSpec,
        wait: bool,
        caller: Caller,
        reply: Reply<v1::StepCreateReply>,
    ) {
        match self.try_step(&spec, caller) {
            Err(s) if wait && s.code() == tonic::Code::ResourceExhausted => {
                self.step_waiters.entry(spec.job_id).or_default().push(WaitingStep { spec, caller, reply });
            }
            r => self.reply(reply, r),
        }
    }

    /// Places a step in its job's allocation, journals it and launches it on its nodes.
    /// Busy (other steps hold what it needs) is `RESOURCE_EXHAUSTED`; more nodes than the
    /// job has is `OUT_OF_RANGE` (srun words that one differently).
    pub(super) fn try_step(&mut self, spec: &v1::StepSpec, caller: Caller) -> Result<v1::StepCreateReply, Status> {
        use drover_sched::step::{place_step, StepRefusal};
        let j = self
            .durable
            .jobs
            .get(&spec.job_id)
            .cloned()
            .ok_or_else(|| Status::not_found("Invalid job id specified"))?;
        if !self.can_modify(&j, caller) {
            return Err(Status::permission_denied("Access/permission denied"));
        }
        if self.ctld_prolog.contains(&spec.job_id) {
            // Its PrologSlurmctld still runs: the step waits, as for busy resources.
            return Err(Status::resource_exhausted("Job is configuring"));
        }
        match j.status.state {
            JobState::Running => {}
            JobState::Pending => return Err(Status::failed_precondition("Job is pending execution")),
            _ => return Err(Status::failed_precondition("Job/step already completing or completed")),
        }
        let shape = drover_proto::step_shape_from_wire(spec).map_err(Status::invalid_argument)?;
        let alloc = j.status.alloc.as_deref().ok_or_else(|| Status::internal("running job without allocation"))?;
        let running: Vec<&drover_model::step::StepLayout> = j.running_steps().iter().map(|s| &s.layout).collect();
        let layout = place_step(alloc, &running, &shape).map_err(|r| match r {
            StepRefusal::Busy => Status::resource_exhausted(r.message()),
            StepRefusal::NodeCount { .. } => Status::out_of_range(r.message()),
            _ => Status::invalid_argument(r.message()),
        })?;
        let step = Step {
            id: j.steps.as_ref().map_or(0, |s| s.next_id),
            name: spec.name.clone(),
            nodes_running: layout.node_names(),
            layout,
            start_time: now(),
            time_limit: spec.time_limit_secs,
            srun_host: spec.srun_host.clone(),
            srun_pid: spec.srun_pid,
            submit_line: spec.submit_line.clone(),
            usage: Vec::new(),
            exit_status: 0,
            how: String::new(),
            cancelled: false,
        };
        self.record(Record::StepSet { id: j.id, step: step.clone() });
        let job = self.durable.jobs.get(&j.id).cloned().expect("invariant: just written");
        let info = crate::view::job_info(&job);
        let sinfo = crate::view::step_info(&job, &step);
        let io_key = if spec.io_addr.is_empty() {
            Vec::new()
        } else {
            self.io_key(job.id, Some(step.id), job.status.submit_time)
        };
        for (idx, sn) in step.layout.nodes.iter().enumerate() {
            // A step's nodes are numbered within the step (SLURM_NODEID).
            let step = v1::StepLaunch { step: Some(sinfo.clone()), spec: Some(spec.clone()) };
            let launch = self.launch_msg(&info, (&spec.io_addr, &io_key), idx, sn.task_ids.clone(), Some(step));
            self.outbox.push((sn.node.clone(), controller_to_node::Msg::Launch(launch)));
        }
        Ok(v1::StepCreateReply { step: Some(sinfo), job: Some(info), io_key: io_key.into() })
    }

    /// Step requests that waited for room in `job` try again (a step of it ended).
    pub(super) fn retry_waiting_steps(&mut self, job: JobId) {
        for w in self.step_waiters.remove(&job).unwrap_or_default() {
            if w.reply.is_closed() {
                continue;
            }
            let r = self.try_step(&w.spec, w.caller);
            match r {
                Err(s) if s.code() == tonic::Code::ResourceExhausted => {
                    self.step_waiters.entry(job).or_default().push(w);
                }
                r => self.reply(w.reply, r),
            }
        }
    }

    /// A node's part of a step ended; the step ends when every node's has.
    pub(super) fn step_ended_on(&mut self, node: &str, step_id: StepId, e: v1::EndedJob) {
        let Some(j) = self.durable.jobs.get(&e.job_id).cloned() else { return };
        let Some(mut step) = j.step(step_id).cloned() else { return };
        if !step.nodes_running.iter().any(|n| n == node) {
            return;
        }
        step.nodes_running.retain(|n| n != node);
        if drover_model::job::exit_rank(e.exit_status) > drover_model::job::exit_rank(step.exit_status) {
            step.exit_status = e.exit_status;
        }
        if !e.usage.is_empty() {
            step.usage = crate::acct::add_usage(&step.usage, e.usage);
        }
        if step.how.is_empty() && !e.how.is_empty() {
            step.how = e.how.clone();
        }
        if !step.nodes_running.is_empty() {
            self.record(Record::StepSet { id: j.id, step });
            return;
        }
        let state = match step.how.as_str() {
            _ if step.cancelled => JobState::Cancelled,
            "CANCELLED" | "REQUEUE" => JobState::Cancelled,
            "TIMEOUT" => JobState::Timeout,
            "NODE_FAIL" => JobState::NodeFail,
            "OUT_OF_MEMORY" => JobState::OutOfMemory,
            "" if step.exit_status == 0 => JobState::Completed,
            _ => JobState::Failed,
        };
        let end = if e.end_time > 0 { e.end_time } else { now() };
        let mut info = crate::view::step_info(&j, &step);
        info.state = state.name().to_string();
        info.end_time = end;
        info.message = e.message;
        self.record(Record::StepEnd {
            id: j.id,
            step: step_id,
            state,
            exit_status: step.exit_status,
            end_time: end,
            usage: step.usage,
        });
        self.notify_step(info);
        self.retry_waiting_steps(j.id);
    }

    /// `scancel N.S` (or `N.batch`): the step is killed, or sent `signal`.
    pub(super) fn cancel_step(
        &mut self,
        t: &v1::JobTarget,
        signal: i32,
        graceful: bool,
        caller: Caller,
    ) -> v1::CancelResult {
        let step_id = t.step_id.unwrap_or(0);
        let whole = v1::JobTarget { job_id: t.job_id, tasks: t.tasks.clone(), step_id: None };
        let job_label = match &t.tasks {
            Some(task) => format!("{}_{task}", t.job_id),
            None => t.job_id.to_string(),
        };
        let target = format!("{job_label}.{}", drover_model::step::step_name(step_id));
        let result =
            |job_id: JobId, error: &str| v1::CancelResult { job_id, error: error.to_string(), target: target.clone() };
        let id = match self.resolve(&[], std::slice::from_ref(&whole), false).into_iter().next() {
            Some((_, Ok(id))) => id,
            _ => return result(0, "Invalid job id specified"),
        };
        let Some(j) = self.durable.jobs.get(&id).cloned() else { return result(id, "Invalid job id specified") };
        if !self.can_modify(&j, caller) {
            return result(id, "Access/permission denied");
        }
        if j.status.state.is_finished() {
            return result(id, "Job/step already completing or completed");
        }
        if step_id == BATCH_STEP {
            if !j.batch || j.status.state != JobState::Running {
                return result(id, "Invalid job id specified");
            }
            let sig = if signal == 0 { libc_sigkill() } else { signal };
            for n in j.status.nodes_running.clone() {
                self.signal_node(&n, id, Some(BATCH_STEP), sig, false);
            }
            return result(id, "");
        }
        let Some(step) = j.step(step_id).cloned() else { return result(id, "Invalid job id specified") };
        if signal != 0 {
            for n in &step.nodes_running {
                self.signal_node(n, id, Some(step_id), signal, false);
            }
            return result(id, "");
        }
        if step.cancelled {
            return result(id, "Job/step already completing or completed");
        }
        let mut step = step;
        step.cancelled = true;
        self.record(Record::StepSet { id, step: step.clone() });
        // srun ending its own step gracefully (SIGTERM first); scancel kills at once.
        let how = if graceful { libc_sigterm() } else { 0 };
        for n in &step.nodes_running {
            self.signal_node(n, id, Some(step_id), how, true);
        }
        if !graceful {
            let info = crate::view::step_info(&j, &step);
            self.notify_step(info);
        }
        result(id, "")
    }

    /// The holder of an allocation without a batch script (standalone srun, salloc) is
    /// done with it: the job ends with the status of what ran in it.
    pub(super) fn complete_job(&mut self, req: v1::CompleteRequest, caller: Caller) -> Result<v1::Empty, Status> {
        let j =
            self.durable.jobs.get(&req.job_id).cloned().ok_or_else(|| Status::not_found("Invalid job id specified"))?;
        if !self.can_modify(&j, caller) {
            return Err(Status::permission_denied("Access/permission denied"));
        }
        if j.batch {
            return Err(Status::failed_precondition("Only allocations without a batch script can be completed"));
        }
        match j.status.state {
            JobState::Running => {}
            JobState::Pending => {
                self.end_pending(j.id, Some(caller.uid), PendingReason::None, now());
                return Ok(v1::Empty {});
            }
            // Ended already (cancelled, timed out): nothing to do.
            _ => return Ok(v1::Empty {}),
        }
        let t = now();
        let mut st = j.status.clone();
        st.exit_status = req.exit_status;
        let timed_out = Self::deadline(&j).is_some_and(|d| d <= t);
        let how = if timed_out {
            "TIMEOUT"
        } else if req.how == "OUT_OF_MEMORY" {
            "OUT_OF_MEMORY"
        } else {
            ""
        };
        self.finish(j.id, st, how, t);
        Ok(v1::Empty {})
    }
}
