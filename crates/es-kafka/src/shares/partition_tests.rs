//! SharePartition against Kafka's cases by name (§2.3-2.5 of
//! docs/share-groups-design.md: each acknowledgement error with its message
//! and code, the delivery count limit, throttling, the lock limit, batch
//! splitting, start and log-start movement, restart), and a property test
//! against a per-offset reference model with random acquisitions,
//! acknowledgements, releases, lock expiries, log-start moves and restarts
//! rebuilt from the journal changes emitted so far.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

const M1: &str = "member-1";
const M2: &str = "member-2";
const LOCK_MS: i64 = 30_000;

fn limits(delivery_count_limit: u16, max_record_locks: i64) -> ShareLimits {
    ShareLimits {
        delivery_count_limit,
        max_record_locks,
    }
}

fn params(
    member: &str,
    max_records: i32,
    batch_size: i32,
    mode: AcquireMode,
    now_ms: i64,
) -> AcquireParams<'_> {
    AcquireParams {
        member,
        max_records,
        batch_size,
        mode,
        lock_duration_ms: LOCK_MS,
        now_ms,
    }
}

/// Acquires in batch-optimized mode from `next_fetch_offset`, reading every
/// batch of `log` from there below `end`.
fn fetch(
    sp: &mut SharePartition,
    member: &str,
    max_records: i32,
    batch_size: i32,
    log: &[(i64, i64)],
    end: i64,
) -> Vec<AcquiredRecords> {
    fetch_mode(
        sp,
        member,
        max_records,
        batch_size,
        AcquireMode::BatchOptimized,
        log,
        end,
    )
}

fn fetch_outcome(
    sp: &mut SharePartition,
    member: &str,
    max_records: i32,
    batch_size: i32,
    log: &[(i64, i64)],
    end: i64,
) -> Acquired {
    let from = sp.next_fetch_offset();
    let read: Vec<(i64, i64)> = log
        .iter()
        .copied()
        .filter(|&(f, l)| l >= from && f < end)
        .collect();
    let view = LogView {
        log_start: 0,
        end,
        fetch_offset: from,
        batches: &read,
    };
    let p = params(
        member,
        max_records,
        batch_size,
        AcquireMode::BatchOptimized,
        0,
    );
    sp.acquire(&p, &view).expect("acquire")
}

fn fetch_mode(
    sp: &mut SharePartition,
    member: &str,
    max_records: i32,
    batch_size: i32,
    mode: AcquireMode,
    log: &[(i64, i64)],
    end: i64,
) -> Vec<AcquiredRecords> {
    let from = sp.next_fetch_offset();
    let read: Vec<(i64, i64)> = log
        .iter()
        .copied()
        .filter(|&(f, l)| l >= from && f < end)
        .collect();
    let view = LogView {
        log_start: 0,
        end,
        fetch_offset: from,
        batches: &read,
    };
    sp.acquire(&params(member, max_records, batch_size, mode, 0), &view)
        .expect("acquire")
        .records
}

fn ar(first: i64, last: i64, delivery_count: u16) -> AcquiredRecords {
    AcquiredRecords {
        first,
        last,
        delivery_count,
    }
}

fn ack(first: i64, last: i64, types: &[i8]) -> AckBatch {
    AckBatch {
        first,
        last,
        types: types.to_vec(),
    }
}

fn ack_params(member: &str) -> AckParams<'_> {
    AckParams {
        member,
        renew_allowed: true,
        lock_duration_ms: LOCK_MS,
        now_ms: 0,
    }
}

fn acknowledge(
    sp: &mut SharePartition,
    member: &str,
    batches: &[AckBatch],
) -> Result<Outcome, ShareError> {
    sp.acknowledge(&ack_params(member), batches)
}

fn state(sp: &SharePartition, o: i64) -> (RecordState, u16) {
    let r = sp.record(o).expect("offset in flight");
    (r.state, r.delivery_count)
}

fn sb(first: i64, last: i64, state: DurableState, delivery_count: u16) -> StateBatch {
    StateBatch {
        first,
        last,
        state,
        delivery_count,
    }
}

const FIVE_BATCHES_OF_FIVE: [(i64, i64); 5] = [(0, 4), (5, 9), (10, 14), (15, 19), (20, 24)];

// ---- acquisition ----

#[test]
fn batch_optimized_takes_the_last_wanted_record_s_batch_to_its_end() {
    let mut sp = SharePartition::new(0, ShareLimits::default());
    // 7 records wanted: 0-4 and 5-6; 5-6's batch ends at 9.
    let got = fetch(&mut sp, M1, 7, 500, &FIVE_BATCHES_OF_FIVE, 25);
    assert_eq!(got, vec![ar(0, 9, 1)]);
    assert_eq!(sp.next_offset(), 10);
    assert_eq!(sp.in_flight(), 10);
    let r = sp.record(7).expect("in flight");
    assert_eq!(r.state, RecordState::Acquired);
    assert_eq!(r.owner.as_deref(), Some(M1));
    assert_eq!(r.lock_deadline_ms, Some(LOCK_MS));
}

#[test]
fn batch_size_splits_new_records_at_batch_boundaries() {
    let mut sp = SharePartition::new(0, ShareLimits::default());
    let log = [(0, 2), (3, 5), (6, 8), (9, 11)];
    // A new AcquiredRecords begins at the first batch at least 5 records
    // past the current one's start: 0-5, then 6-11.
    let got = fetch(&mut sp, M1, 100, 5, &log, 12);
    assert_eq!(got, vec![ar(0, 5, 1), ar(6, 11, 1)]);
    // Batch size 1: one per log batch.
    let mut sp = SharePartition::new(0, ShareLimits::default());
    let got = fetch(&mut sp, M1, 100, 1, &log, 12);
    assert_eq!(
        got,
        vec![ar(0, 2, 1), ar(3, 5, 1), ar(6, 8, 1), ar(9, 11, 1)]
    );
}

#[test]
fn acquisition_is_journaled_as_available_with_its_delivery_count() {
    let mut sp = SharePartition::new(0, ShareLimits::default());
    let view = LogView {
        log_start: 0,
        end: 10,
        fetch_offset: 0,
        batches: &[(0, 4), (5, 9)],
    };
    let p = params(M1, 100, 500, AcquireMode::BatchOptimized, 0);
    let got = sp.acquire(&p, &view).expect("acquire");
    assert_eq!(
        got.outcome.update,
        Some(ShareUpdate {
            start_offset: 0,
            batches: vec![sb(0, 9, DurableState::Available, 1)],
        })
    );
}

#[test]
fn record_limit_takes_exactly_max_records() {
    let mut sp = SharePartition::new(0, ShareLimits::default());
    let log = [(0, 9), (10, 19)];
    let rl = AcquireMode::RecordLimit;
    assert_eq!(
        fetch_mode(&mut sp, M1, 3, 500, rl, &log, 20),
        vec![ar(0, 2, 1)]
    );
    assert_eq!(sp.next_fetch_offset(), 3);
    // The read from 3 returns the whole batch 0-9 again; 0-2 are held.
    assert_eq!(
        fetch_mode(&mut sp, M2, 3, 500, rl, &log, 20),
        vec![ar(3, 5, 1)]
    );
    assert_eq!(
        fetch_mode(&mut sp, M2, 7, 500, rl, &log, 20),
        vec![ar(6, 12, 1)]
    );
    assert_eq!(sp.in_flight(), 13);
    // Released records of a batch are re-acquired exactly too.
    acknowledge(&mut sp, M1, &[ack(0, 2, &[2])]).expect("release");
    assert_eq!(
        fetch_mode(&mut sp, M2, 2, 500, rl, &log, 20),
        vec![ar(0, 1, 2)]
    );
    assert_eq!(state(&sp, 2), (RecordState::Available, 1));
}

#[test]
fn lock_limit_stops_new_records_but_not_available_ones_below_the_cursor() {
    let mut sp = SharePartition::new(0, limits(5, 10));
    let log = [(0, 9), (10, 19)];
    assert_eq!(fetch(&mut sp, M1, 100, 500, &log, 20), vec![ar(0, 9, 1)]);
    // At the limit and nothing available: nothing.
    assert_eq!(fetch(&mut sp, M2, 100, 500, &log, 20), vec![]);
    assert_eq!(sp.next_offset(), 10);
    // Released records below the cursor can still be acquired.
    acknowledge(&mut sp, M1, &[ack(2, 4, &[2])]).expect("release");
    assert_eq!(sp.next_fetch_offset(), 2);
    assert_eq!(fetch(&mut sp, M2, 100, 500, &log, 20), vec![ar(2, 4, 2)]);
    assert_eq!(sp.next_offset(), 10);
    // Acknowledging frees room: start moves, new records come.
    acknowledge(&mut sp, M1, &[ack(0, 1, &[1])]).expect("accept");
    assert_eq!(sp.start_offset(), 2);
    assert_eq!(fetch(&mut sp, M1, 100, 500, &log, 20), vec![ar(10, 19, 1)]);
    // Batch alignment may pass the limit (Kafka's documented overshoot).
    assert_eq!(sp.in_flight(), 18);
}

#[test]
fn redelivery_counts_up_and_the_limit_archives_on_release() {
    let mut sp = SharePartition::new(0, limits(2, 100));
    let log = [(0, 4), (5, 9)];
    assert_eq!(fetch(&mut sp, M1, 5, 500, &log, 10), vec![ar(0, 4, 1)]);
    let out = acknowledge(&mut sp, M1, &[ack(0, 4, &[2])]).expect("release");
    // AVAILABLE with count 1 is already on disk: nothing to write.
    assert_eq!(out.update, None);
    assert!(out.available_again);
    assert_eq!(fetch(&mut sp, M2, 5, 500, &log, 10), vec![ar(0, 4, 2)]);
    // Count 2 = the limit: a release archives, and start passes them.
    let out = acknowledge(&mut sp, M2, &[ack(0, 4, &[2])]).expect("release");
    assert!(!out.available_again);
    assert_eq!(
        out.update,
        Some(ShareUpdate {
            start_offset: 5,
            batches: vec![],
        })
    );
    assert_eq!(sp.start_offset(), 5);
    assert_eq!(fetch(&mut sp, M2, 5, 500, &log, 10), vec![ar(5, 9, 1)]);
}

#[test]
fn lock_expiry_releases_and_archives_at_the_limit() {
    let mut sp = SharePartition::new(0, limits(2, 100));
    let log = [(0, 4), (5, 9)];
    let view = |from| LogView {
        log_start: 0,
        end: 10,
        fetch_offset: from,
        batches: &log,
    };
    let at = |now| AcquireParams {
        now_ms: now,
        ..params(M1, 5, 500, AcquireMode::BatchOptimized, now)
    };
    sp.acquire(&at(0), &view(0)).expect("acquire");
    sp.acquire(&at(1_000), &view(5)).expect("acquire");
    assert_eq!(sp.next_lock_deadline(), Some(LOCK_MS));
    let e = sp.expire_locks(LOCK_MS - 1);
    assert_eq!(e.outcome, Outcome::default());
    assert_eq!(e.next_deadline_ms, Some(LOCK_MS));
    let e = sp.expire_locks(LOCK_MS);
    assert!(e.outcome.available_again);
    assert_eq!(e.outcome.update, None);
    assert_eq!(e.next_deadline_ms, Some(LOCK_MS + 1_000));
    assert_eq!(state(&sp, 0), (RecordState::Available, 1));
    assert_eq!(state(&sp, 5), (RecordState::Acquired, 1));
    // Second delivery, second expiry: the limit of 2 archives.
    sp.acquire(&at(40_000), &view(0)).expect("acquire");
    assert_eq!(state(&sp, 0), (RecordState::Acquired, 2));
    let e = sp.expire_locks(100_000);
    assert_eq!(e.next_deadline_ms, None);
    assert_eq!(sp.start_offset(), 5);
    assert_eq!(state(&sp, 5), (RecordState::Available, 1));
    assert_eq!(
        e.outcome.update,
        Some(ShareUpdate {
            start_offset: 5,
            batches: vec![],
        })
    );
}

#[test]
fn release_member_frees_only_its_records_and_keeps_counts() {
    let mut sp = SharePartition::new(0, limits(3, 100));
    let log = [(0, 4), (5, 9), (10, 14)];
    fetch(&mut sp, M1, 5, 500, &log, 15);
    fetch(&mut sp, M2, 5, 500, &log, 15);
    acknowledge(&mut sp, M1, &[ack(0, 1, &[1])]).expect("accept");
    let out = sp.release_member(M1);
    assert!(out.available_again);
    assert_eq!(out.update, None);
    assert_eq!(sp.start_offset(), 2);
    assert_eq!(state(&sp, 2), (RecordState::Available, 1));
    assert_eq!(state(&sp, 5), (RecordState::Acquired, 1));
    assert_eq!(sp.release_member("nobody"), Outcome::default());
}

/// Acquires 0-4 and 5-9 as two batches, makes 5-9 AVAILABLE with `count`
/// deliveries and 0-4 AVAILABLE with one.
fn two_batches_second_redelivered(count: u16) -> SharePartition {
    let mut sp = SharePartition::new(0, limits(5, 100));
    let log = [(0, 4), (5, 9), (10, 14)];
    assert_eq!(
        fetch(&mut sp, M1, 10, 5, &log, 15),
        vec![ar(0, 4, 1), ar(5, 9, 1)]
    );
    acknowledge(&mut sp, M1, &[ack(5, 9, &[2])]).expect("release");
    for c in 2..=count {
        assert_eq!(fetch(&mut sp, M1, 5, 5, &log, 15), vec![ar(5, 9, c)]);
        acknowledge(&mut sp, M1, &[ack(5, 9, &[2])]).expect("release");
    }
    acknowledge(&mut sp, M1, &[ack(0, 4, &[2])]).expect("release");
    sp
}

#[test]
fn throttled_batch_is_not_delivered_with_others() {
    // Limit 5: throttling from max(2, ceil(5 / 2)) = 3 deliveries.
    assert_eq!(limits(5, 1).throttle_limit(), 3);
    assert_eq!(limits(2, 1).throttle_limit(), 2);
    assert_eq!(limits(10, 1).throttle_limit(), 5);
    let log = [(0, 4), (5, 9), (10, 14)];
    // 5-9 delivered twice: below the throttle, fetched with 0-4.
    let mut sp = two_batches_second_redelivered(2);
    assert_eq!(
        fetch(&mut sp, M2, 20, 5, &log, 15),
        vec![ar(0, 4, 2), ar(5, 9, 3), ar(10, 14, 1)]
    );
    // Three times: the fetch stops before it once 0-4 is acquired ...
    let mut sp = two_batches_second_redelivered(3);
    assert_eq!(fetch(&mut sp, M2, 20, 5, &log, 15), vec![ar(0, 4, 2)]);
    // ... and the next fetch takes it alone, no new records with it.
    assert_eq!(fetch(&mut sp, M2, 20, 5, &log, 15), vec![ar(5, 9, 4)]);
    assert_eq!(sp.next_offset(), 10);
    assert_eq!(fetch(&mut sp, M2, 20, 5, &log, 15), vec![ar(10, 14, 1)]);
}

#[test]
fn an_available_record_over_a_lowered_limit_is_archived_not_delivered() {
    let mut sp = two_batches_second_redelivered(3);
    let log = [(0, 4), (5, 9), (10, 14)];
    assert_eq!(fetch(&mut sp, M2, 20, 5, &log, 15), vec![ar(0, 4, 2)]);
    // 5-9 delivered 3 times; the limit drops to 3 before the next fetch.
    sp.set_limits(limits(3, 100));
    let out = fetch_outcome(&mut sp, M2, 20, 5, &log, 15);
    assert_eq!(out.records, vec![ar(10, 14, 1)]);
    assert_eq!(state(&sp, 5), (RecordState::Archived, 3));
    assert_eq!(
        out.outcome.update,
        Some(ShareUpdate {
            start_offset: 0,
            batches: vec![
                sb(5, 9, DurableState::Archived, 3),
                sb(10, 14, DurableState::Available, 1)
            ],
        })
    );
}

// ---- acknowledgement errors, Kafka's messages and codes ----

fn record_state(m: &'static str) -> Result<Outcome, ShareError> {
    Err(ShareError::InvalidRecordState(m))
}

fn invalid_request(m: &str) -> Result<Outcome, ShareError> {
    Err(ShareError::InvalidRequest(m.to_string()))
}

/// 0-4 and 5-9 acquired by M1 as two batches.
fn two_acquired_batches() -> SharePartition {
    let mut sp = SharePartition::new(0, ShareLimits::default());
    let got = fetch(&mut sp, M1, 10, 5, &FIVE_BATCHES_OF_FIVE, 25);
    assert_eq!(got, vec![ar(0, 4, 1), ar(5, 9, 1)]);
    sp
}

#[test]
fn error_codes_are_kafka_s() {
    assert_eq!(ShareError::InvalidRecordState(msg::NOT_FOUND).code(), 121);
    assert_eq!(ShareError::InvalidRequest(String::new()).code(), 42);
    assert_eq!(ShareError::Internal(String::new()).code(), -1);
}

#[test]
fn ack_with_nothing_in_flight_is_batch_record_not_found() {
    let mut sp = SharePartition::new(0, ShareLimits::default());
    assert_eq!(
        acknowledge(&mut sp, M1, &[ack(0, 3, &[1])]),
        record_state(msg::NOT_FOUND)
    );
}

#[test]
fn ack_past_the_acquired_records_is_invalid_request() {
    let mut sp = two_acquired_batches();
    assert_eq!(
        acknowledge(&mut sp, M1, &[ack(10, 12, &[1])]),
        invalid_request(msg::FIRST_PAST)
    );
    assert_eq!(
        acknowledge(&mut sp, M1, &[ack(8, 12, &[1])]),
        invalid_request(msg::LAST_PAST)
    );
}

#[test]
fn ack_of_a_batch_not_acquired() {
    let mut sp = two_acquired_batches();
    acknowledge(&mut sp, M1, &[ack(5, 9, &[1])]).expect("accept");
    assert_eq!(
        acknowledge(&mut sp, M1, &[ack(5, 9, &[1])]),
        record_state(msg::BATCH_NOT_ACQUIRED)
    );
    assert_eq!(
        acknowledge(&mut sp, M1, &[ack(6, 7, &[1])]),
        record_state(msg::SUBSET_NOT_ACQUIRED)
    );
    // Per-offset types on a whole batch are a subset too.
    assert_eq!(
        acknowledge(&mut sp, M1, &[ack(5, 9, &[1, 1, 1, 1, 1])]),
        record_state(msg::SUBSET_NOT_ACQUIRED)
    );
}

#[test]
fn ack_of_an_offset_not_acquired() {
    let mut sp = two_acquired_batches();
    acknowledge(&mut sp, M1, &[ack(5, 6, &[1])]).expect("accept part");
    assert_eq!(
        acknowledge(&mut sp, M1, &[ack(6, 7, &[1])]),
        record_state(msg::OFFSET_NOT_ACQUIRED)
    );
    assert_eq!(state(&sp, 7), (RecordState::Acquired, 1));
    acknowledge(&mut sp, M1, &[ack(7, 9, &[1])]).expect("accept the rest");
}

#[test]
fn ack_by_another_member() {
    let mut sp = two_acquired_batches();
    assert_eq!(
        acknowledge(&mut sp, M2, &[ack(0, 4, &[1])]),
        record_state(msg::NOT_OWNER_BATCH)
    );
    assert_eq!(
        acknowledge(&mut sp, M2, &[ack(1, 2, &[1])]),
        record_state(msg::NOT_OWNER_OFFSET)
    );
    assert_eq!(state(&sp, 1), (RecordState::Acquired, 1));
}

#[test]
fn renew_needs_the_group_switch_and_restarts_the_lock() {
    let mut sp = two_acquired_batches();
    let mut p = ack_params(M1);
    p.renew_allowed = false;
    assert_eq!(
        sp.acknowledge(&p, &[ack(0, 4, &[4])]),
        record_state(msg::RENEW_DISABLED)
    );
    p.renew_allowed = true;
    p.now_ms = 20_000;
    let out = sp.acknowledge(&p, &[ack(0, 4, &[4])]).expect("renew");
    assert_eq!(out, Outcome::default());
    let r = sp.record(2).expect("in flight");
    assert_eq!(r.state, RecordState::Acquired);
    assert_eq!(r.lock_deadline_ms, Some(20_000 + LOCK_MS));
    assert_eq!(sp.record(7).and_then(|r| r.lock_deadline_ms), Some(LOCK_MS));
    let e = sp.expire_locks(LOCK_MS);
    assert_eq!(state(&sp, 2), (RecordState::Acquired, 1));
    assert_eq!(state(&sp, 7), (RecordState::Available, 1));
    assert_eq!(e.next_deadline_ms, Some(20_000 + LOCK_MS));
}

#[test]
fn ack_types_gap_accept_release_reject() {
    let mut sp = two_acquired_batches();
    let out = acknowledge(&mut sp, M1, &[ack(5, 9, &[0, 1, 2, 3, 1])]).expect("mixed");
    assert_eq!(state(&sp, 5), (RecordState::Archived, 1));
    assert_eq!(state(&sp, 6), (RecordState::Acknowledged, 1));
    assert_eq!(state(&sp, 7), (RecordState::Available, 1));
    assert_eq!(state(&sp, 8), (RecordState::Archived, 1));
    assert_eq!(state(&sp, 9), (RecordState::Acknowledged, 1));
    assert!(out.available_again);
    let a = DurableState::Archived;
    let k = DurableState::Acknowledged;
    assert_eq!(
        out.update,
        Some(ShareUpdate {
            start_offset: 0,
            batches: vec![
                sb(5, 5, a, 1),
                sb(6, 6, k, 1),
                sb(8, 8, a, 1),
                sb(9, 9, k, 1)
            ],
        })
    );
    assert_eq!(sp.summary().delivery_complete_count, 4);
}

#[test]
fn ack_batches_wholly_below_start_are_ignored() {
    let mut sp = two_acquired_batches();
    acknowledge(&mut sp, M1, &[ack(0, 4, &[1])]).expect("accept");
    assert_eq!(sp.start_offset(), 5);
    let out = acknowledge(&mut sp, M2, &[ack(0, 4, &[3])]).expect("ignored");
    assert_eq!(out, Outcome::default());
    // Straddling start: only the part at or above start counts.
    acknowledge(&mut sp, M1, &[ack(3, 9, &[1])]).expect("accept");
    assert_eq!(sp.start_offset(), 10);
}

#[test]
fn a_failing_batch_rolls_back_the_whole_call() {
    let mut sp = two_acquired_batches();
    let r = acknowledge(
        &mut sp,
        M1,
        &[ack(0, 4, &[1]), ack(5, 6, &[1, 3]), ack(7, 12, &[1])],
    );
    assert_eq!(r, invalid_request(msg::LAST_PAST));
    for o in 0..10 {
        assert_eq!(state(&sp, o), (RecordState::Acquired, 1), "offset {o}");
    }
    assert_eq!(sp.start_offset(), 0);
    // Overlapping batches apply in order: the second sees the first.
    let r = acknowledge(&mut sp, M1, &[ack(0, 4, &[1]), ack(4, 5, &[1])]);
    assert_eq!(r, record_state(msg::SUBSET_NOT_ACQUIRED));
    assert_eq!(state(&sp, 0), (RecordState::Acquired, 1));
    // After the failed call the batches are whole again: a whole ack works.
    acknowledge(&mut sp, M1, &[ack(0, 9, &[1])]).expect("accept all");
    assert_eq!(sp.start_offset(), 10);
}

#[test]
fn malformed_batches_are_invalid_request() {
    let mut sp = two_acquired_batches();
    for b in [
        ack(3, 2, &[1]),
        ack(0, 2, &[]),
        ack(0, 2, &[1, 1]),
        ack(0, 0, &[5]),
        ack(0, 0, &[-1]),
        ack(i64::MIN, i64::MAX, &[1, 2]),
    ] {
        let r = acknowledge(&mut sp, M1, std::slice::from_ref(&b));
        assert!(
            matches!(r, Err(ShareError::InvalidRequest(_))),
            "{b:?}: {r:?}"
        );
    }
    // Extreme but well-formed offsets: no panic, Kafka's answer.
    assert_eq!(
        acknowledge(&mut sp, M1, &[ack(i64::MIN, i64::MAX, &[1])]),
        invalid_request(msg::LAST_PAST)
    );
    assert_eq!(
        acknowledge(&mut sp, M1, &[ack(i64::MAX, i64::MAX, &[1])]),
        invalid_request(msg::FIRST_PAST)
    );
    assert_eq!(
        acknowledge(&mut sp, M1, &[ack(i64::MIN, -5, &[1])]),
        Ok(Outcome::default())
    );
}

// ---- start, log start, summary ----

#[test]
fn start_moves_over_every_leading_terminal_offset() {
    let mut sp = two_acquired_batches();
    acknowledge(&mut sp, M1, &[ack(5, 9, &[1])]).expect("accept");
    assert_eq!(sp.start_offset(), 0);
    assert_eq!(
        sp.summary(),
        ShareSummary {
            start_offset: 0,
            delivery_complete_count: 5,
            next_offset: 10,
        }
    );
    acknowledge(&mut sp, M1, &[ack(0, 2, &[3])]).expect("reject part");
    assert_eq!(sp.start_offset(), 3);
    let out = acknowledge(&mut sp, M1, &[ack(3, 4, &[1])]).expect("accept");
    assert_eq!(sp.start_offset(), 10);
    assert_eq!(sp.summary().delivery_complete_count, 0);
    assert_eq!(sp.in_flight(), 0);
    assert_eq!(
        out.update,
        Some(ShareUpdate {
            start_offset: 10,
            batches: vec![],
        })
    );
}

#[test]
fn log_start_moves_start_and_drops_what_lies_below() {
    let mut sp = two_acquired_batches();
    let out = sp.advance_log_start(7);
    assert_eq!(
        out.update,
        Some(ShareUpdate {
            start_offset: 7,
            batches: vec![],
        })
    );
    assert_eq!(sp.start_offset(), 7);
    assert_eq!(sp.record(6), None);
    assert_eq!(state(&sp, 7), (RecordState::Acquired, 1));
    // Acknowledging across the new start applies to what is left.
    acknowledge(&mut sp, M1, &[ack(5, 8, &[1])]).expect("accept");
    assert_eq!(sp.start_offset(), 9);
    assert_eq!(sp.advance_log_start(3), Outcome::default());
    sp.advance_log_start(20);
    assert_eq!((sp.start_offset(), sp.next_offset()), (20, 20));
    // A read below the log start: the fetch moves start first.
    let mut sp = SharePartition::new(0, ShareLimits::default());
    let view = LogView {
        log_start: 12,
        end: 25,
        fetch_offset: 0,
        batches: &[(10, 14), (15, 19)],
    };
    let got = sp
        .acquire(&params(M1, 100, 500, AcquireMode::BatchOptimized, 0), &view)
        .expect("acquire");
    assert_eq!(got.records, vec![ar(12, 19, 1)]);
    assert_eq!(sp.start_offset(), 12);
}

#[test]
fn offsets_the_log_no_longer_has_are_archived() {
    let mut sp = SharePartition::new(0, ShareLimits::default());
    // 5-7 compacted away before ever being read.
    let log = [(0, 4), (8, 9), (10, 14)];
    assert_eq!(fetch(&mut sp, M1, 5, 500, &log, 15), vec![ar(0, 4, 1)]);
    assert_eq!(fetch(&mut sp, M1, 2, 500, &log, 15), vec![ar(8, 9, 1)]);
    assert_eq!(state(&sp, 6), (RecordState::Archived, 0));
    acknowledge(&mut sp, M1, &[ack(0, 4, &[1])]).expect("accept");
    assert_eq!(sp.start_offset(), 8);
    // 8 released, then compacted: the next read from 8 starts at 10.
    acknowledge(&mut sp, M1, &[ack(8, 8, &[2])]).expect("release");
    assert_eq!(sp.next_fetch_offset(), 8);
    let view = LogView {
        log_start: 0,
        end: 15,
        fetch_offset: 8,
        batches: &[(10, 14)],
    };
    let got = sp
        .acquire(&params(M1, 100, 500, AcquireMode::BatchOptimized, 0), &view)
        .expect("acquire");
    assert_eq!(got.records, vec![ar(10, 14, 1)]);
    // 8 archived, so start passes it; 9 is still held.
    assert_eq!(sp.start_offset(), 9);
    assert_eq!(sp.record(8), None);
    assert_eq!(state(&sp, 9), (RecordState::Acquired, 1));
}

#[test]
fn impossible_log_views_are_errors_not_panics() {
    let mut sp = SharePartition::new(0, ShareLimits::default());
    let p = params(M1, 10, 10, AcquireMode::BatchOptimized, 0);
    for batches in [
        &[(5, 9), (0, 4)][..],
        &[(4, 2)],
        &[(0, 4), (4, 8)],
        &[(-1, 3)],
        &[(0, i64::MAX)],
    ] {
        let view = LogView {
            log_start: 0,
            end: 100,
            fetch_offset: 0,
            batches,
        };
        let r = sp.acquire(&p, &view);
        assert!(
            matches!(r, Err(ShareError::Internal(_))),
            "{batches:?}: {r:?}"
        );
    }
    let view = LogView {
        log_start: -3,
        end: 100,
        fetch_offset: 0,
        batches: &[],
    };
    assert!(sp.acquire(&p, &view).is_err());
    // Zero or negative MaxRecords and BatchSize are not errors.
    let view = LogView {
        log_start: 0,
        end: 10,
        fetch_offset: 0,
        batches: &[(0, 4), (5, 9)],
    };
    let zero = params(M1, 0, 0, AcquireMode::BatchOptimized, 0);
    assert_eq!(sp.acquire(&zero, &view).expect("zero").records, vec![]);
    let one = params(M1, 10, -4, AcquireMode::BatchOptimized, 0);
    assert_eq!(
        sp.acquire(&one, &view).expect("batch size").records,
        vec![ar(0, 4, 1), ar(5, 9, 1)]
    );
}

// ---- restart ----

#[test]
fn restart_brings_acquired_records_back_available_with_their_count() {
    let lim = limits(3, 100);
    let mut sp = SharePartition::new(0, lim);
    let log = [(0, 4), (5, 9), (10, 14), (15, 19)];
    let mut view = DurableView::new(0);
    let mut journal = |o: &Outcome| {
        if let Some(u) = &o.update {
            view.apply(u);
        }
    };
    let p = params(M1, 20, 5, AcquireMode::BatchOptimized, 0);
    let read = |from| LogView {
        log_start: 0,
        end: 20,
        fetch_offset: from,
        batches: &log,
    };
    journal(&sp.acquire(&p, &read(0)).expect("acquire").outcome);
    journal(&acknowledge(&mut sp, M1, &[ack(0, 4, &[1]), ack(10, 14, &[2])]).expect("ack"));
    journal(&sp.acquire(&p, &read(10)).expect("again").outcome);
    journal(&acknowledge(&mut sp, M1, &[ack(10, 14, &[2])]).expect("release"));
    journal(&sp.acquire(&p, &read(10)).expect("third").outcome);
    assert_eq!(state(&sp, 10), (RecordState::Acquired, 3));
    // Crash: 5-9 acquired once, 10-14 acquired a third time (the limit),
    // 15-19 acquired once.
    let (back, out) =
        SharePartition::restore(view.start_offset(), &view.batches(), 0, lim).expect("restore");
    assert_eq!(back.start_offset(), 5);
    assert_eq!(back.next_offset(), 20);
    assert_eq!(state(&back, 5), (RecordState::Available, 1));
    assert_eq!(state(&back, 10), (RecordState::Archived, 3));
    assert_eq!(state(&back, 19), (RecordState::Available, 1));
    assert_eq!(back.record(7).and_then(|r| r.owner), None);
    assert_eq!(
        out.update,
        Some(ShareUpdate {
            start_offset: 5,
            batches: vec![sb(10, 14, DurableState::Archived, 3)],
        })
    );
    // The log start passing the stored start moves it at load.
    let (back, _) =
        SharePartition::restore(view.start_offset(), &view.batches(), 12, lim).expect("restore");
    assert_eq!((back.start_offset(), back.next_offset()), (15, 20));
}

#[test]
fn restore_fills_holes_as_never_delivered_and_refuses_garbage() {
    let lim = ShareLimits::default();
    let batches = [
        sb(12, 13, DurableState::Acknowledged, 1),
        sb(16, 17, DurableState::Available, 2),
    ];
    let (sp, out) = SharePartition::restore(10, &batches, 0, lim).expect("restore");
    assert_eq!(state(&sp, 10), (RecordState::Available, 0));
    assert_eq!(state(&sp, 14), (RecordState::Available, 0));
    assert_eq!(state(&sp, 16), (RecordState::Available, 2));
    assert_eq!(sp.next_offset(), 18);
    assert_eq!(sp.next_fetch_offset(), 10);
    let av = DurableState::Available;
    assert_eq!(
        out.update,
        Some(ShareUpdate {
            start_offset: 10,
            batches: vec![sb(10, 11, av, 0), sb(14, 15, av, 0)],
        })
    );
    // Nothing stored: start = cursor, nothing to write.
    let (sp, out) = SharePartition::restore(7, &[], 0, lim).expect("empty");
    assert_eq!((sp.start_offset(), sp.next_offset()), (7, 7));
    assert_eq!(out.update, None);
    assert!(SharePartition::restore(-1, &[], 0, lim).is_err());
    assert!(SharePartition::restore(0, &[sb(5, 4, av, 0)], 0, lim).is_err());
    assert!(SharePartition::restore(0, &[sb(0, i64::MAX, av, 0)], 0, lim).is_err());
}

#[test]
fn durable_view_folds_like_kafka_s_combiner() {
    let av = DurableState::Available;
    let ack_ = DurableState::Acknowledged;
    let mut v = DurableView::new(0);
    v.apply(&ShareUpdate {
        start_offset: 0,
        batches: vec![sb(0, 9, av, 1)],
    });
    v.apply(&ShareUpdate {
        start_offset: 0,
        batches: vec![sb(3, 5, ack_, 1)],
    });
    assert_eq!(
        v.batches(),
        vec![sb(0, 2, av, 1), sb(3, 5, ack_, 1), sb(6, 9, av, 1)]
    );
    v.apply(&ShareUpdate {
        start_offset: 4,
        batches: vec![sb(2, 7, av, 2)],
    });
    assert_eq!(v.start_offset(), 4);
    assert_eq!(v.batches(), vec![sb(4, 7, av, 2), sb(8, 9, av, 1)]);
    assert_eq!(DurableState::from_id(1), None);
    for s in [av, ack_, DurableState::Archived] {
        assert_eq!(DurableState::from_id(s.id()), Some(s));
    }
}

#[test]
fn per_offset_splits_are_bounded() {
    // A stored AVAILABLE range longer than a split may hold: acquiring part
    // of it is refused quietly, acquiring all of it works.
    let n = PER_OFFSET_RECORDS_MAX + 10;
    let stored = [sb(0, n - 1, DurableState::Available, 1)];
    let (mut sp, _) =
        SharePartition::restore(0, &stored, 0, ShareLimits::default()).expect("restore");
    let p = params(M1, 5, 500, AcquireMode::RecordLimit, 0);
    let view = LogView {
        log_start: 0,
        end: n,
        fetch_offset: 0,
        batches: &[(0, n - 1)],
    };
    assert_eq!(sp.acquire(&p, &view).expect("acquire").records, vec![]);
    let p = params(M1, i32::MAX, 500, AcquireMode::BatchOptimized, 0);
    sp.set_limits(limits(5, i64::MAX / 8));
    assert_eq!(
        sp.acquire(&p, &view).expect("acquire").records,
        vec![ar(0, n - 1, 2)]
    );
    assert_eq!(
        acknowledge(&mut sp, M1, &[ack(1, 1, &[1])]),
        record_state(msg::UNABLE)
    );
    assert_eq!(state(&sp, 1), (RecordState::Acquired, 2));
}

// ---- the property test against a per-offset model ----

#[derive(Clone, Debug, PartialEq, Eq)]
struct MRec {
    state: RecordState,
    count: u16,
    owner: Option<String>,
    deadline: Option<i64>,
}

impl MRec {
    fn rest(state: RecordState, count: u16) -> MRec {
        MRec {
            state,
            count,
            owner: None,
            deadline: None,
        }
    }

    fn release(&mut self, limit: u16) {
        self.owner = None;
        self.deadline = None;
        self.state = if self.count >= limit {
            RecordState::Archived
        } else {
            RecordState::Available
        };
    }

    fn durable(&self) -> (DurableState, u16) {
        let s = match self.state {
            RecordState::Available | RecordState::Acquired => DurableState::Available,
            RecordState::Acknowledged => DurableState::Acknowledged,
            RecordState::Archived => DurableState::Archived,
        };
        (s, self.count)
    }
}

/// One state per offset in `[start, cursor)`: the obvious reading of the
/// rules, with none of the batch structure.
#[derive(Clone, Debug)]
struct Model {
    start: i64,
    cursor: i64,
    recs: BTreeMap<i64, MRec>,
    limits: ShareLimits,
}

impl Model {
    fn advance(&mut self) {
        while self.start < self.cursor
            && self
                .recs
                .get(&self.start)
                .is_some_and(|r| r.state.is_terminal())
        {
            self.recs.remove(&self.start);
            self.start += 1;
        }
    }

    fn log_start(&mut self, ls: i64) {
        if ls > self.start {
            self.recs = self.recs.split_off(&ls);
            self.start = ls;
            self.cursor = self.cursor.max(ls);
        }
    }

    fn rec(&self, o: i64) -> &MRec {
        self.recs.get(&o).expect("model offset in flight")
    }

    fn next_fetch(&self) -> i64 {
        self.recs
            .iter()
            .find(|(_, r)| r.state == RecordState::Available)
            .map_or(self.cursor, |(&o, _)| o)
    }

    /// The acknowledgement rules offset by offset; `Err(code)` on refusal,
    /// leaving the model as it was.
    fn ack(&mut self, p: &AckParams, batches: &[AckBatch]) -> Result<(), i16> {
        let mut t = self.clone();
        for b in batches {
            if b.first > b.last {
                return Err(42);
            }
            let n = i128::from(b.last) - i128::from(b.first) + 1;
            if b.types.is_empty() || (b.types.len() != 1 && b.types.len() as i128 != n) {
                return Err(42);
            }
            if b.types.iter().any(|t| !(0..=4).contains(t)) {
                return Err(42);
            }
            if !p.renew_allowed && b.types.contains(&4) {
                return Err(121);
            }
            if b.last < t.start {
                continue;
            }
            if t.start == t.cursor {
                return Err(121);
            }
            let from = b.first.max(t.start);
            if from >= t.cursor || b.last >= t.cursor {
                return Err(42);
            }
            let limit = t.limits.delivery_count_limit;
            for o in from..=b.last {
                let ty = if b.types.len() == 1 {
                    b.types[0]
                } else {
                    b.types[(o - b.first) as usize]
                };
                let r = t.recs.get_mut(&o).expect("in flight");
                if r.state != RecordState::Acquired || r.owner.as_deref() != Some(p.member) {
                    return Err(121);
                }
                match ty {
                    0 | 3 => *r = MRec::rest(RecordState::Archived, r.count),
                    1 => *r = MRec::rest(RecordState::Acknowledged, r.count),
                    2 => r.release(limit),
                    _ => r.deadline = Some(p.now_ms + p.lock_duration_ms),
                }
            }
        }
        t.advance();
        *self = t;
        Ok(())
    }

    fn release_where(&mut self, pick: impl Fn(&MRec) -> bool) {
        let limit = self.limits.delivery_count_limit;
        for r in self.recs.values_mut() {
            if r.state == RecordState::Acquired && pick(r) {
                r.release(limit);
            }
        }
        self.advance();
    }

    fn restart(&mut self, log_start: i64) {
        let limit = self.limits.delivery_count_limit;
        for r in self.recs.values_mut() {
            if r.state == RecordState::Acquired {
                *r = MRec::rest(RecordState::Available, r.count);
            }
            if r.state == RecordState::Available && r.count >= limit {
                r.state = RecordState::Archived;
            }
        }
        self.log_start(log_start);
        self.advance();
    }
}

/// The log under test: batches with gaps (compaction), a high watermark
/// that grows, a log start that moves.
#[derive(Clone, Debug)]
struct TestLog {
    batches: Vec<(i64, i64)>,
    visible: usize,
    log_start: i64,
    max_batch: i64,
    max_gap: i64,
}

impl TestLog {
    fn new(shape: &[(u8, u8)], visible: usize) -> TestLog {
        let mut batches = Vec::new();
        let mut next = 0i64;
        let (mut max_batch, mut max_gap) = (1, 0);
        for &(len, gap) in shape {
            let gap = i64::from(if gap < 6 { 0 } else { gap - 5 });
            let len = i64::from(len);
            next += gap;
            batches.push((next, next + len - 1));
            next += len;
            max_batch = max_batch.max(len);
            max_gap = max_gap.max(gap);
        }
        TestLog {
            visible: visible.min(batches.len()),
            batches,
            log_start: 0,
            max_batch,
            max_gap,
        }
    }

    fn end(&self) -> i64 {
        match self.visible {
            0 => 0,
            v => self.batches[v - 1].1 + 1,
        }
    }

    /// What a read from `from` returns: up to `n` batches, the first the
    /// one holding `from` (or the next).
    fn read(&self, from: i64, n: usize) -> Vec<(i64, i64)> {
        let from = from.max(self.log_start);
        self.batches[..self.visible]
            .iter()
            .copied()
            .filter(|&(_, l)| l >= from)
            .take(n)
            .collect()
    }
}

#[derive(Clone, Debug)]
enum Op {
    Acquire {
        member: u8,
        max_records: i32,
        batch_size: i32,
        record_limit: bool,
        /// None: from `next_fetch_offset`; Some(k): from an offset between
        /// start and the cursor, as a read that raced a state change.
        fetch: Option<u8>,
        read: u8,
    },
    /// Acknowledges a run of records the member holds (mostly valid).
    AckOwned {
        member: u8,
        pick: u8,
        len: u8,
        types: Vec<i8>,
        per_offset: bool,
        renew_allowed: bool,
    },
    /// Acknowledges arbitrary ranges near the in-flight window.
    AckAny {
        member: u8,
        batches: Vec<(u8, u8, Vec<i8>)>,
        renew_allowed: bool,
    },
    Release(u8),
    Tick(i64),
    LogStart(u8),
    Produce(u8),
    Restart,
}

fn ack_type() -> impl Strategy<Value = i8> {
    prop_oneof![10 => 0i8..=4, 1 => Just(5i8), 1 => Just(-1i8)]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0u8..3, 1i32..14, 1i32..9, any::<bool>(), proptest::option::weighted(0.2, any::<u8>()), 1u8..6)
            .prop_map(|(member, max_records, batch_size, record_limit, fetch, read)| Op::Acquire {
                member, max_records, batch_size, record_limit, fetch, read,
            }),
        6 => (0u8..3, any::<u8>(), 1u8..8, proptest::collection::vec(0i8..=4, 1..8), any::<bool>(), proptest::bool::weighted(0.9))
            .prop_map(|(member, pick, len, types, per_offset, renew_allowed)| Op::AckOwned {
                member, pick, len, types, per_offset, renew_allowed,
            }),
        2 => (0u8..3, proptest::collection::vec((any::<u8>(), 0u8..6, proptest::collection::vec(ack_type(), 1..7)), 1..3), proptest::bool::weighted(0.8))
            .prop_map(|(member, batches, renew_allowed)| Op::AckAny { member, batches, renew_allowed }),
        1 => (0u8..4).prop_map(Op::Release),
        3 => (0i64..20_000).prop_map(Op::Tick),
        1 => (0u8..8).prop_map(Op::LogStart),
        2 => (1u8..4).prop_map(Op::Produce),
        1 => Just(Op::Restart),
    ]
}

const MEMBERS: [&str; 3] = ["m0", "m1", "m2"];
const PROP_LOCK_MS: i64 = 10_000;

/// The impl's state equals the model's, offset by offset, with every
/// derived figure.
fn assert_same(sp: &SharePartition, m: &Model) -> Result<(), TestCaseError> {
    prop_assert_eq!(sp.start_offset(), m.start);
    prop_assert_eq!(sp.next_offset(), m.cursor);
    prop_assert_eq!(sp.record(m.start - 1), None);
    prop_assert_eq!(sp.record(m.cursor), None);
    for o in m.start..m.cursor {
        let r = sp.record(o);
        prop_assert!(r.is_some(), "offset {} missing", o);
        let r = r.expect("checked");
        let mr = m.rec(o);
        prop_assert_eq!(r.state, mr.state, "offset {}", o);
        prop_assert_eq!(r.delivery_count, mr.count, "offset {}", o);
        prop_assert_eq!(r.owner.as_deref(), mr.owner.as_deref(), "offset {}", o);
        prop_assert_eq!(r.lock_deadline_ms, mr.deadline, "offset {}", o);
    }
    prop_assert_eq!(sp.next_fetch_offset(), m.next_fetch());
    let complete = m.recs.values().filter(|r| r.state.is_terminal()).count() as i64;
    prop_assert_eq!(sp.summary().delivery_complete_count, complete);
    let next = m.recs.values().filter_map(|r| r.deadline).min();
    prop_assert_eq!(sp.next_lock_deadline(), next);
    Ok(())
}

/// The fold of every Update emitted equals the model's durable view.
fn assert_durable(view: &DurableView, m: &Model) -> Result<(), TestCaseError> {
    prop_assert_eq!(view.start_offset(), m.start);
    let mut folded = BTreeMap::new();
    for b in view.batches() {
        prop_assert!(b.first >= m.start && b.last < m.cursor, "{:?} outside", b);
        for o in b.first..=b.last {
            folded.insert(o, (b.state, b.delivery_count));
        }
    }
    let model: BTreeMap<i64, (DurableState, u16)> =
        m.recs.iter().map(|(&o, r)| (o, r.durable())).collect();
    prop_assert_eq!(folded, model);
    Ok(())
}

/// Invariants between the state before an op and the impl's after it.
fn assert_monotonic(prev: &Model, sp: &SharePartition, bound: i64) -> Result<(), TestCaseError> {
    prop_assert!(sp.start_offset() >= prev.start, "start went back");
    prop_assert!(sp.next_offset() >= prev.cursor, "cursor went back");
    prop_assert!(
        sp.in_flight() <= bound,
        "in flight {} > {}",
        sp.in_flight(),
        bound
    );
    for o in sp.start_offset()..prev.cursor {
        let (Some(now), Some(was)) = (sp.record(o), prev.recs.get(&o)) else {
            continue;
        };
        prop_assert!(now.delivery_count >= was.count, "count fell at {}", o);
        if was.state.is_terminal() {
            prop_assert_eq!(now.state, was.state, "terminal {} changed", o);
            prop_assert_eq!(now.delivery_count, was.count);
        }
    }
    Ok(())
}

/// Applies an acquisition's result to the model, checking that it took only
/// what it could and as much as it should.
fn model_acquire(
    m: &mut Model,
    p: &AcquireParams,
    view: &LogView,
    got: &[AcquiredRecords],
) -> Result<(), TestCaseError> {
    m.log_start(view.log_start);
    let wins: Vec<(i64, i64)> = view
        .batches
        .iter()
        .copied()
        .filter(|&(f, l)| l >= m.start && f < view.end)
        .map(|(f, l)| (f, l.min(view.end - 1)))
        .collect();
    if wins.is_empty() || p.max_records <= 0 {
        prop_assert!(got.is_empty());
        m.advance();
        return Ok(());
    }
    let lo = wins[0].0.max(m.start);
    let hi = wins[wins.len() - 1].1;
    let f = view.fetch_offset.max(m.start);
    for o in f..lo.min(m.cursor) {
        let r = m.recs.get_mut(&o).expect("in flight");
        if r.state == RecordState::Available {
            r.state = RecordState::Archived;
        }
    }
    let max = i64::from(p.max_records);
    let allowed0 = max.min(m.limits.max_record_locks - (m.cursor - m.start));
    let (allowed, hi_acq, new_ok) = if allowed0 > 0 {
        (allowed0, hi, true)
    } else if f < m.cursor {
        (max.min(m.cursor - f), hi.min(m.cursor - 1), false)
    } else {
        (0, hi, false)
    };
    let avail: Vec<i64> = (lo..=hi_acq.min(m.cursor - 1))
        .filter(|o| m.rec(*o).state == RecordState::Available)
        .collect();
    let new_cnt = if new_ok && hi_acq >= m.cursor {
        hi_acq - m.cursor.max(lo) + 1
    } else {
        0
    };
    let throttle = m.limits.throttle_limit();
    let throttled = avail.iter().any(|o| m.rec(*o).count >= throttle);
    let total: i64 = got.iter().map(|a| a.last - a.first + 1).sum();
    let can = allowed > 0 && (!avail.is_empty() || new_cnt > 0);
    prop_assert_eq!(total > 0, can, "liveness: got {:?}", got);
    let want = allowed.min(avail.len() as i64 + new_cnt).max(0);
    if p.mode == AcquireMode::RecordLimit {
        prop_assert!(total <= max);
        if !throttled {
            prop_assert_eq!(total, want);
        }
    } else if !throttled {
        prop_assert!(total >= want, "batch mode took {} < {}", total, want);
    }

    let deadline = p.now_ms + p.lock_duration_ms;
    let mut prev_last = i64::MIN;
    let mut new_offs = Vec::new();
    for a in got {
        prop_assert!(a.first <= a.last && a.first > prev_last, "{:?}", got);
        prev_last = a.last;
        for o in a.first..=a.last {
            if o < m.cursor {
                prop_assert!(o >= lo && o <= hi_acq, "{} outside the read", o);
                let r = m.recs.get_mut(&o).expect("in flight");
                prop_assert_eq!(r.state, RecordState::Available, "took {} not available", o);
                prop_assert_eq!(a.delivery_count, r.count + 1);
                *r = MRec {
                    state: RecordState::Acquired,
                    count: r.count + 1,
                    owner: Some(p.member.to_string()),
                    deadline: Some(deadline),
                };
            } else {
                prop_assert_eq!(a.delivery_count, 1);
                new_offs.push(o);
            }
        }
    }
    if let (Some(&nf), Some(&nl)) = (new_offs.first(), new_offs.last()) {
        prop_assert!(new_ok);
        prop_assert_eq!(nf, m.cursor.max(lo));
        prop_assert_eq!(new_offs.len() as i64, nl - nf + 1);
        prop_assert!(nl <= hi_acq);
        for o in m.cursor..nf {
            m.recs.insert(o, MRec::rest(RecordState::Archived, 0));
        }
        for o in nf..=nl {
            m.recs.insert(
                o,
                MRec {
                    state: RecordState::Acquired,
                    count: 1,
                    owner: Some(p.member.to_string()),
                    deadline: Some(deadline),
                },
            );
        }
        m.cursor = nl + 1;
    }
    m.advance();
    Ok(())
}

fn run(
    lim: ShareLimits,
    shape: &[(u8, u8)],
    visible: usize,
    ops: &[Op],
) -> Result<(), TestCaseError> {
    let mut log = TestLog::new(shape, visible);
    let mut sp = SharePartition::new(0, lim);
    let mut m = Model {
        start: 0,
        cursor: 0,
        recs: BTreeMap::new(),
        limits: lim,
    };
    let mut view = DurableView::new(0);
    let mut now = 0i64;
    // How far one fetch may take the in-flight range past the lock limit:
    // the offsets the log skipped (compaction) before the first new record
    // read, which es stores archived and does not count against the
    // limit, then Kafka's batch alignment, which from a target inside a
    // gap runs to the end of the batch after it (a gap and a batch).
    let bound = lim.max_record_locks + log.max_batch + 2 * log.max_gap;

    for op in ops {
        let prev = m.clone();
        let outcome = match op {
            Op::Acquire {
                member,
                max_records,
                batch_size,
                record_limit,
                fetch,
                read,
            } => {
                let from = match fetch {
                    None => sp.next_fetch_offset(),
                    Some(k) => m.start + i64::from(*k) % (m.cursor - m.start + 1),
                };
                let batches = log.read(from, usize::from(*read));
                let lv = LogView {
                    log_start: log.log_start,
                    end: log.end(),
                    fetch_offset: from,
                    batches: &batches,
                };
                let p = AcquireParams {
                    member: MEMBERS[usize::from(*member)],
                    max_records: *max_records,
                    batch_size: *batch_size,
                    mode: if *record_limit {
                        AcquireMode::RecordLimit
                    } else {
                        AcquireMode::BatchOptimized
                    },
                    lock_duration_ms: PROP_LOCK_MS,
                    now_ms: now,
                };
                let got = sp
                    .acquire(&p, &lv)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                model_acquire(&mut m, &p, &lv, &got.records)?;
                got.outcome
            }
            Op::AckOwned {
                member,
                pick,
                len,
                types,
                per_offset,
                renew_allowed,
            } => {
                let name = MEMBERS[usize::from(*member)];
                let held: Vec<i64> = m
                    .recs
                    .iter()
                    .filter(|(_, r)| r.owner.as_deref() == Some(name))
                    .map(|(&o, _)| o)
                    .collect();
                if held.is_empty() {
                    continue;
                }
                let first = held[usize::from(*pick) % held.len()];
                let mut last = first;
                while last - first + 1 < i64::from(*len)
                    && m.recs
                        .get(&(last + 1))
                        .is_some_and(|r| r.owner.as_deref() == Some(name))
                {
                    last += 1;
                }
                let n = (last - first + 1) as usize;
                let types: Vec<i8> = if *per_offset {
                    (0..n).map(|i| types[i % types.len()]).collect()
                } else {
                    vec![types[0]]
                };
                let b = [AckBatch { first, last, types }];
                let p = AckParams {
                    member: name,
                    renew_allowed: *renew_allowed,
                    lock_duration_ms: PROP_LOCK_MS,
                    now_ms: now,
                };
                let want = m.ack(&p, &b);
                let got = sp.acknowledge(&p, &b);
                prop_assert_eq!(got.as_ref().map(|_| ()).map_err(ShareError::code), want);
                got.unwrap_or_default()
            }
            Op::AckAny {
                member,
                batches,
                renew_allowed,
            } => {
                let span = m.cursor - m.start + 4;
                let b: Vec<AckBatch> = batches
                    .iter()
                    .map(|(rel, len, types)| {
                        let first = m.start - 2 + i64::from(*rel) % span;
                        AckBatch {
                            first,
                            last: first + i64::from(*len),
                            types: if types.len() == 1 || types.len() == usize::from(*len) + 1 {
                                types.clone()
                            } else {
                                (0..=*len)
                                    .map(|i| types[usize::from(i) % types.len()])
                                    .collect()
                            },
                        }
                    })
                    .collect();
                let p = AckParams {
                    member: MEMBERS[usize::from(*member)],
                    renew_allowed: *renew_allowed,
                    lock_duration_ms: PROP_LOCK_MS,
                    now_ms: now,
                };
                let want = m.ack(&p, &b);
                let got = sp.acknowledge(&p, &b);
                prop_assert_eq!(got.as_ref().map(|_| ()).map_err(ShareError::code), want);
                got.unwrap_or_default()
            }
            Op::Release(k) => {
                let name = MEMBERS.get(usize::from(*k)).copied().unwrap_or("stranger");
                m.release_where(|r| r.owner.as_deref() == Some(name));
                sp.release_member(name)
            }
            Op::Tick(dt) => {
                now += dt;
                m.release_where(|r| r.deadline.is_some_and(|d| d <= now));
                let e = sp.expire_locks(now);
                let next = m.recs.values().filter_map(|r| r.deadline).min();
                prop_assert_eq!(e.next_deadline_ms, next);
                e.outcome
            }
            Op::LogStart(k) => {
                log.log_start = (log.log_start + i64::from(*k)).min(log.end());
                m.log_start(log.log_start);
                m.advance();
                sp.advance_log_start(log.log_start)
            }
            Op::Produce(n) => {
                log.visible = (log.visible + usize::from(*n)).min(log.batches.len());
                continue;
            }
            Op::Restart => {
                let (back, out) = SharePartition::restore(
                    view.start_offset(),
                    &view.batches(),
                    log.log_start,
                    lim,
                )
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
                sp = back;
                m.restart(log.log_start);
                out
            }
        };
        if let Some(u) = &outcome.update {
            view.apply(u);
        }
        assert_monotonic(&prev, &sp, bound)?;
        assert_same(&sp, &m)?;
        assert_durable(&view, &m)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn share_partition_matches_the_per_offset_model(
        delivery_count_limit in 2u16..7,
        max_record_locks in 4i64..40,
        shape in proptest::collection::vec((1u8..7, 0u8..9), 30),
        visible in 0usize..10,
        ops in proptest::collection::vec(op(), 1..80),
    ) {
        run(limits(delivery_count_limit, max_record_locks), &shape, visible, &ops)?;
    }
}
