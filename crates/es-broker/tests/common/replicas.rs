//! Helpers of the replication tests (tests/replication.rs,
//! tests/reassignment.rs): creating a topic, producing with acks=all,
//! reading back, deleting, what Metadata shows of a partition, and the on-disk log
//! bytes of a replica.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use es_test_support::wire::KafkaClient;
use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::RecordBatchDecoder;

pub fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

/// Creates `topic` (one partition, `rf` replicas, `configs`) through `addr`.
pub fn create(addr: &str, topic: &str, rf: i16, configs: &[(&str, &str)]) -> i16 {
    create_assigned(addr, topic, rf, &[], configs)
}

/// Creates `topic` through `addr`: one partition with `rf` replicas, or,
/// when `assignment` is not empty, one partition on those brokers.
pub fn create_assigned(
    addr: &str,
    topic: &str,
    rf: i16,
    assignment: &[i32],
    configs: &[(&str, &str)],
) -> i16 {
    let mut c = KafkaClient::connect_with_timeout(addr, "repl-test", Duration::from_secs(40));
    let mut t = CreatableTopic::default();
    t.name = name(topic);
    if assignment.is_empty() {
        t.num_partitions = 1;
        t.replication_factor = rf;
    } else {
        t.num_partitions = -1;
        t.replication_factor = -1;
        let mut a = CreatableReplicaAssignment::default();
        a.partition_index = 0;
        a.broker_ids = assignment.iter().copied().map(BrokerId).collect();
        t.assignments = vec![a];
    }
    t.configs = configs
        .iter()
        .map(|(k, v)| {
            let mut x = CreatableTopicConfig::default();
            x.name = StrBytes::from_string(k.to_string());
            x.value = Some(StrBytes::from_string(v.to_string()));
            x
        })
        .collect();
    let mut req = CreateTopicsRequest::default();
    req.topics = vec![t];
    req.timeout_ms = 30_000;
    let r: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 7, &req);
    r.topics[0].error_code
}

/// Deletes `topic` through `addr` (DeleteTopics v4): the topic's error code.
pub fn delete(addr: &str, topic: &str) -> i16 {
    let mut c = KafkaClient::connect_with_timeout(addr, "repl-test", Duration::from_secs(40));
    let mut req = DeleteTopicsRequest::default();
    req.topic_names = vec![name(topic)];
    req.timeout_ms = 30_000;
    let r: DeleteTopicsResponse = c.call(ApiKey::DeleteTopics, 4, &req);
    r.responses[0].error_code
}

/// Sets one config of `topic` through `addr` (IncrementalAlterConfigs v1,
/// SET): the resource's error code.
pub fn alter_topic(addr: &str, topic: &str, key: &str, value: &str) -> i16 {
    let mut c = KafkaClient::connect(addr, "repl-test");
    let mut cfg = incremental_alter_configs_request::AlterableConfig::default();
    cfg.name = StrBytes::from_string(key.to_string());
    cfg.config_operation = 0;
    cfg.value = Some(StrBytes::from_string(value.to_string()));
    let mut res = incremental_alter_configs_request::AlterConfigsResource::default();
    res.resource_type = 2;
    res.resource_name = StrBytes::from_string(topic.to_string());
    res.configs = vec![cfg];
    let mut req = IncrementalAlterConfigsRequest::default();
    req.resources = vec![res];
    let r: IncrementalAlterConfigsResponse = c.call(ApiKey::IncrementalAlterConfigs, 1, &req);
    r.responses[0].error_code
}

/// AlterPartitionReassignments (v0) of partition 0 of `topic` to `target`:
/// the partition's error code.
pub fn reassign(addr: &str, topic: &str, target: &[i32]) -> i16 {
    let mut c = KafkaClient::connect_with_timeout(addr, "reassign-test", Duration::from_secs(40));
    let mut p = ReassignablePartition::default();
    p.partition_index = 0;
    p.replicas = Some(target.iter().copied().map(BrokerId).collect());
    let mut t = ReassignableTopic::default();
    t.name = name(topic);
    t.partitions = vec![p];
    let mut req = AlterPartitionReassignmentsRequest::default();
    req.timeout_ms = 30_000;
    req.topics = vec![t];
    let r: AlterPartitionReassignmentsResponse =
        c.call(ApiKey::AlterPartitionReassignments, 0, &req);
    assert_eq!(r.error_code, 0, "{r:?}");
    r.responses[0].partitions[0].error_code
}

/// Partition 0 of `topic` as Metadata (v12) from `addr` shows it:
/// (leader, leader epoch, replicas, isr); (-1, -1, [], []) while the node
/// does not know the partition.
pub fn shown(addr: &str, topic: &str) -> (i32, i32, Vec<i32>, Vec<i32>) {
    let mut c = KafkaClient::connect(addr, "repl-test");
    let mut t = metadata_request::MetadataRequestTopic::default();
    t.name = Some(name(topic));
    let mut req = MetadataRequest::default();
    req.topics = Some(vec![t]);
    let r: MetadataResponse = c.call(ApiKey::Metadata, 12, &req);
    let Some(p) = r.topics.first().and_then(|t| t.partitions.first()) else {
        return (-1, -1, Vec::new(), Vec::new());
    };
    let ids = |v: &[BrokerId]| v.iter().map(|b| b.0).collect::<Vec<i32>>();
    (
        p.leader_id.0,
        p.leader_epoch,
        ids(&p.replica_nodes),
        ids(&p.isr_nodes),
    )
}

/// Produces one record, acks=all, to partition 0 of `topic` through `addr`:
/// (error, offset).
pub fn produce(addr: &str, topic: &str, value: &str) -> (i16, i64) {
    let r = produce_to(addr, topic, 0, value);
    let p = &r.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// Produces one record, acks=all, to `topic`/`partition` through `addr`
/// (Produce v11): the whole answer.
pub fn produce_to(addr: &str, topic: &str, partition: i32, value: &str) -> ProduceResponse {
    let meta = es_storage::record::RecordMeta::default();
    produce_with(addr, topic, partition, value, &meta)
}

/// As [`produce_to`], the record's producer fields (`meta`) given.
pub fn produce_with(
    addr: &str,
    topic: &str,
    partition: i32,
    value: &str,
    meta: &es_storage::record::RecordMeta,
) -> ProduceResponse {
    let mut batch = es_test_support::batch::KafkaBatch::new();
    batch.record(1_700_000_000_000, None, Some(value.as_bytes()), &[], meta);
    produce_batch(addr, topic, partition, batch.encode())
}

/// Produces the Kafka batch `records`, acks=all, to `topic`/`partition`
/// through `addr` (Produce v11): the whole answer.
pub fn produce_batch(addr: &str, topic: &str, partition: i32, records: Vec<u8>) -> ProduceResponse {
    let mut pd = PartitionProduceData::default();
    pd.index = partition;
    pd.records = Some(records.into());
    let mut td = TopicProduceData::default();
    td.name = name(topic);
    td.partition_data = vec![pd];
    let mut req = ProduceRequest::default();
    req.acks = -1;
    req.timeout_ms = 30_000;
    req.topic_data = vec![td];
    let mut c = KafkaClient::connect_with_timeout(addr, "repl-test", Duration::from_secs(40));
    c.call(ApiKey::Produce, 11, &req)
}

/// Every record of partition 0 of `topic` from `addr` (the leader), by
/// offset.
pub fn read_all(addr: &str, topic: &str) -> BTreeMap<i64, String> {
    let mut c = KafkaClient::connect(addr, "repl-test");
    let mut out = BTreeMap::new();
    let mut offset = 0i64;
    loop {
        let mut p = FetchPartition::default();
        p.partition = 0;
        p.fetch_offset = offset;
        p.partition_max_bytes = 1 << 20;
        p.current_leader_epoch = -1;
        p.last_fetched_epoch = -1;
        let mut t = FetchTopic::default();
        t.topic = name(topic);
        t.partitions = vec![p];
        let mut req = FetchRequest::default();
        req.replica_id = BrokerId(-1);
        req.max_wait_ms = 0;
        req.max_bytes = 8 << 20;
        req.session_epoch = -1;
        req.topics = vec![t];
        let r: FetchResponse = c.call(ApiKey::Fetch, 12, &req);
        let p = &r.responses[0].partitions[0];
        assert_eq!(p.error_code, 0, "fetch from {addr}");
        let mut bytes = p.records.clone().unwrap_or_default();
        if bytes.is_empty() {
            return out;
        }
        let batches = RecordBatchDecoder::decode_all(&mut bytes).expect("batches");
        for b in batches {
            for r in b.records {
                let v = r.value.map(|v| String::from_utf8_lossy(&v).to_string());
                out.insert(r.offset, v.unwrap_or_default());
                offset = r.offset + 1;
            }
        }
    }
}

/// The `.log` files of partition 0 of `topic` in `data_dir`, oldest first.
pub fn segment_logs(data_dir: &Path, topic: &str) -> Vec<PathBuf> {
    let dir = data_dir.join("topics").join(topic).join("0");
    let mut logs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("partition dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    logs.sort();
    logs
}

/// The record bytes of partition 0 of `topic` in `data_dir`: the segments
/// in order, preallocated zeros at the end cut.
pub fn log_bytes(data_dir: &Path, topic: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for l in segment_logs(data_dir, topic) {
        out.extend(std::fs::read(l).expect("segment"));
    }
    while out.last() == Some(&0) {
        out.pop();
    }
    out
}

pub fn check_format(data_dir: &Path, topic: &str) {
    let tool = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/tools/check-storage-format");
    if !tool.exists() {
        println!("{} not found: format check skipped", tool.display());
        return;
    }
    let out = std::process::Command::new(tool)
        .arg(data_dir)
        .arg(topic)
        .output()
        .expect("run check-storage-format");
    assert!(
        out.status.success(),
        "check-storage-format {}:\n{}{}",
        data_dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
