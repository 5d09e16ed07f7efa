//! Accounting limits (`AccountingStorageEnforce=limits`): from accounting's associations and
//! QoS to the scheduler's limit groups ([`drover_sched::limits`]) and to the checks made at
//! submit. Groups are named by what they count, so they survive changes to the rows:
//!
//! ```text
//!  a:ACCOUNT            an account's association: Grp* over its whole subtree
//!  u:ACCOUNT/USER/PART  a user's association: its own Grp*
//!  m:ACCOUNT/USER/PART  the same jobs: MaxJobs (its own, else inherited from its accounts)
//!  q:QOS                a QoS: Grp*
//!  qu:QOS/USER          a user's jobs in a QoS: MaxJobsPerUser, MaxTRESPerUser
//! ```

use crate::acct::Admin;
use drover_model::conf::Config;
use drover_model::state::PendingReason as R;
use drover_proto::v1;
use drover_sched::limits::{Caps, Usage};
use std::collections::HashMap;
use std::sync::Arc;

/// A TRES list (`cpu=8,mem=16G,node=2,gres/gpu=4`) as counts (memory in MB).
pub(crate) fn tres(t: &str) -> HashMap<String, u64> {
    drover_model::memsize::tres_counts(t).into_iter().collect()
}

/// Caps from `Grp*`-style limits, with the reasons of an association or a QoS.
fn grp_caps(l: &v1::AcctLimits, qos: bool) -> Caps {
    let t = tres(&l.grp_tres);
    let r = |assoc: R, q: R| if qos { q } else { assoc };
    Caps {
        jobs: l.grp_jobs.map(|n| (n, r(R::AssocGrpJobsLimit, R::QOSGrpJobsLimit))),
        cpus: t.get("cpu").map(|n| (*n, r(R::AssocGrpCpuLimit, R::QOSGrpCpuLimit))),
        nodes: t.get("node").map(|n| (*n, r(R::AssocGrpNodeLimit, R::QOSGrpNodeLimit))),
        mem_mb: t.get("mem").map(|n| (*n, r(R::AssocGrpMemLimit, R::QOSGrpMemLimit))),
        gpus: t.get("gres/gpu").map(|n| (*n, r(R::AssocGrpGRES, R::QOSGrpGRES))),
    }
}

fn user_key(prefix: &str, a: &v1::AcctAssoc) -> Arc<str> {
    Arc::from(format!("{prefix}:{}/{}/{}", a.account, a.user, a.partition))
}

/// The associations a job counts in: its user's association (its partition's, else the
/// general one), then its account's and that account's ancestors up to `root`.
pub(crate) fn chain<'a>(
    cfg: &Config,
    st: &'a v1::AdminState,
    account: &str,
    user: &str,
    partition: &str,
) -> Vec<&'a v1::AcctAssoc> {
    let here = |a: &&v1::AcctAssoc| a.cluster == cfg.cluster_name;
    let mut out = Vec::new();
    let mine =
        |p: &str| st.assocs.iter().filter(here).find(|a| a.account == account && a.user == user && a.partition == p);
    if let Some(u) = mine(partition).or_else(|| mine("")) {
        out.push(u);
    }
    let mut acct = account.to_string();
    for _ in 0..64 {
        let Some(a) = st.assocs.iter().filter(here).find(|a| a.user.is_empty() && a.account == acct) else { break };
        out.push(a);
        if a.parent.is_empty() || a.parent == a.account {
            break;
        }
        acct = a.parent.clone();
    }
    out
}

/// A `Max*` limit of a user's association, its own or the nearest of its accounts'.
fn inherited<T>(chain: &[&v1::AcctAssoc], f: impl Fn(&v1::AcctLimits) -> Option<T>) -> Option<T> {
    chain.iter().find_map(|a| a.limits.as_ref().and_then(&f))
}

/// Every limit group of this cluster and its caps.
pub fn caps(cfg: &Config, st: &Admin) -> Vec<(Arc<str>, Caps)> {
    let mut out = Vec::new();
    for a in st.assocs.iter().filter(|a| a.cluster == cfg.cluster_name) {
        let l = a.limits.clone().unwrap_or_default();
        if a.user.is_empty() {
            out.push((Arc::from(format!("a:{}", a.account)), grp_caps(&l, false)));
            continue;
        }
        out.push((user_key("u", a), grp_caps(&l, false)));
        let ch = chain(cfg, st, &a.account, &a.user, &a.partition);
        let max_jobs = inherited(&ch, |l| l.max_jobs);
        out.push((user_key("m", a), Caps { jobs: max_jobs.map(|n| (n, R::AssocMaxJobsLimit)), ..Default::default() }));
    }
    for q in &st.qos {
        out.push((Arc::from(format!("q:{}", q.name)), grp_caps(&q.limits.clone().unwrap_or_default(), true)));
        let per_user = tres(&q.max_tres_per_user);
        let c = Caps {
            jobs: q.max_jobs_per_user.map(|n| (n, R::QOSMaxJobsPerUserLimit)),
            cpus: per_user.get("cpu").map(|n| (*n, R::QOSMaxCpuPerUserLimit)),
            nodes: per_user.get("node").map(|n| (*n, R::QOSMaxNodePerUserLimit)),
            ..Default::default()
        };
        if !c.is_empty() {
            for u in &st.users {
                out.push((Arc::from(format!("qu:{}/{}", q.name, u.name)), c.clone()));
            }
        }
    }
    out.retain(|(_, c)| !c.is_empty());
    out
}

/// What a job is: its account, user, partition, QoS, and explicit time limit (seconds).
pub struct JobPolicy<'a> {
    pub account: &'a str,
    pub user: &'a str,
    pub partition: &'a str,
    pub qos: &'a str,
    pub time_limit: Option<u64>,
}

impl<'a> JobPolicy<'a> {
    pub fn of(spec: &'a drover_model::job::JobSpec) -> JobPolicy<'a> {
        JobPolicy {
            account: spec.account.as_deref().unwrap_or(&spec.user),
            user: &spec.user,
            partition: spec.partitions.first().map_or("", String::as_str),
            qos: spec.qos.as_deref().unwrap_or("normal"),
            time_limit: spec.time_limit.flatten(),
        }
    }
}

/// The groups a job counts in (those that have caps), and a per-job limit it exceeds by
/// itself, if any.
pub fn job_limits(
    cfg: &Config,
    st: &Admin,
    keys: &std::collections::HashSet<Arc<str>>,
    j: &JobPolicy,
    need: &Usage,
) -> (Vec<Arc<str>>, Option<R>) {
    let ch = chain(cfg, st, j.account, j.user, j.partition);
    let mut groups: Vec<Arc<str>> = Vec::new();
    for a in &ch {
        if a.user.is_empty() {
            groups.push(Arc::from(format!("a:{}", a.account)));
        } else {
            groups.push(user_key("u", a));
            groups.push(user_key("m", a));
        }
    }
    groups.push(Arc::from(format!("q:{}", j.qos)));
    groups.push(Arc::from(format!("qu:{}/{}", j.qos, j.user)));
    groups.retain(|g| keys.contains(g));
    // Per-job limits: the association's (inherited) and the QoS's.
    let max_tres = inherited(&ch, |l| Some(l.max_tres.clone()).filter(|t| !t.is_empty())).unwrap_or_default();
    let t = tres(&max_tres);
    let mut policy = None;
    if t.get("cpu").is_some_and(|m| need.cpus > *m) {
        policy = Some(R::AssocMaxCpuPerJobLimit);
    } else if t.get("node").is_some_and(|m| need.nodes > *m) {
        policy = Some(R::AssocMaxNodePerJobLimit);
    } else if let (Some(w), Some(limit)) = (inherited(&ch, |l| l.max_wall_mins), j.time_limit) {
        if limit > w * 60 {
            policy = Some(R::AssocMaxWallDurationPerJobLimit);
        }
    }
    if policy.is_none() {
        // MaxTRESPerNode: what the job needs on each of its nodes.
        let per_node =
            inherited(&ch, |l| Some(l.max_tres_per_node.clone()).filter(|t| !t.is_empty())).unwrap_or_default();
        policy = over_per_node(
            &tres(&per_node),
            need,
            [R::AssocMaxCpuPerNode, R::AssocMaxMemPerNode, R::AssocMaxGRESPerNode],
        );
    }
    if policy.is_none() {
        if let Some(l) = st.qos.iter().find(|q| q.name == j.qos).and_then(|q| q.limits.as_ref()) {
            let t = tres(&l.max_tres_per_node);
            policy = over_per_node(&t, need, [R::QOSMaxCpuPerNode, R::QOSMaxMemoryPerNode, R::QOSMaxGRESPerNode]);
        }
    }
    if policy.is_none() {
        if let Some(q) = st.qos.iter().find(|q| q.name == j.qos) {
            let l = q.limits.clone().unwrap_or_default();
            let t = tres(&l.max_tres);
            if t.get("cpu").is_some_and(|m| need.cpus > *m) {
                policy = Some(R::QOSMaxCpuPerJobLimit);
            } else if t.get("node").is_some_and(|m| need.nodes > *m) {
                policy = Some(R::QOSMaxNodePerJobLimit);
            } else if l.max_wall_mins.zip(j.time_limit).is_some_and(|(w, limit)| limit > w * 60) {
                policy = Some(R::QOSMaxWallDurationPerJobLimit);
            }
        }
    }
    (groups, policy)
}

/// A `MaxTRESPerNode` the job goes over on some node (its CPUs, memory and GPUs spread over
/// its minimum node count): the reason, of (CPU, memory, GRES).
fn over_per_node(limit: &HashMap<String, u64>, need: &Usage, reasons: [R; 3]) -> Option<R> {
    let nodes = need.nodes.max(1);
    let per = |v: u64| v.div_ceil(nodes);
    [("cpu", per(need.cpus)), ("mem", per(need.mem_mb)), ("gres/gpu", per(need.gpus))]
        .iter()
        .zip(reasons)
        .find(|((name, v), _)| limit.get(*name).is_some_and(|m| v > m))
        .map(|(_, r)| r)
}

/// `GrpTRESMins` limits are enforced: usage moving may hold or free waiting jobs.
pub fn minutes_limits(cfg: &Config, st: Option<&Admin>) -> bool {
    cfg.enforce.limits
        && st.is_some_and(|a| a.assocs.iter().any(|x| x.limits.as_ref().is_some_and(|l| !l.grp_tres_mins.is_empty())))
}

/// A waiting job's accounting limits as the scheduler holds them: the limit groups (of
/// [`caps`], named in `keys`) it counts in, and a per-job limit it exceeds by itself — with the
/// multifactor priority, `GrpTRESMins` against the `usage` fairshare keeps too (as in Slurm).
/// Shared with `drover sim`'s replay ([`crate::replay`]).
pub fn apply_limits(
    cfg: &Config,
    st: &Admin,
    keys: &std::collections::HashSet<Arc<str>>,
    usage: &crate::fairshare::Usage,
    sj: &mut drover_sched::SchedJob,
    spec: &drover_model::job::JobSpec,
) {
    let j = JobPolicy::of(spec);
    let (groups, mut policy) = job_limits(cfg, st, keys, &j, &sj.need());
    if policy.is_none() && cfg.priority.multifactor {
        policy = over_minutes(cfg, st, &j, &sj.need(), usage);
    }
    if !groups.is_empty() || policy.is_some() {
        let m = sj.more_mut();
        m.limits = groups;
        m.policy = policy;
    }
}

/// `GrpTRESMins` of the job's associations, against their decayed usage (an account's: its
/// subtree's): the reason of the first it is over, or that it would go over by itself (its
/// request times its time limit).
pub fn over_minutes(
    cfg: &Config,
    st: &Admin,
    j: &JobPolicy,
    need: &Usage,
    usage: &crate::fairshare::Usage,
) -> Option<R> {
    const REASONS: [R; 5] = [
        R::AssocGrpCPUMinutesLimit,
        R::AssocGrpMemMinutes,
        R::AssocGrpNodeMinutes,
        R::AssocGrpBillingMinutes,
        R::AssocGrpGRESMinutes,
    ];
    let request = [need.cpus, need.mem_mb, need.nodes, need.cpus, need.gpus];
    for a in chain(cfg, st, j.account, j.user, j.partition) {
        let Some(l) = a.limits.as_ref().filter(|l| !l.grp_tres_mins.is_empty()) else { continue };
        let limit = tres(&l.grp_tres_mins);
        let u = if a.user.is_empty() {
            let accounts = subtree(cfg, st, &a.account);
            usage.minutes(usage.tres.keys().filter(|(acct, _)| accounts.contains(acct)))
        } else {
            usage.minutes([&(a.account.clone(), a.user.clone())])
        };
        for (k, name) in crate::fairshare::TRES.iter().enumerate() {
            let Some(&m) = limit.get(*name) else { continue };
            let asks = j.time_limit.map(|secs| request[k] as f64 * secs as f64 / 60.0);
            if u[k] >= m as f64 || asks.is_some_and(|x| x > m as f64) {
                return Some(REASONS[k]);
            }
        }
    }
    None
}

/// Submit limits: how many unfinished jobs each may have, by the test a job of the group
/// passes. `MaxSubmitJobs` (the user's association, inherited), `GrpSubmitJobs` (each account
/// up the chain, over its subtree, and the user's association), the QoS's
/// `MaxSubmitJobsPerUser`.
pub struct SubmitLimit {
    pub max: u32,
    /// (account, user (empty: any), partition (None: any)) a counted job must match; for an
    /// account, any account of its subtree (`subtree`).
    pub account: Option<String>,
    pub subtree: Vec<String>,
    pub user: Option<String>,
    pub qos: Option<String>,
}

pub fn submit_limits(cfg: &Config, st: &Admin, j: &JobPolicy) -> Vec<SubmitLimit> {
    let ch = chain(cfg, st, j.account, j.user, j.partition);
    let mut out = Vec::new();
    if let Some(max) = inherited(&ch, |l| l.max_submit) {
        out.push(SubmitLimit {
            max,
            account: Some(j.account.into()),
            subtree: Vec::new(),
            user: Some(j.user.into()),
            qos: None,
        });
    }
    for a in &ch {
        let Some(max) = a.limits.as_ref().and_then(|l| l.grp_submit) else { continue };
        if a.user.is_empty() {
            out.push(SubmitLimit { max, account: None, subtree: subtree(cfg, st, &a.account), user: None, qos: None });
        } else {
            out.push(SubmitLimit {
                max,
                account: Some(a.account.clone()),
                subtree: Vec::new(),
                user: Some(a.user.clone()),
                qos: None,
            });
        }
    }
    if let Some(max) = st.qos.iter().find(|q| q.name == j.qos).and_then(|q| q.max_submit_per_user) {
        out.push(SubmitLimit {
            max,
            account: None,
            subtree: Vec::new(),
            user: Some(j.user.into()),
            qos: Some(j.qos.into()),
        });
    }
    out
}

/// An account and every account below it.
pub(crate) fn subtree(cfg: &Config, st: &Admin, root: &str) -> Vec<String> {
    let mut out = vec![root.to_string()];
    let mut i = 0;
    while i < out.len() && out.len() < 100_000 {
        let parent = out[i].clone();
        for a in st.assocs.iter().filter(|a| a.cluster == cfg.cluster_name && a.user.is_empty() && a.parent == parent) {
            if a.account != parent && !out.contains(&a.account) {
                out.push(a.account.clone());
            }
        }
        i += 1;
    }
    out
}

impl SubmitLimit {
    /// Whether an unfinished job (account, user, QoS) counts against this limit.
    pub fn counts(&self, account: &str, user: &str, qos: &str) -> bool {
        self.account.as_deref().is_none_or(|a| a == account)
            && (self.subtree.is_empty() || self.subtree.iter().any(|a| a == account))
            && self.user.as_deref().is_none_or(|u| u == user)
            && self.qos.as_deref().is_none_or(|q| q == qos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assoc(account: &str, user: &str, parent: &str, l: v1::AcctLimits) -> v1::AcctAssoc {
        v1::AcctAssoc {
            cluster: "lab".into(),
            account: account.into(),
            user: user.into(),
            parent: parent.into(),
            limits: Some(l),
            qos: vec!["normal".into()],
            ..Default::default()
        }
    }

    #[test]
    fn groups_caps_and_per_job_limits_follow_the_association_tree() {
        let cfg = Config { cluster_name: "lab".into(), ..Default::default() };
        let st = v1::AdminState {
            assocs: vec![
                assoc("root", "", "", Default::default()),
                assoc(
                    "physics",
                    "",
                    "root",
                    v1::AcctLimits {
                        grp_tres: "cpu=4".into(),
                        max_jobs: Some(2),
                        max_wall_mins: Some(60),
                        ..Default::default()
                    },
                ),
                assoc("theory", "", "physics", v1::AcctLimits { grp_jobs: Some(3), ..Default::default() }),
                assoc("theory", "alice", "theory", Default::default()),
            ],
            users: vec![v1::AcctUser { name: "alice".into(), ..Default::default() }],
            qos: vec![v1::AcctQos { name: "normal".into(), max_jobs_per_user: Some(5), ..Default::default() }],
            ..Default::default()
        };
        let st = Admin::new("lab", st);
        let caps = caps(&cfg, &st);
        let keys: std::collections::HashSet<Arc<str>> = caps.iter().map(|(k, _)| k.clone()).collect();
        let cap = |k: &str| caps.iter().find(|(g, _)| &**g == k).map(|(_, c)| c.clone());
        assert_eq!(cap("a:physics").unwrap().cpus, Some((4, R::AssocGrpCpuLimit)));
        assert_eq!(cap("a:theory").unwrap().jobs, Some((3, R::AssocGrpJobsLimit)));
        // MaxJobs is inherited from the account above.
        assert_eq!(cap("m:theory/alice/").unwrap().jobs, Some((2, R::AssocMaxJobsLimit)));
        assert_eq!(cap("qu:normal/alice").unwrap().jobs, Some((5, R::QOSMaxJobsPerUserLimit)));
        assert!(cap("a:root").is_none(), "no caps, no group");
        let j = JobPolicy { account: "theory", user: "alice", partition: "cpu", qos: "normal", time_limit: Some(3600) };
        let need = Usage { jobs: 1, cpus: 2, nodes: 1, ..Default::default() };
        let (groups, policy) = job_limits(&cfg, &st, &keys, &j, &need);
        let names: Vec<&str> = groups.iter().map(|g| &**g).collect();
        assert_eq!(names, ["m:theory/alice/", "a:theory", "a:physics", "qu:normal/alice"]);
        assert_eq!(policy, None);
        // MaxWall (inherited, 60 minutes) holds a longer job for good.
        let long = JobPolicy { time_limit: Some(7200), ..j };
        assert_eq!(job_limits(&cfg, &st, &keys, &long, &need).1, Some(R::AssocMaxWallDurationPerJobLimit));
    }
}
