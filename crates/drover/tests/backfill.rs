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
