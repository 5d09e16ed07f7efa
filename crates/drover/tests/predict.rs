//! Run-time predictions on a real cluster (docs/scheduler.md, "Run-time predictions"): what
//! the controller learns as jobs end comes back from accounting after it restarts.

use drover_testkit::{Cluster, Options};
use std::time::Duration;

const EXE: &str = env!("CARGO_BIN_EXE_drover");

#[test]
fn run_times_come_back_from_accounting_after_a_controller_restart() {
    let mut c = Cluster::start(EXE, Options { nodes: 1, cpus: 1, accounting: true, ..Default::default() });
    let quick = c.submit(&["-t", "60", "--wrap", "sleep 1"]);
    c.wait_state(quick, &["COMPLETED"], Duration::from_secs(20));
    c.wait_until("accounting to hold the run", Duration::from_secs(20), || {
        c.ok("sacct", &["-n", "-X", "-j", &quick.to_string(), "-o", "state"]).contains("COMPLETED")
    });
    let long = c.submit(&["-t", "30", "--wrap", "sleep 600"]);
    c.wait_state(long, &["RUNNING"], Duration::from_secs(20));
    c.kill_controller();
    c.start_controller();
    c.wait_until("the controller to read accounting's runs", Duration::from_secs(30), || {
        c.logs().contains("run-time predictions learned from 1 recent jobs of 1 users in accounting")
    });
    // The node is busy: a new job of the same user waits, expected to run what the last one
    // ran, not its hour.
    let waiting = c.submit(&["-t", "60", "--wrap", "true"]);
    c.wait_until("explain to say what it is expected to run", Duration::from_secs(20), || {
        c.ok("drover", &["explain", &waiting.to_string()]).contains("The plan expects it to run 00:00:0")
    });
    let why = c.ok("drover", &["explain", &waiting.to_string()]);
    assert!(why.contains("(its user's last jobs ran 00:00:0"), "{why}");
    c.ok("scancel", &[&long.to_string(), &waiting.to_string()]);
}
