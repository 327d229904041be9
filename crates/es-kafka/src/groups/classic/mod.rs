//! The classic consumer group protocol (JoinGroup / SyncGroup / Heartbeat /
//! LeaveGroup) as a sans-io state machine.
//!
//! This mirrors Kafka 4's `GroupMetadataManager` (classic part) and
//! `ClassicGroup` decision for decision, including their error codes, so that
//! clients see exactly what Apache Kafka would answer:
//!
//! - states Empty -> PreparingRebalance -> CompletingRebalance -> Stable, and
//!   Dead for a group being deleted;
//! - the member id handshake (JoinGroup v4+ answers MEMBER_ID_REQUIRED with a
//!   generated id and keeps it as a *pending* member for a session timeout);
//! - the join phase ends when every known member has rejoined (and no member
//!   is pending) or when the rebalance timeout fires; dynamic members that did
//!   not rejoin are removed, static ones are kept;
//! - the first rebalance of an Empty group waits `initial_rebalance_delay_ms`;
//! - session timeouts remove members that stop heartbeating, members that do
//!   not send SyncGroup within the rebalance timeout are removed too, and
//!   either triggers a rebalance;
//! - protocol selection by vote among the protocols every member supports;
//! - static membership (KIP-345): a known `group.instance.id` joining with an
//!   unknown member id replaces the old member id (which is fenced with
//!   FENCED_INSTANCE_ID) and, if the selected protocol does not change, gets
//!   the current generation and assignment back without a rebalance.
//!
//! Parked requests are identified by a [`Token`]; every token handed to the
//! machine is answered exactly once through an [`Effect`] (immediately or
//! later), including when its member is removed or replaced. Timers are
//! deadlines in [`Millis`]; [`ClassicGroup::tick`] fires those that are due
//! and [`ClassicGroup::next_deadline`] says when to call it next.
//!
//! The machine is one [`ClassicGroup`], its methods split by phase, each file
//! an `impl ClassicGroup` block. This file owns the types, the member
//! bookkeeping (add, update, remove a member) and the small queries every
//! phase uses. Calls between the files go one way:
//!
//! - `rebalance.rs`: preparing and completing a rebalance, the join timers,
//!   protocol selection, handing out the assignment; calls only this file;
//! - `static_members.rs`: `group.instance.id` fencing and replacement (KIP-345);
//!   calls the rebalance;
//! - `join.rs`, `sync.rs`, `heartbeat.rs` (with the session timers and
//!   `tick`), `leave.rs`, `offsets.rs` (commit and delete validation) and
//!   `admin.rs` (describe, delete): one request each, calling the files above
//!   (and `offsets.rs` the session timer of `heartbeat.rs`), never each other
//!   otherwise.

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use indexmap::IndexMap;

use super::error::GroupError;
use super::{GroupConfig, Millis, Token};

mod admin;
mod heartbeat;
mod join;
mod leave;
mod offsets;
mod rebalance;
mod static_members;
mod sync;

/// The state of a classic group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClassicState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl ClassicState {
    /// The name Kafka uses in DescribeGroups and ListGroups.
    pub fn as_str(self) -> &'static str {
        match self {
            ClassicState::Empty => "Empty",
            ClassicState::PreparingRebalance => "PreparingRebalance",
            ClassicState::CompletingRebalance => "CompletingRebalance",
            ClassicState::Stable => "Stable",
            ClassicState::Dead => "Dead",
        }
    }
}

/// One protocol a member supports (for consumers: an assignor name and the
/// serialized subscription).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Protocol {
    pub name: String,
    pub metadata: Bytes,
}

/// A JoinGroup request, after the coordinator's own checks (group id not
/// empty, session timeout in range).
#[derive(Clone, Debug)]
pub struct JoinRequest {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    /// v0 has no rebalance timeout: the caller passes the session timeout.
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<Protocol>,
    /// JoinGroup v4+: a new dynamic member first gets MEMBER_ID_REQUIRED.
    pub requires_known_member_id: bool,
    /// JoinGroup v9+: a static leader rejoining without a rebalance is told
    /// to skip the assignment (KIP-814).
    pub supports_skip_assignment: bool,
}

/// A member as listed to the leader in its JoinGroup response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub metadata: Bytes,
}

/// The answer to a JoinGroup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinResponse {
    pub error: Option<GroupError>,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub skip_assignment: bool,
    pub member_id: String,
    pub members: Vec<JoinMember>,
}

impl JoinResponse {
    /// An error answer carrying only the member id.
    pub fn error(error: GroupError, member_id: &str) -> Self {
        JoinResponse {
            error: Some(error),
            generation_id: -1,
            protocol_type: None,
            protocol_name: None,
            leader: String::new(),
            skip_assignment: false,
            member_id: member_id.to_string(),
            members: Vec::new(),
        }
    }
}

/// A SyncGroup request.
#[derive(Clone, Debug)]
pub struct SyncRequest {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    /// The leader's assignment, by member id.
    pub assignments: Vec<(String, Bytes)>,
}

/// The answer to a SyncGroup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyncResponse {
    pub error: Option<GroupError>,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

impl SyncResponse {
    pub fn error(error: GroupError) -> Self {
        SyncResponse {
            error: Some(error),
            protocol_type: None,
            protocol_name: None,
            assignment: Bytes::new(),
        }
    }
}

/// One member named in a LeaveGroup request.
#[derive(Clone, Debug)]
pub struct LeaveMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
}

/// What the machine asks its shell to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Answer the parked JoinGroup `Token`.
    Join(Token, JoinResponse),
    /// Answer the parked SyncGroup `Token`.
    Sync(Token, SyncResponse),
}

/// A member as DescribeGroups shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribedMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Bytes,
    pub assignment: Bytes,
}

/// A group as DescribeGroups shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Described {
    pub state: &'static str,
    pub protocol_type: String,
    pub protocol_data: String,
    pub members: Vec<DescribedMember>,
}

#[derive(Clone, Debug)]
struct Member {
    member_id: String,
    group_instance_id: Option<String>,
    client_id: String,
    client_host: String,
    rebalance_timeout_ms: i32,
    session_timeout_ms: i32,
    protocol_type: String,
    protocols: Vec<Protocol>,
    assignment: Bytes,
    awaiting_join: Option<Token>,
    awaiting_sync: Option<Token>,
    /// Joined during the current rebalance: may expire while awaiting join.
    is_new: bool,
    /// When the session (or new-member join) timer fires.
    heartbeat_deadline: Option<Millis>,
}

impl Member {
    fn matches(&self, protocols: &[Protocol]) -> bool {
        self.protocols == protocols
    }

    fn has_satisfied_heartbeat(&self) -> bool {
        !self.is_new && (self.awaiting_join.is_some() || self.awaiting_sync.is_some())
    }

    fn metadata(&self, protocol: Option<&str>) -> Bytes {
        protocol
            .and_then(|p| self.protocols.iter().find(|x| x.name == p))
            .map(|p| p.metadata.clone())
            .unwrap_or_default()
    }

    fn vote(&self, candidates: &HashSet<&str>) -> Option<&str> {
        self.protocols
            .iter()
            .map(|p| p.name.as_str())
            .find(|n| candidates.contains(n))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum JoinTimer {
    /// The first rebalance of an Empty group, delayed (KIP-134).
    Initial { delay_ms: u64, remaining_ms: u64 },
    /// The rebalance timeout: complete the join phase with whoever rejoined.
    Complete,
}

/// A classic group.
#[derive(Debug)]
pub struct ClassicGroup {
    group_id: String,
    config: GroupConfig,
    state: ClassicState,
    previous_state: ClassicState,
    protocol_type: Option<String>,
    protocol_name: Option<String>,
    generation_id: i32,
    leader_id: Option<String>,
    /// Insertion-ordered so leader hand-over and listings are deterministic.
    members: IndexMap<String, Member>,
    /// group.instance.id -> member id.
    static_members: HashMap<String, String>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, and when they expire.
    pending_join: IndexMap<String, Millis>,
    pending_sync: HashSet<String>,
    new_member_added: bool,
    join_timer: Option<(Millis, JoinTimer)>,
    /// (deadline, generation it was scheduled for).
    sync_timer: Option<(Millis, i32)>,
}

impl ClassicGroup {
    /// A new, Empty group.
    pub fn new(group_id: &str, config: GroupConfig) -> Self {
        ClassicGroup {
            group_id: group_id.to_string(),
            config,
            state: ClassicState::Empty,
            previous_state: ClassicState::Empty,
            protocol_type: None,
            protocol_name: None,
            generation_id: 0,
            leader_id: None,
            members: IndexMap::new(),
            static_members: HashMap::new(),
            pending_join: IndexMap::new(),
            pending_sync: HashSet::new(),
            new_member_added: false,
            join_timer: None,
            sync_timer: None,
        }
    }

    /// An Empty group as loaded from disk (members are never persisted).
    pub fn loaded(group_id: &str, config: GroupConfig, protocol_type: Option<String>) -> Self {
        let mut g = Self::new(group_id, config);
        g.protocol_type = protocol_type.filter(|t| !t.is_empty());
        g
    }

    pub fn group_id(&self) -> &str {
        &self.group_id
    }

    pub fn state(&self) -> ClassicState {
        self.state
    }

    pub fn generation_id(&self) -> i32 {
        self.generation_id
    }

    pub fn protocol_type(&self) -> Option<&str> {
        self.protocol_type.as_deref()
    }

    pub fn protocol_name(&self) -> Option<&str> {
        self.protocol_name.as_deref()
    }

    pub fn leader(&self) -> Option<&str> {
        self.leader_id.as_deref()
    }

    pub fn member_ids(&self) -> Vec<String> {
        self.members.keys().cloned().collect()
    }

    pub fn has_member(&self, member_id: &str) -> bool {
        self.members.contains_key(member_id)
    }

    pub fn is_pending_member(&self, member_id: &str) -> bool {
        self.pending_join.contains_key(member_id)
    }

    pub fn num_members(&self) -> usize {
        self.members.len()
    }

    pub fn static_member_id(&self, instance_id: &str) -> Option<&str> {
        self.static_members.get(instance_id).map(String::as_str)
    }

    /// The assignment a member got in the current generation.
    pub fn assignment(&self, member_id: &str) -> Option<Bytes> {
        self.members.get(member_id).map(|m| m.assignment.clone())
    }

    /// Whether the group is Empty (no members and, so, deletable).
    pub fn is_empty(&self) -> bool {
        self.state == ClassicState::Empty
    }

    /// Members in the group now.
    pub fn member_count(&self) -> usize {
        self.members.len()
    }
    fn add(&mut self, member: Member) {
        if let Some(iid) = &member.group_instance_id {
            debug_assert!(!self.static_members.contains_key(iid));
            self.static_members
                .insert(iid.clone(), member.member_id.clone());
        }
        if self.members.is_empty() {
            self.protocol_type = Some(member.protocol_type.clone());
        }
        if self.leader_id.is_none() {
            self.leader_id = Some(member.member_id.clone());
        }
        self.pending_join.shift_remove(&member.member_id);
        self.members.insert(member.member_id.clone(), member);
    }

    /// Removes a member (or pending member), answering whatever it had parked
    /// with UNKNOWN_MEMBER_ID. Does not rebalance.
    fn remove_member(&mut self, member_id: &str, out: &mut Vec<Effect>) {
        if let Some(m) = self.members.shift_remove(member_id) {
            if let Some(t) = m.awaiting_join {
                out.push(Effect::Join(
                    t,
                    JoinResponse::error(GroupError::UnknownMemberId, ""),
                ));
            }
            if let Some(t) = m.awaiting_sync {
                out.push(Effect::Sync(
                    t,
                    SyncResponse::error(GroupError::UnknownMemberId),
                ));
            }
            if let Some(iid) = &m.group_instance_id {
                self.static_members.remove(iid);
            }
        }
        if self.is_leader(member_id) {
            self.leader_id = self.members.keys().next().cloned();
        }
        self.pending_join.shift_remove(member_id);
        self.pending_sync.remove(member_id);
    }

    /// Replaces a member's protocols and timeouts and parks its new join.
    fn update_member(
        &mut self,
        member_id: &str,
        protocols: Vec<Protocol>,
        rebalance_timeout_ms: i32,
        session_timeout_ms: i32,
        token: Token,
        out: &mut Vec<Effect>,
    ) {
        if let Some(m) = self.members.get_mut(member_id) {
            m.protocols = protocols;
            m.rebalance_timeout_ms = rebalance_timeout_ms;
            m.session_timeout_ms = session_timeout_ms;
            if let Some(old) = m.awaiting_join.replace(token) {
                // A second JoinGroup while the first is parked (the client
                // gave up on it): the newer one wins, the older is answered.
                out.push(Effect::Join(
                    old,
                    JoinResponse::error(GroupError::RebalanceInProgress, member_id),
                ));
            }
        }
    }

    fn has_all_members_joined(&self) -> bool {
        self.pending_join.is_empty() && self.num_awaiting_join() == self.members.len()
    }

    fn num_awaiting_join(&self) -> usize {
        self.members
            .values()
            .filter(|m| m.awaiting_join.is_some())
            .count()
    }

    /// The group's rebalance timeout: the largest of its members'.
    fn rebalance_timeout_ms(&self) -> u64 {
        self.members
            .values()
            .map(|m| timeout(m.rebalance_timeout_ms))
            .max()
            .unwrap_or(0)
    }

    fn is_leader(&self, member_id: &str) -> bool {
        self.leader_id.as_deref() == Some(member_id)
    }

    fn transition(&mut self, to: ClassicState) {
        self.previous_state = self.state;
        self.state = to;
    }

    fn current_members(&self) -> Vec<JoinMember> {
        let protocol = self.protocol_name.as_deref();
        self.members
            .values()
            .map(|m| JoinMember {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                metadata: m.metadata(protocol),
            })
            .collect()
    }

    fn join_response(&self, member_id: &str, members: Vec<JoinMember>, skip: bool) -> JoinResponse {
        JoinResponse {
            error: None,
            generation_id: self.generation_id,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            leader: self.leader_id.clone().unwrap_or_default(),
            skip_assignment: skip,
            member_id: member_id.to_string(),
            members,
        }
    }

    /// Answers every parked request with `error` (the coordinator is shutting
    /// down).
    pub fn abort_all(&mut self, error: GroupError, out: &mut Vec<Effect>) {
        for m in self.members.values_mut() {
            if let Some(t) = m.awaiting_join.take() {
                out.push(Effect::Join(
                    t,
                    JoinResponse::error(error.clone(), &m.member_id),
                ));
            }
            if let Some(t) = m.awaiting_sync.take() {
                out.push(Effect::Sync(t, SyncResponse::error(error.clone())));
            }
        }
    }
}

/// A client's millisecond timeout as a deadline offset (negative is 0).
fn timeout(ms: i32) -> u64 {
    u64::try_from(ms).unwrap_or(0)
}

#[cfg(test)]
mod classic_tests;
