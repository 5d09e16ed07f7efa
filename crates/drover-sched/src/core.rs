//! The core's state, its events and the scheduling pass.

use crate::gres::{GresNeed, NodeGresState};
use crate::plan::{BackfillOrder, Free, Policy, Res, Reservation, SchedConfig, Timeline, FAR};
use drover_model::alloc::{Allocation, NodeAlloc};
use drover_model::array::TaskSet;
use drover_model::duration::TimeLimit;
use drover_model::job::{Constraint, Dependencies, Dependency, DependencyKind, JobId};
use drover_model::state::PendingReason;
use std::collections::{BTreeMap, BTreeSet};

/// The core's hash maps: a fast hasher with a fixed seed (job ids are not adversarial, and
/// iteration order is the same on every run).
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::FixedState>;

/// A node as the scheduler sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRes {
    pub name: String,
    pub cpus: u32,
    pub mem_mb: u64,
    pub features: Vec<String>,
    pub weight: u32,
    /// Up, responding and not drained.
    pub schedulable: bool,
    /// GPUs and other GRES, and what of them is held.
    pub gres: NodeGresState,
    /// Per GPU device index: the CPUs near it (`gres.conf` `Cores=`), where known, and its
    /// direct links to each other device (`Links=`).
    pub gpu_cpus: Vec<Option<Vec<u32>>>,
    pub gpu_links: Vec<Vec<u32>>,
    used: Vec<bool>,
    /// How many of `used` are set (kept with it: placement asks for it per node per job).
    used_cpus: u32,
    used_mem: u64,
    jobs: u32,
    /// Users with jobs here (uid, jobs), and the user whose `--exclusive=user` jobs run here.
    users: Vec<(u32, u32)>,
    excl_user: Option<(u32, u32)>,
}

impl NodeRes {
    pub fn new(name: &str, cpus: u32, mem_mb: u64, features: Vec<String>, weight: u32) -> Self {
        NodeRes {
            name: name.to_string(),
            cpus,
            mem_mb,
            features,
            weight,
            schedulable: false,
            gres: NodeGresState::default(),
            gpu_cpus: Vec::new(),
            gpu_links: Vec::new(),
            used: vec![false; cpus as usize],
            used_cpus: 0,
            used_mem: 0,
            jobs: 0,
            users: Vec::new(),
            excl_user: None,
        }
    }
    /// The node's GRES (`Gres=` of slurm.conf).
    pub fn with_gres(mut self, list: &[drover_model::gres::NodeGres]) -> Self {
        self.gres = NodeGresState::new(list);
        self
    }
    /// The CPUs near each GPU device (`gres.conf` `Cores=`, as CPU ids).
    pub fn with_gpu_cpus(mut self, cpus: Vec<Option<Vec<u32>>>) -> Self {
        self.gpu_cpus = cpus;
        self
    }
    /// Direct links between GPU devices (`gres.conf` `Links=`).
    pub fn with_gpu_links(mut self, links: Vec<Vec<u32>>) -> Self {
        self.gpu_links = links;
        self
    }
    pub fn alloc_cpus(&self) -> u32 {
        self.used_cpus
    }
    pub fn alloc_mem(&self) -> u64 {
        self.used_mem
    }
    pub fn job_count(&self) -> u32 {
        self.jobs
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionRes {
    pub name: String,
    pub nodes: Vec<String>,
    /// `None` when the partition accepts work; otherwise why it does not.
    pub down: Option<PendingReason>,
    pub max_time: TimeLimit,
    pub default_time: Option<TimeLimit>,
    pub max_nodes: Option<u32>,
    pub min_nodes: u32,
}

impl PartitionRes {
    /// An up partition of these nodes with no limits.
    pub fn open(name: &str, nodes: Vec<String>) -> PartitionRes {
        PartitionRes {
            name: name.into(),
            nodes,
            down: None,
            max_time: None,
            default_time: None,
            max_nodes: None,
            min_nodes: 0,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    User,
    Admin,
    /// Requeued after its node failed: it waits until the nodes of its last run are known
    /// to have stopped it (a job never runs twice at once). Reason `NodeDown`.
    Fenced,
}

/// A pending job, reduced to what placement needs. The queue may hold millions of these, so
/// the requests most jobs never make live behind one optional box.
#[derive(Debug, Clone, PartialEq)]
pub struct SchedJob {
    pub id: JobId,
    /// Higher runs first. Submit order for now (the multifactor seam).
    pub priority: u64,
    /// Shared names (a large queue repeats a few).
    pub partitions: Vec<std::sync::Arc<str>>,
    pub min_nodes: u32,
    /// `None`: as many nodes as the tasks need.
    pub max_nodes: Option<u32>,
    pub ntasks: u32,
    pub cpus_per_task: u32,
    pub mem_per_node_mb: Option<u64>,
    pub mem_per_cpu_mb: Option<u64>,
    /// `None`: not given (the partition's default applies).
    pub time_limit: Option<TimeLimit>,
    pub exclusive: bool,
    pub hold: Option<Hold>,
    /// Its user (`bf_max_job_user`) and since when it may run (`bf_min_age_reserve`).
    pub uid: u32,
    pub queued: i64,
    /// `None` when every field of [`SchedMore`] has its default.
    pub more: Option<Box<SchedMore>>,
}

/// The less common parts of a pending job's request.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SchedMore {
    pub ntasks_per_node: Option<u32>,
    pub nodelist: Vec<String>,
    pub exclude: Vec<String>,
    pub constraint: Option<Constraint>,
    pub begin_time: Option<i64>,
    pub dependency: Dependencies,
    /// `singleton`: the earlier jobs of the same user and name, all of which must end first
    /// (the controller, which knows names, lists them).
    pub singleton_after: Vec<JobId>,
    pub array: Option<SchedArray>,
    /// GPUs and other GRES per node (`--gres`, `--gpus-per-node`, `--gpus-per-task`, ...).
    pub gres: Vec<GresNeed>,
    /// Cluster licenses (`-L name[:count],...`).
    pub licenses: Vec<(String, u32)>,
    /// The accounting limit groups it belongs to (see [`crate::limits`]).
    pub limits: Vec<std::sync::Arc<str>>,
    /// A per-job accounting limit it exceeds by itself (`AssocMaxCpuPerJobLimit`,
    /// `QOSMaxWallDurationPerJobLimit`, ...): it waits until the limit changes.
    pub policy: Option<PendingReason>,
    /// With QoS preemption (`PreemptType=preempt/qos`): its QoS, and those whose running
    /// jobs it may preempt.
    pub preempt: Option<Preempt>,
    /// `--reservation`: the advance reservation it may only run in.
    pub reservation: Option<std::sync::Arc<str>>,
    /// `--switches=N@wait`: at most N leaf switches, until this moment (then any number).
    pub switches: Option<(u32, i64)>,
    /// `--segment=N` (`topology/block`): nodes in groups of N, each group in one block.
    pub segment: Option<u32>,
    /// `--exclusive=user`: its nodes run no other user's jobs while it runs.
    pub exclusive_user: bool,
    /// `--contiguous`, `--spread-job`, `--use-min-nodes`.
    pub contiguous: bool,
    pub spread: bool,
    pub use_min_nodes: bool,
}

/// An advance reservation as placement sees it: its nodes are whole-node claims over
/// `[start, end)` that only its member jobs (`--reservation`) may use.
#[derive(Debug, Clone, PartialEq)]
pub struct AdvanceResv {
    pub name: std::sync::Arc<str>,
    pub start: i64,
    pub end: i64,
    pub nodes: Vec<String>,
    /// `MAINT`: a partition it covers whole is `Reserved for maintenance`.
    pub maint: bool,
}

/// What advance reservations leave of a partition: (maintenance covers it all, nodes left
/// open, their cores).
type ReservedLeft = (bool, u32, u64);

/// Timeline ids of advance reservations' claims: from the top of the id space down, where
/// no job id reaches.
const ADVANCE_RESV_BASE: JobId = JobId::MAX;

/// A member's advance reservation that keeps it waiting: its name, and its start where it
/// has not started (`None`: it is gone).
pub(crate) type ResvBlock = (String, Option<i64>);

/// Where a member of an advance reservation may run: its nodes (by index) and the end.
pub(crate) struct Within {
    nodes: Vec<bool>,
    end: i64,
}

/// How a waiting job is tried in a pass: in strict order (no backfill), whether it holds a
/// backfill reservation, and the advance reservation it must run in.
#[derive(Clone, Copy)]
struct Eval<'a> {
    strict: bool,
    reserved: bool,
    within: Option<&'a Within>,
}

/// A job's part in QoS preemption.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Preempt {
    pub qos: std::sync::Arc<str>,
    pub can_preempt: Vec<std::sync::Arc<str>>,
}

/// A job's part in an array. The array's pending remainder is one queue entry that starts its
/// tasks one by one, each under a job id of its own (the last one keeps the array's id, as in
/// Slurm), so a pending array of a million tasks costs the queue one entry.
#[derive(Debug, Clone, PartialEq)]
pub struct SchedArray {
    pub array_id: JobId,
    /// `%N`: at most N tasks of the array run at once (0: no limit).
    pub throttle: u32,
    /// The task this job runs; `None` for the pending remainder.
    pub task: Option<u32>,
    /// The remainder's tasks not started yet (empty for a task).
    pub pending: TaskSet,
}

impl SchedMore {
    /// Boxed, or `None` when everything is default.
    pub fn boxed(self) -> Option<Box<SchedMore>> {
        if self == SchedMore::default() {
            None
        } else {
            Some(Box::new(self))
        }
    }
}

impl SchedJob {
    /// The limit the job runs with in a partition.
    pub fn effective_limit(&self, part: &PartitionRes) -> TimeLimit {
        match self.time_limit {
            Some(l) => l,
            None => part.default_time.unwrap_or(part.max_time),
        }
    }

    pub fn more(&self) -> &SchedMore {
        static NONE: SchedMore = SchedMore {
            ntasks_per_node: None,
            nodelist: Vec::new(),
            exclude: Vec::new(),
            constraint: None,
            begin_time: None,
            dependency: Dependencies { any: false, list: Vec::new() },
            singleton_after: Vec::new(),
            array: None,
            gres: Vec::new(),
            licenses: Vec::new(),
            limits: Vec::new(),
            policy: None,
            preempt: None,
            reservation: None,
            switches: None,
            segment: None,
            exclusive_user: false,
            contiguous: false,
            spread: false,
            use_min_nodes: false,
        };
        self.more.as_deref().unwrap_or(&NONE)
    }

    /// What the job holds once started, as far as its request tells before placement (for
    /// accounting limits): one job, its tasks' CPUs, its nodes, memory and GPUs.
    pub fn need(&self) -> crate::limits::Usage {
        let cpus = u64::from(self.ntasks.max(1)) * u64::from(self.cpus_per_task.max(1));
        let nodes = u64::from(self.min_nodes.max(1));
        let mem_mb = self.mem_per_node_mb.map(|m| m * nodes).or(self.mem_per_cpu_mb.map(|m| m * cpus)).unwrap_or(0);
        let gpus = self
            .more()
            .gres
            .iter()
            .filter(|g| g.name == "gpu")
            .map(|g| g.per_node * nodes + g.per_task * u64::from(self.ntasks.max(1)))
            .sum();
        crate::limits::Usage { jobs: 1, cpus, nodes, mem_mb, gpus }
    }

    /// How many nodes it takes where it can: all of a node range (`-N 2-4`, unless
    /// `--use-min-nodes`), one per task with `--spread-job` — as Slurm does — else the fewest.
    pub fn wanted_nodes(&self) -> u32 {
        let m = self.more();
        let range = self.max_nodes.is_some_and(|x| x > self.min_nodes) && !m.use_min_nodes;
        let most = if m.spread || range { self.ntasks.min(self.max_nodes.unwrap_or(u32::MAX)) } else { 0 };
        most.max(self.min_nodes)
    }

    /// The most leaf switches it may span at `t` (`--switches`, while its wait lasts).
    pub fn switch_limit(&self, t: i64) -> Option<u32> {
        self.more().switches.filter(|s| t < s.1).map(|s| s.0)
    }

    pub fn more_mut(&mut self) -> &mut SchedMore {
        self.more.get_or_insert_with(Box::default)
    }
}

/// How an ended job ended, for dependencies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Succeeded,
    Failed,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Adds or replaces a node's definition (at start and on reconfigure).
    NodeDefined(NodeRes),
    NodeSchedulable {
        node: String,
        schedulable: bool,
    },
    PartitionDefined(PartitionRes),
    Submitted(SchedJob),
    /// A pending job changed (hold, release, update).
    Updated(SchedJob),
    /// A pending job left the queue without running (cancelled).
    Withdrawn(JobId),
    /// A job holds these resources (recovery after a restart); `array` names the array and
    /// task it runs.
    Running {
        job: JobId,
        alloc: Allocation,
        array: Option<(JobId, u32)>,
        since: i64,
        limit: TimeLimit,
        /// The licenses it holds.
        licenses: Vec<(String, u32)>,
        /// The accounting limit groups it counts in.
        limits: Vec<std::sync::Arc<str>>,
        /// Its QoS, where QoS preemption is on (it may be preempted by that QoS's betters).
        qos: Option<std::sync::Arc<str>>,
        /// Its user, and whether it keeps other users off its nodes (`--exclusive=user`).
        user: (u32, bool),
    },
    /// A running job is being preempted and will be gone by `end` (its grace time).
    Preempting {
        job: JobId,
        end: i64,
    },
    /// A running job was suspended by preemption (`PreemptMode=SUSPEND`): its resources are
    /// free for others until the core resumes it ([`Decision::Resume`]) on the very same ones.
    Suspended {
        job: JobId,
        /// What it holds when it resumes, for a job the core does not know as running
        /// (recovery after a restart).
        alloc: Option<Allocation>,
    },
    /// How to plan (at start and on reconfigure).
    Configure(SchedConfig),
    /// The cluster's licenses (`Licenses=name:count,...`), at start and on reconfigure.
    LicensesDefined(Vec<(String, u32)>),
    /// Accounting's limit groups and their caps (all of them, replacing the last).
    LimitsDefined(Vec<(std::sync::Arc<str>, crate::limits::Caps)>),
    /// The advance reservations (all of them, replacing the last).
    ReservationsDefined(Vec<AdvanceResv>),
    /// The network's switches (`TopologyPlugin=topology/tree`), or none.
    TopologyDefined(Option<drover_model::topology::Topology>),
    Ended {
        job: JobId,
        outcome: Outcome,
    },
    /// The job's record is gone (MinJobAge); dependencies on it count as satisfied.
    Forgotten(JobId),
    /// A job of user `uid` ran `seconds` (at its end, and from accounting at start): the
    /// history run-time predictions are made from.
    Ran {
        uid: u32,
        seconds: i64,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Start `job`. With `split`, the job is task `.1` of array `.0`, taken from the array's
    /// pending remainder under the id `job` (the controller records the new job first).
    Start { job: JobId, alloc: Allocation, time_limit: TimeLimit, split: Option<(JobId, u32)> },
    /// The job's pending reason changed.
    Reason { job: JobId, reason: PendingReason },
    /// The planner's expected start for a waiting job and the nodes it would get changed
    /// (`None`: it has no reservation now).
    Planned { job: JobId, start: Option<i64>, nodes: Vec<String> },
    /// Preempt running `job` so that waiting job `by` can start (QoS preemption); the
    /// controller answers with [`Event::Preempting`] or [`Event::Suspended`].
    Preempt { job: JobId, by: JobId },
    /// Resume `job`, suspended by preemption: its resources are free again (and now held).
    Resume { job: JobId },
}

/// Why a job could never run here; the controller refuses it at submit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubmitCheck {
    Ok,
    /// `Requested node configuration is not available`.
    NodeConfigUnavailable,
    /// Nodes named with `-w` are not in the partition.
    NodesNotInPartition,
    /// A partition limit refuses the job (only with `EnforcePartLimits`).
    PartitionLimit(PendingReason),
}

/// What a plain job asks for (no node, feature, GRES or exclusivity request, a fixed node
/// count), for the pass's memo of shapes that found no room.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Shape {
    part: usize,
    nodes: u32,
    tasks: u32,
    cpt: u32,
    mem_node: u64,
    mem_cpu: u64,
    end: i64,
    /// The asking user, where some node is held by an `--exclusive=user` job.
    user: Option<u32>,
}

impl Shape {
    /// Whether a job of this shape can fit nowhere `o`'s did not: it asks for as much or
    /// more of everything, for as long or longer, on as many nodes.
    fn no_easier_than(&self, o: &Shape) -> bool {
        let more = if self.nodes == 1 {
            // On one node only the totals count.
            let (c, oc) = (self.tasks * self.cpt, o.tasks * o.cpt);
            c >= oc && self.mem_node.max(self.mem_cpu * u64::from(c)) >= o.mem_node.max(o.mem_cpu * u64::from(oc))
        } else {
            self.tasks >= o.tasks && self.cpt >= o.cpt && self.mem_node >= o.mem_node && self.mem_cpu >= o.mem_cpu
        };
        self.part == o.part
            && self.nodes == o.nodes
            && self.end >= o.end
            && more
            && (o.user.is_none() || o.user == self.user)
    }
}

/// What the scheduling passes did, for `sdiag`: counts only (the controller, which may read
/// clocks, times the passes).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PassStats {
    /// Passes that ran (a pass with nothing changed is skipped and not counted).
    pub passes: u64,
    /// Of those, passes that also planned ahead (backfill reservations).
    pub planning_passes: u64,
    /// The last pass: jobs in the queue when it began, and jobs it evaluated.
    pub last_queue_len: u32,
    pub last_depth: u32,
    /// Jobs evaluated over every pass.
    pub depth_sum: u64,
    /// Jobs started ahead of a job of higher priority that was left waiting (backfilled).
    pub backfilled: u64,
    /// Reservations the last planning pass holds (backfill's table).
    pub last_table_size: u32,
}

#[derive(Default, Clone)]
pub struct Core {
    /// Counts of what the passes did (`sdiag`).
    stats: PassStats,
    nodes: Vec<NodeRes>,
    node_idx: HashMap<String, usize>,
    partitions: Vec<PartitionRes>,
    queue: BTreeSet<(std::cmp::Reverse<u64>, JobId)>,
    pending: HashMap<JobId, (SchedJob, PendingReason)>,
    running: HashMap<JobId, Allocation>,
    ended: HashMap<JobId, Outcome>,
    /// Something happened since the last pass that may change a decision.
    changed: bool,
    /// The earliest future time a decision may change without an event (a `--begin`).
    wake_at: Option<i64>,
    /// Held jobs whose reason the next pass reports.
    held_due: Vec<JobId>,
    /// Array tasks known to the core (pending on their own, running or ended): job → (array, task).
    task_of: HashMap<JobId, (JobId, u32)>,
    /// Running tasks per array, for `%N` throttles.
    array_running: HashMap<JobId, u32>,
    /// The other way round: (array, task) → job, and each array's split-off jobs.
    task_job: HashMap<(JobId, u32), JobId>,
    members: HashMap<JobId, Vec<JobId>>,
    /// When each running or ended job started (`after:N+minutes`).
    started_at: HashMap<JobId, i64>,
    /// The earliest time a waiting `after:N+minutes` is due, found while evaluating.
    dep_wake: std::cell::Cell<Option<i64>>,
    config: SchedConfig,
    /// Expected end of each running job (start + time limit).
    ends: HashMap<JobId, i64>,
    /// With predictions: each running job's predicted end (start + prediction), and the run
    /// times predictions are made from.
    pred_ends: HashMap<JobId, i64>,
    /// The earliest predicted end the last planning pass relied on: a pass at or after it plans.
    replan_at: Option<i64>,
    /// With predictions: the first expected start each waiting job was given.
    promised: HashMap<JobId, i64>,
    /// With predictions: this pass plans by limits (a reservation slipped too far).
    by_limits: bool,
    history: crate::predict::History,
    /// Something changed since the last planning pass, and when the next may run.
    plan_dirty: bool,
    next_plan: i64,
    /// Per partition (same order as `partitions`): its node indices in placement order.
    part_nodes: Vec<Vec<usize>>,
    /// Shapes of plain jobs that found no room now in this pass.
    no_room: std::cell::RefCell<Vec<Shape>>,
    /// Nodes where an `--exclusive=user` job runs (other users' jobs may not share them).
    excl_user_nodes: usize,
    /// Set by `explain` while it asks whether a job would fit were it not for the topology.
    without_topology: std::cell::Cell<bool>,
    /// Tests: every job placed in full (no memo of shapes that found no room).
    no_memo: bool,
    /// Per (partition, advance reservations met): whether maintenance covers the partition,
    /// and its nodes and cores left open — within a pass.
    reserved_left: std::cell::RefCell<HashMap<(usize, u64), ReservedLeft>>,
    /// Free cores now (in all, and the most on one node), cached within a pass.
    free_now: std::cell::Cell<Option<(u64, u32)>>,
    /// Reservations of waiting jobs, kept from pass to pass: a reservation only ever moves
    /// earlier (conservative backfill's promise), never later.
    planned: HashMap<JobId, Reservation>,
    /// Expected starts as last reported (within `bf_window`).
    shown: HashMap<JobId, (i64, Vec<String>)>,
    /// Cluster licenses (`Licenses=`): how many of each, and how many running jobs hold.
    /// As in Slurm 22.05 they are checked when a job would start; the planner does not
    /// reserve them (Slurm's `bf_licenses` came later).
    licenses: BTreeMap<String, u32>,
    licenses_used: BTreeMap<String, u32>,
    job_licenses: HashMap<JobId, Vec<(String, u32)>>,
    /// Accounting limits: groups, their caps and what their running jobs hold.
    limits: crate::limits::Limits,
    /// With QoS preemption: each running job's QoS, and the jobs being preempted (with
    /// when they were chosen).
    running_qos: HashMap<JobId, std::sync::Arc<str>>,
    preempting: HashMap<JobId, i64>,
    /// Jobs suspended by preemption, oldest first, with what they hold when they resume and
    /// the job they made room for (they resume once it is gone).
    suspended: BTreeMap<JobId, (Allocation, Option<JobId>)>,
    /// Whom each job being preempted makes room for.
    preempt_for: HashMap<JobId, JobId>,
    /// Advance reservations, each with its nodes' indices.
    resvs: Vec<(AdvanceResv, Vec<usize>)>,
    /// Each running job's user and whether it ran `--exclusive=user`.
    job_user: HashMap<JobId, (u32, bool)>,
    /// The switch tree, and per switch its level and its nodes' indices.
    topology: Option<drover_model::topology::Topology>,
    topo: Option<TopoIndex>,
}

/// The switch tree by node index, rebuilt when nodes or the tree change.
#[derive(Debug, Clone, Default)]
struct TopoIndex {
    /// Per switch: (level, is a leaf, member mask over node indices).
    switches: Vec<(u32, bool, Vec<bool>)>,
    /// Per node index: its leaf switch.
    leaf: Vec<Option<usize>>,
    /// Per node index: its base block (`topology/block`).
    block: Vec<Option<usize>>,
}

/// What a dependency's target is doing, over all its jobs when it is an array.
#[derive(Default)]
struct TargetState {
    known: bool,
    pending: bool,
    running: bool,
    failed: bool,
    /// The latest start among its jobs (an array has started when its last task has).
    started: Option<i64>,
}

enum DepState {
    Satisfied,
    Waiting,
    Never,
}

impl Core {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn nodes(&self) -> &[NodeRes] {
        &self.nodes
    }

    pub fn node(&self, name: &str) -> Option<&NodeRes> {
        self.node_idx.get(name).map(|&i| &self.nodes[i])
    }

    pub fn allocation(&self, job: JobId) -> Option<&Allocation> {
        self.running.get(&job)
    }

    /// Each partition's nodes as indices, by weight then configuration order: what placement
    /// walks, without a name lookup or a sort per job.
    fn index_topology(&mut self) {
        self.topo = self.topology.as_ref().map(|t| {
            let n = self.nodes.len();
            let switches = t
                .switches
                .iter()
                .map(|sw| {
                    let mut mask = vec![false; n];
                    for name in &sw.nodes {
                        if let Some(&i) = self.node_idx.get(name) {
                            mask[i] = true;
                        }
                    }
                    (sw.level, sw.children.is_empty(), mask)
                })
                .collect();
            let leaf = self.nodes.iter().map(|nd| t.leaf_of(&nd.name)).collect();
            let block = self.nodes.iter().map(|nd| t.block_of(&nd.name)).collect();
            TopoIndex { switches, leaf, block }
        });
    }

    fn index_partitions(&mut self) {
        self.part_nodes = self
            .partitions
            .iter()
            .map(|p| {
                let mut ix: Vec<usize> = p.nodes.iter().filter_map(|n| self.node_idx.get(n).copied()).collect();
                ix.sort_by_key(|&i| (self.nodes[i].weight, i));
                ix
            })
            .collect();
        self.index_topology();
    }

    pub fn handle(&mut self, ev: Event) {
        self.changed = true;
        self.plan_dirty = true;
        match ev {
            Event::NodeDefined(n) => {
                if let Some(&i) = self.node_idx.get(&n.name) {
                    let old = &self.nodes[i];
                    let mut n = n;
                    n.schedulable = old.schedulable;
                    n.used_mem = old.used_mem;
                    n.jobs = old.jobs;
                    n.users = old.users.clone();
                    n.excl_user = old.excl_user;
                    n.gres.carry_over(&old.gres);
                    let mut used = vec![false; n.cpus as usize];
                    for (k, u) in old.used.iter().enumerate() {
                        if k < used.len() {
                            used[k] = *u;
                        }
                    }
                    n.used_cpus = used.iter().filter(|u| **u).count() as u32;
                    n.used = used;
                    self.nodes[i] = n;
                } else {
                    self.node_idx.insert(n.name.clone(), self.nodes.len());
                    self.nodes.push(n);
                }
                self.index_partitions();
            }
            Event::NodeSchedulable { node, schedulable } => {
                if let Some(&i) = self.node_idx.get(&node) {
                    self.nodes[i].schedulable = schedulable;
                }
            }
            Event::PartitionDefined(p) => {
                if let Some(e) = self.partitions.iter_mut().find(|e| e.name == p.name) {
                    *e = p;
                } else {
                    self.partitions.push(p);
                }
                self.index_partitions();
            }
            Event::Submitted(j) | Event::Updated(j) => {
                // A changed request plans afresh.
                self.planned.remove(&j.id);
                if let Some((old, _)) = self.pending.get(&j.id) {
                    self.queue.remove(&(std::cmp::Reverse(old.priority), old.id));
                }
                // A held job cannot start until it is released (an Updated event): it stays
                // out of the queue so that passes over a large held backlog cost nothing.
                if j.hold.is_none() {
                    self.queue.insert((std::cmp::Reverse(j.priority), j.id));
                } else {
                    self.held_due.push(j.id);
                }
                let reason = self.pending.get(&j.id).map(|p| p.1).unwrap_or(PendingReason::None);
                if let Some(a) = &j.more().array {
                    if let Some(t) = a.task {
                        self.note_task(j.id, a.array_id, t);
                    }
                }
                self.pending.insert(j.id, (j, reason));
            }
            Event::Withdrawn(id) => {
                self.planned.remove(&id);
                self.promised.remove(&id);
                if let Some((j, _)) = self.pending.remove(&id) {
                    self.queue.remove(&(std::cmp::Reverse(j.priority), id));
                }
            }
            Event::Configure(cfg) => self.config = cfg,
            Event::LicensesDefined(l) => {
                self.licenses = l.into_iter().collect();
                self.plan_dirty = true;
            }
            Event::LimitsDefined(caps) => {
                self.limits.define(caps);
                self.plan_dirty = true;
            }
            Event::TopologyDefined(t) => {
                self.topology = t;
                self.index_topology();
                self.planned.clear();
            }
            Event::ReservationsDefined(list) => {
                self.resvs = list
                    .into_iter()
                    .map(|r| {
                        let ix = r.nodes.iter().filter_map(|n| self.node_idx.get(n).copied()).collect();
                        (r, ix)
                    })
                    .collect();
                // Reservations made around the old windows may now be wrong.
                self.planned.clear();
            }
            Event::Running { job, alloc, array, since, limit, licenses, limits, qos, user } => {
                self.note_user(job, user, &alloc);
                if let Some(q) = qos {
                    self.running_qos.insert(job, q);
                }
                self.take_licenses(job, &licenses);
                self.limits.take(job, &limits, crate::limits::Usage::of(&alloc));
                if let Some((j, _)) = self.pending.remove(&job) {
                    self.queue.remove(&(std::cmp::Reverse(j.priority), job));
                }
                self.take(&alloc);
                self.running.insert(job, alloc);
                self.started_at.insert(job, since);
                self.ends.insert(job, since.saturating_add(limit.map_or(FAR, |l| l as i64)));
                let len = self.plan_len(user.0, limit);
                self.pred_ends.insert(job, since.saturating_add(len));
                if let Some((a, t)) = array {
                    self.note_task(job, a, t);
                    *self.array_running.entry(a).or_default() += 1;
                }
            }
            Event::Preempting { job, end } => {
                if self.running.contains_key(&job) {
                    self.preempting.insert(job, end);
                    self.ends.insert(job, end);
                    self.plan_dirty = true;
                }
            }
            Event::Suspended { job, alloc } => {
                self.preempting.remove(&job);
                let by = self.preempt_for.remove(&job);
                if let Some(held) = self.running.remove(&job) {
                    self.give_back(&held);
                    self.suspended.insert(job, (held, by));
                    self.plan_dirty = true;
                } else if let Some(a) = alloc {
                    self.suspended.insert(job, (a, by));
                }
            }
            Event::Ended { job, outcome } => {
                self.running_qos.remove(&job);
                self.preempting.remove(&job);
                self.preempt_for.remove(&job);
                self.suspended.remove(&job);
                if self.limits.release(job) {
                    self.plan_dirty = true;
                }
                if let Some(held) = self.job_licenses.remove(&job) {
                    for (name, n) in held {
                        if let Some(u) = self.licenses_used.get_mut(&name) {
                            *u = u.saturating_sub(n);
                        }
                    }
                    self.plan_dirty = true;
                }
                self.ends.remove(&job);
                self.pred_ends.remove(&job);
                self.promised.remove(&job);
                self.planned.remove(&job);
                self.shown.remove(&job);
                if let Some(alloc) = self.running.remove(&job) {
                    self.drop_user(job, &alloc);
                    self.give_back(&alloc);
                    if let Some((a, _)) = self.task_of.get(&job) {
                        if let Some(n) = self.array_running.get_mut(a) {
                            *n = n.saturating_sub(1);
                            if *n == 0 {
                                self.array_running.remove(a);
                            }
                        }
                    }
                }
                if let Some((j, _)) = self.pending.remove(&job) {
                    self.queue.remove(&(std::cmp::Reverse(j.priority), job));
                }
                self.ended.insert(job, outcome);
            }
            Event::Ran { uid, seconds } => {
                self.history.record(uid, seconds);
            }
            Event::Forgotten(job) => {
                self.ended.remove(&job);
                self.started_at.remove(&job);
                if let Some((a, t)) = self.task_of.remove(&job) {
                    self.task_job.remove(&(a, t));
                    if let Some(m) = self.members.get_mut(&a) {
                        m.retain(|j| *j != job);
                        if m.is_empty() {
                            self.members.remove(&a);
                        }
                    }
                }
            }
        }
    }

    fn take_licenses(&mut self, job: JobId, licenses: &[(String, u32)]) {
        if licenses.is_empty() {
            return;
        }
        for (name, n) in licenses {
            *self.licenses_used.entry(name.clone()).or_default() += n;
        }
        self.job_licenses.insert(job, licenses.to_vec());
    }

    /// Whether every license the job asks for is free now.
    fn licenses_free(&self, job: &SchedJob) -> bool {
        job.more().licenses.iter().all(|(name, n)| {
            let total = self.licenses.get(name).copied().unwrap_or(0);
            let used = self.licenses_used.get(name).copied().unwrap_or(0);
            used + n <= total
        })
    }

    /// Each license: (name, total, in use), by name.
    pub fn licenses(&self) -> Vec<(String, u32, u32)> {
        self.licenses.iter().map(|(n, t)| (n.clone(), *t, self.licenses_used.get(n).copied().unwrap_or(0))).collect()
    }

    fn take(&mut self, alloc: &Allocation) {
        self.free_now.set(None);
        for na in &alloc.nodes {
            if let Some(&i) = self.node_idx.get(&na.node) {
                let n = &mut self.nodes[i];
                for &c in &na.cpu_ids {
                    if let Some(u) = n.used.get_mut(c as usize) {
                        n.used_cpus += u32::from(!*u);
                        *u = true;
                    }
                }
                n.used_mem += na.mem_mb;
                n.gres.take(&na.gres);
                n.jobs += 1;
            }
        }
    }

    /// A job of `user` (and whether it is `--exclusive=user`) holds these nodes.
    fn note_user(&mut self, job: JobId, user: (u32, bool), alloc: &Allocation) {
        let (uid, excl) = user;
        self.job_user.insert(job, user);
        for na in &alloc.nodes {
            let Some(&i) = self.node_idx.get(&na.node) else { continue };
            let n = &mut self.nodes[i];
            match n.users.iter_mut().find(|u| u.0 == uid) {
                Some(u) => u.1 += 1,
                None => n.users.push((uid, 1)),
            }
            if excl {
                if n.excl_user.is_none() {
                    self.excl_user_nodes += 1;
                }
                let e = n.excl_user.get_or_insert((uid, 0));
                e.1 += 1;
            }
        }
    }

    fn drop_user(&mut self, job: JobId, alloc: &Allocation) {
        let Some((uid, excl)) = self.job_user.remove(&job) else { return };
        for na in &alloc.nodes {
            let Some(&i) = self.node_idx.get(&na.node) else { continue };
            let n = &mut self.nodes[i];
            if let Some(u) = n.users.iter_mut().find(|u| u.0 == uid) {
                u.1 -= 1;
            }
            n.users.retain(|u| u.1 > 0);
            if excl {
                if let Some(e) = n.excl_user.as_mut() {
                    e.1 -= 1;
                    if e.1 == 0 {
                        n.excl_user = None;
                        self.excl_user_nodes -= 1;
                    }
                }
            }
        }
    }

    /// Whether `job` may share node `n` with who runs there: not beside another user's
    /// `--exclusive=user` job, and, itself `--exclusive=user`, only beside its user's jobs.
    fn user_ok(&self, job: &SchedJob, n: &NodeRes) -> bool {
        n.excl_user.is_none_or(|(u, _)| u == job.uid)
            && (!job.more().exclusive_user || n.users.iter().all(|&(u, _)| u == job.uid))
    }

    fn give_back(&mut self, alloc: &Allocation) {
        self.free_now.set(None);
        for na in &alloc.nodes {
            if let Some(&i) = self.node_idx.get(&na.node) {
                let n = &mut self.nodes[i];
                for &c in &na.cpu_ids {
                    if let Some(u) = n.used.get_mut(c as usize) {
                        n.used_cpus -= u32::from(*u);
                        *u = false;
                    }
                }
                n.used_mem = n.used_mem.saturating_sub(na.mem_mb);
                n.gres.give_back(&na.gres);
                n.jobs = n.jobs.saturating_sub(1);
            }
        }
    }

    /// Records that `job` runs task `task` of array `array`.
    fn note_task(&mut self, job: JobId, array: JobId, task: u32) {
        if self.task_of.insert(job, (array, task)).is_none() {
            self.members.entry(array).or_default().push(job);
        }
        self.task_job.insert((array, task), job);
    }

    /// The array's pending remainder, when it still has one.
    fn remainder(&self, array: JobId) -> Option<&TaskSet> {
        let (j, _) = self.pending.get(&array)?;
        j.more().array.as_ref().filter(|a| a.task.is_none()).map(|a| &a.pending)
    }

    fn is_array(&self, id: JobId) -> bool {
        self.members.contains_key(&id) || self.remainder(id).is_some()
    }

    fn job_state(&self, id: JobId, st: &mut TargetState) {
        if self.pending.contains_key(&id) {
            st.known = true;
            st.pending = true;
        } else if self.running.contains_key(&id) {
            st.known = true;
            st.running = true;
        } else if let Some(o) = self.ended.get(&id) {
            st.known = true;
            st.failed |= *o == Outcome::Failed;
        } else {
            return;
        }
        if let Some(&t) = self.started_at.get(&id) {
            st.started = Some(st.started.map_or(t, |s| s.max(t)));
        }
    }

    /// A target: job `id`, task `task` of array `id`, or every task of array `id`.
    fn target_state(&self, id: JobId, task: Option<u32>) -> TargetState {
        let mut st = TargetState::default();
        match task {
            Some(t) => match self.task_job.get(&(id, t)) {
                Some(&j) => self.job_state(j, &mut st),
                None if self.remainder(id).is_some_and(|r| r.contains(t)) => {
                    st.known = true;
                    st.pending = true;
                }
                None => {}
            },
            None if self.is_array(id) => {
                if self.remainder(id).is_some() {
                    st.known = true;
                    st.pending = true;
                }
                for &j in self.members.get(&id).into_iter().flatten() {
                    self.job_state(j, &mut st);
                }
            }
            None => self.job_state(id, &mut st),
        }
        st
    }

    fn dep_one(&self, d: &Dependency, job: &SchedJob, now: i64) -> DepState {
        let (kind, task) = match d.kind {
            DependencyKind::AfterBurstBuffer | DependencyKind::Singleton => return DepState::Satisfied,
            // Task N waits for task N of the other array (the whole job when it is not one);
            // an array's remainder is judged by the task it would start next.
            DependencyKind::AfterCorr => {
                let mine = job.more().array.as_ref().and_then(|a| a.task.or_else(|| a.pending.min()));
                (DependencyKind::AfterOk, mine.filter(|_| self.is_array(d.job)))
            }
            k => (k, d.task),
        };
        let st = self.target_state(d.job, task);
        if !st.known {
            // Ended and forgotten (MinJobAge): Slurm counts it as satisfied too.
            return DepState::Satisfied;
        }
        let ended = !st.pending && !st.running;
        match kind {
            DependencyKind::After => {
                if st.pending {
                    return DepState::Waiting;
                }
                match st.started {
                    Some(t0) if d.delay_min > 0 && now < t0 + i64::from(d.delay_min) * 60 => {
                        let due = t0 + i64::from(d.delay_min) * 60;
                        self.dep_wake.set(Some(self.dep_wake.get().map_or(due, |w| w.min(due))));
                        DepState::Waiting
                    }
                    _ => DepState::Satisfied,
                }
            }
            DependencyKind::AfterAny if ended => DepState::Satisfied,
            DependencyKind::AfterOk if st.failed => DepState::Never,
            DependencyKind::AfterOk if ended => DepState::Satisfied,
            DependencyKind::AfterNotOk if ended && st.failed => DepState::Satisfied,
            DependencyKind::AfterNotOk if ended => DepState::Never,
            _ => DepState::Waiting,
        }
    }

    fn dep_state(&self, job: &SchedJob, now: i64) -> DepState {
        let more = job.more();
        if more.singleton_after.iter().any(|b| self.pending.contains_key(b) || self.running.contains_key(b)) {
            return DepState::Waiting;
        }
        let deps = &more.dependency;
        let mut states =
            deps.list.iter().filter(|d| d.kind != DependencyKind::Singleton).map(|d| self.dep_one(d, job, now));
        if deps.any {
            let all: Vec<DepState> = states.collect();
            if all.is_empty() || all.iter().any(|s| matches!(s, DepState::Satisfied)) {
                DepState::Satisfied
            } else if all.iter().all(|s| matches!(s, DepState::Never)) {
                DepState::Never
            } else {
                DepState::Waiting
            }
        } else {
            let mut waiting = false;
            for st in states.by_ref() {
                match st {
                    DepState::Never => return DepState::Never,
                    DepState::Waiting => waiting = true,
                    DepState::Satisfied => {}
                }
            }
            if waiting {
                DepState::Waiting
            } else {
                DepState::Satisfied
            }
        }
    }

    /// Whether a job could ever run on this cluster (checked at submit).
    pub fn check_submit(&self, job: &SchedJob, enforce_part_limits: bool) -> SubmitCheck {
        let mut any = false;
        let mut limit_reason = None;
        for pname in &job.partitions {
            let Some(part) = self.partitions.iter().find(|p| *p.name == **pname) else {
                continue;
            };
            if job.more().nodelist.iter().any(|n| !part.nodes.contains(n)) {
                return SubmitCheck::NodesNotInPartition;
            }
            if let Some(r) = partition_limit(job, part) {
                limit_reason.get_or_insert(r);
                if enforce_part_limits {
                    continue;
                }
            }
            // Per-node fit on an empty node: cores, memory and features.
            let fits = |n: &NodeRes| {
                let cpt = job.cpus_per_task.max(1);
                let per = job.more().ntasks_per_node.unwrap_or(1);
                let cpus = per * cpt;
                let mem = job.mem_per_node_mb.unwrap_or(0).max(job.mem_per_cpu_mb.unwrap_or(0) * cpus as u64);
                n.cpus >= cpus
                    && n.mem_mb >= mem
                    && job.more().gres.iter().all(|g| g.for_tasks(per) <= n.gres.total(g))
                    && job.more().constraint.as_ref().is_none_or(|c| c.matches(&n.features))
                    && !job.more().exclude.contains(&n.name)
            };
            let usable: Vec<&NodeRes> = part.nodes.iter().filter_map(|n| self.node(n)).filter(|n| fits(n)).collect();
            if usable.is_empty() {
                continue;
            }
            if job.more().nodelist.iter().any(|w| !usable.iter().any(|n| &n.name == w)) {
                continue;
            }
            // Enough CPUs across the nodes the job may use for all its tasks (node counts beyond
            // the partition's size are a pending reason, not a refusal, as in Slurm).
            let cpt = job.cpus_per_task.max(1);
            let mut caps: Vec<u64> = usable
                .iter()
                .map(|n| {
                    let c = n.cpus / cpt;
                    u64::from(job.more().ntasks_per_node.map_or(c, |p| p.min(c)))
                })
                .collect();
            caps.sort_unstable_by(|a, b| b.cmp(a));
            let k = job.max_nodes.map_or(caps.len(), |m| (m as usize).min(caps.len()));
            let total: u64 = caps.iter().take(k).sum();
            if total < u64::from(job.ntasks) && job.min_nodes as usize <= part.nodes.len() {
                continue;
            }
            any = true;
        }
        if any {
            SubmitCheck::Ok
        } else if let (true, Some(r)) = (enforce_part_limits, limit_reason) {
            SubmitCheck::PartitionLimit(r)
        } else {
            SubmitCheck::NodeConfigUnavailable
        }
    }

    /// One scheduling pass: starts every job that fits now, in priority order, and reports
    /// pending reasons that changed. `next_id` issues the job id of each array task that
    /// starts apart from its array.
    pub fn schedule(&mut self, now: i64, next_id: &mut dyn FnMut() -> JobId) -> Vec<Decision> {
        // Nothing changed and no begin time has come: every decision would be the same.
        if !self.changed && self.wake_at.is_none_or(|w| now < w) {
            return Vec::new();
        }
        self.changed = false;
        if self.replan_at.take().is_some_and(|r| now >= r) {
            // A prediction ran out: the plan is built again.
            self.plan_dirty = true;
        }
        self.stats.passes += 1;
        self.stats.last_queue_len = self.queue.len() as u32;
        self.stats.last_depth = 0;
        self.wake_at = None;
        self.dep_wake.set(None);
        self.free_now.set(None);
        self.no_room.borrow_mut().clear();
        self.reserved_left.borrow_mut().clear();
        let mut out = Vec::new();
        for id in std::mem::take(&mut self.held_due) {
            let Some((job, old)) = self.pending.get_mut(&id) else { continue };
            let reason = match job.hold {
                Some(Hold::User) => PendingReason::JobHeldUser,
                Some(Hold::Admin) => PendingReason::JobHeldAdmin,
                Some(Hold::Fenced) => PendingReason::NodeDown,
                None => continue,
            };
            if *old != reason {
                *old = reason;
                out.push(Decision::Reason { job: id, reason });
            }
        }
        // Jobs suspended by preemption come back first, once the job they made room for is
        // gone and their own resources are free.
        let waiting: Vec<JobId> = self.suspended.keys().copied().collect();
        for job in waiting {
            let ready = self.suspended.get(&job).is_some_and(|(a, by)| {
                by.is_none_or(|b| !self.pending.contains_key(&b) && !self.running.contains_key(&b))
                    && self.free_exactly(a)
            });
            if !ready {
                continue;
            }
            if let Some((alloc, _)) = self.suspended.remove(&job) {
                self.take(&alloc);
                self.running.insert(job, alloc);
                out.push(Decision::Resume { job });
            }
        }
        let mut blocked: Vec<std::sync::Arc<str>> = Vec::new();
        let planning = self.config.policy != Policy::Fcfs && self.plan_dirty && now >= self.next_plan;
        if planning && self.config.predict {
            // The starvation guard: a reservation that slipped too far (predictions that
            // proved short) is planned, with everything else, by time limits until it starts.
            let slip = self.config.slip_limit;
            self.by_limits = self.planned.iter().any(|(id, r)| {
                self.pending.contains_key(id) && self.promised.get(id).is_some_and(|p| r.start > p.saturating_add(slip))
            });
        }
        let mut tl = self.timeline(now);
        // Like Slurm's two schedulers: every pass starts what fits in priority order and
        // honours the reservations made so far; a planning pass (at most every bf_interval,
        // and only after a change) also backfills and makes new reservations.
        if planning {
            self.plan_dirty = false;
            self.next_plan = now.saturating_add(self.config.interval);
        } else if self.config.policy != Policy::Fcfs && self.plan_dirty {
            self.wake_at = Some(self.wake_at.map_or(self.next_plan, |w| w.min(self.next_plan)));
        }
        if planning {
            self.stats.planning_passes += 1;
        }
        // A job that found no room was passed over: one started after it is backfilled.
        let mut passed_over = false;
        let depth = match self.config.policy {
            _ if !planning => 0,
            Policy::Fcfs => 0,
            Policy::Easy => 1,
            Policy::Conservative => self.config.max_job_test,
        };
        // Last pass's reservations stand until their jobs are reached in priority order.
        let old = std::mem::take(&mut self.planned);
        let mut kept: Vec<&Reservation> = old.values().filter(|r| self.pending.contains_key(&r.job)).collect();
        kept.sort_unstable_by_key(|r| r.job);
        for r in kept {
            tl.add(r.clone());
        }
        let mut planned: HashMap<JobId, Reservation> = HashMap::default();
        // bf_max_job_user: reservations made per user in this pass.
        let mut per_user: HashMap<u32, usize> = HashMap::default();
        let mut order: Vec<JobId> = self.queue.iter().map(|(_, id)| *id).collect();
        // Once the reservations are made, the rest may be tried for backfill by their claim
        // on a hole instead of by priority (ties in priority order).
        let mut reordered = self.config.order == BackfillOrder::Priority || depth == 0;
        let mut k = 0;
        while k < order.len() {
            if !reordered && planned.len() >= depth {
                reordered = true;
                let mut rest: Vec<(f64, usize, JobId)> = order[k..]
                    .iter()
                    .enumerate()
                    .map(|(n, id)| (self.pending.get(id).map_or(0.0, |(j, _)| self.backfill_score(j, now)), n, *id))
                    .collect();
                rest.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
                for (slot, (_, _, id)) in order[k..].iter_mut().zip(rest) {
                    *slot = id;
                }
            }
            let id = order[k];
            k += 1;
            let Some((job, old_reason)) = self.pending.get(&id) else {
                continue;
            };
            let old_reason = *old_reason;
            // Strict order with every partition blocked: a job already waiting for priority
            // still does, and a long queue costs nothing more to pass over.
            if depth == 0 && old_reason == PendingReason::Priority && blocked.len() >= self.partitions.len() {
                continue;
            }
            let priority = job.priority;
            if let Some(b) = job.more().begin_time.filter(|b| *b > now) {
                self.wake_at = Some(self.wake_at.map_or(b, |w| w.min(b)));
            }
            // A leaf-switch limit lapses at its deadline: look again then.
            if let Some(until) = job.more().switches.map(|s| s.1).filter(|u| *u > now) {
                self.wake_at = Some(self.wake_at.map_or(until, |w| w.min(until)));
            }
            // Its own reservation is what it may use; the others it must not delay.
            // Room given back (this reservation may be made again elsewhere, or not at all):
            // what found no room before may find some now.
            if tl.remove(id) {
                self.no_room.borrow_mut().clear();
            }
            // A member of an advance reservation runs on its nodes, inside its window.
            let within = match self.within(job, now) {
                Ok(w) => w,
                Err(r) => {
                    if let Some(start) = job.more().reservation.as_ref().and_then(|n| {
                        self.resvs.iter().find(|(x, _)| x.name == *n && x.start > now).map(|(x, _)| x.start)
                    }) {
                        self.wake_at = Some(self.wake_at.map_or(start, |w| w.min(start)));
                    }
                    if r != old_reason {
                        if let Some(e) = self.pending.get_mut(&id) {
                            e.1 = r;
                        }
                        out.push(Decision::Reason { job: id, reason: r });
                    }
                    continue;
                }
            };
            if let Some((k, _)) = &within {
                if tl.remove(ADVANCE_RESV_BASE - *k as JobId) {
                    self.no_room.borrow_mut().clear();
                }
            }
            let inside = within.as_ref().map(|(_, w)| w);
            let how = Eval { strict: depth == 0, reserved: old.contains_key(&id), within: inside };
            self.stats.last_depth += 1;
            self.stats.depth_sum += 1;
            let mut result = self.evaluate(job, now, &blocked, &tl, how);
            // An array's remainder starts as many tasks as fit, one at a time.
            while let Ok((alloc, limit)) = result {
                self.take(&alloc);
                let user = self.pending.get(&id).map_or((0, false), |(j, _)| (j.uid, j.more().exclusive_user));
                let (licenses, limits, qos) = self
                    .pending
                    .get(&id)
                    .map(|(j, _)| {
                        let m = j.more();
                        (m.licenses.clone(), m.limits.clone(), m.preempt.as_ref().map(|p| p.qos.clone()))
                    })
                    .unwrap_or_default();
                let mut end = now.saturating_add(limit.map_or(FAR, |l| l as i64));
                if let Some(w) = inside {
                    // Ended at its reservation's end.
                    end = end.min(w.end);
                }
                let pred_end = now.saturating_add(self.plan_len(user.0, limit)).min(end);
                for na in &alloc.nodes {
                    if let Some(&i) = self.node_idx.get(&na.node) {
                        tl.hold(i, pred_end, held(na));
                    }
                }
                let split = self.pending.get_mut(&id).and_then(|(j, _)| {
                    let a = j.more.as_mut()?.array.as_mut().filter(|a| a.task.is_none())?;
                    let t = a.pending.pop_first()?;
                    Some((a.array_id, t, a.pending.is_empty()))
                });
                let (job_id, split, done) = match split {
                    Some((array, t, last)) => {
                        let job_id = if last { id } else { next_id() };
                        self.note_task(job_id, array, t);
                        *self.array_running.entry(array).or_default() += 1;
                        (job_id, Some((array, t)), last)
                    }
                    None => (id, None, true),
                };
                if done {
                    self.queue.remove(&(std::cmp::Reverse(priority), id));
                    self.pending.remove(&id);
                    self.promised.remove(&id);
                }
                self.take_licenses(job_id, &licenses);
                self.limits.take(job_id, &limits, crate::limits::Usage::of(&alloc));
                self.note_user(job_id, user, &alloc);
                self.running.insert(job_id, alloc.clone());
                if let Some(q) = qos {
                    self.running_qos.insert(job_id, q);
                }
                self.started_at.insert(job_id, now);
                self.ends.insert(job_id, end);
                if self.config.predict {
                    self.pred_ends.insert(job_id, pred_end);
                }
                if passed_over {
                    self.stats.backfilled += 1;
                }
                out.push(Decision::Start { job: job_id, alloc, time_limit: limit, split });
                result = match self.pending.get(&id) {
                    Some((job, _)) if !done => self.evaluate(job, now, &blocked, &tl, how),
                    _ => Err(PendingReason::None),
                };
            }
            if let Some((k, _)) = &within {
                if let Some(b) = self.resv_block(*k, now) {
                    tl.add(b);
                }
            }
            let Err(reason) = result else { continue };
            if !self.pending.contains_key(&id) {
                continue;
            }
            if matches!(reason, PendingReason::Resources | PendingReason::Priority) {
                passed_over = true;
            }
            if within.is_some() {
                // Inside its reservation only its fellow members compete: no backfill
                // reservation, and the partition stays open to the jobs behind it.
                if reason != old_reason {
                    if let Some(e) = self.pending.get_mut(&id) {
                        e.1 = reason;
                    }
                    out.push(Decision::Reason { job: id, reason });
                }
                continue;
            }
            // Backfill: the top waiting jobs get reservations, which later jobs may not delay.
            let reserve_ok = self.pending.get(&id).is_some_and(|(job, _)| {
                // bf_min_age_reserve: too young to hold anything back; bf_max_job_user.
                job.queued.saturating_add(self.config.min_age_reserve) <= now
                    && (self.config.max_job_user == 0
                        || per_user.get(&job.uid).copied().unwrap_or(0) < self.config.max_job_user)
            });
            if matches!(reason, PendingReason::Resources | PendingReason::Priority)
                && planned.len() < depth
                && reserve_ok
            {
                if let Some((job, _)) = self.pending.get(&id) {
                    *per_user.entry(job.uid).or_default() += 1;
                    let fresh = self.reserve(job, now, &tl);
                    // Without predictions a reservation only moves earlier (conservative's
                    // promise); with them it follows the predictions, which may prove short.
                    let chosen = match (fresh, old.get(&id)) {
                        (Some(f), Some(o)) if f.start > o.start && !self.config.predict => Some(o.clone()),
                        (None, Some(o)) if !self.config.predict => Some(o.clone()),
                        (f, _) => f,
                    };
                    if let Some(r) = chosen {
                        if self.config.predict {
                            self.promised.entry(id).or_insert(r.start);
                        }
                        planned.insert(id, r.clone());
                        tl.add(r);
                    }
                }
            }
            if reason == PendingReason::Resources {
                if let Some((job, _)) = self.pending.get(&id) {
                    for p in &job.partitions {
                        if !blocked.contains(p) {
                            blocked.push(p.clone());
                        }
                    }
                }
            }
            if reason != old_reason {
                if let Some(e) = self.pending.get_mut(&id) {
                    e.1 = reason;
                }
                out.push(Decision::Reason { job: id, reason });
            }
        }
        if let Some(w) = self.dep_wake.take() {
            self.wake_at = Some(self.wake_at.map_or(w, |x| x.min(w)));
        }
        self.preempt(now, &mut out);
        if !planning {
            // Reservations stand as they were (less the jobs that started or left).
            planned = old.into_iter().filter(|(j, _)| self.pending.contains_key(j)).collect();
            self.planned = planned;
            return out;
        }
        // A running job that outlives its prediction changes the plan with no event: look
        // again at the earliest predicted end (the plan then extends it).
        if self.config.predict && !self.queue.is_empty() {
            let due = self
                .running
                .keys()
                .map(|&j| self.planned_end(j, now))
                .zip(self.running.keys())
                .filter(|(e, j)| self.ends.get(j).is_some_and(|l| e < l))
                .map(|(e, _)| e)
                .min();
            if let Some(due) = due {
                self.wake_at = Some(self.wake_at.map_or(due, |w| w.min(due)));
            }
            self.replan_at = due;
        }
        // Under EASY the jobs after the reserved one are given expected starts too, where
        // the plan would put them now: shown, never held against anyone.
        let mut forecast: HashMap<JobId, Reservation> = HashMap::default();
        if self.config.forecast && depth < self.config.max_job_test {
            for &(_, id) in &self.queue {
                if planned.len() + forecast.len() >= self.config.max_job_test {
                    break;
                }
                let Some((job, reason)) = self.pending.get(&id) else { continue };
                if planned.contains_key(&id) || !matches!(reason, PendingReason::Resources | PendingReason::Priority) {
                    continue;
                }
                if let Some(r) = self.reserve(job, now, &tl) {
                    tl.add(r.clone());
                    forecast.insert(id, r);
                }
            }
        }
        // Report expected starts within bf_window (Slurm shows N/A beyond it); wake up
        // when a reservation further out comes within it.
        let horizon = now.saturating_add(self.config.window);
        let mut shown: HashMap<JobId, (i64, Vec<String>)> = HashMap::default();
        let mut ids: Vec<JobId> = planned.keys().chain(forecast.keys()).copied().collect();
        ids.sort_unstable();
        for id in ids {
            let Some(r) = planned.get(&id).or_else(|| forecast.get(&id)) else { continue };
            if r.start > horizon {
                let due = r.start - self.config.window;
                self.wake_at = Some(self.wake_at.map_or(due, |w| w.min(due)));
                continue;
            }
            let v = (r.start, r.claims.iter().map(|c| self.nodes[c.0].name.clone()).collect::<Vec<_>>());
            if self.shown.get(&id) != Some(&v) {
                out.push(Decision::Planned { job: id, start: Some(v.0), nodes: v.1.clone() });
            }
            shown.insert(id, v);
        }
        let mut gone: Vec<JobId> =
            self.shown.keys().filter(|j| !shown.contains_key(j) && self.pending.contains_key(j)).copied().collect();
        gone.sort_unstable();
        for job in gone {
            out.push(Decision::Planned { job, start: None, nodes: Vec::new() });
        }
        self.shown = shown;
        self.stats.last_table_size = planned.len() as u32;
        self.planned = planned;
        out
    }

    /// The earliest moment a pass may decide something new without an event (a begin time,
    /// a reservation coming into the window, a prediction running out): a driver with no
    /// clock of its own (the simulator) schedules a pass then.
    pub fn wake_at(&self) -> Option<i64> {
        self.wake_at
    }

    /// What the passes did so far (see [`PassStats`]).
    pub fn pass_stats(&self) -> PassStats {
        self.stats
    }

    /// QoS preemption: each waiting job (in priority order) that may preempt and is first in
    /// line for resources in its partition gets the fewest running jobs of the QoS it may preempt (youngest first,
    /// those that ran less than `PreemptExemptTime` spared) whose resources would let it
    /// start, unless jobs already being preempted for it free enough.
    fn preempt(&mut self, now: i64, out: &mut Vec<Decision>) {
        if self.running_qos.is_empty() {
            return;
        }
        let order: Vec<JobId> = self.queue.iter().map(|(_, id)| *id).collect();
        let mut tried = 0;
        for id in order {
            let Some((job, reason)) = self.pending.get(&id) else { continue };
            let Some(p) = job.more().preempt.as_ref().filter(|p| !p.can_preempt.is_empty()) else { continue };
            // Only the first waiting job of its partition (the others wait for priority):
            // room freed for a job further back would go to those before it.
            if *reason != PendingReason::Resources {
                continue;
            }
            tried += 1;
            if tried > 16 {
                break;
            }
            let may = |v: &JobId| self.running_qos.get(v).is_some_and(|q| p.can_preempt.contains(q));
            let mut going: Vec<JobId> = self.preempting.keys().copied().filter(|v| may(v)).collect();
            going.sort_unstable();
            if self.fits_without(job, &going) {
                continue;
            }
            let exempt = self.config.preempt_exempt;
            let mut cands: Vec<JobId> = Vec::new();
            for v in self.running_qos.keys().copied().filter(|v| may(v) && !self.preempting.contains_key(v)) {
                match self.started_at.get(&v) {
                    // Still exempt: the pass when it no longer is may choose it.
                    Some(s) if now - s < exempt => {
                        let due = s + exempt;
                        self.wake_at = Some(self.wake_at.map_or(due, |w| w.min(due)));
                    }
                    _ => cands.push(v),
                }
            }
            cands.sort_unstable_by_key(|v| (std::cmp::Reverse(self.started_at.get(v).copied().unwrap_or(0)), *v));
            let mut chosen: Vec<JobId> = Vec::new();
            let with =
                |going: &[JobId], chosen: &[JobId]| -> Vec<JobId> { going.iter().chain(chosen).copied().collect() };
            let mut found = false;
            for v in cands {
                chosen.push(v);
                if self.fits_without(job, &with(&going, &chosen)) {
                    found = true;
                    break;
                }
            }
            if !found {
                continue;
            }
            // The fewest: drop any chosen job the others make unnecessary.
            let mut k = 0;
            while k < chosen.len() {
                let mut fewer = chosen.clone();
                fewer.remove(k);
                if self.fits_without(job, &with(&going, &fewer)) {
                    chosen = fewer;
                } else {
                    k += 1;
                }
            }
            for v in chosen {
                self.preempting.insert(v, now);
                self.preempt_for.insert(v, id);
                out.push(Decision::Preempt { job: v, by: id });
            }
        }
    }

    /// Whether `job` is suspended by preemption (its resources lent to others).
    pub fn suspended_by_preemption(&self, job: JobId) -> bool {
        self.suspended.contains_key(&job)
    }

    /// Whether exactly these CPUs, memory and GRES are free now.
    fn free_exactly(&self, alloc: &Allocation) -> bool {
        alloc.nodes.iter().all(|na| {
            self.node_idx.get(&na.node).is_some_and(|&i| {
                let n = &self.nodes[i];
                na.cpu_ids.iter().all(|&c| n.used.get(c as usize) == Some(&false))
                    && n.mem_mb.saturating_sub(n.used_mem) >= na.mem_mb
                    && n.gres.can_take(&na.gres)
            })
        })
    }

    /// Whether `job` would fit now if `victims` were gone.
    fn fits_without(&self, job: &SchedJob, victims: &[JobId]) -> bool {
        let mut freed: HashMap<usize, (Res, u32)> = HashMap::default();
        for v in victims {
            for na in self.running.get(v).map(|a| a.nodes.as_slice()).unwrap_or_default() {
                if let Some(&i) = self.node_idx.get(&na.node) {
                    let e = freed.entry(i).or_default();
                    let h = held(na);
                    e.0.cpus += h.cpus;
                    e.0.mem += h.mem;
                    e.0.gpus += h.gpus;
                    e.1 += 1;
                }
            }
        }
        let free = |i: usize| {
            let n = &self.nodes[i];
            let (r, jobs) = freed.get(&i).copied().unwrap_or_default();
            Free {
                cpus: (n.cpus - n.alloc_cpus()) + r.cpus,
                mem: n.mem_mb.saturating_sub(n.used_mem) + r.mem,
                gpus: self.gpus_free_for(job, n) + r.gpus,
                idle: n.jobs <= jobs,
            }
        };
        job.partitions.iter().any(|pname| {
            self.partitions
                .iter()
                .find(|p| *p.name == **pname)
                .filter(|p| p.down.is_none() && partition_limit(job, p).is_none())
                .is_some_and(|part| self.place(job, part, &free, None).is_ok())
        })
    }

    /// Whether `job` can start now; `tl` holds the pass's reservations it must not delay.
    fn evaluate(
        &self,
        job: &SchedJob,
        now: i64,
        blocked: &[std::sync::Arc<str>],
        tl: &Timeline,
        how: Eval<'_>,
    ) -> Result<(Allocation, TimeLimit), PendingReason> {
        let Eval { strict, reserved, within } = how;
        match job.hold {
            Some(Hold::User) => return Err(PendingReason::JobHeldUser),
            Some(Hold::Admin) => return Err(PendingReason::JobHeldAdmin),
            Some(Hold::Fenced) => return Err(PendingReason::NodeDown),
            None => {}
        }
        match self.dep_state(job, now) {
            DepState::Never => return Err(PendingReason::DependencyNeverSatisfied),
            DepState::Waiting => return Err(PendingReason::Dependency),
            DepState::Satisfied => {}
        }
        if job.more().begin_time.is_some_and(|b| b > now) {
            return Err(PendingReason::BeginTime);
        }
        if let Some(a) = job.more().array.as_ref().filter(|a| a.throttle > 0) {
            if self.array_running.get(&a.array_id).copied().unwrap_or(0) >= a.throttle {
                return Err(PendingReason::JobArrayTaskLimit);
            }
        }
        if !self.licenses_free(job) {
            return Err(PendingReason::Licenses);
        }
        if let Some(r) = job.more().policy {
            return Err(r);
        }
        if let Some(r) = self.limits.blocked(&job.more().limits, &job.need()) {
            return Err(r);
        }
        let fcfs = strict;
        let mut best_reason: Option<PendingReason> = None;
        for pname in &job.partitions {
            let Some(part) = self.partitions.iter().find(|p| *p.name == **pname) else {
                continue;
            };
            // Members of an advance reservation wait only for each other.
            let behind = within.is_none() && blocked.contains(pname);
            let limit = job.effective_limit(part);
            // An UNLIMITED job may not start where it would ever meet a reservation; a
            // member of an advance reservation runs until its end at most.
            let len = self.plan_len(job.uid, limit);
            let end = now.saturating_add(len).min(within.map_or(i64::MAX, |w| w.end));
            let r = if let Some(r) = part.down {
                r
            } else if let Some(r) = partition_limit(job, part) {
                r
            } else if fcfs && behind {
                PendingReason::Priority
            } else if !job.exclusive && self.cannot_fit_now(job) {
                // More cores than are free anywhere now: no placement to try.
                if behind {
                    PendingReason::Priority
                } else {
                    PendingReason::Resources
                }
            } else {
                // What the timeline allows, and never more than the node has free now.
                let cpt = job.cpus_per_task.max(1);
                let free = |i: usize| {
                    const NONE: Free = Free { cpus: 0, mem: 0, gpus: 0, idle: false };
                    if within.is_some_and(|w| !w.nodes[i]) {
                        return NONE;
                    }
                    // A node that cannot hold one task now has no room whatever the timeline
                    // says (on a busy cluster, most nodes: the timeline is not asked).
                    let n = &self.nodes[i];
                    if (job.exclusive && n.jobs > 0) || (!job.exclusive && n.cpus - n.alloc_cpus() < cpt) {
                        return NONE;
                    }
                    self.free_within(job, tl, i, now, end)
                };
                // A plain job no easier to place than one that already found no room in this
                // pass finds none either (room only shrinks within a pass). (Not for a job with
                // a reservation: the room it reserved was held against the others.)
                let shape = self.plain_shape(job, part, end).filter(|_| !reserved && within.is_none() && !self.no_memo);
                let dominated =
                    shape.as_ref().is_some_and(|sh| self.no_room.borrow().iter().any(|o| sh.no_easier_than(o)));
                let placed = if dominated {
                    Err(PendingReason::Resources)
                } else {
                    self.place(job, part, &free, job.switch_limit(now))
                };
                if let (Err(PendingReason::Resources), Some(sh), false) = (&placed, shape, dominated) {
                    // The least shapes that found no room: one that this one is no easier
                    // than says more than this one would.
                    let mut nr = self.no_room.borrow_mut();
                    nr.retain(|o| !o.no_easier_than(&sh));
                    if nr.len() < 64 {
                        nr.push(sh);
                    }
                }
                match placed {
                    Ok(picks) => return Ok((self.allocate(job, part, &picks), limit)),
                    // Behind a job that waits for resources in this partition: it waits
                    // for priority, as Slurm says, even where backfill was tried.
                    Err(PendingReason::Resources) if behind => PendingReason::Priority,
                    Err(r) => r,
                }
            };
            // Advance reservations in the way are named, as Slurm names them.
            let r = match r {
                PendingReason::Resources | PendingReason::Priority if within.is_none() => {
                    self.reserved_reason(job, part, now, end).unwrap_or(r)
                }
                r => r,
            };
            // Prefer the most actionable reason across partitions.
            best_reason = Some(match best_reason {
                None => r,
                Some(PendingReason::Resources) => PendingReason::Resources,
                Some(_) if r == PendingReason::Resources => r,
                Some(b) => b,
            });
        }
        Err(best_reason.unwrap_or(PendingReason::PartitionDown))
    }

    /// The earliest moment a waiting job could start without delaying the reservations made
    /// before it, and where: its reservation.
    fn reserve(&self, job: &SchedJob, now: i64, tl: &Timeline) -> Option<Reservation> {
        let mut best: Option<Reservation> = None;
        for pname in &job.partitions {
            let Some(part) = self.partitions.iter().find(|p| *p.name == **pname) else { continue };
            if part.down.is_some() || partition_limit(job, part).is_some() {
                continue;
            }
            let d = self.plan_len(job.uid, job.effective_limit(part));
            // Each node's earliest moment for its least share of the job (all of it for a
            // one-node job) bounds when the job can start: only later release times are tried.
            let mut first = Vec::new();
            let Some((lower, single)) = self.earliest_bound(job, part, now, d, tl, &mut first) else { continue };
            let mut times = tl.release_times(now);
            times.retain(|&t| t >= lower);
            if single {
                times.insert(0, lower);
                times.dedup();
            }
            let cpt = u64::from(job.cpus_per_task.max(1));
            let need = u64::from(job.ntasks) * cpt;
            let order = self.part_order(part);
            for t in times {
                if best.as_ref().is_some_and(|b| b.start <= t) {
                    break;
                }
                // Cheap first: enough cores free at that moment in the partition at all, on
                // the nodes that could hold a share of it by then.
                if !job.exclusive && !single {
                    let at: u64 =
                        order.iter().filter(|&&i| first[i] <= t).map(|&i| u64::from(tl.free_at(i, t).cpus)).sum();
                    if at < need {
                        continue;
                    }
                }
                // A node holds no share of the job before its first fit (the timeline is not asked).
                let free = |i: usize| {
                    if first[i] > t {
                        return Free { cpus: 0, mem: 0, gpus: 0, idle: false };
                    }
                    tl.free_over(i, t, t.saturating_add(d))
                };
                if let Ok(picks) = self.place(job, part, &free, job.switch_limit(t)) {
                    let claims = picks.iter().map(|&(i, tasks)| (i, self.claim(job, i, tasks))).collect();
                    best = Some(Reservation { job: job.id, start: t, end: t.saturating_add(d), claims });
                    break;
                }
            }
        }
        best
    }

    /// Where `part` (one of `self.partitions`) stands among them.
    fn part_index(&self, part: &PartitionRes) -> Option<usize> {
        self.partitions.iter().position(|p| std::ptr::eq(p, part))
    }

    /// The partition's node indices in placement order.
    fn part_order(&self, part: &PartitionRes) -> &[usize] {
        self.part_index(part).and_then(|k| self.part_nodes.get(k)).map_or(&[][..], |v| v.as_slice())
    }

    /// The shape of a job on a fixed number of nodes with no node, feature, GRES or
    /// exclusivity request, ending at `end` if it started now.
    fn plain_shape(&self, job: &SchedJob, part: &PartitionRes, end: i64) -> Option<Shape> {
        let nodes = job.min_nodes.max(1);
        if job.more.is_some() || job.exclusive || job.max_nodes != Some(nodes) {
            return None;
        }
        let part = self.part_index(part)?;
        let cpt = job.cpus_per_task.max(1);
        Some(Shape {
            part,
            nodes,
            tasks: job.ntasks,
            cpt,
            mem_node: job.mem_per_node_mb.unwrap_or(0),
            mem_cpu: job.mem_per_cpu_mb.unwrap_or(0),
            end,
            // Beside another user's `--exclusive=user` job, room depends on who asks.
            user: (self.excl_user_nodes > 0).then_some(job.uid),
        })
    }

    /// Whether the job needs more cores than the cluster has free now (in all, or on one
    /// node for a one-node job): the cheap test that spares most placements on a busy cluster.
    fn cannot_fit_now(&self, job: &SchedJob) -> bool {
        let (total, most) = self.free_now.get().unwrap_or_else(|| {
            let mut total = 0u64;
            let mut most = 0u32;
            for n in self.nodes.iter().filter(|n| n.schedulable) {
                let f = n.cpus - n.alloc_cpus();
                total += u64::from(f);
                most = most.max(f);
            }
            self.free_now.set(Some((total, most)));
            (total, most)
        });
        let need = u64::from(job.ntasks) * u64::from(job.cpus_per_task.max(1));
        need > total || (job.max_nodes == Some(1) && need > u64::from(most))
    }

    /// The earliest `job` could start in `part` by its nodes' free-space profiles (each node
    /// asked for its least share), and whether that bound is exact (a one-node job). `first`
    /// gets, by node index, the moment each node could first hold that share (`i64::MAX`:
    /// never, or not a node for this job); no start before it fits there.
    fn earliest_bound(
        &self,
        job: &SchedJob,
        part: &PartitionRes,
        now: i64,
        d: i64,
        tl: &Timeline,
        first: &mut Vec<i64>,
    ) -> Option<(i64, bool)> {
        first.clear();
        first.resize(self.nodes.len(), i64::MAX);
        let cpt = job.cpus_per_task.max(1);
        let single = job.max_nodes == Some(1) && job.more().nodelist.len() <= 1;
        let tasks = if single { job.ntasks } else { job.more().ntasks_per_node.unwrap_or(1) };
        let k = job.min_nodes.max(job.more().nodelist.len() as u32).max(1) as usize;
        let mut starts: Vec<i64> = Vec::new();
        for &i in self.part_order(part) {
            let n = &self.nodes[i];
            if !n.schedulable
                || job.more().exclude.contains(&n.name)
                || job.more().constraint.as_ref().is_some_and(|c| !c.matches(&n.features))
            {
                continue;
            }
            let cpus = if job.exclusive { n.cpus } else { tasks * cpt };
            let mem = match (job.mem_per_node_mb, job.mem_per_cpu_mb) {
                (Some(m), _) => m,
                (None, Some(m)) => m * u64::from(cpus),
                (None, None) => 0,
            };
            let gpus = gpu_need(job, tasks);
            if cpus > n.cpus || mem > n.mem_mb || gpus > n.gres.gpus_total() || !self.gres_could_fit(job, n, tasks) {
                continue;
            }
            if let Some(t) = tl.earliest(i, now, Free { cpus, mem, gpus, idle: job.exclusive }, d) {
                starts.push(t);
                first[i] = t;
            }
        }
        if starts.len() < k {
            return None;
        }
        starts.select_nth_unstable(k - 1);
        Some((starts[k - 1], single))
    }

    /// What a job takes of node `i` for `tasks` tasks.
    fn claim(&self, job: &SchedJob, i: usize, tasks: u32) -> Res {
        let n = &self.nodes[i];
        let cpus = if job.exclusive { n.cpus } else { tasks * job.cpus_per_task.max(1) };
        let mem = match (job.mem_per_node_mb, job.mem_per_cpu_mb) {
            (Some(m), _) => m,
            (None, Some(m)) => m * u64::from(cpus),
            (None, None) => 0,
        };
        let gpus = if job.exclusive { n.gres.gpus_total() } else { gpu_need(job, tasks) };
        Res { cpus, mem: if job.exclusive { mem.max(n.mem_mb) } else { mem }, gpus }
    }

    /// GPUs of the type `job` asks for that are free on `n` now (all of them when it asks
    /// for none, so that its placement is not limited by them).
    fn gpus_free_for(&self, job: &SchedJob, n: &NodeRes) -> u32 {
        match job.more().gres.iter().find(|g| g.name == "gpu") {
            Some(g) => n.gres.free(g).min(u64::from(u32::MAX)) as u32,
            None => n.gres.gpus_free(),
        }
    }

    /// Whether `tasks` tasks of `job` could have their GRES on `n` were it empty.
    fn gres_could_fit(&self, job: &SchedJob, n: &NodeRes, tasks: u32) -> bool {
        job.more().gres.iter().all(|g| g.for_tasks(tasks) <= n.gres.total(g))
    }

    /// Tasks of `job` that fit in `f`.
    fn capacity(&self, job: &SchedJob, n: &NodeRes, f: Free) -> u32 {
        if !(n.users.is_empty() || self.user_ok(job, n)) {
            return 0;
        }
        let cpt = job.cpus_per_task.max(1);
        if job.exclusive {
            if !f.idle {
                return 0;
            }
            let mem = job.mem_per_node_mb.unwrap_or(0);
            if mem > n.mem_mb {
                return 0;
            }
            let mut cap = n.cpus / cpt;
            for g in &job.more().gres {
                match g.tasks_within(n.gres.total(g)) {
                    Some(t) => cap = cap.min(t),
                    None => return 0,
                }
            }
            return job.more().ntasks_per_node.map_or(cap, |p| if p <= cap { p } else { 0 });
        }
        let mut cap = f.cpus / cpt;
        if let Some(m) = job.mem_per_node_mb {
            if m > f.mem {
                return 0;
            }
        }
        if let Some(m) = job.mem_per_cpu_mb {
            if m > 0 {
                cap = cap.min((f.mem / (m * cpt as u64)) as u32);
            }
        }
        // GRES: GPUs as the timeline (or, now, the node) has them free; other GRES as the
        // node has them now.
        for g in &job.more().gres {
            let avail = if g.name == "gpu" { u64::from(f.gpus).min(n.gres.total(g)) } else { n.gres.free(g) };
            match g.tasks_within(avail) {
                Some(t) => cap = cap.min(t),
                None => return 0,
            }
        }
        match job.more().ntasks_per_node {
            Some(p) if p > cap => 0,
            Some(p) => p,
            None => cap,
        }
    }

    /// Picks nodes and task counts for `job` in `part` from what `free` says each node has.
    fn place(
        &self,
        job: &SchedJob,
        part: &PartitionRes,
        free: &dyn Fn(usize) -> Free,
        max_leaves: Option<u32>,
    ) -> Result<Vec<(usize, u32)>, PendingReason> {
        let order = self.part_order(part);
        let more = job.more.as_deref();
        let cands: Vec<usize> = match more {
            // The common request: the partition's nodes as they are.
            None => order.iter().copied().filter(|&i| self.nodes[i].schedulable).collect(),
            Some(m) => {
                let mut cands: Vec<usize> = order
                    .iter()
                    .copied()
                    .filter(|&i| {
                        let n = &self.nodes[i];
                        !m.exclude.contains(&n.name) && m.constraint.as_ref().is_none_or(|c| c.matches(&n.features))
                    })
                    .collect();
                let mut required = Vec::with_capacity(m.nodelist.len());
                for w in &m.nodelist {
                    match self.node_idx.get(w) {
                        Some(&i) if self.nodes[i].schedulable && cands.contains(&i) => required.push(i),
                        _ => return Err(PendingReason::ReqNodeNotAvail),
                    }
                }
                // Required nodes first, then the rest in partition order.
                cands.retain(|i| self.nodes[*i].schedulable && !required.contains(i));
                required.sort_by_key(|&i| (self.nodes[i].weight, i));
                required.extend(cands);
                required
            }
        };
        let k_min = job.min_nodes.max(job.more().nodelist.len() as u32).max(1);
        let k_max = job.max_nodes.unwrap_or(u32::MAX).max(k_min);
        match job.more().constraint.as_ref() {
            // Matching OR: all on nodes with the same one of the features, tried in order.
            Some(c) if !c.matching.is_empty() => c
                .matching
                .iter()
                .find_map(|f| {
                    let sub: Vec<usize> =
                        cands.iter().copied().filter(|&i| self.nodes[i].features.contains(f)).collect();
                    self.place_among(job, &sub, k_min, k_max, free, max_leaves).ok()
                })
                .ok_or(PendingReason::Resources),
            _ => self.place_among(job, &cands, k_min, k_max, free, max_leaves),
        }
    }

    /// Places a job on some of `cands` (in preference order).
    fn place_among(
        &self,
        job: &SchedJob,
        cands: &[usize],
        k_min: u32,
        k_max: u32,
        free: &dyn Fn(usize) -> Free,
        max_leaves: Option<u32>,
    ) -> Result<Vec<(usize, u32)>, PendingReason> {
        let counts = job.more().constraint.as_ref().map_or(&[][..], |c| c.counts.as_slice());
        if !counts.is_empty() {
            return self.place_counted(job, cands, k_min, k_max, free, counts);
        }
        if job.more().contiguous {
            return self.place_contiguous(job, cands, k_min, k_max, free);
        }
        if job.more().nodelist.is_empty() {
            if let Some(r) = self.place_topo(job, cands, k_min, k_max, free, max_leaves) {
                return r.map_err(|_| PendingReason::Resources);
            }
            if k_min == 1 && job.wanted_nodes() <= 1 {
                if let Some(i) = self.best_fit(job, cands, free) {
                    return Ok(vec![(i, job.ntasks)]);
                }
            }
        }
        match self.pick(job, cands, k_min, k_max, free) {
            Err(true) if (k_max as usize) < cands.len() => {
                // First fit ran out of nodes before tasks: with a node limit, the nodes with
                // the most room go first (required ones still before all, ties in preference
                // order). Only the first k_max can be taken, so only they are ordered.
                let mut by_room: Vec<(bool, std::cmp::Reverse<u32>, usize)> = cands
                    .iter()
                    .enumerate()
                    .map(|(k, &i)| {
                        let required = job.more().nodelist.contains(&self.nodes[i].name);
                        (!required, std::cmp::Reverse(self.capacity(job, &self.nodes[i], free(i))), k)
                    })
                    .collect();
                let keep = (k_max as usize).min(by_room.len());
                if keep < by_room.len() {
                    by_room.select_nth_unstable(keep);
                    by_room.truncate(keep);
                }
                by_room.sort_unstable();
                let cands: Vec<usize> = by_room.into_iter().map(|(.., k)| cands[k]).collect();
                self.pick(job, &cands, k_min, k_max, free).map_err(|_| PendingReason::Resources)
            }
            r => r.map_err(|_| PendingReason::Resources),
        }
    }

    /// `--contiguous`: a run of nodes consecutive in the configuration's order, each with
    /// room, the first run (in that order) that holds the job.
    fn place_contiguous(
        &self,
        job: &SchedJob,
        cands: &[usize],
        k_min: u32,
        k_max: u32,
        free: &dyn Fn(usize) -> Free,
    ) -> Result<Vec<(usize, u32)>, PendingReason> {
        let mut ordered: Vec<usize> =
            cands.iter().copied().filter(|&i| self.capacity(job, &self.nodes[i], free(i)) > 0).collect();
        ordered.sort_unstable();
        let mut start = 0;
        while start < ordered.len() {
            let mut end = start + 1;
            while end < ordered.len() && ordered[end] == ordered[end - 1] + 1 {
                end += 1;
            }
            if let Ok(p) = self.pick(job, &ordered[start..end], k_min, k_max, free) {
                return Ok(p);
            }
            start = end;
        }
        Err(PendingReason::Resources)
    }

    /// Node counts (`-C gpu*2&ib`): nodes with each counted feature set first, at least as
    /// many nodes as the counts add up to, and the counts checked on what was picked.
    fn place_counted(
        &self,
        job: &SchedJob,
        cands: &[usize],
        k_min: u32,
        k_max: u32,
        free: &dyn Fn(usize) -> Free,
        counts: &[(Vec<String>, u32)],
    ) -> Result<Vec<(usize, u32)>, PendingReason> {
        let has = |i: usize, fs: &[String]| fs.iter().all(|f| self.nodes[i].features.contains(f));
        let rank = |i: usize| counts.iter().position(|(fs, _)| has(i, fs)).unwrap_or(counts.len());
        let mut ordered: Vec<usize> = cands.to_vec();
        ordered.sort_by_key(|&i| rank(i));
        let need: u32 = counts.iter().map(|c| c.1).sum();
        let k_min = k_min.max(need);
        let picked = self.pick(job, &ordered, k_min, k_max.max(k_min), free).map_err(|_| PendingReason::Resources)?;
        let ok = counts.iter().all(|(fs, n)| picked.iter().filter(|&&(i, _)| has(i, fs)).count() as u32 >= *n);
        if ok {
            Ok(picked)
        } else {
            Err(PendingReason::Resources)
        }
    }

    /// Topology-aware placement (`topology/tree`): the job goes under the lowest switch
    /// that can hold it all, the one with the fewest usable nodes among those of that level
    /// (best fit), and within it fills the leaf switches with the most usable nodes first
    /// (fewest leaves). With `--switches=N` in force, no more than N leaves. `None` when there
    /// is no tree (or nothing under one switch fits and no leaf limit applies): plain placement.
    fn place_topo(
        &self,
        job: &SchedJob,
        cands: &[usize],
        k_min: u32,
        k_max: u32,
        free: &dyn Fn(usize) -> Free,
        max_leaves: Option<u32>,
    ) -> Option<Result<Vec<(usize, u32)>, bool>> {
        if self.without_topology.get() {
            return None;
        }
        if self.topology.as_ref().is_some_and(|t| !t.blocks.is_empty()) {
            return self.place_blocks(job, cands, k_min, free);
        }
        let t = self.topo.as_ref()?;
        let usable: Vec<bool> = {
            let mut u = vec![false; self.nodes.len()];
            for &i in cands {
                u[i] = self.capacity(job, &self.nodes[i], free(i)) > 0;
            }
            u
        };
        let count = |mask: &[bool]| cands.iter().filter(|&&i| mask[i] && usable[i]).count();
        let mut order: Vec<usize> =
            (0..t.switches.len()).filter(|&s| count(&t.switches[s].2) >= k_min as usize).collect();
        order.sort_by_key(|&s| (t.switches[s].0, count(&t.switches[s].2), s));
        for s in order {
            let (_, leaf, mask) = &t.switches[s];
            let mut sub: Vec<usize> = cands.iter().copied().filter(|&i| mask[i]).collect();
            if !leaf {
                // Leaves with the most usable nodes first; the partition's order within each.
                let per_leaf = |l: Option<usize>| sub.iter().filter(|&&i| t.leaf[i] == l && usable[i]).count();
                let mut keyed: Vec<(std::cmp::Reverse<usize>, Option<usize>, usize, usize)> = sub
                    .iter()
                    .enumerate()
                    .map(|(k, &i)| (std::cmp::Reverse(per_leaf(t.leaf[i])), t.leaf[i], k, i))
                    .collect();
                keyed.sort();
                sub = keyed.into_iter().map(|x| x.3).collect();
            }
            if let Ok(p) = self.pick(job, &sub, k_min, k_max, free) {
                let mut leaves: Vec<Option<usize>> = p.iter().map(|&(i, _)| t.leaf[i]).collect();
                leaves.sort();
                leaves.dedup();
                if max_leaves.is_none_or(|m| leaves.len() as u32 <= m) {
                    return Some(Ok(p));
                }
            }
        }
        // Nothing under one switch: the job waits for its leaf limit, or goes where it fits.
        max_leaves.map(|_| Err(false))
    }

    /// Block placement (`topology/block`): the job's nodes (its least count, as Slurm uses)
    /// within one block of the smallest level that holds them — a base block, or an aggregate
    /// of 2, 4, ... consecutive ones as `BlockSizes` allows — the block with the fewest usable
    /// nodes that suffices (larger ones stay whole for larger jobs); within it, base blocks
    /// that hold the rest best (the fewest usable nodes that suffice, else the most). With
    /// `--segment=N`, each group of N nodes is placed so in turn. `None` when none of the
    /// candidates is in a block (plain placement).
    fn place_blocks(
        &self,
        job: &SchedJob,
        cands: &[usize],
        k_min: u32,
        free: &dyn Fn(usize) -> Free,
    ) -> Option<Result<Vec<(usize, u32)>, bool>> {
        let t = self.topology.as_ref()?;
        let ti = self.topo.as_ref()?;
        let in_blocks: Vec<usize> = cands.iter().copied().filter(|&i| ti.block[i].is_some()).collect();
        if in_blocks.is_empty() {
            return None;
        }
        let k = k_min.max(1);
        if k == 1 && job.wanted_nodes() <= 1 {
            return Some(self.best_fit(job, &in_blocks, free).map(|i| vec![(i, job.ntasks)]).ok_or(false));
        }
        // A node is usable when it holds its share of the tasks.
        let share = job.more().ntasks_per_node.unwrap_or(job.ntasks.div_ceil(k)).max(1);
        let mut usable: Vec<Vec<usize>> = vec![Vec::new(); t.blocks.len()];
        for &i in &in_blocks {
            if let Some(b) = ti.block[i] {
                if self.capacity(job, &self.nodes[i], free(i)) >= share {
                    usable[b].push(i);
                }
            }
        }
        // A segment larger than the job is ignored, as Slurm does; one that does not divide
        // it was refused at submit.
        let seg = job.more().segment.filter(|&s| s > 0 && s <= k).unwrap_or(k);
        if !k.is_multiple_of(seg) {
            return Some(Err(false));
        }
        let groups = match t.level_for(seg) {
            Some(l) => t.groups(l),
            None => vec![drover_model::topology::BlockGroup { blocks: 0..t.blocks.len(), level: 0 }],
        };
        let mut chosen: Vec<usize> = Vec::with_capacity(k as usize);
        for _ in 0..k / seg {
            let room = |g: &drover_model::topology::BlockGroup| -> usize {
                usable[g.blocks.clone()].iter().map(Vec::len).sum()
            };
            let Some(g) = groups.iter().filter(|g| room(g) >= seg as usize).min_by_key(|g| (room(g), g.blocks.start))
            else {
                return Some(Err(false));
            };
            let mut rest = seg as usize;
            while rest > 0 {
                let blocks = g.blocks.clone().filter(|&b| !usable[b].is_empty());
                let best = blocks
                    .map(|b| (usable[b].len() >= rest, usable[b].len(), b))
                    .min_by_key(|&(fits, n, b)| (!fits, if fits { n } else { usize::MAX - n }, b));
                let Some((_, n, b)) = best else { return Some(Err(false)) };
                let take = n.min(rest);
                chosen.extend(usable[b].drain(..take));
                rest -= take;
            }
        }
        Some(self.pick(job, &chosen, k, k, free))
    }

    /// Best fit for a job one node can hold: of the lowest weight's nodes that can take all
    /// of it, the one with the least left free (GPUs first, then cores, then memory), so
    /// small jobs pack onto partly used nodes and whole nodes stay whole for large jobs —
    /// single-GPU jobs fill one GPU node instead of one GPU on each. `None` when no node
    /// holds it all (it spans nodes, first fit).
    fn best_fit(&self, job: &SchedJob, cands: &[usize], free: &dyn Fn(usize) -> Free) -> Option<usize> {
        // (weight, GPUs, cores and memory left, order) of the best so far, and its node.
        type Key = (u32, u32, u32, u64, usize);
        let mut best: Option<(Key, usize)> = None;
        let need = job.ntasks * job.cpus_per_task.max(1);
        let gpus = gpu_need(job, job.ntasks);
        for (k, &i) in cands.iter().enumerate() {
            let n = &self.nodes[i];
            if best.as_ref().is_some_and(|b| n.weight > b.0 .0) {
                // Candidates come by weight: nothing lighter follows.
                break;
            }
            let f = free(i);
            if self.capacity(job, n, f) < job.ntasks {
                continue;
            }
            let key = (n.weight, f.gpus, f.cpus, f.mem, k);
            if best.as_ref().is_none_or(|b| key < b.0) {
                best = Some((key, i));
                if !job.exclusive && f.cpus == need && f.gpus == gpus {
                    // Nothing fits tighter: its cores and GPUs exactly.
                    break;
                }
            }
        }
        best.map(|b| b.1)
    }

    /// Takes nodes in `cands` order until the job's tasks and node count are met.
    fn pick(
        &self,
        job: &SchedJob,
        cands: &[usize],
        k_min: u32,
        k_max: u32,
        free: &dyn Fn(usize) -> Free,
    ) -> Result<Vec<(usize, u32)>, bool> {
        // Err(true): the node limit ran out before the tasks did (another choice of nodes may
        // fit); Err(false): not enough room whatever the choice.
        let mut picked: Vec<(usize, u32)> = Vec::new();
        let mut sum: u64 = 0;
        let want = job.wanted_nodes().clamp(k_min, k_max);
        for &i in cands {
            let required = job.more().nodelist.contains(&self.nodes[i].name);
            if picked.len() as u32 >= want && sum >= job.ntasks as u64 && !required {
                break;
            }
            if picked.len() as u32 >= k_max {
                break;
            }
            let cap = self.capacity(job, &self.nodes[i], free(i));
            if cap == 0 {
                if required {
                    return Err(false);
                }
                continue;
            }
            // The last node the limit allows must take all the tasks still unplaced.
            let last = picked.len() as u32 + 1 == k_max;
            if last && !required && sum + u64::from(cap) < job.ntasks as u64 {
                continue;
            }
            picked.push((i, cap));
            sum += cap as u64;
        }
        if (picked.len() as u32) < k_min || sum < job.ntasks as u64 {
            return Err(picked.len() as u32 + 1 >= k_max);
        }
        // Tasks: one per node (or the per-node count), then fill in order.
        let mut tasks: Vec<u32> =
            picked.iter().map(|(_, cap)| job.more().ntasks_per_node.unwrap_or(1).min(*cap)).collect();
        let mut left = (job.ntasks as i64) - tasks.iter().map(|t| *t as i64).sum::<i64>();
        if job.more().ntasks_per_node.is_none() {
            for (k, (_, cap)) in picked.iter().enumerate() {
                if left <= 0 {
                    break;
                }
                let add = ((*cap - tasks[k]) as i64).min(left);
                tasks[k] += add as u32;
                left -= add;
            }
        }
        Ok(picked.iter().zip(tasks).map(|(&(i, _), t)| (i, t)).collect())
    }

    /// Concrete cores and memory for picks that fit now.
    fn allocate(&self, job: &SchedJob, part: &PartitionRes, picks: &[(usize, u32)]) -> Allocation {
        let cpt = job.cpus_per_task.max(1);
        let nodes = picks
            .iter()
            .map(|&(i, t)| {
                let n = &self.nodes[i];
                let want = if job.exclusive { n.cpus } else { t * cpt };
                // GPUs first, those with the most free CPUs near them (gres.conf Cores=)
                // first; then CPUs, those near the chosen GPUs first.
                let near_free = |g: u32| -> i64 {
                    let cpus = n.gpu_cpus.get(g as usize).and_then(|c| c.as_ref());
                    -(cpus
                        .map_or(0, |c| c.iter().filter(|&&k| !n.used.get(k as usize).copied().unwrap_or(true)).count())
                        as i64)
                };
                let gres = if job.exclusive {
                    n.gres.all()
                } else {
                    let mut got: Vec<drover_model::gres::GresAlloc> = Vec::new();
                    for g in &job.more().gres {
                        // `place` checked there are enough: the pick cannot come up short.
                        let picked = if g.name == "gpu" && (!n.gpu_cpus.is_empty() || !n.gpu_links.is_empty()) {
                            // Greedy: the device nearest free CPUs first, then each next one
                            // with the most links to those chosen.
                            let links = |a: u32, b: u32| {
                                n.gpu_links.get(a as usize).and_then(|l| l.get(b as usize)).copied().unwrap_or(0)
                            };
                            n.gres.pick_by(g, g.for_tasks(t), |mut free, k| {
                                let mut chosen: Vec<u32> = Vec::new();
                                while chosen.len() < k && !free.is_empty() {
                                    let score = |d: u32| {
                                        let l: u32 = chosen.iter().map(|&c| links(c, d)).sum();
                                        (std::cmp::Reverse(l), near_free(d), d)
                                    };
                                    let best = (0..free.len()).min_by_key(|&i| score(free[i])).unwrap_or(0);
                                    chosen.push(free.swap_remove(best));
                                }
                                chosen
                            })
                        } else {
                            n.gres.pick(g, g.for_tasks(t))
                        };
                        got.extend(picked.unwrap_or_default());
                    }
                    got
                };
                let near: Vec<u32> = gres
                    .iter()
                    .filter(|g| g.name == "gpu")
                    .flat_map(|g| g.indices.iter())
                    .filter_map(|&d| n.gpu_cpus.get(d as usize).and_then(|c| c.clone()))
                    .flatten()
                    .collect();
                let mut free: Vec<u32> =
                    n.used.iter().enumerate().filter(|(_, u)| !**u).map(|(k, _)| k as u32).collect();
                free.sort_by_key(|k| (!near.contains(k), *k));
                let mut cpu_ids: Vec<u32> = free.into_iter().take(want as usize).collect();
                cpu_ids.sort_unstable();
                let mem_mb = match (job.mem_per_node_mb, job.mem_per_cpu_mb) {
                    (Some(m), _) => m,
                    (None, Some(m)) => m * cpu_ids.len() as u64,
                    (None, None) => 0,
                };
                // (An exclusive job holds every GRES of its nodes, as in Slurm: see above.)
                NodeAlloc { node: n.name.clone(), cpu_ids, mem_mb, tasks: t, gres }
            })
            .collect();
        Allocation { partition: part.name.clone(), nodes }
    }

    /// How long the plan expects a job of `uid` with `limit` to run: its limit (`i64::MAX`
    /// for none), or with predictions on, what its user's recent jobs ran (never longer).
    pub(crate) fn plan_len(&self, uid: u32, limit: TimeLimit) -> i64 {
        let l = limit.map_or(i64::MAX, |l| i64::try_from(l).unwrap_or(i64::MAX));
        match self.config.predict && !self.by_limits {
            true => self.history.predict(uid, l).unwrap_or(l),
            false => l,
        }
    }

    /// When the plan expects running `job` to end, seen at `now`: its limit's end, or with
    /// predictions its predicted end until it outlives it (then its limit's end).
    fn planned_end(&self, job: JobId, now: i64) -> i64 {
        let limit_end = self.ends.get(&job).copied().unwrap_or(i64::MAX);
        match (self.config.predict && !self.by_limits, self.pred_ends.get(&job)) {
            (true, Some(&p)) => crate::predict::extended(p, limit_end, now),
            _ => limit_end.max(now + 1),
        }
    }

    /// A waiting job's claim on a backfill hole ([`crate::predict::slowdown_score`]), from its
    /// expected run time (its first partition's default limit where it gave none).
    fn backfill_score(&self, job: &SchedJob, now: i64) -> f64 {
        let limit = match job.time_limit {
            Some(l) => l,
            None => job
                .partitions
                .first()
                .and_then(|p| self.partitions.iter().find(|x| *x.name == **p))
                .and_then(|p| p.default_time.unwrap_or(p.max_time)),
        };
        crate::predict::slowdown_score(now - job.queued, self.plan_len(job.uid, limit))
    }

    /// The pass's timeline: every running job holds what it has until its expected end.
    fn timeline(&self, now: i64) -> Timeline {
        let mut tl = Timeline::new(
            self.nodes.iter().map(|n| Res { cpus: n.cpus, mem: n.mem_mb, gpus: n.gres.gpus_total() }).collect(),
        );
        for (job, alloc) in &self.running {
            // A job past its limit is about to be ended; it still holds what it has now.
            let end = self.planned_end(*job, now);
            for na in &alloc.nodes {
                if let Some(&i) = self.node_idx.get(&na.node) {
                    tl.hold(i, end, held(na));
                }
            }
        }
        for k in 0..self.resvs.len() {
            if let Some(b) = self.resv_block(k, now) {
                tl.add(b);
            }
        }
        tl
    }

    // ---- for `explain`: each check on its own ----

    pub(crate) fn pending_job(&self, id: JobId) -> Option<&SchedJob> {
        self.pending.get(&id).map(|p| &p.0)
    }

    /// `Some(never)` where its dependencies hold it.
    pub(crate) fn dependency_blocks(&self, job: &SchedJob, now: i64) -> Option<bool> {
        match self.dep_state(job, now) {
            DepState::Never => Some(true),
            DepState::Waiting => Some(false),
            DepState::Satisfied => None,
        }
    }

    /// (running, limit) where its array's throttle holds it.
    pub(crate) fn throttled(&self, job: &SchedJob) -> Option<(u32, u32)> {
        let a = job.more().array.as_ref().filter(|a| a.throttle > 0)?;
        let running = self.array_running.get(&a.array_id).copied().unwrap_or(0);
        (running >= a.throttle).then_some((running, a.throttle))
    }

    /// The licenses it asks for that are not free: (name, wanted, free).
    pub(crate) fn short_licenses(&self, job: &SchedJob) -> Vec<(String, u32, u32)> {
        job.more()
            .licenses
            .iter()
            .filter_map(|(name, n)| {
                let total = self.licenses.get(name).copied().unwrap_or(0);
                let free = total.saturating_sub(self.licenses_used.get(name).copied().unwrap_or(0));
                (free < *n).then(|| (name.clone(), *n, free))
            })
            .collect()
    }

    pub(crate) fn limit_blocks(&self, job: &SchedJob) -> Option<PendingReason> {
        self.limits.blocked(&job.more().limits, &job.need())
    }

    /// A member's reservation, or (its name, its start if it has not started) where it may
    /// not run now.
    pub(crate) fn within_for_explain(&self, job: &SchedJob, now: i64) -> Result<Option<(usize, Within)>, ResvBlock> {
        self.within(job, now).map_err(|_| {
            let name = job.more().reservation.as_deref().unwrap_or("").to_string();
            let start = self.resvs.iter().find(|(r, _)| *r.name == *name && r.end > now).map(|(r, _)| r.start);
            (name, start)
        })
    }

    /// The last pass's plan as seen by job `id`: running jobs, advance reservations and every
    /// other job's planned start.
    pub(crate) fn planning_timeline(&self, id: JobId, now: i64) -> Timeline {
        let mut tl = self.timeline(now);
        let mut kept: Vec<&Reservation> = self.planned.values().filter(|r| r.job != id).collect();
        kept.sort_unstable_by_key(|r| r.job);
        for r in kept {
            tl.add(r.clone());
        }
        tl
    }

    /// With predictions on: what the plan expects `job` to run, from which recent runs of
    /// its user, and how many running jobs it expects to end before their limits.
    pub(crate) fn prediction_for_explain(&self, job: &SchedJob, now: i64) -> Option<crate::explain::Prediction> {
        if !self.config.predict {
            return None;
        }
        let limit = job
            .partitions
            .first()
            .and_then(|p| self.partition(p))
            .map_or(job.time_limit.flatten(), |p| job.effective_limit(p));
        let l = limit.map_or(i64::MAX, |l| i64::try_from(l).unwrap_or(i64::MAX));
        let early = self
            .running
            .keys()
            .filter(|j| self.planned_end(**j, now) < self.ends.get(j).copied().unwrap_or(i64::MAX))
            .count();
        Some(crate::explain::Prediction {
            secs: self.history.predict(job.uid, l).filter(|p| *p < l),
            recent: self.history.recent(job.uid),
            running_early: early as u32,
            by_limits: self.by_limits,
        })
    }

    pub(crate) fn partition(&self, name: &str) -> Option<&PartitionRes> {
        self.partitions.iter().find(|p| *p.name == *name)
    }

    pub(crate) fn partition_blocks(&self, job: &SchedJob, part: &PartitionRes) -> Option<PendingReason> {
        part.down.or_else(|| partition_limit(job, part))
    }

    /// What node `i` has free now for `job`.
    pub(crate) fn free_now_on(&self, job: &SchedJob, i: usize) -> Free {
        let n = &self.nodes[i];
        Free {
            cpus: n.cpus - n.alloc_cpus(),
            mem: n.mem_mb.saturating_sub(n.used_mem),
            gpus: self.gpus_free_for(job, n),
            idle: n.jobs == 0,
        }
    }

    /// What node `i` has for `job` over `[from, to)`: what the timeline allows there, and
    /// never more than the node has free now (GPUs exactly: those of the type it asks for).
    pub(crate) fn free_within(&self, job: &SchedJob, tl: &Timeline, i: usize, from: i64, to: i64) -> Free {
        let f = tl.free_over(i, from, to);
        let n = self.free_now_on(job, i);
        Free { cpus: f.cpus.min(n.cpus), mem: f.mem.min(n.mem), gpus: f.gpus.min(n.gpus), idle: f.idle && n.idle }
    }

    /// Whether `job` would fit in `part` by `free` were it not for the network topology (a
    /// block, or a `--switches` leaf limit, that has no room): what the topology blocker
    /// says. False without a topology.
    pub(crate) fn fits_but_for_topology(
        &self,
        job: &SchedJob,
        part: &PartitionRes,
        free: &dyn Fn(usize) -> Free,
    ) -> bool {
        if self.topology.is_none() {
            return false;
        }
        self.without_topology.set(true);
        let fits = self.place(job, part, free, None).is_ok();
        self.without_topology.set(false);
        fits
    }

    /// What the topology asks of `job`: (nodes in one block, or leaf switches at most, and
    /// the segment size with blocks).
    pub(crate) fn topology_ask(&self, job: &SchedJob, now: i64) -> Option<crate::explain::Blocker> {
        let t = self.topology.as_ref()?;
        let k = job.min_nodes.max(1);
        if !t.blocks.is_empty() {
            let seg = job.more().segment.filter(|&s| s > 0 && s <= k);
            return Some(crate::explain::Blocker::Topology {
                nodes: seg.unwrap_or(k),
                segments: seg.map_or(1, |s| k / s),
                switches: None,
            });
        }
        let (n, until) = job.more().switches.filter(|s| now < s.1)?;
        Some(crate::explain::Blocker::Topology { nodes: k, segments: 1, switches: Some((n, until)) })
    }

    /// Placement as the pass tries it at `now`, inside a member's reservation where there is
    /// one, within its leaf-switch limit while that lasts.
    pub(crate) fn place_for_explain(
        &self,
        job: &SchedJob,
        part: &PartitionRes,
        free: &dyn Fn(usize) -> Free,
        within: Option<&Within>,
        now: i64,
    ) -> Result<Vec<(usize, u32)>, PendingReason> {
        let f = |i: usize| {
            if within.is_some_and(|w| !w.nodes[i]) {
                Free { cpus: 0, mem: 0, gpus: 0, idle: false }
            } else {
                free(i)
            }
        };
        self.place(job, part, &f, job.switch_limit(now))
    }

    /// How short a partition is of what the job needs now.
    pub(crate) fn resource_shortfall(
        &self,
        job: &SchedJob,
        part: &PartitionRes,
        free: &dyn Fn(usize) -> Free,
    ) -> crate::explain::Blocker {
        let m = job.more();
        let usable: Vec<usize> = part
            .nodes
            .iter()
            .filter_map(|n| self.node_idx.get(n).copied())
            .filter(|&i| {
                let n = &self.nodes[i];
                n.schedulable
                    && !m.exclude.contains(&n.name)
                    && m.constraint.as_ref().is_none_or(|c| c.matches(&n.features))
            })
            .collect();
        let cpus_free = usable.iter().map(|&i| u64::from(free(i).cpus)).sum();
        let gpus_free = usable.iter().map(|&i| u64::from(free(i).gpus)).sum();
        let nodes_with_room =
            usable.iter().filter(|&&i| self.capacity(job, &self.nodes[i], free(i)) > 0).count() as u32;
        let cpus_needed = u64::from(job.ntasks) * u64::from(job.cpus_per_task.max(1));
        let gpus_needed = u64::from(gpu_need(job, job.ntasks))
            .max(m.gres.iter().filter(|g| g.name == "gpu").map(|g| g.per_node * u64::from(job.min_nodes)).sum());
        crate::explain::Blocker::Resources {
            partition: part.name.clone(),
            cpus_free,
            cpus_needed,
            gpus_free,
            gpus_needed,
            nodes_with_room,
            nodes_needed: job.wanted_nodes().max(1),
        }
    }

    /// How many of a partition's nodes advance reservations keep over `[now, end)` from a
    /// job outside them; `None` for none.
    pub(crate) fn reserved_nodes(&self, job: &SchedJob, part: &PartitionRes, now: i64, end: i64) -> Option<u32> {
        if job.more().reservation.is_some() {
            return None;
        }
        let n = part
            .nodes
            .iter()
            .filter(|n| self.resvs.iter().any(|(r, _)| r.start < end && r.end > now && r.nodes.contains(n)))
            .count() as u32;
        (n > 0).then_some(n)
    }

    /// Waiting jobs ahead of `job` in the queue for partition `pname`.
    pub(crate) fn ahead_in(&self, job: &SchedJob, pname: &str) -> u32 {
        self.queue
            .iter()
            .take_while(|(_, id)| *id != job.id)
            .filter(|(_, id)| {
                self.pending
                    .get(id)
                    .is_some_and(|(j, _)| j.hold.is_none() && j.partitions.iter().any(|p| **p == *pname))
            })
            .count() as u32
    }

    /// Advance reservation `k` as whole-node claims over its window (none once it ended).
    fn resv_block(&self, k: usize, now: i64) -> Option<Reservation> {
        let (r, ix) = &self.resvs[k];
        (r.end > now).then(|| Reservation {
            job: ADVANCE_RESV_BASE - k as JobId,
            start: r.start,
            end: r.end,
            claims: ix
                .iter()
                .map(|&i| {
                    let n = &self.nodes[i];
                    (i, Res { cpus: n.cpus, mem: n.mem_mb, gpus: n.gres.gpus_total() })
                })
                .collect(),
        })
    }

    /// For a member of an advance reservation: where and until when it may run, or why it
    /// may not now (its reservation starts later, or is gone).
    fn within(&self, job: &SchedJob, now: i64) -> Result<Option<(usize, Within)>, PendingReason> {
        let Some(name) = &job.more().reservation else { return Ok(None) };
        let Some(k) = self.resvs.iter().position(|(r, _)| r.name == *name && r.end > now) else {
            return Err(PendingReason::ReservationDeleted);
        };
        let (r, ix) = &self.resvs[k];
        if r.start > now {
            return Err(PendingReason::Reservation);
        }
        let mut nodes = vec![false; self.nodes.len()];
        for &i in ix {
            nodes[i] = true;
        }
        Ok(Some((k, Within { nodes, end: r.end })))
    }

    /// Why a job outside the advance reservations cannot start, where they are the cause:
    /// a maintenance reservation covers its partition, or the nodes it names or needs are
    /// reserved over the time it would run.
    fn reserved_reason(&self, job: &SchedJob, part: &PartitionRes, now: i64, end: i64) -> Option<PendingReason> {
        // Which reservations the job's run would meet, as a mask (the first 64; beyond, none
        // is cached and the summary is worked out each time).
        let mut mask = 0u64;
        let mut any = false;
        for (k, (r, _)) in self.resvs.iter().enumerate() {
            if r.start < end && r.end > now {
                any = true;
                if k < 64 {
                    mask |= 1 << k;
                }
            }
        }
        if !any {
            return None;
        }
        let over = |r: &AdvanceResv| r.start < end && r.end > now;
        let reserved = |name: &String| self.resvs.iter().any(|(r, _)| over(r) && r.nodes.contains(name));
        // What the reservations leave of the partition: the same for every job of the pass
        // that meets the same ones, so worked out once (it is on the pass's hot path).
        let summary = || {
            let maint = |name: &String| self.resvs.iter().any(|(r, _)| over(r) && r.maint && r.nodes.contains(name));
            let all_maint = !part.nodes.is_empty() && part.nodes.iter().all(maint);
            let open: Vec<&NodeRes> = part
                .nodes
                .iter()
                .filter(|n| !reserved(n))
                .filter_map(|n| self.node(n))
                .filter(|n| n.schedulable)
                .collect();
            (all_maint, open.len() as u32, open.iter().map(|n| u64::from(n.cpus)).sum::<u64>())
        };
        let p = self.part_index(part).unwrap_or(usize::MAX);
        let (all_maint, open_nodes, open_cpus) = if self.resvs.len() <= 64 {
            *self.reserved_left.borrow_mut().entry((p, mask)).or_insert_with(summary)
        } else {
            summary()
        };
        if all_maint {
            return Some(PendingReason::ReqNodeNotAvailMaint);
        }
        if job.more().nodelist.iter().any(reserved) {
            return Some(PendingReason::ReqNodeNotAvailReserved);
        }
        let need = u64::from(job.ntasks) * u64::from(job.cpus_per_task.max(1));
        (open_nodes < job.min_nodes || open_cpus < need).then_some(PendingReason::ReqNodeNotAvailReserved)
    }

    /// For tests: place every job in full, as if no shape had found no room before it
    /// (decisions must not change).
    #[doc(hidden)]
    pub fn without_memo(&mut self) {
        self.no_memo = true;
    }

    /// Checks the core's bookkeeping; tests call it after every step.
    pub fn check_invariants(&self) -> Result<(), String> {
        let excl = self.nodes.iter().filter(|n| n.excl_user.is_some()).count();
        if excl != self.excl_user_nodes {
            return Err(format!("{excl} nodes hold --exclusive=user jobs, counted {}", self.excl_user_nodes));
        }
        let mut cpu_owner: HashMap<(String, u32), JobId> = HashMap::default();
        let mut mem: HashMap<String, u64> = HashMap::default();
        for (job, alloc) in &self.running {
            for na in &alloc.nodes {
                for &c in &na.cpu_ids {
                    if let Some(other) = cpu_owner.insert((na.node.clone(), c), *job) {
                        return Err(format!("cpu {c} of {} held by {other} and {job}", na.node));
                    }
                }
                *mem.entry(na.node.clone()).or_default() += na.mem_mb;
            }
            if self.pending.contains_key(job) {
                return Err(format!("job {job} both pending and running"));
            }
        }
        for n in &self.nodes {
            let m = mem.get(&n.name).copied().unwrap_or(0);
            if n.used_cpus != n.used.iter().filter(|u| **u).count() as u32 {
                return Err(format!("node {} core count out of step with its cores", n.name));
            }
            if m != n.used_mem {
                return Err(format!("node {} memory books {} != {}", n.name, n.used_mem, m));
            }
            if m > n.mem_mb {
                return Err(format!("node {} memory oversubscribed", n.name));
            }
            let held = cpu_owner.keys().filter(|(nn, _)| nn == &n.name).count() as u32;
            if held != n.alloc_cpus() {
                return Err(format!("node {} cpu books {} != {}", n.name, n.alloc_cpus(), held));
            }
            for (name, kind, used, total) in n.gres.usage() {
                if used > total {
                    return Err(format!("node {} gres {name}:{kind:?} oversubscribed", n.name));
                }
            }
        }
        let mut dev_owner: HashMap<(String, String, u32), JobId> = HashMap::default();
        for (job, alloc) in &self.running {
            for na in &alloc.nodes {
                for g in &na.gres {
                    for &i in &g.indices {
                        if let Some(other) = dev_owner.insert((na.node.clone(), g.name.clone(), i), *job) {
                            return Err(format!("{} {} of {} held by {other} and {job}", g.name, i, na.node));
                        }
                    }
                }
            }
        }
        let unheld = self.pending.values().filter(|(j, _)| j.hold.is_none()).count();
        if self.queue.len() != unheld || self.queue.iter().any(|(_, id)| !self.pending.contains_key(id)) {
            return Err("the queue is not the pending jobs that are not held".into());
        }
        Ok(())
    }
}

fn partition_limit(job: &SchedJob, part: &PartitionRes) -> Option<PendingReason> {
    if let (Some(Some(l)), Some(max)) = (job.time_limit, part.max_time) {
        if l > max {
            return Some(PendingReason::PartitionTimeLimit);
        }
    }
    if job.time_limit == Some(None) && part.max_time.is_some() {
        return Some(PendingReason::PartitionTimeLimit);
    }
    let nodes = part.nodes.len() as u32;
    if job.min_nodes > nodes || part.max_nodes.is_some_and(|m| job.min_nodes > m) || job.min_nodes < part.min_nodes {
        return Some(PendingReason::PartitionNodeLimit);
    }
    None
}

/// What an allocation holds on a node, as the planner counts it.
fn held(na: &NodeAlloc) -> Res {
    Res { cpus: na.cpu_ids.len() as u32, mem: na.mem_mb, gpus: na.gpus().len() as u32 }
}

/// GPUs `job` needs for `tasks` tasks on one node.
fn gpu_need(job: &SchedJob, tasks: u32) -> u32 {
    job.more().gres.iter().filter(|g| g.name == "gpu").map(|g| g.for_tasks(tasks)).sum::<u64>().min(u64::from(u32::MAX))
        as u32
}
