//! Idempotent and transactional producers: producer-id allocation, the
//! transaction coordinator and its durable log.
//!
//! Layers, following "sans-io cores, thin shells":
//! - [`state`]: one state machine per `transactional.id` (Empty, Ongoing,
//!   PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, Dead), as
//!   Kafka 4's transaction coordinator defines it for transaction-version-1
//!   clients. It validates requests and computes transitions; it owns no
//!   clock, no file, no lock.
//! - [`log`]: the local durable form, `data/producers.journal` (append-only,
//!   CRC-checked, fsynced before the answer that depends on it, concurrent
//!   appends sharing one fsync) folded periodically into
//!   `data/producers.json` (atomic replace) and truncated. Once the
//!   metadata quorum has started, transactional ids live in the metadata
//!   log instead ([`failover`]); the journal keeps producer-id reservations
//!   and remote offsets.
//! - [`coordinator`]: the blocking shell. It allocates producer ids from
//!   journaled blocks (granted by the metadata quorum), runs each transition
//!   through the journal, writes the commit/abort markers into every
//!   partition of a transaction it leads (`PartitionLog::append_marker` +
//!   `wait_acknowledged`: on every in-sync replica) and has the other leaders
//!   write theirs ([`markers`]), hands transactional
//!   offsets to the group coordinator when a transaction commits, and runs
//!   the periodic work: aborting transactions past their timeout, finishing
//!   transactions a crash left in a Prepare state, expiring idle
//!   transactional ids and producers, and folding the journal.
//! - [`failover`]: the state of transactional ids in the metadata quorum
//!   once it has started (so the coordinator can move with the leadership
//!   of `__transaction_state`), fenced by the leader epoch it loaded at;
//!   [`placement`]: the leaderships, fences and store it shares with
//!   [`coordinator`].
//! - [`markers`]: where a completing transaction's markers go (this
//!   broker's partitions, or WriteTxnMarkers to their leaders).
//! - [`pid_blocks`]: producer-id blocks, granted by the metadata quorum.
//! - [`cluster`] and [`remote_offsets`]: TxnOffsetCommits taken as group coordinator for a
//!   transaction coordinated by another broker, settled by WriteTxnMarkers.
//! - [`groups`]: the group coordinator seen as the receiver of transactional
//!   offsets (member checks for TxnOffsetCommit, the commit on EndTxn).
//!
//! The per-partition side (sequence numbers, duplicates, fencing, the last
//! stable offset and aborted transactions) lives in es-storage, checked and
//! updated atomically with each append and rebuilt from the log itself.

pub mod cluster;
pub mod coordinator;
pub mod error;
pub mod failover;
pub mod groups;
pub mod log;
pub mod markers;
pub mod pid_blocks;
pub mod placement;
pub mod remote_offsets;
pub mod state;
#[cfg(test)]
mod wire_tests;

pub use coordinator::{Partitions, ProduceGuard, TxnCoordinator, TxnOffsetSink};
pub use pid_blocks::PidBlocks;
pub use state::{TopicPartition, TxnOffset, TxnRecord, TxnState};

/// The coordinator's settings, named after Kafka's broker configs, with
/// Kafka's defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxnConfig {
    /// `transaction.max.timeout.ms`: the largest `transaction.timeout.ms` a
    /// producer may ask for (INVALID_TRANSACTION_TIMEOUT above it).
    pub transaction_max_timeout_ms: i32,
    /// `transactional.id.expiration.ms`: an idle transactional id is forgotten.
    pub transactional_id_expiration_ms: i64,
    /// `producer.id.expiration.ms`: an idle producer's per-partition state is dropped.
    pub producer_id_expiration_ms: i64,
    /// How often open transactions are checked against their timeout. Kafka's
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms` is 10 s;
    /// es checks every second (the check walks an in-memory map).
    pub abort_check_interval_ms: u64,
    /// `transaction.remove.expired.transaction.cleanup.interval.ms`.
    pub expired_id_check_interval_ms: i64,
    /// `producer.id.expiration.check.interval.ms`.
    pub producer_expiration_check_interval_ms: i64,
    /// How long completing a transaction waits for transactional appends
    /// that passed verification before its markers are written.
    pub inflight_wait_ms: u64,
}

impl Default for TxnConfig {
    fn default() -> Self {
        TxnConfig {
            transaction_max_timeout_ms: 900_000,
            transactional_id_expiration_ms: 7 * 24 * 3600 * 1000,
            producer_id_expiration_ms: 24 * 3600 * 1000,
            abort_check_interval_ms: 1_000,
            expired_id_check_interval_ms: 3600 * 1000,
            producer_expiration_check_interval_ms: 600 * 1000,
            inflight_wait_ms: 30_000,
        }
    }
}

/// Producer ids reserved per journal entry (Kafka's block size).
pub const PID_BLOCK_SIZE: i64 = 1000;
/// The coordinator epoch written into markers: one node, one epoch.
pub const COORDINATOR_EPOCH: i32 = 0;
