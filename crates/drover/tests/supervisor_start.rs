//! A job cancelled (or requeued) while its supervisor is still starting: the node agent
//! cannot reach the supervisor's socket yet. The job must not be reported over while its
//! supervisor may still start it, and nothing of it may run. (Before, the agent wrote the job
//! CANCELLED at once; its end was acknowledged and its spool removed while the supervisor went
//! on starting: seen under QoS preemption, a requeued job's script running unsupervised.)
//!
//! Alone in its file: it sets the supervisors' start delay in the environment the cluster's
//! daemons inherit.

use drover_testkit::{Cluster, Options};
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_drover");
const DELAY: Duration = Duration::from_millis(2500);

#[test]
fn a_job_ended_before_its_supervisor_listens_never_runs_and_ends_after_it() {
    std::env::set_var("DROVER_TEST_SUPERVISOR_LISTEN_DELAY_MS", DELAY.as_millis().to_string());
    let c = Cluster::start(EXE, Options { nodes: 1, cpus: 2, ..Default::default() });
    let ran = c.path().join("ran");
    for (i, how) in ["scancel", "requeue"].into_iter().enumerate() {
        let mark = format!("{}.{i}", ran.display());
        let id = c.submit(&["-o", "/dev/null", "--wrap", &format!("touch {mark}; sleep 60")]);
        let job = id.to_string();
        c.wait_state(id, &["RUNNING"], Duration::from_secs(10));
        let asked = Instant::now();
        if how == "scancel" {
            c.ok("scancel", &[&job]);
            c.wait_state(id, &["CANCELLED"], Duration::from_secs(20));
        } else {
            c.ok("scontrol", &["requeuehold", &job]);
            c.wait_state(id, &["PENDING"], Duration::from_secs(20));
        }
        let took = asked.elapsed();
        assert!(
            took >= DELAY / 2,
            "{how}: job {id} was reported over {took:?} after, while its supervisor had not yet started (it waits {DELAY:?})"
        );
        // Its supervisor is gone, having run nothing.
        c.wait_until("the supervisor to end", Duration::from_secs(10), || c.supervisor_pids().is_empty());
        assert!(!std::path::Path::new(&mark).exists(), "{how}: job {id}'s script ran");
        if how == "requeue" {
            c.ok("scancel", &[&job]);
        }
    }
}
