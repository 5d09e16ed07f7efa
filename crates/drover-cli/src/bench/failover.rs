//! `drover bench --only failover`: a primary and a standby sharing the state directory
//! (`drover up --controllers 2`); the controller in control is killed (`kill -9`), or frozen
//! (`SIGSTOP`: a host that hangs, or a cut network, where nothing closes its connections),
//! and the time until a submission is accepted again is measured; the victim then comes back
//! as a standby, and the next round hits the other one.

use super::{median, report, BenchArgs, BenchCluster};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::time::{Duration, Instant};

/// Which controller holds the lease, by its `--host` name (`StateSaveLocation/ha/beat`).
fn holder(c: &BenchCluster) -> Option<String> {
    let beat = std::fs::read_to_string(c.dir.path().join("state/ha/beat")).ok()?;
    beat.split_whitespace().nth(1).map(str::to_string)
}

fn pid_file(c: &BenchCluster, host: &str) -> std::path::PathBuf {
    let first = c.cfg.controller_hosts.first().is_some_and(|h| h.name == host);
    c.dir.path().join("run").join(if first { "controller.pid".to_string() } else { format!("controller-{host}.pid") })
}

/// Until process `pid` is in one of `states` (`/proc/PID/stat`), or gone (reaped).
fn wait_until_state(pid: i32, states: &[char]) {
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat.rsplit_once(") ").and_then(|(_, rest)| rest.chars().next());
        match state {
            None => return,
            Some(s) if states.contains(&s) => return,
            _ => std::thread::sleep(Duration::from_millis(2)),
        }
    }
}

/// Until `sbatch --hold` is accepted (seconds since `t`).
fn until_accepted(c: &BenchCluster, t: Instant) -> Result<f64, String> {
    loop {
        if c.cmd("sbatch").args(["--hold", "--wrap", "true"]).status().map_err(|e| e.to_string())?.success() {
            return Ok(t.elapsed().as_secs_f64());
        }
        if t.elapsed() > Duration::from_secs(120) {
            return Err("no controller accepted a submission within 120 s".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts controller `host` again as a standby (it does not ask for control back) and waits
/// until it answers.
fn restart_standby(c: &BenchCluster, host: &str) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let conf = c.dir.path().join("slurm.conf").display().to_string();
    std::env::set_var("DROVER_CONTROLLER_STANDBY", "1");
    let r = crate::up::spawn_daemon(
        &exe,
        &["controller", "-f", &conf, "--host", host],
        &c.dir.path().join(format!("log/controller-{host}.log")),
        &pid_file(c, host),
    );
    std::env::remove_var("DROVER_CONTROLLER_STANDBY");
    r?;
    let addr =
        c.cfg.controller_hosts.iter().zip(c.cfg.controller_addrs()).find(|(h, _)| h.name == host).map(|(_, a)| a);
    let addr = addr.ok_or("no such controller")?;
    let rt = crate::common::runtime();
    let t = Instant::now();
    while rt.block_on(crate::common::ha_status(&c.cfg, &addr)).is_err() {
        if t.elapsed() > Duration::from_secs(30) {
            let log =
                std::fs::read_to_string(c.dir.path().join(format!("log/controller-{host}.log"))).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(5).collect();
            return Err(format!("{host} did not come back within 30 s; its log ends:\n{}", tail.join("\n")));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

pub fn run(a: &BenchArgs) -> Result<(), String> {
    let c = BenchCluster::start_with(a.nodes, 2, a, 2)?;
    if a.queue > 0 {
        let rt = crate::common::runtime();
        rt.block_on(async {
            let cl = c.client().await?;
            let s = drover_proto::spec_to_wire(&super::spec(c.dir.path(), true));
            super::submit_held(&cl, &s, a.queue).await
        })?;
    }
    println!(
        "drover bench: failover, 2 controllers (SlurmctldTimeout {} s), {} pending jobs, {} kills and {} freezes",
        c.cfg.controller_lease().as_secs(),
        a.queue,
        a.runs * 4,
        a.runs * 4
    );
    let (mut killed, mut frozen) = (Vec::new(), Vec::new());
    for round in 0..a.runs * 8 {
        let host = holder(&c).ok_or("no controller holds the lease")?;
        let pid = std::fs::read_to_string(pid_file(&c, &host))
            .ok()
            .and_then(|p| p.trim().parse::<i32>().ok())
            .ok_or_else(|| format!("no pid file for {host}"))?;
        let freeze = round % 2 == 1;
        let t = Instant::now();
        kill(Pid::from_raw(pid), if freeze { Signal::SIGSTOP } else { Signal::SIGKILL }).map_err(|e| e.to_string())?;
        // Until the signal has taken effect: a dying controller may still answer for a moment
        // (and its threads hold its sockets until the last is gone, after the leader shows Z).
        wait_until_state(pid, if freeze { &['T'] } else { &[] });
        let took = until_accepted(&c, t)?;
        if freeze {
            frozen.push(took);
            // The frozen one would stand by once woken; it is replaced instead, as an
            // operator would restart a hung host.
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            wait_until_state(pid, &[]);
        } else {
            killed.push(took);
        }
        restart_standby(&c, &host)?;
    }
    report("failover-kill", median(killed.clone()), "s", &killed, "<= 5");
    report("failover-freeze", median(frozen.clone()), "s", &frozen, "<= 10");
    Ok(())
}
