//! Produced-batch notes (`<base>.batches` beside each segment): the records
//! of a compressed batch stay the documented format, the notes come back
//! with reads and across a reopen, recovery keeps only what the log vouches
//! for, retention and compaction remove them with their segments, and a
//! cold copy carries them.

mod common;

use std::path::Path;
use std::sync::Arc;

use es_storage::fs::Fs;
use es_storage::record::ProducedBatch;
use es_storage::Storage;
use es_storage::{
    CompactionPolicy, Partition, PartitionConfig, RealFs, RecordBatchBuf, RecordMeta,
    RetentionPolicy,
};

const RECORDS_PER_BATCH: u64 = 5;

fn cfg() -> PartitionConfig {
    PartitionConfig {
        segment_bytes: 4 * 1024,
        ..PartitionConfig::default()
    }
}

/// Appends `n` produced batches of five keyed records each (codec cycling
/// through gzip, snappy, lz4, zstd), one per append, and one uncompressed
/// record after each. Returns the offset and batch of each.
fn produce(p: &Partition, n: u64) -> Vec<(u64, ProducedBatch)> {
    let mut out = Vec::new();
    for i in 0..n {
        let mut b = RecordBatchBuf::new();
        let codec = (i % 4) as u8 + 1;
        let meta = RecordMeta::default();
        for j in 0..RECORDS_PER_BATCH {
            let key = format!("key-{}", j % 3).into_bytes();
            let value = format!("value-{i}-{j}-{}", "x".repeat(100)).into_bytes();
            if j == 0 {
                b.push_batch_start(1_000 + i as i64, Some(&key), Some(&value), [], &meta, codec);
            } else {
                b.push(1_000 + i as i64, Some(&key), Some(&value), [], &meta);
            }
        }
        b.end_batch();
        b.push(1_000 + i as i64, Some(b"plain"), Some(b"p"), [], &meta);
        // The batch's records are everything before the plain record.
        let stored_bytes = b.record_start(RECORDS_PER_BATCH as usize) as u32;
        let info = p.append(&mut b).expect("append");
        p.wait_durable(info.last_offset + 1).expect("durable");
        out.push((
            info.base_offset,
            ProducedBatch {
                codec,
                last_offset_delta: RECORDS_PER_BATCH as u32 - 1,
                stored_bytes,
            },
        ));
    }
    out
}

/// Every noted batch reachable by reading the partition from its start.
fn noted(p: &Partition) -> Vec<(u64, ProducedBatch)> {
    let mut out = Vec::new();
    common::read_from_start(p, 2048, |r, c| {
        if let Some(b) = c.batch_at(r.offset) {
            out.push((r.offset, b));
        }
    });
    out
}

fn files_with(dir: &Path, suffix: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(suffix))
        .collect();
    v.sort();
    v
}

/// Every record in every `.log` file has the extension bit clear.
fn assert_all_plain(dir: &Path) {
    for name in files_with(dir, ".log") {
        let bytes = std::fs::read(dir.join(&name)).expect("log");
        let mut pos = 0usize;
        while pos < bytes.len() {
            let len = u32::from_be_bytes(bytes[pos..pos + 4].try_into().expect("4"));
            assert_eq!(len & 0x8000_0000, 0, "{name}@{pos}: extension bit set");
            pos += 4 + len as usize;
        }
    }
}

#[test]
fn notes_come_back_with_reads_and_across_a_reopen() {
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = tmp.path().join("topics/t/0");
    let fs: Arc<dyn Fs> = Arc::new(RealFs);
    let p = Partition::open(&Storage::new(fs.clone()), dir.clone(), cfg()).expect("open");
    let want = produce(&p, 40);
    assert!(p.segments().len() > 4, "segments rolled");
    assert_eq!(noted(&p), want);
    // Where a fetch from inside a batch starts: the batch's first record;
    // nowhere else for a batch's first record or a plain record after it.
    for &(o, _) in &want {
        assert_eq!(p.produced_batch_start(o + 2), Some(o));
        assert_eq!(p.produced_batch_start(o + RECORDS_PER_BATCH - 1), Some(o));
        assert_eq!(p.produced_batch_start(o), None);
        assert_eq!(p.produced_batch_start(o + RECORDS_PER_BATCH), None);
    }
    assert_all_plain(&dir);
    assert!(files_with(&dir, ".batches").len() > 4);
    p.close().expect("close");
    drop(p);

    // A note file without its log is left over from a removed segment.
    let stray = dir.join("00000000000000999999.batches");
    std::fs::write(&stray, b"stray").expect("stray");
    let p = Partition::open(&Storage::new(fs.clone()), dir.clone(), cfg()).expect("reopen");
    assert!(!stray.exists(), "stray notes removed");
    assert_eq!(noted(&p), want);

    // Retention deletes notes with their segments.
    let before = files_with(&dir, ".batches").len();
    let rep = p
        .enforce_retention(
            &RetentionPolicy {
                retention_bytes: Some(8 * 1024),
                ..RetentionPolicy::default()
            },
            i64::MAX,
        )
        .expect("retention");
    assert!(!rep.deleted_segments.is_empty());
    for base in &rep.deleted_segments {
        assert!(!dir.join(format!("{base:020}.batches")).exists());
    }
    assert!(files_with(&dir, ".batches").len() < before);
    let start = p.log_start_offset();
    let kept: Vec<_> = want.iter().copied().filter(|(o, _)| *o >= start).collect();
    assert_eq!(noted(&p), kept);
}

#[test]
fn cold_copies_carry_the_notes() {
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = tmp.path().join("topics/t/0");
    let cold = tmp.path().join("cold/t/0");
    let fs: Arc<dyn Fs> = Arc::new(RealFs);
    let p = Partition::open(&Storage::new(fs.clone()), dir.clone(), cfg()).expect("open");
    let want = produce(&p, 40);
    let notes_before: Vec<(String, Vec<u8>)> = files_with(&dir, ".batches")
        .into_iter()
        .map(|n| {
            let b = std::fs::read(dir.join(&n)).expect("notes");
            (n, b)
        })
        .collect();
    let rep = p
        .enforce_retention(
            &RetentionPolicy {
                retention_bytes: Some(8 * 1024),
                cold_dir: Some(cold.clone()),
                ..RetentionPolicy::default()
            },
            i64::MAX,
        )
        .expect("retention");
    assert!(rep.deleted_segments.len() > 2, "{rep:?}");
    for base in &rep.deleted_segments {
        for ext in ["log", "index", "batches"] {
            let n = format!("{base:020}.{ext}");
            assert!(cold.join(&n).exists(), "cold copy of {n}");
            assert!(!dir.join(&n).exists(), "{n} left behind");
        }
        let n = format!("{base:020}.batches");
        let (_, before) = notes_before
            .iter()
            .find(|(m, _)| *m == n)
            .expect("notes existed");
        assert_eq!(&std::fs::read(cold.join(&n)).expect("cold notes"), before);
    }
    // Opened as a partition, the cold copy serves the deleted segments'
    // batches as they were produced.
    let end = p.log_start_offset();
    let c = Partition::open(&Storage::new(fs), cold, cfg()).expect("open cold copy");
    let gone: Vec<_> = want.iter().copied().filter(|(o, _)| *o < end).collect();
    assert!(!gone.is_empty());
    assert_eq!(noted(&c), gone);
}

#[test]
fn recovery_keeps_only_notes_the_log_vouches_for() {
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = tmp.path().join("topics/t/0");
    let fs: Arc<dyn Fs> = Arc::new(RealFs);
    let cfg = PartitionConfig::default(); // one segment
    let p = Partition::open(&Storage::new(fs.clone()), dir.clone(), cfg).expect("open");
    let want = produce(&p, 6);
    p.close().expect("close");
    drop(p);
    // A crash tore the log inside the last batch: 3 of its records are gone.
    let log = dir.join("00000000000000000000.log");
    let bytes = std::fs::read(&log).expect("log");
    let mut starts = Vec::new();
    let mut pos = 0usize;
    while pos < bytes.len() {
        starts.push(pos);
        pos += 4 + u32::from_be_bytes(bytes[pos..pos + 4].try_into().expect("4")) as usize;
    }
    let (last_batch, _) = want[5];
    let cut = starts[last_batch as usize + 2] + 7; // mid-record
    std::fs::OpenOptions::new()
        .write(true)
        .open(&log)
        .expect("open log")
        .set_len(cut as u64)
        .expect("tear");
    let notes = dir.join("00000000000000000000.batches");
    assert_eq!(std::fs::metadata(&notes).expect("notes").len(), 6 * 24);
    let p = Partition::open(&Storage::new(fs.clone()), dir.clone(), cfg).expect("recover");
    assert_eq!(p.log_end_offset(), last_batch + 2);
    assert_eq!(noted(&p), want[..5].to_vec());
    assert_eq!(std::fs::metadata(&notes).expect("notes").len(), 5 * 24);
    // New appends after recovery are noted after the kept ones.
    let more = produce(&p, 1);
    assert_eq!(more[0].0, last_batch + 2);
    let mut all = want[..5].to_vec();
    all.extend(more);
    assert_eq!(noted(&p), all);
    p.close().expect("close");
    drop(p);
    let p = Partition::open(&Storage::new(fs), dir, cfg).expect("reopen");
    assert_eq!(noted(&p), all);
}

#[test]
fn compaction_drops_the_notes_of_the_segments_it_replaces() {
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = tmp.path().join("topics/t/0");
    let fs: Arc<dyn Fs> = Arc::new(RealFs);
    let p = Partition::open(&Storage::new(fs.clone()), dir.clone(), cfg()).expect("open");
    let want = produce(&p, 40);
    let active_base = p.segments().last().expect("active").base_offset;
    let rep = p
        .compact(
            &CompactionPolicy {
                min_cleanable_dirty_ratio: 0.0,
                ..CompactionPolicy::default()
            },
            2_000,
        )
        .expect("compact");
    assert!(rep.segments_replaced > 0, "{rep:?}");
    // Only the active segment's notes remain, on disk and in reads.
    let kept: Vec<_> = want
        .iter()
        .copied()
        .filter(|(o, _)| *o >= active_base)
        .collect();
    assert_eq!(noted(&p), kept);
    let files = files_with(&dir, ".batches");
    assert_eq!(files, vec![format!("{active_base:020}.batches")]);
    assert_all_plain(&dir);
}
