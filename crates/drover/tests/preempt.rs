//! QoS preemption on a real cluster: a high-QoS job that finds the node full preempts the
//! low-QoS job holding it, which gets SIGTERM, its QoS's GraceTime, and is then requeued;
//! its run is recorded as PREEMPTED and it runs again after the high job.

use drover_testkit::{Cluster, Options};
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_drover");

/// One node with accounting and QoS preemption in `mode`; `qos` added (sacctmgr's words) and
/// known to the controller before it returns (`ready` is a QoS it may submit with).
fn cluster(mode: &str, qos: &[&[&str]], ready: &str) -> Cluster {
    let c = Cluster::start(
        EXE,
        Options {
            nodes: 1,
            accounting: true,
            extra_conf: format!("PreemptType=preempt/qos\nPreemptMode={mode}\n"),
            ..Default::default()
        },
    );
    for q in qos {
        let mut args = vec!["-i", "add", "qos"];
        args.extend(q.iter());
        c.ok("sacctmgr", &args);
    }
    let qos_opt = format!("--qos={ready}");
    c.wait_until("the QoS to reach the controller", Duration::from_secs(20), || {
        c.run("sbatch", &["--test-only", &qos_opt, "--wrap", "true"]).status.success()
    });
    c
}

#[test]
fn a_high_qos_job_requeues_a_low_qos_one_after_its_grace_time() {
    let c = cluster("REQUEUE", &[&["low", "GraceTime=5"], &["high", "Preempt=low"]], "high");
    let dir = c.path().display().to_string();
    // The low job notes each run it starts and the SIGTERM it gets, and goes on (as a
    // trainer writing its checkpoint would) until it is requeued.
    let script = format!(
        "trap 'echo term >> {dir}/low.term' TERM; echo run >> {dir}/low.runs; for i in $(seq 120); do sleep 1; done"
    );
    let low = c.submit(&["--qos=low", "-n2", "--requeue", "-o", "/dev/null", "--wrap", &script]);
    c.wait_state(low, &["RUNNING"], Duration::from_secs(30));
    c.wait_until("the low job to start its script", Duration::from_secs(20), || {
        std::fs::read_to_string(c.path().join("low.runs")).is_ok()
    });
    let t0 = Instant::now();
    let high = c.submit(&["--qos=high", "-n2", "-o", "/dev/null", "--wrap", "sleep 3"]);
    c.wait_until("the low job to get SIGTERM", Duration::from_secs(10), || c.path().join("low.term").exists());
    // It keeps its grace time: the high job waits for it.
    assert_eq!(c.state(high), "PENDING");
    c.wait_state(high, &["RUNNING", "COMPLETED"], Duration::from_secs(20));
    let waited = t0.elapsed();
    assert!(waited >= Duration::from_secs(4), "the grace time was given: {waited:?}");
    assert!(waited <= Duration::from_secs(15), "within GraceTime and a little: {waited:?}");
    // Requeued, not cancelled: it waits, and runs again once the high job is done.
    let st = c.state(low);
    assert!(st == "PENDING" || st == "RUNNING", "{st}");
    c.wait_until("the low job to run again", Duration::from_secs(60), || {
        std::fs::read_to_string(c.path().join("low.runs")).unwrap_or_default().lines().count() == 2
    });
    c.wait_until("the preempted run to be recorded", Duration::from_secs(30), || {
        let out = c.run("sacct", &["-D", "-X", "-n", "-P", "-o", "State", "-j", &low.to_string()]);
        String::from_utf8_lossy(&out.stdout).lines().next() == Some("PREEMPTED")
    });
    c.ok("scancel", &[&low.to_string()]);
}

#[test]
fn a_qos_in_cancel_mode_without_grace_time_ends_preempted_at_once() {
    let c = cluster("REQUEUE", &[&["scavenger", "PreemptMode=cancel"], &["urgent", "Preempt=scavenger"]], "urgent");
    let low = c.submit(&["--qos=scavenger", "-n2", "-o", "/dev/null", "--wrap", "sleep 120"]);
    c.wait_state(low, &["RUNNING"], Duration::from_secs(30));
    let high = c.submit(&["--qos=urgent", "-n2", "-o", "/dev/null", "--wrap", "sleep 1"]);
    c.wait_state(high, &["RUNNING", "COMPLETED"], Duration::from_secs(15));
    c.wait_state(low, &["PREEMPTED"], Duration::from_secs(15));
    // A job of a QoS nobody may preempt stays.
    let other = c.submit(&["-n2", "-o", "/dev/null", "--wrap", "sleep 120"]);
    c.wait_state(other, &["RUNNING"], Duration::from_secs(30));
    let high2 = c.submit(&["--qos=urgent", "-n2", "-o", "/dev/null", "--wrap", "sleep 1"]);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!((c.state(other).as_str(), c.state(high2).as_str()), ("RUNNING", "PENDING"));
    c.ok("scancel", &[&other.to_string(), &high2.to_string()]);
}

#[test]
fn a_qos_in_suspend_mode_is_stopped_for_the_high_job_and_resumed_after_it() {
    let c = cluster("SUSPEND,GANG", &[&["low"], &["high", "Preempt=low"]], "high");
    let counter = c.path().join("low.count");
    let script = format!("for i in $(seq 600); do echo $i >> {}; sleep 0.1; done", counter.display());
    let count = || std::fs::read_to_string(&counter).unwrap_or_default().lines().count();
    let low = c.submit(&["--qos=low", "-n2", "-o", "/dev/null", "--wrap", &script]);
    c.wait_until("the low job to count", Duration::from_secs(30), || count() > 0);
    let high = c.submit(&["--qos=high", "-n2", "-o", "/dev/null", "--wrap", "sleep 3"]);
    c.wait_state(low, &["SUSPENDED"], Duration::from_secs(15));
    c.wait_state(high, &["RUNNING", "COMPLETED"], Duration::from_secs(15));
    // Stopped: it counts no further while the high job runs.
    std::thread::sleep(Duration::from_millis(500));
    let stopped_at = count();
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(count(), stopped_at, "a suspended job does not run");
    c.wait_state(high, &["COMPLETED"], Duration::from_secs(30));
    c.wait_state(low, &["RUNNING"], Duration::from_secs(15));
    c.wait_until("the low job to count again", Duration::from_secs(10), || count() > stopped_at);
    c.ok("scancel", &[&low.to_string()]);
}

#[test]
fn a_higher_tier_partition_preempts_a_lower_one_on_shared_nodes() {
    // preempt/partition_prio, no accounting: the partitions' PriorityTier decide.
    let c = Cluster::start(
        EXE,
        Options {
            nodes: 1,
            cpus: 2,
            partitions: "PartitionName=scavenge Nodes=ALL Default=YES PriorityTier=1 PreemptMode=REQUEUE GraceTime=2\n\
                         PartitionName=urgent Nodes=ALL PriorityTier=10\n\
                         PartitionName=peer Nodes=ALL PriorityTier=1\n"
                .into(),
            extra_conf: "PreemptType=preempt/partition_prio\nPreemptMode=CANCEL\n".into(),
            ..Default::default()
        },
    );
    let dir = c.path().display().to_string();
    let script = format!("trap 'echo term >> {dir}/low.term' TERM; for i in $(seq 120); do sleep 1; done");
    let low = c.submit(&["-p", "scavenge", "-n2", "--requeue", "-o", "/dev/null", "--wrap", &script]);
    c.wait_state(low, &["RUNNING"], Duration::from_secs(30));
    // A job of an equal tier waits its turn.
    let peer = c.submit(&["-p", "peer", "-n2", "-o", "/dev/null", "--wrap", "sleep 1"]);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(c.state(peer), "PENDING");
    assert_eq!(c.state(low), "RUNNING");
    // One of a higher tier preempts it: SIGTERM, the partition's GraceTime, then requeued
    // (its partition's PreemptMode, not the cluster's CANCEL).
    let high = c.submit(&["-p", "urgent", "-n2", "-o", "/dev/null", "--wrap", "sleep 2"]);
    c.wait_until("the low job to get SIGTERM", Duration::from_secs(10), || c.path().join("low.term").exists());
    c.wait_state(high, &["RUNNING", "COMPLETED"], Duration::from_secs(20));
    let st = c.state(low);
    assert!(st == "PENDING" || st == "RUNNING", "requeued, not cancelled: {st}");
    // The higher tier's jobs also go first in the queue: after the urgent job, the requeued
    // scavenger job and the peer compete in their own tier by priority (submit order).
    c.wait_state(high, &["COMPLETED"], Duration::from_secs(20));
    c.ok("scancel", &[&low.to_string(), &peer.to_string()]);
}

#[test]
fn a_higher_tier_partition_is_scheduled_first() {
    let c = Cluster::start(
        EXE,
        Options {
            nodes: 1,
            cpus: 1,
            partitions:
                "PartitionName=low Nodes=ALL Default=YES PriorityTier=1\nPartitionName=high Nodes=ALL PriorityTier=2\n"
                    .into(),
            ..Default::default()
        },
    );
    let blocker = c.submit(&["-t", "5", "--wrap", "sleep 120"]);
    c.wait_state(blocker, &["RUNNING"], Duration::from_secs(20));
    let order = c.path().join("order");
    let note = format!("echo $SLURM_JOB_ID >> {}", order.display());
    let first = c.submit(&["-p", "low", "-t", "1", "--wrap", &note]);
    let second = c.submit(&["-p", "high", "-t", "1", "--wrap", &note]);
    c.ok("scancel", &[&blocker.to_string()]);
    c.wait_until("both ran", Duration::from_secs(20), || {
        std::fs::read_to_string(&order).unwrap_or_default().lines().count() == 2
    });
    // The later job of the higher tier ran first.
    assert_eq!(std::fs::read_to_string(&order).unwrap(), format!("{second}\n{first}\n"));
}
