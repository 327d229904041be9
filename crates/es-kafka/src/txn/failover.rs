//! The transaction coordinator's state in the metadata quorum, so that it
//! survives the loss of the coordinating broker (Kafka keeps it in the
//! replicated `__transaction_state` log; es keeps it in the metadata log, as
//! `coordinator_state.v1` entries of space [`TXNS_SPACE`]).
//!
//! Which ids a coordinator holds: the leader of partition
//! `key_partition(id, n)` of `__transaction_state` coordinates `id`
//! ([`crate::broker::Broker::owns_transactional_id`]). A [`Placement`] is
//! what this broker knew of those leaderships when it last loaded: per
//! partition its leader epoch and whether this broker leads it. On gaining
//! a partition (or a new epoch of it) the coordinator drops what it had of
//! that partition and loads the partition's ids from the applied metadata
//! (Kafka's `onElection`: `loadTransactionsForTxnTopicPartition`); on losing
//! one it drops its ids (`onResignation`), so no timer of a former
//! coordinator acts on them. Placements only move forward: a partition's
//! leader epoch never goes back, so a stale image read by the periodic
//! check cannot undo what a newer applied entry did.
//!
//! Every write names the partition and the leader epoch the coordinator
//! loaded it at ([`TxnFence`]); the metadata log refuses it
//! (NOT_COORDINATOR) unless this broker still leads that partition at that
//! epoch, so a deposed coordinator's late write never lands after its
//! successor's. A write is applied to memory only after the metadata log
//! has applied it, and only if the coordinator still holds the id under the
//! same fence. A write whose answer is lost (timed out) but that the log
//! applied anyway is caught by [`TxnCoordinator::reconcile_applied`], which
//! every applied entry of the space reaches: memory then takes what the log
//! holds, so memory and the log never disagree for longer than it takes to
//! apply an entry.
//!
//! Producer-id reservations and the offsets held for transactions other
//! brokers coordinate stay in `producers.journal` (the former are only a
//! local floor above the blocks the quorum grants).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::coordinator::{storage_failed, TxnCoordinator};
use super::error::TxnError;
use super::log::LogEntry;
use super::placement::{Held, Loaded, Placement, TxnFence, TxnStateStore};
use super::state::TxnRecord;

impl TxnCoordinator {
    /// Whether transactional ids' state lives in the metadata quorum.
    pub fn in_quorum(&self) -> bool {
        self.core.lock().held.is_some()
    }

    /// From now on the state of transactional ids lives in the metadata
    /// quorum, written through `store`; memory is replaced by the ids
    /// `placement` holds, from `records` (every id the log holds).
    pub fn enter_quorum(
        &self,
        store: Arc<dyn TxnStateStore>,
        placement: Placement,
        records: &dyn Fn() -> Vec<(String, TxnRecord)>,
    ) -> Loaded {
        {
            let mut c = self.core.lock();
            if c.held.is_none() {
                c.held = Some(Held {
                    placement: Placement::without_topic(false),
                    store,
                });
                // Nothing is held yet: everything in memory goes.
                c.txns.retain(|_| false);
                c.inflight.clear();
                c.applied.clear();
            }
        }
        self.apply_placement(placement, records)
    }

    /// Takes the leaderships `next` (where newer than what it holds):
    /// drops the ids of partitions it no longer leads, loads those of
    /// partitions it now leads (or leads at a new epoch) from `records`,
    /// replacing what it had. Transactions loaded in a Prepare state are
    /// completed by the next [`TxnCoordinator::recover`] or tick. Nothing
    /// before [`TxnCoordinator::enter_quorum`].
    pub fn apply_placement(
        &self,
        next: Placement,
        records: &dyn Fn() -> Vec<(String, TxnRecord)>,
    ) -> Loaded {
        let mut c = self.core.lock();
        let Some(cur) = c.held.clone() else {
            return Loaded::default();
        };
        let next = Held {
            placement: cur.placement.advance(&next),
            store: cur.store.clone(),
        };
        if next.placement == cur.placement {
            return Loaded::default();
        }
        let load = cur.placement.to_load(&next.placement);
        let keep = |id: &str| next.fence(id).is_some() && !load.contains(&next.partition_of(id));
        let before = c.txns.len();
        c.txns.retain(keep);
        c.inflight.retain(|id, _| keep(id));
        c.applied.retain(|id, _| keep(id));
        let mut out = Loaded {
            partitions: load.iter().copied().collect(),
            dropped: before - c.txns.len(),
            ..Loaded::default()
        };
        if !load.is_empty() {
            for (id, rec) in records() {
                if next.fence(&id).is_some() && load.contains(&next.partition_of(&id)) {
                    out.ids += 1;
                    out.prepared += usize::from(rec.state.is_prepare());
                    c.txns.load(&id, rec);
                }
            }
        }
        c.held = Some(next);
        drop(c);
        if !out.partitions.is_empty() || out.dropped > 0 {
            tracing::info!(
                loaded_partitions = ?out.partitions,
                loaded_ids = out.ids,
                prepared = out.prepared,
                dropped_ids = out.dropped,
                "transaction coordinator: took the __transaction_state leaderships"
            );
        }
        out
    }

    /// The metadata log applied `rec` (`None`: a removal) for `id`. A write
    /// in flight for it here learns of it when it fails (it was applied
    /// after all); an id with none in flight takes it at once, if this
    /// coordinator holds the id (only its own writes can have reached it).
    pub fn reconcile_applied(&self, id: &str, rec: Option<TxnRecord>) {
        let mut c = self.core.lock();
        if c.held.as_ref().and_then(|h| h.fence(id)).is_none() {
            return;
        }
        if c.txns.is_pending(id) {
            c.applied.insert(id.to_string(), rec);
            return;
        }
        if c.txns.get(id) == rec.as_ref() {
            return;
        }
        tracing::debug!(
            transactional_id = id,
            "taking the applied state of a transactional id"
        );
        match rec {
            Some(r) => c.txns.load(id, r),
            None => {
                c.txns.remove(id);
                c.inflight.remove(id);
            }
        }
    }

    /// Makes `entry` (about `id`) durable: in the metadata quorum under the
    /// fence of `id` when the state lives there (the fence is returned),
    /// else in the producers journal.
    pub(super) fn persist(&self, id: &str, entry: LogEntry) -> Result<Option<TxnFence>, TxnError> {
        let held = {
            let c = self.core.lock();
            match &c.held {
                None => None,
                Some(h) => Some((h.fence(id).ok_or(TxnError::JournalFailed)?, h.store.clone())),
            }
        };
        let Some((fence, store)) = held else {
            return self
                .log
                .append(&[entry])
                .map(|()| None)
                .map_err(|e| storage_failed("transaction state change", &e));
        };
        store.write(fence, &[entry])?;
        Ok(Some(fence))
    }

    /// A write of `id` failed: the id is no longer pending, and takes what
    /// the metadata log applied meanwhile, if anything.
    pub(super) fn settle_failed(&self, id: &str) {
        let mut c = self.core.lock();
        match c.applied.remove(id) {
            Some(Some(rec)) => c.txns.load(id, rec),
            Some(None) => {
                c.txns.remove(id);
                c.inflight.remove(id);
            }
            None => c.txns.cancel(id),
        }
    }

    /// The transactional ids the producers journal holds (written before
    /// the state moved to the metadata quorum).
    pub fn journaled_txns(&self) -> BTreeMap<String, TxnRecord> {
        self.log.state().txns
    }

    /// The journal no longer holds `ids` (they were imported into the
    /// metadata quorum): journals their removal and folds. Blocking.
    pub fn forget_journaled(&self, ids: &[String]) -> Result<(), es_storage::StorageError> {
        if ids.is_empty() {
            return Ok(());
        }
        let entries: Vec<LogEntry> = ids
            .iter()
            .map(|id| LogEntry::Remove { id: id.clone() })
            .collect();
        self.log.append(&entries)?;
        self.log.fold()
    }
}

#[cfg(test)]
#[path = "failover_tests.rs"]
mod tests;
