//! Admin APIs: CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords,
//! ElectLeaders, DescribeConfigs, AlterConfigs, IncrementalAlterConfigs, DescribeCluster,
//! DescribeLogDirs, DescribeTopicPartitions.
//!
//! State changes go through [`crate::broker::Broker`], which serialises them
//! and persists `topic.json` atomically; this module maps requests and
//! results to Kafka's shapes and error codes. Replication factors and manual
//! assignments are checked by the metadata quorum (docs/cluster.md);
//! ElectLeaders goes through it too (docs/replication.md). Broker configs come from command-line
//! flags, except the dynamic ones (the broker-level names of topic configs,
//! `log.flush.interval.messages`, `log.retention.ms`, ...), which AlterConfigs
//! and IncrementalAlterConfigs change on BROKER `"<node id>"` and on the
//! cluster default ""; see [`crate::config`] for how topics inherit them.
//!
//! Internal topics, as Kafka 4.4 treats them (checked against it): only
//! `__cluster_metadata` is closed to CreateTopics, so a client may create
//! `__consumer_offsets` before the broker does (with the settings it asks
//! for) and gets TOPIC_ALREADY_EXISTS once it exists; DeleteTopics deletes
//! it (on Kafka that loses every committed offset; es keeps offsets in the
//! group coordinator's files, so nothing is lost, and the next group
//! coordinator lookup creates it again, with a new id); CreatePartitions and
//! DescribeConfigs work on it as on any topic; DeleteRecords refuses it with
//! INVALID_TOPIC_EXCEPTION.
//!
//! One submodule per API family: [`topics`] (CreateTopics, DeleteTopics,
//! CreatePartitions), [`configs`] (DescribeConfigs, AlterConfigs,
//! IncrementalAlterConfigs), [`partitions`] (DeleteRecords, ElectLeaders),
//! [`describe`] (DescribeCluster, DescribeLogDirs, DescribeTopicPartitions).

pub mod configs;
pub mod describe;
pub mod partitions;
pub mod topics;

#[cfg(test)]
mod admin_tests;

use kafka_protocol::protocol::StrBytes;

pub use configs::{
    alter_configs, apply_incremental, describe_configs, incremental_alter_configs, OP_APPEND,
    OP_DELETE, OP_SET, OP_SUBTRACT, RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_TOPIC,
};
pub use describe::{
    describe_cluster, describe_log_dirs, describe_topic_partitions,
    DESCRIBE_PARTITIONS_LIMIT_DEFAULT,
};
pub use partitions::{delete_records, elect_leaders};
pub use topics::{create_partitions, create_topics, delete_topics};

fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}
