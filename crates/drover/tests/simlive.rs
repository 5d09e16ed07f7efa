//! The simulator is trusted only if it is the live scheduler: a short trace replayed on a
//! real cluster (jobs that sleep their recorded run times, submitted at their times) and in
//! `drover sim` gives the same decisions — the same start order, the same starts to within
//! the cluster's jitter, the same nodes — under Drover's default policy, predictions included.

use drover_testkit::{Cluster, Options};
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_drover");

/// 2 nodes of 2 CPUs, one user: (submit, run, processors, limit), seconds. Every start and
/// end is at least 2 s from every other event, so the live cluster's jitter (a fraction of a
/// second per start or end) cannot reorder them. Job 4 waits at submit (no run time is known
/// yet and its 20-minute limit would delay job 3, reserved for when job 2's limit ends); when
/// job 1 ends, the user's history says 16 s and job 4 backfills (on limits it would wait for
/// job 3: the conservative replay below differs there, so the comparison can fail).
const TRACE: [(i64, i64, u32, i64); 7] = [
    (0, 16, 1, 240),
    (2, 60, 2, 600),
    (8, 12, 4, 240),
    (14, 10, 1, 1200),
    (24, 8, 1, 120),
    (40, 20, 2, 120),
    (66, 6, 1, 120),
];

fn swf() -> String {
    let mut s = String::from("; the live-versus-simulator trace\n");
    for (k, (submit, run, procs, limit)) in TRACE.iter().enumerate() {
        s.push_str(&format!("{} {submit} -1 {run} {procs} -1 -1 {procs} {limit} -1 1 7 1 -1 -1 -1 -1 -1\n", k + 1));
    }
    s
}

/// (id, start, nodes) per job from `drover sim --jobs-out`, nodes renamed n1 -> node1.
fn simulated(dir: &std::path::Path, policy: &str) -> Vec<(u32, i64, String)> {
    let trace = dir.join("live.swf");
    std::fs::write(&trace, swf()).unwrap();
    let rows = dir.join(format!("{policy}.csv"));
    let out = std::process::Command::new(EXE)
        .args(["sim", trace.to_str().unwrap(), "--nodes", "2", "--cpus-per-node", "2", "--policy", policy])
        .args(["--no-timing", "--jobs-out", rows.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&rows).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("id,submit,start,end,wait,run,procs,nodes"));
    lines
        .map(|l| {
            let f: Vec<&str> = l.splitn(8, ',').collect();
            (f[0].parse().unwrap(), f[2].parse().unwrap(), f[7].trim_matches('"').replace('n', "node"))
        })
        .collect()
}

fn epoch(t: &str) -> i64 {
    let dt: jiff::civil::DateTime = t.parse().unwrap();
    dt.to_zoned(jiff::tz::TimeZone::system()).unwrap().timestamp().as_second()
}

#[test]
fn a_short_trace_makes_the_same_decisions_live_and_in_the_simulator() {
    let dir = tempfile::tempdir().unwrap();
    let want = simulated(dir.path(), "default");
    // The comparison can tell the policies apart (job 4).
    assert_ne!(want, simulated(dir.path(), "conservative"));
    // The simulator plans at every event: so does this cluster (bf_interval=0).
    let c = Cluster::start(
        EXE,
        Options { nodes: 2, cpus: 2, extra_conf: "SchedulerParameters=bf_interval=0\n".into(), ..Default::default() },
    );
    let t0 = Instant::now();
    let mut ids = Vec::new();
    for &(submit, run, procs, limit) in &TRACE {
        let at = t0 + Duration::from_secs(submit as u64);
        std::thread::sleep(at.saturating_duration_since(Instant::now()));
        let t = format!("{}:{:02}", limit / 60, limit % 60);
        ids.push(c.submit(&["-n", &procs.to_string(), "-t", &t, "--wrap", &format!("sleep {run}")]));
    }
    for &id in &ids {
        c.wait_state(id, &["COMPLETED"], Duration::from_secs(120));
    }
    let mut got = Vec::new();
    for (k, &id) in ids.iter().enumerate() {
        let show = c.ok("scontrol", &["show", "job", &id.to_string()]);
        let field = |name: &str| {
            show.split(&format!(" {name}=")).nth(1).and_then(|r| r.split_whitespace().next()).unwrap().to_string()
        };
        got.push((k as u32 + 1, epoch(&field("StartTime")), field("NodeList")));
    }
    let first = got[0].1;
    let order = |v: &[(u32, i64, String)]| {
        let mut o: Vec<(i64, u32)> = v.iter().map(|r| (r.1, r.0)).collect();
        o.sort();
        o.into_iter().map(|(_, id)| id).collect::<Vec<_>>()
    };
    assert_eq!(order(&got), order(&want), "live {got:?}\nsimulated {want:?}");
    for (live, sim) in got.iter().zip(&want) {
        assert_eq!(live.2, sim.2, "job {}: nodes; live {got:?}\nsimulated {want:?}", live.0);
        let off = (live.1 - first) - sim.1;
        assert!((-1..=2).contains(&off), "job {} started {off} s off; live {got:?}\nsimulated {want:?}", live.0);
    }
}

/// `drover sim --now`: the live queue run forward by the controller's own scheduler. One node
/// of 2 CPUs: a job holds it to its 2-minute limit (no history: no prediction); behind it a
/// 2-CPU job, then a 1-CPU array of two tasks, a dependent job and a held one. The forecast
/// starts them in that order at the times the limits give, the first at the start the
/// backfill planner promises it (squeue --start), and leaves the held job waiting; the queue
/// itself is untouched.
#[test]
fn sim_now_forecasts_the_live_queue_with_the_live_scheduler() {
    let c = Cluster::start(
        EXE,
        Options { nodes: 1, extra_conf: "SchedulerParameters=bf_interval=1\n".into(), ..Default::default() },
    );
    let hold = c.submit(&["-n2", "-t", "2", "-o", "/dev/null", "--wrap", "sleep 300"]);
    c.wait_state(hold, &["RUNNING"], Duration::from_secs(30));
    let wide = c.submit(&["-n2", "-t", "3", "-o", "/dev/null", "--wrap", "true"]);
    let array = c.submit(&["-n1", "-t", "1", "--array=1-2", "-o", "/dev/null", "--wrap", "true"]);
    let dep = c.submit(&["-n1", "-t", "1", "-d", &format!("afterok:{wide}"), "-o", "/dev/null", "--wrap", "true"]);
    let held = c.submit(&["-H", "-n1", "-t", "1", "-o", "/dev/null", "--wrap", "true"]);
    // The planner's promise for the first waiting job.
    let mut promised = 0;
    let t = Instant::now();
    while promised == 0 && t.elapsed() < Duration::from_secs(20) {
        let out = c.ok("squeue", &["-h", "--start", "-j", &wide.to_string(), "-o", "%S"]);
        promised = if out.trim().starts_with("20") { epoch(out.trim()) } else { 0 };
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(promised > 0, "no expected start for job {wide}");
    let out = c.ok("drover", &["sim", "--now", "--json"]);
    let f: serde_json::Value = serde_json::from_str(&out).unwrap();
    let starts: Vec<(String, i64, i64)> = f["starts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["job"].as_str().unwrap().to_string(), s["start"].as_i64().unwrap(), s["end"].as_i64().unwrap()))
        .collect();
    let names: Vec<&str> = starts.iter().map(|s| s.0.as_str()).collect();
    let w = wide.to_string();
    let (a1, a2, d) = (format!("{array}_1"), format!("{array}_2"), dep.to_string());
    assert_eq!(names, [w.as_str(), a1.as_str(), a2.as_str(), d.as_str()], "{out}");
    // The first where the planner promised it (the running job's limit's end, to the second
    // give or take the moment it started), the rest each after what they wait for.
    assert!((starts[0].1 - promised).abs() <= 1, "forecast {} against promised {promised}", starts[0].1);
    assert_eq!(starts[0].2 - starts[0].1, 180);
    assert_eq!((starts[1].1, starts[2].1), (starts[0].2, starts[0].2), "the array's tasks when the wide job ends");
    assert!(starts[3].1 >= starts[0].2, "the dependent job after the job it depends on");
    let waiting: Vec<u64> = f["waiting"].as_array().unwrap().iter().map(|w| w["job_id"].as_u64().unwrap()).collect();
    assert_eq!(waiting, [u64::from(held)]);
    assert_eq!(f["waiting"][0]["reason"], "JobHeldUser");
    // The text form says the same, and the live queue did not move.
    let text = c.ok("drover", &["sim", "--now", "--hours", "1"]);
    assert!(text.contains("Still waiting at") && text.contains(&format!("{held} (JobHeldUser)")), "{text}");
    assert!(text.lines().nth(1).is_some_and(|l| l.starts_with("JOBID")), "{text}");
    for j in [wide, dep, held] {
        assert_eq!(c.state(j), "PENDING");
    }
    // A horizon before the first start leaves everything waiting.
    let short = c.ok("drover", &["sim", "--now", "--json", "--hours", "0.01"]);
    let f: serde_json::Value = serde_json::from_str(&short).unwrap();
    assert_eq!(f["starts"].as_array().unwrap().len(), 0, "{short}");
    // A bad horizon is refused in one line.
    let bad = c.run("drover", &["sim", "--now", "--hours", "0"]);
    assert_eq!(bad.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&bad.stderr),
        "drover sim: error: --hours 0: give a number of hours above 0, at most a year's\n"
    );
    c.ok("scancel", &[&hold.to_string(), &wide.to_string(), &array.to_string(), &dep.to_string(), &held.to_string()]);
}

/// Jobs `ids` have ended and accounting holds their records.
fn wait_recorded(c: &Cluster, ids: &[u32]) {
    let list: Vec<String> = ids.iter().map(u32::to_string).collect();
    for &j in ids {
        c.wait_state(j, &["COMPLETED"], Duration::from_secs(60));
    }
    c.wait_until("the jobs' records in accounting", Duration::from_secs(20), || {
        c.ok("sacct", &["-X", "-n", "-P", "-j", &list.join(","), "-o", "State"])
            .lines()
            .filter(|l| *l == "COMPLETED")
            .count()
            == ids.len()
    });
}

/// `drover sim --config CONF --from-accounting` the cluster's database, with `extra`
/// arguments: its summary, and each replayed job's (start, end, nodes) by id.
fn replay(
    c: &Cluster,
    conf: &std::path::Path,
    extra: &[&str],
) -> (String, std::collections::HashMap<u32, (i64, i64, String)>) {
    let rows = c.path().join("replay.csv");
    let db = c.path().join("acct.db");
    let mut args = vec!["sim", "--config", conf.to_str().unwrap(), "--from-accounting", db.to_str().unwrap()];
    args.extend(["--no-timing", "--jobs-out", rows.to_str().unwrap()]);
    args.extend(extra);
    let out = c.run("drover", &args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let csv = std::fs::read_to_string(&rows).unwrap();
    let got = csv
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.splitn(8, ',').collect();
            (f[0].parse().unwrap(), (f[2].parse().unwrap(), f[3].parse().unwrap(), f[7].trim_matches('"').to_string()))
        })
        .collect();
    (String::from_utf8_lossy(&out.stdout).to_string(), got)
}

/// `drover sim --config slurm.conf --from-accounting DB`: a cluster's own jobs, read back from
/// its accounting database, replayed on its own nodes and partitions with their whole
/// requests: the same ids, the partition each ran in (a one-node partition's job on its
/// node), the nodes a two-node job needs, a dependency after its job, and a request the
/// replay's machine cannot hold named in no row.
#[test]
fn sim_replays_a_clusters_own_jobs_from_accounting_on_its_conf() {
    let c = Cluster::start(
        EXE,
        Options {
            nodes: 2,
            accounting: true,
            extra_conf: "PartitionName=small Nodes=node2 MaxTime=10\n".into(),
            ..Default::default()
        },
    );
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(c.submit(&["-n2", "-t", "5", "-o", "/dev/null", "--wrap", "sleep 2"]));
    }
    let small = c.submit(&["-p", "small", "-n1", "-t", "5", "-o", "/dev/null", "--wrap", "sleep 1"]);
    let wide = c.submit(&["-N2", "-t", "5", "-o", "/dev/null", "--wrap", "sleep 1"]);
    let dep =
        c.submit(&["-n1", "-t", "5", "-d", &format!("afterok:{}", ids[0]), "-o", "/dev/null", "--wrap", "sleep 1"]);
    ids.extend([small, wide, dep]);
    wait_recorded(&c, &ids);
    let conf = c.path().join("slurm.conf");
    let (text, got) = replay(&c, &conf, &["--policy", "conservative"]);
    assert!(text.starts_with("policy conservative  machine 4 procs on 2 nodes  jobs 6 (6 in the trace)"), "{text}");
    let csv = format!("{got:?}");
    let mut replayed: Vec<u32> = got.keys().copied().collect();
    replayed.sort_unstable();
    assert_eq!(replayed, ids, "{csv}");
    assert_eq!(got[&small].2, "node2", "{csv}");
    assert_eq!(got[&wide].2, "node[1-2]", "{csv}");
    assert!(got[&dep].0 >= got[&ids[0]].1, "the dependent job starts after its job ends: {csv}");
    // Each ran as long as it did live (sleep 1 or 2, give or take the cluster's second).
    for (id, (start, end, _)) in &got {
        assert!((1..=3).contains(&(end - start)), "job {id}: {csv}");
    }
    // Without a slurm.conf, or with a database that is not there: one line each.
    let bad = c.run("drover", &["sim", "--config", conf.to_str().unwrap(), "--from-accounting", "/nonexistent.db"]);
    assert_eq!(bad.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&bad.stderr),
        "drover sim: error: /nonexistent.db: no such accounting database (give a SQLite file or a mysql:// or postgres:// URL)\n"
    );
    let db = c.path().join("acct.db");
    let bad = c.run("drover", &["sim", "--from-accounting", db.to_str().unwrap()]);
    assert_eq!(bad.status.code(), Some(2), "{}", String::from_utf8_lossy(&bad.stderr));
}

/// On a `priority/multifactor` site the replay orders its queue by the controller's own
/// priority, fairshare included: lab1's job uses the node, then a lab1 job and a lab2 job wait
/// for it (lab1's submitted first). When it ends lab1 has used something and lab2 nothing, so
/// lab2's goes first — live, and in the replay from accounting; replayed on the same
/// slurm.conf without the multifactor priority (submit order), lab1's would.
#[test]
fn sim_replays_the_multifactor_priority_with_fairshare() {
    let c = Cluster::start(
        EXE,
        Options {
            nodes: 1,
            accounting: true,
            extra_conf: "PriorityType=priority/multifactor\nPriorityWeightFairshare=10000\nPriorityDecayHalfLife=0\n"
                .into(),
            ..Default::default()
        },
    );
    c.root_in_accounts(&["lab1", "lab2"], &[]);
    let first = c.submit(&["-A", "lab1", "-n2", "-t", "5", "-o", "/dev/null", "--wrap", "sleep 4"]);
    c.wait_state(first, &["RUNNING"], Duration::from_secs(30));
    let x = c.submit(&["-A", "lab1", "-n2", "-t", "5", "-o", "/dev/null", "--wrap", "sleep 1"]);
    let y = c.submit(&["-A", "lab2", "-n2", "-t", "5", "-o", "/dev/null", "--wrap", "sleep 1"]);
    wait_recorded(&c, &[first, x, y]);
    let start = |j: u32| epoch(c.ok("sacct", &["-X", "-n", "-P", "-j", &j.to_string(), "-o", "Start"]).trim());
    assert!(start(y) < start(x), "live, lab2's job went first");
    let conf = c.path().join("slurm.conf");
    let (_, got) = replay(&c, &conf, &[]);
    assert!(got[&y].0 < got[&x].0, "replayed with fairshare, lab2's job goes first: {got:?}");
    let basic = c.path().join("basic.conf");
    let text = std::fs::read_to_string(&conf).unwrap().replace("PriorityType=priority/multifactor", "");
    std::fs::write(&basic, text).unwrap();
    let (_, got) = replay(&c, &basic, &[]);
    assert!(got[&x].0 < got[&y].0, "in submit order, lab1's job goes first: {got:?}");
}

/// The most jobs of a replay running at once.
fn most_at_once(got: &std::collections::HashMap<u32, (i64, i64, String)>) -> usize {
    got.values().map(|(s, _, _)| got.values().filter(|(s2, e2, _)| s2 <= s && s < e2).count()).max().unwrap_or(0)
}

/// Accounting's limits hold the replay's jobs as they held the live ones: lab1 may use two
/// CPUs at once (`GrpTRES=cpu=2`) on a cluster of four, so its four one-CPU jobs ran two at a
/// time, live and replayed; on the same slurm.conf without `AccountingStorageEnforce=limits`
/// all four would start together.
#[test]
fn sim_replays_accounting_limits() {
    let c = Cluster::start(
        EXE,
        Options {
            nodes: 2,
            accounting: true,
            extra_conf: "AccountingStorageEnforce=limits\n".into(),
            ..Default::default()
        },
    );
    c.wait_until("the cluster to be registered", Duration::from_secs(20), || {
        c.run("sacctmgr", &["-n", "-P", "show", "cluster", "format=cluster"]).stdout == b"test\n"
    });
    c.root_in_accounts(&["lab1"], &["GrpTRES=cpu=2"]);
    let ids: Vec<u32> =
        (0..4).map(|_| c.submit(&["-A", "lab1", "-n1", "-t", "5", "-o", "/dev/null", "--wrap", "sleep 2"])).collect();
    wait_recorded(&c, &ids);
    let live: std::collections::HashMap<u32, (i64, i64, String)> = ids
        .iter()
        .map(|&j| {
            let out = c.ok("sacct", &["-X", "-n", "-P", "-j", &j.to_string(), "-o", "Start,End"]);
            let (s, e) = out.trim().split_once('|').unwrap();
            (j, (epoch(s), epoch(e), String::new()))
        })
        .collect();
    assert_eq!(most_at_once(&live), 2, "live, two at a time: {live:?}");
    let conf = c.path().join("slurm.conf");
    let (_, got) = replay(&c, &conf, &[]);
    assert_eq!(got.len(), 4, "{got:?}");
    assert_eq!(most_at_once(&got), 2, "GrpTRES=cpu=2 holds the replay too: {got:?}");
    let free = c.path().join("free.conf");
    let text = std::fs::read_to_string(&conf).unwrap().replace("AccountingStorageEnforce=limits", "");
    std::fs::write(&free, text).unwrap();
    let (_, got) = replay(&c, &free, &[]);
    assert_eq!(most_at_once(&got), 4, "without limits all four start together: {got:?}");
}

/// Partitions' `PriorityTier` orders the replay's queue as the live one: a job of the higher
/// tier's partition goes before an earlier one of the lower's, live and replayed; on the
/// same slurm.conf without tiers, in submit order.
#[test]
fn sim_replays_partition_priority_tiers() {
    let c = Cluster::start(
        EXE,
        Options {
            nodes: 1,
            accounting: true,
            extra_conf: "PartitionName=urgent Nodes=node1 PriorityTier=2\n".into(),
            ..Default::default()
        },
    );
    let first = c.submit(&["-n2", "-t", "5", "-o", "/dev/null", "--wrap", "sleep 3"]);
    c.wait_state(first, &["RUNNING"], Duration::from_secs(30));
    let low = c.submit(&["-n2", "-t", "5", "-o", "/dev/null", "--wrap", "sleep 1"]);
    let high = c.submit(&["-p", "urgent", "-n2", "-t", "5", "-o", "/dev/null", "--wrap", "sleep 1"]);
    wait_recorded(&c, &[first, low, high]);
    let start = |j: u32| epoch(c.ok("sacct", &["-X", "-n", "-P", "-j", &j.to_string(), "-o", "Start"]).trim());
    assert!(start(high) < start(low), "live, the urgent partition's job went first");
    let conf = c.path().join("slurm.conf");
    let (_, got) = replay(&c, &conf, &[]);
    assert!(got[&high].0 < got[&low].0, "replayed, the urgent partition's job goes first: {got:?}");
    let flat = c.path().join("flat.conf");
    std::fs::write(&flat, std::fs::read_to_string(&conf).unwrap().replace(" PriorityTier=2", "")).unwrap();
    let (_, got) = replay(&c, &flat, &[]);
    assert!(got[&low].0 < got[&high].0, "without tiers, in submit order: {got:?}");
}

/// QoS preemption replays as it ran: a `high` job (which also outranks it) preempts the running
/// `low` one (requeued at once, `PreemptMode=REQUEUE`, no grace time), which runs again after it — live, and
/// replayed from accounting (the low job's last run is what it recorded); on the same
/// slurm.conf without preemption, the high job would wait for the low one.
#[test]
fn sim_replays_qos_preemption() {
    let c = Cluster::start(
        EXE,
        Options {
            nodes: 1,
            accounting: true,
            // The high QoS also outranks the low one, so that the requeued job does not take
            // the node back from the job that preempted it.
            extra_conf: "PreemptType=preempt/qos\nPreemptMode=REQUEUE\nPriorityType=priority/multifactor\n\
                         PriorityWeightQOS=10000\n"
                .into(),
            ..Default::default()
        },
    );
    c.ok("sacctmgr", &["-i", "add", "qos", "low"]);
    c.ok("sacctmgr", &["-i", "add", "qos", "high", "Preempt=low", "Priority=100"]);
    c.wait_until("the QoS to reach the controller", Duration::from_secs(20), || {
        c.run("sbatch", &["--test-only", "--qos=high", "--wrap", "true"]).status.success()
    });
    let low = c.submit(&["--qos=low", "-n2", "--requeue", "-t", "5", "-o", "/dev/null", "--wrap", "sleep 6"]);
    c.wait_state(low, &["RUNNING"], Duration::from_secs(30));
    std::thread::sleep(Duration::from_secs(1));
    let high = c.submit(&["--qos=high", "-n2", "-t", "5", "-o", "/dev/null", "--wrap", "sleep 2"]);
    wait_recorded(&c, &[high, low]);
    let start = |j: u32| epoch(c.ok("sacct", &["-X", "-n", "-P", "-j", &j.to_string(), "-o", "Start"]).trim());
    assert!(start(low) > start(high), "live, the low job ran again after the high one");
    let conf = c.path().join("slurm.conf");
    let (_, got) = replay(&c, &conf, &[]);
    assert!(got[&high].0 < got[&low].0, "replayed, the high job preempts the low one: {got:?}");
    assert!(got[&low].0 >= got[&high].1, "and the low one runs again after it: {got:?}");
    let none = c.path().join("nopreempt.conf");
    std::fs::write(&none, std::fs::read_to_string(&conf).unwrap().replace("PreemptType=preempt/qos", "")).unwrap();
    let (_, got) = replay(&c, &none, &[]);
    assert!(got[&low].1 <= got[&high].0, "without preemption the high job waits for the low one: {got:?}");
}
