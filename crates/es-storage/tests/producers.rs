//! Producer state through the partition: duplicates answered with their
//! original offsets (also after a crash, rebuilt from the log), gaps and stale
//! epochs refused without advancing anything, transaction markers, the last
//! stable offset and aborted transactions surviving a restart, and
//! compaction removing transaction markers whose records are gone.

mod common;

use std::path::PathBuf;
use std::sync::Arc;

use es_storage::simfs::{SimFs, Tear};
use es_storage::{
    AppendOutcome, CompactionPolicy, Partition, PartitionConfig, ProducerAppend, RecordBatchBuf,
    RecordMeta, SeqError, StorageError,
};
use es_storage::{Isolation, ReadBuf, RecordIter, Storage};
use es_test_support::batch::producer_meta;

fn cfg() -> PartitionConfig {
    PartitionConfig {
        segment_bytes: 2048,
        ..PartitionConfig::default()
    }
}

fn pbatch(pid: i64, epoch: i16, seq: i32, n: u32, txn: bool) -> (RecordBatchBuf, ProducerAppend) {
    let mut b = RecordBatchBuf::new();
    for i in 0..n {
        let meta = producer_meta(pid, epoch, seq + i as i32, txn);
        b.push(
            1,
            None,
            Some(format!("p{pid}-s{}", seq + i as i32).as_bytes()),
            std::iter::empty(),
            &meta,
        );
    }
    (
        b,
        ProducerAppend {
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            record_count: n,
            transactional: txn,
        },
    )
}

fn send(
    p: &Partition,
    pid: i64,
    epoch: i16,
    seq: i32,
    n: u32,
    txn: bool,
) -> Result<AppendOutcome, StorageError> {
    let (mut b, a) = pbatch(pid, epoch, seq, n, txn);
    let out = p.append_producer(&mut b, Some(&a))?;
    let (AppendOutcome::Appended(i) | AppendOutcome::Duplicate(i)) = out;
    p.wait_durable(i.last_offset + 1)?;
    Ok(out)
}

fn filler(p: &Partition, n: usize) {
    for _ in 0..n {
        let mut b = RecordBatchBuf::new();
        b.push(
            1,
            None,
            Some(&[b'f'; 100]),
            std::iter::empty(),
            &RecordMeta::default(),
        );
        let i = p.append(&mut b).expect("append");
        p.wait_durable(i.last_offset + 1).expect("durable");
    }
}

#[test]
fn duplicates_gaps_and_stale_epochs_survive_a_crash() {
    let fs = SimFs::new();
    let dir = PathBuf::from("/d/p");
    let p = Partition::open(&Storage::new(Arc::new(fs.clone())), dir.clone(), cfg()).expect("open");
    filler(&p, 3);
    let AppendOutcome::Appended(first) = send(&p, 42, 0, 0, 5, false).expect("append") else {
        panic!("fresh")
    };
    filler(&p, 30); // rolls several segments (snapshots written) in between
    let AppendOutcome::Appended(second) = send(&p, 42, 0, 5, 3, false).expect("append") else {
        panic!("fresh")
    };
    assert_eq!(
        send(&p, 42, 0, 0, 5, false).expect("retry"),
        AppendOutcome::Duplicate(first)
    );
    let end = p.log_end_offset();
    // Crash: keep only what was fsynced (all of it, acknowledged).
    let q = Partition::open(
        &Storage::new(Arc::new(fs.crash_image(Tear::None))),
        dir.clone(),
        cfg(),
    )
    .expect("recover");
    assert_eq!(
        send(&q, 42, 0, 5, 3, false).expect("retry after crash"),
        AppendOutcome::Duplicate(second)
    );
    assert_eq!(
        send(&q, 42, 0, 0, 5, false).expect("older retry after crash"),
        AppendOutcome::Duplicate(first)
    );
    assert_eq!(q.log_end_offset(), end, "nothing appended twice");
    assert!(matches!(
        send(&q, 42, 0, 10, 1, false),
        Err(StorageError::Sequence(SeqError::OutOfOrder {
            expected: 8,
            got: 10
        }))
    ));
    assert_eq!(q.log_end_offset(), end, "a refused append writes nothing");
    assert!(matches!(
        send(&q, 42, 0, 8, 1, false).expect("next in order"),
        AppendOutcome::Appended(_)
    ));
    assert!(matches!(
        send(&q, 42, 1, 0, 1, false).expect("new epoch"),
        AppendOutcome::Appended(_)
    ));
    assert!(matches!(
        send(&q, 42, 0, 9, 1, false),
        Err(StorageError::Sequence(SeqError::StaleEpoch { current: 1 }))
    ));
}

#[test]
fn an_unsynced_append_is_not_a_duplicate_after_a_crash() {
    let fs = SimFs::new();
    let dir = PathBuf::from("/d/p");
    let p = Partition::open(&Storage::new(Arc::new(fs.clone())), dir.clone(), cfg()).expect("open");
    send(&p, 7, 0, 0, 2, false).expect("append");
    // Appended but never fsynced: lost in the crash, so a retry must append.
    let (mut b, a) = pbatch(7, 0, 2, 2, false);
    assert!(matches!(
        p.append_producer(&mut b, Some(&a)).expect("append"),
        AppendOutcome::Appended(_)
    ));
    let q = Partition::open(
        &Storage::new(Arc::new(fs.crash_image(Tear::None))),
        dir,
        cfg(),
    )
    .expect("recover");
    assert!(matches!(
        send(&q, 7, 0, 2, 2, false).expect("retry"),
        AppendOutcome::Appended(_)
    ));
}

#[test]
fn transactions_last_stable_offset_and_aborts_survive_a_restart() {
    let fs = SimFs::new();
    let dir = PathBuf::from("/d/p");
    let p = Partition::open(&Storage::new(Arc::new(fs.clone())), dir.clone(), cfg()).expect("open");
    filler(&p, 2);
    send(&p, 5, 0, 0, 3, true).expect("txn records"); // offsets 2..=4
    filler(&p, 2);
    assert_eq!(p.last_stable_offset(), 2);
    let m = p.append_marker(5, 0, false, 3, 1).expect("abort");
    p.wait_durable(m.last_offset + 1).expect("durable");
    assert_eq!(p.last_stable_offset(), p.high_watermark());
    let aborted = p.aborted_transactions(0, 100);
    assert_eq!(aborted.len(), 1);
    assert_eq!(
        (
            aborted[0].producer_id,
            aborted[0].first_offset,
            aborted[0].last_offset
        ),
        (5, 2, m.base_offset)
    );
    send(&p, 6, 0, 0, 1, true).expect("open txn");
    let open_at = p.log_end_offset() - 1;
    drop(p);
    let q = Partition::open(
        &Storage::new(Arc::new(fs.crash_image(Tear::None))),
        dir,
        cfg(),
    )
    .expect("restart");
    assert_eq!(q.aborted_transactions(0, 100), aborted);
    assert_eq!(
        q.last_stable_offset(),
        open_at,
        "the open transaction still holds the LSO"
    );
    let c = q.append_marker(6, 0, true, 3, 1).expect("commit");
    q.wait_durable(c.last_offset + 1).expect("durable");
    assert_eq!(q.last_stable_offset(), q.high_watermark());
    assert_eq!(q.aborted_transactions(0, 100).len(), 1);
}

#[test]
fn idle_producers_expire() {
    let fs = SimFs::new();
    let p = Partition::open(&Storage::new(Arc::new(fs)), PathBuf::from("/p"), cfg()).expect("open");
    send(&p, 1, 0, 0, 1, false).expect("append");
    send(&p, 2, 0, 0, 1, true).expect("append");
    let later = i64::MAX / 2;
    assert_eq!(
        p.expire_producers(later, 1000),
        1,
        "the idle one goes, the one in a transaction stays"
    );
    assert!(matches!(
        send(&p, 1, 0, 5, 1, false).expect("unknown producers may start anywhere"),
        AppendOutcome::Appended(_)
    ));
}

/// Appends one keyed transactional record of producer `pid`.
fn txn_record(p: &Partition, pid: i64, seq: i32, key: &[u8], value: &[u8]) {
    let meta = producer_meta(pid, 0, seq, true);
    let mut b = RecordBatchBuf::new();
    b.push(1, Some(key), Some(value), std::iter::empty(), &meta);
    let a = ProducerAppend {
        producer_id: pid,
        producer_epoch: 0,
        base_sequence: seq,
        record_count: 1,
        transactional: true,
    };
    let AppendOutcome::Appended(i) = p.append_producer(&mut b, Some(&a)).expect("append") else {
        panic!("not a retry")
    };
    p.wait_durable(i.last_offset + 1).expect("durable");
}

/// Appends a commit or abort marker of `pid`; returns its offset.
fn marker(p: &Partition, pid: i64, commit: bool) -> u64 {
    let m = p.append_marker(pid, 0, commit, 3, 1).expect("marker");
    p.wait_durable(m.last_offset + 1).expect("durable");
    m.base_offset
}

fn offsets(p: &Partition) -> Vec<u64> {
    let mut out = Vec::new();
    common::read_from_start(p, 1 << 20, |r, _| out.push(r.offset));
    out
}

#[test]
fn compaction_removes_markers_whose_records_are_gone() {
    let fs = SimFs::new();
    let dir = PathBuf::from("/d/p");
    let p = Partition::open(&Storage::new(Arc::new(fs.clone())), dir.clone(), cfg()).expect("open");
    // Producer 5 aborts a transaction, then commits one.
    txn_record(&p, 5, 0, b"k", b"aborted-1");
    txn_record(&p, 5, 1, b"m", b"aborted-2");
    let abort5 = marker(&p, 5, false);
    txn_record(&p, 5, 2, b"b", b"committed-b");
    let commit5 = marker(&p, 5, true);
    // Producer 6 commits key "a" twice: the first value is compacted away.
    txn_record(&p, 6, 0, b"a", b"a-1");
    let commit6_first = marker(&p, 6, true);
    let a2 = p.log_end_offset();
    txn_record(&p, 6, 1, b"a", b"a-2");
    let commit6 = marker(&p, 6, true);
    filler(&p, 30); // seals the segments above
    assert_eq!(p.aborted_transactions(0, u64::MAX).len(), 1);
    let policy = CompactionPolicy {
        delete_retention_ms: 1_000,
        min_cleanable_dirty_ratio: 0.0,
        // append_marker's key: [0, 0, 0, type], type 0 = abort.
        control_kind: |r| r.key.and_then(|k| k.get(3)).map(|t| *t == 0),
        ..CompactionPolicy::default()
    };
    let markers = [abort5, commit5, commit6_first, commit6];

    // First pass: the aborted records and a-1 go; the markers are new to
    // compaction and stay.
    p.compact(&policy, 1).expect("first pass");
    let o = offsets(&p);
    assert!(!o.contains(&0) && !o.contains(&1) && !o.contains(&(commit6_first - 1)));
    assert!(markers.iter().all(|m| o.contains(m)), "{o:?}");
    assert!(o.contains(&(commit5 - 1)) && o.contains(&a2));

    // Second pass, before the delete horizon: the abort marker and the first
    // commit of 6 have no records left but stay; the aborted transaction is
    // no longer reported to read_committed consumers.
    p.compact(&policy, 2).expect("second pass");
    assert!(markers.iter().all(|m| offsets(&p).contains(m)));
    assert!(p.aborted_transactions(0, u64::MAX).is_empty());

    // After the horizon they go; each producer's last marker stays.
    p.compact(&policy, 5_000).expect("third pass");
    let o = offsets(&p);
    assert!(!o.contains(&abort5) && !o.contains(&commit6_first), "{o:?}");
    assert!(o.contains(&commit5) && o.contains(&commit6));
    assert!(o.contains(&(commit5 - 1)) && o.contains(&a2));

    // A restart brings neither the markers nor the aborted transaction back.
    drop(p);
    let q = Partition::open(
        &Storage::new(Arc::new(fs.crash_image(Tear::None))),
        dir,
        cfg(),
    )
    .expect("restart");
    assert_eq!(offsets(&q), o);
    assert!(q.aborted_transactions(0, u64::MAX).is_empty());
    assert_eq!(q.last_stable_offset(), q.high_watermark());
}

#[test]
fn a_snapshot_holds_one_moment_of_watermarks_records_and_aborts() {
    let fs = SimFs::new();
    let p =
        Partition::open(&Storage::new(Arc::new(fs)), PathBuf::from("/d/p"), cfg()).expect("open");
    filler(&p, 2);
    send(&p, 5, 0, 0, 3, true).expect("txn records"); // offsets 2..=4
    let m = p.append_marker(5, 0, false, 3, 1).expect("abort"); // 5
    p.wait_durable(m.last_offset + 1).expect("durable");
    send(&p, 6, 0, 0, 1, true).expect("open txn"); // 6, still open
    let committed = p.snapshot(0, Isolation::ReadCommitted);
    let uncommitted = p.snapshot(0, Isolation::ReadUncommitted);
    // Later writes change nothing the snapshots say or read.
    filler(&p, 3);
    p.flush().expect("flush");
    assert_eq!(p.high_watermark(), 10);
    for s in [&committed, &uncommitted] {
        assert_eq!(
            (
                s.log_start_offset(),
                s.high_watermark(),
                s.last_stable_offset(),
                s.log_end_offset(),
                s.start()
            ),
            (0, 7, 6, 7, 0)
        );
        let mut rb = ReadBuf::new();
        let view = s.read_into(0, 1 << 20, &mut rb).expect("read");
        let read: Vec<u64> = RecordIter::read_checked(view.data)
            .map(|r| r.expect("record").offset)
            .collect();
        assert_eq!(read, (0..7).collect::<Vec<u64>>());
    }
    let aborted = committed.aborted_between(0, 6);
    assert_eq!(aborted.len(), 1);
    assert_eq!((aborted[0].producer_id, aborted[0].first_offset), (5, 2));
    assert!(committed.aborted_between(0, 2).is_empty());
    assert!(uncommitted.aborted_between(0, 6).is_empty(), "not taken");
    // Beyond the snapshot's high watermark: out of range, as for a read.
    let mut rb = ReadBuf::new();
    assert!(matches!(
        committed.read_into(8, 1024, &mut rb),
        Err(StorageError::OffsetOutOfRange { .. })
    ));
}

/// Found by the power-loss test (seed 680): recovery replayed the log from
/// the log start, not from the producer snapshot, so a transaction whose
/// abort marker lay between the snapshot (taken at a roll) and a log start
/// moved past it by DeleteRecords was open again after a crash, for good:
/// the last stable offset stayed below the log start, and read_committed
/// consumers got nothing more. Recovery now replays from the snapshot.
#[test]
fn a_marker_below_the_log_start_still_closes_its_transaction_after_a_crash() {
    let fs = SimFs::new();
    let dir = PathBuf::from("/d/p");
    let p = Partition::open(&Storage::new(Arc::new(fs.clone())), dir.clone(), cfg()).expect("open");
    filler(&p, 30); // rolls: the producer snapshot is taken at each roll
    let first = p.log_end_offset();
    send(&p, 5, 0, 0, 1, true).expect("txn record");
    filler(&p, 1);
    let m = p.append_marker(5, 0, false, 0, 1).expect("abort");
    p.wait_durable(m.last_offset + 1).expect("durable");
    assert!(first > 0 && m.base_offset > first);
    p.delete_records_before(m.base_offset + 1)
        .expect("DeleteRecords");
    assert_eq!(p.last_stable_offset(), p.high_watermark());
    drop(p);
    let q = Partition::open(
        &Storage::new(Arc::new(fs.crash_image(Tear::None))),
        dir,
        cfg(),
    )
    .expect("recover");
    assert_eq!(q.log_start_offset(), m.base_offset + 1);
    assert_eq!(
        q.last_stable_offset(),
        q.high_watermark(),
        "no transaction is open: its abort marker is in the log, below the log start"
    );
    filler(&q, 3);
    assert_eq!(q.last_stable_offset(), q.high_watermark());
}

/// The same when retention deletes the segments holding the transaction and
/// its marker: the producer snapshot taken when the last of them was sealed
/// covers them, so a crash afterwards does not reopen the transaction.
#[test]
fn retention_deleting_a_closed_transaction_leaves_it_closed_after_a_crash() {
    let fs = SimFs::new();
    let dir = PathBuf::from("/d/p");
    let p = Partition::open(&Storage::new(Arc::new(fs.clone())), dir.clone(), cfg()).expect("open");
    filler(&p, 30);
    send(&p, 5, 0, 0, 1, true).expect("txn record");
    let m = p.append_marker(5, 0, true, 0, 1).expect("commit");
    p.wait_durable(m.last_offset + 1).expect("durable");
    filler(&p, 60); // the marker's segment is sealed, then old
    let policy = es_storage::RetentionPolicy {
        retention_bytes: Some(1),
        ..es_storage::RetentionPolicy::default()
    };
    let r = p.enforce_retention(&policy, 10).expect("retention");
    assert!(r.log_start_offset > m.base_offset, "{r:?}");
    drop(p);
    let q = Partition::open(
        &Storage::new(Arc::new(fs.crash_image(Tear::None))),
        dir,
        cfg(),
    )
    .expect("recover");
    assert_eq!(q.log_start_offset(), r.log_start_offset);
    assert_eq!(q.last_stable_offset(), q.high_watermark());
}
