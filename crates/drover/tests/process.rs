//! The binary's own entry point (`#![no_main]` in main.rs) keeps what std's start-up did for
//! every command and daemon.

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};

const EXE: &str = env!("CARGO_BIN_EXE_drover");

/// Writing to a pipe nobody reads is an error the program sees (`EPIPE`), not a SIGPIPE that
/// kills it: daemons and commands write to sockets whose peer may have gone.
#[test]
fn a_closed_pipe_does_not_kill_the_writer() {
    let mut child = Command::new(EXE)
        .args(["scontrol", "show", "hostnames", "n[1-60000]"])
        .env_remove("SLURM_CONF")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut first = [0u8; 3];
    out.read_exact(&mut first).unwrap();
    assert_eq!(&first, b"n1\n");
    drop(out);
    let st = child.wait().unwrap();
    assert_eq!(st.signal(), None, "killed by signal {:?}", st.signal());
    assert!(!st.success());
}
