//! `squeue`: the queue, in Slurm's formats.

use crate::common;
use crate::format::{self, Item};
use crate::jobview::{self, squeue_field, squeue_header};
use clap::Parser;
use drover_model::state::JobState;
use drover_proto::v1;

#[derive(Parser, Debug)]
#[command(name = "squeue", disable_help_flag = true, disable_version_flag = true, args_override_self = true)]
struct Args {
    #[arg(short = 'h', long = "noheader")]
    noheader: bool,
    #[arg(short = 'l', long = "long")]
    long: bool,
    #[arg(short = 'o', long = "format")]
    format: Option<String>,
    #[arg(short = 'O', long = "Format")]
    format_long: Option<String>,
    #[arg(short = 'j', long = "jobs", num_args = 0..=1, default_missing_value = "")]
    jobs: Vec<String>,
    #[arg(short = 'u', long = "user")]
    users: Option<String>,
    #[arg(long = "me")]
    me: bool,
    #[arg(short = 'p', long = "partition")]
    partitions: Option<String>,
    #[arg(short = 't', long = "states")]
    states: Option<String>,
    #[arg(short = 'n', long = "name")]
    names: Option<String>,
    #[arg(short = 'w', long = "nodelist")]
    nodes: Option<String>,
    #[arg(short = 'S', long = "sort")]
    sort: Option<String>,
    #[arg(short = 'r', long = "array")]
    array: bool,
    #[arg(long = "start")]
    start: bool,
    #[arg(long = "json")]
    json: bool,
    #[arg(short = 'a', long = "all")]
    all: bool,
    #[arg(short = 'A', long = "account")]
    account: Option<String>,
    #[arg(short = 'q', long = "qos")]
    qos: Option<String>,
    #[arg(short = 'M', long = "clusters")]
    clusters: Option<String>,
    #[arg(short = 's', long = "steps", num_args = 0..=1, default_missing_value = "")]
    steps: Option<String>,
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(flatten)]
    std: common::StdFlags,
    /// Job ids may also be given bare.
    #[arg(trailing_var_arg = true)]
    rest: Vec<String>,
}

const DEFAULT: &str = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R";
const LONG: &str = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R";
const START: &str = "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %20Y %R";

/// `-O` long field names and the `%` code each stands for.
fn long_field(name: &str) -> Option<char> {
    Some(match name.to_ascii_lowercase().as_str() {
        "account" => 'a',
        "arrayjobid" => 'F',
        "arraytaskid" => 'K',
        "batchhost" => 'B',
        "command" => 'o',
        "comment" => 'k',
        "cpus-per-task" | "cpuspertask" => 'c',
        "dependency" => 'E',
        "endtime" => 'e',
        "feature" => 'f',
        "groupid" => 'G',
        "groupname" => 'g',
        "jobid" | "jobarrayid" => 'i',
        "minmemory" => 'm',
        "name" => 'j',
        "nodelist" => 'N',
        "numcpus" => 'C',
        "numnodes" => 'D',
        "partition" => 'P',
        "priority" => 'p',
        "prioritylong" => 'Q',
        "qos" => 'q',
        "reason" => 'r',
        "reasonlist" => 'R',
        "reqnodes" => 'n',
        "starttime" => 'S',
        "state" => 'T',
        "statecompact" => 't',
        "submittime" => 'V',
        "timeleft" => 'L',
        "timelimit" => 'l',
        "timeused" => 'M',
        "userid" => 'U',
        "username" => 'u',
        "workdir" => 'Z',
        "schednodes" => 'Y',
        "exit_code" | "exitcode" => 'X',
        _ => return None,
    })
}

fn parse_long_format(spec: &str) -> Result<Vec<Item>, String> {
    let mut items = Vec::new();
    for f in spec.split(',').filter(|f| !f.is_empty()) {
        let (name, size) = match f.split_once(':') {
            Some((n, s)) => (n, Some(s)),
            None => (f, None),
        };
        let code = long_field(name).ok_or_else(|| format!("Invalid job format specification: {name}"))?;
        let (right, width) = match size {
            Some(s) => {
                let right = s.starts_with('.');
                (right, s.trim_start_matches('.').parse::<usize>().ok())
            }
            None => (false, Some(20)),
        };
        items.push(Item::Field { code, width, right });
        items.push(Item::Lit(" ".into()));
    }
    items.pop();
    Ok(items)
}

fn state_rank(s: &str) -> u32 {
    match JobState::parse(s) {
        Some(JobState::Pending) => 0,
        Some(JobState::Running) => 1,
        Some(JobState::Suspended) => 2,
        Some(JobState::Completing) => 1,
        Some(JobState::Completed) => 3,
        Some(JobState::Cancelled) => 4,
        Some(JobState::Failed) => 5,
        Some(JobState::Timeout) => 6,
        Some(JobState::NodeFail) => 7,
        _ => 8,
    }
}

/// Sorts references (a job record is large; moving records costs more than comparing), with
/// each job's state rank computed once rather than at every comparison.
fn sort_jobs(jobs: &mut Vec<&v1::JobInfo>, keys: &str, now: i64) {
    let keys: Vec<(bool, char)> = keys
        .split(',')
        .filter_map(|k| {
            let desc = k.starts_with('-');
            let k = k.trim_start_matches(['-', '+']);
            k.chars().next().map(|c| (desc, c))
        })
        .collect();
    let mut keyed: Vec<(u32, &v1::JobInfo)> = jobs.iter().map(|j| (state_rank(&j.state), *j)).collect();
    keyed.sort_by(|(ra, a), (rb, b)| {
        for &(desc, key) in &keys {
            let ord = match key {
                'P' => a.partition.cmp(&b.partition),
                't' | 'T' => ra.cmp(rb),
                'p' | 'Q' => a.priority.cmp(&b.priority),
                'i' | 'A' => a.job_id.cmp(&b.job_id),
                'j' => jobview::spec(a).name.cmp(&jobview::spec(b).name),
                'u' => jobview::user(a).cmp(&jobview::user(b)),
                'S' => a.start_time.cmp(&b.start_time),
                'V' => a.submit_time.cmp(&b.submit_time),
                'M' => jobview::used(a, now).cmp(&jobview::used(b, now)),
                'D' => jobview::num_nodes(a).cmp(&jobview::num_nodes(b)),
                'C' => jobview::num_cpus(a).cmp(&jobview::num_cpus(b)),
                'N' => a.nodes.cmp(&b.nodes),
                _ => std::cmp::Ordering::Equal,
            };
            let ord = if desc { ord.reverse() } else { ord };
            if ord != std::cmp::Ordering::Equal {
                return ord;
            }
        }
        a.job_id.cmp(&b.job_id)
    });
    *jobs = keyed.into_iter().map(|(_, j)| j).collect();
}

pub fn main(args: Vec<String>) -> i32 {
    let a: Args = match common::parse_command("squeue", args, "Usage: squeue [-A account] [--clusters names] [-i seconds] [--job jobid]\n              [-n name] [-o format] [--only-job-state] [-p partitions]\n              [--qos qos] [--reservation reservation] [--sort fields] [--start]\n              [--step step_id] [-t states] [-u user_name] [--usage]\n              [-L licenses] [-w nodes] [--federation] [--local] [--sibling]\n              [--expand-patterns] [--json] [--yaml] [-ahjlrsv]", |a: &Args| &a.std) {
        Ok(a) => a,
        Err(code) => return code,
    };
    let job_ids = match common::parse_job_ids(a.jobs.iter().chain(a.rest.iter())) {
        Ok(ids) => ids,
        Err(id) => {
            eprintln!("squeue: error: Invalid job id: {id}");
            return 1;
        }
    };
    let cfg = match common::config_for("squeue") {
        Ok(c) => c,
        Err(code) => return code,
    };
    let active_only = a.states.is_none();
    let req = v1::StateRequest { job_ids: job_ids.clone(), jobs: true, active_only, ..Default::default() };
    let reply = match common::fetch_state(&cfg, req) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("slurm_load_jobs error: {e}");
            return 1;
        }
    };
    let mut reply = reply;
    let now = reply.now;
    let mut jobs = drover_proto::reply_jobs(&mut reply);
    if !job_ids.is_empty() && jobs.is_empty() {
        eprintln!("slurm_load_jobs error: Invalid job id specified");
        return 1;
    }
    // Filters.
    let states: Option<Vec<String>> = a.states.as_ref().map(|s| s.split(',').map(|x| x.to_ascii_uppercase()).collect());
    let users: Option<Vec<String>> = if a.me {
        Some(vec![common::user_name(nix::unistd::getuid().as_raw())])
    } else {
        a.users.as_ref().map(|u| u.split(',').map(String::from).collect())
    };
    let parts: Option<Vec<String>> = a.partitions.as_ref().map(|p| p.split(',').map(String::from).collect());
    let names: Option<Vec<String>> = a.names.as_ref().map(|p| p.split(',').map(String::from).collect());
    let node_filter: Option<Vec<String>> =
        a.nodes.as_ref().and_then(|n| drover_model::hostlist::Hostlist::parse(n).ok()).map(|h| h.names());
    jobs.retain(|j| {
        let st = JobState::parse(&j.state);
        let state_ok = match &states {
            Some(list) => list.iter().any(|s| s == "ALL" || JobState::parse(s).is_some_and(|want| Some(want) == st)),
            None => !job_ids.is_empty() || st.is_some_and(|s| !s.is_finished()),
        };
        let user_ok = users
            .as_ref()
            .is_none_or(|u| u.iter().any(|x| *x == jobview::user(j) || *x == jobview::spec(j).uid.to_string()));
        let part_ok = parts.as_ref().is_none_or(|p| p.contains(&j.partition));
        let name_ok = names.as_ref().is_none_or(|n| n.contains(&jobview::spec(j).name));
        let node_ok = node_filter.as_ref().is_none_or(|n| j.alloc.iter().any(|a| n.contains(&a.node)));
        state_ok && user_ok && part_ok && name_ok && node_ok
    });
    if a.json {
        println!("{}", crate::json::squeue_json(&jobs, &reply.cluster_name, now));
        return 0;
    }
    let sort = a.sort.clone().or_else(|| std::env::var("SQUEUE_SORT").ok()).unwrap_or_else(|| {
        if a.start {
            "S".into()
        } else {
            "P,t,-p".into()
        }
    });
    let mut jobs: Vec<&v1::JobInfo> = jobs.iter().collect();
    sort_jobs(&mut jobs, &sort, now);
    let items = if let Some(f) = &a.format_long {
        match parse_long_format(f) {
            Ok(i) => i,
            Err(e) => {
                eprintln!("squeue: error: {e}");
                return 1;
            }
        }
    } else {
        let fmt = a.format.clone().or_else(|| std::env::var("SQUEUE_FORMAT").ok()).unwrap_or_else(|| {
            if a.start {
                START.into()
            } else if a.long {
                LONG.into()
            } else {
                DEFAULT.into()
            }
        });
        format::parse(&fmt)
    };
    let mut out = String::new();
    if a.long && !a.noheader {
        out.push_str(&common::fmt_header_date(now));
        out.push('\n');
    }
    if !a.noheader {
        out.push_str(&format::render(&items, |c| squeue_header(c).to_string()));
        out.push('\n');
    }
    for j in jobs {
        if a.start && !jobview::is_pending(j) {
            continue;
        }
        format::render_into(&mut out, &items, &mut |c| squeue_field(j, c, now));
        out.push('\n');
    }
    use std::io::Write;
    let _ = std::io::stdout().write_all(out.as_bytes());
    0
}
