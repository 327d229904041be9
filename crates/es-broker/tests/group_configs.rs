//! Group configs (Kafka's GROUP config resource, KIP-848) through a real
//! broker: IncrementalAlterConfigs and DescribeConfigs answer as Kafka 4.4
//! does (its messages, sources and synonyms), the consumer group
//! coordinator runs a group with its own heartbeat interval, and the
//! configs survive a restart (they are metadata entries).

mod common;

use common::Broker;
use es_kafka::kafka_protocol::messages::*;
use es_kafka::kafka_protocol::protocol::StrBytes;
use es_test_support::wire::KafkaClient;

const RESOURCE_GROUP: i8 = 32;
const SOURCE_GROUP: i8 = 8;
const SOURCE_DEFAULT: i8 = 5;
const INVALID_CONFIG: i16 = 40;
const INVALID_REQUEST: i16 = 42;
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn client(b: &Broker) -> KafkaClient {
    KafkaClient::connect(&b.addr, "group-configs-test")
}

/// IncrementalAlterConfigs (v1) of one GROUP resource: (error, message).
fn alter(
    c: &mut KafkaClient,
    group: &str,
    ops: &[(i8, &str, Option<&str>)],
) -> (i16, Option<String>) {
    let mut res = incremental_alter_configs_request::AlterConfigsResource::default();
    res.resource_type = RESOURCE_GROUP;
    res.resource_name = s(group);
    for (op, k, v) in ops {
        let mut e = incremental_alter_configs_request::AlterableConfig::default();
        e.name = s(k);
        e.config_operation = *op;
        e.value = v.map(s);
        res.configs.push(e);
    }
    let mut req = IncrementalAlterConfigsRequest::default();
    req.resources = vec![res];
    let r: IncrementalAlterConfigsResponse = c.call(ApiKey::IncrementalAlterConfigs, 1, &req);
    let out = &r.responses[0];
    (
        out.error_code,
        out.error_message.as_ref().map(|m| m.to_string()),
    )
}

/// (value, source, synonyms as (name, value, source)) of one group config.
type Described = (String, i8, Vec<(String, String, i8)>);

fn describe(c: &mut KafkaClient, group: &str, key: &str) -> Described {
    let mut res = describe_configs_request::DescribeConfigsResource::default();
    res.resource_type = RESOURCE_GROUP;
    res.resource_name = s(group);
    res.configuration_keys = Some(vec![s(key)]);
    let mut req = DescribeConfigsRequest::default();
    req.resources = vec![res];
    req.include_synonyms = true;
    let r: DescribeConfigsResponse = c.call(ApiKey::DescribeConfigs, 4, &req);
    let out = &r.results[0];
    assert_eq!(out.error_code, 0, "{:?}", out.error_message);
    assert_eq!(out.configs.len(), 1, "{out:?}");
    let e = &out.configs[0];
    let text = |v: &Option<StrBytes>| v.as_ref().map(|v| v.to_string()).unwrap_or_default();
    (
        text(&e.value),
        e.config_source,
        e.synonyms
            .iter()
            .map(|y| (y.name.to_string(), text(&y.value), y.source))
            .collect(),
    )
}

/// A KIP-848 heartbeat of a new member of `group`: the heartbeat interval
/// the coordinator gives it.
fn join_interval(c: &mut KafkaClient, group: &str, member: &str) -> i32 {
    let mut hb = ConsumerGroupHeartbeatRequest::default();
    hb.group_id = GroupId(s(group));
    hb.member_id = s(member);
    hb.member_epoch = 0;
    hb.rebalance_timeout_ms = 30_000;
    hb.subscribed_topic_names = Some(Vec::new());
    hb.topic_partitions = Some(Vec::new());
    let r: ConsumerGroupHeartbeatResponse = c.call(ApiKey::ConsumerGroupHeartbeat, 1, &hb);
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    r.heartbeat_interval_ms
}

#[test]
fn group_configs_are_validated_described_applied_and_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let b = common::start(data.clone(), &[]);
    let mut c = client(&b);

    // Kafka's refusals, with its messages (checked against Kafka 4.4).
    assert_eq!(
        alter(
            &mut c,
            "g",
            &[(OP_SET, "consumer.session.timeout.ms", Some("70000"))]
        ),
        (
            INVALID_CONFIG,
            Some(
                "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive.".into()
            )
        )
    );
    assert_eq!(
        alter(&mut c, "g", &[(OP_SET, "nope", Some("1"))]),
        (
            INVALID_CONFIG,
            Some("Unknown group config name: nope".into())
        )
    );
    assert_eq!(
        alter(
            &mut c,
            "",
            &[(OP_SET, "consumer.session.timeout.ms", Some("50000"))]
        ),
        (
            INVALID_REQUEST,
            Some("Default group resources are not allowed.".into())
        )
    );
    // Nothing refused was kept.
    let (value, source, _) = describe(&mut c, "g", "consumer.session.timeout.ms");
    assert_eq!((value.as_str(), source), ("45000", SOURCE_DEFAULT));

    // A group that does not exist yet may be configured.
    assert_eq!(
        alter(
            &mut c,
            "g",
            &[
                (OP_SET, "consumer.session.timeout.ms", Some("50000")),
                (OP_SET, "consumer.heartbeat.interval.ms", Some("7000")),
            ]
        ),
        (0, None)
    );
    assert_eq!(
        describe(&mut c, "g", "consumer.session.timeout.ms"),
        (
            "50000".into(),
            SOURCE_GROUP,
            vec![
                (
                    "consumer.session.timeout.ms".into(),
                    "50000".into(),
                    SOURCE_GROUP
                ),
                (
                    "group.consumer.session.timeout.ms".into(),
                    "45000".into(),
                    SOURCE_DEFAULT
                ),
            ]
        )
    );
    assert_eq!(
        describe(&mut c, "g", "share.record.lock.duration.ms"),
        (
            "30000".into(),
            SOURCE_DEFAULT,
            vec![(
                "group.share.record.lock.duration.ms".into(),
                "30000".into(),
                SOURCE_DEFAULT
            )]
        )
    );

    // The coordinator runs "g" with its own interval, other groups with
    // the broker's.
    assert_eq!(join_interval(&mut c, "g", "m1"), 7000);
    assert_eq!(join_interval(&mut c, "other", "m1"), 5000);
    b.stop();

    // After a restart: still described, still applied to the group the
    // coordinator loaded.
    let b = common::start(data.clone(), &[]);
    let mut c = client(&b);
    assert_eq!(
        describe(&mut c, "g", "consumer.heartbeat.interval.ms").0,
        "7000"
    );
    assert_eq!(join_interval(&mut c, "g", "m2"), 7000);

    // Deleting the override brings back the broker's interval.
    assert_eq!(
        alter(
            &mut c,
            "g",
            &[(OP_DELETE, "consumer.heartbeat.interval.ms", None)]
        ),
        (0, None)
    );
    assert_eq!(join_interval(&mut c, "g", "m3"), 5000);
    let (value, source, _) = describe(&mut c, "g", "consumer.heartbeat.interval.ms");
    assert_eq!((value.as_str(), source), ("5000", SOURCE_DEFAULT));
    b.stop();
}
