//! Controller failover over a shared `StateSaveLocation` (Slurm's form: several
//! `SlurmctldHost` lines, the first the primary).
//!
//! ```text
//!  standby ── polls ha/beat ──► unchanged for the lease (or released) ──► claims term N+1
//!     │                                                    (O_EXCL: one winner)
//!     ▼
//!  in control: recovers the state, starts a new journal generation, serves; a thread
//!  renews the lease (rewrites ha/beat) every lease/6 and checks no later term exists
//!     │
//!     ├─ lease not renewed within lease/2, or a later term seen ──► fenced: writes nothing
//!     │                                      more and starts over as a standby (re-exec)
//!     └─ asked to hand over (a primary back, scontrol takeover) ──► commits, writes
//!                                            "released", starts over as a standby
//! ```
//!
//! Why two controllers never write at once: a standby claims only after it has seen `beat`
//! unchanged for a whole lease by its own monotonic clock, and the holder stops writing once
//! half a lease has passed since the start of its last successful renewal by its own
//! monotonic clock; the journal asks [`Ha::may_write`] right before every write, rename and
//! removal, and a new holder starts a new journal generation before it writes, so a late
//! write of a deposed holder lands in a file nobody appends to any more. `docs/ha.md`
//! walks through each failure.

pub mod lease;
pub mod service;

use crate::ControllerError;
use drover_model::conf::Config;
use drover_proto::v1::{self, controller_ha_client::ControllerHaClient};
use lease::{Beat, LeaseDir};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Set in the environment of a controller that starts over as a standby (after handing over
/// or being fenced): it does not ask for control back at once, as a freshly started primary
/// does.
const STANDBY_ENV: &str = "DROVER_CONTROLLER_STANDBY";

pub struct Ha {
    pub name: String,
    pub index: usize,
    names: Vec<String>,
    addrs: Vec<String>,
    lease: Duration,
    files: LeaseDir,
    auth: Arc<drover_proto::auth::Auth>,
    base: Instant,
    /// Milliseconds after `base` until which this controller may write (0: not in control).
    valid_until: AtomicU64,
    term: AtomicU64,
    active: AtomicBool,
    holder: Mutex<String>,
    /// Renewals and the release write `beat` one at a time; after the release, none.
    beat: Mutex<(u64, bool)>,
    takeover: tokio::sync::Notify,
    activated: tokio::sync::watch::Sender<bool>,
}

/// Which of the `SlurmctldHost` lines this process is: `--host NAME`, else this host's
/// name, short or full (Slurm's rule).
fn my_index(cfg: &Config, name: Option<&str>) -> Result<usize, ControllerError> {
    let names: Vec<String> = match name {
        Some(n) => vec![n.to_string()],
        None => {
            let full = nix::unistd::gethostname().map(|h| h.to_string_lossy().to_string()).unwrap_or_default();
            let short = full.split('.').next().unwrap_or(&full).to_string();
            vec![short, full]
        }
    };
    cfg.controller_hosts.iter().position(|h| names.iter().any(|n| n.eq_ignore_ascii_case(&h.name))).ok_or_else(|| {
        ControllerError::Serve(format!(
            "This host ({}) not a valid controller: slurm.conf's SlurmctldHost lines name {} (drover controller --host \
             NAME says which one this is)",
            names.join("/"),
            cfg.controller_hosts.iter().map(|h| h.name.as_str()).collect::<Vec<_>>().join(", ")
        ))
    })
}

impl Ha {
    /// The failover side of a controller, where slurm.conf names several controllers.
    pub fn configure(
        cfg: &Config,
        name: Option<&str>,
        auth: Arc<drover_proto::auth::Auth>,
    ) -> Result<Option<Arc<Ha>>, ControllerError> {
        if !cfg.controller_failover() {
            return Ok(None);
        }
        let index = my_index(cfg, name)?;
        let state_dir = Path::new(&cfg.state_save_location);
        let files = LeaseDir::open(state_dir)
            .map_err(|source| ControllerError::StateDir { path: state_dir.join("ha").display().to_string(), source })?;
        Ok(Some(Arc::new(Ha {
            name: cfg.controller_hosts[index].name.clone(),
            index,
            names: cfg.controller_hosts.iter().map(|h| h.name.clone()).collect(),
            addrs: cfg.controller_addrs(),
            lease: cfg.controller_lease(),
            files,
            auth,
            base: Instant::now(),
            valid_until: AtomicU64::new(0),
            term: AtomicU64::new(0),
            active: AtomicBool::new(false),
            holder: Mutex::new(String::new()),
            beat: Mutex::new((0, false)),
            takeover: tokio::sync::Notify::new(),
            activated: tokio::sync::watch::channel(false).0,
        })))
    }

    /// This controller's own address (`SlurmctldHost=name(addr)` and `SlurmctldPort`).
    pub fn my_addr(&self) -> &str {
        &self.addrs[self.index]
    }

    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    pub fn status(&self) -> v1::HaStatus {
        v1::HaStatus {
            name: self.name.clone(),
            index: self.index as u32,
            active: self.is_active(),
            term: self.term.load(Ordering::Acquire),
            holder: self.holder.lock().map(|h| h.clone()).unwrap_or_default(),
        }
    }

    fn now_ms(&self) -> u64 {
        self.base.elapsed().as_millis() as u64
    }

    /// Whether this controller may write the state directory now.
    pub fn may_write(&self) -> Result<(), String> {
        if self.now_ms() < self.valid_until.load(Ordering::Acquire) {
            Ok(())
        } else {
            Err(format!(
                "the lease on {} was not renewed within {} ms: another controller may be in control",
                self.files.path().display(),
                self.lease.as_millis() / 2
            ))
        }
    }

    /// The journal's fence ([`drover_journal::Fence`]).
    pub fn journal_fence(self: &Arc<Self>) -> drover_journal::Fence {
        let ha = self.clone();
        Arc::new(move || ha.may_write())
    }

    /// Stops at once: nothing more is written; the process starts over as a standby.
    pub fn fence(&self, why: &str) -> ! {
        self.active.store(false, Ordering::Release);
        crate::log(&format!("error: fenced: {why}; writing nothing more and standing by"));
        restart_as_standby()
    }

    /// Gives the lease up (the owner calls this after its last commit): `beat` says
    /// released, so a standby claims at once; nothing is written after it.
    pub fn release(&self) {
        let term = self.term.load(Ordering::Acquire);
        self.valid_until.store(0, Ordering::Release);
        // No longer in control: a command asking now waits for the next controller rather
        // than sending its request here, to a process about to start over.
        self.active.store(false, Ordering::Release);
        if let Ok(mut b) = self.beat.lock() {
            if b.1 {
                return;
            }
            b.1 = true;
            let beat = Beat { term, holder: self.name.clone(), count: b.0 + 1, released: true };
            if let Err(e) = self.files.write_beat(&beat) {
                crate::log(&format!("error: marking the lease released: {e} (a standby waits it out)"));
            }
        }
    }

    /// Hands over: releases the lease, then starts over as a standby.
    pub fn hand_over(&self) -> ! {
        self.release();
        crate::log(&format!("handed control over (term {}); standing by", self.term.load(Ordering::Acquire)));
        // Replies to what was committed last are on their way out: let them go.
        std::thread::sleep(Duration::from_millis(300));
        restart_as_standby()
    }

    /// Serves [`service::HaService`] on `listener` and waits until this controller holds
    /// the lease (true), or is told to stop first (false).
    pub async fn stand_by(self: &Arc<Self>, listener: std::net::TcpListener) -> Result<bool, ControllerError> {
        let listener = tokio::net::TcpListener::from_std(listener)
            .map_err(|source| ControllerError::Listen { addr: self.my_addr().to_string(), source })?;
        let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
        let incoming =
            drover_proto::auth::accept_authenticated(listener, self.auth.clone(), "controller", |addr, e| {
                crate::log(&format!("refused a connection from {addr}: {e}"))
            });
        let svc = service::HaService { ha: self.clone(), tx: Arc::new(Mutex::new(None)) };
        let server = tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(v1::controller_ha_server::ControllerHaServer::new(svc))
                .serve_with_incoming_shutdown(incoming, async move {
                    let _ = (&mut stop_rx).await;
                }),
        );
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        let won = tokio::select! {
            t = self.wait_for_lease() => { t?; true }
            _ = tokio::signal::ctrl_c() => false,
            _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending::<()>().await } } => false,
        };
        let _ = stop_tx.send(());
        // Its connections are let go for up to two seconds, then cut: nothing of the standby's
        // server outlives it.
        let mut server = server;
        if tokio::time::timeout(Duration::from_secs(2), &mut server).await.is_err() {
            server.abort();
        }
        Ok(won)
    }

    /// Polls the lease files until this controller claims a term.
    async fn wait_for_lease(self: &Arc<Self>) -> Result<(), ControllerError> {
        let io = |source: std::io::Error| ControllerError::StateDir {
            path: self.files.path().display().to_string(),
            source,
        };
        let poll = (self.lease / 20).clamp(Duration::from_millis(20), Duration::from_millis(500));
        // (Left in the environment: changing it while other threads run is a data race, and
        // it says the same for the rest of this process's life.)
        let fresh = std::env::var_os(STANDBY_ENV).is_none();
        // A primary that starts asks whoever is in control to hand over (as Slurm's does).
        let mut ask = self.index == 0 && fresh;
        let mut seen = self.observe().await?.1;
        // A lease released before this backup started (the whole set was stopped) is the
        // primary's to take first: a backup waits a lease for it, as for one that expired.
        let at_start = seen.clone();
        let mut changed = Instant::now();
        let mut said = false;
        loop {
            let ((latest, holder), raw) = self.observe().await?;
            if let Ok(mut h) = self.holder.lock() {
                h.clone_from(&holder);
            }
            self.term.store(latest, Ordering::Release);
            if raw != seen {
                seen = raw;
                changed = Instant::now();
            }
            let beat = Beat::decode(&seen);
            let released =
                beat.as_ref().is_some_and(|b| b.released && b.term >= latest) && (self.index == 0 || seen != at_start);
            let expired = changed.elapsed() >= self.lease;
            let nobody = latest == 0 && (self.index == 0 || expired);
            if ask && latest > 0 && !released && !holder.is_empty() {
                ask = false;
                self.ask_to_hand_over(&holder).await;
                continue;
            }
            if released || expired || nobody {
                let how = if released {
                    "released"
                } else if nobody {
                    "unclaimed"
                } else {
                    "expired"
                };
                let ha = self.clone();
                // File I/O (a sync to shared storage) off the runtime's threads.
                let won = tokio::task::spawn_blocking(move || {
                    let won = ha.files.claim(latest + 1, &ha.name)?;
                    if won {
                        ha.take_control(latest + 1, &holder, how);
                    }
                    Ok::<_, std::io::Error>(won)
                })
                .await
                .map_err(|e| ControllerError::Serve(e.to_string()))?
                .map_err(io)?;
                if won {
                    return Ok(());
                }
                continue;
            }
            if !said {
                crate::log(&format!(
                    "standing by: {} holds the lease on {} (term {latest}); taking over if it is not renewed for {} s",
                    if holder.is_empty() { "nobody yet" } else { holder.as_str() },
                    self.files.path().display(),
                    self.lease.as_secs_f64()
                ));
                said = true;
            }
            tokio::select! {
                _ = tokio::time::sleep(poll) => {}
                _ = self.takeover.notified() => ask = true,
            }
        }
    }

    /// The latest claimed term and its holder, and `beat` as it reads now (off the runtime's
    /// threads: the state directory may be on a slow file server).
    async fn observe(&self) -> Result<((u64, String), String), ControllerError> {
        let files = self.files.clone();
        let path = files.path().display().to_string();
        tokio::task::spawn_blocking(move || Ok::<_, std::io::Error>((files.latest_term()?, files.read_beat_raw())))
            .await
            .map_err(|e| ControllerError::Serve(e.to_string()))?
            .map_err(|source| ControllerError::StateDir { path, source })
    }

    fn take_control(self: &Arc<Self>, term: u64, from: &str, how: &str) {
        let t0 = Instant::now();
        if let Ok(mut b) = self.beat.lock() {
            *b = (0, false);
            let _ = self.files.write_beat(&Beat { term, holder: self.name.clone(), count: 0, released: false });
        }
        self.valid_until.store(self.ms_at(t0 + self.lease / 2), Ordering::Release);
        self.term.store(term, Ordering::Release);
        if let Ok(mut h) = self.holder.lock() {
            h.clone_from(&self.name);
        }
        crate::log(&format!(
            "took control: term {term} of the lease on {} ({}{how})",
            self.files.path().display(),
            if from.is_empty() { String::new() } else { format!("{from}'s lease ") }
        ));
        let ha = self.clone();
        let _ = std::thread::Builder::new().name("lease".into()).spawn(move || ha.renew_forever());
    }

    fn ms_at(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.base).as_millis() as u64
    }

    /// Set once the controller serves (after recovery): clients may now use it.
    pub fn set_active(&self) {
        self.active.store(true, Ordering::Release);
        self.activated.send_replace(true);
    }

    /// Renews the lease every lease/6 until the process ends or is fenced.
    fn renew_forever(&self) {
        let every = (self.lease / 6).max(Duration::from_millis(50));
        let mut said_error = false;
        loop {
            std::thread::sleep(every);
            let t0 = Instant::now();
            let term = self.term.load(Ordering::Acquire);
            match self.renew(term) {
                Ok(()) => {
                    self.valid_until.store(self.ms_at(t0 + self.lease / 2), Ordering::Release);
                    said_error = false;
                }
                Err(Renew::Deposed(by)) => self.fence(&format!("{by} claimed a later term of the lease")),
                Err(Renew::Released) => return,
                Err(Renew::Io(e)) => {
                    if !said_error {
                        crate::log(&format!("error: renewing the lease in {}: {e}", self.files.path().display()));
                        said_error = true;
                    }
                    if let Err(why) = self.may_write() {
                        self.fence(&why);
                    }
                }
            }
        }
    }

    fn renew(&self, term: u64) -> Result<(), Renew> {
        let later = || -> Result<(), Renew> {
            let (latest, holder) = self.files.latest_term().map_err(Renew::Io)?;
            if latest > term {
                return Err(Renew::Deposed(if holder.is_empty() { "another controller".into() } else { holder }));
            }
            Ok(())
        };
        later()?;
        {
            let mut b = self.beat.lock().map_err(|_| Renew::Released)?;
            if b.1 {
                return Err(Renew::Released);
            }
            b.0 += 1;
            self.files
                .write_beat(&Beat { term, holder: self.name.clone(), count: b.0, released: false })
                .map_err(Renew::Io)?;
        }
        // A claim made while this renewal was written must not count as renewed.
        later()
    }

    /// Asks `holder` (in control) to hand over; where it cannot be reached, its lease runs out.
    async fn ask_to_hand_over(&self, holder: &str) {
        let Some(i) = self.names.iter().position(|n| n == holder) else { return };
        if i == self.index {
            return;
        }
        let addr = self.addrs[i].clone();
        crate::log(&format!("asking {holder} at {addr} to hand control over"));
        let ask = async {
            let ch = drover_proto::auth::connect_authenticated(&addr, &self.auth, "controller").await?;
            ControllerHaClient::new(ch).relinquish(v1::Empty {}).await.map_err(|s| s.message().to_string())?;
            Ok::<(), String>(())
        };
        match tokio::time::timeout(Duration::from_secs(5), ask).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => crate::log(&format!("{holder} did not hand over ({e}); waiting for its lease to run out")),
            Err(_) => crate::log(&format!("{holder} did not answer; waiting for its lease to run out")),
        }
    }

    /// scontrol takeover, sent to this standby: ask the holder now, and answer once in control.
    pub async fn takeover(&self) -> Result<(), String> {
        if self.is_active() {
            return Ok(());
        }
        let mut rx = self.activated.subscribe();
        self.takeover.notify_one();
        let wait = self.lease * 2 + Duration::from_secs(10);
        tokio::time::timeout(wait, rx.wait_for(|a| *a))
            .await
            .map_err(|_| format!("not in control after {} s", wait.as_secs()))?
            .map_err(|e| e.to_string())?;
        Ok(())
    }
}

enum Renew {
    Deposed(String),
    Released,
    Io(std::io::Error),
}

/// Replaces this process by a fresh start of itself as a standby (same pid, same arguments):
/// nothing of the old state, threads or connections survives.
fn restart_as_standby() -> ! {
    use std::os::unix::process::CommandExt;
    let mut args = std::env::args_os();
    let arg0 = args.next().unwrap_or_else(|| "drover".into());
    let err = std::process::Command::new("/proc/self/exe").arg0(arg0).args(args).env(STANDBY_ENV, "1").exec();
    crate::log(&format!("fatal: cannot start over as a standby ({err}); exiting"));
    std::process::exit(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A controller that gives control up (hands over, or is fenced) says at once that it is
    /// not in control: in the moment before it starts over as a standby, a command asking
    /// it must wait for the next one instead of sending its request to a process about to
    /// exec (seen: an sbatch during `scontrol takeover` failed with "connection error").
    #[test]
    fn a_controller_that_releases_the_lease_is_no_longer_in_control() {
        let dir = tempfile::tempdir().unwrap();
        let text = format!(
            "ClusterName=c\nSlurmctldHost=ctl1(127.0.0.1)\nSlurmctldHost=ctl2(127.0.0.2)\n\
             StateSaveLocation={}\nNodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\n",
            dir.path().display()
        );
        let cfg = drover_model::conf::parse_str("slurm.conf", &text).unwrap();
        let auth = Arc::new(drover_proto::auth::Auth::with_key(b"0123456789abcdef0123456789abcdef", 0));
        let ha = Ha::configure(&cfg, Some("ctl1"), auth).unwrap().expect("two controllers: failover");
        // (In control as far as status goes: take_control's renewing thread is left out.)
        ha.term.store(1, Ordering::Release);
        ha.set_active();
        assert!(ha.status().active);
        ha.release();
        assert!(!ha.status().active, "released: not in control");
    }
}
