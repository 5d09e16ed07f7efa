//! The generated differential corpus (`testdata/corpus/README.md`) on Drover: a 4-node cluster
//! from the lab's `slurm.conf`, the scenario, then every command line of
//! `drover_testkit::corpus::cases()`, each compared with what real Slurm 22.05.8 printed
//! (`testdata/corpus/slurm-22.05.txt`, `cargo xtask compat capture`) after the same
//! normalisation. It prints the score per command, writes every difference to
//! `target/compat/corpus-diff.txt` and the score to `target/compat/corpus-score.tsv`, and
//! fails when a case recorded as identical (`testdata/corpus/identical.txt`) is no longer.
//! `DROVER_CORPUS_RECORD=1` (`cargo xtask compat check --record`) rewrites that record.

use drover_testkit::corpus::{self, Normaliser, Target};
use drover_testkit::{root_or_skip, testdata, Cluster, Options};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// The lab's `slurm.conf` less what the test cluster sets itself (its name, hosts, ports,
/// authentication, directories, accounting's address, nodes and partitions), with
/// `scripts/slurm-lab`'s substitutions; and its node and partition lines.
fn lab_conf() -> (String, String, String) {
    let text = std::fs::read_to_string(testdata("compat/slurm-22.05/conf/slurm.conf")).expect("the lab's slurm.conf");
    let own = [
        "clustername",
        "slurmctldhost",
        "slurmctldport",
        "slurmdport",
        "authtype",
        "authinfo",
        "credtype",
        "communicationparameters",
        "statesavelocation",
        "slurmdspooldir",
        "slurmctldpidfile",
        "slurmdpidfile",
        "slurmctldlogfile",
        "slurmdlogfile",
        "accountingstoragetype",
        "accountingstoragehost",
        "accountingstorageport",
        "accountingstoragepass",
    ];
    let (mut extra, mut nodes, mut parts) = (String::new(), String::new(), String::new());
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let line = line
            .replace("@PROCTRACK@", "proctrack/linuxproc")
            .replace("@TASKPLUGIN@", "task/affinity")
            .replace("@SCHEDPARAMS@", "SchedulerParameters=batch_sched_delay=0");
        let key = line.split('=').next().unwrap_or("").to_ascii_lowercase();
        match key.as_str() {
            "nodename" => nodes = line,
            "partitionname" => {
                parts.push_str(&line);
                parts.push('\n');
            }
            k if own.contains(&k) => {}
            _ => {
                extra.push_str(&line);
                extra.push('\n');
            }
        }
    }
    // As `cargo xtask compat capture` starts the lab: finished jobs stay in view for the run.
    extra.push_str("MinJobAge=3600\n");
    (extra, nodes, parts)
}

#[test]
fn the_generated_corpus_answers_as_real_slurm_did() {
    // The lab ran everything as root (node state changes, other users' jobs).
    if !root_or_skip("the corpus runs as root, as the lab did") {
        return;
    }
    let golden_text = std::fs::read_to_string(corpus::golden_path()).expect("testdata/corpus/slurm-22.05.txt");
    let golden = corpus::read_golden(&golden_text).expect("the golden file parses");
    let (extra_conf, node_line, partitions) = lab_conf();
    let gres = std::fs::read_to_string(testdata("compat/slurm-22.05/conf/gres.conf")).expect("gres.conf");
    let c = Cluster::start(
        env!("CARGO_BIN_EXE_drover"),
        Options {
            nodes: 4,
            node_line: Some(node_line),
            partitions,
            extra_conf,
            files: vec![("gres.conf".into(), gres)],
            accounting: true,
            cluster: "lab".into(),
            ..Options::default()
        },
    );
    // Named as `cargo xtask compat capture` names its own (/tmp/drover-corpus-...): a path
    // that sacct cuts to its column (WorkDir) then reads the same on both sides.
    let work_dir = tempfile::Builder::new().prefix("drover-corpus-").tempdir().expect("a work directory");
    let work = work_dir.path().to_path_buf();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&work, std::fs::Permissions::from_mode(0o755)).expect("chmod work");
    }
    let target = Target { bin: Some(c.bin.clone()), conf: c.conf.clone(), work: work.clone() };
    let vars = target.scenario(&corpus::dir().join("scenario.sh")).unwrap_or_else(|e| panic!("{e}\n{}", c.logs()));
    let norm = Normaliser::new(&c.dir.path().display().to_string(), &work.display().to_string());

    let recorded_path = corpus::dir().join("identical.txt");
    let recorded: BTreeSet<String> = std::fs::read_to_string(&recorded_path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect();
    let mut score: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut identical = BTreeSet::new();
    let mut diffs = String::new();
    let mut missing = Vec::new();
    for case in corpus::cases() {
        let Some((cmd, want)) = golden.get(&case.id) else {
            missing.push(case.id.clone());
            continue;
        };
        assert_eq!(cmd, &case.cmd, "{}: the golden file has another command line: recapture", case.id);
        let mut got = target.run(&case, &vars);
        got.out = norm.apply(case.command(), &got.out);
        got.err = norm.apply(case.command(), &got.err);
        let entry = score.entry(case.command().to_string()).or_default();
        entry.1 += 1;
        if &got == want {
            entry.0 += 1;
            identical.insert(case.id.clone());
        } else {
            let _ = writeln!(diffs, "#### {}\n$ {}", case.id, case.cmd);
            if got.rc != want.rc {
                let _ = writeln!(diffs, "exit status: Slurm {}, Drover {}", want.rc, got.rc);
            }
            if got.out != want.out {
                let _ = write!(diffs, "stdout:\n{}", corpus::diff(&want.out, &got.out, 12));
            }
            if got.err != want.err {
                let _ = write!(diffs, "stderr:\n{}", corpus::diff(&want.err, &got.err, 12));
            }
        }
    }
    let (same, all) = score.values().fold((0, 0), |(a, b), (s, n)| (a + s, b + n));
    let mut table = String::from("command\tidentical\tcases\tpercent\n");
    for (cmd, (s, n)) in &score {
        let _ = writeln!(table, "{cmd}\t{s}\t{n}\t{:.1}", 100.0 * *s as f64 / *n as f64);
    }
    let _ = writeln!(table, "all\t{same}\t{all}\t{:.1}", 100.0 * same as f64 / all.max(1) as f64);
    print!("{table}");
    let out = std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/compat"));
    std::fs::create_dir_all(&out).ok();
    std::fs::write(out.join("corpus-score.tsv"), &table).ok();
    std::fs::write(out.join("corpus-diff.txt"), &diffs).ok();
    println!("differences: {}", out.join("corpus-diff.txt").display());

    assert!(missing.is_empty(), "cases without a golden answer (run `cargo xtask compat capture`): {missing:?}");
    if std::env::var_os("DROVER_CORPUS_RECORD").is_some() {
        let mut text = String::from(
            "# The corpus's cases Drover answers as real Slurm 22.05.8 did (crates/drover/tests/corpus.rs\n\
             # fails when one of them no longer is). Written by `cargo xtask compat check --record`.\n",
        );
        for id in &identical {
            text.push_str(id);
            text.push('\n');
        }
        std::fs::write(&recorded_path, text).expect("write identical.txt");
        println!("recorded {} identical cases in {}", identical.len(), recorded_path.display());
        return;
    }
    // (A case no longer generated is no longer held to.)
    let current: BTreeSet<String> = corpus::cases().into_iter().map(|c| c.id).collect();
    let lost: Vec<&String> = recorded.difference(&identical).filter(|id| current.contains(*id)).collect();
    assert!(
        lost.is_empty(),
        "{} cases recorded as identical to Slurm's answer differ now (see {}): {lost:?}",
        lost.len(),
        out.join("corpus-diff.txt").display()
    );
}
