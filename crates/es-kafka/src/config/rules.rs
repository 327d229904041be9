//! The typed, parsed per-topic rules the produce, fetch and storage paths
//! consume ([`TopicRules`], [`CleanupPolicy`], [`TimestampType`]): plain
//! values, built from a [`super::TopicConfig`] whenever it changes, so no
//! request parses a config string.

use crate::codec::compression::Compression;

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
/// [`TopicConfig`](super::TopicConfig) finds the definition, the override or the broker's default
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
    /// `min.insync.replicas`: the smallest ISR an acks=all produce is
    /// accepted with.
    pub min_insync_replicas: usize,
    /// `confluent.key.schema.validation` (or Redpanda's name): keys must
    /// carry a registered schema id, under the subject this strategy names.
    pub key_schema: Option<SubjectStrategy>,
    /// The same for values.
    pub value_schema: Option<SubjectStrategy>,
}

impl TopicRules {
    /// Whether produced records are checked against the schema registry:
    /// the one flag the produce path reads when they are not.
    pub fn validates_schemas(&self) -> bool {
        self.key_schema.is_some() || self.value_schema.is_some()
    }
}

/// How the subject a schema id must be registered under is named
/// (Confluent's `SubjectNameStrategy` classes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SubjectStrategy {
    /// `<topic>-key` or `<topic>-value`.
    TopicName,
    /// The schema's fully-qualified record name.
    RecordName,
    /// `<topic>-<record name>`.
    TopicRecordName,
}

impl SubjectStrategy {
    /// From a config value in Confluent's or Redpanda's spelling (both
    /// end in the class's simple name).
    pub fn parse(value: &str) -> Option<SubjectStrategy> {
        match value.trim().rsplit('.').next()? {
            "TopicNameStrategy" => Some(SubjectStrategy::TopicName),
            "RecordNameStrategy" => Some(SubjectStrategy::RecordName),
            "TopicRecordNameStrategy" => Some(SubjectStrategy::TopicRecordName),
            _ => None,
        }
    }
}

/// Kafka's record timestamp type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimestampType {
    CreateTime,
    LogAppendTime,
}
