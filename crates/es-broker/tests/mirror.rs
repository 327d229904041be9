//! Mirror topics end to end between two real es-broker processes, the first
//! one the source cluster (es speaks Kafka's protocol, transactions
//! included, so it stands in for a Kafka cluster here; compat-tests/migration
//! runs the same path against Apache Kafka). Driven through `es-broker
//! mirror` as a user drives it: every committed record lands at its source
//! offset with the same key, value, headers and timestamp, aborted records
//! and markers stay gaps, producers are refused until promotion, a group's
//! committed offset is copied unchanged, a restart of the mirror resumes
//! with nothing written twice, and promotion moves the log end to the
//! source's so new records continue at the offset consumers expect. In a
//! cluster, followers follow a promoted log end.

mod common;

use std::process::Command;
use std::time::Duration;

use common::cluster::Cluster;
use common::replicas::{produce, shown};
use common::{client_config, ES_BROKER};
use es_test_support::wait::eventually;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, Timestamp, TopicPartitionList};

const TIMEOUT: Duration = Duration::from_secs(60);
const INVALID_REQUEST: i16 = 42;

/// Produce v9 of one record to partition 0: (error code, message).
fn raw_produce(addr: &str) -> (i16, Option<String>) {
    use es_kafka::kafka_protocol::messages::{
        produce_request, ApiKey, ProduceRequest, ProduceResponse, TopicName,
    };
    use es_kafka::kafka_protocol::protocol::StrBytes;
    let mut batch = es_test_support::batch::KafkaBatch::new();
    batch.record(
        common::now_ms(),
        Some(b"x"),
        Some(b"x"),
        &[],
        &es_storage::record::RecordMeta::default(),
    );
    let mut pd = produce_request::PartitionProduceData::default();
    pd.index = 0;
    pd.records = Some(batch.encode().into());
    let mut td = produce_request::TopicProduceData::default();
    td.name = TopicName(StrBytes::from_static_str(TOPIC));
    td.partition_data = vec![pd];
    let mut req = ProduceRequest::default();
    req.acks = -1;
    req.timeout_ms = 10_000;
    req.topic_data = vec![td];
    let mut k = es_test_support::wire::KafkaClient::connect(addr, "mirror-test");
    let r: ProduceResponse = k.call(ApiKey::Produce, 9, &req);
    let p = &r.responses[0].partition_responses[0];
    (
        p.error_code,
        p.error_message.as_ref().map(|m| m.to_string()),
    )
}
const TOPIC: &str = "orders";

/// Runs `es-broker mirror ARGS --bootstrap ADDR`; its standard output.
fn mirror(addr: &str, args: &[&str]) -> String {
    let out = Command::new(ES_BROKER)
        .arg("mirror")
        .args(args)
        .args(["--bootstrap", addr])
        .output()
        .expect("run es-broker mirror");
    assert!(
        out.status.success(),
        "es-broker mirror {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `mirror status TOPIC --json`: the topic's entry (null if none).
/// Checks what must hold whenever status is read: an active partition's
/// source high watermark, once known, is never below what es has copied
/// (the watermark comes with the records it is taken from).
fn status_of(addr: &str, topic: &str) -> serde_json::Value {
    let out = mirror(addr, &["status", topic, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("status json");
    let t = v["topics"]
        .as_array()
        .expect("topics")
        .iter()
        .find(|t| t["topic"] == topic)
        .cloned()
        .unwrap_or_default();
    if t["state"] == "active" {
        for p in t["partitions"].as_array().expect("partitions") {
            let (hw, end) = (
                p["source_high_watermark"].as_i64().unwrap_or(-1),
                p["mirrored_end"].as_i64().unwrap_or(-1),
            );
            assert!(
                hw < 0 || hw >= end,
                "status shows a source high watermark below es's end: {p}"
            );
        }
    }
    t
}

/// (partition, mirrored end, lag, state) of every partition of TOPIC.
/// Links the es at `target` to `source` as link `src`.
fn link_source(target: &str, source: &str) {
    mirror(
        target,
        &["link", "create", "src", "--source-bootstrap", source],
    );
}

/// Waits until `topic`'s partition 0 is mirrored up to `end` on `addr`;
/// the topic's status then.
fn mirrored_end_at(addr: &str, topic: &str, end: i64) -> serde_json::Value {
    eventually(TIMEOUT, &format!("{topic} mirrored up to {end}"), || {
        let t = status_of(addr, topic);
        (t["partitions"][0]["mirrored_end"].as_i64() == Some(end)).then_some(t)
    })
}

fn status(addr: &str) -> Vec<(i64, i64, i64, String)> {
    let t = status_of(addr, TOPIC);
    let mut rows = Vec::new();
    for p in t["partitions"].as_array().into_iter().flatten() {
        rows.push((
            p["partition"].as_i64().unwrap_or(-1),
            p["mirrored_end"].as_i64().unwrap_or(-1),
            p["lag"].as_i64().unwrap_or(-1),
            t["state"].as_str().unwrap_or("").to_string(),
        ));
    }
    rows
}

/// Every committed record of a topic: (partition, offset, key, value,
/// headers, timestamp, timestamp type).
type Row = (
    i32,
    i64,
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Vec<(String, Option<Vec<u8>>)>,
    i64,
    &'static str,
);

fn read_all(addr: &str, partitions: i32, count: usize) -> Vec<Row> {
    read_topic(addr, TOPIC, partitions, count)
}

/// At least `count` committed records of `topic`'s first `partitions`,
/// sorted by partition and offset.
fn read_topic(addr: &str, topic: &str, partitions: i32, count: usize) -> Vec<Row> {
    let c: BaseConsumer = client_config(addr)
        .set("group.id", "mirror-test-reader")
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .expect("partition");
    }
    c.assign(&tpl).expect("assign");
    let mut rows: Vec<Row> = Vec::new();
    eventually(TIMEOUT, "every record read", || {
        while let Some(m) = c.poll(Duration::from_millis(200)) {
            let m = m.expect("message");
            let headers = m
                .headers()
                .map(|h| {
                    h.iter()
                        .map(|x| (x.key.to_string(), x.value.map(<[u8]>::to_vec)))
                        .collect()
                })
                .unwrap_or_default();
            rows.push((
                m.partition(),
                m.offset(),
                m.key().map(<[u8]>::to_vec),
                m.payload().map(<[u8]>::to_vec),
                headers,
                m.timestamp().to_millis().unwrap_or(-1),
                match m.timestamp() {
                    Timestamp::CreateTime(_) => "create",
                    Timestamp::LogAppendTime(_) => "log-append",
                    Timestamp::NotAvailable => "none",
                },
            ));
        }
        (rows.len() >= count).then_some(())
    });
    rows.sort_by_key(|r| (r.0, r.1));
    rows
}

fn produce_plain(addr: &str, n: usize, from: usize) {
    produce_records(addr, TOPIC, 2, n, from);
}

/// Records `from..from + n` into `topic`, record i into partition
/// i % `partitions`, with a header and timestamp 1_700_000_000_000 + i.
fn produce_records(addr: &str, topic: &str, partitions: i32, n: usize, from: usize) {
    let p: BaseProducer = client_config(addr)
        .set("linger.ms", "5")
        .create()
        .expect("producer");
    for i in from..from + n {
        let key = format!("k{i}");
        let value = format!("v{i}");
        let headers = OwnedHeaders::new().insert(Header {
            key: "h",
            value: Some(value.as_bytes()),
        });
        let rec = BaseRecord::to(topic)
            .partition((i % partitions as usize) as i32)
            .key(&key)
            .payload(&value)
            .headers(headers)
            .timestamp(1_700_000_000_000 + i as i64);
        p.send(rec).expect("send");
        p.poll(Duration::ZERO);
    }
    p.flush(TIMEOUT).expect("flush");
}

/// Three transactions into partition 0, the middle one aborted.
fn produce_transactions(addr: &str) {
    let p: BaseProducer = client_config(addr)
        .set("transactional.id", "mirror-test-txn")
        .create()
        .expect("transactional producer");
    p.init_transactions(TIMEOUT).expect("init");
    for (t, abort) in [(0, false), (1, true), (2, false)] {
        p.begin_transaction().expect("begin");
        for i in 0..5 {
            let key = format!("t{t}-{i}");
            let rec: BaseRecord<'_, String, [u8]> = BaseRecord::to(TOPIC).partition(0).key(&key);
            p.send(rec).expect("send");
        }
        p.flush(TIMEOUT).expect("flush");
        if abort {
            p.abort_transaction(TIMEOUT).expect("abort");
        } else {
            p.commit_transaction(TIMEOUT).expect("commit");
        }
    }
}

fn high_watermarks(addr: &str) -> Vec<i64> {
    let c: BaseConsumer = client_config(addr)
        .set("group.id", "mirror-test-hw")
        .create()
        .expect("consumer");
    (0..2)
        .map(|p| c.fetch_watermarks(TOPIC, p, TIMEOUT).expect("watermarks").1)
        .collect()
}

fn commit_group(addr: &str, group: &str, offsets: &[(i32, i64)]) {
    let c: BaseConsumer = client_config(addr)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    for (p, o) in offsets {
        tpl.add_partition_offset(TOPIC, *p, Offset::Offset(*o))
            .expect("offset");
    }
    c.commit(&tpl, rdkafka::consumer::CommitMode::Sync)
        .expect("commit");
}

fn committed(addr: &str, group: &str) -> Vec<(i32, Offset)> {
    let c: BaseConsumer = client_config(addr)
        .set("group.id", group)
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    for p in 0..2 {
        tpl.add_partition(TOPIC, p);
    }
    let got = c.committed_offsets(tpl, TIMEOUT).expect("committed");
    got.elements()
        .iter()
        .map(|e| (e.partition(), e.offset()))
        .collect()
}

/// Waits until every partition's mirrored end is the source's last record + 1.
fn caught_up(target: &str, source_rows: &[Row]) {
    eventually(TIMEOUT, "the mirror to catch up", || {
        let st = status(target);
        let ok = st.len() == 2
            && st.iter().all(|(p, end, _, _)| {
                let last = source_rows
                    .iter()
                    .filter(|r| r.0 as i64 == *p)
                    .map(|r| r.1)
                    .max();
                last.is_none_or(|l| *end == l + 1)
            });
        ok.then_some(())
    });
}

#[test]
fn a_mirror_keeps_source_offsets_resumes_after_a_restart_and_promotes() {
    let dir = tempfile::tempdir().expect("tmp");
    let source = common::start(dir.path().join("source"), &["--default-partitions", "2"]);
    let target_dir = dir.path().join("target");
    let target = common::start(target_dir.clone(), &[]);

    produce_plain(&source.addr, 20, 0);
    produce_transactions(&source.addr);
    commit_group(&source.addr, "app", &[(0, 7), (1, 4)]);

    link_source(&target.addr, &source.addr);
    mirror(&target.addr, &["topic", "create", TOPIC, "--link", "src"]);
    mirror(
        &target.addr,
        &[
            "groups",
            "--link",
            "src",
            "--group",
            "app",
            "--group-sync-interval-ms",
            "500",
        ],
    );
    let listed = mirror(&target.addr, &["link", "list"]);
    assert!(listed.contains("src"), "{listed}");

    // 20 plain records, then 10 committed of the 15 transactional ones.
    let want = read_all(&source.addr, 2, 30);
    assert_eq!(want.len(), 30);
    caught_up(&target.addr, &want);
    let got = read_all(&target.addr, 2, 30);
    assert_eq!(got, want, "every record at its source offset, identical");
    // The aborted transaction left a gap on both.
    let p0: Vec<i64> = got.iter().filter(|r| r.0 == 0).map(|r| r.1).collect();
    assert!(p0.windows(2).any(|w| w[1] - w[0] > 1), "gap kept: {p0:?}");

    let shown = mirror_configs(&target.addr);
    assert_eq!(
        shown.get("es.mirror.state").map(String::as_str),
        Some("active"),
        "{shown:?}"
    );
    assert_eq!(shown.get("es.mirror.link").map(String::as_str), Some("src"));
    assert_eq!(
        shown.get("es.mirror.source.topic").map(String::as_str),
        Some(TOPIC)
    );
    assert_eq!(
        shown.get("es.mirror.partition.lag").map(String::as_str),
        Some("0=1,1=0"),
        "partition 0's source ends with a transaction marker, not copied until promotion"
    );

    // Read-only until promoted.
    let (code, message) = raw_produce(&target.addr);
    assert_eq!(code, INVALID_REQUEST, "{message:?}");
    assert!(message.unwrap_or_default().contains("mirror topic"));
    eventually(TIMEOUT, "the group's offsets copied", || {
        let c = committed(&target.addr, "app");
        (c == vec![(0, Offset::Offset(7)), (1, Offset::Offset(4))]).then_some(())
    });

    // A restart of the mirror (kill -9) resumes at the log end: more
    // records on the source, none written twice.
    target.kill();
    produce_plain(&source.addr, 10, 20);
    let target = common::start(target_dir, &[]);
    let hw = high_watermarks(&source.addr);
    let want = read_all(&source.addr, 2, 40);
    assert_eq!(want.len(), 40);
    caught_up(&target.addr, &want);
    assert_eq!(read_all(&target.addr, 2, 40), want);
    // ListOffsets by timestamp finds the same offsets on es as on the
    // source (on partition 0 the first record at or after the later time
    // is a transactional one, with a later timestamp).
    for ts in [1_700_000_000_005, 1_700_000_000_025] {
        assert_eq!(
            offsets_for_time(&target.addr, TOPIC, 2, ts),
            offsets_for_time(&source.addr, TOPIC, 2, ts),
            "ListOffsets for timestamp {ts}"
        );
    }

    // Promotion: caught up, the ends move to the source's (past the last
    // transaction's marker), producers are welcome.
    let out = mirror(&target.addr, &["promote", TOPIC, "--timeout-s", "30"]);
    assert!(out.contains("promoted orders"), "{out}");
    let st = status(&target.addr);
    for (p, end, lag, state) in &st {
        assert_eq!(state, "promoted");
        assert_eq!((*end, *lag), (hw[*p as usize], 0), "partition {p}");
    }
    let shown = mirror_configs(&target.addr);
    assert_eq!(
        shown.get("es.mirror.state").map(String::as_str),
        Some("promoted"),
        "{shown:?}"
    );
    assert_eq!(shown.get("es.mirror.lag").map(String::as_str), Some("0"));
    let p: BaseProducer = client_config(&target.addr).create().expect("producer");
    p.send(BaseRecord::to(TOPIC).partition(0).key("new").payload("new"))
        .expect("queued");
    p.flush(TIMEOUT).expect("accepted after promotion");
    let c: BaseConsumer = client_config(&target.addr)
        .set("group.id", "mirror-test-end")
        .create()
        .expect("consumer");
    let (_, end) = c.fetch_watermarks(TOPIC, 0, TIMEOUT).expect("watermarks");
    assert_eq!(end, hw[0] + 1, "the new record landed at the source's end");
    target.stop();
    source.stop();
}

/// ListOffsets by timestamp `ts` for `topic`'s first `partitions`.
fn offsets_for_time(addr: &str, topic: &str, partitions: i32, ts: i64) -> Vec<(i32, Offset)> {
    let c: BaseConsumer = client_config(addr)
        .set("group.id", "mirror-test-times")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Offset(ts))
            .expect("partition");
    }
    let got = c
        .offsets_for_times(tpl, TIMEOUT)
        .expect("offsets for times");
    got.elements()
        .iter()
        .map(|e| (e.partition(), e.offset()))
        .collect()
}

/// An admin call's result in a runtime of its own.
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(f)
}

/// Creates `topic` on `addr` with `partitions` and `configs`.
fn create_topic(addr: &str, topic: &str, partitions: i32, configs: &[(&str, &str)]) {
    use rdkafka::admin::{NewTopic, TopicReplication};
    let mut t = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    for (k, v) in configs {
        t = t.set(k, v);
    }
    let r = block_on(common::admin(addr).create_topics(&[t], &common::admin_opts(TIMEOUT)))
        .expect("create topics");
    assert!(r[0].is_ok(), "create {topic}: {r:?}");
}

/// A topic config of `topic` as DescribeConfigs shows it on `addr`.
fn topic_config(addr: &str, topic: &str, name: &str) -> Option<String> {
    use rdkafka::admin::ResourceSpecifier;
    let got = block_on(common::admin(addr).describe_configs(
        &[ResourceSpecifier::Topic(topic)],
        &common::admin_opts(TIMEOUT),
    ))
    .ok()?;
    let res = got.into_iter().next()?.ok()?;
    res.entries
        .into_iter()
        .find(|e| e.name == name)
        .and_then(|e| e.value)
}

/// The partition count `addr`'s metadata shows for `topic` (0: none).
fn partition_count(addr: &str, topic: &str) -> usize {
    let c: BaseConsumer = client_config(addr).create().expect("client");
    c.fetch_metadata(Some(topic), TIMEOUT)
        .ok()
        .and_then(|md| {
            md.topics()
                .iter()
                .find(|t| t.name() == topic && t.error().is_none())
                .map(|t| t.partitions().len())
        })
        .unwrap_or(0)
}

/// TOPIC's configs named `es.mirror.*` as DescribeConfigs shows them
/// (every one read-only).
fn mirror_configs(addr: &str) -> std::collections::BTreeMap<String, String> {
    use rdkafka::admin::ResourceSpecifier;
    let a = common::admin(addr);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let got = rt
        .block_on(a.describe_configs(
            &[ResourceSpecifier::Topic(TOPIC)],
            &common::admin_opts(TIMEOUT),
        ))
        .expect("describe configs");
    let res = got[0].as_ref().expect("the topic's configs");
    res.entries
        .iter()
        .filter(|e| e.name.starts_with("es.mirror."))
        .map(|e| {
            assert!(e.is_read_only, "{} is read-only", e.name);
            (e.name.clone(), e.value.clone().unwrap_or_default())
        })
        .collect()
}

/// The high watermark of partition 0 of TOPIC as `addr` reports it.
fn high_watermark(addr: &str) -> i64 {
    let c: BaseConsumer = client_config(addr)
        .set("group.id", "mirror-test-hw")
        .create()
        .expect("consumer");
    c.fetch_watermarks(TOPIC, 0, TIMEOUT).expect("watermarks").1
}

/// In a cluster each node copies the partitions it leads and its followers
/// replicate what it copied. Promotion moves the leader's log end past the
/// source's trailing transaction marker, an offset with no record: the
/// follower's end must follow it (es's end-gap answer), so the high
/// watermark reaches the source's while both replicas stay in sync.
#[test]
fn in_a_cluster_followers_follow_a_promoted_log_end() {
    let dir = tempfile::tempdir().expect("tmp");
    let source = common::start(dir.path().join("source"), &["--default-partitions", "1"]);
    let cluster = Cluster::start_with(
        &dir.path().join("target"),
        2,
        1,
        &[
            "--default-partitions",
            "1",
            "--default-replication-factor",
            "2",
        ],
    );
    produce_transactions(&source.addr);
    let want = read_all(&source.addr, 1, 10);
    let source_hw = high_watermark(&source.addr);
    assert_eq!(want.len(), 10);
    assert_eq!(
        source_hw, 18,
        "three transactions of five and their markers"
    );

    let any = cluster.addr(1);
    link_source(&any, &source.addr);
    mirror(&any, &["topic", "create", TOPIC, "--link", "src"]);
    let (leader, _, replicas, _) = eventually(TIMEOUT, "the mirror topic's replicas", || {
        let s = shown(&any, TOPIC);
        (s.0 > 0 && s.2.len() == 2).then_some(s)
    });
    assert_eq!(replicas.len(), 2);
    let at = cluster.addr(leader);
    eventually(TIMEOUT, "the mirror to catch up", || {
        let st = status(&at);
        (st.len() == 1 && st[0].1 == 17).then_some(())
    });
    assert_eq!(
        read_all(&at, 1, 10),
        want,
        "the copy, read through the leader"
    );

    let out = mirror(&at, &["promote", TOPIC, "--timeout-s", "30"]);
    assert!(out.contains("promoted orders"), "{out}");
    eventually(TIMEOUT, "the high watermark at the source's", || {
        (high_watermark(&at) == source_hw).then_some(())
    });
    let (_, _, _, isr) = shown(&at, TOPIC);
    assert_eq!(
        isr.len(),
        2,
        "the follower is in sync at the new end: {isr:?}"
    );
    let (code, offset) = produce(&at, TOPIC, "after");
    assert_eq!(
        (code, offset),
        (0, source_hw),
        "acks=all at the source's end"
    );
    for (_, node) in cluster.nodes {
        node.stop();
    }
    source.stop();
}

/// Flags for a broker that checks ACLs and allows what no ACL names.
const WITH_ACLS: [&str; 4] = [
    "--set",
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "--set",
    "allow.everyone.if.no.acl.found=true",
];

/// One ACL change: create (`delete` false) or delete the ALLOW binding of
/// `principal` for `operation` on a LITERAL resource.
fn acl(addr: &str, delete: bool, resource_type: i8, name: &str, principal: &str, operation: i8) {
    use es_kafka::kafka_protocol::messages::{
        create_acls_request::AclCreation, delete_acls_request::DeleteAclsFilter, ApiKey,
        CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    };
    use es_kafka::kafka_protocol::protocol::StrBytes;
    let mut k = es_test_support::wire::KafkaClient::connect(addr, "mirror-test");
    let s = |v: &str| StrBytes::from_string(v.to_string());
    if delete {
        let mut f = DeleteAclsFilter::default();
        f.resource_type_filter = resource_type;
        f.resource_name_filter = Some(s(name));
        f.pattern_type_filter = 3;
        f.principal_filter = Some(s(principal));
        f.host_filter = Some(s("*"));
        f.operation = operation;
        f.permission_type = 3;
        let mut req = DeleteAclsRequest::default();
        req.filters = vec![f];
        let r: DeleteAclsResponse = k.call(ApiKey::DeleteAcls, 3, &req);
        assert_eq!(r.filter_results[0].error_code, 0, "{r:?}");
    } else {
        let mut a = AclCreation::default();
        a.resource_type = resource_type;
        a.resource_name = s(name);
        a.resource_pattern_type = 3;
        a.principal = s(principal);
        a.host = s("*");
        a.operation = operation;
        a.permission_type = 3;
        let mut req = CreateAclsRequest::default();
        req.creations = vec![a];
        let r: CreateAclsResponse = k.call(ApiKey::CreateAcls, 3, &req);
        assert_eq!(r.results[0].error_code, 0, "{r:?}");
    }
}

/// Every binding DescribeAcls shows: (resource type, name, principal, operation).
fn acls(addr: &str) -> Vec<(i8, String, String, i8)> {
    use es_kafka::kafka_protocol::messages::{ApiKey, DescribeAclsRequest, DescribeAclsResponse};
    let mut k = es_test_support::wire::KafkaClient::connect(addr, "mirror-test");
    let mut req = DescribeAclsRequest::default();
    req.resource_type_filter = 1;
    req.resource_name_filter = None;
    req.principal_filter = None;
    req.host_filter = None;
    req.pattern_type_filter = 1;
    req.operation = 1;
    req.permission_type = 1;
    let r: DescribeAclsResponse = k.call(ApiKey::DescribeAcls, 3, &req);
    assert_eq!(r.error_code, 0, "{r:?}");
    let mut out: Vec<(i8, String, String, i8)> = r
        .resources
        .iter()
        .flat_map(|res| {
            res.acls.iter().map(|a| {
                (
                    res.resource_type,
                    res.resource_name.to_string(),
                    a.principal.to_string(),
                    a.operation,
                )
            })
        })
        .collect();
    out.sort();
    out
}

/// `--sync-acls`: the source's bindings appear on es; one deleted on the
/// source goes from es; one made on es by hand stays.
#[test]
fn a_link_syncs_the_sources_acls() {
    let dir = tempfile::tempdir().expect("tmp");
    let source = common::start(dir.path().join("source"), &WITH_ACLS);
    let target = common::start(dir.path().join("target"), &WITH_ACLS);
    const TOPIC_T: i8 = 2;
    const GROUP_T: i8 = 3;
    const READ: i8 = 3;
    const WRITE: i8 = 4;
    acl(&source.addr, false, TOPIC_T, "payments", "User:alice", READ);
    acl(&source.addr, false, TOPIC_T, "payments", "User:bob", WRITE);
    acl(&source.addr, false, GROUP_T, "billing", "User:alice", READ);
    acl(&target.addr, false, TOPIC_T, "local", "User:carol", READ);
    mirror(
        &target.addr,
        &[
            "link",
            "create",
            "src",
            "--source-bootstrap",
            &source.addr,
            "--sync-acls",
        ],
    );
    mirror(
        &target.addr,
        &["groups", "--link", "src", "--group-sync-interval-ms", "500"],
    );
    let synced = |want: &[(i8, &str, &str, i8)]| {
        let want: Vec<(i8, String, String, i8)> = want
            .iter()
            .map(|(t, n, p, o)| (*t, n.to_string(), p.to_string(), *o))
            .collect();
        eventually(TIMEOUT, "the ACLs synced", || {
            (acls(&target.addr) == want).then_some(())
        });
    };
    synced(&[
        (TOPIC_T, "local", "User:carol", READ),
        (TOPIC_T, "payments", "User:alice", READ),
        (TOPIC_T, "payments", "User:bob", WRITE),
        (GROUP_T, "billing", "User:alice", READ),
    ]);
    acl(&source.addr, true, TOPIC_T, "payments", "User:bob", WRITE);
    synced(&[
        (TOPIC_T, "local", "User:carol", READ),
        (TOPIC_T, "payments", "User:alice", READ),
        (GROUP_T, "billing", "User:alice", READ),
    ]);
    target.stop();
    source.stop();
}

/// The source deletes offsets the mirror has not copied yet (DeleteRecords
/// here; retention does the same). librdkafka's fetch of the partition
/// then fails with "offset out of range" and stops: the mirror must close
/// the gap at the source's new log start, report it, assign the partition
/// again and copy what follows at its source offsets.
///
/// An open transaction on the source holds the mirror back
/// (read_committed reads stop at it), so the deletion is certain to come
/// before the mirror could copy the records it deletes.
#[test]
fn a_mirror_steps_over_offsets_the_source_deleted_before_it_copied_them() {
    const T: &str = "deleted";
    let dir = tempfile::tempdir().expect("tmp");
    let source = common::start(dir.path().join("source"), &[]);
    let target = common::start(dir.path().join("target"), &[]);
    create_topic(&source.addr, T, 1, &[]);
    produce_records(&source.addr, T, 1, 10, 0);
    link_source(&target.addr, &source.addr);
    mirror(&target.addr, &["topic", "create", T, "--link", "src"]);
    let end_is = |want: i64| mirrored_end_at(&target.addr, T, want);
    end_is(10);
    // The lag status shows is current: records produced now are copied
    // long before the next refresh (5 s) asks the source, and status
    // never shows es's end past the source's high watermark (checked by
    // status_of at every look).
    produce_records(&source.addr, T, 1, 5, 10);
    end_is(15);
    let before = read_topic(&source.addr, T, 1, 15);

    // Offsets 15-19: an open transaction; 20-29: plain records behind it.
    let txn: BaseProducer = client_config(&source.addr)
        .set("transactional.id", "mirror-test-deleted")
        .create()
        .expect("transactional producer");
    txn.init_transactions(TIMEOUT).expect("init");
    txn.begin_transaction().expect("begin");
    for i in 0..5 {
        let key = format!("open-{i}");
        let rec: BaseRecord<'_, String, [u8]> = BaseRecord::to(T).partition(0).key(&key);
        txn.send(rec).expect("send");
    }
    txn.flush(TIMEOUT).expect("flush");
    produce_records(&source.addr, T, 1, 10, 20);
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(T, 0, Offset::Offset(20))
        .expect("offset");
    let deleted =
        block_on(common::admin(&source.addr).delete_records(&tpl, &common::admin_opts(TIMEOUT)))
            .expect("delete records");
    assert_eq!(
        deleted.elements()[0].offset(),
        Offset::Offset(20),
        "the source's log starts at 20"
    );
    txn.abort_transaction(TIMEOUT).expect("abort");
    // The abort marker is offset 30; more records after it.
    produce_records(&source.addr, T, 1, 5, 31);

    let t = end_is(36);
    let p = &t["partitions"][0];
    assert_eq!(p["offsets_skipped"].as_i64(), Some(5), "{t}");
    let after = read_topic(&source.addr, T, 1, 15);
    assert_eq!(after.first().map(|r| r.1), Some(20));
    let mut want = before.clone();
    want.extend(after);
    assert_eq!(
        read_topic(&target.addr, T, 1, 30),
        want,
        "the records before the gap kept, those after it at their source offsets"
    );
    assert!(target
        .log_text()
        .contains("the source deleted offsets before they were copied"));
    // Copying again ends the partition's error.
    eventually(TIMEOUT, "the partition's error to clear", || {
        let t = status_of(&target.addr, T);
        (t["state"] == "active" && t["partitions"][0]["error"].is_null()).then_some(())
    });
    target.stop();
    source.stop();
}

/// The source stops: status says failed and why; the source starts again
/// on the same data and address: the mirror resumes where it stopped,
/// nothing written twice. Then the source topic is deleted: failed, with
/// the reason, and the mirror topic's records stay as they were.
#[test]
fn a_mirror_reports_source_failures_and_resumes_exactly_where_it_stopped() {
    let dir = tempfile::tempdir().expect("tmp");
    let port = common::cluster::free_port();
    let listener = format!("PLAINTEXT://127.0.0.1:{port}");
    let source_flags = ["--listener", &listener, "--default-partitions", "2"];
    let source_dir = dir.path().join("source");
    let source = common::start(source_dir.clone(), &source_flags);
    let target = common::start(dir.path().join("target"), &[]);
    produce_plain(&source.addr, 20, 0);
    link_source(&target.addr, &source.addr);
    mirror(&target.addr, &["topic", "create", TOPIC, "--link", "src"]);
    let want = read_all(&source.addr, 2, 20);
    caught_up(&target.addr, &want);

    let source_addr = source.addr.clone();
    source.stop();
    let failed = |what: &str| {
        eventually(Duration::from_secs(90), what, || {
            let t = status_of(&target.addr, TOPIC);
            (t["state"] == "failed").then(|| t["error"].as_str().unwrap_or("").to_string())
        })
    };
    let reason = failed("status to report the unreachable source");
    eprintln!("source stopped: {reason}");
    assert!(!reason.is_empty(), "a failure names its reason");

    let source = common::start(source_dir, &source_flags);
    assert_eq!(source.addr, source_addr);
    produce_plain(&source.addr, 10, 20);
    let want = read_all(&source.addr, 2, 30);
    caught_up(&target.addr, &want);
    assert_eq!(read_all(&target.addr, 2, 30), want);
    let t = eventually(TIMEOUT, "status active again", || {
        let t = status_of(&target.addr, TOPIC);
        (t["state"] == "active").then_some(t)
    });
    let copied: u64 = t["partitions"]
        .as_array()
        .expect("partitions")
        .iter()
        .map(|p| p["records_copied"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(copied, 30, "every record appended once: {t}");

    let r =
        block_on(common::admin(&source.addr).delete_topics(&[TOPIC], &common::admin_opts(TIMEOUT)))
            .expect("delete topics");
    assert!(r[0].is_ok(), "{r:?}");
    let reason = failed("status to report the deleted source topic");
    eprintln!("source topic deleted: {reason}");
    assert!(reason.contains(TOPIC), "{reason}");
    assert_eq!(
        read_all(&target.addr, 2, 30),
        want,
        "the mirror topic keeps its records"
    );
    target.stop();
    source.stop();
}

/// A source topic deleted and created again under the same name is
/// another topic (another id) whose offsets start over at 0; with more
/// records than the mirror holds, librdkafka would fetch them at the
/// mirror's end. Deleted and created again at once (before a refresh can
/// see it gone): status says failed with the reason, the mirror topic keeps
/// exactly the records it copied and gets none of the new topic's, and
/// promotion keeps them as they are.
#[test]
fn a_source_topic_created_again_is_never_appended_to_its_mirror() {
    use rdkafka::admin::{NewTopic, TopicReplication};
    const T: &str = "recreated";
    let dir = tempfile::tempdir().expect("tmp");
    let source = common::start(dir.path().join("source"), &[]);
    let target = common::start(dir.path().join("target"), &[]);
    create_topic(&source.addr, T, 1, &[]);
    produce_records(&source.addr, T, 1, 10, 0);
    link_source(&target.addr, &source.addr);
    mirror(&target.addr, &["topic", "create", T, "--link", "src"]);
    mirrored_end_at(&target.addr, T, 10);
    let copied = read_topic(&source.addr, T, 1, 10);
    assert_eq!(read_topic(&target.addr, T, 1, 10), copied);

    let r = block_on(common::admin(&source.addr).delete_topics(&[T], &common::admin_opts(TIMEOUT)))
        .expect("delete topics");
    assert!(r[0].is_ok(), "{r:?}");
    eventually(TIMEOUT, "the source topic created again", || {
        let t = NewTopic::new(T, 1, TopicReplication::Fixed(1));
        let r =
            block_on(common::admin(&source.addr).create_topics(&[t], &common::admin_opts(TIMEOUT)))
                .ok()?;
        r[0].is_ok().then_some(())
    });
    produce_records(&source.addr, T, 1, 25, 1000);

    let reason = eventually(
        TIMEOUT,
        "status to report the recreated source topic",
        || {
            let t = status_of(&target.addr, T);
            let e = t["error"].as_str().unwrap_or_default().to_string();
            (t["state"] == "failed" && e.contains("deleted and created again")).then_some(e)
        },
    );
    eprintln!("source topic created again: {reason}");
    assert!(
        reason.contains(T)
            && reason.contains("promote")
            && reason.contains("delete the mirror topic"),
        "{reason}"
    );
    let t = status_of(&target.addr, T);
    assert_eq!(
        t["partitions"][0]["mirrored_end"].as_i64(),
        Some(10),
        "no record of the new topic appended: {t}"
    );
    assert_eq!(
        read_topic(&target.addr, T, 1, 10),
        copied,
        "the mirror topic keeps exactly the records it copied"
    );

    // Promotion keeps what was copied, as it is.
    let out = mirror(&target.addr, &["promote", T, "--timeout-s", "30"]);
    assert!(out.contains(&format!("promoted {T}")), "{out}");
    let t = status_of(&target.addr, T);
    assert_eq!(t["state"], "promoted", "{t}");
    assert_eq!(t["partitions"][0]["mirrored_end"].as_i64(), Some(10), "{t}");
    assert_eq!(read_topic(&target.addr, T, 1, 10), copied);
    target.stop();
    source.stop();
}

/// What a mirror follows after it started: a topic created on the source
/// that a `--pattern` mirror matches, a source partition count that grows,
/// a copied topic config changed on the source; and a LogAppendTime topic
/// keeps its timestamps and their type.
#[test]
fn a_pattern_mirror_follows_new_topics_partitions_configs_and_timestamp_types() {
    let dir = tempfile::tempdir().expect("tmp");
    let source = common::start(dir.path().join("source"), &[]);
    let target = common::start(dir.path().join("target"), &[]);
    create_topic(
        &source.addr,
        "logs.a",
        1,
        &[("message.timestamp.type", "LogAppendTime")],
    );
    produce_records(&source.addr, "logs.a", 1, 5, 0);
    let want_a = read_topic(&source.addr, "logs.a", 1, 5);
    assert!(want_a.iter().all(|r| r.6 == "log-append"), "{want_a:?}");
    assert!(
        want_a.iter().all(|r| r.5 != 1_700_000_000_000 + r.1),
        "the source's append times, not the producer's"
    );
    link_source(&target.addr, &source.addr);
    mirror(
        &target.addr,
        &["topic", "create", "--link", "src", "--pattern", r"logs\..*"],
    );
    assert_eq!(
        read_topic(&target.addr, "logs.a", 1, 5),
        want_a,
        "same offsets, timestamps and timestamp type"
    );

    create_topic(&source.addr, "logs.b", 2, &[]);
    produce_records(&source.addr, "logs.b", 2, 6, 0);
    let want_b = read_topic(&source.addr, "logs.b", 2, 6);
    eventually(TIMEOUT, "logs.b mirrored", || {
        (partition_count(&target.addr, "logs.b") == 2).then_some(())
    });
    assert_eq!(read_topic(&target.addr, "logs.b", 2, 6), want_b);

    use rdkafka::admin::{AlterConfig, NewPartitions, ResourceSpecifier};
    let a = common::admin(&source.addr);
    let r = block_on(a.create_partitions(
        &[NewPartitions::new("logs.a", 3)],
        &common::admin_opts(TIMEOUT),
    ))
    .expect("create partitions");
    assert!(r[0].is_ok(), "{r:?}");
    let r = block_on(
        a.alter_configs(
            &[AlterConfig::new(ResourceSpecifier::Topic("logs.a"))
                .set("message.timestamp.type", "LogAppendTime")
                .set("retention.ms", "3600000")],
            &common::admin_opts(TIMEOUT),
        ),
    )
    .expect("alter configs");
    assert!(r[0].is_ok(), "{r:?}");
    eventually(TIMEOUT, "logs.a grown to 3 partitions on es", || {
        (partition_count(&target.addr, "logs.a") == 3).then_some(())
    });
    eventually(TIMEOUT, "logs.a's retention.ms on es", || {
        (topic_config(&target.addr, "logs.a", "retention.ms").as_deref() == Some("3600000"))
            .then_some(())
    });
    produce_records(&source.addr, "logs.a", 3, 3, 5);
    let want_a = read_topic(&source.addr, "logs.a", 3, 8);
    assert_eq!(read_topic(&target.addr, "logs.a", 3, 8), want_a);
    assert_eq!(
        topic_config(&target.addr, "logs.a", "message.timestamp.type").as_deref(),
        Some("LogAppendTime")
    );
    target.stop();
    source.stop();
}
