//! es-kafka: the Kafka protocol layer.
//!
//! It maps the Kafka wire protocol onto es-storage and knows nothing of
//! sockets beyond a byte stream. Follow a produced record from [`server`]
//! (accept) to [`connection`] (frames; request order through [`turn`]) to
//! [`handlers`] (one module per API family, decoded by (api key, version)
//! against [`versions`]) to [`broker`]/[`topics`] (the registry of open
//! partitions) and into es-storage. [`codec`] converts Kafka RecordBatches
//! to and from the documented per-record disk format; [`errors`] maps every
//! lower-layer failure to a Kafka error code; [`config`] holds Kafka's
//! config names, defaults and validation. [`shares`] holds share groups'
//! share-partitions (KIP-932): for now the sans-io core of one
//! share-partition's record states.
//!
//! Modules depend on each other in one direction (`tests/module_graph.rs`
//! keeps it so): handlers use the broker, the broker uses topics, configs and
//! the coordinators, and none of these reach back.

pub mod broker;
pub mod codec;
pub mod config;
pub mod connection;
pub mod errors;
pub mod groups;
pub mod handlers;
pub mod hw_checkpoint;
pub mod interbroker;
pub mod limits;
pub mod metrics;
pub mod mirror;
pub mod partition_log;
pub mod quota;
pub mod replica;
pub mod schema_validation;
pub mod security;
pub mod server;
pub mod shares;
pub mod topics;
pub mod turn;
pub mod txn;
pub mod versions;

pub use broker::{Broker, BrokerConfig};
/// The protocol crate at the version es speaks, for tests and tools that
/// build requests byte-for-byte as clients do.
pub use kafka_protocol;
