//! Where reads are encoded, and when: a few threads of their own at a lower CPU priority
//! than the state owner and the RPC workers, and turns that readers take one after another.
//!
//! A `squeue` of 100,000 jobs costs ~60 ms of the controller's CPU and ~100 ms of its own.
//! Twenty of them in a loop, all at once, had taken both cores: a submitter beside them fell
//! from 534 to 9 jobs per second (`drover bench --only read-load`), and a lower priority
//! alone changed nothing (the clients' own work dominated). So reads are answered whole, in
//! turns (one per two cores) in order of arrival, and the readers waiting for a turn sleep,
//! their clients too; while writes arrive, a turn that took T leaves the next waiting
//! 1.5 T ([`PACE`]); a client too slow to take its next batch gives its turn up meanwhile
//! ([`SLOW_CLIENT`]). A thread never waits on a client: it encodes a batch and hands it
//! back; sending is the async workers' job. The submitter keeps 61% of its rate.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::oneshot;
use tonic::Status;

type Work = Box<dyn FnOnce() + Send>;

/// How much lower the readers' priority is (`nice`).
const NICE: i32 = 10;

#[derive(Clone)]
pub struct Readers {
    tx: Sender<Work>,
    /// Whose turn it is: reads are answered whole, a few at a time, in order of arrival;
    /// the others wait without costing anything (their clients sleep too).
    turns: Arc<tokio::sync::Semaphore>,
    pace: Arc<Pace>,
}

/// Writes first: while writes arrive, reads take at most 40% of the time (see [`PACE`]).
#[derive(Default)]
struct Pace {
    /// When the last write arrived (ms since `epoch`).
    last_write_ms: std::sync::atomic::AtomicU64,
    /// When the next turn may start, while writes arrive.
    next_turn: Mutex<Option<Instant>>,
    epoch: std::sync::OnceLock<Instant>,
}

/// While writes arrive, a turn that took T leaves the next one waiting T x PACE: reads get
/// at most 1 / (1 + PACE) of the time (40%), their clients' work included.
const PACE: f32 = 1.5;

/// How recent a write keeps reads paced.
const WRITES_RECENT_MS: u64 = 500;

impl Pace {
    fn ms(&self) -> u64 {
        self.epoch.get_or_init(Instant::now).elapsed().as_millis() as u64
    }
    fn writes_recent(&self) -> bool {
        let last = self.last_write_ms.load(Ordering::Relaxed);
        last > 0 && self.ms().saturating_sub(last) < WRITES_RECENT_MS
    }
}

/// A read's turn: while it is held, other reads wait; when it ends, what it took is noted.
pub struct Turn {
    _permit: tokio::sync::OwnedSemaphorePermit,
    started: Instant,
    pace: Arc<Pace>,
}

impl Drop for Turn {
    fn drop(&mut self) {
        let now = Instant::now();
        if let Ok(mut next) = self.pace.next_turn.lock() {
            *next = Some(now + (now - self.started).mul_f32(PACE));
        }
    }
}

/// How long a read keeps its turn while its client is slow to take the next batch.
const SLOW_CLIENT: std::time::Duration = std::time::Duration::from_millis(200);

impl Readers {
    /// Starts one reader thread per core (at least one); reads take turns one per two cores.
    pub fn start() -> Readers {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        Readers::start_with(n, n.div_ceil(2))
    }

    fn start_with(n: usize, turns: usize) -> Readers {
        let (tx, rx) = channel::<Work>();
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..n {
            let rx = rx.clone();
            let spawned = std::thread::Builder::new().name(format!("reader-{i}")).spawn(move || serve(&rx));
            if let Err(e) = spawned {
                crate::log(&format!("error: cannot start reader thread {i}: {e}"));
            }
        }
        Readers { tx, turns: Arc::new(tokio::sync::Semaphore::new(turns)), pace: Arc::default() }
    }

    /// A write arrived: reads are paced for a while.
    pub fn note_write(&self) {
        self.pace.last_write_ms.store(self.pace.ms().max(1), Ordering::Relaxed);
    }

    /// Waits for this read's turn (and, while writes arrive, for its pace).
    pub async fn turn(&self) -> Result<Turn, Status> {
        let permit =
            self.turns.clone().acquire_owned().await.map_err(|_| Status::unavailable("controller is shutting down"))?;
        let next = self.pace.next_turn.lock().ok().and_then(|n| *n);
        if let Some(at) = next.filter(|_| self.pace.writes_recent()) {
            tokio::time::sleep_until(at.into()).await;
        }
        Ok(Turn { _permit: permit, started: Instant::now(), pace: self.pace.clone() })
    }

    /// Sends `item` on `tx`; a client too slow to take it gives its turn up meanwhile (a
    /// slow or stuck client never holds the others up), and waits for it again after.
    pub async fn send<T>(&self, tx: &tokio::sync::mpsc::Sender<T>, item: T, turn: &mut Option<Turn>) -> bool {
        let slot = match tokio::time::timeout(SLOW_CLIENT, tx.reserve()).await {
            Ok(Ok(slot)) => slot,
            Ok(Err(_)) => return false,
            Err(_) => {
                turn.take();
                let Ok(slot) = tx.reserve().await else { return false };
                match self.turn().await {
                    Ok(t) => *turn = Some(t),
                    Err(_) => return false,
                }
                slot
            }
        };
        slot.send(item);
        true
    }

    /// Runs `f` on a reader thread and returns what it returned.
    pub async fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> Result<T, Status> {
        let (otx, orx) = oneshot::channel();
        self.tx
            .send(Box::new(move || {
                let _ = otx.send(f());
            }))
            .map_err(|_| Status::unavailable("controller is shutting down"))?;
        orx.await.map_err(|_| Status::internal("the read failed"))
    }
}

fn serve(rx: &Mutex<Receiver<Work>>) {
    // SAFETY: setpriority on this thread's own id (Linux: a thread's nice value is its own);
    // raising the nice value needs no privilege.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        let now = libc::getpriority(libc::PRIO_PROCESS, tid);
        libc::setpriority(libc::PRIO_PROCESS, tid, now + NICE);
    }
    loop {
        let work = match rx.lock() {
            Ok(r) => r.recv(),
            Err(_) => return,
        };
        match work {
            // A read that panics fails that read alone (its caller hears "the read failed").
            Ok(w) => {
                let _ = std::panic::catch_unwind(AssertUnwindSafe(w));
            }
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reads_run_niced_and_a_panic_fails_only_its_own() {
        // SAFETY: reading this thread's nice value.
        let base = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        let r = Readers::start();
        let nice = r
            // SAFETY: reading the reader thread's own nice value.
            .run(|| unsafe {
                let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
                libc::getpriority(libc::PRIO_PROCESS, tid)
            })
            .await
            .unwrap();
        assert_eq!(nice, (base + NICE).min(19));
        let bad = r.run(|| -> u32 { panic!("a broken read") }).await;
        assert!(bad.is_err());
        assert_eq!(r.run(|| 7).await.unwrap(), 7, "the pool goes on");
    }

    #[tokio::test]
    async fn a_stuck_client_gives_its_turn_up() {
        let r = Readers::start_with(1, 1);
        let (tx, _rx) = tokio::sync::mpsc::channel::<u32>(1);
        tx.send(0).await.unwrap(); // the client takes nothing more
        let mut turn = Some(r.turn().await.unwrap());
        let stuck = {
            let r = r.clone();
            tokio::spawn(async move { r.send(&tx, 1, &mut turn).await })
        };
        // The only turn is the stuck read's, yet another read gets it.
        let other = tokio::time::timeout(std::time::Duration::from_secs(5), r.turn()).await;
        assert!(other.is_ok(), "another read had its turn while the client was stuck");
        stuck.abort();
    }

    #[tokio::test]
    async fn while_writes_arrive_reads_are_paced() {
        let r = Readers::start();
        let took = std::time::Duration::from_millis(100);
        // No writes: back-to-back reads wait for nothing.
        let t = r.turn().await.unwrap();
        tokio::time::sleep(took).await;
        drop(t);
        let at = Instant::now();
        drop(r.turn().await.unwrap());
        assert!(at.elapsed() < took, "no pace without writes: {:?}", at.elapsed());
        // Writes: the next read waits what the last took, x PACE.
        r.note_write();
        let t = r.turn().await.unwrap();
        tokio::time::sleep(took).await;
        drop(t);
        let at = Instant::now();
        drop(r.turn().await.unwrap());
        assert!(at.elapsed() >= took.mul_f32(PACE) - std::time::Duration::from_millis(10), "{:?}", at.elapsed());
    }
}
