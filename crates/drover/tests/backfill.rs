//! Backfill on a real cluster: a waiting job's reservation shows in `squeue --start` and
//! `scontrol show job`; a short job passes it, a long one does not.

use drover_testkit::{Cluster, Options};
use std::time::Duration;

const EXE: &str = env!("CARGO_BIN_EXE_drover");

#[test]
fn a_short_job_backfills_and_a_long_one_waits_for_the_reservation() {
    let c = Cluster::start(EXE, Options { nodes: 1, cpus: 2, ..Default::default() });
    let running = c.submit(&["-t", "5", "--wrap", "sleep 60"]);
    c.wait_state(running, &["RUNNING"], Duration::from_secs(20));
    let wide = c.submit(&["-n", "2", "-t", "1", "--wrap", "true"]);
    let long = c.submit(&["-t", "10", "--wrap", "true"]);
    let short = c.submit(&["-t", "2", "--wrap", "true"]);
    c.wait_state(short, &["COMPLETED"], Duration::from_secs(20));
    let q = c.ok("squeue", &["-h", "-o", "%i %t %r"]);
    assert!(q.contains(&format!("{wide} PD Resources")), "{q}");
    assert!(q.contains(&format!("{long} PD Priority")), "{q}");
    // The reservation: when the running job's limit ends, on its node.
    let start = c.ok("squeue", &["-h", "--start", "-j", &wide.to_string(), "-o", "%S %Y"]);
    let show = c.ok("scontrol", &["show", "job", &running.to_string()]);
    let end = show.split("EndTime=").nth(1).and_then(|r| r.split(' ').next()).unwrap().to_string();
    assert_eq!(start.trim(), format!("{end} node1"));
    let show = c.ok("scontrol", &["show", "job", &wide.to_string()]);
    assert!(show.contains(&format!("StartTime={end} ")), "{show}");
    assert!(show.contains("NodeList= SchedNodeList=node1"), "{show}");
    c.ok("scancel", &[&running.to_string()]);
    c.wait_state(wide, &["COMPLETED"], Duration::from_secs(20));
    c.wait_state(long, &["COMPLETED"], Duration::from_secs(20));
}

#[test]
fn explain_names_every_blocker_and_the_time_limit_that_would_backfill() {
    let c = Cluster::start(EXE, Options { nodes: 2, cpus: 2, ..Default::default() });
    let long = c.submit(&["-w", "node1", "-n2", "-t", "20", "--wrap", "sleep 600"]);
    let short = c.submit(&["-w", "node2", "-n2", "-t", "2", "--wrap", "sleep 600"]);
    c.wait_state(long, &["RUNNING"], Duration::from_secs(20));
    c.wait_state(short, &["RUNNING"], Duration::from_secs(20));
    // A two-node job waits for both nodes (planned when node1 frees up, in 20 minutes).
    let wide = c.submit(&["-N2", "-n4", "-t", "5", "--wrap", "true"]);
    // A held, not yet eligible job: both are said.
    let held = c.submit(&["--hold", "--begin=now+1hour", "-t", "5", "--wrap", "true"]);
    let why = c.ok("drover", &["explain", &wide.to_string()]);
    assert!(why.contains("is PENDING: Resources"), "{why}");
    assert!(why.contains("  - not enough free in partition debug: 0 of 4 cores, 0 of 2 nodes with room\n"), "{why}");
    let why = c.ok("drover", &["explain", &held.to_string()]);
    assert!(why.contains("  - held by its user (scontrol release)\n"), "{why}");
    assert!(why.contains("  - not eligible before "), "{why}");
    // When node2 frees up, a one-node job of an hour would delay the wide job; with a
    // shorter limit it would start at once — and explain says how short.
    c.ok("scancel", &[&short.to_string()]);
    c.wait_state(short, &["CANCELLED"], Duration::from_secs(20));
    let hour = c.submit(&["-n2", "-t", "60", "--wrap", "true"]);
    c.wait_until("the planner to pass over it", Duration::from_secs(20), || {
        c.ok("squeue", &["-h", "-j", &hour.to_string(), "-o", "%t"]).trim() == "PD"
            && c.ok("drover", &["explain", &hour.to_string()]).contains("would delay jobs ahead of it")
    });
    let why = c.ok("drover", &["explain", &hour.to_string()]);
    assert!(why.contains("With --time=00:1"), "{why}");
    let json = c.ok("drover", &["explain", "--json", &hour.to_string()]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["job_id"], hour);
    assert!(v["blockers"].as_array().unwrap().iter().any(|b| b["kind"] == "backfill"), "{json}");
    let secs = v["sooner_time_limit_secs"].as_u64().unwrap();
    assert!((60..=20 * 60).contains(&secs), "{json}");
    // scontrol -d show job lists them too, after Slurm's lines; without -d, Slurm's layout.
    let show = c.ok("scontrol", &["-d", "show", "job", &hour.to_string()]);
    assert!(show.contains("\n   Blocker=") && show.contains("\n   SoonerTimeLimit=00:1"), "{show}");
    let plain = c.ok("scontrol", &["show", "job", &hour.to_string()]);
    assert!(!plain.contains("Blocker="), "{plain}");
    let show = c.ok("scontrol", &["-d", "show", "job", &wide.to_string()]);
    assert!(
        show.contains("\n   Blocker=not enough free in partition debug: 2 of 4 cores, 1 of 2 nodes with room\n"),
        "{show}"
    );
    c.ok("scancel", &[&long.to_string(), &wide.to_string(), &held.to_string(), &hour.to_string()]);
}
