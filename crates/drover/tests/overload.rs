//! Overload: with `SlurmctldParameters=rl_enable,...` a user who floods the controller with
//! RPCs is told to back off (their commands slow to the refill rate, and the log says so in
//! Slurm's words), while other users and root go on at full speed. Needs root (a test user).

use drover_testkit::{Cluster, Options, TestUser};
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_drover");

#[test]
fn a_user_over_the_rpc_rate_limit_is_told_to_back_off_and_no_one_else_is() {
    if !drover_testkit::root_or_skip("needs root to create a test user") {
        return;
    }
    let pid = std::process::id() % 10000;
    let flood = TestUser::create(&format!("drvr{pid}"));
    let c = Cluster::start(
        EXE,
        Options {
            nodes: 1,
            extra_conf: "SlurmctldParameters=rl_enable,rl_bucket_size=3,rl_refill_rate=1,rl_refill_period=1\n".into(),
            ..Default::default()
        },
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    // Root: never held back.
    let t = Instant::now();
    for _ in 0..8 {
        c.ok("squeue", &["-h"]);
    }
    let root_took = t.elapsed();
    assert!(root_took < Duration::from_secs(3), "root was held back: {root_took:?}");
    // The user: 3 at once, then one a second.
    let t = Instant::now();
    for _ in 0..8 {
        let out = c.run_as(&flood, "squeue", &["-h"], dir.path());
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let user_took = t.elapsed();
    assert!(user_took >= Duration::from_secs(4), "5 over a bucket of 3 at 1/s: {user_took:?}");
    let log = std::fs::read_to_string(c.path().join("log/controller.log")).unwrap();
    assert!(
        log.contains(&format!(
            "RPC rate limit exceeded by uid {} with REQUEST_JOB_INFO, telling to back off",
            flood.uid
        )),
        "{log}"
    );
    // Meanwhile root was not: its commands are as quick as before.
    let t = Instant::now();
    c.ok("squeue", &["-h"]);
    assert!(t.elapsed() < Duration::from_secs(1));
}
