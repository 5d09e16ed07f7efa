//! The Drover node agent (the `slurmd` analogue) and the per-job supervisor.
//!
//! ```text
//!  controller ◄──NodeLink.Session (TCP)──► agent ──spawn──► drover supervise SPOOL/jobN ──fork/exec──► job
//!                                            ▲  agent.sock ("jobN ended")  │
//!                                            └─────────────────────────────┘
//! ```
//!
//! The agent registers its node, heartbeats, and turns launches and signals into supervisors
//! and supervisor requests. Supervisors run in their own sessions and survive agent restarts;
//! a restarted agent finds them again in the spool directory and reports their jobs.

// Daemons never unwrap on input; broken invariants use `expect("invariant: ...")`.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod cgroup;
pub mod configless;
pub mod devbpf;
pub mod env;
pub mod gres;
pub mod prolog;
pub mod spool;
pub mod supervisor;
pub mod usage;
pub mod userenv;

use drover_model::conf::Config;
use drover_proto::v1::{self, controller_to_node, node_link_client::NodeLinkClient, node_to_controller};
use prost::Message;
use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::mpsc;

#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("{0}")]
    Config(#[from] drover_model::conf::ConfError),
    #[error("node {0} is not defined in slurm.conf")]
    UnknownNode(String),
    #[error("spool directory {path}: {source}")]
    Spool { path: String, source: std::io::Error },
    #[error("{0}")]
    Gres(String),
    #[error("{0}")]
    Auth(#[from] drover_proto::auth::AuthError),
}

fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

fn log(node: &str, msg: &str) {
    let now = jiff::Zoned::now();
    eprintln!("[{}] drover node {node}: {msg}", now.strftime("%Y-%m-%dT%H:%M:%S%.3f"));
}

/// A job's batch script (`None`) or one of its steps: what one supervisor runs.
type Unit = (u32, Option<u32>);

struct Agent {
    /// This binary, resolved at start: it may be replaced on disk while the agent runs.
    exe: PathBuf,
    /// Proves this agent to the controller and checks what the controller sends.
    auth: std::sync::Arc<drover_proto::auth::Auth>,
    /// The node's cgroups (none: confinement is off), where a dead supervisor's processes are
    /// found and killed.
    cgroups: Option<std::sync::Arc<cgroup::Cgroups>>,
    name: String,
    spool: PathBuf,
    cfg: Config,
    start_time: i64,
    /// Ended jobs and steps already reported on the current session.
    reported: HashSet<Unit>,
}

/// Runs the agent for `node` until SIGTERM/SIGINT. Jobs keep running when it stops.
pub async fn run(conf_path: &Path, node: Option<&str>) -> Result<(), NodeError> {
    let cfg = drover_model::conf::parse_file(conf_path)?;
    let name = match node {
        Some(n) => n.to_string(),
        // As slurmd: the node whose NodeHostname (which defaults to its NodeName) is this
        // host's name, short or full.
        None => {
            let host = nix::unistd::gethostname().map(|h| h.to_string_lossy().to_string()).unwrap_or_default();
            let short = host.split('.').next().unwrap_or(&host).to_string();
            cfg.nodes
                .iter()
                .find(|n| n.hostname == host || n.hostname == short)
                .or_else(|| cfg.nodes.iter().find(|n| n.name == host || n.name == short))
                .map_or(host, |n| n.name.clone())
        }
    };
    let conf = cfg.node(&name).ok_or_else(|| NodeError::UnknownNode(name.clone()))?.clone();
    if let Some(path) = cfg.slurmd_log_for(&name) {
        // `SlurmdLogFile`: this agent's log lines go there, appended.
        let opened = std::path::Path::new(&path)
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|_| std::fs::OpenOptions::new().create(true).append(true).open(&path));
        let f = opened.map_err(|source| NodeError::Spool { path: path.clone(), source })?;
        nix::unistd::dup2_stderr(&f).map_err(|e| NodeError::Spool { path: path.clone(), source: e.into() })?;
    }
    let spool = PathBuf::from(cfg.spool_dir_for(&name));
    std::fs::create_dir_all(&spool).map_err(|source| NodeError::Spool { path: spool.display().to_string(), source })?;
    // The spool is root's: jobs' users may pass through it to their own job's directory
    // (their batch script runs from there) but not list it; everything else the agent and
    // its supervisors make is theirs alone (the umask), whatever it was when started.
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&spool, std::fs::Permissions::from_mode(0o711));
    }
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
    std::fs::write(spool.join(spool::NODE_NAME), &name)
        .map_err(|source| NodeError::Spool { path: spool.display().to_string(), source })?;
    let sock_path = spool.join(spool::AGENT_SOCK);
    let _ = std::fs::remove_file(&sock_path);
    let listener = tokio::net::UnixListener::bind(&sock_path)
        .map_err(|source| NodeError::Spool { path: sock_path.display().to_string(), source })?;
    let (wake_tx, mut wake_rx) = mpsc::unbounded_channel::<Unit>();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let tx = wake_tx.clone();
            tokio::spawn(async move {
                use tokio::io::AsyncReadExt;
                let mut line = String::new();
                let _ = s.read_to_string(&mut line).await;
                if let Some(unit) = spool::unit_of_dir(line.trim()) {
                    let _ = tx.send(unit);
                }
            });
        }
    });
    let cg_conf = cgroup::conf_for(conf_path).map_err(NodeError::Gres)?;
    for (line, key) in &cg_conf.unsupported {
        log(&name, &format!("cgroup.conf:{line}: {key} is not supported by Drover yet and is ignored"));
    }
    let cg_dir = cgroup::node_dir(&cfg.cluster_name, conf_path, &name);
    let (confinement, cgroups) = match cgroup::Cgroups::open(cg_conf, &cg_dir) {
        Ok(cg) => (cg.describe(), Some(std::sync::Arc::new(cg))),
        // Jobs still run: tracked as their supervisor's descendants, without limits.
        Err(why) => (format!("off: {why}; jobs are tracked as their supervisor's descendants, without limits"), None),
    };
    log(&name, &format!("started ({} CPUs, {} MB); confinement {confinement}", conf.cpus, conf.real_memory_mb));
    for line in gres::check(conf_path, &conf, &spool).map_err(NodeError::Gres)? {
        log(&name, &line);
    }
    let exe = std::env::current_exe().map_err(|source| NodeError::Spool { path: "/proc/self/exe".into(), source })?;
    // The agent must prove itself to the controller and check every launch: without the key
    // (or munged) it could do neither, so it stops here and says why.
    let auth = std::sync::Arc::new(drover_proto::auth::Auth::new(&cfg.auth, &cfg.path, true)?);
    drover_proto::auth::self_check(&auth)?;
    if cfg.auth.kind == drover_model::auth_conf::AuthKind::Slurm {
        // The host's users get their credentials here (srun in a job, commands on the node).
        match drover_proto::auth::sack::bind() {
            Ok(Some(l)) => {
                log(&name, &format!("serving credentials at {}", drover_proto::auth::sack::socket_path().display()));
                tokio::spawn(drover_proto::auth::sack::serve(l, auth.clone()));
            }
            Ok(None) => {}
            Err(e) => log(
                &name,
                &format!(
                    "error: cannot serve credentials at {}: {e}",
                    drover_proto::auth::sack::socket_path().display()
                ),
            ),
        }
    }
    let mut agent =
        Agent { exe, auth, cgroups, name: name.clone(), spool, cfg, start_time: now(), reported: HashSet::new() };
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    let mut backoff = Duration::from_millis(50);
    loop {
        let session = agent.session(&mut wake_rx, &confinement);
        tokio::select! {
            r = session => {
                match r {
                    Ok(()) => backoff = Duration::from_millis(50),
                    Err(e) => {
                        log(&name, &format!("controller link: {e}"));
                    }
                }
            }
            _ = tokio::signal::ctrl_c() => break,
            _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending::<()>().await } } => break,
        }
        tokio::time::sleep(backoff).await;
        // With standbys, one is taking over: find it soon.
        let most = if agent.cfg.controller_failover() { Duration::from_millis(250) } else { Duration::from_secs(2) };
        backoff = (backoff * 2).min(most);
    }
    log(&name, "stopping; running jobs continue under their supervisors");
    cgroup::remove_node_dirs(
        Path::new(&cgroup::conf_for(conf_path).map(|c| c.mountpoint).unwrap_or_default()),
        &cg_dir,
    );
    let _ = std::fs::remove_file(&sock_path);
    Ok(())
}

impl Agent {
    /// The controller in control: the only one, or of several `SlurmctldHost`s the one whose
    /// lease holds (all asked at once: a frozen controller never answers).
    async fn controller(&self) -> Result<(String, tonic::transport::Channel), String> {
        if !self.cfg.controller_failover() {
            let addr = self.cfg.controller_addr();
            let ch = drover_proto::auth::connect_authenticated(&addr, &self.auth, "controller").await?;
            return Ok((addr, ch));
        }
        type Try =
            std::pin::Pin<Box<dyn std::future::Future<Output = Option<(String, tonic::transport::Channel)>> + Send>>;
        let tries: Vec<Try> = self
            .cfg
            .controller_addrs()
            .into_iter()
            .map(|addr| {
                let auth = self.auth.clone();
                Box::pin(async move {
                    let connect =
                        || async { drover_proto::auth::connect_authenticated(&addr, &auth, "controller").await.ok() };
                    let ch = drover_proto::until_in_control(connect).await;
                    Some((addr, ch))
                }) as Try
            })
            .collect();
        let within = self.cfg.controller_lease() * 2 + Duration::from_secs(5);
        drover_proto::first_of(tries, within).await.ok_or_else(|| "no controller is in control".to_string())
    }

    fn scan(&self) -> (Vec<v1::RunningJob>, Vec<v1::EndedJob>) {
        scan_spool(&self.spool, self.cgroups.as_deref(), &self.name)
    }

    async fn session(&mut self, wake_rx: &mut mpsc::UnboundedReceiver<Unit>, confinement: &str) -> Result<(), String> {
        let (addr, chan) = self.controller().await?;
        let mut client = NodeLinkClient::new(chan);
        let (tx, rx) = mpsc::unbounded_channel::<v1::NodeToController>();
        let (running, ended) = self.scan();
        self.reported = ended.iter().map(|e| (e.job_id, e.step_id)).collect();
        let conf = self.cfg.node(&self.name).cloned().ok_or("node vanished from config")?;
        let uname = nix::sys::utsname::uname().ok();
        let reg = v1::Register {
            node: self.name.clone(),
            cpus: conf.cpus,
            real_memory_mb: conf.real_memory_mb,
            running,
            ended,
            boot_time: boot_time(),
            start_time: self.start_time,
            os: uname
                .as_ref()
                .map(|u| {
                    format!(
                        "{} {} {}",
                        u.sysname().to_string_lossy(),
                        u.release().to_string_lossy(),
                        u.version().to_string_lossy()
                    )
                })
                .unwrap_or_default(),
            arch: uname.as_ref().map(|u| u.machine().to_string_lossy().to_string()).unwrap_or_default(),
            version: drover_model::SLURM_COMPAT_VERSION.to_string(),
            confinement: confinement.to_string(),
        };
        tx.send(v1::NodeToController { msg: Some(node_to_controller::Msg::Register(reg)) })
            .map_err(|e| e.to_string())?;
        let mut inbound = client
            .session(tokio_stream::wrappers::UnboundedReceiverStream::new(rx))
            .await
            .map_err(|e| e.message().to_string())?
            .into_inner();
        log(&self.name, &format!("registered with the controller at {addr}"));
        let hb_every = Duration::from_secs(u64::from((self.cfg.slurmd_timeout / 3).clamp(1, 10)));
        let mut hb = tokio::time::interval(hb_every);
        let mut rescan = tokio::time::interval(Duration::from_secs(2));
        // HealthCheckProgram every HealthCheckInterval seconds (first at registration).
        let health = self.cfg.health_check_program.clone().filter(|_| self.cfg.health_check_interval > 0);
        let mut health_tick =
            tokio::time::interval(Duration::from_secs(u64::from(self.cfg.health_check_interval.max(1))));
        loop {
            tokio::select! {
                m = inbound.message() => {
                    match m {
                        Ok(Some(m)) => if let Some(msg) = m.msg { self.handle(msg, &tx) },
                        Ok(None) => return Err("controller closed the session".into()),
                        Err(e) => return Err(e.message().to_string()),
                    }
                }
                Some(unit) = wake_rx.recv() => self.report_if_ended(unit, &tx),
                _ = hb.tick() => {
                    let st = v1::NodeStatus { cpu_load: load_avg(), free_mem_mb: free_mem_mb() };
                    if tx.send(v1::NodeToController { msg: Some(node_to_controller::Msg::Heartbeat(st)) }).is_err() {
                        return Err("session closed".into());
                    }
                }
                _ = health_tick.tick(), if health.is_some() => {
                    let (prog, node, tx) = (health.clone().unwrap_or_default(), self.name.clone(), tx.clone());
                    let env = vec![
                        ("SLURMD_NODENAME".to_string(), node.clone()),
                        ("SLURM_CONF".to_string(), self.cfg.path.clone()),
                        ("PATH".to_string(), "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".to_string()),
                    ];
                    tokio::task::spawn_blocking(move || {
                        if let Err((code, out)) = prolog::run_script(&prog, &env, Duration::from_secs(60)) {
                            let reason = if out.is_empty() { format!("HealthCheck failed: rc {}", code >> 8) } else { out };
                            log(&node, &format!("error: health check failed: {reason}"));
                            let _ = tx.send(problem("health", None, &reason));
                        }
                    });
                }
                _ = rescan.tick() => {
                    // Fallback for a missed supervisor notification.
                    // Reads every job dir: off the runtime's threads.
                    let (spool, cg, name) = (self.spool.clone(), self.cgroups.clone(), self.name.clone());
                    let (_, ended) = tokio::task::spawn_blocking(move || scan_spool(&spool, cg.as_deref(), &name))
                        .await
                        .unwrap_or_default();
                    for e in ended {
                        if self.reported.insert((e.job_id, e.step_id)) {
                            let _ = tx.send(v1::NodeToController { msg: Some(node_to_controller::Msg::Ended(e)) });
                        }
                    }
                }
            }
        }
    }

    fn report_if_ended(&mut self, unit: Unit, tx: &mpsc::UnboundedSender<v1::NodeToController>) {
        let dir = spool::unit_dir(&self.spool, unit.0, unit.1);
        if let Some(st) = spool::read_status(&dir) {
            if self.reported.insert(unit) {
                let msg = node_to_controller::Msg::Ended(ended_msg(&dir, unit, st));
                let _ = tx.send(v1::NodeToController { msg: Some(msg) });
            }
        }
    }

    /// Sends `line` to every supervisor of `job` here (its batch script's and its steps').
    fn tell_job(&self, job: u32, line: &str) {
        Self::tell(&spool::job_dir(&self.spool, job), line);
        for d in spool::step_dirs_of(&self.spool, job) {
            Self::tell(&d, line);
        }
    }

    /// Where a prolog or epilog runs: (spool, node, cluster, slurm.conf), owned for a thread.
    fn script_place(&self) -> (PathBuf, String, String, String) {
        (self.spool.clone(), self.name.clone(), self.cfg.cluster_name.clone(), self.cfg.path.clone())
    }

    /// [`Self::tell`], for a request that ends the unit (`terminate`): it is first left in the
    /// directory of a supervisor launched there that has not ended, which reads it when it
    /// starts listening, should it not be listening yet.
    fn tell_ending(dir: &Path, line: &str, terminate: bool) -> bool {
        if terminate && dir.join(spool::LAUNCH).exists() && !dir.join(spool::STATUS).exists() {
            let _ = std::fs::write(dir.join(spool::TERM), line);
        }
        Self::tell(dir, line)
    }

    /// Sends a request line to the supervisor of `dir`; false when none listens there.
    fn tell(dir: &Path, line: &str) -> bool {
        match std::os::unix::net::UnixStream::connect(dir.join(spool::SV_SOCK)) {
            Ok(mut c) => c.write_all(line.as_bytes()).is_ok(),
            Err(_) => false,
        }
    }

    /// The launch inside a signed one, if the controller signed it, for this node.
    fn checked_launch(&self, s: &v1::SignedLaunch) -> Result<v1::Launch, String> {
        let l = self.auth.verify_launch(s).map_err(|e| e.to_string())?;
        let job = l.job.as_ref().ok_or("a launch without its job")?;
        let here = match l.step.as_ref().and_then(|s| s.step.as_ref()) {
            Some(step) => step.nodes.iter().any(|n| n.node == self.name),
            None => job.alloc.iter().any(|a| a.node == self.name),
        };
        if !here {
            return Err(format!("the launch of job {} is not for node {}", job.job_id, self.name));
        }
        Ok(l)
    }

    fn handle(&mut self, msg: controller_to_node::Msg, tx: &mpsc::UnboundedSender<v1::NodeToController>) {
        match msg {
            controller_to_node::Msg::Launch(l) => {
                // Nothing runs here that the controller did not sign.
                let id = l.job.as_ref().map_or(0, |j| j.job_id);
                log(&self.name, &format!("error: refused an unsigned launch of job {id}"));
            }
            controller_to_node::Msg::SignedLaunch(s) => {
                let l = match self.checked_launch(&s) {
                    Ok(l) => l,
                    Err(e) => {
                        log(&self.name, &format!("error: refused a launch: {e}"));
                        return;
                    }
                };
                let Some(id) = l.job.as_ref().map(|j| j.job_id) else {
                    return;
                };
                let step = l.step.as_ref().and_then(|s| s.step.as_ref()).map(|s| s.step_id);
                let unit = (id, step);
                let dir = spool::unit_dir(&self.spool, id, step);
                if dir.exists() {
                    // A repeated launch (after a reconnect): the job is already here.
                    self.report_if_ended(unit, tx);
                    return;
                }
                if let Err(e) = self.launch(&dir, &l) {
                    let what = match step {
                        Some(s) => format!("step {id}.{s}"),
                        None => format!("job {id}"),
                    };
                    log(&self.name, &format!("{what}: launch failed: {e}"));
                    let st = spool::EndStatus {
                        exit_status: 1 << 8,
                        how: "FAILED_LAUNCH".into(),
                        end_time: now(),
                        message: e,
                    };
                    let _ = std::fs::create_dir_all(&dir);
                    let _ = spool::write_status(&dir, &st);
                    self.report_if_ended(unit, tx);
                }
            }
            controller_to_node::Msg::Signal(s) => {
                if s.suspend || s.resume {
                    // Every supervisor of the job here stops (or continues) its processes.
                    self.tell_job(s.job_id, if s.suspend { "suspend" } else { "resume" });
                    return;
                }
                if let Some(end) = s.end_time {
                    // A new time limit: every supervisor of the job here re-arms.
                    self.tell_job(s.job_id, &format!("limit {end}"));
                    return;
                }
                if let Some(step) = s.step_id {
                    // One step: scancel kills it at once, as Slurm does; srun ending it
                    // (signal SIGTERM) gives its tasks KillWait to go.
                    let line = match (s.terminate, s.signal) {
                        (true, 0) => "kill".to_string(),
                        (true, _) => "term".to_string(),
                        (false, sig) => format!("sig {sig} all"),
                    };
                    let dir = spool::step_dir(&self.spool, s.job_id, step);
                    if !Self::tell_ending(&dir, &line, s.terminate) {
                        self.reported.remove(&(s.job_id, Some(step)));
                        self.report_if_ended((s.job_id, Some(step)), tx);
                    }
                    return;
                }
                let line = if s.terminate {
                    if s.requeue { "term requeue" } else { "term" }.to_string()
                } else {
                    format!("sig {} {}", s.signal, if s.batch_only { "batch" } else { "all" })
                };
                // The batch script's supervisor, and (unless only the batch shell is meant)
                // every step of the job here.
                if s.steps_only {
                    for d in spool::step_dirs_of(&self.spool, s.job_id) {
                        Self::tell(&d, &line);
                    }
                    return;
                }
                let dir = spool::job_dir(&self.spool, s.job_id);
                let told_job = Self::tell_ending(&dir, &line, s.terminate);
                let mut told_steps = false;
                if !s.batch_only {
                    for d in spool::step_dirs_of(&self.spool, s.job_id) {
                        told_steps |= Self::tell_ending(&d, &line, s.terminate);
                    }
                }
                if !told_job {
                    // A supervisor still starting (launched, not yet listening) reads the
                    // request left for it and ends the job itself: no status is written for
                    // it here, or the job would be reported over while its script starts.
                    let starting = spool::supervisor_starting_or_alive(&dir);
                    if s.terminate && !told_steps && !starting && !dir.join(spool::STATUS).exists() {
                        // Nothing runs here for that job: say it is over.
                        let _ = std::fs::create_dir_all(&dir);
                        let st = spool::EndStatus {
                            exit_status: 0,
                            how: "CANCELLED".into(),
                            end_time: now(),
                            message: String::new(),
                        };
                        let _ = spool::write_status(&dir, &st);
                    }
                    self.reported.remove(&(s.job_id, None));
                    self.report_if_ended((s.job_id, None), tx);
                }
            }
            controller_to_node::Msg::JobStart(p) => {
                // PrologFlags=Alloc: the prolog runs as the job starts, on every node.
                let (Some(job), Some(prog)) = (p.job, self.cfg.prolog.clone()) else { return };
                let (spool, node, cluster, conf) = self.script_place();
                let tx = tx.clone();
                tokio::task::spawn_blocking(move || {
                    let c = prolog::Context { job: &job, node: &node, cluster: &cluster, conf_path: &conf };
                    if let Err((code, out)) = prolog::prolog_once(&spool, &prog, &c) {
                        log(&node, &format!("error: prolog failed: rc:{} output:{out}", code >> 8));
                        let _ = tx.send(problem("prolog", Some(job.job_id), "Prolog error"));
                    }
                });
            }
            controller_to_node::Msg::JobDone(p) => {
                let Some(job) = p.job else { return };
                let prog = self.cfg.epilog.clone();
                let (spool, node, cluster, conf) = self.script_place();
                let tx = tx.clone();
                tokio::task::spawn_blocking(move || {
                    let c = prolog::Context { job: &job, node: &node, cluster: &cluster, conf_path: &conf };
                    if let Err((code, out)) = prolog::epilog(&spool, prog.as_deref(), &c) {
                        log(&node, &format!("error: epilog failed: rc:{} output:{out}", code >> 8));
                        let _ = tx.send(problem("epilog", Some(job.job_id), "Epilog error"));
                    }
                    let done = v1::RunningJob { job_id: job.job_id, step_id: None };
                    let _ = tx.send(v1::NodeToController { msg: Some(node_to_controller::Msg::EpilogDone(done)) });
                });
            }
            controller_to_node::Msg::Stat(r) => {
                // Asks the unit's supervisor; answers whatever it says (nothing if it is gone).
                let dir = spool::unit_dir(&self.spool, r.job_id, r.step_id);
                let tx = tx.clone();
                tokio::task::spawn_blocking(move || {
                    let mut reply = v1::StatReply::default();
                    if let Ok(mut c) = std::os::unix::net::UnixStream::connect(dir.join(spool::SV_SOCK)) {
                        let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
                        let mut buf = Vec::new();
                        if c.write_all(b"stat").is_ok() && c.shutdown(std::net::Shutdown::Write).is_ok() {
                            let _ = std::io::Read::read_to_end(&mut c, &mut buf);
                        }
                        reply = v1::StatReply::decode(&buf[..]).unwrap_or_default();
                    }
                    reply.req_id = r.req_id;
                    let _ = tx.send(v1::NodeToController { msg: Some(node_to_controller::Msg::Stat(reply)) });
                });
            }
            controller_to_node::Msg::Attach(a) => {
                let dir = spool::step_dir(&self.spool, a.job_id, a.step_id);
                let key: String = a.io_key.iter().map(|b| format!("{b:02x}")).collect();
                Self::tell(&dir, &format!("attach {} {key}", a.io_addr));
            }
            controller_to_node::Msg::EndedAck(a) => {
                let dir = spool::unit_dir(&self.spool, a.job_id, a.step_id);
                if dir.join(spool::STATUS).exists() {
                    let _ = std::fs::remove_dir_all(&dir);
                }
                self.reported.remove(&(a.job_id, a.step_id));
            }
        }
    }

    fn launch(&self, dir: &Path, l: &v1::Launch) -> Result<(), String> {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        let tmp = dir.join("launch.tmp");
        let mut l = l.clone();
        if let Some(n) = self.cfg.node(&self.name) {
            l.shape = Some(v1::NodeShape {
                // Already every board's sockets (slurm.conf's SocketsPerBoard x Boards).
                sockets: n.sockets,
                cores_per_socket: n.cores_per_socket,
                threads_per_core: n.threads_per_core,
                task_affinity: self.cfg.task_affinity,
            });
        }
        (l.topology_addr, l.topology_pattern) = match &self.cfg.topology {
            Some(t) => t.address(&self.name),
            None => (self.name.clone(), "node".into()),
        };
        // The user, resolved here once the name service is loaded (the supervisor then need
        // not load it: ~a tenth of its start), unless this agent cannot switch users anyway.
        if let Some(spec) = l.job.as_ref().and_then(|j| j.spec.as_ref()) {
            if nix::unistd::getuid().is_root() {
                l.user = resolve_user(spec.uid, spec.gid).ok();
            }
        }
        l.prolog = self.cfg.prolog.clone().unwrap_or_default();
        l.task_prolog = self.cfg.task_prolog.clone().unwrap_or_default();
        l.task_epilog = self.cfg.task_epilog.clone().unwrap_or_default();
        l.propagate_rlimits = self.cfg.propagate_rlimits.clone();
        // The node's own configuration, not the controller's path for it (another host's, or
        // a configless host's fetched copy): cgroup.conf, gres.conf and the job's cgroups
        // follow it.
        l.conf_path = self.cfg.path.clone();
        std::fs::write(&tmp, l.encode_to_vec()).map_err(|e| e.to_string())?;
        std::fs::rename(&tmp, dir.join(spool::LAUNCH)).map_err(|e| e.to_string())?;
        let pid = spawn_supervisor(&self.exe, dir).map_err(|e| format!("starting the supervisor: {e}"))?;
        // Reap it when it ends; its result travels through the spool, not the exit code.
        std::thread::spawn(move || {
            let _ = nix::sys::wait::waitpid(pid, None);
        });
        Ok(())
    }
}

/// Starts `drover supervise DIR` in a session of its own, so that signals aimed at the
/// agent's process group (a terminal's Ctrl-C) never reach it.
///
/// With `posix_spawn` (`POSIX_SPAWN_SETSID`): a `fork` of this multi-threaded agent, which
/// `std::process::Command` makes for a `pre_exec` hook, copied its page tables and then broke
/// copy-on-write for every page the agent's threads touched until the child's exec. Standard
/// input and output are /dev/null; standard error is the agent's own (the node's log file),
/// where a supervisor's rare messages outlive the spool directory it is given.
fn spawn_supervisor(exe: &Path, dir: &Path) -> Result<nix::unistd::Pid, String> {
    use nix::spawn::{posix_spawn, PosixSpawnAttr, PosixSpawnFileActions, PosixSpawnFlags};
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    let cstr = |b: &[u8]| std::ffi::CString::new(b).map_err(|e| e.to_string());
    let args = [cstr(exe.as_os_str().as_bytes())?, cstr(b"supervise")?, cstr(dir.as_os_str().as_bytes())?];
    let env: Vec<std::ffi::CString> = std::env::vars_os()
        .filter_map(|(k, v)| {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            std::ffi::CString::new(kv).ok()
        })
        .collect();
    let null = std::fs::OpenOptions::new().read(true).write(true).open("/dev/null").map_err(|e| e.to_string())?;
    let mut files = PosixSpawnFileActions::init().map_err(|e| e.to_string())?;
    for fd in [0, 1] {
        files.add_dup2(null.as_raw_fd(), fd).map_err(|e| e.to_string())?;
    }
    let mut attr = PosixSpawnAttr::init().map_err(|e| e.to_string())?;
    attr.set_sigmask(&nix::sys::signal::SigSet::empty()).map_err(|e| e.to_string())?;
    let setsid = PosixSpawnFlags::from_bits_retain(libc::c_int::from(libc::POSIX_SPAWN_SETSID));
    attr.set_flags(PosixSpawnFlags::POSIX_SPAWN_SETSIGMASK | setsid).map_err(|e| e.to_string())?;
    posix_spawn(exe, &files, &attr, &args, &env).map_err(|e| e.to_string())
}

/// A message taking this node out of service, with why.
fn problem(kind: &str, job_id: Option<u32>, reason: &str) -> v1::NodeToController {
    let p = v1::NodeProblem { kind: kind.into(), job_id, reason: reason.into() };
    v1::NodeToController { msg: Some(node_to_controller::Msg::Problem(p)) }
}

/// What the spool holds: jobs whose supervisors run, and jobs that ended.
/// `drover sackd` (Slurm 23.11's `sackd`): on a host without a node agent (a login node),
/// hands local users auth/slurm credentials of their own, checked by the socket's peer
/// credentials. Runs until SIGTERM/SIGINT.
pub async fn sackd(conf_path: &Path) -> Result<(), NodeError> {
    let cfg = drover_model::conf::parse_file(conf_path)?;
    if cfg.auth.kind != drover_model::auth_conf::AuthKind::Slurm {
        return Err(NodeError::Gres(format!(
            "sackd serves AuthType=auth/slurm; {} has {} (its users get credentials from munged)",
            conf_path.display(),
            cfg.auth.kind.plugin()
        )));
    }
    let auth = std::sync::Arc::new(drover_proto::auth::Auth::new(&cfg.auth, &cfg.path, true)?);
    drover_proto::auth::self_check(&auth)?;
    let path = drover_proto::auth::sack::socket_path();
    let listener = drover_proto::auth::sack::bind()
        .map_err(|source| NodeError::Spool { path: path.display().to_string(), source })?
        .ok_or_else(|| NodeError::Gres(format!("another daemon already serves {}", path.display())))?;
    log("sackd", &format!("serving credentials at {}", path.display()));
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = drover_proto::auth::sack::serve(listener, auth) => {}
        _ = tokio::signal::ctrl_c() => {}
        _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending::<()>().await } } => {}
    }
    let _ = std::fs::remove_file(&path);
    Ok(())
}

/// What the spool says of this node's jobs and steps: running, or ended (with how). A
/// supervisor found dead without a word (kill -9, the OOM killer) leaves no process of its
/// job or step behind: what is left in its cgroup is killed and the end recorded, once.
fn scan_spool(spool: &Path, cgroups: Option<&cgroup::Cgroups>, node: &str) -> (Vec<v1::RunningJob>, Vec<v1::EndedJob>) {
    scan_spool_with(spool, cgroups, node, |_| {})
}

/// [`scan_spool`], with `between` called for each unit between the first look at its status
/// and the look at its supervisor (where a test makes it end).
fn scan_spool_with(
    spool: &Path,
    cgroups: Option<&cgroup::Cgroups>,
    node: &str,
    mut between: impl FnMut(&Path),
) -> (Vec<v1::RunningJob>, Vec<v1::EndedJob>) {
    let mut running = Vec::new();
    let mut ended = Vec::new();
    if let Ok(rd) = std::fs::read_dir(spool) {
        for e in rd.flatten() {
            let Some((id, step_id)) = spool::unit_of_dir(&e.file_name().to_string_lossy()) else {
                continue;
            };
            let dir = e.path();
            if let Some(st) = spool::read_status(&dir) {
                ended.push(ended_msg(&dir, (id, step_id), st));
                continue;
            }
            between(&dir);
            // A supervisor records its pid first thing (whole: written and renamed).
            let recorded = spool::recorded_pid(&dir).is_some();
            if !recorded && !dir.join(spool::LAUNCH).exists() {
                // Being made by the agent's launch, this moment: neither running nor ended yet.
                continue;
            }
            if !recorded || spool::supervisor_alive(&dir) {
                running.push(v1::RunningJob { job_id: id, step_id });
            } else if let Some(st) = spool::read_status(&dir) {
                // It ended between the two looks: a supervisor records its end before it
                // exits. (Before, such a job's true end was overwritten by NODE_FAIL, seen
                // under load as an OUT_OF_MEMORY job ending NODE_FAIL.)
                ended.push(ended_msg(&dir, (id, step_id), st));
            } else {
                // The supervisor died without a word: its job (or step) is lost here, and
                // nothing of it may run on unsupervised.
                let unit = step_id.map_or("batch".to_string(), |s| s.to_string());
                let mut message = "job supervisor died".to_string();
                if let Some(cg) = cgroups {
                    let g = cg.existing(id, &unit);
                    let left = g.pids().len();
                    g.kill_all();
                    g.remove();
                    if left > 0 {
                        message = format!("job supervisor died; its {left} processes were killed");
                    }
                }
                let what = step_id.map_or(format!("job {id}"), |s| format!("step {id}.{s}"));
                log(node, &format!("error: {what}: {message}"));
                let st = spool::EndStatus { exit_status: 9, how: "NODE_FAIL".into(), end_time: now(), message };
                // Recorded: the next scan reports it like any end, and the ack removes it.
                let _ = spool::write_status(&dir, &st);
                ended.push(ended_msg(&dir, (id, step_id), st));
            }
        }
    }
    (running, ended)
}

/// The end of a job or step as its supervisor recorded it in `dir`, with what its tasks used.
fn ended_msg(dir: &std::path::Path, unit: Unit, st: spool::EndStatus) -> v1::EndedJob {
    v1::EndedJob {
        job_id: unit.0,
        exit_status: st.exit_status,
        how: st.how,
        end_time: st.end_time,
        message: st.message,
        step_id: unit.1,
        usage: spool::read_usage(dir),
    }
}

fn boot_time() -> i64 {
    std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("btime ").and_then(|v| v.trim().parse().ok())))
        .unwrap_or(0)
}

fn load_avg() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0.0)
}

fn free_mem_mb() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("MemAvailable:").and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            })
        })
        .map(|kb| kb / 1024)
        .unwrap_or(0)
}

/// A user's name, home and supplementary groups (what `initgroups` would set), for a launch:
/// the agent resolves them (its name service is loaded), the supervisor only when a launch
/// comes without them.
pub(crate) fn resolve_user(uid: u32, gid: u32) -> Result<v1::LaunchUser, String> {
    let u = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .map_err(|e| format!("looking up uid {uid}: {e}"))?
        .ok_or_else(|| format!("uid {uid} is not a user on this node"))?;
    let name = std::ffi::CString::new(u.name.clone()).map_err(|e| e.to_string())?;
    let gids = nix::unistd::getgrouplist(&name, nix::unistd::Gid::from_raw(gid))
        .map_err(|e| format!("looking up the groups of {}: {e}", u.name))?;
    Ok(v1::LaunchUser {
        name: u.name,
        home: u.dir.display().to_string(),
        gids: gids.into_iter().map(|g| g.as_raw()).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A supervisor that records its end and exits between the scan's look at the status and
    /// its look at the process: the recorded end is reported, not "supervisor died".
    #[test]
    fn a_unit_that_ends_during_the_scan_keeps_its_recorded_end() {
        let spool = tempfile::tempdir().unwrap();
        let dir = spool::job_dir(spool.path(), 7);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(spool::LAUNCH), b"").unwrap();
        let mut child = std::process::Command::new("sleep").arg("60").spawn().unwrap();
        std::fs::write(dir.join(spool::PID), child.id().to_string()).unwrap();
        let (running, ended) = scan_spool(spool.path(), None, "n1");
        assert_eq!((running.len(), ended.len()), (1, 0));
        let end = spool::EndStatus { exit_status: 0, how: "OUT_OF_MEMORY".into(), end_time: 5, message: String::new() };
        let (running, ended) = scan_spool_with(spool.path(), None, "n1", |d| {
            spool::write_status(d, &end).unwrap();
            child.kill().unwrap();
            child.wait().unwrap();
        });
        assert!(running.is_empty());
        assert_eq!(ended.len(), 1);
        assert_eq!(ended[0].how, "OUT_OF_MEMORY");
        assert_eq!(spool::read_status(&dir).unwrap().how, "OUT_OF_MEMORY");
    }

    /// A unit the agent is launching (its directory made, the launch not yet in place), one
    /// whose supervisor has not recorded its pid yet (or is writing it) are running, not
    /// dead: before, the scan every 2 s took such a job for one whose supervisor had died,
    /// ended it NODE_FAIL and had its spool removed under the starting supervisor (seen in
    /// the 10,000-task array and Snakemake tests). A supervisor that recorded itself and is
    /// gone is dead.
    #[test]
    fn a_starting_unit_is_never_taken_for_a_dead_one() {
        let spool = tempfile::tempdir().unwrap();
        let making = spool::job_dir(spool.path(), 1);
        std::fs::create_dir_all(&making).unwrap();
        std::fs::write(making.join("launch.tmp"), b"").unwrap();
        let starting = spool::job_dir(spool.path(), 2);
        std::fs::create_dir_all(&starting).unwrap();
        std::fs::write(starting.join(spool::LAUNCH), b"").unwrap();
        let writing = spool::step_dir(spool.path(), 2, 0);
        std::fs::create_dir_all(&writing).unwrap();
        std::fs::write(writing.join(spool::LAUNCH), b"").unwrap();
        std::fs::write(writing.join(spool::PID), b"").unwrap();
        let dead = spool::job_dir(spool.path(), 3);
        std::fs::create_dir_all(&dead).unwrap();
        std::fs::write(dead.join(spool::LAUNCH), b"").unwrap();
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        gone.wait().unwrap();
        std::fs::write(dead.join(spool::PID), gone.id().to_string()).unwrap();

        let (running, ended) = scan_spool(spool.path(), None, "n1");
        let mut running: Vec<(u32, Option<u32>)> = running.iter().map(|r| (r.job_id, r.step_id)).collect();
        running.sort();
        assert_eq!(running, [(2, None), (2, Some(0))]);
        assert_eq!(ended.iter().map(|e| (e.job_id, e.how.as_str())).collect::<Vec<_>>(), [(3, "NODE_FAIL")]);
        assert!(spool::read_status(&making).is_none() && spool::read_status(&writing).is_none());
    }
}
