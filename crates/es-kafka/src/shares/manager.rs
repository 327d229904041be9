//! The share-partitions' async shell (docs/share-groups-design.md §3.2-3.7,
//! §3.11-3.12): [`ShareManager`] owns every loaded share-partition (a slot
//! per (group, topic id, partition) holding the sans-io
//! [`SharePartition`] core and its [`ShareStore`] under one
//! `parking_lot` mutex), the share session cache, and the broker-wide lock
//! deadline index with its timer task ([`super::locks`]).
//!
//! What it does, in the order a ShareFetch needs it (the handlers, later
//! commits, call these):
//!
//! - **load** on first use ([`ShareManager::begin_fetch`],
//!   [`ShareManager::acknowledge`]): snapshot + journal, then §3.4's
//!   restart rules in [`SharePartition::restore`] (start = max(stored
//!   start, log start); stored AVAILABLE at or over the delivery-count limit
//!   archived, journaled; cursor after the last stored offset; nothing
//!   acquired). Without files (or with files of an earlier topic id, which
//!   the store removes) an Init entry is written, its start taken from
//!   `share.auto.offset.reset` ([`AutoOffsetReset`]).
//! - the **fetch lock** of §3.7 step 3: one acquiring fetch per
//!   share-partition; [`ShareManager::begin_fetch`] answers `None` for a
//!   contended one (the handler skips it this round), otherwise a
//!   [`FetchGuard`] with the offset to read from and the most records
//!   allowed; [`ShareManager::finish_fetch`] acquires over what was read.
//! - every change is journaled in the same critical section as the
//!   in-memory change (the journal order is the memory order); a change the
//!   client waits for comes back with a [`DurableTicket`], and
//!   [`ShareManager::wait_durable`] resolves once a group-commit fsync
//!   covers it. The fsync runs off the tokio workers, as
//!   `handlers/durable.rs` waits for partitions: each waiter registers a
//!   oneshot with its share-partition; one blocking task per share-partition
//!   at a time runs `ShareStore::sync` for every waiter queued (one fsync
//!   for all of them) and sends each its result; then, the answers gone,
//!   it folds the journal when it is due (`fold_if_due`).
//! - **fencing**: a failed journal write, fsync or fold fences the
//!   share-partition until restart: its in-memory state is dropped (not
//!   rolled back: after a failed fsync nothing written since the last good
//!   one can be trusted, and re-reading the files in this process could
//!   serve bytes the disk does not hold), and every later call answers
//!   KAFKA_STORAGE_ERROR; the restart's load reads what the disk holds.
//! - lock expiry by the timer task, re-checked under the share-partition's
//!   mutex (a racing acknowledgement wins); renewals replace the deadline;
//!   fetches parked on a share-partition are woken when records become
//!   AVAILABLE again ([`ShareManager::available`]).
//! - session close and **connection close** release the member's records
//!   ([`SharePartition::release_member`]: delivery counts kept, archived at
//!   the limit, as Kafka 4.4).
//! - **unloading** (§3.12): a share-partition with nothing acquired, no fetch
//!   in progress, no durability wait or fsync pending and no session naming
//!   it is dropped from memory by the periodic sweep; its files stay.
//!   [`ShareManager::close`] folds every loaded share-partition at shutdown.
//!
//! Layout: `manager_durable.rs` holds the durability tickets and the fsync
//! task, `manager_admin.rs` the offsets admin and deletions,
//! `manager_stats.rs` the /metrics counters, `manager_load.rs` loading a
//! share-partition from its files, `manager_replica.rs` the cluster side.
//!
//! Lock order: sessions → slot map → a slot's state → its store (journal)
//! → the lock index; a slot's sync queue is a leaf. Under the map's lock a
//! slot's state is only ever `try_lock`ed, so forgetting a deleted slot
//! (`manager_admin.rs`) may take the map's lock under the slot's. Every method but
//! [`ShareManager::wait_durable`] and [`ShareManager::run_lock_timer`] may
//! block on disk (a load, a journal write): call them on a blocking thread.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use es_storage::journal::Ticket;
use es_storage::{Fs, SharedClock, StorageError};
use parking_lot::Mutex;
use tokio::sync::Notify;

use super::locks::{LockIndex, ShareKey};
use super::partition::{
    AckBatch, AckParams, AcquireParams, AcquiredRecords, LogView, Outcome, ShareError,
    SharePartition,
};
use super::sessions::{ConnectionId, Released, ShareSessions, TopicPartition};
use super::store::ShareStore;
pub use super::target::{
    AcquireRequest, AutoOffsetReset, ReadView, ShareConfig, ShareFailure, ShareLog, ShareTarget,
    RECORD_LOCK_DURATION_MS_DEFAULT,
};
pub use admin::ShareOffsets;
pub use durable::DurableTicket;
use durable::SyncQueue;
pub use replica::{CopiedShare, ShareReplication};
use replica::{ReplicaAcks, Replication};
pub use stats::ShareStats;

/// How often the timer task unloads idle share-partitions.
pub const UNLOAD_INTERVAL: Duration = Duration::from_secs(30);
/// The state epoch of an Init entry (AlterShareGroupOffsets, a later
/// commit, moves it with Reset entries).
const INITIAL_STATE_EPOCH: i32 = 0;

/// A share-partition a load brought into memory, and the ticket of the
/// Init entry it wrote, if it wrote one.
type LoadedLive = (Live, Option<Ticket>);

/// What a load does with a share-partition that has no stored state.
#[derive(Clone, Copy, Debug)]
enum Init {
    /// Starts it where `share.auto.offset.reset` says (ShareFetch,
    /// ShareAcknowledge).
    AutoReset,
    /// Starts it at this offset (AlterShareGroupOffsets).
    At(i64),
    /// Leaves it without state (DescribeShareGroupOffsets).
    Absent,
}

/// What [`ShareManager::finish_fetch`] acquired.
#[derive(Debug, Default)]
pub struct FetchAcquired {
    pub records: Vec<AcquiredRecords>,
    /// Wait for it before answering (the acquisition is journaled as
    /// AVAILABLE with its new delivery count, §3.3).
    pub ticket: Option<DurableTicket>,
}

/// The fetch lock of one share-partition, held from
/// [`ShareManager::begin_fetch`] until [`ShareManager::finish_fetch`] or
/// until dropped (a fetch that read nothing or failed gives it back so).
pub struct FetchGuard {
    slot: Arc<Slot>,
    armed: bool,
    /// Where the read starts: the first AVAILABLE offset below the cursor,
    /// else the cursor.
    pub fetch_offset: i64,
    /// The most records this fetch may acquire (0: read nothing).
    pub max_records: i64,
}

impl std::fmt::Debug for FetchGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FetchGuard")
            .field("key", &self.slot.key)
            .field("fetch_offset", &self.fetch_offset)
            .field("max_records", &self.max_records)
            .finish()
    }
}

impl Drop for FetchGuard {
    fn drop(&mut self) {
        if self.armed {
            if let SlotState::Live(live) = &mut *self.slot.state.lock() {
                live.fetching = false;
            }
        }
    }
}

/// A loaded share-partition.
struct Live {
    core: SharePartition,
    store: Arc<ShareStore>,
    /// The topic's name: its files are named by it.
    topic: Arc<str>,
    leader_epoch: i32,
    /// The fetch lock (§3.7 step 3).
    fetching: bool,
}

enum SlotState {
    /// Not loaded yet (or its load failed before writing anything: the
    /// next use tries again).
    Unloaded,
    Live(Box<Live>),
    /// A write, fsync or fold failed: KAFKA_STORAGE_ERROR until restart.
    Fenced(String),
    /// A follower's copy of the leader's state (§3.10, `manager_replica.rs`):
    /// its files are written only by the copy; becoming leader loads them
    /// as a restart would.
    Mirror(Arc<ShareStore>),
    /// Unloaded from the map: whoever still holds it looks again.
    Gone,
}

struct Slot {
    key: ShareKey,
    state: Mutex<SlotState>,
    /// Records became AVAILABLE again, or the share-partition was fenced:
    /// parked fetches look again.
    available: Arc<Notify>,
    /// Durability tickets not yet dropped.
    pending: AtomicUsize,
    sync: Mutex<SyncQueue>,
    /// What the partition's followers hold of it, and the answers waiting
    /// for them (§3.10).
    replicas: Mutex<ReplicaAcks>,
}

impl Slot {
    fn new(key: ShareKey) -> Slot {
        Slot {
            key,
            state: Mutex::new(SlotState::Unloaded),
            available: Arc::new(Notify::new()),
            pending: AtomicUsize::new(0),
            sync: Mutex::new(SyncQueue::default()),
            replicas: Mutex::new(ReplicaAcks::default()),
        }
    }
}

fn fenced_error(key: &ShareKey, why: &str) -> ShareFailure {
    ShareFailure::Storage(StorageError::Fenced(format!(
        "share-partition {}/{}-{}: {why}",
        key.group, key.topic_id, key.partition
    )))
}

/// See the module comment.
pub struct ShareManager {
    fs: Arc<dyn Fs>,
    data_dir: PathBuf,
    clock: SharedClock,
    locks: LockIndex,
    slots: Mutex<HashMap<ShareKey, Arc<Slot>>>,
    sessions: Mutex<ShareSessions>,
    /// Fold past this many journal bytes instead of the store's default
    /// (tests).
    fold_bytes: Mutex<Option<u64>>,
    stats: Arc<ShareStats>,
    /// The followers' side (§3.10): the broker's view of each partition's
    /// in-sync replicas, the changes they wait for, what this process is.
    replication: Replication,
}

impl std::fmt::Debug for ShareManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShareManager")
            .field("data_dir", &self.data_dir)
            .field("slots", &self.slots.lock().len())
            .finish_non_exhaustive()
    }
}

impl ShareManager {
    /// A manager keeping its files under `data_dir/shares`, with at most
    /// `max_sessions` share sessions (`group.share.max.share.sessions`).
    pub fn new(
        fs: Arc<dyn Fs>,
        data_dir: PathBuf,
        clock: SharedClock,
        max_sessions: usize,
    ) -> ShareManager {
        ShareManager {
            fs,
            data_dir,
            locks: LockIndex::new(clock.clone()),
            clock,
            slots: Mutex::new(HashMap::new()),
            sessions: Mutex::new(ShareSessions::new(max_sessions)),
            fold_bytes: Mutex::new(None),
            stats: Arc::new(ShareStats::default()),
            replication: Replication::default(),
        }
    }

    /// Share-partitions loaded from now on fold past `bytes` (tests).
    pub fn set_fold_bytes(&self, bytes: u64) {
        *self.fold_bytes.lock() = Some(bytes);
    }

    /// The lock deadline index.
    pub fn locks(&self) -> &LockIndex {
        &self.locks
    }

    /// The counters of /metrics.
    pub fn stats(&self) -> &ShareStats {
        &self.stats
    }

    /// Share sessions open now.
    pub fn session_count(&self) -> usize {
        self.sessions.lock().len()
    }

    /// The lock clock: monotonic milliseconds.
    pub fn now_ms(&self) -> i64 {
        self.locks.now_ms()
    }

    /// Runs `f` on the share session cache (ShareFetch's and
    /// ShareAcknowledge's session steps, `must_list`).
    pub fn with_sessions<R>(&self, f: impl FnOnce(&mut ShareSessions) -> R) -> R {
        f(&mut self.sessions.lock())
    }

    /// Share-partitions loaded now (one being loaded counts: its mutex is
    /// only tried, so a slow load never holds the map).
    pub fn loaded(&self) -> usize {
        self.slots
            .lock()
            .values()
            .filter(|s| {
                s.state
                    .try_lock()
                    .is_none_or(|st| matches!(*st, SlotState::Live(_)))
            })
            .count()
    }

    /// Whether the share-partition is fenced (until restart).
    pub fn is_fenced(&self, key: &ShareKey) -> bool {
        self.slot_if_present(key)
            .is_some_and(|s| matches!(*s.state.lock(), SlotState::Fenced(_)))
    }

    /// Runs `f` on a loaded share-partition's core (describe calls, tests);
    /// `None` when it is not loaded.
    pub fn inspect<R>(&self, key: &ShareKey, f: impl FnOnce(&SharePartition) -> R) -> Option<R> {
        let slot = self.slot_if_present(key)?;
        let st = slot.state.lock();
        match &*st {
            SlotState::Live(live) => Some(f(&live.core)),
            _ => None,
        }
    }

    /// The Notify a parked ShareFetch waits on for the share-partition's
    /// records to become AVAILABLE again (release, lock expiry) or for it
    /// to be fenced; `None` when it is not loaded (nothing of it can come
    /// back then). It is woken with `notify_waiters`: make the `notified()`
    /// future before looking at the state, then await it.
    pub fn available(&self, key: &ShareKey) -> Option<Arc<Notify>> {
        self.slot_if_present(key).map(|s| s.available.clone())
    }

    fn slot_if_present(&self, key: &ShareKey) -> Option<Arc<Slot>> {
        self.slots.lock().get(key).cloned()
    }

    fn slot_for(&self, key: &ShareKey) -> Arc<Slot> {
        self.slots
            .lock()
            .entry(key.clone())
            .or_insert_with(|| Arc::new(Slot::new(key.clone())))
            .clone()
    }

    /// §3.7 step 3: takes the share-partition's fetch lock (loading it on
    /// first use) and says where to read and how many records may be
    /// acquired. `Ok(None)`: another fetch holds the lock; skip the
    /// share-partition this round. A log start beyond the share-partition's
    /// start moves it first (§3.11). Blocking.
    pub fn begin_fetch(
        &self,
        t: &ShareTarget<'_>,
        max_records: i32,
    ) -> Result<Option<FetchGuard>, ShareFailure> {
        self.with_live(t, |_, slot, live| {
            if live.fetching {
                return Ok(None);
            }
            let core = &live.core;
            let fetch_offset = core.next_fetch_offset();
            let wanted = i64::from(max_records.max(0));
            let mut allowed = wanted.min(core.limits().max_record_locks - core.in_flight());
            if allowed <= 0 && fetch_offset < core.next_offset() {
                // At the lock limit only records below the cursor.
                allowed = wanted.min(core.next_offset() - fetch_offset);
            }
            live.fetching = true;
            Ok(Some(FetchGuard {
                slot: slot.clone(),
                armed: true,
                fetch_offset,
                max_records: allowed.max(0),
            }))
        })
    }

    /// §3.7 step 5: acquires over the batches actually read (states may
    /// have changed since [`ShareManager::begin_fetch`]: only AVAILABLE
    /// offsets are taken), journals the acquisition, and gives the fetch
    /// lock back. Blocking.
    pub fn finish_fetch(
        &self,
        mut guard: FetchGuard,
        t: &ShareTarget<'_>,
        req: &AcquireRequest<'_>,
        read: &ReadView<'_>,
    ) -> Result<FetchAcquired, ShareFailure> {
        let slot = guard.slot.clone();
        let fetch_offset = guard.fetch_offset;
        let mut st = slot.state.lock();
        // Given back below, under this lock, whatever happens.
        guard.armed = false;
        if let SlotState::Live(live) = &mut *st {
            live.fetching = false;
        }
        self.on_live(&slot, &mut st, t.config, |me, slot, live| {
            let p = AcquireParams {
                member: req.member,
                max_records: req.max_records,
                batch_size: req.batch_size,
                mode: req.mode,
                lock_duration_ms: t.config.record_lock_duration_ms,
                now_ms: me.now_ms(),
            };
            let view = LogView {
                log_start: read.log_start.max(0),
                end: read.end.max(0),
                fetch_offset,
                batches: read.batches,
            };
            let acquired = live.core.acquire(&p, &view)?;
            let mut ticket = me.write(slot, live, &acquired.outcome)?;
            let mut records = acquired.records;
            let aborted = overlaps(&records, read.aborted);
            if !aborted.is_empty() {
                // read_committed: records of aborted transactions are
                // archived at once (as a rejection by the member that just
                // acquired them) and never handed out. Journal order makes
                // the later ticket cover both entries.
                let ack = AckParams {
                    member: req.member,
                    renew_allowed: false,
                    lock_duration_ms: t.config.record_lock_duration_ms,
                    now_ms: me.now_ms(),
                };
                let batches: Vec<AckBatch> = aborted
                    .iter()
                    .map(|&(first, last)| AckBatch {
                        first,
                        last,
                        types: vec![ACK_REJECT],
                    })
                    .collect();
                let o = live.core.acknowledge(&ack, &batches)?;
                if let Some(later) = me.write(slot, live, &o)? {
                    ticket = Some(later);
                }
                records = without(records, &aborted);
            }
            let n: i64 = records.iter().map(|r| r.last - r.first + 1).sum();
            me.stats
                .acquired_records
                .fetch_add(u64::try_from(n).unwrap_or(0), Ordering::Relaxed);
            Ok(FetchAcquired { records, ticket })
        })
    }

    /// ShareFetch's piggybacked and ShareAcknowledge's acknowledgements of
    /// one share-partition (§2.4), all or nothing; Renew (type 4) restarts
    /// the locks. The answer waits for the ticket, if any. Blocking.
    pub fn acknowledge(
        &self,
        t: &ShareTarget<'_>,
        member: &str,
        batches: &[AckBatch],
    ) -> Result<Option<DurableTicket>, ShareFailure> {
        self.with_live(t, |me, slot, live| {
            let p = AckParams {
                member,
                renew_allowed: t.config.renew_allowed,
                lock_duration_ms: t.config.record_lock_duration_ms,
                now_ms: me.now_ms(),
            };
            let outcome = live.core.acknowledge(&p, batches)?;
            let ticket = me.write(slot, live, &outcome)?;
            me.stats.count_acks(batches);
            Ok(ticket)
        })
    }

    /// Renews `member`'s locks on `[first, last]` for a full lock duration
    /// (an acknowledgement of type Renew; nothing is journaled). Blocking.
    pub fn renew(
        &self,
        t: &ShareTarget<'_>,
        member: &str,
        first: i64,
        last: i64,
    ) -> Result<(), ShareFailure> {
        let batch = AckBatch {
            first,
            last,
            types: vec![4],
        };
        // A renewal changes no durable state: no ticket.
        drop(self.acknowledge(t, member, &[batch])?);
        Ok(())
    }

    /// Releases every record `member` of `group` holds on `partitions`
    /// (session close, connection close, §2.6): AVAILABLE with the count
    /// kept, ARCHIVED at the limit. Share-partitions not loaded hold
    /// nothing. Nobody waits for the journal entry an archive writes (a
    /// crash before its fsync loses nothing: the restart archives a
    /// record at the limit again). Returns the share-partitions that
    /// released something. Blocking.
    pub fn release_member(
        &self,
        group: &str,
        member: &str,
        partitions: &[TopicPartition],
    ) -> usize {
        let mut released = 0;
        for tp in partitions {
            let key = ShareKey::new(group, tp.topic_id, tp.partition);
            let Some(slot) = self.slot_if_present(&key) else {
                continue;
            };
            let mut st = slot.state.lock();
            if !matches!(*st, SlotState::Live(_)) {
                continue;
            }
            let r = self.on_live_loaded(&slot, &mut st, |me, slot, live| {
                let o = live.core.release_member(member);
                let changed = o.update.is_some() || o.available_again;
                drop(me.write(slot, live, &o)?);
                Ok(changed)
            });
            match r {
                Ok(true) => released += 1,
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(group, member, topic_id = %tp.topic_id, partition = tp.partition, error = %e, "releasing a member's share records failed")
                }
            }
        }
        released
    }

    /// A closed session's release ([`Released`] from the session cache).
    pub fn release_session(&self, r: &Released) -> usize {
        self.release_member(&r.key.group_id, &r.key.member_id, &r.partitions)
    }

    /// The connection-close hook (§2.6, §3.6): removes every session the
    /// connection opened and releases their members' records. Returns the
    /// sessions removed. Blocking.
    pub fn connection_closed(&self, connection: ConnectionId) -> usize {
        let closed = self.take_connection_sessions(connection);
        for r in &closed {
            self.release_session(r);
        }
        closed.len()
    }

    /// The first half of [`ShareManager::connection_closed`], which never
    /// blocks on disk: removes the connection's sessions and returns them,
    /// for [`ShareManager::release_session`] on a blocking thread (most
    /// connections have none, and so never need that thread).
    pub fn take_connection_sessions(&self, connection: ConnectionId) -> Vec<Released> {
        self.sessions.lock().connection_closed(connection)
    }

    /// Expires the locks of the share-partitions the index found due,
    /// each checked again under its mutex. Blocking.
    pub fn expire(&self, keys: &[ShareKey]) {
        for key in keys {
            let Some(slot) = self.slot_if_present(key) else {
                continue;
            };
            let mut st = slot.state.lock();
            if !matches!(*st, SlotState::Live(_)) {
                continue;
            }
            let r = self.on_live_loaded(&slot, &mut st, |me, slot, live| {
                let e = live.core.expire_locks(me.now_ms());
                drop(me.write(slot, live, &e.outcome)?);
                me.stats
                    .lock_expirations
                    .fetch_add(u64::try_from(e.records).unwrap_or(0), Ordering::Relaxed);
                Ok(())
            });
            if let Err(e) = r {
                tracing::warn!(group = %key.group, topic_id = %key.topic_id, partition = key.partition, error = %e, "expiring share record locks failed");
            }
        }
    }

    /// Expires every lock due now. Blocking.
    pub fn expire_due(&self) -> usize {
        let keys = self.locks.take_due(self.now_ms());
        self.expire(&keys);
        keys.len()
    }

    /// The lock timer (§3.5), and the periodic unload of idle
    /// share-partitions, until [`ShareManager::shutdown`]. The broker's
    /// timers run it (`Timers`).
    pub async fn run_lock_timer(self: Arc<Self>) {
        let mut sweep = tokio::time::interval(UNLOAD_INTERVAL);
        sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        sweep.tick().await;
        loop {
            let me = self.clone();
            let work = tokio::select! {
                due = self.locks.next_due() => match due {
                    Some(keys) => tokio::task::spawn_blocking(move || me.expire(&keys)),
                    None => return,
                },
                _ = sweep.tick() => tokio::task::spawn_blocking(move || {
                    me.unload_idle();
                }),
            };
            if let Err(e) = work.await {
                tracing::error!(error = %e, "share-partition timer work failed");
            }
        }
    }

    /// Drops from memory every share-partition with nothing acquired, no
    /// fetch, no durability wait or fsync pending, and no session naming it
    /// (§3.12); a busy one is left for the next sweep. Returns how many
    /// were dropped. Blocking only on the map's and sessions' locks.
    pub fn unload_idle(&self) -> usize {
        let in_use: HashSet<ShareKey> = {
            let sessions = self.sessions.lock();
            let mut set = HashSet::new();
            sessions.for_each_partition(|k, tp| {
                set.insert(ShareKey::new(&k.group_id, tp.topic_id, tp.partition));
            });
            set
        };
        let mut unloaded = 0;
        self.slots.lock().retain(|key, slot| {
            if in_use.contains(key) || slot.pending.load(Ordering::Acquire) > 0 {
                return true;
            }
            let Some(mut st) = slot.state.try_lock() else {
                return true;
            };
            let idle = match &*st {
                SlotState::Live(live) => {
                    !live.fetching
                        && live.core.next_lock_deadline().is_none()
                        && !slot.sync.lock().running
                }
                SlotState::Unloaded | SlotState::Mirror(_) => !slot.sync.lock().running,
                SlotState::Fenced(_) | SlotState::Gone => false,
            };
            if idle {
                if let SlotState::Live(live) = &*st {
                    self.replication.unloaded(key, live.store.last_seq());
                }
                *st = SlotState::Gone;
                self.locks.set(key, None);
                unloaded += 1;
            }
            !idle
        });
        unloaded
    }

    /// Stops the lock timer (shutdown has begun).
    pub fn shutdown(&self) {
        self.locks.shutdown();
    }

    /// Stops the timer and folds every loaded share-partition's journal
    /// into its snapshot (clean shutdown). Blocking.
    pub fn close(&self) -> Result<(), StorageError> {
        self.shutdown();
        let slots: Vec<Arc<Slot>> = self.slots.lock().values().cloned().collect();
        let mut first = None;
        for slot in slots {
            let st = slot.state.lock();
            if let SlotState::Live(live) = &*st {
                if let Err(e) = live.store.fold() {
                    tracing::error!(group = %slot.key.group, topic_id = %slot.key.topic_id, partition = slot.key.partition, error = %e, "folding a share-partition journal at shutdown failed");
                    first.get_or_insert(e);
                }
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// Loads the target's share-partition if needed, then runs `f` on it
    /// (see [`ShareManager::on_live`]).
    fn with_live<R>(
        &self,
        t: &ShareTarget<'_>,
        f: impl FnOnce(&Self, &Arc<Slot>, &mut Live) -> Result<R, ShareFailure>,
    ) -> Result<R, ShareFailure> {
        self.with_live_init(t, Init::AutoReset, |me, slot, live, _| f(me, slot, live))?
            .ok_or_else(|| {
                ShareFailure::Share(ShareError::Internal(
                    "share-partition not initialised".into(),
                ))
            })
    }

    /// [`ShareManager::with_live`] with the choice of what a share-partition
    /// without stored state starts as (`init`); `Ok(None)` when it has none
    /// and `init` is [`Init::Absent`]. `f` also gets the ticket of the Init
    /// entry a load wrote, if one did (nobody waits for it but
    /// AlterShareGroupOffsets).
    fn with_live_init<R>(
        &self,
        t: &ShareTarget<'_>,
        init: Init,
        f: impl FnOnce(&Self, &Arc<Slot>, &mut Live, Option<Ticket>) -> Result<R, ShareFailure>,
    ) -> Result<Option<R>, ShareFailure> {
        // A slot unloaded between the lookup and the lock is Gone: look
        // again (bounded: an unload needs the slot idle, and this caller
        // is about to use it).
        for _ in 0..16 {
            let slot = self.slot_for(t.key);
            let mut st = slot.state.lock();
            if matches!(*st, SlotState::Mirror(_)) {
                // Leading now: the copy's files load as after a restart.
                *st = SlotState::Unloaded;
            }
            if matches!(*st, SlotState::Unloaded) {
                // Not under this slot's mutex: it locks the others.
                drop(st);
                self.supersede(t);
                st = slot.state.lock();
            }
            let mut init_ticket = None;
            match &*st {
                SlotState::Gone => continue,
                SlotState::Unloaded => {
                    let loaded = self.load(t, init).map_err(|(e, fenced)| {
                        if fenced {
                            *st = SlotState::Fenced(e.to_string());
                        }
                        e
                    })?;
                    let Some((live, ticket)) = loaded else {
                        return Ok(None);
                    };
                    init_ticket = ticket;
                    *st = SlotState::Live(Box::new(live));
                }
                SlotState::Live(_) | SlotState::Fenced(_) | SlotState::Mirror(_) => {}
            }
            let log_start = t.log.log_start_offset();
            return self
                .on_live(&slot, &mut st, t.config, |me, slot, live| {
                    if log_start > live.core.start_offset() {
                        // §3.11: the log start passed the start; nobody waits
                        // for this entry (the next load applies it again).
                        let o = live.core.advance_log_start(log_start);
                        drop(me.write(slot, live, &o)?);
                    }
                    f(me, slot, live, init_ticket)
                })
                .map(Some);
        }
        Err(ShareFailure::Share(ShareError::Internal(
            "share-partition unloaded under every attempt to use it".into(),
        )))
    }

    /// A share-partition of an earlier topic of the same name (deleted and
    /// created again) names the same files as `t`'s, which the store
    /// removes as stale when `t`'s loads: the earlier one must never write
    /// them again (a fold at close would put its state back over the new
    /// one's). It is fenced, and kept, so that a late call with its topic
    /// id is refused rather than loaded again (which would remove the new
    /// topic's files in turn). Runs only before a load.
    fn supersede(&self, t: &ShareTarget<'_>) {
        let others: Vec<Arc<Slot>> = self
            .slots
            .lock()
            .iter()
            .filter(|(k, _)| {
                k.group == t.key.group
                    && k.partition == t.key.partition
                    && k.topic_id != t.key.topic_id
            })
            .map(|(_, s)| s.clone())
            .collect();
        for slot in others {
            let mut st = slot.state.lock();
            let same_files = matches!(&*st, SlotState::Live(live) if &*live.topic == t.topic);
            if same_files {
                tracing::info!(group = %slot.key.group, topic = t.topic, stale = %slot.key.topic_id,
                    current = %t.key.topic_id, "share-partition of an earlier topic id superseded");
                *st = SlotState::Fenced(format!(
                    "topic {} was created again with id {}",
                    t.topic, t.key.topic_id
                ));
                drop(st);
                self.locks.set(&slot.key, None);
                slot.available.notify_waiters();
            }
        }
    }

    /// Runs `f` on a loaded slot with the group's current limits, then
    /// indexes its next lock deadline; a storage failure fences it.
    fn on_live<R>(
        &self,
        slot: &Arc<Slot>,
        st: &mut SlotState,
        config: &ShareConfig,
        f: impl FnOnce(&Self, &Arc<Slot>, &mut Live) -> Result<R, ShareFailure>,
    ) -> Result<R, ShareFailure> {
        if let SlotState::Live(live) = st {
            live.core.set_limits(config.limits);
        }
        self.on_live_loaded(slot, st, f)
    }

    /// [`ShareManager::on_live`] without touching the limits (release and
    /// expiry come with no group config).
    fn on_live_loaded<R>(
        &self,
        slot: &Arc<Slot>,
        st: &mut SlotState,
        f: impl FnOnce(&Self, &Arc<Slot>, &mut Live) -> Result<R, ShareFailure>,
    ) -> Result<R, ShareFailure> {
        let live = match st {
            SlotState::Live(live) => live,
            SlotState::Fenced(why) => return Err(fenced_error(&slot.key, why)),
            SlotState::Unloaded | SlotState::Gone | SlotState::Mirror(_) => {
                return Err(ShareFailure::Share(ShareError::Internal(
                    "share-partition not loaded".into(),
                )))
            }
        };
        let r = f(self, slot, live);
        match &r {
            Err(ShareFailure::Storage(e)) => {
                // The in-memory change is not on disk: drop it with the
                // slot's state (see the module comment).
                let why = e.to_string();
                tracing::error!(group = %slot.key.group, topic_id = %slot.key.topic_id, partition = slot.key.partition, error = %why, "share-partition fenced until restart");
                *st = SlotState::Fenced(why);
                self.locks.set(&slot.key, None);
                slot.available.notify_waiters();
            }
            _ => self.locks.set(&slot.key, live.core.next_lock_deadline()),
        }
        r
    }

    /// Journals an Outcome's Update, in the caller's critical section, and
    /// wakes parked fetches when records are AVAILABLE again.
    fn write(
        &self,
        slot: &Arc<Slot>,
        live: &Live,
        o: &Outcome,
    ) -> Result<Option<DurableTicket>, ShareFailure> {
        let ticket = match &o.update {
            Some(u) => {
                let t = live.store.write_update(live.leader_epoch, u)?;
                self.replication.changed();
                Some(DurableTicket::new(slot, &live.store, t))
            }
            None => None,
        };
        if o.available_again {
            slot.available.notify_waiters();
        }
        Ok(ticket)
    }
}

/// AcknowledgeType Reject: the record is archived.
const ACK_REJECT: i8 = 3;

/// The parts of `ranges` (ascending, inclusive) inside the acquired records.
fn overlaps(acquired: &[AcquiredRecords], ranges: &[(i64, i64)]) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    for a in acquired {
        for &(first, last) in ranges {
            let (f, l) = (first.max(a.first), last.min(a.last));
            if f <= l {
                out.push((f, l));
            }
        }
    }
    out.sort_unstable();
    out
}

/// The acquired records less `cut` (inclusive ranges inside them), split
/// where a cut falls inside one.
fn without(acquired: Vec<AcquiredRecords>, cut: &[(i64, i64)]) -> Vec<AcquiredRecords> {
    let mut out = Vec::with_capacity(acquired.len());
    for a in acquired {
        let mut next = a.first;
        for &(f, l) in cut.iter().filter(|&&(f, l)| f <= a.last && l >= a.first) {
            if f > next {
                out.push(AcquiredRecords {
                    first: next,
                    last: f - 1,
                    ..a
                });
            }
            next = next.max(l.saturating_add(1));
        }
        if next <= a.last {
            out.push(AcquiredRecords { first: next, ..a });
        }
    }
    out
}

#[path = "manager_admin.rs"]
mod admin;

#[path = "manager_durable.rs"]
mod durable;

#[path = "manager_stats.rs"]
mod stats;

#[path = "manager_replica.rs"]
mod replica;

#[path = "manager_load.rs"]
mod load;

#[cfg(test)]
#[path = "manager_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "manager_prop_tests.rs"]
mod prop_tests;

#[cfg(test)]
#[path = "manager_broker_tests.rs"]
mod broker_tests;

#[cfg(test)]
#[path = "manager_replica_tests.rs"]
mod replica_tests;
