//! Tests of the coordinator's state in the metadata quorum: writes under
//! the loaded fence, refused and lost writes, loading and dropping ids as
//! leaderships move, placements that only move forward.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Weak};

use es_storage::RealFs;
use parking_lot::Mutex;

use super::*;
use crate::partition_log::PartitionLog;
use crate::txn::coordinator::Partitions;
use crate::txn::placement::Loaded;
use crate::txn::state::{TopicPartition, TxnState};
use crate::txn::TxnConfig;

/// No partition is open: every marker's partition is gone.
struct NoPartitions;

impl Partitions for NoPartitions {
    fn partition(&self, _: &str, _: i32) -> Option<PartitionLog> {
        None
    }
    fn for_each_partition(&self, _: &mut dyn FnMut(&PartitionLog)) {}
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Apply,
    Refuse,
    /// Applied, but the answer is lost (a timeout).
    ApplyThenTimeout,
    /// Leadership moves away while the write is applied.
    ApplyThenLose,
}

/// A stand-in for the metadata log: the applied documents, the writes and
/// their fences; it hands applied changes back as the broker's event hook
/// does.
#[derive(Debug)]
struct Log {
    mode: Mutex<Mode>,
    docs: Mutex<BTreeMap<String, TxnRecord>>,
    fences: Mutex<Vec<TxnFence>>,
    coord: Mutex<Weak<TxnCoordinator>>,
}

impl Log {
    fn new() -> Arc<Log> {
        Arc::new(Log {
            mode: Mutex::new(Mode::Apply),
            docs: Mutex::new(BTreeMap::new()),
            fences: Mutex::new(Vec::new()),
            coord: Mutex::new(Weak::new()),
        })
    }
}

impl TxnStateStore for Log {
    fn partition_of(&self, _: &str, partitions: i32) -> i32 {
        assert_eq!(partitions, 1, "one partition in these tests");
        0
    }

    fn write(&self, fence: TxnFence, entries: &[LogEntry]) -> Result<(), TxnError> {
        let mode = *self.mode.lock();
        if mode == Mode::Refuse {
            return Err(TxnError::JournalFailed);
        }
        self.fences.lock().push(fence);
        let coord = self.coord.lock().upgrade();
        for e in entries {
            let (id, rec) = match e {
                LogEntry::Txn { id, txn } => (id.clone(), Some(txn.clone())),
                LogEntry::Remove { id } => (id.clone(), None),
                other => panic!("{other:?} is not for the metadata log"),
            };
            match &rec {
                Some(r) => self.docs.lock().insert(id.clone(), r.clone()),
                None => self.docs.lock().remove(&id),
            };
            if mode == Mode::ApplyThenLose {
                if let Some(c) = &coord {
                    c.apply_placement(held(fence.leader_epoch + 1, false), &Vec::new);
                }
            }
            if let Some(c) = &coord {
                c.reconcile_applied(&id, rec);
            }
        }
        match mode {
            Mode::ApplyThenTimeout => Err(TxnError::CoordinatorNotAvailable),
            _ => Ok(()),
        }
    }
}

/// One partition of `__transaction_state`, at `epoch`, led here or not.
fn held(epoch: i32, mine: bool) -> Placement {
    Placement {
        partitions: 1,
        leaders: [(0, (epoch, mine))].into_iter().collect(),
    }
}

fn open(dir: &std::path::Path) -> Arc<TxnCoordinator> {
    Arc::new(
        TxnCoordinator::open(
            Arc::new(RealFs),
            dir,
            TxnConfig::default(),
            es_storage::clock::system(),
        )
        .expect("open"),
    )
}

fn in_quorum(
    dir: &std::path::Path,
    records: Vec<(String, TxnRecord)>,
) -> (Arc<TxnCoordinator>, Arc<Log>) {
    let c = open(dir);
    let log = Log::new();
    *log.coord.lock() = Arc::downgrade(&c);
    for (id, r) in &records {
        log.docs.lock().insert(id.clone(), r.clone());
    }
    let loaded = c.enter_quorum(log.clone(), held(3, true), &|| records.clone());
    assert_eq!(loaded.ids, records.len());
    (c, log)
}

fn rec(state: TxnState, epoch: i16) -> TxnRecord {
    TxnRecord {
        producer_id: 42,
        prev_producer_id: -1,
        producer_epoch: epoch,
        last_producer_epoch: -1,
        timeout_ms: 1,
        state,
        partitions: [TopicPartition::new("t", 0)].into_iter().collect(),
        groups: Default::default(),
        offsets: Vec::new(),
        start_ms: 1,
        last_update_ms: 1,
    }
}

#[test]
fn writes_go_to_the_metadata_log_under_the_loaded_fence() {
    let dir = tempfile::tempdir().expect("tmp");
    let (c, log) = in_quorum(dir.path(), Vec::new());
    let (pid, epoch) = c
        .init_producer_id(&NoPartitions, Some("a"), 60_000, None)
        .expect("init");
    assert_eq!(epoch, 0);
    assert_eq!(log.docs.lock()["a"].producer_id, pid);
    assert_eq!(
        log.fences.lock().as_slice(),
        &[TxnFence {
            partition: 0,
            leader_epoch: 3
        }]
    );
    assert!(
        c.journaled_txns().is_empty(),
        "producers.journal holds no transactional id"
    );
    // A known id bumps the epoch of its producer id.
    assert_eq!(
        c.init_producer_id(&NoPartitions, Some("a"), 60_000, None),
        Ok((pid, 1))
    );
}

#[test]
fn a_refused_write_changes_nothing_in_memory() {
    let dir = tempfile::tempdir().expect("tmp");
    let (c, log) = in_quorum(dir.path(), vec![("a".into(), rec(TxnState::Empty, 4))]);
    *log.mode.lock() = Mode::Refuse;
    assert_eq!(
        c.init_producer_id(&NoPartitions, Some("a"), 60_000, None),
        Err(TxnError::JournalFailed),
        "NOT_COORDINATOR"
    );
    assert_eq!(c.describe("a").map(|r| r.producer_epoch), Ok(4));
    *log.mode.lock() = Mode::Apply;
    assert_eq!(
        c.init_producer_id(&NoPartitions, Some("a"), 60_000, None),
        Ok((42, 5)),
        "not left pending"
    );
}

#[test]
fn a_write_applied_after_its_answer_was_lost_is_taken() {
    let dir = tempfile::tempdir().expect("tmp");
    let (c, log) = in_quorum(dir.path(), vec![("a".into(), rec(TxnState::Empty, 4))]);
    *log.mode.lock() = Mode::ApplyThenTimeout;
    assert_eq!(
        c.init_producer_id(&NoPartitions, Some("a"), 60_000, None),
        Err(TxnError::CoordinatorNotAvailable)
    );
    assert_eq!(
        c.describe("a").map(|r| r.producer_epoch),
        Ok(5),
        "memory took what the log applied"
    );
    // Applied while no write of the id is in flight: taken at once.
    let mut later = rec(TxnState::Empty, 9);
    later.producer_id = 43;
    c.reconcile_applied("a", Some(later));
    assert_eq!(c.describe("a").map(|r| r.producer_id), Ok(43));
    c.reconcile_applied("a", None);
    assert_eq!(c.describe("a"), Err(TxnError::TransactionalIdNotFound));
}

#[test]
fn a_write_made_as_the_partition_moves_is_not_applied_here() {
    let dir = tempfile::tempdir().expect("tmp");
    let (c, log) = in_quorum(dir.path(), vec![("a".into(), rec(TxnState::Empty, 4))]);
    *log.mode.lock() = Mode::ApplyThenLose;
    assert_eq!(
        c.init_producer_id(&NoPartitions, Some("a"), 60_000, None),
        Err(TxnError::JournalFailed)
    );
    assert_eq!(c.describe("a"), Err(TxnError::TransactionalIdNotFound));
    assert_eq!(log.docs.lock()["a"].producer_epoch, 5, "the log has it");
}

#[test]
fn leaderships_load_and_drop_ids_and_a_former_coordinator_acts_on_none() {
    let dir = tempfile::tempdir().expect("tmp");
    let ongoing = rec(TxnState::Ongoing, 2);
    let (c, log) = in_quorum(dir.path(), vec![("a".into(), ongoing.clone())]);
    // Lost: the id goes, and a timer finds nothing to abort.
    let lost = c.apply_placement(held(4, false), &Vec::new);
    assert_eq!(lost.dropped, 1);
    assert_eq!(c.describe("a"), Err(TxnError::TransactionalIdNotFound));
    c.abort_timed_out(&NoPartitions, i64::MAX / 2);
    assert!(log.fences.lock().is_empty(), "nothing written");
    // An older image changes nothing.
    let stale = c.apply_placement(held(3, true), &|| panic!("not loaded"));
    assert_eq!(stale, Loaded::default());
    // Regained at a newer epoch, with a decided transaction: loaded, and
    // recovery completes it under the new fence.
    let decided = rec(TxnState::PrepareCommit, 2);
    let records = vec![("a".to_string(), decided)];
    let got = c.apply_placement(held(6, true), &|| records.clone());
    assert_eq!((got.ids, got.prepared), (1, 1));
    c.recover(&NoPartitions);
    assert_eq!(
        c.describe("a").map(|r| r.state),
        Ok(TxnState::CompleteCommit)
    );
    assert_eq!(log.docs.lock()["a"].state, TxnState::CompleteCommit);
    assert_eq!(log.fences.lock().last().map(|f| f.leader_epoch), Some(6));
}

#[test]
fn an_ongoing_transaction_loaded_times_out_and_is_aborted() {
    let dir = tempfile::tempdir().expect("tmp");
    let (c, log) = in_quorum(dir.path(), vec![("a".into(), rec(TxnState::Ongoing, 2))]);
    c.abort_timed_out(&NoPartitions, 10_000);
    let r = c.describe("a").expect("a");
    assert_eq!(r.state, TxnState::CompleteAbort);
    assert_eq!(r.producer_epoch, 3, "the producer is fenced");
    assert_eq!(log.docs.lock()["a"], r);
}

#[test]
fn expiry_removes_through_the_metadata_log() {
    let dir = tempfile::tempdir().expect("tmp");
    let (c, log) = in_quorum(
        dir.path(),
        vec![("a".into(), rec(TxnState::CompleteCommit, 2))],
    );
    c.expire_ids(i64::MAX / 2);
    assert_eq!(c.describe("a"), Err(TxnError::TransactionalIdNotFound));
    assert!(log.docs.lock().is_empty());
}

#[test]
fn entering_the_quorum_replaces_what_the_journal_held() {
    let dir = tempfile::tempdir().expect("tmp");
    {
        let c = open(dir.path());
        c.init_producer_id(&NoPartitions, Some("old"), 60_000, None)
            .expect("init");
        assert!(c.journaled_txns().contains_key("old"));
        c.forget_journaled(&["old".to_string()]).expect("forget");
        assert!(c.journaled_txns().is_empty());
    }
    assert!(open(dir.path()).journaled_txns().is_empty(), "durably");
    let (c, _) = in_quorum(dir.path(), vec![("b".into(), rec(TxnState::Empty, 0))]);
    assert_eq!(c.list(&[], &[], -1).0.len(), 1);
}

#[test]
fn placements_only_move_forward() {
    let none = Placement::without_topic(false);
    let alone = Placement::without_topic(true);
    assert_eq!(alone.fence_at(0).map(|f| f.leader_epoch), Some(-1));
    assert_eq!(none.fence_at(0), None);
    assert_eq!(
        none.advance(&alone),
        alone,
        "brokers decide without the topic"
    );
    let three = Placement {
        partitions: 3,
        leaders: (0..3).map(|p| (p, (1, p == 1))).collect(),
    };
    assert_eq!(alone.advance(&three), three, "the topic appears");
    assert_eq!(three.advance(&alone), three, "never back to no topic");
    let mut newer = three.clone();
    newer.leaders.insert(1, (2, false));
    newer.leaders.insert(2, (0, true));
    let got = three.advance(&newer);
    assert_eq!(got.leaders[&1], (2, false));
    assert_eq!(got.leaders[&2], (1, false), "an older epoch is ignored");
    assert_eq!(three.to_load(&got), Default::default());
    let regained: HashMap<i32, (i32, bool)> = [(1, (3, true))].into_iter().collect();
    let mut again = got.clone();
    again.leaders.extend(regained);
    assert_eq!(got.to_load(&again).into_iter().collect::<Vec<_>>(), vec![1]);
}
