//! `drover bench --only prio-100k`: under `PriorityType=priority/multifactor`, a stream of
//! short jobs end to end with an empty queue, then beside 100,000 waiting jobs of another
//! account: a job's start or end recomputes only the priorities it concerns (the
//! associations whose fairshare factor moved), so the stream should keep its rate. The
//! figure is the stream's rate beside the queue as a share of its rate alone.

use super::{median, report, spec, submit_held, submit_many, BenchArgs, BenchCluster};
use drover_proto::v1;
use std::time::{Duration, Instant};

const MULTIFACTOR: &str = "PriorityType=priority/multifactor\nPriorityWeightFairshare=10000\nPriorityWeightAge=1000\n";

/// `n` short jobs submitted by 8 concurrent clients, until all have ended: jobs per second.
async fn stream(c: &BenchCluster, n: usize) -> Result<f64, String> {
    let cl = c.client().await?;
    let s = drover_proto::spec_to_wire(&spec(c.dir.path(), false));
    let t = Instant::now();
    // 8 clients' worth in flight at a time.
    let ids = submit_many(&cl, &s, n, 8).await?;
    let mut cl = cl;
    loop {
        let r = cl
            .get_state(v1::StateRequest { job_ids: ids.clone(), jobs: true, active_only: true, ..Default::default() })
            .await
            .map_err(|s| s.to_string())?
            .into_inner();
        // (Jobs come as messages or encoded: both count.)
        let live = crate::common::jobs_in(r)
            .iter()
            .filter(|j| drover_model::state::JobState::parse(&j.state).is_none_or(|s| !s.is_finished()))
            .count();
        if live == 0 {
            return Ok(n as f64 / t.elapsed().as_secs_f64());
        }
        if t.elapsed() > Duration::from_secs(600) {
            return Err(format!("{live} of {n} jobs did not end within 10 minutes"));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The bench's cluster, under the multifactor priority (started outside the runtime).
pub(super) fn cluster(a: &BenchArgs) -> Result<BenchCluster, String> {
    BenchCluster::start_extra(a.nodes, 2, a, MULTIFACTOR)
}

pub(super) async fn run(c: &BenchCluster, a: &BenchArgs, runs: usize, scale: usize) -> Result<(), String> {
    let waiting = 100_000 / scale;
    let n = 400 / scale;
    let mut s = spec(c.dir.path(), true);
    s.name = "waiting".into();
    if !a.no_accounting {
        // The waiting jobs charge an account of their own, as another group's would.
        for args in [&["-i", "add", "account", "waiting"][..], &["-i", "add", "user", &s.user, "account=waiting"]] {
            if !c.cmd("sacctmgr").args(args).status().map_err(|e| e.to_string())?.success() {
                return Err(format!("sacctmgr {} failed", args.join(" ")));
            }
        }
        let t = Instant::now();
        while !c
            .cmd("sbatch")
            .args(["--test-only", "-A", "waiting", "--wrap", "true"])
            .status()
            .is_ok_and(|s| s.success())
        {
            if t.elapsed() > Duration::from_secs(30) {
                return Err("the account did not reach the controller".into());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        s.account = Some("waiting".into());
    }
    let mut alone = Vec::new();
    for _ in 0..runs {
        alone.push(stream(c, n).await?);
    }
    let cl = c.client().await?;
    // Held, so that they stay; a priority calculation recomputes held jobs' too.
    submit_held(&cl, &drover_proto::spec_to_wire(&s), waiting).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut beside = Vec::new();
    for _ in 0..runs {
        beside.push(stream(c, n).await?);
    }
    let (r0, r1) = (median(alone.clone()), median(beside.clone()));
    let share: Vec<f64> = beside.iter().zip(&alone).map(|(b, a)| b / a * 100.0).collect();
    println!(
        "prio-100k: {n} short jobs end to end: {r0:.1} jobs/s alone (runs {alone:.1?}), {r1:.1} jobs/s beside {waiting} waiting (runs {beside:.1?})"
    );
    report("prio-100k", r1 / r0 * 100.0, "%", &share, ">= 90");
    Ok(())
}
