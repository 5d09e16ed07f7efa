//! `srun` outside an allocation: allocate, launch the command as tasks over the nodes, stream
//! their output back (labelled with `-l`), and exit with the worst task's status.

use crate::common::{self, status_msg};
use crate::jobopts::JobArgs;
use clap::Parser;
use drover_proto::io::{read_frame, EXIT, HELLO, STDERR, STDOUT};
use drover_proto::v1;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(name = "srun", disable_help_flag = true, disable_version_flag = true, args_override_self = true)]
struct SrunArgs {
    #[command(flatten)]
    job: JobArgs,
    #[arg(short = 'l', long = "label")]
    label: bool,
    #[arg(short = 'u', long = "unbuffered")]
    unbuffered: bool,
    #[arg(short = 'K', long = "kill-on-bad-exit", num_args = 0..=1, default_missing_value = "1", require_equals = true)]
    kill_on_bad_exit: Option<String>,
    #[arg(long = "mpi")]
    mpi: Option<String>,
    #[arg(long = "cpu-bind", alias = "cpu_bind")]
    cpu_bind: Option<String>,
    #[arg(short = 'm', long = "distribution")]
    distribution: Option<String>,
    #[arg(short = 'W', long = "wait")]
    wait: Option<String>,
    #[arg(long = "overlap")]
    overlap: bool,
    #[arg(long = "exact")]
    exact: bool,
    #[arg(long = "pty")]
    pty: bool,
    #[command(flatten)]
    std: common::StdFlags,
    #[arg(trailing_var_arg = true)]
    command: Vec<String>,
}

struct Collected {
    exits: Vec<(u32, String, i32)>,
    nodes_done: usize,
}

pub fn main(args: Vec<String>) -> i32 {
    let a: SrunArgs = match common::parse_command(
        "srun",
        args.iter().cloned(),
        "Usage: srun [OPTIONS(0)... [executable(0) [args(0)...]]] [ : [OPTIONS(N)...]] executable(N) [args(N)...]",
        |a: &SrunArgs| &a.std,
    ) {
        Ok(a) => a,
        Err(code) => return code,
    };
    if a.command.is_empty() {
        eprintln!("srun: fatal: No command given to execute.");
        return 1;
    }
    if a.pty {
        eprintln!("srun: error: --pty arrives with job steps (the execution issue); run the command without --pty");
        return 1;
    }
    if std::env::var("SLURM_JOB_ID").is_ok() && std::env::var("DROVER_SRUN_NEW_ALLOCATION").is_err() {
        eprintln!(
            "srun: error: job steps inside an existing allocation are not supported by this Drover release yet (set DROVER_SRUN_NEW_ALLOCATION=1 to request a separate allocation)"
        );
        return 1;
    }
    let validated = match a.job.validate(false) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("srun: error: {e}");
            return 1;
        }
    };
    if validated.gres {
        eprintln!("srun: error: Unable to allocate resources: Invalid generic resource (gres) specification");
        return 1;
    }
    let mut spec = validated.spec;
    spec.name = a.job.job_name.clone().unwrap_or_else(|| {
        std::path::Path::new(&a.command[0]).file_name().map(|f| f.to_string_lossy().to_string()).unwrap_or_default()
    });
    spec.argv = a.command.clone();
    spec.submit_line = std::iter::once("srun".to_string()).chain(args).collect::<Vec<_>>().join(" ");
    let cfg = match common::config_for("srun") {
        Ok(c) => c,
        Err(code) => return code,
    };
    // Tasks connect back to this listener; the controller's host sees us on loopback here.
    let listener = match std::net::TcpListener::bind("127.0.0.1:0") {
        Ok(l) => l,
        Err(e) => {
            eprintln!("srun: error: cannot listen for task I/O: {e}");
            return 1;
        }
    };
    let addr = listener.local_addr().map(|a| a.to_string()).unwrap_or_default();
    spec.io_addr = Some(addr);
    let label = a.label;
    let collected = Arc::new(Mutex::new(Collected { exits: Vec::new(), nodes_done: 0 }));
    {
        let collected = collected.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let collected = collected.clone();
                std::thread::spawn(move || {
                    let mut node = String::new();
                    let mut pending: std::collections::HashMap<(u32, u8), Vec<u8>> = std::collections::HashMap::new();
                    while let Ok(Some(f)) = read_frame(&mut conn) {
                        match f.kind {
                            HELLO => node = String::from_utf8_lossy(&f.data).to_string(),
                            STDOUT | STDERR => {
                                let buf = pending.entry((f.task, f.kind)).or_default();
                                buf.extend_from_slice(&f.data);
                                emit(buf, f.task, f.kind, label, false);
                            }
                            EXIT => {
                                for ((t, k), buf) in pending.iter_mut() {
                                    if *t == f.task {
                                        emit(buf, *t, *k, label, true);
                                    }
                                }
                                let st = i32::from_be_bytes(f.data[..4].try_into().unwrap_or([0; 4]));
                                if let Ok(mut c) = collected.lock() {
                                    c.exits.push((f.task, node.clone(), st));
                                }
                            }
                            _ => {}
                        }
                    }
                    for ((t, k), buf) in pending.iter_mut() {
                        emit(buf, *t, *k, label, true);
                    }
                    if let Ok(mut c) = collected.lock() {
                        c.nodes_done += 1;
                    }
                });
            }
        });
    }
    let rt = common::runtime();
    let immediate = spec.immediate;
    rt.block_on(async move {
        let mut client = match common::connect(&cfg).await {
            Ok(c) => c,
            Err(e) => {
                eprintln!("srun: error: Unable to allocate resources: {e}");
                return 1;
            }
        };
        let reply = match client
            .submit(v1::SubmitRequest { spec: Some(drover_proto::spec_to_wire(&spec)), test_only: false })
            .await
        {
            Ok(r) => r.into_inner(),
            Err(s) => {
                eprintln!("srun: error: Unable to allocate resources: {}", status_msg(&s));
                return 1;
            }
        };
        let id = reply.job_id;
        let mut stream = match client.watch_job(v1::WatchRequest { job_id: id }).await {
            Ok(s) => s.into_inner(),
            Err(s) => {
                eprintln!("srun: error: {}", status_msg(&s));
                return 1;
            }
        };
        // Wait for the allocation.
        let first = tokio::time::timeout(Duration::from_millis(300), stream.message()).await;
        let mut started: Option<v1::JobInfo> = match first {
            Ok(Ok(Some(ev))) => ev.job,
            _ => None,
        };
        if started.is_none() {
            eprintln!("srun: job {id} queued and waiting for resources");
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
            let got = match immediate {
                Some(secs) => {
                    tokio::time::timeout(Duration::from_secs(u64::from(secs.max(1))), wait).await.ok().flatten()
                }
                None => wait.await,
            };
            match got {
                Some(j) => {
                    eprintln!("srun: job {id} has been allocated resources");
                    started = Some(j);
                }
                None => {
                    let _ = client.cancel(v1::CancelRequest { job_ids: vec![id], ..Default::default() }).await;
                    eprintln!("srun: error: Unable to allocate resources: Requested nodes are busy");
                    return 1;
                }
            }
        }
        let job = started.unwrap_or_default();
        if job.state != "RUNNING" {
            eprintln!("srun: error: Unable to allocate resources: job {id} ended with state {}", job.state);
            return 1;
        }
        let ntasks: usize = job.alloc.iter().map(|a| a.tasks as usize).sum();
        let nnodes = job.alloc.len();
        // Run until every task reported, or the job ended under us.
        let mut ctrl_c = 0u32;
        loop {
            {
                let c = collected.lock().map(|c| (c.exits.len(), c.nodes_done)).unwrap_or((0, 0));
                if c.0 >= ntasks && c.1 >= nnodes {
                    break;
                }
            }
            tokio::select! {
                ev = stream.message() => {
                    match ev {
                        Ok(Some(ev)) => {
                            if let Some(j) = ev.job {
                                if drover_model::state::JobState::parse(&j.state).is_some_and(|s| s.is_finished()) {
                                    // Let the last frames arrive.
                                    for _ in 0..50 {
                                        let done = collected.lock().map(|c| c.nodes_done >= nnodes).unwrap_or(true);
                                        if done { break; }
                                        tokio::time::sleep(Duration::from_millis(20)).await;
                                    }
                                    let reported = collected.lock().map(|c| c.exits.len()).unwrap_or(0);
                                    if reported == 0 && !j.state_desc.is_empty() {
                                        let node = j.alloc.first().map(|a| a.node.clone()).unwrap_or_default();
                                        eprintln!("srun: error: Task launch for StepId={id}.0 failed on node {node}: {}", j.state_desc);
                                    } else if j.state != "COMPLETED" && j.state != "FAILED" {
                                        eprintln!("srun: error: job {id} ended: {}", j.state);
                                    }
                                    break;
                                }
                            }
                        }
                        _ => break,
                    }
                }
                _ = tokio::signal::ctrl_c() => {
                    ctrl_c += 1;
                    if ctrl_c == 1 {
                        eprintln!("srun: interrupt (one more within 1 sec to abort)");
                    } else {
                        eprintln!("srun: sending Ctrl-C to StepId={id}.0");
                        eprintln!("srun: forcing job termination");
                        let _ = client.cancel(v1::CancelRequest { job_ids: vec![id], ..Default::default() }).await;
                    }
                }
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
            }
        }
        let exits = collected.lock().map(|c| c.exits.clone()).unwrap_or_default();
        let mut rc = 0;
        let mut sorted = exits.clone();
        sorted.sort();
        for (task, node, st) in sorted {
            let sig = st & 0x7f;
            let code = (st >> 8) & 0xff;
            if sig != 0 {
                eprintln!("srun: error: {node}: task {task}: {}", signal_text(sig));
                rc = rc.max(128 + sig);
            } else if code != 0 {
                eprintln!("srun: error: {node}: task {task}: Exited with exit code {code}");
                rc = rc.max(code);
            }
        }
        if exits.len() < ntasks && rc == 0 {
            rc = 1;
        }
        rc
    })
}

fn signal_text(sig: i32) -> String {
    match nix::sys::signal::Signal::try_from(sig) {
        Ok(nix::sys::signal::Signal::SIGKILL) => "Killed".into(),
        Ok(nix::sys::signal::Signal::SIGTERM) => "Terminated".into(),
        Ok(nix::sys::signal::Signal::SIGSEGV) => "Segmentation fault".into(),
        Ok(s) => format!("Killed by signal {}", s as i32),
        Err(_) => format!("Killed by signal {sig}"),
    }
}

/// Writes complete lines of a task's output (all of it at the end), labelled with `-l`.
fn emit(buf: &mut Vec<u8>, task: u32, kind: u8, label: bool, flush_all: bool) {
    let cut = if flush_all { buf.len() } else { buf.iter().rposition(|b| *b == b'\n').map(|p| p + 1).unwrap_or(0) };
    if cut == 0 {
        return;
    }
    let chunk: Vec<u8> = buf.drain(..cut).collect();
    let mut out = Vec::with_capacity(chunk.len() + 16);
    if label {
        for line in chunk.split_inclusive(|b| *b == b'\n') {
            out.extend_from_slice(format!("{task}: ").as_bytes());
            out.extend_from_slice(line);
        }
    } else {
        out = chunk;
    }
    if kind == STDOUT {
        let mut o = std::io::stdout().lock();
        let _ = o.write_all(&out);
        let _ = o.flush();
    } else {
        let mut e = std::io::stderr().lock();
        let _ = e.write_all(&out);
    }
}
