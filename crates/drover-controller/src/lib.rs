//! The Drover controller (the `slurmctld` analogue).
//!
//! ```text
//!  CLI ──unix socket──► rpc::Handlers ──Msg──► owner thread ──► drover-sched::Core
//!  node agents ──TCP──► NodeLink.Session ─┘        │  journal (group commit) ──► StateSaveLocation
//!  readers (squeue, sinfo, scontrol show) ◄── ArcSwap<View> ◄── published after each commit
//! ```
//!
//! One thread owns the state ([`owner::Owner`]); handlers are producers on its channel. Every
//! accepted change is journalled and fsynced before its reply is sent and before any launch
//! leaves for a node. Reads never reach the owner.

// Daemons never unwrap on input; broken invariants use `expect("invariant: ...")`.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

mod acct;
pub mod check;
mod diag;
mod explain;
mod fairshare;
pub mod ha;
mod intern;
mod jobtable;
mod owner;
mod policy;
pub mod preemption;
mod ratelimit;
mod readers;
pub mod replay;
mod rpc;
mod state;
mod storage;
mod view;

use arc_swap::ArcSwap;
use drover_journal::Journal;
use drover_proto::v1::{self, controller_server::ControllerServer, node_link_server::NodeLinkServer};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use tokio::sync::Notify;

/// The Slurm release whose behaviour Drover follows (printed by `--version`).
pub const SLURM_VERSION: &str = "22.05.8";

#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error("{0}")]
    Config(#[from] drover_model::conf::ConfError),
    #[error("state directory {path}: {source}")]
    StateDir { path: String, source: std::io::Error },
    #[error("another controller holds {0}")]
    Locked(String),
    #[error(transparent)]
    Journal(#[from] drover_journal::JournalError),
    #[error("recovering state: {0}")]
    Recover(String),
    #[error(
        "refusing to start: {damage}. Nothing was changed. `drover controller --check-state {dir}` reports what \
         is intact; restore the file from a backup, or recover what is intact with \
         `drover controller --check-state {dir} --salvage`"
    )]
    Damaged { damage: Box<drover_journal::Damage>, dir: String },
    #[error("cannot listen on {addr}: {source}")]
    Listen { addr: String, source: std::io::Error },
    #[error("serving: {0}")]
    Serve(String),
    #[error("{0}")]
    Auth(#[from] drover_proto::auth::AuthError),
}

pub(crate) fn log(msg: &str) {
    let now = jiff::Zoned::now();
    eprintln!("[{}] drover controller: {msg}", now.strftime("%Y-%m-%dT%H:%M:%S%.3f"));
}

/// Runs the controller for the given `slurm.conf` until SIGTERM/SIGINT or a Shutdown call.
/// `host` says which `SlurmctldHost` this is (by default, this host's name), where there
/// are several: it stands by until it holds the state directory's lease ([`ha`]).
pub async fn run(conf_path: &Path, host: Option<&str>) -> Result<(), ControllerError> {
    return_large_frees();
    // The controller's files are its user's alone: the journal holds every job's script and
    // environment, secrets included.
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
    let cfg = drover_model::conf::parse_file(conf_path)?;
    if let Some(path) = &cfg.slurmctld_log_file {
        log_to(path).map_err(|source| ControllerError::StateDir { path: path.clone(), source })?;
        tighten(Path::new(path), "SlurmctldLogFile");
    }
    for u in &cfg.unsupported {
        log(&format!("{}:{}: {} is not supported by Drover yet and is ignored", u.file, u.line, u.key));
    }
    let cfg = Arc::new(cfg);
    let state_dir = PathBuf::from(&cfg.state_save_location);
    drover_journal::private::create_dir(&state_dir)
        .map_err(|source| ControllerError::StateDir { path: state_dir.display().to_string(), source })?;
    tighten(&state_dir, "StateSaveLocation");
    // Every TCP connection proves who opened it; launches leave signed. A controller that
    // could do neither (no key, munged down) would only refuse everyone later: it stops now.
    let auth = Arc::new(drover_proto::auth::Auth::new(&cfg.auth, &cfg.path, true)?);
    drover_proto::auth::self_check(&auth)?;
    if let Some(note) = drover_proto::auth::running_as_note(&auth, "controller") {
        log(&note);
    }
    let ha = ha::Ha::configure(&cfg, host, auth.clone())?;
    // One controller of a state directory at a time: alone, it holds the directory's lock;
    // with standbys, all hold it shared (so that a salvage waits for every one of them),
    // and the lease says which one is in control.
    let lock = lock_state_dir(&state_dir, ha.is_some())?;
    log(&format!(
        "authentication {}, launches signed with {}",
        cfg.auth.kind.plugin(),
        cfg.auth.cred_kind().cred_plugin()
    ));
    let mut early_tcp = None;
    if let Some(h) = &ha {
        let addr = h.my_addr().to_string();
        // A controller restarted at once (a supervisor, a fence) may find its old self's
        // threads still letting go of the port: try for a few seconds.
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let bound = loop {
            match std::net::TcpListener::bind(&addr) {
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && std::time::Instant::now() < until => {
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
                r => break r,
            }
        }
        .and_then(|l| l.set_nonblocking(true).map(|_| l))
        .map_err(|source| ControllerError::Listen { addr: addr.clone(), source })?;
        let standby = bound.try_clone().map_err(|source| ControllerError::Listen { addr: addr.clone(), source })?;
        log(&format!("{} (controller {} of {}) listening on {addr}", h.name, h.index, cfg.controller_hosts.len()));
        if !h.stand_by(standby).await? {
            log("shutting down");
            return Ok(());
        }
        early_tcp = Some(bound);
    }
    let io_secret = io_secret(&state_dir)?;
    let (journal, rec) = match Journal::open(&state_dir.join("journal")) {
        Err(drover_journal::JournalError::Damaged(damage)) => {
            return Err(ControllerError::Damaged { damage, dir: state_dir.display().to_string() })
        }
        r => r?,
    };
    for note in &rec.notes {
        log(note);
    }
    let view = Arc::new(ArcSwap::from_pointee(view::View::default()));
    let mut owner = owner::Owner::recover(cfg.clone(), journal, rec, view.clone()).map_err(ControllerError::Recover)?;
    if let Some(h) = &ha {
        // The controller this one took over from may still have been writing (frozen past
        // its lease): the new generation cannot be made. Stand by and claim again.
        if let Err(e) = owner.take_over(h.clone()) {
            h.fence(&format!("starting a new journal generation: {e}"));
        }
    }
    let (tx, rx) = std::sync::mpsc::channel();
    owner.set_self_tx(tx.clone());
    owner.set_io_secret(io_secret);
    if let Some(addr) = cfg.accounting_addr() {
        log(&format!("job records go to accounting at {addr}"));
        let wake = Arc::new(Notify::new());
        owner.set_acct_wake(wake.clone());
        tokio::spawn(acct::deliver(cfg.clone(), tx.clone(), addr.clone(), auth.clone(), wake));
        tokio::spawn(acct::learn_runs(cfg.clone(), tx.clone(), addr.clone(), auth.clone()));
        tokio::spawn(acct::follow_admin(
            cfg.clone(),
            tx.clone(),
            addr,
            acct_cache_path(&cfg),
            view.clone(),
            auth.clone(),
        ));
    }
    let owner_thread = std::thread::Builder::new()
        .name("state-owner".into())
        .spawn(move || owner.run(rx))
        .map_err(|e| ControllerError::Serve(e.to_string()))?;
    let shutdown = Arc::new(Notify::new());
    let handlers = rpc::Handlers {
        tx: tx.clone(),
        view,
        sessions: Arc::new(AtomicU64::new(0)),
        shutdown: shutdown.clone(),
        auth: auth.clone(),
        stats: Arc::new(diag::RpcStats::default()),
        readers: readers::Readers::start(),
        limit: cfg.rate_limit.map(|rl| {
            // Root and SlurmUser are never held back.
            let mut exempt = vec![0];
            exempt.extend(nix::unistd::User::from_name(&cfg.auth.slurm_user).ok().flatten().map(|u| u.uid.as_raw()));
            log(&format!(
                "RPC rate limiting: {} RPCs a user, {} more every {}s",
                rl.bucket_size, rl.refill_rate, rl.refill_period
            ));
            Arc::new(ratelimit::RateLimit::new(rl, exempt))
        }),
    };

    // Local commands come over a Unix socket whose peer credentials say who they are; it
    // lives in /run/drover (root's), never in the private state directory. Where it cannot
    // be made (a controller run by an ordinary user), commands use TCP with credentials.
    let sock = cfg.controller_socket();
    let uds = match drover_proto::local_listener(&sock) {
        Ok(l) => Some(l),
        Err(e) => {
            log(&format!("no local socket ({e}); commands connect over TCP with credentials"));
            None
        }
    };
    let tcp_addr = ha.as_ref().map_or_else(|| cfg.controller_addr(), |h| h.my_addr().to_string());
    let listen_err = |source| ControllerError::Listen { addr: tcp_addr.clone(), source };
    let tcp = match early_tcp {
        Some(l) => tokio::net::TcpListener::from_std(l).map_err(listen_err)?,
        None => tokio::net::TcpListener::bind(&tcp_addr).await.map_err(listen_err)?,
    };
    let sock_ino =
        uds.as_ref().and_then(|_| std::fs::metadata(&sock).ok()).map(|m| std::os::unix::fs::MetadataExt::ino(&m));
    log(&format!(
        "cluster {} listening on {}{tcp_addr}",
        cfg.cluster_name,
        if uds.is_some() { format!("{} and ", sock.display()) } else { String::new() }
    ));

    let stop = {
        let shutdown = shutdown.clone();
        async move {
            let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            tokio::select! {
                _ = shutdown.notified() => {}
                _ = tokio::signal::ctrl_c() => {}
                _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending::<()>().await } } => {}
            }
        }
    };
    let (stop_tx, _) = tokio::sync::broadcast::channel::<()>(1);
    let mut s1 = stop_tx.subscribe();
    let mut s2 = stop_tx.subscribe();
    let commands = || {
        ControllerServer::new(handlers.clone()).max_decoding_message_size(64 << 20).max_encoding_message_size(256 << 20)
    };
    let ha_service = ha.as_ref().map(|h| {
        v1::controller_ha_server::ControllerHaServer::new(ha::service::HaService {
            ha: h.clone(),
            tx: Arc::new(std::sync::Mutex::new(Some(tx.clone()))),
        })
    });
    let local = uds.map(|uds| {
        let ha_local = ha_service.clone();
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_optional_service(ha_local)
                .add_service(commands())
                .serve_with_incoming_shutdown(tokio_stream::wrappers::UnixListenerStream::new(uds), async move {
                    let _ = s1.recv().await;
                }),
        )
    });
    // TCP: node agents, and commands of other hosts (a login node), each connection
    // authenticated before its first request.
    let incoming = drover_proto::auth::accept_authenticated(tcp, auth.clone(), "controller", |addr, e| {
        log(&format!("refused a connection from {addr}: {e}"))
    });
    let remote = tokio::spawn(
        tonic::transport::Server::builder()
            .add_optional_service(ha_service)
            .add_service(commands())
            .add_service(
                NodeLinkServer::new(handlers.clone())
                    .max_decoding_message_size(64 << 20)
                    .max_encoding_message_size(64 << 20),
            )
            .serve_with_incoming_shutdown(incoming, async move {
                let _ = s2.recv().await;
            }),
    );
    if let Some(h) = &ha {
        h.set_active();
    }
    stop.await;
    log("shutting down");
    let _ = stop_tx.send(());
    let _ = tx.send(owner::Msg::Shutdown);
    // The lease is handed back (a standby takes control at once) after the owner's last commit.
    drop(handlers);
    drop(tx);
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), async {
        if let Some(local) = local {
            let _ = local.await;
        }
        let _ = remote.await;
    })
    .await;
    let _ = tokio::task::spawn_blocking(move || owner_thread.join()).await;
    // Another controller of the set may have bound the path since: only ours goes.
    if std::fs::metadata(&sock).ok().map(|m| std::os::unix::fs::MetadataExt::ino(&m)) == sock_ino {
        let _ = std::fs::remove_file(&sock);
    }
    drop(lock);
    Ok(())
}

/// Makes every allocation of 128 KiB or more a mapping of its own, unmapped when it is freed.
///
/// glibc starts with that threshold but raises it to the size of each mapped block freed
/// (up to 32 MiB). The controller's large blocks are transient: a snapshot's encoding, a
/// group commit's buffer, a listing's batches, a job table while it is rehashed. Once the
/// threshold has risen, the next ones come from the heap, and when they are freed their pages
/// stay with the process. With 100,000 pending jobs that was 0.4 KB of resident memory per
/// job on top of the 0.7 KB the jobs hold (`drover bench --only mem-per-job`: 1.2 -> 0.7 KB).
fn return_large_frees() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets a parameter of the allocator, under the allocator's own lock.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}

/// Where the controller keeps its last read of accounting's associations and QoS.
pub(crate) fn acct_cache_path(cfg: &drover_model::conf::Config) -> PathBuf {
    PathBuf::from(&cfg.state_save_location).join("accounting-cache.pb")
}

/// The secret the I/O keys of srun's connections are derived from
/// (`StateSaveLocation/io.key`, made on the first start): one file, so that no job's key is
/// stored and every controller of the state directory derives the same ones.
fn io_secret(state_dir: &Path) -> Result<Vec<u8>, ControllerError> {
    let path = state_dir.join("io.key");
    let err = |source: std::io::Error| ControllerError::StateDir { path: path.display().to_string(), source };
    match std::fs::read(&path) {
        Ok(b) if b.len() == 32 => return Ok(b),
        Ok(b) => {
            return Err(ControllerError::Recover(format!(
                "{} holds {} bytes, not a 32-byte key: it is damaged; move it away to make a new one \
                 (running srun steps then lose their I/O)",
                path.display(),
                b.len()
            )))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(err(e)),
    }
    let secret = drover_proto::auth::new_secret();
    drover_proto::auth::write_private(&path, &secret).map_err(err)?;
    Ok(secret)
}

/// Takes group and other bits off `path` (and what is below it), saying what was loose.
fn tighten(path: &Path, what: &str) {
    for line in drover_journal::private::tighten_report(path, what) {
        log(&line);
    }
}

/// Sends this process's log lines (stderr) to `path`, appending (`SlurmctldLogFile`).
fn log_to(path: &str) -> std::io::Result<()> {
    if let Some(dir) = Path::new(path).parent() {
        std::fs::create_dir_all(dir)?;
    }
    let f = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    nix::unistd::dup2_stderr(&f).map_err(std::io::Error::from)
}

/// One controller per state directory: an exclusive `flock` held for the process's life
/// (`shared`: a controller of a failover set, whose lease says who writes).
pub(crate) fn lock_state_dir(dir: &Path, shared: bool) -> Result<nix::fcntl::Flock<std::fs::File>, ControllerError> {
    let path = dir.join("controller.lock");
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|source| ControllerError::StateDir { path: path.display().to_string(), source })?;
    let how =
        if shared { nix::fcntl::FlockArg::LockSharedNonblock } else { nix::fcntl::FlockArg::LockExclusiveNonblock };
    nix::fcntl::Flock::lock(f, how).map_err(|_| ControllerError::Locked(path.display().to_string()))
}

/// Entry points for the fuzz targets (`fuzz/`): decoding what the journal and snapshot hold.
#[doc(hidden)]
pub mod fuzzing {
    /// A journal record's payload, then applied to a state; and the bytes as a whole state.
    pub fn replay(bytes: &[u8]) {
        if let Ok(r) = crate::state::decode_record(bytes) {
            let mut d = crate::state::Durable::default();
            d.apply(r, None);
        }
        if let Ok(d) = crate::state::Durable::decode(bytes) {
            let _ = d.encode();
        }
    }
}
