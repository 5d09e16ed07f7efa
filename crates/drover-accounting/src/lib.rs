//! The Drover accounting service (the `slurmdbd` analogue): stores the job and step records
//! the controller sends, in SQL (SQLite, PostgreSQL or MariaDB through sqlx), and answers
//! `sacct`.
//!
//! ```text
//!  controller outbox ──Accounting.Record──► Store (upsert, one transaction per batch)
//!  sacct ───────────────Accounting.Jobs───► Store (indexed query) ──► rows in batches
//! ```

// Daemons never unwrap on input; broken invariants use `expect("invariant: ...")`.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod bench;
pub mod rollup;
pub mod server;
pub mod store;
mod usage;

use drover_model::dbd_conf::DbdConf;
use drover_proto::v1::accounting_server::AccountingServer;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum AccountingError {
    #[error("{0}")]
    Config(String),
    #[error(transparent)]
    Store(#[from] store::StoreError),
    #[error("cannot listen on {addr}: {source}")]
    Listen { addr: String, source: std::io::Error },
    #[error("serving: {0}")]
    Serve(String),
}

pub(crate) fn log(msg: &str) {
    let now = jiff::Zoned::now();
    eprintln!("[{}] drover accounting: {msg}", now.strftime("%Y-%m-%dT%H:%M:%S%.3f"));
}

/// Reads a `slurmdbd.conf`.
pub fn load_conf(path: &Path) -> Result<DbdConf, AccountingError> {
    let text =
        std::fs::read_to_string(path).map_err(|e| AccountingError::Config(format!("{}: {e}", path.display())))?;
    DbdConf::parse(&path.display().to_string(), &text).map_err(AccountingError::Config)
}

/// Runs the accounting service for the given `slurmdbd.conf` until SIGTERM/SIGINT.
pub async fn run(conf_path: &Path) -> Result<(), AccountingError> {
    // Accounting's files are its user's alone (the database holds every job's record).
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
    let conf = load_conf(conf_path)?;
    let mut private = Vec::new();
    if let Some(path) = &conf.log_file {
        log_to(path).map_err(|e| AccountingError::Config(format!("LogFile {path}: {e}")))?;
        private.push((PathBuf::from(path), "LogFile"));
    }
    if conf.storage == drover_model::dbd_conf::StorageKind::Sqlite {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            private.push((PathBuf::from(format!("{}{suffix}", conf.storage_loc)), "StorageLoc"));
        }
    }
    for (path, what) in &private {
        for line in drover_journal::private::tighten_report(path, what) {
            log(&line);
        }
    }
    for (line, key) in &conf.unsupported {
        log(&format!("{}:{line}: {key} is not supported by Drover yet and is ignored", conf_path.display()));
    }
    if let Some(p) = &conf.pid_file {
        let _ = std::fs::write(p, format!("{}\n", std::process::id()));
    }
    // Every TCP connection proves who opened it: records only from the cluster's daemons.
    let auth = Arc::new(
        drover_proto::auth::Auth::new(&conf.auth, &conf_path.display().to_string(), true)
            .map_err(|e| AccountingError::Config(e.to_string()))?,
    );
    drover_proto::auth::self_check(&auth).map_err(|e| AccountingError::Config(e.to_string()))?;
    if let Some(note) = drover_proto::auth::running_as_note(&auth, "accounting") {
        log(&note);
    }
    let url = conf.storage_url();
    let store = Arc::new(store::Store::open(&url).await?);
    let addr = format!("{}:{}", conf.addr, conf.port);
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .map_err(|source| AccountingError::Listen { addr: addr.clone(), source })?;
    log(&format!(
        "storing in {} (schema {}), listening on {addr} and {}",
        store::redact(&url),
        store.version().await?,
        drover_model::dbd_conf::local_socket(conf.port).display()
    ));
    if conf.purge_job_after.is_some() || conf.purge_step_after.is_some() {
        tokio::spawn(purge_now_and_hourly(store.clone(), conf.purge_job_after, conf.purge_step_after));
    }
    tokio::spawn(rollup_hourly(store.clone()));
    let host = nix::unistd::gethostname().map(|h| h.to_string_lossy().into_owned()).unwrap_or_default();
    let svc = server::Service { store, host, auth: auth.clone() };
    // The local socket: where local commands come, with their peer credentials (in root's
    // /run/drover; where that cannot be made, they use TCP with credentials).
    let sock = drover_model::dbd_conf::local_socket(conf.port);
    let uds = match drover_proto::local_listener(&sock) {
        Ok(l) => Some(l),
        Err(e) => {
            log(&format!("no local socket {} ({e}); commands connect over TCP with credentials", sock.display()));
            None
        }
    };
    let (stop_tx, _) = tokio::sync::broadcast::channel::<()>(1);
    let mut s1 = stop_tx.subscribe();
    let mut s2 = stop_tx.subscribe();
    let service =
        || AccountingServer::new(svc.clone()).max_decoding_message_size(256 << 20).max_encoding_message_size(256 << 20);
    let incoming = drover_proto::auth::accept_authenticated(listener, auth, "accounting", |addr, e| {
        log(&format!("refused a connection from {addr}: {e}"))
    });
    let remote = tokio::spawn(tonic::transport::Server::builder().add_service(service()).serve_with_incoming_shutdown(
        incoming,
        async move {
            let _ = s1.recv().await;
        },
    ));
    let local = uds.map(|uds| {
        tokio::spawn(tonic::transport::Server::builder().add_service(service()).serve_with_incoming_shutdown(
            tokio_stream::wrappers::UnixListenerStream::new(uds),
            async move {
                let _ = s2.recv().await;
            },
        ))
    });
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending::<()>().await } } => {}
    }
    log("shutting down");
    let _ = stop_tx.send(());
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), async {
        let _ = remote.await;
        if let Some(local) = local {
            let _ = local.await;
        }
    })
    .await;
    let _ = std::fs::remove_file(&sock);
    if let Some(p) = &conf.pid_file {
        let _ = std::fs::remove_file(p);
    }
    Ok(())
}

/// Removes records older than `PurgeJobAfter`/`PurgeStepAfter`, at start and every hour.
async fn purge_now_and_hourly(store: Arc<store::Store>, jobs: Option<u64>, steps: Option<u64>) {
    loop {
        let now = jiff::Timestamp::now().as_second();
        let before = |age: Option<u64>| age.map_or(0, |a| now - a as i64);
        match store.purge(before(jobs), before(steps)).await {
            Ok((0, 0)) => {}
            Ok((j, s)) => log(&format!("purged {j} job and {s} step records (PurgeJobAfter/PurgeStepAfter)")),
            Err(e) => log(&format!("error: purging: {e}")),
        }
        tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
    }
}

/// Rolls usage up at start, after each hour ends, and soon after records change hours
/// already rolled up (or arrive for a cluster with none yet).
async fn rollup_hourly(store: Arc<store::Store>) {
    loop {
        let now = jiff::Timestamp::now().as_second();
        let started = std::time::Instant::now();
        match store.rollup(now).await {
            Ok(0) => {}
            Ok(n) => log(&format!("rolled up {n} hours of usage in {:.1}s", started.elapsed().as_secs_f64())),
            Err(e) => log(&format!("error: rolling up usage: {e}")),
        }
        // A few seconds past the next hour, unless woken first (then a moment later, so a
        // burst of late records is rolled up once).
        let wait = 3600 - now.rem_euclid(3600) + 5;
        tokio::select! {
            _ = tokio::time::sleep(std::time::Duration::from_secs(wait as u64)) => {}
            _ = store.rollup_wanted.notified() => tokio::time::sleep(std::time::Duration::from_secs(1)).await,
        }
    }
}

/// Sends this process's log lines (stderr) to `path`, appending (`LogFile`).
fn log_to(path: &str) -> std::io::Result<()> {
    if let Some(dir) = Path::new(path).parent() {
        std::fs::create_dir_all(dir)?;
    }
    let f = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    nix::unistd::dup2_stderr(&f).map_err(std::io::Error::from)
}
