//! The generated differential corpus (`testdata/corpus/README.md`): command lines across every
//! option, state, filter, format and error of Slurm's commands, run on real Slurm 22.05 once
//! (`cargo xtask compat capture`, its outputs kept as golden text) and on Drover by the tests
//! (`crates/drover/tests/corpus.rs`), compared after a small normalisation.
//!
//! Both sides run the same `testdata/corpus/scenario.sh` on a fresh cluster of the lab's
//! `slurm.conf` first: it puts jobs into every state and names their ids, which the command
//! lines read as environment variables.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

mod cases;
mod normalise;

pub use cases::cases;
pub use normalise::Normaliser;

/// One command line of the corpus: `id` is stable (`squeue/o-%i`), its first part the
/// command the score is counted under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Case {
    pub id: String,
    pub cmd: String,
}

impl Case {
    /// The command the case is scored under: the id's first part.
    pub fn command(&self) -> &str {
        self.id.split('/').next().unwrap_or(&self.id)
    }
}

/// What a command line printed and its exit status.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Outcome {
    pub rc: i32,
    pub out: String,
    pub err: String,
}

/// Where a corpus runs: the cluster's commands' directory (first on `PATH`), its
/// `slurm.conf` and the directory the command lines run in.
pub struct Target {
    pub bin: Option<PathBuf>,
    pub conf: PathBuf,
    pub work: PathBuf,
}

impl Target {
    fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into());
        let path = match &self.bin {
            Some(bin) => format!("{}:{path}", bin.display()),
            None => path,
        };
        // Only what a login shell of root has: no SQUEUE_FORMAT, SLURM_* or locale of the
        // caller changes an answer.
        c.env_clear()
            .env("PATH", path)
            .env("HOME", "/root")
            .env("USER", "root")
            .env("LOGNAME", "root")
            .env("SHELL", "/bin/bash")
            .env("LANG", "C")
            .env("TZ", "UTC")
            .env("SLURM_CONF", &self.conf)
            .current_dir(&self.work);
        c
    }

    /// Runs `scenario.sh`: the job ids it names, in its order.
    pub fn scenario(&self, script: &Path) -> Result<Vec<(String, String)>, String> {
        let out = self
            .command("timeout")
            .arg("300")
            .arg("bash")
            .arg(script)
            .output()
            .map_err(|e| format!("bash {}: {e}", script.display()))?;
        if !out.status.success() {
            return Err(format!(
                "{} failed ({}): {}{}",
                script.display(),
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect())
    }

    /// Runs one command line with `bash -c` (60 s at most), the scenario's names set.
    pub fn run(&self, case: &Case, vars: &[(String, String)]) -> Outcome {
        let mut c = self.command("timeout");
        c.arg("60").arg("bash").arg("-c").arg(&case.cmd).stdin(std::process::Stdio::null());
        for (k, v) in vars {
            c.env(k, v);
        }
        match c.output() {
            Ok(o) => Outcome {
                rc: o.status.code().unwrap_or(-1),
                out: String::from_utf8_lossy(&o.stdout).into_owned(),
                err: String::from_utf8_lossy(&o.stderr).into_owned(),
            },
            Err(e) => Outcome { rc: -1, out: String::new(), err: format!("could not run bash: {e}\n") },
        }
    }
}

/// The golden file: for each case, its command line and what real Slurm printed
/// (normalised). Lines: `#### ID`, `$ CMD`, `? STATUS`, then `| ` stdout and `! ` stderr
/// lines; `|%` (`!%`) after them: the text does not end with a newline.
pub fn write_golden(cases: &[(Case, Outcome)]) -> String {
    let mut s = String::new();
    for (case, o) in cases {
        let _ = writeln!(s, "#### {}\n$ {}\n? {}", case.id, case.cmd, o.rc);
        for (mark, text) in [('|', &o.out), ('!', &o.err)] {
            for line in text.lines() {
                let _ = writeln!(s, "{mark} {line}");
            }
            if !text.is_empty() && !text.ends_with('\n') {
                let _ = writeln!(s, "{mark}%");
            }
        }
    }
    s
}

/// The golden file read back: case id → (command line, outcome).
pub fn read_golden(text: &str) -> Result<BTreeMap<String, (String, Outcome)>, String> {
    let mut all = BTreeMap::new();
    let mut cur: Option<(String, String, Outcome)> = None;
    for (n, line) in text.lines().enumerate() {
        let bad = || format!("line {}: {line:?} is not a golden line", n + 1);
        if let Some(id) = line.strip_prefix("#### ") {
            if let Some((id, cmd, o)) = cur.take() {
                all.insert(id, (cmd, o));
            }
            cur = Some((id.to_string(), String::new(), Outcome::default()));
            continue;
        }
        let (_, cmd, o) = cur.as_mut().ok_or_else(bad)?;
        if let Some(c) = line.strip_prefix("$ ") {
            *cmd = c.to_string();
        } else if let Some(rc) = line.strip_prefix("? ") {
            o.rc = rc.parse().map_err(|_| bad())?;
        } else if line == "|%" {
            o.out.pop();
        } else if line == "!%" {
            o.err.pop();
        } else if let Some(l) = line.strip_prefix("| ").or(if line == "|" { Some("") } else { None }) {
            o.out.push_str(l);
            o.out.push('\n');
        } else if let Some(l) = line.strip_prefix("! ").or(if line == "!" { Some("") } else { None }) {
            o.err.push_str(l);
            o.err.push('\n');
        } else {
            return Err(bad());
        }
    }
    if let Some((id, cmd, o)) = cur.take() {
        all.insert(id, (cmd, o));
    }
    Ok(all)
}

/// The corpus's files: `testdata/corpus/`.
pub fn dir() -> PathBuf {
    crate::testdata("corpus")
}

/// The golden file of real Slurm 22.05.8.
pub fn golden_path() -> PathBuf {
    dir().join("slurm-22.05.txt")
}

/// How two texts differ, line by line: the lines only Slurm's has (`- `) and only Drover's
/// (`+ `), in order (a longest common subsequence; `max` lines of each at most).
pub fn diff(want: &str, got: &str, max: usize) -> String {
    let w: Vec<&str> = want.lines().collect();
    let g: Vec<&str> = got.lines().collect();
    let mut s = String::new();
    if w.len() * g.len() > 4_000_000 {
        return format!("  ({} lines against {}: too long to compare line by line)\n", w.len(), g.len());
    }
    // lcs[i][j]: the longest common subsequence of w[i..] and g[j..].
    let mut lcs = vec![vec![0u32; g.len() + 1]; w.len() + 1];
    for i in (0..w.len()).rev() {
        for j in (0..g.len()).rev() {
            lcs[i][j] = if w[i] == g[j] { lcs[i + 1][j + 1] + 1 } else { lcs[i + 1][j].max(lcs[i][j + 1]) };
        }
    }
    let (mut i, mut j, mut minus, mut plus) = (0, 0, 0, 0);
    while i < w.len() || j < g.len() {
        if i < w.len() && j < g.len() && w[i] == g[j] {
            i += 1;
            j += 1;
        } else if j == g.len() || (i < w.len() && lcs[i + 1][j] >= lcs[i][j + 1]) {
            if minus < max {
                let _ = writeln!(s, "- {}", w[i]);
            }
            minus += 1;
            i += 1;
        } else {
            if plus < max {
                let _ = writeln!(s, "+ {}", g[j]);
            }
            plus += 1;
            j += 1;
        }
    }
    if minus > max || plus > max {
        let _ = writeln!(s, "  ({minus} lines of Slurm's and {plus} of Drover's differ in all)");
    }
    if want.ends_with('\n') != got.ends_with('\n') && !want.is_empty() && !got.is_empty() {
        s.push_str("  (one ends with a newline, the other not)\n");
    }
    s
}
