//! Tests of [`super::RemoteOffsets`]: epochs, settling, the bound, the
//! journal path, and the metadata-quorum path with a store that applies
//! what it is given (as the broker's apply thread does).

use std::cell::RefCell;

use super::*;

fn off(group: &str, partition: i32, offset: i64) -> TxnOffset {
    TxnOffset {
        group: group.into(),
        topic: "in".into(),
        partition,
        offset,
        leader_epoch: -1,
        metadata: None,
        member_id: String::new(),
        generation_id: -1,
        instance_id: None,
    }
}

fn ok(_: LogEntry) -> Result<(), TxnError> {
    Ok(())
}

fn no_commit(_: &str, _: &[TxnOffset]) -> Result<(), TxnError> {
    panic!("nothing is to be committed")
}

#[test]
fn offsets_are_kept_per_group_and_producer_and_settled_by_group() {
    let r = RemoteOffsets::default();
    r.add("a", 7, 1, vec![off("a", 0, 5)], &ok).unwrap();
    r.add("b", 7, 1, vec![off("b", 0, 6)], &ok).unwrap();
    r.add("a", 7, 1, vec![off("a", 0, 9)], &ok).unwrap();
    assert!(r.has("a", "in", 0) && r.has("b", "in", 0));
    assert_eq!(
        r.add("a", 7, 0, vec![off("a", 1, 1)], &ok),
        Err(TxnError::ProducerFenced)
    );
    // A marker of an older epoch settles nothing.
    r.settle(7, 0, true, &|_| true, &no_commit, &ok).unwrap();
    assert!(r.has("a", "in", 0));
    let got = RefCell::new(Vec::new());
    let commit = |g: &str, o: &[TxnOffset]| {
        got.borrow_mut().push((g.to_string(), o.to_vec()));
        Ok(())
    };
    r.settle(7, 1, true, &|g| g == "a", &commit, &ok).unwrap();
    let got = got.into_inner();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, "a");
    assert_eq!(got[0].1.len(), 1);
    assert_eq!(got[0].1[0].offset, 9, "the last commit of a partition wins");
    assert!(!r.has("a", "in", 0) && r.has("b", "in", 0));
    // A newer epoch replaces what the fenced producer left (in the journal,
    // for every group of the producer).
    r.add("c", 7, 2, vec![off("c", 0, 1)], &ok).unwrap();
    assert!(!r.has("b", "in", 0));
    r.settle(7, 2, false, &|_| true, &no_commit, &ok).unwrap();
    assert!(r.table.lock().is_empty());
}

#[test]
fn a_marker_drops_what_an_older_epoch_left_and_never_commits_it() {
    let (r, _q) = in_quorum();
    r.applied(
        "old",
        3,
        Some(&RemotePending {
            epoch: 4,
            offsets: vec![off("old", 0, 1)],
        }),
    );
    r.add("new", 3, 5, vec![off("new", 0, 2)], &never).unwrap();
    let got = RefCell::new(Vec::new());
    let commit = |g: &str, _: &[TxnOffset]| {
        got.borrow_mut().push(g.to_string());
        Ok(())
    };
    r.settle(3, 5, true, &|_| true, &commit, &never).unwrap();
    assert_eq!(got.into_inner(), vec!["new".to_string()]);
    assert!(r.table.lock().is_empty());
}

#[test]
fn a_failed_commit_leaves_them_pending_for_the_resent_marker() {
    let r = RemoteOffsets::default();
    r.add("g", 1, 0, vec![off("g", 0, 1)], &ok).unwrap();
    let fail = |_: &str, _: &[TxnOffset]| Err(TxnError::CoordinatorNotAvailable);
    assert!(r.settle(1, 0, true, &|_| true, &fail, &ok).is_err());
    assert!(r.has("g", "in", 0));
    let n = RefCell::new(0);
    let commit = |_: &str, _: &[TxnOffset]| {
        *n.borrow_mut() += 1;
        Ok(())
    };
    r.settle(1, 0, true, &|_| true, &commit, &ok).unwrap();
    r.settle(1, 0, true, &|_| true, &commit, &ok).unwrap();
    assert_eq!(n.into_inner(), 1, "settled once, then nothing is pending");
}

#[test]
fn a_failed_journal_write_changes_nothing_and_a_replay_restores() {
    let r = RemoteOffsets::default();
    let fail = |_: LogEntry| Err(TxnError::JournalFailed);
    assert_eq!(
        r.add("g", 1, 0, vec![off("g", 0, 1)], &fail),
        Err(TxnError::JournalFailed)
    );
    assert!(!r.has("g", "in", 0));
    let log = RefCell::new(crate::txn::log::LogState::default());
    let keep = |e: LogEntry| {
        log.borrow_mut().apply(&e);
        Ok(())
    };
    r.add("g", 1, 0, vec![off("g", 0, 1)], &keep).unwrap();
    r.add("h", 1, 0, vec![off("h", 0, 2)], &keep).unwrap();
    r.settle(1, 0, false, &|g| g == "g", &no_commit, &keep)
        .unwrap();
    let replayed = RemoteOffsets::from_log(&log.borrow().remote_offsets);
    assert!(!replayed.has("g", "in", 0) && replayed.has("h", "in", 0));
    r.settle(1, 0, false, &|_| true, &no_commit, &keep).unwrap();
    assert!(log.borrow().remote_offsets.is_empty());
}

#[test]
fn the_table_is_bounded() {
    let r = RemoteOffsets::default();
    let many: Vec<TxnOffset> = (0..REMOTE_OFFSETS_MAX as i32)
        .map(|p| off("g", p, 1))
        .collect();
    r.add("g", 1, 0, many, &ok).unwrap();
    assert_eq!(
        r.add("g", 2, 0, vec![off("g", 0, 1)], &ok),
        Err(TxnError::CoordinatorNotAvailable)
    );
    // Rewriting an offset already held does not grow the table.
    r.add("g", 1, 0, vec![off("g", 0, 2)], &ok).unwrap();
}

#[test]
fn a_journaled_set_splits_by_group() {
    let p = RemotePending {
        epoch: 3,
        offsets: vec![off("a", 0, 1), off("b", 0, 2), off("a", 1, 3)],
    };
    let split = split_by_group(9, &p);
    assert_eq!(split.len(), 2);
    assert_eq!(split[&("a".to_string(), 9)].offsets.len(), 2);
    assert_eq!(split[&("b".to_string(), 9)].epoch, 3);
}

/// The metadata quorum as the broker's apply thread shows it: every write
/// accepted is applied to the table before the write returns; `refuse`
/// plays a deposed coordinator.
#[derive(Debug, Default)]
struct Quorum {
    table: std::sync::Weak<RemoteOffsets>,
    refuse: std::sync::atomic::AtomicBool,
    log: Mutex<BTreeMap<RemoteKey, RemotePending>>,
}

impl RemoteOffsetsStore for Quorum {
    fn write(
        &self,
        group: &str,
        producer_id: i64,
        pending: Option<&RemotePending>,
    ) -> Result<(), TxnError> {
        if self.refuse.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(TxnError::JournalFailed);
        }
        let key = (group.to_string(), producer_id);
        match pending {
            Some(p) => self.log.lock().insert(key, p.clone()),
            None => self.log.lock().remove(&key),
        };
        if let Some(t) = self.table.upgrade() {
            t.applied(group, producer_id, pending);
        }
        Ok(())
    }
}

fn in_quorum() -> (Arc<RemoteOffsets>, Arc<Quorum>) {
    let r = Arc::new(RemoteOffsets::default());
    let q = Arc::new(Quorum {
        table: Arc::downgrade(&r),
        ..Quorum::default()
    });
    r.enter_quorum(q.clone());
    (r, q)
}

fn never(_: LogEntry) -> Result<(), TxnError> {
    panic!("the journal is not written once the quorum holds the offsets")
}

#[test]
fn in_the_quorum_every_change_is_one_group_and_producer_key() {
    let journaled = RemoteOffsets::from_log(
        &[(
            1,
            RemotePending {
                epoch: 0,
                offsets: vec![off("j", 0, 1)],
            },
        )]
        .into_iter()
        .collect(),
    );
    assert!(journaled.has("j", "in", 0));
    let (r, q) = in_quorum();
    assert!(r.in_quorum());
    r.add("a", 7, 1, vec![off("a", 0, 5)], &never).unwrap();
    r.add("b", 7, 1, vec![off("b", 0, 6)], &never).unwrap();
    // A newer epoch in one group leaves the other group's key alone (it is
    // another partition's to write); its marker drops it.
    r.add("a", 7, 2, vec![off("a", 1, 7)], &never).unwrap();
    {
        let log = q.log.lock();
        assert_eq!(log.len(), 2);
        let a = &log[&("a".to_string(), 7)];
        assert_eq!((a.epoch, a.offsets.len()), (2, 1));
        assert_eq!(log[&("b".to_string(), 7)].epoch, 1);
    }
    // Refused by the fence: nothing changes.
    q.refuse.store(true, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(
        r.add("a", 7, 2, vec![off("a", 2, 1)], &never),
        Err(TxnError::JournalFailed)
    );
    assert!(!r.has("a", "in", 2));
    q.refuse.store(false, std::sync::atomic::Ordering::Relaxed);
    let got = RefCell::new(Vec::new());
    let commit = |g: &str, o: &[TxnOffset]| {
        got.borrow_mut().push((g.to_string(), o[0].offset));
        Ok(())
    };
    r.settle(7, 2, true, &|_| true, &commit, &never).unwrap();
    assert_eq!(got.into_inner(), vec![("a".to_string(), 7)]);
    assert!(q.log.lock().is_empty(), "both keys deleted");
    assert!(r.table.lock().is_empty());
}

#[test]
fn load_and_unload_follow_the_groups_placed_here() {
    let (r, q) = in_quorum();
    r.add("a", 1, 0, vec![off("a", 0, 1)], &never).unwrap();
    r.add("b", 1, 0, vec![off("b", 0, 2)], &never).unwrap();
    // This broker stops coordinating "a".
    assert_eq!(r.unload(&|g| g == "a"), 1);
    assert!(!r.has("a", "in", 0) && r.has("b", "in", 0));
    // It takes "a" back: what the log holds replaces what memory had, and
    // only the groups placed are taken.
    let from_log: Vec<(RemoteKey, RemotePending)> = q
        .log
        .lock()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    r.applied(
        "a",
        2,
        Some(&RemotePending {
            epoch: 0,
            offsets: vec![off("a", 5, 5)],
        }),
    );
    assert_eq!(r.load(&|g| g == "a", from_log), 1);
    assert!(r.has("a", "in", 0) && !r.has("a", "in", 5), "replaced");
    assert_eq!(r.producers_of("a"), [1].into_iter().collect());
    assert_eq!(r.producers_of("b"), [1].into_iter().collect());
}
