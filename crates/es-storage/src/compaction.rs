//! Retention, compaction, DeleteRecords and the safe replacement of segments.
//!
//! Retention deletes the oldest sealed segments (by age, by size, or wholly
//! below the log start offset), copying each to cold storage first when asked.
//! Compaction keeps the newest record of each key (and every record without
//! a key) across the sealed segments, at its original offset, in two
//! streaming passes: the first remembers each key's newest offset, the second
//! copies the survivors into new segments. Aborted transactional records
//! go, and so, after the delete horizon, do tombstones and the transaction
//! markers whose records are gone. The active segment is never touched by
//! either.
//!
//! Compaction replaces segments in four steps, as the storage document says:
//! 1. write the result to `*.cleaned` files and fsync them;
//! 2. under the partition's write lock, check the sealed segments are exactly
//!    the ones that were read (else cancel);
//! 3. write `compaction.marker` (the plan) atomically;
//! 4. rename the results into place, delete the replaced segments, fsync the
//!    directory, remove the marker, publish the new segment list.
//!
//! A compaction reports where its scans are, every mebibyte read and at each
//! segment's end, to the callback of [`Partition::compact_reporting`]
//! ([`CompactionProgress`]); the broker turns that into its progress lines
//! and `es_compaction_pass_*` gauges.
//!
//! [`recover_swap`] runs at every open: with a marker it finishes the plan,
//! without one it deletes stray `*.cleaned` files, so the new segments and
//! the ones they replace never coexist.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::{Result, StorageError};
use crate::fs::Fs;
use crate::index::{IndexEntry, IndexPolicy};
use crate::meta;
use crate::partition::Partition;
use crate::record::RecordView;
use crate::segment::{self, Segment, BATCHES_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX};

/// Per-partition state kept beside the segments, replaced atomically.
pub const STATE_FILE: &str = "partition.json";
/// The plan of a segment swap in progress.
pub const MARKER_FILE: &str = "compaction.marker";
/// Suffix of compaction output before the swap.
pub const CLEANED_SUFFIX: &str = ".cleaned";

/// Durable partition state besides the segments.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct PartitionState {
    /// Moved by DeleteRecords and retention; absent = first segment's base.
    #[serde(default)]
    pub log_start_offset: Option<u64>,
    /// Offset up to which the log has been compacted.
    #[serde(default)]
    pub cleaned_up_to: Option<u64>,
    /// When tombstones may go: `(end offset, horizon ms)` pairs, ascending
    /// by offset, one per compaction pass that moved `cleaned_up_to`. A
    /// tombstone below `end` (and not below the previous pair's end) was
    /// first cleaned by that pass and is dropped only once `horizon` (the
    /// pass's time plus `delete.retention.ms`) has passed: Kafka's delete
    /// horizon, set when the cleaner first sees a tombstone.
    #[serde(default)]
    pub tombstone_horizons: Vec<(u64, i64)>,
}

/// At most this many tombstone horizons are kept; beyond it the two oldest
/// merge, keeping the later horizon (tombstones stay longer, never less).
const TOMBSTONE_HORIZONS_MAX: usize = 1024;

impl PartitionState {
    /// The horizon of a tombstone at `offset` below `cleaned_up_to`; `None`
    /// when no pass recorded one (data compacted before horizons were kept,
    /// or a range whose horizon a pass has already applied).
    fn tombstone_horizon(&self, offset: u64) -> Option<i64> {
        let i = self
            .tombstone_horizons
            .partition_point(|&(end, _)| end <= offset);
        self.tombstone_horizons.get(i).map(|&(_, h)| h)
    }

    /// Whether tombstones below `cleaned_up_to` have reached their horizon:
    /// a pass is due for them whatever the dirty ratio (Kafka's cleaner picks
    /// such logs too, KAFKA-8522).
    fn tombstones_due(&self, now_ms: i64) -> bool {
        let cleaned = self.cleaned_up_to.unwrap_or(0);
        self.tombstone_horizons
            .iter()
            .any(|&(end, h)| h <= now_ms && end <= cleaned)
    }

    /// Notes that a pass at `now_ms` compacted the log up to `cleaned_to`:
    /// the horizons it applied are done, and the tombstones it kept seeing
    /// them for the first time (`new_tombstones`) get theirs.
    fn note_cleaned(
        &mut self,
        cleaned_to: u64,
        now_ms: i64,
        delete_retention_ms: i64,
        new_tombstones: bool,
    ) {
        let before = self.cleaned_up_to.unwrap_or(0);
        self.cleaned_up_to = Some(cleaned_to);
        // This pass dropped every tombstone whose horizon had passed.
        self.tombstone_horizons
            .retain(|&(end, h)| h > now_ms || end > cleaned_to);
        if cleaned_to > before && new_tombstones {
            self.tombstone_horizons
                .push((cleaned_to, now_ms.saturating_add(delete_retention_ms)));
        }
        let hs = &mut self.tombstone_horizons;
        while hs.len() > TOMBSTONE_HORIZONS_MAX {
            let (_, h0) = hs.remove(0);
            hs[0].1 = hs[0].1.max(h0);
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct SwapPlan {
    replace: Vec<u64>,
    with: Vec<u64>,
}

fn seg_path(dir: &Path, base: u64, suffix: &str) -> PathBuf {
    dir.join(format!("{}{suffix}", segment::file_stem(base)))
}

fn cleaned_path(dir: &Path, base: u64, suffix: &str) -> PathBuf {
    dir.join(format!(
        "{}{suffix}{CLEANED_SUFFIX}",
        segment::file_stem(base)
    ))
}

/// Finishes or rolls back a segment swap interrupted by a crash.
pub fn recover_swap(fs: &dyn Fs, dir: &Path) -> Result<()> {
    let marker = dir.join(MARKER_FILE);
    if fs.exists(&marker) {
        let plan: SwapPlan = meta::read_json(fs, &marker)?
            .ok_or_else(|| StorageError::Invalid("marker vanished".into()))?;
        tracing::warn!(dir = %dir.display(), replace = ?plan.replace, with = ?plan.with, "finishing an interrupted segment swap");
        finish_swap(fs, dir, &plan)?;
    }
    let mut removed = false;
    for name in fs.list(dir)? {
        if name.ends_with(CLEANED_SUFFIX) {
            fs.remove_file(&dir.join(&name))?;
            removed = true;
        }
    }
    meta::remove_temp_files(fs, dir)?;
    if removed {
        fs.sync_dir(dir)?;
    }
    Ok(())
}

/// Step 4 of a swap (also run by recovery): idempotent.
fn finish_swap(fs: &dyn Fs, dir: &Path, plan: &SwapPlan) -> Result<()> {
    // The replaced segments' batch notes describe batches compaction may
    // have thinned: the new segments start without any (Fetch serves their
    // records in es's own batches). First, so that no note outlives its
    // segment whatever step a crash interrupts.
    for &b in &plan.replace {
        let p = seg_path(dir, b, BATCHES_SUFFIX);
        if fs.exists(&p) {
            fs.remove_file(&p)?;
        }
    }
    for &b in &plan.with {
        for suffix in [LOG_SUFFIX, INDEX_SUFFIX] {
            let c = cleaned_path(dir, b, suffix);
            if fs.exists(&c) {
                fs.rename(&c, &seg_path(dir, b, suffix))?;
            }
        }
    }
    fs.sync_dir(dir)?;
    for &b in &plan.replace {
        if plan.with.contains(&b) {
            continue;
        }
        for suffix in [LOG_SUFFIX, INDEX_SUFFIX] {
            let p = seg_path(dir, b, suffix);
            if fs.exists(&p) {
                fs.remove_file(&p)?;
            }
        }
    }
    fs.sync_dir(dir)?;
    fs.remove_file(&dir.join(MARKER_FILE))?;
    fs.sync_dir(dir)?;
    Ok(())
}

/// Retention settings of a partition (Kafka's topic configs).
#[derive(Clone, Debug, Default)]
pub struct RetentionPolicy {
    /// `retention.ms`; `None` (Kafka's -1) = keep forever.
    pub retention_ms: Option<i64>,
    /// `retention.bytes`; `None` (Kafka's -1) = no size limit.
    pub retention_bytes: Option<u64>,
    /// With `--cold-storage-dir`: the directory this partition's segments are
    /// copied to (and fsynced) before they are deleted.
    pub cold_dir: Option<PathBuf>,
}

/// What a retention pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RetentionReport {
    pub deleted_segments: Vec<u64>,
    pub deleted_bytes: u64,
    pub log_start_offset: u64,
    /// A cold copy failed; the segment stays and is retried next pass.
    pub cold_copy_failed: bool,
}

/// Compaction settings (Kafka's topic configs).
#[derive(Clone, Debug)]
pub struct CompactionPolicy {
    /// `delete.retention.ms`: how long a tombstone is kept.
    pub delete_retention_ms: i64,
    /// `min.cleanable.dirty.ratio`.
    pub min_cleanable_dirty_ratio: f64,
    /// `min.compaction.lag.ms`: a segment holding a record younger than this
    /// (by its timestamp) is not compacted, nor any after it.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: a dirty segment whose first record is older
    /// than this is compacted whatever the dirty ratio (Kafka's KIP-354).
    pub max_compaction_lag_ms: i64,
    /// Records at or above this offset are not compacted (the last stable
    /// offset: open transactions are never cleaned).
    pub stable_offset: u64,
    /// Classifies a control record: `Some(true)` aborts its producer's open
    /// transaction, `Some(false)` commits it, `None` is neither.
    pub control_kind: fn(&RecordView<'_>) -> Option<bool>,
}

impl Default for CompactionPolicy {
    fn default() -> Self {
        CompactionPolicy {
            delete_retention_ms: 24 * 3600 * 1000,
            min_cleanable_dirty_ratio: 0.5,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            stable_offset: u64::MAX,
            control_kind: |_| None,
        }
    }
}

/// What a compaction pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompactionReport {
    /// Why nothing was rewritten, if nothing was.
    pub skipped: Option<&'static str>,
    pub records_read: u64,
    pub records_dropped: u64,
    pub segments_replaced: usize,
    pub segments_written: usize,
}

/// How many times a compaction reads every sealed segment it covers: the
/// transactions, each key's newest offset, the records to drop, and (when
/// something goes) the copy of the survivors.
pub const COMPACTION_SCANS: u64 = 4;

/// Bytes read between two progress reports inside a segment (and at the
/// end of each segment of each scan).
const PROGRESS_STEP_BYTES: u64 = segment::SCAN_WINDOW_BYTES as u64;

/// Where one partition's compaction is, as [`Partition::compact_reporting`]
/// reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompactionProgress {
    /// Bytes of sealed segments its scans have read so far.
    pub bytes_read: u64,
    /// Bytes its scans read in all: [`COMPACTION_SCANS`] times the sealed
    /// segments it covers (a compaction with nothing to drop ends after
    /// three scans; its last report then says `bytes_total` read).
    pub bytes_total: u64,
}

/// Counts the bytes the scans read and reports every
/// [`PROGRESS_STEP_BYTES`] and at each segment's end.
struct Tracker<'a> {
    report: &'a mut dyn FnMut(CompactionProgress),
    read: u64,
    total: u64,
    reported: u64,
}

impl Tracker<'_> {
    fn report(&mut self) {
        self.reported = self.read;
        (self.report)(CompactionProgress {
            bytes_read: self.read.min(self.total),
            bytes_total: self.total,
        });
    }

    /// One record of `n` bytes read.
    fn advance(&mut self, n: u64) {
        self.read = self.read.saturating_add(n);
        if self.read.saturating_sub(self.reported) >= PROGRESS_STEP_BYTES {
            self.report();
        }
    }

    /// A segment read whole: `read` is where it ends, whatever its records
    /// summed to.
    fn segment_done(&mut self, read: u64) {
        self.read = read;
        self.report();
    }

    /// The scans are over.
    fn finish(&mut self) {
        self.read = self.total;
        self.report();
    }

    /// Runs `f` over every record of `sealed`, counting what it reads.
    fn scan(
        &mut self,
        sealed: &[Arc<Segment>],
        mut f: impl FnMut(&RecordView<'_>) -> bool,
    ) -> Result<()> {
        for s in sealed {
            let end = self.read.saturating_add(s.valid_len());
            s.for_each_record(s.valid_len(), |r| {
                self.advance(r.encoded_len as u64);
                f(r)
            })?;
            self.segment_done(end);
        }
        Ok(())
    }
}

impl Partition {
    fn load_state(&self) -> Result<PartitionState> {
        Ok(meta::read_json(self.fs(), &self.dir().join(STATE_FILE))?.unwrap_or_default())
    }

    fn store_state(&self, st: &PartitionState) -> Result<()> {
        meta::write_json(self.fs(), &self.dir().join(STATE_FILE), st)
    }

    /// Kafka's DeleteRecords: moves the log start offset to `offset`
    /// durably. Returns the new low watermark.
    pub fn delete_records_before(&self, offset: u64) -> Result<u64> {
        let w = self.lock_writer()?;
        let hw = self.high_watermark();
        let start = self.log_start_offset();
        if offset > hw {
            return Err(StorageError::OffsetOutOfRange {
                offset,
                log_start: start,
                log_end: hw,
            });
        }
        if offset <= start {
            return Ok(start);
        }
        let mut st = self.load_state()?;
        st.log_start_offset = Some(offset);
        self.store_state(&st)?;
        self.set_log_start_offset(&w, offset);
        self.epochs_start_moved(&w, offset)?;
        tracing::info!(partition = %self.name(), log_start_offset = offset, "records deleted");
        Ok(offset)
    }

    /// One retention pass: deletes the oldest sealed segments that are wholly
    /// below the log start offset, older than `retention_ms`, or over
    /// `retention_bytes`. The active segment is never deleted.
    pub fn enforce_retention(
        &self,
        policy: &RetentionPolicy,
        now_ms: i64,
    ) -> Result<RetentionReport> {
        let segs = self.segments();
        let log_start = self.log_start_offset();
        let total: u64 = segs.iter().map(|s| s.valid_len()).sum();
        let mut excess = policy.retention_bytes.map(|b| total.saturating_sub(b));
        let mut doomed: Vec<Arc<Segment>> = Vec::new();
        for (i, seg) in segs.iter().enumerate().take(segs.len().saturating_sub(1)) {
            let next_base = segs[i + 1].base_offset;
            let below_start = next_base <= log_start;
            let too_old = match policy.retention_ms {
                Some(ms) => seg
                    .max_timestamp_ms()?
                    .is_none_or(|m| m < now_ms.saturating_sub(ms)),
                None => false,
            };
            let too_big = match excess {
                Some(x) => x >= seg.valid_len() && x > 0,
                None => false,
            };
            if !(below_start || too_old || too_big) {
                break;
            }
            if let Some(x) = excess.as_mut() {
                *x = x.saturating_sub(seg.valid_len());
            }
            doomed.push(seg.clone());
        }
        let mut report = RetentionReport {
            log_start_offset: log_start,
            ..RetentionReport::default()
        };
        if doomed.is_empty() {
            return Ok(report);
        }
        // Cold copies first, outside the write lock; a failure keeps that
        // segment and everything after it.
        if let Some(cold) = &policy.cold_dir {
            let mut ok = 0;
            for seg in &doomed {
                match self.copy_cold(seg, cold) {
                    Ok(()) => ok += 1,
                    Err(e) => {
                        tracing::warn!(partition = %self.name(), segment = seg.base_offset, error = %e, "cold copy failed; segment kept, retried next pass");
                        report.cold_copy_failed = true;
                        break;
                    }
                }
            }
            doomed.truncate(ok);
            if doomed.is_empty() {
                return Ok(report);
            }
        }
        let w = self.lock_writer()?;
        let set = self.segment_set();
        if !set.starts_with_sealed(&doomed) {
            return Ok(report); // the list changed (compaction); next pass
        }
        let now = set.snapshot();
        let new_start = now[doomed.len()].base_offset.max(self.log_start_offset());
        let mut st = self.load_state()?;
        st.log_start_offset = Some(new_start);
        self.store_state(&st)?;
        self.set_log_start_offset(&w, new_start);
        // Under the writer lock the list is still the one checked above.
        if set.remove_prefix(&doomed).is_err() {
            return Err(StorageError::Invalid(
                "segment list changed under the writer lock".into(),
            ));
        }
        for seg in &doomed {
            self.fs().remove_file(&seg.log_path)?;
            self.fs().remove_file(&seg.index_path)?;
            // Names gone: their space is freed gradually once readers are done.
            self.reclaim_segments([seg]);
            if self.fs().exists(&seg.batches_path) {
                self.fs().remove_file(&seg.batches_path)?;
            }
            report.deleted_segments.push(seg.base_offset);
            report.deleted_bytes += seg.valid_len();
        }
        self.fs().sync_dir(self.dir())?;
        self.epochs_start_moved(&w, new_start)?;
        report.log_start_offset = new_start;
        tracing::info!(partition = %self.name(), segments = ?report.deleted_segments, bytes = report.deleted_bytes, log_start_offset = new_start, "retention deleted segments");
        Ok(report)
    }

    fn copy_cold(&self, seg: &Segment, cold: &Path) -> Result<()> {
        crate::fs::create_dir_durable(self.fs(), cold)?;
        let mut files = vec![
            (seg.log.clone(), &seg.log_path),
            (seg.index_file.clone(), &seg.index_path),
        ];
        // The produced-batch notes go along, so that the copy, put back,
        // serves compressed batches as they were produced. A sealed
        // segment's notes no longer change.
        if self.fs().exists(&seg.batches_path) {
            files.push((self.fs().open(&seg.batches_path)?, &seg.batches_path));
        }
        for (src, path) in files {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let dst = cold.join(&name);
            if self.fs().exists(&dst) {
                self.fs().remove_file(&dst)?;
            }
            let out = self.fs().create_new(&dst)?;
            let len = src.len()?;
            let mut pos = 0u64;
            let mut buf = vec![0u8; segment::SCAN_WINDOW_BYTES];
            while pos < len {
                let n = ((len - pos) as usize).min(buf.len());
                segment::read_exact_at(&*src, &mut buf[..n], pos)?;
                out.write_all_at(&buf[..n], pos)?;
                pos += n as u64;
            }
            out.sync_data()?;
        }
        self.fs().sync_dir(cold)?;
        Ok(())
    }

    /// One compaction pass over the sealed segments below the stable offset.
    pub fn compact(&self, policy: &CompactionPolicy, now_ms: i64) -> Result<CompactionReport> {
        self.compact_reporting(policy, now_ms, &mut |_| {})
    }

    /// [`Partition::compact`], calling `progress` as its scans read the
    /// sealed segments: every [`PROGRESS_STEP_BYTES`] and at the end of each
    /// segment, and once more when the scans are over (with everything
    /// read). Not called when the pass is skipped before reading.
    pub fn compact_reporting(
        &self,
        policy: &CompactionPolicy,
        now_ms: i64,
        progress: &mut dyn FnMut(CompactionProgress),
    ) -> Result<CompactionReport> {
        let mut report = CompactionReport::default();
        // The last roll sealed first: the segments before the active one
        // then end at their last record (zeros written ahead cut).
        self.finish_roll()?;
        let all = self.segments();
        let sealed: Vec<Arc<Segment>> = all[..all.len().saturating_sub(1)]
            .iter()
            .filter(|s| s.end_offset() <= policy.stable_offset)
            .cloned()
            .collect();
        // Only a prefix of the sealed segments: stop at the first one not below the stable offset.
        let sealed: Vec<Arc<Segment>> = sealed
            .iter()
            .zip(all.iter())
            .take_while(|(a, b)| Arc::ptr_eq(a, b))
            .map(|(a, _)| a.clone())
            .collect();
        if sealed.is_empty() {
            report.skipped = Some("no sealed segments");
            return Ok(report);
        }
        // min.compaction.lag.ms: stop at the first segment with a record
        // younger than the lag (Kafka's first uncleanable offset).
        let sealed = if policy.min_compaction_lag_ms > 0 {
            let horizon = now_ms.saturating_sub(policy.min_compaction_lag_ms);
            let mut keep = Vec::with_capacity(sealed.len());
            for s in sealed {
                if s.max_timestamp_ms()?.is_some_and(|ts| ts > horizon) {
                    break;
                }
                keep.push(s);
            }
            keep
        } else {
            sealed
        };
        if sealed.is_empty() {
            report.skipped = Some("every sealed segment is within min.compaction.lag.ms");
            return Ok(report);
        }
        let mut st = self.load_state()?;
        let total: u64 = sealed.iter().map(|s| s.valid_len()).sum();
        let cleaned_to = st.cleaned_up_to.unwrap_or(0);
        let dirty: u64 = sealed
            .iter()
            .filter(|s| s.base_offset >= cleaned_to)
            .map(|s| s.valid_len())
            .sum();
        // max.compaction.lag.ms: dirty records that old are compacted now.
        let overdue = match sealed.iter().find(|s| s.base_offset >= cleaned_to) {
            Some(first_dirty) if policy.max_compaction_lag_ms < i64::MAX => {
                let mut first_ts = None;
                first_dirty.for_each_record(first_dirty.valid_len(), |r| {
                    first_ts = Some(r.timestamp_ms);
                    false
                })?;
                first_ts.is_some_and(|ts| now_ms.saturating_sub(ts) > policy.max_compaction_lag_ms)
            }
            _ => false,
        };
        let due = overdue || st.tombstones_due(now_ms);
        if total == 0 || (!due && (dirty as f64 / total as f64) < policy.min_cleanable_dirty_ratio)
        {
            report.skipped = Some("dirty ratio below min.cleanable.dirty.ratio");
            return Ok(report);
        }
        // An unreadable tail (found at recovery) aborts: compaction would lose it.
        for s in &sealed {
            if s.log.len()? != s.valid_len() {
                return Err(s.corrupt(s.valid_len(), "unreadable record; compaction aborted"));
            }
        }
        let log_start = self.log_start_offset();
        let mut tracker = Tracker {
            report: progress,
            read: 0,
            total: total.saturating_mul(COMPACTION_SCANS),
            reported: 0,
        };
        // Pass 1: aborted transactions, transaction markers left without
        // records, then each key's newest offset.
        let mut open_txn: HashMap<i64, u64> = HashMap::new();
        let mut aborted: HashMap<i64, Vec<(u64, u64)>> = HashMap::new();
        // Commit and abort markers none of whose transaction's records are
        // left (an earlier pass dropped them, or there were none), and each
        // producer's last marker.
        let mut bare_markers: HashSet<u64> = HashSet::new();
        let mut bare_aborts: HashSet<(i64, u64)> = HashSet::new();
        let mut last_marker: HashMap<i64, u64> = HashMap::new();
        tracker.scan(&sealed, |r| {
            if let Some(p) = r.meta.producer {
                if r.meta.control {
                    let start = open_txn.remove(&p.producer_id);
                    let kind = (policy.control_kind)(r);
                    last_marker.insert(p.producer_id, r.offset);
                    match (start, kind) {
                        (Some(start), Some(true)) => aborted
                            .entry(p.producer_id)
                            .or_default()
                            .push((start, r.offset)),
                        (None, Some(abort)) => {
                            bare_markers.insert(r.offset);
                            if abort {
                                bare_aborts.insert((p.producer_id, r.offset));
                            }
                        }
                        _ => {}
                    }
                } else if r.meta.transactional {
                    open_txn.entry(p.producer_id).or_insert(r.offset);
                }
            }
            true
        })?;
        // An aborted transaction without records needs no entry in the
        // list read_committed consumers filter by: a consumer given one
        // skips the producer's records after it until it reads the abort
        // marker, which may go below. Dropped (and the producer snapshot
        // rewritten) before any marker can go.
        if !bare_aborts.is_empty() {
            self.forget_aborted(&bare_aborts)?;
        }
        let is_aborted = |r: &RecordView<'_>| -> bool {
            match r.meta.producer {
                Some(p) if r.meta.transactional && !r.meta.control => aborted
                    .get(&p.producer_id)
                    .is_some_and(|v| v.iter().any(|&(a, b)| a <= r.offset && r.offset < b)),
                _ => false,
            }
        };
        let is_open = |r: &RecordView<'_>| -> bool {
            match r.meta.producer {
                Some(p) if r.meta.transactional && !r.meta.control => {
                    open_txn.get(&p.producer_id).is_some_and(|&s| r.offset >= s)
                }
                _ => false,
            }
        };
        let mut newest: HashMap<Vec<u8>, u64> = HashMap::new();
        tracker.scan(&sealed, |r| {
            report.records_read += 1;
            if let Some(k) = r.key {
                if !r.meta.control && !is_aborted(r) && !is_open(r) {
                    match newest.get_mut(k) {
                        Some(o) => *o = r.offset,
                        None => {
                            newest.insert(k.to_vec(), r.offset);
                        }
                    }
                }
            }
            true
        })?;
        let survives = |r: &RecordView<'_>| -> bool {
            if r.offset < log_start {
                return false;
            }
            if r.meta.control {
                // A commit or abort marker goes once none of its
                // transaction's records are left, as a tombstone does:
                // not on the pass that first compacts it, and only after
                // its delete horizon. A producer's last marker stays (its
                // epoch for a recovery that replays the log; Kafka's cleaner
                // keeps each active producer's last batch for that).
                if !bare_markers.contains(&r.offset)
                    || r.offset >= cleaned_to
                    || r.meta
                        .producer
                        .and_then(|p| last_marker.get(&p.producer_id))
                        == Some(&r.offset)
                {
                    return true;
                }
                return match st.tombstone_horizon(r.offset) {
                    Some(horizon) => now_ms < horizon,
                    None => now_ms.saturating_sub(r.timestamp_ms) <= policy.delete_retention_ms,
                };
            }
            if is_aborted(r) {
                return false;
            }
            if is_open(r) {
                return true;
            }
            match r.key {
                None => true,
                Some(k) => {
                    if newest.get(k) != Some(&r.offset) {
                        return false;
                    }
                    // A tombstone is itself dropped once it has been
                    // cleaned before and delete.retention.ms has passed
                    // since (Kafka's delete horizon). Never on its first
                    // pass, so a consumer reading from the start has that
                    // long to see it.
                    if r.value.is_some() || r.offset >= cleaned_to {
                        return true;
                    }
                    match st.tombstone_horizon(r.offset) {
                        Some(horizon) => now_ms < horizon,
                        // Compacted before horizons were kept: by its age.
                        None => now_ms.saturating_sub(r.timestamp_ms) <= policy.delete_retention_ms,
                    }
                }
            }
        };
        let mut drops = 0u64;
        let mut new_tombstones = false;
        tracker.scan(&sealed, |r| {
            if !survives(r) {
                drops += 1;
            } else if (r.meta.control || (r.value.is_none() && r.key.is_some()))
                && r.offset >= cleaned_to
            {
                // A tombstone or marker seen for the first time: this
                // pass sets its delete horizon.
                new_tombstones = true;
            }
            true
        })?;
        let new_cleaned = sealed.last().map_or(0, |s| s.end_offset());
        if drops == 0 {
            report.skipped = Some("nothing to drop");
            st.note_cleaned(
                new_cleaned,
                now_ms,
                policy.delete_retention_ms,
                new_tombstones,
            );
            self.store_state(&st)?;
            tracker.finish();
            return Ok(report);
        }
        report.records_dropped = drops;
        // Pass 2: copy the survivors into new segments (step 1).
        let outputs = match self.write_survivors(&sealed, &survives, &mut tracker) {
            Ok(o) => o,
            Err(e) => {
                let _ = recover_swap(self.fs(), self.dir());
                return Err(e);
            }
        };
        // Step 2: under the write lock, nothing moved.
        let w = self.lock_writer()?;
        let unchanged = self.segment_set().is(&all) && self.log_start_offset() == log_start;
        if !unchanged {
            drop(w);
            for o in &outputs {
                let _ = self
                    .fs()
                    .remove_file(&cleaned_path(self.dir(), o.base_offset, LOG_SUFFIX));
                let _ =
                    self.fs()
                        .remove_file(&cleaned_path(self.dir(), o.base_offset, INDEX_SUFFIX));
            }
            report.skipped = Some("segments changed during the pass; swap cancelled");
            report.records_dropped = 0;
            tracker.finish();
            return Ok(report);
        }
        // The log start stays where it is: a partition without a recorded
        // log start starts at its first segment's base after a restart, and
        // the first output segment is named after its first surviving
        // record, so a pass that dropped the first records would move the
        // log start up at the next open (a fetch from below it, a consumer's
        // committed offset in the dropped range, would then be out of range
        // instead of served from the next record, and recovery would not
        // give the state the partition had). Recorded before the swap.
        let first_base = match outputs.first() {
            Some(o) => o.base_offset,
            None => all.get(sealed.len()).map_or(u64::MAX, |s| s.base_offset),
        };
        if st.log_start_offset.is_none() && first_base > log_start {
            st.log_start_offset = Some(log_start);
            self.store_state(&st)?;
        }
        // Step 3: the plan, durable.
        let plan = SwapPlan {
            replace: sealed.iter().map(|s| s.base_offset).collect(),
            with: outputs.iter().map(|o| o.base_offset).collect(),
        };
        // Step 4: swap, delete, fsync, publish. A failure from here on
        // leaves the disk part way through the swap (the marker may be on
        // it, durable or not) while the segment list in memory is the old
        // one: the partition is fenced until a restart finishes the swap or
        // rolls it back from what the disk holds. Going on would let
        // retention or another pass delete, by name, files that now hold
        // the new segments; and the `*.cleaned` files must stay, or a
        // durable marker's plan would delete the replaced segments with
        // nothing to replace them.
        let swapped = meta::write_json(self.fs(), &self.dir().join(MARKER_FILE), &plan)
            .and_then(|()| finish_swap(self.fs(), self.dir(), &plan));
        if let Err(e) = swapped {
            self.fence(format!("segment swap failed part way: {e}"));
            return Err(e);
        }
        // The replaced segments' names are gone (deleted, or renamed over):
        // their space is freed gradually once readers are done with them.
        self.reclaim_segments(sealed.iter());
        let written: Vec<Arc<Segment>> = outputs.into_iter().map(Arc::new).collect();
        report.segments_replaced = sealed.len();
        report.segments_written = written.len();
        // Under the writer lock the list is still the one checked above.
        if self.segment_set().swap_sealed(&sealed, written).is_err() {
            return Err(StorageError::Invalid(
                "segment list changed under the writer lock".into(),
            ));
        }
        drop(w);
        st.note_cleaned(
            new_cleaned,
            now_ms,
            policy.delete_retention_ms,
            new_tombstones,
        );
        self.store_state(&st)?;
        tracker.finish();
        tracing::info!(partition = %self.name(), read = report.records_read, dropped = report.records_dropped, replaced = report.segments_replaced, written = report.segments_written, "compacted");
        Ok(report)
    }

    /// Writes surviving records of `sealed` to `*.cleaned` files, rolling at
    /// `segment_bytes`; fsyncs them. Returns the new segments (final names).
    fn write_survivors(
        &self,
        sealed: &[Arc<Segment>],
        survives: &dyn Fn(&RecordView<'_>) -> bool,
        tracker: &mut Tracker<'_>,
    ) -> Result<Vec<Segment>> {
        let cfg = self.config();
        let policy = IndexPolicy {
            interval_bytes: cfg.index_interval_bytes,
        };
        let mut outs: Vec<Segment> = Vec::new();
        struct Cur {
            base: u64,
            log: Arc<dyn crate::fs::FileHandle>,
            index: Arc<dyn crate::fs::FileHandle>,
            buf: Vec<u8>,
            written: u64,
            entries: Vec<IndexEntry>,
            end: u64,
            max_ts: i64,
        }
        let finish = |c: Cur, outs: &mut Vec<Segment>, fs: &dyn Fs, dir: &Path| -> Result<()> {
            c.log.write_all_at(&c.buf, c.written)?;
            let len = c.written + c.buf.len() as u64;
            let mut ib = Vec::new();
            for e in &c.entries {
                e.encode(&mut ib);
            }
            c.index.write_all_at(&ib, 0)?;
            c.log.sync_data()?;
            c.index.sync_data()?;
            let _ = fs;
            outs.push(Segment::from_written(
                c.base,
                seg_path(dir, c.base, LOG_SUFFIX),
                seg_path(dir, c.base, INDEX_SUFFIX),
                c.log,
                c.index,
                len,
                c.end,
                c.max_ts,
                c.entries,
            ));
            Ok(())
        };
        let mut cur: Option<Cur> = None;
        let mut err: Option<StorageError> = None;
        for s in sealed {
            let end = tracker.read.saturating_add(s.valid_len());
            s.for_each_record(s.valid_len(), |r| {
                tracker.advance(r.encoded_len as u64);
                if !survives(r) {
                    return true;
                }
                let raw_len = r.encoded_len as u64;
                let need_new = match &cur {
                    None => true,
                    Some(c) => {
                        c.written + c.buf.len() as u64 + raw_len > cfg.segment_bytes
                            && c.written + c.buf.len() as u64 > 0
                    }
                };
                if need_new {
                    if let Some(c) = cur.take() {
                        if let Err(e) = finish(c, &mut outs, self.fs(), self.dir()) {
                            err = Some(e);
                            return false;
                        }
                    }
                    let mk = || -> Result<Cur> {
                        let log_path = cleaned_path(self.dir(), r.offset, LOG_SUFFIX);
                        let index_path = cleaned_path(self.dir(), r.offset, INDEX_SUFFIX);
                        // Left by a pass that failed and could not clean up
                        // (without a marker: no swap of it can happen).
                        for p in [&log_path, &index_path] {
                            if self.fs().exists(p) {
                                self.fs().remove_file(p)?;
                            }
                        }
                        let log = self.fs().create_new(&log_path)?;
                        let index = self.fs().create_new(&index_path)?;
                        Ok(Cur {
                            base: r.offset,
                            log,
                            index,
                            buf: Vec::new(),
                            written: 0,
                            entries: Vec::new(),
                            end: r.offset,
                            max_ts: i64::MIN,
                        })
                    };
                    match mk() {
                        Ok(c) => cur = Some(c),
                        Err(e) => {
                            err = Some(e);
                            return false;
                        }
                    }
                }
                let Some(c) = cur.as_mut() else { return false };
                let at = c.written + c.buf.len() as u64;
                if policy.wants_entry(c.entries.last().copied(), at) {
                    c.entries.push(IndexEntry {
                        relative_offset: r.offset - c.base,
                        position: at,
                    });
                }
                // Re-encode from the view: the same bytes, CRC included.
                let start = c.buf.len();
                crate::record::encode(
                    &mut c.buf,
                    r.offset,
                    r.timestamp_ms,
                    r.key,
                    r.value,
                    r.headers(),
                    &r.meta,
                );
                debug_assert_eq!(c.buf.len() - start, r.encoded_len);
                c.end = r.offset + 1;
                c.max_ts = c.max_ts.max(r.timestamp_ms);
                if c.buf.len() >= segment::SCAN_WINDOW_BYTES {
                    if let Err(e) = c.log.write_all_at(&c.buf, c.written) {
                        err = Some(e.into());
                        return false;
                    }
                    c.written += c.buf.len() as u64;
                    c.buf.clear();
                }
                true
            })?;
            if let Some(e) = err.take() {
                return Err(e);
            }
            tracker.segment_done(end);
        }
        if let Some(c) = cur.take() {
            finish(c, &mut outs, self.fs(), self.dir())?;
        }
        Ok(outs)
    }
}
