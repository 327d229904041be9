//! This broker's part in replicating share-group state with its partitions
//! (docs/share-groups-design.md §3.10): the [`ShareReplication`] the share
//! manager asks about in-sync followers, and a follower's copy loop.
//!
//! A copy loop ([`share_loop`]) runs per leader this broker follows, beside
//! that leader's fetch loop and over the same partitions: each round sends
//! one ES_SHARE_STATE request (`handlers/share_state.rs`) saying what this
//! broker holds of each partition's share-partitions, applies the answer
//! ([`ShareManager::copy_partition`]: fsynced before the next request says
//! it holds it), and asks again; the leader holds a request with nothing
//! new for up to [`MAX_WAIT_MS`], so the copy follows each change within a
//! round trip. What it holds counts within one leader epoch and leader
//! process only: a new term, a restarted leader or a restarted follower
//! starts with every share-partition whole.
//!
//! [`ShareManager::copy_partition`]: crate::shares::manager::ShareManager::copy_partition

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Weak};
use std::time::Duration;

use uuid::Uuid;

use super::replicas::{leader_addr, Following, Loop};
use super::Broker;
use crate::handlers::share_state::{
    Held, ShareStatePartition, ShareStateRequest, ShareStateResponse, ES_SHARE_STATE,
};
use crate::interbroker::{InterBrokerClient, REQUEST_TIMEOUT_MS};
use crate::replica::Role;
use crate::shares::manager::ShareReplication;

/// How long the leader may hold a copy request with nothing new.
pub(super) const MAX_WAIT_MS: u64 = 500;
/// Pause after a failed round.
const RETRY_BACKOFF: Duration = Duration::from_millis(200);

/// The share manager's view of this broker's partitions.
pub(super) struct BrokerShares(pub(super) Weak<Broker>);

impl ShareReplication for BrokerShares {
    fn followers(&self, topic_id: Uuid, partition: i32) -> Option<Vec<i32>> {
        let b = self.0.upgrade()?;
        let slot = b.topic_by_id(topic_id)?.partition(partition)?;
        let r = slot.log.replica();
        let Some(a) = r.assignment() else {
            // No metadata assignment: a broker on its own.
            return Some(Vec::new());
        };
        if r.role() != Role::Leader {
            return None;
        }
        let me = b.node_id();
        Some(a.isr.iter().copied().filter(|&i| i != me).collect())
    }

    fn lagging(&self, topic_id: Uuid, partition: i32, followers: &[i32]) {
        let Some(b) = self.0.upgrade() else {
            return;
        };
        let Some(t) = b.topic_by_id(topic_id) else {
            return;
        };
        if let Some(slot) = t.partition(partition) {
            b.isr_remove(&t, &slot, followers);
        }
    }

    fn lag_max(&self) -> Duration {
        let ms = self
            .0
            .upgrade()
            .map_or(30_000, |b| b.config.replica_lag_time_max_ms);
        Duration::from_millis(u64::try_from(ms).unwrap_or(30_000).max(1))
    }
}

/// What this broker holds of one followed partition's share state.
struct Held1 {
    leader_epoch: i32,
    incarnation: u64,
    groups: BTreeMap<String, u64>,
}

/// One leader's copy loop; ends when the broker is gone or stopping.
pub(super) async fn share_loop(b: Weak<Broker>, leader: i32, l: Arc<Loop>) {
    let client = InterBrokerClient::default();
    let mut held: HashMap<(String, i32), Held1> = HashMap::new();
    loop {
        let Some(broker) = b.upgrade() else {
            return;
        };
        if broker.is_stopping() {
            return;
        }
        let parts: Vec<Following> = l.parts.lock().values().cloned().collect();
        held.retain(|k, _| {
            parts
                .iter()
                .any(|p| p.topic.name == k.0 && p.slot.index == k.1)
        });
        if parts.is_empty() {
            drop(broker);
            l.share_wake.notified().await;
            continue;
        }
        let Some(addr) = leader_addr(&broker, leader) else {
            drop(broker);
            tokio::time::sleep(RETRY_BACKOFF).await;
            continue;
        };
        let req = ShareStateRequest {
            replica_id: broker.node_id(),
            max_wait_ms: MAX_WAIT_MS,
            partitions: parts
                .iter()
                .map(|p| ShareStatePartition {
                    topic: p.topic.name.clone(),
                    topic_id: p.topic.id,
                    partition: p.slot.index,
                    leader_epoch: p.leader_epoch,
                    held: held
                        .get(&(p.topic.name.clone(), p.slot.index))
                        .filter(|h| h.leader_epoch == p.leader_epoch)
                        .map(|h| Held {
                            incarnation: h.incarnation,
                            groups: h.groups.clone(),
                        }),
                })
                .collect(),
        };
        let timeout = Duration::from_millis(MAX_WAIT_MS + REQUEST_TIMEOUT_MS);
        let sent = client
            .send_json::<_, ShareStateResponse>(leader, &addr, ES_SHARE_STATE, &req, timeout)
            .await;
        let resp = match sent {
            Ok(r) if r.error_code == 0 => r,
            Ok(r) => {
                tracing::debug!(leader, error = r.error_code, message = ?r.error_message, "share-state copy refused; retrying");
                drop(broker);
                tokio::time::sleep(RETRY_BACKOFF).await;
                continue;
            }
            Err(e) => {
                tracing::debug!(leader, error = %e, "share-state copy failed; retrying");
                drop(broker);
                tokio::time::sleep(RETRY_BACKOFF).await;
                continue;
            }
        };
        let mut served = 0usize;
        for a in resp.partitions {
            let Some(p) = parts
                .iter()
                .find(|p| p.topic.name == a.topic && p.slot.index == a.partition)
            else {
                continue;
            };
            if a.error_code != 0 {
                tracing::debug!(topic = %a.topic, partition = a.partition, error = a.error_code, "share-state copy of a partition refused");
                continue;
            }
            served += 1;
            let key = (p.topic.name.clone(), p.slot.index);
            let prev = held
                .get(&key)
                .filter(|h| h.leader_epoch == p.leader_epoch && h.incarnation == resp.incarnation);
            let scan = prev.is_none();
            let before = prev.map(|h| h.groups.clone()).unwrap_or_default();
            let (bk, slot, topic, epoch) = (
                broker.clone(),
                p.slot.clone(),
                p.topic.clone(),
                p.leader_epoch,
            );
            let copied = tokio::task::spawn_blocking(move || {
                let following = || {
                    let r = slot.log.replica();
                    r.role() == Role::Follower { leader }
                        && r.assignment().is_some_and(|a| a.leader_epoch == epoch)
                };
                bk.shares().copy_partition(
                    &topic.name,
                    topic.id,
                    slot.index,
                    a.shares,
                    &before,
                    scan,
                    &following,
                )
            })
            .await;
            match copied {
                Ok(groups) => {
                    held.insert(
                        key,
                        Held1 {
                            leader_epoch: p.leader_epoch,
                            incarnation: resp.incarnation,
                            groups,
                        },
                    );
                }
                Err(e) => tracing::error!(error = %e, "share-state copy task failed"),
            }
        }
        if served == 0 {
            drop(broker);
            tokio::time::sleep(RETRY_BACKOFF).await;
        }
    }
}

impl Broker {
    /// Whether follower `follower` holds every share-partition of the
    /// partition as this leader has it (one more condition for it to join
    /// the ISR: a new leader must hold every acknowledgement answered).
    pub(crate) fn shares_caught_up(&self, topic_id: Uuid, partition: i32, follower: i32) -> bool {
        self.shares()
            .follower_caught_up(topic_id, partition, follower)
    }
}
