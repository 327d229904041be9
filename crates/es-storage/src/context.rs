//! What partitions are opened with: the file system, the sync pool, the
//! reclaimer, the preallocator and the clock. One [`Storage`] per broker (or per test), so that
//! nothing of the log is process-global: two brokers in one process share no
//! thread and no queue.

use std::sync::Arc;

use crate::clock::{self, SharedClock};
use crate::error::Result;
use crate::fs::Fs;
use crate::prealloc::Preallocator;
use crate::reclaim::{Pace, Reclaimer};
use crate::syncer::{SyncMode, SyncPool};

/// The services a partition uses besides its own directory; cheap to clone.
#[derive(Clone)]
pub struct Storage {
    /// Every file operation goes through it.
    pub fs: Arc<dyn Fs>,
    /// Runs the group-commit fsyncs of [`crate::Partition::when_durable`].
    pub sync: Arc<SyncPool>,
    /// Frees the space of segments retention and compaction delete.
    pub reclaimer: Arc<Reclaimer>,
    /// Zero-fills active segments ahead of their last record.
    pub prealloc: Arc<Preallocator>,
    /// Wall time of record timestamps, segment ages and producer idleness.
    pub clock: SharedClock,
}

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Storage")
            .field("sync", &self.sync)
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

impl Storage {
    /// `fs` with a new per-partition sync pool, a paced reclaimer with
    /// [`Pace::default`] and the system clock. Threads start only when
    /// first needed.
    pub fn new(fs: Arc<dyn Fs>) -> Storage {
        Storage {
            fs,
            sync: SyncPool::per_partition(),
            reclaimer: Reclaimer::background(Pace::default()),
            prealloc: Preallocator::new(),
            clock: clock::system(),
        }
    }

    /// Like [`Storage::new`] with a sync pool in `mode`; fails as
    /// [`SyncPool::new`] does.
    pub fn with_sync_mode(fs: Arc<dyn Fs>, mode: SyncMode) -> Result<Storage> {
        Ok(Storage {
            sync: SyncPool::new(mode)?,
            ..Storage::new(fs)
        })
    }

    /// The same with `reclaimer` instead (tests step their own).
    pub fn with_reclaimer(mut self, reclaimer: Arc<Reclaimer>) -> Storage {
        self.reclaimer = reclaimer;
        self
    }

    /// The same with `prealloc` instead (tests serve their own queue).
    pub fn with_preallocator(mut self, prealloc: Arc<Preallocator>) -> Storage {
        self.prealloc = prealloc;
        self
    }

    /// The same with `sync` instead.
    pub fn with_sync_pool(mut self, sync: Arc<SyncPool>) -> Storage {
        self.sync = sync;
        self
    }

    /// The same with `clock` instead.
    pub fn with_clock(mut self, clock: SharedClock) -> Storage {
        self.clock = clock;
        self
    }
}
