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
