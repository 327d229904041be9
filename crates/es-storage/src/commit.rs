//! Group commit as a state machine: which fsync to run next, which waiters
//! an fsync settles, and what a failed fsync fences. No locks, no files, no
//! threads: [`crate::Partition`] holds a [`CommitCore`] under its `commit`
//! mutex, feeds it events (records appended, a waiter registered, a sync
//! started, done or failed, a segment rolled, the partition closed) and
//! carries out what it answers (run an fsync covering a mark, run the
//! callbacks of the waiters it hands back, with success or with the fence).
//!
//! Invariants:
//! - `durable <= written`, both only move forward, except at a truncation
//!   ([`CommitCore::truncated`]), which moves both back to the cut.
//! - At most one sync runs at a time ([`CommitCore::begin_sync`] and
//!   [`CommitCore::try_begin_sync`] claim it, [`CommitCore::sync_done`] and
//!   [`CommitCore::sync_failed`] release it). A sync covers the written
//!   mark it was claimed at, so waiters that arrive while it runs gather
//!   for the next one: that is group commit.
//! - A waiter is completed with success only once `durable` covers its
//!   target (clamped to `written`, see [`CommitCore::register`]).
//! - A failed fsync fences the partition for good (until the process
//!   restarts and recovery reads what really reached the disk): every
//!   waiter fails, every later waiter fails at once, no sync is started
//!   again. An fsync is never retried: after a failure the kernel may have
//!   dropped the dirty pages and a second fsync could report success for
//!   data that is gone. So a fenced core holds no waiters.

/// A position in the log as the core sees it: an exclusive end offset (the
/// shell's marks also carry where in which segment it is).
pub trait Position: Clone {
    fn offset(&self) -> u64;
}

impl Position for u64 {
    fn offset(&self) -> u64 {
        *self
    }
}

/// Why a fenced partition refuses to go on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fence(pub String);

/// What [`CommitCore::register`] decided for a new waiter.
#[derive(Debug, PartialEq, Eq)]
pub enum Registered<W> {
    /// Complete it now: already covered (`Ok`) or the partition is fenced.
    Now(W, Result<(), Fence>),
    /// It waits for a sync; `submit`: the partition is not yet queued on
    /// the sync pool, queue it (it is now marked queued).
    Waiting { submit: bool },
}

/// What [`CommitCore::begin_sync`] decided.
#[derive(Debug, PartialEq, Eq)]
pub enum Begin<M> {
    /// The target is durable already: no sync.
    Covered,
    /// Fenced: no sync, ever.
    Fenced(Fence),
    /// Another sync runs: wait for it to end and ask again.
    Busy,
    /// Run an fsync covering this mark, then report [`CommitCore::sync_done`]
    /// or [`CommitCore::sync_failed`].
    Start(M),
}

/// Waiters settled by an event, for the shell to complete.
#[derive(Debug, PartialEq, Eq)]
pub struct Settled<W> {
    /// The durable offset after the event.
    pub durable: u64,
    /// Waiters now covered: complete them with success.
    pub completed: Vec<W>,
}

/// The group-commit state of one partition; see the module documentation.
#[derive(Debug)]
pub struct CommitCore<M, W> {
    written: M,
    durable: M,
    /// The mark the running sync covers.
    syncing: Option<u64>,
    fenced: Option<Fence>,
    closed: bool,
    /// Waiters and the end offset each needs durable.
    waiters: Vec<(u64, W)>,
    /// Whether the partition is queued on (or being served by) the sync pool.
    queued: bool,
    /// The lowest cut ([`CommitCore::truncated`]) made while the running
    /// sync ran: that sync covers at most up to it.
    cut_while_syncing: Option<M>,
}

impl<M: Position, W> CommitCore<M, W> {
    /// A core whose log is durable up to `at` (what recovery found).
    pub fn new(at: M) -> Self {
        CommitCore {
            written: at.clone(),
            durable: at,
            syncing: None,
            fenced: None,
            closed: false,
            waiters: Vec::new(),
            queued: false,
            cut_while_syncing: None,
        }
    }

    pub fn written(&self) -> &M {
        &self.written
    }

    pub fn durable(&self) -> &M {
        &self.durable
    }

    /// What readers may see: the durable mark when every record is synced
    /// before it is acknowledged (`every_records == 1`), else the written one.
    pub fn visible(&self, every_records: u64) -> &M {
        if every_records <= 1 {
            &self.durable
        } else {
            &self.written
        }
    }

    /// Records written and not yet durable.
    pub fn pending(&self) -> u64 {
        self.written.offset() - self.durable.offset()
    }

    pub fn fenced(&self) -> Option<&Fence> {
        self.fenced.as_ref()
    }

    pub fn closed(&self) -> bool {
        self.closed
    }

    pub fn syncing(&self) -> bool {
        self.syncing.is_some()
    }

    /// Waiters registered and not yet settled.
    pub fn waiting(&self) -> usize {
        self.waiters.len()
    }

    /// Whether an append may go ahead: not fenced, not closed.
    pub fn writable(&self) -> Result<(), Refused> {
        if let Some(f) = &self.fenced {
            return Err(Refused::Fenced(f.clone()));
        }
        if self.closed {
            return Err(Refused::Closed);
        }
        Ok(())
    }

    /// Records were appended up to `at`.
    pub fn appended(&mut self, at: M) {
        assert!(
            at.offset() >= self.written.offset(),
            "the written mark moves forward"
        );
        self.written = at;
    }

    /// A waiter for the records below `end_offset`. With `every_records == 1`
    /// it needs them durable (clamped to the written end); otherwise the
    /// flush policy only promises a sync once `every_records` records are
    /// waiting, so it is covered while fewer are, and else waits for
    /// everything written so far.
    pub fn register(&mut self, end_offset: u64, every_records: u64, w: W) -> Registered<W> {
        if let Some(f) = &self.fenced {
            return Registered::Now(w, Err(f.clone()));
        }
        let written = self.written.offset();
        let durable = self.durable.offset();
        let (covered, target) = if every_records > 1 {
            (written - durable < every_records, written)
        } else {
            (durable >= end_offset.min(written), end_offset)
        };
        if covered {
            return Registered::Now(w, Ok(()));
        }
        self.waiters.push((target, w));
        let submit = !self.queued;
        self.queued = true;
        Registered::Waiting { submit }
    }

    /// For the sync pool: the offset the registered waiters need durable,
    /// or None when none is left (the partition then leaves the pool's
    /// queue: it is marked not queued).
    pub fn waiters_goal(&mut self) -> Option<u64> {
        if self.waiters.is_empty() {
            self.queued = false;
            return None;
        }
        let written = self.written.offset();
        self.waiters.iter().map(|w| w.0.min(written)).max()
    }

    /// For the sync pool, after it served the partition: whether waiters
    /// are left (it stays queued); if none are, it leaves the queue.
    pub fn stay_queued(&mut self) -> bool {
        if self.waiters.is_empty() {
            self.queued = false;
        }
        self.queued
    }

    /// Claims the next sync for `target` (clamped to written).
    pub fn begin_sync(&mut self, target: u64) -> Begin<M> {
        let target = target.min(self.written.offset());
        if self.durable.offset() >= target {
            return Begin::Covered;
        }
        if let Some(f) = &self.fenced {
            return Begin::Fenced(f.clone());
        }
        if self.syncing.is_some() {
            return Begin::Busy;
        }
        self.syncing = Some(self.written.offset());
        Begin::Start(self.written.clone())
    }

    /// For a sync shared by several partitions: claims this partition's next
    /// sync without waiting. None when another sync runs, it is fenced, or
    /// nothing is unsynced.
    pub fn try_begin_sync(&mut self) -> Option<M> {
        if self.syncing.is_some()
            || self.fenced.is_some()
            || self.durable.offset() >= self.written.offset()
        {
            return None;
        }
        self.syncing = Some(self.written.offset());
        Some(self.written.clone())
    }

    /// The sync claimed at `covered` succeeded: the durable mark moves to it
    /// and the waiters it covers are handed back.
    pub fn sync_done(&mut self, covered: M) -> Settled<W> {
        assert_eq!(
            self.syncing,
            Some(covered.offset()),
            "a sync ends only after it was claimed"
        );
        self.syncing = None;
        // A cut while it ran: what it covered above the cut is gone, and
        // what is written there now was written after it started.
        let covered = match self.cut_while_syncing.take() {
            Some(cut) if cut.offset() < covered.offset() => cut,
            _ => covered,
        };
        self.advance_durable(covered)
    }

    /// The sync failed: the partition is fenced for good and every waiter
    /// is handed back to fail with `why`. The sync is not retried.
    pub fn sync_failed(&mut self, why: String) -> (Fence, Vec<W>) {
        assert!(
            self.syncing.is_some(),
            "a sync fails only after it was claimed"
        );
        self.syncing = None;
        self.cut_while_syncing = None;
        self.fence(why)
    }

    /// Fences the partition for good (a failed sync, a write that could not
    /// be undone, a failed roll): every waiter is handed back to fail. A
    /// second fence keeps the first reason.
    pub fn fence(&mut self, why: String) -> (Fence, Vec<W>) {
        let fence = self.fenced.get_or_insert(Fence(why)).clone();
        self.queued = false;
        (
            fence,
            std::mem::take(&mut self.waiters)
                .into_iter()
                .map(|w| w.1)
                .collect(),
        )
    }

    /// A new segment starts at `at`, which becomes the written mark. The
    /// durable mark does not move: the old segment is sealed (fsynced) by
    /// the shell as part of the next sync, before that sync's own fsync, so
    /// a sync that covers a mark in the new segment covers the old one too.
    pub fn rolled(&mut self, at: M) {
        assert!(
            at.offset() >= self.written.offset(),
            "a roll starts after the written end"
        );
        self.written = at;
    }

    /// The log was cut back to `at` (a follower truncating to its leader),
    /// or, with `emptied`, all of it removed and restarted empty at `at`.
    /// The one move backwards: the written mark becomes `at`, the durable
    /// mark at most `at` (exactly `at` when emptied: an empty log has
    /// nothing to sync). The waiters whose records are gone (target above
    /// `at`; every waiter when emptied) are handed back to fail; the others
    /// stay. A sync running meanwhile covers at most the cut when it ends
    /// (it was claimed above the cut, or before records written after it).
    pub fn truncated(&mut self, at: M, emptied: bool) -> Vec<W> {
        if self.syncing.is_some() {
            let lowest = match self.cut_while_syncing.take() {
                Some(prev) if prev.offset() <= at.offset() => prev,
                _ => at.clone(),
            };
            self.cut_while_syncing = Some(lowest);
        }
        assert!(
            emptied || at.offset() <= self.written.offset(),
            "a truncation cuts the log back"
        );
        let keep_below = if emptied { 0 } else { at.offset() };
        if emptied || self.durable.offset() > at.offset() {
            self.durable = at.clone();
        }
        self.written = at;
        let (gone, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.waiters)
            .into_iter()
            .partition(|w| w.0 > keep_below);
        self.waiters = keep;
        gone.into_iter().map(|w| w.1).collect()
    }

    /// The partition closes: later appends are refused; waiters still
    /// registered (none after a successful flush) are handed back to fail.
    pub fn close(&mut self) -> Vec<W> {
        self.closed = true;
        self.queued = false;
        std::mem::take(&mut self.waiters)
            .into_iter()
            .map(|w| w.1)
            .collect()
    }

    /// Fails every waiter without fencing (the sync pool that was to serve
    /// them has shut down).
    pub fn abandon(&mut self) -> Vec<W> {
        self.queued = false;
        std::mem::take(&mut self.waiters)
            .into_iter()
            .map(|w| w.1)
            .collect()
    }

    fn advance_durable(&mut self, to: M) -> Settled<W> {
        if to.offset() > self.durable.offset() {
            self.durable = to;
        }
        let durable = self.durable.offset();
        let written = self.written.offset();
        let (ready, wait): (Vec<_>, Vec<_>) = std::mem::take(&mut self.waiters)
            .into_iter()
            .partition(|w| w.0.min(written) <= durable);
        self.waiters = wait;
        Settled {
            durable,
            completed: ready.into_iter().map(|w| w.1).collect(),
        }
    }
}

/// Why an append is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refused {
    Fenced(Fence),
    Closed,
}

#[cfg(test)]
#[path = "commit_tests.rs"]
mod tests;
