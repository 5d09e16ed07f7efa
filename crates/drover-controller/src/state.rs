//! The controller's durable state: jobs and node administration, the journal records that
//! change it, and the one function that applies a record. Recovery replays the same records.

use drover_journal::RecordRef;
use drover_model::alloc::Allocation;
use drover_model::array::{ArraySpec, TaskSet};
use drover_model::duration::TimeLimit;
use drover_model::job::{JobId, JobSpec};
use drover_model::state::{JobState, PendingReason};
use drover_model::step::{StepId, StepLayout};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

mod legacy;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum HoldKind {
    User,
    Admin,
    /// Held by the controller after its prolog failed (`launch failed requeued held`);
    /// released as an administrator's hold is.
    LaunchFailed,
    /// Its advance reservation ended or was deleted (`ReservationDeleted`); its user may
    /// release it.
    ResvDeleted,
}

/// Everything about a job that changes after submit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobStatus {
    pub state: JobState,
    pub reason: PendingReason,
    pub submit_time: i64,
    pub eligible_time: i64,
    pub start_time: i64,
    pub end_time: i64,
    #[serde(deserialize_with = "crate::intern::deserialize")]
    pub partition: Arc<str>,
    /// Boxed: most records in a large queue are pending and have none.
    pub alloc: Option<Box<Allocation>>,
    /// The limit the job runs with (the partition's default applied).
    pub time_limit: TimeLimit,
    /// Raw wait(2) status.
    pub exit_status: i32,
    pub restarts: u32,
    pub cancelled_by: Option<u32>,
    pub priority: u64,
    /// The priority was fixed by an administrator (`--priority`, `scontrol update
    /// Priority=`): no factor or nice moves it until it is reset.
    pub priority_set: bool,
    pub hold: Option<HoldKind>,
    /// Nodes of a multi-node launch that have not reported their end yet.
    pub nodes_running: Vec<String>,
    pub state_desc: String,
    pub last_sched_eval: i64,
    /// The planner's expected start and nodes for a pending job (derived, like `reason`).
    pub planned: Option<Box<(i64, String)>>,
    /// Suspension (`scontrol suspend`): when the job was last suspended or resumed, how long
    /// it had run before its last suspension, and how long it has been suspended in all
    /// (not counting a suspension still going on). Its time limit ends that much later.
    pub suspend_time: i64,
    pub pre_suspend_secs: i64,
    pub suspended_secs: i64,
    /// When the job was last requeued (its previous run ended); 0: never.
    pub requeue_time: i64,
    /// What the batch script's tasks used (an encoded `StatReply`), reported as it ended.
    pub batch_usage: Option<Box<[u8]>>,
}

impl JobStatus {
    /// A job just submitted: pending, with nothing of a run yet.
    pub fn pending(
        submit_time: i64,
        eligible_time: i64,
        partition: &str,
        priority: u64,
        hold: Option<HoldKind>,
    ) -> Self {
        JobStatus {
            state: JobState::Pending,
            reason: PendingReason::None,
            submit_time,
            eligible_time,
            start_time: 0,
            end_time: 0,
            partition: crate::intern::intern(partition),
            alloc: None,
            time_limit: None,
            exit_status: 0,
            restarts: 0,
            cancelled_by: None,
            priority,
            priority_set: false,
            hold,
            nodes_running: Vec::new(),
            state_desc: String::new(),
            last_sched_eval: 0,
            planned: None,
            suspend_time: 0,
            pre_suspend_secs: 0,
            suspended_secs: 0,
            requeue_time: 0,
            batch_usage: None,
        }
    }

    /// The node that runs the batch script: the allocation's first.
    pub fn batch_host(&self) -> &str {
        self.alloc.as_ref().and_then(|a| a.nodes.first()).map_or("", |n| n.node.as_str())
    }
}

/// A job request in its wire encoding (a protobuf `JobSpec`): a few hundred bytes instead of
/// a struct of ~40 fields with a heap allocation per string, and what readers are sent
/// verbatim inside each job record, so a large queue needs no per-job cache of encodings.
/// Unpacked where a whole request is needed (launch, update, scheduling a changed job).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackedSpec(Box<[u8]>);

impl PackedSpec {
    pub fn pack(s: &JobSpec) -> PackedSpec {
        use prost::Message;
        PackedSpec(drover_proto::spec_to_wire(s).encode_to_vec().into_boxed_slice())
    }
    pub fn wire(&self) -> drover_proto::v1::JobSpec {
        use prost::Message;
        drover_proto::v1::JobSpec::decode(&self.0[..]).expect("invariant: a packed spec decodes")
    }
    pub fn unpack(&self) -> JobSpec {
        drover_proto::spec_from_wire(self.wire()).expect("invariant: a packed spec converts back")
    }
    /// The scrontab schedule alone, without decoding the rest (asked at every job's end).
    pub fn cron(&self) -> Option<String> {
        /// `JobSpec`'s `cron` field; the others are skipped unread.
        #[derive(Clone, PartialEq, prost::Message)]
        struct CronOnly {
            #[prost(string, optional, tag = "77")]
            cron: Option<String>,
        }
        use prost::Message;
        CronOnly::decode(&self.0[..]).ok().and_then(|c| c.cron)
    }
    /// The encoded `JobSpec` message.
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    pub id: JobId,
    /// The request without its script and environment: those stay in the journal record
    /// that submitted the job (`blob`) and are read back only to launch it.
    pub spec: PackedSpec,
    /// Hot fields of the request, unpacked.
    pub uid: u32,
    pub batch: bool,
    /// The time limit asked for (`None`: not given; `Some(None)`: UNLIMITED).
    pub req_limit: Option<drover_model::duration::TimeLimit>,
    pub status: JobStatus,
    pub blob: Option<RecordRef>,
    /// The job's part in an array (`--array`), boxed: most jobs have none.
    pub array: Option<Box<ArrayPart>>,
    /// Its steps (srun inside the allocation), boxed: pending jobs have none.
    pub steps: Option<Box<JobSteps>>,
}

/// The steps of a job: those not ended yet, and the id the next one gets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct JobSteps {
    pub next_id: StepId,
    pub running: Vec<Step>,
}

/// A job step that has not ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub id: StepId,
    pub name: String,
    pub layout: StepLayout,
    pub start_time: i64,
    /// `srun -t` (the job's limit applies too).
    pub time_limit: Option<u64>,
    pub srun_host: String,
    pub srun_pid: u32,
    /// The srun command line.
    pub submit_line: String,
    /// What its tasks used on the nodes that have reported their end (an encoded
    /// `StatReply`).
    pub usage: Vec<u8>,
    /// Nodes whose part of the step has not reported its end.
    pub nodes_running: Vec<String>,
    /// The worst raw wait status reported so far.
    pub exit_status: i32,
    /// How a node said its part ended (`CANCELLED`, `TIMEOUT`, `FAILED_LAUNCH`, ...).
    pub how: String,
    pub cancelled: bool,
}

/// A record of a job array: either the array's pending remainder (`task_id: None`, at the
/// array's id, holding the tasks not started yet), or one task split off it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArrayPart {
    pub array_job_id: JobId,
    pub task_id: Option<u32>,
    /// The remainder's tasks (empty for a task).
    pub pending: TaskSet,
    /// `%N` (0: none).
    pub throttle: u32,
    /// The whole array's shape, as `SLURM_ARRAY_TASK_{COUNT,MIN,MAX,STEP}` report it.
    pub count: u32,
    pub min: u32,
    pub max: u32,
    pub step: u32,
}

impl ArrayPart {
    /// The remainder of a newly submitted array, from its canonical expression.
    pub fn remainder(id: JobId, expr: &str) -> Option<ArrayPart> {
        let spec = ArraySpec::parse(expr).ok()?;
        let t = &spec.tasks;
        Some(ArrayPart {
            array_job_id: id,
            task_id: None,
            count: t.len().min(u64::from(u32::MAX)) as u32,
            min: t.min().unwrap_or(0),
            max: t.max().unwrap_or(0),
            step: t.step(),
            throttle: spec.throttle,
            pending: spec.tasks,
        })
    }
}

impl Job {
    pub fn new(id: JobId, spec: &JobSpec, status: JobStatus, blob: Option<RecordRef>) -> Job {
        Job {
            id,
            spec: PackedSpec::pack(spec),
            uid: spec.uid,
            batch: spec.batch,
            req_limit: spec.time_limit,
            status,
            blob,
            array: spec.array.as_deref().and_then(|a| ArrayPart::remainder(id, a)).map(Box::new),
            steps: None,
        }
    }

    /// The steps not ended yet.
    pub fn running_steps(&self) -> &[Step] {
        self.steps.as_deref().map_or(&[], |s| s.running.as_slice())
    }

    pub fn step(&self, id: StepId) -> Option<&Step> {
        self.running_steps().iter().find(|s| s.id == id)
    }

    /// The array task this record runs.
    pub fn array_task(&self) -> Option<(JobId, u32)> {
        self.array.as_ref().and_then(|a| a.task_id.map(|t| (a.array_job_id, t)))
    }

    /// The array's pending remainder, when this record is one.
    pub fn array_remainder(&self) -> Option<&ArrayPart> {
        self.array.as_deref().filter(|a| a.task_id.is_none())
    }

    /// Whether this record belongs to array `id` (its remainder or one of its tasks).
    pub fn in_array(&self, id: JobId) -> bool {
        self.array.as_ref().is_some_and(|a| a.array_job_id == id)
    }
}

/// Administrative node state that must survive a restart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct NodeAdmin {
    pub drain: bool,
    pub down: bool,
    pub reason: String,
    pub reason_uid: u32,
    pub reason_time: i64,
}

/// One change, journalled before it is acknowledged. The two variants that carry a request
/// stay first: version 3 of the state wrote them at these indices in another shape (see
/// [`legacy`]).
#[allow(clippy::large_enum_variant)] // records live briefly; boxing buys nothing
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Record {
    /// A new job, with its whole request (script and environment included).
    Submit {
        id: JobId,
        #[serde(with = "wire_spec")]
        spec: JobSpec,
        status: JobStatus,
    },
    /// A changed request (without script and environment, which stay where they were).
    Update {
        id: JobId,
        #[serde(with = "wire_spec")]
        spec: JobSpec,
        status: JobStatus,
    },
    Status {
        id: JobId,
        status: JobStatus,
    },
    Purge {
        id: JobId,
    },
    /// Task `task` of array `array` leaves the array's pending remainder as job `id` (a new
    /// id, or the array's own when it is the last task), with the remainder's request and
    /// status.
    ArraySplit {
        array: JobId,
        task: u32,
        id: JobId,
    },
    /// A new `%N` throttle for every record of array `array`.
    ArrayThrottle {
        array: JobId,
        throttle: u32,
    },
    NodeAdmin {
        node: String,
        admin: NodeAdmin,
    },
    /// A step started, or changed while it runs (a node reported its part ended).
    StepSet {
        id: JobId,
        step: Step,
    },
    /// A step ended: it leaves the job's running steps.
    StepEnd {
        id: JobId,
        step: StepId,
        state: JobState,
        exit_status: i32,
        end_time: i64,
        /// What its tasks used, every node's.
        usage: Vec<u8>,
    },
    /// An advance reservation made or changed (its whole new state); `seq` is the number
    /// its generated name used, if any.
    ResvSet {
        resv: drover_model::resv::Reservation,
        seq: u32,
    },
    ResvDelete {
        name: String,
    },
    /// A job requeued after a node failed waits until these nodes are known to have stopped
    /// its last run (none: it may start). State version 2.
    Fence {
        id: JobId,
        nodes: Vec<String>,
    },
    /// Pending tasks `tasks` leave array `array`'s remainder without records of their own
    /// (pending tasks cancelled, as Slurm clears them from the array's task bitmap). State
    /// version 3.
    ArrayDrop {
        array: JobId,
        tasks: Vec<u32>,
    },
}

/// What accounting has not confirmed yet, where slurm.conf sends records there. A job is
/// sent whole from its current state, so one changed several times before delivery is sent
/// once; what leaves the state before delivery (a purged job, the earlier run of a requeued
/// one, a step that ended) is kept here until it is delivered. Delivery is confirmed in
/// memory only: after a crash the journal's records since the last snapshot mark their jobs
/// again and they are sent again, which the store absorbs (records are upserts by key).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct AcctOutbox {
    pub dirty: std::collections::BTreeSet<JobId>,
    pub gone: std::collections::VecDeque<Gone>,
}

/// A record that left the controller's state before accounting had it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Gone {
    /// A job as it was last before it was purged.
    Job(Arc<Job>),
    /// A run of a job as it was when a requeue ended it (recorded as `REQUEUED`).
    Requeued { job: Arc<Job>, end_time: i64 },
    /// A step that ended, with its job as it was then.
    Step { job: Arc<Job>, step: Box<Step>, state: JobState, exit_status: i32, end_time: i64 },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Durable {
    pub next_job_id: JobId,
    pub jobs: crate::jobtable::JobTable,
    pub nodes: BTreeMap<String, NodeAdmin>,
    /// `None`: slurm.conf keeps no accounting.
    pub acct: Option<AcctOutbox>,
    /// Advance reservations by name, and the last number a generated name used.
    pub resvs: Resvs,
    pub resv_seq: u32,
    /// Requeued jobs waiting for nodes to confirm their last run stopped ([`Record::Fence`]).
    /// Encoded after the rest (state version 2), so that a version-1 snapshot reads as none.
    #[serde(skip)]
    pub fences: BTreeMap<JobId, Vec<String>>,
}

/// Advance reservations in the order they were made (the order Slurm lists them in); a
/// handful, so looked up by name with a scan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Resvs(Vec<drover_model::resv::Reservation>);

impl Resvs {
    pub fn get(&self, name: &str) -> Option<&drover_model::resv::Reservation> {
        self.0.iter().find(|r| r.name == name)
    }
    pub fn contains_key(&self, name: &str) -> bool {
        self.get(name).is_some()
    }
    pub fn values(&self) -> std::slice::Iter<'_, drover_model::resv::Reservation> {
        self.0.iter()
    }
    /// Replaces the reservation of that name in its place, or adds it last.
    pub fn insert(&mut self, r: drover_model::resv::Reservation) {
        match self.0.iter_mut().find(|x| x.name == r.name) {
            Some(x) => *x = r,
            None => self.0.push(r),
        }
    }
    pub fn remove(&mut self, name: &str) {
        self.0.retain(|r| r.name != name);
    }
}

impl Durable {
    /// Marks what a record changes for accounting, before it is applied.
    fn track(&mut self, rec: &Record) {
        let Some(out) = self.acct.as_mut() else { return };
        match rec {
            Record::Submit { id, .. } | Record::StepSet { id, .. } => {
                out.dirty.insert(*id);
            }
            Record::Update { id, status, .. } | Record::Status { id, status } => {
                if let Some(j) = self.jobs.get(id) {
                    if j.status.restarts != status.restarts {
                        // The run that ended in the requeue keeps its own record.
                        out.gone.push_back(Gone::Requeued { job: j.clone(), end_time: status.requeue_time });
                    }
                }
                out.dirty.insert(*id);
            }
            Record::Purge { id } => {
                if out.dirty.remove(id) {
                    if let Some(j) = self.jobs.get(id) {
                        out.gone.push_back(Gone::Job(j.clone()));
                    }
                }
            }
            Record::ArraySplit { array, id, .. } => {
                out.dirty.insert(*array);
                out.dirty.insert(*id);
            }
            Record::ArrayDrop { array, .. } => {
                out.dirty.insert(*array);
            }
            Record::StepEnd { id, step, state, exit_status, end_time, usage } => {
                if let Some(j) = self.jobs.get(id) {
                    if let Some(s) = j.step(*step) {
                        let mut s = s.clone();
                        s.usage = usage.clone();
                        out.gone.push_back(Gone::Step {
                            job: j.clone(),
                            step: Box::new(s),
                            state: *state,
                            exit_status: *exit_status,
                            end_time: *end_time,
                        });
                    }
                }
            }
            Record::ArrayThrottle { .. }
            | Record::NodeAdmin { .. }
            | Record::ResvSet { .. }
            | Record::ResvDelete { .. }
            | Record::Fence { .. } => {}
        }
    }

    /// Applies a record; `at` is where the journal keeps it.
    pub fn apply(&mut self, rec: Record, at: Option<RecordRef>) {
        self.track(&rec);
        match rec {
            Record::Submit { id, mut spec, status } => {
                self.next_job_id = self.next_job_id.max(id.saturating_add(1));
                // Memory keeps the request without its bulk; the record keeps the rest.
                spec.script = String::new();
                spec.environment = Vec::new();
                self.jobs.insert(id, Arc::new(Job::new(id, &spec, status, at)));
            }
            Record::Update { id, spec, status } => {
                if let Some(j) = self.jobs.get_mut(&id) {
                    let j = Arc::make_mut(j);
                    j.spec = PackedSpec::pack(&spec);
                    j.uid = spec.uid;
                    j.batch = spec.batch;
                    j.req_limit = spec.time_limit;
                    j.status = status;
                }
            }
            Record::Status { id, status } => {
                if let Some(j) = self.jobs.get_mut(&id) {
                    Arc::make_mut(j).status = status;
                }
            }
            Record::Purge { id } => {
                self.jobs.remove(&id);
                self.fences.remove(&id);
            }
            Record::ArrayThrottle { array, throttle } => {
                self.jobs.update_where(
                    |j| j.in_array(array),
                    |j| {
                        if let Some(a) = Arc::make_mut(j).array.as_mut() {
                            a.throttle = throttle;
                        }
                    },
                );
            }
            Record::ArraySplit { array, task, id } => {
                self.next_job_id = self.next_job_id.max(id.saturating_add(1));
                let Some(rest) = self.jobs.get_mut(&array) else { return };
                let rest = Arc::make_mut(rest);
                let Some(a) = rest.array.as_mut().filter(|a| a.task_id.is_none()) else { return };
                a.pending.remove(task);
                if id == array {
                    a.task_id = Some(task);
                    a.pending = TaskSet::default();
                } else {
                    let mut t = rest.clone();
                    t.id = id;
                    if let Some(a) = t.array.as_mut() {
                        a.task_id = Some(task);
                        a.pending = TaskSet::default();
                    }
                    self.jobs.insert(id, Arc::new(t));
                }
            }
            Record::ArrayDrop { array, tasks } => {
                if let Some(rest) = self.jobs.get_mut(&array) {
                    if let Some(a) = Arc::make_mut(rest).array.as_mut().filter(|a| a.task_id.is_none()) {
                        for t in tasks {
                            a.pending.remove(t);
                        }
                    }
                }
            }
            Record::NodeAdmin { node, admin } => {
                self.nodes.insert(node, admin);
            }
            Record::ResvSet { resv, seq } => {
                self.resv_seq = self.resv_seq.max(seq);
                self.resvs.insert(resv);
            }
            Record::ResvDelete { name } => {
                self.resvs.remove(&name);
            }
            Record::Fence { id, nodes } => {
                if nodes.is_empty() {
                    self.fences.remove(&id);
                } else {
                    self.fences.insert(id, nodes);
                }
            }
            Record::StepSet { id, step } => {
                if let Some(j) = self.jobs.get_mut(&id) {
                    let steps = Arc::make_mut(j).steps.get_or_insert_with(Default::default);
                    // Reserved ids (extern, batch, interactive) do not move the numbering.
                    if step.id < drover_model::step::INTERACTIVE_STEP {
                        steps.next_id = steps.next_id.max(step.id.saturating_add(1));
                    }
                    match steps.running.iter_mut().find(|s| s.id == step.id) {
                        Some(s) => *s = step,
                        None => steps.running.push(step),
                    }
                }
            }
            Record::StepEnd { id, step, .. } => {
                if let Some(j) = self.jobs.get_mut(&id) {
                    if let Some(steps) = Arc::make_mut(j).steps.as_mut() {
                        steps.running.retain(|s| s.id != step);
                    }
                }
            }
        }
    }

    /// Journal generations the state still refers to.
    pub fn blob_generations(&self) -> std::collections::BTreeSet<u64> {
        self.jobs.values().filter_map(|j| j.blob.map(|b| b.generation)).collect()
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut b = postcard::to_stdvec(self).expect("invariant: state serializes");
        b.extend(postcard::to_stdvec(&self.fences).expect("invariant: fences serialize"));
        b
    }

    /// Reads state of version 1 (no fences after it) and 2.
    pub fn decode(bytes: &[u8]) -> Result<Durable, postcard::Error> {
        let (mut d, rest): (Durable, &[u8]) = postcard::take_from_bytes(bytes)?;
        if !rest.is_empty() {
            d.fences = postcard::from_bytes(rest)?;
        }
        Ok(d)
    }
}

/// The version of the state's encoding (snapshots and records): raised whenever a durable
/// type changes shape, with the reading of the older one kept. A controller refuses state of
/// a newer version than its own, and snapshots at once state of an older one.
///
/// 2: requeued jobs' fences ([`Record::Fence`], and after the rest of a snapshot).
/// 3: pending array tasks cancelled without a record ([`Record::ArrayDrop`]).
/// 4: a record starts with [`RECORD_TAG`], and a job's request in it is its protobuf message
///    (a field added to the request no longer changes the record's shape).
pub const STATE_SCHEMA: u32 = 4;

/// The first byte of a record of version 4 on: never the first byte of an older one (a
/// variant's index, below [`legacy::V3_VARIANTS`]), nor a whole postcard varint.
pub const RECORD_TAG: u8 = 0xd4;

pub fn encode_record(r: &Record) -> Vec<u8> {
    let mut b = vec![RECORD_TAG];
    postcard::to_io(r, &mut b).expect("invariant: record serializes");
    b
}

/// Reads a record of any version: a job's script is read back from the journal file its
/// submission went to, which may be older than the state.
pub fn decode_record(b: &[u8]) -> Result<Record, postcard::Error> {
    match b.first() {
        Some(&RECORD_TAG) => decode_current(&b[1..]),
        Some(&v) if v < legacy::V3_VARIANTS => legacy::decode_v3(b),
        _ => Err(postcard::Error::DeserializeBadEnum),
    }
}

fn decode_current(b: &[u8]) -> Result<Record, postcard::Error> {
    postcard::from_bytes(b)
}

/// A job's request in a record: its protobuf message, as bytes.
mod wire_spec {
    use drover_model::job::JobSpec;
    use prost::Message;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(spec: &JobSpec, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&drover_proto::spec_to_wire(spec).encode_to_vec())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<JobSpec, D::Error> {
        use serde::de::Error;
        let b = <&[u8]>::deserialize(d)?;
        let w = drover_proto::v1::JobSpec::decode(b).map_err(D::Error::custom)?;
        drover_proto::spec_from_wire(w).map_err(D::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A packed request's scrontab schedule reads without the rest of it.
    #[test]
    fn a_packed_specs_cron_reads_alone() {
        let mut spec = JobSpec { name: "x".into(), mem_per_node_mb: Some(618), ..Default::default() };
        assert_eq!(PackedSpec::pack(&spec).cron(), None);
        spec.cron = Some("*/5 * * * *".into());
        spec.cron_lines = (3, 4);
        let p = PackedSpec::pack(&spec);
        assert_eq!(p.cron().as_deref(), Some("*/5 * * * *"));
        assert_eq!(p.unpack().cron_lines, (3, 4));
    }

    /// Version 2 puts the fences after the rest: a version-1 snapshot (nothing after it)
    /// reads as none, and version 2 reads back whole.
    #[test]
    fn fences_follow_the_state_and_version_one_reads_as_none() {
        let mut d = Durable { next_job_id: 7, ..Default::default() };
        let v1 = postcard::to_stdvec(&d).unwrap();
        assert_eq!(Durable::decode(&v1).unwrap(), d);
        d.apply(Record::Fence { id: 3, nodes: vec!["n1".into()] }, None);
        let back = Durable::decode(&d.encode()).unwrap();
        assert_eq!(back.fences.get(&3), Some(&vec!["n1".to_string()]));
        d.apply(Record::Fence { id: 3, nodes: Vec::new() }, None);
        assert!(Durable::decode(&d.encode()).unwrap().fences.is_empty());
    }

    /// The highest job id in a record (damaged or hand-made) leaves the next id at the highest,
    /// never overflows: found by the state fuzzer (a Submit and an ArraySplit of u32::MAX).
    #[test]
    fn the_highest_job_id_in_a_record_does_not_overflow() {
        let mut d = Durable::default();
        d.apply(
            Record::Submit {
                id: JobId::MAX,
                spec: JobSpec::default(),
                status: JobStatus::pending(1, 1, "debug", 1, None),
            },
            None,
        );
        assert_eq!(d.next_job_id, JobId::MAX);
        d.apply(Record::ArraySplit { array: 1, task: 0, id: JobId::MAX }, None);
        assert_eq!(d.next_job_id, JobId::MAX);
    }

    /// The journal's records as this schema writes them. A job's request goes in as its
    /// protobuf message, so a field added to `JobSpec` (and its message) leaves the record of a
    /// request without it as it was; a job's status still goes in field by field (postcard),
    /// so a field added to `JobStatus` changes the shape, and a controller of the new shape
    /// could not read the journal of the old one. This fails on such a change: raise
    /// `STATE_SCHEMA`, keep a reader of the older shape (see `legacy`), and take the new bytes
    /// here.
    #[test]
    fn the_shape_of_a_journalled_record_is_that_of_its_schema() {
        let spec = JobSpec { name: "x".into(), ..Default::default() };
        let r = Record::Submit { id: 7, spec, status: JobStatus::pending(1, 1, "debug", 1, None) };
        let hex: String = encode_record(&r).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(STATE_SCHEMA, 4);
        let want = "d40007030a01780000020200000564656275670000000000010000000000000000000000";
        assert_eq!(hex, want, "a journalled type changed shape: raise STATE_SCHEMA");
        assert_eq!(decode_record(&encode_record(&r)).unwrap(), r);
    }

    /// Neither a record of another program nor a cut one is taken for a record.
    #[test]
    fn a_record_of_no_version_is_refused() {
        assert!(decode_record(&[]).is_err());
        assert!(decode_record(&[0x7f, 0, 0]).is_err());
        let r = Record::Submit { id: 7, spec: JobSpec::default(), status: JobStatus::pending(1, 1, "debug", 1, None) };
        let b = encode_record(&r);
        assert!(decode_record(&b[..b.len() - 1]).is_err());
        assert!(decode_record(&b[1..]).is_err(), "a record without its tag is one of version 3, and not this one");
    }

    #[test]
    fn a_packed_spec_unpacks_to_the_same_request() {
        let mut s = JobSpec {
            name: "train".into(),
            uid: 1000,
            partitions: vec!["gpu".into(), "cpu".into()],
            min_nodes: Some(2),
            max_nodes: Some(4),
            time_limit: Some(None),
            nodelist: vec!["n1".into()],
            constraint: Some("a&b".into()),
            dependency: drover_model::job::parse_dependency("afterok:4,afterany:5").unwrap(),
            argv: vec!["job.sh".into(), "--lr".into(), "0.1".into()],
            stdout: Some("out-%j".into()),
            requeue: Some(false),
            begin_time: Some(17),
            ..Default::default()
        };
        assert_eq!(PackedSpec::pack(&s).unpack(), s);
        s.time_limit = Some(Some(3600));
        assert_eq!(PackedSpec::pack(&s).unpack(), s);
        s.time_limit = None;
        assert_eq!(PackedSpec::pack(&s).unpack(), s);
    }

    #[test]
    fn a_record_is_the_status_and_the_stored_request() {
        use prost::Message;
        let spec = JobSpec { name: "x".into(), user: "alice".into(), time_limit: Some(Some(60)), ..Default::default() };
        let status = JobStatus { reason: PendingReason::Priority, ..JobStatus::pending(5, 5, "debug", 9, None) };
        let j = Job::new(7, &spec, status, None);
        let mut buf = drover_proto::bytes::BytesMut::new();
        crate::view::encode_record(&j, false, &mut buf);
        let got = drover_proto::v1::JobInfo::decode(buf.freeze()).unwrap();
        assert_eq!(got, crate::view::job_info(&j));
        assert_eq!(got.spec.unwrap().user, "alice");
        assert_eq!(got.time_limit_secs, Some(60));
        assert_eq!(got.partition, "debug");
    }

    #[test]
    fn the_outbox_keeps_what_accounting_has_not_had() {
        let spec = JobSpec { name: "x".into(), user: "alice".into(), ..Default::default() };
        let status = |state: JobState, restarts: u32| JobStatus {
            state,
            restarts,
            ..JobStatus::pending(1, 1, "debug", 1, None)
        };
        // Without accounting nothing is kept.
        let mut off = Durable::default();
        off.apply(Record::Submit { id: 1, spec: spec.clone(), status: status(JobState::Pending, 0) }, None);
        assert!(off.acct.is_none());
        let mut d = Durable { acct: Some(AcctOutbox::default()), ..Default::default() };
        d.apply(Record::Submit { id: 1, spec: spec.clone(), status: status(JobState::Pending, 0) }, None);
        d.apply(Record::Submit { id: 2, spec, status: status(JobState::Pending, 0) }, None);
        assert_eq!(d.acct.as_ref().unwrap().dirty.iter().copied().collect::<Vec<_>>(), [1, 2]);
        // A requeue keeps the ended run; a step's end keeps the step.
        d.apply(Record::Status { id: 1, status: status(JobState::Running, 0) }, None);
        let step = Step {
            id: 0,
            name: "s".into(),
            layout: drover_model::step::StepLayout {
                nodes: Vec::new(),
                distribution: Default::default(),
                overlap: false,
                own_gres: false,
            },
            start_time: 1,
            time_limit: None,
            srun_host: String::new(),
            srun_pid: 0,
            submit_line: "srun s".into(),
            usage: Vec::new(),
            nodes_running: Vec::new(),
            exit_status: 0,
            how: String::new(),
            cancelled: false,
        };
        d.apply(Record::StepSet { id: 1, step }, None);
        d.apply(
            Record::StepEnd { id: 1, step: 0, state: JobState::Completed, exit_status: 0, end_time: 2, usage: vec![1] },
            None,
        );
        d.apply(Record::Status { id: 1, status: status(JobState::Pending, 1) }, None);
        // Delivered in memory (as the owner does), then purged before the next delivery.
        d.acct.as_mut().unwrap().dirty.remove(&2);
        d.apply(Record::Purge { id: 2 }, None);
        d.apply(Record::Status { id: 1, status: status(JobState::Completed, 1) }, None);
        d.apply(Record::Purge { id: 1 }, None);
        let out = d.acct.as_ref().unwrap();
        assert!(out.dirty.is_empty());
        let kinds: Vec<String> = out
            .gone
            .iter()
            .map(|g| match g {
                Gone::Job(j) => format!("job {} run {}", j.id, j.status.restarts),
                Gone::Requeued { job, .. } => format!("requeued {} run {}", job.id, job.status.restarts),
                Gone::Step { job, step, .. } => format!("step {}.{} {}", job.id, step.id, step.usage.len()),
            })
            .collect();
        // Job 2, delivered before it was purged, is not kept again.
        assert_eq!(kinds, ["step 1.0 1", "requeued 1 run 0", "job 1 run 1"]);
        // It survives a snapshot.
        assert_eq!(Durable::decode(&d.encode()).unwrap(), d);
    }
}
