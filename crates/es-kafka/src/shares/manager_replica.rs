//! The cluster side of [`ShareManager`] (docs/share-groups-design.md
//! §3.10): share state fails over with its partition.
//!
//! - **On the leader**: every write is kept a while by its store
//!   ([`ShareStore::replica_view`]); a follower's request
//!   (`handlers/share_state.rs`) says what it holds of each share-partition
//!   of a partition, is answered with what it lacks ([`CopiedShare`]: the
//!   writes since, or the whole state), and confirms what it held
//!   ([`ShareManager::confirm`]). An answer that waited for a journal write
//!   ([`ShareManager::wait_durable`]) also waits until every in-sync follower
//!   has confirmed it, as acks=all waits for the ISR; a follower that does
//!   not within `replica.lag.time.max.ms` is proposed out of the ISR
//!   ([`ShareReplication::lagging`]).
//! - **On a follower**: the copy ([`ShareManager::copy_partition`]) writes
//!   the leader's writes into its own files with its own sequences, fsyncs
//!   them before saying it holds them, and removes the share-partitions the
//!   leader no longer has. A copied share-partition is a [`SlotState::Mirror`]
//!   slot, so nothing else touches its files.
//! - **Leadership moves**: a broker that stops leading a partition drops its
//!   share-partitions from memory ([`ShareManager::demote`]; the answers
//!   still waiting fail with NOT_LEADER_OR_FOLLOWER); one that starts
//!   leading loads them from its copy exactly as after a restart (§3.4).
//!
//! What a follower holds is counted per leader term and leader process
//! ([`ShareManager::incarnation`]): a follower that follows a new term or a
//! restarted leader takes every share-partition whole first, so a copy is
//! never continued from another history.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use es_storage::StorageError;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tokio::sync::{oneshot, Notify};
use uuid::Uuid;

use super::{Init, ShareManager, Slot, SlotState};
use crate::shares::locks::ShareKey;
use crate::shares::store::{ReplicaView, ShareState, ShareStore, SHARES_DIR};
use crate::shares::target::{ShareConfig, ShareFailure, ShareLog, ShareTarget};

/// What the share-partitions ask of the broker about replication.
pub trait ShareReplication: Send + Sync {
    /// The followers an answer about `(topic_id, partition)` must wait for:
    /// the in-sync replicas but this broker (empty when it is alone or the
    /// partition is not replicated); `None` when this broker does not lead
    /// the partition (the answer fails with NOT_LEADER_OR_FOLLOWER).
    fn followers(&self, topic_id: Uuid, partition: i32) -> Option<Vec<i32>>;
    /// In-sync followers that did not confirm a write within
    /// [`ShareReplication::lag_max`]: the leader proposes the ISR without
    /// them, as for a follower whose log falls behind.
    fn lagging(&self, topic_id: Uuid, partition: i32, followers: &[i32]);
    /// `replica.lag.time.max.ms`.
    fn lag_max(&self) -> Duration;
}

/// One share-partition as the leader sends it to a follower: the writes
/// after what the follower holds, or the whole state; `seq` is the leader's
/// sequence the follower holds once it has applied them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CopiedShare {
    pub group: String,
    pub seq: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<CopiedState>,
    /// Each write's journal entries, as the leader wrote them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writes: Vec<Vec<Vec<u8>>>,
}

/// A share-partition's whole state (as its snapshot holds it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CopiedState {
    pub topic_id: Uuid,
    pub state_epoch: i32,
    pub leader_epoch: i32,
    pub start_offset: i64,
    /// `[first, last, state, delivery count]`, ascending.
    pub batches: Vec<(i64, i64, u8, u16)>,
}

impl CopiedState {
    fn of(s: &ShareState) -> CopiedState {
        CopiedState {
            topic_id: s.topic_id,
            state_epoch: s.state_epoch,
            leader_epoch: s.leader_epoch,
            start_offset: s.view.start_offset(),
            batches: s.parts(),
        }
    }

    fn to_state(&self) -> Result<ShareState, String> {
        ShareState::from_parts(
            self.topic_id,
            self.state_epoch,
            self.leader_epoch,
            self.start_offset,
            &self.batches,
        )
    }
}

/// Why an answer's wait for the followers failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum NotReplicated {
    /// This broker no longer leads the partition.
    NotLeader,
    /// The in-sync followers did not confirm within twice the lag time.
    TimedOut,
}

/// What a share-partition's followers hold, and the answers waiting.
#[derive(Default)]
pub(super) struct ReplicaAcks {
    confirmed: HashMap<i32, u64>,
    waiters: Vec<(u64, oneshot::Sender<Result<(), NotReplicated>>)>,
}

impl ReplicaAcks {
    fn holds(&self, followers: &[i32], seq: u64) -> bool {
        followers
            .iter()
            .all(|f| self.confirmed.get(f).is_some_and(|&s| s >= seq))
    }

    /// Answers the waiters the followers now cover (all of them, failed,
    /// when this broker no longer leads).
    fn settle(&mut self, followers: Option<&[i32]>) {
        let waiters = std::mem::take(&mut self.waiters);
        for (seq, tx) in waiters {
            match followers {
                None => {
                    let _ = tx.send(Err(NotReplicated::NotLeader));
                }
                Some(f) if self.holds(f, seq) => {
                    let _ = tx.send(Ok(()));
                }
                Some(_) => self.waiters.push((seq, tx)),
            }
        }
    }
}

/// The manager's replication state.
pub(super) struct Replication {
    hook: OnceLock<Arc<dyn ShareReplication>>,
    /// This process: a follower's counts are from one leader process.
    incarnation: u64,
    /// Bumped at every change a follower may need; [`Replication::notify`]
    /// wakes the requests parked for one.
    version: AtomicU64,
    notify: Notify,
    /// The last sequence of share-partitions unloaded from memory, so a
    /// follower's request needs no load to find it current.
    unloaded: Mutex<HashMap<ShareKey, u64>>,
    /// By partition: the followers that hold its share state of this
    /// process (they said so in a request).
    synced: Mutex<HashMap<(Uuid, i32), std::collections::HashSet<i32>>>,
}

impl Default for Replication {
    fn default() -> Self {
        Replication {
            hook: OnceLock::new(),
            incarnation: Uuid::new_v4().as_u64_pair().0,
            version: AtomicU64::new(0),
            notify: Notify::new(),
            unloaded: Mutex::new(HashMap::new()),
            synced: Mutex::new(HashMap::new()),
        }
    }
}

impl Replication {
    /// A change followers may need happened.
    pub(super) fn changed(&self) {
        self.version.fetch_add(1, Ordering::AcqRel);
        self.notify.notify_waiters();
    }

    pub(super) fn unloaded(&self, key: &ShareKey, seq: Option<u64>) {
        if let Some(s) = seq {
            self.unloaded.lock().insert(key.clone(), s);
        }
    }

    pub(super) fn forget(&self, key: &ShareKey) {
        self.unloaded.lock().remove(key);
        self.changed();
    }
}

/// The file stem a group's share directory has, back to the group's name
/// (`groups::store::file_name`'s escaping); `None` for a hashed stem.
fn group_of_stem(stem: &str) -> Option<String> {
    if stem == "%" {
        return Some(String::new());
    }
    if stem.contains('~') {
        return None;
    }
    let b = stem.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = stem.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    let name = String::from_utf8(out).ok()?;
    (crate::groups::store::file_name(&name)
        == format!("{stem}{}", crate::groups::store::FILE_SUFFIX))
    .then_some(name)
}

impl ShareManager {
    /// The broker's side of replication; set once at start (without it,
    /// as on one node, nothing waits for followers).
    pub fn set_replication(&self, hook: Arc<dyn ShareReplication>) {
        let _ = self.replication.hook.set(hook);
    }

    /// This process's incarnation (see the module comment).
    pub fn incarnation(&self) -> u64 {
        self.replication.incarnation
    }

    /// Waits until a change followers may need happens after `since` (a
    /// value of [`ShareManager::change_version`]), at most `max`.
    pub async fn wait_change(&self, since: u64, max: Duration) {
        let notified = self.replication.notify.notified();
        if self.change_version() != since {
            return;
        }
        let _ = tokio::time::timeout(max, notified).await;
    }

    /// See [`ShareManager::wait_change`].
    pub fn change_version(&self) -> u64 {
        self.replication.version.load(Ordering::Acquire)
    }

    /// Waits until every in-sync follower holds the slot's write `seq`.
    pub(super) async fn wait_replicated(
        &self,
        slot: &Arc<Slot>,
        seq: u64,
    ) -> Result<(), ShareFailure> {
        let Some(hook) = self.replication.hook.get() else {
            return Ok(());
        };
        let key = &slot.key;
        let lag_max = hook.lag_max();
        let mut shrunk = false;
        loop {
            let followers = hook.followers(key.topic_id, key.partition);
            let rx = {
                let mut acks = slot.replicas.lock();
                match &followers {
                    None => return Err(not_replicated(key, NotReplicated::NotLeader)),
                    Some(f) if acks.holds(f, seq) => return Ok(()),
                    Some(_) => {}
                }
                let (tx, rx) = oneshot::channel();
                acks.waiters.push((seq, tx));
                rx
            };
            match tokio::time::timeout(lag_max, rx).await {
                Ok(Ok(Ok(()))) => return Ok(()),
                Ok(Ok(Err(e))) => return Err(not_replicated(key, e)),
                Ok(Err(_)) => return Err(not_replicated(key, NotReplicated::NotLeader)),
                Err(_) if shrunk => return Err(not_replicated(key, NotReplicated::TimedOut)),
                Err(_) => {
                    let behind: Vec<i32> = {
                        let acks = slot.replicas.lock();
                        followers
                            .unwrap_or_default()
                            .into_iter()
                            .filter(|f| acks.confirmed.get(f).is_none_or(|&s| s < seq))
                            .collect()
                    };
                    tracing::warn!(group = %key.group, topic_id = %key.topic_id, partition = key.partition, ?behind, "in-sync followers did not copy a share-state change within replica.lag.time.max.ms");
                    hook.lagging(key.topic_id, key.partition, &behind);
                    shrunk = true;
                }
            }
        }
    }

    /// A follower holds the share-partition up to `seq` (from its request).
    pub fn confirm(&self, key: &ShareKey, replica: i32, seq: u64) {
        let Some(slot) = self.slot_if_present(key) else {
            return;
        };
        let followers = self
            .replication
            .hook
            .get()
            .and_then(|h| h.followers(key.topic_id, key.partition));
        let mut acks = slot.replicas.lock();
        let c = acks.confirmed.entry(replica).or_insert(0);
        *c = (*c).max(seq);
        if followers.is_some() {
            acks.settle(followers.as_deref());
        }
    }

    /// A follower's request says it holds the partition's share state of
    /// this process (what it holds of each share-partition is confirmed
    /// one by one, [`ShareManager::confirm`]).
    pub fn follower_synced(&self, topic_id: Uuid, partition: i32, replica: i32) {
        self.replication
            .synced
            .lock()
            .entry((topic_id, partition))
            .or_default()
            .insert(replica);
    }

    /// Whether `follower` holds every share-partition of the partition as
    /// loaded here (those not in memory have not changed since it held
    /// them whole).
    pub fn follower_caught_up(&self, topic_id: Uuid, partition: i32, follower: i32) -> bool {
        let synced = self
            .replication
            .synced
            .lock()
            .get(&(topic_id, partition))
            .is_some_and(|s| s.contains(&follower));
        synced
            && self
                .partition_slots(topic_id, partition)
                .iter()
                .all(|slot| {
                    let seq = match &*slot.state.lock() {
                        SlotState::Live(live) => live.store.last_seq(),
                        _ => None,
                    };
                    seq.is_none_or(|seq| {
                        slot.replicas
                            .lock()
                            .confirmed
                            .get(&follower)
                            .is_some_and(|&c| c >= seq)
                    })
                })
    }

    /// The partition's in-sync replicas or its leadership changed: the
    /// answers waiting for its followers look again.
    pub fn replicas_changed(&self, topic_id: Uuid, partition: i32) {
        let followers = self
            .replication
            .hook
            .get()
            .and_then(|h| h.followers(topic_id, partition));
        for slot in self.partition_slots(topic_id, partition) {
            slot.replicas.lock().settle(followers.as_deref());
        }
    }

    /// This broker no longer leads the partition: its share-partitions
    /// leave memory (what members hold is released by the next leader's
    /// load, as after a restart), the answers waiting for followers fail.
    pub fn demote(&self, topic_id: Uuid, partition: i32) {
        for slot in self.partition_slots(topic_id, partition) {
            let mut st = slot.state.lock();
            if matches!(*st, SlotState::Live(_)) {
                *st = SlotState::Unloaded;
                drop(st);
                self.locks.set(&slot.key, None);
                slot.available.notify_waiters();
            }
            let mut acks = slot.replicas.lock();
            acks.confirmed.clear();
            acks.settle(None);
        }
        self.replication
            .synced
            .lock()
            .remove(&(topic_id, partition));
        self.replication.changed();
    }

    fn partition_slots(&self, topic_id: Uuid, partition: i32) -> Vec<Arc<Slot>> {
        self.slots
            .lock()
            .iter()
            .filter(|(k, _)| k.topic_id == topic_id && k.partition == partition)
            .map(|(_, s)| s.clone())
            .collect()
    }

    /// The groups with share state of `topic`-`partition` in this broker's
    /// files (a hashed directory name is read from its snapshot; one
    /// without is skipped until it is in memory).
    pub fn groups_on_disk(&self, topic: &str, partition: i32) -> BTreeSet<String> {
        let root = self.data_dir.join(SHARES_DIR);
        let mut out = BTreeSet::new();
        let Ok(stems) = self.fs.list(&root) else {
            return out;
        };
        for stem in stems {
            let dir = root.join(&stem);
            let files = crate::shares::store::ShareFiles::in_group_dir(&dir, topic, partition);
            if !self.fs.exists(&files.journal) && !self.fs.exists(&files.snapshot) {
                continue;
            }
            match group_of_stem(&stem).or_else(|| snapshot_group(self, &files.snapshot)) {
                Some(g) => {
                    out.insert(g);
                }
                None => {
                    tracing::warn!(dir = %dir.display(), topic, partition, "share state without a snapshot in a hashed group directory: not copied to followers until it is loaded");
                }
            }
        }
        out
    }

    /// The leader's answer for one partition (§3.10): every share-partition
    /// with state (the groups in memory or on disk, and those the follower
    /// names), each with what the follower lacks given `have` (its held
    /// sequences; `None`: it holds nothing of this term and process).
    /// `config_of` gives a group's configs for a load. Blocking.
    pub fn copy_for_follower(
        &self,
        topic: &str,
        topic_id: Uuid,
        partition: i32,
        log: &dyn ShareLog,
        config_of: &dyn Fn(&str) -> ShareConfig,
        have: Option<&BTreeMap<String, u64>>,
    ) -> Result<Vec<CopiedShare>, ShareFailure> {
        let mut groups: BTreeSet<String> = self
            .partition_slots(topic_id, partition)
            .iter()
            .map(|s| s.key.group.to_string())
            .collect();
        match have {
            Some(h) => groups.extend(h.keys().cloned()),
            None => groups.extend(self.groups_on_disk(topic, partition)),
        }
        let mut out = Vec::new();
        for group in groups {
            let key = ShareKey::new(&group, topic_id, partition);
            let held = have.and_then(|h| h.get(&group).copied());
            let view = self.view_for_follower(&key, topic, log, config_of, held)?;
            let Some(view) = view else {
                continue;
            };
            let mut c = CopiedShare {
                group,
                ..CopiedShare::default()
            };
            match view {
                ReplicaView::Current { seq } => c.seq = seq,
                ReplicaView::Writes { seq, writes } => {
                    c.seq = seq;
                    c.writes = writes.iter().map(|w| w.as_ref().clone()).collect();
                }
                ReplicaView::Full { seq, state } => {
                    c.seq = seq;
                    c.state = Some(CopiedState::of(&state));
                }
            }
            out.push(c);
        }
        Ok(out)
    }

    /// One share-partition's view for a follower holding `held`; `None`
    /// when it has no state (the follower removes its copy).
    fn view_for_follower(
        &self,
        key: &ShareKey,
        topic: &str,
        log: &dyn ShareLog,
        config_of: &dyn Fn(&str) -> ShareConfig,
        held: Option<u64>,
    ) -> Result<Option<ReplicaView>, ShareFailure> {
        if let Some(slot) = self.slot_if_present(key) {
            if let SlotState::Live(live) = &*slot.state.lock() {
                return Ok(live.store.replica_view(held));
            }
        }
        let files =
            crate::shares::store::ShareFiles::new(&self.data_dir, &key.group, topic, key.partition);
        if !files.exist(self.fs.as_ref()) {
            return Ok(None);
        }
        if let Some(h) = held {
            if self.replication.unloaded.lock().get(key) == Some(&h) {
                return Ok(Some(ReplicaView::Current { seq: h }));
            }
        }
        let config = config_of(&key.group);
        let t = ShareTarget {
            key,
            topic,
            log,
            config: &config,
        };
        Ok(self
            .with_live_init(&t, Init::Absent, |_, _, live, _| {
                Ok(live.store.replica_view(held))
            })?
            .flatten())
    }

    /// A follower applies its leader's answer for one partition (§3.10):
    /// each share-partition's writes or whole state into its copy, fsynced
    /// before this returns; the share-partitions it held (`held`, and with
    /// `scan` those in its files) that the leader no longer lists are
    /// removed. `following` says, under each share-partition's mutex,
    /// whether this broker still follows the partition in the answer's term
    /// (a late answer never writes over files a new leader uses). Returns
    /// what it now holds, by group; a share-partition that failed is left
    /// out (the next answer sends it whole). Blocking.
    #[allow(clippy::too_many_arguments)]
    pub fn copy_partition(
        &self,
        topic: &str,
        topic_id: Uuid,
        partition: i32,
        shares: Vec<CopiedShare>,
        held: &BTreeMap<String, u64>,
        scan: bool,
        following: &dyn Fn() -> bool,
    ) -> BTreeMap<String, u64> {
        let mut now = BTreeMap::new();
        let mut to_sync: Vec<(Arc<ShareStore>, es_storage::journal::Ticket, String, u64)> =
            Vec::new();
        let listed: BTreeSet<String> = shares.iter().map(|c| c.group.clone()).collect();
        for c in shares {
            let key = ShareKey::new(&c.group, topic_id, partition);
            match self.copy_one(&key, topic, &c, following) {
                Ok(Some(ticket)) => to_sync.push((ticket.0, ticket.1, c.group, c.seq)),
                Ok(None) => {
                    now.insert(c.group, c.seq);
                }
                Err(e) => {
                    tracing::warn!(group = %c.group, topic, partition, error = %e, "copying a share-partition from its leader failed; retrying it whole");
                }
            }
        }
        for (store, ticket, group, seq) in to_sync {
            let key = ShareKey::new(&group, topic_id, partition);
            let Some(slot) = self.slot_if_present(&key) else {
                continue;
            };
            // Under the slot's mutex, and only while it is still this copy:
            // a broker that has just become the leader may be using the
            // files (a fold here would truncate its journal).
            let mut st = slot.state.lock();
            let ours = matches!(&*st, SlotState::Mirror(s) if Arc::ptr_eq(s, &store));
            if !ours {
                continue;
            }
            let r = store
                .sync(ticket)
                .and_then(|()| store.fold_if_due().map(|_| ()));
            match r {
                Ok(()) => {
                    now.insert(group, seq);
                }
                Err(e) => {
                    tracing::warn!(group, topic, partition, error = %e, "syncing a copied share-partition failed; retrying it whole");
                    // The files may not hold what was written: the next
                    // load reads the disk.
                    *st = SlotState::Unloaded;
                }
            }
        }
        let mut gone: BTreeSet<String> = held.keys().cloned().collect();
        if scan {
            gone.extend(self.groups_on_disk(topic, partition));
        }
        for group in gone.difference(&listed) {
            let key = ShareKey::new(group, topic_id, partition);
            if !following() {
                break;
            }
            if let Err(e) = self.delete_offsets(&key, topic) {
                tracing::warn!(group, topic, partition, error = %e, "removing a share-partition its leader no longer has failed");
            } else {
                tracing::debug!(
                    group,
                    topic,
                    partition,
                    "share-partition copy removed (gone on the leader)"
                );
            }
        }
        now
    }

    /// One share-partition of [`ShareManager::copy_partition`]: the store
    /// and ticket to sync for writes, `None` when nothing was written (a
    /// whole state is durable when installed).
    fn copy_one(
        &self,
        key: &ShareKey,
        topic: &str,
        c: &CopiedShare,
        following: &dyn Fn() -> bool,
    ) -> Result<Option<(Arc<ShareStore>, es_storage::journal::Ticket)>, StorageError> {
        for _ in 0..16 {
            let slot = self.slot_for(key);
            let mut st = slot.state.lock();
            if !following() {
                return Err(StorageError::Invalid("no longer following".into()));
            }
            let store = match &*st {
                SlotState::Gone => continue,
                SlotState::Live(_) => {
                    return Err(StorageError::Invalid("loaded as a leader's".into()))
                }
                SlotState::Fenced(why) => return Err(StorageError::Fenced(why.clone())),
                SlotState::Mirror(store) => store.clone(),
                SlotState::Unloaded => {
                    let (store, _) = ShareStore::open(
                        self.fs.clone(),
                        &self.data_dir,
                        &key.group,
                        topic,
                        key.partition,
                        key.topic_id,
                        self.clock.clone(),
                    )?;
                    let store = Arc::new(store);
                    *st = SlotState::Mirror(store.clone());
                    store
                }
            };
            if let Some(s) = &c.state {
                let state = s.to_state().map_err(StorageError::Invalid)?;
                store.install(&state)?;
            }
            let mut last = None;
            for w in &c.writes {
                last = Some(store.write_copied(w)?);
            }
            return Ok(last.map(|t| (store, t)));
        }
        Err(StorageError::Invalid(
            "share-partition unloaded under every attempt to copy it".into(),
        ))
    }
}

fn not_replicated(key: &ShareKey, why: NotReplicated) -> ShareFailure {
    ShareFailure::NotReplicated {
        leader: why == NotReplicated::NotLeader,
        what: format!(
            "share-partition {}/{}-{}: {}",
            key.group,
            key.topic_id,
            key.partition,
            match why {
                NotReplicated::NotLeader => "this broker no longer leads the partition",
                NotReplicated::TimedOut => "the in-sync followers did not copy the change",
            }
        ),
    }
}

/// The group a snapshot names, if it can be read.
fn snapshot_group(m: &ShareManager, path: &std::path::Path) -> Option<String> {
    #[derive(Deserialize)]
    struct Named {
        group: String,
    }
    es_storage::meta::read_json::<Named>(m.fs.as_ref(), path)
        .ok()
        .flatten()
        .map(|n| n.group)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_names_come_back_from_their_directory_names() {
        for g in ["", "g", "my-group.1", "a b/c%d", "ünï", ".hidden"] {
            let name = crate::groups::store::file_name(g);
            let stem = name
                .strip_suffix(crate::groups::store::FILE_SUFFIX)
                .expect("suffix");
            assert_eq!(group_of_stem(stem).as_deref(), Some(g), "{g:?}");
        }
        let long = "x".repeat(400);
        let name = crate::groups::store::file_name(&long);
        let stem = name
            .strip_suffix(crate::groups::store::FILE_SUFFIX)
            .expect("suffix");
        assert_eq!(group_of_stem(stem), None, "a hashed name");
        assert_eq!(group_of_stem("%zz"), None);
        assert_eq!(group_of_stem("%4"), None);
    }
}
