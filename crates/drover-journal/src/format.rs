//! The on-disk layout: a snapshot header, a segment header and a batch header, each with a
//! checksum of its own, all little-endian.
//!
//! ```text
//!  snapshot   [magic "DROVERS2"][generation u64][seq u64][flags u32][body crc u32][body len u64]
//!             [schema u32][header crc u32] body
//!  journal.G  [magic "DROVERJ2"][generation u64][first seq u64][snapshot id u32][header crc u32]
//!             then batches, one per commit:
//!             [magic "DRVB"][seq u64][body len u64][body crc u32][header crc u32] body
//!             where a body is records: [len u32][crc u32][bytes]
//! ```
//!
//! The chain: a segment names the snapshot it follows (its id: the checksum of the snapshot's
//! header, which covers the body's checksum) and its generation; batches are numbered without
//! gaps across segments, and a snapshot says which number the next batch gets. So a missing,
//! renamed, reordered or replaced file is seen, not guessed at.

/// A snapshot's header length.
pub const SNAP_HDR: usize = 48;
/// A segment's header length.
pub const SEG_HDR: usize = 32;
/// A batch's header length.
pub const BATCH_HDR: usize = 28;
/// A record's header inside a batch: length and checksum.
pub const REC_HDR: usize = 8;

pub const SNAP_MAGIC: &[u8; 8] = b"DROVERS2";
pub const SEG_MAGIC: &[u8; 8] = b"DROVERJ2";
pub const BATCH_MAGIC: &[u8; 4] = b"DRVB";

/// The snapshot of a new state directory: no state yet.
pub const FLAG_EMPTY: u32 = 1;

pub fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("invariant: 4 bytes"))
}

pub fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("invariant: 8 bytes"))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapHeader {
    /// The journal generation that follows this snapshot.
    pub generation: u64,
    /// The number the first batch after it gets.
    pub seq: u64,
    pub flags: u32,
    pub body_crc: u32,
    pub body_len: u64,
    /// The version of the state's encoding (the caller's; 0 where it set none).
    pub schema: u32,
}

impl SnapHeader {
    pub fn encode(&self) -> [u8; SNAP_HDR] {
        let mut h = [0u8; SNAP_HDR];
        h[0..8].copy_from_slice(SNAP_MAGIC);
        h[8..16].copy_from_slice(&self.generation.to_le_bytes());
        h[16..24].copy_from_slice(&self.seq.to_le_bytes());
        h[24..28].copy_from_slice(&self.flags.to_le_bytes());
        h[28..32].copy_from_slice(&self.body_crc.to_le_bytes());
        h[32..40].copy_from_slice(&self.body_len.to_le_bytes());
        h[40..44].copy_from_slice(&self.schema.to_le_bytes());
        let crc = crc32fast::hash(&h[..44]);
        h[44..48].copy_from_slice(&crc.to_le_bytes());
        h
    }

    /// `None` when `b` does not start with a snapshot header whose checksum holds.
    pub fn decode(b: &[u8]) -> Option<SnapHeader> {
        if b.len() < SNAP_HDR || &b[0..8] != SNAP_MAGIC || crc32fast::hash(&b[..44]) != u32_at(b, 44) {
            return None;
        }
        Some(SnapHeader {
            generation: u64_at(b, 8),
            seq: u64_at(b, 16),
            flags: u32_at(b, 24),
            body_crc: u32_at(b, 28),
            body_len: u64_at(b, 32),
            schema: u32_at(b, 40),
        })
    }

    /// What a segment that follows this snapshot names it by.
    pub fn id(&self) -> u32 {
        crc32fast::hash(&self.encode())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegHeader {
    pub generation: u64,
    pub first_seq: u64,
    /// [`SnapHeader::id`] of the snapshot this segment follows.
    pub snapshot_id: u32,
}

impl SegHeader {
    pub fn encode(&self) -> [u8; SEG_HDR] {
        let mut h = [0u8; SEG_HDR];
        h[0..8].copy_from_slice(SEG_MAGIC);
        h[8..16].copy_from_slice(&self.generation.to_le_bytes());
        h[16..24].copy_from_slice(&self.first_seq.to_le_bytes());
        h[24..28].copy_from_slice(&self.snapshot_id.to_le_bytes());
        let crc = crc32fast::hash(&h[..28]);
        h[28..32].copy_from_slice(&crc.to_le_bytes());
        h
    }

    pub fn decode(b: &[u8]) -> Option<SegHeader> {
        if b.len() < SEG_HDR || &b[0..8] != SEG_MAGIC || crc32fast::hash(&b[..28]) != u32_at(b, 28) {
            return None;
        }
        Some(SegHeader { generation: u64_at(b, 8), first_seq: u64_at(b, 16), snapshot_id: u32_at(b, 24) })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub seq: u64,
    pub body_len: u64,
    pub body_crc: u32,
}

impl BatchHeader {
    pub fn encode(&self) -> [u8; BATCH_HDR] {
        let mut h = [0u8; BATCH_HDR];
        h[0..4].copy_from_slice(BATCH_MAGIC);
        h[4..12].copy_from_slice(&self.seq.to_le_bytes());
        h[12..20].copy_from_slice(&self.body_len.to_le_bytes());
        h[20..24].copy_from_slice(&self.body_crc.to_le_bytes());
        let crc = crc32fast::hash(&h[..24]);
        h[24..28].copy_from_slice(&crc.to_le_bytes());
        h
    }

    pub fn decode(b: &[u8]) -> Option<BatchHeader> {
        if b.len() < BATCH_HDR || &b[0..4] != BATCH_MAGIC || crc32fast::hash(&b[..24]) != u32_at(b, 24) {
            return None;
        }
        Some(BatchHeader { seq: u64_at(b, 4), body_len: u64_at(b, 12), body_crc: u32_at(b, 20) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_and_any_flipped_bit_is_seen() {
        let s = SnapHeader {
            generation: 7,
            seq: 99,
            flags: FLAG_EMPTY,
            body_crc: 0xdead_beef,
            body_len: 1 << 40,
            schema: 3,
        };
        let b = BatchHeader { seq: 5, body_len: 77, body_crc: 3 };
        let g = SegHeader { generation: 7, first_seq: 99, snapshot_id: s.id() };
        assert_eq!(SnapHeader::decode(&s.encode()), Some(s));
        assert_eq!(BatchHeader::decode(&b.encode()), Some(b));
        assert_eq!(SegHeader::decode(&g.encode()), Some(g));
        for bit in 0..(SEG_HDR * 8) {
            let mut e = g.encode();
            e[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(SegHeader::decode(&e), None, "bit {bit}");
        }
        for bit in 0..(BATCH_HDR * 8) {
            let mut e = b.encode();
            e[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(BatchHeader::decode(&e), None, "bit {bit}");
        }
        for bit in 0..(SNAP_HDR * 8) {
            let mut e = s.encode();
            e[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(SnapHeader::decode(&e), None, "bit {bit}");
        }
    }
}
