//! Real clusters for tests: a controller and N node agents started as separate processes of
//! the built `drover` binary, on loopback, in a temporary directory, driven through the same
//! command names a user types (`sbatch`, `squeue`, ...). Processes can be killed (`kill -9`)
//! and restarted individually. Everything is stopped when the [`Cluster`] is dropped.
//!
//! ```text
//!  test ──► Cluster::start ──► drover controller  (StateSaveLocation in tmp)
//!                        └──► drover node × N      (SlurmdSpoolDir in tmp)
//!  test ──► cluster.run("sbatch", ["--wrap", "true"]) ──► Output
//! ```

pub mod attack;
pub mod corpus;
pub mod hosts;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub struct Cluster {
    pub dir: tempfile::TempDir,
    pub conf: PathBuf,
    pub bin: PathBuf,
    exe: PathBuf,
    controller: Option<Child>,
    /// The other controllers of a failover set ([`Options::controllers`]), by index.
    backups: BTreeMap<usize, Child>,
    controllers: usize,
    nodes: BTreeMap<String, Child>,
    pub node_names: Vec<String>,
    cluster: String,
    /// `drover accounting` (with [`Options::accounting`]) and its `slurmdbd.conf`.
    accounting: Option<Child>,
    pub dbd_conf: Option<PathBuf>,
    /// The ports its daemons listen on, held until it is dropped.
    _ports: Vec<PortLock>,
}

pub struct Options {
    pub nodes: u32,
    pub cpus: u32,
    pub mem_mb: u64,
    pub extra_conf: String,
    pub partitions: String,
    /// Replaces the generated `NodeName=` line.
    pub node_line: Option<String>,
    /// Other files beside `slurm.conf` (`gres.conf`, `cgroup.conf`), written before the
    /// daemons start: (name, text).
    pub files: Vec<(String, String)>,
    /// Runs `drover accounting` (SQLite in the cluster's directory) and sends job records
    /// there (`AccountingStorageType=accounting_storage/slurmdbd`).
    pub accounting: bool,
    /// `ClusterName` (default `test`).
    pub cluster: String,
    /// Controllers sharing the state directory (`SlurmctldHost=ctlI(127.0.0.I)`, the first
    /// the primary); 1: one `SlurmctldHost=localhost(127.0.0.1)`.
    pub controllers: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            nodes: 4,
            cpus: 2,
            mem_mb: 2000,
            extra_conf: String::new(),
            partitions: "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n".into(),
            node_line: None,
            files: Vec::new(),
            accounting: false,
            cluster: "test".into(),
            controllers: 1,
        }
    }
}

/// `exe` at `to`, readable and executable by everyone: a hard link where both are on one
/// file system (free, and a link is checked by its own path's permissions), a copy otherwise.
pub fn place_binary(exe: &Path, to: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if std::fs::hard_link(exe, to).is_err() {
        std::fs::copy(exe, to).unwrap_or_else(|e| panic!("copy {} to {}: {e}", exe.display(), to.display()));
    }
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755)).expect("chmod the binary");
}

/// A loopback port held for a cluster's life. Asking the kernel for a free one (bind to
/// port 0, then let go) raced: the port came from the ephemeral range, where any outgoing
/// connection may take it before the daemon binds it, and two tests started at once could be
/// handed the same one, and so share a controller's local socket (`controller-PORT.sock`) and
/// talk to each other's controller. Ports here are below Linux's ephemeral range (32768 up)
/// and each is locked (an `flock` on a file named after it) by the one test process using it.
struct PortLock {
    port: u16,
    _lock: nix::fcntl::Flock<std::fs::File>,
}

fn reserve_port() -> PortLock {
    let dir = std::env::temp_dir().join("drover-test-ports");
    std::fs::create_dir_all(&dir).expect("a directory for port locks");
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let seed = u64::from(std::process::id()).wrapping_mul(2_654_435_761) ^ u64::from(nanos);
    for attempt in 0..4000u64 {
        let port = 20_000 + (seed.wrapping_add(attempt.wrapping_mul(7_919)) % 12_000) as u16;
        let Ok(file) =
            std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(dir.join(port.to_string()))
        else {
            continue;
        };
        let Ok(lock) = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) else { continue };
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return PortLock { port, _lock: lock };
        }
    }
    panic!("no free loopback port between 20000 and 32000")
}

impl Cluster {
    /// Starts a cluster with `exe` (pass `env!("CARGO_BIN_EXE_drover")`) and waits for every
    /// node to register.
    pub fn start(exe: &str, o: Options) -> Cluster {
        let dir = tempfile::Builder::new().prefix("drover-test-").tempdir().expect("a temp dir");
        // Jobs of other users must reach their work dirs below it.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod temp dir");
        let d = dir.path().display().to_string();
        let ctl_port = reserve_port();
        let port = ctl_port.port;
        let mut ports = vec![ctl_port];
        let node_line = o.node_line.clone().unwrap_or_else(|| {
            format!(
                "NodeName=node[1-{}] NodeHostname=localhost NodeAddr=127.0.0.1 CPUs={} RealMemory={} State=UNKNOWN",
                o.nodes, o.cpus, o.mem_mb
            )
        });
        let mut acct_conf = String::new();
        let mut dbd_conf = None;
        if o.accounting {
            let dbd_lock = reserve_port();
            let dbd_port = dbd_lock.port;
            ports.push(dbd_lock);
            acct_conf = format!(
                "AccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageHost=127.0.0.1\n\
                 AccountingStoragePort={dbd_port}\n"
            );
            let path = dir.path().join("slurmdbd.conf");
            std::fs::write(
                &path,
                format!(
                    "DbdAddr=127.0.0.1\nDbdPort={dbd_port}\nAuthType=auth/slurm\n\
                     StorageType=accounting_storage/sqlite\nStorageLoc={d}/acct.db\n"
                ),
            )
            .expect("write slurmdbd.conf");
            dbd_conf = Some(path);
        }
        // auth/slurm with a key of this cluster's own (beside slurm.conf, as Slurm keeps it).
        drover_proto::auth::write_new_key(&dir.path().join("slurm.key")).expect("write slurm.key");
        let hosts = if o.controllers <= 1 {
            "SlurmctldHost=localhost(127.0.0.1)\n".to_string()
        } else {
            (1..=o.controllers).map(|i| format!("SlurmctldHost=ctl{i}(127.0.0.{i})\n")).collect()
        };
        let conf_text = format!(
            "ClusterName={cluster}\n{hosts}SlurmctldPort={port}\n\
             AuthType=auth/slurm\nCredType=cred/slurm\n\
             StateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool/%n\nSlurmdTimeout=10\nKillWait=2\n\
             MinJobAge=300\nReturnToService=2\nMaxJobCount=1000000\n{acct_conf}{extra}{node_line}\n{parts}",
            cluster = o.cluster,
            extra = o.extra_conf,
            parts = o.partitions,
        );
        let conf = dir.path().join("slurm.conf");
        std::fs::write(&conf, conf_text).expect("write slurm.conf");
        for (name, text) in &o.files {
            std::fs::write(dir.path().join(name), text).expect("write a config file");
        }
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).expect("bin dir");
        std::fs::create_dir_all(dir.path().join("log")).expect("log dir");
        // The cluster runs its own copy of the binary: a checkout in a private home (0700)
        // keeps `target/` out of the test users' reach, and their commands and jobs run it.
        let own = bin.join("drover");
        place_binary(Path::new(exe), &own);
        // Every command, from the binary's own table (`drover install-links`).
        let st = Command::new(&own).arg("install-links").arg(&bin).status().expect("drover install-links");
        assert!(st.success(), "drover install-links {}", bin.display());
        let node_names: Vec<String> = (1..=o.nodes).map(|i| format!("node{i}")).collect();
        let mut c = Cluster {
            dir,
            conf,
            bin,
            exe: own,
            controller: None,
            backups: BTreeMap::new(),
            controllers: o.controllers.max(1),
            nodes: BTreeMap::new(),
            node_names: node_names.clone(),
            cluster: o.cluster.clone(),
            accounting: None,
            dbd_conf,
            _ports: ports,
        };
        if c.dbd_conf.is_some() {
            c.start_accounting();
        }
        c.start_controller();
        for i in 1..c.controllers {
            c.start_backup(i);
        }
        for n in &node_names {
            c.start_node(n);
        }
        c.wait_nodes_up(Duration::from_secs(30));
        if c.dbd_conf.is_some() {
            c.wait_registered();
        }
        c
    }

    /// Until the controller has registered its cluster with accounting: accounts added
    /// before get no association on it (as in Slurm), so tests add them after.
    fn wait_registered(&self) {
        self.wait_until("the cluster to be registered with accounting", Duration::from_secs(30), || {
            let out = self.run("sacctmgr", &["-n", "-P", "show", "cluster", "format=cluster"]);
            String::from_utf8_lossy(&out.stdout).lines().any(|l| l == self.cluster)
        });
    }

    fn log(&self, name: &str) -> std::fs::File {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("log").join(name))
            .expect("log file")
    }

    fn spawn(&self, args: &[&str], log: &str) -> Child {
        let f = self.log(log);
        let mut cmd = Command::new(&self.exe);
        cmd.args(args).stdin(Stdio::null()).stdout(f.try_clone().expect("dup log")).stderr(f);
        cmd.spawn().expect("start a drover process")
    }

    pub fn start_controller(&mut self) {
        let conf = self.conf.display().to_string();
        let child = if self.controllers > 1 {
            self.spawn(&["controller", "-f", &conf, "--host", "ctl1"], "controller.log")
        } else {
            self.spawn(&["controller", "-f", &conf], "controller.log")
        };
        self.controller = Some(child);
    }

    /// Starts controller `index` (1, 2, ...: `ctl2`, `ctl3`, ...) of a failover set; it logs
    /// to `log/controller-ctlN.log`.
    pub fn start_backup(&mut self, index: usize) {
        let conf = self.conf.display().to_string();
        let host = format!("ctl{}", index + 1);
        let child = self.spawn(&["controller", "-f", &conf, "--host", &host], &format!("controller-{host}.log"));
        self.backups.insert(index, child);
    }

    /// The pid of controller `index` (0: the primary), if it runs.
    pub fn controller_pid(&self, index: usize) -> Option<i32> {
        let c = if index == 0 { self.controller.as_ref() } else { self.backups.get(&index) };
        c.map(|c| c.id() as i32)
    }

    /// `kill -9` of controller `index` (0: the primary).
    pub fn kill_controller_at(&mut self, index: usize) {
        if index == 0 {
            return self.kill_controller();
        }
        if let Some(mut c) = self.backups.remove(&index) {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn start_node(&mut self, name: &str) {
        let conf = self.conf.display().to_string();
        let child = self.spawn(&["node", "-f", &conf, "-N", name], &format!("node-{name}.log"));
        self.nodes.insert(name.to_string(), child);
    }

    /// Starts `drover accounting` (a cluster made with [`Options::accounting`]) and waits
    /// until it answers.
    pub fn start_accounting(&mut self) {
        let conf = self.dbd_conf.as_ref().expect("a cluster with accounting").display().to_string();
        let child = self.spawn(&["accounting", "-f", &conf], "accounting.log");
        self.accounting = Some(child);
        let port = self.dbd_port().unwrap_or(6819);
        self.wait_until("accounting to listen", Duration::from_secs(30), || {
            std::net::TcpStream::connect(format!("127.0.0.1:{port}")).is_ok()
        });
    }

    /// `kill -9` of `drover accounting` (its local socket file is left, as a crash leaves it).
    pub fn kill_accounting(&mut self) {
        if let Some(mut c) = self.accounting.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn dbd_port(&self) -> Option<u16> {
        let text = std::fs::read_to_string(self.dbd_conf.as_ref()?).ok()?;
        text.lines().find_map(|l| l.strip_prefix("DbdPort=")).and_then(|p| p.trim().parse().ok())
    }

    /// Waits up to `timeout` for the controller to exit by itself (it refused to start,
    /// say); its exit status, or `None` if it still runs.
    pub fn controller_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + timeout;
        while std::time::Instant::now() < deadline {
            if let Some(st) = self.controller.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                self.controller = None;
                return Some(st);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// `kill -9` of the controller.
    pub fn kill_controller(&mut self) {
        if let Some(mut c) = self.controller.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// `kill -9` of a node agent (its jobs' supervisors keep running).
    pub fn kill_node(&mut self, name: &str) {
        if let Some(mut c) = self.nodes.remove(name) {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Runs a command by its Slurm name, as a user would, with this cluster's `SLURM_CONF`.
    pub fn run(&self, prog: &str, args: &[&str]) -> Output {
        self.command(prog, args).output().expect("run a command")
    }

    /// A command as a user of this cluster runs it: its commands first on `PATH` (jobs
    /// inherit it, so `srun` in a batch script is this cluster's), its `SLURM_CONF`.
    pub fn command(&self, prog: &str, args: &[&str]) -> Command {
        let mut cmd = Command::new(self.bin.join(prog));
        let path = std::env::var("PATH").unwrap_or_default();
        cmd.args(args)
            .env("PATH", format!("{}:{path}", self.bin.display()))
            .env("SLURM_CONF", &self.conf)
            .env_remove("SLURM_JOB_ID")
            .env_remove("SLURM_JOBID")
            .current_dir(self.dir.path());
        cmd
    }

    /// stdout of a command that must succeed.
    pub fn ok(&self, prog: &str, args: &[&str]) -> String {
        let out = self.run(prog, args);
        assert!(
            out.status.success(),
            "{prog} {args:?} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    /// Submits `sbatch ARGS --parsable` and returns the job id.
    pub fn submit(&self, args: &[&str]) -> u32 {
        let mut a = vec!["--parsable"];
        a.extend_from_slice(args);
        self.ok("sbatch", &a).trim().parse().expect("a job id")
    }

    /// The job's state as `squeue` prints `%T` (any state).
    pub fn state(&self, job: u32) -> String {
        let out = self.run("squeue", &["-h", "-t", "all", "-j", &job.to_string(), "-o", "%T"]);
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    pub fn wait_state(&self, job: u32, want: &[&str], timeout: Duration) -> String {
        let t = Instant::now();
        loop {
            let s = self.state(job);
            if want.contains(&s.as_str()) {
                return s;
            }
            assert!(t.elapsed() < timeout, "job {job} is {s}, not {want:?}, after {timeout:?}\n{}", self.logs());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn wait_until(&self, what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
        let t = Instant::now();
        while !f() {
            assert!(t.elapsed() < timeout, "timed out waiting for {what}\n{}", self.logs());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn wait_nodes_up(&self, timeout: Duration) {
        self.wait_until("all nodes to register", timeout, || {
            let out = self.run("sinfo", &["-h", "-N", "-o", "%N %t"]);
            let text = String::from_utf8_lossy(&out.stdout).to_string();
            out.status.success() && text.lines().count() >= self.node_names.len() && !text.contains('*')
        });
    }

    pub fn logs(&self) -> String {
        let mut s = String::new();
        if let Ok(rd) = std::fs::read_dir(self.dir.path().join("log")) {
            for e in rd.flatten() {
                let text = std::fs::read_to_string(e.path()).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(15).collect();
                s.push_str(&format!("--- {}\n", e.file_name().to_string_lossy()));
                for l in tail.into_iter().rev() {
                    s.push_str(l);
                    s.push('\n');
                }
            }
        }
        s
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Pids of live job supervisors.
    pub fn supervisor_pids(&self) -> Vec<i32> {
        let mut pids = Vec::new();
        if let Ok(nodes) = std::fs::read_dir(self.dir.path().join("spool")) {
            for n in nodes.flatten() {
                if let Ok(jobs) = std::fs::read_dir(n.path()) {
                    for j in jobs.flatten() {
                        if let Some(pid) =
                            std::fs::read_to_string(j.path().join("pid")).ok().and_then(|p| p.trim().parse().ok())
                        {
                            if nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok() {
                                pids.push(pid);
                            }
                        }
                    }
                }
            }
        }
        pids
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for (_, mut c) in std::mem::take(&mut self.nodes) {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.kill_controller();
        for (_, mut c) in std::mem::take(&mut self.backups) {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.kill_accounting();
        if let Some(port) = self.dbd_port() {
            let _ = std::fs::remove_file(drover_model::dbd_conf::local_socket(port));
        }
        // Supervisors run in their own sessions: stop everything under them, then them.
        let mut killed = Vec::new();
        for pid in self.supervisor_pids() {
            for d in descendants(pid) {
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(d), nix::sys::signal::Signal::SIGKILL);
                killed.push(d);
            }
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
            killed.push(pid);
        }
        // Their cgroups go too, once the processes in them are gone (a group is removed only
        // when empty, and a killed process takes a moment to leave it).
        let t = Instant::now();
        while killed.iter().any(|p| nix::sys::signal::kill(nix::unistd::Pid::from_raw(*p), None).is_ok())
            && t.elapsed() < Duration::from_secs(2)
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        for n in &self.node_names {
            let dir = drover_model::cgroup_conf::node_dir(&self.cluster, &self.conf, n);
            drover_node::cgroup::remove_node_dirs(Path::new("/sys/fs/cgroup"), &dir);
        }
        if std::env::var_os("DROVER_KEEP_TEST_DIR").is_some() {
            let p = self.dir.path().to_path_buf();
            eprintln!("keeping {}", p.display());
            std::mem::forget(std::mem::replace(&mut self.dir, tempfile::tempdir().expect("temp dir")));
        }
    }
}

/// A Unix user made for a test (`useradd -m`), removed with its home when dropped. Needs root.
pub struct TestUser {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

impl TestUser {
    pub fn create(name: &str) -> TestUser {
        let _ = Command::new("userdel").arg("-r").arg(name).output();
        let st = Command::new("useradd").args(["-m", "-s", "/bin/bash", name]).status().expect("useradd");
        assert!(st.success(), "useradd {name}");
        let u = nix::unistd::User::from_name(name).expect("getpwnam").expect("the user just added");
        TestUser { name: name.into(), uid: u.uid.as_raw(), gid: u.gid.as_raw() }
    }
}

impl Drop for TestUser {
    fn drop(&mut self) {
        let _ = Command::new("userdel").arg("-r").arg(&self.name).output();
    }
}

/// A Unix group added for a test (its members given at creation), removed when dropped.
/// Needs root.
pub struct TestGroup {
    pub name: String,
    pub gid: u32,
}

impl TestGroup {
    pub fn create(name: &str, members: &[&str]) -> TestGroup {
        let _ = Command::new("groupdel").arg(name).output();
        let st = Command::new("groupadd").arg(name).status().expect("groupadd");
        assert!(st.success(), "groupadd {name}");
        for m in members {
            let st = Command::new("usermod").args(["-a", "-G", name, m]).status().expect("usermod");
            assert!(st.success(), "usermod -a -G {name} {m}");
        }
        let g = nix::unistd::Group::from_name(name).expect("getgrnam").expect("the group just added");
        TestGroup { name: name.into(), gid: g.gid.as_raw() }
    }
}

impl Drop for TestGroup {
    fn drop(&mut self) {
        let _ = Command::new("groupdel").arg(&self.name).output();
    }
}

/// A Unix user with this name and GECOS ("Proper Name"), added if there is none (and then
/// removed when dropped); an existing one is used as it is. Needs root.
pub struct NamedUser {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    added: bool,
}

impl NamedUser {
    pub fn ensure(name: &str, gecos: &str) -> NamedUser {
        let mut added = false;
        if nix::unistd::User::from_name(name).ok().flatten().is_none() {
            let st =
                Command::new("useradd").args(["-M", "-c", gecos, "-s", "/bin/bash", name]).status().expect("useradd");
            assert!(st.success(), "useradd {name}");
            added = true;
        }
        let u = nix::unistd::User::from_name(name).expect("getpwnam").expect("the user");
        NamedUser { name: name.into(), uid: u.uid.as_raw(), gid: u.gid.as_raw(), added }
    }
}

impl Drop for NamedUser {
    fn drop(&mut self) {
        if self.added {
            let _ = Command::new("userdel").arg(&self.name).output();
        }
    }
}

impl Cluster {
    /// Sends records to this cluster's `drover accounting` as a controller does (jobs of the
    /// past, node events), and waits until they are stored.
    pub fn record_accounting(&self, recs: drover_proto::v1::AcctRecords) {
        let port = self.dbd_port().expect("a cluster with accounting");
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        rt.block_on(async move {
            let cfg = drover_model::conf::parse_file(&self.conf).expect("the cluster's slurm.conf");
            let auth = drover_proto::auth::Auth::new(&cfg.auth, &cfg.path, true).expect("the cluster's key");
            let ch = drover_proto::auth::connect_authenticated(&format!("127.0.0.1:{port}"), &auth, "accounting")
                .await
                .expect("connect to accounting");
            let mut c = drover_proto::v1::accounting_client::AccountingClient::new(ch);
            c.record(recs).await.expect("accounting takes the records");
        });
    }

    /// Runs a command as `u` (its uid, gid, HOME and USER), in `dir`.
    pub fn run_as(&self, u: &TestUser, prog: &str, args: &[&str], dir: &Path) -> Output {
        self.run_as_ids(&u.name, u.uid, u.gid, prog, args, dir)
    }

    /// Runs a command as the user `name` with these ids, in `dir`.
    pub fn run_as_ids(&self, name: &str, uid: u32, gid: u32, prog: &str, args: &[&str], dir: &Path) -> Output {
        use std::os::unix::process::CommandExt;
        let mut cmd = self.command(prog, args);
        cmd.uid(uid).gid(gid).current_dir(dir).env("HOME", format!("/home/{name}")).env("USER", name);
        cmd.output().expect("run as user")
    }
}

/// Every live descendant of `root`.
pub fn descendants(root: i32) -> Vec<i32> {
    let mut parent = std::collections::HashMap::new();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            let Some((_, rest)) = stat.rsplit_once(')') else {
                continue;
            };
            if let Some(pp) = rest.split_whitespace().nth(1).and_then(|p| p.parse::<i32>().ok()) {
                parent.insert(pid, pp);
            }
        }
    }
    parent
        .keys()
        .copied()
        .filter(|&p| {
            let mut cur = p;
            for _ in 0..64 {
                match parent.get(&cur) {
                    Some(&pp) if pp == root => return true,
                    Some(&pp) if pp > 1 => cur = pp,
                    _ => return false,
                }
            }
            false
        })
        .collect()
}

/// Pids of processes whose command line contains `needle`.
pub fn processes_with(needle: &str) -> Vec<i32> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            if let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) {
                let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
                if cmd.contains(needle) {
                    out.push(pid);
                }
            }
        }
    }
    out
}

/// Pids of processes whose argv[0] is `name` (set with `exec -a NAME`): unlike
/// [`processes_with`], not the shells or `srun`s whose command lines merely mention it.
pub fn processes_named(name: &str) -> Vec<i32> {
    processes_with(name)
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| c.split(|b| *b == 0).next() == Some(name.as_bytes()))
                .unwrap_or(false)
        })
        .collect()
}

/// Whether a test that cannot run here must fail rather than skip: `DROVER_TEST_STRICT=1`,
/// which `scripts/test` sets once it has installed what the suite needs.
pub fn strict() -> bool {
    std::env::var("DROVER_TEST_STRICT").is_ok_and(|v| v == "1")
}

/// A test that cannot run here says why and returns (the caller returns after it); under
/// [`strict`] it fails instead, so that a missing package or privilege never reads as a pass.
pub fn skip(why: &str) {
    assert!(!strict(), "cannot run: {why} (DROVER_TEST_STRICT=1: scripts/test runs every test)");
    eprintln!("skipped: {why}");
}

/// Whether this test runs as root; if not, it is [`skip`]ped with `why`.
pub fn root_or_skip(why: &str) -> bool {
    let root = nix::unistd::getuid().is_root();
    if !root {
        skip(why);
    }
    root
}

/// `rel` below the repository's `testdata/` (captured Slurm output, real job scripts,
/// hostlist vectors, workload traces: `testdata/README.md`). Tests read no file outside the
/// checkout.
pub fn testdata(rel: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata")).join(rel)
}

/// A sample of real Slurm 22.05's output from `testdata/compat/slurm-22.05/`, for golden tests.
pub fn compat(name: &str) -> String {
    let p = testdata("compat/slurm-22.05").join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A capture of real Slurm's output (see `testdata/captures/README.md`): the
/// command line, its exit status, stdout and stderr.
#[derive(Debug, Clone)]
pub struct Capture {
    pub name: String,
    pub cmd: Vec<String>,
    pub rc: i32,
    pub out: String,
    pub err: String,
}

impl Capture {
    /// Capture `name` of the directory `dir` (its `INDEX.tsv` lines: name, exit status,
    /// command line), the command line split into words by `split`.
    pub fn load(dir: &Path, name: &str, split: impl Fn(&str) -> Vec<String>) -> Capture {
        let index = std::fs::read_to_string(dir.join("INDEX.tsv")).expect("INDEX.tsv");
        let line = index.lines().find(|l| l.split('\t').next() == Some(name)).unwrap_or_else(|| panic!("{name}"));
        let f: Vec<&str> = line.split('\t').collect();
        let read = |ext: &str| std::fs::read_to_string(dir.join(format!("{name}.{ext}"))).unwrap_or_default();
        Capture {
            name: name.into(),
            cmd: split(f[2]),
            rc: f[1].parse().expect("an exit status"),
            out: read("out"),
            err: read("err"),
        }
    }

    /// Every capture name in `dir` starting with `prefix`, in the index's order.
    pub fn names(dir: &Path, prefix: &str) -> Vec<String> {
        let index = std::fs::read_to_string(dir.join("INDEX.tsv")).expect("INDEX.tsv");
        index.lines().filter_map(|l| l.split('\t').next()).filter(|n| n.starts_with(prefix)).map(String::from).collect()
    }
}

/// A command line into its words, double quotes grouping.
pub fn words(cmd: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in cmd.chars() {
        match c {
            '"' => quoted = !quoted,
            ' ' if !quoted => out.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    out.push(cur);
    out.into_iter().filter(|w| !w.is_empty()).collect()
}

/// The lab's accounts and users (the captures' README): physics, theory under it, chem
/// (Fairshare=2); alice in physics, bob in chem and theory, root in physics and chem.
pub const LAB_ACCOUNTS: &[&str] = &[
    "add account physics Description=physics Organization=science",
    "add account theory parent=physics Description=theory Organization=science",
    "add account chem Fairshare=2 Description=chemistry Organization=science",
    "add user alice Account=physics",
    "add user bob Account=chem",
    "add user bob Account=theory",
    "add user root Account=physics,chem",
];

impl Cluster {
    /// Runs a capture's command here: Err describes how stdout, stderr or the exit status
    /// differ from real Slurm's.
    pub fn matches(&self, cap: &Capture) -> Result<(), String> {
        let args: Vec<&str> = cap.cmd[1..].iter().map(String::as_str).collect();
        let got = self.run(&cap.cmd[0], &args);
        let (out, err) = (String::from_utf8_lossy(&got.stdout), String::from_utf8_lossy(&got.stderr));
        if out != cap.out || err != cap.err || got.status.code() != Some(cap.rc) {
            return Err(format!(
                "{}: {:?}\n--- want (exit {}):\n{}{}\n--- got (exit {:?}):\n{out}{err}",
                cap.name,
                cap.cmd,
                cap.rc,
                cap.out,
                cap.err,
                got.status.code()
            ));
        }
        Ok(())
    }

    /// Adds `accounts` under root with sacctmgr (with `settings`, `GrpTRES=cpu=2` say), root
    /// a user of each, and waits until the controller has them (a job may charge the last).
    pub fn root_in_accounts(&self, accounts: &[&str], settings: &[&str]) {
        let mut args = vec!["-i", "add", "account"];
        args.extend(accounts);
        args.extend(settings);
        self.ok("sacctmgr", &args);
        self.ok("sacctmgr", &["-i", "add", "user", "root", &format!("Account={}", accounts.join(","))]);
        let last = accounts.last().copied().unwrap_or("root");
        self.wait_until("the associations to reach the controller", Duration::from_secs(20), || {
            self.run("sbatch", &["--test-only", "-A", last, "--wrap", "true"]).status.success()
        });
    }

    /// Adds the lab's accounts and users with sacctmgr (the cluster is registered by then:
    /// see `wait_registered`).
    pub fn add_lab_accounts(&self) {
        for cmd in LAB_ACCOUNTS {
            let mut args = vec!["-i"];
            args.extend(cmd.split(' '));
            self.ok("sacctmgr", &args);
        }
    }
}
