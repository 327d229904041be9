//! What es-broker's test binaries share (each includes this module with
//! `mod common;`): the real `es-broker` binary started through
//! es-test-support's harness, since only this crate's tests know the
//! binary's path. Every other shared helper comes from es-test-support.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use es_test_support::process::BrokerProcess;

/// A running es-broker.
pub type Broker = BrokerProcess;

/// The es-broker binary cargo built for these tests.
pub const ES_BROKER: &str = env!("CARGO_BIN_EXE_es-broker");

/// Starts es-broker on `data_dir` (fresh, or holding data from an earlier
/// run) with the flags `extra`, and waits until it listens.
pub fn start(data_dir: impl Into<PathBuf>, extra: &[&str]) -> Broker {
    Broker::start(Path::new(ES_BROKER), data_dir, extra)
}
