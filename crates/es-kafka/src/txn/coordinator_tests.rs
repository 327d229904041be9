//! Tests of the transaction coordinator: producer ids and epochs, the
//! transaction states and their journal, markers and recovery.

use super::*;
use crate::txn::PID_BLOCK_SIZE;
use es_storage::partition::PartitionConfig;
use es_storage::record::RecordIter;
use es_storage::{Partition, ProducerAppend, RealFs, RecordBatchBuf, RecordMeta, Storage};

#[derive(Default)]
struct Map(HashMap<(String, i32), PartitionLog>);

impl Partitions for Map {
    fn partition(&self, topic: &str, partition: i32) -> Option<PartitionLog> {
        self.0.get(&(topic.to_string(), partition)).cloned()
    }
    fn for_each_partition(&self, f: &mut dyn FnMut(&PartitionLog)) {
        for p in self.0.values() {
            f(p);
        }
    }
}

#[derive(Debug, Default)]
struct Sink(Mutex<Vec<(String, Vec<TxnOffset>)>>);

impl TxnOffsetSink for Sink {
    fn validate_member(&self, _: &str, m: &str, _: Option<&str>, g: i32) -> Result<(), TxnError> {
        if m == "stranger" {
            return Err(TxnError::Group(
                crate::groups::error::GroupError::UnknownMemberId,
            ));
        }
        let _ = g;
        Ok(())
    }
    fn commit_offsets(&self, group: &str, offsets: &[TxnOffset]) -> Result<(), TxnError> {
        self.0.lock().push((group.to_string(), offsets.to_vec()));
        Ok(())
    }
}

struct Env {
    dir: tempfile::TempDir,
    parts: Map,
}

impl Env {
    fn new(partitions: &[(&str, i32)]) -> Env {
        let dir = tempfile::tempdir().expect("tmp");
        let mut parts = Map::default();
        for (t, p) in partitions {
            let pd = dir.path().join("topics").join(t).join(p.to_string());
            let part = Partition::open(
                &Storage::new(Arc::new(RealFs)),
                pd,
                PartitionConfig::default(),
            )
            .expect("partition");
            parts
                .0
                .insert((t.to_string(), *p), PartitionLog::local(part));
        }
        Env { dir, parts }
    }

    fn coordinator(&self) -> TxnCoordinator {
        TxnCoordinator::open(
            Arc::new(RealFs),
            self.dir.path(),
            TxnConfig::default(),
            es_storage::clock::system(),
        )
        .expect("coordinator")
    }

    fn part(&self, t: &str, p: i32) -> Arc<Partition> {
        self.parts
            .partition(t, p)
            .expect("partition")
            .storage()
            .clone()
    }

    /// Appends one transactional record as the produce path does.
    fn produce(&self, c: &TxnCoordinator, id: &str, pe: (i64, i16), seq: i32, t: &str, p: i32) {
        let guard = c.verify_produce(id, pe.0, pe.1, t, p).expect("verified");
        let mut buf = RecordBatchBuf::new();
        let meta = RecordMeta {
            producer: Some(es_storage::ProducerInfo {
                producer_id: pe.0,
                producer_epoch: pe.1,
                sequence: seq,
            }),
            transactional: true,
            control: false,
        };
        buf.push(0, None, Some(b"v"), std::iter::empty(), &meta);
        let app = ProducerAppend {
            producer_id: pe.0,
            producer_epoch: pe.1,
            base_sequence: seq,
            record_count: 1,
            transactional: true,
        };
        let part = self.part(t, p);
        part.append_producer(&mut buf, Some(&app)).expect("append");
        drop(guard);
        part.flush().expect("flush");
    }

    fn control_records(&self, t: &str, p: i32) -> Vec<bool> {
        let part = self.part(t, p);
        let chunk = part.read(part.log_start_offset(), 1 << 20).expect("read");
        RecordIter::new(&chunk.data)
            .filter_map(Result::ok)
            .filter(|r| r.meta.control)
            .map(|r| r.key.is_some_and(|k| k.get(3) == Some(&1)))
            .collect()
    }
}

#[test]
fn producer_ids_are_unique_across_restarts() {
    let env = Env::new(&[]);
    let mut seen = std::collections::HashSet::new();
    for round in 0..3 {
        let c = env.coordinator();
        for _ in 0..(PID_BLOCK_SIZE + 5) {
            let pid = c.allocate_producer_id().expect("pid");
            assert!(seen.insert(pid), "round {round}: {pid} reused");
        }
        if round == 1 {
            c.close().expect("close");
        }
    }
}

#[test]
fn idempotent_init_and_kip360_bump() {
    let env = Env::new(&[]);
    let c = env.coordinator();
    let (p, e) = c.init_producer_id(&env.parts, None, 0, None).expect("init");
    assert_eq!(e, 0);
    assert_eq!(
        c.init_producer_id(&env.parts, None, 0, Some((p, 0))),
        Ok((p, 1))
    );
    // An id we never issued gets a fresh one.
    let (q, e) = c
        .init_producer_id(&env.parts, None, 0, Some((1 << 40, 3)))
        .expect("init");
    assert_ne!(q, 1 << 40);
    assert_eq!(e, 0);
}

#[test]
fn transactional_init_validates() {
    let env = Env::new(&[]);
    let c = env.coordinator();
    assert_eq!(
        c.init_producer_id(&env.parts, Some(""), 1000, None),
        Err(TxnError::InvalidRequest)
    );
    assert_eq!(
        c.init_producer_id(&env.parts, Some("t"), 900_001, None),
        Err(TxnError::InvalidTransactionTimeout)
    );
    assert_eq!(
        c.init_producer_id(&env.parts, Some("t"), 0, None),
        Err(TxnError::InvalidTransactionTimeout)
    );
    let (p, e) = c
        .init_producer_id(&env.parts, Some("t"), 900_000, None)
        .expect("ok");
    assert_eq!(e, 0);
    assert_eq!(
        c.init_producer_id(&env.parts, Some("t"), 1000, None),
        Ok((p, 1))
    );
}

#[test]
fn commit_writes_markers_and_hands_over_offsets() {
    let env = Env::new(&[("t", 0), ("t", 1)]);
    let c = env.coordinator();
    let sink = Arc::new(Sink::default());
    c.set_offset_sink(sink.clone());
    let pe = c
        .init_producer_id(&env.parts, Some("x"), 60_000, None)
        .expect("init");
    let tps = [TopicPartition::new("t", 0), TopicPartition::new("t", 1)];
    c.add_partitions("x", pe.0, pe.1, &tps, &[]).expect("add");
    env.produce(&c, "x", pe, 0, "t", 0);
    env.produce(&c, "x", pe, 0, "t", 1);
    assert_eq!(env.part("t", 0).last_stable_offset(), 0);
    c.add_partitions("x", pe.0, pe.1, &[], &["g".to_string()])
        .expect("add group");
    let off = TxnOffset {
        group: "g".into(),
        topic: "in".into(),
        partition: 0,
        offset: 42,
        leader_epoch: -1,
        metadata: None,
        member_id: String::new(),
        generation_id: -1,
        instance_id: None,
    };
    assert_eq!(
        c.txn_offset_commit("x", pe.0, pe.1, "g", "stranger", None, 1, vec![off.clone()]),
        Err(TxnError::Group(
            crate::groups::error::GroupError::UnknownMemberId
        ))
    );
    c.txn_offset_commit("x", pe.0, pe.1, "g", "", None, -1, vec![off.clone()])
        .expect("txn offset commit");
    assert!(c.has_pending_offset("g", "in", 0));
    assert!(
        sink.0.lock().is_empty(),
        "offsets are not visible before the commit"
    );
    c.end_txn(&env.parts, "x", pe.0, pe.1, true)
        .expect("commit");
    assert_eq!(env.control_records("t", 0), vec![true]);
    assert_eq!(env.control_records("t", 1), vec![true]);
    assert_eq!(env.part("t", 0).last_stable_offset(), 2);
    assert_eq!(sink.0.lock().clone(), vec![("g".to_string(), vec![off])]);
    assert!(!c.has_pending_offset("g", "in", 0));
    assert_eq!(
        c.describe("x").map(|r| r.state),
        Ok(TxnState::CompleteCommit)
    );
    // Produce outside the transaction is refused now.
    assert_eq!(
        c.verify_produce("x", pe.0, pe.1, "t", 0).map(|_| ()),
        Err(TxnError::TransactionAbortable)
    );
}

#[test]
fn abort_drops_offsets_and_records_the_aborted_range() {
    let env = Env::new(&[("t", 0)]);
    let c = env.coordinator();
    let sink = Arc::new(Sink::default());
    c.set_offset_sink(sink.clone());
    let pe = c
        .init_producer_id(&env.parts, Some("x"), 60_000, None)
        .expect("init");
    c.add_partitions(
        "x",
        pe.0,
        pe.1,
        &[TopicPartition::new("t", 0)],
        &["g".into()],
    )
    .expect("add");
    env.produce(&c, "x", pe, 0, "t", 0);
    env.produce(&c, "x", pe, 1, "t", 0);
    let off = TxnOffset {
        group: "g".into(),
        topic: "in".into(),
        partition: 0,
        offset: 1,
        leader_epoch: -1,
        metadata: None,
        member_id: String::new(),
        generation_id: -1,
        instance_id: None,
    };
    c.txn_offset_commit("x", pe.0, pe.1, "g", "", None, -1, vec![off])
        .expect("offsets");
    c.end_txn(&env.parts, "x", pe.0, pe.1, false)
        .expect("abort");
    assert!(sink.0.lock().is_empty());
    let p = env.part("t", 0);
    assert_eq!(env.control_records("t", 0), vec![false]);
    let aborted = p.aborted_transactions(0, 10);
    assert_eq!(aborted.len(), 1);
    assert_eq!((aborted[0].first_offset, aborted[0].last_offset), (0, 2));
    assert_eq!(p.last_stable_offset(), 3);
}

#[test]
fn crash_after_prepare_completes_at_recovery() {
    let env = Env::new(&[("t", 0)]);
    let pe;
    {
        let c = env.coordinator();
        pe = c
            .init_producer_id(&env.parts, Some("x"), 60_000, None)
            .expect("init");
        c.add_partitions("x", pe.0, pe.1, &[TopicPartition::new("t", 0)], &[])
            .expect("add");
        env.produce(&c, "x", pe, 0, "t", 0);
        // Decide the commit but "crash" before the markers: journal the
        // Prepare record by hand.
        let t = c
            .core
            .lock()
            .txns
            .end_txn("x", pe.0, pe.1, true, es_storage::clock::wall_ms())
            .expect("end")
            .expect("t");
        c.journal(t, true).expect("journal");
        assert!(env.control_records("t", 0).is_empty());
    }
    let c = env.coordinator();
    assert_eq!(
        c.describe("x").map(|r| r.state),
        Ok(TxnState::PrepareCommit)
    );
    c.recover(&env.parts);
    assert_eq!(
        c.describe("x").map(|r| r.state),
        Ok(TxnState::CompleteCommit)
    );
    assert_eq!(env.control_records("t", 0), vec![true]);
    // A retried EndTxn(commit) from the client is answered NONE.
    assert_eq!(c.end_txn(&env.parts, "x", pe.0, pe.1, true), Ok(()));
}

#[test]
fn open_transaction_survives_restart_and_times_out() {
    let env = Env::new(&[("t", 0)]);
    let pe;
    {
        let c = env.coordinator();
        pe = c
            .init_producer_id(&env.parts, Some("x"), 1_000, None)
            .expect("init");
        c.add_partitions("x", pe.0, pe.1, &[TopicPartition::new("t", 0)], &[])
            .expect("add");
        env.produce(&c, "x", pe, 0, "t", 0);
    }
    let c = env.coordinator();
    c.recover(&env.parts);
    let r = c.describe("x").expect("x");
    assert_eq!(r.state, TxnState::Ongoing);
    // Not yet timed out at its start; timed out after it.
    c.abort_timed_out(&env.parts, r.start_ms);
    assert_eq!(c.describe("x").map(|r| r.state), Ok(TxnState::Ongoing));
    c.abort_timed_out(&env.parts, r.start_ms + 1_001);
    let r = c.describe("x").expect("x");
    assert_eq!(r.state, TxnState::CompleteAbort);
    assert_eq!(r.producer_epoch, pe.1 + 1, "the old producer is fenced");
    assert_eq!(env.control_records("t", 0), vec![false]);
    assert_eq!(env.part("t", 0).last_stable_offset(), 2);
    // The fenced producer's next write is refused by the partition.
    let mut buf = RecordBatchBuf::new();
    buf.push(
        0,
        None,
        Some(b"late"),
        std::iter::empty(),
        &RecordMeta::default(),
    );
    let late = ProducerAppend {
        producer_id: pe.0,
        producer_epoch: pe.1,
        base_sequence: 1,
        record_count: 1,
        transactional: true,
    };
    assert!(matches!(
        env.part("t", 0).append_producer(&mut buf, Some(&late)),
        Err(StorageError::Sequence(
            es_storage::SeqError::StaleEpoch { .. }
        ))
    ));
    assert_eq!(
        c.end_txn(&env.parts, "x", pe.0, pe.1, true),
        Err(TxnError::ProducerFenced)
    );
}

#[test]
fn list_filters() {
    let env = Env::new(&[("t", 0)]);
    let c = env.coordinator();
    let a = c
        .init_producer_id(&env.parts, Some("a"), 60_000, None)
        .expect("a");
    let b = c
        .init_producer_id(&env.parts, Some("b"), 60_000, None)
        .expect("b");
    c.add_partitions("b", b.0, b.1, &[TopicPartition::new("t", 0)], &[])
        .expect("add");
    let (all, unknown) = c.list(&[], &[], -1);
    assert_eq!(all.len(), 2);
    assert!(unknown.is_empty());
    let (ongoing, unknown) = c.list(&["Ongoing".into(), "Weird".into()], &[], -1);
    assert_eq!(ongoing.len(), 1);
    assert_eq!(ongoing[0].transactional_id, "b");
    assert_eq!(unknown, vec!["Weird".to_string()]);
    let (by_pid, _) = c.list(&[], &[a.0], -1);
    assert_eq!(by_pid.len(), 1);
    assert_eq!(by_pid[0].transactional_id, "a");
    // Kafka's duration filter compares with the start time, which an
    // Empty id does not have (-1): it is listed, the fresh one is not.
    let (long, _) = c.list(&[], &[], 3_600_000);
    assert_eq!(long.len(), 1);
    assert_eq!(long[0].transactional_id, "a");
    assert_eq!(c.describe("nope"), Err(TxnError::TransactionalIdNotFound));
}

#[test]
fn idle_ids_expire_and_survive_only_until_then() {
    let env = Env::new(&[]);
    let c = env.coordinator();
    c.init_producer_id(&env.parts, Some("old"), 60_000, None)
        .expect("init");
    let now = es_storage::clock::wall_ms();
    c.expire_ids(now);
    assert!(c.describe("old").is_ok());
    c.expire_ids(now + c.config().transactional_id_expiration_ms + 1);
    assert!(c.describe("old").is_err());
    drop(c);
    let c = env.coordinator();
    assert!(c.describe("old").is_err(), "the removal is durable");
}

#[test]
fn markers_wait_for_verified_appends() {
    let env = Env::new(&[("t", 0)]);
    let c = Arc::new(env.coordinator());
    let pe = c
        .init_producer_id(&env.parts, Some("x"), 60_000, None)
        .expect("init");
    c.add_partitions("x", pe.0, pe.1, &[TopicPartition::new("t", 0)], &[])
        .expect("add");
    let guard = c.verify_produce("x", pe.0, pe.1, "t", 0).expect("verified");
    let parts = Arc::new(env.parts);
    let (c2, p2) = (c.clone(), parts.clone());
    let ender = std::thread::spawn(move || c2.end_txn(p2.as_ref(), "x", pe.0, pe.1, true));
    // The EndTxn is now waiting for the guard (or about to): a new
    // verification is refused, and the append of the verified batch lands
    // before the marker.
    let deadline = Instant::now() + Duration::from_secs(30);
    while c.describe("x").map(|r| r.state) != Ok(TxnState::PrepareCommit) {
        assert!(
            Instant::now() < deadline,
            "EndTxn did not reach PrepareCommit"
        );
        std::thread::yield_now();
    }
    assert_eq!(
        c.verify_produce("x", pe.0, pe.1, "t", 0).map(|_| ()),
        Err(TxnError::ConcurrentTransactions)
    );
    let part = parts
        .partition("t", 0)
        .expect("partition")
        .storage()
        .clone();
    let mut buf = RecordBatchBuf::new();
    let meta = RecordMeta {
        producer: Some(es_storage::ProducerInfo {
            producer_id: pe.0,
            producer_epoch: pe.1,
            sequence: 0,
        }),
        transactional: true,
        control: false,
    };
    buf.push(0, None, Some(b"v"), std::iter::empty(), &meta);
    part.append(&mut buf).expect("append");
    drop(guard);
    assert_eq!(ender.join().expect("join"), Ok(()));
    let chunk = part.read(0, 1 << 20).expect("read");
    let kinds: Vec<bool> = RecordIter::new(&chunk.data)
        .filter_map(Result::ok)
        .map(|r| r.meta.control)
        .collect();
    assert_eq!(kinds, vec![false, true], "data first, then the marker");
}

#[test]
fn offsets_held_here_for_a_group_placed_here_are_settled_by_the_transactions_completion() {
    // The group's former coordinator took a TxnOffsetCommit (held by
    // (group, producer)); the group then moved to the transaction's own
    // coordinator, so no marker reaches an offsets partition elsewhere.
    let env = Env::new(&[]);
    let c = env.coordinator();
    let sink = Arc::new(Sink::default());
    c.set_offset_sink(sink.clone());
    let mut ended = Vec::new();
    for commit in [true, false] {
        let pe = c
            .init_producer_id(&env.parts, Some("x"), 60_000, None)
            .expect("init");
        let group = if commit { "kept" } else { "dropped" };
        c.add_partitions("x", pe.0, pe.1, &[], &[group.to_string()])
            .expect("add group");
        let off = TxnOffset {
            group: group.into(),
            topic: "in".into(),
            partition: 0,
            offset: 42,
            leader_epoch: -1,
            metadata: None,
            member_id: String::new(),
            generation_id: -1,
            instance_id: None,
        };
        c.txn_offset_commit_remote(pe.0, pe.1, group, "", None, -1, vec![off.clone()])
            .expect("held");
        assert!(c.has_pending_offset(group, "in", 0));
        c.end_txn(&env.parts, "x", pe.0, pe.1, commit).expect("end");
        assert!(!c.has_pending_offset(group, "in", 0), "settled");
        if commit {
            ended.push((group.to_string(), vec![off]));
        }
    }
    assert_eq!(sink.0.lock().clone(), ended, "only the committed one");
}
