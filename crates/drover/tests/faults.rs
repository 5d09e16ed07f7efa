//! Fault injection with a seed: under a stream of short jobs, the controller, node agents and
//! accounting are killed (`kill -9`) and restarted at random moments (the controller
//! snapshotting every 100 records, so that kills land mid-snapshot too). Then a checker verifies
//! what Drover promises: every acknowledged job reached exactly one terminal state, none ran
//! twice, accounting has exactly one record per job and step, and no process of an ended job
//! survives. The counts are printed (jobs, faults by kind, the longest controller outage).
//!
//! CI runs the short version. The long one is a command anyone can run:
//! `DROVER_FAULT_JOBS=10000 DROVER_FAULT_FAULTS=100 DROVER_FAULT_SEED=7 ./scripts/test -E 'test(faults)'`

use drover_testkit::{processes_with, Cluster, Options};
use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_drover");

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// xorshift64*: the same faults at the same moments for the same seed.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

#[test]
fn faults_lose_nothing_and_run_nothing_twice() {
    faults(1);
}

/// The same with a primary and a standby sharing the state directory: the kills hit the
/// controller in control (a failover, and a failback when the primary returns) or the one
/// standing by.
#[test]
fn faults_with_failover_lose_nothing_and_run_nothing_twice() {
    faults(2);
}

/// Which controller holds the lease (`StateSaveLocation/ha/beat`: "TERM NAME COUNT held").
fn in_control(c: &Cluster) -> Option<usize> {
    let beat = std::fs::read_to_string(c.path().join("state/ha/beat")).ok()?;
    let name = beat.split_whitespace().nth(1)?;
    name.strip_prefix("ctl")?.parse::<usize>().ok().map(|i| i - 1)
}

fn took_control(c: &Cluster) -> usize {
    std::fs::read_dir(c.path().join("log"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("controller"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default().matches("took control: term").count())
        .sum()
}

fn faults(controllers: usize) {
    let jobs = env_or("DROVER_FAULT_JOBS", 200) as usize;
    let faults = env_or("DROVER_FAULT_FAULTS", 8) as usize;
    let seed = env_or("DROVER_FAULT_SEED", 20261205);
    let mut rng = Rng(seed | 1);
    // Snapshots every 100 records (not 20,000): kills land mid-snapshot too, and recovery
    // crosses chained segments all the time.
    std::env::set_var("DROVER_SNAPSHOT_EVERY", "100");
    let mut c = Cluster::start(EXE, Options { nodes: 3, cpus: 2, accounting: true, controllers, ..Default::default() });
    let runs = c.path().join("runs");
    std::fs::create_dir_all(&runs).unwrap();
    let marker = format!("faultjob-{}", std::process::id());

    // The submitter: one sbatch after another; only what was acknowledged counts.
    let acked = Arc::new(Mutex::new(Vec::<u32>::new()));
    let done = Arc::new(AtomicBool::new(false));
    let submitter = {
        let (bin, conf, dir) = (c.path().join("bin"), c.path().join("slurm.conf"), c.path().to_path_buf());
        let (acked, done, runs, marker) = (acked.clone(), done.clone(), runs.clone(), marker.clone());
        std::thread::spawn(move || {
            let mut tries = 0;
            while acked.lock().unwrap().len() < jobs && tries < jobs * 20 {
                tries += 1;
                // Each run leaves a file named after its job and the moment it started.
                let script = format!(
                    "f={}/$SLURM_JOB_ID.$(date +%s%N).$SLURMD_NODENAME; : > $f; bash -c 'sleep 0.$((RANDOM % 3 + 1)); true' {marker}; echo done >> $f",
                    runs.display()
                );
                let out = Command::new(bin.join("sbatch"))
                    .args(["--parsable", "-o", "/dev/null", "--wrap", &script])
                    .env("SLURM_CONF", &conf)
                    .env("PATH", format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default()))
                    .current_dir(&dir)
                    .stderr(Stdio::null())
                    .output()
                    .unwrap();
                if out.status.success() {
                    if let Ok(id) = String::from_utf8_lossy(&out.stdout).trim().parse::<u32>() {
                        acked.lock().unwrap().push(id);
                    }
                } else {
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
            done.store(true, Ordering::Relaxed);
        })
    };

    // The faults, at random moments while jobs flow.
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let mut longest_outage = Duration::ZERO;
    for _ in 0..faults {
        std::thread::sleep(Duration::from_millis(300 + rng.below(1200)));
        match rng.below(3) {
            0 if controllers > 1 => {
                // The one in control half of the time, else the other: a standby dies too.
                let active = in_control(&c).unwrap_or(0);
                let victim = if rng.below(2) == 0 { active } else { (active + 1) % controllers };
                c.kill_controller_at(victim);
                let t = Instant::now();
                c.wait_until("a controller to answer", Duration::from_secs(60), || {
                    c.run("squeue", &["-h", "-o", "%i"]).status.success()
                });
                if victim == active {
                    longest_outage = longest_outage.max(t.elapsed());
                }
                std::thread::sleep(Duration::from_millis(rng.below(800)));
                if victim == 0 {
                    c.start_controller();
                } else {
                    c.start_backup(victim);
                }
                *counts.entry(if victim == active { "controller in control" } else { "standby" }).or_default() += 1;
            }
            0 => {
                c.kill_controller();
                std::thread::sleep(Duration::from_millis(rng.below(800)));
                let t = Instant::now();
                c.start_controller();
                c.wait_until("the controller to answer again", Duration::from_secs(60), || {
                    c.run("squeue", &["-h", "-o", "%i"]).status.success()
                });
                longest_outage = longest_outage.max(t.elapsed());
                *counts.entry("controller").or_default() += 1;
            }
            1 => {
                let node = format!("node{}", 1 + rng.below(3));
                c.kill_node(&node);
                std::thread::sleep(Duration::from_millis(rng.below(1500)));
                c.start_node(&node);
                *counts.entry("node agent").or_default() += 1;
            }
            _ => {
                c.kill_accounting();
                std::thread::sleep(Duration::from_millis(rng.below(1500)));
                c.start_accounting();
                *counts.entry("accounting").or_default() += 1;
            }
        }
    }
    submitter.join().unwrap();
    assert!(done.load(Ordering::Relaxed));
    let acked: Vec<u32> = acked.lock().unwrap().clone();
    assert_eq!(acked.len(), jobs, "the submitter got its jobs acknowledged");
    let ids: BTreeSet<u32> = acked.iter().copied().collect();
    assert_eq!(ids.len(), acked.len(), "no job id was given twice");

    // Every acknowledged job reaches exactly one terminal state.
    let list: Vec<String> = acked.iter().map(u32::to_string).collect();
    let list = list.join(",");
    let mut states = BTreeMap::new();
    c.wait_until("every acknowledged job to end", Duration::from_secs(120 + jobs as u64 / 5), || {
        let out = c.run("sacct", &["-X", "-n", "-P", "-o", "JobIDRaw,State", "-j", &list]);
        states = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once('|'))
            .map(|(id, st)| (id.parse::<u32>().unwrap_or(0), st.to_string()))
            .collect::<Vec<_>>()
            .into_iter()
            .fold(BTreeMap::<u32, Vec<String>>::new(), |mut m, (id, st)| {
                m.entry(id).or_default().push(st);
                m
            });
        ids.iter().all(|id| {
            states.get(id).is_some_and(|s| {
                s.iter().all(|st| ["COMPLETED", "FAILED", "NODE_FAIL", "CANCELLED"].iter().any(|t| st.starts_with(t)))
            })
        })
    });
    let mut by_state: BTreeMap<String, usize> = BTreeMap::new();
    for (id, s) in &states {
        assert!(ids.contains(id), "accounting has job {id}, which was never acknowledged");
        assert_eq!(s.len(), 1, "job {id} has {} records in accounting: {s:?}", s.len());
        *by_state.entry(s[0].clone()).or_default() += 1;
    }
    // The controller agrees with accounting, on every job it still keeps (a long run outlasts
    // MinJobAge: the first jobs are gone from the controller by then, as they should be).
    let mut purged = 0;
    for id in &ids {
        let st = c.state(*id);
        if st.is_empty() {
            purged += 1;
            continue;
        }
        assert_eq!(Some(&st), states.get(id).map(|s| &s[0]), "job {id}: controller and accounting agree");
    }
    assert!(purged < ids.len(), "the controller forgot every job");

    // Exactly one record per step: each job's batch step once.
    let out = c.ok("sacct", &["-n", "-P", "-o", "JobIDRaw", "-j", &list]);
    let mut seen = BTreeMap::<String, usize>::new();
    for l in out.lines() {
        *seen.entry(l.to_string()).or_default() += 1;
    }
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "records twice in accounting: {twice:?}");

    // None ran twice (a run leaves a file named JOB.START.NODE).
    let mut starts = BTreeMap::<u32, Vec<String>>::new();
    for e in std::fs::read_dir(&runs).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let id: u32 = name.split('.').next().unwrap().parse().unwrap();
        starts.entry(id).or_default().push(name);
    }
    let again: Vec<_> = starts.iter().filter(|(_, r)| r.len() > 1).collect();
    assert!(again.is_empty(), "jobs that ran twice: {again:?}");
    let completed = by_state.get("COMPLETED").copied().unwrap_or(0);
    assert!(starts.len() >= completed, "every completed job ran: {} runs, {completed} completed", starts.len());

    // No process of an ended job survives.
    c.wait_until("no job process to remain", Duration::from_secs(20), || processes_with(&marker).is_empty());

    eprintln!(
        "faults: seed {seed}: {} jobs acknowledged ({by_state:?}), {faults} faults {counts:?}, \
         {} controller{}, {} takeovers, longest controller outage {:.2}s",
        acked.len(),
        controllers,
        if controllers > 1 { "s" } else { "" },
        took_control(&c).saturating_sub(1),
        longest_outage.as_secs_f64()
    );
}
