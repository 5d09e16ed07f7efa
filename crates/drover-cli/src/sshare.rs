//! `sshare`: each association's shares, usage and Fair Tree factors, from the controller
//! (as Slurm's sshare asks slurmctld), in Slurm 22.05's columns and tree layout.

use crate::common;
use drover_proto::v1;

#[derive(Clone, Copy, PartialEq, Debug)]
enum Kind {
    Account,
    Cluster,
    Effectv,
    FairShare,
    GrpTresMins,
    Id,
    LevelFs,
    NormShares,
    NormUsage,
    Partition,
    RawShares,
    RawUsage,
    TresRunMins,
    User,
}

/// sshare's fields in its table order (a `-o` name matches the first it begins).
const FIELDS: &[(i32, &str, Kind)] = &[
    (-20, "Account", Kind::Account),
    (10, "Cluster", Kind::Cluster),
    (13, "EffectvUsage", Kind::Effectv),
    (10, "FairShare", Kind::FairShare),
    (30, "GrpTRESMins", Kind::GrpTresMins),
    (6, "ID", Kind::Id),
    (10, "LevelFS", Kind::LevelFs),
    (11, "NormShares", Kind::NormShares),
    (11, "NormUsage", Kind::NormUsage),
    (12, "Partition", Kind::Partition),
    (10, "RawShares", Kind::RawShares),
    (11, "RawUsage", Kind::RawUsage),
    (30, "TRESRunMins", Kind::TresRunMins),
    (10, "User", Kind::User),
];

struct Field {
    len: i32,
    name: &'static str,
    kind: Kind,
}

fn fields(spec: &str) -> Result<Vec<Field>, String> {
    spec.split(',')
        .filter(|s| !s.is_empty())
        .map(|item| {
            let (name, len) = match item.split_once('%') {
                Some((n, w)) => (n, w.parse::<i32>().ok().filter(|w| *w != 0)),
                None => (item, None),
            };
            let lower = name.to_ascii_lowercase();
            let &(l, full, kind) = FIELDS
                .iter()
                .find(|(_, f, _)| f.to_ascii_lowercase().starts_with(&lower))
                .ok_or_else(|| format!("Invalid field requested: \"{lower}\""))?;
            Ok(Field { len: len.unwrap_or(l), name: full, kind })
        })
        .collect()
}

/// A cell as Slurm's print_fields writes it: a string (None: blank; cut with `+`), a
/// double (`%f`, or blank for none), a count.
enum Cell {
    Str(Option<String>),
    Double(Option<f64>),
    Uint(Option<u64>),
}

fn render(out: &mut String, f: &Field, c: Cell, parsable: Option<bool>, last: bool) {
    let w = f.len.unsigned_abs() as usize;
    let text = match &c {
        Cell::Str(v) => v.clone(),
        Cell::Double(v) => v.map(|v| format!("{v:.6}")),
        Cell::Uint(v) => v.map(|v| v.to_string()),
    };
    match parsable {
        Some(false) if last => out.push_str(text.as_deref().unwrap_or("")),
        Some(_) => {
            out.push_str(text.as_deref().unwrap_or(""));
            out.push('|');
        }
        None => {
            let s = match (&c, text) {
                (Cell::Str(_), Some(v)) if v.chars().count() > w => {
                    let mut s: String = v.chars().take(w.saturating_sub(1)).collect();
                    s.push('+');
                    s
                }
                (Cell::Double(_), Some(v)) if v.len() > w => cut_double(&v, w),
                (_, Some(v)) => v,
                (_, None) => " ".into(),
            };
            if f.len < 0 {
                out.push_str(&format!("{s:<w$} "));
            } else {
                out.push_str(&format!("{s:>w$} "));
            }
        }
    }
}

/// A double too wide for its column, as `%*.*e` writes it (rare: huge usage).
fn cut_double(v: &str, w: usize) -> String {
    let x: f64 = v.parse().unwrap_or(0.0);
    let s = format!("{:.*e}", w.saturating_sub(7), x);
    s.chars().take(w).collect()
}

struct Opts {
    all: bool,
    accounts: Vec<String>,
    users: Vec<String>,
    long: bool,
    noheader: bool,
    parsable: Option<bool>,
    users_only: bool,
    format: Option<String>,
}

pub fn main(args: Vec<String>) -> i32 {
    let mut o = Opts {
        all: false,
        accounts: Vec::new(),
        users: Vec::new(),
        long: false,
        noheader: false,
        parsable: None,
        users_only: false,
        format: None,
    };
    let list = |v: &str| v.split(',').filter(|s| !s.is_empty()).map(String::from).collect::<Vec<_>>();
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (a.clone(), None),
        };
        let val = |it: &mut std::vec::IntoIter<String>, short: &str| -> Option<String> {
            inline
                .clone()
                .or_else(|| a.strip_prefix(short).filter(|r| !r.is_empty() && short.len() == 2).map(String::from))
                .or_else(|| it.next())
        };
        match flag.as_str() {
            "-a" | "--all" => o.all = true,
            "-l" | "--long" => o.long = true,
            "-n" | "--noheader" => o.noheader = true,
            "-p" | "--parsable" => o.parsable = Some(true),
            "-P" | "--parsable2" => o.parsable = Some(false),
            "-U" | "--Users" => o.users_only = true,
            "-v" | "--verbose" | "-q" | "--quiet" | "-m" | "--partition" | "-e" => {}
            "-h" | "--help" | "--usage" => return crate::help::print("sshare", false),
            "-V" | "--version" => {
                crate::common::print_version();
                return 0;
            }
            f if f == "--accounts" || f.starts_with("-A") => match val(&mut it, "-A") {
                Some(v) => o.accounts.extend(list(&v)),
                None => return bad("option requires an argument -- 'A'"),
            },
            f if f == "--users" || f.starts_with("-u") => match val(&mut it, "-u") {
                Some(v) if v.eq_ignore_ascii_case("all") => o.all = true,
                Some(v) => {
                    o.all = false;
                    o.users.extend(list(&v));
                }
                None => return bad("option requires an argument -- 'u'"),
            },
            f if f == "--format" || f.starts_with("-o") => match val(&mut it, "-o") {
                Some(v) => o.format = Some(v),
                None => return bad("option requires an argument -- 'o'"),
            },
            f if f == "--clusters" || f.starts_with("-M") => {
                let _ = val(&mut it, "-M");
            }
            other => return bad(&format!("unrecognized option '{other}'")),
        }
    }
    let spec = o.format.clone().unwrap_or_else(|| {
        if o.long {
            "A,User,RawShares,NormShares,RawUsage,NormUsage,Eff,Fairshare,LevelFS,GrpTRESMins,TRESRunMins".into()
        } else {
            "A,User,RawShares,NormShares,RawUsage,Eff,Fairshare".into()
        }
    });
    let fs = match fields(&spec) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("sshare: error: {e}");
            return 1;
        }
    };
    let cfg = match common::config_for("sshare") {
        Ok(c) => c,
        Err(code) => return code,
    };
    if !o.all && o.users.is_empty() {
        o.users.push(common::user_name(nix::unistd::getuid().as_raw()));
    }
    let reply = match common::fetch_state(&cfg, v1::StateRequest { shares: true, ..Default::default() }) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("sshare: error: {e}");
            return 1;
        }
    };
    print!("{}", table(&o, &fs, &reply.shares, &cfg.cluster_name));
    0
}

fn bad(msg: &str) -> i32 {
    eprintln!("sshare: {msg}");
    eprintln!("Try \"sshare --help\" for more information");
    1
}

/// The rows the options select, in the tree's order, each with the depth it is printed at
/// (under the nearest printed ancestor).
fn table(o: &Opts, fs: &[Field], rows: &[v1::ShareRow], cluster: &str) -> String {
    let mut out = String::new();
    let n = fs.len();
    if !o.noheader {
        for (k, f) in fs.iter().enumerate() {
            match o.parsable {
                Some(false) if k + 1 == n => out.push_str(f.name),
                Some(_) => {
                    out.push_str(f.name);
                    out.push('|');
                }
                None => {
                    let w = f.len.unsigned_abs() as usize;
                    let name: String = f.name.chars().take(w).collect();
                    if f.len < 0 {
                        out.push_str(&format!("{name:<w$} "));
                    } else {
                        out.push_str(&format!("{name:>w$} "));
                    }
                }
            }
        }
        out.push('\n');
        if o.parsable.is_none() {
            for f in fs {
                out.push_str(&"-".repeat(f.len.unsigned_abs() as usize));
                out.push(' ');
            }
            out.push('\n');
        }
    }
    // Printed accounts, by depth in the tree: (tree depth, printed depth).
    let mut printed: Vec<(u32, usize)> = Vec::new();
    for r in rows {
        let user = !r.user.is_empty();
        if !o.accounts.is_empty() && !o.accounts.iter().any(|a| a.eq_ignore_ascii_case(&r.account)) {
            continue;
        }
        if user && !o.all && !o.users.contains(&r.user) {
            continue;
        }
        // Indented under its parent where that is printed (as slurmdb_tree_name_get does).
        printed.retain(|(d, _)| *d < r.depth);
        let depth = printed.last().filter(|(d, _)| d + 1 == r.depth).map_or(0, |(_, p)| p + 1);
        if !user {
            printed.push((r.depth, depth));
        }
        if o.users_only && !user {
            continue;
        }
        let root = r.raw_shares.is_none() && !user;
        for (k, f) in fs.iter().enumerate() {
            let cell = match f.kind {
                Kind::Account => {
                    let indent = if o.users_only { 0 } else { depth };
                    Cell::Str(Some(format!("{}{}", " ".repeat(indent), r.account)))
                }
                Kind::Cluster => Cell::Str(Some(cluster.to_string())),
                Kind::User => Cell::Str(user.then(|| r.user.clone())),
                Kind::RawShares => Cell::Uint(r.raw_shares.map(u64::from)),
                Kind::NormShares => Cell::Double(r.norm_shares),
                Kind::RawUsage => Cell::Uint(Some(r.raw_usage as u64)),
                Kind::NormUsage => Cell::Double(r.norm_usage.filter(|_| !root)),
                Kind::Effectv => Cell::Double(Some(r.effectv_usage)),
                Kind::FairShare => Cell::Double(if user { r.fairshare } else { None }),
                Kind::LevelFs => Cell::Double(r.level_fs),
                Kind::Id | Kind::Partition => Cell::Str(None),
                Kind::GrpTresMins => Cell::Str(Some(String::new())),
                Kind::TresRunMins => Cell::Str(Some(if r.tres_run_mins.is_empty() {
                    "cpu=0,mem=0,energy=0,node=0,billing=0,fs/disk=0,vmem=0,pages=0".into()
                } else {
                    r.tres_run_mins.clone()
                })),
            };
            render(&mut out, f, cell, o.parsable, k + 1 == n);
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(depth: u32, account: &str, user: &str, shares: Option<u32>, norm: f64, usage: f64) -> v1::ShareRow {
        v1::ShareRow {
            account: account.into(),
            user: user.into(),
            depth,
            raw_shares: shares,
            norm_shares: Some(norm),
            raw_usage: usage,
            ..Default::default()
        }
    }

    #[test]
    fn fields_match_by_prefix_and_refuse_unknown_ones() {
        let f = fields("A,User,Eff,Fairshare%12,lev").unwrap();
        let names: Vec<&str> = f.iter().map(|f| f.name).collect();
        assert_eq!(names, ["Account", "User", "EffectvUsage", "FairShare", "LevelFS"]);
        assert_eq!(f[3].len, 12);
        assert_eq!(fields("Nope").err().unwrap(), "Invalid field requested: \"nope\"");
    }

    /// `sshare -a -n -P [-A ACCOUNTS]`.
    fn parsable_all(accounts: &[&str]) -> Opts {
        Opts {
            all: true,
            accounts: accounts.iter().map(|a| a.to_string()).collect(),
            users: vec![],
            long: false,
            noheader: true,
            parsable: Some(false),
            users_only: false,
            format: None,
        }
    }

    #[test]
    fn accounts_indent_under_the_printed_ones() {
        let rows = vec![
            row(0, "root", "", None, 0.0, 0.0),
            row(1, "physics", "", Some(1), 0.25, 0.0),
            row(2, "physics", "alice", Some(1), 1.0, 0.0),
            row(2, "theory", "", Some(1), 0.5, 0.0),
        ];
        let o = parsable_all(&["physics"]);
        let t = table(&o, &fields("A,User").unwrap(), &rows, "lab");
        assert_eq!(t, "physics|\n physics|alice\n");
    }

    /// priority/basic's rows (no normalised shares or usage, everything else 0), as the lab's
    /// real sshare -P printed them (testdata/corpus/slurm-22.05.txt, sshare/P).
    #[test]
    fn basic_rows_print_blank_where_slurm_computes_nothing() {
        let basic = |depth, account: &str, user: &str, shares| v1::ShareRow {
            account: account.into(),
            user: user.into(),
            depth,
            raw_shares: shares,
            level_fs: Some(0.0),
            fairshare: (!user.is_empty()).then_some(0.0),
            ..Default::default()
        };
        let rows = vec![
            basic(0, "root", "", None),
            basic(1, "root", "root", Some(1)),
            basic(1, "physics", "", Some(1)),
            basic(2, "physics", "root", Some(1)),
            basic(2, "theory", "", Some(1)),
        ];
        let o = parsable_all(&[]);
        let t = table(&o, &fields("A,User,RawShares,NormShares,RawUsage,Eff,Fairshare").unwrap(), &rows, "lab");
        assert_eq!(
            t,
            "root||||0|0.000000|\n root|root|1||0|0.000000|0.000000\n physics||1||0|0.000000|\n  physics|root|1||0|0.000000|0.000000\n  theory||1||0|0.000000|\n"
        );
        let long = table(&o, &fields("A,User,NormUsage,Eff,Fairshare,LevelFS").unwrap(), &rows[..2], "lab");
        assert_eq!(long, "root|||0.000000||0.000000\n root|root||0.000000|0.000000|0.000000\n");
    }
}
