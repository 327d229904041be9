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
    /// Set on a group (Kafka's GROUP_CONFIG).
    Group = 8,
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

pub(super) const fn def(
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

/// The subject name strategies as Confluent Server's
/// `confluent.*.subject.name.strategy` spells them (the default first).
pub const CONFLUENT_STRATEGIES: &[&str] = &[
    "io.confluent.kafka.serializers.subject.TopicNameStrategy",
    "io.confluent.kafka.serializers.subject.RecordNameStrategy",
    "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy",
];

/// The same strategies as Redpanda's `redpanda.*.subject.name.strategy`
/// spells them (the default first).
pub const REDPANDA_STRATEGIES: &[&str] = &[
    "TopicNameStrategy",
    "RecordNameStrategy",
    "TopicRecordNameStrategy",
];

/// Kafka 4.4 topic configs (`LogConfig`'s definitions: names, types, defaults,
/// validators, broker-level synonyms and documentation as Kafka has them),
/// and the schema validation configs of Confluent Server and Redpanda
/// (`confluent.*`, `redpanda.*`; see docs/schema-registry.md), sorted by
/// name (DescribeConfigs answers in this order).
pub const TOPIC_CONFIGS: &[TopicConfigDef] = &[
    def(
        "cleanup.policy",
        Some("log.cleanup.policy"),
        "delete",
        ConfigType::List,
        Check::ListOf(&["compact", "delete"]),
        "This config designates the retention policy to use on log segments. The \"delete\" policy (which is the default) will discard old segments when their retention time or size limit has been reached. The \"compact\" policy will enable <a href=\"https://kafka.apache.org/documentation/#compaction\">log compaction</a>, which retains the latest value for each key. It is also possible to specify both policies in a comma-separated list (e.g. \"delete,compact\"). In this case, old segments will be discarded per the retention time and size configuration, while retained segments will be compacted. An empty list means infinite retention - no cleanup policies will be applied and log segments will be retained indefinitely. Note that with remote storage enabled, local retention limits (log.local.retention.ms and log.local.retention.bytes) are still applied to local segments.",
    ),
    def(
        "compression.gzip.level",
        Some("compression.gzip.level"),
        "-1",
        ConfigType::Int,
        Check::Int { min: -1, max: 9 },
        "The compression level to use if compression.type is set to <code>gzip</code>.",
    ),
    def(
        "compression.lz4.level",
        Some("compression.lz4.level"),
        "9",
        ConfigType::Int,
        Check::Int { min: 1, max: 17 },
        "The compression level to use if compression.type is set to <code>lz4</code>.",
    ),
    def(
        "compression.type",
        Some("compression.type"),
        "producer",
        ConfigType::String,
        Check::OneOf(&["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"]),
        "Specify the final compression type for a given topic. This configuration accepts the standard compression codecs ('gzip', 'snappy', 'lz4', 'zstd'). It additionally accepts 'uncompressed' which is equivalent to no compression; and 'producer' which means retain the original compression codec set by the producer.",
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
        "The compression level to use if compression.type is set to <code>zstd</code>.",
    ),
    def(
        "confluent.key.schema.validation",
        None,
        "false",
        ConfigType::Boolean,
        Check::Bool,
        "Confluent Server's name. When true, every produced record's key must start with magic byte 0 and the 4-byte id of a schema registered, in this broker's schema registry, under the subject confluent.key.subject.name.strategy names; a batch with any other key is refused with INVALID_RECORD (a null key passes, as on Confluent Server). Same setting as redpanda.key.schema.id.validation: validation is on when either is true.",
    ),
    def(
        "confluent.key.subject.name.strategy",
        None,
        CONFLUENT_STRATEGIES[0],
        ConfigType::String,
        Check::OneOf(CONFLUENT_STRATEGIES),
        "Confluent Server's name. The subject a key's schema id must be registered under: TopicNameStrategy <topic>-key, RecordNameStrategy the schema's fully-qualified record name, TopicRecordNameStrategy <topic>-<record name>. When set, it wins over redpanda.key.subject.name.strategy.",
    ),
    def(
        "confluent.value.schema.validation",
        None,
        "false",
        ConfigType::Boolean,
        Check::Bool,
        "Confluent Server's name. When true, every produced record's value must start with magic byte 0 and the 4-byte id of a schema registered, in this broker's schema registry, under the subject confluent.value.subject.name.strategy names; a batch with any other value is refused with INVALID_RECORD (a null value, a tombstone, passes, as on Confluent Server). Same setting as redpanda.value.schema.id.validation: validation is on when either is true.",
    ),
    def(
        "confluent.value.subject.name.strategy",
        None,
        CONFLUENT_STRATEGIES[0],
        ConfigType::String,
        Check::OneOf(CONFLUENT_STRATEGIES),
        "Confluent Server's name. The subject a value's schema id must be registered under: TopicNameStrategy <topic>-value, RecordNameStrategy the schema's fully-qualified record name, TopicRecordNameStrategy <topic>-<record name>. When set, it wins over redpanda.value.subject.name.strategy.",
    ),
    def(
        "delete.retention.ms",
        Some("log.cleaner.delete.retention.ms"),
        "86400000",
        ConfigType::Long,
        Check::Long { min: 0, max: LMAX },
        "The amount of time to retain delete tombstone markers for <a href=\"https://kafka.apache.org/documentation/#compaction\">log compacted</a> topics. This setting also gives a bound on the time in which a consumer must complete a read if they begin from offset 0 to ensure that they get a valid snapshot of the final stage (otherwise delete tombstones may be collected before they complete their scan).",
    ),
    def(
        "errors.deadletterqueue.group.enable",
        None,
        "false",
        ConfigType::Boolean,
        Check::Bool,
        "Enable this topic to be used as a dead-letter queue for share groups. When set to <code>true</code>, share groups can write undeliverable records to this topic. When set to <code>false</code> (the default), attempts to use this topic as a DLQ will be rejected.",
    ),
    def(
        "file.delete.delay.ms",
        Some("log.segment.delete.delay.ms"),
        "60000",
        ConfigType::Long,
        Check::Long { min: 0, max: LMAX },
        "The time to wait before deleting a file from the filesystem",
    ),
    TopicConfigDef {
        from_broker: BrokerDefault::FlushMessages,
        ..def(
            "flush.messages",
            Some("log.flush.interval.messages"),
            LONG_MAX_STR,
            ConfigType::Long,
            Check::Long { min: 1, max: LMAX },
            "This setting allows specifying an interval at which we will force an fsync of data written to the log. For example if this was set to 1 we would fsync after every message; if it were 5 we would fsync after every five messages. In general we recommend you not set this and use replication for durability and allow the operating system's background flush capabilities as it is more efficient. This setting can be overridden on a per-topic basis (see <a href=\"https://kafka.apache.org/documentation/#topicconfigs\">the per-topic configuration section</a>).",
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
            "This setting allows specifying a time interval at which we will force an fsync of data written to the log. For example if this was set to 1000 we would fsync after 1000 ms had passed. Note that this setting depends on the broker-level configuration <code>log.flush.scheduler.interval.ms</code>, which controls how frequently the flush check occurs. In general we recommend you not set this and use replication for durability and allow the operating system's background flush capabilities as it is more efficient.",
        )
    },
    def(
        "follower.replication.throttled.replicas",
        None,
        "",
        ConfigType::List,
        Check::Any,
        "A list of replicas for which log replication should be throttled on the follower side. The list should describe a set of replicas in the form [PartitionId]:[BrokerId],[PartitionId]:[BrokerId]:... or alternatively the wildcard '*' can be used to throttle all replicas for this topic.",
    ),
    def(
        "index.interval.bytes",
        Some("log.index.interval.bytes"),
        "4096",
        ConfigType::Int,
        Check::Int { min: 0, max: IMAX },
        "This setting controls how frequently Kafka adds entries to its offset index and, conditionally, to its time index. The default setting ensures that we index a message roughly every 4096 bytes. More frequent indexing allows reads to jump closer to the exact position in the log but results in larger index files. You probably don't need to change this.<p> Note: the time index will be inserted only when the timestamp is greater than the last indexed timestamp.</p>",
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
        None,
        "",
        ConfigType::List,
        Check::Any,
        "A list of replicas for which log replication should be throttled on the leader side. The list should describe a set of replicas in the form [PartitionId]:[BrokerId],[PartitionId]:[BrokerId]:... or alternatively the wildcard '*' can be used to throttle all replicas for this topic.",
    ),
    def(
        "local.retention.bytes",
        Some("log.local.retention.bytes"),
        "-2",
        ConfigType::Long,
        Check::Long { min: -2, max: LMAX },
        "The maximum size of local log segments that can grow for a partition before it deletes the old segments. Default value is -2, it represents <code>retention.bytes</code> value to be used. The effective value should always be less than or equal to <code>retention.bytes</code> value.",
    ),
    def(
        "local.retention.ms",
        Some("log.local.retention.ms"),
        "-2",
        ConfigType::Long,
        Check::Long { min: -2, max: LMAX },
        "The number of milliseconds to keep the local log segment before it gets deleted. Default value is -2, it represents <code>retention.ms</code> value is to be used. The effective value should always be less than or equal to <code>retention.ms</code> value.",
    ),
    def(
        "max.compaction.lag.ms",
        Some("log.cleaner.max.compaction.lag.ms"),
        LONG_MAX_STR,
        ConfigType::Long,
        Check::Long { min: 1, max: LMAX },
        "The maximum time a message will remain ineligible for compaction in the log. Only applicable for logs that are being compacted. Because the active segment is never compacted, for compacted topics this value also drives active segment rolling: the effective time-based roll threshold is the smaller of <code>segment.ms</code> and <code>max.compaction.lag.ms</code>. Active segment rolling moves records out of the active segment, after which <code>max.compaction.lag.ms</code> makes them eligible for compaction even if <code>min.cleanable.dirty.ratio</code> is not met. See <a href=\"https://kafka.apache.org/documentation/#compaction\">log compaction</a>.",
    ),
    def(
        "max.decompressed.message.bytes",
        Some("max.decompressed.message.bytes"),
        "2147483639",
        ConfigType::Int,
        Check::Int {
            min: 1,
            max: 2147483639,
        },
        "The maximum decompressed size, in bytes, of a single record the broker will accept; larger records are rejected with an <code>InvalidRecordException</code>. It is enforced where the broker decompresses records: produce validation of compressed batches, log compaction, and offset lookups by timestamp or max timestamp against the local log or remote storage. Unlike <code>max.message.bytes</code>, which bounds the compressed batch on the wire, this bounds the decompressed size of an individual record. Lowering it below the size of already-stored records makes compaction and timestamp offset lookups of affected partitions fail until it is raised again. The default imposes no limit beyond the largest record the broker could allocate anyway; set a smaller value to enforce a per-record cap.",
    ),
    def(
        "max.message.bytes",
        Some("message.max.bytes"),
        "1048588",
        ConfigType::Int,
        Check::Int { min: 0, max: IMAX },
        "The largest record batch size allowed by Kafka (after compression if compression is enabled).",
    ),
    def(
        "message.timestamp.after.max.ms",
        Some("log.message.timestamp.after.max.ms"),
        "3600000",
        ConfigType::Long,
        Check::Long { min: 0, max: LMAX },
        "This configuration sets the allowable timestamp difference between the message timestamp and the broker's timestamp. The message timestamp can be later than or equal to the broker's timestamp, with the maximum allowable difference determined by the value set in this configuration. If message.timestamp.type=CreateTime, the message will be rejected if the difference in timestamps exceeds this specified threshold. This configuration is ignored if message.timestamp.type=LogAppendTime.",
    ),
    def(
        "message.timestamp.before.max.ms",
        Some("log.message.timestamp.before.max.ms"),
        LONG_MAX_STR,
        ConfigType::Long,
        Check::Long { min: 0, max: LMAX },
        "This configuration sets the allowable timestamp difference between the broker's timestamp and the message timestamp. The message timestamp can be earlier than or equal to the broker's timestamp, with the maximum allowable difference determined by the value set in this configuration. If message.timestamp.type=CreateTime, the message will be rejected if the difference in timestamps exceeds this specified threshold. This configuration is ignored if message.timestamp.type=LogAppendTime.",
    ),
    def(
        "message.timestamp.type",
        Some("log.message.timestamp.type"),
        "CreateTime",
        ConfigType::String,
        Check::OneOf(&["CreateTime", "LogAppendTime"]),
        "Define whether the timestamp in the message is message create time or log append time.",
    ),
    def(
        "min.cleanable.dirty.ratio",
        Some("log.cleaner.min.cleanable.ratio"),
        "0.5",
        ConfigType::Double,
        Check::Double { min: 0.0, max: 1.0 },
        "This configuration controls how frequently the log compactor will attempt to clean the log (assuming <a href=\"https://kafka.apache.org/documentation/#compaction\">log compaction</a> is enabled). By default we will avoid cleaning a log where more than 50% of the log has been compacted. This ratio bounds the maximum space wasted in the log by duplicates (at 50% at most 50% of the log could be duplicates). A higher ratio will mean fewer, more efficient cleanings but will mean more wasted space in the log. If the max.compaction.lag.ms or the min.compaction.lag.ms configurations are also specified, then the log compactor considers the log to be eligible for compaction as soon as either: (i) the dirty ratio threshold has been met and the log has had dirty (uncompacted) records for at least the min.compaction.lag.ms duration, or (ii) if the log has had dirty (uncompacted) records for at most the max.compaction.lag.ms period.",
    ),
    def(
        "min.compaction.lag.ms",
        Some("log.cleaner.min.compaction.lag.ms"),
        "0",
        ConfigType::Long,
        Check::Long { min: 0, max: LMAX },
        "The minimum time a message will remain uncompacted in the log. Only applicable for logs that are being compacted.",
    ),
    def(
        "min.insync.replicas",
        Some("min.insync.replicas"),
        "1",
        ConfigType::Int,
        Check::Int { min: 1, max: IMAX },
        "Specifies the <i>minimum</i> number of in-sync replicas (including the leader) required for a write to succeed when a producer sets <code>acks</code> to \"all\" (or \"-1\"). In the <code>acks=all</code> case, every in-sync replica must acknowledge a write for it to be considered successful. E.g., if a topic has <code>replication.factor</code> of 3 and the ISR set includes all three replicas, then all three replicas must acknowledge an <code>acks=all</code> write for it to succeed, even if <code>min.insync.replicas</code> happens to be less than 3. If <code>acks=all</code> and the current ISR set contains fewer than <code>min.insync.replicas</code> members, then the producer will raise an exception (either <code>NotEnoughReplicas</code> or <code>NotEnoughReplicasAfterAppend</code>).<br> Regardless of the <code>acks</code> setting, the messages will not be visible to the consumers until they are replicated to all in-sync replicas and the <code>min.insync.replicas</code> condition is met.<br> When used together, <code>min.insync.replicas</code> and <code>acks</code> allow you to enforce greater durability guarantees. A typical scenario would be to create a topic with a replication factor of 3, set <code>min.insync.replicas</code> to 2, and produce with <code>acks</code> of \"all\". This ensures that a majority of replicas must persist a write before it's considered successful by the producer and it's visible to consumers.<p>Note that when the Eligible Leader Replicas feature is enabled, the semantics of this config changes. Please refer to <a href=\"https://kafka.apache.org/documentation/#eligible_leader_replicas\">the ELR section</a> for more info.</p>",
    ),
    def(
        "preallocate",
        Some("log.preallocate"),
        "true",
        ConfigType::Boolean,
        Check::Bool,
        "True if we should preallocate the file on disk when creating a new log segment. In es: zero-fill the active segment ahead of its last record, so that the fsync before each acknowledgement writes records only (docs/storage.md, Preallocation). On by default in es (Kafka: false), for the throughput and CPU measured in docs/benchmarks.md.",
    ),
    def(
        "redpanda.key.schema.id.validation",
        None,
        "false",
        ConfigType::Boolean,
        Check::Bool,
        "Redpanda's name for confluent.key.schema.validation: validation of keys is on when either is true.",
    ),
    def(
        "redpanda.key.subject.name.strategy",
        None,
        REDPANDA_STRATEGIES[0],
        ConfigType::String,
        Check::OneOf(REDPANDA_STRATEGIES),
        "Redpanda's name for confluent.key.subject.name.strategy, with Redpanda's spellings of the strategies; used when confluent.key.subject.name.strategy is not set.",
    ),
    def(
        "redpanda.value.schema.id.validation",
        None,
        "false",
        ConfigType::Boolean,
        Check::Bool,
        "Redpanda's name for confluent.value.schema.validation: validation of values is on when either is true.",
    ),
    def(
        "redpanda.value.subject.name.strategy",
        None,
        REDPANDA_STRATEGIES[0],
        ConfigType::String,
        Check::OneOf(REDPANDA_STRATEGIES),
        "Redpanda's name for confluent.value.subject.name.strategy, with Redpanda's spellings of the strategies; used when confluent.value.subject.name.strategy is not set.",
    ),
    def(
        "remote.copy.lag.bytes",
        Some("log.remote.copy.lag.bytes"),
        "-1",
        ConfigType::Long,
        Check::Long { min: -1, max: LMAX },
        "Controls one of the two upload eligibility checks (time and size) for copying segments to remote storage. A non-active segment is upload-eligible when either this size-based check or <code>remote.copy.lag.ms</code> is satisfied. When set to 0, uploads are immediately eligible regardless of lag checks. When set to a positive value (bytes), the segment is size-eligible once bytes of newer local log data after that segment reaches this value. When set to -1, this value is derived from effective local retention size (<code>local.retention.bytes</code>). If that effective local retention size is unlimited (-1), this size-based check is not applied. A positive value should not exceed effective local retention size unless local retention is unlimited (-1).",
    ),
    def(
        "remote.copy.lag.ms",
        Some("log.remote.copy.lag.ms"),
        "0",
        ConfigType::Long,
        Check::Long { min: -1, max: LMAX },
        "Controls one of the two upload eligibility checks (time and size) for copying segments to remote storage. A non-active segment is upload-eligible when either this time-based check or <code>remote.copy.lag.bytes</code> is satisfied. When set to 0, uploads are immediately eligible regardless of lag checks. When set to a positive value (ms), the segment is time-eligible once elapsed time since its latest record reaches this value. When set to -1, this value is derived from effective local retention time (<code>local.retention.ms</code>). If that effective local retention time is unlimited (-1), this time-based check is not applied. A positive value should not exceed effective local retention time unless local retention is unlimited (-1).",
    ),
    def(
        "remote.log.copy.disable",
        None,
        "false",
        ConfigType::Boolean,
        Check::Bool,
        "Determines whether tiered data for a topic should become read only, and no more data uploading on a topic. Once this config is set to true, the local retention configuration (i.e. local.retention.ms/bytes) becomes irrelevant, and all data expiration follows the topic-wide retention configuration(i.e. retention.ms/bytes).",
    ),
    def(
        "remote.log.delete.on.disable",
        None,
        "false",
        ConfigType::Boolean,
        Check::Bool,
        "Determines whether tiered data for a topic should be deleted after tiered storage is disabled on a topic. This configuration should be enabled when trying to set <code>remote.storage.enable</code> from true to false",
    ),
    def(
        "remote.storage.enable",
        None,
        "false",
        ConfigType::Boolean,
        Check::Bool,
        "To enable tiered storage for a topic, set this configuration to true. To disable tiered storage for a topic that has it enabled, set this configuration to false. When disabling, you must also set <code>remote.log.delete.on.disable</code> to true.",
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
        "This configuration controls the maximum size a partition (which consists of log segments) can grow to before we will discard old log segments to free up space if we are using the \"delete\" retention policy. By default there is no size limit only a time limit. Since this limit is enforced at the partition level, multiply it by the number of partitions to compute the topic retention in bytes. Additionally, retention.bytes configuration operates independently of \"segment.ms\" and \"segment.bytes\" configurations. Moreover, it triggers the rolling of new segment if the retention.bytes is configured to zero.",
    ),
    def(
        "retention.ms",
        Some("log.retention.ms"),
        "604800000",
        ConfigType::Long,
        Check::Long { min: -1, max: LMAX },
        "This configuration controls the maximum time we will retain a log before we will discard old log segments to free up space if we are using the \"delete\" retention policy. This represents an SLA on how soon consumers must read their data. If set to -1, no time limit is applied. Additionally, retention.ms configuration operates independently of \"segment.ms\" and \"segment.bytes\" configurations. Moreover, it triggers the rolling of new segment if the retention.ms condition is satisfied.",
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
        "This configuration controls the segment file size for the log. Retention and cleaning is always done a file at a time so a larger segment size means fewer files but less granular control over retention. The active segment is rolled once it reaches this size.",
    ),
    def(
        "segment.index.bytes",
        Some("log.index.size.max.bytes"),
        "10485760",
        ConfigType::Int,
        Check::Int { min: 4, max: IMAX },
        "This configuration controls the size of the index that maps offsets to file positions. We preallocate this index file and shrink it only after log rolls. You generally should not need to change this setting.",
    ),
    def(
        "segment.jitter.ms",
        Some("log.roll.jitter.ms"),
        "0",
        ConfigType::Long,
        Check::Long { min: 0, max: LMAX },
        "The maximum random jitter subtracted from the scheduled segment roll time to avoid thundering herds of segment rolling",
    ),
    def(
        "segment.ms",
        Some("log.roll.ms"),
        "604800000",
        ConfigType::Long,
        Check::Long { min: 1, max: LMAX },
        "This configuration controls the period of time after which Kafka will force the log to roll even if the segment file isn't full to ensure that retention can delete or compact old data. This forces active segment rolling by time, even if the active segment has not reached <code>segment.bytes</code>. For compacted topics, <code>max.compaction.lag.ms</code> can trigger active segment rolling sooner: the effective time-based roll threshold is the smaller of <code>segment.ms</code> and <code>max.compaction.lag.ms</code>.",
    ),
    def(
        "unclean.leader.election.enable",
        Some("unclean.leader.election.enable"),
        "false",
        ConfigType::Boolean,
        Check::Bool,
        "Indicates whether to enable replicas not in the ISR set to be elected as leader as a last resort, even though doing so may result in data loss.<p>Note: In KRaft mode, when enabling this config dynamically, it needs to wait for the unclean leader electionthread to trigger election periodically (default is 5 minutes). Please run <code>kafka-leader-election.sh</code> with <code>unclean</code> option to trigger the unclean leader election immediately if needed.</p>",
    ),
];

/// Looks up a topic config by name.
pub fn topic_config_def(name: &str) -> Option<&'static TopicConfigDef> {
    TOPIC_CONFIGS.iter().find(|d| d.name == name)
}
