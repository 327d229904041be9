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

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use es_storage::{Fs, SharedClock, StorageError};
use parking_lot::Mutex;
use tokio::sync::{oneshot, watch, Notify};
use uuid::Uuid;

use super::classic::{
    self, ClassicGroup, Effect, JoinRequest, JoinResponse, LeaveMember, SyncRequest, SyncResponse,
};
use super::consumer::{
    self, ConsumerGroup, HeartbeatRequest as CgHeartbeatRequest,
    HeartbeatResponse as CgHeartbeatResponse,
};
use super::error::GroupError;
use super::store::{self, GroupFile, OffsetEntry, TYPE_CLASSIC, TYPE_CONSUMER};
use super::{GroupConfig, Millis, Token};

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
}

impl Kind {
    fn type_name(&self) -> &'static str {
        match self {
            Kind::Classic(_) => TYPE_CLASSIC,
            Kind::Consumer(_) => TYPE_CONSUMER,
        }
    }

    fn protocol_type(&self) -> Option<String> {
        match self {
            Kind::Classic(g) => g.protocol_type().map(str::to_string),
            Kind::Consumer(_) => Some(super::CONSUMER_PROTOCOL_TYPE.to_string()),
        }
    }

    fn next_deadline(&self) -> Option<Millis> {
        match self {
            Kind::Classic(g) => g.next_deadline(),
            Kind::Consumer(g) => g.next_deadline(),
        }
    }
}

#[derive(Debug)]
struct Group {
    id: String,
    kind: Kind,
    offsets: BTreeMap<String, BTreeMap<i32, Committed>>,
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

    fn document(&self) -> GroupFile {
        let (t, p) = self.meta();
        GroupFile {
            group: self.id.clone(),
            group_type: t.to_string(),
            protocol_type: p,
            offsets: self
                .offsets
                .iter()
                .flat_map(|(topic, ps)| {
                    ps.iter().map(move |(p, c)| OffsetEntry {
                        topic: topic.clone(),
                        partition: *p,
                        offset: c.offset,
                        leader_epoch: c.leader_epoch,
                        metadata: c.metadata.clone(),
                        commit_timestamp_ms: c.commit_timestamp_ms,
                        topic_id: (!c.topic_id.is_nil()).then(|| c.topic_id.to_string()),
                    })
                })
                .collect(),
        }
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
}

impl Coordinator {
    /// Loads every group document under `data_dir/groups`. Blocking.
    pub fn open(
        fs: Arc<dyn Fs>,
        data_dir: &Path,
        config: GroupConfig,
        clock: SharedClock,
    ) -> Result<Arc<Coordinator>, StorageError> {
        let dir = data_dir.join(store::GROUPS_DIR);
        let docs = store::load_all(fs.as_ref(), &dir)?;
        let mut st = State::default();
        for doc in docs {
            let kind = if doc.group_type == TYPE_CONSUMER {
                Kind::Consumer(ConsumerGroup::new(&doc.group, config))
            } else {
                Kind::Classic(ClassicGroup::loaded(
                    &doc.group,
                    config,
                    doc.protocol_type.clone(),
                ))
            };
            if st.create(&doc.group, kind).is_err() {
                continue;
            }
            if let Some(g) = st.groups.get_mut(&doc.group) {
                for o in doc.offsets {
                    g.offsets.entry(o.topic).or_default().insert(
                        o.partition,
                        Committed {
                            offset: o.offset,
                            leader_epoch: o.leader_epoch,
                            metadata: o.metadata,
                            commit_timestamp_ms: o.commit_timestamp_ms,
                            topic_id: o
                                .topic_id
                                .as_deref()
                                .and_then(|s| Uuid::parse_str(s).ok())
                                .unwrap_or_else(Uuid::nil),
                        },
                    );
                }
                g.written_meta = Some(g.meta());
            }
        }
        tracing::info!(groups = st.groups.len(), "loaded consumer groups");
        Ok(Arc::new(Coordinator {
            config,
            fs,
            dir,
            epoch: clock.monotonic(),
            clock,
            state: Mutex::new(st),
            file_locks: Mutex::new(HashMap::new()),
            timer_wake: Notify::new(),
            writes: AtomicU64::new(0),
        }))
    }

    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

    /// How many group documents have been written since startup.
    pub fn document_writes(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
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

    /// Work after any operation on a group: fire timers that are already due
    /// (zero delays), answer parked requests, re-index the group's deadline,
    /// and persist a change of the group's type or protocol type.
    fn after_op(self: &Arc<Self>, st: &mut State, group_id: &str, now: Millis, out: Vec<Effect>) {
        self.settle(st, group_id, now, out);
        self.timer_wake.notify_one();
    }

    // ----- classic protocol ---------------------------------------------

    /// JoinGroup. The receiver yields the response when the join phase of
    /// the group completes (or at once for errors and the member id
    /// handshake).
    pub fn join(
        self: &Arc<Self>,
        group_id: &str,
        req: JoinRequest,
    ) -> oneshot::Receiver<JoinResponse> {
        let (tx, rx) = oneshot::channel();
        let mut st = self.state.lock();
        let fail = |tx: oneshot::Sender<JoinResponse>, e: GroupError, member: &str| {
            let _ = tx.send(JoinResponse::error(e, member));
        };
        if st.shut_down {
            fail(tx, GroupError::CoordinatorNotAvailable, &req.member_id);
            return rx;
        }
        let now = self.now();
        match st.groups.get_mut(group_id) {
            None if !req.member_id.is_empty() => {
                fail(tx, GroupError::UnknownMemberId, &req.member_id);
                return rx;
            }
            None => {
                let kind = Kind::Classic(ClassicGroup::new(group_id, self.config));
                if let Err(e) = st.create(group_id, kind) {
                    let _ = tx.send(JoinResponse::error(e, &req.member_id));
                    return rx;
                }
            }
            Some(g) if g.deleting => {
                fail(tx, GroupError::CoordinatorNotAvailable, &req.member_id);
                return rx;
            }
            Some(g) => {
                if let Kind::Consumer(c) = &g.kind {
                    if !c.is_empty() {
                        // A group keeps one protocol at a time.
                        fail(tx, GroupError::InconsistentGroupProtocol, &req.member_id);
                        return rx;
                    }
                    if !req.member_id.is_empty() {
                        fail(tx, GroupError::UnknownMemberId, &req.member_id);
                        return rx;
                    }
                    tracing::info!(
                        group = group_id,
                        "converting empty consumer group to a classic group"
                    );
                    g.kind = Kind::Classic(ClassicGroup::new(group_id, self.config));
                }
            }
        }
        let token = st.token();
        st.waiters.insert(token, Waiter::Join(tx));
        let mut out = Vec::new();
        if let Some(Kind::Classic(c)) = st.groups.get_mut(group_id).map(|g| &mut g.kind) {
            c.join(now, token, req, &mut out);
        }
        self.after_op(&mut st, group_id, now, out);
        rx
    }

    /// SyncGroup. The receiver yields the member's assignment once the leader
    /// has sent it.
    pub fn sync(
        self: &Arc<Self>,
        group_id: &str,
        req: SyncRequest,
    ) -> oneshot::Receiver<SyncResponse> {
        let (tx, rx) = oneshot::channel();
        let mut st = self.state.lock();
        let now = self.now();
        let early = if st.shut_down {
            Some(GroupError::CoordinatorNotAvailable)
        } else {
            match st.groups.get(group_id).map(|g| (&g.kind, g.deleting)) {
                None | Some((Kind::Consumer(_), _)) => Some(GroupError::UnknownMemberId),
                Some((_, true)) => Some(GroupError::CoordinatorNotAvailable),
                Some((Kind::Classic(_), false)) => None,
            }
        };
        if let Some(e) = early {
            let _ = tx.send(SyncResponse::error(e));
            return rx;
        }
        let token = st.token();
        st.waiters.insert(token, Waiter::Sync(tx));
        let mut out = Vec::new();
        if let Some(Kind::Classic(c)) = st.groups.get_mut(group_id).map(|g| &mut g.kind) {
            c.sync(now, token, req, &mut out);
        }
        self.after_op(&mut st, group_id, now, out);
        rx
    }

    /// Heartbeat.
    pub fn heartbeat(
        self: &Arc<Self>,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
    ) -> Result<(), GroupError> {
        let mut st = self.state.lock();
        if st.shut_down {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        let now = self.now();
        let r = match st.groups.get_mut(group_id) {
            None => return Err(GroupError::UnknownMemberId),
            Some(g) if g.deleting => return Err(GroupError::CoordinatorNotAvailable),
            Some(g) => match &mut g.kind {
                Kind::Classic(c) => c.heartbeat(now, member_id, instance_id, generation_id),
                Kind::Consumer(_) => return Err(GroupError::UnknownMemberId),
            },
        };
        self.after_op(&mut st, group_id, now, Vec::new());
        r
    }

    /// LeaveGroup: one outcome per member, or a group-level error.
    pub fn leave(
        self: &Arc<Self>,
        group_id: &str,
        members: &[LeaveMember],
    ) -> Result<Vec<Result<(), GroupError>>, GroupError> {
        let mut st = self.state.lock();
        if st.shut_down {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        let now = self.now();
        let unknown = || vec![Err(GroupError::UnknownMemberId); members.len()];
        let mut out = Vec::new();
        let r = match st.groups.get_mut(group_id) {
            None => return Ok(unknown()),
            Some(g) if g.deleting => return Err(GroupError::CoordinatorNotAvailable),
            Some(g) => match &mut g.kind {
                Kind::Classic(c) => c.leave(now, members, &mut out),
                Kind::Consumer(_) => return Ok(unknown()),
            },
        };
        self.after_op(&mut st, group_id, now, out);
        r
    }

    // ----- KIP-848 --------------------------------------------------------

    /// ConsumerGroupHeartbeat. `topics` resolves a topic name to (id,
    /// partition count) and an id to its name, for the server-side assignor.
    pub fn consumer_heartbeat(
        self: &Arc<Self>,
        req: CgHeartbeatRequest,
        topics: &dyn consumer::TopicView,
    ) -> CgHeartbeatResponse {
        let mut st = self.state.lock();
        if st.shut_down {
            return CgHeartbeatResponse::error(GroupError::CoordinatorNotAvailable);
        }
        let now = self.now();
        let group_id = req.group_id.clone();
        match st.groups.get_mut(&group_id) {
            None => {
                if req.member_epoch != 0 {
                    return CgHeartbeatResponse::error(GroupError::NoGroupForMember { group_id });
                }
                let kind = Kind::Consumer(ConsumerGroup::new(&group_id, self.config));
                if let Err(e) = st.create(&group_id, kind) {
                    return CgHeartbeatResponse::error(e);
                }
            }
            Some(g) if g.deleting => {
                return CgHeartbeatResponse::error(GroupError::CoordinatorNotAvailable)
            }
            Some(g) => {
                if let Kind::Classic(c) = &g.kind {
                    if !c.is_empty() {
                        return CgHeartbeatResponse::error(GroupError::NotAConsumerGroup {
                            group_id: group_id.clone(),
                        });
                    }
                    tracing::info!(group = %group_id, "converting empty classic group to a consumer group");
                    g.kind = Kind::Consumer(ConsumerGroup::new(&group_id, self.config));
                }
            }
        }
        let r = match st.groups.get_mut(&group_id).map(|g| &mut g.kind) {
            Some(Kind::Consumer(c)) => c.heartbeat(now, req, topics),
            _ => CgHeartbeatResponse::error(GroupError::UnknownServerError),
        };
        self.after_op(&mut st, &group_id, now, Vec::new());
        r
    }

    /// ConsumerGroupDescribe of one group.
    pub fn consumer_describe(
        &self,
        group_id: &str,
        topics: &dyn consumer::TopicView,
    ) -> Result<consumer::Described, GroupError> {
        let st = self.state.lock();
        match st.groups.get(group_id) {
            Some(g) if !g.deleting => match &g.kind {
                Kind::Consumer(c) => Ok(c.describe(topics)),
                Kind::Classic(_) => Err(GroupError::NotAConsumerGroup {
                    group_id: group_id.to_string(),
                }),
            },
            _ => Err(GroupError::GroupNotFound {
                group_id: group_id.to_string(),
            }),
        }
    }

    // ----- admin ----------------------------------------------------------

    /// ListGroups with Kafka's case-insensitive state and type filters.
    pub fn list(&self, states: &[String], types: &[String]) -> Vec<Listed> {
        let states: Vec<String> = states.iter().map(|s| s.trim().to_lowercase()).collect();
        let types: Vec<String> = types.iter().map(|s| s.trim().to_lowercase()).collect();
        let st = self.state.lock();
        st.groups
            .values()
            .filter(|g| !g.deleting)
            .map(|g| {
                let (state, ptype) = match &g.kind {
                    Kind::Classic(c) => (
                        c.state().as_str().to_string(),
                        c.protocol_type().unwrap_or_default().to_string(),
                    ),
                    Kind::Consumer(c) => (
                        c.state_name().to_string(),
                        super::CONSUMER_PROTOCOL_TYPE.to_string(),
                    ),
                };
                Listed {
                    group_id: g.id.clone(),
                    protocol_type: ptype,
                    state,
                    group_type: g.kind.type_name(),
                }
            })
            .filter(|l| states.is_empty() || states.contains(&l.state.to_lowercase()))
            .filter(|l| types.is_empty() || types.iter().any(|t| t == l.group_type))
            .collect()
    }

    /// DescribeGroups of one group.
    pub fn describe(&self, group_id: &str) -> ClassicDescribe {
        let st = self.state.lock();
        match st.groups.get(group_id) {
            None => ClassicDescribe::NotFound,
            Some(g) if g.deleting => ClassicDescribe::NotFound,
            Some(g) => match &g.kind {
                Kind::Classic(c) => ClassicDescribe::Found(c.describe()),
                Kind::Consumer(_) => ClassicDescribe::NotClassic,
            },
        }
    }

    /// DeleteGroups of one group: done, or GROUP_ID_NOT_FOUND,
    /// NON_EMPTY_GROUP, or a storage failure when its file could not be
    /// removed.
    pub async fn delete(self: &Arc<Self>, group_id: &str) -> Result<(), GroupError> {
        let incarnation = {
            let mut st = self.state.lock();
            let now = self.now();
            let Some(g) = st.groups.get_mut(group_id) else {
                return Err(GroupError::GroupIdNotFound);
            };
            if g.deleting {
                return Err(GroupError::GroupIdNotFound);
            }
            let valid = match &g.kind {
                Kind::Classic(c) => c.validate_delete(),
                Kind::Consumer(c) => {
                    if c.is_empty() {
                        Ok(())
                    } else {
                        Err(GroupError::NonEmptyGroup)
                    }
                }
            };
            valid?;
            g.deleting = true;
            if let Kind::Classic(c) = &mut g.kind {
                c.set_dead(true);
            }
            let inc = g.incarnation;
            self.after_op(&mut st, group_id, now, Vec::new());
            inc
        };
        let file = store::file_name(group_id);
        let lock = self.file_lock(&file);
        let guard = lock.clone().lock_owned().await;
        let (fs, dir, id) = (self.fs.clone(), self.dir.clone(), group_id.to_string());
        let removed = tokio::task::spawn_blocking(move || store::remove(fs.as_ref(), &dir, &id))
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r.map_err(|e| e.to_string()));
        let mut st = self.state.lock();
        let now = self.now();
        let Some(g) = st.groups.get_mut(group_id) else {
            return Err(GroupError::GroupIdNotFound);
        };
        if g.incarnation != incarnation {
            return Err(GroupError::GroupIdNotFound);
        }
        match removed {
            Ok(()) => {
                // Commits that raced the deletion happened before it.
                g.durable.send_replace(Durable {
                    version: u64::MAX,
                    failed: None,
                });
                if let Some(d) = g.deadline {
                    st.deadlines.remove(&(d, group_id.to_string()));
                }
                st.groups.remove(group_id);
                st.files.remove(&file);
                drop(st);
                drop(guard);
                self.forget_file_lock(&file, lock);
                tracing::info!(group = group_id, "deleted group");
                Ok(())
            }
            Err(e) => {
                tracing::error!(group = group_id, error = %e, "could not delete group file");
                g.deleting = false;
                if let Kind::Classic(c) = &mut g.kind {
                    c.set_dead(false);
                }
                let restart = g.version > g.durable.borrow().version && self.start_writer(g);
                self.after_op(&mut st, group_id, now, Vec::new());
                drop(st);
                if restart {
                    self.spawn_writer(group_id);
                }
                Err(GroupError::StorageFailed)
            }
        }
    }

    // ----- offsets --------------------------------------------------------

    /// OffsetCommit: validates the committer, applies the offsets in memory
    /// and returns what to wait on before answering.
    pub fn commit(self: &Arc<Self>, req: CommitRequest) -> Result<CommitOutcome, GroupError> {
        let mut st = self.state.lock();
        if st.shut_down {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        let now = self.now();
        let group_id = req.group_id.clone();
        if !st.groups.contains_key(&group_id) {
            if req.generation_id_or_member_epoch >= 0 {
                return Err(if req.version >= 9 {
                    GroupError::GroupIdNotFound
                } else {
                    GroupError::IllegalGeneration
                });
            }
            // A "simple" group: offsets without group management.
            st.create(
                &group_id,
                Kind::Classic(ClassicGroup::new(&group_id, self.config)),
            )?;
        }
        let Some(g) = st.groups.get_mut(&group_id) else {
            return Err(GroupError::UnknownServerError);
        };
        if g.deleting {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        if g.fenced() {
            return Err(GroupError::NotCoordinator);
        }
        match &mut g.kind {
            Kind::Classic(c) => {
                c.validate_offset_commit(
                    &req.member_id,
                    req.group_instance_id.as_deref(),
                    req.generation_id_or_member_epoch,
                )?;
                c.on_offset_commit(now, &req.member_id);
            }
            Kind::Consumer(c) => c.validate_offset_commit(
                &req.member_id,
                req.group_instance_id.as_deref(),
                req.generation_id_or_member_epoch,
                req.transactional,
                req.version,
            )?,
        }
        let ts = self.clock.now_ms();
        let max = self.config.offset_metadata_bytes_max;
        let mut errors = Vec::with_capacity(req.topics.len());
        let mut changed = false;
        for t in req.topics {
            let mut codes = Vec::with_capacity(t.partitions.len());
            for p in t.partitions {
                if p.metadata.as_ref().is_some_and(|m| m.len() > max) {
                    codes.push(Err(GroupError::OffsetMetadataTooLarge));
                    continue;
                }
                g.offsets.entry(t.name.clone()).or_default().insert(
                    p.partition,
                    Committed {
                        offset: p.offset,
                        leader_epoch: p.leader_epoch,
                        metadata: p.metadata.unwrap_or_default(),
                        commit_timestamp_ms: ts,
                        topic_id: t.topic_id,
                    },
                );
                changed = true;
                codes.push(Ok(()));
            }
            errors.push(codes);
        }
        let mut spawn = false;
        let wait = if changed {
            g.version += 1;
            spawn = self.start_writer(g);
            Some(DurableWait {
                rx: g.durable.subscribe(),
                version: g.version,
            })
        } else {
            None
        };
        self.after_op(&mut st, &group_id, now, Vec::new());
        drop(st);
        if spawn {
            self.spawn_writer(&group_id);
        }
        Ok(CommitOutcome { errors, wait })
    }

    /// Writes offsets into a group without any member check: a committed
    /// transaction's offsets, which Kafka materialises whatever the group
    /// became since the TxnOffsetCommit (its `replayEndTransactionMarker`).
    /// A missing group is created as a simple (Empty, classic) group. Returns
    /// the durability wait.
    pub fn commit_transactional(
        self: &Arc<Self>,
        group_id: &str,
        topics: Vec<CommitTopic>,
    ) -> Result<Option<DurableWait>, GroupError> {
        let mut st = self.state.lock();
        if st.shut_down {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        let now = self.now();
        if !st.groups.contains_key(group_id) {
            st.create(
                group_id,
                Kind::Classic(ClassicGroup::new(group_id, self.config)),
            )?;
        }
        let Some(g) = st.groups.get_mut(group_id) else {
            return Err(GroupError::UnknownServerError);
        };
        if g.deleting {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        if g.fenced() {
            return Err(GroupError::NotCoordinator);
        }
        let ts = self.clock.now_ms();
        let mut changed = false;
        for t in topics {
            for p in t.partitions {
                g.offsets.entry(t.name.clone()).or_default().insert(
                    p.partition,
                    Committed {
                        offset: p.offset,
                        leader_epoch: p.leader_epoch,
                        metadata: p.metadata.unwrap_or_default(),
                        commit_timestamp_ms: ts,
                        topic_id: t.topic_id,
                    },
                );
                changed = true;
            }
        }
        let mut spawn = false;
        let wait = if changed {
            g.version += 1;
            spawn = self.start_writer(g);
            Some(DurableWait {
                rx: g.durable.subscribe(),
                version: g.version,
            })
        } else {
            None
        };
        self.after_op(&mut st, group_id, now, Vec::new());
        drop(st);
        if spawn {
            self.spawn_writer(group_id);
        }
        Ok(wait)
    }

    /// OffsetFetch of one group. `topics` of `None` means every partition
    /// with a committed offset. `topic_id` gives a topic's current id (None
    /// when it does not exist). `member` is (member id, epoch) when the
    /// request carries them (v9+), checked for KIP-848 groups.
    pub fn fetch_offsets(
        &self,
        group_id: &str,
        topics: Option<Vec<(String, Vec<i32>)>>,
        member: Option<(&str, i32)>,
        topic_id: &dyn Fn(&str) -> Option<Uuid>,
    ) -> Result<(Vec<FetchedTopic>, Option<DurableWait>), GroupError> {
        let st = self.state.lock();
        if st.shut_down {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        let group = st.groups.get(group_id).filter(|g| !g.deleting);
        if let Some(g) = group {
            if g.fenced() {
                return Err(GroupError::NotCoordinator);
            }
            if let (Kind::Consumer(c), Some((m, epoch))) = (&g.kind, member) {
                c.validate_offset_fetch(m, epoch)?;
            }
        }
        let missing = |p: i32| FetchedPartition {
            partition: p,
            offset: -1,
            leader_epoch: -1,
            metadata: String::new(),
            error: None,
        };
        let found = |p: i32, c: &Committed| FetchedPartition {
            partition: p,
            offset: c.offset,
            leader_epoch: c.leader_epoch,
            metadata: c.metadata.clone(),
            error: None,
        };
        let out = match topics {
            Some(list) => list
                .into_iter()
                .map(|(name, parts)| {
                    let id = topic_id(&name);
                    let partitions = parts
                        .into_iter()
                        .map(|p| match group.and_then(|g| g.offset(&name, p, id)) {
                            Some(c) => found(p, c),
                            None => missing(p),
                        })
                        .collect();
                    FetchedTopic { name, partitions }
                })
                .collect(),
            None => group
                .map(|g| {
                    g.offsets
                        .iter()
                        .filter_map(|(name, ps)| {
                            let id = topic_id(name);
                            let partitions: Vec<FetchedPartition> = ps
                                .iter()
                                .filter(|(_, c)| live(c, id))
                                .map(|(p, c)| found(*p, c))
                                .collect();
                            (!partitions.is_empty()).then(|| FetchedTopic {
                                name: name.clone(),
                                partitions,
                            })
                        })
                        .collect()
                })
                .unwrap_or_default(),
        };
        let wait = group.and_then(|g| {
            (g.version > g.durable.borrow().version).then(|| DurableWait {
                rx: g.durable.subscribe(),
                version: g.version,
            })
        });
        Ok((out, wait))
    }

    /// OffsetDelete: a group-level error, or one code per partition (in
    /// request order) and the durability wait.
    pub fn delete_offsets(
        self: &Arc<Self>,
        group_id: &str,
        topics: &[(String, Vec<i32>)],
    ) -> Result<(Vec<Vec<PartitionOutcome>>, Option<DurableWait>), GroupError> {
        let mut st = self.state.lock();
        if st.shut_down {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        let now = self.now();
        let Some(g) = st.groups.get_mut(group_id).filter(|g| !g.deleting) else {
            return Err(GroupError::GroupIdNotFound);
        };
        if g.fenced() {
            return Err(GroupError::NotCoordinator);
        }
        let subscribed: Box<dyn Fn(&str) -> bool> = match &g.kind {
            Kind::Classic(c) => {
                c.validate_offset_delete()?;
                let topics = c.subscribed_topics();
                let consumer = c.protocol_type() == Some(super::CONSUMER_PROTOCOL_TYPE);
                Box::new(move |t: &str| topics.as_ref().map_or(consumer, |s| s.contains(t)))
            }
            Kind::Consumer(c) => {
                let topics = c.subscribed_topic_names();
                Box::new(move |t: &str| topics.contains(t))
            }
        };
        let mut changed = false;
        let mut codes = Vec::with_capacity(topics.len());
        for (name, parts) in topics {
            if subscribed(name) {
                codes.push(vec![Err(GroupError::GroupSubscribedToTopic); parts.len()]);
                continue;
            }
            if let Some(ps) = g.offsets.get_mut(name) {
                for p in parts {
                    changed |= ps.remove(p).is_some();
                }
                if ps.is_empty() {
                    g.offsets.remove(name);
                }
            }
            codes.push(vec![Ok(()); parts.len()]);
        }
        drop(subscribed);
        let mut spawn = false;
        let wait = if changed {
            g.version += 1;
            spawn = self.start_writer(g);
            Some(DurableWait {
                rx: g.durable.subscribe(),
                version: g.version,
            })
        } else {
            None
        };
        self.after_op(&mut st, group_id, now, Vec::new());
        drop(st);
        if spawn {
            self.spawn_writer(group_id);
        }
        Ok((codes, wait))
    }

    // ----- writers ----------------------------------------------------------

    /// Claims the writer role for a group; true when the caller must spawn it.
    fn start_writer(&self, g: &mut Group) -> bool {
        if g.writing || g.fenced() {
            return false;
        }
        g.writing = true;
        true
    }

    fn spawn_writer(self: &Arc<Self>, group_id: &str) {
        let me = self.clone();
        let id = group_id.to_string();
        match tokio::runtime::Handle::try_current() {
            Ok(h) => {
                h.spawn(async move { me.write_loop(id).await });
            }
            Err(_) => {
                // Only reachable outside a runtime, never in the broker (the
                // caller may hold the state lock, so it is not touched here).
                tracing::error!(group = group_id, "no runtime to write the group document");
            }
        }
    }

    /// Writes the group's document until it covers every change, then
    /// gives up the writer role (under the state lock, so a change made
    /// after the last check always finds the role free).
    async fn write_loop(self: Arc<Self>, group_id: String) {
        let file = store::file_name(&group_id);
        let lock = self.file_lock(&file);
        let incarnation = match self.state.lock().groups.get(&group_id) {
            Some(g) => g.incarnation,
            None => return,
        };
        loop {
            let guard = lock.lock().await;
            let (version, doc) = {
                let mut st = self.state.lock();
                let Some(g) = st
                    .groups
                    .get_mut(&group_id)
                    .filter(|g| g.incarnation == incarnation)
                else {
                    return;
                };
                if g.version <= g.durable.borrow().version || g.fenced() {
                    g.writing = false;
                    return;
                }
                g.written_meta = Some(g.meta());
                (g.version, g.document())
            };
            let (fs, dir) = (self.fs.clone(), self.dir.clone());
            self.writes.fetch_add(1, Ordering::Relaxed);
            let res = tokio::task::spawn_blocking(move || store::write(fs.as_ref(), &dir, &doc))
                .await
                .map_err(|e| e.to_string())
                .and_then(|r| r.map_err(|e| e.to_string()));
            drop(guard);
            let mut st = self.state.lock();
            let Some(g) = st
                .groups
                .get_mut(&group_id)
                .filter(|g| g.incarnation == incarnation)
            else {
                return;
            };
            match res {
                Ok(()) => {
                    g.durable
                        .send_modify(|d| d.version = d.version.max(version));
                }
                Err(e) => {
                    tracing::error!(group = %group_id, error = %e, "writing the group document failed; its offsets are fenced until restart");
                    g.durable.send_modify(|d| d.failed = Some(e));
                    g.writing = false;
                    return;
                }
            }
        }
    }

    fn file_lock(&self, file: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.file_locks
            .lock()
            .entry(file.to_string())
            .or_default()
            .clone()
    }

    /// Drops a file's lock once nobody else holds or waits for it.
    fn forget_file_lock(&self, file: &str, mine: Arc<tokio::sync::Mutex<()>>) {
        let mut locks = self.file_locks.lock();
        // Ours and the map's are the only references left.
        if Arc::strong_count(&mine) <= 2 {
            locks.remove(file);
        }
    }

    // ----- timers -----------------------------------------------------------

    /// The coordinator's timers (session, rebalance and join timeouts):
    /// fires every group's deadline as it passes, until [`Coordinator::shutdown`].
    /// The broker's owner runs it ([`crate::broker::Timers`]); without it
    /// no deadline fires.
    pub async fn run_timers(self: Arc<Self>) {
        loop {
            if self.state.lock().shut_down {
                return;
            }
            match self.fire_due() {
                Some(at) => {
                    let when = self.epoch + Duration::from_millis(at);
                    tokio::select! {
                        _ = tokio::time::sleep_until(tokio::time::Instant::from_std(when)) => {}
                        _ = self.timer_wake.notified() => {}
                    }
                }
                None => self.timer_wake.notified().await,
            }
        }
    }

    /// Ticks every group whose deadline has passed; returns the next deadline.
    fn fire_due(self: &Arc<Self>) -> Option<Millis> {
        let mut st = self.state.lock();
        let now = self.now();
        let due: Vec<String> = st
            .deadlines
            .iter()
            .take_while(|(d, _)| *d <= now)
            .map(|(_, id)| id.clone())
            .collect();
        for id in due {
            // after_op ticks the group; the deadline is re-indexed there.
            self.settle(&mut st, &id, now, Vec::new());
        }
        st.deadlines.iter().next().map(|(d, _)| *d)
    }

    /// Fires the group's due timers, answers parked requests, re-indexes its
    /// deadline and starts a write when its type or protocol type changed.
    fn settle(self: &Arc<Self>, st: &mut State, group_id: &str, now: Millis, mut out: Vec<Effect>) {
        let mut persist = false;
        if let Some(g) = st.groups.get_mut(group_id) {
            match &mut g.kind {
                Kind::Classic(c) => c.tick(now, &mut out),
                Kind::Consumer(c) => c.tick(now),
            }
            if g.written_meta.as_ref() != Some(&g.meta()) && !g.deleting {
                g.version += 1;
                persist = self.start_writer(g);
            }
        }
        st.dispatch(out);
        st.reindex(group_id);
        if persist {
            self.spawn_writer(group_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use es_storage::simfs::{SimFs, Tear};

    fn commit_req(group: &str, topic: &str, partition: i32, offset: i64) -> CommitRequest {
        CommitRequest {
            group_id: group.to_string(),
            generation_id_or_member_epoch: -1,
            member_id: String::new(),
            group_instance_id: None,
            version: 9,
            transactional: false,
            topics: vec![CommitTopic {
                name: topic.to_string(),
                topic_id: Uuid::nil(),
                partitions: vec![CommitPartition {
                    partition,
                    offset,
                    leader_epoch: 3,
                    metadata: Some(format!("m{offset}")),
                }],
            }],
        }
    }

    fn exists(_: &str) -> Option<Uuid> {
        Some(Uuid::nil())
    }

    async fn committed(c: &Arc<Coordinator>, group: &str, topic: &str, partition: i32) -> i64 {
        let (topics, wait) = c
            .fetch_offsets(
                group,
                Some(vec![(topic.to_string(), vec![partition])]),
                None,
                &exists,
            )
            .expect("fetch");
        if let Some(w) = wait {
            w.wait().await.expect("durable");
        }
        topics[0].partitions[0].offset
    }

    fn try_open(fs: &SimFs) -> Result<Arc<Coordinator>, StorageError> {
        let fs: Arc<dyn Fs> = Arc::new(fs.clone());
        es_storage::fs::create_dir_durable(fs.as_ref(), Path::new("/data"))?;
        Coordinator::open(
            fs,
            Path::new("/data"),
            GroupConfig::default(),
            es_storage::clock::system(),
        )
    }

    fn open(fs: &SimFs) -> Arc<Coordinator> {
        try_open(fs).expect("open")
    }

    #[tokio::test]
    async fn a_commit_is_durable_before_it_is_acknowledged() {
        let fs = SimFs::new();
        let c = open(&fs);
        let out = c.commit(commit_req("g", "t", 0, 42)).expect("accepted");
        assert_eq!(out.errors, vec![vec![Ok(())]]);
        out.wait.expect("a wait").wait().await.expect("durable");
        // Power loss right now: the offset is there.
        let img = fs.crash_image(Tear::None);
        let c2 = open(&img);
        assert_eq!(committed(&c2, "g", "t", 0).await, 42);
        let (all, _) = c2.fetch_offsets("g", None, None, &exists).expect("all");
        assert_eq!(all[0].partitions[0].metadata, "m42");
        assert_eq!(all[0].partitions[0].leader_epoch, 3);
        let listed = c2.list(&[], &[]);
        assert_eq!(listed.len(), 1);
        assert_eq!(
            (listed[0].state.as_str(), listed[0].group_type),
            ("Empty", "classic")
        );
        // Unknown groups and partitions answer -1, not an error.
        assert_eq!(committed(&c2, "g", "t", 1).await, -1);
        assert_eq!(committed(&c2, "nope", "t", 0).await, -1);
    }

    #[tokio::test]
    async fn commits_during_a_write_are_coalesced_into_the_next() {
        let fs = SimFs::new();
        let c = open(&fs);
        let first = c.commit(commit_req("g", "t", 0, 0)).expect("first");
        first.wait.expect("wait").wait().await.expect("durable");
        assert_eq!(c.document_writes(), 1);
        // Hold the file as a writer would, then commit a burst.
        let lock = c.file_lock(&store::file_name("g"));
        let guard = lock.clone().lock_owned().await;
        let mut waits = Vec::new();
        for i in 1..=200 {
            let out = c
                .commit(commit_req("g", "t", i % 4, i64::from(i)))
                .expect("commit");
            waits.push(out.wait.expect("wait"));
        }
        drop(guard);
        for w in waits {
            w.wait().await.expect("durable");
        }
        assert_eq!(c.document_writes(), 2, "200 commits, one write");
        assert_eq!(committed(&c, "g", "t", 0).await, 200);
        assert_eq!(committed(&c, "g", "t", 3).await, 199);
    }

    #[tokio::test]
    async fn acknowledged_commits_survive_a_crash_at_every_sync_point() {
        // Count the sync points of a run without faults, then crash at each.
        let run = |fs: SimFs| async move {
            let Ok(c) = try_open(&fs) else {
                return Vec::new();
            };
            let mut acked = Vec::new();
            for i in 0..4i64 {
                let Ok(out) = c.commit(commit_req("g", "t", 0, i)) else {
                    break;
                };
                match out.wait.expect("wait").wait().await {
                    Ok(()) => acked.push(i),
                    Err(e) => {
                        assert_eq!(e, GroupError::NotCoordinator);
                        break;
                    }
                }
            }
            acked
        };
        let clean = SimFs::new();
        assert_eq!(run(clean.clone()).await, vec![0, 1, 2, 3]);
        let total = clean.sync_count();
        assert!(total >= 8, "a file and a directory sync per write: {total}");
        for k in 1..=total {
            let fs = SimFs::new();
            fs.crash_at_sync(k);
            let acked = run(fs.clone()).await;
            let img = fs.crash_image(Tear::Prefix(k));
            let c = open(&img);
            let got = committed(&c, "g", "t", 0).await;
            match acked.last() {
                Some(last) => assert!(got >= *last, "crash at sync {k}: acked {last}, found {got}"),
                None => assert!(got >= -1),
            }
            // Recovering twice gives the same state.
            let again = open(&img);
            assert_eq!(committed(&again, "g", "t", 0).await, got);
        }
    }

    #[tokio::test]
    async fn transactional_offsets_skip_the_member_checks() {
        let fs = SimFs::new();
        let c = open(&fs);
        let topics = commit_req("g", "t", 2, 9).topics;
        let wait = c.commit_transactional("g", topics).expect("written");
        wait.expect("wait").wait().await.expect("durable");
        assert_eq!(committed(&c, "g", "t", 2).await, 9);
        let img = fs.crash_image(Tear::None);
        assert_eq!(committed(&open(&img), "g", "t", 2).await, 9);
    }

    #[tokio::test]
    async fn a_failed_write_fences_the_group_offsets() {
        let fs = SimFs::new();
        let c = open(&fs);
        let base = fs.sync_count();
        fs.fail_sync_at(base + 1);
        let out = c
            .commit(commit_req("g", "t", 0, 5))
            .expect("accepted in memory");
        assert_eq!(
            out.wait.expect("wait").wait().await,
            Err(GroupError::NotCoordinator)
        );
        assert_eq!(
            c.commit(commit_req("g", "t", 0, 6)).err(),
            Some(GroupError::NotCoordinator)
        );
        assert_eq!(
            c.fetch_offsets("g", None, None, &exists).err(),
            Some(GroupError::NotCoordinator)
        );
        // Other groups are unaffected.
        let ok = c.commit(commit_req("h", "t", 0, 1)).expect("other group");
        ok.wait.expect("wait").wait().await.expect("durable");
    }

    #[tokio::test]
    async fn deleting_a_group_removes_its_document() {
        let fs = SimFs::new();
        let c = open(&fs);
        let out = c.commit(commit_req("g/1", "t", 0, 1)).expect("commit");
        out.wait.expect("wait").wait().await.expect("durable");
        let path = Path::new("/data/groups").join(store::file_name("g/1"));
        assert!(fs.read_all(&path).is_ok());
        assert_eq!(c.delete("g/1").await, Ok(()));
        assert_eq!(c.delete("g/1").await, Err(GroupError::GroupIdNotFound));
        assert!(fs.read_all(&path).is_err());
        assert!(c.list(&[], &[]).is_empty());
        let img = fs.crash_image(Tear::None);
        assert!(open(&img).list(&[], &[]).is_empty());
        // The name can be used again.
        let out = c.commit(commit_req("g/1", "t", 0, 7)).expect("commit");
        out.wait.expect("wait").wait().await.expect("durable");
        assert_eq!(committed(&c, "g/1", "t", 0).await, 7);
    }

    #[tokio::test]
    async fn joins_are_parked_and_answered_and_the_group_type_is_persisted() {
        let fs = SimFs::new();
        let c = open(&fs);
        let req = |member: &str| JoinRequest {
            member_id: member.to_string(),
            group_instance_id: None,
            client_id: "c".into(),
            client_host: String::new(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 10_000,
            protocol_type: "consumer".into(),
            protocols: vec![classic::Protocol {
                name: "range".into(),
                metadata: bytes::Bytes::new(),
            }],
            requires_known_member_id: true,
            supports_skip_assignment: true,
        };
        let r = c.join("g", req("")).await.expect("answered");
        assert_eq!(r.error, Some(GroupError::MemberIdRequired));
        let r = c.join("g", req(&r.member_id)).await.expect("answered");
        assert_eq!((r.error, r.generation_id), (None, 1));
        // Unknown member into an unknown group.
        let e = c.join("other", req("m")).await.expect("answered");
        assert_eq!(e.error, Some(GroupError::UnknownMemberId));
        // A SyncGroup from the leader completes the generation.
        let s = c
            .sync(
                "g",
                SyncRequest {
                    member_id: r.member_id.clone(),
                    group_instance_id: None,
                    generation_id: 1,
                    protocol_type: None,
                    protocol_name: None,
                    assignments: vec![(r.member_id.clone(), bytes::Bytes::from_static(b"a"))],
                },
            )
            .await
            .expect("answered");
        assert_eq!(s.assignment, bytes::Bytes::from_static(b"a"));
        assert_eq!(c.heartbeat("g", &r.member_id, None, 1), Ok(()));
        // The protocol type goes to disk in the background; an OffsetFetch
        // waits for everything written so far.
        let (_, wait) = c.fetch_offsets("g", None, None, &exists).expect("fetch");
        wait.expect("a write is pending")
            .wait()
            .await
            .expect("durable");
        assert_eq!(c.document_writes(), 1);
        let img = fs.crash_image(Tear::None);
        let listed = open(&img).list(&[], &[]);
        assert_eq!(listed[0].protocol_type, "consumer");
        assert_eq!(listed[0].state, "Empty");
        // Shutdown answers parked requests.
        let m2 = c.join("g", req("")).await.expect("handshake").member_id;
        let parked = c.join("g", req(&m2));
        c.shutdown();
        assert_eq!(
            parked.await.expect("answered").error,
            Some(GroupError::NotCoordinator)
        );
    }
}
