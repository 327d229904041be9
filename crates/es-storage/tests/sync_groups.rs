//! Group commit across partitions (the sync pool's grouped mode): partitions
//! whose waiters gather behind a sync in progress share one file-system
//! sync, which makes every one of them durable, and a failure of that sync
//! fences every partition it was to cover. Its own test binary, so that the
//! pool starts in the grouped mode.

mod common;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use common::{durable_channel, Durable};
use es_storage::simfs::{SimFs, Tear};
use es_storage::syncer::{self, SyncMode};
use es_storage::{Partition, PartitionConfig, RecordBatchBuf, RecordMeta, StorageError};

const LIMIT: Duration = Duration::from_secs(30);

/// The pool is shared by the tests of this binary: one at a time, so that a
/// test's held syncs do not hold another's partitions.
static SERIAL: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

fn grouped() -> parking_lot::MutexGuard<'static, ()> {
    let guard = SERIAL.lock();
    // The first test to get here sets it; the pool has not started yet.
    let _ = syncer::set_mode(SyncMode::Grouped);
    assert_eq!(
        syncer::mode(),
        SyncMode::Grouped,
        "grouped mode needs Linux 5.8 or later"
    );
    guard
}

fn open(fs: &SimFs, i: usize) -> Arc<Partition> {
    Partition::open(
        Arc::new(fs.clone()),
        PathBuf::from(format!("/d/t/{i}")),
        PartitionConfig::default(),
    )
    .expect("open")
}

fn one_record(v: &str) -> RecordBatchBuf {
    let mut b = RecordBatchBuf::new();
    b.push(
        1_700_000_000_000,
        None,
        Some(v.as_bytes()),
        std::iter::empty(),
        &RecordMeta::default(),
    );
    b
}

/// Appends one record and registers for its durability.
fn append(p: &Arc<Partition>, v: &str) -> Durable {
    let info = p.append(&mut one_record(v)).expect("append");
    durable_channel(p, info.last_offset + 1)
}

/// Holds every sync of `fs` and appends to `p`: returns once the pool's
/// sync for it waits at the gate (not yet counted by `sync_count`).
fn hold_a_sync(fs: &SimFs, p: &Arc<Partition>) -> Durable {
    fs.hold_syncs();
    let rx = append(p, "first");
    assert!(
        fs.await_held_syncs(1, LIMIT),
        "the first sync reaches the gate"
    );
    rx
}

#[test]
fn partitions_waiting_together_share_one_sync_and_survive_a_crash() {
    let _serial = grouped();
    let fs = SimFs::new();
    let parts: Vec<_> = (0..4).map(|i| open(&fs, i)).collect();
    let first = hold_a_sync(&fs, &parts[0]);
    let before = fs.sync_count();
    // Three more partitions wait while the pool's sync is held.
    let rest: Vec<_> = parts[1..]
        .iter()
        .enumerate()
        .map(|(i, p)| append(p, &format!("b{i}")))
        .collect();
    for rx in &rest {
        assert!(rx.try_recv().is_err(), "not durable before any sync");
    }
    fs.release_syncs();
    first.recv_timeout(LIMIT).expect("called").expect("durable");
    for rx in rest {
        rx.recv_timeout(LIMIT).expect("called").expect("durable");
    }
    assert_eq!(
        fs.sync_count() - before,
        2,
        "the first partition's fsync, then one sync for the three that waited"
    );
    // Every acknowledged record survives a crash that keeps only synced bytes.
    let img = fs.crash_image(Tear::None);
    for i in 0..4 {
        assert_eq!(open(&img, i).log_end_offset(), 1, "partition {i}");
    }
}

#[test]
fn a_failed_group_sync_fences_every_partition_it_covered() {
    let _serial = grouped();
    let fs = SimFs::new();
    let parts: Vec<_> = (0..3).map(|i| open(&fs, i)).collect();
    let first = hold_a_sync(&fs, &parts[0]);
    let b = append(&parts[1], "b");
    let c = append(&parts[2], "c");
    // The held sync is the next one counted; the group's is the one after.
    fs.fail_sync_at(fs.sync_count() + 2);
    fs.release_syncs();
    first.recv_timeout(LIMIT).expect("called").expect("durable");
    for rx in [b, c] {
        assert!(matches!(
            rx.recv_timeout(LIMIT).expect("called"),
            Err(StorageError::Fenced(_))
        ));
    }
    // Fenced until a restart; the partition whose sync succeeded goes on.
    for p in &parts[1..] {
        assert!(append_fails(p));
    }
    append(&parts[0], "a1")
        .recv_timeout(LIMIT)
        .expect("called")
        .expect("durable");
}

/// Whether an append, or the wait for its durability, fails.
fn append_fails(p: &Arc<Partition>) -> bool {
    match p.append(&mut one_record("x")) {
        Err(_) => true,
        Ok(info) => durable_channel(p, info.last_offset + 1)
            .recv_timeout(LIMIT)
            .expect("called")
            .is_err(),
    }
}
