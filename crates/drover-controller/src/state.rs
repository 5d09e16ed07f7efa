//! The controller's durable state: jobs and node administration, the journal records that
//! change it, and the one function that applies a record. Recovery replays the same records.

use drover_journal::RecordRef;
use drover_model::alloc::Allocation;
use drover_model::duration::TimeLimit;
use drover_model::job::{JobId, JobSpec};
use drover_model::state::{JobState, PendingReason};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum HoldKind {
    User,
    Admin,
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
    pub partition: String,
    pub alloc: Option<Allocation>,
    /// The limit the job runs with (the partition's default applied).
    pub time_limit: TimeLimit,
    /// Raw wait(2) status.
    pub exit_status: i32,
    pub batch_host: String,
    pub restarts: u32,
    pub cancelled_by: Option<u32>,
    pub priority: u64,
    pub hold: Option<HoldKind>,
    /// Nodes of a multi-node launch that have not reported their end yet.
    pub nodes_running: Vec<String>,
    pub state_desc: String,
    pub last_sched_eval: i64,
}

/// A job request in its compact encoding: a few hundred bytes instead of a struct of ~40
/// fields with a heap allocation per string. Unpacked where a whole request is needed
/// (launch, update, the reader's first look at a job version).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackedSpec(Box<[u8]>);

impl PackedSpec {
    pub fn pack(s: &JobSpec) -> PackedSpec {
        PackedSpec(postcard::to_stdvec(s).expect("invariant: a spec serializes").into_boxed_slice())
    }
    pub fn unpack(&self) -> JobSpec {
        postcard::from_bytes(&self.0).expect("invariant: a packed spec decodes")
    }
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Job {
    pub id: JobId,
    /// The request without its script and environment: those stay in the journal record
    /// that submitted the job (`blob`) and are read back only to launch it.
    pub spec: PackedSpec,
    /// Hot fields of the request, unpacked.
    pub uid: u32,
    pub batch: bool,
    pub status: JobStatus,
    pub blob: Option<RecordRef>,
    /// This version's wire encoding, built once by the first reader that needs it.
    #[serde(skip)]
    pub wire: std::sync::OnceLock<drover_proto::bytes::Bytes>,
}

impl Job {
    pub fn new(id: JobId, spec: &JobSpec, status: JobStatus, blob: Option<RecordRef>) -> Job {
        Job {
            id,
            spec: PackedSpec::pack(spec),
            uid: spec.uid,
            batch: spec.batch,
            status,
            blob,
            wire: std::sync::OnceLock::new(),
        }
    }
}

/// A clone is a new version about to be changed: it must not inherit the cached encoding.
impl Clone for Job {
    fn clone(&self) -> Job {
        Job {
            id: self.id,
            spec: self.spec.clone(),
            uid: self.uid,
            batch: self.batch,
            status: self.status.clone(),
            blob: self.blob,
            wire: std::sync::OnceLock::new(),
        }
    }
}

impl PartialEq for Job {
    fn eq(&self, o: &Job) -> bool {
        self.id == o.id && self.spec == o.spec && self.status == o.status && self.blob == o.blob
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

/// One change, journalled before it is acknowledged.
#[allow(clippy::large_enum_variant)] // records live briefly; boxing buys nothing
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Record {
    /// A new job, with its whole request (script and environment included).
    Submit {
        id: JobId,
        spec: JobSpec,
        status: JobStatus,
    },
    /// A changed request (without script and environment, which stay where they were).
    Update {
        id: JobId,
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
    NodeAdmin {
        node: String,
        admin: NodeAdmin,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Durable {
    pub next_job_id: JobId,
    pub jobs: BTreeMap<JobId, Arc<Job>>,
    pub nodes: BTreeMap<String, NodeAdmin>,
}

impl Durable {
    /// Applies a record; `at` is where the journal keeps it.
    pub fn apply(&mut self, rec: Record, at: Option<RecordRef>) {
        match rec {
            Record::Submit { id, mut spec, status } => {
                self.next_job_id = self.next_job_id.max(id + 1);
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
            }
            Record::NodeAdmin { node, admin } => {
                self.nodes.insert(node, admin);
            }
        }
    }

    /// Journal generations the state still refers to.
    pub fn blob_generations(&self) -> std::collections::BTreeSet<u64> {
        self.jobs.values().filter_map(|j| j.blob.map(|b| b.generation)).collect()
    }

    pub fn encode(&self) -> Vec<u8> {
        postcard::to_stdvec(self).expect("invariant: state serializes")
    }

    pub fn decode(bytes: &[u8]) -> Result<Durable, postcard::Error> {
        postcard::from_bytes(bytes)
    }
}

pub fn encode_record(r: &Record) -> Vec<u8> {
    postcard::to_stdvec(r).expect("invariant: record serializes")
}

pub fn decode_record(b: &[u8]) -> Result<Record, postcard::Error> {
    postcard::from_bytes(b)
}
