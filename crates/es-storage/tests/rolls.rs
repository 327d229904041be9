//! Rolls on the append path: the append that rolls does no fsync and
//! creates no file (it writes to the segment prepared ahead); the seal that
//! follows gives the new segment its name; and a crash before the seal
//! leaves a contiguous log with everything acknowledged.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use es_storage::fs::Fs;
use es_storage::segment::{PREPARED_INDEX, PREPARED_LOG};
use es_storage::simfs::{SimFs, Tear};
use es_storage::Storage;
use es_storage::{Partition, PartitionConfig, RecordBatchBuf, RecordMeta};

fn cfg() -> PartitionConfig {
    PartitionConfig {
        segment_bytes: 4096,
        ..PartitionConfig::default()
    }
}

fn value(i: u64) -> Vec<u8> {
    let mut v = format!("record-{i}-").into_bytes();
    v.resize(300, b'a' + (i % 26) as u8);
    v
}

fn one(i: u64) -> RecordBatchBuf {
    let mut b = RecordBatchBuf::new();
    b.push(
        0,
        Some(b"k"),
        Some(&value(i)),
        std::iter::empty(),
        &RecordMeta::default(),
    );
    b
}

fn names(fs: &SimFs, dir: &Path) -> Vec<String> {
    let mut n = fs.list(dir).expect("ls");
    n.sort();
    n
}

fn log_name(base: u64) -> String {
    format!("{base:020}.log")
}

/// Appends (each made durable) until the next append rolls; returns the
/// next offset.
fn fill_to_the_roll(p: &Partition) -> u64 {
    let mut next = 0;
    loop {
        let active = p.segments().last().expect("active").clone();
        if active.valid_len() + 400 > cfg().segment_bytes {
            return next;
        }
        let info = p.append(&mut one(next)).expect("append");
        p.wait_durable(info.last_offset + 1).expect("durable");
        next += 1;
    }
}

#[test]
fn the_append_that_rolls_does_no_fsync_and_creates_no_file() {
    let fs = SimFs::new();
    let dir = PathBuf::from("/data/topics/t/0");
    let p = Partition::open(&Storage::new(Arc::new(fs.clone())), dir.clone(), cfg()).expect("open");
    let next = fill_to_the_roll(&p);
    assert!(
        names(&fs, &dir).contains(&PREPARED_LOG.to_string()),
        "the next segment is prepared ahead: {:?}",
        names(&fs, &dir)
    );
    let (syncs, before) = (fs.sync_count(), names(&fs, &dir));
    let info = p.append(&mut one(next)).expect("the append that rolls");
    assert_eq!(p.segments().len(), 2, "it rolled");
    assert_eq!(info.base_offset, next);
    assert_eq!(fs.sync_count(), syncs, "no fsync on the append path");
    assert_eq!(names(&fs, &dir), before, "no file created or renamed");
    // The seal runs with the next sync, before it counts the new segment.
    p.wait_durable(info.last_offset + 1).expect("durable");
    let after = names(&fs, &dir);
    assert!(after.contains(&log_name(next)), "{after:?}");
    assert!(after.contains(&format!("{next:020}.index")), "{after:?}");
    assert!(after.contains(&PREPARED_LOG.to_string()), "{after:?}");
    assert!(after.contains(&PREPARED_INDEX.to_string()), "{after:?}");
    assert!(fs.sync_count() > syncs);
}

#[test]
fn a_crash_before_the_seal_keeps_the_log_contiguous() {
    for tear in [
        Tear::None,
        Tear::Prefix(1),
        Tear::Prefix(977),
        Tear::Prefix(5000),
    ] {
        let fs = SimFs::new();
        let dir = PathBuf::from("/data/topics/t/0");
        let p =
            Partition::open(&Storage::new(Arc::new(fs.clone())), dir.clone(), cfg()).expect("open");
        let acked = fill_to_the_roll(&p);
        // The roll and a few more appends, none of them made durable.
        for i in acked..acked + 4 {
            p.append(&mut one(i)).expect("append");
        }
        assert_eq!(p.segments().len(), 2, "rolled, not sealed");
        let img = fs.crash_image(tear);
        assert!(!names(&img, &dir).contains(&log_name(acked)), "{tear:?}");
        let q = Partition::open(&Storage::new(Arc::new(img.clone())), dir.clone(), cfg())
            .expect("recover");
        let mut got = Vec::new();
        common::read_from_start(&q, 1 << 20, |r, _| {
            got.push((r.offset, r.value.expect("value").to_vec()))
        });
        assert!(
            got.len() as u64 >= acked,
            "{tear:?}: acknowledged records lost"
        );
        for (i, (o, v)) in got.iter().enumerate() {
            assert_eq!(*o, i as u64, "{tear:?}: contiguous offsets");
            assert_eq!(v, &value(*o), "{tear:?}: record {o}");
        }
        assert_eq!(q.log_end_offset(), got.len() as u64);
        // Writes go on at the next offset, and the next roll works.
        let start = got.len() as u64;
        for next in start..start + 20 {
            let info = q.append(&mut one(next)).expect("append after recovery");
            assert_eq!(info.base_offset, next);
            q.wait_durable(info.last_offset + 1).expect("durable");
        }
        assert!(q.segments().len() >= 2, "rolled again after recovery");
        let bases: Vec<u64> = q.segments().iter().map(|s| s.base_offset).collect();
        for w in q.segments().windows(2) {
            assert_eq!(w[0].end_offset(), w[1].base_offset, "{tear:?}: {bases:?}");
        }
    }
}

#[test]
fn close_seals_the_last_roll() {
    let fs = SimFs::new();
    let dir = PathBuf::from("/data/topics/t/0");
    let p = Partition::open(&Storage::new(Arc::new(fs.clone())), dir.clone(), cfg()).expect("open");
    let next = fill_to_the_roll(&p);
    p.append(&mut one(next)).expect("append");
    p.close().expect("close");
    assert!(names(&fs, &dir).contains(&log_name(next)));
    drop(p);
    let img = fs.crash_image(Tear::None);
    let q = Partition::open(&Storage::new(Arc::new(img)), dir, cfg()).expect("reopen");
    assert_eq!(
        q.log_end_offset(),
        next + 1,
        "the record after the roll survived"
    );
}

#[test]
fn try_append_runs_only_appends_that_stay_in_the_page_cache() {
    let fs = SimFs::new();
    let dir = PathBuf::from("/data/topics/t/0");
    let p = Partition::open(&Storage::new(Arc::new(fs.clone())), dir.clone(), cfg()).expect("open");
    let mut next = fill_to_the_roll(&p);
    let syncs = fs.sync_count();
    // A roll onto the prepared segment is fine.
    let got = p.try_append_producer(&mut one(next), None).expect("append");
    assert!(got.is_some(), "the swap roll runs");
    assert_eq!(p.segments().len(), 2);
    next += 1;
    // The next roll would first have to seal this one: handed back.
    loop {
        let end = p.log_end_offset();
        match p.try_append_producer(&mut one(next), None).expect("append") {
            Some(_) => next += 1,
            None => {
                assert_eq!(p.log_end_offset(), end, "nothing appended");
                break;
            }
        }
        assert_eq!(p.segments().len(), 2, "no second roll without a seal");
    }
    assert_eq!(fs.sync_count(), syncs, "no fsync on that path");
    // From a thread that may block, it seals and rolls.
    let info = p.append(&mut one(next)).expect("blocking append");
    assert_eq!(info.base_offset, next);
    assert_eq!(p.segments().len(), 3);
    assert!(fs.sync_count() > syncs);
}
