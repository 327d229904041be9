//! Truncation: a follower cuts its log back to where it agrees with its
//! leader ([`Partition::truncate_to`]), or drops all of it and restarts at
//! the leader's log start ([`Partition::truncate_fully_and_start_at`]).
//!
//! Under the writer lock:
//! 1. the group-commit core moves its marks back to the cut and hands back
//!    the waiters whose records are gone, which fail; readers' new
//!    snapshots stop at the cut (the high watermark comes back too). An
//!    fsync running meanwhile counts at most up to the cut when it ends
//!    ([`crate::commit::CommitCore::truncated`]);
//! 2. the segments wholly above the cut leave the list and their files are
//!    deleted newest first, the directory fsynced after each, so a crash
//!    at any point leaves a prefix of the old segments;
//! 3. the segment holding the cut is cut at a record boundary, its index
//!    entries and batch marks with it, and its three files fsynced;
//! 4. `partition.json` (log start, compaction progress), the epoch history
//!    (entries starting at or after the cut) and the producer state
//!    (rebuilt from the snapshot at or below the cut and the records after
//!    it, as recovery does, then written as the new snapshot) follow.
//!
//! A crash between the steps leaves a log that is a prefix of the old one
//! and at least as long as the cut; recovery makes the rest consistent (it
//! drops epochs starting beyond the log end and ignores a producer snapshot
//! beyond it), and the follower truncates again. A failure after step 1
//! fences the partition (memory and disk may disagree) until a restart runs
//! recovery. Readers holding an older snapshot keep their segment handles;
//! one that reads above the cut of the segment that was cut may find
//! fewer bytes (an error) or records written after the cut.

use std::sync::Arc;
use std::time::Instant;

use super::{recover_producers, Mark, Partition, WriterGuard};
use crate::compaction::{PartitionState, STATE_FILE};
use crate::error::{Result, StorageError};
use crate::producers::{ProducerState, SNAPSHOT_FILE};
use crate::segment::Segment;

impl Partition {
    /// Removes every record at offset `end_offset` or above, durably (files
    /// and directory fsynced) before it returns; the log end becomes
    /// `end_offset` (Kafka's `truncateTo`: even when the last record kept
    /// is lower, after a gap) and the durable mark and high watermark come
    /// back to at most it. Waiters for records above the cut fail. At or
    /// beyond the log end no record goes, but leader epochs starting at or
    /// after `end_offset` still leave the epoch history (as Kafka's
    /// `truncateTo` always truncates its epoch cache: a broker that led an
    /// epoch in which nothing was written has an entry its new leader's
    /// log does not, and would be told its log diverges at every fetch).
    /// Below the first segment it
    /// empties the log and restarts it there
    /// ([`Partition::truncate_fully_and_start_at`]); below the log start,
    /// the log start comes down to `end_offset` (as Kafka's).
    pub fn truncate_to(&self, end_offset: u64) -> Result<()> {
        let mut w = self.lock_writer()?;
        self.writable()?;
        if end_offset >= self.log_end_offset() {
            let mut h = self.epochs.lock();
            h.truncate_from_end(self.fs(), end_offset)?;
            self.publish_epochs(&h);
            return Ok(());
        }
        let segs = self.segments();
        let k = segs.partition_point(|s| s.base_offset <= end_offset);
        if k == 0 {
            return self.truncate_fully_locked(&mut w, end_offset);
        }
        let seg = segs[k - 1].clone();
        let (pos, seg_end) = cut_point(&seg, end_offset)?;
        let gone = self.move_marks_to_cut(
            Mark {
                offset: end_offset,
                segment: seg.clone(),
                pos,
            },
            false,
        );
        self.fail_truncated(gone, end_offset);
        let done = (|| -> Result<()> {
            let dropped = self.segments.truncate_to(k);
            self.delete_segments(&dropped)?;
            seg.truncate_at(pos, seg_end)?;
            let start = self.log_start_offset().min(end_offset);
            self.truncate_state(start, end_offset)?;
            self.set_log_start_offset(&w, start);
            {
                let mut h = self.epochs.lock();
                h.truncate_from_end(self.fs(), end_offset)?;
                self.publish_epochs(&h);
            }
            let segs = self.segments();
            let mut st =
                recover_producers(self.fs(), &self.dir, &segs, start, seg_end, self.now_ms())?;
            // On disk it covers the records kept; in memory, up to the cut.
            crate::meta::write_json(self.fs(), &self.dir.join(SNAPSHOT_FILE), &st)?;
            st.applied_up_to = end_offset;
            *self.producers.lock() = st;
            Ok(())
        })();
        self.finish_truncation(&mut w, done, end_offset)
    }

    /// Kafka's `truncateFullyAndStartAt`: every segment goes and the log
    /// restarts empty at `offset`, which becomes its log start (a follower
    /// whose log end is below its leader's log start). The epoch history
    /// and the producer state start empty. Durable before it returns;
    /// waiters fail.
    pub fn truncate_fully_and_start_at(&self, offset: u64) -> Result<()> {
        let mut w = self.lock_writer()?;
        self.writable()?;
        self.truncate_fully_locked(&mut w, offset)
    }

    fn truncate_fully_locked(&self, w: &mut WriterGuard<'_>, offset: u64) -> Result<()> {
        if offset >= i64::MAX as u64 {
            return Err(StorageError::Invalid(format!(
                "offset {offset} is too large"
            )));
        }
        // Files first (a crash leaves a prefix, or the empty log), then the
        // new segment, then the marks and the list.
        let old = self.segments();
        let created = (|| -> Result<Arc<Segment>> {
            let mut st = self.load_partition_state()?;
            st.log_start_offset = Some(offset);
            st.cleaned_up_to = None;
            st.tombstone_horizons.clear();
            crate::meta::write_json(self.fs(), &self.dir.join(STATE_FILE), &st)?;
            self.delete_segments(&old)?;
            let seg = Arc::new(Segment::create(
                self.fs(),
                &self.dir,
                offset,
                self.now_ms(),
            )?);
            self.fs().sync_dir(&self.dir)?;
            Ok(seg)
        })();
        let seg = match created {
            Ok(seg) => seg,
            Err(e) => {
                self.fence(format!("truncation failed: {e}"));
                return Err(e);
            }
        };
        let gone = self.move_marks_to_cut(
            Mark {
                offset,
                segment: seg.clone(),
                pos: 0,
            },
            true,
        );
        self.fail_truncated(gone, offset);
        self.segments.replace_all(seg);
        self.set_log_start_offset(w, offset);
        let done = (|| -> Result<()> {
            {
                let mut h = self.epochs.lock();
                h.truncate_from_end(self.fs(), 0)?;
                self.publish_epochs(&h);
            }
            let st = ProducerState {
                applied_up_to: offset,
                ..ProducerState::default()
            };
            crate::meta::write_json(self.fs(), &self.dir.join(SNAPSHOT_FILE), &st)?;
            *self.producers.lock() = st;
            Ok(())
        })();
        self.finish_truncation(w, done, offset)
    }

    /// Moves the group-commit marks to the cut (and the replicated high
    /// watermark to at most it). Returns the waiters whose records are gone.
    fn move_marks_to_cut(&self, at: Mark, emptied: bool) -> Vec<super::DurableCallback> {
        let mut c = self.commit.lock();
        let offset = at.offset;
        let gone = c.core.truncated(at, emptied);
        if let Some(hw) = c.replicated_hw.as_mut() {
            *hw = if emptied { offset } else { (*hw).min(offset) };
        }
        gone
    }

    /// Fails the waiters whose records a cut at `at` removed. With an I/O
    /// error (KAFKA_STORAGE_ERROR, which clients retry), not `Invalid`
    /// (INVALID_REQUEST, which they do not): the request was fine, the
    /// replica lost its leadership. A variant of its own would say it
    /// better; es-kafka matches every variant, so it waits for a change
    /// there.
    fn fail_truncated(&self, gone: Vec<super::DurableCallback>, at: u64) {
        for done in gone {
            done(Err(StorageError::Io(std::io::Error::other(format!(
                "{}: the log was truncated at offset {at} before these records became durable",
                self.name
            )))));
        }
    }

    /// Deletes the files of `segs`, newest first, fsyncing the directory
    /// after each (a crash leaves a prefix), and hands their handles to the
    /// reclaimer.
    fn delete_segments(&self, segs: &[Arc<Segment>]) -> Result<()> {
        let fs = self.fs();
        for seg in segs.iter().rev() {
            if fs.exists(&seg.batches_path) {
                fs.remove_file(&seg.batches_path)?;
            }
            fs.remove_file(&seg.index_path)?;
            fs.remove_file(&seg.log_path)?;
            fs.sync_dir(&self.dir)?;
            self.reclaim_segments([seg]);
        }
        Ok(())
    }

    /// `partition.json` after a cut at `end`: the log start (`start`) and
    /// the compaction progress no further than the cut.
    fn truncate_state(&self, start: u64, end: u64) -> Result<()> {
        let old = self.load_partition_state()?;
        let mut st = old.clone();
        if st.log_start_offset.is_some() || start < self.log_start_offset() {
            st.log_start_offset = Some(start);
        }
        st.cleaned_up_to = st.cleaned_up_to.map(|c| c.min(end));
        for h in st.tombstone_horizons.iter_mut() {
            h.0 = h.0.min(end);
        }
        // Ends clamped together merge, keeping the later horizon.
        st.tombstone_horizons.dedup_by(|later, earlier| {
            if later.0 == earlier.0 {
                earlier.1 = earlier.1.max(later.1);
                true
            } else {
                false
            }
        });
        if st != old {
            crate::meta::write_json(self.fs(), &self.dir.join(STATE_FILE), &st)?;
        }
        Ok(())
    }

    fn load_partition_state(&self) -> Result<PartitionState> {
        Ok(crate::meta::read_json(self.fs(), &self.dir.join(STATE_FILE))?.unwrap_or_default())
    }

    /// Fences on a failure after the marks moved; otherwise makes the cut
    /// durable through the group commit (the durable mark reaches it) and
    /// tells the listener.
    fn finish_truncation(
        &self,
        w: &mut WriterGuard<'_>,
        done: Result<()>,
        end_offset: u64,
    ) -> Result<()> {
        if let Err(e) = done {
            tracing::error!(partition = %self.name, error = %e, "truncation failed; partition fenced until restart");
            self.fence(format!("truncation failed: {e}"));
            return Err(e);
        }
        w.0.active_created = Instant::now();
        self.flush()?;
        tracing::info!(partition = %self.name, end_offset, "log truncated");
        self.notify(self.high_watermark());
        Ok(())
    }
}

/// Where `seg` is cut for a log ending at `end` (`seg.base_offset <= end`):
/// the position of its first record at or above `end` (or its end) and the
/// offset after the last record below it. Scans from the index entry at or
/// before `end - 1`, whose record is below `end`.
fn cut_point(seg: &Segment, end: u64) -> Result<(u64, u64)> {
    if seg.end_offset() <= end {
        return Ok((seg.valid_len(), seg.end_offset()));
    }
    let start = if end > seg.base_offset {
        seg.lookup(end - 1)
    } else {
        0
    };
    let mut pos = start;
    let mut kept_end = seg.base_offset;
    seg.for_each_record_from(start, seg.valid_len(), |r| {
        if r.offset >= end {
            return false;
        }
        pos += r.encoded_len as u64;
        kept_end = r.offset + 1;
        true
    })?;
    Ok((pos, kept_end))
}
