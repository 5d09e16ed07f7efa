//! Nodes: registration, state, updates, problems, draining, and reconfiguring.

use super::*;

impl Owner {
    /// Recomputes a node's state for the scheduler and readers.
    pub(super) fn refresh_node(&mut self, name: &str) {
        let st = self.node_state(name);
        self.core.handle(Event::NodeSchedulable { node: name.to_string(), schedulable: st.schedulable() });
        self.dirty = true;
    }

    pub(super) fn node_state(&self, name: &str) -> NodeState {
        let admin = self.durable.nodes.get(name).cloned().unwrap_or_default();
        let live = self.live.get(name);
        let res = self.core.node(name);
        let registered = live.is_some_and(|l| l.registered);
        let base = if admin.down || live.is_some_and(|l| l.not_responding) && !registered {
            NodeBase::Down
        } else if !registered {
            NodeBase::Unknown
        } else {
            match res {
                Some(r) if r.job_count() > 0 && r.alloc_cpus() >= r.cpus => NodeBase::Allocated,
                Some(r) if r.job_count() > 0 => NodeBase::Mixed,
                _ => NodeBase::Idle,
            }
        };
        let mut st = NodeState::new(base);
        (st.reserved, st.maint) = self.resv_node_flags(name, now());
        st.drain = admin.drain;
        st.completing = self.epilog_pending.contains_key(name);
        st.not_responding = live.is_some_and(|l| l.not_responding) || !registered;
        if admin.down {
            st.base = NodeBase::Down;
        }
        st
    }

    pub(super) fn node_register(&mut self, reg: v1::Register, tx: NodeTx, session: u64, host: String, from: String) {
        let name = reg.node.clone();
        if self.cfg.node(&name).is_none() {
            crate::log(&format!("refused a registration as node {name} from {from}: no such node in slurm.conf"));
            let _ = tx.send(Err(Status::not_found(format!("node {name} is not in slurm.conf"))));
            return;
        }
        let t = now();
        // A node whose agent answers keeps its session against an agent of another host: two
        // hosts configured as one node (a wrong -N, a copied NodeName) would otherwise evict
        // each other, and each launch would go to whichever registered last. The same host
        // may take over at once (its agent restarted before the old connection was seen to
        // close); another host once the first stops answering for SlurmdTimeout.
        if let Some(l) = self.live.get(&name) {
            let answering = l.session.as_ref().is_some_and(|(_, old)| !old.is_closed())
                && !l.not_responding
                && t - l.last_seen <= i64::from(self.cfg.slurmd_timeout);
            if answering && l.host != host {
                let msg = format!(
                    "Access/permission denied: node {name} is registered from host {} and its agent answers; \
                     an agent on {host} may not take it over (stop the one on {}, or correct -N / NodeName)",
                    l.host, l.host
                );
                crate::log(&format!("refused a registration as node {name} from {from}: {msg}"));
                let _ = tx.send(Err(Status::permission_denied(msg)));
                return;
            }
        }
        let rts = self.cfg.return_to_service;
        // A (re)started agent has no epilog running for us to wait on.
        self.epilog_pending.remove(&name);
        {
            let l = self.live.entry(name.clone()).or_default();
            l.session = Some((session, tx));
            l.host = host;
            l.registered = true;
            l.last_seen = t;
            l.not_responding = false;
            l.boot_time = reg.boot_time;
            l.start_time = reg.start_time;
            l.version = reg.version.clone();
            l.os = reg.os.clone();
            l.arch = reg.arch.clone();
            l.confinement = reg.confinement.clone();
        }
        if let Some(admin) = self.durable.nodes.get(&name).cloned() {
            if admin.down && admin.reason == "Not responding" && rts >= 1 {
                self.record(Record::NodeAdmin { node: name.clone(), admin: NodeAdmin::default() });
            }
        }
        let running: BTreeSet<(u32, Option<StepId>)> = reg.running.iter().map(|r| (r.job_id, r.step_id)).collect();
        self.fences_on_register(&name, &running);
        for e in reg.ended {
            let id = e.job_id;
            if let Some(j) = self.durable.jobs.get(&id) {
                let mine = match e.step_id {
                    None => j.status.nodes_running.contains(&name),
                    Some(s) => j.step(s).is_some_and(|s| s.nodes_running.contains(&name)),
                };
                if mine {
                    self.job_ended_on(&name, e);
                    continue;
                }
            }
            let ack = v1::Ack { job_id: id, step_id: e.step_id };
            self.outbox.push((name.clone(), controller_to_node::Msg::EndedAck(ack)));
        }
        // Steps the controller believes run here but the agent does not know: their launch
        // was lost with the old session; srun hears they failed.
        let lost: Vec<(JobId, StepId)> = self
            .durable
            .jobs
            .values()
            .filter(|j| !j.status.state.is_finished())
            .flat_map(|j| {
                j.running_steps()
                    .iter()
                    .filter(|s| s.nodes_running.contains(&name) && !running.contains(&(j.id, Some(s.id))))
                    .map(|s| (j.id, s.id))
                    .collect::<Vec<_>>()
            })
            .collect();
        for (job_id, step) in lost {
            let e = v1::EndedJob {
                job_id,
                exit_status: 1 << 8,
                how: "FAILED_LAUNCH".into(),
                end_time: t,
                message: format!("the launch of the step on {name} was lost"),
                step_id: Some(step),
                usage: Vec::new(),
            };
            self.step_ended_on(&name, step, e);
        }
        // Jobs the controller believes run here but the agent does not know: the launch was lost.
        let mine: Vec<Arc<Job>> = self
            .durable
            .jobs
            .values()
            .filter(|j| !j.status.state.is_finished() && j.status.nodes_running.contains(&name))
            .cloned()
            .collect();
        for j in mine {
            if running.contains(&(j.id, None)) {
                if j.status.state == JobState::Completing {
                    // Ended here while the agent was away (a cancel or requeue sent to a
                    // session that was gone): end it now, as then.
                    let requeue = j.status.state_desc == "REQUEUE" || self.preempt_requeues(&j);
                    let msg = v1::Signal { job_id: j.id, terminate: true, requeue, ..Default::default() };
                    self.outbox.push((name.clone(), controller_to_node::Msg::Signal(msg)));
                }
                continue;
            }
            if j.status.cancelled_by.is_some() || j.status.state == JobState::Completing {
                let mut st = j.status.clone();
                st.nodes_running.retain(|n| n != &name);
                if st.nodes_running.is_empty() {
                    self.finish(j.id, st, "", t);
                } else {
                    self.set_status(j.id, st);
                }
            } else {
                self.send_launch(&j, Some(&name));
            }
        }
        // Jobs and steps the agent runs that the controller has no use for: stop them.
        for (id, step) in running {
            let known = self.durable.jobs.get(&id).is_some_and(|j| match step {
                None => !j.status.state.is_finished() && j.status.nodes_running.contains(&name),
                Some(s) => j.step(s).is_some_and(|s| s.nodes_running.contains(&name)),
            });
            if !known {
                self.signal_node(&name, id, step, 0, true);
            }
        }
        self.refresh_node(&name);
    }

    pub(super) fn update_node(&mut self, req: v1::UpdateNodeRequest, caller: Caller) -> Result<v1::Empty, Status> {
        if !self.operator(caller) {
            return Err(Status::permission_denied("Access/permission denied"));
        }
        let names = Hostlist::parse(&req.nodes).map_err(|e| Status::invalid_argument(e.to_string()))?.names();
        for n in &names {
            if self.cfg.node(n).is_none() {
                return Err(Status::invalid_argument("Invalid node name specified"));
            }
        }
        let state = req.state.to_ascii_uppercase();
        if matches!(state.as_str(), "DRAIN" | "DOWN") && req.reason.is_empty() {
            return Err(Status::invalid_argument(
                "You must specify a reason when DOWNING or DRAINING a node. Request denied",
            ));
        }
        let t = now();
        for n in names {
            let mut admin = self.durable.nodes.get(&n).cloned().unwrap_or_default();
            match state.as_str() {
                "DRAIN" => {
                    admin.drain = true;
                }
                "DOWN" => {
                    admin.down = true;
                    // An operator downing a node that does not answer says it is dead (or
                    // powered off): requeued jobs fenced on it may start elsewhere.
                    if !self.live.get(&n).is_some_and(|l| l.registered) {
                        let fenced: Vec<JobId> = self
                            .durable
                            .fences
                            .iter()
                            .filter(|(_, ns)| ns.iter().any(|x| x == &n))
                            .map(|(id, _)| *id)
                            .collect();
                        for id in fenced {
                            self.unfence(id, &n, &format!("was set DOWN by uid {}", caller.uid));
                        }
                    }
                    self.fail_jobs_on(&n, t);
                }
                "RESUME" | "IDLE" => {
                    admin.drain = false;
                    admin.down = false;
                    admin.reason.clear();
                }
                "UNDRAIN" => admin.drain = false,
                "" => {}
                other => return Err(Status::invalid_argument(format!("Invalid node state specified: {other}"))),
            }
            if !req.reason.is_empty() {
                admin.reason = req.reason.clone();
                admin.reason_uid = caller.uid;
                admin.reason_time = t;
            } else if !admin.drain && !admin.down {
                admin.reason.clear();
            }
            self.record(Record::NodeAdmin { node: n.clone(), admin });
            self.refresh_node(&n);
        }
        Ok(v1::Empty {})
    }

    /// A node's prolog, epilog or health check failed: it is drained with why; a failed
    /// prolog (PrologFlags=Alloc) also sends its job back to the queue.
    pub(super) fn node_problem(&mut self, node: &str, p: v1::NodeProblem) {
        self.drain_node(node, &p.reason);
        let Some(id) = p.job_id.filter(|_| p.kind == "prolog") else { return };
        let Some(j) = self.durable.jobs.get(&id).cloned() else { return };
        if j.status.state != JobState::Running {
            return;
        }
        let mut st = j.status.clone();
        let how = self.launch_failed(&j, &mut st, "Prolog error");
        st.state = JobState::Completing;
        self.set_status(id, st);
        // Whatever runs of it stops; the job ends (or is requeued) when its nodes say so.
        let busy = Self::busy_nodes(&j);
        if busy.is_empty() {
            let st = self.durable.jobs[&id].status.clone();
            self.finish(id, st, how, now());
            return;
        }
        for n in busy {
            let msg = v1::Signal { job_id: id, terminate: true, requeue: true, ..Default::default() };
            self.outbox.push((n, controller_to_node::Msg::Signal(msg)));
        }
    }

    /// A prolog (node or controller) failed for job `j`: a batch job that may be requeued goes
    /// back to the queue, held unless `PrologFlags=NoHold` (a script that always fails must not
    /// requeue it in a loop); any other job fails with `why`. Returns how it ends.
    pub(super) fn launch_failed(&self, j: &Job, st: &mut JobStatus, why: &str) -> &'static str {
        if self.may_requeue(j) {
            if !self.cfg.prolog_flags.nohold {
                st.hold = Some(HoldKind::LaunchFailed);
            }
            st.state_desc = "REQUEUE".into();
            "REQUEUE"
        } else {
            st.state_desc = why.into();
            "FAILED_LAUNCH"
        }
    }

    /// Drains `node` with `reason` (as root, now), as `scontrol update State=DRAIN` would.
    pub(super) fn drain_node(&mut self, node: &str, reason: &str) {
        if self.cfg.node(node).is_none() {
            return;
        }
        let mut admin = self.durable.nodes.get(node).cloned().unwrap_or_default();
        admin.drain = true;
        admin.reason = reason.to_string();
        admin.reason_uid = 0;
        admin.reason_time = now();
        self.record(Record::NodeAdmin { node: node.to_string(), admin });
        self.refresh_node(node);
    }

    /// Jobs on a node that went down: a batch job that may be requeued (`--requeue`, or
    /// `JobRequeue=1`, the default) goes back to the queue, its run recorded `NODE_FAIL`, as
    /// Slurm does; the others end `NODE_FAIL`. Their other nodes are told to stop them.
    ///
    /// A requeued job is fenced on the node that failed: it does not start again until that
    /// node is known to have stopped its last run (its agent reports back, or an operator
    /// sets it DOWN), so that a node cut off from the controller but still running the job
    /// never runs it beside its new run.
    pub(super) fn fail_jobs_on(&mut self, node: &str, t: i64) {
        let victims: Vec<Arc<Job>> = self
            .durable
            .jobs
            .values()
            .filter(|j| {
                !j.status.state.is_finished()
                    && j.status.alloc.as_ref().is_some_and(|a| a.nodes.iter().any(|n| n.node == node))
            })
            .cloned()
            .collect();
        for j in victims {
            for n in &j.status.nodes_running {
                if n != node {
                    self.signal_node(n, j.id, None, 0, true);
                }
            }
            let mut st = j.status.clone();
            if j.status.state == JobState::Running && self.may_requeue(&j) {
                crate::log(&format!("requeue job {} due to failure of node {node}", j.id));
                // Its run goes to accounting as NODE_FAIL.
                st.state_desc = "NODE_FAIL".into();
                self.set_status(j.id, st.clone());
                self.record(Record::Fence { id: j.id, nodes: vec![node.to_string()] });
                self.finish(j.id, st, "REQUEUE", t);
            } else {
                crate::log(&format!("Killing job {} on failed node {node}", j.id));
                self.finish(j.id, st, "NODE_FAIL", t);
            }
        }
    }

    /// Whether a batch job may go back to the queue (`--requeue`/`--no-requeue`, else
    /// `JobRequeue`).
    pub(super) fn may_requeue(&self, j: &Job) -> bool {
        j.batch && j.spec.unpack().requeue.unwrap_or(self.cfg.job_requeue)
    }

    /// `node` is known to have stopped the last run of fenced job `id`: once no node is left
    /// to hear from, the job may start again.
    pub(super) fn unfence(&mut self, id: JobId, node: &str, why: &str) {
        let Some(nodes) = self.durable.fences.get(&id) else { return };
        if !nodes.iter().any(|n| n == node) {
            return;
        }
        let rest: Vec<String> = nodes.iter().filter(|n| *n != node).cloned().collect();
        self.fence_units.retain(|(j, n), _| !(*j == id && n == node));
        let free = rest.is_empty();
        self.record(Record::Fence { id, nodes: rest });
        crate::log(&format!("job {id}: node {node} {why}{}", if free { "; the job may start again" } else { "" }));
        if free {
            if let Some(j) = self.durable.jobs.get(&id).cloned() {
                if j.status.state == JobState::Pending {
                    self.core.handle(Event::Updated(self.sched_job(&j)));
                }
            }
        }
    }

    /// A node's agent registered: fenced jobs it no longer runs are free of it; of those it
    /// still runs, it is told to stop them (below), and each unit's end is awaited.
    fn fences_on_register(&mut self, name: &str, running: &BTreeSet<(u32, Option<StepId>)>) {
        let fenced: Vec<JobId> =
            self.durable.fences.iter().filter(|(_, ns)| ns.iter().any(|n| n == name)).map(|(id, _)| *id).collect();
        for id in fenced {
            let units: BTreeSet<Option<StepId>> = running.iter().filter(|(j, _)| *j == id).map(|(_, s)| *s).collect();
            if units.is_empty() {
                self.unfence(id, name, "is back and does not run its last run");
            } else {
                self.fence_units.insert((id, name.to_string()), units);
            }
        }
    }

    /// A unit of job `id` ended on `node`: where the job is fenced on that node, one fewer
    /// to wait for.
    pub(super) fn fence_unit_ended(&mut self, id: JobId, step: Option<StepId>, node: &str) {
        let key = (id, node.to_string());
        let Some(units) = self.fence_units.get_mut(&key) else { return };
        units.remove(&step);
        if units.is_empty() {
            self.fence_units.remove(&key);
            self.unfence(id, node, "stopped its last run");
        }
    }

    pub(super) fn reconfigure(&mut self, caller: Caller) -> Result<v1::Empty, Status> {
        if !self.admin(caller) {
            return Err(Status::permission_denied("Access/permission denied"));
        }
        let cfg = drover_model::conf::parse_file(std::path::Path::new(&self.cfg.path))
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        self.cfg = Arc::new(cfg);
        // Users and groups may have changed too.
        self.names = NameCache::default();
        self.load_config();
        self.dirty = true;
        Ok(v1::Empty {})
    }
}
