//! The replication state's rules: roles from assignments, the high
//! watermark over the maximal ISR, acks=all waits, ISR shrink and expand.

use std::sync::{Arc, Mutex};

use super::*;

fn assignment(leader: i32, epoch: i32, isr: &[i32]) -> Assignment {
    Assignment {
        leader,
        leader_epoch: epoch,
        partition_epoch: epoch,
        replicas: vec![1, 2, 3],
        isr: isr.to_vec(),
    }
}

/// A wait whose outcome lands in the returned cell.
fn wait_cell() -> (WaitDone, Arc<Mutex<Option<String>>>) {
    let cell = Arc::new(Mutex::new(None));
    let c = cell.clone();
    let done: WaitDone = Box::new(move |r| {
        *c.lock().unwrap() = Some(match r {
            Ok(()) => "ok".to_string(),
            Err(e) => format!("{e:?}"),
        });
    });
    (done, cell)
}

fn run(decided: Vec<(WaitDone, Result<(), WaitError>)>) {
    for (d, r) in decided {
        d(r);
    }
}

#[test]
fn roles_follow_the_assignment() {
    let r = Replica::solo();
    assert_eq!(r.role(), Role::Leader, "alone until assigned");
    let t = r.apply(2, assignment(1, 0, &[1, 2, 3]), 0, 0);
    assert_eq!((t.role, t.changed), (Role::Follower { leader: 1 }, true));
    let t = r.apply(2, assignment(1, 0, &[1, 2]), 0, 0);
    assert!(!t.changed, "an ISR change is no new leadership");
    let t = r.apply(2, assignment(2, 1, &[2]), 10, 0);
    assert_eq!((t.role, t.changed), (Role::Leader, true));
    let t = r.apply(2, assignment(-1, 2, &[2]), 10, 0);
    assert_eq!(t.role, Role::Offline);
}

#[test]
fn the_high_watermark_is_the_smallest_fsynced_end_over_the_isr() {
    let r = Replica::solo();
    r.apply(1, assignment(1, 0, &[1, 2, 3]), 0, 0);
    assert!(r.replicated());
    let (done, cell) = wait_cell();
    assert!(r.wait_replicated(10, 2, done).is_none());
    // Follower 2 has 10 on disk, follower 3 nothing yet: no move.
    let (hw, decided) = r.follower_fetched(2, 10, 10, 10, 1);
    assert_eq!(hw, None);
    assert!(decided.is_empty());
    let (hw, decided) = r.follower_fetched(3, 7, 10, 10, 1);
    assert_eq!(hw, Some(7));
    run(decided);
    assert_eq!(*cell.lock().unwrap(), None, "10 not yet on every replica");
    let (hw, decided) = r.follower_fetched(3, 10, 10, 10, 2);
    assert_eq!(hw, Some(10));
    run(decided);
    assert_eq!(cell.lock().unwrap().as_deref(), Some("ok"));
    // Never above the leader's own durable end.
    let (hw, _) = r.follower_fetched(2, 20, 20, 12, 3);
    assert_eq!(hw, None);
    let (hw, _) = r.follower_fetched(3, 20, 20, 12, 3);
    assert_eq!(hw, Some(12));
}

#[test]
fn a_shrunk_isr_below_min_insync_fails_the_wait_after_the_append() {
    let r = Replica::solo();
    r.apply(1, assignment(1, 0, &[1, 2, 3]), 0, 0);
    let (done, cell) = wait_cell();
    assert!(r.wait_replicated(5, 3, done).is_none());
    // Follower 3 leaves the ISR; follower 2 has the records.
    r.apply(1, assignment(1, 0, &[1, 2]), 5, 0);
    run(r.follower_fetched(2, 5, 5, 5, 1).1);
    assert_eq!(
        cell.lock().unwrap().as_deref(),
        Some("NotEnoughReplicasAfterAppend")
    );
}

#[test]
fn losing_leadership_fails_the_waits() {
    let r = Replica::solo();
    r.apply(1, assignment(1, 0, &[1, 2]), 0, 0);
    let (done, cell) = wait_cell();
    assert!(r.wait_replicated(5, 1, done).is_none());
    let t = r.apply(1, assignment(2, 1, &[2]), 5, 0);
    for d in t.failed {
        d(Err(WaitError::NotLeader));
    }
    assert_eq!(cell.lock().unwrap().as_deref(), Some("NotLeader"));
}

#[test]
fn a_replica_being_added_counts_at_once_one_being_removed_only_when_applied() {
    let r = Replica::solo();
    r.apply(1, assignment(1, 0, &[1, 2]), 0, 0);
    run(r.follower_fetched(2, 10, 10, 10, 1).1);
    assert_eq!(r.high_watermark(), 10);
    // 3 catches up to the high watermark: due to join.
    run(r.follower_fetched(3, 10, 10, 10, 1).1);
    assert_eq!(r.expand_due(2), None);
    assert_eq!(r.expand_due(3), Some(vec![1, 2, 3]));
    r.propose_isr(vec![1, 2, 3]);
    assert_eq!(r.maximal_isr(), Some(vec![1, 2, 3]));
    // While the change is in flight, 3 holds the high watermark back.
    run(r.follower_fetched(2, 15, 15, 15, 2).1);
    assert_eq!(r.high_watermark(), 10);
    // A shrink proposal does not stop counting the replica it removes.
    r.apply(1, assignment(1, 0, &[1, 2, 3]), 15, 0);
    r.propose_isr(vec![1, 2]);
    run(r.follower_fetched(2, 15, 15, 15, 3).1);
    assert_eq!(r.high_watermark(), 10, "3 still counts");
}

#[test]
fn followers_that_do_not_catch_up_within_the_lag_leave_the_isr() {
    let r = Replica::solo();
    r.apply(1, assignment(1, 0, &[1, 2, 3]), 0, 1_000);
    assert_eq!(
        r.shrink_due(20_000, 30_000),
        None,
        "a full lag from leadership"
    );
    // 2 keeps up; 3 never fetches.
    r.follower_fetched(2, 0, 0, 0, 30_000);
    assert_eq!(r.shrink_due(32_000, 30_000), Some(vec![1, 2]));
    r.propose_isr(vec![1, 2]);
    assert_eq!(r.shrink_due(32_000, 30_000), None, "one change at a time");
    r.proposal_failed();
    // A follower behind the leader's end is caught up as of its previous
    // fetch once it reaches the end that fetch saw.
    r.follower_fetched(3, 0, 50, 0, 31_000);
    r.follower_fetched(3, 50, 80, 50, 40_000);
    r.follower_fetched(2, 80, 80, 80, 45_000);
    assert_eq!(r.shrink_due(60_000, 30_000), None);
    assert_eq!(r.shrink_due(61_001, 30_000), Some(vec![1, 2]));
}

#[test]
fn a_leader_alone_acknowledges_only_while_it_leads_with_enough_in_sync() {
    let r = Replica::solo();
    assert!(r.solo_ack(1).is_ok(), "a partition that leads alone");
    r.apply(1, assignment(1, 0, &[1]), 0, 0);
    assert!(!r.replicated());
    assert!(r.solo_ack(1).is_ok());
    assert!(matches!(
        r.solo_ack(2),
        Err(WaitError::NotEnoughReplicasAfterAppend)
    ));
    // Deposed between its append and its fsync: not acknowledged.
    r.apply(1, assignment(2, 1, &[2]), 10, 0);
    assert!(!r.replicated());
    assert!(matches!(r.solo_ack(1), Err(WaitError::NotLeader)));
}
