//! The one owner of the controller's state. It runs on its own thread, takes [`Msg`]s from the
//! RPC handlers, applies them, journals every change, runs the scheduler, commits the journal
//! once per batch (group commit), and only then replies, launches and publishes the read view.

use crate::intern::intern;
use crate::state::{decode_record, encode_record, Durable, HoldKind, Job, JobStatus, NodeAdmin, Record, Step};
use crate::view::{NodeLiveView, View};
use arc_swap::ArcSwap;
use drover_journal::Journal;
use drover_model::conf::{Config, PartitionState};
use drover_model::hostlist::Hostlist;
use drover_model::job::{Constraint, JobId, JobSpec};
use drover_model::state::{JobState, NodeBase, NodeState, PendingReason};
use drover_model::step::{StepId, BATCH_STEP};
use drover_proto::v1::{self, controller_to_node, node_to_controller};
use drover_proto::Caller;
use drover_sched::{
    Core, Decision, Event, Hold, NodeRes, Outcome, PartitionRes, SchedArray, SchedJob, SchedMore, SubmitCheck,
};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, oneshot};
use tonic::Status;

mod resv;

pub type Reply<T> = oneshot::Sender<Result<T, Status>>;
pub type NodeTx = mpsc::UnboundedSender<Result<v1::ControllerToNode, Status>>;
pub type EventTx = mpsc::UnboundedSender<v1::JobEvent>;

/// A step request waiting for CPUs that other steps of its job hold (`srun` retrying).
struct WaitingStep {
    spec: v1::StepSpec,
    caller: Caller,
    reply: Reply<v1::StepCreateReply>,
}

pub enum Msg {
    Submit {
        spec: Box<JobSpec>,
        caller: Caller,
        test_only: bool,
        reply: Reply<v1::SubmitReply>,
    },
    Cancel {
        req: v1::CancelRequest,
        caller: Caller,
        reply: Reply<v1::CancelReply>,
    },
    JobControl {
        req: v1::JobControlRequest,
        caller: Caller,
        reply: Reply<v1::JobControlReply>,
    },
    UpdateNode {
        req: v1::UpdateNodeRequest,
        caller: Caller,
        reply: Reply<v1::Empty>,
    },
    Reservation {
        req: v1::ResvRequest,
        caller: Caller,
        reply: Reply<v1::ResvReply>,
    },
    Explain {
        job: JobId,
        reply: Reply<v1::ExplainReply>,
    },
    Reconfigure {
        caller: Caller,
        reply: Reply<v1::Empty>,
    },
    Watch {
        job: JobId,
        tx: EventTx,
        reply: Reply<()>,
    },
    CreateStep {
        spec: Box<v1::StepSpec>,
        wait: bool,
        caller: Caller,
        reply: Reply<v1::StepCreateReply>,
    },
    CompleteJob {
        req: v1::CompleteRequest,
        caller: Caller,
        reply: Reply<v1::Empty>,
    },
    StepStat {
        req: v1::StepStatRequest,
        caller: Caller,
        reply: Reply<v1::StepStatReply>,
    },
    AttachStep {
        req: v1::AttachRequest,
        caller: Caller,
        reply: Reply<v1::StepCreateReply>,
    },
    /// A job's PrologSlurmctld finished: `Err` with its status and output.
    CtldPrologDone {
        job: JobId,
        result: Result<(), String>,
    },
    NodeRegister {
        reg: v1::Register,
        tx: NodeTx,
        session: u64,
        /// The host its credential names, and where it connected from (for refusals).
        host: String,
        from: String,
    },
    FromNode {
        node: String,
        session: u64,
        msg: node_to_controller::Msg,
    },
    NodeGone {
        node: String,
        session: u64,
    },
    /// Accounting's delivery task asks for what is not delivered yet (at most `max` jobs).
    AcctTake {
        max: usize,
        reply: Reply<crate::acct::Batch>,
    },
    /// Accounting stored these jobs as they were taken, and the first `gone` records that
    /// left the state.
    AcctDone {
        jobs: Vec<Arc<Job>>,
        gone: usize,
    },
    /// Accounting's associations and QoS, as read now.
    AcctAdmin(Box<v1::AdminState>),
    /// sdiag: the owner's statistics (and a fresh start of them with `reset`).
    Diag {
        reset: bool,
        caller: Caller,
        reply: Reply<v1::DiagReply>,
    },
    Shutdown,
}

/// Runs a controller script (PrologSlurmctld, EpilogSlurmctld) with exactly `env`, for at
/// most five minutes; `Err` says how it failed and its first output line.
fn run_ctld_script(prog: &str, env: &[(String, String)]) -> Result<(), String> {
    use std::process::{Command, Stdio};
    let mut child = Command::new(prog)
        .env_clear()
        .envs(env.iter().cloned())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .current_dir("/")
        .spawn()
        .map_err(|e| format!("{prog}: {e}"))?;
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    loop {
        match child.try_wait().map_err(|e| e.to_string())? {
            Some(status) if status.success() => return Ok(()),
            Some(status) => {
                let mut out = String::new();
                if let Some(mut o) = child.stdout.take() {
                    let _ = std::io::Read::read_to_string(&mut o, &mut out);
                }
                return Err(format!("{status}: {}", out.lines().next().unwrap_or_default()));
            }
            None if std::time::Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{prog} timed out"));
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

pub fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

/// Live (not durable) facts about a node agent.
#[derive(Default)]
struct NodeLive {
    session: Option<(u64, NodeTx)>,
    /// The host the live session's credential names.
    host: String,
    registered: bool,
    last_seen: i64,
    not_responding: bool,
    boot_time: i64,
    start_time: i64,
    last_busy: i64,
    cpu_load: f64,
    free_mem_mb: u64,
    version: String,
    os: String,
    arch: String,
    confinement: String,
}

/// An sstat request waiting for its nodes' samples.
struct PendingStat {
    reply: Reply<v1::StepStatReply>,
    /// Node requests not answered yet.
    waiting: usize,
    steps: BTreeMap<String, Vec<v1::TaskUsage>>,
    /// Answer with what came by then.
    deadline: i64,
}

pub struct Owner {
    cfg: Arc<Config>,
    /// `SlurmUser`'s uid (with root, an administrator of the cluster).
    slurm_user_uid: Option<u32>,
    /// What srun's I/O keys are derived from (`StateSaveLocation/io.key`).
    io_secret: Vec<u8>,
    journal: Journal,
    durable: Durable,
    core: Core,
    live: BTreeMap<String, NodeLive>,
    watchers: HashMap<JobId, Vec<EventTx>>,
    step_waiters: HashMap<JobId, Vec<WaitingStep>>,
    /// When running allocations without a batch script (salloc, standalone srun) reach
    /// their time limit: nothing on a node enforces it for them.
    deadlines: BTreeSet<(i64, JobId)>,
    purge_queue: BTreeSet<(i64, JobId)>,
    /// sstat requests in flight, and which of them each node request belongs to (with its
    /// step's name).
    stats: HashMap<u64, PendingStat>,
    stat_parts: HashMap<u64, (u64, String)>,
    next_stat: u64,
    /// The owner's own channel (for PrologSlurmctld's end), and the jobs whose
    /// PrologSlurmctld runs: nothing of them is launched until it succeeds.
    self_tx: Option<std::sync::mpsc::Sender<Msg>>,
    /// Wakes the delivery to accounting when its outbox has something (see `crate::acct`).
    acct_wake: Option<Arc<tokio::sync::Notify>>,
    /// What sdiag shows of jobs and scheduling passes.
    diag: crate::diag::Counters,
    /// When this controller started (BOOT_TIME).
    diag_boot: i64,
    ctld_prolog: HashSet<JobId>,
    /// Nodes running the epilog of jobs that ended there: they take no new work (they show
    /// `comp`) until it is done.
    epilog_pending: HashMap<String, HashSet<JobId>>,
    view: Arc<ArcSwap<View>>,
    dirty: bool,
    after_commit: Vec<Box<dyn FnOnce() + Send>>,
    outbox: Vec<(String, controller_to_node::Msg)>,
    started_at: i64,
    last_periodic: i64,
    shutdown: bool,
    names: NameCache,
    /// Accounting's associations and QoS (from its last read, or the cache of it).
    acct_admin: Option<Box<crate::acct::Admin>>,
    /// The accounting limit groups handed to the scheduler, and those of them with caps.
    limit_caps: Vec<(Arc<str>, drover_sched::limits::Caps)>,
    limit_keys: HashSet<Arc<str>>,
    /// Fairshare, for the multifactor priority (`PriorityType=priority/multifactor`).
    fs: crate::fairshare::State,
    /// Jobs being preempted (QoS preemption): when their grace time is over, and what then
    /// becomes of them.
    preempting: BTreeMap<JobId, (i64, drover_model::conf::PreemptMode)>,
    /// The advance reservations active at the last look (their nodes show `RESERVED`), and
    /// as readers see them (rebuilt when they change, not on every publish).
    resv_active: Vec<String>,
    resv_view: Arc<Vec<v1::ResvInfo>>,
    /// A full or failing StateSaveLocation.
    storage: crate::storage::Storage,
}

/// User and group names by id, looked up once (NSS can be slow; ids rarely change names).
#[derive(Default)]
struct NameCache {
    users: HashMap<u32, String>,
    groups: HashMap<u32, String>,
    memberships: HashMap<String, Vec<String>>,
}

impl NameCache {
    fn user(&mut self, uid: u32) -> String {
        self.users
            .entry(uid)
            .or_insert_with(|| {
                nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
                    .ok()
                    .flatten()
                    .map(|u| u.name)
                    .unwrap_or_else(|| uid.to_string())
            })
            .clone()
    }
    /// Names of every group `user` belongs to (primary and supplementary), for `AllowGroups`.
    fn groups_of(&mut self, user: &str, gid: u32) -> Vec<String> {
        if let Some(g) = self.memberships.get(user) {
            return g.clone();
        }
        let gids = std::ffi::CString::new(user)
            .ok()
            .and_then(|u| nix::unistd::getgrouplist(&u, nix::unistd::Gid::from_raw(gid)).ok())
            .unwrap_or_else(|| vec![nix::unistd::Gid::from_raw(gid)]);
        let names: Vec<String> = gids.into_iter().map(|g| self.group(g.as_raw())).collect();
        self.memberships.insert(user.to_string(), names.clone());
        names
    }

    fn group(&mut self, gid: u32) -> String {
        self.groups
            .entry(gid)
            .or_insert_with(|| {
                nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(gid))
                    .ok()
                    .flatten()
                    .map(|g| g.name)
                    .unwrap_or_else(|| gid.to_string())
            })
            .clone()
    }
}

impl Owner {
    /// Rebuilds the state from the journal.
    pub fn recover(
        cfg: Arc<Config>,
        mut journal: Journal,
        rec: drover_journal::Recovered,
        view: Arc<ArcSwap<View>>,
    ) -> Result<Owner, String> {
        let legacy = rec.legacy;
        let mut durable = match rec.snapshot {
            Some(b) => Durable::decode(&b).map_err(|e| format!("cannot decode snapshot: {e}"))?,
            None => Durable::default(),
        };
        // Records go to accounting only where slurm.conf sends them there.
        if cfg.accounting_storage.is_none() {
            durable.acct = None;
        } else if durable.acct.is_none() {
            durable.acct = Some(Default::default());
        }
        for (at, b) in rec.records {
            durable.apply(decode_record(&b).map_err(|e| format!("cannot decode journal record: {e}"))?, Some(at));
        }
        durable.next_job_id = durable.next_job_id.max(cfg.first_job_id);
        // The journal files that hold jobs' scripts must all be there (they are read only
        // when a job launches: find out now, not then).
        for g in durable.blob_generations() {
            if !journal.has_generation(g) {
                let n = durable.jobs.values().filter(|j| j.blob.is_some_and(|b| b.generation == g)).count();
                return Err(format!(
                    "{} is missing: the scripts and environments of {n} jobs are in it. Nothing was changed; restore \
                     the file, or see `drover controller --check-state`",
                    journal.segment_path(g).display()
                ));
            }
        }
        if legacy {
            journal
                .snapshot(&durable.encode(), &durable.blob_generations())
                .map_err(|e| format!("moving the state to chained segments: {e}"))?;
        }
        // slurmctld keeps associations' usage in StateSaveLocation/assoc_usage too.
        let usage_path = std::path::Path::new(&cfg.state_save_location).join("assoc_usage");
        let mut o = Owner {
            slurm_user_uid: nix::unistd::User::from_name(&cfg.auth.slurm_user).ok().flatten().map(|u| u.uid.as_raw()),
            cfg,
            io_secret: Vec::new(),
            journal,
            durable,
            core: Core::new(),
            live: BTreeMap::new(),
            watchers: HashMap::new(),
            step_waiters: HashMap::new(),
            deadlines: BTreeSet::new(),
            purge_queue: BTreeSet::new(),
            stats: HashMap::new(),
            self_tx: None,
            acct_wake: None,
            diag: crate::diag::Counters::new(now(), Default::default()),
            diag_boot: now(),
            ctld_prolog: HashSet::new(),
            epilog_pending: HashMap::new(),
            stat_parts: HashMap::new(),
            next_stat: 1,
            view,
            dirty: true,
            after_commit: Vec::new(),
            outbox: Vec::new(),
            started_at: now(),
            last_periodic: 0,
            shutdown: false,
            names: NameCache::default(),
            acct_admin: None,
            limit_caps: Vec::new(),
            limit_keys: HashSet::new(),
            preempting: BTreeMap::new(),
            resv_active: Vec::new(),
            resv_view: Arc::default(),
            fs: crate::fairshare::State {
                usage: crate::fairshare::Usage::load(&usage_path),
                path: usage_path,
                ..Default::default()
            },
            storage: Default::default(),
        };
        if o.cfg.accounting_storage.is_some() {
            o.acct_admin = crate::acct::load_admin_cache(&crate::acct_cache_path(&o.cfg))
                .map(|st| Box::new(crate::acct::Admin::new(&o.cfg.cluster_name, st)));
        }
        o.load_config();
        o.refresh_limits(false);
        let jobs: Vec<Arc<Job>> = o.durable.jobs.values().cloned().collect();
        let t = now();
        for j in jobs {
            match j.status.state {
                JobState::Pending => o.core.handle(Event::Submitted(o.sched_job(&j))),
                JobState::Running | JobState::Completing | JobState::Suspended => {
                    if let Some(d) = Self::deadline(&j) {
                        o.deadlines.insert((d, j.id));
                    }
                    if let (Some(a), true) =
                        (&j.status.alloc, j.status.state == JobState::Suspended && j.status.state_desc == "PREEMPTED")
                    {
                        // Suspended by preemption: its resources stay lent until it resumes.
                        o.core.handle(Event::Suspended { job: j.id, alloc: Some((**a).clone()) });
                    } else if let Some(a) = &j.status.alloc {
                        let sj = o.sched_job(&j);
                        o.core.handle(Event::Running {
                            job: j.id,
                            alloc: (**a).clone(),
                            array: j.array_task(),
                            since: j.status.start_time,
                            limit: j.status.time_limit,
                            licenses: sj.more().licenses.clone(),
                            limits: sj.more().limits.clone(),
                            qos: sj.more().preempt.as_ref().map(|p| p.qos.clone()),
                            user: (sj.uid, sj.more().exclusive_user),
                        });
                    }
                    // Agents get SlurmdTimeout to report in before their jobs are given up.
                    for n in Self::busy_nodes(&j) {
                        o.live.entry(n).or_default().last_seen = t;
                    }
                }
                st => {
                    o.purge_queue.insert((j.status.end_time, j.id));
                    let outcome = if st == JobState::Completed { Outcome::Succeeded } else { Outcome::Failed };
                    o.core.handle(Event::Ended { job: j.id, outcome });
                }
            }
        }
        o.publish();
        Ok(o)
    }

    fn load_config(&mut self) {
        let names: Vec<String> = self.cfg.nodes.iter().map(|n| n.name.clone()).collect();
        // gres.conf beside slurm.conf: which CPUs are near each GPU (Cores=), for placement.
        let gres_conf = std::path::Path::new(&self.cfg.path)
            .parent()
            .and_then(|d| std::fs::read_to_string(d.join("gres.conf")).ok())
            .and_then(|t| drover_model::gres::GresConf::parse(&t).ok());
        for n in &self.cfg.nodes {
            let near = gres_conf.as_ref().map(|gc| drover_model::gres::gpu_cpus(gc, n)).unwrap_or_default();
            let links = gres_conf.as_ref().map(|gc| drover_model::gres::gpu_links(gc, n)).unwrap_or_default();
            self.core.handle(Event::NodeDefined(
                NodeRes::new(&n.name, n.cpus, n.real_memory_mb, n.features.clone(), n.weight)
                    .with_gres(&n.gres_list)
                    .with_gpu_cpus(near)
                    .with_gpu_links(links),
            ));
            let admin = self.durable.nodes.entry(n.name.clone()).or_insert_with(|| NodeAdmin {
                drain: n.state == "DRAIN",
                down: n.state == "DOWN",
                ..Default::default()
            });
            let _ = admin;
            self.live.entry(n.name.clone()).or_default();
        }
        self.live.retain(|k, _| names.contains(k));
        self.core.handle(Event::LicensesDefined(self.cfg.licenses.clone()));
        self.core.handle(Event::TopologyDefined(self.cfg.topology.clone()));
        self.core.handle(Event::Configure(drover_sched::SchedConfig {
            policy: if self.cfg.backfill { drover_sched::Policy::Conservative } else { drover_sched::Policy::Fcfs },
            max_job_test: self.cfg.bf_max_job_test as usize,
            window: i64::from(self.cfg.bf_window_min) * 60,
            interval: i64::from(self.cfg.bf_interval),
            preempt_exempt: self.cfg.preempt_exempt_secs as i64,
            max_job_user: self.cfg.bf_max_job_user as usize,
            min_age_reserve: i64::from(self.cfg.bf_min_age_reserve),
        }));
        for p in &self.cfg.partitions {
            self.core.handle(Event::PartitionDefined(PartitionRes {
                name: p.name.clone(),
                nodes: p.nodes.clone(),
                down: match p.state {
                    PartitionState::Up => None,
                    PartitionState::Down | PartitionState::Drain => Some(PendingReason::PartitionDown),
                    PartitionState::Inactive => Some(PendingReason::PartitionInactive),
                },
                max_time: p.max_time,
                default_time: p.default_time,
                max_nodes: p.max_nodes,
                min_nodes: p.min_nodes,
            }));
        }
        self.resvs_changed();
        let names: Vec<String> = self.live.keys().cloned().collect();
        for n in names {
            self.refresh_node(&n);
        }
    }

    /// Runs until shutdown. Every pass: take a batch of messages, schedule, commit, act.
    pub fn run(mut self, rx: Receiver<Msg>) {
        loop {
            let first = match rx.recv_timeout(Duration::from_millis(1000)) {
                Ok(m) => Some(m),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => break,
            };
            if let Some(m) = first {
                self.handle(m);
                let mut n = 1;
                while n < 1024 {
                    match rx.try_recv() {
                        Ok(m) => {
                            self.handle(m);
                            n += 1;
                        }
                        Err(_) => break,
                    }
                }
            }
            let t = now();
            if t != self.last_periodic {
                self.last_periodic = t;
                self.periodic(t);
            }
            let (before, started) = (self.core.pass_stats(), std::time::Instant::now());
            self.schedule(t);
            let us = started.elapsed().as_micros() as u64;
            self.diag.pass(before, self.core.pass_stats(), us, t);
            let res = self.journal.commit();
            if !self.storage.committed(&self.journal, res, t) {
                // Nothing may be acknowledged that is not durable: the batch stays buffered
                // and its replies, launches and readers' view wait for a later pass to write it.
                if self.shutdown {
                    break;
                }
                continue;
            }
            for f in self.after_commit.drain(..) {
                f();
            }
            for (node, msg) in std::mem::take(&mut self.outbox) {
                if let Some((_, tx)) = self.live.get(&node).and_then(|l| l.session.as_ref()) {
                    let _ = tx.send(Ok(v1::ControllerToNode { msg: Some(msg) }));
                }
            }
            // Committed changes go to accounting at once (sacct agrees with squeue).
            if let (Some(w), Some(out)) = (&self.acct_wake, &self.durable.acct) {
                if !out.dirty.is_empty() || !out.gone.is_empty() {
                    w.notify_one();
                }
            }
            if self.dirty {
                self.publish();
            }
            if self.journal.records_since_snapshot > 20_000 && self.storage.may_snapshot(t) {
                let live = self.durable.blob_generations();
                if let Err(e) = self.journal.snapshot(&self.durable.encode(), &live) {
                    self.storage.snapshot_failed(&e, t);
                }
            }
            if self.shutdown {
                break;
            }
        }
    }

    fn record(&mut self, r: Record) {
        let at = self.journal.append(&encode_record(&r));
        self.durable.apply(r, Some(at));
        self.dirty = true;
    }

    fn set_status(&mut self, id: JobId, status: JobStatus) {
        self.record(Record::Status { id, status });
    }

    fn reply<T: Send + 'static>(&mut self, tx: Reply<T>, v: Result<T, Status>) {
        self.after_commit.push(Box::new(move || {
            let _ = tx.send(v);
        }));
    }

    fn handle(&mut self, m: Msg) {
        match m {
            Msg::Submit { spec, caller, test_only, reply } => {
                let r = match self.storage.refusal(&self.journal).filter(|_| !test_only) {
                    Some(no) => Err(no),
                    None => self.submit(*spec, caller, test_only),
                };
                self.reply(reply, r);
            }
            Msg::Cancel { req, caller, reply } => {
                let r = self.cancel(req, caller);
                self.reply(reply, Ok(r));
            }
            Msg::JobControl { req, caller, reply } => {
                let r = match self.storage.refusal(&self.journal) {
                    Some(no) => Err(no),
                    None => self.job_control(req, caller),
                };
                self.reply(reply, r);
            }
            Msg::UpdateNode { req, caller, reply } => {
                let r = self.update_node(req, caller);
                self.reply(reply, r);
            }
            Msg::Reservation { req, caller, reply } => {
                let r = match self.storage.refusal(&self.journal) {
                    Some(no) => Err(no),
                    None => self.reservation(req, caller),
                };
                self.reply(reply, r);
            }
            Msg::Explain { job, reply } => {
                let r = crate::explain::reply(self.core.explain(job, now()));
                self.reply(reply, Ok(r));
            }
            Msg::Reconfigure { caller, reply } => {
                let r = self.reconfigure(caller);
                self.reply(reply, r);
            }
            Msg::CreateStep { spec, wait, caller, reply } => match self.storage.refusal(&self.journal) {
                Some(no) => self.reply(reply, Err(no)),
                None => self.create_step(*spec, wait, caller, reply),
            },
            Msg::StepStat { req, caller, reply } => self.step_stat(req, caller, reply),
            Msg::CtldPrologDone { job, result } => self.ctld_prolog_done(job, result),
            Msg::AttachStep { req, caller, reply } => {
                let r = self.attach_step(req, caller);
                self.reply(reply, r);
            }
            Msg::CompleteJob { req, caller, reply } => {
                let r = self.complete_job(req, caller);
                self.reply(reply, r);
            }
            Msg::Watch { job, tx, reply } => match self.durable.jobs.get(&job) {
                None => {
                    let _ = reply.send(Err(Status::not_found("Invalid job id specified")));
                }
                Some(j) => {
                    let j = j.clone();
                    if j.status.state != JobState::Pending {
                        let _ = tx.send(v1::JobEvent { job: Some(crate::view::job_info(&j)), step: None });
                    }
                    if !j.status.state.is_finished() {
                        self.watchers.entry(job).or_default().push(tx);
                    }
                    let _ = reply.send(Ok(()));
                }
            },
            Msg::NodeRegister { reg, tx, session, host, from } => self.node_register(reg, tx, session, host, from),
            Msg::FromNode { node, session, msg } => {
                let t = now();
                if let Some(l) = self.live.get_mut(&node) {
                    if l.session.as_ref().map(|s| s.0) != Some(session) {
                        return;
                    }
                    l.last_seen = t;
                    if l.not_responding {
                        l.not_responding = false;
                        self.refresh_node(&node);
                    }
                }
                match msg {
                    node_to_controller::Msg::Heartbeat(h) => {
                        if let Some(l) = self.live.get_mut(&node) {
                            l.cpu_load = h.cpu_load;
                            l.free_mem_mb = h.free_mem_mb;
                            self.dirty = true;
                        }
                    }
                    node_to_controller::Msg::Ended(e) => self.job_ended_on(&node, e),
                    node_to_controller::Msg::Problem(p) => self.node_problem(&node, p),
                    node_to_controller::Msg::Stat(r) => self.stat_reply(r),
                    node_to_controller::Msg::EpilogDone(d) => {
                        if let Some(set) = self.epilog_pending.get_mut(&node) {
                            set.remove(&d.job_id);
                            if set.is_empty() {
                                self.epilog_pending.remove(&node);
                            }
                            self.refresh_node(&node);
                        }
                    }
                    node_to_controller::Msg::Started(_) | node_to_controller::Msg::Register(_) => {}
                }
            }
            Msg::NodeGone { node, session } => {
                if let Some(l) = self.live.get_mut(&node) {
                    if l.session.as_ref().map(|s| s.0) == Some(session) {
                        l.session = None;
                    }
                }
            }
            Msg::AcctTake { max, reply } => {
                let batch = self.acct_take(max);
                self.reply(reply, Ok(batch));
            }
            Msg::AcctDone { jobs, gone } => self.acct_done(jobs, gone),
            Msg::AcctAdmin(st) => {
                // Read every few seconds; only a change is worth a pass over the queue.
                if self.acct_admin.as_deref().map(|a| &a.st) != Some(&*st) {
                    self.acct_admin = Some(Box::new(crate::acct::Admin::new(&self.cfg.cluster_name, *st)));
                    self.refresh_limits(true);
                    self.fs.stale = true;
                    if self.cfg.preempt_qos && !self.cfg.enforce.limits {
                        // Which QoS preempt which came with it (refresh_limits resends
                        // waiting jobs only where limits are enforced).
                        let pending: Vec<Arc<Job>> = self
                            .durable
                            .jobs
                            .values()
                            .filter(|j| j.status.state == JobState::Pending)
                            .cloned()
                            .collect();
                        for j in pending {
                            self.core.handle(Event::Updated(self.sched_job(&j)));
                        }
                    }
                }
            }
            Msg::Diag { reset, caller, reply } => {
                let t = now();
                if reset && !self.operator(caller) {
                    self.reply(reply, Err(Status::permission_denied("Access/permission denied")));
                    return;
                }
                if reset {
                    self.diag = crate::diag::Counters::new(t, self.core.pass_stats());
                }
                let mut r = self.diag.reply(self.core.pass_stats(), t);
                for j in self.durable.jobs.values() {
                    match j.status.state {
                        JobState::Pending => {
                            r.jobs_pending += j.array.as_ref().map_or(1, |a| a.pending.len().max(1)) as u32
                        }
                        JobState::Running | JobState::Suspended | JobState::Completing => r.jobs_running += 1,
                        _ => {}
                    }
                }
                r.dbd_queue = self.durable.acct.as_ref().map_or(0, |o| (o.dirty.len() + o.gone.len()) as u32);
                self.reply(reply, Ok(r));
            }
            Msg::Shutdown => self.shutdown = true,
        }
    }

    // ---- multifactor priority ----

    /// What a job's run counts for fairshare and `GrpTRESMins`: its account and user, what it
    /// holds (CPUs, memory, nodes, billing (its CPUs), GPUs), and its QoS's `UsageFactor`.
    fn fairshare_of(&self, j: &Job) -> (String, String, [f64; 5], f64) {
        let w = j.spec.wire();
        let account = drover_proto::jobinfo::account(&w).to_string();
        let qos = drover_proto::jobinfo::qos(&w);
        let nodes = j.status.alloc.as_ref().map_or(&[][..], |a| a.nodes.as_slice());
        let cpus = nodes.iter().map(|n| n.cpu_ids.len()).sum::<usize>() as f64;
        let mem = nodes.iter().map(|n| n.mem_mb).sum::<u64>() as f64;
        let gpus = nodes.iter().map(|n| n.gpus().len()).sum::<usize>() as f64;
        let factor = self.acct_admin.as_deref().and_then(|a| a.qos.iter().find(|q| q.name == qos)).map_or(1.0, |q| {
            if q.usage_factor >= 0.0 {
                q.usage_factor
            } else {
                1.0
            }
        });
        (account, w.user.clone(), [cpus, mem, nodes.len() as f64, cpus, gpus], factor)
    }

    /// Credits a job's run up to `to` to its association: from where it was last credited,
    /// else from `since` (its start, or the last calculation before this controller started).
    fn credit_run(&mut self, j: &Job, since: i64, to: i64) {
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
        self.fs.stale = true;
    }

    /// `PriorityCalcPeriod`: usage decays to `t`, running jobs' runs since the last
    /// calculation count, the usage is saved, and priorities follow.
    fn priority_calc(&mut self, t: i64) {
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
        self.refresh_priorities(t);
    }

    /// `PriorityUsageResetPeriod`: usage starts from nothing when a period begins on the
    /// local calendar (`NOW`: once, when this controller starts).
    fn reset_usage_if_due(&mut self, t: i64) {
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

    /// Fair Tree from the current usage, then every waiting job's priority; the scheduler
    /// hears of those that changed.
    fn refresh_priorities(&mut self, t: i64) {
        self.fs.stale = false;
        if let Some(st) = self.acct_admin.as_deref() {
            // TRES-minutes running jobs still hold (their time limit less the time they ran).
            let mut run_mins: std::collections::HashMap<(String, String), [f64; 5]> = Default::default();
            for j in self.durable.jobs.values().filter(|j| j.status.state == JobState::Running) {
                let Some(limit) = j.status.time_limit else { continue };
                let left = (j.status.start_time + limit as i64 + j.status.suspended_secs - t).max(0) as f64 / 60.0;
                let (account, user, held, _) = self.fairshare_of(j);
                let e = run_mins.entry((account, user)).or_default();
                for (k, n) in held.iter().enumerate() {
                    e[k] += n * left;
                }
            }
            let (factors, mut rows) = crate::fairshare::compute(st, &self.cfg.cluster_name, &self.fs.usage);
            crate::fairshare::add_run_mins(&mut rows, &run_mins);
            self.fs.factors = factors;
            self.fs.rows = Arc::new(rows);
            self.dirty = true;
        }
        // A priority an administrator fixed stays as it is.
        let pending: Vec<Arc<Job>> = self
            .durable
            .jobs
            .values()
            .filter(|j| j.status.state == JobState::Pending && !j.status.priority_set)
            .cloned()
            .collect();
        // Usage moved: GrpTRESMins may now hold (or free) waiting jobs.
        let minutes_limits = self.cfg.enforce.limits
            && self.acct_admin.as_deref().is_some_and(|a| {
                a.assocs.iter().any(|x| x.limits.as_ref().is_some_and(|l| !l.grp_tres_mins.is_empty()))
            });
        let mut prio = std::collections::HashMap::with_capacity(pending.len());
        for j in pending {
            let spec = j.spec.unpack();
            let (p, f) = self.multifactor_priority(&spec, j.status.eligible_time, t);
            prio.insert(j.id, drover_sched::priority::weighted(&self.cfg.priority, &f));
            if u64::from(p) != j.status.priority || minutes_limits {
                if let Some(m) = self.durable.jobs.get_mut(&j.id) {
                    // Derived, like reasons: recomputed after recovery, never journalled.
                    Arc::make_mut(m).status.priority = u64::from(p);
                }
                if let Some(m) = self.durable.jobs.get(&j.id).cloned() {
                    self.core.handle(Event::Updated(self.sched_job(&m)));
                }
                self.dirty = true;
            }
        }
        self.fs.prio = Arc::new(prio);
        self.dirty = true;
    }

    /// A job's multifactor priority and its factors.
    fn multifactor_priority(&self, spec: &JobSpec, eligible: i64, t: i64) -> (u32, drover_sched::priority::Factors) {
        use drover_sched::priority::{self, ClusterSize, JobInput};
        let w = crate::policy::JobPolicy::of(spec);
        let admin = self.acct_admin.as_deref();
        let qos_prio = |name: &str| admin.and_then(|a| a.qos.iter().find(|q| q.name == name)).map_or(0, |q| q.priority);
        let max_qos = admin.map_or(0, |a| a.qos.iter().map(|q| q.priority).max().unwrap_or(0));
        let assoc_prio = admin
            .and_then(|a| a.assoc(w.account, w.user, ""))
            .and_then(|a| a.limits.as_ref().and_then(|l| l.priority))
            .unwrap_or(0);
        let max_assoc = admin.map_or(0, |a| {
            a.assocs.iter().filter_map(|x| x.limits.as_ref().and_then(|l| l.priority)).max().unwrap_or(0)
        });
        let input = JobInput {
            eligible: if spec.hold { 0 } else { eligible },
            fairshare: self.fs.factors.get(&(w.account.to_string(), w.user.to_string())).copied().unwrap_or(0.0),
            min_nodes: spec.min_nodes.unwrap_or(1),
            cpus: spec.task_count().max(1) * spec.cpus_per_task().max(1),
            partition: (1, 1),
            qos: (qos_prio(w.qos), max_qos),
            assoc: (assoc_prio, max_assoc),
            nice: i64::from(spec.nice),
        };
        let size =
            ClusterSize { nodes: self.cfg.nodes.len() as u32, cpus: self.cfg.nodes.iter().map(|n| n.cpus).sum() };
        let f = priority::factors(&self.cfg.priority, &input, size, t);
        (priority::priority(&self.cfg.priority, &f), f)
    }

    // ---- jobs ----

    fn sched_job(&self, j: &Job) -> SchedJob {
        self.sched_job_of(j.id, &j.spec.unpack(), &j.status, j.array.as_deref())
    }

    /// What the scheduler sees of a job: its request, with what the controller knows that
    /// the scheduler does not (singletons, limits, tiers, preemption, node properties).
    fn sched_job_of(
        &self,
        id: JobId,
        spec: &JobSpec,
        status: &JobStatus,
        array: Option<&crate::state::ArrayPart>,
    ) -> SchedJob {
        let mut sj = Self::sched_job_from(id, spec, status, array);
        if let Some(tmp) = spec.tmp_mb {
            // --tmp: nodes with less TmpDisk are out (what they hold is not tracked).
            let small = self.cfg.nodes.iter().filter(|n| n.tmp_disk_mb < tmp).map(|n| n.name.clone());
            sj.more_mut().exclude.extend(small);
        }
        self.add_singleton(&mut sj, spec);
        self.apply_limits(&mut sj, spec);
        self.apply_tier(&mut sj, spec);
        self.apply_preempt(&mut sj, spec);
        sj
    }

    /// Partitions of a higher `PriorityTier` come first in the scheduler's queue, whatever
    /// preempts: the tier rides above the priority in the queue's key.
    fn apply_tier(&self, sj: &mut SchedJob, spec: &JobSpec) {
        if let Some(p) = spec.partitions.first().and_then(|p| self.cfg.partition(p)) {
            sj.priority |= u64::from(p.priority_tier.min(u32::from(u16::MAX))) << 32;
        }
    }

    /// QoS preemption (`PreemptType=preempt/qos`): the job's QoS, and the QoS whose running
    /// jobs it may preempt (its QoS's `Preempt`, less those whose mode is off).
    fn apply_preempt(&self, sj: &mut SchedJob, spec: &JobSpec) {
        if self.cfg.preempt_partition {
            // Partition preemption (`preempt/partition_prio`): the job's class is its
            // partition; it may preempt those of a lower tier whose mode is not off.
            let Some(mine) = spec.partitions.first().and_then(|p| self.cfg.partition(p)) else { return };
            let can_preempt = self
                .cfg
                .partitions
                .iter()
                .filter(|p| p.priority_tier < mine.priority_tier)
                .filter(|p| self.preempt_mode_of(&partition_class(&p.name)) != drover_model::conf::PreemptMode::Off)
                .map(|p| intern(&partition_class(&p.name)))
                .collect();
            sj.more_mut().preempt =
                Some(drover_sched::Preempt { qos: intern(&partition_class(&mine.name)), can_preempt });
            return;
        }
        if !self.cfg.preempt_qos {
            return;
        }
        let qos = crate::policy::JobPolicy::of(spec).qos;
        let admin = self.acct_admin.as_deref();
        let can_preempt = admin
            .and_then(|a| a.qos.iter().find(|q| q.name == qos))
            .map(|q| {
                q.preempt
                    .iter()
                    .filter(|victim| self.preempt_mode_of(victim) != drover_model::conf::PreemptMode::Off)
                    .map(|v| intern(v))
                    .collect()
            })
            .unwrap_or_default();
        sj.more_mut().preempt = Some(drover_sched::Preempt { qos: intern(qos), can_preempt });
    }

    /// What preemption does to a job of QoS `qos`: its own `PreemptMode`, else the cluster's.
    fn preempt_mode_of(&self, qos: &str) -> drover_model::conf::PreemptMode {
        use drover_model::conf::PreemptMode;
        if let Some(part) = qos.strip_prefix(PARTITION_CLASS) {
            return self.cfg.partition(part).and_then(|p| p.preempt_mode).unwrap_or(self.cfg.preempt_mode);
        }
        let own = self
            .acct_admin
            .as_deref()
            .and_then(|a| a.qos.iter().find(|q| q.name == qos))
            .map(|q| q.preempt_mode.clone());
        match own.as_deref().map(str::to_ascii_lowercase).as_deref() {
            Some("cancel") => PreemptMode::Cancel,
            Some("requeue") => PreemptMode::Requeue,
            Some("suspend") => PreemptMode::Suspend,
            Some("off") => PreemptMode::Off,
            _ => self.cfg.preempt_mode,
        }
    }

    /// The scheduler chose running `victim` to make room for waiting `by`: its processes get
    /// SIGTERM now and, once its QoS's `GraceTime` is over, it is requeued (or cancelled,
    /// as its mode says); without a grace time at once.
    fn preempt_job(&mut self, victim: JobId, by: JobId, t: i64) {
        use drover_model::conf::PreemptMode;
        let Some(j) = self.durable.jobs.get(&victim).cloned() else { return };
        if j.status.state != JobState::Running || self.preempting.contains_key(&victim) {
            return;
        }
        // Its class: its partition (partition_prio) or its QoS.
        let qos = if self.cfg.preempt_partition {
            partition_class(&j.status.partition)
        } else {
            crate::policy::JobPolicy::of(&j.spec.unpack()).qos.to_string()
        };
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
        let grace = match qos.strip_prefix(PARTITION_CLASS) {
            Some(part) => self.cfg.partition(part).map_or(0, |p| i64::from(p.grace_time)),
            None => self
                .acct_admin
                .as_deref()
                .and_then(|a| a.qos.iter().find(|q| q.name == qos))
                .map_or(0, |q| q.grace_time_secs as i64),
        };
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
    fn preempt_requeues(&self, j: &Job) -> bool {
        let mode = self.preempting.get(&j.id).map(|&(_, m)| m);
        mode == Some(drover_model::conf::PreemptMode::Requeue) && j.batch && j.spec.unpack().requeue != Some(false)
    }

    /// A preempted job's grace time is over: it is requeued (a batch job that may be) or
    /// ends `PREEMPTED`.
    fn preempt_now(&mut self, id: JobId) {
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
    fn apply_limits(&self, sj: &mut SchedJob, spec: &JobSpec) {
        let (Some(st), true) = (self.acct_admin.as_deref(), self.cfg.enforce.limits) else { return };
        let j = crate::policy::JobPolicy::of(spec);
        let (groups, mut policy) = crate::policy::job_limits(&self.cfg, st, &self.limit_keys, &j, &sj.need());
        if policy.is_none() && self.cfg.priority.multifactor {
            // GrpTRESMins, against the usage fairshare keeps (as in Slurm, with multifactor
            // priority only).
            policy = crate::policy::over_minutes(&self.cfg, st, &j, &sj.need(), &self.fs.usage);
        }
        if !groups.is_empty() || policy.is_some() {
            let m = sj.more_mut();
            m.limits = groups;
            m.policy = policy;
        }
    }

    /// Accounting's associations or QoS changed (or were read): the scheduler gets the new
    /// caps, and with `resend`, every pending job its groups and per-job limit again.
    fn refresh_limits(&mut self, resend: bool) {
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
    fn over_submit_limit(&self, spec: &JobSpec) -> bool {
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
    fn add_singleton(&self, sj: &mut SchedJob, spec: &JobSpec) {
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
    fn dependency_target_known(&self, d: &drover_model::job::Dependency) -> bool {
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

    fn sched_job_from(id: JobId, s: &JobSpec, status: &JobStatus, array: Option<&crate::state::ArrayPart>) -> SchedJob {
        let min_nodes = s.min_nodes.unwrap_or(1).max(1);
        let max_nodes = s.max_nodes.or(s.min_nodes);
        // -O: allocated as if one task per node were asked for (its -c CPUs on each); the
        // tasks are laid out over those nodes when it starts (see `overcommit_layout`).
        let overcommit = s.overcommit && !s.exclusive;
        SchedJob {
            id,
            priority: status.priority,
            partitions: s.partitions.iter().map(|p| intern(p)).collect(),
            min_nodes,
            max_nodes,
            ntasks: if overcommit { min_nodes } else { s.task_count().max(min_nodes) },
            cpus_per_task: s.cpus_per_task(),
            mem_per_node_mb: s.mem_per_node_mb,
            mem_per_cpu_mb: s.mem_per_cpu_mb,
            time_limit: s.time_limit,
            exclusive: s.exclusive,
            uid: s.uid,
            queued: status.eligible_time,
            hold: status.hold.map(|h| match h {
                HoldKind::User | HoldKind::ResvDeleted => Hold::User,
                HoldKind::Admin | HoldKind::LaunchFailed => Hold::Admin,
            }),
            more: SchedMore {
                ntasks_per_node: if overcommit { None } else { s.ntasks_per_node },
                nodelist: s.nodelist.clone(),
                exclude: s.exclude.clone(),
                constraint: s.constraint.as_deref().and_then(|c| Constraint::parse(c).ok()),
                begin_time: s.begin_time,
                dependency: s.dependency.clone(),
                singleton_after: Vec::new(),
                array: array.map(|a| SchedArray {
                    array_id: a.array_job_id,
                    throttle: a.throttle,
                    task: a.task_id,
                    pending: a.pending.clone(),
                }),
                gres: Self::gres_needs(s),
                licenses: Self::licenses_of(s),
                limits: Vec::new(),
                policy: None,
                preempt: None,
                reservation: s.reservation.as_deref().map(intern),
                switches: s.switches.map(|n| (n, status.eligible_time + i64::from(s.switch_wait.unwrap_or(0)))),
                exclusive_user: s.exclusive_user,
                contiguous: s.contiguous,
                spread: s.spread_job,
                use_min_nodes: s.use_min_nodes,
                segment: s.segment,
            }
            .boxed(),
        }
    }

    fn licenses_of(s: &JobSpec) -> Vec<(String, u32)> {
        s.licenses.as_deref().and_then(|l| drover_model::job::parse_licenses(l).ok()).unwrap_or_default()
    }

    /// A request's GRES as the scheduler places them: per node, and per task. `--gpus` (for
    /// the whole job) is spread evenly over the job's minimum node count.
    fn gres_needs(s: &JobSpec) -> Vec<drover_sched::gres::GresNeed> {
        use drover_sched::gres::GresNeed;
        let mut out: Vec<GresNeed> = s
            .gres
            .iter()
            .chain(s.gpus_per_node.iter())
            .map(|g| GresNeed { name: g.name.clone(), kind: g.kind.clone(), per_node: g.count, per_task: 0 })
            .collect();
        if let Some(g) = &s.gpus {
            let nodes = u64::from(s.min_nodes.unwrap_or(1).max(1));
            out.push(GresNeed {
                name: g.name.clone(),
                kind: g.kind.clone(),
                per_node: g.count.div_ceil(nodes),
                per_task: 0,
            });
        }
        if let Some(g) = &s.gpus_per_task {
            out.push(GresNeed { name: g.name.clone(), kind: g.kind.clone(), per_node: 0, per_task: g.count });
        }
        out
    }

    fn submit(&mut self, mut spec: JobSpec, caller: Caller, test_only: bool) -> Result<v1::SubmitReply, Status> {
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
                Arc::make_mut(&mut self.fs.prio).insert(id, drover_sched::priority::weighted(&self.cfg.priority, &f));
                u64::from(p)
            }
            None => u64::from(basic_priority(id, spec.nice)),
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

    fn schedule(&mut self, t: i64) {
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
                    if self.cfg.kill_invalid_depend =>
                {
                    // SchedulerParameters=kill_invalid_depend: a job that can never run ends.
                    self.end_pending(job, None, PendingReason::DependencyNeverSatisfied, t);
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

    fn start_job(&mut self, id: JobId, alloc: drover_model::alloc::Allocation, time_limit: Option<u64>, t: i64) {
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
    fn launch_started(&mut self, job: &Job) {
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
    fn start_extern_step(&mut self, job: &Job, alloc: &drover_model::alloc::Allocation) {
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
    fn io_key(&self, job: JobId, step: Option<StepId>, submit_time: i64) -> Vec<u8> {
        drover_proto::auth::io_key_for(&self.io_secret, job, step, submit_time)
    }

    /// Slurm's environment for PrologSlurmctld and EpilogSlurmctld.
    fn ctld_script_env(&self, j: &Job, context: &str) -> Vec<(String, String)> {
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
    fn ctld_prolog_done(&mut self, id: JobId, result: Result<(), String>) {
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
    fn full_job(&self, job: &Job) -> Result<Job, String> {
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
    fn send_launch(&mut self, job: &Job, only: Option<&str>) {
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
    fn launch_msg(
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

    fn notify(&mut self, job: &Job) {
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
    fn notify_step(&mut self, step: v1::StepInfo) {
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
    fn signal_node(&mut self, node: &str, job: JobId, step: Option<StepId>, signal: i32, terminate: bool) {
        let batch_only = step == Some(BATCH_STEP);
        let step_id = step.filter(|s| *s != BATCH_STEP);
        let msg = v1::Signal { job_id: job, signal, batch_only, terminate, step_id, ..Default::default() };
        self.outbox.push((node.to_string(), controller_to_node::Msg::Signal(msg)));
    }

    /// Asks `node` to send `signal` to every step of a job there, not its batch script
    /// (`scancel --signal` without `--batch` or `--full`).
    fn signal_steps(&mut self, node: &str, job: JobId, signal: i32) {
        let msg = v1::Signal { job_id: job, signal, steps_only: true, ..Default::default() };
        self.outbox.push((node.to_string(), controller_to_node::Msg::Signal(msg)));
    }

    /// Nodes where something of the job runs: its batch script or any of its steps.
    fn busy_nodes(j: &Job) -> Vec<String> {
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
    fn deadline(j: &Job) -> Option<i64> {
        if j.batch || j.status.state != JobState::Running {
            return None;
        }
        j.status.time_limit.map(|l| j.status.start_time + l as i64 + j.status.suspended_secs)
    }

    fn job_ended_on(&mut self, node: &str, e: v1::EndedJob) {
        let ack = controller_to_node::Msg::EndedAck(v1::Ack { job_id: e.job_id, step_id: e.step_id });
        self.outbox.push((node.to_string(), ack));
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
    fn finish(&mut self, id: JobId, mut st: JobStatus, how: &str, end: i64) {
        let requeue = st.state_desc == "REQUEUE" || how == "REQUEUE";
        match how {
            "FAILED_LAUNCH" | "NODE_FAIL" => self.diag.failed += 1,
            _ if !requeue => self.diag.completed += 1,
            _ => {}
        }
        let preempted = self.preempting.remove(&id).is_some() && st.state_desc == "PREEMPTED";
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
        let state = if preempted {
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
        };
        if how.is_empty() {
            // A normal end needs no description; a failed launch keeps its reason.
            st.state_desc.clear();
        }
        st.state = state;
        st.end_time = end;
        st.reason = PendingReason::None;
        st.nodes_running.clear();
        let nodes: Vec<String> = st.alloc.as_ref().map(|a| a.node_names()).unwrap_or_default();
        self.set_status(id, st);
        let outcome = if state == JobState::Completed { Outcome::Succeeded } else { Outcome::Failed };
        self.core.handle(Event::Ended { job: id, outcome });
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

    // ---- steps ----

    /// The job is over (or requeued): what still runs of its steps is terminated, and step
    /// requests waiting for room in it fail.
    fn end_steps_of(&mut self, id: JobId, st: &JobStatus) {
        self.deadlines.retain(|&(_, j)| j != id);
        for w in self.step_waiters.remove(&id).unwrap_or_default() {
            self.reply(w.reply, Err(Status::failed_precondition("Job/step already completing or completed")));
        }
        let Some(j) = self.durable.jobs.get(&id).cloned() else { return };
        let mut nodes: Vec<String> = Vec::new();
        for s in j.running_steps() {
            for n in &s.nodes_running {
                if !nodes.contains(n) && !st.nodes_running.contains(n) {
                    nodes.push(n.clone());
                }
            }
        }
        for n in nodes {
            self.signal_node(&n, id, None, 0, true);
        }
    }

    /// sstat: asks every node running the steps asked about for a sample now; the answer
    /// goes out when all have answered (or after two seconds, with what came).
    fn step_stat(&mut self, req: v1::StepStatRequest, caller: Caller, reply: Reply<v1::StepStatReply>) {
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
    fn attach_step(&mut self, req: v1::AttachRequest, caller: Caller) -> Result<v1::StepCreateReply, Status> {
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

    fn stat_reply(&mut self, r: v1::StatReply) {
        let Some((id, step)) = self.stat_parts.remove(&r.req_id) else { return };
        let Some(p) = self.stats.get_mut(&id) else { return };
        p.steps.entry(step).or_default().extend(r.tasks);
        p.waiting -= 1;
        if p.waiting == 0 {
            let p = self.stats.remove(&id).expect("invariant: just found");
            self.answer_stat(p);
        }
    }

    fn answer_stat(&mut self, p: PendingStat) {
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

    fn create_step(&mut self, spec: v1::StepSpec, wait: bool, caller: Caller, reply: Reply<v1::StepCreateReply>) {
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
    fn try_step(&mut self, spec: &v1::StepSpec, caller: Caller) -> Result<v1::StepCreateReply, Status> {
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
    fn retry_waiting_steps(&mut self, job: JobId) {
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
    fn step_ended_on(&mut self, node: &str, step_id: StepId, e: v1::EndedJob) {
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
    fn cancel_step(&mut self, t: &v1::JobTarget, signal: i32, graceful: bool, caller: Caller) -> v1::CancelResult {
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
    fn complete_job(&mut self, req: v1::CompleteRequest, caller: Caller) -> Result<v1::Empty, Status> {
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

    fn can_modify(&self, j: &Job, caller: Caller) -> bool {
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
    fn admin_level(&self, uid: u32) -> Option<String> {
        let admin = self.acct_admin.as_deref()?;
        // Few users have a level: look the name up only when someone has one.
        if admin.st.users.iter().all(|u| matches!(u.admin_level.as_str(), "" | "None")) {
            return None;
        }
        let name = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)).ok().flatten()?.name;
        admin.user(&name).map(|u| u.admin_level.clone()).filter(|l| l != "None")
    }

    fn select_jobs(&self, req: &v1::CancelRequest) -> Vec<JobId> {
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

    fn cancel(&mut self, mut req: v1::CancelRequest, caller: Caller) -> v1::CancelReply {
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
        let named = req.job_ids.is_empty() && req.targets.is_empty();
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
        for (target, id) in ids {
            let id = match id {
                Ok(id) => id,
                Err(e) => {
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
    fn end_pending(&mut self, id: JobId, by: Option<u32>, reason: PendingReason, t: i64) {
        let Some(j) = self.durable.jobs.get(&id) else { return };
        let mut st = j.status.clone();
        st.cancelled_by = by;
        st.state = JobState::Cancelled;
        st.end_time = t;
        st.start_time = t;
        st.reason = reason;
        self.set_status(id, st);
        self.core.handle(Event::Ended { job: id, outcome: Outcome::Failed });
        self.purge_queue.insert((t, id));
        let job = self.durable.jobs.get(&id).cloned().expect("invariant: exists");
        self.notify(&job);
    }

    fn job_control(&mut self, req: v1::JobControlRequest, caller: Caller) -> Result<v1::JobControlReply, Status> {
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
    fn resolve(
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
    fn split_task(&mut self, array: JobId, task: u32) -> Option<JobId> {
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

    fn job_control_one(&mut self, req: &v1::JobControlRequest, id: JobId, caller: Caller) -> Result<(), String> {
        let j = self.durable.jobs.get(&id).cloned().ok_or("Invalid job id specified")?;
        if !self.can_modify(&j, caller) {
            return Err("Access/permission denied".into());
        }
        let mut st = j.status.clone();
        match req.action.as_str() {
            "hold" | "uhold" => {
                if j.status.state != JobState::Pending {
                    return Err("Job is no longer pending execution".into());
                }
                st.hold =
                    Some(if req.action == "hold" && self.operator(caller) { HoldKind::Admin } else { HoldKind::User });
                self.set_status(id, st);
                self.core.handle(Event::Updated(self.sched_job(&self.durable.jobs[&id])));
            }
            "release" => {
                if j.status.state != JobState::Pending {
                    return Err("Job is no longer pending execution".into());
                }
                if matches!(j.status.hold, Some(HoldKind::Admin | HoldKind::LaunchFailed)) && !self.operator(caller) {
                    return Err("Access/permission denied".into());
                }
                st.hold = None;
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
            "update" => self.update_job(&j, st, &req.fields, caller)?,
            other => return Err(format!("unknown job action {other}")),
        }
        Ok(())
    }

    /// `scontrol top`: moves jobs ahead of the other waiting jobs of the same user, account,
    /// QoS and (single) partition, in the order given, by trading priority through nice
    /// values, as Slurm's `_set_top` does: the listed jobs take the highest priorities of
    /// that group, and the rest give up, between them, what the listed jobs gained.
    fn set_top(&mut self, ids: &[JobId], caller: Caller) -> Result<(), String> {
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
    fn suspend_or_resume(&mut self, id: JobId, suspend: bool, t: i64) -> Result<(), String> {
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

    fn update_job(
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
            Arc::make_mut(&mut self.fs.prio).insert(id, drover_sched::priority::weighted(&self.cfg.priority, &f));
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

    // ---- nodes ----

    /// Recomputes a node's state for the scheduler and readers.
    fn refresh_node(&mut self, name: &str) {
        let st = self.node_state(name);
        self.core.handle(Event::NodeSchedulable { node: name.to_string(), schedulable: st.schedulable() });
        self.dirty = true;
    }

    fn node_state(&self, name: &str) -> NodeState {
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

    fn node_register(&mut self, reg: v1::Register, tx: NodeTx, session: u64, host: String, from: String) {
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

    fn update_node(&mut self, req: v1::UpdateNodeRequest, caller: Caller) -> Result<v1::Empty, Status> {
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
    fn node_problem(&mut self, node: &str, p: v1::NodeProblem) {
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
    fn launch_failed(&self, j: &Job, st: &mut JobStatus, why: &str) -> &'static str {
        if j.batch && j.spec.unpack().requeue != Some(false) {
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
    fn drain_node(&mut self, node: &str, reason: &str) {
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

    /// Jobs on a node that went down end `NODE_FAIL`, and their other nodes are told to stop.
    fn fail_jobs_on(&mut self, node: &str, t: i64) {
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
            let st = j.status.clone();
            self.finish(j.id, st, "NODE_FAIL", t);
        }
    }

    fn reconfigure(&mut self, caller: Caller) -> Result<v1::Empty, Status> {
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

    fn periodic(&mut self, t: i64) {
        self.resv_tick(t);
        let due: Vec<JobId> = self.preempting.iter().filter(|(_, (d, _))| *d <= t).map(|(id, _)| *id).collect();
        for id in due {
            self.preempt_now(id);
            if let Some(p) = self.preempting.get_mut(&id) {
                // Acted on: not again (it leaves the map when it ends).
                p.0 = i64::MAX;
            }
        }
        if self.cfg.priority.multifactor {
            if t >= self.fs.next_calc {
                self.priority_calc(t);
                self.fs.next_calc = t + self.cfg.priority.calc_period as i64;
            } else if self.fs.stale {
                self.refresh_priorities(t);
            }
        }
        // sstat requests some node never answered.
        let late: Vec<u64> = self.stats.iter().filter(|(_, p)| p.deadline <= t).map(|(id, _)| *id).collect();
        for id in late {
            if let Some(p) = self.stats.remove(&id) {
                self.stat_parts.retain(|_, (s, _)| *s != id);
                self.answer_stat(p);
            }
        }
        // Agents that stopped talking.
        let timeout = i64::from(self.cfg.slurmd_timeout.max(1));
        let grace_over = t - self.started_at > timeout;
        let late: Vec<String> = self
            .live
            .iter()
            .filter(|(_, l)| {
                !l.not_responding && (l.registered || grace_over) && t - l.last_seen.max(self.started_at) > timeout
            })
            .map(|(n, _)| n.clone())
            .collect();
        for n in late {
            if let Some(l) = self.live.get_mut(&n) {
                l.not_responding = true;
                l.registered = false;
            }
            let mut admin = self.durable.nodes.get(&n).cloned().unwrap_or_default();
            if !admin.down {
                admin.down = true;
                admin.reason = "Not responding".into();
                admin.reason_time = t;
                self.record(Record::NodeAdmin { node: n.clone(), admin });
            }
            self.fail_jobs_on(&n, t);
            self.refresh_node(&n);
        }
        // Allocations without a batch script that reached their time limit.
        while let Some(&(d, id)) = self.deadlines.first() {
            if d > t {
                break;
            }
            self.deadlines.remove(&(d, id));
            if let Some(j) = self.durable.jobs.get(&id).cloned() {
                if j.status.state == JobState::Running && !j.batch {
                    self.finish(id, j.status.clone(), "TIMEOUT", t);
                }
            }
        }
        // Ended jobs older than MinJobAge.
        let age = i64::from(self.cfg.min_job_age);
        while let Some(&(end, id)) = self.purge_queue.iter().next() {
            if end + age > t {
                break;
            }
            self.purge_queue.remove(&(end, id));
            if self.durable.jobs.get(&id).is_some_and(|j| j.status.state.is_finished()) {
                self.record(Record::Purge { id });
                self.core.handle(Event::Forgotten(id));
            }
        }
    }

    // ---- accounting ----

    /// What accounting has not had yet: up to `max` changed jobs as they are now, and the
    /// records that left the state, oldest first. Sent after this turn's commit, so nothing
    /// reaches accounting that the journal could lose.
    fn acct_take(&self, max: usize) -> crate::acct::Batch {
        let Some(out) = self.durable.acct.as_ref() else { return Default::default() };
        crate::acct::Batch {
            jobs: out.dirty.iter().take(max).filter_map(|id| self.durable.jobs.get(id).cloned()).collect(),
            gone: out.gone.iter().take(max).cloned().collect(),
        }
    }

    /// Accounting stored a batch: jobs unchanged since they were taken are clean, and the
    /// first `gone` records are delivered.
    fn acct_done(&mut self, jobs: Vec<Arc<Job>>, gone: usize) {
        let Some(out) = self.durable.acct.as_mut() else { return };
        for j in jobs {
            if self.durable.jobs.get(&j.id).is_none_or(|now| Arc::ptr_eq(now, &j)) {
                out.dirty.remove(&j.id);
            }
        }
        out.gone.drain(..gone.min(out.gone.len()));
    }

    fn publish(&mut self) {
        let t = now();
        let nodes = self
            .cfg
            .nodes
            .iter()
            .map(|n| {
                let admin = self.durable.nodes.get(&n.name).cloned().unwrap_or_default();
                let live = self.live.get(&n.name);
                let res = self.core.node(&n.name);
                NodeLiveView {
                    conf: n.clone(),
                    state: self.node_state(&n.name),
                    alloc_cpus: res.map(|r| r.alloc_cpus()).unwrap_or(0),
                    alloc_mem_mb: res.map(|r| r.alloc_mem()).unwrap_or(0),
                    reason: admin.reason,
                    reason_uid: admin.reason_uid,
                    reason_time: admin.reason_time,
                    boot_time: live.map(|l| l.boot_time).unwrap_or(0),
                    start_time: live.map(|l| l.start_time).unwrap_or(0),
                    last_busy: live.map(|l| l.last_busy).unwrap_or(0),
                    cpu_load: live.map(|l| l.cpu_load).unwrap_or(0.0),
                    free_mem_mb: live.map(|l| l.free_mem_mb).unwrap_or(0),
                    version: live.map(|l| l.version.clone()).unwrap_or_default(),
                    os: live.map(|l| l.os.clone()).unwrap_or_default(),
                    arch: live.map(|l| l.arch.clone()).unwrap_or_default(),
                    confinement: live.map(|l| l.confinement.clone()).unwrap_or_default(),
                    gres_used: res.map(|r| r.gres.used_text()).unwrap_or_default(),
                }
            })
            .collect();
        let view = View {
            written: t,
            cfg: self.cfg.clone(),
            jobs: self.durable.jobs.publish(),
            nodes,
            licenses: self.core.licenses(),
            configuring: self.ctld_prolog.clone(),
            shares: self.fs.rows.clone(),
            prio: self.fs.prio.clone(),
            reservations: self.resv_view.clone(),
            boot_time: self.diag_boot,
            next_job_id: self.durable.next_job_id,
        };
        self.view.store(Arc::new(view));
        self.dirty = false;
    }
}

/// Slurm's caps on what a job request may hold (`_test_job_desc_fields`): the script within
/// `max_script_size`, names within 1,024 bytes, paths within `PATH_MAX`. Bigger ones would
/// fill the controller's memory and journal.
fn fields_fit(spec: &JobSpec, max_script: usize) -> bool {
    const PATH_MAX: usize = 4096;
    let len = drover_model::bytes::decoded_len;
    let opt = |s: &Option<String>, max: usize| s.as_deref().is_none_or(|s| len(s) <= max);
    len(&spec.script) <= max_script
        && len(&spec.name) <= 1024
        && len(&spec.work_dir) <= PATH_MAX
        && opt(&spec.stdout, PATH_MAX)
        && opt(&spec.stderr, PATH_MAX)
        && opt(&spec.stdin, PATH_MAX)
        && opt(&spec.comment, 1024)
        && opt(&spec.account, 1024)
        && opt(&spec.constraint, 1024)
        && opt(&spec.mail_user, 1024)
        && opt(&spec.reservation, 1024)
        && opt(&spec.qos, 1024)
        && spec.submit_line.len() <= 1024 * 1024
}

/// An overcommitting job (`-O`) was allocated one task's CPUs per node: its tasks are laid
/// out over those nodes as Slurm's block layout over-subscribes them (SLURM_TASKS_PER_NODE).
fn overcommit_layout(j: &Job, alloc: &mut drover_model::alloc::Allocation) {
    let spec = j.spec.wire();
    if !spec.overcommit || spec.exclusive || alloc.nodes.is_empty() {
        return;
    }
    let cpt = spec.cpus_per_task.unwrap_or(1).max(1);
    let caps: Vec<u32> = alloc.nodes.iter().map(|n| (n.cpu_ids.len() as u32 / cpt).max(1)).collect();
    let ntasks = match (spec.ntasks, spec.ntasks_per_node) {
        (Some(n), _) => n,
        (None, Some(per)) => per * alloc.nodes.len() as u32,
        (None, None) => alloc.nodes.len() as u32,
    };
    let counts = drover_model::step::block_counts(&caps, ntasks, false, true);
    for (n, c) in alloc.nodes.iter_mut().zip(counts) {
        n.tasks = c;
    }
}

fn libc_sigkill() -> i32 {
    nix::sys::signal::Signal::SIGKILL as i32
}

fn libc_sigterm() -> i32 {
    nix::sys::signal::Signal::SIGTERM as i32
}

/// `priority/basic`: submit order (a later job one less, from just under Slurm's
/// `TOP_PRIORITY`, which leaves the values above for administrators' `--priority`), less
/// the job's nice value as Slurm's `priority_p_set` applies it: never below 1, and a
/// positive nice only where it leaves at least 1.
fn basic_priority(id: JobId, nice: i32) -> u32 {
    const TOP_PRIORITY: i64 = 0xffff_0000;
    let base = (TOP_PRIORITY - i64::from(id)).max(1);
    let nice = i64::from(nice);
    let p = if nice <= 0 || base > nice + 1 { base - nice } else { base };
    p.clamp(1, i64::from(u32::MAX)) as u32
}

/// Preemption classes of partitions (`preempt/partition_prio`) are their names behind this,
/// so they never meet a QoS's.
const PARTITION_CLASS: &str = "partition:";

fn partition_class(name: &str) -> String {
    format!("{PARTITION_CLASS}{name}")
}

/// A preemption class as the log names it: `partition lowprio`, `QoS normal`.
fn class_text(class: &str) -> String {
    match class.strip_prefix(PARTITION_CLASS) {
        Some(p) => format!("partition {p}"),
        None => format!("QoS {class}"),
    }
}
