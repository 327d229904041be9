//! Reads: whole, CRC-checked records from the segments, below the high
//! watermark, into a window the caller keeps ([`ReadBuf`]).
//!
//! A read works on a [`LogSnapshot`]: the high watermark, log start, last
//! stable offset, log end and segment list of one moment, taken under one
//! acquisition of the commit lock (and, for a fetch, the producer-state
//! lock). Reading through it takes no lock, so a fetch's answer is
//! consistent (its records, watermarks and aborted transactions belong to
//! the same moment) and it costs one lock round per partition.

use std::sync::Arc;

use bytes::Bytes;

use super::{Mark, Partition};
use crate::batch_marks::BatchMark;
use crate::epochs::EpochEntry;
use crate::error::{Result, StorageError};
use crate::producers::AbortedTxn;
use crate::record::{self, DecodeError, ProducedBatch};
use crate::segment::{read_exact_at, Segment};
use crate::segment_set::Segments;

/// The result of a read.
#[derive(Clone, Debug)]
pub struct ReadChunk {
    /// Whole on-disk records; the first has an offset >= the one asked for.
    /// Decode with [`crate::record::RecordIter::read_checked`]: their lengths
    /// and CRCs were checked by the read ([`crate::record::check`]); their
    /// fields are parsed (and every bound checked) when they are decoded.
    pub data: Bytes,
    pub log_start_offset: u64,
    pub high_watermark: u64,
    pub log_end_offset: u64,
    /// Produced batches noted from the first offset asked for on, sorted
    /// (some may start after `data` ends); see [`ReadChunk::batch_at`].
    pub batches: Vec<BatchMark>,
}

impl ReadChunk {
    /// The batch a producer compressed that starts at `offset`, if noted.
    pub fn batch_at(&self, offset: u64) -> Option<ProducedBatch> {
        crate::batch_marks::find(&self.batches, offset)
    }
}

/// A read window that is kept between reads ([`Partition::read_into`]), so
/// that a fetch neither allocates nor zero-fills its window every time.
///
/// Invariant: every byte of `buf` is initialised (its length is the largest
/// window read so far); a read overwrites a prefix and reports which range
/// holds records. Growth replaces the buffer with a fresh zeroed one (`calloc`:
/// fresh pages need no memset) instead of resizing, which would also copy
/// the old contents.
#[derive(Debug, Default)]
pub struct ReadBuf {
    buf: Vec<u8>,
}

impl ReadBuf {
    pub fn new() -> Self {
        Self::default()
    }

    /// Bytes this buffer holds on to between reads.
    pub fn retained_bytes(&self) -> usize {
        self.buf.len()
    }

    /// Gives the memory back if the buffer holds more than `bytes_max`.
    pub fn shrink_to(&mut self, bytes_max: usize) {
        if self.buf.len() > bytes_max {
            self.buf = Vec::new();
        }
    }

    /// The first `len` bytes, growing the buffer (keeping `..keep`) if needed.
    fn window(&mut self, len: usize, keep: usize) -> &mut [u8] {
        if self.buf.len() < len {
            let mut grown = vec![0u8; len];
            grown[..keep].copy_from_slice(&self.buf[..keep]);
            self.buf = grown;
        }
        &mut self.buf[..len]
    }
}

/// The result of [`Partition::read_into`]: a [`ReadChunk`] whose records
/// borrow the caller's [`ReadBuf`].
#[derive(Debug)]
pub struct ReadView<'a> {
    /// Whole on-disk records, CRC-checked by the read (see [`ReadChunk::data`]).
    pub data: &'a [u8],
    pub log_start_offset: u64,
    pub high_watermark: u64,
    pub log_end_offset: u64,
    /// As [`ReadChunk::batches`].
    pub batches: Vec<BatchMark>,
}

impl ReadView<'_> {
    /// The batch a producer compressed that starts at `offset`, if noted.
    pub fn batch_at(&self, offset: u64) -> Option<ProducedBatch> {
        crate::batch_marks::find(&self.batches, offset)
    }
}

/// What a snapshot's read found.
struct ReadSpan {
    range: std::ops::Range<usize>,
    log_start: u64,
    hw: u64,
    log_end: u64,
    batches: Vec<BatchMark>,
}

/// Which records a fetch may see: all below the high watermark, or
/// (read_committed) those below the last stable offset, aborted
/// transactions listed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isolation {
    ReadUncommitted,
    ReadCommitted,
}

/// One moment of a partition, for reading; see the module documentation.
#[derive(Debug)]
pub struct LogSnapshot {
    hw: u64,
    /// Reads stop before the first record at or above this mark's offset
    /// and never read past its position in its segment: the high watermark
    /// for a consumer, the log end for a follower
    /// ([`Partition::replica_snapshot`]).
    limit: Mark,
    /// A read from beyond this is out of range: the high watermark (as
    /// before replication), or the log end when replicated or for a
    /// follower (an offset between the two has nothing to read yet).
    range_end: u64,
    /// The leader-epoch history at this moment ([`LogSnapshot::epoch_at`]).
    epochs: Arc<[EpochEntry]>,
    log_end: u64,
    log_start: u64,
    lso: u64,
    /// Where a fetch from the offset the snapshot was taken for reads from:
    /// the first record of the produced batch holding it, if inside one.
    start: u64,
    /// The offset the snapshot was taken for.
    asked: u64,
    /// read_committed: the aborted transactions from `start` up to the LSO.
    aborted: Vec<AbortedTxn>,
    segments: Segments,
    index_interval_bytes: u64,
}

/// Where the produced batch holding `offset` starts (see
/// [`Partition::produced_batch_start`]).
fn batch_start_in(segs: &[Arc<Segment>], offset: u64, log_start: u64) -> Option<u64> {
    let i = segs
        .partition_point(|s| s.base_offset <= offset)
        .checked_sub(1)?;
    let m = segs[i].mark_covering(offset)?;
    (m.offset >= log_start).then_some(m.offset)
}

impl Partition {
    /// The snapshot a fetch from `offset` reads through: the watermarks, the
    /// log start, the last stable offset (at most the high watermark), the
    /// log end, the segment list, where the read starts
    /// ([`LogSnapshot::start`]) and, with [`Isolation::ReadCommitted`], the
    /// aborted transactions from there to the last stable offset. One
    /// acquisition of the commit lock and, inside it, of the producer-state
    /// lock (lock order: writer, commit, producers).
    pub fn snapshot(&self, offset: u64, isolation: Isolation) -> LogSnapshot {
        self.snapshot_of(offset, Some(isolation), false)
    }

    /// The snapshot a follower's fetch from `offset` reads through: like
    /// [`Partition::snapshot`] with read_uncommitted, but its reads go up
    /// to the log end (what has been written, durable or not, as Kafka's
    /// leader serves its followers up to its log end offset), while it
    /// reports the high watermark. Reads start at `offset` itself.
    pub fn replica_snapshot(&self, offset: u64) -> LogSnapshot {
        self.snapshot_of(offset, None, true)
    }

    /// A snapshot; without an isolation the producer state is not read (the
    /// LSO is then the high watermark, and no transaction is listed);
    /// `to_log_end`: reads go to the log end (a follower's fetch).
    fn snapshot_of(
        &self,
        offset: u64,
        isolation: Option<Isolation>,
        to_log_end: bool,
    ) -> LogSnapshot {
        let config = self.config();
        let c = self.commit.lock();
        let hw = self.visible(&c);
        let written = c.core.written().clone();
        let log_end = written.offset;
        let range_end = if to_log_end || c.replicated_hw.is_some() {
            log_end
        } else {
            hw.offset
        };
        let epochs = self.epoch_list.read().clone();
        let log_start = self.log_start_offset();
        let segments = self.segments.snapshot();
        let start = match isolation {
            Some(_) if offset < hw.offset => {
                batch_start_in(&segments, offset, log_start).unwrap_or(offset)
            }
            _ => offset,
        };
        let (lso, aborted) = match isolation {
            None => (hw.offset, Vec::new()),
            Some(i) => {
                let ps = self.producers.lock();
                let lso = ps
                    .first_unstable_offset()
                    .map_or(hw.offset, |f| f.min(hw.offset));
                let aborted = match i {
                    Isolation::ReadCommitted => ps.aborted_between(start, lso),
                    Isolation::ReadUncommitted => Vec::new(),
                };
                (lso, aborted)
            }
        };
        drop(c);
        LogSnapshot {
            hw: hw.offset,
            limit: if to_log_end { written } else { hw },
            range_end,
            epochs,
            log_end,
            log_start,
            lso,
            start,
            asked: offset,
            aborted,
            segments,
            index_interval_bytes: config.index_interval_bytes,
        }
    }

    /// Reads whole records starting at the first offset >= `offset`, up to
    /// about `max_bytes` (always at least one record if one is visible).
    pub fn read(&self, offset: u64, max_bytes: usize) -> Result<ReadChunk> {
        let mut rb = ReadBuf::new();
        let span = self
            .snapshot_of(offset, None, false)
            .read_range(offset, max_bytes, &mut rb)?;
        Ok(ReadChunk {
            data: Bytes::from(rb.buf).slice(span.range),
            log_start_offset: span.log_start,
            high_watermark: span.hw,
            log_end_offset: span.log_end,
            batches: span.batches,
        })
    }

    /// Where the batch a producer compressed that holds `offset` starts,
    /// when `offset` is inside one (not its first record) and that start is
    /// still at or above the log start. Kafka answers a fetch from inside a
    /// batch with the whole batch (the client skips the records before its
    /// offset); a fetch that reads from here does the same.
    pub fn produced_batch_start(&self, offset: u64) -> Option<u64> {
        batch_start_in(&self.segments(), offset, self.log_start_offset())
    }

    /// [`Partition::read`] into a window kept by the caller: no allocation
    /// and no zero-filling once `rb` has grown to the size of the reads.
    pub fn read_into<'b>(
        &self,
        offset: u64,
        max_bytes: usize,
        rb: &'b mut ReadBuf,
    ) -> Result<ReadView<'b>> {
        self.snapshot_of(offset, None, false)
            .read_into(offset, max_bytes, rb)
    }
}

impl LogSnapshot {
    pub fn high_watermark(&self) -> u64 {
        self.hw
    }

    /// The leader epoch the record at `offset` was written in, from the
    /// leader-epoch history taken with the snapshot; None below its first
    /// entry (records written before epochs were kept).
    pub fn epoch_at(&self, offset: u64) -> Option<i32> {
        let i = self.epochs.partition_point(|e| e.start_offset <= offset);
        i.checked_sub(1).map(|i| self.epochs[i].epoch)
    }

    /// Where the next epoch after the one holding `offset` starts: a batch
    /// stamped with one epoch must end before it. None when no later epoch
    /// is known.
    pub fn next_epoch_start(&self, offset: u64) -> Option<u64> {
        let i = self.epochs.partition_point(|e| e.start_offset <= offset);
        self.epochs.get(i).map(|e| e.start_offset)
    }

    /// The leader-epoch history taken with the snapshot, oldest first.
    pub fn leader_epochs(&self) -> &[EpochEntry] {
        &self.epochs
    }

    pub fn log_start_offset(&self) -> u64 {
        self.log_start
    }

    /// The last stable offset, at most the high watermark.
    pub fn last_stable_offset(&self) -> u64 {
        self.lso
    }

    pub fn log_end_offset(&self) -> u64 {
        self.log_end
    }

    /// Where a fetch from the offset this snapshot was taken for reads from:
    /// the first record of the batch a producer compressed that holds it
    /// (Kafka answers a fetch from inside a batch with the whole batch), or
    /// the offset itself.
    pub fn start(&self) -> u64 {
        self.start
    }

    /// Aborted transactions overlapping `from..to`, for a read_committed
    /// fetch; `from` at least [`LogSnapshot::start`] and `to` at most the
    /// last stable offset (the snapshot holds only those).
    pub fn aborted_between(&self, from: u64, to: u64) -> Vec<AbortedTxn> {
        debug_assert!(from >= self.start && to <= self.lso);
        self.aborted
            .iter()
            .filter(|a| a.last_offset >= from && a.first_offset < to)
            .copied()
            .collect()
    }

    /// Reads whole records from the first offset >= `offset`, up to about
    /// `max_bytes` (always at least one record if one is visible), below
    /// this snapshot's high watermark, into `rb`. Takes no lock.
    pub fn read_into<'b>(
        &self,
        offset: u64,
        max_bytes: usize,
        rb: &'b mut ReadBuf,
    ) -> Result<ReadView<'b>> {
        let span = self.read_range(offset, max_bytes, rb)?;
        Ok(ReadView {
            data: &rb.buf[span.range],
            log_start_offset: span.log_start,
            high_watermark: span.hw,
            log_end_offset: span.log_end,
            batches: span.batches,
        })
    }

    /// The read behind every read: the records' range in `rb`, the log
    /// start, the high watermark, the log end and the produced batches
    /// noted from `offset` on, all as of this snapshot.
    fn read_range(&self, offset: u64, max_bytes: usize, rb: &mut ReadBuf) -> Result<ReadSpan> {
        // `hw` below is the read limit; `self.hw` is what is reported.
        let hw = &self.limit;
        let log_end = self.log_end;
        let log_start = self.log_start;
        if offset < log_start || offset > self.range_end {
            return Err(StorageError::OffsetOutOfRange {
                offset,
                log_start,
                log_end: self.range_end,
            });
        }
        let none = ReadSpan {
            range: 0..0,
            log_start,
            hw: self.hw,
            log_end,
            batches: Vec::new(),
        };
        if offset >= hw.offset {
            return Ok(none);
        }
        let segs = &self.segments;
        let first = segs
            .partition_point(|s| s.base_offset <= offset)
            .saturating_sub(1);
        for seg in &segs[first..] {
            if seg.base_offset >= hw.offset && !Arc::ptr_eq(seg, &hw.segment) {
                break;
            }
            let limit = if Arc::ptr_eq(seg, &hw.segment) {
                hw.pos
            } else {
                seg.valid_len()
            };
            // A read from a produced batch's start must get past the offset
            // the snapshot was taken for, or report why it cannot.
            let need = offset.max(self.asked);
            let range =
                self.read_segment(seg, offset, need, limit, max_bytes.max(1), hw.offset, rb)?;
            if !range.is_empty() {
                // No more batches can start in the range than it holds records.
                let most = range.len() / (record::LEN_PREFIX_BYTES + record::BODY_BYTES_MIN) + 1;
                let batches = seg.marks_from(offset, most);
                return Ok(ReadSpan {
                    range,
                    log_start,
                    hw: self.hw,
                    log_end,
                    batches,
                });
            }
            if Arc::ptr_eq(seg, &hw.segment) {
                break;
            }
        }
        Ok(none)
    }

    /// Reads one segment's records from `offset` into `rb`; returns their
    /// range: whole records from the first at or after `offset`, up to
    /// about `max_bytes` (at least one), below `limit` and `hw`.
    ///
    /// The read starts at the index entry at or before `offset` and checks
    /// that the record there carries the offset the entry names (the
    /// Checker reads that record anyway): a damaged entry could otherwise
    /// start the read at a later record and skip the ones before it
    /// unnoticed. One that does not is reported and the read starts from
    /// the entry before it, then from the segment's start. While nothing
    /// has been found the window slides over the records below `offset`;
    /// once records are found it grows until the budget is met, whatever
    /// the spacing of the index (which need not be the configured one:
    /// recovery rebuilds indexes at the default spacing, and the setting
    /// can change), so that a produced batch read whole is served whole.
    #[allow(clippy::too_many_arguments)]
    fn read_segment(
        &self,
        seg: &Segment,
        offset: u64,
        need: u64,
        limit: u64,
        max_bytes: usize,
        hw: u64,
        rb: &mut ReadBuf,
    ) -> Result<std::ops::Range<usize>> {
        let mut entry = seg.lookup_entry(offset);
        let mut fallbacks = 0;
        'entry: loop {
            // A damaged entry: report it, start from an earlier one.
            macro_rules! bad_entry {
                ($why:expr) => {{
                    if let Some((i, e)) = entry {
                        seg.report_bad_index_entry(i, e, $why);
                        fallbacks += 1;
                        entry = match i.checked_sub(1) {
                            Some(j) if fallbacks < 2 => seg.index_entry(j).map(|e| (j, e)),
                            _ => None,
                        };
                        continue 'entry;
                    }
                }};
            }
            let mut start = entry.map_or(0, |(_, e)| e.position);
            // The offset the record at `start` must carry (position 0 is
            // always a record's start: the segment's first).
            let claimed = entry
                .filter(|(_, e)| e.position > 0)
                .map(|(_, e)| seg.base_offset.saturating_add(e.relative_offset));
            if start >= limit {
                if claimed.is_some() && offset < seg.end_offset() {
                    bad_entry!("entry points past the records");
                }
                return Ok(0..0);
            }
            // One window: the index gap (about 4 KiB) plus what was asked for.
            let span = (limit - start) as usize;
            let want = span
                .min(max_bytes.saturating_add(self.index_interval_bytes as usize + 64))
                .max(span.min(64 * 1024));
            let mut len = want;
            read_exact_at(&*seg.log, rb.window(len, 0), start)?;
            let mut verified = claimed.is_none();
            let mut p = 0usize;
            let mut from = None;
            let mut to = 0usize;
            // The last record taken; a damaged record after records that
            // reach `need` ends the read (the next read reports it), one
            // before them is reported now: records below `need` alone
            // (a produced batch read from its start) would be read again
            // and again by a fetch that cannot get past them.
            let mut last_taken: Option<u64> = None;
            let mut checker = record::Checker::new();
            loop {
                if p >= len {
                    let at = start + p as u64;
                    if at >= limit {
                        break;
                    }
                    match from {
                        // Under budget: read on.
                        Some(s) if p - s < max_bytes => {
                            len = p + want.min((limit - at) as usize);
                            read_exact_at(&*seg.log, &mut rb.window(len, p)[p..], at)?;
                        }
                        Some(_) => break,
                        // Nothing found yet: slide the window on.
                        None => {
                            start = at;
                            p = 0;
                            len = want.min((limit - at) as usize);
                            read_exact_at(&*seg.log, rb.window(len, 0), start)?;
                            checker = record::Checker::new();
                        }
                    }
                    continue;
                }
                // Length and CRC only: the reader parses the fields once, when
                // it decodes the records (read_checked checks every bound).
                match checker.check(&rb.buf[..len], p) {
                    Ok((record_offset, encoded_len)) => {
                        if !verified {
                            verified = true;
                            if Some(record_offset) != claimed {
                                bad_entry!("the record there has another offset");
                            }
                        }
                        if record_offset >= hw {
                            break;
                        }
                        if record_offset >= offset {
                            let s = *from.get_or_insert(p);
                            if p + encoded_len - s > max_bytes && p > s {
                                break;
                            }
                            to = p + encoded_len;
                            last_taken = Some(record_offset);
                        }
                        p += encoded_len;
                    }
                    Err(DecodeError::Incomplete { needed }) => {
                        let at = start + p as u64;
                        if at + needed as u64 > limit {
                            if !verified {
                                bad_entry!("no record there");
                            }
                            if last_taken.is_some_and(|l| l >= need) {
                                // Serve what came before; a read from here
                                // reports it.
                                break;
                            }
                            return Err(seg.corrupt(at, "record runs past the visible end"));
                        }
                        let grow = needed.max(want.min((limit - at) as usize));
                        match from {
                            Some(s) => {
                                if p + needed - s > max_bytes {
                                    break;
                                }
                                // The next record is cut by the window and
                                // within the budget: read it too.
                                len = p + grow;
                                read_exact_at(&*seg.log, &mut rb.window(len, p)[p..], at)?;
                            }
                            None => {
                                // The window starts at this record (the first
                                // may be large).
                                start = at;
                                p = 0;
                                len = grow;
                                read_exact_at(&*seg.log, rb.window(len, 0), start)?;
                                checker = record::Checker::new();
                            }
                        }
                    }
                    Err(DecodeError::Corrupt(why)) => {
                        if !verified {
                            bad_entry!("no record there");
                        }
                        if last_taken.is_some_and(|l| l >= need) {
                            break;
                        }
                        return Err(seg.corrupt(start + p as u64, why));
                    }
                }
            }
            let Some(s) = from else {
                return Ok(0..0);
            };
            return Ok(s..to);
        }
    }
}
