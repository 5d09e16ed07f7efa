//! A waiting job as the scheduler sees it: what placement needs, the rarer requests boxed.

use super::*;

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
    /// `--mincpus`: at least this many CPUs on each node it takes (0: none).
    pub min_cpus: u32,
    /// `--deadline`: when it must have ended, and the time it needs (its `--time-min`, else
    /// its limit; 0 for neither). It starts with a limit that ends by then; once it can no
    /// longer make it, its reason is `DeadLine` (the controller ends it, as Slurm's
    /// `deadline_ok`). A held job is looked at once it is released.
    pub deadline: Option<(i64, u64)>,
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
            min_cpus: 0,
            deadline: None,
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
