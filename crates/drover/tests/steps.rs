//! Job steps on real clusters: `srun` inside batch jobs and `salloc`, parallel steps sharing
//! an allocation, step cancellation, and the environment every task sees (compared with real
//! Slurm 22.05's, captured in `testdata/compat/`).

use drover_testkit::{compat, processes_named, Cluster, Options};
use std::collections::BTreeMap;
use std::time::Duration;

const EXE: &str = env!("CARGO_BIN_EXE_drover");

fn cluster(nodes: u32, cpus: u32) -> Cluster {
    Cluster::start(EXE, Options { nodes, cpus, ..Default::default() })
}

/// The lab's shape (`testdata/compat/slurm-22.05/conf/slurm.conf`): four 2-CPU nodes with
/// two fake GPUs each, `cpu` the default partition and `gpu` the other.
fn lab() -> Cluster {
    let c = Cluster::start(
        EXE,
        Options {
            nodes: 4,
            cpus: 2,
            // The lab ran task/affinity: steps' tasks are bound (SLURM_CPU_BIND*).
            extra_conf: "GresTypes=gpu\nTaskPlugin=task/affinity\n".into(),
            node_line: Some(
                "NodeName=node[1-4] NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=2 Boards=1 SocketsPerBoard=1 \
                 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=4000 Gres=gpu:fake:2 State=UNKNOWN"
                    .into(),
            ),
            partitions: "PartitionName=cpu Nodes=node[1-4] Default=YES MaxTime=INFINITE State=UP\n\
                         PartitionName=gpu Nodes=node[1-4] MaxTime=INFINITE State=UP\n"
                .into(),
            ..Default::default()
        },
    );
    std::fs::write(c.path().join("gres.conf"), "NodeName=node[1-4] Name=gpu Type=fake File=/dev/null\n").unwrap();
    c
}

fn text(o: &std::process::Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).to_string(), String::from_utf8_lossy(&o.stderr).to_string())
}

fn write_script(c: &Cluster, name: &str, body: &str) -> String {
    let p = c.path().join(name);
    std::fs::write(&p, body).unwrap();
    p.display().to_string()
}

fn output(c: &Cluster, id: u32) -> String {
    std::fs::read_to_string(c.path().join(format!("slurm-{id}.out"))).unwrap_or_default()
}

/// An environment dump as key → value, with the values that differ from run to run (ids,
/// ports, pids, paths, the cluster's name and address) replaced by placeholders.
fn env_map(text: &str) -> BTreeMap<String, String> {
    const VOLATILE: &[&str] = &[
        "SLURM_JOBID",
        "SLURM_JOB_ID",
        "SLURM_CLUSTER_NAME",
        "SLURM_CONF",
        "SLURM_SUBMIT_DIR",
        "SLURM_SUBMIT_HOST",
        "SLURM_TASK_PID",
        "SLURM_SRUN_COMM_PORT",
        "SLURM_STEP_LAUNCHER_PORT",
        "SLURM_WORKING_CLUSTER",
        "SLURM_LAUNCH_NODE_IPADDR",
        "SLURM_SRUN_COMM_HOST",
    ];
    text.lines()
        .filter_map(|l| l.split_once('='))
        // The captures hold the `SLURM_` variables and the GPU ones.
        .filter(|(k, _)| k.starts_with("SLURM_") || *k == "CUDA_VISIBLE_DEVICES" || *k == "GPU_DEVICE_ORDINAL")
        .map(|(k, v)| {
            let v = if VOLATILE.contains(&k) { "<V>".to_string() } else { v.to_string() };
            (k.to_string(), v)
        })
        .collect()
}

#[test]
fn every_task_sees_the_environment_slurm_gives_it() {
    let c = lab();
    let script = write_script(
        &c,
        "envtest.sh",
        "#!/bin/bash\nenv > batch-env.txt\nsrun bash -c 'env > step-env-$SLURM_PROCID.txt'\n",
    );
    let id = c.submit(&["-N2", "-n4", "-J", "envtest", &script]);
    c.wait_state(id, &["COMPLETED"], Duration::from_secs(30));
    let read = |n: &str| std::fs::read_to_string(c.path().join(n)).unwrap_or_else(|e| panic!("{n}: {e}"));
    assert_eq!(env_map(&read("batch-env.txt")), env_map(&compat("env-batch.txt")), "the batch script's");
    for t in 0..4 {
        let ours = env_map(&read(&format!("step-env-{t}.txt")));
        assert_eq!(ours, env_map(&compat(&format!("env-srun-task{t}.txt"))), "task {t} of a step in a batch job");
    }
    // A job with GPUs, and a step in it.
    let script =
        write_script(&c, "gpuenv.sh", "#!/bin/bash\nenv > gpu-batch-env.txt\nsrun bash -c 'env > gpu-step-env.txt'\n");
    let id = c.submit(&["-p", "gpu", "--gres=gpu:2", "-w", "node3", "-J", "gpuenv", &script]);
    c.wait_state(id, &["COMPLETED"], Duration::from_secs(30));
    assert_eq!(env_map(&read("gpu-batch-env.txt")), env_map(&compat("env-batch-gpu.txt")), "a GPU job's batch script");
    assert_eq!(env_map(&read("gpu-step-env.txt")), env_map(&compat("env-srun-gpu-task0.txt")), "a step of a GPU job");
    // A standalone srun: its own allocation, job name from the command.
    let out = c.run("srun", &["-N2", "-n4", "bash", "-c", "env > direct-env-$SLURM_PROCID.txt"]);
    assert!(out.status.success(), "{:?}", text(&out));
    for t in 0..4 {
        let ours = env_map(&read(&format!("direct-env-{t}.txt")));
        assert_eq!(ours, env_map(&compat(&format!("env-srun-direct-task{t}.txt"))), "task {t} of a standalone srun");
    }
}

#[test]
fn steps_share_a_batch_jobs_allocation_as_in_slurm() {
    let c = cluster(4, 2);
    let script = write_script(
        &c,
        "steps.sh",
        "#!/bin/bash\n\
         srun -l hostname | sort\n\
         srun -n1 bash -c 'echo one $SLURM_STEP_ID $SLURM_STEP_NUM_TASKS'\n\
         srun -N1 true\n\
         srun -n1 sleep 3 &\n\
         until squeue -h -s -o %j | grep -qx sleep; do sleep 0.1; done\n\
         srun -n1 bash -c 'echo second $SLURM_STEP_ID $SLURM_STEP_NODELIST'\n\
         until ! squeue -h -s -o %j | grep -qx bash; do sleep 0.1; done\n\
         squeue -h -s -o '%i %j %N'\n\
         wait\n\
         srun -n9 true\n\
         srun -N3 true\n\
         srun -w node4 true\n\
         srun -n3 -l bash -c 'echo $SLURM_STEP_TASKS_PER_NODE $SLURM_NODEID' | sort\n",
    );
    let id = c.submit(&["-N2", "-n4", &script]);
    c.wait_state(id, &["COMPLETED"], Duration::from_secs(60));
    let out = output(&c, id);
    let host =
        String::from_utf8_lossy(&std::process::Command::new("hostname").output().unwrap().stdout).trim().to_string();
    let expected = format!(
        "0: {host}\n1: {host}\n2: {host}\n3: {host}\n\
         srun: Warning: can't run 1 processes on 2 nodes, setting nnodes to 1\n\
         one 1 1\n\
         srun: error: Unable to create step for job {id}: More processors requested than permitted\n\
         srun: Warning: can't run 1 processes on 2 nodes, setting nnodes to 1\n\
         srun: Warning: can't run 1 processes on 2 nodes, setting nnodes to 1\n\
         second 3 node2\n\
         {id}.2 sleep node1\n\
         {id}.batch batch node1\n\
         srun: error: Unable to create step for job {id}: More processors requested than permitted\n\
         srun: error: Only allocated 2 nodes asked for 3\n\
         srun: error: Unable to create step for job {id}: Requested node configuration is not available\n\
         0: 2,1 0\n1: 2,1 0\n2: 2,1 1\n"
    );
    assert_eq!(out, expected);
}

#[test]
fn a_step_waits_for_the_cpus_another_step_holds() {
    let c = cluster(1, 2);
    let script = write_script(
        &c,
        "block.sh",
        "#!/bin/bash\n\
         srun sleep 2 &\n\
         until squeue -h -s -o %j | grep -qx sleep; do sleep 0.1; done\n\
         srun bash -c 'echo second $SLURM_STEP_ID'\n\
         srun --overlap bash -c 'echo overlap $SLURM_STEP_ID'\n\
         wait\n\
         srun -n1 -c1 sleep 2 &\n\
         until squeue -h -s -o %j | grep -qx sleep; do sleep 0.1; done\n\
         srun -n1 -c1 bash -c 'echo exact $SLURM_STEP_ID $SLURM_CPUS_ON_NODE'\n\
         scontrol show step $SLURM_JOB_ID.3 | head -1 | cut -d' ' -f1\n\
         wait\n",
    );
    let id = c.submit(&["-N1", "-n2", &script]);
    c.wait_state(id, &["COMPLETED"], Duration::from_secs(60));
    assert_eq!(
        output(&c, id),
        format!(
            "srun: Job {id} step creation temporarily disabled, retrying (Requested nodes are busy)\n\
             srun: Step created for job {id}\n\
             second 1\nsecond 1\noverlap 2\noverlap 2\nexact 4 1\nStepId={id}.3\n"
        )
    );
}

#[test]
fn scancel_of_a_step_kills_it_and_the_job_goes_on() {
    let c = cluster(2, 1);
    let marker = format!("drover-step-{}", std::process::id());
    let script = write_script(
        &c,
        "cancel.sh",
        &format!(
            "#!/bin/bash\nsrun -l bash -c 'exec -a {marker} sleep 300'\necho after $?\nsrun -n1 true\necho done\n"
        ),
    );
    let id = c.submit(&["-N2", &script]);
    c.wait_until("the step's two tasks", Duration::from_secs(20), || processes_named(&marker).len() == 2);
    let steps = c.ok("squeue", &["-h", "-s", &format!("{id}.0"), "-o", "%i %A %N"]);
    assert_eq!(steps, format!("{id}.0 2 node[1-2]\n"));
    // A step that does not exist: Slurm's words and exit status.
    let o = c.run("scancel", &[&format!("{id}.7")]);
    assert_eq!(o.status.code(), Some(225));
    assert_eq!(text(&o).1, format!("scancel: error: Kill job error on job step id {id}: Invalid job id specified\n"));
    c.ok("scancel", &[&format!("{id}.0")]);
    c.wait_state(id, &["COMPLETED"], Duration::from_secs(30));
    assert!(processes_named(&marker).is_empty());
    let out = output(&c, id);
    let lines: Vec<&str> = out.lines().collect();
    let cancelled = format!("0: slurmstepd-node1: error: *** STEP {id}.0 ON node1 CANCELLED AT ");
    assert_eq!(lines.iter().filter(|l| l.starts_with(&cancelled)).count(), 1, "{out}");
    assert!(lines.contains(&"srun: Job step aborted: Waiting up to 4 seconds for job step to finish."), "{out}");
    assert!(lines.contains(&"srun: error: node1: task 0: Killed"), "{out}");
    assert!(lines.contains(&"srun: error: node2: task 1: Killed"), "{out}");
    assert!(
        out.ends_with("after 137\nsrun: Warning: can't run 1 processes on 2 nodes, setting nnodes to 1\ndone\n"),
        "{out}"
    );
    assert!(!out.contains("Force Terminated"), "{out}");
}

#[test]
fn cancelling_a_job_ends_its_steps_on_every_node() {
    let c = cluster(2, 1);
    let marker = format!("drover-jobsteps-{}", std::process::id());
    let id = c.submit(&["-N2", "--wrap", &format!("srun bash -c 'exec -a {marker} sleep 300'")]);
    c.wait_until("the step's tasks", Duration::from_secs(20), || processes_named(&marker).len() == 2);
    c.ok("scancel", &[&id.to_string()]);
    c.wait_state(id, &["CANCELLED"], Duration::from_secs(30));
    c.wait_until("no task left", Duration::from_secs(15), || processes_named(&marker).is_empty());
    assert_eq!(c.ok("squeue", &["-h", "-s"]), "");
    // A standalone srun whose job is cancelled says the job ended under its step.
    let child = c
        .command("srun", &["bash", "-c", &format!("exec -a {marker} sleep 300")])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    c.wait_until("the step's task", Duration::from_secs(20), || processes_named(&marker).len() == 1);
    let id = c.ok("squeue", &["-h", "-o", "%i"]).trim().to_string();
    c.ok("scancel", &[&id]);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("srun: Job step aborted: Waiting up to "), "{err}");
}

#[test]
fn salloc_runs_its_command_in_the_allocation() {
    let c = cluster(2, 2);
    let out = c.run(
        "salloc",
        &[
            "-N2",
            "-n2",
            "bash",
            "-c",
            "echo $SLURM_JOB_NODELIST $SLURM_NTASKS; srun -l hostname | cut -d: -f1 | sort; exit 3",
        ],
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert_eq!(stdout, "node[1-2] 2\n0\n1\n");
    let id: u32 = stderr
        .lines()
        .find_map(|l| l.strip_prefix("salloc: Granted job allocation "))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{stderr}"));
    assert_eq!(stderr, format!("salloc: Granted job allocation {id}\nsalloc: Relinquishing job allocation {id}\n"));
    let job = c.ok("scontrol", &["show", "job", &id.to_string()]);
    assert!(job.contains("JobName=interactive"), "{job}");
    assert!(job.contains("JobState=FAILED Reason=NonZeroExitCode"), "{job}");
    assert!(job.contains("ExitCode=3:0"), "{job}");
    // A cancelled allocation is revoked under its command.
    let child = c.command("salloc", &["-N1", "sleep", "30"]).stderr(std::process::Stdio::piped()).spawn().unwrap();
    c.wait_until("the allocation", Duration::from_secs(20), || c.ok("squeue", &["-h", "-o", "%T"]).trim() == "RUNNING");
    let id = c.ok("squeue", &["-h", "-o", "%i"]).trim().to_string();
    c.ok("scancel", &[&id]);
    c.wait_state(id.parse().unwrap(), &["CANCELLED"], Duration::from_secs(10));
    // The command goes on after the revocation (no --kill-command): end it.
    let _ = std::process::Command::new("pkill").args(["-TERM", "-P", &child.id().to_string(), "sleep"]).status();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("salloc: Job allocation {id} has been revoked.\n")), "{stderr}");
}

#[test]
fn a_running_step_survives_a_controller_restart() {
    let mut c = cluster(2, 1);
    let id = c.submit(&["-N2", "--wrap", "srun -l bash -c 'sleep 4; echo done'; echo rc=$?"]);
    c.wait_until("the step", Duration::from_secs(20), || c.ok("squeue", &["-h", "-s", "-o", "%i"]).contains(".0"));
    c.kill_controller();
    std::thread::sleep(Duration::from_millis(300));
    c.start_controller();
    c.wait_state(id, &["COMPLETED"], Duration::from_secs(40));
    let out = output(&c, id);
    assert!(out.contains("0: done\n") && out.contains("1: done\n") && out.ends_with("rc=0\n"), "{out}");
    // A standalone srun too: the allocation is released after the restart.
    let child = c
        .command("srun", &["-N2", "bash", "-c", "sleep 3; echo fine"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    c.wait_until("the standalone step", Duration::from_secs(20), || {
        c.ok("squeue", &["-h", "-s", "-o", "%i"]).contains(".0")
    });
    c.kill_controller();
    std::thread::sleep(Duration::from_millis(300));
    c.start_controller();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "fine\nfine\n");
    c.wait_until("the allocation to end", Duration::from_secs(20), || {
        c.ok("squeue", &["-h", "-t", "all", "-o", "%j %T"]).lines().any(|l| l == "bash COMPLETED")
    });
}

#[test]
fn a_failed_task_with_kill_on_bad_exit_ends_the_step() {
    let c = cluster(2, 1);
    let out = c.run("srun", &["-N2", "-K", "bash", "-c", "if [ $SLURM_PROCID = 1 ]; then exit 4; fi; sleep 30"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(143), "{stderr}");
    let id = c.ok("squeue", &["-h", "-t", "all", "-o", "%i"]).trim().to_string();
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 5, "{stderr}");
    assert_eq!(lines[0], "srun: error: node2: task 1: Exited with exit code 4");
    assert_eq!(lines[1], format!("srun: launch/slurm: _step_signal: Terminating StepId={id}.0"));
    assert!(
        lines[2].starts_with(&format!("slurmstepd-node1: error: *** STEP {id}.0 ON node1 CANCELLED AT ")),
        "{stderr}"
    );
    assert_eq!(lines[3], "srun: error: node1: task 0: Terminated");
    assert_eq!(lines[4], format!("srun: Force Terminated StepId={id}.0"));
    assert!(c.ok("scontrol", &["show", "job", &id]).contains("JobState=FAILED"));
}

#[test]
fn srun_ends_its_step_on_sigterm_even_where_the_tasks_trap_it() {
    // Slurm's srun kills its step on SIGTERM (as every process of a cancelled or requeued
    // batch job gets it): a task that traps SIGTERM does not keep the step, and srun, alive.
    let c = cluster(1, 1);
    let ready = c.path().join("ready");
    let script = format!("trap 'echo trapped' TERM; touch {}; while :; do sleep 0.1; done", ready.display());
    let mut child = c
        .command("srun", &["bash", "-c", &script])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    c.wait_until("the task's trap", Duration::from_secs(20), || ready.exists());
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGTERM).unwrap();
    c.wait_until("srun to end", Duration::from_secs(10), || child.try_wait().unwrap().is_some());
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = text(&out);
    assert!(!stdout.contains("trapped"), "{stdout}");
    assert!(stderr.starts_with("srun: forcing job termination\n"), "{stderr}");
    assert!(stderr.contains("srun: error: node1: task 0: Killed"), "{stderr}");
    assert_eq!(out.status.code(), Some(137), "{stderr}");
    // --quit-on-interrupt: one Ctrl-C does the same, and srun tells the task's end.
    std::fs::remove_file(&ready).unwrap();
    let script = format!("trap '' INT; touch {}; while :; do sleep 0.1; done", ready.display());
    let mut child = c
        .command("srun", &["--quit-on-interrupt", "bash", "-c", &script])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    c.wait_until("the task's trap", Duration::from_secs(20), || ready.exists());
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGINT).unwrap();
    c.wait_until("srun to end", Duration::from_secs(10), || child.try_wait().unwrap().is_some());
    let stderr = text(&child.wait_with_output().unwrap()).1;
    assert!(stderr.starts_with("srun: forcing job termination\n"), "{stderr}");
    assert!(stderr.contains("srun: error: node1: task 0: Killed"), "{stderr}");
}

#[test]
fn srun_reads_slurms_input_variables_and_node_ranges() {
    // As Slurm's own test suite runs srun: its input variables (opt.c's env_vars), a node
    // range without a minimum, and option names shortened as getopt_long takes them.
    let c = cluster(2, 1);
    let out = c.path().join("out.txt");
    let o = c
        .command("srun", &["-N-2", "bash", "-c", "echo hi"])
        .env("SLURM_NPROCS", "3")
        .env("SLURM_OVERCOMMIT", "1")
        .env("SLURM_STDOUTMODE", &out)
        .output()
        .unwrap();
    let (stdout, stderr) = text(&o);
    assert!(o.status.success() && stdout.is_empty(), "{stdout}{stderr}");
    let mut lines: Vec<String> = std::fs::read_to_string(&out).unwrap().lines().map(String::from).collect();
    lines.sort();
    assert_eq!(lines, ["hi", "hi", "hi"]);
    // The command line wins over the variable.
    let out2 = c.path().join("out2.txt");
    let arg = format!("--out={}", out2.display());
    let o = c.command("srun", &[&arg, "-n1", "echo", "there"]).env("SLURM_STDOUTMODE", &out).output().unwrap();
    assert!(o.status.success(), "{}", text(&o).1);
    assert_eq!(std::fs::read_to_string(&out2).unwrap(), "there\n");
    assert_eq!(std::fs::read_to_string(&out).unwrap().lines().count(), 3);
    assert_eq!(c.ok("squeue", &["--state=RUNNING", "--noheader"]), "");
}

#[test]
fn srun_wait_kills_the_rest_once_the_first_task_has_ended() {
    // srun -W: task 1 ends at once, the others would run on; two seconds later they are
    // killed, in Slurm's words. Tasks that end together are told in one line.
    let c = cluster(1, 1);
    let script = write_script(&c, "w.sh", "#!/bin/bash\n[ $SLURM_PROCID = 1 ] && exit 0\nsleep 30\n");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let t0 = std::time::Instant::now();
    let out = c.run("srun", &["-n4", "-O", "-W2", &script]);
    let (_, stderr) = text(&out);
    assert!(t0.elapsed() < Duration::from_secs(20), "{stderr}");
    assert_eq!(out.status.code(), Some(137), "{stderr}");
    let id = c.ok("squeue", &["-h", "-t", "all", "-o", "%i"]).trim().to_string();
    let want = [
        "srun: First task exited 2s ago".to_string(),
        format!("srun: StepId={id}.0 tasks 0,2-3: running"),
        format!("srun: StepId={id}.0 task 1: exited"),
        format!("srun: Terminating StepId={id}.0"),
        "srun: error: node1: tasks 0,2-3: Killed".to_string(),
    ];
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(lines.len() >= 5 && lines[..5] == want, "{stderr}");
    let out = c.run("srun", &["-n3", "-O", "bash", "-c", "exit 3"]);
    assert_eq!(text(&out).1, "srun: error: node1: tasks 0-2: Exited with exit code 3\n");
}

#[test]
fn ntasks_per_node_that_does_not_divide_the_tasks_is_dropped_with_slurms_warning() {
    // Inside -N2 -n4, `srun --ntasks-per-node=1` meets SLURM_NTASKS=4: Slurm's srun keeps the
    // four tasks and drops --ntasks-per-node, with its warning.
    let c = cluster(2, 2);
    let id = c.submit(&["-N2", "-n4", "--wrap", "srun --ntasks-per-node=1 hostname | wc -l"]);
    c.wait_state(id, &["COMPLETED"], Duration::from_secs(30));
    assert_eq!(
        output(&c, id),
        "srun: Warning: can't honor --ntasks-per-node set to 1 which doesn't match the requested tasks 4 \
         with the number of requested nodes 2. Ignoring --ntasks-per-node.\n4\n"
    );
}

#[test]
fn signal_arrives_before_the_time_limit() {
    let c = cluster(2, 1);
    // B: the batch shell alone, 55 s before a 1-minute limit.
    let batch = c.submit(&[
        "-t",
        "1",
        "--signal=B:USR1@55",
        "--wrap",
        "s=$(date +%s); trap 'echo batch got USR1 after $(( $(date +%s) - s )) s; exit 0' USR1; sleep 100 & wait",
    ]);
    // Without B: the job's steps, not its batch shell.
    let steps = c.submit(&[
        "-t",
        "1",
        "--signal=USR2@55",
        "--wrap",
        "trap 'echo the shell got USR2' USR2; srun bash -c 'trap \"echo step got USR2; exit 0\" USR2; sleep 100 & wait'; echo srun done",
    ]);
    c.wait_state(batch, &["COMPLETED"], Duration::from_secs(30));
    c.wait_state(steps, &["COMPLETED"], Duration::from_secs(30));
    let out = output(&c, batch);
    let secs: u32 = out
        .trim()
        .strip_prefix("batch got USR1 after ")
        .and_then(|r| r.strip_suffix(" s"))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    assert!((4..=7).contains(&secs), "{out}");
    assert_eq!(output(&c, steps), "step got USR2\nsrun done\n");
}

#[test]
fn a_new_time_limit_reaches_the_running_job() {
    let c = cluster(1, 1);
    // The signal is due 10 s in, until the limit shrinks to a minute: then it is due at once.
    let script = "trap 'echo got USR1; exit 0' USR1; touch trapped; sleep 100 & wait";
    let id = c.submit(&["-t", "2", "--signal=B:USR1@110", "--wrap", script]);
    // The shell must have its trap before the signal can come.
    c.wait_until("the trap", Duration::from_secs(20), || c.path().join("trapped").exists());
    c.ok("scontrol", &["update", &format!("JobId={id}"), "TimeLimit=1"]);
    c.wait_state(id, &["COMPLETED"], Duration::from_secs(8));
    assert_eq!(output(&c, id), "got USR1\n");
    assert!(c.ok("scontrol", &["show", "job", &id.to_string()]).contains("TimeLimit=00:01:00"));
}

#[test]
fn a_job_requeues_itself_and_runs_again() {
    let c = cluster(1, 1);
    let id = c.submit(&[
        "--wrap",
        "echo run ${SLURM_RESTART_COUNT:-0}; if [ -z \"$SLURM_RESTART_COUNT\" ]; then scontrol requeue $SLURM_JOB_ID; sleep 30; fi; echo done",
    ]);
    c.wait_until("the second run to end", Duration::from_secs(30), || {
        c.ok("scontrol", &["show", "job", &id.to_string()]).contains("JobState=COMPLETED")
    });
    let job = c.ok("scontrol", &["show", "job", &id.to_string()]);
    assert!(job.contains("Restarts=1"), "{job}");
    assert_eq!(output(&c, id), "run 1\ndone\n");
}

#[test]
fn jobs_sharing_a_node_see_only_their_own_gpus() {
    let c = lab();
    let mut ids = Vec::new();
    for _ in 0..2 {
        ids.push(c.submit(&[
            "-p",
            "gpu",
            "-w",
            "node2",
            "--gres=gpu:1",
            "--wrap",
            "echo $CUDA_VISIBLE_DEVICES $SLURM_JOB_GPUS; sleep 2",
        ]));
    }
    // Both GPUs are held: a third GPU job waits, a CPU job does not.
    let third = c.submit(&["-p", "gpu", "-w", "node2", "--gpus-per-node=1", "--wrap", "echo $CUDA_VISIBLE_DEVICES"]);
    for &id in &ids {
        c.wait_state(id, &["RUNNING", "COMPLETED"], Duration::from_secs(20));
    }
    let q = c.ok("squeue", &["-h", "-o", "%i %t %b %r", "-j", &third.to_string()]);
    assert_eq!(q, format!("{third} PD gres:gpu:1 Resources\n"));
    let node = c.ok("scontrol", &["-d", "show", "node", "node2"]);
    assert!(node.contains("   Gres=gpu:fake:2\n   GresDrain=N/A\n   GresUsed=gpu:fake:2(IDX:0-1)\n"), "{node}");
    for &id in ids.iter().chain([third].iter()) {
        c.wait_state(id, &["COMPLETED"], Duration::from_secs(30));
    }
    let mut seen: Vec<String> = ids.iter().map(|&id| output(&c, id)).collect();
    seen.sort();
    assert_eq!(seen, ["0 0\n", "1 1\n"]);
    assert_eq!(output(&c, third).len(), 2);
    // More GPUs than any node has, or a GRES nobody has: refused at submit.
    let o = c.run("sbatch", &["--gres=gpu:3", "--wrap", "true"]);
    assert_eq!(
        text(&o).1,
        "sbatch: error: Batch job submission failed: Requested node configuration is not available\n"
    );
    let o = c.run("sbatch", &["--gres=nvme:1", "--wrap", "true"]);
    assert_eq!(
        text(&o).1,
        "sbatch: error: Batch job submission failed: Invalid generic resource (gres) specification\n"
    );
}

/// A `torch.distributed`-style rendezvous: every task reads its rank and the world size from
/// Slurm's variables, finds rank 0's node from `SLURM_JOB_NODELIST`, and joins a TCP
/// all-reduce there.
const ALLREDUCE: &str = r#"
import os, socket, subprocess, time
rank, world = int(os.environ["SLURM_PROCID"]), int(os.environ["SLURM_NTASKS"])
first = subprocess.run(["scontrol", "show", "hostnames", os.environ["SLURM_JOB_NODELIST"]],
                       capture_output=True, text=True).stdout.split()[0]
show = subprocess.run(["scontrol", "show", "node", first], capture_output=True, text=True).stdout
addr = show.split("NodeAddr=")[1].split()[0]
port = 20000 + int(os.environ["SLURM_JOB_ID"]) % 20000
mine = rank + 1
if rank == 0:
    srv = socket.create_server((addr, port))
    conns = [srv.accept()[0] for _ in range(world - 1)]
    total = mine + sum(int(c.recv(64)) for c in conns)
    for c in conns:
        c.sendall(str(total).encode())
else:
    for _ in range(100):
        try:
            c = socket.create_connection((addr, port))
            break
        except OSError:
            time.sleep(0.1)
    c.sendall(str(mine).encode())
    total = int(c.recv(64))
print(f"rank {rank}/{world} on {os.environ['SLURMD_NODENAME']}: sum {total}", flush=True)
"#;

#[test]
fn tasks_on_two_nodes_rendezvous_and_agree_on_a_sum() {
    let c = cluster(2, 2);
    let prog = c.path().join("allreduce.py");
    std::fs::write(&prog, ALLREDUCE).unwrap();
    let id = c.submit(&["-N2", "--ntasks-per-node=2", "--wrap", &format!("srun python3 {}", prog.display())]);
    c.wait_state(id, &["COMPLETED"], Duration::from_secs(60));
    let mut lines: Vec<String> = output(&c, id).lines().map(String::from).collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            "rank 0/4 on node1: sum 10",
            "rank 1/4 on node1: sum 10",
            "rank 2/4 on node2: sum 10",
            "rank 3/4 on node2: sum 10"
        ]
    );
}

#[test]
fn per_gpu_cpus_memory_and_tasks() {
    let c = lab();
    let probe = "echo $SLURM_CPUS_ON_NODE $SLURM_CPUS_PER_GPU $SLURM_MEM_PER_GPU $SLURM_NTASKS; sleep 1";
    // Each GPU brings two CPUs: one GPU takes a whole 2-CPU node.
    let a = c.submit(&["-p", "gpu", "--gpus-per-node=1", "--cpus-per-gpu=2", "--mem-per-gpu=1000", "--wrap", probe]);
    let b = c.submit(&["-p", "gpu", "--gpus-per-node=1", "--cpus-per-gpu=2", "-w", "node1", "--wrap", probe]);
    c.wait_state(a, &["COMPLETED"], Duration::from_secs(30));
    c.wait_state(b, &["COMPLETED"], Duration::from_secs(30));
    // No task count was asked for: no SLURM_NTASKS (real Slurm's lab leaves it unset).
    assert_eq!(output(&c, a), "2 2 1000\n");
    let show = c.ok("scontrol", &["show", "job", &a.to_string()]);
    assert!(show.contains("MinMemoryNode=1000M"), "{show}");
    // Two tasks for each GPU.
    let t = c.submit(&["-p", "gpu", "--gpus=1", "--ntasks-per-gpu=2", "--wrap", probe]);
    c.wait_state(t, &["COMPLETED"], Duration::from_secs(30));
    assert_eq!(output(&c, t).split_whitespace().last(), Some("2"));
    // GPUs per socket, on each of the sockets asked for.
    let s = c.submit(&[
        "-p",
        "gpu",
        "--gpus-per-socket=2",
        "--sockets-per-node=1",
        "--wrap",
        "echo $CUDA_VISIBLE_DEVICES $SLURM_GPUS_PER_SOCKET",
    ]);
    c.wait_state(s, &["COMPLETED"], Duration::from_secs(30));
    assert_eq!(output(&c, s), "0,1 2\n");
    let o = c.run("sbatch", &["--gpus-per-socket=1", "--wrap", "true"]);
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "sbatch: error: --gpus-per-socket option requires --sockets-per-node specification\n"
    );
    // Slurm's refusals.
    let o = c.run("sbatch", &["--gpus=1", "--cpus-per-gpu=2", "-c", "2", "--wrap", "true"]);
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "sbatch: error: --cpus-per-gpu is mutually exclusive with --cpus-per-task\n"
    );
    let o = c.run("sbatch", &["--gpus=1", "--mem-per-gpu=1G", "--mem=1G", "--wrap", "true"]);
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "sbatch: fatal: --mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive.\n"
    );
}

#[test]
fn gpu_bind_gives_each_task_its_gpus() {
    let c = lab();
    let run = |bind: &str| {
        let o = c.run(
            "srun",
            &["-p", "gpu", "-N1", "-n2", "--gres=gpu:2", bind, "-l", "bash", "-c", "echo $CUDA_VISIBLE_DEVICES"],
        );
        let mut l: Vec<String> = String::from_utf8_lossy(&o.stdout).lines().map(String::from).collect();
        l.sort();
        l.join("|")
    };
    assert_eq!(run("--gpu-bind=none"), "0: 0,1|1: 0,1");
    assert_eq!(run("--gpu-bind=single:1"), "0: 0|1: 1");
    assert_eq!(run("--gpu-bind=map_gpu:1,0"), "0: 1|1: 0");
    assert_eq!(run("--gpu-bind=per_task:2"), "0: 0,1|1: 0,1");
    let o = c.run("srun", &["--gpu-bind=foo", "true"]);
    assert_eq!(o.status.code(), Some(255));
    assert_eq!(String::from_utf8_lossy(&o.stderr), "srun: error: Invalid --gpu-bind argument: gpu:foo\n");
}

/// `scancel --signal` as Slurm's: the job's steps only, unless `--batch` (the batch shell
/// only) or `--full` (both); SIGKILL cancels the whole job. Checkpointing jobs (submitit,
/// Lightning) signal this way and must keep running.
#[test]
fn scancel_signal_reaches_steps_unless_batch_or_full_says_otherwise() {
    let c = cluster(1, 2);
    // The batch shell and its step each trap USR1; the step stops on it, the shell goes on.
    let trap_both = "trap 'echo batch got USR1' USR1; \
                     srun -n1 bash -c \"trap 'echo step got USR1; exit 0' USR1; touch step-ready; sleep 100 & wait\"; \
                     echo after";
    let both = c.submit(&["-n1", "--wrap", trap_both]);
    c.wait_until("the step's trap", Duration::from_secs(20), || c.path().join("step-ready").exists());
    c.ok("scancel", &["--signal=USR1", &both.to_string()]);
    c.wait_state(both, &["COMPLETED"], Duration::from_secs(20));
    assert_eq!(output(&c, both), "step got USR1\nafter\n");

    // A job with no steps: nothing to signal; it runs on to its end.
    let alone =
        "trap 'echo got USR1; exit 3' USR1; touch alone-ready; for i in $(seq 15); do sleep 0.2; done; echo done";
    let id = c.submit(&["-n1", "--wrap", alone]);
    c.wait_until("the trap", Duration::from_secs(20), || c.path().join("alone-ready").exists());
    c.ok("scancel", &["-s", "USR1", &id.to_string()]);
    c.wait_state(id, &["COMPLETED"], Duration::from_secs(20));
    assert_eq!(output(&c, id), "done\n");

    // --batch: the shell (and not its step) gets it.
    let batch = "trap 'echo batch got USR1; exit 3' USR1; touch batch-ready; sleep 100 & wait";
    let id = c.submit(&["-n1", "--wrap", batch]);
    c.wait_until("the trap", Duration::from_secs(20), || c.path().join("batch-ready").exists());
    let o = c.run("scancel", &["-v", "-b", "-s", "USR1", &id.to_string()]);
    assert_eq!(text(&o).1, format!("scancel: Signal 10 to batch job {id}\n"));
    c.wait_state(id, &["FAILED"], Duration::from_secs(20));
    assert_eq!(output(&c, id), "batch got USR1\n");

    // SIGKILL without --batch: the job is cancelled, as with no signal at all.
    let id = c.submit(&["-n1", "--wrap", "sleep 100"]);
    c.wait_state(id, &["RUNNING"], Duration::from_secs(20));
    c.ok("scancel", &["-s", "KILL", &id.to_string()]);
    c.wait_state(id, &["CANCELLED"], Duration::from_secs(20));
}

/// `-O/--overcommit`: a job gets one task's CPUs per node and runs all its tasks there
/// (Slurm's test suite leans on it to run many tasks on small nodes); a step overcommits with
/// `-O` or the SLURM_OVERCOMMIT its allocation exports.
#[test]
fn overcommit_runs_more_tasks_than_cpus() {
    let c = cluster(2, 1);
    // Standalone: four tasks on one 1-CPU node.
    let o = c.run(
        "srun",
        &["-O", "-N1", "-n4", "bash", "-c", "echo $SLURM_PROCID $SLURM_OVERCOMMIT $SLURM_STEP_TASKS_PER_NODE"],
    );
    assert!(o.status.success(), "{}", text(&o).1);
    let mut lines: Vec<String> = text(&o).0.lines().map(String::from).collect();
    lines.sort();
    assert_eq!(lines, ["0 1 4", "1 1 4", "2 1 4", "3 1 4"]);
    // Without -O the same request cannot be met.
    let o = c.run("srun", &["-N1", "-n4", "true"]);
    assert!(!o.status.success());

    // A batch job: SLURM_NTASKS and the tasks per node say 5 over two 1-CPU nodes (3 and 2,
    // as Slurm's block layout over-subscribes); an srun -O in it runs them all.
    let id = c.submit(&[
        "-O",
        "-N2",
        "-n5",
        "--wrap",
        "echo $SLURM_NTASKS $SLURM_TASKS_PER_NODE $SLURM_JOB_CPUS_PER_NODE; srun -O bash -c 'echo task $SLURM_PROCID' | sort",
    ]);
    c.wait_state(id, &["COMPLETED"], Duration::from_secs(30));
    assert_eq!(output(&c, id), "5 3,2 1(x2)\ntask 0\ntask 1\ntask 2\ntask 3\ntask 4\n");
    // SBATCH_OVERCOMMIT as -O.
    let o = c
        .command("sbatch", &["--parsable", "-N1", "-n3", "--wrap", "echo $SLURM_TASKS_PER_NODE"])
        .env("SBATCH_OVERCOMMIT", "1")
        .output()
        .unwrap();
    let id: u32 = text(&o).0.trim().parse().unwrap_or_else(|_| panic!("{}", text(&o).1));
    c.wait_state(id, &["COMPLETED"], Duration::from_secs(30));
    assert_eq!(output(&c, id), "3\n");
}

/// `sbatch --open-mode=append` reaches the job's steps (SLURM_OPEN_MODE, as Slurm's sbatch
/// exports it): a step's own `--output` appends, so a requeued job (submitit logs through
/// `srun --output`) keeps what its first run wrote. `--open-mode=truncate` and a step's own
/// `--open-mode` still truncate.
#[test]
fn a_jobs_open_mode_reaches_its_steps() {
    let c = cluster(1, 1);
    let dir = c.path().display().to_string();
    let script = format!(
        "echo mode=$SLURM_OPEN_MODE; srun -o {dir}/step-%j.out echo one; srun -o {dir}/step-%j.out echo two; \
         srun -o {dir}/trunc-%j.out echo one; srun --open-mode=truncate -o {dir}/trunc-%j.out echo two"
    );
    let id = c.submit(&["--open-mode=append", "--wrap", &script]);
    c.wait_state(id, &["COMPLETED"], Duration::from_secs(30));
    assert_eq!(output(&c, id), "mode=a\n");
    let read = |f: &str| std::fs::read_to_string(c.path().join(format!("{f}-{id}.out"))).unwrap();
    assert_eq!(read("step"), "one\ntwo\n");
    assert_eq!(read("trunc"), "two\n");
    // Truncate: exported as t, the step truncates.
    let id = c.submit(&["--open-mode=truncate", "--wrap", &script]);
    c.wait_state(id, &["COMPLETED"], Duration::from_secs(30));
    assert_eq!(output(&c, id), "mode=t\n");
    assert_eq!(std::fs::read_to_string(c.path().join(format!("step-{id}.out"))).unwrap(), "two\n");
}

/// A tool that cleans a job's environment before a nested `srun` (Snakemake's Slurm executor
/// keeps only the job's ids) drops `SLURM_CONF`: srun finds the job's own cluster from the
/// job's processes, where Slurm would read the node's `/etc/slurm/slurm.conf` (a cluster of
/// `drover up` has none). Without the job's ids too, it is a new job of the same cluster.
#[test]
fn srun_in_a_job_finds_its_cluster_without_slurm_conf() {
    let c = cluster(1, 2);
    let id = c.submit(&[
        "--wrap",
        "env -u SLURM_CONF srun printenv SLURM_JOB_ID SLURM_STEP_ID; \
         env -i PATH=$PATH srun -n1 printenv SLURM_STEP_ID",
    ]);
    c.wait_state(id, &["COMPLETED"], Duration::from_secs(30));
    let out = output(&c, id);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert_eq!(lines[..2], [id.to_string().as_str(), "0"], "{out}");
    assert_eq!(lines[2], "0", "{out}");
    assert_eq!(c.ok("squeue", &["-h", "-t", "all", "-o", "%i"]).lines().count(), 2, "a job of its own");
}

/// `srun -v` prints what Slurm 22.05's does (`testdata/compat/slurm-22.05/srun_v_*.err`, and a
/// batch job's `job-output-srun_v_batch.out`): the options set, the allocation (tools read the
/// job id and nodes from it), each launch, each node's start and each exit notification. Lines
/// about different nodes come in whatever order the nodes answer: those are compared as sets.
#[test]
fn srun_verbose_prints_slurms_lines() {
    let c = lab();
    // Job ids: the capture's against this run's.
    fn same(want: &str, got: &str, want_id: u32, got_id: u32) {
        let want = want
            .replace(&format!("jobid {want_id}"), "jobid N")
            .replace(&format!("StepId={want_id}."), "StepId=N.")
            .replace(&format!("{:<20}: {want_id}\n", "jobid"), "jobid: N\n");
        let got = got
            .replace(&format!("jobid {got_id}"), "jobid N")
            .replace(&format!("StepId={got_id}."), "StepId=N.")
            .replace(&format!("{:<20}: {got_id}\n", "jobid"), "jobid: N\n");
        // In order up to the first node's start; after it, the same lines in any order.
        let split = |t: &str| -> (Vec<String>, Vec<String>) {
            let lines: Vec<String> = t.lines().map(String::from).collect();
            let at = lines.iter().position(|l| l.contains("_task_start")).unwrap_or(lines.len());
            let mut rest = lines[at..].to_vec();
            rest.sort();
            (lines[..at].to_vec(), rest)
        };
        assert_eq!(split(&got), split(&want), "got:\n{got}");
    }
    let id_of = |t: &str| -> u32 {
        t.lines()
            .find_map(|l| l.strip_prefix("srun: jobid ")?.split(':').next()?.parse().ok())
            .unwrap_or_else(|| panic!("no job id in {t}"))
    };
    for (name, args) in [
        ("srun_v_n3", vec!["-v", "-N2", "-n3", "true"]),
        (
            "srun_v_options",
            vec![
                "-v",
                "-N1",
                "-n1",
                "-c1",
                "-J",
                "foo",
                "-p",
                "cpu",
                "-t",
                "5",
                "--mem=100",
                "-l",
                "-o",
                "/dev/null",
                "--exclusive",
                "-O",
                "true",
            ],
        ),
    ] {
        let want = compat(&format!("{name}.err"));
        let o = c.run("srun", &args);
        assert!(o.status.success(), "{}", text(&o).1);
        let got = text(&o).1;
        same(&want, &got, id_of(&want), id_of(&got));
    }
    // Inside a batch job: the allocation's variables are options too.
    let want = compat("job-output-srun_v_batch.out");
    let job = c.submit(&["-N2", "-n2", "--wrap", "srun -v -l hostname | sort"]);
    c.wait_state(job, &["COMPLETED"], Duration::from_secs(30));
    // The lab's host was `vm`.
    let host = nix::unistd::gethostname().unwrap().to_string_lossy().into_owned();
    let got = output(&c, job).replace(&format!("0: {host}\n1: {host}\n"), "0: vm\n1: vm\n");
    same(&want, &got, id_of(&want), job);
}

/// srun's `--task-prolog` runs before each task (its `export` and `print` lines as
/// TaskProlog's) and `--task-epilog` after it; `--threads` and `--slurmd-debug` are taken.
#[test]
fn srun_task_prolog_and_epilog_run_around_each_task() {
    let c = cluster(1, 2);
    let log = c.path().join("epilog.log");
    let prolog =
        write_script(&c, "prolog.sh", "#!/bin/sh\necho export FROM_PROLOG=yes\necho print hello $SLURM_PROCID\n");
    // An epilog that would run on is killed after five seconds, as slurmstepd kills it.
    let epilog = write_script(
        &c,
        "epilog.sh",
        &format!("#!/bin/sh\necho epilog $SLURM_PROCID >> {}\nsleep 60\n", log.display()),
    );
    for p in [&prolog, &epilog] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let t0 = std::time::Instant::now();
    let o = c.run(
        "srun",
        &[
            "-n2",
            &format!("--task-prolog={prolog}"),
            &format!("--task-epilog={epilog}"),
            "-T",
            "4",
            "--slurmd-debug=2",
            "bash",
            "-c",
            "echo task $SLURM_PROCID $FROM_PROLOG",
        ],
    );
    assert!(o.status.success(), "{}", text(&o).1);
    assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());
    let mut lines: Vec<String> = text(&o).0.lines().map(String::from).collect();
    lines.sort();
    assert_eq!(lines, ["hello 0", "hello 1", "task 0 yes", "task 1 yes"]);
    let mut ends: Vec<String> = std::fs::read_to_string(&log).unwrap().lines().map(String::from).collect();
    ends.sort();
    assert_eq!(ends, ["epilog 0", "epilog 1"]);
    let o = c.run("srun", &["--threads=0", "true"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(text(&o).1, "srun: error: Invalid numeric value \"0\" for --threads.\n");
}

/// SLURM_NTASKS and SLURM_NPROCS are set for a batch job only where its request fixed a task
/// count, as real Slurm 22.05 sets them (checked on the lab: plain, -N2, -c, --mem, --gres,
/// --array and --exclusive leave them unset; -n, -N2 --ntasks-per-node=2 and -w set them).
#[test]
fn ntasks_variables_only_where_the_request_fixed_a_task_count() {
    let c = cluster(2, 2);
    let show = "echo ${SLURM_NTASKS:-unset} ${SLURM_NPROCS:-unset}";
    for (opts, want) in [
        (vec![], "unset unset"),
        (vec!["-N2"], "unset unset"),
        (vec!["-c", "2"], "unset unset"),
        (vec!["--array=0-0"], "unset unset"),
        (vec!["-n3"], "3 3"),
        (vec!["-N2", "--ntasks-per-node=2"], "4 4"),
        (vec!["-w", "node2"], "1 1"),
        (vec!["--ntasks-per-node=2"], "2 2"),
    ] {
        let mut args = opts.clone();
        args.extend(["-o", "nt-%j.out", "--wrap", show]);
        let id = c.submit(&args);
        c.wait_state(id, &["COMPLETED"], Duration::from_secs(20));
        let got = std::fs::read_to_string(c.path().join(format!("nt-{id}.out"))).unwrap();
        assert_eq!(got.trim(), want, "{opts:?}");
    }
}
