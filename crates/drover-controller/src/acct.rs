//! Delivery of job and step records to `drover accounting`: the owner keeps the outbox
//! ([`crate::state::AcctOutbox`]); this task takes batches from it, turns them into records
//! off the owner's thread, sends them, and tells the owner what was delivered. When
//! accounting or its database is down, scheduling goes on and the outbox waits.

use crate::log;
use crate::owner::Msg;
use crate::state::{Gone, Job};
use crate::view;
use drover_model::conf::Config;
use drover_model::state::JobState;
use drover_model::state::PendingReason;
use drover_model::step::BATCH_STEP;
use drover_proto::jobinfo;
use drover_proto::v1::{self, accounting_client::AccountingClient};
use std::sync::Arc;
use std::time::Duration;

/// Jobs per batch: one store transaction.
const BATCH_JOBS: usize = 5000;

/// The pause after a delivery, by how much it carried: what comes meanwhile goes in the next
/// one. A few records (a job submitted, one ending) are followed by a short pause, so `sacct`
/// trails `squeue` by little more than one store transaction; a big batch (a storm of
/// submissions) by a longer one, so the store's transactions stay few and large and the
/// controller's throughput is not spent on them: 2 ms a record, between 10 and 250 ms.
fn delivery_gap(records: usize) -> Duration {
    Duration::from_millis((records as u64 * 2).clamp(10, 250))
}

/// With nothing to send, the delivery waits for the owner's wake-up; this long at most (a
/// safety net: the owner wakes it after every commit that leaves records to send).
const IDLE_CHECK: Duration = Duration::from_secs(1);

/// A batch taken from the outbox: jobs as they are now, and the first `gone.len()` records
/// that left the state.
#[derive(Default)]
pub struct Batch {
    pub jobs: Vec<Arc<Job>>,
    pub gone: Vec<Gone>,
}

impl Batch {
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty() && self.gone.is_empty()
    }
}

fn gpus_tracked(cfg: &Config) -> bool {
    cfg.accounting_storage_tres.iter().any(|t| t == "gres/gpu")
}

/// A job's record as it is now.
pub fn job_record(cfg: &Config, j: &Job) -> v1::AcctJob {
    let mut info = view::job_info(j);
    info.steps.clear();
    let waits = matches!(j.status.reason, PendingReason::Dependency | PendingReason::JobArrayTaskLimit);
    if (j.status.hold.is_some() || waits) && j.status.alloc.is_none() {
        // A held job is not eligible to run (Slurm records no eligible time for it), nor is
        // one cancelled while held, waiting on a dependency or its array's throttle:
        // sacct's windows leave it out, as Slurm's do.
        info.eligible_time = 0;
    }
    let tracked = gpus_tracked(cfg);
    let spec = jobinfo::spec(&info);
    v1::AcctJob {
        cluster: cfg.cluster_name.clone(),
        req_tres: jobinfo::req_tres(&info, tracked, partition_node_mem(cfg, &info.partition)),
        alloc_tres: if info.alloc.is_empty() { String::new() } else { jobinfo::tres(&info, tracked) },
        account: jobinfo::account(spec).to_string(),
        qos: jobinfo::qos(spec).to_string(),
        db_index: 0,
        info: Some(info),
    }
}

/// The memory of a node of `partition` (its smallest), what a job that names none asks for
/// on each node.
fn partition_node_mem(cfg: &Config, partition: &str) -> u64 {
    let Some(p) = cfg.partitions.iter().find(|p| p.name == partition) else { return 0 };
    cfg.nodes.iter().filter(|n| p.nodes.contains(&n.name)).map(|n| n.real_memory_mb).min().unwrap_or(0)
}

/// `cpu=N,mem=M,node=K` of a step's nodes, in Slurm's order.
fn step_tres(nodes: &[v1::StepNode]) -> String {
    let cpus: usize = nodes.iter().map(|n| n.cpu_ids.len()).sum();
    let mem: u64 = nodes.iter().map(|n| n.mem_mb).sum();
    let mem = if mem == 0 { "0".into() } else { drover_model::memsize::fmt_tres_mb(mem) };
    format!("cpu={cpus},mem={mem},node={}", nodes.len())
}

/// `usage` (an encoded `StatReply`) with `more` tasks added.
pub fn add_usage(usage: &[u8], more: Vec<v1::TaskUsage>) -> Vec<u8> {
    use drover_proto::prost::Message;
    let mut r = v1::StatReply::decode(usage).unwrap_or_default();
    r.tasks.extend(more);
    r.encode_to_vec()
}

fn tasks_of(usage: &[u8]) -> Vec<v1::TaskUsage> {
    use drover_proto::prost::Message;
    v1::StatReply::decode(usage).map(|r| r.tasks).unwrap_or_default()
}

fn step_record(cfg: &Config, restarts: u32, info: v1::StepInfo, submit_line: &str, usage: &[u8]) -> v1::AcctStep {
    let ntasks = info.nodes.iter().map(|n| n.task_ids.len() as u32).sum();
    v1::AcctStep {
        cluster: cfg.cluster_name.clone(),
        restarts,
        alloc_tres: step_tres(&info.nodes),
        ntasks,
        submit_line: submit_line.to_string(),
        usage: tasks_of(usage),
        info: Some(info),
    }
}

/// The batch script's step (`N.batch`) of a started batch job: on the first node, with that
/// node's CPUs; its state follows the job's end as Slurm records it.
fn batch_step(cfg: &Config, j: &Job, job_state: &str) -> Option<v1::AcctStep> {
    if !j.batch || j.status.start_time == 0 {
        return None;
    }
    let a = j.status.alloc.as_ref()?.nodes.first()?;
    let state = match job_state {
        "PENDING" | "RUNNING" | "SUSPENDED" | "COMPLETING" | "CONFIGURING" => "RUNNING",
        "COMPLETED" => "COMPLETED",
        "OUT_OF_MEMORY" => "OUT_OF_MEMORY",
        "FAILED" => "FAILED",
        "NODE_FAIL" => "NODE_FAIL",
        // Killed: by scancel, its time limit, or a requeue.
        _ => "CANCELLED",
    };
    let node = v1::StepNode {
        node: a.node.clone(),
        cpu_ids: a.cpu_ids.clone(),
        mem_mb: 0,
        task_ids: vec![0],
        gres: Vec::new(),
    };
    let info = v1::StepInfo {
        job_id: j.id,
        step_id: BATCH_STEP,
        name: "batch".into(),
        state: state.into(),
        start_time: j.status.start_time,
        nodes: vec![node],
        exit_status: j.status.exit_status,
        end_time: if state == "RUNNING" { 0 } else { j.status.end_time },
        ..Default::default()
    };
    Some(step_record(cfg, j.status.restarts, info, "", j.status.batch_usage.as_deref().unwrap_or_default()))
}

/// The records of a batch.
pub fn records(cfg: &Config, b: &Batch) -> v1::AcctRecords {
    let mut out = v1::AcctRecords { cluster: cfg.cluster_name.clone(), ..Default::default() };
    let job = |out: &mut v1::AcctRecords, j: &Job, rec: v1::AcctJob| {
        let state = rec.info.as_ref().map_or(String::new(), |i| i.state.clone());
        out.steps.extend(batch_step(cfg, j, &state));
        out.jobs.push(rec);
    };
    for g in &b.gone {
        match g {
            Gone::Job(j) => job(&mut out, j, job_record(cfg, j)),
            Gone::Requeued { job: j, end_time } => {
                let mut rec = job_record(cfg, j);
                if let Some(i) = rec.info.as_mut() {
                    // A run that preemption ended, that its node's failure ended, or a requeue.
                    // A scrontab job's run: the state it ended in (cron::cron_again).
                    i.state = match j.status.state_desc.as_str() {
                        s @ ("PREEMPTED" | "NODE_FAIL" | "COMPLETED" | "FAILED" | "TIMEOUT" | "OUT_OF_MEMORY") => s,
                        _ => "REQUEUED",
                    }
                    .into();
                    i.end_time = *end_time;
                }
                let mut ended = (**j).clone();
                ended.status.end_time = *end_time;
                job(&mut out, &ended, rec);
            }
            Gone::Step { job: j, step, state, exit_status, end_time } => {
                let mut info = view::step_info(j, step);
                info.state = if *state == JobState::Cancelled { "CANCELLED".into() } else { state.name().into() };
                info.exit_status = *exit_status;
                info.end_time = *end_time;
                out.steps.push(step_record(cfg, j.status.restarts, info, &step.submit_line, &step.usage));
            }
        }
    }
    for j in &b.jobs {
        job(&mut out, j, job_record(cfg, j));
        for s in j.running_steps() {
            out.steps.push(step_record(cfg, j.status.restarts, view::step_info(j, s), &s.submit_line, &s.usage));
        }
    }
    out
}

/// Delivers the outbox to accounting at `addr` for as long as the controller runs, as soon
/// as the owner has committed something to send (`wake`).
pub async fn deliver(
    cfg: Arc<Config>,
    tx: std::sync::mpsc::Sender<Msg>,
    addr: String,
    auth: Arc<drover_proto::auth::Auth>,
    wake: Arc<tokio::sync::Notify>,
) {
    let mut client: Option<AccountingClient<tonic::transport::Channel>> = None;
    let mut backoff = Duration::from_millis(500);
    let mut down_since: Option<std::time::Instant> = None;
    loop {
        // Connected first: while accounting is down nothing is taken or converted, so the
        // outage costs the controller nothing but this retry.
        if client.is_none() {
            match drover_proto::auth::connect_authenticated(&addr, &auth, "accounting").await {
                Ok(ch) => {
                    client = Some(
                        AccountingClient::new(ch)
                            .max_encoding_message_size(256 << 20)
                            .max_decoding_message_size(256 << 20),
                    )
                }
                Err(e) => {
                    if down_since.is_none() {
                        log(&format!("accounting at {addr} is unreachable ({e}); records wait in the outbox"));
                        down_since = Some(std::time::Instant::now());
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                    continue;
                }
            }
        }
        let (rtx, rrx) = tokio::sync::oneshot::channel();
        if tx.send(Msg::AcctTake { max: BATCH_JOBS, reply: rtx }).is_err() {
            return;
        }
        let Ok(Ok(batch)) = rrx.await else { return };
        if batch.is_empty() {
            let _ = tokio::time::timeout(IDLE_CHECK, wake.notified()).await;
            continue;
        }
        let recs = {
            let cfg = cfg.clone();
            let b = batch;
            match tokio::task::spawn_blocking(move || (records(&cfg, &b), b)).await {
                Ok(r) => r,
                Err(_) => return,
            }
        };
        let (recs, batch) = recs;
        let c = client.as_mut().expect("invariant: connected above");
        match c.record(recs).await {
            Ok(_) => {
                if let Some(t) = down_since.take() {
                    log(&format!("accounting at {addr} is back after {}s", t.elapsed().as_secs()));
                }
                backoff = Duration::from_millis(500);
                let full = batch.jobs.len() >= BATCH_JOBS;
                let gap = delivery_gap(batch.jobs.len() + batch.gone.len());
                let _ = tx.send(Msg::AcctDone { jobs: batch.jobs, gone: batch.gone.len() });
                // Records that came during this delivery wait out the gap to be sent in one
                // transaction (one fsync in the store), already durable in the journal.
                if !full {
                    tokio::time::sleep(gap).await;
                }
            }
            Err(e) => {
                if down_since.is_none() {
                    log(&format!(
                        "accounting at {addr} did not take records: {}; they wait in the outbox",
                        e.message()
                    ));
                    down_since = Some(std::time::Instant::now());
                }
                client = None;
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
}

/// How far back the controller reads accounting's jobs at start for run-time predictions.
const RUN_HISTORY: i64 = 7 * 86400;

/// Once at start: the run times of the cluster's jobs that ended in the last week, from
/// accounting, oldest end first, handed to the owner (predictions learn from them). Tried
/// until accounting answers.
pub async fn learn_runs(
    cfg: Arc<Config>,
    tx: std::sync::mpsc::Sender<Msg>,
    addr: String,
    auth: Arc<drover_proto::auth::Auth>,
) {
    let mut backoff = Duration::from_millis(500);
    loop {
        match recent_runs(&cfg, &addr, &auth).await {
            Ok(runs) => {
                let _ = tx.send(Msg::RunHistory(runs));
                return;
            }
            Err(_) => {
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(30));
            }
        }
    }
}

async fn recent_runs(cfg: &Config, addr: &str, auth: &drover_proto::auth::Auth) -> Result<Vec<(u32, i64)>, String> {
    let ch = drover_proto::auth::connect_authenticated(addr, auth, "accounting").await.map_err(|e| e.to_string())?;
    let mut c = AccountingClient::new(ch).max_decoding_message_size(256 << 20);
    let now = jiff::Timestamp::now().as_second();
    let q = v1::AcctQuery {
        clusters: vec![cfg.cluster_name.clone()],
        states: ["COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED"]
            .map(String::from)
            .to_vec(),
        start: now - RUN_HISTORY,
        end: now,
        no_steps: true,
        ..Default::default()
    };
    let mut stream = c.jobs(q).await.map_err(|e| e.message().to_string())?.into_inner();
    let mut ended: Vec<(i64, u32, u32, i64)> = Vec::new();
    while let Some(rows) = stream.message().await.map_err(|e| e.message().to_string())? {
        for j in rows.jobs {
            let Some(i) = j.info else { continue };
            if let Some(secs) = drover_sched::predict::run_time(i.start_time, i.end_time, i.suspended_secs) {
                ended.push((i.end_time, i.job_id, i.spec.as_ref().map_or(0, |s| s.uid), secs));
            }
        }
    }
    Ok(drover_sched::predict::in_end_order(ended))
}

/// How often the controller reads accounting's associations and QoS (what sacctmgr
/// changed reaches submissions within this).
const ADMIN_REFRESH: Duration = Duration::from_secs(2);

/// Registers the cluster with accounting, then follows its associations and QoS: each read
/// is kept in `cache` (so a controller restarted while accounting is down still knows them)
/// and handed to the owner.
pub async fn follow_admin(
    cfg: Arc<Config>,
    tx: std::sync::mpsc::Sender<Msg>,
    addr: String,
    cache: std::path::PathBuf,
    view: Arc<arc_swap::ArcSwap<view::View>>,
    auth: Arc<drover_proto::auth::Auth>,
) {
    use drover_proto::prost::Message;
    // The cluster state accounting last took (None: not yet, or since it was unreachable).
    let mut sent: Option<v1::AcctClusterState> = None;
    loop {
        if let Ok(ch) = drover_proto::auth::connect_authenticated(&addr, &auth, "accounting").await {
            let mut c = AccountingClient::new(ch).max_decoding_message_size(256 << 20);
            let now = jiff::Timestamp::now().as_second();
            let v = view.load();
            // Before the first publication the view has no nodes: nothing to tell yet.
            let state = (!v.nodes.is_empty()).then(|| cluster_state(&cfg, &v, now));
            let changed = match (&sent, &state) {
                (None, _) => true,
                (Some(a), Some(b)) => !same_state(a, b),
                (Some(_), None) => false,
            };
            if changed {
                // Also registers the cluster (with its root associations) the first time.
                let rec = v1::AcctRecords {
                    cluster: cfg.cluster_name.clone(),
                    state: state.clone(),
                    control_port: u32::from(cfg.slurmctld_port),
                    rpc: drover_model::SLURM_PROTOCOL_VERSION,
                    ..Default::default()
                };
                if c.record(rec).await.is_ok() && state.is_some() {
                    sent = state;
                }
            }
            if let Ok(st) = c.admin_get(v1::Empty {}).await {
                let st = st.into_inner();
                let tmp = cache.with_extension("tmp");
                if tokio::fs::write(&tmp, st.encode_to_vec()).await.is_ok() {
                    let _ = tokio::fs::rename(&tmp, &cache).await;
                }
                if tx.send(Msg::AcctAdmin(Box::new(st))).is_err() {
                    return;
                }
            }
        } else {
            sent = None;
        }
        tokio::time::sleep(ADMIN_REFRESH).await;
    }
}

/// The cluster's resources (its nodes but future ones) and its down and drained nodes, as
/// accounting keeps them for sreport: TRES counts with memory in MB.
pub fn cluster_state(cfg: &Config, v: &view::View, now: i64) -> v1::AcctClusterState {
    use drover_model::state::NodeBase;
    let tracked = gpus_tracked(cfg);
    let node_tres = |n: &drover_model::conf::NodeConf| -> [u64; 3] {
        [u64::from(n.cpus), n.real_memory_mb, jobinfo::gpu_count(&n.gres)]
    };
    let mut total = [0u64; 4];
    let mut down = Vec::new();
    for n in v.nodes.iter().filter(|n| n.state.base != NodeBase::Future) {
        let [cpus, mem, gpus] = node_tres(&n.conf);
        total[0] += cpus;
        total[1] += mem;
        total[2] += 1;
        total[3] += gpus;
        if n.state.base == NodeBase::Down || n.state.drain {
            let mut tres = format!("cpu={cpus},mem={mem},billing={cpus}");
            if tracked && gpus > 0 {
                tres.push_str(&format!(",gres/gpu={gpus}"));
            }
            down.push(v1::AcctNodeEvent {
                node: n.conf.name.clone(),
                start: if n.reason_time > 0 { n.reason_time } else { now },
                end: 0,
                state: n.state.scontrol(),
                reason: n.reason.clone(),
                reason_uid: n.reason_uid,
                tres,
            });
        }
    }
    let [cpus, mem, nodes, gpus] = total;
    let mut tres = format!("cpu={cpus},mem={mem},energy=0,node={nodes},billing={cpus},fs/disk=0,vmem=0,pages=0");
    if tracked {
        tres.push_str(&format!(",gres/gpu={gpus}"));
    }
    v1::AcctClusterState { time: now, tres, down }
}

/// Whether two states differ in what accounting keeps (not in when they were taken).
fn same_state(a: &v1::AcctClusterState, b: &v1::AcctClusterState) -> bool {
    let key = |e: &v1::AcctNodeEvent| (e.node.clone(), e.state.clone(), e.reason.clone(), e.tres.clone());
    a.tres == b.tres && a.down.iter().map(key).eq(b.down.iter().map(key))
}

/// The associations and QoS read last time (see [`follow_admin`]).
pub fn load_admin_cache(cache: &std::path::Path) -> Option<v1::AdminState> {
    use drover_proto::prost::Message;
    v1::AdminState::decode(&std::fs::read(cache).ok()?[..]).ok()
}

/// Accounting's associations and QoS as the controller reads them, with this cluster's
/// associations and the users indexed: submissions look them up without a scan.
#[derive(Debug, PartialEq)]
pub struct Admin {
    pub st: v1::AdminState,
    assocs: std::collections::HashMap<(String, String, String), usize>,
    users: std::collections::HashMap<String, usize>,
}

impl Admin {
    pub fn new(cluster: &str, st: v1::AdminState) -> Admin {
        let assocs = st
            .assocs
            .iter()
            .enumerate()
            .filter(|(_, a)| a.cluster == cluster)
            .map(|(i, a)| ((a.account.clone(), a.user.clone(), a.partition.clone()), i))
            .collect();
        let users = st.users.iter().enumerate().map(|(i, u)| (u.name.clone(), i)).collect();
        Admin { st, assocs, users }
    }

    /// This cluster's association of `user` (empty: the account's own) in `account` for
    /// `partition` (empty: every partition).
    pub fn assoc(&self, account: &str, user: &str, partition: &str) -> Option<&v1::AcctAssoc> {
        let k = (account.to_string(), user.to_string(), partition.to_string());
        self.assocs.get(&k).map(|i| &self.st.assocs[*i])
    }

    pub fn user(&self, name: &str) -> Option<&v1::AcctUser> {
        self.users.get(name).map(|i| &self.st.users[*i])
    }
}

impl std::ops::Deref for Admin {
    type Target = v1::AdminState;
    fn deref(&self) -> &v1::AdminState {
        &self.st
    }
}

/// The account and QoS a job runs under: the ones it asked for, else its user's default
/// account and that association's default QoS (else `normal`). With
/// `AccountingStorageEnforce=associations` the user must have an association with the
/// account on this cluster (for the partition, or for all of them); with `qos`, the QoS must
/// be one that association allows. Errors in Slurm's words.
pub fn resolve_account(
    cfg: &Config,
    admin: Option<&Admin>,
    user: &str,
    partition: &str,
    account: Option<&str>,
    qos: Option<&str>,
) -> Result<(String, String), &'static str> {
    const BAD_ACCOUNT: &str = "Invalid account or account/partition combination specified";
    let enforce = cfg.enforce;
    let Some(st) = admin else {
        if enforce.associations {
            return Err(BAD_ACCOUNT);
        }
        return Ok((account.unwrap_or(user).to_string(), qos.unwrap_or("normal").to_string()));
    };
    let default_account = st.user(user).map(|u| u.default_account.as_str());
    let account = match account.or(default_account.filter(|a| !a.is_empty())) {
        Some(a) => a.to_string(),
        None if enforce.associations => return Err(BAD_ACCOUNT),
        None => user.to_string(),
    };
    let assoc = st.assoc(&account, user, partition).or_else(|| st.assoc(&account, user, ""));
    if enforce.associations && assoc.is_none() {
        return Err(BAD_ACCOUNT);
    }
    let qos = match qos {
        Some(q) => q.to_string(),
        None => assoc.map(|a| a.default_qos.clone()).filter(|q| !q.is_empty()).unwrap_or_else(|| "normal".into()),
    };
    let known = st.qos.iter().any(|q| q.name == qos);
    if !known || enforce.qos && !assoc.is_some_and(|a| a.qos.contains(&qos)) {
        return Err("Invalid qos specification");
    }
    Ok((account, qos))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> v1::AdminState {
        let mut assocs = drover_proto::acct::root_assocs("lab");
        let physics = v1::AcctAssoc {
            cluster: "lab".into(),
            account: "physics".into(),
            user: "alice".into(),
            qos: vec!["normal".into(), "high".into()],
            default_qos: "high".into(),
            ..Default::default()
        };
        assocs.push(physics.clone());
        assocs.push(v1::AcctAssoc {
            account: "chem".into(),
            partition: "gpu".into(),
            default_qos: String::new(),
            ..physics
        });
        v1::AdminState {
            users: vec![
                v1::AcctUser { name: "alice".into(), default_account: "physics".into(), ..Default::default() },
                v1::AcctUser { name: "root".into(), default_account: "root".into(), ..Default::default() },
            ],
            qos: vec![
                v1::AcctQos { name: "normal".into(), ..Default::default() },
                v1::AcctQos { name: "high".into(), ..Default::default() },
                v1::AcctQos { name: "low".into(), ..Default::default() },
            ],
            assocs,
            ..Default::default()
        }
    }

    #[test]
    fn accounts_and_qos_resolve_and_are_enforced() {
        let mut cfg = Config { cluster_name: "lab".into(), ..Default::default() };
        let st = Admin::new("lab", state());
        let r = |cfg: &Config, user: &str, part: &str, a: Option<&str>, q: Option<&str>| {
            resolve_account(cfg, Some(&st), user, part, a, q)
        };
        // Without enforcement: defaults apply, anything known goes.
        assert_eq!(r(&cfg, "alice", "cpu", None, None), Ok(("physics".into(), "high".into())));
        assert_eq!(r(&cfg, "bob", "cpu", None, None), Ok(("bob".into(), "normal".into())));
        assert_eq!(r(&cfg, "alice", "cpu", None, Some("nosuch")), Err("Invalid qos specification"));
        cfg.enforce = drover_model::conf::AccountingEnforce::parse("associations,qos").unwrap();
        let bad = Err("Invalid account or account/partition combination specified");
        assert_eq!(r(&cfg, "bob", "cpu", None, None), bad);
        assert_eq!(r(&cfg, "alice", "cpu", Some("root"), None), bad);
        // A partition's own association, or one for every partition.
        assert_eq!(r(&cfg, "alice", "cpu", Some("chem"), None), bad);
        assert_eq!(r(&cfg, "alice", "gpu", Some("chem"), None), Ok(("chem".into(), "normal".into())));
        assert_eq!(r(&cfg, "alice", "cpu", None, Some("low")), Err("Invalid qos specification"));
        assert_eq!(r(&cfg, "root", "cpu", None, None), Ok(("root".into(), "normal".into())));
        // Nothing read from accounting yet: enforcement refuses rather than guess.
        assert_eq!(resolve_account(&cfg, None, "root", "cpu", None, None), bad);
    }
}
