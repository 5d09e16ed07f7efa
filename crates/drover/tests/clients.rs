//! The client libraries people drive Slurm with, unchanged, on a real cluster: each installed
//! from PyPI (pinned) into a throw-away venv, its script (`tests/clients/`) run by an ordinary
//! user, its jobs run as that user. submitit (a function, an array, the preemption signal
//! and requeue), dask-jobqueue (three workers), Parsl (a 2-node block through srun),
//! simple-slurm (an array on stdin, a dependency, srun), Snakemake with its Slurm executor
//! plugin (nested srun from a stripped environment) and Toil (`--batchSystem slurm`).
//!
//! Needs root (a test user) and PyPI; downloads are cached in the target directory.

use drover_testkit::{Cluster, Options, TestUser};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

const EXE: &str = env!("CARGO_BIN_EXE_drover");

/// Debian's interpreter: a venv's `python` links to its base, which an ordinary user must be
/// able to run (a pyenv one under `/root` is not).
const PYTHON: &str = "/usr/bin/python3";

/// A cluster, a user of it, their working directory and a venv with the client installed.
struct Client {
    c: Cluster,
    user: TestUser,
    work: tempfile::TempDir,
    venv: tempfile::TempDir,
}

/// `packages` installed (pinned) into a new venv, a cluster of two 2-CPU nodes with
/// accounting, and a user. None (the test skipped) without root, or without PyPI outside
/// the strict run.
fn client(tag: &str, packages: &[&str]) -> Option<Client> {
    if !drover_testkit::root_or_skip("client tests run jobs as a test user") {
        return None;
    }
    use std::os::unix::fs::PermissionsExt;
    let venv = tempfile::Builder::new().prefix("drover-venv-").tempdir().expect("a temp dir");
    std::fs::set_permissions(venv.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let made = Command::new(PYTHON).args(["-m", "venv"]).arg(venv.path()).output().expect("run python3 -m venv");
    assert!(made.status.success(), "python3 -m venv: {}", String::from_utf8_lossy(&made.stderr));
    let cache = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("pip-cache");
    let pip = Command::new(venv.path().join("bin/pip"))
        .args(["install", "-q", "--disable-pip-version-check"])
        .args(packages)
        .env("PIP_CACHE_DIR", &cache)
        .output()
        .expect("run pip");
    if !pip.status.success() {
        let why = format!("pip install {packages:?} failed: {}", String::from_utf8_lossy(&pip.stderr));
        assert!(!drover_testkit::strict(), "{why}");
        drover_testkit::skip(&why);
        return None;
    }
    let user = TestUser::create(&format!("dcl{tag}{}", std::process::id() % 10000));
    let work = tempfile::Builder::new().prefix("drover-client-").tempdir().expect("a temp dir");
    nix::unistd::chown(work.path(), Some(user.uid.into()), Some(user.gid.into())).expect("chown the work dir");
    let c = Cluster::start(EXE, Options { nodes: 2, cpus: 2, accounting: true, ..Default::default() });
    // The user charges an account of their own (Snakemake's plugin asks sacctmgr which).
    c.ok("sacctmgr", &["-i", "add", "account", "lab"]);
    c.ok("sacctmgr", &["-i", "add", "user", &user.name, "Account=lab"]);
    Some(Client { c, user, work, venv })
}

impl Client {
    /// `tests/clients/FILE` (a file or a directory) copied into the user's working directory.
    fn copy(&self, file: &str) {
        let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients").join(file);
        let st = Command::new("cp").arg("-r").arg(&from).arg(self.work.path()).status().expect("cp");
        assert!(st.success(), "copy {}", from.display());
        let st = Command::new("chown")
            .args(["-R", &format!("{}:{}", self.user.uid, self.user.gid)])
            .arg(self.work.path())
            .status()
            .expect("chown");
        assert!(st.success());
    }

    /// `PROGRAM ARGS` from the venv, as the user in their working directory (or `sub` below
    /// it), with the cluster's commands on PATH, within `limit`.
    fn run(&self, sub: &str, program: &str, args: &[&str], limit: Duration) -> Output {
        use std::os::unix::process::CommandExt;
        let bin = self.venv.path().join("bin");
        let mut cmd = Command::new("timeout");
        cmd.arg(limit.as_secs().to_string())
            .arg(bin.join(program))
            .args(args)
            .env_clear()
            .env("PATH", format!("{}:{}:/usr/bin:/bin", bin.display(), self.c.bin.display()))
            .env("SLURM_CONF", &self.c.conf)
            .env("HOME", format!("/home/{}", self.user.name))
            .env("USER", &self.user.name)
            .env("LOGNAME", &self.user.name)
            .env("LANG", "C.UTF-8")
            .env("TOIL_HISTORY", "False")
            .current_dir(self.work.path().join(sub))
            .uid(self.user.uid)
            .gid(self.user.gid);
        cmd.output().expect("run the client")
    }

    /// Runs `tests/clients/SCRIPT` with the venv's python; it must succeed and say `ok`.
    fn check(&self, script: &str) {
        self.copy(script);
        let o = self.run("", "python", &[script], Duration::from_secs(400));
        self.assert_ok(script, &o, ": ok");
    }

    fn assert_ok(&self, what: &str, o: &Output, want: &str) {
        let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert!(
            o.status.success() && out.contains(want),
            "{what} failed ({}):\n{out}\n{err}\n-- the cluster's jobs:\n{}\n-- its logs:\n{}",
            o.status,
            String::from_utf8_lossy(&self.c.run("sacct", &["-a", "-X", "-o", "JobID,JobName,State,ExitCode"]).stdout),
            self.c.logs()
        );
        print!("{out}");
    }
}

#[test]
fn submitit_runs_functions_arrays_and_requeues_on_preemption() {
    let Some(t) = client("sub", &["submitit==1.5.4"]) else { return };
    t.check("submitit_check.py");
}

#[test]
fn dask_jobqueue_scales_to_three_workers() {
    let Some(t) = client("dask", &["dask-jobqueue==0.9.0", "dask==2026.8.0", "distributed==2026.8.0"]) else {
        return;
    };
    t.check("dask_jobqueue_check.py");
}

#[test]
fn parsl_runs_a_two_node_block() {
    let Some(t) = client("parsl", &["parsl==2026.10.26"]) else { return };
    t.check("parsl_check.py");
}

#[test]
fn simple_slurm_submits_arrays_dependencies_and_steps() {
    let Some(t) = client("simple", &["simple_slurm==0.3.6"]) else { return };
    t.check("simple_slurm_check.py");
}

#[test]
fn snakemakes_slurm_executor_runs_a_workflow() {
    let Some(t) = client("smk", &["snakemake==9.27.1", "snakemake-executor-plugin-slurm==2.8.0"]) else {
        return;
    };
    t.copy("snakemake");
    let o = t.run(
        "snakemake",
        "snakemake",
        &[
            "--executor",
            "slurm",
            "--jobs",
            "3",
            "--default-resources",
            "slurm_partition=debug",
            "--slurm-init-seconds-before-status-checks",
            "1",
            "--seconds-between-status-checks",
            "1",
        ],
        Duration::from_secs(400),
    );
    t.assert_ok("snakemake --executor slurm", &o, "");
    let joined =
        std::fs::read_to_string(t.work.path().join("snakemake/out/joined.txt")).expect("the workflow's result");
    let lines: Vec<&str> = joined.lines().collect();
    assert_eq!(lines.len(), 4, "{joined}");
    // Each rule its own job, its command a step of it (the plugin's nested srun).
    let mut jobs: Vec<&str> = lines[..3].iter().map(|l| l.split(' ').nth(1).unwrap()).collect();
    jobs.sort();
    jobs.dedup();
    assert_eq!(jobs.len(), 3, "{joined}");
    assert!(lines[..3].iter().all(|l| l.ends_with(" step 0")), "{joined}");
    assert_eq!(lines[3], "threads 2 cpus 2", "{joined}");
}

#[test]
fn toil_runs_a_workflow_of_batch_jobs() {
    let Some(t) = client("toil", &["toil==9.6.0"]) else { return };
    t.check("toil_check.py");
}
