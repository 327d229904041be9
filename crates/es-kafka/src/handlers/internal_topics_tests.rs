//! Wire-level tests of `__consumer_offsets` as one topic the whole broker
//! agrees on: requests encoded with kafka-protocol go through the real
//! dispatcher ([`crate::handlers::handle`]) of a broker on a temporary
//! directory, at every version es advertises where the answer differs by
//! version. What Kafka 4.4 answers was checked against it: created by the
//! first group coordinator lookup (or by Metadata auto-creation, or by a
//! client's CreateTopics before that), TOPIC_ALREADY_EXISTS afterwards,
//! deletable, INVALID_TOPIC_EXCEPTION for Produce and DeleteRecords, and
//! readable (ListOffsets, Fetch, OffsetFetch) without errors.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::consumer_group_heartbeat_response::Assignment;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_topic_partitions_request::TopicRequest;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::metadata_response::MetadataResponseTopic;
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use uuid::Uuid;

use crate::errors::{ResponseError, NONE};
use crate::handlers::wire_client::{c, call, open, s, tn};
use crate::topics::CONSUMER_OFFSETS_TOPIC as OFFSETS;
use crate::versions::advertised;
use crate::Broker;
use es_storage::record::RecordMeta;
use es_test_support::batch::KafkaBatch;

fn versions(key: ApiKey) -> std::ops::RangeInclusive<i16> {
    let a = advertised(key).unwrap_or_else(|| panic!("{key:?} is advertised"));
    a.min..=a.max
}

/// Closes the broker as shutdown does, so the directory can be opened again.
async fn close(b: Arc<Broker>) {
    tokio::task::spawn_blocking(move || b.close())
        .await
        .expect("join")
        .expect("close");
}

/// Metadata naming one topic (null `topics` when `name` is `None`: every topic).
async fn metadata(
    b: &Arc<Broker>,
    v: i16,
    name: Option<&str>,
    auto_create: bool,
) -> Vec<MetadataResponseTopic> {
    let mut req = MetadataRequest::default();
    req.topics = match name {
        // v0 has no null: an empty list asks for every topic.
        None if v == 0 => Some(Vec::new()),
        None => None,
        Some(n) => {
            let mut t = MetadataRequestTopic::default();
            t.name = Some(tn(n));
            Some(vec![t])
        }
    };
    if v >= 4 {
        req.allow_auto_topic_creation = auto_create;
    }
    let r: MetadataResponse = call(b, ApiKey::Metadata, v, &req).await;
    r.topics
}

fn named<'a>(topics: &'a [MetadataResponseTopic], name: &str) -> Option<&'a MetadataResponseTopic> {
    topics
        .iter()
        .find(|t| t.name.as_ref().map(|n| n.0.as_str()) == Some(name))
}

/// FindCoordinator for a group at version `v`: the error code.
async fn find_group_coordinator(b: &Arc<Broker>, v: i16, group: &str) -> i16 {
    let mut req = FindCoordinatorRequest::default();
    if v >= 4 {
        req.coordinator_keys = vec![s(group)];
    } else {
        req.key = s(group);
    }
    let r: FindCoordinatorResponse = call(b, ApiKey::FindCoordinator, v, &req).await;
    if v >= 4 {
        assert_eq!(r.coordinators.len(), 1);
        r.coordinators[0].error_code
    } else {
        r.error_code
    }
}

/// One valid Kafka batch of one record.
fn batch() -> Bytes {
    let mut b = KafkaBatch::new();
    b.record(
        1_700_000_000_000,
        None,
        Some(b"v"),
        &[],
        &RecordMeta::default(),
    );
    Bytes::from(b.encode())
}

/// Produce one batch to partition 0, by name (v3-12) or by id (v13).
async fn produce(b: &Arc<Broker>, v: i16, name: &str, id: Uuid) -> i16 {
    let mut pd = PartitionProduceData::default();
    pd.index = 0;
    pd.records = Some(batch());
    let mut td = TopicProduceData::default();
    if v >= 13 {
        td.topic_id = id;
    } else {
        td.name = tn(name);
    }
    td.partition_data = vec![pd];
    let mut req = ProduceRequest::default();
    req.acks = -1;
    req.timeout_ms = 10_000;
    req.topic_data = vec![td];
    let r: ProduceResponse = call(b, ApiKey::Produce, v, &req).await;
    r.responses[0].partition_responses[0].error_code
}

/// A KIP-848 member's first heartbeat (v0 has no regex): its assignment.
async fn join_kip848(
    b: &Arc<Broker>,
    v: i16,
    group: &str,
    names: &[&str],
    regex: Option<&str>,
) -> Assignment {
    let mut req = ConsumerGroupHeartbeatRequest::default();
    req.group_id = GroupId(s(group));
    req.member_id = s(&format!("member-{group}"));
    req.rebalance_timeout_ms = 30_000;
    req.subscribed_topic_names = Some(names.iter().map(|n| tn(n)).collect());
    req.subscribed_topic_regex = regex.map(s);
    req.topic_partitions = Some(Vec::new());
    let r: ConsumerGroupHeartbeatResponse = call(b, ApiKey::ConsumerGroupHeartbeat, v, &req).await;
    assert_eq!(r.error_code, NONE, "v{v}: {:?}", r.error_message);
    r.assignment.expect("an assignment")
}

#[tokio::test(flavor = "multi_thread")]
async fn consumer_offsets_is_one_topic_with_one_id_once_a_group_coordinator_is_looked_up() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = open(dir.path()).await;
    b.create_topic("t", 1, BTreeMap::new(), false)
        .await
        .expect("create t");
    let t_id = b.topic("t").expect("t").id;

    // Not there before: not listed, unknown by name (yet flagged internal,
    // as Kafka flags it by name), and neither Metadata without
    // auto-creation nor Produce creates it.
    for v in versions(ApiKey::Metadata) {
        assert!(named(&metadata(&b, v, None, false).await, OFFSETS).is_none());
    }
    let before = metadata(&b, 12, Some(OFFSETS), false).await;
    assert_eq!(
        before[0].error_code,
        c(ResponseError::UnknownTopicOrPartition)
    );
    assert!(before[0].is_internal);
    assert_eq!(
        produce(&b, 9, OFFSETS, Uuid::nil()).await,
        c(ResponseError::UnknownTopicOrPartition)
    );
    assert!(b.topic(OFFSETS).is_none());

    // Every FindCoordinator version for a group creates it once.
    for v in versions(ApiKey::FindCoordinator) {
        assert_eq!(find_group_coordinator(&b, v, "g").await, NONE, "v{v}");
    }
    let topic = b.topic(OFFSETS).expect("created by FindCoordinator");
    let id = topic.id;
    assert!(!id.is_nil());
    assert_eq!(topic.partition_count(), 1);

    // Metadata, every version: listed with every topic and by name, flagged
    // internal (v1+), with its id (v10+) and one partition.
    for v in versions(ApiKey::Metadata) {
        let all = metadata(&b, v, None, false).await;
        let by_name = metadata(&b, v, Some(OFFSETS), false).await;
        for t in [named(&all, OFFSETS), by_name.first()] {
            let t = t.unwrap_or_else(|| panic!("v{v}: listed"));
            assert_eq!(t.error_code, NONE, "v{v}");
            assert_eq!(t.is_internal, v >= 1, "v{v}");
            assert_eq!(t.topic_id, if v >= 10 { id } else { Uuid::nil() }, "v{v}");
            assert_eq!(t.partitions.len(), 1, "v{v}");
        }
        assert!(!named(&all, "t").expect("t").is_internal, "v{v}");
    }
    // ... and by id (v12+, null name).
    let mut req = MetadataRequest::default();
    let mut mt = MetadataRequestTopic::default();
    mt.name = None;
    mt.topic_id = id;
    req.topics = Some(vec![mt]);
    let r: MetadataResponse = call(&b, ApiKey::Metadata, 12, &req).await;
    assert_eq!(r.topics[0].error_code, NONE);
    assert_eq!(
        r.topics[0].name.as_ref().map(|n| n.0.as_str()),
        Some(OFFSETS)
    );

    // DescribeTopicPartitions, by name and among every topic.
    for topics in [vec![OFFSETS], vec![]] {
        let mut req = DescribeTopicPartitionsRequest::default();
        req.response_partition_limit = 100;
        req.topics = topics
            .iter()
            .map(|n| {
                let mut t = TopicRequest::default();
                t.name = tn(n);
                t
            })
            .collect();
        let r: DescribeTopicPartitionsResponse =
            call(&b, ApiKey::DescribeTopicPartitions, 0, &req).await;
        let t = r
            .topics
            .iter()
            .find(|t| t.name.as_ref().map(|n| n.0.as_str()) == Some(OFFSETS))
            .expect("described");
        assert_eq!((t.error_code, t.topic_id, t.is_internal), (NONE, id, true));
        assert_eq!(t.partitions.len(), 1);
    }

    // A KIP-848 regex that matches it gets it assigned, with the same id,
    // next to a plain topic name (v0 has no regex: named, it is assigned too).
    for v in versions(ApiKey::ConsumerGroupHeartbeat) {
        let a = if v >= 1 {
            join_kip848(&b, v, &format!("cg{v}"), &["t"], Some("__consumer_offsets")).await
        } else {
            join_kip848(&b, v, &format!("cg{v}"), &["t", OFFSETS], None).await
        };
        let mut got: Vec<(Uuid, Vec<i32>)> = a
            .topic_partitions
            .iter()
            .map(|t| (t.topic_id, t.partitions.clone()))
            .collect();
        got.sort();
        let mut want = vec![(id, vec![0]), (t_id, vec![0])];
        want.sort();
        assert_eq!(got, want, "v{v}");
    }
    // A regex that matches internal topics and others: Kafka does not skip
    // internal topics either.
    let a = join_kip848(&b, 1, "cg-all", &[], Some(".*")).await;
    assert_eq!(a.topic_partitions.len(), 2);

    // A consumer assigned to it reads it: ListOffsets, Fetch and OffsetFetch
    // answer without errors (its log is empty: offsets live elsewhere).
    for v in versions(ApiKey::ListOffsets) {
        for ts in [-2i64, -1] {
            let mut p = ListOffsetsPartition::default();
            p.partition_index = 0;
            p.current_leader_epoch = -1;
            p.timestamp = ts;
            let mut t = ListOffsetsTopic::default();
            t.name = tn(OFFSETS);
            t.partitions = vec![p];
            let mut req = ListOffsetsRequest::default();
            req.replica_id = BrokerId(-1);
            req.topics = vec![t];
            let r: ListOffsetsResponse = call(&b, ApiKey::ListOffsets, v, &req).await;
            let p = &r.topics[0].partitions[0];
            assert_eq!((p.error_code, p.offset), (NONE, 0), "v{v} ts {ts}");
        }
    }
    for v in versions(ApiKey::Fetch) {
        let mut fp = FetchPartition::default();
        fp.partition = 0;
        fp.fetch_offset = 0;
        fp.partition_max_bytes = 1 << 20;
        let mut ft = FetchTopic::default();
        if v >= 13 {
            ft.topic_id = id;
        } else {
            ft.topic = tn(OFFSETS);
        }
        ft.partitions = vec![fp];
        let mut req = FetchRequest::default();
        req.max_wait_ms = 0;
        req.max_bytes = 1 << 20;
        req.topics = vec![ft];
        let r: FetchResponse = call(&b, ApiKey::Fetch, v, &req).await;
        assert_eq!(r.error_code, NONE, "v{v}");
        let p = &r.responses[0].partitions[0];
        assert_eq!((p.error_code, p.high_watermark), (NONE, 0), "v{v}");
        assert!(p.records.as_ref().is_none_or(|r| r.is_empty()), "v{v}");
    }
    for v in versions(ApiKey::OffsetFetch) {
        let mut req = OffsetFetchRequest::default();
        let (error, offset) = if v >= 8 {
            let mut t = OffsetFetchRequestTopics::default();
            t.name = tn(OFFSETS);
            t.partition_indexes = vec![0];
            let mut g = OffsetFetchRequestGroup::default();
            g.group_id = GroupId(s("cg1"));
            g.topics = Some(vec![t]);
            req.groups = vec![g];
            let r: OffsetFetchResponse = call(&b, ApiKey::OffsetFetch, v, &req).await;
            let p = &r.groups[0].topics[0].partitions[0];
            (p.error_code, p.committed_offset)
        } else {
            let mut t = OffsetFetchRequestTopic::default();
            t.name = tn(OFFSETS);
            t.partition_indexes = vec![0];
            req.group_id = GroupId(s("cg1"));
            req.topics = Some(vec![t]);
            let r: OffsetFetchResponse = call(&b, ApiKey::OffsetFetch, v, &req).await;
            let p = &r.topics[0].partitions[0];
            (p.error_code, p.committed_offset)
        };
        assert_eq!((error, offset), (NONE, -1), "v{v}");
    }

    // Clients cannot write it: Produce (by name or by id) and DeleteRecords
    // answer INVALID_TOPIC_EXCEPTION; CreateTopics TOPIC_ALREADY_EXISTS; a
    // transaction (v0-3, from clients) cannot add it.
    for v in 3..=13 {
        assert_eq!(
            produce(&b, v, OFFSETS, id).await,
            c(ResponseError::InvalidTopicException),
            "v{v}"
        );
    }
    assert_eq!(
        b.topic(OFFSETS).expect("offsets").partitions()[0]
            .log
            .high_watermark(),
        0
    );
    for v in versions(ApiKey::DeleteRecords) {
        let mut p = DeleteRecordsPartition::default();
        p.partition_index = 0;
        p.offset = -1;
        let mut t = DeleteRecordsTopic::default();
        t.name = tn(OFFSETS);
        t.partitions = vec![p];
        let mut req = DeleteRecordsRequest::default();
        req.topics = vec![t];
        let r: DeleteRecordsResponse = call(&b, ApiKey::DeleteRecords, v, &req).await;
        let p = &r.topics[0].partitions[0];
        assert_eq!(
            p.error_code,
            c(ResponseError::InvalidTopicException),
            "v{v}"
        );
    }
    for v in versions(ApiKey::CreateTopics) {
        let mut t = CreatableTopic::default();
        t.name = tn(OFFSETS);
        t.num_partitions = 3;
        t.replication_factor = 1;
        let mut req = CreateTopicsRequest::default();
        req.timeout_ms = 5_000;
        req.topics = vec![t];
        let r: CreateTopicsResponse = call(&b, ApiKey::CreateTopics, v, &req).await;
        assert_eq!(
            r.topics[0].error_code,
            c(ResponseError::TopicAlreadyExists),
            "v{v}"
        );
    }
    let mut at = AddPartitionsToTxnTopic::default();
    at.name = tn(OFFSETS);
    at.partitions = vec![0];
    let mut plain = AddPartitionsToTxnTopic::default();
    plain.name = tn("t");
    plain.partitions = vec![0];
    let mut req = AddPartitionsToTxnRequest::default();
    req.v3_and_below_transactional_id = TransactionalId(s("tx"));
    req.v3_and_below_producer_id = ProducerId(0);
    req.v3_and_below_topics = vec![at, plain];
    let r: AddPartitionsToTxnResponse = call(&b, ApiKey::AddPartitionsToTxn, 3, &req).await;
    let codes: Vec<i16> = r
        .results_by_topic_v3_and_below
        .iter()
        .map(|t| t.results_by_partition[0].partition_error_code)
        .collect();
    assert_eq!(
        codes,
        vec![
            c(ResponseError::TopicAuthorizationFailed),
            c(ResponseError::OperationNotAttempted)
        ]
    );

    // Kafka's configs for it show as topic overrides; the cleaners visit
    // its empty log without harm (compaction runs, retention does not).
    let mut res = DescribeConfigsResource::default();
    res.resource_type = 2;
    res.resource_name = s(OFFSETS);
    res.configuration_keys = Some(vec![s("cleanup.policy"), s("segment.bytes")]);
    let mut req = DescribeConfigsRequest::default();
    req.resources = vec![res];
    let r: DescribeConfigsResponse = call(&b, ApiKey::DescribeConfigs, 4, &req).await;
    let got: Vec<(String, String)> = r.results[0]
        .configs
        .iter()
        .map(|e| {
            (
                e.name.to_string(),
                e.value.as_deref().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("cleanup.policy".to_string(), "compact".to_string()),
            ("segment.bytes".to_string(), "104857600".to_string()),
        ]
    );
    let (bb, topic) = (b.clone(), b.topic(OFFSETS).expect("offsets"));
    tokio::task::spawn_blocking(move || {
        let slot = topic.partition(0).expect("partition 0");
        assert!(bb.compact(&topic, &slot, 0).expect("compact").is_some());
        assert!(bb
            .enforce_retention(&topic, &slot, 0)
            .expect("retention")
            .is_none());
    })
    .await
    .expect("join");

    // The id is persisted: a restarted broker reports the same one.
    close(b).await;
    let b = open(dir.path()).await;
    assert_eq!(b.topic(OFFSETS).expect("reloaded").id, id);
    let t = metadata(&b, 12, Some(OFFSETS), false).await;
    assert_eq!(
        (t[0].error_code, t[0].topic_id, t[0].is_internal),
        (NONE, id, true)
    );
    assert_eq!(find_group_coordinator(&b, 6, "g").await, NONE);
    assert_eq!(b.topic(OFFSETS).expect("still there").id, id);
    close(b).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn consumer_offsets_is_created_deleted_and_created_again_as_on_kafka() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = open(dir.path()).await;

    // Metadata with auto-creation creates it as FindCoordinator would.
    let t = metadata(&b, 12, Some(OFFSETS), true).await;
    assert_eq!((t[0].error_code, t[0].is_internal), (NONE, true));
    let first = b.topic(OFFSETS).expect("auto-created");
    assert_eq!(t[0].topic_id, first.id);
    assert_eq!(first.partition_count(), 1);
    assert!(first.config().cleanup_policy().compact);

    // DeleteTopics deletes it, as Kafka 4.4 does; it is gone everywhere.
    let mut d = DeleteTopicState::default();
    d.name = Some(tn(OFFSETS));
    let mut req = DeleteTopicsRequest::default();
    req.timeout_ms = 5_000;
    req.topics = vec![d];
    let r: DeleteTopicsResponse = call(&b, ApiKey::DeleteTopics, 6, &req).await;
    assert_eq!(r.responses[0].error_code, NONE);
    assert!(b.topic(OFFSETS).is_none());
    let t = metadata(&b, 12, Some(OFFSETS), false).await;
    assert_eq!(t[0].error_code, c(ResponseError::UnknownTopicOrPartition));
    assert_eq!(
        produce(&b, 13, OFFSETS, first.id).await,
        c(ResponseError::UnknownTopicId)
    );

    // A client may create it itself, with the settings it asks for (Kafka
    // only closes `__cluster_metadata` to CreateTopics); it is internal all
    // the same, and a group coordinator lookup keeps it as it is.
    let mut ct = CreatableTopic::default();
    ct.name = tn(OFFSETS);
    ct.num_partitions = 3;
    ct.replication_factor = 1;
    let mut req = CreateTopicsRequest::default();
    req.timeout_ms = 5_000;
    req.topics = vec![ct];
    let r: CreateTopicsResponse = call(&b, ApiKey::CreateTopics, 7, &req).await;
    assert_eq!(
        r.topics[0].error_code, NONE,
        "{:?}",
        r.topics[0].error_message
    );
    let second = b.topic(OFFSETS).expect("created by the client");
    assert_ne!(second.id, first.id);
    assert_eq!(r.topics[0].topic_id, second.id);
    assert_eq!(find_group_coordinator(&b, 4, "g").await, NONE);
    let t = metadata(&b, 12, Some(OFFSETS), false).await;
    assert_eq!((t[0].topic_id, t[0].is_internal), (second.id, true));
    assert_eq!(t[0].partitions.len(), 3);
    let a = join_kip848(&b, 1, "cg", &[], Some("__consumer_offsets")).await;
    assert_eq!(a.topic_partitions.len(), 1);
    assert_eq!(a.topic_partitions[0].topic_id, second.id);
    assert_eq!(a.topic_partitions[0].partitions, vec![0, 1, 2]);

    // Deleted again, the next group coordinator lookup creates it anew.
    b.delete_topic(OFFSETS).await.expect("delete");
    assert_eq!(find_group_coordinator(&b, 0, "g").await, NONE);
    let third = b.topic(OFFSETS).expect("created again");
    assert!(third.id != first.id && third.id != second.id);
    assert_eq!(third.partition_count(), 1);

    // `__cluster_metadata` is the one name CreateTopics refuses, with
    // Kafka's code and message.
    let mut ct = CreatableTopic::default();
    ct.name = tn("__cluster_metadata");
    ct.num_partitions = 1;
    ct.replication_factor = 1;
    let mut req = CreateTopicsRequest::default();
    req.timeout_ms = 5_000;
    req.topics = vec![ct];
    let r: CreateTopicsResponse = call(&b, ApiKey::CreateTopics, 7, &req).await;
    assert_eq!(r.topics[0].error_code, c(ResponseError::InvalidRequest));
    assert_eq!(
        r.topics[0].error_message.as_deref(),
        Some("Creation of internal topic __cluster_metadata is prohibited.")
    );
    assert!(b.topic("__cluster_metadata").is_none());
    close(b).await;
}
