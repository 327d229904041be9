//! Fetch serves batches as they were produced: a batch a producer (librdkafka)
//! compressed comes back as one batch with the producer's codec (the topic's
//! default `compression.type=producer`) and the producer's boundaries, also
//! after a restart, since storage notes the batch beside the segment; a fetch
//! from inside such a batch gets the whole batch, as from Kafka. Old fetch
//! versions get zstd batches as produced too (Kafka 4 converts nothing down);
//! a topic codec overrides the producer's. Records from a plain producer stay the documented record format
//! on disk, compressed or not (the independent checker passes).
//! Every wait is a bounded retry on a condition; nothing asserts on timing.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use common::Broker;
use es_kafka::kafka_protocol::messages::*;
use es_kafka::kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use es_test_support::wire::KafkaClient;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};

const TIMEOUT: Duration = Duration::from_secs(30);
/// Records sent together (one librdkafka batch), then one by one.
const BURST: usize = 30;
const SINGLES: usize = 3;

/// Kafka's codec ids (attributes bits 0-2).
const NONE: i16 = 0;
const GZIP: i16 = 1;
const SNAPPY: i16 = 2;
const LZ4: i16 = 3;
const ZSTD: i16 = 4;

/// A producer that sends a batch once it holds `batch` records (or after
/// `linger_ms`).
fn producer(b: &Broker, codec: &str, linger_ms: u32, batch: usize) -> FutureProducer {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &b.addr)
        .set("broker.address.family", "v4")
        .set("compression.codec", codec)
        .set("linger.ms", linger_ms.to_string())
        .set("batch.num.messages", batch.to_string())
        .set("message.timeout.ms", "30000");
    c.create().expect("producer")
}

fn value(i: usize) -> String {
    // Compressible, so librdkafka keeps the compressed form.
    format!("value-{i}-{}", "abc".repeat(50))
}

/// Produces BURST records together, then SINGLES records one request each,
/// to partition 0 of `topic` (auto-created).
async fn produce(b: &Broker, topic: &str, codec: &str) {
    // The burst goes out as one batch when all of it is queued, however
    // slowly a loaded machine queues it (a 100 ms linger once split it into
    // ten); each single goes out at once.
    let p = producer(b, codec, 10_000, BURST);
    let values: Vec<String> = (0..BURST + SINGLES).map(value).collect();
    let mut sends = Vec::new();
    for v in &values[..BURST] {
        let rec: FutureRecord<'_, str, str> = FutureRecord::to(topic).partition(0).payload(v);
        sends.push(p.send_result(rec).map_err(|(e, _)| e).expect("queued"));
    }
    for (i, s) in sends.into_iter().enumerate() {
        let d = s
            .await
            .expect("delivery future")
            .unwrap_or_else(|(e, _)| panic!("{topic}: delivery of {i} failed: {e}"));
        assert_eq!(d.offset, i as i64);
    }
    let p = producer(b, codec, 0, 1);
    for (i, v) in values.iter().enumerate().skip(BURST) {
        let rec: FutureRecord<'_, str, str> = FutureRecord::to(topic).partition(0).payload(v);
        let d = p
            .send(rec, TIMEOUT)
            .await
            .unwrap_or_else(|(e, _)| panic!("{topic}: delivery of {i} failed: {e}"));
        assert_eq!(d.offset, i as i64);
    }
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// One request/response over a fresh connection.
fn call<Req: Encodable, Resp: Decodable>(b: &Broker, key: ApiKey, v: i16, req: &Req) -> Resp {
    KafkaClient::connect(&b.addr, "fetch-batches-test").call(key, v, req)
}

/// A fetched batch: (base offset, record count, codec).
type Shape = (i64, i32, i16);

/// Fetches partition 0 of `topic` from offset 0 with Fetch `version` and
/// returns the batches' shapes (the whole log fits one response).
fn fetch_shapes(b: &Broker, topic: &str, version: i16) -> Vec<Shape> {
    fetch_shapes_from(b, topic, version, 0)
}

/// [`fetch_shapes`] from `offset`.
fn fetch_shapes_from(b: &Broker, topic: &str, version: i16, offset: i64) -> Vec<Shape> {
    let mut fp = fetch_request::FetchPartition::default();
    fp.partition = 0;
    fp.fetch_offset = offset;
    fp.partition_max_bytes = 1 << 20;
    fp.current_leader_epoch = -1;
    fp.log_start_offset = -1;
    let mut ft = fetch_request::FetchTopic::default();
    ft.topic = TopicName(s(topic));
    ft.partitions = vec![fp];
    let mut req = FetchRequest::default();
    req.replica_id = BrokerId(-1);
    req.max_wait_ms = 100;
    req.min_bytes = 1;
    req.max_bytes = 10 << 20;
    req.session_epoch = -1;
    req.topics = vec![ft];
    let r: FetchResponse = call(b, ApiKey::Fetch, version, &req);
    let p = &r.responses[0].partitions[0];
    assert_eq!(p.error_code, 0, "{topic}: fetch v{version}");
    assert_eq!(p.high_watermark, (BURST + SINGLES) as i64);
    let records = p.records.clone().unwrap_or_default();
    let mut shapes = Vec::new();
    let mut rest: &[u8] = &records;
    while rest.len() >= 61 {
        let be_i32 =
            |p: usize| i32::from_be_bytes([rest[p], rest[p + 1], rest[p + 2], rest[p + 3]]);
        let mut base = [0u8; 8];
        base.copy_from_slice(&rest[..8]);
        let len = 12 + be_i32(8) as usize;
        assert!(len <= rest.len(), "{topic}: a whole batch");
        let codec = i16::from_be_bytes([rest[21], rest[22]]) & 0x07;
        shapes.push((i64::from_be_bytes(base), be_i32(57), codec));
        rest = &rest[len..];
    }
    assert!(rest.is_empty(), "{topic}: whole batches only");
    shapes
}

/// What a log produced by [`produce`] must look like when served: the
/// burst in batches of `codec` covering 0..BURST (librdkafka may split it),
/// then one batch per single record.
fn assert_as_produced(shapes: &[Shape], codec: i16, what: &str) {
    let total: i32 = shapes.iter().map(|s| s.1).sum();
    assert_eq!(total as usize, BURST + SINGLES, "{what}: {shapes:?}");
    assert!(shapes.iter().all(|s| s.2 == codec), "{what}: {shapes:?}");
    let singles: Vec<Shape> = (BURST..BURST + SINGLES)
        .map(|o| (o as i64, 1, codec))
        .collect();
    assert_eq!(shapes[shapes.len() - SINGLES..], singles[..], "{what}");
    assert!(
        shapes.len() - SINGLES <= 3,
        "{what}: the burst is few batches: {shapes:?}"
    );
}

fn consume_values(b: &Broker, topic: &str) -> Vec<String> {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &b.addr)
        .set("broker.address.family", "v4")
        .set("group.id", "fetch-batches")
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "100");
    let c: BaseConsumer = c.create().expect("consumer");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning)
        .expect("offset");
    c.assign(&tpl).expect("assign");
    let mut out = Vec::new();
    let deadline = std::time::Instant::now() + TIMEOUT;
    while out.len() < BURST + SINGLES {
        assert!(
            std::time::Instant::now() < deadline,
            "{topic}: consumed {}",
            out.len()
        );
        if let Some(m) = c.poll(Duration::from_millis(100)) {
            let m = m.expect("message");
            out.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned());
        }
    }
    out
}

fn checker() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/tools/check-storage-format")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compressed_batches_are_served_as_produced_across_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let b = common::start(data.clone(), &[]);
    let codecs = [
        ("gzip", GZIP),
        ("snappy", SNAPPY),
        ("lz4", LZ4),
        ("zstd", ZSTD),
        ("none", NONE),
    ];
    for (name, _) in codecs {
        produce(&b, &format!("c-{name}"), name).await;
    }
    // A topic codec wins over the producer's, on the producer's boundaries.
    {
        let mut t = create_topics_request::CreatableTopic::default();
        t.name = TopicName(s("topic-lz4"));
        t.num_partitions = 1;
        t.replication_factor = 1;
        let mut cfg = create_topics_request::CreatableTopicConfig::default();
        cfg.name = s("compression.type");
        cfg.value = Some(s("lz4"));
        t.configs.push(cfg);
        let mut req = CreateTopicsRequest::default();
        req.topics = vec![t];
        req.timeout_ms = 10_000;
        let r: CreateTopicsResponse = call(&b, ApiKey::CreateTopics, 7, &req);
        assert_eq!(r.topics[0].error_code, 0);
    }
    produce(&b, "topic-lz4", "gzip").await;

    let check = |b: &Broker, when: &str| {
        for (name, id) in codecs {
            let topic = format!("c-{name}");
            let shapes = fetch_shapes(b, &topic, 12);
            if id == NONE {
                // Uncompressed produce is not recorded: es batches it itself.
                let total: i32 = shapes.iter().map(|s| s.1).sum();
                assert_eq!(total as usize, BURST + SINGLES, "{when} {topic}");
                assert!(
                    shapes.iter().all(|s| s.2 == NONE),
                    "{when} {topic}: {shapes:?}"
                );
            } else {
                assert_as_produced(&shapes, id, &format!("{when} {topic}"));
                // From inside the first batch of several records (librdkafka
                // may send the burst's first record alone): that batch
                // whole, as Kafka serves it, then the same batches as from
                // offset 0.
                let first = shapes
                    .iter()
                    .position(|s| s.1 > 1)
                    .unwrap_or_else(|| panic!("{when} {topic}: a batch of several: {shapes:?}"));
                let inside = shapes[first].0 + shapes[first].1 as i64 / 2;
                assert_eq!(
                    fetch_shapes_from(b, &topic, 12, inside),
                    shapes[first..],
                    "{when} {topic} from offset {inside}"
                );
            }
        }
        // Fetch v9 predates zstd; Kafka 4 serves it the zstd batches anyway.
        assert_as_produced(
            &fetch_shapes(b, "c-zstd", 9),
            ZSTD,
            &format!("{when} zstd v9"),
        );
        assert_as_produced(
            &fetch_shapes(b, "topic-lz4", 12),
            LZ4,
            &format!("{when} topic-lz4"),
        );
    };
    check(&b, "before restart");
    b.stop();

    let b = common::start(data.clone(), &[]);
    check(&b, "after restart");
    let want: Vec<String> = (0..BURST + SINGLES).map(value).collect();
    for (name, _) in codecs {
        assert_eq!(consume_values(&b, &format!("c-{name}")), want, "{name}");
    }
    b.stop();

    // Records from a non-idempotent producer without headers are the
    // documented format byte for byte, whatever the codec.
    for (name, _) in codecs {
        let topic = format!("c-{name}");
        let out = Command::new("python3")
            .arg(checker())
            .arg(&data)
            .arg(&topic)
            .output()
            .expect("run check-storage-format");
        assert!(
            out.status.success(),
            "check-storage-format {topic}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
