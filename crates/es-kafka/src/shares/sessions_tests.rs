//! The share session cache against Kafka's rules by name (§2.6 of
//! docs/share-groups-design.md: every error with its code and message, epoch
//! wraparound, the bound, the response listing rule, connection close), and
//! a property test of random open / next / acknowledge / close / disconnect
//! sequences against a model of the sessions.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

fn tp(topic: u8, partition: i32) -> TopicPartition {
    TopicPartition {
        topic_id: Uuid::from_bytes([topic; 16]),
        partition,
    }
}

fn key(member: &str) -> SessionKey {
    SessionKey::new("g", member)
}

fn fetch<'a>(
    key: &'a SessionKey,
    epoch: i32,
    partitions: &'a [TopicPartition],
    forgotten: &'a [TopicPartition],
    connection: ConnectionId,
) -> ShareFetchSession<'a> {
    ShareFetchSession {
        key,
        epoch,
        partitions,
        forgotten,
        acknowledgements_present: false,
        connection,
    }
}

fn open(c: &mut ShareSessions, k: &SessionKey, parts: &[TopicPartition], conn: ConnectionId) {
    let r = c.share_fetch(fetch(k, 0, parts, &[], conn));
    assert!(matches!(r, Ok(FetchContext::Opened { .. })), "{r:?}");
}

fn assert_error(r: Result<impl std::fmt::Debug, SessionError>, code: i16, message: &str) {
    match r {
        Err(e) => {
            assert_eq!(e.code(), code, "{e:?}");
            assert_eq!(e.message(), message);
        }
        Ok(v) => panic!("expected error {code}, got {v:?}"),
    }
}

#[test]
fn error_codes_are_kafkas() {
    assert_eq!(SessionError::NotFound.code(), 122);
    assert_eq!(
        SessionError::InvalidEpoch {
            expected: None,
            got: 0
        }
        .code(),
        123
    );
    assert_eq!(SessionError::LimitReached.code(), 133);
    assert_eq!(SessionError::AcknowledgementsInInitial.code(), 42);
    assert_eq!(MAX_SHARE_SESSIONS_DEFAULT, 2000);
    assert_eq!(ShareSessions::default().max_sessions(), 2000);
}

#[test]
fn epoch_0_fetch_opens_with_the_request_partitions_at_epoch_1() {
    let mut c = ShareSessions::default();
    let k = key("m1");
    let parts = [tp(1, 0), tp(1, 1), tp(2, 0), tp(1, 0)];
    let r = c.share_fetch(fetch(&k, 0, &parts, &[], 7));
    assert_eq!(
        r,
        Ok(FetchContext::Opened {
            partitions: vec![tp(1, 0), tp(1, 1), tp(2, 0)],
            replaced: false
        })
    );
    assert_eq!(c.epoch(&k), Some(1));
    assert_eq!(c.connection(&k), Some(7));
    assert_eq!(c.len(), 1);
}

#[test]
fn epoch_0_fetch_replaces_the_session_of_the_key() {
    let mut c = ShareSessions::default();
    let k = key("m1");
    open(&mut c, &k, &[tp(1, 0)], 1);
    assert!(c.share_fetch(fetch(&k, 1, &[tp(1, 1)], &[], 1)).is_ok());
    assert_eq!(c.epoch(&k), Some(2));
    let r = c.share_fetch(fetch(&k, 0, &[tp(3, 0)], &[], 2));
    assert_eq!(
        r,
        Ok(FetchContext::Opened {
            partitions: vec![tp(3, 0)],
            replaced: true
        })
    );
    assert_eq!(c.len(), 1);
    assert_eq!(c.epoch(&k), Some(1));
    assert_eq!(c.partitions(&k), Some(vec![tp(3, 0)]));
    // The session now belongs to the new connection: closing the old one
    // leaves it.
    assert_eq!(c.connection_closed(1), vec![]);
    assert_eq!(c.len(), 1);
    assert_eq!(c.connection_closed(2).len(), 1);
    assert!(c.is_empty());
}

#[test]
fn acknowledgements_in_an_epoch_0_fetch_are_invalid_request() {
    let mut c = ShareSessions::default();
    let k = key("m1");
    open(&mut c, &k, &[tp(1, 0)], 1);
    let parts = [tp(2, 0)];
    let mut req = fetch(&k, 0, &parts, &[], 1);
    req.acknowledgements_present = true;
    let r = c.share_fetch(req);
    assert_error(r, 42, msg::INVALID_REQUEST);
    assert_eq!(
        SessionError::AcknowledgementsInInitial.to_string(),
        "Acknowledge data present in Initial Fetch Request"
    );
    // Refused: the existing session is untouched.
    assert_eq!(c.epoch(&k), Some(1));
    assert_eq!(c.partitions(&k), Some(vec![tp(1, 0)]));
    // Also refused with no session at all, and nothing is opened.
    let k2 = key("m2");
    let mut req = fetch(&k2, 0, &[], &[], 1);
    req.acknowledgements_present = true;
    assert_error(c.share_fetch(req), 42, msg::INVALID_REQUEST);
    assert_eq!(c.epoch(&k2), None);
}

#[test]
fn final_fetch_without_a_session_is_share_session_not_found() {
    let mut c = ShareSessions::default();
    let r = c.share_fetch(fetch(&key("m1"), -1, &[], &[], 1));
    assert_error(r, 122, "The share session was not found.");
}

#[test]
fn final_fetch_closes_the_session_and_returns_its_partitions() {
    let mut c = ShareSessions::default();
    let k = key("m1");
    open(&mut c, &k, &[tp(1, 0), tp(1, 1)], 1);
    // Epoch -1 is accepted whatever the session's epoch, and ignores the
    // request's partitions.
    let r = c.share_fetch(fetch(&k, -1, &[tp(9, 9)], &[], 1));
    assert_eq!(
        r,
        Ok(FetchContext::Closed(Released {
            key: k.clone(),
            partitions: vec![tp(1, 0), tp(1, 1)]
        }))
    );
    assert!(c.is_empty());
    assert_eq!(c.connection_closed(1), vec![]);
    assert_error(
        c.share_fetch(fetch(&k, -1, &[], &[], 1)),
        122,
        msg::NOT_FOUND,
    );
}

#[test]
fn subsequent_fetch_without_a_session_is_share_session_not_found() {
    let mut c = ShareSessions::default();
    assert_error(
        c.share_fetch(fetch(&key("m1"), 1, &[], &[], 1)),
        122,
        msg::NOT_FOUND,
    );
    // Another member's session does not count.
    open(&mut c, &key("m2"), &[], 1);
    assert_error(
        c.share_fetch(fetch(&key("m1"), 1, &[], &[], 1)),
        122,
        msg::NOT_FOUND,
    );
    // Nor does the same member id in another group.
    assert_error(
        c.share_fetch(fetch(&SessionKey::new("other", "m2"), 1, &[], &[], 1)),
        122,
        msg::NOT_FOUND,
    );
}

#[test]
fn subsequent_fetch_with_another_epoch_is_invalid_share_session_epoch() {
    let mut c = ShareSessions::default();
    let k = key("m1");
    open(&mut c, &k, &[tp(1, 0)], 1);
    for epoch in [2, 5, i32::MAX, -2, i32::MIN] {
        let r = c.share_fetch(fetch(&k, epoch, &[tp(2, 0)], &[tp(1, 0)], 1));
        assert_error(r, 123, "The share session epoch is invalid.");
    }
    assert_eq!(
        SessionError::InvalidEpoch {
            expected: Some(1),
            got: 2
        }
        .to_string(),
        "The share session epoch is invalid. (expected 1, got 2)"
    );
    // Unchanged by the refusals.
    assert_eq!(c.epoch(&k), Some(1));
    assert_eq!(c.partitions(&k), Some(vec![tp(1, 0)]));
}

#[test]
fn subsequent_fetch_adds_forgets_and_advances_the_epoch() {
    let mut c = ShareSessions::default();
    let k = key("m1");
    open(&mut c, &k, &[tp(1, 0), tp(1, 1)], 1);
    let r = c.share_fetch(fetch(
        &k,
        1,
        &[tp(2, 0), tp(1, 0)],
        &[tp(1, 1), tp(7, 7)],
        1,
    ));
    assert_eq!(
        r,
        Ok(FetchContext::Updated {
            partitions: vec![tp(1, 0), tp(2, 0)],
            next_epoch: 2
        })
    );
    let r = c.share_fetch(fetch(&k, 2, &[], &[], 1));
    assert_eq!(
        r,
        Ok(FetchContext::Updated {
            partitions: vec![tp(1, 0), tp(2, 0)],
            next_epoch: 3
        })
    );
    // A partition both added and forgotten in one request ends up forgotten
    // (Kafka adds, then removes).
    let r = c.share_fetch(fetch(&k, 3, &[tp(4, 0)], &[tp(4, 0)], 1));
    assert_eq!(
        r,
        Ok(FetchContext::Updated {
            partitions: vec![tp(1, 0), tp(2, 0)],
            next_epoch: 4
        })
    );
}

#[test]
fn the_epoch_wraps_from_i32_max_to_1() {
    assert_eq!(next_epoch(0), 1);
    assert_eq!(next_epoch(41), 42);
    assert_eq!(next_epoch(i32::MAX), 1);
    assert_eq!(next_epoch(-1), -1);
    assert_eq!(next_epoch(i32::MIN), -1);

    let mut c = ShareSessions::default();
    let k = key("m1");
    open(&mut c, &k, &[], 1);
    if let Some(s) = c.sessions.get_mut(&k) {
        s.epoch = i32::MAX - 1;
    }
    assert_eq!(
        c.share_fetch(fetch(&k, i32::MAX - 1, &[], &[], 1)),
        Ok(FetchContext::Updated {
            partitions: vec![],
            next_epoch: i32::MAX
        })
    );
    assert_eq!(
        c.share_acknowledge(&k, i32::MAX),
        Ok(AckContext::Advanced { next_epoch: 1 })
    );
    assert_eq!(
        c.share_fetch(fetch(&k, 1, &[], &[], 1)),
        Ok(FetchContext::Updated {
            partitions: vec![],
            next_epoch: 2
        })
    );
}

#[test]
fn a_full_cache_refuses_a_new_key_with_share_session_limit_reached() {
    let mut c = ShareSessions::new(2);
    open(&mut c, &key("a"), &[tp(1, 0)], 1);
    open(&mut c, &key("b"), &[tp(1, 1)], 1);
    let r = c.share_fetch(fetch(&key("c"), 0, &[tp(1, 2)], &[], 1));
    assert_error(r, 133, "The limit of share sessions has been reached.");
    assert_eq!(c.len(), 2);
    assert_eq!(c.epoch(&key("c")), None);
    // A key that has a session may replace it while the cache is full.
    let r = c.share_fetch(fetch(&key("a"), 0, &[tp(5, 0)], &[], 2));
    assert!(
        matches!(r, Ok(FetchContext::Opened { replaced: true, .. })),
        "{r:?}"
    );
    assert_eq!(c.len(), 2);
    // A close makes room.
    assert!(c.share_acknowledge(&key("b"), -1).is_ok());
    open(&mut c, &key("c"), &[], 1);
    assert_eq!(c.len(), 2);
    // A bound of 0 refuses everything.
    let mut none = ShareSessions::new(0);
    assert_error(
        none.share_fetch(fetch(&key("a"), 0, &[], &[], 1)),
        133,
        msg::LIMIT_REACHED,
    );
}

#[test]
fn the_default_bound_is_2000_sessions() {
    let mut c = ShareSessions::default();
    for i in 0..2000 {
        open(&mut c, &key(&format!("m{i}")), &[], i);
    }
    assert_eq!(c.len(), 2000);
    assert_error(
        c.share_fetch(fetch(&key("one-more"), 0, &[], &[], 1)),
        133,
        msg::LIMIT_REACHED,
    );
}

#[test]
fn acknowledge_at_epoch_0_is_invalid_share_session_epoch() {
    let mut c = ShareSessions::default();
    // Epoch 0 is refused before the session is looked up.
    assert_error(c.share_acknowledge(&key("m1"), 0), 123, msg::INVALID_EPOCH);
    open(&mut c, &key("m1"), &[], 1);
    assert_error(c.share_acknowledge(&key("m1"), 0), 123, msg::INVALID_EPOCH);
    assert_eq!(c.epoch(&key("m1")), Some(1));
}

#[test]
fn acknowledge_without_a_session_is_share_session_not_found() {
    let mut c = ShareSessions::default();
    assert_error(c.share_acknowledge(&key("m1"), 1), 122, msg::NOT_FOUND);
    assert_error(c.share_acknowledge(&key("m1"), -1), 122, msg::NOT_FOUND);
    assert_error(c.share_acknowledge(&key("m1"), -7), 122, msg::NOT_FOUND);
}

#[test]
fn acknowledge_with_another_epoch_is_invalid_share_session_epoch() {
    let mut c = ShareSessions::default();
    let k = key("m1");
    open(&mut c, &k, &[], 1);
    for epoch in [2, -2, i32::MAX, i32::MIN] {
        assert_error(c.share_acknowledge(&k, epoch), 123, msg::INVALID_EPOCH);
    }
    assert_eq!(c.epoch(&k), Some(1));
}

#[test]
fn acknowledge_at_the_session_epoch_advances_it() {
    let mut c = ShareSessions::default();
    let k = key("m1");
    open(&mut c, &k, &[tp(1, 0)], 1);
    assert_eq!(
        c.share_acknowledge(&k, 1),
        Ok(AckContext::Advanced { next_epoch: 2 })
    );
    assert_error(c.share_acknowledge(&k, 1), 123, msg::INVALID_EPOCH);
    // ShareFetch and ShareAcknowledge share the one epoch.
    assert!(c.share_fetch(fetch(&k, 2, &[], &[], 1)).is_ok());
    assert_eq!(
        c.share_acknowledge(&k, 3),
        Ok(AckContext::Advanced { next_epoch: 4 })
    );
    assert_eq!(c.partitions(&k), Some(vec![tp(1, 0)]));
}

#[test]
fn acknowledge_at_epoch_minus_1_closes_and_returns_the_partitions() {
    let mut c = ShareSessions::default();
    let k = key("m1");
    open(&mut c, &k, &[tp(1, 0), tp(2, 3)], 4);
    assert!(c.share_acknowledge(&k, 1).is_ok());
    assert_eq!(
        c.share_acknowledge(&k, -1),
        Ok(AckContext::Closed(Released {
            key: k.clone(),
            partitions: vec![tp(1, 0), tp(2, 3)]
        }))
    );
    assert!(c.is_empty());
    assert_error(c.share_acknowledge(&k, -1), 122, msg::NOT_FOUND);
    assert_eq!(c.connection_closed(4), vec![]);
}

#[test]
fn a_response_lists_partitions_with_news_or_newly_added() {
    let mut c = ShareSessions::default();
    let k = key("m1");
    let (a, b, n) = (tp(1, 0), tp(1, 1), tp(2, 0));
    open(&mut c, &k, &[a, b], 1);
    let quiet = PartitionNews::default();
    // The opening response lists every partition once.
    assert!(c.must_list(&k, &a, quiet));
    assert!(c.must_list(&k, &b, quiet));
    assert!(!c.must_list(&k, &a, quiet));
    assert!(!c.must_list(&k, &b, quiet));
    // Records, an error or an acknowledgement result are listed each time.
    for news in [
        PartitionNews {
            records: true,
            ..quiet
        },
        PartitionNews {
            error: true,
            ..quiet
        },
        PartitionNews {
            acknowledgement: true,
            ..quiet
        },
    ] {
        assert!(c.must_list(&k, &a, news));
        assert!(c.must_list(&k, &a, news));
    }
    // A partition added by a later fetch is listed once with nothing to say.
    assert!(c.share_fetch(fetch(&k, 1, &[n, a], &[], 1)).is_ok());
    assert!(!c.must_list(&k, &a, quiet));
    assert!(c.must_list(&k, &n, quiet));
    assert!(!c.must_list(&k, &n, quiet));
    // Unknown partition or session: only its own news.
    assert!(!c.must_list(&k, &tp(9, 9), quiet));
    assert!(c.must_list(
        &key("nobody"),
        &a,
        PartitionNews {
            error: true,
            ..quiet
        }
    ));
}

#[test]
fn connection_close_removes_its_sessions_and_returns_them_once() {
    let mut c = ShareSessions::default();
    open(&mut c, &key("a"), &[tp(1, 0)], 1);
    open(&mut c, &SessionKey::new("h", "a"), &[tp(2, 0), tp(2, 1)], 1);
    open(&mut c, &key("b"), &[tp(1, 1)], 2);
    assert!(c
        .share_fetch(fetch(&key("a"), 1, &[tp(1, 5)], &[], 3))
        .is_ok());
    let released = c.connection_closed(1);
    assert_eq!(
        released,
        vec![
            Released {
                key: key("a"),
                partitions: vec![tp(1, 0), tp(1, 5)]
            },
            Released {
                key: SessionKey::new("h", "a"),
                partitions: vec![tp(2, 0), tp(2, 1)]
            },
        ]
    );
    assert_eq!(c.len(), 1);
    assert_eq!(c.epoch(&key("a")), None);
    assert_eq!(c.epoch(&key("b")), Some(1));
    assert_eq!(c.connection_closed(1), vec![]);
    assert_eq!(c.connection_closed(99), vec![]);
    // A closed connection's members must open again.
    assert_error(
        c.share_fetch(fetch(&key("a"), 2, &[], &[], 1)),
        122,
        msg::NOT_FOUND,
    );
}

// ---------------------------------------------------------------------------
// Property test against a model.

#[derive(Clone, Debug)]
enum Epoch {
    /// The session's own epoch (or 1 with none).
    Right,
    Any(i32),
}

#[derive(Clone, Debug)]
enum Op {
    Open {
        k: u8,
        conn: u64,
        parts: Vec<u8>,
        acks: bool,
    },
    Next {
        k: u8,
        epoch: Epoch,
        parts: Vec<u8>,
        forgotten: Vec<u8>,
    },
    FinalFetch {
        k: u8,
    },
    Ack {
        k: u8,
        epoch: Epoch,
    },
    AckZero {
        k: u8,
    },
    AckFinal {
        k: u8,
    },
    Disconnect {
        conn: u64,
    },
    NearWrap {
        k: u8,
    },
}

fn epoch_strategy() -> impl Strategy<Value = Epoch> {
    prop_oneof![
        3 => Just(Epoch::Right),
        1 => (1i32..6).prop_map(Epoch::Any),
        1 => any::<i32>().prop_map(Epoch::Any),
    ]
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let k = 0u8..5;
    let parts = prop::collection::vec(0u8..6, 0..4);
    prop_oneof![
        4 => (k.clone(), 0u64..3, parts.clone(), prop::bool::weighted(0.15))
            .prop_map(|(k, conn, parts, acks)| Op::Open { k, conn, parts, acks }),
        5 => (k.clone(), epoch_strategy(), parts.clone(), parts)
            .prop_map(|(k, epoch, parts, forgotten)| Op::Next { k, epoch, parts, forgotten }),
        1 => k.clone().prop_map(|k| Op::FinalFetch { k }),
        3 => (k.clone(), epoch_strategy()).prop_map(|(k, epoch)| Op::Ack { k, epoch }),
        1 => k.clone().prop_map(|k| Op::AckZero { k }),
        1 => k.clone().prop_map(|k| Op::AckFinal { k }),
        1 => (0u64..3).prop_map(|conn| Op::Disconnect { conn }),
        1 => k.prop_map(|k| Op::NearWrap { k }),
    ]
}

#[derive(Clone, Debug)]
struct ModelSession {
    id: u64,
    epoch: i32,
    parts: Vec<TopicPartition>,
    conn: u64,
}

fn pkey(k: u8) -> SessionKey {
    // Two groups, so the same member id in two groups are two keys.
    SessionKey::new(format!("g{}", k % 2), format!("m{}", k / 2))
}

fn tps(v: &[u8]) -> Vec<TopicPartition> {
    v.iter().map(|&p| tp(p % 2, i32::from(p))).collect()
}

fn model_add(parts: &mut Vec<TopicPartition>, add: &[TopicPartition]) {
    for p in add {
        if !parts.contains(p) {
            parts.push(*p);
        }
    }
}

/// Notes a session instance's partitions handed back; twice is a failure.
fn release(m: &ModelSession, released_ids: &mut Vec<u64>) -> Result<(), TestCaseError> {
    prop_assert!(
        !released_ids.contains(&m.id),
        "session {} released twice",
        m.id
    );
    released_ids.push(m.id);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn share_sessions_match_the_model(
        max in 0usize..5,
        ops in prop::collection::vec(op_strategy(), 1..60),
    ) {
        let mut c = ShareSessions::new(max);
        let mut model: BTreeMap<SessionKey, ModelSession> = BTreeMap::new();
        let mut next_id = 0u64;
        // Session instances whose partitions were handed back.
        let mut released_ids: Vec<u64> = Vec::new();

        for op in ops {
            match op {
                Op::Open { k, conn, parts, acks } => {
                    let key = pkey(k);
                    let parts = tps(&parts);
                    let mut req = fetch(&key, 0, &parts, &[], conn);
                    req.acknowledgements_present = acks;
                    let got = c.share_fetch(req);
                    let exists = model.contains_key(&key);
                    if acks {
                        prop_assert_eq!(got, Err(SessionError::AcknowledgementsInInitial));
                    } else if !exists && model.len() >= max {
                        prop_assert_eq!(got, Err(SessionError::LimitReached));
                    } else {
                        let mut list = Vec::new();
                        model_add(&mut list, &parts);
                        prop_assert_eq!(got, Ok(FetchContext::Opened {
                            partitions: list.clone(),
                            replaced: exists,
                        }));
                        model.insert(key, ModelSession { id: next_id, epoch: 1, parts: list, conn });
                        next_id += 1;
                    }
                }
                Op::Next { k, epoch, parts, forgotten } => {
                    let key = pkey(k);
                    let e = match epoch {
                        Epoch::Right => model.get(&key).map_or(1, |m| m.epoch),
                        Epoch::Any(e) => e,
                    };
                    let (parts, forgotten) = (tps(&parts), tps(&forgotten));
                    let got = c.share_fetch(fetch(&key, e, &parts, &forgotten, 0));
                    match (e, model.get_mut(&key)) {
                        (0, _) => {
                            // Epoch 0 is an open; the generator's Any may hit it.
                            prop_assert!(got.is_ok() || got == Err(SessionError::LimitReached));
                            if let Ok(FetchContext::Opened { partitions, .. }) = got {
                                model.insert(key, ModelSession { id: next_id, epoch: 1, parts: partitions, conn: 0 });
                                next_id += 1;
                            }
                        }
                        (_, None) => prop_assert_eq!(got, Err(SessionError::NotFound)),
                        (-1, Some(_)) => {
                            let m = model.remove(&key).ok_or_else(|| TestCaseError::fail("model"))?;
                            release(&m, &mut released_ids)?;
                            prop_assert_eq!(got, Ok(FetchContext::Closed(Released { key, partitions: m.parts })));
                        }
                        (e, Some(m)) if e != m.epoch => {
                            prop_assert_eq!(got, Err(SessionError::InvalidEpoch { expected: Some(m.epoch), got: e }));
                        }
                        (_, Some(m)) => {
                            model_add(&mut m.parts, &parts);
                            m.parts.retain(|p| !forgotten.contains(p));
                            m.epoch = if m.epoch == i32::MAX { 1 } else { m.epoch + 1 };
                            prop_assert_eq!(got, Ok(FetchContext::Updated { partitions: m.parts.clone(), next_epoch: m.epoch }));
                        }
                    }
                }
                Op::FinalFetch { k } => {
                    let key = pkey(k);
                    let got = c.share_fetch(fetch(&key, -1, &[], &[], 0));
                    match model.remove(&key) {
                        None => prop_assert_eq!(got, Err(SessionError::NotFound)),
                        Some(m) => {
                            release(&m, &mut released_ids)?;
                            prop_assert_eq!(got, Ok(FetchContext::Closed(Released { key, partitions: m.parts })));
                        }
                    }
                }
                Op::Ack { k, epoch } => {
                    let key = pkey(k);
                    let e = match epoch {
                        Epoch::Right => model.get(&key).map_or(1, |m| m.epoch),
                        Epoch::Any(e) => e,
                    };
                    let got = c.share_acknowledge(&key, e);
                    match (e, model.get_mut(&key)) {
                        (0, m) => prop_assert_eq!(got, Err(SessionError::InvalidEpoch { expected: m.map(|m| m.epoch), got: 0 })),
                        (_, None) => prop_assert_eq!(got, Err(SessionError::NotFound)),
                        (-1, Some(_)) => {
                            let m = model.remove(&key).ok_or_else(|| TestCaseError::fail("model"))?;
                            release(&m, &mut released_ids)?;
                            prop_assert_eq!(got, Ok(AckContext::Closed(Released { key, partitions: m.parts })));
                        }
                        (e, Some(m)) if e != m.epoch => {
                            prop_assert_eq!(got, Err(SessionError::InvalidEpoch { expected: Some(m.epoch), got: e }));
                        }
                        (_, Some(m)) => {
                            m.epoch = if m.epoch == i32::MAX { 1 } else { m.epoch + 1 };
                            prop_assert_eq!(got, Ok(AckContext::Advanced { next_epoch: m.epoch }));
                        }
                    }
                }
                Op::AckZero { k } => {
                    let key = pkey(k);
                    let got = c.share_acknowledge(&key, 0);
                    prop_assert_eq!(got, Err(SessionError::InvalidEpoch { expected: model.get(&key).map(|m| m.epoch), got: 0 }));
                }
                Op::AckFinal { k } => {
                    let key = pkey(k);
                    let got = c.share_acknowledge(&key, -1);
                    match model.remove(&key) {
                        None => prop_assert_eq!(got, Err(SessionError::NotFound)),
                        Some(m) => {
                            release(&m, &mut released_ids)?;
                            prop_assert_eq!(got, Ok(AckContext::Closed(Released { key, partitions: m.parts })));
                        }
                    }
                }
                Op::Disconnect { conn } => {
                    let got = c.connection_closed(conn);
                    let keys: Vec<SessionKey> = model.iter().filter(|(_, m)| m.conn == conn).map(|(k, _)| k.clone()).collect();
                    let mut want = Vec::new();
                    for key in keys {
                        if let Some(m) = model.remove(&key) {
                            release(&m, &mut released_ids)?;
                            want.push(Released { key, partitions: m.parts });
                        }
                    }
                    prop_assert_eq!(got, want);
                }
                Op::NearWrap { k } => {
                    // Jump a live session close to the wrap, in both.
                    let key = pkey(k);
                    if let (Some(m), Some(s)) = (model.get_mut(&key), c.sessions.get_mut(&key)) {
                        m.epoch = i32::MAX - 1;
                        s.epoch = i32::MAX - 1;
                    }
                }
            }
            // The invariants after every step.
            prop_assert!(c.len() <= max);
            prop_assert_eq!(c.len(), model.len());
            for (key, m) in &model {
                prop_assert_eq!(c.epoch(key), Some(m.epoch));
                prop_assert!(m.epoch >= 1);
                prop_assert_eq!(c.partitions(key), Some(m.parts.clone()));
                prop_assert_eq!(c.connection(key), Some(m.conn));
            }
            let listed: usize = c.by_connection.values().map(|s| s.len()).sum();
            prop_assert_eq!(listed, c.len());
            for (conn, keys) in &c.by_connection {
                prop_assert!(!keys.is_empty());
                for key in keys {
                    prop_assert_eq!(c.connection(key), Some(*conn));
                }
            }
        }
    }
}
