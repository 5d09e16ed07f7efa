//! The node's `Prolog` and `Epilog` (as root, once per job on this node, with Slurm's
//! environment), the per-task `TaskProlog` output protocol, and the health check.
//!
//! The prolog runs before the job's first task here: whichever supervisor (batch script or
//! step) or the agent (`PrologFlags=Alloc`) comes first runs it under a lock on
//! `SPOOL/prolog/job<N>`, which then records the outcome for the others. The epilog runs when
//! the controller says the job is over, and clears that record.

use drover_model::hostlist::Hostlist;
use drover_proto::v1;
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// How long a prolog or epilog may run before it counts as failed (Slurm's `PrologEpilogTimeout`
/// default is unlimited; a hung prolog must not hold a node forever).
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(300);

fn marker(spool: &Path, job: u32) -> PathBuf {
    spool.join("prolog").join(format!("job{job}"))
}

/// Where the job runs and who it is, for its prolog or epilog.
pub struct Context<'a> {
    pub job: &'a v1::JobInfo,
    pub node: &'a str,
    pub cluster: &'a str,
    pub conf_path: &'a str,
}

/// Slurm's environment for a prolog (`prolog_slurmd`) or epilog (`epilog_slurmd`).
pub fn script_env(c: &Context<'_>, context: &str) -> Vec<(String, String)> {
    let job = c.job;
    let spec = job.spec.clone().unwrap_or_default();
    let nodes: Vec<String> = job.alloc.iter().map(|a| a.node.clone()).collect();
    let cpus: Vec<u32> = job.alloc.iter().map(|a| a.cpu_ids.len() as u32).collect();
    let id = job.job_id.to_string();
    let mut env = vec![
        ("SLURMD_NODENAME".to_string(), c.node.to_string()),
        ("SLURM_CLUSTER_NAME".into(), c.cluster.to_string()),
        ("SLURM_CONF".into(), c.conf_path.to_string()),
        ("SLURM_JOBID".into(), id.clone()),
        ("SLURM_JOB_CPUS_PER_NODE".into(), drover_model::job::fmt_counts(&cpus)),
        ("SLURM_JOB_GID".into(), spec.gid.to_string()),
        ("SLURM_JOB_ID".into(), id),
        ("SLURM_JOB_NUM_NODES".into(), nodes.len().to_string()),
        ("SLURM_JOB_PARTITION".into(), job.partition.clone()),
        ("SLURM_JOB_RESTART_COUNT".into(), job.restarts.to_string()),
        ("SLURM_JOB_UID".into(), spec.uid.to_string()),
        ("SLURM_JOB_USER".into(), spec.user.clone()),
        ("SLURM_JOB_WORK_DIR".into(), spec.work_dir.clone()),
        ("SLURM_NODELIST".into(), Hostlist::from_iter(&nodes).ranged()),
        ("SLURM_SCRIPT_CONTEXT".into(), context.to_string()),
        ("SLURM_UID".into(), spec.uid.to_string()),
    ];
    if spec.batch {
        env.push(("SLURM_JOB_STDIN".into(), spec.stdin.clone().unwrap_or_else(|| "/dev/null".into())));
        let out = spec.stdout.clone().unwrap_or_else(|| "slurm-%j.out".into());
        env.push(("SLURM_JOB_STDERR".into(), spec.stderr.clone().unwrap_or_else(|| out.clone())));
        env.push(("SLURM_JOB_STDOUT".into(), out));
    }
    if context == "epilog_slurmd" {
        let st = job.exit_status;
        let code = if st & 0x7f != 0 { 0 } else { (st >> 8) & 0xff };
        let sig = st & 0x7f;
        env.push(("SLURM_JOB_DERIVED_EC".into(), "0".into()));
        env.push(("SLURM_JOB_EXIT_CODE".into(), st.to_string()));
        env.push(("SLURM_JOB_EXIT_CODE2".into(), format!("{code}:{sig}")));
    }
    env.sort();
    env
}

/// Runs `program` with exactly `env` (and stdin from /dev/null); `Ok(())` on exit status 0,
/// else its status and first output line.
pub fn run_script(program: &str, env: &[(String, String)], timeout: Duration) -> Result<(), (i32, String)> {
    let mut out = tempfile::tempfile().map_err(|e| (-1, e.to_string()))?;
    let err = out.try_clone().map_err(|e| (-1, e.to_string()))?;
    let mut cmd = Command::new(program);
    cmd.env_clear()
        .envs(env.iter().cloned())
        .stdin(Stdio::null())
        .stdout(out.try_clone().map_err(|e| (-1, e.to_string()))?)
        .stderr(err)
        .current_dir("/");
    let mut child = cmd.spawn().map_err(|e| (-1, format!("{program}: {e}")))?;
    let until = std::time::Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if std::time::Instant::now() < until => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err((-1, format!("{program} timed out")));
            }
        }
    };
    if status.success() {
        return Ok(());
    }
    let mut text = String::new();
    let _ = out.seek(std::io::SeekFrom::Start(0));
    let _ = out.read_to_string(&mut text);
    let code = std::os::unix::process::ExitStatusExt::into_raw(status);
    let first = text.lines().next().unwrap_or_default().trim().to_string();
    Err((code, first))
}

/// The job's prolog on this node, run by the first that needs it; later callers get the
/// recorded outcome. `Err`: the prolog's exit status and output (already logged in
/// `SPOOL/prolog/job<N>`).
pub fn prolog_once(spool: &Path, program: &str, c: &Context<'_>) -> Result<(), (i32, String)> {
    let path = marker(spool, c.job.job_id);
    let _ = std::fs::create_dir_all(path.parent().expect("invariant: under the spool"));
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| (-1, e.to_string()))?;
    // SAFETY: flock on an fd we own; released when it closes.
    if unsafe { nix::libc::flock(f.as_raw_fd(), nix::libc::LOCK_EX) } != 0 {
        return Err((-1, std::io::Error::last_os_error().to_string()));
    }
    let mut done = String::new();
    let _ = f.read_to_string(&mut done);
    if let Some(rest) = done.strip_prefix("fail ") {
        let (code, out) = rest.split_once(' ').unwrap_or((rest, ""));
        return Err((code.trim().parse().unwrap_or(1), out.trim().to_string()));
    }
    if done.starts_with("ok") {
        return Ok(());
    }
    let r = run_script(program, &script_env(c, "prolog_slurmd"), SCRIPT_TIMEOUT);
    let record = match &r {
        Ok(()) => "ok\n".to_string(),
        Err((code, out)) => format!("fail {code} {out}\n"),
    };
    let _ = f.set_len(0);
    let _ = f.seek(std::io::SeekFrom::Start(0));
    let _ = f.write_all(record.as_bytes());
    let _ = f.sync_all();
    r
}

/// The job's epilog here (when the controller says it is over); forgets its prolog record.
pub fn epilog(spool: &Path, program: Option<&str>, c: &Context<'_>) -> Result<(), (i32, String)> {
    let _ = std::fs::remove_file(marker(spool, c.job.job_id));
    match program {
        Some(p) => run_script(p, &script_env(c, "epilog_slurmd"), SCRIPT_TIMEOUT),
        None => Ok(()),
    }
}

/// What a `TaskProlog`'s standard output asks for, line by line: `export NAME=value`,
/// `unset NAME`, `print TEXT` (written to the task's stdout).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct TaskPrologOutput {
    pub export: Vec<(String, String)>,
    pub unset: Vec<String>,
    pub print: Vec<String>,
}

pub fn parse_task_prolog(out: &str) -> TaskPrologOutput {
    let mut t = TaskPrologOutput::default();
    for line in out.lines() {
        if let Some(kv) = line.strip_prefix("export ") {
            if let Some((k, v)) = kv.trim_start().split_once('=') {
                t.export.push((k.to_string(), v.to_string()));
            }
        } else if let Some(k) = line.strip_prefix("unset ") {
            t.unset.push(k.trim().to_string());
        } else if let Some(p) = line.strip_prefix("print ") {
            t.print.push(p.to_string());
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_prolog_lines() {
        let t = parse_task_prolog("export A=1 2\nunset B\nprint hello world\nnoise\nexport  C=x=y\n");
        assert_eq!(t.export, [("A".to_string(), "1 2".to_string()), ("C".into(), "x=y".into())]);
        assert_eq!(t.unset, ["B"]);
        assert_eq!(t.print, ["hello world"]);
    }

    #[test]
    fn a_prolog_runs_once_and_its_failure_is_remembered() {
        let spool = tempfile::tempdir().unwrap();
        let count = spool.path().join("count");
        let script = spool.path().join("prolog.sh");
        std::fs::write(
            &script,
            format!("#!/bin/sh\necho x >> {}\necho \"bad $SLURM_JOB_ID\"\nexit 3\n", count.display()),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let job = v1::JobInfo { job_id: 7, ..Default::default() };
        let c = Context { job: &job, node: "node1", cluster: "c", conf_path: "/x" };
        let p = script.display().to_string();
        assert_eq!(prolog_once(spool.path(), &p, &c), Err((3 << 8, "bad 7".into())));
        assert_eq!(prolog_once(spool.path(), &p, &c), Err((3 << 8, "bad 7".into())));
        assert_eq!(std::fs::read_to_string(&count).unwrap(), "x\n");
        // The epilog forgets it: a requeued run of the job tries again.
        epilog(spool.path(), None, &c).unwrap();
        assert!(prolog_once(spool.path(), &p, &c).is_err());
        assert_eq!(std::fs::read_to_string(&count).unwrap(), "x\nx\n");
    }
}
