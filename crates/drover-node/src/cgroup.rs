//! Job and step cgroups, for cgroup v1 and v2 (detected, or chosen by `cgroup.conf`).
//!
//! ```text
//!  v1: <mount>/{memory,freezer,cpuset?,devices?}/drover/<cluster>/<node>/job_<id>/step_<batch|N>
//!  v2: <mount>/drover/<cluster>/<node>/job_<id>/step_<batch|N>   (cpuset, memory, pids enabled)
//! ```
//!
//! `<cluster>` is the cluster's name and a digest of its `slurm.conf` path, so that several
//! clusters on one host (`drover up`, parallel tests) never share a job's cgroup.
//!
//! Every process of a step joins its step's cgroup before it execs, so the step's processes
//! are found (and killed) however they fork; the job's cgroup holds the job's limits on the
//! node: its cores (`ConstrainCores`), its memory (`ConstrainRAMSpace`, `AllowedRAMSpace`,
//! swap), and its GPUs (`ConstrainDevices`: the node's GPU device files the job does not hold
//! are denied, by `devices.deny` on v1 and an eBPF device program on v2, see [`crate::devbpf`]). Out-of-memory kills are read from the memory controller.
//! The supervisor calls this module; it is single-threaded and runs as root.

use drover_model::cgroup_conf::{CgroupConf, CgroupPlugin};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

/// A usable hierarchy and what to constrain with it.
#[derive(Debug, Clone)]
pub struct Cgroups {
    pub version: Version,
    pub conf: CgroupConf,
    /// v1: the controller dirs used (memory and freezer always); v2: the unified root.
    roots: Vec<(String, PathBuf)>,
    /// `<cluster>/<node>` below `drover/`.
    node: String,
    /// Why `ConstrainDevices` cannot be honoured here, if it cannot.
    devices_off: Option<String>,
}

pub use drover_model::cgroup_conf::node_dir;

/// What the job (or step) may use on this node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Limits {
    /// Host CPU ids (`ConstrainCores`).
    pub cpus: Option<Vec<u32>>,
    /// Bytes of memory, and of memory plus swap.
    pub mem: Option<u64>,
    pub mem_swap: Option<u64>,
    /// Character devices (major, minor) to deny (`ConstrainDevices`: v1 `devices.deny`, v2
    /// an eBPF device program).
    pub deny: Vec<(u64, u64)>,
}

fn write(path: &Path, value: &str) -> Result<(), String> {
    std::fs::write(path, value).map_err(|e| format!("writing {value} to {}: {e}", path.display()))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

impl Cgroups {
    /// The hierarchy `conf` asks for, checked writable; `Err` says why confinement is off.
    /// `node` is [`node_dir`]'s.
    pub fn open(conf: CgroupConf, node: &str) -> Result<Cgroups, String> {
        let mount = PathBuf::from(&conf.mountpoint);
        let unified = mount.join("cgroup.controllers").exists();
        let version = match conf.plugin {
            CgroupPlugin::V2 => Version::V2,
            CgroupPlugin::V1 => Version::V1,
            CgroupPlugin::Autodetect if unified => Version::V2,
            CgroupPlugin::Autodetect if mount.join("memory").is_dir() => Version::V1,
            CgroupPlugin::Autodetect => return Err(format!("no cgroup hierarchy at {}", mount.display())),
        };
        let mut roots = Vec::new();
        match version {
            Version::V2 => {
                if !unified {
                    return Err(format!("{} is not a cgroup v2 mount", mount.display()));
                }
                let have = read(&mount.join("cgroup.controllers"));
                // Tracking and killing need no controller on v2; limits need theirs.
                let mut want = Vec::new();
                if conf.constrain_ram {
                    want.push("memory");
                }
                if conf.constrain_cores {
                    want.push("cpuset");
                }
                for w in &want {
                    if !have.split_whitespace().any(|h| h == *w) {
                        return Err(format!("the cgroup v2 controller `{w}` is not available at {}", mount.display()));
                    }
                }
                roots.push(("unified".to_string(), mount.clone()));
            }
            Version::V1 => {
                let mut ctrls = vec!["memory", "freezer"];
                if conf.constrain_cores {
                    ctrls.push("cpuset");
                }
                if conf.constrain_devices {
                    ctrls.push("devices");
                }
                for c in ctrls {
                    let dir = mount.join(c);
                    if !dir.join("cgroup.procs").exists() {
                        return Err(format!("the cgroup v1 controller `{c}` is not mounted at {}", dir.display()));
                    }
                    roots.push((c.to_string(), dir));
                }
                // CPU accounting where the host mounts it (usage for sstat); not required.
                let acct = mount.join("cpuacct");
                if acct.join("cpuacct.usage").exists() {
                    roots.push(("cpuacct".to_string(), acct));
                }
            }
        }
        // v2 devices are refused by an eBPF program: can this host load one?
        let devices_off = match (version, conf.constrain_devices) {
            (Version::V2, true) => crate::devbpf::probe().err(),
            _ => None,
        };
        let cg = Cgroups { version, conf, roots, node: node.to_string(), devices_off };
        // Writable? The node's own directory is created now.
        let parts: Vec<&str> = std::iter::once("drover").chain(cg.node.split('/')).collect();
        for (ctrl, root) in &cg.roots {
            cg.make_path(ctrl, root, &parts)?;
        }
        Ok(cg)
    }

    /// One line for the node's log and `scontrol -d show node`.
    pub fn describe(&self) -> String {
        let v = match self.version {
            Version::V1 => "cgroup/v1",
            Version::V2 => "cgroup/v2",
        };
        let c = &self.conf;
        let yn = |b: bool| if b { "yes" } else { "no" };
        let mut s = format!(
            "on: {v} at {} (ConstrainCores={} ConstrainRAMSpace={} ConstrainSwapSpace={} ConstrainDevices={})",
            c.mountpoint,
            yn(c.constrain_cores),
            yn(c.constrain_ram),
            yn(c.constrain_swap),
            yn(c.constrain_devices)
        );
        if let Some(why) = &self.devices_off {
            s.push_str(&format!("; devices are not isolated: {why}"));
        }
        s
    }

    /// Whether jobs' device files are confined (`ConstrainDevices` and a way to do it).
    pub fn devices_confined(&self) -> bool {
        self.conf.constrain_devices && self.devices_off.is_none()
    }

    /// Creates `parts` below `root`, enabling what nested groups need on the way.
    fn make_path(&self, ctrl: &str, root: &Path, parts: &[&str]) -> Result<PathBuf, String> {
        let mut dir = root.to_path_buf();
        for p in parts {
            let parent = dir.clone();
            if self.version == Version::V2 {
                // Children get the controllers only if the parent hands them down.
                let mut enable = vec!["+memory", "+pids"];
                if self.conf.constrain_cores {
                    enable.push("+cpuset");
                }
                let have = read(&parent.join("cgroup.controllers"));
                let list: Vec<&str> =
                    enable.into_iter().filter(|e| have.split_whitespace().any(|h| h == &e[1..])).collect();
                if !list.is_empty() {
                    let _ = write(&parent.join("cgroup.subtree_control"), &list.join(" "));
                }
            }
            dir = dir.join(p);
            match std::fs::create_dir(&dir) {
                Ok(()) => {
                    if ctrl == "memory" && self.version == Version::V1 {
                        let _ = write(&dir.join("memory.use_hierarchy"), "1");
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(format!("cannot create {}: {e}", dir.display())),
            }
            if ctrl == "cpuset" {
                // A v1 cpuset is unusable until it has CPUs and memory nodes. Another agent
                // or supervisor may have made the directory a moment ago and not filled it
                // yet: whoever finds it empty fills it.
                for f in ["cpuset.cpus", "cpuset.mems"] {
                    if read(&dir.join(f)).trim().is_empty() {
                        write(&dir.join(f), read(&parent.join(f)).trim())?;
                    }
                }
            }
        }
        Ok(dir)
    }

    /// Creates the job's and the step's groups (`unit`: `batch` or the step id) with the
    /// job's limits.
    pub fn group(&self, job: u32, unit: &str, limits: &Limits) -> Result<Group, String> {
        let job_part = format!("job_{job}");
        let step_part = format!("step_{unit}");
        let mut g = Group { version: self.version, leaves: Vec::new(), jobs: Vec::new() };
        let base: Vec<&str> = std::iter::once("drover").chain(self.node.split('/')).collect();
        for (ctrl, root) in &self.roots {
            let job_dir = self.make_path(ctrl, root, &[base.as_slice(), &[job_part.as_str()]].concat())?;
            self.apply(ctrl, &job_dir, limits)?;
            // Below the job's group just made: its parents need no second walk.
            let leaf = self.make_path(ctrl, &job_dir, &[step_part.as_str()])?;
            if ctrl == "unified" && self.devices_confined() && !limits.deny.is_empty() {
                // On the step's group, which is made once: programs on the job's would pile up.
                crate::devbpf::deny_devices(&leaf, &limits.deny)?;
            }
            g.jobs.push((ctrl.clone(), job_dir));
            g.leaves.push((ctrl.clone(), leaf));
        }
        Ok(g)
    }

    /// The groups of a job's step (`unit` as in [`Cgroups::group`]) as they are, made by
    /// nobody: to kill what a dead supervisor left in them.
    pub fn existing(&self, job: u32, unit: &str) -> Group {
        let mut g = Group { version: self.version, leaves: Vec::new(), jobs: Vec::new() };
        for (ctrl, root) in &self.roots {
            let mut job_dir = root.join("drover");
            for p in self.node.split('/') {
                job_dir.push(p);
            }
            job_dir.push(format!("job_{job}"));
            g.leaves.push((ctrl.clone(), job_dir.join(format!("step_{unit}"))));
            g.jobs.push((ctrl.clone(), job_dir));
        }
        g
    }

    fn apply(&self, ctrl: &str, dir: &Path, l: &Limits) -> Result<(), String> {
        let c = &self.conf;
        match (self.version, ctrl) {
            (Version::V1, "cpuset") | (Version::V2, "unified") if c.constrain_cores => {
                if let Some(cpus) = &l.cpus {
                    write(&dir.join("cpuset.cpus"), &drover_model::gres::fmt_indices(cpus))?;
                }
            }
            _ => {}
        }
        if c.constrain_ram && (ctrl == "memory" || ctrl == "unified") {
            if let Some(m) = l.mem {
                match self.version {
                    Version::V1 => {
                        write(&dir.join("memory.limit_in_bytes"), &m.to_string())?;
                        let sw = dir.join("memory.memsw.limit_in_bytes");
                        if c.constrain_swap && sw.exists() {
                            write(&sw, &l.mem_swap.unwrap_or(m).to_string())?;
                        }
                    }
                    Version::V2 => {
                        write(&dir.join("memory.max"), &m.to_string())?;
                        let sw = dir.join("memory.swap.max");
                        if c.constrain_swap && sw.exists() {
                            write(&sw, &l.mem_swap.unwrap_or(m).saturating_sub(m).to_string())?;
                        }
                    }
                }
            }
        }
        if ctrl == "devices" && !l.deny.is_empty() {
            // Under a whitelist (a container's, a systemd slice's) whose wildcard covers a
            // device to deny, the kernel ignores the denial: the whitelist is rewritten.
            if let Some(rules) = v1_device_rules(&read(&dir.join("devices.list")), &l.deny, char_devices) {
                write(&dir.join("devices.deny"), "a")?;
                for r in rules {
                    write(&dir.join("devices.allow"), &r)?;
                }
            }
            for (maj, min) in &l.deny {
                write(&dir.join("devices.deny"), &format!("c {maj}:{min} rwm"))?;
            }
        }
        Ok(())
    }
}

/// One line of a v1 `devices.list`: type (`a`, `b`, `c`), major, minor (`None`: `*`), access.
fn device_rule(line: &str) -> Option<(char, Option<u64>, Option<u64>, &str)> {
    let mut w = line.split_whitespace();
    let kind = w.next()?.chars().next()?;
    let (maj, min) = w.next()?.split_once(':')?;
    let num = |s: &str| if s == "*" { Some(None) } else { s.parse().ok().map(Some) };
    Some((kind, num(maj)?, num(min)?, w.next()?))
}

/// The v1 device exceptions that deny `deny` (character devices) and allow the rest of
/// `list` (the job group's `devices.list`, inherited from its parent), to be written after
/// `a` is denied; `None` where a plain `devices.deny` suffices (the default `a *:* rwm`, or no
/// wildcard covers a denied device). The kernel removes only an exception that matches a
/// denial exactly, so under `c 195:* rwm` (Docker's rule for GPUs) denying `c 195:1` alone
/// changes nothing: such a wildcard is expanded to the character devices `devices` lists (those
/// under /dev: type, major, minor; looked up only then) it covers, less the denied ones. Rules
/// that only allow `mknod` are kept: they open nothing.
pub(crate) fn v1_device_rules(
    list: &str,
    deny: &[(u64, u64)],
    devices: impl FnOnce() -> Vec<(char, u64, u64)>,
) -> Option<Vec<String>> {
    let rules: Vec<_> = list.lines().filter_map(device_rule).collect();
    if rules.iter().any(|r| r.0 == 'a') {
        return None;
    }
    let opens = |access: &str| access.contains('r') || access.contains('w');
    let covers = |r: &(char, Option<u64>, Option<u64>, &str), maj: u64, min: u64| {
        r.0 == 'c' && r.1.is_none_or(|m| m == maj) && r.2.is_none_or(|m| m == min) && opens(r.3)
    };
    let wildcard = |r: &(char, Option<u64>, Option<u64>, &str)| r.1.is_none() || r.2.is_none();
    if !rules.iter().any(|r| wildcard(r) && deny.iter().any(|&(a, b)| covers(r, a, b))) {
        return None;
    }
    let devices = devices();
    let mut out = Vec::new();
    for r in &rules {
        if !deny.iter().any(|&(a, b)| covers(r, a, b)) {
            let num = |n: Option<u64>| n.map_or("*".to_string(), |n| n.to_string());
            out.push(format!("{} {}:{} {}", r.0, num(r.1), num(r.2), r.3));
        } else if wildcard(r) {
            for &(kind, maj, min) in &devices {
                if kind == 'c' && covers(r, maj, min) && !deny.contains(&(maj, min)) {
                    let line = format!("c {maj}:{min} {}", r.3);
                    if !out.contains(&line) {
                        out.push(line);
                    }
                }
            }
        }
    }
    Some(out)
}

/// The character devices under /dev: (type, major, minor).
fn char_devices() -> Vec<(char, u64, u64)> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::from("/dev")];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let Ok(m) = std::fs::symlink_metadata(e.path()) else { continue };
            if m.is_dir() {
                stack.push(e.path());
            } else if m.file_type().is_char_device() {
                out.push(('c', nix::sys::stat::major(m.rdev()), nix::sys::stat::minor(m.rdev())));
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// A step's cgroup (and its job's), in every hierarchy used.
#[derive(Debug, Clone)]
pub struct Group {
    version: Version,
    leaves: Vec<(String, PathBuf)>,
    jobs: Vec<(String, PathBuf)>,
}

impl Group {
    /// The `cgroup.procs` files a task writes itself into (as `0`) before it execs.
    pub fn procs_files(&self) -> Vec<PathBuf> {
        self.leaves.iter().map(|(_, d)| d.join("cgroup.procs")).collect()
    }

    fn dir(&self, ctrl: &str) -> Option<&PathBuf> {
        self.leaves.iter().find(|(c, _)| c == ctrl).map(|(_, d)| d)
    }

    fn tracking(&self) -> Option<&PathBuf> {
        self.dir("memory").or_else(|| self.dir("unified"))
    }

    /// Whether the group holds every process of the step (then [`Group::pids`] lists them all).
    pub fn tracks(&self) -> bool {
        self.tracking().is_some()
    }

    /// Every process of the step.
    pub fn pids(&self) -> Vec<i32> {
        self.tracking()
            .map(|d| read(&d.join("cgroup.procs")).lines().filter_map(|l| l.trim().parse().ok()).collect())
            .unwrap_or_default()
    }

    /// Kills every process of the step, frozen first on v1 so none can fork away.
    pub fn kill_all(&self) {
        // An empty group has nothing to kill and nothing that could fork into it (a process
        // joins only from inside or by being written in, and the step's own tasks write
        // themselves in before they exec). Freezing it anyway is not free: on v1 each freeze
        // and thaw flips a kernel static key, patching kernel text on every CPU.
        if self.tracks() && self.pids().is_empty() {
            return;
        }
        match self.version {
            Version::V2 => {
                if let Some(d) = self.dir("unified") {
                    if write(&d.join("cgroup.kill"), "1").is_ok() {
                        return;
                    }
                }
                self.kill_listed();
            }
            Version::V1 => {
                let freezer = self.dir("freezer").cloned();
                if let Some(f) = &freezer {
                    let _ = write(&f.join("freezer.state"), "FROZEN");
                }
                self.kill_listed();
                if let Some(f) = &freezer {
                    let _ = write(&f.join("freezer.state"), "THAWED");
                }
            }
        }
    }

    fn kill_listed(&self) {
        for pid in self.pids() {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
        }
    }

    /// Out-of-memory kills in the step so far.
    pub fn oom_kills(&self) -> u64 {
        let (d, file) = match self.version {
            Version::V1 => (self.dir("memory"), "memory.oom_control"),
            Version::V2 => (self.dir("unified"), "memory.events"),
        };
        let Some(d) = d else { return 0 };
        read(&d.join(file))
            .lines()
            .find_map(|l| l.strip_prefix("oom_kill ").and_then(|v| v.trim().parse().ok()))
            .unwrap_or(0)
    }

    /// CPU time (seconds) of everything that ran in the step's group, where the hierarchy
    /// counts it (v2 `cpu.stat`, v1 `cpuacct.usage`).
    pub fn cpu_secs(&self) -> Option<f64> {
        match self.version {
            Version::V2 => read(&self.dir("unified")?.join("cpu.stat"))
                .lines()
                .find_map(|l| l.strip_prefix("usage_usec ").and_then(|v| v.trim().parse::<u64>().ok()))
                .map(|us| us as f64 / 1e6),
            Version::V1 => {
                read(&self.dir("cpuacct")?.join("cpuacct.usage")).trim().parse::<u64>().ok().map(|ns| ns as f64 / 1e9)
            }
        }
    }

    /// Removes the step's groups, and the job's when no other step uses them any more.
    pub fn remove(&self) {
        for (_, d) in self.leaves.iter().chain(self.jobs.iter()) {
            for _ in 0..50 {
                match std::fs::remove_dir(d) {
                    Ok(()) => break,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                    // A job's group still holding another step's group, or one that another
                    // supervisor of the job still uses.
                    Err(_) if self.jobs.iter().any(|(_, j)| j == d) => break,
                    Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
                }
            }
        }
    }
}

/// The major and minor numbers of a character device.
pub fn char_device(path: &str) -> Option<(u64, u64)> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let m = std::fs::metadata(path).ok()?;
    if !m.file_type().is_char_device() {
        return None;
    }
    let rdev = m.rdev();
    Some((nix::sys::stat::major(rdev), nix::sys::stat::minor(rdev)))
}

/// `cgroup.conf` beside `slurm.conf` (Slurm's defaults when there is none).
pub fn conf_for(slurm_conf: &Path) -> Result<CgroupConf, String> {
    let path = slurm_conf.parent().unwrap_or(Path::new("/")).join("cgroup.conf");
    match std::fs::read_to_string(&path) {
        Ok(text) => CgroupConf::parse(&text),
        Err(_) => Ok(CgroupConf::default()),
    }
}

/// The host's online CPUs (`/sys/devices/system/cpu/online`: `0-3,8`).
fn host_cpus() -> Vec<u32> {
    // The CPUs this process may run on (a container or a cgroup may allow fewer than are
    // online); what the node's CPU ids are folded onto.
    if let Ok(set) = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)) {
        let allowed: Vec<u32> =
            (0..nix::sched::CpuSet::count() as u32).filter(|&c| set.is_set(c as usize).unwrap_or(false)).collect();
        if !allowed.is_empty() {
            return allowed;
        }
    }
    let text = read(Path::new("/sys/devices/system/cpu/online"));
    let mut out = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
            out.extend(a..=b);
        }
    }
    if out.is_empty() {
        out.push(0);
    }
    out
}

/// A node's CPU ids as the host's: the same on a real node; on a host that runs several
/// simulated nodes (`drover up`), folded onto the CPUs the host has.
pub fn host_cpu_ids(ids: &[u32]) -> Vec<u32> {
    let host = host_cpus();
    let mut out: Vec<u32> = ids.iter().map(|i| host[*i as usize % host.len()]).collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The device files of the node's GPUs, by device index (`gres.conf` order).
pub fn gpu_files(slurm_conf: &Path, node: &str, spool: &Path) -> Vec<String> {
    // What NVML found (AutoDetect=nvml), when the agent found anything.
    if let Ok(t) = std::fs::read_to_string(spool.join(crate::gres::DETECTED)) {
        return t.lines().map(String::from).collect();
    }
    let path = slurm_conf.parent().unwrap_or(Path::new("/")).join("gres.conf");
    let Ok(gc) =
        std::fs::read_to_string(path).map_err(|e| e.to_string()).and_then(|t| drover_model::gres::GresConf::parse(&t))
    else {
        return Vec::new();
    };
    gc.for_node(node).into_iter().filter(|l| l.name == "gpu").flat_map(|l| l.files.iter().cloned()).collect()
}

/// Removes a node's (empty) directories below `drover/` in every hierarchy: when its agent
/// stops, or a test cluster goes.
pub fn remove_node_dirs(mountpoint: &Path, node_dir: &str) {
    let Ok(rd) = std::fs::read_dir(mountpoint) else { return };
    let mut roots: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
    roots.push(mountpoint.to_path_buf());
    for root in roots {
        let top = root.join("drover").join(node_dir);
        // Depth first: job and step groups the supervisors could not remove, then the node's.
        let mut stack = vec![top.clone()];
        let mut order = Vec::new();
        while let Some(d) = stack.pop() {
            if let Ok(rd) = std::fs::read_dir(&d) {
                stack.extend(rd.flatten().filter(|e| e.file_type().is_ok_and(|t| t.is_dir())).map(|e| e.path()));
            }
            order.push(d);
        }
        for d in order.iter().rev() {
            let _ = std::fs::remove_dir(d);
        }
        if let Some(cluster) = top.parent() {
            let _ = std::fs::remove_dir(cluster);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::v1_device_rules;

    /// Docker's whitelist for a container given `c 195:* rmw`: denying GPU 1 rewrites it, with
    /// the wildcard expanded to the GPUs and nvidiactl it covers, less GPU 1.
    #[test]
    fn a_wildcard_whitelist_is_expanded_less_the_denied_devices() {
        let list = "c *:* m\nb *:* m\nc 1:3 rwm\nc 136:* rwm\nc 195:* rwm\n";
        let devs = [('c', 1, 3), ('c', 136, 0), ('c', 195, 0), ('c', 195, 1), ('c', 195, 255)];
        let rules = v1_device_rules(list, &[(195, 1)], || devs.to_vec()).unwrap();
        assert_eq!(
            rules,
            ["c *:* m", "b *:* m", "c 1:3 rwm", "c 136:* rwm", "c 195:0 rwm", "c 195:255 rwm"],
            "mknod-only rules and unrelated wildcards stay; the denied device is gone"
        );
    }

    /// Where a plain `devices.deny` works, nothing is rewritten: the default (everything
    /// allowed, exceptions denied) and a whitelist that lists the devices one by one.
    #[test]
    fn a_plain_denial_is_left_to_the_kernel_where_it_works() {
        let unread = || -> Vec<(char, u64, u64)> { panic!("/dev is read only to expand a wildcard") };
        assert_eq!(v1_device_rules("a *:* rwm\n", &[(195, 1)], unread), None);
        assert_eq!(v1_device_rules("c 195:0 rwm\nc 195:1 rwm\n", &[(195, 1)], unread), None);
        assert_eq!(v1_device_rules("c 195:* rwm\n", &[], unread), None);
    }
}
