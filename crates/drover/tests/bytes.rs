//! Bytes that are not UTF-8 (a Latin-1 file name, a binary-ish argument) in a job's name,
//! arguments, environment, output path, working directory and script reach the job as the
//! user gave them, and squeue prints them back as they were, as Slurm does; and sbatch's
//! sanity checks of a script refuse it in Slurm's words.

use drover_testkit::{Cluster, Options};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::time::Duration;

const EXE: &str = env!("CARGO_BIN_EXE_drover");

#[test]
fn bytes_that_are_not_utf8_reach_the_job_unchanged() {
    let c = Cluster::start(EXE, Options { nodes: 1, ..Default::default() });
    let dir = c.path().join(OsStr::from_bytes(b"work-\xff"));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("job.sh");
    std::fs::write(
        &script,
        b"#!/bin/bash\n# caf\xe9\nprintf '%s\\n' \"$1\" \"$MYVAR\" \"$SLURM_JOB_NAME\" \"$PWD\"\necho caf\xe9\n",
    )
    .unwrap();
    let out = c
        .command("sbatch", &["--parsable"])
        .arg(OsStr::from_bytes(b"--job-name=n\xe9"))
        .arg(OsStr::from_bytes(b"--output=out-\xe9.txt"))
        .arg(&script)
        .arg(OsStr::from_bytes(b"arg\xfe"))
        .env("MYVAR", OsStr::from_bytes(b"v\xe9"))
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let id: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    c.wait_state(id, &["COMPLETED"], Duration::from_secs(30));
    let got = std::fs::read(dir.join(OsStr::from_bytes(b"out-\xe9.txt"))).unwrap();
    let mut want = b"arg\xfe\nv\xe9\nn\xe9\n".to_vec();
    want.extend_from_slice(dir.as_os_str().as_bytes());
    want.extend_from_slice(b"\ncaf\xe9\n");
    assert_eq!(got, want);
    let q = c.command("squeue", &["-h", "-t", "all", "-o", "%j", "-j", &id.to_string()]).output().unwrap();
    assert_eq!(q.stdout, b"n\xe9\n");
}

#[test]
fn sbatch_refuses_scripts_slurm_refuses() {
    let c = Cluster::start(
        EXE,
        Options { nodes: 1, extra_conf: "SchedulerParameters=max_script_size=2000\n".into(), ..Default::default() },
    );
    let refused = |name: &str, body: &[u8], why: &str| {
        let p = c.path().join(name);
        std::fs::write(&p, body).unwrap();
        let o = c.run("sbatch", &[p.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1), "{name}");
        assert_eq!(String::from_utf8_lossy(&o.stderr), why, "{name}");
    };
    refused("nul.sh", b"#!/bin/sh\necho a\0b\n", "sbatch: error: The Slurm controller does not allow scripts that\nsbatch: error: contain a NULL character '\\0'.\n");
    refused(
        "dos.sh",
        b"#!/bin/sh\r\necho hi\r\n",
        "sbatch: error: Batch script contains DOS line breaks (\\r\\n)\nsbatch: error: instead of expected UNIX line breaks (\\n).\n",
    );
    refused("blank.sh", b"  \n\t\n", "sbatch: error: Batch script contains only whitespace!\n");
    let mut big = b"#!/bin/sh\n".to_vec();
    big.resize(3000, b'#');
    big.push(b'\n');
    refused(
        "big.sh",
        &big,
        "sbatch: error: Batch job submission failed: Pathname of a file, directory or other parameter too long\n",
    );
    // Nothing of those reached the queue.
    assert_eq!(c.ok("squeue", &["-h", "-t", "all"]), "");
}
