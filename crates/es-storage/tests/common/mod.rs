//! Helpers shared by es-storage's test binaries only (each includes this
//! module with `mod common;`). Helpers any crate's tests may share, the
//! durability channel among them, are in es-test-support.

// Each binary uses some of these helpers, none uses all.
#![allow(dead_code)]

pub mod format_rules;

use es_storage::{Partition, ReadChunk, RecordIter, RecordView};

/// Reads every visible record of `p` from its log start, `max_bytes` per
/// read, and hands each to `f` with the read it came in. Every record must
/// decode and pass its CRC, and no read may return a record below the
/// offset asked for.
pub fn read_from_start(
    p: &Partition,
    max_bytes: usize,
    mut f: impl FnMut(&RecordView<'_>, &ReadChunk),
) {
    let mut next = p.log_start_offset();
    loop {
        let c = p.read(next, max_bytes).expect("read");
        if c.data.is_empty() {
            return;
        }
        for r in RecordIter::new(&c.data) {
            let r = r.expect("only whole, valid records are visible");
            assert!(r.offset >= next, "record {} read from {next}", r.offset);
            f(&r, &c);
            next = r.offset + 1;
        }
    }
}
