//! The core's state and the scheduling pass. The types it is told and answers with live in
//! `resources`, `job` and `event`; placement (`place`), dependencies (`deps`) and the checks
//! `explain` asks one by one (`for_explain`) and QoS preemption (`preempt`) are `impl Core`
//! blocks of their own.

mod deps;
mod event;
mod for_explain;
mod forecast;
mod job;
mod place;
mod preempt;
mod resources;

pub use event::{Decision, Event, Outcome, SubmitCheck};
pub use forecast::{Expected, Forecast};
pub use job::{Hold, Preempt, SchedArray, SchedJob, SchedMore};
pub use resources::{AdvanceResv, NodeRes, PartitionRes};

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
    /// Each running job's predicted end (start + prediction as of its start; its limit's
    /// end where there was none), used where the plan is on predictions.
    pred_ends: HashMap<JobId, i64>,
    /// The earliest predicted end the last planning pass relied on: a pass at or after it plans.
    replan_at: Option<i64>,
    /// With predictions: the first expected start each waiting job was given.
    promised: HashMap<JobId, i64>,
    /// With predictions: this pass plans by limits (a reservation slipped too far).
    by_limits: bool,
    /// The run times predictions are made from.
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
    /// Per partition: its nodes that are up and not drained — within a pass.
    schedulable_in: std::cell::RefCell<HashMap<usize, u32>>,
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
        self.schedulable_in.borrow_mut().clear();
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
            let deadline = job.more().deadline.filter(|_| job.hold.is_none());
            if let Some((at, need)) = deadline {
                let late_from = at.saturating_sub(need as i64).saturating_add(1);
                if now >= late_from {
                    if old_reason != PendingReason::DeadLine {
                        if let Some(e) = self.pending.get_mut(&id) {
                            e.1 = PendingReason::DeadLine;
                        }
                        out.push(Decision::Reason { job: id, reason: PendingReason::DeadLine });
                    }
                    continue;
                }
                self.wake_at = Some(self.wake_at.map_or(late_from, |w| w.min(late_from)));
            }
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
                // A deadline ends the run by then (whole minutes, as Slurm's scheduler sets it).
                let limit = match deadline {
                    Some((at, _)) => {
                        let left = (at.saturating_sub(now).max(0) as u64) / 60 * 60;
                        Some(limit.map_or(left, |l| l.min(left)))
                    }
                    None => limit,
                };
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
                self.pred_ends.insert(job_id, pred_end);
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
            let due = self.early_ends(now).min();
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
        // A job that lost its reservation (a job of higher priority took its place) is
        // promised afresh when it gets one again: its slip counts from then.
        self.promised.retain(|id, _| planned.contains_key(id));
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
            // More nodes than the partition has up: Slurm's main scheduler says so before
            // it tries to place the job.
            let r = match r {
                PendingReason::Resources | PendingReason::Priority if job.min_nodes > self.schedulable_nodes(part) => {
                    PendingReason::NodesUnavailable
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
    /// The partition's nodes that are up and not drained (cached within a pass).
    fn schedulable_nodes(&self, part: &PartitionRes) -> u32 {
        let count = || part.nodes.iter().filter_map(|n| self.node(n)).filter(|n| n.schedulable).count() as u32;
        match self.part_index(part) {
            Some(p) => *self.schedulable_in.borrow_mut().entry(p).or_insert_with(count),
            None => count(),
        }
    }

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

    /// How long the plan expects a job of `uid` with `limit` to run: its limit (`i64::MAX`
    /// for none), or with predictions on, what its user's recent jobs ran (never longer).
    pub(crate) fn plan_len(&self, uid: u32, limit: TimeLimit) -> i64 {
        let l = limit_secs(limit);
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

    /// The predicted ends, seen at `now`, of the running jobs the plan expects to end before
    /// their limits (what expected starts rely on).
    fn early_ends(&self, now: i64) -> impl Iterator<Item = i64> + '_ {
        self.running.keys().filter_map(move |j| {
            let e = self.planned_end(*j, now);
            (e < self.ends.get(j).copied().unwrap_or(i64::MAX)).then_some(e)
        })
    }

    /// A waiting job's limit in its first partition (the one its run time is predicted and
    /// ordered by before it is placed).
    fn first_partition_limit(&self, job: &SchedJob) -> TimeLimit {
        job.partitions
            .first()
            .and_then(|p| self.partition(p))
            .map_or(job.time_limit.flatten(), |p| job.effective_limit(p))
    }

    /// A waiting job's claim on a backfill hole ([`crate::predict::slowdown_score`]), from its
    /// expected run time.
    fn backfill_score(&self, job: &SchedJob, now: i64) -> f64 {
        crate::predict::slowdown_score(now - job.queued, self.plan_len(job.uid, self.first_partition_limit(job)))
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

/// A time limit in seconds (`i64::MAX` for none).
fn limit_secs(limit: TimeLimit) -> i64 {
    limit.map_or(i64::MAX, |l| i64::try_from(l).unwrap_or(i64::MAX))
}
