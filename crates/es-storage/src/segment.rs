//! One segment: a `.log` file of records and its `.index`, named after the
//! segment's base offset padded to 20 digits, and, when producers compressed
//! batches into it, a `.batches` file noting them (see `batch_marks.rs`).
//!
//! A `Segment` owns its two file handles for its whole life. The partition
//! shares segments with readers through `Arc`, so a segment that retention or
//! compaction unlinks keeps serving the readers that already hold it, from the
//! same bytes. Only the partition's writer mutates a segment (under the
//! partition's write lock); readers see the in-memory index through a lock
//! and never read past the limits the partition gives them.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::batch_marks::{self, BatchMark, MARK_BYTES};
use crate::error::{Result, StorageError};
use crate::fs::{FileHandle, Fs};
use crate::index::{self, IndexEntry, ENTRY_BYTES};
use crate::reclaim::Reclaimer;
use crate::record::{self, DecodeError};

/// Extension of segment log files.
pub const LOG_SUFFIX: &str = ".log";
/// Extension of segment index files.
pub const INDEX_SUFFIX: &str = ".index";
/// Extension of the files that note a segment's produced batches.
pub const BATCHES_SUFFIX: &str = ".batches";
/// Digits of the zero-padded base offset in segment file names.
pub const NAME_DIGITS: usize = 20;
/// The next segment's log, created ahead of the roll that will use it
/// ([`Prepared`]); renamed to its final name when the segment before it is
/// sealed. Recovery deletes it: nothing in it was ever durable.
pub const PREPARED_LOG: &str = "next.log.prepared";
/// The next segment's index, as [`PREPARED_LOG`].
pub const PREPARED_INDEX: &str = "next.index.prepared";
/// Bytes read per system call when scanning a segment.
pub const SCAN_WINDOW_BYTES: usize = 1024 * 1024;

/// File stem of a segment with this base offset.
pub fn file_stem(base_offset: u64) -> String {
    format!("{base_offset:0width$}", width = NAME_DIGITS)
}

/// Parses a segment file name (`<20 digits>.log`) into its base offset.
pub fn parse_log_name(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(LOG_SUFFIX)?;
    if stem.len() != NAME_DIGITS || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

/// A segment of a partition.
#[derive(Debug)]
pub struct Segment {
    pub base_offset: u64,
    pub log_path: PathBuf,
    pub index_path: PathBuf,
    pub(crate) log: Arc<dyn FileHandle>,
    pub(crate) index_file: Arc<dyn FileHandle>,
    /// Bytes of valid records in the log (a sealed segment with a corrupt record
    /// stops there; the rest of the file is left in place but never served).
    valid_len: AtomicU64,
    /// Offset after the last valid record (== base_offset when empty).
    end_offset: AtomicU64,
    /// Largest record timestamp, or i64::MIN when unknown / empty.
    max_timestamp_ms: AtomicI64,
    /// Whether `max_timestamp_ms` covers every record.
    max_timestamp_exact: std::sync::atomic::AtomicBool,
    /// Wall-clock time the segment was created or opened as active.
    pub created_ms: i64,
    index: RwLock<Vec<IndexEntry>>,
    index_bytes: AtomicU64,
    /// `<stem>.batches`: the produced batches noted in this segment.
    pub batches_path: PathBuf,
    /// The marks of that file, sorted by offset.
    marks: RwLock<Vec<BatchMark>>,
    /// That file once opened, and the bytes of valid marks in it.
    batches_file: Mutex<BatchesFile>,
    /// A damaged index entry has been reported ([`Segment::report_bad_index_entry`]).
    index_damage_reported: std::sync::atomic::AtomicBool,
    /// Zeros written ahead of the last record (`prealloc.rs`).
    pub(crate) ahead: crate::prealloc::Ahead,
}

#[derive(Debug, Default)]
struct BatchesFile {
    file: Option<Arc<dyn FileHandle>>,
    len: u64,
    /// Written since its last fsync.
    dirty: bool,
}

/// A segment's files created ahead ([`Segment::prepare`]), not yet in use.
#[derive(Debug)]
pub struct Prepared {
    log: Arc<dyn FileHandle>,
    index: Arc<dyn FileHandle>,
}

/// What recovery found in a segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentRecovery {
    pub base_offset: u64,
    /// Whether the segment had to be scanned in full.
    pub scanned: bool,
    /// Bytes cut off the end (active segment, torn tail).
    pub truncated_bytes: u64,
    /// A corrupt record in a sealed segment: its position and why.
    pub corrupt_at: Option<(u64, String)>,
    pub records: Option<u64>,
}

impl Segment {
    /// Gives this segment's log and index files to `reclaimer`, which frees
    /// their space once nobody else holds them. Only for a segment whose
    /// files no longer have their names: the reclaimer truncates them.
    pub fn reclaim_files(&self, reclaimer: &Reclaimer) {
        reclaimer.hold(self.log.clone());
        reclaimer.hold(self.index_file.clone());
    }

    /// Creates the next segment's files under their temporary names
    /// ([`PREPARED_LOG`], [`PREPARED_INDEX`]), removing stale ones first, so
    /// that a roll only has to start writing to them.
    pub fn prepare(fs: &dyn Fs, dir: &Path) -> Result<Prepared> {
        let (log_path, index_path) = (dir.join(PREPARED_LOG), dir.join(PREPARED_INDEX));
        for p in [&log_path, &index_path] {
            if fs.exists(p) {
                fs.remove_file(p)?;
            }
        }
        let log = fs.create_new(&log_path)?;
        let index = match fs.create_new(&index_path) {
            Ok(f) => f,
            Err(e) => {
                let _ = fs.remove_file(&log_path);
                return Err(e.into());
            }
        };
        Ok(Prepared { log, index })
    }

    /// The segment starting at `base_offset` on prepared files: it has its
    /// final paths, the files still their temporary names until
    /// [`Segment::rename_prepared`].
    pub(crate) fn from_prepared(p: Prepared, dir: &Path, base_offset: u64, now_ms: i64) -> Segment {
        let stem = file_stem(base_offset);
        Segment::from_parts(
            base_offset,
            dir.join(format!("{stem}{LOG_SUFFIX}")),
            dir.join(format!("{stem}{INDEX_SUFFIX}")),
            p.log,
            p.index,
            now_ms,
        )
    }

    /// Gives this segment's prepared files their final names (the directory
    /// still needs a sync to make that durable).
    pub(crate) fn rename_prepared(&self, fs: &dyn Fs, dir: &Path) -> std::io::Result<()> {
        fs.rename(&dir.join(PREPARED_LOG), &self.log_path)?;
        fs.rename(&dir.join(PREPARED_INDEX), &self.index_path)
    }

    /// Creates a new empty segment (both files must not exist).
    pub fn create(fs: &dyn Fs, dir: &Path, base_offset: u64, now_ms: i64) -> Result<Segment> {
        let stem = file_stem(base_offset);
        let log_path = dir.join(format!("{stem}{LOG_SUFFIX}"));
        let index_path = dir.join(format!("{stem}{INDEX_SUFFIX}"));
        let log = fs.create_new(&log_path)?;
        let index_file = match fs.create_new(&index_path) {
            Ok(f) => f,
            Err(e) => {
                let _ = fs.remove_file(&log_path);
                return Err(e.into());
            }
        };
        Ok(Segment::from_parts(
            base_offset,
            log_path,
            index_path,
            log,
            index_file,
            now_ms,
        ))
    }

    fn from_parts(
        base_offset: u64,
        log_path: PathBuf,
        index_path: PathBuf,
        log: Arc<dyn FileHandle>,
        index_file: Arc<dyn FileHandle>,
        now_ms: i64,
    ) -> Segment {
        let batches_path = log_path.with_extension(&BATCHES_SUFFIX[1..]);
        Segment {
            base_offset,
            log_path,
            index_path,
            log,
            index_file,
            valid_len: AtomicU64::new(0),
            end_offset: AtomicU64::new(base_offset),
            max_timestamp_ms: AtomicI64::new(i64::MIN),
            max_timestamp_exact: std::sync::atomic::AtomicBool::new(true),
            created_ms: now_ms,
            index: RwLock::new(Vec::new()),
            index_bytes: AtomicU64::new(0),
            batches_path,
            marks: RwLock::new(Vec::new()),
            batches_file: Mutex::new(BatchesFile::default()),
            index_damage_reported: std::sync::atomic::AtomicBool::new(false),
            ahead: crate::prealloc::Ahead::new(),
        }
    }

    /// A segment whose files were just written whole (compaction output):
    /// `log` / `index_file` are open handles, the paths their final names.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn from_written(
        base_offset: u64,
        log_path: PathBuf,
        index_path: PathBuf,
        log: Arc<dyn FileHandle>,
        index_file: Arc<dyn FileHandle>,
        valid_len: u64,
        end_offset: u64,
        max_ts: i64,
        entries: Vec<IndexEntry>,
    ) -> Segment {
        let seg = Segment::from_parts(base_offset, log_path, index_path, log, index_file, 0);
        seg.ahead.opened(valid_len);
        seg.valid_len.store(valid_len, Ordering::Release);
        seg.end_offset.store(end_offset, Ordering::Release);
        seg.max_timestamp_ms.store(max_ts, Ordering::Release);
        seg.index_bytes
            .store((entries.len() * ENTRY_BYTES) as u64, Ordering::Release);
        *seg.index.write() = entries;
        seg
    }

    /// Opens an existing segment and recovers it. A sealed segment is checked
    /// against its index and trusted if it passes; so is the active one after
    /// a clean shutdown (`clean`). The active one otherwise (and any that
    /// fails) is scanned in full. Torn tails are cut only from the active
    /// segment.
    pub fn open_and_recover(
        fs: &dyn Fs,
        dir: &Path,
        base_offset: u64,
        active: bool,
        clean: bool,
        now_ms: i64,
    ) -> Result<(Segment, SegmentRecovery)> {
        let stem = file_stem(base_offset);
        let log_path = dir.join(format!("{stem}{LOG_SUFFIX}"));
        let index_path = dir.join(format!("{stem}{INDEX_SUFFIX}"));
        let log = fs.open(&log_path)?;
        let index_file = if fs.exists(&index_path) {
            fs.open(&index_path)?
        } else {
            fs.create_new(&index_path)?
        };
        let seg = Segment::from_parts(base_offset, log_path, index_path, log, index_file, now_ms);
        let mut rep = SegmentRecovery {
            base_offset,
            scanned: false,
            truncated_bytes: 0,
            corrupt_at: None,
            records: None,
        };
        let file_len = seg.log.len()?;
        if !active || clean {
            if let Some((entries, end_offset, tail_max_ts)) = seg.check_against_index(file_len)? {
                seg.ahead.opened(file_len);
                seg.valid_len.store(file_len, Ordering::Release);
                seg.end_offset.store(end_offset, Ordering::Release);
                seg.max_timestamp_ms.store(tail_max_ts, Ordering::Release);
                seg.max_timestamp_exact.store(false, Ordering::Release);
                seg.index_bytes
                    .store((entries.len() * ENTRY_BYTES) as u64, Ordering::Release);
                *seg.index.write() = entries;
                seg.load_marks(fs)?;
                return Ok((seg, rep));
            }
        }
        // Full scan: rebuild the index from the log.
        rep.scanned = true;
        let scan = seg.scan_full(file_len)?;
        rep.records = Some(scan.records);
        if let Some((pos, why)) = scan.error {
            if active {
                // A torn tail from a crash mid-write, or zeros written
                // ahead (`prealloc.rs`): never acknowledged, cut it.
                let zeros = seg.all_zero(pos, file_len)?;
                seg.log.set_len(pos)?;
                seg.log.sync_data()?;
                rep.truncated_bytes = file_len - pos;
                if rep.truncated_bytes > 0 && zeros {
                    tracing::info!(file = %seg.log_path.display(), position = pos, bytes = rep.truncated_bytes, "cut the zeros written ahead of the active segment's last record");
                } else if rep.truncated_bytes > 0 {
                    tracing::warn!(file = %seg.log_path.display(), position = pos, bytes = rep.truncated_bytes, %why, "cut a torn tail off the active segment");
                }
            } else {
                tracing::error!(file = %seg.log_path.display(), position = pos, %why, "corrupt record in a sealed segment; the rest of this segment is skipped and the file left in place");
                rep.corrupt_at = Some((pos, why));
            }
        }
        seg.ahead
            .opened(if active { scan.valid_len } else { file_len });
        seg.valid_len.store(scan.valid_len, Ordering::Release);
        seg.end_offset.store(scan.end_offset, Ordering::Release);
        seg.max_timestamp_ms.store(scan.max_ts, Ordering::Release);
        seg.max_timestamp_exact.store(true, Ordering::Release);
        // Rewrite the index file to match the scan.
        let mut bytes = Vec::with_capacity(scan.entries.len() * ENTRY_BYTES);
        for e in &scan.entries {
            e.encode(&mut bytes);
        }
        seg.index_file.set_len(0)?;
        seg.index_file.write_all_at(&bytes, 0)?;
        seg.index_file.sync_data()?;
        seg.index_bytes.store(bytes.len() as u64, Ordering::Release);
        *seg.index.write() = scan.entries;
        seg.load_marks(fs)?;
        Ok((seg, rep))
    }

    /// The storage document's cheap check: the first record and everything
    /// after the last index entry decode, pass their CRC and end exactly at the
    /// end of the file. Returns the entries, the end offset and the largest
    /// timestamp seen in the tail when it passes.
    fn check_against_index(&self, file_len: u64) -> Result<Option<(Vec<IndexEntry>, u64, i64)>> {
        let ilen = self.index_file.len()?;
        if ilen > file_len.saturating_mul(2) + ENTRY_BYTES as u64 {
            return Ok(None); // implausible: more index than log
        }
        let mut ibuf = vec![0u8; ilen as usize];
        read_exact_at(&*self.index_file, &mut ibuf, 0)?;
        let Some(entries) = index::parse(&ibuf) else {
            return Ok(None);
        };
        if file_len == 0 {
            return Ok(if entries.is_empty() {
                Some((entries, self.base_offset, i64::MIN))
            } else {
                None
            });
        }
        let Some(last) = entries.last().copied() else {
            return Ok(None);
        };
        if last.position >= file_len {
            return Ok(None);
        }
        // First record.
        let first = match self.read_record_at(0, file_len)? {
            Some(v) => v,
            None => return Ok(None),
        };
        if first.0 != self.base_offset {
            return Ok(None);
        }
        // Everything after the last entry, to the end of the file exactly.
        // Offsets past u64::MAX (a damaged index or record) fail the check.
        let Some(mut expect) = self.base_offset.checked_add(last.relative_offset) else {
            return Ok(None);
        };
        let mut max_ts = i64::MIN;
        let mut end = None;
        let mut in_order = true;
        let scan = self.scan(last.position, file_len, |pos, r| {
            if r.offset < expect || (pos == last.position && r.offset != expect) {
                in_order = false;
                return false;
            }
            let Some(next) = r.offset.checked_add(1) else {
                in_order = false;
                return false;
            };
            expect = next;
            max_ts = max_ts.max(r.timestamp_ms);
            end = Some(next);
            true
        })?;
        match (scan, end) {
            (ScanEnd::Done, Some(e)) if in_order => Ok(Some((entries, e, max_ts))),
            _ => Ok(None),
        }
    }

    /// Fdatasyncs the log, one at a time with the preallocator's (see
    /// `prealloc.rs`): after a failed one, every later one fails too.
    pub(crate) fn sync_log(&self) -> std::io::Result<()> {
        self.ahead.sync(&*self.log, false)
    }

    /// Whether the log's bytes below `to` can be made durable by writing
    /// them out and a flush of the device: they change no metadata (below
    /// the durable zeros, [`Ahead::covers`]) on a file system that overwrites
    /// in place ([`FileHandle::overwrites_in_place`]).
    pub(crate) fn writes_in_place(&self, to: u64) -> bool {
        self.ahead.covers(to) && self.log.overwrites_in_place()
    }

    /// Starts writing the log's bytes below `to` out to the device
    /// ([`FileHandle::start_write_out`]; the kernel skips clean pages).
    pub(crate) fn start_write_out(&self, to: u64) -> std::io::Result<()> {
        self.log.start_write_out(0, to)
    }

    /// Waits until the device holds the log's bytes below `to`
    /// ([`FileHandle::wait_written`]), taking its turn with the other syncs
    /// of the log as [`Segment::sync_log`] does (a failure fails every
    /// later sync of it).
    pub(crate) fn wait_written(&self, to: u64) -> std::io::Result<()> {
        self.ahead.sync_with(|| self.log.wait_written(0, to), false)
    }

    /// Flushes the device through the log ([`FileHandle::flush_device`]), as
    /// [`Segment::sync_log`] syncs it: everything written out before it,
    /// in any file on the device, is durable after it.
    pub(crate) fn flush_device_through_log(&self) -> std::io::Result<()> {
        self.ahead.sync_with(|| self.log.flush_device(), false)
    }

    /// Syncs the file system holding the log ([`FileHandle::sync_filesystem`]),
    /// as [`Segment::sync_log`] does the log.
    pub(crate) fn sync_log_filesystem(&self) -> std::io::Result<()> {
        self.ahead.sync_with(|| self.log.sync_filesystem(), false)
    }

    /// Whether the log's bytes in `[from, to)` are all zero (or there are none).
    fn all_zero(&self, from: u64, to: u64) -> Result<bool> {
        let mut buf = vec![0u8; SCAN_WINDOW_BYTES.min(to.saturating_sub(from) as usize)];
        let mut pos = from;
        while pos < to {
            let n = ((to - pos) as usize).min(buf.len());
            read_exact_at(&*self.log, &mut buf[..n], pos)?;
            if buf[..n].iter().any(|&b| b != 0) {
                return Ok(false);
            }
            pos += n as u64;
        }
        Ok(true)
    }

    /// Decodes the record at `pos`: (offset, timestamp, encoded length).
    fn read_record_at(&self, pos: u64, limit: u64) -> Result<Option<(u64, i64, usize)>> {
        let mut head = [0u8; 4];
        if pos + 4 > limit {
            return Ok(None);
        }
        read_exact_at(&*self.log, &mut head, pos)?;
        let Ok(total) = record::peek_len(&head) else {
            return Ok(None);
        };
        if pos + total as u64 > limit {
            return Ok(None);
        }
        let mut buf = vec![0u8; total];
        read_exact_at(&*self.log, &mut buf, pos)?;
        Ok(record::decode(&buf)
            .ok()
            .map(|r| (r.offset, r.timestamp_ms, r.encoded_len)))
    }

    fn scan_full(&self, file_len: u64) -> Result<FullScan> {
        let policy = index::IndexPolicy {
            interval_bytes: index::INDEX_INTERVAL_BYTES,
        };
        let mut out = FullScan {
            entries: Vec::new(),
            valid_len: 0,
            end_offset: self.base_offset,
            max_ts: i64::MIN,
            records: 0,
            error: None,
        };
        let mut expect_min = self.base_offset;
        let mut disorder = None;
        let end = self.scan(0, file_len, |at, r| {
            if r.offset < expect_min || (out.records == 0 && r.offset != self.base_offset) {
                disorder = Some((at, format!("offset {} out of order", r.offset)));
                return false;
            }
            // The last offset has no next one: no log holds it.
            let Some(next) = r.offset.checked_add(1) else {
                disorder = Some((at, format!("offset {} has no successor", r.offset)));
                return false;
            };
            if policy.wants_entry(out.entries.last().copied(), at) {
                out.entries.push(IndexEntry {
                    relative_offset: r.offset - self.base_offset,
                    position: at,
                });
            }
            expect_min = next;
            out.end_offset = next;
            out.max_ts = out.max_ts.max(r.timestamp_ms);
            out.records += 1;
            out.valid_len = at + r.encoded_len as u64;
            true
        })?;
        out.error = match end {
            ScanEnd::Bad { pos, why } => Some((pos, why)),
            ScanEnd::Stopped | ScanEnd::Done => disorder,
        };
        Ok(out)
    }

    /// Calls `f(position, record)` for every record from byte `start` below
    /// byte `limit`, in order, until it returns false. Reads in windows of
    /// [`SCAN_WINDOW_BYTES`] (a larger record is read whole). The one loop
    /// behind recovery's checks, index rebuilds and every full scan.
    fn scan(
        &self,
        start: u64,
        limit: u64,
        mut f: impl FnMut(u64, &record::RecordView<'_>) -> bool,
    ) -> Result<ScanEnd> {
        let mut pos = start;
        let mut buf = Vec::new();
        while pos < limit {
            let want = ((limit - pos) as usize).min(SCAN_WINDOW_BYTES);
            buf.resize(want, 0);
            read_exact_at(&*self.log, &mut buf, pos)?;
            let mut p = 0usize;
            while p < buf.len() {
                let at = pos + p as u64;
                match record::decode(&buf[p..]) {
                    Ok(r) => {
                        if !f(at, &r) {
                            return Ok(ScanEnd::Stopped);
                        }
                        p += r.encoded_len;
                    }
                    Err(DecodeError::Incomplete { needed }) => {
                        if at + needed as u64 > limit {
                            return Ok(ScanEnd::Bad {
                                pos: at,
                                why: format!("record of {needed} bytes runs past the end"),
                            });
                        }
                        if p > 0 {
                            break; // the next window starts with this record
                        }
                        // A record bigger than the window: read it whole.
                        buf.resize(needed, 0);
                        read_exact_at(&*self.log, &mut buf, pos)?;
                    }
                    Err(DecodeError::Corrupt(why)) => {
                        return Ok(ScanEnd::Bad {
                            pos: at,
                            why: why.to_string(),
                        })
                    }
                }
            }
            pos += p as u64;
        }
        Ok(ScanEnd::Done)
    }

    /// Whether the `.batches` file is open (so noting a batch creates no file).
    pub(crate) fn has_batches_file(&self) -> bool {
        self.batches_file.lock().file.is_some()
    }

    /// Notes produced batches just appended to this segment in its
    /// `.batches` file (created on first use). Called under the partition's
    /// write lock, after the records' write. The marks are a hint for Fetch:
    /// when they cannot be written they are dropped with a warning and the
    /// append stands.
    pub(crate) fn append_marks(&self, fs: &dyn Fs, marks: &[BatchMark]) {
        if marks.is_empty() {
            return;
        }
        let mut bytes = Vec::with_capacity(marks.len() * MARK_BYTES);
        for m in marks {
            m.encode(&mut bytes);
        }
        let mut bf = self.batches_file.lock();
        let written = (|| -> std::io::Result<()> {
            let file = match &bf.file {
                Some(f) => f.clone(),
                None => {
                    let f = match fs.create_new(&self.batches_path) {
                        Ok(f) => f,
                        // Left by an earlier life of this base offset.
                        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                            fs.open(&self.batches_path)?
                        }
                        Err(e) => return Err(e),
                    };
                    bf.file = Some(f.clone());
                    f
                }
            };
            if let Err(e) = file.write_all_at(&bytes, bf.len) {
                let _ = file.set_len(bf.len);
                return Err(e);
            }
            Ok(())
        })();
        match written {
            Ok(()) => {
                bf.len += bytes.len() as u64;
                bf.dirty = true;
                self.marks.write().extend_from_slice(marks);
            }
            Err(e) => {
                tracing::warn!(file = %self.batches_path.display(), error = %e, "produced batches not noted; fetch serves those records in es's own batches");
            }
        }
    }

    /// Loads the `.batches` file at recovery: keeps the marks the recovered
    /// log vouches for and cuts the file after them.
    fn load_marks(&self, fs: &dyn Fs) -> Result<()> {
        if !fs.exists(&self.batches_path) {
            return Ok(());
        }
        let file = fs.open(&self.batches_path)?;
        let len = file.len()?;
        // At most one batch per record, and a record takes at least
        // a length prefix and the smallest body: never read more than the log
        // can justify.
        let most = (self.valid_len() / (record::LEN_PREFIX_BYTES + record::BODY_BYTES_MIN) as u64
            + 1)
        .saturating_mul(MARK_BYTES as u64)
        .min(len);
        let mut buf = vec![0u8; most as usize];
        read_exact_at(&*file, &mut buf, 0)?;
        let (marks, used) = batch_marks::parse(&buf, self.base_offset, self.end_offset());
        if (used as u64) < len {
            file.set_len(used as u64)?;
            file.sync_data()?;
        }
        *self.marks.write() = marks;
        *self.batches_file.lock() = BatchesFile {
            file: Some(file),
            len: used as u64,
            dirty: false,
        };
        Ok(())
    }

    /// Fsyncs the `.batches` file if it was written since its last fsync.
    pub(crate) fn sync_marks(&self) -> std::io::Result<()> {
        let mut bf = self.batches_file.lock();
        if let (true, Some(f)) = (bf.dirty, &bf.file) {
            f.sync_data()?;
            bf.dirty = false;
        }
        Ok(())
    }

    /// The noted batch that holds `offset` without starting at it, if any.
    pub fn mark_covering(&self, offset: u64) -> Option<BatchMark> {
        let marks = self.marks.read();
        let i = marks.partition_point(|m| m.offset <= offset);
        let m = *marks.get(i.checked_sub(1)?)?;
        (m.offset < offset && m.last_offset() >= offset).then_some(m)
    }

    /// Up to `max` marks of batches starting at or after `offset`.
    pub fn marks_from(&self, offset: u64, max: usize) -> Vec<BatchMark> {
        let marks = self.marks.read();
        let i = marks.partition_point(|m| m.offset < offset);
        marks[i..].iter().take(max).copied().collect()
    }

    /// Bytes of valid records.
    pub fn valid_len(&self) -> u64 {
        self.valid_len.load(Ordering::Acquire)
    }

    /// Offset after the last record.
    pub fn end_offset(&self) -> u64 {
        self.end_offset.load(Ordering::Acquire)
    }

    pub fn is_empty(&self) -> bool {
        self.valid_len() == 0
    }

    /// Largest timestamp in the segment, scanning it once if only part was read
    /// at recovery. `None` for an empty segment.
    pub fn max_timestamp_ms(&self) -> Result<Option<i64>> {
        if !self.max_timestamp_exact.load(Ordering::Acquire) {
            let mut max = i64::MIN;
            self.for_each_record(self.valid_len(), |r| {
                max = max.max(r.timestamp_ms);
                true
            })?;
            self.max_timestamp_ms.fetch_max(max, Ordering::AcqRel);
            self.max_timestamp_exact.store(true, Ordering::Release);
        }
        let v = self.max_timestamp_ms.load(Ordering::Acquire);
        Ok(if v == i64::MIN && self.is_empty() {
            None
        } else {
            Some(v)
        })
    }

    /// Position to start reading for `offset`: the last index entry at or before it.
    pub fn lookup(&self, offset: u64) -> u64 {
        let rel = offset.saturating_sub(self.base_offset);
        index::lookup(&self.index.read(), rel).map_or(0, |(_, e)| e.position)
    }

    /// The last index entry at or before `offset` and its number, if any.
    pub(crate) fn lookup_entry(&self, offset: u64) -> Option<(usize, IndexEntry)> {
        let rel = offset.checked_sub(self.base_offset)?;
        index::lookup(&self.index.read(), rel)
    }

    /// Index entry number `i`.
    pub(crate) fn index_entry(&self, i: usize) -> Option<IndexEntry> {
        self.index.read().get(i).copied()
    }

    /// Reports, once per segment, an index entry that does not point at the
    /// record it names (a damaged `.index`: a read then starts from an
    /// earlier entry, and serves the same records).
    pub(crate) fn report_bad_index_entry(&self, i: usize, entry: IndexEntry, why: &str) {
        if !self.index_damage_reported.swap(true, Ordering::AcqRel) {
            tracing::error!(
                file = %self.index_path.display(),
                entry = i,
                position = i * ENTRY_BYTES,
                relative_offset = entry.relative_offset,
                log_position = entry.position,
                %why,
                "index entry does not point at its record; reads start from an earlier entry"
            );
        }
    }

    /// Last index entry, if any.
    pub(crate) fn last_index_entry(&self) -> Option<IndexEntry> {
        self.index.read().last().copied()
    }

    pub(crate) fn index_bytes(&self) -> u64 {
        self.index_bytes.load(Ordering::Acquire)
    }

    /// Records a successful append (writer only, under the partition lock).
    pub(crate) fn note_append(
        &self,
        new_len: u64,
        end_offset: u64,
        max_ts: i64,
        new_entries: &[IndexEntry],
    ) {
        if !new_entries.is_empty() {
            self.index.write().extend_from_slice(new_entries);
            self.index_bytes
                .fetch_add((new_entries.len() * ENTRY_BYTES) as u64, Ordering::AcqRel);
        }
        self.max_timestamp_ms.fetch_max(max_ts, Ordering::AcqRel);
        self.end_offset.store(end_offset, Ordering::Release);
        self.valid_len.store(new_len, Ordering::Release);
    }

    /// Cuts this segment at byte `pos`, the start of its first record at or
    /// above the cut (or its end): the log ends there, index entries at or
    /// after it and batch marks reaching `end_offset` (the offset after the
    /// last record kept) go, and all three files are fsynced. Writer only,
    /// under the partition's write lock, after the partition's marks have
    /// moved below the cut (see `partition/truncate.rs`).
    pub(crate) fn truncate_at(&self, pos: u64, end_offset: u64) -> Result<()> {
        debug_assert!(pos <= self.valid_len());
        self.ahead.cut(&*self.log, pos, false, true)?;
        self.sync_log()?;
        let keep: Vec<IndexEntry> = self
            .index
            .read()
            .iter()
            .take_while(|e| e.position < pos)
            .copied()
            .collect();
        let index_len = (keep.len() * ENTRY_BYTES) as u64;
        self.index_file.set_len(index_len)?;
        self.index_file.sync_data()?;
        self.index_bytes.store(index_len, Ordering::Release);
        *self.index.write() = keep;
        {
            let mut marks = self.marks.write();
            marks.retain(|m| m.last_offset() < end_offset);
            let mut bf = self.batches_file.lock();
            let len = (marks.len() * MARK_BYTES) as u64;
            if let Some(f) = &bf.file {
                if bf.len > len {
                    f.set_len(len)?;
                }
                f.sync_data()?;
            }
            bf.len = len;
            bf.dirty = false;
        }
        self.end_offset.store(end_offset, Ordering::Release);
        self.valid_len.store(pos, Ordering::Release);
        // Recomputed from what is left when next asked.
        self.max_timestamp_ms.store(i64::MIN, Ordering::Release);
        self.max_timestamp_exact.store(false, Ordering::Release);
        Ok(())
    }

    /// Calls `f` for every record below byte `limit`, in order, until it returns
    /// false. Reads in windows of [`SCAN_WINDOW_BYTES`].
    pub fn for_each_record(
        &self,
        limit: u64,
        f: impl FnMut(&record::RecordView<'_>) -> bool,
    ) -> Result<()> {
        self.for_each_record_from(0, limit, f)
    }

    /// [`Segment::for_each_record`] from byte position `start`, which must be
    /// a record's start (0, or an index entry's position).
    pub fn for_each_record_from(
        &self,
        start: u64,
        limit: u64,
        mut f: impl FnMut(&record::RecordView<'_>) -> bool,
    ) -> Result<()> {
        match self.scan(start, limit, |_, r| f(r))? {
            ScanEnd::Bad { pos, why } => Err(self.corrupt(pos, &why)),
            ScanEnd::Done | ScanEnd::Stopped => Ok(()),
        }
    }

    pub(crate) fn corrupt(&self, position: u64, why: &str) -> StorageError {
        StorageError::Corrupt {
            file: self.log_path.display().to_string(),
            position,
            why: why.to_string(),
        }
    }
}

/// How a scan ended.
enum ScanEnd {
    /// Every record up to the limit was visited.
    Done,
    /// The callback asked to stop.
    Stopped,
    /// A record that does not decode, at `pos`.
    Bad { pos: u64, why: String },
}

struct FullScan {
    entries: Vec<IndexEntry>,
    valid_len: u64,
    end_offset: u64,
    max_ts: i64,
    records: u64,
    error: Option<(u64, String)>,
}

/// Reads exactly `buf.len()` bytes at `pos`; a short file is an error.
pub fn read_exact_at(f: &dyn FileHandle, buf: &mut [u8], pos: u64) -> Result<()> {
    let mut done = 0usize;
    while done < buf.len() {
        let n = f.read_at(&mut buf[done..], pos + done as u64)?;
        if n == 0 {
            return Err(StorageError::Io(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "file shorter than expected",
            )));
        }
        done += n;
    }
    Ok(())
}
