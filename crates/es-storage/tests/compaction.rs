//! Retention, compaction and DeleteRecords: compaction against a model under
//! random workloads with tombstones, a crash at every sync point of the swap,
//! retention by size and age with cold copies, and a durable log start offset.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use es_storage::reclaim::{Pace, Reclaimer, Step};
use es_storage::simfs::{SimFs, Tear};
use es_storage::Storage;
use es_storage::{
    CompactionPolicy, Partition, PartitionConfig, RecordBatchBuf, RecordIter, RecordMeta,
    RetentionPolicy, StorageError,
};
use proptest::prelude::*;

type Rec = (u64, Option<Vec<u8>>, Option<Vec<u8>>, i64);

fn cfg() -> PartitionConfig {
    PartitionConfig {
        segment_bytes: 1024,
        ..PartitionConfig::default()
    }
}

fn read_all(p: &Partition) -> Vec<Rec> {
    let mut out = Vec::new();
    common::read_from_start(p, 1 << 20, |r, _| {
        out.push((
            r.offset,
            r.key.map(<[u8]>::to_vec),
            r.value.map(<[u8]>::to_vec),
            r.timestamp_ms,
        ))
    });
    out
}

/// Writes (key, value) records one append each; None key = keyless, None value = tombstone.
fn fill(p: &Partition, recs: &[(Option<u8>, Option<u16>)], ts: i64) {
    for (k, v) in recs {
        let key = k.map(|k| format!("key-{k}").into_bytes());
        let val = v.map(|v| format!("value-{v}-{}", "p".repeat((v % 50) as usize)).into_bytes());
        let mut b = RecordBatchBuf::new();
        b.push(
            ts,
            key.as_deref(),
            val.as_deref(),
            std::iter::empty(),
            &RecordMeta::default(),
        );
        let info = p.append(&mut b).expect("append");
        p.wait_durable(info.last_offset + 1).expect("durable");
    }
}

/// Newest value per key, folding records in offset order.
fn fold(recs: &[Rec]) -> BTreeMap<Vec<u8>, Option<Vec<u8>>> {
    let mut m = BTreeMap::new();
    for (_, k, v, _) in recs {
        if let Some(k) = k {
            m.insert(k.clone(), v.clone());
        }
    }
    m
}

fn policy(delete_retention_ms: i64) -> CompactionPolicy {
    CompactionPolicy {
        delete_retention_ms,
        min_cleanable_dirty_ratio: 0.0,
        ..CompactionPolicy::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn compaction_matches_the_model(recs in proptest::collection::vec((proptest::option::weighted(0.9, 0u8..12), proptest::option::weighted(0.85, any::<u16>())), 1..250), drop_tombstones in any::<bool>()) {
        let fs = SimFs::new();
        let dir = PathBuf::from("/p");
        let p = Partition::open(&Storage::new(Arc::new(fs.clone())), dir.clone(), cfg()).expect("open");
        fill(&p, &recs, 1_000);
        let before = read_all(&p);
        let active_base = p.segments().last().expect("active").base_offset;
        // The first pass keeps every tombstone (delete.retention.ms counts
        // from then); a second one after delete.retention.ms drops them.
        p.compact(&policy(1000), 1_000_000).expect("compact");
        if drop_tombstones {
            p.compact(&policy(1000), 1_001_001).expect("second pass");
        }
        let after = read_all(&p);
        // The model: in the sealed part, keyless records and each key's newest
        // record survive (tombstones too, until a pass after their horizon);
        // the active segment is untouched.
        let mut newest = BTreeMap::new();
        for (o, k, _, _) in before.iter().filter(|r| r.0 < active_base) {
            if let Some(k) = k { newest.insert(k.clone(), *o); }
        }
        let want: Vec<Rec> = before.iter().filter(|(o, k, v, _)| {
            if *o >= active_base { return true; }
            match k {
                None => true,
                Some(k) => newest.get(k) == Some(o) && !(v.is_none() && drop_tombstones),
            }
        }).cloned().collect();
        prop_assert_eq!(&after, &want);
        // Reading the compacted log gives the same newest value per key (dropped tombstones aside).
        let mut f_before = fold(&before);
        let mut f_after = fold(&after);
        f_before.retain(|_, v| v.is_some());
        f_after.retain(|_, v| v.is_some());
        prop_assert_eq!(f_before, f_after);
        // And it survives a reopen, passing recovery's checks.
        drop(p);
        let q = Partition::open(&Storage::new(Arc::new(fs.crash_image(Tear::None))), dir, cfg()).expect("reopen");
        prop_assert_eq!(read_all(&q), want);
    }
}

/// A retention pass at t=1,000,000 with `retention.ms` 0: every sealed
/// segment written before then goes.
fn retain_nothing_old(p: &Partition) -> es_storage::RetentionReport {
    p.enforce_retention(
        &RetentionPolicy {
            retention_ms: Some(0),
            ..RetentionPolicy::default()
        },
        1_000_000,
    )
    .expect("retention")
}

fn workload() -> Vec<(Option<u8>, Option<u16>)> {
    (0..120u16)
        .map(|i| {
            (
                Some((i % 9) as u8),
                if i % 17 == 0 { None } else { Some(i) },
            )
        })
        .collect()
}

#[test]
fn crash_at_every_sync_point_of_a_swap() {
    let dir = PathBuf::from("/data/topics/t/0");
    let setup = || {
        let fs = SimFs::new();
        let p =
            Partition::open(&Storage::new(Arc::new(fs.clone())), dir.clone(), cfg()).expect("open");
        fill(&p, &workload(), 1_000);
        (fs, p)
    };
    let (fs0, p0) = setup();
    let original = read_all(&p0);
    let s0 = fs0.sync_count();
    let rep = p0.compact(&policy(1000), 1_000).expect("compact");
    assert!(
        rep.records_dropped > 0 && rep.segments_replaced > 1,
        "{rep:?}"
    );
    let compacted = read_all(&p0);
    let syncs = fs0.sync_count() - s0;
    assert!(syncs >= 5, "{syncs} sync points");
    for k in 1..=syncs {
        for tear in [Tear::None, Tear::Prefix(k)] {
            let (fs, p) = setup();
            fs.crash_at_sync(s0 + k);
            assert!(
                p.compact(&policy(1000), 1_000).is_err(),
                "k={k}: the crash interrupts the pass"
            );
            let img = fs.crash_image(tear);
            let q = Partition::open(&Storage::new(Arc::new(img.clone())), dir.clone(), cfg())
                .expect("recover");
            let got = read_all(&q);
            assert!(
                got == original || got == compacted,
                "k={k} {tear:?}: a mix of old and new segments ({} records)",
                got.len()
            );
            let names = img.clone();
            drop(q);
            let q2 = Partition::open(&Storage::new(Arc::new(names)), dir.clone(), cfg())
                .expect("recover twice");
            assert_eq!(
                read_all(&q2),
                got,
                "k={k}: recovering twice gives the same state"
            );
            // No marker or cleaned files are left behind.
            let left: Vec<String> = es_storage::fs::Fs::list(&img, &dir)
                .expect("ls")
                .into_iter()
                .filter(|n| n.ends_with(".cleaned") || n == "compaction.marker")
                .collect();
            assert!(left.is_empty(), "k={k}: {left:?}");
        }
    }
}

#[test]
fn a_pass_that_drops_nothing_is_skipped_and_dirty_ratio_is_honoured() {
    let fs = SimFs::new();
    let p = Partition::open(
        &Storage::new(Arc::new(fs.clone())),
        PathBuf::from("/p"),
        cfg(),
    )
    .expect("open");
    let unique: Vec<(Option<u8>, Option<u16>)> = (0..40u16).map(|i| (None, Some(i))).collect();
    fill(&p, &unique, 1);
    let rep = p.compact(&policy(1000), 1).expect("compact");
    assert_eq!(rep.skipped, Some("nothing to drop"));
    // Everything is clean now: with a ratio of 0.5 the next pass is skipped.
    let rep = p
        .compact(
            &CompactionPolicy {
                min_cleanable_dirty_ratio: 0.5,
                ..policy(1000)
            },
            1,
        )
        .expect("compact");
    assert_eq!(
        rep.skipped,
        Some("dirty ratio below min.cleanable.dirty.ratio")
    );
}

#[test]
fn tombstones_outlive_their_first_pass_by_delete_retention_ms() {
    let fs = SimFs::new();
    let p = Partition::open(
        &Storage::new(Arc::new(fs.clone())),
        PathBuf::from("/p"),
        cfg(),
    )
    .expect("open");
    // Tombstones timestamped long ago: by their age they would be gone.
    let recs: Vec<(Option<u8>, Option<u16>)> = (0..60u16)
        .map(|i| (Some((i % 6) as u8), (i < 54).then_some(i)))
        .collect();
    fill(&p, &recs, 1);
    // A young record per extra key, so that the tombstones end up sealed.
    let more: Vec<(Option<u8>, Option<u16>)> = (0..40u16)
        .map(|i| (Some(100 + (i % 4) as u8), Some(i)))
        .collect();
    fill(&p, &more, 1);
    let tombstones = |recs: &[Rec]| recs.iter().filter(|r| r.2.is_none()).count();
    let keep = CompactionPolicy {
        min_cleanable_dirty_ratio: 0.5,
        ..policy(10_000)
    };
    let rep = p.compact(&keep, 100_000).expect("first pass");
    assert!(rep.records_dropped > 0, "{rep:?}");
    assert_eq!(
        tombstones(&read_all(&p)),
        6,
        "first pass keeps the tombstones"
    );
    // Before the horizon (100,000 + 10,000) the log is clean: skipped.
    let rep = p.compact(&keep, 109_999).expect("pass");
    assert_eq!(
        rep.skipped,
        Some("dirty ratio below min.cleanable.dirty.ratio")
    );
    assert_eq!(tombstones(&read_all(&p)), 6);
    // The horizon survives a reopen, and once it has passed a pass runs
    // although nothing is dirty, and drops the tombstones.
    drop(p);
    let p = Partition::open(
        &Storage::new(Arc::new(fs.crash_image(Tear::None))),
        PathBuf::from("/p"),
        cfg(),
    )
    .expect("reopen");
    let rep = p.compact(&keep, 110_001).expect("pass after the horizon");
    assert_eq!(rep.records_dropped, 6, "{rep:?}");
    assert_eq!(tombstones(&read_all(&p)), 0);
    // Done: the next pass has nothing to do.
    let rep = p.compact(&keep, 200_000).expect("pass");
    assert_eq!(
        rep.skipped,
        Some("dirty ratio below min.cleanable.dirty.ratio")
    );
}

#[test]
fn min_and_max_compaction_lag_are_honoured() {
    let fs = SimFs::new();
    let p = Partition::open(
        &Storage::new(Arc::new(fs.clone())),
        PathBuf::from("/p"),
        cfg(),
    )
    .expect("open");
    // Old records (timestamp 1000) then young ones (timestamp 9000), all
    // overwriting the same five keys, enough for several segments each.
    let keyed = |n: u16| -> Vec<(Option<u8>, Option<u16>)> {
        (0..n).map(|i| (Some((i % 5) as u8), Some(i))).collect()
    };
    fill(&p, &keyed(60), 1_000);
    let young_from = p.log_end_offset();
    fill(&p, &keyed(60), 9_000);
    let before = read_all(&p);
    // At time 10,000 with a lag of 5,000, only segments whose records are
    // all at or before 5,000 may be compacted: the old ones.
    let lag = CompactionPolicy {
        min_compaction_lag_ms: 5_000,
        ..policy(1000)
    };
    let rep = p.compact(&lag, 10_000).expect("compact");
    assert!(rep.records_dropped > 0, "{rep:?}");
    let after = read_all(&p);
    // Every young record is still there, in order.
    let young =
        |recs: &[Rec]| -> Vec<Rec> { recs.iter().filter(|r| r.0 >= young_from).cloned().collect() };
    assert_eq!(young(&after), young(&before));
    // The old records were compacted: at most one per key among them (the
    // segment holding both old and young records is not compacted either).
    let first_young_segment = p
        .segments()
        .iter()
        .rev()
        .find(|s| s.base_offset <= young_from)
        .expect("segment")
        .base_offset;
    let old: Vec<&Rec> = after.iter().filter(|r| r.0 < first_young_segment).collect();
    let mut keys: Vec<_> = old.iter().map(|r| r.1.clone()).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), old.len(), "one record per key below the lag");
    // At time 5,900 every record is within the lag: nothing to do.
    let rep = p.compact(&lag, 5_900).expect("compact");
    assert_eq!(
        rep.skipped,
        Some("every sealed segment is within min.compaction.lag.ms")
    );

    // max.compaction.lag.ms: once part of the log is clean, a dirty ratio of
    // 1.0 is out of reach, but dirty records older than the lag are
    // compacted anyway.
    let q = Partition::open(
        &Storage::new(Arc::new(fs.clone())),
        PathBuf::from("/q"),
        cfg(),
    )
    .expect("open");
    fill(&q, &keyed(60), 1_000);
    let rep = q.compact(&policy(1000), 1_500).expect("first pass");
    assert!(rep.records_dropped > 0, "{rep:?}");
    fill(&q, &keyed(60), 2_000);
    let strict = CompactionPolicy {
        min_cleanable_dirty_ratio: 1.0,
        ..policy(1000)
    };
    let rep = q.compact(&strict, 3_000).expect("compact");
    assert_eq!(
        rep.skipped,
        Some("dirty ratio below min.cleanable.dirty.ratio")
    );
    // Not yet overdue: the oldest dirty record (1,000) is 2,000 ms old.
    let not_yet = CompactionPolicy {
        max_compaction_lag_ms: 2_500,
        ..strict.clone()
    };
    let rep = q.compact(&not_yet, 3_000).expect("compact");
    assert_eq!(
        rep.skipped,
        Some("dirty ratio below min.cleanable.dirty.ratio")
    );
    let overdue = CompactionPolicy {
        max_compaction_lag_ms: 1_500,
        ..strict
    };
    let rep = q.compact(&overdue, 3_000).expect("compact");
    assert!(rep.records_dropped > 0, "overdue dirt compacted: {rep:?}");
}

#[test]
fn fetch_from_a_compacted_offset_returns_the_next_survivor() {
    let fs = SimFs::new();
    let p = Partition::open(&Storage::new(Arc::new(fs)), PathBuf::from("/p"), cfg()).expect("open");
    fill(&p, &workload(), 1_000);
    p.compact(&policy(1000), 1_000).expect("compact");
    let after = read_all(&p);
    // The keys cycle, so the survivors of the sealed part are its last few
    // records: everything from 0 up to the first survivor was compacted away.
    let first_survivor = after[0].0;
    assert!(first_survivor > 0);
    assert_eq!(p.log_start_offset(), 0);
    for asked in [0, first_survivor / 2, first_survivor] {
        let c = p.read(asked, 1 << 20).expect("read a compacted offset");
        let first = RecordIter::new(&c.data)
            .next()
            .expect("record")
            .expect("valid");
        assert_eq!(first.offset, first_survivor);
    }
}

#[test]
fn unreadable_record_aborts_compaction() {
    let fs = SimFs::new();
    let dir = PathBuf::from("/p");
    let p = Partition::open(&Storage::new(Arc::new(fs.clone())), dir.clone(), cfg()).expect("open");
    fill(&p, &workload(), 1_000);
    let victim = p.segments()[1].log_path.clone();
    drop(p);
    fs.corrupt(&victim, 60, 0xff).expect("corrupt");
    let p = Partition::open(&Storage::new(Arc::new(fs.clone())), dir, cfg()).expect("open");
    let before = read_all(&p);
    assert!(matches!(
        p.compact(&policy(1000), 1_000),
        Err(StorageError::Corrupt { .. })
    ));
    assert_eq!(read_all(&p), before);
}

fn dir_names(fs: &SimFs, d: &Path) -> Vec<String> {
    es_storage::fs::Fs::list(fs, d).unwrap_or_default()
}

#[test]
fn retention_by_size_and_age_with_cold_copies() {
    let fs = SimFs::new();
    let dir = PathBuf::from("/data/topics/t/0");
    let cold = PathBuf::from("/cold/t/0");
    let p = Partition::open(&Storage::new(Arc::new(fs.clone())), dir.clone(), cfg()).expect("open");
    let recs: Vec<(Option<u8>, Option<u16>)> = (0..100u16).map(|i| (None, Some(i))).collect();
    fill(&p, &recs[..50], 1_000);
    fill(&p, &recs[50..], 5_000);
    let size = p.size_bytes();
    let nsegs = p.segments().len();
    // By size: the oldest sealed segments go until under the limit.
    let rep = p
        .enforce_retention(
            &RetentionPolicy {
                retention_bytes: Some(size / 2),
                cold_dir: Some(cold.clone()),
                ..RetentionPolicy::default()
            },
            10_000,
        )
        .expect("retention");
    assert!(!rep.deleted_segments.is_empty());
    assert!(
        p.size_bytes() <= size / 2 + 1024,
        "under the limit give or take a segment"
    );
    assert_eq!(p.log_start_offset(), p.segments()[0].base_offset);
    assert_eq!(rep.log_start_offset, p.log_start_offset());
    for b in &rep.deleted_segments {
        let n = format!("{b:020}.log");
        assert!(dir_names(&fs, &cold).contains(&n), "cold copy of {n}");
        assert!(!dir_names(&fs, &dir).contains(&n));
    }
    assert!(matches!(
        p.read(0, 100),
        Err(StorageError::OffsetOutOfRange { .. })
    ));
    // By age: everything written at t=1000 is older than 2000 ms at t=4000.
    let rep = p
        .enforce_retention(
            &RetentionPolicy {
                retention_ms: Some(2_000),
                ..RetentionPolicy::default()
            },
            4_000,
        )
        .expect("retention");
    let left = read_all(&p);
    assert!(
        left.iter()
            .all(|r| r.3 == 5_000 || r.0 >= p.segments()[0].base_offset),
        "{rep:?}"
    );
    assert!(left.iter().any(|r| r.3 == 5_000));
    // The active segment is never deleted.
    let rep = retain_nothing_old(&p);
    assert_eq!(p.segments().len(), 1, "{rep:?} of {nsegs}");
    assert_eq!(read_all(&p).last().map(|r| r.0), Some(99));
    // The log start offset survives a crash.
    let start = p.log_start_offset();
    let q = Partition::open(
        &Storage::new(Arc::new(fs.crash_image(Tear::None))),
        dir,
        cfg(),
    )
    .expect("reopen");
    assert_eq!(q.log_start_offset(), start);
}

#[test]
fn failed_cold_copy_keeps_the_segment() {
    let fs = SimFs::new();
    let dir = PathBuf::from("/d/p");
    let p = Partition::open(&Storage::new(Arc::new(fs.clone())), dir.clone(), cfg()).expect("open");
    fill(
        &p,
        &(0..40u16).map(|i| (None, Some(i))).collect::<Vec<_>>(),
        1,
    );
    let n = p.segments().len();
    fs.fail_sync_at(fs.sync_count() + 1);
    let rep = p
        .enforce_retention(
            &RetentionPolicy {
                retention_ms: Some(0),
                cold_dir: Some(PathBuf::from("/cold")),
                ..RetentionPolicy::default()
            },
            10,
        )
        .expect("pass");
    assert!(rep.cold_copy_failed);
    assert!(rep.deleted_segments.is_empty());
    assert_eq!(p.segments().len(), n);
    let rep = p
        .enforce_retention(
            &RetentionPolicy {
                retention_ms: Some(0),
                cold_dir: Some(PathBuf::from("/cold")),
                ..RetentionPolicy::default()
            },
            10,
        )
        .expect("retry");
    assert_eq!(rep.deleted_segments.len(), n - 1);
}

#[test]
fn delete_records_moves_the_log_start_durably() {
    let fs = SimFs::new();
    let dir = PathBuf::from("/d/p");
    let p = Partition::open(&Storage::new(Arc::new(fs.clone())), dir.clone(), cfg()).expect("open");
    fill(
        &p,
        &(0..40u16).map(|i| (None, Some(i))).collect::<Vec<_>>(),
        1,
    );
    assert_eq!(p.delete_records_before(17).expect("delete"), 17);
    assert!(matches!(
        p.read(16, 100),
        Err(StorageError::OffsetOutOfRange { .. })
    ));
    assert_eq!(read_all(&p)[0].0, 17);
    assert!(matches!(
        p.delete_records_before(41),
        Err(StorageError::OffsetOutOfRange { .. })
    ));
    let q = Partition::open(
        &Storage::new(Arc::new(fs.crash_image(Tear::None))),
        dir,
        cfg(),
    )
    .expect("reopen");
    assert_eq!(q.log_start_offset(), 17);
    assert_eq!(read_all(&q)[0].0, 17);
    // Retention removes the segments wholly below it.
    q.enforce_retention(&RetentionPolicy::default(), 0)
        .expect("retention");
    assert!(q.segments()[0].base_offset <= 17);
    assert!(q.segments().get(1).is_none_or(|s| s.base_offset > 17));
}

#[test]
fn aborted_transactional_records_are_dropped_and_do_not_shadow_committed_values() {
    let fs = SimFs::new();
    let p = Partition::open(&Storage::new(Arc::new(fs)), PathBuf::from("/p"), cfg()).expect("open");
    let push = |key: Option<&[u8]>, value: &[u8], meta: RecordMeta| {
        let mut b = RecordBatchBuf::new();
        b.push(1, key, Some(value), std::iter::empty(), &meta);
        let info = p.append(&mut b).expect("append");
        p.wait_durable(info.last_offset + 1).expect("durable");
    };
    let txn = |pid: i64, control: bool| RecordMeta {
        producer: Some(es_storage::ProducerInfo {
            producer_id: pid,
            producer_epoch: 0,
            sequence: 0,
        }),
        transactional: true,
        control,
    };
    push(Some(b"k"), b"committed-old", RecordMeta::default());
    push(Some(b"k"), b"aborted-new", txn(7, false));
    push(Some(b"m"), b"aborted-m", txn(7, false));
    push(Some(b"\x00\x00\x00\x00"), b"abort-marker", txn(7, true)); // type 0 = abort
    push(Some(b"z"), b"committed-txn", txn(8, false));
    push(Some(b"\x00\x00\x00\x01"), b"commit-marker", txn(8, true)); // type 1 = commit
                                                                     // Seal all of it.
    for i in 0..30u16 {
        push(
            None,
            format!("filler-{i}-{}", "f".repeat(60)).as_bytes(),
            RecordMeta::default(),
        );
    }
    let kind: fn(&es_storage::RecordView<'_>) -> Option<bool> =
        |r| r.key.and_then(|k| k.get(3)).map(|t| *t == 0);
    p.compact(
        &CompactionPolicy {
            control_kind: kind,
            ..policy(1000)
        },
        1,
    )
    .expect("compact");
    let vals: Vec<Vec<u8>> = read_all(&p)
        .into_iter()
        .filter_map(|r| r.2)
        .filter(|v| !v.starts_with(b"filler"))
        .collect();
    assert_eq!(
        vals,
        vec![
            b"committed-old".to_vec(),
            b"abort-marker".to_vec(),
            b"committed-txn".to_vec(),
            b"commit-marker".to_vec()
        ]
    );
}

/// Steps `r` until it has nothing it may cut; returns what the last step said.
fn reclaim_all_it_can(r: &Reclaimer) -> Step {
    loop {
        match r.step() {
            Step::Freed { .. } => continue,
            other => return other,
        }
    }
}

/// Bytes of the records a segment serves through its open files.
fn bytes_served(seg: &es_storage::segment::Segment) -> u64 {
    let mut n = 0;
    seg.for_each_record(seg.valid_len(), |r| {
        n += r.encoded_len as u64;
        true
    })
    .expect("readable through the open handle");
    n
}

#[test]
fn deleted_segments_are_freed_by_the_reclaimer_only_once_their_readers_are_done() {
    let tmp = tempfile::tempdir().expect("tmp");
    let reclaimer = Arc::new(Reclaimer::new(Pace {
        step_bytes: 100,
        pause: std::time::Duration::ZERO,
    }));
    let storage = Storage::new(Arc::new(es_storage::RealFs)).with_reclaimer(reclaimer.clone());
    let p = Partition::open(&storage, tmp.path().join("p"), cfg()).expect("open");
    fill(&p, &workload(), 1_000);
    let segs = p.segments();
    assert!(segs.len() > 4, "{} segments", segs.len());
    // A reader holds the first segment while retention deletes it and more.
    let reader = segs[0].clone();
    let served = bytes_served(&reader);
    assert!(served > 100);
    drop(segs);
    let rep = retain_nothing_old(&p);
    let deleted = rep.deleted_segments.len();
    assert!(deleted >= 3, "{rep:?}");
    assert!(!reader.log_path.exists(), "retention unlinked the segment");
    // Each deleted segment's log and index went to the reclaimer, which
    // frees all but the one in use.
    assert_eq!(reclaimer.held(), 2 * deleted);
    assert_eq!(reclaim_all_it_can(&reclaimer), Step::InUse);
    assert_eq!(reclaimer.held(), 2, "the reader's log and index");
    assert_eq!(bytes_served(&reader), served, "untouched while in use");
    drop(reader);
    assert_eq!(reclaim_all_it_can(&reclaimer), Step::Idle);
    assert_eq!(reclaimer.held(), 0);

    // Compaction hands over the segments it replaced, once they are gone.
    fill(&p, &workload(), 2_000);
    let sealed = p.segments().len() - 1;
    let rep = p.compact(&policy(1000), 1_000_000).expect("compact");
    assert_eq!(rep.segments_replaced, sealed, "{rep:?}");
    assert_eq!(reclaimer.held(), 2 * sealed);
    assert_eq!(reclaim_all_it_can(&reclaimer), Step::Idle);
    // What is left reads back whole.
    assert!(!read_all(&p).is_empty());
}

/// Found by the power-loss test (seeds 3, 27, 31, 41 of
/// `tests/power_loss.rs`): a pass that dropped the first records of the log
/// named its first output segment after its first surviving record, and a
/// partition with no recorded log start starts at its first segment after a
/// restart, so the log start moved up across a restart (a consumer's
/// committed offset in the dropped range became out of range). The pass now
/// records the log start before the swap.
#[test]
fn a_compaction_that_drops_the_first_records_keeps_the_log_start_over_a_restart() {
    let fs = SimFs::new();
    let dir = PathBuf::from("/d/p");
    let storage = Storage::new(Arc::new(fs.clone()));
    let p = Partition::open(&storage, dir.clone(), cfg()).expect("open");
    // Offsets 0..10 hold key 0, superseded later; enough to roll segments.
    let mut recs: Vec<(Option<u8>, Option<u16>)> = (0..10).map(|i| (Some(0), Some(i))).collect();
    recs.extend((0..40).map(|i| (Some(1 + (i % 5) as u8), Some(100 + i))));
    recs.push((Some(0), Some(999)));
    fill(&p, &recs, 1);
    assert!(p.segments().len() > 2, "several segments to compact");
    let r = p.compact(&policy(0), 10_000).expect("compact");
    assert!(r.records_dropped > 0, "{r:?}");
    assert!(p.segments()[0].base_offset > 0, "offset 0 was dropped");
    assert_eq!(p.log_start_offset(), 0);
    let live = read_all(&p);
    drop(p);
    for img in [fs.crash_image(Tear::None), fs.clone()] {
        let q = Partition::open(&Storage::new(Arc::new(img)), dir.clone(), cfg()).expect("reopen");
        assert_eq!(q.log_start_offset(), 0, "the log start stays where it was");
        let c = q
            .read(0, 1 << 20)
            .expect("a read from the old start is served");
        let first = RecordIter::new(&c.data)
            .next()
            .expect("a record")
            .expect("valid");
        assert_eq!(first.offset, live[0].0);
        assert_eq!(read_all(&q), live);
    }
}

/// Found by the power-loss test (seed 705): with a flush policy of N
/// records the high watermark is the written end, so DeleteRecords can
/// move the log start (durably) past records that are not durable yet. A
/// power loss then left a log ending below its recorded log start; the
/// open clamped the log start to the log end without recording it, new
/// records were acknowledged at offsets below the recorded start, and the
/// next open hid them below it. The log now continues at the log start.
#[test]
fn a_log_start_past_the_recovered_log_end_is_where_the_log_continues() {
    let fs = SimFs::new();
    let dir = PathBuf::from("/d/p");
    let every_five = PartitionConfig {
        flush: es_storage::FlushPolicy {
            every_records: 5,
            ..es_storage::FlushPolicy::default()
        },
        ..cfg()
    };
    let p = Partition::open(&Storage::new(Arc::new(fs.clone())), dir.clone(), every_five)
        .expect("open");
    let mut b = RecordBatchBuf::new();
    for i in 0..3 {
        b.push(
            1,
            None,
            Some(format!("lost-{i}").as_bytes()),
            std::iter::empty(),
            &RecordMeta::default(),
        );
    }
    p.append(&mut b).expect("append");
    assert_eq!(p.high_watermark(), 3, "visible before any fsync");
    assert_eq!(p.delete_records_before(2).expect("DeleteRecords"), 2);
    drop(p);
    let img = fs.crash_image(Tear::None);
    let q = Partition::open(
        &Storage::new(Arc::new(img.clone())),
        dir.clone(),
        every_five,
    )
    .expect("recover");
    assert_eq!(q.log_start_offset(), 2, "the acknowledged log start stays");
    assert_eq!(q.log_end_offset(), 2, "the log continues at the log start");
    let mut b = RecordBatchBuf::new();
    b.push(
        1,
        None,
        Some(b"kept"),
        std::iter::empty(),
        &RecordMeta::default(),
    );
    let info = q.append(&mut b).expect("append");
    assert_eq!(
        info.base_offset, 2,
        "no offset below the log start is given again"
    );
    q.flush().expect("flush");
    drop(q);
    let r = Partition::open(
        &Storage::new(Arc::new(img.crash_image(Tear::None))),
        dir,
        every_five,
    )
    .expect("reopen");
    assert_eq!(r.log_start_offset(), 2);
    let got = read_all(&r);
    assert_eq!(got.len(), 1, "the acknowledged record is visible: {got:?}");
    assert_eq!(got[0].0, 2);
    assert_eq!(got[0].2.as_deref(), Some(&b"kept"[..]));
}

/// Found with failed fsyncs in the power-loss test (seeds 96, 754): a
/// compaction pass whose swap failed part way (after its marker) returned
/// an error and left the partition running on the old segment list while
/// the names on disk held the new segments. Retention then deleted, by
/// name, a file that held survivors of later segments too, and the restart
/// finished the swap without them: newest values of keys were lost. A
/// failed swap now fences the partition (and a fenced partition's
/// retention, DeleteRecords and compaction refuse), so the restart finishes
/// the swap from an untouched disk. Here: every sync of a pass fails in
/// turn, retention runs after it, then the power goes.
#[test]
fn a_failed_swap_fences_the_partition_and_loses_no_newest_value() {
    let dir = PathBuf::from("/d/p");
    // Key 9 at offset 0 survives, so the first output segment keeps the
    // first replaced segment's name.
    let mut recs: Vec<(Option<u8>, Option<u16>)> = vec![(Some(9), Some(0))];
    recs.extend((0..29).map(|i| (Some((i % 6) as u8), Some(i + 1))));
    // Keys written once, in sealed segments: their newest (only) values
    // are what the compacted segments hold.
    recs.extend((20..26).map(|k| (Some(k), Some(u16::from(k) * 100))));
    recs.extend((0..40).map(|i| (Some((i % 6) as u8), Some(i + 1000))));
    // The first records are old, the rest new: retention by time deletes
    // the first segment only.
    let workload = |fs: &SimFs| {
        let p =
            Partition::open(&Storage::new(Arc::new(fs.clone())), dir.clone(), cfg()).expect("open");
        fill(&p, &recs[..30], 1);
        fill(&p, &recs[30..], 10_000);
        p
    };
    let dry = SimFs::new();
    let p = workload(&dry);
    let before = dry.sync_count();
    p.compact(&policy(0), 10_000).expect("compact");
    let syncs = dry.sync_count() - before;
    assert!(syncs > 5, "{syncs} syncs in a pass");
    let want = fold(&read_all(&p));
    drop(p);
    for k in 1..=syncs {
        let fs = SimFs::new();
        let p = workload(&fs);
        fs.fail_sync_at(before + k);
        let compacted = p.compact(&policy(0), 10_000);
        let retention = RetentionPolicy {
            retention_ms: Some(5_000),
            ..RetentionPolicy::default()
        };
        let kept = p.enforce_retention(&retention, 10_000);
        let mid_swap = compacted.is_err()
            && es_storage::fs::Fs::exists(&fs, &dir.join(es_storage::compaction::MARKER_FILE));
        if mid_swap {
            assert!(
                matches!(kept, Err(StorageError::Fenced(_)))
                    || kept.as_ref().is_ok_and(|r| r.deleted_segments.is_empty()),
                "k={k}: retention ran on a partition whose swap failed: {kept:?}"
            );
        }
        let log_start = p.log_start_offset();
        if mid_swap {
            // Power-loss seed 23725: a fenced partition closed "cleanly".
            assert!(
                p.close().is_err(),
                "k={k}: a fenced partition does not close cleanly"
            );
            assert!(
                !es_storage::fs::Fs::exists(
                    &fs,
                    &dir.join(es_storage::partition::CLEAN_SHUTDOWN_FILE)
                ),
                "k={k}: no clean-shutdown marker"
            );
        }
        drop(p);
        for tear in [Tear::None, Tear::Prefix(k)] {
            let q = Partition::open(
                &Storage::new(Arc::new(fs.crash_image(tear))),
                dir.clone(),
                cfg(),
            )
            .unwrap_or_else(|e| panic!("k={k}: recovery refused: {e}"));
            let got = read_all(&q);
            let start = q.log_start_offset();
            assert!(start >= log_start.min(q.log_end_offset()), "k={k}");
            // Every key's newest value whose record is at or above the log
            // start is there.
            let all = fold(&got);
            for (key, v) in &want {
                let newest = recs
                    .iter()
                    .enumerate()
                    .rev()
                    .find(|(_, (k2, _))| {
                        k2.map(|x| format!("key-{x}").into_bytes()).as_ref() == Some(key)
                    })
                    .map(|(o, _)| o as u64)
                    .expect("written");
                if newest >= start {
                    assert_eq!(
                        all.get(key),
                        Some(v),
                        "k={k} {tear:?}: newest value of {key:?} lost"
                    );
                }
            }
        }
    }
}

/// A compaction says where its scans are as it reads (every segment's end
/// here, the segments being small), its figures only grow, and its last
/// report says every byte read; a compaction with nothing to drop (three
/// scans, not four) ends on the total too.
#[test]
fn a_compaction_reports_its_progress_as_it_reads() {
    use es_storage::compaction::COMPACTION_SCANS;
    use es_storage::CompactionProgress;
    let p = Partition::open(
        &Storage::new(Arc::new(SimFs::new())),
        PathBuf::from("/p"),
        cfg(),
    )
    .expect("open");
    fill(&p, &workload(), 1_000);
    let segs = p.segments();
    let sealed: u64 = segs[..segs.len() - 1].iter().map(|s| s.valid_len()).sum();
    assert!(segs.len() > 4, "several sealed segments: {}", segs.len());
    let mut reports: Vec<CompactionProgress> = Vec::new();
    let rep = p
        .compact_reporting(&policy(1000), 1_000, &mut |r| reports.push(r))
        .expect("compact");
    assert!(rep.records_dropped > 0, "{rep:?}");
    let total = sealed * COMPACTION_SCANS;
    assert!(
        reports
            .iter()
            .all(|r| r.bytes_total == total && r.bytes_read <= total),
        "{reports:?}"
    );
    assert!(
        reports
            .windows(2)
            .all(|w| w[0].bytes_read <= w[1].bytes_read),
        "{reports:?}"
    );
    // One report per sealed segment per scan at least, before the last.
    let before_end = reports.iter().filter(|r| r.bytes_read < total).count();
    assert!(
        before_end >= (segs.len() - 1) * 3,
        "{before_end} reports before the end: {reports:?}"
    );
    assert_eq!(reports.last().map(|r| r.bytes_read), Some(total));

    let mut again: Vec<CompactionProgress> = Vec::new();
    let rep = p
        .compact_reporting(&policy(1000), 1_000, &mut |r| again.push(r))
        .expect("compact again");
    assert_eq!(rep.skipped, Some("nothing to drop"));
    let last = again.last().copied().expect("reports");
    assert_eq!(last.bytes_read, last.bytes_total);
    assert!(again.len() > 2, "{again:?}");
}
