//! The shared sync pool: a few threads that run group-commit fsyncs for
//! partitions whose callers registered [`crate::Partition::when_durable`]
//! callbacks instead of blocking. A partition is queued at most once at a
//! time (its `queued` flag); the thread that takes it fsyncs until all of its
//! waiters are covered, so every fsync still covers everything written before
//! it started, and concurrent partitions sync in parallel.

use std::collections::VecDeque;
use std::sync::{Arc, OnceLock};

use parking_lot::{Condvar, Mutex};

use crate::partition::Partition;

/// Threads in the pool: fsyncs of different partitions run in parallel.
pub const SYNC_THREADS: usize = 8;

struct Pool {
    queue: Mutex<VecDeque<Arc<Partition>>>,
    ready: Condvar,
}

static POOL: OnceLock<Arc<Pool>> = OnceLock::new();

fn pool() -> &'static Arc<Pool> {
    POOL.get_or_init(|| {
        let p = Arc::new(Pool {
            queue: Mutex::new(VecDeque::new()),
            ready: Condvar::new(),
        });
        for i in 0..SYNC_THREADS {
            let p = p.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("es-sync-{i}"))
                .spawn(move || loop {
                    let part = {
                        let mut q = p.queue.lock();
                        loop {
                            if let Some(x) = q.pop_front() {
                                break x;
                            }
                            p.ready.wait(&mut q);
                        }
                    };
                    part.serve_waiters();
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
