//! Durability: the shell around the group-commit core
//! ([`crate::commit::CommitCore`]). Waiting callers (blocking, or with a
//! callback run by the sync pool), announced appends that a sync waits for,
//! and the fsyncs themselves, run with no lock held; every decision about
//! which sync to run and which waiter it settles is the core's.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::{AppendIntent, CommitState, DurableCallback, Mark, Partition};
use crate::commit::{Begin, Position, Registered};
use crate::error::{Result, StorageError};

impl Partition {
    /// Like [`Partition::wait_durable`] without blocking: `done` runs once the
    /// records below `end_offset` are as durable as the flush policy promises
    /// — at once on this thread if they already are, otherwise on a thread of
    /// the shared sync pool right after the group-commit fsync that covers
    /// them. For callers on an async runtime: no thread waits on a condvar.
    pub fn when_durable(self: &Arc<Self>, end_offset: u64, done: DurableCallback) {
        let every = self.config().flush.every_records;
        let registered = self.commit.lock().core.register(end_offset, every, done);
        match registered {
            Registered::Now(done, r) => done(r.map_err(|f| self.fence_error(&f))),
            Registered::Waiting { submit: true } => self.sync.submit(self.clone()),
            Registered::Waiting { submit: false } => {}
        }
    }

    /// Announces an append that is on its way (a produce request received
    /// and being decoded): a group-commit fsync about to start waits for it
    /// (at most [`FlushPolicy::announced_wait`]) so that requests a client pipelined share
    /// one fsync instead of splitting into two.
    pub fn announce_append(self: &Arc<Self>) -> AppendIntent {
        loop {
            let side = self.intent_side.load(Ordering::SeqCst);
            self.intents[side].fetch_add(1, Ordering::SeqCst);
            if self.intent_side.load(Ordering::SeqCst) == side {
                return AppendIntent {
                    part: self.clone(),
                    side,
                };
            }
            // A sync flipped sides meanwhile: count on the new side (the
            // sync must not wait for an append announced after it started).
            drop(AppendIntent {
                part: self.clone(),
                side,
            });
        }
    }

    /// With the commit lock held: waits (at most `announced_wait`) until the
    /// appends announced so far are done, or none are.
    fn wait_for_announced(&self, c: &mut parking_lot::MutexGuard<'_, CommitState>) {
        let side = self.intent_side.load(Ordering::SeqCst);
        if self.intents[side].load(Ordering::SeqCst) == 0 {
            return;
        }
        // Later announcements count on the other side and are not waited for.
        self.intent_side.store(side ^ 1, Ordering::SeqCst);
        self.intent_waiting.store(true, Ordering::SeqCst);
        let deadline = Instant::now() + self.config().flush.announced_wait;
        while self.intents[side].load(Ordering::SeqCst) > 0 {
            if self.intents_done.wait_until(c, deadline).timed_out() {
                break;
            }
        }
        self.intent_waiting.store(false, Ordering::SeqCst);
    }

    /// Runs on a sync-pool thread: fsyncs until every registered waiter is
    /// covered (or the partition is fenced, which fails them); each sync's
    /// end runs the callbacks it settles.
    pub(crate) fn serve_waiters(&self) {
        while let Some(goal) = self.waiters_goal() {
            if self.sync_up_to(goal).is_err() {
                // Fenced: the fence failed every waiter; the loop sees none left.
                continue;
            }
        }
    }

    /// For the sync pool: the offset the registered waiters need durable, or
    /// None when none is left (the partition then leaves the pool's queue).
    /// Requests already received join this fsync rather than the next: it
    /// covers everything written when it starts.
    pub(crate) fn waiters_goal(&self) -> Option<u64> {
        let mut c = self.commit.lock();
        c.core.waiters_goal()?;
        self.wait_for_announced(&mut c);
        c.core.waiters_goal()
    }

    /// For the sync pool, after a sync it ran: whether waiters are left (the
    /// partition stays queued); if none are, it leaves the queue.
    pub(crate) fn stay_queued(&self) -> bool {
        self.commit.lock().core.stay_queued()
    }

    /// Fails every registered waiter with `Closed`: the sync pool has shut
    /// down, so nothing will serve them.
    pub(crate) fn close_waiters(&self) {
        let waiters = self.commit.lock().core.abandon();
        for done in waiters {
            done(Err(StorageError::Closed));
        }
    }

    /// Blocks until the records below `end_offset` are as durable as the flush
    /// policy promises: with `every_records == 1` covered by an fsync (shared
    /// with every other waiter: group commit); otherwise fsynced only once
    /// `every_records` records are waiting.
    pub fn wait_durable(&self, end_offset: u64) -> Result<()> {
        let every = self.config().flush.every_records;
        if every > 1 {
            let pending = {
                let c = self.commit.lock();
                if let Some(f) = c.core.fenced() {
                    return Err(self.fence_error(f));
                }
                c.core.pending()
            };
            if pending >= every {
                self.sync_up_to(u64::MAX)?;
            }
            return Ok(());
        }
        self.sync_up_to(end_offset)
    }

    /// Group commit: returns once `durable >= target` (clamped to written).
    pub(super) fn sync_up_to(&self, target: u64) -> Result<()> {
        while let Some(goal) = self.begin_sync(target)? {
            let res = self.sync_mark(&goal);
            if self.end_sync(goal, res.as_ref().err())? >= target {
                break;
            }
        }
        Ok(())
    }

    /// The fsync of a claimed sync: the last roll's seal if it is pending
    /// (so that the durable mark never passes into a segment before the one
    /// before it is sealed), then the data of the mark's segment.
    pub(crate) fn sync_mark(&self, goal: &Mark) -> std::io::Result<()> {
        self.finish_roll().map_err(std::io::Error::other)?;
        goal.sync_data()
    }

    /// Claims the next fsync once no other thread is syncing, unless
    /// `target` (clamped to written) is durable by then: None. Returns the
    /// mark the fsync will cover, the newest data written.
    fn begin_sync(&self, target: u64) -> Result<Option<Mark>> {
        let mut c = self.commit.lock();
        loop {
            match c.core.begin_sync(target) {
                Begin::Covered => return Ok(None),
                Begin::Fenced(f) => return Err(self.fence_error(&f)),
                Begin::Start(mark) => return Ok(Some(mark)),
                Begin::Busy => self.synced.wait(&mut c),
            }
        }
    }

    /// For a sync shared by several partitions: claims this partition's next
    /// fsync without waiting. Returns the mark it will cover, or None when
    /// another thread is syncing it, it is fenced, or nothing is unsynced.
    pub(crate) fn try_begin_sync(&self) -> Option<Mark> {
        self.commit.lock().core.try_begin_sync()
    }

    /// Ends the fsync that covered `goal` (claimed by [`Self::begin_sync`]
    /// or [`Self::try_begin_sync`]): moves the durable mark, wakes what
    /// waits for it and runs the callbacks it covers; or, given the fsync's
    /// error, fences the partition and fails every callback. Returns the new
    /// durable offset.
    pub(crate) fn end_sync(&self, goal: Mark, failed: Option<&std::io::Error>) -> Result<u64> {
        let mut c = self.commit.lock();
        match failed {
            None => {
                let before = c.core.durable().offset();
                let settled = c.core.sync_done(goal);
                crate::metrics::durable_records(settled.durable.saturating_sub(before));
                c.last_sync = Instant::now();
                let replicated_hw = c.replicated_hw;
                drop(c);
                self.synced.notify_all();
                // Replicated, the durable end is what followers report and
                // the leader's high watermark waits for: tell the listener
                // (with the high watermark) either way.
                if let Some(hw) = replicated_hw {
                    self.notify(hw);
                } else if self.config().flush.every_records <= 1 {
                    self.notify(settled.durable);
                }
                for done in settled.completed {
                    done(Ok(()));
                }
                Ok(settled.durable)
            }
            Some(e) => {
                tracing::error!(partition = %self.name, error = %e, "fsync failed; partition fenced until restart");
                let (f, waiters) = c.core.sync_failed(format!("fsync failed: {e}"));
                drop(c);
                self.synced.notify_all();
                for done in waiters {
                    done(Err(self.fence_error(&f)));
                }
                Err(self.fence_error(&f))
            }
        }
    }
}
