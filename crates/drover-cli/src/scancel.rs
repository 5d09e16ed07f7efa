//! `scancel`: cancel or signal jobs.

use crate::common::{self, status_msg};
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

pub fn main(args: Vec<String>) -> i32 {
    let a: Args = match common::parse_command("scancel", args, |a: &Args| &a.std) {
        Ok(a) => a,
        Err(code) => return code,
    };
    let ids = match common::parse_targets(&a.jobs) {
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
