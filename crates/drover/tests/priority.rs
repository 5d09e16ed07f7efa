//! Nice values, an administrator's fixed priority and `scontrol top` on a real cluster: the
//! waiting order they make is the order the scheduler follows. Parts need root (a test user
//! who may not raise priorities).

use drover_testkit::{Cluster, Options, TestUser};
use std::time::Duration;

const EXE: &str = env!("CARGO_BIN_EXE_drover");

/// (id, priority, nice, reason) of every waiting job, highest priority first.
fn waiting(c: &Cluster) -> Vec<(u32, u64, i64, String)> {
    let q = c.ok("squeue", &["-h", "-t", "PD", "-S", "-p", "-o", "%i %Q %y %r"]);
    q.lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[0].parse().unwrap(), f[1].parse().unwrap(), f[2].parse().unwrap(), f[3].to_string())
        })
        .collect()
}

fn order(c: &Cluster) -> Vec<u32> {
    waiting(c).into_iter().map(|w| w.0).collect()
}

/// A job script that notes its id in `file` when it runs.
fn note(file: &std::path::Path) -> String {
    format!("echo $SLURM_JOB_ID >> {}", file.display())
}

/// The ids written to `file`, once there are `n`.
fn ran(c: &Cluster, file: &std::path::Path, n: usize) -> Vec<u32> {
    let read = || std::fs::read_to_string(file).unwrap_or_default();
    c.wait_until("the jobs ran", Duration::from_secs(60), || read().lines().count() >= n);
    read().lines().map(|l| l.trim().parse().unwrap()).collect()
}

/// A file any user's job may append to.
fn order_file(c: &Cluster) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = c.path().join("order");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let file = dir.join("ran");
    std::fs::write(&file, "").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
    file
}

#[test]
fn nice_priority_and_top_reorder_the_queue() {
    if !drover_testkit::root_or_skip("needs root to create a test user") {
        return;
    }
    let user = TestUser::create(&format!("drvp{}", std::process::id() % 10000));
    let c = Cluster::start(EXE, Options { nodes: 1, cpus: 1, ..Default::default() });
    let out = order_file(&c);
    let job = note(&out);
    let blocker = c.submit(&["-t", "5", "--wrap", "sleep 300"]);
    c.wait_state(blocker, &["RUNNING"], Duration::from_secs(20));
    let a = c.submit(&["-t", "1", "--wrap", &job]);
    let b = c.submit(&["-t", "1", "--wrap", &job]);
    let d = c.submit(&["-t", "1", "--nice=5", "--wrap", &job]);
    let e = c.submit(&["-t", "1", "--nice", "--wrap", &job]);
    // Submit order less nice: d (one later than b, nice 5) falls behind b but stays ahead
    // of nothing else; e (nice 100) is last.
    let w = waiting(&c);
    assert_eq!(order(&c), vec![a, b, d, e], "{w:?}");
    let pa = w[0].1;
    assert_eq!(w[2].1, pa - 2 - 5, "{w:?}");
    assert_eq!(w[3].1, pa - 3 - 100, "{w:?}");
    assert_eq!((w[2].2, w[3].2), (5, 100));
    assert_eq!(w[0].3, "Resources");
    assert_eq!(w[1].3, "Priority");
    let show = c.ok("scontrol", &["show", "job", &e.to_string()]);
    assert!(show.contains(&format!("Priority={} Nice=100 ", pa - 103)), "{show}");

    // An administrator lowers a nice value below zero: e moves to the front.
    c.ok("scontrol", &["update", &format!("JobId={e}"), "Nice=-10"]);
    assert_eq!(order(&c), vec![e, a, b, d]);
    assert_eq!(waiting(&c)[0].1, pa - 3 + 10);
    assert_eq!(waiting(&c)[0].3, "Resources", "the scheduler follows the new order");

    // `scontrol top b`: b takes the group's highest priority; the others give it back.
    c.ok("scontrol", &["top", &b.to_string()]);
    let w = waiting(&c);
    assert_eq!(order(&c), vec![b, e, a, d], "{w:?}");
    assert_eq!(w[0].1, pa - 3 + 10, "b has e's old priority: {w:?}");
    assert_eq!(w[0].3, "Resources");
    let total: i64 = w.iter().map(|x| x.1 as i64).sum();
    let before: i64 = (pa - 3 + 10 + pa + pa - 1 + pa - 7) as i64;
    assert!((before - total).abs() <= 3, "priority is traded, not made: {before} -> {total} {w:?}");

    // A fixed priority: d goes first and nice no longer moves it.
    c.ok("scontrol", &["update", &format!("JobId={d}"), "Priority=4294967000"]);
    c.ok("scontrol", &["update", &format!("JobId={d}"), "Nice=1000"]);
    let w = waiting(&c);
    assert_eq!(w[0].0, d);
    assert_eq!((w[0].1, w[0].2), (4_294_967_000, 0), "{w:?}");
    // An administrator's --priority at submit, and TOP.
    let f = c.submit(&["-t", "1", "--priority=TOP", "--wrap", &job]);
    assert_eq!(waiting(&c)[0].0, f);
    assert_eq!(waiting(&c)[0].1, 4_294_967_293);

    // A user may lower a priority (nice up) but not raise it, and may not top by default.
    let dir = out.parent().unwrap();
    let o = c.run_as(&user, "sbatch", &["--parsable", "-t", "1", "--nice=-5", "--wrap", "true"], dir);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "sbatch: error: Batch job submission failed: Invalid --nice value\n"
    );
    let o = c.run_as(&user, "sbatch", &["--parsable", "-t", "1", "--priority=99", "--wrap", &job], dir);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mine: u32 = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
    let show = c.ok("scontrol", &["show", "job", &mine.to_string()]);
    assert!(!show.contains("Priority=99 "), "a user's --priority is ignored: {show}");
    let o = c.run_as(&user, "scontrol", &["update", &format!("JobId={mine}"), "Nice=-1"], dir);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&o.stderr), format!("Access/permission denied for job {mine}\n"));
    let o = c.run_as(&user, "scontrol", &["update", &format!("JobId={mine}"), "Nice=7"], dir);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = c.run_as(&user, "scontrol", &["top", &mine.to_string()], dir);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&o.stderr), format!("Access/permission denied for job {mine}\n"));
    let o = c.run_as(&user, "scontrol", &["update", &format!("JobId={a}"), "Nice=1"], dir);
    assert_eq!(String::from_utf8_lossy(&o.stderr), format!("Access/permission denied for job {a}\n"));
    let bad = c.run("scontrol", &["update", &format!("JobId={a}"), "Nice=99999999999"]);
    assert_eq!(bad.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&bad.stderr),
        "scontrol: error: Nice value out of range (+/- 2147483645). Value ignored\n"
    );

    // The order holds across a restart of the controller.
    let before = waiting(&c);
    let mut c = c;
    c.kill_controller();
    c.start_controller();
    c.wait_until("the controller answers", Duration::from_secs(20), || c.run("squeue", &["-h"]).status.success());
    assert_eq!(
        waiting(&c).iter().map(|w| (w.0, w.1, w.2)).collect::<Vec<_>>(),
        before.iter().map(|w| (w.0, w.1, w.2)).collect::<Vec<_>>()
    );
    // The jobs run one at a time in the order they wait in (read before the blocker goes:
    // the first of them starts at once).
    let expect = order(&c);
    assert_eq!(expect, vec![f, d, b, e, a, mine]);
    c.ok("scancel", &[&blocker.to_string()]);
    assert_eq!(ran(&c, &out, expect.len()), expect);
}

#[test]
fn nice_counts_against_the_multifactor_priority_and_users_may_top_when_allowed() {
    if !drover_testkit::root_or_skip("needs root to create a test user") {
        return;
    }
    let user = TestUser::create(&format!("drvq{}", std::process::id() % 10000));
    let c = Cluster::start(
        EXE,
        Options {
            nodes: 1,
            cpus: 1,
            extra_conf: "PriorityType=priority/multifactor\nPriorityWeightJobSize=10000\n\
                         SchedulerParameters=enable_user_top\n"
                .into(),
            ..Default::default()
        },
    );
    let out = order_file(&c);
    let dir = out.parent().unwrap();
    let job = note(&out);
    let blocker = c.submit(&["-t", "5", "--wrap", "sleep 300"]);
    c.wait_state(blocker, &["RUNNING"], Duration::from_secs(20));
    let sub = |args: &[&str]| -> u32 {
        let mut all = vec!["--parsable", "-t", "1"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--wrap", &job]);
        let o = c.run_as(&user, "sbatch", &all, dir);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).trim().parse().unwrap()
    };
    let x = sub(&[]);
    let y = sub(&["--nice=300"]);
    let z = sub(&[]);
    let w = waiting(&c);
    assert_eq!(order(&c), vec![x, z, y], "{w:?}");
    assert_eq!(w[0].1, w[2].1 + 300, "{w:?}");
    let sprio = c.ok("sprio", &["-h", "-o", "%i %N", "-j", &y.to_string()]);
    assert_eq!(sprio.split_whitespace().collect::<Vec<_>>(), vec![y.to_string(), "300".to_string()]);
    // With enable_user_top a user may reorder their own jobs.
    let o = c.run_as(&user, "scontrol", &["top", &format!("{y},{z}")], dir);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let w = waiting(&c);
    assert_eq!(order(&c), vec![y, z, x], "{w:?}");
    // Each job's end recalculates every priority; the nice values carry the order.
    c.ok("scancel", &[&blocker.to_string()]);
    assert_eq!(ran(&c, &out, 3), vec![y, z, x]);
}

/// priority/basic counts down one a job as Slurm does, but a held job takes no place until it
/// is released: then it goes behind every job submitted meanwhile (Slurm's `lowest_prio`).
/// A controller restart finds the count again from the jobs.
#[test]
fn a_released_job_queues_behind_the_jobs_submitted_while_it_was_held() {
    let mut c = Cluster::start(EXE, Options { nodes: 1, cpus: 1, ..Options::default() });
    let blocker = c.submit(&["--wrap", "sleep 300"]);
    c.wait_state(blocker, &["RUNNING"], Duration::from_secs(30));
    let a = c.submit(&["--wrap", "true"]);
    let held = c.submit(&["-H", "--wrap", "true"]);
    let b = c.submit(&["--wrap", "true"]);
    const TOP: u64 = 0xffff_0000;
    let prio = |c: &Cluster, j: u32| -> u64 {
        c.ok("squeue", &["-h", "-j", &j.to_string(), "-o", "%Q"]).trim().parse().unwrap()
    };
    assert_eq!((prio(&c, blocker), prio(&c, a), prio(&c, held), prio(&c, b)), (TOP - 1, TOP - 2, 0, TOP - 3));
    c.ok("scontrol", &["release", &held.to_string()]);
    assert_eq!(prio(&c, held), TOP - 4);
    assert_eq!(order(&c), [a, b, held]);
    // After a restart the count goes on from the lowest priority of the jobs there.
    c.kill_controller();
    c.start_controller();
    c.wait_nodes_up(Duration::from_secs(30));
    let d = c.submit(&["--wrap", "true"]);
    assert_eq!(prio(&c, d), TOP - 5);
}
