//! Job and node states with the names and short codes Slurm prints.

use serde::{Deserialize, Serialize};

/// The state of a job as Slurm names it (`JobState=` in scontrol, `%T`/`%t` in squeue).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum JobState {
    Pending,
    Running,
    Suspended,
    Completing,
    Completed,
    Cancelled,
    Failed,
    Timeout,
    NodeFail,
    Preempted,
    BootFail,
    Deadline,
    OutOfMemory,
    /// Allocated, and waiting for its `PrologSlurmctld` before anything is launched (shown
    /// for a running job whose controller prolog runs; never stored).
    Configuring,
}

impl JobState {
    pub const ALL: [JobState; 14] = [
        JobState::Pending,
        JobState::Running,
        JobState::Suspended,
        JobState::Completing,
        JobState::Completed,
        JobState::Cancelled,
        JobState::Failed,
        JobState::Timeout,
        JobState::NodeFail,
        JobState::Preempted,
        JobState::BootFail,
        JobState::Deadline,
        JobState::OutOfMemory,
        JobState::Configuring,
    ];

    pub fn name(self) -> &'static str {
        match self {
            JobState::Pending => "PENDING",
            JobState::Running => "RUNNING",
            JobState::Suspended => "SUSPENDED",
            JobState::Completing => "COMPLETING",
            JobState::Completed => "COMPLETED",
            JobState::Cancelled => "CANCELLED",
            JobState::Failed => "FAILED",
            JobState::Timeout => "TIMEOUT",
            JobState::NodeFail => "NODE_FAIL",
            JobState::Preempted => "PREEMPTED",
            JobState::BootFail => "BOOT_FAIL",
            JobState::Deadline => "DEADLINE",
            JobState::OutOfMemory => "OUT_OF_MEMORY",
            JobState::Configuring => "CONFIGURING",
        }
    }

    pub fn short(self) -> &'static str {
        match self {
            JobState::Pending => "PD",
            JobState::Running => "R",
            JobState::Suspended => "S",
            JobState::Completing => "CG",
            JobState::Completed => "CD",
            JobState::Cancelled => "CA",
            JobState::Failed => "F",
            JobState::Timeout => "TO",
            JobState::NodeFail => "NF",
            JobState::Preempted => "PR",
            JobState::BootFail => "BF",
            JobState::Deadline => "DL",
            JobState::OutOfMemory => "OOM",
            JobState::Configuring => "CF",
        }
    }

    /// Parses a name or short code as `squeue -t` accepts them (case-insensitive).
    pub fn parse(s: &str) -> Option<JobState> {
        // The exact long name (what the wire carries) first: readers parse one per job.
        if let Some(st) = JobState::ALL.into_iter().find(|st| st.name() == s) {
            return Some(st);
        }
        JobState::ALL.into_iter().find(|st| st.name().eq_ignore_ascii_case(s) || st.short().eq_ignore_ascii_case(s))
    }

    /// A job in this state has ended and holds nothing.
    pub fn is_finished(self) -> bool {
        !matches!(
            self,
            JobState::Pending | JobState::Running | JobState::Suspended | JobState::Completing | JobState::Configuring
        )
    }
}

/// Why a pending job waits, with Slurm's reason names (`Reason=` / squeue `%r`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PendingReason {
    None,
    Priority,
    Resources,
    Dependency,
    DependencyNeverSatisfied,
    BeginTime,
    JobHeldUser,
    JobHeldAdmin,
    PartitionTimeLimit,
    PartitionNodeLimit,
    PartitionDown,
    PartitionInactive,
    ReqNodeNotAvail,
    BadConstraints,
    NodeDown,
    InvalidAccount,
    /// An array's `%N` throttle: N of its tasks already run.
    JobArrayTaskLimit,
    /// Its prolog failed on a node: requeued and held until an administrator releases it.
    LaunchFailedRequeuedHeld,
    /// The cluster licenses it asks for are in use.
    Licenses,
    // Accounting limits (AccountingStorageEnforce=limits): an association's or QoS's cap
    // that the job would go over (`Grp*`: with the group's running jobs; `Max*PerJob` and
    // `MaxWall`: by itself).
    AssocGrpJobsLimit,
    AssocGrpCpuLimit,
    AssocGrpNodeLimit,
    AssocGrpMemLimit,
    AssocGrpGRES,
    AssocMaxJobsLimit,
    AssocMaxCpuPerJobLimit,
    AssocMaxNodePerJobLimit,
    AssocMaxWallDurationPerJobLimit,
    QOSGrpJobsLimit,
    QOSGrpCpuLimit,
    QOSGrpNodeLimit,
    QOSGrpMemLimit,
    QOSGrpGRES,
    QOSMaxJobsPerUserLimit,
    QOSMaxCpuPerUserLimit,
    QOSMaxNodePerUserLimit,
    QOSMaxCpuPerJobLimit,
    QOSMaxNodePerJobLimit,
    QOSMaxWallDurationPerJobLimit,
    // `GrpTRESMins` (usage, decayed, in TRES-minutes) and `MaxTRESPerNode`.
    AssocGrpCPUMinutesLimit,
    AssocGrpMemMinutes,
    AssocGrpNodeMinutes,
    AssocGrpBillingMinutes,
    AssocGrpGRESMinutes,
    AssocMaxCpuPerNode,
    AssocMaxMemPerNode,
    AssocMaxGRESPerNode,
    QOSMaxCpuPerNode,
    QOSMaxMemoryPerNode,
    QOSMaxGRESPerNode,
    // Advance reservations.
    /// Its reservation has not started yet.
    Reservation,
    /// Nodes it needs are in a reservation it may not use.
    ReqNodeNotAvailReserved,
    /// A maintenance reservation covers every node of its partition.
    ReqNodeNotAvailMaint,
    /// Its reservation ended or was deleted: held until released.
    ReservationDeleted,
    /// It needs more nodes than its partition has up and not drained (Slurm's main scheduler
    /// says so in these words, for `%r` and `%R` alike).
    NodesUnavailable,
    /// `--deadline`: it could no longer end before it (the job ends `DEADLINE`).
    DeadLine,
}

impl PendingReason {
    pub fn name(self) -> &'static str {
        match self {
            PendingReason::None => "None",
            PendingReason::Priority => "Priority",
            PendingReason::Resources => "Resources",
            PendingReason::Dependency => "Dependency",
            PendingReason::DependencyNeverSatisfied => "DependencyNeverSatisfied",
            PendingReason::BeginTime => "BeginTime",
            PendingReason::JobHeldUser => "JobHeldUser",
            PendingReason::JobHeldAdmin => "JobHeldAdmin",
            PendingReason::PartitionTimeLimit => "PartitionTimeLimit",
            PendingReason::PartitionNodeLimit => "PartitionNodeLimit",
            PendingReason::PartitionDown => "PartitionDown",
            PendingReason::PartitionInactive => "PartitionInactive",
            PendingReason::ReqNodeNotAvail => "ReqNodeNotAvail",
            PendingReason::BadConstraints => "BadConstraints",
            PendingReason::NodeDown => "NodeDown",
            PendingReason::InvalidAccount => "InvalidAccount",
            PendingReason::JobArrayTaskLimit => "JobArrayTaskLimit",
            PendingReason::LaunchFailedRequeuedHeld => "launch failed requeued held",
            PendingReason::Licenses => "Licenses",
            PendingReason::AssocGrpJobsLimit => "AssocGrpJobsLimit",
            PendingReason::AssocGrpCpuLimit => "AssocGrpCpuLimit",
            PendingReason::AssocGrpNodeLimit => "AssocGrpNodeLimit",
            PendingReason::AssocGrpMemLimit => "AssocGrpMemLimit",
            PendingReason::AssocGrpGRES => "AssocGrpGRES",
            PendingReason::AssocMaxJobsLimit => "AssocMaxJobsLimit",
            PendingReason::AssocMaxCpuPerJobLimit => "AssocMaxCpuPerJobLimit",
            PendingReason::AssocMaxNodePerJobLimit => "AssocMaxNodePerJobLimit",
            PendingReason::AssocMaxWallDurationPerJobLimit => "AssocMaxWallDurationPerJobLimit",
            PendingReason::QOSGrpJobsLimit => "QOSGrpJobsLimit",
            PendingReason::QOSGrpCpuLimit => "QOSGrpCpuLimit",
            PendingReason::QOSGrpNodeLimit => "QOSGrpNodeLimit",
            PendingReason::QOSGrpMemLimit => "QOSGrpMemLimit",
            PendingReason::QOSGrpGRES => "QOSGrpGRES",
            PendingReason::QOSMaxJobsPerUserLimit => "QOSMaxJobsPerUserLimit",
            PendingReason::QOSMaxCpuPerUserLimit => "QOSMaxCpuPerUserLimit",
            PendingReason::QOSMaxNodePerUserLimit => "QOSMaxNodePerUserLimit",
            PendingReason::QOSMaxCpuPerJobLimit => "QOSMaxCpuPerJobLimit",
            PendingReason::QOSMaxNodePerJobLimit => "QOSMaxNodePerJobLimit",
            PendingReason::QOSMaxWallDurationPerJobLimit => "QOSMaxWallDurationPerJobLimit",
            PendingReason::AssocGrpCPUMinutesLimit => "AssocGrpCPUMinutesLimit",
            PendingReason::AssocGrpMemMinutes => "AssocGrpMemMinutes",
            PendingReason::AssocGrpNodeMinutes => "AssocGrpNodeMinutes",
            PendingReason::AssocGrpBillingMinutes => "AssocGrpBillingMinutes",
            PendingReason::AssocGrpGRESMinutes => "AssocGrpGRESMinutes",
            PendingReason::AssocMaxCpuPerNode => "AssocMaxCpuPerNode",
            PendingReason::AssocMaxMemPerNode => "AssocMaxMemPerNode",
            PendingReason::AssocMaxGRESPerNode => "AssocMaxGRESPerNode",
            PendingReason::QOSMaxCpuPerNode => "QOSMaxCpuPerNode",
            PendingReason::QOSMaxMemoryPerNode => "QOSMaxMemoryPerNode",
            PendingReason::QOSMaxGRESPerNode => "QOSMaxGRESPerNode",
            PendingReason::Reservation => "Reservation",
            PendingReason::ReqNodeNotAvailReserved => "ReqNodeNotAvail, May be reserved for other job",
            PendingReason::ReqNodeNotAvailMaint => "ReqNodeNotAvail, Reserved for maintenance",
            PendingReason::ReservationDeleted => "ReservationDeleted",
            PendingReason::NodesUnavailable => {
                "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions"
            }
            PendingReason::DeadLine => "DeadLine",
        }
    }
}

/// The base state of a node; flags are kept beside it in [`NodeState`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum NodeBase {
    Unknown,
    Idle,
    Mixed,
    Allocated,
    Down,
    Future,
}

/// A node state: base plus the flags Slurm prints beside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NodeState {
    pub base: NodeBase,
    pub drain: bool,
    pub completing: bool,
    pub not_responding: bool,
    /// In an active advance reservation (`RESERVED`), and that a maintenance one (`MAINT`).
    pub reserved: bool,
    pub maint: bool,
}

impl NodeState {
    pub fn new(base: NodeBase) -> Self {
        NodeState { base, drain: false, completing: false, not_responding: false, reserved: false, maint: false }
    }

    /// `sinfo`'s compact name (`%t`): `idle`, `mix`, `alloc`, `drain`, `drng`, `comp`, `down*`.
    pub fn short(&self) -> String {
        if let Some(m) = self.maint_name(false) {
            return m;
        }
        let base = if self.drain {
            match self.base {
                NodeBase::Allocated | NodeBase::Mixed => "drng",
                NodeBase::Down => "down",
                _ if self.completing => "drng",
                _ => "drain",
            }
        } else if self.completing {
            "comp"
        } else {
            match self.base {
                NodeBase::Unknown => "unk",
                NodeBase::Idle if self.reserved && !self.not_responding => "resv",
                NodeBase::Idle => "idle",
                NodeBase::Mixed => "mix",
                NodeBase::Allocated => "alloc",
                NodeBase::Down => "down",
                NodeBase::Future => "futr",
            }
        };
        if self.not_responding {
            format!("{base}*")
        } else {
            base.to_string()
        }
    }

    /// `sinfo`'s long name (`%T`, `-l`): `idle`, `mixed`, `allocated`, `drained`, `draining`.
    pub fn long(&self) -> String {
        if let Some(m) = self.maint_name(true) {
            return m;
        }
        let base = if self.drain {
            match self.base {
                NodeBase::Allocated | NodeBase::Mixed => "draining",
                NodeBase::Down => "down",
                _ if self.completing => "draining",
                _ => "drained",
            }
        } else if self.completing {
            "completing"
        } else {
            match self.base {
                NodeBase::Unknown => "unknown",
                NodeBase::Idle if self.reserved && !self.not_responding => "reserved",
                NodeBase::Idle => "idle",
                NodeBase::Mixed => "mixed",
                NodeBase::Allocated => "allocated",
                NodeBase::Down => "down",
                NodeBase::Future => "future",
            }
        };
        if self.not_responding {
            format!("{base}*")
        } else {
            base.to_string()
        }
    }

    /// `scontrol show node`'s `State=`: `IDLE`, `MIXED`, `IDLE+DRAIN`, `DOWN+NOT_RESPONDING`.
    pub fn scontrol(&self) -> String {
        let mut s = match self.base {
            NodeBase::Unknown => "UNKNOWN",
            NodeBase::Idle => "IDLE",
            NodeBase::Mixed => "MIXED",
            NodeBase::Allocated => "ALLOCATED",
            NodeBase::Down => "DOWN",
            NodeBase::Future => "FUTURE",
        }
        .to_string();
        if self.completing {
            s.push_str("+COMPLETING");
        }
        if self.drain {
            s.push_str("+DRAIN");
        }
        if self.maint {
            s.push_str("+MAINTENANCE");
        }
        if self.reserved {
            s.push_str("+RESERVED");
        }
        if self.not_responding {
            s.push_str("+NOT_RESPONDING");
        }
        s
    }

    /// A node in a maintenance reservation, as Slurm's `node_state_string` names it: `maint`
    /// while idle (`maint*` not responding), `$` after a busy base (`mix$`, `alloc$`).
    fn maint_name(&self, long: bool) -> Option<String> {
        if !self.maint || self.drain || self.completing {
            return None;
        }
        let name = match (self.base, long) {
            (NodeBase::Idle | NodeBase::Unknown | NodeBase::Future, _) if self.not_responding => "maint*",
            (NodeBase::Idle | NodeBase::Unknown | NodeBase::Future, _) => "maint",
            (NodeBase::Mixed, false) => "mix$",
            (NodeBase::Mixed, true) => "mixed$",
            (NodeBase::Allocated, false) => "alloc$",
            (NodeBase::Allocated, true) => "allocated$",
            (NodeBase::Down, _) => return None,
        };
        Some(name.to_string())
    }

    /// Whether `sinfo -t NAME` selects this state.
    pub fn matches(&self, name: &str) -> bool {
        let n = name.to_ascii_lowercase();
        let short = self.short();
        let short = short.trim_end_matches('*');
        let long = self.long();
        let long = long.trim_end_matches('*');
        n == short
            || n == long
            || (n == "drain" && self.drain)
            || (n == "down" && self.base == NodeBase::Down)
            || (n == "no_respond" && self.not_responding)
            || (n == "responding" && !self.not_responding)
            || (n == "alloc" && matches!(self.base, NodeBase::Allocated))
            || (n == "mix" && matches!(self.base, NodeBase::Mixed))
            || (n == "resv" || n == "reserved") && self.reserved
            || (n == "maint" && self.maint)
    }

    /// The node can take new work.
    /// Whether the scheduler may place work here, now or (when it is full) once its jobs end.
    pub fn schedulable(&self) -> bool {
        !self.drain
            && !self.completing
            && !self.not_responding
            && matches!(self.base, NodeBase::Idle | NodeBase::Mixed | NodeBase::Allocated)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_state_names() {
        let mut s = NodeState::new(NodeBase::Idle);
        assert_eq!((s.short(), s.long(), s.scontrol()), ("idle".into(), "idle".into(), "IDLE".into()));
        s.drain = true;
        assert_eq!((s.short(), s.long(), s.scontrol()), ("drain".into(), "drained".into(), "IDLE+DRAIN".into()));
        s.base = NodeBase::Mixed;
        assert_eq!(s.short(), "drng");
        let mut d = NodeState::new(NodeBase::Down);
        d.not_responding = true;
        assert_eq!(d.short(), "down*");
        assert_eq!(d.scontrol(), "DOWN+NOT_RESPONDING");
    }

    #[test]
    fn reserved_and_maintenance_nodes_as_slurm_names_them() {
        let names = |s: &NodeState| (s.short(), s.long(), s.scontrol());
        let mut s = NodeState::new(NodeBase::Idle);
        s.reserved = true;
        assert_eq!(names(&s), ("resv".into(), "reserved".into(), "IDLE+RESERVED".into()));
        s.maint = true;
        assert_eq!(names(&s), ("maint".into(), "maint".into(), "IDLE+MAINTENANCE+RESERVED".into()));
        s.base = NodeBase::Mixed;
        assert_eq!((s.short(), s.long()), ("mix$".into(), "mixed$".into()));
        s.maint = false;
        // Busy comes first: a reserved node with jobs is `mix`, not `resv`.
        assert_eq!((s.short(), s.long()), ("mix".into(), "mixed".into()));
        assert!(s.matches("resv") && s.matches("reserved") && !s.matches("maint"));
    }

    #[test]
    fn job_state_parse() {
        assert_eq!(JobState::parse("pd"), Some(JobState::Pending));
        assert_eq!(JobState::parse("RUNNING"), Some(JobState::Running));
        assert_eq!(JobState::parse("x"), None);
    }
}
