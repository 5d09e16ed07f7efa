//! `sstat`: live usage of running job steps, sampled on their nodes when asked (as Slurm's
//! sstat asks each slurmstepd), in Slurm 22.05's fields, widths and messages.

use crate::common::{self, status_msg};
use drover_proto::v1;

/// sstat's fields, as `--helpformat` lists them, with their default widths.
const FIELDS: &[(&str, usize)] = &[
    ("AveCPU", 10),
    ("AveCPUFreq", 10),
    ("AveDiskRead", 12),
    ("AveDiskWrite", 12),
    ("AvePages", 10),
    ("AveRSS", 10),
    ("AveVMSize", 10),
    ("ConsumedEnergy", 14),
    ("ConsumedEnergyRaw", 17),
    ("JobID", 12),
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
    ("MinCPU", 10),
    ("MinCPUNode", 10),
    ("MinCPUTask", 10),
    ("Nodelist", 20),
    ("NTasks", 8),
    ("Pids", 20),
    ("ReqCPUFreq", 13),
    ("ReqCPUFreqMin", 13),
    ("ReqCPUFreqMax", 13),
    ("ReqCPUFreqGov", 13),
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
];

const DEFAULT: &str = "JobID,MaxVMSize,MaxVMSizeNode,MaxVMSizeTask,AveVMSize,MaxRSS,MaxRSSNode,MaxRSSTask,AveRSS,\
MaxPages,MaxPagesNode,MaxPagesTask,AvePages,MinCPU,MinCPUNode,MinCPUTask,AveCPU,NTasks,AveCPUFreq,ReqCPUFreqMin,\
ReqCPUFreqMax,ReqCPUFreqGov,ConsumedEnergy,MaxDiskRead,MaxDiskReadNode,MaxDiskReadTask,AveDiskRead,MaxDiskWrite,\
MaxDiskWriteNode,MaxDiskWriteTask,AveDiskWrite,TRESUsageInAve,TRESUsageInMax,TRESUsageInMaxNode,TRESUsageInMaxTask,\
TRESUsageInMin,TRESUsageInMinNode,TRESUsageInMinTask,TRESUsageInTot,TRESUsageOutAve,TRESUsageOutMax,\
TRESUsageOutMaxNode,TRESUsageOutMaxTask,TRESUsageOutMin,TRESUsageOutMinNode,TRESUsageOutMinTask,TRESUsageOutTot";

const USAGE: &str = "Usage: sstat [options] -j <job(.stepid)>\n\
  -a, --allsteps      print all steps for the given job(s)\n\
  -e, --helpformat    print a list of fields for --format\n\
  -i, --pidformat     JobID,Nodelist,Pids\n\
  -j, --jobs          comma separated list of jobs (N, N.step, N.batch)\n\
  -n, --noheader      no header lines\n\
  -o, --format        comma separated list of fields (name%width)\n\
  -p, --parsable      '|' after every field\n\
  -P, --parsable2     '|' between fields\n";

/// A step's usage across its tasks, the way sstat sums it up.
pub(crate) struct Summary<'a> {
    pub(crate) id: String,
    pub(crate) tasks: &'a [v1::TaskUsage],
    pub(crate) units: MemUnits,
}

/// How memory sizes print (Slurm's `convert_num_unit2`, from bytes): `Exact` (the default:
/// to larger units while nothing is lost, halves kept: `2M`, `1.50M`, `64572K`), `No`
/// (`--noconvert`: bytes), or always one unit (`--units=M`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum MemUnits {
    #[default]
    Exact,
    No,
    /// 1 = K, 2 = M, 3 = G, 4 = T, 5 = P.
    To(u32),
}

impl MemUnits {
    /// `--units=X`'s unit, or Slurm's complaint.
    pub(crate) fn parse(s: &str) -> Result<MemUnits, String> {
        let c = s.chars().next().unwrap_or('\0');
        match "KMGTP".find(c.to_ascii_uppercase()) {
            Some(i) if c != '\0' => Ok(MemUnits::To(i as u32 + 1)),
            _ => Err(format!("Invalid unit type '{c}'. Possible options are 'KMGTP'")),
        }
    }
}

/// `bytes` as Slurm prints a memory size.
pub(crate) fn mem_text(bytes: f64, units: MemUnits) -> String {
    const UNIT: [&str; 6] = ["", "K", "M", "G", "T", "P"];
    if bytes as i64 == 0 {
        return "0".into();
    }
    let (mut num, mut unit) = (bytes, 0u32);
    match units {
        MemUnits::To(t) => {
            while unit < t {
                num /= 1024.0;
                unit += 1;
            }
        }
        MemUnits::No => {}
        MemUnits::Exact => {
            while num >= 1024.0 && (num as u64).is_multiple_of(512) {
                num /= 1024.0;
                unit += 1;
            }
        }
    }
    let u = UNIT.get(unit as usize).copied().unwrap_or("?");
    if (num as u64) as f64 == num {
        format!("{}{u}", num as u64)
    } else {
        format!("{num:.2}{u}")
    }
}

/// Slurm's elapsed time for CPU fields: `[D-]HH:MM:SS`.
fn cpu_time(secs: f64) -> String {
    drover_model::duration::fmt_long(secs.max(0.0).round() as u64)
}

impl Summary<'_> {
    /// The task with the largest (or smallest) value, and that value.
    fn pick<T: PartialOrd + Copy>(&self, f: impl Fn(&v1::TaskUsage) -> T, max: bool) -> Option<(&v1::TaskUsage, T)> {
        let mut best: Option<(&v1::TaskUsage, T)> = None;
        for t in self.tasks {
            let v = f(t);
            let better = match best {
                None => true,
                Some((_, b)) => (max && v > b) || (!max && v < b),
            };
            if better {
                best = Some((t, v));
            }
        }
        best
    }

    fn avg(&self, f: impl Fn(&v1::TaskUsage) -> f64) -> f64 {
        if self.tasks.is_empty() {
            0.0
        } else {
            self.tasks.iter().map(f).sum::<f64>() / self.tasks.len() as f64
        }
    }

    /// `cpu=..,energy=..,fs/disk=..,mem=..,pages=..,vmem=..` of TRESUsageIn*.
    fn tres_in(&self, kind: &str) -> String {
        type Get = fn(&v1::TaskUsage) -> f64;
        let fields: [(&str, Get); 4] = [
            ("cpu", |t| t.cpu_secs),
            ("fs/disk", |t| t.read_bytes as f64),
            ("mem", |t| t.max_rss_kb as f64),
            ("pages", |t| t.pages as f64),
        ];
        let vmem: Get = |t| t.max_vmsize_kb as f64;
        let fmt = |name: &str, v: f64| match name {
            "cpu" => cpu_time(v),
            "mem" | "vmem" => format!("{}K", v.round() as u64),
            _ => format!("{}", v.round() as u64),
        };
        let mut parts = Vec::new();
        for (name, get) in fields.iter().copied().chain(std::iter::once(("vmem", vmem))) {
            let v = match kind {
                "Ave" => Some(fmt(name, self.avg(get))),
                "Max" => self.pick(get, true).map(|(_, v)| fmt(name, v)),
                "Min" => self.pick(get, false).map(|(_, v)| fmt(name, v)),
                "Tot" => Some(fmt(name, self.tasks.iter().map(get).sum())),
                "MaxNode" => self.pick(get, true).map(|(t, _)| t.node.clone()),
                "MinNode" => self.pick(get, false).map(|(t, _)| t.node.clone()),
                // Slurm writes the task of the cpu entry as a time.
                "MaxTask" | "MinTask" => self.pick(get, kind == "MaxTask").map(|(t, _)| {
                    if name == "cpu" {
                        cpu_time(f64::from(t.task))
                    } else {
                        t.task.to_string()
                    }
                }),
                _ => None,
            };
            if let Some(v) = v {
                parts.push(format!("{name}={v}"));
            }
            if name == "cpu" && !kind.ends_with("Task") {
                // Energy is not measured: Slurm says 0 (or the node) for it.
                let e = if kind.ends_with("Node") {
                    self.tasks.first().map(|t| t.node.clone()).unwrap_or_default()
                } else {
                    "0".into()
                };
                parts.push(format!("energy={e}"));
            }
        }
        parts.join(",")
    }

    fn tres_out(&self, kind: &str) -> String {
        let get = |t: &v1::TaskUsage| t.write_bytes as f64;
        let disk = match kind {
            "Ave" => Some(format!("{}", self.avg(get).round() as u64)),
            "Max" => self.pick(get, true).map(|(_, v)| format!("{}", v as u64)),
            "Min" => self.pick(get, false).map(|(_, v)| format!("{}", v as u64)),
            "Tot" => Some(format!("{}", self.tasks.iter().map(|t| t.write_bytes).sum::<u64>())),
            "MaxNode" => self.pick(get, true).map(|(t, _)| t.node.clone()),
            "MinNode" => self.pick(get, false).map(|(t, _)| t.node.clone()),
            "MaxTask" => self.pick(get, true).map(|(t, _)| t.task.to_string()),
            "MinTask" => self.pick(get, false).map(|(t, _)| t.task.to_string()),
            _ => None,
        };
        let mut parts = Vec::new();
        if !kind.ends_with("Task") {
            let e = if kind.ends_with("Node") {
                self.tasks.first().map(|t| t.node.clone()).unwrap_or_default()
            } else {
                "0".into()
            };
            parts.push(format!("energy={e}"));
        }
        if let Some(d) = disk {
            parts.push(format!("fs/disk={d}"));
        }
        parts.join(",")
    }

    pub(crate) fn field(&self, name: &str) -> String {
        let kb = |v: f64| mem_text(v.round() * 1024.0, self.units);
        let node = |p: Option<(&v1::TaskUsage, f64)>| p.map(|(t, _)| t.node.clone()).unwrap_or_default();
        let task = |p: Option<(&v1::TaskUsage, f64)>| p.map(|(t, _)| t.task.to_string()).unwrap_or_default();
        let val = |p: Option<(&v1::TaskUsage, f64)>| p.map(|(_, v)| v).unwrap_or(0.0);
        let vm = |t: &v1::TaskUsage| t.max_vmsize_kb as f64;
        let rss = |t: &v1::TaskUsage| t.max_rss_kb as f64;
        let pages = |t: &v1::TaskUsage| t.pages as f64;
        let cpu = |t: &v1::TaskUsage| t.cpu_secs;
        let rd = |t: &v1::TaskUsage| t.read_bytes as f64;
        let wr = |t: &v1::TaskUsage| t.write_bytes as f64;
        match name.to_ascii_lowercase().as_str() {
            "jobid" => self.id.clone(),
            "maxvmsize" => kb(val(self.pick(vm, true))),
            "maxvmsizenode" => node(self.pick(vm, true)),
            "maxvmsizetask" => task(self.pick(vm, true)),
            "avevmsize" => kb(self.avg(vm)),
            "maxrss" => kb(val(self.pick(rss, true))),
            "maxrssnode" => node(self.pick(rss, true)),
            "maxrsstask" => task(self.pick(rss, true)),
            "averss" => kb(self.avg(rss)),
            "maxpages" => format!("{}", val(self.pick(pages, true)) as u64),
            "maxpagesnode" => node(self.pick(pages, true)),
            "maxpagestask" => task(self.pick(pages, true)),
            "avepages" => format!("{}", self.avg(pages).round() as u64),
            "mincpu" => cpu_time(val(self.pick(cpu, false))),
            "mincpunode" => node(self.pick(cpu, false)),
            "mincputask" => task(self.pick(cpu, false)),
            "avecpu" => cpu_time(self.avg(cpu)),
            "ntasks" => self.tasks.len().to_string(),
            "avecpufreq" | "consumedenergy" | "consumedenergyraw" => "0".into(),
            "reqcpufreq" | "reqcpufreqmin" | "reqcpufreqmax" | "reqcpufreqgov" => "Unknown".into(),
            "maxdiskread" => format!("{}", val(self.pick(rd, true)) as u64),
            "maxdiskreadnode" => node(self.pick(rd, true)),
            "maxdiskreadtask" => task(self.pick(rd, true)),
            "avediskread" => format!("{}", self.avg(rd).round() as u64),
            "maxdiskwrite" => format!("{}", val(self.pick(wr, true)) as u64),
            "maxdiskwritenode" => node(self.pick(wr, true)),
            "maxdiskwritetask" => task(self.pick(wr, true)),
            "avediskwrite" => format!("{}", self.avg(wr).round() as u64),
            "nodelist" => {
                let mut nodes: Vec<String> = self.tasks.iter().map(|t| t.node.clone()).collect();
                nodes.dedup();
                drover_model::hostlist::Hostlist::from_iter(&nodes).ranged()
            }
            "pids" => self.tasks.iter().flat_map(|t| t.pids.iter().map(u32::to_string)).collect::<Vec<_>>().join(","),
            other => {
                let (dir, kind) = if let Some(k) = other.strip_prefix("tresusagein") {
                    ("in", k)
                } else if let Some(k) = other.strip_prefix("tresusageout") {
                    ("out", k)
                } else {
                    return String::new();
                };
                let kind = match kind {
                    "ave" => "Ave",
                    "max" => "Max",
                    "min" => "Min",
                    "tot" => "Tot",
                    "maxnode" => "MaxNode",
                    "minnode" => "MinNode",
                    "maxtask" => "MaxTask",
                    "mintask" => "MinTask",
                    _ => return String::new(),
                };
                if dir == "in" {
                    self.tres_in(kind)
                } else {
                    self.tres_out(kind)
                }
            }
        }
    }
}

/// `--format` items: a known field name (any case) and its width.
fn columns(spec: &str) -> Result<Vec<(&'static str, usize)>, String> {
    spec.split(',')
        .filter(|f| !f.is_empty())
        .map(|f| {
            let (name, width) = f.split_once('%').unwrap_or((f, ""));
            let (canon, w) = FIELDS
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .ok_or_else(|| format!("Invalid field requested: \"{name}\""))?;
            Ok((*canon, width.parse().unwrap_or(*w)))
        })
        .collect()
}

/// Slurm's column: JobID to the left, the rest to the right, `+` marking a cut.
fn cell(name: &str, v: &str, width: usize) -> String {
    crate::format::slurm_cell(v, width, name == "JobID", true)
}

fn helpformat() {
    let mut out = String::new();
    for (i, (n, _)) in FIELDS.iter().enumerate() {
        out.push_str(&format!("{n:<19} "));
        if i % 4 == 3 {
            out.push('\n');
        }
    }
    if !FIELDS.len().is_multiple_of(4) {
        out.push('\n');
    }
    print!("{out}");
}

pub fn main(args: Vec<String>) -> i32 {
    let mut jobs: Vec<String> = Vec::new();
    let mut all = false;
    let mut header = true;
    let mut parsable: Option<bool> = None;
    let mut format = DEFAULT.to_string();
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (a.clone(), None),
        };
        let mut value = |what: &str| -> Result<String, i32> {
            if let Some(v) = inline.clone() {
                return Ok(v);
            }
            if flag.len() > 2 && !flag.starts_with("--") {
                return Ok(flag[2..].to_string());
            }
            it.next().ok_or_else(|| {
                eprintln!("sstat: option requires an argument -- '{what}'");
                eprintln!("{USAGE}");
                1
            })
        };
        let short = if flag.starts_with("--") { flag.as_str() } else { &flag[..flag.len().min(2)] };
        let r = match short {
            "-j" | "--jobs" => value("j").map(|v| jobs.extend(v.split(',').map(String::from))),
            "-a" | "--allsteps" => {
                all = true;
                Ok(())
            }
            "-n" | "--noheader" => {
                header = false;
                Ok(())
            }
            "-p" | "--parsable" => {
                parsable = Some(true);
                Ok(())
            }
            "-P" | "--parsable2" => {
                parsable = Some(false);
                Ok(())
            }
            "-o" | "--format" | "--fields" => value("o").map(|v| format = v),
            "-i" | "--pidformat" => {
                format = "JobID,Nodelist,Pids".into();
                Ok(())
            }
            "-e" | "--helpformat" => {
                helpformat();
                return 0;
            }
            "-h" | "--help" => return crate::help::print("sstat", false),
            "--usage" => return crate::help::print("sstat", true),
            "-V" | "--version" => {
                crate::common::print_version();
                return 0;
            }
            _ if !a.starts_with('-') => {
                jobs.push(a.clone());
                Ok(())
            }
            _ => {
                eprintln!("sstat: unrecognized option '{a}'");
                eprintln!("Try \"sstat --help\" for more information");
                return 1;
            }
        };
        if let Err(code) = r {
            return code;
        }
    }
    if jobs.is_empty() {
        eprintln!("sstat: error: You didn't give me any jobs to stat.");
        return 1;
    }
    let cols = match columns(&format) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sstat: error: {e}");
            return 1;
        }
    };
    let cfg = match common::config_for("sstat") {
        Ok(c) => c,
        Err(code) => return code,
    };
    let line = |vals: Vec<(&str, String, usize)>| -> String {
        match parsable {
            Some(trailing) => {
                let mut s = vals.into_iter().map(|(_, v, _)| v).collect::<Vec<_>>().join("|");
                if trailing {
                    s.push('|');
                }
                s
            }
            None => vals.into_iter().map(|(n, v, w)| cell(n, &v, w) + " ").collect::<String>(),
        }
    };
    if header {
        println!("{}", line(cols.iter().map(|(n, w)| (*n, n.to_string(), *w)).collect()));
        if parsable.is_none() {
            println!("{}", cols.iter().map(|(_, w)| "-".repeat(*w) + " ").collect::<String>());
        }
    }
    common::runtime().block_on(async move {
        let mut client = match common::connect_or_exit(&cfg, "sstat").await {
            Ok(c) => c,
            Err(code) => return code,
        };
        for j in &jobs {
            let (id, step) = j.split_once('.').map_or((j.as_str(), None), |(a, b)| (a, Some(b)));
            let Ok(job_id) = id.parse::<u32>() else {
                eprintln!("sstat: error: Invalid job id: {j}");
                return 1;
            };
            let mut req = v1::StepStatRequest { job_id, all_steps: all, ..Default::default() };
            match step {
                Some("batch") => req.batch = true,
                Some(s) => match drover_model::step::parse_step(s).ok_or(()) {
                    Ok(n) => req.step_id = Some(n),
                    Err(_) => {
                        eprintln!("sstat: error: Invalid job id: {j}");
                        return 1;
                    }
                },
                None => {}
            }
            let reply = match client.step_stat(req).await {
                Ok(r) => r.into_inner(),
                Err(s) if s.code() == tonic::Code::NotFound => {
                    eprintln!("sstat: error: couldn't get steps for job {job_id}");
                    continue;
                }
                Err(s) => {
                    eprintln!("sstat: error: {}", status_msg(&s));
                    return 1;
                }
            };
            if reply.steps.is_empty() {
                match step {
                    Some(s) => eprintln!("sstat: error: StepId={job_id}.{s} not found running."),
                    None => eprintln!("sstat: error: No steps running for job {job_id}"),
                }
                continue;
            }
            for s in &reply.steps {
                let sum = Summary { id: format!("{job_id}.{}", s.step), tasks: &s.tasks, units: MemUnits::Exact };
                println!("{}", line(cols.iter().map(|(n, w)| (*n, sum.field(n), *w)).collect()));
            }
        }
        0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(task: u32, rss: u64, cpu: f64) -> v1::TaskUsage {
        v1::TaskUsage {
            task,
            node: "node1".into(),
            max_rss_kb: rss,
            max_vmsize_kb: 67772,
            pages: u64::from(task) * 12,
            cpu_secs: cpu,
            read_bytes: 1_685_831,
            write_bytes: 1690,
            pids: vec![7511 + task],
            user_secs: cpu * 0.75,
            sys_secs: cpu * 0.25,
        }
    }

    /// Real sstat's line for a two-task step on the lab (`40.0`, `-P`).
    #[test]
    fn a_two_task_step_reads_as_slurm_printed_it() {
        let tasks = [task(0, 64560, 3.2), task(1, 64572, 3.4)];
        let s = Summary { id: "40.0".into(), tasks: &tasks, units: MemUnits::Exact };
        let got: Vec<String> = [
            "JobID",
            "MaxRSS",
            "AveCPU",
            "NTasks",
            "MaxRSSNode",
            "MaxRSSTask",
            "AveRSS",
            "MinCPU",
            "MaxVMSize",
            "AvePages",
            "Pids",
            "Nodelist",
        ]
        .iter()
        .map(|f| s.field(f))
        .collect();
        assert_eq!(got.join("|"), "40.0|64572K|00:00:03|2|node1|1|64566K|00:00:03|67772K|6|7511,7512|node1");
        assert_eq!(s.field("TRESUsageOutTot"), "energy=0,fs/disk=3380");
        assert!(s.field("TRESUsageInAve").starts_with("cpu=00:00:03,energy=0,fs/disk=1685831,mem=64566K,pages=6"));
    }

    #[test]
    fn memory_converts_as_slurms_convert_num_unit() {
        let kb = |k: f64| k * 1024.0;
        assert_eq!(mem_text(kb(64572.0), MemUnits::Exact), "64572K");
        assert_eq!(mem_text(kb(2048.0), MemUnits::Exact), "2M");
        assert_eq!(mem_text(kb(1536.0), MemUnits::Exact), "1.50M");
        assert_eq!(mem_text(0.0, MemUnits::Exact), "0");
        assert_eq!(mem_text(kb(64572.0), MemUnits::To(2)), "63.06M");
        assert_eq!(mem_text(kb(3.0), MemUnits::To(1)), "3K");
        assert_eq!(mem_text(kb(2.0), MemUnits::No), "2048");
        assert_eq!(MemUnits::parse("g"), Ok(MemUnits::To(3)));
        assert_eq!(MemUnits::parse("x").unwrap_err(), "Invalid unit type 'x'. Possible options are 'KMGTP'");
    }

    #[test]
    fn columns_and_cells() {
        assert_eq!(columns("jobid,maxrss%20").unwrap(), [("JobID", 12), ("MaxRSS", 20)]);
        assert_eq!(columns("foo").unwrap_err(), "Invalid field requested: \"foo\"");
        assert_eq!(cell("JobID", "41.0", 12), "41.0        ");
        assert_eq!(cell("TRESUsageInAve", "cpu=00:00:03,energy=0", 14), "cpu=00:00:03,+");
        assert_eq!(cpu_time(90061.0), "1-01:01:01");
    }
}
