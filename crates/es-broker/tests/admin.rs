//! The admin listener of a real es-broker (docs/admin-api.md,
//! docs/metrics.md): health checks, the Prometheus text of `/metrics`
//! agreeing with what librdkafka produced and consumed, every metric of
//! docs/metrics.md exported, per-partition labels bounded, and the JSON API
//! (topics, records, groups, offset resets, topic create and delete)
//! agreeing with the Kafka admin API.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{admin, admin_opts, client_config, Broker};
use rdkafka::admin::{NewTopic, TopicReplication};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};
use serde_json::{json, Value};

const TIMEOUT: Duration = Duration::from_secs(30);
const RECORDS: usize = 300;
const CONSUMED: i64 = 40;

fn start(dir: &std::path::Path, extra: &[&str]) -> (Broker, String) {
    let mut args = vec!["--admin-listen", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    let mut b = common::start(dir, &args);
    let url = b.admin_url();
    (b, url)
}

fn http() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(TIMEOUT)
        .build()
        .expect("http client")
}

fn get_json(url: &str) -> Value {
    let r = http().get(url).send().expect("GET");
    assert!(r.status().is_success(), "GET {url}: {}", r.status());
    r.json().expect("json")
}

/// The samples of the Prometheus text: `name{labels}` -> value.
fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| {
            let (k, v) = l.rsplit_once(' ')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

/// Sum of the samples of `name` whose labels contain every `want`.
fn sum(s: &BTreeMap<String, f64>, name: &str, want: &[&str]) -> f64 {
    s.iter()
        .filter(|(k, _)| {
            (k.as_str() == name || k.starts_with(&format!("{name}{{")))
                && want.iter().all(|w| k.contains(w))
        })
        .map(|(_, v)| v)
        .sum()
}

fn produce(addr: &str, topic: &str, n: usize) {
    let p: FutureProducer = client_config(addr)
        .set("acks", "all")
        .set("linger.ms", "5")
        .create()
        .expect("producer");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let sends: Vec<_> = (0..n)
            .map(|i| {
                let key = format!("k{i}");
                let value = format!("{{\"n\":{i}}}");
                let p = p.clone();
                let topic = topic.to_string();
                async move {
                    p.send(
                        FutureRecord::to(&topic)
                            .partition((i % 3) as i32)
                            .key(&key)
                            .payload(&value),
                        TIMEOUT,
                    )
                    .await
                }
            })
            .collect();
        for r in futures_join(sends).await {
            r.expect("delivered");
        }
    });
}

async fn futures_join<F: std::future::Future>(fs: Vec<F>) -> Vec<F::Output> {
    let mut out = Vec::with_capacity(fs.len());
    for f in fs {
        out.push(f.await);
    }
    out
}

/// Commits offset CONSUMED on partition 0 of `topic` for `group` (and
/// nothing else), as a consumer that read that far and left.
fn commit(addr: &str, group: &str, topic: &str) {
    let c: BaseConsumer = client_config(addr)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Offset(CONSUMED))
        .expect("tpl");
    c.commit(&tpl, CommitMode::Sync).expect("commit");
}

fn create_topic(addr: &str, name: &str, partitions: i32) {
    let a = admin(addr);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let r = rt
        .block_on(a.create_topics(
            &[NewTopic::new(name, partitions, TopicReplication::Fixed(1))],
            &admin_opts(TIMEOUT),
        ))
        .expect("create");
    assert!(r.iter().all(|x| x.is_ok()), "{r:?}");
}

/// The metric names docs/metrics.md lists (the first column of its tables).
fn documented_metrics() -> Vec<String> {
    let doc = include_str!("../../../docs/metrics.md");
    doc.lines()
        .filter(|l| l.starts_with("| `es_"))
        .filter_map(|l| l.split('`').nth(1).map(str::to_string))
        .collect()
}

#[test]
fn health_metrics_and_the_json_api_agree_with_the_kafka_clients() {
    let dir = tempfile::tempdir().expect("tempdir");
    // No auto-creation: a client's metadata refresh must not bring back
    // the topic deleted below.
    let (b, url) = start(
        dir.path(),
        &[
            "--metrics-partition-labels",
            "2",
            "--auto-create-topics",
            "false",
        ],
    );
    assert_eq!(
        http()
            .get(format!("{url}/healthz"))
            .send()
            .expect("healthz")
            .status(),
        200
    );
    let ready = http().get(format!("{url}/readyz")).send().expect("readyz");
    assert_eq!(ready.status(), 200, "{:?}", ready.text());

    create_topic(&b.addr, "orders", 3);
    produce(&b.addr, "orders", RECORDS);
    commit(&b.addr, "billing", "orders");

    // /metrics agrees with what was produced and committed.
    let text = http()
        .get(format!("{url}/metrics"))
        .send()
        .expect("metrics")
        .text()
        .expect("text");
    let s = samples(&text);
    assert_eq!(
        sum(&s, "es_topic_records_in_total", &["topic=\"orders\""]),
        RECORDS as f64,
        "{text}"
    );
    assert!(sum(&s, "es_topic_bytes_in_total", &["topic=\"orders\""]) > 0.0);
    assert!(sum(&s, "es_requests_total", &["api=\"Produce\""]) >= 1.0);
    assert!(
        sum(
            &s,
            "es_request_duration_seconds_count",
            &["api=\"Produce\""]
        ) >= 1.0
    );
    assert!(sum(&s, "es_fsyncs_total", &[]) >= 1.0);
    assert!(sum(&s, "es_fsync_records_sum", &[]) >= RECORDS as f64);
    assert_eq!(
        sum(&s, "es_consumer_group_lag_sum", &["group=\"billing\""]),
        (RECORDS as i64 / 3 - CONSUMED) as f64
    );
    // orders' three and the one of __consumer_offsets (the commit made it).
    assert_eq!(sum(&s, "es_partitions", &[]), 4.0);
    // Only two partitions keep their label: the third is "other".
    let labelled = s
        .keys()
        .filter(|k| k.starts_with("es_log_size_bytes{") && k.contains("topic=\"orders\""))
        .count();
    assert_eq!(labelled, 3, "two partitions and one other:\n{text}");
    assert!(s
        .keys()
        .any(|k| k.starts_with("es_log_size_bytes{") && k.contains("partition=\"other\"")));
    // Every documented metric is exported: each family has a TYPE line
    // once it has a series (series are created at zero where they can be),
    // except what only TLS and SASL listeners count.
    let secured = [
        "es_connections_rejected_total",
        "es_authentication_failures_total",
    ];
    let families: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    for m in documented_metrics() {
        if secured.contains(&m.as_str()) {
            continue;
        }
        // OpenMetrics names a counter's family without `_total` and an
        // info's without `_info`.
        let family = m
            .strip_suffix("_total")
            .or_else(|| m.strip_suffix("_info"))
            .unwrap_or(&m);
        assert!(
            families.contains(&family),
            "docs/metrics.md lists {m} but /metrics has no family {family}"
        );
    }

    // The JSON API.
    let topics = get_json(&format!("{url}/api/v1/topics"));
    let orders = topics
        .as_array()
        .expect("array")
        .iter()
        .find(|t| t["name"] == "orders")
        .expect("orders listed");
    assert_eq!(orders["partitions"], 3);
    assert_eq!(orders["records_estimate"], RECORDS);
    let topic = get_json(&format!("{url}/api/v1/topics/orders"));
    let hw: u64 = topic["partitions"]
        .as_array()
        .expect("partitions")
        .iter()
        .map(|p| p["high_watermark"].as_u64().expect("hw"))
        .sum();
    assert_eq!(hw, RECORDS as u64);
    assert!(topic["configs"]
        .as_array()
        .expect("configs")
        .iter()
        .any(|c| c["name"] == "retention.ms"));
    let recs = get_json(&format!(
        "{url}/api/v1/topics/orders/partitions/0/records?offset=0&max=5"
    ));
    let list = recs["records"].as_array().expect("records");
    assert_eq!(list.len(), 5);
    assert_eq!(list[0]["offset"], 0);
    assert_eq!(list[0]["key"]["text"], "k0");
    assert_eq!(list[0]["value"]["json"], json!({"n": 0}));
    assert_eq!(list[1]["key"]["text"], "k3");
    // The next page starts after the last record returned.
    assert_eq!(recs["next_offset"], 5);

    let by_time = get_json(&format!(
        "{url}/api/v1/topics/orders/partitions/1/records?timestamp=0&max=1"
    ));
    assert_eq!(by_time["records"][0]["offset"], 0);
    assert_eq!(by_time["records"][0]["key"]["text"], "k1");

    // Alter a config; DescribeConfigs (through the API) shows it as the
    // topic's own.
    let r = http()
        .put(format!("{url}/api/v1/topics/orders/configs"))
        .json(&json!({"set": {"retention.ms": "3600000"}}))
        .send()
        .expect("alter");
    assert_eq!(r.status(), 204, "{:?}", r.text());
    let topic = get_json(&format!("{url}/api/v1/topics/orders"));
    let retention = topic["configs"]
        .as_array()
        .expect("configs")
        .iter()
        .find(|c| c["name"] == "retention.ms")
        .expect("retention.ms")
        .clone();
    assert_eq!(retention["value"], "3600000");
    assert_eq!(retention["source"], "DYNAMIC_TOPIC_CONFIG");

    let group = get_json(&format!("{url}/api/v1/groups/billing"));
    let offsets = group["offsets"].as_array().expect("offsets");
    assert_eq!(offsets.len(), 1);
    assert_eq!(offsets[0]["committed_offset"], CONSUMED);
    assert_eq!(offsets[0]["lag"], RECORDS as i64 / 3 - CONSUMED);
    let groups = get_json(&format!("{url}/api/v1/groups"));
    assert!(groups
        .as_array()
        .expect("groups")
        .iter()
        .any(|g| g["group_id"] == "billing" && g["lag"] == RECORDS as i64 / 3 - CONSUMED));

    // Reset to earliest: the whole partition is lag again.
    let r = http()
        .post(format!("{url}/api/v1/groups/billing/reset-offsets"))
        .json(&json!({"topic": "orders", "partitions": [0], "to": "earliest"}))
        .send()
        .expect("reset");
    assert!(r.status().is_success(), "{:?}", r.text());
    let group = get_json(&format!("{url}/api/v1/groups/billing"));
    assert_eq!(group["offsets"][0]["committed_offset"], 0);

    // Create and delete a topic; librdkafka's metadata sees both.
    let r = http()
        .post(format!("{url}/api/v1/topics"))
        .json(&json!({"name": "made-here", "partitions": 2, "configs": {"retention.ms": "60000"}}))
        .send()
        .expect("create");
    assert_eq!(r.status(), 201, "{:?}", r.text());
    let r = http()
        .post(format!("{url}/api/v1/topics"))
        .json(&json!({"name": "made-here", "partitions": 2}))
        .send()
        .expect("create again");
    assert_eq!(r.status(), 409);
    let body: Value = r.json().expect("json");
    assert_eq!(body["error"], "TOPIC_ALREADY_EXISTS");
    let c: BaseConsumer = client_config(&b.addr).create().expect("client");
    let md = c
        .fetch_metadata(Some("made-here"), TIMEOUT)
        .expect("metadata");
    assert_eq!(md.topics()[0].partitions().len(), 2);
    let r = http()
        .delete(format!("{url}/api/v1/topics/made-here"))
        .send()
        .expect("delete");
    assert_eq!(r.status(), 204);
    // Gone once the deletion is applied (as after Kafka's DeleteTopics).
    es_test_support::wait::eventually(TIMEOUT, "made-here gone from librdkafka's metadata", || {
        let md = c.fetch_metadata(None, TIMEOUT).expect("metadata");
        md.topics()
            .iter()
            .all(|t| t.name() != "made-here")
            .then_some(())
    });

    // What Kafka's admin API describes beside topics and groups: no ACLs
    // (no authorizer), no SCRAM users, no API keys; producers and
    // transactions answer lists.
    assert_eq!(get_json(&format!("{url}/api/v1/acls")), json!([]));
    let users = get_json(&format!("{url}/api/v1/users"));
    assert_eq!(users["scram"], json!([]));
    assert_eq!(users["api_keys"], json!([]));
    assert!(get_json(&format!("{url}/api/v1/producers")).is_array());
    assert_eq!(get_json(&format!("{url}/api/v1/transactions")), json!([]));

    let over = get_json(&format!("{url}/api/v1/overview"));
    assert_eq!(over["ready"], true);
    assert_eq!(over["partitions"]["total"], 4);
    drop(b);
}

/// The `.log` files under `data/topics`: (count, bytes).
fn segments_on_disk(data: &std::path::Path) -> (u64, u64) {
    let (mut n, mut bytes) = (0, 0);
    for t in std::fs::read_dir(data.join("topics"))
        .expect("topics")
        .flatten()
    {
        for p in std::fs::read_dir(t.path()).into_iter().flatten().flatten() {
            for f in std::fs::read_dir(p.path()).into_iter().flatten().flatten() {
                if f.file_name().to_string_lossy().ends_with(".log") {
                    n += 1;
                    bytes += f.metadata().expect("metadata").len();
                }
            }
        }
    }
    (n, bytes)
}

#[test]
fn recovery_reports_the_segments_and_bytes_it_checked() {
    let dir = tempfile::tempdir().expect("tmp");
    let data = dir.path().join("data");
    let (b, _) = start(&data, &[]);
    create_topic(&b.addr, "recovered", 3);
    produce(&b.addr, "recovered", RECORDS);
    b.stop();
    let (segments, bytes) = segments_on_disk(&data);
    assert!(
        segments >= 3,
        "{segments} segments: one per partition at least"
    );

    // `start` returns once the broker listens, after recovery.
    let (b, url) = start(&data, &[]);
    let log = b.log_text();
    let log = log
        .lines()
        .find(|l| l.contains("recovery done:"))
        .expect("a recovery done line");
    assert!(
        log.contains(&format!("in {segments} segments checked")),
        "{log}"
    );
    let text = http()
        .get(format!("{url}/metrics"))
        .send()
        .expect("metrics")
        .text()
        .expect("text");
    let s = samples(&text);
    assert_eq!(
        s.get("es_recovery_total_segments"),
        Some(&(segments as f64))
    );
    assert_eq!(
        s.get("es_recovery_checked_segments"),
        Some(&(segments as f64))
    );
    assert_eq!(s.get("es_recovery_total_bytes"), Some(&(bytes as f64)));
    assert_eq!(s.get("es_recovery_checked_bytes"), Some(&(bytes as f64)));
    b.stop();
}

#[test]
fn a_kip_848_consumer_group_is_described_with_its_members() {
    let dir = tempfile::tempdir().expect("tmp");
    let (b, url) = start(dir.path(), &[]);
    create_topic(&b.addr, "next-gen", 3);
    produce(&b.addr, "next-gen", 30);
    let c: BaseConsumer = client_config(&b.addr)
        .set("group.id", "kip848")
        .set("group.protocol", "consumer")
        .set("auto.offset.reset", "earliest")
        .create()
        .expect("consumer");
    c.subscribe(&["next-gen"]).expect("subscribe");
    let deadline = std::time::Instant::now() + TIMEOUT;
    let group = loop {
        let _ = c.poll(Duration::from_millis(100));
        let g = get_json(&format!("{url}/api/v1/groups/kip848"));
        let assigned: usize = g["members"]
            .as_array()
            .and_then(|m| m.first())
            .and_then(|m| m["assignment"].as_array())
            .map(|a| {
                a.iter()
                    .map(|t| t["partitions"].as_array().map_or(0, Vec::len))
                    .sum()
            })
            .unwrap_or(0);
        if assigned == 3 {
            break g;
        }
        assert!(std::time::Instant::now() < deadline, "never assigned: {g}");
    };
    assert_eq!(group["type"], "consumer", "{group}");
    assert_eq!(group["state"], "Stable", "{group}");
    let m = &group["members"][0];
    assert_eq!(m["subscribed_topics"], json!(["next-gen"]), "{group}");
    assert!(m["member_epoch"].as_i64().unwrap_or(0) > 0, "{group}");
    assert_eq!(m["assignment"][0]["topic"], "next-gen", "{group}");
    // A reset is refused while the member is there, as for a classic group.
    let r = http()
        .post(format!("{url}/api/v1/groups/kip848/reset-offsets"))
        .json(&json!({"topic": "next-gen", "to": "earliest"}))
        .send()
        .expect("reset");
    assert_eq!(r.status().as_u16(), 409, "{:?}", r.text());
    drop(c);
    b.stop();
}
