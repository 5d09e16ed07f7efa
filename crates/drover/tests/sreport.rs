//! sreport against real Slurm 22.05's output (`testdata/captures/slurm-22.05/sreport_*`): the
//! lab's day (its accounts, users, five jobs and a node down two hours, as the captures'
//! README tells) is recorded into a Drover cluster named `lab` for yesterday, rolled up by
//! `drover accounting`, and every captured sreport command prints the same bytes and exits
//! with the same status. The captures' dates are read as the lab's yesterday, today and
//! the day before.

use drover_proto::v1;
use drover_testkit::{Capture, Cluster, NamedUser, Options};
use std::path::PathBuf;
use std::time::Duration;

const EXE: &str = env!("CARGO_BIN_EXE_drover");

fn captures() -> PathBuf {
    drover_testkit::testdata("captures/slurm-22.05")
}

/// Local midnights: the day before yesterday, yesterday, today.
fn days() -> [jiff::Zoned; 3] {
    let today = jiff::Zoned::now().start_of_day().unwrap();
    let y = today.yesterday().unwrap();
    [y.yesterday().unwrap(), y, today]
}

/// The capture's dates (2026-12-01, -02, -03) as the test's days.
fn redate(s: &str) -> String {
    let d = days();
    // In one pass: a date replaced is never read again (on 2026-12-04 the capture's
    // 12-01 becomes 12-02, which a second pass would move on to 12-03).
    let dates = ["2026-12-01", "2026-12-02", "2026-12-03"];
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some((at, k)) = dates.iter().enumerate().filter_map(|(k, day)| rest.find(day).map(|at| (at, k))).min() {
        out.push_str(&rest[..at]);
        out.push_str(&d[k].strftime("%Y-%m-%d").to_string());
        rest = &rest[at + dates[k].len()..];
    }
    out.push_str(rest);
    out
}

/// Runs capture `name` (its dates read as the test's days) here.
fn check(c: &Cluster, name: &str) -> Result<(), String> {
    let mut cap = Capture::load(&captures(), name, |cmd| redate(cmd).split(' ').map(String::from).collect());
    assert_eq!(cap.cmd[0], "sreport");
    cap.out = redate(&cap.out);
    cap.err = redate(&cap.err);
    c.matches(&cap)
}

/// A run of the lab's day: (id, user, account), [eligible, start, end] in seconds after
/// yesterday's midnight, (CPUs, nodes).
fn lab_job(id: u32, (user, acct): (&str, &str), t: [i64; 3], (cpus, nodes): (u32, u32), y: i64) -> v1::AcctJob {
    v1::AcctJob {
        cluster: "lab".into(),
        info: Some(v1::JobInfo {
            job_id: id,
            spec: Some(v1::JobSpec { name: "wrap".into(), user: user.into(), ..Default::default() }),
            state: "COMPLETED".into(),
            submit_time: y + t[0],
            eligible_time: y + t[0],
            start_time: y + t[1],
            end_time: y + t[2],
            partition: "cpu".into(),
            ..Default::default()
        }),
        req_tres: format!("cpu={cpus},mem=4000M,node=1,billing={cpus}"),
        alloc_tres: format!("cpu={cpus},node={nodes},billing={cpus}"),
        account: acct.into(),
        qos: "normal".into(),
        db_index: 0,
    }
}

/// The lab's resources at `time`, with `down` nodes (2 CPUs, 4000 MB each) since then.
fn lab_state(time: i64, down: &[&str]) -> v1::AcctRecords {
    v1::AcctRecords {
        cluster: "lab".into(),
        state: Some(v1::AcctClusterState {
            time,
            tres: "cpu=8,mem=16000,energy=0,node=4,billing=8,fs/disk=0,vmem=0,pages=0".into(),
            down: down
                .iter()
                .map(|n| v1::AcctNodeEvent {
                    node: n.to_string(),
                    start: time,
                    state: "DOWN".into(),
                    reason: "maint".into(),
                    tres: "cpu=2,mem=4000,billing=2".into(),
                    ..Default::default()
                })
                .collect(),
        }),
        ..Default::default()
    }
}

#[test]
fn sreport_matches_slurm_on_the_labs_day() {
    let [_, yesterday, today] = days();
    if today.timestamp().as_second() - yesterday.timestamp().as_second() != 86400 {
        eprintln!("yesterday was not 24 hours long (a clock change): the lab's day does not fit; skipped");
        return;
    }
    let _alice = NamedUser::ensure("alice", "Alice Tester");
    let _bob = NamedUser::ensure("bob", "Bob Tester");
    let c = Cluster::start(EXE, Options { nodes: 2, accounting: true, cluster: "lab".into(), ..Default::default() });
    c.wait_until("the cluster to be registered", Duration::from_secs(20), || {
        c.run("sacctmgr", &["-n", "-P", "show", "cluster", "format=cluster"]).stdout == b"lab\n"
    });
    let mut failed: Vec<String> = Vec::new();
    // Before any usage: the reports' headers alone.
    for name in [
        "sreport_empty_cluster_util",
        "sreport_empty_cluster_util_t",
        "sreport_empty_acct_by_user",
        "sreport_empty_user_by_acct",
        "sreport_empty_top",
        "sreport_empty_sizes",
        "sreport_empty_util_P",
    ] {
        failed.extend(check(&c, name).err());
    }
    c.add_lab_accounts();
    let y = yesterday.timestamp().as_second();
    const H: i64 = 3600;
    c.record_accounting(lab_state(y - 2 * 86400, &[]));
    let jobs = vec![
        lab_job(1, ("alice", "physics"), [-H, -H, 9000], (2, 1), y),
        lab_job(2, ("alice", "physics"), [H, 3 * H, 4 * H], (1, 1), y),
        lab_job(3, ("bob", "chem"), [10 * H, 10 * H, 16 * H + 1200], (4, 3), y),
        lab_job(4, ("bob", "theory"), [12 * H, 12 * H, 23 * H + 1800], (1, 1), y),
        lab_job(5, ("root", "chem"), [19 * H, 20 * H, 21 * H + 420], (1, 1), y),
    ];
    c.record_accounting(v1::AcctRecords { cluster: "lab".into(), jobs, ..Default::default() });
    c.record_accounting(lab_state(y + 6 * H, &["node4"]));
    c.record_accounting(lab_state(y + 8 * H, &[]));
    // The rollup runs soon after records change what it has (or has not yet) rolled up.
    c.wait_until("yesterday to be rolled up", Duration::from_secs(60), || check(&c, "sreport_cluster_util").is_ok());
    for name in Capture::names(&captures(), "sreport_").iter().filter(|n| !n.starts_with("sreport_empty_")) {
        failed.extend(check(&c, name).err());
    }
    assert!(failed.is_empty(), "{} of the captures differ:\n{}", failed.len(), failed.join("\n"));
}
