//! `drover up` as the README tells a newcomer to use it: start, submit, stop, start again with
//! the same state and find the job.

use std::process::Command;
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_drover");

/// Stops the cluster of a state directory when the test ends, passed or failed (a failed
/// assertion otherwise leaves its daemons running after the test).
struct DownAtEnd(String);

impl Drop for DownAtEnd {
    fn drop(&mut self) {
        let _ = Command::new(EXE).args(["down", "--state-dir", &self.0]).output();
    }
}

/// A command of the cluster in `state`, run in `cwd`.
fn run_in(state: &std::path::Path, cwd: &std::path::Path, prog: &str, args: &[&str]) -> std::process::Output {
    Command::new(state.join("bin").join(prog))
        .args(args)
        .env("SLURM_CONF", state.join("slurm.conf"))
        .current_dir(cwd)
        .output()
        .unwrap()
}

#[test]
fn drover_up_runs_jobs_and_keeps_them_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("cluster");
    let s = state.display().to_string();
    let _down = DownAtEnd(s.clone());
    let up = Command::new(EXE).args(["up", "--detach", "--nodes", "2", "--state-dir", &s]).output().unwrap();
    let stdout = String::from_utf8_lossy(&up.stdout).to_string();
    assert!(up.status.success(), "{}{}", stdout, String::from_utf8_lossy(&up.stderr));
    assert_eq!(stdout, format!("export PATH={s}/bin:$PATH SLURM_CONF={s}/slurm.conf\n"));
    let run = |prog: &str, args: &[&str]| run_in(&state, dir.path(), prog, args);
    // Every command Drover implements is in bin/ (one missing there is real Slurm's on a host
    // that has both), and each is Drover's.
    let mut bin: Vec<String> = std::fs::read_dir(state.join("bin"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    bin.sort();
    let want =
        "drover sacct sacctmgr salloc sattach sbatch scancel scontrol scrontab sdiag sinfo sprio squeue sreport srun sshare \
                sstat";
    assert_eq!(bin.join(" "), want);
    for prog in &bin[1..] {
        let v = run(prog, &["--version"]);
        if prog == "scrontab" {
            // Slurm's scrontab takes no long options (getopt "elru:v"): its usage, exit 1.
            assert_eq!(String::from_utf8_lossy(&v.stderr), "Usage: scrontab [-u user] [-e | -l | -r] [file]\n");
            assert_eq!(v.status.code(), Some(1));
            continue;
        }
        // Debian's Slurm: the same line from every command.
        assert_eq!(String::from_utf8_lossy(&v.stdout), "slurm-wlm 22.05.8\n", "{prog} --version");
    }
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

/// `drover up --auth munge`: the cluster starts a munged of its own (its own key, its socket
/// in the state directory), everything authenticates through it, and `drover down` stops it.
#[test]
fn drover_up_with_munge_runs_its_own_munged() {
    if !std::path::Path::new("/usr/sbin/munged").exists() {
        drover_testkit::skip("MUNGE is not installed (apt-get install munge)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("cluster");
    let s = state.display().to_string();
    let _down = DownAtEnd(s.clone());
    let up = Command::new(EXE)
        .args(["up", "--detach", "--nodes", "1", "--auth", "munge", "--state-dir", &s])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&up.stderr).to_string();
    assert!(up.status.success(), "{err}");
    assert!(err.contains("drover: starting munged"), "{err}");
    let conf = std::fs::read_to_string(state.join("slurm.conf")).unwrap();
    assert!(conf.contains("AuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket="), "{conf}");
    let run = |prog: &str, args: &[&str]| run_in(&state, dir.path(), prog, args);
    let out = run("srun", &["-N1", "echo", "munged"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "munged\n", "{}", String::from_utf8_lossy(&out.stderr));
    let munged: i32 = std::fs::read_to_string(state.join("run/munged.pid")).unwrap().trim().parse().unwrap();
    let down = Command::new(EXE).args(["down", "--state-dir", &s]).output().unwrap();
    assert!(down.status.success());
    let t = Instant::now();
    while nix::sys::signal::kill(nix::unistd::Pid::from_raw(munged), None).is_ok()
        && !std::fs::read_to_string(format!("/proc/{munged}/stat")).unwrap_or_default().contains(") Z")
    {
        assert!(t.elapsed() < Duration::from_secs(10), "munged still runs after drover down");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The attack on fairness: on a `drover up` cluster a job with `--mem=50M` that allocated
/// 300 MB completed normally, taking memory other users' jobs were promised. `drover up` now
/// confines jobs as SchedMD recommends for production, and the job ends OUT_OF_MEMORY.
#[test]
fn drover_up_holds_jobs_to_their_memory() {
    if !drover_testkit::root_or_skip("cgroups need root") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("cluster");
    let s = state.display().to_string();
    let _down = DownAtEnd(s.clone());
    let up = Command::new(EXE).args(["up", "--detach", "--nodes", "1", "--state-dir", &s]).output().unwrap();
    assert!(up.status.success(), "{}", String::from_utf8_lossy(&up.stderr));
    let conf = std::fs::read_to_string(state.join("cgroup.conf")).unwrap();
    assert!(conf.contains("ConstrainCores=yes\nConstrainRAMSpace=yes\nConstrainDevices=yes\n"), "{conf}");
    let run = |prog: &str, args: &[&str]| run_in(&state, dir.path(), prog, args);
    let out = run("sbatch", &["--parsable", "--mem=50M", "--wrap", "python3 -c 'x = bytearray(300 * 1024 * 1024)'"]);
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(!id.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    let t = Instant::now();
    let st = loop {
        let st = String::from_utf8_lossy(&run("squeue", &["-h", "-t", "all", "-j", &id, "-o", "%T"]).stdout)
            .trim()
            .to_string();
        if !matches!(st.as_str(), "PENDING" | "RUNNING" | "CONFIGURING" | "COMPLETING" | "") {
            break st;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "job {id} is {st}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let node = String::from_utf8_lossy(&run("scontrol", &["-d", "show", "node", "node1"]).stdout).to_string();
    let _ = Command::new(EXE).args(["down", "--state-dir", &s]).output();
    assert_eq!(st, "OUT_OF_MEMORY", "{node}");
}

/// `drover up` on a cluster found partly running (its controller killed, its agents alive)
/// starts only what is missing; before, each restart started another full set of node
/// agents, and `drover down` left them and accounting running.
#[test]
fn drover_up_restarts_only_what_is_missing_and_down_stops_everything() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("cluster");
    let s = state.display().to_string();
    let _down = DownAtEnd(s.clone());
    let up = Command::new(EXE).args(["up", "--detach", "--nodes", "2", "--state-dir", &s]).output().unwrap();
    assert!(up.status.success(), "{}", String::from_utf8_lossy(&up.stderr));
    let conf = state.join("slurm.conf").display().to_string();
    let daemons = || drover_testkit::processes_with(&s);
    let before = daemons();
    assert_eq!(before.len(), 4, "controller, accounting and two agents: {before:?}");
    let ctl: i32 = std::fs::read_to_string(state.join("run/controller.pid")).unwrap().trim().parse().unwrap();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(ctl), nix::sys::signal::Signal::SIGKILL).unwrap();
    // A killed process takes a moment to go (longer on a loaded machine): until then it runs,
    // and drover up rightly finds the cluster whole.
    let t = Instant::now();
    while std::fs::read_to_string(format!("/proc/{ctl}/stat"))
        .is_ok_and(|st| st.rsplit_once(')').is_some_and(|(_, r)| !r.trim_start().starts_with('Z')))
    {
        assert!(t.elapsed() < Duration::from_secs(10), "the killed controller did not go");
        std::thread::sleep(Duration::from_millis(10));
    }
    let again = Command::new(EXE).args(["up", "--detach", "--state-dir", &s]).output().unwrap();
    let err = String::from_utf8_lossy(&again.stderr).to_string();
    assert!(again.status.success(), "{err}");
    assert!(err.contains("node agents of node[1-2] run: kept") && err.contains("accounting runs (pid"), "{err}");
    assert!(err.contains("starting the controller") && !err.contains("starting 2 node agents"), "{err}");
    let after = daemons();
    assert_eq!(after.len(), 4, "one more controller and nothing else: {after:?}");
    // Everything comes up whole: a job runs.
    let out = run_in(&state, dir.path(), "srun", &["-N2", "true"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // An agent started behind drover up's back (an older drover up started such duplicates):
    // drover down stops it too.
    let stray = Command::new(EXE)
        .args(["node", "-f", &conf, "-N", "node1"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let down = Command::new(EXE).args(["down", "--state-dir", &s]).output().unwrap();
    assert!(down.status.success());
    let _ = stray.wait_with_output();
    let t = Instant::now();
    while !daemons().is_empty() {
        assert!(t.elapsed() < Duration::from_secs(10), "left running: {:?}", daemons());
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `drover up --controllers 2` as docs/ha.md walks through it: two controllers answer
/// `scontrol ping`; the primary killed, a submission waits for the standby and is accepted; a
/// second `drover up` brings the primary back, which takes control again; `drover down`
/// stops both.
#[test]
fn drover_up_with_a_standby_controller_fails_over() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("cluster");
    let s = state.display().to_string();
    let _down = DownAtEnd(s.clone());
    let up = Command::new(EXE)
        .args(["up", "--detach", "--nodes", "1", "--controllers", "2", "--no-accounting", "--state-dir", &s])
        .output()
        .unwrap();
    assert!(up.status.success(), "{}", String::from_utf8_lossy(&up.stderr));
    let conf = std::fs::read_to_string(state.join("slurm.conf")).unwrap();
    assert!(conf.contains("SlurmctldHost=ctl1(127.0.0.1)\nSlurmctldHost=ctl2(127.0.0.2)\n"), "{conf}");
    let ping = run_in(&state, dir.path(), "scontrol", &["ping"]);
    assert_eq!(
        String::from_utf8_lossy(&ping.stdout),
        "Slurmctld(primary) at ctl1 is UP\nSlurmctld(backup) at ctl2 is UP\n"
    );
    let primary: i32 = std::fs::read_to_string(state.join("run/controller.pid")).unwrap().trim().parse().unwrap();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(primary), nix::sys::signal::Signal::SIGKILL).unwrap();
    let t = Instant::now();
    let out = run_in(&state, dir.path(), "sbatch", &["--wrap", "true"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    let log = std::fs::read_to_string(state.join("log/controller-ctl2.log")).unwrap();
    assert!(log.contains("took control: term 2"), "{log}");
    let again = Command::new(EXE).args(["up", "--detach", "--state-dir", &s]).output().unwrap();
    let err = String::from_utf8_lossy(&again.stderr).to_string();
    assert!(again.status.success() && err.contains("starting the controller ctl1"), "{err}");
    let t = Instant::now();
    loop {
        let log = std::fs::read_to_string(state.join("log/controller-ctl1.log")).unwrap_or_default();
        if log.contains("took control: term 3") {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "{log}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let down = Command::new(EXE).args(["down", "--state-dir", &s]).output().unwrap();
    assert!(down.status.success());
    let t = Instant::now();
    while !drover_testkit::processes_with(&s).is_empty() {
        assert!(t.elapsed() < Duration::from_secs(10), "left running: {:?}", drover_testkit::processes_with(&s));
        std::thread::sleep(Duration::from_millis(100));
    }
}
