//! `scancel`: cancel or signal jobs.

use crate::common::{self, status_msg};
use crate::jobview;
use clap::Parser;
use drover_proto::v1;

#[derive(Parser, Debug)]
#[command(
    name = "scancel",
    disable_help_flag = true,
    disable_version_flag = true,
    args_override_self = true,
    infer_long_args = true
)]
struct Args {
    #[arg(short = 'u', long = "user")]
    user: Option<String>,
    #[arg(long = "me")]
    me: bool,
    #[arg(short = 'n', long = "name", alias = "jobname")]
    name: Option<String>,
    #[arg(short = 't', long = "state")]
    state: Option<String>,
    #[arg(short = 'p', long = "partition")]
    partition: Option<String>,
    #[arg(short = 'w', long = "nodelist")]
    nodelist: Option<String>,
    #[arg(short = 's', long = "signal")]
    signal: Option<String>,
    #[arg(short = 'b', long = "batch")]
    batch: bool,
    #[arg(short = 'f', long = "full")]
    full: bool,
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count)]
    verbose: u8,
    #[arg(short = 'Q', long = "quiet")]
    quiet: bool,
    #[arg(short = 'i', long = "interactive")]
    interactive: bool,
    #[arg(short = 'A', long = "account")]
    account: Option<String>,
    #[arg(short = 'q', long = "qos")]
    qos: Option<String>,
    #[arg(short = 'M', long = "clusters")]
    clusters: Option<String>,
    /// Confirms the cancel of a scrontab job (its entry is disabled).
    #[arg(short = 'c', long = "cron")]
    cron: bool,
    #[command(flatten)]
    std: common::StdFlags,
    jobs: Vec<String>,
}

/// A signal by name (`TERM`, `SIGUSR1`) or number.
pub fn parse_signal(s: &str) -> Option<i32> {
    drover_model::signal::signal_number(s)
}

/// `-i`: the targets whose cancel the user confirms, asked job by job on standard output in
/// scancel's words (`Cancel job_id=13 name=x partition=cpu [y/n]? `), the answer a line of
/// standard input (y or n, asked again otherwise; none is no). Jobs the filters select are
/// found here; an id that matches no active job is passed on for the controller to refuse.
fn confirmed(
    cfg: &drover_model::conf::Config,
    a: &Args,
    ids: &[v1::JobTarget],
    user: Option<&str>,
) -> Result<Vec<v1::JobTarget>, String> {
    use std::io::{BufRead, Write};
    let req = v1::StateRequest {
        job_ids: ids.iter().map(|t| t.job_id).collect(),
        jobs: true,
        active_only: true,
        ..Default::default()
    };
    let jobs = common::jobs_in(common::fetch_state(cfg, req)?);
    let nodes: Option<Vec<String>> =
        a.nodelist.as_ref().map(|n| drover_model::hostlist::Hostlist::parse(n).map(|h| h.names()).unwrap_or_default());
    let selected = |j: &v1::JobInfo| {
        let spec = jobview::spec(j);
        let st = j.state.as_str();
        user.is_none_or(|u| u == jobview::user(j) || u.parse::<u32>() == Ok(spec.uid))
            && a.name.as_ref().is_none_or(|n| n.split(',').any(|n| n == spec.name))
            && a.partition.as_ref().is_none_or(|p| p.split(',').any(|p| p == j.partition))
            && a.state.as_ref().is_none_or(|s| {
                s.split(',').any(|s| match s.to_ascii_uppercase().as_str() {
                    "PD" | "PENDING" => st == "PENDING",
                    "R" | "RUNNING" => st == "RUNNING",
                    _ => st == "SUSPENDED",
                })
            })
            && nodes.as_ref().is_none_or(|n| j.alloc.iter().any(|al| n.contains(&al.node)))
    };
    let ask = |what: String, j: &v1::JobInfo| -> bool {
        let stdin = std::io::stdin();
        loop {
            print!("Cancel {what} name={} partition={} [y/n]? ", jobview::spec(j).name, j.partition);
            let _ = std::io::stdout().flush();
            let mut line = String::new();
            match stdin.lock().read_line(&mut line) {
                Ok(0) | Err(_) => return false,
                Ok(_) => match line.chars().next() {
                    Some('y' | 'Y') => return true,
                    Some('n' | 'N') => return false,
                    _ => continue,
                },
            }
        }
    };
    let mut out = Vec::new();
    if ids.is_empty() {
        for j in jobs.iter().filter(|j| selected(j)) {
            if ask(format!("job_id={}", jobview::job_id_text(j)), j) {
                out.push(target_of(j));
            }
        }
        return Ok(out);
    }
    for t in ids {
        let of_it: Vec<&v1::JobInfo> =
            jobs.iter().filter(|j| (j.job_id == t.job_id || j.array_job_id == t.job_id) && selected(j)).collect();
        if of_it.is_empty() {
            out.push(t.clone());
            continue;
        }
        match (t.step_id, &t.tasks) {
            (Some(step), _) => {
                if ask(format!("step_id={}.{step}", t.job_id), of_it[0]) {
                    out.push(t.clone());
                }
            }
            // Tasks named: one question for what was named.
            (None, Some(tasks)) => {
                if ask(format!("job_id={}_{tasks}", t.job_id), of_it[0]) {
                    out.push(t.clone());
                }
            }
            (None, None) => {
                for j in of_it {
                    if ask(format!("job_id={}", jobview::job_id_text(j)), j) {
                        out.push(target_of(j));
                    }
                }
            }
        }
    }
    Ok(out)
}

/// The target that names one job record: a job, an array task, or an array's remainder.
fn target_of(j: &v1::JobInfo) -> v1::JobTarget {
    match (j.array_job_id, j.array_task_id) {
        (0, _) => v1::JobTarget { job_id: j.job_id, ..Default::default() },
        (a, Some(t)) => v1::JobTarget { job_id: a, tasks: Some(t.to_string()), step_id: None },
        (a, None) => v1::JobTarget { job_id: a, tasks: Some(jobview::array_task_str(j)), step_id: None },
    }
}

pub fn main(args: Vec<String>) -> i32 {
    let a: Args = match common::parse_command("scancel", args, |a: &Args| &a.std) {
        Ok(a) => a,
        Err(code) => return code,
    };
    let mut ids = match common::parse_targets(&a.jobs) {
        Ok(ids) => ids,
        Err(id) => {
            eprintln!("scancel: error: Invalid job id {id}");
            return 1;
        }
    };
    let user = if a.me { Some(common::user_name(nix::unistd::getuid().as_raw())) } else { a.user.clone() };
    // A user who does not exist, and a state scancel cannot cancel, are refused in Slurm's
    // words before the controller is asked.
    if let Some(u) = &user {
        let known = u.parse::<u32>().is_ok() || nix::unistd::User::from_name(u).ok().flatten().is_some();
        if !known {
            eprintln!("scancel: error: Invalid user name: {u}");
            return 1;
        }
    }
    if let Some(st) = &a.state {
        let ok =
            |s: &str| matches!(s.to_ascii_uppercase().as_str(), "PENDING" | "PD" | "RUNNING" | "R" | "SUSPENDED" | "S");
        if let Some(bad) = st.split(',').find(|s| !ok(s)) {
            eprintln!("Invalid job state specified: {bad}");
            eprintln!("Valid job states are PENDING, RUNNING, and SUSPENDED");
            return 1;
        }
    }
    let filtered =
        user.is_some() || a.name.is_some() || a.state.is_some() || a.partition.is_some() || a.nodelist.is_some();
    if ids.is_empty() && !filtered {
        eprintln!("scancel: error: No job identification provided");
        return 1;
    }
    let signal = match &a.signal {
        Some(s) => match parse_signal(s) {
            Some(n) => n,
            None => {
                eprintln!("Unknown job signal: {s}");
                return 1;
            }
        },
        None => 0,
    };
    let cfg = match common::config_for("scancel") {
        Ok(c) => c,
        Err(code) => return code,
    };
    let mut user = user;
    let mut a = a;
    if a.interactive {
        // Each job asked about on its own; the request then names only those confirmed.
        ids = match confirmed(&cfg, &a, &ids, user.as_deref()) {
            Ok(ids) if ids.is_empty() => return 0,
            Ok(ids) => ids,
            Err(e) => {
                eprintln!("scancel: error: {e}");
                return 1;
            }
        };
        user = None;
        (a.name, a.state, a.partition, a.nodelist) = (None, None, None, None);
    }
    let req = v1::CancelRequest {
        targets: ids,
        signal,
        batch_only: a.batch,
        full: a.full,
        has_user: user.is_some(),
        user: user.unwrap_or_default(),
        name: a.name.clone().unwrap_or_default(),
        state: a.state.clone().unwrap_or_default(),
        partition: a.partition.clone().unwrap_or_default(),
        nodelist: a.nodelist.clone().unwrap_or_default(),
        cron: a.cron,
        ..Default::default()
    };
    let rt = common::runtime();
    let reply = rt.block_on(async {
        let mut c = common::connect(&cfg).await?;
        c.cancel(req).await.map(|r| r.into_inner()).map_err(|s| status_msg(&s))
    });
    let reply = match reply {
        Ok(r) => r,
        Err(e) => {
            eprintln!("scancel: error: {e}");
            return 1;
        }
    };
    let mut rc = 0;
    for r in reply.results {
        let target = if r.target.is_empty() { r.job_id.to_string() } else { r.target.clone() };
        if let Some((job, _)) = target.split_once('.') {
            // A step. Slurm names only its job in the error, and exits with the low byte
            // of its error number (ESLURM_INVALID_JOB_ID: 2017 → 225).
            if a.verbose > 0 {
                if signal != 0 {
                    eprintln!("scancel: Signal {signal} to step {target}");
                } else {
                    eprintln!("scancel: Terminating step {target}");
                }
            }
            if !r.error.is_empty() {
                if !a.quiet {
                    eprintln!("scancel: error: Kill job error on job step id {job}: {}", r.error);
                }
                rc = if r.error == "Invalid job id specified" { 2017 & 0xff } else { 1 };
            }
            continue;
        }
        if a.verbose > 0 {
            let kind = if a.full {
                "full "
            } else if a.batch {
                "batch "
            } else {
                ""
            };
            if signal != 0 {
                eprintln!("scancel: Signal {signal} to {kind}job {target}");
            } else {
                eprintln!("scancel: Terminating {kind}job {target}");
            }
        }
        if r.error.is_empty() {
            continue;
        }
        let quiet_ok = r.error == "Invalid job id specified" || r.error == "Job/step already completing or completed";
        if quiet_ok && a.verbose == 0 {
            continue;
        }
        if !a.quiet || !quiet_ok {
            eprintln!("scancel: error: Kill job error on job id {target}: {}", r.error);
        }
        if !quiet_ok {
            rc = 1;
        }
    }
    rc
}
