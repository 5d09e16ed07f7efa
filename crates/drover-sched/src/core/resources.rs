//! Nodes, partitions and advance reservations as the scheduler sees them.

use super::*;

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
    pub(super) used: Vec<bool>,
    /// How many of `used` are set (kept with it: placement asks for it per node per job).
    pub(super) used_cpus: u32,
    pub(super) used_mem: u64,
    pub(super) jobs: u32,
    /// Users with jobs here (uid, jobs), and the user whose `--exclusive=user` jobs run here.
    pub(super) users: Vec<(u32, u32)>,
    pub(super) excl_user: Option<(u32, u32)>,
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
