//! The transaction coordinator's fail-over, as the broker drives it: the
//! state of transactional ids lives in the metadata log (space
//! `txns` of `coordinator_state.v1`, one key per transactional id,
//! its [`TxnRecord`] as the value), and the coordinator holds the ids of the
//! `__transaction_state` partitions this broker leads ([`crate::txn::failover`]).
//!
//! This file owns the mapping between the coordinator and the metadata log:
//! [`QuorumTxnStore`] proposes the coordinator's writes, fenced by the
//! partition's leader epoch the coordinator loaded it at;
//! [`Broker::txn_failover_event`], called for every applied event, moves
//! the coordinator with the leadership of `__transaction_state` and hands
//! it what the log applied for its ids; [`Broker::txn_failover_start`]
//! imports what a data directory from before kept in `producers.journal`,
//! once, and switches the coordinator to the metadata log. A periodic
//! check ([`Broker::txn_failover_tick`]) catches a leadership change the
//! events raced with.
//!
//! Threads: applied events arrive on the metadata log's blocking apply
//! thread, which must never wait for another entry to apply, so loading is
//! in memory only and completing transactions loaded in a Prepare state
//! (markers, then a write) runs on a blocking task of its own.

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use es_meta::image::MetaEvent;
use es_meta::node::MetaError;
use es_meta::records::{
    code as meta_code, CoordinatorWrite, LeaderFence, MetaRequest, MetaResponse, StateChange,
};
use es_meta::MetaImage;
use tokio::runtime::Handle;

use super::txn_cluster::run_on;
use super::Broker;
use crate::topics::TRANSACTION_STATE_TOPIC;
use crate::txn::error::TxnError;
use crate::txn::log::LogEntry;
use crate::txn::placement::{Placement, TxnFence, TxnStateStore, TXNS_SPACE};
use crate::txn::TxnRecord;

/// How long one write of transaction state may take (one Raft round trip;
/// longer means the quorum has no leader). The client gets
/// COORDINATOR_NOT_AVAILABLE and retries.
pub const TXN_STATE_WRITE_TIMEOUT_MS: u64 = 10_000;

/// Proposes one write of a coordinator's state (`what` names it in the
/// log) from a blocking thread and maps the answer to the coordinator's
/// errors: a refusal by the fence is NOT_COORDINATOR (Kafka's answer when
/// a coordinator lost its partition while appending to it: the client
/// finds the new one); no quorum, or no answer in time (it may still be
/// applied; the coordinator then takes it from the applied event), is
/// COORDINATOR_NOT_AVAILABLE, Kafka's answer to a timed-out log append.
pub(crate) fn propose_state(
    rt: &Handle,
    broker: std::sync::Arc<Broker>,
    req: MetaRequest,
    what: &str,
) -> Result<(), TxnError> {
    let answer = run_on(
        rt,
        async move { broker.propose(req).await },
        Duration::from_millis(TXN_STATE_WRITE_TIMEOUT_MS),
    );
    match answer {
        Some(Ok(MetaResponse::None)) => Ok(()),
        Some(Ok(MetaResponse::Error {
            error_code,
            message,
        })) if error_code == meta_code::NOT_COORDINATOR => {
            tracing::info!(%message, "{what} write refused: no longer the coordinator");
            Err(TxnError::JournalFailed)
        }
        Some(Ok(other)) => {
            tracing::warn!(answer = ?other, "unexpected answer to a {what} write");
            Err(TxnError::CoordinatorNotAvailable)
        }
        Some(Err(e)) => {
            tracing::warn!(error = %e.message, "{what} write failed");
            Err(TxnError::CoordinatorNotAvailable)
        }
        None => {
            tracing::warn!("{what} write not answered in time");
            Err(TxnError::CoordinatorNotAvailable)
        }
    }
}

/// The metadata-log change that makes a coordinator's journal entry
/// durable; `None` for the entries that stay in `producers.journal`.
pub fn state_change(e: &LogEntry) -> Option<StateChange> {
    match e {
        LogEntry::Txn { id, txn } => Some(StateChange::Put {
            space: TXNS_SPACE.to_string(),
            key: id.clone(),
            value: serde_json::to_value(txn).ok()?,
        }),
        LogEntry::Remove { id } => Some(StateChange::Delete {
            space: TXNS_SPACE.to_string(),
            key: id.clone(),
        }),
        LogEntry::ReservePids { .. } | LogEntry::RemoteOffsets { .. } => None,
    }
}

/// The record of one key of the space; `None` (logged) if it does not
/// parse, which only a newer es writing a newer record could cause.
pub fn record_of(id: &str, v: &serde_json::Value) -> Option<TxnRecord> {
    match serde_json::from_value(v.clone()) {
        Ok(r) => Some(r),
        Err(e) => {
            tracing::error!(transactional_id = id, error = %e, "a transaction record in the metadata log does not parse; ignored");
            None
        }
    }
}

/// Every transactional id the image holds.
pub fn image_txns(image: &MetaImage) -> Vec<(String, TxnRecord)> {
    image
        .coordinator_space(TXNS_SPACE)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| record_of(k, v).map(|r| (k.clone(), r)))
        .collect()
}

/// The leaderships of `__transaction_state` in `image`, seen from broker
/// `me`. Without the topic, `me` holds every id when it is the only
/// registered broker (the rule the metadata log's fence applies).
pub fn placement(image: &MetaImage, me: i32) -> Placement {
    let Some(t) = image.topics.get(TRANSACTION_STATE_TOPIC) else {
        let alone = image.brokers.len() == 1 && image.brokers.contains_key(&me);
        return Placement::without_topic(alone);
    };
    Placement {
        partitions: i32::try_from(t.partitions.len()).unwrap_or(i32::MAX),
        leaders: t
            .partitions
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let i = i32::try_from(i).unwrap_or(i32::MAX);
                (i, (p.leader_epoch, p.leader == me))
            })
            .collect(),
    }
}

/// The `coordinator_state.v1` entry of `entries` written by broker `me`
/// under `fence`.
pub fn state_write(me: i32, fence: TxnFence, entries: &[LogEntry]) -> MetaRequest {
    MetaRequest::CoordinatorState(CoordinatorWrite {
        fence: LeaderFence {
            topic: TRANSACTION_STATE_TOPIC.to_string(),
            partition: fence.partition,
            broker_id: me,
            leader_epoch: fence.leader_epoch,
        },
        changes: entries.iter().filter_map(state_change).collect(),
    })
}

/// The coordinator's writes, proposed to the metadata quorum.
#[derive(Debug)]
pub struct QuorumTxnStore {
    broker: Weak<Broker>,
    rt: Handle,
}

impl TxnStateStore for QuorumTxnStore {
    fn partition_of(&self, id: &str, partitions: i32) -> i32 {
        super::key_partition(id, partitions)
    }

    fn write(&self, fence: TxnFence, entries: &[LogEntry]) -> Result<(), TxnError> {
        let broker = self
            .broker
            .upgrade()
            .ok_or(TxnError::CoordinatorNotAvailable)?;
        let req = state_write(broker.node_id(), fence, entries);
        propose_state(&self.rt, broker, req, "transaction state")
    }
}

impl Broker {
    /// Imports the transactional ids `producers.journal` holds (a data
    /// directory from before the metadata quorum held them) into the
    /// metadata log, one entry per partition, then has the journal forget
    /// them; then the coordinator's state lives in the metadata log. An id
    /// this broker cannot write (another broker leads its partition) stays
    /// in the journal for a later start. Called once, by
    /// [`Broker::start_metadata`].
    pub(crate) async fn txn_failover_start(self: &Arc<Self>) -> Result<(), MetaError> {
        let me = self.node_id();
        let Some(image) = self.image() else {
            return Ok(());
        };
        let held = placement(&image, me);
        let journaled = self.txn().journaled_txns();
        let mut by_fence: BTreeMap<(i32, i32), Vec<LogEntry>> = BTreeMap::new();
        let mut kept = 0usize;
        for (id, txn) in journaled {
            let p = if held.partitions <= 0 {
                0
            } else {
                super::key_partition(&id, held.partitions)
            };
            match held.fence_at(p) {
                Some(f) => by_fence
                    .entry((f.partition, f.leader_epoch))
                    .or_default()
                    .push(LogEntry::Txn { id, txn }),
                None => kept += 1,
            }
        }
        let mut imported = Vec::new();
        for ((partition, leader_epoch), entries) in by_fence {
            let fence = TxnFence {
                partition,
                leader_epoch,
            };
            match self.propose(state_write(me, fence, &entries)).await {
                Ok(MetaResponse::None) => {
                    imported.extend(entries.into_iter().filter_map(|e| match e {
                        LogEntry::Txn { id, .. } => Some(id),
                        _ => None,
                    }))
                }
                Ok(other) => {
                    tracing::warn!(partition, answer = ?other, "journaled transactional ids not imported; kept in producers.journal");
                    kept += entries.len();
                }
                Err(e) => return Err(MetaError::Fatal(e.message)),
            }
        }
        if !imported.is_empty() || kept > 0 {
            tracing::info!(
                imported = imported.len(),
                kept,
                "imported the transactional ids of producers.journal into the metadata log"
            );
        }
        let me2 = self.clone();
        tokio::task::spawn_blocking(move || me2.txn().forget_journaled(&imported))
            .await
            .map_err(|e| MetaError::Fatal(e.to_string()))?
            .map_err(|e| MetaError::Io(std::io::Error::other(e.to_string())))?;
        let store = Arc::new(QuorumTxnStore {
            broker: Arc::downgrade(self),
            rt: Handle::current(),
        });
        let image = self.image().unwrap_or(image);
        let loaded = self
            .txn()
            .enter_quorum(store, placement(&image, me), &|| image_txns(&image));
        self.txn_recover_loaded(loaded.prepared);
        Ok(())
    }

    /// Moves the transaction coordinator with `image`'s leaderships of
    /// `__transaction_state` (in memory; see the module comment).
    fn txn_place(self: &Arc<Self>, image: &MetaImage) {
        let loaded = self
            .txn()
            .apply_placement(placement(image, self.node_id()), &|| image_txns(image));
        self.txn_recover_loaded(loaded.prepared);
    }

    /// Completes loaded Prepare transactions on a blocking task (they write
    /// markers and then the metadata log, which an apply thread must not
    /// wait for). Without a runtime, the coordinator's tick does it.
    fn txn_recover_loaded(self: &Arc<Self>, prepared: usize) {
        if prepared == 0 {
            return;
        }
        if let Ok(rt) = Handle::try_current() {
            let b = self.clone();
            rt.spawn_blocking(move || b.txn().recover(b.as_ref()));
        }
    }

    /// One applied metadata event, as the transaction coordinator sees it:
    /// a change of `__transaction_state`'s leaderships (or of the brokers,
    /// which decides who holds the ids before the topic exists), or changed
    /// transactional ids.
    pub(crate) fn txn_failover_event(self: &Arc<Self>, image: &MetaImage, e: &MetaEvent) {
        if !self.txn().in_quorum() {
            return;
        }
        match e {
            MetaEvent::Leadership { name, .. }
            | MetaEvent::TopicCreated(name)
            | MetaEvent::PartitionsCreated { name, .. }
            | MetaEvent::TopicDeleted { name, .. }
                if name == TRANSACTION_STATE_TOPIC =>
            {
                self.txn_place(image)
            }
            MetaEvent::Broker(_) if !image.topics.contains_key(TRANSACTION_STATE_TOPIC) => {
                self.txn_place(image)
            }
            MetaEvent::CoordinatorState(touched) => {
                for (space, key) in touched {
                    if space != TXNS_SPACE {
                        continue;
                    }
                    let rec = image
                        .coordinator_space(TXNS_SPACE)
                        .and_then(|m| m.get(key))
                        .and_then(|v| record_of(key, v));
                    self.txn().reconcile_applied(key, rec);
                }
            }
            _ => {}
        }
    }

    /// The periodic check: takes the leaderships of the last applied image
    /// if an event raced with them (placements only move forward, so an
    /// older image changes nothing). Blocking.
    pub fn txn_failover_tick(self: &Arc<Self>) {
        if !self.txn().in_quorum() {
            return;
        }
        if let Some(image) = self.image() {
            self.txn_place(&image);
        }
    }
}

#[cfg(test)]
#[path = "broker_txn_failover_tests.rs"]
mod tests;
