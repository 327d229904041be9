//! The crash matrix: run a workload on the simulated file system, lose power
//! at every sync point in turn (keeping only fsynced bytes, or a torn prefix
//! of the unsynced ones), recover, and check that every acknowledged record is
//! there, nothing half-written is visible, and recovering twice gives the same
//! state; and fail the fsync at every sync point in turn: the failed commit is
//! not acknowledged or visible, the partition is fenced, and a restart keeps
//! what was acknowledged.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use es_storage::simfs::{SimFs, Tear};
use es_storage::Storage;
use es_storage::{Partition, PartitionConfig, RecordBatchBuf, RecordMeta};

fn cfg() -> PartitionConfig {
    PartitionConfig {
        segment_bytes: 2048,
        ..PartitionConfig::default()
    }
}

fn value(i: u64) -> Vec<u8> {
    let mut v = format!("record-{i}-").into_bytes();
    v.resize(40 + (i as usize * 37) % 300, b'a' + (i % 26) as u8);
    v
}

/// Appends batches of 1..=5 records until `records` are written or an error
/// (the crash) stops it. Returns how many records were acknowledged.
fn workload(fs: &SimFs, dir: &Path, records: u64) -> u64 {
    let Ok(p) = Partition::open(
        &Storage::new(Arc::new(fs.clone())),
        dir.to_path_buf(),
        cfg(),
    ) else {
        return 0;
    };
    let mut next = 0u64;
    let mut acked = 0u64;
    let mut n = 1u64;
    while next < records {
        let mut b = RecordBatchBuf::new();
        for i in next..(next + n).min(records) {
            let v = value(i);
            let key = format!("k{}", i % 7);
            if i % 5 == 0 {
                b.push(
                    i as i64,
                    Some(key.as_bytes()),
                    Some(&v),
                    [(&b"h"[..], Some(&b"x"[..]))],
                    &RecordMeta::default(),
                );
            } else {
                b.push(
                    i as i64,
                    Some(key.as_bytes()),
                    Some(&v),
                    std::iter::empty(),
                    &RecordMeta::default(),
                );
            }
        }
        let count = b.len() as u64;
        let Ok(info) = p.append(&mut b) else { break };
        assert_eq!(
            info.base_offset, next,
            "offsets continue after the last record"
        );
        if p.wait_durable(info.last_offset + 1).is_err() {
            break;
        }
        next += count;
        acked = next;
        n = n % 5 + 1;
    }
    acked
}

fn recover(fs: &SimFs, dir: &Path) -> Vec<(u64, Vec<u8>)> {
    let p = Partition::open(
        &Storage::new(Arc::new(fs.clone())),
        dir.to_path_buf(),
        cfg(),
    )
    .expect("recovery succeeds");
    let mut out = Vec::new();
    common::read_from_start(&p, 1 << 20, |r, _| {
        out.push((r.offset, r.value.expect("value").to_vec()))
    });
    assert_eq!(p.log_end_offset(), out.len() as u64);
    out
}

#[test]
fn crash_at_every_sync_point() {
    let dir = PathBuf::from("/data/topics/t/0");
    let records = 120;
    // A dry run counts the sync points.
    let dry = SimFs::new();
    assert_eq!(workload(&dry, &dir, records), records);
    let total = dry.sync_count();
    assert!(total > 50, "workload has {total} sync points");
    for k in 1..=total {
        for tear in [Tear::None, Tear::Prefix(k * 7919 + 1)] {
            let fs = SimFs::new();
            fs.crash_at_sync(k);
            let acked = workload(&fs, &dir, records);
            assert!(fs.has_crashed(), "sync point {k} reached");
            let img = fs.crash_image(tear);
            let got = recover(&img, &dir);
            assert!(
                got.len() as u64 >= acked,
                "k={k} {tear:?}: {} records after recovery, {acked} acknowledged",
                got.len()
            );
            for (i, (o, v)) in got.iter().enumerate() {
                assert_eq!(*o, i as u64, "k={k}: contiguous offsets");
                assert_eq!(v, &value(*o), "k={k}: record {o} is what was written");
            }
            let again = recover(&img, &dir);
            assert_eq!(again, got, "k={k}: recovering twice gives the same state");
            // And the recovered partition accepts writes at the right offset.
            let p = Partition::open(
                &Storage::new(Arc::new(img.clone())),
                dir.to_path_buf(),
                cfg(),
            )
            .expect("open");
            let mut b = RecordBatchBuf::new();
            b.push(
                0,
                None,
                Some(b"after"),
                std::iter::empty(),
                &RecordMeta::default(),
            );
            let info = p.append(&mut b).expect("append after recovery");
            assert_eq!(info.base_offset, got.len() as u64);
        }
    }
}

/// A failed fsync at every sync point of the same workload: the commit
/// whose fsync failed is not acknowledged (its wait fails with Fenced, the
/// high watermark stays at what was acknowledged), the partition takes no
/// more appends, and a restart recovers every acknowledged record and
/// nothing but written ones, contiguous, with or without torn unsynced
/// bytes.
#[test]
fn failed_fsync_at_every_sync_point() {
    let dir = PathBuf::from("/data/topics/t/0");
    let records = 120;
    let dry = SimFs::new();
    assert_eq!(workload(&dry, &dir, records), records);
    let total = dry.sync_count();
    for k in 1..=total {
        let fs = SimFs::new();
        fs.fail_sync_at(k);
        let Ok(p) = Partition::open(
            &Storage::new(Arc::new(fs.clone())),
            dir.to_path_buf(),
            cfg(),
        ) else {
            continue; // the open's own syncs: nothing was acknowledged
        };
        let mut next = 0u64;
        let mut failed = None;
        while next < records {
            let mut b = RecordBatchBuf::new();
            let n = (next % 5 + 1).min(records - next);
            for i in next..next + n {
                b.push(
                    i as i64,
                    Some(format!("k{}", i % 7).as_bytes()),
                    Some(&value(i)),
                    std::iter::empty(),
                    &RecordMeta::default(),
                );
            }
            let r = p
                .append(&mut b)
                .and_then(|info| p.wait_durable(info.last_offset + 1));
            if let Err(e) = r {
                failed = Some(e);
                break;
            }
            next += n;
        }
        let Some(e) = failed else {
            continue; // the failed sync was in the open
        };
        assert!(
            matches!(
                e,
                es_storage::StorageError::Fenced(_) | es_storage::StorageError::Io(_)
            ),
            "k={k}: {e}"
        );
        assert_eq!(
            p.high_watermark(),
            next,
            "k={k}: nothing of the failed commit is visible"
        );
        assert!(p.durable_end() <= next, "k={k}");
        let mut b = RecordBatchBuf::new();
        b.push(
            0,
            None,
            Some(b"x"),
            std::iter::empty(),
            &RecordMeta::default(),
        );
        assert!(
            matches!(p.append(&mut b), Err(es_storage::StorageError::Fenced(_))),
            "k={k}: fenced until a restart"
        );
        let written = p.log_end_offset();
        drop(p);
        for tear in [Tear::None, Tear::Prefix(k * 31 + 7)] {
            let got = recover(&fs.crash_image(tear), &dir);
            assert!(
                got.len() as u64 >= next,
                "k={k} {tear:?}: acknowledged records kept"
            );
            assert!(got.len() as u64 <= written.max(next + 5), "k={k} {tear:?}");
            for (i, (o, v)) in got.iter().enumerate() {
                assert_eq!(*o, i as u64, "k={k}: contiguous offsets");
                assert_eq!(v, &value(*o), "k={k}: record {o} is what was written");
            }
        }
    }
}
