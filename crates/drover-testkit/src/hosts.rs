//! Hosts for multi-host tests on one machine: each a network namespace with an address of its
//! own on a private bridge (itself in a namespace the test made, so nothing touches the
//! machine's own network), a hostname of its own (a UTS namespace) and a `/run/drover` of its
//! own (a mount namespace, held by a process of the host for its life): a controller's or
//! agent's local socket on one "host" is not there on another, as across real hosts. The file
//! system is otherwise shared, as `/home` on NFS. Needs root, iproute2 and util-linux.
//!
//! ```text
//!   drv-<tag>-br:  br0 ─┬─ veth ── drv-<tag>-0  10.77.0.1  hostname ctl
//!                       ├─ veth ── drv-<tag>-1  10.77.0.2  hostname c1
//!                       └─ ...
//! ```

use std::process::{Command, Stdio};

/// The private network's /24 (the same in every test: each test's bridge is its own).
const SUBNET: &str = "10.77.0";

pub struct Host {
    pub name: String,
    /// The network namespace.
    pub ns: String,
    pub addr: String,
    /// A process that holds the host's UTS and mount namespaces for as long as the host lives
    /// (every command of the host joins them).
    holder: std::process::Child,
}

pub struct Hosts {
    pub hosts: Vec<Host>,
    bridge_ns: String,
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("ip (iproute2)");
    assert!(out.status.success(), "ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
}

impl Hosts {
    /// Hosts named `names` (10.77.0.1, .2, ... in that order) on one private bridge.
    pub fn new(names: &[&str]) -> Hosts {
        let tag = format!("{}", std::process::id());
        let bridge_ns = format!("drv-{tag}-br");
        let _ = Command::new("ip").args(["netns", "del", &bridge_ns]).output();
        ip(&["netns", "add", &bridge_ns]);
        let mut net = Hosts { hosts: Vec::new(), bridge_ns: bridge_ns.clone() };
        ip(&["-n", &bridge_ns, "link", "add", "br0", "type", "bridge"]);
        ip(&["-n", &bridge_ns, "link", "set", "br0", "up"]);
        for (i, name) in names.iter().enumerate() {
            let ns = format!("drv-{tag}-{i}");
            let _ = Command::new("ip").args(["netns", "del", &ns]).output();
            ip(&["netns", "add", &ns]);
            let addr = format!("{SUBNET}.{}", i + 1);
            // The pair is made in the host's namespace; its other end moves to the bridge's.
            let (inner, outer) = (format!("eth{i}"), format!("vb{i}"));
            ip(&["-n", &ns, "link", "add", &inner, "type", "veth", "peer", "name", &outer, "netns", &bridge_ns]);
            ip(&["-n", &bridge_ns, "link", "set", &outer, "master", "br0"]);
            ip(&["-n", &bridge_ns, "link", "set", &outer, "up"]);
            ip(&["-n", &ns, "addr", "add", &format!("{addr}/24"), "dev", &inner]);
            ip(&["-n", &ns, "link", "set", &inner, "up"]);
            ip(&["-n", &ns, "link", "set", "lo", "up"]);
            // The network namespace is entered without `ip netns exec`, which would mount a
            // fresh /sys over the cgroup hierarchies.
            let holder = Command::new("nsenter")
                .arg(format!("--net=/run/netns/{ns}"))
                .args(["unshare", "--uts", "--mount", "--propagation", "private", "sh", "-c"])
                .arg(format!(
                    "hostname {name} && mkdir -p /run/drover && mount -t tmpfs -o mode=0755 tmpfs /run/drover \
                     && touch /run/drover/.host-{name} && exec sleep infinity"
                ))
                .stdin(Stdio::null())
                .spawn()
                .expect("nsenter and unshare (util-linux)");
            let mark = format!("/proc/{}/root/run/drover/.host-{name}", holder.id());
            let t = std::time::Instant::now();
            while !std::path::Path::new(&mark).exists() {
                assert!(t.elapsed().as_secs() < 10, "host {name} did not come up");
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            net.hosts.push(Host { name: name.to_string(), ns, addr, holder });
        }
        net
    }

    pub fn host(&self, name: &str) -> &Host {
        self.hosts.iter().find(|h| h.name == name).unwrap_or_else(|| panic!("no host {name}"))
    }

    /// `program args` as a process of `host`: in its network namespace, with its hostname and
    /// its `/run/drover` (the same for every process of the host). nsenter execs the program,
    /// so the child's pid is the program's.
    /// Entering a mount namespace moves a process to its root: it starts in `cwd`.
    pub fn command(&self, host: &str, cwd: &std::path::Path, program: &str, args: &[&str]) -> Command {
        self.command_as(host, None, cwd, program, args)
    }

    /// [`Hosts::command`] as the user (uid, gid) `user`: the namespaces are entered as root
    /// and the ids taken after.
    pub fn command_as(
        &self,
        host: &str,
        user: Option<(u32, u32)>,
        cwd: &std::path::Path,
        program: &str,
        args: &[&str],
    ) -> Command {
        let h = self.host(host);
        let mut c = Command::new("nsenter");
        c.arg(format!("--target={}", h.holder.id())).arg(format!("--wd={}", cwd.display()));
        if let Some((uid, gid)) = user {
            c.arg(format!("--setuid={uid}")).arg(format!("--setgid={gid}"));
        }
        c.args(["--mount", "--uts", "--net", "--"]).arg(program).args(args).stdin(Stdio::null());
        c
    }
}

impl Hosts {
    /// Kills every process of every host but the holders (the daemons, their jobs), and waits
    /// until they are gone.
    pub fn kill_all(&self) {
        let mut pids: Vec<i32> = Vec::new();
        for h in &self.hosts {
            if let Ok(out) = Command::new("ip").args(["netns", "pids", &h.ns]).output() {
                pids.extend(
                    String::from_utf8_lossy(&out.stdout)
                        .split_whitespace()
                        .filter_map(|p| p.parse::<i32>().ok())
                        .filter(|p| *p != h.holder.id() as i32),
                );
            }
        }
        for p in &pids {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(*p), nix::sys::signal::Signal::SIGKILL);
        }
        let t = std::time::Instant::now();
        while pids.iter().any(|p| nix::sys::signal::kill(nix::unistd::Pid::from_raw(*p), None).is_ok())
            && t.elapsed().as_secs() < 2
        {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        self.kill_all();
        for h in &mut self.hosts {
            let _ = h.holder.kill();
            let _ = h.holder.wait();
            let _ = Command::new("ip").args(["netns", "del", &h.ns]).output();
        }
        let _ = Command::new("ip").args(["netns", "del", &self.bridge_ns]).output();
    }
}
