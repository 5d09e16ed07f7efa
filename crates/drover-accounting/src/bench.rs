//! `drover bench accounting`: how fast each store takes records and how fast `sacct` answers
//! on a year of history. Ingest goes through the store as the service writes (one transaction
//! per batch of the controller's size); queries are the real `sacct` command (this binary
//! under that name) against a real accounting service on loopback, so they include the RPC,
//! decoding and formatting a user waits for.
//!
//! ```text
//! drover bench accounting [--rows 1000000] [--runs 5] [--url URL]...
//! ```
//! Without `--url`, SQLite in a temporary directory, plus PostgreSQL and MariaDB where
//! `DROVER_BENCH_POSTGRES` / `DROVER_BENCH_MARIADB` (or the test suite's `DROVER_TEST_*`)
//! name a server user that may create databases.

use crate::store::{redact, Store};
use drover_proto::v1;
use std::sync::Arc;
use std::time::{Duration, Instant};

const DAY: i64 = 86_400;
const USERS: u32 = 1000;
const BATCH: usize = 1000;

struct Args {
    rows: u64,
    runs: usize,
    urls: Vec<String>,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut a = Args { rows: 1_000_000, runs: 5, urls: Vec::new() };
    let mut it = args.iter();
    while let Some(x) = it.next() {
        let mut val = |name: &str| it.next().cloned().ok_or_else(|| format!("{name} needs a value"));
        match x.as_str() {
            "--rows" => a.rows = val("--rows")?.parse().map_err(|_| "--rows: a number".to_string())?,
            "--runs" => a.runs = val("--runs")?.parse().map_err(|_| "--runs: a number".to_string())?,
            "--url" => a.urls.push(val("--url")?),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(a)
}

/// A realistic finished job: one of 1000 users (each in one project), ended somewhere in
/// the past year.
fn job(id: u32, now: i64) -> (v1::AcctJob, v1::AcctStep) {
    let uid = 10_000 + id % USERS;
    // Spread over the year, deterministic.
    let end = now - i64::from(id.wrapping_mul(2_654_435_761) % (365 * DAY as u32));
    let start = end - 600 - i64::from(id % 3600);
    let submit = start - i64::from(id % 900);
    let node = format!("node{:04}", id % 1024);
    let info = v1::JobInfo {
        job_id: id,
        spec: Some(v1::JobSpec {
            name: format!("train-{}", id % 50),
            uid,
            gid: uid,
            user: format!("user{}", id % USERS),
            group: format!("user{}", id % USERS),
            work_dir: format!("/home/user{}/runs", id % USERS),
            submit_line: "sbatch -N1 -n4 train.sh".into(),
            ntasks: Some(4),
            ..Default::default()
        }),
        state: if id.is_multiple_of(10) { "FAILED".into() } else { "COMPLETED".into() },
        submit_time: submit,
        eligible_time: submit,
        start_time: start,
        end_time: end,
        partition: "batch".into(),
        nodes: node.clone(),
        alloc: vec![v1::NodeAlloc {
            node: node.clone(),
            cpu_ids: vec![0, 1, 2, 3],
            mem_mb: 16000,
            ..Default::default()
        }],
        time_limit_secs: Some(86_400),
        exit_status: if id.is_multiple_of(10) { 1 << 8 } else { 0 },
        ..Default::default()
    };
    let j = v1::AcctJob {
        cluster: "bench".into(),
        info: Some(info),
        req_tres: "cpu=4,mem=16000M,node=1,billing=4".into(),
        alloc_tres: "cpu=4,mem=16000M,node=1,billing=4".into(),
        // Each user in one of 37 projects (1000 associations).
        account: format!("proj{}", (id % USERS) % 37),
        qos: "normal".into(),
        db_index: 0,
    };
    let s = v1::AcctStep {
        cluster: "bench".into(),
        restarts: 0,
        info: Some(v1::StepInfo {
            job_id: id,
            step_id: drover_model::step::BATCH_STEP,
            name: "batch".into(),
            state: "COMPLETED".into(),
            start_time: start,
            end_time: end,
            nodes: vec![v1::StepNode { node, cpu_ids: vec![0, 1, 2, 3], task_ids: vec![0], ..Default::default() }],
            ..Default::default()
        }),
        alloc_tres: "cpu=4,mem=0,node=1".into(),
        ntasks: 1,
        ..Default::default()
    };
    (j, s)
}

/// Runs this binary as command `prog` `runs` times: the median milliseconds, and the lines
/// of output (less a header's two).
async fn time_command(
    exe: &std::path::Path,
    prog: &'static str,
    args: &[String],
    conf: &std::path::Path,
    runs: usize,
) -> Result<(f64, usize), String> {
    let mut times = Vec::new();
    let mut lines = 0;
    for _ in 0..runs.max(1) {
        let (exe, conf, args) = (exe.to_path_buf(), conf.to_path_buf(), args.to_vec());
        let t = Instant::now();
        let out = tokio::task::spawn_blocking(move || {
            use std::os::unix::process::CommandExt;
            std::process::Command::new(exe).arg0(prog).args(&args).env("SLURM_CONF", conf).output()
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        lines = out.stdout.iter().filter(|b| **b == b'\n').count().saturating_sub(2);
    }
    Ok((median(times), lines))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// A fresh database on a server (dropped afterwards), or a SQLite file.
struct Db {
    name: &'static str,
    url: String,
    admin: Option<(String, String)>,
    _dir: Option<tempfile::TempDir>,
}

async fn server_db(name: &'static str, admin: &str) -> Result<Db, String> {
    sqlx::any::install_default_drivers();
    let db = format!("drover_bench_{}", std::process::id());
    let mut c = <sqlx::AnyConnection as sqlx::Connection>::connect(admin)
        .await
        .map_err(|e| format!("{}: {e}", redact(admin)))?;
    let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {db}")).execute(&mut c).await;
    sqlx::query(&format!("CREATE DATABASE {db}")).execute(&mut c).await.map_err(|e| e.to_string())?;
    let base = admin.rsplit_once('/').map_or(admin, |(b, _)| b);
    Ok(Db { name, url: format!("{base}/{db}"), admin: Some((admin.to_string(), db)), _dir: None })
}

async fn drop_db(db: &Db) {
    if let Some((admin, name)) = &db.admin {
        if let Ok(mut c) = <sqlx::AnyConnection as sqlx::Connection>::connect(admin).await {
            let _ = sqlx::query(&format!("DROP DATABASE {name}")).execute(&mut c).await;
        }
    }
}

pub fn main(args: &[String]) -> i32 {
    let a = match parse(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("drover bench accounting: {e}");
            return 2;
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build();
    let Ok(rt) = rt else { return 1 };
    match rt.block_on(run(a)) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("drover bench accounting: {e}");
            1
        }
    }
}

async fn run(a: Args) -> Result<(), String> {
    let mut dbs = Vec::new();
    if a.urls.is_empty() {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("acct.db").display());
        dbs.push(Db { name: "sqlite", url, admin: None, _dir: Some(dir) });
        for (name, vars) in [
            ("postgresql", ["DROVER_BENCH_POSTGRES", "DROVER_TEST_POSTGRES"]),
            ("mariadb", ["DROVER_BENCH_MARIADB", "DROVER_TEST_MARIADB"]),
        ] {
            if let Some(admin) = vars.iter().find_map(|v| std::env::var(v).ok()) {
                dbs.push(server_db(name, &admin).await?);
            } else {
                println!("{name}: skipped (set {} to a server user that may create databases)", vars[0]);
            }
        }
    } else {
        for u in &a.urls {
            dbs.push(Db { name: "url", url: u.clone(), admin: None, _dir: None });
        }
    }
    for db in &dbs {
        let r = bench_store(db, &a).await;
        drop_db(db).await;
        r?;
    }
    Ok(())
}

async fn bench_store(db: &Db, a: &Args) -> Result<(), String> {
    let now = jiff::Timestamp::now().as_second();
    let store = Arc::new(Store::open(&db.url).await.map_err(|e| e.to_string())?);
    println!("== {} ({})", db.name, redact(&db.url));
    // Ingest: batches as the controller sends them (jobs with their batch step).
    let t0 = Instant::now();
    let mut rates = Vec::new();
    let mut id: u32 = 1;
    let mut last_report = Instant::now();
    while u64::from(id) <= a.rows {
        let n = (a.rows - u64::from(id) + 1).min(BATCH as u64) as u32;
        let (jobs, steps): (Vec<_>, Vec<_>) = (id..id + n).map(|i| job(i, now)).unzip();
        let t = Instant::now();
        store
            .record(&v1::AcctRecords { jobs, steps, cluster: "bench".into(), ..Default::default() })
            .await
            .map_err(|e| e.to_string())?;
        rates.push(f64::from(n) / t.elapsed().as_secs_f64());
        id += n;
        if last_report.elapsed() > Duration::from_secs(10) {
            eprintln!("  {} rows...", id - 1);
            last_report = Instant::now();
        }
    }
    let total = t0.elapsed().as_secs_f64();
    println!(
        "ingest: {} job records (each with its batch step) in {total:.1} s: {:.0}/s overall, median batch {:.0}/s (target 5000/s)",
        a.rows,
        a.rows as f64 / total,
        median(rates)
    );
    // Queries: the real sacct against a real service.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let conf = dir.path().join("slurm.conf");
    drover_proto::auth::write_new_key(&dir.path().join("slurm.key")).map_err(|e| e.to_string())?;
    std::fs::write(
        &conf,
        format!(
            "ClusterName=bench\nSlurmctldHost=localhost(127.0.0.1)\nStateSaveLocation={}/state\n\
             AuthType=auth/slurm\n\
             AccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageHost=127.0.0.1\n\
             AccountingStoragePort={port}\nNodeName=node[0000-1023] CPUs=4 RealMemory=16000\n\
             PartitionName=batch Nodes=ALL Default=YES\n",
            dir.path().display()
        ),
    )
    .map_err(|e| e.to_string())?;
    let parsed = drover_model::conf::parse_file(&conf).map_err(|e| e.to_string())?;
    let auth = std::sync::Arc::new(
        drover_proto::auth::Auth::new(&parsed.auth, &parsed.path, true).map_err(|e| e.to_string())?,
    );
    let svc = crate::server::Service { store: store.clone(), host: "bench".into(), auth: auth.clone() };
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(
                v1::accounting_server::AccountingServer::new(svc)
                    .max_decoding_message_size(256 << 20)
                    .max_encoding_message_size(256 << 20),
            )
            .serve_with_incoming(drover_proto::auth::accept_authenticated(listener, auth, "accounting", |_, _| {})),
    );
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let ids: Vec<String> = (0..100u64).map(|k| (1 + k * (a.rows.max(100) / 100)).to_string()).collect();
    let uid = (10_000 + 7 % USERS).to_string();
    let queries: [(&str, Vec<String>); 3] = [
        ("sacct -u U -S now-30days", vec!["-u".into(), uid.clone(), "-S".into(), "now-30days".into()]),
        ("sacct -j <100 ids>", vec!["-j".into(), ids.join(",")]),
        ("sacct -a -S now-1day -X", vec!["-a".into(), "-S".into(), "now-1day".into(), "-X".into()]),
    ];
    for (what, args) in queries {
        let (ms, lines) =
            time_command(&exe, "sacct", &args, &conf, a.runs).await.map_err(|e| format!("{what}: {e}"))?;
        println!("{what}: median {ms:.0} ms over {} runs ({lines} lines) (target 1000 ms)", a.runs);
    }
    // Rollup of the year: the cluster's resources since before the first job, then hours,
    // days and months, as `drover accounting` does on its first start over old records.
    let state = v1::AcctClusterState {
        time: now - 366 * DAY,
        tres: "cpu=4096,mem=16384000,energy=0,node=1024,billing=4096,fs/disk=0,vmem=0,pages=0".into(),
        down: Vec::new(),
    };
    let recs = v1::AcctRecords { cluster: "bench".into(), state: Some(state), ..Default::default() };
    store.record(&recs).await.map_err(|e| e.to_string())?;
    let t = Instant::now();
    let hours = store.rollup(now).await.map_err(|e| e.to_string())?;
    println!(
        "rollup: {hours} hours of {} job records in {:.1} s (once; then an hour at a time)",
        a.rows,
        t.elapsed().as_secs_f64()
    );
    let reports: [(&str, &[&str]); 3] = [
        ("sreport cluster utilization (a year)", &["cluster", "utilization"]),
        ("sreport cluster AccountUtilizationByUser (a year)", &["cluster", "AccountUtilizationByUser"]),
        ("sreport user TopUsage (a year)", &["user", "TopUsage"]),
    ];
    for (what, words) in reports {
        let mut args: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        args.extend(["start=now-365days".to_string(), "end=now".to_string()]);
        let (ms, lines) =
            time_command(&exe, "sreport", &args, &conf, a.runs).await.map_err(|e| format!("{what}: {e}"))?;
        println!("{what}: median {ms:.0} ms over {} runs ({lines} lines) (target 1000 ms)", a.runs);
    }
    server.abort();
    Ok(())
}
