//! What the core is told ([`Event`]) and what it decides ([`Decision`]).

use super::*;

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
