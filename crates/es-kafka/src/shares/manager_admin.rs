//! The offsets admin side of [`ShareManager`] (docs/share-groups-design.md
//! §2.8): what DescribeShareGroupOffsets reads of a share-partition
//! (without creating state for one that has none), AlterShareGroupOffsets'
//! reset (a Reset entry, or an Init for a share-partition without state,
//! answered after its fsync), and the deletions of DeleteShareGroupOffsets
//! and DeleteGroups (files removed durably, the share-partition forgotten
//! so that its next use starts from `share.auto.offset.reset`; in a cluster
//! each leader removes those it leads, `handlers::share_admin`), and topic
//! deletion's (every group's share-partitions of the topic).

use std::sync::Arc;

use es_storage::StorageError;
use uuid::Uuid;

use super::{DurableTicket, Init, Live, ShareManager, Slot, SlotState, INITIAL_STATE_EPOCH};
use crate::shares::locks::ShareKey;
use crate::shares::partition::{SharePartition, ShareSummary, OFFSET_MAX};
use crate::shares::store::{ShareFiles, SHARES_DIR};
use crate::shares::target::{ShareFailure, ShareTarget};

/// What DescribeShareGroupOffsets shows of a share-partition with state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShareOffsets {
    /// Start offset, delivery-complete count, cursor.
    pub summary: ShareSummary,
    /// The leader epoch the share-partition was loaded at.
    pub leader_epoch: i32,
}

fn offsets(live: &Live) -> ShareOffsets {
    ShareOffsets {
        summary: live.core.summary(),
        leader_epoch: live.leader_epoch,
    }
}

impl ShareManager {
    /// The share-partition's offsets, loading it if it has files; `None`
    /// when it has no state (Kafka's StartOffset -1). Never creates state; a
    /// log start past the start moves it first. Blocking.
    pub fn describe_offsets(
        &self,
        t: &ShareTarget<'_>,
    ) -> Result<Option<ShareOffsets>, ShareFailure> {
        let loaded = self
            .slot_if_present(t.key)
            .is_some_and(|s| matches!(*s.state.lock(), SlotState::Live(_)));
        let files = ShareFiles::new(&self.data_dir, &t.key.group, t.topic, t.key.partition);
        if !loaded && !files.exist(self.fs.as_ref()) {
            return Ok(None);
        }
        // Through the load path, so that a log start moved by retention or
        // DeleteRecords moves the start first (§3.11).
        self.with_live_init(t, Init::Absent, |_, _, live, _| Ok(offsets(live)))
    }

    /// AlterShareGroupOffsets of one share-partition: it starts over at
    /// `start_offset` with nothing in flight and a new state epoch (an Init
    /// entry when it had no state). Records acquired before are no longer
    /// held: their acknowledgements are refused. A negative offset names no
    /// record: the share-partition's state is removed instead, and its next
    /// use starts from `share.auto.offset.reset` (Kafka's -1, "not
    /// initialised"). The answer waits for the ticket. Blocking.
    pub fn reset_offsets(
        &self,
        t: &ShareTarget<'_>,
        start_offset: i64,
    ) -> Result<Option<DurableTicket>, ShareFailure> {
        if start_offset < 0 {
            self.delete_offsets(t.key, t.topic)?;
            return Ok(None);
        }
        let start = start_offset.min(OFFSET_MAX);
        self.with_live_init(t, Init::At(start), |me, slot, live, init| {
            if let Some(ticket) = init {
                // Loaded without state: its Init entry is the reset.
                return Ok(DurableTicket::new(slot, &live.store, ticket));
            }
            let epoch = live
                .store
                .state()
                .map_or(INITIAL_STATE_EPOCH, |s| s.state_epoch)
                .saturating_add(1);
            let ticket = live.store.write_reset(epoch, start)?;
            me.replication.changed();
            live.core = SharePartition::new(start, live.core.limits());
            // Parked fetches look at the new start.
            slot.available.notify_waiters();
            Ok(DurableTicket::new(slot, &live.store, ticket))
        })
    }

    /// DeleteShareGroupOffsets of one share-partition (and a reset to a
    /// negative offset): its files are removed durably and it is forgotten,
    /// loaded or not; its next use starts without state. Blocking.
    pub fn delete_offsets(&self, key: &ShareKey, topic: &str) -> Result<(), StorageError> {
        for _ in 0..16 {
            let slot = self.slot_for(key);
            let mut st = slot.state.lock();
            let r = match &*st {
                // Unloaded by the sweep after the lookup: look again.
                SlotState::Gone => continue,
                SlotState::Live(live) => live.store.remove_files(),
                SlotState::Mirror(store) => store.remove_files(),
                SlotState::Unloaded | SlotState::Fenced(_) => {
                    ShareFiles::new(&self.data_dir, &key.group, topic, key.partition)
                        .remove(self.fs.as_ref())
                }
            };
            self.forget(&slot, &mut st);
            return r;
        }
        Err(StorageError::Invalid(format!(
            "share-partition {}/{}-{} unloaded under every attempt to delete it",
            key.group, topic, key.partition
        )))
    }

    /// DeleteGroups of a share group: every share-partition the group
    /// recorded (`recorded`: topic, topic id, partition), every other one of
    /// the group in memory, then the group's directory with whatever else
    /// it holds. Goes on past a failure and returns the first. Blocking.
    pub fn delete_group(
        &self,
        group: &str,
        recorded: &[(String, Uuid, i32)],
    ) -> Result<(), StorageError> {
        let mut first = None;
        for (topic, id, p) in recorded {
            if let Err(e) = self.delete_offsets(&ShareKey::new(group, *id, *p), topic) {
                first.get_or_insert(e);
            }
        }
        self.remove_loaded(|k| &*k.group == group, &mut first);
        let dir = ShareFiles::new(&self.data_dir, group, "", 0).dir;
        if self.fs.exists(&dir) {
            let r = self
                .fs
                .remove_dir_all(&dir)
                .and_then(|()| self.fs.sync_dir(&self.data_dir.join(SHARES_DIR)));
            if let Err(e) = r {
                first.get_or_insert(e.into());
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// DeleteGroups in a cluster, on a leader, once it has deleted the
    /// group's share-partitions it leads: the group's directory is removed
    /// when nothing is left in it (copies of share-partitions this node
    /// follows stay with the replication, which owns them). Blocking.
    pub fn remove_group_dir_if_empty(&self, group: &str) -> Result<(), StorageError> {
        let dir = ShareFiles::new(&self.data_dir, group, "", 0).dir;
        let left = match self.fs.list(&dir) {
            Ok(names) => names.len(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        if left > 0 {
            return Ok(());
        }
        self.fs.remove_dir_all(&dir)?;
        self.fs.sync_dir(&self.data_dir.join(SHARES_DIR))?;
        Ok(())
    }

    /// Topic deletion: every share-partition of the topic, in every group,
    /// loaded or not, is removed and forgotten (its records are gone with
    /// the log). `partitions` is the topic's partition count. Goes on past a
    /// failure and returns the first. Blocking.
    pub fn delete_topic(
        &self,
        topic: &str,
        topic_id: Uuid,
        partitions: i32,
    ) -> Result<(), StorageError> {
        let mut first = None;
        self.remove_loaded(|k| k.topic_id == topic_id, &mut first);
        let root = self.data_dir.join(SHARES_DIR);
        let groups = match self.fs.list(&root) {
            Ok(g) => g,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        for g in groups {
            let dir = root.join(g);
            for p in 0..partitions.max(0) {
                let files = ShareFiles::in_group_dir(&dir, topic, p);
                if files.exist(self.fs.as_ref()) {
                    if let Err(e) = files.remove(self.fs.as_ref()) {
                        first.get_or_insert(e);
                    }
                }
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// Removes the files of every share-partition in memory that `pick`
    /// names and forgets it; the first failure goes to `first`.
    fn remove_loaded(&self, pick: impl Fn(&ShareKey) -> bool, first: &mut Option<StorageError>) {
        let slots: Vec<Arc<Slot>> = self
            .slots
            .lock()
            .iter()
            .filter(|(k, _)| pick(k))
            .map(|(_, s)| s.clone())
            .collect();
        for slot in slots {
            let mut st = slot.state.lock();
            let store = match &*st {
                SlotState::Live(live) => Some(&live.store),
                SlotState::Mirror(store) => Some(store),
                _ => None,
            };
            if let Some(Err(e)) = store.map(|s| s.remove_files()) {
                first.get_or_insert(e);
            }
            if !matches!(*st, SlotState::Gone) {
                self.forget(&slot, &mut st);
            }
        }
    }

    /// Drops a slot whose files are gone: whoever holds it looks again and
    /// finds a new, unloaded one. Called under the slot's mutex; takes the
    /// map's (nothing takes a slot's mutex while holding the map's but by
    /// `try_lock`).
    fn forget(&self, slot: &Arc<Slot>, st: &mut SlotState) {
        *st = SlotState::Gone;
        self.replication.forget(&slot.key);
        self.locks.set(&slot.key, None);
        slot.available.notify_waiters();
        let mut map = self.slots.lock();
        if map.get(&slot.key).is_some_and(|s| Arc::ptr_eq(s, slot)) {
            map.remove(&slot.key);
        }
    }
}
