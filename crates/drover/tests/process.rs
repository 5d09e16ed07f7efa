//! The binary's own entry point (`#![no_main]` in main.rs) keeps what std's start-up did for
//! every command and daemon.

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};

const EXE: &str = env!("CARGO_BIN_EXE_drover");

/// `squeue | head`: a command whose reader has gone ends silently by SIGPIPE, as Slurm's do,
/// not with a panic's message and backtrace on its standard error.
#[test]
fn a_command_whose_reader_left_ends_quietly_by_sigpipe() {
    let mut child = Command::new(EXE)
        .args(["scontrol", "show", "hostnames", "n[1-60000]"])
        .env_remove("SLURM_CONF")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut first = [0u8; 3];
    out.read_exact(&mut first).unwrap();
    assert_eq!(&first, b"n1\n");
    drop(out);
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let st = child.wait().unwrap();
    assert_eq!(st.signal(), Some(libc::SIGPIPE), "{st:?}: {err}");
    assert_eq!(err, "");
}
