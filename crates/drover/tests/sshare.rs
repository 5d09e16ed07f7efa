//! sshare and fairshare: Slurm 22.05's output for the lab's tree (`testdata/captures/slurm-22.05/
//! sshare_mf_*`, alice having used 387 CPU-seconds) printed byte for byte from the
//! controller's usage; and fairshare putting a user who has used nothing ahead of one who
//! has, on a real cluster.

use drover_testkit::{Capture, Cluster, NamedUser, Options, TestUser};
use std::path::PathBuf;
use std::time::Duration;

const EXE: &str = env!("CARGO_BIN_EXE_drover");

fn captures() -> PathBuf {
    drover_testkit::testdata("captures/slurm-22.05")
}

fn check(c: &Cluster, name: &str) -> Result<(), String> {
    c.matches(&Capture::load(&captures(), name, drover_testkit::words))
}

/// The usage slurmctld had (its assoc_usage state): alice's 387 CPU-seconds; the
/// controller restarted to read it.
fn lab_usage(c: &mut Cluster) {
    c.kill_controller();
    let now = jiff::Timestamp::now().as_second();
    std::fs::write(c.path().join("state/assoc_usage"), format!("{now} {now}\nphysics\talice\t387.4\n")).unwrap();
    c.start_controller();
}

fn multifactor(extra: &str) -> Options {
    Options {
        nodes: 1,
        accounting: true,
        cluster: "lab".into(),
        extra_conf: format!("PriorityType=priority/multifactor\nPriorityWeightFairshare=10000\n{extra}"),
        ..Default::default()
    }
}

#[test]
fn sshare_matches_slurm_on_the_labs_tree() {
    // No decay, so the usage read from the state file stays what the capture had.
    let mut c = Cluster::start(EXE, multifactor("PriorityDecayHalfLife=0\n"));
    c.add_lab_accounts();
    lab_usage(&mut c);
    c.wait_until("the shares to be computed", Duration::from_secs(30), || check(&c, "sshare_mf").is_ok());
    let mut failed = Vec::new();
    for name in Capture::names(&captures(), "sshare_mf") {
        failed.extend(check(&c, &name).err());
    }
    assert!(failed.is_empty(), "{} of the captures differ:\n{}", failed.len(), failed.join("\n"));
}

#[test]
fn fairshare_puts_the_user_who_used_less_first() {
    let pid = std::process::id() % 10000;
    let heavy = TestUser::create(&format!("drvh{pid}"));
    let light = TestUser::create(&format!("drvl{pid}"));
    let c = Cluster::start(EXE, multifactor(""));
    c.ok("sacctmgr", &["-i", "add", "account", "lab1"]);
    c.ok("sacctmgr", &["-i", "add", "user", &heavy.name, &light.name, "Account=lab1"]);
    let dir = c.path().to_path_buf();
    let submit = |u: &TestUser, args: &[&str]| -> u32 {
        let out = c.run_as(u, "sbatch", args, &dir);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().rsplit(' ').next().unwrap().parse().unwrap()
    };
    // The heavy user runs first (both CPUs for a few seconds) and so has used something.
    c.wait_until("the shares to be computed", Duration::from_secs(30), || {
        String::from_utf8_lossy(&c.run("sshare", &["-a", "-n", "-P", "-o", "User"]).stdout).contains(&heavy.name)
    });
    let used = submit(&heavy, &["-n2", "-o", "/dev/null", "--wrap", "sleep 3"]);
    c.wait_state(used, &["COMPLETED"], Duration::from_secs(60));
    // Then, while another job holds the node, both wait for all of it, the heavy user's first.
    let blocker = c.submit(&["-n2", "-o", "/dev/null", "--wrap", "sleep 8"]);
    c.wait_state(blocker, &["RUNNING"], Duration::from_secs(30));
    let h = submit(&heavy, &["-n2", "-o", "/dev/null", "--wrap", "sleep 30"]);
    let l = submit(&light, &["-n2", "-o", "/dev/null", "--wrap", "sleep 30"]);
    let prio = |j: u32| -> u64 {
        String::from_utf8_lossy(&c.run("squeue", &["-h", "-j", &j.to_string(), "-o", "%Q"]).stdout)
            .trim()
            .parse()
            .unwrap_or(0)
    };
    c.wait_until("the light user's job to outrank the heavy user's", Duration::from_secs(30), || prio(l) > prio(h));
    c.wait_state(l, &["RUNNING"], Duration::from_secs(60));
    assert_eq!(c.state(h), "PENDING", "the heavy user's job waits though it came first");
    let shares = String::from_utf8_lossy(&c.run("sshare", &["-a", "-n", "-P", "-o", "User,RawUsage,FairShare"]).stdout)
        .to_string();
    let row = |u: &str| shares.lines().find(|l| l.starts_with(&format!("{u}|"))).unwrap_or_default().to_string();
    let raw = |u: &str| row(u).split('|').nth(1).unwrap_or("0").parse::<u64>().unwrap_or(0);
    let fs = |u: &str| row(u).split('|').nth(2).unwrap_or("0").parse::<f64>().unwrap_or(0.0);
    assert!(raw(&heavy.name) >= 5, "2 CPUs for 3 s: {shares}");
    assert_eq!(raw(&light.name), 0, "{shares}");
    assert!(fs(&light.name) > fs(&heavy.name), "{shares}");
    c.ok("scancel", &[&h.to_string(), &l.to_string()]);
}

/// A job's end recomputes the priorities of the waiting jobs its usage concerns (those of the
/// associations whose fairshare factor moved), not the whole queue's: the others keep the
/// priority of the last `PriorityCalcPeriod` (as Slurm's, whose age factor moves only then),
/// so a queue of 100,000 jobs does not cost a pass over all of them at every end.
#[test]
fn a_job_end_moves_only_the_priorities_its_usage_concerns() {
    let c = Cluster::start(
        EXE,
        Options {
            nodes: 2,
            accounting: true,
            // The age factor moves ~167 a second; no calculation (which moves every job's)
            // during the test but the first.
            extra_conf: "PriorityType=priority/multifactor\nPriorityWeightFairshare=10000\n\
                         PriorityWeightAge=100000\nPriorityMaxAge=10\nPriorityCalcPeriod=60\n\
                         PriorityDecayHalfLife=0\n"
                .into(),
            ..Default::default()
        },
    );
    c.root_in_accounts(&["lab1", "lab2"], &[]);
    // One node held for a while; two jobs that need both wait behind it.
    let blocker = c.submit(&["-N1", "--exclusive", "-t", "5", "-o", "/dev/null", "--wrap", "sleep 120"]);
    c.wait_state(blocker, &["RUNNING"], Duration::from_secs(30));
    let p1 = c.submit(&["-A", "lab1", "-N2", "-t", "5", "-o", "/dev/null", "--wrap", "true"]);
    let p2 = c.submit(&["-A", "lab2", "-N2", "-t", "5", "-o", "/dev/null", "--wrap", "true"]);
    let prio = |j: u32| -> u64 {
        String::from_utf8_lossy(&c.run("squeue", &["-h", "-j", &j.to_string(), "-o", "%Q"]).stdout)
            .trim()
            .parse()
            .unwrap_or(0)
    };
    // Both count their fairshare (1.0: no usage yet) once the factors are computed.
    c.wait_until("the waiting jobs' fairshare", Duration::from_secs(10), || prio(p1) >= 10000 && prio(p2) >= 10000);
    let (before1, before2) = (prio(p1), prio(p2));
    // lab1 uses the other node a moment: its user's fairshare falls from a rank shared with
    // lab2's (1.0) to the second of two (0.5); lab2's stays first (1.0).
    std::thread::sleep(Duration::from_secs(2));
    let short = c.submit(&["-A", "lab1", "-N1", "-t", "1", "-o", "/dev/null", "--wrap", "sleep 1"]);
    c.wait_state(short, &["COMPLETED"], Duration::from_secs(60));
    let waited = std::time::Instant::now();
    while prio(p1) + 3000 >= before1 {
        assert!(
            waited.elapsed() < Duration::from_secs(10),
            "lab1's waiting job kept its priority {} (was {before1}):\n{}\n{}",
            prio(p1),
            String::from_utf8_lossy(&c.run("sprio", &["-l"]).stdout),
            String::from_utf8_lossy(&c.run("sshare", &["-a", "-l"]).stdout)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Seconds later, lab2's job still has the priority it was given: nothing it depends on moved.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(prio(p2), before2, "lab2's job was recomputed (its age moved) though its fairshare did not");
    assert_eq!(c.state(p2), "PENDING");
    c.ok("scancel", &[&blocker.to_string(), &p1.to_string(), &p2.to_string()]);
}

#[test]
fn sprio_matches_slurm_on_the_labs_queue() {
    let alice = NamedUser::ensure("alice", "Alice Tester");
    let bob = NamedUser::ensure("bob", "Bob Tester");
    let mut c = Cluster::start(
        EXE,
        Options {
            nodes: 4,
            cpus: 2,
            accounting: true,
            cluster: "lab".into(),
            partitions: "PartitionName=cpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n".into(),
            extra_conf: "FirstJobId=10\nPriorityType=priority/multifactor\nPriorityWeightFairshare=10000\n\
                         PriorityWeightAge=1000\nPriorityDecayHalfLife=0\n"
                .into(),
            ..Default::default()
        },
    );
    c.add_lab_accounts();
    lab_usage(&mut c);
    c.wait_nodes_up(Duration::from_secs(30));
    c.wait_until("the shares to be computed", Duration::from_secs(30), || check(&c, "sshare_mf").is_ok());
    // The lab's queue: root's job holds every CPU; alice's, bob's two and alice's held wait.
    let blocker = c.submit(&["-n8", "-A", "chem", "-J", "blocker", "-o", "/dev/null", "--wrap", "sleep 900"]);
    assert_eq!(blocker, 10);
    c.wait_state(blocker, &["RUNNING"], Duration::from_secs(30));
    let dir = c.path().to_path_buf();
    for (u, args) in [
        (&alice, vec!["-n1", "-A", "physics", "-J", "pa"]),
        (&bob, vec!["-n2", "-A", "chem", "-J", "pb"]),
        (&bob, vec!["-n1", "-A", "theory", "-J", "pt"]),
        (&alice, vec!["-n1", "-A", "physics", "-H", "-J", "ph"]),
    ] {
        let mut a = args.clone();
        a.extend(["-o", "/dev/null", "--wrap", "sleep 10"]);
        let out = c.run_as_ids(&u.name, u.uid, u.gid, "sbatch", &a, &dir);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let mut failed = Vec::new();
    for name in Capture::names(&captures(), "sprio_mf") {
        failed.extend(check(&c, &name).err());
    }
    assert!(failed.is_empty(), "{} of the captures differ:\n{}", failed.len(), failed.join("\n"));
    // The same in words: why alice's job waits behind bob's, level by level.
    let why = c.ok("drover", &["explain", "11"]);
    for want in [
        "Job 11 (alice, account physics, QoS normal) is PENDING: Priority",
        "Priority 1666 = age 0 (1000 × 0.000000, full after 7-00:00:00 waiting) + fairshare 1667 (10000 × 0.166667)",
        "Fairshare 0.166667: alice in physics ranks 6th of 6 users",
        "0.250000 (over-served)",
        "physics/alice",
        "Usage 387 does not decay",
    ] {
        assert!(why.contains(want), "{want:?} in:\n{why}");
    }
    let bob = c.ok("drover", &["explain", "12"]);
    assert!(bob.contains("ranks 1st of 6 users") && bob.contains("has used nothing"), "{bob}");
    c.ok("scancel", &["10", "11", "12", "13", "14"]);
}

#[test]
fn grp_tres_mins_and_max_tres_per_node_hold_jobs_with_slurms_reasons() {
    let mut c = Cluster::start(
        EXE,
        Options {
            nodes: 1,
            accounting: true,
            extra_conf: "PriorityType=priority/multifactor\nPriorityDecayHalfLife=0\nAccountingStorageEnforce=limits\n"
                .into(),
            ..Default::default()
        },
    );
    c.ok("sacctmgr", &["-i", "add", "account", "lab1", "GrpTRESMins=cpu=2"]);
    c.ok("sacctmgr", &["-i", "add", "user", "root", "Account=lab1"]);
    // root has used 150 CPU-seconds (2.5 CPU-minutes) in lab1: over its 2.
    c.kill_controller();
    let now = jiff::Timestamp::now().as_second();
    std::fs::write(c.path().join("state/assoc_usage"), format!("{now} {now}\nlab1\troot\t150\t150\t0\t150\t150\t0\n"))
        .unwrap();
    c.start_controller();
    c.wait_nodes_up(Duration::from_secs(30));
    c.wait_until("the associations to reach the controller", Duration::from_secs(20), || {
        c.run("sbatch", &["--test-only", "-A", "lab1", "--wrap", "true"]).status.success()
    });
    let reason = |j: u32| {
        String::from_utf8_lossy(&c.run("squeue", &["-h", "-j", &j.to_string(), "-o", "%r"]).stdout).trim().to_string()
    };
    let held = c.submit(&["-A", "lab1", "-o", "/dev/null", "--wrap", "true"]);
    c.wait_until("the usage limit to hold the job", Duration::from_secs(30), || {
        reason(held) == "AssocGrpCPUMinutesLimit"
    });
    // A larger allowance lets it run; a job whose own request (CPUs × time limit) is larger
    // than the allowance still waits.
    c.ok("sacctmgr", &["-i", "modify", "account", "lab1", "set", "GrpTRESMins=cpu=10"]);
    c.wait_state(held, &["RUNNING", "COMPLETED"], Duration::from_secs(30));
    let big = c.submit(&["-A", "lab1", "-t", "20", "-o", "/dev/null", "--wrap", "true"]);
    c.wait_until("the request to be over the allowance", Duration::from_secs(30), || {
        reason(big) == "AssocGrpCPUMinutesLimit"
    });
    c.ok("scancel", &[&big.to_string()]);
    // MaxTRESPerNode: two CPUs on one node where one is allowed.
    let wide = c.submit(&["-A", "lab1", "-n2", "-N1", "-H", "-o", "/dev/null", "--wrap", "true"]);
    c.ok("sacctmgr", &["-i", "modify", "user", "root", "where", "account=lab1", "set", "MaxTRESPerNode=cpu=1"]);
    // The controller reads associations every 2 seconds.
    std::thread::sleep(Duration::from_secs(3));
    c.ok("scontrol", &["release", &wide.to_string()]);
    c.wait_until("the per-node limit to hold the job", Duration::from_secs(30), || {
        reason(wide) == "AssocMaxCpuPerNode"
    });
    c.ok("scancel", &[&wide.to_string()]);
    // A QoS's MaxWall holds a longer job; with DenyOnLimit it refuses it at submit.
    c.ok("sacctmgr", &["-i", "add", "qos", "short", "MaxWall=1"]);
    c.ok("sacctmgr", &["-i", "add", "qos", "strict", "MaxWall=1", "Flags=DenyOnLimit"]);
    c.wait_until("the QoS to reach the controller", Duration::from_secs(20), || {
        c.run("sbatch", &["--test-only", "-A", "lab1", "--qos=strict", "--wrap", "true"]).status.success()
    });
    let long = c.submit(&["-A", "lab1", "--qos=short", "-t", "5", "-H", "-o", "/dev/null", "--wrap", "true"]);
    c.ok("scontrol", &["release", &long.to_string()]);
    c.wait_until("MaxWall to hold the job", Duration::from_secs(30), || {
        reason(long) == "QOSMaxWallDurationPerJobLimit"
    });
    let denied = c.run("sbatch", &["-A", "lab1", "--qos=strict", "-t", "5", "--wrap", "true"]);
    assert_eq!(denied.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&denied.stderr),
        "sbatch: error: Batch job submission failed: Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)\n"
    );
    c.ok("scancel", &[&long.to_string()]);
}

/// What Snakemake's Slurm executor asks to check the account a job charges, on a cluster
/// without the multifactor priority: `sacctmgr -n -s list user U format=account%256` (`-s`
/// lists the user's associations, as `withassoc` does), and, where that says nothing,
/// `sshare -U --format Account%256 --noheader` — Slurm's sshare lists the shares under
/// priority/basic too, with no usage.
#[test]
fn accounts_of_a_user_without_multifactor() {
    let pid = std::process::id() % 10000;
    let u = TestUser::create(&format!("drvs{pid}"));
    let c = Cluster::start(EXE, Options { nodes: 1, accounting: true, ..Default::default() });
    c.ok("sacctmgr", &["-i", "add", "account", "lab1", "lab2"]);
    c.ok("sacctmgr", &["-i", "add", "user", &u.name, "Account=lab1,lab2"]);
    let mut accounts = c
        .ok("sacctmgr", &["-n", "-s", "list", "user", &u.name, "format=account%30"])
        .lines()
        .map(String::from)
        .collect::<Vec<_>>();
    accounts.sort();
    assert_eq!(accounts, [format!("{:>30} ", "lab1"), format!("{:>30} ", "lab2")]);
    // Combined with other flags, and -P.
    assert_eq!(
        c.ok("sacctmgr", &["-nsP", "list", "user", &u.name, "account=lab2", "format=account,user"]),
        format!("lab2|{}\n", u.name)
    );
    // Without -s a user's line has no association fields.
    assert_eq!(c.ok("sacctmgr", &["-nP", "list", "user", &u.name, "format=user,account"]), format!("{}|\n", u.name));

    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::set_permissions(d, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let mut got = String::new();
    c.wait_until("sshare to list the user's accounts", Duration::from_secs(30), || {
        let o = c.run_as(&u, "sshare", &["-U", "--format", "Account%30", "--noheader"], d);
        got = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        o.status.success() && got.lines().count() == 2
    });
    let mut lines: Vec<&str> = got.lines().map(str::trim).collect();
    lines.sort();
    assert_eq!(lines, ["lab1", "lab2"], "{got}");
    // The tree with its shares, usage 0.
    let all = c.ok("sshare", &["-a", "-P", "-o", "Account,User,RawShares,RawUsage"]);
    assert!(all.contains(&format!("lab1|{}|1|0\n", u.name)), "{all}");
}
