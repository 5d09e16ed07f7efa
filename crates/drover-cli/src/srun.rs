//! `srun`: runs a command as the tasks of a job step.
//!
//! ```text
//!  inside a job (SLURM_JOB_ID, --jobid) ──► CreateStep ──► supervisors on the step's nodes
//!  standalone ──► Submit (allocation) ──► wait RUNNING ──► CreateStep ──► ... ──► CompleteJob
//!  supervisors ──TCP (io frames: output, exit status)──► this process ──► stdout/stderr, exit code
//! ```
//!
//! Inside an allocation srun reads the job's shape from its environment (`SLURM_NNODES`,
//! `SLURM_NTASKS`, `SLURM_CPUS_PER_TASK`, ...) as Slurm's srun does, so a plain `srun cmd` in a
//! batch script runs on the whole allocation. A step that would fit once other steps end waits
//! for them ("step creation temporarily disabled"), event-driven on the controller.

use crate::common::{self, status_msg};
use crate::jobopts::JobArgs;
use crate::stepio::{IoServer, OutputMode};
use clap::Parser;
use drover_model::hostlist::Hostlist;
use drover_proto::v1;
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(
    name = "srun",
    disable_help_flag = true,
    disable_version_flag = true,
    args_override_self = true,
    infer_long_args = true
)]
struct SrunArgs {
    #[command(flatten)]
    job: JobArgs,
    #[arg(long = "jobid")]
    jobid: Option<String>,
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
    #[arg(long = "multi-prog")]
    multi_prog: bool,
    #[arg(long = "gpu-bind")]
    gpu_bind: Option<String>,
    #[arg(short = 'X', long = "disable-status")]
    disable_status: bool,
    #[arg(long = "quit-on-interrupt")]
    quit_on_interrupt: bool,
    #[arg(long = "task-prolog")]
    task_prolog: Option<String>,
    #[arg(long = "task-epilog")]
    task_epilog: Option<String>,
    /// How many threads srun sends launches with: Drover's srun sends them all at once.
    #[arg(short = 'T', long = "threads")]
    threads: Option<String>,
    /// slurmd's debug level for this step: its log is the node agent's, kept by the admin.
    #[arg(long = "slurmd-debug")]
    slurmd_debug: Option<String>,
    #[command(flatten)]
    std: common::StdFlagsH,
    #[arg(trailing_var_arg = true)]
    command: Vec<String>,
}

/// srun's input variables (Slurm's `env_vars` table in srun's opt.c) as options before the
/// command line's, which win. Those an allocation exports to its processes and srun reads
/// with care of its own (`SLURM_NNODES`, `SLURM_NTASKS`, `SLURM_JOB_ID`, `SLURM_OVERCOMMIT`,
/// ...) are read where the step is built, not here; options this srun lacks are passed over.
fn env_options() -> Vec<String> {
    use clap::CommandFactory;
    const VALUES: &[(&str, &str)] = &[
        ("SLURM_ACCOUNT", "account"),
        ("SLURM_CONSTRAINT", "constraint"),
        ("SLURM_CPU_FREQ_REQ", "cpu-freq"),
        ("SLURM_DEPENDENCY", "dependency"),
        ("SLURM_EXCLUSIVE", "exclusive"),
        ("SLURM_HINT", "hint"),
        ("SLURM_KILL_BAD_EXIT", "kill-on-bad-exit"),
        ("SLURM_PARTITION", "partition"),
        ("SLURM_QOS", "qos"),
        ("SLURM_REMOTE_CWD", "chdir"),
        ("SLURM_RESERVATION", "reservation"),
        ("SLURM_SIGNAL", "signal"),
        ("SLURM_STDERRMODE", "error"),
        ("SLURM_STDINMODE", "input"),
        ("SLURM_STDOUTMODE", "output"),
        ("SLURM_TASK_EPILOG", "task-epilog"),
        ("SLURM_TASK_PROLOG", "task-prolog"),
        ("SLURM_THREADS", "threads"),
        ("SLURM_TIMELIMIT", "time"),
        ("SLURM_WAIT", "wait"),
        ("SLURM_WCKEY", "wckey"),
        ("SLURM_WORKING_DIR", "chdir"),
        ("SLURMD_DEBUG", "slurmd-debug"),
    ];
    const FLAGS: &[(&str, &str)] = &[
        ("SLURM_DISABLE_STATUS", "disable-status"),
        ("SLURM_LABELIO", "label"),
        ("SLURM_NO_KILL", "no-kill"),
        ("SLURM_UNBUFFEREDIO", "unbuffered"),
    ];
    let cmd = SrunArgs::command();
    let known = |name: &str| cmd.get_arguments().any(|a| a.get_long() == Some(name));
    let mut out = Vec::new();
    for (var, name) in VALUES {
        if let Some(v) = env(var).filter(|_| known(name)) {
            out.push(format!("--{name}={v}"));
        }
    }
    for (var, name) in FLAGS {
        if env(var).is_some() && known(name) {
            out.push(format!("--{name}"));
        }
    }
    // The shape of the allocation, where srun makes its own: inside one, what it exported
    // (SLURM_NTASKS, ...) is read as the step's defaults where the step is built.
    if env("SLURM_JOB_ID").is_none() && env("SLURM_JOBID").is_none() {
        const SHAPE: &[(&str, &str)] = &[
            ("SLURM_NPROCS", "ntasks"),
            ("SLURM_NTASKS", "ntasks"),
            ("SLURM_JOB_NUM_NODES", "nodes"),
            ("SRUN_CPUS_PER_TASK", "cpus-per-task"),
            ("SLURM_NTASKS_PER_NODE", "ntasks-per-node"),
        ];
        for (var, name) in SHAPE {
            if let Some(v) = env(var) {
                out.push(format!("--{name}={v}"));
            }
        }
    }
    // SLURM_DEBUG: as many -v.
    if let Some(n) = env("SLURM_DEBUG").and_then(|v| v.trim().parse::<usize>().ok()) {
        out.extend(std::iter::repeat_n("-v".to_string(), n.min(5)));
    }
    out
}

pub fn main(args: Vec<String>) -> i32 {
    let all = env_options().into_iter().chain(args.iter().cloned());
    let a: SrunArgs = match common::parse_command("srun", all, |a: &SrunArgs| &a.std) {
        Ok(a) => a,
        Err(code) => return code,
    };
    // sbatch's and salloc's --kill-on-invalid-dep is among the shared options, not srun's:
    // getopt's unknown option, as given (or as shortened).
    if a.job.kill_on_invalid_dep.is_some() {
        let given = args.iter().find(|x| x.starts_with("--kill-on-i")).map_or("--kill-on-invalid-dep", |x| x);
        eprintln!("{}", crate::sbatch::unrecognized("srun", given));
        return 255;
    }
    if a.command.is_empty() && a.mpi.as_deref() != Some("list") {
        eprintln!("srun: fatal: No command given to execute.");
        return 1;
    }
    let cfg = match common::config_for("srun") {
        Ok(c) => c,
        Err(code) => return code,
    };
    let enclosing = a.jobid.clone().or_else(|| env("SLURM_JOB_ID")).or_else(|| env("SLURM_JOBID"));
    let job_id = match enclosing.as_deref().map(|j| j.split(['_', '.']).next().unwrap_or(j).parse::<u32>()) {
        None => None,
        Some(Ok(id)) => Some(id),
        Some(Err(_)) => {
            eprintln!("srun: error: Invalid job id: {}", enclosing.unwrap_or_default());
            return 1;
        }
    };
    let standalone = job_id.is_none();
    // MPI: Drover launches with `none` (Open MPI's and MPICH's own launchers, torchrun, ...);
    // a PMI plugin it does not have is refused as Slurm refuses a plugin it cannot load.
    match a.mpi.clone().or_else(|| env("SLURM_MPI_TYPE")).as_deref() {
        None | Some("none") => {}
        Some("list") => {
            println!("MPI plugin types are...\n\tnone");
            return 0;
        }
        Some(other) => {
            eprintln!("srun: error: Couldn't find the specified plugin name for mpi/{other} looking at all files");
            eprintln!("srun: error: cannot find mpi plugin for mpi/{other}");
            eprintln!("srun: error: MPI: Cannot create context for mpi/{other}");
            eprintln!("srun: error: MPI: Unable to load any plugin");
            eprintln!("srun: error: Invalid MPI type '{other}', --mpi=list for acceptable types");
            return 1;
        }
    }
    if let Some(Err(e)) = a.gpu_bind.as_deref().map(|b| drover_model::gres::gpu_bind(b, &[0], 0)) {
        eprintln!("srun: error: {e}");
        return 255;
    }
    if let Some(Err(e)) = a.cpu_bind.as_deref().map(drover_model::cpubind::CpuBind::parse) {
        eprintln!("srun: error: {e}");
        eprintln!("srun: fatal: Failed to parse --cpu-bind= values.");
        return 1;
    }
    let mut spec = match step_spec(&a, standalone) {
        Ok(s) => s,
        Err(e) => return crate::jobopts::report("srun", &e),
    };
    spec.submit_line = std::iter::once("srun").chain(args.iter().map(String::as_str)).collect::<Vec<_>>().join(" ");
    if a.multi_prog {
        let file = &a.command[0];
        match std::fs::read_to_string(file) {
            Ok(text) => spec.multi_prog = text,
            Err(_) => {
                eprintln!("srun: error: Could not open multi_prog config file {file}");
                return 1;
            }
        }
        if let Err(code) = check_multi_prog(&spec) {
            return code;
        }
    }
    let mode = OutputMode {
        label: a.label || env_flag("SLURM_LABELIO"),
        unbuffered: a.unbuffered || a.pty || env_flag("SLURM_UNBUFFEREDIO"),
        ..Default::default()
    };
    let io = match IoServer::start(mode, &cfg) {
        Ok(io) => io,
        Err(e) => {
            eprintln!("srun: error: cannot listen for task I/O: {e}");
            return 1;
        }
    };
    spec.io_addr = io.addr.clone();
    if a.pty {
        // Task 0 gets a terminal the size of ours; its size is in the tasks' environment too.
        let (rows, cols) = crate::stepio::terminal_size().unwrap_or((24, 80));
        spec.pty = true;
        (spec.pty_rows, spec.pty_cols) = (rows.into(), cols.into());
        let port = io.addr.rsplit(':').next().unwrap_or_default().to_string();
        for (key, value) in
            [("SLURM_PTY_PORT", port), ("SLURM_PTY_WIN_COL", cols.to_string()), ("SLURM_PTY_WIN_ROW", rows.to_string())]
        {
            spec.environment.retain(|kv| kv.key != key);
            spec.environment.push(v1::KeyValue { key: key.into(), value });
        }
    }
    if a.job.verbose > 0 {
        for l in defined_options(&args) {
            eprintln!("{l}");
        }
    }
    let opts = StepOpts {
        kill_wait: cfg.kill_wait,
        standalone,
        on_interrupt: if a.quit_on_interrupt {
            Interrupt::Kill
        } else if a.disable_status || env_flag("SLURM_DISABLE_STATUS") {
            Interrupt::Forward
        } else {
            Interrupt::Status
        },
        verbose: a.job.verbose > 0,
        max_wait: match a.wait.as_deref().map(|w| w.trim().parse::<u64>()) {
            None => 0,
            Some(Ok(w)) => w,
            Some(Err(_)) => {
                eprintln!("srun: error: Invalid numeric value \"{}\" for --wait.", a.wait.as_deref().unwrap_or(""));
                return 255;
            }
        },
    };
    common::runtime().block_on(async move {
        let mut client = match common::connect_patiently(&cfg, "srun").await {
            Ok(c) => c,
            Err(e) => {
                eprintln!("srun: error: {e}");
                return 1;
            }
        };
        match job_id {
            Some(id) => {
                spec.job_id = id;
                if opts.verbose {
                    // The allocation the step goes in, as srun reads it from the controller.
                    let req = v1::StateRequest { job_ids: vec![id], jobs: true, ..Default::default() };
                    if let Ok(r) = client.get_state(req).await.map(|r| r.into_inner()) {
                        if let Some(j) = common::jobs_in(r).iter().find(|j| j.job_id == id) {
                            eprintln!("{}", job_information(j));
                        }
                    }
                }
                run_step(&mut client, spec, &io, &opts).await.0
            }
            None => standalone_run(&mut client, &a, args, spec, &io, &opts).await,
        }
    })
}

/// Waits (up to a few seconds: the tasks' exits are known already) until the controller
/// says step `step_id` (or its job) ended.
async fn wait_step_end(events: &mut tonic::Streaming<v1::JobEvent>, step_id: u32) {
    let until = tokio::time::Instant::now() + Duration::from_secs(5);
    while let Ok(Ok(Some(ev))) = tokio::time::timeout_at(until, events.message()).await {
        if ev.step.is_some_and(|s| s.step_id == step_id && s.state != "RUNNING")
            || ev.job.is_some_and(|j| drover_model::state::JobState::parse(&j.state).is_some_and(|s| s.is_finished()))
        {
            return;
        }
    }
}

/// What a first Ctrl-C does: report the tasks' status (default), forward SIGINT to them
/// (`-X`), or end the step (`--quit-on-interrupt`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Interrupt {
    Status,
    Forward,
    Kill,
}

struct StepOpts {
    kill_wait: u32,
    standalone: bool,
    on_interrupt: Interrupt,
    /// `-v`: Slurm's verbose lines (the allocation, each launch, each task's end), which
    /// tools parse for the job id and nodes.
    verbose: bool,
    /// `-W/--wait`: seconds after the first task's end before the rest are killed (0: none).
    max_wait: u64,
}

/// `srun -v`'s first block: every option set, from the command line or srun's input
/// variables, by Slurm's name, in Slurm's (alphabetical) order, with the value as Slurm shows
/// it (`set` for a flag, a time limit as `00:05:00`, memory in MB).
fn defined_options(args: &[String]) -> Vec<String> {
    use clap::parser::ValueSource;
    use clap::CommandFactory;
    let cmd = SrunArgs::command();
    let Ok(m) = cmd.clone().try_get_matches_from(std::iter::once("srun".to_string()).chain(args.iter().cloned()))
    else {
        return Vec::new();
    };
    let mut set: std::collections::BTreeMap<String, String> = Default::default();
    // srun's input variables inside an allocation, below what the command line says.
    let from_env = [
        ("SLURM_JOB_ID", "jobid"),
        ("SLURM_JOB_NAME", "job-name"),
        ("SLURM_NNODES", "nodes"),
        ("SLURM_NTASKS", "ntasks"),
        ("SLURM_CPUS_PER_TASK", "cpus-per-task"),
        ("SLURM_NTASKS_PER_NODE", "ntasks-per-node"),
        ("SLURM_OVERCOMMIT", "overcommit"),
    ];
    for (var, name) in from_env {
        if let Some(v) = env(var) {
            let v = if name == "overcommit" { "set".to_string() } else { v };
            set.insert(name.to_string(), v);
        }
    }
    for arg in cmd.get_arguments() {
        let id = arg.get_id().as_str();
        if m.value_source(id) != Some(ValueSource::CommandLine) {
            continue;
        }
        let Some(name) = arg.get_long() else { continue };
        if matches!(name, "help" | "usage" | "version") {
            continue;
        }
        let value = match arg.get_action() {
            clap::ArgAction::SetTrue => "set".to_string(),
            clap::ArgAction::Count => m.get_count(id).to_string(),
            _ => {
                let raw: Vec<String> =
                    m.get_raw(id).map(|v| v.map(|x| x.to_string_lossy().into_owned()).collect()).unwrap_or_default();
                let v = raw.join(",");
                match name {
                    "time" => drover_model::duration::parse_time_limit(&v)
                        .map(drover_model::duration::fmt_limit_long)
                        .unwrap_or(v),
                    "mem" | "mem-per-cpu" => drover_model::memsize::parse_mb(&v).map(|mb| mb.to_string()).unwrap_or(v),
                    "exclusive" if v.is_empty() => "exclusive".into(),
                    _ => v,
                }
            }
        };
        set.insert(name.to_string(), value);
    }
    let mut lines = vec!["srun: defined options".to_string(), "srun: -------------------- --------------------".into()];
    // The allocation's node list, an option without a name of its own in Slurm.
    if let Some(nodes) = env("SLURM_NODELIST") {
        lines.push(format!("srun: {:<20}: {nodes}", "(null)"));
    }
    // Slurm's table is in alphabetical order of the names without their dashes.
    let mut set: Vec<(String, String)> = set.into_iter().collect();
    set.sort_by_key(|(k, _)| k.replace('-', ""));
    lines.extend(set.iter().map(|(k, v)| format!("srun: {k:<20}: {v}")));
    lines.push("srun: -------------------- --------------------".into());
    lines.push("srun: end of defined options".into());
    lines
}

/// `srun -v`'s line for an allocation (`_print_job_information`).
fn job_information(job: &v1::JobInfo) -> String {
    let nodes: Vec<String> = job.alloc.iter().map(|a| a.node.clone()).collect();
    let cpus: Vec<u32> = job.alloc.iter().map(|a| a.cpu_ids.len() as u32).collect();
    let mut groups: Vec<(u32, u32)> = Vec::new();
    for c in cpus {
        match groups.last_mut() {
            Some((v, n)) if *v == c => *n += 1,
            _ => groups.push((c, 1)),
        }
    }
    let counts: Vec<String> = groups.iter().map(|(v, n)| format!("{v}(x{n})")).collect();
    format!(
        "srun: jobid {}: nodes({}):`{}', cpu counts: {}",
        job.job_id,
        nodes.len(),
        Hostlist::from_iter(&nodes).ranged(),
        counts.join(",")
    )
}

/// Task ids as Slurm's hostlist writes them (`0`, `[0-3]`, `[0,2]`).
fn task_list(ids: &[u32]) -> String {
    Hostlist::from_iter(ids.iter().map(|i| i.to_string())).ranged()
}

/// Task ids as srun's exit messages write them (`0-1`, `0,2`: no brackets).
fn exit_task_list(ids: &[u32]) -> String {
    let l = task_list(ids);
    l.strip_prefix('[').and_then(|l| l.strip_suffix(']')).map(str::to_string).unwrap_or(l)
}

fn env(k: &str) -> Option<String> {
    std::env::var(k).ok().filter(|v| !v.is_empty())
}

fn env_flag(k: &str) -> bool {
    env(k).is_some_and(|v| v != "0")
}

fn env_num(k: &str) -> Option<u32> {
    env(k).and_then(|v| v.trim().parse().ok())
}

/// The step srun asks for: its command line over the environment of the allocation it runs
/// in (`SLURM_NNODES`, `SLURM_NTASKS`, ...: Slurm's srun input variables).
fn step_spec(a: &SrunArgs, standalone: bool) -> Result<v1::StepSpec, String> {
    let j = &a.job;
    let ntasks = match &j.ntasks {
        Some(n) => Some(crate::jobopts::count(n, "ntasks")?),
        None => env_num("SLURM_NTASKS").or_else(|| env_num("SLURM_NPROCS")),
    };
    let mut s = v1::StepSpec { ntasks, ..Default::default() };
    match &j.nodes {
        Some(n) => {
            let (lo, hi) = crate::jobopts::node_range(n)?;
            let hi = hi.unwrap_or(lo);
            if lo == 0 {
                return Err("Invalid node count specification".into());
            }
            s.min_nodes = Some(lo);
            s.max_nodes = Some(hi);
        }
        None => {
            let n = env_num("SLURM_NNODES").or_else(|| env_num("SLURM_JOB_NUM_NODES"));
            s.min_nodes = n;
            s.max_nodes = n;
        }
    }
    if let (Some(n), Some(min)) = (s.ntasks, s.min_nodes) {
        if n < min {
            eprintln!("srun: Warning: can't run {n} processes on {min} nodes, setting nnodes to {n}");
            s.min_nodes = Some(n);
            s.max_nodes = Some(s.max_nodes.unwrap_or(n).min(n));
        }
    }
    s.ntasks_per_node = match &j.ntasks_per_node {
        Some(n) => Some(crate::jobopts::count(n, "ntasks-per-node")?),
        None => env_num("SLURM_NTASKS_PER_NODE"),
    };
    // A task count and a node count that --ntasks-per-node does not divide as it says (an
    // allocation's SLURM_NTASKS under `srun -N2 --ntasks-per-node=1`): Slurm's srun keeps the
    // counts and drops --ntasks-per-node (opt.c), saying so where there are more tasks.
    if let (Some(n), Some(min), Some(per)) = (s.ntasks, s.min_nodes, s.ntasks_per_node) {
        if min > 0 && per != n / min {
            if n > per {
                eprintln!(
                    "srun: Warning: can't honor --ntasks-per-node set to {per} which doesn't match the requested \
                     tasks {n} with the number of requested nodes {min}. Ignoring --ntasks-per-node."
                );
            }
            s.ntasks_per_node = None;
        }
    }
    // -c on the command line implies --exact, as in Slurm 22.05.
    match &j.cpus_per_task {
        Some(c) => {
            s.cpus_per_task = crate::jobopts::count(c, "cpus-per-task")?;
            s.exact = true;
        }
        None => s.cpus_per_task = env_num("SLURM_CPUS_PER_TASK").unwrap_or(0),
    }
    if j.mem.is_some() && j.mem_per_cpu.is_some() {
        return Err("fatal: --mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive.".into());
    }
    let mb = |m: &str, opt: &str| {
        drover_model::memsize::parse_mb(m)
            .map_err(|_| format!("{}Invalid --{opt} specification", crate::jobopts::EXIT_255))
    };
    s.mem_per_node_mb = j.mem.as_deref().map(|m| mb(m, "mem")).transpose()?;
    s.mem_per_cpu_mb = j.mem_per_cpu.as_deref().map(|m| mb(m, "mem-per-cpu")).transpose()?;
    let hosts = |h: &str| drover_model::hostlist::Hostlist::parse(h).map(|h| h.names()).map_err(|e| e.to_string());
    s.nodelist = j.nodelist.as_deref().map(hosts).transpose()?.unwrap_or_default();
    s.exclude = j.exclude.as_deref().map(hosts).transpose()?.unwrap_or_default();
    s.exact |= a.exact || env_flag("SLURM_EXACT") || j.exclusive.is_some();
    s.overlap = a.overlap || env_flag("SLURM_OVERLAP");
    // -O, or the job's (a batch job of `sbatch -O` exports SLURM_OVERCOMMIT=1).
    s.overcommit = j.overcommit || env_flag("SLURM_OVERCOMMIT");
    // Programs the node runs as the user around each task, from srun's directory.
    let abs = |p: &String| {
        if p.starts_with('/') {
            p.clone()
        } else {
            format!("{}/{p}", crate::common::cwd("/tmp"))
        }
    };
    s.task_prolog = a.task_prolog.as_ref().map(abs).unwrap_or_default();
    s.task_epilog = a.task_epilog.as_ref().map(abs).unwrap_or_default();
    if let Some(t) = &a.threads {
        crate::jobopts::count(t, "threads")?;
    }
    if s.overlap && j.exclusive.is_some() {
        return Err("--exclusive and --overlap are mutually exclusive".into());
    }
    s.distribution = a.distribution.clone().or_else(|| env("SLURM_DISTRIBUTION")).unwrap_or_default();
    drover_model::step::Distribution::parse(&s.distribution).map_err(|e| format!("{}{e}", crate::jobopts::EXIT_255))?;
    if let Some(t) = &j.time {
        let l = drover_model::duration::parse_time_limit(t)
            .map_err(|_| format!("{}Invalid --time specification", crate::jobopts::EXIT_255))?;
        s.time_limit_secs = l.map(|x| x.div_ceil(60) * 60);
    }
    s.name = j.job_name.clone().unwrap_or_else(|| {
        std::path::Path::new(&a.command[0]).file_name().map(|f| f.to_string_lossy().to_string()).unwrap_or_default()
    });
    s.argv = a.command.clone();
    s.environment = crate::jobopts::exported_env(j.export.as_deref().unwrap_or("ALL"))?
        .into_iter()
        .map(|(key, value)| v1::KeyValue { key, value })
        .collect();
    let cwd = crate::common::cwd("/tmp");
    s.work_dir = match &j.chdir {
        Some(d) if d.starts_with('/') => d.clone(),
        Some(d) => format!("{cwd}/{d}"),
        None => cwd,
    };
    // `-i none|all|N` pick tasks for srun's stdin; anything else is a file pattern.
    let is_file = |v: &String| !(v == "none" || v == "all" || v.parse::<u32>().is_ok());
    s.stdout = j.output.clone().filter(is_file);
    s.stderr = j.error.clone().filter(is_file);
    s.stdin = j.input.clone().filter(is_file);
    let mode = |v: &Option<String>| v.clone().filter(|v| !is_file(v)).unwrap_or_default();
    (s.output_mode, s.error_mode, s.input_mode) = (mode(&j.output), mode(&j.error), mode(&j.input));
    if a.pty {
        // Only task 0 has the terminal, and srun's keys go to it alone.
        s.input_mode = "0".into();
    }
    // --open-mode, or the job's (sbatch --open-mode exports SLURM_OPEN_MODE=a|t).
    let open_mode = j.open_mode.clone().or_else(|| env("SLURM_OPEN_MODE"));
    s.open_mode_append = matches!(open_mode.as_deref(), Some("append" | "a" | "A"));
    s.kill_on_bad_exit = match &a.kill_on_bad_exit {
        Some(v) => v != "0",
        None => env_flag("SLURM_KILL_BAD_EXIT"),
    };
    // GRES of the step (its own, from the command line; none given: the job's).
    if let Some(g) = &j.gres {
        let reqs =
            drover_model::gres::parse_gres_request(g).map_err(|_| "Invalid generic resource (gres) specification")?;
        s.gres = if reqs.is_empty() { vec!["none".into()] } else { reqs.iter().map(|r| r.text()).collect() };
    }
    if let Some(g) = &j.gpus_per_node {
        let r = drover_model::gres::parse_gpus(g).map_err(|_| "Invalid generic resource (gres) specification")?;
        s.gres.push(r.text());
    }
    s.srun_host = common::hostname();
    s.srun_pid = std::process::id();
    // --cpu-bind, else SLURM_CPU_BIND as an input variable (`verbose` to see every binding).
    // Inside a step, SLURM_CPU_BIND describes that step's binding and is not an input.
    s.gpu_bind = a.gpu_bind.clone().unwrap_or_default();
    s.cpu_bind = a
        .cpu_bind
        .clone()
        .or_else(|| env("SLURM_CPU_BIND").filter(|_| env("SLURM_STEP_ID").is_none()))
        .unwrap_or_default();
    s.standalone = standalone;
    Ok(s)
}

/// srun without an allocation: allocate, run the step in it, release it with the step's
/// status (the job ends COMPLETED or FAILED as its tasks did).
async fn standalone_run(
    client: &mut common::Client,
    a: &SrunArgs,
    args: Vec<String>,
    step: v1::StepSpec,
    io: &IoServer,
    opts: &StepOpts,
) -> i32 {
    let validated = match a.job.validate(false) {
        Ok(v) => v,
        Err(e) => return crate::jobopts::report("srun", &e),
    };
    let mut spec = validated.spec;
    spec.overcommit |= step.overcommit;
    spec.name = step.name.clone();
    spec.argv = a.command.clone();
    spec.submit_line = std::iter::once("srun".to_string()).chain(args).collect::<Vec<_>>().join(" ");
    let (id, job) = match crate::salloc::allocate(client, &spec, "srun").await {
        Ok(a) => a,
        Err(code) => return code,
    };
    if opts.verbose {
        eprintln!("{}", job_information(&job));
    }
    // The step is the whole allocation, laid out as the job's tasks were.
    let mut step = step;
    step.job_id = id;
    step.ntasks = Some(job.alloc.iter().map(|n| n.tasks).sum::<u32>().max(1));
    step.min_nodes = Some(job.alloc.len() as u32);
    step.max_nodes = step.min_nodes;
    step.nodelist = job.alloc.iter().map(|n| n.node.clone()).collect();
    if !step.multi_prog.is_empty() {
        if let Err(code) = check_multi_prog(&step) {
            let _ =
                client.complete_job(v1::CompleteRequest { job_id: id, exit_status: 1 << 8, how: String::new() }).await;
            return code;
        }
    }
    let (rc, worst, how) = run_step(client, step, io, opts).await;
    // The allocation must be released even across a controller restart.
    let until = Instant::now() + Duration::from_secs(120);
    loop {
        match client.complete_job(v1::CompleteRequest { job_id: id, exit_status: worst, how: how.clone() }).await {
            Err(s) if s.code() == tonic::Code::Unavailable && Instant::now() < until => {
                tokio::time::sleep(Duration::from_millis(500)).await;
                if let Ok(c) = common::connect_config().await {
                    *client = c;
                }
            }
            _ => break,
        }
    }
    rc
}

/// Creates the step (waiting while other steps hold its resources), streams its I/O and
/// returns srun's exit code, the worst raw task status, and how the step ended when that is
/// more than its tasks' statuses say (`OUT_OF_MEMORY`).
async fn run_step(
    client: &mut common::Client,
    spec: v1::StepSpec,
    io: &IoServer,
    opts: &StepOpts,
) -> (i32, i32, String) {
    let (kill_wait, standalone) = (opts.kill_wait, opts.standalone);
    let job = spec.job_id;
    let timing = std::env::var_os("DROVER_TIMING").map(|_| Instant::now());
    let phase = |what: &str| {
        if let Some(t0) = timing {
            eprintln!("srun timing: {what} at {:.1} ms", t0.elapsed().as_secs_f64() * 1000.0);
        }
    };
    // Watch first, so that no event of the step can be missed. A controller that goes away
    // before the step exists (a restart, a failover) is waited for and asked again.
    let until = Instant::now() + Duration::from_secs(120);
    let (mut events, created) = loop {
        let events = match client.watch_job(v1::WatchRequest { job_id: job }).await {
            Ok(s) => Some(s.into_inner()),
            Err(s) => {
                eprintln!("srun: error: Unable to create step for job {job}: {}", status_msg(&s));
                return (1, 1 << 8, String::new());
            }
        };
        let created = match client.create_step(v1::StepCreateRequest { spec: Some(spec.clone()), wait: false }).await {
            Ok(r) => Ok(r.into_inner()),
            // The allocation's PrologSlurmctld still runs: wait for it without a word.
            Err(s) if s.code() == tonic::Code::ResourceExhausted && s.message() == "Job is configuring" => client
                .create_step(v1::StepCreateRequest { spec: Some(spec.clone()), wait: true })
                .await
                .map(|r| r.into_inner()),
            Err(s) if s.code() == tonic::Code::ResourceExhausted && !standalone => {
                eprintln!("srun: Job {job} step creation temporarily disabled, retrying (Requested nodes are busy)");
                let waited = tokio::select! {
                    r = client.create_step(v1::StepCreateRequest { spec: Some(spec.clone()), wait: true }) => r,
                    _ = tokio::signal::ctrl_c() => {
                        eprintln!("srun: Cancelled pending job step with signal 2");
                        eprintln!("srun: error: Unable to create step for job {job}: Job/step already completing or completed");
                        return (1, 1 << 8, String::new());
                    }
                };
                if waited.is_ok() {
                    eprintln!("srun: Step created for job {job}");
                }
                waited.map(|r| r.into_inner())
            }
            Err(s) => Err(s),
        };
        match &created {
            Err(s) if s.code() == tonic::Code::Unavailable && Instant::now() < until => {
                tokio::time::sleep(Duration::from_millis(200)).await;
                if let Ok(c) = common::connect_config().await {
                    *client = c;
                }
            }
            _ => break (events, created),
        }
    };
    let reply = match created {
        Ok(r) => r,
        Err(s) if s.code() == tonic::Code::OutOfRange => {
            eprintln!("srun: error: {}", status_msg(&s));
            return (1, 1 << 8, String::new());
        }
        Err(s) => {
            eprintln!("srun: error: Unable to create step for job {job}: {}", status_msg(&s));
            return (1, 1 << 8, String::new());
        }
    };
    phase("step created");
    io.set_key(&reply.io_key);
    let step = reply.step.unwrap_or_default();
    // A map or mask outside the step's CPUs: the nodes refuse the launch; say why first.
    let bind_refused = cpu_bind_outside(&spec, &step);
    if let Some(e) = &bind_refused {
        eprintln!("srun: error: {e}");
    }
    // srun's stdin to the tasks -i picks (all by default, as in Slurm; task 0 with --pty),
    // unless it is a file the tasks read themselves or a terminal we are in the background of.
    if spec.stdin.is_none() && spec.input_mode != "none" && crate::stepio::stdin_is_ours() {
        io.forward_stdin(&step, &spec.input_mode);
    }
    // --pty: our keys go to task 0's terminal as typed (Ctrl-C too), its size follows ours.
    let mut raw = spec.pty.then(crate::stepio::RawTerminal::enter).flatten();
    let mut winch =
        spec.pty.then(|| tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change()).ok()).flatten();
    let step_id = step.step_id;
    let label = format!("StepId={job}.{step_id}");
    if opts.verbose {
        let bind = if spec.cpu_bind.is_empty() { "(null type)".to_string() } else { spec.cpu_bind.clone() };
        eprintln!("srun: launch/slurm: launch_p_step_launch: CpuBindType={bind}");
        for n in &step.nodes {
            eprintln!(
                "srun: launching {label} on host {}, {} tasks: {}",
                n.node,
                n.task_ids.len(),
                task_list(&n.task_ids)
            );
        }
        eprintln!("srun: route/default: init: route default plugin loaded");
        for n in &step.nodes {
            eprintln!("srun: launch/slurm: _task_start: Node {}, {} tasks started", n.node, n.task_ids.len());
        }
    }
    let ntasks: usize = step.nodes.iter().map(|n| n.task_ids.len()).sum();
    let nnodes = step.nodes.len();
    let target = v1::JobTarget { job_id: job, tasks: None, step_id: Some(step_id) };
    let signal_step = |signal: i32| v1::CancelRequest { targets: vec![target.clone()], signal, ..Default::default() };
    // srun ending its own step: SIGTERM, then SIGKILL after KillWait.
    let terminate_step =
        v1::CancelRequest { targets: vec![target.clone()], step_terminate: true, ..Default::default() };
    let mut signals = ForwardedSignals::new();
    let mut interrupts: Vec<Instant> = Vec::new();
    let mut forced = false;
    let mut ended: Option<v1::StepInfo> = None;
    // How the step is being ended, if it is: by scancel (aborted) or by srun itself.
    let mut aborted = false;
    let mut terminating = false;
    let mut reported = 0;
    let mut told_nodes: std::collections::HashSet<String> = Default::default();
    let mut rc = 0;
    let mut worst = 0;
    let mut signalled = false;
    // -W: when the rest of the tasks are killed, once the first has ended.
    let mut wait_until: Option<tokio::time::Instant> = None;
    let say_aborted = || {
        eprintln!("srun: Job step aborted: Waiting up to {} seconds for job step to finish.", kill_wait + 2);
    };
    // What an event of the job or step means here.
    macro_rules! on_event {
        ($ev:expr) => {{
            let ev: v1::JobEvent = $ev;
            if let Some(s) = ev.step.filter(|s| s.step_id == step_id) {
                if s.state == "RUNNING" && s.cancelled {
                    if !aborted {
                        say_aborted();
                    }
                    aborted = true;
                } else if s.state != "RUNNING" {
                    ended = Some(s);
                }
            } else if let Some(j) = ev.job {
                if drover_model::state::JobState::parse(&j.state).is_some_and(|s| s.is_finished()) {
                    // The job ended under its running step (scancel of the job, its time
                    // limit): Slurm's srun hears SRUN_JOB_COMPLETE and says so.
                    if !aborted && !terminating {
                        say_aborted();
                    }
                    aborted = true;
                    io.settle(nnodes, Duration::from_secs(1)).await;
                    ended = Some(v1::StepInfo { state: j.state, ..Default::default() });
                }
            }
        }};
    }
    loop {
        // Events already here come before the tasks' ends: a job cancelled under the step is
        // told first, as Slurm's srun hears SRUN_JOB_COMPLETE before its tasks end.
        while let Some(e) = events.as_mut().filter(|_| ended.is_none()) {
            match tokio::time::timeout(Duration::ZERO, e.message()).await {
                Ok(Ok(Some(ev))) => on_event!(ev),
                Ok(_) => events = None,
                Err(_) => break,
            }
        }
        // Each task's failure is told as it arrives, as srun does; tasks that end together
        // (their exits a moment apart) in one line, as slurmstepd's one exit message.
        let mut exits = io.exits_in_order();
        if exits.len() > reported && exits.len() < ntasks {
            tokio::time::sleep(Duration::from_millis(20)).await;
            exits = io.exits_in_order();
        }
        if wait_until.is_none() && opts.max_wait > 0 && !exits.is_empty() {
            wait_until = Some(tokio::time::Instant::now() + Duration::from_secs(opts.max_wait));
        }
        if exits.len() > reported {
            // Task 0's terminal session is over: ours is a terminal again for what srun says.
            drop(raw.take());
        }
        if opts.verbose && exits.len() > reported {
            // One notification per node once its tasks have all ended, those of one status
            // together, as slurmstepd reports the tasks it reaps.
            for n in &step.nodes {
                if told_nodes.contains(&n.node) {
                    continue;
                }
                let mine: Vec<&(u32, String, i32)> = exits.iter().filter(|(_, node, _)| *node == n.node).collect();
                if mine.len() < n.task_ids.len() {
                    continue;
                }
                told_nodes.insert(n.node.clone());
                let mut statuses: Vec<i32> = mine.iter().map(|e| e.2).collect();
                statuses.sort_unstable();
                statuses.dedup();
                for st in statuses {
                    let mut ids: Vec<u32> = mine.iter().filter(|e| e.2 == st).map(|e| e.0).collect();
                    ids.sort_unstable();
                    let k = ids.len();
                    let (word, list) =
                        if k == 1 { ("task", ids[0].to_string()) } else { ("tasks", exit_task_list(&ids)) };
                    eprintln!(
                        "srun: launch/slurm: _task_finish: Received task exit notification for {k} {word} of {label} (status=0x{st:04x})."
                    );
                    if st == 0 {
                        eprintln!("srun: launch/slurm: _task_finish: {}: {word} {list}: Completed", n.node);
                    }
                }
            }
        }
        // (node, status, OOM) → its tasks, in the order they came.
        type Ended<'a> = (&'a str, i32, bool);
        let mut groups: Vec<(Ended, Vec<u32>)> = Vec::new();
        for (task, node, st) in &exits[reported..] {
            let oom = st & 0x7f != 0 && io.collected.lock().map(|c| c.oom.contains(task)).unwrap_or(false);
            match groups.iter_mut().find(|(k, _)| *k == (node.as_str(), *st, oom)) {
                Some((_, ids)) => ids.push(*task),
                None => groups.push(((node.as_str(), *st, oom), vec![*task])),
            }
        }
        for ((node, st, oom), ids) in &mut groups {
            ids.sort_unstable();
            let st = *st;
            let sig = st & 0x7f;
            let code = (st >> 8) & 0xff;
            if drover_model::job::exit_rank(st) > drover_model::job::exit_rank(worst) {
                worst = st;
            }
            let tasks =
                if ids.len() == 1 { format!("task {}", ids[0]) } else { format!("tasks {}", exit_task_list(ids)) };
            if sig != 0 {
                let what = if *oom { "Out Of Memory".to_string() } else { signal_text(sig) };
                eprintln!("srun: error: {node}: {tasks}: {what}");
                rc = rc.max(128 + sig);
                signalled = true;
            } else if code != 0 {
                eprintln!("srun: error: {node}: {tasks}: Exited with exit code {code}");
                rc = rc.max(code);
            }
            if st != 0 && spec.kill_on_bad_exit && !terminating && !aborted {
                terminating = true;
                eprintln!("srun: launch/slurm: _step_signal: Terminating {label}");
                let _ = client.cancel(terminate_step.clone()).await;
            }
        }
        reported = exits.len();
        let done = io.progress().1;
        if reported >= ntasks && done >= nnodes {
            phase("every task reported");
            // As Slurm's srun, return once the controller has the step's end, so that the
            // next srun of a script finds the step's resources free.
            if ended.is_none() {
                if let Some(ev) = events.as_mut() {
                    wait_step_end(ev, step_id).await;
                }
            }
            break;
        }
        if let Some(e) = &ended {
            // The step ended on every node: the last frames are on their way, or lost.
            if e.state != "RUNNING" {
                if io.settle(nnodes, Duration::from_secs(1)).await && io.exits_in_order().len() > reported {
                    continue;
                }
                break;
            }
        }
        tokio::select! {
            ev = async {
                match events.as_mut() {
                    Some(e) => e.message().await,
                    None => std::future::pending().await,
                }
            } => match ev {
                Ok(Some(ev)) => on_event!(ev),
                // The controller went away (a restart): the tasks still report to us
                // directly, so the step goes on without its events.
                _ => events = None,
            },
            _ = tokio::signal::ctrl_c() => {
                let now = Instant::now();
                interrupts.retain(|t| now.duration_since(*t) < Duration::from_secs(1));
                interrupts.push(now);
                let count = match (interrupts.len(), opts.on_interrupt) {
                    (1, Interrupt::Forward) => 2,
                    (1, Interrupt::Kill) => 3,
                    (n, _) => n,
                };
                match count {
                    1 => {
                        eprintln!("srun: interrupt (one more within 1 sec to abort)");
                        for l in io.status_lines(&step) {
                            eprintln!("srun: {label} {l}");
                        }
                    }
                    2 => {
                        eprintln!("srun: sending Ctrl-C to {label}");
                        let _ = client.cancel(signal_step(nix::sys::signal::Signal::SIGINT as i32)).await;
                        terminating = true;
                        let _ = client.cancel(terminate_step.clone()).await;
                    }
                    // Slurm's job_force_termination: SIGKILL to the tasks, whose ends srun
                    // then tells (`task 0: Killed`); a further Ctrl-C leaves at once.
                    _ if forced => return (1, 9, String::new()),
                    _ => {
                        eprintln!("srun: forcing job termination");
                        forced = true;
                        terminating = true;
                        let _ = client.cancel(signal_step(nix::sys::signal::Signal::SIGKILL as i32)).await;
                    }
                }
            }
            _ = async {
                match wait_until {
                    Some(t) if !terminating && !aborted => tokio::time::sleep_until(t).await,
                    _ => std::future::pending().await,
                }
            } => {
                // -W: the first task ended that long ago; the rest are killed (Slurm's words).
                eprintln!("srun: First task exited {}s ago", opts.max_wait);
                for l in io.status_lines(&step) {
                    eprintln!("srun: {label} {l}");
                }
                eprintln!("srun: Terminating {label}");
                terminating = true;
                let _ = client.cancel(signal_step(nix::sys::signal::Signal::SIGKILL as i32)).await;
            }
            sig = signals.next() => {
                use nix::sys::signal::Signal;
                if [Signal::SIGTERM, Signal::SIGHUP, Signal::SIGQUIT].iter().any(|s| *s as i32 == sig) {
                    // Slurm's srun ends its step at once on these (SIGKILL to its tasks): a job
                    // cancelled or requeued takes its steps with it even where they trap SIGTERM.
                    if sig == Signal::SIGQUIT as i32 {
                        eprintln!("srun: Quit");
                    }
                    eprintln!("srun: forcing job termination");
                    terminating = true;
                    let _ = client.cancel(signal_step(Signal::SIGKILL as i32)).await;
                } else {
                    let _ = client.cancel(signal_step(sig)).await;
                }
            }
            _ = async {
                match winch.as_mut() {
                    Some(w) => w.recv().await,
                    None => std::future::pending().await,
                }
            } => {
                if let Some(size) = crate::stepio::terminal_size() {
                    io.send_winsize(&step, size);
                }
            }
            _ = io.changed.notified() => {}
        }
    }
    if reported == 0 {
        if let Some(e) = ended.as_ref().filter(|e| !e.message.is_empty()) {
            let node = e.nodes.first().map(|n| n.node.clone()).unwrap_or_default();
            eprintln!("srun: error: Task launch for {label} failed on node {node}: {}", e.message);
            if bind_refused.is_some() {
                eprintln!("srun: error: Application launch failed: {}", e.message);
                eprintln!("srun: Job step aborted");
                return (192, 192 << 8, String::new());
            }
        }
    }
    if signalled && !aborted {
        eprintln!("srun: Force Terminated {label}");
    }
    if reported < ntasks && rc == 0 {
        rc = 1;
        worst = worst.max(1 << 8);
    }
    let oom = !io.collected.lock().map(|c| c.oom.is_empty()).unwrap_or(true)
        || ended.as_ref().is_some_and(|e| e.state == "OUT_OF_MEMORY");
    (rc, worst, if oom { "OUT_OF_MEMORY".into() } else { String::new() })
}

/// A `--multi-prog` file must give every task of the step (when its size is known) a
/// program; its faults are told in srun's words.
fn check_multi_prog(spec: &v1::StepSpec) -> Result<(), i32> {
    let name = spec.argv.first().map(String::as_str).unwrap_or_default();
    drover_model::multiprog::MultiProg::parse(&spec.multi_prog, name, spec.ntasks).map(drop).map_err(|lines| {
        for l in lines {
            eprintln!("srun: error: {l}");
        }
        1
    })
}

/// Slurm's refusal of an explicit CPU map or mask (or `rank`) that names CPUs the step does
/// not hold on some node.
fn cpu_bind_outside(spec: &v1::StepSpec, step: &v1::StepInfo) -> Option<String> {
    use drover_model::cpubind::{bind_node, BindKind, CpuBind, Topology};
    let bind = CpuBind::parse(&spec.cpu_bind).ok()?;
    if !matches!(bind.kind, Some(BindKind::MapCpu(_) | BindKind::MaskCpu(_) | BindKind::Rank)) {
        return None;
    }
    let flat = Topology { sockets: 1, cores_per_socket: 1, threads_per_core: 1 };
    step.nodes.iter().find_map(|n| {
        let mut cpus = n.cpu_ids.clone();
        cpus.sort_unstable();
        bind_node(Some(&bind), false, flat, &cpus, n.task_ids.len(), spec.cpus_per_task).err()
    })
}

/// Signals srun hears: SIGTERM, SIGHUP and SIGQUIT end its step, the others are passed on to
/// its tasks (Ctrl-C is handled apart).
struct ForwardedSignals {
    streams: Vec<(i32, tokio::signal::unix::Signal)>,
}

impl ForwardedSignals {
    fn new() -> ForwardedSignals {
        use tokio::signal::unix::{signal, SignalKind};
        let kinds = [
            (nix::sys::signal::Signal::SIGTERM as i32, SignalKind::terminate()),
            (nix::sys::signal::Signal::SIGHUP as i32, SignalKind::hangup()),
            (nix::sys::signal::Signal::SIGQUIT as i32, SignalKind::quit()),
            (nix::sys::signal::Signal::SIGUSR1 as i32, SignalKind::user_defined1()),
            (nix::sys::signal::Signal::SIGUSR2 as i32, SignalKind::user_defined2()),
        ];
        ForwardedSignals { streams: kinds.into_iter().filter_map(|(n, k)| signal(k).ok().map(|s| (n, s))).collect() }
    }

    /// The next signal srun received.
    async fn next(&mut self) -> i32 {
        if self.streams.is_empty() {
            return std::future::pending().await;
        }
        let futs = self.streams.iter_mut().map(|(n, s)| {
            let n = *n;
            Box::pin(async move {
                s.recv().await;
                n
            })
        });
        futures_select_all(futs).await
    }
}

/// The first of several futures to finish.
async fn futures_select_all<F: std::future::Future<Output = i32> + Unpin>(futs: impl IntoIterator<Item = F>) -> i32 {
    let mut futs: Vec<F> = futs.into_iter().collect();
    std::future::poll_fn(move |cx| {
        for f in futs.iter_mut() {
            if let std::task::Poll::Ready(v) = std::pin::Pin::new(f).poll(cx) {
                return std::task::Poll::Ready(v);
            }
        }
        std::task::Poll::Pending
    })
    .await
}

/// How srun names a signal that ended a task (`Killed`, `Terminated`, ...).
pub fn signal_text(sig: i32) -> String {
    match nix::sys::signal::Signal::try_from(sig) {
        Ok(nix::sys::signal::Signal::SIGKILL) => "Killed".into(),
        Ok(nix::sys::signal::Signal::SIGTERM) => "Terminated".into(),
        Ok(nix::sys::signal::Signal::SIGSEGV) => "Segmentation fault".into(),
        Ok(s) => format!("Killed by signal {}", s as i32),
        Err(_) => format!("Killed by signal {sig}"),
    }
}
