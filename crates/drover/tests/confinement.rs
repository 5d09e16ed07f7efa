//! cgroup confinement on a real cluster: cores, memory (an out-of-memory kill ends the job
//! `OUT_OF_MEMORY`) and GPU devices, on whichever hierarchy this host can give (v1, or v2 with
//! its controllers); where none is writable, jobs still run and the node says why. Needs root.

use drover_testkit::{Cluster, Options};
use std::time::Duration;

const EXE: &str = env!("CARGO_BIN_EXE_drover");

/// Whether this process can make cgroups with a memory controller (v1, or v2 offering it).
fn cgroups_writable() -> bool {
    let probe = |dir: &str| {
        let p = std::path::Path::new(dir).join(format!("drover-probe-{}", std::process::id()));
        let ok = std::fs::create_dir(&p).is_ok();
        let _ = std::fs::remove_dir(&p);
        ok
    };
    let v2 = std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers").is_ok_and(|c| c.contains("memory"));
    (v2 && probe("/sys/fs/cgroup")) || probe("/sys/fs/cgroup/memory")
}

fn out(c: &Cluster, id: u32) -> String {
    std::fs::read_to_string(c.path().join(format!("slurm-{id}.out"))).unwrap_or_default()
}

/// Two fake GPU device files, as real character devices the test makes. They go below
/// `/dev` (devtmpfs honours device nodes; `$TMPDIR` is often mounted `nodev`, and a node
/// there opens as "Permission denied" whatever the cgroup allows).
fn fake_gpus() -> tempfile::TempDir {
    let devdir = tempfile::Builder::new().prefix("drover-test-gpus-").tempdir_in("/dev").unwrap_or_else(|e| {
        panic!("this test makes fake GPU device nodes below /dev and could not ({e}): run it as root")
    });
    let fs = nix::sys::statvfs::statvfs(devdir.path()).expect("statvfs /dev");
    assert!(
        !fs.flags().contains(nix::sys::statvfs::FsFlags::ST_NODEV),
        "/dev is mounted nodev here: device nodes cannot be opened, so GPU confinement cannot be tested"
    );
    for (i, minor) in [(0, 7), (1, 8)] {
        let p = devdir.path().join(format!("nvidia{i}"));
        let mode = nix::sys::stat::Mode::from_bits_truncate(0o666);
        nix::sys::stat::mknod(&p, nix::sys::stat::SFlag::S_IFCHR, mode, nix::sys::stat::makedev(1, minor))
            .unwrap_or_else(|e| panic!("mknod {}: {e}", p.display()));
    }
    devdir
}

fn gpu_cluster(devdir: &std::path::Path, cgroup_conf: &str) -> Cluster {
    Cluster::start(
        EXE,
        Options {
            nodes: 2,
            cpus: 2,
            extra_conf: "GresTypes=gpu\n".into(),
            node_line: Some(
                "NodeName=node[1-2] NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=2 RealMemory=2000 Gres=gpu:2 \
                 State=UNKNOWN"
                    .into(),
            ),
            files: vec![
                ("cgroup.conf".into(), cgroup_conf.into()),
                ("gres.conf".into(), format!("Name=gpu File={}/nvidia[0-1]\n", devdir.display())),
            ],
            ..Default::default()
        },
    )
}

/// Two one-GPU jobs on one node: each can open its own GPU and not the other's, and CUDA
/// numbers the one it sees from 0.
fn each_job_opens_only_its_gpu(c: &Cluster, devdir: &std::path::Path) {
    let probe = format!(
        "echo $CUDA_VISIBLE_DEVICES $SLURM_JOB_GPUS; for d in {0}/nvidia0 {0}/nvidia1; do \
         if (head -c0 < $d) 2>/dev/null; then echo open; else echo denied; fi; done; sleep 1",
        devdir.display()
    );
    let a = c.submit(&["-w", "node2", "--gres=gpu:1", "--wrap", &probe]);
    let b = c.submit(&["-w", "node2", "--gres=gpu:1", "--wrap", &probe]);
    c.wait_state(a, &["COMPLETED"], Duration::from_secs(20));
    c.wait_state(b, &["COMPLETED"], Duration::from_secs(20));
    let mut seen = [out(c, a), out(c, b)];
    seen.sort();
    assert_eq!(seen, ["0 0\nopen\ndenied\n", "0 1\ndenied\nopen\n"]);
    // A step sees what its job sees.
    let o = c.run("srun", &["-w", "node1", "--gres=gpu:1", "bash", "-c", &probe]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "0 0\nopen\ndenied\n");
}

/// Nothing of this cluster is left behind in the hierarchy.
fn no_cgroup_left(c: &Cluster) {
    let mine = drover_node::cgroup::node_dir("test", &c.conf, "node1");
    let cluster = mine.split('/').next().unwrap().to_string();
    c.wait_until("the job cgroups to go", Duration::from_secs(10), || {
        let o = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("ls -d /sys/fs/cgroup/*/drover/{cluster}/node*/job_* /sys/fs/cgroup/drover/{cluster}/node*/job_* 2>/dev/null | wc -l"))
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim() == "0"
    });
}

#[test]
fn jobs_are_confined_to_their_cores_memory_and_gpus() {
    if !drover_testkit::root_or_skip("cgroups need root") {
        return;
    }
    let devdir = fake_gpus();
    let c = gpu_cluster(devdir.path(), "ConstrainCores=yes\nConstrainRAMSpace=yes\nConstrainDevices=yes\n");
    let node = c.ok("scontrol", &["-d", "show", "node", "node1"]);
    if !cgroups_writable() {
        assert!(node.contains("Confinement=off: "), "{node}");
        let id = c.submit(&["--wrap", "echo ran"]);
        c.wait_state(id, &["COMPLETED"], Duration::from_secs(20));
        return;
    }
    assert!(node.contains("Confinement=on: cgroup/v"), "{node}");
    // Cores: a one-CPU job sees one CPU.
    let id = c.submit(&["-w", "node1", "-c1", "--wrap", "grep Cpus_allowed_list /proc/self/status | cut -f2"]);
    let st = c.wait_state(id, &["COMPLETED", "FAILED"], Duration::from_secs(20));
    assert_eq!(st, "COMPLETED", "{}\n{}", out(&c, id), c.logs());
    assert_eq!(out(&c, id).trim().split([',', '-']).count(), 1, "{}", out(&c, id));
    // Memory: past --mem, the out-of-memory killer ends it, and Slurm's words say so.
    let id = c.submit(&["--mem=40", "--wrap", "python3 -c 'x = bytearray(400 * 1024 * 1024)'; echo rc $?"]);
    c.wait_state(id, &["OUT_OF_MEMORY"], Duration::from_secs(30));
    let o = out(&c, id);
    assert!(o.contains("rc 137\n"), "{o}");
    assert!(
        o.contains(&format!(
            "error: Detected 1 oom-kill event(s) in StepId={id}.batch. Some of your processes may have been killed by \
             the cgroup out-of-memory handler."
        )),
        "{o}"
    );
    let show = c.ok("scontrol", &["show", "job", &id.to_string()]);
    assert!(show.contains("JobState=OUT_OF_MEMORY Reason=OutOfMemory"), "{show}");
    // An srun step: `Out Of Memory` for the task.
    let o = c.run("srun", &["--mem=40", "python3", "-c", "x = bytearray(400 * 1024 * 1024)"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("srun: error: node1: task 0: Out Of Memory"), "{err}");
    // CPU time from the step's cgroup: a burner that left the task's process tree still
    // counts (where the hierarchy accounts CPU: v2, or v1 with cpuacct).
    let v2 = std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
    if v2 || std::path::Path::new("/sys/fs/cgroup/cpuacct/cpuacct.usage").exists() {
        let burn = "python3 -c 'import time; t = time.time()\nwhile time.time() - t < 1.5: pass'";
        let id = c.submit(&[
            "-w",
            "node1",
            "--wrap",
            &format!("srun -n1 bash -c '( {burn} & ); sleep 4'")
                .replace("'import", "\"import")
                .replace("pass'", "pass\""),
        ]);
        c.wait_until("the step", Duration::from_secs(20), || {
            c.ok("squeue", &["-h", "-s", "-o", "%i"]).contains(&format!("{id}.0"))
        });
        std::thread::sleep(Duration::from_millis(2500));
        let cpu = c.ok("sstat", &["-n", "-P", "-j", &format!("{id}.0"), "-o", "AveCPU"]);
        assert!(cpu.trim() >= "00:00:01", "AveCPU {cpu:?}: the escaped burner was not counted");
        c.ok("scancel", &[&id.to_string()]);
    }
    if node.contains("devices are not isolated") {
        eprintln!("devices not checked: {node}");
    } else {
        each_job_opens_only_its_gpu(&c, devdir.path());
    }
    no_cgroup_left(&c);
}

/// The cgroup v2 hierarchy of this host: the whole tree, or the `unified` one of a hybrid host.
fn v2_mount() -> Option<&'static str> {
    ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"].into_iter().find(|m| {
        nix::sys::statfs::statfs(*m).is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::CGROUP2_SUPER_MAGIC)
    })
}

#[test]
fn on_cgroup_v2_an_ebpf_program_keeps_other_jobs_gpus_closed() {
    let Some(mount) = v2_mount().filter(|_| nix::unistd::getuid().is_root()) else {
        eprintln!("skipped: needs root and a cgroup v2 hierarchy");
        return;
    };
    let devdir = fake_gpus();
    let conf = format!("CgroupPlugin=cgroup/v2\nCgroupMountpoint={mount}\nConstrainDevices=yes\n");
    let c = gpu_cluster(devdir.path(), &conf);
    let node = c.ok("scontrol", &["-d", "show", "node", "node1"]);
    if node.contains("Confinement=off: ") || node.contains("devices are not isolated") {
        // A container may show the hierarchy without letting us write it or load programs.
        eprintln!("skipped: {}", node.lines().find(|l| l.contains("Confinement=")).unwrap_or_default().trim());
        return;
    }
    assert!(node.contains(&format!("Confinement=on: cgroup/v2 at {mount} ")), "{node}");
    assert!(node.contains("ConstrainDevices=yes)"), "{node}");
    each_job_opens_only_its_gpu(&c, devdir.path());
    no_cgroup_left(&c);
}

/// A supervisor that dies (kill -9, the OOM killer) leaves nothing of its job running: the
/// agent finds it dead, kills what is left in the job's cgroup and reports the job. Before,
/// the processes outlived the job by minutes while it showed NODE_FAIL.
#[test]
fn a_dead_supervisor_leaves_no_process_of_its_job_behind() {
    if !drover_testkit::root_or_skip("cgroups need root") || !cgroups_writable() {
        return;
    }
    let c = Cluster::start(
        EXE,
        Options {
            nodes: 1,
            files: vec![("cgroup.conf".into(), "ConstrainRAMSpace=yes\n".into())],
            ..Default::default()
        },
    );
    let marker = format!("drover-orphan-{}", std::process::id());
    // A job whose processes fork away from the script, as daemons do.
    let script =
        format!("bash -c 'exec -a {marker} sleep 300' & setsid bash -c 'exec -a {marker} sleep 300' & sleep 300");
    let id = c.submit(&["--wrap", &script]);
    c.wait_state(id, &["RUNNING"], Duration::from_secs(20));
    c.wait_until("the job's processes to start", Duration::from_secs(10), || {
        drover_testkit::processes_named(&marker).len() == 2
    });
    for pid in c.supervisor_pids() {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL).unwrap();
    }
    c.wait_state(id, &["NODE_FAIL"], Duration::from_secs(20));
    c.wait_until("the job's processes to be gone", Duration::from_secs(5), || {
        drover_testkit::processes_named(&marker).is_empty()
    });
    let log = std::fs::read_to_string(c.path().join("log/node-node1.log")).unwrap();
    assert!(log.contains(&format!("job {id}: job supervisor died; its ")), "{log}");
}
