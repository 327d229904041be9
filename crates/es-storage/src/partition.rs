//! A partition: a directory of segments, the writer, group commit and reads.
//!
//! Three watermarks, as offsets (exclusive ends):
//! - *written*: appended with one `write` per append, possibly not yet on disk;
//! - *durable*: covered by an fsync;
//! - *high watermark*: what readers may see and producers have been told.
//!   With `flush.every_records == 1` it is the durable mark (nothing is shown
//!   that a crash could take back); otherwise it is the written mark. A
//!   replicated partition shows what the replication layer sets instead,
//!   never above the durable mark ([`replica`]).
//!
//! Only a truncation ([`truncate`]) moves the marks back.
//!
//! Locks: `writer` (a mutex) serialises appends, rolls and segment-list
//! changes. `commit` (a mutex + condvar) holds the watermarks and the group
//! commit state, a sans-io [`crate::commit::CommitCore`] whose decisions this
//! shell carries out; an fsync runs with neither lock held, so appends continue
//! while it runs and the next fsync covers all of them. Readers take a
//! snapshot of the segment list and the high watermark and never block the
//! writer. Lock order: writer, then `epochs` (see [`replica`]), then
//! `rolls` (see [`roll`]), then commit, then producers.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, RwLock};

use crate::batch::RecordBatchBuf;
use crate::clock::SharedClock;
use crate::commit::{CommitCore, Fence, Position};
use crate::context::Storage;
use crate::epochs::{EpochEntry, EpochHistory};
use crate::error::{Result, StorageError};
use crate::fs::Fs;
use crate::index::INDEX_INTERVAL_BYTES;
use crate::producers::{
    AbortedTxn, ProducerAppend, ProducerState, SeqCheck, CONTROL_ABORT, CONTROL_COMMIT,
    SNAPSHOT_FILE,
};
use crate::reclaim::Reclaimer;
use crate::record::{ProducerInfo, RecordMeta};
use crate::segment::{self, Segment, SegmentRecovery};
use crate::segment_set::SegmentSet;
use crate::syncer::SyncPool;

/// When appends are made durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlushPolicy {
    /// 1: fsync before every acknowledgement (group commit). N: fsync once N
    /// records are waiting, and at least every `interval`.
    pub every_records: u64,
    pub interval: Duration,
    /// The longest a group-commit fsync waits for appends announced before
    /// it ([`Partition::announce_append`]): requests already received and
    /// being decoded, so normally tens of microseconds; the bound only
    /// matters for a request that stalls. Default [`ANNOUNCED_WAIT`].
    pub announced_wait: Duration,
}

/// Default of [`FlushPolicy::announced_wait`].
pub const ANNOUNCED_WAIT: Duration = Duration::from_millis(2);

impl Default for FlushPolicy {
    fn default() -> Self {
        FlushPolicy {
            every_records: 1,
            interval: Duration::from_secs(1),
            announced_wait: ANNOUNCED_WAIT,
        }
    }
}

/// Per-partition settings (Kafka's topic configs that storage understands).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionConfig {
    /// Roll the active segment before it would exceed this (Kafka `segment.bytes`).
    pub segment_bytes: u64,
    /// Roll the active segment once it is this old (Kafka `segment.ms`).
    pub segment_ms: i64,
    /// Bytes of log between index entries.
    pub index_interval_bytes: u64,
    pub flush: FlushPolicy,
    /// Zero-fill the active segment ahead of its last record (Kafka
    /// `preallocate`; `prealloc.rs`).
    pub preallocate: bool,
}

/// Smallest `segment_bytes` honoured (1 KiB, for tests).
pub const SEGMENT_BYTES_MIN: u64 = 1024;

impl Default for PartitionConfig {
    fn default() -> Self {
        PartitionConfig {
            segment_bytes: 1 << 30,
            segment_ms: 7 * 24 * 3600 * 1000,
            index_interval_bytes: INDEX_INTERVAL_BYTES,
            flush: FlushPolicy::default(),
            preallocate: false,
        }
    }
}

/// Offsets of one append.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppendInfo {
    pub base_offset: u64,
    pub last_offset: u64,
}

/// What an append with producer checks did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppendOutcome {
    Appended(AppendInfo),
    /// A retry of an append already in the log: its original offsets.
    Duplicate(AppendInfo),
}

/// Loads the producer snapshot and replays the records after it.
fn recover_producers(
    fs: &dyn Fs,
    dir: &Path,
    segs: &[Arc<Segment>],
    log_start: u64,
    log_end: u64,
    now: i64,
) -> Result<ProducerState> {
    let snap: Option<ProducerState> = match crate::meta::read_json(fs, &dir.join(SNAPSHOT_FILE)) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "producer snapshot unreadable; replaying the whole log");
            None
        }
    };
    // A snapshot beyond the log's end (a torn tail was cut) cannot be trusted.
    let mut st = snap
        .filter(|s| s.applied_up_to <= log_end)
        .unwrap_or_default();
    // From the snapshot on, records below the log start included: they are
    // gone for readers (DeleteRecords, a log start set past them) but still
    // in the segments, and they may close a transaction the snapshot has
    // open (a marker below the log start, replayed from the log start
    // instead, left that transaction open for good after a restart, and
    // the last stable offset held back behind it).
    let first_base = segs.first().map_or(log_start, |s| s.base_offset);
    let from = st.applied_up_to.max(first_base.min(log_start));
    st.applied_up_to = from;
    if from < log_end {
        // Replay what the snapshot lacks, from the index entry at or before
        // `from` (replay skips records below it): a snapshot taken at a
        // clean close leaves nothing to read.
        let first = segs
            .partition_point(|s| s.base_offset <= from)
            .saturating_sub(1);
        for (i, seg) in segs[first..].iter().enumerate() {
            let start = if i == 0 { seg.lookup(from) } else { 0 };
            seg.for_each_record_from(start, seg.valid_len(), |r| {
                st.replay(r, now);
                true
            })?;
        }
    }
    st.applied_up_to = log_end;
    // Aborted transactions wholly below the log start no read can overlap.
    st.aborted.retain(|a| a.last_offset >= log_start);
    Ok(st)
}

mod append;
mod durability;
mod read;
mod replica;
mod roll;
mod truncate;

pub use read::{Isolation, LogSnapshot, ReadBuf, ReadChunk, ReadView};

/// What recovery did when the partition opened.
#[derive(Clone, Debug, Default)]
pub struct RecoveryReport {
    pub segments: Vec<SegmentRecovery>,
    /// The partition was closed cleanly (see [`CLEAN_SHUTDOWN_FILE`]): its
    /// active segment was checked against its index instead of scanned.
    pub clean_shutdown: bool,
}

/// Written by [`Partition::close`] once everything is fsynced; removed
/// (durably) when the partition opens, before it accepts a write. While it
/// exists, the active segment ends exactly where its last fsynced record
/// does, so recovery may trust it like a sealed segment (Kafka's
/// `.kafka_cleanshutdown`).
pub const CLEAN_SHUTDOWN_FILE: &str = "clean_shutdown";

/// A position in the log: exclusive end offset and the byte end within the
/// segment that holds it.
#[derive(Clone, Debug)]
pub(crate) struct Mark {
    offset: u64,
    segment: Arc<Segment>,
    pos: u64,
}

impl Mark {
    /// Fsyncs the data of the segment file that holds this mark: after it,
    /// everything below the mark in that segment is durable.
    pub(crate) fn sync_data(&self) -> std::io::Result<()> {
        let _timer = crate::metrics::FsyncTimer::start();
        self.segment.sync_log()
    }

    /// Syncs the whole file system holding this mark's segment (and its
    /// data, see [`crate::fs::FileHandle::sync_filesystem`]): one sync for
    /// every partition on it.
    pub(crate) fn sync_filesystem(&self) -> std::io::Result<()> {
        let _timer = crate::metrics::FsyncTimer::start();
        self.segment.sync_log_filesystem()
    }

    /// Whether a write-out and a device flush make everything below this
    /// mark durable ([`Segment::writes_in_place`]).
    pub(crate) fn in_place(&self) -> bool {
        self.segment.writes_in_place(self.pos)
    }

    /// Starts writing this mark's segment out below the mark.
    pub(crate) fn start_write_out(&self) -> std::io::Result<()> {
        self.segment.start_write_out(self.pos)
    }

    /// Fsyncs this mark's segment as [`Mark::sync_data`] does, and flushes
    /// the device even when the segment's file had nothing left to sync
    /// (the end of a write-out pass, `syncer.rs`).
    pub(crate) fn flush_device(&self) -> std::io::Result<()> {
        let _timer = crate::metrics::FsyncTimer::start();
        self.segment.flush_device_through_log()
    }

    /// Waits until the device holds this mark's segment below the mark; it
    /// is durable after the next flush of the device (any fdatasync on it).
    pub(crate) fn wait_written(&self) -> std::io::Result<()> {
        self.segment.wait_written(self.pos)
    }
}

impl Position for Mark {
    fn offset(&self) -> u64 {
        self.offset
    }
}

/// What the `commit` mutex guards: the group-commit core (watermarks,
/// waiters, the running sync, the fence) and when the last sync ended.
struct CommitState {
    core: CommitCore<Mark, DurableCallback>,
    last_sync: Instant,
    /// Replicated ([`Partition::set_replicated`]): the high watermark the
    /// replication layer set, at most the durable end.
    replicated_hw: Option<u64>,
    /// Where the high watermark starts when replication is first switched
    /// on after a restart ([`Partition::restore_high_watermark`]).
    restored_hw: Option<u64>,
}

/// Called once records are durable, or with the error that prevents it.
pub type DurableCallback = Box<dyn FnOnce(Result<()>) + Send>;

struct Writer {
    /// Roll time of the active segment.
    active_created: Instant,
}

/// The writer lock held ([`Partition::lock_writer`]).
pub(crate) struct WriterGuard<'a>(#[allow(dead_code)] parking_lot::MutexGuard<'a, Writer>);

/// Listener called with the new high watermark.
pub type Listener = Box<dyn Fn(u64) + Send + Sync>;

/// A partition log.
pub struct Partition {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    /// The file system holding `dir` ([`Fs::device`]), looked up the first
    /// time the grouped sync pool asks ([`Partition::device`]).
    device: std::sync::OnceLock<Option<u64>>,
    name: String,
    config: RwLock<PartitionConfig>,
    writer: Mutex<Writer>,
    segments: SegmentSet,
    commit: Mutex<CommitState>,
    synced: Condvar,
    log_start: std::sync::atomic::AtomicU64,
    listener: RwLock<Option<Listener>>,
    /// Producer sequence and transaction state; locked under `writer` when changed.
    producers: Mutex<ProducerState>,
    /// The leader-epoch history ([`replica`]); changed under `writer`.
    epochs: Mutex<EpochHistory>,
    /// A copy of its entries for snapshots, replaced at every change.
    epoch_list: RwLock<Arc<[EpochEntry]>>,
    /// The next segment's files, prepared ahead, and the last roll if it is
    /// not sealed yet ([`roll`]).
    rolls: Mutex<roll::Rolls>,
    /// Announced appends ([`Partition::announce_append`]) not yet done, in
    /// two generations: a sync flips `intent_side` and waits for the old
    /// side to drain, so it waits only for appends announced before it.
    intents: [AtomicUsize; 2],
    intent_side: AtomicUsize,
    /// A sync waits on `intents_done` (under `commit`) for announced appends.
    intent_waiting: AtomicBool,
    intents_done: Condvar,
    /// Frees the space of the segments retention and compaction delete.
    reclaimer: Arc<Reclaimer>,
    /// Fills active segments with zeros ahead (`preallocate`).
    prealloc: Arc<crate::prealloc::Preallocator>,
    /// Runs the fsyncs of [`Partition::when_durable`].
    sync: Arc<SyncPool>,
    clock: SharedClock,
}

/// An append announced to the partition before its records are decoded:
/// while it lives, the sync pool holds a sync back (at most
/// [`FlushPolicy::announced_wait`]) so that one fsync covers it too. Dropped after the
/// append (or when the request fails before it).
pub struct AppendIntent {
    part: Arc<Partition>,
    side: usize,
}

impl Drop for AppendIntent {
    fn drop(&mut self) {
        let p = &self.part;
        if p.intents[self.side].fetch_sub(1, Ordering::SeqCst) == 1
            && p.intent_waiting.load(Ordering::SeqCst)
        {
            let _c = p.commit.lock();
            p.intents_done.notify_all();
        }
    }
}

impl std::fmt::Debug for Partition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Partition")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl Partition {
    /// Opens (creating if missing) the partition in `dir` and recovers it,
    /// with the file system, sync pool, reclaimer and clock of `storage`.
    pub fn open(
        storage: &Storage,
        dir: PathBuf,
        config: PartitionConfig,
    ) -> Result<Arc<Partition>> {
        Self::open_with_report(storage, dir, config).map(|(p, _)| p)
    }

    /// Like [`Partition::open`], also returning what recovery did.
    pub fn open_with_report(
        storage: &Storage,
        dir: PathBuf,
        mut config: PartitionConfig,
    ) -> Result<(Arc<Partition>, RecoveryReport)> {
        let fs = storage.fs.clone();
        config.segment_bytes = config.segment_bytes.max(SEGMENT_BYTES_MIN);
        config.flush.every_records = config.flush.every_records.max(1);
        crate::fs::create_dir_durable(&*fs, &dir)?;
        crate::compaction::recover_swap(&*fs, &dir)?;
        let state: crate::compaction::PartitionState =
            crate::meta::read_json(&*fs, &dir.join(crate::compaction::STATE_FILE))?
                .unwrap_or_default();
        let names = fs.list(&dir)?;
        let mut bases: Vec<u64> = names
            .iter()
            .filter_map(|n| segment::parse_log_name(n))
            .collect();
        bases.sort_unstable();
        // An index or batch notes without their log are left over from a
        // removed segment.
        for n in &names {
            let stem = n
                .strip_suffix(segment::INDEX_SUFFIX)
                .or_else(|| n.strip_suffix(segment::BATCHES_SUFFIX));
            if let Some(stem) = stem {
                if stem.len() == segment::NAME_DIGITS
                    && stem.parse::<u64>().map_or(true, |b| !bases.contains(&b))
                {
                    fs.remove_file(&dir.join(n))?;
                }
            }
        }
        let now = storage.clock.now_ms();
        let clean_marker = dir.join(CLEAN_SHUTDOWN_FILE);
        let clean = fs.exists(&clean_marker);
        let mut report = RecoveryReport {
            clean_shutdown: clean,
            ..RecoveryReport::default()
        };
        let mut segs: Vec<Arc<Segment>> = Vec::with_capacity(bases.len() + 1);
        for (i, &base) in bases.iter().enumerate() {
            let active = i + 1 == bases.len();
            let (seg, rep) = Segment::open_and_recover(&*fs, &dir, base, active, clean, now)?;
            report.segments.push(rep);
            segs.push(Arc::new(seg));
        }
        if clean {
            // From here on the active segment may grow past what was synced.
            fs.remove_file(&clean_marker)?;
            fs.sync_dir(&dir)?;
        }
        // A log start recorded above the recovered log end: DeleteRecords
        // moved it past records that were not yet durable (the high
        // watermark is the written end with a flush policy of N records),
        // and the power went. The log continues at the log start, as
        // Kafka's recovery does, on a new empty segment named after it:
        // continuing below it would give its offsets again, to records the
        // next open would hide below the recorded log start.
        // Segments are in offset order: the last one ends the log.
        let recovered_end = segs.last().map(|s| s.end_offset().max(s.base_offset));
        let continue_at = match (state.log_start_offset, recovered_end) {
            (Some(s), end) if end.is_none_or(|e| s > e) => Some(s),
            (None, None) => Some(0),
            _ => None,
        };
        if let Some(base) = continue_at {
            if base > i64::MAX as u64 {
                return Err(StorageError::Metadata {
                    file: dir
                        .join(crate::compaction::STATE_FILE)
                        .display()
                        .to_string(),
                    why: format!("log start offset {base} is not a Kafka offset"),
                });
            }
            if base > 0 {
                tracing::warn!(dir = %dir.display(), log_start = base, log_end = ?recovered_end, "the recorded log start is past the recovered log end; the log continues at the log start");
            }
            segs.push(Arc::new(Segment::create(&*fs, &dir, base, now)?));
            fs.sync_dir(&dir)?;
        }
        let active = segs
            .last()
            .cloned()
            .ok_or_else(|| StorageError::Invalid("no segment".into()))?;
        // The next offset continues after the highest valid record.
        let next = segs
            .iter()
            .map(|s| s.end_offset())
            .max()
            .unwrap_or(0)
            .max(active.base_offset);
        let first_base = segs.first().map_or(0, |s| s.base_offset);
        let start = state.log_start_offset.unwrap_or(first_base).min(next);
        let mark = Mark {
            offset: next,
            segment: active.clone(),
            pos: active.valid_len(),
        };
        let producers = recover_producers(&*fs, &dir, &segs, start, next, now)?;
        let epochs = replica::recover_epochs(&*fs, &dir, start, next)?;
        // The first roll's files (stale ones from before a crash are replaced).
        let prepared = Segment::prepare(&*fs, &dir)
            .inspect_err(|e| {
                tracing::warn!(dir = %dir.display(), error = %e, "next segment not prepared");
            })
            .ok();
        let name = dir.display().to_string();
        let p = Partition {
            fs,
            dir,
            device: std::sync::OnceLock::new(),
            name,
            config: RwLock::new(config),
            writer: Mutex::new(Writer {
                active_created: Instant::now(),
            }),
            segments: SegmentSet::new(segs),
            commit: Mutex::new(CommitState {
                core: CommitCore::new(mark),
                last_sync: Instant::now(),
                replicated_hw: None,
                restored_hw: None,
            }),
            synced: Condvar::new(),
            log_start: std::sync::atomic::AtomicU64::new(start),
            listener: RwLock::new(None),
            producers: Mutex::new(producers),
            epoch_list: RwLock::new(epochs.entries().into()),
            epochs: Mutex::new(epochs),
            rolls: Mutex::new(roll::Rolls::new(prepared)),
            intents: [AtomicUsize::new(0), AtomicUsize::new(0)],
            intent_side: AtomicUsize::new(0),
            intent_waiting: AtomicBool::new(false),
            intents_done: Condvar::new(),
            reclaimer: storage.reclaimer.clone(),
            prealloc: storage.prealloc.clone(),
            sync: storage.sync.clone(),
            clock: storage.clock.clone(),
        };
        crate::metrics::recovery_checked(p.size_bytes(), p.segments().len() as u64);
        Ok((Arc::new(p), report))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn config(&self) -> PartitionConfig {
        *self.config.read()
    }

    pub fn set_config(&self, mut config: PartitionConfig) {
        config.segment_bytes = config.segment_bytes.max(SEGMENT_BYTES_MIN);
        config.flush.every_records = config.flush.every_records.max(1);
        *self.config.write() = config;
    }

    /// Registers the function told about every new high watermark.
    pub fn set_listener(&self, f: Listener) {
        *self.listener.write() = Some(f);
    }

    fn notify(&self, hw: u64) {
        if let Some(f) = self.listener.read().as_ref() {
            f(hw);
        }
    }

    /// Gives the files of every segment to the partition's [`Reclaimer`],
    /// which frees their space gradually once the partition and its readers
    /// have let go of them. Only for a partition whose directory has been
    /// removed: the reclaimer truncates the files.
    pub fn reclaim_files(&self) {
        let segs = self.segments();
        self.reclaim_segments(segs.iter());
    }

    /// Gives the files of `segs`, whose names are gone, to this partition's
    /// reclaimer (retention, a compaction swap, a deleted partition).
    pub(crate) fn reclaim_segments<'a>(&self, segs: impl IntoIterator<Item = &'a Arc<Segment>>) {
        for seg in segs {
            seg.reclaim_files(&self.reclaimer);
        }
    }

    /// The file system the partition's files are on.
    pub(crate) fn fs(&self) -> &dyn Fs {
        &*self.fs
    }

    /// The partition's name in logs (its directory).
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The segment list, for the changes retention and compaction make.
    pub(crate) fn segment_set(&self) -> &SegmentSet {
        &self.segments
    }

    /// Takes the writer lock: no append, roll or segment-list change runs
    /// until the guard drops. Retention and compaction hold it while they
    /// check that the list is the one they read and publish its successor.
    /// The last roll is sealed first, so every segment but the active one
    /// is durable under its final name while the guard lives; fails if the
    /// partition is fenced (a failed fsync, seal or segment swap: nothing
    /// changes its files until a restart has run recovery) or closed.
    pub(crate) fn lock_writer(&self) -> Result<WriterGuard<'_>> {
        let w = self.writer.lock();
        self.writable()?;
        self.finish_roll()?;
        Ok(WriterGuard(w))
    }

    /// Moves the log start offset (already made durable by the caller),
    /// under the writer lock.
    pub(crate) fn set_log_start_offset(&self, _w: &WriterGuard<'_>, offset: u64) {
        self.log_start.store(offset, Ordering::Release);
    }

    /// Wall time, from the clock the partition was opened with.
    pub(crate) fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// A snapshot of the segment list (oldest first).
    pub fn segments(&self) -> Arc<Vec<Arc<Segment>>> {
        self.segments.snapshot()
    }

    pub fn log_start_offset(&self) -> u64 {
        self.log_start.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The next offset to be assigned.
    pub fn log_end_offset(&self) -> u64 {
        self.commit.lock().core.written().offset
    }

    /// The offset up to which records are visible to readers: the durable
    /// end (`every_records == 1`) or the written end; when replicated, the
    /// high watermark the replication layer set ([`Partition::set_replicated`]).
    pub fn high_watermark(&self) -> u64 {
        let c = self.commit.lock();
        self.visible(&c).offset
    }

    /// The mark readers may read up to (see [`Partition::high_watermark`]).
    /// Replicated, it is the durable mark's position with the offset
    /// lowered to the high watermark: readers stop at the first record at
    /// or above a mark's offset.
    fn visible(&self, c: &CommitState) -> Mark {
        match c.replicated_hw {
            None => c
                .core
                .visible(self.config.read().flush.every_records)
                .clone(),
            Some(hw) => {
                let d = c.core.durable();
                Mark {
                    offset: hw.min(d.offset),
                    ..d.clone()
                }
            }
        }
    }

    fn fence_error(&self, f: &Fence) -> StorageError {
        StorageError::Fenced(format!("{}: {}", self.name, f.0))
    }

    /// Fences the partition until restart (a write that cannot be undone, a
    /// failed roll) and fails every waiter.
    pub(crate) fn fence(&self, why: String) {
        let (f, waiters) = self.commit.lock().core.fence(why);
        self.synced.notify_all();
        for done in waiters {
            done(Err(self.fence_error(&f)));
        }
    }

    /// Total bytes of log in all segments.
    pub fn size_bytes(&self) -> u64 {
        self.segments().iter().map(|s| s.valid_len()).sum()
    }

    /// Appends the records in `batch` with one write to the active segment (and
    /// one to its index). The records are not yet durable: call
    /// [`Partition::wait_durable`] before acknowledging them.
    pub fn append(&self, batch: &mut RecordBatchBuf) -> Result<AppendInfo> {
        match self.append_producer(batch, None)? {
            AppendOutcome::Appended(info) | AppendOutcome::Duplicate(info) => Ok(info),
        }
    }

    /// Appends like [`Partition::append`], first checking the producer's
    /// sequence rules when `producer` is given (one check and one state update,
    /// in the same step as the write: a failed append never advances it). A
    /// retried batch is answered with its original offsets and not appended.
    /// Either way, call [`Partition::wait_durable`] before acknowledging.
    pub fn append_producer(
        &self,
        batch: &mut RecordBatchBuf,
        producer: Option<&ProducerAppend>,
    ) -> Result<AppendOutcome> {
        let w = self.lock_for_append(batch)?;
        self.append_producer_locked(w, batch, producer)
    }

    /// Like [`Partition::append_producer`], but only if the append does no
    /// disk work beyond its writes into the page cache: no fsync, no file
    /// creation, rename or directory sync (a roll onto the prepared segment
    /// is fine; one that must seal the previous roll first, or create its
    /// files, is not, nor is creating a segment's `.batches` file). Returns
    /// None, with nothing changed, when the append would need such work:
    /// call [`Partition::append_producer`] from a thread that may block.
    /// For callers on an async runtime's worker threads.
    pub fn try_append_producer(
        &self,
        batch: &mut RecordBatchBuf,
        producer: Option<&ProducerAppend>,
    ) -> Result<Option<AppendOutcome>> {
        let w = self.lock_for_append(batch)?;
        if self.append_needs_disk_work(&w, batch) {
            return Ok(None);
        }
        self.append_producer_locked(w, batch, producer).map(Some)
    }

    /// Refuses an empty append, then takes the writer lock.
    fn lock_for_append(
        &self,
        batch: &RecordBatchBuf,
    ) -> Result<parking_lot::MutexGuard<'_, Writer>> {
        if batch.is_empty() {
            return Err(StorageError::Invalid("empty append".into()));
        }
        Ok(self.writer.lock())
    }

    /// The sequence check, the write and the producer state update, with
    /// the writer lock `w` held; releases it before notifying readers.
    fn append_producer_locked(
        &self,
        mut w: parking_lot::MutexGuard<'_, Writer>,
        batch: &mut RecordBatchBuf,
        producer: Option<&ProducerAppend>,
    ) -> Result<AppendOutcome> {
        if let Some(p) = producer {
            match self.producers.lock().check(p) {
                Ok(SeqCheck::Fresh) => {}
                Ok(SeqCheck::Duplicate {
                    base_offset,
                    last_offset,
                }) => {
                    return Ok(AppendOutcome::Duplicate(AppendInfo {
                        base_offset,
                        last_offset,
                    }))
                }
                Err(e) => return Err(StorageError::Sequence(e)),
            }
        }
        let (info, hw) = self.append_locked(&mut w, batch, None)?;
        if let Some(p) = producer {
            self.producers.lock().apply_append(
                p,
                info.base_offset,
                info.last_offset,
                batch.max_timestamp_ms(),
                self.now_ms(),
            );
        }
        drop(w);
        if let Some(hw) = hw {
            self.notify(hw);
        }
        Ok(AppendOutcome::Appended(info))
    }

    /// With the writer lock held: whether appending `batch` now would do
    /// disk work beyond page-cache writes (see [`Self::try_append_producer`]).
    fn append_needs_disk_work(&self, w: &Writer, batch: &RecordBatchBuf) -> bool {
        let active = self.segments.active();
        let rolls = self.wants_roll(w, &active, batch.bytes_len() as u64, &self.config());
        if rolls && !self.roll_is_a_swap() {
            return true;
        }
        !batch.produced().is_empty() && (rolls || !active.has_batches_file())
    }

    /// Whether an append of `bytes_len` bytes rolls the active segment first.
    fn wants_roll(
        &self,
        w: &Writer,
        active: &Segment,
        bytes_len: u64,
        config: &PartitionConfig,
    ) -> bool {
        let size = active.valid_len();
        let age = w.active_created.elapsed().as_millis() as i64;
        size > 0 && (size + bytes_len > config.segment_bytes || age >= config.segment_ms)
    }

    /// Appends a transaction marker (a control record) for `producer_id`.
    pub fn append_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
        timestamp_ms: i64,
    ) -> Result<AppendInfo> {
        let kind = if commit {
            CONTROL_COMMIT
        } else {
            CONTROL_ABORT
        };
        let mut key = [0u8; 4];
        key[2..].copy_from_slice(&kind.to_be_bytes());
        let mut value = [0u8; 6];
        value[2..].copy_from_slice(&coordinator_epoch.to_be_bytes());
        let meta = RecordMeta {
            producer: Some(ProducerInfo {
                producer_id,
                producer_epoch,
                sequence: -1,
            }),
            transactional: true,
            control: true,
        };
        let mut batch = RecordBatchBuf::new();
        batch.push(
            timestamp_ms,
            Some(&key),
            Some(&value),
            std::iter::empty(),
            &meta,
        );
        let mut w = self.writer.lock();
        let (info, hw) = self.append_locked(&mut w, &mut batch, None)?;
        self.producers.lock().apply_marker(
            producer_id,
            producer_epoch,
            commit,
            coordinator_epoch,
            info.base_offset,
            self.now_ms(),
        );
        drop(w);
        if let Some(hw) = hw {
            self.notify(hw);
        }
        Ok(info)
    }

    /// The last stable offset: below the first open transaction and the high watermark.
    pub fn last_stable_offset(&self) -> u64 {
        let hw = self.high_watermark();
        self.producers
            .lock()
            .first_unstable_offset()
            .map_or(hw, |f| f.min(hw))
    }

    /// Aborted transactions overlapping `from..to`, for read_committed fetches.
    pub fn aborted_transactions(&self, from: u64, to: u64) -> Vec<AbortedTxn> {
        self.producers.lock().aborted_between(from, to)
    }

    /// A copy of the producer state (DescribeProducers, tests).
    pub fn producer_state(&self) -> ProducerState {
        self.producers.lock().clone()
    }

    /// Forgets producers idle longer than `expiration_ms` (Kafka's
    /// `producer.id.expiration.ms`) without an open transaction.
    pub fn expire_producers(&self, now_ms: i64, expiration_ms: i64) -> usize {
        let _w = self.writer.lock();
        let start = self.log_start_offset();
        self.producers.lock().expire(now_ms, expiration_ms, start)
    }

    /// Drops the aborted transactions `(producer, marker offset)` from the
    /// producer state and rewrites the snapshot, so that a restart does not
    /// bring them back. For transactions compaction has left without
    /// records.
    pub(crate) fn forget_aborted(
        &self,
        markers: &std::collections::HashSet<(i64, u64)>,
    ) -> Result<()> {
        let _w = self.lock_writer()?;
        let changed = {
            let mut ps = self.producers.lock();
            let before = ps.aborted.len();
            ps.aborted
                .retain(|a| !markers.contains(&(a.producer_id, a.last_offset)));
            ps.aborted.len() != before
        };
        if changed {
            self.write_producer_snapshot()?;
        }
        Ok(())
    }

    /// Writes the producer snapshot (covering everything written so far).
    /// Called with the writer lock held: every record written so far is in
    /// the producer state (producer appends and markers update it as they
    /// are written; other records change nothing in it), so the snapshot
    /// covers the log up to the written offset and recovery replays nothing
    /// before it.
    fn write_producer_snapshot(&self) -> Result<()> {
        let written = self.commit.lock().core.written().offset;
        let mut st = self.producers.lock().clone();
        st.applied_up_to = st.applied_up_to.max(written);
        crate::meta::write_json(&*self.fs, &self.dir.join(SNAPSHOT_FILE), &st)
    }

    /// The file system holding the partition's directory (see [`Fs::device`]).
    pub(crate) fn device(&self) -> Option<u64> {
        *self.device.get_or_init(|| self.fs.device(&self.dir))
    }

    /// Makes everything written so far durable.
    pub fn flush(&self) -> Result<()> {
        self.sync_up_to(u64::MAX)
    }

    /// Flushes if unsynced records are older than the flush interval (call it
    /// periodically; meaningful when `every_records > 1`).
    pub fn flush_if_due(&self) -> Result<()> {
        let interval = self.config().flush.interval;
        let due = {
            let c = self.commit.lock();
            c.core.pending() > 0 && c.last_sync.elapsed() >= interval && c.core.fenced().is_none()
        };
        if due {
            self.flush()?;
        }
        Ok(())
    }

    /// Syncs and closes: later appends fail with `Closed`.
    pub fn close(&self) -> Result<()> {
        let _w = self.writer.lock();
        // A fenced partition never claims a clean shutdown: the next open
        // recovers it in full (its fence may have nothing unsynced to fail
        // on, as after a failed segment swap).
        let r = self
            .writable()
            .and_then(|()| self.flush())
            .and_then(|()| self.finish_roll());
        let seg = self.commit.lock().core.written().segment.clone();
        // The zeros written ahead go: a clean close leaves the active
        // segment ending at its last record, as recovery's quick check wants.
        let r = r.and_then(|()| {
            if seg.ahead.cut(&*seg.log, seg.valid_len(), true, false)? {
                seg.sync_log()?;
            }
            Ok(())
        });
        let r2 = seg.index_file.sync_data();
        if let Err(e) = seg.sync_marks() {
            tracing::warn!(file = %seg.batches_path.display(), error = %e, "fsync of produced batch notes failed");
        }
        let r3 = if r.is_ok() {
            self.write_producer_snapshot()
        } else {
            Ok(())
        };
        let left = self.commit.lock().core.close();
        for done in left {
            done(Err(StorageError::Closed));
        }
        r3?;
        r?;
        r2?;
        crate::meta::write_atomic(&*self.fs, &self.dir.join(CLEAN_SHUTDOWN_FILE), b"")?;
        Ok(())
    }

    /// The first record with a timestamp >= `ts`: (offset, timestamp).
    pub fn offset_for_timestamp(&self, ts: i64) -> Result<Option<(u64, i64)>> {
        let hw = self.high_watermark();
        let segs = self.segments();
        for seg in segs.iter() {
            match seg.max_timestamp_ms()? {
                Some(m) if m >= ts => {}
                _ => continue,
            }
            let mut found = None;
            seg.for_each_record(seg.valid_len(), |r| {
                if r.offset >= hw {
                    return false;
                }
                if r.timestamp_ms >= ts && r.offset >= self.log_start_offset() {
                    found = Some((r.offset, r.timestamp_ms));
                    return false;
                }
                true
            })?;
            if found.is_some() {
                return Ok(found);
            }
        }
        Ok(None)
    }

    /// The record with the largest timestamp (the earliest such): (offset, timestamp).
    pub fn max_timestamp(&self) -> Result<Option<(u64, i64)>> {
        let hw = self.high_watermark();
        let segs = self.segments();
        let mut best: Option<(u64, i64)> = None;
        let mut best_seg = None;
        for (i, seg) in segs.iter().enumerate() {
            if let Some(m) = seg.max_timestamp_ms()? {
                if best.is_none_or(|b| m > b.1) {
                    best = Some((0, m));
                    best_seg = Some(i);
                }
            }
        }
        let Some(i) = best_seg else { return Ok(None) };
        let Some((_, m)) = best else { return Ok(None) };
        let mut found = None;
        segs[i].for_each_record(segs[i].valid_len(), |r| {
            if r.offset >= hw {
                return false;
            }
            if r.timestamp_ms == m {
                found = Some((r.offset, m));
                return false;
            }
            true
        })?;
        Ok(found)
    }
}
