//! The README's quick start, run as written: every `$ ` line in its first block is typed into
//! a shell against a `drover up` cluster, must succeed, and must print what the README shows
//! below it (times masked, this host's name read as `vm`, the test's home as `/root`).
//!
//! Two lines stand for what a person does: `cargo run --release -- up --detach` runs the built
//! binary (`drover up --detach`), and `export PATH=...   # the line above` takes the line that
//! `drover up` printed.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_drover");

/// One `$ ` line of the block and the lines the README shows it printing.
#[derive(Debug)]
struct Step {
    cmd: String,
    shown: Vec<String>,
}

/// The first fenced block after `## Quick start`.
fn quick_start(readme: &str) -> Vec<Step> {
    let section = &readme[readme.find("## Quick start").expect("a Quick start section")..];
    let block = section.split("```sh\n").nth(1).expect("a sh block").split("\n```").next().expect("its end");
    let comment = regex::Regex::new(r"\s{2,}#.*$").expect("a regex");
    let mut steps: Vec<Step> = Vec::new();
    for line in block.lines() {
        if let Some(cmd) = line.strip_prefix("$ ") {
            steps.push(Step { cmd: comment.replace(cmd, "").trim().to_string(), shown: Vec::new() });
        } else if !line.trim().is_empty() {
            steps.last_mut().expect("output after a command").shown.push(line.to_string());
        }
    }
    steps
}

/// What a README shows and what a run printed, made comparable: `M:SS` times masked, trailing
/// blanks dropped (editors trim them), this host's name as `vm`, `home` as `/root`.
fn normalise(lines: &[String], host: &str, home: &str) -> Vec<String> {
    let time = regex::Regex::new(r"\b\d+:\d\d\b").expect("a regex");
    let host = regex::Regex::new(&format!(r"\b{}\b", regex::escape(host))).expect("a regex");
    lines
        .iter()
        .map(|l| {
            let l = l.replace(home, "/root");
            let l = host.replace_all(&l, "vm");
            time.replace_all(&l, "T").trim_end().to_string()
        })
        .collect()
}

/// Stops the cluster whatever happens to the test.
struct Down(PathBuf);

impl Drop for Down {
    fn drop(&mut self) {
        let _ = Command::new(EXE).arg("down").env("HOME", &self.0).output();
    }
}

fn shell(cmd: &str, home: &Path, cwd: &Path, path: &str, conf: &str) -> (bool, Vec<String>) {
    // An interactive shell reads its commands from the terminal: this one is told to leave.
    let stdin = if cmd.contains("--pty") { "exit\n" } else { "" };
    let mut child = Command::new("bash")
        .args(["-c", &format!("exec 2>&1; {cmd}")])
        .env("HOME", home)
        .env("USER", "root")
        .env("PATH", path)
        .env("SLURM_CONF", conf)
        .env_remove("SLURM_JOB_ID")
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("bash");
    use std::io::Write;
    child.stdin.take().expect("stdin").write_all(stdin.as_bytes()).expect("write stdin");
    let out = child.wait_with_output().expect("bash ran");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).lines().map(String::from).collect())
}

#[test]
fn the_quick_start_is_true_line_by_line() {
    if !drover_testkit::root_or_skip("the quick start shows root's paths and adds root to an account") {
        return;
    }
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).expect("the README");
    let steps = quick_start(&readme);
    assert!(steps.len() >= 10, "{steps:?}");
    let tmp = tempfile::tempdir().expect("a temp dir");
    let home = tmp.path().join("home");
    let cwd = tmp.path().join("work");
    std::fs::create_dir_all(&home).expect("home");
    std::fs::create_dir_all(&cwd).expect("work dir");
    let _down = Down(home.clone());
    let host = nix::unistd::gethostname().expect("hostname").to_string_lossy().to_string();
    let home_s = home.display().to_string();
    let (mut path, mut conf) = (std::env::var("PATH").unwrap_or_default(), String::new());
    let mut printed_export = None;
    let mut failures = Vec::new();
    for step in &steps {
        let (ok, got) = if step.cmd == "cargo run --release -- up --detach" {
            let out = Command::new(EXE)
                .args(["up", "--detach"])
                .env("HOME", &home)
                .env_remove("XDG_STATE_HOME")
                .env_remove("DROVER_STATE_DIR")
                .current_dir(&cwd)
                .output()
                .expect("drover up");
            let mut lines: Vec<String> = String::from_utf8_lossy(&out.stderr).lines().map(String::from).collect();
            lines.extend(String::from_utf8_lossy(&out.stdout).lines().map(String::from));
            printed_export = lines.iter().find(|l| l.starts_with("export PATH=")).cloned();
            (out.status.success(), lines)
        } else if step.cmd.starts_with("export PATH=...") {
            let line = printed_export.clone().expect("drover up printed an export line");
            let rest = line.strip_prefix("export PATH=").expect("export PATH=");
            let (p, c) = rest.split_once(" SLURM_CONF=").expect("PATH and SLURM_CONF");
            path = p.replace("$PATH", &path);
            conf = c.to_string();
            (true, Vec::new())
        } else {
            // What only reads may be looked at again while the cluster catches up (a job
            // still starting, an output file not yet written), as a person would.
            let reads = ["squeue", "sinfo", "cat", "sacct"].contains(&step.cmd.split(' ').next().unwrap_or(""));
            let t = Instant::now();
            loop {
                let (ok, got) = shell(&step.cmd, &home, &cwd, &path, &conf);
                let same = normalise(&got, &host, &home_s) == normalise(&step.shown, &host, &home_s);
                if !reads || (ok && (step.shown.is_empty() || same)) || t.elapsed() > Duration::from_secs(20) {
                    break (ok, got);
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        };
        if !ok {
            failures.push(format!("`{}` failed:\n{}", step.cmd, got.join("\n")));
        } else if !step.shown.is_empty() && normalise(&got, &host, &home_s) != normalise(&step.shown, &host, &home_s) {
            failures.push(format!(
                "`{}` printed:\n{}\nthe README shows:\n{}",
                step.cmd,
                got.join("\n"),
                step.shown.join("\n")
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn the_quick_start_block_parses_into_its_commands() {
    let steps = quick_start(
        "## Quick start\n\n```sh\n$ sbatch --wrap 'x'   # a comment\nSubmitted batch job 1\n\n$ squeue\n```\n",
    );
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[0].cmd, "sbatch --wrap 'x'");
    assert_eq!(steps[0].shown, ["Submitted batch job 1"]);
    assert!(steps[1].shown.is_empty());
    let n = normalise(&["  1 vmhost R 0:03  ".to_string(), "/h/x".to_string()], "vmhost", "/h");
    assert_eq!(n, ["  1 vm R T", "/root/x"]);
}

/// `cargo run --release -- up` (the README's first command) needs exactly one binary among the
/// workspace's default members: a second one makes cargo refuse with "could not determine
/// which binary to run" (a test-kit tool once did; it is an example now).
#[test]
fn cargo_run_has_one_binary_to_run() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        // The workspace's root, where the README's command is typed (in a member's folder
        // cargo picks that member).
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
        .output()
        .expect("cargo metadata runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON");
    let defaults: Vec<&str> = meta["workspace_default_members"]
        .as_array()
        .expect("workspace_default_members")
        .iter()
        .filter_map(|m| m.as_str())
        .collect();
    let mut bins = Vec::new();
    for pkg in meta["packages"].as_array().expect("packages") {
        if !defaults.contains(&pkg["id"].as_str().unwrap_or_default()) {
            continue;
        }
        for target in pkg["targets"].as_array().into_iter().flatten() {
            let kinds = target["kind"].as_array().into_iter().flatten();
            if kinds.filter_map(|k| k.as_str()).any(|k| k == "bin") {
                bins.push(target["name"].as_str().unwrap_or_default().to_string());
            }
        }
    }
    assert_eq!(bins, ["drover"], "binaries `cargo run` would choose among");
}
