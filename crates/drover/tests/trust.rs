//! Trust between processes: every TCP link checks who is on the other end. The attacks an
//! ordinary user made on a `drover up` cluster before links were authenticated are
//! regression tests here (each passed then); `authz.rs` holds the table of every RPC against
//! every kind of credential and caller. Needs root (test users).

use drover_proto::auth::Purpose;
use drover_proto::v1;
use drover_testkit::{Cluster, Options, TestUser};
use std::time::Duration;

const EXE: &str = env!("CARGO_BIN_EXE_drover");

mod common;

use common::{auth, conf, open, register_node, rt, Outcome};

/// The attack: an ordinary user registered as node2 over TCP, was sent the launch of root's
/// running job (script and environment), and reported it ended (COMPLETED 0:0, its
/// processes killed). Now neither a client without credentials nor one with the user's own
/// gets a session; the job runs on and node2 keeps its agent.
#[test]
fn an_ordinary_user_cannot_pose_as_a_node() {
    if !drover_testkit::root_or_skip("the attacker is a test user") {
        return;
    }
    let user = TestUser::create(&format!("drvn{}", std::process::id() % 10000));
    let c = Cluster::start(EXE, Options { nodes: 2, cpus: 1, ..Default::default() });
    let secret = "SECRET_TOKEN=swordfish";
    let job = c.submit(&["-w", "node2", &format!("--export=ALL,{secret}"), "--wrap", "sleep 30"]);
    c.wait_state(job, &["RUNNING"], Duration::from_secs(20));
    let a = auth(&c);
    let addr = conf(&c).controller_addr();
    for cred in [None, Some(a.issue_for(user.uid, user.gid, &Purpose::Connect("controller"), b"").unwrap())] {
        let leaked = rt().block_on(async {
            let Ok(ch) = open(&addr, cred, "controller").await else { return String::new() };
            let mut link = v1::node_link_client::NodeLinkClient::new(ch);
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            let reg = v1::Register { node: "node2".into(), cpus: 1, ..Default::default() };
            tx.send(v1::NodeToController { msg: Some(v1::node_to_controller::Msg::Register(reg)) }).unwrap();
            let Ok(resp) = link.session(tokio_stream::wrappers::UnboundedReceiverStream::new(rx)).await else {
                return String::new();
            };
            let mut s = resp.into_inner();
            // Before: the launch of the running job came at once; then "it ended".
            let ended = v1::EndedJob { job_id: job, exit_status: 0, how: "COMPLETED".into(), ..Default::default() };
            let _ = tx.send(v1::NodeToController { msg: Some(v1::node_to_controller::Msg::Ended(ended)) });
            let mut got = String::new();
            while let Ok(Ok(Some(m))) = tokio::time::timeout(Duration::from_secs(2), s.message()).await {
                got.push_str(&format!("{m:?}"));
            }
            got
        });
        assert!(!leaked.contains("swordfish") && !leaked.contains("sleep 30"), "the launch leaked: {leaked}");
    }
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(c.state(job), "RUNNING", "the job was not ended by the impostor\n{}", c.logs());
    let nodes = c.ok("sinfo", &["-h", "-N", "-o", "%N %t"]);
    assert!(nodes.contains("node2 alloc") || nodes.contains("node2 mix"), "{nodes}");
    c.ok("scancel", &[&job.to_string()]);
}

/// A second agent claiming a live node from another host does not evict the first.
#[test]
fn a_live_node_is_not_taken_over_from_another_host() {
    let c = Cluster::start(EXE, Options { nodes: 2, ..Default::default() });
    let a = auth(&c);
    let addr = conf(&c).controller_addr();
    // Root of another host of the cluster (the key's holder) names itself elsewhere.
    let now = jiff::Timestamp::now().as_second();
    let claims = v1::AuthClaims {
        uid: 0,
        gid: 0,
        host: "elsewhere".into(),
        issued: now,
        expires: now + 60,
        nonce: drover_proto::auth::random::<16>().to_vec().into(),
        purpose: "connect/controller".into(),
        binding: Default::default(),
    };
    let cred = a.sign_claims(&claims).unwrap();
    let got = rt().block_on(async {
        let ch = open(&addr, Some(cred), "controller").await.expect("root of another host connects");
        register_node(ch).await
    });
    assert_eq!(got, Outcome::Denied);
    let log = std::fs::read_to_string(c.path().join("log/controller.log")).unwrap();
    assert!(log.contains("an agent on elsewhere may not take it over"), "{log}");
    // node2's own agent is still the one registered: a job there runs.
    let id = c.submit(&["-w", "node2", "--wrap", "true"]);
    c.wait_state(id, &["COMPLETED"], Duration::from_secs(20));
}

/// The attack: a user connected to a running srun's task-I/O port, received root's stdin and
/// wrote lines into root's output. Now a connection that cannot prove the step's key gets
/// nothing and can write nothing.
#[test]
fn nobody_but_the_steps_supervisors_reaches_sruns_io() {
    use std::io::{BufRead, Read, Write};
    let c = Cluster::start(EXE, Options { nodes: 1, ..Default::default() });
    let mut srun = c
        .command("srun", &["bash", "-c", "echo port $SLURM_SRUN_COMM_PORT; read line; echo task got $line"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(srun.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    let port: u16 = first.trim().strip_prefix("port ").unwrap().parse().unwrap();
    // The impostor says hello as node1 (the old protocol's whole handshake) and writes a line.
    let mut evil = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    evil.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let _ = drover_proto::io::write_frame(&mut evil, drover_proto::io::HELLO, 0, b"node1");
    let _ = drover_proto::io::write_frame(&mut evil, drover_proto::io::STDOUT, 0, b"INJECTED\n");
    std::thread::sleep(Duration::from_millis(300));
    srun.stdin.take().unwrap().write_all(b"the secret\n").unwrap();
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    assert!(srun.wait().unwrap().success());
    assert_eq!(rest, "task got the secret\n", "srun's output is the task's alone");
    // What the impostor received: a challenge, then nothing (no stdin).
    let mut got = Vec::new();
    let _ = evil.read_to_end(&mut got);
    assert!(!String::from_utf8_lossy(&got).contains("the secret"), "stdin leaked to the impostor");
    let mut err = String::new();
    srun.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(err.contains("refused a task I/O connection from 127.0.0.1:"), "{err}");
}

/// The attack: a user recorded a 1,000-CPU job "for another user" on the accounting port,
/// and sacct showed it. Now only the controller records.
#[test]
fn only_the_controller_records_accounting() {
    if !drover_testkit::root_or_skip("the forger is a test user") {
        return;
    }
    let user = TestUser::create(&format!("drvr{}", std::process::id() % 10000));
    let c = Cluster::start(EXE, Options { nodes: 1, accounting: true, ..Default::default() });
    let a = auth(&c);
    let addr = conf(&c).accounting_addr().unwrap();
    for cred in [None, Some(a.issue_for(user.uid, user.gid, &Purpose::Connect("accounting"), b"").unwrap())] {
        let got = rt().block_on(async {
            match open(&addr, cred, "accounting").await {
                Err(_) => Outcome::Refused,
                Ok(ch) => common::outcome(
                    v1::accounting_client::AccountingClient::new(ch).record(common::forged_record()).await,
                ),
            }
        });
        assert_ne!(got, Outcome::Allowed);
    }
    let out = c.ok("sacct", &["-a", "-n", "-X", "-S", "1970-01-02", "-o", "JobID,JobName"]);
    assert!(!out.contains("forged") && !out.contains("990001"), "{out}");
    let log = std::fs::read_to_string(c.path().join("log/accounting.log")).unwrap();
    assert!(log.contains(&format!("refused records of cluster test from uid {}", user.uid)), "{log}");
}

/// auth/slurm's key is its owner's alone: an ordinary user cannot read it, and a key that
/// others could read stops the daemons with the file named.
#[test]
fn the_key_is_private_and_a_readable_one_is_refused() {
    if !drover_testkit::root_or_skip("the reader is a test user") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let user = TestUser::create(&format!("drvk{}", std::process::id() % 10000));
    let c = Cluster::start(EXE, Options { nodes: 1, ..Default::default() });
    let key = c.path().join("slurm.key");
    assert_eq!(std::fs::metadata(&key).unwrap().permissions().mode() & 0o777, 0o600);
    let cat = std::process::Command::new("cat").arg(&key).uid(user.uid).gid(user.gid).output().unwrap();
    assert!(!cat.status.success(), "the user read the key");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = std::process::Command::new(EXE).args(["node", "-f"]).arg(&c.conf).args(["-N", "node1"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("readable by every user") && err.contains(&key.display().to_string()), "{err}");
}

use std::os::unix::process::CommandExt;

fn mode(p: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())).permissions().mode() & 0o777
}

/// The attack: `StateSaveLocation/journal/journal.0` was 0644, so any user read every job's
/// script and environment (another user's secret in it); `accounting.db*` were 0644 too. Now
/// the daemons' files are theirs alone, and a restart tightens what it finds looser.
#[test]
fn the_state_and_the_accounting_database_are_private() {
    if !drover_testkit::root_or_skip("the reader is a test user") {
        return;
    }
    let user = TestUser::create(&format!("drvs{}", std::process::id() % 10000));
    let mut c = Cluster::start(EXE, Options { nodes: 1, accounting: true, ..Default::default() });
    let id = c.submit(&["--export=ALL,API_TOKEN=hunter2", "--wrap", "true"]);
    c.wait_state(id, &["COMPLETED"], Duration::from_secs(20));
    let state = c.path().join("state");
    let journal = state.join("journal");
    let j0 = std::fs::read_dir(&journal)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("journal."))
        .unwrap();
    assert!(std::fs::read(&j0).unwrap().windows(7).any(|w| w == b"hunter2"), "the secret is in the journal");
    assert_eq!((mode(&state), mode(&journal), mode(&j0), mode(&state.join("io.key"))), (0o700, 0o700, 0o600, 0o600));
    let db = c.path().join("acct.db");
    assert_eq!(mode(&db), 0o600);
    for f in [&j0, &db] {
        let cat = std::process::Command::new("cat").arg(f).uid(user.uid).gid(user.gid).output().unwrap();
        assert!(!cat.status.success(), "{} was readable by another user", f.display());
    }
    // Loosened by hand (or by an older version): a restart tightens it and says so.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&j0, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o755)).unwrap();
    c.kill_controller();
    c.start_controller();
    c.wait_nodes_up(Duration::from_secs(30));
    assert_eq!((mode(&state), mode(&j0)), (0o700, 0o600));
    let log = std::fs::read_to_string(c.path().join("log/controller.log")).unwrap();
    assert!(
        log.contains(&format!(
            "StateSaveLocation was readable by other users; made private: {}: mode 0644 -> 0600",
            j0.display()
        )),
        "{log}"
    );
}

/// The attack: a user whose umask was 077 had their job write its output 0644 (the job ran
/// with umask 0022). Now jobs and steps get the submitter's umask (SLURM_UMASK).
#[test]
fn jobs_create_files_with_the_submitters_umask() {
    if !drover_testkit::root_or_skip("the submitter is a test user") {
        return;
    }
    let user = TestUser::create(&format!("drvu{}", std::process::id() % 10000));
    let c = Cluster::start(EXE, Options { nodes: 1, ..Default::default() });
    let home = std::path::PathBuf::from(format!("/home/{}", user.name));
    let as_user = |umask: &str, cmd: &str| {
        let out = std::process::Command::new("sh")
            .args(["-c", &format!("umask {umask}; {cmd}")])
            .env("PATH", format!("{}:/usr/bin:/bin", c.bin.display()))
            .env("SLURM_CONF", &c.conf)
            .env("HOME", &home)
            .current_dir(&home)
            .uid(user.uid)
            .gid(user.gid)
            .output()
            .unwrap();
        assert!(out.status.success(), "{cmd}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let private: u32 = as_user("077", "sbatch --parsable --wrap 'touch made-by-batch; umask'").parse().unwrap();
    let open: u32 = as_user("022", "sbatch --parsable --wrap 'touch made-by-open-batch'").parse().unwrap();
    c.wait_state(private, &["COMPLETED"], Duration::from_secs(20));
    c.wait_state(open, &["COMPLETED"], Duration::from_secs(20));
    assert_eq!(mode(&home.join(format!("slurm-{private}.out"))), 0o600);
    assert_eq!(mode(&home.join("made-by-batch")), 0o600);
    assert_eq!(std::fs::read_to_string(home.join(format!("slurm-{private}.out"))).unwrap(), "0077\n");
    assert_eq!(mode(&home.join(format!("slurm-{open}.out"))), 0o644);
    assert_eq!(mode(&home.join("made-by-open-batch")), 0o644);
    // A step: its -o file and what its tasks make; SLURM_UMASK says the submitter's.
    let out = as_user("027", "srun -o step.out bash -c 'touch made-by-step; echo $SLURM_UMASK'; cat step.out");
    assert_eq!(out, "0027");
    assert_eq!((mode(&home.join("step.out")), mode(&home.join("made-by-step"))), (0o640, 0o640));
}

/// Jobs get the submitter's resource limits (`PropagateResourceLimits`, default all), never
/// above the node's hard limits, and the variables that carried them are gone from the job's
/// environment, as in Slurm.
#[test]
fn jobs_get_the_submitters_limits_as_propagate_resource_limits_says() {
    let c = Cluster::start(EXE, Options { nodes: 1, ..Default::default() });
    let run = |limits: &str| {
        let out = std::process::Command::new("bash")
            .args(["-c", &format!("{limits}; srun bash -c 'ulimit -Sn; ulimit -Sc; env | grep -c SLURM_RLIMIT_'")])
            .env("PATH", format!("{}:/usr/bin:/bin", c.bin.display()))
            .env("SLURM_CONF", &c.conf)
            .current_dir(c.path())
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    assert_eq!(run("ulimit -Sn 123; ulimit -Sc 0"), "123\n0\n0\n");
    assert_eq!(run("ulimit -Sn 200; ulimit -Sc 7"), "200\n7\n0\n");
    // Above the node's hard limit the node's hard limit holds.
    let hard = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).unwrap().1;
    if hard != u64::MAX {
        let out = run(&format!("export SLURM_RLIMIT_NOFILE={}", hard + 1000));
        assert!(out.starts_with(&format!("{hard}\n")), "{out}");
    }
    // PropagateResourceLimits=NONE: the node's own limits.
    let none = Cluster::start(
        EXE,
        Options { nodes: 1, extra_conf: "PropagateResourceLimitsExcept=NOFILE\n".into(), ..Default::default() },
    );
    let out = std::process::Command::new("bash")
        .args(["-c", "ulimit -Sn 123; ulimit -Sc 0; srun bash -c 'ulimit -Sn; ulimit -Sc'"])
        .env("PATH", format!("{}:/usr/bin:/bin", none.bin.display()))
        .env("SLURM_CONF", &none.conf)
        .current_dir(none.path())
        .output()
        .unwrap();
    let node_soft = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).unwrap().0;
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{node_soft}\n0\n"), "NOFILE is not propagated, CORE is");
    // A batch script too.
    let id = c.submit(&["--wrap", "ulimit -Sn; env | grep -c SLURM_RLIMIT_"]);
    c.wait_state(id, &["COMPLETED", "FAILED"], Duration::from_secs(20));
    let want = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).unwrap().0;
    let got = std::fs::read_to_string(c.path().join(format!("slurm-{id}.out"))).unwrap();
    assert_eq!(got, format!("{}\n0\n", if want == u64::MAX { "unlimited".to_string() } else { want.to_string() }));
}

/// A login host: no controller socket to reach (a mount namespace hides `/run/drover`), the
/// key unreadable to users, `drover sackd` handing each user a credential of their own. An
/// ordinary user's sbatch goes over TCP and the job is theirs; the user cannot make their
/// credential say anyone else.
#[test]
fn a_login_host_submits_over_tcp_with_credentials_from_sackd() {
    if !drover_testkit::root_or_skip("a login host is a mount namespace, and its user a test user") {
        return;
    }
    let user = TestUser::create(&format!("drvl{}", std::process::id() % 10000));
    let c = Cluster::start(EXE, Options { nodes: 1, ..Default::default() });
    let home = format!("/home/{}", user.name);
    let script = format!(
        "mount -t tmpfs tmpfs /run/drover || exit 9\n\
         {bin}/drover sackd -f {conf} >sackd.err 2>&1 &\n\
         sackd=$!\n\
         for i in $(seq 100); do [ -S /run/drover/sack.socket ] && break; sleep 0.05; done\n\
         cd {home}\n\
         timeout 60 setpriv --reuid={uid} --regid={gid} --clear-groups env HOME={home} {bin}/sbatch --parsable --wrap 'id -u'\n\
         echo rc=$?\n\
         kill $sackd",
        bin = c.bin.display(),
        conf = c.conf.display(),
        uid = user.uid,
        gid = user.gid,
    );
    let out = std::process::Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .env("SLURM_CONF", &c.conf)
        .current_dir(c.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        text.contains("rc=0"),
        "{text}{err}\n{}",
        std::fs::read_to_string(c.path().join("sackd.err")).unwrap_or_default()
    );
    let id: u32 = text.lines().next().unwrap().trim().parse().unwrap();
    c.wait_state(id, &["COMPLETED"], Duration::from_secs(20));
    let owner = c.ok("squeue", &["-h", "-t", "all", "-j", &id.to_string(), "-o", "%U"]);
    assert_eq!(owner.trim(), user.uid.to_string(), "the job is the user's");
    assert_eq!(std::fs::read_to_string(format!("{home}/slurm-{id}.out")).unwrap(), format!("{}\n", user.uid));
    // It came over TCP with a credential, not through the controller's local socket.
    let log = std::fs::read_to_string(c.path().join("log/controller.log")).unwrap();
    assert!(!log.contains("refused a connection"), "{log}");
    // Without sackd the user is told what is missing, in one line.
    let bare = format!(
        "mount -t tmpfs tmpfs /run/drover || exit 9\n\
         cd {home}; timeout 60 setpriv --reuid={uid} --regid={gid} --clear-groups {bin}/sbatch --wrap true",
        bin = c.bin.display(),
        uid = user.uid,
        gid = user.gid,
    );
    let out = std::process::Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &bare])
        .env("SLURM_CONF", &c.conf)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("sbatch: error: ")
            && err.contains("no authentication daemon answers at /run/drover/sack.socket"),
        "{err}"
    );
}
