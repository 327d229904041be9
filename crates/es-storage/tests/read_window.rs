//! The read window of `Partition::read` / `LogSnapshot::read_into` (the
//! path Fetch takes): what it serves does not depend on how the index is
//! spaced or damaged. Each test is a bug found by the power-loss and
//! bit-flip tests: a produced batch cut short when the index is sparser
//! than the configured spacing (a consumer stuck re-fetching it), the rest
//! of a segment skipped when a read from a compacted-away offset follows a
//! record larger than the window, and records skipped when an index entry
//! points at a later record than the one it names.

mod common;

use std::path::PathBuf;
use std::sync::Arc;

use es_storage::simfs::{SimFs, Tear};
use es_storage::{
    Isolation, Partition, PartitionConfig, ReadBuf, RecordBatchBuf, RecordIter, RecordMeta, Storage,
};

fn push(b: &mut RecordBatchBuf, value: &[u8]) {
    b.push(
        1,
        None,
        Some(value),
        std::iter::empty(),
        &RecordMeta::default(),
    );
}

fn offsets(data: &[u8]) -> Vec<u64> {
    RecordIter::new(data)
        .map(|r| r.expect("whole records").offset)
        .collect()
}

/// Power-loss seed 1582: reads size their window by the partition's
/// configured index spacing (`index.interval.bytes`), which need not be
/// the index's: recovery rebuilds indexes at the default 4 KiB, and the
/// setting can change. A fetch from inside a produced batch reads from the
/// batch's start with the batch's stored bytes as budget; the window
/// stopped short of the batch's last (large) record and served the records
/// before the fetch offset only, so the consumer fetched the same offset
/// forever.
#[test]
fn a_produced_batch_is_served_whole_whatever_the_index_spacing() {
    let fs = SimFs::new();
    let dir = PathBuf::from("/d/p");
    let cfg = PartitionConfig {
        segment_bytes: 1 << 20,
        ..PartitionConfig::default()
    };
    let p = Partition::open(&Storage::new(Arc::new(fs)), dir, cfg).expect("open");
    let mut b = RecordBatchBuf::new();
    for _ in 0..30 {
        push(&mut b, &[b'a'; 150]);
    }
    p.append(&mut b).expect("append");
    let mut b = RecordBatchBuf::new();
    b.push_batch_start(
        1,
        None,
        Some(b"first"),
        std::iter::empty(),
        &RecordMeta::default(),
        3,
    );
    push(&mut b, b"second");
    push(&mut b, &vec![b'z'; 70_000]);
    b.end_batch();
    let info = p.append(&mut b).expect("append batch");
    p.wait_durable(info.last_offset + 1).expect("durable");
    // index.interval.bytes lowered: the index keeps its 4 KiB spacing.
    p.set_config(PartitionConfig {
        index_interval_bytes: 64,
        ..cfg
    });
    let last = info.last_offset;
    let snap = p.snapshot(last, Isolation::ReadUncommitted);
    assert_eq!(
        snap.start(),
        info.base_offset,
        "a fetch inside the batch reads from its start"
    );
    let mut rb = ReadBuf::new();
    let first = snap.read_into(snap.start(), 1, &mut rb).expect("read");
    let batch = first
        .batch_at(info.base_offset)
        .expect("the batch is noted");
    let mut wide = ReadBuf::new();
    let whole = snap
        .read_into(snap.start(), batch.stored_bytes as usize, &mut wide)
        .expect("read the batch");
    assert_eq!(
        offsets(whole.data),
        (info.base_offset..=last).collect::<Vec<_>>(),
        "the whole batch, up to the offset fetched"
    );
}

/// A follower of a compacted leader (or a compacted log) has offset gaps. A
/// read from a missing offset whose index entry starts at a record larger
/// than the window read that record, found the window used up at a record
/// boundary with nothing served yet, and returned nothing from the
/// segment: the read went on to the next segment and the rest of this one
/// was skipped.
#[test]
fn a_read_from_a_gap_after_a_large_record_serves_the_next_record() {
    let fs = SimFs::new();
    let p = Partition::open(
        &Storage::new(Arc::new(fs)),
        PathBuf::from("/d/p"),
        PartitionConfig {
            segment_bytes: 1 << 20,
            ..PartitionConfig::default()
        },
    )
    .expect("open");
    let mut b = RecordBatchBuf::new();
    push(&mut b, &vec![b'x'; 70_000]);
    push(&mut b, b"after the gap");
    push(&mut b, b"and one more");
    let info = p.append_replica(&mut b, &[0, 2, 3], 0).expect("append");
    p.wait_durable(info.last_offset + 1).expect("durable");
    let c = p.read(1, 1).expect("read from the gap");
    assert_eq!(
        offsets(&c.data),
        vec![2],
        "the record after the gap, not nothing"
    );
    let c = p.read(1, 1 << 20).expect("read from the gap");
    assert_eq!(offsets(&c.data), vec![2, 3]);
}

/// Bit-flip test: an index entry damaged to point at a later record (its
/// position replaced by another entry's) made a read that started there
/// skip the records in between without a word. The record at an entry must
/// now carry the offset the entry names, else the read starts earlier.
#[test]
fn an_index_entry_pointing_at_another_record_does_not_skip_records() {
    let fs = SimFs::new();
    let dir = PathBuf::from("/d/p");
    let cfg = PartitionConfig {
        segment_bytes: 32 * 1024,
        ..PartitionConfig::default()
    };
    let p = Partition::open(&Storage::new(Arc::new(fs.clone())), dir.clone(), cfg).expect("open");
    for i in 0..400u32 {
        let mut b = RecordBatchBuf::new();
        push(&mut b, format!("value-{i}-{}", "v".repeat(150)).as_bytes());
        let info = p.append(&mut b).expect("append");
        p.wait_durable(info.last_offset + 1).expect("durable");
    }
    p.close().expect("close");
    // A sealed segment with at least three index entries.
    let segs = p.segments();
    let (base, index_path, end) = segs[..segs.len() - 1]
        .iter()
        .find(|s| fs.read_all(&s.index_path).map_or(0, |b| b.len()) >= 48)
        .map(|s| (s.base_offset, s.index_path.clone(), s.end_offset()))
        .expect("a sealed segment with three index entries");
    drop(segs);
    drop(p);
    let index = fs.read_all(&index_path).expect("index");
    assert!(index.len() >= 48, "{} bytes of index", index.len());
    // Entry 1 is moved to the record after the one it names: still
    // strictly increasing, so the open trusts it; it now points at a later
    // record than it names.
    let be = |b: &[u8]| u64::from_be_bytes(b.try_into().expect("8 bytes"));
    let (rel1, pos1, pos2) = (be(&index[16..24]), be(&index[24..32]), be(&index[40..48]));
    let log = fs.read_all(&index_path.with_extension("log")).expect("log");
    let at = pos1 as usize;
    let len1 = u32::from_be_bytes(log[at..at + 4].try_into().expect("4 bytes")) & 0x7fff_ffff;
    let moved = pos1 + 4 + u64::from(len1);
    assert!(moved < pos2, "the next record is before entry 2");
    let mut damaged = index.clone();
    damaged[24..32].copy_from_slice(&moved.to_be_bytes());
    for (i, (a, b)) in index.iter().zip(damaged.iter()).enumerate() {
        if a != b {
            fs.corrupt(&index_path, i, a ^ b).expect("flip");
        }
    }
    let q = Partition::open(
        &Storage::new(Arc::new(fs.crash_image(Tear::None))),
        dir,
        cfg,
    )
    .expect("reopen");
    // Every offset from entry 1's on, one record per read, as a consumer.
    for o in base + rel1..end {
        let c = q.read(o, 1).expect("read");
        assert_eq!(
            offsets(&c.data).first().copied(),
            Some(o),
            "a read from {o}"
        );
    }
    let all = {
        let mut v = Vec::new();
        common::read_from_start(&q, 1000, |r, _| v.push(r.offset));
        v
    };
    assert_eq!(all, (0..400).collect::<Vec<u64>>());
}

/// Bit-flip test (run 4 and others): a fetch from a damaged record inside a
/// produced batch reads from the batch's start; the read served the
/// batch's good records before the damage and stopped there without a
/// word, so the consumer, which skips records below its offset, fetched the
/// same offset forever and the damage was never reported. Such a read now
/// reports the damaged record (file and position).
#[test]
fn a_fetch_from_a_damaged_record_inside_a_batch_reports_it() {
    let fs = SimFs::new();
    let dir = PathBuf::from("/d/p");
    let cfg = PartitionConfig {
        segment_bytes: 16 * 1024,
        ..PartitionConfig::default()
    };
    let p = Partition::open(&Storage::new(Arc::new(fs.clone())), dir.clone(), cfg).expect("open");
    let mut b = RecordBatchBuf::new();
    b.push_batch_start(
        1,
        None,
        Some(b"first"),
        std::iter::empty(),
        &RecordMeta::default(),
        1,
    );
    push(&mut b, b"second");
    push(&mut b, b"third, to be damaged");
    b.end_batch();
    let info = p.append(&mut b).expect("append");
    // Enough after it for later index entries and a roll: the batch is in
    // a sealed segment, where the open checks only the first record and
    // the records after the last index entry.
    for _ in 0..100 {
        let mut b = RecordBatchBuf::new();
        push(&mut b, &[b'f'; 200]);
        p.append(&mut b).expect("append");
    }
    assert!(p.segments().len() > 1, "the batch's segment is sealed");
    p.close().expect("close");
    let log = p.segments()[0].log_path.clone();
    drop(p);
    let bytes = fs.read_all(&log).expect("log");
    let third = RecordIter::new(&bytes)
        .scan(0usize, |pos, r| {
            let r = r.expect("record");
            let at = *pos;
            *pos += r.encoded_len;
            Some((r.offset, at))
        })
        .find(|(o, _)| *o == info.last_offset)
        .map(|(_, at)| at)
        .expect("the third record");
    fs.corrupt(&log, third + 30, 0x04)
        .expect("flip a bit of its value");
    let q = Partition::open(
        &Storage::new(Arc::new(fs.crash_image(Tear::None))),
        dir,
        cfg,
    )
    .expect("reopen");
    let snap = q.snapshot(info.last_offset, Isolation::ReadUncommitted);
    assert_eq!(snap.start(), info.base_offset);
    let mut rb = ReadBuf::new();
    match snap.read_into(snap.start(), 1 << 20, &mut rb) {
        Err(es_storage::StorageError::Corrupt { file, position, .. }) => {
            assert_eq!(file, log.display().to_string());
            assert_eq!(position, third as u64);
        }
        other => panic!("the damage is reported, not {other:?}"),
    }
    // A read from the batch's first record still serves the good ones.
    let c = q.read(info.base_offset, 1 << 20).expect("read");
    assert_eq!(
        offsets(&c.data),
        vec![info.base_offset, info.base_offset + 1]
    );
}
