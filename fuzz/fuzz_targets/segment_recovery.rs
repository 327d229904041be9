//! segment_recovery: es-storage's segment recovery over arbitrary file
//! contents (`Segment::open_and_recover`, which every partition's open runs
//! for each segment): the index check of a sealed or cleanly closed segment
//! (`index::parse` and the first and last records), the full scan that
//! rebuilds the index and cuts a torn tail off the active segment, and the
//! `.batches` file's marks. The files are served by es-storage's simulated
//! file system (`simfs`), which counts the bytes read.
//!
//! Input: a flags byte, the index's and the `.batches` file's lengths (u16
//! big-endian each), those two files' bytes, then the `.log`'s bytes.
//! Flags: 0x01 the active segment, 0x02 closed cleanly, 0x04 an index file
//! exists, 0x08 a `.batches` file exists, 0x10 the harness seals the log's
//! records (each record whose length fits gets its offset, the base offset
//! plus its position in the log, and its CRC-32C, which a fuzzer would not
//! get right), 0x20 the index is the right one for the sealed log (an entry
//! every second record) instead of the input's, 0xc0 the base offset (0, 5,
//! 2^40, or 2^64 - 4).
//!
//! Must hold, against a record walk written here from the documented format
//! (docs/storage.md: `record_len`, its extension bit, the CRC-32C range):
//! - no panic, and recovery succeeds: damaged contents are not an I/O error,
//!   and a read past the end of a file would be one (the simulated file system
//!   answers it with zero bytes, which es-storage reports);
//! - it never reads more than three times the files' bytes;
//! - the bytes allocated at once stay below 16 times the files' bytes plus
//!   256 KiB (its reads are windows of the file, its index a fraction);
//! - when the segment is scanned, what it keeps is exactly the longest
//!   prefix of the log made of whole records with right CRCs, the first at
//!   the base offset and the offsets increasing; the active segment's file is
//!   cut to it and a sealed one's is left whole; every kept record reads back;
//! - when the index check trusts the segment without a scan, the whole file is
//!   kept, its index is whole entries increasing from (0, 0), and its first
//!   record and every record from the last entry to the end of the file have
//!   right CRCs and increasing offsets (what the storage document promises of
//!   that check; records between index entries are checked when read);
//! - every kept `.batches` mark lies within the segment's offsets, in order.

#![no_main]

use std::path::Path;

use es_fuzz::alloc::{peak_during, Counting};
use es_fuzz::trace;
use es_storage::fs::Fs;
use es_storage::record;
use es_storage::segment::{file_stem, Segment, BATCHES_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX};
use es_storage::simfs::SimFs;
use libfuzzer_sys::fuzz_target;

#[global_allocator]
static ALLOC: Counting = Counting;

const BASES: [u64; 4] = [0, 5, 1 << 40, u64::MAX - 3];
const EXT_BIT: u32 = 0x8000_0000;
const BODY_MIN: usize = 8 + 8 + 4 + 4 + 4;
const BODY_MAX: usize = 256 * 1024 * 1024;
const NOW_MS: i64 = 1_700_000_000_000;

/// The record at the start of `b`, by the documented format: its encoded
/// length when the length is plausible and the record whole.
fn record_len(b: &[u8]) -> Option<usize> {
    let raw = u32::from_be_bytes(b.get(..4)?.try_into().ok()?);
    let body = (raw & !EXT_BIT) as usize;
    let min = if raw & EXT_BIT != 0 {
        BODY_MIN + 5
    } else {
        BODY_MIN
    };
    if !(min..=BODY_MAX).contains(&body) || b.len() < 4 + body {
        return None;
    }
    Some(4 + body)
}

/// Whether the whole record `r`'s CRC-32C is right (from `offset`, or from
/// `record_len` with the extension, to the end of the value).
fn crc_ok(r: &[u8]) -> bool {
    let start = if r[0] & 0x80 != 0 { 0 } else { 4 };
    let end = r.len() - 4;
    crc32c::crc32c(&r[start..end]) == u32::from_be_bytes(r[end..].try_into().unwrap())
}

fn offset_of(r: &[u8]) -> u64 {
    u64::from_be_bytes(r[4..12].try_into().unwrap())
}

/// Gives every whole record of `log` its offset and CRC; returns the
/// records' positions.
fn seal(log: &mut [u8], base: u64) -> Vec<usize> {
    let mut at = 0;
    let mut starts = Vec::new();
    while let Some(n) = record_len(&log[at..]) {
        let r = &mut log[at..at + n];
        let offset = base.wrapping_add(starts.len() as u64);
        r[4..12].copy_from_slice(&offset.to_be_bytes());
        let start = if r[0] & 0x80 != 0 { 0 } else { 4 };
        let crc = crc32c::crc32c(&r[start..n - 4]);
        r[n - 4..].copy_from_slice(&crc.to_be_bytes());
        starts.push(at);
        at += n;
    }
    starts
}

/// A record es keeps: whole, CRC right, its fields where its length says
/// (es-storage's `record::decode`, which the CRC has already vouched for).
fn good_record(b: &[u8]) -> Option<(u64, usize)> {
    let n = record_len(b)?;
    if !crc_ok(&b[..n]) || record::decode(b).is_err() {
        return None;
    }
    Some((offset_of(b), n))
}

/// The longest prefix of good records, the first at `base`, offsets
/// increasing: its length, its records' count and the next offset.
fn good_prefix(log: &[u8], base: u64) -> (usize, u64, u64) {
    let (mut at, mut count, mut next) = (0, 0u64, base);
    while let Some((offset, n)) = good_record(&log[at..]) {
        if (count == 0 && offset != base) || offset < next {
            break;
        }
        // The last offset has no next one: no log can hold it.
        let Some(after) = offset.checked_add(1) else {
            break;
        };
        next = after;
        count += 1;
        at += n;
    }
    (at, count, next)
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 5 {
        return;
    }
    let flags = data[0];
    let ilen = usize::from(u16::from_be_bytes([data[1], data[2]]));
    let blen = usize::from(u16::from_be_bytes([data[3], data[4]]));
    let rest = &data[5..];
    let ilen = ilen.min(rest.len());
    let (index_in, rest) = rest.split_at(ilen);
    let blen = blen.min(rest.len());
    let (batches, log) = rest.split_at(blen);
    let active = flags & 0x01 != 0;
    let clean = flags & 0x02 != 0;
    let base = BASES[usize::from(flags >> 6)];
    let mut log = log.to_vec();
    let mut index = index_in.to_vec();
    if flags & 0x10 != 0 {
        let starts = seal(&mut log, base);
        if flags & 0x20 != 0 {
            index.clear();
            for (i, &p) in starts.iter().enumerate().step_by(2) {
                index.extend_from_slice(&(i as u64).to_be_bytes());
                index.extend_from_slice(&(p as u64).to_be_bytes());
            }
        }
    }

    let fs = SimFs::new();
    let dir = Path::new("/p-0");
    fs.create_dir_all(dir).unwrap();
    let stem = file_stem(base);
    let write = |suffix: &str, bytes: &[u8]| {
        let f = fs.create_new(&dir.join(format!("{stem}{suffix}"))).unwrap();
        f.write_all_at(bytes, 0).unwrap();
        f.sync_data().unwrap();
    };
    write(LOG_SUFFIX, &log);
    if flags & 0x04 != 0 {
        write(INDEX_SUFFIX, &index);
    } else {
        index.clear(); // recovery creates it empty
    }
    if flags & 0x08 != 0 {
        write(BATCHES_SUFFIX, batches);
    }
    let files_bytes = (log.len() + index.len() + batches.len()) as u64;
    let read_before = fs.bytes_read();

    let (r, peak) =
        peak_during(|| Segment::open_and_recover(&fs, dir, base, active, clean, NOW_MS));
    let (seg, rep) = r.unwrap_or_else(|e| panic!("recovery failed on contents alone: {e}"));
    let read = fs.bytes_read() - read_before;
    trace!("{rep:?}; read {read} of {files_bytes} bytes, peak {peak} bytes");
    assert!(
        read <= 3 * files_bytes,
        "read {read} bytes of files of {files_bytes}"
    );
    let bound = 16 * files_bytes as usize + 256 * 1024;
    assert!(
        peak <= bound,
        "recovery allocated {peak} bytes at once, over {bound}"
    );

    let valid = seg.valid_len();
    let file_now = fs
        .read_all(&dir.join(format!("{stem}{LOG_SUFFIX}")))
        .unwrap();
    assert!(valid <= log.len() as u64);
    if rep.scanned {
        let (len, count, next) = good_prefix(&log, base);
        assert_eq!(valid, len as u64, "kept bytes are the longest good prefix");
        assert_eq!(rep.records, Some(count));
        assert_eq!(seg.end_offset(), next);
        if active {
            assert_eq!(
                file_now,
                log[..len],
                "the active segment is cut to what it keeps"
            );
            assert_eq!(rep.truncated_bytes, (log.len() - len) as u64);
        } else {
            assert_eq!(file_now, log, "a sealed segment's file is left whole");
            assert_eq!(rep.corrupt_at.is_some(), len < log.len());
        }
        let mut seen = 0u64;
        seg.for_each_record(valid, |r| {
            seen += 1;
            assert!(r.offset < next);
            true
        })
        .unwrap_or_else(|e| panic!("a kept record does not read back: {e}"));
        assert_eq!(seen, count);
    } else {
        assert!(
            !active || clean,
            "an unclean active segment is always scanned"
        );
        assert_eq!(valid, log.len() as u64, "a trusted segment is kept whole");
        assert_eq!(file_now, log);
        if log.is_empty() {
            assert!(
                index.is_empty(),
                "an empty log is trusted with an empty index only"
            );
            assert_eq!(seg.end_offset(), base);
            return;
        }
        assert!(!index.is_empty() && index.len() % 16 == 0 && index_is_sorted(&index));
        let (first, _) = good_record(&log).expect("the first record of a trusted segment is good");
        assert_eq!(first, base);
        let last_pos = u64::from_be_bytes(index[index.len() - 8..].try_into().unwrap()) as usize;
        let (mut at, mut next) = (last_pos, 0u64);
        while at < log.len() {
            let (offset, n) =
                good_record(&log[at..]).expect("every record after the last index entry is good");
            assert!(offset >= next);
            next = offset
                .checked_add(1)
                .expect("no kept record has the last offset");
            at += n;
        }
        assert_eq!(at, log.len());
        assert_eq!(seg.end_offset(), next);
        // Records between entries may be bad: reading reports it, never panics.
        let _ = seg.for_each_record(valid, |_| true);
    }
    for probe in [base, base.saturating_add(1), seg.end_offset(), u64::MAX] {
        assert!(seg.lookup(probe) <= valid);
    }
    let marks = seg.marks_from(0, usize::MAX);
    let mut after = None;
    for m in &marks {
        assert!(m.offset >= base && m.last_offset() < seg.end_offset());
        assert!(after.is_none_or(|a| m.offset > a));
        after = Some(m.last_offset());
    }
});

/// Whole 16-byte entries, the first (0, 0), offsets and positions increasing.
fn index_is_sorted(index: &[u8]) -> bool {
    let entries: Vec<(u64, u64)> = index
        .chunks_exact(16)
        .map(|e| {
            (
                u64::from_be_bytes(e[..8].try_into().unwrap()),
                u64::from_be_bytes(e[8..].try_into().unwrap()),
            )
        })
        .collect();
    entries.first() == Some(&(0, 0))
        && entries
            .windows(2)
            .all(|w| w[1].0 > w[0].0 && w[1].1 > w[0].1)
}
