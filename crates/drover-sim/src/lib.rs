//! `drover sim`: replays a workload trace through the real scheduler core (`drover-sched`)
//! under virtual time, and reports how well and how fast it scheduled.
//!
//! ```text
//!  TRACE.swf[.gz] ──swf::parse──► jobs (submit, run, procs, estimate)
//!  cluster (--procs | --nodes/--cpus-per-node | --config) ──► Core (NodeDefined, PartitionDefined)
//!  event loop: submits and ends at time t ──Event──► Core ──schedule(t)──► Start ──► end at t+run
//!  ──► Summary (utilization, waits, bounded slowdowns, makespan, scheduler CPU) and per-job rows
//! ```
//!
//! Deterministic: the same trace, cluster and policy give the same schedule and the same
//! output (but `sched_cpu_s`, a measurement, which `--no-timing` zeroes).

pub mod acct;
pub mod swf;

use drover_model::duration::TimeLimit;
use drover_sched::{Core, Decision, Event, NodeRes, Outcome, PartitionRes, SchedConfig, SchedJob};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

pub use swf::{parse, TraceJob};

pub mod chart;
pub mod cli;

/// The machine a trace is replayed on: its nodes' CPU counts, and the `slurm.conf` it is
/// (`None`: nodes `n1`, `n2`, ... in one partition, `sim`).
#[derive(Debug, Clone)]
pub struct Machine {
    pub cpus: Vec<u32>,
    pub conf: Option<std::sync::Arc<drover_model::conf::Config>>,
    /// The site's accounts, users and QoS (from its accounting), for the multifactor
    /// priority of jobs read from accounting.
    pub admin: Option<std::sync::Arc<drover_proto::v1::AdminState>>,
}

impl Machine {
    pub fn uniform(nodes: u32, cpus_per_node: u32) -> Machine {
        Machine { cpus: vec![cpus_per_node; nodes as usize], conf: None, admin: None }
    }

    /// A site's machine: its `slurm.conf`'s nodes (CPUs, memory, GRES, features, weights)
    /// and partitions (nodes, limits, state), and its scheduling parameters (`gres` is the
    /// `gres.conf` beside it, where there is one).
    pub fn of_conf(cfg: drover_model::conf::Config) -> Machine {
        Machine { cpus: cfg.nodes.iter().map(|n| n.cpus).collect(), conf: Some(std::sync::Arc::new(cfg)), admin: None }
    }

    /// The partition a trace's job (which names none) runs in.
    fn partition(&self) -> String {
        self.conf
            .as_ref()
            .and_then(|c| c.default_partition().or(c.partitions.first()).map(|p| p.name.clone()))
            .unwrap_or_else(|| "sim".into())
    }
    pub fn procs(&self) -> u64 {
        self.cpus.iter().map(|&c| u64::from(c)).sum()
    }
    /// The most processors one job can have (a job may span nodes).
    pub fn nodes(&self) -> usize {
        self.cpus.len()
    }
}

/// One simulated job's fate.
#[derive(Debug, Clone, PartialEq)]
pub struct JobRow {
    pub id: u32,
    pub submit: i64,
    pub start: i64,
    pub end: i64,
    pub procs: u32,
    pub run: i64,
    /// The nodes it ran on (`n1`, `n2`, ... in the machine's order), as a Slurm hostlist.
    pub nodes: String,
}

impl JobRow {
    pub fn wait(&self) -> i64 {
        self.start - self.submit
    }
    /// Bounded slowdown with Feitelson's 10-second threshold.
    pub fn bsld(&self) -> f64 {
        ((self.wait() + self.run) as f64 / (self.run.max(10) as f64)).max(1.0)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub jobs: usize,
    pub utilization: f64,
    pub mean_wait_s: f64,
    pub p95_wait_s: f64,
    pub p99_wait_s: f64,
    pub max_wait_s: i64,
    pub mean_bsld: f64,
    pub p95_bsld: f64,
    pub makespan_s: i64,
    pub sched_cpu_s: f64,
    pub passes: u64,
}

/// The `q` quantile (nearest rank).
fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let k = ((v.len() as f64) * q).ceil() as usize;
    v[k.clamp(1, v.len()) - 1]
}

impl Summary {
    pub fn of(rows: &[JobRow], machine: &Machine, sched_cpu_s: f64, passes: u64) -> Summary {
        let n = rows.len().max(1) as f64;
        let first = rows.iter().map(|r| r.submit).min().unwrap_or(0);
        let last = rows.iter().map(|r| r.end).max().unwrap_or(0);
        let makespan = (last - first).max(0);
        let work: f64 = rows.iter().map(|r| r.run as f64 * f64::from(r.procs)).sum();
        let waits: Vec<f64> = rows.iter().map(|r| r.wait() as f64).collect();
        let bslds: Vec<f64> = rows.iter().map(JobRow::bsld).collect();
        Summary {
            jobs: rows.len(),
            utilization: if makespan > 0 { work / (machine.procs() as f64 * makespan as f64) } else { 0.0 },
            mean_wait_s: waits.iter().sum::<f64>() / n,
            p95_wait_s: quantile(&waits, 0.95),
            p99_wait_s: quantile(&waits, 0.99),
            max_wait_s: rows.iter().map(JobRow::wait).max().unwrap_or(0),
            mean_bsld: bslds.iter().sum::<f64>() / n,
            p95_bsld: quantile(&bslds, 0.95),
            makespan_s: makespan,
            sched_cpu_s,
            passes,
        }
    }

    pub fn json(&self, policy: &str, machine: &Machine) -> serde_json::Value {
        serde_json::json!({
            "policy": policy,
            "procs": machine.procs(),
            "nodes": machine.nodes(),
            "jobs": self.jobs,
            "utilization": round(self.utilization, 6),
            "mean_wait_s": round(self.mean_wait_s, 3),
            "p95_wait_s": self.p95_wait_s,
            "p99_wait_s": self.p99_wait_s,
            "max_wait_s": self.max_wait_s,
            "mean_bsld": round(self.mean_bsld, 6),
            "p95_bsld": round(self.p95_bsld, 6),
            "makespan_s": self.makespan_s,
            "sched_cpu_s": round(self.sched_cpu_s, 3),
            "passes": self.passes,
        })
    }
}

fn round(x: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (x * f).round() / f
}

/// The jobs of a trace that this machine can run, by the archive's rules: processors are the
/// allocated count (else the requested), jobs with a negative run time, no processors or more
/// than the machine has are dropped, and the estimate is max(requested time, run time).
pub fn usable(jobs: &[TraceJob], machine: &Machine) -> Vec<TraceJob> {
    jobs.iter().filter(|j| j.run >= 0 && j.procs > 0 && u64::from(j.procs) <= machine.procs()).cloned().collect()
}

/// The scheduler configuration a replay runs under: `policy` (as `bf_policy` names it) with
/// the test depth and window of a planner that sees the whole trace, planning at every event.
pub fn config(policy: SchedConfig) -> SchedConfig {
    SchedConfig { max_job_test: 500, window: i64::MAX / 4, interval: 0, forecast: false, ..policy }
}

fn cluster(machine: &Machine, cfg: SchedConfig) -> Core {
    let mut core = Core::new();
    if let Some(conf) = &machine.conf {
        let gres = std::path::Path::new(&conf.path)
            .parent()
            .and_then(|d| std::fs::read_to_string(d.join("gres.conf")).ok())
            .and_then(|t| drover_model::gres::GresConf::parse(&t).ok());
        for ev in drover_sched::conf::events(conf, gres.as_ref()) {
            let ev = match ev {
                // The policy asked for, with the site's depth, window and per-user limits;
                // planning at every event, as every replay does.
                Event::Configure(site) => Event::Configure(SchedConfig {
                    max_job_test: site.max_job_test,
                    window: site.window,
                    max_job_user: site.max_job_user,
                    min_age_reserve: site.min_age_reserve,
                    preempt_exempt: site.preempt_exempt,
                    interval: 0,
                    forecast: false,
                    ..cfg
                }),
                ev => ev,
            };
            core.handle(ev);
        }
        for n in &conf.nodes {
            core.handle(Event::NodeSchedulable { node: n.name.clone(), schedulable: true });
        }
        return core;
    }
    let mut names = Vec::new();
    for (i, &cpus) in machine.cpus.iter().enumerate() {
        let name = format!("n{}", i + 1);
        core.handle(Event::NodeDefined(NodeRes::new(&name, cpus, 0, Vec::new(), 1)));
        core.handle(Event::NodeSchedulable { node: name.clone(), schedulable: true });
        names.push(name);
    }
    core.handle(Event::PartitionDefined(PartitionRes::open("sim", names)));
    core.handle(Event::Configure(config(cfg)));
    core
}

/// Job `k` of the replay under id `id`: a trace's asks for its processors in `partition`;
/// one read from accounting is its whole request, as the controller hands it to the
/// scheduler (its dependencies on jobs outside the replay dropped).
fn sched_job(
    k: usize,
    id: u32,
    j: &TraceJob,
    partition: &str,
    ids: &HashMap<u32, usize>,
    priority: Option<u32>,
) -> SchedJob {
    // The multifactor priority where it is replayed, else submit order (the trace's order;
    // ties by line).
    let priority = u64::from(priority.unwrap_or(u32::MAX - k as u32));
    if let Some(spec) = &j.request {
        let mut intern = |s: &str| std::sync::Arc::<str>::from(s);
        let mut sj = drover_sched::request::sched_job(id, spec, priority, j.submit, None, None, &mut intern);
        if sj.partitions.is_empty() {
            sj.partitions = vec![partition.into()];
        }
        if sj.more.is_some() {
            sj.more_mut()
                .dependency
                .list
                .retain(|d| d.kind == drover_model::job::DependencyKind::Singleton || ids.contains_key(&d.job));
        }
        return sj;
    }
    let limit: TimeLimit = Some(j.estimate.max(0) as u64);
    SchedJob {
        id,
        priority,
        partitions: vec![partition.into()],
        min_nodes: 1,
        max_nodes: None,
        ntasks: j.procs,
        cpus_per_task: 1,
        mem_per_node_mb: None,
        mem_per_cpu_mb: None,
        time_limit: Some(limit),
        exclusive: false,
        hold: None,
        uid: j.user,
        queued: j.submit,
        more: None,
    }
}

/// Replays `jobs` (already filtered by [`usable`]) and returns each job's row, in trace
/// order, the number of scheduling passes and the CPU seconds they took. `progress` is called
/// with the fraction of jobs started so far.
pub fn run(
    jobs: &[TraceJob],
    machine: &Machine,
    cfg: SchedConfig,
    timing: bool,
    progress: &mut dyn FnMut(f64),
) -> (Vec<JobRow>, u64, f64) {
    let mut core = cluster(machine, cfg);
    let partition = machine.partition();
    // Jobs read from accounting keep their ids (their dependencies name them); a trace's
    // are numbered from 1 in its order.
    let id_of = |k: usize| match &jobs[k].request {
        Some(_) => jobs[k].id,
        None => k as u32 + 1,
    };
    let ids: HashMap<u32, usize> = (0..jobs.len()).map(|k| (id_of(k), k)).collect();
    // For jobs read from accounting on a site's slurm.conf, the controller's policy: its
    // multifactor priority (recomputed every PriorityCalcPeriod, and for the waiting jobs of
    // the associations whose fairshare a job's end moved) and accounting's limits.
    use drover_controller::replay::{Preemption, Site};
    let mut site = machine
        .conf
        .as_ref()
        .filter(|_| jobs.iter().any(|j| j.request.is_some()))
        .map(|c| Site::new(c, machine.admin.as_deref().cloned()));
    if let Some(ev) = site.as_mut().and_then(Site::limits) {
        core.handle(ev);
    }
    let minutes_limits = site.as_ref().is_some_and(Site::minutes_limits);
    let mut next_calc = i64::MIN;
    // Waiting jobs read from accounting, by association.
    let mut waiting: std::collections::BTreeMap<(String, String), std::collections::BTreeSet<usize>> =
        Default::default();
    let sched = |site: &Option<Site>, k: usize, t: i64| -> SchedJob {
        let Some((s, spec)) = site.as_ref().zip(jobs[k].request.as_ref()) else {
            return sched_job(k, id_of(k), &jobs[k], &partition, &ids, None);
        };
        let mut sj = sched_job(k, id_of(k), &jobs[k], &partition, &ids, s.priority(spec, jobs[k].submit, t));
        s.apply_limits(&mut sj, spec);
        s.apply_preempt(&mut sj, spec);
        if let Some(conf) = &machine.conf {
            drover_sched::conf::apply_tier(conf, &mut sj);
        }
        sj
    };
    // (time, kind: 0 = end before 1 = submit before 2 = a pass the core asked for, index):
    // ends free resources before submits at the same second are considered.
    let mut events: BinaryHeap<Reverse<(i64, u8, usize)>> = BinaryHeap::new();
    for (k, j) in jobs.iter().enumerate() {
        events.push(Reverse((j.submit, 1, k)));
    }
    let mut rows: Vec<Option<JobRow>> = vec![None; jobs.len()];
    // Each running job's expected end (an end event at another time is stale: the job was
    // preempted, or suspended and resumed); preempted jobs' grace deadlines; suspended jobs'
    // suspension and the end they had then.
    let mut end_at: Vec<i64> = vec![i64::MIN; jobs.len()];
    let mut preempting: HashMap<usize, i64> = HashMap::new();
    let mut suspended: HashMap<usize, (i64, i64)> = HashMap::new();
    let mut started = 0usize;
    let mut wakes = std::collections::BTreeSet::new();
    let (mut passes, mut cpu) = (0u64, std::time::Duration::ZERO);
    let mut no_ids = || unreachable_id();
    while let Some(&Reverse((t, _, _))) = events.peek() {
        if let Some(p) = site.as_mut().filter(|s| s.multifactor() && t >= next_calc) {
            p.calc(t);
            let first = next_calc == i64::MIN;
            next_calc = t + p.calc_period();
            if !first {
                for &k in waiting.values().flatten() {
                    core.handle(Event::Updated(sched(&site, k, t)));
                }
            }
        }
        while let Some(&Reverse((et, kind, k))) = events.peek() {
            if et != t {
                break;
            }
            events.pop();
            if kind == 2 {
                // (A wake has no job: its index is usize::MAX.)
                wakes.remove(&et);
            } else if kind == 0 {
                let id = id_of(k);
                let preempted = preempting.get(&k) == Some(&et);
                if !preempted && end_at[k] != et {
                    continue;
                }
                end_at[k] = i64::MIN;
                preempting.remove(&k);
                let ran = rows[k].as_ref().map_or(0, |r| et - r.start);
                // Preempted: requeued (waits again, to run its whole recorded time) or ended.
                let requeue = preempted
                    && site.as_ref().zip(jobs[k].request.as_ref()).is_some_and(|(s, spec)| {
                        let run_in = spec.partitions.first().map_or(partition.as_str(), String::as_str);
                        matches!(s.preemption(spec, run_in), Preemption::End { requeue: true, .. })
                    });
                core.handle(Event::Ended {
                    job: id,
                    outcome: if preempted { Outcome::Failed } else { Outcome::Succeeded },
                });
                core.handle(Event::Forgotten(id));
                if preempted {
                    if let Some(r) = rows[k].as_mut() {
                        (r.end, r.run) = (et, ran);
                    }
                } else {
                    // What a live controller learns from accounting as each job ends.
                    core.handle(Event::Ran { uid: jobs[k].user, seconds: jobs[k].run });
                }
                if requeue {
                    rows[k] = None;
                    started -= 1;
                    if let Some(spec) = jobs[k].request.as_ref() {
                        waiting.entry(Site::assoc_of(spec)).or_default().insert(k);
                    }
                    core.handle(Event::Submitted(sched(&site, k, t)));
                }
                if let (Some(p), Some(spec)) = (site.as_mut(), jobs[k].request.as_ref()) {
                    let asked = sched_job(k, id_of(k), &jobs[k], &partition, &ids, None);
                    p.ended(spec, &asked, ran);
                    let moved = p.refresh();
                    // Usage moved: with GrpTRESMins any waiting job may be held or freed.
                    let concerned: Vec<usize> = if minutes_limits {
                        waiting.values().flatten().copied().collect()
                    } else {
                        moved.iter().filter_map(|a| waiting.get(a)).flatten().copied().collect()
                    };
                    for w in concerned {
                        core.handle(Event::Updated(sched(&site, w, t)));
                    }
                }
            } else {
                if let (Some(_), Some(spec)) = (site.as_ref(), jobs[k].request.as_ref()) {
                    waiting.entry(Site::assoc_of(spec)).or_default().insert(k);
                }
                core.handle(Event::Submitted(sched(&site, k, t)));
            }
        }
        let t0 = timing.then(std::time::Instant::now);
        let decisions = core.schedule(t, &mut no_ids);
        if let Some(t0) = t0 {
            cpu += t0.elapsed();
        }
        passes += 1;
        // A pass the core asked for with no event (a prediction running out).
        if let Some(w) = core.wake_at().filter(|&w| w > t && wakes.insert(w)) {
            events.push(Reverse((w, 2, usize::MAX)));
        }
        for d in decisions {
            if let Decision::Preempt { job, .. } = d {
                let Some(&k) = ids.get(&job) else { continue };
                let (Some(s), Some(spec)) = (site.as_ref(), jobs[k].request.as_ref()) else { continue };
                if end_at[k] == i64::MIN || preempting.contains_key(&k) || suspended.contains_key(&k) {
                    continue;
                }
                let run_in = spec.partitions.first().map_or(partition.as_str(), String::as_str);
                match s.preemption(spec, run_in) {
                    Preemption::Suspend => {
                        // Its resources lent to the preempting job until the core resumes it.
                        suspended.insert(k, (t, end_at[k]));
                        end_at[k] = i64::MAX;
                        core.handle(Event::Suspended { job, alloc: None });
                    }
                    Preemption::End { grace, .. } => {
                        let deadline = t + grace.max(0);
                        preempting.insert(k, deadline);
                        core.handle(Event::Preempting { job, end: deadline });
                        events.push(Reverse((deadline, 0, k)));
                    }
                }
                continue;
            }
            if let Decision::Resume { job } = d {
                let Some(&k) = ids.get(&job) else { continue };
                if let Some((since, end)) = suspended.remove(&k) {
                    // It ends as much later as it was suspended.
                    end_at[k] = end + (t - since);
                    if let Some(r) = rows[k].as_mut() {
                        r.end = end_at[k];
                    }
                    events.push(Reverse((end_at[k], 0, k)));
                }
                continue;
            }
            if let Decision::Start { job, alloc, .. } = d {
                let Some(&k) = ids.get(&job) else { continue };
                if let Some(spec) = jobs[k].request.as_ref().filter(|_| site.is_some()) {
                    if let Some(w) = waiting.get_mut(&Site::assoc_of(spec)) {
                        w.remove(&k);
                    }
                }
                let j = &jobs[k];
                let mut nodes = drover_model::hostlist::Hostlist::new();
                for n in &alloc.nodes {
                    nodes.push_host(&n.node);
                }
                let nodes = nodes.ranged();
                rows[k] = Some(JobRow {
                    id: j.id,
                    submit: j.submit,
                    start: t,
                    end: t + j.run,
                    procs: j.procs,
                    run: j.run,
                    nodes,
                });
                end_at[k] = t + j.run;
                events.push(Reverse((t + j.run, 0, k)));
                started += 1;
                if started.is_multiple_of(1000) {
                    progress(started as f64 / jobs.len() as f64);
                }
            }
        }
    }
    (rows.into_iter().flatten().collect(), passes, cpu.as_secs_f64())
}

fn unreachable_id() -> u32 {
    // Traces have no arrays: the core never starts a task apart from its job.
    u32::MAX
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(p: &str) -> SchedConfig {
        SchedConfig::named(p).expect("a policy")
    }

    fn job(id: u32, submit: i64, run: i64, procs: u32, estimate: i64) -> TraceJob {
        TraceJob { id, submit, run, procs, estimate, user: 1, request: None }
    }

    #[test]
    fn fcfs_keeps_order_and_easy_backfills() {
        let m = Machine::uniform(1, 4);
        // A long 3-cpu job, then a 4-cpu job that must wait, then a short 1-cpu job.
        let jobs = [job(1, 0, 100, 3, 100), job(2, 1, 10, 4, 10), job(3, 2, 5, 1, 5)];
        let (fcfs, _, _) = run(&jobs, &m, named("fcfs"), false, &mut |_| {});
        assert_eq!(fcfs.iter().map(|r| r.start).collect::<Vec<_>>(), [0, 100, 110]);
        let (easy, _, _) = run(&jobs, &m, named("easy"), false, &mut |_| {});
        assert_eq!(easy.iter().map(|r| r.start).collect::<Vec<_>>(), [0, 100, 2]);
        let s = Summary::of(&easy, &m, 0.0, 0);
        assert_eq!(s.jobs, 3);
        assert_eq!(s.max_wait_s, 99);
        assert_eq!(s.makespan_s, 110);
    }

    #[test]
    fn bounded_slowdown_uses_a_ten_second_floor() {
        let r = JobRow { id: 1, submit: 0, start: 20, end: 21, procs: 1, run: 1, nodes: "n1".into() };
        assert_eq!(r.bsld(), 2.1);
        let r = JobRow { id: 1, submit: 0, start: 0, end: 100, procs: 1, run: 100, nodes: "n1".into() };
        assert_eq!(r.bsld(), 1.0);
    }
}
