//! Which partitions this broker hosts as their replica sets change
//! (reassignments, KIP-455): a broker added to a partition's replicas opens
//! it (an empty directory; the fetch loop then copies the leader's log), a
//! broker taken out of them stops following it, closes it and removes its
//! directory.
//!
//! Invariants:
//! - Nothing is removed while the broker replays entries it applied before
//!   a restart (before it has registered and applied the log up to its
//!   registration, "ready"): an old entry may show the broker outside a
//!   partition's replicas that a later entry puts back, and its data must
//!   not be lost. Once ready, one pass ([`Broker::sweep_placement`]) removes
//!   what the current metadata no longer places here; every entry applied
//!   afterwards is new to this broker and acts at once.
//! - Decisions are made per partition in partition-epoch order: every
//!   replica-set change moves the partition epoch, and a decision taken on
//!   an image older than the last one taken for that partition is skipped
//!   (the start-up pass may read an image that an entry being applied has
//!   already overtaken).
//! - A partition still placed here is never removed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use es_meta::MetaImage;
use es_storage::StorageError;
use parking_lot::Mutex;
use uuid::Uuid;

use super::Broker;
use crate::replica::{Assignment, WaitError};
use crate::topics::Topic;

/// This broker's placement state.
#[derive(Debug, Default)]
pub(crate) struct Placement {
    /// Registered and caught up with the log as of the registration.
    ready: AtomicBool,
    /// Per partition (topic id, index): the partition epoch of the image
    /// the last decision was taken on. The lock serialises decisions.
    decided: Mutex<HashMap<(Uuid, i32), i32>>,
}

impl Broker {
    fn placement(&self) -> Arc<Placement> {
        self.extension(Placement::default)
    }

    /// The replicas of these partitions of `name` changed in `image`: host
    /// the ones placed here, remove (once ready) the ones no longer placed
    /// here. Blocking.
    pub(crate) fn place_partitions(
        &self,
        image: &MetaImage,
        name: &str,
        partitions: &[i32],
    ) -> Result<(), StorageError> {
        let Some(topic) = self.topic(name) else {
            return Ok(());
        };
        if image.topics.get(name).map(|t| t.id.as_str()) != Some(topic.id.to_string().as_str()) {
            return Ok(());
        }
        let pl = self.placement();
        let ready = pl.ready.load(Ordering::Acquire);
        let mut decided = pl.decided.lock();
        for &p in partitions {
            self.place_one(image, &topic, p, ready, &mut decided)?;
        }
        Ok(())
    }

    /// Marks the broker ready and makes the hosted partitions what the
    /// current metadata places here: opens the missing ones and removes
    /// the ones no longer placed here. Blocking; called once the broker has
    /// registered and applied the log up to its registration.
    pub(crate) fn sweep_placement(&self) -> Result<(), StorageError> {
        let pl = self.placement();
        let mut decided = pl.decided.lock();
        pl.ready.store(true, Ordering::Release);
        let Some(image) = self.image() else {
            return Ok(());
        };
        for topic in self.topics() {
            let Some(info) = image.topics.get(&topic.name) else {
                continue;
            };
            if info.id != topic.id.to_string() {
                continue;
            }
            for p in 0..topic.partition_count() {
                self.place_one(&image, &topic, p, true, &mut decided)?;
            }
        }
        Ok(())
    }

    fn place_one(
        &self,
        image: &MetaImage,
        topic: &Arc<Topic>,
        p: i32,
        ready: bool,
        decided: &mut HashMap<(Uuid, i32), i32>,
    ) -> Result<(), StorageError> {
        let Some(info) = image
            .topics
            .get(&topic.name)
            .and_then(|t| t.partitions.get(usize::try_from(p).ok()?))
        else {
            return Ok(());
        };
        let key = (topic.id, p);
        if decided.get(&key).is_some_and(|&e| e > info.partition_epoch) {
            return Ok(());
        }
        let placed = info.replicas.contains(&self.node_id());
        let open = topic.partition(p).is_some();
        if placed && !open {
            topic.host(&self.storage, &|i| i == p)?;
            tracing::info!(topic = %topic.name, partition = p, replicas = ?info.replicas, "hosting a new replica");
        } else if !placed && open {
            if !ready {
                // Possibly a replay: the start-up pass decides.
                return Ok(());
            }
            self.remove_replica(topic, p, info)?;
        }
        decided.insert(key, info.partition_epoch);
        Ok(())
    }

    /// Stops following partition `p` of `topic`, fails the waits still
    /// open on it, closes it and removes its directory.
    fn remove_replica(
        &self,
        topic: &Arc<Topic>,
        p: i32,
        info: &es_meta::image::PartitionInfo,
    ) -> Result<(), StorageError> {
        self.fetchers().stop_following(&topic.name, p);
        if let Some(slot) = topic.partition(p) {
            let a = Assignment {
                leader: info.leader,
                leader_epoch: info.leader_epoch,
                partition_epoch: info.partition_epoch,
                replicas: info.replicas.clone(),
                isr: info.isr.clone(),
            };
            let end = slot.log.storage().log_end_offset();
            let t = slot
                .log
                .replica()
                .apply(self.node_id(), a, end, self.clock().now_ms());
            for d in t.failed {
                d(Err(WaitError::NotLeader));
            }
            slot.waiters.wake_all();
        }
        if topic.unhost(&self.fs, p)?.is_some() {
            tracing::info!(topic = %topic.name, partition = p, replicas = ?info.replicas, "removed a replica no longer placed here");
        }
        Ok(())
    }
}
