//! The topic configs Kafka defines, as one table: each config's name, its
//! broker-level synonym, type, default, documentation and the rule its
//! values are checked against. Lookups by topic-level and by broker-level
//! name. Nothing here holds a value; it only describes the configs.

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
pub(super) enum Check {
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
pub(super) enum BrokerDefault {
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
    pub(super) check: Check,
    pub(super) from_broker: BrokerDefault,
    /// Kafka's internal configs (`defineInternal`): accepted and stored, but
    /// never listed by DescribeConfigs nor given a broker-level synonym.
    pub(super) internal: bool,
}

const LMAX: i64 = i64::MAX;
const IMAX: i64 = i32::MAX as i64;
pub(super) const LONG_MAX_STR: &str = "9223372036854775807";

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

/// Looks up the topic config whose broker-level name is `broker_name`: the
/// broker configs es can change at run time.
pub fn broker_dynamic_def(broker_name: &str) -> Option<&'static TopicConfigDef> {
    TOPIC_CONFIGS
        .iter()
        .find(|d| !d.internal && d.broker_name == Some(broker_name))
}
