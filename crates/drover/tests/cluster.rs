//! Integration tests on real clusters of processes (controller + node agents on loopback),
//! driven with the commands exactly as a user types them.

use drover_testkit::{processes_with, Cluster, Options};
use std::time::Duration;

const EXE: &str = env!("CARGO_BIN_EXE_drover");

fn cluster(nodes: u32, cpus: u32) -> Cluster {
    Cluster::start(EXE, Options { nodes, cpus, ..Default::default() })
}

fn text(o: &std::process::Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).to_string(), String::from_utf8_lossy(&o.stderr).to_string())
}

#[test]
fn a_hundred_jobs_complete_with_their_output_files() {
    let c = cluster(4, 2);
    let out = c.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let pattern = format!("{}/job-%j.out", out.display());
    let mut ids = Vec::new();
    for i in 0..100 {
        let cmd = format!("echo hello {i} from $SLURM_JOB_ID on $SLURMD_NODENAME");
        ids.push(c.submit(&["-o", &pattern, "--wrap", &cmd]));
    }
    for &id in &ids {
        c.wait_state(id, &["COMPLETED"], Duration::from_secs(120));
    }
    for (i, id) in ids.iter().enumerate() {
        let f = out.join(format!("job-{id}.out"));
        let body = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        assert!(body.starts_with(&format!("hello {i} from {id} on node")), "{body}");
    }
}

#[test]
fn a_two_node_job_waits_for_two_free_nodes_and_holds_none() {
    let c = cluster(2, 1);
    let blocker = c.submit(&["-w", "node1", "--wrap", "sleep 4"]);
    c.wait_state(blocker, &["RUNNING"], Duration::from_secs(20));
    let big = c.submit(&["-N2", "--wrap", "echo two"]);
    let small = c.submit(&["--wrap", "echo small"]);
    std::thread::sleep(Duration::from_millis(500));
    let q = c.ok("squeue", &["-h", "-o", "%i %t %r"]);
    assert!(q.contains(&format!("{big} PD Resources")), "{q}");
    assert!(q.contains(&format!("{small} PD Priority")), "{q}");
    // node2 is free, yet the waiting two-node job holds none of it.
    let n2 = c.ok("sinfo", &["-h", "-N", "-n", "node2", "-o", "%t %C"]);
    assert_eq!(n2.trim(), "idle 0/1/0/1");
    c.wait_state(big, &["COMPLETED"], Duration::from_secs(30));
    let nodes = c.ok("squeue", &["-h", "-t", "all", "-j", &big.to_string(), "-o", "%N"]);
    assert_eq!(nodes.trim(), "node[1-2]");
    c.wait_state(small, &["COMPLETED"], Duration::from_secs(30));
}

#[test]
fn cancel_ends_the_job_and_every_process_it_started() {
    let c = cluster(1, 2);
    let marker = format!("drover-cancel-{}", std::process::id());
    let script =
        format!("bash -c 'exec -a {marker}-a sleep 300' & setsid bash -c 'exec -a {marker}-b sleep 300' & wait");
    let id = c.submit(&["--wrap", &script]);
    c.wait_state(id, &["RUNNING"], Duration::from_secs(20));
    c.wait_until("the job's processes", Duration::from_secs(10), || processes_with(&marker).len() >= 2);
    c.ok("scancel", &[&id.to_string()]);
    c.wait_state(id, &["CANCELLED"], Duration::from_secs(20));
    c.wait_until("no process of the job left", Duration::from_secs(10), || processes_with(&marker).is_empty());
    let out = std::fs::read_to_string(c.path().join(format!("slurm-{id}.out"))).unwrap();
    assert!(out.contains(&format!("*** JOB {id} ON node1 CANCELLED AT ")), "{out}");
}

#[test]
fn a_time_limit_ends_the_job_as_timeout_with_nothing_left_behind() {
    let c = cluster(1, 1);
    let marker = format!("drover-timeout-{}", std::process::id());
    let id = c.submit(&["-t", "1", "--wrap", &format!("bash -c 'exec -a {marker} sleep 300'")]);
    c.wait_state(id, &["RUNNING"], Duration::from_secs(20));
    c.wait_state(id, &["TIMEOUT"], Duration::from_secs(90));
    let show = c.ok("scontrol", &["show", "job", &id.to_string()]);
    assert!(show.contains("JobState=TIMEOUT Reason=TimeLimit"), "{show}");
    assert!(show.contains("TimeLimit=00:01:00"), "{show}");
    assert!(processes_with(&marker).is_empty());
}

#[test]
fn kill_9_of_the_controller_loses_no_job_and_running_jobs_finish() {
    let mut c = cluster(2, 2);
    let running: Vec<u32> = (0..4).map(|i| c.submit(&["--wrap", &format!("sleep 3; echo done {i}")])).collect();
    let held: Vec<u32> = (0..3).map(|_| c.submit(&["--hold", "--wrap", "echo held"])).collect();
    for &id in &running {
        c.wait_state(id, &["RUNNING"], Duration::from_secs(20));
    }
    c.kill_controller();
    c.start_controller();
    c.wait_until("the controller to answer", Duration::from_secs(20), || c.run("squeue", &[]).status.success());
    for &id in &held {
        assert_eq!(c.state(id), "PENDING");
    }
    for (i, &id) in running.iter().enumerate() {
        c.wait_state(id, &["COMPLETED"], Duration::from_secs(40));
        let out = std::fs::read_to_string(c.path().join(format!("slurm-{id}.out"))).unwrap();
        assert_eq!(out, format!("done {i}\n"));
    }
    // Submissions continue with fresh ids after the restart.
    let next = c.submit(&["--wrap", "true"]);
    assert!(next > *held.iter().max().unwrap());
    c.ok("scontrol", &["release", &held[0].to_string()]);
    c.wait_state(held[0], &["COMPLETED"], Duration::from_secs(20));
}

#[test]
fn a_restart_of_a_node_agent_does_not_kill_its_jobs() {
    let mut c = cluster(1, 1);
    let id = c.submit(&["--wrap", "sleep 3; echo survived"]);
    c.wait_state(id, &["RUNNING"], Duration::from_secs(20));
    c.kill_node("node1");
    std::thread::sleep(Duration::from_millis(500));
    c.start_node("node1");
    c.wait_state(id, &["COMPLETED"], Duration::from_secs(30));
    let out = std::fs::read_to_string(c.path().join(format!("slurm-{id}.out"))).unwrap();
    assert_eq!(out, "survived\n");
}

#[test]
fn the_job_ends_even_when_its_agent_is_down_at_that_moment() {
    let mut c = cluster(1, 1);
    let id = c.submit(&["--wrap", "sleep 1; echo ok"]);
    c.wait_state(id, &["RUNNING"], Duration::from_secs(20));
    c.kill_node("node1");
    std::thread::sleep(Duration::from_secs(2));
    c.start_node("node1");
    c.wait_state(id, &["COMPLETED"], Duration::from_secs(30));
}

#[test]
fn a_job_cancelled_while_its_agent_is_away_ends_when_the_agent_returns() {
    let mut c = cluster(1, 1);
    let id = c.submit(&["--wrap", "sleep 300"]);
    c.wait_state(id, &["RUNNING"], Duration::from_secs(20));
    // The cancel reaches a controller with no session to the node (as after a restart of
    // either): the agent, back, still runs the job and must be told again.
    c.kill_node("node1");
    c.ok("scancel", &[&id.to_string()]);
    assert_eq!(c.state(id), "COMPLETING");
    c.start_node("node1");
    c.wait_state(id, &["CANCELLED"], Duration::from_secs(20));
    c.wait_until("the script is gone", Duration::from_secs(10), || {
        // This cluster's path: other tests' clusters run a job 1 on a node1 too.
        drover_testkit::processes_with(&c.path().join(format!("spool/node1/job{id}/script")).display().to_string())
            .is_empty()
    });
}

#[test]
fn finished_jobs_stay_visible_for_min_job_age() {
    let c = cluster(2, 1);
    let a = c.submit(&["--wrap", "true"]);
    let b = c.submit(&["--wrap", "exit 3"]);
    c.wait_state(a, &["COMPLETED"], Duration::from_secs(20));
    c.wait_state(b, &["FAILED"], Duration::from_secs(20));
    let id = c.submit(&["--hold", "--wrap", "true"]);
    c.ok("scancel", &[&id.to_string()]);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(c.state(a), "COMPLETED");
    assert_eq!(c.state(b), "FAILED");
    assert_eq!(c.state(id), "CANCELLED");
    let show = c.ok("scontrol", &["show", "job", &b.to_string()]);
    assert!(show.contains("ExitCode=3:0"), "{show}");
}

#[test]
fn srun_runs_tasks_over_nodes_and_returns_the_worst_exit_code() {
    let c = cluster(2, 2);
    let out =
        c.run("srun", &["-l", "-N2", "-n4", "bash", "-c", "echo $SLURM_PROCID/$SLURM_NTASKS on $SLURMD_NODENAME"]);
    let (so, se) = text(&out);
    assert!(out.status.success(), "{so}{se}");
    let mut lines: Vec<&str> = so.lines().collect();
    lines.sort();
    assert_eq!(lines, ["0: 0/4 on node1", "1: 1/4 on node1", "2: 2/4 on node2", "3: 3/4 on node2"]);
    let out = c.run("srun", &["-N1", "bash", "-c", "exit 3"]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(text(&out).1, "srun: error: node1: task 0: Exited with exit code 3\n");
    let out = c.run("srun", &["drover-no-such-command"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out).1,
        "slurmstepd: error: execve(): drover-no-such-command: No such file or directory\nsrun: error: node1: task 0: Exited with exit code 2\n"
    );
    let out = c.run("srun", &["-N5", "--immediate=1", "hostname"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).1.ends_with("srun: error: Unable to allocate resources: Requested nodes are busy\n"),
        "{}",
        text(&out).1
    );
}

#[test]
fn sbatch_refuses_bad_requests_with_slurms_words_and_keeps_what_it_accepted() {
    let c = cluster(2, 2);
    let ok = c.submit(&["--hold", "--wrap", "true"]);
    let out = c.run("sbatch", &["-p", "nosuchpart", "--wrap", "true"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out).1,
        "sbatch: error: invalid partition specified: nosuchpart\nsbatch: error: Batch job submission failed: Invalid partition name specified\n"
    );
    let out = c.run("sbatch", &["--mem=100G", "--wrap", "true"]);
    assert_eq!(
        text(&out).1,
        "sbatch: error: Batch job submission failed: Requested node configuration is not available\n"
    );
    // sbatch leaves with 255 on an option getopt refuses (squeue with 1), as real Slurm 22.05.
    let out = c.run("sbatch", &["--bogus", "--wrap", "true"]);
    assert_eq!(out.status.code(), Some(255));
    assert!(text(&out).1.starts_with("sbatch: unrecognized option '--bogus'"), "{}", text(&out).1);
    let out = c.run("sbatch", &["-t", "abc", "--wrap", "true"]);
    assert_eq!(out.status.code(), Some(255));
    assert_eq!(text(&out).1, "sbatch: error: Invalid --time specification\n");
    // -N beyond the partition is accepted and waits, as in Slurm.
    let wide = c.submit(&["-N5", "--wrap", "true"]);
    std::thread::sleep(Duration::from_millis(300));
    let q = c.ok("squeue", &["-h", "-j", &wide.to_string(), "-o", "%r"]);
    assert_eq!(q.trim(), "PartitionNodeLimit");
    assert_eq!(c.state(ok), "PENDING");
}

#[test]
fn directives_environment_and_command_line_combine_in_slurms_order() {
    let c = cluster(1, 2);
    let script = c.path().join("job.sh");
    std::fs::write(
        &script,
        "#!/bin/bash\n#SBATCH -J fromdirective --time=10\n#SBATCH --output=dir-%j.out\necho $SLURM_JOB_NAME\n",
    )
    .unwrap();
    let s = script.display().to_string();
    let id: u32 = String::from_utf8_lossy(&c.command("sbatch", &["--parsable", &s]).output().unwrap().stdout)
        .trim()
        .parse()
        .unwrap();
    let name = c.ok("squeue", &["-h", "-t", "all", "-j", &id.to_string(), "-o", "%j %l"]);
    assert_eq!(name.trim(), "fromdirective 10:00");
    let out = c.command("sbatch", &["--parsable", &s]).env("SBATCH_JOB_NAME", "fromenv").output().unwrap();
    let id2: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let out =
        c.command("sbatch", &["--parsable", "-J", "fromcli", &s]).env("SBATCH_JOB_NAME", "fromenv").output().unwrap();
    let id3: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    assert_eq!(c.ok("squeue", &["-h", "-t", "all", "-j", &id2.to_string(), "-o", "%j"]).trim(), "fromenv");
    assert_eq!(c.ok("squeue", &["-h", "-t", "all", "-j", &id3.to_string(), "-o", "%j"]).trim(), "fromcli");
    c.wait_state(id3, &["COMPLETED"], Duration::from_secs(20));
    assert_eq!(std::fs::read_to_string(c.path().join(format!("dir-{id3}.out"))).unwrap(), "fromcli\n");
}

/// sbatch's own options are read from directives too (simple-slurm writes `#SBATCH --parsable`,
/// workflow tools `#SBATCH --wait`), and a word that is no option there is refused as Slurm does.
#[test]
fn sbatchs_own_options_count_in_directives() {
    let c = cluster(1, 2);
    let write = |name: &str, body: &str| {
        let p = c.path().join(name);
        std::fs::write(&p, body).unwrap();
        p.display().to_string()
    };
    let parsable = write("parsable.sh", "#!/bin/bash\n#SBATCH --parsable\n#SBATCH -J p\ntrue\n");
    let (out, err) = text(&c.run("sbatch", &[&parsable]));
    assert!(!out.is_empty() && out.trim().chars().all(|ch| ch.is_ascii_digit()), "{out:?} {err}");
    assert_eq!(err, "");

    let test_only = write("test-only.sh", "#!/bin/bash\n#SBATCH --test-only\ntrue\n");
    let o = c.run("sbatch", &[&test_only]);
    assert_eq!(o.status.code(), Some(0));
    assert!(text(&o).1.starts_with("sbatch: Job "), "{}", text(&o).1);
    assert_eq!(text(&o).0, "");

    let wait = write("wait.sh", "#!/bin/bash\n#SBATCH -W\nsleep 1; exit 4\n");
    let o = c.run("sbatch", &[&wait]);
    assert_eq!(o.status.code(), Some(4), "{}", text(&o).1);
    // SBATCH_WAIT as --wait.
    let o = c.command("sbatch", &["--wrap", "exit 5"]).env("SBATCH_WAIT", "1").output().unwrap();
    assert_eq!(o.status.code(), Some(5), "{}", text(&o).1);

    let stray = write("stray.sh", "#!/bin/bash\n#SBATCH -N1 stray\ntrue\n");
    let o = c.run("sbatch", &[&stray]);
    assert_eq!(o.status.code(), Some(255));
    assert_eq!(text(&o).1, "sbatch: error: Invalid directive found in batch script: stray\n");
}

#[test]
fn drain_and_resume_a_node() {
    let c = cluster(2, 1);
    let out = c.run("scontrol", &["update", "NodeName=node1", "State=DRAIN"]);
    // Real scontrol's words, without slurm_update's prefix (testdata/corpus, node-drain-noreason).
    assert_eq!(text(&out).1, "You must specify a reason when DOWNING or DRAINING a node. Request denied\n");
    c.ok("scontrol", &["update", "NodeName=node1", "State=DRAIN", "Reason=maintenance"]);
    let s = c.ok("sinfo", &["-h", "-N", "-o", "%N %t %E"]);
    assert!(s.contains("node1 drain maintenance"), "{s}");
    let a = c.submit(&["--wrap", "sleep 1"]);
    c.wait_state(a, &["RUNNING"], Duration::from_secs(20));
    assert_eq!(c.ok("squeue", &["-h", "-j", &a.to_string(), "-o", "%N"]).trim(), "node2");
    c.ok("scontrol", &["update", "NodeName=node1", "State=RESUME"]);
    let s = c.ok("sinfo", &["-h", "-N", "-n", "node1", "-o", "%t"]);
    assert_eq!(s.trim(), "idle");
}

#[test]
fn dependencies_and_hold_release() {
    let c = cluster(1, 2);
    let first = c.submit(&["--wrap", "sleep 1; exit 1"]);
    let ok = c.submit(&["-d", &format!("afterok:{first}"), "--wrap", "true"]);
    let notok = c.submit(&["-d", &format!("afternotok:{first}"), "--wrap", "true"]);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(c.ok("squeue", &["-h", "-j", &ok.to_string(), "-o", "%r"]).trim(), "Dependency");
    c.wait_state(notok, &["COMPLETED"], Duration::from_secs(20));
    c.wait_until("DependencyNeverSatisfied", Duration::from_secs(10), || {
        c.ok("squeue", &["-h", "-j", &ok.to_string(), "-o", "%r"]).trim() == "DependencyNeverSatisfied"
    });
    let h = c.submit(&["-H", "--wrap", "true"]);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(c.ok("squeue", &["-h", "-j", &h.to_string(), "-o", "%r"]).trim(), "JobHeldUser");
    c.ok("scontrol", &["release", &h.to_string()]);
    c.wait_state(h, &["COMPLETED"], Duration::from_secs(20));
}

#[test]
fn sbatch_wait_returns_the_job_exit_code_and_requeue_runs_it_again() {
    let c = cluster(1, 2);
    let out = c.run("sbatch", &["--wait", "--wrap", "exit 3"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out).1);
    assert!(text(&out).0.starts_with("Submitted batch job "));
    let out = c.run("sbatch", &["--wait", "--wrap", "true"]);
    assert_eq!(out.status.code(), Some(0));

    let marker = c.path().join("runs");
    let m = marker.display().to_string();
    let id = c.submit(&["--wrap", &format!("echo run >> {m}; sleep 30")]);
    c.wait_state(id, &["RUNNING"], Duration::from_secs(20));
    c.wait_until("the first run", Duration::from_secs(10), || marker.exists());
    c.ok("scontrol", &["requeue", &id.to_string()]);
    c.wait_until("the second run", Duration::from_secs(30), || {
        std::fs::read_to_string(&marker).is_ok_and(|s| s.lines().count() == 2)
    });
    let show = c.ok("scontrol", &["show", "job", &id.to_string()]);
    assert!(show.contains("Restarts=1"), "{show}");
    assert!(show.contains("JobState=RUNNING"), "{show}");
    c.ok("scancel", &[&id.to_string()]);
    c.wait_state(id, &["CANCELLED"], Duration::from_secs(20));
}

/// `--tmp`: only nodes whose TmpDisk holds it; none that does is Slurm's refusal at submit.
#[test]
fn tmp_picks_nodes_with_enough_tmp_disk() {
    let c = Cluster::start(
        EXE,
        Options {
            nodes: 2,
            node_line: Some(
                "NodeName=node1 NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=1 RealMemory=1000 TmpDisk=100\n\
                 NodeName=node2 NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=1 RealMemory=1000 TmpDisk=5000"
                    .into(),
            ),
            ..Default::default()
        },
    );
    let id = c.submit(&["--tmp=2G", "--wrap", "true"]);
    c.wait_state(id, &["COMPLETED"], Duration::from_secs(20));
    assert_eq!(c.ok("squeue", &["-h", "-t", "all", "-j", &id.to_string(), "-o", "%N"]).trim(), "node2");
    let o = c.run("sbatch", &["--tmp=8G", "--wrap", "true"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        text(&o).1,
        "sbatch: error: Batch job submission failed: Requested node configuration is not available\n"
    );
}

/// `sinfo -O`: named fields, 20 wide and left-justified unless `:[.]N` says otherwise, no
/// separator between columns, a suffix after the width kept; an unknown name is reported.
#[test]
fn sinfo_long_format_fields() {
    let c = cluster(2, 2);
    assert_eq!(
        c.ok("sinfo", &["-O", "partition,nodes,cpus"]),
        format!("{:<20}{:<20}{:<20}\n{:<20}{:<20}{:<20}\n", "PARTITION", "NODES", "CPUS", "debug*", "2", "2")
    );
    assert_eq!(
        c.ok("sinfo", &["-h", "-N", "--Format=nodelist:8,statecompact:.6|,memory:5"]),
        format!("node1     idle|{:<5}\nnode2     idle|{:<5}\n", "2000", "2000")
    );
    let o = c.run("sinfo", &["-h", "-O", "nodes:3,bogus"]);
    assert_eq!(text(&o).0, "2  \n");
    assert_eq!(text(&o).1, "sinfo: error: Invalid job format specification: bogus\n");
}

/// `squeue -O`: `:N` is the whole column's width, with no separator (as real Slurm prints
/// `JOBID   NAME      STATE               `), and JobID is a pending array's own id where
/// JobArrayID is `N_[1-3]`.
#[test]
fn squeue_long_format_widths_and_job_ids() {
    let c = cluster(1, 1);
    let one = c.submit(&["-H", "-J", "true", "--wrap", "true"]);
    let arr = c.submit(&["-H", "-J", "arr", "--array=1-3", "--wrap", "true"]);
    assert_eq!(
        c.ok("squeue", &["-O", "jobid:8,name:10,state"]),
        format!("JOBID   NAME      STATE               \n{one:<8}true      PENDING             \n{arr:<8}arr       PENDING             \n")
    );
    assert_eq!(
        c.ok("squeue", &["-h", "-j", &arr.to_string(), "-O", "jobid:6,jobarrayid:10"]),
        format!("{arr:<6}{:<10}\n", format!("{arr}_[1-3]"))
    );
}

/// squeue never cuts a time or a node list to its column, as Slurm's print.c does not:
/// `squeue -l` shows a limit of `1-02:00:00` in the 9-wide TIME_LIMIT column whole.
#[test]
fn squeue_keeps_times_and_node_lists_whole() {
    let c = cluster(1, 1);
    let id = c.submit(&["-H", "-t", "1-02:00:00", "--wrap", "true"]);
    let l = c.ok("squeue", &["-h", "-l", "-j", &id.to_string()]);
    assert!(l.contains(" 1-02:00:00 "), "{l:?}");
    assert_eq!(c.ok("squeue", &["-h", "-j", &id.to_string(), "-o", "%.4l|%.3j"]), "1-02:00:00|wra\n");
}

/// `scancel -i` asks job by job and cancels only what is confirmed (it was parsed and ignored:
/// every job named was cancelled unasked). Slurm's prompt, on standard output.
#[test]
fn scancel_interactive_cancels_only_what_is_confirmed() {
    use std::io::Write;
    let c = cluster(1, 1);
    let held = |name: &str| {
        c.ok("sbatch", &["--parsable", "-H", "-J", name, "-o", "/dev/null", "--wrap", "true"]).trim().to_string()
    };
    let (keep, drop) = (held("keepme"), held("dropme"));
    let answer = |id: &str, reply: &str| {
        let mut child = c
            .command("scancel", &["-i", id])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("scancel");
        child.stdin.take().expect("stdin").write_all(reply.as_bytes()).expect("answer");
        let out = child.wait_with_output().expect("scancel ends");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // An answer that is neither is asked again.
    let asked = answer(&keep, "maybe\nn\n");
    assert_eq!(
        asked,
        format!("Cancel job_id={keep} name=keepme partition=debug [y/n]? ").repeat(2),
        "the question, twice"
    );
    assert_eq!(answer(&drop, "y\n"), format!("Cancel job_id={drop} name=dropme partition=debug [y/n]? "));
    let state = |id: &str| c.ok("squeue", &["-h", "-t", "all", "-j", id, "-o", "%T"]).trim().to_string();
    assert_eq!(state(&keep), "PENDING");
    assert_eq!(state(&drop), "CANCELLED");
    // No answer at all (end of input) is no.
    answer(&keep, "");
    assert_eq!(state(&keep), "PENDING");
    c.ok("scancel", &[&keep]);
}
