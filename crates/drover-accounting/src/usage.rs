//! Node events and rolled-up usage in the store: what sreport reads.
//!
//! The controller sends its cluster's resources and its down and drained nodes; the store
//! keeps them as events with a start and an end. The rollup turns job runs and events into
//! usage by the hour (see [`crate::rollup`]), sums hours into days and days into months, and
//! remembers how far each got (`rollup_state`), so it resumes where it stopped. A record that
//! changes an hour already rolled up (a run reported late, after an outage) moves that mark
//! back, and the rollup redoes the hours from there.

use crate::rollup::{self, ClusterRow, EventSpan, HourAcc, Hours, JobSpan};
use crate::store::{i, Arg, Dialect, Store, StoreError};
use drover_proto::v1;
use sqlx::Row;
use std::collections::{BTreeMap, HashMap};

/// Eligible time walked per query (and hours written per transaction) while rolling up.
const CHUNK_SECS: i64 = 86400;

/// Days or months summed per transaction.
const SUMS_PER_TX: usize = 31;

const PERIODS: [&str; 3] = ["h", "d", "m"];

const JOB_SPAN_COLS: &str = "time_eligible, time_start, time_end, account, user_name, alloc_tres, req_tres";

/// A TEXT column (MariaDB hands TEXT to sqlx's Any driver as bytes).
fn text(r: &sqlx::any::AnyRow, k: usize) -> Result<String, StoreError> {
    Ok(match r.try_get::<String, _>(k) {
        Ok(s) => s,
        Err(_) => String::from_utf8_lossy(&r.try_get::<Vec<u8>, _>(k)?).into_owned(),
    })
}

fn job_span(r: &sqlx::any::AnyRow) -> Result<JobSpan, StoreError> {
    let req = text(r, 6)?;
    Ok(JobSpan {
        eligible: r.try_get(0)?,
        start: r.try_get(1)?,
        end: r.try_get(2)?,
        account: r.try_get(3)?,
        user: r.try_get(4)?,
        alloc: rollup::parse_tres(&text(r, 5)?),
        req_cpus: rollup::parse_tres(&req).iter().find(|(t, _)| t == "cpu").map_or(0, |(_, n)| *n),
    })
}

/// The earliest non-zero of some times.
fn earliest(times: &[i64]) -> Option<i64> {
    times.iter().copied().filter(|t| *t > 0).min()
}

type Tx = sqlx::Transaction<'static, sqlx::Any>;

/// What a run's rolled-up usage depends on: its eligible, start and end times, and its
/// account, user and allocated TRES.
struct StoredRun {
    times: [i64; 3],
    owner: (String, String, String),
}

impl StoredRun {
    /// The earliest time whose usage differs between this and `now` (None: the same).
    fn changed_from(&self, now: &StoredRun) -> Option<i64> {
        if self.owner != now.owner {
            return earliest(&[self.times[0], self.times[1], now.times[0], now.times[1]]);
        }
        let differ: Vec<i64> =
            self.times.iter().zip(&now.times).filter(|(a, b)| a != b).flat_map(|(a, b)| [*a, *b]).collect();
        earliest(&differ)
    }
}

impl Store {
    /// `SUM(col)` as a BIGINT in every dialect (PostgreSQL and MariaDB sum to decimals).
    fn sum(&self, col: &str) -> String {
        match self.dialect() {
            Dialect::Postgres => format!("CAST(SUM({col}) AS BIGINT)"),
            Dialect::MySql => format!("CAST(SUM({col}) AS SIGNED)"),
            Dialect::Sqlite => format!("SUM({col})"),
        }
    }

    async fn tx_fetch(&self, tx: &mut Tx, q: &str, args: Vec<Arg>) -> Result<Vec<sqlx::any::AnyRow>, StoreError> {
        let sql = self.sql(q);
        Ok(Self::bind(sqlx::query(&sql), args).fetch_all(&mut **tx).await?)
    }

    async fn tx_run(&self, tx: &mut Tx, q: &str, args: Vec<Arg>) -> Result<u64, StoreError> {
        let sql = self.sql(q);
        Ok(Self::bind(sqlx::query(&sql), args).execute(&mut **tx).await?.rows_affected())
    }

    /// Inserts rows of `cols` (several per statement).
    async fn tx_insert(&self, tx: &mut Tx, table: &str, cols: &[&str], rows: Vec<Vec<Arg>>) -> Result<(), StoreError> {
        for chunk in rows.chunks(100) {
            let one = format!("({})", vec!["?"; cols.len()].join(", "));
            let sql = format!("INSERT INTO {table} ({}) VALUES {}", cols.join(", "), vec![one; chunk.len()].join(", "));
            self.tx_run(tx, &sql, chunk.iter().flatten().cloned().collect()).await?;
        }
        Ok(())
    }

    /// Where each period of `cluster` is rolled up to (absent: never rolled up).
    async fn marks(&self, tx: Option<&mut Tx>, cluster: &str) -> Result<HashMap<String, i64>, StoreError> {
        let q = "SELECT period, last_end FROM rollup_state WHERE cluster = ?";
        let rows = match tx {
            Some(tx) => self.tx_fetch(tx, q, vec![Arg::S(cluster.into())]).await?,
            None => self.fetch(q, vec![Arg::S(cluster.into())]).await?,
        };
        rows.iter().map(|r| Ok((r.try_get::<String, _>(0)?, r.try_get::<i64, _>(1)?))).collect()
    }

    /// Moves a mark from `from` to `to` (sets it where there was none): false, changing
    /// nothing, when a record moved it back meanwhile — what was rolled up from `from` may
    /// be stale, and is done again on the next round.
    async fn move_mark(
        &self,
        tx: &mut Tx,
        cluster: &str,
        period: &str,
        from: Option<i64>,
        to: i64,
    ) -> Result<bool, StoreError> {
        let Some(from) = from else {
            self.set_mark(tx, cluster, period, to).await?;
            return Ok(true);
        };
        let moved = self
            .tx_run(
                tx,
                "UPDATE rollup_state SET last_end = ? WHERE cluster = ? AND period = ? AND last_end = ?",
                vec![i(to), Arg::S(cluster.into()), Arg::S(period.into()), i(from)],
            )
            .await?;
        Ok(moved == 1)
    }

    async fn set_mark(&self, tx: &mut Tx, cluster: &str, period: &str, end: i64) -> Result<(), StoreError> {
        let sql = self.upsert_sql("rollup_state", &["cluster", "period", "last_end"], &["cluster", "period"], 1);
        Self::bind(sqlx::query(&sql), vec![Arg::S(cluster.into()), Arg::S(period.into()), i(end)])
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    /// Inside `record`'s transaction, before its jobs are written: for each cluster whose
    /// rolled-up hours these jobs change, the earliest time they change; and whether some
    /// cluster has no hours rolled up yet.
    pub(crate) async fn reroll_points(
        &self,
        tx: &mut Tx,
        recs: &v1::AcctRecords,
    ) -> Result<(Vec<(String, i64)>, bool), StoreError> {
        let mut by_cluster: BTreeMap<&str, Vec<&v1::AcctJob>> = BTreeMap::new();
        for j in &recs.jobs {
            by_cluster.entry(&j.cluster).or_default().push(j);
        }
        let mut points = Vec::new();
        let mut fresh = false;
        for (cluster, jobs) in by_cluster {
            let Some(&rolled) = self.marks(Some(&mut *tx), cluster).await?.get("h") else {
                fresh = true;
                continue;
            };
            let times = |j: &v1::AcctJob| {
                let i = j.info.clone().unwrap_or_default();
                (i.job_id, i.restarts, i.eligible_time, i.start_time, i.end_time)
            };
            let touched: Vec<&v1::AcctJob> = jobs
                .into_iter()
                .filter(|j| {
                    let (_, _, e, s, n) = times(j);
                    earliest(&[e, s, n]).is_some_and(|t| t < rolled)
                })
                .collect();
            if touched.is_empty() {
                continue;
            }
            let mut old: HashMap<(i64, i64), StoredRun> = HashMap::new();
            for chunk in touched.chunks(500) {
                let mut args = vec![Arg::S(cluster.into())];
                args.extend(chunk.iter().map(|j| i(times(j).0)));
                let q = format!(
                    "SELECT job_id, restarts, time_eligible, time_start, time_end, account, user_name, alloc_tres \
                     FROM jobs WHERE cluster = ? AND job_id IN ({})",
                    vec!["?"; chunk.len()].join(", ")
                );
                for r in self.tx_fetch(tx, &q, args).await? {
                    let run = StoredRun {
                        times: [r.try_get(2)?, r.try_get(3)?, r.try_get(4)?],
                        owner: (r.try_get(5)?, r.try_get(6)?, text(&r, 7)?),
                    };
                    old.insert((r.try_get(0)?, r.try_get(1)?), run);
                }
            }
            let mut point: Option<i64> = None;
            for j in touched {
                let (id, run, e, s, n) = times(j);
                let now = StoredRun {
                    times: [if e == 0 && s > 0 { s } else { e }, s, n],
                    owner: (
                        j.account.clone(),
                        j.info.as_ref().and_then(|i| i.spec.as_ref()).map_or(String::new(), |s| s.user.clone()),
                        j.alloc_tres.clone(),
                    ),
                };
                let changed = match old.get(&(i64::from(id), i64::from(run))) {
                    None => earliest(&now.times),
                    Some(was) => was.changed_from(&now),
                };
                if let Some(t) = changed.filter(|t| *t < rolled) {
                    point = Some(point.map_or(t, |p| p.min(t)));
                }
            }
            points.extend(point.map(|t| (cluster.to_string(), t)));
        }
        Ok((points, fresh))
    }

    /// Moves `cluster`'s marks back to `t` (to its hour, day and month).
    pub(crate) async fn reroll_from(&self, tx: &mut Tx, cluster: &str, t: i64) -> Result<(), StoreError> {
        let back = [self.cal.hour(t), self.cal.day(t), self.cal.month(t)];
        for (p, to) in PERIODS.iter().zip(back) {
            self.tx_run(
                tx,
                "UPDATE rollup_state SET last_end = ? WHERE cluster = ? AND period = ? AND last_end > ?",
                vec![i(to), Arg::S(cluster.into()), Arg::S(p.to_string()), i(to)],
            )
            .await?;
        }
        Ok(())
    }

    /// Opens and closes `cluster`'s events from its state: the resources event when they
    /// change, a node's event when it goes down or drained, or comes back. Where a change
    /// lies before what is rolled up, the earliest such time.
    pub(crate) async fn apply_state(
        &self,
        tx: &mut Tx,
        cluster: &str,
        st: &v1::AcctClusterState,
    ) -> Result<Option<i64>, StoreError> {
        let open = self
            .tx_fetch(
                tx,
                "SELECT node_name, time_start, state, reason, tres FROM events WHERE cluster = ? AND time_end = 0",
                vec![Arg::S(cluster.into())],
            )
            .await?;
        let mut open: HashMap<String, (i64, String, String, String)> = open
            .iter()
            .map(|r| Ok((r.try_get(0)?, (r.try_get(1)?, r.try_get(2)?, r.try_get(3)?, r.try_get(4)?))))
            .collect::<Result<_, StoreError>>()?;
        let mut wanted: Vec<v1::AcctNodeEvent> = st.down.clone();
        wanted.push(v1::AcctNodeEvent {
            node: String::new(),
            start: st.time,
            tres: st.tres.clone(),
            ..Default::default()
        });
        let mut changed: Vec<i64> = Vec::new();
        let close = |node: &str, start: i64| {
            (
                "UPDATE events SET time_end = ? WHERE cluster = ? AND node_name = ? AND time_start = ?",
                vec![i(st.time.max(start + 1)), Arg::S(cluster.into()), Arg::S(node.into()), i(start)],
            )
        };
        for w in &wanted {
            if let Some((start, state, reason, tres)) = open.remove(&w.node) {
                if state == w.state && reason == w.reason && tres == w.tres {
                    continue;
                }
                let (q, args) = close(&w.node, start);
                self.tx_run(tx, q, args).await?;
                changed.push(st.time);
            }
            let start = if w.start > 0 && !w.node.is_empty() { w.start.min(st.time) } else { st.time };
            let cols = ["cluster", "node_name", "time_start", "time_end", "state", "reason", "reason_uid", "tres"];
            let sql = self.upsert_sql("events", &cols, &["cluster", "node_name", "time_start"], 1);
            let args = vec![
                Arg::S(cluster.into()),
                Arg::S(w.node.clone()),
                i(start),
                i(0),
                Arg::S(w.state.clone()),
                Arg::S(w.reason.clone()),
                i(w.reason_uid),
                Arg::S(w.tres.clone()),
            ];
            Self::bind(sqlx::query(&sql), args).execute(&mut **tx).await?;
            changed.push(start);
        }
        // Nodes no longer down or drained.
        for (node, (start, ..)) in open {
            let (q, args) = close(&node, start);
            self.tx_run(tx, q, args).await?;
            changed.push(st.time);
        }
        let rolled = self.marks(Some(&mut *tx), cluster).await?.get("h").copied();
        Ok(match rolled {
            Some(r) => changed.into_iter().filter(|t| *t < r).min(),
            None => None,
        })
    }

    /// A cluster's node events (`node` empty: its resources), as sacctmgr shows them.
    pub async fn events(&self, cluster: &str, start: i64, end: i64) -> Result<Vec<v1::AcctNodeEvent>, StoreError> {
        let rows = self
            .fetch(
                "SELECT node_name, time_start, time_end, state, reason, reason_uid, tres FROM events \
                 WHERE cluster = ? AND time_start < ? AND (time_end = 0 OR time_end > ?) ORDER BY time_start, node_name",
                vec![Arg::S(cluster.into()), i(end), i(start)],
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok(v1::AcctNodeEvent {
                    node: r.try_get(0)?,
                    start: r.try_get(1)?,
                    end: r.try_get(2)?,
                    state: r.try_get(3)?,
                    reason: r.try_get(4)?,
                    reason_uid: r.try_get::<i64, _>(5)? as u32,
                    tres: r.try_get(6)?,
                })
            })
            .collect()
    }

    /// The clusters with anything to roll up.
    async fn rollup_clusters(&self) -> Result<Vec<String>, StoreError> {
        let mut out: Vec<String> = Vec::new();
        for q in [
            "SELECT name FROM acct_clusters",
            "SELECT DISTINCT cluster FROM events",
            "SELECT DISTINCT cluster FROM rollup_state",
        ] {
            for r in self.fetch(q, vec![]).await? {
                out.push(r.try_get(0)?);
            }
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// Rolls every cluster's usage up to the last whole hour before `now`: hours, then the
    /// days and months they complete. Returns the hours rolled up.
    pub async fn rollup(&self, now: i64) -> Result<u64, StoreError> {
        let mut hours = 0;
        for c in self.rollup_clusters().await? {
            hours += self.rollup_cluster(&c, now).await?;
        }
        Ok(hours)
    }

    async fn rollup_cluster(&self, cluster: &str, now: i64) -> Result<u64, StoreError> {
        let to = self.cal.hour(now);
        let marks = self.marks(None, cluster).await?;
        let first = match marks.get("h") {
            Some(&h) => h,
            None => {
                let q1 =
                    self.fetch("SELECT MIN(time_start) FROM events WHERE cluster = ?", vec![Arg::S(cluster.into())]);
                let e: Option<i64> = q1.await?.first().map(|r| r.try_get(0)).transpose()?.flatten();
                let q2 = self.fetch(
                    "SELECT MIN(time_eligible) FROM jobs WHERE cluster = ? AND time_eligible > 0",
                    vec![Arg::S(cluster.into())],
                );
                let j: Option<i64> = q2.await?.first().map(|r| r.try_get(0)).transpose()?.flatten();
                match earliest(&[e.unwrap_or(0), j.unwrap_or(0)]) {
                    Some(t) => self.cal.hour(t),
                    None => return Ok(0),
                }
            }
        };
        let mut rolled = 0;
        if first < to {
            rolled = self.roll_hours(cluster, first, to, marks.get("h").copied()).await?;
        } else if !marks.contains_key("h") {
            // Nothing ended yet: marked all the same, so that new records do not wake the
            // rollup for a cluster it has never seen.
            let mut tx = self.write_tx().await?;
            self.set_mark(&mut tx, cluster, "h", first).await?;
            tx.commit().await?;
        }
        // Days complete in the hours rolled up (a record may have stopped them short, or
        // moved marks back meanwhile: read them again), then months complete in days.
        let marks = self.marks(None, cluster).await?;
        let day_to = self.cal.day(marks.get("h").copied().unwrap_or(first).min(to));
        let day_from = marks.get("d").copied();
        let start = day_from.unwrap_or_else(|| self.cal.day(first));
        self.roll_sums(cluster, "h", "d", (start, day_from.is_some()), day_to, |t| self.cal.next_day(t)).await?;
        let marks = self.marks(None, cluster).await?;
        let month_to = self.cal.month(marks.get("d").copied().unwrap_or(start).min(day_to));
        let month_from = marks.get("m").copied();
        let start = month_from.unwrap_or_else(|| self.cal.month(first));
        self.roll_sums(cluster, "d", "m", (start, month_from.is_some()), month_to, |t| self.cal.next_month(t)).await?;
        Ok(rolled)
    }

    /// Hours in [from, to): jobs that became eligible before `from` and were still there,
    /// then the rest a day of eligibility at a time; each day's hours written as they become
    /// final (no run eligible later can touch them). `mark` is where the hours' mark stands
    /// (none: never rolled up). Stops, to go on at the next round, where a record moved the
    /// mark back meanwhile.
    async fn roll_hours(&self, cluster: &str, from: i64, to: i64, mark: Option<i64>) -> Result<u64, StoreError> {
        let c = || Arg::S(cluster.into());
        let mut hours = Hours::new(from, to);
        let mut mark = mark;
        let mut a = from;
        let mut count = 0;
        while a < to {
            let b = (a + CHUNK_SECS).min(to);
            // No record lands from these reads to the write (see `rollup_lock`).
            let _records = self.rollup_lock.lock().await;
            if a == from {
                let earlier = [
                    ("time_end > ? AND time_eligible > 0 AND time_eligible < ?", vec![c(), i(from), i(from)]),
                    ("time_end = 0 AND time_eligible > 0 AND time_eligible < ?", vec![c(), i(from)]),
                ];
                for (cond, args) in earlier {
                    let q = format!("SELECT {JOB_SPAN_COLS} FROM jobs WHERE cluster = ? AND {cond}");
                    for r in self.fetch(&q, args).await? {
                        hours.add_job(&job_span(&r)?);
                    }
                }
            }
            let q = format!(
                "SELECT {JOB_SPAN_COLS} FROM jobs WHERE cluster = ? AND time_eligible >= ? AND time_eligible < ?"
            );
            for r in self.fetch(&q, vec![c(), i(a), i(b)]).await? {
                hours.add_job(&job_span(&r)?);
            }
            let done: BTreeMap<i64, HourAcc> = hours.take_before(b).into_iter().collect();
            let events = self.events_over(cluster, a, b).await?;
            match self.write_hours(cluster, (a, mark), b, &done, &events).await? {
                Some(n) => count += n,
                None => break,
            }
            mark = Some(b);
            a = b;
        }
        Ok(count)
    }

    /// The node and resources events that overlap [a, b).
    async fn events_over(&self, cluster: &str, a: i64, b: i64) -> Result<Vec<EventSpan>, StoreError> {
        let ev = self
            .fetch(
                "SELECT node_name, time_start, time_end, tres FROM events \
                 WHERE cluster = ? AND time_start < ? AND (time_end = 0 OR time_end > ?)",
                vec![Arg::S(cluster.into()), i(b), i(a)],
            )
            .await?;
        ev.iter()
            .map(|r| {
                Ok(EventSpan {
                    node: r.try_get(0)?,
                    start: r.try_get(1)?,
                    end: r.try_get(2)?,
                    tres: rollup::parse_tres(&r.try_get::<String, _>(3)?),
                })
            })
            .collect()
    }

    /// Replaces the hourly rows of [a, b) (whole hours) and moves the hours' mark from
    /// `mark` to `b`, in one transaction: the hours written, or `None`, writing nothing,
    /// where a record moved the mark back meanwhile.
    async fn write_hours(
        &self,
        cluster: &str,
        (a, mark): (i64, Option<i64>),
        b: i64,
        done: &BTreeMap<i64, HourAcc>,
        events: &[EventSpan],
    ) -> Result<Option<u64>, StoreError> {
        let empty = HourAcc::default();
        let mut crows = Vec::new();
        let mut arows = Vec::new();
        let mut h = a;
        let mut n = 0;
        while h < b {
            let acc = done.get(&h).unwrap_or(&empty);
            for r in rollup::cluster_hour(h, acc, events).unwrap_or_default() {
                crows.push(cluster_args(cluster, "h", h, &r));
            }
            for ((acct, user, tres), secs) in &acc.assoc {
                arows.push(assoc_args(cluster, "h", h, acct, user, tres, *secs));
            }
            h += 3600;
            n += 1;
        }
        let mut tx = self.write_tx().await?;
        for t in ["usage_cluster", "usage_assoc"] {
            let q =
                format!("DELETE FROM {t} WHERE cluster = ? AND period = 'h' AND time_start >= ? AND time_start < ?");
            self.tx_run(&mut tx, &q, vec![Arg::S(cluster.into()), i(a), i(b)]).await?;
        }
        self.tx_insert(&mut tx, "usage_cluster", CLUSTER_COLS, crows).await?;
        self.tx_insert(&mut tx, "usage_assoc", ASSOC_COLS, arows).await?;
        if !self.move_mark(&mut tx, cluster, "h", mark, b).await? {
            return Ok(None);
        }
        tx.commit().await?;
        Ok(Some(n))
    }

    /// Sums rows of period `from_p` into rows of period `to_p` for the periods starting in
    /// [from, to) (`next` gives a period's end), moving `to_p`'s mark as they are written
    /// (`from.1`: the mark stands at `from`; else there is none yet). Stops, to go on at the
    /// next round, where a record moved the mark back meanwhile.
    async fn roll_sums(
        &self,
        cluster: &str,
        from_p: &str,
        to_p: &str,
        (from, marked): (i64, bool),
        to: i64,
        next: impl Fn(i64) -> i64,
    ) -> Result<(), StoreError> {
        let mut mark = marked.then_some(from);
        let mut starts = Vec::new();
        let mut t = from;
        while t < to {
            starts.push(t);
            t = next(t);
        }
        let sums =
            ["tres_count", "hours", "alloc_secs", "down_secs", "pdown_secs", "idle_secs", "plan_secs", "over_secs"]
                .map(|c| self.sum(c))
                .join(", ");
        for batch in starts.chunks(SUMS_PER_TX) {
            // No record moves marks back between reading the rows summed and writing the sums.
            let _records = self.rollup_lock.lock().await;
            let mut tx = self.write_tx().await?;
            // Only periods whose every finer row is rolled up (a record may have sent the
            // finer mark back since the caller looked).
            let ready = self.marks(Some(&mut tx), cluster).await?.get(from_p).copied().unwrap_or(i64::MIN);
            for &p in batch {
                let end = next(p);
                if end > ready {
                    tx.commit().await?;
                    return Ok(());
                }
                let args = || vec![Arg::S(cluster.into()), Arg::S(from_p.into()), i(p), i(end)];
                let q = format!(
                    "SELECT tres, {sums} FROM usage_cluster \
                     WHERE cluster = ? AND period = ? AND time_start >= ? AND time_start < ? GROUP BY tres"
                );
                let mut crows = Vec::new();
                for r in self.tx_fetch(&mut tx, &q, args()).await? {
                    let v = |k: usize| -> Result<u64, StoreError> {
                        Ok(r.try_get::<Option<i64>, _>(k)?.unwrap_or(0) as u64)
                    };
                    let row = ClusterRow {
                        tres: r.try_get(0)?,
                        count: v(1)?,
                        hours: v(2)?,
                        alloc: v(3)?,
                        down: v(4)?,
                        pdown: v(5)?,
                        idle: v(6)?,
                        plan: v(7)?,
                        over: v(8)?,
                    };
                    crows.push(cluster_args(cluster, to_p, p, &row));
                }
                let q = format!(
                    "SELECT account, user_name, tres, {} FROM usage_assoc \
                     WHERE cluster = ? AND period = ? AND time_start >= ? AND time_start < ? \
                     GROUP BY account, user_name, tres",
                    self.sum("alloc_secs")
                );
                let mut arows = Vec::new();
                for r in self.tx_fetch(&mut tx, &q, args()).await? {
                    let secs = r.try_get::<Option<i64>, _>(3)?.unwrap_or(0) as u64;
                    arows.push(assoc_args(
                        cluster,
                        to_p,
                        p,
                        &r.try_get::<String, _>(0)?,
                        &r.try_get::<String, _>(1)?,
                        &r.try_get::<String, _>(2)?,
                        secs,
                    ));
                }
                for t in ["usage_cluster", "usage_assoc"] {
                    let q = format!("DELETE FROM {t} WHERE cluster = ? AND period = ? AND time_start = ?");
                    self.tx_run(&mut tx, &q, vec![Arg::S(cluster.into()), Arg::S(to_p.into()), i(p)]).await?;
                }
                self.tx_insert(&mut tx, "usage_cluster", CLUSTER_COLS, crows).await?;
                self.tx_insert(&mut tx, "usage_assoc", ASSOC_COLS, arows).await?;
                if !self.move_mark(&mut tx, cluster, to_p, mark, end).await? {
                    return Ok(());
                }
                mark = Some(end);
            }
            tx.commit().await?;
        }
        Ok(())
    }

    /// Usage in [start, end) (hour boundaries), from the coarsest rows that tile it: months
    /// rolled up where whole months lie inside, then days, then hours.
    pub async fn usage(&self, q: &v1::AcctUsageQuery) -> Result<v1::AcctUsage, StoreError> {
        let clusters = if q.clusters.is_empty() { self.rollup_clusters().await? } else { q.clusters.clone() };
        let mut out = v1::AcctUsage::default();
        for c in &clusters {
            let marks = self.marks(None, c).await?;
            let mark = |p: &str| marks.get(p).copied().unwrap_or(0);
            out.rolled_up_to.insert(c.clone(), mark("h"));
            // Runs of one period: (period, from, to).
            let mut runs: Vec<(&str, i64, i64)> = Vec::new();
            let mut t = q.start;
            while t < q.end {
                let (p, next) = if self.cal.month(t) == t && self.cal.next_month(t) <= q.end.min(mark("m")) {
                    ("m", self.cal.next_month(t))
                } else if self.cal.day(t) == t && self.cal.next_day(t) <= q.end.min(mark("d")) {
                    ("d", self.cal.next_day(t))
                } else {
                    ("h", t + 3600)
                };
                match runs.last_mut() {
                    Some((lp, _, lto)) if *lp == p && *lto == t => *lto = next,
                    _ => runs.push((p, t, next)),
                }
                t = next;
            }
            let mut sums: BTreeMap<String, v1::AcctClusterUsage> = BTreeMap::new();
            let mut assocs: BTreeMap<(String, String, String), u64> = BTreeMap::new();
            let cols =
                ["tres_count", "hours", "alloc_secs", "down_secs", "pdown_secs", "idle_secs", "plan_secs", "over_secs"]
                    .map(|c| self.sum(c))
                    .join(", ");
            for (p, a, b) in runs {
                let args = || vec![Arg::S(c.clone()), Arg::S(p.into()), i(a), i(b)];
                let sql = format!(
                    "SELECT tres, {cols} FROM usage_cluster \
                     WHERE cluster = ? AND period = ? AND time_start >= ? AND time_start < ? GROUP BY tres"
                );
                for r in self.fetch(&sql, args()).await? {
                    let v = |k: usize| -> Result<u64, StoreError> {
                        Ok(r.try_get::<Option<i64>, _>(k)?.unwrap_or(0) as u64)
                    };
                    let tres: String = r.try_get(0)?;
                    let s = sums.entry(tres.clone()).or_insert_with(|| v1::AcctClusterUsage {
                        cluster: c.clone(),
                        tres,
                        ..Default::default()
                    });
                    s.count += v(1)?;
                    s.hours += v(2)?;
                    s.alloc += v(3)?;
                    s.down += v(4)?;
                    s.pdown += v(5)?;
                    s.idle += v(6)?;
                    s.plan += v(7)?;
                    s.over += v(8)?;
                }
                if q.assocs {
                    let sql = format!(
                        "SELECT account, user_name, tres, {} FROM usage_assoc \
                         WHERE cluster = ? AND period = ? AND time_start >= ? AND time_start < ? \
                         GROUP BY account, user_name, tres",
                        self.sum("alloc_secs")
                    );
                    for r in self.fetch(&sql, args()).await? {
                        let k = (r.try_get(0)?, r.try_get(1)?, r.try_get(2)?);
                        *assocs.entry(k).or_default() += r.try_get::<Option<i64>, _>(3)?.unwrap_or(0) as u64;
                    }
                }
            }
            out.clusters.extend(sums.into_values());
            out.assocs.extend(assocs.into_iter().map(|((account, user, tres), alloc)| v1::AcctAssocUsage {
                cluster: c.clone(),
                account,
                user,
                tres,
                alloc,
            }));
        }
        Ok(out)
    }
}

const CLUSTER_COLS: &[&str] = &[
    "cluster",
    "period",
    "time_start",
    "tres",
    "tres_count",
    "hours",
    "alloc_secs",
    "down_secs",
    "pdown_secs",
    "idle_secs",
    "plan_secs",
    "over_secs",
];

const ASSOC_COLS: &[&str] = &["cluster", "period", "time_start", "account", "user_name", "tres", "alloc_secs"];

fn cluster_args(cluster: &str, period: &str, t: i64, r: &ClusterRow) -> Vec<Arg> {
    let u = |v: u64| Arg::I(v as i64);
    vec![
        Arg::S(cluster.into()),
        Arg::S(period.into()),
        i(t),
        Arg::S(r.tres.clone()),
        u(r.count),
        u(r.hours),
        u(r.alloc),
        u(r.down),
        u(r.pdown),
        u(r.idle),
        u(r.plan),
        u(r.over),
    ]
}

fn assoc_args(cluster: &str, period: &str, t: i64, acct: &str, user: &str, tres: &str, secs: u64) -> Vec<Arg> {
    vec![
        Arg::S(cluster.into()),
        Arg::S(period.into()),
        i(t),
        Arg::S(acct.into()),
        Arg::S(user.into()),
        Arg::S(tres.into()),
        Arg::I(secs as i64),
    ]
}
