//! Options of a job's request that choose its nodes and bound its time, on real clusters:
//! `--mincpus`, `-B`/`--threads-per-core`, `--deadline`/`--time-min`,
//! `--kill-on-invalid-dep`, as Slurm 22.05 treats them.

use drover_testkit::{Cluster, Options};
use std::time::Duration;

const EXE: &str = env!("CARGO_BIN_EXE_drover");

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

fn show(c: &Cluster, id: u32) -> String {
    c.ok("scontrol", &["show", "job", &id.to_string()])
}

/// `--mincpus`: nodes with fewer CPUs are out, and each node taken gives the job that many
/// CPUs however few its tasks need; more than any node has is refused at submit, unless the
/// job is held (Slurm looks at a held job's fit once it is released).
#[test]
fn mincpus_takes_at_least_that_many_cpus_on_each_node() {
    let c = Cluster::start(
        EXE,
        Options {
            nodes: 2,
            node_line: Some(
                "NodeName=node1 NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=1 RealMemory=1000\n\
                 NodeName=node2 NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=4 RealMemory=1000"
                    .into(),
            ),
            ..Default::default()
        },
    );
    let id = c.submit(&["--mincpus=3", "-n", "1", "--wrap", "sleep 30"]);
    c.wait_state(id, &["RUNNING"], Duration::from_secs(20));
    let s = show(&c, id);
    assert!(s.contains("NodeList=node2") && s.contains("NumCPUs=3") && s.contains("MinCPUsNode=3"), "{s}");
    // The node has one CPU left: a second such job waits, a one-CPU job runs beside it.
    let wait = c.submit(&["--mincpus=3", "-w", "node2", "--wrap", "true"]);
    let small = c.submit(&["-w", "node2", "--wrap", "true"]);
    c.wait_state(small, &["COMPLETED"], Duration::from_secs(20));
    assert_eq!(c.state(wait), "PENDING");
    let o = c.run("sbatch", &["--mincpus=5", "--wrap", "true"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        "sbatch: error: Batch job submission failed: Requested node configuration is not available\n"
    );
    let held = c.submit(&["-H", "--mincpus=5", "--wrap", "true"]);
    assert!(show(&c, held).contains("MinCPUsNode=5"));
    c.ok("scancel", &[&id.to_string()]);
}

/// `-B`, `--threads-per-core`, `--hint=nomultithread`: only nodes with at least that many
/// sockets, cores and threads; `scontrol show job` says what was asked as Slurm does.
#[test]
fn sockets_cores_and_threads_pick_nodes_that_have_them() {
    let c = Cluster::start(
        EXE,
        Options {
            nodes: 2,
            node_line: Some(
                "NodeName=node1 NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=2 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=1000\n\
                 NodeName=node2 NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=4 SocketsPerBoard=2 CoresPerSocket=1 ThreadsPerCore=2 RealMemory=1000"
                    .into(),
            ),
            ..Default::default()
        },
    );
    for (args, node) in [
        (&["--threads-per-core=2"][..], "node2"),
        (&["-B", "2"][..], "node2"),
        (&["--cores-per-socket=2"][..], "node1"),
        (&["-B", "1:2:1"][..], "node1"),
    ] {
        let mut a = args.to_vec();
        a.extend(["--wrap", "true"]);
        let id = c.submit(&a);
        c.wait_state(id, &["COMPLETED"], Duration::from_secs(20));
        assert!(show(&c, id).contains(&format!("NodeList={node}")), "{args:?}: {}", show(&c, id));
    }
    let id = c.submit(&["-H", "-B", "2:1:2", "--ntasks-per-core=1", "--wrap", "true"]);
    let s = show(&c, id);
    assert!(s.contains("ReqB:S:C:T=0:0:1:2") && s.contains("Socks/Node=2 NtasksPerN:B:S:C=0:0:*:1"), "{s}");
    let id = c.submit(&["-H", "--hint=nomultithread", "--wrap", "true"]);
    assert!(show(&c, id).contains("ReqB:S:C:T=0:0:*:1"));
    let o = c.run("sbatch", &["--threads-per-core=4", "--wrap", "true"]);
    assert_eq!(
        stderr(&o),
        "sbatch: error: Batch job submission failed: Requested node configuration is not available\n"
    );
    let o = c.run("sbatch", &["--hint=bogus", "--wrap", "true"]);
    assert_eq!(
        (o.status.code(), stderr(&o)),
        (Some(1), "sbatch: error: unrecognized --hint argument \"bogus\", see --hint=help\n".into())
    );
}

/// `--deadline`: refused when the limit or `--time-min` cannot fit before it; a job that
/// starts runs with a limit that ends by it; one that waits until it can no longer make it
/// ends `DEADLINE`, exit code 1, reason `DeadLine`.
#[test]
fn a_deadline_bounds_the_limit_and_ends_a_job_that_cannot_make_it() {
    let c = Cluster::start(EXE, Options { nodes: 1, cpus: 1, ..Default::default() });
    let now = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let at = |secs: u64| {
        let o = std::process::Command::new("date")
            .args(["-d", &format!("@{}", now() + secs), "+%Y-%m-%dT%H:%M:%S"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    let o = c.run("sbatch", &["-t", "10", &format!("--deadline={}", at(120)), "--wrap", "true"]);
    assert_eq!(
        stderr(&o),
        "sbatch: error: Batch job submission failed: Requested time limit is invalid (missing or exceeds some limit)\n"
    );
    let o = c.run("sbatch", &["--time-min=5", &format!("--deadline={}", at(120)), "--wrap", "true"]);
    assert_eq!(stderr(&o), "sbatch: error: Batch job submission failed: Invalid time-min specification (exceeds job's time or other limits)\n");

    let first = c.submit(&["-t", "10", &format!("--deadline={}", at(200)), "--time-min=1", "--wrap", "sleep 60"]);
    c.wait_state(first, &["RUNNING"], Duration::from_secs(20));
    let s = show(&c, first);
    assert!(s.contains("TimeLimit=00:03:00 TimeMin=00:01:00"), "the limit ends by the deadline: {s}");
    // Behind it on the one CPU: a minute's work that must end within 65 s.
    let late = c.submit(&["--time-min=1", &format!("--deadline={}", at(65)), "--wrap", "true"]);
    c.wait_state(late, &["DEADLINE"], Duration::from_secs(30));
    let s = show(&c, late);
    assert!(s.contains("JobState=DEADLINE Reason=DeadLine") && s.contains("ExitCode=1:0"), "{s}");
    assert_eq!(c.state(first), "RUNNING");
    c.ok("scancel", &[&first.to_string()]);
}

/// `--kill-on-invalid-dep=yes` ends a job whose dependency can never be satisfied; `no`
/// keeps it waiting even where `SchedulerParameters=kill_invalid_depend` would end it.
#[test]
fn kill_on_invalid_dep_ends_or_keeps_a_job_whose_dependency_failed() {
    let c = Cluster::start(
        EXE,
        Options { nodes: 1, extra_conf: "SchedulerParameters=kill_invalid_depend\n".into(), ..Default::default() },
    );
    let failed = c.submit(&["--wrap", "exit 3"]);
    c.wait_state(failed, &["FAILED"], Duration::from_secs(20));
    let dep = format!("--dependency=afterok:{failed}");
    let killed = c.submit(&["--kill-on-invalid-dep=yes", &dep, "--wrap", "true"]);
    let by_conf = c.submit(&[&dep, "--wrap", "true"]);
    let kept = c.submit(&["--kill-on-invalid-dep=no", &dep, "--wrap", "true"]);
    c.wait_state(killed, &["CANCELLED"], Duration::from_secs(20));
    c.wait_state(by_conf, &["CANCELLED"], Duration::from_secs(20));
    let s = show(&c, kept);
    assert!(s.contains("JobState=PENDING Reason=DependencyNeverSatisfied"), "{s}");
    assert!(s.contains("KillOInInvalidDependent=No"), "{s}");
    assert!(show(&c, killed).contains("KillOInInvalidDependent=Yes"));
}
