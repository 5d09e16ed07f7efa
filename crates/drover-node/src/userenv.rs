//! The user's login environment on this node, for batch jobs that ask for it
//! (`SLURM_GET_USER_ENV=1`: `sbatch --export=NONE`, an `--export` list without `ALL`,
//! `--get-user-env`). As slurmd does: `su - USER` runs `env` in a login shell started with
//! nothing but `ENVIRONMENT=BATCH`, and what it prints between two markers is the user's
//! environment; the job's own variables then override it.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const START: &str = "XXXXDROVERSTARTPARSINGHEREXXXX";
const STOP: &str = "XXXXDROVERSTOPPARSINGHEREXXXXX";

/// How long a login shell may take (slurmd allows 120 s before giving up on it).
pub const TIMEOUT: Duration = Duration::from_secs(120);

/// Whether a job's environment asks for the user's login environment.
pub fn wanted(env: &[(String, String)]) -> bool {
    env.iter().any(|(k, v)| k == "SLURM_GET_USER_ENV" && v == "1")
}

/// `user`'s login environment, as `su - user` sets it up on this host (as root; a daemon
/// that runs as the user itself starts the user's login shell directly, with what `su -`
/// would have set: HOME, SHELL, USER, LOGNAME and PATH).
pub fn login_env(user: &str, timeout: Duration) -> Result<Vec<(String, String)>, String> {
    // Markers on lines of their own, whatever the profile printed before; NUL-separated
    // entries, so values with newlines come through whole.
    let cmd = format!("/bin/echo; /bin/echo {START}; /usr/bin/env -0; /bin/echo; /bin/echo {STOP}");
    let mut command = if nix::unistd::geteuid().is_root() {
        let su = ["/bin/su", "/usr/bin/su"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists())
            .ok_or("Could not locate command: su")?;
        let mut c = Command::new(su);
        c.args(["-", user, "-c", &cmd]).env_clear();
        c
    } else {
        let pw = nix::unistd::User::from_name(user).ok().flatten().ok_or_else(|| format!("no such user {user}"))?;
        if pw.uid != nix::unistd::geteuid() {
            return Err("SlurmdUser must be root to use --get-user-env".into());
        }
        let shell = pw.shell.display().to_string();
        let base = shell.rsplit('/').next().unwrap_or("sh").to_string();
        let mut c = Command::new(&shell);
        c.arg0(format!("-{base}"))
            .args(["-c", &cmd])
            .env_clear()
            .env("HOME", &pw.dir)
            .env("SHELL", &shell)
            .env("USER", user)
            .env("LOGNAME", user)
            .env("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/local/games:/usr/games");
        c
    };
    let mut child = command
        .env("ENVIRONMENT", "BATCH")
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start the login shell: {e}"))?;
    let mut out = child.stdout.take().expect("invariant: piped");
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = out.read_to_end(&mut buf);
        buf
    });
    let t = Instant::now();
    let done = loop {
        match child.try_wait() {
            Ok(Some(_)) => break true,
            Ok(None) if t.elapsed() < timeout => std::thread::sleep(Duration::from_millis(5)),
            _ => break false,
        }
    };
    // Whatever the login left behind goes with it (it could hold the pipe open).
    let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGKILL);
    let _ = child.wait();
    if !done {
        return Err(format!("timeout waiting for su to complete ({} s)", timeout.as_secs()));
    }
    let buf = reader.join().unwrap_or_default();
    parse(&buf).ok_or_else(|| "Failed to get current user environment variables".to_string())
}

/// The entries between the markers of `su`'s output.
fn parse(buf: &[u8]) -> Option<Vec<(String, String)>> {
    let start = format!("\n{START}\n");
    let stop = format!("\n{STOP}");
    let from = find(buf, start.as_bytes())? + start.len();
    let to = from + find(&buf[from..], stop.as_bytes())?;
    let body = &buf[from..to];
    Some(
        body.split(|b| *b == 0)
            .filter(|e| !e.is_empty())
            .filter_map(|e| {
                let s = String::from_utf8_lossy(e);
                let (k, v) = s.split_once('=')?;
                Some((k.to_string(), v.to_string()))
            })
            .collect(),
    )
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// `login` under `job`: the job's variables win (slurmd's env_array_merge onto the login's).
pub fn merge(job: &mut Vec<(String, String)>, login: Vec<(String, String)>) {
    let mut merged: Vec<(String, String)> =
        login.into_iter().filter(|(k, _)| !job.iter().any(|(j, _)| j == k)).collect();
    merged.append(job);
    *job = merged;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_between_the_markers_with_newlines_kept() {
        let out = format!("motd line\n\n{START}\nHOME=/home/a\0MULTI=x\ny\0EMPTY=\0\n{STOP}\nbye\n");
        assert_eq!(
            parse(out.as_bytes()).unwrap(),
            [("HOME".into(), "/home/a".into()), ("MULTI".into(), "x\ny".into()), ("EMPTY".into(), String::new())]
        );
        assert!(parse(b"no markers\n").is_none());
        assert!(parse(format!("\n{START}\nA=1\0").as_bytes()).is_none(), "cut short");
    }

    #[test]
    fn the_jobs_variables_win() {
        let mut job = vec![("SLURM_JOB_ID".into(), "7".into()), ("PATH".into(), "/job".into())];
        merge(&mut job, vec![("PATH".into(), "/login".into()), ("HOME".into(), "/home/a".into())]);
        assert_eq!(
            job,
            [
                ("HOME".to_string(), "/home/a".to_string()),
                ("SLURM_JOB_ID".into(), "7".into()),
                ("PATH".into(), "/job".into())
            ]
        );
    }
}
