//! The store conformance suite: the same checks on SQLite (always), PostgreSQL and MariaDB.
//! The servers come from `DROVER_TEST_POSTGRES` and `DROVER_TEST_MARIADB` (URLs of a user who
//! may create databases; `scripts/test` starts both on loopback with `scripts/sql-servers` and
//! sets them). Where one is not set the suite says so and checks the others, unless
//! `DROVER_TEST_STRICT=1` (`scripts/test`), which makes a missing server a failure.

use drover_accounting::store::Store;
use drover_proto::v1;

/// A fresh database on each configured server, dropped when the guard goes.
struct TestDb {
    url: String,
    drop_sql: Option<(String, String)>,
    _dir: Option<tempfile::TempDir>,
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Some((admin, sql)) = self.drop_sql.take() {
            // Its own thread and runtime: the guard drops inside the test's runtime.
            let _ = std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
                rt.block_on(async {
                    if let Ok(mut c) = <sqlx::AnyConnection as sqlx::Connection>::connect(&admin).await {
                        let _ = sqlx::query(&sql).execute(&mut c).await;
                    }
                });
            })
            .join();
        }
    }
}

async fn server_db(var: &str, name: &str) -> Option<TestDb> {
    let Ok(admin) = std::env::var(var) else {
        // scripts/test starts both servers (scripts/sql-servers) and sets DROVER_TEST_STRICT=1.
        if std::env::var("DROVER_TEST_STRICT").is_ok_and(|v| v == "1") {
            panic!("{var} is not set and DROVER_TEST_STRICT=1 (eval \"$(scripts/sql-servers)\" sets it)");
        }
        eprintln!("{var} not set: the {name} conformance run is skipped");
        return None;
    };
    sqlx::any::install_default_drivers();
    let db = format!("drover_conf_{}_{}", std::process::id(), rand_suffix());
    let mut c = <sqlx::AnyConnection as sqlx::Connection>::connect(&admin)
        .await
        .unwrap_or_else(|e| panic!("{var}={admin}: {e}"));
    sqlx::query(&format!("CREATE DATABASE {db}")).execute(&mut c).await.unwrap();
    let base = admin.rsplit_once('/').unwrap().0;
    Some(TestDb { url: format!("{base}/{db}"), drop_sql: Some((admin, format!("DROP DATABASE {db}"))), _dir: None })
}

fn rand_suffix() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64);
    h.finish() % 1_000_000_000
}

fn sqlite_db() -> TestDb {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("acct.db").display());
    TestDb { url, drop_sql: None, _dir: Some(dir) }
}

fn job(id: u32, uid: u32, state: &str, submit: i64, start: i64, end: i64) -> v1::AcctJob {
    v1::AcctJob {
        cluster: "lab".into(),
        info: Some(v1::JobInfo {
            job_id: id,
            spec: Some(v1::JobSpec {
                name: format!("job{id}"),
                uid,
                gid: uid,
                user: format!("u{uid}"),
                ..Default::default()
            }),
            state: state.into(),
            submit_time: submit,
            eligible_time: submit,
            start_time: start,
            end_time: end,
            partition: "cpu".into(),
            nodes: "node1".into(),
            ..Default::default()
        }),
        req_tres: "cpu=1,node=1,billing=1".into(),
        alloc_tres: "cpu=1,node=1,billing=1".into(),
        account: format!("acct{}", uid % 2),
        qos: "normal".into(),
        db_index: 0,
    }
}

fn step(job: u32, id: u32, state: &str) -> v1::AcctStep {
    v1::AcctStep {
        cluster: "lab".into(),
        restarts: 0,
        info: Some(v1::StepInfo {
            job_id: job,
            step_id: id,
            name: "hostname".into(),
            state: state.into(),
            nodes: vec![v1::StepNode { node: "node1".into(), ..Default::default() }],
            ..Default::default()
        }),
        alloc_tres: "cpu=1,mem=0,node=1".into(),
        ntasks: 1,
        ..Default::default()
    }
}

fn ids(rows: &v1::AcctRows) -> Vec<u32> {
    rows.jobs.iter().map(|j| j.info.as_ref().unwrap().job_id).collect()
}

const SCHEMA: i64 = 4;

async fn conformance(url: &str) {
    let s = Store::open(url).await.unwrap();
    assert_eq!(s.version().await.unwrap(), SCHEMA);
    // Opening again finds the schema current and changes nothing.
    drop(s);
    let s = Store::open(url).await.unwrap();
    assert_eq!(s.version().await.unwrap(), SCHEMA);

    // Submitted, then started, then ended: one row, the latest.
    let recs = |jobs: Vec<v1::AcctJob>, steps: Vec<v1::AcctStep>| v1::AcctRecords { jobs, steps, ..Default::default() };
    s.record(&recs(vec![job(1, 1000, "PENDING", 100, 0, 0), job(2, 1001, "PENDING", 110, 0, 0)], vec![]))
        .await
        .unwrap();
    s.record(&recs(vec![job(1, 1000, "RUNNING", 100, 120, 0)], vec![step(1, 0, "RUNNING")])).await.unwrap();
    s.record(&recs(
        vec![job(1, 1000, "COMPLETED", 100, 120, 200)],
        vec![step(1, 0, "COMPLETED"), step(1, 1, "FAILED")],
    ))
    .await
    .unwrap();
    // Delivered twice (a retry after a lost answer): stored once.
    s.record(&recs(vec![job(1, 1000, "COMPLETED", 100, 120, 200)], vec![step(1, 1, "FAILED")])).await.unwrap();

    let all = s.jobs(&v1::AcctQuery::default()).await.unwrap();
    assert_eq!(ids(&all), [1, 2], "in the order first recorded, once each");
    assert_eq!(all.jobs[0].info.as_ref().unwrap().state, "COMPLETED");
    assert!(all.jobs[0].db_index > 0 && all.jobs[1].db_index > all.jobs[0].db_index, "DBIndex is the store's");
    let steps: Vec<(u32, String)> = all
        .steps
        .iter()
        .map(|st| (st.info.as_ref().unwrap().step_id, st.info.as_ref().unwrap().state.clone()))
        .collect();
    assert_eq!(steps, [(0, "COMPLETED".to_string()), (1, "FAILED".to_string())]);

    // Selection by user, account, job id; -X drops steps.
    let q = |f: &dyn Fn(&mut v1::AcctQuery)| {
        let mut q = v1::AcctQuery::default();
        f(&mut q);
        q
    };
    assert_eq!(ids(&s.jobs(&q(&|q| q.uids = vec![1001])).await.unwrap()), [2]);
    assert_eq!(ids(&s.jobs(&q(&|q| q.accounts = vec!["acct0".into()])).await.unwrap()), [1]);
    let one = s
        .jobs(&q(&|q| {
            q.jobs = vec![v1::AcctJobSelector { job_id: 1, ..Default::default() }];
            q.no_steps = true;
        }))
        .await
        .unwrap();
    assert_eq!((ids(&one), one.steps.len()), (vec![1], 0));

    // Time windows as Slurm's store reads them: eligible before the end and not ended
    // before the start; with states, in that state during the window.
    assert_eq!(ids(&s.jobs(&q(&|q| (q.start, q.end) = (150, 300))).await.unwrap()), [1, 2]);
    assert_eq!(ids(&s.jobs(&q(&|q| (q.start, q.end) = (201, 300))).await.unwrap()), [2]);
    assert_eq!(ids(&s.jobs(&q(&|q| (q.start, q.end) = (0, 105))).await.unwrap()), [1]);
    let done = q(&|q| {
        (q.start, q.end) = (150, 300);
        q.states = vec!["COMPLETED".into()];
    });
    assert_eq!(ids(&s.jobs(&done).await.unwrap()), [1]);
    let pending = q(&|q| {
        (q.start, q.end) = (150, 300);
        q.states = vec!["PENDING".into()];
    });
    assert_eq!(ids(&s.jobs(&pending).await.unwrap()), [2]);

    // A requeued job has a row per run; by default only its latest is shown.
    let mut again = job(2, 1001, "RUNNING", 110, 130, 0);
    again.info.as_mut().unwrap().restarts = 1;
    let mut first = job(2, 1001, "REQUEUED", 110, 115, 125);
    first.info.as_mut().unwrap().restarts = 0;
    s.record(&recs(vec![first, again], vec![])).await.unwrap();
    let sel = |dup| {
        q(&|q| {
            q.jobs = vec![v1::AcctJobSelector { job_id: 2, ..Default::default() }];
            q.duplicates = dup;
        })
    };
    let latest = s.jobs(&sel(false)).await.unwrap();
    assert_eq!(latest.jobs.iter().map(|j| j.info.as_ref().unwrap().restarts).collect::<Vec<_>>(), [1]);
    assert_eq!(s.jobs(&sel(true)).await.unwrap().jobs.len(), 2);

    // Array tasks: `N` selects every task, `N_M` one.
    let mut t0 = job(7, 1000, "COMPLETED", 300, 301, 302);
    t0.info.as_mut().unwrap().array_job_id = 7;
    t0.info.as_mut().unwrap().array_task_id = Some(0);
    let mut t1 = job(8, 1000, "COMPLETED", 300, 301, 302);
    t1.info.as_mut().unwrap().array_job_id = 7;
    t1.info.as_mut().unwrap().array_task_id = Some(1);
    s.record(&recs(vec![t0, t1], vec![])).await.unwrap();
    let arr = |task| q(&move |q| q.jobs = vec![v1::AcctJobSelector { job_id: 7, array_task_id: task, step_id: None }]);
    assert_eq!(ids(&s.jobs(&arr(None)).await.unwrap()), [7, 8]);
    assert_eq!(ids(&s.jobs(&arr(Some(1))).await.unwrap()), [8]);

    // Administration: a new store has Slurm's defaults; the cluster that sent records was
    // added with its root associations; rows are put and deleted; new ids are assigned.
    let st = s.admin_state().await.unwrap();
    assert_eq!(st.accounts.iter().map(|a| a.name.as_str()).collect::<Vec<_>>(), ["root"]);
    assert_eq!(st.users[0].admin_level, "Administrator");
    assert_eq!((st.qos[0].id, st.qos[0].name.as_str()), (1, "normal"));
    assert_eq!(st.clusters.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["lab"]);
    assert_eq!(st.assocs.iter().map(|a| (a.id, a.user.as_str())).collect::<Vec<_>>(), [(1, ""), (2, "root")]);
    let physics = v1::AcctAssoc {
        cluster: "lab".into(),
        account: "physics".into(),
        parent: "root".into(),
        limits: Some(v1::AcctLimits { max_jobs: Some(3), ..Default::default() }),
        ..Default::default()
    };
    let put = v1::AdminState {
        accounts: vec![v1::AcctAccount { name: "physics".into(), ..Default::default() }],
        assocs: vec![physics.clone(), v1::AcctAssoc { user: "alice".into(), ..physics.clone() }],
        qos: vec![v1::AcctQos { name: "high".into(), priority: 100, ..Default::default() }],
        ..Default::default()
    };
    s.admin_put(&put).await.unwrap();
    let st = s.admin_state().await.unwrap();
    let ids: Vec<u32> = st.assocs.iter().map(|a| a.id).collect();
    assert_eq!(ids, [1, 2, 3, 4]);
    assert_eq!(st.assocs[2].limits.as_ref().unwrap().max_jobs, Some(3));
    assert_eq!((st.qos[1].id, st.qos[1].name.as_str()), (2, "high"));
    // Replaced by id; deleted by name and id.
    let mut changed = st.assocs[3].clone();
    changed.limits.as_mut().unwrap().max_jobs = Some(7);
    s.admin_put(&v1::AdminState { assocs: vec![changed], ..Default::default() }).await.unwrap();
    assert_eq!(s.admin_state().await.unwrap().assocs[3].limits.as_ref().unwrap().max_jobs, Some(7));
    s.admin_delete(&v1::AdminState {
        accounts: put.accounts.clone(),
        assocs: st.assocs[2..].to_vec(),
        qos: put.qos.clone(),
        ..Default::default()
    })
    .await
    .unwrap();
    let st = s.admin_state().await.unwrap();
    assert_eq!((st.accounts.len(), st.assocs.len(), st.qos.len()), (1, 2, 1));

    // Writers at once (the controller's records, an administrator's change) wait for each
    // other; none fails.
    let s = std::sync::Arc::new(s);
    let mut tasks = Vec::new();
    for w in 0..4u32 {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            for k in 0..10u32 {
                if w % 2 == 0 {
                    let id = 5000 + w * 100 + k;
                    s.record(&v1::AcctRecords {
                        jobs: vec![job(id, 3000, "COMPLETED", 1, 2, 3)],
                        ..Default::default()
                    })
                    .await
                    .unwrap();
                } else {
                    let q = v1::AcctQos { name: format!("q{w}_{k}"), ..Default::default() };
                    s.admin_put(&v1::AdminState { qos: vec![q], ..Default::default() }).await.unwrap();
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(s.jobs(&q(&|q| q.uids = vec![3000])).await.unwrap().jobs.len(), 20);

    // Purge: jobs that ended before the cut go, with their steps; running ones stay.
    let mut ended = step(1, 5, "COMPLETED");
    ended.info.as_mut().unwrap().end_time = 150;
    s.record(&v1::AcctRecords { steps: vec![ended], ..Default::default() }).await.unwrap();
    let before = s.jobs(&v1::AcctQuery::default()).await.unwrap();
    let (j, st) = s.purge(201, 201).await.unwrap();
    // Jobs 1 (end 200), 2's first run (125) and the 20 of the concurrent writers (3); of the
    // steps only the one that ended (150): the others recorded here have no end.
    assert_eq!((j, st), (22, 1));
    let after = s.jobs(&v1::AcctQuery::default()).await.unwrap();
    assert_eq!(before.jobs.len() - after.jobs.len(), 21, "job 2's first run was not listed (-D)");
    assert!(after
        .jobs
        .iter()
        .all(|j| j.info.as_ref().unwrap().end_time == 0 || j.info.as_ref().unwrap().end_time >= 201));

    // A large batch lands in one transaction (more rows than one statement carries).
    let many: Vec<v1::AcctJob> = (1000..1450).map(|id| job(id, 2000, "COMPLETED", 400, 401, 402)).collect();
    s.record(&recs(many, vec![])).await.unwrap();
    assert_eq!(s.jobs(&q(&|q| q.uids = vec![2000])).await.unwrap().jobs.len(), 450);
}

const Y: i64 = 1_796_169_600; // 2026-12-02T00:00:00Z
const H: i64 = 3600;

/// A run of the lab's day (captures/slurm-22.05/README.md).
fn lab_job(
    id: u32,
    (user, acct): (&str, &str),
    [eligible, start, end]: [i64; 3],
    (cpus, nodes): (u32, u32),
) -> v1::AcctJob {
    let mut j = job(id, 1000 + id, "COMPLETED", eligible, start, end);
    j.info.as_mut().unwrap().spec.as_mut().unwrap().user = user.into();
    j.account = acct.into();
    j.req_tres = format!("cpu={cpus},mem=4000M,node={nodes},billing={cpus}");
    j.alloc_tres = format!("cpu={cpus},node={nodes},billing={cpus}");
    j
}

fn lab_state(time: i64, down: &[&str]) -> v1::AcctRecords {
    v1::AcctRecords {
        cluster: "lab".into(),
        state: Some(v1::AcctClusterState {
            time,
            tres: "cpu=8,mem=16000,energy=0,node=4,billing=8".into(),
            down: down
                .iter()
                .map(|n| v1::AcctNodeEvent {
                    node: n.to_string(),
                    start: time,
                    state: "DOWN".into(),
                    reason: "maint".into(),
                    tres: "cpu=2,mem=4000,billing=2".into(),
                    ..Default::default()
                })
                .collect(),
        }),
        ..Default::default()
    }
}

fn cpu(u: &v1::AcctUsage) -> (u64, u64, u64, u64, u64) {
    let c = u.clusters.iter().find(|c| c.tres == "cpu").expect("a cpu row");
    (c.alloc, c.down, c.plan, c.idle, c.count / c.hours.max(1))
}

/// Rollups: the lab's day gives what real Slurm's rollup gave; days and months sum their
/// hours; a run reported late (after the hours were rolled up) is rolled up again.
async fn rollups(url: &str) {
    let s = Store::open(url).await.unwrap();
    s.record(&lab_state(Y - 2 * 86400, &[])).await.unwrap();
    let jobs = vec![
        lab_job(1, ("alice", "physics"), [Y - H, Y - H, Y + 9000], (2, 1)),
        lab_job(2, ("alice", "physics"), [Y + H, Y + 3 * H, Y + 4 * H], (1, 1)),
        lab_job(3, ("bob", "chem"), [Y + 10 * H, Y + 10 * H, Y + 16 * H + 1200], (4, 3)),
        lab_job(4, ("bob", "theory"), [Y + 12 * H, Y + 12 * H, Y + 23 * H + 1800], (1, 1)),
    ];
    s.record(&v1::AcctRecords { jobs, ..Default::default() }).await.unwrap();
    s.record(&lab_state(Y + 6 * H, &["node4"])).await.unwrap();
    s.record(&lab_state(Y + 8 * H, &[])).await.unwrap();
    let events = s.events("lab", Y, Y + 86400).await.unwrap();
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!((events[1].node.as_str(), events[1].start, events[1].end), ("node4", Y + 6 * H, Y + 8 * H));

    // Rolled up to 2026-12-03T05:00 (a day and five hours after the lab's day).
    let now = Y + 29 * H + 1234;
    assert!(s.rollup(now).await.unwrap() > 24);
    assert_eq!(s.rollup(now).await.unwrap(), 0, "nothing more until the next hour");
    let day = |assocs| v1::AcctUsageQuery { clusters: vec!["lab".into()], start: Y, end: Y + 86400, assocs };
    let u = s.usage(&day(true)).await.unwrap();
    assert_eq!(u.rolled_up_to["lab"], Y + 29 * H);
    // Without job 5 (below): allocated 158220 - 4020, planned 10800 - 3600.
    assert_eq!(cpu(&u), (154200, 14400, 7200, 691200 - 154200 - 14400 - 7200, 8));
    let assoc = |u: &v1::AcctUsage, a: &str, user: &str| {
        u.assocs.iter().find(|x| x.account == a && x.user == user && x.tres == "cpu").map_or(0, |x| x.alloc)
    };
    assert_eq!(assoc(&u, "physics", "alice"), 21600);
    assert_eq!(assoc(&u, "chem", "bob"), 91200);
    assert_eq!(assoc(&u, "theory", "bob"), 41400);
    // The same window from hours only (an hour off each end) plus those hours.
    let mut by_hours =
        cpu(&s.usage(&v1::AcctUsageQuery { start: Y + H, end: Y + 23 * H, ..day(false) }).await.unwrap());
    for (a, b) in [(Y, Y + H), (Y + 23 * H, Y + 24 * H)] {
        let e = cpu(&s.usage(&v1::AcctUsageQuery { start: a, end: b, ..day(false) }).await.unwrap());
        by_hours = (by_hours.0 + e.0, by_hours.1 + e.1, by_hours.2 + e.2, by_hours.3 + e.3, 8);
    }
    assert_eq!(by_hours, cpu(&u));

    // Job 5 arrives late (accounting was down): its hours are rolled up again.
    let late = lab_job(5, ("root", "chem"), [Y + 19 * H, Y + 20 * H, Y + 21 * H + 420], (1, 1));
    s.record(&v1::AcctRecords { jobs: vec![late], ..Default::default() }).await.unwrap();
    assert_eq!(s.usage(&day(false)).await.unwrap().rolled_up_to["lab"], Y + 19 * H);
    s.rollup(now).await.unwrap();
    let u = s.usage(&day(true)).await.unwrap();
    assert_eq!(cpu(&u), (158220, 14400, 10800, 507780, 8), "as Slurm rolled up the lab");
    assert_eq!(assoc(&u, "chem", "root"), 4020);
    // Ending a job that was running through rolled-up hours changes nothing before its end.
    let mut again = lab_job(4, ("bob", "theory"), [Y + 12 * H, Y + 12 * H, Y + 23 * H + 1800], (1, 1));
    again.info.as_mut().unwrap().state = "COMPLETED".into();
    s.record(&v1::AcctRecords { jobs: vec![again], ..Default::default() }).await.unwrap();
    assert_eq!(s.usage(&day(false)).await.unwrap().rolled_up_to["lab"], Y + 29 * H);
}

#[tokio::test]
async fn sqlite_rolls_up() {
    let db = sqlite_db();
    rollups(&db.url).await;
}

#[tokio::test]
async fn postgres_rolls_up() {
    if let Some(db) = server_db("DROVER_TEST_POSTGRES", "PostgreSQL").await {
        rollups(&db.url).await;
    }
}

#[tokio::test]
async fn mariadb_rolls_up() {
    if let Some(db) = server_db("DROVER_TEST_MARIADB", "MariaDB").await {
        rollups(&db.url).await;
    }
}

#[tokio::test]
async fn sqlite_conforms() {
    let db = sqlite_db();
    conformance(&db.url).await;
}

#[tokio::test]
async fn postgres_conforms() {
    if let Some(db) = server_db("DROVER_TEST_POSTGRES", "PostgreSQL").await {
        conformance(&db.url).await;
    }
}

#[tokio::test]
async fn mariadb_conforms() {
    if let Some(db) = server_db("DROVER_TEST_MARIADB", "MariaDB").await {
        conformance(&db.url).await;
    }
}

/// Records that land while the hours they fall in are being rolled up are never lost: a
/// writer records 600 jobs over thirty days while rollups work through those days again and
/// again; in the end the hours hold every job's allocation.
async fn records_mid_rollup(url: &str) {
    let s = std::sync::Arc::new(Store::open(url).await.unwrap());
    s.record(&lab_state(Y - 2 * 86400, &[])).await.unwrap();
    const DAYS: i64 = 30;
    const JOBS: u32 = 600;
    let now = Y + DAYS * 86400 + H;
    let writer = {
        let s = s.clone();
        tokio::spawn(async move {
            for k in 0..JOBS {
                let t = Y + i64::from(k) * (DAYS * 86400 / i64::from(JOBS));
                let j = lab_job(k + 1, ("alice", "physics"), [t, t, t + 1800], (1, 1));
                s.record(&v1::AcctRecords { jobs: vec![j], ..Default::default() }).await.unwrap();
            }
        })
    };
    while !writer.is_finished() {
        s.rollup(now).await.unwrap();
    }
    writer.await.unwrap();
    s.rollup(now).await.unwrap();
    let all = v1::AcctUsageQuery { clusters: vec!["lab".into()], start: Y, end: Y + DAYS * 86400, assocs: false };
    assert_eq!(cpu(&s.usage(&all).await.unwrap()).0, u64::from(JOBS) * 1800);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_keeps_records_that_land_mid_rollup() {
    let db = sqlite_db();
    records_mid_rollup(&db.url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_keeps_records_that_land_mid_rollup() {
    if let Some(db) = server_db("DROVER_TEST_POSTGRES", "PostgreSQL").await {
        records_mid_rollup(&db.url).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_keeps_records_that_land_mid_rollup() {
    if let Some(db) = server_db("DROVER_TEST_MARIADB", "MariaDB").await {
        records_mid_rollup(&db.url).await;
    }
}

/// A server database that is not there yet is made on first start, as slurmdbd makes
/// `slurm_acct_db`; a second start finds it.
async fn missing_database_is_made(var: &str, name: &str) {
    let Some(db) = server_db(var, name).await else { return };
    // Its name, unused: the guard's database is dropped and this one made by the store.
    let (base, made) = db.url.rsplit_once('/').map(|(b, d)| (b.to_string(), format!("{d}_new"))).unwrap();
    let url = format!("{base}/{made}");
    let admin = std::env::var(var).unwrap();
    let _cleanup = TestDb { url: url.clone(), drop_sql: Some((admin, format!("DROP DATABASE {made}"))), _dir: None };
    let s = Store::open(&url).await.unwrap_or_else(|e| panic!("{name}: {e}"));
    s.record(&v1::AcctRecords { jobs: vec![job(7, 1000, "COMPLETED", 100, 110, 120)], ..Default::default() })
        .await
        .unwrap();
    drop(s);
    let s = Store::open(&url).await.unwrap();
    assert_eq!(ids(&s.jobs(&v1::AcctQuery::default()).await.unwrap()), [7], "{name}");
}

#[tokio::test]
async fn postgres_database_is_made_on_first_start() {
    missing_database_is_made("DROVER_TEST_POSTGRES", "PostgreSQL").await;
}

#[tokio::test]
async fn mariadb_database_is_made_on_first_start() {
    missing_database_is_made("DROVER_TEST_MARIADB", "MariaDB").await;
}
