//! es-registry: a schema registry with Confluent Schema Registry's REST
//! API, built into es-broker but knowing nothing of Kafka's protocol.
//!
//! Layers, from the inside out: [`model`] (the vocabulary), [`format`]
//! (parsing schemas and checking two for compatibility: Avro, JSON Schema
//! and Protobuf), [`registry`] (the sans-io core: state and every API
//! operation, errors typed as [`RegistryError`], mapped to HTTP status and
//! Confluent's `error_code` in [`error`] alone), [`store`] (`schemas.json`,
//! replaced atomically; [`commit`] decides when a change is durable), and the async shell: [`http`] (axum routes) and
//! [`server`] (load, listen, serve), with [`access`] (authentication and
//! authorization, when the embedder provides them). Limits are in [`limits`].

pub mod access;
pub mod change;
pub mod commit;
pub mod error;
pub mod format;
pub mod http;
pub mod limits;
pub mod model;
pub mod registry;
pub mod server;
pub mod store;

pub use change::Change;
pub use error::RegistryError;
pub use registry::Registry;
pub use server::{bind, run, Bound, Config, Shared, StartError};
