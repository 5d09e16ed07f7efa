//! `cargo xtask compat capture`: the generated differential corpus
//! (`drover_testkit::corpus`, `testdata/corpus/README.md`) run on real Slurm 22.05, a fresh
//! `scripts/slurm-lab` (as root; it installs Debian's slurm-wlm where missing), its normalised
//! outputs written to `testdata/corpus/slurm-22.05.txt`.
//! `cargo xtask compat check [--record]`: the same corpus on Drover, which is the test
//! `crates/drover/tests/corpus.rs` (it prints the score per command; `--record` rewrites the
//! list of identical cases the test holds Drover to).

use anyhow::{bail, Context, Result};
use drover_testkit::corpus::{self, Normaliser, Target};
use std::path::PathBuf;
use std::process::Command;

const LAB: &str = "/srv/slurm-lab";

pub fn main(args: &[String]) -> Result<()> {
    match args.first().map(String::as_str) {
        Some("capture") => capture(),
        Some("check") => check(args.iter().any(|a| a == "--record")),
        _ => bail!("usage: cargo xtask compat capture | check [--record]"),
    }
}

fn capture() -> Result<()> {
    let root = super::root();
    // MinJobAge: finished jobs stay in the controller's view for the whole run.
    let st = Command::new(root.join("scripts/slurm-lab"))
        .args(["fresh", "MinJobAge=3600"])
        .status()
        .context("scripts/slurm-lab fresh")?;
    if !st.success() {
        bail!("scripts/slurm-lab fresh failed");
    }
    let work = tempdir()?;
    let target = Target { bin: None, conf: PathBuf::from(LAB).join("etc/slurm.conf"), work: work.clone() };
    let started = std::time::Instant::now();
    let vars = target.scenario(&corpus::dir().join("scenario.sh")).map_err(anyhow::Error::msg)?;
    let norm = Normaliser::new(LAB, &work.display().to_string());
    let cases = corpus::cases();
    let mut done = Vec::with_capacity(cases.len());
    for case in cases {
        let mut o = target.run(&case, &vars);
        o.out = norm.apply(case.command(), &o.out);
        o.err = norm.apply(case.command(), &o.err);
        done.push((case, o));
    }
    std::fs::write(corpus::golden_path(), corpus::write_golden(&done))?;
    println!(
        "{} cases run on real Slurm in {:.0} s: {}",
        done.len(),
        started.elapsed().as_secs_f64(),
        corpus::golden_path().display()
    );
    std::fs::remove_dir_all(&work).ok();
    Ok(())
}

/// A fresh directory for the command lines, readable by everyone (jobs write there).
fn tempdir() -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("drover-corpus-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    std::fs::create_dir_all(&dir)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
    Ok(dir)
}

fn check(record: bool) -> Result<()> {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.current_dir(super::root()).args(["test", "-p", "drover", "--test", "corpus", "--", "--nocapture"]);
    if record {
        c.env("DROVER_CORPUS_RECORD", "1");
    }
    if !c.status().context("cargo test")?.success() {
        bail!("the corpus test failed");
    }
    Ok(())
}
