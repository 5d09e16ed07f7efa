//! scrontab: a user's crontab of recurring jobs, kept by the controller; each entry a job that
//! waits for its next time, runs, and comes back for the time after.

use drover_testkit::{Cluster, Options};
use std::time::Duration;

const EXE: &str = env!("CARGO_BIN_EXE_drover");

fn cluster(enabled: bool) -> Cluster {
    let extra = if enabled { "ScronParameters=enable\n" } else { "" };
    Cluster::start(EXE, Options { nodes: 1, extra_conf: extra.into(), accounting: true, ..Default::default() })
}

#[test]
fn an_entry_runs_at_its_minute_comes_back_and_is_cancelled_only_with_cron() {
    let mut c = cluster(true);
    let none = c.run("scrontab", &["-l"]);
    assert_eq!((none.status.code(), String::from_utf8_lossy(&none.stdout).trim()), (Some(1), "no crontab for root"));

    let log = c.path().join("cron.log");
    let tab = c.path().join("tab");
    let text = format!("# every minute\nOUT={}\n#SCRON -t 1\n* * * * * echo ran >> $OUT\n", log.display());
    std::fs::write(&tab, &text).unwrap();
    c.ok("scrontab", &[tab.to_str().unwrap()]);
    assert_eq!(c.ok("scrontab", &["-l"]), text);
    let q = c.ok("squeue", &["-h", "-o", "%i %j %T %r"]);
    let id: u32 = q.split_whitespace().next().unwrap().parse().unwrap();
    assert_eq!(q.trim(), format!("{id} echo PENDING BeginTime"));

    // It runs at the next minute, and waits again for the one after.
    c.wait_until("the entry to run", Duration::from_secs(90), || {
        std::fs::read_to_string(&log).is_ok_and(|t| t == "ran\n")
    });
    c.wait_until("the job to wait again", Duration::from_secs(20), || {
        c.ok("squeue", &["-h", "-j", &id.to_string(), "-o", "%T %r"]).trim() == "PENDING BeginTime"
    });
    c.wait_until("accounting to have its run", Duration::from_secs(20), || {
        c.ok("sacct", &["-n", "-X", "-P", "-D", "-j", &id.to_string(), "-o", "State"]).lines().any(|l| l == "COMPLETED")
    });

    // Kept across a controller restart.
    c.kill_controller();
    c.start_controller();
    c.wait_nodes_up(Duration::from_secs(30));
    assert_eq!(c.ok("scrontab", &["-l"]), text);
    assert_eq!(c.ok("squeue", &["-h", "-o", "%i %T"]).trim(), format!("{id} PENDING"));

    // Neither scancel nor scontrol change it without --cron.
    let o = c.run("scancel", &[&id.to_string()]);
    assert_eq!(
        String::from_utf8_lossy(&o.stderr).trim(),
        format!("scancel: error: Kill job error on job id {id}: Cannot cancel scrontab jobs without --cron flag.")
    );
    let o = c.run("scontrol", &["hold", &id.to_string()]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("Cannot modify scrontab jobs through scontrol"), "{o:?}");
    // A signal is not a cancel: the entry stays.
    let o = c.run("scancel", &["--cron", "-s", "USR1", &id.to_string()]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("Job is pending execution"), "{o:?}");
    assert_eq!(c.ok("scrontab", &["-l"]), text);
    c.ok("scancel", &["--cron", &id.to_string()]);
    c.wait_state(id, &["CANCELLED"], Duration::from_secs(10));
    let disabled = text.replace("#SCRON", "#DISABLED: #SCRON").replace("* * * * *", "#DISABLED: * * * * *");
    assert_eq!(c.ok("scrontab", &["-l"]), disabled);

    c.ok("scrontab", &["-r"]);
    assert_eq!(c.run("scrontab", &["-l"]).status.code(), Some(1));
}

#[test]
fn a_new_crontab_replaces_the_old_ones_jobs_and_a_bad_one_changes_nothing() {
    let c = cluster(true);
    let tab = c.path().join("tab");
    std::fs::write(&tab, "0 3 * * * first\n").unwrap();
    c.ok("scrontab", &[tab.to_str().unwrap()]);
    let first = c.ok("squeue", &["-h", "-o", "%i"]).trim().to_string();
    std::fs::write(&tab, "@daily second\n@weekly third\n").unwrap();
    c.ok("scrontab", &[tab.to_str().unwrap()]);
    assert_eq!(c.ok("squeue", &["-h", "-o", "%j", "-S", "j"]), "second\nthird\n");
    assert_eq!(c.state(first.parse().unwrap()), "CANCELLED");

    for (bad, why) in
        [("0 3 * * * ok\n61 * * * * bad\n", "line 2: minute 61"), ("#SCRON -p nowhere\n0 3 * * * x\n", "")]
    {
        std::fs::write(&tab, bad).unwrap();
        let o = c.run("scrontab", &[tab.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1), "{bad}");
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            out == "There are errors in your crontab.\n"
                || out.starts_with("There was an issue with the job submission on lines 1-2\n"),
            "{bad}: {out}"
        );
        assert!(String::from_utf8_lossy(&o.stderr).contains(why), "{bad}: {o:?}");
        assert_eq!(c.ok("squeue", &["-h", "-o", "%j", "-S", "j"]), "second\nthird\n", "{bad}");
        assert_eq!(c.ok("scrontab", &["-l"]), "@daily second\n@weekly third\n");
    }
}

#[test]
fn scrontab_is_off_unless_scron_parameters_enable_it() {
    let c = cluster(false);
    let o = c.run("scrontab", &["-l"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&o.stderr), "scrontab: fatal: scrontab is disabled on this cluster\n");
}
