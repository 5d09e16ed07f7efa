//! `sreport`: reports from the usage `drover accounting` rolls up by hour, day and month
//! (cluster utilization, usage by account and user, top users) and from job records (job
//! sizes by account), with Slurm 22.05's commands, conditions, columns and numbers.
//!
//! ```text
//!  argv ──options (anywhere, as getopt permutes)──► command words ──► report
//!  report ──Accounting.Usage (rolled-up rows) / AdminGet (hierarchy) / Jobs──► table
//! ```

use crate::common;
use drover_proto::v1::{self, accounting_client::AccountingClient};
use std::collections::{BTreeMap, BTreeSet, HashMap};

const RULE: &str = "--------------------------------------------------------------------------------";

/// How usage is printed (`-t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TimeFmt {
    Secs,
    Mins,
    Hours,
    Percent,
    SecsPer,
    MinsPer,
    HoursPer,
}

impl TimeFmt {
    fn name(self) -> &'static str {
        match self {
            TimeFmt::Secs => "Seconds",
            TimeFmt::Mins => "Minutes",
            TimeFmt::Hours => "Hours",
            TimeFmt::Percent => "Percentage of Total",
            TimeFmt::SecsPer => "Seconds/Percentage of Total",
            TimeFmt::MinsPer => "Minutes/Percentage of Total",
            TimeFmt::HoursPer => "Hours/Percentage of Total",
        }
    }

    fn per(self) -> bool {
        matches!(self, TimeFmt::SecsPer | TimeFmt::MinsPer | TimeFmt::HoursPer)
    }

    /// `-t` as Slurm matches it (`_set_time_format`).
    fn parse(s: &str) -> Option<TimeFmt> {
        let n = s.len();
        let is = |name: &str, min: usize| prefix_of(s, name, n.max(min));
        Some(if is("SecPer", 6) {
            TimeFmt::SecsPer
        } else if is("MinPer", 6) {
            TimeFmt::MinsPer
        } else if is("HourPer", 6) {
            TimeFmt::HoursPer
        } else if is("Seconds", 1) {
            TimeFmt::Secs
        } else if is("Minutes", 1) {
            TimeFmt::Mins
        } else if is("Hours", 1) {
            TimeFmt::Hours
        } else if is("Percent", 1) {
            TimeFmt::Percent
        } else {
            return None;
        })
    }

    /// A usage value as `slurmdb_report_print_time` writes it (`total`: what percentages are
    /// of).
    fn show(self, value: u64, total: u64) -> String {
        let total = total.max(1) as f64;
        let v = value as f64;
        let pct = v / total * 100.0;
        match self {
            TimeFmt::Secs => value.to_string(),
            TimeFmt::Mins => format!("{:.0}", v / 60.0),
            TimeFmt::Hours => format!("{:.0}", v / 3600.0),
            TimeFmt::Percent => format!("{pct:.2}%"),
            TimeFmt::SecsPer => format!("{value}({pct:.2}%)"),
            TimeFmt::MinsPer => format!("{:.0}({pct:.2}%)", v / 60.0),
            TimeFmt::HoursPer => format!("{:.0}({pct:.2}%)", v / 3600.0),
        }
    }
}

/// C's `strncasecmp(word, name, n) == 0`: the first `n` characters agree (a shorter string
/// ends there, and both must end together).
fn prefix_of(word: &str, name: &str, n: usize) -> bool {
    let w: Vec<u8> = word.bytes().take(n).map(|b| b.to_ascii_lowercase()).collect();
    let m: Vec<u8> = name.bytes().take(n).map(|b| b.to_ascii_lowercase()).collect();
    w == m
}

/// The command-wide options.
#[derive(Debug, Clone)]
struct Opts {
    all_clusters: bool,
    cluster: Option<String>,
    noheader: bool,
    /// Some(true): `-p` (trailing `|`); Some(false): `-P`.
    parsable: Option<bool>,
    time: TimeFmt,
    tres: Option<String>,
    sort_by_name: bool,
}

/// A column: its kind, header, and width (negative: left-justified).
#[derive(Debug, Clone)]
struct Field {
    kind: Kind,
    name: String,
    len: i32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Cluster,
    TresCount,
    Alloc,
    Down,
    Idle,
    PlanDown,
    Over,
    Plan,
    Reported,
    Account,
    Login,
    Proper,
    Used,
    Energy,
    TresName,
    Wckey,
    Size,
    Count,
}

/// Where report output goes, as Slurm's `print_fields` writes it.
struct Out<'a> {
    o: &'a Opts,
    buf: String,
}

impl Out<'_> {
    fn header(&mut self, fields: &[Field]) {
        if self.o.noheader {
            return;
        }
        let n = fields.len();
        for (k, f) in fields.iter().enumerate() {
            match self.o.parsable {
                Some(false) if k + 1 == n => self.buf.push_str(&f.name),
                Some(_) => {
                    self.buf.push_str(&f.name);
                    self.buf.push('|');
                }
                None => self.buf.push_str(&pad(&cut(&f.name, f.len.unsigned_abs() as usize), f.len)),
            }
        }
        self.buf.push('\n');
        if self.o.parsable.is_some() {
            return;
        }
        for f in fields {
            self.buf.push_str(&"-".repeat(f.len.unsigned_abs() as usize));
            self.buf.push(' ');
        }
        self.buf.push('\n');
    }

    /// A text cell (`print_fields_str`): None prints blank; a longer value is cut with `+`.
    fn str(&mut self, f: &Field, v: Option<&str>, last: bool) {
        match self.o.parsable {
            Some(false) if last => self.buf.push_str(v.unwrap_or("")),
            Some(_) => {
                self.buf.push_str(v.unwrap_or(""));
                self.buf.push('|');
            }
            None => {
                let w = f.len.unsigned_abs() as usize;
                let s = match v {
                    Some(v) if v.chars().count() > w => {
                        let mut s: String = v.chars().take(w.saturating_sub(1)).collect();
                        s.push('+');
                        s
                    }
                    Some(v) => v.to_string(),
                    None => " ".to_string(),
                };
                self.buf.push_str(&pad(&s, f.len));
            }
        }
    }

    /// A number cell (`print_fields_uint`).
    fn uint(&mut self, f: &Field, v: u64, last: bool) {
        let s = v.to_string();
        match self.o.parsable {
            Some(false) if last => self.buf.push_str(&s),
            Some(_) => {
                self.buf.push_str(&s);
                self.buf.push('|');
            }
            None => self.buf.push_str(&pad(&s, f.len)),
        }
    }

    /// A usage cell (`slurmdb_report_print_time`): cut plainly to the width.
    fn time(&mut self, f: &Field, fmt: TimeFmt, v: u64, total: u64, last: bool) {
        let s = fmt.show(v, total);
        match self.o.parsable {
            Some(false) if last => self.buf.push_str(&s),
            Some(_) => {
                self.buf.push_str(&s);
                self.buf.push('|');
            }
            None => self.buf.push_str(&pad(&cut(&s, f.len.unsigned_abs() as usize), f.len)),
        }
    }

    fn end_line(&mut self) {
        self.buf.push('\n');
    }
}

fn cut(s: &str, w: usize) -> String {
    s.chars().take(w).collect()
}

/// Justified to `len` (negative: left), then the separating space.
fn pad(s: &str, len: i32) -> String {
    let w = len.unsigned_abs() as usize;
    if len < 0 {
        format!("{s:<w$} ")
    } else {
        format!("{s:>w$} ")
    }
}

/// The width a usage column needs for `secs` (`sreport_set_usage_col_width`).
fn usage_width(secs: u64, fmt: TimeFmt) -> i32 {
    let mut len = 8;
    let mut order: u128 = 100_000_000;
    let max: u128 = order * 100_000_000_000_000_000;
    while order < max {
        if u128::from(secs) < order {
            break;
        }
        len += 1;
        order *= 10;
    }
    if fmt.per() {
        len += 9;
    }
    len
}

/// A column of a cluster report (`cluster_reports.c`'s `_setup_print_fields_list`); None:
/// unknown.
fn cluster_field(spec: &str, o: &Opts, tree: bool) -> Option<Field> {
    let (name, newlen) = split_width(spec);
    let n = name.len();
    let is = |full: &str, min: usize| prefix_of(name, full, n.max(min));
    let per = o.time.per();
    let w = |per_len: i32, len: i32| if per { per_len } else { len };
    let (kind, header, len) = if is("Accounts", 2) {
        (Kind::Account, "Account", if tree { -20 } else { 15 })
    } else if is("allocated", 2) {
        (Kind::Alloc, "Allocated", w(20, 12))
    } else if is("Cluster", 2) {
        (Kind::Cluster, "Cluster", 9)
    } else if is("down", 1) {
        (Kind::Down, "Down", w(18, 10))
    } else if is("idle", 1) {
        (Kind::Idle, "Idle", w(20, 12))
    } else if is("Login", 1) {
        (Kind::Login, "Login", 9)
    } else if is("overcommitted", 1) {
        (Kind::Over, "Over Comm", w(18, 9))
    } else if is("PlannedDown", 2) {
        (Kind::PlanDown, "PLND Down", w(18, 10))
    } else if is("Proper", 2) {
        (Kind::Proper, "Proper Name", 15)
    } else if is("reported", 3) {
        (Kind::Reported, "Reported", w(20, 12))
    } else if is("reserved", 3) || is("planned", 4) {
        (Kind::Plan, "Planned", w(18, 9))
    } else if is("TresCount", 5) || is("cpucount", 2) || is("count", 2) {
        (Kind::TresCount, "TRES Count", 10)
    } else if is("TresName", 5) {
        (Kind::TresName, "TRES Name", 14)
    } else if is("Used", 1) {
        (Kind::Used, "Used", w(18, 10))
    } else if is("WCKey", 2) {
        (Kind::Wckey, "WCKey", if tree { 20 } else { 15 })
    } else if is("Energy", 1) {
        (Kind::Energy, "Energy", w(18, 10))
    } else {
        return None;
    };
    Some(Field { kind, name: header.into(), len: newlen.unwrap_or(len) })
}

/// A column of `user TopUsage` (`user_reports.c`).
fn user_field(spec: &str, o: &Opts) -> Option<Field> {
    let (name, newlen) = split_width(spec);
    let n = name.len();
    let is = |full: &str, min: usize| prefix_of(name, full, n.max(min));
    let w = if o.time.per() { 18 } else { 10 };
    let (kind, header, len) = if is("Accounts", 1) {
        (Kind::Account, "Account", 15)
    } else if is("Cluster", 1) {
        (Kind::Cluster, "Cluster", 9)
    } else if is("Energy", 1) {
        (Kind::Energy, "Energy", w)
    } else if is("Login", 1) {
        (Kind::Login, "Login", 9)
    } else if is("Proper", 1) {
        (Kind::Proper, "Proper Name", 15)
    } else if is("TresName", 5) {
        (Kind::TresName, "TRES Name", 14)
    } else if is("Used", 1) {
        (Kind::Used, "Used", w)
    } else {
        return None;
    };
    Some(Field { kind, name: header.into(), len: newlen.unwrap_or(len) })
}

/// A column of a job report (`job_reports.c`).
fn job_field(spec: &str) -> Option<Field> {
    let (name, newlen) = split_width(spec);
    let n = name.len();
    let is = |full: &str, min: usize| prefix_of(name, full, n.max(min));
    let (kind, header, len) = if is("Accounts", 1) {
        (Kind::Account, "Account", 9)
    } else if is("Cluster", 1) {
        (Kind::Cluster, "Cluster", 9)
    } else if is("Wckey", 1) {
        (Kind::Wckey, "Wckey", 9)
    } else {
        return None;
    };
    Some(Field { kind, name: header.into(), len: newlen.unwrap_or(len) })
}

/// `Name%N`: the name and the width asked for.
fn split_width(spec: &str) -> (&str, Option<i32>) {
    match spec.split_once('%') {
        Some((n, w)) => (n, w.parse::<i32>().ok().filter(|w| *w != 0)),
        None => (spec, None),
    }
}

/// The fields of a `format=` list (or the report's default), with Slurm's message for an
/// unknown one.
fn fields(specs: &[String], make: impl Fn(&str) -> Option<Field>, err: &mut String) -> Vec<Field> {
    let mut out = Vec::new();
    for s in specs {
        match make(s) {
            Some(f) => out.push(f),
            None => err.push_str(&format!(" Unknown field '{}'\n", split_width(s).0)),
        }
    }
    out
}

fn list(v: &str) -> Vec<String> {
    v.split(',').filter(|s| !s.is_empty()).map(String::from).collect()
}

/// The conditions of a report (`start=`, `end=`, `users=`, ...).
#[derive(Debug, Default)]
struct Conds {
    start: i64,
    end: i64,
    clusters: Vec<String>,
    all_clusters: bool,
    users: Vec<String>,
    accounts: Vec<String>,
    format: Vec<String>,
    tree: bool,
    group: bool,
    top: Option<u32>,
    acct_as_parent: bool,
    flat: bool,
    job_count: bool,
    grouping: Vec<String>,
    individual: bool,
}

#[derive(Clone, Copy, PartialEq)]
enum Report {
    Cluster,
    Assoc,
    Top,
    Job,
}

/// Reads a report's conditions; unknown ones are reported and the report still runs (as
/// Slurm does), with exit status 1.
fn conds(words: &[String], r: Report, now: i64, err: &mut String) -> Conds {
    let mut c = Conds::default();
    for w in words {
        let (key, val) = match w.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (w.as_str(), None),
        };
        let n = key.len();
        let is = |full: &str, min: usize| prefix_of(key, full, n.max(min));
        let time = |v: &str| common::parse_time_spec(v, now).unwrap_or(0);
        match (val, r) {
            (None, _) if is("all_clusters", 1) => c.all_clusters = true,
            (None, Report::Assoc) if is("Tree", 4) => c.tree = true,
            (None, Report::Top) if is("group", 1) => c.group = true,
            (None, Report::Job) if is("AcctAsParent", 2) => c.acct_as_parent = true,
            (None, Report::Job) if is("PrintJobCount", 2) => c.job_count = true,
            (None, Report::Job) if is("FlatView", 2) => c.flat = true,
            (None, Report::Cluster | Report::Job) => c.clusters.extend(list(key)),
            (None, _) => c.users.extend(list(key)),
            (Some(v), Report::Cluster | Report::Job) if is("Clusters", 1) => c.clusters.extend(list(v)),
            (Some(v), Report::Assoc) if is("Clusters", 1) => c.clusters.extend(list(v)),
            (Some(v), Report::Top) if is("Clusters", 1) => c.clusters.extend(list(v)),
            (Some(v), _) if is("End", 1) => c.end = time(v).min(now),
            (Some(v), _) if is("Start", 1) => c.start = time(v),
            (Some(v), _) if is("Format", 1) => c.format.extend(list(v)),
            (Some(v), Report::Assoc | Report::Top | Report::Job) if is("Users", 1) => c.users.extend(list(v)),
            (Some(v), Report::Assoc | Report::Top | Report::Job) if is("Accounts", 2) || is("Acct", 4) => {
                c.accounts.extend(list(v))
            }
            (Some(v), Report::Top) if is("TopCount", 1) => c.top = v.parse::<i64>().ok().map(|n| n.max(0) as u32),
            (Some(v), Report::Job) if is("grouping", 1) => {
                if v.eq_ignore_ascii_case("individual") {
                    c.individual = true;
                } else {
                    c.grouping.extend(list(v));
                }
            }
            _ => {
                let extra = if r == Report::Job { "" } else { "\nUse keyword set to modify value" };
                err.push_str(&format!(" Unknown condition: {w}{extra}\n"));
            }
        }
    }
    let (s, e) = report_window(c.start, c.end, now);
    c.start = s;
    c.end = e;
    c
}

/// The window of a report (`slurmdb_report_set_start_end_time`): yesterday by default;
/// given times rounded to the nearest hour; at least an hour long.
fn report_window(start: i64, end: i64, now: i64) -> (i64, i64) {
    let zone = common::tz();
    let at = |t: i64| jiff::Timestamp::from_second(t).unwrap_or(jiff::Timestamp::UNIX_EPOCH).to_zoned(zone.clone());
    let round = |t: i64| -> i64 {
        let z = at(t);
        let (min, sec) = (i64::from(z.minute()), i64::from(z.second()));
        let hour = t - min * 60 - sec;
        if min + i64::from(sec >= 30) >= 30 {
            hour + 3600
        } else {
            hour
        }
    };
    let midnight = |t: i64, days_back: i64| -> i64 {
        let d = at(t).date();
        let d = d.checked_sub(jiff::Span::new().days(days_back)).unwrap_or(d);
        d.at(0, 0, 0, 0).to_zoned(zone.clone()).map_or(t, |z| z.timestamp().as_second())
    };
    let end = if end == 0 { midnight(now, 0) } else { round(end) };
    let start = if start == 0 { midnight(now, 1) } else { round(start) };
    (start, if end - start < 3600 { start + 3600 } else { end })
}

/// The first comma-separated part of a user's GECOS field (sreport's "Proper Name").
fn proper_name(user: &str) -> Option<String> {
    let u = nix::unistd::User::from_name(user).ok().flatten()?;
    let g = u.gecos.to_string_lossy().into_owned();
    Some(g.split(',').find(|p| !p.is_empty()).map_or(g.clone(), String::from))
}

/// The TRES a report covers (`-T`), in Slurm's order; Err: fatal.
fn tres_list(o: &Opts, known: &[String]) -> Result<Vec<String>, String> {
    let Some(spec) = &o.tres else { return Ok(vec!["cpu".into()]) };
    let mut out: Vec<String> = Vec::new();
    for tok in spec.split(',') {
        if tok.eq_ignore_ascii_case("ALL") {
            out = known.to_vec();
            break;
        }
        if let Some(t) = known.iter().find(|k| k.eq_ignore_ascii_case(tok)) {
            if t == "node" && (o.time.per() || o.time == TimeFmt::Percent) {
                return Err(
                    "TRES node usage is no longer reported in percent format reports.  Please use TRES CPU instead."
                        .into(),
                );
            }
            out.push(t.clone());
        }
    }
    if out.is_empty() {
        return Err("No valid TRES given".into());
    }
    Ok(out)
}

fn window_header(o: &Opts, out: &mut String, title: &str, start: i64, end: i64, secs: bool) {
    if o.noheader {
        return;
    }
    out.push_str(RULE);
    out.push('\n');
    let span = if secs { format!(" ({} secs)", end - start) } else { String::new() };
    out.push_str(&format!("{title} {} - {}{span}\n", common::fmt_time(start), common::fmt_time(end - 1)));
    if o.time == TimeFmt::Percent {
        out.push_str(&format!("Usage reported in {}\n", o.time.name()));
    } else {
        let what = if o.tres.is_some() { "TRES" } else { "CPU" };
        out.push_str(&format!("Usage reported in {what} {}\n", o.time.name()));
    }
    out.push_str(RULE);
    out.push('\n');
}

/// A report's columns: `format=`, else its default with `-T` (TRES names) or without.
fn report_specs(c: &Conds, o: &Opts, with_tres: &str, plain: &str) -> Vec<String> {
    if !c.format.is_empty() {
        c.format.clone()
    } else if o.tres.is_some() {
        list(with_tres)
    } else {
        list(plain)
    }
}

/// What the association reports read: the window's usage with associations', the hierarchy,
/// and the TRES to report.
async fn assoc_data(
    o: &Opts,
    c: &Conds,
    src: &mut Source,
    here: &str,
) -> Result<(v1::AcctUsage, v1::AdminState, Vec<String>), String> {
    let u = src.usage(clusters_of(o, c, here), c.start, c.end, true).await?;
    let st = src.admin().await?;
    let tres = tres_list(o, &known_tres(&u))?;
    Ok((u, st, tres))
}

/// What the reports read from accounting.
struct Source {
    client: AccountingClient<tonic::transport::Channel>,
}

impl Source {
    async fn usage(
        &mut self,
        clusters: Vec<String>,
        start: i64,
        end: i64,
        assocs: bool,
    ) -> Result<v1::AcctUsage, String> {
        let q = v1::AcctUsageQuery { clusters, start, end, assocs };
        self.client
            .usage(q)
            .await
            .map(|r| r.into_inner())
            .map_err(|s| format!("Problem with cluster query: {}", s.message()))
    }

    async fn admin(&mut self) -> Result<v1::AdminState, String> {
        self.client.admin_get(v1::Empty {}).await.map(|r| r.into_inner()).map_err(|s| s.message().to_string())
    }

    async fn jobs(&mut self, q: v1::AcctQuery) -> Result<Vec<v1::AcctJob>, String> {
        let mut s =
            self.client.jobs(q).await.map_err(|s| format!("Problem with job query: {}", s.message()))?.into_inner();
        let mut all = Vec::new();
        while let Some(r) = s.message().await.map_err(|s| format!("Problem with job query: {}", s.message()))? {
            all.extend(r.jobs);
        }
        Ok(all)
    }
}

/// The clusters a report is about: `-a`/`all_clusters` (every one), `-M`/`clusters=`, or
/// this one.
fn clusters_of(o: &Opts, c: &Conds, here: &str) -> Vec<String> {
    if o.all_clusters || c.all_clusters {
        return Vec::new();
    }
    let mut v: Vec<String> = o.cluster.as_deref().map(list).unwrap_or_default();
    v.extend(c.clusters.iter().cloned());
    if v.is_empty() {
        v.push(here.to_string());
    }
    v
}

/// Every TRES the accounting rows name, in sreport's order.
fn known_tres(u: &v1::AcctUsage) -> Vec<String> {
    drover_proto::acct::tres_order(
        u.clusters.iter().map(|c| c.tres.clone()).chain(u.assocs.iter().map(|a| a.tres.clone())),
    )
}

/// One cluster's totals per TRES over the window.
fn cluster_totals(u: &v1::AcctUsage) -> BTreeMap<String, HashMap<String, v1::AcctClusterUsage>> {
    let mut m: BTreeMap<String, HashMap<String, v1::AcctClusterUsage>> = BTreeMap::new();
    for c in &u.clusters {
        m.entry(c.cluster.clone()).or_default().insert(c.tres.clone(), c.clone());
    }
    m
}

/// Reported TRES-seconds: everything but overcommitted.
fn reported(c: &v1::AcctClusterUsage) -> u64 {
    c.alloc + c.down + c.pdown + c.idle + c.plan
}

async fn cluster_utilization(
    o: &Opts,
    words: &[String],
    src: &mut Source,
    here: &str,
    now: i64,
    out: &mut String,
) -> Result<bool, String> {
    let mut err = String::new();
    let c = conds(words, Report::Cluster, now, &mut err);
    let u = src.usage(clusters_of(o, &c, here), c.start, c.end, false).await?;
    let tres = tres_list(o, &known_tres(&u))?;
    let named_node = o.tres.as_deref().is_some_and(|t| t.split(',').any(|x| x.eq_ignore_ascii_case("node")));
    if named_node {
        return Err(
            "TRES node usage is no longer reported in the Cluster Utilization report.  Please use TRES CPU instead."
                .into(),
        );
    }
    // Nodes are not rolled up for the cluster (Slurm keeps no cluster rows for them).
    let tres: Vec<String> = tres.into_iter().filter(|t| t != "node").collect();
    window_header(o, out, "Cluster Utilization", c.start, c.end, false);
    let specs = report_specs(&c, o, "Cl,TresName,al,d,planned,i,res,rep", "Cl,al,d,planned,i,res,rep");
    let mut fs = fields(&specs, |s| cluster_field(s, o, false), &mut err);
    let totals = cluster_totals(&u);
    let total_time = (c.end - c.start) as u64;
    let mut max = [0u64; 7];
    for per in totals.values() {
        for t in &tres {
            if let Some(r) = per.get(t) {
                for (k, v) in [r.alloc, r.down, r.idle, r.plan, r.over, r.pdown, reported(r)].into_iter().enumerate() {
                    max[k] = max[k].max(v);
                }
            }
        }
    }
    for f in &mut fs {
        let k = match f.kind {
            Kind::Alloc | Kind::Energy => 0,
            Kind::Down => 1,
            Kind::Idle => 2,
            Kind::Plan => 3,
            Kind::Over => 4,
            Kind::PlanDown => 5,
            Kind::Reported => 6,
            _ => continue,
        };
        f.len = usage_width(max[k], o.time);
    }
    let mut w = Out { o, buf: std::mem::take(out) };
    w.header(&fs);
    let n = fs.len();
    for (cluster, per) in &totals {
        for t in &tres {
            let Some(r) = per.get(t) else { continue };
            let rep = reported(r);
            let count = r.count / r.hours.max(1);
            for (k, f) in fs.iter().enumerate() {
                let last = k + 1 == n;
                match f.kind {
                    Kind::Cluster => w.str(f, Some(cluster), last),
                    Kind::TresCount => w.uint(f, count, last),
                    Kind::Alloc => w.time(f, o.time, r.alloc, rep, last),
                    Kind::Down => w.time(f, o.time, r.down, rep, last),
                    Kind::Idle => w.time(f, o.time, r.idle, rep, last),
                    Kind::Plan => w.time(f, o.time, r.plan, rep, last),
                    Kind::Over => w.time(f, o.time, r.over, rep, last),
                    Kind::PlanDown => w.time(f, o.time, r.pdown, rep, last),
                    Kind::Reported => w.time(f, o.time, rep, total_time * count, last),
                    Kind::Energy => {
                        let e = per.get("energy").map_or(0, |e| e.count / e.hours.max(1));
                        w.time(f, o.time, e, e, last)
                    }
                    Kind::TresName => w.str(f, Some(t), last),
                    _ => w.str(f, None, last),
                }
            }
            w.end_line();
        }
    }
    *out = w.buf;
    eprint!("{err}");
    Ok(err.is_empty())
}

/// One row of an association report: an account (user None) or a user in one.
struct AssocRow {
    cluster: String,
    account: String,
    user: Option<String>,
    depth: usize,
    /// TRES-seconds per TRES.
    tres: HashMap<String, u64>,
}

/// The association rows of `cluster`, in Slurm's hierarchical order (an account, its users,
/// its sub-accounts), each account with what its whole subtree used; only those with usage.
fn assoc_rows(cluster: &str, u: &v1::AcctUsage, st: &v1::AdminState, c: &Conds) -> Vec<AssocRow> {
    // Usage per (account, user).
    let mut used: BTreeMap<(String, String), HashMap<String, u64>> = BTreeMap::new();
    for a in u.assocs.iter().filter(|a| a.cluster == cluster) {
        *used.entry((a.account.clone(), a.user.clone())).or_default().entry(a.tres.clone()).or_default() += a.alloc;
    }
    let mut children: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut users: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for a in st.assocs.iter().filter(|a| a.cluster == cluster) {
        if a.user.is_empty() {
            if a.account != "root" {
                children.entry(a.parent.as_str()).or_default().insert(a.account.as_str());
            }
        } else {
            users.entry(a.account.clone()).or_default().insert(a.user.clone());
        }
    }
    let known: BTreeSet<&str> = children.values().flatten().copied().chain(std::iter::once("root")).collect();
    for (acct, user) in used.keys() {
        users.entry(acct.clone()).or_default().insert(user.clone());
        // Usage of an account accounting does not know (jobs ran before it was added, or
        // associations are not enforced) shows under root, not nowhere.
        if !known.contains(acct.as_str()) {
            children.entry("root").or_default().insert(acct.as_str());
        }
    }
    struct Walk<'a> {
        children: &'a BTreeMap<&'a str, BTreeSet<&'a str>>,
        users: &'a BTreeMap<String, BTreeSet<String>>,
        used: &'a BTreeMap<(String, String), HashMap<String, u64>>,
        cluster: &'a str,
        out: Vec<AssocRow>,
    }
    impl Walk<'_> {
        /// Pushes the account's rows; returns its subtree's usage.
        fn account(&mut self, acct: &str, depth: usize, seen: &mut BTreeSet<String>) -> Option<HashMap<String, u64>> {
            if !seen.insert(acct.to_string()) {
                return None;
            }
            let at = self.out.len();
            self.out.push(AssocRow {
                cluster: self.cluster.into(),
                account: acct.into(),
                user: None,
                depth,
                tres: HashMap::new(),
            });
            let mut total: Option<HashMap<String, u64>> = None;
            let add = |total: &mut Option<HashMap<String, u64>>, m: &HashMap<String, u64>| {
                let t = total.get_or_insert_with(HashMap::new);
                for (k, v) in m {
                    *t.entry(k.clone()).or_default() += v;
                }
            };
            for user in self.users.get(acct).into_iter().flatten() {
                if let Some(m) = self.used.get(&(acct.to_string(), user.clone())) {
                    add(&mut total, m);
                    self.out.push(AssocRow {
                        cluster: self.cluster.into(),
                        account: acct.into(),
                        user: Some(user.clone()),
                        depth: depth + 1,
                        tres: m.clone(),
                    });
                }
            }
            for child in self.children.get(acct).cloned().into_iter().flatten() {
                if let Some(m) = self.account(child, depth + 1, seen) {
                    add(&mut total, &m);
                }
            }
            match &total {
                Some(t) => self.out[at].tres = t.clone(),
                None => {
                    self.out.truncate(at);
                }
            }
            total
        }
    }
    let mut w = Walk { children: &children, users: &users, used: &used, cluster, out: Vec::new() };
    w.account("root", 0, &mut BTreeSet::new());
    let mut rows = w.out;
    if !c.accounts.is_empty() {
        // Each named account's subtree.
        let mut keep = vec![false; rows.len()];
        for (k, r) in rows.iter().enumerate() {
            if r.user.is_none() && c.accounts.contains(&r.account) {
                keep[k] = true;
                for (j, s) in rows.iter().enumerate().skip(k + 1) {
                    if s.depth <= r.depth {
                        break;
                    }
                    keep[j] = true;
                }
            }
        }
        let mut it = keep.into_iter();
        rows.retain(|_| it.next().unwrap_or(false));
    }
    if !c.users.is_empty() {
        rows.retain(|r| r.user.as_ref().is_some_and(|u| c.users.contains(u)));
    }
    rows
}

/// The column widths of Used and Energy from the first row (the largest), as Slurm sizes
/// them (`sreport_set_usage_column_width`).
fn size_usage(fs: &mut [Field], first: Option<&HashMap<String, u64>>, tres: &[String], o: &Opts) {
    let energy = fs.iter().any(|f| f.kind == Kind::Energy);
    let get = |t: &str| first.and_then(|m| m.get(t)).copied().unwrap_or(0);
    let usage = if energy { get("cpu") } else { tres.iter().map(|t| get(t)).max().unwrap_or(0) };
    for f in fs.iter_mut() {
        match f.kind {
            Kind::Used => f.len = usage_width(usage, o.time),
            Kind::Energy => f.len = usage_width(get("energy"), o.time),
            _ => {}
        }
    }
}

/// What one row of a usage report shows: its account (as printed), user, and TRES-seconds.
struct Usage<'a> {
    account: &'a str,
    user: Option<&'a str>,
    used: &'a HashMap<String, u64>,
}

/// Prints a usage row: one line per TRES.
fn usage_lines(
    w: &mut Out,
    fs: &[Field],
    tres: &[String],
    cluster: &str,
    totals: &HashMap<String, v1::AcctClusterUsage>,
    row: Usage,
) {
    let Usage { account, user, used } = row;
    let n = fs.len();
    let fmt = w.o.time;
    let proper = user.and_then(proper_name);
    for t in tres {
        let total = totals.get(t).map_or(0, reported);
        for (k, f) in fs.iter().enumerate() {
            let last = k + 1 == n;
            match f.kind {
                Kind::Cluster => w.str(f, Some(cluster), last),
                Kind::Account => w.str(f, Some(account), last),
                Kind::Login => w.str(f, user, last),
                Kind::Proper => w.str(f, proper.as_deref(), last),
                Kind::Used => w.time(f, fmt, used.get(t).copied().unwrap_or(0), total, last),
                Kind::Energy => {
                    let e_total = totals.get("energy").map_or(0, reported);
                    w.time(f, fmt, used.get("energy").copied().unwrap_or(0), e_total, last)
                }
                Kind::TresName => w.str(f, Some(t), last),
                _ => w.str(f, None, last),
            }
        }
        w.end_line();
    }
}

async fn account_by_user(
    o: &Opts,
    words: &[String],
    src: &mut Source,
    here: &str,
    now: i64,
    out: &mut String,
) -> Result<bool, String> {
    let mut err = String::new();
    let c = conds(words, Report::Assoc, now, &mut err);
    let specs = report_specs(&c, o, "Cluster,Ac,Login,Proper,TresName,Used", "Cluster,Ac,Login,Proper,Used,Energy");
    let mut fs = fields(&specs, |s| cluster_field(s, o, c.tree), &mut err);
    let (u, st, tres) = assoc_data(o, &c, src, here).await?;
    window_header(o, out, "Cluster/Account/User Utilization", c.start, c.end, true);
    let totals = cluster_totals(&u);
    let rows: Vec<AssocRow> = totals.keys().flat_map(|cl| assoc_rows(cl, &u, &st, &c)).collect();
    size_usage(&mut fs, rows.first().map(|r| &r.tres), &tres, o);
    let mut w = Out { o, buf: std::mem::take(out) };
    w.header(&fs);
    let empty = HashMap::new();
    for r in &rows {
        let acct = if c.tree { format!("{}{}", " ".repeat(r.depth), r.account) } else { r.account.clone() };
        usage_lines(
            &mut w,
            &fs,
            &tres,
            &r.cluster,
            totals.get(&r.cluster).unwrap_or(&empty),
            Usage { account: &acct, user: r.user.as_deref(), used: &r.tres },
        );
    }
    *out = w.buf;
    eprint!("{err}");
    Ok(err.is_empty())
}

/// A user's row of `UserUtilizationByAccount` and `user TopUsage`.
struct UserRow {
    cluster: String,
    user: String,
    accounts: Vec<String>,
    tres: HashMap<String, u64>,
}

/// Users by usage of `by` (most first), then by name (`sort_user_dec`); by name only with
/// `-s name`.
fn sort_users(rows: &mut [UserRow], by: &str, o: &Opts) {
    rows.sort_by(|a, b| {
        let used = |r: &UserRow| r.tres.get(by).copied().unwrap_or(0);
        let t = if o.sort_by_name { std::cmp::Ordering::Equal } else { used(b).cmp(&used(a)) };
        t.then_with(|| a.user.cmp(&b.user))
    });
}

/// Users' usage per (cluster, user, account), in Slurm's association order, filtered.
fn user_rows(u: &v1::AcctUsage, st: &v1::AdminState, c: &Conds, clusters: &[String]) -> Vec<UserRow> {
    let mut rows: Vec<UserRow> = Vec::new();
    let mut at: HashMap<(String, String, String), usize> = HashMap::new();
    let order: HashMap<(&str, &str, &str), usize> = drover_proto::acct::assoc_order(st)
        .into_iter()
        .enumerate()
        .map(|(k, (_, a))| ((a.cluster.as_str(), a.account.as_str(), a.user.as_str()), k))
        .collect();
    let mut assocs: Vec<&v1::AcctAssocUsage> = u.assocs.iter().filter(|a| clusters.contains(&a.cluster)).collect();
    assocs.sort_by_key(|a| {
        (
            &a.cluster,
            &a.user,
            order.get(&(a.cluster.as_str(), a.account.as_str(), a.user.as_str())).copied().unwrap_or(usize::MAX),
            &a.account,
        )
    });
    for a in assocs {
        if a.user.is_empty()
            || (!c.users.is_empty() && !c.users.contains(&a.user))
            || (!c.accounts.is_empty() && !c.accounts.contains(&a.account))
        {
            continue;
        }
        let key = (a.cluster.clone(), a.user.clone(), if c.group { String::new() } else { a.account.clone() });
        let k = *at.entry(key).or_insert_with(|| {
            rows.push(UserRow {
                cluster: a.cluster.clone(),
                user: a.user.clone(),
                accounts: Vec::new(),
                tres: HashMap::new(),
            });
            rows.len() - 1
        });
        let r = &mut rows[k];
        if !r.accounts.contains(&a.account) {
            r.accounts.push(a.account.clone());
        }
        *r.tres.entry(a.tres.clone()).or_default() += a.alloc;
    }
    rows
}

async fn user_by_account(
    o: &Opts,
    words: &[String],
    src: &mut Source,
    here: &str,
    now: i64,
    out: &mut String,
) -> Result<bool, String> {
    let mut err = String::new();
    let c = conds(words, Report::Assoc, now, &mut err);
    let specs = report_specs(&c, o, "Cluster,Login,Proper,Ac,TresName,Used", "Cluster,Login,Proper,Ac,Used,Energy");
    let mut fs = fields(&specs, |s| cluster_field(s, o, c.tree), &mut err);
    let (u, st, tres) = assoc_data(o, &c, src, here).await?;
    window_header(o, out, "Cluster/User/Account Utilization", c.start, c.end, true);
    let totals = cluster_totals(&u);
    let clusters: Vec<String> = totals.keys().cloned().collect();
    let mut w = Out { o, buf: std::mem::take(out) };
    let mut all: Vec<UserRow> = Vec::new();
    for cl in &clusters {
        let mut rows = user_rows(&u, &st, &c, std::slice::from_ref(cl));
        sort_users(&mut rows, "cpu", o);
        all.extend(rows);
    }
    size_usage(&mut fs, all.first().map(|r| &r.tres), &tres, o);
    w.header(&fs);
    let empty = HashMap::new();
    for r in &all {
        usage_lines(
            &mut w,
            &fs,
            &tres,
            &r.cluster,
            totals.get(&r.cluster).unwrap_or(&empty),
            Usage { account: &r.accounts.join(", "), user: Some(&r.user), used: &r.tres },
        );
    }
    *out = w.buf;
    eprint!("{err}");
    Ok(err.is_empty())
}

async fn user_top(
    o: &Opts,
    words: &[String],
    src: &mut Source,
    here: &str,
    now: i64,
    out: &mut String,
) -> Result<bool, String> {
    let mut err = String::new();
    let c = conds(words, Report::Top, now, &mut err);
    let top = c.top.unwrap_or(10);
    let specs = report_specs(&c, o, "Cl,L,P,A,TresName,Used", "Cl,L,P,A,U,Energy");
    let mut fs = fields(&specs, |s| user_field(s, o), &mut err);
    let (u, st, tres) = assoc_data(o, &c, src, here).await?;
    window_header(o, out, &format!("Top {top} Users"), c.start, c.end, true);
    let totals = cluster_totals(&u);
    let mut per_cluster: Vec<Vec<UserRow>> = Vec::new();
    for cl in totals.keys() {
        let mut rows = user_rows(&u, &st, &c, std::slice::from_ref(cl));
        sort_users(&mut rows, "cpu", o);
        per_cluster.push(rows);
    }
    size_usage(&mut fs, per_cluster.first().and_then(|r| r.first()).map(|r| &r.tres), &tres, o);
    let mut w = Out { o, buf: std::mem::take(out) };
    w.header(&fs);
    let by = tres.first().cloned().unwrap_or_else(|| "cpu".into());
    let empty = HashMap::new();
    for mut rows in per_cluster {
        sort_users(&mut rows, &by, o);
        for r in rows.iter().take(top as usize) {
            usage_lines(
                &mut w,
                &fs,
                &tres,
                &r.cluster,
                totals.get(&r.cluster).unwrap_or(&empty),
                Usage { account: &r.accounts.join(", "), user: Some(&r.user), used: &r.tres },
            );
        }
    }
    *out = w.buf;
    eprint!("{err}");
    Ok(err.is_empty())
}

/// The count of one TRES in a TRES list (memory in MB), None when it is absent.
fn tres_count(list: &str, name: &str) -> Option<u64> {
    drover_model::memsize::tres_counts(list).into_iter().find(|(k, _)| k == name).map(|(_, n)| n)
}

async fn job_sizes(
    o: &Opts,
    words: &[String],
    src: &mut Source,
    here: &str,
    now: i64,
    out: &mut String,
) -> Result<bool, String> {
    let mut err = String::new();
    let c = conds(words, Report::Job, now, &mut err);
    let tres_name = match &o.tres {
        None => "cpu".to_string(),
        Some(t) => {
            let names: Vec<&str> = t.split(',').collect();
            if names.len() > 1 {
                return Err(
                    " Job report only supports a single --tres type.\n Generate a separate report for each TRES type."
                        .into(),
                );
            }
            names[0].to_ascii_lowercase()
        }
    };
    let specs = if c.format.is_empty() { list("Cl,a") } else { c.format.clone() };
    let fs = fields(&specs, job_field, &mut err);
    let clusters = clusters_of(o, &c, here);
    let jobs = src
        .jobs(v1::AcctQuery {
            clusters: clusters.clone(),
            start: c.start,
            end: c.end,
            duplicates: true,
            no_steps: true,
            uids: Vec::new(),
            ..Default::default()
        })
        .await?;
    let st = src.admin().await?;
    // Size groups: [min, max] of the TRES count.
    let mut bounds: Vec<(u64, u64)> = Vec::new();
    let mut sized: Vec<(&v1::AcctJob, u64, u64)> = Vec::new();
    for j in &jobs {
        let Some(i) = j.info.as_ref() else { continue };
        if i.start_time == 0 {
            continue;
        }
        let end = if i.end_time > 0 { i.end_time } else { now };
        let secs = end.min(c.end) - i.start_time.max(c.start);
        if secs <= 0 {
            continue;
        }
        if !c.users.is_empty() && !i.spec.as_ref().is_some_and(|s| c.users.contains(&s.user)) {
            continue;
        }
        let Some(n) = tres_count(&j.alloc_tres, &tres_name) else { continue };
        sized.push((j, n, secs as u64));
    }
    let tres_label = if o.tres.is_none() || tres_name == "cpu" { "CPUs" } else { "TRES" };
    let mut heads: Vec<String> = Vec::new();
    if c.individual {
        let sizes: BTreeSet<u64> = sized.iter().map(|(_, n, _)| *n).collect();
        for s in sizes {
            bounds.push((s, s));
            heads.push(format!("{s} {tres_label}"));
        }
    } else {
        let grouping = if c.grouping.is_empty() { list("50,250,500,1000") } else { c.grouping.clone() };
        let mut last = 0u64;
        for g in &grouping {
            let size = g.split('%').next().unwrap_or("").parse::<u64>().unwrap_or(0);
            bounds.push((last, size.saturating_sub(1)));
            heads.push(format!("{last}-{} {tres_label}", i64::try_from(size).unwrap_or(0) - 1));
            last = size;
        }
        if last > 0 {
            bounds.push((last, u64::MAX));
            heads.push(format!(">= {last} {tres_label}"));
        }
    }
    let width = if o.time.per() { 20 } else { 13 };
    let kind = if c.job_count { Kind::Count } else { Kind::Size };
    let groups: Vec<Field> = heads.into_iter().map(|h| Field { kind, name: h, len: width }).collect();
    // Account groups: per cluster, (name, accounts it covers).
    let order = drover_proto::acct::assoc_order(&st);
    let sub_accounts = |cluster: &str, acct: &str| -> BTreeSet<String> {
        let mut set = BTreeSet::from([acct.to_string()]);
        let mut grew = true;
        while grew {
            grew = false;
            for a in st.assocs.iter().filter(|a| a.cluster == cluster && a.user.is_empty()) {
                if set.contains(&a.parent) && !set.contains(&a.account) {
                    set.insert(a.account.clone());
                    grew = true;
                }
            }
        }
        set
    };
    #[derive(Default)]
    struct Group {
        secs: Vec<u64>,
        counts: Vec<u64>,
        total_secs: u64,
        count: u64,
    }
    let mut report: BTreeMap<String, BTreeMap<String, Group>> = BTreeMap::new();
    let mut cluster_total: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let job_clusters: BTreeSet<String> = sized.iter().map(|(j, ..)| j.cluster.clone()).collect();
    for cl in &job_clusters {
        // (group name, accounts inside it), in the order jobs are matched.
        let mut named: Vec<(String, BTreeSet<String>)> = Vec::new();
        if !c.flat {
            let parents: Vec<String> = if c.accounts.is_empty() { vec!["root".into()] } else { c.accounts.clone() };
            for (_, a) in order.iter().filter(|(_, a)| a.cluster == *cl && a.user.is_empty()) {
                let take = if c.acct_as_parent {
                    parents.contains(&a.parent) && a.account != "root"
                } else {
                    c.accounts.is_empty() || c.accounts.contains(&a.account)
                };
                if take && !named.iter().any(|(n, _)| *n == a.account) {
                    named.push((a.account.clone(), sub_accounts(cl, &a.account)));
                }
            }
        }
        for (j, n, secs) in sized.iter().filter(|(j, ..)| j.cluster == *cl) {
            let name = if c.flat {
                j.account.clone()
            } else {
                match named.iter().find(|(_, set)| set.contains(&j.account)) {
                    Some((name, _)) => name.clone(),
                    None => continue,
                }
            };
            let Some(k) = bounds.iter().position(|(lo, hi)| n >= lo && n <= hi) else { continue };
            let g = report.entry(cl.clone()).or_default().entry(name).or_insert_with(|| Group {
                secs: vec![0; bounds.len()],
                counts: vec![0; bounds.len()],
                ..Default::default()
            });
            let used = n * secs;
            g.secs[k] += used;
            g.counts[k] += 1;
            g.total_secs += used;
            g.count += 1;
            let t = cluster_total.entry(cl.clone()).or_default();
            t.0 += used;
            t.1 += 1;
        }
    }
    if !o.noheader {
        out.push_str(RULE);
        out.push('\n');
        out.push_str(&format!(
            "Job Sizes {} - {} ({} secs)\n",
            common::fmt_time(c.start),
            common::fmt_time(c.end - 1),
            c.end - c.start
        ));
        if let Some(t) = &o.tres {
            out.push_str(&format!("TRES type is {t}\n"));
        }
        if c.job_count {
            out.push_str("Units are in number of jobs ran\n");
        } else {
            out.push_str(&format!("Time reported in {}\n", o.time.name()));
        }
        out.push_str(RULE);
        out.push('\n');
    }
    let total_field = Field { kind: Kind::Size, name: "% of cluster".into(), len: 12 };
    let mut w = Out { o, buf: std::mem::take(out) };
    let all: Vec<Field> = fs.iter().chain(&groups).chain(std::iter::once(&total_field)).cloned().collect();
    w.header(&all);
    for (cl, accts) in &report {
        let (cl_secs, cl_count) = cluster_total.get(cl).copied().unwrap_or_default();
        for (name, g) in accts {
            for f in &fs {
                match f.kind {
                    Kind::Cluster => w.str(f, Some(cl), false),
                    Kind::Account | Kind::Wckey => w.str(f, Some(name), false),
                    _ => w.str(f, None, false),
                }
            }
            for (k, f) in groups.iter().enumerate() {
                if c.job_count {
                    w.uint(f, g.counts[k], false);
                } else {
                    w.time(f, o.time, g.secs[k], g.total_secs, false);
                }
            }
            let (a, b) = if c.job_count { (g.count, cl_count) } else { (g.total_secs, cl_secs) };
            w.time(&total_field, TimeFmt::Percent, a, b, true);
            w.end_line();
        }
    }
    *out = w.buf;
    eprint!("{err}");
    Ok(err.is_empty())
}

const USAGE: &str = include_str!("../help/sreport.help");

/// The outcome of one command: Ok(true) fine, Ok(false) finished with a complaint (exit
/// status 1), Err a fatal error.
async fn command(
    o: &mut Opts,
    words: &[String],
    src: &mut Option<Source>,
    cfg: &drover_model::conf::Config,
    out: &mut String,
) -> Result<bool, String> {
    let Some(first) = words.first() else { return Ok(false) };
    let n = first.len();
    let is = |full: &str, min: usize| prefix_of(first, full, n.max(min));
    let now = common::now();
    let rest = &words[1..];
    let too_few = || {
        eprintln!("too few arguments for keyword:{first}");
        Ok(false)
    };
    if is("cluster", 2) || is("job", 1) || is("user", 1) {
        let Some(report) = rest.first() else { return too_few() };
        let args = &rest[1..];
        if src.is_none() {
            *src = Some(Source { client: common::accounting(cfg).await? });
        }
        let s = src.as_mut().expect("invariant: connected above");
        let here = cfg.cluster_name.as_str();
        let rn = report.len();
        if is("cluster", 2) {
            if prefix_of(report, "AccountUtilizationByUser", 1) {
                return account_by_user(o, args, s, here, now, out).await;
            }
            if prefix_of(report, "UserUtilizationByAccount", 18) || prefix_of(report, "UA", 2) {
                return user_by_account(o, args, s, here, now, out).await;
            }
            if prefix_of(report, "Utilization", 2) {
                return cluster_utilization(o, args, s, here, now, out).await;
            }
            eprintln!("Not valid report {report}");
            eprintln!(
                "Valid cluster reports are, \"AccountUtilizationByUser\", \"UserUtilizationByAccount\", \
                 \"UserUtilizationByWckey\", \"Utilization\", and \"WCKeyUtilizationByUser\""
            );
            return Ok(false);
        }
        if is("job", 1) {
            if prefix_of(report, "SizesByAccount", rn.max(1)) {
                return job_sizes(o, args, s, here, now, out).await;
            }
            eprintln!("Not valid report {report}");
            eprintln!("Valid job reports are, \"SizesByAccount, SizesByAccountAndWcKey, and  SizesByWckey\"");
            return Ok(false);
        }
        if prefix_of(report, "Top", 1) {
            return user_top(o, args, s, here, now, out).await;
        }
        eprintln!("Not valid report {report}");
        eprintln!("Valid user reports are, \"Top\"");
        return Ok(false);
    }
    if is("help", 2) {
        print!("{USAGE}");
        return Ok(rest.is_empty());
    }
    if is("time", 1) {
        let Some(t) = rest.first() else { return too_few() };
        match TimeFmt::parse(t) {
            Some(f) => o.time = f,
            None => eprint!("unknown time format {t}"),
        }
        return Ok(true);
    }
    if is("sort", 1) {
        let Some(t) = rest.first() else { return too_few() };
        set_sort(o, t);
        return Ok(true);
    }
    if is("nonparsable", 4) {
        o.parsable = None;
    } else if is("parsable", 8) {
        o.parsable = Some(true);
    } else if is("parsable2", 9) {
        o.parsable = Some(false);
    } else if is("version", 4) {
        crate::common::print_version();
    } else if is("quiet", 4) || is("verbose", 4) || is("local", 3) {
    } else if is("reservation", 2) || is("resv", 2) {
        eprintln!("sreport: error: reservation reports are not supported by Drover yet");
        return Ok(false);
    } else {
        eprintln!("invalid keyword: {first}");
        return Ok(false);
    }
    Ok(true)
}

fn set_sort(o: &mut Opts, s: &str) {
    let n = s.len();
    if prefix_of(s, "Name", n.max(1)) {
        o.sort_by_name = true;
    } else if prefix_of(s, "Time", n.max(6)) {
        o.sort_by_name = false;
    } else {
        eprint!("unknown timesort format {s}");
    }
}

/// Splits an interactive line into words (quotes group).
fn split_line(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    for ch in line.chars() {
        match (quote, ch) {
            (Some(q), c) if c == q => quote = None,
            (None, '"' | '\'') => quote = Some(ch),
            (None, c) if c.is_whitespace() => {
                if !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                }
            }
            (_, c) => cur.push(c),
        }
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
}

pub fn main(args: Vec<String>) -> i32 {
    let mut o = Opts {
        all_clusters: false,
        cluster: None,
        noheader: false,
        parsable: None,
        time: TimeFmt::Mins,
        tres: std::env::var("SREPORT_TRES").ok(),
        sort_by_name: false,
    };
    let mut words: Vec<String> = Vec::new();
    let mut it = args.into_iter();
    // Options may come anywhere (getopt permutes), each short one alone or combined.
    while let Some(a) = it.next() {
        if a == "--" {
            words.extend(it.by_ref());
            break;
        }
        if let Some(long) = a.strip_prefix("--") {
            let (name, val) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (long, None),
            };
            let need = |it: &mut std::vec::IntoIter<String>| val.clone().or_else(|| it.next());
            match name {
                "all_clusters" => o.all_clusters = true,
                "cluster" => match need(&mut it) {
                    Some(v) => o.cluster = Some(v),
                    None => return bad_option(&format!("option '--{name}' requires an argument")),
                },
                "tres" => match need(&mut it) {
                    Some(v) => o.tres = Some(v),
                    None => return bad_option(&format!("option '--{name}' requires an argument")),
                },
                "noheader" => o.noheader = true,
                "parsable" => o.parsable = Some(true),
                "parsable2" => o.parsable = Some(false),
                "help" | "usage" => {
                    print!("{USAGE}");
                    return 0;
                }
                "version" => {
                    crate::common::print_version();
                    return 0;
                }
                "sort" | "quiet" | "verbose" | "immediate" | "federation" | "local" => {}
                _ => return bad_option(&format!("unrecognized option '{a}'")),
            }
            continue;
        }
        if a.len() > 1 && a.starts_with('-') {
            let chars: Vec<char> = a.chars().skip(1).collect();
            let mut k = 0;
            while k < chars.len() {
                let f = chars[k];
                k += 1;
                let mut value = |it: &mut std::vec::IntoIter<String>| -> Option<String> {
                    let rest: String = chars[k..].iter().collect();
                    k = chars.len();
                    if rest.is_empty() {
                        it.next()
                    } else {
                        Some(rest)
                    }
                };
                match f {
                    'a' => o.all_clusters = true,
                    'n' => o.noheader = true,
                    'p' => o.parsable = Some(true),
                    'P' => o.parsable = Some(false),
                    'Q' | 'v' => {}
                    'h' => {
                        print!("{USAGE}");
                        return 0;
                    }
                    'V' => {
                        crate::common::print_version();
                        return 0;
                    }
                    'M' | 's' | 't' | 'T' => {
                        let Some(v) = value(&mut it) else {
                            return bad_option(&format!("option requires an argument -- '{f}'"));
                        };
                        match f {
                            'M' => o.cluster = Some(v),
                            's' => set_sort(&mut o, &v),
                            't' => match TimeFmt::parse(&v) {
                                Some(t) => o.time = t,
                                None => eprint!("unknown time format {v}"),
                            },
                            _ => o.tres = Some(v),
                        }
                    }
                    other => return bad_option(&format!("invalid option -- '{other}'")),
                }
            }
            continue;
        }
        words.push(a);
    }
    if [o.all_clusters, o.cluster.is_some()].iter().filter(|b| **b).count() > 1 {
        eprintln!("Only one cluster option can be used (--all_clusters OR --cluster OR --local)");
        return 1;
    }
    let cfg = match common::config_for("sreport") {
        Ok(c) => c,
        Err(code) => return code,
    };
    if cfg.accounting_addr().is_none() {
        eprintln!("You are not running a supported accounting_storage plugin\nOnly 'accounting_storage/slurmdbd' is supported.");
        return 1;
    }
    common::runtime().block_on(async move {
        let mut src: Option<Source> = None;
        if !words.is_empty() {
            let mut out = String::new();
            return match command(&mut o, &words, &mut src, &cfg, &mut out).await {
                Ok(ok) => {
                    print!("{out}");
                    i32::from(!ok)
                }
                Err(e) => fatal(&e),
            };
        }
        // Interactive: commands from stdin until exit/quit or its end.
        use std::io::{BufRead, IsTerminal, Write};
        let stdin = std::io::stdin();
        let tty = stdin.is_terminal();
        let mut last: Option<Vec<String>> = None;
        let mut rc = 0;
        loop {
            if tty {
                print!("sreport: ");
                let _ = std::io::stdout().flush();
            }
            let mut line = String::new();
            match stdin.lock().read_line(&mut line) {
                Ok(0) | Err(_) => {
                    if tty {
                        println!();
                    }
                    break;
                }
                Ok(_) => {}
            }
            let mut w = split_line(&line);
            if w.is_empty() || w[0].starts_with('#') {
                continue;
            }
            if w[0] == "!!" {
                match &last {
                    Some(l) => w = l.clone(),
                    None => continue,
                }
            }
            let first = w[0].clone();
            let n = first.len();
            if prefix_of(&first, "exit", n.max(1)) || prefix_of(&first, "quit", n.max(4)) || first == "\\q" {
                break;
            }
            last = Some(w.clone());
            let mut out = String::new();
            match command(&mut o, &w, &mut src, &cfg, &mut out).await {
                Ok(ok) => {
                    print!("{out}");
                    if !ok {
                        rc = 1;
                    }
                }
                Err(e) => return fatal(&e),
            }
        }
        rc
    })
}

fn fatal(e: &str) -> i32 {
    if e.starts_with(' ') {
        eprintln!("{e}");
    } else {
        eprintln!("sreport: fatal: {e}");
    }
    1
}

fn bad_option(msg: &str) -> i32 {
    eprintln!("sreport: {msg}");
    eprintln!("Try \"sreport --help\" for more information");
    1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_print_as_slurm_does() {
        assert_eq!(TimeFmt::Mins.show(158220, 691200), "2637");
        assert_eq!(TimeFmt::Mins.show(150, 1), "2", "half rounds to even, as printf does");
        assert_eq!(TimeFmt::MinsPer.show(158220, 691200), "2637(22.89%)");
        assert_eq!(TimeFmt::Percent.show(0, 0), "0.00%");
        assert_eq!(TimeFmt::HoursPer.show(91200, 691200), "25(13.19%)");
        assert_eq!(usage_width(99_999_999, TimeFmt::Mins), 8);
        assert_eq!(usage_width(1_353_600_000, TimeFmt::Mins), 10);
        assert_eq!(usage_width(1, TimeFmt::MinsPer), 17);
    }

    #[test]
    fn names_match_as_strncasecmp_does() {
        assert!(prefix_of("ut", "Utilization", 2));
        assert!(prefix_of("AccountUtilizationByUser", "AccountUtilizationByUser", 1));
        assert!(prefix_of("anything", "AccountUtilizationByUser", 1), "only the first letter counts");
        assert!(!prefix_of("user", "UserUtilizationByAccount", 18));
        assert_eq!(TimeFmt::parse("percent"), Some(TimeFmt::Percent));
        assert_eq!(TimeFmt::parse("minper"), Some(TimeFmt::MinsPer));
        assert_eq!(TimeFmt::parse("h"), Some(TimeFmt::Hours));
        assert_eq!(TimeFmt::parse("bogus"), None);
    }

    #[test]
    fn windows_round_to_the_hour_and_default_to_yesterday() {
        let now = 1_796_319_227; // 2026-12-03T17:33:47Z
        let (s, e) = report_window(0, 0, now);
        assert!(e <= now && (82_800..=90_000).contains(&(e - s)), "yesterday: {s}..{e}");
        // Whole-hour zones: half past rounds up; an empty window becomes an hour.
        let h = 1_796_169_600;
        let (s, e) = report_window(h + 1800, h + 1799, now);
        assert_eq!((s, e), (h + 3600, h + 7200));
        let (s, e) = report_window(h + 1770, h + 3 * 3600 + 1769, now);
        assert_eq!((s, e), (h + 3600, h + 3 * 3600), "29:30 rounds up, 29:29 down");
    }
}
