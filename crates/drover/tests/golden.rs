//! Golden tests: Drover's output next to real Slurm 22.05's (`testdata/compat/slurm-22.05/`)
//! on the same "lab" cluster shape. Only ids, times, dates, PIDs, ports and paths are
//! normalised; everything else must match byte for byte.

use drover_testkit::{compat, Cluster, Options};
use regex::Regex;
use std::time::Duration;

const EXE: &str = env!("CARGO_BIN_EXE_drover");
const LAB_WORK: &str = "/srv/slurm-lab/work/samples";

fn lab() -> Cluster {
    Cluster::start(
        EXE,
        Options {
            nodes: 4,
            cpus: 2,
            node_line: Some(
                "NodeName=node[1-4] NodeHostname=localhost NodeAddr=127.0.0.1 Port=17001-17004 CPUs=2 Boards=1 \
                 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=4000 Gres=gpu:fake:2 State=UNKNOWN"
                    .into(),
            ),
            extra_conf: "GresTypes=gpu\n".into(),
            partitions: "PartitionName=cpu Nodes=node[1-4] Default=YES MaxTime=INFINITE State=UP\n\
                         PartitionName=gpu Nodes=node[1-4] MaxTime=INFINITE State=UP\n"
                .into(),
            ..Default::default()
        },
    )
}

/// Replaces volatile values (times, run times, dates, priorities, session ids, load, memory,
/// kernel) with placeholders.
fn norm(s: &str) -> String {
    let rules = [
        (r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}", "<TIME>"),
        (r"(?m)^\w{3} \w{3} \d{2} \d{2}:\d{2}:\d{2} \d{4}$", "<DATE>"),
        (r"RunTime=\S+", "RunTime=<RUN>"),
        (r"Priority=\d+", "Priority=<PRIO>"),
        (r"AllocNode:Sid=\S+", "AllocNode:Sid=<SID>"),
        (r"CPULoad=\S+", "CPULoad=<LOAD>"),
        (r"FreeMem=\S+", "FreeMem=<FREE>"),
        (r"OS=.*", "OS=<OS>"),
    ];
    let mut out = s.to_string();
    for (re, rep) in rules {
        out = Regex::new(re).unwrap().replace_all(&out, rep).to_string();
    }
    out
}

fn stdout(c: &Cluster, prog: &str, args: &[&str]) -> String {
    c.ok(prog, args)
}

#[test]
fn idle_cluster_matches_slurm() {
    let c = lab();
    assert_eq!(stdout(&c, "sinfo", &[]), compat("sinfo_idle.out"));
    assert_eq!(norm(&stdout(&c, "sinfo", &["-N", "-l"])), norm(&compat("sinfo_N_l_idle.out")));
    assert_eq!(stdout(&c, "sinfo", &["-s"]), compat("sinfo_s_idle.out"));
    assert_eq!(stdout(&c, "squeue", &[]), compat("squeue_empty.out"));
    assert_eq!(stdout(&c, "scontrol", &["show", "partition"]), compat("scontrol_show_partition.out"));
    assert_eq!(
        norm(&stdout(&c, "scontrol", &["show", "node", "node1"])),
        norm(&compat("scontrol_show_node_node1_idle.out"))
    );
    assert_eq!(stdout(&c, "scontrol", &["show", "hostnames", "node[1-4]"]), compat("scontrol_show_hostnames.out"));
    for (prog, flag, file) in [
        ("sinfo", "-V", "version_sinfo.out"),
        ("squeue", "--version", "version_squeue.out"),
        ("sbatch", "--version", "version_sbatch.out"),
    ] {
        assert_eq!(stdout(&c, prog, &[flag]), compat(file));
    }
}

#[test]
fn errors_match_slurm() {
    let c = lab();
    let o = c.run("scontrol", &["show", "job", "999999"]);
    assert_eq!(
        (o.status.code(), String::from_utf8_lossy(&o.stderr).to_string()),
        (Some(1), compat("scontrol_error_invalid_job.err"))
    );
    let o = c.run("squeue", &["-j", "999999"]);
    assert_eq!(
        (o.status.code(), String::from_utf8_lossy(&o.stderr).to_string()),
        (Some(1), compat("squeue_error_invalid_job.err"))
    );
    let o = c.run("scancel", &["999999"]);
    assert_eq!((o.status.code(), o.stdout.len() + o.stderr.len()), (Some(0), 0));
    let o = c.run("scancel", &["-v", "999999"]);
    assert_eq!(
        (o.status.code(), String::from_utf8_lossy(&o.stderr).to_string()),
        (Some(0), compat("scancel_v_error_invalid_job.err"))
    );
    let o = c.run("sbatch", &["-p", "nosuchpart", "--wrap", "true"]);
    assert_eq!(
        (o.status.code(), String::from_utf8_lossy(&o.stderr).to_string()),
        (Some(1), compat("sbatch_error_partition.err"))
    );
}

/// Our job's text with its id and work dir put back to the lab's, so it compares.
fn as_lab(s: &str, ours: u32, theirs: u32, dir: &str) -> String {
    norm(&s.replace(dir, LAB_WORK))
        .replace(&format!("JobId={ours} "), &format!("JobId={theirs} "))
        .replace(&format!("ArrayJobId={ours} "), &format!("ArrayJobId={theirs} "))
        .replace(&format!("-{ours}.out"), &format!("-{theirs}.out"))
        .replace(&format!("-{ours}_"), &format!("-{theirs}_"))
}

#[test]
fn jobs_show_like_slurm() {
    let c = lab();
    let dir = c.path().display().to_string();
    // A finished two-node job (lab job 12).
    let done = c.submit(&["-J", "envtest", "-N2", "-n4", "-o", "envtest-%j.out", "--wrap", "true"]);
    c.wait_state(done, &["COMPLETED"], Duration::from_secs(30));
    let show = stdout(&c, "scontrol", &["show", "job", &done.to_string()]);
    assert_eq!(as_lab(&show, done, 12, &dir), norm(&compat("scontrol_show_job_completed.out")));

    // The mixed queue of the lab: a job on every CPU, then three waiting jobs (17..20).
    let long = c.submit(&["-J", "long", "-N4", "-n8", "--wrap", "sleep 300"]);
    c.wait_state(long, &["RUNNING"], Duration::from_secs(30));
    let p1 = c.submit(&["-J", "pend1", "--wrap", "true"]);
    let p2 = c.submit(&["-J", "pend2", "-n2", "--wrap", "true"]);
    let held = c.submit(&["-J", "held", "--hold", "--wrap", "true"]);
    let arr = c.submit(&["-J", "arr", "--array=0-3", "--wrap", "echo task $SLURM_ARRAY_TASK_ID"]);
    std::thread::sleep(Duration::from_millis(300));
    let show = stdout(&c, "scontrol", &["show", "job", &p1.to_string()]);
    assert_eq!(as_lab(&show, p1, 18, &dir), norm(&compat("scontrol_show_job_pending.out")));
    let show = stdout(&c, "scontrol", &["show", "job", &held.to_string()]);
    assert_eq!(as_lab(&show, held, 20, &dir), norm(&compat("scontrol_show_job_held.out")));
    let show = stdout(&c, "scontrol", &["show", "job", &long.to_string()]);
    let expect = norm(&compat("scontrol_show_job_running.out"));
    assert_eq!(as_lab(&show, long, 17, &dir), expect);
    let show = stdout(&c, "scontrol", &["show", "job", &arr.to_string()]);
    let lab_arr = norm(&compat("scontrol_show_job_array_pending.out"));
    // The lab's array became eligible three seconds after its submit (its scheduler's delay).
    let eligible = Regex::new(r"EligibleTime=\S+").unwrap();
    let accrue = Regex::new(r"AccrueTime=\S+").unwrap();
    let loose = |s: &str| accrue.replace(&eligible.replace(s, "EligibleTime=<E>"), "AccrueTime=<E>").to_string();
    assert_eq!(loose(&as_lab(&show, arr, 21, &dir)), loose(&lab_arr));

    // squeue: the lab's lines for these jobs (the GPU job is a later issue).
    let ids = [(long, 17), (p1, 18), (p2, 19), (held, 20)];
    // Ids as the lab numbered them, array forms (`N_[0-3]`, `N_2`) right-aligned as printed.
    let relabel = |s: &str| -> String {
        let mut out = s.to_string();
        for (o, t) in ids {
            out = out.replace(&format!("{o:>18} "), &format!("{t:>18} "));
        }
        for suffix in ["[0-3]", "0", "1", "2", "3"] {
            let (a, b) = (format!("{arr}_{suffix}"), format!("21_{suffix}"));
            out = out.replace(&format!("{a:>18} "), &format!("{b:>18} "));
        }
        out
    };
    let ours = stdout(&c, "squeue", &[]);
    let mapped = relabel(&ours);
    let time = Regex::new(r" +\d+:\d{2} ").unwrap();
    let keep = |s: &str| -> Vec<String> {
        s.lines().filter(|l| !l.contains("gpupend")).map(|l| time.replace(l, " <T> ").to_string()).collect()
    };
    assert_eq!(keep(&mapped), keep(&compat("squeue_mixed.out")));
    // The default format spelled out prints the same (a second apart: times may have ticked).
    assert_eq!(keep(&stdout(&c, "squeue", &["-o", "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"])), keep(&ours));
    assert_eq!(stdout(&c, "sinfo", &[]), compat("sinfo_alloc.out"));
    assert_eq!(norm(&stdout(&c, "sinfo", &["-N", "-l"])), norm(&compat("sinfo_N_l_alloc.out")));
    assert_eq!(
        norm(&stdout(&c, "scontrol", &["show", "node", "node1"])),
        norm(&compat("scontrol_show_node_node1_alloc.out"))
    );
    let long_fmt = relabel(&stdout(&c, "squeue", &["-l"]));
    let start = relabel(&stdout(&c, "squeue", &["--start"]));
    assert_eq!(keep(&norm(&long_fmt)), keep(&norm(&compat("squeue_mixed_l.out"))));
    assert_eq!(keep(&start), keep(&compat("squeue_start.out")));
    for (args, file) in [
        (vec!["-r"], "squeue_mixed_r.out"),
        (vec!["-t", "PD"], "squeue_mixed_states_pd.out"),
        (vec!["-u", "root"], "squeue_mixed_user.out"),
    ] {
        let out = relabel(&stdout(&c, "squeue", &args));
        assert_eq!(keep(&out), keep(&compat(file)), "squeue {args:?}");
    }
    let mut it = stdout(&c, "squeue", &["-h", "-o", "%i %T"]);
    for (o, t) in ids {
        it = it.replace(&format!("{o} "), &format!("{t} "));
    }
    it = it.replace(&format!("{arr}_"), "21_");
    let expect: Vec<String> =
        compat("squeue_mixed_it.out").lines().filter(|l| !l.starts_with("22 ")).map(String::from).collect();
    assert_eq!(it.lines().map(String::from).collect::<Vec<_>>(), expect);
    let o = c.run("scancel", &[&long.to_string()]);
    assert_eq!((o.status.code(), o.stdout.len() + o.stderr.len()), (Some(0), 0));
    // The array's tasks then run, each its own job, with the lab's output.
    for t in 0..4 {
        let f = c.path().join(format!("slurm-{arr}_{t}.out"));
        // That task's own end (another task's end said nothing of this one's output).
        let task = format!("{arr}_{t}");
        c.wait_until("an array task's end", Duration::from_secs(30), || {
            c.ok("squeue", &["-h", "-t", "all", "-j", &task, "-o", "%T"]).trim() == "COMPLETED"
        });
        assert_eq!(std::fs::read_to_string(&f).unwrap(), format!("task {t}\n"));
    }
    assert_eq!(compat("job-output-slurm-3_0.out"), "task 0\n");
}

#[test]
fn sbatch_prints_like_slurm() {
    let c = lab();
    let out = stdout(&c, "sbatch", &["--wrap", "hostname; sleep 1"]);
    let re = Regex::new(r"^Submitted batch job \d+\n$").unwrap();
    assert!(re.is_match(&out), "{out:?}");
    assert_eq!(compat("sbatch_default.out").replace('1', "N"), "Submitted batch job N\n");
    let p = stdout(&c, "sbatch", &["--parsable", "--wrap", "hostname; sleep 1"]);
    assert!(Regex::new(r"^\d+\n$").unwrap().is_match(&p), "{p:?}");
}

/// `--help` and `--usage` of every command print real Slurm 22.05's text byte for byte (tools
/// and Slurm's own test suite read them), with exit status 0, and no command needs a cluster
/// for them.
#[test]
fn help_and_usage_are_slurms() {
    let dir = drover_testkit::testdata("compat/slurm-22.05/help");
    let mut checked = 0;
    for cmd in [
        "sbatch", "srun", "salloc", "squeue", "sinfo", "scancel", "scontrol", "sstat", "sattach", "sacct", "sacctmgr",
        "sreport", "sshare", "sprio",
    ] {
        for opt in ["--help", "--usage"] {
            let want = std::fs::read(dir.join(format!("{cmd}{opt}.out"))).unwrap();
            let o = std::process::Command::new(EXE)
                .arg(cmd)
                .arg(opt)
                .env("SLURM_CONF", "/nonexistent/slurm.conf")
                .output()
                .unwrap();
            assert_eq!(o.status.code(), Some(0), "{cmd} {opt}: {}", String::from_utf8_lossy(&o.stderr));
            assert!(o.stdout == want, "{cmd} {opt} printed:\n{}", String::from_utf8_lossy(&o.stdout));
            checked += 1;
        }
    }
    assert_eq!(checked, 28);
}

/// `sdiag` prints the lines real Slurm's does (`sdiag.out`, captured on the lab), in its
/// order and layout, with this cluster's counts: jobs submitted, started, completed and
/// cancelled, the passes, and the RPCs by Slurm's message types and by user. `-r` starts
/// the counts over.
#[test]
fn sdiag_counts_what_the_controller_did() {
    let c = lab();
    let done = c.submit(&["--wrap", "true"]);
    let held = c.submit(&["-H", "--wrap", "true"]);
    c.wait_state(done, &["COMPLETED"], Duration::from_secs(20));
    c.ok("scancel", &[&held.to_string()]);
    c.ok("sinfo", &[]);
    let out = c.ok("sdiag", &[]);
    // Layout: every line the capture has, numbers and times aside, in the same order (the
    // RPC tables have the lines of this run). Lines sdiag prints only with enough data (a
    // minute of it, backfill cycles: the lab had none) are left out of both.
    let shape = |t: &str| -> Vec<String> {
        let num = Regex::new(r"\d+").unwrap();
        let date = Regex::new(r"\w{3} \w{3} \d{2} \d{2}:\d{2}:\d{2} \d{4} \(\d+\)|N/A").unwrap();
        let mut in_bf = false;
        t.lines()
            .take_while(|l| !l.starts_with("Remote Procedure Call statistics by message type"))
            .filter(|l| {
                in_bf |= l.starts_with("Backfilling stats");
                let when_data = ["\tCycles per minute:", "\tDepth Mean", "\tQueue length mean:", "\tMean table size:"];
                let bf_mean = in_bf && l.starts_with("\tMean cycle:");
                !(bf_mean || when_data.iter().any(|p| l.starts_with(p)))
            })
            .map(|l| num.replace_all(&date.replace_all(l, "<DATE>"), "N").into_owned())
            .collect()
    };
    assert_eq!(shape(&out), shape(&compat("sdiag.out")), "{out}");
    let line = |prefix: &str| out.lines().find(|l| l.starts_with(prefix)).unwrap_or_default().to_string();
    assert_eq!(line("Jobs submitted:"), "Jobs submitted: 2");
    assert_eq!(line("Jobs started:"), "Jobs started:   1");
    assert_eq!(line("Jobs completed:"), "Jobs completed: 1");
    assert_eq!(line("Jobs canceled:"), "Jobs canceled:  1");
    assert_eq!(line("Jobs pending:"), "Jobs pending:   0");
    let submits = out.lines().find(|l| l.contains("REQUEST_SUBMIT_BATCH_JOB")).unwrap_or_default();
    assert!(submits.starts_with("\tREQUEST_SUBMIT_BATCH_JOB                ( 4003) count:2      ave_time:"), "{out}");
    assert!(out.contains("\tREQUEST_NODE_INFO                       ( 2007) count:"), "{out}");
    assert!(out.contains("\tREQUEST_KILL_JOB                        ( 5032) count:1 "), "{out}");
    assert!(out.contains("\nRemote Procedure Call statistics by user\n\troot            (       0) count:"), "{out}");
    assert!(out.ends_with("\nPending RPC statistics\n\tNo pending RPCs\n"), "{out}");
    assert_eq!(c.ok("sdiag", &["-r"]), "Reset scheduling statistics\n");
    let after = c.ok("sdiag", &["-i"]);
    assert!(after.contains("\nJobs submitted: 0\n"), "{after}");
    assert!(!after.contains("REQUEST_SUBMIT_BATCH_JOB"), "{after}");
}

/// Bad option values: sbatch's words and exit status are real Slurm's for every line of
/// `sbatch_bad_values.tsv` (255 where Slurm's option parser refuses the value, 1 where the
/// request is refused), and nothing reaches the queue.
#[test]
fn bad_option_values_are_refused_in_slurms_words() {
    let c = lab();
    let table = compat("sbatch_bad_values.tsv");
    let mut checked = 0;
    for line in table.lines().filter(|l| !l.starts_with('#')) {
        let mut f = line.splitn(3, '\t');
        let (opts, rc, err) = (f.next().unwrap(), f.next().unwrap(), f.next().unwrap());
        let mut args: Vec<&str> = opts.split(' ').collect();
        args.extend(["--wrap", "true"]);
        let o = c.run("sbatch", &args);
        assert_eq!(o.status.code(), Some(rc.parse().unwrap()), "sbatch {opts}: {}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(String::from_utf8_lossy(&o.stderr), format!("{}\n", err.replace("\\n", "\n")), "sbatch {opts}");
        checked += 1;
    }
    assert_eq!(checked, 23);
    assert_eq!(c.ok("squeue", &["-h", "-t", "all"]), "");
}

/// An unknown state for `squeue -t` or `sinfo -t`: real Slurm's refusal, byte for byte.
#[test]
fn unknown_states_are_refused_as_slurm_refuses_them() {
    let c = lab();
    for (cmd, args, name) in [("squeue", ["-t", "FOO"], "squeue_t_bad"), ("sinfo", ["-t", "bogus"], "sinfo_t_bad")] {
        let o = c.run(cmd, &args);
        assert_eq!(o.status.code(), Some(1), "{cmd}");
        assert_eq!(String::from_utf8_lossy(&o.stderr), compat(&format!("{name}.err")), "{cmd}");
        assert_eq!(String::from_utf8_lossy(&o.stdout), compat(&format!("{name}.out")), "{cmd}");
    }
    // Known ones, in any case and by any start of a node state's name, are taken.
    c.ok("squeue", &["-t", "pd,R,completed,all"]);
    c.ok("sinfo", &["-t", "i,alloc,DRAIN,mix"]);
}

/// `scontrol show config`: Slurm 22.05's keys in Slurm's order, and Slurm's defaults for what
/// neither the lab's slurm.conf nor this cluster's sets (values that name this run, the host
/// or the installation aside).
#[test]
fn show_config_has_slurms_keys_and_defaults() {
    let c = lab();
    let ours = c.ok("scontrol", &["show", "config"]);
    let theirs = compat("scontrol_show_config.out");
    let pairs = |t: &str| -> Vec<(String, String)> {
        t.lines()
            .skip(1)
            .filter_map(|l| l.split_once(" = ").or_else(|| l.strip_suffix(" =").map(|k| (k, ""))))
            .map(|(k, v)| (k.trim_end().to_string(), v.to_string()))
            .collect()
    };
    let (ours_p, theirs_p) = (pairs(&ours), pairs(&theirs));
    let keys = |p: &[(String, String)]| p.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
    assert_eq!(keys(&ours_p), keys(&theirs_p), "{ours}");
    assert!(ours.starts_with("Configuration data as of "), "{ours}");
    assert!(ours.ends_with("\n\nSlurmctld(primary) at localhost is UP\n"), "{ours}");
    // Set by a configuration file (the lab's or this cluster's), or naming this run or host.
    let conf = |text: &str| -> Vec<String> {
        text.lines().filter_map(|l| l.split_once('=')).map(|(k, _)| k.trim().to_ascii_lowercase()).collect()
    };
    let mut set =
        conf(&std::fs::read_to_string(drover_testkit::testdata("compat/slurm-22.05/conf/slurm.conf")).unwrap());
    set.extend(conf(&std::fs::read_to_string(c.path().join("slurm.conf")).unwrap()));
    let volatile = [
        "BOOT_TIME",
        "NEXT_JOB_ID",
        "MaxNodeCount",
        "MaxDBDMsgs",
        "SLURM_CONF",
        "SlurmctldHost[0]",
        "SchedulerParameters",
    ];
    let mut compared = 0;
    for ((k, ours_v), (_, theirs_v)) in ours_p.iter().zip(&theirs_p) {
        if set.contains(&k.to_ascii_lowercase()) || volatile.contains(&k.as_str()) {
            continue;
        }
        assert_eq!(ours_v, theirs_v, "{k}");
        compared += 1;
    }
    assert!(compared > 140, "{compared}");
}
