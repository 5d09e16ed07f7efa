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

struct Lab {
    net: Hosts,
    dir: tempfile::TempDir,
    bin: PathBuf,
    conf: PathBuf,
    daemons: Vec<Child>,
}

impl Lab {
    fn start() -> Lab {
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
        let nodes: String = ["c1", "c2", "c3"]
            .iter()
            .map(|n| format!("NodeName={n} NodeAddr={} CPUs=2 RealMemory=1000 State=UNKNOWN\n", net.host(n).addr))
            .collect();
        let conf = dir.path().join("slurm.conf");
        std::fs::write(
            &conf,
            format!(
                "ClusterName=multi\nSlurmctldHost=ctl({ctl})\nSlurmctldPort=6817\n\
                 AuthType=auth/slurm\nCredType=cred/slurm\n\
                 StateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool/%n\n\
                 SlurmctldLogFile={d}/log/controller.log\nSlurmdLogFile={d}/log/node-%n.log\n\
                 SlurmdTimeout=10\nKillWait=2\nReturnToService=2\n{nodes}\
                 PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n",
                ctl = net.host("ctl").addr
            ),
        )
        .unwrap();
        let mut lab = Lab { net, dir, bin, conf, daemons: Vec::new() };
        let conf_s = lab.conf.display().to_string();
        lab.daemon("ctl", &["controller", "-f", &conf_s]);
        // No -N: each agent finds its node by its host's name.
        for n in ["c1", "c2", "c3"] {
            lab.daemon(n, &["node", "-f", &conf_s]);
        }
        let t = Instant::now();
        loop {
            let o = lab.run("login", "sinfo", &["-h", "-N", "-o", "%N %t"]);
            let out = String::from_utf8_lossy(&o.stdout).to_string();
            if out == "c1 idle\nc2 idle\nc3 idle\n" {
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
            .command(host, &self.bin.join("drover").display().to_string(), args)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(self.dir.path().join(format!("log/{host}.err"))).unwrap())
            .spawn()
            .unwrap();
        self.daemons.push(child);
    }

    /// A command as a user on `host` runs it, in the shared work directory.
    fn run(&self, host: &str, prog: &str, args: &[&str]) -> Output {
        let work = self.dir.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        self.net
            .command(host, &self.bin.join(prog).display().to_string(), args)
            .env("SLURM_CONF", &self.conf)
            .env("PATH", format!("{}:/usr/bin:/bin:/usr/sbin:/sbin", self.bin.display()))
            .current_dir(&work)
            .output()
            .unwrap()
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
        let cfg = drover_model::conf::parse_file(&self.conf).unwrap();
        for n in ["c1", "c2", "c3"] {
            let node = drover_node::cgroup::node_dir(&cfg.cluster_name, &self.conf, n);
            // Jobs' processes die with their hosts' namespaces (Hosts' drop); their groups go.
            std::thread::sleep(Duration::from_millis(50));
            drover_node::cgroup::remove_node_dirs(Path::new("/sys/fs/cgroup"), &node);
        }
    }
}

#[test]
fn a_cluster_of_hosts_runs_jobs_from_a_login_host() {
    if !drover_testkit::root_or_skip("hosts are network, UTS and mount namespaces") {
        return;
    }
    let lab = Lab::start();
    // srun on the login host: tasks on three hosts, their output back over the network.
    let out =
        lab.ok("login", "srun", &["-N3", "bash", "-c", "echo $(hostname) $SLURMD_NODENAME $SLURM_SRUN_COMM_HOST"]);
    let mut lines: Vec<&str> = out.lines().collect();
    lines.sort();
    let login = lab.net.host("login").addr.clone();
    assert_eq!(lines, [format!("c1 c1 {login}"), format!("c2 c2 {login}"), format!("c3 c3 {login}")]);
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
    assert_eq!(output, "login c[1-2]\nc1\nc2\n");
    let show = lab.ok("login", "scontrol", &["show", "job", &id]);
    assert!(show.contains("BatchHost=c1"), "{show}");
    assert!(show.contains("AllocNode:Sid=login:"), "{show}");
    // The controller's host has no login socket on the others: commands there came over TCP.
    assert!(!lab.net.host("login").addr.is_empty());
}
