//! The durability side of [`ShareManager`] (docs/share-groups-design.md
//! §3.3): the [`DurableTicket`] an answer waits for, each share-partition's
//! queue of waiters, the blocking task that runs one fsync for all of them
//! (group commit) and folds the journal when due, and fencing after a
//! failed fsync or fold.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use es_storage::journal::Ticket;
use tokio::sync::oneshot;

use super::{fenced_error, ShareManager, ShareStats, Slot, SlotState};
use crate::shares::locks::{LockIndex, ShareKey};
use crate::shares::store::ShareStore;
use crate::shares::target::ShareFailure;

/// A journal write some answer must wait for ([`ShareManager::wait_durable`]).
/// While it exists its share-partition is not unloaded.
#[must_use = "an answer waits for its durability ticket"]
pub struct DurableTicket {
    slot: Arc<Slot>,
    store: Arc<ShareStore>,
    ticket: Ticket,
    /// The journal sequence of the write: what followers must hold.
    seq: u64,
}

impl DurableTicket {
    pub(super) fn new(slot: &Arc<Slot>, store: &Arc<ShareStore>, ticket: Ticket) -> DurableTicket {
        slot.pending.fetch_add(1, Ordering::AcqRel);
        DurableTicket {
            slot: slot.clone(),
            store: store.clone(),
            ticket,
            // Called in the critical section of the write: its sequence.
            seq: store.last_seq().unwrap_or(0),
        }
    }

    /// The share-partition it belongs to.
    pub fn key(&self) -> &ShareKey {
        &self.slot.key
    }
}

impl std::fmt::Debug for DurableTicket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DurableTicket")
            .field("key", &self.slot.key)
            .field("ticket", &self.ticket)
            .finish()
    }
}

impl Drop for DurableTicket {
    fn drop(&mut self) {
        self.slot.pending.fetch_sub(1, Ordering::AcqRel);
    }
}

pub(super) type SyncResult = Result<(), String>;

#[derive(Default)]
pub(super) struct SyncQueue {
    pub(super) waiters: Vec<(Ticket, oneshot::Sender<SyncResult>)>,
    /// A blocking task is running the fsyncs.
    pub(super) running: bool,
}

impl ShareManager {
    /// Resolves once an fsync covers the ticket's journal write and, in a
    /// cluster, every in-sync follower holds it (§3.10); a failed fsync
    /// fences the share-partition and answers its storage error.
    pub async fn wait_durable(&self, t: DurableTicket) -> Result<(), ShareFailure> {
        self.wait_local(&t).await?;
        self.wait_replicated(&t.slot, t.seq).await
    }

    /// Resolves once an fsync covers the ticket's journal write, without
    /// waiting for the followers: what an acquisition waits for. Its copy
    /// reaches the followers within a round trip, but a fetch answer held
    /// for them would hold records whose locks are already running (with a
    /// dead in-sync follower, until the ISR shrinks), and a fail-over that
    /// loses an acquisition only hands its records out again with the
    /// count before (docs/replication.md).
    pub async fn wait_acquired(&self, t: DurableTicket) -> Result<(), ShareFailure> {
        self.wait_local(&t).await
    }

    /// The local half of [`ShareManager::wait_durable`].
    async fn wait_local(&self, t: &DurableTicket) -> Result<(), ShareFailure> {
        let rx = {
            let (tx, rx) = oneshot::channel();
            let mut q = t.slot.sync.lock();
            q.waiters.push((t.ticket, tx));
            if !q.running {
                q.running = true;
                let (slot, store, stats) = (t.slot.clone(), t.store.clone(), self.stats.clone());
                tokio::task::spawn_blocking(move || run_syncs(&slot, &store, &stats));
            }
            rx
        };
        let r = rx
            .await
            .unwrap_or_else(|_| Err("the fsync task ended without an answer".into()));
        match r {
            Ok(()) => Ok(()),
            Err(why) => {
                fence(Some(&self.locks), &t.slot, &why);
                Err(fenced_error(&t.slot.key, &why))
            }
        }
    }
}

/// Fences a slot after a failed fsync or fold (see the module comment).
/// Without the index (the fsync task), its entry, if any, fires once more
/// and finds the slot fenced.
fn fence(locks: Option<&LockIndex>, slot: &Slot, why: &str) {
    let mut st = slot.state.lock();
    if matches!(*st, SlotState::Gone) {
        return;
    }
    if !matches!(*st, SlotState::Fenced(_)) {
        tracing::error!(group = %slot.key.group, topic_id = %slot.key.topic_id, partition = slot.key.partition, error = why, "share-partition fenced until restart");
        *st = SlotState::Fenced(why.to_string());
    }
    drop(st);
    if let Some(locks) = locks {
        locks.set(&slot.key, None);
    }
    slot.available.notify_waiters();
}

/// The fsync task of one share-partition (see the module comment): one
/// `sync` covering every waiter queued, results sent, again until nobody
/// waits; then a fold if the journal is due, before it says it is done
/// (so an unload never races a fold).
fn run_syncs(slot: &Slot, store: &ShareStore, stats: &ShareStats) {
    let mut folded = false;
    loop {
        let batch = {
            let mut q = slot.sync.lock();
            if q.waiters.is_empty() {
                if folded {
                    q.running = false;
                    return;
                }
                None
            } else {
                Some(std::mem::take(&mut q.waiters))
            }
        };
        let Some(batch) = batch else {
            folded = true;
            // A fenced, superseded or demoted share-partition never writes
            // its files again: the fold runs under the slot's mutex, so a
            // copy taking over the files (a follower now) never races it.
            let st = slot.state.lock();
            let ours =
                matches!(&*st, SlotState::Live(l) if std::ptr::eq(Arc::as_ptr(&l.store), store));
            if !ours {
                continue;
            }
            let r = store.fold_if_due();
            drop(st);
            if let Err(e) = r {
                // The store fenced itself; so does the slot.
                fence(None, slot, &format!("fold failed: {e}"));
            }
            continue;
        };
        folded = false;
        let covered = batch.iter().map(|(t, _)| *t).max().unwrap_or(0);
        let before = store.fsyncs();
        let r: SyncResult = store.sync(covered).map_err(|e| e.to_string());
        stats
            .journal_fsyncs
            .fetch_add(store.fsyncs().saturating_sub(before), Ordering::Relaxed);
        for (_, tx) in batch {
            // A receiver that is gone belongs to a request that was dropped.
            let _ = tx.send(r.clone());
        }
    }
}

#[cfg(test)]
impl ShareManager {
    /// Waits until no fsync task runs (their folds are done): a condition
    /// the tests wait for, with a bound that only a hang reaches.
    pub(super) fn wait_syncs_idle(&self) {
        let limit = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let slots: Vec<Arc<Slot>> = self.slots.lock().values().cloned().collect();
            if !slots.iter().any(|s| s.sync.lock().running) {
                return;
            }
            assert!(std::time::Instant::now() < limit, "fsync tasks never ended");
            std::thread::yield_now();
        }
    }
}
