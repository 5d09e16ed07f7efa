//! The one owner of the controller's state. It runs on its own thread, takes [`Msg`]s from the
//! RPC handlers, applies them, journals every change, runs the scheduler, commits the journal
//! once per batch (group commit), and only then replies, launches and publishes the read view.
//!
//! This file holds the owner itself: its messages, recovery, the main loop and the read view.
//! What it owns is split by subject: [`jobs`] (submission, start, launch, end), [`steps`],
//! [`control`] (what users and operators do to jobs), [`nodes`], [`resv`] (reservations),
//! [`schedview`] (what the scheduler sees of a job: limits, preemption) and [`priority`].

use crate::intern::intern;
use crate::preemption::class_text;
use crate::state::{decode_record, encode_record, Durable, HoldKind, Job, JobStatus, NodeAdmin, Record, Step};
use crate::view::{NodeLiveView, View};
use arc_swap::ArcSwap;
use drover_journal::Journal;
use drover_model::conf::Config;
use drover_model::hostlist::Hostlist;
use drover_model::job::{Constraint, JobId, JobSpec};
use drover_model::state::{JobState, NodeBase, NodeState, PendingReason};
use drover_model::step::{StepId, BATCH_STEP};
use drover_proto::v1::{self, controller_to_node, node_to_controller};
use drover_proto::Caller;
use drover_sched::{Core, Decision, Event, Hold, Outcome, SchedArray, SchedJob, SubmitCheck};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, oneshot};
use tonic::Status;

mod control;
mod cron;
mod jobs;
mod nodes;
mod predict;
pub(crate) mod priority;
mod resv;
mod schedview;
mod steps;

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
    GetCrontab {
        uid: u32,
        caller: Caller,
        reply: Reply<v1::CrontabReply>,
    },
    UpdateCrontab {
        req: v1::CrontabUpdate,
        caller: Caller,
        reply: Reply<v1::CrontabUpdateReply>,
    },
    Forecast {
        horizon: i64,
        reply: Reply<v1::ForecastReply>,
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
    /// Run times of the cluster's recent jobs from accounting, oldest end first: (uid,
    /// seconds). What run-time predictions learn from at start.
    RunHistory(Vec<(u32, i64)>),
    /// sdiag: the owner's statistics (and a fresh start of them with `reset`).
    Diag {
        reset: bool,
        caller: Caller,
        reply: Reply<v1::DiagReply>,
    },
    Shutdown,
    /// Hand control over to a standby after this pass's commit (failover).
    Relinquish,
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
    /// Run times of jobs that ended since start, kept until accounting's history of the
    /// jobs before them has come (predictions learn in order); `None` once it has.
    runs_since_start: Option<Vec<(u32, i64)>>,
    /// Forecasts (`drover sim --now`) under way, each on a thread with a copy of the core.
    forecasts: Arc<std::sync::atomic::AtomicUsize>,
    /// `SlurmUser`'s uid (with root, an administrator of the cluster).
    slurm_user_uid: Option<u32>,
    /// What srun's I/O keys are derived from (`StateSaveLocation/io.key`).
    io_secret: Vec<u8>,
    journal: Journal,
    durable: Durable,
    /// priority/basic: the last priority given (without its nice), each job submitted or
    /// released one less (Slurm's `lowest_prio`): found again from the jobs at start.
    lowest_basic: u32,
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
    /// The lease this controller holds where several controllers share the state directory.
    ha: Option<Arc<crate::ha::Ha>>,
    relinquish: bool,
    /// Units (the job, its steps) of fenced jobs that a node which came back still runs: the
    /// fence on it lifts when the last ends (memory only: a restart asks the node again).
    fence_units: HashMap<(JobId, String), BTreeSet<Option<StepId>>>,
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
    /// Records between snapshots (20,000; `DROVER_SNAPSHOT_EVERY` for tests that want many).
    snapshot_every: u64,
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

/// The most scheduling passes a forecast (`drover sim --now`) runs: one per moment a job
/// ends or a wait runs out, so a day of a busy queue fits; more is cut, and says so.
const FORECAST_PASSES: u32 = 20_000;

/// Forecasts run at once; more are refused until one ends.
const FORECASTS_AT_ONCE: usize = 2;

fn forecast_reply(now: i64, f: drover_sched::Forecast) -> v1::ForecastReply {
    v1::ForecastReply {
        now,
        until: f.until,
        passes: f.passes,
        cut: f.cut,
        starts: f
            .starts
            .into_iter()
            .map(|e| {
                let mut nodes = Hostlist::new();
                for n in &e.nodes {
                    nodes.push_host(n);
                }
                v1::ExpectedStart {
                    job_id: e.job,
                    array_task_id: e.task,
                    start: e.start,
                    end: e.end.unwrap_or(0),
                    nodes: nodes.ranged(),
                    predicted: e.predicted,
                }
            })
            .collect(),
        waiting: f
            .waiting
            .into_iter()
            .map(|(job_id, r)| v1::StillWaiting { job_id, reason: r.name().to_string() })
            .collect(),
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
        if rec.schema > crate::state::STATE_SCHEMA {
            return Err(format!(
                "the state in {} was written by a newer Drover (state version {}; this one reads up to {}). \
                 Nothing was changed: run that version or a later one",
                journal.dir().display(),
                rec.schema,
                crate::state::STATE_SCHEMA
            ));
        }
        let older = rec.schema < crate::state::STATE_SCHEMA;
        journal.set_schema(crate::state::STATE_SCHEMA);
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
        if legacy || older {
            // Records from here on are of this version: the state before them is too.
            journal
                .snapshot(&durable.encode(), &durable.blob_generations())
                .map_err(|e| format!("writing the state in this version's format: {e}"))?;
        }
        // slurmctld keeps associations' usage in StateSaveLocation/assoc_usage too.
        let usage_path = std::path::Path::new(&cfg.state_save_location).join("assoc_usage");
        let mut o = Owner {
            slurm_user_uid: nix::unistd::User::from_name(&cfg.auth.slurm_user).ok().flatten().map(|u| u.uid.as_raw()),
            cfg,
            io_secret: Vec::new(),
            journal,
            lowest_basic: TOP_PRIORITY,
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
            ha: None,
            relinquish: false,
            fence_units: HashMap::new(),
            names: NameCache::default(),
            acct_admin: None,
            limit_caps: Vec::new(),
            limit_keys: HashSet::new(),
            preempting: BTreeMap::new(),
            resv_active: Vec::new(),
            resv_view: Arc::default(),
            runs_since_start: Some(Vec::new()),
            forecasts: Arc::default(),
            fs: crate::fairshare::State {
                usage: crate::fairshare::Usage::load(&usage_path),
                path: usage_path,
                ..Default::default()
            },
            storage: Default::default(),
            snapshot_every: std::env::var("DROVER_SNAPSHOT_EVERY")
                .ok()
                .and_then(|v| v.parse().ok())
                .filter(|&n: &u64| n > 0)
                .unwrap_or(20_000),
        };
        if o.cfg.accounting_storage.is_some() {
            o.acct_admin = crate::acct::load_admin_cache(&crate::acct_cache_path(&o.cfg))
                .map(|st| Box::new(crate::acct::Admin::new(&o.cfg.cluster_name, st)));
            o.fs.stale = o.acct_admin.is_some();
            o.fs.full = true;
        }
        o.lowest_basic = o
            .durable
            .jobs
            .values()
            .filter(|j| !j.status.priority_set && j.status.priority > 1)
            .map(|j| u32::try_from(j.status.priority).unwrap_or(u32::MAX))
            .fold(TOP_PRIORITY, u32::min);
        o.load_config();
        o.refresh_limits(false);
        let jobs: Vec<Arc<Job>> = o.durable.jobs.values().cloned().collect();
        if o.cfg.accounting_addr().is_none() {
            // No accounting to learn run times from: the jobs the state still holds.
            for (uid, seconds) in predict::runs_in_state(&jobs) {
                o.core.handle(Event::Ran { uid, seconds });
            }
            o.runs_since_start = None;
        }
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
        for ev in drover_sched::conf::events(&self.cfg, gres_conf.as_ref()) {
            self.core.handle(ev);
        }
        for n in &self.cfg.nodes {
            self.durable.nodes.entry(n.name.clone()).or_insert_with(|| NodeAdmin {
                drain: n.state == "DRAIN",
                down: n.state == "DOWN",
                ..Default::default()
            });
            self.live.entry(n.name.clone()).or_default();
        }
        self.live.retain(|k, _| names.contains(k));
        self.resvs_changed();
        let names: Vec<String> = self.live.keys().cloned().collect();
        for n in names {
            self.refresh_node(&n);
        }
    }

    /// Writes only while `ha`'s lease holds, and starts a new journal generation at once, so
    /// that a late write of the controller it took over from lands in a file nobody appends
    /// to any more.
    pub fn take_over(&mut self, ha: Arc<crate::ha::Ha>) -> Result<(), drover_journal::JournalError> {
        self.journal.set_fence(ha.journal_fence());
        self.ha = Some(ha);
        let live = self.durable.blob_generations();
        self.journal.snapshot(&self.durable.encode(), &live)
    }

    /// Stops here if this controller's lease no longer holds (nothing more is written or
    /// acknowledged).
    fn check_lease(&self) {
        if let Some(ha) = &self.ha {
            if let Err(why) = ha.may_write() {
                ha.fence(&why);
            }
        }
    }

    fn fenced(&self, e: &drover_journal::JournalError) {
        if let (Some(ha), drover_journal::JournalError::Fenced(why)) = (&self.ha, e) {
            ha.fence(why);
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
            if self.cfg.priority.multifactor && !self.fs.touched.is_empty() {
                // A job's end moved its association's usage: the priorities it concerns
                // follow before the pass that may start a job in its place (incremental).
                self.refresh_after_end(t);
            }
            let (before, started) = (self.core.pass_stats(), std::time::Instant::now());
            self.schedule(t);
            let us = started.elapsed().as_micros() as u64;
            self.diag.pass(before, self.core.pass_stats(), us, t);
            let res = self.journal.commit();
            if let Err(e) = &res {
                self.fenced(e);
            }
            // Acknowledged only while the lease holds: after it, a standby may have read the
            // journal without this batch.
            self.check_lease();
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
            if self.journal.records_since_snapshot > self.snapshot_every && self.storage.may_snapshot(t) {
                let live = self.durable.blob_generations();
                if let Err(e) = self.journal.snapshot(&self.durable.encode(), &live) {
                    self.fenced(&e);
                    self.storage.snapshot_failed(&e, t);
                }
            }
            if self.relinquish && !self.journal.has_pending() {
                if let Some(ha) = &self.ha {
                    ha.hand_over();
                }
                self.relinquish = false;
            }
            if self.shutdown {
                break;
            }
        }
        // A clean stop gives the lease back: a standby takes control at once.
        if let Some(ha) = &self.ha {
            ha.release();
        }
    }

    fn record(&mut self, r: Record) {
        let at = self.journal.append(&encode_record(&r));
        // A job that waits from now on (submitted, changed while waiting, requeued): the
        // priority refresh's index by association learns of it.
        let waits = match &r {
            Record::Submit { id, spec, status } | Record::Update { id, spec, status }
                if status.state == JobState::Pending =>
            {
                self.note_waiting(*id, spec);
                None
            }
            Record::Status { id, status }
                if status.state == JobState::Pending
                    && self.cfg.priority.multifactor
                    && self.durable.jobs.get(id).is_some_and(|j| j.status.state != JobState::Pending) =>
            {
                Some(*id)
            }
            _ => None,
        };
        self.durable.apply(r, Some(at));
        if let Some(j) = waits.and_then(|id| self.durable.jobs.get(&id).cloned()) {
            self.note_waiting(j.id, &j.spec.unpack());
        }
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
            Msg::GetCrontab { uid, caller, reply } => {
                let r = self.get_crontab(uid, caller);
                self.reply(reply, r);
            }
            Msg::UpdateCrontab { req, caller, reply } => {
                let r = match self.storage.refusal(&self.journal) {
                    Some(no) => Err(no),
                    None => self.update_crontab(req, caller),
                };
                self.reply(reply, r);
            }
            Msg::Reservation { req, caller, reply } => {
                let r = match self.storage.refusal(&self.journal) {
                    Some(no) => Err(no),
                    None => self.reservation(req, caller),
                };
                self.reply(reply, r);
            }
            Msg::Forecast { horizon, reply } => {
                // A copy of the core runs forward on a thread of its own: the owner goes on.
                // Two at most at once (each holds a copy of the queue).
                use std::sync::atomic::Ordering;
                if self.forecasts.fetch_add(1, Ordering::SeqCst) >= FORECASTS_AT_ONCE {
                    self.forecasts.fetch_sub(1, Ordering::SeqCst);
                    let busy = Status::resource_exhausted("forecasts are already under way: try again in a moment");
                    let _ = reply.send(Err(busy));
                    return;
                }
                let core = self.core.clone();
                let t = now();
                let running = self.forecasts.clone();
                let spawned = std::thread::Builder::new().name("forecast".into()).spawn(move || {
                    let f = core.forecast(t, horizon, FORECAST_PASSES);
                    running.fetch_sub(1, Ordering::SeqCst);
                    let _ = reply.send(Ok(forecast_reply(t, f)));
                });
                if let Err(e) = spawned {
                    self.forecasts.fetch_sub(1, Ordering::SeqCst);
                    eprintln!("drover controller: error: cannot start a forecast: {e}");
                }
            }
            Msg::Explain { job, reply } => {
                let mut r = crate::explain::reply(self.core.explain(job, now()));
                for b in r.blockers.iter_mut().filter(|b| b.kind == "fenced") {
                    b.name = self.durable.fences.get(&job).map(|n| n.join(",")).unwrap_or_default();
                }
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
            Msg::RunHistory(runs) => self.learn_runs(runs),
            Msg::AcctAdmin(st) => {
                // Read every few seconds; only a change is worth a pass over the queue.
                if self.acct_admin.as_deref().map(|a| &a.st) != Some(&*st) {
                    self.acct_admin = Some(Box::new(crate::acct::Admin::new(&self.cfg.cluster_name, *st)));
                    self.refresh_limits(true);
                    self.fs.stale = true;
                    self.fs.full = true;
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
            Msg::Relinquish => self.relinquish = true,
        }
    }

    /// Once a second: preemption grace times, time limits, purges, priorities, usage.
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
        } else if self.fs.stale {
            // priority/basic keeps no usage, but sshare still lists the associations' shares
            // (usage 0), as Slurm's does: tools ask it which accounts a user may charge.
            self.fs.stale = false;
            if let Some(a) = self.acct_admin.as_deref() {
                let (_, mut rows) = crate::fairshare::compute(&a.st, &self.cfg.cluster_name, &Default::default());
                crate::fairshare::basic_rows(&mut rows);
                self.fs.rows = Arc::new(rows);
                self.dirty = true;
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

/// Slurm's `TOP_PRIORITY`: priority/basic counts down from just under it, which leaves the
/// values above for administrators' `--priority`.
const TOP_PRIORITY: u32 = 0xffff_0000;

/// `priority/basic` (Slurm's `priority_p_set`): one less than the last priority given, less
/// the job's nice value: never below 1, and a positive nice only where it leaves at least 1.
fn basic_priority(last: u32, nice: i32) -> u32 {
    let base = i64::from(last.max(2)) - 1;
    let nice = i64::from(nice);
    let p = if nice <= 0 || base > nice + 1 { base - nice } else { base };
    p.clamp(1, i64::from(u32::MAX)) as u32
}

impl Owner {
    /// The next priority/basic priority, counted as given (a held job gets its own when it
    /// is released, as in Slurm).
    pub(crate) fn next_basic_priority(&mut self, nice: i32) -> u32 {
        let p = basic_priority(self.lowest_basic, nice);
        let relative = (i64::from(p) + i64::from(nice)).clamp(1, i64::from(TOP_PRIORITY)) as u32;
        self.lowest_basic = self.lowest_basic.min(relative);
        p
    }
}
