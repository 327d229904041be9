//! The shared sync pool: the threads that run group-commit fsyncs for
//! partitions whose callers registered [`crate::Partition::when_durable`]
//! callbacks instead of blocking. A partition is queued at most once at a
//! time (its `queued` flag), and every fsync covers everything written to it
//! before the fsync started.
//!
//! Two modes. **Per partition** (the default): [`SYNC_THREADS`] threads,
//! each fsyncing one partition until its waiters are covered, different
//! partitions in parallel. **Grouped** (`--sync-mode grouped`, Linux 5.8
//! and later, whose `syncfs` reports write-back errors): one thread takes
//! every queued partition at once; one partition gets an fdatasync of its
//! log, several on the same file system one `syncfs` (and an fdatasync
//! after it, see [`crate::fs::FileHandle::sync_filesystem`]) that covers
//! them all, so requests for different partitions share one sync as
//! requests for one partition do. While it runs, newly queued partitions
//! gather for the next one. (Two such threads were measured and were
//! slower: `syncfs` queues its write-back on the file system's flusher and
//! waits for it, so two of them queue there.) It is not the default: in the
//! side-by-side benchmark it lost throughput with 8 partitions and one
//! producer, and `syncfs` also writes whatever other programs left dirty on
//! the file system (docs/benchmarks.md).

use std::collections::VecDeque;
use std::sync::{Arc, OnceLock};

use parking_lot::{Condvar, Mutex};

use crate::partition::Partition;

/// Threads of the per-partition mode: fsyncs of different partitions run in parallel.
pub const SYNC_THREADS: usize = 8;

/// How the pool syncs partitions that wait at the same time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncMode {
    /// One thread; partitions waiting together share one `syncfs`.
    Grouped,
    /// One fdatasync per partition, several threads in parallel.
    PerPartition,
}

struct Pool {
    queue: Mutex<VecDeque<Arc<Partition>>>,
    ready: Condvar,
    mode: SyncMode,
}

static POOL: OnceLock<Arc<Pool>> = OnceLock::new();
static MODE: OnceLock<SyncMode> = OnceLock::new();

/// Chooses the pool's mode, once, before the first partition needs a sync.
/// Returns false, changing nothing, if a mode was already chosen (or the
/// default taken by [`mode`]), or the mode is grouped and the kernel older
/// than 5.8 (its `syncfs` could return success after losing a file's data).
pub fn set_mode(mode: SyncMode) -> bool {
    if mode == SyncMode::Grouped && !grouping_supported() {
        return false;
    }
    MODE.set(mode).is_ok() && POOL.get().is_none()
}

/// The mode the pool runs (or will run) in.
pub fn mode() -> SyncMode {
    *MODE.get_or_init(|| SyncMode::PerPartition)
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

fn pool() -> &'static Arc<Pool> {
    POOL.get_or_init(|| {
        let mode = mode();
        let p = Arc::new(Pool {
            queue: Mutex::new(VecDeque::new()),
            ready: Condvar::new(),
            mode,
        });
        let threads = match mode {
            SyncMode::Grouped => 1,
            SyncMode::PerPartition => SYNC_THREADS,
        };
        for i in 0..threads {
            let p = p.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("es-sync-{i}"))
                .spawn(move || loop {
                    let batch: Vec<Arc<Partition>> = {
                        let mut q = p.queue.lock();
                        while q.is_empty() {
                            p.ready.wait(&mut q);
                        }
                        match p.mode {
                            SyncMode::Grouped => q.drain(..).collect(),
                            SyncMode::PerPartition => q.pop_front().into_iter().collect(),
                        }
                    };
                    serve(&p, batch);
                });
            if let Err(e) = spawned {
                // Fewer threads only means less parallelism; zero is caught in submit().
                tracing::error!(error = %e, "cannot start a sync thread");
            }
        }
        p
    })
}

/// Queues a partition whose waiters need an fsync.
pub(crate) fn submit(p: Arc<Partition>) {
    let pool = pool();
    pool.queue.lock().push_back(p);
    pool.ready.notify_one();
}

/// Serves the waiters of queued partitions. Per partition: fsyncs until its
/// waiters are covered. Grouped: one sync for the first partition and those
/// on its file system (an fdatasync for one, a syncfs for several); the
/// others, and waiters that arrive meanwhile, go back in the queue for the
/// next round.
fn serve(pool: &Pool, batch: Vec<Arc<Partition>>) {
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
    let res = match claimed.as_slice() {
        [] => return,
        [(_, mark)] => mark.segment.log.sync_data(),
        [(_, mark), ..] => mark.segment.log.sync_filesystem(),
    };
    for (p, mark) in claimed {
        // One result for all: a failed sync fences every partition it covered.
        let r = p.end_sync(mark, res.as_ref().err()).map(|_| ());
        if p.settle_waiters(&r) {
            requeue(pool, p);
        }
    }
}

/// Puts a partition that is still marked queued back in the queue.
fn requeue(pool: &Pool, p: Arc<Partition>) {
    pool.queue.lock().push_back(p);
    pool.ready.notify_one();
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
