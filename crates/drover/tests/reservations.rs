//! Advance reservations on a real cluster: `scontrol create|update|delete|show reservation`,
//! `sinfo -T`, node states, `--reservation`, the reasons outsiders wait with, and windows
//! that close (members ended, waiting members held) or repeat. Parts need root (a user who
//! is not in the reservation).

use drover_testkit::{words, Capture, Cluster, Options, TestUser};
use std::time::Duration;

const EXE: &str = env!("CARGO_BIN_EXE_drover");

fn text(o: &std::process::Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

fn reason(c: &Cluster, id: u32) -> String {
    c.ok("squeue", &["-h", "-j", &id.to_string(), "-o", "%r"]).trim().to_string()
}

fn nodes(c: &Cluster, id: u32) -> String {
    c.ok("squeue", &["-h", "-j", &id.to_string(), "-o", "%N"]).trim().to_string()
}

#[test]
fn a_reservation_keeps_its_nodes_for_its_users() {
    if !drover_testkit::root_or_skip("needs root to create a test user") {
        return;
    }
    let outsider = TestUser::create(&format!("drvr{}", std::process::id() % 10000));
    let mut c = Cluster::start(EXE, Options { nodes: 3, cpus: 2, ..Default::default() });
    let out =
        c.ok("scontrol", &["create", "reservation", "starttime=now", "duration=60", "nodes=node[1-2]", "users=root"]);
    assert_eq!(out, "Reservation created: root_1\n");
    let show = c.ok("scontrol", &["show", "reservation"]);
    let lines: Vec<&str> = show.lines().collect();
    assert!(lines[0].starts_with("ReservationName=root_1 StartTime="), "{show}");
    assert!(lines[0].ends_with(" Duration=01:00:00"), "{show}");
    assert_eq!(
        lines[1],
        "   Nodes=node[1-2] NodeCnt=2 CoreCnt=4 Features=(null) PartitionName=(null) Flags=SPEC_NODES"
    );
    assert_eq!(lines[2], "   TRES=cpu=4");
    assert_eq!(
        lines[3],
        "   Users=root Groups=(null) Accounts=(null) Licenses=(null) State=ACTIVE BurstBuffer=(null) Watts=n/a"
    );
    assert_eq!(lines[4], "   MaxStartDelay=(null)");
    assert_eq!(lines[5], "");
    let one = c.ok("scontrol", &["show", "res", "-o", "root_1"]);
    assert_eq!(one.lines().count(), 1);
    assert!(one.contains(" Duration=01:00:00 Nodes=node[1-2] NodeCnt=2 "), "{one}");
    let t = c.ok("sinfo", &["-T"]);
    assert!(
        t.starts_with("RESV_NAME     STATE           START_TIME             END_TIME     DURATION  NODELIST\n"),
        "{t}"
    );
    assert!(t.lines().nth(1).unwrap().starts_with("root_1       ACTIVE  "), "{t}");
    assert!(t.lines().nth(1).unwrap().ends_with("     01:00:00  node[1-2]"), "{t}");
    assert_eq!(
        c.ok("sinfo", &["-h", "-N", "-o", "%N %t %T"]),
        "node1 resv reserved\nnode2 resv reserved\nnode3 idle idle\n"
    );
    assert!(c.ok("scontrol", &["show", "node", "node1"]).contains("State=IDLE+RESERVED "));

    // Outsiders keep off; members run on its nodes.
    let wide = c.submit(&["-N", "2", "-t", "5", "--wrap", "sleep 60"]);
    let small = c.submit(&["-t", "5", "--wrap", "sleep 60"]);
    let member = c.submit(&["--reservation=root_1", "-N", "2", "-t", "5", "--wrap", "sleep 60"]);
    c.wait_state(small, &["RUNNING"], Duration::from_secs(20));
    c.wait_state(member, &["RUNNING"], Duration::from_secs(20));
    assert_eq!(nodes(&c, small), "node3");
    assert_eq!(nodes(&c, member), "node[1-2]");
    c.wait_until("the outsider's reason", Duration::from_secs(10), || {
        reason(&c, wide) == "ReqNodeNotAvail, May be reserved for other job"
    });
    let show = c.ok("scontrol", &["show", "job", &member.to_string()]);
    assert!(show.contains("\n   Reservation=root_1\n"), "{show}");
    assert_eq!(c.ok("squeue", &["-h", "-j", &member.to_string(), "-o", "%v"]), "root_1\n");
    assert_eq!(c.ok("squeue", &["-h", "-j", &wide.to_string(), "-O", "Reservation:10"]).trim(), "(null)");

    let bad = c.run("sbatch", &["--reservation=nosuch", "--wrap", "true"]);
    assert_eq!(bad.status.code(), Some(1));
    assert_eq!(text(&bad).1, "sbatch: error: Batch job submission failed: Requested reservation is invalid\n");
    let dir = c.path().to_path_buf();
    let o = c.run_as(&outsider, "sbatch", &["--reservation=root_1", "-o", "/dev/null", "--wrap", "true"], &dir);
    assert_eq!(text(&o).1, "sbatch: error: Batch job submission failed: Access denied to requested reservation\n");
    let o = c.run_as(
        &outsider,
        "scontrol",
        &["create", "res", "starttime=now", "duration=5", "nodes=node3", "users=root"],
        &dir,
    );
    assert_eq!(text(&o).1, "Error creating the reservation: Access/permission denied\n");

    // Errors, in scontrol's words.
    let e = |args: &[&str]| text(&c.run("scontrol", args));
    assert_eq!(
        e(&["create", "res", "duration=10", "nodes=node3", "users=root"]).1,
        "scontrol: error: A start time must be given.  No reservation created.\n"
    );
    assert_eq!(
        e(&["create", "res", "starttime=now", "nodes=node3", "users=root"]).1,
        "scontrol: error: An end time or duration must be given.  No reservation created.\n"
    );
    assert_eq!(
        e(&["create", "res", "starttime=now", "duration=10", "users=root"]).1,
        "scontrol: error: CoreCnt, Nodes, NodeCnt, BurstBuffer, Licenses or Watts must be specified.  No reservation created.\n"
    );
    assert_eq!(
        e(&["create", "res", "starttime=now", "duration=10", "nodes=node9", "users=root"]).1,
        "Error creating the reservation: Invalid node name specified\n"
    );
    assert_eq!(
        e(&["create", "res", "starttime=now", "duration=10", "nodes=node1", "users=root"]).1,
        "Error creating the reservation: Requested reservation overlaps with another reservation\n"
    );
    let busy = e(&["create", "res", "starttime=now", "duration=10", "nodes=node3", "users=root"]);
    assert_eq!(busy.1, "Error creating the reservation: Requested nodes are busy\n");
    assert!(busy.0.starts_with("Note, unless nodes are directly requested"), "{busy:?}");
    assert_eq!(
        e(&["create", "res", "starttime=now", "duration=10", "nodes=node3", "users=nosuchuser", "flags=ignore_jobs"]).1,
        "Error creating the reservation: Invalid user id\n"
    );
    assert_eq!(
        e(&[
            "create",
            "res",
            "reservationname=root_1",
            "starttime=now+2days",
            "duration=10",
            "nodes=node3",
            "users=root"
        ])
        .1,
        "Error creating the reservation: Duplicate reservation name\n"
    );
    assert_eq!(e(&["show", "res", "nosuch"]).0, "Reservation nosuch not found\n");
    assert_eq!(
        e(&["delete", "reservation", "root_1"]).1,
        "delete_reservation reservation: Requested reservation is in use\n"
    );
    assert_eq!(
        e(&["update", "reservationname=nosuch", "duration=5"]).1,
        "Error updating the reservation: Requested reservation is invalid\nslurm_update error: Requested reservation is invalid\n"
    );

    // A future maintenance window, on counted nodes of the default partition.
    let out = c.ok(
        "scontrol",
        &["create", "res", "starttime=now+1hour", "duration=30", "nodecnt=1", "users=root", "flags=maint"],
    );
    assert_eq!(out, "Reservation created: root_2\n");
    let show = c.ok("scontrol", &["show", "res", "root_2"]);
    assert!(
        show.contains("   Nodes=node1 NodeCnt=1 CoreCnt=2 Features=(null) PartitionName=debug Flags=MAINT\n"),
        "{show}"
    );
    assert!(show.contains(" State=INACTIVE "), "{show}");
    let waiting = c.submit(&["--reservation=root_2", "-t", "5", "--wrap", "true"]);
    c.wait_until("the member's reason", Duration::from_secs(10), || reason(&c, waiting) == "Reservation");

    // Changes, and the state survives a restart of the controller.
    assert_eq!(
        c.ok("scontrol", &["update", "reservationname=root_1", &format!("users+={}", outsider.name)]),
        "Reservation updated.\n"
    );
    assert_eq!(
        c.ok("scontrol", &["update", "reservationname=root_2", "flags-=maint", "duration+=30"]),
        "Reservation updated.\n"
    );
    c.kill_controller();
    c.start_controller();
    c.wait_until("the controller answers", Duration::from_secs(20), || c.run("squeue", &["-h"]).status.success());
    let show = c.ok("scontrol", &["show", "res", "root_1"]);
    assert!(show.contains(&format!("   Users=root,{} Groups=(null)", outsider.name)), "{show}");
    let show = c.ok("scontrol", &["show", "res", "root_2"]);
    assert!(show.contains(" Duration=01:00:00\n"), "{show}");
    assert!(show.contains(" PartitionName=debug Flags=\n"), "{show}");
    // A busy node in a reservation is busy first (`mix`, not `resv`), once its agent is back.
    c.wait_until("node1 back", Duration::from_secs(20), || {
        c.ok("sinfo", &["-h", "-N", "-n", "node1", "-o", "%t"]) == "mix\n"
    });
    let o = c.run_as(
        &outsider,
        "sbatch",
        &["--parsable", "--reservation=root_1", "-o", "/dev/null", "--wrap", "true"],
        &dir,
    );
    assert!(o.status.success(), "{}", text(&o).1);

    c.ok("scancel", &[&waiting.to_string(), &member.to_string()]);
    c.wait_state(member, &["CANCELLED"], Duration::from_secs(20));
    c.wait_until("the outsider's job ends", Duration::from_secs(20), || {
        c.ok("squeue", &["-h", "-o", "%v"]).trim().lines().all(|l| l != "root_1")
    });
    assert_eq!(c.ok("scontrol", &["delete", "reservation", "root_2"]), "");
    assert_eq!(c.ok("scontrol", &["delete", "ReservationName=root_1"]), "");
    assert_eq!(c.ok("sinfo", &["-T"]), "No reservations in the system\n");
    assert_eq!(c.ok("scontrol", &["show", "reservation"]), "No reservations in the system\n");
    // The outsiders' job may use the nodes now.
    c.wait_state(wide, &["RUNNING"], Duration::from_secs(20));
}

#[test]
fn a_window_that_closes_ends_its_jobs_and_a_daily_one_comes_back_tomorrow() {
    let c = Cluster::start(EXE, Options { nodes: 2, cpus: 1, ..Default::default() });
    let out =
        c.ok("scontrol", &["create", "res", "starttime=now", "endtime=now+4seconds", "nodes=node1", "users=root"]);
    assert_eq!(out, "Reservation created: root_1\n");
    c.ok(
        "scontrol",
        &["create", "res", "starttime=now", "endtime=now+4seconds", "nodes=node2", "users=root", "flags=daily"],
    );
    let running = c.submit(&["--reservation=root_1", "-t", "10", "--wrap", "sleep 300"]);
    let waiting = c.submit(&["--reservation=root_1", "-t", "10", "--wrap", "true"]);
    c.wait_state(running, &["RUNNING"], Duration::from_secs(20));
    // Its limit is cut to the window's end: it times out with it.
    let show = c.ok("scontrol", &["show", "job", &running.to_string()]);
    assert!(show.contains("TimeLimit=00:00:0"), "{show}");
    c.wait_state(running, &["TIMEOUT"], Duration::from_secs(20));
    c.wait_until("the waiting member is held", Duration::from_secs(20), || reason(&c, waiting) == "ReservationDeleted");
    let t = c.ok("sinfo", &["-h", "-T"]);
    assert_eq!(t.lines().count(), 1, "{t}");
    assert!(t.starts_with("root_2     INACTIVE  "), "{t}");
    let show = c.ok("scontrol", &["show", "res", "root_2"]);
    let start = show.split("StartTime=").nth(1).unwrap().split(' ').next().unwrap().to_string();
    let tomorrow = std::process::Command::new("date").args(["-d", "tomorrow", "+%Y-%m-%d"]).output().unwrap();
    assert!(start.starts_with(String::from_utf8_lossy(&tomorrow.stdout).trim()), "{show}");
    // Its user may release it: it runs anywhere now.
    c.ok("scontrol", &["release", &waiting.to_string()]);
    c.wait_state(waiting, &["COMPLETED"], Duration::from_secs(20));
}

fn captures() -> std::path::PathBuf {
    drover_testkit::testdata("captures/slurm-22.05")
}

#[test]
fn reservation_commands_match_slurm() {
    // The lab's shape: four nodes of two CPUs in partitions cpu (the default) and gpu.
    let c = Cluster::start(
        EXE,
        Options {
            nodes: 4,
            cpus: 2,
            partitions: "PartitionName=cpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n\
                         PartitionName=gpu Nodes=ALL MaxTime=INFINITE State=UP\n"
                .into(),
            ..Default::default()
        },
    );
    // In the captures' order: each sees what the ones before it left.
    let mut failed = Vec::new();
    for name in Capture::names(&captures(), "resv_") {
        failed.extend(c.matches(&Capture::load(&captures(), &name, words)).err());
    }
    assert!(failed.is_empty(), "{} of the captures differ:\n{}", failed.len(), failed.join("\n"));
}

/// The entity word of `scontrol create` may name the reservation itself
/// (`ReservationName=X`, `reservation=X`), as scontrol reads it; a bare word gets Slurm's
/// generated name.
#[test]
fn create_takes_the_name_from_the_entity_word() {
    let c = Cluster::start(EXE, Options { nodes: 1, ..Default::default() });
    let rest = ["StartTime=now+1hour", "Duration=60", "Users=root", "Nodes=node1"];
    let create = |first: &str| {
        let mut args = vec!["create", first];
        args.extend(rest);
        c.ok("scontrol", &args)
    };
    assert_eq!(create("ReservationName=maint"), "Reservation created: maint\n");
    c.ok("scontrol", &["delete", "ReservationName=maint"]);
    assert_eq!(create("reservation=other"), "Reservation created: other\n");
    c.ok("scontrol", &["delete", "reservation=other"]);
    assert_eq!(create("reservation"), "Reservation created: root_1\n");
}
