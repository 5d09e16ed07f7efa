//! A step's standard streams on a real cluster: srun's stdin to the tasks `-i` picks, output
//! from the tasks `-o` picks, and `srun --pty` driven through a pseudo-terminal as a person
//! at a keyboard would (prompt, window size, Ctrl-C, exit code).

use drover_testkit::{Cluster, Options};
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_drover");

fn cluster() -> Cluster {
    Cluster::start(EXE, Options { nodes: 2, cpus: 2, ..Default::default() })
}

/// Runs srun with `input` on its stdin; (stdout lines sorted, exit code).
fn srun_with_stdin(c: &Cluster, args: &[&str], input: &str) -> (String, i32) {
    let mut child =
        c.command("srun", args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let mut lines: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().map(String::from).collect();
    lines.sort();
    (lines.join("\n"), out.status.code().unwrap_or(-1))
}

#[test]
fn stdin_reaches_the_tasks_input_picks_and_output_comes_from_those_output_picks() {
    let c = cluster();
    // Default: every task reads srun's stdin (Slurm's `--input=all`), on both nodes.
    let (out, rc) = srun_with_stdin(&c, &["-N2", "-n3", "-l", "cat"], "a\nb\n");
    assert_eq!((out.as_str(), rc), ("0: a\n0: b\n1: a\n1: b\n2: a\n2: b", 0));
    // One task.
    let (out, _) = srun_with_stdin(&c, &["-n2", "-i1", "-l", "bash", "-c", "cat; echo t$SLURM_PROCID"], "x\n");
    assert_eq!(out, "0: t0\n1: t1\n1: x");
    // None: stdin is closed at once, even with input waiting.
    let (out, _) = srun_with_stdin(&c, &["-n2", "--input=none", "-l", "bash", "-c", "cat; echo done"], "x\n");
    assert_eq!(out, "0: done\n1: done");
    // Output from one task only.
    let (out, _) = srun_with_stdin(&c, &["-n2", "-o", "1", "bash", "-c", "echo out$SLURM_PROCID"], "");
    assert_eq!(out, "out1");
    // A lot of input to a task that reads it slowly: nothing lost, nothing reordered.
    let big: String = (0..200_000).map(|i| format!("{i}\n")).collect();
    let (out, _) = srun_with_stdin(&c, &["-n1", "bash", "-c", "sleep 1; md5sum"], &big);
    let want = std::process::Command::new("md5sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut p| {
            p.stdin.take().unwrap().write_all(big.as_bytes())?;
            p.wait_with_output()
        })
        .unwrap();
    assert_eq!(out, String::from_utf8_lossy(&want.stdout).trim());
}

/// A terminal the test types into: srun runs on its slave side as its controlling terminal.
struct Keyboard {
    master: std::fs::File,
    seen: Arc<Mutex<String>>,
    child: std::process::Child,
}

impl Keyboard {
    fn start(c: &Cluster, args: &[&str], rows: u16, cols: u16) -> Keyboard {
        let ws = nix::pty::Winsize { ws_row: rows, ws_col: cols, ws_xpixel: 0, ws_ypixel: 0 };
        let pty = nix::pty::openpty(Some(&ws), None).unwrap();
        let slave: OwnedFd = pty.slave;
        let mut cmd = c.command("srun", args);
        cmd.env("PS1", "PROMPT> ")
            .stdin(slave.try_clone().unwrap())
            .stdout(slave.try_clone().unwrap())
            .stderr(slave.try_clone().unwrap());
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(|| {
                nix::unistd::setsid().map_err(std::io::Error::from)?;
                if nix::libc::ioctl(0, nix::libc::TIOCSCTTY, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().unwrap();
        drop(slave);
        let master = std::fs::File::from(pty.master);
        let seen = Arc::new(Mutex::new(String::new()));
        let (mut r, s) = (master.try_clone().unwrap(), seen.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = r.read(&mut buf) {
                if n == 0 {
                    break;
                }
                s.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Keyboard { master, seen, child }
    }

    fn type_(&mut self, keys: &str) {
        self.master.write_all(keys.as_bytes()).unwrap();
    }

    /// Waits for `text` to appear after what was already consumed; returns what came up to it.
    fn expect(&self, text: &str, timeout: Duration) -> String {
        let until = Instant::now() + timeout;
        loop {
            {
                let mut s = self.seen.lock().unwrap();
                if let Some(at) = s.find(text) {
                    let upto: String = s.drain(..at + text.len()).collect();
                    return upto;
                }
                assert!(Instant::now() < until, "no {text:?} on the terminal; it shows {s:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn resize(&self, rows: u16, cols: u16) {
        let ws = nix::libc::winsize { ws_row: rows, ws_col: cols, ws_xpixel: 0, ws_ypixel: 0 };
        // SAFETY: TIOCSWINSZ reads one winsize from the pointer during the call.
        unsafe { nix::libc::ioctl(self.master.as_raw_fd(), nix::libc::TIOCSWINSZ, &ws) };
    }
}

#[test]
fn srun_pty_gives_an_interactive_shell_a_terminal() {
    let c = cluster();
    let mut k = Keyboard::start(&c, &["--pty", "bash", "--norc", "--noprofile", "-i"], 33, 101);
    k.expect("PROMPT> ", Duration::from_secs(20));
    k.type_("tty; stty size; echo step=$SLURM_STEP_ID rows=$SLURM_PTY_WIN_ROW\n");
    let shown = k.expect("PROMPT> ", Duration::from_secs(10));
    assert!(shown.contains("/dev/pts/"), "{shown:?}");
    assert!(shown.contains("33 101\r\n"), "{shown:?}");
    assert!(shown.contains("step=0 rows=33\r\n"), "{shown:?}");
    // The window changes size: the remote terminal follows.
    k.resize(40, 120);
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        k.type_("stty size\n");
        let shown = k.expect("PROMPT> ", Duration::from_secs(10));
        if shown.contains("40 120\r\n") {
            break;
        }
        assert!(Instant::now() < until, "the size never followed: {shown:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    // Ctrl-C interrupts the foreground command, not the session.
    k.type_("sleep 60\n");
    k.expect("sleep 60\r\n", Duration::from_secs(5));
    std::thread::sleep(Duration::from_millis(300));
    let t0 = Instant::now();
    k.type_("\x03");
    k.expect("PROMPT> ", Duration::from_secs(10));
    assert!(t0.elapsed() < Duration::from_secs(10));
    k.type_("echo still-here; exit 7\n");
    k.expect("still-here\r\n", Duration::from_secs(10));
    let status = k.child.wait().unwrap();
    assert_eq!(status.code(), Some(7));
    let tail = k.expect("Exited with exit code 7", Duration::from_secs(5));
    assert!(tail.contains("srun: error: node1: task 0: "), "{tail:?}");
}
