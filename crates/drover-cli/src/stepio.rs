//! srun's side of a step's I/O: the listener the supervisors connect back to (one TCP
//! connection per node), task output to srun's stdout/stderr, srun's stdin to the tasks, and
//! for `--pty` the local terminal (raw mode, window size).
//!
//! ```text
//!  supervisor ──HELLO, STDOUT/STDERR, OOM, EXIT──► serve_node thread ──► stdout/stderr, Collected
//!  supervisor ◄──STDIN (per task), WINSIZE────── forward_stdin thread, SIGWINCH
//! ```

use drover_model::step::io_mode_includes;
use drover_proto::io::{read_frame, write_frame, EXIT, OOM, STDERR, STDIN, STDOUT, WINSIZE};
use drover_proto::v1;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// What the supervisors sent back.
#[derive(Default)]
pub struct Collected {
    /// (task, node, raw wait status)
    pub exits: Vec<(u32, String, i32)>,
    pub nodes_done: usize,
    /// Tasks the out-of-memory killer ended.
    pub oom: Vec<u32>,
}

/// The nodes that said hello, with the way back to their supervisor.
type Writers = Arc<(Mutex<HashMap<String, TcpStream>>, Condvar)>;

/// The step's I/O key, once the controller's reply brought it (supervisors may connect
/// before: they wait for it).
type Key = Arc<(Mutex<Option<Vec<u8>>>, Condvar)>;

/// How long a supervisor's hello waits for the key (the step's reply is on its way).
const KEY_WAIT: Duration = Duration::from_secs(60);

/// The listener the step's supervisors connect back to: one connection per node carrying
/// its tasks' output and exit statuses one way, and srun's stdin the other.
pub struct IoServer {
    pub addr: String,
    pub collected: Arc<Mutex<Collected>>,
    /// Woken by the connection threads on every exit and closed stream, so the step's loop
    /// reacts at once instead of polling.
    pub changed: Arc<tokio::sync::Notify>,
    writers: Writers,
    key: Key,
}

/// How task output is written: `-l` labels lines with the task id; `-u` (and `--pty`)
/// writes what arrives at once instead of whole lines.
#[derive(Clone, Copy, Default)]
pub struct OutputMode {
    pub label: bool,
    pub unbuffered: bool,
    /// Only this task's stdout (and stderr) is written (`sattach --output-filter`).
    pub stdout_of: Option<u32>,
    pub stderr_of: Option<u32>,
}

impl IoServer {
    pub fn start(mode: OutputMode, cfg: &drover_model::conf::Config) -> std::io::Result<IoServer> {
        let listener = listen(cfg)?;
        let addr = listener.local_addr()?.to_string();
        let collected = Arc::new(Mutex::new(Collected::default()));
        let changed = Arc::new(tokio::sync::Notify::new());
        let writers: Writers = Arc::new((Mutex::new(HashMap::new()), Condvar::new()));
        let key: Key = Arc::new((Mutex::new(None), Condvar::new()));
        let (c, n, w, k) = (collected.clone(), changed.clone(), writers.clone(), key.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let (c, n, w, k) = (c.clone(), n.clone(), w.clone(), k.clone());
                std::thread::spawn(move || {
                    // Only the step's supervisors get in: each proves it holds the step's
                    // key before anything of the tasks (or of srun's stdin) flows.
                    let peer = conn.peer_addr().map(|a| a.to_string()).unwrap_or_default();
                    let _ = conn.set_read_timeout(Some(KEY_WAIT));
                    match drover_proto::io::srun_accept(&mut conn, || wait_key(&k)) {
                        Ok(node) => {
                            let _ = conn.set_read_timeout(None);
                            serve_node(conn, node, c, n, w, mode)
                        }
                        Err(e) => eprintln!("srun: error: refused a task I/O connection from {peer}: {e}"),
                    }
                });
            }
        });
        Ok(IoServer { addr, collected, changed, writers, key })
    }

    /// The step's I/O key, from the controller's reply: the supervisors' hellos are checked
    /// against it.
    pub fn set_key(&self, key: &[u8]) {
        let (lock, cv) = &*self.key;
        if let Ok(mut k) = lock.lock() {
            *k = Some(key.to_vec());
        }
        cv.notify_all();
    }

    /// (tasks that reported an exit, nodes whose stream ended)
    pub fn progress(&self) -> (usize, usize) {
        self.collected.lock().map(|c| (c.exits.len(), c.nodes_done)).unwrap_or((0, 0))
    }

    /// Exits in the order they arrived.
    pub fn exits_in_order(&self) -> Vec<(u32, String, i32)> {
        self.collected.lock().map(|c| c.exits.clone()).unwrap_or_default()
    }

    /// Waits up to `limit` for every node's stream to end; true when they all did.
    pub async fn settle(&self, nodes: usize, limit: Duration) -> bool {
        let until = tokio::time::Instant::now() + limit;
        loop {
            if self.progress().1 >= nodes {
                return true;
            }
            if tokio::time::timeout_at(until, self.changed.notified()).await.is_err() {
                return self.progress().1 >= nodes;
            }
        }
    }

    /// Where the step's tasks are, as Slurm's srun tells it (task_state_print): running,
    /// exited abnormally (a non-zero status), exited; one line each.
    pub fn status_lines(&self, step: &v1::StepInfo) -> Vec<String> {
        let exits = self.exits_in_order();
        let all: Vec<u32> = step.nodes.iter().flat_map(|n| n.task_ids.iter().copied()).collect();
        let running: Vec<u32> = all.iter().copied().filter(|t| !exits.iter().any(|e| e.0 == *t)).collect();
        let ended = |normal: bool| -> Vec<u32> {
            let mut ids: Vec<u32> = exits.iter().filter(|e| (e.2 == 0) == normal).map(|e| e.0).collect();
            ids.sort_unstable();
            ids
        };
        let part = |ids: &[u32], what: &str| {
            let word = if ids.len() == 1 { "task" } else { "tasks" };
            format!("{word} {}: {what}", drover_model::gres::fmt_indices(ids))
        };
        [(running, "running"), (ended(false), "exited abnormally"), (ended(true), "exited")]
            .into_iter()
            .filter(|(ids, _)| !ids.is_empty())
            .map(|(ids, what)| part(&ids, what))
            .collect()
    }

    /// Forwards srun's stdin to the tasks `mode` selects (`all`, a task id) on a thread of
    /// its own, until srun's stdin ends (then their stdin is closed) or srun exits.
    pub fn forward_stdin(&self, step: &v1::StepInfo, mode: &str) {
        let targets: Vec<(String, Vec<u32>)> = step
            .nodes
            .iter()
            .map(|n| {
                let tasks = n.task_ids.iter().copied().filter(|t| io_mode_includes(mode, *t)).collect::<Vec<_>>();
                (n.node.clone(), tasks)
            })
            .filter(|(_, t)| !t.is_empty())
            .collect();
        if targets.is_empty() {
            return;
        }
        let writers = self.writers.clone();
        std::thread::spawn(move || {
            let mut stdin = std::io::stdin().lock();
            let mut buf = vec![0u8; 65536];
            loop {
                let n = match stdin.read(&mut buf) {
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => 0,
                };
                // Each target node's supervisor may still be connecting.
                for (node, tasks) in &targets {
                    let Some(mut conn) = wait_writer(&writers, node) else { continue };
                    for t in tasks {
                        let _ = write_frame(&mut conn, STDIN, *t, &buf[..n]);
                    }
                }
                if n == 0 {
                    return;
                }
            }
        });
    }

    /// Tells task 0's node the terminal's size (`--pty`).
    pub fn send_winsize(&self, step: &v1::StepInfo, (rows, cols): (u16, u16)) {
        let Some(node) = step.nodes.iter().find(|n| n.task_ids.contains(&0)) else { return };
        if let Some(mut conn) = wait_writer(&self.writers, &node.node) {
            let mut size = rows.to_be_bytes().to_vec();
            size.extend_from_slice(&cols.to_be_bytes());
            let _ = write_frame(&mut conn, WINSIZE, 0, &size);
        }
    }
}

/// The connection to `node`'s supervisor, once it said hello (up to a minute: launches on a
/// busy node take a moment).
fn wait_writer(writers: &Writers, node: &str) -> Option<TcpStream> {
    let (lock, cv) = &**writers;
    let mut map = lock.lock().ok()?;
    let until = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(c) = map.get(node) {
            return c.try_clone().ok();
        }
        let left = until.checked_duration_since(std::time::Instant::now())?;
        map = cv.wait_timeout(map, left).ok()?.0;
    }
}

/// srun's listener for its tasks' I/O: on the address this host reaches the controller from
/// (the cluster's network; loopback where the controller is on this host), in
/// `SrunPortRange` where set, so that supervisors on other hosts can connect back.
fn listen(cfg: &drover_model::conf::Config) -> std::io::Result<std::net::TcpListener> {
    let ip = std::net::UdpSocket::bind("0.0.0.0:0")
        .and_then(|u| u.connect(cfg.controller_addr()).and_then(|_| u.local_addr()))
        .map(|a| a.ip())
        .unwrap_or(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));
    let Some((lo, hi)) = cfg.srun_port_range else {
        return std::net::TcpListener::bind((ip, 0));
    };
    // From a point in the range that differs between sruns, so that many starting at once
    // do not all try the same ports first.
    let span = u32::from(hi - lo) + 1;
    let start = std::process::id() % span;
    let mut last = None;
    for k in 0..span {
        let port = lo + ((start + k) % span) as u16;
        match std::net::TcpListener::bind((ip, port)) {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AddrInUse,
        format!("no free port in SrunPortRange={lo}-{hi}: {}", last.map(|e| e.to_string()).unwrap_or_default()),
    ))
}

/// The key once set (up to [`KEY_WAIT`]).
fn wait_key(key: &Key) -> Option<Vec<u8>> {
    let (lock, cv) = &**key;
    let mut k = lock.lock().ok()?;
    let until = std::time::Instant::now() + KEY_WAIT;
    loop {
        if let Some(k) = k.as_ref() {
            return Some(k.clone());
        }
        let left = until.checked_duration_since(std::time::Instant::now())?;
        k = cv.wait_timeout(k, left).ok()?.0;
    }
}

/// One node's connection, after its supervisor proved itself as `node`.
fn serve_node(
    mut conn: TcpStream,
    node: String,
    collected: Arc<Mutex<Collected>>,
    changed: Arc<tokio::sync::Notify>,
    writers: Writers,
    mode: OutputMode,
) {
    if let Ok(w) = conn.try_clone() {
        let (lock, cv) = &*writers;
        if let Ok(mut m) = lock.lock() {
            m.insert(node.clone(), w);
        }
        cv.notify_all();
    }
    let mut pending: HashMap<(u32, u8), Vec<u8>> = HashMap::new();
    while let Ok(Some(f)) = read_frame(&mut conn) {
        match f.kind {
            STDOUT | STDERR => {
                let only = if f.kind == STDOUT { mode.stdout_of } else { mode.stderr_of };
                if only.is_some_and(|t| t != f.task) {
                    continue;
                }
                let buf = pending.entry((f.task, f.kind)).or_default();
                buf.extend_from_slice(&f.data);
                emit(buf, f.task, f.kind, mode.label, mode.unbuffered);
            }
            OOM => {
                if let Ok(mut c) = collected.lock() {
                    c.oom.push(f.task);
                }
            }
            EXIT => {
                for ((t, k), buf) in pending.iter_mut() {
                    if *t == f.task {
                        emit(buf, *t, *k, mode.label, true);
                    }
                }
                let st = i32::from_be_bytes(f.data.get(..4).and_then(|b| b.try_into().ok()).unwrap_or([0; 4]));
                if let Ok(mut c) = collected.lock() {
                    c.exits.push((f.task, node.clone(), st));
                }
                changed.notify_one();
            }
            _ => {}
        }
    }
    for ((t, k), buf) in pending.iter_mut() {
        emit(buf, *t, *k, mode.label, true);
    }
    if let Ok(mut c) = collected.lock() {
        c.nodes_done += 1;
    }
    changed.notify_one();
}

/// Writes complete lines of a task's output (everything, with `flush_all`), labelled with
/// `-l`.
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

/// srun's stdin as a terminal in raw mode (`--pty`): keys go to the remote terminal as they
/// are typed, Ctrl-C included. The previous mode comes back when this is dropped.
pub struct RawTerminal {
    saved: nix::sys::termios::Termios,
}

impl RawTerminal {
    /// `None` when stdin is not a terminal.
    pub fn enter() -> Option<RawTerminal> {
        use nix::sys::termios::{cfmakeraw, tcgetattr, tcsetattr, SetArg};
        let stdin = std::io::stdin();
        let saved = tcgetattr(stdin.as_fd()).ok()?;
        let mut raw = saved.clone();
        cfmakeraw(&mut raw);
        tcsetattr(stdin.as_fd(), SetArg::TCSADRAIN, &raw).ok()?;
        Some(RawTerminal { saved })
    }
}

impl Drop for RawTerminal {
    fn drop(&mut self) {
        let _ =
            nix::sys::termios::tcsetattr(std::io::stdin().as_fd(), nix::sys::termios::SetArg::TCSADRAIN, &self.saved);
    }
}

/// The size of srun's terminal (rows, columns), if stdin is one.
pub fn terminal_size() -> Option<(u16, u16)> {
    let mut ws = nix::libc::winsize { ws_row: 0, ws_col: 0, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: TIOCGWINSZ writes one `winsize` through the pointer, which outlives the call.
    let r = unsafe { nix::libc::ioctl(0, nix::libc::TIOCGWINSZ, &mut ws) };
    (r == 0 && ws.ws_row > 0).then_some((ws.ws_row, ws.ws_col))
}

/// Whether srun may read its stdin without being stopped: not a terminal, or a terminal
/// whose foreground it is (`srun ... &` from an interactive shell must not take the
/// keyboard, or be stopped by SIGTTIN).
pub fn stdin_is_ours() -> bool {
    let stdin = std::io::stdin();
    match nix::unistd::tcgetpgrp(stdin.as_fd()) {
        Ok(fg) => fg == nix::unistd::getpgrp(),
        Err(_) => true,
    }
}
