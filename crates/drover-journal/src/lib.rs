//! The controller's durable state: an append-only journal of checksummed batches and atomic
//! snapshots, chained so that recovery refuses to guess. Sync file I/O only; the caller
//! decides what a record means.
//!
//! ```text
//!  dir/snapshot        ← whole state; names the generation G and batch number that follow it
//!  dir/journal.G       ← a header naming that snapshot, then one batch per commit
//! ```
//!
//! (The layout: [`format`].) Group commit: [`Journal::append`] only buffers; [`Journal::commit`]
//! writes the buffer as one batch and calls `fdatasync` once. A record is durable (and may be
//! acknowledged) only after the commit that follows it returns.
//!
//! Recovery reads the snapshot and the journal of its generation and refuses to guess
//! ([`scan`]): only a torn final batch (a crash mid-write: never acknowledged) is dropped,
//! and the caller is told how many bytes; a missing snapshot or segment, a snapshot older
//! than the journal it should precede, a batch out of order, or a checksum that fails with
//! intact batches after it stop recovery with [`JournalError::Damaged`], which names the
//! file and the offset. [`inspect`] reads a directory without changing it (for a check) and,
//! for an explicit salvage, goes on past damage; [`salvage`] then starts a new generation
//! from what the caller rebuilt.
//!
//! Every appended record has a [`RecordRef`] (file generation and offset) through which
//! [`Journal::read`] returns it later. This lets the caller keep bulky, rarely needed parts
//! of its state (a job's script and environment) on disk instead of in memory: they stay in
//! the record that wrote them. A snapshot keeps older journal files alive while the state it
//! saves still refers to them, and deletes the rest.
//!
//! Space: the journal keeps room ahead of its end allocated (`fallocate`, the file's size
//! unchanged), so that a full disk is seen ([`Journal::space_low`]) while there is still room
//! to record what must be recorded; a commit that fails leaves its batch buffered and
//! the file as it was, to be written by a later commit.

// Daemons never unwrap on input; broken invariants use `expect("invariant: ...")`.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod format;
mod inspect;
pub mod private;
pub mod scan;

pub use inspect::{inspect, salvage, Inspection};
pub use scan::{Damage, Torn};

use format::{SegHeader, SnapHeader, BATCH_HDR, FLAG_EMPTY, REC_HDR, SEG_HDR, SNAP_HDR};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Where a record lives: journal generation, offset of its payload, length and checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordRef {
    pub generation: u64,
    pub offset: u64,
    pub len: u32,
    pub crc: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("journal I/O on {path}: {source}")]
    Io { path: String, source: io::Error },
    #[error("journal record {0:?} is missing or corrupt")]
    BadRecord(RecordRef),
    #[error("{0}")]
    Damaged(Box<Damage>),
    #[error("journal {0} was written by an older Drover: snapshot it before appending")]
    Legacy(String),
    /// The fence ([`Journal::set_fence`]) said this process may no longer write.
    #[error("not writing the journal: {0}")]
    Fenced(String),
}

/// Says whether this process may still write the journal (a controller that shares its
/// state directory with standbys holds a lease): asked right before each write, rename and
/// removal, so that a process that lost its lease changes nothing.
pub type Fence = std::sync::Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> JournalError + '_ {
    move |source| JournalError::Io { path: path.display().to_string(), source }
}

fn damaged(path: &Path, offset: u64, what: impl Into<String>) -> JournalError {
    JournalError::Damaged(Box::new(Damage { path: path.to_path_buf(), offset, what: what.into(), lost_bytes: 0 }))
}

/// What was on disk at open.
#[derive(Debug, Default)]
pub struct Recovered {
    pub snapshot: Option<Vec<u8>>,
    pub records: Vec<(RecordRef, Vec<u8>)>,
    /// Bytes dropped from a torn tail.
    pub truncated_bytes: u64,
    /// What recovery did that the log should say (a torn tail dropped, a leftover removed).
    pub notes: Vec<String>,
    /// Read from the format before segments were chained: the caller snapshots before it
    /// appends anything.
    pub legacy: bool,
    /// The version of the state's encoding its snapshot was written with (0: none given).
    pub schema: u32,
}

/// Room kept allocated ahead of the journal's end, and the step it grows by.
const LOW_WATER: u64 = 2 << 20;
const CHUNK: u64 = 8 << 20;

pub struct Journal {
    dir: PathBuf,
    generation: u64,
    file: File,
    /// Committed length of the current journal file; the buffered batch follows it.
    len: u64,
    /// The number the next batch gets.
    seq: u64,
    /// The batch being built: a header's room, then records.
    buf: Vec<u8>,
    pending_records: usize,
    /// Records since the last snapshot (the caller uses it to decide when to snapshot).
    pub records_since_snapshot: u64,
    /// How far the file's blocks are allocated (u64::MAX where the file system cannot say).
    allocated: u64,
    space_low: bool,
    last_reserve_try: Option<Instant>,
    failing: bool,
    legacy: bool,
    /// The version of the state's encoding that snapshots are written with.
    schema: u32,
    fence: Option<Fence>,
}

pub(crate) fn snapshot_path(dir: &Path) -> PathBuf {
    dir.join("snapshot")
}

pub(crate) fn segment_path(dir: &Path, g: u64) -> PathBuf {
    dir.join(format!("journal.{g}"))
}

/// The generations of the `journal.N` files in `dir`.
pub(crate) fn generations(dir: &Path) -> Result<BTreeSet<u64>, JournalError> {
    let mut out = BTreeSet::new();
    for e in fs::read_dir(dir).map_err(io_err(dir))? {
        let e = e.map_err(io_err(dir))?;
        let name = e.file_name();
        if let Some(g) = name.to_str().and_then(|n| n.strip_prefix("journal.")).and_then(|g| g.parse::<u64>().ok()) {
            out.insert(g);
        }
    }
    Ok(out)
}

fn sync_dir(dir: &Path) -> Result<(), JournalError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(io_err(dir))
}

fn read(path: &Path) -> Result<Vec<u8>, JournalError> {
    fs::read(path).map_err(io_err(path))
}

/// A snapshot file: its header (`None` for the format before headers) and body.
pub(crate) fn read_snapshot(path: &Path) -> Result<(Option<SnapHeader>, u64, Vec<u8>), JournalError> {
    let bytes = read(path)?;
    let corrupt = |why: String| damaged(path, 0, format!("the snapshot is damaged: {why}"));
    if !bytes.starts_with(format::SNAP_MAGIC) {
        // The format before headers: [generation u64][crc u32][len u32] body.
        if bytes.len() < 16 {
            return Err(corrupt("too short to be a snapshot".into()));
        }
        let generation = format::u64_at(&bytes, 0);
        let crc = format::u32_at(&bytes, 8);
        let len = format::u32_at(&bytes, 12) as usize;
        let body = bytes.get(16..16 + len).ok_or_else(|| corrupt(format!("truncated: {len} bytes expected")))?;
        if crc32fast::hash(body) != crc {
            return Err(corrupt("checksum mismatch".into()));
        }
        return Ok((None, generation, body.to_vec()));
    }
    let h = SnapHeader::decode(&bytes).ok_or_else(|| corrupt("the header fails its checksum".into()))?;
    let want = SNAP_HDR as u64 + h.body_len;
    if bytes.len() as u64 != want {
        return Err(corrupt(format!("the header says {want} bytes, the file has {}", bytes.len())));
    }
    let body = &bytes[SNAP_HDR..];
    if crc32fast::hash(body) != h.body_crc {
        return Err(corrupt("the state fails its checksum".into()));
    }
    Ok((Some(h), h.generation, body.to_vec()))
}

/// Writes a new segment `g` (its header only) and syncs it and the directory.
///
/// `exclusive`: the file must not exist yet (controllers sharing the directory: a segment
/// another one made is never truncated, whatever the timing).
fn new_segment(dir: &Path, h: &SegHeader, exclusive: bool) -> Result<File, JournalError> {
    let path = segment_path(dir, h.generation);
    let mut opts = private::file_options();
    if exclusive {
        opts.write(true).create_new(true);
    } else {
        opts.create(true).write(true).truncate(true);
    }
    let mut f = match opts.open(&path) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            return Err(JournalError::Fenced(format!(
                "{} is there already: another controller writes this state directory",
                path.display()
            )))
        }
        r => r.map_err(io_err(&path))?,
    };
    f.write_all(&h.encode()).and_then(|_| f.sync_all()).map_err(io_err(&path))?;
    sync_dir(dir)?;
    Ok(f)
}

/// Atomically replaces the snapshot: written to `snapshot.tmp`, synced, renamed (once
/// `fence` allows it), the directory synced.
fn write_snapshot(dir: &Path, h: &SnapHeader, state: &[u8], fence: Option<&Fence>) -> Result<(), JournalError> {
    let tmp = dir.join("snapshot.tmp");
    let res = (|| {
        let mut f = private::file_options().create(true).write(true).truncate(true).open(&tmp).map_err(io_err(&tmp))?;
        f.write_all(&h.encode()).and_then(|_| f.write_all(state)).and_then(|_| f.sync_all()).map_err(io_err(&tmp))?;
        if let Some(fence) = fence {
            fence().map_err(JournalError::Fenced)?;
        }
        let snap = snapshot_path(dir);
        fs::rename(&tmp, &snap).map_err(io_err(&snap))?;
        sync_dir(dir)
    })();
    if res.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    res
}

/// Starts generation `generation` from `state`: the segment first (so that a snapshot
/// never names a segment that is not there), then the snapshot. On failure the new segment
/// is removed again and the old state stands.
///
/// `fence`: the directory is shared with standbys. The segment must not exist yet (O_EXCL:
/// one made by another controller is never truncated), the snapshot is renamed into place
/// only while the fence allows, and a fenced start leaves the segment be (another
/// controller may have tidied it and made its own of that name since).
pub(crate) fn start_generation(
    dir: &Path,
    generation: u64,
    seq: u64,
    state: &[u8],
    flags: u32,
    schema: u32,
    fence: Option<&Fence>,
) -> Result<File, JournalError> {
    let snap =
        SnapHeader { generation, seq, flags, body_crc: crc32fast::hash(state), body_len: state.len() as u64, schema };
    let seg = SegHeader { generation, first_seq: seq, snapshot_id: snap.id() };
    let file = new_segment(dir, &seg, fence.is_some())?;
    if let Err(e) = write_snapshot(dir, &snap, state, fence) {
        let ours = !matches!(e, JournalError::Fenced(_)) && fence.is_none_or(|f| f().is_ok());
        if ours {
            let _ = fs::remove_file(segment_path(dir, generation));
        }
        return Err(e);
    }
    Ok(file)
}

/// Reads the record at `r` from the journal files in `dir` (no journal open).
pub fn read_record(dir: &Path, r: &RecordRef) -> Result<Vec<u8>, JournalError> {
    let bad = || JournalError::BadRecord(*r);
    let f = File::open(segment_path(dir, r.generation)).map_err(|_| bad())?;
    let mut data = vec![0u8; r.len as usize];
    f.read_exact_at(&mut data, r.offset).map_err(|_| bad())?;
    if crc32fast::hash(&data) != r.crc {
        return Err(bad());
    }
    Ok(data)
}

impl Journal {
    /// Opens (creating if needed) the journal in `dir` and returns what it holds; refuses a
    /// directory whose files do not chain ([`JournalError::Damaged`]) and changes nothing then.
    pub fn open(dir: &Path) -> Result<(Journal, Recovered), JournalError> {
        private::create_dir(dir).map_err(io_err(dir))?;
        let mut rec = Recovered::default();
        let gens = generations(dir)?;
        let snap_path = snapshot_path(dir);
        if !snap_path.exists() {
            return Self::open_without_snapshot(dir, &gens, rec);
        }
        let (header, generation, body) = read_snapshot(&snap_path)?;
        let Some(header) = header else { return Self::open_legacy(dir, generation, Some(body), rec) };
        let jpath = segment_path(dir, generation);
        // Check everything before changing anything.
        let mut leftover = None;
        for &g in gens.range(generation + 1..) {
            let p = segment_path(dir, g);
            if g == generation + 1 && holds_no_batch(&read(&p)?) {
                leftover = Some(p);
            } else {
                return Err(damaged(
                    &p,
                    0,
                    format!(
                        "this segment is newer than the snapshot {} (which journal.{generation} follows): the snapshot \
                         is older than the journal it should precede",
                        snap_path.display()
                    ),
                ));
            }
        }
        if !gens.contains(&generation) {
            return Err(damaged(
                &jpath,
                0,
                format!("the file is missing: the snapshot {} says the journal goes on in it", snap_path.display()),
            ));
        }
        let data = read(&jpath)?;
        let seg = scan::segment(&jpath, &data, generation, false);
        if let Some(d) = seg.damage.into_iter().next() {
            return Err(JournalError::Damaged(Box::new(d)));
        }
        let sh = seg.header.expect("invariant: an undamaged segment has a header");
        if sh.snapshot_id != header.id() || sh.first_seq != header.seq {
            return Err(damaged(
                &jpath,
                0,
                format!(
                    "this segment follows another snapshot than {} (the snapshot was replaced, or the segment copied \
                     from another state directory)",
                    snap_path.display()
                ),
            ));
        }
        let tmp = dir.join("snapshot.tmp");
        if tmp.exists() {
            fs::remove_file(&tmp).map_err(io_err(&tmp))?;
            rec.notes.push(format!("removed {}, a snapshot that was never completed", tmp.display()));
        }
        if let Some(p) = leftover {
            fs::remove_file(&p).map_err(io_err(&p))?;
            rec.notes.push(format!("removed {}, the empty start of a snapshot that was never completed", p.display()));
        }
        let file = private::file_options().write(true).open(&jpath).map_err(io_err(&jpath))?;
        if let Some(t) = seg.torn {
            file.set_len(seg.good_end).and_then(|_| file.sync_data()).map_err(io_err(&jpath))?;
            rec.truncated_bytes = t.bytes;
            rec.notes.push(format!(
                "dropped a torn tail of {} bytes at offset {} of {} (batch {}, written when the controller stopped \
                 mid-commit: never acknowledged)",
                t.bytes,
                t.offset,
                jpath.display(),
                t.seq
            ));
        }
        rec.snapshot = (header.flags & FLAG_EMPTY == 0).then_some(body);
        rec.schema = header.schema;
        rec.records = seg.records;
        let mut j = Journal::new(dir, generation, file, seg.good_end, seg.next_seq);
        j.records_since_snapshot = rec.records.len() as u64;
        j.reserve();
        Ok((j, rec))
    }

    fn new(dir: &Path, generation: u64, file: File, len: u64, seq: u64) -> Journal {
        Journal {
            dir: dir.to_path_buf(),
            generation,
            file,
            len,
            seq,
            buf: Vec::new(),
            pending_records: 0,
            records_since_snapshot: 0,
            allocated: 0,
            space_low: false,
            last_reserve_try: None,
            failing: false,
            legacy: false,
            schema: 0,
            fence: None,
        }
    }

    /// Asks `fence` before every write from now on ([`Fence`]).
    pub fn set_fence(&mut self, fence: Fence) {
        self.fence = Some(fence);
    }

    fn may_write(&self) -> Result<(), JournalError> {
        match &self.fence {
            Some(f) => f().map_err(JournalError::Fenced),
            None => Ok(()),
        }
    }

    /// A directory without a snapshot: new (or its creation was cut short), or written by
    /// an older Drover before its first snapshot; anything else has lost its snapshot.
    fn open_without_snapshot(
        dir: &Path,
        gens: &BTreeSet<u64>,
        mut rec: Recovered,
    ) -> Result<(Journal, Recovered), JournalError> {
        let snap_path = snapshot_path(dir);
        if let Some(&g) = gens.iter().next_back() {
            let p = segment_path(dir, g);
            let data = read(&p)?;
            if g == 0 && !data.is_empty() && !data.starts_with(format::SEG_MAGIC) {
                return Self::open_legacy(dir, 0, None, rec);
            }
            if !(g == 0 && holds_no_batch(&data)) {
                return Err(damaged(
                    &snap_path,
                    0,
                    format!(
                        "the file is missing, but {} holds the journal that follows it: the state cannot be rebuilt \
                         without it",
                        p.display()
                    ),
                ));
            }
            rec.notes.push(format!("{} was left by a start that never completed; starting afresh", p.display()));
        }
        let file = start_generation(dir, 0, 0, &[], FLAG_EMPTY, 0, None)?;
        let mut j = Journal::new(dir, 0, file, SEG_HDR as u64, 0);
        j.reserve();
        Ok((j, rec))
    }

    /// The format before chained segments: records without batches, a snapshot without a
    /// header. Read as it always was; the caller snapshots at once, which writes the new format.
    fn open_legacy(
        dir: &Path,
        generation: u64,
        snapshot: Option<Vec<u8>>,
        mut rec: Recovered,
    ) -> Result<(Journal, Recovered), JournalError> {
        let jpath = segment_path(dir, generation);
        let file = private::file_options().create(true).read(true).write(true).open(&jpath).map_err(io_err(&jpath))?;
        let data = read(&jpath)?;
        let (records, good) = scan::legacy(&data, generation);
        rec.truncated_bytes = data.len() as u64 - good;
        if rec.truncated_bytes > 0 {
            rec.notes.push(format!(
                "dropped a torn tail of {} bytes at offset {good} of {}",
                rec.truncated_bytes,
                jpath.display()
            ));
        }
        rec.notes.push(format!(
            "{} was written by an older Drover; its state moves to chained segments at once",
            dir.display()
        ));
        rec.snapshot = snapshot;
        rec.records = records;
        rec.legacy = true;
        let mut j = Journal::new(dir, generation, file, good, 0);
        j.legacy = true;
        j.allocated = u64::MAX;
        j.records_since_snapshot = rec.records.len() as u64;
        Ok((j, rec))
    }

    /// Buffers one record; it is durable after the next [`Journal::commit`].
    pub fn append(&mut self, record: &[u8]) -> RecordRef {
        if self.buf.is_empty() {
            self.buf.resize(BATCH_HDR, 0);
        }
        let crc = crc32fast::hash(record);
        let offset = self.len + (self.buf.len() + REC_HDR) as u64;
        self.buf.extend_from_slice(&(record.len() as u32).to_le_bytes());
        self.buf.extend_from_slice(&crc.to_le_bytes());
        self.buf.extend_from_slice(record);
        self.pending_records += 1;
        RecordRef { generation: self.generation, offset, len: record.len() as u32, crc }
    }

    /// Reads a record back (committed or still buffered).
    pub fn read(&self, r: &RecordRef) -> Result<Vec<u8>, JournalError> {
        if r.generation == self.generation && r.offset >= self.len {
            let bad = || JournalError::BadRecord(*r);
            let start = (r.offset - self.len) as usize;
            let data = self.buf.get(start..start + r.len as usize).ok_or_else(bad)?;
            return if crc32fast::hash(data) == r.crc { Ok(data.to_vec()) } else { Err(bad()) };
        }
        read_record(&self.dir, r)
    }

    /// Writes the buffered records as one batch and syncs once (group commit). On failure
    /// the file is cut back to what was committed and the batch stays buffered: the next
    /// commit writes it again (with whatever was appended since).
    pub fn commit(&mut self) -> Result<(), JournalError> {
        if self.buf.is_empty() {
            if self.space_low {
                self.reserve();
            }
            return Ok(());
        }
        let path = segment_path(&self.dir, self.generation);
        if self.legacy {
            return Err(JournalError::Legacy(path.display().to_string()));
        }
        let h = format::BatchHeader {
            seq: self.seq,
            body_len: (self.buf.len() - BATCH_HDR) as u64,
            body_crc: crc32fast::hash(&self.buf[BATCH_HDR..]),
        };
        self.buf[..BATCH_HDR].copy_from_slice(&h.encode());
        self.may_write()?;
        if let Err(source) = self.file.write_all_at(&self.buf, self.len).and_then(|_| self.file.sync_data()) {
            // What reached the file (if anything) goes again; after a failed sync nothing
            // written since the last good one can be trusted to be there.
            let _ = self.file.set_len(self.len);
            self.failing = true;
            self.allocated = self.allocated.min(self.len);
            return Err(JournalError::Io { path: path.display().to_string(), source });
        }
        self.len += self.buf.len() as u64;
        self.seq += 1;
        self.records_since_snapshot += self.pending_records as u64;
        self.buf.clear();
        self.pending_records = 0;
        self.failing = false;
        self.reserve();
        Ok(())
    }

    /// Whether the file system could not give the journal more room: what is left ahead of
    /// its end (at least a few MiB, allocated earlier) is for what must be recorded; new
    /// work should be refused until this clears (it is retried about once a second).
    pub fn space_low(&self) -> bool {
        self.space_low
    }

    /// Whether the last commit failed (its records wait in the buffer).
    pub fn failing(&self) -> bool {
        self.failing
    }

    /// Sets the version of the state's encoding the next snapshots are written with.
    pub fn set_schema(&mut self, schema: u32) {
        self.schema = schema;
    }

    /// The journal's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether the journal file of generation `g` is there.
    pub fn has_generation(&self, g: u64) -> bool {
        self.segment_path(g).exists()
    }

    /// The journal file of generation `g`.
    pub fn segment_path(&self, g: u64) -> PathBuf {
        segment_path(&self.dir, g)
    }

    /// Whether records wait to be committed.
    pub fn has_pending(&self) -> bool {
        !self.buf.is_empty()
    }

    /// Keeps room allocated ahead of the journal's end (the file's size unchanged).
    fn reserve(&mut self) {
        if self.allocated == u64::MAX || self.len + LOW_WATER <= self.allocated {
            return;
        }
        if self.last_reserve_try.is_some_and(|t| t.elapsed() < Duration::from_secs(1)) && self.space_low {
            return;
        }
        self.last_reserve_try = Some(Instant::now());
        use nix::fcntl::{fallocate, FallocateFlags};
        match fallocate(&self.file, FallocateFlags::FALLOC_FL_KEEP_SIZE, self.len as i64, CHUNK as i64) {
            Ok(()) => {
                self.allocated = self.len + CHUNK;
                self.space_low = false;
            }
            Err(nix::errno::Errno::ENOSPC | nix::errno::Errno::EDQUOT) => self.space_low = true,
            // A file system without fallocate: a full disk shows as a failing commit.
            Err(_) => self.allocated = u64::MAX,
        }
    }

    /// Gives back the room allocated past the end of the current file.
    fn release_reserve(&mut self) {
        if self.allocated != u64::MAX && self.allocated > self.len {
            use nix::fcntl::{fallocate, FallocateFlags};
            let _ = fallocate(
                &self.file,
                FallocateFlags::FALLOC_FL_KEEP_SIZE | FallocateFlags::FALLOC_FL_PUNCH_HOLE,
                self.len as i64,
                (self.allocated - self.len) as i64,
            );
        }
    }

    /// Atomically replaces the snapshot with `state` and starts an empty journal. Buffered
    /// records are committed first (they are part of `state`). Journal files of older
    /// generations are deleted unless `live_generations` (what `state` refers to) names them.
    pub fn snapshot(&mut self, state: &[u8], live_generations: &BTreeSet<u64>) -> Result<(), JournalError> {
        if self.legacy && !self.buf.is_empty() {
            return Err(JournalError::Legacy(segment_path(&self.dir, self.generation).display().to_string()));
        }
        self.commit()?;
        let next = self.generation + 1;
        self.may_write()?;
        // Shared with standbys: only another controller makes a generation that is there.
        let file = start_generation(&self.dir, next, self.seq, state, 0, self.schema, self.fence.as_ref())?;
        self.release_reserve();
        let mut j = Journal::new(&self.dir, next, file, SEG_HDR as u64, self.seq);
        j.schema = self.schema;
        j.fence = self.fence.take();
        j.reserve();
        *self = j;
        self.may_write()?;
        if let Ok(gens) = generations(&self.dir) {
            for g in gens.range(..next).filter(|g| !live_generations.contains(g)) {
                let _ = fs::remove_file(segment_path(&self.dir, *g));
            }
        }
        Ok(())
    }
}

/// A segment file with nothing committed in it: empty, or a header alone.
fn holds_no_batch(data: &[u8]) -> bool {
    data.is_empty() || (data.len() == SEG_HDR && SegHeader::decode(data).is_some())
}
#[cfg(test)]
mod tests {
    use super::*;

    fn bodies(r: &Recovered) -> Vec<Vec<u8>> {
        r.records.iter().map(|(_, b)| b.clone()).collect()
    }

    /// A controller that lost its lease writes nothing: no batch, no snapshot, no removal.
    #[test]
    fn a_fenced_journal_writes_nothing() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let dir = tempfile::tempdir().unwrap();
        let (mut j, _) = Journal::open(dir.path()).unwrap();
        let allowed = std::sync::Arc::new(AtomicBool::new(true));
        let a = allowed.clone();
        j.set_fence(std::sync::Arc::new(
            move || {
                if a.load(Ordering::SeqCst) {
                    Ok(())
                } else {
                    Err("lease lost".into())
                }
            },
        ));
        j.append(b"kept");
        j.commit().unwrap();
        let before: Vec<_> = files(dir.path());
        allowed.store(false, Ordering::SeqCst);
        j.append(b"fenced");
        assert!(matches!(j.commit(), Err(JournalError::Fenced(_))));
        assert!(matches!(j.snapshot(b"state", &BTreeSet::new()), Err(JournalError::Fenced(_))));
        assert_eq!(files(dir.path()), before, "nothing changed on disk");
        // Another controller made the next generation: never overwritten, even with the lease.
        allowed.store(true, Ordering::SeqCst);
        let next = segment_path(dir.path(), 1);
        std::fs::write(&next, b"theirs").unwrap();
        assert!(matches!(j.snapshot(b"state", &BTreeSet::new()), Err(JournalError::Fenced(_))));
        assert_eq!(std::fs::read(&next).unwrap(), b"theirs");
    }

    /// The lease lapses while a snapshot is being written: it is not renamed into place, and
    /// the new segment is left for whoever holds the directory now.
    #[test]
    fn a_lease_lost_mid_snapshot_replaces_nothing() {
        use std::sync::atomic::{AtomicU32, Ordering};
        let dir = tempfile::tempdir().unwrap();
        let (mut j, _) = Journal::open(dir.path()).unwrap();
        let before = std::fs::read(snapshot_path(dir.path())).unwrap();
        // The snapshot's first check passes; the one before the rename does not.
        let calls = std::sync::Arc::new(AtomicU32::new(0));
        let c = calls.clone();
        j.set_fence(std::sync::Arc::new(move || {
            if c.fetch_add(1, Ordering::SeqCst) == 0 {
                Ok(())
            } else {
                Err("lease lost".into())
            }
        }));
        assert!(matches!(j.snapshot(b"state", &BTreeSet::new()), Err(JournalError::Fenced(_))));
        assert_eq!(std::fs::read(snapshot_path(dir.path())).unwrap(), before, "the snapshot stands");
        assert!(!dir.path().join("snapshot.tmp").exists());
        assert!(segment_path(dir.path(), 1).exists(), "the segment is left: it may be another controller's by now");
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
        let mut v: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| (e.file_name().to_string_lossy().to_string(), std::fs::read(e.path()).unwrap()))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn records_survive_reopen_only_after_commit() {
        let dir = tempfile::tempdir().unwrap();
        let (mut j, rec) = Journal::open(dir.path()).unwrap();
        assert!(rec.records.is_empty());
        j.append(b"one");
        j.append(b"two");
        j.commit().unwrap();
        j.append(b"lost");
        drop(j);
        let (_, rec) = Journal::open(dir.path()).unwrap();
        assert_eq!(bodies(&rec), vec![b"one".to_vec(), b"two".to_vec()]);
    }

    #[test]
    fn the_schema_a_snapshot_was_written_with_is_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let (mut j, rec) = Journal::open(dir.path()).unwrap();
        assert_eq!(rec.schema, 0, "a new directory's");
        j.set_schema(5);
        j.snapshot(b"S", &BTreeSet::new()).unwrap();
        drop(j);
        let (_, rec) = Journal::open(dir.path()).unwrap();
        assert_eq!(rec.schema, 5);
        assert_eq!(inspect(dir.path()).unwrap().schema, 5);
    }

    #[test]
    fn snapshot_replaces_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let (mut j, _) = Journal::open(dir.path()).unwrap();
        j.append(b"a");
        j.snapshot(b"STATE", &BTreeSet::new()).unwrap();
        j.append(b"b");
        j.commit().unwrap();
        drop(j);
        let (_, rec) = Journal::open(dir.path()).unwrap();
        assert_eq!(rec.snapshot.as_deref(), Some(&b"STATE"[..]));
        assert_eq!(bodies(&rec), vec![b"b".to_vec()]);
    }

    #[test]
    fn records_are_readable_by_reference_until_nothing_refers_to_them() {
        let dir = tempfile::tempdir().unwrap();
        let (mut j, _) = Journal::open(dir.path()).unwrap();
        let a = j.append(b"script and environment");
        assert_eq!(j.read(&a).unwrap(), b"script and environment");
        j.commit().unwrap();
        let b = j.append(b"second");
        j.commit().unwrap();
        drop(j);
        let (mut j, rec) = Journal::open(dir.path()).unwrap();
        assert_eq!(rec.records[0].0, a);
        assert_eq!(j.read(&a).unwrap(), b"script and environment");
        assert_eq!(j.read(&b).unwrap(), b"second");
        let mut bad = b;
        bad.crc ^= 1;
        assert!(j.read(&bad).is_err());
        // A snapshot whose state still refers to generation 0 keeps that file.
        j.snapshot(b"S1", &BTreeSet::from([0])).unwrap();
        let c = j.append(b"third");
        j.commit().unwrap();
        assert_eq!(j.read(&a).unwrap(), b"script and environment");
        assert_eq!(c.generation, 1);
        drop(j);
        let (mut j, _) = Journal::open(dir.path()).unwrap();
        assert_eq!(j.read(&a).unwrap(), b"script and environment");
        // Once nothing refers to it, it goes.
        j.snapshot(b"S2", &BTreeSet::from([1])).unwrap();
        assert!(j.read(&a).is_err());
        assert_eq!(j.read(&c).unwrap(), b"third");
    }

    #[test]
    fn a_torn_tail_is_truncated() {
        let dir = tempfile::tempdir().unwrap();
        let (mut j, _) = Journal::open(dir.path()).unwrap();
        j.append(b"good");
        j.commit().unwrap();
        drop(j);
        let path = dir.path().join("journal.0");
        let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&[9, 0, 0, 0, 1, 2]).unwrap();
        drop(f);
        let (mut j, rec) = Journal::open(dir.path()).unwrap();
        assert_eq!(rec.records.len(), 1);
        assert_eq!(rec.truncated_bytes, 6);
        let r = j.append(b"next");
        j.commit().unwrap();
        assert_eq!(j.read(&r).unwrap(), b"next");
        drop(j);
        let (_, rec) = Journal::open(dir.path()).unwrap();
        assert_eq!(bodies(&rec), vec![b"good".to_vec(), b"next".to_vec()]);
    }

    fn three_batches(dir: &Path) -> Vec<u8> {
        let (mut j, _) = Journal::open(dir).unwrap();
        for b in [&b"first batch"[..], b"second batch", b"third batch"] {
            j.append(b);
            j.commit().unwrap();
        }
        drop(j);
        fs::read(dir.join("journal.0")).unwrap()
    }

    fn refused(dir: &Path) -> Damage {
        match Journal::open(dir) {
            Err(JournalError::Damaged(d)) => *d,
            Err(e) => panic!("refused, but not as damage: {e}"),
            Ok((_, rec)) => panic!("opened, with {} records", rec.records.len()),
        }
    }

    fn listing(dir: &Path) -> Vec<(String, Vec<u8>)> {
        let mut v: Vec<_> = fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (e.file_name().to_string_lossy().to_string(), fs::read(e.path()).unwrap())
            })
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_flipped_byte_with_intact_batches_after_it_is_damage_and_nothing_changes() {
        let dir = tempfile::tempdir().unwrap();
        let mut data = three_batches(dir.path());
        // The second batch's body: 32 header + (28 + 8 + 11) first batch + 28 + 8.
        let at = SEG_HDR + BATCH_HDR + REC_HDR + 11 + BATCH_HDR + REC_HDR + 2;
        data[at] ^= 0x55;
        fs::write(dir.path().join("journal.0"), &data).unwrap();
        let before = listing(dir.path());
        let d = refused(dir.path());
        assert_eq!(d.path, dir.path().join("journal.0"));
        assert_eq!(d.offset, (SEG_HDR + BATCH_HDR + REC_HDR + 11) as u64);
        assert!(d.what.contains("batch 1 (20 bytes) fails its checksum, and intact batch 2 follows"), "{d}");
        assert!(d.to_string().contains("journal.0 at offset 79"), "{d}");
        assert_eq!(listing(dir.path()), before, "a refused directory is left as it was");
        // Its batch header damaged instead: the same answer.
        let mut data = three_batches(tempfile::tempdir().unwrap().path());
        data[SEG_HDR + BATCH_HDR + REC_HDR + 11 + 5] ^= 1;
        fs::write(dir.path().join("journal.0"), &data).unwrap();
        let d = refused(dir.path());
        assert!(d.what.contains("bytes that are not a batch, and intact batch 2 follows"), "{d}");
    }

    #[test]
    fn a_damaged_last_batch_is_a_torn_tail_however_it_was_torn() {
        for tear in ["cut", "zeros", "flip", "garbage after"] {
            let dir = tempfile::tempdir().unwrap();
            let mut data = three_batches(dir.path());
            let last = SEG_HDR + 2 * (BATCH_HDR + REC_HDR) + 11 + 12;
            match tear {
                "cut" => data.truncate(data.len() - 3),
                "zeros" => data[last..].fill(0),
                "flip" => *data.last_mut().unwrap() ^= 1,
                _ => data.extend_from_slice(&[0, 0, 0, 7]),
            }
            let len = data.len();
            fs::write(dir.path().join("journal.0"), &data).unwrap();
            let (mut j, rec) = Journal::open(dir.path()).unwrap();
            if tear == "garbage after" {
                assert_eq!(bodies(&rec).len(), 3, "{tear}");
                assert_eq!(rec.truncated_bytes, 4, "{tear}");
            } else {
                assert_eq!(bodies(&rec), vec![b"first batch".to_vec(), b"second batch".to_vec()], "{tear}");
                assert_eq!(rec.truncated_bytes, (len - last) as u64, "{tear}");
                assert!(rec.notes[0].contains(&format!("at offset {last} of")), "{:?}", rec.notes);
            }
            j.append(b"after");
            j.commit().unwrap();
            drop(j);
            let (_, rec) = Journal::open(dir.path()).unwrap();
            assert_eq!(bodies(&rec).last().unwrap(), b"after", "{tear}");
        }
    }

    #[test]
    fn missing_and_mismatched_files_are_refused() {
        // The newest segment deleted.
        let dir = tempfile::tempdir().unwrap();
        let (mut j, _) = Journal::open(dir.path()).unwrap();
        j.append(b"a");
        j.snapshot(b"S1", &BTreeSet::new()).unwrap();
        j.append(b"b");
        j.commit().unwrap();
        drop(j);
        let old_snapshot = fs::read(dir.path().join("snapshot")).unwrap();
        let seg1 = fs::read(dir.path().join("journal.1")).unwrap();
        fs::remove_file(dir.path().join("journal.1")).unwrap();
        let d = refused(dir.path());
        assert!(d.path.ends_with("journal.1") && d.what.contains("the file is missing"), "{d}");
        fs::write(dir.path().join("journal.1"), &seg1).unwrap();

        // The snapshot deleted.
        fs::remove_file(dir.path().join("snapshot")).unwrap();
        let d = refused(dir.path());
        assert!(d.path.ends_with("snapshot") && d.what.contains("journal.1 holds the journal"), "{d}");
        fs::write(dir.path().join("snapshot"), &old_snapshot).unwrap();

        // A snapshot older than the journal it should precede (restored from a backup).
        let (mut j, _) = Journal::open(dir.path()).unwrap();
        j.snapshot(b"S2", &BTreeSet::new()).unwrap();
        j.append(b"c");
        j.commit().unwrap();
        drop(j);
        fs::write(dir.path().join("journal.1"), &seg1).unwrap();
        let newer = fs::read(dir.path().join("snapshot")).unwrap();
        fs::write(dir.path().join("snapshot"), &old_snapshot).unwrap();
        let d = refused(dir.path());
        assert!(d.path.ends_with("journal.2") && d.what.contains("older than the journal"), "{d}");
        fs::write(dir.path().join("snapshot"), &newer).unwrap();

        // Segments renamed over each other.
        let seg2 = fs::read(dir.path().join("journal.2")).unwrap();
        fs::write(dir.path().join("journal.2"), &seg1).unwrap();
        let d = refused(dir.path());
        assert!(d.what.contains("the header says generation 1"), "{d}");
        fs::write(dir.path().join("journal.2"), &seg2).unwrap();

        // A segment zeroed.
        fs::write(dir.path().join("journal.2"), vec![0u8; seg2.len()]).unwrap();
        let d = refused(dir.path());
        assert!(d.what.contains("segment header is damaged"), "{d}");
        fs::write(dir.path().join("journal.2"), &seg2).unwrap();

        // A batch repeated (copied again after itself).
        let mut twice = seg2.clone();
        twice.extend_from_slice(&seg2[SEG_HDR..]);
        fs::write(dir.path().join("journal.2"), &twice).unwrap();
        let d = refused(dir.path());
        assert!(d.what.contains("batch 2 is where batch 3 belongs"), "{d}");
        fs::write(dir.path().join("journal.2"), &seg2).unwrap();

        // A snapshot cut short.
        fs::write(dir.path().join("snapshot"), &newer[..newer.len() - 1]).unwrap();
        let e = Journal::open(dir.path()).err().unwrap();
        assert!(e.to_string().contains("the header says"), "{e}");
        fs::write(dir.path().join("snapshot"), &newer).unwrap();

        let (_, rec) = Journal::open(dir.path()).unwrap();
        assert_eq!((rec.snapshot.as_deref(), bodies(&rec)), (Some(&b"S2"[..]), vec![b"c".to_vec()]));
    }

    #[test]
    fn leftovers_of_an_interrupted_snapshot_or_start_are_tidied() {
        let dir = tempfile::tempdir().unwrap();
        // A start cut short: a segment header and no snapshot.
        fs::write(dir.path().join("journal.0"), SegHeader { generation: 0, first_seq: 0, snapshot_id: 0 }.encode())
            .unwrap();
        let (mut j, rec) = Journal::open(dir.path()).unwrap();
        assert!(rec.notes[0].contains("never completed"), "{:?}", rec.notes);
        j.append(b"kept");
        j.commit().unwrap();
        drop(j);
        // A snapshot cut short: the next segment made, the snapshot not renamed.
        fs::write(dir.path().join("journal.1"), SegHeader { generation: 1, first_seq: 1, snapshot_id: 9 }.encode())
            .unwrap();
        fs::write(dir.path().join("snapshot.tmp"), b"half").unwrap();
        let (_, rec) = Journal::open(dir.path()).unwrap();
        assert_eq!(bodies(&rec), vec![b"kept".to_vec()]);
        assert_eq!(rec.notes.len(), 2, "{:?}", rec.notes);
        assert!(!dir.path().join("journal.1").exists() && !dir.path().join("snapshot.tmp").exists());
    }

    #[test]
    fn a_directory_of_the_older_format_is_read_and_moved_to_chained_segments() {
        let dir = tempfile::tempdir().unwrap();
        let rec_bytes = |b: &[u8]| {
            let mut v = (b.len() as u32).to_le_bytes().to_vec();
            v.extend_from_slice(&crc32fast::hash(b).to_le_bytes());
            v.extend_from_slice(b);
            v
        };
        let mut snap = 3u64.to_le_bytes().to_vec();
        snap.extend_from_slice(&crc32fast::hash(b"OLD").to_le_bytes());
        snap.extend_from_slice(&3u32.to_le_bytes());
        snap.extend_from_slice(b"OLD");
        fs::write(dir.path().join("snapshot"), &snap).unwrap();
        let mut seg = rec_bytes(b"script");
        seg.extend(rec_bytes(b"status"));
        fs::write(dir.path().join("journal.3"), &seg).unwrap();
        let (mut j, rec) = Journal::open(dir.path()).unwrap();
        assert!(rec.legacy);
        assert_eq!(rec.snapshot.as_deref(), Some(&b"OLD"[..]));
        assert_eq!(bodies(&rec), vec![b"script".to_vec(), b"status".to_vec()]);
        let script = rec.records[0].0;
        assert!(j.commit().is_ok(), "nothing to write");
        j.snapshot(b"NEW", &BTreeSet::from([3])).unwrap();
        j.append(b"more");
        j.commit().unwrap();
        drop(j);
        let (j, rec) = Journal::open(dir.path()).unwrap();
        assert!(!rec.legacy);
        assert_eq!((rec.snapshot.as_deref(), bodies(&rec)), (Some(&b"NEW"[..]), vec![b"more".to_vec()]));
        assert_eq!(j.read(&script).unwrap(), b"script", "the older file stays readable by reference");
    }

    #[test]
    fn inspection_goes_past_damage_and_salvage_starts_a_new_generation() {
        let dir = tempfile::tempdir().unwrap();
        let mut data = three_batches(dir.path());
        data[SEG_HDR + BATCH_HDR + REC_HDR + 11 + BATCH_HDR + REC_HDR + 2] ^= 0x55;
        fs::write(dir.path().join("journal.0"), &data).unwrap();
        let before = listing(dir.path());
        let insp = inspect(dir.path()).unwrap();
        assert_eq!(listing(dir.path()), before, "inspection changes nothing");
        assert!(!insp.intact());
        assert_eq!(insp.damage.len(), 1);
        assert_eq!(insp.damage[0].lost_bytes, (BATCH_HDR + REC_HDR + 12) as u64);
        assert_eq!(bodies_of(&insp.records), vec![b"first batch".to_vec(), b"third batch".to_vec()]);
        let third = insp.records[1].0;
        let aside = salvage(&insp, b"REBUILT", 0, 7).unwrap();
        assert!(aside.ends_with("damaged-7") && aside.join("journal.0").exists() && aside.join("snapshot").exists());
        let (j, rec) = Journal::open(dir.path()).unwrap();
        assert_eq!(rec.snapshot.as_deref(), Some(&b"REBUILT"[..]));
        assert!(rec.records.is_empty());
        assert_eq!(j.read(&third).unwrap(), b"third batch", "intact records stay readable by reference");
        assert!(inspect(dir.path()).unwrap().intact(), "the damaged segment is only referred to now");
    }

    /// Salvage on every kind of damage: what is intact is kept, and the directory opens after.
    #[test]
    fn salvage_recovers_what_is_intact_from_every_kind_of_damage() {
        // A directory at generation 1 with records in both generations' segments.
        let setup = || {
            let dir = tempfile::tempdir().unwrap();
            let (mut j, _) = Journal::open(dir.path()).unwrap();
            j.append(b"old");
            j.commit().unwrap();
            j.snapshot(b"S1", &BTreeSet::from([0])).unwrap();
            for b in [&b"a"[..], b"b", b"c"] {
                j.append(b);
                j.commit().unwrap();
            }
            drop(j);
            dir
        };
        type Harm = fn(&Path);
        type Case = (&'static str, Harm, Option<&'static [u8]>, Vec<&'static [u8]>);
        let cases: Vec<Case> = vec![
            ("newest segment deleted", |d| fs::remove_file(d.join("journal.1")).unwrap(), Some(b"S1"), vec![]),
            ("snapshot deleted", |d| fs::remove_file(d.join("snapshot")).unwrap(), None, vec![b"a", b"b", b"c"]),
            (
                "segment zeroed",
                |d| {
                    let n = fs::read(d.join("journal.1")).unwrap().len();
                    fs::write(d.join("journal.1"), vec![0u8; n]).unwrap()
                },
                Some(b"S1"),
                vec![],
            ),
            (
                "a batch repeated",
                |d| {
                    let mut data = fs::read(d.join("journal.1")).unwrap();
                    let first = data[SEG_HDR..SEG_HDR + BATCH_HDR + REC_HDR + 1].to_vec();
                    data.extend_from_slice(&first);
                    data.extend_from_slice(&[0xee; 40]);
                    fs::write(d.join("journal.1"), data).unwrap()
                },
                Some(b"S1"),
                vec![b"a", b"b", b"c"],
            ),
            (
                "a flip in the middle",
                |d| {
                    let mut data = fs::read(d.join("journal.1")).unwrap();
                    data[SEG_HDR + BATCH_HDR + REC_HDR + 1 + BATCH_HDR + REC_HDR] ^= 1;
                    fs::write(d.join("journal.1"), data).unwrap()
                },
                Some(b"S1"),
                vec![b"a", b"c"],
            ),
        ];
        for (what, damage, snapshot, records) in cases {
            let dir = setup();
            damage(dir.path());
            assert!(Journal::open(dir.path()).is_err(), "{what}: refused");
            let insp = inspect(dir.path()).unwrap();
            assert!(!insp.intact(), "{what}");
            assert_eq!(insp.snapshot.as_deref(), snapshot, "{what}");
            assert_eq!(bodies_of(&insp.records), records.iter().map(|r| r.to_vec()).collect::<Vec<_>>(), "{what}");
            salvage(&insp, b"REBUILT", 0, 1).unwrap();
            let (mut j, rec) = Journal::open(dir.path()).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(rec.snapshot.as_deref(), Some(&b"REBUILT"[..]), "{what}");
            j.append(b"after");
            j.commit().unwrap();
            assert!(inspect(dir.path()).unwrap().intact(), "{what}: intact after salvage");
        }
        // An older snapshot restored over a newer one: the journal that follows it is gone.
        let dir = setup();
        let old = dir.path().join("old-snapshot");
        let (mut j, _) = Journal::open(dir.path()).unwrap();
        fs::copy(dir.path().join("snapshot"), &old).unwrap();
        j.snapshot(b"S2", &BTreeSet::new()).unwrap();
        j.append(b"d");
        j.commit().unwrap();
        drop(j);
        fs::rename(&old, dir.path().join("snapshot")).unwrap();
        assert!(Journal::open(dir.path()).is_err());
        let insp = inspect(dir.path()).unwrap();
        assert_eq!(insp.snapshot.as_deref(), Some(&b"S1"[..]));
        salvage(&insp, b"REBUILT", 0, 2).unwrap();
        assert!(Journal::open(dir.path()).is_ok());
    }

    fn bodies_of(r: &[(RecordRef, Vec<u8>)]) -> Vec<Vec<u8>> {
        r.iter().map(|(_, b)| b.clone()).collect()
    }

    /// A real full file system (a tmpfs of 1 MiB; root only): the journal says its space is
    /// low, a commit that cannot be written keeps its records, and the next one after room
    /// is made writes them.
    #[test]
    fn a_full_disk_keeps_every_record_until_it_can_be_written() {
        if !nix::unistd::getuid().is_root() {
            assert!(std::env::var("DROVER_TEST_STRICT").as_deref() != Ok("1"), "cannot run: needs root to mount");
            eprintln!("skipped: mounting a tmpfs needs root");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let mnt = dir.path().to_str().unwrap();
        let mount = |opts: &str| {
            let ok = std::process::Command::new("mount").args(["-t", "tmpfs", "-o", opts, "tmpfs", mnt]).status();
            assert!(ok.unwrap().success(), "mount {opts}");
        };
        mount("size=1m");
        let unmount = scopeguard(mnt.to_string());
        let (mut j, _) = Journal::open(&dir.path().join("j")).unwrap();
        assert!(j.space_low(), "1 MiB cannot hold the room the journal keeps ahead");
        let rec = vec![7u8; 100_000];
        let mut written = 0;
        let failed = loop {
            j.append(&rec);
            match j.commit() {
                Ok(()) => written += 1,
                Err(e) => break e,
            }
            assert!(written < 20, "a 1 MiB file system took {written} records of 100 kB");
        };
        assert!(failed.to_string().contains("No space left on device"), "{failed}");
        assert!(j.failing() && j.has_pending());
        j.append(b"appended while failing");
        assert!(j.commit().is_err(), "still full");
        mount("remount,size=16m");
        j.commit().unwrap();
        assert!(!j.failing() && !j.has_pending());
        drop(j);
        let (_, rec) = Journal::open(&dir.path().join("j")).unwrap();
        assert_eq!(rec.records.len(), written + 2, "the batch that failed was written later, whole");
        assert_eq!(rec.records.last().unwrap().1, b"appended while failing");
        drop(unmount);
    }

    struct Unmount(String);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    fn scopeguard(p: String) -> Unmount {
        Unmount(p)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(16))]
        #[test]
        fn any_corruption_keeps_a_valid_prefix(recs in proptest::collection::vec(proptest::collection::vec(0u8..255, 0..40), 1..20), flip in 0usize..2000) {
            let dir = tempfile::tempdir().unwrap();
            let (mut j, _) = Journal::open(dir.path()).unwrap();
            for r in &recs { j.append(r); j.commit().unwrap(); }
            drop(j);
            let path = dir.path().join("journal.0");
            let mut data = fs::read(&path).unwrap();
            let at = flip % data.len();
            data[at] ^= 0xff;
            fs::write(&path, &data).unwrap();
            // Refused as damage, or a prefix (the flip tore the last batch).
            let Ok((_, rec)) = Journal::open(dir.path()) else { return Ok(()) };
            proptest::prop_assert!(rec.records.len() <= recs.len());
            for ((_, a), b) in rec.records.iter().zip(&recs) { proptest::prop_assert_eq!(a, b); }
        }
    }
}
