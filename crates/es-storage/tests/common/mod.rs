//! Helpers shared by es-storage's test binaries only (each includes this
//! module with `mod common;`). Helpers any crate's tests may share, the
//! durability channel among them, are in es-test-support.

// Each binary uses some of these helpers, none uses all.
#![allow(dead_code)]

pub mod format_rules;

use es_storage::{Partition, ReadChunk, RecordIter, RecordView};

/// The whole number in environment variable `name`, if it is set.
pub fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|s| {
        s.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={s} is not a number"))
    })
}

/// The seeds a seeded test runs, from the environment: the one seed
/// `alone` names (then `.0` is it), or `count` seeds (default
/// `default_count`) from `first` (default 1). Returns (alone, first, count).
pub fn seeds_from_env(
    alone: &str,
    first: &str,
    count: &str,
    default_count: u64,
) -> (Option<u64>, u64, u64) {
    match env_u64(alone) {
        Some(s) => (Some(s), s, 1),
        None => (
            None,
            env_u64(first).unwrap_or(1),
            env_u64(count).unwrap_or(default_count),
        ),
    }
}

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
