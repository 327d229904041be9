//! Kafka wire codecs: frames and record batches.
