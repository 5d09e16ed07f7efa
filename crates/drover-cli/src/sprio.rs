//! `sprio`: waiting jobs' multifactor priority and its factors, from the controller (as
//! Slurm's sprio asks slurmctld), in Slurm 22.05's formats.

use crate::common;
use crate::format;
use drover_proto::v1;

struct Opts {
    jobs: Option<Vec<u32>>,
    users: Vec<String>,
    partitions: Vec<String>,
    long: bool,
    normalized: bool,
    noheader: bool,
    weights: bool,
    format: Option<String>,
    sort: String,
}

pub fn main(args: Vec<String>) -> i32 {
    let mut o = Opts {
        jobs: None,
        users: Vec::new(),
        partitions: Vec::new(),
        long: false,
        normalized: false,
        noheader: false,
        weights: false,
        format: std::env::var("SPRIO_FORMAT").ok(),
        sort: "i".into(),
    };
    let list = |v: &str| v.split(',').filter(|s| !s.is_empty()).map(String::from).collect::<Vec<_>>();
    let mut it = args.into_iter().peekable();
    while let Some(a) = it.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (a.clone(), None),
        };
        // A value given with the option (`-ofmt`, `--format=fmt`) or as the next word.
        let value = |it: &mut std::iter::Peekable<std::vec::IntoIter<String>>, short: char| -> Option<String> {
            if let Some(v) = inline.clone() {
                return Some(v);
            }
            if let Some(rest) = a.strip_prefix(&format!("-{short}")).filter(|r| !r.is_empty() && !a.starts_with("--")) {
                return Some(rest.to_string());
            }
            it.next()
        };
        match flag.as_str() {
            "-h" | "--noheader" => o.noheader = true,
            "-l" | "--long" => o.long = true,
            "-n" | "--norm" => o.normalized = true,
            "-w" | "--weights" => o.weights = true,
            "-v" | "--verbose" | "--federation" | "--local" | "--sib" | "--sibling" => {}
            "--help" => return crate::help::print("sprio", false),
            "--usage" => return crate::help::print("sprio", true),
            "-V" | "--version" => {
                crate::common::print_version();
                return 0;
            }
            f if f == "--jobs" || f.starts_with("-j") => {
                // -j takes its list attached or as the next word when that is not an option.
                let v = inline
                    .clone()
                    .or_else(|| a.strip_prefix("-j").filter(|r| !r.is_empty()).map(String::from))
                    .or_else(|| it.next_if(|n| !n.starts_with('-')));
                let mut ids = Vec::new();
                for x in list(&v.unwrap_or_default()) {
                    match x.parse::<u32>() {
                        Ok(n) => ids.push(n),
                        Err(_) => {
                            eprintln!("sprio: error: Invalid job id: {x}");
                            return 1;
                        }
                    }
                }
                o.jobs = Some(ids);
            }
            f if f == "--user" || f == "--users" || f.starts_with("-u") => match value(&mut it, 'u') {
                Some(v) => o.users.extend(list(&v)),
                None => return bad("option requires an argument -- 'u'"),
            },
            f if f == "--partition" || f.starts_with("-p") => match value(&mut it, 'p') {
                Some(v) => o.partitions.extend(list(&v)),
                None => return bad("option requires an argument -- 'p'"),
            },
            f if f == "--format" || f.starts_with("-o") => match value(&mut it, 'o') {
                Some(v) => o.format = Some(v),
                None => return bad("option requires an argument -- 'o'"),
            },
            f if f == "--sort" || f.starts_with("-S") => match value(&mut it, 'S') {
                Some(v) => o.sort = v,
                None => return bad("option requires an argument -- 'S'"),
            },
            f if f == "--cluster" || f == "--clusters" || f.starts_with("-M") => {
                let _ = value(&mut it, 'M');
            }
            other => return bad(&format!("unrecognized option '{other}'")),
        }
    }
    let cfg = match common::config_for("sprio") {
        Ok(c) => c,
        Err(code) => return code,
    };
    let p = &cfg.priority;
    if !p.multifactor {
        eprintln!("You are not running a supported priority plugin\n(priority/basic).\nOnly 'priority/multifactor' is supported.");
        return 1;
    }
    let fmt = o.format.clone().unwrap_or_else(|| default_format(&o, p));
    let items = format::parse(&fmt);
    let reply = match common::fetch_state(&cfg, v1::StateRequest { prio: true, ..Default::default() }) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("sprio: error: {e}");
            return 1;
        }
    };
    let mut rows: Vec<v1::JobPrio> = reply
        .prio
        .into_iter()
        .filter(|r| o.jobs.as_ref().is_none_or(|ids| ids.is_empty() || ids.contains(&r.job_id)))
        .filter(|r| o.users.is_empty() || o.users.contains(&r.user))
        .filter(|r| o.partitions.is_empty() || o.partitions.contains(&r.partition))
        .collect();
    if !o.weights && o.jobs.as_ref().is_some_and(|ids| !ids.is_empty()) && rows.is_empty() {
        println!("Unable to find jobs matching user/id(s) specified");
        return 0;
    }
    let mut out = String::new();
    if !o.noheader {
        out.push_str(&format::render(&items, |c| header(c).to_string()));
        out.push('\n');
    }
    if o.weights {
        out.push_str(&format::render(&items, |c| weight_cell(c, p)));
        out.push('\n');
        print!("{out}");
        return 0;
    }
    sort(&mut rows, &o.sort);
    for r in &rows {
        out.push_str(&format::render(&items, |c| cell(c, r, p)));
        out.push('\n');
    }
    print!("{out}");
    0
}

fn bad(msg: &str) -> i32 {
    eprintln!("sprio: {msg}");
    eprintln!("Try \"sprio --help\" for more information");
    1
}

/// Slurm's default formats: the factors whose weights are set (all with `-l`).
fn default_format(o: &Opts, p: &drover_model::priority_conf::PriorityConf) -> String {
    if o.normalized && o.long {
        return "%.15i %9r %.8u %10y %10a %10b %10f %10j %10p %10q %20t".into();
    }
    if o.long {
        return "%.15i %9r %.8u %.10Y %.10S %.10A %.10B %.10F %.10J %.10P %.10Q %.11N %.20T".into();
    }
    let mut f = String::from("%.15i %9r");
    if !o.users.is_empty() {
        f.push_str(" %.8u");
    }
    let weights = [
        (p.weight_age, 'a'),
        (p.weight_assoc, 'b'),
        (p.weight_fairshare, 'f'),
        (p.weight_jobsize, 'j'),
        (p.weight_partition, 'p'),
        (p.weight_qos, 'q'),
    ];
    if o.normalized {
        f.push_str(" %10y");
        for (w, c) in weights {
            if w > 0 {
                f.push_str(&format!(" %10{c}"));
            }
        }
    } else {
        f.push_str(" %.10Y %.10S");
        for (w, c) in weights {
            if w > 0 {
                f.push_str(&format!(" %.10{}", c.to_ascii_uppercase()));
            }
        }
    }
    f
}

fn header(c: char) -> &'static str {
    match c {
        'i' => "JOBID",
        'r' => "PARTITION",
        'u' => "USER",
        'Y' | 'y' => "PRIORITY",
        'S' => "SITE",
        'A' | 'a' => "AGE",
        'B' | 'b' => "ASSOC",
        'F' | 'f' => "FAIRSHARE",
        'J' | 'j' => "JOBSIZE",
        'P' | 'p' => "PARTITION",
        'Q' | 'q' => "QOS",
        'N' => "NICE",
        'T' | 't' => "TRES",
        'c' => "CLUSTER",
        _ => "",
    }
}

/// The `-w` line: each factor's weight.
fn weight_cell(c: char, p: &drover_model::priority_conf::PriorityConf) -> String {
    match c {
        'i' => "Weights".into(),
        'S' => "1".into(),
        'A' | 'a' => p.weight_age.to_string(),
        'B' | 'b' => p.weight_assoc.to_string(),
        'F' | 'f' => p.weight_fairshare.to_string(),
        'J' | 'j' => p.weight_jobsize.to_string(),
        'P' | 'p' => p.weight_partition.to_string(),
        'Q' | 'q' => p.weight_qos.to_string(),
        _ => String::new(),
    }
}

/// The weighted factors summed as sprio sums them (its PRIORITY column), at least 1.
fn total(r: &v1::JobPrio) -> f64 {
    let p = r.age + r.assoc + r.fairshare + r.jobsize + r.partition_factor + r.qos - r.nice as f64;
    p.max(1.0)
}

fn cell(c: char, r: &v1::JobPrio, p: &drover_model::priority_conf::PriorityConf) -> String {
    let int = |v: f64| format!("{v:.0}");
    let norm = |v: f64, w: u32| format!("{:.7}", if w > 0 { v / f64::from(w) } else { 0.0 });
    match c {
        'i' => r.job_id.to_string(),
        'r' => r.partition.clone(),
        'u' => r.user.clone(),
        'Y' => (total(r) as i64).to_string(),
        'y' => format!("{:16.14}", total(r) / f64::from(u32::MAX)),
        'S' => "0".into(),
        'A' => int(r.age),
        'a' => norm(r.age, p.weight_age),
        'B' => int(r.assoc),
        'b' => norm(r.assoc, p.weight_assoc),
        'F' => int(r.fairshare),
        'f' => norm(r.fairshare, p.weight_fairshare),
        'J' => int(r.jobsize),
        'j' => norm(r.jobsize, p.weight_jobsize),
        'P' => int(r.partition_factor),
        'p' => norm(r.partition_factor, p.weight_partition),
        'Q' => int(r.qos),
        'q' => norm(r.qos, p.weight_qos),
        'N' => r.nice.to_string(),
        'c' => String::new(),
        _ => String::new(),
    }
}

/// `-S`: fields to sort by, later ones first applied (as Slurm does), `-` descending.
fn sort(rows: &mut [v1::JobPrio], spec: &str) {
    let keys: Vec<(char, bool)> = {
        let chars: Vec<char> = spec.chars().collect();
        let mut out = Vec::new();
        for (k, c) in chars.iter().enumerate() {
            if *c == '-' || *c == '+' || *c == ',' {
                continue;
            }
            out.push((*c, k > 0 && chars[k - 1] == '-'));
        }
        out
    };
    for (c, desc) in keys.into_iter().rev() {
        rows.sort_by(|a, b| {
            let o = match c {
                'u' => a.user.cmp(&b.user),
                'r' => a.partition.cmp(&b.partition),
                'y' | 'Y' => total(a).total_cmp(&total(b)),
                'a' | 'A' => a.age.total_cmp(&b.age),
                'f' | 'F' => a.fairshare.total_cmp(&b.fairshare),
                'j' | 'J' => a.jobsize.total_cmp(&b.jobsize),
                'p' | 'P' => a.partition_factor.total_cmp(&b.partition_factor),
                'q' | 'Q' => a.qos.total_cmp(&b.qos),
                'N' => a.nice.cmp(&b.nice),
                _ => a.job_id.cmp(&b.job_id),
            };
            if desc {
                o.reverse()
            } else {
                o
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: u32, fs: f64) -> v1::JobPrio {
        v1::JobPrio { job_id: id, user: "u".into(), partition: "cpu".into(), fairshare: fs, ..Default::default() }
    }

    #[test]
    fn priority_truncates_the_sum_and_factors_round() {
        let p = drover_model::priority_conf::PriorityConf { weight_fairshare: 10000, ..Default::default() };
        let r = row(11, 10000.0 / 6.0);
        assert_eq!((cell('Y', &r, &p), cell('F', &r, &p)), ("1666".into(), "1667".into()));
        assert_eq!(cell('f', &r, &p), "0.1666667");
        let mut rows = vec![row(11, 1.0), row(12, 3.0), row(13, 2.0)];
        sort(&mut rows, "-y");
        assert_eq!(rows.iter().map(|r| r.job_id).collect::<Vec<_>>(), [12, 13, 11]);
    }
}
