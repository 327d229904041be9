//! The group coordinator fails over with real es-broker processes on
//! loopback.
//!
//! - `__consumer_offsets` gets three replicas on three nodes; a group's
//!   committed offsets are in the metadata quorum, and every node writes
//!   the group's document (`data/groups/<group>.json`) from it.
//! - kill -9 of the group's coordinator: FindCoordinator names another node
//!   (the new leader of the group's `__consumer_offsets` partition), which
//!   answers OffsetFetch with the last offset acknowledged by the old one,
//!   and takes commits.
//! - The killed node, restarted, catches up: its document of the group
//!   holds the commit made while it was down, and it does not coordinate
//!   the group (its old partition's leadership moved).
//! - A transactional batch sent to a partition leader while the
//!   transaction's coordinator is unavailable is refused with
//!   NOT_ENOUGH_REPLICAS (retriable, as Kafka answers when verification
//!   cannot reach the coordinator) and never appended.
//!
//! Waits are bounded polls on conditions; times printed are measurements.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::cluster::Cluster;
use common::replicas::{create, create_assigned, name, read_all, shown};
use es_test_support::wait::eventually;
use es_test_support::wire::KafkaClient;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const GROUP: &str = "failover-group";
const TOPIC: &str = "events";

/// FindCoordinator v4 of `GROUP` through `addr`: the coordinator's node id,
/// if one is known.
fn coordinator(addr: &str) -> Option<i32> {
    let mut c = KafkaClient::connect_with_timeout(addr, "failover-test", Duration::from_secs(40));
    let mut req = FindCoordinatorRequest::default();
    req.key_type = 0;
    req.coordinator_keys = vec![StrBytes::from_static_str(GROUP)];
    let r: FindCoordinatorResponse = c.call(ApiKey::FindCoordinator, 4, &req);
    r.coordinators
        .first()
        .filter(|x| x.error_code == 0)
        .map(|x| x.node_id.0)
}

/// A simple commit (no member, generation -1) of `offset` for partition 0
/// of `TOPIC` through `addr`: the partition's error code.
fn commit(addr: &str, offset: i64) -> i16 {
    let mut c = KafkaClient::connect_with_timeout(addr, "failover-test", Duration::from_secs(40));
    let mut p = OffsetCommitRequestPartition::default();
    p.committed_offset = offset;
    p.committed_metadata = Some(StrBytes::from_string(format!("at {offset}")));
    let mut t = OffsetCommitRequestTopic::default();
    t.name = name(TOPIC);
    t.partitions = vec![p];
    let mut req = OffsetCommitRequest::default();
    req.group_id = GroupId(StrBytes::from_static_str(GROUP));
    req.generation_id_or_member_epoch = -1;
    req.topics = vec![t];
    let r: OffsetCommitResponse = c.call(ApiKey::OffsetCommit, 8, &req);
    r.topics[0].partitions[0].error_code
}

/// OffsetFetch v8 of partition 0 of `TOPIC` through `addr`: the group's
/// error code and the committed offset.
fn fetch(addr: &str) -> (i16, i64) {
    let mut c = KafkaClient::connect_with_timeout(addr, "failover-test", Duration::from_secs(40));
    let mut t = OffsetFetchRequestTopics::default();
    t.name = name(TOPIC);
    t.partition_indexes = vec![0];
    let mut g = OffsetFetchRequestGroup::default();
    g.group_id = GroupId(StrBytes::from_static_str(GROUP));
    g.topics = Some(vec![t]);
    let mut req = OffsetFetchRequest::default();
    req.groups = vec![g];
    req.require_stable = true;
    let r: OffsetFetchResponse = c.call(ApiKey::OffsetFetch, 8, &req);
    let g = &r.groups[0];
    let offset = g
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .map_or(-1, |p| p.committed_offset);
    (g.error_code, offset)
}

/// The committed offset of partition 0 of `TOPIC` in the node's document
/// of the group, if the document exists.
fn document_offset(node_dir: &Path) -> Option<i64> {
    let text =
        std::fs::read_to_string(node_dir.join("groups").join(format!("{GROUP}.json"))).ok()?;
    let doc: serde_json::Value = serde_json::from_str(&text).ok()?;
    assert_eq!(doc["group"], GROUP);
    doc["offsets"]
        .as_array()?
        .iter()
        .find(|o| o["topic"] == TOPIC && o["partition"] == 0)
        .and_then(|o| o["offset"].as_i64())
}

#[test]
fn committed_offsets_survive_the_loss_of_the_group_coordinator() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut c = Cluster::start_with(dir.path(), 3, 3, &["--offsets-topic-num-partitions", "3"]);
    c.leader();
    assert_eq!(create(&c.addr(1), TOPIC, 3, &[]), 0);

    // The first lookup creates __consumer_offsets, with three replicas.
    let first = eventually(Duration::from_secs(60), "a group coordinator", || {
        coordinator(&c.addr(1))
    });
    eventually(
        Duration::from_secs(60),
        "__consumer_offsets in sync on three",
        || {
            let s = shown(&c.addr(1), "__consumer_offsets");
            (s.2.len() == 3 && s.3.len() == 3).then_some(())
        },
    );

    // The coordinator named by node 1 may not have applied its own
    // leadership yet: NOT_COORDINATOR until it has, which clients retry.
    eventually(Duration::from_secs(30), "a first commit", || {
        (commit(&c.addr(first), 10) == 0).then_some(())
    });
    let mut last = 10;
    for offset in [20, 30] {
        assert_eq!(commit(&c.addr(first), offset), 0, "commit {offset}");
        last = offset;
    }
    assert_eq!(fetch(&c.addr(first)), (0, last));
    for id in 1..=3 {
        let node_dir = dir.path().join(format!("node-{id}"));
        eventually(
            Duration::from_secs(30),
            "the group's document on every node",
            || (document_offset(&node_dir) == Some(last)).then_some(()),
        );
    }

    // The coordinator dies; its partition's new leader takes the group over.
    c.nodes.remove(&first).expect("coordinator").kill();
    let t = Instant::now();
    let survivor = *c.nodes.keys().next().expect("a survivor");
    let (next, offset) = eventually(Duration::from_secs(60), "a new coordinator", || {
        let n = coordinator(&c.addr(survivor)).filter(|n| *n != first)?;
        let (e, offset) = fetch(&c.addr(n));
        (e == 0).then_some((n, offset))
    });
    println!(
        "group coordinator fail-over: {} ms from kill -9 to an answered OffsetFetch on node {next}",
        t.elapsed().as_millis()
    );
    assert_eq!(
        offset, last,
        "the new coordinator lost an acknowledged commit"
    );
    assert_eq!(commit(&c.addr(next), 40), 0);
    assert_eq!(fetch(&c.addr(next)), (0, 40));
    let other = *c
        .nodes
        .keys()
        .find(|id| **id != next)
        .expect("a third node");
    assert_eq!(commit(&c.addr(other), 50), 16, "NOT_COORDINATOR elsewhere");

    // The old coordinator comes back and catches up from the log.
    let back = c.spawn(first);
    c.nodes.insert(first, back);
    c.nodes.get_mut(&first).expect("restarted").wait_listening();
    let node_dir = dir.path().join(format!("node-{first}"));
    eventually(
        Duration::from_secs(60),
        "the restarted node's document",
        || (document_offset(&node_dir) == Some(40)).then_some(()),
    );
    assert_eq!(coordinator(&c.addr(first)), Some(next));
    assert_eq!(fetch(&c.addr(next)), (0, 40));
}

/// Produces one record of transactional producer `pid`/`epoch` (sequence 0)
/// of transaction `id` to partition 0 of `topic` through `addr`: the
/// partition's error code.
fn produce_transactional(addr: &str, id: &str, topic: &str, pid: i64, epoch: i16) -> i16 {
    let meta = es_test_support::batch::producer_meta(pid, epoch, 0, true);
    let mut batch = es_test_support::batch::KafkaBatch::new();
    batch.record(1_700_000_000_000, None, Some(b"in-txn"), &[], &meta);
    let mut pd = PartitionProduceData::default();
    pd.records = Some(batch.encode().into());
    let mut td = TopicProduceData::default();
    td.name = name(topic);
    td.partition_data = vec![pd];
    let mut req = ProduceRequest::default();
    req.transactional_id = Some(TransactionalId(StrBytes::from_string(id.to_string())));
    req.acks = -1;
    req.timeout_ms = 10_000;
    req.topic_data = vec![td];
    let mut c = KafkaClient::connect_with_timeout(addr, "failover-test", Duration::from_secs(40));
    let r: ProduceResponse = c.call(ApiKey::Produce, 11, &req);
    r.responses[0].partition_responses[0].error_code
}

#[test]
fn a_transactional_batch_is_refused_while_its_coordinator_is_unavailable() {
    const NOT_ENOUGH_REPLICAS: i16 = 19;
    let dir = tempfile::tempdir().expect("tmp");
    let mut c = Cluster::start(dir.path(), 3, 3);
    c.leader();
    // The transaction's coordinator is node 3 alone; the data partition's
    // leader is node 1.
    assert_eq!(
        create_assigned(&c.addr(1), "__transaction_state", 1, &[3], &[]),
        0
    );
    assert_eq!(create_assigned(&c.addr(1), "data", 1, &[1], &[]), 0);
    let init = eventually(Duration::from_secs(30), "InitProducerId on node 3", || {
        let mut cl =
            KafkaClient::connect_with_timeout(&c.addr(3), "failover-test", Duration::from_secs(40));
        let mut req = InitProducerIdRequest::default();
        req.transactional_id = Some(TransactionalId(StrBytes::from_static_str("tx")));
        req.transaction_timeout_ms = 60_000;
        req.producer_id = ProducerId(-1);
        req.producer_epoch = -1;
        let r: InitProducerIdResponse = cl.call(ApiKey::InitProducerId, 4, &req);
        (r.error_code == 0).then_some(r)
    });
    let (pid, epoch) = (init.producer_id.0, init.producer_epoch);
    let mut cl = KafkaClient::connect(&c.addr(3), "failover-test");
    let mut t = AddPartitionsToTxnTopic::default();
    t.name = name("data");
    t.partitions = vec![0];
    let mut req = AddPartitionsToTxnRequest::default();
    req.v3_and_below_transactional_id = TransactionalId(StrBytes::from_static_str("tx"));
    req.v3_and_below_producer_id = ProducerId(pid);
    req.v3_and_below_producer_epoch = epoch;
    req.v3_and_below_topics = vec![t];
    let r: AddPartitionsToTxnResponse = cl.call(ApiKey::AddPartitionsToTxn, 3, &req);
    assert_eq!(
        r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
        0
    );

    c.nodes.remove(&3).expect("node 3").kill();
    eventually(
        Duration::from_secs(60),
        "the coordinator's partition without a leader",
        || (shown(&c.addr(1), "__transaction_state").0 < 0).then_some(()),
    );
    assert_eq!(
        produce_transactional(&c.addr(1), "tx", "data", pid, epoch),
        NOT_ENOUGH_REPLICAS
    );
    assert!(
        read_all(&c.addr(1), "data").is_empty(),
        "an unverified batch was appended"
    );
}
