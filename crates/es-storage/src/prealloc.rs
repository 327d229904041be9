//! Preallocation: the active segment is zero-filled ahead of its last
//! record (topic config `preallocate`, broker `log.preallocate`), so that
//! the fdatasync behind each acknowledgement writes records only.
//!
//! An fdatasync of a file that grew must also write its inode (the new
//! size) and the block bitmaps of the new blocks; an fdatasync of bytes
//! written over blocks that already hold data (zeros) and lie below the
//! file's size is the data and a cache flush. Measured on this project's
//! machines (docs/performance-journal.md), that is 1.4-1.8 times as many
//! durable appends per second. `fallocate` does not give it: writing into
//! unwritten extents converts them, which costs the same inode write.
//!
//! So a thread per [`crate::Storage`] (`es-prealloc`) writes zeros ahead of
//! a busy active segment, 256 KiB per `write`, each followed by an
//! fdatasync; only then are they counted as [`Ahead::zeroed_end`], below
//! which the writer writes without asking anyone. A write that reaches past
//! it takes the segment's [`Ahead`] lock and waits only if the zeros being
//! written would overlap it (one 256 KiB `write`): zeros never land on
//! records. The fdatasyncs of zeros and of records take turns
//! ([`Ahead::sync`]), so that a write-back error one of them reports fails
//! the other as well. How far ahead ([`Sizing`]) grows with the segment,
//! from nothing below [`START_BYTES`] (an idle partition gets no zeros) to
//! [`MAX_AHEAD_BYTES`], and never past `segment.bytes`.
//!
//! The storage format allows zeros after the last record in the newest
//! segment of a partition only: a roll cuts the old segment to its last
//! record before it is synced and the new one gets its name
//! (`partition/roll.rs`), a clean close cuts the active one, and recovery
//! cuts what a crash left, as it cuts a torn tail. Reads never go past the
//! last record (the partition's marks bound them).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use parking_lot::{Condvar, Mutex};

use crate::fs::FileHandle;
use crate::segment::Segment;

/// Bytes of zeros per `write` and fdatasync: the longest a writer, or a
/// sync of records, can wait on them.
pub const CHUNK_BYTES: usize = 256 << 10;
/// A segment gets zeros ahead once it holds this much.
pub const START_BYTES: u64 = 1 << 20;
/// The most zeros ahead of a segment's last record.
pub const MAX_AHEAD_BYTES: u64 = 16 << 20;
/// The fewest zeros written ahead at a time.
pub const MIN_AHEAD_BYTES: u64 = 256 << 10;

static ZEROS: [u8; CHUNK_BYTES] = [0; CHUNK_BYTES];

/// How far ahead of its last record a segment is zero-filled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sizing {
    /// None below this many bytes of records.
    pub start_bytes: u64,
    /// The fewest zeros written ahead at a time.
    pub min_bytes: u64,
    /// The most zeros ahead.
    pub max_bytes: u64,
}

impl Default for Sizing {
    /// [`START_BYTES`], [`MIN_AHEAD_BYTES`], [`MAX_AHEAD_BYTES`].
    fn default() -> Self {
        Sizing {
            start_bytes: START_BYTES,
            min_bytes: MIN_AHEAD_BYTES,
            max_bytes: MAX_AHEAD_BYTES,
        }
    }
}

impl Sizing {
    /// Zeros wanted ahead of `len` bytes of records: a quarter of them,
    /// between the minimum and the maximum; none below the start.
    pub fn ahead(&self, len: u64) -> u64 {
        if len < self.start_bytes {
            return 0;
        }
        (len / 4).clamp(self.min_bytes, self.max_bytes.max(self.min_bytes))
    }
}

/// One segment's zeros ahead of its last record.
#[derive(Debug)]
pub(crate) struct Ahead {
    /// Every byte below this is written (records or zeros) and durable as
    /// far as the file's size and block map go: a write that ends at or
    /// below it changes neither. Raised only by the preallocator, after its
    /// fdatasync.
    zeroed_end: AtomicU64,
    /// The end the writer last asked the preallocator for (cheap check on
    /// each append).
    requested: AtomicU64,
    state: Mutex<State>,
    idle: Condvar,
    /// Held around every fdatasync of the log; true once one failed
    /// ([`Ahead::sync`]).
    sync_failed: Mutex<bool>,
}

#[derive(Debug, Default)]
struct State {
    /// The file's length as the writes so far left it.
    file_end: u64,
    /// Zeros being written at `[start, end)`, with no lock held.
    filling: Option<(u64, u64)>,
    /// Where the preallocator should fill to.
    target: u64,
    /// Sealed, closed or cut after a failure: no more zeros.
    closed: bool,
    /// In the preallocator's queue.
    queued: bool,
    /// Bumped by every cut: zeros written before it no longer exist.
    generation: u64,
}

impl Ahead {
    /// An empty segment file ([`Ahead::opened`] gives an existing one its length).
    pub(crate) fn new() -> Ahead {
        Ahead {
            zeroed_end: AtomicU64::new(0),
            requested: AtomicU64::new(0),
            state: Mutex::new(State::default()),
            idle: Condvar::new(),
            sync_failed: Mutex::new(false),
        }
    }

    /// Nobody will write zeros (no preallocation thread): no more requests.
    fn never_fill(&self) {
        let mut s = self.state.lock();
        s.queued = false;
        s.closed = true;
    }

    /// Whether a write ending at `end` changes neither the file's size nor
    /// its block map: below the durable zeros (or what recovery found).
    pub(crate) fn covers(&self, end: u64) -> bool {
        end <= self.zeroed_end.load(Ordering::Acquire)
    }

    /// The file as recovery left it: `len` bytes.
    pub(crate) fn opened(&self, len: u64) {
        let mut s = self.state.lock();
        s.file_end = len;
        self.zeroed_end.store(len, Ordering::Release);
        self.requested.store(len, Ordering::Relaxed);
    }

    /// Before a write of records at `[pos, end)`: returns once no zeros are
    /// being written over that range, and notes how far the file reaches.
    pub(crate) fn before_write(&self, end: u64) {
        if end <= self.zeroed_end.load(Ordering::Acquire) {
            return;
        }
        let mut s = self.state.lock();
        // Writes are at the log end, at or below where zeros would start:
        // only a fill that starts below `end` overlaps.
        while s.filling.is_some_and(|(start, _)| start < end) {
            self.idle.wait(&mut s);
        }
        s.file_end = s.file_end.max(end);
    }

    /// After an append that left `len` bytes of records, with
    /// `segment_bytes` the segment's size limit: whether the preallocator
    /// should be asked for more zeros (it then fills to the target set).
    pub(crate) fn wants_more(&self, len: u64, segment_bytes: u64, sizing: &Sizing) -> bool {
        let ahead = sizing.ahead(len);
        if ahead == 0 {
            return false;
        }
        let target = (len + ahead).min(segment_bytes);
        if target <= len || len + ahead / 2 <= self.requested.load(Ordering::Relaxed) {
            return false;
        }
        let mut s = self.state.lock();
        if s.closed {
            return false;
        }
        self.requested.store(target, Ordering::Relaxed);
        s.target = s.target.max(target);
        !std::mem::replace(&mut s.queued, true)
    }

    /// Cuts the file to `len` (the last record's end, or a failed write's
    /// start) once no zeros are being written, and stops preallocation if
    /// `close` (a sealed or closed segment). Zeros are only cut when the file
    /// has any past `len`, unless `force` (a cut of records). Returns
    /// whether the file was cut (it then needs an fdatasync).
    pub(crate) fn cut(
        &self,
        log: &dyn FileHandle,
        len: u64,
        close: bool,
        force: bool,
    ) -> std::io::Result<bool> {
        let mut s = self.state.lock();
        s.closed |= close;
        while s.filling.is_some() {
            self.idle.wait(&mut s);
        }
        if force || s.file_end > len {
            log.set_len(len)?;
            s.generation += 1;
            s.file_end = len;
            s.target = s.target.min(len);
            self.zeroed_end.fetch_min(len, Ordering::AcqRel);
            self.requested.store(len, Ordering::Relaxed);
            return Ok(true);
        }
        Ok(false)
    }

    /// The preallocator's work on one segment: zeros to the target, one
    /// [`CHUNK_BYTES`] write and one fdatasync at a time (so that a sync
    /// of records never has more than a chunk of dirty zeros to write back
    /// with them), each chunk counted once synced.
    fn fill(&self, log: &dyn FileHandle) -> std::io::Result<()> {
        loop {
            let (start, end, generation) = {
                let mut s = self.state.lock();
                let start = s.file_end;
                if s.closed || start >= s.target {
                    s.queued = false;
                    return Ok(());
                }
                let end = (start + CHUNK_BYTES as u64).min(s.target);
                s.filling = Some((start, end));
                (start, end, s.generation)
            };
            let r = log.write_all_at(&ZEROS[..(end - start) as usize], start);
            {
                let mut s = self.state.lock();
                s.filling = None;
                self.idle.notify_all();
                // Even a failed write may have put some zeros there: past
                // the records, harmless, and cut with the rest.
                s.file_end = s.file_end.max(end);
                if let Err(e) = r {
                    s.closed = true;
                    s.queued = false;
                    return Err(e);
                }
            }
            crate::metrics::storage_metrics()
                .preallocated_bytes
                .inc_by(end - start);
            self.sync(log, true)?;
            let s = self.state.lock();
            if s.generation == generation && !s.closed {
                self.zeroed_end
                    .fetch_max(end.min(s.file_end), Ordering::AcqRel);
            }
        }
    }

    /// An fdatasync of the segment's log, one at a time with the
    /// preallocator's. They share the file description, and a write-back
    /// error is reported to the first fsync on it only: if the
    /// preallocator's reports one, it may belong to records, so every
    /// later sync of this log fails too (and the partition is fenced, as
    /// after any failed fsync).
    pub(crate) fn sync(&self, log: &dyn FileHandle, zeros: bool) -> std::io::Result<()> {
        self.sync_with(|| log.sync_data(), zeros)
    }

    /// [`Ahead::sync`] with another sync of the log (`syncfs`).
    pub(crate) fn sync_with(
        &self,
        sync: impl FnOnce() -> std::io::Result<()>,
        zeros: bool,
    ) -> std::io::Result<()> {
        let mut failed = self.sync_failed.lock();
        if *failed {
            return Err(std::io::Error::other(
                "an earlier fdatasync of this segment failed",
            ));
        }
        let r = sync();
        if r.is_err() {
            *failed = true;
            if zeros {
                self.state.lock().closed = true;
            }
        }
        r
    }
}

/// The `es-prealloc` thread's queue; one per [`crate::Storage`], its thread
/// started when the first segment asks and stopped when this is dropped.
#[derive(Debug, Default)]
pub struct Preallocator {
    shared: Arc<Shared>,
    started: OnceLock<bool>,
    /// No thread: the queue is served by [`Preallocator::run_queued`] (tests).
    manual: bool,
    sizing: Sizing,
}

#[derive(Debug, Default)]
struct Shared {
    queue: Mutex<Queue>,
    wake: Condvar,
}

#[derive(Debug, Default)]
struct Queue {
    segments: VecDeque<Weak<Segment>>,
    stopped: bool,
}

impl Preallocator {
    /// A preallocator whose thread starts on first use.
    pub fn new() -> Arc<Preallocator> {
        Arc::default()
    }

    /// A preallocator with no thread: zeros are written only when
    /// [`Preallocator::run_queued`] is called (tests), as `sizing` says.
    pub fn manual(sizing: Sizing) -> Arc<Preallocator> {
        Arc::new(Preallocator {
            shared: Arc::default(),
            started: OnceLock::new(),
            manual: true,
            sizing,
        })
    }

    /// How far ahead it fills.
    pub fn sizing(&self) -> &Sizing {
        &self.sizing
    }

    /// Serves the segments queued so far on this thread; returns how many.
    pub fn run_queued(&self) -> usize {
        let mut n = 0;
        loop {
            let Some(next) = self.shared.queue.lock().segments.pop_front() else {
                return n;
            };
            n += 1;
            if let Some(seg) = next.upgrade() {
                fill_logged(&seg);
            }
        }
    }

    /// Queues `seg`, which [`Ahead::wants_more`] said wants zeros.
    pub(crate) fn request(&self, seg: &Arc<Segment>) {
        if !self.manual && !*self.started.get_or_init(|| self.start_thread()) {
            seg.ahead.never_fill();
            return;
        }
        self.shared
            .queue
            .lock()
            .segments
            .push_back(Arc::downgrade(seg));
        self.shared.wake.notify_one();
    }

    fn start_thread(&self) -> bool {
        let shared = self.shared.clone();
        match std::thread::Builder::new()
            .name("es-prealloc".into())
            .spawn(move || run(&shared))
        {
            Ok(_) => true,
            Err(e) => {
                tracing::warn!(error = %e, "no preallocation thread: segments grow as they are written");
                false
            }
        }
    }
}

impl Drop for Preallocator {
    fn drop(&mut self) {
        let mut q = self.shared.queue.lock();
        q.stopped = true;
        q.segments.clear();
        drop(q);
        self.shared.wake.notify_all();
    }
}

fn run(shared: &Shared) {
    loop {
        let next = {
            let mut q = shared.queue.lock();
            loop {
                if q.stopped {
                    return;
                }
                if let Some(w) = q.segments.pop_front() {
                    break w;
                }
                shared.wake.wait(&mut q);
            }
        };
        if let Some(seg) = next.upgrade() {
            fill_logged(&seg);
        }
    }
}

fn fill_logged(seg: &Segment) {
    if let Err(e) = seg.ahead.fill(&*seg.log) {
        tracing::warn!(file = %seg.log_path.display(), error = %e, "zero-filling ahead of the active segment failed; it grows as it is written");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ahead_grows_with_the_segment() {
        let s = Sizing::default();
        assert_eq!(s.ahead(0), 0);
        assert_eq!(s.ahead(START_BYTES - 1), 0);
        assert_eq!(s.ahead(START_BYTES), MIN_AHEAD_BYTES);
        assert_eq!(s.ahead(8 << 20), 2 << 20);
        assert_eq!(s.ahead(1 << 30), MAX_AHEAD_BYTES);
    }
}
