//! The per-job and per-step supervisor (the `slurmstepd` analogue): `drover supervise DIR`,
//! started by the node agent in its own session so that it outlives a restart of the agent.
//! It runs either a batch script (`DIR` = `job<N>`) or this node's tasks of a job step
//! (`DIR` = `job<N>.<S>`, launched by `srun` inside the allocation), whose I/O it streams to
//! srun or into the step's output files.
//!
//! It is single-threaded on purpose: it forks the job's processes and drops privileges in the
//! child (initgroups, setgid, setuid, then chdir as the user) before exec. It becomes the
//! child subreaper so that every process of the job, however often it forked, stays its
//! descendant and is killed when the job ends. It enforces the time limit, obeys signal and
//! terminate requests from the agent on `JOBDIR/sv.sock`, writes `JOBDIR/status` when the job
//! is over and tells the agent on its socket.

use crate::env::{batch_env, step_task_env, EnvCtx};
use crate::spool::{self, EndStatus};
use drover_model::job::{expand_pattern, PatternVars};
use drover_proto::v1;
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{ForkResult, Pid};
use prost::Message;
use std::collections::{HashMap, HashSet};
use std::ffi::{CStr, CString};
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

static SIGCHLD_PIPE: AtomicI32 = AtomicI32::new(-1);

/// Why a supervisor could not run its job: the node's prolog failed (the job is requeued and
/// the node drained), or anything else about the launch.
enum Failure {
    Prolog(String),
    Launch(String),
}

impl From<String> for Failure {
    fn from(e: String) -> Failure {
        Failure::Launch(e)
    }
}

impl From<&str> for Failure {
    fn from(e: &str) -> Failure {
        Failure::Launch(e.to_string())
    }
}

extern "C" fn on_sigchld(_: libc::c_int) {
    let fd = SIGCHLD_PIPE.load(Ordering::Relaxed);
    if fd >= 0 {
        // SAFETY: write(2) is async-signal-safe; a full pipe just drops the wake-up byte.
        unsafe {
            libc::write(fd, [1u8].as_ptr().cast(), 1);
        }
    }
}

fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

fn slurm_time(t: i64) -> String {
    jiff::Timestamp::from_second(t)
        .map(|ts| ts.to_zoned(jiff::tz::TimeZone::system()).strftime("%Y-%m-%dT%H:%M:%S").to_string())
        .unwrap_or_default()
}

struct User {
    uid: u32,
    gid: u32,
    name: CString,
    home: String,
    /// Supplementary groups (what `initgroups` would set).
    gids: Vec<u32>,
    /// The submitter's file-creation mask (`SLURM_UMASK` of the step's request, else the
    /// job's; 0022 when neither says): the job's files are created as the user would have.
    umask: u32,
    /// The submitter's soft limits this node propagates (`SLURM_RLIMIT_*`,
    /// `PropagateResourceLimits`).
    rlimits: Vec<(nix::sys::resource::Resource, u64)>,
}

/// The submitter's limits among `env` that `propagate` names.
fn rlimits_in<'a>(
    env: impl Iterator<Item = (&'a str, &'a str)>,
    propagate: &[String],
) -> Vec<(nix::sys::resource::Resource, u64)> {
    env.filter_map(|(k, v)| {
        let name = k.strip_prefix(drover_proto::rlimit::ENV_PREFIX)?;
        if !propagate.iter().any(|p| p == name) {
            return None;
        }
        let r = drover_proto::rlimit::resource(name)?;
        Some((r, v.trim().parse().ok()?))
    })
    .collect()
}

/// Sets the submitter's soft limits, each capped by this node's hard limit (a user gets no
/// more than `ulimit -S` would give them here).
fn apply_rlimits(limits: &[(nix::sys::resource::Resource, u64)]) {
    use nix::sys::resource::{getrlimit, setrlimit};
    for &(r, want) in limits {
        if let Ok((_, hard)) = getrlimit(r) {
            let _ = setrlimit(r, want.min(hard), hard);
        }
    }
}

/// `SLURM_UMASK` among `env` (octal), if it says one.
fn umask_in<'a>(mut env: impl Iterator<Item = (&'a str, &'a str)>) -> Option<u32> {
    env.find(|(k, _)| *k == "SLURM_UMASK").and_then(|(_, v)| u32::from_str_radix(v.trim(), 8).ok()).map(|m| m & 0o777)
}

/// Entry point of `drover supervise JOBDIR`. Never returns.
pub fn supervise(dir: &Path) -> ! {
    let code = match run(dir) {
        Ok(()) => 0,
        Err(f) => {
            let (how, message, e) = match f {
                Failure::Prolog(e) => ("PROLOG_FAILED", "Prolog error".to_string(), e),
                Failure::Launch(e) => ("FAILED_LAUNCH", e.clone(), e),
            };
            let _ =
                spool::write_status(dir, &EndStatus { exit_status: 1 << 8, how: how.into(), end_time: now(), message });
            notify_agent(dir);
            eprintln!("drover supervise {}: {e}", dir.display());
            1
        }
    };
    std::process::exit(code)
}

fn run(dir: &Path) -> Result<(), Failure> {
    let bytes = std::fs::read(dir.join(spool::LAUNCH)).map_err(|e| format!("reading launch: {e}"))?;
    let launch = v1::Launch::decode(&bytes[..]).map_err(|e| format!("decoding launch: {e}"))?;
    let job = launch.job.clone().ok_or("launch without job")?;
    let spec = job.spec.clone().ok_or("launch without spec")?;
    spool::write_pid(dir).map_err(|e| format!("writing pid: {e}"))?;
    let _ = nix::sys::prctl::set_child_subreaper(true);

    let (rpipe, wpipe) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK)
        .map_err(|e| format!("pipe: {e}"))?;
    SIGCHLD_PIPE.store(wpipe.as_raw_fd(), Ordering::Relaxed);
    let sa = nix::sys::signal::SigAction::new(
        nix::sys::signal::SigHandler::Handler(on_sigchld),
        nix::sys::signal::SaFlags::SA_RESTART | nix::sys::signal::SaFlags::SA_NOCLDSTOP,
        nix::sys::signal::SigSet::empty(),
    );
    // SAFETY: the handler only calls write(2) on a pipe.
    unsafe { nix::sys::signal::sigaction(Signal::SIGCHLD, &sa) }.map_err(|e| format!("sigaction: {e}"))?;
    // The agent may be restarted or killed: that must not reach us.
    // SAFETY: ignoring SIGHUP/SIGINT/SIGPIPE is a plain disposition change.
    unsafe {
        let _ = nix::sys::signal::signal(Signal::SIGHUP, nix::sys::signal::SigHandler::SigIgn);
        let _ = nix::sys::signal::signal(Signal::SIGPIPE, nix::sys::signal::SigHandler::SigIgn);
        let _ = nix::sys::signal::signal(Signal::SIGINT, nix::sys::signal::SigHandler::SigIgn);
    }

    // For tests only: widens the moment before this supervisor listens, in which the agent
    // cannot reach it (tests/supervisor_start.rs).
    if let Some(ms) = std::env::var("DROVER_TEST_SUPERVISOR_LISTEN_DELAY_MS").ok().and_then(|v| v.parse::<u64>().ok()) {
        std::thread::sleep(Duration::from_millis(ms));
    }
    let sock_path = dir.join(spool::SV_SOCK);
    let _ = std::fs::remove_file(&sock_path);
    let listener = UnixListener::bind(&sock_path).map_err(|e| format!("binding {}: {e}", sock_path.display()))?;
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    // Ended before it listened (the agent could not reach the socket): nothing of it starts.
    if let Ok(line) = std::fs::read_to_string(dir.join(spool::TERM)) {
        let how = if line.split_whitespace().nth(1) == Some("requeue") { "REQUEUE" } else { "CANCELLED" };
        let end = EndStatus { exit_status: 0, how: how.into(), end_time: now(), message: String::new() };
        spool::write_status(dir, &end).map_err(|e| format!("writing status: {e}"))?;
        let _ = std::fs::remove_file(&sock_path);
        notify_agent(dir);
        return Ok(());
    }

    // As the node agent resolved the user, or (an agent not running as root, an older one)
    // looked up here.
    let resolved = match launch.user.clone() {
        Some(u) => u,
        None => crate::resolve_user(spec.uid, spec.gid)?,
    };
    let step_env = launch.step.as_ref().and_then(|s| s.spec.as_ref()).map(|s| &s.environment);
    let umask = step_env
        .and_then(|e| umask_in(e.iter().map(|kv| (kv.key.as_str(), kv.value.as_str()))))
        .or_else(|| umask_in(spec.environment.iter().map(|kv| (kv.key.as_str(), kv.value.as_str()))))
        .unwrap_or(0o022);
    // The limits srun (or sbatch) sent with the request this supervisor runs.
    let request_env = step_env.unwrap_or(&spec.environment);
    let rlimits =
        rlimits_in(request_env.iter().map(|kv| (kv.key.as_str(), kv.value.as_str())), &launch.propagate_rlimits);
    let user = User {
        uid: spec.uid,
        gid: spec.gid,
        name: CString::new(resolved.name).map_err(|e| e.to_string())?,
        home: resolved.home,
        gids: resolved.gids,
        umask,
        rlimits,
    };
    let node = spool::node_name(dir);
    let (cgroup, gpus_isolated) = match confine(&launch, &job, &node, dir.parent().unwrap_or(dir)) {
        Ok(Some((g, iso))) => (Some(g), iso),
        Ok(None) => (None, false),
        Err(e) => {
            eprintln!("drover supervise {}: cgroup: {e}; this job runs without confinement", dir.display());
            (None, false)
        }
    };
    let ctx = EnvCtx { launch: &launch, node: &node, submit_host: &spec.submit_host, gpus_isolated };
    let mut sv = Supervisor {
        launch: &launch,
        job: &job,
        spec: &spec,
        step: launch.step.as_ref(),
        user,
        node: node.clone(),
        main: HashMap::new(),
        statuses: HashMap::new(),
        exits_told: HashSet::new(),
        outputs: HashMap::new(),
        io: None,
        io_in: Vec::new(),
        stdin: HashMap::new(),
        pty: None,
        attached: Vec::new(),
        history: std::collections::VecDeque::new(),
        history_bytes: 0,
        how: String::new(),
        stderr_path: None,
        join: cgroup.as_ref().map(|g| g.procs_files()).unwrap_or_default(),
        cgroup,
        task_env: HashMap::new(),
        helpers: std::collections::HashSet::new(),
        usage: std::collections::BTreeMap::new(),
    };
    // The node's prolog, once per job here, before anything of the job runs.
    if !launch.prolog.is_empty() {
        let spool_dir = dir.parent().unwrap_or(dir);
        let c = crate::prolog::Context {
            job: &job,
            node: &node,
            cluster: &launch.cluster_name,
            conf_path: &launch.conf_path,
        };
        if let Err((code, out)) = crate::prolog::prolog_once(spool_dir, &launch.prolog, &c) {
            let rc = if code > 0 { code >> 8 } else { code };
            if launch.step.is_none() && spec.batch {
                // Slurm tells the job's output file too.
                let out_file = sv.pattern(
                    spec.stdout.as_deref().unwrap_or(drover_model::job::default_output(job.array_job_id != 0)),
                    None,
                );
                sv.truncate_as_user(std::slice::from_ref(&out_file)).ok();
                if let Ok(mut f) = std::fs::OpenOptions::new().append(true).open(&out_file) {
                    let _ = writeln!(f, "Error running slurm prolog: {rc}");
                }
            }
            return Err(Failure::Prolog(format!("prolog failed: rc:{rc} output:{out}")));
        }
    }
    if let Some(step) = launch.step.as_ref() {
        sv.start_step(&ctx, step)?;
    } else if spec.batch {
        let mut env = batch_env(&ctx);
        if crate::userenv::wanted(&env) {
            match crate::userenv::login_env(&spec.user, crate::userenv::TIMEOUT) {
                Ok(login) => crate::userenv::merge(&mut env, login),
                Err(e) => eprintln!(
                    "slurmd: error: _get_user_env: Unable to get user's local environment, running only with passed environment: {e}"
                ),
            }
        }
        let pid = sv.start_batch(dir, env)?;
        sv.main.insert(pid, 0);
    } else {
        return Err("an allocation without a batch script runs nothing until a step is launched in it".into());
    }
    sv.wait_loop(&rpipe, &listener)?;
    let exit_status = sv.statuses.values().copied().max_by_key(|s| drover_model::job::exit_rank(*s)).unwrap_or(0);
    let end = EndStatus { exit_status, how: sv.how.clone(), end_time: now(), message: String::new() };
    // What the tasks used, for accounting: written before the status that announces the end.
    let _ = spool::write_usage(dir, &sv.stat_reply());
    spool::write_status(dir, &end).map_err(|e| format!("writing status: {e}"))?;
    let _ = std::fs::remove_file(&sock_path);
    if let Some(g) = &sv.cgroup {
        g.remove();
    }
    notify_agent(dir);
    Ok(())
}

/// Reaps one child that ended, without blocking: its pid, raw wait status and what it (and
/// the descendants it waited for) used.
fn reap_any() -> Option<(i32, i32, libc::rusage)> {
    let mut status = 0;
    // SAFETY: rusage is plain data that wait4 fills in; both pointers are to our locals.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = unsafe { libc::wait4(-1, &mut status, libc::WNOHANG, &mut ru) };
    (pid > 0).then_some((pid, status, ru))
}

/// The cgroup this supervisor's processes run in, with the job's limits on this node (and
/// whether the job's GPUs are the only ones it can open). `Ok(None)`: confinement is off
/// (the agent logged why when it started).
fn confine(
    launch: &v1::Launch,
    job: &v1::JobInfo,
    node: &str,
    spool: &Path,
) -> Result<Option<(crate::cgroup::Group, bool)>, String> {
    use crate::cgroup::{char_device, gpu_files, host_cpu_ids, Cgroups, Limits};
    let conf_path = Path::new(&launch.conf_path);
    let conf = crate::cgroup::conf_for(conf_path)?;
    let dir = crate::cgroup::node_dir(&launch.cluster_name, conf_path, node);
    let Ok(cg) = Cgroups::open(conf.clone(), &dir) else { return Ok(None) };
    let here = job.alloc.iter().find(|a| a.node == node);
    let mib = 1024.0 * 1024.0;
    let mut limits = Limits {
        cpus: here.map(|a| host_cpu_ids(&a.cpu_ids)),
        mem: here.filter(|a| a.mem_mb > 0).map(|a| (a.mem_mb as f64 * mib * conf.allowed_ram_percent / 100.0) as u64),
        ..Default::default()
    };
    limits.mem_swap =
        limits.mem.zip(here).map(|(m, a)| m + (a.mem_mb as f64 * mib * conf.allowed_swap_percent / 100.0) as u64);
    let mut isolated = false;
    if cg.devices_confined() {
        let held: Vec<u32> = here
            .map(|a| a.gres.iter().filter(|g| g.name == "gpu").flat_map(|g| g.indices.clone()).collect())
            .unwrap_or_default();
        for (i, f) in gpu_files(conf_path, node, spool).iter().enumerate() {
            if held.contains(&(i as u32)) {
                continue;
            }
            match char_device(f) {
                // A fake device (`/dev/null`) is nothing to hide: denying it would break jobs.
                Some(dev) if f.as_str() != "/dev/null" => limits.deny.push(dev),
                _ => {}
            }
        }
        isolated = true;
    }
    let unit = match launch.step.as_ref().and_then(|s| s.step.as_ref()) {
        Some(st) => st.step_id.to_string(),
        None => "batch".to_string(),
    };
    cg.group(job.job_id, &unit, &limits).map(|g| Some((g, isolated)))
}

fn notify_agent(dir: &Path) {
    if let Some(spool_dir) = dir.parent() {
        if let Ok(mut s) = std::os::unix::net::UnixStream::connect(spool_dir.join(spool::AGENT_SOCK)) {
            let _ = writeln!(s, "{}", dir.file_name().map(|f| f.to_string_lossy().to_string()).unwrap_or_default());
        }
    }
}

struct Supervisor<'a> {
    launch: &'a v1::Launch,
    job: &'a v1::JobInfo,
    spec: &'a v1::JobSpec,
    /// The step this supervisor runs (none: the batch script).
    step: Option<&'a v1::StepLaunch>,
    user: User,
    node: String,
    /// Direct children we wait for: pid → task id.
    main: HashMap<i32, u32>,
    statuses: HashMap<u32, i32>,
    /// Tasks whose end srun (and sattach) heard as it happened.
    exits_told: HashSet<u32>,
    /// Pipes of task output: fd → (task, kind).
    outputs: HashMap<RawFd, (u32, u8, OwnedFd)>,
    io: Option<std::net::TcpStream>,
    /// Bytes read from srun's stream, not yet a whole frame.
    io_in: Vec<u8>,
    /// Where srun's stdin goes: task → its stdin pipe (or `--pty` terminal).
    stdin: HashMap<u32, StdinSink>,
    /// The `--pty` terminal's master side, for window size changes.
    pty: Option<OwnedFd>,
    /// sattach listeners: the tasks' output goes to them too, their input to the tasks.
    attached: Vec<(std::net::TcpStream, Vec<u8>)>,
    /// The step's latest output (up to HISTORY bytes), replayed to a new sattach listener as
    /// slurmstepd replays its buffers.
    history: std::collections::VecDeque<(u32, u8, Vec<u8>)>,
    history_bytes: usize,
    how: String,
    stderr_path: Option<PathBuf>,
    /// The step's cgroup, and the `cgroup.procs` files each task writes itself into.
    cgroup: Option<crate::cgroup::Group>,
    join: Vec<PathBuf>,
    /// Each task's environment, for its TaskEpilog.
    task_env: HashMap<u32, Vec<CString>>,
    /// TaskEpilogs running (waited for before the step ends).
    helpers: std::collections::HashSet<i32>,
    /// What each task has used (sstat), sampled now and then and when asked.
    usage: std::collections::BTreeMap<u32, crate::usage::Sample>,
}

/// A task's stdin as srun feeds it: a non-blocking pipe (or terminal) and what is still to
/// be written into it.
struct StdinSink {
    fd: OwnedFd,
    pending: Vec<u8>,
    /// srun's stdin ended: close once `pending` is written.
    eof: bool,
}

/// Beyond this much unread stdin for a task, srun's stream is not read until the task
/// catches up (TCP then holds srun back).
const STDIN_BACKLOG: usize = 1 << 20;

/// How much of a step's latest output a new sattach listener is shown first.
const HISTORY: usize = 64 << 10;

/// How a task's standard stream is connected.
enum Stream {
    /// A pipe to (or from) this supervisor.
    Pipe,
    File(String),
    Null,
    /// The `--pty` terminal.
    Pty,
}

/// A connection to srun (or sattach) at `addr` on which both ends proved they hold the
/// step's I/O key (see `drover_proto::io`): nothing of the tasks goes to anyone else.
fn connect_srun(addr: &str, key: &[u8], node: &str) -> Result<std::net::TcpStream, String> {
    let mut io = std::net::TcpStream::connect(addr).map_err(|e| format!("connecting to srun at {addr}: {e}"))?;
    let _ = io.set_nodelay(true);
    let _ = io.set_read_timeout(Some(std::time::Duration::from_secs(30)));
    drover_proto::io::supervisor_hello(&mut io, key, node).map_err(|e| format!("srun at {addr}: {e}"))?;
    let _ = io.set_read_timeout(None);
    Ok(io)
}

/// `prog` as the task's environment finds it: itself where it names a path, else the first
/// executable `DIR/prog` along the environment's `PATH` (glibc's default where it has none).
/// None: nowhere (exec then fails with the name as given, as Slurm reports it).
fn search_path(prog: &CStr, env: &[CString]) -> Option<CString> {
    let name = prog.to_bytes();
    if name.is_empty() || name.contains(&b'/') {
        return None;
    }
    let path = env.iter().find_map(|e| e.to_bytes().strip_prefix(b"PATH=")).unwrap_or(b"/usr/local/bin:/usr/bin:/bin");
    for dir in path.split(|b| *b == b':') {
        let mut cand = if dir.is_empty() { b".".to_vec() } else { dir.to_vec() };
        cand.push(b'/');
        cand.extend_from_slice(name);
        let Ok(c) = CString::new(cand) else { continue };
        let regular = std::fs::metadata(std::ffi::OsStr::from_bytes(c.to_bytes())).is_ok_and(|m| m.is_file());
        if regular && nix::unistd::access(c.as_c_str(), nix::unistd::AccessFlags::X_OK).is_ok() {
            return Some(c);
        }
    }
    None
}

/// Bytes from their hex text (the agent passes a key to the supervisor as a line).
fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2).filter_map(|i| u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()).collect()
}

fn set_nonblocking(fd: &OwnedFd) {
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    if let Ok(bits) = fcntl(fd, FcntlArg::F_GETFL) {
        let _ = fcntl(fd, FcntlArg::F_SETFL(OFlag::from_bits_truncate(bits) | OFlag::O_NONBLOCK));
    }
}

fn set_winsize(fd: &OwnedFd, rows: u16, cols: u16) {
    let ws = libc::winsize { ws_row: rows, ws_col: cols, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: TIOCSWINSZ reads one `winsize` from the pointer, which lives across the call.
    unsafe {
        libc::ioctl(fd.as_raw_fd(), libc::TIOCSWINSZ, &ws);
    }
}

/// In the forked task, as the user, just before exec: the `TaskProlog`, whose output
/// exports or unsets variables of the task and prints lines to its stdout.
fn run_task_prolog(prog: &str, envc: &mut Vec<CString>) {
    let pairs: Vec<(&std::ffi::OsStr, &std::ffi::OsStr)> = envc
        .iter()
        .filter_map(|c| {
            let b = c.to_bytes();
            let eq = b.iter().position(|x| *x == b'=')?;
            Some((std::ffi::OsStr::from_bytes(&b[..eq]), std::ffi::OsStr::from_bytes(&b[eq + 1..])))
        })
        .collect();
    let out = std::process::Command::new(prog)
        .env_clear()
        .envs(pairs)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .output();
    let Ok(out) = out else {
        let _ = writeln!(std::io::stderr(), "slurmstepd: error: TaskProlog {prog} could not run");
        return;
    };
    let t = crate::prolog::parse_task_prolog(&String::from_utf8_lossy(&out.stdout));
    let key_of = |c: &CString| c.to_str().ok().and_then(|s| s.split_once('=')).map(|(k, _)| k.to_string());
    for k in &t.unset {
        envc.retain(|c| key_of(c).as_deref() != Some(k));
    }
    for (k, v) in &t.export {
        envc.retain(|c| key_of(c).as_deref() != Some(k.as_str()));
        envc.push(cstr(&format!("{k}={v}")));
    }
    let mut o = std::io::stdout();
    for line in &t.print {
        let _ = writeln!(o, "{line}");
    }
    let _ = o.flush();
}

/// The whole frames a stream has for us now (`pending` keeps a partial one; nonsense is
/// dropped); `None` when the other end has gone.
fn read_frames(conn: &std::net::TcpStream, pending: &mut Vec<u8>) -> Option<Vec<drover_proto::io::Frame>> {
    let mut buf = [0u8; 65536];
    match nix::sys::socket::recv(conn.as_raw_fd(), &mut buf, nix::sys::socket::MsgFlags::MSG_DONTWAIT) {
        Ok(0) => return None,
        Ok(n) => pending.extend_from_slice(&buf[..n]),
        Err(_) => return Some(Vec::new()),
    }
    Some(drover_proto::io::split_frames(pending).unwrap_or_else(|_| {
        pending.clear();
        Vec::new()
    }))
}

/// In a forked child, before it drops privileges: into the step's cgroup.
fn join_cgroup(files: &[PathBuf]) {
    for f in files {
        if let Err(e) = std::fs::write(f, "0") {
            child_fail(&format!("joining the step's cgroup ({}): {e}", f.display()));
        }
    }
}

/// A string of the job's (an argument, a variable, a path) as the C string of its bytes (see
/// `drover_model::bytes`: what was not UTF-8 comes back as it was given).
fn cstr(s: &str) -> CString {
    let mut b = drover_model::bytes::decode(s);
    b.retain(|c| *c != 0);
    CString::new(b).expect("invariant: NULs removed")
}

/// A path of the job's, its bytes as given.
fn raw_path(s: &str) -> PathBuf {
    PathBuf::from(std::ffi::OsStr::from_bytes(&drover_model::bytes::decode(s)))
}

fn env_c(env: &[(String, String)]) -> Vec<CString> {
    env.iter().map(|(k, v)| cstr(&format!("{k}={v}"))).collect()
}

/// In the forked child: become the user, enter the work dir. Returns the dir actually used.
/// Becomes the job's user (in a child about to exec): groups, gid, uid, and the submitter's
/// umask for every file it creates from here on.
fn drop_privileges(user: &User) -> Result<(), String> {
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(user.umask));
    apply_rlimits(&user.rlimits);
    let me = nix::unistd::getuid().as_raw();
    if me == 0 {
        let gids: Vec<nix::unistd::Gid> = user.gids.iter().map(|g| nix::unistd::Gid::from_raw(*g)).collect();
        nix::unistd::setgroups(&gids).map_err(|e| format!("setgroups: {e}"))?;
        nix::unistd::setgid(nix::unistd::Gid::from_raw(user.gid)).map_err(|e| format!("setgid: {e}"))?;
        nix::unistd::setuid(nix::unistd::Uid::from_raw(user.uid)).map_err(|e| format!("setuid: {e}"))?;
    } else if me != user.uid && me != 0 {
        return Err(format!("the node agent runs as uid {me} and cannot run jobs of uid {}", user.uid));
    }
    Ok(())
}

fn child_fail(msg: &str) -> ! {
    let _ = std::io::stderr().write_all(format!("slurmstepd: error: {msg}\n").as_bytes());
    // SAFETY: _exit in the forked child, no destructors must run.
    unsafe { libc::_exit(1) }
}

fn open_out(path: &str, append: bool) -> Result<OwnedFd, String> {
    use nix::fcntl::{open, OFlag};
    use nix::sys::stat::Mode;
    let flags = OFlag::O_WRONLY | OFlag::O_CREAT | if append { OFlag::O_APPEND } else { OFlag::O_TRUNC };
    // 0666 under the job's umask, as a shell's `>` creates a file.
    open(raw_path(path).as_path(), flags, Mode::from_bits_truncate(0o666))
        .map_err(|e| format!("cannot open {path}: {e}"))
}

/// Empties `path` (made if missing) unless a node of the same step did already: see
/// `truncate_once_as_user`.
fn empty_once(path: &str, mark: &str, first_node: bool) -> Result<(), String> {
    let fd = nix::fcntl::open(
        raw_path(path).as_path(),
        nix::fcntl::OFlag::O_WRONLY | nix::fcntl::OFlag::O_CREAT | nix::fcntl::OFlag::O_APPEND,
        nix::sys::stat::Mode::from_bits_truncate(0o666),
    )
    .map_err(|e| format!("cannot open {path}: {e}"))?;
    let file = std::fs::File::from(fd);
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        // /dev/null, a terminal, a pipe: nothing to empty.
        return Ok(());
    }
    let lock = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| format!("cannot lock {path}: {e}"))?;
    let name = c"user.drover.step";
    let mut buf = [0u8; 256];
    // SAFETY: fgetxattr writes at most buf.len() bytes into buf.
    let n = unsafe { libc::fgetxattr(lock.as_raw_fd(), name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    let no_xattrs = n < 0 && nix::errno::Errno::last() == nix::errno::Errno::EOPNOTSUPP;
    let seen = n >= 0 && &buf[..n as usize] == mark.as_bytes();
    if seen || (no_xattrs && !first_node) {
        return Ok(());
    }
    lock.set_len(0).map_err(|e| format!("cannot empty {path}: {e}"))?;
    if !no_xattrs {
        // SAFETY: the name and value are valid for the call.
        unsafe {
            libc::fsetxattr(lock.as_raw_fd(), name.as_ptr(), mark.as_ptr().cast(), mark.len(), 0);
        }
    }
    Ok(())
}

fn reset_signals() {
    let all = nix::sys::signal::SigSet::all();
    let _ = nix::sys::signal::sigprocmask(nix::sys::signal::SigmaskHow::SIG_UNBLOCK, Some(&all), None);
    for s in [Signal::SIGCHLD, Signal::SIGHUP, Signal::SIGPIPE, Signal::SIGINT, Signal::SIGTERM] {
        // SAFETY: restoring default dispositions in the child before exec.
        unsafe {
            let _ = nix::sys::signal::signal(s, nix::sys::signal::SigHandler::SigDfl);
        }
    }
}

impl Supervisor<'_> {
    /// `JOB 12` or `STEP 12.0`, as Slurm's cancel and time limit lines name what ends.
    fn unit(&self) -> String {
        match self.step.and_then(|s| s.step.as_ref()) {
            Some(st) => format!("STEP {}.{}", self.job.job_id, st.step_id),
            None => format!("JOB {}", self.job.job_id),
        }
    }

    fn step_spec(&self) -> Option<&v1::StepSpec> {
        self.step.and_then(|s| s.spec.as_ref())
    }

    fn pattern(&self, p: &str, task: Option<u32>) -> String {
        let v = PatternVars {
            job_id: self.job.job_id,
            array_job_id: if self.job.array_job_id != 0 { self.job.array_job_id } else { self.job.job_id },
            array_task_id: self.job.array_task_id,
            job_name: &self.spec.name,
            user: self.user.name.to_str().unwrap_or(""),
            node: &self.node,
            node_index: self.launch.node_index,
            task,
            step: self.step.and_then(|s| s.step.as_ref()).map(|s| s.step_id),
        };
        let s = expand_pattern(p, &v);
        let work = self.step_spec().map_or(self.spec.work_dir.as_str(), |s| s.work_dir.as_str());
        if s.starts_with('/') {
            s
        } else {
            format!("{}/{}", work.trim_end_matches('/'), s)
        }
    }

    fn start_batch(&mut self, dir: &Path, env: Vec<(String, String)>) -> Result<i32, String> {
        let script = dir.join("script");
        std::fs::write(&script, drover_model::bytes::decode(&self.spec.script))
            .map_err(|e| format!("writing script: {e}"))?;
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o700));
        let _ = nix::unistd::chown(
            &script,
            Some(nix::unistd::Uid::from_raw(self.user.uid)),
            Some(nix::unistd::Gid::from_raw(self.user.gid)),
        );
        // The job dir must be traversable by the user to exec the script.
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o711));
        let out = self.pattern(
            self.spec.stdout.as_deref().unwrap_or(drover_model::job::default_output(self.job.array_job_id != 0)),
            None,
        );
        let err = self.spec.stderr.as_deref().map(|e| self.pattern(e, None));
        let inp = self.spec.stdin.as_deref().map(|i| self.pattern(i, None)).unwrap_or_else(|| "/dev/null".into());
        self.stderr_path = Some(PathBuf::from(err.clone().unwrap_or_else(|| out.clone())));
        let append = self.spec.open_mode_append;
        let mut argv = vec![cstr(&script.display().to_string())];
        argv.extend(self.spec.argv.iter().skip(1).map(|a| cstr(a)));
        let mut envc = env_c(&env);
        if !self.launch.task_epilog.is_empty() {
            self.task_env.insert(0, envc.clone());
        }
        let prog = cstr(&script.display().to_string());
        let work = self.spec.work_dir.clone();
        let home = self.user.home.clone();
        // SAFETY: this process is single-threaded; the child only sets up and execs.
        match unsafe { nix::unistd::fork() }.map_err(|e| format!("fork: {e}"))? {
            ForkResult::Child => {
                let _ = nix::unistd::setsid();
                reset_signals();
                join_cgroup(&self.join);
                envc.push(cstr(&format!("SLURM_TASK_PID={}", std::process::id())));
                if let Err(e) = drop_privileges(&self.user) {
                    child_fail(&e);
                }
                let mut note = None;
                if nix::unistd::chdir(raw_path(&work).as_path()).is_err() {
                    note =
                        Some(format!("couldn't chdir to `{work}': No such file or directory: going to /tmp instead"));
                    let _ = nix::unistd::chdir("/tmp");
                }
                let _ = home;
                let o = open_out(&out, append).unwrap_or_else(|e| child_fail(&e));
                let e = match &err {
                    Some(p) if *p != out => open_out(p, append).unwrap_or_else(|e| child_fail(&e)),
                    _ => o.try_clone().unwrap_or_else(|e| child_fail(&e.to_string())),
                };
                let i = nix::fcntl::open(inp.as_str(), nix::fcntl::OFlag::O_RDONLY, nix::sys::stat::Mode::empty())
                    .unwrap_or_else(|e| child_fail(&format!("cannot open {inp}: {e}")));
                let _ = nix::unistd::dup2_stdin(&i);
                let _ = nix::unistd::dup2_stdout(&o);
                let _ = nix::unistd::dup2_stderr(&e);
                if let Some(n) = note {
                    let _ = std::io::stderr().write_all(format!("slurmstepd: error: {n}\n").as_bytes());
                }
                if !self.launch.task_prolog.is_empty() {
                    run_task_prolog(&self.launch.task_prolog, &mut envc);
                }
                let err = nix::unistd::execve(&prog, &argv, &envc).err();
                child_fail(&format!(
                    "execve(): {}: {}",
                    self.spec.name,
                    err.map(|e| e.to_string()).unwrap_or_default()
                ));
            }
            ForkResult::Parent { child } => Ok(child.as_raw()),
        }
    }

    /// Starts this node's tasks of a step. Their output goes to srun over one connection
    /// (the step's `io_addr`), or into the files `srun -o/-e` named.
    fn start_step(&mut self, ctx: &EnvCtx<'_>, sl: &v1::StepLaunch) -> Result<(), String> {
        let spec = sl.spec.as_ref().ok_or("step launch without its request")?;
        let argv: Vec<CString> = spec.argv.iter().map(|a| cstr(a)).collect();
        if argv.is_empty() {
            return Err("nothing to run".into());
        }
        // --multi-prog: each task's program comes from the file srun read.
        let multi = if spec.multi_prog.is_empty() {
            None
        } else {
            Some(
                drover_model::multiprog::MultiProg::parse(&spec.multi_prog, &spec.argv[0], None)
                    .map_err(|e| e.join("; "))?,
            )
        };
        // CPU binding (--cpu-bind, or task/affinity's automatic one) of this node's tasks.
        let binding = {
            use drover_model::cpubind::{bind_node, CpuBind, Topology};
            let shape = self.launch.shape.unwrap_or_default();
            let topo = Topology {
                sockets: shape.sockets.max(1),
                cores_per_socket: shape.cores_per_socket.max(1),
                threads_per_core: shape.threads_per_core.max(1),
            };
            let bind = if spec.cpu_bind.is_empty() { None } else { CpuBind::parse(&spec.cpu_bind).ok() };
            let mut cpus: Vec<u32> = sl
                .step
                .as_ref()
                .and_then(|st| st.nodes.iter().find(|n| n.node == self.node))
                .map(|n| n.cpu_ids.clone())
                .unwrap_or_default();
            cpus.sort_unstable();
            bind_node(bind.as_ref(), shape.task_affinity, topo, &cpus, self.launch.task_ids.len(), spec.cpus_per_task)
                .map_err(|_| "Unable to satisfy cpu bind request".to_string())?
        };
        // srun hears every task's exit status over this connection, and its output unless
        // that goes to files.
        // (No srun: the extern step, whose streams go nowhere.)
        let addr = spec.io_addr.clone();
        if !addr.is_empty() {
            self.io = Some(connect_srun(&addr, &self.launch.io_key, &self.node)?);
        }
        let out_path = |sv: &Self, t: u32| spec.stdout.as_deref().map(|p| sv.pattern(p, Some(t)));
        let err_path = |sv: &Self, t: u32| spec.stderr.as_deref().map(|p| sv.pattern(p, Some(t)));
        let in_path = |sv: &Self, t: u32| spec.stdin.as_deref().map(|p| sv.pattern(p, Some(t)));
        // Several tasks may share a file: it is truncated once, before any of them writes.
        if !spec.open_mode_append {
            let mut files: Vec<String> = Vec::new();
            for &t in &self.launch.task_ids {
                for p in [out_path(self, t), err_path(self, t)].into_iter().flatten() {
                    if !files.contains(&p) {
                        files.push(p);
                    }
                }
            }
            // Once for the whole step, whichever node comes first (files other nodes share).
            let job = self.job;
            let step = sl.step.as_ref().map_or(0, |st| st.step_id);
            let mark = format!("{}:{}.{step}:{}", self.launch.cluster_name, job.job_id, job.start_time);
            self.truncate_once_as_user(&files, Some(&mark))?;
        }
        if let Some(first) = self.launch.task_ids.first() {
            if let Some(p) = err_path(self, *first).or_else(|| out_path(self, *first)) {
                self.stderr_path = Some(PathBuf::from(p));
            }
        }
        // Which streams go where: files, srun (-i/-o/-e modes), or task 0's terminal.
        let err_mode = if spec.error_mode.is_empty() && spec.stderr.is_none() {
            spec.output_mode.as_str()
        } else {
            spec.error_mode.as_str()
        };
        let stream = |file: Option<String>, mode: &str, task: u32| match file {
            _ if spec.pty && task == 0 => Stream::Pty,
            // --pty: the other tasks' output goes nowhere.
            _ if spec.pty => Stream::Null,
            Some(f) => Stream::File(f),
            None if drover_model::step::io_mode_includes(mode, task) => Stream::Pipe,
            None => Stream::Null,
        };
        for (local, &task) in self.launch.task_ids.iter().enumerate() {
            let mut env = step_task_env(ctx, sl, task, local as u32);
            let bound = binding.as_ref().and_then(|b| b.cpus.get(local).cloned().flatten());
            if let Some(b) = &binding {
                env.retain(|(k, _)| !k.starts_with("SLURM_CPU_BIND"));
                env.extend(b.env.iter().cloned());
            }
            let affinity = bound.as_ref().map(|c| {
                let mut set = nix::sched::CpuSet::new();
                for id in crate::cgroup::host_cpu_ids(c) {
                    let _ = set.set(id as usize);
                }
                set
            });
            let mut envc = env_c(&env);
            let task_argv: Option<Vec<CString>> = match &multi {
                None => Some(argv.clone()),
                Some(m) => m.argv_for(task).map(|a| a.iter().chain(&spec.argv[1..]).map(|x| cstr(x)).collect()),
            };
            let out = stream(out_path(self, task), &spec.output_mode, task);
            let err = match stream(err_path(self, task), err_mode, task) {
                // -e not given: stderr goes with stdout, to the same file.
                Stream::Pipe | Stream::Null if spec.stderr.is_none() && matches!(out, Stream::File(_)) => {
                    stream(out_path(self, task), err_mode, task)
                }
                e => e,
            };
            let inp = stream(in_path(self, task), &spec.input_mode, task);
            let pipe = || nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| e.to_string());
            let out_pipe = if matches!(out, Stream::Pipe) { Some(pipe()?) } else { None };
            let err_pipe = if matches!(err, Stream::Pipe) { Some(pipe()?) } else { None };
            let in_pipe = if matches!(inp, Stream::Pipe) { Some(pipe()?) } else { None };
            let pty = if matches!(inp, Stream::Pty) {
                let ws = libc::winsize {
                    ws_row: spec.pty_rows.clamp(1, 1000) as u16,
                    ws_col: spec.pty_cols.clamp(1, 1000) as u16,
                    ws_xpixel: 0,
                    ws_ypixel: 0,
                };
                let p = nix::pty::openpty(Some(&ws), None).map_err(|e| format!("openpty: {e}"))?;
                // The terminal is the user's, as a login's would be.
                let _ = nix::unistd::fchown(
                    &p.slave,
                    Some(nix::unistd::Uid::from_raw(self.user.uid)),
                    Some(nix::unistd::Gid::from_raw(self.user.gid)),
                );
                for fd in [&p.master, &p.slave] {
                    let _ = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC));
                }
                Some(p)
            } else {
                None
            };
            let work = spec.work_dir.clone();
            let user = &self.user;
            let join = &self.join;
            let task_prolog = &self.launch.task_prolog;
            let step_prolog = &spec.task_prolog;
            if !self.launch.task_epilog.is_empty() || !spec.task_epilog.is_empty() {
                self.task_env.insert(task, envc.clone());
            }
            // SAFETY: single-threaded process; the child only sets up and execs.
            match unsafe { nix::unistd::fork() }.map_err(|e| format!("fork: {e}"))? {
                ForkResult::Child => {
                    let _ = nix::unistd::setsid();
                    reset_signals();
                    join_cgroup(join);
                    envc.push(cstr(&format!("SLURM_TASK_PID={}", std::process::id())));
                    if let Some(p) = &pty {
                        // Task 0's controlling terminal, on all three streams.
                        // SAFETY: TIOCSCTTY takes an int argument; the fd is open.
                        unsafe {
                            libc::ioctl(p.slave.as_raw_fd(), libc::TIOCSCTTY, 0);
                        }
                        let _ = nix::unistd::dup2_stdin(&p.slave);
                        let _ = nix::unistd::dup2_stdout(&p.slave);
                        let _ = nix::unistd::dup2_stderr(&p.slave);
                    }
                    if let Some(set) = &affinity {
                        let _ = nix::sched::sched_setaffinity(Pid::from_raw(0), set);
                    }
                    if let Err(e) = drop_privileges(user) {
                        child_fail(&e);
                    }
                    if nix::unistd::chdir(raw_path(&work).as_path()).is_err() {
                        let _ = nix::unistd::chdir("/tmp");
                    }
                    let open_in = |f: &str| {
                        nix::fcntl::open(f, nix::fcntl::OFlag::O_RDONLY, nix::sys::stat::Mode::empty())
                            .unwrap_or_else(|e| child_fail(&format!("cannot open {f}: {e}")))
                    };
                    match (&inp, &in_pipe) {
                        (_, Some((r, _))) => {
                            let _ = nix::unistd::dup2_stdin(r);
                        }
                        (Stream::File(f), _) => {
                            let _ = nix::unistd::dup2_stdin(open_in(f));
                        }
                        (Stream::Pty, _) => {}
                        _ => {
                            let _ = nix::unistd::dup2_stdin(open_in("/dev/null"));
                        }
                    }
                    for (st, p, to_stdout) in [(&out, &out_pipe, true), (&err, &err_pipe, false)] {
                        let target = match (st, p) {
                            (_, Some((_, w))) => Some(w.try_clone().unwrap_or_else(|e| child_fail(&e.to_string()))),
                            (Stream::File(f), _) => Some(open_out(f, true).unwrap_or_else(|e| child_fail(&e))),
                            (Stream::Null, _) => Some(open_out("/dev/null", true).unwrap_or_else(|e| child_fail(&e))),
                            _ => None,
                        };
                        if let Some(t) = target {
                            let _ = if to_stdout { nix::unistd::dup2_stdout(&t) } else { nix::unistd::dup2_stderr(&t) };
                        }
                    }
                    let Some(argv) = &task_argv else {
                        child_fail("No executable program specified for this task");
                    };
                    // slurm.conf's TaskProlog, then srun's --task-prolog.
                    for prolog in [task_prolog, step_prolog] {
                        if !prolog.is_empty() {
                            run_task_prolog(prolog, &mut envc);
                        }
                    }
                    // The program is looked up in the task's own PATH (a venv, conda, `module
                    // load`), as slurmstepd does: execvpe would search this process's.
                    let prog = search_path(&argv[0], &envc).unwrap_or_else(|| argv[0].clone());
                    let err = nix::unistd::execve(&prog, argv, &envc).err();
                    let _ = std::io::stderr().write_all(
                        format!(
                            "slurmstepd: error: execve(): {}: {}\n",
                            argv[0].to_string_lossy(),
                            err.map(|e| e.desc()).unwrap_or("failed")
                        )
                        .as_bytes(),
                    );
                    // SAFETY: _exit in the forked child.
                    unsafe { libc::_exit(2) }
                }
                ForkResult::Parent { child } => {
                    self.main.insert(child.as_raw(), task);
                    if let Some(b) = binding.as_ref().filter(|b| b.verbose) {
                        let mask = drover_model::cpubind::fmt_mask(bound.as_deref().unwrap_or(&[]));
                        let set = if bound.is_some() { " set" } else { "" };
                        self.write_step_stderr(&format!(
                            "cpu-bind={} - {}, task {task:2} {local:2} [{child}]: mask {mask}{set}\n",
                            b.word, self.node
                        ));
                    }
                    for (pipe, kind) in [(out_pipe, drover_proto::io::STDOUT), (err_pipe, drover_proto::io::STDERR)] {
                        if let Some((r, w)) = pipe {
                            drop(w);
                            self.outputs.insert(r.as_raw_fd(), (task, kind, r));
                        }
                    }
                    if let Some((r, w)) = in_pipe {
                        drop(r);
                        set_nonblocking(&w);
                        self.stdin.insert(task, StdinSink { fd: w, pending: Vec::new(), eof: false });
                    }
                    if let Some(p) = pty {
                        drop(p.slave);
                        let m = p.master;
                        let w = m.try_clone().map_err(|e| format!("dup: {e}"))?;
                        set_nonblocking(&w);
                        self.pty = Some(w.try_clone().map_err(|e| format!("dup: {e}"))?);
                        self.stdin.insert(task, StdinSink { fd: w, pending: Vec::new(), eof: false });
                        self.outputs.insert(m.as_raw_fd(), (task, drover_proto::io::STDOUT, m));
                    }
                }
            }
        }
        Ok(())
    }

    /// Creates (or empties) `files` as the job's user, before tasks append to them.
    fn truncate_as_user(&self, files: &[String]) -> Result<(), String> {
        self.truncate_once_as_user(files, None)
    }

    /// As [`Supervisor::truncate_as_user`], for files every node of a step may share (one
    /// `-o FILE` for all tasks): each is emptied once for the whole step, by whichever node
    /// comes first, and never after another node's tasks wrote to it. Under the file's lock,
    /// the first node marks it (`user.drover.step`, this run of this step); the others find the
    /// mark and leave it. Where the file system keeps no extended attributes, only the step's
    /// first node empties it (as before: a late first node may then cut what others wrote).
    fn truncate_once_as_user(&self, files: &[String], step_mark: Option<&str>) -> Result<(), String> {
        if files.is_empty() {
            return Ok(());
        }
        let first_node = self.launch.node_index == 0;
        // SAFETY: single-threaded process; the child only opens files and exits.
        match unsafe { nix::unistd::fork() }.map_err(|e| format!("fork: {e}"))? {
            ForkResult::Child => {
                if drop_privileges(&self.user).is_err() {
                    // SAFETY: _exit in the forked child.
                    unsafe { libc::_exit(1) }
                }
                let _ = nix::unistd::chdir(raw_path(self.step_spec().map_or("/", |s| s.work_dir.as_str())).as_path());
                let mut code = 0;
                for f in files {
                    let r = match step_mark {
                        None => open_out(f, false).map(drop),
                        Some(mark) => empty_once(f, mark, first_node),
                    };
                    if let Err(e) = r {
                        let _ = std::io::stderr().write_all(format!("{e}\n").as_bytes());
                        code = 1;
                    }
                }
                // SAFETY: _exit in the forked child.
                unsafe { libc::_exit(code) }
            }
            ForkResult::Parent { child } => match waitpid(child, None) {
                Ok(WaitStatus::Exited(_, 0)) => Ok(()),
                _ => Err(format!("cannot create the step's output files {}", files.join(", "))),
            },
        }
    }

    /// Every live descendant of this supervisor (the job's whole process tree).
    fn descendants() -> Vec<i32> {
        let me = std::process::id() as i32;
        let mut parent: HashMap<i32, i32> = HashMap::new();
        if let Ok(rd) = std::fs::read_dir("/proc") {
            for e in rd.flatten() {
                let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
                    continue;
                };
                let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                    continue;
                };
                // The command name may hold spaces: fields start after the last ')'.
                let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
                    continue;
                };
                let f: Vec<&str> = rest.split_whitespace().collect();
                if let Some(pp) = f.get(1).and_then(|p| p.parse::<i32>().ok()) {
                    parent.insert(pid, pp);
                }
            }
        }
        let mut out = Vec::new();
        for (&pid, _) in parent.iter() {
            let mut p = pid;
            let mut hops = 0;
            while let Some(&pp) = parent.get(&p) {
                if pp == me {
                    out.push(pid);
                    break;
                }
                p = pp;
                hops += 1;
                if hops > 64 || pp <= 1 {
                    break;
                }
            }
        }
        out
    }

    fn signal_all(&self, sig: Signal) {
        match self.cgroup.as_ref().filter(|g| g.tracks()) {
            // Every process of the step is in its cgroup, whatever session or parent it took:
            // each gets the signal once (a second one a moment later would run a shell's trap
            // twice). A task not yet in it (between its fork and joining) gets it through its
            // process group.
            Some(g) => {
                let members = g.pids();
                for &pid in &members {
                    let _ = kill(Pid::from_raw(pid), sig);
                }
                for &pid in self.main.keys().filter(|p| !members.contains(p)) {
                    let _ = kill(Pid::from_raw(-pid), sig);
                }
            }
            // Without one: the tasks' process groups, then their descendants found by walking
            // /proc (every process's stat: milliseconds on a busy node).
            None => {
                for &pid in self.main.keys() {
                    let _ = kill(Pid::from_raw(-pid), sig);
                }
                for pid in Self::descendants() {
                    let _ = kill(Pid::from_raw(pid), sig);
                }
            }
        }
    }

    fn note_stderr(&self, msg: &str) {
        // A step's line is written once, by the node of its first task, on that task's
        // stderr (srun labels it `0: `).
        let first = self.launch.task_ids.first().copied().unwrap_or(0);
        if self.step.is_some() && first != 0 {
            return;
        }
        self.write_step_stderr(&format!("slurmstepd-{}: error: {msg}\n", self.node));
    }

    /// Writes `line` where the stderr of this node's first task goes (its file, or srun).
    fn write_step_stderr(&self, line: &str) {
        let first = self.launch.task_ids.first().copied().unwrap_or(0);
        if let Some(p) = &self.stderr_path {
            if let Ok(mut f) = std::fs::OpenOptions::new().append(true).open(p) {
                let _ = f.write_all(line.as_bytes());
                return;
            }
        }
        if let Some(io) = self.io.as_ref() {
            let mut io = io;
            let _ = drover_proto::io::write_frame(&mut io, drover_proto::io::STDERR, first, line.as_bytes());
        }
    }

    fn wait_loop(&mut self, wake: &OwnedFd, listener: &UnixListener) -> Result<(), String> {
        // The job's limit (which `scontrol update` may move), and a step's own (`srun -t`)
        // when it ends earlier.
        let mut job_end = self.job.time_limit_secs.map(|t| self.job.start_time + t as i64);
        let mut step_end = self
            .step
            .and_then(|s| s.step.as_ref())
            .and_then(|st| self.step_spec()?.time_limit_secs.map(|t| st.start_time + t as i64));
        let at = |e: i64| Instant::now() + Duration::from_secs((e - now()).max(0) as u64);
        let end_of = |job_end: Option<i64>, step_end: Option<i64>| match (job_end, step_end) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let mut deadline = end_of(job_end, step_end).map(at);
        // --signal=[B:]SIG@secs: the batch shell alone with B:, otherwise every step's tasks
        // but not the batch shell (as in Slurm), that long before the job's end.
        let warn = self
            .spec
            .signal
            .as_deref()
            .and_then(|s| drover_model::signal::SignalSpec::parse(s).ok())
            .filter(|w| w.batch_only == self.step.is_none());
        let warn_time = |job_end: Option<i64>| warn.and_then(|w| job_end.map(|e| at(e - i64::from(w.secs))));
        let mut warn_at = warn_time(job_end);
        let kill_wait = Duration::from_secs(u64::from(self.launch.kill_wait.max(1)));
        let mut kill_at: Option<Instant> = None;
        let mut suspended_at: Option<Instant> = None;
        let mut next_sample = Instant::now() + Duration::from_secs(1);
        let mut buf = [0u8; 65536];
        loop {
            // Reap everything that exited; only our direct children carry the job's result.
            while let Some((pid, status, ru)) = reap_any() {
                self.reaped(pid, status, Some(&ru));
            }
            if self.main.is_empty() && self.outputs.is_empty() && self.helpers.is_empty() {
                // The job is over: nothing of it may outlive it.
                self.signal_all(Signal::SIGKILL);
                if let Some(g) = &self.cgroup {
                    g.kill_all();
                }
                while let Ok(st) = waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
                    if matches!(st, WaitStatus::StillAlive) {
                        break;
                    }
                }
                let ooms = self.cgroup.as_ref().map_or(0, |g| g.oom_kills());
                if ooms > 0 && matches!(self.how.as_str(), "" | "TIMEOUT") {
                    self.how = "OUT_OF_MEMORY".into();
                    let id = match self.step.and_then(|s| s.step.as_ref()) {
                        Some(st) => format!("{}.{}", self.job.job_id, st.step_id),
                        None => format!("{}.batch", self.job.job_id),
                    };
                    // Slurm 22.05's words (task/cgroup's task_cgroup_memory.c).
                    self.note_stderr(&format!(
                        "Detected {ooms} oom-kill event(s) in StepId={id}. Some of your processes may have been \
                         killed by the cgroup out-of-memory handler."
                    ));
                }
                let mut tasks: Vec<(u32, i32)> =
                    self.statuses.iter().filter(|(t, _)| !self.exits_told.contains(t)).map(|(t, s)| (*t, *s)).collect();
                tasks.sort();
                self.tell_exits(&tasks, ooms);
                return Ok(());
            }
            let now_i = Instant::now();
            if let Some(d) = deadline.filter(|_| suspended_at.is_none()) {
                if now_i >= d && self.how.is_empty() {
                    self.how = "TIMEOUT".into();
                    self.note_stderr(&format!(
                        "*** {} ON {} CANCELLED AT {} DUE TO TIME LIMIT ***",
                        self.unit(),
                        self.node,
                        slurm_time(now())
                    ));
                    self.signal_all(Signal::SIGCONT);
                    self.signal_all(Signal::SIGTERM);
                    kill_at = Some(now_i + kill_wait);
                }
            }
            if kill_at.is_some_and(|k| now_i >= k) {
                self.signal_all(Signal::SIGKILL);
            }
            if let (Some(w), Some(t)) = (warn, warn_at.filter(|_| suspended_at.is_none())) {
                if now_i >= t {
                    warn_at = None;
                    if let Ok(sig) = Signal::try_from(w.signal) {
                        if self.step.is_some() {
                            self.signal_all(sig);
                        } else {
                            for &pid in self.main.keys() {
                                let _ = kill(Pid::from_raw(pid), sig);
                            }
                        }
                    }
                }
            }
            if now_i >= next_sample {
                // Peaks between sstat calls are seen too (Slurm samples every 30 s).
                self.sample_usage();
                next_sample = now_i + Duration::from_secs(10);
            }
            let mut timeout = Duration::from_millis(1000);
            for t in [deadline, kill_at, warn_at].into_iter().flatten() {
                if t > now_i {
                    timeout = timeout.min(t - now_i);
                } else {
                    timeout = timeout.min(Duration::from_millis(100));
                }
            }
            use nix::poll::{PollFd, PollFlags};
            let mut fds =
                vec![PollFd::new(wake.as_fd(), PollFlags::POLLIN), PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
            let out_fds: Vec<RawFd> = self.outputs.keys().copied().collect();
            for fd in &out_fds {
                let b = self.outputs[fd].2.as_fd();
                fds.push(PollFd::new(b, PollFlags::POLLIN));
            }
            // srun's stream (stdin, terminal size, or its end), unless a task is behind.
            let backlog = self.stdin.values().any(|s| s.pending.len() >= STDIN_BACKLOG);
            let io_at = fds.len();
            let listen_io = !backlog && self.io.is_some();
            if let Some(io) = self.io.as_ref().filter(|_| listen_io) {
                fds.push(PollFd::new(io.as_fd(), PollFlags::POLLIN));
            }
            let att_at = fds.len();
            let n_att = if backlog { 0 } else { self.attached.len() };
            for (c, _) in self.attached.iter().take(n_att) {
                fds.push(PollFd::new(c.as_fd(), PollFlags::POLLIN));
            }
            let sinks: Vec<u32> = self.stdin.iter().filter(|(_, s)| !s.pending.is_empty()).map(|(t, _)| *t).collect();
            let sinks_at = fds.len();
            for t in &sinks {
                fds.push(PollFd::new(self.stdin[t].fd.as_fd(), PollFlags::POLLOUT));
            }
            let ms = u16::try_from(timeout.as_millis().max(1)).unwrap_or(1000);
            let _ = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(ms));
            let ready: Vec<bool> = fds.iter().map(|f| f.revents().is_some_and(|r| !r.is_empty())).collect();
            drop(fds);
            if listen_io && ready[io_at] {
                self.read_srun();
            }
            for k in (0..n_att).rev() {
                if ready[att_at + k] {
                    self.read_attached(k);
                }
            }
            for (k, t) in sinks.iter().enumerate() {
                if ready[sinks_at + k] {
                    self.feed_stdin(*t);
                }
            }
            if ready[0] {
                let _ = nix::unistd::read(wake, &mut buf);
            }
            if ready[1] {
                while let Ok((mut s, _)) = listener.accept() {
                    let _ = s.set_nonblocking(false);
                    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
                    let mut line = String::new();
                    let _ = s.read_to_string(&mut line);
                    if let Some(rest) = line.trim().strip_prefix("attach ") {
                        // sattach: one more listener for the tasks' I/O, from now on, once it
                        // proved it holds the step's key.
                        let (addr, key) = rest.split_once(' ').unwrap_or((rest, ""));
                        let key = unhex(key);
                        if let Ok(mut c) = connect_srun(addr, &key, &self.node) {
                            let replay = self
                                .history
                                .iter()
                                .all(|(t, k, d)| drover_proto::io::write_frame(&mut c, *k, *t, d).is_ok());
                            if replay {
                                self.attached.push((c, Vec::new()));
                            }
                        }
                        continue;
                    }
                    if line.trim() == "stat" {
                        // sstat: what the tasks use now, answered on the same connection.
                        self.sample_usage();
                        let _ = s.write_all(&self.stat_reply().encode_to_vec());
                        continue;
                    }
                    if let Some(end) = line.trim().strip_prefix("limit ").and_then(|e| e.parse::<i64>().ok()) {
                        // The job's time limit changed: re-arm (a signal already sent stays sent).
                        job_end = (end > 0).then_some(end);
                        if self.how.is_empty() {
                            deadline = end_of(job_end, step_end).map(at);
                        }
                        if warn_at.is_some()
                            || warn.is_some_and(|w| job_end.is_some_and(|e| e - i64::from(w.secs) > now()))
                        {
                            warn_at = warn_time(job_end);
                        }
                        continue;
                    }
                    match line.trim() {
                        // scontrol suspend: everything stops; its time limit waits with it.
                        "suspend" => {
                            if suspended_at.is_none() && self.how.is_empty() {
                                self.signal_all(Signal::SIGSTOP);
                                suspended_at = Some(Instant::now());
                            }
                            continue;
                        }
                        "resume" => {
                            if let Some(at) = suspended_at.take() {
                                let d = at.elapsed();
                                deadline = deadline.map(|x| x + d);
                                warn_at = warn_at.map(|x| x + d);
                                let secs = d.as_secs_f64().round() as i64;
                                job_end = job_end.map(|e| e + secs);
                                step_end = step_end.map(|e| e + secs);
                                self.signal_all(Signal::SIGCONT);
                            }
                            continue;
                        }
                        _ => {}
                    }
                    if let Some(k) = self.command(line.trim()) {
                        // Ending a suspended job: it must run to hear its signals.
                        if suspended_at.take().is_some() {
                            self.signal_all(Signal::SIGCONT);
                        }
                        kill_at = Some(Instant::now() + kill_wait.min(k));
                    }
                }
            }
            for (k, fd) in out_fds.iter().enumerate() {
                if !ready[k + 2] {
                    continue;
                }
                let (task, kind) = {
                    let e = &self.outputs[fd];
                    (e.0, e.1)
                };
                match nix::unistd::read(&self.outputs[fd].2, &mut buf) {
                    Ok(0) | Err(_) => {
                        self.outputs.remove(fd);
                    }
                    Ok(n) => {
                        // sattach listeners that went away are dropped.
                        self.attached
                            .retain_mut(|(c, _)| drover_proto::io::write_frame(c, kind, task, &buf[..n]).is_ok());
                        if self.step.is_some() {
                            self.history.push_back((task, kind, buf[..n].to_vec()));
                            self.history_bytes += n;
                            while self.history_bytes > HISTORY {
                                match self.history.pop_front() {
                                    Some((_, _, d)) => self.history_bytes -= d.len(),
                                    None => break,
                                }
                            }
                        }
                        if let Some(io) = self.io.as_mut() {
                            if drover_proto::io::write_frame(io, kind, task, &buf[..n]).is_err() {
                                // srun is gone: the step goes with it.
                                self.io = None;
                                if self.how.is_empty() {
                                    self.how = "CANCELLED".into();
                                }
                                self.signal_all(Signal::SIGKILL);
                            }
                        }
                    }
                }
            }
        }
    }

    /// Samples the tasks' processes and folds it into what each task has used.
    fn sample_usage(&mut self) {
        for (task, now) in crate::usage::sample(&self.main) {
            crate::usage::fold(self.usage.entry(task).or_default(), &now);
        }
        // With one task here, the step's cgroup counts its CPU time exactly, processes that
        // left its tree or ended included. (Its memory peak counts page cache too, so RSS
        // stays /proc's, as Slurm's jobacct_gather/linux reports it.)
        if let (Some(g), [task]) = (&self.cgroup, self.launch.task_ids.as_slice()) {
            if let Some(cpu) = g.cpu_secs() {
                let u = self.usage.entry(*task).or_default();
                u.cpu_secs = u.cpu_secs.max(cpu);
            }
        }
    }

    fn stat_reply(&self) -> v1::StatReply {
        let tasks = self
            .usage
            .iter()
            .map(|(&task, u)| v1::TaskUsage {
                task,
                node: self.node.clone(),
                max_rss_kb: u.rss_kb,
                max_vmsize_kb: u.vmsize_kb,
                pages: u.pages,
                cpu_secs: u.cpu_secs,
                user_secs: u.user_secs,
                sys_secs: u.sys_secs,
                read_bytes: u.read_bytes,
                write_bytes: u.write_bytes,
                pids: u.pids.clone(),
            })
            .collect();
        v1::StatReply { req_id: 0, tasks }
    }

    /// What srun sent: stdin for tasks, a terminal size; its end means srun is gone.
    fn read_srun(&mut self) {
        let Some(io) = self.io.as_ref() else { return };
        let Some(frames) = read_frames(io, &mut self.io_in) else {
            // srun is gone: the step goes with it.
            self.io = None;
            if self.how.is_empty() {
                self.how = "CANCELLED".into();
            }
            self.signal_all(Signal::SIGKILL);
            return;
        };
        for f in frames {
            match f.kind {
                drover_proto::io::STDIN => self.give_stdin(f.task, &f.data, true),
                drover_proto::io::WINSIZE if f.data.len() == 4 => {
                    if let Some(m) = &self.pty {
                        let rows = u16::from_be_bytes([f.data[0], f.data[1]]);
                        let cols = u16::from_be_bytes([f.data[2], f.data[3]]);
                        // The kernel tells the terminal's foreground processes (SIGWINCH).
                        set_winsize(m, rows, cols);
                    }
                }
                _ => {}
            }
        }
    }

    /// Input from a sattach listener: its stdin for the tasks (its end of input leaves theirs
    /// open: srun's is the one that closes it); its end detaches it.
    fn read_attached(&mut self, k: usize) {
        let (conn, pending) = &mut self.attached[k];
        let Some(frames) = read_frames(conn, pending) else {
            self.attached.remove(k);
            return;
        };
        for f in frames.into_iter().filter(|f| f.kind == drover_proto::io::STDIN) {
            self.give_stdin(f.task, &f.data, false);
        }
    }

    /// Bytes for a task's stdin (empty: srun's end of input, which closes it when `may_close`).
    fn give_stdin(&mut self, task: u32, data: &[u8], may_close: bool) {
        let Some(sink) = self.stdin.get_mut(&task) else { return };
        if data.is_empty() {
            if !may_close {
                return;
            }
            sink.eof = true;
        } else {
            sink.pending.extend_from_slice(data);
        }
        self.feed_stdin(task);
    }

    /// Writes what a task's stdin can take now; closes it at srun's end of input, or when
    /// the task no longer reads it.
    fn feed_stdin(&mut self, task: u32) {
        let Some(sink) = self.stdin.get_mut(&task) else { return };
        while !sink.pending.is_empty() {
            match nix::unistd::write(&sink.fd, &sink.pending) {
                Ok(n) => {
                    sink.pending.drain(..n);
                }
                Err(nix::errno::Errno::EAGAIN) => return,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(_) => {
                    self.stdin.remove(&task);
                    return;
                }
            }
        }
        if sink.eof {
            if self.pty.is_some() && task == 0 {
                // A terminal has no end of file: ^D at the start of a line is one.
                let _ = nix::unistd::write(&sink.fd, &[4u8]);
            }
            self.stdin.remove(&task);
        }
    }

    /// Tells srun and sattach how tasks ended (a task the OOM killer ended as such: `Out Of
    /// Memory`), as slurmstepd sends its task exit messages.
    fn tell_exits(&mut self, tasks: &[(u32, i32)], ooms: u64) {
        for (c, _) in self.attached.iter_mut() {
            for (t, s) in tasks {
                let _ = drover_proto::io::write_frame(c, drover_proto::io::EXIT, *t, &s.to_be_bytes());
            }
        }
        if let Some(io) = self.io.as_mut() {
            for (t, s) in tasks {
                if ooms > 0 && *s & 0x7f == Signal::SIGKILL as i32 {
                    let _ = drover_proto::io::write_frame(io, drover_proto::io::OOM, *t, &[]);
                }
                let _ = drover_proto::io::write_frame(io, drover_proto::io::EXIT, *t, &s.to_be_bytes());
            }
            let _ = io.flush();
        }
        self.exits_told.extend(tasks.iter().map(|(t, _)| *t));
    }

    fn reaped(&mut self, pid: i32, status: i32, ru: Option<&libc::rusage>) {
        self.helpers.remove(&pid);
        if let Some(task) = self.main.remove(&pid) {
            self.statuses.insert(task, status);
            // srun hears of each task's end as it happens (its --wait, its error lines); a
            // task killed by SIGKILL, perhaps by the OOM killer, at the step's end, after the
            // step's word on OOM kills.
            if self.step.is_some() && status & 0x7f != Signal::SIGKILL as i32 {
                self.tell_exits(&[(task, status)], 0);
            }
            if let Some(ru) = ru {
                crate::usage::fold_rusage(self.usage.entry(task).or_default(), ru);
            }
            if let Some(env) = self.task_env.remove(&task) {
                self.start_task_epilog(env);
            }
            // --kill-on-bad-exit: one failed task ends the others here (srun ends the
            // step on the other nodes).
            if status != 0 && self.step_spec().is_some_and(|s| s.kill_on_bad_exit) {
                self.signal_all(Signal::SIGKILL);
            }
        }
    }

    /// The epilogs of a task that ended, as the user, with the task's environment: srun's
    /// `--task-epilog`, then slurm.conf's `TaskEpilog`; the step ends once they have run.
    fn start_task_epilog(&mut self, env: Vec<CString>) {
        let step_epilog = self.step_spec().map(|s| s.task_epilog.clone()).unwrap_or_default();
        let user = (!step_epilog.is_empty()).then(|| cstr(&step_epilog));
        let conf = (!self.launch.task_epilog.is_empty()).then(|| cstr(&self.launch.task_epilog));
        if user.is_none() && conf.is_none() {
            return;
        }
        let work = self.step_spec().map_or(self.spec.work_dir.clone(), |s| s.work_dir.clone());
        // SAFETY: single-threaded process; the child only sets up and execs.
        match unsafe { nix::unistd::fork() } {
            Ok(ForkResult::Child) => {
                let _ = nix::unistd::setsid();
                reset_signals();
                join_cgroup(&self.join);
                if let Err(e) = drop_privileges(&self.user) {
                    child_fail(&e);
                }
                if nix::unistd::chdir(raw_path(&work).as_path()).is_err() {
                    let _ = nix::unistd::chdir("/tmp");
                }
                if let Ok(null) = open_out("/dev/null", true) {
                    let _ = nix::unistd::dup2_stdin(&null);
                    let _ = nix::unistd::dup2_stdout(&null);
                }
                // srun's --task-epilog first, given five seconds as slurmstepd gives it (then
                // killed with what it started); slurm.conf's TaskEpilog then replaces this
                // child, without a limit.
                if let Some(first) = &user {
                    // SAFETY: single-threaded child; the grandchild only execs.
                    match unsafe { nix::unistd::fork() } {
                        Ok(ForkResult::Child) => {
                            let _ = nix::unistd::setpgid(Pid::from_raw(0), Pid::from_raw(0));
                            let _ = nix::unistd::execve(first, std::slice::from_ref(first), &env);
                            // SAFETY: _exit in the forked child.
                            unsafe { libc::_exit(127) }
                        }
                        Ok(ForkResult::Parent { child }) => {
                            let until = Instant::now() + Duration::from_secs(5);
                            while matches!(waitpid(child, Some(WaitPidFlag::WNOHANG)), Ok(WaitStatus::StillAlive)) {
                                if Instant::now() >= until {
                                    let _ = nix::sys::signal::killpg(child, Signal::SIGKILL);
                                    let _ = waitpid(child, None);
                                    break;
                                }
                                std::thread::sleep(Duration::from_millis(50));
                            }
                        }
                        Err(_) => {}
                    }
                }
                if let Some(last) = &conf {
                    let _ = nix::unistd::execve(last, std::slice::from_ref(last), &env);
                    // SAFETY: _exit in the forked child.
                    unsafe { libc::_exit(127) }
                }
                // SAFETY: _exit in the forked child.
                unsafe { libc::_exit(0) }
            }
            Ok(ForkResult::Parent { child }) => {
                self.helpers.insert(child.as_raw());
            }
            Err(_) => {}
        }
    }

    /// Handles an agent request; returns a kill-wait to arm when it asks for termination.
    fn command(&mut self, line: &str) -> Option<Duration> {
        let mut it = line.split_whitespace();
        match it.next() {
            Some("term") => {
                if self.how.is_empty() {
                    let requeue = it.next() == Some("requeue");
                    self.how = if requeue { "REQUEUE".into() } else { "CANCELLED".into() };
                    let why = if requeue { " DUE TO JOB REQUEUE" } else { "" };
                    self.note_stderr(&format!(
                        "*** {} ON {} CANCELLED AT {}{why} ***",
                        self.unit(),
                        self.node,
                        slurm_time(now())
                    ));
                }
                self.signal_all(Signal::SIGCONT);
                self.signal_all(Signal::SIGTERM);
                Some(Duration::from_secs(u64::from(self.launch.kill_wait.max(1))))
            }
            Some("kill") => {
                // A cancelled step is killed at once.
                if self.how.is_empty() {
                    self.how = "CANCELLED".into();
                    self.note_stderr(&format!(
                        "*** {} ON {} CANCELLED AT {} ***",
                        self.unit(),
                        self.node,
                        slurm_time(now())
                    ));
                }
                self.signal_all(Signal::SIGKILL);
                None
            }
            Some("sig") => {
                let sig = it.next().and_then(|s| s.parse::<i32>().ok()).and_then(|s| Signal::try_from(s).ok());
                let batch_only = it.next() == Some("batch");
                if let Some(sig) = sig {
                    if batch_only {
                        for &pid in self.main.keys() {
                            let _ = kill(Pid::from_raw(pid), sig);
                        }
                    } else {
                        self.signal_all(sig);
                    }
                }
                None
            }
            _ => None,
        }
    }
}
