//! Batch marks: where a producer's compressed batches began, kept beside a
//! segment in `<base offset>.batches` so the records themselves stay the
//! documented format.
//!
//! es stores records, not Kafka batches. To give a consumer back a batch as
//! its producer compressed it (same records, same codec), the partition
//! notes each such batch when it is appended: its first offset, codec,
//! last offset delta and stored bytes ([`ProducedBatch`]). The notes are a
//! hint for Fetch, never data: a segment without its `.batches` file (or
//! with a shorter one after a crash) serves the same records in es's own
//! batches. So the file is written with the segment's appends but fsynced
//! only when the segment is sealed or the partition closes, and recovery
//! keeps only the marks it can check against the recovered log.
//!
//! Each entry is 24 bytes, big-endian: first offset u64, last_offset_delta
//! u32, stored_bytes u32, codec u8, three zero bytes, CRC-32C u32 of the 20
//! bytes before it.

use crate::record::{ProducedBatch, BATCH_CODEC_MAX};

/// Bytes per entry in a `.batches` file.
pub const MARK_BYTES: usize = 24;

/// A produced batch and the offset of its first record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchMark {
    pub offset: u64,
    pub batch: ProducedBatch,
}

impl BatchMark {
    /// Appends this mark's 24-byte entry to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&self.offset.to_be_bytes());
        out.extend_from_slice(&self.batch.last_offset_delta.to_be_bytes());
        out.extend_from_slice(&self.batch.stored_bytes.to_be_bytes());
        out.extend_from_slice(&[self.batch.codec, 0, 0, 0]);
        let crc = crc32c::crc32c(&out[start..]);
        out.extend_from_slice(&crc.to_be_bytes());
    }

    /// Decodes one entry; `None` when its CRC, padding or fields are wrong.
    pub fn decode(e: &[u8; MARK_BYTES]) -> Option<BatchMark> {
        let crc = u32::from_be_bytes([e[20], e[21], e[22], e[23]]);
        if crc32c::crc32c(&e[..20]) != crc || e[17..20] != [0, 0, 0] {
            return None;
        }
        let offset = u64::from_be_bytes([e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7]]);
        let last_offset_delta = u32::from_be_bytes([e[8], e[9], e[10], e[11]]);
        let stored_bytes = u32::from_be_bytes([e[12], e[13], e[14], e[15]]);
        let codec = e[16];
        if codec > BATCH_CODEC_MAX || last_offset_delta > i32::MAX as u32 {
            return None;
        }
        Some(BatchMark {
            offset,
            batch: ProducedBatch {
                codec,
                last_offset_delta,
                stored_bytes,
            },
        })
    }

    /// Offset of the batch's last record.
    pub fn last_offset(&self) -> u64 {
        self.offset
            .saturating_add(u64::from(self.batch.last_offset_delta))
    }
}

/// The marks of a `.batches` file that a segment holding offsets
/// `base..end` can vouch for: entries are read in order and the first that
/// is torn, corrupt, out of order or reaches past `end` ends the list (what
/// follows it was written after it). Returns the marks and how many bytes of
/// the file they span.
pub fn parse(bytes: &[u8], base: u64, end: u64) -> (Vec<BatchMark>, usize) {
    let mut marks: Vec<BatchMark> = Vec::with_capacity(bytes.len() / MARK_BYTES);
    for chunk in bytes.chunks_exact(MARK_BYTES) {
        let Ok(e) = <&[u8; MARK_BYTES]>::try_from(chunk) else {
            break;
        };
        let Some(m) = BatchMark::decode(e) else { break };
        let ordered = marks.last().is_none_or(|p| m.offset > p.last_offset());
        if m.offset < base || m.last_offset() >= end || !ordered {
            break;
        }
        marks.push(m);
    }
    let used = marks.len() * MARK_BYTES;
    (marks, used)
}

/// The mark of the batch that starts at `offset`, if any (`marks` sorted).
pub fn find(marks: &[BatchMark], offset: u64) -> Option<ProducedBatch> {
    marks
        .binary_search_by_key(&offset, |m| m.offset)
        .ok()
        .map(|i| marks[i].batch)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(offset: u64, delta: u32, codec: u8) -> BatchMark {
        BatchMark {
            offset,
            batch: ProducedBatch {
                codec,
                last_offset_delta: delta,
                stored_bytes: 1000 + delta,
            },
        }
    }

    #[test]
    fn entries_round_trip_and_are_checked() {
        let m = mark(1 << 40, 63, 4);
        let mut out = Vec::new();
        m.encode(&mut out);
        assert_eq!(out.len(), MARK_BYTES);
        let e: &[u8; MARK_BYTES] = out.as_slice().try_into().expect("24 bytes");
        assert_eq!(BatchMark::decode(e), Some(m));
        for i in 0..MARK_BYTES {
            let mut bad = out.clone();
            bad[i] ^= 0x40;
            let e: &[u8; MARK_BYTES] = bad.as_slice().try_into().expect("24 bytes");
            assert_eq!(BatchMark::decode(e), None, "byte {i} flipped");
        }
    }

    #[test]
    fn parse_keeps_what_the_log_vouches_for() {
        let mut f = Vec::new();
        for m in [
            mark(10, 4, 1),
            mark(15, 0, 2),
            mark(16, 9, 3),
            mark(26, 3, 1),
        ] {
            m.encode(&mut f);
        }
        // All inside 10..30.
        let (all, used) = parse(&f, 10, 30);
        assert_eq!(all.len(), 4);
        assert_eq!(used, f.len());
        // The log ends inside the last batch: it and nothing after it.
        let (some, used) = parse(&f, 10, 29);
        assert_eq!(some.len(), 3);
        assert_eq!(used, 3 * MARK_BYTES);
        // A torn last entry.
        let (torn, used) = parse(&f[..f.len() - 5], 10, 30);
        assert_eq!((torn.len(), used), (3, 3 * MARK_BYTES));
        // Below the segment's base: nothing.
        assert_eq!(parse(&f, 11, 30).0.len(), 0);
        // Overlapping batches: the first overlap ends the list.
        let mut o = Vec::new();
        mark(10, 4, 1).encode(&mut o);
        mark(14, 1, 1).encode(&mut o);
        assert_eq!(parse(&o, 10, 30).0.len(), 1);
        assert_eq!(find(&all, 16), Some(mark(16, 9, 3).batch));
        assert_eq!(find(&all, 17), None);
    }
}
