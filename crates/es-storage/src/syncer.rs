//! The sync pool: the threads that run group-commit fsyncs for partitions
//! whose callers registered [`crate::Partition::when_durable`] callbacks
//! instead of blocking. A pool is a value ([`SyncPool::new`]) that
//! partitions are opened with (see [`crate::Storage`]); two brokers in one
//! process have two pools. A partition is queued at most once at a
//! time (its `queued` flag), and every fsync covers everything written to it
//! before the fsync started.
//!
//! Two modes. **Per partition** (es-storage's own default, and the broker's
//! on kernels before 5.8): [`SYNC_THREADS`] threads,
//! each fsyncing one partition until its waiters are covered, different
//! partitions in parallel. **Grouped** (the broker's default, `--sync-mode
//! auto`, on Linux 5.8 and later, whose `syncfs` reports write-back errors):
//! [`GROUPED_THREADS`] threads, each taking every partition queued when it
//! is free; one partition gets an fdatasync of its log; several on the same
//! file system share one device flush: the logs whose new records lie over
//! durable zeros are written out ([`crate::fs::FileHandle::wait_written`])
//! and one fdatasync ends the pass ([`write_out_pass`]), or, when two or
//! more are not over zeros (a log's first MiB, before zeros are written
//! ahead, or a topic with `preallocate=false`), one `syncfs` (and an
//! fdatasync after it, see [`crate::fs::FileHandle::sync_filesystem`])
//! covers them all. So requests for different partitions share one sync as
//! requests for one partition do. While one thread runs a pass, the
//! partitions queued meanwhile get the next pass on the other. Each pass is
//! counted by kind in `es_sync_passes_total`.
//!
//! With one thread, a pass in progress held up every partition queued
//! behind it, and the grouped mode made less than the per-partition one
//! with one producer on 8 partitions; with two it makes the same within the
//! run-to-run spread, for less CPU (docs/performance-journal.md, "Two
//! grouped sync threads, the default"). Partitions a caller queues inside
//! [`together`] wake a thread once, at its end. A `syncfs` also writes
//! whatever other programs left dirty on the file system (docs/storage.md).

use std::collections::VecDeque;
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};

use crate::error::{Result, StorageError};
use crate::metrics::SyncPass;
use crate::partition::{Mark, Partition};

/// Threads of the per-partition mode: fsyncs of different partitions run in parallel.
pub const SYNC_THREADS: usize = 8;

/// Threads of the grouped mode: while one runs a pass, the partitions queued
/// meanwhile get the next pass on the other instead of waiting for the first
/// to end (docs/performance-journal.md, "Two grouped sync threads, the
/// default").
pub const GROUPED_THREADS: usize = 2;

/// How the pool syncs partitions that wait at the same time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncMode {
    /// [`GROUPED_THREADS`] threads; partitions waiting together share one
    /// device flush (a write-out pass, or one `syncfs`).
    Grouped,
    /// One fdatasync per partition, several threads in parallel.
    PerPartition,
}

/// What the pool's threads share.
struct Shared {
    queue: Mutex<Queue>,
    ready: Condvar,
    /// Wake-ups sent to the threads for work queued (tests count them).
    wakes: std::sync::atomic::AtomicU64,
    mode: SyncMode,
    /// Threads to start.
    threads: usize,
}

struct Queue {
    parts: VecDeque<Arc<Partition>>,
    /// Threads waiting for work.
    idle: usize,
    /// Set by [`SyncPool::shutdown`]: threads leave once the queue is empty,
    /// and nothing more is queued.
    stopped: bool,
}

impl Shared {
    /// Wakes one thread for work queued.
    fn wake(&self) {
        self.wakes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.ready.notify_one();
    }
}

/// A pool of sync threads, one per broker (or test): partitions opened with
/// it ([`crate::Storage`]) queue their durability waiters here. Its threads
/// (`es-sync-N`) start when the first partition is queued and stop on
/// [`SyncPool::shutdown`] or when the pool is dropped (which happens once
/// no partition holds it).
pub struct SyncPool {
    shared: Arc<Shared>,
    /// The threads, once started.
    threads: OnceLock<Mutex<Vec<JoinHandle<()>>>>,
}

impl std::fmt::Debug for SyncPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyncPool")
            .field("mode", &self.shared.mode)
            .field("threads", &self.threads_started())
            .finish()
    }
}

impl SyncPool {
    /// A pool running in `mode`; no thread starts before a partition needs
    /// one. Fails for the grouped mode on a kernel older than 5.8 (its
    /// `syncfs` could return success after losing a file's data).
    pub fn new(mode: SyncMode) -> Result<Arc<SyncPool>> {
        supported(mode)?;
        Ok(Self::with_mode(mode))
    }

    /// A pool in `mode` with `threads` threads instead of the mode's
    /// [`GROUPED_THREADS`] or [`SYNC_THREADS`] (tests that count syncs run
    /// one); fails as [`SyncPool::new`] does.
    pub fn with_threads(mode: SyncMode, threads: usize) -> Result<Arc<SyncPool>> {
        supported(mode)?;
        Ok(Self::build(mode, threads.max(1)))
    }

    /// A pool in the per-partition mode, which every kernel supports.
    pub fn per_partition() -> Arc<SyncPool> {
        Self::with_mode(SyncMode::PerPartition)
    }

    fn with_mode(mode: SyncMode) -> Arc<SyncPool> {
        let threads = match mode {
            SyncMode::Grouped => GROUPED_THREADS,
            SyncMode::PerPartition => SYNC_THREADS,
        };
        Self::build(mode, threads)
    }

    fn build(mode: SyncMode, threads: usize) -> Arc<SyncPool> {
        Arc::new(SyncPool {
            shared: Arc::new(Shared {
                queue: Mutex::new(Queue {
                    parts: VecDeque::new(),
                    idle: 0,
                    stopped: false,
                }),
                ready: Condvar::new(),
                wakes: Default::default(),
                mode,
                threads,
            }),
            threads: OnceLock::new(),
        })
    }

    /// The mode this pool runs in.
    pub fn mode(&self) -> SyncMode {
        self.shared.mode
    }

    /// Threads this pool runs once a partition first needs a sync.
    pub fn threads(&self) -> usize {
        self.shared.threads
    }

    /// Threads this pool has started (0 until a partition first needed a sync).
    pub fn threads_started(&self) -> usize {
        self.threads.get().map_or(0, |t| t.lock().len())
    }

    /// Partitions queued and not yet taken by a thread, threads waiting
    /// for work, and the wake-ups sent so far (tests watch the pool with
    /// them).
    pub fn queue_state(&self) -> (usize, usize, u64) {
        let q = self.shared.queue.lock();
        let wakes = self.shared.wakes.load(std::sync::atomic::Ordering::Relaxed);
        (q.parts.len(), q.idle, wakes)
    }

    /// Stops the threads once they have served what is queued, and waits
    /// for them (except the calling thread, if it is one of them). Waiters
    /// registered afterwards fail with [`StorageError::Closed`].
    pub fn shutdown(&self) {
        self.shared.queue.lock().stopped = true;
        self.shared.ready.notify_all();
        let Some(threads) = self.threads.get() else {
            return;
        };
        let me = std::thread::current().id();
        let handles: Vec<JoinHandle<()>> = std::mem::take(&mut *threads.lock());
        for h in handles {
            if h.thread().id() == me {
                continue; // a thread cannot wait for itself; it leaves on its own
            }
            if h.join().is_err() {
                tracing::error!("a sync thread panicked");
            }
        }
    }

    fn start_threads(&self) -> Mutex<Vec<JoinHandle<()>>> {
        let threads = self.shared.threads;
        let mut handles = Vec::with_capacity(threads);
        for i in 0..threads {
            let shared = self.shared.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("es-sync-{i}"))
                .spawn(move || run(&shared));
            match spawned {
                Ok(h) => handles.push(h),
                // Fewer threads only means less parallelism; zero is caught in submit().
                Err(e) => tracing::error!(error = %e, "cannot start a sync thread"),
            }
        }
        Mutex::new(handles)
    }

    /// Queues a partition whose waiters need an fsync. After shutdown, or
    /// if no thread could start, its waiters fail with `Closed` instead.
    /// Inside [`together`] the threads are woken when it ends, not now.
    pub(crate) fn submit(&self, p: Arc<Partition>) {
        let threads = self.threads.get_or_init(|| self.start_threads());
        let refused = {
            let mut q = self.shared.queue.lock();
            if q.stopped || threads.lock().is_empty() {
                Some(p)
            } else {
                q.parts.push_back(p);
                None
            }
        };
        match refused {
            Some(p) => p.close_waiters(),
            None => {
                if !defer_wake(&self.shared) {
                    self.shared.wake();
                }
            }
        }
    }
}

thread_local! {
    /// Inside [`together`]: the pools queued to on this thread, to wake
    /// when it ends.
    static DEFERRED: std::cell::RefCell<Option<Vec<Arc<Shared>>>> =
        const { std::cell::RefCell::new(None) };
}

/// Remembers `shared` for [`together`]'s end if one runs on this thread
/// and the pool is grouped (a per-partition thread serves one partition:
/// each needs its own wake-up, at once).
fn defer_wake(shared: &Arc<Shared>) -> bool {
    if shared.mode != SyncMode::Grouped {
        return false;
    }
    DEFERRED.with(|d| match d.borrow_mut().as_mut() {
        Some(pools) => {
            if !pools.iter().any(|p| Arc::ptr_eq(p, shared)) {
                pools.push(shared.clone());
            }
            true
        }
        None => false,
    })
}

/// Runs `f`, which registers durability waiters of several partitions (a
/// produce request's), and wakes the sync threads once it returns instead
/// of at each partition queued: a thread woken at the first would start a
/// pass for that partition alone while the others are still being queued,
/// where the grouped mode can cover them all with one device flush. Nested
/// calls wake at the outermost one's end; a panic in `f` still wakes them.
pub fn together<R>(f: impl FnOnce() -> R) -> R {
    struct Wake(bool);
    impl Drop for Wake {
        fn drop(&mut self) {
            if !self.0 {
                return; // nested: the outer call wakes
            }
            let pools = DEFERRED.with(|d| d.borrow_mut().take()).unwrap_or_default();
            for shared in pools {
                // The grouped thread woken takes the whole queue.
                shared.wake();
            }
        }
    }
    let outer = DEFERRED.with(|d| {
        let mut d = d.borrow_mut();
        if d.is_none() {
            *d = Some(Vec::new());
            true
        } else {
            false
        }
    });
    let _wake = Wake(outer);
    f()
}

impl Drop for SyncPool {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// A sync thread: serves queued partitions until the pool stops.
fn run(shared: &Shared) {
    loop {
        let batch: Vec<Arc<Partition>> = {
            let mut q = shared.queue.lock();
            while q.parts.is_empty() {
                if q.stopped {
                    return;
                }
                q.idle += 1;
                shared.ready.wait(&mut q);
                q.idle -= 1;
            }
            match shared.mode {
                SyncMode::Grouped => q.parts.drain(..).collect(),
                SyncMode::PerPartition => q.parts.pop_front().into_iter().collect(),
            }
        };
        serve(shared, batch);
    }
}

/// Fails for the grouped mode where [`grouping_supported`] says no.
fn supported(mode: SyncMode) -> Result<()> {
    if mode == SyncMode::Grouped && !grouping_supported() {
        return Err(StorageError::Invalid(
            "grouped syncs need Linux 5.8 or later (syncfs reports write-back errors from 5.8 on)"
                .into(),
        ));
    }
    Ok(())
}

/// Whether this kernel's `syncfs` reports write-back errors (Linux 5.8 and later).
pub fn grouping_supported() -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    kernel_at_least(&release, (5, 8))
}

/// Whether a kernel release string ("6.1.0-18-amd64") is at least `min`.
fn kernel_at_least(release: &str, min: (u32, u32)) -> bool {
    let mut parts = release.trim().split(['.', '-']);
    let major = parts.next().and_then(|x| x.parse::<u32>().ok());
    let minor = parts.next().and_then(|x| x.parse::<u32>().ok());
    match (major, minor) {
        (Some(a), Some(b)) => (a, b) >= min,
        _ => false,
    }
}

/// Serves the waiters of queued partitions. Per partition: fsyncs until its
/// waiters are covered. Grouped: one sync for the first partition and those
/// on its file system (an fdatasync for one, a syncfs for several); the
/// others, and waiters that arrive meanwhile, go back in the queue for the
/// next round.
fn serve(pool: &Shared, batch: Vec<Arc<Partition>>) {
    if pool.mode == SyncMode::PerPartition {
        for p in batch {
            p.serve_waiters();
        }
        return;
    }
    let mut batch = batch.into_iter();
    let Some(first) = batch.next() else {
        return;
    };
    let device = first.device();
    let mut group = vec![first];
    for p in batch {
        if device.is_some() && p.device() == device {
            group.push(p);
        } else {
            requeue(pool, p);
        }
    }
    let mut claimed = Vec::with_capacity(group.len());
    for p in group {
        if p.waiters_goal().is_none() {
            continue; // no waiter left: it has left the queue
        }
        match p.try_begin_sync() {
            Some(mark) => claimed.push((p, mark)),
            // Being synced by a caller that blocks, fenced, or already
            // covered: the partition's own path sorts it out.
            None => p.serve_waiters(),
        }
    }
    // A partition's pending seal comes before the sync that covers its new
    // segment (as in `Partition::sync_mark`); one that fails fences it.
    claimed.retain(|(p, mark)| match p.finish_roll() {
        Ok(()) => true,
        Err(e) => {
            let _ = p.end_sync(mark.clone(), Some(&std::io::Error::other(e)));
            false
        }
    });
    // Logs whose new records lie over durable zeros need only be written
    // out before a flush of the device; the others need an fdatasync.
    let (in_place, other): (Vec<&Mark>, Vec<&Mark>) =
        claimed.iter().map(|(_, m)| m).partition(|m| m.in_place());
    let res = match (claimed.as_slice(), in_place.as_slice(), other.as_slice()) {
        ([], _, _) => return,
        ([(_, mark)], _, _) => {
            crate::metrics::sync_pass(SyncPass::Fdatasync);
            mark.sync_data()
        }
        (_, [flush, written @ ..], []) | (_, written, [flush]) => {
            crate::metrics::sync_pass(SyncPass::WriteOut);
            write_out_pass(written, flush)
        }
        ([(_, mark), ..], _, _) => {
            crate::metrics::sync_pass(SyncPass::Syncfs);
            mark.sync_filesystem()
        }
    };
    for (p, mark) in claimed {
        // One result for all: a failed sync fences every partition it covered.
        // A failure has fenced the partition and failed its waiters.
        let _ = p.end_sync(mark, res.as_ref().err());
        if p.stay_queued() {
            requeue(pool, p);
        }
    }
}

/// One device flush for several partitions: the logs of `written`, whose
/// new records lie over durable zeros ([`Mark::in_place`]), are written out
/// (all started, then each waited for), then `flush` gets an fdatasync, whose
/// device cache flush makes all of them durable with it. It writes only what
/// the waiters need, where `syncfs` writes everything dirty on the file
/// system (docs/performance-journal.md, "io_uring, and one device flush for
/// many partitions": 8 files 3,714-4,041 passes/s at 140-151 µs of CPU,
/// against 2,664 at 114 µs with `syncfs` and 1,747-1,934 at 401-468 µs with
/// 8 parallel fdatasyncs).
fn write_out_pass(written: &[&Mark], flush: &Mark) -> std::io::Result<()> {
    for m in written {
        m.start_write_out()?;
    }
    for m in written {
        m.wait_written()?;
    }
    flush.flush_device()
}

/// Puts a partition that is still marked queued back in the queue.
fn requeue(pool: &Shared, p: Arc<Partition>) {
    pool.queue.lock().parts.push_back(p);
    pool.wake();
}

#[cfg(test)]
mod tests {
    use super::kernel_at_least;

    #[test]
    fn kernel_release_comparison() {
        assert!(kernel_at_least("5.8.0", (5, 8)));
        assert!(kernel_at_least("6.1.0-18-amd64", (5, 8)));
        assert!(kernel_at_least("6.18.44-fc-v857", (5, 8)));
        assert!(!kernel_at_least("5.4.0-150-generic", (5, 8)));
        assert!(!kernel_at_least("4.19.0", (5, 8)));
        assert!(!kernel_at_least("garbage", (5, 8)));
        assert!(!kernel_at_least("", (5, 8)));
    }
}
