//! sacctmgr against real Slurm 22.05's output (`testdata/captures/slurm-22.05/`, captured with a
//! real slurmdbd): the same commands, in the same order, on a Drover cluster named `lab`
//! print the same bytes and exit with the same status.

use drover_testkit::{Capture, Cluster, Options};
use std::path::PathBuf;

const EXE: &str = env!("CARGO_BIN_EXE_drover");

fn captures() -> PathBuf {
    drover_testkit::testdata("captures/slurm-22.05")
}

/// The captured command line back into arguments (`Description=physics dept` was one).
fn split_command(cmd: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in cmd.split(' ') {
        match out.last_mut() {
            Some(last) if last.starts_with("Description=") && !w.contains('=') => {
                last.push(' ');
                last.push_str(w);
            }
            _ => out.push(w.to_string()),
        }
    }
    out
}

/// The cluster's SlurmctldPort.
fn port(c: &Cluster) -> u32 {
    let conf = std::fs::read_to_string(c.path().join("slurm.conf")).unwrap();
    conf.lines().find_map(|l| l.strip_prefix("SlurmctldPort=")).unwrap().trim().parse().unwrap()
}

fn check(c: &Cluster, name: &str) {
    let mut cap = Capture::load(&captures(), name, split_command);
    assert_eq!(cap.cmd[0], "sacctmgr");
    if name.starts_with("sacctmgr_show_cluster") {
        // The lab's slurmctld had not registered when these were captured (ControlHost
        // empty, ControlPort and RPC 0); this cluster's controller has: where it connected
        // from, its port and 22.05's protocol version, as slurmdbd shows a registered one.
        let p = port(c);
        cap.out = cap
            .out
            .replace("lab||0|0", &format!("lab|127.0.0.1|{p}|9728"))
            .replace(&format!("{:>15} {:>12} {:>5}", "", 0, 0), &format!("{:>15} {p:>12} {:>5}", "127.0.0.1", 9728));
    }
    if let Err(e) = c.matches(&cap) {
        panic!("{e}");
    }
}

#[test]
fn sacctmgr_matches_slurm_command_by_command() {
    let c = Cluster::start(EXE, Options { nodes: 1, accounting: true, cluster: "lab".into(), ..Default::default() });
    // As slurmctld does, the controller registers its cluster (the lab's was added first).
    let registered = format!("lab|{}\n", port(&c));
    c.wait_until("the cluster to be registered", std::time::Duration::from_secs(20), || {
        c.run("sacctmgr", &["-n", "-P", "show", "cluster", "format=cluster,controlport"]).stdout
            == registered.as_bytes()
    });
    // Options anywhere on the line, as getopt permutes them.
    let late = c.ok("sacctmgr", &["show", "cluster", "format=cluster,controlport", "-n", "-P"]);
    assert_eq!(late, format!("lab|{}\n", port(&c)));
    for name in [
        "sacctmgr_show_cluster",
        "sacctmgr_add_account",
        "sacctmgr_add_account_child",
        "sacctmgr_add_account_exists",
        "sacctmgr_add_user",
        "sacctmgr_add_user2",
        "sacctmgr_show_account",
        "sacctmgr_show_account_withassoc",
        "sacctmgr_show_user",
        "sacctmgr_show_user_withassoc",
        "sacctmgr_show_assoc",
        "sacctmgr_show_assoc_P",
        "sacctmgr_show_assoc_tree",
        "sacctmgr_show_qos",
        "sacctmgr_add_qos",
        "sacctmgr_show_qos_fmt",
        "sacctmgr_modify_user",
        "sacctmgr_modify_user_where",
        "sacctmgr_show_assoc_fmt",
        "sacctmgr_modify_nosuch",
        "sacctmgr_delete_nosuch",
        "sacctmgr_show_bad",
        "sacctmgr_show_user_n",
        "sacctmgr_delete_user",
        "sacctmgr_list_users_P",
        "sacctmgr_show_cluster_P",
        "sacctmgr_add_user_badacct",
    ] {
        check(&c, name);
    }
    // The lab then deleted account theory (that run's output was not kept).
    let del = c.ok("sacctmgr", &["-i", "delete", "account", "theory"]);
    assert_eq!(del, " Deleting accounts...\n  theory\n");
    for name in [
        "sacctmgr_modify_qos",
        "sacctmgr_show_assoc_where_user",
        "sacctmgr_show_user_named",
        "sacctmgr_show_user_nP",
        "sacctmgr_add_cluster_exists",
        "sacctmgr_add_account_bad_parent",
        "sacctmgr_modify_account",
        "sacctmgr_show_assoc_fmt2",
        "sacctmgr_delete_qos",
        "sacctmgr_delete_user_bob",
        "sacctmgr_delete_account_theory",
        "sacctmgr_show_qos_P",
        "sacctmgr_add_user_noacct",
        "sacctmgr_modify_bad_field",
    ] {
        check(&c, name);
    }
    let added = c.ok("sacctmgr", &["-i", "add", "cluster", "extra"]);
    assert_eq!(added, " Adding Cluster(s)\n  Name           = extra\n");
}

/// Anyone may read accounting; changes come from root or an accounting Operator or
/// Administrator (the local socket's peer credentials say who asks); a user's sacct shows
/// their own jobs.
#[test]
fn only_administrators_change_accounting() {
    if !drover_testkit::root_or_skip("needs root to create a test user") {
        return;
    }
    let u = drover_testkit::TestUser::create(&format!("drvm{}", std::process::id() % 10000));
    let c = Cluster::start(EXE, Options { nodes: 1, accounting: true, ..Default::default() });
    c.wait_until("the cluster to be registered", std::time::Duration::from_secs(20), || {
        c.run("sacctmgr", &["-n", "-P", "show", "cluster", "format=cluster"]).stdout == b"test\n"
    });
    let tmp = std::path::Path::new("/tmp");
    let denied = c.run_as(&u, "sacctmgr", &["-i", "add", "account", "physics"], tmp);
    assert_eq!(denied.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&denied.stderr), "sacctmgr: error: Access/permission denied\n");
    let show = c.run_as(&u, "sacctmgr", &["-n", "-P", "show", "account"], tmp);
    assert_eq!(String::from_utf8_lossy(&show.stdout), "root|default root account|root\n");
    // Made an Operator, the user may.
    c.ok("sacctmgr", &["-i", "add", "user", &u.name, "Account=root", "AdminLevel=Operator"]);
    let ok = c.run_as(&u, "sacctmgr", &["-i", "add", "account", "physics"], tmp);
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    assert_eq!(
        c.ok("sacctmgr", &["-n", "-P", "show", "account", "physics", "format=account,org"]),
        "physics|physics\n"
    );
}
