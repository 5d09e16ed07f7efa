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
