//! Dependencies on a real cluster: every kind Slurm has, on jobs and on arrays and their
//! tasks, `?` lists, `singleton`, and `kill_invalid_depend`.

use drover_testkit::{Cluster, Options};
use std::time::Duration;

const EXE: &str = env!("CARGO_BIN_EXE_drover");

fn field(c: &Cluster, id: &str, code: &str) -> String {
    c.ok("squeue", &["-h", "-t", "all", "-j", id, "-o", code]).trim().to_string()
}

fn started(c: &Cluster, id: u32) -> i64 {
    let show = c.ok("scontrol", &["show", "job", &id.to_string(), "-o"]);
    let t = show.split("StartTime=").nth(1).and_then(|r| r.split(' ').next()).unwrap_or("").to_string();
    let out = std::process::Command::new("date").args(["-d", &t, "+%s"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or_else(|_| panic!("StartTime {t:?}: {show}"))
}

#[test]
fn a_chain_on_an_array_runs_in_order_and_shows_what_it_waits_for() {
    let c = Cluster::start(EXE, Options { nodes: 4, cpus: 1, ..Default::default() });
    let arr = c.submit(&["--array=0-2", "--wrap", "sleep 1"]);
    // The job sees its dependency as given (SLURM_JOB_DEPENDENCY, as sbatch exports it).
    let after_all = c.submit(&["-d", &format!("afterok:{arr}"), "--wrap", "echo $SLURM_JOB_DEPENDENCY"]);
    let after_one = c.submit(&["-d", &format!("afterany:{arr}_1"), "--wrap", "true"]);
    let corr = c.submit(&["--array=0-2", "-d", &format!("aftercorr:{arr}"), "--wrap", "true"]);
    let either = c.submit(&["-d", &format!("afterok:{after_all}?afterok:{after_one}"), "--wrap", "true"]);
    c.wait_until("the waits to be evaluated", Duration::from_secs(10), || {
        field(&c, &after_all.to_string(), "%r") == "Dependency"
    });
    assert_eq!(field(&c, &after_all.to_string(), "%E"), format!("afterok:{arr}(unfulfilled)"));
    let show = c.ok("scontrol", &["show", "job", &after_one.to_string()]);
    assert!(show.contains(&format!("Reason=Dependency Dependency=afterany:{arr}_1(unfulfilled)")), "{show}");
    for id in [after_all, after_one, either] {
        c.wait_state(id, &["COMPLETED"], Duration::from_secs(60));
    }
    c.wait_until("the correlated array", Duration::from_secs(60), || {
        field(&c, &corr.to_string(), "%T").lines().filter(|l| *l == "COMPLETED").count() == 3
    });
    // Each correlated task started no earlier than its partner ended (whole seconds).
    let tasks = c.ok("squeue", &["-h", "-t", "all", "-j", &format!("{arr},{corr}"), "-o", "%F %K %A"]);
    let id_of = |array: u32, task: &str| -> u32 {
        tasks
            .lines()
            .find_map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                (f[0] == array.to_string() && f[1] == task).then(|| f[2].parse().unwrap())
            })
            .unwrap_or_else(|| panic!("{array}_{task} in {tasks}"))
    };
    for t in ["0", "1", "2"] {
        assert!(started(&c, id_of(corr, t)) > started(&c, id_of(arr, t)), "task {t}: {tasks}");
    }
    assert!(started(&c, after_all) > started(&c, id_of(arr, "2")));
    let out = std::fs::read_to_string(c.path().join(format!("slurm-{after_all}.out"))).unwrap();
    assert_eq!(out, format!("afterok:{arr}\n"));
    assert_eq!(field(&c, &after_all.to_string(), "%E"), "(null)");
}

#[test]
fn an_impossible_dependency_is_cancelled_with_kill_invalid_depend() {
    let c = Cluster::start(
        EXE,
        Options {
            nodes: 2,
            cpus: 1,
            extra_conf: "SchedulerParameters=kill_invalid_depend\n".into(),
            ..Default::default()
        },
    );
    let bad = c.submit(&["--wrap", "exit 3"]);
    let doomed = c.submit(&["-d", &format!("afterok:{bad}"), "--wrap", "true"]);
    let rescue = c.submit(&["-d", &format!("afternotok:{bad}"), "--wrap", "true"]);
    c.wait_state(doomed, &["CANCELLED"], Duration::from_secs(30));
    c.wait_state(rescue, &["COMPLETED"], Duration::from_secs(30));
    let show = c.ok("scontrol", &["show", "job", &doomed.to_string()]);
    assert!(show.contains("JobState=CANCELLED Reason=DependencyNeverSatisfied"), "{show}");
    let conf = c.ok("scontrol", &["show", "config"]);
    assert!(conf.contains("SchedulerParameters     = kill_invalid_depend"), "{conf}");
    let refused = c.run("sbatch", &["-d", "afterok:99999", "--wrap", "true"]);
    assert_eq!(
        String::from_utf8_lossy(&refused.stderr).trim(),
        "sbatch: error: Batch job submission failed: Job dependency problem"
    );
}

#[test]
fn singleton_jobs_of_one_name_run_one_at_a_time() {
    let c = Cluster::start(EXE, Options { nodes: 2, cpus: 2, ..Default::default() });
    let first = c.submit(&["-J", "solo", "--wrap", "sleep 1"]);
    let second = c.submit(&["-J", "solo", "-d", "singleton", "--wrap", "true"]);
    let other = c.submit(&["-J", "other", "-d", "singleton", "--wrap", "true"]);
    c.wait_state(other, &["COMPLETED"], Duration::from_secs(20));
    assert_eq!(field(&c, &second.to_string(), "%T %r"), "PENDING Dependency");
    c.wait_state(second, &["COMPLETED"], Duration::from_secs(20));
    assert!(started(&c, second) > started(&c, first));
}
