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
//! ([`BrokerTopicDefaults`]). Kafka's other reconfigurable broker configs
//! ([`broker_only`]: thread pools, cleaner tuning, the listeners' Kerberos
//! settings) are accepted and kept without effect. Every other broker config
//! is read-only.
//!
//! Group configs (the GROUP resource of KIP-848) are in [`group`]; the share
//! groups' broker configs (`group.share.*`), which bound and default a share
//! group's own, in [`share`].
//!
//! The parts: [`table`] lists the configs, [`validate`] checks values
//! against it, [`broker`] holds the broker-level settings and dynamic
//! configs, [`topic`] a topic's configuration over them, and [`rules`] the
//! parsed per-topic rules the request paths read.

pub mod broker;
pub mod broker_only;
pub mod group;
pub mod rules;
pub mod share;
pub mod table;
pub mod topic;
pub mod validate;

#[cfg(test)]
mod config_tests;

pub use broker::{
    BrokerConfigEntry, BrokerSettings, BrokerTopicDefaults, DynamicBrokerConfigs,
    OFFSETS_TOPIC_PARTITIONS_DEFAULT, OFFSETS_TOPIC_SEGMENT_BYTES, TRANSACTION_STATE_MIN_ISR,
    TRANSACTION_STATE_PARTITIONS_DEFAULT, TRANSACTION_STATE_REPLICATION_FACTOR,
    TRANSACTION_STATE_SEGMENT_BYTES,
};
pub use broker_only::broker_dynamic_def;
pub use group::{
    describe_group, group_config_def, validate_group_config, validate_group_config_in,
    GroupConfigDef, GroupOverrides,
};
pub use rules::{CleanupPolicy, SubjectStrategy, TimestampType, TopicRules};
pub use share::{is_share_broker_setting, ShareBrokerConfig};
pub use table::{
    topic_config_def, ConfigSource, ConfigType, TopicConfigDef, CONFLUENT_STRATEGIES,
    INTERNAL_SEGMENT_BYTES, REDPANDA_STRATEGIES, TOPIC_CONFIGS,
};
pub use topic::{DescribedConfig, TopicConfig};
pub use validate::{validate_broker_config, validate_topic_config, ConfigError};
