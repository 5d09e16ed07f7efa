//! `drover up` as the README tells a newcomer to use it: start, submit, stop, start again with
//! the same state and find the job.

use std::process::Command;
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_drover");

#[test]
fn drover_up_runs_jobs_and_keeps_them_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("cluster");
    let s = state.display().to_string();
    let up = Command::new(EXE).args(["up", "--detach", "--nodes", "2", "--state-dir", &s]).output().unwrap();
    let stdout = String::from_utf8_lossy(&up.stdout).to_string();
    assert!(up.status.success(), "{}{}", stdout, String::from_utf8_lossy(&up.stderr));
    assert_eq!(stdout, format!("export PATH={s}/bin:$PATH SLURM_CONF={s}/slurm.conf\n"));
    let run = |prog: &str, args: &[&str]| {
        Command::new(state.join("bin").join(prog))
            .args(args)
            .env("SLURM_CONF", state.join("slurm.conf"))
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    let sinfo = String::from_utf8_lossy(&run("sinfo", &["-h", "-o", "%P %D %t"]).stdout).to_string();
    assert_eq!(sinfo, "debug* 2 idle\n");
    let out = run("sbatch", &["--parsable", "--hold", "--wrap", "echo kept"]);
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(!id.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    // A second `drover up` on the same state refuses while the first runs.
    let again = Command::new(EXE).args(["up", "--detach", "--state-dir", &s]).output().unwrap();
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already running"));
    let down = Command::new(EXE).args(["down", "--state-dir", &s]).output().unwrap();
    assert!(down.status.success());
    assert!(!run("squeue", &[]).status.success(), "the controller is gone");
    let up = Command::new(EXE).args(["up", "--detach", "--state-dir", &s]).output().unwrap();
    assert!(up.status.success(), "{}", String::from_utf8_lossy(&up.stderr));
    let q = String::from_utf8_lossy(&run("squeue", &["-h", "-o", "%i %T %r"]).stdout).to_string();
    assert_eq!(q, format!("{id} PENDING JobHeldUser\n"));
    assert!(run("scontrol", &["release", &id]).status.success());
    let t = Instant::now();
    loop {
        let st = String::from_utf8_lossy(&run("squeue", &["-h", "-t", "all", "-j", &id, "-o", "%T"]).stdout)
            .trim()
            .to_string();
        if st == "COMPLETED" {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "job {id} is {st}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(std::fs::read_to_string(dir.path().join(format!("slurm-{id}.out"))).unwrap(), "kept\n");
    // Accounting came up with the cluster (SQLite in its state directory) and has the job.
    let t = Instant::now();
    loop {
        let out = run("sacct", &["-n", "-P", "-X", "-j", &id, "-o", "JobID,State"]);
        if String::from_utf8_lossy(&out.stdout) == format!("{id}|COMPLETED\n") {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "sacct: {}", String::from_utf8_lossy(&out.stderr));
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(state.join("state/accounting.db").exists());
    assert!(Command::new(EXE).args(["down", "--state-dir", &s]).output().unwrap().status.success());
}
