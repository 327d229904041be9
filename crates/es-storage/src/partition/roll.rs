//! Rolls: the active segment is sealed and the next one starts.
//!
//! The roll itself runs on the append path under the writer lock and is a
//! pointer swap: the new segment's files were created ahead
//! ([`Segment::prepare`], under temporary names), the roll starts writing to
//! them, takes a copy of the producer state and leaves the slow part as a
//! pending seal. The seal ([`Partition::finish_roll`]) cuts the zeros
//! written ahead of the old segment's last record (`prealloc.rs`), fsyncs
//! it (log, index, batch notes), gives the new segment's files their
//! final names, prepares the next ones, syncs the directory once for all of
//! that, and writes the producer snapshot taken at the roll.
//!
//! The seal runs before any fsync of the partition (the group-commit path,
//! on a sync-pool thread for produce requests), before retention,
//! compaction and close look at the segment list, and at the latest at the
//! next roll. So a segment appears on disk under its final name only once
//! the one before it is durable and ends exactly at its last record, and
//! the durable mark never passes into a segment whose name a crash could
//! take back: after any crash the log is contiguous, and recovery deletes
//! the prepared files, in which nothing was ever acknowledged.
//!
//! Lock order: writer, then `rolls`, then commit.

use std::sync::Arc;
use std::time::Instant;

use super::{Mark, Partition, Writer};
use crate::error::{Result, StorageError};
use crate::producers::{ProducerState, SNAPSHOT_FILE};
use crate::segment::{Prepared, Segment};

/// What the `rolls` mutex guards.
#[derive(Debug, Default)]
pub(super) struct Rolls {
    /// The next segment's files, created ahead.
    prepared: Option<Prepared>,
    /// The last roll, not yet sealed.
    pending: Option<PendingSeal>,
    /// Why a seal failed: the partition is fenced, and no later sync may
    /// count the new segment as durable.
    failed: Option<String>,
}

impl Rolls {
    /// The state after recovery, with the next segment's files if they could
    /// be created (if not, the first roll creates them).
    pub(super) fn new(prepared: Option<Prepared>) -> Rolls {
        Rolls {
            prepared,
            ..Rolls::default()
        }
    }
}

/// A roll whose old segment is not sealed yet.
#[derive(Debug)]
struct PendingSeal {
    old: Arc<Segment>,
    new: Arc<Segment>,
    /// The producer state at the roll: it covers the log up to the new
    /// segment's base offset.
    producers: ProducerState,
}

impl Partition {
    /// Starts a new segment at `next_offset` on the prepared files. Called
    /// with the writer lock held; does no I/O unless the previous roll is
    /// still unsealed or no files could be prepared ahead.
    pub(super) fn roll(&self, w: &mut Writer, next_offset: u64) -> Result<Arc<Segment>> {
        crate::metrics::storage_metrics().segment_rolls.inc();
        let mut r = self.rolls.lock();
        // Only one roll is ever unsealed: the prepared files of the next
        // one are created by the seal of the one before.
        self.seal_locked(&mut r)?;
        let prepared = match r.prepared.take() {
            Some(p) => p,
            None => match Segment::prepare(self.fs(), &self.dir) {
                Ok(p) => p,
                Err(e) => {
                    self.fence(format!("segment roll failed: {e}"));
                    return Err(e);
                }
            },
        };
        let old = self.commit.lock().core.written().segment.clone();
        let seg = Arc::new(Segment::from_prepared(
            prepared,
            &self.dir,
            next_offset,
            self.now_ms(),
        ));
        let mut producers = self.producers.lock().clone();
        producers.applied_up_to = producers.applied_up_to.max(next_offset);
        r.pending = Some(PendingSeal {
            old,
            new: seg.clone(),
            producers,
        });
        self.segments.push_rolled(seg.clone());
        self.commit.lock().core.rolled(Mark {
            offset: next_offset,
            segment: seg.clone(),
            pos: 0,
        });
        drop(r);
        w.active_created = Instant::now();
        tracing::debug!(partition = %self.name, base_offset = next_offset, "rolled a new segment");
        Ok(seg)
    }

    /// Whether a roll now would be only the pointer swap: the next
    /// segment's files are prepared and the last roll is sealed.
    pub(super) fn roll_is_a_swap(&self) -> bool {
        let r = self.rolls.lock();
        r.pending.is_none() && r.prepared.is_some() && r.failed.is_none()
    }

    /// Seals the last roll's old segment if it is not sealed yet (see the
    /// module documentation). A failure fences the partition, and this
    /// returns it again on every later call.
    pub(crate) fn finish_roll(&self) -> Result<()> {
        let mut r = self.rolls.lock();
        self.seal_locked(&mut r)
    }

    fn seal_locked(&self, r: &mut Rolls) -> Result<()> {
        if let Some(why) = &r.failed {
            return Err(StorageError::Fenced(format!("{}: {why}", self.name)));
        }
        let Some(s) = r.pending.take() else {
            return Ok(());
        };
        let fs = self.fs();
        let sealed = (|| -> std::io::Result<Option<Prepared>> {
            // Zeros written ahead go: a sealed segment ends at its last record.
            s.old
                .ahead
                .cut(&*s.old.log, s.old.valid_len(), true, false)?;
            s.old.sync_log()?;
            s.old.index_file.sync_data()?;
            if let Err(e) = s.old.sync_marks() {
                // A hint only: recovery keeps what survives of it.
                tracing::warn!(file = %s.old.batches_path.display(), error = %e, "fsync of produced batch notes failed");
            }
            s.new.rename_prepared(fs, &self.dir)?;
            // The next roll's files; without them that roll creates its own.
            let next = Segment::prepare(fs, &self.dir)
                .inspect_err(|e| {
                    tracing::warn!(partition = %self.name, error = %e, "next segment not prepared");
                })
                .ok();
            fs.sync_dir(&self.dir)?;
            Ok(next)
        })();
        match sealed {
            Ok(next) => r.prepared = next,
            Err(e) => {
                let why = format!("segment roll failed: {e}");
                r.failed = Some(why.clone());
                self.fence(why);
                return Err(e.into());
            }
        }
        if let Err(e) = crate::meta::write_json(fs, &self.dir.join(SNAPSHOT_FILE), &s.producers) {
            // Not fatal: recovery replays the log from the previous snapshot.
            tracing::warn!(partition = %self.name, error = %e, "producer snapshot not written");
        }
        Ok(())
    }
}
