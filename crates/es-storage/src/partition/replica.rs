//! What replication needs from a partition, Kafka's way (the leader's
//! followers fetch, append the leader's records at the leader's offsets,
//! truncate by leader epoch): the leader-epoch history the partition owns,
//! follower appends, and the high watermark the replication layer sets.
//!
//! Leader epochs: the partition opens `leader_epochs.json` with its
//! segments ([`crate::epochs::EpochHistory`]); recovery drops the entries
//! that start beyond the recovered log end (an entry at exactly the log end
//! is a leader's epoch with no record yet, and stays) and moves the first
//! entry up to the log start. Every change is durable before the call
//! returns and is made under the writer lock, so an epoch is in the history
//! before any record of it is written; readers get a copy of the entries
//! with their [`super::LogSnapshot`].
//!
//! Follower appends ([`Partition::append_replica`]) go through the same
//! write, index, batch marks and group commit as a produce; their producer
//! state is what recovery would rebuild from the same records (the leader
//! checked the sequences), so after a fail-over the new leader deduplicates
//! retries and knows the open and aborted transactions.
//!
//! The high watermark: a single node shows readers its durable end (or its
//! written end with `every_records > 1`). Replicated
//! ([`Partition::set_replicated`]), readers see what the replication layer
//! sets with [`Partition::set_high_watermark`]: the smallest fsynced end
//! over the ISR, never above this replica's own durable end.

use std::path::Path;

use super::{AppendInfo, Partition, WriterGuard};
use crate::batch::RecordBatchBuf;
use crate::commit::Refused;
use crate::epochs::{EpochEntry, EpochHistory};
use crate::error::{Result, StorageError};
use crate::fs::Fs;
use crate::record::RecordIter;

/// Opens the leader-epoch history of the partition in `dir` at recovery:
/// entries starting after `log_end` go (their records were lost), and the
/// first entry starts no lower than `log_start`.
pub(super) fn recover_epochs(
    fs: &dyn Fs,
    dir: &Path,
    log_start: u64,
    log_end: u64,
) -> Result<EpochHistory> {
    let mut h = EpochHistory::open(fs, dir)?;
    h.truncate_from_end(fs, log_end.saturating_add(1))?;
    h.truncate_from_start(fs, log_start)?;
    Ok(h)
}

/// Checks a follower append's offsets: one per record, strictly
/// increasing, representable as Kafka offsets (i64).
fn check_offsets(records: usize, offsets: &[u64]) -> Result<()> {
    if records == 0 {
        return Err(StorageError::Invalid("empty append".into()));
    }
    if offsets.len() != records {
        return Err(StorageError::Invalid(format!(
            "{} offsets for {records} records",
            offsets.len()
        )));
    }
    if let Some(w) = offsets.windows(2).find(|w| w[1] <= w[0]) {
        return Err(StorageError::Invalid(format!(
            "offset {} follows {}: offsets must increase",
            w[1], w[0]
        )));
    }
    let last = offsets[offsets.len() - 1];
    if last >= i64::MAX as u64 {
        return Err(StorageError::Invalid(format!("offset {last} is too large")));
    }
    Ok(())
}

impl Partition {
    /// A leader's new epoch: from the current log end on, records are
    /// written in `epoch`. Durable (the history file replaced and synced)
    /// before it returns; call it before appending in that epoch. A no-op
    /// when `epoch` is not newer than the latest in the history; negative
    /// epochs are refused.
    pub fn assign_leader_epoch(&self, epoch: i32) -> Result<()> {
        let _w = self.writer.lock();
        self.writable()?;
        let mut h = self.epochs.lock();
        if h.latest().is_some_and(|l| epoch <= l.epoch) {
            return Ok(());
        }
        let log_end = self.log_end_offset();
        if h.assign(self.fs(), epoch, log_end)? {
            self.publish_epochs(&h);
        }
        Ok(())
    }

    /// The leader-epoch history, oldest first.
    pub fn leader_epochs(&self) -> Vec<EpochEntry> {
        self.epoch_list.read().to_vec()
    }

    /// The newest epoch in the history.
    pub fn latest_leader_epoch(&self) -> Option<i32> {
        self.epoch_list.read().last().map(|e| e.epoch)
    }

    /// The epoch the record at `offset` was written in (None below the
    /// history's first entry).
    pub fn epoch_at(&self, offset: u64) -> Option<i32> {
        let list = self.epoch_list.read();
        let i = list.partition_point(|e| e.start_offset <= offset);
        i.checked_sub(1).map(|i| list[i].epoch)
    }

    /// OffsetForLeaderEpoch, Kafka's `endOffsetFor` with this log's end:
    /// the largest epoch at or below `epoch` and the offset where it ends
    /// (the next epoch's start, or the log end for the newest); (-1, -1)
    /// for -1, an epoch above every known one, or an empty history; an
    /// epoch below every known one gets itself and the first start.
    pub fn end_offset_for_epoch(&self, epoch: i32) -> (i32, i64) {
        // Lock order: epochs, then commit (for the log end).
        let h = self.epochs.lock();
        h.end_offset_for(epoch, self.log_end_offset())
    }

    /// A follower's append of its leader's records. `batch` holds them
    /// decoded, pushed as a produce pushes them (with
    /// [`RecordBatchBuf::push_batch_start`] / `end_batch` for a batch the
    /// producer compressed); `offsets` gives each record its leader's
    /// offset: one per record, strictly increasing, the first at or after
    /// this log's end (gaps allowed: a compacted leader has them). `epoch`
    /// is the leader epoch the batches were stamped with: newer than the
    /// history's latest, it is assigned at the first offset (durably,
    /// before the write); older, the append is refused (truncate first).
    ///
    /// The records are written as a produce's are (one write, index, batch
    /// marks, the same group commit: wait with [`Partition::wait_durable`]
    /// or [`Partition::when_durable`]), with no sequence check; the producer
    /// state and aborted transactions are updated as recovery's replay of
    /// these records would. A bad offsets list is an error, never a panic.
    pub fn append_replica(
        &self,
        batch: &mut RecordBatchBuf,
        offsets: &[u64],
        epoch: i32,
    ) -> Result<AppendInfo> {
        check_offsets(batch.len(), offsets)?;
        if epoch < 0 {
            return Err(StorageError::Invalid(format!(
                "leader epoch {epoch} is negative"
            )));
        }
        let mut w = self.writer.lock();
        self.writable()?;
        let log_end = self.log_end_offset();
        if offsets[0] < log_end {
            return Err(StorageError::Invalid(format!(
                "offset {} is below the log end {log_end}",
                offsets[0]
            )));
        }
        {
            let mut h = self.epochs.lock();
            match h.latest() {
                Some(l) if epoch < l.epoch => {
                    return Err(StorageError::Invalid(format!(
                        "records of leader epoch {epoch} after epoch {}: truncate first",
                        l.epoch
                    )))
                }
                Some(l) if epoch == l.epoch => {}
                _ => {
                    if h.assign(self.fs(), epoch, offsets[0])? {
                        self.publish_epochs(&h);
                    }
                }
            }
        }
        let (info, hw) = self.append_locked(&mut w, batch, Some(offsets))?;
        {
            let now = self.now_ms();
            let mut ps = self.producers.lock();
            // Sealed just now by this partition: every record decodes.
            for r in RecordIter::read_checked(batch.as_bytes()).map_while(|r| r.ok()) {
                ps.replay(&r, now);
            }
        }
        drop(w);
        if let Some(hw) = hw {
            self.notify(hw);
        }
        Ok(info)
    }

    /// Replicated (`on`): readers see the high watermark the replication
    /// layer sets ([`Partition::set_high_watermark`]) instead of the durable
    /// end; it starts at what readers saw when this is switched on (at most
    /// the durable end), or, the first time after a restart, at the high
    /// watermark given to [`Partition::restore_high_watermark`]. Off: back
    /// to the single-node rule.
    pub fn set_replicated(&self, on: bool) {
        let hw = {
            let mut c = self.commit.lock();
            let restored = c.restored_hw.take();
            match (on, c.replicated_hw) {
                (true, None) => {
                    // Never above the durable end (with `every_records > 1`
                    // readers saw the written end).
                    let mut hw = self.visible(&c).offset.min(c.core.durable().offset);
                    if let Some(r) = restored {
                        hw = hw.min(r.max(self.log_start_offset()));
                    }
                    c.replicated_hw = Some(hw);
                }
                (false, Some(_)) => c.replicated_hw = None,
                _ => return,
            }
            self.visible(&c).offset
        };
        self.notify(hw);
    }

    /// Where this replica's high watermark starts when the replication
    /// layer first switches it on after the partition was opened: the high
    /// watermark last checkpointed, or the log start when none was. A log
    /// opened after a crash holds records the other replicas may never have
    /// had (fsynced here, never acknowledged); readers must not see them
    /// until the in-sync replicas have them again. Has no effect once
    /// replication was switched on or off since the partition was opened
    /// (alone in the ISR, the durable end is committed).
    pub fn restore_high_watermark(&self, hw: u64) {
        let mut c = self.commit.lock();
        if c.replicated_hw.is_none() {
            c.restored_hw = Some(hw);
        }
    }

    /// Whether the partition is replicated ([`Partition::set_replicated`]).
    pub fn is_replicated(&self) -> bool {
        self.commit.lock().replicated_hw.is_some()
    }

    /// Sets the high watermark of a replicated partition: at most this
    /// replica's durable end (a larger value is clamped), and it only moves
    /// forward (a smaller value is ignored; only [`Partition::truncate_to`]
    /// lowers it). Returns the high watermark now in effect (for a partition
    /// that is not replicated, the usual one, unchanged).
    pub fn set_high_watermark(&self, hw: u64) -> u64 {
        let moved = {
            let mut c = self.commit.lock();
            let durable = c.core.durable().offset;
            match c.replicated_hw.as_mut() {
                None => return self.visible(&c).offset,
                Some(cur) => {
                    let next = hw.min(durable);
                    if next <= *cur {
                        return *cur;
                    }
                    *cur = next;
                    next
                }
            }
        };
        self.notify(moved);
        moved
    }

    /// The durable (fsynced) end of the log: what a follower reports to its
    /// leader, and the leader's own share of the high watermark.
    pub fn durable_end(&self) -> u64 {
        self.commit.lock().core.durable().offset
    }

    /// The log start moved (retention, DeleteRecords) to `start`: the epoch
    /// history's start moves with it, durably. Under the writer lock.
    pub(crate) fn epochs_start_moved(&self, _w: &WriterGuard<'_>, start: u64) -> Result<()> {
        let mut h = self.epochs.lock();
        h.truncate_from_start(self.fs(), start)?;
        self.publish_epochs(&h);
        Ok(())
    }

    /// Publishes the history's entries to snapshots (under the epochs lock).
    pub(super) fn publish_epochs(&self, h: &EpochHistory) {
        *self.epoch_list.write() = h.entries().into();
    }

    /// Refuses when the partition is fenced or closed.
    pub(super) fn writable(&self) -> Result<()> {
        match self.commit.lock().core.writable() {
            Ok(()) => Ok(()),
            Err(Refused::Fenced(f)) => Err(self.fence_error(&f)),
            Err(Refused::Closed) => Err(StorageError::Closed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::check_offsets;

    #[test]
    fn offsets_lists_are_checked() {
        assert!(check_offsets(3, &[5, 6, 9]).is_ok());
        assert!(check_offsets(0, &[]).is_err(), "empty");
        assert!(check_offsets(3, &[5, 6]).is_err(), "too few");
        assert!(check_offsets(2, &[5, 6, 7]).is_err(), "too many");
        assert!(check_offsets(2, &[6, 6]).is_err(), "repeated");
        assert!(check_offsets(2, &[7, 6]).is_err(), "decreasing");
        assert!(check_offsets(1, &[i64::MAX as u64]).is_err(), "too large");
    }
}
