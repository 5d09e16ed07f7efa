//! The controller's durable state: an append-only journal of checksummed records and atomic
//! snapshots. Sync file I/O only; the caller decides what a record means.
//!
//! ```text
//!  dir/snapshot        ← whole state at generation G (written to .tmp, fsynced, renamed)
//!  dir/journal.G       ← records appended after that snapshot: [len u32][crc32 u32][bytes]
//! ```
//!
//! Group commit: [`Journal::append`] only buffers; [`Journal::commit`] writes the buffer and
//! calls `fdatasync` once for every record appended since the last commit. A record is durable
//! (and may be acknowledged) only after the commit that follows it returns.
//!
//! Recovery reads the snapshot and the journal of its generation. A torn or corrupt tail (a
//! crash mid-write) ends the log: it is truncated away, since nothing in it was acknowledged.
//!
//! Every appended record has a [`RecordRef`] (file generation and offset) through which
//! [`Journal::read`] returns it later. This lets the caller keep bulky, rarely needed parts
//! of its state (a job's script and environment) on disk instead of in memory: they stay in
//! the record that wrote them. A snapshot keeps older journal files alive while the state it
//! saves still refers to them, and deletes the rest.

// Daemons never unwrap on input; broken invariants use `expect("invariant: ...")`.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod private;

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fs::{self, File};
use std::io::{self, Read, Seek, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

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
    #[error("corrupt snapshot {path}: {why}")]
    CorruptSnapshot { path: String, why: String },
    #[error("journal record {0:?} is missing or corrupt")]
    BadRecord(RecordRef),
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> JournalError + '_ {
    move |source| JournalError::Io { path: path.display().to_string(), source }
}

/// What was on disk at open.
#[derive(Debug, Default)]
pub struct Recovered {
    pub snapshot: Option<Vec<u8>>,
    pub records: Vec<(RecordRef, Vec<u8>)>,
    /// Bytes dropped from a torn tail.
    pub truncated_bytes: u64,
}

pub struct Journal {
    dir: PathBuf,
    generation: u64,
    file: File,
    /// Committed length of the current journal file; buffered records follow it.
    len: u64,
    buf: Vec<u8>,
    pending_records: usize,
    /// Records since the last snapshot (the caller uses it to decide when to snapshot).
    pub records_since_snapshot: u64,
}

const HEADER: usize = 8;

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

impl Journal {
    /// Opens (creating if needed) the journal in `dir` and returns what it holds.
    pub fn open(dir: &Path) -> Result<(Journal, Recovered), JournalError> {
        private::create_dir(dir).map_err(io_err(dir))?;
        let snap_path = dir.join("snapshot");
        let mut rec = Recovered::default();
        let mut generation = 0u64;
        if snap_path.exists() {
            let bytes = fs::read(&snap_path).map_err(io_err(&snap_path))?;
            let corrupt = |why: &str| JournalError::CorruptSnapshot {
                path: snap_path.display().to_string(),
                why: why.to_string(),
            };
            if bytes.len() < 16 {
                return Err(corrupt("too short"));
            }
            generation = u64::from_le_bytes(bytes[0..8].try_into().expect("invariant: 8 bytes"));
            let crc = u32_at(&bytes, 8);
            let len = u32_at(&bytes, 12) as usize;
            let body = bytes.get(16..16 + len).ok_or_else(|| corrupt("truncated"))?;
            if crc32fast::hash(body) != crc {
                return Err(corrupt("checksum mismatch"));
            }
            rec.snapshot = Some(body.to_vec());
        }
        let jpath = dir.join(format!("journal.{generation}"));
        let mut good_len = 0u64;
        if jpath.exists() {
            let mut data = Vec::new();
            File::open(&jpath).and_then(|mut f| f.read_to_end(&mut data)).map_err(io_err(&jpath))?;
            let mut off = 0usize;
            while off + HEADER <= data.len() {
                let len = u32_at(&data, off) as usize;
                let crc = u32_at(&data, off + 4);
                let Some(body) = data.get(off + HEADER..off + HEADER + len) else { break };
                if crc32fast::hash(body) != crc {
                    break;
                }
                let r = RecordRef { generation, offset: (off + HEADER) as u64, len: len as u32, crc };
                rec.records.push((r, body.to_vec()));
                off += HEADER + len;
            }
            good_len = off as u64;
            rec.truncated_bytes = data.len() as u64 - good_len;
        }
        let mut file =
            private::file_options().create(true).write(true).truncate(false).open(&jpath).map_err(io_err(&jpath))?;
        file.set_len(good_len).map_err(io_err(&jpath))?;
        file.seek(io::SeekFrom::Start(good_len)).map_err(io_err(&jpath))?;
        if rec.truncated_bytes > 0 {
            file.sync_data().map_err(io_err(&jpath))?;
        }
        let n = rec.records.len() as u64;
        // Older journal files may still hold records the snapshot refers to; the next
        // snapshot, which knows what is live, removes the others.
        Ok((
            Journal {
                dir: dir.to_path_buf(),
                generation,
                file,
                len: good_len,
                buf: Vec::new(),
                pending_records: 0,
                records_since_snapshot: n,
            },
            rec,
        ))
    }

    /// Buffers one record; it is durable after the next [`Journal::commit`].
    pub fn append(&mut self, record: &[u8]) -> RecordRef {
        let crc = crc32fast::hash(record);
        let offset = self.len + (self.buf.len() + HEADER) as u64;
        self.buf.extend_from_slice(&(record.len() as u32).to_le_bytes());
        self.buf.extend_from_slice(&crc.to_le_bytes());
        self.buf.extend_from_slice(record);
        self.pending_records += 1;
        RecordRef { generation: self.generation, offset, len: record.len() as u32, crc }
    }

    /// Reads a record back (committed or still buffered).
    pub fn read(&self, r: &RecordRef) -> Result<Vec<u8>, JournalError> {
        let bad = || JournalError::BadRecord(*r);
        let data = if r.generation == self.generation && r.offset >= self.len {
            let start = (r.offset - self.len) as usize;
            self.buf.get(start..start + r.len as usize).ok_or_else(bad)?.to_vec()
        } else {
            let path = self.dir.join(format!("journal.{}", r.generation));
            let f = File::open(&path).map_err(|_| bad())?;
            let mut data = vec![0u8; r.len as usize];
            f.read_exact_at(&mut data, r.offset).map_err(|_| bad())?;
            data
        };
        if crc32fast::hash(&data) != r.crc {
            return Err(bad());
        }
        Ok(data)
    }

    /// Writes every buffered record and syncs once (group commit).
    pub fn commit(&mut self) -> Result<(), JournalError> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let path = self.journal_path(self.generation);
        self.file.write_all(&self.buf).map_err(io_err(&path))?;
        self.file.sync_data().map_err(io_err(&path))?;
        self.len += self.buf.len() as u64;
        self.records_since_snapshot += self.pending_records as u64;
        self.buf.clear();
        self.pending_records = 0;
        Ok(())
    }

    fn journal_path(&self, g: u64) -> PathBuf {
        self.dir.join(format!("journal.{g}"))
    }

    /// Atomically replaces the snapshot with `state` and starts an empty journal. Buffered
    /// records are committed first (they are part of `state`). Journal files of older
    /// generations are deleted unless `live_generations` (what `state` refers to) names them.
    pub fn snapshot(&mut self, state: &[u8], live_generations: &BTreeSet<u64>) -> Result<(), JournalError> {
        self.commit()?;
        let next = self.generation + 1;
        let new_journal = self.journal_path(next);
        let file = private::file_options()
            .create(true)
            .write(true)
            .truncate(true)
            .open(&new_journal)
            .map_err(io_err(&new_journal))?;
        file.sync_all().map_err(io_err(&new_journal))?;
        let tmp = self.dir.join("snapshot.tmp");
        let mut out = Vec::with_capacity(state.len() + 16);
        out.extend_from_slice(&next.to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(state).to_le_bytes());
        out.extend_from_slice(&(state.len() as u32).to_le_bytes());
        out.extend_from_slice(state);
        {
            let mut f =
                private::file_options().create(true).write(true).truncate(true).open(&tmp).map_err(io_err(&tmp))?;
            f.write_all(&out).map_err(io_err(&tmp))?;
            f.sync_all().map_err(io_err(&tmp))?;
        }
        let snap = self.dir.join("snapshot");
        fs::rename(&tmp, &snap).map_err(io_err(&snap))?;
        File::open(&self.dir).and_then(|d| d.sync_all()).map_err(io_err(&self.dir))?;
        self.generation = next;
        self.file = file;
        self.len = 0;
        self.records_since_snapshot = 0;
        if let Ok(rd) = fs::read_dir(&self.dir) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().to_string();
                if let Some(g) = name.strip_prefix("journal.").and_then(|g| g.parse::<u64>().ok()) {
                    if g < next && !live_generations.contains(&g) {
                        let _ = fs::remove_file(e.path());
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bodies(r: &Recovered) -> Vec<Vec<u8>> {
        r.records.iter().map(|(_, b)| b.clone()).collect()
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

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(16))]
        #[test]
        fn any_corruption_keeps_a_valid_prefix(recs in proptest::collection::vec(proptest::collection::vec(0u8..255, 0..40), 1..20), flip in 0usize..2000) {
            let dir = tempfile::tempdir().unwrap();
            let (mut j, _) = Journal::open(dir.path()).unwrap();
            for r in &recs { j.append(r); }
            j.commit().unwrap();
            drop(j);
            let path = dir.path().join("journal.0");
            let mut data = fs::read(&path).unwrap();
            let at = flip % data.len();
            data[at] ^= 0xff;
            fs::write(&path, &data).unwrap();
            let (_, rec) = Journal::open(dir.path()).unwrap();
            proptest::prop_assert!(rec.records.len() <= recs.len());
            for ((_, a), b) in rec.records.iter().zip(&recs) { proptest::prop_assert_eq!(a, b); }
        }
    }
}
