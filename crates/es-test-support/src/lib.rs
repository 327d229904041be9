//! Helpers that the tests of several es crates need, written once: Kafka
//! record batches ([`batch`]), request and response framing ([`wire`]), a
//! broker to test against, as the real `es-broker` binary ([`process`]) or
//! in this process ([`in_process`]), bounded waits ([`wait`]), and the
//! channel a partition's durability callback reports on ([`durable`]).
//!
//! A dev-dependency only (never published): every helper panics on what a
//! test does not expect, with a message saying what it was doing. The crates
//! whose types it uses (es-storage, es-kafka) may list it as a
//! dev-dependency; their integration tests then share these types with it,
//! their in-crate unit tests do not (those link a second copy of the crate),
//! so only integration tests and other crates' tests use it.

// The in-process broker's request futures nest deeply (a Kafka request
// through the metadata quorum's types); the default limit is too low.
#![recursion_limit = "256"]

pub mod batch;
pub mod durable;
pub mod in_process;
pub mod process;
pub mod wait;
pub mod wire;
