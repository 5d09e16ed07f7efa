//! `drover controller --check-state DIR [--salvage]`: what a state directory holds, checked
//! without starting (and without changing anything); and the explicit salvage, never
//! automatic, that starts a new generation from what is intact and writes down what was lost.

use crate::state::{decode_record, Durable};
use drover_journal::Inspection;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// What a check found, and the state rebuilt from what is intact.
struct Checked {
    insp: Inspection,
    durable: Option<Durable>,
    /// Records that passed their checksums but could not be decoded.
    undecodable: usize,
    /// Jobs whose script and environment cannot be read back.
    unreadable: Vec<u32>,
    report: String,
}

impl Checked {
    fn intact(&self) -> bool {
        self.insp.intact() && self.durable.is_some() && self.undecodable == 0 && self.unreadable.is_empty()
    }
}

/// The state directory and its journal directory, from either.
fn dirs(dir: &Path) -> Option<(PathBuf, PathBuf)> {
    if dir.join("journal").is_dir() {
        return Some((dir.to_path_buf(), dir.join("journal")));
    }
    let has_journal = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .any(|e| e.file_name().to_str().is_some_and(|n| n == "snapshot" || n.starts_with("journal.")));
    has_journal.then(|| (dir.parent().unwrap_or(dir).to_path_buf(), dir.to_path_buf()))
}

fn check(state_dir: &Path, jdir: &Path) -> Result<Checked, String> {
    let insp = drover_journal::inspect(jdir).map_err(|e| e.to_string())?;
    let mut r = String::new();
    let _ = writeln!(r, "Drover state in {} (journal {})", state_dir.display(), jdir.display());
    match (&insp.snapshot_generation, &insp.snapshot) {
        (Some(g), Some(b)) => {
            let _ = writeln!(r, "snapshot: {} bytes, followed by journal.{g}", b.len());
        }
        (Some(g), None) => {
            let _ = writeln!(r, "snapshot: a new directory's (no state yet), followed by journal.{g}");
        }
        (None, _) => {
            let _ = writeln!(r, "snapshot: none readable");
        }
    }
    if insp.schema > crate::state::STATE_SCHEMA {
        let _ = writeln!(
            r,
            "DAMAGE: written by a newer Drover (state version {}; this one reads up to {}): check it with that version",
            insp.schema,
            crate::state::STATE_SCHEMA
        );
    }
    if insp.legacy {
        let _ = writeln!(r, "format: written by an older Drover (converted at the controller's next start)");
    }
    for s in &insp.segments {
        let role = if s.replayed { "replayed on the snapshot" } else { "kept for the scripts the state refers to" };
        let _ = writeln!(
            r,
            "{}: {} bytes, {} batches, {} records ({role})",
            s.path.display(),
            s.bytes,
            s.batches,
            s.records
        );
    }
    if let Some((p, t)) = &insp.torn {
        let _ = writeln!(
            r,
            "torn tail: {} bytes at offset {} of {} (a crash mid-write, never acknowledged: dropped at start)",
            t.bytes,
            t.offset,
            p.display()
        );
    }
    for n in &insp.notes {
        let _ = writeln!(r, "note: {n}");
    }
    for d in &insp.damage {
        let lost = if d.lost_bytes > 0 { format!(" [{} bytes]", d.lost_bytes) } else { String::new() };
        let _ = writeln!(r, "DAMAGE: {d}{lost}");
    }
    let mut undecodable = 0;
    let durable = match insp.snapshot.as_deref().map(Durable::decode).transpose() {
        Err(e) => {
            let _ =
                writeln!(r, "DAMAGE: the snapshot's state cannot be decoded ({e}): written by another Drover version?");
            None
        }
        Ok(d) => {
            let mut d = d.unwrap_or_default();
            for (at, b) in &insp.records {
                match decode_record(b) {
                    Ok(rec) => d.apply(rec, Some(*at)),
                    Err(_) => undecodable += 1,
                }
            }
            Some(d)
        }
    };
    if undecodable > 0 {
        let _ = writeln!(r, "DAMAGE: {undecodable} records pass their checksums but cannot be decoded");
    }
    let mut unreadable = Vec::new();
    if let Some(d) = &durable {
        let mut by_state: BTreeMap<&str, usize> = BTreeMap::new();
        for j in d.jobs.values() {
            *by_state.entry(j.status.state.name()).or_default() += 1;
            if let Some(b) = &j.blob {
                if drover_journal::read_record(jdir, b).is_err() {
                    unreadable.push(j.id);
                }
            }
        }
        let states: Vec<String> = by_state.iter().map(|(s, n)| format!("{n} {s}")).collect();
        let _ = writeln!(
            r,
            "state: {} jobs ({}), next job id {}",
            d.jobs.len(),
            if states.is_empty() { "none".to_string() } else { states.join(", ") },
            d.next_job_id
        );
        let absent = absent_ids(d);
        if !absent.is_empty() {
            let _ = writeln!(
                r,
                "job ids given out but not in the state: {absent} (jobs purged after MinJobAge are not, as they \
                 should not be; after damage, the others are those lost)"
            );
        }
        if unreadable.is_empty() {
            let _ = writeln!(r, "scripts: every job's script and environment reads back intact");
        } else {
            let ids: Vec<String> = unreadable.iter().map(|i| i.to_string()).collect();
            let _ = writeln!(
                r,
                "DAMAGE: the script and environment of {} jobs cannot be read back: {}",
                ids.len(),
                ids.join(",")
            );
        }
    }
    let newer = insp.schema > crate::state::STATE_SCHEMA;
    Ok(Checked { insp, durable: durable.filter(|_| !newer), undecodable, unreadable, report: r })
}

/// The ids below the next job id that no job in `d` has, as ranges (`15,20-22`), the first
/// 20 ranges at most.
fn absent_ids(d: &Durable) -> String {
    let have: std::collections::BTreeSet<u32> = d.jobs.values().map(|j| j.id).collect();
    let Some(&first) = have.iter().next() else { return String::new() };
    let mut ranges: Vec<(u32, u32)> = Vec::new();
    for id in first..d.next_job_id {
        if have.contains(&id) {
            continue;
        }
        match ranges.last_mut() {
            Some((_, hi)) if *hi + 1 == id => *hi = id,
            _ => ranges.push((id, id)),
        }
    }
    let shown: Vec<String> =
        ranges.iter().take(20).map(|&(lo, hi)| if lo == hi { lo.to_string() } else { format!("{lo}-{hi}") }).collect();
    let more = if ranges.len() > 20 { ",..." } else { "" };
    format!("{}{more}", shown.join(","))
}

/// The `StateSaveLocation` of the `slurm.conf` at `conf`.
pub fn state_dir_of(conf: &Path) -> Result<PathBuf, String> {
    drover_model::conf::parse_file(conf).map(|c| PathBuf::from(c.state_save_location)).map_err(|e| e.to_string())
}

/// Runs the check (and, with `salvage`, the salvage); returns the exit status.
pub fn check_state(dir: &Path, salvage: bool) -> i32 {
    let Some((state_dir, jdir)) = dirs(dir) else {
        eprintln!(
            "drover controller: error: {} holds no Drover state (no journal/, snapshot or journal.N)",
            dir.display()
        );
        return 1;
    };
    // Salvage writes: not under a running controller.
    let _lock = if salvage {
        match crate::lock_state_dir(&state_dir, false) {
            Ok(l) => Some(l),
            Err(e) => {
                eprintln!("drover controller: error: {e}: stop it before salvaging");
                return 1;
            }
        }
    } else {
        None
    };
    let c = match check(&state_dir, &jdir) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("drover controller: error: {e}");
            return 1;
        }
    };
    print!("{}", c.report);
    let intact = c.intact();
    if !salvage {
        if intact {
            println!("result: intact; the controller starts from it");
            return 0;
        }
        println!(
            "result: DAMAGED; the controller refuses to start from it. Restore the damaged file from a backup, or \
             recover what is intact with `drover controller --check-state {} --salvage`",
            dir.display()
        );
        return 1;
    }
    if intact {
        println!("result: intact; nothing to salvage");
        return 0;
    }
    let Some(durable) = &c.durable else {
        println!("result: cannot salvage: the snapshot's state cannot be decoded by this Drover");
        return 1;
    };
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let aside = match drover_journal::salvage(&c.insp, &durable.encode(), crate::state::STATE_SCHEMA, stamp) {
        Ok(a) => a,
        Err(e) => {
            println!("result: salvage failed, nothing changed but copies: {e}");
            return 1;
        }
    };
    let lost: u64 = c.insp.damage.iter().map(|d| d.lost_bytes).sum();
    let mut out = c.report.clone();
    let _ = writeln!(
        out,
        "salvaged: the state above is the controller's now (a new snapshot); {lost} bytes of journal could not be \
         read, and what they recorded is lost: jobs submitted or changed in them are missing or as they were \
         before. Accounting (sacct) still has what the controller delivered to it."
    );
    if !c.unreadable.is_empty() {
        let _ = writeln!(
            out,
            "the jobs whose scripts are unreadable fail if they start: cancel and resubmit them (scancel {})",
            c.unreadable.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(" ")
        );
    }
    let _ = writeln!(out, "the damaged files were copied to {}", aside.display());
    let report = state_dir.join(format!("salvage-{stamp}.txt"));
    let written = drover_journal::private::file_options()
        .create(true)
        .write(true)
        .truncate(true)
        .open(&report)
        .and_then(|mut f| std::io::Write::write_all(&mut f, out.as_bytes()));
    print!("{}", &out[c.report.len()..]);
    match written {
        Ok(()) => println!("result: salvaged; this report is in {}", report.display()),
        Err(e) => println!("result: salvaged; the report could not be written to {}: {e}", report.display()),
    }
    0
}
