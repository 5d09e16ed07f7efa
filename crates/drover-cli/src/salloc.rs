//! `salloc`: obtains an allocation, runs a command on this host (by default the user's shell)
//! with the allocation's `SLURM_*` variables, and releases the allocation when it exits.
//! `srun` inside the command runs steps in the allocation.
//!
//! ```text
//!  Submit (no batch script) ──► WatchJob: granted ──► fork command (SLURM_JOB_ID, ...) ──► wait
//!                                   revoked (scancel, time limit) ──► say so   ──► CompleteJob
//! ```

use crate::common::{self, status_msg};
use crate::jobopts::JobArgs;
use clap::Parser;
use drover_model::hostlist::Hostlist;
use drover_model::job::fmt_counts;
use drover_model::state::JobState;
use drover_proto::v1;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(
    name = "salloc",
    disable_help_flag = true,
    disable_version_flag = true,
    args_override_self = true,
    infer_long_args = true
)]
struct SallocArgs {
    #[command(flatten)]
    job: JobArgs,
    /// `-K, --kill-command[=signal]`: signal the command when the allocation is revoked.
    #[arg(short = 'K', long = "kill-command", num_args = 0..=1, default_missing_value = "TERM", require_equals = true)]
    kill_command: Option<String>,
    #[arg(long = "no-shell")]
    no_shell: bool,
    #[command(flatten)]
    std: common::StdFlagsH,
    #[arg(trailing_var_arg = true)]
    command: Vec<String>,
}

pub fn main(args: Vec<String>) -> i32 {
    let a: SallocArgs = match common::parse_command("salloc", args.iter().cloned(), |a: &SallocArgs| &a.std) {
        Ok(a) => a,
        Err(code) => return code,
    };
    let validated = match a.job.validate(false) {
        Ok(v) => v,
        Err(e) => {
            return crate::jobopts::report("salloc", &e);
        }
    };
    let kill_signal = match a.kill_command.as_deref().map(crate::scancel::parse_signal) {
        None => None,
        Some(Some(s)) => Some(s),
        Some(None) => {
            eprintln!("salloc: error: Invalid signal specification: {}", a.kill_command.unwrap_or_default());
            return 1;
        }
    };
    let mut spec = validated.spec;
    spec.name = a.job.job_name.clone().unwrap_or_else(|| "interactive".into());
    let command = if a.command.is_empty() {
        vec![std::env::var("SHELL").ok().filter(|s| !s.is_empty()).unwrap_or_else(|| "/bin/sh".into())]
    } else {
        a.command.clone()
    };
    spec.argv = command.clone();
    spec.submit_line = std::iter::once("salloc".to_string()).chain(args).collect::<Vec<_>>().join(" ");
    let cfg = match common::config_for("salloc") {
        Ok(c) => c,
        Err(code) => return code,
    };
    let request = spec.clone();
    common::runtime().block_on(async move {
        let mut client = match common::connect_or_exit(&cfg, "salloc").await {
            Ok(c) => c,
            Err(code) => return code,
        };
        let (id, job) = match allocate(&mut client, &spec, "salloc").await {
            Ok(a) => a,
            Err(code) => return code,
        };
        eprintln!("salloc: Granted job allocation {id}");
        if a.no_shell {
            return 0;
        }
        let env = allocation_env(&job, &request, &cfg);
        let status = run_command(&mut client, id, &command, env, kill_signal).await;
        eprintln!("salloc: Relinquishing job allocation {id}");
        let raw = match status {
            Ok(s) => s,
            Err(e) => {
                eprintln!("salloc: error: {e}");
                1 << 8
            }
        };
        let _ = client.complete_job(v1::CompleteRequest { job_id: id, exit_status: raw, ..Default::default() }).await;
        let sig = raw & 0x7f;
        if sig != 0 {
            128 + sig
        } else {
            (raw >> 8) & 0xff
        }
    })
}

/// Submits an allocation (a job without a batch script) and waits until it runs: its id
/// and record, or the exit code when it could not be had.
pub async fn allocate(
    client: &mut common::Client,
    spec: &drover_model::job::JobSpec,
    prog: &str,
) -> Result<(u32, v1::JobInfo), i32> {
    let req = v1::SubmitRequest { spec: Some(drover_proto::spec_to_wire(spec)), test_only: false };
    let id = match client.submit(req).await {
        Ok(r) => r.into_inner().job_id,
        Err(s) => {
            eprintln!("{prog}: error: Unable to allocate resources: {}", status_msg(&s));
            return Err(1);
        }
    };
    wait_granted(client, id, spec.immediate, prog).await.map(|j| (id, j))
}

/// Waits until job `id` runs. `prog` words the messages (`salloc: job 5 queued and waiting
/// for resources`). On an `--immediate` that ran out, or a job that ended instead, the job is
/// cancelled and the exit code returned.
async fn wait_granted(
    client: &mut common::Client,
    id: u32,
    immediate: Option<u32>,
    prog: &str,
) -> Result<v1::JobInfo, i32> {
    let mut stream = match client.watch_job(v1::WatchRequest { job_id: id }).await {
        Ok(s) => s.into_inner(),
        Err(s) => {
            eprintln!("{prog}: error: {}", status_msg(&s));
            return Err(1);
        }
    };
    let first = tokio::time::timeout(Duration::from_millis(300), stream.message()).await;
    let mut job = match first {
        Ok(Ok(Some(ev))) => ev.job,
        _ => None,
    };
    if job.is_none() {
        if prog == "salloc" {
            eprintln!("salloc: Pending job allocation {id}");
        }
        eprintln!("{prog}: job {id} queued and waiting for resources");
        let wait = async {
            loop {
                match stream.message().await {
                    Ok(Some(ev)) => {
                        if let Some(j) = ev.job {
                            return Some(j);
                        }
                    }
                    _ => return None,
                }
            }
        };
        let got = tokio::select! {
            got = async {
                match immediate {
                    Some(secs) => tokio::time::timeout(Duration::from_secs(u64::from(secs.max(1))), wait).await.ok().flatten(),
                    None => wait.await,
                }
            } => got,
            _ = tokio::signal::ctrl_c() => {
                eprintln!("{prog}: Job allocation {id} has been revoked.");
                let _ = client.cancel(v1::CancelRequest { job_ids: vec![id], ..Default::default() }).await;
                return Err(1);
            }
        };
        match got {
            Some(j) => {
                eprintln!("{prog}: job {id} has been allocated resources");
                job = Some(j);
            }
            None => {
                let _ = client.cancel(v1::CancelRequest { job_ids: vec![id], ..Default::default() }).await;
                eprintln!("{prog}: error: Unable to allocate resources: Requested nodes are busy");
                return Err(1);
            }
        }
    }
    let job = job.unwrap_or_default();
    if job.state != "RUNNING" {
        eprintln!("{prog}: error: Unable to allocate resources: job {id} ended with state {}", job.state);
        return Err(1);
    }
    Ok(job)
}

/// The variables salloc gives its command, as Slurm 22.05 sets them.
fn allocation_env(
    job: &v1::JobInfo,
    spec: &drover_model::job::JobSpec,
    cfg: &drover_model::conf::Config,
) -> Vec<(String, String)> {
    let nodes: Vec<String> = job.alloc.iter().map(|a| a.node.clone()).collect();
    let nodelist = Hostlist::from_iter(&nodes).ranged();
    let cpus: Vec<u32> = job.alloc.iter().map(|a| a.cpu_ids.len() as u32).collect();
    let tasks: Vec<u32> = job.alloc.iter().map(|a| a.tasks).collect();
    let id = job.job_id.to_string();
    let mut env = vec![
        ("SLURM_CLUSTER_NAME".to_string(), cfg.cluster_name.clone()),
        ("SLURM_JOBID".into(), id.clone()),
        ("SLURM_JOB_ID".into(), id),
        ("SLURM_JOB_CPUS_PER_NODE".into(), fmt_counts(&cpus)),
        ("SLURM_JOB_NAME".into(), spec.name.clone()),
        ("SLURM_JOB_NODELIST".into(), nodelist.clone()),
        ("SLURM_JOB_NUM_NODES".into(), nodes.len().to_string()),
        ("SLURM_JOB_PARTITION".into(), job.partition.clone()),
        ("SLURM_NNODES".into(), nodes.len().to_string()),
        ("SLURM_NODELIST".into(), nodelist),
        ("SLURM_NODE_ALIASES".into(), "(null)".into()),
        ("SLURM_SUBMIT_DIR".into(), spec.work_dir.clone()),
        ("SLURM_SUBMIT_HOST".into(), common::hostname()),
        ("SLURM_TASKS_PER_NODE".into(), fmt_counts(&tasks)),
    ];
    if let Some(n) = spec.ntasks {
        env.push(("SLURM_NTASKS".into(), n.to_string()));
        env.push(("SLURM_NPROCS".into(), n.to_string()));
    }
    if let Some(n) = spec.ntasks_per_node {
        env.push(("SLURM_NTASKS_PER_NODE".into(), n.to_string()));
    }
    if let Some(c) = spec.cpus_per_task {
        env.push(("SLURM_CPUS_PER_TASK".into(), c.to_string()));
    }
    if spec.overcommit {
        // env_array_for_job: srun in the allocation overcommits too.
        env.push(("SLURM_OVERCOMMIT".into(), "1".into()));
    }
    if let Some(m) = spec.mem_per_node_mb {
        env.push(("SLURM_MEM_PER_NODE".into(), m.to_string()));
    }
    if let Some(m) = spec.mem_per_cpu_mb {
        env.push(("SLURM_MEM_PER_CPU".into(), m.to_string()));
    }
    env
}

/// Runs the command with the allocation's variables and waits for it, telling the user when
/// the allocation is revoked under it. Returns its raw wait status.
async fn run_command(
    client: &mut common::Client,
    id: u32,
    command: &[String],
    env: Vec<(String, String)>,
    kill_signal: Option<i32>,
) -> Result<i32, String> {
    let mut cmd = tokio::process::Command::new(&command[0]);
    cmd.args(&command[1..]).envs(env);
    let mut child = cmd.spawn().map_err(|e| format!("{}: {e}", command[0]))?;
    let pid = child.id();
    let mut events = client.watch_job(v1::WatchRequest { job_id: id }).await.ok().map(|s| s.into_inner());
    // The command owns the terminal: Ctrl-C is for it, not for salloc.
    let mut ctrl_c = Box::pin(tokio::signal::ctrl_c());
    loop {
        tokio::select! {
            st = child.wait() => {
                use std::os::unix::process::ExitStatusExt;
                return st.map(|s| s.into_raw()).map_err(|e| e.to_string());
            }
            _ = &mut ctrl_c => {
                ctrl_c = Box::pin(tokio::signal::ctrl_c());
            }
            ev = async {
                match events.as_mut() {
                    Some(e) => e.message().await,
                    None => std::future::pending().await,
                }
            } => {
                match ev {
                    Ok(Some(ev)) => {
                        let Some(j) = ev.job else { continue };
                        let state = JobState::parse(&j.state);
                        if state.is_some_and(|s| s.is_finished()) {
                            if state == Some(JobState::Timeout) {
                                eprintln!("salloc: Job {id} has exceeded its time limit and its allocation has been revoked.");
                            } else {
                                eprintln!("salloc: Job allocation {id} has been revoked.");
                            }
                            if let (Some(sig), Some(pid)) = (kill_signal, pid) {
                                let _ = nix::sys::signal::kill(
                                    nix::unistd::Pid::from_raw(pid as i32),
                                    nix::sys::signal::Signal::try_from(sig).ok(),
                                );
                            }
                            events = None;
                        }
                    }
                    _ => events = None,
                }
            }
        }
    }
}
