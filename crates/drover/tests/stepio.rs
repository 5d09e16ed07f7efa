//! A step's standard streams on a real cluster: srun's stdin to the tasks `-i` picks, output
//! from the tasks `-o` picks, and `srun --pty` driven through a pseudo-terminal as a person
//! at a keyboard would (prompt, window size, Ctrl-C, exit code).

use drover_testkit::{Cluster, Options};
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_drover");

fn cluster() -> Cluster {
    Cluster::start(EXE, Options { nodes: 2, cpus: 2, ..Default::default() })
}

/// Runs srun with `input` on its stdin; (stdout lines sorted, exit code).
fn srun_with_stdin(c: &Cluster, args: &[&str], input: &str) -> (String, i32) {
    let mut child =
        c.command("srun", args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let mut lines: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().map(String::from).collect();
    lines.sort();
    (lines.join("\n"), out.status.code().unwrap_or(-1))
}

#[test]
fn stdin_reaches_the_tasks_input_picks_and_output_comes_from_those_output_picks() {
    let c = cluster();
    // Default: every task reads srun's stdin (Slurm's `--input=all`), on both nodes.
    let (out, rc) = srun_with_stdin(&c, &["-N2", "-n3", "-l", "cat"], "a\nb\n");
    assert_eq!((out.as_str(), rc), ("0: a\n0: b\n1: a\n1: b\n2: a\n2: b", 0));
    // One task.
    let (out, _) = srun_with_stdin(&c, &["-n2", "-i1", "-l", "bash", "-c", "cat; echo t$SLURM_PROCID"], "x\n");
    assert_eq!(out, "0: t0\n1: t1\n1: x");
    // None: stdin is closed at once, even with input waiting.
    let (out, _) = srun_with_stdin(&c, &["-n2", "--input=none", "-l", "bash", "-c", "cat; echo done"], "x\n");
    assert_eq!(out, "0: done\n1: done");
    // Output from one task only.
    let (out, _) = srun_with_stdin(&c, &["-n2", "-o", "1", "bash", "-c", "echo out$SLURM_PROCID"], "");
    assert_eq!(out, "out1");
    // A lot of input to a task that reads it slowly: nothing lost, nothing reordered.
    let big: String = (0..200_000).map(|i| format!("{i}\n")).collect();
    let (out, _) = srun_with_stdin(&c, &["-n1", "bash", "-c", "sleep 1; md5sum"], &big);
    let want = std::process::Command::new("md5sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut p| {
            p.stdin.take().unwrap().write_all(big.as_bytes())?;
            p.wait_with_output()
        })
        .unwrap();
    assert_eq!(out, String::from_utf8_lossy(&want.stdout).trim());
}

/// A terminal the test types into: srun runs on its slave side as its controlling terminal.
struct Keyboard {
    master: std::fs::File,
    seen: Arc<Mutex<String>>,
    child: std::process::Child,
}

impl Keyboard {
    fn start(c: &Cluster, args: &[&str], rows: u16, cols: u16) -> Keyboard {
        let ws = nix::pty::Winsize { ws_row: rows, ws_col: cols, ws_xpixel: 0, ws_ypixel: 0 };
        let pty = nix::pty::openpty(Some(&ws), None).unwrap();
        let slave: OwnedFd = pty.slave;
        let mut cmd = c.command("srun", args);
        cmd.env("PS1", "PROMPT> ")
            .stdin(slave.try_clone().unwrap())
            .stdout(slave.try_clone().unwrap())
            .stderr(slave.try_clone().unwrap());
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(|| {
                nix::unistd::setsid().map_err(std::io::Error::from)?;
                if nix::libc::ioctl(0, nix::libc::TIOCSCTTY, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().unwrap();
        drop(slave);
        let master = std::fs::File::from(pty.master);
        let seen = Arc::new(Mutex::new(String::new()));
        let (mut r, s) = (master.try_clone().unwrap(), seen.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = r.read(&mut buf) {
                if n == 0 {
                    break;
                }
                s.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Keyboard { master, seen, child }
    }

    fn type_(&mut self, keys: &str) {
        self.master.write_all(keys.as_bytes()).unwrap();
    }

    /// Waits for `text` to appear after what was already consumed; returns what came up to it.
    fn expect(&self, text: &str, timeout: Duration) -> String {
        let until = Instant::now() + timeout;
        loop {
            {
                let mut s = self.seen.lock().unwrap();
                if let Some(at) = s.find(text) {
                    let upto: String = s.drain(..at + text.len()).collect();
                    return upto;
                }
                assert!(Instant::now() < until, "no {text:?} on the terminal; it shows {s:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn resize(&self, rows: u16, cols: u16) {
        let ws = nix::libc::winsize { ws_row: rows, ws_col: cols, ws_xpixel: 0, ws_ypixel: 0 };
        // SAFETY: TIOCSWINSZ reads one winsize from the pointer during the call.
        unsafe { nix::libc::ioctl(self.master.as_raw_fd(), nix::libc::TIOCSWINSZ, &ws) };
    }
}

#[test]
fn srun_pty_gives_an_interactive_shell_a_terminal() {
    let c = cluster();
    let mut k = Keyboard::start(&c, &["--pty", "bash", "--norc", "--noprofile", "-i"], 33, 101);
    k.expect("PROMPT> ", Duration::from_secs(20));
    k.type_("tty; stty size; echo step=$SLURM_STEP_ID rows=$SLURM_PTY_WIN_ROW\n");
    let shown = k.expect("PROMPT> ", Duration::from_secs(10));
    assert!(shown.contains("/dev/pts/"), "{shown:?}");
    assert!(shown.contains("33 101\r\n"), "{shown:?}");
    assert!(shown.contains("step=0 rows=33\r\n"), "{shown:?}");
    // The window changes size: the remote terminal follows.
    k.resize(40, 120);
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        k.type_("stty size\n");
        let shown = k.expect("PROMPT> ", Duration::from_secs(10));
        if shown.contains("40 120\r\n") {
            break;
        }
        assert!(Instant::now() < until, "the size never followed: {shown:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    // Ctrl-C interrupts the foreground command, not the session.
    k.type_("sleep 60\n");
    k.expect("sleep 60\r\n", Duration::from_secs(5));
    std::thread::sleep(Duration::from_millis(300));
    let t0 = Instant::now();
    k.type_("\x03");
    k.expect("PROMPT> ", Duration::from_secs(10));
    assert!(t0.elapsed() < Duration::from_secs(10));
    k.type_("echo still-here; exit 7\n");
    k.expect("still-here\r\n", Duration::from_secs(10));
    let status = k.child.wait().unwrap();
    assert_eq!(status.code(), Some(7));
    let tail = k.expect("Exited with exit code 7", Duration::from_secs(5));
    assert!(tail.contains("srun: error: node1: task 0: "), "{tail:?}");
}

/// The lab's nodes (one socket of two cores) with `TaskPlugin=task/affinity`.
fn affinity_cluster(task_plugin: &str) -> Cluster {
    Cluster::start(
        EXE,
        Options {
            nodes: 2,
            cpus: 2,
            extra_conf: task_plugin.into(),
            node_line: Some(
                "NodeName=node[1-2] NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=2 Sockets=1 CoresPerSocket=2 \
                 ThreadsPerCore=1 RealMemory=2000 State=UNKNOWN"
                    .into(),
            ),
            ..Default::default()
        },
    )
}

const PROBE: &str = "echo $SLURM_LOCALID \"[$SLURM_CPU_BIND|$SLURM_CPU_BIND_TYPE|$SLURM_CPU_BIND_LIST]\" \
                     $(grep Cpus_allowed_list /proc/self/status | cut -f2)";

fn sorted_stdout(o: &std::process::Output) -> String {
    let mut lines: Vec<&str> = std::str::from_utf8(&o.stdout).unwrap().lines().collect();
    lines.sort();
    lines.join("\n")
}

/// CPU id lists (`0-1,3`) as ids.
fn cpu_list(s: &str) -> Vec<u32> {
    s.split(',')
        .filter_map(|p| {
            let (a, b) = p.split_once('-').unwrap_or((p, p));
            Some(a.trim().parse::<u32>().ok()?..=b.trim().parse::<u32>().ok()?)
        })
        .flatten()
        .collect()
}

/// The probe's lines with each task's allowed CPUs (last field) written as the node's CPU ids:
/// the nodes' CPUs are folded onto the CPUs this host lets us use, which need not start at 0.
fn as_node_cpus(out: String) -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let allowed = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).unwrap_or("0").trim().to_string();
    let host = cpu_list(&allowed);
    out.lines()
        .map(|l| {
            let (head, last) = l.rsplit_once(' ').unwrap_or(("", l));
            let ids: Vec<u32> =
                cpu_list(last).iter().filter_map(|c| host.iter().position(|h| h == c).map(|p| p as u32)).collect();
            let (lo, hi) = (ids.iter().min().copied().unwrap_or(0), ids.iter().max().copied().unwrap_or(0));
            let node = if lo == hi { lo.to_string() } else { format!("{lo}-{hi}") };
            format!("{head} {node}")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn tasks_are_bound_to_cpus_as_slurms_task_affinity_binds_them() {
    let c = affinity_cluster("TaskPlugin=task/affinity\n");
    // What real Slurm 22.05 printed on the lab for the same commands.
    let run = |args: &[&str]| {
        let mut a = args.to_vec();
        a.extend(["bash", "-c", PROBE]);
        as_node_cpus(sorted_stdout(&c.run("srun", &a)))
    };
    assert_eq!(
        run(&["-N1", "-n2"]),
        "0 [quiet,mask_cpu:0x1,0x2|mask_cpu:|0x1,0x2] 0\n1 [quiet,mask_cpu:0x1,0x2|mask_cpu:|0x1,0x2] 1"
    );
    assert_eq!(run(&["-N1", "-n1", "-c2"]), "0 [quiet,mask_cpu:0x3|mask_cpu:|0x3] 0-1");
    assert_eq!(run(&["-N1", "-n2", "--cpu-bind=none"]), "0 [quiet,none|none|] 0-1\n1 [quiet,none|none|] 0-1");
    assert_eq!(
        run(&["-N1", "-n2", "--cpu-bind=map_cpu:1,0"]),
        "0 [quiet,map_cpu:1,0|map_cpu:|1,0] 1\n1 [quiet,map_cpu:1,0|map_cpu:|1,0] 0"
    );
    assert_eq!(
        run(&["-N1", "-n2", "--cpu-bind=mask_cpu:0x2,3"]),
        "0 [quiet,mask_cpu:2,3|mask_cpu:|2,3] 1\n1 [quiet,mask_cpu:2,3|mask_cpu:|2,3] 0-1"
    );
    assert_eq!(
        run(&["-N1", "-n2", "--cpu-bind=sockets"]),
        "0 [quiet,mask_cpu:0x3,0x3|mask_cpu:|0x3,0x3] 0-1\n1 [quiet,mask_cpu:0x3,0x3|mask_cpu:|0x3,0x3] 0-1"
    );
    // Verbose: one line per task before it runs.
    let o = c.run("srun", &["-N1", "-n2", "--cpu-bind=verbose,cores", "true"]);
    let err = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<String> = err.lines().map(|l| l.split(" [").next().unwrap().to_string()).collect();
    assert_eq!(lines, ["cpu-bind=MASK - node1, task  0  0", "cpu-bind=MASK - node1, task  1  1"], "{err}");
    assert!(err.lines().all(|l| l.ends_with("set")), "{err}");
    // Refusals in Slurm's words.
    let o = c.run("srun", &["-N1", "-n2", "--cpu-bind=map_cpu:5", "true"]);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    let err: Vec<&str> = err.lines().collect();
    assert_eq!(o.status.code(), Some(192), "{err:?}");
    assert_eq!(err[0], "srun: error: CPU binding outside of job step allocation, allocated CPUs are: 0x3.");
    assert!(err[1].ends_with("failed on node node1: Unable to satisfy cpu bind request"), "{err:?}");
    assert_eq!(
        &err[2..],
        ["srun: error: Application launch failed: Unable to satisfy cpu bind request", "srun: Job step aborted"]
    );
    let o = c.run("srun", &["--cpu-bind=foo", "true"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "srun: error: unrecognized --cpu-bind argument \"foo\"\nsrun: fatal: Failed to parse --cpu-bind= values.\n"
    );
}

#[test]
fn without_task_affinity_only_an_explicit_binding_binds() {
    let c = affinity_cluster("");
    let o = c.run("srun", &["-N1", "-n2", "bash", "-c", PROBE]);
    // Unbound: every CPU this host allows (folded: from node CPU 0 up).
    let all = as_node_cpus(sorted_stdout(&o));
    assert!(all.starts_with("0 [||] 0") && all.contains("\n1 [||] 0"), "{all}");
    let o = c.run("srun", &["-N1", "-n2", "--cpu-bind=cores", "bash", "-c", PROBE]);
    assert_eq!(
        as_node_cpus(sorted_stdout(&o)),
        "0 [quiet,mask_cpu:0x1,0x2|mask_cpu:|0x1,0x2] 0\n1 [quiet,mask_cpu:0x1,0x2|mask_cpu:|0x1,0x2] 1"
    );
}

#[test]
fn multi_prog_runs_a_program_per_task_rank() {
    let c = cluster();
    let conf = c.path().join("silly.conf");
    std::fs::write(&conf, "# srun -n8 -l --multi-prog silly.conf\n4-6       hostname\n1,7       echo  task:%t\n0,2-3     echo  offset:%o\n").unwrap();
    let conf = conf.display().to_string();
    let o = c.run("srun", &["-n4", "-N2", "-l", "--multi-prog", &conf]);
    let (out, err) = (sorted_stdout(&o), String::from_utf8_lossy(&o.stderr).to_string());
    // The man page's example needs 8 tasks: ranks 4-7 are too many for four.
    assert_eq!(
        err,
        format!(
            "srun: error: Invalid task id, 4 >= ntasks\nsrun: error: Line 2 of configuration file {conf} invalid\n"
        )
    );
    assert_eq!((out.as_str(), o.status.code()), ("", Some(1)));
    std::fs::write(&conf, "0 echo a\n").unwrap();
    let o = c.run("srun", &["-n2", "--multi-prog", &conf]);
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!("srun: error: Configuration file {conf} invalid, no record for task id 1\n")
    );
    let host =
        String::from_utf8_lossy(&std::process::Command::new("hostname").output().unwrap().stdout).trim().to_string();
    std::fs::write(&conf, "2-3 hostname\n1 echo task:%t\n0 echo offset:%o\n").unwrap();
    let o = c.run("srun", &["-n4", "-N2", "-l", "--multi-prog", &conf]);
    assert_eq!(sorted_stdout(&o), format!("0: offset:0\n1: task:1\n2: {host}\n3: {host}"));
    // `*` for the rest, single quotes, and srun's own arguments added to every task's.
    std::fs::write(&conf, "0 echo a %t\n* echo 'rest  x' %o\n").unwrap();
    let o = c.run("srun", &["-n3", "-l", "--multi-prog", &conf, "extra"]);
    assert_eq!(sorted_stdout(&o), "0: a 0 extra\n1: rest  x 1 extra\n2: rest  x 2 extra");
    let o = c.run("srun", &["-n1", "--multi-prog", "/nonexistent.conf"]);
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "srun: error: Could not open multi_prog config file /nonexistent.conf\n"
    );
    assert_eq!(o.status.code(), Some(1));
    std::fs::write(&conf, "x echo y\n").unwrap();
    let o = c.run("srun", &["-n1", "--multi-prog", &conf]);
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!("srun: error: Invalid task range specification (x)\nsrun: error: Line 1 of configuration file {conf} invalid\n")
    );
}

#[test]
fn mpi_none_runs_and_a_pmi_plugin_drover_lacks_is_refused_as_slurm_refuses_it() {
    let c = cluster();
    assert_eq!(c.ok("srun", &["--mpi=list"]), "MPI plugin types are...\n\tnone\n");
    let o = c.run("srun", &["--mpi=none", "-n2", "true"]);
    assert!(o.status.success());
    let o = c.run("srun", &["--mpi=pmi2", "true"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.starts_with("srun: error: Couldn't find the specified plugin name for mpi/pmi2 looking at all files\n"));
    assert!(err.ends_with("srun: error: Invalid MPI type 'pmi2', --mpi=list for acceptable types\n"), "{err}");
}

#[test]
fn sattach_shows_a_running_steps_output_from_its_latest_and_until_it_ends() {
    let c = cluster();
    let id = c.submit(&[
        "-N2",
        "-n2",
        "--wrap",
        "srun -l bash -c 'for i in 1 2 3 4 5 6 7 8; do echo tick $i; sleep 0.3; done' > /dev/null",
    ]);
    c.wait_until("the step", Duration::from_secs(20), || {
        c.ok("squeue", &["-h", "-s", "-o", "%i"]).contains(&format!("{id}.0"))
    });
    std::thread::sleep(Duration::from_millis(800));
    let layout = c.ok("sattach", &["--layout", &format!("{id}.0")]);
    assert_eq!(
        layout,
        "Job step layout:\n\t2 tasks, 2 nodes (node[1-2])\n\n\tNode 0 (node1), 1 task(s): 0 \n\tNode 1 (node2), 1 task(s): 1 \n"
    );
    let o = c.run("sattach", &["-l", &format!("{id}.0")]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let mut lines: Vec<String> = String::from_utf8_lossy(&o.stdout).lines().map(String::from).collect();
    lines.sort();
    let want: Vec<String> = (1..=8)
        .flat_map(|i| [format!("0: tick {i}"), format!("1: tick {i}")])
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(lines, want, "from the first tick (replayed) to the last");
    let o = c.run("sattach", &["99999.0"]);
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "sattach: error: Could not get job step info: Invalid job id specified\n"
    );
}

/// srun listens for its tasks' I/O on the address it reaches the controller from (loopback
/// here; the cluster network across hosts), in `SrunPortRange` where the site limits it.
#[test]
fn srun_listens_in_srun_port_range() {
    let c = Cluster::start(
        EXE,
        Options { nodes: 1, extra_conf: "SrunPortRange=47100-47109\n".into(), ..Default::default() },
    );
    let out = c.ok("srun", &["bash", "-c", "echo $SLURM_SRUN_COMM_HOST $SLURM_SRUN_COMM_PORT"]);
    let (host, port) = out.trim().split_once(' ').unwrap();
    assert_eq!(host, "127.0.0.1");
    assert!((47100..=47109).contains(&port.parse::<u16>().unwrap()), "{out}");
    let bad = Cluster::start(EXE, Options { nodes: 1, ..Default::default() });
    std::fs::write(&bad.conf, std::fs::read_to_string(&bad.conf).unwrap() + "SrunPortRange=9-1\n").unwrap();
    let o = bad.run("srun", &["true"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("SrunPortRange: expected LOW-HIGH ports, found `9-1`"));
}

/// srun's program is looked up in the task's PATH (a venv, conda, `module load`), not the
/// node agent's: `PATH=venv/bin:$PATH srun python` runs the venv's python. Before, glibc's
/// execvpe searched the agent's PATH and found the system's (or nothing).
#[test]
fn srun_finds_the_program_in_the_tasks_path() {
    let c = cluster();
    let venv = c.path().join("venv/bin");
    std::fs::create_dir_all(&venv).unwrap();
    for (name, text) in [("drover-only-here", "echo found in the venv"), ("ls", "echo the ls of the venv")] {
        let p = venv.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{text}\n")).unwrap();
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    let path = format!("{}:{}:{}", venv.display(), c.bin.display(), std::env::var("PATH").unwrap_or_default());
    for (cmd, want) in [("drover-only-here", "found in the venv\n"), ("ls", "the ls of the venv\n")] {
        let o = c.command("srun", &["-N1", cmd]).env("PATH", &path).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&o.stdout), want, "{}", String::from_utf8_lossy(&o.stderr));
    }
    // Nowhere on the task's PATH: Slurm's words.
    let o = c.command("srun", &["-N1", "drover-nowhere"]).output().unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("execve(): drover-nowhere: No such file or directory"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `srun -o FILE -N4 -n4`: every task's output reaches the one file. Before, each node's
/// supervisor emptied the file as it started, and a late one cut what the others' tasks had
/// written already (one run in five lost a task's 10,000 bytes here).
#[test]
fn one_output_file_for_tasks_on_four_nodes_keeps_every_byte() {
    let c = Cluster::start(EXE, Options { nodes: 4, cpus: 1, ..Default::default() });
    let out = c.path().join("out.txt");
    for run in 0..10 {
        c.ok("srun", &["--output=out.txt", "-N4", "-n4", "bash", "-c", "head -c 10000 /dev/zero | tr '\\0' x"]);
        let n = std::fs::metadata(&out).unwrap().len();
        assert_eq!(n, 40_000, "run {run}: {n} of 40,000 bytes");
    }
    // The next step empties it again (once), as --open-mode=truncate says.
    c.ok("srun", &["--output=out.txt", "-N4", "-n4", "echo", "again"]);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "again\nagain\nagain\nagain\n");
}
