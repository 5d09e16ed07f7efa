//! Accounting's shared rules (the service and sacctmgr both apply them).

use crate::v1;
use std::collections::BTreeSet;

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

/// Associations in Slurm's display order: per cluster, depth first from `root`, each
/// account's own association, then its users', then its sub-accounts (each by name);
/// with the depth of each (for `tree`).
pub fn assoc_order(st: &v1::AdminState) -> Vec<(usize, &v1::AcctAssoc)> {
    let mut out = Vec::new();
    let clusters: BTreeSet<&str> = st.assocs.iter().map(|a| a.cluster.as_str()).collect();
    fn walk<'a>(
        st: &'a v1::AdminState,
        cluster: &str,
        account: &str,
        depth: usize,
        out: &mut Vec<(usize, &'a v1::AcctAssoc)>,
        seen: &mut BTreeSet<String>,
    ) {
        if !seen.insert(account.to_string()) {
            return;
        }
        let here = |a: &&v1::AcctAssoc| a.cluster == cluster && a.account == account;
        if let Some(a) = st.assocs.iter().filter(here).find(|a| a.user.is_empty()) {
            out.push((depth, a));
        }
        let mut users: Vec<&v1::AcctAssoc> = st.assocs.iter().filter(here).filter(|a| !a.user.is_empty()).collect();
        users.sort_by(|a, b| (&a.user, &a.partition).cmp(&(&b.user, &b.partition)));
        out.extend(users.into_iter().map(|a| (depth + 1, a)));
        let mut children: Vec<&str> = st
            .assocs
            .iter()
            .filter(|a| a.cluster == cluster && a.user.is_empty() && a.parent == account && a.account != account)
            .map(|a| a.account.as_str())
            .collect();
        children.sort_unstable();
        for c in children {
            walk(st, cluster, c, depth + 1, out, seen);
        }
    }
    for c in clusters {
        walk(st, c, "root", 0, &mut out, &mut BTreeSet::new());
    }
    out
}
