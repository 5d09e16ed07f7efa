//! Reading a segment back: intact batches, a torn tail (a crash mid-write, never
//! acknowledged) or damage (anything else), told apart.
//!
//! A commit writes one batch and syncs it before anyone hears of it, and the next commit
//! starts only after that sync returns; so a crash can tear only the last batch of the newest
//! segment, from its start to the end of the file. Whatever fails its checksum and is
//! followed by an intact batch, or is not at the end, is damage: recovery stops and says where.

use crate::format::{u32_at, BatchHeader, SegHeader, BATCH_HDR, BATCH_MAGIC, REC_HDR, SEG_HDR};
use crate::RecordRef;
use std::path::{Path, PathBuf};

/// Where a file is damaged and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    pub path: PathBuf,
    pub offset: u64,
    pub what: String,
    /// Bytes skipped over by salvage (0 where the rest of the file was given up).
    pub lost_bytes: u64,
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at offset {}: {}", self.path.display(), self.offset, self.what)
    }
}

/// A torn final batch: where it starts and how many bytes it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Torn {
    pub offset: u64,
    pub bytes: u64,
    /// The batch number the tail would have had.
    pub seq: u64,
}

/// What a segment holds.
#[derive(Debug, Default)]
pub struct Segment {
    pub header: Option<SegHeader>,
    pub records: Vec<(RecordRef, Vec<u8>)>,
    pub batches: u64,
    /// The number the next batch gets.
    pub next_seq: u64,
    /// The end of the last intact batch.
    pub good_end: u64,
    pub torn: Option<Torn>,
    /// Damage found (salvage goes on past it; a strict read stops at the first).
    pub damage: Vec<Damage>,
}

/// The first intact batch header at or after `from`.
fn next_batch(data: &[u8], from: usize) -> Option<(usize, BatchHeader)> {
    let mut p = from;
    while p + BATCH_HDR <= data.len() {
        let rest = &data[p..data.len() - BATCH_HDR + 1];
        let i = rest.iter().position(|&b| b == BATCH_MAGIC[0])?;
        p += i;
        if let Some(h) = BatchHeader::decode(&data[p..]) {
            return Some((p, h));
        }
        p += 1;
    }
    None
}

/// The records of one batch body that starts at file offset `at`; `None` when they do not
/// tile the body exactly (the body's checksum held, so only a writer's bug gets here).
fn records(body: &[u8], at: u64, generation: u64) -> Option<Vec<(RecordRef, Vec<u8>)>> {
    let mut out = Vec::new();
    let mut off = 0usize;
    while off < body.len() {
        if off + REC_HDR > body.len() {
            return None;
        }
        let len = u32_at(body, off) as usize;
        let crc = u32_at(body, off + 4);
        let b = body.get(off + REC_HDR..off + REC_HDR + len)?;
        if crc32fast::hash(b) != crc {
            return None;
        }
        let r = RecordRef { generation, offset: at + (off + REC_HDR) as u64, len: len as u32, crc };
        out.push((r, b.to_vec()));
        off += REC_HDR + len;
    }
    Some(out)
}

/// Reads segment `data` (the file at `path`, which must be generation `generation`).
/// `salvage`: go on past damage, collecting every intact batch; otherwise stop at the first.
/// The header itself is checked by the caller against the snapshot.
pub fn segment(path: &Path, data: &[u8], generation: u64, salvage: bool) -> Segment {
    let mut seg = Segment::default();
    let damage = |offset: usize, what: String, lost: usize| Damage {
        path: path.to_path_buf(),
        offset: offset as u64,
        what,
        lost_bytes: lost as u64,
    };
    let Some(h) = SegHeader::decode(data) else {
        seg.damage.push(damage(0, "the segment header is damaged or missing (not a Drover journal segment)".into(), 0));
        return seg;
    };
    seg.header = Some(h);
    if h.generation != generation {
        seg.damage.push(damage(
            0,
            format!("the header says generation {} (the file was renamed or copied over another)", h.generation),
            0,
        ));
        if !salvage {
            return seg;
        }
    }
    let mut seq = h.first_seq;
    let mut off = SEG_HDR;
    seg.good_end = off as u64;
    while off < data.len() {
        let header = BatchHeader::decode(&data[off..]);
        let end = header.and_then(|h| off.checked_add(BATCH_HDR)?.checked_add(usize::try_from(h.body_len).ok()?));
        let fits = end.is_some_and(|e| e <= data.len());
        let intact =
            header.is_some_and(|h| fits && crc32fast::hash(&data[off + BATCH_HDR..end.unwrap_or(off)]) == h.body_crc);
        if let (Some(h), true) = (header, intact) {
            let end = end.expect("invariant: an intact batch has an end");
            if h.seq != seq {
                let lost = if h.seq < seq { end - off } else { 0 };
                seg.damage.push(damage(
                    off,
                    format!("batch {} is where batch {seq} belongs (batches missing or out of order)", h.seq),
                    lost,
                ));
                if !salvage {
                    return seg;
                }
                if h.seq < seq {
                    // Salvage: a batch already applied (repeated, or out of order) is skipped.
                    off = end;
                    continue;
                }
            }
            let Some(recs) = records(&data[off + BATCH_HDR..end], (off + BATCH_HDR) as u64, generation) else {
                seg.damage.push(damage(off, format!("batch {} holds records that do not fit it", h.seq), end - off));
                if !salvage {
                    return seg;
                }
                seq = h.seq + 1;
                off = end;
                continue;
            };
            seg.records.extend(recs);
            seg.batches += 1;
            seq = h.seq + 1;
            off = end;
            if seg.damage.is_empty() {
                seg.good_end = off as u64;
            }
            continue;
        }
        // Not an intact batch: a torn tail only if nothing intact follows and, where its
        // header holds, it is the last thing in the file.
        let next = next_batch(data, off + 1);
        let torn = match (header, next) {
            (_, Some(_)) => false,
            (Some(_), None) => !fits || end == Some(data.len()),
            (None, None) => true,
        };
        if torn {
            seg.torn = Some(Torn { offset: off as u64, bytes: (data.len() - off) as u64, seq });
            break;
        }
        let what = match (header, next) {
            (Some(h), Some((p, n))) => format!(
                "batch {} ({} bytes) fails its checksum, and intact batch {} follows at offset {p}: this is damage, not a torn tail",
                h.seq, h.body_len, n.seq
            ),
            (None, Some((p, n))) => format!(
                "{} bytes that are not a batch, and intact batch {} follows at offset {p}: this is damage, not a torn tail",
                p - off,
                n.seq
            ),
            (Some(h), None) => format!(
                "batch {} fails its checksum and {} bytes that are not a batch follow it",
                h.seq,
                data.len() - end.unwrap_or(off)
            ),
            (None, None) => unreachable!("invariant: handled as a torn tail"),
        };
        match next {
            Some((p, n)) => {
                seg.damage.push(damage(off, what, p - off));
                if !salvage {
                    return seg;
                }
                off = p;
                seq = n.seq;
            }
            None => {
                seg.damage.push(damage(off, what, data.len() - off));
                break;
            }
        }
    }
    seg.next_seq = seq;
    seg
}

/// Reads a journal file written before segments had headers and batches (records only);
/// it ends at the first record that does not check out.
pub fn legacy(data: &[u8], generation: u64) -> (Vec<(RecordRef, Vec<u8>)>, u64) {
    let mut out = Vec::new();
    let mut off = 0usize;
    while off + REC_HDR <= data.len() {
        let len = u32_at(data, off) as usize;
        let crc = u32_at(data, off + 4);
        let Some(body) = data.get(off + REC_HDR..off + REC_HDR + len) else { break };
        if crc32fast::hash(body) != crc {
            break;
        }
        out.push((RecordRef { generation, offset: (off + REC_HDR) as u64, len: len as u32, crc }, body.to_vec()));
        off += REC_HDR + len;
    }
    (out, off as u64)
}
