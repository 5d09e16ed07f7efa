//! Controller failover over a shared StateSaveLocation (several `SlurmctldHost` lines): a
//! standby takes control when the primary dies, commands and node agents follow it, a
//! primary that comes back takes control again, `scontrol takeover` hands control over, and
//! a controller frozen past its lease is fenced: it writes nothing and stands by.

use drover_testkit::{Cluster, Options};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::path::Path;
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_drover");

fn pair() -> Cluster {
    Cluster::start(EXE, Options { nodes: 2, controllers: 2, ..Default::default() })
}

fn log_of(c: &Cluster, index: usize) -> String {
    let name = if index == 0 { "controller.log".to_string() } else { format!("controller-ctl{}.log", index + 1) };
    std::fs::read_to_string(c.path().join("log").join(name)).unwrap_or_default()
}

fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

/// A job that appends one line to `ran.ID` in the cluster's directory: two lines would mean
/// it ran twice.
fn job(c: &Cluster) -> u32 {
    c.submit(&["-o", "/dev/null", "--wrap", "echo ran >> ran.$SLURM_JOB_ID; sleep 1"])
}

fn ran_once(c: &Cluster, ids: &[u32]) {
    for id in ids {
        c.wait_state(*id, &["COMPLETED"], Duration::from_secs(60));
        let text = std::fs::read_to_string(c.path().join(format!("ran.{id}"))).unwrap_or_default();
        assert_eq!(text, "ran\n", "job {id} must have run exactly once");
    }
}

fn ping(c: &Cluster) -> (String, bool) {
    let out = c.run("scontrol", &["ping"]);
    (String::from_utf8_lossy(&out.stdout).to_string(), out.status.success())
}

#[test]
fn a_standby_takes_over_when_the_primary_dies_and_hands_back() {
    let mut c = pair();
    let (out, ok) = ping(&c);
    assert!(ok);
    assert!(
        out.starts_with("Slurmctld(primary) at ctl1 is UP\nSlurmctld(backup) at ctl2 is UP\n"),
        "Slurm's ping lines for a pair: {out}"
    );
    let mut ids: Vec<u32> = (0..3).map(|_| job(&c)).collect();
    // An srun whose step runs across the failover: its tasks' I/O and its end reach it.
    let srun = c
        .command("srun", &["-N2", "-n2", "bash", "-c", "sleep 5; echo survived"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    c.wait_until("srun's step to run", Duration::from_secs(20), || {
        c.ok("squeue", &["-h", "-s", "-o", "%i %j"]).lines().any(|l| l.ends_with(".0 bash"))
    });

    c.kill_controller_at(0);
    let t = Instant::now();
    // sbatch finds no controller in control and waits, as Slurm's commands wait out a
    // failover (up to one and a half SlurmctldTimeouts and a MessageTimeout: 14.5 s here).
    ids.push(job(&c));
    let took = t.elapsed();
    assert!(took < Duration::from_secs(15), "a submission waited {took:?} for the standby");
    assert!(log_of(&c, 1).contains("took control: term"), "{}", log_of(&c, 1));
    let (out, ok) = ping(&c);
    assert!(ok, "one controller answers: exit 0");
    assert!(out.starts_with("Slurmctld(primary) at ctl1 is DOWN\nSlurmctld(backup) at ctl2 is UP\n"), "{out}");
    // The node agents followed: the jobs of both controllers run to the end, each once.
    ran_once(&c, &ids);
    let out = srun.wait_with_output().unwrap();
    assert!(out.status.success(), "srun across the failover: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "survived\nsurvived\n");

    // The primary comes back and asks for control, as Slurm's does.
    c.start_controller();
    c.wait_until("the primary to take control again", Duration::from_secs(20), || {
        count(&log_of(&c, 0), "took control: term") >= 2
    });
    assert!(log_of(&c, 1).contains("handed control over"), "{}", log_of(&c, 1));
    c.wait_until("both to answer", Duration::from_secs(20), || ping(&c).0.matches(" is UP").count() == 2);
    let after = job(&c);
    ran_once(&c, &[after]);

    // scontrol takeover: the backup asks for control and answers once it has it.
    let before = count(&log_of(&c, 1), "took control: term");
    let out = c.run("scontrol", &["takeover"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(count(&log_of(&c, 1), "took control: term"), before + 1);
    let last = job(&c);
    ran_once(&c, &[last]);
    let all = c.ok("squeue", &["-h", "-t", "all", "-o", "%i"]);
    for id in ids.iter().chain([&after, &last]) {
        assert!(all.lines().any(|l| l.trim() == id.to_string()), "job {id} is known after three handovers: {all}");
    }

    let out = c.run("scontrol", &["takeover", "2"]);
    assert!(!out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stderr), "takeover: invalid backup controller index (2)\n");
}

/// A controller frozen past its lease (a paused container, a stalled host) wakes up to find
/// another in control: it must write nothing (its journal writes are fenced) and stand by.
/// Without the fence it would go on committing into the journal the other one now owns.
#[test]
fn a_frozen_controller_is_fenced_and_writes_nothing() {
    let c = pair();
    let first = job(&c);
    let primary = Pid::from_raw(c.controller_pid(0).unwrap());
    kill(primary, Signal::SIGSTOP).unwrap();
    c.wait_until("the backup to take control", Duration::from_secs(20), || {
        log_of(&c, 1).contains("took control: term")
    });
    // Acknowledged by the backup while the primary is frozen.
    let second = job(&c);
    let journal = c.path().join("state/journal");
    let before = segments(&journal);
    kill(primary, Signal::SIGCONT).unwrap();
    c.wait_until("the woken primary to be fenced", Duration::from_secs(20), || log_of(&c, 0).contains("fenced:"));
    let log = log_of(&c, 0);
    let fenced_at = log.find("fenced:").unwrap();
    assert!(log[fenced_at..].contains("standing by"), "it stands by after the fence: {log}");
    assert!(!log[fenced_at..].contains("took control"), "{log}");
    // The segments the backup writes were not touched by the frozen one: every file that
    // was there is a prefix of what is there now (only the backup appended).
    for (path, bytes) in before {
        let now = std::fs::read(&path).unwrap_or_default();
        assert!(now.starts_with(&bytes) || !path.exists(), "{} was rewritten", path.display());
    }
    ran_once(&c, &[first, second]);
    let third = job(&c);
    ran_once(&c, &[third]);
    // And the state reads back whole.
    let out = std::process::Command::new(EXE)
        .args(["controller", "--check-state", c.path().join("state").to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
}

fn segments(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("journal."))
        .map(|e| (e.path(), std::fs::read(e.path()).unwrap()))
        .collect();
    out.sort();
    out
}
