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

/// A storage context on `fs` whose sync pool runs grouped on one thread, so
/// that the tests can count its syncs; each test has its own.
fn grouped(fs: &SimFs) -> Storage {
    let pool = SyncPool::with_threads(SyncMode::Grouped, 1)
        .expect("grouped mode needs Linux 5.8 or later");
    Storage::new(Arc::new(fs.clone())).with_sync_pool(pool)
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
fn a_second_grouped_thread_serves_partitions_queued_during_a_pass() {
    let fs = SimFs::new();
    let storage = Storage::with_sync_mode(Arc::new(fs.clone()), SyncMode::Grouped)
        .expect("grouped mode needs Linux 5.8 or later");
    let parts: Vec<_> = (0..2).map(|i| open(&storage, i)).collect();
    let first = hold_a_sync(&fs, &parts[0]);
    // The first pass is held at the gate; the partition queued now gets its
    // own pass on the other thread, which reaches the gate too.
    let second = append(&parts[1], "b");
    assert!(
        fs.await_held_syncs(2, LIMIT),
        "a second pass runs while the first is in progress"
    );
    fs.release_syncs();
    for rx in [first, second] {
        rx.recv_timeout(LIMIT).expect("called").expect("durable");
    }
    let img = grouped(&fs.crash_image(Tear::None));
    for i in 0..2 {
        assert_eq!(open(&img, i).log_end_offset(), 1, "partition {i}");
    }
}

#[test]
fn partitions_queued_together_wake_the_pool_once_and_share_one_sync() {
    let fs = SimFs::new();
    let storage = grouped(&fs);
    let parts: Vec<_> = (0..3).map(|i| open(&storage, i)).collect();
    // Start the pool's thread, then wait until it sleeps.
    append(&parts[0], "warm")
        .recv_timeout(LIMIT)
        .expect("called")
        .expect("durable");
    let deadline = std::time::Instant::now() + LIMIT;
    while storage.sync.queue_state().1 != 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "the thread never idled"
        );
        std::thread::yield_now();
    }
    let (_, _, wakes) = storage.sync.queue_state();
    let before = fs.sync_count();
    let waits: Vec<Durable> = es_storage::syncer::together(|| {
        let waits: Vec<Durable> = parts
            .iter()
            .enumerate()
            .map(|(i, p)| append(p, &format!("b{i}")))
            .collect();
        assert_eq!(
            storage.sync.queue_state(),
            (3, 1, wakes),
            "all three queued, no wake-up sent before the end"
        );
        waits
    });
    assert_eq!(storage.sync.queue_state().2, wakes + 1, "one wake-up");
    for rx in waits {
        rx.recv_timeout(LIMIT).expect("called").expect("durable");
    }
    assert_eq!(fs.sync_count() - before, 1, "one sync for the three");
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
    let a = Storage::with_sync_mode(Arc::new(fs_a.clone()), SyncMode::Grouped)
        .expect("grouped mode needs Linux 5.8 or later");
    let b = Storage::new(Arc::new(fs_b.clone()));
    let idle = SyncPool::per_partition();
    assert_eq!(a.sync.mode(), SyncMode::Grouped);
    assert_eq!(b.sync.mode(), SyncMode::PerPartition);
    let pa = open(&a, 0);
    let pb = open(&b, 0);
    // A sync thread of A is held at A's gate: B's waiters are served all
    // the same (a thread shared with A would be stuck behind A's sync).
    let held = hold_a_sync(&fs_a, &pa);
    append(&pb, "b")
        .recv_timeout(LIMIT)
        .expect("called")
        .expect("durable on B's own pool");
    assert!(held.try_recv().is_err(), "A's sync is still held");
    assert_eq!(
        a.sync.threads_started(),
        es_storage::syncer::GROUPED_THREADS
    );
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

#[test]
fn written_out_bytes_are_durable_only_after_a_flush_and_within_the_durable_length() {
    use es_storage::Fs;
    let fs = SimFs::new();
    fs.create_dir_all(std::path::Path::new("/d")).expect("dir");
    fs.sync_dir(std::path::Path::new("/")).expect("sync /");
    let a = fs.create_new(std::path::Path::new("/d/a")).expect("a");
    let b = fs.create_new(std::path::Path::new("/d/b")).expect("b");
    fs.sync_dir(std::path::Path::new("/d")).expect("sync /d");
    // Eight durable zeros in a, as the preallocator leaves them.
    a.write_all_at(&[0; 8], 0).expect("zeros");
    a.sync_data().expect("sync zeros");
    assert!(a.overwrites_in_place());
    // Records over the zeros and past them, written out but not flushed.
    a.write_all_at(b"records!tail", 0).expect("records");
    a.start_write_out(0, 12).expect("start");
    a.wait_written(0, 12).expect("written out");
    let read = |fs: &SimFs| fs.read_all(std::path::Path::new("/d/a")).expect("read a");
    assert_eq!(
        read(&fs.crash_image(Tear::None)),
        vec![0; 8],
        "no flush yet: the device's cache is lost"
    );
    // Any sync flushes the device: a's bytes over its durable length stay.
    b.write_all_at(b"b", 0).expect("b");
    b.sync_data().expect("flush");
    assert_eq!(
        read(&fs.crash_image(Tear::None)),
        b"records!".to_vec(),
        "the bytes past a's durable length needed a metadata change"
    );
}

/// Grouped storage whose partitions get zeros ahead from a manual preallocator
/// (after 256 bytes of records, 1 KiB at a time).
fn grouped_preallocated(fs: &SimFs) -> Storage {
    use es_storage::prealloc::{Preallocator, Sizing};
    grouped(fs).with_preallocator(Preallocator::manual(Sizing {
        start_bytes: 256,
        min_bytes: 1024,
        max_bytes: 1024,
    }))
}

fn open_preallocated(storage: &Storage, i: usize) -> Arc<Partition> {
    Partition::open(
        storage,
        PathBuf::from(format!("/d/t/{i}")),
        PartitionConfig {
            preallocate: true,
            ..PartitionConfig::default()
        },
    )
    .expect("open")
}

#[test]
fn partitions_writing_over_durable_zeros_share_one_device_flush_and_survive_a_crash() {
    let fs = SimFs::new();
    let storage = grouped_preallocated(&fs);
    let parts: Vec<_> = (0..4).map(|i| open_preallocated(&storage, i)).collect();
    // Enough records for zeros to be asked for, made durable, then the zeros.
    for p in &parts {
        for i in 0..8 {
            append(p, &format!("warm-{i:040}"))
                .recv_timeout(LIMIT)
                .expect("called")
                .expect("durable");
        }
    }
    assert!(
        storage.prealloc.run_queued() >= 4,
        "zeros for every partition"
    );
    let first = hold_a_sync(&fs, &parts[0]);
    let (syncs, outs) = (fs.sync_count(), fs.write_out_count());
    let rest: Vec<_> = parts[1..]
        .iter()
        .enumerate()
        .map(|(i, p)| append(p, &format!("b{i}")))
        .collect();
    fs.release_syncs();
    first.recv_timeout(LIMIT).expect("called").expect("durable");
    for rx in rest {
        rx.recv_timeout(LIMIT).expect("called").expect("durable");
    }
    assert_eq!(
        (fs.write_out_count() - outs, fs.sync_count() - syncs),
        (2, 1 + 2 + 1),
        "the first partition's fsync; then two logs written out and the third's fdatasync, \
         whose flush covers them"
    );
    let img = grouped(&fs.crash_image(Tear::None));
    for (i, _) in parts.iter().enumerate() {
        assert_eq!(open(&img, i).log_end_offset(), 9, "partition {i}");
    }
}
