//! Wire-level tests of the admin answers the differential tester compared
//! with Kafka 4.4 (compat-tests/diff/FINDINGS.md, "Admin and metadata"):
//! requests encoded with kafka-protocol go through the real dispatcher of a
//! broker on a temporary directory. Each test states the Kafka behaviour it
//! keeps.

use std::sync::Arc;

use kafka_protocol::messages::alter_configs_request::{
    AlterConfigsResource, AlterableConfig as LegacyConfig,
};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_topic_partitions_request::TopicRequest;
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource as IncrementalResource, AlterableConfig,
};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::*;
use uuid::Uuid;

use crate::errors::{ResponseError, NONE};
use crate::handlers::admin::{OP_DELETE, OP_SET, RESOURCE_BROKER, RESOURCE_TOPIC};
use crate::handlers::wire_client::{c, call, open, s, tn};
use crate::Broker;

fn creatable(name: &str, partitions: i32) -> CreatableTopic {
    let mut t = CreatableTopic::default();
    t.name = tn(name);
    t.num_partitions = partitions;
    t.replication_factor = 1;
    t
}

async fn create(b: &Arc<Broker>, v: i16, topics: Vec<CreatableTopic>) -> CreateTopicsResponse {
    let mut req = CreateTopicsRequest::default();
    req.timeout_ms = 5_000;
    req.topics = topics;
    call(b, ApiKey::CreateTopics, v, &req).await
}

#[tokio::test]
async fn create_topics_duplicates_timeouts_and_error_shape() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = open(dir.path()).await;

    // A name given twice is answered once, INVALID_REQUEST, after the others.
    let r = create(
        &b,
        7,
        vec![creatable("d", 1), creatable("ok", 1), creatable("d", 1)],
    )
    .await;
    let got: Vec<(&str, i16)> = r
        .topics
        .iter()
        .map(|t| (t.name.0.as_str(), t.error_code))
        .collect();
    assert_eq!(
        got,
        vec![("ok", NONE), ("d", c(ResponseError::InvalidRequest))]
    );
    assert!(b.topic("d").is_none());
    // An error carries Kafka's defaults: configs [], topic_config_error_code 0.
    let err = &r.topics[1];
    assert_eq!(err.configs.as_deref(), Some(&[][..]));
    assert_eq!(err.topic_config_error_code, NONE);
    assert_eq!((err.num_partitions, err.replication_factor), (-1, -1));
    assert!(err.topic_id.is_nil());

    // Kafka 4.4's 37 topic configs, sorted by name; the schema validation
    // configs of Confluent Server and Redpanda only once set on the topic.
    let r = create(&b, 7, vec![creatable("listed", 1)]).await;
    let names: Vec<String> = r.topics[0]
        .configs
        .iter()
        .flatten()
        .map(|e| e.name.to_string())
        .collect();
    assert_eq!(names.len(), 37);
    assert!(names.windows(2).all(|w| w[0] < w[1]));
    for n in [
        "errors.deadletterqueue.group.enable",
        "max.decompressed.message.bytes",
        "remote.copy.lag.bytes",
        "remote.copy.lag.ms",
    ] {
        assert!(names.iter().any(|x| x == n), "{n}");
    }
    for n in [
        "confluent.value.schema.validation",
        "redpanda.key.subject.name.strategy",
    ] {
        assert!(!names.iter().any(|x| x == n), "{n} listed though not set");
    }
    // min.insync.replicas comes from the cluster level, as Kafka's controller sets it.
    let min_isr = r.topics[0]
        .configs
        .iter()
        .flatten()
        .find(|e| e.name.as_str() == "min.insync.replicas")
        .expect("min.insync.replicas");
    assert_eq!(
        min_isr.value.as_ref().map(|v| v.to_string()).as_deref(),
        Some("1")
    );
    assert_eq!(min_isr.config_source, 3);

    // A deadline already past creates nothing: REQUEST_TIMED_OUT.
    for timeout in [-1, 0] {
        let mut req = CreateTopicsRequest::default();
        req.timeout_ms = timeout;
        req.topics = vec![creatable("late", 1)];
        let r: CreateTopicsResponse = call(&b, ApiKey::CreateTopics, 7, &req).await;
        assert_eq!(r.topics[0].error_code, c(ResponseError::RequestTimedOut));
        assert!(b.topic("late").is_none());
    }

    // validate_only answers an id (a fresh one) and creates nothing.
    let mut req = CreateTopicsRequest::default();
    req.timeout_ms = 5_000;
    req.validate_only = true;
    req.topics = vec![creatable("dry", 1)];
    let r: CreateTopicsResponse = call(&b, ApiKey::CreateTopics, 7, &req).await;
    assert_eq!(r.topics[0].error_code, NONE);
    assert!(!r.topics[0].topic_id.is_nil());
    assert!(b.topic("dry").is_none());
}

#[tokio::test]
async fn delete_topics_and_create_partitions_follow_kafkas_controller() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = open(dir.path()).await;
    create(&b, 7, vec![creatable("t", 1)]).await;

    // DeleteTopics: a name given twice once, INVALID_REQUEST, nothing deleted;
    // a name together with an id INVALID_REQUEST.
    let mut req = DeleteTopicsRequest::default();
    req.timeout_ms = 5_000;
    req.topic_names = vec![tn("t"), tn("t")];
    let r: DeleteTopicsResponse = call(&b, ApiKey::DeleteTopics, 5, &req).await;
    assert_eq!(r.responses.len(), 1);
    assert_eq!(r.responses[0].error_code, c(ResponseError::InvalidRequest));
    assert!(b.topic("t").is_some());
    let mut both = DeleteTopicState::default();
    both.name = Some(tn("t"));
    both.topic_id = Uuid::from_u128(7);
    let mut req = DeleteTopicsRequest::default();
    req.timeout_ms = 5_000;
    req.topics = vec![both];
    let r: DeleteTopicsResponse = call(&b, ApiKey::DeleteTopics, 6, &req).await;
    assert_eq!(r.responses[0].error_code, c(ResponseError::InvalidRequest));
    assert!(b.topic("t").is_some());

    let grow = |count: i32, assignments: Option<Vec<_>>| {
        let mut t = CreatePartitionsTopic::default();
        t.name = tn("t");
        t.count = count;
        t.assignments = assignments;
        t
    };
    let partitions = |topics: Vec<CreatePartitionsTopic>, timeout_ms: i32| {
        let b = b.clone();
        async move {
            let mut req = CreatePartitionsRequest::default();
            req.timeout_ms = timeout_ms;
            req.validate_only = true;
            req.topics = topics;
            let r: CreatePartitionsResponse = call(&b, ApiKey::CreatePartitions, 3, &req).await;
            r.results.iter().map(|x| x.error_code).collect::<Vec<i16>>()
        }
    };
    // An empty list is a manual assignment of no partitions; null is none.
    assert_eq!(
        partitions(vec![grow(3, Some(Vec::new()))], 5_000).await,
        vec![c(ResponseError::InvalidReplicaAssignment)]
    );
    assert_eq!(partitions(vec![grow(3, None)], 5_000).await, vec![NONE]);
    // Twice: answered once; a past deadline; more than 10,000 new partitions.
    assert_eq!(
        partitions(vec![grow(3, None), grow(4, None)], 5_000).await,
        vec![c(ResponseError::InvalidRequest)]
    );
    assert_eq!(
        partitions(vec![grow(3, None)], 0).await,
        vec![c(ResponseError::RequestTimedOut)]
    );
    assert_eq!(
        partitions(vec![grow(i32::MAX, None)], 5_000).await,
        vec![c(ResponseError::PolicyViolation)]
    );
}

#[tokio::test]
async fn alter_configs_preprocess_then_name_then_configs_then_existence() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = open(dir.path()).await;
    create(&b, 7, vec![creatable("t", 1)]).await;

    let incremental = |name: &str, configs: Vec<(&str, i8, Option<&str>)>| {
        let mut r = IncrementalResource::default();
        r.resource_type = RESOURCE_TOPIC;
        r.resource_name = s(name);
        r.configs = configs
            .into_iter()
            .map(|(n, op, v)| {
                let mut a = AlterableConfig::default();
                a.name = s(n);
                a.config_operation = op;
                a.value = v.map(s);
                a
            })
            .collect();
        r
    };
    let alter = |resources: Vec<IncrementalResource>| {
        let b = b.clone();
        async move {
            let mut req = IncrementalAlterConfigsRequest::default();
            req.resources = resources;
            let r: IncrementalAlterConfigsResponse =
                call(&b, ApiKey::IncrementalAlterConfigs, 1, &req).await;
            r.responses
                .iter()
                .map(|x| x.error_code)
                .collect::<Vec<i16>>()
        }
    };
    let set = ("retention.ms", OP_SET, Some("1000"));
    let invalid_request = c(ResponseError::InvalidRequest);
    // A resource named twice: both entries INVALID_REQUEST.
    assert_eq!(
        alter(vec![
            incremental("t", vec![set]),
            incremental("t", vec![set])
        ])
        .await,
        vec![invalid_request, invalid_request]
    );
    // A config named twice, a null value (not for DELETE).
    assert_eq!(
        alter(vec![incremental("t", vec![set, set])]).await,
        vec![invalid_request]
    );
    assert_eq!(
        alter(vec![incremental("t", vec![("retention.ms", OP_SET, None)])]).await,
        vec![invalid_request]
    );
    assert_eq!(
        alter(vec![incremental(
            "t",
            vec![("retention.ms", OP_DELETE, None)]
        )])
        .await,
        vec![NONE]
    );
    // The name: empty, then invalid; an unknown operation before anything else.
    assert_eq!(
        alter(vec![incremental("", vec![set])]).await,
        vec![invalid_request]
    );
    assert_eq!(
        alter(vec![incremental("bad name!", vec![set])]).await,
        vec![c(ResponseError::InvalidTopicException)]
    );
    assert_eq!(
        alter(vec![incremental(
            "nope",
            vec![("retention.ms", -1, Some("1"))]
        )])
        .await,
        vec![c(ResponseError::UnknownServerError)]
    );
    // The configs are checked before the topic's existence.
    assert_eq!(
        alter(vec![incremental(
            "nope",
            vec![("retention.ms", OP_SET, Some("x"))]
        )])
        .await,
        vec![c(ResponseError::InvalidConfig)]
    );
    assert_eq!(
        alter(vec![incremental("nope", vec![set])]).await,
        vec![c(ResponseError::UnknownTopicOrPartition)]
    );

    // Legacy AlterConfigs: a null value is INVALID_REQUEST before validation.
    let mut res = AlterConfigsResource::default();
    res.resource_type = RESOURCE_TOPIC;
    res.resource_name = s("t");
    let mut cfg = LegacyConfig::default();
    cfg.name = s("retention.ms");
    cfg.value = None;
    res.configs = vec![cfg];
    let mut req = AlterConfigsRequest::default();
    req.resources = vec![res];
    let r: AlterConfigsResponse = call(&b, ApiKey::AlterConfigs, 2, &req).await;
    assert_eq!(r.responses[0].error_code, invalid_request);

    // The cluster-level min.insync.replicas cannot go, nor be set per broker.
    for (name, op) in [("", OP_DELETE), ("0", OP_SET)] {
        let mut r = IncrementalResource::default();
        r.resource_type = RESOURCE_BROKER;
        r.resource_name = s(name);
        let mut a = AlterableConfig::default();
        a.name = s("min.insync.replicas");
        a.config_operation = op;
        a.value = Some(s("1"));
        r.configs = vec![a];
        assert_eq!(alter(vec![r]).await, vec![c(ResponseError::InvalidConfig)]);
    }

    // Replication throttle rates: deleting them is a no-op (what
    // kafka-reassign-partitions.sh --verify does), setting them is refused.
    for (op, expected) in [(OP_DELETE, 0), (OP_SET, invalid_request)] {
        let mut r = IncrementalResource::default();
        r.resource_type = RESOURCE_BROKER;
        r.resource_name = s("0");
        r.configs = [
            "leader.replication.throttled.rate",
            "follower.replication.throttled.rate",
            "replica.alter.log.dirs.io.max.bytes.per.second",
        ]
        .into_iter()
        .map(|n| {
            let mut a = AlterableConfig::default();
            a.name = s(n);
            a.config_operation = op;
            a.value = (op == OP_SET).then(|| s("1000"));
            a
        })
        .collect();
        assert_eq!(alter(vec![r]).await, vec![expected], "op {op}");
    }
}

#[tokio::test]
async fn describe_configs_refuses_unknown_types_whole_and_lists_kafkas_synonyms() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = open(dir.path()).await;
    create(&b, 7, vec![creatable("t", 1)]).await;
    let resource = |ty: i8, name: &str, keys: &[&str]| {
        let mut r = DescribeConfigsResource::default();
        r.resource_type = ty;
        r.resource_name = s(name);
        r.configuration_keys = Some(keys.iter().map(|k| s(k)).collect());
        r
    };
    let mut req = DescribeConfigsRequest::default();
    req.resources = vec![resource(-1, "t", &[]), resource(RESOURCE_TOPIC, "t", &[])];
    let r: DescribeConfigsResponse = call(&b, ApiKey::DescribeConfigs, 4, &req).await;
    for res in &r.results {
        assert_eq!(res.error_code, c(ResponseError::InvalidRequest));
        assert!(res.configs.is_empty());
    }

    let mut req = DescribeConfigsRequest::default();
    req.include_synonyms = true;
    req.resources = vec![
        resource(
            RESOURCE_TOPIC,
            "t",
            &["retention.ms", "remote.storage.enable", "cleanup.policy"],
        ),
        resource(RESOURCE_TOPIC, "", &[]),
    ];
    let r: DescribeConfigsResponse = call(&b, ApiKey::DescribeConfigs, 4, &req).await;
    let syn: Vec<(String, usize)> = r.results[0]
        .configs
        .iter()
        .map(|e| (e.name.to_string(), e.synonyms.len()))
        .collect();
    assert_eq!(
        syn,
        vec![
            ("cleanup.policy".to_string(), 1),
            ("remote.storage.enable".to_string(), 0),
            ("retention.ms".to_string(), 0),
        ]
    );
    assert_eq!(
        r.results[1].error_code,
        c(ResponseError::InvalidTopicException)
    );
}

#[tokio::test]
async fn metadata_and_partition_listings_answer_each_name_once() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = open(dir.path()).await;
    create(&b, 7, vec![creatable("a", 1), creatable("b", 3)]).await;
    let topic = |name: Option<&str>, id: Uuid| {
        let mut t = MetadataRequestTopic::default();
        t.name = name.map(tn);
        t.topic_id = id;
        t
    };
    let metadata = |topics: Vec<MetadataRequestTopic>| {
        let b = b.clone();
        async move {
            let mut req = MetadataRequest::default();
            req.topics = Some(topics);
            let r: MetadataResponse = call(&b, ApiKey::Metadata, 13, &req).await;
            r
        }
    };
    let nil = Uuid::nil();
    let r = metadata(vec![
        topic(Some("a"), nil),
        topic(Some("b"), nil),
        topic(Some("a"), nil),
    ])
    .await;
    assert_eq!(r.topics.len(), 2);
    // With any id, names are ignored: an unknown id is UNKNOWN_TOPIC_ID.
    let unknown = Uuid::from_u128(42);
    let r = metadata(vec![topic(Some("a"), unknown), topic(Some("b"), nil)]).await;
    assert_eq!(r.topics.len(), 1);
    assert_eq!(r.topics[0].error_code, c(ResponseError::UnknownTopicId));
    assert_eq!(r.topics[0].name, None);
    // A null name without an id fails the whole request.
    let r = metadata(vec![topic(None, nil), topic(Some("b"), nil)]).await;
    assert_eq!(r.error_code, c(ResponseError::UnknownServerError));
    assert!(r.brokers.is_empty());
    assert_eq!(r.topics.len(), 2);

    // DescribeTopicPartitions: the limit is at least 1.
    let mut req = DescribeTopicPartitionsRequest::default();
    req.response_partition_limit = -1;
    req.topics = ["a", "b"]
        .iter()
        .map(|n| {
            let mut t = TopicRequest::default();
            t.name = tn(n);
            t
        })
        .collect();
    let r: DescribeTopicPartitionsResponse =
        call(&b, ApiKey::DescribeTopicPartitions, 0, &req).await;
    assert_eq!(r.topics.len(), 1);
    assert_eq!(r.topics[0].partitions.len(), 1);
    assert!(r.next_cursor.is_some());

    // DeleteRecords: a partition named twice is answered once (the last
    // offset wins); a topic with no partitions not at all.
    let part = |offset: i64| {
        let mut p = DeleteRecordsPartition::default();
        p.partition_index = 0;
        p.offset = offset;
        p
    };
    let mut t = DeleteRecordsTopic::default();
    t.name = tn("b");
    t.partitions = vec![part(100), part(0)];
    let mut empty = DeleteRecordsTopic::default();
    empty.name = tn("a");
    let mut req = DeleteRecordsRequest::default();
    req.timeout_ms = 5_000;
    req.topics = vec![t, empty];
    let r: DeleteRecordsResponse = call(&b, ApiKey::DeleteRecords, 2, &req).await;
    assert_eq!(r.topics.len(), 1);
    assert_eq!(r.topics[0].partitions.len(), 1);
    assert_eq!(r.topics[0].partitions[0].error_code, NONE);

    // ElectLeaders and DescribeCluster refuse what Kafka's broker refuses.
    let mut tp = TopicPartitions::default();
    tp.topic = tn("a");
    tp.partitions = vec![0];
    let mut req = ElectLeadersRequest::default();
    req.timeout_ms = 5_000;
    req.election_type = 5;
    req.topic_partitions = Some(vec![tp]);
    let r: ElectLeadersResponse = call(&b, ApiKey::ElectLeaders, 2, &req).await;
    assert_eq!(r.error_code, c(ResponseError::InvalidRequest));
    let mut req = DescribeClusterRequest::default();
    req.endpoint_type = 2;
    let r: DescribeClusterResponse = call(&b, ApiKey::DescribeCluster, 2, &req).await;
    assert_eq!(r.error_code, c(ResponseError::UnsupportedEndpointType));
    assert!(r.brokers.is_empty());
}

/// DescribeLogDirs v4+ reports the data directory's file system size and
/// the space left to write, as Kafka's FileStore does; earlier versions
/// have no such fields.
#[tokio::test]
async fn describe_log_dirs_reports_the_file_system() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = open(dir.path()).await;
    // (v5 is v4 and a field past the crate, see handlers::past_crate.)
    for v in [1i16, 3, 4] {
        let r: DescribeLogDirsResponse = call(
            &b,
            ApiKey::DescribeLogDirs,
            v,
            &DescribeLogDirsRequest::default(),
        )
        .await;
        let d = &r.results[0];
        if v >= 4 {
            assert!(d.total_bytes > 0, "v{v}: {}", d.total_bytes);
            assert!(
                (0..=d.total_bytes).contains(&d.usable_bytes),
                "v{v}: {} of {}",
                d.usable_bytes,
                d.total_bytes
            );
        } else {
            assert_eq!((d.total_bytes, d.usable_bytes), (-1, -1), "v{v}");
        }
    }
}

/// ListConfigResources lists a group once it has configs of its own, member
/// or not (ConfigCommand's `--describe` of a group relies on it), and not
/// before.
#[tokio::test]
async fn list_config_resources_lists_groups_with_configs() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = open(dir.path()).await;
    let groups = |b: Arc<Broker>| async move {
        let mut req = ListConfigResourcesRequest::default();
        req.resource_types = vec![32];
        let r: ListConfigResourcesResponse = call(&b, ApiKey::ListConfigResources, 1, &req).await;
        assert_eq!(r.error_code, NONE);
        r.config_resources
            .iter()
            .map(|c| (c.resource_name.to_string(), c.resource_type))
            .collect::<Vec<_>>()
    };
    assert_eq!(groups(b.clone()).await, vec![]);
    let configs = [(
        "share.auto.offset.reset".to_string(),
        "earliest".to_string(),
    )]
    .into_iter()
    .collect();
    b.set_group_configs("gc1", configs, false)
        .await
        .expect("group configs");
    assert_eq!(groups(b.clone()).await, vec![("gc1".to_string(), 32)]);
    b.set_group_configs("gc1", Default::default(), false)
        .await
        .expect("configs removed");
    assert_eq!(groups(b.clone()).await, vec![]);
}
