//! `drover bench`: the foundation's speed and memory figures, measured against a real local
//! cluster (controller + node agents as processes) started in a temporary directory. Every
//! figure is the median of several runs; the machine is shared and noisy, so compare ratios.
//!
//! ```text
//! drover bench [--runs 5] [--quick] [--only NAME]
//!   submit-seq      sequential `sbatch` processes (jobs/s)
//!   submit-par8     8 concurrent `sbatch` submitters (jobs/s)
//!   e2e-1000        1,000 `sbatch --wrap true` from submit to all COMPLETED (jobs/s)
//!   start-latency   submit to RUNNING on an idle cluster (ms)
//!   squeue-10k      `squeue` with 10,000 pending jobs (ms)
//!   squeue-100k     `squeue` with 100,000 pending jobs (ms)
//!   read-load       with 100,000 pending jobs, one sequential `sbatch` submitter beside 20
//!                   `squeue` loops, as a share of its rate alone (%: reads never starve writes)
//!   mem-per-job     controller resident memory per pending job, marginal over the second
//!                   half of 10k and of 100k jobs; runs shows [marginal, total/jobs] (KB)
//!   array-submit    `sbatch --array=0-9999` answered (ms)
//!   array-mem       controller resident memory per pending 1,000,000-task array (KB)
//!   step-launch     `srun -n1 true` inside a running job's allocation, whole command (ms)
//!   srun-n64        standalone `srun -N4 -n64 true`, allocation to release (ms; a second
//!                   cluster of four 16-CPU nodes)
//!   acct-lag        how far `sacct` trails the controller: submit acknowledged to the job's
//!                   row in sacct, and the controller's COMPLETED to sacct's (ms)
//!   prio-100k       (only with --only) multifactor priority: short jobs end to end beside
//!                   100,000 waiting jobs of another account, as a share of their rate
//!                   alone (%: a job's end recomputes only the priorities it concerns)
//!   failover        (only with --only) two controllers: the one in control killed, or
//!                   frozen, until a submission is accepted again (s; runs x 4 of each)
//! ```

mod failover;
mod prio;

use crate::common;
use clap::Parser;
use drover_model::job::JobSpec;
use drover_proto::v1;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(name = "drover bench")]
pub struct BenchArgs {
    /// Runs per figure (the median is reported).
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Smaller sizes, for a smoke run.
    #[arg(long)]
    pub quick: bool,
    /// Only this benchmark (see the list in `drover bench --help`).
    #[arg(long)]
    pub only: Option<String>,
    /// Node agents in the bench cluster.
    #[arg(long, default_value_t = 4)]
    pub nodes: u32,
    /// Keep the cluster loaded with the squeue benchmark's pending jobs for this many seconds
    /// after measuring (to profile commands against it; the export line is printed first).
    #[arg(long, value_name = "SECS")]
    pub keep_loaded: Option<u64>,
    /// Bench clusters without accounting (by default they have it, as `drover up` does).
    #[arg(long)]
    pub no_accounting: bool,
    /// How long `acct-outage` keeps accounting down, running jobs end to end and measuring
    /// start latency all the while (default: one batch of jobs).
    #[arg(long, value_name = "SECS")]
    pub outage_secs: Option<u64>,
    /// `acct-outage` with the same load but accounting left up (the control run).
    #[arg(long)]
    pub outage_control: bool,
    /// How the bench clusters authenticate (`drover up --auth`).
    #[arg(long, value_enum, default_value_t = crate::up::UpAuth::Slurm)]
    pub auth: crate::up::UpAuth,
    /// Bench clusters whose jobs are not confined (`drover up --no-confine`).
    #[arg(long)]
    pub no_confine: bool,
    /// Pending (held) jobs in the queue while `failover` kills controllers: the standby
    /// recovers them all before it serves.
    #[arg(long, value_name = "JOBS", default_value_t = 0)]
    pub queue: usize,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    if v.is_empty() {
        return f64::NAN;
    }
    v[v.len() / 2]
}

struct BenchCluster {
    dir: tempfile::TempDir,
    cfg: drover_model::conf::Config,
    bin: PathBuf,
}

impl BenchCluster {
    fn start(nodes: u32, cpus: u32, a: &BenchArgs) -> Result<BenchCluster, String> {
        Self::start_with(nodes, cpus, a, 1)
    }

    /// A cluster whose slurm.conf has `extra` lines too (it is started, stopped, given them and
    /// started again: `drover up` keeps a slurm.conf it finds).
    fn start_extra(nodes: u32, cpus: u32, a: &BenchArgs, extra: &str) -> Result<BenchCluster, String> {
        let c = Self::start_with(nodes, cpus, a, 1)?;
        crate::up::stop_dir(c.dir.path());
        let conf = c.dir.path().join("slurm.conf");
        let text = std::fs::read_to_string(&conf).map_err(|e| e.to_string())? + extra;
        std::fs::write(&conf, text).map_err(|e| e.to_string())?;
        crate::up::start_detached(&c.up_args(nodes, cpus, a, 1))
            .map_err(|e| format!("restarting the bench cluster: {e}"))?;
        Ok(c)
    }

    fn start_with(nodes: u32, cpus: u32, a: &BenchArgs, controllers: u32) -> Result<BenchCluster, String> {
        let dir = tempfile::Builder::new().prefix("drover-bench-").tempdir().map_err(|e| e.to_string())?;
        let up = Self::up_args_in(dir.path(), nodes, cpus, a, controllers);
        let cfg = crate::up::start_detached(&up).map_err(|e| format!("starting the bench cluster: {e}"))?;
        let bin = dir.path().join("bin");
        Ok(BenchCluster { dir, cfg, bin })
    }

    fn up_args(&self, nodes: u32, cpus: u32, a: &BenchArgs, controllers: u32) -> crate::up::UpArgs {
        Self::up_args_in(self.dir.path(), nodes, cpus, a, controllers)
    }

    fn up_args_in(dir: &Path, nodes: u32, cpus: u32, a: &BenchArgs, controllers: u32) -> crate::up::UpArgs {
        crate::up::UpArgs {
            controllers,
            nodes,
            cpus_per_node: Some(cpus),
            mem_per_node: Some("4G".into()),
            gpus_per_node: 0,
            partition: "debug".into(),
            state_dir: Some(dir.to_path_buf()),
            port: None,
            cluster_name: "bench".into(),
            detach: true,
            no_accounting: a.no_accounting,
            auth: a.auth,
            no_confine: a.no_confine,
        }
    }

    fn cmd(&self, prog: &str) -> Command {
        let mut c = Command::new(self.bin.join(prog));
        c.env("SLURM_CONF", self.dir.path().join("slurm.conf"))
            .current_dir(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    }

    /// `threads` submitters, each running `per` `sbatch ARGS` processes one after another.
    fn submit_from(&self, threads: usize, per: usize, args: &[&str]) {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let sb = self.bin.join("sbatch");
                let conf = self.dir.path().join("slurm.conf");
                let dir = self.dir.path().to_path_buf();
                let args = args.clone();
                std::thread::spawn(move || {
                    for _ in 0..per {
                        let _ = Command::new(&sb)
                            .args(&args)
                            .env("SLURM_CONF", &conf)
                            .current_dir(&dir)
                            .stdout(Stdio::null())
                            .status();
                    }
                })
            })
            .collect();
        for h in handles {
            let _ = h.join();
        }
    }

    /// One `sbatch --hold` after another for `secs`: jobs per second.
    fn submit_for(&self, secs: Duration) -> Result<f64, String> {
        let t = Instant::now();
        let mut n = 0u32;
        while t.elapsed() < secs {
            let st = self.cmd("sbatch").args(["--hold", "--wrap", "true"]).status().map_err(|e| e.to_string())?;
            if !st.success() {
                return Err("sbatch failed".into());
            }
            n += 1;
        }
        Ok(f64::from(n) / t.elapsed().as_secs_f64())
    }

    /// `squeue` over and over until `stop`: how many it ran.
    fn squeue_loop(&self, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<usize> {
        let sq = self.bin.join("squeue");
        let conf = self.dir.path().join("slurm.conf");
        std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let _ = Command::new(&sq).env("SLURM_CONF", &conf).stdout(Stdio::null()).stderr(Stdio::null()).status();
                n += 1;
            }
            n
        })
    }

    /// `n` jobs (`sbatch -o /dev/null --wrap true` from 8 submitters) until all have ended:
    /// jobs per second.
    async fn end_to_end(&self, n: usize) -> Result<f64, String> {
        let t = Instant::now();
        let per = n / 8;
        self.submit_from(8, per, &["-o", "/dev/null", "--wrap", "true"]);
        let mut cl = self.client().await?;
        loop {
            let r = cl
                .get_state(v1::StateRequest { jobs: true, active_only: true, ..Default::default() })
                .await
                .map_err(|s| s.to_string())?
                .into_inner();
            if r.jobs.len() + r.job_records.len() == 0 {
                return Ok((8 * per) as f64 / t.elapsed().as_secs_f64());
            }
            if t.elapsed() > Duration::from_secs(600) {
                return Err("jobs did not finish within 10 minutes".into());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The id of the newest job (a held job submitted and cancelled to learn it).
    fn last_job_id(&self) -> Result<u32, String> {
        let out = Command::new(self.bin.join("sbatch"))
            .args(["--parsable", "--hold", "-o", "/dev/null", "--wrap", "true"])
            .env("SLURM_CONF", self.dir.path().join("slurm.conf"))
            .current_dir(self.dir.path())
            .output()
            .map_err(|e| e.to_string())?;
        let id: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().map_err(|_| "sbatch gave no job id")?;
        let _ = self.cmd("scancel").arg(id.to_string()).status();
        Ok(id)
    }

    fn controller_pid(&self) -> Option<u32> {
        std::fs::read_to_string(self.dir.path().join("run/controller.pid")).ok()?.trim().parse().ok()
    }

    async fn client(&self) -> Result<common::Client, String> {
        common::connect(&self.cfg).await
    }

    /// Cancels everything and waits until the queue is empty of live jobs.
    async fn drain(&self) -> Result<(), String> {
        let mut c = self.client().await?;
        let me = common::user_name(nix::unistd::getuid().as_raw());
        c.cancel(v1::CancelRequest { has_user: true, user: me, ..Default::default() })
            .await
            .map_err(|s| s.to_string())?;
        let t = Instant::now();
        loop {
            let r = c
                .get_state(v1::StateRequest { jobs: true, active_only: true, ..Default::default() })
                .await
                .map_err(|s| s.to_string())?
                .into_inner();
            let live = r.jobs.len() + r.job_records.len();
            if live == 0 || t.elapsed() > Duration::from_secs(60) {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for BenchCluster {
    fn drop(&mut self) {
        crate::up::stop_dir(self.dir.path());
    }
}

pub(crate) fn spec(dir: &Path, hold: bool) -> JobSpec {
    JobSpec {
        name: "bench".into(),
        uid: nix::unistd::getuid().as_raw(),
        gid: nix::unistd::getgid().as_raw(),
        user: common::user_name(nix::unistd::getuid().as_raw()),
        group: common::group_name(nix::unistd::getgid().as_raw()),
        script: "#!/bin/sh\n# This script was created by sbatch --wrap.\n\ntrue\n".into(),
        argv: vec![String::new()],
        work_dir: dir.display().to_string(),
        stdout: Some("/dev/null".into()),
        // What a real sbatch sends: the submitter's environment.
        environment: std::env::vars().collect(),
        hold,
        batch: true,
        submit_host: common::hostname(),
        ..Default::default()
    }
}

fn report(name: &str, value: f64, unit: &str, runs: &[f64], target: &str) {
    let all: Vec<String> = runs.iter().map(|r| format!("{r:.1}")).collect();
    println!("{name:<14} {value:>10.1} {unit:<6} target {target:<10} runs [{}]", all.join(", "));
}

pub fn main(a: BenchArgs) -> i32 {
    if a.only.as_deref() == Some("failover") {
        return match failover::run(&a) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("drover bench: error: {e}");
                1
            }
        };
    }
    let want = |n: &str| a.only.as_deref().is_none_or(|o| o == n);
    let rt = common::runtime();
    if a.only.as_deref() == Some("prio-100k") {
        let r =
            prio::cluster(&a).and_then(|c| rt.block_on(prio::run(&c, &a, a.runs.max(1), if a.quick { 10 } else { 1 })));
        return match r {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("drover bench: error: {e}");
                1
            }
        };
    }
    let c = match BenchCluster::start(a.nodes, 2, &a) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("drover bench: error: {e}");
            return 1;
        }
    };
    // srun -n64 needs 64 CPUs: a second cluster of four 16-CPU nodes.
    let big = if want("srun-n64") {
        match BenchCluster::start(4, 16, &a) {
            Ok(b) => Some(b),
            Err(e) => {
                eprintln!("drover bench: error: {e}");
                return 1;
            }
        }
    } else {
        None
    };
    let runs = a.runs.max(1);
    let scale = if a.quick { 10 } else { 1 };
    println!(
        "drover bench: {} nodes, {runs} runs per figure, medians ({})",
        a.nodes,
        if a.quick { "quick" } else { "full" }
    );
    let r: Result<(), String> = rt.block_on(async {
        if want("submit-seq") {
            let n = 300 / scale;
            let mut v = Vec::new();
            for _ in 0..runs {
                let t = Instant::now();
                for _ in 0..n {
                    let st = c.cmd("sbatch").args(["--hold", "--wrap", "true"]).status().map_err(|e| e.to_string())?;
                    if !st.success() {
                        return Err("sbatch failed".into());
                    }
                }
                v.push(n as f64 / t.elapsed().as_secs_f64());
                c.drain().await?;
            }
            report("submit-seq", median(v.clone()), "jobs/s", &v, ">= 400");
        }
        if want("submit-par8") {
            let per = 150 / scale;
            let mut v = Vec::new();
            for _ in 0..runs {
                let t = Instant::now();
                c.submit_from(8, per, &["--hold", "--wrap", "true"]);
                v.push((8 * per) as f64 / t.elapsed().as_secs_f64());
                c.drain().await?;
            }
            report("submit-par8", median(v.clone()), "jobs/s", &v, ">= 1000");
        }
        if want("e2e-1000") {
            let n = 1000 / scale;
            let mut v = Vec::new();
            for _ in 0..runs {
                v.push(c.end_to_end(n).await?);
            }
            report("e2e-1000", median(v.clone()), "jobs/s", &v, ">= 200");
        }
        if want("start-latency") {
            let v = start_latencies(&c, runs * 4).await?;
            report("start-latency", median(v.clone()), "ms", &v, "<= 20");
        }
        if want("acct-lag") && !a.no_accounting {
            let (new_row, ended) = acct_lags(&c, runs * 4).await?;
            report("acct-lag-new", median(new_row.clone()), "ms", &new_row, "<= 100");
            report("acct-lag-end", median(ended.clone()), "ms", &ended, "<= 100");
        }
        if a.only.as_deref() == Some("acct-outage") && !a.no_accounting {
            acct_outage(&c, runs, 1000 / scale, a.outage_secs.unwrap_or(0), a.outage_control).await?;
        }
        if want("array-submit") {
            let mut v = Vec::new();
            for _ in 0..runs * 4 {
                let t = Instant::now();
                let st = c
                    .cmd("sbatch")
                    .args(["--array=0-9999", "--hold", "--wrap", "true"])
                    .status()
                    .map_err(|e| e.to_string())?;
                v.push(t.elapsed().as_secs_f64() * 1000.0);
                if !st.success() {
                    return Err("sbatch --array failed".into());
                }
            }
            report("array-submit", median(v.clone()), "ms", &v, "<= 10");
            c.drain().await?;
        }
        if want("array-mem") {
            let n = 2000 / scale;
            let mut v = Vec::new();
            let cl = c.client().await?;
            let mut s = spec(c.dir.path(), true);
            s.array = Some("0-999999".into());
            let s = drover_proto::spec_to_wire(&s);
            for _ in 0..runs {
                c.drain().await?;
                let pid = c.controller_pid().ok_or("no controller pid")?;
                submit_held(&cl, &s, n / 2).await?;
                tokio::time::sleep(Duration::from_millis(500)).await;
                let half = rss_kb(pid);
                submit_held(&cl, &s, n - n / 2).await?;
                tokio::time::sleep(Duration::from_millis(500)).await;
                v.push(rss_kb(pid).saturating_sub(half) as f64 / (n - n / 2) as f64);
            }
            report("array-mem", median(v.clone()), "KB", &v, "<= 10");
            c.drain().await?;
        }
        if want("step-launch") {
            // One running job; each `srun --jobid` is a new step in it.
            let out = c
                .cmd("sbatch")
                .args(["--parsable", "-N1", "-n1", "--wrap", "sleep 600"])
                .stdout(Stdio::piped())
                .output()
                .map_err(|e| e.to_string())?;
            let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
            let mut waited = 0;
            while !c
                .cmd("squeue")
                .args(["-h", "-t", "R", "-j", &id])
                .stdout(Stdio::piped())
                .output()
                .is_ok_and(|o| !o.stdout.is_empty())
            {
                waited += 1;
                if waited > 400 {
                    return Err("the step benchmark's job did not start".into());
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            let mut v = Vec::new();
            for _ in 0..runs * 8 {
                let t = Instant::now();
                let st = c.cmd("srun").args(["--jobid", &id, "-n1", "true"]).status().map_err(|e| e.to_string())?;
                v.push(t.elapsed().as_secs_f64() * 1000.0);
                if !st.success() {
                    return Err("srun in the allocation failed".into());
                }
            }
            report("step-launch", median(v.clone()), "ms", &v, "<= 20");
            c.drain().await?;
        }
        if let Some(big) = &big {
            let mut v = Vec::new();
            for _ in 0..runs * 4 {
                let t = Instant::now();
                let st = big.cmd("srun").args(["-N4", "-n64", "true"]).status().map_err(|e| e.to_string())?;
                v.push(t.elapsed().as_secs_f64() * 1000.0);
                if !st.success() {
                    return Err("srun -N4 -n64 failed".into());
                }
            }
            report("srun-n64", median(v.clone()), "ms", &v, "<= 150");
        }
        for (name, count, target) in [("squeue-10k", 10_000usize, "<= 20"), ("squeue-100k", 100_000, "<= 150")] {
            let measure_mem = want("mem-per-job");
            let read_load = count == 100_000 && want("read-load");
            if !want(name) && !measure_mem && !read_load {
                continue;
            }
            if a.quick && count > 10_000 {
                continue;
            }
            let count = count / scale;
            c.drain().await?;
            let pid = c.controller_pid().ok_or("no controller pid")?;
            let before = rss_kb(pid);
            let mut cl = c.client().await?;
            let s = drover_proto::spec_to_wire(&spec(c.dir.path(), true));
            // Half, then the rest: the second half's growth is the marginal cost of a job,
            // free of one-time pools (buffers, allocator arenas) the first half paid for.
            submit_held(&cl, &s, count / 2).await?;
            tokio::time::sleep(Duration::from_millis(500)).await;
            let half = rss_kb(pid);
            submit_held(&cl, &s, count - count / 2).await?;
            tokio::time::sleep(Duration::from_millis(500)).await;
            let after = rss_kb(pid);
            if want(name) {
                let mut v = Vec::new();
                for _ in 0..runs {
                    let t = Instant::now();
                    let out = c.cmd("squeue").stdout(Stdio::piped()).output().map_err(|e| e.to_string())?;
                    v.push(t.elapsed().as_secs_f64() * 1000.0);
                    let lines = out.stdout.iter().filter(|b| **b == b'\n').count();
                    if lines < count {
                        return Err(format!("squeue printed {lines} lines for {count} jobs"));
                    }
                }
                report(name, median(v.clone()), "ms", &v, target);
                if let Some(secs) = a.keep_loaded {
                    eprintln!("drover bench: {count} jobs loaded; holding for {secs}s");
                    tokio::time::sleep(Duration::from_secs(secs)).await;
                }
            }
            if read_load {
                // One sequential submitter, alone and then beside 20 squeue loops over the
                // whole queue: reads must not starve writes.
                let mut alone = Vec::new();
                let mut loaded = Vec::new();
                for _ in 0..runs {
                    alone.push(c.submit_for(Duration::from_secs(5))?);
                    let stop = Arc::new(AtomicBool::new(false));
                    let readers: Vec<_> = (0..20).map(|_| c.squeue_loop(stop.clone())).collect();
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    loaded.push(c.submit_for(Duration::from_secs(5))?);
                    stop.store(true, Ordering::Relaxed);
                    let reads: usize = readers.into_iter().map(|h| h.join().unwrap_or(0)).sum();
                    eprintln!("drover bench: read-load: {reads} squeue of {count} jobs beside the submitter");
                }
                let ratio: Vec<f64> = alone.iter().zip(&loaded).map(|(a, l)| l / a * 100.0).collect();
                report("submit-alone@100k", median(alone.clone()), "jobs/s", &alone, "");
                report("submit-beside-20-squeue", median(loaded.clone()), "jobs/s", &loaded, "");
                report("read-load", median(ratio.clone()), "% of alone", &ratio, ">= 50");
            }
            if measure_mem {
                let total = (after.saturating_sub(before)) as f64 / count as f64;
                let marginal = (after.saturating_sub(half)) as f64 / (count - count / 2) as f64;
                let label = if count >= 100_000 { "100k" } else { "10k" };
                report(&format!("mem/job@{label}"), marginal, "KB", &[marginal, total], "<= 1");
            }
            let _ = cl.cancel(v1::CancelRequest::default()).await;
            c.drain().await?;
            drop(cl);
        }
        Ok(())
    });
    match r {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("drover bench: error: {e}");
            1
        }
    }
}

/// Submits `n` held jobs over the API, 256 in flight at a time.
/// Submit-to-RUNNING latency of `n` jobs on an idle cluster (ms), one after another.
async fn start_latencies(c: &BenchCluster, n: usize) -> Result<Vec<f64>, String> {
    let mut cl = c.client().await?;
    let mut v = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        let id = cl
            .submit(v1::SubmitRequest {
                spec: Some(drover_proto::spec_to_wire(&spec(c.dir.path(), false))),
                test_only: false,
            })
            .await
            .map_err(|s| s.to_string())?
            .into_inner()
            .job_id;
        let mut w = cl.watch_job(v1::WatchRequest { job_id: id }).await.map_err(|s| s.to_string())?.into_inner();
        while let Ok(Some(ev)) = w.message().await {
            if ev.job.is_some_and(|j| j.state != "PENDING") {
                break;
            }
        }
        v.push(t.elapsed().as_secs_f64() * 1000.0);
        c.drain().await?;
    }
    Ok(v)
}

/// How long until `sacct` shows what the controller already said, for `n` jobs one after
/// another: from the submission's acknowledgement to the job's row, and from the controller's
/// COMPLETED (its watch stream) to sacct's (ms each; `sacct` run every 5 ms, as a user would).
async fn acct_lags(c: &BenchCluster, n: usize) -> Result<(Vec<f64>, Vec<f64>), String> {
    let mut cl = c.client().await?;
    let sacct_state = |id: u32| -> Result<String, String> {
        let out = c
            .cmd("sacct")
            .args(["-n", "-X", "-P", "-o", "State", "-j", &id.to_string()])
            .stdout(Stdio::piped())
            .output()
            .map_err(|e| e.to_string())?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let wait_for = |id: u32, want: &dyn Fn(&str) -> bool| -> Result<f64, String> {
        let t = Instant::now();
        loop {
            if want(&sacct_state(id)?) {
                return Ok(t.elapsed().as_secs_f64() * 1000.0);
            }
            if t.elapsed() > Duration::from_secs(30) {
                return Err(format!("acct-lag: job {id} did not reach sacct within 30 s"));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    let (mut new_row, mut ended) = (Vec::new(), Vec::new());
    let mut s = spec(c.dir.path(), false);
    // Long enough that the new row is seen before the job ends.
    s.script = "#!/bin/sh\nsleep 1\n".into();
    let s = drover_proto::spec_to_wire(&s);
    for _ in 0..n {
        let id = cl
            .submit(v1::SubmitRequest { spec: Some(s.clone()), test_only: false })
            .await
            .map_err(|s| s.to_string())?
            .into_inner()
            .job_id;
        new_row.push(wait_for(id, &|st| !st.is_empty())?);
        let mut w = cl.watch_job(v1::WatchRequest { job_id: id }).await.map_err(|s| s.to_string())?.into_inner();
        while let Ok(Some(ev)) = w.message().await {
            if ev.job.is_some_and(|j| j.state == "COMPLETED") {
                break;
            }
        }
        ended.push(wait_for(id, &|st| st == "COMPLETED")?);
    }
    Ok((new_row, ended))
}

/// `acct-outage`: scheduling latency with accounting up, then killed while `n` jobs run end
/// to end; then accounting back, and how long until every job of the outage is in it.
async fn acct_outage(c: &BenchCluster, runs: usize, n: usize, outage_secs: u64, control: bool) -> Result<(), String> {
    let up = start_latencies(c, runs * 4).await?;
    let pidfile = c.dir.path().join("run/accounting.pid");
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .ok()
        .and_then(|p| p.trim().parse().ok())
        .ok_or("acct-outage: the bench cluster runs no accounting")?;
    if !control {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
    }
    let first = c.last_job_id()? + 1;
    let outage = Instant::now();
    let mut rates = Vec::new();
    let mut down = Vec::new();
    let mut jobs = 0;
    // Load all the while: batches of jobs end to end, and start latency between them.
    loop {
        rates.push(c.end_to_end(n).await?);
        jobs += n / 8 * 8;
        down.extend(start_latencies(c, runs * 4).await?);
        if outage.elapsed() >= Duration::from_secs(outage_secs) {
            break;
        }
    }
    let rate = median(rates);
    let outage_took = outage.elapsed().as_secs_f64();
    let last = c.last_job_id()?;
    // Back: every job of the outage reaches accounting.
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let dbd = c.dir.path().join("slurmdbd.conf").display().to_string();
    if !control {
        crate::up::spawn_daemon(&exe, &["accounting", "-f", &dbd], &c.dir.path().join("log/accounting.out"), &pidfile)?;
    }
    let back = Instant::now();
    let want = (first..=last).count();
    let mut got = 0;
    // The outage's jobs by their window (a long outage's ids do not fit on a command line).
    let since = jiff::Timestamp::now().as_second() - outage_took as i64 - 120;
    let since = common::fmt_time(since);
    while back.elapsed() < Duration::from_secs(600) {
        let out = c
            .cmd("sacct")
            .args(["-a", "-X", "-n", "-P", "-o", "JobIDRaw,State", "-S", &since])
            .stdout(Stdio::piped())
            .output()
            .map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&out.stdout);
        got = text
            .lines()
            .filter_map(|l| l.split_once('|'))
            .filter(|(id, st)| {
                id.parse::<u32>().is_ok_and(|i| (first..=last).contains(&i)) && !matches!(*st, "PENDING" | "RUNNING")
            })
            .count();
        if got == want {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let ratio = median(down.clone()) / median(up.clone());
    report("acct-up-latency", median(up.clone()), "ms", &up, "<= 20");
    report("acct-down-latency", median(down.clone()), "ms", &down, &format!("~ up ({ratio:.2}x)"));
    println!("acct-down-e2e {rate:>13.1} jobs/s ({jobs} jobs while accounting was down {outage_took:.0} s)");
    println!(
        "acct-drain    {:>13.1} s      {got} of {want} jobs' final records delivered, none lost",
        back.elapsed().as_secs_f64()
    );
    if got != want {
        return Err(format!("acct-outage: {} of {want} jobs' records missing after 10 minutes", want - got));
    }
    Ok(())
}

pub(crate) async fn submit_held(cl: &common::Client, s: &v1::JobSpec, n: usize) -> Result<(), String> {
    submit_many(cl, s, n, 256).await.map(|_| ())
}

/// `n` submissions of `s`, `at_once` in flight at a time: their job ids.
pub(crate) async fn submit_many(
    cl: &common::Client,
    s: &v1::JobSpec,
    n: usize,
    at_once: usize,
) -> Result<Vec<u32>, String> {
    let mut ids = Vec::with_capacity(n);
    let mut pending = Vec::new();
    for k in 0..n {
        let mut cl2 = cl.clone();
        let req = v1::SubmitRequest { spec: Some(s.clone()), test_only: false };
        pending.push(tokio::spawn(async move { cl2.submit(req).await.map(|r| r.into_inner().job_id) }));
        if pending.len() >= at_once || k + 1 == n {
            for p in pending.drain(..) {
                ids.push(p.await.map_err(|e| e.to_string())?.map_err(|s| s.to_string())?);
            }
        }
    }
    Ok(ids)
}

fn rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| l.strip_prefix("VmRSS:").and_then(|v| v.split_whitespace().next()?.parse().ok()))
        })
        .unwrap_or(0)
}
