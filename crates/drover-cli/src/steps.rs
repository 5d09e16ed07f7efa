//! Job steps as the commands show them: `squeue -s` and `scontrol show step`. A running batch
//! job has its `N.batch` step; every `srun` in an allocation is `N.0`, `N.1`, ...

use crate::common;
use crate::format::{self, Item};
use crate::jobview;
use drover_model::duration::{fmt_limit_long, fmt_limit_short, fmt_short};
use drover_model::hostlist::Hostlist;
use drover_model::step::{step_name, Distribution, BATCH_STEP};
use drover_proto::v1;

/// One step of a job, with what its rows need of the job.
pub struct StepRow<'a> {
    pub job: &'a v1::JobInfo,
    pub id: u32,
    pub name: String,
    pub start: i64,
    pub limit: Option<u64>,
    pub nodes: Vec<String>,
    pub cpus: u32,
    pub tasks: u32,
    /// `None` for the batch step (no `Dist=`).
    pub dist: Option<Distribution>,
    pub srun: Option<(String, u32)>,
}

impl StepRow<'_> {
    /// `12.0`, `12.batch`, `20_3.1`.
    pub fn id_text(&self) -> String {
        format!("{}.{}", jobview::job_id_text(self.job), step_name(self.id))
    }
    pub fn nodelist(&self) -> String {
        Hostlist::from_iter(&self.nodes).ranged()
    }
}

/// The steps of the running jobs among `jobs`, by job then step id (the batch step last,
/// as its id is the largest).
pub fn rows(jobs: &[v1::JobInfo]) -> Vec<StepRow<'_>> {
    let mut out = Vec::new();
    for j in jobs.iter().filter(|j| j.state == "RUNNING" || j.state == "COMPLETING" || j.state == "SUSPENDED") {
        for s in &j.steps {
            out.push(StepRow {
                job: j,
                id: s.step_id,
                name: s.name.clone(),
                start: s.start_time,
                limit: s.time_limit_secs,
                nodes: s.nodes.iter().map(|n| n.node.clone()).collect(),
                cpus: s.nodes.iter().map(|n| n.cpu_ids.len() as u32).sum(),
                tasks: s.nodes.iter().map(|n| n.task_ids.len() as u32).sum(),
                dist: Distribution::parse(&s.distribution).ok().flatten(),
                srun: Some((s.srun_host.clone(), s.srun_pid)),
            });
        }
        if jobview::spec(j).batch && !j.batch_host.is_empty() {
            out.push(StepRow {
                job: j,
                id: BATCH_STEP,
                name: "batch".into(),
                start: j.start_time,
                limit: None,
                nodes: vec![j.batch_host.clone()],
                cpus: 0,
                tasks: 1,
                dist: None,
                srun: None,
            });
        }
    }
    out.sort_by_key(|r| (r.job.job_id, r.id));
    out
}

/// `squeue -s` formats: the default, and the codes that are valid for steps.
pub const SQUEUE_DEFAULT: &str = "%.15i %.8j %.9P %.8u %.9M %N";

/// Codes `squeue -s -o` knows (others are reported and printed as typed, as Slurm does).
pub fn squeue_code_ok(c: char) -> bool {
    matches!(c, 'i' | 'j' | 'P' | 'u' | 'U' | 'M' | 'N' | 'l' | 'S' | 'A' | 'b')
}

/// `squeue -s -O` fields, as (lowercase name, header, the `%` code it is, if any): each is a
/// code of Unicode's private use area from [`STEP_LONG_BASE`] on, by its place here.
const STEP_LONG: &[(&str, &str, Option<char>)] = &[
    ("stepid", "STEPID", Some('i')),
    ("stepname", "NAME", Some('j')),
    ("timelimit", "TIME_LIMIT", Some('l')),
    ("timeused", "TIME", Some('M')),
    ("nodes", "NODELIST", Some('N')),
    ("partition", "PARTITION", Some('P')),
    ("starttime", "START_TIME", Some('S')),
    ("userid", "UID", Some('U')),
    ("username", "USER", Some('u')),
    ("cluster", "CLUSTER", None),
    ("gres", "TRES_PER_JOB", None),
    ("tres-per-node", "TRES_PER_JOB", None),
    ("arrayjobid", "ARRAY_JOB_ID", None),
    ("arraytaskid", "ARRAY_TASK_ID", None),
    ("jobid", "JOB_ID", None),
    ("network", "NETWORK", None),
    ("numcpus", "NUM_CPUS", None),
    ("cpufreq", "CPU_FREQ", None),
    ("resvports", "RESERVED_PORTS", None),
    ("stepstate", "STATE", None),
    ("cpus-per-tres", "CPUS_PER_TRES", None),
    ("mem-per-tres", "MEM_PER_TRES", None),
    ("tres-bind", "TRES_BIND", None),
    ("tres-freq", "TRES_FREQ", None),
    ("tres-per-job", "TRES_PER_STEP", None),
    ("tres-per-step", "TRES_PER_STEP", None),
    ("tres-per-socket", "TRES_PER_SOCKET", None),
    ("tres-per-task", "TRES_PER_TASK", None),
    ("container", "CONTAINER", None),
];

const STEP_LONG_BASE: u32 = 0xE100;

fn step_long(c: char) -> Option<&'static (&'static str, &'static str, Option<char>)> {
    STEP_LONG.get((c as u32).checked_sub(STEP_LONG_BASE)? as usize)
}

/// `squeue -s -O` as format items.
pub fn squeue_long_items(spec: &str) -> (Vec<Item>, Vec<String>) {
    let code = |name: &str| {
        let lower = name.to_ascii_lowercase();
        let i = STEP_LONG.iter().position(|(n, _, _)| *n == lower)?;
        char::from_u32(STEP_LONG_BASE + i as u32)
    };
    crate::squeue::long_items(spec, code, "job step")
}

pub fn squeue_header(c: char) -> &'static str {
    if let Some((_, header, _)) = step_long(c) {
        return header;
    }
    match c {
        'i' => "STEPID",
        'j' => "NAME",
        'P' => "PARTITION",
        'u' => "USER",
        'U' => "UID",
        'M' => "TIME",
        'N' => "NODELIST",
        'l' => "TIME_LIMIT",
        'S' => "START_TIME",
        'A' => "TASKS",
        'b' => "TRES_PER_JOB",
        _ => "",
    }
}

pub fn squeue_field(r: &StepRow<'_>, c: char, now: i64) -> String {
    if let Some((name, _, code)) = step_long(c) {
        return match (code, *name) {
            (Some(code), _) => squeue_field(r, *code, now),
            (None, "cluster") => jobview::CLUSTER.get().cloned().unwrap_or_else(|| "(null)".into()),
            (None, "gres" | "tres-per-node") if r.id != BATCH_STEP => {
                jobview::tres_per_node(r.job).unwrap_or_else(|| "(null)".into())
            }
            (None, "arrayjobid") => {
                if r.job.array_job_id != 0 {
                    r.job.array_job_id.to_string()
                } else {
                    "0".into()
                }
            }
            (None, "arraytaskid") => r.job.array_task_id.map_or_else(|| "N/A".into(), |t| t.to_string()),
            (None, "jobid") => r.job.job_id.to_string(),
            (None, "numcpus") => r.cpus.to_string(),
            (None, "cpufreq") if r.id != BATCH_STEP => "Unknown-Unknown:Unknown".into(),
            (None, "cpufreq") => "0-0:0".into(),
            (None, "stepstate") => "RUNNING".into(),
            _ => "(null)".into(),
        };
    }
    match c {
        'i' => r.id_text(),
        'j' => r.name.clone(),
        'P' => r.job.partition.clone(),
        'u' => jobview::user(r.job),
        'U' => jobview::spec(r.job).uid.to_string(),
        'M' => fmt_short((now - r.start).max(0) as u64),
        'N' => r.nodelist(),
        'l' => fmt_limit_short(r.limit),
        'S' => common::fmt_time(r.start),
        'A' => r.tasks.to_string(),
        'b' => "(null)".into(),
        other => format!("%{other}"),
    }
}

/// Renders `squeue -s` for the steps `wanted` selects.
pub fn squeue_text(
    rows: &[StepRow<'_>],
    items: Vec<Item>,
    header: bool,
    long: bool,
    now: i64,
    wanted: impl Fn(&StepRow<'_>) -> bool,
) -> (String, Vec<String>) {
    let mut errors = Vec::new();
    let fixed: Vec<Item> = items
        .into_iter()
        .map(|it| match it {
            Item::Field { code, .. } if !squeue_code_ok(code) && step_long(code).is_none() => {
                errors.push(format!("Invalid job step format specification: {code}"));
                Item::Lit(format!("%{code}"))
            }
            it => it,
        })
        .collect();
    let mut out = String::new();
    if long && header {
        out.push_str(&common::fmt_header_date(now));
        out.push('\n');
    }
    if header {
        out.push_str(&format::render(&fixed, |c| squeue_header(c).to_string()));
        out.push('\n');
    }
    for r in rows.iter().filter(|r| wanted(r)) {
        out.push_str(&format::render(&fixed, |c| squeue_field(r, c, now)));
        out.push('\n');
    }
    (out, errors)
}

/// `scontrol show step` of one step (`-o`: on one line).
pub fn show_text(r: &StepRow<'_>, oneliner: bool) -> String {
    let s = jobview::spec(r.job);
    let tres = if r.id == BATCH_STEP {
        "(null)".to_string()
    } else {
        let mem: u64 =
            r.job.steps.iter().find(|x| x.step_id == r.id).map_or(0, |x| x.nodes.iter().map(|n| n.mem_mb).sum());
        // A step that holds no memory shows `mem=0`, without a unit.
        let mem = if mem == 0 { "0".into() } else { drover_model::memsize::fmt_tres_mb(mem) };
        format!("cpu={},mem={mem},node={}", r.cpus, r.nodes.len())
    };
    let srun = match &r.srun {
        Some((h, p)) => format!("{h}:{p}"),
        None => "(null):0".into(),
    };
    let mut freq = "CPUFreqReq=Default".to_string();
    if let Some(d) = r.dist {
        freq.push_str(&format!(" Dist={}", d.show_name()));
    }
    let lines = [
        format!(
            "StepId={} UserId={} StartTime={} TimeLimit={}",
            r.id_text(),
            s.uid,
            common::fmt_time(r.start),
            fmt_limit_long(r.limit)
        ),
        format!("State=RUNNING Partition={} NodeList={}", r.job.partition, r.nodelist()),
        format!("Nodes={} CPUs={} Tasks={} Name={} Network=(null)", r.nodes.len(), r.cpus, r.tasks, r.name),
        format!("TRES={tres}"),
        "ResvPorts=(null)".into(),
        freq,
        format!("SrunHost:Pid={srun}"),
    ];
    if oneliner {
        format!("{}\n", lines.join(" "))
    } else {
        format!("{}\n   {}\n\n", lines[0], lines[1..].join("\n   "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> v1::JobInfo {
        v1::JobInfo {
            job_id: 12,
            state: "RUNNING".into(),
            partition: "cpu".into(),
            start_time: 100,
            batch_host: "node1".into(),
            spec: Some(v1::JobSpec { batch: true, user: "root".into(), ..Default::default() }),
            steps: vec![v1::StepInfo {
                job_id: 12,
                step_id: 0,
                name: "sleep".into(),
                state: "RUNNING".into(),
                start_time: 100,
                nodes: vec![v1::StepNode {
                    node: "node1".into(),
                    cpu_ids: vec![0],
                    task_ids: vec![0],
                    ..Default::default()
                }],
                distribution: "cyclic".into(),
                srun_host: "vm".into(),
                srun_pid: 15704,
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn squeue_steps_print_like_slurm() {
        let jobs = [job()];
        let rows = rows(&jobs);
        let (text, errors) = squeue_text(&rows, format::parse(SQUEUE_DEFAULT), true, false, 101, |_| true);
        assert!(errors.is_empty());
        assert_eq!(
            text,
            "         STEPID     NAME PARTITION     USER      TIME NODELIST\n\
             \x20          12.0    sleep       cpu     root      0:01 node1\n\
             \x20      12.batch    batch       cpu     root      0:01 node1\n"
        );
        let (text, errors) = squeue_text(&rows, format::parse("%i %T"), true, false, 101, |r| r.id == 0);
        assert_eq!(errors, ["Invalid job step format specification: T"]);
        assert_eq!(text, "STEPID %T\n12.0 %T\n");
    }

    #[test]
    fn show_step_prints_like_slurm() {
        let jobs = [job()];
        let rows = rows(&jobs);
        let t = show_text(&rows[0], false);
        assert!(t.starts_with("StepId=12.0 UserId=0 StartTime="), "{t}");
        assert!(t.contains(" TimeLimit=UNLIMITED\n   State=RUNNING Partition=cpu NodeList=node1\n"), "{t}");
        assert!(t.ends_with(
            "   Nodes=1 CPUs=1 Tasks=1 Name=sleep Network=(null)\n   TRES=cpu=1,mem=0,node=1\n   ResvPorts=(null)\n   CPUFreqReq=Default Dist=Cyclic\n   SrunHost:Pid=vm:15704\n\n"
        ), "{t}");
        let b = show_text(&rows[1], true);
        assert!(b.contains("StepId=12.batch "), "{b}");
        assert!(b.ends_with("TRES=(null) ResvPorts=(null) CPUFreqReq=Default SrunHost:Pid=(null):0\n"), "{b}");
    }
}
