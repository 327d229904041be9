//! What es-broker's test binaries share (each includes this module with
//! `mod common;`): the real `es-broker` binary started through
//! es-test-support's harness, since only this crate's tests know the
//! binary's path, and librdkafka's client set-up, since only this crate's
//! tests use librdkafka. Every other shared helper comes from
//! es-test-support.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use es_test_support::process::BrokerProcess;
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;

/// A running es-broker.
pub type Broker = BrokerProcess;

/// The es-broker binary cargo built for these tests.
pub const ES_BROKER: &str = env!("CARGO_BIN_EXE_es-broker");

/// Starts es-broker on `data_dir` (fresh, or holding data from an earlier
/// run) with the flags `extra`, and waits until it listens.
pub fn start(data_dir: impl Into<PathBuf>, extra: &[&str]) -> Broker {
    Broker::start(Path::new(ES_BROKER), data_dir, extra)
}

/// librdkafka's configuration for the broker at `bootstrap`, over IPv4
/// (the brokers here listen on 127.0.0.1).
pub fn client_config(bootstrap: &str) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", bootstrap)
        .set("broker.address.family", "v4");
    c
}

/// An admin client of the broker at `bootstrap`.
pub fn admin(bootstrap: &str) -> AdminClient<DefaultClientContext> {
    client_config(bootstrap).create().expect("admin client")
}

/// Admin options whose operation and request timeouts are both `timeout`.
pub fn admin_opts(timeout: Duration) -> AdminOptions {
    AdminOptions::new()
        .operation_timeout(Some(timeout))
        .request_timeout(Some(timeout))
}

/// Milliseconds since the Unix epoch (0 for a clock set before it).
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

pub mod cluster;
pub mod replicas;
pub mod share;
pub mod txn;
