//! Unit tests of the config table, validation, topic configs and broker
//! configs.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::table::LONG_MAX_STR;
use super::*;

fn cfg(pairs: &[(&str, &str)]) -> Result<TopicConfig, ConfigError> {
    TopicConfig::new(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        BrokerTopicDefaults::default(),
    )
}

#[test]
fn table_is_sorted_and_defaults_are_valid() {
    for w in TOPIC_CONFIGS.windows(2) {
        assert!(w[0].name < w[1].name, "{} before {}", w[0].name, w[1].name);
    }
    for d in TOPIC_CONFIGS.iter().filter(|d| !d.internal) {
        assert_eq!(
            validate_topic_config(d.name, Some(d.default)),
            Ok(()),
            "{}",
            d.name
        );
    }
}

#[test]
fn validation() {
    assert!(matches!(
        validate_topic_config("nope", Some("1")),
        Err(ConfigError::UnknownName(_))
    ));
    assert!(validate_topic_config("retention.ms", Some("-1")).is_ok());
    assert!(validate_topic_config("retention.ms", Some("-2")).is_err());
    assert!(validate_topic_config("retention.ms", Some("abc")).is_err());
    assert!(validate_topic_config("cleanup.policy", Some("compact,delete")).is_ok());
    assert!(validate_topic_config("cleanup.policy", Some("compact, nope")).is_err());
    assert!(validate_topic_config("message.timestamp.type", Some("LogAppendTime")).is_ok());
    assert!(validate_topic_config("message.timestamp.type", Some("logappendtime")).is_err());
    assert!(validate_topic_config("min.cleanable.dirty.ratio", Some("1.5")).is_err());
    assert!(validate_topic_config("max.message.bytes", Some("3000000000")).is_err());
    assert!(validate_topic_config("preallocate", Some("TRUE")).is_ok());
    assert!(matches!(
        validate_topic_config("segment.ms", None),
        Err(ConfigError::NullValue(_))
    ));
}

#[test]
fn accessors_and_sources() {
    let c = cfg(&[
        ("message.timestamp.type", "LogAppendTime"),
        ("max.message.bytes", " 2048 "),
    ])
    .expect("valid");
    assert_eq!(c.timestamp_type(), TimestampType::LogAppendTime);
    assert_eq!(c.max_message_bytes(), 2048);
    assert_eq!(
        c.get("max.message.bytes"),
        Some(("2048".to_string(), ConfigSource::DynamicTopic))
    );
    assert_eq!(
        c.get("retention.ms"),
        Some(("604800000".to_string(), ConfigSource::Default))
    );
    assert_eq!(
        c.get("flush.messages"),
        Some(("1".to_string(), ConfigSource::StaticBroker))
    );
    assert_eq!(c.flush_messages(), 1);
    let d = cfg(&[]).expect("valid");
    assert_eq!(d.max_message_bytes(), 1_048_588);
    assert_eq!(d.timestamp_type(), TimestampType::CreateTime);
    assert_eq!(d.segment_bytes(), 1 << 30);
    assert!(cfg(&[("segment.bytes", "10")]).is_err());
}

#[test]
fn describe_filters_and_lists_synonyms() {
    let c = cfg(&[("retention.ms", "1000")]).expect("valid");
    let all = c.describe(None);
    assert_eq!(
        all.len(),
        TOPIC_CONFIGS
            .iter()
            .filter(|d| !d.internal && !super::topic::is_extension(d.name))
            .count(),
        "Apache Kafka's configs, without the schema validation extensions unless set"
    );
    let set = cfg(&[("confluent.value.schema.validation", "true")]).expect("valid");
    assert_eq!(
        set.describe(None).len(),
        all.len() + 1,
        "an extension set is listed"
    );
    let asked = vec!["confluent.key.schema.validation".to_string()];
    assert_eq!(
        c.describe(Some(&asked)).len(),
        1,
        "and one asked for by name"
    );
    let keys = vec!["retention.ms".to_string(), "bogus".to_string()];
    let some = c.describe(Some(&keys));
    assert_eq!(some.len(), 1);
    assert_eq!(some[0].value, "1000");
    assert_eq!(some[0].source, ConfigSource::DynamicTopic);
    // Kafka's broker config log.retention.ms has no default of its own
    // (log.retention.hours gives it), so only the topic level is listed.
    assert_eq!(
        some[0].synonyms,
        vec![(
            "retention.ms".to_string(),
            "1000".to_string(),
            ConfigSource::DynamicTopic
        )]
    );
    let keys = vec![
        "cleanup.policy".to_string(),
        "remote.storage.enable".to_string(),
    ];
    let some = c.describe(Some(&keys));
    assert_eq!(
        some[0].synonyms,
        vec![(
            "log.cleanup.policy".to_string(),
            "delete".to_string(),
            ConfigSource::Default
        )]
    );
    // A topic config with no broker-level synonym lists none.
    assert!(some[1].synonyms.is_empty());
}

#[test]
fn broker_describe_is_sorted_and_unique() {
    let b = BrokerSettings {
        node_id: 0,
        log_dir: "/d".into(),
        listener: "PLAINTEXT://127.0.0.1:9092".into(),
        advertised_listener: "PLAINTEXT://127.0.0.1:9092".into(),
        security: vec![(
            "connections.max.reauth.ms",
            "0".into(),
            crate::config::ConfigType::Long,
            true,
        )],
        auto_create_topics: true,
        default_partitions: 1,
        frame_bytes_max: 100,
        defaults: BrokerTopicDefaults::default(),
        retention_check_interval_ms: 300_000,
        compaction_interval_ms: 15_000,
        group_min_session_timeout_ms: 6_000,
        group_max_session_timeout_ms: 1_800_000,
        offsets_topic_partitions: 1,
        transaction_state_partitions: 6,
        share: crate::config::ShareBrokerConfig::default(),
    };
    let d = b.describe();
    for w in d.windows(2) {
        assert!(w[0].name < w[1].name);
    }
    assert!(d
        .iter()
        .any(|e| e.name == "message.max.bytes" && e.value == "1048588"));
    assert!(d
        .iter()
        .any(|e| e.name == "log.retention.check.interval.ms" && e.value == "300000"));
    assert!(d
        .iter()
        .any(|e| e.name == "group.share.record.lock.duration.ms"
            && e.value == "30000"
            && e.source == crate::config::ConfigSource::Default));
    assert!(!d.iter().any(|e| e.name.starts_with("internal.")));
    // The coordinator topics' partition counts are the flags': a default
    // reads as Kafka's default source, a changed one as a static config.
    let get = |name: &str| d.iter().find(|e| e.name == name).expect(name);
    let offsets = get("offsets.topic.num.partitions");
    assert_eq!(
        (offsets.value.as_str(), offsets.source),
        ("1", ConfigSource::Default)
    );
    let txn = get("transaction.state.log.num.partitions");
    assert_eq!(
        (txn.value.as_str(), txn.source),
        ("6", ConfigSource::StaticBroker)
    );
    assert_eq!(
        get("transaction.state.log.segment.bytes").value,
        "104857600"
    );
}

#[test]
fn dynamic_broker_configs_are_the_topic_configs_broker_names() {
    assert_eq!(
        broker_dynamic_def("log.flush.interval.messages").map(|d| d.name),
        Some("flush.messages")
    );
    assert_eq!(
        broker_dynamic_def("log.retention.ms").map(|d| d.name),
        Some("retention.ms")
    );
    assert!(broker_dynamic_def("broker.id").is_none());
    assert!(broker_dynamic_def("flush.messages").is_none(), "topic name");
    assert!(broker_dynamic_def(INTERNAL_SEGMENT_BYTES).is_none());
    assert!(validate_broker_config("log.flush.interval.messages", Some("0")).is_err());
    assert!(validate_broker_config("log.cleanup.policy", Some("compact,delete")).is_ok());
    let err = validate_broker_config("log.retention.ms", Some("x")).expect_err("bad");
    assert!(err.to_string().contains("log.retention.ms"), "{err}");
    let (clean, dropped) = DynamicBrokerConfigs {
        broker: BTreeMap::from([
            ("log.retention.ms".to_string(), " 5 ".to_string()),
            ("broker.id".to_string(), "8".to_string()),
        ]),
        cluster_default: BTreeMap::from([("log.segment.bytes".to_string(), "1".to_string())]),
    }
    .sanitized();
    assert_eq!(
        clean.broker,
        BTreeMap::from([("log.retention.ms".to_string(), "5".to_string())])
    );
    // The cluster level gets Kafka's min.insync.replicas when it has none.
    assert_eq!(
        clean.cluster_default,
        BTreeMap::from([("min.insync.replicas".to_string(), "1".to_string())])
    );
    assert_eq!(dropped, vec!["broker.id", "log.segment.bytes"]);
}

#[test]
fn dynamic_levels_order_values_sources_and_synonyms() {
    let dynamic = DynamicBrokerConfigs {
        broker: BTreeMap::from([("log.flush.interval.messages".to_string(), "9".to_string())]),
        cluster_default: BTreeMap::from([
            ("log.flush.interval.messages".to_string(), "8".to_string()),
            ("log.retention.ms".to_string(), "1000".to_string()),
        ]),
    };
    let defaults = BrokerTopicDefaults {
        dynamic: Arc::new(dynamic),
        ..BrokerTopicDefaults::default()
    };
    let c = TopicConfig::new(BTreeMap::new(), defaults.clone()).expect("valid");
    assert_eq!(c.flush_messages(), 9);
    assert_eq!(c.retention_ms(), Some(1000));
    assert_eq!(
        c.get("retention.ms"),
        Some(("1000".to_string(), ConfigSource::DynamicDefaultBroker))
    );
    let keys = vec!["flush.messages".to_string()];
    let d = c.describe(Some(&keys));
    let sources: Vec<(String, ConfigSource)> = d[0]
        .synonyms
        .iter()
        .map(|(_, v, s)| (v.clone(), *s))
        .collect();
    assert_eq!(
        sources,
        vec![
            ("9".to_string(), ConfigSource::DynamicBroker),
            ("8".to_string(), ConfigSource::DynamicDefaultBroker),
            ("1".to_string(), ConfigSource::StaticBroker),
            (LONG_MAX_STR.to_string(), ConfigSource::Default),
        ]
    );
    // A topic override still wins over every broker level.
    let own = c.with_broker(defaults.clone());
    assert_eq!(own, c);
    let o = TopicConfig::new(
        BTreeMap::from([("flush.messages".to_string(), "3".to_string())]),
        defaults.clone(),
    )
    .expect("valid");
    assert_eq!(o.flush_messages(), 3);
    // The broker resource reports the same levels, read-only only for
    // configs that cannot change at run time.
    let settings = BrokerSettings {
        node_id: 0,
        log_dir: "/d".into(),
        listener: "PLAINTEXT://l:1".into(),
        advertised_listener: "PLAINTEXT://l:1".into(),
        security: Vec::new(),
        auto_create_topics: true,
        default_partitions: 1,
        frame_bytes_max: 100,
        defaults,
        retention_check_interval_ms: 1,
        compaction_interval_ms: 1,
        group_min_session_timeout_ms: 1,
        group_max_session_timeout_ms: 2,
        offsets_topic_partitions: 1,
        transaction_state_partitions: 1,
        share: crate::config::ShareBrokerConfig::default(),
    };
    let all = settings.describe();
    let flush = all
        .iter()
        .find(|e| e.name == "log.flush.interval.messages")
        .expect("flush");
    assert_eq!(
        (flush.value.as_str(), flush.source, flush.read_only),
        ("9", ConfigSource::DynamicBroker, false)
    );
    let id = all.iter().find(|e| e.name == "broker.id").expect("id");
    assert!(id.read_only);
    let cluster: Vec<(&str, String, ConfigSource)> = settings
        .describe_cluster_default()
        .into_iter()
        .map(|e| (e.name, e.value, e.source))
        .collect();
    assert_eq!(
        cluster,
        vec![
            (
                "log.flush.interval.messages",
                "8".to_string(),
                ConfigSource::DynamicDefaultBroker
            ),
            (
                "log.retention.ms",
                "1000".to_string(),
                ConfigSource::DynamicDefaultBroker
            )
        ]
    );
}

#[test]
fn cleanup_and_retention_accessors() {
    let d = cfg(&[]).expect("valid");
    assert_eq!(
        d.cleanup_policy(),
        CleanupPolicy {
            delete: true,
            compact: false
        }
    );
    assert_eq!(d.retention_ms(), Some(604_800_000));
    assert_eq!(d.retention_bytes(), None);
    assert_eq!(d.delete_retention_ms(), 86_400_000);
    assert_eq!(d.min_cleanable_dirty_ratio(), 0.5);
    let c = cfg(&[
        ("cleanup.policy", "compact, delete"),
        ("retention.ms", "-1"),
        ("retention.bytes", "2048"),
        ("delete.retention.ms", "0"),
        ("min.cleanable.dirty.ratio", "0.01"),
    ])
    .expect("valid");
    assert_eq!(
        c.cleanup_policy(),
        CleanupPolicy {
            delete: true,
            compact: true
        }
    );
    assert_eq!(c.retention_ms(), None);
    assert_eq!(c.retention_bytes(), Some(2048));
    assert_eq!(c.delete_retention_ms(), 0);
    assert_eq!(c.min_cleanable_dirty_ratio(), 0.01);
    let compact = cfg(&[("cleanup.policy", "compact")]).expect("valid");
    assert!(!compact.cleanup_policy().delete);
    assert_eq!(
        cfg(&[("retention.bytes", "-5")])
            .expect("valid")
            .retention_bytes(),
        None
    );
}

#[test]
fn internal_segment_bytes_wins_and_is_not_described() {
    assert!(cfg(&[("segment.bytes", "1024")]).is_err());
    let c = cfg(&[(INTERNAL_SEGMENT_BYTES, "1024")]).expect("valid");
    assert_eq!(c.segment_bytes(), 1024);
    assert!(c
        .describe(None)
        .iter()
        .all(|d| d.name != INTERNAL_SEGMENT_BYTES));
    let keys = vec![INTERNAL_SEGMENT_BYTES.to_string()];
    assert!(c.describe(Some(&keys)).is_empty());
    assert_eq!(cfg(&[]).expect("valid").segment_bytes(), 1 << 30);
}

#[test]
fn kafka_s_other_reconfigurable_broker_configs_are_accepted_with_their_ranges() {
    assert_eq!(
        broker_dynamic_def("background.threads").map(|d| d.default),
        Some("10")
    );
    assert!(validate_broker_config("background.threads", Some("9")).is_ok());
    assert!(validate_broker_config("background.threads", Some("0")).is_err());
    assert!(validate_broker_config("sasl.kerberos.min.time.before.relogin", Some("58000")).is_ok());
    assert!(validate_broker_config("sasl.login.refresh.window.factor", Some("0.3")).is_err());
    assert!(validate_broker_config("sasl.login.refresh.buffer.seconds", Some("3601")).is_err());
    assert!(broker_dynamic_def("broker.id").is_none());
    let names: Vec<&str> = super::broker_only::BROKER_ONLY_CONFIGS
        .iter()
        .map(|d| d.name)
        .collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted);
    for d in super::broker_only::BROKER_ONLY_CONFIGS {
        assert_eq!(d.broker_name, Some(d.name));
        assert!(
            super::table::topic_config_def(d.name).is_none(),
            "{}",
            d.name
        );
        assert!(
            d.doc.contains(" es "),
            "{} says what es does with it",
            d.name
        );
    }
}

#[test]
fn schema_validation_configs_under_both_names() {
    let r = cfg(&[]).expect("defaults").rules();
    assert!(!r.validates_schemas());
    assert!(validate_topic_config("confluent.value.schema.validation", Some("yes")).is_err());
    assert!(validate_topic_config(
        "confluent.value.subject.name.strategy",
        Some("RecordNameStrategy")
    )
    .is_err());
    assert!(validate_topic_config(
        "redpanda.value.subject.name.strategy",
        Some("io.confluent.kafka.serializers.subject.RecordNameStrategy")
    )
    .is_err());
    let err = cfg(&[("confluent.key.subject.name.strategy", "Nope")]).unwrap_err();
    assert!(
        err.to_string()
            .contains("must be one of io.confluent.kafka.serializers.subject.TopicNameStrategy"),
        "{err}"
    );

    let c = cfg(&[
        ("confluent.value.schema.validation", "TRUE"),
        (
            "confluent.value.subject.name.strategy",
            "io.confluent.kafka.serializers.subject.RecordNameStrategy",
        ),
        (
            "redpanda.value.subject.name.strategy",
            "TopicRecordNameStrategy",
        ),
        ("redpanda.key.schema.id.validation", "true"),
        (
            "redpanda.key.subject.name.strategy",
            "TopicRecordNameStrategy",
        ),
    ])
    .expect("valid");
    let r = c.rules();
    assert_eq!(
        r.value_schema,
        Some(SubjectStrategy::RecordName),
        "Confluent's name wins"
    );
    assert_eq!(r.key_schema, Some(SubjectStrategy::TopicRecordName));
    assert!(r.validates_schemas());
    let d = c.describe(Some(&["confluent.key.subject.name.strategy".to_string()]));
    assert_eq!(
        d[0].value,
        "io.confluent.kafka.serializers.subject.TopicNameStrategy"
    );
    assert_eq!(d[0].source, ConfigSource::Default);
    let on_off = cfg(&[("redpanda.value.schema.id.validation", "false")]).expect("valid");
    assert_eq!(on_off.rules().value_schema, None);
}
