//! `scontrol suspend|resume` stop and continue every process of a job (its time does not run
//! meanwhile); `scontrol requeue|requeuehold` send running and finished batch jobs back to
//! the queue. Errors in Slurm's words.

use drover_testkit::{Cluster, Options};
use std::time::Duration;

const EXE: &str = env!("CARGO_BIN_EXE_drover");

fn lines(c: &Cluster, id: u32) -> usize {
    std::fs::read_to_string(c.path().join(format!("slurm-{id}.out"))).unwrap_or_default().lines().count()
}

#[test]
fn a_suspended_job_stops_until_it_is_resumed() {
    let c = Cluster::start(EXE, Options { nodes: 2, cpus: 2, ..Default::default() });
    // A batch script and a step on the other node, both counting.
    let id = c.submit(&[
        "-N2",
        "--wrap",
        "srun -N1 -n1 -w node2 bash -c 'while :; do echo s; sleep 0.05; done' & while :; do echo b; sleep 0.05; done",
    ]);
    c.wait_until("output", Duration::from_secs(20), || lines(&c, id) > 20);
    c.ok("scontrol", &["suspend", &id.to_string()]);
    assert_eq!(c.ok("squeue", &["-h", "-j", &id.to_string(), "-o", "%t"]).trim(), "S");
    std::thread::sleep(Duration::from_millis(300));
    let n = lines(&c, id);
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(lines(&c, id), n, "a suspended job kept writing");
    let show = c.ok("scontrol", &["show", "job", &id.to_string()]);
    assert!(show.contains("JobState=SUSPENDED Reason=None"), "{show}");
    assert!(!show.contains("SuspendTime=None"), "{show}");
    // Suspending again changes nothing; resuming what runs is refused.
    c.ok("scontrol", &["suspend", &id.to_string()]);
    c.ok("scontrol", &["resume", &id.to_string()]);
    let before = lines(&c, id);
    c.wait_until("output again", Duration::from_secs(10), || lines(&c, id) > before + 10);
    let text = std::fs::read_to_string(c.path().join(format!("slurm-{id}.out"))).unwrap();
    assert!(text.contains("s\n") && text.contains("b\n"));
    let o = c.run("scontrol", &["resume", &id.to_string()]);
    assert_eq!(String::from_utf8_lossy(&o.stderr), format!("Job is not suspended for job {id}\n"));
    assert_eq!(o.status.code(), Some(1));
    let o = c.run("scontrol", &["suspend", "99999"]);
    assert_eq!(String::from_utf8_lossy(&o.stderr), "Unexpected message received for job 99999\n");
    let held = c.submit(&["-H", "--wrap", "true"]);
    let o = c.run("scontrol", &["suspend", &held.to_string()]);
    assert_eq!(String::from_utf8_lossy(&o.stderr), format!("Job is pending execution for job {held}\n"));
    // A suspended job can still be cancelled.
    c.ok("scontrol", &["suspend", &id.to_string()]);
    c.ok("scancel", &[&id.to_string()]);
    c.wait_state(id, &["CANCELLED"], Duration::from_secs(20));
}

#[test]
fn requeuehold_holds_and_finished_jobs_requeue() {
    let c = Cluster::start(EXE, Options { nodes: 1, cpus: 2, ..Default::default() });
    let id = c.submit(&["--wrap", "sleep 30"]);
    c.wait_state(id, &["RUNNING"], Duration::from_secs(20));
    c.ok("scontrol", &["requeuehold", &id.to_string()]);
    c.wait_until("held", Duration::from_secs(20), || {
        c.ok("squeue", &["-h", "-j", &id.to_string(), "-o", "%T %r"]).trim() == "PENDING JobHeldAdmin"
    });
    assert!(c.ok("scontrol", &["show", "job", &id.to_string()]).contains("Restarts=1"));
    c.ok("scontrol", &["update", &format!("JobId={id}"), "TimeLimit=1"]);
    c.ok("scancel", &[&id.to_string()]);
    // A finished job goes straight back to the queue and runs again.
    let id = c.submit(&["--wrap", "echo run"]);
    c.wait_state(id, &["COMPLETED"], Duration::from_secs(20));
    c.ok("scontrol", &["requeue", &id.to_string()]);
    c.wait_until("the second run", Duration::from_secs(20), || {
        c.ok("scontrol", &["show", "job", &id.to_string()]).contains("JobState=COMPLETED")
            && std::fs::read_to_string(c.path().join(format!("slurm-{id}.out"))).unwrap_or_default() == "run\n"
            && c.ok("scontrol", &["show", "job", &id.to_string()]).contains("Restarts=1")
    });
}
