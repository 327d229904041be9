//! The write behind every append: one `write` of the sealed records to the
//! active segment, one of their index entries, the batch marks, and the
//! written mark moved, all under the writer lock.
//!
//! Offsets are either assigned (a leader or a single node: the log end and
//! on, one per record) or given ([`Partition::append_replica`]: the
//! leader's offsets, strictly increasing from the log end or later, gaps
//! allowed). Either way a segment starts with a record at its base offset:
//! a roll starts the new segment at the append's first offset, and an
//! empty active segment whose base is not that offset is rolled past (it
//! stays, empty, until retention removes it), because recovery and the
//! format checker require the first record of a segment to carry its name.

use super::{AppendInfo, Mark, Partition, Writer};
use crate::batch::RecordBatchBuf;
use crate::batch_marks::BatchMark;
use crate::commit::Refused;
use crate::error::{Result, StorageError};
use crate::index::{IndexEntry, IndexPolicy};
use crate::segment::Segment;

impl Partition {
    /// Writes `batch` at the log end (`offsets` None) or at the given
    /// offsets (checked by the caller: one per record, strictly increasing,
    /// the first at or after the log end). Returns the offsets and, when
    /// readers should be told now (not at the next sync), the offset to
    /// tell the listener.
    pub(super) fn append_locked(
        &self,
        w: &mut parking_lot::MutexGuard<'_, Writer>,
        batch: &mut RecordBatchBuf,
        offsets: Option<&[u64]>,
    ) -> Result<(AppendInfo, Option<u64>)> {
        let count = batch.len() as u64;
        let bytes_len = batch.bytes_len() as u64;
        let config = self.config();
        let (written, mut active) = {
            let c = self.commit.lock();
            match c.core.writable() {
                Ok(()) => {}
                Err(Refused::Fenced(f)) => return Err(self.fence_error(&f)),
                Err(Refused::Closed) => return Err(StorageError::Closed),
            }
            let w = c.core.written();
            (w.offset, w.segment.clone())
        };
        let base_offset = offsets.map_or(written, |o| o[0]);
        if base_offset < written {
            return Err(StorageError::Invalid(format!(
                "offset {base_offset} is below the log end {written}"
            )));
        }
        let misnamed = active.is_empty() && active.base_offset != base_offset;
        if misnamed || self.wants_roll(w, &active, bytes_len, &config) {
            active = self.roll(w, base_offset)?;
        }
        let offset_of = |i: usize| offsets.map_or(base_offset + i as u64, |o| o[i]);
        let pos0 = active.valid_len();
        match offsets {
            None => batch.seal(base_offset),
            Some(o) => batch.seal_at(o),
        };
        // Index entries for this append.
        let policy = IndexPolicy {
            interval_bytes: config.index_interval_bytes,
        };
        let mut last = active.last_index_entry();
        let mut entries: Vec<IndexEntry> = Vec::new();
        for i in 0..count as usize {
            let at = pos0 + batch.record_start(i) as u64;
            if policy.wants_entry(last, at) {
                let e = IndexEntry {
                    relative_offset: offset_of(i) - active.base_offset,
                    position: at,
                };
                entries.push(e);
                last = Some(e);
            }
        }
        let data = batch.as_bytes();
        active.ahead.before_write(pos0 + bytes_len);
        if let Err(e) = active.log.write_all_at(data, pos0) {
            self.undo_write(&active, pos0, None, &e);
            return Err(e.into());
        }
        if !entries.is_empty() {
            let mut ib = Vec::with_capacity(entries.len() * crate::index::ENTRY_BYTES);
            for e in &entries {
                e.encode(&mut ib);
            }
            let ipos = active.index_bytes();
            if let Err(e) = active.index_file.write_all_at(&ib, ipos) {
                self.undo_write(&active, pos0, Some(ipos), &e);
                return Err(e.into());
            }
        }
        if !batch.produced().is_empty() {
            // A mark's last offset delta is an offset delta (what the fetch
            // encoder adds to the first offset), so with given offsets it
            // is the distance to the batch's last record; a batch whose
            // span does not fit is not noted (marks are a hint).
            let marks: Vec<BatchMark> = batch
                .produced()
                .iter()
                .filter_map(|&(i, b)| {
                    let first = i as usize;
                    let last = first.checked_add(b.last_offset_delta as usize)?;
                    if last >= count as usize {
                        return None;
                    }
                    let delta = u32::try_from(offset_of(last) - offset_of(first)).ok()?;
                    (delta <= i32::MAX as u32).then_some(BatchMark {
                        offset: offset_of(first),
                        batch: crate::record::ProducedBatch {
                            last_offset_delta: delta,
                            ..b
                        },
                    })
                })
                .collect();
            active.append_marks(&*self.fs, &marks);
        }
        let new_len = pos0 + bytes_len;
        let last_offset = offset_of(count as usize - 1);
        active.note_append(new_len, last_offset + 1, batch.max_timestamp_ms(), &entries);
        if config.preallocate
            && active
                .ahead
                .wants_more(new_len, config.segment_bytes, self.prealloc.sizing())
        {
            self.prealloc.request(&active);
        }
        let hw = {
            let mut c = self.commit.lock();
            c.core.appended(Mark {
                offset: last_offset + 1,
                segment: active,
                pos: new_len,
            });
            // Replicated: followers read to the log end, tell them now.
            match c.replicated_hw {
                Some(hw) => Some(hw),
                None => (config.flush.every_records > 1).then_some(last_offset + 1),
            }
        };
        Ok((
            AppendInfo {
                base_offset,
                last_offset,
            },
            hw,
        ))
    }

    /// Cuts a failed write's partial bytes off the files; fences the partition
    /// if that is impossible.
    pub(super) fn undo_write(
        &self,
        seg: &Segment,
        log_len: u64,
        index_len: Option<u64>,
        err: &std::io::Error,
    ) {
        let mut ok = seg.ahead.cut(&*seg.log, log_len, false, true).is_ok();
        if let Some(il) = index_len {
            ok &= seg.index_file.set_len(il).is_ok();
        }
        if ok {
            tracing::warn!(partition = %self.name, error = %err, "append failed; partial bytes cut off");
        } else {
            tracing::error!(partition = %self.name, error = %err, "append failed and partial bytes could not be cut off; partition fenced until restart");
            self.fence(format!("write failed and could not be undone: {err}"));
        }
    }
}
