//! A job request as the controller receives it, validated by the CLI, plus dependency and
//! constraint expressions and the small formats jobs print (`SLURM_TASKS_PER_NODE`).

use crate::duration::TimeLimit;
use serde::{Deserialize, Serialize};

pub type JobId = u32;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DependencyKind {
    After,
    AfterAny,
    AfterOk,
    AfterNotOk,
}

impl DependencyKind {
    pub fn name(self) -> &'static str {
        match self {
            DependencyKind::After => "after",
            DependencyKind::AfterAny => "afterany",
            DependencyKind::AfterOk => "afterok",
            DependencyKind::AfterNotOk => "afternotok",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dependency {
    pub kind: DependencyKind,
    pub job: JobId,
}

/// Parses `-d afterok:12:13,afterany:14` (the simple form: every listed condition must hold).
pub fn parse_dependency(s: &str) -> Result<Vec<Dependency>, String> {
    let mut out = Vec::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        let mut it = part.split(':');
        let kind = match it.next().unwrap_or("").to_ascii_lowercase().as_str() {
            "after" => DependencyKind::After,
            "afterany" => DependencyKind::AfterAny,
            "afterok" => DependencyKind::AfterOk,
            "afternotok" => DependencyKind::AfterNotOk,
            _ => return Err(format!("invalid dependency specification: {s}")),
        };
        let mut any = false;
        for id in it {
            let id = id.split('+').next().unwrap_or(id);
            let job: JobId = id.parse().map_err(|_| format!("invalid dependency specification: {s}"))?;
            out.push(Dependency { kind, job });
            any = true;
        }
        if !any {
            return Err(format!("invalid dependency specification: {s}"));
        }
    }
    Ok(out)
}

pub fn fmt_dependency(deps: &[Dependency]) -> String {
    if deps.is_empty() {
        return "(null)".into();
    }
    deps.iter().map(|d| format!("{}:{}", d.kind.name(), d.job)).collect::<Vec<_>>().join(",")
}

/// `-C/--constraint`: feature names joined by `&` (and) and `|` (or); `&` binds tighter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Constraint {
    /// Disjunction of conjunctions.
    pub any_of: Vec<Vec<String>>,
}

impl Constraint {
    pub fn parse(s: &str) -> Result<Constraint, String> {
        let mut any_of = Vec::new();
        for alt in s.split('|') {
            let mut all = Vec::new();
            for f in alt.split(['&', ',']) {
                let f = f.trim();
                if f.is_empty() || !f.chars().all(|c| c.is_ascii_alphanumeric() || "_-.:".contains(c)) {
                    return Err(format!("Invalid feature specification: {s}"));
                }
                all.push(f.to_string());
            }
            any_of.push(all);
        }
        Ok(Constraint { any_of })
    }

    pub fn matches(&self, features: &[String]) -> bool {
        self.any_of.iter().any(|all| all.iter().all(|f| features.iter().any(|nf| nf == f)))
    }

    pub fn features(&self) -> impl Iterator<Item = &String> {
        self.any_of.iter().flatten()
    }
}

/// Everything a submitted job asks for. Built by the CLI; checked again by the controller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct JobSpec {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    pub user: String,
    pub group: String,
    /// Candidate partitions in the order given; empty means the default partition.
    pub partitions: Vec<String>,
    pub min_nodes: Option<u32>,
    pub max_nodes: Option<u32>,
    pub ntasks: Option<u32>,
    pub ntasks_per_node: Option<u32>,
    pub cpus_per_task: Option<u32>,
    pub mem_per_node_mb: Option<u64>,
    pub mem_per_cpu_mb: Option<u64>,
    /// `None`: the partition's default (or its maximum).
    pub time_limit: Option<TimeLimit>,
    pub nodelist: Vec<String>,
    pub exclude: Vec<String>,
    pub constraint: Option<String>,
    pub exclusive: bool,
    pub hold: bool,
    pub begin_time: Option<i64>,
    pub dependency: Vec<Dependency>,
    /// Batch script text; empty for an interactive allocation (`srun`).
    pub script: String,
    pub argv: Vec<String>,
    pub work_dir: String,
    pub stdout: Option<String>,
    pub stderr: Option<String>,
    pub stdin: Option<String>,
    pub environment: Vec<(String, String)>,
    pub comment: Option<String>,
    pub mail_type: Option<String>,
    pub mail_user: Option<String>,
    pub signal: Option<String>,
    pub requeue: Option<bool>,
    pub open_mode_append: bool,
    pub submit_host: String,
    pub submit_line: String,
    pub batch: bool,
    /// `--immediate`: give up unless resources are granted at once (seconds to wait).
    pub immediate: Option<u32>,
    /// Interactive launch (`srun`): the address the tasks' I/O streams to.
    pub io_addr: Option<String>,
    /// `--array`, canonical (see [`crate::array::ArraySpec::canonical`]).
    pub array: Option<String>,
}

impl JobSpec {
    /// Total tasks (`-n`), derived as Slurm does when not given.
    pub fn task_count(&self) -> u32 {
        match (self.ntasks, self.ntasks_per_node) {
            (Some(n), _) => n,
            (None, Some(per)) => per * self.min_nodes.unwrap_or(1),
            (None, None) => self.min_nodes.unwrap_or(1),
        }
    }
    pub fn cpus_per_task(&self) -> u32 {
        self.cpus_per_task.unwrap_or(1).max(1)
    }
}

/// `SLURM_TASKS_PER_NODE`-style compression: `[2,2,2,1]` → `2(x3),1`.
pub fn fmt_counts(counts: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < counts.len() {
        let mut j = i;
        while j + 1 < counts.len() && counts[j + 1] == counts[i] {
            j += 1;
        }
        let n = j - i + 1;
        if n > 1 {
            out.push(format!("{}(x{n})", counts[i]));
        } else {
            out.push(counts[i].to_string());
        }
        i = j + 1;
    }
    out.join(",")
}

/// The output file of a batch job that names none: `slurm-%j.out`, or `slurm-%A_%a.out` for
/// an array's tasks.
pub fn default_output(array: bool) -> &'static str {
    if array {
        "slurm-%A_%a.out"
    } else {
        "slurm-%j.out"
    }
}

/// Values for a job's filename pattern (`-o slurm-%j.out`).
pub struct PatternVars<'a> {
    pub job_id: JobId,
    pub array_job_id: JobId,
    pub array_task_id: Option<u32>,
    pub job_name: &'a str,
    pub user: &'a str,
    pub node: &'a str,
    pub node_index: u32,
    pub task: Option<u32>,
    pub step: Option<u32>,
}

/// Expands Slurm's filename patterns: `%j %J %x %u %N %n %A %a %t %s %%` with optional
/// zero-padding width (`%4j`). `\\` disables expansion, as in Slurm.
pub fn expand_pattern(p: &str, v: &PatternVars<'_>) -> String {
    if p.contains('\\') {
        return p.replace('\\', "");
    }
    let mut out = String::new();
    let mut chars = p.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut width = String::new();
        while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
            width.push(*d);
            chars.next();
        }
        let w: usize = width.parse().unwrap_or(0).min(10);
        let num = |n: u64| format!("{n:0w$}");
        match chars.next() {
            Some('%') => out.push('%'),
            Some('j') => out.push_str(&num(v.job_id as u64)),
            Some('J') => {
                out.push_str(&num(v.job_id as u64));
                if let Some(s) = v.step {
                    out.push_str(&format!(".{s}"));
                }
            }
            Some('A') => out.push_str(&num(v.array_job_id as u64)),
            Some('a') => out.push_str(&num(v.array_task_id.map(|a| a as u64).unwrap_or(4294967294))),
            Some('x') => out.push_str(v.job_name),
            Some('u') => out.push_str(v.user),
            Some('N') => out.push_str(v.node),
            Some('n') => out.push_str(&num(v.node_index as u64)),
            Some('t') => out.push_str(&num(v.task.unwrap_or(0) as u64)),
            Some('s') => out.push_str(&v.step.map(|s| num(s as u64)).unwrap_or_else(|| "batch".into())),
            Some(other) => {
                out.push('%');
                out.push_str(&width);
                out.push(other);
            }
            None => {
                out.push('%');
                out.push_str(&width);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_compress_like_slurm() {
        assert_eq!(fmt_counts(&[2, 2, 2, 1]), "2(x3),1");
        assert_eq!(fmt_counts(&[2, 2]), "2(x2)");
        assert_eq!(fmt_counts(&[1]), "1");
        assert_eq!(fmt_counts(&[1, 2, 1]), "1,2,1");
    }

    #[test]
    fn patterns_expand() {
        let v = PatternVars {
            job_id: 42,
            array_job_id: 40,
            array_task_id: Some(2),
            job_name: "train",
            user: "alice",
            node: "node1",
            node_index: 0,
            task: None,
            step: None,
        };
        assert_eq!(expand_pattern("slurm-%j.out", &v), "slurm-42.out");
        assert_eq!(expand_pattern("%x-%4j-%u-%N.%%", &v), "train-0042-alice-node1.%");
        assert_eq!(expand_pattern("%A_%a.log", &v), "40_2.log");
        assert_eq!(expand_pattern("lit\\%j", &v), "lit%j");
    }

    #[test]
    fn dependencies_parse() {
        let d = parse_dependency("afterok:12:13,afterany:14").unwrap();
        assert_eq!(d.len(), 3);
        assert_eq!(fmt_dependency(&d), "afterok:12,afterok:13,afterany:14");
        assert!(parse_dependency("sometime:1").is_err());
        assert!(parse_dependency("afterok").is_err());
    }

    #[test]
    fn constraints_match_features() {
        let c = Constraint::parse("a&b|c").unwrap();
        assert!(c.matches(&["a".into(), "b".into()]));
        assert!(c.matches(&["c".into()]));
        assert!(!c.matches(&["a".into()]));
        assert!(Constraint::parse("a&&b").is_err());
    }
}
