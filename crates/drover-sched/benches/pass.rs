//! One full scheduling pass (priority order, backfill plan, placement) on a large queue:
//! `cargo bench -p drover-sched --bench pass [-- --quick | --medium]` (`POLICY=` one policy:
//! fcfs, easy, conservative or predictive (Drover's default, with 200 users' run-time
//! histories); `RUNS=`
//! passes, `DEPTH=` bf_max_job_test). Prints the median of several passes, each on a
//! fresh copy of the same state (a busy cluster with every pending job marked changed).
//!
//! Targets (issue 3): 10,000 pending on 1,000 nodes <= 10 ms; 100,000 on 10,000 nodes <= 200 ms.

use drover_sched::{Core, Event, NodeRes, PartitionRes, SchedConfig, SchedJob};
use std::time::Instant;

/// A small deterministic generator (no dependency for a bench).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

fn job(id: u32, rng: &mut Lcg) -> SchedJob {
    let nodes = if rng.next(10) == 0 { 1 + rng.next(8) as u32 } else { 1 };
    SchedJob {
        id,
        priority: u64::from(u32::MAX - id),
        partitions: vec!["batch".into()],
        min_nodes: nodes,
        max_nodes: Some(nodes),
        ntasks: nodes * (1 + rng.next(32) as u32),
        cpus_per_task: 1,
        mem_per_node_mb: None,
        mem_per_cpu_mb: Some(1000),
        time_limit: Some(Some(600 + rng.next(86_400))),
        exclusive: false,
        hold: None,
        uid: rng.next(200) as u32,
        queued: rng.next(10_000) as i64,
        more: None,
    }
}

fn state(nodes: usize, pending: u32, policy: SchedConfig) -> Core {
    let mut c = Core::new();
    let names: Vec<String> = (0..nodes).map(|i| format!("n{i:05}")).collect();
    for n in &names {
        c.handle(Event::NodeDefined(NodeRes::new(n, 32, 256_000, Vec::new(), 1)));
        c.handle(Event::NodeSchedulable { node: n.clone(), schedulable: true });
    }
    c.handle(Event::PartitionDefined(PartitionRes::open("batch", names)));
    let depth = std::env::var("DEPTH").ok().and_then(|d| d.parse().ok()).unwrap_or(SchedConfig::default().max_job_test);
    // DEPTH=N overrides bf_max_job_test.
    c.handle(Event::Configure(SchedConfig { interval: 0, max_job_test: depth, ..policy }));
    let mut rng = Lcg(42);
    // Each user's last two jobs ran a few minutes to a day (predictions, where on).
    for uid in 0..200 {
        for _ in 0..2 {
            c.handle(Event::Ran { uid, seconds: 60 + rng.next(86_400) as i64 });
        }
    }
    // Fill the cluster: running jobs with staggered ends.
    let mut id = 1;
    for t in 0..(nodes as u32 * 4) {
        c.handle(Event::Submitted(job(id, &mut rng)));
        id += 1;
        if t % 64 == 63 {
            c.schedule(i64::from(t), &mut || 0);
        }
    }
    c.schedule(10_000, &mut || 0);
    for _ in 0..pending {
        c.handle(Event::Submitted(job(id, &mut rng)));
        id += 1;
    }
    c
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let medium = std::env::args().any(|a| a == "--medium");
    let sizes: &[(usize, u32, &str)] = if quick {
        &[(100, 1_000, "<= 10")]
    } else if medium {
        &[(1_000, 10_000, "<= 10")]
    } else {
        &[(1_000, 10_000, "<= 10"), (10_000, 100_000, "<= 200")]
    };
    for &(nodes, pending, target) in sizes {
        // POLICY=fcfs|easy|conservative|predictive runs one; RUNS=N times it N times (for a profiler).
        let only = std::env::var("POLICY").ok();
        for policy in ["fcfs", "easy", "conservative", "predictive"] {
            if only.as_deref().is_some_and(|o| o != policy) {
                continue;
            }
            let Some(cfg) = SchedConfig::named(policy) else { continue };
            let base = state(nodes, pending, cfg);
            let runs = std::env::var("RUNS").ok().and_then(|r| r.parse().ok());
            let runs = runs.unwrap_or(if nodes >= 10_000 { 3 } else { 7 });
            let mut ms = Vec::new();
            let mut started = 0;
            for _ in 0..runs {
                let mut c = base.clone();
                c.handle(Event::NodeSchedulable { node: "n00000".into(), schedulable: true });
                let t = Instant::now();
                let d = c.schedule(20_000, &mut || 0);
                ms.push(t.elapsed().as_secs_f64() * 1000.0);
                started = d.iter().filter(|d| matches!(d, drover_sched::Decision::Start { .. })).count();
            }
            ms.sort_by(|a, b| a.total_cmp(b));
            println!(
                "pass {pending:>7} pending on {nodes:>6} nodes  {policy:<12} median {:>9.1} ms  target {target} ms  (started {started}; runs {:?})",
                ms[ms.len() / 2],
                ms.iter().map(|m| (m * 10.0).round() / 10.0).collect::<Vec<_>>()
            );
        }
    }
}
