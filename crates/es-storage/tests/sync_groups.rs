//! Group commit across partitions (the sync pool's grouped mode): partitions
//! whose waiters gather behind a sync in progress share one file-system
//! sync, which makes every one of them durable, and a failure of that sync
//! fences every partition it was to cover. Its own test binary, so that the
//! pool starts in the grouped mode.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use es_storage::simfs::{SimFs, Tear};
use es_storage::{
    Partition, PartitionConfig, RecordBatchBuf, RecordMeta, Storage, StorageError, SyncMode,
    SyncPool,
};
use es_test_support::durable::{durable_channel, Durable};

const LIMIT: Duration = Duration::from_secs(30);

/// A storage context on `fs` whose sync pool runs grouped; each test has its own.
fn grouped(fs: &SimFs) -> Storage {
    Storage::with_sync_mode(Arc::new(fs.clone()), SyncMode::Grouped)
        .expect("grouped mode needs Linux 5.8 or later")
}

fn open(storage: &Storage, i: usize) -> Arc<Partition> {
    Partition::open(
        storage,
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
    let fs = SimFs::new();
    let storage = grouped(&fs);
    let parts: Vec<_> = (0..4).map(|i| open(&storage, i)).collect();
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
    let img = grouped(&fs.crash_image(Tear::None));
    for i in 0..4 {
        assert_eq!(open(&img, i).log_end_offset(), 1, "partition {i}");
    }
}

#[test]
fn a_failed_group_sync_fences_every_partition_it_covered() {
    let fs = SimFs::new();
    let storage = grouped(&fs);
    let parts: Vec<_> = (0..3).map(|i| open(&storage, i)).collect();
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

#[test]
fn two_pools_share_no_thread_and_no_queue() {
    // Two brokers' worth of storage in one process: one grouped pool, one
    // per partition, each on its own file system.
    let fs_a = SimFs::new();
    let fs_b = SimFs::new();
    let a = grouped(&fs_a);
    let b = Storage::new(Arc::new(fs_b.clone()));
    let idle = SyncPool::per_partition();
    assert_eq!(a.sync.mode(), SyncMode::Grouped);
    assert_eq!(b.sync.mode(), SyncMode::PerPartition);
    let pa = open(&a, 0);
    let pb = open(&b, 0);
    // A's only sync thread is held at A's gate: B's waiters are served all
    // the same (one shared grouped thread would be stuck behind A's sync).
    let held = hold_a_sync(&fs_a, &pa);
    append(&pb, "b")
        .recv_timeout(LIMIT)
        .expect("called")
        .expect("durable on B's own pool");
    assert!(held.try_recv().is_err(), "A's sync is still held");
    assert_eq!(a.sync.threads_started(), 1);
    assert_eq!(b.sync.threads_started(), es_storage::syncer::SYNC_THREADS);
    assert_eq!(
        idle.threads_started(),
        0,
        "a pool nobody used started nothing"
    );
    fs_a.release_syncs();
    held.recv_timeout(LIMIT).expect("called").expect("durable");
    // Shutting A's pool down fails A's later waiters and leaves B serving.
    a.sync.shutdown();
    assert_eq!(a.sync.threads_started(), 0);
    assert!(matches!(
        append(&pa, "a1").recv_timeout(LIMIT).expect("called"),
        Err(StorageError::Closed)
    ));
    append(&pb, "b1")
        .recv_timeout(LIMIT)
        .expect("called")
        .expect("durable");
}
