//! The async shell around the group state machines: one [`Coordinator`]
//! per broker owns every group, their committed offsets and their files.
//!
//! Concurrency: all group state sits behind one `parking_lot` mutex held only
//! for in-memory work (the cores are pure and quick); no lock is held across
//! an `.await` or a disk write.
//!
//! Parked requests: a JoinGroup or SyncGroup gets a [`Token`] and a oneshot
//! channel; the core answers the token (now or later) with an effect that the
//! shell sends down the channel. Every token the core accepts is answered
//! exactly once, so no caller waits forever.
//!
//! Timers: every group reports its earliest deadline; a `BTreeSet` indexes
//! them and one tokio task sleeps until the first, ticks the groups that are
//! due, and goes back to sleep (woken early when an operation moves a
//! deadline).
//!
//! Durability of commits: a commit updates the in-memory offsets, bumps the
//! group's `version` and waits until a write covering that version has
//! reached disk. Each group has at most one writer at a time; commits that
//! arrive while it writes are coalesced into its next write, so a burst of N
//! commits to one group costs at most two document writes (each one file
//! fsync plus one directory fsync) however large N is. Writes of one file are
//! further serialised with its deletion by a per-file async lock. A failed
//! write fences the group's offsets (every later commit and fetch answers
//! NOT_COORDINATOR) until restart, as the storage document requires after a
//! failed fsync. OffsetFetch waits for the offsets it returns to be durable,
//! so it never shows an offset a crash could take back.
//!
//! Layout: this file owns the types (the public request and answer types,
//! the in-memory group, the locked state) and the coordinator's small common
//! parts. `persist.rs` owns every file (loading at startup, the group's
//! document, the per-group writers and file locks); `timers.rs` the work
//! after each operation and the timer task; `classic_api.rs`,
//! `consumer_api.rs`, `admin.rs` and `offsets.rs` the requests, which decide
//! in memory and hand durable changes to `persist.rs`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Instant;

use es_storage::{Fs, SharedClock};
use parking_lot::Mutex;
use tokio::sync::{oneshot, watch, Notify};
use uuid::Uuid;

use super::classic::{self, ClassicGroup, Effect, JoinResponse, SyncResponse};
use super::consumer::ConsumerGroup;
use super::error::GroupError;
use super::share::ShareGroup;
use super::store::{self, TYPE_CLASSIC, TYPE_CONSUMER, TYPE_SHARE};
use super::{GroupConfig, Millis, Token};
use crate::config::GroupOverrides;

pub use failover::{GroupLog, LogFuture};

mod admin;
mod classic_api;
mod consumer_api;
mod failover;
mod offsets;
mod persist;
mod share_api;
mod timers;

/// One committed offset in memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Committed {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp_ms: i64,
    /// The id of the topic when the offset was committed (nil when loaded
    /// from a document without it). An offset whose topic was deleted (and
    /// maybe re-created under the same name) is not shown, as Kafka deletes
    /// the offsets of deleted topics.
    pub topic_id: Uuid,
}

/// One partition of an OffsetCommit, after the topic checks.
#[derive(Clone, Debug)]
pub struct CommitPartition {
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
}

/// One topic of an OffsetCommit, with the topic's current id.
#[derive(Clone, Debug)]
pub struct CommitTopic {
    pub name: String,
    pub topic_id: Uuid,
    pub partitions: Vec<CommitPartition>,
}

/// An OffsetCommit as the coordinator sees it.
#[derive(Clone, Debug)]
pub struct CommitRequest {
    pub group_id: String,
    pub generation_id_or_member_epoch: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub version: i16,
    /// A TxnOffsetCommit's member check: the KIP-848 "OffsetCommit v9 or
    /// above" rule does not apply (Kafka's `isTransactional`).
    pub transactional: bool,
    pub topics: Vec<CommitTopic>,
}

/// The accepted part of a commit: one outcome per partition (in request
/// order) and the durability wait for those without error.
#[derive(Debug)]
pub struct CommitOutcome {
    pub errors: Vec<Vec<PartitionOutcome>>,
    pub wait: Option<DurableWait>,
}

/// What became of one partition of an OffsetCommit or OffsetDelete.
pub type PartitionOutcome = Result<(), GroupError>;

/// One partition of an OffsetFetch answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchedPartition {
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    /// None from the coordinator; the OffsetFetch handler sets a group-level
    /// error (v1) or UNSTABLE_OFFSET_COMMIT here.
    pub error: Option<GroupError>,
}

/// One topic of an OffsetFetch answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchedTopic {
    pub name: String,
    pub partitions: Vec<FetchedPartition>,
}

/// A group as ListGroups shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listed {
    pub group_id: String,
    pub protocol_type: String,
    pub state: String,
    pub group_type: &'static str,
}

/// A group as DescribeGroups (the classic API) sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClassicDescribe {
    NotFound,
    /// The group exists but is a KIP-848 consumer group.
    NotClassic,
    Found(classic::Described),
}

/// Waits until a group's document covers a given version.
#[derive(Debug)]
pub struct DurableWait {
    rx: watch::Receiver<Durable>,
    version: u64,
}

impl DurableWait {
    /// `Ok` once durable; NOT_COORDINATOR if the write failed (the group is
    /// fenced until restart) or the coordinator went away.
    pub async fn wait(mut self) -> Result<(), GroupError> {
        let v = self.version;
        let res = self
            .rx
            .wait_for(|d| d.version >= v || d.failed.is_some())
            .await
            .map(|d| d.version >= v);
        match res {
            Ok(true) => Ok(()),
            Ok(false) | Err(_) => Err(GroupError::NotCoordinator),
        }
    }
}

#[derive(Clone, Debug, Default)]
struct Durable {
    /// The newest version known to be on disk.
    version: u64,
    /// Set when a write failed: the group's offsets are fenced.
    failed: Option<String>,
}

#[derive(Debug)]
enum Kind {
    Classic(ClassicGroup),
    Consumer(ConsumerGroup),
    Share(ShareGroup),
}

impl Kind {
    fn type_name(&self) -> &'static str {
        match self {
            Kind::Classic(_) => TYPE_CLASSIC,
            Kind::Consumer(_) => TYPE_CONSUMER,
            Kind::Share(_) => TYPE_SHARE,
        }
    }

    fn protocol_type(&self) -> Option<String> {
        match self {
            Kind::Classic(g) => g.protocol_type().map(str::to_string),
            Kind::Consumer(_) => Some(super::CONSUMER_PROTOCOL_TYPE.to_string()),
            Kind::Share(_) => Some(super::SHARE_PROTOCOL_TYPE.to_string()),
        }
    }

    fn next_deadline(&self) -> Option<Millis> {
        match self {
            Kind::Classic(g) => g.next_deadline(),
            Kind::Consumer(g) => g.next_deadline(),
            Kind::Share(g) => g.next_deadline(),
        }
    }

    /// Kafka's answer to an offset request (OffsetCommit, OffsetFetch,
    /// OffsetDelete) for a share group: it has no committed offsets.
    fn refuse_offsets(&self, group_id: &str) -> Result<(), GroupError> {
        match self {
            Kind::Share(_) => Err(GroupError::NotAConsumerGroup {
                group_id: group_id.to_string(),
            }),
            _ => Ok(()),
        }
    }
}

/// The share-partitions a share group has assigned: topic name -> (topic
/// id, partitions).
pub type SharePartitions = BTreeMap<String, (Uuid, BTreeSet<i32>)>;

#[derive(Debug)]
struct Group {
    id: String,
    kind: Kind,
    offsets: BTreeMap<String, BTreeMap<i32, Committed>>,
    /// A share group's assigned share-partitions (empty for other groups).
    share_partitions: SharePartitions,
    /// Distinguishes a group from a later one of the same name.
    incarnation: u64,
    /// DeleteGroups is removing the file.
    deleting: bool,
    /// (type, protocol type) in the newest document written or being written.
    written_meta: Option<(&'static str, Option<String>)>,
    /// Bumped by every change that must reach disk.
    version: u64,
    /// A writer task is running for this group.
    writing: bool,
    durable: watch::Sender<Durable>,
    /// The deadline under which the group is indexed.
    deadline: Option<Millis>,
}

impl Group {
    fn new(id: &str, kind: Kind, incarnation: u64) -> Self {
        Group {
            id: id.to_string(),
            kind,
            offsets: BTreeMap::new(),
            share_partitions: SharePartitions::new(),
            incarnation,
            deleting: false,
            written_meta: None,
            version: 0,
            writing: false,
            durable: watch::Sender::new(Durable::default()),
            deadline: None,
        }
    }

    fn meta(&self) -> (&'static str, Option<String>) {
        (self.kind.type_name(), self.kind.protocol_type())
    }

    fn fenced(&self) -> bool {
        self.durable.borrow().failed.is_some()
    }

    /// The offset of `topic`/`partition`, if committed for the topic as it
    /// is now (`current_id`).
    fn offset(&self, topic: &str, partition: i32, current_id: Option<Uuid>) -> Option<&Committed> {
        let c = self.offsets.get(topic)?.get(&partition)?;
        live(c, current_id).then_some(c)
    }
}

/// Whether an offset belongs to the topic that now has the name.
fn live(c: &Committed, current_id: Option<Uuid>) -> bool {
    match current_id {
        None => false,
        Some(id) => c.topic_id.is_nil() || id.is_nil() || c.topic_id == id,
    }
}

#[derive(Debug)]
enum Waiter {
    Join(oneshot::Sender<JoinResponse>),
    Sync(oneshot::Sender<SyncResponse>),
}

#[derive(Debug, Default)]
struct State {
    groups: BTreeMap<String, Group>,
    /// (deadline, group id) of every group with a timer.
    deadlines: BTreeSet<(Millis, String)>,
    waiters: HashMap<Token, Waiter>,
    next_token: Token,
    next_incarnation: u64,
    /// File name -> the group that owns it.
    files: HashMap<String, String>,
    shut_down: bool,
    /// Group configs (the GROUP config resource) that change how a group
    /// runs, by group id.
    overrides: HashMap<String, GroupOverrides>,
}

impl State {
    fn dispatch(&mut self, effects: Vec<Effect>) {
        for e in effects {
            match e {
                Effect::Join(t, r) => match self.waiters.remove(&t) {
                    Some(Waiter::Join(tx)) => {
                        let _ = tx.send(r);
                    }
                    Some(other) => {
                        debug_assert!(false, "token {t} is not a join");
                        self.waiters.insert(t, other);
                    }
                    None => {}
                },
                Effect::Sync(t, r) => match self.waiters.remove(&t) {
                    Some(Waiter::Sync(tx)) => {
                        let _ = tx.send(r);
                    }
                    Some(other) => {
                        debug_assert!(false, "token {t} is not a sync");
                        self.waiters.insert(t, other);
                    }
                    None => {}
                },
            }
        }
    }

    fn token(&mut self) -> Token {
        self.next_token += 1;
        self.next_token
    }

    fn reindex(&mut self, group_id: &str) {
        let Some(g) = self.groups.get_mut(group_id) else {
            return;
        };
        let next = g.kind.next_deadline();
        if next == g.deadline {
            return;
        }
        if let Some(old) = g.deadline.take() {
            self.deadlines.remove(&(old, group_id.to_string()));
        }
        if let Some(n) = next {
            self.deadlines.insert((n, group_id.to_string()));
        }
        g.deadline = next;
    }

    /// Creates a group, unless its file name belongs to another group.
    /// The settings group `group_id` runs with: `base` with its own configs.
    fn config_for(&self, base: GroupConfig, group_id: &str) -> GroupConfig {
        match self.overrides.get(group_id) {
            Some(o) => base.with_overrides(o),
            None => base,
        }
    }

    fn create(&mut self, group_id: &str, kind: Kind) -> Result<(), GroupError> {
        let file = store::file_name(group_id);
        if let Some(owner) = self.files.get(&file) {
            if owner != group_id {
                tracing::warn!(group = group_id, owner = %owner, "group id maps to another group's file");
                return Err(GroupError::InvalidGroupId);
            }
        }
        self.files.insert(file, group_id.to_string());
        self.next_incarnation += 1;
        let g = Group::new(group_id, kind, self.next_incarnation);
        self.groups.insert(group_id.to_string(), g);
        Ok(())
    }
}

/// The group coordinator of this broker.
#[derive(Debug)]
pub struct Coordinator {
    config: GroupConfig,
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    /// Where deadlines (monotonic) and commit timestamps (wall) are read.
    clock: SharedClock,
    /// Monotonic time 0 of the groups' deadlines.
    epoch: Instant,
    state: Mutex<State>,
    file_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    timer_wake: Notify,
    /// Group documents written (successfully or not), for tests and metrics.
    writes: AtomicU64,
    /// Where documents go instead of this broker's files, once set: the
    /// metadata quorum ([`GroupLog`]).
    log: std::sync::OnceLock<Arc<dyn GroupLog>>,
}

impl Coordinator {
    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

    /// Group `group_id`'s configs changed to `o`: a consumer group in
    /// memory runs with them from its next heartbeat, and one created later
    /// starts with them.
    pub fn set_group_overrides(&self, group_id: &str, o: GroupOverrides) {
        let mut st = self.state.lock();
        if o.is_empty() {
            st.overrides.remove(group_id);
        } else {
            st.overrides.insert(group_id.to_string(), o);
        }
        let cfg = st.config_for(self.config, group_id);
        match st.groups.get_mut(group_id).map(|g| &mut g.kind) {
            Some(Kind::Consumer(c)) => c.set_config(cfg),
            Some(Kind::Share(c)) => c.set_config(cfg.share),
            _ => {}
        }
    }

    /// Replaces every group's configs (the metadata image at start).
    pub fn set_all_group_overrides(&self, all: HashMap<String, GroupOverrides>) {
        let mut ids: Vec<String> = self.state.lock().overrides.keys().cloned().collect();
        ids.extend(all.keys().cloned());
        for id in ids {
            self.set_group_overrides(&id, all.get(&id).copied().unwrap_or_default());
        }
    }

    /// The wait for every change made so far to group `group_id` (its
    /// type, offsets, share-partitions) to be durable; `None` when nothing
    /// is pending or the group is unknown.
    pub fn pending_write(&self, group_id: &str) -> Option<DurableWait> {
        let st = self.state.lock();
        let g = st.groups.get(group_id)?;
        let pending = g.version > g.durable.borrow().version;
        pending.then(|| DurableWait {
            rx: g.durable.subscribe(),
            version: g.version,
        })
    }

    fn now(&self) -> Millis {
        let elapsed = self.clock.monotonic().saturating_duration_since(self.epoch);
        u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
    }

    /// Answers every parked request with NOT_COORDINATOR and stops the timer
    /// task; later requests get COORDINATOR_NOT_AVAILABLE. Offsets already
    /// acknowledged are on disk.
    pub fn shutdown(&self) {
        let mut st = self.state.lock();
        st.shut_down = true;
        let mut out = Vec::new();
        for g in st.groups.values_mut() {
            if let Kind::Classic(c) = &mut g.kind {
                c.abort_all(GroupError::NotCoordinator, &mut out);
            }
        }
        st.dispatch(out);
        drop(st);
        self.timer_wake.notify_one();
    }
}

#[cfg(test)]
mod coordinator_tests;
