//! The broker-wide index of acquisition-lock deadlines
//! (docs/share-groups-design.md §3.5): which share-partition has a lock due
//! when, in monotonic milliseconds of the storage clock, and the wait of the
//! one task that expires them ([`LockIndex::next_due`], driven by
//! `ShareManager::run_lock_timer`).
//!
//! One ordered set of `(deadline, share-partition)`: each share-partition is
//! in it at most once, with the earliest deadline of the records it has
//! ACQUIRED, and the manager sets that entry again (under the
//! share-partition's mutex, from the core's own `next_lock_deadline`) after
//! every change of its state. Deviation from §3.5's `(deadline, key, first
//! offset)` per acquired batch: the core already knows every record's
//! deadline and releases every due lock in one `expire_locks(now)`, so a
//! per-batch entry would add nothing but entries to remove at every
//! acknowledgement (or stale ones to keep for up to a lock duration). The
//! index is thus bounded by the share-partitions loaded, not by records.
//!
//! Time: [`LockIndex::now_ms`] is milliseconds since the index was made, of
//! the clock's monotonic time (`ManualClock` in tests, which moves only when
//! told: a test advances it, then calls [`LockIndex::clock_moved`] so the
//! sleeping task looks again). It is the only time share-partition locks are
//! given, so deadlines never mix with wall time.
//!
//! Invariants: an entry is in `by_deadline` exactly when it is in `by_key`
//! with the same deadline; a due entry is taken out before it is handed to
//! the caller, who sets the share-partition's next deadline again (the
//! expiry is checked once more under the share-partition's mutex, so an
//! acknowledgement that won the race is not undone).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use es_storage::SharedClock;
use parking_lot::Mutex;
use tokio::sync::Notify;
use uuid::Uuid;

/// One share-partition: (group, topic id, partition).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShareKey {
    pub group: Arc<str>,
    pub topic_id: Uuid,
    pub partition: i32,
}

impl ShareKey {
    pub fn new(group: &str, topic_id: Uuid, partition: i32) -> ShareKey {
        ShareKey {
            group: Arc::from(group),
            topic_id,
            partition,
        }
    }
}

#[derive(Default)]
struct Index {
    by_deadline: BTreeSet<(i64, ShareKey)>,
    by_key: HashMap<ShareKey, i64>,
    shut_down: bool,
}

/// See the module comment.
pub struct LockIndex {
    clock: SharedClock,
    base: Instant,
    inner: Mutex<Index>,
    /// Wakes the task: an earlier deadline, a moved clock, shutdown.
    wake: Notify,
}

impl std::fmt::Debug for LockIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockIndex")
            .field("entries", &self.inner.lock().by_key.len())
            .finish()
    }
}

impl LockIndex {
    pub fn new(clock: SharedClock) -> LockIndex {
        let base = clock.monotonic();
        LockIndex {
            clock,
            base,
            inner: Mutex::new(Index::default()),
            wake: Notify::new(),
        }
    }

    /// Monotonic milliseconds since the index was made.
    pub fn now_ms(&self) -> i64 {
        let d = self.clock.monotonic().saturating_duration_since(self.base);
        i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
    }

    /// Sets `key`'s earliest lock deadline (`None`: nothing acquired),
    /// replacing any earlier entry; wakes the task when it must sleep less.
    pub fn set(&self, key: &ShareKey, deadline_ms: Option<i64>) {
        let mut g = self.inner.lock();
        let old = g.by_key.get(key).copied();
        if old == deadline_ms {
            return;
        }
        if let Some(d) = old {
            g.by_deadline.remove(&(d, key.clone()));
            g.by_key.remove(key);
        }
        let Some(d) = deadline_ms else {
            return;
        };
        let earliest = g.by_deadline.first().map(|(e, _)| *e);
        g.by_deadline.insert((d, key.clone()));
        g.by_key.insert(key.clone(), d);
        drop(g);
        if earliest.is_none_or(|e| d < e) {
            self.wake.notify_one();
        }
    }

    /// `key`'s entry, if it has one.
    pub fn deadline(&self, key: &ShareKey) -> Option<i64> {
        self.inner.lock().by_key.get(key).copied()
    }

    /// Share-partitions with a lock deadline.
    pub fn len(&self) -> usize {
        self.inner.lock().by_key.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The earliest deadline of all.
    pub fn next_deadline(&self) -> Option<i64> {
        self.inner.lock().by_deadline.first().map(|(d, _)| *d)
    }

    /// Takes out every entry due at `now_ms`, earliest first.
    pub fn take_due(&self, now_ms: i64) -> Vec<ShareKey> {
        let mut g = self.inner.lock();
        let mut due = Vec::new();
        while let Some((d, _)) = g.by_deadline.first() {
            if *d > now_ms {
                break;
            }
            if let Some((_, k)) = g.by_deadline.pop_first() {
                g.by_key.remove(&k);
                due.push(k);
            }
        }
        due
    }

    /// The clock moved without the task knowing (a test's `ManualClock`):
    /// it looks again now.
    pub fn clock_moved(&self) {
        self.wake.notify_one();
    }

    /// Ends [`LockIndex::next_due`] for good.
    pub fn shutdown(&self) {
        self.inner.lock().shut_down = true;
        self.wake.notify_one();
    }

    pub fn is_shut_down(&self) -> bool {
        self.inner.lock().shut_down
    }

    /// Waits until some entry is due and returns the share-partitions due,
    /// taken out of the index (the caller sets each one's next deadline
    /// again); `None` once shut down. The sleep is the clock's remaining
    /// time, cut short by [`LockIndex::set`] of an earlier deadline,
    /// [`LockIndex::clock_moved`] and [`LockIndex::shutdown`].
    pub async fn next_due(&self) -> Option<Vec<ShareKey>> {
        loop {
            // Registered before looking, so a wake between the look and the
            // wait is not lost (`notify_one` also keeps a permit).
            let notified = self.wake.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_shut_down() {
                return None;
            }
            let now = self.now_ms();
            let due = self.take_due(now);
            if !due.is_empty() {
                return Some(due);
            }
            match self.next_deadline() {
                Some(d) => {
                    let wait = Duration::from_millis(u64::try_from(d - now).unwrap_or(0));
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = &mut notified => {}
                    }
                }
                None => notified.await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use es_storage::ManualClock;

    fn key(p: i32) -> ShareKey {
        ShareKey::new("g", Uuid::from_bytes([1; 16]), p)
    }

    #[test]
    fn entries_are_replaced_and_taken_in_deadline_order() {
        let clock = ManualClock::new(0);
        let idx = LockIndex::new(clock.clone());
        assert_eq!(idx.now_ms(), 0);
        idx.set(&key(1), Some(300));
        idx.set(&key(2), Some(100));
        idx.set(&key(3), Some(200));
        // Renew: the deadline is replaced, not added.
        idx.set(&key(2), Some(400));
        assert_eq!(idx.len(), 3);
        assert_eq!(idx.next_deadline(), Some(200));
        idx.set(&key(3), None);
        assert_eq!(idx.deadline(&key(3)), None);
        assert_eq!(idx.take_due(299), Vec::<ShareKey>::new());
        clock.advance(Duration::from_millis(450));
        assert_eq!(idx.now_ms(), 450);
        assert_eq!(idx.take_due(idx.now_ms()), vec![key(1), key(2)]);
        assert!(idx.is_empty());
    }

    #[tokio::test]
    async fn the_wait_returns_what_is_due_once_the_clock_moved_and_ends_at_shutdown() {
        let clock = ManualClock::new(0);
        let idx = Arc::new(LockIndex::new(clock.clone()));
        idx.set(&key(7), Some(30_000));
        let i = idx.clone();
        let waiter = tokio::spawn(async move { i.next_due().await });
        tokio::task::yield_now().await;
        clock.advance(Duration::from_millis(30_000));
        idx.clock_moved();
        let got = tokio::time::timeout(Duration::from_secs(60), waiter)
            .await
            .expect("the wait ends")
            .expect("task");
        assert_eq!(got, Some(vec![key(7)]));
        let i = idx.clone();
        let waiter = tokio::spawn(async move { i.next_due().await });
        idx.shutdown();
        let got = tokio::time::timeout(Duration::from_secs(60), waiter)
            .await
            .expect("the wait ends")
            .expect("task");
        assert_eq!(got, None);
    }
}
