//! `sinfo`: partitions and nodes, in Slurm's formats.

use crate::common;
use crate::format::{self, Item};
use clap::Parser;
use drover_model::duration::fmt_limit_sinfo;
use drover_model::hostlist::Hostlist;
use drover_proto::v1;

#[derive(Parser, Debug)]
#[command(
    name = "sinfo",
    disable_help_flag = true,
    disable_version_flag = true,
    args_override_self = true,
    infer_long_args = true
)]
struct Args {
    #[arg(short = 'h', long = "noheader")]
    noheader: bool,
    #[arg(short = 'N', long = "Node")]
    node: bool,
    #[arg(short = 'l', long = "long")]
    long: bool,
    #[arg(short = 's', long = "summarize")]
    summarize: bool,
    #[arg(short = 'R', long = "list-reasons")]
    reasons: bool,
    #[arg(short = 'o', long = "format")]
    format: Option<String>,
    /// getopt takes the next word whatever it is: `-S -t` sorts by descending state.
    #[arg(short = 'S', long = "sort", allow_hyphen_values = true)]
    sort: Option<String>,
    #[arg(short = 'O', long = "Format")]
    long_format: Option<String>,
    #[arg(short = 'p', long = "partition")]
    partition: Option<String>,
    #[arg(short = 't', long = "states")]
    states: Option<String>,
    #[arg(short = 'n', long = "nodes")]
    nodes: Option<String>,
    #[arg(short = 'e', long = "exact")]
    exact: bool,
    #[arg(short = 'a', long = "all")]
    all: bool,
    #[arg(short = 'd', long = "dead")]
    dead: bool,
    #[arg(short = 'r', long = "responding")]
    responding: bool,
    #[arg(long = "json")]
    json: bool,
    #[arg(short = 'M', long = "clusters")]
    clusters: Option<String>,
    #[arg(short = 'i', long = "iterate")]
    iterate: Option<String>,
    /// Words that are no option: sinfo's getopt loop leaves them, and nothing reads them.
    #[arg(trailing_var_arg = true)]
    ignored: Vec<String>,
    #[arg(short = 'T', long = "reservation")]
    reservation: bool,
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(flatten)]
    std: common::StdFlags,
}

fn header(code: char) -> &'static str {
    match code {
        'a' => "AVAIL",
        'A' => "NODES(A/I)",
        'b' => "ACTIVE_FEATURES",
        'B' => "MAX_CPUS_PER_NODE",
        'c' => "CPUS",
        'C' => "CPUS(A/I/O/T)",
        'd' => "TMP_DISK",
        'D' => "NODES",
        'e' => "FREE_MEM",
        'E' => "REASON",
        'f' => "AVAIL_FEATURES",
        'F' => "NODES(A/I/O/T)",
        'g' => "GROUPS",
        'G' => "GRES",
        'h' => "OVERSUBSCRIBE",
        'H' => "TIMESTAMP",
        'l' => "TIMELIMIT",
        'L' => "DEFAULTTIME",
        'm' => "MEMORY",
        'M' => "PREEMPT_MODE",
        'n' => "HOSTNAMES",
        'N' => "NODELIST",
        'o' => "NODE_ADDR",
        'O' => "CPU_LOAD",
        'p' => "PRIO_TIER",
        'P' => "PARTITION",
        'r' => "ROOT",
        'R' => "PARTITION",
        's' => "JOB_SIZE",
        'S' => "ALLOCNODES",
        't' => "STATE",
        'T' => "STATE",
        'u' => "USER",
        'U' => "USER",
        'w' => "WEIGHT",
        'X' => "SOCKETS",
        'Y' => "CORES",
        'Z' => "THREADS",
        'z' => "S:C:T",
        'I' => "PRIO_JOB_FACTOR",
        'v' => "VERSION",
        'V' => "CLUSTER",
        // -O fields without a letter of -o.
        ALLOC_MEM => "ALLOCMEM",
        GRES_USED => "GRES_USED",
        PORT => "PORT",
        COMMENT => "COMMENT",
        EXTRA => "EXTRA",
        STATE_COMPLETE => "STATECOMPLETE",
        _ => "",
    }
}

/// Codes of the -O fields that have no -o letter (never produced by parsing -o).
const ALLOC_MEM: char = '1';
const GRES_USED: char = '2';
const PORT: char = '3';
const COMMENT: char = '4';
const EXTRA: char = '5';
const STATE_COMPLETE: char = '6';

/// `-O/--Format`'s fields (`name[:[.]width[suffix]]`, comma separated; 20 wide and left
/// justified by default, no separator between columns) as the columns of `-o` they print.
/// An unknown name is reported as Slurm reports it and left out.
fn long_format(spec: &str) -> Vec<Item> {
    let mut out = Vec::new();
    for token in spec.split(',').filter(|t| !t.is_empty()) {
        let (name, width, right, suffix) = format::long_token(token);
        let code = match name.to_ascii_lowercase().as_str() {
            "available" => 'a',
            "allocmem" => ALLOC_MEM,
            "allocnodes" => 'S',
            "cluster" => 'V',
            "cores" => 'Y',
            "cpus" => 'c',
            "cpusload" => 'O',
            "cpusstate" => 'C',
            "defaulttime" => 'L',
            "disk" => 'd',
            "features" => 'f',
            "features_act" => 'b',
            "freemem" => 'e',
            "gres" => 'G',
            "gresused" => GRES_USED,
            "groups" => 'g',
            "maxcpuspernode" => 'B',
            "memory" => 'm',
            "nodeaddr" => 'o',
            "nodeai" => 'A',
            "nodeaiot" => 'F',
            "nodehost" => 'n',
            "nodelist" => 'N',
            "nodes" => 'D',
            "oversubscribe" => 'h',
            "partition" => 'P',
            "partitionname" => 'R',
            "port" => PORT,
            "comment" => COMMENT,
            "extra" => EXTRA,
            "statecomplete" => STATE_COMPLETE,
            "preemptmode" => 'M',
            "priorityjobfactor" => 'I',
            "prioritytier" => 'p',
            "reason" => 'E',
            "root" => 'r',
            "size" => 's',
            "socketcorethread" => 'z',
            "sockets" => 'X',
            "statecompact" => 't',
            "statelong" => 'T',
            "threads" => 'Z',
            "time" => 'l',
            "timestamp" => 'H',
            "user" => 'u',
            "userlong" => 'U',
            "version" => 'v',
            "weight" => 'w',
            _ => {
                eprintln!("sinfo: error: Invalid job format specification: {name}");
                continue;
            }
        };
        format::push_long_field(&mut out, code, width, right, suffix);
    }
    out
}

/// One output line: a partition (or none) and the nodes grouped into it.
struct Group<'a> {
    part: Option<&'a v1::PartitionInfo>,
    default: bool,
    nodes: Vec<&'a v1::NodeInfo>,
}

fn value(g: &Group<'_>, code: char, cfg_users: &dyn Fn(u32) -> String) -> String {
    let none = v1::NodeInfo::default();
    let n0 = match g.nodes.first() {
        Some(n) => *n,
        None if matches!(code, 't' | 'T') => return "n/a".into(),
        None => &none,
    };
    let names = || Hostlist::from_iter(g.nodes.iter().map(|n| n.name.as_str())).ranged();
    let p = g.part;
    let count = |f: &dyn Fn(&v1::NodeInfo) -> bool| g.nodes.iter().filter(|n| f(n)).count();
    let is_alloc = |n: &v1::NodeInfo| {
        n.state_short.starts_with("alloc")
            || n.state_short.starts_with("mix")
            || n.state_short.starts_with("drng")
            || n.state_short.starts_with("comp")
    };
    let is_idle = |n: &v1::NodeInfo| n.state_short.trim_end_matches('*') == "idle" && !n.state_short.ends_with('*');
    match code {
        'a' => p
            .map(|p| match p.state.as_str() {
                "UP" => "up",
                "DOWN" => "down",
                "DRAIN" => "drain",
                _ => "inact",
            })
            .unwrap_or("n/a")
            .into(),
        'A' => format!("{}/{}", count(&is_alloc), count(&is_idle)),
        'b' | 'f' => {
            if n0.features.is_empty() {
                "(null)".into()
            } else {
                n0.features.join(",")
            }
        }
        'B' => "UNLIMITED".into(),
        'c' => n0.cpus.to_string(),
        'C' => {
            let a: u32 = g.nodes.iter().map(|n| n.alloc_cpus).sum();
            let t: u32 = g.nodes.iter().map(|n| n.cpus).sum();
            let o: u32 = g
                .nodes
                .iter()
                .filter(|n| {
                    !n.state_short.starts_with("alloc")
                        && !n.state_short.starts_with("mix")
                        && !n.state_short.starts_with("idle")
                })
                .map(|n| n.cpus - n.alloc_cpus)
                .sum();
            format!("{a}/{}/{o}/{t}", t - a - o)
        }
        'd' => n0.tmp_disk_mb.to_string(),
        'D' => g.nodes.len().to_string(),
        'e' => n0.free_mem_mb.to_string(),
        'E' => {
            if n0.reason.is_empty() {
                "none".into()
            } else {
                n0.reason.clone()
            }
        }
        'F' => {
            let a = count(&is_alloc);
            let i = count(&is_idle);
            let t = g.nodes.len();
            format!("{a}/{i}/{}/{t}", t - a - i)
        }
        'g' => p
            .map(|p| if p.allow_groups == "ALL" { "all".to_string() } else { p.allow_groups.clone() })
            .unwrap_or_default(),
        'G' => {
            if n0.gres.is_empty() {
                "(null)".into()
            } else {
                n0.gres.clone()
            }
        }
        'h' => "NO".into(),
        'H' => {
            if n0.reason_time > 0 {
                common::fmt_time(n0.reason_time)
            } else {
                "Unknown".into()
            }
        }
        'l' => p.map(|p| fmt_limit_sinfo(p.max_time_secs)).unwrap_or_else(|| "n/a".into()),
        'L' => p
            .map(|p| if p.default_time_set { fmt_limit_sinfo(p.default_time_secs) } else { "n/a".into() })
            .unwrap_or_else(|| "n/a".into()),
        'm' => n0.real_memory_mb.to_string(),
        'M' => "OFF".into(),
        // Each name once (nodes that share a host name or address show it once, as Slurm).
        'n' => Hostlist::from_iter(unique(g.nodes.iter().map(|n| n.hostname.as_str()))).ranged(),
        'N' => names(),
        'o' => Hostlist::from_iter(unique(g.nodes.iter().map(|n| n.addr.as_str()))).ranged(),
        'O' => format!("{:.2}", n0.cpu_load),
        'p' => p.map(|p| p.priority_tier.to_string()).unwrap_or_default(),
        'P' => p.map(|p| format!("{}{}", p.name, if g.default { "*" } else { "" })).unwrap_or_default(),
        'r' => "no".into(),
        'R' => p.map(|p| p.name.clone()).unwrap_or_default(),
        's' => p
            .map(|p| {
                let max = p.max_nodes.map(|m| m.to_string()).unwrap_or_else(|| "infinite".into());
                format!("{}-{max}", p.min_nodes.max(1))
            })
            .unwrap_or_default(),
        'S' => "all".into(),
        't' => n0.state_short.clone(),
        'T' => n0.state_long.clone(),
        'u' => {
            if n0.reason.is_empty() {
                "Unknown".into()
            } else {
                cfg_users(n0.reason_uid)
            }
        }
        // `user(uid)`, as Slurm's long form; a node without a reason has no user.
        'U' => {
            if n0.reason.is_empty() {
                "Unknown".into()
            } else {
                format!("{}({})", cfg_users(n0.reason_uid), n0.reason_uid)
            }
        }
        'w' => n0.weight.to_string(),
        'X' => n0.sockets.to_string(),
        'Y' => n0.cores_per_socket.to_string(),
        'Z' => n0.threads_per_core.to_string(),
        'z' => format!("{}:{}:{}", n0.sockets, n0.cores_per_socket, n0.threads_per_core),
        'I' => "1".into(),
        'v' => n0.version.clone(),
        ALLOC_MEM => n0.alloc_mem_mb.to_string(),
        GRES_USED => n0.gres_used.clone(),
        PORT => n0.port.to_string(),
        // Neither a node's comment nor its extra data is kept.
        COMMENT | EXTRA => "(null)".into(),
        // The base state and every flag, as `idle+drain`.
        STATE_COMPLETE => n0.state_scontrol.to_ascii_lowercase(),
        _ => String::new(),
    }
}

/// The node states sinfo knows, as its error lists them.
const NODE_STATES: &str = "unknown,down,idle,allocated,?,mixed,future,drain,drained,draining,no_respond,reserved,\
perfctrs,cloud,completing,powering_down,powered_down,power_down,powering_up,fail,maint,reboot,reboot^,unknown";

/// The first of `-t`'s states (`,` or `&` between them) that starts no state name, long or
/// compact, as sinfo matches them.
fn bad_node_state(list: &str) -> Option<&str> {
    const COMPACT: &[&str] = &[
        "unk",
        "down",
        "idle",
        "alloc",
        "mix",
        "futr",
        "drain",
        "drng",
        "resv",
        "npc",
        "comp",
        "plnd",
        "planned",
        "pow_dn",
        "pow_up",
        "boot",
        "fail",
        "maint",
        "reboot",
        "inval",
        "no_respond",
    ];
    list.split([',', '&']).filter(|s| !s.is_empty()).find(|s| {
        let l = s.to_ascii_lowercase();
        !NODE_STATES.split(',').chain(COMPACT.iter().copied()).any(|n| n.starts_with(&l))
    })
}

pub fn main(args: Vec<String>) -> i32 {
    let a: Args = match common::parse_command("sinfo", args, |a: &Args| &a.std) {
        Ok(a) => a,
        Err(code) => return code,
    };
    let every = match common::iterate_opt(a.iterate.as_deref(), "sinfo: error: Error: invalid entry for --iterate=") {
        Ok(e) => e,
        Err(code) => return code,
    };
    let cfg = match common::config_for("sinfo") {
        Ok(c) => c,
        Err(code) => return code,
    };
    if let Err(code) = common::check_clusters("sinfo", a.clusters.as_deref(), &cfg.cluster_name) {
        return code;
    }
    common::repeat(every, |dated| show(&a, &cfg, dated))
}

/// One report; `dated`: with the date line above the header (`-i`, as `-l` has it).
fn show(a: &Args, cfg: &drover_model::conf::Config, dated: bool) -> i32 {
    if a.reservation {
        return crate::resv::sinfo_report(a.noheader);
    }
    let reply = common::fetch_state(cfg, v1::StateRequest { nodes: true, partitions: true, ..Default::default() });
    let reply = match reply {
        Ok(r) => r,
        Err(e) => {
            eprintln!("slurm_load_partitions: {e}");
            return 1;
        }
    };
    if a.json {
        println!("{}", crate::json::sinfo_json(&reply));
        return 0;
    }
    let part_filter: Option<Vec<String>> = a.partition.as_ref().map(|p| p.split(',').map(String::from).collect());
    let node_filter: Option<Vec<String>> = a.nodes.as_ref().and_then(|n| Hostlist::parse(n).ok()).map(|h| h.names());
    if let Some(bad) = a.states.as_deref().and_then(bad_node_state) {
        eprintln!("sinfo: error: Bad state string: \"{bad}\"");
        eprintln!("sinfo: error: valid states: {NODE_STATES}");
        return 1;
    }
    let state_filter: Option<Vec<String>> = a.states.as_ref().map(|s| s.split(',').map(String::from).collect());
    let node_ok = |n: &v1::NodeInfo| {
        node_filter.as_ref().is_none_or(|f| f.contains(&n.name))
            && state_filter.as_ref().is_none_or(|f| f.iter().any(|s| state_matches(n, s)))
            && (!a.dead || n.state_short.ends_with('*'))
            && (!a.responding || !n.state_short.ends_with('*'))
    };
    let parts: Vec<&v1::PartitionInfo> = reply
        .partitions
        .iter()
        .filter(|p| a.all || !p.hidden || part_filter.is_some())
        .filter(|p| part_filter.as_ref().is_none_or(|f| f.contains(&p.name)))
        .collect();
    let by_name = |n: &str| reply.nodes.iter().find(|x| x.name == n);
    let mut groups: Vec<Group<'_>> = Vec::new();
    let max_part = parts.iter().map(|p| p.name.len() + usize::from(p.default)).max().unwrap_or(0);
    let max_node = reply.nodes.iter().map(|n| n.name.len()).max().unwrap_or(0);
    let user_format = a.format.is_some() || std::env::var_os("SINFO_FORMAT").is_some();
    let (fmt, date_line) = if let Some(f) = a.format.clone().or_else(|| std::env::var("SINFO_FORMAT").ok()) {
        (f, a.long)
    } else if a.reasons && a.long {
        ("%20E %12U %19H %6t %N".to_string(), true)
    } else if a.reasons {
        ("%20E %9u %19H %N".to_string(), false)
    } else if a.summarize {
        (format!("%{}P %.5a %.10l %.16F %N", max_part.max(9)), false)
    } else if a.node && a.long {
        (format!("%{}N %.6D %.{}P %.11T %4c %.8z %.6m %.8d %.6w %.8f %20E", max_node.max(9), max_part.max(9)), true)
    } else if a.node {
        (format!("%{}N %.6D %.{}P %6t", max_node.max(9), max_part.max(9)), false)
    } else if a.long {
        (format!("%{}P %.5a %.10l %.10s %.4r %.8h %.10g %.6D %.11T %N", max_part.max(9)), true)
    } else {
        (format!("%{}P %.5a %.10l %.6D %.6t %N", max_part.max(9)), false)
    };
    let items: Vec<Item> = match &a.long_format {
        Some(f) => long_format(f),
        // Letters sinfo's -o has no field for are reported and printed as typed, as Slurm
        // does.
        None => format::parse(&fmt)
            .into_iter()
            .map(|it| match it {
                Item::Field { code, .. }
                    if user_format && matches!(code, 'i' | 'j' | 'k' | 'q' | 'x' | 'y' | 'J' | 'K' | 'Q' | 'W') =>
                {
                    eprintln!("Invalid node format specification: {code}");
                    Item::Lit(format!("%{code}"))
                }
                it => it,
            })
            .collect(),
    };
    // Lines group nodes that print the same (Slurm's default grouping by partition and state).
    let key_codes: Vec<char> = items
        .iter()
        .filter_map(|i| match i {
            Item::Field { code, .. } if !matches!(code, 'N' | 'D' | 'n' | 'o' | 'F' | 'A' | 'C') => Some(*code),
            _ => None,
        })
        .collect();
    let users = |uid: u32| common::user_name(uid);
    if a.reasons {
        let mut seen: Vec<(String, Vec<&v1::NodeInfo>)> = Vec::new();
        for n in reply.nodes.iter().filter(|n| node_ok(n)) {
            if n.reason.is_empty() {
                continue;
            }
            let k = format!("{}|{}|{}", n.reason, n.reason_uid, n.reason_time);
            match seen.iter_mut().find(|(kk, _)| *kk == k) {
                Some((_, v)) => v.push(n),
                None => seen.push((k, vec![n])),
            }
        }
        for (_, nodes) in seen {
            groups.push(Group { part: None, default: false, nodes });
        }
    } else {
        for p in &parts {
            let members: Vec<&v1::NodeInfo> =
                p.node_names.iter().filter_map(|n| by_name(n)).filter(|n| node_ok(n)).collect();
            if a.node {
                for n in members {
                    groups.push(Group { part: Some(p), default: p.default, nodes: vec![n] });
                }
                continue;
            }
            let mut mine: Vec<Group<'_>> = Vec::new();
            for n in members {
                let probe = Group { part: Some(p), default: p.default, nodes: vec![n] };
                let key: Vec<String> = key_codes.iter().map(|c| value(&probe, *c, &users)).collect();
                match mine.iter_mut().find(|g| {
                    let k2: Vec<String> = key_codes.iter().map(|c| value(g, *c, &users)).collect();
                    k2 == key
                }) {
                    Some(g) => g.nodes.push(n),
                    None => mine.push(probe),
                }
            }
            if mine.is_empty() {
                // A partition none of whose nodes is shown has a row of none (`0 n/a`).
                mine.push(Group { part: Some(p), default: p.default, nodes: Vec::new() });
            }
            groups.extend(mine);
        }
        // Slurm's order: `-S`, by default `#P,-t` (partitions as configured, then the node
        // state as a number, the larger first) and with -N `N`.
        let keys = a.sort.clone().unwrap_or_else(|| if a.node { "N".into() } else { "#P,-t".into() });
        sort_groups(&mut groups, &keys, &parts);
    }
    let _ = a.exact;
    let mut out = String::new();
    if (date_line || dated) && !a.noheader {
        out.push_str(&common::fmt_header_date(reply.now));
        out.push('\n');
    }
    if !a.noheader {
        out.push_str(&format::render(&items, |c| header(c).to_string()));
        out.push('\n');
    }
    for g in &groups {
        out.push_str(&format::render(
            &items,
            // `%V`: the cluster asked with -M; N/A for the local one (as Slurm).
            |c| if c == 'V' { "N/A".to_string() } else { value(g, c, &users) },
        ));
        out.push('\n');
    }
    use std::io::Write;
    let _ = std::io::stdout().write_all(out.as_bytes());
    0
}

/// A node state as Slurm numbers it (`slurm.h`: the base state in the low bits, a bit per
/// flag), from its scontrol form (`IDLE+DRAIN`): what sinfo's state sort compares.
fn state_code(scontrol: &str) -> u32 {
    let mut parts = scontrol.split('+');
    let base = match parts.next().unwrap_or("").trim_end_matches(['*', '~', '#', '!', '%', '$', '@', '^', '-']) {
        "DOWN" => 1,
        "IDLE" => 2,
        "ALLOCATED" => 3,
        "ERROR" => 4,
        "MIXED" => 5,
        "FUTURE" => 6,
        _ => 0,
    };
    parts.fold(base, |code, flag| {
        code | match flag {
            "RESERVED" => 1 << 5,
            "DRAIN" => 1 << 9,
            "COMPLETING" => 1 << 10,
            "NOT_RESPONDING" => 1 << 11,
            "POWERED_DOWN" => 1 << 12,
            "FAIL" => 1 << 13,
            "MAINT" => 1 << 15,
            "REBOOT_REQUESTED" => 1 << 16,
            "PLANNED" => 1 << 21,
            _ => 0,
        }
    })
}

/// Sorts the lines by sinfo's `-S` keys (`#P,-t`: `#` the configured order, `-` the larger
/// first), each a stable sort from the last key to the first, as Slurm sorts.
fn sort_groups<'a>(groups: &mut [Group<'a>], keys: &str, parts: &[&v1::PartitionInfo]) {
    let chars: Vec<char> = keys.chars().collect();
    for i in (0..chars.len()).rev() {
        let k = chars[i];
        if matches!(k, ',' | '#' | '+' | '-') {
            continue;
        }
        let reverse = i > 0 && chars[i - 1] == '-';
        let configured = i > 0 && chars[i - 1] == '#';
        let part_pos = |g: &Group<'_>| g.part.and_then(|p| parts.iter().position(|q| q.name == p.name)).unwrap_or(0);
        let part_name = |g: &Group<'_>| g.part.map_or(String::new(), |p| p.name.clone());
        fn first<'a>(g: &Group<'a>) -> Option<&'a v1::NodeInfo> {
            g.nodes.first().copied()
        }
        let cmp = |x: &Group<'a>, y: &Group<'a>| -> std::cmp::Ordering {
            match k {
                'P' if configured => part_pos(x).cmp(&part_pos(y)),
                'P' | 'R' => part_name(x).cmp(&part_name(y)),
                't' | 'T' => state_code(first(x).map_or("", |n| &n.state_scontrol))
                    .cmp(&state_code(first(y).map_or("", |n| &n.state_scontrol))),
                'N' | 'n' => drover_model::hostlist::natural_cmp(
                    first(x).map_or("", |n| &n.name),
                    first(y).map_or("", |n| &n.name),
                ),
                'D' => x.nodes.len().cmp(&y.nodes.len()),
                'c' => first(x).map(|n| n.cpus).cmp(&first(y).map(|n| n.cpus)),
                'm' => first(x).map(|n| n.real_memory_mb).cmp(&first(y).map(|n| n.real_memory_mb)),
                'w' => first(x).map(|n| n.weight).cmp(&first(y).map(|n| n.weight)),
                _ => std::cmp::Ordering::Equal,
            }
        };
        groups.sort_by(|x, y| if reverse { cmp(y, x) } else { cmp(x, y) });
    }
}

/// Whether `-t STATE` selects node `n`, as sinfo's filter does: a base state (`idle`,
/// `alloc`, `mix`, `down`, ...) by the node's base state whatever its flags (a drained idle
/// node is idle), a flag (`drain`, `comp`, `maint`, ...) by the flag; `drained` and
/// `draining` by the drain flag and whether jobs are still there.
fn state_matches(n: &v1::NodeInfo, want: &str) -> bool {
    let want = want.to_ascii_lowercase();
    let mut parts = n.state_scontrol.split('+');
    let base = parts.next().unwrap_or("").trim_end_matches(['*', '~', '#', '!', '%', '$', '@', '^', '-']);
    let flags: Vec<&str> = parts.collect();
    let flag = |f: &str| flags.contains(&f);
    let busy = matches!(base, "ALLOCATED" | "MIXED");
    let not_responding = n.state_short.ends_with('*') || flag("NOT_RESPONDING");
    match want.as_str() {
        "idle" => base == "IDLE",
        "alloc" | "allocated" => base == "ALLOCATED",
        "mix" | "mixed" => base == "MIXED",
        "down" => base == "DOWN",
        "future" | "futr" => base == "FUTURE",
        "unknown" | "unk" => base == "UNKNOWN",
        "drain" => flag("DRAIN"),
        "drained" => flag("DRAIN") && !busy,
        "draining" | "drng" => flag("DRAIN") && busy,
        "comp" | "completing" => flag("COMPLETING"),
        "fail" | "failing" => flag("FAIL"),
        "maint" => flag("MAINT"),
        "resv" | "reserved" => flag("RESERVED"),
        "planned" | "plnd" => flag("PLANNED"),
        "no_respond" => not_responding,
        "responding" => !not_responding,
        // Any other start of a state's name, compact or long.
        w => n.state_short.trim_end_matches('*').starts_with(w) || n.state_long.trim_end_matches('*').starts_with(w),
    }
}

/// `names` without repeats, in their order.
fn unique<'a>(names: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut seen = std::collections::HashSet::new();
    names.filter(|n| seen.insert(*n)).collect()
}

#[cfg(test)]
mod state_order_tests {
    use super::state_code;

    #[test]
    fn a_state_selects_by_base_state_or_flag() {
        let node = |sc: &str, short: &str| super::v1::NodeInfo {
            state_scontrol: sc.into(),
            state_short: short.into(),
            ..Default::default()
        };
        let drained = node("IDLE+DRAIN", "drain");
        let draining = node("MIXED+DRAIN", "drng");
        let picks = |n: &super::v1::NodeInfo| {
            ["idle", "mix", "alloc", "drain", "drained", "draining", "down"]
                .into_iter()
                .filter(|w| super::state_matches(n, w))
                .collect::<Vec<_>>()
        };
        assert_eq!(picks(&drained), ["idle", "drain", "drained"]);
        assert_eq!(picks(&draining), ["mix", "drain", "draining"]);
        assert_eq!(picks(&node("ALLOCATED", "alloc")), ["alloc"]);
    }

    #[test]
    fn states_order_as_slurm_numbers_them() {
        let mut v = vec!["DOWN", "IDLE", "ALLOCATED", "MIXED", "IDLE+DRAIN", "DOWN+NOT_RESPONDING", "ALLOCATED+DRAIN"];
        v.sort_by_key(|s| std::cmp::Reverse(state_code(s)));
        assert_eq!(v, ["DOWN+NOT_RESPONDING", "ALLOCATED+DRAIN", "IDLE+DRAIN", "MIXED", "ALLOCATED", "IDLE", "DOWN"]);
    }
}
