//! Drover across hosts: a controller host, three compute hosts and a login host, each with
//! its own network namespace, address, hostname and `/run` (see `drover_testkit::hosts`), on
//! a private bridge. Node agents find their node by hostname; commands on the login host reach
//! the controller over TCP with credentials; srun there gets its tasks' I/O from the compute
//! hosts; job environments name the real hosts. Needs root.

use drover_testkit::hosts::Hosts;
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_drover");

/// The node that runs on host `h` (`c1`: `n1` where nodes are named apart from their hosts).
fn node_of(h: &str, configless: bool) -> String {
    if configless {
        h.to_string()
    } else {
        h.replace('c', "n")
    }
}

struct Lab {
    net: Hosts,
    dir: tempfile::TempDir,
    bin: PathBuf,
    conf: PathBuf,
    daemons: Vec<Child>,
    /// Only the controller's host has `slurm.conf`; the others fetch it.
    configless: bool,
}

impl Lab {
    fn start(configless: bool) -> Lab {
        let net = Hosts::new(&["ctl", "c1", "c2", "c3", "login"]);
        let dir = tempfile::Builder::new().prefix("drover-hosts-").tempdir().unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let d = dir.path().display().to_string();
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(dir.path().join("log")).unwrap();
        drover_testkit::place_binary(Path::new(EXE), &bin.join("drover"));
        for c in ["sbatch", "srun", "squeue", "sinfo", "scontrol", "scancel"] {
            std::os::unix::fs::symlink("drover", bin.join(c)).unwrap();
        }
        drover_proto::auth::write_new_key(&dir.path().join("slurm.key")).unwrap();
        // Nodes named apart from their hosts (NodeHostname) where not configless: an agent
        // finds its node by its host's name either way.
        let nodes: String = ["c1", "c2", "c3"]
            .iter()
            .map(|h| {
                format!(
                    "NodeName={} NodeHostname={h} NodeAddr={} CPUs=2 RealMemory=1000 State=UNKNOWN\n",
                    node_of(h, configless),
                    net.host(h).addr
                )
            })
            .collect();
        let conf = dir.path().join("slurm.conf");
        std::fs::write(
            &conf,
            format!(
                "ClusterName=multi\nSlurmctldHost=ctl({ctl})\nSlurmctldPort=6817\n{params}\
                 AuthType=auth/slurm\nCredType=cred/slurm\n\
                 StateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool/%n\n\
                 SlurmctldLogFile={d}/log/controller.log\nSlurmdLogFile={d}/log/node-%n.log\n\
                 SlurmdTimeout=10\nKillWait=2\nReturnToService=2\n{nodes}\
                 PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n",
                ctl = net.host("ctl").addr,
                params = if configless { "SlurmctldParameters=enable_configless\n" } else { "" },
            ),
        )
        .unwrap();
        let mut lab = Lab { net, dir, bin, conf, daemons: Vec::new(), configless };
        let conf_s = lab.conf.display().to_string();
        lab.daemon("ctl", &["controller", "-f", &conf_s]);
        let server = format!("{}:6817", lab.net.host("ctl").addr);
        let key = lab.dir.path().join("slurm.key").display().to_string();
        let from = |extra: &[&str]| -> Vec<String> {
            let mut a: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
            if configless {
                a.extend(["--conf-server".into(), server.clone(), "--key-file".into(), key.clone()]);
            } else {
                a.extend(["-f".into(), conf_s.clone()]);
            }
            a
        };
        // No -N: each agent finds its node by its host's name.
        for n in ["c1", "c2", "c3"] {
            let args = from(&["node"]);
            lab.daemon(n, &args.iter().map(String::as_str).collect::<Vec<_>>());
        }
        // The login host's users get their credentials (and, configless, the configuration)
        // from sackd.
        let args = from(&["sackd"]);
        lab.daemon("login", &args.iter().map(String::as_str).collect::<Vec<_>>());
        let t = Instant::now();
        loop {
            let o = lab.run("login", "sinfo", &["-h", "-N", "-o", "%N %t"]);
            let out = String::from_utf8_lossy(&o.stdout).to_string();
            let want: String =
                ["c1", "c2", "c3"].iter().map(|h| format!("{} idle\n", node_of(h, configless))).collect();
            if out == want {
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "{out}{}\n{}",
                String::from_utf8_lossy(&o.stderr),
                lab.logs()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        lab
    }

    fn daemon(&mut self, host: &str, args: &[&str]) {
        let child = self
            .net
            .command(host, self.dir.path(), &self.bin.join("drover").display().to_string(), args)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(self.dir.path().join(format!("log/{host}.err"))).unwrap())
            .spawn()
            .unwrap();
        self.daemons.push(child);
    }

    /// A command as root on `host` runs it, in the shared work directory.
    fn run(&self, host: &str, prog: &str, args: &[&str]) -> Output {
        self.command(host, prog, args).output().unwrap()
    }

    fn command(&self, host: &str, prog: &str, args: &[&str]) -> std::process::Command {
        self.command_as(host, None, prog, args)
    }

    fn command_as(&self, host: &str, user: Option<(u32, u32)>, prog: &str, args: &[&str]) -> std::process::Command {
        let work = self.dir.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&work, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let mut c = self.net.command_as(host, user, &work, &self.bin.join(prog).display().to_string(), args);
        c.env("PATH", format!("{}:/usr/bin:/bin:/usr/sbin:/sbin", self.bin.display())).env_remove("SLURM_CONF");
        // Configless: the host's commands find what its agent or sackd fetched.
        if !self.configless {
            c.env("SLURM_CONF", &self.conf);
        }
        c
    }

    fn ok(&self, host: &str, prog: &str, args: &[&str]) -> String {
        let o = self.run(host, prog, args);
        assert!(
            o.status.success(),
            "{prog} {args:?} on {host}: {}\n{}",
            String::from_utf8_lossy(&o.stderr),
            self.logs()
        );
        String::from_utf8_lossy(&o.stdout).to_string()
    }

    fn logs(&self) -> String {
        let mut s = String::new();
        for e in std::fs::read_dir(self.dir.path().join("log")).unwrap().flatten() {
            s.push_str(&format!(
                "--- {}\n{}",
                e.file_name().to_string_lossy(),
                std::fs::read_to_string(e.path()).unwrap_or_default()
            ));
        }
        s
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for c in &mut self.daemons {
            let _ = c.kill();
            let _ = c.wait();
        }
        // The jobs' processes first, then their groups (named by the configuration each agent
        // read: a configless one's fetched copy).
        self.net.kill_all();
        let cfg = drover_model::conf::parse_file(&self.conf).unwrap();
        let read = if self.configless { PathBuf::from("/run/drover/conf/slurm.conf") } else { self.conf.clone() };
        for h in ["c1", "c2", "c3"] {
            let node = drover_node::cgroup::node_dir(&cfg.cluster_name, &read, &node_of(h, self.configless));
            drover_node::cgroup::remove_node_dirs(Path::new("/sys/fs/cgroup"), &node);
        }
    }
}

#[test]
fn a_cluster_of_hosts_runs_jobs_from_a_login_host() {
    if !drover_testkit::root_or_skip("hosts are network, UTS and mount namespaces") {
        return;
    }
    let lab = Lab::start(false);
    // srun on the login host: tasks on three hosts, their output back over the network.
    let out =
        lab.ok("login", "srun", &["-N3", "bash", "-c", "echo $(hostname) $SLURMD_NODENAME $SLURM_SRUN_COMM_HOST"]);
    let mut lines: Vec<&str> = out.lines().collect();
    lines.sort();
    let login = lab.net.host("login").addr.clone();
    assert_eq!(lines, [format!("c1 n1 {login}"), format!("c2 n2 {login}"), format!("c3 n3 {login}")]);
    // A batch job from the login host: its script runs on its first host, its steps on all.
    let id = lab.ok(
        "login",
        "sbatch",
        &["--parsable", "-N2", "--wrap", "echo $SLURM_SUBMIT_HOST $SLURM_JOB_NODELIST; srun hostname | sort"],
    );
    let id = id.trim().to_string();
    let t = Instant::now();
    loop {
        let st = lab.ok("login", "squeue", &["-h", "-t", "all", "-j", &id, "-o", "%T"]);
        if st.trim() == "COMPLETED" {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "job {id} is {st}\n{}", lab.logs());
        std::thread::sleep(Duration::from_millis(100));
    }
    let output = std::fs::read_to_string(lab.dir.path().join(format!("work/slurm-{id}.out"))).unwrap();
    assert_eq!(output, "login n[1-2]\nc1\nc2\n");
    let show = lab.ok("login", "scontrol", &["show", "job", &id]);
    assert!(show.contains("BatchHost=n1"), "{show}");
    assert!(show.contains("AllocNode:Sid=login:"), "{show}");
    // The controller's host has no login socket on the others: commands there came over TCP.
    assert!(!lab.net.host("login").addr.is_empty());
}

/// Configless: only the controller's host has `slurm.conf`. Agents and the login host's
/// sackd fetch it (`--conf-server`) with the key they hold; commands on the login host find
/// the fetched copy; an ordinary user there submits with sackd's credential.
#[test]
fn a_configless_cluster_runs_from_the_controllers_configuration() {
    if !drover_testkit::root_or_skip("hosts are network, UTS and mount namespaces") {
        return;
    }
    if std::path::Path::new("/etc/slurm/slurm.conf").exists() {
        drover_testkit::skip("this machine has /etc/slurm/slurm.conf, which commands would read before a fetched one");
        return;
    }
    let user = drover_testkit::TestUser::create(&format!("drvc{}", std::process::id() % 10000));
    let lab = Lab::start(true);
    let out = lab.ok("login", "srun", &["-N3", "hostname"]);
    let mut lines: Vec<&str> = out.lines().collect();
    lines.sort();
    assert_eq!(lines, ["c1", "c2", "c3"]);
    // An ordinary user on the login host: a credential of their own from sackd, over TCP.
    let o = lab
        .command_as("login", Some((user.uid, user.gid)), "sbatch", &["--parsable", "-N1", "--wrap", "id -un; hostname"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}\n{}", String::from_utf8_lossy(&o.stderr), lab.logs());
    let id = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let t = Instant::now();
    while lab.ok("login", "squeue", &["-h", "-t", "all", "-j", &id, "-o", "%T"]).trim() != "COMPLETED" {
        assert!(t.elapsed() < Duration::from_secs(30), "{}", lab.logs());
        std::thread::sleep(Duration::from_millis(100));
    }
    let output = std::fs::read_to_string(lab.dir.path().join(format!("work/slurm-{id}.out"))).unwrap();
    assert_eq!(output, format!("{}\nc1\n", user.name));
    // The job's supervisor followed its node's configuration (the fetched copy), not the
    // controller's path for it: no cgroup was made under the controller's.
    let theirs = drover_node::cgroup::node_dir("multi", &lab.conf, "c1");
    for h in ["memory", "freezer", "unified", ""] {
        let d = Path::new("/sys/fs/cgroup").join(h).join("drover").join(&theirs);
        assert!(!d.exists(), "{} exists", d.display());
    }
    // Commands that find no configuration ask the controller SLURM_CONF_SERVER names.
    let rm = lab.net.command("login", lab.dir.path(), "rm", &["/run/drover/conf/slurm.conf"]).output().unwrap();
    assert!(rm.status.success(), "{}", String::from_utf8_lossy(&rm.stderr));
    let o = lab.command_as("login", Some((user.uid, user.gid)), "sinfo", &["-h", "-o", "%D %t"]).output().unwrap();
    assert!(!o.status.success(), "no configuration, no SLURM_CONF_SERVER: {}", String::from_utf8_lossy(&o.stdout));
    let o = lab
        .command_as("login", Some((user.uid, user.gid)), "sinfo", &["-h", "-o", "%D %t"])
        .env("SLURM_CONF_SERVER", &lab.net.host("ctl").addr)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout), "3 idle\n", "{}", String::from_utf8_lossy(&o.stderr));
    // A controller that does not hand out its configuration says so.
    let plain = Lab::start(false);
    let o = plain
        .net
        .command(
            "c1",
            plain.dir.path(),
            &plain.bin.join("drover").display().to_string(),
            &[
                "node",
                "--conf-server",
                &format!("{}:6817", plain.net.host("ctl").addr),
                "--key-file",
                &plain.dir.path().join("slurm.key").display().to_string(),
            ],
        )
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("configless mode is off"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// torch.distributed across hosts, as sites run it under Slurm: a 2-node batch job of two
/// tasks a node, its ranks started by srun (Slurm's variables name them), then by torchrun
/// (one a node, two workers each); rendezvous at the first node's address, gloo over the
/// hosts' network; DDP keeps the four ranks' weights in step. Uses Debian's PyTorch
/// (python3-torch: torch's PyPI wheels bring gigabytes of CUDA libraries).
#[test]
fn torch_distributed_trains_across_two_hosts_with_gloo() {
    if !drover_testkit::root_or_skip("hosts are network, UTS and mount namespaces") {
        return;
    }
    if std::process::Command::new("/usr/bin/python3")
        .args(["-c", "import torch"])
        .output()
        .map_or(true, |o| !o.status.success())
    {
        drover_testkit::skip("PyTorch is not installed: apt-get install python3-torch");
        return;
    }
    let lab = Lab::start(false);
    let work = lab.dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::copy(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/torch_ddp.py"), work.join("ddp.py"))
        .unwrap();
    // gloo talks over the interface named; the hosts' names do not resolve, so the first
    // node's address is its NodeAddr. Debian's torchrun (1.13 on Python 3.11) needs its
    // output redirected (--redirects/--tee 0 fail there: Python 3.11 changed IntFlag).
    std::fs::write(
        work.join("train.sh"),
        r#"#!/bin/bash
#SBATCH -N2 --ntasks-per-node=2
head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)
export MASTER_ADDR=$(scontrol show node "$head" | grep -oP 'NodeAddr=\K\S+')
export GLOO_SOCKET_IFNAME=$(ip -o -4 addr show scope global | awk '{print $2; exit}')
MASTER_PORT=29500 srun bash -c 'GLOO_SOCKET_IFNAME=$(ip -o -4 addr show scope global | awk "{print \$2; exit}") exec python3 ddp.py srun'
srun -n2 --ntasks-per-node=1 bash -c 'GLOO_SOCKET_IFNAME=$(ip -o -4 addr show scope global | awk "{print \$2; exit}")   exec torchrun --nnodes=$SLURM_NNODES --nproc_per_node=2 --node_rank=$SLURM_NODEID   --master_addr=$MASTER_ADDR --master_port=29501 --redirects 1 --tee 1 ddp.py torchrun'
"#,
    )
    .unwrap();
    let id = lab.ok("login", "sbatch", &["--parsable", "train.sh"]).trim().to_string();
    let t = Instant::now();
    loop {
        let st = lab.ok("login", "squeue", &["-h", "-t", "all", "-j", &id, "-o", "%T"]);
        if !matches!(st.trim(), "PENDING" | "RUNNING" | "COMPLETING" | "CONFIGURING") {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(120), "job {id} is {st}\n{}", lab.logs());
        std::thread::sleep(Duration::from_millis(200));
    }
    let output = std::fs::read_to_string(work.join(format!("slurm-{id}.out"))).unwrap_or_default();
    for how in ["srun", "torchrun"] {
        let want = format!("ddp {how}: world=4 sum=6 in_sync=True hosts=c1,c2\n");
        assert!(output.contains(&want), "{want}{output}\n{}", lab.logs());
    }
    assert_eq!(lab.ok("login", "squeue", &["-h", "-t", "all", "-j", &id, "-o", "%T"]).trim(), "COMPLETED", "{output}");
}
