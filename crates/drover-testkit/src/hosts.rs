//! Hosts for multi-host tests on one machine: each a network namespace with an address of its
//! own on a private bridge (itself in a namespace the test made, so nothing touches the
//! machine's own network), a hostname of its own (a UTS namespace) and a `/run/drover` of its
//! own (a mount namespace): a controller's or agent's local socket on one "host" is not there
//! on another, as across real hosts. The file system is otherwise shared, as `/home` on NFS.
//! Needs root and iproute2.
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
            net.hosts.push(Host { name: name.to_string(), ns, addr });
        }
        net
    }

    pub fn host(&self, name: &str) -> &Host {
        self.hosts.iter().find(|h| h.name == name).unwrap_or_else(|| panic!("no host {name}"))
    }

    /// `program args` as a process of `host`: in its network namespace, with its hostname and
    /// its own `/run/drover`. Every process this starts replaces the shell before it (`exec`),
    /// so the child's pid is the program's.
    pub fn command(&self, host: &str, program: &str, args: &[&str]) -> Command {
        let h = self.host(host);
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &h.ns, "unshare", "--uts", "--mount", "--propagation", "private", "sh", "-c"])
            .arg(format!(
                "hostname {} && mkdir -p /run/drover && mount -t tmpfs -o mode=0755 tmpfs /run/drover && exec \"$@\"",
                h.name
            ))
            .arg("sh")
            .arg(program)
            .args(args)
            .stdin(Stdio::null());
        c
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for h in &self.hosts {
            // Whatever still runs there goes with its namespace's last reference; kill it first.
            if let Ok(out) = Command::new("ip").args(["netns", "pids", &h.ns]).output() {
                for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                    let _ = Command::new("kill").args(["-9", pid]).output();
                }
            }
            let _ = Command::new("ip").args(["netns", "del", &h.ns]).output();
        }
        let _ = Command::new("ip").args(["netns", "del", &self.bridge_ns]).output();
    }
}
