//! What a call on a share-partition names and brings (the inputs of
//! [`super::manager::ShareManager`]'s methods): which share-partition
//! ([`ShareTarget`]), the group's `share.*` configs it reads at each use
//! ([`ShareConfig`], §3.9 of docs/share-groups-design.md), the partition's
//! log as far as loading and acquiring need it ([`ShareLog`], which
//! [`PartitionLog`] is, so tests can drive the manager without a broker),
//! what a fetch asks for and read ([`AcquireRequest`], [`ReadView`]), and
//! why a call failed ([`ShareFailure`]; its Kafka code is in `errors.rs`).

use es_storage::StorageError;

use super::locks::ShareKey;
use super::partition::{AcquireMode, ShareError, ShareLimits};
use crate::partition_log::PartitionLog;

/// Kafka's `share.record.lock.duration.ms` default.
pub const RECORD_LOCK_DURATION_MS_DEFAULT: i64 = 30_000;

/// `share.auto.offset.reset`: where a share-partition without stored state
/// starts (§2.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AutoOffsetReset {
    /// The log's high watermark (Kafka's default).
    #[default]
    Latest,
    /// The log start.
    Earliest,
    /// `by_duration:<ISO-8601>`: the first record with a timestamp at or
    /// after now − `ms` (wall clock), the high watermark when there is none.
    /// Parsing the duration is the configs' (item 14).
    ByDuration { ms: i64 },
}

/// The group configs a share-partition reads at each use (§3.9); the
/// handlers fill it from the group's `share.*` configs (item 14), the
/// default is Kafka's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShareConfig {
    /// `share.delivery.count.limit`, `share.partition.max.record.locks`.
    pub limits: ShareLimits,
    /// `share.record.lock.duration.ms`.
    pub record_lock_duration_ms: i64,
    /// `share.auto.offset.reset`.
    pub auto_offset_reset: AutoOffsetReset,
    /// `share.renew.acknowledge.enable`.
    pub renew_allowed: bool,
    /// `share.isolation.level=read_committed`: fetches stop at the last
    /// stable offset and records of aborted transactions are archived, never
    /// delivered.
    pub read_committed: bool,
}

impl ShareConfig {
    /// Kafka's defaults as the broker's `group.share.*` configs set them
    /// (what a group without `share.*` configs of its own runs with).
    pub fn from_broker(c: &crate::config::ShareBrokerConfig) -> Self {
        ShareConfig {
            limits: ShareLimits {
                delivery_count_limit: u16::try_from(c.get("group.share.delivery.count.limit"))
                    .unwrap_or(5),
                max_record_locks: c.get("group.share.partition.max.record.locks"),
            },
            record_lock_duration_ms: c.get("group.share.record.lock.duration.ms"),
            ..ShareConfig::default()
        }
    }
}

impl Default for ShareConfig {
    fn default() -> Self {
        ShareConfig {
            limits: ShareLimits::default(),
            record_lock_duration_ms: RECORD_LOCK_DURATION_MS_DEFAULT,
            auto_offset_reset: AutoOffsetReset::Latest,
            renew_allowed: true,
            read_committed: false,
        }
    }
}

/// The partition's log as a share-partition sees it: the offsets a load and
/// a reset need. [`PartitionLog`] is one; tests use their own.
pub trait ShareLog {
    /// The log start offset now.
    fn log_start_offset(&self) -> i64;
    /// The high watermark now.
    fn high_watermark(&self) -> i64;
    /// The leader epoch written into journal entries.
    fn leader_epoch(&self) -> i32;
    /// The first offset whose record's timestamp is at or after `ts_ms`.
    fn offset_for_timestamp(&self, ts_ms: i64) -> Result<Option<i64>, StorageError>;
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl ShareLog for PartitionLog {
    fn log_start_offset(&self) -> i64 {
        to_i64(PartitionLog::log_start_offset(self))
    }

    fn high_watermark(&self) -> i64 {
        to_i64(PartitionLog::high_watermark(self))
    }

    fn leader_epoch(&self) -> i32 {
        self.replica().assignment().map_or(0, |a| a.leader_epoch)
    }

    fn offset_for_timestamp(&self, ts_ms: i64) -> Result<Option<i64>, StorageError> {
        Ok(PartitionLog::offset_for_timestamp(self, ts_ms)?.map(|(o, _)| to_i64(o)))
    }
}

/// Which share-partition a call is about, and what loading it needs: the
/// topic's name (the files are named by it), its log, and the group's
/// configs.
#[derive(Clone, Copy)]
pub struct ShareTarget<'a> {
    pub key: &'a ShareKey,
    pub topic: &'a str,
    pub log: &'a dyn ShareLog,
    pub config: &'a ShareConfig,
}

/// Why a call on a share-partition failed. Its Kafka code is in `errors.rs`:
/// the core's refusals keep theirs; storage failures (a fenced
/// share-partition, a load that could not read its files) are mostly
/// KAFKA_STORAGE_ERROR.
#[derive(Debug, thiserror::Error)]
pub enum ShareFailure {
    #[error(transparent)]
    Share(#[from] ShareError),
    #[error("share-partition storage: {0}")]
    Storage(#[from] StorageError),
    /// In a cluster: the change is durable here, but the in-sync followers
    /// do not hold it (`leader`: this broker no longer leads the partition;
    /// otherwise they did not copy it in time).
    #[error("{what}")]
    NotReplicated { leader: bool, what: String },
}

/// What ShareFetch asks to acquire, besides the member's fetch lock.
#[derive(Clone, Copy, Debug)]
pub struct AcquireRequest<'a> {
    pub member: &'a str,
    /// MaxRecords.
    pub max_records: i32,
    /// BatchSize.
    pub batch_size: i32,
    pub mode: AcquireMode,
}

/// What the handler read from the log for one acquisition.
#[derive(Clone, Copy, Debug)]
pub struct ReadView<'a> {
    /// The log start of the read's snapshot.
    pub log_start: i64,
    /// Exclusive: the high watermark (the last stable offset under
    /// read_committed).
    pub end: i64,
    /// `(first, last)` of each stored batch read, ascending.
    pub batches: &'a [(i64, i64)],
    /// read_committed: `(first, last)` of the records read that belong to
    /// aborted transactions, ascending. Acquired, they are archived at once
    /// and not handed out (Kafka's `maybeFilterAbortedTransactionalAcquiredRecords`).
    pub aborted: &'a [(i64, i64)],
}
