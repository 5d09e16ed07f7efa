//! Fairshare in the controller: each association's usage (CPU-seconds by billing, times the
//! QoS's `UsageFactor`), decayed with `PriorityDecayHalfLife`, kept in `StateSaveLocation`'s
//! `assoc_usage` file (as slurmctld keeps it), and the Fair Tree factors computed from it
//! over accounting's association tree (see `drover_sched::fairshare`).
//!
//! Usage is credited when a job ends (its run since the last calculation) and, for running
//! jobs, every `PriorityCalcPeriod`; factors and priorities are recomputed after either.

use drover_proto::v1;
use drover_sched::fairshare::{self, Assoc};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// The TRES whose usage is kept for `GrpTRESMins`, in this order.
pub const TRES: [&str; 5] = ["cpu", "mem", "node", "billing", "gres/gpu"];

/// Usage per (account, user), as of `at`: billing (what fairshare counts) and each of
/// [`TRES`] (what `GrpTRESMins` limits), in TRES-seconds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Usage {
    pub raw: BTreeMap<(String, String), f64>,
    pub tres: BTreeMap<(String, String), [f64; 5]>,
    /// The time the usage is decayed to (the last calculation).
    pub at: i64,
    pub last_reset: i64,
}

impl Usage {
    /// The `assoc_usage` file: a line `at last_reset`, then `account\tuser\tusage` lines
    /// (with the [`TRES`] usage after it, where known).
    pub fn load(path: &Path) -> Usage {
        let Ok(text) = std::fs::read_to_string(path) else { return Usage::default() };
        let mut lines = text.lines();
        let mut u = Usage::default();
        if let Some(head) = lines.next() {
            let mut it = head.split_whitespace().map(|x| x.parse::<i64>().unwrap_or(0));
            u.at = it.next().unwrap_or(0);
            u.last_reset = it.next().unwrap_or(0);
        }
        for l in lines {
            let f: Vec<&str> = l.split('\t').collect();
            if f.len() < 3 {
                continue;
            }
            let key = (f[0].to_string(), f[1].to_string());
            if let Ok(v) = f[2].parse::<f64>() {
                u.raw.insert(key.clone(), v);
            }
            if f.len() >= 3 + TRES.len() {
                let mut t = [0.0; 5];
                for (k, x) in f[3..3 + TRES.len()].iter().enumerate() {
                    t[k] = x.parse().unwrap_or(0.0);
                }
                u.tres.insert(key, t);
            }
        }
        u
    }

    pub fn encode(&self) -> String {
        let mut s = format!("{} {}\n", self.at, self.last_reset);
        for (key, v) in &self.raw {
            s.push_str(&format!("{}\t{}\t{v}", key.0, key.1));
            if let Some(t) = self.tres.get(key) {
                for x in t {
                    s.push_str(&format!("\t{x}"));
                }
            }
            s.push('\n');
        }
        s
    }

    /// Decays everything to `t`.
    pub fn decay_to(&mut self, t: i64, half_life: u64) {
        if self.at > 0 && t > self.at {
            let d = fairshare::decay_per_second(half_life);
            let secs = (t - self.at) as f64;
            for v in self.raw.values_mut() {
                *v = fairshare::decayed(*v, d, secs);
            }
            for t in self.tres.values_mut() {
                for v in t.iter_mut() {
                    *v = fairshare::decayed(*v, d, secs);
                }
            }
        }
        self.at = self.at.max(t);
    }

    /// Credits a run of `secs` seconds holding `held` (counts of [`TRES`]; billing is the
    /// fourth), times `factor`, to (account, user).
    pub fn credit(&mut self, account: &str, user: &str, secs: f64, held: [f64; 5], factor: f64, half_life: u64) {
        let d = fairshare::decay_per_second(half_life);
        let key = (account.to_string(), user.to_string());
        let add = fairshare::run_usage(secs, held[3], factor, d);
        if add > 0.0 {
            *self.raw.entry(key.clone()).or_default() += add;
        }
        let t = self.tres.entry(key).or_default();
        for (k, n) in held.iter().enumerate() {
            t[k] += fairshare::run_usage(secs, *n, factor, d);
        }
    }

    /// TRES-minutes used by these (account, user) pairs, summed.
    pub fn minutes<'a>(&self, keys: impl IntoIterator<Item = &'a (String, String)>) -> [f64; 5] {
        let mut out = [0.0; 5];
        for k in keys {
            if let Some(t) = self.tres.get(k) {
                for (o, v) in out.iter_mut().zip(t) {
                    *o += v / 60.0;
                }
            }
        }
        out
    }
}

/// Waiting jobs' weighted priority factors (sprio), kept in chunks of consecutive job ids
/// that the readers' view shares: a job's factors set while a view holds the table copy one
/// chunk, not the table (with 100,000 waiting jobs, a copy of the whole map at every
/// submission was a quarter of the controller's time).
#[derive(Debug, Clone, Default)]
pub struct PrioTable {
    chunks: BTreeMap<
        drover_model::job::JobId,
        std::sync::Arc<HashMap<drover_model::job::JobId, drover_sched::priority::Factors>>,
    >,
}

impl PrioTable {
    const CHUNK: drover_model::job::JobId = 512;

    pub fn get(&self, id: &drover_model::job::JobId) -> Option<&drover_sched::priority::Factors> {
        self.chunks.get(&(id / Self::CHUNK))?.get(id)
    }

    pub fn insert(&mut self, id: drover_model::job::JobId, f: drover_sched::priority::Factors) {
        std::sync::Arc::make_mut(self.chunks.entry(id / Self::CHUNK).or_default()).insert(id, f);
    }
}

impl FromIterator<(drover_model::job::JobId, drover_sched::priority::Factors)> for PrioTable {
    fn from_iter<I: IntoIterator<Item = (drover_model::job::JobId, drover_sched::priority::Factors)>>(it: I) -> Self {
        let mut t = PrioTable::default();
        t.extend(it);
        t
    }
}

impl Extend<(drover_model::job::JobId, drover_sched::priority::Factors)> for PrioTable {
    fn extend<I: IntoIterator<Item = (drover_model::job::JobId, drover_sched::priority::Factors)>>(&mut self, it: I) {
        for (id, f) in it {
            self.insert(id, f);
        }
    }
}

/// The controller's fairshare: usage, where it is kept, the factors and sshare's rows from
/// the last calculation, and when the next is due.
#[derive(Debug, Default)]
pub struct State {
    pub usage: Usage,
    pub path: std::path::PathBuf,
    pub factors: HashMap<(String, String), f64>,
    pub rows: std::sync::Arc<Vec<v1::ShareRow>>,
    pub next_calc: i64,
    /// Usage or the tree changed since the factors were computed.
    pub stale: bool,
    /// The next refresh recomputes every waiting job's priority (the association tree, QoS
    /// or limits changed), not only those of associations whose factor moved.
    pub full: bool,
    /// Associations whose usage was credited since the factors were computed (what
    /// `GrpTRESMins` holds may have moved for their subtrees).
    pub touched: std::collections::HashSet<(String, String)>,
    /// Waiting jobs by association (account, user): a refresh after a job's start or end
    /// recomputes only the jobs of the associations whose factor moved. Rebuilt by every full
    /// refresh; may hold ids that no longer wait (skipped, and pruned when met).
    pub waiting: HashMap<(String, String), std::collections::HashSet<drover_model::job::JobId>>,
    /// Waiting jobs' weighted factors (sprio), as last computed.
    pub prio: PrioTable,
    /// Up to when each running job's usage is credited (since this controller started).
    pub credited: HashMap<drover_model::job::JobId, i64>,
    /// `PriorityUsageResetPeriod=NOW` was applied (once per start).
    pub reset_now_done: bool,
}

/// The associations whose factor differs between two calculations (moved, appeared or
/// went), in order.
pub fn moved(old: &HashMap<(String, String), f64>, new: &HashMap<(String, String), f64>) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = new
        .iter()
        .filter(|(k, v)| old.get(*k) != Some(*v))
        .map(|(k, _)| k.clone())
        .chain(old.keys().filter(|k| !new.contains_key(*k)).cloned())
        .collect();
    out.sort();
    out
}

/// What a run of QoS `qos` counts for: its `UsageFactor` (1 where none is set).
pub fn usage_factor(admin: Option<&v1::AdminState>, qos: &str) -> f64 {
    admin.and_then(|a| a.qos.iter().find(|q| q.name == qos)).map_or(1.0, |q| {
        if q.usage_factor >= 0.0 {
            q.usage_factor
        } else {
            1.0
        }
    })
}

/// Fair Tree over this cluster's associations: each (account, user)'s factor, and the rows
/// sshare shows, in the tree's order.
pub fn compute(
    st: &v1::AdminState,
    cluster: &str,
    usage: &Usage,
) -> (HashMap<(String, String), f64>, Vec<v1::ShareRow>) {
    let order: Vec<(usize, &v1::AcctAssoc)> =
        drover_proto::acct::assoc_order(st).into_iter().filter(|(_, a)| a.cluster == cluster).collect();
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut tree: Vec<Assoc> = Vec::with_capacity(order.len());
    for (_, a) in &order {
        let is_user = !a.user.is_empty();
        let parent = if is_user { index.get(a.account.as_str()) } else { index.get(a.parent.as_str()) }.copied();
        if !is_user {
            index.insert(a.account.as_str(), tree.len());
        }
        let shares = a.limits.as_ref().and_then(|l| l.shares).unwrap_or(1);
        let used =
            if is_user { usage.raw.get(&(a.account.clone(), a.user.clone())).copied().unwrap_or(0.0) } else { 0.0 };
        tree.push(Assoc {
            account: a.account.clone(),
            user: is_user.then(|| a.user.clone()),
            parent: if a.account == "root" && !is_user { None } else { parent },
            shares,
            usage: used,
        });
    }
    let shares = fairshare::fair_tree(&tree);
    let mut factors = HashMap::new();
    let mut rows = Vec::with_capacity(tree.len());
    for ((depth, a), (t, s)) in order.iter().zip(tree.iter().zip(&shares)) {
        if let (Some(u), Some(f)) = (&t.user, s.factor) {
            factors.insert((t.account.clone(), u.clone()), f);
        }
        let root = t.parent.is_none();
        rows.push(v1::ShareRow {
            account: a.account.clone(),
            user: a.user.clone(),
            depth: *depth as u32,
            raw_shares: (!root).then_some(t.shares),
            norm_shares: Some(s.shares_norm),
            raw_usage: s.usage_raw,
            norm_usage: Some(s.usage_norm),
            effectv_usage: s.usage_efctv,
            fairshare: s.factor,
            level_fs: s.level_fs,
            tres_run_mins: String::new(),
        });
    }
    (factors, rows)
}

/// sshare's rows under priority/basic, which computes nothing: Slurm's associations keep the
/// values they are made with (`slurmdb_create_assoc_usage`): no normalised shares or usage
/// (blank), no usage, effective usage and level fairshare 0, a user's fairshare 0.
pub fn basic_rows(rows: &mut [v1::ShareRow]) {
    for r in rows {
        r.norm_shares = None;
        r.norm_usage = None;
        r.raw_usage = 0.0;
        r.effectv_usage = 0.0;
        r.level_fs = Some(0.0);
        r.fairshare = (!r.user.is_empty()).then_some(0.0);
    }
}

/// `PriorityUsageResetPeriod`: when usage last reset at `last` resets next, on the local
/// calendar as Slurm's `_next_reset` has it (the next midnight, Sunday, first of a month, of
/// a quarter, of a year). None: never (`NONE`; `NOW` resets once, at start).
pub fn next_reset(period: drover_model::priority_conf::UsageReset, last: i64, now: i64) -> Option<i64> {
    use drover_model::priority_conf::UsageReset as R;
    let tz = jiff::tz::TimeZone::system();
    let day = jiff::Timestamp::from_second(last).ok()?.to_zoned(tz.clone()).date();
    let at = |d: jiff::civil::Date| d.at(0, 0, 0, 0).to_zoned(tz.clone()).ok().map(|z| z.timestamp().as_second());
    let next = match period {
        R::None | R::Now => return None,
        R::Daily => {
            let mut d = day.tomorrow().ok()?;
            while at(d.tomorrow().ok()?)? < now {
                d = d.tomorrow().ok()?;
            }
            d
        }
        R::Weekly => {
            let to_sunday = 7 - i64::from(day.weekday().to_sunday_zero_offset());
            let mut d = day.checked_add(jiff::Span::new().days(to_sunday)).ok()?;
            while at(d.checked_add(jiff::Span::new().days(7)).ok()?)? < now {
                d = d.checked_add(jiff::Span::new().days(7)).ok()?;
            }
            d
        }
        R::Monthly => day.first_of_month().checked_add(jiff::Span::new().months(1)).ok()?,
        R::Quarterly => {
            let quarter = (day.month() - 1) / 3;
            jiff::civil::date(day.year(), 1, 1)
                .checked_add(jiff::Span::new().months(i64::from(quarter + 1) * 3))
                .ok()?
        }
        R::Yearly => jiff::civil::date(day.year() + 1, 1, 1),
    };
    at(next)
}

/// sshare's `TRESRunMins`: what running jobs still hold in TRES-minutes, each association
/// its own jobs' (an account its subtree's), in Slurm's TRES order.
pub fn add_run_mins(rows: &mut [v1::ShareRow], run: &HashMap<(String, String), [f64; 5]>) {
    // Rows are in tree order: an account's subtree is the rows after it that are deeper.
    let own: Vec<[f64; 5]> = rows
        .iter()
        .map(|r| {
            if r.user.is_empty() {
                [0.0; 5]
            } else {
                run.get(&(r.account.clone(), r.user.clone())).copied().unwrap_or_default()
            }
        })
        .collect();
    for k in 0..rows.len() {
        let mut sum = own[k];
        if rows[k].user.is_empty() {
            for j in k + 1..rows.len() {
                if rows[j].depth <= rows[k].depth {
                    break;
                }
                for (s, v) in sum.iter_mut().zip(&own[j]) {
                    *s += v;
                }
            }
        }
        let [cpu, mem, node, billing, gpu] = sum.map(|v| v as u64);
        let mut text = format!("cpu={cpu},mem={mem},energy=0,node={node},billing={billing},fs/disk=0,vmem=0,pages=0");
        if gpu > 0 {
            text.push_str(&format!(",gres/gpu={gpu}"));
        }
        rows[k].tres_run_mins = text;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_round_trips_its_file_and_decays() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("assoc_usage");
        let mut u = Usage { at: 1000, ..Default::default() };
        u.credit("physics", "alice", 200.0, [2.0, 4000.0, 1.0, 2.0, 0.0], 1.0, 7 * 86400);
        let m = u.minutes([&("physics".to_string(), "alice".to_string())]);
        assert!(
            (m[0] / (400.0 / 60.0) - 1.0).abs() < 0.001 && (m[1] / (800_000.0 / 60.0) - 1.0).abs() < 0.001,
            "{m:?}"
        );
        assert!((u.raw[&("physics".into(), "alice".into())] - 400.0).abs() < 0.1);
        std::fs::write(&p, u.encode()).unwrap();
        assert_eq!(Usage::load(&p), u);
        u.decay_to(1000 + 7 * 86400, 7 * 86400);
        assert!((u.raw[&("physics".into(), "alice".into())] - 200.0).abs() < 0.5);
        assert_eq!(Usage::load(&dir.path().join("none")), Usage::default());
    }

    #[test]
    fn usage_resets_on_the_calendar() {
        use drover_model::priority_conf::UsageReset as R;
        let local = |y: i16, m: i8, d: i8| {
            jiff::civil::date(y, m, d)
                .at(0, 0, 0, 0)
                .to_zoned(jiff::tz::TimeZone::system())
                .unwrap()
                .timestamp()
                .as_second()
        };
        let last = local(2026, 12, 3) + 3600 * 17; // a Thursday afternoon
        assert_eq!(next_reset(R::Daily, last, last), Some(local(2026, 12, 4)));
        assert_eq!(next_reset(R::Weekly, last, last), Some(local(2026, 12, 6)), "the next Sunday");
        assert_eq!(next_reset(R::Monthly, last, last), Some(local(2027, 1, 1)));
        assert_eq!(next_reset(R::Quarterly, last, last), Some(local(2027, 1, 1)));
        assert_eq!(next_reset(R::Quarterly, local(2026, 5, 3), 0), Some(local(2026, 7, 1)));
        assert_eq!(next_reset(R::Yearly, last, last), Some(local(2027, 1, 1)));
        assert_eq!(next_reset(R::None, last, last), None);
        // Days missed while the controller was down are skipped to the last one due.
        assert_eq!(next_reset(R::Daily, last, last + 5 * 86400), Some(local(2026, 12, 8)));
    }

    #[test]
    fn the_labs_tree_ranks_as_slurm_did() {
        // captures/slurm-22.05/sshare_mf_l.out: alice used 387, nobody else anything.
        let mut st = v1::AdminState { assocs: drover_proto::acct::root_assocs("lab"), ..Default::default() };
        let acct = |name: &str, parent: &str, shares: u32| v1::AcctAssoc {
            cluster: "lab".into(),
            account: name.into(),
            parent: parent.into(),
            limits: Some(v1::AcctLimits { shares: Some(shares), ..Default::default() }),
            ..Default::default()
        };
        let user = |name: &str, a: &str| v1::AcctAssoc {
            cluster: "lab".into(),
            account: a.into(),
            user: name.into(),
            parent: a.into(),
            limits: Some(v1::AcctLimits { shares: Some(1), ..Default::default() }),
            ..Default::default()
        };
        st.assocs.extend([
            acct("physics", "root", 1),
            acct("theory", "physics", 1),
            acct("chem", "root", 2),
            user("alice", "physics"),
            user("bob", "chem"),
            user("bob", "theory"),
            user("root", "physics"),
            user("root", "chem"),
        ]);
        let mut u = Usage::default();
        u.raw.insert(("physics".into(), "alice".into()), 387.0);
        let (f, rows) = compute(&st, "lab", &u);
        let get = |a: &str, user: &str| f[&(a.to_string(), user.to_string())];
        assert_eq!(get("root", "root"), 1.0);
        assert_eq!((get("chem", "bob"), get("chem", "root")), (1.0, 1.0));
        assert_eq!((get("physics", "root"), get("theory", "bob")), (0.5, 0.5));
        assert!((get("physics", "alice") - 1.0 / 6.0).abs() < 1e-12);
        let names: Vec<(u32, &str, &str)> =
            rows.iter().map(|r| (r.depth, r.account.as_str(), r.user.as_str())).collect();
        assert_eq!(names[..4], [(0, "root", ""), (1, "root", "root"), (1, "chem", ""), (2, "chem", "bob")]);
        assert_eq!(rows[0].raw_shares, None);
        assert_eq!(rows[0].raw_usage, 387.0);
        // A running job of alice's holding 2 CPUs for 30 more minutes.
        let mut rows = rows;
        let run: HashMap<(String, String), [f64; 5]> =
            [(("physics".to_string(), "alice".to_string()), [60.0, 120_000.0, 30.0, 60.0, 0.0])].into();
        add_run_mins(&mut rows, &run);
        let of = |a: &str, u: &str| rows.iter().find(|r| r.account == a && r.user == u).unwrap().tres_run_mins.clone();
        let alice = "cpu=60,mem=120000,energy=0,node=30,billing=60,fs/disk=0,vmem=0,pages=0";
        assert_eq!(
            (of("physics", "alice"), of("physics", ""), of("root", "")),
            (alice.into(), alice.into(), alice.into())
        );
        assert!(of("chem", "").starts_with("cpu=0,"));
    }

    #[test]
    fn priority_basic_rows_keep_the_tree_and_compute_nothing() {
        let mut st = v1::AdminState { assocs: drover_proto::acct::root_assocs("lab"), ..Default::default() };
        st.assocs.push(v1::AcctAssoc {
            cluster: "lab".into(),
            account: "root".into(),
            user: "alice".into(),
            parent: "root".into(),
            ..Default::default()
        });
        let mut u = Usage::default();
        u.raw.insert(("root".into(), "alice".into()), 50.0);
        let (_, mut rows) = compute(&st, "lab", &u);
        assert!(rows.iter().any(|r| r.norm_shares.is_some()), "Fair Tree normalises shares");
        basic_rows(&mut rows);
        for r in &rows {
            assert_eq!((r.norm_shares, r.norm_usage, r.raw_usage, r.effectv_usage), (None, None, 0.0, 0.0), "{r:?}");
            assert_eq!(r.level_fs, Some(0.0));
            assert_eq!(r.fairshare, (!r.user.is_empty()).then_some(0.0));
        }
        assert_eq!(rows.len(), 3, "the tree is kept: root, and its two users");
    }
}
