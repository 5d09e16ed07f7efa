//! `drover up`: a whole cluster on this machine — a controller and N node agents as real
//! processes on loopback, a generated `slurm.conf`, and the command links. `drover down`
//! stops it. State lives in one directory, so a restart finds every job again.

use crate::common;
use clap::Parser;
use drover_proto::v1;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(name = "drover up", disable_version_flag = true)]
pub struct UpArgs {
    /// Number of node agents (node1..nodeN).
    #[arg(long, default_value_t = 4)]
    pub nodes: u32,
    /// CPUs per node (default: this machine's CPUs divided among the nodes, at least 2).
    #[arg(long)]
    pub cpus_per_node: Option<u32>,
    /// Memory per node in MB (default: this machine's memory divided among the nodes).
    #[arg(long)]
    pub mem_per_node: Option<String>,
    /// Fake GPUs per node (`Gres=gpu:fake:N`; gres.conf names /dev/null, as Slurm learners
    /// write it): the whole GPU request flow without GPUs.
    #[arg(long, default_value_t = 0)]
    pub gpus_per_node: u32,
    /// Partitions as NAME[=NODES] (comma separated; the first is the default).
    #[arg(long, default_value = "debug")]
    pub partition: String,
    /// Where the cluster keeps its config, state, logs and links.
    #[arg(long)]
    pub state_dir: Option<PathBuf>,
    /// Controller port (default: a free loopback port).
    #[arg(long)]
    pub port: Option<u16>,
    #[arg(long, default_value = "drover")]
    pub cluster_name: String,
    /// Return once the cluster answers instead of running until Ctrl-C.
    #[arg(long)]
    pub detach: bool,
    /// No accounting (no `drover accounting`, no sacct): `AccountingStorageType` is left out.
    #[arg(long)]
    pub no_accounting: bool,
    /// How the cluster's processes prove who they are: `slurm` (tokens signed with
    /// `slurm.key`, no daemon) or `munge` (a `munged` of the cluster's own, started and
    /// stopped with it; needs Debian's `munge`).
    #[arg(long, value_enum, default_value_t = UpAuth::Slurm)]
    pub auth: UpAuth,
    /// Jobs are not held to their cores, memory and devices (no `cgroup.conf` is written;
    /// their processes are still tracked and killed with them).
    #[arg(long)]
    pub no_confine: bool,
    /// Controllers sharing the state directory, as Slurm's several `SlurmctldHost` lines
    /// (ctl1 on 127.0.0.1 is the primary, ctl2 on 127.0.0.2 backs it up, ...): kill the one
    /// in control and another takes over once its lease (`SlurmctldTimeout`, 3 s) runs out.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=9))]
    pub controllers: u32,
}

/// The controllers of a local cluster: (`--host` name, pid file, log), the primary first.
fn controllers_of(cfg: &drover_model::conf::Config) -> Vec<(Option<String>, String, String)> {
    if !cfg.controller_failover() {
        return vec![(None, "controller.pid".into(), "controller.log".into())];
    }
    cfg.controller_hosts
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let pid = if i == 0 { "controller.pid".to_string() } else { format!("controller-{}.pid", h.name) };
            (Some(h.name.clone()), pid, format!("controller-{}.log", h.name))
        })
        .collect()
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpAuth {
    Slurm,
    Munge,
}

impl UpAuth {
    /// The authentication lines of a local cluster's `slurm.conf` or `slurmdbd.conf`.
    fn conf_lines(self, dir: &Path, cred: bool) -> String {
        let me = nix::unistd::geteuid();
        let name = nix::unistd::User::from_uid(me).ok().flatten().map(|u| u.name);
        let lines = self.auth_lines(dir, cred);
        format!("{lines}{}", slurm_user_line(me.as_raw(), name.as_deref()))
    }

    fn auth_lines(self, dir: &Path, cred: bool) -> String {
        match self {
            UpAuth::Slurm => format!(
                "# Every connection proves who made it with a token signed by slurm.key (beside this\n\
                 # file, readable by its owner only){}.\nAuthType=auth/slurm\n{}",
                if cred { "; launches are signed with it too" } else { "" },
                if cred { "CredType=cred/slurm\n" } else { "" }
            ),
            UpAuth::Munge => format!(
                "# Every connection proves who made it with a MUNGE credential of the cluster's own\n\
                 # munged (started by drover up){}.\nAuthType=auth/munge\n{}AuthInfo=socket={}\n",
                if cred { "; launches are signed with it too" } else { "" },
                if cred { "CredType=cred/munge\n" } else { "" },
                munge_socket(dir).display()
            ),
        }
    }
}

/// A local cluster's daemons run as whoever ran `drover up`: where that is not root, they are
/// `SlurmUser` (whom the cluster's commands trust to answer for it, and seal their MUNGE
/// credentials to).
fn slurm_user_line(uid: u32, name: Option<&str>) -> String {
    match name {
        Some(n) if uid != 0 => format!("# The daemons run as you.\nSlurmUser={n}\n"),
        _ => String::new(),
    }
}

/// Where a local cluster's munged listens.
fn munge_socket(dir: &Path) -> PathBuf {
    dir.join("run/munge.socket")
}

#[derive(Parser, Debug)]
#[command(name = "drover down")]
pub struct DownArgs {
    #[arg(long)]
    pub state_dir: Option<PathBuf>,
}

pub fn default_state_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("DROVER_STATE_DIR") {
        return PathBuf::from(d);
    }
    let base = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    base.join("drover/cluster")
}

fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("cannot find a free port: {e}"))?;
    l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

fn machine_mem_mb() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("MemTotal:").and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            })
        })
        .map(|kb| kb / 1024)
        .unwrap_or(4096)
}

/// A local cluster's `cgroup.conf`: each job held to its cores, memory and devices.
const LOCAL_CGROUP_CONF: &str = "# Generated by `drover up`: jobs are held to what they were given.\n\
     ConstrainCores=yes\n\
     ConstrainRAMSpace=yes\n\
     ConstrainDevices=yes\n";

/// `drover up --no-confine`'s: processes tracked, nothing constrained.
const LOCAL_CGROUP_CONF_OFF: &str =
    "# Generated by `drover up --no-confine`: jobs are not held to what they were given.\n\
     ConstrainCores=no\n\
     ConstrainRAMSpace=no\n\
     ConstrainDevices=no\n";

/// The `slurmdbd.conf` of a local cluster's accounting: SQLite in its state directory.
pub fn local_dbd_conf(dir: &Path, port: u16, auth: UpAuth) -> String {
    let d = dir.display();
    format!(
        "# Generated by `drover up`: the cluster's accounting (sacct) on SQLite, no setup.\n\
         DbdAddr=127.0.0.1\n\
         DbdPort={port}\n\
         {auth}\
         StorageType=accounting_storage/sqlite\n\
         StorageLoc={d}/state/accounting.db\n\
         LogFile={d}/log/accounting.log\n",
        auth = auth.conf_lines(dir, false)
    )
}

/// The `slurm.conf` of a local cluster (`dbd_port`: where its accounting listens).
pub fn local_conf(a: &UpArgs, dir: &Path, port: u16, dbd_port: u16) -> Result<String, String> {
    let cpus = a.cpus_per_node.unwrap_or_else(|| {
        let n = std::thread::available_parallelism().map(|n| n.get() as u32).unwrap_or(2);
        (n / a.nodes.max(1)).max(2)
    });
    let mem = match &a.mem_per_node {
        Some(m) => drover_model::memsize::parse_mb(m).map_err(|e| e.to_string())?,
        None => (machine_mem_mb() / u64::from(a.nodes.max(1))).max(256),
    };
    if a.nodes == 0 {
        return Err("--nodes must be at least 1".into());
    }
    let d = dir.display();
    // One controller, or a primary and its standbys on loopback addresses of their own;
    // they share StateSaveLocation and log to files of their own.
    let (controllers, ctld_log) = if a.controllers <= 1 {
        ("SlurmctldHost=localhost(127.0.0.1)\n".to_string(), format!("SlurmctldLogFile={d}/log/controller.log\n"))
    } else {
        let hosts: String = (1..=a.controllers).map(|i| format!("SlurmctldHost=ctl{i}(127.0.0.{i})\n")).collect();
        (
            format!(
                "# Controllers that back each other up: the first in control, the others take over\n\
                 # when its lease on StateSaveLocation is not renewed for SlurmctldTimeout.\n{hosts}SlurmctldTimeout=3\n"
            ),
            String::new(),
        )
    };
    let nodes = format!("node[1-{}]", a.nodes);
    let (gres_types, gres) = if a.gpus_per_node > 0 {
        ("GresTypes=gpu\n".to_string(), format!(" Gres=gpu:fake:{}", a.gpus_per_node))
    } else {
        (String::new(), String::new())
    };
    let mut parts = String::new();
    for (i, p) in a.partition.split(',').filter(|p| !p.is_empty()).enumerate() {
        let (name, members) = match p.split_once('=') {
            Some((n, m)) => (n, m.to_string()),
            None => (p, nodes.clone()),
        };
        parts.push_str(&format!(
            "PartitionName={name} Nodes={members} Default={} MaxTime=INFINITE State=UP\n",
            if i == 0 { "YES" } else { "NO" }
        ));
    }
    Ok(format!(
        "# Generated by `drover up`. Edit and restart (`drover down; drover up`) to change the cluster.\n\
         ClusterName={cluster}\n\
         {controllers}\
         SlurmctldPort={port}\n\
         {auth}\
         StateSaveLocation={d}/state\n\
         SlurmdSpoolDir={d}/spool/%n\n\
         {ctld_log}\
         SlurmdLogFile={d}/log/node-%n.log\n\
         SlurmdTimeout=30\n\
         KillWait=5\n\
         MinJobAge=300\n\
         ReturnToService=2\n\
         MaxJobCount=1000000\n\
         MaxArraySize=1000001\n\
         # Jobs are confined as SchedMD recommends for production (and cgroup.conf beside\n\
         # this file): their cores, their memory, their GPUs.\n\
         SelectType=select/cons_tres\n\
         SelectTypeParameters=CR_Core_Memory\n\
         ProctrackType=proctrack/cgroup\n\
         TaskPlugin=task/cgroup,task/affinity\n\
         {accounting}\
         {gres_types}\
         NodeName={nodes} NodeHostname=localhost NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={mem}{gres} State=UNKNOWN\n\
         {parts}",
        cluster = a.cluster_name,
        auth = a.auth.conf_lines(dir, true),
        accounting = if a.no_accounting {
            String::new()
        } else {
            format!(
                "AccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageHost=127.0.0.1\n\
                 AccountingStoragePort={dbd_port}\n"
            )
        },
    ))
}

fn say(msg: &str) {
    eprintln!("drover: {msg}");
}

pub(crate) fn spawn_daemon(exe: &Path, args: &[&str], log: &Path, pidfile: &Path) -> Result<u32, String> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("{}: {e}", log.display()))?;
    let mut cmd = Command::new(exe);
    cmd.args(args).stdin(Stdio::null()).stdout(f.try_clone().map_err(|e| e.to_string())?).stderr(f);
    use std::os::unix::process::CommandExt;
    // SAFETY: setsid(2) is async-signal-safe; the daemons must not die with this terminal.
    unsafe {
        cmd.pre_exec(|| nix::unistd::setsid().map(|_| ()).map_err(std::io::Error::from));
    }
    let child = cmd.spawn().map_err(|e| format!("starting {}: {e}", args.join(" ")))?;
    std::fs::write(pidfile, child.id().to_string()).map_err(|e| e.to_string())?;
    let id = child.id();
    // Reap the daemon if it exits while we run.
    std::thread::spawn(move || {
        let mut child = child;
        let _ = child.wait();
    });
    Ok(id)
}

fn alive(pid: u32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), None).is_ok()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| s.rsplit_once(')').is_some_and(|(_, r)| r.trim_start().starts_with('Z')))
}

fn read_pid(p: &Path) -> Option<u32> {
    std::fs::read_to_string(p).ok()?.trim().parse().ok()
}

/// The pid in `pidfile` if that process runs and is this cluster's (its command line names
/// `conf`): a pid the kernel gave to something else since is no daemon of ours.
fn running(pidfile: &Path, conf: &str) -> Option<u32> {
    let pid = read_pid(pidfile)?;
    (alive(pid) && cmdline(pid).iter().any(|a| a == conf)).then_some(pid)
}

fn cmdline(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| c.split(|b| *b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect())
        .unwrap_or_default()
}

/// The daemons of the cluster in `dir` that do not run (by their pid files).
fn missing_daemons(dir: &Path) -> Vec<String> {
    let conf = dir.join("slurm.conf");
    let Ok(cfg) = drover_model::conf::parse_file(&conf) else { return vec!["everything".into()] };
    let conf_s = conf.display().to_string();
    let mut missing = Vec::new();
    for (host, pid, _) in controllers_of(&cfg) {
        if running(&dir.join("run").join(pid), &conf_s).is_none() {
            missing.push(host.unwrap_or_else(|| "controller".into()));
        }
    }
    let dbd = dir.join("slurmdbd.conf");
    if cfg.accounting_storage.is_some()
        && dbd.exists()
        && running(&dir.join("run/accounting.pid"), &dbd.display().to_string()).is_none()
    {
        missing.push("accounting".into());
    }
    for n in &cfg.nodes {
        if running(&dir.join(format!("run/node-{}.pid", n.name)), &conf_s).is_none() {
            missing.push(n.name.clone());
        }
    }
    missing
}

/// Daemons of the cluster in `dir` that no pid file names (left by an older `drover up`
/// that started a second set): every `drover` process whose command line names its
/// `slurm.conf` or `slurmdbd.conf`.
fn strays(dir: &Path) -> Vec<u32> {
    let confs = [dir.join("slurm.conf").display().to_string(), dir.join("slurmdbd.conf").display().to_string()];
    let me = std::process::id();
    let Ok(rd) = std::fs::read_dir("/proc") else { return Vec::new() };
    rd.flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|&pid| pid != me)
        .filter(|&pid| {
            let c = cmdline(pid);
            c.iter().any(|a| confs.contains(a))
                && c.iter().any(|a| matches!(a.as_str(), "node" | "controller" | "accounting"))
        })
        .collect()
}

/// Creates `sbatch`, `squeue`, ... links to this binary in `dir`.
pub fn install_links(dir: &Path) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let real = std::fs::canonicalize(&exe).unwrap_or_else(|_| exe.clone());
    for c in crate::COMMANDS.iter().map(|(name, _)| name).chain(["drover"].iter()) {
        let link = dir.join(c);
        // The binary itself may live there (a test cluster's own copy): left as it is.
        if std::fs::canonicalize(&link).is_ok_and(|l| l == real)
            && std::fs::symlink_metadata(&link).is_ok_and(|m| !m.is_symlink())
        {
            continue;
        }
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&exe, &link).map_err(|e| format!("{}: {e}", link.display()))?;
    }
    Ok(())
}

pub fn up(a: UpArgs) -> i32 {
    match up_inner(a) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("drover up: error: {e}");
            1
        }
    }
}

fn up_inner(a: UpArgs) -> Result<i32, String> {
    let cfg = start_detached(&a)?;
    let dir = PathBuf::from(&cfg.path).parent().map(Path::to_path_buf).unwrap_or_default();
    if a.detach {
        return Ok(0);
    }
    say("running; Ctrl-C stops the cluster");
    common::runtime().block_on(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending::<()>().await } } => {}
        }
    });
    stop_dir(&dir);
    Ok(0)
}

/// Writes (or reuses) the config, starts the controller and agents, waits until every node is
/// up, and prints the line that puts the commands on `PATH`.
pub fn start_detached(a: &UpArgs) -> Result<drover_model::conf::Config, String> {
    let dir = a.state_dir.clone().unwrap_or_else(default_state_dir);
    for sub in ["state", "spool", "log", "run", "bin"] {
        std::fs::create_dir_all(dir.join(sub))
            .map_err(|e| format!("cannot create {}: {e}", dir.join(sub).display()))?;
    }
    let dir = std::fs::canonicalize(&dir).map_err(|e| e.to_string())?;
    let conf = dir.join("slurm.conf");
    if conf.exists() && missing_daemons(&dir).is_empty() {
        let pid = read_pid(&dir.join("run/controller.pid")).unwrap_or_default();
        return Err(format!(
            "a cluster is already running from {} (pid {pid}); `drover down --state-dir {}` stops it",
            dir.display(),
            dir.display()
        ));
    }
    if conf.exists() {
        say(&format!("reusing {} (delete it to start over)", conf.display()));
    } else {
        let port = match a.port {
            Some(p) => p,
            None => free_port()?,
        };
        let dbd_port = free_port()?;
        std::fs::write(&conf, local_conf(a, &dir, port, dbd_port)?).map_err(|e| e.to_string())?;
        say(&format!("wrote {}", conf.display()));
        if !a.no_accounting {
            let dbd = dir.join("slurmdbd.conf");
            std::fs::write(&dbd, local_dbd_conf(&dir, dbd_port, a.auth))
                .map_err(|e| format!("{}: {e}", dbd.display()))?;
        }
        let cgroup = dir.join("cgroup.conf");
        let text = if a.no_confine { LOCAL_CGROUP_CONF_OFF } else { LOCAL_CGROUP_CONF };
        std::fs::write(&cgroup, text).map_err(|e| format!("{}: {e}", cgroup.display()))?;
        if a.gpus_per_node > 0 {
            let gres = dir.join("gres.conf");
            std::fs::write(&gres, "# Generated by `drover up --gpus-per-node`: fake GPUs, no devices.\nName=gpu Type=fake File=/dev/null\n")
                .map_err(|e| format!("{}: {e}", gres.display()))?;
        }
    }
    upgrade_auth(&conf, "AuthType=auth/slurm\nCredType=cred/slurm\n")?;
    let dbd = dir.join("slurmdbd.conf");
    if dbd.exists() {
        upgrade_auth(&dbd, "AuthType=auth/slurm\n")?;
    }
    ensure_key(&dir.join("slurm.key"))?;
    // A cluster an earlier `drover up` made, before it confined jobs, is confined from now on.
    let cgroup = dir.join("cgroup.conf");
    let ours = std::fs::read_to_string(&conf).is_ok_and(|t| t.starts_with("# Generated by `drover up`"));
    if ours && !cgroup.exists() {
        std::fs::write(&cgroup, LOCAL_CGROUP_CONF).map_err(|e| format!("{}: {e}", cgroup.display()))?;
        say(&format!("wrote {}: jobs are held to their cores, memory and devices", cgroup.display()));
    }
    let cfg = drover_model::conf::parse_file(&conf).map_err(|e| e.to_string())?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let conf_s = conf.display().to_string();
    if cfg.auth.kind == drover_model::auth_conf::AuthKind::Munge
        && cfg.auth.munge_socket.as_deref() == Some(&*munge_socket(&dir).to_string_lossy())
    {
        start_munged(&dir)?;
    }
    // A cluster found partly running (its controller killed, say) gets only what is missing:
    // a second agent for a node would fight the first for its session.
    // (what, role, its configuration, its log, its pid file)
    let mut singles: Vec<(String, Vec<String>, String, String)> = Vec::new();
    if cfg.accounting_storage.is_some() && dbd.exists() {
        let args = vec!["accounting".into(), "-f".into(), dbd.display().to_string()];
        singles.push(("accounting (SQLite)".into(), args, "accounting.out".into(), "accounting.pid".into()));
    }
    for (host, pid, log) in controllers_of(&cfg) {
        let mut args = vec!["controller".to_string(), "-f".into(), conf_s.clone()];
        let what = match host {
            Some(h) => {
                args.extend(["--host".to_string(), h.clone()]);
                format!("the controller {h}")
            }
            None => "the controller".into(),
        };
        singles.push((what, args, log, pid));
    }
    for (what, args, log, pid) in singles {
        match running(&dir.join("run").join(&pid), &args[2]) {
            Some(p) => say(&format!("{} runs (pid {p}): kept", what.trim_end_matches(" (SQLite)"))),
            None => {
                say(&format!("starting {what}"));
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                spawn_daemon(&exe, &args, &dir.join("log").join(log), &dir.join("run").join(pid))?;
            }
        }
    }
    let (kept, start): (Vec<&str>, Vec<&str>) = cfg
        .nodes
        .iter()
        .map(|n| n.name.as_str())
        .partition(|n| running(&dir.join(format!("run/node-{n}.pid")), &conf_s).is_some());
    if !kept.is_empty() {
        let list = drover_model::hostlist::Hostlist::from_iter(&kept).ranged();
        say(&format!("node agents of {list} run: kept"));
    }
    for n in &start {
        spawn_daemon(
            &exe,
            &["node", "-f", &conf_s, "-N", n],
            &dir.join(format!("log/node-{n}.log")),
            &dir.join(format!("run/node-{n}.pid")),
        )?;
    }
    if !start.is_empty() {
        say(&format!("starting {} node agents", start.len()));
    }
    install_links(&dir.join("bin"))?;
    let deadline = Instant::now() + Duration::from_secs(30);
    let rt = common::runtime();
    let ready = rt.block_on(async {
        loop {
            if Instant::now() > deadline {
                return Err(format!(
                    "the cluster did not come up within 30 s; see the logs in {}",
                    dir.join("log").display()
                ));
            }
            for (_, pid, log) in controllers_of(&cfg) {
                if read_pid(&dir.join("run").join(pid)).is_some_and(|p| !alive(p)) {
                    let log = std::fs::read_to_string(dir.join("log").join(log)).unwrap_or_default();
                    let last = log.lines().last().unwrap_or("").to_string();
                    return Err(format!("the controller exited: {last}"));
                }
            }
            if let Ok(mut c) = common::connect(&cfg).await {
                if let Ok(r) = c.get_state(v1::StateRequest { nodes: true, ..Default::default() }).await {
                    let r = r.into_inner();
                    let up = r.nodes.iter().filter(|n| !n.state_short.ends_with('*')).count();
                    // With accounting, the cluster is up once the controller has registered
                    // it there: accounts and users added before get no association on it
                    // (as in Slurm), which the quick start's next lines would meet.
                    if up == r.nodes.len() && (cfg.accounting_addr().is_none() || registered(&cfg).await) {
                        return Ok(up);
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let up = ready?;
    say(&format!("cluster {} is up: {up} nodes", cfg.cluster_name));
    println!("export PATH={}:$PATH SLURM_CONF={}", dir.join("bin").display(), conf.display());
    Ok(cfg)
}

/// Whether accounting knows this cluster (the controller registers it when it starts).
async fn registered(cfg: &drover_model::conf::Config) -> bool {
    let Ok(mut c) = crate::sacctmgr::connect(cfg).await else {
        return false;
    };
    c.admin_get(v1::Empty {}).await.is_ok_and(|st| st.get_ref().clusters.iter().any(|c| c.name == cfg.cluster_name))
}

/// auth/slurm's key for a local cluster: 1024 random bytes, readable by its owner only,
/// made once.
fn ensure_key(path: &Path) -> Result<(), String> {
    if path.exists() {
        return Ok(());
    }
    drover_proto::auth::write_new_key(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// A `slurm.conf` that an earlier `drover up` wrote before clusters authenticated gets
/// auth/slurm (without it, Slurm's default auth/munge would need a munged).
fn upgrade_auth(conf: &Path, lines: &str) -> Result<(), String> {
    let text = std::fs::read_to_string(conf).map_err(|e| format!("{}: {e}", conf.display()))?;
    let ours = text.starts_with("# Generated by `drover up`");
    if !ours || text.lines().any(|l| l.trim_start().to_ascii_lowercase().starts_with("authtype")) {
        return Ok(());
    }
    let mut f = std::fs::OpenOptions::new().append(true).open(conf).map_err(|e| format!("{}: {e}", conf.display()))?;
    use std::io::Write;
    f.write_all(
        format!("# Added by a later `drover up`: tokens signed by slurm.key beside this file.\n{lines}").as_bytes(),
    )
    .map_err(|e| format!("{}: {e}", conf.display()))?;
    say(&format!("added AuthType=auth/slurm to {}", conf.display()));
    Ok(())
}

/// The cluster's own munged (auth/munge): a key of its own in the state directory, its
/// socket in `run/`, started once.
fn start_munged(dir: &Path) -> Result<(), String> {
    let socket = munge_socket(dir);
    if read_pid(&dir.join("run/munged.pid")).is_some_and(alive) && socket.exists() {
        return Ok(());
    }
    let munged = ["/usr/sbin/munged", "/usr/bin/munged"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .ok_or("auth/munge needs MUNGE's munged (apt-get install munge)")?;
    let key = dir.join("munge.key");
    if !key.exists() {
        drover_proto::auth::write_new_key(&key).map_err(|e| format!("{}: {e}", key.display()))?;
    }
    say("starting munged");
    let _ = std::fs::remove_file(&socket);
    let arg = |k: &str, p: PathBuf| format!("--{k}={}", p.display());
    let args = [
        "--foreground".to_string(),
        "--force".to_string(),
        arg("socket", socket.clone()),
        arg("key-file", key),
        arg("pid-file", dir.join("run/munged.pid.own")),
        arg("seed-file", dir.join("state/munged.seed")),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    spawn_daemon(&munged, &args, &dir.join("log/munged.log"), &dir.join("run/munged.pid"))?;
    let t = Instant::now();
    while !socket.exists() {
        if t.elapsed() > Duration::from_secs(10) {
            return Err(format!("munged did not start; see {}", dir.join("log/munged.log").display()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

pub fn down(a: DownArgs) -> i32 {
    let dir = a.state_dir.unwrap_or_else(default_state_dir);
    if !dir.join("run").exists() {
        eprintln!("drover down: error: no cluster state in {}", dir.display());
        return 1;
    }
    stop_dir(&dir);
    0
}

fn stop_pid(pidfile: &Path) {
    if let Some(pid) = read_pid(pidfile) {
        stop(pid);
    }
    let _ = std::fs::remove_file(pidfile);
}

/// SIGTERM, and SIGKILL after 5 s.
fn stop(pid: u32) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGTERM);
    let t = Instant::now();
    while alive(pid) && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    if alive(pid) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGKILL);
    }
}

/// Stops the daemons and the jobs of the cluster in `dir`.
pub fn stop_dir(dir: &Path) {
    say("stopping the cluster");
    if let Ok(rd) = std::fs::read_dir(dir.join("run")) {
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().starts_with("node-") {
                stop_pid(&e.path());
            }
        }
    }
    if let Ok(rd) = std::fs::read_dir(dir.join("run")) {
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().starts_with("controller") {
                stop_pid(&e.path());
            }
        }
    }
    stop_pid(&dir.join("run/accounting.pid"));
    stop_pid(&dir.join("run/munged.pid"));
    let left = strays(dir);
    if !left.is_empty() {
        say(&format!("stopping {} more daemons of this cluster that no pid file named", left.len()));
        for pid in left {
            stop(pid);
        }
    }
    // Jobs of a local cluster end with it: stop their supervisors (and so their processes).
    if let Ok(rd) = std::fs::read_dir(dir.join("spool")) {
        for node in rd.flatten() {
            if let Ok(jobs) = std::fs::read_dir(node.path()) {
                for j in jobs.flatten() {
                    if let Some(pid) = read_pid(&j.path().join("pid")) {
                        if alive(pid) {
                            if let Ok(mut s) = std::os::unix::net::UnixStream::connect(j.path().join("sv.sock")) {
                                use std::io::Write;
                                let _ = s.write_all(b"term");
                            }
                        }
                    }
                }
            }
        }
    }
    say("stopped");
}

#[cfg(test)]
mod tests {
    use super::slurm_user_line;

    #[test]
    fn a_cluster_of_an_ordinary_user_names_them_slurm_user() {
        assert_eq!(slurm_user_line(1000, Some("alice")), "# The daemons run as you.\nSlurmUser=alice\n");
        assert_eq!(slurm_user_line(0, Some("root")), "", "root is SlurmUser by default");
        assert_eq!(slurm_user_line(1000, None), "", "a uid without a name: nothing to write");
    }
}
