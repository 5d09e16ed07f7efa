//! Advance reservations from the command line: `scontrol create|update|delete reservation`,
//! `scontrol show reservation`, and `sinfo -T`, in Slurm 22.05's words and layouts.

use crate::common::{self, status_msg};
use drover_model::duration::{fmt_long, parse_time_limit};
use drover_proto::v1;

/// The keys Slurm's `_parse_res_options` knows, each with the shortest prefix it takes, and
/// whether Drover honours it.
const KEYS: &[(&str, usize, bool)] = &[
    ("Accounts", 1, true),
    ("Flags", 2, true),
    ("Groups", 1, false),
    ("Users", 1, true),
    ("ReservationName", 1, true),
    ("BurstBuffer", 2, false),
    ("StartTime", 2, true),
    ("EndTime", 1, true),
    ("Duration", 1, true),
    ("MaxStartDelay", 2, false),
    ("NodeCnt", 5, true),
    ("NodeCount", 5, true),
    ("CoreCnt", 5, false),
    ("CoreCount", 5, false),
    ("CPUCnt", 5, false),
    ("CPUCount", 5, false),
    ("Nodes", 5, true),
    ("Features", 2, false),
    ("Licenses", 2, false),
    ("PartitionName", 1, true),
    ("TRES", 1, false),
    ("Watts", 1, false),
];

/// `tag` names `full` as xstrncasecmp(tag, full, MAX(taglen, min)) does: a prefix of it,
/// at least `min` long.
fn names(tag: &str, full: &str, min: usize) -> bool {
    tag.len() >= min && full.get(..tag.len()).is_some_and(|p| p.eq_ignore_ascii_case(tag))
}

/// The options of `create`/`update`, as the wire's fields (times resolved now, durations
/// in minutes with -1 for UNLIMITED). `msg` ends every error, as in Slurm.
fn parse_options(args: &[String], msg: &str, now: i64) -> Result<Vec<v1::ResvField>, String> {
    let mut out: Vec<v1::ResvField> = Vec::new();
    for a in args {
        let Some((tag, val)) = a.split_once('=') else {
            if a.get(..3).is_some_and(|p| p.eq_ignore_ascii_case("res")) {
                continue;
            }
            return Err(format!("Misformatted parameter '{a}', most options have a parameter after '='.  {msg}"));
        };
        let (tag, op) = match tag.strip_suffix(['+', '-']) {
            Some(t) => (t, tag[t.len()..].to_string()),
            None => (tag, String::new()),
        };
        let Some(&(key, _, honoured)) = KEYS.iter().find(|(k, min, _)| names(tag, k, *min)) else {
            if tag.get(..3).is_some_and(|p| p.eq_ignore_ascii_case("res")) {
                continue;
            }
            return Err(format!("Unknown parameter {a}.  {msg}"));
        };
        if !honoured {
            return Err(format!("{key} is not supported by Drover yet.  {msg}"));
        }
        let key = if key == "NodeCount" { "NodeCnt" } else { key };
        if !op.is_empty() && !matches!(key, "Accounts" | "Users" | "Flags" | "Duration") {
            return Err(format!("The +=/-= notation is not supported when updating {tag}.  {msg}"));
        }
        if matches!(key, "Accounts" | "Users") && out.iter().any(|f| f.key == key) {
            return Err(format!("Parameter {a} specified more than once"));
        }
        let value = match key {
            "StartTime" | "EndTime" => match common::parse_time_spec(val, now) {
                Some(t) => t.to_string(),
                None => {
                    let which = if key == "StartTime" { "start" } else { "end" };
                    return Err(format!("Invalid {which} time {a}.  {msg}"));
                }
            },
            "Duration" => match parse_time_limit(val) {
                Ok(Some(secs)) => secs.div_ceil(60).to_string(),
                Ok(None) => "-1".into(),
                Err(_) => return Err(format!("Invalid duration {a}.  {msg}")),
            },
            "Flags" => {
                drover_model::resv::parse_flags(val).map_err(|e| format!("{e}.  {msg}"))?;
                val.to_string()
            }
            _ => val.to_string(),
        };
        out.push(v1::ResvField { key: key.into(), value, op });
    }
    Ok(out)
}

fn field<'a>(f: &'a [v1::ResvField], key: &str) -> Option<&'a str> {
    f.iter().rev().find(|x| x.key == key).map(|x| x.value.as_str())
}

fn send(req: v1::ResvRequest) -> Result<v1::ResvReply, String> {
    let cfg = common::load_config()?;
    common::runtime().block_on(async {
        let mut c = common::connect(&cfg).await?;
        c.reservation(req).await.map(|r| r.into_inner()).map_err(|s| status_msg(&s))
    })
}

/// `scontrol create reservation ...`.
pub fn create(args: &[String]) -> i32 {
    const MSG: &str = "No reservation created.";
    let now = common::now();
    let fields = match parse_options(args, MSG, now) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("scontrol: error: {e}");
            return 1;
        }
    };
    let has = |k: &str| field(&fields, k).is_some_and(|v| !v.is_empty());
    let refuse = |e: &str| {
        eprintln!("scontrol: error: {e}  {MSG}");
        1
    };
    let Some(start) = field(&fields, "StartTime").and_then(|s| s.parse::<i64>().ok()) else {
        return refuse("A start time must be given.");
    };
    let end = field(&fields, "EndTime").and_then(|s| s.parse::<i64>().ok());
    let minutes = field(&fields, "Duration").and_then(|s| s.parse::<i64>().ok());
    if end.is_none() && minutes.is_none() {
        return refuse("An end time or duration must be given.");
    }
    if let (Some(e), Some(m)) = (end, minutes) {
        if start + m * 60 != e {
            return refuse("StartTime + Duration does not equal EndTime.");
        }
    }
    if end.is_some_and(|e| start > e) {
        return refuse("Start time cannot be after end time.");
    }
    if !has("Nodes") && !has("NodeCnt") && !has("PartitionName") {
        return refuse("CoreCnt, Nodes, NodeCnt, BurstBuffer, Licenses or Watts must be specified.");
    }
    if !has("Users") && !has("Accounts") {
        return refuse("Either Users/Groups and/or Accounts must be specified.");
    }
    let whole_partition = !has("Nodes") && !has("NodeCnt");
    let mut fields = fields;
    if whole_partition {
        // A partition named alone: all of its nodes.
        fields.push(v1::ResvField { key: "Nodes".into(), value: "ALL".into(), op: String::new() });
    }
    match send(v1::ResvRequest { action: "create".into(), fields }) {
        Ok(r) => {
            println!("Reservation created: {}", r.name);
            0
        }
        Err(e) => {
            eprintln!("Error creating the reservation: {e}");
            if e == "Requested nodes are busy" || e == "Requested node configuration is not available" {
                println!(
                    "Note, unless nodes are directly requested a reservation must exist in a single partition.\n\
                     If no partition is requested the default partition is assumed."
                );
            }
            1
        }
    }
}

/// `scontrol update ReservationName=... ...`.
pub fn update(args: &[String]) -> i32 {
    const MSG: &str = "No reservation update.";
    let fail = |e: &str| {
        eprintln!("slurm_update error: {e}");
        1
    };
    let fields = match parse_options(args, MSG, common::now()) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("scontrol: error: {e}");
            return fail("No error");
        }
    };
    if field(&fields, "ReservationName").is_none() {
        eprintln!("scontrol: error: Reservation must be given.  {MSG}");
        return 1;
    }
    match send(v1::ResvRequest { action: "update".into(), fields }) {
        Ok(_) => {
            println!("Reservation updated.");
            0
        }
        Err(e) => {
            eprintln!("Error updating the reservation: {e}");
            fail(&e)
        }
    }
}

/// `scontrol delete ReservationName=NAME` or `scontrol delete reservation NAME`; `args` are
/// the words after `delete`.
pub fn delete(args: &[String]) -> i32 {
    let first = args.first().cloned().unwrap_or_default();
    let name = match first.split_once('=') {
        Some((_, v)) => v.to_string(),
        None => match args.get(1) {
            Some(n) => n.clone(),
            None => {
                eprintln!("scontrol: error: Proper format is 'delete <ENTITY>=<ID>' or 'delete <ENTITY> <ID>'");
                return 1;
            }
        },
    };
    let fields = vec![v1::ResvField { key: "ReservationName".into(), value: name, op: String::new() }];
    match send(v1::ResvRequest { action: "delete".into(), fields }) {
        Ok(_) => 0,
        Err(e) => {
            eprintln!("delete_reservation {first}: {e}");
            1
        }
    }
}

fn fetch() -> Result<v1::StateReply, String> {
    let cfg = common::load_config()?;
    common::runtime().block_on(async {
        let mut c = common::connect(&cfg).await?;
        c.get_state(v1::StateRequest { reservations: true, ..Default::default() })
            .await
            .map(|r| r.into_inner())
            .map_err(|s| status_msg(&s))
    })
}

/// Slurm calls a reservation active from its start to its end, both included.
fn state(r: &v1::ResvInfo, now: i64) -> &'static str {
    if r.start_time <= now && now <= r.end_time {
        "ACTIVE"
    } else {
        "INACTIVE"
    }
}

fn or_null(s: &str) -> &str {
    if s.is_empty() {
        "(null)"
    } else {
        s
    }
}

fn list(v: &[String]) -> String {
    if v.is_empty() {
        "(null)".into()
    } else {
        v.join(",")
    }
}

/// One reservation as `scontrol show reservation` prints it (`-o`: on one line).
pub fn show_text(r: &v1::ResvInfo, now: i64, oneliner: bool) -> String {
    let lines = [
        format!(
            "ReservationName={} StartTime={} EndTime={} Duration={}",
            r.name,
            common::fmt_time(r.start_time),
            common::fmt_time(r.end_time),
            fmt_long((r.end_time - r.start_time).max(0) as u64)
        ),
        format!(
            "Nodes={} NodeCnt={} CoreCnt={} Features=(null) PartitionName={} Flags={}",
            or_null(&r.nodes),
            r.node_cnt,
            r.core_cnt,
            or_null(&r.partition),
            r.flags
        ),
        format!("TRES=cpu={}", r.core_cnt),
        format!(
            "Users={} Groups=(null) Accounts={} Licenses=(null) State={} BurstBuffer=(null) Watts=n/a",
            list(&r.users),
            list(&r.accounts),
            state(r, now)
        ),
        "MaxStartDelay=(null)".to_string(),
    ];
    if oneliner {
        format!("{}\n", lines.join(" "))
    } else {
        format!("{}\n\n", lines.join("\n   "))
    }
}

/// `scontrol show reservation [NAME]`.
pub fn show(name: Option<&str>, oneliner: bool) -> i32 {
    let reply = match fetch() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("slurm_load_reservations error: {e}");
            return 1;
        }
    };
    let shown: Vec<&v1::ResvInfo> = reply.reservations.iter().filter(|r| name.is_none_or(|n| r.name == n)).collect();
    if shown.is_empty() {
        return match name {
            Some(n) => {
                println!("Reservation {n} not found");
                1
            }
            None => {
                println!("No reservations in the system");
                0
            }
        };
    }
    let text: String = shown.iter().map(|r| show_text(r, reply.now, oneliner)).collect();
    print!("{text}");
    0
}

/// `sinfo -T` (`--reservation`): one line per reservation.
pub fn sinfo_report(no_header: bool) -> i32 {
    let reply = match fetch() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("slurm_load_reservations: {e}");
            return 1;
        }
    };
    print!("{}", sinfo_text(&reply.reservations, reply.now, no_header));
    0
}

pub fn sinfo_text(resvs: &[v1::ResvInfo], now: i64, no_header: bool) -> String {
    if resvs.is_empty() {
        return "No reservations in the system\n".into();
    }
    // The name column is as wide as the longest name (9 at least), when there is a header.
    let width = if no_header { 9 } else { resvs.iter().map(|r| r.name.len()).max().unwrap_or(0).max(9) };
    let mut out = String::new();
    if !no_header {
        out.push_str(&format!(
            "{:<width$}  {:>8}  {:>19}  {:>19}  {:>11}  {}\n",
            "RESV_NAME", "STATE", "START_TIME", "END_TIME", "DURATION", "NODELIST"
        ));
    }
    for r in resvs {
        out.push_str(&format!(
            "{:<width$}  {:>8}  {:>19}  {:>19}  {:>11}  {}\n",
            r.name,
            state(r, now),
            common::fmt_time(r.start_time),
            common::fmt_time(r.end_time),
            fmt_long((r.end_time - r.start_time).max(0) as u64),
            r.nodes
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn options_parse_as_scontrol_reads_them() {
        let f =
            parse_options(&args("reservation st=now du=60 nodes=node[1-2] us=root fl=maint,daily"), "X", 1000).unwrap();
        let kv: Vec<(&str, &str)> = f.iter().map(|f| (f.key.as_str(), f.value.as_str())).collect();
        assert_eq!(
            kv,
            [
                ("StartTime", "1000"),
                ("Duration", "60"),
                ("Nodes", "node[1-2]"),
                ("Users", "root"),
                ("Flags", "maint,daily")
            ]
        );
        let f = parse_options(&args("ReservationName=r Duration+=30 Users-=bob du=UNLIMITED"), "X", 0).unwrap();
        assert_eq!((f[1].op.as_str(), f[2].op.as_str(), f[3].value.as_str()), ("+", "-", "-1"));
        assert_eq!(
            parse_options(&args("bogus=1"), "No reservation created.", 0),
            Err("Unknown parameter bogus=1.  No reservation created.".into())
        );
        assert_eq!(
            parse_options(&args("nodes"), "No reservation created.", 0),
            Err("Misformatted parameter 'nodes', most options have a parameter after '='.  No reservation created."
                .into())
        );
        assert_eq!(
            parse_options(&args("starttime=never"), "M", 0),
            Err("Invalid start time starttime=never.  M".into())
        );
        assert_eq!(
            parse_options(&args("nodes+=node1"), "M", 0).unwrap_err(),
            "The +=/-= notation is not supported when updating nodes.  M"
        );
        assert!(parse_options(&args("CoreCnt=4"), "M", 0).unwrap_err().starts_with("CoreCnt is not supported"));
    }

    #[test]
    fn sinfo_columns_as_slurm_lays_them_out() {
        let r = v1::ResvInfo {
            name: "root_1".into(),
            start_time: 1_000_000,
            end_time: 1_003_600,
            nodes: "node[1-2]".into(),
            ..Default::default()
        };
        let text = sinfo_text(std::slice::from_ref(&r), 1_000_100, false);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "RESV_NAME     STATE           START_TIME             END_TIME     DURATION  NODELIST");
        assert!(lines[1].starts_with("root_1       ACTIVE  "), "{}", lines[1]);
        assert!(lines[1].ends_with("     01:00:00  node[1-2]"), "{}", lines[1]);
    }
}
