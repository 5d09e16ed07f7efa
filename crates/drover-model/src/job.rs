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
    /// Task N of this array after task N of the other (or the whole other job, if it is
    /// not an array) succeeded.
    AfterCorr,
    /// Accepted and satisfied at once: Drover has no burst buffers.
    AfterBurstBuffer,
    /// After every earlier job of the same user and name has ended.
    Singleton,
}

impl DependencyKind {
    pub fn name(self) -> &'static str {
        match self {
            DependencyKind::After => "after",
            DependencyKind::AfterAny => "afterany",
            DependencyKind::AfterOk => "afterok",
            DependencyKind::AfterNotOk => "afternotok",
            DependencyKind::AfterCorr => "aftercorr",
            DependencyKind::AfterBurstBuffer => "afterburstbuffer",
            DependencyKind::Singleton => "singleton",
        }
    }
}

/// One condition: a kind and its target (unused for `singleton`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dependency {
    pub kind: DependencyKind,
    pub job: JobId,
    /// `N_M`: task M of array N. `None`: job N, or every task when N is an array.
    pub task: Option<u32>,
    /// `after:N+M`: M minutes after the target started.
    pub delay_min: u32,
}

/// A `--dependency` value: its conditions, all required (`,`) or any one enough (`?`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Dependencies {
    pub any: bool,
    pub list: Vec<Dependency>,
}

impl Dependencies {
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
    pub fn singleton(&self) -> bool {
        self.list.iter().any(|d| d.kind == DependencyKind::Singleton)
    }
}

/// Parses `-d` as Slurm does: `afterok:12:13,afterany:14_2`, `after:5+10`, `afterok:7?afterok:8`,
/// `singleton`, `aftercorr:20`; `,` and `?` may not be mixed.
pub fn parse_dependency(s: &str) -> Result<Dependencies, String> {
    let bad = || format!("invalid dependency specification: {s}");
    let any = s.contains('?');
    if any && s.contains(',') {
        return Err(bad());
    }
    let mut list = Vec::new();
    for part in s.split([',', '?']) {
        if part.is_empty() {
            return Err(bad());
        }
        let mut it = part.split(':');
        let kind = match it.next().unwrap_or("").to_ascii_lowercase().as_str() {
            "after" => DependencyKind::After,
            "afterany" => DependencyKind::AfterAny,
            "afterok" => DependencyKind::AfterOk,
            "afternotok" => DependencyKind::AfterNotOk,
            "aftercorr" => DependencyKind::AfterCorr,
            "afterburstbuffer" => DependencyKind::AfterBurstBuffer,
            "singleton" => DependencyKind::Singleton,
            _ => return Err(bad()),
        };
        if kind == DependencyKind::Singleton {
            if it.next().is_some() {
                return Err(bad());
            }
            list.push(Dependency { kind, job: 0, task: None, delay_min: 0 });
            continue;
        }
        let mut n = 0;
        for target in it {
            let (target, delay_min) = match target.split_once('+') {
                Some((t, d)) if kind == DependencyKind::After => (t, d.parse::<u32>().map_err(|_| bad())?),
                Some(_) => return Err(bad()),
                None => (target, 0),
            };
            let (job, task) = match target.split_once('_') {
                Some((j, "*")) => (j, None),
                Some((j, t)) => (j, Some(t.parse::<u32>().map_err(|_| bad())?)),
                None => (target, None),
            };
            let job: JobId = job.parse().map_err(|_| bad())?;
            list.push(Dependency { kind, job, task, delay_min });
            n += 1;
        }
        if n == 0 {
            return Err(bad());
        }
    }
    Ok(Dependencies { any, list })
}

/// The canonical text of a dependency (read back by [`parse_dependency`]); `state` adds
/// Slurm's `(unfulfilled)`-style suffix to each condition.
pub fn fmt_dependency_with(deps: &Dependencies, state: Option<&str>) -> String {
    if deps.is_empty() {
        return "(null)".into();
    }
    let sep = if deps.any { "?" } else { "," };
    deps.list
        .iter()
        .map(|d| {
            let mut t = d.kind.name().to_string();
            if d.kind != DependencyKind::Singleton {
                t.push_str(&format!(":{}", d.job));
                if let Some(task) = d.task {
                    t.push_str(&format!("_{task}"));
                }
                if d.delay_min > 0 {
                    t.push_str(&format!("+{}", d.delay_min));
                }
            }
            if let Some(st) = state {
                t.push_str(&format!("({st})"));
            }
            t
        })
        .collect::<Vec<_>>()
        .join(sep)
}

pub fn fmt_dependency(deps: &Dependencies) -> String {
    fmt_dependency_with(deps, None)
}

/// `-C/--constraint` in Slurm's grammar: feature names joined by `&` (and, also `,`) and
/// `|` (or; `&` binds tighter), parentheses, node counts (`gpu*2`, `(a&b)*4`: at least that
/// many of the job's nodes have them), matching OR (`[rack1|rack2]`: every node has the same
/// one of them) and multiple counts (`[rack1*2&rack2*4]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Constraint {
    /// What every node must have: a disjunction of conjunctions (empty: anything), the
    /// counted and bracketed parts left out.
    pub any_of: Vec<Vec<String>>,
    /// At least N of the job's nodes have all of these.
    pub counts: Vec<(Vec<String>, u32)>,
    /// All of the job's nodes share one of these features, tried in order.
    pub matching: Vec<String>,
}

/// The longest disjunction a constraint may expand to (parentheses multiply out).
const MAX_TERMS: usize = 256;

struct ConstraintParser<'a> {
    s: &'a [u8],
    at: usize,
}

impl ConstraintParser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.at).copied()
    }

    fn name(&mut self) -> Option<String> {
        let start = self.at;
        while self.peek().is_some_and(|c| c.is_ascii_alphanumeric() || b"_-.:=".contains(&c)) {
            self.at += 1;
        }
        (self.at > start).then(|| String::from_utf8_lossy(&self.s[start..self.at]).into_owned())
    }

    fn count(&mut self) -> Result<Option<u32>, ()> {
        if self.peek() != Some(b'*') {
            return Ok(None);
        }
        self.at += 1;
        let start = self.at;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.at += 1;
        }
        let n: u32 = std::str::from_utf8(&self.s[start..self.at]).ok().and_then(|t| t.parse().ok()).ok_or(())?;
        if n == 0 {
            return Err(());
        }
        Ok(Some(n))
    }

    /// `and ('|' and)*` as a disjunction; `out` collects counted and bracketed parts.
    fn expr(&mut self, out: &mut Constraint, top: bool) -> Result<Vec<Vec<String>>, ()> {
        let mut dnf = self.and(out, top)?;
        while self.peek() == Some(b'|') {
            self.at += 1;
            if !out.counts.is_empty() || !out.matching.is_empty() {
                // Counts and matching OR combine with AND only.
                return Err(());
            }
            dnf.extend(self.and(out, top)?);
            if dnf.len() > MAX_TERMS {
                return Err(());
            }
        }
        Ok(dnf)
    }

    fn and(&mut self, out: &mut Constraint, top: bool) -> Result<Vec<Vec<String>>, ()> {
        let mut dnf: Vec<Vec<String>> = vec![Vec::new()];
        loop {
            let part = self.factor(out, top)?;
            if let Some(part) = part {
                let mut next = Vec::new();
                for a in &dnf {
                    for b in &part {
                        let mut c = a.clone();
                        c.extend(b.iter().cloned());
                        next.push(c);
                    }
                }
                if next.len() > MAX_TERMS {
                    return Err(());
                }
                dnf = next;
            }
            match self.peek() {
                Some(b'&') | Some(b',') => self.at += 1,
                _ => return Ok(dnf),
            }
        }
    }

    /// A name, `( expr )` or `[ ... ]`, maybe counted. `None`: it holds on every node (a
    /// count or a bracket, kept in `out`).
    fn factor(&mut self, out: &mut Constraint, top: bool) -> Result<Option<Vec<Vec<String>>>, ()> {
        let dnf = match self.peek() {
            Some(b'(') => {
                self.at += 1;
                let mut inner = Constraint::default();
                let d = self.expr(&mut inner, false)?;
                if self.peek() != Some(b')') || inner != Constraint::default() {
                    return Err(());
                }
                self.at += 1;
                d
            }
            Some(b'[') => {
                if !top || !out.matching.is_empty() {
                    return Err(());
                }
                self.at += 1;
                self.bracket(out)?;
                if self.peek() != Some(b']') {
                    return Err(());
                }
                self.at += 1;
                return Ok(None);
            }
            _ => vec![vec![self.name().ok_or(())?]],
        };
        match self.count()? {
            None => Ok(Some(dnf)),
            // Only an AND of features may be counted, and only at the top.
            Some(n) if top && dnf.len() == 1 => {
                out.counts.push((dnf.into_iter().next().unwrap_or_default(), n));
                Ok(None)
            }
            Some(_) => Err(()),
        }
    }

    /// Inside `[...]`: `a|b|c` (matching OR) or `a*2&b*4` (multiple counts).
    fn bracket(&mut self, out: &mut Constraint) -> Result<(), ()> {
        let first = self.name().ok_or(())?;
        match self.peek() {
            Some(b'|') => {
                let mut alts = vec![first];
                while self.peek() == Some(b'|') {
                    self.at += 1;
                    alts.push(self.name().ok_or(())?);
                }
                out.matching = alts;
                Ok(())
            }
            _ => {
                let mut name = first;
                loop {
                    let n = self.count()?.ok_or(())?;
                    out.counts.push((vec![name], n));
                    if self.peek() != Some(b'&') {
                        return Ok(());
                    }
                    self.at += 1;
                    name = self.name().ok_or(())?;
                }
            }
        }
    }
}

impl Constraint {
    pub fn parse(s: &str) -> Result<Constraint, String> {
        let bad = || format!("Invalid feature specification: {s}");
        let text: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        let mut p = ConstraintParser { s: text.as_bytes(), at: 0 };
        let mut c = Constraint::default();
        let dnf = p.expr(&mut c, true).map_err(|_| bad())?;
        if p.at != text.len() || text.is_empty() {
            return Err(bad());
        }
        // A disjunction with an empty conjunction (only counts or brackets) holds everywhere.
        c.any_of = if dnf.iter().any(|d| d.is_empty()) { Vec::new() } else { dnf };
        Ok(c)
    }

    /// Whether a node may be one of the job's nodes: it satisfies the plain part, and has
    /// one of the matching OR's features where there is one.
    pub fn matches(&self, features: &[String]) -> bool {
        let has = |f: &String| features.iter().any(|nf| nf == f);
        (self.any_of.is_empty() || self.any_of.iter().any(|all| all.iter().all(has)))
            && (self.matching.is_empty() || self.matching.iter().any(has))
    }

    /// Every feature the constraint names.
    pub fn features(&self) -> impl Iterator<Item = &String> {
        self.any_of.iter().flatten().chain(self.counts.iter().flat_map(|c| c.0.iter())).chain(self.matching.iter())
    }

    /// The fewest nodes the counts need.
    pub fn counted_nodes(&self) -> u32 {
        self.counts.iter().map(|c| c.1).sum()
    }
}

/// The largest nice value either way, as Slurm bounds it (`NICE_OFFSET - 3`).
pub const NICE_MAX: i64 = 2_147_483_645;

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
    pub dependency: Dependencies,
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
    /// GRES per node: `--gres`.
    pub gres: Vec<crate::gres::GresReq>,
    /// `--gpus-per-node`.
    pub gpus_per_node: Option<crate::gres::GresReq>,
    /// `--gpus`: GPUs for the whole job.
    pub gpus: Option<crate::gres::GresReq>,
    /// `--gpus-per-task`.
    pub gpus_per_task: Option<crate::gres::GresReq>,
    /// `--cpus-per-gpu`, `--mem-per-gpu`, `--ntasks-per-gpu`: what each GPU brings with it
    /// (resolved into CPUs, memory and tasks by [`JobSpec::resolve_per_gpu`]).
    pub cpus_per_gpu: Option<u32>,
    pub mem_per_gpu_mb: Option<u64>,
    pub ntasks_per_gpu: Option<u32>,
    /// `-L/--licenses` as given (`matlab:2,fluent`; see [`parse_licenses`]).
    pub licenses: Option<String>,
    /// `--gpus-per-socket` with `--sockets-per-node`: that many GPUs on each of that many
    /// sockets of every node (scheduled as their product per node, placed near their CPUs).
    pub gpus_per_socket: Option<crate::gres::GresReq>,
    pub sockets_per_node: Option<u32>,
    /// `-A/--account` and `-q/--qos` as given (accounting decides what they become).
    pub account: Option<String>,
    pub qos: Option<String>,
    /// `--nice`: subtracted from the job's priority; negative only for administrators.
    pub nice: i32,
    /// `--priority`: a fixed priority an administrator gave (others' is ignored, as Slurm).
    pub priority: Option<u32>,
    /// `--reservation`: the advance reservation it runs in.
    pub reservation: Option<String>,
    /// `--switches=N[@max-time]`: at most N leaf switches, waited for `switch_wait` seconds
    /// (the controller caps it at `max_switch_wait`).
    pub switches: Option<u32>,
    pub switch_wait: Option<u32>,
    /// `--contiguous`: nodes consecutive in the configuration's order.
    pub contiguous: bool,
    /// `--spread-job`: over as many nodes as it has tasks (one task a node where it can).
    pub spread_job: bool,
    /// `--use-min-nodes`: of a node range (`-N 2-4`), the fewest nodes (else the most).
    pub use_min_nodes: bool,
    /// `--exclusive=user`: its nodes run no other user's jobs while it runs (it does not take
    /// them whole).
    pub exclusive_user: bool,
    /// `--segment=N` (`topology/block`): its nodes in groups of N, each group in one block.
    pub segment: Option<u32>,
    /// `-O/--overcommit`: CPUs for one task per node are allocated (`-c` of them), and the
    /// tasks are laid out over those nodes past their CPUs.
    pub overcommit: bool,
    /// `--tmp`: only nodes whose `TmpDisk` holds this much (MB).
    pub tmp_mb: Option<u64>,
    /// `--time-min`: the least time limit it accepts (seconds). Slurm's backfill may start it
    /// with a limit between this and its `--time`; with `--deadline` and neither given, a
    /// minute.
    pub time_min: Option<u64>,
    /// `--mincpus`: at least this many CPUs on each of its nodes.
    pub min_cpus_per_node: Option<u32>,
    /// `-s/--oversubscribe`: it may share its nodes' CPUs where its partition lets jobs do so
    /// (`OverSubscribe=YES`); under the default `OverSubscribe=NO` it changes nothing, as in
    /// Slurm.
    pub oversubscribe: bool,
    /// `-k/--no-kill`: a node of its allocation failing does not end it.
    pub no_kill: bool,
    /// `--kill-on-invalid-dep=yes|no`: whether it ends when its dependency can never be
    /// satisfied (`None`: `SchedulerParameters=kill_invalid_depend` decides).
    pub kill_on_invalid_dep: Option<bool>,
    /// `--cores-per-socket`, `--threads-per-core` (`--hint`, `-B`): only nodes with at least
    /// this many; `--ntasks-per-core`: at most this many tasks on a core.
    pub cores_per_socket: Option<u32>,
    pub threads_per_core: Option<u32>,
    pub ntasks_per_core: Option<u32>,
    /// `--deadline` (epoch seconds): it ends `DEADLINE` when it can no longer end before it.
    pub deadline: Option<i64>,
    /// `--profile` and `--acctg-freq` as given (checked as Slurm checks them).
    pub profile: Option<String>,
    pub acctg_freq: Option<String>,
    /// scrontab: the schedule this job recurs on, and its entry's lines in the crontab
    /// (first, last; counted from 1), its `#SCRON` lines with it.
    pub cron: Option<String>,
    pub cron_lines: (u32, u32),
}

/// Licenses as `-L` and `Licenses=` write them: `name[:count]` (or `name*count`), comma
/// separated; a count defaults to 1.
pub fn parse_licenses(s: &str) -> Result<Vec<(String, u32)>, String> {
    let bad = || "Invalid license specification".to_string();
    s.split(',')
        .filter(|t| !t.trim().is_empty())
        .map(|t| {
            let t = t.trim();
            let (name, n) = t.split_once([':', '*']).map_or((t, "1"), |(a, b)| (a, b));
            let n: u32 = n.parse().map_err(|_| bad())?;
            if name.is_empty() || n == 0 {
                return Err(bad());
            }
            Ok((name.to_string(), n))
        })
        .collect()
}

impl JobSpec {
    /// Turns `--cpus-per-gpu`, `--mem-per-gpu` and `--ntasks-per-gpu` into the CPUs, memory
    /// and tasks the scheduler places, from the GPUs asked for: per task (`--gpus-per-task`),
    /// per node (`--gres`, `--gpus-per-node`) or for the job (`--gpus`, spread evenly over
    /// its minimum node count, as it is scheduled).
    pub fn resolve_per_gpu(&mut self) -> Result<(), String> {
        if let Some(g) = &self.gpus_per_socket {
            let sockets =
                self.sockets_per_node.ok_or("--gpus-per-socket option requires --sockets-per-node specification")?;
            if self.gpus_per_node.is_none() {
                self.gpus_per_node = Some(crate::gres::GresReq {
                    name: g.name.clone(),
                    kind: g.kind.clone(),
                    count: g.count * u64::from(sockets.max(1)),
                });
            }
        }
        if self.cpus_per_gpu.is_none() && self.mem_per_gpu_mb.is_none() && self.ntasks_per_gpu.is_none() {
            return Ok(());
        }
        let bad = || "Invalid generic resource (gres) specification".to_string();
        let nodes = u64::from(self.min_nodes.unwrap_or(1).max(1));
        let per_node: Option<u64> = self
            .gres
            .iter()
            .chain(self.gpus_per_node.iter())
            .find(|g| g.name == "gpu")
            .map(|g| g.count)
            .or_else(|| self.gpus.as_ref().map(|g| g.count.div_ceil(nodes)));
        let per_task = self.gpus_per_task.as_ref().map(|g| g.count);
        if let Some(n) = self.ntasks_per_gpu {
            match (per_node, self.ntasks) {
                // GPUs given: that many tasks for each.
                (Some(g), None) => self.ntasks = Some((g * nodes * u64::from(n)) as u32),
                // Tasks given: as many GPUs as they need.
                (None, Some(t)) if per_task.is_none() => {
                    self.gpus = Some(crate::gres::GresReq {
                        name: "gpu".into(),
                        kind: None,
                        count: u64::from(t.div_ceil(n.max(1))),
                    })
                }
                (Some(_), Some(_)) => {}
                _ => return Err(bad()),
            }
        }
        let per_node = per_node.or_else(|| self.gpus.as_ref().map(|g| g.count.div_ceil(nodes)));
        if let Some(c) = self.cpus_per_gpu {
            match (per_task, per_node) {
                (Some(g), _) => self.cpus_per_task = Some((g as u32).saturating_mul(c)),
                (None, Some(g)) => {
                    // The node's CPUs for its GPUs, shared by its tasks.
                    let cpus = (g as u32).saturating_mul(c);
                    let tasks_per_node = self
                        .ntasks_per_node
                        .or_else(|| self.ntasks.map(|t| t.div_ceil(nodes as u32)))
                        .unwrap_or(1)
                        .max(1);
                    self.cpus_per_task = Some(cpus.div_ceil(tasks_per_node).max(1));
                }
                (None, None) => return Err(bad()),
            }
        }
        if let Some(m) = self.mem_per_gpu_mb {
            let tasks_per_node = u64::from(self.ntasks_per_node.unwrap_or(1).max(1));
            let gpus_here = match (per_task, per_node) {
                (Some(g), _) => g * tasks_per_node,
                (None, Some(g)) => g,
                (None, None) => return Err(bad()),
            };
            self.mem_per_node_mb = Some(m * gpus_here);
        }
        Ok(())
    }

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

/// Orders raw wait(2) statuses by how bad they are: any signal above any exit code, larger
/// above smaller. A job's or step's status is its worst task's.
pub fn exit_rank(status: i32) -> i64 {
    let sig = status & 0x7f;
    if sig != 0 {
        1000 + i64::from(sig)
    } else {
        i64::from((status >> 8) & 0xff)
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
    fn per_gpu_requests_become_cpus_memory_and_tasks() {
        let g = |t: &str| crate::gres::parse_gpus(t).unwrap();
        // Per node: one task per node (the default) holding the node's GPUs' CPUs and memory.
        let mut s = JobSpec {
            gpus_per_node: Some(g("4")),
            cpus_per_gpu: Some(8),
            mem_per_gpu_mb: Some(10_000),
            ..Default::default()
        };
        s.resolve_per_gpu().unwrap();
        assert_eq!((s.ntasks_per_node, s.cpus_per_task, s.mem_per_node_mb), (None, Some(32), Some(40_000)));
        // Per task.
        let mut s = JobSpec { gpus_per_task: Some(g("2")), cpus_per_gpu: Some(3), ..Default::default() };
        s.resolve_per_gpu().unwrap();
        assert_eq!(s.cpus_per_task, Some(6));
        // For the job, over its nodes; four tasks share a node's GPUs' CPUs.
        let mut s = JobSpec {
            gpus: Some(g("8")),
            min_nodes: Some(2),
            ntasks: Some(8),
            cpus_per_gpu: Some(2),
            ..Default::default()
        };
        s.resolve_per_gpu().unwrap();
        assert_eq!(s.cpus_per_task, Some(2));
        // Tasks per GPU, either way round.
        let mut s = JobSpec { gres: vec![g("2")], min_nodes: Some(2), ntasks_per_gpu: Some(3), ..Default::default() };
        s.resolve_per_gpu().unwrap();
        assert_eq!(s.ntasks, Some(12));
        let mut s = JobSpec { ntasks: Some(5), ntasks_per_gpu: Some(2), ..Default::default() };
        s.resolve_per_gpu().unwrap();
        assert_eq!(s.gpus.map(|g| g.count), Some(3));
        // Per socket: the product per node, and Slurm's refusal without a socket count.
        let mut s = JobSpec { gpus_per_socket: Some(g("2")), sockets_per_node: Some(2), ..Default::default() };
        s.resolve_per_gpu().unwrap();
        assert_eq!(s.gpus_per_node.map(|g| g.count), Some(4));
        let mut s = JobSpec { gpus_per_socket: Some(g("2")), ..Default::default() };
        assert_eq!(
            s.resolve_per_gpu().unwrap_err(),
            "--gpus-per-socket option requires --sockets-per-node specification"
        );
        // Per-GPU amounts without GPUs.
        let mut s = JobSpec { cpus_per_gpu: Some(2), ..Default::default() };
        assert_eq!(s.resolve_per_gpu().unwrap_err(), "Invalid generic resource (gres) specification");
    }

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
        assert_eq!(d.list.len(), 3);
        assert!(!d.any);
        assert_eq!(fmt_dependency(&d), "afterok:12,afterok:13,afterany:14");
        let d = parse_dependency("after:5+10?afternotok:7_3?singleton").unwrap();
        assert!(d.any);
        assert_eq!(d.list[0].delay_min, 10);
        assert_eq!(d.list[1].task, Some(3));
        assert_eq!(fmt_dependency(&d), "after:5+10?afternotok:7_3?singleton");
        assert_eq!(parse_dependency(&fmt_dependency(&d)).unwrap(), d);
        assert_eq!(
            fmt_dependency_with(&parse_dependency("afterok:4_*").unwrap(), Some("unfulfilled")),
            "afterok:4(unfulfilled)"
        );
        assert_eq!(parse_dependency("aftercorr:9").unwrap().list[0].kind, DependencyKind::AfterCorr);
        for bad in
            ["sometime:1", "afterok", "afterok:1,afterok:2?afterok:3", "afterok:x", "afterok:1+5", "singleton:3", ","]
        {
            assert!(parse_dependency(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn constraints_match_features() {
        let c = Constraint::parse("a&b|c").unwrap();
        assert!(c.matches(&["a".into(), "b".into()]));
        assert!(c.matches(&["c".into()]));
        assert!(!c.matches(&["a".into()]));
        assert!(Constraint::parse("a&&b").is_err());
    }

    #[test]
    fn constraints_in_slurms_full_grammar() {
        let f = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<String>>();
        // Parentheses multiply out.
        let c = Constraint::parse("(a|b)&c").unwrap();
        assert_eq!(c.any_of, vec![f(&["a", "c"]), f(&["b", "c"])]);
        assert!(c.matches(&f(&["b", "c"])) && !c.matches(&f(&["a", "b"])));
        // Counts: every node still needs the rest; the counted part is checked on the set.
        let c = Constraint::parse("gpu*2&ib").unwrap();
        assert_eq!((c.any_of.clone(), c.counts.clone()), (vec![f(&["ib"])], vec![(f(&["gpu"]), 2)]));
        assert!(c.matches(&f(&["ib"])) && !c.matches(&f(&["gpu"])));
        let c = Constraint::parse("(knl&flat)*4&haswell*2").unwrap();
        assert_eq!(c.counts, vec![(f(&["knl", "flat"]), 4), (f(&["haswell"]), 2)]);
        assert_eq!((c.any_of.len(), c.counted_nodes()), (0, 6));
        // Matching OR and multiple counts.
        let c = Constraint::parse("[rack1|rack2|rack3]").unwrap();
        assert_eq!(c.matching, f(&["rack1", "rack2", "rack3"]));
        assert!(c.matches(&f(&["rack2"])) && !c.matches(&f(&["rack9"])));
        let c = Constraint::parse("[rack1*2&rack2*4]&ssd").unwrap();
        assert_eq!(c.counts, vec![(f(&["rack1"]), 2), (f(&["rack2"]), 4)]);
        assert_eq!(c.any_of, vec![f(&["ssd"])]);
        // What Slurm refuses: counts or brackets under OR, counted ORs, nested brackets.
        for bad in ["a*2|b", "[a|b]|c", "(a|b)*2", "[[a|b]]", "a*0", "a*", "(a", "a)", "", "a&", "[a]"] {
            assert!(Constraint::parse(bad).is_err(), "{bad}");
        }
    }
}
