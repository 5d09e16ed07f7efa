//! The SQL store: one schema and one code path over SQLite, PostgreSQL and MariaDB/MySQL
//! (sqlx's `Any` driver), with the few places where their dialects differ spelled out here.
//!
//! Each job run and each step is one row, keyed by what identifies it (cluster, job id, run,
//! step id). A record is written whole each time it changes (an upsert), so a record delivered
//! twice is stored once: the controller's outbox may retry without fear of duplicates. The
//! columns hold what queries filter and reports sum; `record` holds the whole message, so a
//! field added to the wire reaches `sacct` without a migration.

use drover_proto::prost::Message;
use drover_proto::v1;
use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::{AnyPool, Row};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
    MySql,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("accounting database {url}: {source}")]
    Connect { url: String, source: sqlx::Error },
    #[error("accounting database: {0}")]
    Sql(#[from] sqlx::Error),
    #[error("accounting database: stored record of {what} does not decode: {source}")]
    Decode { what: String, source: drover_proto::prost::DecodeError },
    #[error("accounting database has schema version {found}; this Drover knows up to {known} (upgrade Drover)")]
    TooNew { found: i64, known: i64 },
}

/// One schema change, in each dialect. Changes only ever add (columns, indexes, tables), so
/// they apply online: a running Drover of the previous version keeps working meanwhile.
struct Migration {
    version: i64,
    what: &'static str,
    sql: fn(Dialect) -> Vec<String>,
}

fn ddl(d: Dialect) -> (&'static str, &'static str) {
    match d {
        Dialect::Sqlite => ("INTEGER PRIMARY KEY", "BLOB"),
        Dialect::Postgres => ("BIGSERIAL PRIMARY KEY", "BYTEA"),
        Dialect::MySql => ("BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY", "LONGBLOB"),
    }
}

const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        what: "job and step records",
        sql: |d| {
            let (serial, blob) = ddl(d);
            vec![
                format!(
                    "CREATE TABLE IF NOT EXISTS jobs (
                    seq {serial},
                    cluster VARCHAR(64) NOT NULL,
                    job_id BIGINT NOT NULL,
                    restarts BIGINT NOT NULL,
                    array_job_id BIGINT NOT NULL,
                    array_task_id BIGINT NOT NULL,
                    name VARCHAR(255) NOT NULL,
                    uid BIGINT NOT NULL,
                    gid BIGINT NOT NULL,
                    user_name VARCHAR(64) NOT NULL,
                    account VARCHAR(64) NOT NULL,
                    qos VARCHAR(64) NOT NULL,
                    partition_name VARCHAR(64) NOT NULL,
                    state VARCHAR(32) NOT NULL,
                    exit_status BIGINT NOT NULL,
                    time_submit BIGINT NOT NULL,
                    time_eligible BIGINT NOT NULL,
                    time_start BIGINT NOT NULL,
                    time_end BIGINT NOT NULL,
                    nodelist TEXT NOT NULL,
                    nnodes BIGINT NOT NULL,
                    ncpus BIGINT NOT NULL,
                    req_tres TEXT NOT NULL,
                    alloc_tres TEXT NOT NULL,
                    record {blob} NOT NULL
                )"
                ),
                "CREATE UNIQUE INDEX IF NOT EXISTS jobs_key ON jobs (cluster, job_id, restarts)".into(),
                format!(
                    "CREATE TABLE IF NOT EXISTS steps (
                    seq {serial},
                    cluster VARCHAR(64) NOT NULL,
                    job_id BIGINT NOT NULL,
                    restarts BIGINT NOT NULL,
                    step_id BIGINT NOT NULL,
                    name VARCHAR(255) NOT NULL,
                    state VARCHAR(32) NOT NULL,
                    exit_status BIGINT NOT NULL,
                    time_start BIGINT NOT NULL,
                    time_end BIGINT NOT NULL,
                    nodelist TEXT NOT NULL,
                    nnodes BIGINT NOT NULL,
                    ntasks BIGINT NOT NULL,
                    alloc_tres TEXT NOT NULL,
                    record {blob} NOT NULL
                )"
                ),
                "CREATE UNIQUE INDEX IF NOT EXISTS steps_key ON steps (cluster, job_id, restarts, step_id)".into(),
            ]
        },
    },
    Migration {
        version: 2,
        what: "indexes for sacct's selections, each led by the cluster",
        sql: |_| {
            [
                "jobs_c_end ON jobs (cluster, time_end)",
                "jobs_c_start ON jobs (cluster, time_start)",
                "jobs_c_uid_end ON jobs (cluster, uid, time_end)",
                "jobs_c_account_end ON jobs (cluster, account, time_end)",
                "jobs_c_array ON jobs (cluster, array_job_id, array_task_id)",
            ]
            .iter()
            .map(|ix| format!("CREATE INDEX IF NOT EXISTS {ix}"))
            .collect()
        },
    },
    Migration {
        version: 3,
        what: "clusters, accounts, users, QoS and associations (sacctmgr)",
        sql: |d| {
            let (_, blob) = ddl(d);
            let named = |t: &str| {
                format!(
                    "CREATE TABLE IF NOT EXISTS {t} (name VARCHAR(64) NOT NULL PRIMARY KEY, record {blob} NOT NULL)"
                )
            };
            vec![
                named("acct_clusters"),
                named("acct_accounts"),
                named("acct_users"),
                format!(
                    "CREATE TABLE IF NOT EXISTS acct_qos (name VARCHAR(64) NOT NULL PRIMARY KEY, id BIGINT NOT NULL, \
                     record {blob} NOT NULL)"
                ),
                format!(
                    "CREATE TABLE IF NOT EXISTS acct_assocs (
                        id BIGINT NOT NULL PRIMARY KEY,
                        cluster VARCHAR(64) NOT NULL,
                        account VARCHAR(64) NOT NULL,
                        user_name VARCHAR(64) NOT NULL,
                        partition_name VARCHAR(64) NOT NULL,
                        record {blob} NOT NULL
                    )"
                ),
                "CREATE UNIQUE INDEX IF NOT EXISTS acct_assocs_key ON acct_assocs \
                 (cluster, account, user_name, partition_name)"
                    .into(),
            ]
        },
    },
    Migration {
        version: 4,
        what: "node events and usage rolled up by hour, day and month (sreport)",
        sql: |_| {
            vec![
                "CREATE TABLE IF NOT EXISTS events (
                    cluster VARCHAR(64) NOT NULL,
                    node_name VARCHAR(255) NOT NULL,
                    time_start BIGINT NOT NULL,
                    time_end BIGINT NOT NULL,
                    state VARCHAR(64) NOT NULL,
                    reason VARCHAR(255) NOT NULL,
                    reason_uid BIGINT NOT NULL,
                    tres VARCHAR(255) NOT NULL
                )"
                .into(),
                "CREATE UNIQUE INDEX IF NOT EXISTS events_key ON events (cluster, node_name, time_start)".into(),
                "CREATE INDEX IF NOT EXISTS events_c_end ON events (cluster, time_end)".into(),
                // period: h(our), d(ay), m(onth); hours: how many hourly rows a row sums.
                "CREATE TABLE IF NOT EXISTS usage_cluster (
                    cluster VARCHAR(64) NOT NULL,
                    period VARCHAR(1) NOT NULL,
                    time_start BIGINT NOT NULL,
                    tres VARCHAR(64) NOT NULL,
                    tres_count BIGINT NOT NULL,
                    hours BIGINT NOT NULL,
                    alloc_secs BIGINT NOT NULL,
                    down_secs BIGINT NOT NULL,
                    pdown_secs BIGINT NOT NULL,
                    idle_secs BIGINT NOT NULL,
                    plan_secs BIGINT NOT NULL,
                    over_secs BIGINT NOT NULL
                )"
                .into(),
                "CREATE UNIQUE INDEX IF NOT EXISTS usage_cluster_key ON usage_cluster (cluster, period, time_start, tres)"
                    .into(),
                "CREATE TABLE IF NOT EXISTS usage_assoc (
                    cluster VARCHAR(64) NOT NULL,
                    period VARCHAR(1) NOT NULL,
                    time_start BIGINT NOT NULL,
                    account VARCHAR(64) NOT NULL,
                    user_name VARCHAR(64) NOT NULL,
                    tres VARCHAR(64) NOT NULL,
                    alloc_secs BIGINT NOT NULL
                )"
                .into(),
                "CREATE UNIQUE INDEX IF NOT EXISTS usage_assoc_key ON usage_assoc \
                 (cluster, period, time_start, account, user_name, tres)"
                    .into(),
                // Up to where each period is rolled up: hours before last_end are final.
                "CREATE TABLE IF NOT EXISTS rollup_state (
                    cluster VARCHAR(64) NOT NULL,
                    period VARCHAR(1) NOT NULL,
                    last_end BIGINT NOT NULL,
                    PRIMARY KEY (cluster, period)
                )"
                .into(),
                // The rollup walks jobs by the time they became eligible.
                "CREATE INDEX IF NOT EXISTS jobs_c_eligible ON jobs (cluster, time_eligible)".into(),
            ]
        },
    },
];

/// A value bound to a statement.
#[derive(Debug, Clone)]
pub(crate) enum Arg {
    I(i64),
    S(String),
    B(Vec<u8>),
}

pub struct Store {
    pub(crate) pool: AnyPool,
    dialect: Dialect,
    pub(crate) cal: crate::rollup::Calendar,
    /// Woken when records change hours already rolled up (or a cluster has none yet).
    pub(crate) rollup_wanted: tokio::sync::Notify,
    /// Held by `record` over its transaction and by the rollup from reading an hour chunk's
    /// jobs and events to writing its rows: a record can never land between the two (it
    /// would be in neither the rolled-up hours nor, its hours being ahead of the mark then,
    /// a reason to roll them up again).
    pub(crate) rollup_lock: tokio::sync::Mutex<()>,
}

const JOB_COLS: &[&str] = &[
    "cluster",
    "job_id",
    "restarts",
    "array_job_id",
    "array_task_id",
    "name",
    "uid",
    "gid",
    "user_name",
    "account",
    "qos",
    "partition_name",
    "state",
    "exit_status",
    "time_submit",
    "time_eligible",
    "time_start",
    "time_end",
    "nodelist",
    "nnodes",
    "ncpus",
    "req_tres",
    "alloc_tres",
    "record",
];
const JOB_KEY: &[&str] = &["cluster", "job_id", "restarts"];

const STEP_COLS: &[&str] = &[
    "cluster",
    "job_id",
    "restarts",
    "step_id",
    "name",
    "state",
    "exit_status",
    "time_start",
    "time_end",
    "nodelist",
    "nnodes",
    "ntasks",
    "alloc_tres",
    "record",
];
const STEP_KEY: &[&str] = &["cluster", "job_id", "restarts", "step_id"];

/// Rows per INSERT statement (well under every store's limit on bound values).
const ROWS_PER_STATEMENT: usize = 200;

pub(crate) fn i(v: impl Into<i64>) -> Arg {
    Arg::I(v.into())
}

fn job_args(j: &v1::AcctJob) -> Vec<Arg> {
    let info = j.info.clone().unwrap_or_default();
    let spec = info.spec.clone().unwrap_or_default();
    let cpus = info.alloc.iter().map(|a| a.cpu_ids.len() as i64).sum::<i64>();
    vec![
        Arg::S(j.cluster.clone()),
        i(info.job_id),
        i(info.restarts),
        i(info.array_job_id),
        i(info.array_task_id.map_or(-1, i64::from)),
        Arg::S(spec.name.clone()),
        i(spec.uid),
        i(spec.gid),
        Arg::S(spec.user.clone()),
        Arg::S(j.account.clone()),
        Arg::S(j.qos.clone()),
        Arg::S(info.partition.clone()),
        Arg::S(info.state.clone()),
        i(info.exit_status),
        i(info.submit_time),
        // A run that started on nodes has been eligible (the rollup walks runs by this
        // column); a job cancelled before it ever was (held) stays out of sacct's windows.
        i(if info.eligible_time == 0 && info.start_time > 0 && !info.alloc.is_empty() {
            info.start_time
        } else {
            info.eligible_time
        }),
        i(info.start_time),
        i(info.end_time),
        Arg::S(info.nodes.clone()),
        i(info.alloc.len() as i64),
        i(cpus),
        Arg::S(j.req_tres.clone()),
        Arg::S(j.alloc_tres.clone()),
        Arg::B(j.encode_to_vec()),
    ]
}

fn step_args(s: &v1::AcctStep) -> Vec<Arg> {
    let info = s.info.clone().unwrap_or_default();
    let nodes: Vec<&str> = info.nodes.iter().map(|n| n.node.as_str()).collect();
    vec![
        Arg::S(s.cluster.clone()),
        i(info.job_id),
        i(s.restarts),
        i(info.step_id),
        Arg::S(info.name.clone()),
        Arg::S(info.state.clone()),
        i(info.exit_status),
        i(info.start_time),
        i(info.end_time),
        Arg::S(drover_model::hostlist::Hostlist::from_iter(nodes.iter().copied()).ranged()),
        i(nodes.len() as i64),
        i(s.ntasks),
        Arg::S(s.alloc_tres.clone()),
        Arg::B(s.encode_to_vec()),
    ]
}

/// A condition and its values.
type Cond = (String, Vec<Arg>);

/// Jobs that were in one of `states` at some time in [start, end], as Slurm's store asks
/// (`as_mysql_jobacct_process.c`); with no states, jobs eligible to run in the window. As
/// alternatives, each a range on one of the cluster-led indexes: a store's planner answers
/// each from its index, where one condition with ORs inside would scan the table.
fn window_alternatives(states: &[String], start: i64, end: i64) -> Vec<Cond> {
    let c = |sql: &str, args: Vec<Arg>| (sql.to_string(), args);
    if states.is_empty() {
        // `+time_eligible`: not a range for the rollup's index on eligible times (SQLite's
        // planner, without statistics, would take it over the user's or the end's index).
        return vec![
            c("time_end >= ? AND +time_eligible > 0 AND +time_eligible <= ?", vec![i(start), i(end)]),
            c("time_end = 0 AND +time_eligible > 0 AND +time_eligible <= ?", vec![i(end)]),
        ];
    }
    let mut any = Vec::new();
    for s in states {
        match s.as_str() {
            // Eligible before the window's end, and then: started in it, cancelled in it
            // before it started, or still waiting.
            "PENDING" => {
                let eligible = "+time_eligible > 0 AND +time_eligible < ?";
                any.push(c(&format!("time_start > ? AND {eligible}"), vec![i(start), i(end)]));
                any.push(c(&format!("time_start = 0 AND time_end > ? AND {eligible}"), vec![i(start), i(end)]));
                any.push(c(
                    &format!("time_start = 0 AND time_end = 0 AND state = ? AND {eligible}"),
                    vec![Arg::S("PENDING".into()), i(end)],
                ));
            }
            "RUNNING" | "SUSPENDED" | "REQUEUED" | "RESIZING" => {
                any.push(c("time_end >= ? AND time_start > 0 AND time_start <= ?", vec![i(start), i(end)]));
                any.push(c("time_end = 0 AND time_start > 0 AND time_start <= ?", vec![i(end)]));
            }
            other => any.push(c(
                "state = ? AND time_end >= ? AND time_end <= ?",
                vec![Arg::S(other.to_string()), i(start), i(end)],
            )),
        }
    }
    any
}

/// `-j` as alternatives: job ids (or arrays) by id, array tasks by their array and task.
fn job_alternatives(sels: &[v1::AcctJobSelector]) -> Vec<Cond> {
    let mut ids: Vec<u32> = sels.iter().filter(|s| s.array_task_id.is_none()).map(|s| s.job_id).collect();
    ids.sort_unstable();
    ids.dedup();
    let mut any = Vec::new();
    for chunk in ids.chunks(500) {
        let marks = vec!["?"; chunk.len()].join(", ");
        any.push((format!("job_id IN ({marks})"), chunk.iter().map(|id| i(*id)).collect()));
        any.push((format!("array_job_id IN ({marks})"), chunk.iter().map(|id| i(*id)).collect()));
    }
    for s in sels {
        if let Some(t) = s.array_task_id {
            any.push(("array_job_id = ? AND array_task_id = ?".into(), vec![i(s.job_id), i(t)]));
        }
    }
    any
}

/// Whether connecting failed because the URL's database does not exist (MySQL/MariaDB 1049,
/// PostgreSQL 3D000).
fn missing_database(e: &sqlx::Error) -> bool {
    let Some(d) = e.as_database_error() else { return false };
    d.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>().is_some_and(|m| m.number() == 1049)
        || d.code().is_some_and(|c| c == "3D000")
}

/// `url` without its database: (the server's URL, with PostgreSQL's maintenance database
/// `postgres`; the database's name).
fn server_and_database(url: &str) -> Option<(String, String)> {
    let (base, query) = url.split_once('?').map_or((url, None), |(b, q)| (b, Some(q)));
    let after_scheme = base.find("://")? + 3;
    let slash = after_scheme + base[after_scheme..].find('/')?;
    let name = &base[slash + 1..];
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '$') {
        return None;
    }
    let admin = if base.starts_with("postgres") { "postgres" } else { "" };
    let server = format!("{}/{admin}{}", &base[..slash], query.map(|q| format!("?{q}")).unwrap_or_default());
    Some((server, name.to_string()))
}

async fn create_database(url: &str, dialect: Dialect) -> Result<(), sqlx::Error> {
    use sqlx::{Connection, Executor};
    let Some((server, name)) = server_and_database(url) else {
        return Err(sqlx::Error::Configuration(
            "the database's name is not a plain identifier: create it first".into(),
        ));
    };
    let mut c = sqlx::AnyConnection::connect(&server).await?;
    let q = match dialect {
        Dialect::Postgres => format!("CREATE DATABASE \"{name}\""),
        _ => format!("CREATE DATABASE IF NOT EXISTS `{name}`"),
    };
    match c.execute(q.as_str()).await {
        // Another server made it meanwhile.
        Err(e) if e.as_database_error().and_then(|d| d.code()).is_some_and(|c| c == "42P04") => Ok(()),
        r => r.map(|_| ()),
    }
}

impl Store {
    /// Opens (creating a SQLite file, or the server's database, where missing) and brings the
    /// schema up to date.
    pub async fn open(url: &str) -> Result<Store, StoreError> {
        sqlx::any::install_default_drivers();
        let dialect = if url.starts_with("sqlite:") {
            Dialect::Sqlite
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            Dialect::Postgres
        } else {
            Dialect::MySql
        };
        let shown = redact(url);
        let mut opts = AnyPoolOptions::new().max_connections(if dialect == Dialect::Sqlite { 4 } else { 8 });
        if dialect == Dialect::Sqlite {
            // WAL: readers (sacct) never wait for the writer; FULL: a commit is on disk
            // before it is acknowledged. Writers queue on the file's lock rather than fail.
            opts = opts.after_connect(|c, _| {
                Box::pin(async move {
                    use sqlx::Executor;
                    c.execute("PRAGMA journal_mode=WAL").await?;
                    c.execute("PRAGMA synchronous=FULL").await?;
                    c.execute("PRAGMA busy_timeout=10000").await?;
                    // Up to 256 MiB of pages cached: a year's indexes stay in memory.
                    c.execute("PRAGMA cache_size=-262144").await?;
                    Ok(())
                })
            });
        }
        let pool = match opts.clone().connect(url).await {
            // The database is not there yet: made, as slurmdbd makes its own on first start
            // (the user needs the right to create it: `GRANT ALL ON slurm_acct_db.*`).
            Err(e) if missing_database(&e) && dialect != Dialect::Sqlite => {
                create_database(url, dialect)
                    .await
                    .map_err(|source| StoreError::Connect { url: shown.clone(), source })?;
                opts.connect(url).await
            }
            r => r,
        };
        let pool = pool.map_err(|source| StoreError::Connect { url: shown, source })?;
        let s = Store {
            pool,
            dialect,
            cal: crate::rollup::Calendar::local(),
            rollup_wanted: Default::default(),
            rollup_lock: Default::default(),
        };
        s.migrate().await?;
        Ok(s)
    }

    /// A transaction that writes. On SQLite it takes the write lock at once (`BEGIN
    /// IMMEDIATE`): a deferred one that reads first could not upgrade while another writer
    /// holds the lock, and would fail with `database is locked` instead of waiting.
    pub(crate) async fn write_tx(&self) -> Result<sqlx::Transaction<'static, sqlx::Any>, StoreError> {
        Ok(match self.dialect {
            Dialect::Sqlite => self.pool.begin_with("BEGIN IMMEDIATE").await?,
            _ => self.pool.begin().await?,
        })
    }

    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// The schema version this store has.
    pub async fn version(&self) -> Result<i64, StoreError> {
        let row = sqlx::query("SELECT MAX(version) FROM drover_schema").fetch_one(&self.pool).await?;
        Ok(row.try_get::<Option<i64>, _>(0)?.unwrap_or(0))
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        sqlx::query(
            "CREATE TABLE IF NOT EXISTS drover_schema (version BIGINT NOT NULL, what VARCHAR(255) NOT NULL, applied BIGINT NOT NULL)",
        )
        .execute(&self.pool)
        .await?;
        let have = self.version().await?;
        let known = MIGRATIONS.last().map_or(0, |m| m.version);
        if have > known {
            return Err(StoreError::TooNew { found: have, known });
        }
        for m in MIGRATIONS.iter().filter(|m| m.version > have) {
            // DDL is not transactional on MariaDB; every statement is idempotent instead
            // (IF NOT EXISTS), so a change cut short is finished by the next start.
            for stmt in (m.sql)(self.dialect) {
                sqlx::query(&stmt).execute(&self.pool).await?;
            }
            self.run(
                "INSERT INTO drover_schema (version, what, applied) VALUES (?, ?, ?)",
                vec![i(m.version), Arg::S(m.what.into()), i(jiff::Timestamp::now().as_second())],
            )
            .await?;
        }
        Ok(())
    }

    /// `?` placeholders as the dialect writes them.
    pub(crate) fn sql(&self, q: &str) -> String {
        if self.dialect != Dialect::Postgres {
            return q.to_string();
        }
        let mut out = String::with_capacity(q.len() + 16);
        let mut n = 0;
        for c in q.chars() {
            if c == '?' {
                n += 1;
                out.push('$');
                out.push_str(&n.to_string());
            } else {
                out.push(c);
            }
        }
        out
    }

    pub(crate) fn bind<'q>(
        mut q: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>,
        args: Vec<Arg>,
    ) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>> {
        for a in args {
            q = match a {
                Arg::I(v) => q.bind(v),
                Arg::S(v) => q.bind(v),
                Arg::B(v) => q.bind(v),
            };
        }
        q
    }

    pub(crate) async fn run(&self, q: &str, args: Vec<Arg>) -> Result<(), StoreError> {
        let sql = self.sql(q);
        Self::bind(sqlx::query(&sql), args).execute(&self.pool).await?;
        Ok(())
    }

    pub(crate) async fn fetch(&self, q: &str, args: Vec<Arg>) -> Result<Vec<AnyRow>, StoreError> {
        let sql = self.sql(q);
        Ok(Self::bind(sqlx::query(&sql), args).fetch_all(&self.pool).await?)
    }

    /// `INSERT ... VALUES (...), (...)` for `rows` rows that replaces a row with the same key.
    pub(crate) fn upsert_sql(&self, table: &str, cols: &[&str], key: &[&str], rows: usize) -> String {
        let one = format!("({})", vec!["?"; cols.len()].join(", "));
        let values = vec![one.as_str(); rows].join(", ");
        let set: Vec<String> = cols
            .iter()
            .filter(|c| !key.contains(c))
            .map(|c| match self.dialect {
                Dialect::MySql => format!("{c} = VALUES({c})"),
                _ => format!("{c} = excluded.{c}"),
            })
            .collect();
        let conflict = match self.dialect {
            Dialect::MySql => format!("ON DUPLICATE KEY UPDATE {}", set.join(", ")),
            _ => format!("ON CONFLICT ({}) DO UPDATE SET {}", key.join(", "), set.join(", ")),
        };
        self.sql(&format!("INSERT INTO {table} ({}) VALUES {values} {conflict}", cols.join(", ")))
    }

    /// Stores a batch of records in one transaction: all of it is durable when this returns,
    /// or none of it. A cluster seen for the first time is added (with its root associations),
    /// as slurmctld registers its cluster with slurmdbd.
    pub async fn record(&self, recs: &v1::AcctRecords) -> Result<(), StoreError> {
        let mut clusters: Vec<&str> =
            recs.jobs.iter().map(|j| j.cluster.as_str()).chain(std::iter::once(recs.cluster.as_str())).collect();
        clusters.sort_unstable();
        clusters.dedup();
        for c in clusters {
            self.ensure_cluster(c).await?;
        }
        let _rollup = self.rollup_lock.lock().await;
        let mut tx = self.write_tx().await?;
        let (mut reroll, fresh) = self.reroll_points(&mut tx, recs).await?;
        for chunk in recs.jobs.chunks(ROWS_PER_STATEMENT) {
            let sql = self.upsert_sql("jobs", JOB_COLS, JOB_KEY, chunk.len());
            let args = chunk.iter().flat_map(job_args).collect();
            Self::bind(sqlx::query(&sql), args).execute(&mut *tx).await?;
        }
        for chunk in recs.steps.chunks(ROWS_PER_STATEMENT) {
            let sql = self.upsert_sql("steps", STEP_COLS, STEP_KEY, chunk.len());
            let args = chunk.iter().flat_map(step_args).collect();
            Self::bind(sqlx::query(&sql), args).execute(&mut *tx).await?;
        }
        if let Some(st) = &recs.state {
            if let Some(t) = self.apply_state(&mut tx, &recs.cluster, st).await? {
                reroll.push((recs.cluster.clone(), t));
            }
        }
        for (cluster, t) in &reroll {
            self.reroll_from(&mut tx, cluster, *t).await?;
        }
        tx.commit().await?;
        if fresh || !reroll.is_empty() {
            self.rollup_wanted.notify_one();
        }
        Ok(())
    }

    /// `PurgeJobAfter`/`PurgeStepAfter`: removes jobs and steps that ended before these
    /// times (0: keep), in one transaction. How many job and step rows went.
    pub async fn purge(&self, jobs_before: i64, steps_before: i64) -> Result<(u64, u64), StoreError> {
        let mut tx = self.write_tx().await?;
        let mut gone = [0u64; 2];
        for (n, (table, before)) in [("jobs", jobs_before), ("steps", steps_before)].into_iter().enumerate() {
            if before > 0 {
                let sql = self.sql(&format!("DELETE FROM {table} WHERE time_end > 0 AND time_end < ?"));
                gone[n] = Self::bind(sqlx::query(&sql), vec![i(before)]).execute(&mut *tx).await?.rows_affected();
            }
        }
        tx.commit().await?;
        Ok((gone[0], gone[1]))
    }

    /// The jobs a query selects, in the order they were first recorded, each run of a
    /// requeued job (or only its latest), with their steps.
    pub async fn jobs(&self, q: &v1::AcctQuery) -> Result<v1::AcctRows, StoreError> {
        let mut conds: Vec<String> = Vec::new();
        let mut args: Vec<Arg> = Vec::new();
        let list = |col: &str, vals: Vec<Arg>, conds: &mut Vec<String>, args: &mut Vec<Arg>| {
            if !vals.is_empty() {
                conds.push(format!("{col} IN ({})", vec!["?"; vals.len()].join(", ")));
                args.extend(vals);
            }
        };
        list("cluster", q.clusters.iter().cloned().map(Arg::S).collect(), &mut conds, &mut args);
        list("uid", q.uids.iter().map(|u| i(*u)).collect(), &mut conds, &mut args);
        list("gid", q.gids.iter().map(|g| i(*g)).collect(), &mut conds, &mut args);
        list("account", q.accounts.iter().cloned().map(Arg::S).collect(), &mut conds, &mut args);
        list("name", q.names.iter().cloned().map(Arg::S).collect(), &mut conds, &mut args);
        list("partition_name", q.partitions.iter().cloned().map(Arg::S).collect(), &mut conds, &mut args);
        list("qos", q.qos.iter().cloned().map(Arg::S).collect(), &mut conds, &mut args);
        if q.start == 0 && q.end == 0 && !q.states.is_empty() {
            list("state", q.states.iter().cloned().map(Arg::S).collect(), &mut conds, &mut args);
        }
        let windows = if q.start != 0 || q.end != 0 {
            window_alternatives(&q.states, q.start, if q.end == 0 { i64::MAX } else { q.end })
        } else {
            Vec::new()
        };
        let by_job = job_alternatives(&q.jobs);
        let none = || vec![(String::new(), Vec::new())];
        // Every combination of a -j alternative and a window alternative (either may be none).
        let mut alternatives: Vec<Cond> = Vec::new();
        for (js, ja) in if by_job.is_empty() { none() } else { by_job } {
            for (ws, wa) in if windows.is_empty() { none() } else { windows.clone() } {
                let parts: Vec<&str> = [js.as_str(), ws.as_str()].into_iter().filter(|p| !p.is_empty()).collect();
                alternatives.push((parts.join(" AND "), ja.iter().cloned().chain(wa).collect()));
            }
        }
        // One query per alternative, merged in the order the records were first stored.
        let mut found: std::collections::BTreeMap<i64, Vec<u8>> = std::collections::BTreeMap::new();
        for (alt, alt_args) in alternatives {
            let all: Vec<&str> =
                conds.iter().map(String::as_str).chain((!alt.is_empty()).then_some(alt.as_str())).collect();
            let filter = if all.is_empty() { String::new() } else { format!(" WHERE {}", all.join(" AND ")) };
            let sql = format!("SELECT seq, record FROM jobs{filter}");
            for r in self.fetch(&sql, args.iter().cloned().chain(alt_args).collect()).await? {
                found.insert(r.try_get(0)?, r.try_get(1)?);
            }
        }
        let mut jobs = Vec::with_capacity(found.len());
        for (seq, b) in found {
            let mut j =
                v1::AcctJob::decode(&b[..]).map_err(|source| StoreError::Decode { what: "a job".into(), source })?;
            j.db_index = seq as u64;
            jobs.push(j);
        }
        if !q.duplicates {
            // Only each job's latest run.
            let mut latest: std::collections::HashMap<(&str, u32), u32> = std::collections::HashMap::new();
            for j in &jobs {
                let info = j.info.as_ref();
                let k = (j.cluster.as_str(), info.map_or(0, |i| i.job_id));
                let r = info.map_or(0, |i| i.restarts);
                latest.entry(k).and_modify(|m| *m = (*m).max(r)).or_insert(r);
            }
            let keep: Vec<bool> = jobs
                .iter()
                .map(|j| {
                    let info = j.info.as_ref();
                    latest.get(&(j.cluster.as_str(), info.map_or(0, |i| i.job_id)))
                        == Some(&info.map_or(0, |i| i.restarts))
                })
                .collect();
            let mut k = keep.into_iter();
            jobs.retain(|_| k.next().unwrap_or(true));
        }
        let steps = if q.no_steps { Vec::new() } else { self.steps_of(&jobs).await? };
        Ok(v1::AcctRows { jobs, steps })
    }

    /// The steps of these job runs, in the order they were recorded.
    async fn steps_of(&self, jobs: &[v1::AcctJob]) -> Result<Vec<v1::AcctStep>, StoreError> {
        use std::collections::{BTreeMap, HashSet};
        let mut by_cluster: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
        let mut runs: HashSet<(&str, u32, u32)> = HashSet::new();
        for j in jobs {
            let Some(info) = j.info.as_ref() else { continue };
            by_cluster.entry(&j.cluster).or_default().push(info.job_id);
            runs.insert((&j.cluster, info.job_id, info.restarts));
        }
        let mut out = Vec::new();
        for (cluster, ids) in by_cluster {
            for chunk in ids.chunks(500) {
                let mut args = vec![Arg::S(cluster.to_string())];
                args.extend(chunk.iter().map(|id| i(*id)));
                let sql = format!(
                    "SELECT record FROM steps WHERE cluster = ? AND job_id IN ({}) ORDER BY seq",
                    vec!["?"; chunk.len()].join(", ")
                );
                for r in self.fetch(&sql, args).await? {
                    let b: Vec<u8> = r.try_get(0)?;
                    let s = v1::AcctStep::decode(&b[..])
                        .map_err(|source| StoreError::Decode { what: "a step".into(), source })?;
                    let job = s.info.as_ref().map_or(0, |i| i.job_id);
                    if runs.contains(&(cluster, job, s.restarts)) {
                        out.push(s);
                    }
                }
            }
        }
        Ok(out)
    }
}

/// The rows sacctmgr administers, read and written whole (each a protobuf record beside its
/// key columns).
impl Store {
    /// Everything: clusters, accounts, users, QoS and associations. A new store has Slurm's
    /// defaults: account `root`, user `root` (Administrator), QoS `normal`.
    pub async fn admin_state(&self) -> Result<v1::AdminState, StoreError> {
        self.ensure_defaults().await?;
        Ok(v1::AdminState {
            clusters: self.records("SELECT record FROM acct_clusters ORDER BY name", "a cluster").await?,
            accounts: self.records("SELECT record FROM acct_accounts ORDER BY name", "an account").await?,
            users: self.records("SELECT record FROM acct_users ORDER BY name", "a user").await?,
            qos: self.records("SELECT record FROM acct_qos ORDER BY id", "a QoS").await?,
            assocs: self.records("SELECT record FROM acct_assocs ORDER BY id", "an association").await?,
        })
    }

    /// The records (first column) a query returns, decoded.
    async fn records<T: Message + Default>(&self, sql: &str, what: &str) -> Result<Vec<T>, StoreError> {
        let mut out = Vec::new();
        for r in self.fetch(sql, vec![]).await? {
            out.push(decode(&r.try_get::<Vec<u8>, _>(0)?, what)?);
        }
        Ok(out)
    }

    /// Adds or replaces rows, in one transaction. Associations and QoS with id 0 get the
    /// next free id.
    pub async fn admin_put(&self, st: &v1::AdminState) -> Result<(), StoreError> {
        let mut tx = self.write_tx().await?;
        let mut next_assoc = self.next_id(&mut tx, "acct_assocs").await?;
        let mut next_qos = self.next_id(&mut tx, "acct_qos").await?;
        let put = |table: &str, cols: &[&str], key: &[&str]| self.upsert_sql(table, cols, key, 1);
        let named = st
            .clusters
            .iter()
            .map(|c| ("acct_clusters", &c.name, c.encode_to_vec()))
            .chain(st.accounts.iter().map(|a| ("acct_accounts", &a.name, a.encode_to_vec())))
            .chain(st.users.iter().map(|u| ("acct_users", &u.name, u.encode_to_vec())));
        for (table, name, record) in named {
            let sql = put(table, &["name", "record"], &["name"]);
            Self::bind(sqlx::query(&sql), vec![Arg::S(name.clone()), Arg::B(record)]).execute(&mut *tx).await?;
        }
        for q in &st.qos {
            let mut q = q.clone();
            if q.id == 0 {
                q.id = next_qos;
                next_qos += 1;
            }
            let sql = put("acct_qos", &["name", "id", "record"], &["name"]);
            Self::bind(sqlx::query(&sql), vec![Arg::S(q.name.clone()), i(q.id), Arg::B(q.encode_to_vec())])
                .execute(&mut *tx)
                .await?;
        }
        for a in &st.assocs {
            let mut a = a.clone();
            if a.id == 0 {
                a.id = next_assoc;
                next_assoc += 1;
            }
            let cols = ["id", "cluster", "account", "user_name", "partition_name", "record"];
            let sql = put("acct_assocs", &cols, &["id"]);
            let args = vec![
                i(a.id),
                Arg::S(a.cluster.clone()),
                Arg::S(a.account.clone()),
                Arg::S(a.user.clone()),
                Arg::S(a.partition.clone()),
                Arg::B(a.encode_to_vec()),
            ];
            Self::bind(sqlx::query(&sql), args).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Deletes rows (clusters, accounts, users and QoS by name, associations by id), in one
    /// transaction.
    pub async fn admin_delete(&self, st: &v1::AdminState) -> Result<(), StoreError> {
        let mut tx = self.write_tx().await?;
        let names = [
            ("acct_clusters", st.clusters.iter().map(|c| c.name.clone()).collect::<Vec<_>>()),
            ("acct_accounts", st.accounts.iter().map(|a| a.name.clone()).collect()),
            ("acct_users", st.users.iter().map(|u| u.name.clone()).collect()),
            ("acct_qos", st.qos.iter().map(|q| q.name.clone()).collect()),
        ];
        for (table, keys) in names {
            for k in keys {
                let sql = self.sql(&format!("DELETE FROM {table} WHERE name = ?"));
                Self::bind(sqlx::query(&sql), vec![Arg::S(k)]).execute(&mut *tx).await?;
            }
        }
        for a in &st.assocs {
            let sql = self.sql("DELETE FROM acct_assocs WHERE id = ?");
            Self::bind(sqlx::query(&sql), vec![i(a.id)]).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn next_id(&self, tx: &mut sqlx::Transaction<'_, sqlx::Any>, table: &str) -> Result<u32, StoreError> {
        let row = sqlx::query(&format!("SELECT MAX(id) FROM {table}")).fetch_one(&mut **tx).await?;
        Ok(row.try_get::<Option<i64>, _>(0)?.unwrap_or(0) as u32 + 1)
    }

    /// Slurm's defaults in a new store: account `root`, user `root` (Administrator), QoS
    /// `normal` (id 1).
    async fn ensure_defaults(&self) -> Result<(), StoreError> {
        let n = sqlx::query("SELECT COUNT(*) FROM acct_accounts").fetch_one(&self.pool).await?;
        if n.try_get::<i64, _>(0)? > 0 {
            return Ok(());
        }
        let st = v1::AdminState {
            accounts: vec![v1::AcctAccount {
                name: "root".into(),
                description: "default root account".into(),
                organization: "root".into(),
            }],
            users: vec![v1::AcctUser {
                name: "root".into(),
                default_account: "root".into(),
                admin_level: "Administrator".into(),
            }],
            qos: vec![v1::AcctQos {
                id: 1,
                name: "normal".into(),
                description: "Normal QOS default".into(),
                preempt_mode: "cluster".into(),
                usage_factor: 1.0,
                ..Default::default()
            }],
            ..Default::default()
        };
        self.admin_put(&st).await
    }

    /// Adds a cluster not known yet, with its `root` account's association and root's.
    /// Where the cluster's controller is (its registration): kept in the cluster's record
    /// when it changed.
    pub async fn register_controller(&self, name: &str, host: &str, port: u32, rpc: u32) -> Result<(), StoreError> {
        let rows = self.fetch("SELECT record FROM acct_clusters WHERE name = ?", vec![Arg::S(name.into())]).await?;
        let Some(row) = rows.first() else { return Ok(()) };
        let mut c: v1::AcctCluster = decode(&row.try_get::<Vec<u8>, _>(0)?, "a cluster")?;
        if c.control_host == host && c.control_port == port && c.rpc == rpc {
            return Ok(());
        }
        c.control_host = host.into();
        c.control_port = port;
        c.rpc = rpc;
        self.admin_put(&v1::AdminState { clusters: vec![c], ..Default::default() }).await
    }

    pub async fn ensure_cluster(&self, name: &str) -> Result<(), StoreError> {
        if name.is_empty() {
            return Ok(());
        }
        let known = self.fetch("SELECT name FROM acct_clusters WHERE name = ?", vec![Arg::S(name.into())]).await?;
        if !known.is_empty() {
            return Ok(());
        }
        self.ensure_defaults().await?;
        let st = v1::AdminState {
            clusters: vec![v1::AcctCluster { name: name.into(), ..Default::default() }],
            assocs: drover_proto::acct::root_assocs(name),
            ..Default::default()
        };
        self.admin_put(&st).await
    }
}

fn decode<T: Message + Default>(b: &[u8], what: &str) -> Result<T, StoreError> {
    T::decode(b).map_err(|source| StoreError::Decode { what: what.into(), source })
}

/// A store URL without its password, for messages.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            match creds.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..s + 3], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}
