//! Reading a state directory without changing it (`drover controller --check-state`), and
//! the explicit salvage that starts a new generation from what was intact.

use crate::format::FLAG_EMPTY;
use crate::scan::{self, Damage, Torn};
use crate::{generations, io_err, private, read, read_snapshot, segment_path, snapshot_path, JournalError, RecordRef};
use std::fs;
use std::path::{Path, PathBuf};

/// One journal file as found.
#[derive(Debug, Clone)]
pub struct SegmentInfo {
    pub path: PathBuf,
    pub generation: u64,
    pub bytes: u64,
    pub batches: u64,
    pub records: u64,
    /// Replayed on top of the snapshot (the newest); the others are kept for the records
    /// the state refers to.
    pub replayed: bool,
}

/// What a state directory holds, damage included.
#[derive(Debug, Default)]
pub struct Inspection {
    pub dir: PathBuf,
    /// The state the snapshot holds (`None`: a new directory's, or none readable).
    pub snapshot: Option<Vec<u8>>,
    /// The generation the snapshot names (`None`: no snapshot could be read).
    pub snapshot_generation: Option<u64>,
    /// The records to replay on top of the snapshot, in order: every intact one.
    pub records: Vec<(RecordRef, Vec<u8>)>,
    pub segments: Vec<SegmentInfo>,
    /// Everything that is not as a clean shutdown or a crash leaves it.
    pub damage: Vec<Damage>,
    /// A torn final batch (a crash mid-write: dropped at start, not damage).
    pub torn: Option<(PathBuf, Torn)>,
    /// What the controller would tidy at start (leftovers of an interrupted snapshot).
    pub notes: Vec<String>,
    /// The number the next batch would get.
    pub next_seq: u64,
    pub max_generation: u64,
    pub legacy: bool,
    /// The version of the state's encoding the snapshot holds (0: none given).
    pub schema: u32,
}

impl Inspection {
    pub fn intact(&self) -> bool {
        self.damage.is_empty()
    }
}

fn damage(path: &Path, what: impl Into<String>) -> Damage {
    Damage { path: path.to_path_buf(), offset: 0, what: what.into(), lost_bytes: 0 }
}

/// Reads the journal directory `dir` without changing anything, going on past damage to
/// find every intact record.
pub fn inspect(dir: &Path) -> Result<Inspection, JournalError> {
    let gens = generations(dir)?;
    let snap_path = snapshot_path(dir);
    let mut insp = Inspection {
        dir: dir.to_path_buf(),
        max_generation: gens.iter().next_back().copied().unwrap_or(0),
        ..Default::default()
    };
    let mut header = None;
    if snap_path.exists() {
        match read_snapshot(&snap_path) {
            Ok((h, generation, body)) => {
                insp.legacy = h.is_none();
                insp.snapshot_generation = Some(generation);
                insp.snapshot = (h.is_none_or(|h| h.flags & FLAG_EMPTY == 0)).then_some(body);
                insp.next_seq = h.map_or(0, |h| h.seq);
                insp.schema = h.map_or(0, |h| h.schema);
                insp.max_generation = insp.max_generation.max(generation);
                header = h;
            }
            Err(JournalError::Damaged(d)) => insp.damage.push(*d),
            Err(e) => return Err(e),
        }
    } else if let Some(&g) = gens.iter().next_back() {
        let data = read(&segment_path(dir, g))?;
        if g == 0 && !data.is_empty() && !data.starts_with(crate::format::SEG_MAGIC) {
            insp.legacy = true;
            insp.snapshot_generation = Some(0);
        } else if !(g == 0 && crate::holds_no_batch(&data)) {
            insp.damage.push(damage(
                &snap_path,
                format!("the file is missing, but journal.{g} holds the journal that follows it"),
            ));
        }
    }
    // The segment replayed: the snapshot's; without a readable snapshot, the newest.
    let replay = insp.snapshot_generation.or(gens.iter().next_back().copied());
    for &g in &gens {
        let path = segment_path(dir, g);
        let data = read(&path)?;
        let replayed = Some(g) == replay;
        let mut info = SegmentInfo {
            path: path.clone(),
            generation: g,
            bytes: data.len() as u64,
            batches: 0,
            records: 0,
            replayed,
        };
        if insp.legacy {
            let (records, good) = scan::legacy(&data, g);
            info.records = records.len() as u64;
            if replayed {
                if good < data.len() as u64 {
                    let t = Torn { offset: good, bytes: data.len() as u64 - good, seq: 0 };
                    insp.torn = Some((path.clone(), t));
                }
                insp.records = records;
            }
            insp.segments.push(info);
            continue;
        }
        if let Some(sg) = insp.snapshot_generation.filter(|&sg| g > sg) {
            if g == sg + 1 && crate::holds_no_batch(&data) {
                insp.notes
                    .push(format!("{} is the empty start of a snapshot that was never completed", path.display()));
            } else {
                insp.damage.push(damage(
                    &path,
                    format!("this segment is newer than the snapshot (which journal.{sg} follows): the snapshot is older than the journal it should precede"),
                ));
            }
        }
        let seg = scan::segment(&path, &data, g, true);
        info.batches = seg.batches;
        info.records = seg.records.len() as u64;
        if replayed {
            insp.damage.extend(seg.damage);
        } else {
            // Only read by reference: what matters is whether the records the state refers
            // to are intact, which the caller checks.
            insp.notes
                .extend(seg.damage.iter().map(|d| format!("{d} (kept only for the records the state refers to)")));
        }
        if replayed {
            match (header, seg.header) {
                (Some(h), Some(sh)) if sh.snapshot_id != h.id() || sh.first_seq != h.seq => insp.damage.push(damage(
                    &path,
                    "this segment follows another snapshot than the one in this directory (the snapshot was replaced, or the segment copied from another state directory)",
                )),
                _ => {}
            }
            if let Some(t) = seg.torn {
                insp.torn = Some((path.clone(), t));
            }
            insp.next_seq = insp.next_seq.max(seg.next_seq);
            insp.records = seg.records;
        } else if let Some(t) = seg.torn {
            insp.notes.push(format!(
                "{} at offset {}: {} bytes that are not a whole batch end a segment that a later one follows",
                path.display(),
                t.offset,
                t.bytes
            ));
        }
        insp.segments.push(info);
    }
    if let Some(sg) = insp.snapshot_generation.filter(|g| !insp.legacy && !gens.contains(g)) {
        let path = segment_path(dir, sg);
        insp.damage.push(damage(&path, "the file is missing: the snapshot says the journal goes on in it"));
    }
    Ok(insp)
}

/// Starts a new generation from `state` (encoded as `schema`), which the caller rebuilt from what `insp` found
/// intact: the damaged files are copied into `dir/damaged-SECONDS/` first (they stay in
/// place too, for the records the state still refers to). Returns where the copies went.
pub fn salvage(insp: &Inspection, state: &[u8], schema: u32, stamp: u64) -> Result<PathBuf, JournalError> {
    let dir = &insp.dir;
    let aside = dir.join(format!("damaged-{stamp}"));
    private::create_dir(&aside).map_err(io_err(&aside))?;
    let mut files: Vec<PathBuf> = vec![snapshot_path(dir)];
    files.extend(insp.segments.iter().filter(|s| s.replayed).map(|s| s.path.clone()));
    files.extend(insp.damage.iter().map(|d| d.path.clone()));
    files.sort();
    files.dedup();
    for f in files.iter().filter(|f| f.exists()) {
        let to = aside.join(f.file_name().expect("invariant: a file name"));
        fs::copy(f, &to).map_err(io_err(&to))?;
    }
    let next = insp.max_generation + 1;
    crate::start_generation(dir, next, insp.next_seq, state, 0, schema, None)?;
    Ok(aside)
}
