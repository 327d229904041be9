//! Every API this crate serves, at every version it advertises, through the
//! real dispatcher against a real broker in a temporary directory: the
//! request encodes, the handler answers, and the response decodes at the
//! same version. The kafka-protocol crate refuses to encode a field that a
//! version lacks, so this is what keeps versioned fields honest across
//! versions no client in our other tests happens to use.

use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use es_kafka::codec::share_wire;
use es_kafka::handlers;
use es_kafka::turn::Turn;
use es_kafka::versions::advertised;
use es_kafka::{Broker, BrokerConfig};
use es_storage::record::RecordMeta;
use es_test_support::batch::KafkaBatch;
use es_test_support::in_process::{self, call, call_body};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn tn(v: &str) -> TopicName {
    TopicName(s(v))
}

fn versions(key: ApiKey) -> std::ops::RangeInclusive<i16> {
    let a = advertised(key).unwrap_or_else(|| panic!("{key:?} advertised"));
    let min = if key == ApiKey::Produce {
        es_kafka::versions::PRODUCE_SERVED_MIN
    } else {
        a.min
    };
    min..=a.max
}

/// One Kafka RecordBatch holding `n` small records.
fn kafka_batch(n: u64) -> Bytes {
    let mut batch = KafkaBatch::new();
    batch.partition_leader_epoch(0);
    for i in 0..n {
        batch.record(
            1_700_000_000_000 + i as i64,
            Some(b"k"),
            Some(b"value"),
            &[(&b"h"[..], Some(&b"x"[..]))],
            &RecordMeta::default(),
        );
    }
    Bytes::from(batch.encode())
}

async fn broker() -> (tempfile::TempDir, Arc<Broker>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = in_process::config_in(dir.path(), "127.0.0.1:9092");
    cfg.default_partitions = 1;
    let b = in_process::open_running(cfg).await;
    in_process::create_topic(&b, "t", 1).await;
    (dir, b)
}

#[tokio::test]
async fn every_served_version_answers_and_decodes() {
    let (_dir, b) = broker().await;
    let topic_id = b.topic("t").expect("t").id;

    for v in versions(ApiKey::ApiVersions) {
        let mut req = ApiVersionsRequest::default();
        if v >= 3 {
            req.client_software_name = s("test");
            req.client_software_version = s("1");
        }
        let r: ApiVersionsResponse = call(&b, ApiKey::ApiVersions, v, &req).await;
        assert_eq!(r.error_code, 0);
        assert!(r.api_keys.iter().any(|k| k.api_key == ApiKey::Fetch as i16));
    }

    for v in versions(ApiKey::Metadata) {
        let mut req = MetadataRequest::default();
        let mut t = metadata_request::MetadataRequestTopic::default();
        t.name = Some(tn("t"));
        req.topics = Some(vec![t]);
        let r: MetadataResponse = call(&b, ApiKey::Metadata, v, &req).await;
        assert_eq!(r.topics.len(), 1, "v{v}");
        assert_eq!(r.topics[0].error_code, 0, "v{v}");
        assert_eq!(r.topics[0].partitions.len(), 1);
        assert_eq!(r.brokers[0].node_id.0, 0);
        if v >= 10 {
            assert_eq!(r.topics[0].topic_id, topic_id);
        }
        if v >= 2 {
            assert_eq!(
                r.cluster_id.as_ref().map(|c| c.to_string()),
                Some(b.cluster_id().to_string())
            );
        }
    }

    let mut produced = 0i64;
    for v in versions(ApiKey::Produce) {
        let mut req = ProduceRequest::default();
        req.acks = -1;
        req.timeout_ms = 1000;
        let mut td = produce_request::TopicProduceData::default();
        if v >= 13 {
            td.topic_id = topic_id;
        } else {
            td.name = tn("t");
        }
        let mut pd = produce_request::PartitionProduceData::default();
        pd.index = 0;
        pd.records = Some(kafka_batch(3));
        td.partition_data = vec![pd];
        req.topic_data = vec![td];
        let r: ProduceResponse = call(&b, ApiKey::Produce, v, &req).await;
        let p = &r.responses[0].partition_responses[0];
        assert_eq!(p.error_code, 0, "v{v}: {:?}", p.error_message);
        assert_eq!(p.base_offset, produced, "v{v}");
        produced += 3;
    }

    for v in versions(ApiKey::Fetch) {
        let mut req = FetchRequest::default();
        req.max_wait_ms = 0;
        req.min_bytes = 1;
        let mut ft = fetch_request::FetchTopic::default();
        if v >= 13 {
            ft.topic_id = topic_id;
        } else {
            ft.topic = tn("t");
        }
        let mut fp = fetch_request::FetchPartition::default();
        fp.partition = 0;
        fp.fetch_offset = 3;
        fp.partition_max_bytes = 1 << 20;
        ft.partitions = vec![fp];
        req.topics = vec![ft];
        let r: FetchResponse = call(&b, ApiKey::Fetch, v, &req).await;
        let p = &r.responses[0].partitions[0];
        assert_eq!(p.error_code, 0, "v{v}");
        assert_eq!(p.high_watermark, produced, "v{v}");
        let records = p.records.clone().unwrap_or_default();
        assert!(records.len() > 61, "v{v}: some batches");
        // The first batch starts at the offset asked for.
        assert_eq!(
            i64::from_be_bytes(records[..8].try_into().expect("8 bytes")),
            3
        );
        if v >= 7 {
            assert_eq!(r.session_id, 0, "epoch -1 opens no fetch session");
        }
    }

    for v in versions(ApiKey::ListOffsets) {
        // One partition per request: Kafka answers a partition named twice
        // with INVALID_REQUEST.
        let mut offsets = Vec::new();
        for ts in [-1i64, -2, -3, 1_700_000_000_001] {
            let mut req = ListOffsetsRequest::default();
            let mut t = list_offsets_request::ListOffsetsTopic::default();
            t.name = tn("t");
            let mut p = list_offsets_request::ListOffsetsPartition::default();
            p.partition_index = 0;
            p.timestamp = ts;
            t.partitions = vec![p];
            req.topics = vec![t];
            let r: ListOffsetsResponse = call(&b, ApiKey::ListOffsets, v, &req).await;
            offsets.push(r.topics[0].partitions[0].offset);
        }
        // Every batch carries the same three timestamps; the maximum first
        // appears at offset 2 (Kafka keeps the earliest of equal maxima).
        // The maximum (-3) is asked for from v7 on (UNSUPPORTED_VERSION before).
        let max = if v >= 7 { 2 } else { -1 };
        assert_eq!(offsets, vec![produced, 0, max, 1], "v{v}");
    }

    for v in versions(ApiKey::OffsetForLeaderEpoch) {
        let mut req = OffsetForLeaderEpochRequest::default();
        let mut t = offset_for_leader_epoch_request::OffsetForLeaderTopic::default();
        t.topic = tn("t");
        let mut p = offset_for_leader_epoch_request::OffsetForLeaderPartition::default();
        p.partition = 0;
        p.current_leader_epoch = 0;
        p.leader_epoch = 0;
        t.partitions = vec![p];
        req.topics = vec![t];
        let r: OffsetForLeaderEpochResponse = call(&b, ApiKey::OffsetForLeaderEpoch, v, &req).await;
        assert_eq!(r.topics[0].partitions[0].end_offset, produced);
    }

    for v in versions(ApiKey::CreateTopics) {
        let name = format!("c{v}");
        let mut req = CreateTopicsRequest::default();
        req.timeout_ms = 5_000;
        let mut t = create_topics_request::CreatableTopic::default();
        t.name = tn(&name);
        t.num_partitions = 2;
        t.replication_factor = 1;
        let mut c = create_topics_request::CreatableTopicConfig::default();
        c.name = s("retention.ms");
        c.value = Some(s("1000"));
        t.configs = vec![c];
        let mut bad = create_topics_request::CreatableTopic::default();
        bad.name = tn(&format!("bad{v}"));
        bad.num_partitions = 1;
        bad.replication_factor = 3;
        req.topics = vec![t, bad];
        req.timeout_ms = 1000;
        let r: CreateTopicsResponse = call(&b, ApiKey::CreateTopics, v, &req).await;
        assert_eq!(
            r.topics[0].error_code, 0,
            "v{v}: {:?}",
            r.topics[0].error_message
        );
        assert_eq!(
            r.topics[1].error_code, 38,
            "v{v}: INVALID_REPLICATION_FACTOR"
        );
        if v >= 5 {
            assert_eq!(r.topics[0].num_partitions, 2);
            let configs = r.topics[0].configs.clone().unwrap_or_default();
            assert!(configs.iter().any(|c| c.name.as_str() == "retention.ms"
                && c.value.as_ref().map(|x| x.as_str()) == Some("1000")));
        }
        if v >= 7 {
            assert!(!r.topics[0].topic_id.is_nil());
        }
    }

    for v in versions(ApiKey::CreatePartitions) {
        let mut req = CreatePartitionsRequest::default();
        req.timeout_ms = 5_000;
        let mut t = create_partitions_request::CreatePartitionsTopic::default();
        t.name = tn("c2");
        t.count = 3 + i32::from(v);
        // Null: no manual assignment (an empty list is one, of no partitions).
        t.assignments = None;
        req.topics = vec![t];
        let r: CreatePartitionsResponse = call(&b, ApiKey::CreatePartitions, v, &req).await;
        assert_eq!(
            r.results[0].error_code, 0,
            "v{v}: {:?}",
            r.results[0].error_message
        );
    }

    for v in versions(ApiKey::DescribeConfigs) {
        let mut req = DescribeConfigsRequest::default();
        let mut t = describe_configs_request::DescribeConfigsResource::default();
        t.resource_type = 2;
        t.resource_name = s("c2");
        let mut br = describe_configs_request::DescribeConfigsResource::default();
        br.resource_type = 4;
        br.resource_name = s("0");
        req.resources = vec![t, br];
        req.include_synonyms = true;
        req.include_documentation = v >= 3;
        let r: DescribeConfigsResponse = call(&b, ApiKey::DescribeConfigs, v, &req).await;
        assert_eq!(r.results[0].error_code, 0);
        let ret = r.results[0]
            .configs
            .iter()
            .find(|c| c.name.as_str() == "retention.ms")
            .expect("retention.ms");
        assert_eq!(ret.value.as_ref().map(|x| x.as_str()), Some("1000"));
        assert_eq!(ret.config_source, 1, "DYNAMIC_TOPIC_CONFIG");
        assert!(r.results[1]
            .configs
            .iter()
            .any(|c| c.name.as_str() == "num.partitions"));
    }

    for v in versions(ApiKey::AlterConfigs) {
        let mut req = AlterConfigsRequest::default();
        let mut res = alter_configs_request::AlterConfigsResource::default();
        res.resource_type = 2;
        res.resource_name = s("c2");
        let mut c = alter_configs_request::AlterableConfig::default();
        c.name = s("segment.ms");
        c.value = Some(s("60000"));
        res.configs = vec![c];
        req.resources = vec![res];
        let r: AlterConfigsResponse = call(&b, ApiKey::AlterConfigs, v, &req).await;
        assert_eq!(r.responses[0].error_code, 0, "v{v}");
    }

    for v in versions(ApiKey::IncrementalAlterConfigs) {
        let mut req = IncrementalAlterConfigsRequest::default();
        let mut res = incremental_alter_configs_request::AlterConfigsResource::default();
        res.resource_type = 2;
        res.resource_name = s("c2");
        let mut c = incremental_alter_configs_request::AlterableConfig::default();
        c.name = s("cleanup.policy");
        c.config_operation = 2;
        c.value = Some(s("compact"));
        res.configs = vec![c];
        req.resources = vec![res];
        let r: IncrementalAlterConfigsResponse =
            call(&b, ApiKey::IncrementalAlterConfigs, v, &req).await;
        assert_eq!(
            r.responses[0].error_code, 0,
            "v{v}: {:?}",
            r.responses[0].error_message
        );
    }
    let cfg = b.topic("c2").expect("c2").config();
    assert_eq!(
        cfg.get("cleanup.policy").map(|(v, _)| v),
        Some("delete,compact".to_string())
    );

    for v in versions(ApiKey::DescribeCluster) {
        let r: DescribeClusterResponse = call(
            &b,
            ApiKey::DescribeCluster,
            v,
            &DescribeClusterRequest::default(),
        )
        .await;
        assert_eq!(r.error_code, 0);
        assert_eq!(r.cluster_id.as_str(), b.cluster_id());
        assert_eq!(r.brokers.len(), 1);
    }

    for v in versions(ApiKey::DescribeLogDirs) {
        let mut req = DescribeLogDirsRequest::default();
        req.topics = None; // null: every topic
        let r: DescribeLogDirsResponse = if v >= 5 {
            // v5 is v4 plus IsCordoned (false) after UsableBytes in each
            // log directory; es has one, so the flag is the third byte from
            // the end (its tagged fields and the response's follow).
            let body = call_body(&b, ApiKey::DescribeLogDirs, v, &req).await;
            let at = body.len() - 3;
            assert_eq!(body[at], 0, "IsCordoned false");
            let mut v4 = BytesMut::from(&body[..at]);
            v4.extend_from_slice(&body[at + 1..]);
            let mut v4 = v4.freeze();
            let r = DescribeLogDirsResponse::decode(&mut v4, 4).expect("v5 as v4");
            assert_eq!(v4.remaining(), 0, "v5: trailing bytes");
            r
        } else {
            call(&b, ApiKey::DescribeLogDirs, v, &req).await
        };
        assert_eq!(r.results.len(), 1, "v{v}: one log directory");
        let t = r.results[0]
            .topics
            .iter()
            .find(|t| t.name.0.as_str() == "t")
            .expect("t");
        assert!(t.partitions[0].partition_size > 0);
    }

    for v in versions(ApiKey::DescribeTopicPartitions) {
        let mut req = DescribeTopicPartitionsRequest::default();
        req.response_partition_limit = 2;
        let r: DescribeTopicPartitionsResponse =
            call(&b, ApiKey::DescribeTopicPartitions, v, &req).await;
        let listed: usize = r.topics.iter().map(|t| t.partitions.len()).sum();
        assert_eq!(listed, 2, "limit respected");
        assert!(r.next_cursor.is_some(), "more to come");
    }

    for v in versions(ApiKey::DeleteRecords) {
        // v0 to offset 5, v1 to 10, v2 to the high watermark (-1).
        let target = [5i64, 10, -1][v as usize];
        let request = |offset: i64| {
            let mut req = DeleteRecordsRequest::default();
            let mut t = delete_records_request::DeleteRecordsTopic::default();
            t.name = tn("t");
            let mut p = delete_records_request::DeleteRecordsPartition::default();
            p.partition_index = 0;
            p.offset = offset;
            t.partitions = vec![p];
            req.topics = vec![t];
            req
        };
        let r: DeleteRecordsResponse = call(&b, ApiKey::DeleteRecords, v, &request(target)).await;
        let ps = &r.topics[0].partitions;
        assert_eq!(ps[0].error_code, 0, "v{v}");
        assert_eq!(
            ps[0].low_watermark,
            if target == -1 { produced } else { target }
        );
        let r: DeleteRecordsResponse =
            call(&b, ApiKey::DeleteRecords, v, &request(produced + 100)).await;
        assert_eq!(
            r.topics[0].partitions[0].error_code, 1,
            "v{v}: OFFSET_OUT_OF_RANGE past the high watermark"
        );
    }
    assert_eq!(
        b.topic("t")
            .expect("t")
            .partition(0)
            .expect("p0")
            .log
            .log_start_offset(),
        produced as u64
    );

    for v in versions(ApiKey::ElectLeaders) {
        let mut req = ElectLeadersRequest::default();
        req.timeout_ms = 5_000;
        let mut tp = elect_leaders_request::TopicPartitions::default();
        tp.topic = tn("t");
        tp.partitions = vec![0, 99];
        req.topic_partitions = Some(vec![tp]);
        let r: ElectLeadersResponse = call(&b, ApiKey::ElectLeaders, v, &req).await;
        let codes: Vec<i16> = r.replica_election_results[0]
            .partition_result
            .iter()
            .map(|p| p.error_code)
            .collect();
        assert_eq!(
            codes,
            vec![84, 3],
            "v{v}: ELECTION_NOT_NEEDED, UNKNOWN_TOPIC_OR_PARTITION"
        );
        // "All partitions": every topic, with no partition elected (Kafka 4.4).
        req.topic_partitions = None;
        let r: ElectLeadersResponse = call(&b, ApiKey::ElectLeaders, v, &req).await;
        assert!(r
            .replica_election_results
            .iter()
            .any(|t| t.topic.0.as_str() == "t" && t.partition_result.is_empty()));
        assert!(r
            .replica_election_results
            .iter()
            .all(|t| t.partition_result.is_empty()));
    }

    for v in versions(ApiKey::DeleteTopics) {
        // CreateTopics made c2..c7; DeleteTopics v1..v6 removes them.
        let name = format!("c{}", v + 1);
        let mut req = DeleteTopicsRequest::default();
        req.timeout_ms = 5_000;
        if v >= 6 {
            let mut t = delete_topics_request::DeleteTopicState::default();
            t.name = Some(tn(&name));
            req.topics = vec![t];
        } else {
            req.topic_names = vec![tn(&name)];
        }
        let r: DeleteTopicsResponse = call(&b, ApiKey::DeleteTopics, v, &req).await;
        assert_eq!(r.responses[0].error_code, 0, "v{v}");
        assert!(b.topic(&name).is_none());
    }

    for v in versions(ApiKey::ShareGroupHeartbeat) {
        let mut req = ShareGroupHeartbeatRequest::default();
        req.group_id = GroupId(s(&format!("share{v}")));
        req.member_id = s("AAAAAAAAAAAAAAAAAAAAAA");
        req.rack_id = Some(s("rack"));
        req.subscribed_topic_names = Some(vec![tn("t")]);
        let r: ShareGroupHeartbeatResponse = call(&b, ApiKey::ShareGroupHeartbeat, v, &req).await;
        assert_eq!(r.error_code, 0, "v{v}: {:?}", r.error_message);
        // Kafka 4.4: a new group's first target holds no partition (none is
        // initialised before this heartbeat); the assignment is sent empty.
        let a = r.assignment.expect("assignment");
        assert!(a.topic_partitions.is_empty(), "v{v}: {a:?}");
    }
    // ShareFetch and ShareAcknowledge: bodies written by es's codec at
    // every version (v1's bytes are the crate's, v2 adds fields the crate
    // does not know); a session opened at each version is acknowledged on.
    struct Hand(Vec<u8>);
    impl Encodable for Hand {
        fn encode<B: es_kafka::kafka_protocol::protocol::buf::ByteBufMut>(
            &self,
            buf: &mut B,
            _v: i16,
        ) -> anyhow::Result<()> {
            bytes::BufMut::put_slice(buf, &self.0);
            Ok(())
        }
        fn compute_size(&self, _v: i16) -> anyhow::Result<usize> {
            Ok(self.0.len())
        }
    }
    for v in versions(ApiKey::ShareFetch) {
        let mut req = ShareFetchRequest::default();
        req.group_id = Some(GroupId(s(&format!("sf{v}"))));
        req.member_id = Some(s("AAAAAAAAAAAAAAAAAAAAAA"));
        req.max_bytes = 1 << 20;
        req.max_records = 10;
        req.batch_size = 10;
        let mut p = share_fetch_request::FetchPartition::default();
        p.partition_index = 0;
        let mut t = share_fetch_request::FetchTopic::default();
        t.topic_id = topic_id;
        t.partitions = vec![p];
        req.topics = vec![t];
        let mut body = Vec::new();
        share_wire::encode_share_fetch_request(&req, &Default::default(), v, &mut body)
            .expect("encodes");
        let mut frame = call_body(&b, ApiKey::ShareFetch, v, &Hand(body)).await;
        let r = ShareFetchResponse::decode(&mut frame, 1).expect("decodes");
        assert_eq!(frame.remaining(), 0, "v{v}");
        assert_eq!(r.error_code, 0, "v{v}: {:?}", r.error_message);
        assert_eq!(r.acquisition_lock_timeout_ms, 30_000, "v{v}");
        let p = &r.responses[0].partitions[0];
        assert_eq!(p.error_code, 0, "v{v}");
        assert!(p.records.is_some(), "v{v}: records never null");
    }
    for v in versions(ApiKey::ShareAcknowledge) {
        let mut req = ShareAcknowledgeRequest::default();
        req.group_id = Some(GroupId(s(&format!("sf{v}"))));
        req.member_id = Some(s("AAAAAAAAAAAAAAAAAAAAAA"));
        req.share_session_epoch = 1;
        let mut body = Vec::new();
        share_wire::encode_share_acknowledge_request(&req, &Default::default(), v, &mut body)
            .expect("encodes");
        let mut frame = call_body(&b, ApiKey::ShareAcknowledge, v, &Hand(body)).await;
        let r = share_wire::ShareAcknowledgeResponseV2::decode(&mut frame, v).expect("decodes");
        assert_eq!(frame.remaining(), 0, "v{v}");
        assert_eq!(
            r.response.error_code, 0,
            "v{v}: {:?}",
            r.response.error_message
        );
        let lock_ms = if v >= 2 { 30_000 } else { 0 };
        assert_eq!(r.acquisition_lock_timeout_ms, lock_ms, "v{v}");
    }
    for v in versions(ApiKey::ShareGroupDescribe) {
        let mut req = ShareGroupDescribeRequest::default();
        req.group_ids = vec![GroupId(s("share1"))];
        let r: ShareGroupDescribeResponse = call(&b, ApiKey::ShareGroupDescribe, v, &req).await;
        assert_eq!(r.groups[0].error_code, 0, "v{v}");
        assert_eq!(r.groups[0].members[0].rack_id.as_deref(), Some("rack"));
    }
}

#[tokio::test]
async fn unknown_topics_and_partitions_get_per_partition_errors() {
    let (_dir, b) = broker().await;
    let mut req = ProduceRequest::default();
    req.acks = 1;
    let mut td = produce_request::TopicProduceData::default();
    td.name = tn("t");
    let mut pd = produce_request::PartitionProduceData::default();
    pd.index = 7;
    pd.records = Some(kafka_batch(1));
    let mut corrupt = produce_request::PartitionProduceData::default();
    corrupt.index = 0;
    let mut bytes = kafka_batch(1).to_vec();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    corrupt.records = Some(Bytes::from(bytes));
    td.partition_data = vec![pd, corrupt];
    req.topic_data = vec![td];
    let r: ProduceResponse = call(&b, ApiKey::Produce, 9, &req).await;
    let ps = &r.responses[0].partition_responses;
    assert_eq!(ps[0].error_code, 3, "UNKNOWN_TOPIC_OR_PARTITION");
    assert_eq!(ps[1].error_code, 2, "CORRUPT_MESSAGE");

    let mut req = FetchRequest::default();
    let mut ft = fetch_request::FetchTopic::default();
    ft.topic = tn("t");
    let mut fp = fetch_request::FetchPartition::default();
    fp.fetch_offset = 99;
    fp.partition_max_bytes = 1000;
    ft.partitions = vec![fp];
    let mut missing = fetch_request::FetchTopic::default();
    missing.topic = tn("missing");
    missing.partitions = vec![fetch_request::FetchPartition::default()];
    req.topics = vec![ft, missing];
    req.max_wait_ms = 10_000;
    req.min_bytes = 1;
    // Errors answer at once, whatever max_wait_ms says.
    let r: FetchResponse = call(&b, ApiKey::Fetch, 12, &req).await;
    assert_eq!(
        r.responses[0].partitions[0].error_code, 1,
        "OFFSET_OUT_OF_RANGE"
    );
    assert_eq!(
        r.responses[1].partitions[0].error_code, 3,
        "UNKNOWN_TOPIC_OR_PARTITION"
    );

    let mut req = FetchRequest::default();
    req.session_id = 12345;
    req.session_epoch = 3;
    let r: FetchResponse = call(&b, ApiKey::Fetch, 12, &req).await;
    assert_eq!(r.error_code, 70, "FETCH_SESSION_ID_NOT_FOUND");
}

#[tokio::test]
async fn topics_survive_reopen_with_ids_and_configs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let cfg = BrokerConfig::new(data.clone(), "127.0.0.1:9092");
    let c1 = cfg.clone();
    let b = in_process::open_running(c1).await;
    let overrides = [("retention.ms".to_string(), "5".to_string())]
        .into_iter()
        .collect();
    let t = b
        .create_topic("keep", 3, overrides, false)
        .await
        .expect("create")
        .expect("created");
    let (id, cluster) = (t.id, b.cluster_id().to_string());
    assert!(b
        .create_topic("keep", 1, Default::default(), false)
        .await
        .is_err());
    b.stop_metadata().await;
    let b2 = b.clone();
    tokio::task::spawn_blocking(move || b2.close())
        .await
        .expect("join")
        .expect("close");
    drop(b);
    let b = in_process::open_running(cfg).await;
    let t = b.topic("keep").expect("still there");
    assert_eq!(t.id, id);
    assert_eq!(t.partition_count(), 3);
    assert_eq!(
        t.config().get("retention.ms").map(|(v, _)| v),
        Some("5".to_string())
    );
    assert_eq!(b.cluster_id(), cluster);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(data.join("topics/keep/topic.json"))
        .expect("stat")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    let mode = std::fs::metadata(data.join("topics/keep"))
        .expect("stat")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o700);
}

/// acks=0 gets no response; a failed acks=0 produce closes the connection
/// (the handler's error), as Kafka does, so the client notices.
#[tokio::test]
async fn acks_zero_answers_nothing_and_closes_on_error() {
    let (_dir, b) = broker().await;
    let frame = |partition: i32| {
        let mut header = RequestHeader::default();
        header.request_api_key = ApiKey::Produce as i16;
        header.request_api_version = 9;
        header.correlation_id = 1;
        let mut req = ProduceRequest::default();
        req.acks = 0;
        let mut td = produce_request::TopicProduceData::default();
        td.name = tn("t");
        let mut pd = produce_request::PartitionProduceData::default();
        pd.index = partition;
        pd.records = Some(kafka_batch(2));
        td.partition_data = vec![pd];
        req.topic_data = vec![td];
        let mut buf = BytesMut::new();
        header
            .encode(&mut buf, ApiKey::Produce.request_header_version(9))
            .expect("header");
        req.encode(&mut buf, 9).expect("body");
        buf.freeze()
    };
    let ok = handlers::handle(b.clone(), frame(0), Turn::free())
        .await
        .expect("served");
    assert!(ok.is_none(), "acks=0 has no response");
    assert_eq!(
        b.topic("t")
            .expect("t")
            .partition(0)
            .expect("p0")
            .log
            .high_watermark(),
        2
    );
    let bad = handlers::handle(b.clone(), frame(9), Turn::free()).await;
    assert!(
        matches!(
            bad,
            Err(handlers::CloseReason::AcksZeroFailed { partition: 9, .. })
        ),
        "a failed acks=0 produce closes the connection: {bad:?}"
    );
}

/// One Kafka RecordBatch of `n` records compressed with `codec`.
fn kafka_batch_with(n: u64, codec: es_kafka::codec::Compression) -> Bytes {
    let mut batch = KafkaBatch::new();
    batch.partition_leader_epoch(0).compression(codec);
    for _ in 0..n {
        batch.record(
            1_700_000_000_000,
            Some(b"k"),
            Some(&[7u8; 200][..]),
            &[],
            &RecordMeta::default(),
        );
    }
    Bytes::from(batch.encode())
}

/// The codec bits of the first batch in a fetch response.
async fn fetched_codec(b: &Arc<Broker>, topic: &str) -> i16 {
    let mut req = FetchRequest::default();
    let mut ft = fetch_request::FetchTopic::default();
    ft.topic = tn(topic);
    let mut fp = fetch_request::FetchPartition::default();
    fp.partition_max_bytes = 1 << 20;
    ft.partitions = vec![fp];
    req.topics = vec![ft];
    let r: FetchResponse = call(b, ApiKey::Fetch, 12, &req).await;
    let records = r.responses[0].partitions[0]
        .records
        .clone()
        .unwrap_or_default();
    assert!(records.len() > 61, "a batch");
    i16::from_be_bytes([records[21], records[22]]) & 0x07
}

#[tokio::test]
async fn fetch_compresses_like_the_producer_or_the_topic_config() {
    use es_kafka::codec::Compression;
    let (_dir, b) = broker().await;
    let produce = |topic: &'static str, codec: Compression| {
        let b = b.clone();
        async move {
            let mut req = ProduceRequest::default();
            req.acks = -1;
            let mut td = produce_request::TopicProduceData::default();
            td.name = tn(topic);
            let mut pd = produce_request::PartitionProduceData::default();
            pd.records = Some(kafka_batch_with(20, codec));
            td.partition_data = vec![pd];
            req.topic_data = vec![td];
            let r: ProduceResponse = call(&b, ApiKey::Produce, 9, &req).await;
            assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
        }
    };
    // compression.type=producer (the default): served with the producer's codec.
    produce("t", Compression::Gzip).await;
    assert_eq!(fetched_codec(&b, "t").await, Compression::Gzip.id());
    // A topic codec wins over the producer's.
    let overrides = [("compression.type".to_string(), "lz4".to_string())]
        .into_iter()
        .collect();
    b.create_topic("lz", 1, overrides, false)
        .await
        .expect("create");
    produce("lz", Compression::None).await;
    assert_eq!(fetched_codec(&b, "lz").await, Compression::Lz4.id());
}

/// The ACL and cluster-shape APIs a single node answers without state (see
/// handlers/acls.rs and handlers/cluster.rs), at every advertised version.
#[tokio::test]
async fn acl_and_cluster_shape_apis_answer_at_every_version() {
    let (_dir, b) = broker().await;

    for v in versions(ApiKey::DescribeAcls) {
        let mut req = DescribeAclsRequest::default();
        req.resource_type_filter = 1;
        req.pattern_type_filter = 1;
        req.operation = 1;
        req.permission_type = 1;
        let r: DescribeAclsResponse = call(&b, ApiKey::DescribeAcls, v, &req).await;
        assert_eq!(r.error_code, 54, "v{v}: SECURITY_DISABLED");
        assert!(r.resources.is_empty());
    }
    for v in versions(ApiKey::CreateAcls) {
        let mut req = CreateAclsRequest::default();
        let mut c = create_acls_request::AclCreation::default();
        c.resource_type = 2;
        c.resource_name = s("t");
        c.resource_pattern_type = 3;
        c.principal = s("User:a");
        c.host = s("*");
        c.operation = 3;
        c.permission_type = 3;
        req.creations = vec![c];
        let r: CreateAclsResponse = call(&b, ApiKey::CreateAcls, v, &req).await;
        assert_eq!(r.results.len(), 1);
        assert_eq!(r.results[0].error_code, 54, "v{v}");
    }
    for v in versions(ApiKey::DeleteAcls) {
        let mut req = DeleteAclsRequest::default();
        let mut f = delete_acls_request::DeleteAclsFilter::default();
        f.resource_type_filter = 1;
        f.pattern_type_filter = 1;
        f.operation = 1;
        f.permission_type = 1;
        req.filters = vec![f];
        let r: DeleteAclsResponse = call(&b, ApiKey::DeleteAcls, v, &req).await;
        assert_eq!(r.filter_results.len(), 1);
        assert_eq!(r.filter_results[0].error_code, 54, "v{v}");
    }

    for v in versions(ApiKey::DescribeQuorum) {
        let mut req = DescribeQuorumRequest::default();
        let mut t = describe_quorum_request::TopicData::default();
        t.topic_name = tn("__cluster_metadata");
        t.partitions = vec![describe_quorum_request::PartitionData::default()];
        req.topics = vec![t];
        let r: DescribeQuorumResponse = call(&b, ApiKey::DescribeQuorum, v, &req).await;
        let p = &r.topics[0].partitions[0];
        assert_eq!((p.error_code, p.leader_id.0), (0, 0), "v{v}");
        assert_eq!(p.current_voters.len(), 1);
        assert_eq!(r.nodes.len(), if v >= 2 { 1 } else { 0 });
    }

    for v in versions(ApiKey::ListPartitionReassignments) {
        let r: ListPartitionReassignmentsResponse = call(
            &b,
            ApiKey::ListPartitionReassignments,
            v,
            &ListPartitionReassignmentsRequest::default(),
        )
        .await;
        assert_eq!(r.error_code, 0);
        assert!(r.topics.is_empty());
    }
    for v in versions(ApiKey::AlterPartitionReassignments) {
        let mut req = AlterPartitionReassignmentsRequest::default();
        req.timeout_ms = 5_000;
        let mut t = alter_partition_reassignments_request::ReassignableTopic::default();
        t.name = tn("t");
        let mut same = alter_partition_reassignments_request::ReassignablePartition::default();
        same.replicas = Some(vec![BrokerId(0)]);
        let mut cancel = alter_partition_reassignments_request::ReassignablePartition::default();
        cancel.replicas = None;
        t.partitions = vec![same, cancel];
        req.topics = vec![t];
        let r: AlterPartitionReassignmentsResponse =
            call(&b, ApiKey::AlterPartitionReassignments, v, &req).await;
        let codes: Vec<i16> = r.responses[0]
            .partitions
            .iter()
            .map(|p| p.error_code)
            .collect();
        assert_eq!(
            codes,
            vec![0, 85],
            "v{v}: moved nowhere, NO_REASSIGNMENT_IN_PROGRESS"
        );
    }

    for v in versions(ApiKey::AlterReplicaLogDirs) {
        let mut req = AlterReplicaLogDirsRequest::default();
        let mut d = alter_replica_log_dirs_request::AlterReplicaLogDir::default();
        d.path = s(&b.data_dir().display().to_string());
        let mut t = alter_replica_log_dirs_request::AlterReplicaLogDirTopic::default();
        t.name = tn("t");
        t.partitions = vec![0, 9];
        d.topics = vec![t];
        let mut elsewhere = alter_replica_log_dirs_request::AlterReplicaLogDir::default();
        elsewhere.path = s("/no/such/dir");
        let mut t = alter_replica_log_dirs_request::AlterReplicaLogDirTopic::default();
        t.name = tn("t");
        t.partitions = vec![1];
        elsewhere.topics = vec![t];
        req.dirs = vec![d, elsewhere];
        let r: AlterReplicaLogDirsResponse = call(&b, ApiKey::AlterReplicaLogDirs, v, &req).await;
        assert_eq!(r.results.len(), 1, "grouped by topic");
        let codes: Vec<i16> = r.results[0]
            .partitions
            .iter()
            .map(|p| p.error_code)
            .collect();
        assert_eq!(
            codes,
            vec![0, 3, 57],
            "v{v}: none, UNKNOWN_TOPIC_OR_PARTITION, LOG_DIR_NOT_FOUND"
        );
    }

    for v in versions(ApiKey::ListConfigResources) {
        let r: ListConfigResourcesResponse = call(
            &b,
            ApiKey::ListConfigResources,
            v,
            &ListConfigResourcesRequest::default(),
        )
        .await;
        assert_eq!(r.error_code, 0);
        let listed: Vec<(String, i8)> = r
            .config_resources
            .iter()
            .map(|c| (c.resource_name.to_string(), c.resource_type))
            .collect();
        if v == 0 {
            assert!(listed.is_empty(), "v0 lists client-metrics resources only");
        } else {
            assert_eq!(
                listed,
                vec![("0".into(), 8), ("0".into(), 4), ("t".into(), 2)]
            );
            let mut req = ListConfigResourcesRequest::default();
            req.resource_types = vec![99];
            let r: ListConfigResourcesResponse =
                call(&b, ApiKey::ListConfigResources, v, &req).await;
            assert_eq!(r.error_code, 35, "an unknown type is UNSUPPORTED_VERSION");
        }
    }
}
