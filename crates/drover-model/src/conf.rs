//! `slurm.conf` in Slurm's syntax: `Key=Value` pairs, case-insensitive keys, `#` comments,
//! `\` continuation, `Include` files, `NodeName=DEFAULT`/`PartitionName=DEFAULT`, hostlists in
//! names. Keys Drover does not support yet are collected in [`Config::unsupported`] with file and
//! line so the daemon can report each once; malformed lines are errors with file and line.

use crate::duration::{parse_time_limit, TimeLimit};
use crate::hostlist::Hostlist;
use crate::memsize::parse_mb;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {msg}")]
pub struct ConfError {
    pub file: String,
    pub line: usize,
    pub msg: String,
}

/// A key Drover read but does not act on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unsupported {
    pub file: String,
    pub line: usize,
    pub key: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PartitionState {
    Up,
    Down,
    Drain,
    Inactive,
}

impl PartitionState {
    pub fn name(self) -> &'static str {
        match self {
            PartitionState::Up => "UP",
            PartitionState::Down => "DOWN",
            PartitionState::Drain => "DRAIN",
            PartitionState::Inactive => "INACTIVE",
        }
    }
}

/// `EnforcePartLimits`: whether partition limits refuse a job at submit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EnforcePartLimits {
    No,
    Any,
    All,
}

/// One compute node as configured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeConf {
    pub name: String,
    pub addr: String,
    pub hostname: String,
    pub port: u16,
    pub cpus: u32,
    pub boards: u32,
    pub sockets: u32,
    pub cores_per_socket: u32,
    pub threads_per_core: u32,
    pub real_memory_mb: u64,
    pub tmp_disk_mb: u64,
    pub features: Vec<String>,
    /// `Gres=` as written, and parsed.
    pub gres: String,
    pub gres_list: Vec<crate::gres::NodeGres>,
    pub weight: u32,
    /// `State=` from the file (`UNKNOWN`, `DOWN`, `DRAIN`, `FUTURE`, `CLOUD`...), upper-cased.
    pub state: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionConf {
    pub name: String,
    pub nodes: Vec<String>,
    /// The `Nodes=` text as written (`ALL` expanded), for display.
    pub nodes_expr: String,
    pub default: bool,
    pub max_time: TimeLimit,
    pub default_time: Option<TimeLimit>,
    pub max_nodes: Option<u32>,
    pub min_nodes: u32,
    pub state: PartitionState,
    pub hidden: bool,
    pub allow_groups: Option<Vec<String>>,
    pub priority_tier: u32,
    /// `PreemptMode=` of the partition (`preempt/partition_prio`): what becomes of its jobs
    /// when preempted; `None` follows the cluster's.
    pub preempt_mode: Option<PreemptMode>,
    /// `GraceTime=` (seconds): SIGTERM this long before a preempted job of it ends.
    pub grace_time: u32,
}

/// Per-user RPC rate limiting (`SlurmctldParameters=rl_*`, Slurm 23.02): each user has a
/// bucket of `bucket_size` tokens, refilled with `refill_rate` every `refill_period` seconds;
/// an RPC takes one, and a user whose bucket is empty is told to back off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateLimitConf {
    pub bucket_size: u32,
    pub refill_rate: u32,
    pub refill_period: u32,
    /// Users tracked at once.
    pub table_size: u32,
    /// At most one "rate limit exceeded" line per user in this many seconds (0: every time).
    pub log_freq: u32,
}

impl Default for RateLimitConf {
    fn default() -> Self {
        RateLimitConf { bucket_size: 30, refill_rate: 2, refill_period: 1, table_size: 8192, log_freq: 0 }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Config {
    pub path: String,
    pub cluster_name: String,
    pub controller_hosts: Vec<ControllerHost>,
    pub slurmctld_port: u16,
    pub slurmd_port: u16,
    pub state_save_location: String,
    pub slurmd_spool_dir: String,
    pub slurmctld_log_file: Option<String>,
    pub slurmd_log_file: Option<String>,
    pub max_job_count: u32,
    pub max_array_size: u32,
    pub first_job_id: u32,
    pub kill_wait: u32,
    pub slurmd_timeout: u32,
    /// `SlurmctldTimeout`, where slurm.conf sets it: how long a standby controller waits for
    /// the active one's lease to be renewed before it takes over (Drover's default is shorter
    /// than Slurm's 120 s: see [`Config::controller_lease`]).
    pub slurmctld_timeout: Option<u32>,
    /// `JobRequeue`: batch jobs may be requeued (after a node failure) unless they say
    /// `--no-requeue` (default 1).
    pub job_requeue: bool,
    pub min_job_age: u32,
    /// `ScronParameters=enable`: users may keep a crontab of recurring jobs (scrontab).
    pub scron_enabled: bool,
    pub return_to_service: u32,
    pub enforce_part_limits: EnforcePartLimits,
    /// `SchedulerParameters` as written (the options Drover honours are parsed below).
    pub scheduler_parameters: Option<String>,
    /// `SchedulerParameters=kill_invalid_depend`: cancel jobs whose dependency can never be
    /// satisfied instead of leaving them pending.
    pub kill_invalid_depend: bool,
    /// `SchedulerParameters=max_script_size=N`: the largest batch script accepted (bytes;
    /// Slurm's default 4 MiB).
    pub max_script_size: u32,
    /// `SchedulerParameters=enable_user_top`: users may `scontrol top` their own jobs
    /// (otherwise only administrators may).
    pub enable_user_top: bool,
    /// `TopologyPlugin=topology/tree`: place jobs by `topology.conf`'s switches.
    pub topology_tree: bool,
    /// `TopologyPlugin=topology/block`: place jobs by `topology.conf`'s blocks.
    pub topology_block: bool,
    /// `topology.conf` (beside slurm.conf), read with `topology/tree` or `topology/block`.
    pub topology: Option<crate::topology::Topology>,
    /// `SchedulerParameters=bf_max_job_user=N` (0: no limit) and `bf_min_age_reserve=N`
    /// (seconds): see the scheduler's `SchedConfig`.
    pub bf_max_job_user: u32,
    pub bf_min_age_reserve: u32,
    /// `SchedulerParameters=max_switch_wait=N`: the longest a job waits for the switch
    /// count it asked for (`--switches=N@time`), in seconds (Slurm's default 300).
    pub max_switch_wait: u32,
    /// `SchedulerType`: `sched/backfill` (the default) or `sched/builtin` (strict priority order).
    pub backfill: bool,
    /// `SchedulerParameters=bf_max_job_test=N`.
    pub bf_max_job_test: u32,
    /// `SchedulerParameters=bf_window=MINUTES`.
    pub bf_window_min: u32,
    /// `SchedulerParameters=bf_interval=SECONDS` (Drover's default 5; Slurm's is 30).
    pub bf_interval: u32,
    /// `SchedulerParameters=bf_policy=NAME` (Drover's own): `predictive` (the default: EASY
    /// on run times predicted from each user's recent jobs, backfill by slowdown score),
    /// `conservative` (Slurm's backfill) or `easy`.
    pub bf_policy: String,
    /// `SchedulerParameters=bf_slip_limit=SECONDS` (Drover's own, default 3600): with
    /// predictions, how far a reserved job's expected start may slip before the plan falls
    /// back to time limits for it.
    pub bf_slip_limit: u32,
    /// `GresTypes`: the GRES names nodes may have.
    pub gres_types: Vec<String>,
    /// `TaskPlugin` includes `task/affinity`: steps' tasks are bound to CPUs automatically.
    pub task_affinity: bool,
    /// Run as root on each node of a job before its first task there (`Prolog`) and after
    /// it ends (`Epilog`); as the user around each task (`TaskProlog`, `TaskEpilog`).
    pub prolog: Option<String>,
    pub epilog: Option<String>,
    pub task_prolog: Option<String>,
    pub task_epilog: Option<String>,
    /// Run by the controller as each job starts (before anything is launched) and ends.
    pub prolog_slurmctld: Option<String>,
    pub epilog_slurmctld: Option<String>,
    pub prolog_flags: PrologFlags,
    /// Run as root on each node every `HealthCheckInterval` seconds (0: never); failing,
    /// it drains the node with its output as the reason.
    pub health_check_program: Option<String>,
    pub health_check_interval: u32,
    /// `Licenses=`: the cluster's licenses and how many of each.
    pub licenses: Vec<(String, u32)>,
    /// `AccountingStorageTRES`: TRES tracked beyond cpu, mem, node and billing (`gres/gpu`
    /// makes GPUs show in TRES, CfgTRES and AllocTRES, as in Slurm).
    pub accounting_storage_tres: Vec<String>,
    /// Where job records go: `AccountingStorageType=accounting_storage/slurmdbd` sends them
    /// to `drover accounting` at `AccountingStorageHost:AccountingStoragePort`; `None` keeps
    /// none (`accounting_storage/none`, Slurm's default).
    pub accounting_storage: Option<String>,
    pub accounting_storage_port: u16,
    /// `AccountingStorageEnforce`: what accounting's associations and QoS enforce.
    pub enforce: AccountingEnforce,
    /// `PriorityType`, the `PriorityWeight*` weights and the rest of the priority keys.
    pub priority: crate::priority_conf::PriorityConf,
    /// `AuthType`, `CredType`, `AuthInfo`, `SlurmUser`.
    pub auth: crate::auth_conf::AuthConf,
    /// `PropagateResourceLimits[Except]`: the submitter's limits a job gets (names as
    /// `NOFILE`; default all).
    pub propagate_rlimits: Vec<String>,
    /// `SrunPortRange`: the ports srun listens on for its tasks' I/O (none: any).
    pub srun_port_range: Option<(u16, u16)>,
    /// `SlurmctldParameters=enable_configless`: the controller hands its configuration to
    /// agents and login hosts that have none (`drover node --conf-server`).
    pub configless: bool,
    /// `SlurmctldParameters=rl_enable[,rl_bucket_size=N,...]`: per-user RPC rate limiting
    /// (Slurm 23.02's): a user over the limit is told to back off.
    pub rate_limit: Option<RateLimitConf>,
    /// `PreemptType=preempt/partition_prio`: jobs of a partition preempt running jobs of
    /// partitions with a lower `PriorityTier` on the nodes they share.
    pub preempt_partition: bool,
    /// `PreemptType=preempt/qos`: jobs of a QoS preempt running jobs of the QoS its
    /// `Preempt` lists.
    pub preempt_qos: bool,
    /// `PreemptMode`: what preemption does to a job whose QoS says `cluster`.
    pub preempt_mode: PreemptMode,
    /// `PreemptExemptTime` (seconds): a job that has run less is not preempted.
    pub preempt_exempt_secs: u64,
    pub nodes: Vec<NodeConf>,
    pub partitions: Vec<PartitionConf>,
    pub unsupported: Vec<Unsupported>,
    /// Every top-level `Key=Value` as written (the last of a key wins), for `scontrol show
    /// config` to show what Drover does not model as the file says it.
    #[serde(default)]
    pub raw: Vec<(String, String)>,
}

/// `PreemptMode`: what becomes of a preempted job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum PreemptMode {
    #[default]
    Off,
    Cancel,
    Requeue,
    Suspend,
}

impl PreemptMode {
    /// A mode as `slurm.conf` or a QoS names it (`GANG` and `WITHIN` alongside are accepted).
    pub fn parse(v: &str) -> Result<PreemptMode, String> {
        let mut mode = PreemptMode::Off;
        for part in v.split(',').map(|p| p.trim().to_ascii_uppercase()) {
            mode = match part.as_str() {
                "OFF" => PreemptMode::Off,
                "CANCEL" => PreemptMode::Cancel,
                "REQUEUE" => PreemptMode::Requeue,
                "SUSPEND" => PreemptMode::Suspend,
                "GANG" | "WITHIN" => mode,
                _ => return Err(format!("PreemptMode: expected OFF, CANCEL, REQUEUE or SUSPEND, found `{v}`")),
            };
        }
        Ok(mode)
    }
}

/// `AccountingStorageEnforce`: `associations` (a job needs an association of its user,
/// account and partition), `limits` (its limits hold jobs; implies associations), `qos` (a
/// job's QoS must be one its association allows; implies associations), `safe`, and
/// `nojobs`/`nosteps`/`wckeys`/`all` as Slurm names them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountingEnforce {
    pub associations: bool,
    pub limits: bool,
    pub qos: bool,
    pub safe: bool,
}

impl AccountingEnforce {
    pub fn parse(v: &str) -> Result<AccountingEnforce, String> {
        let mut e = AccountingEnforce::default();
        for f in v.split(',').map(|f| f.trim().to_ascii_lowercase()).filter(|f| !f.is_empty()) {
            match f.as_str() {
                "associations" => e.associations = true,
                "limits" => (e.limits, e.associations) = (true, true),
                "qos" => (e.qos, e.associations) = (true, true),
                "safe" => (e.safe, e.limits, e.associations) = (true, true, true),
                "all" => e = AccountingEnforce { associations: true, limits: true, qos: true, safe: true },
                "none" | "0" => e = AccountingEnforce::default(),
                // Accepted; Drover records every job and step and has no WCKeys yet.
                "nojobs" | "nosteps" | "wckeys" => {}
                other => {
                    return Err(format!(
                    "AccountingStorageEnforce: expected associations, limits, qos, safe, all or none, found `{other}`"
                ))
                }
            }
        }
        Ok(e)
    }
}

/// `PrologFlags`: `Alloc` (the prolog runs on every node when the job starts, not at its
/// first task there), `Contain` (an `extern` step holds the job's processes started
/// outside srun), `NoHold` (a job whose prolog failed is requeued without a hold).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrologFlags {
    pub alloc: bool,
    pub contain: bool,
    pub nohold: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerHost {
    pub name: String,
    pub addr: String,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            path: String::new(),
            cluster_name: "cluster".into(),
            controller_hosts: Vec::new(),
            slurmctld_port: 6817,
            slurmd_port: 6818,
            state_save_location: "/var/spool/slurmctld".into(),
            slurmd_spool_dir: "/var/spool/slurmd".into(),
            slurmctld_log_file: None,
            slurmd_log_file: None,
            max_job_count: 10000,
            max_array_size: 1001,
            scheduler_parameters: None,
            kill_invalid_depend: false,
            max_script_size: 4 << 20,
            enable_user_top: false,
            topology_tree: false,
            topology_block: false,
            topology: None,
            max_switch_wait: 300,
            bf_max_job_user: 0,
            bf_min_age_reserve: 0,
            backfill: true,
            bf_max_job_test: 100,
            bf_window_min: 1440,
            bf_interval: 5,
            bf_policy: "predictive".into(),
            bf_slip_limit: 3600,
            first_job_id: 1,
            kill_wait: 30,
            slurmd_timeout: 300,
            slurmctld_timeout: None,
            job_requeue: true,
            min_job_age: 300,
            scron_enabled: false,
            return_to_service: 0,
            enforce_part_limits: EnforcePartLimits::No,
            gres_types: Vec::new(),
            task_affinity: false,
            prolog: None,
            epilog: None,
            task_prolog: None,
            task_epilog: None,
            prolog_slurmctld: None,
            epilog_slurmctld: None,
            prolog_flags: PrologFlags::default(),
            health_check_program: None,
            health_check_interval: 0,
            licenses: Vec::new(),
            accounting_storage_tres: Vec::new(),
            accounting_storage: None,
            accounting_storage_port: 6819,
            enforce: AccountingEnforce::default(),
            preempt_qos: false,
            preempt_partition: false,
            preempt_mode: PreemptMode::Off,
            preempt_exempt_secs: 0,
            priority: Default::default(),
            auth: Default::default(),
            propagate_rlimits: crate::rlimits::all(),
            srun_port_range: None,
            configless: false,
            rate_limit: None,
            nodes: Vec::new(),
            partitions: Vec::new(),
            unsupported: Vec::new(),
            raw: Vec::new(),
        }
    }
}

impl Config {
    pub fn node(&self, name: &str) -> Option<&NodeConf> {
        self.nodes.iter().find(|n| n.name == name)
    }
    pub fn partition(&self, name: &str) -> Option<&PartitionConf> {
        self.partitions.iter().find(|p| p.name == name)
    }
    pub fn default_partition(&self) -> Option<&PartitionConf> {
        self.partitions.iter().find(|p| p.default).or_else(|| self.partitions.first())
    }
    /// `%n` in paths is the node name, as in Slurm.
    pub fn spool_dir_for(&self, node: &str) -> String {
        self.slurmd_spool_dir.replace("%n", node).replace("%h", node)
    }
    pub fn slurmd_log_for(&self, node: &str) -> Option<String> {
        self.slurmd_log_file.as_ref().map(|f| f.replace("%n", node).replace("%h", node))
    }
    /// The controller's local socket (for commands on its host): in `/run/drover`, beside
    /// accounting's, named by the port so that clusters on one host do not meet.
    pub fn controller_socket(&self) -> PathBuf {
        PathBuf::from(format!("/run/drover/controller-{}.sock", self.slurmctld_port))
    }
    /// The controller address agents connect to.
    /// `drover accounting`'s address (`AccountingStorageHost:AccountingStoragePort`), where
    /// slurm.conf sends records there.
    pub fn accounting_addr(&self) -> Option<String> {
        self.accounting_storage.as_ref().map(|h| format!("{h}:{}", self.accounting_storage_port))
    }
    pub fn controller_addr(&self) -> String {
        let host = self.controller_hosts.first().map(|h| h.addr.as_str()).unwrap_or("127.0.0.1");
        format!("{host}:{}", self.slurmctld_port)
    }
    /// Every controller's address, the primary first (one, where slurm.conf names none).
    pub fn controller_addrs(&self) -> Vec<String> {
        if self.controller_hosts.is_empty() {
            return vec![self.controller_addr()];
        }
        self.controller_hosts.iter().map(|h| format!("{}:{}", h.addr, self.slurmctld_port)).collect()
    }
    /// Whether several `SlurmctldHost` lines make controllers that back each other up.
    pub fn controller_failover(&self) -> bool {
        self.controller_hosts.len() > 1
    }
    /// How long a controller's lease on `StateSaveLocation` lasts unrenewed: `SlurmctldTimeout`
    /// where set, else 3 s (the lease is a file renewed twice a second, not Slurm's pings,
    /// so a short one costs nothing).
    pub fn controller_lease(&self) -> std::time::Duration {
        std::time::Duration::from_secs(u64::from(self.slurmctld_timeout.unwrap_or(3)))
    }
}

/// Keys at the top level of slurm.conf that Drover acts on.
const SUPPORTED: &[&str] = &[
    "clustername",
    "slurmctldhost",
    "controlmachine",
    "controladdr",
    "slurmctldport",
    "slurmdport",
    "statesavelocation",
    "slurmdspooldir",
    "slurmctldlogfile",
    "slurmdlogfile",
    "maxjobcount",
    "maxarraysize",
    "firstjobid",
    "killwait",
    "slurmdtimeout",
    "slurmctldtimeout",
    "jobrequeue",
    "minjobage",
    "scronparameters",
    "returntoservice",
    "enforcepartlimits",
    "schedulerparameters",
    "schedulertype",
    "grestypes",
    "taskplugin",
    "prolog",
    "epilog",
    "taskprolog",
    "taskepilog",
    "prologflags",
    "healthcheckprogram",
    "healthcheckinterval",
    "licenses",
    "prologslurmctld",
    "epilogslurmctld",
    "accountingstoragetres",
    "accountingstoragetype",
    "accountingstoragehost",
    "accountingstorageport",
    "accountingstorageenforce",
    "preempttype",
    "preemptmode",
    "preemptexempttime",
];

const NODE_KEYS: &[&str] = &[
    "nodename",
    "nodeaddr",
    "nodehostname",
    "port",
    "cpus",
    "procs",
    "boards",
    "socketsperboard",
    "sockets",
    "corespersocket",
    "threadspercore",
    "realmemory",
    "tmpdisk",
    "features",
    "feature",
    "gres",
    "weight",
    "state",
];

const PART_KEYS: &[&str] = &[
    "partitionname",
    "nodes",
    "default",
    "maxtime",
    "defaulttime",
    "maxnodes",
    "minnodes",
    "state",
    "hidden",
    "allowgroups",
    "prioritytier",
    "preemptmode",
    "gracetime",
];

/// The `Key=Value` lines of a flat configuration file (cgroup.conf, slurmdbd.conf): `#`
/// comments and blank lines skipped; each (line number, key, value) trimmed. A line without
/// `=` is an error naming `name` and the line.
pub fn key_value_lines(name: &str, text: &str) -> Result<Vec<(usize, String, String)>, String> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let (k, v) = line.split_once('=').ok_or_else(|| format!("{name}:{n}: expected Key=Value, found `{line}`"))?;
        out.push((n, k.trim().to_string(), v.trim().to_string()));
    }
    Ok(out)
}

/// Reads and parses a slurm.conf file and its `Include`s.
pub fn parse_file(path: &Path) -> Result<Config, ConfError> {
    let text = std::fs::read_to_string(path).map_err(|e| ConfError {
        file: path.display().to_string(),
        line: 0,
        msg: format!("cannot read: {e}"),
    })?;
    let mut lines = Vec::new();
    collect_lines(path, &text, &mut lines, 0)?;
    let mut cfg = parse_lines(&lines)?;
    cfg.path = path.display().to_string();
    if cfg.topology_tree || cfg.topology_block {
        let plugin = if cfg.topology_block { "topology/block" } else { "topology/tree" };
        let tpath = path.parent().unwrap_or(Path::new(".")).join("topology.conf");
        let file = tpath.display().to_string();
        let text = std::fs::read_to_string(&tpath).map_err(|e| ConfError {
            file: file.clone(),
            line: 0,
            msg: format!("cannot read (TopologyPlugin={plugin} needs it): {e}"),
        })?;
        let parsed = if cfg.topology_block {
            crate::topology::Topology::parse_blocks(&text)
        } else {
            crate::topology::Topology::parse(&text)
        };
        cfg.topology = Some(parsed.map_err(|msg| ConfError { file, line: 0, msg })?);
    }
    Ok(cfg)
}

/// Parses slurm.conf text that has no `Include` lines (tests, generated configs).
pub fn parse_str(name: &str, text: &str) -> Result<Config, ConfError> {
    let mut lines = Vec::new();
    collect_lines(Path::new(name), text, &mut lines, 0)?;
    let mut cfg = parse_lines(&lines)?;
    cfg.path = name.to_string();
    Ok(cfg)
}

struct Line {
    /// Shared by the lines of one file.
    file: std::rc::Rc<str>,
    line: usize,
    pairs: Vec<(String, String)>,
}

fn collect_lines(path: &Path, text: &str, out: &mut Vec<Line>, depth: usize) -> Result<(), ConfError> {
    let file: std::rc::Rc<str> = path.display().to_string().into();
    let mut pending = String::new();
    let mut start_line = 0;
    for (idx, raw) in text.lines().enumerate() {
        let lineno = idx + 1;
        let no_comment = strip_comment(raw);
        if pending.is_empty() {
            start_line = lineno;
        }
        let trimmed = no_comment.trim_end();
        if let Some(body) = trimmed.strip_suffix('\\') {
            pending.push_str(body);
            pending.push(' ');
            continue;
        }
        // A line without continuation is read in place.
        let joined;
        let full = if pending.is_empty() {
            trimmed.trim()
        } else {
            pending.push_str(trimmed);
            joined = std::mem::take(&mut pending);
            joined.trim()
        };
        if full.is_empty() {
            continue;
        }
        let err = |msg: String| ConfError { file: file.to_string(), line: start_line, msg };
        // `Include FILE` (no '=').
        let mut words = full.split_whitespace();
        if let Some(first) = words.next() {
            if first.eq_ignore_ascii_case("include") && !first.contains('=') {
                let target = words.next().ok_or_else(|| err("Include needs a file name".into()))?;
                if depth > 16 {
                    return Err(err("Include nested too deeply".into()));
                }
                let inc = if Path::new(target).is_absolute() {
                    PathBuf::from(target)
                } else {
                    path.parent().unwrap_or(Path::new(".")).join(target)
                };
                let t = std::fs::read_to_string(&inc)
                    .map_err(|e| err(format!("cannot read included file {}: {e}", inc.display())))?;
                collect_lines(&inc, &t, out, depth + 1)?;
                continue;
            }
        }
        let pairs = split_pairs(full).map_err(err)?;
        out.push(Line { file: file.clone(), line: start_line, pairs });
    }
    if !pending.trim().is_empty() {
        let pairs =
            split_pairs(pending.trim()).map_err(|msg| ConfError { file: file.to_string(), line: start_line, msg })?;
        out.push(Line { file, line: start_line, pairs });
    }
    Ok(())
}

/// A line up to its comment (`#`; `\#` is a literal `#`).
fn strip_comment(line: &str) -> std::borrow::Cow<'_, str> {
    let Some(hash) = line.find('#') else { return line.into() };
    if !line[..hash].ends_with('\\') {
        return line[..hash].into();
    }
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' && chars.peek() == Some(&'#') {
            out.push('#');
            chars.next();
        } else if c == '#' {
            break;
        } else {
            out.push(c);
        }
    }
    out.into()
}

/// Splits `A=1 B="x y" C=z` into pairs; a word without `=` is an error.
fn split_pairs(s: &str) -> Result<Vec<(String, String)>, String> {
    let mut pairs = Vec::new();
    let mut rest = s.trim_start();
    while !rest.is_empty() {
        let key_end = rest.find(|c: char| c == '=' || c.is_whitespace()).unwrap_or(rest.len());
        let key = &rest[..key_end];
        let Some(after) = rest[key_end..].strip_prefix('=') else {
            return Err(format!("expected Key=Value, found `{key}`"));
        };
        let (val, next) = match after.strip_prefix('"') {
            Some(quoted) => {
                let Some(close) = quoted.find('"') else {
                    return Err(format!("unterminated quote in value of {key}"));
                };
                (&quoted[..close], &quoted[close + 1..])
            }
            None => {
                let end = after.find(char::is_whitespace).unwrap_or(after.len());
                (&after[..end], &after[end..])
            }
        };
        pairs.push((key.to_string(), val.to_string()));
        rest = next.trim_start();
    }
    Ok(pairs)
}

fn parse_bool(v: &str) -> Option<bool> {
    match v.to_ascii_uppercase().as_str() {
        "YES" | "TRUE" | "1" => Some(true),
        "NO" | "FALSE" | "0" => Some(false),
        _ => None,
    }
}

fn parse_lines(lines: &[Line]) -> Result<Config, ConfError> {
    let mut cfg = Config::default();
    let mut node_default: Vec<(String, String)> = Vec::new();
    let mut gres_lines: Vec<(String, usize, usize)> = Vec::new();
    let mut part_default: Vec<(String, String)> = Vec::new();
    let mut raw_parts: Vec<(&Line, Vec<(String, String)>)> = Vec::new();
    let (mut accounting_on, mut accounting_host) = (None, None);
    for l in lines {
        let err = |msg: String| ConfError { file: l.file.to_string(), line: l.line, msg };
        let (k0, v0) = &l.pairs[0];
        let k0l = k0.to_ascii_lowercase();
        if k0l == "nodename" {
            if v0.eq_ignore_ascii_case("default") {
                merge(&mut node_default, &l.pairs[1..]);
                continue;
            }
            let mut attrs = node_default.clone();
            merge(&mut attrs, &l.pairs[1..]);
            for (k, _) in &l.pairs[1..] {
                if !NODE_KEYS.contains(&k.to_ascii_lowercase().as_str()) {
                    cfg.unsupported.push(Unsupported {
                        file: l.file.to_string(),
                        line: l.line,
                        key: format!("NodeName {k}"),
                    });
                }
            }
            let nodes = parse_nodes(v0, &attrs, cfg.slurmd_port).map_err(err)?;
            gres_lines.push((l.file.to_string(), l.line, nodes.len()));
            cfg.nodes.extend(nodes);
            continue;
        }
        if k0l == "partitionname" {
            if v0.eq_ignore_ascii_case("default") {
                merge(&mut part_default, &l.pairs[1..]);
                continue;
            }
            let mut attrs = part_default.clone();
            merge(&mut attrs, &l.pairs[1..]);
            for (k, _) in &l.pairs[1..] {
                if !PART_KEYS.contains(&k.to_ascii_lowercase().as_str()) {
                    cfg.unsupported.push(Unsupported {
                        file: l.file.to_string(),
                        line: l.line,
                        key: format!("PartitionName {k}"),
                    });
                }
            }
            raw_parts.push((l, attrs));
            continue;
        }
        for (k, v) in &l.pairs {
            let kl = k.to_ascii_lowercase();
            cfg.raw.retain(|(rk, _)| !rk.eq_ignore_ascii_case(k));
            cfg.raw.push((k.clone(), v.clone()));
            let num = |v: &str| v.parse::<u32>().map_err(|_| err(format!("{k}: expected a number, found `{v}`")));
            match kl.as_str() {
                "clustername" => cfg.cluster_name = v.to_ascii_lowercase(),
                "slurmctldhost" => {
                    // `name(addr)` or `name`.
                    let (name, addr) = match v.split_once('(') {
                        Some((n, a)) => (n.to_string(), a.trim_end_matches(')').to_string()),
                        None => (v.clone(), v.clone()),
                    };
                    cfg.controller_hosts.push(ControllerHost { name, addr });
                }
                "controlmachine" => cfg.controller_hosts.push(ControllerHost { name: v.clone(), addr: v.clone() }),
                "controladdr" => {
                    if let Some(h) = cfg.controller_hosts.last_mut() {
                        h.addr = v.clone();
                    }
                }
                "slurmctldport" => {
                    let first = v.split('-').next().unwrap_or(v);
                    cfg.slurmctld_port =
                        first.parse().map_err(|_| err(format!("SlurmctldPort: expected a port, found `{v}`")))?
                }
                "slurmdport" => {
                    cfg.slurmd_port = v.parse().map_err(|_| err(format!("SlurmdPort: expected a port, found `{v}`")))?
                }
                "slurmctldparameters" => {
                    let mut rl = RateLimitConf::default();
                    for opt in v.split(',').map(str::trim).filter(|o| !o.is_empty()) {
                        let (name, val) = opt.split_once('=').unwrap_or((opt, ""));
                        let num = |what: &str| {
                            val.parse::<u32>()
                                .ok()
                                .filter(|n| *n > 0)
                                .ok_or_else(|| err(format!("SlurmctldParameters: {what}: expected a positive number, found `{val}`")))
                        };
                        if opt.eq_ignore_ascii_case("enable_configless") {
                            cfg.configless = true;
                        } else if name.eq_ignore_ascii_case("rl_enable") {
                            cfg.rate_limit.get_or_insert_with(RateLimitConf::default);
                        } else if name.eq_ignore_ascii_case("rl_bucket_size") {
                            rl.bucket_size = num("rl_bucket_size")?;
                        } else if name.eq_ignore_ascii_case("rl_refill_rate") {
                            rl.refill_rate = num("rl_refill_rate")?;
                        } else if name.eq_ignore_ascii_case("rl_refill_period") {
                            rl.refill_period = num("rl_refill_period")?;
                        } else if name.eq_ignore_ascii_case("rl_table_size") {
                            rl.table_size = num("rl_table_size")?;
                        } else if name.eq_ignore_ascii_case("rl_log_freq") {
                            rl.log_freq = val.parse::<u32>().map_err(|_| {
                                err(format!("SlurmctldParameters: rl_log_freq: expected a number, found `{val}`"))
                            })?;
                        } else {
                            cfg.unsupported.push(Unsupported {
                                file: l.file.to_string(),
                                line: l.line,
                                key: format!("SlurmctldParameters={opt}"),
                            });
                        }
                    }
                    if let Some(r) = cfg.rate_limit.as_mut() {
                        *r = rl;
                    }
                }
                "srunportrange" => {
                    let range = v.split_once('-').and_then(|(a, b)| Some((a.trim().parse().ok()?, b.trim().parse().ok()?)));
                    cfg.srun_port_range = match range {
                        Some((lo, hi)) if lo <= hi && lo > 0 => Some((lo, hi)),
                        _ => return Err(err(format!("SrunPortRange: expected LOW-HIGH ports, found `{v}`"))),
                    };
                }
                "statesavelocation" => cfg.state_save_location = v.clone(),
                "slurmdspooldir" => cfg.slurmd_spool_dir = v.clone(),
                "slurmctldlogfile" => cfg.slurmctld_log_file = Some(v.clone()),
                "slurmdlogfile" => cfg.slurmd_log_file = Some(v.clone()),
                "maxjobcount" => cfg.max_job_count = num(v)?,
                "maxarraysize" => cfg.max_array_size = num(v)?,
                "schedulertype" => {
                    cfg.backfill = match v.to_ascii_lowercase().as_str() {
                        "sched/backfill" => true,
                        "sched/builtin" => false,
                        _ => {
                            return Err(err(format!(
                                "SchedulerType: expected sched/backfill or sched/builtin, found `{v}`"
                            )))
                        }
                    }
                }
                "schedulerparameters" => {
                    cfg.scheduler_parameters = Some(v.clone());
                    for opt in v.split(',').map(str::trim).filter(|o| !o.is_empty()) {
                        let (name, val) = opt.split_once('=').unwrap_or((opt, ""));
                        let n = |what: &str| -> Result<u32, ConfError> {
                            val.parse().map_err(|_| {
                                err(format!("SchedulerParameters: {what} expects a number, found `{val}`"))
                            })
                        };
                        match name.to_ascii_lowercase().as_str() {
                            "kill_invalid_depend" => cfg.kill_invalid_depend = true,
                            "max_script_size" => cfg.max_script_size = n("max_script_size")?,
                            "enable_user_top" => cfg.enable_user_top = true,
                            "disable_user_top" => cfg.enable_user_top = false,
                            "max_switch_wait" => cfg.max_switch_wait = n("max_switch_wait")?,
                            "bf_max_job_user" => cfg.bf_max_job_user = n("bf_max_job_user")?,
                            "bf_min_age_reserve" => cfg.bf_min_age_reserve = n("bf_min_age_reserve")?,
                            // Limits on the cost of Slurm's passes; Drover's are cheap enough
                            // that they bound nothing (docs/scheduler.md). Checked, then moot.
                            "sched_interval" | "bf_resolution" | "default_queue_depth" | "sched_min_interval" => {
                                n(name)?;
                            }
                            "bf_continue" => {}
                            "bf_max_job_test" => cfg.bf_max_job_test = n("bf_max_job_test")?.max(1),
                            "bf_window" => cfg.bf_window_min = n("bf_window")?.max(1),
                            "bf_interval" => cfg.bf_interval = n("bf_interval")?,
                            "bf_slip_limit" => cfg.bf_slip_limit = n("bf_slip_limit")?,
                            "bf_policy" => {
                                let v = val.to_ascii_lowercase();
                                if !matches!(v.as_str(), "predictive" | "conservative" | "easy") {
                                    return Err(err(format!(
                                        "SchedulerParameters: bf_policy expects predictive, conservative or easy, found `{val}`"
                                    )));
                                }
                                cfg.bf_policy = v;
                            }
                            _ => cfg.unsupported.push(Unsupported {
                                file: l.file.to_string(),
                                line: l.line,
                                key: format!("SchedulerParameters={opt}"),
                            }),
                        }
                    }
                }
                "topologyplugin" => {
                    (cfg.topology_tree, cfg.topology_block) = match v.to_ascii_lowercase().as_str() {
                        "topology/tree" => (true, false),
                        "topology/block" => (false, true),
                        "topology/none" | "" => (false, false),
                        _ => {
                            return Err(err(format!(
                                "TopologyPlugin: expected topology/tree, topology/block or topology/none, found `{v}`"
                            )))
                        }
                    }
                }
                "grestypes" => {
                    cfg.gres_types = v.split(',').map(|t| t.trim().to_string()).filter(|t| !t.is_empty()).collect()
                }
                // What Drover does in any case: consumable cores and memory (cons_tres with
                // CR_Core_Memory), processes tracked by their cgroup (by descent where no
                // hierarchy is writable). Other choices are reported as not supported.
                "selecttype" | "selecttypeparameters" | "proctracktype" => {
                    let ok = match kl.as_str() {
                        "selecttype" => ["select/cons_tres", "select/cons_res"].as_slice(),
                        "selecttypeparameters" => ["cr_core_memory", "cr_cpu_memory"].as_slice(),
                        _ => ["proctrack/cgroup", "proctrack/linuxproc"].as_slice(),
                    };
                    if !ok.contains(&v.trim().to_ascii_lowercase().as_str()) {
                        cfg.unsupported.push(Unsupported {
                            file: l.file.to_string(),
                            line: l.line,
                            key: format!("{k}={v}"),
                        });
                    }
                }
                "taskplugin" => {
                    for p in v.split(',').map(str::trim) {
                        match p.to_ascii_lowercase().as_str() {
                            "task/affinity" => cfg.task_affinity = true,
                            // Confinement follows cgroup.conf; nothing to do by default.
                            "task/cgroup" | "task/none" | "" => {}
                            _ => {
                                return Err(err(format!(
                                    "TaskPlugin: expected task/affinity, task/cgroup or task/none, found `{p}`"
                                )))
                            }
                        }
                    }
                }
                "prolog" => cfg.prolog = Some(v.clone()),
                "prologslurmctld" => cfg.prolog_slurmctld = Some(v.clone()),
                "accountingstoragetres" => {
                    cfg.accounting_storage_tres = v.split(',').map(|t| t.trim().to_ascii_lowercase()).collect()
                }
                "accountingstoragetype" => match v.to_ascii_lowercase().as_str() {
                    "accounting_storage/none" => accounting_on = Some(false),
                    "accounting_storage/slurmdbd" | "accounting_storage/drover" => accounting_on = Some(true),
                    _ => {
                        return Err(err(format!(
                            "AccountingStorageType: expected accounting_storage/slurmdbd or accounting_storage/none, found `{v}`"
                        )))
                    }
                },
                "accountingstoragehost" => accounting_host = Some(v.clone()),
                "accountingstorageenforce" => cfg.enforce = AccountingEnforce::parse(v).map_err(err)?,
                "preempttype" => {
                    (cfg.preempt_qos, cfg.preempt_partition) = match v.to_ascii_lowercase().as_str() {
                        "preempt/qos" => (true, false),
                        "preempt/partition_prio" => (false, true),
                        "preempt/none" => (false, false),
                        _ => {
                            cfg.unsupported.push(Unsupported {
                                file: l.file.to_string(),
                                line: l.line,
                                key: format!("PreemptType={v}"),
                            });
                            (false, false)
                        }
                    }
                }
                "preemptmode" => cfg.preempt_mode = PreemptMode::parse(v).map_err(err)?,
                "preemptexempttime" => {
                    cfg.preempt_exempt_secs = crate::duration::parse_time_limit(v)
                        .map_err(|_| err(format!("PreemptExemptTime: expected a time, found `{v}`")))?
                        .unwrap_or(0)
                }
                r if crate::rlimits::KEYS.contains(&r) => {
                    cfg.propagate_rlimits =
                        crate::rlimits::set(&cfg.propagate_rlimits, r, v).map_err(|e| err(format!("{k}: {e}")))?
                }
                a if crate::auth_conf::KEYS.contains(&a) => {
                    for opt in cfg.auth.set(a, v).map_err(|e| err(format!("{k}: {e}")))? {
                        cfg.unsupported.push(Unsupported { file: l.file.to_string(), line: l.line, key: opt });
                    }
                }
                p if crate::priority_conf::KEYS.contains(&p) => {
                    for flag in cfg.priority.set(p, v).map_err(|e| err(format!("{k}: {e}")))? {
                        cfg.unsupported.push(Unsupported {
                            file: l.file.to_string(),
                            line: l.line,
                            key: format!("PriorityFlags={flag}"),
                        });
                    }
                }
                "accountingstorageport" => {
                    cfg.accounting_storage_port =
                        v.parse().map_err(|_| err(format!("AccountingStoragePort: expected a port, found `{v}`")))?
                }
                "epilogslurmctld" => cfg.epilog_slurmctld = Some(v.clone()),
                "epilog" => cfg.epilog = Some(v.clone()),
                "taskprolog" => cfg.task_prolog = Some(v.clone()),
                "taskepilog" => cfg.task_epilog = Some(v.clone()),
                "prologflags" => {
                    for f in v.split(',').map(str::trim).filter(|f| !f.is_empty()) {
                        match f.to_ascii_lowercase().as_str() {
                            "alloc" => cfg.prolog_flags.alloc = true,
                            "contain" => cfg.prolog_flags.contain = true,
                            "nohold" => cfg.prolog_flags.nohold = true,
                            _ => cfg.unsupported.push(Unsupported {
                                file: l.file.to_string(),
                                line: l.line,
                                key: format!("PrologFlags={f}"),
                            }),
                        }
                    }
                }
                "healthcheckprogram" => cfg.health_check_program = Some(v.clone()),
                "healthcheckinterval" => cfg.health_check_interval = num(v)?,
                "licenses" => {
                    cfg.licenses = crate::job::parse_licenses(v)
                        .map_err(|_| err(format!("Licenses: expected name[:count],..., found `{v}`")))?
                }
                "firstjobid" => cfg.first_job_id = num(v)?,
                "killwait" => cfg.kill_wait = num(v)?,
                "slurmdtimeout" => cfg.slurmd_timeout = num(v)?,
                "slurmctldtimeout" => cfg.slurmctld_timeout = Some(num(v)?.max(1)),
                "jobrequeue" => cfg.job_requeue = num(v)? != 0,
                "minjobage" => cfg.min_job_age = num(v)?,
                "scronparameters" => cfg.scron_enabled = v.split(',').any(|p| p.trim().eq_ignore_ascii_case("enable")),
                "returntoservice" => cfg.return_to_service = num(v)?,
                "enforcepartlimits" => {
                    cfg.enforce_part_limits = match v.to_ascii_uppercase().as_str() {
                        "NO" => EnforcePartLimits::No,
                        "ANY" => EnforcePartLimits::Any,
                        "ALL" | "YES" => EnforcePartLimits::All,
                        _ => return Err(err(format!("EnforcePartLimits: expected NO, ANY or ALL, found `{v}`"))),
                    }
                }
                _ => {
                    debug_assert!(!SUPPORTED.contains(&kl.as_str()));
                    cfg.unsupported.push(Unsupported { file: l.file.to_string(), line: l.line, key: k.clone() })
                }
            }
        }
    }
    // Every GRES a node has must be a declared GresTypes name, as Slurm requires.
    let mut k = 0;
    for (file, line, count) in gres_lines {
        for n in &cfg.nodes[k..k + count] {
            if let Some(g) = n.gres_list.iter().find(|g| !cfg.gres_types.contains(&g.name)) {
                return Err(ConfError {
                    file,
                    line,
                    msg: format!("Gres: `{}` is not in GresTypes (add GresTypes={})", g.name, g.name),
                });
            }
        }
        k += count;
    }
    if accounting_on == Some(true) {
        cfg.accounting_storage = Some(accounting_host.unwrap_or_else(|| "localhost".into()));
    }
    let all_nodes: Vec<String> = cfg.nodes.iter().map(|n| n.name.clone()).collect();
    for (l, attrs) in raw_parts {
        let err = |msg: String| ConfError { file: l.file.to_string(), line: l.line, msg };
        let p = parse_partition(&l.pairs[0].1, &attrs, &all_nodes).map_err(err)?;
        cfg.partitions.push(p);
    }
    Ok(cfg)
}

fn merge(into: &mut Vec<(String, String)>, from: &[(String, String)]) {
    for (k, v) in from {
        if let Some(e) = into.iter_mut().find(|(ek, _)| ek.eq_ignore_ascii_case(k)) {
            e.1 = v.clone();
        } else {
            into.push((k.clone(), v.clone()));
        }
    }
}

fn get<'a>(attrs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    attrs.iter().rev().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v.as_str())
}

fn parse_nodes(names: &str, attrs: &[(String, String)], default_port: u16) -> Result<Vec<NodeConf>, String> {
    let hl = Hostlist::parse(names).map_err(|e| e.to_string())?;
    let names = hl.names();
    let expand = |key: &str| -> Result<Option<Vec<String>>, String> {
        match get(attrs, key) {
            None => Ok(None),
            Some(v) => {
                let list = Hostlist::parse(v).map_err(|e| format!("{key}: {e}"))?.names();
                if list.len() != 1 && list.len() != names.len() {
                    return Err(format!("{key} has {} entries for {} nodes", list.len(), names.len()));
                }
                Ok(Some(list))
            }
        }
    };
    let addrs = expand("NodeAddr")?;
    let hosts = expand("NodeHostname")?;
    let ports: Option<Vec<u16>> = match get(attrs, "Port") {
        None => None,
        Some(v) => {
            let mut out = Vec::new();
            for part in v.split(',') {
                let (lo, hi) = match part.split_once('-') {
                    Some((a, b)) => (a, b),
                    None => (part, part),
                };
                let lo: u16 = lo.parse().map_err(|_| format!("Port: expected a port or range, found `{v}`"))?;
                let hi: u16 = hi.parse().map_err(|_| format!("Port: expected a port or range, found `{v}`"))?;
                out.extend(lo..=hi);
            }
            if out.len() != 1 && out.len() != names.len() {
                return Err(format!("Port has {} entries for {} nodes", out.len(), names.len()));
            }
            Some(out)
        }
    };
    let num = |key: &str, def: u32| -> Result<u32, String> {
        match get(attrs, key) {
            None => Ok(def),
            Some(v) => v.parse().map_err(|_| format!("{key}: expected a number, found `{v}`")),
        }
    };
    let boards = num("Boards", 1)?;
    let sockets = match get(attrs, "SocketsPerBoard") {
        Some(_) => num("SocketsPerBoard", 1)? * boards,
        None => num("Sockets", 1)?,
    };
    let cores = num("CoresPerSocket", 1)?;
    let threads = num("ThreadsPerCore", 1)?;
    let cpus = match get(attrs, "CPUs").or_else(|| get(attrs, "Procs")) {
        Some(v) => v.parse().map_err(|_| format!("CPUs: expected a number, found `{v}`"))?,
        None => sockets * cores * threads,
    };
    // With only CPUs given, Slurm treats each CPU as a core of one socket.
    let (sockets, cores) = if get(attrs, "CPUs").is_some()
        && get(attrs, "Sockets").is_none()
        && get(attrs, "SocketsPerBoard").is_none()
        && get(attrs, "CoresPerSocket").is_none()
    {
        (cpus / threads.max(1), 1)
    } else {
        (sockets, cores)
    };
    let real_memory_mb = match get(attrs, "RealMemory") {
        Some(v) => parse_mb(v).map_err(|e| format!("RealMemory: {e}"))?,
        None => 1,
    };
    let tmp_disk_mb = match get(attrs, "TmpDisk") {
        Some(v) => parse_mb(v).map_err(|e| format!("TmpDisk: {e}"))?,
        None => 0,
    };
    let features: Vec<String> = get(attrs, "Features")
        .or_else(|| get(attrs, "Feature"))
        .map(|f| f.split(',').filter(|s| !s.is_empty()).map(String::from).collect())
        .unwrap_or_default();
    let weight = num("Weight", 1)?;
    let gres = get(attrs, "Gres").unwrap_or("").to_string();
    let gres_list = crate::gres::parse_node_gres(&gres).map_err(|e| format!("Gres: {e}"))?;
    let state = get(attrs, "State").unwrap_or("UNKNOWN").to_ascii_uppercase();
    let pick = |list: &Option<Vec<String>>, i: usize, def: &str| -> String {
        match list {
            Some(l) if l.len() == 1 => l[0].clone(),
            Some(l) => l[i].clone(),
            None => def.to_string(),
        }
    };
    Ok(names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let addr = pick(&addrs, i, &pick(&hosts, i, name));
            NodeConf {
                name: name.clone(),
                addr,
                hostname: pick(&hosts, i, name),
                port: match &ports {
                    Some(p) if p.len() == 1 => p[0],
                    Some(p) => p[i],
                    None => default_port,
                },
                cpus,
                boards,
                sockets,
                cores_per_socket: cores,
                threads_per_core: threads,
                real_memory_mb,
                tmp_disk_mb,
                features: features.clone(),
                gres: gres.clone(),
                gres_list: gres_list.clone(),
                weight,
                state: state.clone(),
            }
        })
        .collect())
}

fn parse_partition(name: &str, attrs: &[(String, String)], all_nodes: &[String]) -> Result<PartitionConf, String> {
    let (nodes, nodes_expr) = match get(attrs, "Nodes") {
        None => (Vec::new(), String::new()),
        Some(v) if v.eq_ignore_ascii_case("ALL") => {
            let hl: Hostlist = all_nodes.iter().collect();
            (all_nodes.to_vec(), hl.ranged())
        }
        Some(v) => {
            let hl = Hostlist::parse(v).map_err(|e| format!("Nodes: {e}"))?;
            let names = hl.names();
            for n in &names {
                if !all_nodes.contains(n) {
                    return Err(format!("Nodes: node {n} of partition {name} is not defined"));
                }
            }
            (names, hl.ranged())
        }
    };
    let limit = |key: &str| -> Result<Option<TimeLimit>, String> {
        match get(attrs, key) {
            None => Ok(None),
            Some(v) if v.eq_ignore_ascii_case("NONE") => Ok(None),
            Some(v) => parse_time_limit(v).map(Some).map_err(|_| format!("{key}: invalid time `{v}`")),
        }
    };
    let opt_num = |key: &str| -> Result<Option<u32>, String> {
        match get(attrs, key) {
            None => Ok(None),
            Some(v) if v.eq_ignore_ascii_case("UNLIMITED") || v.eq_ignore_ascii_case("INFINITE") => Ok(None),
            Some(v) => v.parse().map(Some).map_err(|_| format!("{key}: expected a number, found `{v}`")),
        }
    };
    let state = match get(attrs, "State").map(|s| s.to_ascii_uppercase()) {
        None => PartitionState::Up,
        Some(s) => match s.as_str() {
            "UP" => PartitionState::Up,
            "DOWN" => PartitionState::Down,
            "DRAIN" => PartitionState::Drain,
            "INACTIVE" => PartitionState::Inactive,
            _ => return Err(format!("State: expected UP, DOWN, DRAIN or INACTIVE, found `{s}`")),
        },
    };
    let flag = |key: &str| -> Result<bool, String> {
        match get(attrs, key) {
            None => Ok(false),
            Some(v) => parse_bool(v).ok_or_else(|| format!("{key}: expected YES or NO, found `{v}`")),
        }
    };
    Ok(PartitionConf {
        name: name.to_string(),
        nodes,
        nodes_expr,
        default: flag("Default")?,
        max_time: limit("MaxTime")?.flatten(),
        default_time: limit("DefaultTime")?,
        max_nodes: opt_num("MaxNodes")?,
        min_nodes: opt_num("MinNodes")?.unwrap_or(0),
        state,
        hidden: flag("Hidden")?,
        allow_groups: get(attrs, "AllowGroups")
            .filter(|g| !g.eq_ignore_ascii_case("ALL"))
            .map(|g| g.split(',').map(String::from).collect()),
        priority_tier: opt_num("PriorityTier")?.unwrap_or(1),
        preempt_mode: get(attrs, "PreemptMode").map(PreemptMode::parse).transpose()?,
        grace_time: opt_num("GraceTime")?.unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAB: &str = "ClusterName=lab\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort=16817\nGresTypes=gpu\n\
        NodeName=DEFAULT RealMemory=1000\n\
        NodeName=node[1-4] NodeHostname=localhost NodeAddr=127.0.0.1 Port=17001-17004 CPUs=2 \\\n  Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=4000 Gres=gpu:fake:2 State=UNKNOWN\n\
        PartitionName=cpu Nodes=node[1-4] Default=YES MaxTime=INFINITE State=UP # main\n\
        PartitionName=gpu Nodes=ALL MaxTime=1-00:00:00 State=UP\n\
        MpiDefault=none\n";

    #[test]
    fn several_controllers_back_each_other_up() {
        let one = parse_str("slurm.conf", "SlurmctldHost=a(10.0.0.1)\nSlurmctldPort=7000\n").unwrap();
        assert!(!one.controller_failover());
        assert_eq!(one.controller_addrs(), vec!["10.0.0.1:7000"]);
        let two = parse_str(
            "slurm.conf",
            "SlurmctldHost=ctl1(10.0.0.1)\nSlurmctldHost=ctl2\nControlAddr=10.0.0.2\nSlurmctldPort=7000\n",
        )
        .unwrap();
        assert!(two.controller_failover());
        assert_eq!(two.controller_addrs(), vec!["10.0.0.1:7000", "10.0.0.2:7000"]);
        assert_eq!(two.controller_lease(), std::time::Duration::from_secs(3));
        let slow = parse_str("slurm.conf", "SlurmctldHost=a\nSlurmctldHost=b\nSlurmctldTimeout=120\n").unwrap();
        assert_eq!(slow.controller_lease(), std::time::Duration::from_secs(120));
        assert!(slow.unsupported.is_empty(), "SlurmctldTimeout is acted on: {:?}", slow.unsupported);
    }

    #[test]
    fn parses_the_lab_config() {
        let c = parse_str("slurm.conf", LAB).unwrap();
        assert_eq!(c.cluster_name, "lab");
        assert_eq!(c.controller_hosts[0].addr, "127.0.0.1");
        assert_eq!(c.nodes.len(), 4);
        assert_eq!(c.nodes[3].port, 17004);
        assert_eq!(c.nodes[0].cpus, 2);
        assert_eq!(c.nodes[0].real_memory_mb, 4000);
        assert_eq!(c.partitions[0].nodes_expr, "node[1-4]");
        assert!(c.partitions[0].default);
        assert_eq!(c.partitions[0].max_time, None);
        assert_eq!(c.partitions[1].max_time, Some(86400));
        assert_eq!(c.unsupported.len(), 1);
        assert_eq!(c.unsupported[0].key, "MpiDefault");
        assert_eq!(c.unsupported[0].line, 10);
        assert_eq!(c.nodes[0].gres_list[0].text(), "gpu:fake:2");
        let e = parse_str("x.conf", "NodeName=n1 Gres=gpu:2\n").unwrap_err();
        assert!(e.to_string().contains("`gpu` is not in GresTypes"), "{e}");
    }

    #[test]
    fn scheduler_parameters_are_honoured_or_moot_never_silently_dropped() {
        let text = "ClusterName=c\nSlurmctldHost=h\nNodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\n\
                    SchedulerParameters=bf_continue,bf_resolution=300,sched_interval=60,default_queue_depth=100,\
                    bf_max_job_user=4,bf_min_age_reserve=600,max_switch_wait=60,enable_user_top,bf_busy_nodes,\
                    bf_policy=Conservative,bf_slip_limit=600\n\
                    TopologyPlugin=topology/none\n";
        let c = parse_str("slurm.conf", text).unwrap();
        assert_eq!((c.bf_max_job_user, c.bf_min_age_reserve, c.max_switch_wait), (4, 600, 60));
        assert_eq!((c.bf_policy.as_str(), c.bf_slip_limit), ("conservative", 600));
        assert_eq!(Config::default().bf_policy, "predictive");
        let e = parse_str("slurm.conf", &text.replace("=Conservative", "=magic")).unwrap_err();
        assert_eq!(e.msg, "SchedulerParameters: bf_policy expects predictive, conservative or easy, found `magic`");
        assert!(c.enable_user_top && !c.topology_tree);
        let unsupported: Vec<&str> = c.unsupported.iter().map(|u| u.key.as_str()).collect();
        assert_eq!(unsupported, ["SchedulerParameters=bf_busy_nodes"]);
        let bad = text.replace("bf_resolution=300", "bf_resolution=soon");
        assert!(parse_str("slurm.conf", &bad).unwrap_err().msg.contains("bf_resolution expects a number"));
    }

    #[test]
    fn lines_split_into_pairs_as_slurm_reads_them() {
        let pairs = |t: &str| split_pairs(t).unwrap();
        let p = |k: &str, v: &str| (k.to_string(), v.to_string());
        assert_eq!(pairs("  A=1   B=\"x y\"\tC=z "), [p("A", "1"), p("B", "x y"), p("C", "z")]);
        assert_eq!(pairs("A=\"q\"B=2 E="), [p("A", "q"), p("B", "2"), p("E", "")]);
        assert_eq!(pairs(""), []);
        assert_eq!(split_pairs("A=1 bogus").unwrap_err(), "expected Key=Value, found `bogus`");
        assert_eq!(split_pairs("A=\"open").unwrap_err(), "unterminated quote in value of A");
        assert_eq!(strip_comment("A=1 # note"), "A=1 ");
        assert_eq!(strip_comment("Features=a\\#b # c"), "Features=a#b ");
        assert_eq!(strip_comment("no comment"), "no comment");
        let mut lines = Vec::new();
        collect_lines(Path::new("s.conf"), "# top\n\nNodeName=n[1-2] \\\n  CPUs=4 # four\nX=\"a b\"\n", &mut lines, 0)
            .unwrap();
        let got: Vec<_> = lines.iter().map(|l| (l.line, l.pairs.clone())).collect();
        assert_eq!(got, [(3, vec![p("NodeName", "n[1-2]"), p("CPUs", "4")]), (5, vec![p("X", "a b")])]);
        assert_eq!(&*lines[0].file, "s.conf");
    }

    #[test]
    fn malformed_lines_name_file_and_line() {
        let e = parse_str("x.conf", "ClusterName=a\nbogus line\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.to_string().starts_with("x.conf:2: expected Key=Value"), "{e}");
        let e = parse_str("x.conf", "NodeName=n1 CPUs=abc\n").unwrap_err();
        assert!(e.to_string().contains("CPUs"), "{e}");
        let e = parse_str("x.conf", "PartitionName=p Nodes=n9\n").unwrap_err();
        assert!(e.to_string().contains("not defined"), "{e}");
    }

    #[test]
    fn include_files_are_read_relative_to_the_config() {
        let dir = std::env::temp_dir().join(format!("drover-conf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("nodes.conf"), "NodeName=a[1-2] CPUs=4\n").unwrap();
        std::fs::write(dir.join("slurm.conf"), "ClusterName=x\nInclude nodes.conf\nPartitionName=p Nodes=ALL\n")
            .unwrap();
        let c = parse_file(&dir.join("slurm.conf")).unwrap();
        assert_eq!(c.nodes.len(), 2);
        assert_eq!(c.nodes[0].cpus, 4);
        assert_eq!(c.partitions[0].nodes, ["a1", "a2"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
