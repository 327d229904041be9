//! Fetch read-ahead: a consumer catching up on a partition gets its next
//! fetch read and encoded while it is still busy with the last one.
//!
//! Why: es re-encodes Kafka batches from its record format on every fetch
//! (about a millisecond per MiB here), where Kafka `sendfile`s stored
//! batches. Consumers keep one fetch per broker in flight and the Java
//! consumer asks for a partition again only once it has handed out what it
//! had, so that millisecond is a gap in every consumer's cycle. After a fetch
//! that filled at least half its budget and left more to read, the fetch
//! path prepares the next one (same offset, budget, codecs, isolation) on a
//! blocking thread; the next fetch that asks for exactly that takes it. A
//! fetch that arrives while its preparation runs waits for it (at most
//! [`CLAIM_WAIT_MAX`]) rather than doing the same work twice, and the
//! partition's next [`BACKOFF_FETCHES`] fetches are read without
//! read-ahead: its consumer does not leave the time for it.
//!
//! What is served is what a fetch at preparation time would have returned:
//! records below the high watermark (or the last stable offset) then, which
//! never change in a single-node log; compaction may drop some of them
//! afterwards, as it may while any fetch reads. What can change is checked
//! when a prepared fetch is taken: the log start offset (a prepared fetch
//! from below it is dropped), and the high watermark, last stable offset and
//! aborted transactions are read afresh.
//!
//! Memory: at most [`PARTITION_ENTRIES_MAX`] prepared fetches per partition
//! (consumers at different offsets keep their own), none for budgets above
//! [`PARTITION_BYTES_MAX`], and all of them together under the broker's
//! `--fetch-read-ahead-mb` (0 turns read-ahead off). A prepared fetch nobody
//! takes makes room for a newer one of its partition, or, once older than
//! [`UNCLAIMED_TTL`], is dropped when the total reaches the cap.
//!
//! Ownership: the fetch module keeps one [`ReadAheadCache`] per broker (in
//! the broker's extensions, [`Broker::extension`]): the byte count the cap
//! bounds and each partition's [`ReadAhead`], found by the partition's
//! registry slot. The topic registry knows nothing of it; a deleted
//! partition's read-ahead goes with the next partition that starts one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::{Condvar, Mutex};

use crate::broker::Broker;
use crate::codec::compression::Compression;
use crate::codec::encode::CodecRules;
use crate::topics::PartitionSlot;

/// Fetch budgets above this are not read ahead (8 MiB; consumers ask for 1 MiB
/// per partition by default).
pub const PARTITION_BYTES_MAX: usize = 8 * 1024 * 1024;
/// The longest a fetch waits for the preparation of exactly what it asks for.
pub const CLAIM_WAIT_MAX: Duration = Duration::from_secs(1);
/// A prepared fetch older than this may be dropped to make room.
pub const UNCLAIMED_TTL: Duration = Duration::from_secs(10);

/// What the partitions of one cache share.
#[derive(Debug, Default)]
struct Shared {
    /// Bytes of prepared fetches held, all partitions together.
    held_bytes: AtomicUsize,
    /// Every partition's read-ahead that ever prepared, for the sweep.
    registry: Mutex<Vec<Weak<Inner>>>,
}

/// One broker's read-ahead: every partition's, and the bytes they hold.
#[derive(Debug, Default)]
pub struct ReadAheadCache {
    shared: Arc<Shared>,
    /// Each partition's read-ahead, by the address of its registry slot
    /// (the slot is kept allocated by the `Weak` beside it, so the address
    /// is not reused while the entry exists).
    partitions: Mutex<HashMap<usize, (Weak<PartitionSlot>, ReadAhead)>>,
}

impl ReadAheadCache {
    /// The broker's cache, made on first use.
    pub fn of(broker: &Broker) -> Arc<ReadAheadCache> {
        broker.extension(ReadAheadCache::default)
    }

    /// The read-ahead of the partition in `slot`.
    pub fn partition(&self, slot: &Arc<PartitionSlot>) -> ReadAhead {
        let key = Arc::as_ptr(slot) as usize;
        let mut parts = self.partitions.lock();
        if let Some((_, ra)) = parts.get(&key) {
            return ra.clone();
        }
        // A new partition: forget the ones that are gone.
        parts.retain(|_, (w, _)| w.strong_count() > 0);
        let ra = ReadAhead {
            inner: Arc::new(Inner {
                shared: self.shared.clone(),
                ..Inner::default()
            }),
        };
        parts.insert(key, (Arc::downgrade(slot), ra.clone()));
        ra
    }
}

/// What a fetch asks of one partition, as far as the result depends on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key {
    pub offset: u64,
    pub budget: usize,
    pub compression: Compression,
    pub codec_rules: CodecRules,
    pub log_append_time: bool,
    pub read_committed: bool,
}

/// A fetch read and encoded ahead of its request.
#[derive(Debug)]
pub struct Prepared {
    /// Where the read started (the first record of a produced batch may lie
    /// before the offset asked for).
    pub start: u64,
    /// The encoded batches, read as the first partition of a response (so
    /// they may exceed the budget by a first batch, KIP-74).
    pub records: Bytes,
    /// The offset after the last record encoded.
    pub next: Option<u64>,
    /// The bytes counted against the cap, and where (once stored).
    charged: Option<(Arc<Shared>, usize)>,
}

impl Prepared {
    pub fn new(start: u64, records: Bytes, next: Option<u64>) -> Self {
        Prepared {
            start,
            records,
            next,
            charged: None,
        }
    }
}

impl Drop for Prepared {
    fn drop(&mut self) {
        if let Some((shared, n)) = self.charged.take() {
            shared.held_bytes.fetch_sub(n, Ordering::Relaxed);
        }
    }
}

/// A read being prepared (`prepared` None) or ready.
#[derive(Debug)]
struct Entry {
    key: Key,
    prepared: Option<Prepared>,
    since: Instant,
}

#[derive(Debug, Default)]
struct Inner {
    shared: Arc<Shared>,
    entries: Mutex<Vec<Entry>>,
    changed: Condvar,
    registered: AtomicBool,
    /// Fetches of this partition still to be read without preparation
    /// ([`BACKOFF_FETCHES`]).
    backoff: AtomicU32,
}

/// One partition's read-ahead (a handle; [`ReadAheadCache::partition`]):
/// up to [`PARTITION_ENTRIES_MAX`] prepared fetches, so that consumers
/// reading the partition at different offsets do not drop each other's.
/// One made by `default()` counts its bytes alone.
#[derive(Clone, Debug, Default)]
pub struct ReadAhead {
    inner: Arc<Inner>,
}

/// Prepared fetches one partition holds at most; the oldest makes room.
pub const PARTITION_ENTRIES_MAX: usize = 4;

/// After a fetch that found its preparation still running, this many of the
/// partition's fetches are read without read-ahead before it is tried
/// again. Such a consumer asks for its next fetch as soon as it has the last
/// one (librdkafka fetches ahead of its application into a queue), so
/// preparing only hands the same work to another thread: measured, 6% fewer
/// records/s for es-loadgen's consumer with read-ahead on every fetch.
pub const BACKOFF_FETCHES: u32 = 16;

impl ReadAhead {
    /// Takes the prepared fetch for `key`, waiting for one being prepared.
    pub fn claim(&self, key: &Key) -> Option<Prepared> {
        let deadline = Instant::now() + CLAIM_WAIT_MAX;
        let mut entries = self.inner.entries.lock();
        let mut waited = false;
        loop {
            let i = entries.iter().position(|e| e.key == *key)?;
            if entries[i].prepared.is_some() {
                return entries.remove(i).prepared;
            }
            if !waited {
                waited = true;
                self.inner.backoff.store(BACKOFF_FETCHES, Ordering::Relaxed);
            }
            if self
                .inner
                .changed
                .wait_until(&mut entries, deadline)
                .timed_out()
            {
                return None;
            }
        }
    }

    /// Notes that `key` is being prepared, unless it is held or under way
    /// already, the partition backs off, or the broker holds `cap` bytes of
    /// prepared fetches (after dropping unclaimed old ones). The
    /// [`Preparation`] it returns stores the result with
    /// [`Preparation::finish`]; dropped without that, it gives up.
    pub fn begin(&self, key: Key, cap: usize) -> Option<Preparation> {
        if cap == 0 || key.budget > PARTITION_BYTES_MAX {
            return None;
        }
        let backoff = &self.inner.backoff;
        if backoff
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok()
        {
            return None;
        }
        let shared = &self.inner.shared;
        let over_cap = || {
            shared
                .held_bytes
                .load(Ordering::Relaxed)
                .saturating_add(key.budget)
                > cap
        };
        if over_cap() {
            sweep(shared);
            if over_cap() {
                return None;
            }
        }
        if !self.inner.registered.swap(true, Ordering::Relaxed) {
            shared.registry.lock().push(Arc::downgrade(&self.inner));
        }
        let mut entries = self.inner.entries.lock();
        // Held or under way already (another fetch asked for the same):
        // preparing it again would only replace the one being prepared.
        if entries.iter().any(|e| e.key == key) {
            return None;
        }
        if entries.len() >= PARTITION_ENTRIES_MAX {
            entries.remove(0);
        }
        entries.push(Entry {
            key,
            prepared: None,
            since: Instant::now(),
        });
        Some(Preparation {
            inner: self.inner.clone(),
            key,
            finished: false,
        })
    }
}

/// A preparation under way, from [`ReadAhead::begin`]. Dropped without
/// [`Preparation::finish`] (nothing to read, a failed read, a panic on the
/// blocking thread, a task the runtime never ran) it gives its key up and
/// wakes the fetches waiting for it, so that none of them waits
/// [`CLAIM_WAIT_MAX`] for it and the partition's place is free again.
#[derive(Debug)]
#[must_use = "dropping a preparation gives it up"]
pub struct Preparation {
    inner: Arc<Inner>,
    key: Key,
    finished: bool,
}

impl Preparation {
    /// Stores what was prepared, if it is still awaited.
    pub fn finish(mut self, mut p: Prepared) {
        self.finished = true;
        let n = p.records.len();
        let shared = &self.inner.shared;
        shared.held_bytes.fetch_add(n, Ordering::Relaxed);
        p.charged = Some((shared.clone(), n));
        let mut entries = self.inner.entries.lock();
        if let Some(e) = entries
            .iter_mut()
            .find(|e| e.key == self.key && e.prepared.is_none())
        {
            e.prepared = Some(p);
            e.since = Instant::now();
        }
        drop(entries);
        self.inner.changed.notify_all();
    }
}

impl Drop for Preparation {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        self.inner
            .entries
            .lock()
            .retain(|e| e.key != self.key || e.prepared.is_some());
        self.inner.changed.notify_all();
    }
}

#[cfg(test)]
impl ReadAhead {
    /// The offsets held or being prepared, for tests.
    pub(crate) fn offsets(&self) -> Vec<u64> {
        self.inner
            .entries
            .lock()
            .iter()
            .map(|e| e.key.offset)
            .collect()
    }

    /// Waits (at most 30 s) until the read from `offset` is prepared, as a
    /// consumer busy with its last fetch would; false if it never is.
    pub(crate) fn wait_prepared(&self, offset: u64) -> bool {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut entries = self.inner.entries.lock();
        loop {
            match entries.iter().find(|e| e.key.offset == offset) {
                Some(e) if e.prepared.is_some() => return true,
                Some(_) => {
                    if self
                        .inner
                        .changed
                        .wait_until(&mut entries, deadline)
                        .timed_out()
                    {
                        return false;
                    }
                }
                None => return false,
            }
        }
    }
}

/// Drops entries older than [`UNCLAIMED_TTL`] (prepared fetches nobody
/// took, preparations that never ended), and forgets partitions that are
/// gone.
fn sweep(shared: &Shared) {
    let mut reg = shared.registry.lock();
    reg.retain(|w| {
        let Some(inner) = w.upgrade() else {
            return false;
        };
        if let Some(mut entries) = inner.entries.try_lock() {
            entries.retain(|e| e.since.elapsed() < UNCLAIMED_TTL);
        }
        true
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(offset: u64) -> Key {
        Key {
            offset,
            budget: 1024,
            compression: Compression::None,
            codec_rules: CodecRules::default(),
            log_append_time: false,
            read_committed: false,
        }
    }

    #[test]
    fn a_prepared_fetch_is_taken_once_and_only_for_its_key() {
        let ra = ReadAhead::default();
        assert!(ra.claim(&key(10)).is_none());
        let prep = ra.begin(key(10), usize::MAX).expect("begun");
        assert!(ra.begin(key(10), usize::MAX).is_none(), "under way already");
        prep.finish(Prepared::new(10, Bytes::from_static(b"abc"), Some(12)));
        let p = ra.claim(&key(10)).expect("prepared");
        assert_eq!(
            (p.start, &p.records[..], p.next),
            (10, &b"abc"[..], Some(12))
        );
        assert!(ra.claim(&key(10)).is_none(), "taken once");

        // Consumers at other offsets keep theirs, up to the partition's limit.
        for o in 20..20 + PARTITION_ENTRIES_MAX as u64 + 1 {
            let prep = ra.begin(key(o), usize::MAX).expect("begun");
            prep.finish(Prepared::new(o, Bytes::from_static(b"x"), Some(o + 1)));
        }
        assert!(ra.claim(&key(5)).is_none(), "another offset");
        assert!(ra.claim(&key(20)).is_none(), "the oldest made room");
        assert!(ra.claim(&key(21)).is_some());
        assert!(ra.claim(&key(20 + PARTITION_ENTRIES_MAX as u64)).is_some());
    }

    #[test]
    fn an_abandoned_preparation_yields_nothing_and_a_finished_one_is_kept_once() {
        let ra = ReadAhead::default();
        drop(ra.begin(key(1), usize::MAX).expect("begun"));
        assert!(ra.claim(&key(1)).is_none());
        assert!(ra.offsets().is_empty(), "its place is free");
        let prep = ra.begin(key(1), usize::MAX).expect("begun again");
        prep.finish(Prepared::new(1, Bytes::from_static(b"a"), Some(2)));
        assert!(ra.begin(key(1), usize::MAX).is_none(), "held already");
        assert_eq!(&ra.claim(&key(1)).expect("prepared").records[..], b"a");
        assert!(ra.claim(&key(1)).is_none());
    }

    #[test]
    fn a_preparation_that_panics_gives_its_key_up() {
        let ra = Arc::new(ReadAhead::default());
        let prep = ra.begin(key(3), usize::MAX).expect("begun");
        let preparer = std::thread::spawn(move || {
            let _prep = prep;
            panic!("a preparation fails");
        });
        assert!(preparer.join().is_err(), "the preparer panicked");
        assert!(ra.offsets().is_empty(), "nothing held or under way");
        assert!(ra.claim(&key(3)).is_none());
        assert!(ra.begin(key(3), usize::MAX).is_some(), "prepared afresh");
    }

    #[test]
    fn a_fetch_waits_for_the_preparation_of_its_key_and_the_partition_backs_off() {
        let ra = Arc::new(ReadAhead::default());
        let prep = ra.begin(key(7), usize::MAX).expect("begun");
        let preparer = {
            let ra = ra.clone();
            std::thread::spawn(move || {
                // Finishes only once the fetch is waiting for it.
                while ra.inner.backoff.load(Ordering::Relaxed) == 0 {
                    std::thread::yield_now();
                }
                prep.finish(Prepared::new(7, Bytes::from_static(b"r"), Some(8)));
            })
        };
        // The fetch waits, and gets what was prepared for it.
        let p = ra.claim(&key(7)).expect("prepared");
        assert_eq!(&p.records[..], b"r");
        preparer.join().expect("preparer");
        // Its consumer came back before the preparation was done.
        for o in 0..BACKOFF_FETCHES {
            assert!(
                ra.begin(key(8 + u64::from(o)), usize::MAX).is_none(),
                "fetch {o} backs off"
            );
        }
        assert!(ra.begin(key(100), usize::MAX).is_some(), "then tried again");
    }

    #[test]
    fn the_cap_and_the_partition_limit_are_honoured() {
        let ra = ReadAhead::default();
        assert!(ra.begin(key(1), 0).is_none(), "0 turns read-ahead off");
        let mut big = key(1);
        big.budget = PARTITION_BYTES_MAX + 1;
        assert!(ra.begin(big, usize::MAX).is_none());
        // A cap below one budget refuses it.
        assert!(ra.begin(key(1), 1023).is_none());
    }
}
