//! Rollups, the pure part: how job runs and events become usage by the hour, as Slurm's
//! `as_mysql_rollup.c` computes it for sreport.
//!
//! For each hour and TRES of a cluster: *reported* is the cluster's count (from its capacity
//! events) times the seconds it had it; *allocated* is what jobs held, *down* what down or
//! drained nodes held, *planned* the CPUs eligible jobs waited for; *idle* is the rest. Where
//! they add up to more than reported (oversubscription), allocated is capped first, then
//! down, and planned time beyond the rest counts as *overcommitted*. Each association (a
//! user in an account) gets what its jobs held. Hours, days and months follow the local
//! calendar, as Slurm's do.

use std::collections::{BTreeMap, HashMap};

/// A TRES list's counts, memory in MB (see [`drover_model::memsize::tres_counts`]).
pub fn parse_tres(s: &str) -> Vec<(String, u64)> {
    drover_model::memsize::tres_counts(s)
}

/// Calendar boundaries in a time zone (the machine's, as Slurm uses `localtime`).
#[derive(Clone)]
pub struct Calendar {
    tz: jiff::tz::TimeZone,
}

impl Calendar {
    pub fn local() -> Calendar {
        Calendar { tz: jiff::tz::TimeZone::system() }
    }

    pub fn utc() -> Calendar {
        Calendar { tz: jiff::tz::TimeZone::UTC }
    }

    fn zoned(&self, t: i64) -> jiff::Zoned {
        jiff::Timestamp::from_second(t).unwrap_or(jiff::Timestamp::UNIX_EPOCH).to_zoned(self.tz.clone())
    }

    fn secs(z: Result<jiff::Zoned, jiff::Error>, fallback: i64) -> i64 {
        z.map(|z| z.timestamp().as_second()).unwrap_or(fallback)
    }

    /// The start of the hour `t` is in.
    pub fn hour(&self, t: i64) -> i64 {
        let z = self.zoned(t);
        Self::secs(z.with().minute(0).second(0).subsec_nanosecond(0).build(), t - t.rem_euclid(3600))
    }

    /// The start of the day `t` is in.
    pub fn day(&self, t: i64) -> i64 {
        Self::secs(self.zoned(t).start_of_day(), t - t.rem_euclid(86400))
    }

    /// The start of the next day.
    pub fn next_day(&self, t: i64) -> i64 {
        let d = self.day(t);
        Self::secs(self.zoned(d).tomorrow().and_then(|z| z.start_of_day()), d + 86400)
    }

    /// The start of the month `t` is in.
    pub fn month(&self, t: i64) -> i64 {
        let z = self.zoned(t);
        Self::secs(z.first_of_month().and_then(|z| z.start_of_day()), self.day(t))
    }

    /// The start of the next month.
    pub fn next_month(&self, t: i64) -> i64 {
        let z = self.zoned(self.month(t));
        Self::secs(
            z.last_of_month().and_then(|z| z.tomorrow()).and_then(|z| z.start_of_day()),
            self.next_day(t) + 28 * 86400,
        )
    }
}

/// What the rollup needs of one job run.
#[derive(Debug, Clone, Default)]
pub struct JobSpan {
    pub eligible: i64,
    pub start: i64,
    /// 0: not ended.
    pub end: i64,
    pub account: String,
    pub user: String,
    pub alloc: Vec<(String, u64)>,
    pub req_cpus: u64,
}

/// A node event (down or drained; `node` empty: the cluster's resources) over its span.
#[derive(Debug, Clone, Default)]
pub struct EventSpan {
    pub node: String,
    pub start: i64,
    /// 0: still open.
    pub end: i64,
    pub tres: Vec<(String, u64)>,
}

/// One hour's job usage, as it accumulates.
#[derive(Debug, Default, Clone)]
pub struct HourAcc {
    /// TRES-seconds allocated, per TRES.
    pub alloc: BTreeMap<String, u64>,
    /// CPU-seconds eligible jobs waited.
    pub plan_cpu: u64,
    /// TRES-seconds allocated per (account, user, TRES).
    pub assoc: HashMap<(String, String, String), u64>,
}

/// One TRES of a cluster over one period (its hourly row, or a sum of them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterRow {
    pub tres: String,
    pub count: u64,
    pub hours: u64,
    pub alloc: u64,
    pub down: u64,
    pub pdown: u64,
    pub idle: u64,
    pub plan: u64,
    pub over: u64,
}

/// Job usage of the hours in [from, to), accumulated job by job and taken hour by hour.
pub struct Hours {
    from: i64,
    to: i64,
    first_hour: i64,
    acc: BTreeMap<i64, HourAcc>,
}

/// The overlap of [a, b) with [c, d), in seconds.
fn overlap(a: i64, b: i64, c: i64, d: i64) -> u64 {
    (b.min(d) - a.max(c)).max(0) as u64
}

impl Hours {
    /// `from` and `to` are hour boundaries.
    pub fn new(from: i64, to: i64) -> Hours {
        Hours { from, to, first_hour: from, acc: BTreeMap::new() }
    }

    /// Adds a run's allocation to the hours it ran in and its wait (from eligible to start)
    /// to the hours it waited in.
    pub fn add_job(&mut self, j: &JobSpan) {
        if j.start > 0 {
            let end = if j.end > 0 { j.end } else { self.to };
            self.each_hour(j.start, end, |acc, secs| {
                for (t, n) in &j.alloc {
                    if *n == 0 {
                        continue;
                    }
                    *acc.alloc.entry(t.clone()).or_default() += n * secs;
                    *acc.assoc.entry((j.account.clone(), j.user.clone(), t.clone())).or_default() += n * secs;
                }
            });
        }
        if j.eligible > 0 && j.req_cpus > 0 {
            let waited_until = if j.start > 0 {
                j.start
            } else if j.end > 0 {
                j.end
            } else {
                self.to
            };
            self.each_hour(j.eligible, waited_until, |acc, secs| acc.plan_cpu += j.req_cpus * secs);
        }
    }

    fn each_hour(&mut self, a: i64, b: i64, mut f: impl FnMut(&mut HourAcc, u64)) {
        let (a, b) = (a.max(self.from), b.min(self.to));
        if a >= b {
            return;
        }
        // Hours are 3600 s apart from the first boundary (local offsets are whole hours or
        // halves; a DST change moves the wall clock, not the boundaries' spacing).
        let mut h = self.first_hour + (a - self.first_hour).div_euclid(3600) * 3600;
        while h < b {
            let secs = overlap(a, b, h, h + 3600);
            if secs > 0 {
                f(self.acc.entry(h).or_default(), secs);
            }
            h += 3600;
        }
    }

    /// The accumulated hours before `t`, in order (removed).
    pub fn take_before(&mut self, t: i64) -> Vec<(i64, HourAcc)> {
        let later = self.acc.split_off(&t);
        std::mem::replace(&mut self.acc, later).into_iter().collect()
    }
}

/// The cluster's rows for the hour at `h`: reported from the capacity events, down from the
/// node events, allocated and planned from `acc`. None when the cluster had no recorded
/// resources in that hour (it had not registered).
pub fn cluster_hour(h: i64, acc: &HourAcc, events: &[EventSpan]) -> Option<Vec<ClusterRow>> {
    let end = h + 3600;
    let open_end = |e: &EventSpan| if e.end > 0 { e.end } else { i64::MAX };
    let mut rows: BTreeMap<String, ClusterRow> = BTreeMap::new();
    let mut total: BTreeMap<String, u64> = BTreeMap::new();
    let mut registered = false;
    for e in events.iter().filter(|e| e.node.is_empty()) {
        let secs = overlap(e.start, open_end(e), h, end);
        if secs == 0 {
            continue;
        }
        registered = true;
        for (t, n) in &e.tres {
            let r =
                rows.entry(t.clone()).or_insert_with(|| ClusterRow { tres: t.clone(), hours: 1, ..Default::default() });
            r.count = r.count.max(*n);
            *total.entry(t.clone()).or_default() += n * secs;
        }
    }
    if !registered {
        return None;
    }
    for e in events.iter().filter(|e| !e.node.is_empty()) {
        let secs = overlap(e.start, open_end(e), h, end);
        for (t, n) in &e.tres {
            if let Some(r) = rows.get_mut(t) {
                r.down += n * secs;
            }
        }
    }
    for (t, r) in rows.iter_mut() {
        let total = total.get(t).copied().unwrap_or(0);
        r.alloc = acc.alloc.get(t).copied().unwrap_or(0).min(total);
        if t == "cpu" {
            r.plan = acc.plan_cpu;
        }
        // Down, then planned down, give way to what jobs held.
        r.down = r.down.min(total - r.alloc);
        r.pdown = r.pdown.min(total - r.alloc - r.down);
        let used = r.alloc + r.down + r.pdown;
        let idle = total as i64 - used as i64 - r.plan as i64;
        if idle < 0 {
            // More waited than was free: the excess is overcommitted, not planned.
            r.over = (-idle) as u64;
            r.plan = r.plan.saturating_sub(r.over);
            r.idle = 0;
        } else {
            r.idle = idle as u64;
        }
    }
    Some(rows.into_values().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const Y: i64 = 1_796_169_600; // 2026-12-02T00:00:00Z
    const H: i64 = 3600;

    fn job(eligible: i64, start: i64, end: i64, acct: &str, user: &str, cpus: u64, nodes: u64) -> JobSpan {
        JobSpan {
            eligible,
            start,
            end,
            account: acct.into(),
            user: user.into(),
            alloc: vec![("cpu".into(), cpus), ("node".into(), nodes), ("billing".into(), cpus)],
            req_cpus: cpus,
        }
    }

    /// The lab's day (captures/slurm-22.05/README.md): real Slurm's rollup gave allocated
    /// 158220, down 14400, planned 10800 and idle 507780 CPU-seconds for it.
    #[test]
    fn a_day_sums_as_slurm_rolled_up_the_lab() {
        let jobs = [
            job(Y - H, Y - H, Y + 9000, "physics", "alice", 2, 1),
            job(Y + H, Y + 3 * H, Y + 4 * H, "physics", "alice", 1, 1),
            job(Y + 10 * H, Y + 10 * H, Y + 16 * H + 1200, "chem", "bob", 4, 3),
            job(Y + 12 * H, Y + 12 * H, Y + 23 * H + 1800, "theory", "bob", 1, 1),
            job(Y + 19 * H, Y + 20 * H, Y + 21 * H + 420, "chem", "root", 1, 1),
        ];
        let events = [
            EventSpan { node: String::new(), start: Y - 2 * 86400, end: 0, tres: parse_tres("cpu=8,mem=16000,node=4") },
            EventSpan { node: "node4".into(), start: Y + 6 * H, end: Y + 8 * H, tres: parse_tres("cpu=2,mem=4000") },
        ];
        let mut hours = Hours::new(Y, Y + 24 * H);
        for j in &jobs {
            hours.add_job(j);
        }
        let mut sum = ClusterRow::default();
        let mut assoc: HashMap<(String, String, String), u64> = HashMap::new();
        let taken: BTreeMap<i64, HourAcc> = hours.take_before(Y + 24 * H).into_iter().collect();
        assert_eq!(taken.len(), 18, "hours with jobs running or waiting");
        for h in (0..24).map(|k| Y + k * H) {
            let acc = taken.get(&h).cloned().unwrap_or_default();
            let rows = cluster_hour(h, &acc, &events).expect("registered");
            let cpu = rows.iter().find(|r| r.tres == "cpu").expect("cpu row");
            sum.alloc += cpu.alloc;
            sum.down += cpu.down;
            sum.plan += cpu.plan;
            sum.idle += cpu.idle;
            sum.over += cpu.over;
            for (k, v) in &acc.assoc {
                *assoc.entry(k.clone()).or_default() += v;
            }
        }
        assert_eq!((sum.alloc, sum.down, sum.plan, sum.idle, sum.over), (158220, 14400, 10800, 507780, 0));
        let cpu = |a: &str, u: &str| assoc[&(a.to_string(), u.to_string(), "cpu".to_string())];
        assert_eq!(cpu("physics", "alice"), 21600);
        assert_eq!(cpu("chem", "bob"), 91200);
        assert_eq!(cpu("theory", "bob"), 41400);
        assert_eq!(cpu("chem", "root"), 4020);
    }

    #[test]
    fn an_unregistered_hour_has_no_cluster_rows_and_oversubscription_is_capped() {
        let acc = HourAcc {
            alloc: [("cpu".to_string(), 40 * H as u64)].into(),
            plan_cpu: 10 * H as u64,
            ..Default::default()
        };
        assert_eq!(cluster_hour(Y, &acc, &[]), None);
        let events = [
            EventSpan { node: String::new(), start: Y, end: 0, tres: parse_tres("cpu=32") },
            EventSpan { node: "n1".into(), start: Y, end: 0, tres: parse_tres("cpu=8") },
        ];
        let rows = cluster_hour(Y, &acc, &events).expect("registered");
        let h = H as u64;
        assert_eq!(
            rows[0],
            ClusterRow { tres: "cpu".into(), count: 32, hours: 1, alloc: 32 * h, over: 10 * h, ..Default::default() }
        );
    }

    #[test]
    fn running_jobs_count_to_the_end_of_the_window_and_waits_until_they_start() {
        let mut hours = Hours::new(Y, Y + 2 * H);
        hours.add_job(&job(Y - 100, Y + 1800, 0, "a", "u", 2, 1));
        let t = hours.take_before(Y + 2 * H);
        assert_eq!(t[0].1.alloc["cpu"], 2 * 1800);
        assert_eq!(t[0].1.plan_cpu, 2 * 1800);
        assert_eq!(t[1].1.alloc["cpu"], 2 * 3600);
        assert_eq!(t[1].1.plan_cpu, 0);
    }

    #[test]
    fn tres_parse_in_slurms_units_and_sort_in_its_order() {
        assert_eq!(
            parse_tres("cpu=2,mem=4G,node=1,billing=2,gres/gpu=1"),
            vec![
                ("cpu".to_string(), 2),
                ("mem".to_string(), 4096),
                ("node".to_string(), 1),
                ("billing".to_string(), 2),
                ("gres/gpu".to_string(), 1)
            ]
        );
        let order = drover_proto::acct::tres_order(["gres/gpu".to_string(), "cpu".to_string()]);
        assert_eq!((order[0].as_str(), order.last().map(String::as_str)), ("cpu", Some("gres/gpu")));
    }

    #[test]
    fn calendar_boundaries() {
        let c = Calendar::utc();
        assert_eq!(c.hour(Y + 5432), Y + H);
        assert_eq!(c.day(Y + 5432), Y);
        assert_eq!(c.next_day(Y + 5432), Y + 86400);
        assert_eq!(c.month(Y + 5432), Y - 86400); // 2026-12-01
        assert_eq!(c.next_month(Y), 1_798_761_600); // 2027-01-01
    }
}
