//! Every real job script in `testdata/scripts/` is accepted (`sbatch --test-only`; the one
//! real Slurm refuses is refused alike), and
//! the CLI calls workflow tools were seen making parse.

use drover_testkit::{testdata, Cluster, Options};
use std::path::PathBuf;

const EXE: &str = env!("CARGO_BIN_EXE_drover");

#[test]
fn every_real_job_script_is_accepted() {
    let c = Cluster::start(
        EXE,
        Options {
            nodes: 4,
            cpus: 32,
            mem_mb: 256_000,
            // GPU nodes: the training scripts ask for up to 8 GPUs per node.
            extra_conf: "GresTypes=gpu\n".into(),
            node_line: Some(
                "NodeName=node[1-4] NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=32 RealMemory=256000 \
                 Gres=gpu:8 State=UNKNOWN"
                    .into(),
            ),
            partitions: "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n\
                         PartitionName=gpu Nodes=ALL MaxTime=INFINITE State=UP\n\
                         PartitionName=learnfair Nodes=ALL MaxTime=INFINITE State=UP\n"
                .into(),
            ..Default::default()
        },
    );
    let mut scripts: Vec<PathBuf> = Vec::new();
    for dir in [testdata("scripts"), testdata("scripts/generated")] {
        for e in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())).flatten() {
            let p = e.path();
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            if p.is_file() && !name.ends_with(".md") && !name.ends_with(".json") {
                scripts.push(p);
            }
        }
    }
    assert!(scripts.len() >= 17, "found {} scripts", scripts.len());
    let mut failures = Vec::new();
    for s in &scripts {
        let text = std::fs::read_to_string(s).unwrap();
        // simple-slurm feeds its script on standard input.
        let out = if s.to_string_lossy().contains("simple_slurm") {
            use std::io::Write;
            let mut child = c
                .command("sbatch", &["--test-only"])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
            child.wait_with_output().unwrap()
        } else {
            c.run("sbatch", &["--test-only", &s.display().to_string()])
        };
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        // submitit's fixture of a generated script (never submitted) carries a made-up
        // option: real Slurm 22.05 refuses it so (exit 255), and so does Drover.
        if s.ends_with("submitit__sbatch_test_record.sbatch") {
            if out.status.code() != Some(255) || !err.starts_with("sbatch: unrecognized option '--blublu=12'\n") {
                failures.push(format!("{}: not refused as Slurm refuses it: {err}", s.display()));
            }
            continue;
        }
        if !out.status.success() || !err.contains("to start at") {
            failures.push(format!("{}: {err}", s.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A directive of Slurm's that Drover does not implement yet is passed over with a warning
/// (the script still runs); one Slurm does not know either is refused in Slurm's words and
/// status, as Slurm refuses it, and no job is made.
#[test]
fn unknown_directives_are_refused_and_slurms_own_passed_over() {
    let c = Cluster::start(EXE, Options { nodes: 1, ..Default::default() });
    let dir = c.path().join("directives");
    std::fs::create_dir_all(&dir).unwrap();
    let run = |body: &str| {
        let path = dir.join("job.sh");
        std::fs::write(&path, format!("#!/bin/bash\n{body}\ntrue\n")).unwrap();
        c.run("sbatch", &["-H", path.to_str().unwrap()])
    };
    let out = run("#SBATCH --bogus");
    assert_eq!(out.status.code(), Some(255));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "sbatch: unrecognized option '--bogus'\nTry \"sbatch --help\" for more information\n"
    );
    assert_eq!(c.ok("squeue", &["-h", "-o", "%i"]), "");
    let out = run("#SBATCH --cpu-freq=high");
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("ignoring unrecognized #SBATCH option '--cpu-freq=high'"));
}
