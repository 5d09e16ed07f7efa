//! Derived values of a job as the commands print them (shared by squeue and scontrol).

use crate::common::{fmt_time, group_name};
use drover_model::duration::{fmt_limit_short, fmt_short};
use drover_model::hostlist::Hostlist;
use drover_model::memsize::fmt_tres_mb;
use drover_proto::v1;
use std::borrow::Cow;

pub use drover_proto::jobinfo::{gpu_count, num_cpus, num_nodes, num_tasks, spec};

/// `SLURM_BITSTR_LEN`, read once.
fn bitstr_len() -> usize {
    static LEN: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *LEN.get_or_init(|| drover_model::array::bitstr_len(std::env::var("SLURM_BITSTR_LEN").ok().as_deref()))
}

/// Whether this record is an array's pending remainder (one record for all its unstarted tasks).
pub fn is_array_remainder(j: &v1::JobInfo) -> bool {
    j.array_job_id != 0 && j.array_task_id.is_none()
}

/// The remainder's tasks, when the record is one.
pub fn array_pending(j: &v1::JobInfo) -> Option<drover_model::array::TaskSet> {
    if !is_array_remainder(j) {
        return None;
    }
    drover_model::array::ArraySpec::parse(&j.array_pending).ok().map(|a| a.tasks)
}

/// The remainder's tasks as Slurm prints them (`0-3`, `0-999%5`).
pub fn array_task_str(j: &v1::JobInfo) -> String {
    array_pending(j).map(|t| t.fmt_slurm(j.array_max_tasks, bitstr_len())).unwrap_or_default()
}

/// `%i`: `21_[0-3]` for an array's pending remainder, `21_3` for one of its tasks, else the
/// job id. squeue formats the remainder into 32 bytes unless `SLURM_BITSTR_LEN` is set.
pub fn job_id_text(j: &v1::JobInfo) -> String {
    match (j.array_job_id, j.array_task_id) {
        (0, _) => j.job_id.to_string(),
        (a, Some(t)) => format!("{a}_{t}"),
        (a, None) => {
            let mut s = format!("{a}_[{}]", array_task_str(j));
            if std::env::var_os("SLURM_BITSTR_LEN").is_none() {
                s.truncate(31);
            }
            s
        }
    }
}

/// `%F`: the array's id (the job id for a job that is not an array's).
pub fn array_job_id(j: &v1::JobInfo) -> u32 {
    if j.array_job_id != 0 {
        j.array_job_id
    } else {
        j.job_id
    }
}

/// `%K`: the task id, the remainder's tasks, or `N/A`.
pub fn array_task_text(j: &v1::JobInfo) -> String {
    match (j.array_job_id, j.array_task_id) {
        (0, _) => "N/A".into(),
        (_, Some(t)) => t.to_string(),
        (_, None) => array_task_str(j),
    }
}

/// `Dependency=` and `%E` as Slurm 22.05 prints them: the conditions still in force, each
/// marked `(unfulfilled)` or `(failed)`; `(null)` once they are satisfied.
pub fn dependency_text(j: &v1::JobInfo) -> String {
    let s = spec(j);
    if s.dependency.is_empty() {
        return "(null)".into();
    }
    let state = match j.reason.as_str() {
        "DependencyNeverSatisfied" => "failed",
        "Dependency" => "unfulfilled",
        // A held job's conditions are not evaluated for display; they stay listed.
        "JobHeldUser" | "JobHeldAdmin" => "unfulfilled",
        _ => return "(null)".into(),
    };
    match drover_model::job::parse_dependency(&s.dependency) {
        Ok(d) => drover_model::job::fmt_dependency_with(&d, Some(state)),
        Err(_) => s.dependency.clone(),
    }
}

pub fn is_pending(j: &v1::JobInfo) -> bool {
    j.state == "PENDING"
}

/// A pending job's begin time (`--begin`) where it waits for it: Slurm's expected start.
fn begin_ahead(j: &v1::JobInfo) -> Option<i64> {
    (is_pending(j) && j.reason == "BeginTime").then(|| spec(j).begin_time.filter(|b| *b > 0)).flatten()
}

pub fn state_short(j: &v1::JobInfo) -> &'static str {
    drover_model::state::JobState::parse(&j.state).map(|s| s.short()).unwrap_or("??")
}

/// Seconds used so far.
pub fn used(j: &v1::JobInfo, now: i64) -> u64 {
    if j.start_time <= 0 || is_pending(j) {
        return 0;
    }
    if j.state == "SUSPENDED" {
        return j.pre_suspend_secs.max(0) as u64;
    }
    // Time suspended does not count, as in Slurm.
    let end = if j.end_time > 0 { j.end_time } else { now };
    (end - j.start_time - j.suspended_secs).max(0) as u64
}

pub fn nodelist(j: &v1::JobInfo) -> String {
    j.nodes.clone()
}

pub fn min_memory(j: &v1::JobInfo) -> String {
    let s = spec(j);
    match (s.mem_per_node_mb, s.mem_per_cpu_mb) {
        (Some(m), _) => fmt_tres_mb(m),
        (None, Some(m)) => fmt_tres_mb(m),
        _ => "0".into(),
    }
}

pub fn time_limit(j: &v1::JobInfo) -> Option<u64> {
    j.time_limit_secs
}

pub fn user(j: &v1::JobInfo) -> String {
    let s = spec(j);
    if s.user.is_empty() {
        s.uid.to_string()
    } else {
        s.user.clone()
    }
}

pub fn group(j: &v1::JobInfo) -> String {
    let s = spec(j);
    if s.group.is_empty() {
        group_name(s.gid)
    } else {
        s.group.clone()
    }
}

/// The job's reason as Slurm names it: an ended job's says how it ended (its time limit,
/// memory, exit code or the signal that killed it), a waiting job's why it waits.
pub fn reason_text(j: &v1::JobInfo) -> String {
    match j.state.as_str() {
        "TIMEOUT" => "TimeLimit".to_string(),
        "OUT_OF_MEMORY" => "OutOfMemory".to_string(),
        "FAILED" if j.exit_status & 0x7f != 0 => {
            let sig = j.exit_status & 0x7f;
            let name =
                nix::sys::signal::Signal::try_from(sig).map(|s| crate::srun::signal_text(s as i32)).unwrap_or_default();
            format!("RaisedSignal:{sig}({name})")
        }
        "FAILED" if j.exit_status != 0 => "NonZeroExitCode".to_string(),
        _ if j.reason.is_empty() => "None".into(),
        _ => j.reason.clone(),
    }
}

/// `%R`: pending jobs and those that failed, timed out or ran out of memory show
/// `(Reason)`; the others their nodes (none for a job cancelled before it ran), as Slurm.
pub fn reason_or_nodes(j: &v1::JobInfo) -> String {
    if shows_reason(j) {
        format!("({})", reason_text(j))
    } else {
        j.nodes.clone()
    }
}

/// Whether `%R` is the job's reason rather than its nodes (squeue's `_print_job_reason_list`).
pub fn shows_reason(j: &v1::JobInfo) -> bool {
    is_pending(j) || ended_with_reason(j) || j.state == "DEADLINE"
}

/// A job whose end is its reason (`NonZeroExitCode`, `TimeLimit`, ...: [`reason_text`]).
fn ended_with_reason(j: &v1::JobInfo) -> bool {
    matches!(j.state.as_str(), "FAILED" | "TIMEOUT" | "OUT_OF_MEMORY")
}

/// Held (by its user or an administrator): pending so, or cancelled while so.
pub fn is_held(j: &v1::JobInfo) -> bool {
    j.reason == "JobHeldUser" || j.reason == "JobHeldAdmin"
}

/// Whether the job accrues waiting time (Slurm's `AccrueTime`): not while held or on a
/// dependency.
pub fn accrues(j: &v1::JobInfo) -> bool {
    !is_held(j) && j.reason != "Dependency"
}

/// Whether the job has an eligible time (Slurm's `EligibleTime`): not while it does not
/// accrue, nor while its array's throttle holds it back.
pub fn eligible(j: &v1::JobInfo) -> bool {
    accrues(j) && j.reason != "JobArrayTaskLimit"
}

/// `TresPerNode` (`gres:gpu:2`): the GRES asked for per node.
pub fn tres_per_node(j: &v1::JobInfo) -> Option<String> {
    let s = spec(j);
    let all: Vec<String> = s.gres.iter().chain(s.gpus_per_node.iter()).map(|g| format!("gres:{g}")).collect();
    (!all.is_empty()).then(|| all.join(","))
}

/// `TresPerJob` (`--gpus`) and `TresPerTask` (`--gpus-per-task`).
pub fn tres_per_job(j: &v1::JobInfo) -> Option<String> {
    spec(j).gpus.as_ref().map(|g| format!("gres:{g}"))
}

pub fn tres_per_task(j: &v1::JobInfo) -> Option<String> {
    spec(j).gpus_per_task.as_ref().map(|g| format!("gres:{g}"))
}

/// The job's TRES (what it holds, or pending, asks for) as scontrol and squeue print them.
pub fn tres(j: &v1::JobInfo) -> String {
    drover_proto::jobinfo::tres(j, gpus_tracked())
}

/// Whether slurm.conf tracks GPUs as a TRES (`AccountingStorageTRES=gres/gpu`).
pub fn gpus_tracked() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        crate::common::load_config().is_ok_and(|c| c.accounting_storage_tres.iter().any(|t| t == "gres/gpu"))
    })
}

/// `...,gres/gpu=N` where slurm.conf tracks GPUs as a TRES (`AccountingStorageTRES=gres/gpu`),
/// as Slurm prints TRES lists then.
pub fn with_gpu_tres(mut base: String, gpus: impl FnOnce() -> u64) -> String {
    let gpus = if gpus_tracked() { gpus() } else { 0 };
    if gpus > 0 {
        if !base.is_empty() {
            base.push(',');
        }
        base.push_str(&format!("gres/gpu={gpus}"));
    }
    base
}

pub fn std_path(j: &v1::JobInfo, which: char) -> String {
    let s = spec(j);
    let pat = match which {
        'o' => s.stdout.clone().unwrap_or_else(|| drover_model::job::default_output(j.array_job_id != 0).into()),
        'e' => s
            .stderr
            .clone()
            .or_else(|| s.stdout.clone())
            .unwrap_or_else(|| drover_model::job::default_output(j.array_job_id != 0).into()),
        _ => s.stdin.clone().unwrap_or_else(|| "/dev/null".into()),
    };
    let node = j.alloc.first().map(|a| a.node.clone()).unwrap_or_default();
    let v = drover_model::job::PatternVars {
        job_id: j.job_id,
        array_job_id: array_job_id(j),
        array_task_id: j.array_task_id,
        job_name: &s.name,
        user: &s.user,
        node: &node,
        node_index: 0,
        task: None,
        step: None,
    };
    let p = drover_model::job::expand_pattern(&pat, &v);
    if p.starts_with('/') {
        p
    } else {
        format!("{}/{}", s.work_dir.trim_end_matches('/'), p)
    }
}

/// Appends one squeue `%` code's text; the codes of the default formats are written without
/// allocating.
pub fn squeue_field_into(out: &mut String, j: &v1::JobInfo, code: char, now: i64) {
    use std::fmt::Write;
    match code {
        'A' | 'i' | 'F' if j.array_job_id == 0 => {
            let _ = write!(out, "{}", j.job_id);
        }
        'D' => {
            let _ = write!(out, "{}", num_nodes(j));
        }
        'C' => {
            let _ = write!(out, "{}", num_cpus(j));
        }
        'M' => match used(j, now) {
            0 => out.push_str("0:00"),
            u => out.push_str(&fmt_short(u)),
        },
        'R' if shows_reason(j) => {
            out.push('(');
            if is_pending(j) {
                // (without allocating: most lines of a long queue are these)
                out.push_str(if j.reason.is_empty() { "None" } else { &j.reason });
            } else {
                out.push_str(&reason_text(j));
            }
            out.push(')');
        }
        _ => out.push_str(&squeue_field(j, code, now)),
    }
}

/// One squeue `%` code.
pub fn squeue_field(j: &v1::JobInfo, code: char, now: i64) -> Cow<'_, str> {
    let s = spec(j);
    // The common text fields are borrowed; only computed ones allocate.
    match code {
        'j' => return Cow::Borrowed(&s.name),
        'P' => return Cow::Borrowed(&j.partition),
        'T' => return Cow::Borrowed(&j.state),
        't' => return Cow::Borrowed(state_short(j)),
        'u' if !s.user.is_empty() => return Cow::Borrowed(&s.user),
        'N' => return Cow::Borrowed(&j.nodes),
        'Z' => return Cow::Borrowed(&s.work_dir),
        'R' if !shows_reason(j) => return Cow::Borrowed(&j.nodes),
        'r' if !j.reason.is_empty() && !ended_with_reason(j) => return Cow::Borrowed(&j.reason),
        _ => {}
    }
    let limit = time_limit(j);
    Cow::Owned(match code {
        'a' => drover_proto::jobinfo::account(s).to_string(),
        'A' => j.job_id.to_string(),
        'i' => job_id_text(j),
        'F' => array_job_id(j).to_string(),
        'b' => tres_per_node(j).unwrap_or_else(|| "N/A".into()),
        'B' => {
            if j.batch_host.is_empty() {
                "n/a".into()
            } else {
                j.batch_host.clone()
            }
        }
        'c' => s.cpus_per_task.unwrap_or(1).to_string(),
        'C' => num_cpus(j).to_string(),
        'd' => "0".into(),
        'D' => num_nodes(j).to_string(),
        'e' => {
            if j.end_time > 0 {
                fmt_time(j.end_time)
            } else if j.start_time > 0 && !is_pending(j) {
                limit.map(|l| fmt_time(j.start_time + l as i64)).unwrap_or_else(|| "N/A".into())
            } else if let Some(begin) = begin_ahead(j) {
                // Slurm's controller starts a job held to a begin time at that time: its end
                // follows from its limit, none without one.
                limit.map(|l| fmt_time(begin + l as i64)).unwrap_or_else(|| "NONE".into())
            } else {
                "N/A".into()
            }
        }
        'E' => dependency_text(j),
        'f' => s.constraint.clone().unwrap_or_else(|| "(null)".into()),
        'g' => group(j),
        'G' => s.gid.to_string(),
        'h' => drover_proto::jobinfo::oversubscribe(s).into(),
        'H' | 'I' | 'J' => "*".into(),
        // No cores kept for the system (core_spec unset).
        'X' => "N/A".into(),
        'j' => s.name.clone(),
        'k' => s.comment.clone().unwrap_or_else(|| "(null)".into()),
        'K' => array_task_text(j),
        'l' => fmt_limit_short(limit),
        'L' => match limit {
            None => "UNLIMITED".into(),
            Some(l) => fmt_short(l.saturating_sub(used(j, now))),
        },
        'm' => min_memory(j),
        'M' => fmt_short(used(j, now)),
        'n' => {
            if s.nodelist.is_empty() {
                String::new()
            } else {
                Hostlist::from_iter(&s.nodelist).ranged()
            }
        }
        'N' => nodelist(j),
        'o' => s.argv.first().cloned().filter(|a| !a.is_empty()).unwrap_or_else(|| "(null)".into()),
        'O' => "0".into(),
        // squeue's "%16.14f" of the priority over 2^32 - 1.
        'p' => format!("{:16.14}", j.priority as f64 / f64::from(u32::MAX)),
        'P' => j.partition.clone(),
        'q' => drover_proto::jobinfo::qos(s).to_string(),
        'Q' => j.priority.to_string(),
        'r' => reason_text(j),
        'R' => reason_or_nodes(j),
        // The node selection plugin's data: cons_tres has none to print.
        's' => String::new(),
        'S' => {
            if j.start_time > 0 {
                fmt_time(j.start_time)
            } else if is_pending(j) && j.planned_start > 0 {
                fmt_time(j.planned_start)
            } else if let Some(begin) = begin_ahead(j) {
                fmt_time(begin)
            } else {
                "N/A".into()
            }
        }
        't' => state_short(j).into(),
        'T' => j.state.clone(),
        'u' => user(j),
        'U' => s.uid.to_string(),
        'v' => s.reservation.clone().unwrap_or_else(|| "(null)".into()),
        'V' => fmt_time(j.submit_time),
        'w' => "(null)".into(),
        'W' => spec(j).licenses.clone().unwrap_or_else(|| "(null)".into()),
        'x' => {
            if s.exclude.is_empty() {
                String::new()
            } else {
                Hostlist::from_iter(&s.exclude).ranged()
            }
        }
        'y' => s.nice.to_string(),
        'Y' => {
            if is_pending(j) && !j.sched_nodes.is_empty() {
                j.sched_nodes.clone()
            } else {
                "(null)".into()
            }
        }
        'z' => "*:*:*".into(),
        'Z' => s.work_dir.clone(),
        c => match extra(c) {
            Some((name, _)) => squeue_extra(j, name),
            None => String::new(),
        },
    })
}

/// The cluster's name (`ClusterName`), for squeue's `-O Cluster`: set once by the command.
pub static CLUSTER: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// The `-O` field of a private-use code (`squeue::EXTRA`).
fn extra(code: char) -> Option<(&'static str, &'static str)> {
    let i = (code as u32).checked_sub(crate::squeue::EXTRA_BASE)?;
    crate::squeue::EXTRA.get(i as usize).copied()
}

/// squeue's `-O` fields that have no `%` code, as Slurm 22.05 prints them (what Drover has
/// no such thing for is printed as Slurm prints an unset value).
pub fn squeue_extra(j: &v1::JobInfo, name: &str) -> String {
    let s = spec(j);
    let time_or_na = |t: i64| if t > 0 { fmt_time(t) } else { "N/A".into() };
    match name {
        "accruetime" if !accrues(j) => "N/A".into(),
        "eligibletime" if !eligible(j) => "N/A".into(),
        "accruetime" | "eligibletime" => time_or_na(j.eligible_time),
        "allocnodes" => crate::common::alloc_node_name(&s.submit_host),
        "batchflag" => u8::from(s.batch).to_string(),
        "boardspernode" | "ntperboard" | "ntpernode" | "reboot" | "reqswitch" | "restartcnt" | "sperboard"
        | "mintmpdisk" | "contiguous" => "0".into(),
        "cluster" => CLUSTER.get().cloned().unwrap_or_else(|| "(null)".into()),
        "cores" | "sockets" | "threads" => "*".into(),
        "corespec" | "cpus-per-tres" | "deadline" | "hetjobid" | "hetjobidset" | "hetjoboffset" | "mem-per-tres"
        | "ntpercore" | "ntpersocket" | "preempttime" | "resizetime" | "tres-bind" | "tres-freq"
        | "tres-per-socket" => "N/A".into(),
        "cpus-per-task" | "cpuspertask" => s.cpus_per_task.unwrap_or(1).to_string(),
        "delayboot" | "wait4switch" | "mintime" => "0:00".into(),
        "maxcpus" => num_cpus(j).to_string(),
        "maxnodes" => num_nodes(j).to_string(),
        "mincpus" => s.cpus_per_task.unwrap_or(1).to_string(),
        "numtasks" => s.ntasks.unwrap_or_else(|| num_cpus(j) / s.cpus_per_task.unwrap_or(1).max(1)).to_string(),
        "origin" | "originraw" | "siblingsactive" | "siblingsactiveraw" | "siblingsviable" | "siblingsviableraw" => {
            "NA".into()
        }
        "oversubscribe" | "shared" => if s.exclusive { "NO" } else { "OK" }.into(),
        "profile" => "NotSet".into(),
        "requeue" => u8::from(s.requeue.unwrap_or(true)).to_string(),
        "sct" => "*:*:*".into(),
        "stderr" => std_path(j, 'e'),
        "stdin" => std_path(j, 'i'),
        "stdout" => std_path(j, 'o'),
        "tres-alloc" => tres(j),
        "tres-per-node" | "gres" => tres_per_node(j).unwrap_or_else(|| "N/A".into()),
        "tres-per-job" => tres_per_job(j).unwrap_or_else(|| "N/A".into()),
        "tres-per-task" => tres_per_task(j).unwrap_or_else(|| "N/A".into()),
        "licenses" => s.licenses.clone().unwrap_or_else(|| "(null)".into()),
        "derivedec" => "0".into(),
        // The raw wait status, as squeue's exit_code prints it (a signal in the low byte).
        "exit_code" => j.exit_status.to_string(),
        "reasonlist" => reason_or_nodes(j),
        _ => "(null)".into(),
    }
}

pub fn squeue_header(code: char) -> &'static str {
    if let Some((_, header)) = extra(code) {
        return header;
    }
    match code {
        'a' => "ACCOUNT",
        'A' => "JOBID",
        'b' => "TRES_PER_NODE",
        'B' => "EXEC_HOST",
        'c' => "MIN_CPUS",
        'C' => "CPUS",
        'd' => "MIN_TMP_DISK",
        'D' => "NODES",
        'e' => "END_TIME",
        'E' => "DEPENDENCY",
        'f' => "FEATURES",
        'F' => "ARRAY_JOB_ID",
        'g' => "GROUP",
        'G' => "GROUP",
        'h' => "OVER_SUBSCRIBE",
        'H' => "SOCKETS_PER_NODE",
        'i' => "JOBID",
        'I' => "CORES_PER_SOCKET",
        'j' => "NAME",
        'J' => "THREADS_PER_CORE",
        'k' => "COMMENT",
        'K' => "ARRAY_TASK_ID",
        'l' => "TIME_LIMIT",
        'L' => "TIME_LEFT",
        'm' => "MIN_MEMORY",
        'M' => "TIME",
        'n' => "REQ_NODES",
        'N' => "NODELIST",
        'o' => "COMMAND",
        'O' => "CONTIGUOUS",
        'p' => "PRIORITY",
        'P' => "PARTITION",
        'q' => "QOS",
        'Q' => "PRIORITY",
        'r' => "REASON",
        'R' => "NODELIST(REASON)",
        's' => "",
        'S' => "START_TIME",
        't' => "ST",
        'T' => "STATE",
        'u' => "USER",
        'U' => "UID",
        'v' => "RESERVATION",
        'V' => "SUBMIT_TIME",
        'w' => "WCKEY",
        'W' => "LICENSES",
        'x' => "EXC_NODES",
        'X' => "CORE_SPEC",
        'y' => "NICE",
        'Y' => "SCHEDNODES",
        'z' => "S:C:T",
        'Z' => "WORK_DIR",
        _ => "",
    }
}
