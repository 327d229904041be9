//! Segment recovery at the top of the offset range: a record at offset
//! u64::MAX (no log can hold it, since the log's end offset would be past
//! u64::MAX) and an index entry whose offset is past u64::MAX are damage,
//! not arithmetic overflows. Found by fuzzing (segment_recovery): both made
//! recovery panic with an overflow in builds with overflow checks, and wrap
//! around (accepting any offset after it) without them.

use std::path::Path;

use es_storage::fs::Fs;
use es_storage::record::{self, RecordMeta};
use es_storage::segment::{file_stem, Segment, INDEX_SUFFIX, LOG_SUFFIX};
use es_storage::simfs::SimFs;

fn put(fs: &SimFs, path: &Path, bytes: &[u8]) {
    let f = fs.create_new(path).expect("create");
    f.write_all_at(bytes, 0).expect("write");
    f.sync_data().expect("sync");
}

fn records(offsets: &[u64]) -> (Vec<u8>, Vec<u64>) {
    let mut log = Vec::new();
    let mut starts = Vec::new();
    for &o in offsets {
        starts.push(log.len() as u64);
        record::encode(
            &mut log,
            o,
            1_700_000_000_000,
            Some(b"k"),
            Some(b"v"),
            std::iter::empty(),
            &RecordMeta::default(),
        );
    }
    (log, starts)
}

#[test]
fn a_record_at_the_last_offset_is_not_kept() {
    let base = u64::MAX - 1;
    let (log, starts) = records(&[base, u64::MAX, 0]);
    for (active, clean) in [(true, false), (false, false), (false, true)] {
        let fs = SimFs::new();
        let dir = Path::new("/p");
        fs.create_dir_all(dir).expect("dir");
        put(
            &fs,
            &dir.join(format!("{}{LOG_SUFFIX}", file_stem(base))),
            &log,
        );
        let (seg, rep) = Segment::open_and_recover(&fs, dir, base, active, clean, 0)
            .expect("damage is not an I/O error");
        assert!(rep.scanned);
        assert_eq!(rep.records, Some(1), "only the record at {base} is kept");
        assert_eq!(seg.valid_len(), starts[1]);
        assert_eq!(seg.end_offset(), u64::MAX);
        if active {
            assert_eq!(rep.truncated_bytes, log.len() as u64 - starts[1]);
        } else {
            assert_eq!(rep.corrupt_at.as_ref().map(|c| c.0), Some(starts[1]));
        }
    }
}

#[test]
fn an_index_entry_past_the_last_offset_is_not_trusted() {
    let base = u64::MAX - 3;
    let (log, starts) = records(&[base, base + 1]);
    let mut index = Vec::new();
    for (rel, pos) in [(0u64, 0u64), (10, starts[1])] {
        index.extend_from_slice(&rel.to_be_bytes());
        index.extend_from_slice(&pos.to_be_bytes());
    }
    let fs = SimFs::new();
    let dir = Path::new("/p");
    fs.create_dir_all(dir).expect("dir");
    let stem = file_stem(base);
    put(&fs, &dir.join(format!("{stem}{LOG_SUFFIX}")), &log);
    put(&fs, &dir.join(format!("{stem}{INDEX_SUFFIX}")), &index);
    let (seg, rep) = Segment::open_and_recover(&fs, dir, base, false, true, 0).expect("recovers");
    assert!(
        rep.scanned,
        "an index past the last offset is rebuilt by a scan"
    );
    assert_eq!(rep.records, Some(2));
    assert_eq!(seg.valid_len(), log.len() as u64);
    assert_eq!(seg.end_offset(), base + 2);
}
