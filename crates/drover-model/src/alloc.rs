//! What a started job holds on each node.

use serde::{Deserialize, Serialize};

/// The resources of one job on one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeAlloc {
    pub node: String,
    /// Logical CPU ids on the node.
    pub cpu_ids: Vec<u32>,
    pub mem_mb: u64,
    pub tasks: u32,
    /// GRES held on the node (GPU device indices, counts).
    #[serde(default)]
    pub gres: Vec<crate::gres::GresAlloc>,
}

impl NodeAlloc {
    /// GPU device indices held on this node.
    pub fn gpus(&self) -> Vec<u32> {
        self.gres.iter().filter(|g| g.name == "gpu").flat_map(|g| g.indices.iter().copied()).collect()
    }
}

/// A job's whole allocation, nodes in selection order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Allocation {
    pub partition: String,
    pub nodes: Vec<NodeAlloc>,
}

impl Allocation {
    pub fn cpus(&self) -> u32 {
        self.nodes.iter().map(|n| n.cpu_ids.len() as u32).sum()
    }
    pub fn node_names(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.node.clone()).collect()
    }
}
