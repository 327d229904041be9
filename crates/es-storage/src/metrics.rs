//! What the storage layer counts for the broker's `/metrics`
//! (docs/metrics.md): fsyncs and their latency, records made durable per
//! fsync (group commit), segment rolls, start-up recovery's progress, and
//! the progress of the compaction pass under way ([`CompactionPassGauges`],
//! which the broker's cleaner sets).
//!
//! One set per process ([`storage_metrics`]): the counters are atomics
//! (prometheus-client's), bumped where the work happens; the broker
//! registers them with its registry ([`register`]). Nothing here is read
//! back by the storage itself.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::LazyLock;
use std::time::Instant;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};

/// Storage's counters (see the module comment).
#[derive(Debug)]
pub struct StorageMetrics {
    pub fsyncs: Counter,
    pub fsync_seconds: Histogram,
    pub fsync_records: Histogram,
    pub segment_rolls: Counter,
    /// Passes of the grouped sync mode by how they ended (`syncer.rs`):
    /// one fdatasync, a write-out pass with one device flush, or a syncfs.
    pub sync_passes: Family<[(&'static str, &'static str); 1], Counter>,
    /// `sync_passes`' three counters, made once: a pass counts without a
    /// lookup in the family.
    sync_pass_counters: [Counter; 3],
    /// Zeros written ahead of active segments (`prealloc.rs`).
    pub preallocated_bytes: Counter,
    /// Descriptors the log holds open, and reopens of closed ones
    /// (`fd_cache.rs`).
    pub open_files: Gauge,
    pub file_reopens: Counter,
    /// Start-up recovery: bytes and segments to check and checked so far,
    /// and how long it took once done (seconds, as f64 bits).
    pub recovery_bytes_total: Gauge,
    pub recovery_bytes_checked: Gauge,
    pub recovery_segments_total: Gauge,
    pub recovery_segments_checked: Gauge,
    pub recovery_seconds: Gauge<f64, AtomicU64>,
    /// The compaction pass under way (or the last one, once it is over).
    pub compaction_pass: CompactionPassGauges,
}

/// Where a compaction pass is: partitions compacted of those whose topic
/// asks for it, and the bytes the partition being compacted has read of
/// what it reads in all (es-storage's `CompactionProgress`). Between passes
/// they hold the last pass's figures, done equal to total. Clones share
/// their values.
#[derive(Clone, Debug, Default)]
pub struct CompactionPassGauges {
    pub partitions_done: Gauge,
    pub partitions_total: Gauge,
    pub bytes_read: Gauge,
    pub bytes_total: Gauge,
}

impl CompactionPassGauges {
    /// A pass over `partitions` compacted partitions begins.
    pub fn begin_pass(&self, partitions: u64) {
        self.partitions_total.set(as_i64(partitions));
        self.partitions_done.set(0);
        self.bytes_read.set(0);
        self.bytes_total.set(0);
    }

    /// One partition's compaction has read `read` of `total` bytes.
    pub fn partition_progress(&self, read: u64, total: u64) {
        self.bytes_total.set(as_i64(total));
        self.bytes_read.set(as_i64(read.min(total)));
    }

    /// One partition's turn is over (its bytes read whole); `done` of the
    /// pass's partitions are.
    pub fn partition_done(&self, done: u64) {
        self.bytes_read.set(self.bytes_total.get());
        self.partitions_done.set(as_i64(done));
        // A topic that turned compact during the pass counts too.
        if self.partitions_total.get() < self.partitions_done.get() {
            self.partitions_total.set(self.partitions_done.get());
        }
    }

    /// The pass is over (or stopped for shutdown).
    pub fn end_pass(&self) {
        self.partitions_total.set(self.partitions_done.get());
        self.bytes_read.set(self.bytes_total.get());
    }

    /// (partitions done, partitions total, bytes read, bytes total).
    pub fn get(&self) -> (u64, u64, u64, u64) {
        let g = |g: &Gauge| u64::try_from(g.get()).unwrap_or(0);
        (
            g(&self.partitions_done),
            g(&self.partitions_total),
            g(&self.bytes_read),
            g(&self.bytes_total),
        )
    }
}

fn as_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Latency buckets shared by every duration histogram: 100 µs to about 13 s.
pub fn duration_buckets() -> impl Iterator<Item = f64> {
    exponential_buckets(0.0001, 2.0, 18)
}

static METRICS: LazyLock<StorageMetrics> = LazyLock::new(|| {
    let sync_passes: Family<[(&'static str, &'static str); 1], Counter> = Family::default();
    let sync_pass_counters =
        SyncPass::ALL.map(|kind| sync_passes.get_or_create(&[("kind", kind.label())]).clone());
    StorageMetrics {
        fsyncs: Counter::default(),
        fsync_seconds: Histogram::new(duration_buckets()),
        fsync_records: Histogram::new(exponential_buckets(1.0, 2.0, 16)),
        segment_rolls: Counter::default(),
        sync_passes,
        sync_pass_counters,
        preallocated_bytes: Counter::default(),
        open_files: Gauge::default(),
        file_reopens: Counter::default(),
        recovery_bytes_total: Gauge::default(),
        recovery_bytes_checked: Gauge::default(),
        recovery_segments_total: Gauge::default(),
        recovery_segments_checked: Gauge::default(),
        recovery_seconds: Gauge::default(),
        compaction_pass: CompactionPassGauges::default(),
    }
});

/// This process's storage counters.
pub fn storage_metrics() -> &'static StorageMetrics {
    &METRICS
}

/// Registers the storage counters with `registry` under their
/// docs/metrics.md names.
pub fn register(registry: &mut Registry) {
    let m = storage_metrics();
    registry.register(
        "es_fsyncs",
        "fsyncs of partition logs (fdatasync or a shared syncfs)",
        m.fsyncs.clone(),
    );
    registry.register_with_unit(
        "es_fsync",
        "how long each fsync of a partition log took",
        Unit::Seconds,
        m.fsync_seconds.clone(),
    );
    registry.register(
        "es_fsync_records",
        "records made durable by one fsync (group commit shares one between producers)",
        m.fsync_records.clone(),
    );
    registry.register(
        "es_segment_rolls",
        "segments rolled (a new active segment started)",
        m.segment_rolls.clone(),
    );
    for kind in ["fdatasync", "write_out", "syncfs"] {
        let _ = m.sync_passes.get_or_create(&[("kind", kind)]);
    }
    registry.register(
        "es_sync_passes",
        "passes of the grouped sync mode, by kind: fdatasync (one log), write_out (logs written out, one device flush), syncfs",
        m.sync_passes.clone(),
    );
    registry.register_with_unit(
        "es_preallocated",
        "zeros written ahead of active segments (topic config preallocate)",
        Unit::Bytes,
        m.preallocated_bytes.clone(),
    );
    registry.register(
        "es_storage_open_files",
        "file descriptors the partition logs hold open (bounded by log.open.files.max)",
        m.open_files.clone(),
    );
    registry.register(
        "es_storage_file_reopens",
        "segment files reopened after the open-file bound closed them",
        m.file_reopens.clone(),
    );
    registry.register_with_unit(
        "es_recovery",
        "how long start-up recovery of the partitions took",
        Unit::Seconds,
        m.recovery_seconds.clone(),
    );
    registry.register(
        "es_recovery_checked_bytes",
        "bytes of segments start-up recovery has checked",
        m.recovery_bytes_checked.clone(),
    );
    registry.register(
        "es_recovery_total_bytes",
        "bytes of segments start-up recovery has to check",
        m.recovery_bytes_total.clone(),
    );
    registry.register(
        "es_recovery_checked_segments",
        "segments start-up recovery has checked",
        m.recovery_segments_checked.clone(),
    );
    registry.register(
        "es_recovery_total_segments",
        "segments start-up recovery has to check",
        m.recovery_segments_total.clone(),
    );
    let c = &m.compaction_pass;
    registry.register(
        "es_compaction_pass_done_partitions",
        "partitions the compaction pass under way has compacted (the last pass's count between passes)",
        c.partitions_done.clone(),
    );
    registry.register(
        "es_compaction_pass_total_partitions",
        "partitions of compacted topics the compaction pass under way visits",
        c.partitions_total.clone(),
    );
    registry.register(
        "es_compaction_pass_read_bytes",
        "bytes of sealed segments the partition being compacted has read (each is read up to four times)",
        c.bytes_read.clone(),
    );
    registry.register(
        "es_compaction_pass_total_bytes",
        "bytes the partition being compacted reads in all",
        c.bytes_total.clone(),
    );
}

/// Times one fsync: counts it and observes its latency when dropped.
pub(crate) struct FsyncTimer(Instant);

impl FsyncTimer {
    pub(crate) fn start() -> Self {
        FsyncTimer(Instant::now())
    }
}

impl Drop for FsyncTimer {
    fn drop(&mut self) {
        let m = storage_metrics();
        m.fsyncs.inc();
        m.fsync_seconds.observe(self.0.elapsed().as_secs_f64());
    }
}

/// How a pass of the grouped sync mode made its partitions durable
/// (`syncer.rs`), the `kind` label of `es_sync_passes_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SyncPass {
    /// One partition: its own fdatasync.
    Fdatasync,
    /// Logs over durable zeros written out, then one device flush.
    WriteOut,
    /// `syncfs` of the file system.
    Syncfs,
}

impl SyncPass {
    const ALL: [SyncPass; 3] = [SyncPass::Fdatasync, SyncPass::WriteOut, SyncPass::Syncfs];

    fn label(self) -> &'static str {
        match self {
            SyncPass::Fdatasync => "fdatasync",
            SyncPass::WriteOut => "write_out",
            SyncPass::Syncfs => "syncfs",
        }
    }
}

/// Counts one pass of the grouped sync mode of `kind`.
pub(crate) fn sync_pass(kind: SyncPass) {
    storage_metrics().sync_pass_counters[kind as usize].inc();
}

/// Records that one fsync made `records` offsets durable.
pub(crate) fn durable_records(records: u64) {
    if records > 0 {
        storage_metrics().fsync_records.observe(records as f64);
    }
}

/// Between [`recovery_begin`] and [`recovery_done`]: partitions opened
/// count as checked by recovery (later ones are new topics).
static RECOVERING: AtomicBool = AtomicBool::new(false);

/// Adds a partition just opened (`bytes` in `segments` segments) to what
/// recovery has checked.
pub fn recovery_checked(bytes: u64, segments: u64) {
    if !RECOVERING.load(Ordering::Relaxed) {
        return;
    }
    let m = storage_metrics();
    m.recovery_bytes_checked.inc_by(as_i64(bytes));
    m.recovery_segments_checked.inc_by(as_i64(segments));
}

/// Where start-up recovery is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecoveryProgress {
    pub bytes_checked: u64,
    pub bytes_total: u64,
    pub segments_checked: u64,
    pub segments_total: u64,
}

/// What recovery has checked so far, and the total it has to.
pub fn recovery_progress() -> RecoveryProgress {
    let m = storage_metrics();
    let get = |g: &Gauge| u64::try_from(g.get()).unwrap_or(0);
    RecoveryProgress {
        bytes_checked: get(&m.recovery_bytes_checked),
        bytes_total: get(&m.recovery_bytes_total),
        segments_checked: get(&m.recovery_segments_checked),
        segments_total: get(&m.recovery_segments_total),
    }
}

/// Sets what recovery has to check (before it starts).
pub fn recovery_begin(total_bytes: u64, total_segments: u64) {
    let m = storage_metrics();
    m.recovery_bytes_total.set(as_i64(total_bytes));
    m.recovery_bytes_checked.set(0);
    m.recovery_segments_total.set(as_i64(total_segments));
    m.recovery_segments_checked.set(0);
    RECOVERING.store(true, Ordering::Relaxed);
}

/// Records how long recovery took.
pub fn recovery_done(seconds: f64) {
    RECOVERING.store(false, Ordering::Relaxed);
    storage_metrics().recovery_seconds.set(seconds);
}
