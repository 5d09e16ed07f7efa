//! The node's spool directory: one `job<N>` directory per batch job the node runs and one
//! `job<N>.<S>` directory per job step, each shared by the agent and that job's or step's
//! supervisor. It is what lets a restarted agent find its jobs and steps again.

use std::path::{Path, PathBuf};

pub const LAUNCH: &str = "launch.pb";
pub const PID: &str = "pid";
pub const STATUS: &str = "status";
pub const SV_SOCK: &str = "sv.sock";
pub const AGENT_SOCK: &str = "agent.sock";
pub const NODE_NAME: &str = "node-name";
/// A request to end (`term`, `term requeue`, `kill`) the agent left for a supervisor it could
/// not reach yet: written before the agent tries the socket, read by the supervisor once it
/// listens, so that one of the two always sees it.
pub const TERM: &str = "term";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndStatus {
    pub exit_status: i32,
    pub how: String,
    pub end_time: i64,
    pub message: String,
}

pub fn job_dir(spool: &Path, job: u32) -> PathBuf {
    spool.join(format!("job{job}"))
}

pub fn step_dir(spool: &Path, job: u32, step: u32) -> PathBuf {
    spool.join(format!("job{job}.{step}"))
}

/// The directory of a job (`step: None`) or of one of its steps.
pub fn unit_dir(spool: &Path, job: u32, step: Option<u32>) -> PathBuf {
    match step {
        Some(s) => step_dir(spool, job, s),
        None => job_dir(spool, job),
    }
}

pub fn job_of_dir(name: &str) -> Option<u32> {
    name.strip_prefix("job")?.parse().ok()
}

/// The job and step a spool directory belongs to: `job12` → (12, None), `job12.3` → (12, Some(3)).
pub fn unit_of_dir(name: &str) -> Option<(u32, Option<u32>)> {
    let rest = name.strip_prefix("job")?;
    match rest.split_once('.') {
        Some((j, s)) => Some((j.parse().ok()?, Some(s.parse().ok()?))),
        None => Some((rest.parse().ok()?, None)),
    }
}

/// The step directories of `job` in the spool.
pub fn step_dirs_of(spool: &Path, job: u32) -> Vec<PathBuf> {
    let prefix = format!("job{job}.");
    std::fs::read_dir(spool)
        .map(|rd| {
            rd.flatten().filter(|e| e.file_name().to_string_lossy().starts_with(&prefix)).map(|e| e.path()).collect()
        })
        .unwrap_or_default()
}

/// The node name is kept beside the job dirs so the supervisor knows where it runs.
pub fn node_name(job_dir: &Path) -> String {
    job_dir
        .parent()
        .and_then(|p| std::fs::read_to_string(p.join(NODE_NAME)).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Writes `dir/name` whole or not at all (written beside it, then renamed): the agent's scan
/// may read it at any moment.
fn write_whole(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(tmp, dir.join(name))
}

pub fn write_status(dir: &Path, s: &EndStatus) -> std::io::Result<()> {
    let text = format!("{}\n{}\n{}\n{}\n", s.exit_status, s.how, s.end_time, s.message.replace('\n', " "));
    write_whole(dir, STATUS, text.as_bytes())
}

/// Records this process as the supervisor of `dir` (whole: a scan that found the file empty
/// took a starting supervisor for a dead one).
pub fn write_pid(dir: &Path) -> std::io::Result<()> {
    write_whole(dir, PID, std::process::id().to_string().as_bytes())
}

/// The pid the supervisor of `dir` recorded, once it has (an empty or partial file is one an
/// older supervisor is still writing).
pub fn recorded_pid(dir: &Path) -> Option<i32> {
    std::fs::read_to_string(dir.join(PID)).ok().and_then(|p| p.trim().parse::<i32>().ok())
}

/// Whether the supervisor of `dir` was launched and may still start: not yet recorded, or
/// recorded and alive.
pub fn supervisor_starting_or_alive(dir: &Path) -> bool {
    dir.join(LAUNCH).exists() && (recorded_pid(dir).is_none() || supervisor_alive(dir))
}

pub const USAGE: &str = "usage.pb";

/// What the tasks of a job or step used (an encoded `StatReply`), kept for accounting.
pub fn write_usage(dir: &Path, u: &drover_proto::v1::StatReply) -> std::io::Result<()> {
    use drover_proto::prost::Message;
    write_whole(dir, USAGE, &u.encode_to_vec())
}

pub fn read_usage(dir: &Path) -> Vec<drover_proto::v1::TaskUsage> {
    use drover_proto::prost::Message;
    std::fs::read(dir.join(USAGE))
        .ok()
        .and_then(|b| drover_proto::v1::StatReply::decode(&b[..]).ok())
        .map(|r| r.tasks)
        .unwrap_or_default()
}

pub fn read_status(dir: &Path) -> Option<EndStatus> {
    let text = std::fs::read_to_string(dir.join(STATUS)).ok()?;
    let mut l = text.lines();
    Some(EndStatus {
        exit_status: l.next()?.parse().ok()?,
        how: l.next().unwrap_or("").to_string(),
        end_time: l.next().and_then(|t| t.parse().ok()).unwrap_or(0),
        message: l.next().unwrap_or("").to_string(),
    })
}

/// Whether the supervisor recorded in `dir` is still alive.
pub fn supervisor_alive(dir: &Path) -> bool {
    let Some(pid) = recorded_pid(dir) else {
        return false;
    };
    // A zombie counts as gone.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat.rsplit_once(')').is_some_and(|(_, r)| r.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dirs_name_jobs_and_steps() {
        assert_eq!(unit_of_dir("job12"), Some((12, None)));
        assert_eq!(unit_of_dir("job12.3"), Some((12, Some(3))));
        assert_eq!(unit_of_dir("job12.x"), None);
        assert_eq!(unit_of_dir("agent.sock"), None);
        assert_eq!(job_of_dir("job12.3"), None);
        let p = Path::new("/s");
        assert_eq!(unit_dir(p, 4, Some(1)), Path::new("/s/job4.1"));
        assert_eq!(unit_dir(p, 4, None), Path::new("/s/job4"));
    }
}
