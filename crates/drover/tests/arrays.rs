//! Job arrays on a real cluster: tasks, their variables and output files, `%N` throttles,
//! elements held, released and cancelled alone, and a large array that costs one record and
//! survives a controller `kill -9`.

use drover_testkit::{Cluster, Options};
use std::time::Duration;

const EXE: &str = env!("CARGO_BIN_EXE_drover");

fn lines(s: &str) -> Vec<String> {
    s.lines().map(|l| l.trim().to_string()).filter(|l| !l.is_empty()).collect()
}

#[test]
fn every_task_runs_with_its_variables_and_output_file_within_its_throttle() {
    let c = Cluster::start(EXE, Options { nodes: 4, cpus: 2, ..Default::default() });
    let log = c.path().join("spans");
    let script = format!(
        "echo start $SLURM_ARRAY_TASK_ID >> {log}; env | grep ^SLURM_ARRAY | sort; sleep 0.3; \
         echo end $SLURM_ARRAY_TASK_ID >> {log}",
        log = log.display()
    );
    let id = c.submit(&["--array=0-11%3", "-J", "arr", "--wrap", &script]);
    let first = c.ok("squeue", &["-h", "-o", "%i %j"]);
    assert!(first.contains(&format!("{id}_[")), "{first}");
    let mut most = 0;
    c.wait_until("every task to end", Duration::from_secs(120), || {
        let q = c.ok("squeue", &["-h", "-j", &id.to_string(), "-o", "%i %t"]);
        most = most.max(q.lines().filter(|l| l.ends_with(" R")).count());
        q.trim().is_empty() || q.lines().all(|l| l.ends_with("CD"))
    });
    assert!(most <= 3, "{most} tasks ran at once under %3");
    // The task's own spans overlap at most three deep too.
    let spans = std::fs::read_to_string(&log).unwrap();
    let (mut depth, mut deepest) = (0i32, 0i32);
    for l in spans.lines() {
        depth += if l.starts_with("start") { 1 } else { -1 };
        deepest = deepest.max(depth);
    }
    assert!(deepest <= 3, "{spans}");
    for t in 0..12 {
        let f = c.path().join(format!("slurm-{id}_{t}.out"));
        let out = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        assert_eq!(
            lines(&out),
            [
                format!("SLURM_ARRAY_JOB_ID={id}"),
                "SLURM_ARRAY_TASK_COUNT=12".into(),
                format!("SLURM_ARRAY_TASK_ID={t}"),
                "SLURM_ARRAY_TASK_MAX=11".into(),
                "SLURM_ARRAY_TASK_MIN=0".into(),
                "SLURM_ARRAY_TASK_STEP=1".into(),
            ],
            "{}",
            f.display()
        );
    }
    // Every task has its own record: the last to start kept the array's id, as in Slurm.
    let done = c.ok("squeue", &["-h", "-t", "all", "-j", &id.to_string(), "-o", "%i %A %F %K %T"]);
    let rows = lines(&done);
    assert_eq!(rows.len(), 12, "{done}");
    assert!(rows.iter().all(|r| r.ends_with("COMPLETED") && r.contains(&format!(" {id} "))), "{done}");
    assert_eq!(rows.iter().filter(|r| r.split(' ').nth(1) == Some(&id.to_string())).count(), 1, "{done}");
}

#[test]
fn elements_are_cancelled_released_and_shown_alone() {
    let c = Cluster::start(EXE, Options { nodes: 2, cpus: 1, ..Default::default() });
    let id = c.submit(&["--array=0-3", "--hold", "--wrap", "echo $SLURM_ARRAY_TASK_ID"]);
    assert_eq!(c.ok("squeue", &["-h", "-o", "%i %T %r"]).trim(), format!("{id}_[0-3] PENDING JobHeldUser"));
    c.ok("scancel", &[&format!("{id}_2")]);
    c.ok("scontrol", &["release", &format!("{id}_1")]);
    c.wait_until("task 1 to complete", Duration::from_secs(30), || {
        c.ok("squeue", &["-h", "-t", "all", "-j", &format!("{id}_1"), "-o", "%T"]).trim() == "COMPLETED"
    });
    let q = c.ok("squeue", &["-h", "-o", "%i %T"]);
    assert_eq!(q.trim(), format!("{id}_[0,3] PENDING"));
    let r = c.ok("squeue", &["-h", "-r", "-o", "%i %K"]);
    assert_eq!(lines(&r), [format!("{id}_0 0"), format!("{id}_3 3")]);
    assert_eq!(c.ok("squeue", &["-h", "-j", &format!("{id}_3"), "-o", "%i"]).trim(), format!("{id}_3"));
    let show = c.ok("scontrol", &["show", "job", &id.to_string()]);
    assert!(show.contains(&format!("JobId={id} ArrayJobId={id} ArrayTaskId=0,3 JobName=wrap")), "{show}");
    assert!(show.contains(&format!("StdOut={}/slurm-{id}_4294967294.out", c.path().display())), "{show}");
    // The cancelled pending task left the array without a record (as on Slurm).
    assert_eq!(c.ok("squeue", &["-h", "-t", "CA", "-o", "%i"]), "");
    let bad = c.run("scancel", &["-v", &format!("{id}_9")]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains(&format!("job id {id}_9: Invalid job id specified")));
    // The whole array: the rest goes at once.
    c.ok("scancel", &[&id.to_string()]);
    c.wait_until("nothing pending", Duration::from_secs(10), || c.ok("squeue", &["-h"]).trim().is_empty());
    assert!(c.ok("sbatch", &["--array=0-3", "--wrap", "true", "--parsable"]).trim().parse::<u32>().is_ok());
    let refused = c.run("sbatch", &["--array=0-5000", "--wrap", "true"]);
    assert_eq!(
        String::from_utf8_lossy(&refused.stderr).trim(),
        "sbatch: error: Batch job submission failed: Invalid job array specification"
    );
    let bad = c.run("sbatch", &["--array=3-1", "--wrap", "true"]);
    assert_eq!(
        String::from_utf8_lossy(&bad.stderr).trim(),
        "sbatch: error: Batch job submission failed: Invalid job array specification"
    );
}

#[test]
fn a_large_array_is_one_record_and_survives_a_controller_kill() {
    let mut c = Cluster::start(
        EXE,
        Options { nodes: 2, cpus: 1, extra_conf: "MaxArraySize=1000001\n".into(), ..Default::default() },
    );
    let id = c.submit(&["--array=0-999999%2", "--hold", "--wrap", "true"]);
    let q = c.ok("squeue", &["-h", "-o", "%i %r"]);
    assert_eq!(q.trim(), format!("{id}_[0-999999%2] JobHeldUser"));
    c.kill_controller();
    c.start_controller();
    c.wait_nodes_up(Duration::from_secs(30));
    assert_eq!(c.ok("squeue", &["-h", "-o", "%i %r"]).trim(), format!("{id}_[0-999999%2] JobHeldUser"));
    c.ok("scontrol", &["update", &format!("JobId={id}"), "ArrayTaskThrottle=1"]);
    c.ok("scontrol", &["release", &id.to_string()]);
    c.wait_until("two tasks done", Duration::from_secs(30), || {
        c.ok("squeue", &["-h", "-t", "CD", "-o", "%i"]).lines().count() >= 2
    });
    let running = c.ok("squeue", &["-h", "-t", "R", "-o", "%i"]);
    assert!(running.lines().count() <= 1, "{running}");
    c.ok("scancel", &[&id.to_string()]);
    c.wait_until("the array gone from the queue", Duration::from_secs(20), || {
        c.ok("squeue", &["-h"]).trim().is_empty()
    });
}

#[test]
fn ten_thousand_tasks_all_run_and_never_more_than_the_throttle_at_once() {
    let c = Cluster::start(
        EXE,
        Options {
            nodes: 4,
            cpus: 16,
            extra_conf: "MaxArraySize=10000\nMaxJobCount=30000\nMinJobAge=5\n".into(),
            ..Default::default()
        },
    );
    let log = c.path().join("done");
    let script = format!("echo $SLURM_ARRAY_TASK_ID >> {}", log.display());
    let id = c.submit(&["--array=0-9999%40", "-o", "/dev/null", "--wrap", &script]);
    let mut most = 0;
    c.wait_until("all 10,000 tasks to end", Duration::from_secs(600), || {
        let q = c.ok("squeue", &["-h", "-j", &id.to_string(), "-t", "PD,R,CG", "-o", "%t"]);
        most = most.max(q.lines().filter(|l| *l == "R").count());
        q.trim().is_empty()
    });
    // The throttle was reached, never passed (64 cores could have run more).
    assert!(most <= 40, "{most} tasks ran at once under %40");
    assert!(most > 1, "the array never ran more than one task at once");
    let done = std::fs::read_to_string(&log).unwrap();
    let mut ids: Vec<u32> = done.lines().map(|l| l.parse().unwrap()).collect();
    ids.sort_unstable();
    let twice: Vec<u32> = ids.windows(2).filter(|w| w[0] == w[1]).map(|w| w[0]).collect();
    let missing: Vec<u32> = (0..10_000).filter(|i| ids.binary_search(i).is_err()).collect();
    if !twice.is_empty() || !missing.is_empty() {
        // Whether the missing ones were only late, and what the daemons logged.
        eprintln!("ran twice: {twice:?}; never ran: {missing:?}");
        std::thread::sleep(Duration::from_secs(3));
        let later = std::fs::read_to_string(&log).unwrap().lines().count();
        let mut logged = String::new();
        for e in std::fs::read_dir(c.path().join("log")).unwrap().flatten() {
            let text = std::fs::read_to_string(e.path()).unwrap_or_default();
            let lines: Vec<&str> =
                text.lines().filter(|l| !l.contains("] started") && !l.contains("] ended")).collect();
            logged += &format!(
                "--- {} ({} lines)\n{}\n",
                e.file_name().to_string_lossy(),
                text.lines().count(),
                lines.join("\n")
            );
        }
        panic!("ran twice: {twice:?}; never ran: {missing:?}; lines {} then {later}\n{logged}", ids.len());
    }
}

/// A pending task cancelled by name leaves its array without a record, as Slurm's
/// job_str_signal clears it from the array's task bitmap: `scontrol show job A_T` finds
/// nothing, squeue lists the others, and so does the journal after a restart. The last
/// pending task is cancelled as a job.
#[test]
fn a_cancelled_pending_task_leaves_its_array_without_a_record() {
    let mut c = Cluster::start(EXE, Options { nodes: 1, cpus: 1, ..Default::default() });
    let id = c.submit(&["--array=0-3", "--begin=now+1hour", "--wrap", "true"]);
    let o = c.run("scancel", &["-v", &format!("{id}_3")]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stderr), format!("scancel: Terminating job {id}_3\n"));
    let show = c.run("scontrol", &["show", "job", &format!("{id}_3")]);
    assert!(!show.status.success(), "{}", String::from_utf8_lossy(&show.stdout));
    let tasks = |c: &Cluster| c.ok("squeue", &["-h", "-r", "-t", "all", "-o", "%i %T"]);
    assert_eq!(tasks(&c), format!("{id}_0 PENDING\n{id}_1 PENDING\n{id}_2 PENDING\n"));
    c.kill_controller();
    c.start_controller();
    c.wait_until("the controller", Duration::from_secs(20), || c.run("squeue", &["-h"]).status.success());
    assert_eq!(tasks(&c), format!("{id}_0 PENDING\n{id}_1 PENDING\n{id}_2 PENDING\n"));
    c.ok("scancel", &[&format!("{id}_[0-1]")]);
    c.ok("scancel", &[&format!("{id}_2")]);
    assert_eq!(tasks(&c), format!("{id}_2 CANCELLED\n"));
}
