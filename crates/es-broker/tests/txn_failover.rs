//! Transaction coordinator fail-over with real es-broker processes on
//! loopback: the coordinator's state (in the metadata log) survives the
//! loss of the coordinating broker, and the broker that takes over the
//! leadership of `__transaction_state` carries on.
//!
//! - An open transaction, its coordinator killed with SIGKILL: the new
//!   coordinator (FindCoordinator) knows the transactional id
//!   (DescribeTransactions), a producer re-initialising gets the same
//!   producer id at a higher epoch, and the open transaction is aborted: a
//!   read_committed fetch has its records under an ABORT marker and in the
//!   aborted-transactions list (a Kafka consumer never returns them), and
//!   the last stable offset passes them. `__transaction_state` has three
//!   replicas, as Kafka's `transaction.state.log.replication.factor` gives.
//!   The killed broker, restarted, finds the coordinator (itself, if the
//!   leadership moves back, or the new one) going on from the same state.
//! - A transaction whose EndTxn(commit) was accepted while its markers could
//!   not be written yet (the data partition's only replica, on a broker that
//!   votes in no quorum, paused with SIGSTOP), its coordinator then killed:
//!   the new coordinator finds it in PrepareCommit, writes the COMMIT marker
//!   once the partition is back, and the records become visible to
//!   read_committed.
//!
//! Waits are bounded polls on conditions; the fail-over time printed (kill
//! -9 to the first successful InitProducerId on the new coordinator) is a
//! measurement, not an assertion.

mod common;

use std::time::{Duration, Instant};

use common::cluster::{signal, Cluster};
use common::replicas::{create, create_assigned, shown};
use common::txn::{
    agreed_coordinator, end_txn, init_producer_id, read_committed, Batch, TRANSACTION_KEY,
};
use es_test_support::batch::{producer_meta, KafkaBatch};
use es_test_support::wait::eventually;
use es_test_support::wire::KafkaClient;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const NOT_COORDINATOR: i16 = 16;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn client(addr: &str) -> KafkaClient {
    KafkaClient::connect_with_timeout(addr, "txn-failover-test", Duration::from_secs(60))
}

/// DescribeTransactions (v0) of `id` at `addr`: (error, state, producer id,
/// epoch).
fn describe(addr: &str, id: &str) -> (i16, String, i64, i16) {
    let mut req = DescribeTransactionsRequest::default();
    req.transactional_ids = vec![TransactionalId(s(id))];
    let r: DescribeTransactionsResponse = client(addr).call(ApiKey::DescribeTransactions, 0, &req);
    let t = &r.transaction_states[0];
    (
        t.error_code,
        t.transaction_state.to_string(),
        t.producer_id.0,
        t.producer_epoch,
    )
}

fn add_partition(addr: &str, id: &str, pid: i64, epoch: i16, topic: &str) {
    let mut t = AddPartitionsToTxnTopic::default();
    t.name = TopicName(s(topic));
    t.partitions = vec![0];
    let mut req = AddPartitionsToTxnRequest::default();
    req.v3_and_below_transactional_id = TransactionalId(s(id));
    req.v3_and_below_producer_id = ProducerId(pid);
    req.v3_and_below_producer_epoch = epoch;
    req.v3_and_below_topics = vec![t];
    let r: AddPartitionsToTxnResponse = client(addr).call(ApiKey::AddPartitionsToTxn, 3, &req);
    let code = r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code;
    assert_eq!(code, 0, "AddPartitionsToTxn {topic}-0");
}

/// `n` transactional records of (`pid`, `epoch`) in one batch, acks=all, to
/// partition 0 of `topic` at its leader `addr`: (error, base offset).
fn produce(addr: &str, id: &str, topic: &str, pid: i64, epoch: i16, n: i32) -> (i16, i64) {
    let mut b = KafkaBatch::new();
    for i in 0..n {
        b.record(
            1_700_000_000_000,
            None,
            Some(format!("v{i}").as_bytes()),
            &[],
            &producer_meta(pid, epoch, i, true),
        );
    }
    let mut pd = PartitionProduceData::default();
    pd.index = 0;
    pd.records = Some(b.encode().into());
    let mut td = TopicProduceData::default();
    td.name = TopicName(s(topic));
    td.partition_data = vec![pd];
    let mut req = ProduceRequest::default();
    req.transactional_id = Some(TransactionalId(s(id)));
    req.acks = -1;
    req.timeout_ms = 30_000;
    req.topic_data = vec![td];
    let r: ProduceResponse = client(addr).call(ApiKey::Produce, 9, &req);
    let p = &r.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// The batches of a transaction of three records from `base` by producer
/// `pid`, then its marker (1 COMMIT, 0 ABORT).
fn data_then_marker(base: i64, pid: i64, marker: i16) -> Vec<Batch> {
    vec![
        Batch {
            base_offset: base,
            producer_id: pid,
            control: None,
        },
        Batch {
            base_offset: base + 3,
            producer_id: pid,
            control: Some(marker),
        },
    ]
}

#[test]
fn an_open_transaction_is_aborted_by_the_new_coordinator_after_kill_9() {
    const ID: &str = "failover-abort";
    const TOPIC: &str = "tf-abort";
    let dir = tempfile::tempdir().expect("tmp");
    let mut c = Cluster::start_with(dir.path(), 3, 3, &["--replica-lag-time-max-ms", "4000"]);
    c.leader();
    // Right after the quorum forms, a node may not be registered yet
    // (INVALID_REPLICATION_FACTOR, 38): wait until all three are.
    let created = eventually(Duration::from_secs(30), "three brokers to place on", || {
        let e = create(&c.addr(1), TOPIC, 3, &[("min.insync.replicas", "2")]);
        (e != 38).then_some(e)
    });
    assert_eq!(created, 0);
    let (leader, ..) = eventually(Duration::from_secs(30), "three in sync", || {
        let s = shown(&c.addr(1), TOPIC);
        (s.0 >= 0 && s.3.len() == 3).then_some(s)
    });
    // The first lookup creates __transaction_state, with three replicas.
    let coord = agreed_coordinator(&c, TRANSACTION_KEY, ID, None);
    let (_, _, replicas, _) = shown(&c.addr(coord), "__transaction_state");
    assert_eq!(replicas.len(), 3, "__transaction_state replicas");
    let (e, pid, epoch) = init_producer_id(&c.addr(coord), ID, 60_000);
    assert_eq!(e, 0);
    add_partition(&c.addr(coord), ID, pid, epoch, TOPIC);
    let (e, base) = produce(&c.addr(leader), ID, TOPIC, pid, epoch, 3);
    assert_eq!(e, 0, "transactional produce");
    assert_eq!(describe(&c.addr(coord), ID).1, "Ongoing");

    c.nodes.remove(&coord).expect("coordinator").kill();
    let killed_at = Instant::now();
    let new = agreed_coordinator(&c, TRANSACTION_KEY, ID, Some(coord));
    let (pid2, epoch2) = eventually(
        Duration::from_secs(60),
        "InitProducerId at the new coordinator",
        || {
            let (e, p, ep) = init_producer_id(&c.addr(new), ID, 60_000);
            (e == 0).then_some((p, ep))
        },
    );
    let took = killed_at.elapsed();
    println!(
        "transaction coordinator fail-over: kill -9 of node {coord} to the first InitProducerId answered by node {new}: {} ms",
        took.as_millis()
    );
    assert_eq!(pid2, pid, "the same producer id");
    assert!(epoch2 > epoch, "a higher epoch: {epoch2} after {epoch}");
    let (e, state, p, ep) = describe(&c.addr(new), ID);
    assert_eq!((e, state.as_str(), p, ep), (0, "Empty", pid, epoch2));
    // The old coordinator is gone for good: any other node says so.
    for &n in c.nodes.keys() {
        if n != new {
            assert_eq!(init_producer_id(&c.addr(n), ID, 60_000).0, NOT_COORDINATOR);
        }
    }

    // The open transaction was aborted: its records sit under an ABORT
    // marker, listed as aborted, and the last stable offset is past them.
    let (lso, bs, aborted) = eventually(Duration::from_secs(60), "the abort marker", || {
        let (l, ..) = shown(&c.addr(new), TOPIC);
        if l < 0 || l == coord {
            return None;
        }
        let (e, lso, bs, aborted) = read_committed(&c.addr(l), TOPIC, 0);
        let marked = bs.iter().any(|b| b.control.is_some());
        (e == 0 && marked).then_some((lso, bs, aborted))
    });
    assert_eq!(bs, data_then_marker(base, pid, 0));
    assert_eq!(aborted, vec![(pid, base)]);
    assert!(lso >= base + 4, "the last stable offset passes them: {lso}");

    // The killed broker returns: whichever broker coordinates the id now
    // (the leadership may move back to it) goes on from the same state.
    let mut back = c.spawn(coord);
    back.wait_listening();
    c.nodes.insert(coord, back);
    let now = agreed_coordinator(&c, TRANSACTION_KEY, ID, None);
    let (pid3, epoch3) = eventually(
        Duration::from_secs(60),
        "InitProducerId after the return",
        || {
            let (e, p, ep) = init_producer_id(&c.addr(now), ID, 60_000);
            (e == 0).then_some((p, ep))
        },
    );
    assert_eq!(pid3, pid);
    assert!(epoch3 > epoch2, "{epoch3} after {epoch2}");
    for (_, p) in std::mem::take(&mut c.nodes) {
        p.stop();
    }
}

#[test]
fn a_commit_decided_before_kill_9_is_completed_by_the_new_coordinator() {
    const ID: &str = "failover-commit";
    const TOPIC: &str = "tf-commit";
    let dir = tempfile::tempdir().expect("tmp");
    // Three voters and a fourth broker that votes in no quorum: it holds
    // the data partition, and pausing it keeps the quorum.
    let mut c = Cluster::start(dir.path(), 4, 3);
    c.leader();
    let all_four = || {
        eventually(
            Duration::from_secs(30),
            "__transaction_state created",
            || {
                let e = create_assigned(&c.addr(1), "__transaction_state", -1, &[1, 2, 3], &[]);
                (e == 0).then_some(())
            },
        )
    };
    all_four();
    eventually(Duration::from_secs(30), "the data topic on node 4", || {
        let e = create_assigned(&c.addr(1), TOPIC, -1, &[4], &[]);
        (e == 0).then_some(())
    });
    let coord = agreed_coordinator(&c, TRANSACTION_KEY, ID, None);
    assert_ne!(coord, 4);
    let (e, pid, epoch) = init_producer_id(&c.addr(coord), ID, 60_000);
    assert_eq!(e, 0);
    add_partition(&c.addr(coord), ID, pid, epoch, TOPIC);
    let (e, base) = produce(&c.addr(4), ID, TOPIC, pid, epoch, 3);
    assert_eq!(e, 0, "transactional produce");

    // The partition's only replica stops answering: the commit is decided
    // (EndTxn answers NONE) but its marker cannot be written yet.
    let paused = c.nodes[&4].pid();
    signal(paused, "STOP");
    assert_eq!(end_txn(&c.addr(coord), ID, pid, epoch, true), 0, "EndTxn");
    assert_eq!(describe(&c.addr(coord), ID).1, "PrepareCommit");

    c.nodes.remove(&coord).expect("coordinator").kill();
    signal(paused, "CONT");
    let new = agreed_coordinator(&c, TRANSACTION_KEY, ID, Some(coord));
    let (e, state, p, _) = eventually(
        Duration::from_secs(90),
        "the commit completed by the new coordinator",
        || {
            let d = describe(&c.addr(new), ID);
            (d.1 == "CompleteCommit").then_some(d)
        },
    );
    assert_eq!((e, state.as_str(), p), (0, "CompleteCommit", pid));
    let (lso, bs, aborted) = eventually(Duration::from_secs(60), "the commit marker", || {
        let (e, lso, bs, aborted) = read_committed(&c.addr(4), TOPIC, 0);
        (e == 0 && bs.iter().any(|b| b.control.is_some())).then_some((lso, bs, aborted))
    });
    assert_eq!(bs, data_then_marker(base, pid, 1));
    assert!(aborted.is_empty(), "nothing aborted: {aborted:?}");
    // The old coordinator's WriteTxnMarkers, sent before the kill, may be
    // read by the resumed broker too: a second COMMIT marker (as in Kafka),
    // fetched in the same control batch.
    assert!(lso >= base + 4, "the committed records are stable: {lso}");
    for (_, p) in std::mem::take(&mut c.nodes) {
        p.stop();
    }
}
