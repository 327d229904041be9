//! The partition as the Kafka layer sees it: appends (produce's batches and
//! the transaction markers), one snapshot per read with its watermarks, when
//! appended records are durable, the offsets ListOffsets looks up, and
//! moving the log's start (DeleteRecords). Handlers and coordinators reach a
//! partition only through [`PartitionLog`].
//!
//! A `PartitionLog` is the local es-storage [`Partition`] and its
//! replication state ([`Replica`]): alone in its ISR, the high watermark is
//! what the local partition has made durable (its group-commit fsync); with
//! followers in the ISR, it is the smallest fsynced end over the ISR, and
//! acks=all waits for it ([`PartitionLog::when_replicated`]). The
//! maintenance the broker itself
//! runs on its local copy (retention, compaction, the periodic flush,
//! configs, close) goes through [`PartitionLog::storage`], which handlers do
//! not use.

use std::sync::Arc;
use std::time::Duration;

use es_storage::{
    AppendInfo, AppendIntent, AppendOutcome, DurableCallback, Isolation, LogSnapshot, Partition,
    ProducerAppend, ProducerState, RecordBatchBuf, Result,
};

use crate::replica::{Replica, WaitDone, WaitError};

/// See the module documentation.
#[derive(Clone, Debug)]
pub struct PartitionLog(Arc<Partition>, Arc<Replica>);

/// Why [`PartitionLog::wait_acknowledged`] did not see its records
/// acknowledged.
#[derive(Debug)]
pub enum AckError {
    Wait(WaitError),
    /// The timeout passed first (the wait stays registered and ends
    /// unobserved).
    TimedOut,
}

impl std::fmt::Display for AckError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AckError::Wait(WaitError::Storage(e)) => write!(f, "{e}"),
            AckError::Wait(WaitError::NotLeader) => f.write_str("leadership moved"),
            AckError::Wait(WaitError::NotEnoughReplicasAfterAppend) => {
                f.write_str("the ISR shrank below min.insync.replicas")
            }
            AckError::TimedOut => f.write_str("not replicated in time"),
        }
    }
}

impl PartitionLog {
    /// Blocks until the records below `end_offset` are acknowledged as
    /// acks=all acknowledges them ([`PartitionLog::when_replicated`]), at
    /// most `timeout`. Transaction markers wait so, as Kafka appends them
    /// with acks=-1: a marker only on its leader's disk is lost when
    /// another replica takes over, and with it the outcome of its
    /// transaction on that partition (the coordinator sends it again only
    /// when it was not acknowledged).
    pub fn wait_acknowledged(
        &self,
        end_offset: u64,
        min_isr: usize,
        timeout: Duration,
    ) -> std::result::Result<(), AckError> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.when_replicated(
            end_offset,
            min_isr,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        );
        match rx.recv_timeout(timeout) {
            Ok(r) => r.map_err(AckError::Wait),
            Err(_) => Err(AckError::TimedOut),
        }
    }

    /// A partition that leads alone until the metadata assigns it replicas.
    pub fn local(partition: Arc<Partition>) -> PartitionLog {
        PartitionLog(partition, Arc::new(Replica::solo()))
    }

    /// Its replication state.
    pub fn replica(&self) -> &Arc<Replica> {
        &self.1
    }

    /// The committed ISR (this broker alone before any assignment).
    pub fn isr(&self) -> Vec<i32> {
        self.1.assignment().map_or_else(Vec::new, |a| a.isr)
    }

    /// The committed ISR's size (1 before any assignment: a partition that
    /// leads alone).
    pub fn isr_size(&self) -> usize {
        self.1.isr_len()
    }

    /// Runs `done` once the records below `end_offset` are on every
    /// in-sync replica's disk (acks=all): the local fsync while the ISR is
    /// this broker alone, the high watermark otherwise. `min_isr` is
    /// checked again when the wait completes (Kafka's
    /// NOT_ENOUGH_REPLICAS_AFTER_APPEND).
    pub fn when_replicated(&self, end_offset: u64, min_isr: usize, done: WaitDone) {
        if !self.1.replicated() {
            // Alone in the ISR, or no longer leading: the local fsync, then
            // whether this broker still leads with enough replicas in sync.
            // A produce whose append raced with losing the leadership is
            // refused, not acknowledged from a log the new leader truncates.
            if let Err(e) = self.1.solo_ack(min_isr) {
                done(Err(e));
                return;
            }
            let replica = self.1.clone();
            self.0.when_durable(
                end_offset,
                Box::new(move |r| {
                    done(match r {
                        Ok(()) => replica.solo_ack(min_isr),
                        Err(e) => Err(WaitError::Storage(e)),
                    })
                }),
            );
            return;
        }
        // The leader's own fsync is part of the wait (followers are served
        // only durable records), and a group commit runs only for records
        // someone waits for: ask for it. Its failure fences the partition;
        // the replicated wait then ends with the request's timeout.
        self.0.when_durable(
            end_offset,
            Box::new(|r| {
                if let Err(e) = r {
                    tracing::error!(error = %e, "the leader's fsync failed");
                }
            }),
        );
        if let Some((d, r)) = self.1.wait_replicated(end_offset, min_isr, done) {
            d(r);
        }
    }

    /// The local storage, for the broker's own maintenance (retention,
    /// compaction, flush, configs, close).
    pub fn storage(&self) -> &Arc<Partition> {
        &self.0
    }

    /// Announces an append on its way, so that a group commit starting
    /// meanwhile waits for it (see [`Partition::announce_append`]).
    pub fn announce_append(&self) -> AppendIntent {
        self.0.announce_append()
    }

    /// Appends a produced batch; with `producer`, the idempotent sequence
    /// check and the transaction state go with it atomically.
    pub fn append_producer(
        &self,
        batch: &mut RecordBatchBuf,
        producer: Option<&ProducerAppend>,
    ) -> Result<AppendOutcome> {
        self.0.append_producer(batch, producer)
    }

    /// Like [`PartitionLog::append_producer`] when that needs no disk work
    /// beyond page-cache writes; None, with nothing changed, when it would
    /// (see [`Partition::try_append_producer`]). For async workers.
    pub fn try_append_producer(
        &self,
        batch: &mut RecordBatchBuf,
        producer: Option<&ProducerAppend>,
    ) -> Result<Option<AppendOutcome>> {
        self.0.try_append_producer(batch, producer)
    }

    /// Appends a transaction marker (commit or abort) for `producer_id`.
    pub fn append_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
        timestamp_ms: i64,
    ) -> Result<AppendInfo> {
        self.0.append_marker(
            producer_id,
            producer_epoch,
            commit,
            coordinator_epoch,
            timestamp_ms,
        )
    }

    /// Runs `done` once the records below `end_offset` are durable, without
    /// blocking the caller.
    pub fn when_durable(&self, end_offset: u64, done: DurableCallback) {
        self.0.when_durable(end_offset, done)
    }

    /// Blocks until the records below `end_offset` are durable.
    pub fn wait_durable(&self, end_offset: u64) -> Result<()> {
        self.0.wait_durable(end_offset)
    }

    /// One read's view: the watermarks, the log start, the last stable
    /// offset, the segments and (read_committed) the aborted transactions,
    /// taken together.
    pub fn snapshot(&self, offset: u64, isolation: Isolation) -> LogSnapshot {
        self.0.snapshot(offset, isolation)
    }

    pub fn log_start_offset(&self) -> u64 {
        self.0.log_start_offset()
    }

    /// What consumers may read and producers have been told.
    pub fn high_watermark(&self) -> u64 {
        self.0.high_watermark()
    }

    /// The end of the committed part of the log (read_committed's limit).
    pub fn last_stable_offset(&self) -> u64 {
        self.0.last_stable_offset()
    }

    /// The next offset an append gets.
    pub fn log_end_offset(&self) -> u64 {
        self.0.log_end_offset()
    }

    /// The first record with a timestamp >= `ts`: (offset, timestamp).
    pub fn offset_for_timestamp(&self, ts: i64) -> Result<Option<(u64, i64)>> {
        self.0.offset_for_timestamp(ts)
    }

    /// The record with the largest timestamp: (offset, timestamp).
    pub fn max_timestamp(&self) -> Result<Option<(u64, i64)>> {
        self.0.max_timestamp()
    }

    /// Moves the log start offset to `offset` durably (DeleteRecords);
    /// returns the new low watermark.
    pub fn delete_records_before(&self, offset: u64) -> Result<u64> {
        self.0.delete_records_before(offset)
    }

    /// Idempotent producers' and transactions' state (DescribeProducers).
    pub fn producer_state(&self) -> ProducerState {
        self.0.producer_state()
    }

    /// Forgets producers idle longer than `expiration_ms` without an open
    /// transaction (`producer.id.expiration.ms`).
    pub fn expire_producers(&self, now_ms: i64, expiration_ms: i64) -> usize {
        self.0.expire_producers(now_ms, expiration_ms)
    }

    /// Bytes of records held (DescribeLogDirs).
    pub fn size_bytes(&self) -> u64 {
        self.0.size_bytes()
    }
}
