//! Client quotas end to end, against a real es-broker process: set with
//! Kafka's own `kafka-configs.sh` (ConfigCommand, through
//! scripts/kafka-ref), described back by it and by a raw
//! DescribeClientQuotas, enforced on a producer over its byte rate (the
//! Produce response says throttle_time_ms > 0, the records are in), and
//! kept across a restart (the metadata log holds them).

use std::path::{Path, PathBuf};
use std::process::Command;

use es_test_support::batch::KafkaBatch;
use es_test_support::process::BrokerProcess;
use es_test_support::wire::{produce_request, KafkaClient};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const EXE: &str = env!("CARGO_BIN_EXE_es-broker");
const PRODUCER: &str = "quota-producer";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// Runs Kafka's ConfigCommand against `addr`; its standard output.
fn kafka_configs(addr: &str, args: &[&str]) -> String {
    let out = Command::new(repo().join("scripts/kafka-ref"))
        .args([
            "run",
            "org.apache.kafka.tools.ConfigCommand",
            "--bootstrap-server",
            addr,
        ])
        .args(args)
        .output()
        .expect("run scripts/kafka-ref");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "kafka-configs {args:?} failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn create_topic(c: &mut KafkaClient, name: &str) {
    let mut t = CreatableTopic::default();
    t.name = TopicName(s(name));
    t.num_partitions = 1;
    t.replication_factor = 1;
    let mut req = CreateTopicsRequest::default();
    req.topics = vec![t];
    req.timeout_ms = 10_000;
    let r: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 7, &req);
    assert_eq!(r.topics[0].error_code, 0, "create {name}");
}

/// Produces one record of `value_bytes` to `topic`/0: (error, throttle).
fn produce(c: &mut KafkaClient, topic: &str, value_bytes: usize) -> (i16, i32) {
    let mut batch = KafkaBatch::new();
    let value = vec![b'q'; value_bytes];
    batch.record(
        1_700_000_000_000,
        None,
        Some(&value),
        &[],
        &Default::default(),
    );
    let r: ProduceResponse = c.call(
        ApiKey::Produce,
        9,
        &produce_request(topic, 0, batch.encode()),
    );
    (
        r.responses[0].partition_responses[0].error_code,
        r.throttle_time_ms,
    )
}

/// Every quota es holds, as `entity -> key=value,...` lines, sorted.
fn describe_all(c: &mut KafkaClient) -> Vec<String> {
    let mut req = DescribeClientQuotasRequest::default();
    req.components = Vec::<ComponentData>::new();
    req.strict = false;
    let r: DescribeClientQuotasResponse = c.call(ApiKey::DescribeClientQuotas, 1, &req);
    assert_eq!(r.error_code, 0);
    let mut out: Vec<String> = r
        .entries
        .unwrap_or_default()
        .iter()
        .map(|e| {
            let entity: Vec<String> = e
                .entity
                .iter()
                .map(|d| {
                    let n = d
                        .entity_name
                        .as_ref()
                        .map_or("<default>".into(), |n| n.to_string());
                    format!("{}={n}", d.entity_type)
                })
                .collect();
            let mut values: Vec<String> = e
                .values
                .iter()
                .map(|v| format!("{}={}", v.key, v.value))
                .collect();
            values.sort();
            format!("{} -> {}", entity.join(","), values.join(","))
        })
        .collect();
    out.sort();
    out
}

#[test]
fn quotas_set_with_kafka_configs_are_enforced_and_survive_a_restart() {
    let dir = tempfile::tempdir().expect("tmp");
    let data = dir.path().join("data");
    let flags = [
        "--set",
        "quota.window.num=11",
        "--set",
        "quota.window.size.seconds=1",
    ];
    let broker = BrokerProcess::start(Path::new(EXE), &data, &flags);
    let addr = broker.addr.clone();

    // kafka-configs.sh, as an operator runs it.
    let out = kafka_configs(
        &addr,
        &[
            "--alter",
            "--add-config",
            "producer_byte_rate=1024",
            "--entity-type",
            "users",
            "--entity-name",
            "alice",
        ],
    );
    assert!(
        out.contains("Completed updating config for user alice."),
        "{out}"
    );
    let out = kafka_configs(
        &addr,
        &[
            "--alter",
            "--add-config",
            "producer_byte_rate=1024,consumer_byte_rate=2048",
            "--entity-type",
            "clients",
            "--entity-name",
            PRODUCER,
        ],
    );
    assert!(
        out.contains(&format!("Completed updating config for client {PRODUCER}.")),
        "{out}"
    );
    let out = kafka_configs(
        &addr,
        &[
            "--alter",
            "--add-config",
            "request_percentage=200",
            "--entity-type",
            "users",
            "--entity-default",
        ],
    );
    assert!(
        out.contains("Completed updating default config for users in the cluster."),
        "{out}"
    );
    let out = kafka_configs(
        &addr,
        &[
            "--describe",
            "--entity-type",
            "users",
            "--entity-name",
            "alice",
        ],
    );
    assert!(
        out.contains("Quota configs for user-principal 'alice' are producer_byte_rate=1024.0"),
        "{out}"
    );
    let want = vec![
        format!("client-id={PRODUCER} -> consumer_byte_rate=2048,producer_byte_rate=1024"),
        "user=<default> -> request_percentage=200".to_string(),
        "user=alice -> producer_byte_rate=1024".to_string(),
    ];
    let mut admin = KafkaClient::connect(&addr, "quota-admin");
    assert_eq!(describe_all(&mut admin), want);

    // A producer over its client id's 1024 B/s: 20 KiB at once is twice
    // what ten windows allow. Its records are in, and it is told to wait.
    create_topic(&mut admin, "metered");
    let mut producer = KafkaClient::connect(&addr, PRODUCER);
    let (error, throttle) = produce(&mut producer, "metered", 20 * 1024);
    assert_eq!(error, 0);
    assert!(throttle > 0, "throttle_time_ms {throttle}");
    // Another client id has no byte quota.
    let mut other = KafkaClient::connect(&addr, "unmetered");
    assert_eq!(produce(&mut other, "metered", 20 * 1024), (0, 0));

    // A restart keeps them: they are in the metadata log.
    broker.stop();
    let broker = BrokerProcess::start(Path::new(EXE), &data, &flags);
    let addr = broker.addr.clone();
    let mut admin = KafkaClient::connect(&addr, "quota-admin");
    assert_eq!(describe_all(&mut admin), want);
    let out = kafka_configs(&addr, &["--describe", "--entity-type", "clients"]);
    assert!(
        out.contains(&format!(
            "Quota configs for client-id '{PRODUCER}' are consumer_byte_rate=2048.0, producer_byte_rate=1024.0"
        )),
        "{out}"
    );
    let mut producer = KafkaClient::connect(&addr, PRODUCER);
    let (error, throttle) = produce(&mut producer, "metered", 20 * 1024);
    assert_eq!(error, 0);
    assert!(
        throttle > 0,
        "throttle_time_ms {throttle} after the restart"
    );

    // Removed with kafka-configs, gone for the producer too.
    kafka_configs(
        &addr,
        &[
            "--alter",
            "--delete-config",
            "producer_byte_rate,consumer_byte_rate",
            "--entity-type",
            "clients",
            "--entity-name",
            PRODUCER,
        ],
    );
    assert_eq!(describe_all(&mut admin).len(), 2);
    let mut producer = KafkaClient::connect(&addr, PRODUCER);
    assert_eq!(produce(&mut producer, "metered", 20 * 1024), (0, 0));
    broker.stop();
}
