//! `drover sim` arguments and output.

use crate::{run, swf, usable, Machine, Summary};
use clap::Parser;
use drover_sched::{BackfillOrder, SchedConfig};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "drover sim",
    about = "Replay a workload (an SWF trace, or a site's own jobs from its accounting) through Drover's scheduler in virtual time, or forecast the live queue (--now)"
)]
pub struct SimArgs {
    /// The trace: Standard Workload Format, optionally gzipped (.gz).
    #[arg(required_unless_present_any = ["now", "from_accounting"], conflicts_with = "from_accounting")]
    pub trace: Option<PathBuf>,
    /// Instead of a trace: the jobs that ran on the site's cluster (its ClusterName) in the
    /// last --days, read from its accounting database (a SQLite file, or a mysql:// or
    /// postgres:// URL), each replayed with its whole request. Needs --config.
    #[arg(long, value_name = "URL", requires = "config")]
    pub from_accounting: Option<String>,
    /// With --from-accounting: how many days back.
    #[arg(long, default_value_t = 7.0, requires = "from_accounting")]
    pub days: f64,
    /// Instead of a trace: what the next hours look like on the live cluster (its queue run
    /// forward by its own scheduler; see `--hours`).
    #[arg(long, conflicts_with_all = ["trace", "procs", "nodes", "config", "policy", "predict", "order", "slip_limit", "jobs_out", "svg", "no_timing"])]
    pub now: bool,
    /// With --now: how far to look, in hours.
    #[arg(long, default_value_t = 24.0, requires = "now")]
    pub hours: f64,
    /// A machine of N single-CPU nodes' worth of processors (one node of N CPUs).
    #[arg(long, conflicts_with_all = ["nodes", "config"])]
    pub procs: Option<u32>,
    /// N nodes of --cpus-per-node CPUs.
    #[arg(long, requires = "cpus_per_node", conflicts_with = "config")]
    pub nodes: Option<u32>,
    #[arg(long)]
    pub cpus_per_node: Option<u32>,
    /// A site's slurm.conf: its nodes (CPUs, memory, GRES, features, weights), partitions
    /// (limits, state) and scheduling parameters; without --policy, its policy.
    #[arg(long, visible_alias = "conf")]
    pub config: Option<PathBuf>,
    /// predictive (Drover's default: EASY on predicted run times, backfill by slowdown
    /// score), conservative (Slurm's: reservations for all, on time limits), easy (one
    /// reservation, on time limits), fcfs (no backfill); `default` is predictive. Several,
    /// comma-separated, replay the trace under each in turn (easy,default).
    /// (Default: a --config's own, else `default`.)
    #[arg(long)]
    pub policy: Option<String>,
    /// Plan on run times predicted from each user's recent jobs (yes) or on time limits
    /// (no), whatever the policy does.
    #[arg(long, value_parser = ["yes", "no"])]
    pub predict: Option<String>,
    /// Try the jobs left after the reservations for backfill in priority order or by
    /// slowdown score, whatever the policy does.
    #[arg(long, value_parser = ["priority", "slowdown"])]
    pub order: Option<String>,
    /// bf_slip_limit (seconds) for a policy with predictions.
    #[arg(long)]
    pub slip_limit: Option<i64>,
    /// Print one JSON summary object.
    #[arg(long)]
    pub json: bool,
    /// Write one CSV row per job (id,submit,start,end,wait,run,procs,nodes).
    #[arg(long)]
    pub jobs_out: Option<PathBuf>,
    /// Write a chart of mean wait by job size, a bar per policy (SVG).
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// Report sched_cpu_s as 0, so that runs compare byte for byte.
    #[arg(long)]
    pub no_timing: bool,
}

fn machine(a: &SimArgs) -> Result<Machine, String> {
    if let Some(p) = a.procs {
        return Ok(Machine::uniform(1, p));
    }
    if let (Some(n), Some(c)) = (a.nodes, a.cpus_per_node) {
        return Ok(Machine::uniform(n, c));
    }
    if let Some(path) = &a.config {
        let cfg = drover_model::conf::parse_file(path).map_err(|e| e.to_string())?;
        return Ok(Machine::of_conf(cfg));
    }
    Err("give the machine: --procs N, --nodes N --cpus-per-node C, or --config slurm.conf".into())
}

pub fn main(a: SimArgs) -> i32 {
    match sim(&a) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("drover sim: error: {e}");
            1
        }
    }
}

fn config(a: &SimArgs, policy: &str) -> Result<SchedConfig, String> {
    let mut cfg = SchedConfig::named(policy)
        .ok_or_else(|| format!("unknown policy `{policy}` (predictive, conservative, easy, fcfs, default)"))?;
    if let Some(p) = &a.predict {
        cfg.predict = p == "yes";
    }
    if let Some(o) = &a.order {
        cfg.order = if o == "slowdown" { BackfillOrder::Slowdown } else { BackfillOrder::Priority };
    }
    if let Some(s) = a.slip_limit {
        cfg.slip_limit = s.max(0);
    }
    Ok(cfg)
}

fn sim(a: &SimArgs) -> Result<(), String> {
    let m = machine(a)?;
    if m.procs() == 0 {
        return Err("the machine has no processors".into());
    }
    let own = m.conf.as_ref().map(|c| if c.backfill { c.bf_policy.clone() } else { "fcfs".into() });
    let policy = a.policy.clone().or(own).unwrap_or_else(|| "default".into());
    let policies: Vec<&str> = policy.split(',').map(str::trim).filter(|p| !p.is_empty()).collect();
    let cfgs = policies.iter().map(|p| config(a, p)).collect::<Result<Vec<_>, _>>()?;
    if cfgs.is_empty() {
        return Err("give a policy: --policy default (or several: --policy easy,default)".into());
    }
    if a.jobs_out.is_some() && cfgs.len() > 1 {
        return Err("--jobs-out writes one policy's jobs: give one --policy".into());
    }
    if a.trace.is_some() && m.conf.as_ref().is_some_and(|c| c.priority.multifactor) {
        eprintln!(
            "drover sim: note: a trace's jobs are taken in submit order (they have no accounts or \
             QoS for the multifactor priority; --from-accounting replays it)"
        );
    }
    let mut m = m;
    let (all, source) = match (&a.trace, &a.from_accounting, m.conf.clone()) {
        (Some(path), _, _) => {
            (swf::read(path)?, path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default())
        }
        (None, Some(url), Some(conf)) => {
            let now =
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
            if !(a.days.is_finite() && a.days > 0.0) {
                return Err(format!("--days {}: give a number of days above 0", a.days));
            }
            let (jobs, admin) = crate::acct::read(url, Some(&conf.cluster_name), a.days, now)?;
            m.admin = Some(std::sync::Arc::new(admin));
            (jobs, format!("{}'s last {} days", conf.cluster_name, a.days))
        }
        _ => return Err("give a trace, or --from-accounting URL with --config (or --now)".into()),
    };
    let jobs = usable(&all, &m);
    let tty = std::io::stderr().is_terminal();
    let mut runs: Vec<(String, Vec<crate::JobRow>)> = Vec::new();
    for (name, cfg) in policies.iter().zip(cfgs) {
        let started = std::time::Instant::now();
        let mut progress = |f: f64| {
            if tty {
                let done = (f * 30.0) as usize;
                eprint!(
                    "\r{name:<12} [{}{}] {:>5.1}% of {} jobs started, {:.0} s",
                    "#".repeat(done),
                    ".".repeat(30 - done.min(30)),
                    f * 100.0,
                    jobs.len(),
                    started.elapsed().as_secs_f64()
                );
            }
        };
        let (rows, passes, cpu) = run(&jobs, &m, cfg, !a.no_timing, &mut progress);
        if tty {
            eprintln!();
        }
        report(a, name, &m, &all, &rows, passes, cpu)?;
        runs.push((name.to_string(), rows));
    }
    if let Some(path) = &a.svg {
        let title = format!("Mean wait by job size: {source} on {} processors (drover sim)", m.procs());
        std::fs::write(path, crate::chart::svg(&title, &runs)).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

/// One policy's results: its jobs (`--jobs-out`) and its summary, as text or JSON.
fn report(
    a: &SimArgs,
    policy: &str,
    m: &Machine,
    all: &[swf::TraceJob],
    rows: &[crate::JobRow],
    passes: u64,
    cpu: f64,
) -> Result<(), String> {
    if let Some(path) = &a.jobs_out {
        let mut out = String::from("id,submit,start,end,wait,run,procs,nodes\n");
        for r in rows {
            out.push_str(&format!(
                "{},{},{},{},{},{},{},\"{}\"\n",
                r.id,
                r.submit,
                r.start,
                r.end,
                r.wait(),
                r.run,
                r.procs,
                r.nodes
            ));
        }
        std::fs::write(path, out).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let s = Summary::of(rows, m, cpu, passes);
    let mut stdout = std::io::stdout().lock();
    if a.json {
        let _ = writeln!(stdout, "{}", s.json(policy, m));
    } else {
        let _ = writeln!(
            stdout,
            "policy {}  machine {} procs on {} nodes  jobs {} ({} in the trace)\n\
             utilization {:.4}  mean wait {:.0} s  p95 wait {:.0} s  p99 wait {:.0} s  max wait {} s\n\
             mean bounded slowdown {:.3}  p95 {:.3}  makespan {} s\n\
             scheduler {:.3} s CPU over {} passes ({:.1} us per pass)",
            policy,
            m.procs(),
            m.nodes(),
            s.jobs,
            all.len(),
            s.utilization,
            s.mean_wait_s,
            s.p95_wait_s,
            s.p99_wait_s,
            s.max_wait_s,
            s.mean_bsld,
            s.p95_bsld,
            s.makespan_s,
            s.sched_cpu_s,
            s.passes,
            if s.passes > 0 { s.sched_cpu_s * 1e6 / s.passes as f64 } else { 0.0 }
        );
    }
    Ok(())
}
