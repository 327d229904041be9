//! Coordinator placement on a single broker, through the real dispatcher:
//! whatever the coordinator topics' partition counts, every group and
//! transactional id is coordinated here, before and after their topics
//! exist, and `__transaction_state` is created as Kafka creates it. (How
//! keys spread over a cluster is tested with real processes in es-broker's
//! `tests/cluster.rs`.)

use std::sync::Arc;

use kafka_protocol::messages::*;

use crate::broker::{key_partition, Broker, BrokerConfig};
use crate::errors::{ResponseError, NONE};
use crate::handlers::wire_client::{c, call, open_with, s};
use crate::topics::{
    is_internal, transaction_state_overrides, CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC,
};

/// FindCoordinator v4 for `keys` of `key_type`: (error, node, port) each.
async fn find(b: &Arc<Broker>, key_type: i8, keys: &[&str]) -> Vec<(i16, i32, i32)> {
    let mut req = FindCoordinatorRequest::default();
    req.key_type = key_type;
    req.coordinator_keys = keys.iter().map(|k| s(k)).collect();
    let r: FindCoordinatorResponse = call(b, ApiKey::FindCoordinator, 4, &req).await;
    r.coordinators
        .iter()
        .map(|c| (c.error_code, c.node_id.0, c.port))
        .collect()
}

async fn init_producer_id(b: &Arc<Broker>, id: &str) -> InitProducerIdResponse {
    let mut req = InitProducerIdRequest::default();
    req.transactional_id = Some(TransactionalId(s(id)));
    req.transaction_timeout_ms = 60_000;
    req.producer_id = ProducerId(-1);
    req.producer_epoch = -1;
    call(b, ApiKey::InitProducerId, 4, &req).await
}

async fn heartbeat(b: &Arc<Broker>, group: &str) -> i16 {
    let mut req = HeartbeatRequest::default();
    req.group_id = GroupId(s(group));
    req.member_id = s("nobody");
    req.generation_id = 1;
    let r: HeartbeatResponse = call(b, ApiKey::Heartbeat, 4, &req).await;
    r.error_code
}

#[tokio::test(flavor = "multi_thread")]
async fn a_single_broker_coordinates_every_key_at_any_partition_count() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut cfg = BrokerConfig::new(dir.path().join("data"), "127.0.0.1:9092");
    cfg.offsets_topic_partitions = 3;
    cfg.transaction_state_partitions = 4;
    let b = open_with(cfg).await;
    let groups = ["g0", "g1", "g2", "g3", "g4", "g5"];
    let ids = ["t0", "t1", "t2", "t3", "t4", "t5"];
    // The keys land on more than one partition, all led here.
    let spread = |n| {
        let mut ps: Vec<i32> = groups.iter().map(|g| key_partition(g, n)).collect();
        ps.dedup();
        ps.len()
    };
    assert!(spread(3) > 1);

    // Before any lookup: no coordinator topic, yet every key is served here
    // (the coordinators answer, not NOT_COORDINATOR).
    assert!(b.topic(CONSUMER_OFFSETS_TOPIC).is_none());
    assert!(b.topic(TRANSACTION_STATE_TOPIC).is_none());
    assert_eq!(heartbeat(&b, "g0").await, c(ResponseError::UnknownMemberId));
    let first = init_producer_id(&b, "early").await;
    assert_eq!(first.error_code, NONE);
    assert!(first.producer_id.0 >= 0);

    // FindCoordinator creates each topic with its partition count and names
    // this broker for every key.
    for found in find(&b, 0, &groups).await {
        assert_eq!(found, (NONE, 0, 9092));
    }
    for found in find(&b, 1, &ids).await {
        assert_eq!(found, (NONE, 0, 9092));
    }
    let offsets = b.topic(CONSUMER_OFFSETS_TOPIC).expect("offsets topic");
    assert_eq!(offsets.partition_count(), 3);
    let txn = b.topic(TRANSACTION_STATE_TOPIC).expect("transaction topic");
    assert_eq!(txn.partition_count(), 4);
    assert!(is_internal(TRANSACTION_STATE_TOPIC));
    // Kafka's configs for it, as topic overrides.
    assert_eq!(txn.config().overrides(), &transaction_state_overrides());
    assert_eq!(
        txn.config()
            .overrides()
            .get("cleanup.policy")
            .map(String::as_str),
        Some("compact")
    );

    // After: still served here, on every partition.
    for g in groups {
        assert_eq!(
            heartbeat(&b, g).await,
            c(ResponseError::UnknownMemberId),
            "{g}"
        );
    }
    for id in ids {
        let r = init_producer_id(&b, id).await;
        assert_eq!(r.error_code, NONE, "{id}");
    }

    // DescribeTransactions names the offsets partition of a transaction's
    // group over the topic's real partition count.
    let r = init_producer_id(&b, "with-offsets").await;
    let mut add = AddOffsetsToTxnRequest::default();
    add.transactional_id = TransactionalId(s("with-offsets"));
    add.producer_id = r.producer_id;
    add.producer_epoch = r.producer_epoch;
    add.group_id = GroupId(s("g1"));
    let added: AddOffsetsToTxnResponse = call(&b, ApiKey::AddOffsetsToTxn, 3, &add).await;
    assert_eq!(added.error_code, NONE);
    let mut req = DescribeTransactionsRequest::default();
    req.transactional_ids = vec![TransactionalId(s("with-offsets"))];
    let d: DescribeTransactionsResponse = call(&b, ApiKey::DescribeTransactions, 0, &req).await;
    let st = &d.transaction_states[0];
    assert_eq!(st.error_code, NONE);
    let topic = st
        .topics
        .iter()
        .find(|t| t.topic.0.as_str() == CONSUMER_OFFSETS_TOPIC)
        .expect("the offsets topic in the transaction");
    assert_eq!(topic.partitions, vec![key_partition("g1", 3)]);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_transaction_topic_is_created_once_by_lookups_or_auto_creation() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = open_with(BrokerConfig::new(dir.path().join("data"), "127.0.0.1:9092")).await;
    // Metadata auto-creation gives it the coordinator's settings too.
    let t = b
        .get_or_create(TRANSACTION_STATE_TOPIC, true)
        .await
        .expect("auto-created");
    assert_eq!(t.partition_count(), 1);
    assert_eq!(t.config().overrides(), &transaction_state_overrides());
    for found in find(&b, 1, &["a", "b"]).await {
        assert_eq!(found, (NONE, 0, 9092));
    }
    assert_eq!(b.topic(TRANSACTION_STATE_TOPIC).map(|x| x.id), Some(t.id));
}
