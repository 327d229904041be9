//! The transactional offsets a group's coordinator holds for a transaction
//! another broker coordinates (TxnOffsetCommit taken here, waiting for the
//! transaction's marker on the group's `__consumer_offsets` partition), in
//! the metadata quorum, so that they move with the group's coordinator.
//!
//! Space [`TXN_REMOTE_SPACE`] of `coordinator_state.v1` entries: the key is
//! the group's key prefix (its id as a JSON string, then NUL, as the
//! group's offset keys) followed by the producer id in decimal; the value
//! is `{"epoch", "offsets"}` ([`RemotePending`]) for that (group,
//! producer). A write is fenced exactly as the group's own writes (the
//! group's `__consumer_offsets` partition at the leader epoch this broker
//! loaded it at), so a deposed coordinator's late write is refused.
//!
//! This file owns the mapping between [`RemoteOffsets`] and the log:
//! [`QuorumRemoteOffsets`] writes; the table in memory mirrors what the log
//! applied for the groups placed on the partitions this broker leads:
//! loaded when it starts leading one, dropped when it stops (both from
//! [`Broker::reconcile_groups`], under the same lock as the groups'
//! reload), and given every applied change. [`Broker::import_remote_offsets`]
//! hands what a data directory's `producers.journal` held to the quorum,
//! once.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Weak};

use es_meta::records::{CoordinatorWrite, MetaRequest, MetaResponse, StateChange};
use es_meta::MetaImage;
use tokio::runtime::Handle;

use super::super::txn_failover::propose_state;
use super::super::Broker;
use super::offsets_prefix;
use crate::topics::CONSUMER_OFFSETS_TOPIC;
use crate::txn::error::TxnError;
use crate::txn::log::RemotePending;
use crate::txn::remote_offsets::{split_by_group, RemoteKey, RemoteOffsetsStore};

/// [`remote_key`] → [`RemotePending`].
pub const TXN_REMOTE_SPACE: &str = "txn_remote";

/// The key of (`group`, `producer_id`).
fn remote_key(group: &str, producer_id: i64) -> String {
    format!("{}{producer_id}", offsets_prefix(group))
}

/// The (group, producer id) of a key; `None` for a key es did not write.
fn parse_remote_key(key: &str) -> Option<RemoteKey> {
    let end = key.find('\0')?;
    let group: String = serde_json::from_str(&key[..end]).ok()?;
    let producer_id: i64 = key[end + 1..].parse().ok()?;
    (remote_key(&group, producer_id) == key).then_some((group, producer_id))
}

/// The pending offsets of one key; `None` (logged) if it does not parse,
/// which only a newer es writing a newer value could cause.
fn pending_of(key: &str, v: &serde_json::Value) -> Option<RemotePending> {
    match serde_json::from_value(v.clone()) {
        Ok(p) => Some(p),
        Err(e) => {
            tracing::error!(key, error = %e, "pending transactional offsets in the metadata log do not parse; ignored");
            None
        }
    }
}

/// The entries of `image` whose group `placed` selects.
fn image_entries(
    image: &MetaImage,
    placed: &dyn Fn(&str) -> bool,
) -> Vec<(RemoteKey, RemotePending)> {
    image
        .coordinator_space(TXN_REMOTE_SPACE)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| {
            let key = parse_remote_key(k)?;
            if !placed(&key.0) {
                return None;
            }
            Some((key, pending_of(k, v)?))
        })
        .collect()
}

/// The change that makes `pending` what the log holds for the key.
fn change(group: &str, producer_id: i64, pending: Option<&RemotePending>) -> StateChange {
    let key = remote_key(group, producer_id);
    match pending.and_then(|p| serde_json::to_value(p).ok()) {
        Some(value) => StateChange::Put {
            space: TXN_REMOTE_SPACE.into(),
            key,
            value,
        },
        None => StateChange::Delete {
            space: TXN_REMOTE_SPACE.into(),
            key,
        },
    }
}

/// Whether the groups of `__consumer_offsets` partitions `led` (of
/// `count`) include `group`; every group while the topic does not exist
/// (the log then takes only a lone broker's writes).
fn holds(led: &BTreeMap<i32, i32>, count: i32, group: &str) -> bool {
    count <= 0 || led.contains_key(&super::super::key_partition(group, count))
}

fn offsets_partitions(image: &MetaImage) -> i32 {
    image
        .topics
        .get(CONSUMER_OFFSETS_TOPIC)
        .map_or(0, |t| i32::try_from(t.partitions.len()).unwrap_or(i32::MAX))
}

/// The pending offsets' writes, proposed to the metadata quorum.
#[derive(Debug)]
pub(crate) struct QuorumRemoteOffsets {
    broker: Weak<Broker>,
    rt: Handle,
}

impl RemoteOffsetsStore for QuorumRemoteOffsets {
    fn write(
        &self,
        group: &str,
        producer_id: i64,
        pending: Option<&RemotePending>,
    ) -> Result<(), TxnError> {
        let broker = self
            .broker
            .upgrade()
            .ok_or(TxnError::CoordinatorNotAvailable)?;
        let req = MetaRequest::CoordinatorState(CoordinatorWrite {
            fence: broker.group_fence(group),
            changes: vec![change(group, producer_id, pending)],
        });
        propose_state(&self.rt, broker, req, "pending offsets")
    }
}

impl Broker {
    /// From now on the pending offsets live in the metadata quorum (startup,
    /// before the groups follow leadership).
    pub(super) fn remote_offsets_enter_quorum(self: &Arc<Self>) {
        let store = QuorumRemoteOffsets {
            broker: Arc::downgrade(self),
            rt: Handle::current(),
        };
        self.txn().remote_offsets().enter_quorum(Arc::new(store));
    }

    /// Moves the mirror with the leaderships `led` (of `count` partitions of
    /// `__consumer_offsets`): drops the groups no longer held, loads those
    /// of the `gained` partitions (every held group at `startup`). Called
    /// under the lock of the groups' leaderships.
    pub(super) fn reconcile_remote_offsets(
        &self,
        image: &MetaImage,
        led: &BTreeMap<i32, i32>,
        count: i32,
        gained: &BTreeSet<i32>,
        startup: bool,
    ) {
        let table = self.txn().remote_offsets();
        if !table.in_quorum() {
            return;
        }
        let dropped = table.unload(&|g| !holds(led, count, g));
        let load = |g: &str| {
            holds(led, count, g)
                && (startup || gained.contains(&super::super::key_partition(g, count.max(1))))
        };
        if !startup && gained.is_empty() {
            if dropped > 0 {
                tracing::info!(dropped, "dropped the pending transactional offsets of groups no longer coordinated here");
            }
            return;
        }
        let loaded = table.load(&load, image_entries(image, &load));
        if loaded > 0 || dropped > 0 {
            tracing::info!(
                loaded,
                dropped,
                "pending transactional offsets follow the __consumer_offsets leaderships"
            );
        }
    }

    /// The log applied changes to `touched` keys: the mirror takes them for
    /// the groups this broker coordinates (`led`, `None` before it follows
    /// leadership). On the log's apply thread.
    pub(super) fn remote_offsets_applied(
        &self,
        image: &MetaImage,
        touched: &[(String, String)],
        led: Option<&BTreeMap<i32, i32>>,
    ) {
        let table = self.txn().remote_offsets();
        let Some(led) = led.filter(|_| table.in_quorum()) else {
            return;
        };
        let count = offsets_partitions(image);
        for (space, key) in touched {
            if space != TXN_REMOTE_SPACE {
                continue;
            }
            let Some((group, producer_id)) = parse_remote_key(key) else {
                tracing::warn!(key, "a pending offsets key es did not write; ignored");
                continue;
            };
            if !holds(led, count, &group) {
                continue;
            }
            let pending = image
                .coordinator_space(TXN_REMOTE_SPACE)
                .and_then(|m| m.get(key))
                .and_then(|v| pending_of(key, v));
            table.applied(&group, producer_id, pending.as_ref());
        }
    }

    /// Hands the pending offsets `producers.journal` holds (a data directory
    /// from before they were in the quorum) to the quorum, one (group,
    /// producer) at a time under the group's fence, then has the journal
    /// forget them. One whose group's partition another broker leads stays
    /// in the journal (unused) for a later start; one the quorum already
    /// holds is newer there and is not overwritten.
    pub(super) async fn import_remote_offsets(self: &Arc<Self>) {
        let journaled = self.txn().journaled_remote_offsets();
        let Some(image) = self.image() else {
            return;
        };
        if journaled.is_empty() {
            return;
        }
        let mut left: BTreeMap<i64, RemotePending> = BTreeMap::new();
        let (mut imported, mut kept) = (0usize, 0usize);
        for (pid, p) in &journaled {
            for ((group, _), entry) in split_by_group(*pid, p) {
                let held = image
                    .coordinator_space(TXN_REMOTE_SPACE)
                    .is_some_and(|m| m.contains_key(&remote_key(&group, *pid)));
                let req = MetaRequest::CoordinatorState(CoordinatorWrite {
                    fence: self.group_fence(&group),
                    changes: vec![change(&group, *pid, Some(&entry))],
                });
                let done = held || matches!(self.propose(req).await, Ok(MetaResponse::None));
                if done {
                    imported += 1;
                } else {
                    kept += 1;
                    left.entry(*pid)
                        .or_insert_with(|| RemotePending {
                            epoch: entry.epoch,
                            offsets: Vec::new(),
                        })
                        .offsets
                        .extend(entry.offsets);
                }
            }
        }
        let producers: Vec<i64> = journaled.keys().copied().collect();
        let me = self.clone();
        let forgot = tokio::task::spawn_blocking(move || {
            me.txn().forget_journaled_remote(&left, &producers)
        })
        .await;
        match forgot {
            Ok(Ok(())) => tracing::info!(
                imported,
                kept,
                "handed the pending transactional offsets of producers.journal to the quorum"
            ),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "producers.journal still holds imported pending offsets; the next start imports them again")
            }
            Err(e) => tracing::warn!(error = %e, "forgetting imported pending offsets failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_their_group_and_producer_and_stay_under_the_groups_prefix() {
        for g in ["", "g", "g\"x", "a\0b", "ü", "g\\", "1"] {
            for pid in [0, 7, i64::MAX] {
                let k = remote_key(g, pid);
                assert_eq!(parse_remote_key(&k), Some((g.to_string(), pid)));
                assert!(k.starts_with(&offsets_prefix(g)));
            }
        }
        assert!(!remote_key("g1", 2).starts_with(&offsets_prefix("g")));
        for bad in [
            "g\x001",
            "\"g\"\0x",
            "\"g\"\0",
            "\"g\"\0-0",
            "\"g\"\0+1",
            "\"g\"\x0001",
        ] {
            assert_eq!(parse_remote_key(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn values_round_trip_and_a_delete_is_a_delete() {
        let p = RemotePending {
            epoch: 3,
            offsets: Vec::new(),
        };
        match change("g", 5, Some(&p)) {
            StateChange::Put { space, key, value } => {
                assert_eq!(space, TXN_REMOTE_SPACE);
                assert_eq!(parse_remote_key(&key), Some(("g".into(), 5)));
                assert_eq!(pending_of(&key, &value), Some(p));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(change("g", 5, None), StateChange::Delete { .. }));
        assert_eq!(pending_of("k", &serde_json::json!({"epoch": "x"})), None);
    }

    #[test]
    fn a_group_is_held_where_its_partition_is_led() {
        let led: BTreeMap<i32, i32> = [(super::super::super::key_partition("g", 3), 4)]
            .into_iter()
            .collect();
        assert!(holds(&led, 3, "g"));
        assert!(
            holds(&BTreeMap::new(), 0, "g"),
            "no topic: a lone broker holds all"
        );
        let other = (0..100)
            .map(|i| format!("h{i}"))
            .find(|h| !led.contains_key(&super::super::super::key_partition(h, 3)))
            .expect("a group elsewhere");
        assert!(!holds(&led, 3, &other));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_journals_pending_offsets_are_imported_once_and_follow_the_groups_partition() {
        use crate::handlers::wire_client::open;
        use crate::txn::{TxnConfig, TxnCoordinator, TxnOffset};

        let dir = tempfile::tempdir().expect("tmp");
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).expect("mkdir");
        {
            // A data directory from before: the journal holds them.
            let c = TxnCoordinator::open(
                Arc::new(es_storage::RealFs),
                &data,
                TxnConfig::default(),
                es_storage::clock::system(),
            )
            .expect("open");
            let o = TxnOffset {
                group: "g".into(),
                topic: "t".into(),
                partition: 0,
                offset: 4,
                leader_epoch: -1,
                metadata: None,
                member_id: String::new(),
                generation_id: -1,
                instance_id: None,
            };
            c.txn_offset_commit_remote(9, 2, "g", "", None, -1, vec![o])
                .expect("held");
            c.close().expect("fold");
        }
        let b = open(dir.path()).await;
        assert!(b.txn().remote_offsets().in_quorum());
        let image = b.image().expect("image");
        assert!(image
            .coordinator_space(TXN_REMOTE_SPACE)
            .is_some_and(|m| m.contains_key(&remote_key("g", 9))));
        assert!(
            b.txn().journaled_remote_offsets().is_empty(),
            "forgotten locally"
        );
        assert!(b.txn().has_pending_offset("g", "t", 0));
        // The topic appears: the group's partition is loaded under its
        // leader epoch, the pending offsets with it.
        b.offsets_topic().await.expect("topic");
        assert!(b.txn().has_pending_offset("g", "t", 0));
        b.stop_metadata().await;
        drop(b);
        let b = open(dir.path()).await;
        assert!(
            b.txn().has_pending_offset("g", "t", 0),
            "loaded from the metadata log at startup"
        );
        assert_eq!(
            b.txn().remote_offsets().producers_of("g"),
            [9].into_iter().collect()
        );
    }
}
