//! A node that stops answering for `SlurmdTimeout`: its batch jobs that may be requeued go
//! back to the queue (their run recorded `NODE_FAIL`, as Slurm records it), the others end
//! `NODE_FAIL`. A requeued job is fenced on the failed node: it does not start elsewhere
//! until that node is known to have stopped its last run (its agent comes back and stops
//! it, or an operator sets the node DOWN), so a node cut off from the controller but still
//! running the job never runs it beside its new run.

use drover_testkit::{Cluster, Options};
use std::time::Duration;

const EXE: &str = env!("CARGO_BIN_EXE_drover");

fn cluster() -> Cluster {
    Cluster::start(
        EXE,
        Options { nodes: 2, accounting: true, extra_conf: "SlurmdTimeout=3\n".into(), ..Default::default() },
    )
}

/// A job whose every run appends its start (and whether an earlier run still lives) to
/// `runs.ID`; the first run sleeps, the next ones end at once.
fn job(c: &Cluster, extra: &[&str]) -> u32 {
    let script = "f=runs.$SLURM_JOB_ID; \
                  for p in $(cut -d' ' -f2 $f 2>/dev/null); do kill -0 $p 2>/dev/null && echo OVERLAP >> $f; done; \
                  r=${SLURM_RESTART_COUNT:-0}; echo \"$r $$ $SLURMD_NODENAME\" >> $f; \
                  [ $r = 0 ] && sleep 120; true";
    let mut args = vec!["-o", "/dev/null"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--wrap", script]);
    c.submit(&args)
}

/// The node a job's first run started on.
fn first_node(c: &Cluster, id: u32) -> String {
    c.wait_until("the first run to start", Duration::from_secs(30), || runs(c, id).starts_with("0 "));
    runs(c, id).lines().next().unwrap().rsplit(' ').next().unwrap().to_string()
}

fn other(node: &str) -> &'static str {
    if node == "node1" {
        "node2"
    } else {
        "node1"
    }
}

fn runs(c: &Cluster, id: u32) -> String {
    std::fs::read_to_string(c.path().join(format!("runs.{id}"))).unwrap_or_default()
}

fn reason(c: &Cluster, id: u32) -> String {
    c.ok("squeue", &["-h", "-j", &id.to_string(), "-o", "%T %r"]).trim().to_string()
}

#[test]
fn a_requeued_job_waits_for_its_failed_node_to_stop_it() {
    let mut c = cluster();
    let id = job(&c, &[]);
    let node = first_node(&c, id);

    // The agent of its node dies; the job's processes (under their supervisor) go on, as on
    // a node cut off from the controller.
    c.kill_node(&node);
    c.wait_until("the job to be requeued", Duration::from_secs(30), || reason(&c, id) == "PENDING NodeDown");
    let state = c.ok("sinfo", &["-h", "-N", "-n", &node, "-o", "%T"]);
    assert_eq!(state.trim(), "down*", "the silent node is DOWN*");
    let explain = c.ok("drover", &["explain", &id.to_string()]);
    assert!(explain.contains(&format!("requeued after node {node} failed")), "{explain}");
    // The other node is idle, yet the job does not start there while its node may still
    // run it.
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(reason(&c, id), "PENDING NodeDown");
    assert_eq!(runs(&c, id).lines().count(), 1, "{}", runs(&c, id));

    // The node comes back: its agent reports the old run, is told to stop it, and once that
    // run has ended the job starts again.
    c.start_node(&node);
    c.wait_state(id, &["COMPLETED"], Duration::from_secs(60));
    let r = runs(&c, id);
    assert!(!r.contains("OVERLAP"), "the new run began while the old one lived: {r}");
    assert_eq!(r.lines().count(), 2, "{r}");
    assert!(r.lines().nth(1).unwrap().starts_with("1 "), "{r}");

    // Accounting: the first run NODE_FAIL, the second COMPLETED (once its end has reached
    // accounting, which trails the controller by a moment, longer on a loaded machine).
    let sacct = || c.ok("sacct", &["-D", "-X", "-n", "-P", "-j", &id.to_string(), "-o", "State"]);
    c.wait_until("the second run's end in accounting", Duration::from_secs(10), || {
        !sacct().lines().any(|l| l == "RUNNING" || l == "COMPLETING")
    });
    let out = sacct();
    assert_eq!(out.lines().collect::<Vec<_>>(), ["NODE_FAIL", "COMPLETED"], "{out}");
    assert!(c.logs().contains(&format!("requeue job {id} due to failure of node {node}")));
}

/// An operator who knows the node is dead (powered off) says so with State=DOWN: the job
/// starts elsewhere at once. A job that may not be requeued ends NODE_FAIL.
#[test]
fn an_operator_declares_the_node_dead_and_no_requeue_jobs_end() {
    let mut c = cluster();
    let requeued = job(&c, &[]);
    let node = first_node(&c, requeued);
    let ended = job(&c, &["--no-requeue", "-w", &node]);
    first_node(&c, ended);
    // The node dies for real: its agent and the jobs' processes.
    c.kill_node(&node);
    for pid in c.supervisor_pids() {
        for d in drover_testkit::descendants(pid) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(d), nix::sys::signal::Signal::SIGKILL);
        }
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
    }
    c.wait_state(ended, &["NODE_FAIL"], Duration::from_secs(30));
    c.wait_until("the job to be requeued", Duration::from_secs(30), || reason(&c, requeued) == "PENDING NodeDown");
    c.ok("scontrol", &["update", &format!("NodeName={node}"), "State=DOWN", "Reason=powered off"]);
    c.wait_state(requeued, &["COMPLETED"], Duration::from_secs(30));
    let r = runs(&c, requeued);
    let to = other(&node);
    assert!(r.lines().nth(1).is_some_and(|l| l.ends_with(to)), "the second run went to {to}: {r}");
    assert!(c.logs().contains(&format!("job {requeued}: node {node} was set DOWN by uid 0; the job may start again")));
}
