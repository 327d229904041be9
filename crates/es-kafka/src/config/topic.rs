//! A topic's configuration: its validated overrides over the broker's
//! defaults, the effective value and source of each config, what
//! DescribeConfigs reports for a topic resource, and the typed accessors
//! (and [`TopicRules`]) the rest of the broker reads.

use std::collections::BTreeMap;

use crate::codec::compression::Compression;

use super::broker::BrokerTopicDefaults;
use super::rules::{CleanupPolicy, SubjectStrategy, TimestampType, TopicRules};
use super::table::{
    topic_config_def, ConfigSource, ConfigType, TopicConfigDef, INTERNAL_SEGMENT_BYTES,
    TOPIC_CONFIGS,
};
use super::validate::{validate_topic_config, ConfigError};

/// One described config entry.
#[derive(Clone, Debug, PartialEq)]
pub struct DescribedConfig {
    pub name: &'static str,
    pub value: String,
    pub source: ConfigSource,
    pub ty: ConfigType,
    pub doc: &'static str,
    /// (name, value, source) synonyms, most specific first.
    pub synonyms: Vec<(String, String, ConfigSource)>,
}

/// A topic's configuration: its overrides, validated, over the defaults.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TopicConfig {
    overrides: BTreeMap<String, String>,
    broker: BrokerTopicDefaults,
}

/// Broker configs Kafka defines with no default of their own (their value
/// comes from a coarser synonym such as `log.retention.hours`), so Kafka's
/// DescribeConfigs lists no default-level synonym for their topic configs.
const BROKER_UNSET_DEFAULTS: [&str; 4] = [
    "log.retention.ms",
    "log.roll.ms",
    "log.roll.jitter.ms",
    "log.flush.interval.ms",
];

impl TopicConfig {
    /// Builds a config from overrides, validating every one.
    pub fn new(
        overrides: BTreeMap<String, String>,
        broker: BrokerTopicDefaults,
    ) -> Result<Self, ConfigError> {
        let mut clean = BTreeMap::new();
        for (k, v) in overrides {
            validate_topic_config(&k, Some(&v))?;
            clean.insert(k, v.trim().to_string());
        }
        Ok(TopicConfig {
            overrides: clean,
            broker,
        })
    }

    /// The overrides, as stored in `topic.json`.
    pub fn overrides(&self) -> &BTreeMap<String, String> {
        &self.overrides
    }

    /// The same overrides over other broker defaults (after a dynamic
    /// broker config changed). The overrides were validated already.
    pub fn with_broker(&self, broker: BrokerTopicDefaults) -> TopicConfig {
        TopicConfig {
            overrides: self.overrides.clone(),
            broker,
        }
    }

    /// The value without an override, and where it comes from.
    fn default_of(&self, d: &TopicConfigDef) -> (String, ConfigSource) {
        let mut levels = self.broker.levels(d);
        let (_, v, source) = levels.swap_remove(0);
        (v, source)
    }

    /// The effective value and where it came from.
    pub fn get(&self, name: &str) -> Option<(String, ConfigSource)> {
        let d = topic_config_def(name)?;
        Some(match self.overrides.get(name) {
            Some(v) => (v.clone(), ConfigSource::DynamicTopic),
            None => self.default_of(d),
        })
    }

    /// Describes every config (or only `keys`, ignoring unknown names as Kafka does).
    ///
    /// The configs Apache Kafka does not define (Confluent Server's and
    /// Redpanda's schema validation, [`is_extension`]) are listed only when
    /// set on the topic or asked for by name: a topic that does not use them
    /// describes exactly as on Apache Kafka (and clients and the differential
    /// tests see Kafka's list).
    pub fn describe(&self, keys: Option<&[String]>) -> Vec<DescribedConfig> {
        TOPIC_CONFIGS
            .iter()
            .filter(|d| !d.internal)
            .filter(|d| match keys {
                Some(ks) => ks.iter().any(|k| k == d.name),
                None => !is_extension(d.name) || self.overrides.contains_key(d.name),
            })
            .map(|d| {
                let (default, default_source) = self.default_of(d);
                let mut synonyms = Vec::new();
                if let Some(v) = self.overrides.get(d.name) {
                    synonyms.push((d.name.to_string(), v.clone(), ConfigSource::DynamicTopic));
                }
                // Kafka lists only broker-level synonyms: none for a topic
                // config without one, and not the default of a broker config
                // whose default Kafka leaves unset (it comes from an `hours`
                // synonym that DescribeConfigs drops).
                if d.broker_name.is_some() {
                    synonyms.extend(
                        self.broker
                            .levels(d)
                            .into_iter()
                            .filter(|(n, _, s)| {
                                *s != ConfigSource::Default || !BROKER_UNSET_DEFAULTS.contains(n)
                            })
                            .map(|(n, v, s)| (n.to_string(), v, s)),
                    );
                }
                let (value, source) = match self.overrides.get(d.name) {
                    Some(v) => (v.clone(), ConfigSource::DynamicTopic),
                    None => (default, default_source),
                };
                DescribedConfig {
                    name: d.name,
                    value,
                    source,
                    ty: d.ty,
                    doc: d.doc,
                    synonyms,
                }
            })
            .collect()
    }

    fn parse_i64(&self, name: &str) -> i64 {
        let parsed = self.get(name).and_then(|(v, _)| v.parse::<i64>().ok());
        parsed
            .or_else(|| topic_config_def(name).and_then(|d| d.default.parse().ok()))
            .unwrap_or(0)
    }

    /// `max.message.bytes`: the largest batch accepted.
    pub fn max_message_bytes(&self) -> usize {
        usize::try_from(self.parse_i64("max.message.bytes")).unwrap_or(0)
    }

    pub fn timestamp_type(&self) -> TimestampType {
        match self.get("message.timestamp.type") {
            Some((v, _)) if v == "LogAppendTime" => TimestampType::LogAppendTime,
            _ => TimestampType::CreateTime,
        }
    }

    pub fn timestamp_before_max_ms(&self) -> i64 {
        self.parse_i64("message.timestamp.before.max.ms")
    }

    pub fn timestamp_after_max_ms(&self) -> i64 {
        self.parse_i64("message.timestamp.after.max.ms")
    }

    /// The settings the produce and fetch paths check, parsed.
    pub fn rules(&self) -> TopicRules {
        let compression = self.compression_type();
        TopicRules {
            max_message_bytes: self.max_message_bytes(),
            timestamp_type: self.timestamp_type(),
            timestamp_before_max_ms: self.timestamp_before_max_ms(),
            timestamp_after_max_ms: self.timestamp_after_max_ms(),
            compact: self.cleanup_policy().compact,
            // "uncompressed" and "producer" are no codec's name.
            compression: Compression::ALL
                .into_iter()
                .find(|c| c.name() == compression)
                .unwrap_or(Compression::None),
            compression_as_produced: compression == "producer",
            min_insync_replicas: self.min_insync_replicas(),
            key_schema: self.schema_validation("key"),
            value_schema: self.schema_validation("value"),
        }
    }

    /// Schema id validation of `part` (`key` or `value`): on when
    /// Confluent's or Redpanda's flag is true, with the strategy set under
    /// Confluent's name, else under Redpanda's, else TopicNameStrategy.
    pub fn schema_validation(&self, part: &str) -> Option<SubjectStrategy> {
        let set = |name: String| {
            self.overrides
                .get(&name)
                .is_some_and(|v| v.eq_ignore_ascii_case("true"))
        };
        let on = set(format!("confluent.{part}.schema.validation"))
            || set(format!("redpanda.{part}.schema.id.validation"));
        if !on {
            return None;
        }
        let strategy = self
            .overrides
            .get(&format!("confluent.{part}.subject.name.strategy"))
            .or_else(|| {
                self.overrides
                    .get(&format!("redpanda.{part}.subject.name.strategy"))
            })
            .and_then(|v| SubjectStrategy::parse(v));
        Some(strategy.unwrap_or(SubjectStrategy::TopicName))
    }

    /// `min.insync.replicas` (at least 1).
    pub fn min_insync_replicas(&self) -> usize {
        self.parse_i64("min.insync.replicas")
            .clamp(1, i64::from(i16::MAX)) as usize
    }

    /// `segment.bytes`, or Kafka's internal `internal.segment.bytes` when set.
    pub fn segment_bytes(&self) -> u64 {
        let internal = self
            .overrides
            .get(INTERNAL_SEGMENT_BYTES)
            .and_then(|v| v.parse::<i64>().ok());
        internal
            .unwrap_or_else(|| self.parse_i64("segment.bytes"))
            .max(1) as u64
    }

    /// `cleanup.policy`: which of retention (`delete`) and compaction
    /// (`compact`) apply to the topic.
    pub fn cleanup_policy(&self) -> CleanupPolicy {
        let v = self
            .get("cleanup.policy")
            .map(|(v, _)| v)
            .unwrap_or_default();
        let has = |w: &str| v.split(',').any(|i| i.trim() == w);
        CleanupPolicy {
            delete: has("delete"),
            compact: has("compact"),
        }
    }

    /// `retention.ms`; `None` for -1 (keep forever).
    pub fn retention_ms(&self) -> Option<i64> {
        Some(self.parse_i64("retention.ms")).filter(|ms| *ms >= 0)
    }

    /// `retention.bytes`; `None` for any negative value (Kafka: no limit).
    pub fn retention_bytes(&self) -> Option<u64> {
        u64::try_from(self.parse_i64("retention.bytes")).ok()
    }

    /// `delete.retention.ms`: how long a tombstone outlives compaction.
    pub fn delete_retention_ms(&self) -> i64 {
        self.parse_i64("delete.retention.ms").max(0)
    }

    /// `min.cleanable.dirty.ratio`, in [0, 1].
    pub fn min_cleanable_dirty_ratio(&self) -> f64 {
        let parsed = self
            .get("min.cleanable.dirty.ratio")
            .and_then(|(v, _)| v.parse::<f64>().ok())
            .filter(|r| (0.0..=1.0).contains(r));
        parsed.unwrap_or(0.5)
    }

    pub fn segment_ms(&self) -> i64 {
        self.parse_i64("segment.ms")
    }

    /// `min.compaction.lag.ms` (at least 0).
    pub fn min_compaction_lag_ms(&self) -> i64 {
        self.parse_i64("min.compaction.lag.ms").max(0)
    }

    /// `max.compaction.lag.ms` (at least 1).
    pub fn max_compaction_lag_ms(&self) -> i64 {
        self.parse_i64("max.compaction.lag.ms").max(1)
    }

    /// How old the active segment may get before it is rolled: `segment.ms`,
    /// or `max.compaction.lag.ms` when that is shorter on a compacted topic,
    /// so that records overdue for compaction leave the active segment (as
    /// Kafka's `LogConfig.maxSegmentMs`).
    pub fn roll_ms(&self) -> i64 {
        if self.cleanup_policy().compact {
            self.segment_ms().min(self.max_compaction_lag_ms())
        } else {
            self.segment_ms()
        }
    }

    pub fn index_interval_bytes(&self) -> u64 {
        self.parse_i64("index.interval.bytes").max(0) as u64
    }

    /// Records between fsyncs.
    pub fn flush_messages(&self) -> u64 {
        self.parse_i64("flush.messages").max(1) as u64
    }

    /// `preallocate`: zero-fill the active segment ahead (es-storage `prealloc.rs`).
    pub fn preallocate(&self) -> bool {
        self.get("preallocate")
            .is_some_and(|(v, _)| v.eq_ignore_ascii_case("true"))
    }

    pub fn flush_ms(&self) -> u64 {
        self.parse_i64("flush.ms").max(0) as u64
    }

    /// `compression.type` as configured ("producer" or a codec name).
    pub fn compression_type(&self) -> String {
        self.get("compression.type")
            .map(|(v, _)| v)
            .unwrap_or_else(|| "producer".to_string())
    }
}

/// A topic config Apache Kafka does not define: Confluent Server's and
/// Redpanda's names for produce-time schema validation.
pub fn is_extension(name: &str) -> bool {
    name.starts_with("confluent.") || name.starts_with("redpanda.")
}
