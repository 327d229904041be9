//! Produce-time schema id validation in a real es-broker with its schema
//! registry: schemas registered over HTTP, topics created and altered with
//! librdkafka's admin client (Confluent Server's and Redpanda's config
//! names), records produced with librdkafka (accepted and read back, or
//! refused with INVALID_RECORD and nothing written: the partition's end
//! offset says so) under each subject name strategy; the per-record errors
//! of the Produce response (v8+) seen on the wire; bad config values
//! refused with INVALID_CONFIG; and a broker without a registry refusing
//! produce to a topic that validates.

mod common;

use std::time::Duration;

use common::{admin, admin_opts, client_config, Broker};
use es_kafka::kafka_protocol::messages::*;
use es_kafka::kafka_protocol::protocol::StrBytes;
use es_storage::record::RecordMeta;
use es_test_support::batch::KafkaBatch;
use es_test_support::wire::KafkaClient;
use rdkafka::admin::{AlterConfig, ConfigSource, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};
use serde_json::{json, Value};

const TIMEOUT: Duration = Duration::from_secs(30);
const INVALID_RECORD: i16 = 87;
const INVALID_CONFIG: i16 = 40;
const ORDER: &str =
    r#"{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"long"}]}"#;
const OTHER: &str =
    r#"{"type":"record","name":"Other","namespace":"shop","fields":[{"name":"x","type":"int"}]}"#;
const RECORD_NAME: &str = "io.confluent.kafka.serializers.subject.RecordNameStrategy";

/// Registers `schema` under `subject`; its id.
fn register(url: &str, subject: &str, schema: &str) -> i32 {
    let resp = reqwest::blocking::Client::builder()
        .no_proxy()
        .build()
        .expect("http client")
        .post(format!("{url}/subjects/{subject}/versions"))
        .header("Content-Type", "application/vnd.schemaregistry.v1+json")
        .body(json!({ "schema": schema }).to_string())
        .send()
        .expect("register");
    assert_eq!(resp.status().as_u16(), 200, "register under {subject}");
    let v: Value = resp.json().expect("json");
    v["id"].as_i64().expect("id") as i32
}

/// Confluent's wire format: magic byte 0, the id big-endian, a payload.
fn framed(id: i32, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![0u8];
    v.extend_from_slice(&id.to_be_bytes());
    v.extend_from_slice(payload);
    v
}

fn producer(b: &Broker) -> FutureProducer {
    let mut c = client_config(&b.addr);
    // One record per batch: each send is accepted or refused alone.
    c.set("linger.ms", "0")
        .set("batch.num.messages", "1")
        .set("message.timeout.ms", "30000");
    c.create().expect("producer")
}

/// Sends one record to partition 0; its offset, or librdkafka's error.
async fn send(
    p: &FutureProducer,
    topic: &str,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) -> Result<i64, KafkaError> {
    let mut r = FutureRecord::<[u8], [u8]>::to(topic).partition(0);
    if let Some(k) = key {
        r = r.key(k);
    }
    if let Some(v) = value {
        r = r.payload(v);
    }
    p.send(r, TIMEOUT)
        .await
        .map(|d| d.offset)
        .map_err(|(e, _)| e)
}

fn refused(r: Result<i64, KafkaError>, what: &str) {
    assert_eq!(
        r,
        Err(KafkaError::MessageProduction(
            RDKafkaErrorCode::InvalidRecord
        )),
        "{what}"
    );
}

/// The partition's end offset.
fn end_offset(b: &Broker, topic: &str) -> i64 {
    let c: BaseConsumer = client_config(&b.addr).create().expect("client");
    c.fetch_watermarks(topic, 0, TIMEOUT).expect("watermarks").1
}

/// The values of partition 0, from offset 0 to `end`.
fn values(b: &Broker, topic: &str, end: i64) -> Vec<Option<Vec<u8>>> {
    let mut c = client_config(&b.addr);
    c.set("group.id", "validation-test")
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "100");
    let c: BaseConsumer = c.create().expect("consumer");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning)
        .expect("tpl");
    c.assign(&tpl).expect("assign");
    let mut out = Vec::new();
    let deadline = std::time::Instant::now() + TIMEOUT;
    while (out.len() as i64) < end {
        assert!(std::time::Instant::now() < deadline, "read {out:?}");
        if let Some(m) = c.poll(Duration::from_millis(200)) {
            let m = m.expect("message");
            out.push(m.payload().map(<[u8]>::to_vec));
        }
    }
    out
}

async fn create(b: &Broker, name: &str, configs: &[(&str, &str)]) {
    let mut t = NewTopic::new(name, 1, TopicReplication::Fixed(1));
    for (k, v) in configs {
        t = t.set(k, v);
    }
    let r = admin(&b.addr)
        .create_topics([&t], &admin_opts(TIMEOUT))
        .await
        .expect("create_topics");
    assert_eq!(r, vec![Ok(name.to_string())]);
}

#[test]
fn records_need_a_registered_schema_id_under_each_strategy() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut b = common::start(dir.path(), &["--schema-registry-listen", "127.0.0.1:0"]);
    let url = b.schema_registry_url();
    let order = register(&url, "orders-value", ORDER);
    let other = register(&url, "other-value", OTHER);
    assert_eq!(register(&url, "shop.Order", ORDER), order, "ids are global");
    assert_eq!(register(&url, "trn-shop.Order", ORDER), order);
    let key_id = register(&url, "keyed-key", r#""string""#);
    let plain_id = register(&url, "plain-value", ORDER);
    let unknown = other + 100;
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        create(
            &b,
            "orders",
            &[("confluent.value.schema.validation", "true")],
        )
        .await;
        create(
            &b,
            "rn",
            &[
                ("confluent.value.schema.validation", "true"),
                ("confluent.value.subject.name.strategy", RECORD_NAME),
            ],
        )
        .await;
        create(
            &b,
            "trn",
            &[
                ("redpanda.value.schema.id.validation", "true"),
                (
                    "redpanda.value.subject.name.strategy",
                    "TopicRecordNameStrategy",
                ),
            ],
        )
        .await;
        create(
            &b,
            "keyed",
            &[("redpanda.key.schema.id.validation", "true")],
        )
        .await;
        create(&b, "plain", &[]).await;
        let p = producer(&b);
        let good = framed(order, b"\x02");

        for topic in ["orders", "rn", "trn"] {
            assert_eq!(send(&p, topic, None, Some(&good)).await, Ok(0), "{topic}");
            refused(
                send(&p, topic, None, Some(&framed(unknown, b"x"))).await,
                "unknown id",
            );
            refused(
                send(&p, topic, None, Some(&framed(other, b"x"))).await,
                "another subject's id",
            );
            refused(
                send(&p, topic, None, Some(b"no magic byte")).await,
                "no magic byte",
            );
            refused(
                send(&p, topic, None, Some(&[0, 0, 0])).await,
                "too short for an id",
            );
            // A tombstone passes, as on Confluent Server.
            assert_eq!(
                send(&p, topic, None, None).await,
                Ok(1),
                "{topic} null value"
            );
            assert_eq!(send(&p, topic, Some(b"any key"), Some(&good)).await, Ok(2));
            assert_eq!(
                end_offset(&b, topic),
                3,
                "{topic}: nothing refused was written"
            );
            assert_eq!(
                values(&b, topic, 3),
                vec![Some(good.clone()), None, Some(good.clone())],
                "{topic}"
            );
        }

        // Keys: validated under <topic>-key; values are free.
        let key = framed(key_id, b"k");
        assert_eq!(send(&p, "keyed", Some(&key), Some(b"v")).await, Ok(0));
        refused(
            send(&p, "keyed", Some(&good), Some(b"v")).await,
            "a value's id as key",
        );
        refused(
            send(&p, "keyed", Some(b"k"), Some(b"v")).await,
            "no magic byte",
        );
        assert_eq!(
            send(&p, "keyed", None, Some(b"v")).await,
            Ok(1),
            "a null key passes"
        );
        assert_eq!(end_offset(&b, "keyed"), 2);

        // Without validation anything goes.
        assert_eq!(send(&p, "plain", None, Some(b"anything")).await, Ok(0));

        // AlterConfigs turns it on for an existing topic.
        let a = admin(&b.addr);
        let alter = AlterConfig::new(ResourceSpecifier::Topic("plain"))
            .set("confluent.value.schema.validation", "true");
        let r = a
            .alter_configs([&alter], &admin_opts(TIMEOUT))
            .await
            .expect("alter");
        assert!(r.iter().all(Result::is_ok), "{r:?}");
        refused(
            send(&p, "plain", None, Some(b"anything")).await,
            "after AlterConfigs",
        );
        assert_eq!(
            send(&p, "plain", None, Some(&framed(plain_id, b""))).await,
            Ok(1)
        );

        // DescribeConfigs shows the names set on the topic.
        let d = a
            .describe_configs([&ResourceSpecifier::Topic("rn")], &admin_opts(TIMEOUT))
            .await
            .expect("describe");
        let d = d.into_iter().next().expect("one").expect("ok");
        let get = |n: &str| {
            let e = d.get(n).unwrap_or_else(|| panic!("{n} described"));
            let source = match e.source {
                ConfigSource::DynamicTopic => "topic",
                ConfigSource::Default => "default",
                _ => "other",
            };
            (e.value.clone().unwrap_or_default(), source)
        };
        assert_eq!(
            get("confluent.value.schema.validation"),
            ("true".into(), "topic")
        );
        assert_eq!(
            get("confluent.value.subject.name.strategy"),
            (RECORD_NAME.into(), "topic")
        );
        // The extensions not set on the topic are not listed, as on Apache
        // Kafka, which has none of them.
        assert!(d.get("confluent.key.schema.validation").is_none());
        assert!(d.get("confluent.key.subject.name.strategy").is_none());
        assert!(d.get("redpanda.value.schema.id.validation").is_none());
        assert!(d.get("redpanda.value.subject.name.strategy").is_none());
    });
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// One Produce request of one batch with these values, at version `v`.
fn produce(
    c: &mut KafkaClient,
    v: i16,
    topic: &str,
    values: &[&[u8]],
) -> produce_response::PartitionProduceResponse {
    let mut batch = KafkaBatch::new();
    for value in values {
        batch.record(
            1_700_000_000_000,
            None,
            Some(value),
            &[],
            &RecordMeta::default(),
        );
    }
    let mut pd = produce_request::PartitionProduceData::default();
    pd.records = Some(batch.encode().into());
    let mut td = produce_request::TopicProduceData::default();
    td.name = TopicName(s(topic));
    td.partition_data = vec![pd];
    let mut req = ProduceRequest::default();
    req.acks = -1;
    req.timeout_ms = 10_000;
    req.topic_data = vec![td];
    let r: ProduceResponse = c.call(ApiKey::Produce, v, &req);
    r.responses[0].partition_responses[0].clone()
}

/// One record with this key and value, at Produce v9.
fn produce_keyed(
    c: &mut KafkaClient,
    topic: &str,
    key: Option<&[u8]>,
    value: &[u8],
) -> produce_response::PartitionProduceResponse {
    let mut batch = KafkaBatch::new();
    batch.record(
        1_700_000_000_000,
        key,
        Some(value),
        &[],
        &RecordMeta::default(),
    );
    let mut pd = produce_request::PartitionProduceData::default();
    pd.records = Some(batch.encode().into());
    let mut td = produce_request::TopicProduceData::default();
    td.name = TopicName(s(topic));
    td.partition_data = vec![pd];
    let mut req = ProduceRequest::default();
    req.acks = -1;
    req.timeout_ms = 10_000;
    req.topic_data = vec![td];
    let r: ProduceResponse = c.call(ApiKey::Produce, 9, &req);
    r.responses[0].partition_responses[0].clone()
}

/// IncrementalAlterConfigs (v1) SET of one topic config: (error, message).
fn incremental_set(c: &mut KafkaClient, topic: &str, name: &str, value: &str) -> (i16, String) {
    let mut e = incremental_alter_configs_request::AlterableConfig::default();
    e.name = s(name);
    e.config_operation = 0;
    e.value = Some(s(value));
    let mut r = incremental_alter_configs_request::AlterConfigsResource::default();
    r.resource_type = 2;
    r.resource_name = s(topic);
    r.configs = vec![e];
    let mut req = IncrementalAlterConfigsRequest::default();
    req.resources = vec![r];
    let resp: IncrementalAlterConfigsResponse = c.call(ApiKey::IncrementalAlterConfigs, 1, &req);
    let r = &resp.responses[0];
    (
        r.error_code,
        r.error_message
            .as_ref()
            .map(|m| m.to_string())
            .unwrap_or_default(),
    )
}

fn create_topic(c: &mut KafkaClient, name: &str, configs: &[(&str, &str)]) -> (i16, String) {
    let mut t = create_topics_request::CreatableTopic::default();
    t.name = TopicName(s(name));
    t.num_partitions = 1;
    t.replication_factor = 1;
    for (k, v) in configs {
        let mut e = create_topics_request::CreatableTopicConfig::default();
        e.name = s(k);
        e.value = Some(s(v));
        t.configs.push(e);
    }
    let mut req = CreateTopicsRequest::default();
    req.topics = vec![t];
    req.timeout_ms = 10_000;
    let r: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 7, &req);
    let t = &r.topics[0];
    (
        t.error_code,
        t.error_message
            .as_ref()
            .map(|m| m.to_string())
            .unwrap_or_default(),
    )
}

#[test]
fn refusals_carry_per_record_errors_and_bad_configs_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut b = common::start(dir.path(), &["--schema-registry-listen", "127.0.0.1:0"]);
    let url = b.schema_registry_url();
    let id = register(&url, "t-value", ORDER);
    let mut c = KafkaClient::connect(&b.addr, "validation-test");
    assert_eq!(
        create_topic(
            &mut c,
            "t",
            &[("confluent.value.schema.validation", "true")]
        )
        .0,
        0
    );

    let good = framed(id, b"");
    let unknown = framed(id + 7, b"");
    for v in [8, 9, 11] {
        let p = produce(&mut c, v, "t", &[&good, b"plain", &good, &unknown]);
        assert_eq!(p.error_code, INVALID_RECORD, "v{v}");
        assert_eq!(p.base_offset, -1);
        let errors: Vec<(i32, String)> = p
            .record_errors
            .iter()
            .map(|e| {
                (
                    e.batch_index,
                    e.batch_index_error_message
                        .as_ref()
                        .map(|m| m.to_string())
                        .unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(
            errors,
            vec![
                (1, "The value does not start with magic byte 0 and a 4-byte schema id (Confluent's wire format)".to_string()),
                (3, format!("The value's schema id {} is not registered under subject t-value", id + 7)),
            ],
            "v{v}"
        );
        let m = p
            .error_message
            .as_ref()
            .map(|m| m.to_string())
            .unwrap_or_default();
        assert!(
            m.starts_with("One or more records have been rejected due to 2 record errors"),
            "{m}"
        );
    }
    let p = produce(&mut c, 9, "t", &[&good, &good]);
    assert_eq!(
        (p.error_code, p.base_offset),
        (0, 0),
        "nothing of the refused batches was written"
    );

    // Bad values: INVALID_CONFIG, saying what is allowed.
    let (code, message) = create_topic(
        &mut c,
        "bad1",
        &[(
            "confluent.value.subject.name.strategy",
            "RecordNameStrategy",
        )],
    );
    assert_eq!(code, INVALID_CONFIG);
    assert!(
        message.contains("must be one of io.confluent.kafka.serializers.subject.TopicNameStrategy"),
        "{message}"
    );
    let (code, message) = create_topic(
        &mut c,
        "bad2",
        &[("redpanda.key.subject.name.strategy", RECORD_NAME)],
    );
    assert_eq!(code, INVALID_CONFIG);
    assert!(
        message.contains(
            "must be one of TopicNameStrategy, RecordNameStrategy, TopicRecordNameStrategy"
        ),
        "{message}"
    );
    let (code, _) = create_topic(
        &mut c,
        "bad3",
        &[("redpanda.value.schema.id.validation", "yes")],
    );
    assert_eq!(code, INVALID_CONFIG);

    // IncrementalAlterConfigs: checked the same way, and takes effect.
    assert_eq!(
        incremental_set(&mut c, "t", "redpanda.value.subject.name.strategy", "Bogus").0,
        INVALID_CONFIG
    );
    assert_eq!(
        incremental_set(&mut c, "t", "confluent.key.schema.validation", "true"),
        (0, String::new())
    );
    let p = produce_keyed(&mut c, "t", Some(b"plain key"), &good);
    assert_eq!(p.error_code, INVALID_RECORD, "keys are validated now");
    let p = produce_keyed(&mut c, "t", None, &good);
    assert_eq!((p.error_code, p.base_offset), (0, 2), "a null key passes");

    // The config and the schemas outlive a restart.
    drop(c);
    b.stop();
    let mut b = common::start(dir.path(), &["--schema-registry-listen", "127.0.0.1:0"]);
    b.schema_registry_url();
    let mut c = KafkaClient::connect(&b.addr, "validation-test");
    let p = produce(&mut c, 9, "t", &[b"plain"]);
    assert_eq!(
        p.error_code, INVALID_RECORD,
        "still validated after a restart"
    );
    let p = produce(&mut c, 9, "t", &[&good]);
    assert_eq!((p.error_code, p.base_offset), (0, 3));
}

#[test]
fn without_a_registry_a_validating_topic_refuses_produce() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The harness passes --schema-registry-listen none.
    let b = common::start(dir.path(), &[]);
    let mut c = KafkaClient::connect(&b.addr, "validation-test");
    assert_eq!(
        create_topic(
            &mut c,
            "v",
            &[("redpanda.value.schema.id.validation", "true")]
        )
        .0,
        0
    );
    assert_eq!(create_topic(&mut c, "free", &[]).0, 0);
    let p = produce(&mut c, 9, "v", &[&framed(1, b"")]);
    assert_eq!(p.error_code, INVALID_RECORD);
    let m = p
        .error_message
        .as_ref()
        .map(|m| m.to_string())
        .unwrap_or_default();
    assert!(m.contains("this broker runs no schema registry"), "{m}");
    let p = produce(&mut c, 9, "free", &[b"x"]);
    assert_eq!((p.error_code, p.base_offset), (0, 0));
}
