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
}

/// Kafka's record timestamp type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimestampType {
    CreateTime,
    LogAppendTime,
}
