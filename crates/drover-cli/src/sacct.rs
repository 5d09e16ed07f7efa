//! `sacct`: job and step records from `drover accounting`, in Slurm 22.05's fields, widths,
//! selections and time windows.

use crate::common;
use crate::jobview::spec;
use crate::sstat::{MemUnits, Summary};
use clap::Parser;
use drover_proto::v1;

/// sacct's fields as `--helpformat` lists them (22.05), with their default widths; a
/// negative width is left-justified.
const FIELDS: &[(&str, i32)] = &[
    ("Account", 10),
    ("AdminComment", 15),
    ("AllocCPUS", 10),
    ("AllocNodes", 10),
    ("AllocTRES", 10),
    ("AssocID", 7),
    ("AveCPU", 10),
    ("AveCPUFreq", 10),
    ("AveDiskRead", 14),
    ("AveDiskWrite", 14),
    ("AvePages", 10),
    ("AveRSS", 10),
    ("AveVMSize", 10),
    ("BlockID", 16),
    ("Cluster", 10),
    ("Comment", 14),
    ("Constraints", 19),
    ("ConsumedEnergy", 14),
    ("ConsumedEnergyRaw", 17),
    ("Container", 19),
    ("CPUTime", 10),
    ("CPUTimeRAW", 10),
    ("DBIndex", 9),
    ("DerivedExitCode", 15),
    ("Elapsed", 10),
    ("ElapsedRaw", 10),
    ("Eligible", 19),
    ("End", 19),
    ("ExitCode", 8),
    ("Flags", 19),
    ("GID", 6),
    ("Group", 9),
    ("JobID", -12),
    ("JobIDRaw", -12),
    ("JobName", 10),
    ("Layout", 8),
    ("MaxDiskRead", 12),
    ("MaxDiskReadNode", 15),
    ("MaxDiskReadTask", 15),
    ("MaxDiskWrite", 12),
    ("MaxDiskWriteNode", 16),
    ("MaxDiskWriteTask", 16),
    ("MaxPages", 8),
    ("MaxPagesNode", 12),
    ("MaxPagesTask", 14),
    ("MaxRSS", 10),
    ("MaxRSSNode", 10),
    ("MaxRSSTask", 10),
    ("MaxVMSize", 10),
    ("MaxVMSizeNode", 14),
    ("MaxVMSizeTask", 14),
    ("McsLabel", 20),
    ("MinCPU", 10),
    ("MinCPUNode", 10),
    ("MinCPUTask", 10),
    ("NCPUS", 10),
    ("NNodes", 8),
    ("NodeList", 15),
    ("NTasks", 8),
    ("Partition", 10),
    ("Priority", 10),
    ("QOS", 10),
    ("QOSRAW", 6),
    ("Reason", 22),
    ("ReqCPUFreq", 10),
    ("ReqCPUFreqGov", 13),
    ("ReqCPUFreqMax", 13),
    ("ReqCPUFreqMin", 13),
    ("ReqCPUS", 8),
    ("ReqMem", 10),
    ("ReqNodes", 8),
    ("ReqTRES", 10),
    ("Reservation", 20),
    ("ReservationId", 13),
    ("Reserved", 10),
    ("ResvCPU", 10),
    ("ResvCPURAW", 10),
    ("Start", 19),
    ("State", 10),
    ("Submit", 19),
    ("SubmitLine", 20),
    ("Suspended", 10),
    ("SystemComment", 15),
    ("SystemCPU", 10),
    ("Timelimit", 10),
    ("TimelimitRaw", 12),
    ("TotalCPU", 10),
    ("TRESUsageInAve", 14),
    ("TRESUsageInMax", 14),
    ("TRESUsageInMaxNode", 18),
    ("TRESUsageInMaxTask", 18),
    ("TRESUsageInMin", 14),
    ("TRESUsageInMinNode", 18),
    ("TRESUsageInMinTask", 18),
    ("TRESUsageInTot", 14),
    ("TRESUsageOutAve", 15),
    ("TRESUsageOutMax", 15),
    ("TRESUsageOutMaxNode", 19),
    ("TRESUsageOutMaxTask", 19),
    ("TRESUsageOutMin", 15),
    ("TRESUsageOutMinNode", 19),
    ("TRESUsageOutMinTask", 19),
    ("TRESUsageOutTot", 15),
    ("UID", 6),
    ("User", 9),
    ("UserCPU", 10),
    ("WCKey", 10),
    ("WCKeyID", 10),
    ("WorkDir", 20),
];

/// Fields Drover adds to 22.05's (documented in docs/commands.md; not in --helpformat).
const EXTRA_FIELDS: &[(&str, i32)] = &[("Restarts", 8)];

const DEFAULT_FORMAT: &str = "JobID,JobName,Partition,Account,AllocCPUS,State,ExitCode";
const BRIEF_FORMAT: &str = "JobID,State,ExitCode";
const LONG_FORMAT: &str = "JobID,JobIDRaw,JobName,Partition,MaxVMSize,MaxVMSizeNode,MaxVMSizeTask,AveVMSize,MaxRSS,\
MaxRSSNode,MaxRSSTask,AveRSS,MaxPages,MaxPagesNode,MaxPagesTask,AvePages,MinCPU,MinCPUNode,MinCPUTask,AveCPU,NTasks,\
AllocCPUS,Elapsed,State,ExitCode,AveCPUFreq,ReqCPUFreqMin,ReqCPUFreqMax,ReqCPUFreqGov,ReqMem,ConsumedEnergy,\
MaxDiskRead,MaxDiskReadNode,MaxDiskReadTask,AveDiskRead,MaxDiskWrite,MaxDiskWriteNode,MaxDiskWriteTask,AveDiskWrite,\
ReqTRES,AllocTRES,TRESUsageInAve,TRESUsageInMax,TRESUsageInMaxNode,TRESUsageInMaxTask,TRESUsageInMin,\
TRESUsageInMinNode,TRESUsageInMinTask,TRESUsageInTot,TRESUsageOutMax,TRESUsageOutMaxNode,TRESUsageOutMaxTask,\
TRESUsageOutAve,TRESUsageOutTot";

#[derive(Parser, Debug)]
#[command(
    name = "sacct",
    disable_help_flag = true,
    disable_version_flag = true,
    args_override_self = true,
    infer_long_args = true
)]
struct Args {
    #[arg(short = 'a', long = "allusers")]
    all_users: bool,
    #[arg(short = 'A', long = "accounts", alias = "account")]
    accounts: Option<String>,
    #[arg(short = 'b', long = "brief")]
    brief: bool,
    #[arg(short = 'D', long = "duplicates")]
    duplicates: bool,
    #[arg(short = 'e', long = "helpformat")]
    helpformat: bool,
    #[arg(short = 'E', long = "endtime")]
    end: Option<String>,
    #[arg(short = 'g', long = "gid", alias = "group")]
    groups: Option<String>,
    #[arg(short = 'j', long = "jobs")]
    jobs: Vec<String>,
    #[arg(short = 'l', long = "long")]
    long: bool,
    #[arg(short = 'L', long = "allclusters")]
    all_clusters: bool,
    #[arg(short = 'M', long = "clusters")]
    clusters: Option<String>,
    #[arg(short = 'n', long = "noheader")]
    noheader: bool,
    #[arg(long = "name")]
    names: Option<String>,
    #[arg(short = 'N', long = "nodelist")]
    nodelist: Option<String>,
    #[arg(short = 'o', long = "format", alias = "fields")]
    format: Option<String>,
    #[arg(short = 'p', long = "parsable")]
    parsable: bool,
    #[arg(short = 'P', long = "parsable2")]
    parsable2: bool,
    #[arg(long = "delimiter")]
    delimiter: Option<String>,
    #[arg(short = 'q', long = "qos")]
    qos: Option<String>,
    #[arg(short = 'r', long = "partition")]
    partitions: Option<String>,
    #[arg(short = 's', long = "state")]
    states: Option<String>,
    #[arg(short = 'S', long = "starttime")]
    start: Option<String>,
    #[arg(short = 'u', long = "uid", alias = "user")]
    users: Option<String>,
    #[arg(short = 'X', long = "allocations")]
    allocations: bool,
    #[arg(short = 'T', long = "truncate")]
    truncate: bool,
    #[arg(long = "noconvert")]
    noconvert: bool,
    #[arg(long = "units")]
    units: Option<String>,
    #[arg(long = "json")]
    json: bool,
    #[arg(long = "local")]
    local: bool,
    #[command(flatten)]
    std: common::StdFlagsH,
    /// Words that are no option: refused, as real sacct refuses them (job ids go after -j).
    rest: Vec<String>,
}

/// A column: its canonical name, width and justification.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Column {
    name: &'static str,
    width: usize,
    left: bool,
}

/// `--format` items: a field name (any case, as Slurm accepts), `%N` (right-justified in N)
/// or `%-N` (left-justified).
pub(crate) fn columns(spec: &str) -> Result<Vec<Column>, String> {
    spec.split(',')
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .map(|f| {
            let (name, width) = f.split_once('%').unwrap_or((f, ""));
            let (canon, w) = FIELDS
                .iter()
                .chain(EXTRA_FIELDS)
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .ok_or_else(|| format!("Invalid field requested: \"{name}\""))?;
            let (width, left) = match width.parse::<i32>() {
                Ok(w) => (w.unsigned_abs() as usize, w < 0),
                Err(_) => (w.unsigned_abs() as usize, *w < 0),
            };
            Ok(Column { name: canon, width, left })
        })
        .collect()
}

/// A value in its column: cut to the width with `+` marking the cut (unless `-T`).
fn cell(c: &Column, v: &str, truncate: bool) -> String {
    crate::format::slurm_cell(v, c.width, c.left, !truncate)
}

fn helpformat() -> String {
    let lines: Vec<String> = FIELDS
        .chunks(4)
        .map(|row| row.iter().map(|(n, _)| format!("{n:<19}")).collect::<Vec<_>>().join(" ") + "\n")
        .collect();
    lines.concat()
}

/// Slurm's elapsed time: `[D-]HH:MM:SS`.
pub fn elapsed(secs: i64) -> String {
    drover_model::duration::fmt_long(secs.max(0) as u64)
}

/// CPU time as Slurm prints it with its microseconds: `MM:SS.mmm` under an hour when there
/// are any, else as [`elapsed`].
fn cpu_time(secs: f64) -> String {
    let total_ms = (secs.max(0.0) * 1000.0).round() as i64;
    let (s, ms) = (total_ms / 1000, total_ms % 1000);
    if s < 3600 && ms > 0 {
        format!("{:02}:{:02}.{ms:03}", s / 60, s % 60)
    } else {
        elapsed(s)
    }
}

/// A TRES list in sacct's order (by name).
fn sorted_tres(t: &str) -> String {
    let mut parts: Vec<&str> = t.split(',').filter(|p| !p.is_empty()).collect();
    parts.sort_by_key(|p| p.split('=').next().unwrap_or(""));
    parts.join(",")
}

fn tres_count(t: &str, name: &str) -> Option<u64> {
    t.split(',').find_map(|p| p.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
}

fn tres_value<'a>(t: &'a str, name: &str) -> Option<&'a str> {
    t.split(',').find_map(|p| p.strip_prefix(name)?.strip_prefix('='))
}

/// The job's id as sacct shows it: `N`, `A_T` for an array task, `A_[rest]` for an array's
/// pending remainder.
fn job_id(j: &v1::JobInfo) -> String {
    if j.array_job_id == 0 {
        return j.job_id.to_string();
    }
    match j.array_task_id {
        Some(t) => format!("{}_{t}", j.array_job_id),
        // With its %N throttle, as slurmdbd's xlate_array_task_str writes it.
        None if j.array_max_tasks > 0 => format!("{}_[{}%{}]", j.array_job_id, j.array_pending, j.array_max_tasks),
        None => format!("{}_[{}]", j.array_job_id, j.array_pending),
    }
}

fn step_suffix(step: u32) -> String {
    drover_model::step::step_name(step)
}

pub(crate) fn layout(distribution: &str) -> String {
    match distribution.split([':', ',', '=']).next().unwrap_or("") {
        "block" => "Block".into(),
        "cyclic" => "Cyclic".into(),
        "plane" => "Plane".into(),
        "arbitrary" => "Unknown".into(),
        "" => "Unknown".into(),
        other => other.to_string(),
    }
}

/// One line of output: a job or one of its steps.
enum Line<'a> {
    Job { j: &'a v1::AcctJob, steps: &'a [&'a v1::AcctStep] },
    Step { j: &'a v1::AcctJob, s: &'a v1::AcctStep },
}

fn info(j: &v1::AcctJob) -> &v1::JobInfo {
    static EMPTY: std::sync::OnceLock<v1::JobInfo> = std::sync::OnceLock::new();
    j.info.as_ref().unwrap_or_else(|| EMPTY.get_or_init(v1::JobInfo::default))
}

fn sinfo(s: &v1::AcctStep) -> &v1::StepInfo {
    static EMPTY: std::sync::OnceLock<v1::StepInfo> = std::sync::OnceLock::new();
    s.info.as_ref().unwrap_or_else(|| EMPTY.get_or_init(v1::StepInfo::default))
}

fn is_numbered(step: u32) -> bool {
    step < drover_model::step::INTERACTIVE_STEP
}

/// Seconds a job or step ran (to `now` while it runs), suspended time not counted.
fn ran(start: i64, end: i64, suspended: i64, now: i64) -> i64 {
    if start <= 0 {
        return 0;
    }
    let end = if end > 0 { end } else { now };
    (end - start - suspended).max(0)
}

fn timelimit(secs: Option<u64>) -> String {
    match secs {
        None => "UNLIMITED".into(),
        Some(s) => elapsed(s as i64),
    }
}

impl Line<'_> {
    fn field(&self, name: &str, now: i64, units: MemUnits) -> String {
        match self {
            Line::Job { j, steps } => job_field(j, steps, name, now),
            Line::Step { j, s } => step_field(j, s, name, now, units),
        }
    }
}

fn job_field(a: &v1::AcctJob, steps: &[&v1::AcctStep], name: &str, now: i64) -> String {
    let j = info(a);
    let s = spec(j);
    let started = j.start_time > 0;
    let req_cpus = tres_count(&a.req_tres, "cpu").unwrap_or(0);
    // A job that never ran shows the CPUs it asked for (Slurm's record keeps them there).
    let alloc_cpus = tres_count(&a.alloc_tres, "cpu").unwrap_or(if a.alloc_tres.is_empty() { req_cpus } else { 0 });
    let elapsed_secs = ran(j.start_time, j.end_time, j.suspended_secs, now);
    let usage: Vec<v1::TaskUsage> = steps.iter().flat_map(|s| s.usage.iter().cloned()).collect();
    let reserved = if j.eligible_time > 0 {
        let until = if started { j.start_time } else { now };
        (until - j.eligible_time).max(0)
    } else {
        0
    };
    match name {
        "Account" => a.account.clone(),
        "AllocCPUS" | "NCPUS" => alloc_cpus.to_string(),
        "AllocNodes" => tres_count(&a.alloc_tres, "node").unwrap_or(0).to_string(),
        "AllocTRES" => sorted_tres(&a.alloc_tres),
        "AssocID" => "0".into(),
        "Cluster" => a.cluster.clone(),
        "Comment" => s.comment.clone().unwrap_or_default(),
        "Constraints" => s.constraint.clone().unwrap_or_default(),
        "ConsumedEnergy" | "ConsumedEnergyRaw" => "0".into(),
        "CPUTime" => elapsed(elapsed_secs * alloc_cpus as i64),
        "CPUTimeRAW" => (elapsed_secs * alloc_cpus as i64).to_string(),
        "DBIndex" => a.db_index.to_string(),
        "DerivedExitCode" => {
            let worst = steps
                .iter()
                .filter(|s| is_numbered(sinfo(s).step_id))
                .map(|s| sinfo(s).exit_status)
                .max_by_key(|st| ((st >> 8) & 0xff, st & 0x7f))
                .unwrap_or(0);
            common::exit_code(worst)
        }
        "Elapsed" => elapsed(elapsed_secs),
        "ElapsedRaw" => elapsed_secs.to_string(),
        "Eligible" => common::fmt_time(j.eligible_time),
        "End" => common::fmt_time(j.end_time),
        "ExitCode" => match j.state.as_str() {
            // Slurm records a killed job's own code as 0:0 (its batch step has the signal).
            "CANCELLED" | "TIMEOUT" | "REQUEUED" => "0:0".into(),
            _ => common::exit_code(j.exit_status),
        },
        "Flags" => {
            if started {
                "SchedMain,StartRecieved".into()
            } else {
                String::new()
            }
        }
        "GID" => s.gid.to_string(),
        "Group" => {
            if s.group.is_empty() {
                common::group_name(s.gid)
            } else {
                s.group.clone()
            }
        }
        "JobID" => job_id(j),
        "JobIDRaw" => j.job_id.to_string(),
        "JobName" => s.name.clone(),
        "NNodes" => {
            if j.alloc.is_empty() {
                tres_count(&a.req_tres, "node").unwrap_or(1).to_string()
            } else {
                j.alloc.len().to_string()
            }
        }
        "NodeList" => {
            if j.nodes.is_empty() {
                "None assigned".into()
            } else {
                j.nodes.clone()
            }
        }
        "Partition" => j.partition.clone(),
        "Priority" => j.priority.to_string(),
        "QOS" => a.qos.clone(),
        "QOSRAW" => "1".into(),
        "Reason" => {
            if j.state == "PENDING" && !j.reason.is_empty() {
                j.reason.clone()
            } else {
                "None".into()
            }
        }
        "ReqCPUFreq" | "ReqCPUFreqGov" | "ReqCPUFreqMax" | "ReqCPUFreqMin" => "Unknown".into(),
        "ReqCPUS" => req_cpus.to_string(),
        "ReqMem" => tres_value(&a.req_tres, "mem").unwrap_or("0").to_string(),
        "ReqNodes" => tres_count(&a.req_tres, "node").unwrap_or(1).to_string(),
        "ReqTRES" => sorted_tres(&a.req_tres),
        "Reserved" => elapsed(reserved),
        "ResvCPU" => elapsed(reserved * req_cpus as i64),
        "ResvCPURAW" => (reserved * req_cpus as i64).to_string(),
        "Restarts" => j.restarts.to_string(),
        "Start" => common::fmt_time(j.start_time),
        "State" => match (j.state.as_str(), j.cancelled_by) {
            ("CANCELLED", Some(uid)) => format!("CANCELLED by {uid}"),
            (st, _) => st.to_string(),
        },
        "Submit" => common::fmt_time(j.submit_time),
        "SubmitLine" => s.submit_line.clone(),
        "Suspended" => elapsed(j.suspended_secs),
        "SystemCPU" | "UserCPU" | "TotalCPU" => usage_cpu(&usage, name),
        "Timelimit" => timelimit(j.time_limit_secs),
        "TimelimitRaw" => j.time_limit_secs.map_or("UNLIMITED".into(), |s| (s / 60).to_string()),
        "UID" => s.uid.to_string(),
        "User" => s.user.clone(),
        "WCKeyID" => "0".into(),
        "WorkDir" => s.work_dir.clone(),
        _ => String::new(),
    }
}

/// CPU time of tasks as `TotalCPU`, `UserCPU` or `SystemCPU`.
fn usage_cpu(usage: &[v1::TaskUsage], name: &str) -> String {
    let secs: f64 = usage
        .iter()
        .map(|t| match name {
            "UserCPU" => t.user_secs,
            "SystemCPU" => t.sys_secs,
            _ => t.cpu_secs.max(t.user_secs + t.sys_secs),
        })
        .sum();
    cpu_time(secs)
}

fn step_field(a: &v1::AcctJob, st: &v1::AcctStep, name: &str, now: i64, units: MemUnits) -> String {
    let j = info(a);
    let s = sinfo(st);
    let nodes: Vec<&str> = s.nodes.iter().map(|n| n.node.as_str()).collect();
    let cpus = tres_count(&st.alloc_tres, "cpu").unwrap_or(0);
    let elapsed_secs = ran(s.start_time, s.end_time, 0, now);
    let script = !is_numbered(s.step_id);
    let usage = Summary { id: String::new(), tasks: &st.usage, units };
    let measured = !st.usage.is_empty();
    match name {
        "Account" => a.account.clone(),
        "AllocCPUS" | "NCPUS" | "ReqCPUS" => cpus.to_string(),
        "AllocNodes" | "NNodes" | "ReqNodes" => nodes.len().to_string(),
        "AllocTRES" => sorted_tres(&st.alloc_tres),
        "AssocID" => "0".into(),
        "AveCPUFreq" | "ConsumedEnergy" | "ConsumedEnergyRaw" => "0".into(),
        "Cluster" => a.cluster.clone(),
        "CPUTime" => elapsed(elapsed_secs * cpus as i64),
        "CPUTimeRAW" => (elapsed_secs * cpus as i64).to_string(),
        "DBIndex" => a.db_index.to_string(),
        "Elapsed" => elapsed(elapsed_secs),
        "ElapsedRaw" => elapsed_secs.to_string(),
        "Eligible" | "Start" | "Submit" => common::fmt_time(s.start_time),
        "End" => common::fmt_time(s.end_time),
        "ExitCode" => common::exit_code(s.exit_status),
        "JobID" => format!("{}.{}", job_id(j), step_suffix(s.step_id)),
        "JobIDRaw" => format!("{}.{}", j.job_id, step_suffix(s.step_id)),
        "JobName" => s.name.clone(),
        "Layout" => {
            if script {
                "Unknown".into()
            } else {
                layout(&s.distribution)
            }
        }
        "NodeList" => drover_model::hostlist::Hostlist::from_iter(nodes.iter().copied()).ranged(),
        "NTasks" => st.ntasks.to_string(),
        "ReqCPUFreq" | "ReqCPUFreqGov" | "ReqCPUFreqMax" | "ReqCPUFreqMin" => {
            if script {
                "0".into()
            } else {
                "Unknown".into()
            }
        }
        "State" => s.state.clone(),
        "SubmitLine" => st.submit_line.clone(),
        "Suspended" => elapsed(0),
        "SystemCPU" | "UserCPU" | "TotalCPU" => usage_cpu(&st.usage, name),
        "TRESUsageInAve" | "TRESUsageInTot" | "TRESUsageOutAve" | "TRESUsageOutTot" if !measured => "energy=0".into(),
        "AveCPU" | "AveDiskRead" | "AveDiskWrite" | "AvePages" | "AveRSS" | "AveVMSize" | "MaxDiskRead"
        | "MaxDiskReadNode" | "MaxDiskReadTask" | "MaxDiskWrite" | "MaxDiskWriteNode" | "MaxDiskWriteTask"
        | "MaxPages" | "MaxPagesNode" | "MaxPagesTask" | "MaxRSS" | "MaxRSSNode" | "MaxRSSTask" | "MaxVMSize"
        | "MaxVMSizeNode" | "MaxVMSizeTask" | "MinCPU" | "MinCPUNode" | "MinCPUTask"
            if measured =>
        {
            usage.field(name)
        }
        n if n.starts_with("TRESUsage") && measured => usage.field(name),
        _ => String::new(),
    }
}

/// What `-s` accepts: Slurm's state names and short codes.
fn state_name(s: &str) -> Option<&'static str> {
    Some(match s.to_ascii_uppercase().as_str() {
        "PD" | "PENDING" => "PENDING",
        "R" | "RUNNING" => "RUNNING",
        "S" | "SUSPENDED" => "SUSPENDED",
        "CD" | "COMPLETED" => "COMPLETED",
        "CA" | "CANCELLED" => "CANCELLED",
        "F" | "FAILED" => "FAILED",
        "TO" | "TIMEOUT" => "TIMEOUT",
        "NF" | "NODE_FAIL" => "NODE_FAIL",
        "PR" | "PREEMPTED" => "PREEMPTED",
        "BF" | "BOOT_FAIL" => "BOOT_FAIL",
        "DL" | "DEADLINE" => "DEADLINE",
        "OOM" | "OUT_OF_MEMORY" => "OUT_OF_MEMORY",
        "RQ" | "REQUEUED" => "REQUEUED",
        "RS" | "RESIZING" => "RESIZING",
        "RV" | "REVOKED" => "REVOKED",
        _ => return None,
    })
}

/// A time for `-S`/`-E`, read as Slurm's sacct reads it: an ambiguous one is in the past.
fn past_time(s: &str, now: i64) -> Option<i64> {
    let t = common::parse_time_spec(s, now)?;
    let lower = s.to_ascii_lowercase();
    let clock = !lower.contains('-') && !lower.starts_with("now") && lower.contains(':');
    let named = matches!(lower.as_str(), "midnight" | "noon" | "teatime" | "fika");
    Some(if (clock || named) && t > now { t - 86400 } else { t })
}

/// Midnight at the start of today, local time.
fn today(now: i64) -> i64 {
    jiff::Timestamp::from_second(now)
        .ok()
        .and_then(|ts| ts.to_zoned(common::tz()).date().at(0, 0, 0, 0).to_zoned(common::tz()).ok())
        .map_or(now, |z| z.timestamp().as_second())
}

/// The selection a command line asks for; refused, the lines sacct prints, whole (Slurm's
/// prefixes differ: `fatal:` for a state or job id, none for a time).
fn query(a: &Args, cluster: &str, now: i64, me: u32) -> Result<v1::AcctQuery, String> {
    let list = |v: &Option<String>| -> Vec<String> {
        v.as_deref().map(|s| s.split(',').filter(|x| !x.is_empty()).map(String::from).collect()).unwrap_or_default()
    };
    let mut q = v1::AcctQuery {
        accounts: list(&a.accounts),
        names: list(&a.names),
        partitions: list(&a.partitions),
        qos: list(&a.qos),
        duplicates: a.duplicates,
        no_steps: a.allocations,
        ..Default::default()
    };
    if !a.all_clusters {
        q.clusters = match &a.clusters {
            Some(c) if c.eq_ignore_ascii_case("all") => Vec::new(),
            Some(c) => c.split(',').map(String::from).collect(),
            None => vec![cluster.to_string()],
        };
    }
    for st in list(&a.states) {
        q.states.push(
            state_name(&st).ok_or_else(|| format!("sacct: fatal: unrecognized job state value '{st}'"))?.to_string(),
        );
    }
    for u in list(&a.users) {
        q.uids.push(common::uid_of(&u).ok_or_else(|| format!("sacct: error: Invalid user id: {u}"))?);
    }
    for g in list(&a.groups) {
        let gid = g
            .parse::<u32>()
            .ok()
            .or_else(|| nix::unistd::Group::from_name(&g).ok().flatten().map(|gr| gr.gid.as_raw()));
        q.gids.push(gid.ok_or_else(|| format!("sacct: error: Invalid group id: {g}"))?);
    }
    if a.users.is_none() && !a.all_users && me != 0 {
        q.uids.push(me);
    }
    if !a.rest.is_empty() {
        // Words that are no option (sacct takes job ids after -j only), one line each.
        let words: String = a.rest.iter().map(|w| format!("\nsacct: error:  {w}")).collect();
        return Err(format!("sacct: error: Unknown arguments:{words}"));
    }
    let targets = common::parse_targets(&a.jobs).map_err(|id| format!("sacct: fatal: Bad job/step specified: {id}"))?;
    for t in &targets {
        match &t.tasks {
            Some(tasks) => {
                let set = drover_model::array::ArraySpec::parse(tasks)
                    .map_err(|_| format!("sacct: fatal: Bad job/step specified: {tasks}"))?;
                for task in set.tasks.iter() {
                    q.jobs.push(v1::AcctJobSelector {
                        job_id: t.job_id,
                        array_task_id: Some(task),
                        step_id: t.step_id,
                    });
                }
            }
            None => q.jobs.push(v1::AcctJobSelector { job_id: t.job_id, array_task_id: None, step_id: t.step_id }),
        }
    }
    let parse = |s: &str| past_time(s, now).ok_or_else(|| format!("Invalid time specification (pos=0): {s}"));
    let start = a.start.as_deref().map(parse).transpose()?;
    let end = a.end.as_deref().map(parse).transpose()?;
    // Slurm's default window: today with no -j or -s; now with -s; everything with -j.
    q.start = match start {
        Some(t) => t,
        None if !q.states.is_empty() => now,
        None if !q.jobs.is_empty() => 0,
        None => today(now),
    };
    q.end = end.unwrap_or(if q.start == 0 { 0 } else { now });
    if q.start != 0 && q.end != 0 && q.end < q.start {
        return Err("sacct: error: Start time requested is after end time.".into());
    }
    Ok(q)
}

fn step_order(s: &v1::AcctStep) -> (u8, u32) {
    let id = sinfo(s).step_id;
    match id {
        drover_model::step::BATCH_STEP => (0, 0),
        drover_model::step::EXTERN_STEP => (1, 0),
        drover_model::step::INTERACTIVE_STEP => (2, 0),
        n => (3, n),
    }
}

pub fn main(args: Vec<String>) -> i32 {
    let a: Args = match common::parse_command("sacct", args, |a: &Args| &a.std) {
        Ok(a) => a,
        Err(code) => return code,
    };
    if a.helpformat {
        print!("{}", helpformat());
        return 0;
    }
    // Memory sizes: --units over --noconvert over Slurm's exact conversion.
    let units = match (&a.units, a.noconvert) {
        (Some(u), _) => match MemUnits::parse(u) {
            Ok(u) => u,
            Err(e) => {
                eprintln!("sacct: error: {e}");
                eprintln!("sacct: fatal: Invalid unit type");
                return 1;
            }
        },
        (None, true) => MemUnits::No,
        (None, false) => MemUnits::Exact,
    };
    let format = if let Some(f) = &a.format {
        f.clone()
    } else if a.brief {
        BRIEF_FORMAT.into()
    } else if a.long {
        LONG_FORMAT.into()
    } else {
        std::env::var("SACCT_FORMAT").ok().filter(|f| !f.is_empty()).unwrap_or_else(|| DEFAULT_FORMAT.into())
    };
    let cols = match columns(&format) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sacct: error: {e}");
            return 1;
        }
    };
    let cfg = match common::config_for("sacct") {
        Ok(c) => c,
        Err(code) => return code,
    };
    if cfg.accounting_addr().is_none() {
        eprintln!("sacct: error: Slurm accounting storage is disabled");
        return 1;
    }
    let now = common::now();
    let me = nix::unistd::getuid().as_raw();
    let q = match query(&a, &cfg.cluster_name, now, me) {
        Ok(q) => q,
        Err(lines) => {
            eprintln!("{lines}");
            return 1;
        }
    };
    let step_filter: Vec<(u32, Option<u32>, u32)> =
        q.jobs.iter().filter_map(|s| s.step_id.map(|st| (s.job_id, s.array_task_id, st))).collect();
    let rows = match common::runtime().block_on(fetch(&cfg, q)) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("sacct: error: {e}");
            return 1;
        }
    };
    if a.json {
        let mut steps_of: std::collections::HashMap<(&str, u32, u32), Vec<&v1::AcctStep>> = Default::default();
        for s in &rows.steps {
            steps_of.entry((s.cluster.as_str(), sinfo(s).job_id, s.restarts)).or_default().push(s);
        }
        let list: Vec<(&v1::AcctJob, Vec<&v1::AcctStep>)> = rows
            .jobs
            .iter()
            .map(|j| {
                let i = info(j);
                let mut st = steps_of.remove(&(j.cluster.as_str(), i.job_id, i.restarts)).unwrap_or_default();
                st.sort_by_key(|s| step_order(s));
                (j, st)
            })
            .collect();
        println!("{}", crate::json::sacct_json(&list, now));
        return 0;
    }
    let delim = a.delimiter.clone().unwrap_or_else(|| "|".into());
    let parsable = if a.parsable2 {
        Some(false)
    } else if a.parsable {
        Some(true)
    } else {
        None
    };
    let mut out = String::new();
    let line = |out: &mut String, vals: &mut dyn Iterator<Item = (&Column, String)>| {
        match parsable {
            Some(trailing) => {
                let vals: Vec<String> = vals.map(|(_, v)| v).collect();
                out.push_str(&vals.join(&delim));
                if trailing {
                    out.push_str(&delim);
                }
            }
            None => {
                for (c, v) in vals {
                    out.push_str(&cell(c, &v, a.truncate));
                    out.push(' ');
                }
            }
        }
        out.push('\n');
    };
    if !a.noheader {
        if parsable.is_some() {
            line(&mut out, &mut cols.iter().map(|c| (c, c.name.to_string())));
        } else {
            // A title cut to its column is cut without Slurm's `+`.
            for c in &cols {
                out.push_str(&crate::format::slurm_cell(c.name, c.width, c.left, false));
                out.push(' ');
            }
            out.push('\n');
        }
        if parsable.is_none() {
            out.push_str(&cols.iter().map(|c| "-".repeat(c.width) + " ").collect::<String>());
            out.push('\n');
        }
    }
    let mut steps_of: std::collections::HashMap<(&str, u32, u32), Vec<&v1::AcctStep>> = Default::default();
    for s in &rows.steps {
        steps_of.entry((s.cluster.as_str(), sinfo(s).job_id, s.restarts)).or_default().push(s);
    }
    for v in steps_of.values_mut() {
        v.sort_by_key(|s| step_order(s));
    }
    for j in &rows.jobs {
        let i = info(j);
        let steps: &[&v1::AcctStep] =
            steps_of.get(&(j.cluster.as_str(), i.job_id, i.restarts)).map_or(&[], |v| v.as_slice());
        // `-j N.S` shows only that step of N.
        let only: Vec<u32> = step_filter
            .iter()
            .filter(|(id, task, _)| {
                (*id == i.job_id && task.is_none()) || (*id == i.array_job_id && *task == i.array_task_id)
            })
            .map(|(_, _, st)| *st)
            .collect();
        if only.is_empty() {
            line(&mut out, &mut cols.iter().map(|c| (c, Line::Job { j, steps }.field(c.name, now, units))));
        }
        if a.allocations {
            continue;
        }
        for s in steps.iter().filter(|s| only.is_empty() || only.contains(&sinfo(s).step_id)) {
            line(&mut out, &mut cols.iter().map(|c| (c, Line::Step { j, s }.field(c.name, now, units))));
        }
    }
    crate::common::print_raw(&out);
    0
}

async fn fetch(cfg: &drover_model::conf::Config, q: v1::AcctQuery) -> Result<v1::AcctRows, String> {
    let mut c = common::accounting(cfg).await?;
    let mut stream =
        c.jobs(q).await.map_err(|s| format!("Problem talking to the database: {}", s.message()))?.into_inner();
    let mut all = v1::AcctRows::default();
    while let Some(r) =
        stream.message().await.map_err(|s| format!("Problem talking to the database: {}", s.message()))?
    {
        all.jobs.extend(r.jobs);
        all.steps.extend(r.steps);
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpformat_is_slurms() {
        let want = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../testdata/compat/slurm-22.05/sacct_helpformat.out"
        ))
        .unwrap();
        assert_eq!(helpformat(), want);
    }

    #[test]
    fn columns_widths_and_cuts() {
        let c = columns("jobid,state%20,jobname%-5").unwrap();
        assert_eq!(c[0], Column { name: "JobID", width: 12, left: true });
        assert_eq!(c[1], Column { name: "State", width: 20, left: false });
        assert_eq!(c[2], Column { name: "JobName", width: 5, left: true });
        assert_eq!(columns("bogus").unwrap_err(), "Invalid field requested: \"bogus\"");
        let state = Column { name: "State", width: 10, left: false };
        assert_eq!(cell(&state, "CANCELLED by 0", false), "CANCELLED+");
        assert_eq!(cell(&state, "CANCELLED by 0", true), "CANCELLED ");
        assert_eq!(cell(&state, "COMPLETED", false), " COMPLETED");
    }

    #[test]
    fn times_as_slurm_prints_them() {
        assert_eq!(elapsed(0), "00:00:00");
        assert_eq!(elapsed(3661), "01:01:01");
        assert_eq!(elapsed(90061), "1-01:01:01");
        assert_eq!(cpu_time(0.032), "00:00.032");
        assert_eq!(cpu_time(0.0), "00:00:00");
        assert_eq!(cpu_time(75.5), "01:15.500");
        assert_eq!(cpu_time(3700.25), "01:01:40");
        assert_eq!(sorted_tres("cpu=2,mem=8000M,node=2,billing=2"), "billing=2,cpu=2,mem=8000M,node=2");
    }

    #[test]
    fn default_windows() {
        let now = 1_796_212_615;
        let parse = |args: &[&str]| {
            let a = Args::try_parse_from(std::iter::once("sacct").chain(args.iter().copied())).unwrap();
            query(&a, "lab", now, 1000).unwrap()
        };
        let q = parse(&[]);
        assert_eq!((q.start, q.end), (today(now), now));
        assert!(q.start <= now && now - q.start < 86400);
        assert_eq!(q.uids, [1000], "a user sees their own jobs");
        assert_eq!(q.clusters, ["lab"]);
        let q = parse(&["-j", "12,13_2,14.batch"]);
        assert_eq!((q.start, q.end), (0, 0), "with -j the window is open");
        assert_eq!(q.jobs.len(), 3);
        assert_eq!(q.jobs[1].array_task_id, Some(2));
        assert_eq!(q.jobs[2].step_id, Some(drover_model::step::BATCH_STEP));
        let q = parse(&["-s", "CD,r"]);
        assert_eq!((q.start, q.end), (now, now));
        assert_eq!(q.states, ["COMPLETED", "RUNNING"]);
        let q = parse(&["-a", "-S", "now-30days"]);
        assert_eq!(q.start, now - 30 * 86400);
        assert!(q.uids.is_empty());
        let a = Args::try_parse_from(["sacct", "-s", "XX"]).unwrap();
        assert_eq!(query(&a, "lab", now, 0).unwrap_err(), "sacct: fatal: unrecognized job state value 'XX'");
    }
}
