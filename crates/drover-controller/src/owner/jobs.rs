//! Jobs: submission, starting and launching them, and their end.

use super::*;

impl Owner {
    pub(super) fn submit(&mut self, spec: JobSpec, caller: Caller, test_only: bool) -> Result<v1::SubmitReply, Status> {
        let r = self.submit_checked(spec, caller, test_only);
        if let Err(e) = &r {
            // Slurm gives the job its id before these checks (the record is made, then
            // refused and dropped), so the next job's id is one more; those before it leave
            // the id unused. Kept in memory only, as nothing refers to it: a restart before
            // the next submission may give it again.
            const AFTER_ID: &[&str] = &[
                "Job dependency problem",
                "Invalid feature specification",
                "Requested node configuration is not available",
                "Requested reservation is invalid",
                "Access denied to requested reservation",
            ];
            if !test_only && AFTER_ID.contains(&e.message()) {
                self.durable.next_job_id = self.durable.next_job_id.saturating_add(1);
            }
        }
        r
    }

    fn submit_checked(
        &mut self,
        mut spec: JobSpec,
        caller: Caller,
        test_only: bool,
    ) -> Result<v1::SubmitReply, Status> {
        let mut admin_hold = false;
        if !self.operator(caller) {
            spec.uid = caller.uid;
            spec.gid = caller.gid;
            // Only administrators fix a priority or raise one (`--nice` below 0); a user's
            // `--priority=0` is a hold, anything else of theirs is ignored (as Slurm).
            if spec.nice < 0 {
                return Err(Status::invalid_argument("Invalid --nice value"));
            }
            if spec.priority == Some(0) {
                spec.hold = true;
            }
            spec.priority = None;
        } else if spec.priority == Some(0) {
            // An administrator's `--priority=0` is an administrator's hold.
            admin_hold = true;
            spec.hold = true;
            spec.priority = None;
        }
        spec.user = self.names.user(spec.uid);
        spec.group = self.names.group(spec.gid);
        if !fields_fit(&spec, self.cfg.max_script_size as usize) {
            return Err(Status::invalid_argument("Pathname of a file, directory or other parameter too long"));
        }
        if spec.script.contains('\0') {
            return Err(Status::invalid_argument(
                "The Slurm controller does not allow scripts that contain a NULL character",
            ));
        }
        if spec.partitions.is_empty() {
            match self.cfg.default_partition() {
                Some(p) => spec.partitions.push(p.name.clone()),
                None => return Err(Status::invalid_argument("No partition specified or system default partition")),
            }
        }
        check_times(&mut spec, now())?;
        for p in &spec.partitions {
            let Some(part) = self.cfg.partition(p) else {
                return Err(Status::invalid_argument("Invalid partition name specified"));
            };
            if let Some(allowed) = &part.allow_groups {
                let mine = self.names.groups_of(&spec.user, spec.gid);
                if spec.uid != 0 && !mine.iter().any(|g| allowed.contains(g)) {
                    return Err(Status::permission_denied("User's group not permitted to use this partition"));
                }
            }
        }
        if let Some(l) = &spec.licenses {
            // Every license named must exist, in no greater number than the cluster has.
            let known = |(name, n): &(String, u32)| self.cfg.licenses.iter().any(|(k, t)| k == name && n <= t);
            if !drover_model::job::parse_licenses(l).is_ok_and(|v| v.iter().all(known)) {
                return Err(Status::invalid_argument("Invalid license specification"));
            }
        }
        if let Some(c) = &spec.constraint {
            let Ok(parsed) = Constraint::parse(c) else {
                return Err(Status::invalid_argument("Invalid feature specification"));
            };
            // Node counts (`gpu*2`) need at least that many nodes, as Slurm raises them.
            let counted = parsed.counted_nodes();
            if counted > spec.min_nodes.unwrap_or(1) {
                spec.min_nodes = Some(counted);
                spec.max_nodes = spec.max_nodes.map(|m| m.max(counted));
            }
        }
        let asked =
            spec.gres.iter().chain(spec.gpus.iter()).chain(spec.gpus_per_task.iter()).chain(spec.gpus_per_node.iter());
        if asked.clone().any(|g| !self.cfg.gres_types.contains(&g.name)) {
            return Err(Status::invalid_argument("Invalid generic resource (gres) specification"));
        }
        for n in spec.nodelist.iter().chain(spec.exclude.iter()) {
            if self.cfg.node(n).is_none() {
                return Err(Status::invalid_argument("Invalid node name specified"));
            }
        }
        if spec.dependency.list.iter().any(|d| !self.dependency_target_known(d)) {
            return Err(Status::invalid_argument("Job dependency problem"));
        }
        if let Some(expr) = &spec.array {
            let a = drover_model::array::ArraySpec::parse(expr)
                .map_err(|_| Status::invalid_argument("Invalid job array specification"))?;
            if !spec.batch || a.tasks.max().is_none_or(|m| m >= self.cfg.max_array_size) {
                return Err(Status::invalid_argument("Invalid job array specification"));
            }
            spec.array = Some(a.canonical());
        }
        if self.cfg.accounting_storage.is_some() {
            let (account, qos) = crate::acct::resolve_account(
                &self.cfg,
                self.acct_admin.as_deref(),
                &spec.user,
                &spec.partitions[0],
                spec.account.as_deref(),
                spec.qos.as_deref(),
            )
            .map_err(Status::invalid_argument)?;
            spec.account = Some(account);
            spec.qos = Some(qos);
            if !test_only && self.over_submit_limit(&spec) {
                return Err(Status::invalid_argument(
                    "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)",
                ));
            }
        }
        if let (Some(n), Some(min)) = (spec.ntasks, spec.min_nodes) {
            if n < min {
                spec.min_nodes = Some(n.max(1));
                if spec.max_nodes.is_some_and(|m| m > n) {
                    spec.max_nodes = Some(n.max(1));
                }
            }
        }
        if let Some(r) = &spec.reservation {
            self.resv_admits(r, &spec.user, spec.account.as_deref())?;
        }
        if let Some(seg) = spec.segment {
            // A segment must divide the job's nodes (one larger than the job is ignored, as
            // Slurm ignores it).
            let nodes = spec.min_nodes.unwrap_or(1).max(1);
            if seg == 0 || (seg <= nodes && !nodes.is_multiple_of(seg)) {
                return Err(Status::invalid_argument("Requested topology configuration is not available"));
            }
        }
        if spec.switches.is_some() {
            // Waited for at most max_switch_wait (without a time given, that long).
            let most = self.cfg.max_switch_wait;
            spec.switch_wait = Some(spec.switch_wait.map_or(most, |w| w.min(most)));
        }
        let active = self.durable.jobs.len() as u32;
        if active >= self.cfg.max_job_count {
            return Err(Status::resource_exhausted("Slurm temporarily unable to accept job, sleeping and retrying"));
        }
        let t = now();
        let id = self.durable.next_job_id;
        let eligible = spec.begin_time.unwrap_or(t).max(t);
        let priority = match spec.priority {
            Some(p) => u64::from(p),
            None if self.cfg.priority.multifactor => {
                let (p, f) = self.multifactor_priority(&spec, eligible, t);
                self.fs.prio.insert(id, drover_sched::priority::weighted(&self.cfg.priority, &f));
                u64::from(p)
            }
            // A held job takes its place in the order when it is released.
            None if spec.hold => u64::from(basic_priority(self.lowest_basic, spec.nice)),
            None => u64::from(self.next_basic_priority(spec.nice)),
        };
        let hold = match (spec.hold, admin_hold) {
            (false, _) => None,
            (true, true) => Some(HoldKind::Admin),
            (true, false) => Some(HoldKind::User),
        };
        let mut status = JobStatus::pending(t, eligible, &spec.partitions[0], priority, hold);
        status.priority_set = spec.priority.is_some();
        let array = spec.array.as_deref().and_then(|a| crate::state::ArrayPart::remainder(id, a));
        let sj = self.sched_job_of(id, &spec, &status, array.as_ref());
        if let (Some(r), Some(st)) = (sj.more().policy, self.acct_admin.as_deref()) {
            // A QoS with DenyOnLimit refuses, rather than holds, a job over its Max limits.
            let qos = crate::policy::JobPolicy::of(&spec).qos;
            let deny =
                st.qos.iter().any(|q| q.name == qos && q.flags.iter().any(|f| f.eq_ignore_ascii_case("DenyOnLimit")));
            if deny && r.name().starts_with("QOSMax") {
                return Err(Status::invalid_argument(
                    "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)",
                ));
            }
        }
        let enforce = self.cfg.enforce_part_limits != drover_model::conf::EnforcePartLimits::No;
        match self.core.check_submit(&sj, enforce) {
            SubmitCheck::Ok => {}
            // Slurm tests whether nodes could hold a held job only once it is released.
            SubmitCheck::NodeConfigUnavailable if spec.hold => {}
            SubmitCheck::NodeConfigUnavailable | SubmitCheck::NodesNotInPartition => {
                return Err(Status::invalid_argument("Requested node configuration is not available"))
            }
            SubmitCheck::PartitionLimit(r) => {
                let msg = match r {
                    PendingReason::PartitionTimeLimit => {
                        "Requested time limit is invalid (missing or exceeds some limit)"
                    }
                    _ => "Node count specification invalid",
                };
                return Err(Status::invalid_argument(msg));
            }
        }
        if test_only {
            let mut trial = self.core.clone();
            let mut sj = sj;
            sj.hold = None;
            trial.handle(Event::Submitted(sj));
            let mut next = id;
            let (start, nodes, part) = trial
                .schedule(t, &mut || {
                    next += 1;
                    next
                })
                .into_iter()
                .find_map(|d| match d {
                    Decision::Start { job, alloc, split, .. } if job == id || split.is_some_and(|s| s.0 == id) => {
                        Some((t, Hostlist::from_iter(alloc.node_names()).ranged(), alloc.partition))
                    }
                    _ => None,
                })
                .unwrap_or((t, String::new(), status.partition.to_string()));
            return Ok(v1::SubmitReply {
                job_id: id,
                test_start_time: start,
                test_nodes: nodes,
                test_partition: part,
                ..Default::default()
            });
        }
        // srun's own job: the key its tasks' supervisors will prove themselves with.
        let io_key = if spec.io_addr.is_some() { self.io_key(id, None, status.submit_time) } else { Vec::new() };
        self.record(Record::Submit { id, spec, status });
        self.core.handle(Event::Submitted(sj));
        self.diag.submitted += 1;
        Ok(v1::SubmitReply { job_id: id, io_key: io_key.into(), ..Default::default() })
    }

    pub(super) fn schedule(&mut self, t: i64) {
        let mut next = self.durable.next_job_id;
        let decisions = self.core.schedule(t, &mut || {
            next += 1;
            next - 1
        });
        for d in decisions {
            match d {
                Decision::Start { job, alloc, time_limit, split } => {
                    if let Some((array, task)) = split {
                        self.record(Record::ArraySplit { array, task, id: job });
                    }
                    self.start_job(job, alloc, time_limit, t)
                }
                Decision::Reason { job, reason: PendingReason::DependencyNeverSatisfied }
                    if self.kills_on_invalid_dep(job) =>
                {
                    // --kill-on-invalid-dep=yes, or SchedulerParameters=kill_invalid_depend
                    // where the job does not say: a job that can never run ends.
                    self.end_pending(job, None, PendingReason::DependencyNeverSatisfied, t);
                }
                Decision::Reason { job, reason: PendingReason::DeadLine } => {
                    // --deadline: it can no longer end in time; exit code 1, as Slurm's
                    // deadline_ok.
                    self.end_pending_as(job, None, (JobState::Deadline, 1 << 8), PendingReason::DeadLine, t);
                }
                Decision::Preempt { job, by } => self.preempt_job(job, by, t),
                Decision::Resume { job } => {
                    if let Err(e) = self.suspend_or_resume(job, false, t) {
                        crate::log(&format!("error: resuming job {job}: {e}"));
                    } else if let Some(mut st) = self.durable.jobs.get(&job).map(|j| j.status.clone()) {
                        st.state_desc.clear();
                        self.set_status(job, st);
                    }
                }
                Decision::Planned { job, start, nodes } => {
                    if let Some(j) = self.durable.jobs.get_mut(&job) {
                        // Derived state, like reasons: recomputed after recovery.
                        let hl = Hostlist::from_iter(&nodes).ranged();
                        Arc::make_mut(j).status.planned = start.map(|s| Box::new((s, hl)));
                        self.dirty = true;
                    }
                }
                Decision::Reason { job, reason } => {
                    if let Some(j) = self.durable.jobs.get_mut(&job) {
                        // Reasons are derived state: recomputed after recovery, never journalled.
                        let j = Arc::make_mut(j);
                        j.status.reason = reason;
                        j.status.last_sched_eval = t;
                        self.dirty = true;
                    }
                }
            }
        }
    }

    pub(super) fn start_job(
        &mut self,
        id: JobId,
        alloc: drover_model::alloc::Allocation,
        time_limit: Option<u64>,
        t: i64,
    ) {
        // sshare's TRESRunMins follow the jobs that run.
        self.fs.stale = true;
        self.diag.started += 1;
        let Some(j) = self.durable.jobs.get(&id).cloned() else {
            return;
        };
        let mut st = j.status.clone();
        st.state = JobState::Running;
        st.reason = PendingReason::None;
        st.planned = None;
        st.start_time = t;
        st.last_sched_eval = t;
        st.partition = intern(&alloc.partition);
        st.time_limit = self.resv_cap(&j, time_limit, t);
        let mut alloc = alloc;
        overcommit_layout(&j, &mut alloc);
        st.alloc = Some(Box::new(alloc.clone()));
        // A batch job runs its script on the first node; an allocation without one (salloc,
        // standalone srun) runs nothing until its holder starts steps in it.
        st.nodes_running = if j.batch { vec![st.batch_host().to_string()] } else { Vec::new() };
        for n in alloc.node_names() {
            if let Some(l) = self.live.get_mut(&n) {
                l.last_busy = t;
            }
        }
        self.set_status(id, st);
        let job = self.durable.jobs.get(&id).cloned().expect("invariant: just written");
        if let Some(d) = Self::deadline(&job) {
            self.deadlines.insert((d, id));
        }
        match (&self.cfg.prolog_slurmctld, &self.self_tx) {
            (Some(prog), Some(tx)) => {
                // PrologSlurmctld first: the launch waits for it (see ctld_prolog_done).
                self.ctld_prolog.insert(id);
                let (prog, tx, env) = (prog.clone(), tx.clone(), self.ctld_script_env(&job, "prolog_slurmctld"));
                std::thread::spawn(move || {
                    let result = run_ctld_script(&prog, &env);
                    let _ = tx.send(Msg::CtldPrologDone { job: id, result });
                });
            }
            _ => self.launch_started(&job),
        }
        for n in alloc.node_names() {
            self.refresh_node(&n);
        }
        self.notify(&job);
    }

    /// What a job that started sends its nodes: its launch, and (PrologFlags=Alloc) word to
    /// run their prolog.
    pub(super) fn launch_started(&mut self, job: &Job) {
        let Some(alloc) = job.status.alloc.as_deref().cloned() else { return };
        self.send_launch(job, None);
        if self.cfg.prolog_flags.contain {
            self.start_extern_step(job, &alloc);
        }
        // Contain implies Alloc, as in Slurm.
        let at_alloc = self.cfg.prolog_flags.alloc || self.cfg.prolog_flags.contain;
        if at_alloc && self.cfg.prolog.is_some() {
            // PrologFlags=Alloc: every node runs the prolog now, tasks or not.
            let info = crate::view::job_info(job);
            for n in alloc.node_names() {
                let msg = controller_to_node::Msg::JobStart(v1::JobPhase { job: Some(info.clone()) });
                self.outbox.push((n, msg));
            }
        }
    }

    /// PrologFlags=Contain: the job's `extern` step on each of its nodes, a process that holds
    /// the job's cgroup there for as long as the job runs (what processes started outside
    /// srun join); it holds no CPUs and ends with the job.
    pub(super) fn start_extern_step(&mut self, job: &Job, alloc: &drover_model::alloc::Allocation) {
        use drover_model::step::{StepLayout, StepNode, EXTERN_STEP};
        let nodes: Vec<StepNode> = alloc
            .nodes
            .iter()
            .enumerate()
            .map(|(i, na)| StepNode {
                node: na.node.clone(),
                cpu_ids: Vec::new(),
                mem_mb: 0,
                task_ids: vec![i as u32],
                gres: Vec::new(),
            })
            .collect();
        let layout = StepLayout { nodes, distribution: Default::default(), overlap: true, own_gres: false };
        let step = Step {
            id: EXTERN_STEP,
            name: "extern".into(),
            nodes_running: layout.node_names(),
            layout,
            start_time: now(),
            time_limit: None,
            srun_host: String::new(),
            srun_pid: 0,
            submit_line: String::new(),
            usage: Vec::new(),
            exit_status: 0,
            how: String::new(),
            cancelled: false,
        };
        self.record(Record::StepSet { id: job.id, step: step.clone() });
        let Some(j) = self.durable.jobs.get(&job.id).cloned() else { return };
        let spec = v1::StepSpec {
            job_id: job.id,
            name: "extern".into(),
            argv: vec!["sleep".into(), "100000000".into()],
            work_dir: "/".into(),
            input_mode: "none".into(),
            output_mode: "none".into(),
            error_mode: "none".into(),
            overlap: true,
            ..Default::default()
        };
        let info = crate::view::job_info(&j);
        let sinfo = crate::view::step_info(&j, &step);
        for (idx, sn) in step.layout.nodes.iter().enumerate() {
            let sl = v1::StepLaunch { step: Some(sinfo.clone()), spec: Some(spec.clone()) };
            let launch = self.launch_msg(&info, ("", &[]), idx, sn.task_ids.clone(), Some(sl));
            self.outbox.push((sn.node.clone(), controller_to_node::Msg::Launch(launch)));
        }
    }

    pub fn set_self_tx(&mut self, tx: std::sync::mpsc::Sender<Msg>) {
        self.self_tx = Some(tx);
    }

    /// What wakes the delivery to accounting once a change is committed.
    pub fn set_acct_wake(&mut self, wake: Arc<tokio::sync::Notify>) {
        self.acct_wake = Some(wake);
    }

    /// The secret srun's I/O keys are derived from (see [`drover_proto::auth::io_key_for`]).
    pub fn set_io_secret(&mut self, secret: Vec<u8>) {
        self.io_secret = secret;
    }

    /// The I/O key of job `job`'s (or its step `step`'s) connection back to srun.
    pub(super) fn io_key(&self, job: JobId, step: Option<StepId>, submit_time: i64) -> Vec<u8> {
        drover_proto::auth::io_key_for(&self.io_secret, job, step, submit_time)
    }

    /// Slurm's environment for PrologSlurmctld and EpilogSlurmctld.
    pub(super) fn ctld_script_env(&self, j: &Job, context: &str) -> Vec<(String, String)> {
        let spec = j.spec.unpack();
        let st = &j.status;
        let nodes = st.alloc.as_ref().map(|a| Hostlist::from_iter(a.node_names()).ranged()).unwrap_or_default();
        let code = if st.exit_status & 0x7f != 0 { 0 } else { (st.exit_status >> 8) & 0xff };
        let mut env = vec![
            ("SLURM_CLUSTER_NAME", self.cfg.cluster_name.clone()),
            ("SLURM_CONF", self.cfg.path.clone()),
            ("SLURM_JOBID", j.id.to_string()),
            ("SLURM_JOB_ACCOUNT", spec.user.clone()),
            ("SLURM_JOB_GID", spec.gid.to_string()),
            ("SLURM_JOB_GROUP", spec.group.clone()),
            ("SLURM_JOB_ID", j.id.to_string()),
            ("SLURM_JOB_NAME", spec.name.clone()),
            ("SLURM_JOB_NODELIST", nodes),
            ("SLURM_JOB_PARTITION", st.partition.to_string()),
            ("SLURM_JOB_RESTART_COUNT", st.restarts.to_string()),
            ("SLURM_JOB_UID", spec.uid.to_string()),
            ("SLURM_JOB_USER", spec.user.clone()),
            ("SLURM_JOB_WORK_DIR", spec.work_dir.clone()),
            ("SLURM_SCRIPT_CONTEXT", context.to_string()),
            ("SLURM_UID", spec.uid.to_string()),
        ];
        if context == "epilog_slurmctld" {
            env.push(("SLURM_JOB_DERIVED_EC", "0".into()));
            env.push(("SLURM_JOB_EXIT_CODE", st.exit_status.to_string()));
            env.push(("SLURM_JOB_EXIT_CODE2", format!("{code}:{}", st.exit_status & 0x7f)));
        }
        env.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    }

    /// PrologSlurmctld ended: the job launches, or (failed) a batch job is requeued and an
    /// interactive one cancelled, as Slurm does.
    pub(super) fn ctld_prolog_done(&mut self, id: JobId, result: Result<(), String>) {
        if !self.ctld_prolog.remove(&id) {
            return;
        }
        let Some(j) = self.durable.jobs.get(&id).cloned() else { return };
        if j.status.state != JobState::Running {
            return;
        }
        self.dirty = true;
        match result {
            Ok(()) => {
                self.launch_started(&j);
                self.retry_waiting_steps(id);
            }
            Err(e) => {
                eprintln!("drover controller: error: prolog_slurmctld job {id} failed: {e}");
                let mut st = j.status.clone();
                let how = self.launch_failed(&j, &mut st, "PrologSlurmctld failed");
                st.nodes_running.clear();
                self.finish(id, st, how, now());
            }
        }
    }

    /// The job's full request: script and environment read back from its submit record.
    pub(super) fn full_job(&self, job: &Job) -> Result<Job, String> {
        let mut spec = job.spec.unpack();
        if let Some(at) = &job.blob {
            let bytes = self.journal.read(at).map_err(|e| e.to_string())?;
            match decode_record(&bytes).map_err(|e| e.to_string())? {
                Record::Submit { spec: full, .. } => {
                    spec.script = full.script;
                    spec.environment = full.environment;
                }
                _ => return Err("the job's submit record is not a submit".into()),
            }
        }
        Ok(Job { array: job.array.clone(), ..Job::new(job.id, &spec, job.status.clone(), job.blob) })
    }

    /// Launch messages for a started job (or for one node of it on re-registration).
    pub(super) fn send_launch(&mut self, job: &Job, only: Option<&str>) {
        let Some(alloc) = &job.status.alloc else {
            return;
        };
        let full = match self.full_job(job) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("drover controller: job {}: cannot read its script and environment: {e}", job.id);
                return;
            }
        };
        let info = crate::view::job_info(&full);
        let io_addr = full.spec.unpack().io_addr.unwrap_or_default();
        let io_key = if io_addr.is_empty() { Vec::new() } else { self.io_key(job.id, None, job.status.submit_time) };
        let mut first_task = 0u32;
        for (idx, na) in alloc.nodes.iter().enumerate() {
            let task_ids: Vec<u32> = (first_task..first_task + na.tasks).collect();
            first_task += na.tasks;
            if !job.status.nodes_running.contains(&na.node) || only.is_some_and(|o| o != na.node) {
                continue;
            }
            let launch = self.launch_msg(&info, (&io_addr, &io_key), idx, task_ids, None);
            self.outbox.push((na.node.clone(), controller_to_node::Msg::Launch(launch)));
        }
    }

    /// What a node needs to run its part of a job (the batch script) or of a step.
    pub(super) fn launch_msg(
        &self,
        info: &v1::JobInfo,
        (io_addr, io_key): (&str, &[u8]),
        node_index: usize,
        task_ids: Vec<u32>,
        step: Option<v1::StepLaunch>,
    ) -> v1::Launch {
        v1::Launch {
            job: Some(info.clone()),
            kill_wait: self.cfg.kill_wait,
            cluster_name: self.cfg.cluster_name.clone(),
            conf_path: self.cfg.path.clone(),
            controller_host: self.cfg.controller_addr(),
            io_addr: io_addr.to_string(),
            io_key: io_key.to_vec().into(),
            node_index: node_index as u32,
            task_ids,
            step,
            // The rest the node agent fills in from its configuration.
            ..Default::default()
        }
    }

    pub(super) fn notify(&mut self, job: &Job) {
        if let Some(ws) = self.watchers.get_mut(&job.id) {
            let info = crate::view::job_info(job);
            let finished = job.status.state.is_finished();
            let ws = if finished { self.watchers.remove(&job.id).unwrap_or_default() } else { ws.clone() };
            self.after_commit.push(Box::new(move || {
                for w in ws {
                    let _ = w.send(v1::JobEvent { job: Some(info.clone()), step: None });
                }
            }));
        }
    }

    /// Tells the job's watchers (the step's srun) that a step was cancelled or ended.
    pub(super) fn notify_step(&mut self, step: v1::StepInfo) {
        if let Some(ws) = self.watchers.get(&step.job_id) {
            let ws = ws.clone();
            self.after_commit.push(Box::new(move || {
                for w in ws {
                    let _ = w.send(v1::JobEvent { job: None, step: Some(step.clone()) });
                }
            }));
        }
    }

    /// Asks `node` to signal (or terminate) a job, or one step of it.
    pub(super) fn signal_node(&mut self, node: &str, job: JobId, step: Option<StepId>, signal: i32, terminate: bool) {
        let batch_only = step == Some(BATCH_STEP);
        let step_id = step.filter(|s| *s != BATCH_STEP);
        let msg = v1::Signal { job_id: job, signal, batch_only, terminate, step_id, ..Default::default() };
        self.outbox.push((node.to_string(), controller_to_node::Msg::Signal(msg)));
    }

    /// Asks `node` to send `signal` to every step of a job there, not its batch script
    /// (`scancel --signal` without `--batch` or `--full`).
    pub(super) fn signal_steps(&mut self, node: &str, job: JobId, signal: i32) {
        let msg = v1::Signal { job_id: job, signal, steps_only: true, ..Default::default() };
        self.outbox.push((node.to_string(), controller_to_node::Msg::Signal(msg)));
    }

    /// Nodes where something of the job runs: its batch script or any of its steps.
    pub(super) fn busy_nodes(j: &Job) -> Vec<String> {
        let mut nodes = j.status.nodes_running.clone();
        for s in j.running_steps() {
            for n in &s.nodes_running {
                if !nodes.contains(n) {
                    nodes.push(n.clone());
                }
            }
        }
        nodes
    }

    /// When a running allocation without a batch script reaches its time limit.
    fn kills_on_invalid_dep(&self, id: JobId) -> bool {
        let own = self.durable.jobs.get(&id).and_then(|j| j.spec.wire().kill_on_invalid_dep);
        own.unwrap_or(self.cfg.kill_invalid_depend)
    }

    pub(super) fn deadline(j: &Job) -> Option<i64> {
        if j.batch || j.status.state != JobState::Running {
            return None;
        }
        j.status.time_limit.map(|l| j.status.start_time + l as i64 + j.status.suspended_secs)
    }

    pub(super) fn job_ended_on(&mut self, node: &str, e: v1::EndedJob) {
        let ack = controller_to_node::Msg::EndedAck(v1::Ack { job_id: e.job_id, step_id: e.step_id });
        self.outbox.push((node.to_string(), ack));
        self.fence_unit_ended(e.job_id, e.step_id, node);
        if let Some(step) = e.step_id {
            self.step_ended_on(node, step, e);
            return;
        }
        let Some(j) = self.durable.jobs.get(&e.job_id).cloned() else {
            return;
        };
        if !j.status.nodes_running.iter().any(|n| n == node) {
            return;
        }
        let mut st = j.status.clone();
        st.nodes_running.retain(|n| n != node);
        if !e.usage.is_empty() {
            st.batch_usage = Some(crate::acct::add_usage(&[], e.usage).into_boxed_slice());
        }
        // The worst exit wins, as srun reports it.
        if drover_model::job::exit_rank(e.exit_status) > drover_model::job::exit_rank(st.exit_status) {
            st.exit_status = e.exit_status;
        }
        if !e.message.is_empty() {
            st.state_desc = e.message.clone();
        }
        let mut how = e.how.as_str();
        if how == "PROLOG_FAILED" {
            // The node is drained; the job goes back to the queue, held unless
            // PrologFlags=NoHold, to run elsewhere once released.
            self.drain_node(node, "Prolog error");
            how = self.launch_failed(&j, &mut st, "Prolog error");
        }
        if !how.is_empty() && st.state_desc.is_empty() {
            st.state_desc = how.to_string();
        }
        if !st.nodes_running.is_empty() {
            // Other nodes are still running tasks: end them too if this one failed hard.
            self.set_status(e.job_id, st);
            return;
        }
        let end = if e.end_time > 0 { e.end_time } else { now() };
        self.finish(j.id, st, how, end);
    }

    /// Moves a job to its final state (or back to pending when it is being requeued).
    pub(super) fn finish(&mut self, id: JobId, mut st: JobStatus, how: &str, end: i64) {
        let mut requeue = st.state_desc == "REQUEUE" || how == "REQUEUE";
        match how {
            "FAILED_LAUNCH" | "NODE_FAIL" => self.diag.failed += 1,
            _ if !requeue => self.diag.completed += 1,
            _ => {}
        }
        let preempted = self.preempting.remove(&id).is_some() && st.state_desc == "PREEMPTED";
        // A scrontab job goes back to the queue for its next time, whatever its end.
        let ended_as = end_state(&st, how, preempted);
        if !requeue && self.cron_again(id, &mut st, ended_as, end) {
            requeue = true;
        }
        if let Some(j) = self.durable.jobs.get(&id).cloned() {
            // Its run since it was last credited counts now (not time it spent suspended).
            if j.status.state != JobState::Suspended {
                self.credit_run(&j, j.status.start_time.max(self.fs.usage.at), end);
            }
            self.fs.credited.remove(&id);
        }
        self.end_steps_of(id, &st);
        self.ctld_prolog.remove(&id);
        if let (Some(prog), Some(j)) = (self.cfg.epilog_slurmctld.clone(), self.durable.jobs.get(&id)) {
            // EpilogSlurmctld, off the owner's thread; its failure is logged.
            let mut done = (**j).clone();
            done.status = st.clone();
            let env = self.ctld_script_env(&done, "epilog_slurmctld");
            std::thread::spawn(move || {
                if let Err(e) = run_ctld_script(&prog, &env) {
                    eprintln!("drover controller: error: epilog_slurmctld job {id} failed: {e}");
                }
            });
        }
        // Every node of the allocation runs its epilog (after a requeue too, as in Slurm).
        if let Some(j) = self.durable.jobs.get(&id) {
            let mut info = crate::view::job_info(j);
            info.exit_status = st.exit_status;
            for n in st.alloc.as_ref().map(|a| a.node_names()).unwrap_or_default() {
                let msg = controller_to_node::Msg::JobDone(v1::JobPhase { job: Some(info.clone()) });
                // With an Epilog, the node takes no new work until it has run (see node_state).
                if self.cfg.epilog.is_some() && self.live.get(&n).is_some_and(|l| l.registered) {
                    self.epilog_pending.entry(n.clone()).or_default().insert(id);
                }
                self.outbox.push((n, msg));
            }
        }
        if requeue {
            st.state = JobState::Pending;
            st.reason = PendingReason::None;
            st.restarts += 1;
            st.requeue_time = end;
            st.batch_usage = None;
            st.alloc = None;
            // A pending job runs nowhere (a node that failed never said its run ended).
            st.nodes_running.clear();
            st.start_time = 0;
            st.state_desc.clear();
            st.exit_status = 0;
            st.cancelled_by = None;
            let nodes: Vec<String> = self.core.allocation(id).map(|a| a.node_names()).unwrap_or_default();
            self.core.handle(Event::Ended { job: id, outcome: Outcome::Failed });
            self.set_status(id, st);
            let job = self.durable.jobs.get(&id).cloned().expect("invariant: exists");
            self.core.handle(Event::Forgotten(id));
            self.core.handle(Event::Submitted(self.sched_job(&job)));
            for n in nodes {
                self.refresh_node(&n);
            }
            return;
        }
        let state = end_state(&st, how, preempted);
        if how.is_empty() {
            // A normal end needs no description; a failed launch keeps its reason.
            st.state_desc.clear();
        }
        st.state = state;
        st.end_time = end;
        // A job cancelled before it ever ran keeps the reason it waited for (as Slurm).
        if !(state == JobState::Cancelled && st.alloc.is_none()) {
            st.reason = PendingReason::None;
        }
        st.nodes_running.clear();
        let nodes: Vec<String> = st.alloc.as_ref().map(|a| a.node_names()).unwrap_or_default();
        let ran = drover_sched::predict::run_time(st.start_time, end, st.suspended_secs);
        self.set_status(id, st);
        let outcome = if state == JobState::Completed { Outcome::Succeeded } else { Outcome::Failed };
        self.core.handle(Event::Ended { job: id, outcome });
        if let (Some(secs), Some(j)) = (ran, self.durable.jobs.get(&id)) {
            let uid = j.uid;
            self.ran(uid, secs);
        }
        self.purge_queue.insert((end, id));
        let t = now();
        for n in nodes {
            if let Some(l) = self.live.get_mut(&n) {
                l.last_busy = t;
            }
            self.refresh_node(&n);
        }
        let job = self.durable.jobs.get(&id).cloned().expect("invariant: exists");
        self.notify(&job);
    }
}

/// The state a job's run ended in: how its node said it ended, and whether it was cancelled
/// or preempted.
fn end_state(st: &JobStatus, how: &str, preempted: bool) -> JobState {
    if preempted {
        JobState::Preempted
    } else if st.cancelled_by.is_some() || how == "CANCELLED" {
        JobState::Cancelled
    } else if how == "TIMEOUT" {
        JobState::Timeout
    } else if how == "NODE_FAIL" {
        JobState::NodeFail
    } else if how == "OUT_OF_MEMORY" {
        JobState::OutOfMemory
    } else if st.exit_status == 0 && how.is_empty() {
        JobState::Completed
    } else {
        JobState::Failed
    }
}

/// `--time-min` and `--deadline` against the limit and the clock, as Slurm's
/// `_valid_job_part` and `_job_create` check them; a deadline without a limit or a minimum
/// takes a minimum of a minute.
fn check_times(spec: &mut JobSpec, now: i64) -> Result<(), Status> {
    let limit = spec.time_limit.flatten();
    let bad_min = || Status::invalid_argument("Invalid time-min specification (exceeds job's time or other limits)");
    let bad_limit = || Status::invalid_argument("Requested time limit is invalid (missing or exceeds some limit)");
    if let (Some(min), Some(l)) = (spec.time_min, limit) {
        if min > l {
            return Err(bad_min());
        }
    }
    if let Some(d) = spec.deadline {
        if d < now {
            return Err(bad_limit());
        }
        match (spec.time_min, limit) {
            (Some(min), _) if d < now + min as i64 => return Err(bad_min()),
            (None, Some(l)) if d < now + l as i64 => return Err(bad_limit()),
            (None, None) if spec.time_limit.is_none() => spec.time_min = Some(60),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod time_tests {
    use super::*;

    #[test]
    fn time_min_and_deadline_are_checked_as_slurm_checks_them() {
        let spec = |min: Option<u64>, limit: Option<Option<u64>>, deadline: Option<i64>| JobSpec {
            time_min: min,
            time_limit: limit,
            deadline,
            ..Default::default()
        };
        let msg = |mut s: JobSpec| check_times(&mut s, 1000).err().map(|e| e.message().to_string());
        assert_eq!(
            msg(spec(Some(7200), Some(Some(3600)), None)).unwrap(),
            "Invalid time-min specification (exceeds job's time or other limits)"
        );
        assert_eq!(msg(spec(Some(60), Some(Some(3600)), None)), None);
        assert_eq!(
            msg(spec(None, None, Some(999))).unwrap(),
            "Requested time limit is invalid (missing or exceeds some limit)"
        );
        assert!(msg(spec(Some(600), None, Some(1300))).unwrap().starts_with("Invalid time-min"));
        assert!(msg(spec(None, Some(Some(600)), Some(1300))).unwrap().starts_with("Requested time limit"));
        assert_eq!(msg(spec(None, Some(None), Some(1300))), None, "an unlimited job is checked when it is scheduled");
        let mut s = spec(None, None, Some(5000));
        check_times(&mut s, 1000).unwrap();
        assert_eq!(s.time_min, Some(60), "a deadline without a limit takes a minute's minimum");
    }
}
