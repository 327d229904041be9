//! The sparse offset index of one segment.
//!
//! ```text
//! entry (16 bytes, big-endian): relative_offset u64 | position u64
//! ```
//!
//! `relative_offset` is the record's offset minus the segment's base offset and
//! `position` its byte position in the `.log`. There is one entry for the first
//! record and then one for the first record that starts at least
//! [`INDEX_INTERVAL_BYTES`] after the previous entry. A lookup finds the last
//! entry at or before an offset; the reader then scans forward at most about
//! one interval. The entries are kept in memory (a billion records need about
//! 4 MB) and mirrored in the `.index` file, which recovery can always rebuild
//! from the log.

/// Bytes per index entry.
pub const ENTRY_BYTES: usize = 16;
/// Default bytes of log between index entries (4 KiB).
pub const INDEX_INTERVAL_BYTES: u64 = 4096;

/// One index entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    pub relative_offset: u64,
    pub position: u64,
}

impl IndexEntry {
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.relative_offset.to_be_bytes());
        out.extend_from_slice(&self.position.to_be_bytes());
    }
}

/// Parses an `.index` file. Returns `None` unless the bytes are whole entries
/// with strictly increasing offsets and positions, the first one (0, 0).
pub fn parse(bytes: &[u8]) -> Option<Vec<IndexEntry>> {
    if !bytes.len().is_multiple_of(ENTRY_BYTES) {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() / ENTRY_BYTES);
    for chunk in bytes.chunks_exact(ENTRY_BYTES) {
        let mut a = [0u8; 8];
        a.copy_from_slice(&chunk[..8]);
        let relative_offset = u64::from_be_bytes(a);
        a.copy_from_slice(&chunk[8..]);
        let position = u64::from_be_bytes(a);
        if let Some(last) = out.last() {
            let last: &IndexEntry = last;
            if relative_offset <= last.relative_offset || position <= last.position {
                return None;
            }
        } else if relative_offset != 0 || position != 0 {
            return None;
        }
        out.push(IndexEntry {
            relative_offset,
            position,
        });
    }
    Some(out)
}

/// The last entry with `relative_offset <= rel` and its number, if any.
pub fn lookup(entries: &[IndexEntry], rel: u64) -> Option<(usize, IndexEntry)> {
    let n = entries.partition_point(|e| e.relative_offset <= rel);
    let i = n.checked_sub(1)?;
    Some((i, entries[i]))
}

/// Decides index entries while records are appended to a segment.
#[derive(Clone, Copy, Debug)]
pub struct IndexPolicy {
    pub interval_bytes: u64,
}

impl IndexPolicy {
    /// Whether a record starting at `position` gets an entry, given the last entry.
    pub fn wants_entry(&self, last: Option<IndexEntry>, position: u64) -> bool {
        match last {
            None => true,
            Some(e) => position - e.position >= self.interval_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn lookup_matches_linear_scan(gaps in proptest::collection::vec((1u64..50, 1u64..9000), 0..200), probe in 0u64..20000) {
            let mut entries = Vec::new();
            let (mut o, mut p) = (0u64, 0u64);
            for (i, (go, gp)) in gaps.iter().enumerate() {
                if i > 0 { o += go; p += gp; }
                entries.push(IndexEntry { relative_offset: o, position: p });
            }
            let linear = entries.iter().enumerate().rev().find(|(_, e)| e.relative_offset <= probe).map(|(i, e)| (i, *e));
            prop_assert_eq!(lookup(&entries, probe), linear);
            let mut bytes = Vec::new();
            for e in &entries { e.encode(&mut bytes); }
            prop_assert_eq!(parse(&bytes), Some(entries));
        }
    }

    #[test]
    fn parse_rejects_bad_files() {
        assert_eq!(parse(&[0u8; 15]), None);
        let mut b = Vec::new();
        IndexEntry {
            relative_offset: 1,
            position: 0,
        }
        .encode(&mut b);
        assert_eq!(parse(&b), None);
        let mut b = Vec::new();
        IndexEntry {
            relative_offset: 0,
            position: 0,
        }
        .encode(&mut b);
        IndexEntry {
            relative_offset: 0,
            position: 10,
        }
        .encode(&mut b);
        assert_eq!(parse(&b), None);
        assert_eq!(parse(&[]), Some(vec![]));
    }
}
