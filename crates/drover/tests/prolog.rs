//! Prolog, Epilog, TaskProlog, TaskEpilog, PrologFlags=Alloc and the health check on a real
//! cluster, with the environments real Slurm 22.05 gives them; a failing prolog drains its
//! node and sends the job back to the queue held, as Slurm does.

use drover_testkit::{Cluster, Options};
use std::path::Path;
use std::time::Duration;

const EXE: &str = env!("CARGO_BIN_EXE_drover");

/// Writes an executable script.
fn script(dir: &Path, name: &str, body: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/bash\n{body}")).unwrap();
    std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    p.display().to_string()
}

fn cluster(conf: String) -> Cluster {
    Cluster::start(EXE, Options { nodes: 2, cpus: 2, extra_conf: conf, ..Default::default() })
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

fn keys(env: &str) -> Vec<String> {
    env.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, _)| k.to_string())
        .filter(|k| k.starts_with("SLURM"))
        .collect()
}

#[test]
fn prolog_epilog_and_task_prolog_run_where_and_when_slurm_runs_them() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().display().to_string();
    let prolog = script(d.path(), "prolog.sh", &format!("env | sort > {out}/prolog-$SLURMD_NODENAME-$SLURM_JOB_ID\n"));
    let epilog = script(d.path(), "epilog.sh", &format!("env | sort > {out}/epilog-$SLURMD_NODENAME-$SLURM_JOB_ID\n"));
    let tprolog = script(
        d.path(),
        "taskprolog.sh",
        "echo export FROM_TASK_PROLOG=yes\necho unset DROP_ME\necho print hello from task prolog\n",
    );
    let tepilog = script(
        d.path(),
        "taskepilog.sh",
        &format!("touch {out}/taskepilog-$SLURM_JOB_ID-${{SLURM_STEP_ID:-b}}-$SLURM_PROCID\n"),
    );
    let c = cluster(format!("Prolog={prolog}\nEpilog={epilog}\nTaskProlog={tprolog}\nTaskEpilog={tepilog}\n"));
    let id = c.submit(&[
        "-N2",
        "--export=ALL,DROP_ME=1",
        "--wrap",
        "echo FTP=$FROM_TASK_PROLOG DROP=${DROP_ME:-gone}; srun -l bash -c 'echo step FTP=$FROM_TASK_PROLOG' | sort",
    ]);
    c.wait_state(id, &["COMPLETED"], Duration::from_secs(30));
    assert_eq!(
        read(&c.path().join(format!("slurm-{id}.out"))),
        "hello from task prolog\nFTP=yes DROP=gone\n0: hello from task prolog\n0: step FTP=yes\n1: hello from task prolog\n1: step FTP=yes\n"
    );
    // The prolog ran once on each node (the batch script's and the step's), with the
    // variables real Slurm gave its prolog on the lab.
    let p1 = read(&d.path().join(format!("prolog-node1-{id}")));
    assert_eq!(
        keys(&p1),
        [
            "SLURMD_NODENAME",
            "SLURM_CLUSTER_NAME",
            "SLURM_CONF",
            "SLURM_JOBID",
            "SLURM_JOB_CPUS_PER_NODE",
            "SLURM_JOB_GID",
            "SLURM_JOB_ID",
            "SLURM_JOB_NUM_NODES",
            "SLURM_JOB_PARTITION",
            "SLURM_JOB_RESTART_COUNT",
            "SLURM_JOB_STDERR",
            "SLURM_JOB_STDIN",
            "SLURM_JOB_STDOUT",
            "SLURM_JOB_UID",
            "SLURM_JOB_USER",
            "SLURM_JOB_WORK_DIR",
            "SLURM_NODELIST",
            "SLURM_SCRIPT_CONTEXT",
            "SLURM_UID"
        ]
    );
    assert!(p1.contains("SLURM_SCRIPT_CONTEXT=prolog_slurmd\n") && p1.contains("SLURM_NODELIST=node[1-2]\n"), "{p1}");
    assert!(read(&d.path().join(format!("prolog-node2-{id}"))).contains("SLURMD_NODENAME=node2\n"));
    // The epilog, on both nodes, once the job is over.
    c.wait_until("the epilogs", Duration::from_secs(10), || {
        (1..=2).all(|n| d.path().join(format!("epilog-node{n}-{id}")).exists())
    });
    let e1 = read(&d.path().join(format!("epilog-node1-{id}")));
    assert!(
        e1.contains("SLURM_SCRIPT_CONTEXT=epilog_slurmd\nSLURM_UID=0\n")
            || e1.contains("SLURM_SCRIPT_CONTEXT=epilog_slurmd\n")
    );
    assert!(e1.contains("SLURM_JOB_EXIT_CODE=0\n") && e1.contains("SLURM_JOB_EXIT_CODE2=0:0\n"), "{e1}");
    // TaskEpilog after the batch script and after each task of the step.
    for t in ["b-0", "0-0", "0-1"] {
        assert!(d.path().join(format!("taskepilog-{id}-{t}")).exists(), "no task epilog for {t}");
    }
}

#[test]
fn a_failing_prolog_drains_the_node_and_requeues_the_job_held() {
    let d = tempfile::tempdir().unwrap();
    let prolog = script(
        d.path(),
        "prolog.sh",
        "[ \"$SLURMD_NODENAME\" = node2 ] && { echo bad prolog output; exit 3; }\nexit 0\n",
    );
    let c = cluster(format!("Prolog={prolog}\n"));
    let id = c.submit(&["-w", "node2", "--wrap", "echo ran"]);
    c.wait_until("the job back in the queue", Duration::from_secs(20), || {
        c.ok("squeue", &["-h", "-j", &id.to_string(), "-o", "%T %r"]).trim() == "PENDING launch failed requeued held"
    });
    let show = c.ok("scontrol", &["show", "job", &id.to_string()]);
    assert!(show.contains("JobState=PENDING Reason=launch_failed_requeued_held"), "{show}");
    assert!(show.contains("Restarts=1"), "{show}");
    assert_eq!(read(&c.path().join(format!("slurm-{id}.out"))), "Error running slurm prolog: 3\n");
    let node = c.ok("scontrol", &["show", "node", "node2"]);
    assert!(node.contains("Reason=Prolog error [root@"), "{node}");
    assert!(c.ok("sinfo", &["-h", "-n", "node2", "-o", "%t"]).trim() == "drain");
    // Released, it runs where the prolog works.
    c.ok("scontrol", &["update", &format!("JobId={id}"), "NodeList=node1"]);
    c.ok("scontrol", &["release", &id.to_string()]);
    c.wait_state(id, &["COMPLETED"], Duration::from_secs(20));
}

#[test]
fn with_prolog_flags_alloc_every_node_runs_the_prolog_at_start() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().display().to_string();
    let prolog = script(d.path(), "prolog.sh", &format!("touch {out}/prolog-$SLURMD_NODENAME-$SLURM_JOB_ID\n"));
    let c = cluster(format!("Prolog={prolog}\nPrologFlags=Alloc\n"));
    // A two-node job whose script never starts a step on node2.
    let id = c.submit(&["-N2", "--wrap", "sleep 0.2"]);
    c.wait_state(id, &["COMPLETED"], Duration::from_secs(20));
    c.wait_until("the prolog on node2", Duration::from_secs(10), || {
        d.path().join(format!("prolog-node2-{id}")).exists()
    });
    assert!(d.path().join(format!("prolog-node1-{id}")).exists());
}

#[test]
fn a_failing_health_check_drains_its_node_with_its_output() {
    let d = tempfile::tempdir().unwrap();
    let hc = script(
        d.path(),
        "health.sh",
        "[ \"$SLURMD_NODENAME\" = node1 ] && { echo disk /scratch full; exit 1; }\nexit 0\n",
    );
    let c = cluster(format!("HealthCheckProgram={hc}\nHealthCheckInterval=1\n"));
    c.wait_until("node1 drained", Duration::from_secs(15), || {
        c.ok("sinfo", &["-h", "-R", "-o", "%E|%N"]).trim() == "disk /scratch full|node1"
    });
    assert_eq!(c.ok("sinfo", &["-h", "-n", "node2", "-o", "%t"]).trim(), "idle");
}

#[test]
fn prolog_and_epilog_slurmctld_run_on_the_controller_around_the_job() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().display().to_string();
    let prolog = script(
        d.path(),
        "pctld.sh",
        &format!(
            "sleep 0.3; [ \"$SLURM_JOB_NAME\" = slow ] && sleep 3\nenv | sort > {out}/pctld-$SLURM_JOB_ID\n\
             [ \"$SLURM_JOB_NAME\" = bad ] && exit 1\nexit 0\n"
        ),
    );
    // Written whole, then renamed: the test reads it as soon as it exists.
    let epilog = script(
        d.path(),
        "ectld.sh",
        &format!(
            "env | sort > {out}/.ectld-$SLURM_JOB_ID && mv {out}/.ectld-$SLURM_JOB_ID {out}/ectld-$SLURM_JOB_ID\n"
        ),
    );
    let c = cluster(format!("PrologSlurmctld={prolog}\nEpilogSlurmctld={epilog}\n"));
    // The job starts only after the controller's prolog is done.
    let id = c.submit(&["--wrap", &format!("test -f {out}/pctld-$SLURM_JOB_ID && echo after-prolog; exit 3")]);
    c.wait_state(id, &["FAILED"], Duration::from_secs(20));
    assert_eq!(read(&c.path().join(format!("slurm-{id}.out"))), "after-prolog\n");
    let p = read(&d.path().join(format!("pctld-{id}")));
    assert!(p.contains("SLURM_SCRIPT_CONTEXT=prolog_slurmctld\n") && p.contains("SLURM_JOB_NODELIST=node1\n"), "{p}");
    c.wait_until("the epilog", Duration::from_secs(10), || d.path().join(format!("ectld-{id}")).exists());
    let e = read(&d.path().join(format!("ectld-{id}")));
    assert!(e.contains("SLURM_SCRIPT_CONTEXT=epilog_slurmctld\n") && e.contains("SLURM_JOB_EXIT_CODE2=3:0\n"), "{e}");
    // srun inside waits for it too; a failing one sends a batch job back held.
    let o = c.run("srun", &["-J", "ok", "bash", "-c", &format!("test -f {out}/pctld-$SLURM_JOB_ID && echo ok")]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "ok\n", "{:?}", String::from_utf8_lossy(&o.stderr));
    // While it runs, the job shows CONFIGURING (CF), as in Slurm.
    let slow = c.submit(&["-J", "slow", "--wrap", "true"]);
    c.wait_until("CF", Duration::from_secs(10), || {
        c.ok("squeue", &["-h", "-j", &slow.to_string(), "-o", "%t %T"]).trim() == "CF CONFIGURING"
    });
    c.wait_state(slow, &["COMPLETED"], Duration::from_secs(20));
    let bad = c.submit(&["-J", "bad", "--wrap", "echo ran"]);
    c.wait_until("held", Duration::from_secs(20), || {
        c.ok("squeue", &["-h", "-j", &bad.to_string(), "-o", "%T %r"]).trim() == "PENDING launch failed requeued held"
    });
    assert_eq!(read(&c.path().join(format!("slurm-{bad}.out"))), "");
}

#[test]
fn prolog_flags_contain_runs_an_extern_step_for_the_jobs_life() {
    let c = cluster("PrologFlags=Contain\n".into());
    let id = c.submit(&[
        "-N2",
        "--wrap",
        // The step's end reaches the controller just after srun returns (as in Slurm): wait.
        "srun -N1 -n1 bash -c 'echo step $SLURM_STEP_ID'; \
         while squeue -h -s -o %i | grep -q '[.]0$'; do sleep 0.1; done; squeue -h -s -o '%i %j %N' | sort",
    ]);
    c.wait_state(id, &["COMPLETED"], Duration::from_secs(30));
    // The extern step on both nodes beside the batch step; srun's steps still count from 0.
    assert_eq!(
        read(&c.path().join(format!("slurm-{id}.out"))),
        format!("step 0\n{id}.batch batch node1\n{id}.extern extern node[1-2]\n")
    );
    assert!(c.ok("scontrol", &["show", "job", &id.to_string()]).contains("JobState=COMPLETED"));
    // Its processes end with the job.
    c.wait_until("the extern step gone", Duration::from_secs(10), || {
        drover_testkit::processes_with("sleep 100000000").is_empty()
    });
}

#[test]
fn a_node_takes_no_new_work_until_its_epilog_is_done() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().display().to_string();
    let epilog = script(d.path(), "epilog.sh", &format!("sleep 1.5; touch {out}/epilog-done-$SLURM_JOB_ID\n"));
    let c = cluster(format!("Epilog={epilog}\n"));
    let a = c.submit(&["-w", "node1", "--wrap", "true"]);
    c.wait_state(a, &["COMPLETED"], Duration::from_secs(20));
    // While the epilog runs the node shows `comp` and the next job waits for it.
    assert_eq!(c.ok("sinfo", &["-h", "-n", "node1", "-o", "%t"]).trim(), "comp");
    let b = c.submit(&["-w", "node1", "--wrap", &format!("test -f {out}/epilog-done-{a} && echo after-epilog")]);
    c.wait_state(b, &["COMPLETED"], Duration::from_secs(20));
    assert_eq!(read(&c.path().join(format!("slurm-{b}.out"))), "after-epilog\n");
    c.wait_until("node1 idle", Duration::from_secs(10), || {
        c.ok("sinfo", &["-h", "-n", "node1", "-o", "%t"]).trim() == "idle"
    });
}
