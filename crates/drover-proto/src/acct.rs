//! Accounting's shared rules (the service and sacctmgr both apply them).

use crate::v1;

/// A new cluster's associations: account `root` (1 share, QoS `normal`) and user root in it,
/// as Slurm creates them when a cluster is added.
pub fn root_assocs(cluster: &str) -> Vec<v1::AcctAssoc> {
    let base = v1::AcctAssoc {
        cluster: cluster.into(),
        account: "root".into(),
        limits: Some(v1::AcctLimits { shares: Some(1), ..Default::default() }),
        qos: vec!["normal".into()],
        ..Default::default()
    };
    vec![base.clone(), v1::AcctAssoc { user: "root".into(), parent: "root".into(), ..base }]
}

/// The TRES Slurm always tracks, in its order (ids 1..8): reports list TRES this way.
pub const BASE_TRES: &[&str] = &["cpu", "mem", "energy", "node", "billing", "fs/disk", "vmem", "pages"];

/// TRES names in Slurm's order: its eight, then the others (`gres/gpu`) by name.
pub fn tres_order(names: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut extra: Vec<String> = names.into_iter().filter(|n| !BASE_TRES.contains(&n.as_str())).collect();
    extra.sort();
    extra.dedup();
    BASE_TRES.iter().map(|s| s.to_string()).chain(extra).collect()
}
