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
    // Slurm's backfill, on time limits (under predictions, the cancelled job below would make
    // its user's next job short enough to pass: the next test).
    let c = two_nodes("SchedulerParameters=bf_policy=conservative\n");
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

#[test]
fn a_job_predicted_short_from_its_users_last_runs_backfills_where_its_limit_would_not() {
    // Drover's default policy plans on what the user's recent jobs ran. node1 is busy for 20
    // minutes, a two-node job waits for it; a one-node job with a one-hour limit would delay
    // it by its limit, but its user's last job ran a few seconds, so it is expected to be
    // done long before and starts now. Its limit still holds (scontrol shows it).
    let c = two_nodes("");
    let (long, wide) = node1_busy_and_a_quick_run(&c);
    let why = c.ok("drover", &["explain", &wide.to_string()]);
    assert!(why.contains("The plan expects it to run 00:00:0"), "{why}");
    assert!(why.contains("its user's last jobs ran 00:00:0"), "{why}");
    let hour = c.submit(&["-n2", "-t", "60", "--wrap", "sleep 2"]);
    c.wait_state(hour, &["RUNNING", "COMPLETED"], Duration::from_secs(20));
    let show = c.ok("scontrol", &["show", "job", &hour.to_string()]);
    assert!(show.contains("TimeLimit=01:00:00"), "{show}");
    // The waiting job's expected start relies on the hour job ending as predicted; scontrol
    // -d says what the waiting job itself is expected to run.
    let show = c.ok("scontrol", &["-d", "show", "job", &wide.to_string()]);
    assert!(show.contains("\n   PredictedRunTime=00:00:0"), "{show}");
    c.ok("scancel", &[&long.to_string(), &wide.to_string(), &hour.to_string()]);

    // The same under Slurm's policy: the hour job waits for the two-node job.
    let c = two_nodes("SchedulerParameters=bf_policy=conservative\n");
    let (long, wide) = node1_busy_and_a_quick_run(&c);
    let hour = c.submit(&["-n2", "-t", "60", "--wrap", "sleep 2"]);
    c.wait_until("the planner to pass over it", Duration::from_secs(20), || {
        c.ok("drover", &["explain", &hour.to_string()]).contains("would delay jobs ahead of it")
    });
    assert_eq!(c.ok("squeue", &["-h", "-j", &hour.to_string(), "-o", "%t"]).trim(), "PD");
    assert!(!c.ok("drover", &["explain", &wide.to_string()]).contains("The plan expects"));
    c.ok("scancel", &[&long.to_string(), &wide.to_string(), &hour.to_string()]);
}

fn two_nodes(extra_conf: &str) -> Cluster {
    Cluster::start(EXE, Options { nodes: 2, cpus: 2, extra_conf: extra_conf.into(), ..Default::default() })
}

/// node1 busy for 20 minutes, a job of the same user that ran a second on node2, and a
/// two-node job waiting for node1: (the busy job, the waiting one).
fn node1_busy_and_a_quick_run(c: &Cluster) -> (u32, u32) {
    let long = c.submit(&["-w", "node1", "-n2", "-t", "20", "--wrap", "sleep 600"]);
    c.wait_state(long, &["RUNNING"], Duration::from_secs(20));
    let quick = c.submit(&["-w", "node2", "-n2", "-t", "60", "--wrap", "sleep 1"]);
    c.wait_state(quick, &["COMPLETED"], Duration::from_secs(20));
    (long, c.submit(&["-N2", "-n4", "-t", "5", "--wrap", "true"]))
}
