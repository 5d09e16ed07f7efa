//! Jobs run as the submitting user; only the owner (or root) may cancel. Needs root: the test
//! creates two users and removes them afterwards.

use drover_testkit::{Cluster, Options, TestGroup, TestUser};
use std::time::Duration;

const EXE: &str = env!("CARGO_BIN_EXE_drover");

#[test]
fn jobs_run_as_the_submitter_and_other_users_cannot_cancel_them() {
    if !drover_testkit::root_or_skip("needs root to create test users") {
        return;
    }
    let pid = std::process::id() % 10000;
    let alice = TestUser::create(&format!("drva{pid}"));
    let bob = TestUser::create(&format!("drvb{pid}"));
    // A supplementary group of alice's: her jobs have it (the node agent resolves the groups
    // and the supervisor sets them, as initgroups would).
    let lab = TestGroup::create(&format!("drvg{pid}"), &[&alice.name]);
    let c = Cluster::start(
        EXE,
        Options {
            nodes: 2,
            cpus: 2,
            partitions: "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n\
                         PartitionName=staff Nodes=ALL AllowGroups=root State=UP\n"
                .into(),
            ..Default::default()
        },
    );
    let work = c.path().join("alice");
    std::fs::create_dir_all(&work).unwrap();
    nix::unistd::chown(&work, Some(nix::unistd::Uid::from_raw(alice.uid)), Some(nix::unistd::Gid::from_raw(alice.gid)))
        .unwrap();

    let out = c.run_as(
        &alice,
        "sbatch",
        &[
            "--parsable",
            "--wrap",
            "id -u; id -g; echo $SLURM_JOB_USER; pwd; id -G | tr ' ' '\\n' | sort -n | paste -sd,",
        ],
        &work,
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let id: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    c.wait_state(id, &["COMPLETED"], Duration::from_secs(30));
    let path = work.join(format!("slurm-{id}.out"));
    let body = std::fs::read_to_string(&path).unwrap();
    let mut groups = [alice.gid, lab.gid];
    groups.sort();
    assert_eq!(
        body,
        format!("{}\n{}\n{}\n{}\n{},{}\n", alice.uid, alice.gid, alice.name, work.display(), groups[0], groups[1])
    );
    let meta = std::fs::metadata(&path).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(meta.uid(), alice.uid, "output file is created as the user");

    // AllowGroups: alice is not in group root.
    let out = c.run_as(&alice, "sbatch", &["-p", "staff", "--wrap", "true"], &work);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "sbatch: error: Batch job submission failed: User's group not permitted to use this partition\n"
    );
    c.ok("sbatch", &["-p", "staff", "--hold", "--wrap", "true"]);

    let out = c.run_as(&alice, "sbatch", &["--parsable", "--wrap", "sleep 60"], &work);
    let long: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    c.wait_state(long, &["RUNNING"], Duration::from_secs(30));
    let out = c.run_as(&bob, "scancel", &[&long.to_string()], std::path::Path::new("/tmp"));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("scancel: error: Kill job error on job id {long}: Access/permission denied\n")
    );
    assert_eq!(c.state(long), "RUNNING");
    // A user cannot submit as somebody else either: the socket's credentials win.
    let out = c.run_as(
        &bob,
        "sbatch",
        &["--parsable", &format!("--uid={}", alice.uid), "--wrap", "id -u"],
        std::path::Path::new("/tmp"),
    );
    let sneaky: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(0);
    if sneaky != 0 {
        let who = c.ok("squeue", &["-h", "-t", "all", "-j", &sneaky.to_string(), "-o", "%U"]);
        assert_eq!(who.trim(), bob.uid.to_string());
    }
    let out = c.run_as(&alice, "scancel", &[&long.to_string()], &work);
    assert!(out.status.success());
    c.wait_state(long, &["CANCELLED"], Duration::from_secs(30));
}

/// `--export=NONE` (and an `--export` list without ALL) starts the batch job from the user's
/// login environment on the node, as Slurm's slurmd loads it (`su - USER`): HOME, USER,
/// LOGNAME, SHELL and what the user's profile sets, beneath the job's own variables; nothing
/// else of the submitting shell's.
#[test]
fn export_none_gives_the_job_the_users_login_environment() {
    if !drover_testkit::root_or_skip("needs root to create a test user and run su") {
        return;
    }
    let pid = std::process::id() % 10000;
    let carol = TestUser::create(&format!("drvc{pid}"));
    let home = format!("/home/{}", carol.name);
    let mut profile = std::fs::read_to_string(format!("{home}/.profile")).unwrap_or_default();
    profile.push_str("export FROM_PROFILE=yes\n");
    std::fs::write(format!("{home}/.profile"), profile).unwrap();
    let c = Cluster::start(EXE, Options { nodes: 1, cpus: 2, ..Default::default() });
    let work = c.path().join("carol");
    std::fs::create_dir_all(&work).unwrap();
    nix::unistd::chown(&work, Some(nix::unistd::Uid::from_raw(carol.uid)), Some(nix::unistd::Gid::from_raw(carol.gid)))
        .unwrap();
    let show = "echo \"HOME=$HOME USER=$USER LOGNAME=$LOGNAME SHELL=$SHELL PROFILE=$FROM_PROFILE \
                FOO=$FOO BAR=$BAR JOB=${SLURM_JOB_ID:+set}\"";
    let submit = |export: &str| -> u32 {
        let mut cmd = c.command("sbatch", &["--parsable", export, "--wrap", show]);
        use std::os::unix::process::CommandExt;
        cmd.uid(carol.uid).gid(carol.gid).current_dir(&work).env("FOO", "foo").env("BAR", "bar");
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    };
    let none = submit("--export=NONE");
    let list = submit("--export=FOO");
    let all = submit("--export=ALL");
    for id in [none, list, all] {
        c.wait_state(id, &["COMPLETED"], Duration::from_secs(30));
    }
    let read = |id: u32| std::fs::read_to_string(work.join(format!("slurm-{id}.out"))).unwrap();
    let login = format!("HOME={home} USER={0} LOGNAME={0} SHELL=/bin/bash PROFILE=yes", carol.name);
    assert_eq!(read(none), format!("{login} FOO= BAR= JOB=set\n"));
    assert_eq!(read(list), format!("{login} FOO=foo BAR= JOB=set\n"));
    // ALL: the submitting shell's environment, no login shell read.
    let all_out = read(all);
    assert!(all_out.contains("PROFILE= FOO=foo BAR=bar JOB=set"), "{all_out}");
}

/// `--uid` and `--gid` are root's: an ordinary user gets Slurm's refusal (exit 255) and no
/// job; root may name a user or group by name or number.
#[test]
fn only_root_may_submit_as_someone_else() {
    if !drover_testkit::root_or_skip("needs root to create a test user") {
        return;
    }
    let pid = std::process::id() % 10000;
    let dave = TestUser::create(&format!("drvd{pid}"));
    let c = Cluster::start(EXE, Options { nodes: 1, cpus: 1, ..Default::default() });
    for (opt, word) in [("--uid=0", "--uid"), ("--gid=0", "--gid")] {
        let o = c.run_as(&dave, "sbatch", &[opt, "--wrap", "true"], std::path::Path::new("/tmp"));
        assert_eq!(o.status.code(), Some(255), "{opt}");
        assert_eq!(String::from_utf8_lossy(&o.stderr), format!("sbatch: error: {word} only permitted by root user\n"));
    }
    assert_eq!(c.ok("squeue", &["-h", "-t", "all"]), "");
    let o = c.run("sbatch", &["--uid=nosuchuser-xyz", "--wrap", "true"]);
    assert_eq!(
        (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned()),
        (Some(255), "sbatch: error: Invalid --uid specification\n".to_string())
    );
    let id = c.submit(&[&format!("--uid={}", dave.name), "-D", "/tmp", "-o", "/dev/null", "--wrap", "true"]);
    assert_eq!(c.ok("squeue", &["-h", "-t", "all", "-j", &id.to_string(), "-o", "%u"]).trim(), dave.name);
}
