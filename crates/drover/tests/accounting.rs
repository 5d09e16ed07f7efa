//! Accounting on a real cluster: the controller sends job and step records to `drover
//! accounting` (SQLite here), `sacct` reads them back as Slurm prints them, and nothing is
//! lost while accounting, or the controller, is down.

use drover_testkit::{compat, Cluster, Options};
use std::time::Duration;

const EXE: &str = env!("CARGO_BIN_EXE_drover");

/// The lab's shape (partition `cpu`), with accounting.
fn lab() -> Cluster {
    Cluster::start(
        EXE,
        Options {
            nodes: 4,
            cpus: 2,
            mem_mb: 4000,
            partitions: "PartitionName=cpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n".into(),
            accounting: true,
            ..Default::default()
        },
    )
}

fn sacct(c: &Cluster, args: &[&str]) -> String {
    c.ok("sacct", args)
}

/// Waits until `sacct ARGS` prints `want` (records arrive a moment after the change).
fn wait_sacct(c: &Cluster, args: &[&str], want: &str) {
    let t = std::time::Instant::now();
    loop {
        let out = c.run("sacct", args);
        let got = String::from_utf8_lossy(&out.stdout).to_string();
        if out.status.success() && got == want {
            return;
        }
        if t.elapsed() > Duration::from_secs(20) {
            assert_eq!(got, want, "sacct {args:?}: {}\n{}", String::from_utf8_lossy(&out.stderr), c.logs());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_job_and_its_steps_read_back_as_slurm_prints_them() {
    let c = lab();
    let id = c.submit(&["-J", "steps", "-N2", "-n2", "--wrap", "srun hostname; srun -n1 false; echo done"]);
    c.wait_state(id, &["COMPLETED"], Duration::from_secs(30));
    // The capture's job 30 ran the same script: its id becomes this one's, in the same
    // 12-wide, left-justified column.
    let want: String = compat("sacct_j_steps.out")
        .lines()
        .map(|l| match l.strip_prefix("30") {
            Some(rest) => {
                let (jobid, tail) = rest.split_at(11);
                format!("{:<13}{tail}\n", format!("{id}{}", jobid.trim_end()))
            }
            None => format!("{l}\n"),
        })
        .collect();
    wait_sacct(&c, &["-j", &id.to_string()], &want);

    // Field by field (-P): what the lab printed for job 30, with this run's ids and times.
    let j = id.to_string();
    let fields = "JobID,JobIDRaw,JobName,Partition,Account,AllocCPUS,AllocNodes,NNodes,State,ExitCode,\
                  DerivedExitCode,User,UID,Group,GID,Cluster,AllocTRES,Layout,NTasks,ReqCPUFreq,WorkDir";
    let out = sacct(&c, &["-j", &j, "-P", "-o", fields]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], fields.replace(',', "|"));
    let dir = c.path().display().to_string();
    assert_eq!(
        lines[1],
        format!(
            "{j}|{j}|steps|cpu|root|2|2|2|COMPLETED|0:0|1:0|root|0|root|0|test|billing=2,cpu=2,node=2|||Unknown|{dir}"
        )
    );
    assert_eq!(
        lines[2],
        format!("{j}.batch|{j}.batch|batch||root|1|1|1|COMPLETED|0:0||||||test|cpu=1,mem=0,node=1|Unknown|1|0|")
    );
    assert_eq!(
        lines[3],
        format!("{j}.0|{j}.0|hostname||root|2|2|2|COMPLETED|0:0||||||test|cpu=2,mem=0,node=2|Cyclic|2|Unknown|")
    );
    assert_eq!(
        lines[4],
        format!("{j}.1|{j}.1|false||root|1|1|1|FAILED|1:0||||||test|cpu=1,mem=0,node=1|Cyclic|1|Unknown|")
    );
    assert_eq!(lines.len(), 5);

    // -X: the allocation only; -n: no header; -b: brief.
    assert_eq!(sacct(&c, &["-X", "-n", "-j", &j, "-o", "JobID,State"]), format!("{j:<12}  COMPLETED \n"));
    let brief = sacct(&c, &["-b", "-j", &format!("{j}.1")]);
    assert_eq!(brief.lines().nth(2).unwrap(), format!("{:<12}     FAILED      1:0 ", format!("{j}.1")));
    assert_eq!(brief.lines().count(), 3, "-j N.S shows only that step:\n{brief}");
}

#[test]
fn cancelled_failed_and_pending_jobs() {
    let c = lab();
    let ok = c.submit(&["-J", "ok", "--wrap", "true"]);
    let fail = c.submit(&["-J", "fail", "--wrap", "exit 3"]);
    let long = c.submit(&["-J", "long", "--wrap", "sleep 300"]);
    let held = c.submit(&["-J", "held", "-H", "--wrap", "true"]);
    c.wait_state(long, &["RUNNING"], Duration::from_secs(30));
    c.ok("scancel", &[&long.to_string()]);
    c.wait_state(long, &["CANCELLED"], Duration::from_secs(30));
    c.wait_state(fail, &["FAILED"], Duration::from_secs(30));
    c.wait_state(ok, &["COMPLETED"], Duration::from_secs(30));
    let ids = format!("{ok},{fail},{long},{held}");
    let want = format!(
        "{ok}|ok|COMPLETED|0:0\n{ok}.batch|batch|COMPLETED|0:0\n{fail}|fail|FAILED|3:0\n{fail}.batch|batch|FAILED|3:0\n\
         {long}|long|CANCELLED by 0|0:0\n{long}.batch|batch|CANCELLED|0:15\n{held}|held|PENDING|0:0\n"
    );
    wait_sacct(&c, &["-n", "-P", "-j", &ids, "-o", "JobID,JobName,State,ExitCode"], &want);
    // The default window (today) and state selections.
    let today = sacct(&c, &["-X", "-n", "-P", "-o", "JobID"]);
    assert_eq!(today, format!("{ok}\n{fail}\n{long}\n"), "a held job was never eligible, as in Slurm");
    let failed = sacct(&c, &["-X", "-n", "-P", "-o", "JobID", "-s", "F,CA", "-S", "now-1hour"]);
    assert_eq!(failed, format!("{fail}\n{long}\n"));
    let by_name = sacct(&c, &["-X", "-n", "-P", "-o", "JobID", "--name", "ok", "-S", "now-1hour"]);
    assert_eq!(by_name, format!("{ok}\n"));
    // Another user's view: their own jobs only.
    assert_eq!(sacct(&c, &["-X", "-n", "-u", "nobody", "-S", "now-1hour"]), "");
}

#[test]
fn nothing_is_lost_while_accounting_or_the_controller_is_down() {
    let mut c = lab();
    let first = c.submit(&["-J", "before", "--wrap", "true"]);
    c.wait_state(first, &["COMPLETED"], Duration::from_secs(30));
    wait_sacct(&c, &["-X", "-n", "-P", "-o", "JobID,State", "-j", &first.to_string()], &format!("{first}|COMPLETED\n"));

    // Accounting down: scheduling goes on; sacct says why it cannot answer.
    c.kill_accounting();
    let during: Vec<u32> = (0..5).map(|i| c.submit(&["-J", &format!("down{i}"), "--wrap", "true"])).collect();
    for id in &during {
        c.wait_state(*id, &["COMPLETED"], Duration::from_secs(30));
    }
    let out = c.run("sacct", &["-X"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("sacct: error: Problem talking to the database"));

    // The controller killed too, with those records undelivered: its journal still has them.
    c.kill_controller();
    c.start_controller();
    c.wait_nodes_up(Duration::from_secs(30));
    c.start_accounting();
    let ids: Vec<String> = during.iter().map(u32::to_string).collect();
    let want: String = during.iter().map(|id| format!("{id}|COMPLETED\n")).collect();
    wait_sacct(&c, &["-X", "-n", "-P", "-o", "JobID,State", "-j", &ids.join(",")], &want);
    // Each job once (records are upserts: a job sent again is stored once).
    let all = sacct(&c, &["-X", "-n", "-P", "-o", "JobID", "-S", "now-1hour"]);
    assert_eq!(all.lines().count(), 6, "{all}");
}

/// Every field of `sacct -P --format=ALL` for the capture's job 30 (a batch script running
/// two steps on two nodes), field by field; only what differs by run or site is left out.
#[test]
fn every_field_matches_the_capture() {
    let c = lab();
    let id = c.submit(&["-J", "steps", "-N2", "-n2", "--wrap", "srun hostname; srun -n1 false; echo done"]);
    c.wait_state(id, &["COMPLETED"], Duration::from_secs(30));
    let want = compat("sacct_P_all_fields.out");
    let header = want.lines().next().unwrap().to_string();
    let fields = header.replace('|', ",");
    let j = id.to_string();
    let mut got = String::new();
    c.wait_until("all four records", Duration::from_secs(20), || {
        got = c.ok("sacct", &["-P", "-j", &j, "-o", &fields]);
        // Every record final: the job's and each step's.
        got.lines().count() == 5 && !got.contains("|RUNNING|") && got.contains(".1|")
    });
    // Values that differ by run or by site: times and durations, ids, the store's numbers,
    // the cluster and its nodes, paths, and what the lab's plugins measured or set.
    let volatile = [
        "AssocID",
        "Cluster",
        "CPUTime",
        "CPUTimeRAW",
        "DBIndex",
        "Elapsed",
        "ElapsedRaw",
        "Eligible",
        "End",
        "JobID",
        "JobIDRaw",
        "NodeList",
        "Priority",
        "Reserved",
        "ResvCPU",
        "ResvCPURAW",
        "Start",
        "Submit",
        "SystemCPU",
        "TotalCPU",
        "UserCPU",
        "WorkDir",
    ];
    let names: Vec<&str> = header.split('|').collect();
    let rows = |text: &str| -> Vec<Vec<String>> {
        text.lines().skip(1).map(|l| l.split('|').map(String::from).collect()).collect()
    };
    let (want_rows, got_rows) = (rows(&want), rows(&got));
    assert_eq!(got.lines().next().unwrap(), header);
    assert_eq!(got_rows.len(), want_rows.len(), "{got}");
    for (w, g) in want_rows.iter().zip(&got_rows) {
        assert_eq!(g.len(), names.len(), "{got}");
        for (k, name) in names.iter().enumerate() {
            // Usage: the lab's gatherer recorded none; Drover's is checked in its own test.
            let measured = ["Ave", "Max", "Min", "TRESUsage"].iter().any(|p| name.starts_with(p));
            if !volatile.contains(name) && !measured {
                assert_eq!(g[k], w[k], "{name} of {} in\n{got}", g[names.iter().position(|n| *n == "JobID").unwrap()]);
            }
        }
    }
    // The volatile ones have the capture's shape.
    let at = |row: &[String], name: &str| row[names.iter().position(|n| *n == name).unwrap()].clone();
    assert_eq!(at(&got_rows[0], "JobID"), j);
    assert_eq!(at(&got_rows[1], "JobIDRaw"), format!("{j}.batch"));
    assert!(at(&got_rows[0], "End") >= at(&got_rows[0], "Start"));
}

/// What tasks used reaches accounting from the node: CPU time (user and system, from each
/// task's rusage) and peak memory, of the batch script and of each step.
#[test]
fn usage_of_the_batch_script_and_steps() {
    let c = lab();
    // ~60 MB held by `tail` (one line without a newline), then some CPU in the shell.
    let script = "head -c 60000000 /dev/zero | tail >/dev/null; \
                  srun sh -c 'head -c 40000000 /dev/zero | tail >/dev/null'; \
                  i=0; while [ $i -lt 150000 ]; do i=$((i+1)); done";
    let id = c.submit(&["-J", "use", "--wrap", script]);
    c.wait_state(id, &["COMPLETED"], Duration::from_secs(60));
    let j = id.to_string();
    let mut got = String::new();
    c.wait_until("final usage records", Duration::from_secs(20), || {
        got = c.ok("sacct", &["-n", "-P", "-j", &j, "-o", "JobID,State,MaxRSS,TotalCPU,UserCPU,SystemCPU"]);
        got.lines().count() == 3 && !got.contains("|RUNNING|")
    });
    let rows: Vec<Vec<&str>> = got.lines().map(|l| l.split('|').collect()).collect();
    // Sizes as Slurm converts them (`40956K`, `59M`, `1.50G`).
    let kb = |v: &str| {
        let (num, mult) = match v.chars().last() {
            Some('K') => (&v[..v.len() - 1], 1.0),
            Some('M') => (&v[..v.len() - 1], 1024.0),
            Some('G') => (&v[..v.len() - 1], 1048576.0),
            _ => (v, 1.0 / 1024.0),
        };
        (num.parse::<f64>().unwrap_or(0.0) * mult) as u64
    };
    let secs = |v: &str| {
        // MM:SS.mmm or HH:MM:SS
        let parts: Vec<f64> = v.split(':').map(|p| p.parse().unwrap_or(0.0)).collect();
        parts.iter().fold(0.0, |acc, p| acc * 60.0 + p)
    };
    let (job, batch, step) = (&rows[0], &rows[1], &rows[2]);
    assert_eq!((batch[0], step[0]), (format!("{j}.batch").as_str(), format!("{j}.0").as_str()), "{got}");
    assert!(kb(batch[2]) >= 55_000, "batch MaxRSS {got}");
    assert!((35_000..55_000).contains(&kb(step[2])), "step MaxRSS {got}");
    // The shell loop alone takes about 0.2 s of CPU (less on a fast, idle machine).
    assert!(secs(batch[3]) >= 0.1, "batch TotalCPU {got}");
    assert!(secs(batch[4]) > 0.0, "batch UserCPU {got}");
    // The job's CPU is its steps' together.
    let sum = secs(batch[3]) + secs(step[3]);
    assert!((secs(job[3]) - sum).abs() < 0.01, "job TotalCPU {got}");
    assert_eq!(job[2], "", "the job line has no MaxRSS of its own, as in Slurm");
}

/// Jobs run under an account and QoS from accounting: the one asked for, else the user's
/// default; with `AccountingStorageEnforce=associations,qos`, one the user has no
/// association with, or a QoS it does not allow, is refused in Slurm's words.
#[test]
fn associations_give_jobs_their_account_and_are_enforced() {
    let c = Cluster::start(
        EXE,
        Options {
            nodes: 1,
            accounting: true,
            extra_conf: "AccountingStorageEnforce=associations,qos\n".into(),
            ..Default::default()
        },
    );
    // The controller registered its cluster (root's associations) and reads them within
    // seconds; root's job then runs under account root, QoS normal.
    let mut id = 0;
    c.wait_until("the controller to know root's association", Duration::from_secs(20), || {
        let out = c.run("sbatch", &["--parsable", "--wrap", "echo $SLURM_JOB_ACCOUNT $SLURM_JOB_QOS"]);
        id = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(0);
        out.status.success()
    });
    c.wait_state(id, &["COMPLETED"], Duration::from_secs(30));
    let out = std::fs::read_to_string(c.path().join(format!("slurm-{id}.out"))).unwrap();
    assert_eq!(out, "root normal\n");
    let refused = c.run("sbatch", &["-A", "physics", "--wrap", "true"]);
    assert_eq!(refused.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&refused.stderr),
        "sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified\n"
    );
    c.ok("sacctmgr", &["-i", "add", "account", "physics"]);
    c.ok("sacctmgr", &["-i", "add", "user", "root", "Account=physics"]);
    c.ok("sacctmgr", &["-i", "add", "qos", "high"]);
    let mut pid = 0;
    c.wait_until("the new association to count", Duration::from_secs(20), || {
        let out = c.run("sbatch", &["--parsable", "-A", "physics", "-H", "--wrap", "true"]);
        pid = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(0);
        out.status.success()
    });
    assert_eq!(c.ok("squeue", &["-h", "-j", &pid.to_string(), "-o", "%a %q"]), "physics normal\n");
    // A QoS the association does not list is refused; once it does, it is accepted.
    let q = c.run("sbatch", &["-A", "physics", "-q", "high", "--wrap", "true"]);
    assert_eq!(
        String::from_utf8_lossy(&q.stderr),
        "sbatch: error: Batch job submission failed: Invalid qos specification\n"
    );
    c.ok("sacctmgr", &["-i", "modify", "user", "root", "where", "account=physics", "set", "qos=normal,high"]);
    c.wait_until("the QoS to be allowed", Duration::from_secs(20), || {
        c.run("sbatch", &["-A", "physics", "-q", "high", "-H", "--wrap", "true"]).status.success()
    });
    // sacct shows the account the job ran under.
    let j = id.to_string();
    c.wait_until("the record", Duration::from_secs(20), || {
        c.ok("sacct", &["-n", "-P", "-X", "-j", &j, "-o", "Account,QOS,State"]) == "root|normal|COMPLETED\n"
    });
}

/// `AccountingStorageEnforce=limits`: association and QoS limits hold jobs with Slurm's
/// reasons (and release them as running jobs end or limits change), per-job limits hold a
/// job for good, and submit limits refuse it in Slurm's words.
#[test]
fn limits_hold_jobs_with_slurms_reasons() {
    let c = Cluster::start(
        EXE,
        Options {
            nodes: 2,
            cpus: 2,
            accounting: true,
            extra_conf: "AccountingStorageEnforce=limits\n".into(),
            ..Default::default()
        },
    );
    c.wait_until("the cluster to be registered", Duration::from_secs(20), || {
        c.run("sacctmgr", &["-n", "-P", "show", "cluster", "format=cluster"]).stdout == b"test\n"
    });
    c.ok("sacctmgr", &["-i", "add", "account", "physics", "GrpTRES=cpu=2"]);
    c.ok("sacctmgr", &["-i", "add", "user", "root", "Account=physics"]);
    let reason = |id: u32| c.ok("squeue", &["-h", "-j", &id.to_string(), "-o", "%T %r"]).trim().to_string();
    let submit = |args: &[&str]| -> Result<u32, String> {
        let mut a = vec!["--parsable", "-A", "physics"];
        a.extend_from_slice(args);
        let out = c.run("sbatch", &a);
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim().parse().unwrap())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).to_string())
        }
    };
    // Two one-CPU jobs fill physics's GrpTRES=cpu=2 (on four free CPUs); the third waits.
    let mut first = 0;
    c.wait_until("the association to be known", Duration::from_secs(20), || {
        first = submit(&["-n1", "--wrap", "sleep 60"]).unwrap_or(0);
        first != 0
    });
    let second = submit(&["-n1", "--wrap", "sleep 60"]).unwrap();
    c.wait_state(second, &["RUNNING"], Duration::from_secs(20));
    let third = submit(&["-n1", "--wrap", "true"]).unwrap();
    c.wait_until("AssocGrpCpuLimit", Duration::from_secs(20), || reason(third) == "PENDING AssocGrpCpuLimit");
    // One ends: the third starts.
    c.ok("scancel", &[&first.to_string()]);
    c.wait_state(third, &["COMPLETED"], Duration::from_secs(20));
    // A per-job limit (MaxWall, inherited from the account) holds a longer job for good.
    c.ok("sacctmgr", &["-i", "modify", "account", "physics", "set", "MaxWall=00:10:00"]);
    // (The controller reads limits every two seconds: a job submitted before that runs and is
    // cancelled, and another is tried.)
    let mut long = 0;
    c.wait_until("AssocMaxWallDurationPerJobLimit", Duration::from_secs(20), || {
        if long != 0 && reason(long) != "PENDING AssocMaxWallDurationPerJobLimit" {
            c.ok("scancel", &[&long.to_string()]);
            long = 0;
        }
        if long == 0 {
            long = submit(&["-t", "20", "-n1", "--wrap", "sleep 30"]).unwrap();
            std::thread::sleep(Duration::from_millis(300));
        }
        reason(long) == "PENDING AssocMaxWallDurationPerJobLimit"
    });
    // Lifted, it runs.
    c.ok("sacctmgr", &["-i", "modify", "account", "physics", "set", "MaxWall=-1"]);
    c.wait_state(long, &["RUNNING"], Duration::from_secs(20));
    c.ok("scancel", &[&long.to_string()]);
    // QoS MaxJobsPerUser.
    c.ok("sacctmgr", &["-i", "add", "qos", "one", "MaxJobsPerUser=1"]);
    c.ok("sacctmgr", &["-i", "modify", "user", "root", "where", "account=physics", "set", "qos=normal,one"]);
    c.ok("scancel", &[&second.to_string()]);
    let mut q1 = 0;
    c.wait_until("the QoS to be allowed", Duration::from_secs(20), || {
        q1 = submit(&["-q", "one", "-n1", "--wrap", "sleep 60"]).unwrap_or(0);
        q1 != 0
    });
    c.wait_state(q1, &["RUNNING"], Duration::from_secs(20));
    let q2 = submit(&["-q", "one", "-n1", "--wrap", "true"]).unwrap();
    c.wait_until("QOSMaxJobsPerUserLimit", Duration::from_secs(20), || reason(q2) == "PENDING QOSMaxJobsPerUserLimit");
    // Submit limits refuse at submit.
    c.ok("sacctmgr", &["-i", "modify", "user", "root", "where", "account=physics", "set", "MaxSubmitJobs=2"]);
    let msg = "sbatch: error: Batch job submission failed: Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)\n";
    c.wait_until("MaxSubmitJobs", Duration::from_secs(20), || {
        submit(&["--wrap", "true"]).err().as_deref() == Some(msg)
    });
}

/// Every key of the capture's `sacct --json` (OpenAPI DB v0.0.38) at its place, with a value
/// of the same kind (`null` aside), and the values that describe the same job equal.
#[test]
fn sacct_json_has_slurms_shape() {
    fn paths(v: &serde_json::Value, at: String, out: &mut Vec<(String, &'static str)>) {
        use serde_json::Value::*;
        let kind = match v {
            Null => "null",
            Bool(_) => "bool",
            Number(_) => "number",
            String(_) => "string",
            Array(_) => "array",
            Object(_) => "object",
        };
        out.push((at.clone(), kind));
        match v {
            Object(m) => m.iter().for_each(|(k, v)| paths(v, format!("{at}.{k}"), out)),
            Array(a) => {
                if let Some(first) = a.first() {
                    paths(first, format!("{at}[]"), out)
                }
            }
            _ => {}
        }
    }
    let c = lab();
    let id = c.submit(&["-J", "steps", "-N2", "-n2", "--wrap", "srun hostname; srun -n1 false; echo done"]);
    c.wait_state(id, &["COMPLETED"], Duration::from_secs(30));
    let j = id.to_string();
    let mut got = serde_json::Value::Null;
    c.wait_until("final records", Duration::from_secs(20), || {
        got = serde_json::from_str(&c.ok("sacct", &["--json", "-j", &j])).unwrap();
        // Records arrive as the job goes: wait for the job's final one and its three steps'.
        got["jobs"][0]["state"]["current"] == "COMPLETED"
            && got["jobs"][0]["steps"].as_array().is_some_and(|s| s.len() == 3)
            && got["jobs"][0]["steps"].as_array().unwrap().iter().all(|s| s["state"] != "RUNNING")
    });
    let want: serde_json::Value = serde_json::from_str(&compat("sacct_json_j_steps.out")).unwrap();
    let (mut w, mut g) = (Vec::new(), Vec::new());
    paths(&want, String::new(), &mut w);
    paths(&got, String::new(), &mut g);
    let got_kinds: std::collections::HashMap<String, &str> = g.into_iter().collect();
    for (path, kind) in w {
        let Some(k) = got_kinds.get(&path) else { panic!("{path} missing from sacct --json") };
        assert!(kind == "null" || *k == "null" || *k == kind, "{path}: {k}, Slurm has {kind}");
    }
    let (gj, wj) = (&got["jobs"][0], &want["jobs"][0]);
    for key in ["name", "account", "partition", "qos", "user", "group", "allocation_nodes"] {
        assert_eq!(gj[key], wj[key], "{key}");
    }
    assert_eq!(gj["state"], wj["state"]);
    assert_eq!(gj["exit_code"], wj["exit_code"]);
    assert_eq!(gj["tres"]["allocated"], wj["tres"]["allocated"]);
    for (gs, ws) in gj["steps"].as_array().unwrap().iter().zip(wj["steps"].as_array().unwrap()) {
        for key in ["state", "tasks"] {
            assert_eq!(gs[key], ws[key], "step {}: {key}", ws["step"]["id"]);
        }
        assert_eq!(gs["step"]["id"], ws["step"]["id"]);
        assert_eq!(gs["step"]["name"], ws["step"]["name"]);
        assert_eq!(gs["task"], ws["task"]);
        assert_eq!(gs["tres"]["allocated"], ws["tres"]["allocated"]);
        assert_eq!(gs["nodes"]["count"], ws["nodes"]["count"]);
    }
}

/// A client that sees a job end (its output file, `squeue`) and asks `sacct` gets the same
/// answer: records go to accounting as soon as they are committed, not on a one-second beat
/// (`drover bench --only acct-lag` measures the lag: tens of milliseconds).
#[test]
fn sacct_agrees_with_squeue_right_after_each_event() {
    let c = lab();
    // sacct, retried for `within` after the event; the time it took.
    let lag = |id: u32, want: &dyn Fn(&str) -> bool, within: Duration| -> Duration {
        let t = std::time::Instant::now();
        loop {
            let got = c.ok("sacct", &["-n", "-X", "-P", "-o", "State", "-j", &id.to_string()]);
            if want(got.trim()) {
                return t.elapsed();
            }
            assert!(t.elapsed() < within, "job {id}: sacct says {got:?} {:?} after the event", t.elapsed());
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    let within = Duration::from_millis(400);
    for _ in 0..3 {
        let id = c.submit(&["--wrap", "sleep 1"]);
        lag(id, &|s| !s.is_empty(), within);
        let t = std::time::Instant::now();
        loop {
            let q = c.ok("squeue", &["-h", "-t", "all", "-j", &id.to_string(), "-o", "%T"]);
            if q.trim() == "COMPLETED" {
                break;
            }
            assert!(t.elapsed() < Duration::from_secs(20), "job {id} did not complete: {q}");
            std::thread::sleep(Duration::from_millis(10));
        }
        lag(id, &|s| s == "COMPLETED", within);
    }
}

/// `sacct --units` prints memory sizes in one unit, `--noconvert` in bytes, as Slurm's
/// convert_num_unit does; a unit it does not know is Slurm's fatal error.
#[test]
fn sacct_units_and_noconvert() {
    let c = lab();
    let id = c.submit(&["--wrap", "srun python3 -c 'x = bytearray(40 << 20); import time; time.sleep(1)'"]);
    c.wait_state(id, &["COMPLETED"], Duration::from_secs(30));
    let step = format!("{id}.0");
    let t = std::time::Instant::now();
    let mut mega = String::new();
    while t.elapsed() < Duration::from_secs(10) {
        mega = sacct(&c, &["-n", "-P", "-j", &step, "-o", "MaxRSS", "--units=M"]);
        if !mega.trim().is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let m: f64 = mega.trim().strip_suffix('M').and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{mega:?}"));
    assert!((40.0..200.0).contains(&m), "{mega}");
    let bytes: u64 = sacct(&c, &["-n", "-P", "-j", &step, "-o", "MaxRSS", "--noconvert"]).trim().parse().unwrap();
    assert_eq!(bytes % 1024, 0);
    assert!((m - bytes as f64 / 1048576.0).abs() < 0.01, "{m} {bytes}");
    let o = c.run("sacct", &["--units=x"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "sacct: error: Invalid unit type 'x'. Possible options are 'KMGTP'\nsacct: fatal: Invalid unit type\n"
    );
}

/// A pending array's JobID in sacct keeps its `%N` throttle (`12_[1-3%2]`), as Slurm's.
#[test]
fn sacct_shows_a_pending_arrays_throttle() {
    let c = lab();
    let id = c.submit(&["-H", "--array=1-3%2", "--wrap", "true"]);
    wait_sacct(&c, &["-n", "-X", "-P", "-o", "JobID", "-j", &id.to_string()], &format!("{id}_[1-3%2]\n"));
}

/// A job cancelled while held was never eligible: sacct's default window leaves it out (its
/// Eligible is Unknown), as Slurm's does; named with -j it is there.
#[test]
fn sacct_leaves_out_jobs_cancelled_before_they_were_eligible() {
    let c = lab();
    let held = c.submit(&["-H", "--wrap", "true"]);
    let ran = c.submit(&["--wrap", "true"]);
    c.wait_state(ran, &["COMPLETED"], Duration::from_secs(20));
    c.ok("scancel", &[&held.to_string()]);
    wait_sacct(
        &c,
        &["-n", "-X", "-P", "-o", "JobID,State,Eligible", "-j", &held.to_string()],
        &format!("{held}|CANCELLED by 0|Unknown\n"),
    );
    wait_sacct(&c, &["-n", "-X", "-P", "-o", "JobID,State"], &format!("{ran}|COMPLETED\n"));
}
