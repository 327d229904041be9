//! es-kafka: the Kafka protocol layer.
pub mod codec;
