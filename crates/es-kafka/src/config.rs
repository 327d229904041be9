//! Kafka topic and broker configuration: names, types, defaults, validation,
//! and the sources DescribeConfigs reports.
//!
//! A topic stores only its overrides (in `topic.json`); every other value is
//! the default from [`TOPIC_CONFIGS`], or for the few settings that follow a
//! broker flag, the broker's value. Values are validated before they are
//! stored, so the typed accessors on [`TopicConfig`] never see a bad value
//! (they still fall back to the default rather than panic). This module is
//! sans-io: it parses and describes, it never touches the disk.
//!
//! Dynamic broker configs (AlterConfigs on a BROKER resource) are the
//! broker-level names of the topic configs (`log.retention.ms` for
//! `retention.ms`, ...), as Kafka's dynamic log configs are: a topic without
//! an override of its own takes the per-broker dynamic value, then the
//! cluster-wide dynamic default, then the broker flag, then Kafka's default
//! ([`BrokerTopicDefaults`]). Every other broker config is read-only.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::codec::compression::Compression;

/// Partitions of the `__consumer_offsets` es creates (the broker config
/// `offsets.topic.num.partitions`; Kafka's default is 50, es keeps offsets
/// elsewhere, so one partition is what it has always advertised).
pub const OFFSETS_TOPIC_PARTITIONS: i32 = 1;
/// Kafka's `offsets.topic.segment.bytes` default (100 MiB).
pub const OFFSETS_TOPIC_SEGMENT_BYTES: u64 = 100 * 1024 * 1024;

/// Kafka's `ConfigEntry.ConfigType` codes (DescribeConfigs v3+).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigType {
    Boolean = 1,
    String = 2,
    Int = 3,
    Short = 4,
    Long = 5,
    Double = 6,
    List = 7,
    Class = 8,
    Password = 9,
}

/// Kafka's `ConfigSource` codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigSource {
    DynamicTopic = 1,
    /// Set at run time for this broker (resource name `"<node id>"`).
    DynamicBroker = 2,
    /// Set at run time as the cluster-wide default (resource name "").
    DynamicDefaultBroker = 3,
    StaticBroker = 4,
    Default = 5,
}

/// How a value is checked.
#[derive(Clone, Copy, Debug)]
enum Check {
    Any,
    Bool,
    Long {
        min: i64,
        max: i64,
    },
    Int {
        min: i64,
        max: i64,
    },
    Double {
        min: f64,
        max: f64,
    },
    OneOf(&'static [&'static str]),
    /// A comma-separated list whose items must be in the set (empty allowed).
    ListOf(&'static [&'static str]),
}

/// Which broker setting a topic default comes from, when not Kafka's constant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BrokerDefault {
    None,
    FlushMessages,
    FlushMs,
}

/// One topic-level config Kafka defines.
#[derive(Clone, Copy, Debug)]
pub struct TopicConfigDef {
    pub name: &'static str,
    /// The broker-level name of the same setting (Kafka's synonym).
    pub broker_name: Option<&'static str>,
    pub default: &'static str,
    pub ty: ConfigType,
    pub doc: &'static str,
    check: Check,
    from_broker: BrokerDefault,
    /// Kafka's internal configs (`defineInternal`): accepted and stored, but
    /// never listed by DescribeConfigs nor given a broker-level synonym.
    internal: bool,
}

const LMAX: i64 = i64::MAX;
const IMAX: i64 = i32::MAX as i64;
const LONG_MAX_STR: &str = "9223372036854775807";

/// Kafka's `LogConfig.INTERNAL_SEGMENT_BYTES_CONFIG`.
pub const INTERNAL_SEGMENT_BYTES: &str = "internal.segment.bytes";

const fn def(
    name: &'static str,
    broker_name: Option<&'static str>,
    default: &'static str,
    ty: ConfigType,
    check: Check,
    doc: &'static str,
) -> TopicConfigDef {
    TopicConfigDef {
        name,
        broker_name,
        default,
        ty,
        doc,
        check,
        from_broker: BrokerDefault::None,
        internal: false,
    }
}

/// Kafka 4 topic configs, sorted by name (DescribeConfigs answers in this order).
pub const TOPIC_CONFIGS: &[TopicConfigDef] = &[
    def(
        "cleanup.policy",
        Some("log.cleanup.policy"),
        "delete",
        ConfigType::List,
        Check::ListOf(&["compact", "delete"]),
        "Retention policy for old segments: delete, compact, or both.",
    ),
    def(
        "compression.gzip.level",
        Some("compression.gzip.level"),
        "-1",
        ConfigType::Int,
        Check::Int { min: -1, max: 9 },
        "Compression level for gzip.",
    ),
    def(
        "compression.lz4.level",
        Some("compression.lz4.level"),
        "9",
        ConfigType::Int,
        Check::Int { min: 1, max: 17 },
        "Compression level for lz4.",
    ),
    def(
        "compression.type",
        Some("compression.type"),
        "producer",
        ConfigType::String,
        Check::OneOf(&["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"]),
        "Compression of batches served to consumers.",
    ),
    def(
        "compression.zstd.level",
        Some("compression.zstd.level"),
        "3",
        ConfigType::Int,
        Check::Int {
            min: -131072,
            max: 22,
        },
        "Compression level for zstd.",
    ),
    def(
        "delete.retention.ms",
        Some("log.cleaner.delete.retention.ms"),
        "86400000",
        ConfigType::Long,
        Check::Long { min: 0, max: LMAX },
        "How long tombstones are kept on compacted topics.",
    ),
    def(
        "file.delete.delay.ms",
        Some("log.segment.delete.delay.ms"),
        "60000",
        ConfigType::Long,
        Check::Long { min: 0, max: LMAX },
        "Delay before deleting a file from the file system.",
    ),
    TopicConfigDef {
        from_broker: BrokerDefault::FlushMessages,
        ..def(
            "flush.messages",
            Some("log.flush.interval.messages"),
            LONG_MAX_STR,
            ConfigType::Long,
            Check::Long { min: 1, max: LMAX },
            "Fsync after this many records (es default: --flush-every-records).",
        )
    },
    TopicConfigDef {
        from_broker: BrokerDefault::FlushMs,
        ..def(
            "flush.ms",
            Some("log.flush.interval.ms"),
            LONG_MAX_STR,
            ConfigType::Long,
            Check::Long { min: 0, max: LMAX },
            "Fsync at least this often (es default: --flush-interval).",
        )
    },
    def(
        "follower.replication.throttled.replicas",
        Some("follower.replication.throttled.replicas"),
        "",
        ConfigType::List,
        Check::Any,
        "Replicas throttled on the follower side.",
    ),
    def(
        "index.interval.bytes",
        Some("log.index.interval.bytes"),
        "4096",
        ConfigType::Int,
        Check::Int { min: 0, max: IMAX },
        "Bytes of log between sparse index entries.",
    ),
    // Kafka 4.1+ (KAFKA-19080): `segment.bytes` may not go below 1 MiB, so
    // tests that need many small segments set this internal config instead;
    // when present it wins over `segment.bytes`. es-storage honours sizes
    // down to 1 KiB.
    TopicConfigDef {
        internal: true,
        ..def(
            INTERNAL_SEGMENT_BYTES,
            None,
            "",
            ConfigType::Int,
            Check::Int { min: 0, max: IMAX },
            "The maximum size of a single log file. This should be used for testing only.",
        )
    },
    def(
        "leader.replication.throttled.replicas",
        Some("leader.replication.throttled.replicas"),
        "",
        ConfigType::List,
        Check::Any,
        "Replicas throttled on the leader side.",
    ),
    def(
        "local.retention.bytes",
        Some("log.local.retention.bytes"),
        "-2",
        ConfigType::Long,
        Check::Long { min: -2, max: LMAX },
        "Local retention size with tiered storage.",
    ),
    def(
        "local.retention.ms",
        Some("log.local.retention.ms"),
        "-2",
        ConfigType::Long,
        Check::Long { min: -2, max: LMAX },
        "Local retention time with tiered storage.",
    ),
    def(
        "max.compaction.lag.ms",
        Some("log.cleaner.max.compaction.lag.ms"),
        LONG_MAX_STR,
        ConfigType::Long,
        Check::Long { min: 1, max: LMAX },
        "Longest time a record stays uncompacted.",
    ),
    def(
        "max.message.bytes",
        Some("message.max.bytes"),
        "1048588",
        ConfigType::Int,
        Check::Int { min: 0, max: IMAX },
        "Largest record batch the topic accepts.",
    ),
    def(
        "message.timestamp.after.max.ms",
        Some("log.message.timestamp.after.max.ms"),
        "3600000",
        ConfigType::Long,
        Check::Long { min: 0, max: LMAX },
        "How far in the future a CreateTime timestamp may be.",
    ),
    def(
        "message.timestamp.before.max.ms",
        Some("log.message.timestamp.before.max.ms"),
        LONG_MAX_STR,
        ConfigType::Long,
        Check::Long { min: 0, max: LMAX },
        "How far in the past a CreateTime timestamp may be.",
    ),
    def(
        "message.timestamp.type",
        Some("log.message.timestamp.type"),
        "CreateTime",
        ConfigType::String,
        Check::OneOf(&["CreateTime", "LogAppendTime"]),
        "Whether record timestamps are the producer's or the broker's append time.",
    ),
    def(
        "min.cleanable.dirty.ratio",
        Some("log.cleaner.min.cleanable.ratio"),
        "0.5",
        ConfigType::Double,
        Check::Double { min: 0.0, max: 1.0 },
        "Dirty ratio that triggers compaction.",
    ),
    def(
        "min.compaction.lag.ms",
        Some("log.cleaner.min.compaction.lag.ms"),
        "0",
        ConfigType::Long,
        Check::Long { min: 0, max: LMAX },
        "Shortest time a record stays uncompacted.",
    ),
    def(
        "min.insync.replicas",
        Some("min.insync.replicas"),
        "1",
        ConfigType::Int,
        Check::Int { min: 1, max: IMAX },
        "Replicas that must acknowledge acks=all writes.",
    ),
    def(
        "preallocate",
        Some("log.preallocate"),
        "false",
        ConfigType::Boolean,
        Check::Bool,
        "Preallocate segment files.",
    ),
    def(
        "remote.log.copy.disable",
        None,
        "false",
        ConfigType::Boolean,
        Check::Bool,
        "Stop copying segments to remote storage.",
    ),
    def(
        "remote.log.delete.on.disable",
        None,
        "false",
        ConfigType::Boolean,
        Check::Bool,
        "Delete remote data when tiered storage is disabled.",
    ),
    def(
        "remote.storage.enable",
        None,
        "false",
        ConfigType::Boolean,
        Check::Bool,
        "Tiered storage for this topic.",
    ),
    def(
        "retention.bytes",
        Some("log.retention.bytes"),
        "-1",
        ConfigType::Long,
        Check::Long {
            min: i64::MIN,
            max: LMAX,
        },
        "Size a partition may grow to before old segments are deleted (-1: no limit).",
    ),
    def(
        "retention.ms",
        Some("log.retention.ms"),
        "604800000",
        ConfigType::Long,
        Check::Long { min: -1, max: LMAX },
        "How long segments are kept (-1: forever).",
    ),
    def(
        "segment.bytes",
        Some("log.segment.bytes"),
        "1073741824",
        ConfigType::Int,
        Check::Int {
            min: 1024 * 1024,
            max: IMAX,
        },
        "Segment size before a roll.",
    ),
    def(
        "segment.index.bytes",
        Some("log.index.size.max.bytes"),
        "10485760",
        ConfigType::Int,
        Check::Int { min: 4, max: IMAX },
        "Maximum index file size.",
    ),
    def(
        "segment.jitter.ms",
        Some("log.roll.jitter.ms"),
        "0",
        ConfigType::Long,
        Check::Long { min: 0, max: LMAX },
        "Random jitter subtracted from segment.ms.",
    ),
    def(
        "segment.ms",
        Some("log.roll.ms"),
        "604800000",
        ConfigType::Long,
        Check::Long { min: 1, max: LMAX },
        "Segment age before a roll.",
    ),
    def(
        "unclean.leader.election.enable",
        Some("unclean.leader.election.enable"),
        "false",
        ConfigType::Boolean,
        Check::Bool,
        "Allow out-of-sync replicas to become leader.",
    ),
];

/// Looks up a topic config by name.
pub fn topic_config_def(name: &str) -> Option<&'static TopicConfigDef> {
    TOPIC_CONFIGS.iter().find(|d| d.name == name)
}

/// Why a config value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("unknown topic config name: {0}")]
    UnknownName(String),
    #[error("invalid value {value:?} for configuration {name}: {why}")]
    InvalidValue {
        name: String,
        value: String,
        why: String,
    },
    #[error("configuration {0} must have a value")]
    NullValue(String),
}

fn bad(name: &str, value: &str, why: impl Into<String>) -> ConfigError {
    ConfigError::InvalidValue {
        name: name.to_string(),
        value: value.to_string(),
        why: why.into(),
    }
}

/// Checks one topic config value; the value is trimmed as Kafka does.
pub fn validate_topic_config(name: &str, value: Option<&str>) -> Result<(), ConfigError> {
    let d = topic_config_def(name).ok_or_else(|| ConfigError::UnknownName(name.to_string()))?;
    check_value(d, name, value)
}

/// Looks up the topic config whose broker-level name is `broker_name`: the
/// broker configs es can change at run time.
pub fn broker_dynamic_def(broker_name: &str) -> Option<&'static TopicConfigDef> {
    TOPIC_CONFIGS
        .iter()
        .find(|d| !d.internal && d.broker_name == Some(broker_name))
}

/// Checks one dynamic broker config value (see [`broker_dynamic_def`]).
pub fn validate_broker_config(name: &str, value: Option<&str>) -> Result<(), ConfigError> {
    let d = broker_dynamic_def(name).ok_or_else(|| ConfigError::UnknownName(name.to_string()))?;
    check_value(d, name, value)
}

/// Checks `value` against `d`'s rule; errors name the config `name`.
fn check_value(d: &TopicConfigDef, name: &str, value: Option<&str>) -> Result<(), ConfigError> {
    let v = value
        .ok_or_else(|| ConfigError::NullValue(name.to_string()))?
        .trim();
    match d.check {
        Check::Any => Ok(()),
        Check::Bool => match v.to_ascii_lowercase().as_str() {
            "true" | "false" => Ok(()),
            _ => Err(bad(name, v, "expected true or false")),
        },
        Check::Long { min, max } | Check::Int { min, max } => {
            let n: i64 = v.parse().map_err(|_| bad(name, v, "not an integer"))?;
            if n < min || n > max {
                return Err(bad(name, v, format!("must be in [{min}, {max}]")));
            }
            Ok(())
        }
        Check::Double { min, max } => {
            let n: f64 = v.parse().map_err(|_| bad(name, v, "not a number"))?;
            if !(min..=max).contains(&n) {
                return Err(bad(name, v, format!("must be in [{min}, {max}]")));
            }
            Ok(())
        }
        Check::OneOf(allowed) => {
            if allowed.contains(&v) {
                Ok(())
            } else {
                Err(bad(
                    name,
                    v,
                    format!("must be one of {}", allowed.join(", ")),
                ))
            }
        }
        Check::ListOf(allowed) => {
            for item in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                if !allowed.contains(&item) {
                    return Err(bad(
                        name,
                        v,
                        format!("items must be in {}", allowed.join(", ")),
                    ));
                }
            }
            Ok(())
        }
    }
}

/// Dynamic broker configs: broker-level names of topic configs (see
/// [`broker_dynamic_def`]) set at run time, as `data/broker_configs.json`
/// keeps them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DynamicBrokerConfigs {
    /// Resource `"<node id>"`: Kafka's DYNAMIC_BROKER_CONFIG.
    #[serde(default)]
    pub broker: BTreeMap<String, String>,
    /// Resource "": Kafka's DYNAMIC_DEFAULT_BROKER_CONFIG.
    #[serde(default)]
    pub cluster_default: BTreeMap<String, String>,
}

impl DynamicBrokerConfigs {
    /// The same configs without any entry that is not a valid dynamic
    /// broker config (a file from another version, or edited by hand), with
    /// the names of the entries dropped.
    pub fn sanitized(mut self) -> (Self, Vec<String>) {
        let mut dropped = Vec::new();
        for map in [&mut self.broker, &mut self.cluster_default] {
            map.retain(|k, v| {
                let ok = validate_broker_config(k, Some(v)).is_ok();
                if !ok {
                    dropped.push(k.clone());
                }
                ok
            });
            for v in map.values_mut() {
                *v = v.trim().to_string();
            }
        }
        (self, dropped)
    }
}

/// Broker settings that topic configs inherit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerTopicDefaults {
    /// `--flush-every-records`.
    pub flush_messages: u64,
    /// `--flush-interval`, in milliseconds.
    pub flush_ms: u64,
    /// Dynamic broker configs, which win over the flags and Kafka's defaults.
    pub dynamic: Arc<DynamicBrokerConfigs>,
}

impl Default for BrokerTopicDefaults {
    fn default() -> Self {
        BrokerTopicDefaults {
            flush_messages: 1,
            flush_ms: 1000,
            dynamic: Arc::default(),
        }
    }
}

impl BrokerTopicDefaults {
    /// The broker-level values of topic config `d`, most specific first:
    /// per-broker dynamic, cluster-wide dynamic, the broker flag, Kafka's
    /// default (always last). Each is (broker-level name, value, source).
    fn levels(&self, d: &TopicConfigDef) -> Vec<(&'static str, String, ConfigSource)> {
        let name = d.broker_name.unwrap_or(d.name);
        let mut out = Vec::with_capacity(2);
        if d.broker_name.is_some() && !d.internal {
            if let Some(v) = self.dynamic.broker.get(name) {
                out.push((name, v.clone(), ConfigSource::DynamicBroker));
            }
            if let Some(v) = self.dynamic.cluster_default.get(name) {
                out.push((name, v.clone(), ConfigSource::DynamicDefaultBroker));
            }
        }
        match d.from_broker {
            BrokerDefault::FlushMessages => out.push((
                name,
                self.flush_messages.to_string(),
                ConfigSource::StaticBroker,
            )),
            BrokerDefault::FlushMs => {
                out.push((name, self.flush_ms.to_string(), ConfigSource::StaticBroker))
            }
            BrokerDefault::None => {}
        }
        out.push((name, d.default.to_string(), ConfigSource::Default));
        out
    }
}

/// Which background cleaners a topic's `cleanup.policy` asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CleanupPolicy {
    /// Retention deletes old segments (`delete`, Kafka's default).
    pub delete: bool,
    /// Compaction keeps the newest record per key (`compact`).
    pub compact: bool,
}

/// What the produce and fetch paths read of a topic's config on every
/// request, parsed once whenever the config changes (each lookup in
/// [`TopicConfig`] finds the definition, the override or the broker's default
/// and parses a string).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TopicRules {
    /// `max.message.bytes`.
    pub max_message_bytes: usize,
    /// `message.timestamp.type`.
    pub timestamp_type: TimestampType,
    /// `message.timestamp.before.max.ms`.
    pub timestamp_before_max_ms: i64,
    /// `message.timestamp.after.max.ms`.
    pub timestamp_after_max_ms: i64,
    /// `cleanup.policy` includes `compact`: every record needs a key.
    pub compact: bool,
    /// `compression.type`: the codec fetched batches are served with, unless
    /// `as_produced`.
    pub compression: Compression,
    /// `compression.type=producer`: batches are served as they were produced.
    pub compression_as_produced: bool,
}

/// Kafka's record timestamp type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimestampType {
    CreateTime,
    LogAppendTime,
}

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
    pub fn describe(&self, keys: Option<&[String]>) -> Vec<DescribedConfig> {
        TOPIC_CONFIGS
            .iter()
            .filter(|d| !d.internal)
            .filter(|d| keys.is_none_or(|ks| ks.iter().any(|k| k == d.name)))
            .map(|d| {
                let (default, default_source) = self.default_of(d);
                let mut synonyms = Vec::new();
                if let Some(v) = self.overrides.get(d.name) {
                    synonyms.push((d.name.to_string(), v.clone(), ConfigSource::DynamicTopic));
                }
                synonyms.extend(
                    self.broker
                        .levels(d)
                        .into_iter()
                        .map(|(n, v, s)| (n.to_string(), v, s)),
                );
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
        }
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

/// One broker config as DescribeConfigs reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerConfigEntry {
    pub name: &'static str,
    pub value: String,
    pub ty: ConfigType,
    pub source: ConfigSource,
    /// False for the dynamic broker configs (see [`broker_dynamic_def`]);
    /// the rest come from flags and cannot change at run time.
    pub read_only: bool,
    /// (name, value, source), most specific first.
    pub synonyms: Vec<(String, String, ConfigSource)>,
}

/// The broker settings DescribeConfigs reports for a broker resource.
#[derive(Clone, Debug)]
pub struct BrokerSettings {
    pub node_id: i32,
    pub log_dir: String,
    pub listener: String,
    pub advertised_listener: String,
    pub auto_create_topics: bool,
    pub default_partitions: i32,
    pub frame_bytes_max: usize,
    pub defaults: BrokerTopicDefaults,
    /// `--retention-check-interval` (Kafka's `log.retention.check.interval.ms`).
    pub retention_check_interval_ms: u64,
    /// `--compaction-interval` (Kafka's `log.cleaner.backoff.ms`).
    pub compaction_interval_ms: u64,
    /// `--group-min-session-timeout-ms`.
    pub group_min_session_timeout_ms: i32,
    /// `--group-max-session-timeout-ms`.
    pub group_max_session_timeout_ms: i32,
}

impl BrokerSettings {
    /// Every broker config we report for this broker (resource
    /// `"<node id>"`), sorted by name.
    pub fn describe(&self) -> Vec<BrokerConfigEntry> {
        use ConfigSource::{Default as D, StaticBroker as S};
        use ConfigType as T;
        let e = |name: &'static str, value: String, ty: ConfigType, source: ConfigSource| {
            BrokerConfigEntry {
                name,
                synonyms: vec![(name.to_string(), value.clone(), source)],
                value,
                ty,
                source,
                read_only: true,
            }
        };
        let mut out = vec![
            e(
                "advertised.listeners",
                format!("PLAINTEXT://{}", self.advertised_listener),
                T::String,
                S,
            ),
            e(
                "auto.create.topics.enable",
                self.auto_create_topics.to_string(),
                T::Boolean,
                S,
            ),
            e("broker.id", self.node_id.to_string(), T::Int, S),
            e("default.replication.factor", "1".into(), T::Int, D),
            e("delete.topic.enable", "true".into(), T::Boolean, D),
            e(
                "group.max.session.timeout.ms",
                self.group_max_session_timeout_ms.to_string(),
                T::Int,
                S,
            ),
            e(
                "group.min.session.timeout.ms",
                self.group_min_session_timeout_ms.to_string(),
                T::Int,
                S,
            ),
            e(
                "listeners",
                format!("PLAINTEXT://{}", self.listener),
                T::String,
                S,
            ),
            e(
                "log.cleaner.backoff.ms",
                self.compaction_interval_ms.to_string(),
                T::Long,
                S,
            ),
            e("log.dirs", self.log_dir.clone(), T::String, S),
            e(
                "log.retention.check.interval.ms",
                self.retention_check_interval_ms.to_string(),
                T::Long,
                S,
            ),
            e("node.id", self.node_id.to_string(), T::Int, S),
            e(
                "num.partitions",
                self.default_partitions.to_string(),
                T::Int,
                S,
            ),
            // What the `__consumer_offsets` es creates gets.
            e(
                "offsets.topic.num.partitions",
                OFFSETS_TOPIC_PARTITIONS.to_string(),
                T::Int,
                D,
            ),
            e("offsets.topic.replication.factor", "1".into(), T::Short, D),
            e(
                "offsets.topic.segment.bytes",
                OFFSETS_TOPIC_SEGMENT_BYTES.to_string(),
                T::Int,
                D,
            ),
            e("process.roles", "broker,controller".into(), T::List, S),
            e(
                "socket.request.max.bytes",
                self.frame_bytes_max.to_string(),
                T::Int,
                S,
            ),
        ];
        // The broker-level names of the topic configs: dynamic, each at its
        // most specific level.
        for d in TOPIC_CONFIGS.iter().filter(|d| !d.internal) {
            let Some(bn) = d.broker_name else { continue };
            if out.iter().any(|x| x.name == bn) {
                continue;
            }
            let synonyms: Vec<(String, String, ConfigSource)> = self
                .defaults
                .levels(d)
                .into_iter()
                .map(|(n, v, s)| (n.to_string(), v, s))
                .collect();
            let Some((_, value, source)) = synonyms.first().cloned() else {
                continue;
            };
            out.push(BrokerConfigEntry {
                name: bn,
                value,
                ty: d.ty,
                source,
                read_only: false,
                synonyms,
            });
        }
        out.sort_by(|a, b| a.name.cmp(b.name));
        out
    }

    /// The cluster-wide dynamic defaults (resource ""), as Kafka lists them:
    /// only the configs set at that level, sorted by name.
    pub fn describe_cluster_default(&self) -> Vec<BrokerConfigEntry> {
        self.defaults
            .dynamic
            .cluster_default
            .iter()
            .filter_map(|(k, v)| {
                let d = broker_dynamic_def(k)?;
                let name = d.broker_name?;
                let source = ConfigSource::DynamicDefaultBroker;
                Some(BrokerConfigEntry {
                    name,
                    value: v.clone(),
                    ty: d.ty,
                    source,
                    read_only: false,
                    synonyms: vec![(name.to_string(), v.clone(), source)],
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
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
            TOPIC_CONFIGS.iter().filter(|d| !d.internal).count()
        );
        let keys = vec!["retention.ms".to_string(), "bogus".to_string()];
        let some = c.describe(Some(&keys));
        assert_eq!(some.len(), 1);
        assert_eq!(some[0].value, "1000");
        assert_eq!(some[0].source, ConfigSource::DynamicTopic);
        assert_eq!(some[0].synonyms.len(), 2);
        assert_eq!(some[0].synonyms[1].0, "log.retention.ms");
    }

    #[test]
    fn broker_describe_is_sorted_and_unique() {
        let b = BrokerSettings {
            node_id: 0,
            log_dir: "/d".into(),
            listener: "127.0.0.1:9092".into(),
            advertised_listener: "127.0.0.1:9092".into(),
            auto_create_topics: true,
            default_partitions: 1,
            frame_bytes_max: 100,
            defaults: BrokerTopicDefaults::default(),
            retention_check_interval_ms: 300_000,
            compaction_interval_ms: 15_000,
            group_min_session_timeout_ms: 6_000,
            group_max_session_timeout_ms: 1_800_000,
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
        assert!(!d.iter().any(|e| e.name.starts_with("internal.")));
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
                ("num.io.threads".to_string(), "8".to_string()),
            ]),
            cluster_default: BTreeMap::from([("log.segment.bytes".to_string(), "1".to_string())]),
        }
        .sanitized();
        assert_eq!(
            clean.broker,
            BTreeMap::from([("log.retention.ms".to_string(), "5".to_string())])
        );
        assert!(clean.cluster_default.is_empty());
        assert_eq!(dropped, vec!["num.io.threads", "log.segment.bytes"]);
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
            listener: "l:1".into(),
            advertised_listener: "l:1".into(),
            auto_create_topics: true,
            default_partitions: 1,
            frame_bytes_max: 100,
            defaults,
            retention_check_interval_ms: 1,
            compaction_interval_ms: 1,
            group_min_session_timeout_ms: 1,
            group_max_session_timeout_ms: 2,
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
}
