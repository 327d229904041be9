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

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use indexmap::IndexMap;

use super::error::GroupError;
use super::{new_member_id, GroupConfig, Millis, Token, CONSUMER_PROTOCOL_TYPE};

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

    // ----- joining -------------------------------------------------------

    /// Handles a JoinGroup. The answer comes as an [`Effect::Join`] for
    /// `token`, now or when the join phase completes.
    pub fn join(&mut self, now: Millis, token: Token, req: JoinRequest, out: &mut Vec<Effect>) {
        if !self.accept_joining_member(&req.member_id) {
            // As Kafka: a member over the limit is kicked out (it may be a
            // late rejoiner of an oversized group).
            self.remove_member(&req.member_id, out);
            out.push(Effect::Join(
                token,
                JoinResponse::error(GroupError::GroupMaxSizeReached, ""),
            ));
            return;
        }
        if req.member_id.is_empty() {
            self.join_new_member(now, token, req, out);
        } else {
            self.join_existing_member(now, token, req, out);
        }
    }

    fn accept_joining_member(&self, member_id: &str) -> bool {
        let max = self.config.members_max;
        match self.state {
            ClassicState::Empty | ClassicState::Dead => true,
            ClassicState::PreparingRebalance => {
                self.members
                    .get(member_id)
                    .is_some_and(|m| m.awaiting_join.is_some())
                    || self.num_awaiting_join() + self.pending_join.len() < max
            }
            ClassicState::CompletingRebalance | ClassicState::Stable => {
                self.members.contains_key(member_id)
                    || self.members.len() + self.pending_join.len() < max
            }
        }
    }

    fn join_new_member(
        &mut self,
        now: Millis,
        token: Token,
        req: JoinRequest,
        out: &mut Vec<Effect>,
    ) {
        if self.state == ClassicState::Dead {
            out.push(Effect::Join(
                token,
                JoinResponse::error(GroupError::CoordinatorNotAvailable, ""),
            ));
            return;
        }
        if !self.supports_protocols(&req.protocol_type, &req.protocols) {
            out.push(Effect::Join(
                token,
                JoinResponse::error(GroupError::InconsistentGroupProtocol, ""),
            ));
            return;
        }
        let new_id = new_member_id(&req.client_id, req.group_instance_id.as_deref());
        if let Some(instance_id) = req.group_instance_id.clone() {
            match self.static_members.get(&instance_id).cloned() {
                Some(old_id) if self.members.contains_key(&old_id) => {
                    self.replace_static_member_and_rejoin(now, token, req, &old_id, new_id, out)
                }
                _ => self.add_member_then_rebalance(now, token, req, new_id, out),
            }
        } else if req.requires_known_member_id {
            let expires = now.saturating_add(timeout(req.session_timeout_ms));
            self.pending_join.insert(new_id.clone(), expires);
            out.push(Effect::Join(
                token,
                JoinResponse::error(GroupError::MemberIdRequired, &new_id),
            ));
        } else {
            self.add_member_then_rebalance(now, token, req, new_id, out);
        }
    }

    fn join_existing_member(
        &mut self,
        now: Millis,
        token: Token,
        req: JoinRequest,
        out: &mut Vec<Effect>,
    ) {
        let member_id = req.member_id.clone();
        if self.state == ClassicState::Dead {
            out.push(Effect::Join(
                token,
                JoinResponse::error(GroupError::CoordinatorNotAvailable, &member_id),
            ));
            return;
        }
        if !self.supports_protocols(&req.protocol_type, &req.protocols) {
            out.push(Effect::Join(
                token,
                JoinResponse::error(GroupError::InconsistentGroupProtocol, &member_id),
            ));
            return;
        }
        if self.pending_join.contains_key(&member_id) && req.group_instance_id.is_none() {
            self.add_member_then_rebalance(now, token, req, member_id, out);
            return;
        }
        if let Err(e) = self.validate_member(&member_id, req.group_instance_id.as_deref()) {
            out.push(Effect::Join(token, JoinResponse::error(e, &member_id)));
            return;
        }
        let (matches, is_leader) = match self.members.get(&member_id) {
            Some(m) => (m.matches(&req.protocols), self.is_leader(&member_id)),
            None => (false, false),
        };
        match self.state {
            ClassicState::PreparingRebalance => {
                self.update_member_then_rebalance(now, token, req, out);
            }
            ClassicState::CompletingRebalance => {
                if matches {
                    // The member lost its JoinGroup response: resend it.
                    let members = if is_leader {
                        self.current_members()
                    } else {
                        Vec::new()
                    };
                    let r = self.join_response(&member_id, members, false);
                    out.push(Effect::Join(token, r));
                } else {
                    self.update_member_then_rebalance(now, token, req, out);
                }
            }
            ClassicState::Stable => {
                if is_leader || !matches {
                    // The leader rejoining forces a rebalance (that is how a
                    // consumer reacts to metadata changes); so does any
                    // change of a member's protocols.
                    self.update_member_then_rebalance(now, token, req, out);
                } else {
                    let r = self.join_response(&member_id, Vec::new(), false);
                    out.push(Effect::Join(token, r));
                }
            }
            ClassicState::Empty | ClassicState::Dead => {
                out.push(Effect::Join(
                    token,
                    JoinResponse::error(GroupError::UnknownMemberId, &member_id),
                ));
            }
        }
    }

    fn add_member_then_rebalance(
        &mut self,
        now: Millis,
        token: Token,
        req: JoinRequest,
        member_id: String,
        out: &mut Vec<Effect>,
    ) {
        if self.state == ClassicState::PreparingRebalance
            && self.previous_state == ClassicState::Empty
        {
            self.new_member_added = true;
        }
        let member = Member {
            member_id: member_id.clone(),
            group_instance_id: req.group_instance_id,
            client_id: req.client_id,
            client_host: req.client_host,
            rebalance_timeout_ms: req.rebalance_timeout_ms,
            session_timeout_ms: req.session_timeout_ms,
            protocol_type: req.protocol_type,
            protocols: req.protocols,
            assignment: Bytes::new(),
            awaiting_join: Some(token),
            awaiting_sync: None,
            is_new: true,
            // A parked new member cannot heartbeat; its join is bounded by
            // the new-member join timeout instead.
            heartbeat_deadline: Some(now.saturating_add(self.config.new_member_join_timeout_ms)),
        };
        self.add(member);
        self.maybe_prepare_rebalance_or_complete_join(now, out);
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

    fn update_member_then_rebalance(
        &mut self,
        now: Millis,
        token: Token,
        req: JoinRequest,
        out: &mut Vec<Effect>,
    ) {
        self.update_member(
            &req.member_id,
            req.protocols,
            req.rebalance_timeout_ms,
            req.session_timeout_ms,
            token,
            out,
        );
        self.maybe_prepare_rebalance_or_complete_join(now, out);
    }

    /// KIP-345: a known static member came back with an unknown member id.
    fn replace_static_member_and_rejoin(
        &mut self,
        now: Millis,
        token: Token,
        req: JoinRequest,
        old_id: &str,
        new_id: String,
        out: &mut Vec<Effect>,
    ) {
        let Some(instance_id) = req.group_instance_id.clone() else {
            return;
        };
        let current_leader = self.leader_id.clone();
        let Some(index) = self.members.get_index_of(old_id) else {
            return;
        };
        let Some((_, mut m)) = self.members.shift_remove_index(index) else {
            return;
        };
        // Fence whatever the old incarnation had parked.
        if let Some(t) = m.awaiting_join.take() {
            let mut r = JoinResponse::error(GroupError::FencedInstanceId, old_id);
            r.generation_id = -1;
            out.push(Effect::Join(t, r));
        }
        if let Some(t) = m.awaiting_sync.take() {
            out.push(Effect::Sync(
                t,
                SyncResponse::error(GroupError::FencedInstanceId),
            ));
        }
        // Same place in the member order, new id, same assignment.
        m.member_id = new_id.clone();
        m.is_new = false;
        m.heartbeat_deadline = Some(now.saturating_add(timeout(m.session_timeout_ms)));
        self.members.shift_insert(index, new_id.clone(), m);
        if self.is_leader(old_id) {
            self.leader_id = Some(new_id.clone());
        }
        self.pending_sync.remove(old_id);
        self.static_members.insert(instance_id, new_id.clone());

        self.update_member(
            &new_id,
            req.protocols,
            req.rebalance_timeout_ms,
            req.session_timeout_ms,
            token,
            out,
        );
        match self.state {
            ClassicState::Stable => {
                let selected = self.select_protocol();
                if selected.is_some() && selected == self.protocol_name {
                    // No rebalance: hand back the current generation.
                    let is_leader = self.is_leader(&new_id);
                    let r = if req.supports_skip_assignment {
                        let members = if is_leader {
                            self.current_members()
                        } else {
                            Vec::new()
                        };
                        self.join_response(&new_id, members, is_leader)
                    } else {
                        let mut r = self.join_response(&new_id, Vec::new(), false);
                        // Before v9 the leader is told it is a follower, so it
                        // fetches its assignment with SyncGroup.
                        r.leader = current_leader.unwrap_or_default();
                        r
                    };
                    if let Some(m) = self.members.get_mut(&new_id) {
                        m.awaiting_join = None;
                    }
                    out.push(Effect::Join(token, r));
                } else {
                    self.maybe_prepare_rebalance_or_complete_join(now, out);
                }
            }
            ClassicState::CompletingRebalance => {
                // The leader may already be assigning with the old member id.
                self.prepare_rebalance(now, out);
            }
            ClassicState::PreparingRebalance => self.maybe_complete_join_phase(now, out),
            ClassicState::Empty | ClassicState::Dead => {
                self.maybe_prepare_rebalance_or_complete_join(now, out)
            }
        }
    }

    // ----- the rebalance -------------------------------------------------

    fn can_rebalance(&self) -> bool {
        matches!(
            self.state,
            ClassicState::Stable | ClassicState::CompletingRebalance | ClassicState::Empty
        )
    }

    fn maybe_prepare_rebalance_or_complete_join(&mut self, now: Millis, out: &mut Vec<Effect>) {
        if self.can_rebalance() {
            self.prepare_rebalance(now, out);
        } else {
            self.maybe_complete_join_phase(now, out);
        }
    }

    fn prepare_rebalance(&mut self, now: Millis, out: &mut Vec<Effect>) {
        if self.state == ClassicState::CompletingRebalance {
            for m in self.members.values_mut() {
                m.assignment = Bytes::new();
            }
            self.propagate_assignment(now, Some(GroupError::RebalanceInProgress), out);
        }
        self.pending_sync.clear();
        self.sync_timer = None;
        let initial = self.state == ClassicState::Empty;
        if initial {
            let delay = self.config.initial_rebalance_delay_ms;
            let remaining = self.rebalance_timeout_ms().saturating_sub(delay);
            self.join_timer = Some((
                now.saturating_add(delay),
                JoinTimer::Initial {
                    delay_ms: delay,
                    remaining_ms: remaining,
                },
            ));
        }
        self.transition(ClassicState::PreparingRebalance);
        if !initial {
            if self.has_all_members_joined() {
                self.complete_join(now, out);
            } else {
                self.join_timer = Some((
                    now.saturating_add(self.rebalance_timeout_ms()),
                    JoinTimer::Complete,
                ));
            }
        }
    }

    fn maybe_complete_join_phase(&mut self, now: Millis, out: &mut Vec<Effect>) {
        if self.state == ClassicState::PreparingRebalance
            && self.previous_state != ClassicState::Empty
            && self.has_all_members_joined()
        {
            self.complete_join(now, out);
        }
    }

    fn complete_join(&mut self, now: Millis, out: &mut Vec<Effect>) {
        self.join_timer = None;
        let gone: Vec<String> = self
            .members
            .values()
            .filter(|m| m.awaiting_join.is_none() && m.group_instance_id.is_none())
            .map(|m| m.member_id.clone())
            .collect();
        for id in &gone {
            self.remove_member(id, out);
        }
        if !gone.is_empty() {
            tracing::info!(group = %self.group_id, removed = ?gone, "removed dynamic members that did not rejoin");
        }
        if self.state == ClassicState::Dead {
            return;
        }
        if !self.maybe_elect_new_joined_leader() && !self.members.is_empty() {
            // Only static members that have not rejoined are left: wait
            // another rebalance timeout (or their session timeouts).
            self.join_timer = Some((
                now.saturating_add(self.rebalance_timeout_ms()),
                JoinTimer::Complete,
            ));
            return;
        }
        self.generation_id = self.generation_id.wrapping_add(1);
        if self.members.is_empty() {
            self.protocol_name = None;
            self.transition(ClassicState::Empty);
            self.pending_sync.clear();
            tracing::info!(group = %self.group_id, generation = self.generation_id, "group is now empty");
            return;
        }
        self.protocol_name = self.select_protocol();
        self.transition(ClassicState::CompletingRebalance);
        self.pending_sync.clear();
        tracing::info!(
            group = %self.group_id,
            generation = self.generation_id,
            members = self.members.len(),
            protocol = ?self.protocol_name,
            "stabilized group"
        );
        let leader_members = self.current_members();
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            let is_leader = self.is_leader(&id);
            let members = if is_leader {
                leader_members.clone()
            } else {
                Vec::new()
            };
            let r = self.join_response(&id, members, false);
            if let Some(m) = self.members.get_mut(&id) {
                if let Some(t) = m.awaiting_join.take() {
                    out.push(Effect::Join(t, r));
                }
                m.heartbeat_deadline = Some(now.saturating_add(timeout(m.session_timeout_ms)));
                m.is_new = false;
            }
            self.pending_sync.insert(id);
        }
        self.sync_timer = Some((
            now.saturating_add(self.rebalance_timeout_ms()),
            self.generation_id,
        ));
    }

    fn maybe_elect_new_joined_leader(&mut self) -> bool {
        let Some(leader) = self.leader_id.clone() else {
            return false;
        };
        let leader_rejoined = self
            .members
            .get(&leader)
            .is_some_and(|m| m.awaiting_join.is_some());
        if leader_rejoined {
            return true;
        }
        match self
            .members
            .values()
            .find(|m| m.awaiting_join.is_some())
            .map(|m| m.member_id.clone())
        {
            Some(new_leader) => {
                tracing::info!(group = %self.group_id, old = %leader, new = %new_leader, "leader did not rejoin; elected a new leader");
                self.leader_id = Some(new_leader);
                true
            }
            None => false,
        }
    }

    /// Each member votes for its most preferred protocol among those every
    /// member supports; the most votes wins (ties go to the protocol the
    /// earliest member voted for).
    fn select_protocol(&self) -> Option<String> {
        let n = self.members.len();
        let mut support: HashMap<&str, usize> = HashMap::new();
        for m in self.members.values() {
            for p in &m.protocols {
                *support.entry(p.name.as_str()).or_default() += 1;
            }
        }
        let candidates: HashSet<&str> = support
            .into_iter()
            .filter(|&(_, c)| c == n)
            .map(|(p, _)| p)
            .collect();
        let mut votes: IndexMap<&str, usize> = IndexMap::new();
        for m in self.members.values() {
            if let Some(p) = m.vote(&candidates) {
                *votes.entry(p).or_default() += 1;
            }
        }
        let mut best: Option<(&str, usize)> = None;
        for (p, v) in votes {
            if best.is_none_or(|(_, b)| v > b) {
                best = Some((p, v));
            }
        }
        best.map(|(p, _)| p.to_string())
    }

    /// Whether a member with this protocol type and these protocols can join:
    /// an Empty group takes any non-empty set; otherwise the type must match
    /// and one protocol must be supported by every current member.
    fn supports_protocols(&self, protocol_type: &str, protocols: &[Protocol]) -> bool {
        if self.state == ClassicState::Empty {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        if self.protocol_type.as_deref() != Some(protocol_type) {
            return false;
        }
        let n = self.members.len();
        protocols.iter().any(|p| {
            self.members
                .values()
                .filter(|m| m.protocols.iter().any(|q| q.name == p.name))
                .count()
                == n
        })
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

    /// Answers every parked SyncGroup with the member's assignment (or with
    /// `error`), restarting the session timer of each member answered.
    fn propagate_assignment(
        &mut self,
        now: Millis,
        error: Option<GroupError>,
        out: &mut Vec<Effect>,
    ) {
        let (ptype, pname) = if error.is_none() {
            (self.protocol_type.clone(), self.protocol_name.clone())
        } else {
            (None, None)
        };
        for m in self.members.values_mut() {
            if let Some(t) = m.awaiting_sync.take() {
                out.push(Effect::Sync(
                    t,
                    SyncResponse {
                        error: error.clone(),
                        protocol_type: ptype.clone(),
                        protocol_name: pname.clone(),
                        assignment: m.assignment.clone(),
                    },
                ));
                m.heartbeat_deadline = Some(now.saturating_add(timeout(m.session_timeout_ms)));
            }
        }
    }

    // ----- validation ----------------------------------------------------

    /// Kafka's `validateMember`: a static instance id must map to this member
    /// id (FENCED_INSTANCE_ID otherwise), and the member must exist.
    fn validate_member(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<(), GroupError> {
        if let Some(iid) = instance_id {
            match self.static_members.get(iid) {
                None => return Err(GroupError::UnknownMemberId),
                Some(known) if known != member_id => {
                    tracing::info!(group = %self.group_id, member_id, instance_id = iid, current = %known, "fenced static member");
                    return Err(GroupError::FencedInstanceId);
                }
                Some(_) => {}
            }
        }
        if !self.members.contains_key(member_id) {
            return Err(GroupError::UnknownMemberId);
        }
        Ok(())
    }

    // ----- sync, heartbeat, leave ---------------------------------------

    /// Handles a SyncGroup. The answer comes as an [`Effect::Sync`] for
    /// `token`, now or once the leader has sent the assignment.
    pub fn sync(&mut self, now: Millis, token: Token, req: SyncRequest, out: &mut Vec<Effect>) {
        let reply = |e: GroupError, out: &mut Vec<Effect>| {
            out.push(Effect::Sync(token, SyncResponse::error(e)))
        };
        if self.state == ClassicState::Empty {
            return reply(GroupError::UnknownMemberId, out);
        }
        if self.state == ClassicState::Dead {
            return reply(GroupError::CoordinatorNotAvailable, out);
        }
        if let Err(e) = self.validate_member(&req.member_id, req.group_instance_id.as_deref()) {
            return reply(e, out);
        }
        if req.generation_id != self.generation_id {
            return reply(GroupError::IllegalGeneration, out);
        }
        if inconsistent(req.protocol_type.as_deref(), self.protocol_type.as_deref())
            || inconsistent(req.protocol_name.as_deref(), self.protocol_name.as_deref())
        {
            return reply(GroupError::InconsistentGroupProtocol, out);
        }
        match self.state {
            ClassicState::PreparingRebalance => reply(GroupError::RebalanceInProgress, out),
            ClassicState::CompletingRebalance => {
                if let Some(m) = self.members.get_mut(&req.member_id) {
                    if let Some(old) = m.awaiting_sync.replace(token) {
                        out.push(Effect::Sync(
                            old,
                            SyncResponse::error(GroupError::RebalanceInProgress),
                        ));
                    }
                }
                self.remove_pending_sync_member(&req.member_id);
                if self.is_leader(&req.member_id) {
                    tracing::info!(group = %self.group_id, generation = self.generation_id, "assignment received from the leader");
                    let mut assignment: HashMap<String, Bytes> = HashMap::new();
                    for (id, a) in req.assignments {
                        assignment.insert(id, a);
                    }
                    for m in self.members.values_mut() {
                        m.assignment = assignment.remove(&m.member_id).unwrap_or_default();
                    }
                    self.propagate_assignment(now, None, out);
                    self.transition(ClassicState::Stable);
                }
            }
            ClassicState::Stable => {
                self.remove_pending_sync_member(&req.member_id);
                let assignment = self
                    .members
                    .get(&req.member_id)
                    .map(|m| m.assignment.clone())
                    .unwrap_or_default();
                out.push(Effect::Sync(
                    token,
                    SyncResponse {
                        error: None,
                        protocol_type: self.protocol_type.clone(),
                        protocol_name: self.protocol_name.clone(),
                        assignment,
                    },
                ));
            }
            ClassicState::Empty | ClassicState::Dead => reply(GroupError::UnknownMemberId, out),
        }
    }

    fn remove_pending_sync_member(&mut self, member_id: &str) {
        self.pending_sync.remove(member_id);
        if self.pending_sync.is_empty() {
            self.sync_timer = None;
        }
    }

    /// Handles a Heartbeat.
    pub fn heartbeat(
        &mut self,
        now: Millis,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
    ) -> Result<(), GroupError> {
        if self.state == ClassicState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        self.validate_member(member_id, instance_id)?;
        if generation_id != self.generation_id {
            return Err(GroupError::IllegalGeneration);
        }
        match self.state {
            ClassicState::Empty | ClassicState::Dead => Err(GroupError::UnknownMemberId),
            ClassicState::PreparingRebalance => {
                self.reschedule_heartbeat(now, member_id);
                Err(GroupError::RebalanceInProgress)
            }
            ClassicState::CompletingRebalance | ClassicState::Stable => {
                self.reschedule_heartbeat(now, member_id);
                Ok(())
            }
        }
    }

    fn reschedule_heartbeat(&mut self, now: Millis, member_id: &str) {
        if let Some(m) = self.members.get_mut(member_id) {
            m.heartbeat_deadline = Some(now.saturating_add(timeout(m.session_timeout_ms)));
        }
    }

    /// Handles a LeaveGroup: one outcome per member, or a group-level
    /// error.
    pub fn leave(
        &mut self,
        now: Millis,
        members: &[LeaveMember],
        out: &mut Vec<Effect>,
    ) -> Result<Vec<Result<(), GroupError>>, GroupError> {
        if self.state == ClassicState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        let mut codes = Vec::with_capacity(members.len());
        let mut any = false;
        for lm in members {
            let c = if lm.member_id.is_empty() {
                // Administrative removal by group.instance.id.
                match lm
                    .group_instance_id
                    .as_ref()
                    .and_then(|iid| self.static_members.get(iid).cloned())
                {
                    Some(id) => {
                        self.remove_member(&id, out);
                        Ok(())
                    }
                    None => Err(GroupError::UnknownMemberId),
                }
            } else if self.pending_join.contains_key(&lm.member_id) {
                self.pending_join.shift_remove(&lm.member_id);
                Ok(())
            } else {
                let valid = self.validate_member(&lm.member_id, lm.group_instance_id.as_deref());
                if valid.is_ok() {
                    self.remove_member(&lm.member_id, out);
                }
                valid
            };
            if c.is_ok() {
                any = true;
                tracing::info!(group = %self.group_id, member = %lm.member_id, "member left the group");
            }
            codes.push(c);
        }
        if any {
            match self.state {
                ClassicState::Stable | ClassicState::CompletingRebalance => {
                    self.maybe_prepare_rebalance_or_complete_join(now, out)
                }
                ClassicState::PreparingRebalance => self.maybe_complete_join_phase(now, out),
                ClassicState::Empty | ClassicState::Dead => {}
            }
        }
        Ok(codes)
    }

    // ----- offsets -------------------------------------------------------

    /// Kafka's `ClassicGroup.validateOffsetCommit` (non-transactional).
    pub fn validate_offset_commit(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
    ) -> Result<(), GroupError> {
        if self.state == ClassicState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        if generation_id < 0 && self.state == ClassicState::Empty {
            // Admin clients and consumers without group management.
            return Ok(());
        }
        if generation_id >= 0 || !member_id.is_empty() || instance_id.is_some() {
            self.validate_member(member_id, instance_id)?;
            if generation_id != self.generation_id {
                return Err(GroupError::IllegalGeneration);
            }
        } else if self.state != ClassicState::Empty {
            return Err(GroupError::UnknownMemberId);
        }
        if self.state == ClassicState::CompletingRebalance {
            return Err(GroupError::RebalanceInProgress);
        }
        Ok(())
    }

    /// After an accepted commit: a commit keeps a member's session alive
    /// while the group is Stable or PreparingRebalance.
    pub fn on_offset_commit(&mut self, now: Millis, member_id: &str) {
        if matches!(
            self.state,
            ClassicState::Stable | ClassicState::PreparingRebalance
        ) {
            self.reschedule_heartbeat(now, member_id);
        }
    }

    /// Kafka's `validateOffsetDelete`.
    pub fn validate_offset_delete(&self) -> Result<(), GroupError> {
        match self.state {
            ClassicState::Dead => Err(GroupError::GroupIdNotFound),
            ClassicState::Stable
            | ClassicState::PreparingRebalance
            | ClassicState::CompletingRebalance
                if !self.uses_consumer_protocol() =>
            {
                Err(GroupError::NonEmptyGroup)
            }
            _ => Ok(()),
        }
    }

    /// Kafka's `validateDeleteGroup`.
    pub fn validate_delete(&self) -> Result<(), GroupError> {
        match self.state {
            ClassicState::Dead => Err(GroupError::GroupIdNotFound),
            ClassicState::Empty => Ok(()),
            _ => Err(GroupError::NonEmptyGroup),
        }
    }

    /// Marks the group Dead (it is being deleted), or back to Empty when
    /// the deletion failed.
    pub fn set_dead(&mut self, dead: bool) {
        if dead {
            self.transition(ClassicState::Dead);
        } else if self.state == ClassicState::Dead {
            self.transition(ClassicState::Empty);
        }
    }

    fn uses_consumer_protocol(&self) -> bool {
        self.protocol_type.as_deref() == Some(CONSUMER_PROTOCOL_TYPE)
    }

    /// The topics the members subscribe to, when the group uses the consumer
    /// protocol and every subscription parses (Kafka's
    /// `computeSubscribedTopics`).
    pub fn subscribed_topics(&self) -> Option<HashSet<String>> {
        if !self.uses_consumer_protocol() {
            return None;
        }
        if self.members.is_empty() {
            return Some(HashSet::new());
        }
        let protocol = self.protocol_name.as_deref()?;
        let mut all = HashSet::new();
        for m in self.members.values() {
            let topics = super::consumer::subscription_topics(&m.metadata(Some(protocol)))?;
            all.extend(topics);
        }
        Some(all)
    }

    /// Whether OffsetDelete must refuse `topic` (GROUP_SUBSCRIBED_TO_TOPIC).
    pub fn is_subscribed_to_topic(&self, topic: &str) -> bool {
        match self.subscribed_topics() {
            Some(t) => t.contains(topic),
            None => self.uses_consumer_protocol(),
        }
    }

    // ----- describe ------------------------------------------------------

    /// The DescribeGroups view: protocol metadata and assignments only while
    /// Stable, as Kafka.
    pub fn describe(&self) -> Described {
        let stable = self.state == ClassicState::Stable;
        let protocol = self.protocol_name.as_deref();
        Described {
            state: self.state.as_str(),
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            protocol_data: if stable {
                self.protocol_name.clone().unwrap_or_default()
            } else {
                String::new()
            },
            members: self
                .members
                .values()
                .map(|m| DescribedMember {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    metadata: if stable {
                        m.metadata(protocol)
                    } else {
                        Bytes::new()
                    },
                    assignment: if stable {
                        m.assignment.clone()
                    } else {
                        Bytes::new()
                    },
                })
                .collect(),
        }
    }

    // ----- timers --------------------------------------------------------

    /// The earliest pending deadline, if any.
    pub fn next_deadline(&self) -> Option<Millis> {
        let members = self.members.values().filter_map(|m| m.heartbeat_deadline);
        let pending = self.pending_join.values().copied();
        let join = self.join_timer.map(|(d, _)| d);
        let sync = self.sync_timer.map(|(d, _)| d);
        members.chain(pending).chain(join).chain(sync).min()
    }

    /// Fires every timer due at `now`, earliest first.
    pub fn tick(&mut self, now: Millis, out: &mut Vec<Effect>) {
        // Each firing changes state (and may cancel or add timers), so look
        // again after each one. Bounded: every firing clears its deadline
        // and new ones are at or after `now` only when their delay is 0,
        // which the initial-rebalance timer allows once per added member.
        let mut firings_left = 4 * (self.members.len() + self.pending_join.len()) + 16;
        while firings_left > 0 {
            firings_left -= 1;
            let Some(due) = self.next_deadline().filter(|d| *d <= now) else {
                return;
            };
            if let Some((d, kind)) = self.join_timer {
                if d == due {
                    self.join_timer = None;
                    match kind {
                        JoinTimer::Complete => self.complete_join(now, out),
                        JoinTimer::Initial {
                            delay_ms,
                            remaining_ms,
                        } => self.initial_rebalance_timer(now, delay_ms, remaining_ms, out),
                    }
                    continue;
                }
            }
            if let Some((d, generation)) = self.sync_timer {
                if d == due {
                    self.sync_timer = None;
                    self.expire_pending_sync(now, generation, out);
                    continue;
                }
            }
            if let Some(id) = self
                .pending_join
                .iter()
                .find(|(_, d)| **d == due)
                .map(|(id, _)| id.clone())
            {
                self.pending_join.shift_remove(&id);
                tracing::info!(group = %self.group_id, member = %id, "pending member expired");
                if self.state == ClassicState::PreparingRebalance && self.has_all_members_joined() {
                    self.complete_join(now, out);
                }
                continue;
            }
            if let Some(id) = self
                .members
                .values()
                .find(|m| m.heartbeat_deadline == Some(due))
                .map(|m| m.member_id.clone())
            {
                self.expire_heartbeat(now, &id, out);
                continue;
            }
            debug_assert!(false, "a due deadline matched no timer");
            return;
        }
    }

    fn initial_rebalance_timer(
        &mut self,
        now: Millis,
        delay_ms: u64,
        remaining_ms: u64,
        out: &mut Vec<Effect>,
    ) {
        if self.new_member_added && remaining_ms != 0 {
            // Members keep arriving: wait a little longer (KIP-134).
            self.new_member_added = false;
            let new_delay = self.config.initial_rebalance_delay_ms.min(remaining_ms);
            let new_remaining = remaining_ms.saturating_sub(delay_ms);
            self.join_timer = Some((
                now.saturating_add(new_delay),
                JoinTimer::Initial {
                    delay_ms: new_delay,
                    remaining_ms: new_remaining,
                },
            ));
        } else {
            self.complete_join(now, out);
        }
    }

    fn expire_heartbeat(&mut self, now: Millis, member_id: &str, out: &mut Vec<Effect>) {
        let Some(m) = self.members.get_mut(member_id) else {
            return;
        };
        m.heartbeat_deadline = None;
        if self.state == ClassicState::Dead || m.has_satisfied_heartbeat() {
            // A member parked in a join or sync is alive by definition; its
            // timer restarts when that request is answered.
            return;
        }
        tracing::info!(group = %self.group_id, member = member_id, "member session expired; removing it");
        self.remove_member(member_id, out);
        match self.state {
            ClassicState::Stable | ClassicState::CompletingRebalance => {
                self.maybe_prepare_rebalance_or_complete_join(now, out)
            }
            ClassicState::PreparingRebalance if self.has_all_members_joined() => {
                self.complete_join(now, out)
            }
            _ => {}
        }
    }

    fn expire_pending_sync(&mut self, now: Millis, generation: i32, out: &mut Vec<Effect>) {
        if generation != self.generation_id
            || !matches!(
                self.state,
                ClassicState::CompletingRebalance | ClassicState::Stable
            )
            || self.pending_sync.is_empty()
        {
            return;
        }
        let mut late: Vec<String> = self.pending_sync.iter().cloned().collect();
        late.sort();
        tracing::info!(group = %self.group_id, members = ?late, "removing members that did not send SyncGroup");
        for id in &late {
            self.remove_member(id, out);
        }
        self.prepare_rebalance(now, out);
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

fn inconsistent(request: Option<&str>, group: Option<&str>) -> bool {
    matches!((request, group), (Some(r), Some(g)) if r != g)
}

/// A client's millisecond timeout as a deadline offset (negative is 0).
fn timeout(ms: i32) -> u64 {
    u64::try_from(ms).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SESSION: i32 = 10_000;
    const REBALANCE: i32 = 30_000;

    /// A group driven by events on a fake clock.
    struct Harness {
        g: ClassicGroup,
        now: Millis,
        next: Token,
        out: Vec<Effect>,
    }

    impl Harness {
        fn new() -> Self {
            Self::with(GroupConfig::default())
        }

        fn with(config: GroupConfig) -> Self {
            Harness {
                g: ClassicGroup::new("g", config),
                now: 0,
                next: 0,
                out: Vec::new(),
            }
        }

        fn token(&mut self) -> Token {
            self.next += 1;
            self.next
        }

        /// Sends a JoinGroup and fires zero-delay timers, as the shell does.
        fn join(&mut self, req: JoinRequest) -> Token {
            let t = self.token();
            self.g.join(self.now, t, req, &mut self.out);
            self.g.tick(self.now, &mut self.out);
            t
        }

        fn sync(&mut self, req: SyncRequest) -> Token {
            let t = self.token();
            self.g.sync(self.now, t, req, &mut self.out);
            self.g.tick(self.now, &mut self.out);
            t
        }

        fn advance(&mut self, ms: u64) {
            self.now += ms;
            self.g.tick(self.now, &mut self.out);
        }

        fn joined(&mut self, t: Token) -> Option<JoinResponse> {
            let i = self
                .out
                .iter()
                .position(|e| matches!(e, Effect::Join(x, _) if *x == t))?;
            match self.out.remove(i) {
                Effect::Join(_, r) => Some(r),
                Effect::Sync(..) => None,
            }
        }

        fn synced(&mut self, t: Token) -> Option<SyncResponse> {
            let i = self
                .out
                .iter()
                .position(|e| matches!(e, Effect::Sync(x, _) if *x == t))?;
            match self.out.remove(i) {
                Effect::Sync(_, r) => Some(r),
                Effect::Join(..) => None,
            }
        }

        fn heartbeat(&mut self, member: &str, generation: i32) -> Result<(), GroupError> {
            self.g.heartbeat(self.now, member, None, generation)
        }

        /// Full handshake for a new dynamic member (v4+): returns its id.
        fn handshake(&mut self, client: &str) -> String {
            let t = self.join(join_req("", client, &[("range", b"m")]));
            let r = self.joined(t).expect("answered at once");
            assert_eq!(r.error, Some(GroupError::MemberIdRequired));
            assert!(r.member_id.starts_with(client));
            r.member_id
        }

        /// One member forms a Stable group; returns (member id, generation).
        fn solo(&mut self) -> (String, i32) {
            let id = self.handshake("c1");
            let t = self.join(join_req(&id, "c1", &[("range", b"m")]));
            let r = self.joined(t).expect("join phase completes at once");
            assert_eq!(r.error, None);
            let s = self.sync(sync_req(&id, r.generation_id, &[(&id, b"a1")]));
            let sr = self.synced(s).expect("leader sync answered");
            assert_eq!(sr.assignment, Bytes::from_static(b"a1"));
            assert_eq!(self.g.state(), ClassicState::Stable);
            (id, r.generation_id)
        }
    }

    fn join_req(member: &str, client: &str, protocols: &[(&str, &'static [u8])]) -> JoinRequest {
        JoinRequest {
            member_id: member.to_string(),
            group_instance_id: None,
            client_id: client.to_string(),
            client_host: "/127.0.0.1".to_string(),
            session_timeout_ms: SESSION,
            rebalance_timeout_ms: REBALANCE,
            protocol_type: "consumer".to_string(),
            protocols: protocols
                .iter()
                .map(|(n, m)| Protocol {
                    name: n.to_string(),
                    metadata: Bytes::from_static(m),
                })
                .collect(),
            requires_known_member_id: true,
            supports_skip_assignment: true,
        }
    }

    fn static_req(
        member: &str,
        instance: &str,
        protocols: &[(&str, &'static [u8])],
    ) -> JoinRequest {
        let mut r = join_req(member, "c", protocols);
        r.group_instance_id = Some(instance.to_string());
        r
    }

    fn sync_req(
        member: &str,
        generation: i32,
        assignments: &[(&str, &'static [u8])],
    ) -> SyncRequest {
        SyncRequest {
            member_id: member.to_string(),
            group_instance_id: None,
            generation_id: generation,
            protocol_type: Some("consumer".to_string()),
            protocol_name: Some("range".to_string()),
            assignments: assignments
                .iter()
                .map(|(m, a)| (m.to_string(), Bytes::from_static(a)))
                .collect(),
        }
    }

    #[test]
    fn member_id_handshake_then_a_group_of_one() {
        let mut h = Harness::new();
        assert_eq!(h.g.state(), ClassicState::Empty);
        let id = h.handshake("c1");
        assert!(h.g.is_pending_member(&id));
        assert_eq!(
            h.g.state(),
            ClassicState::Empty,
            "pending members do not rebalance"
        );
        let t = h.join(join_req(&id, "c1", &[("range", b"m")]));
        let r = h
            .joined(t)
            .expect("completes after the (zero) initial delay");
        assert_eq!(r.error, None);
        assert_eq!(r.generation_id, 1);
        assert_eq!(r.leader, id);
        assert_eq!(r.member_id, id);
        assert_eq!(r.protocol_type.as_deref(), Some("consumer"));
        assert_eq!(r.protocol_name.as_deref(), Some("range"));
        assert_eq!(r.members.len(), 1);
        assert_eq!(r.members[0].metadata, Bytes::from_static(b"m"));
        assert_eq!(h.g.state(), ClassicState::CompletingRebalance);
        let s = h.sync(sync_req(&id, 1, &[(&id, b"a1")]));
        assert_eq!(
            h.synced(s).map(|r| (r.error, r.assignment)),
            Some((None, Bytes::from_static(b"a1")))
        );
        assert_eq!(h.g.state(), ClassicState::Stable);
        assert_eq!(h.heartbeat(&id, 1), Ok(()));
    }

    #[test]
    fn old_join_versions_skip_the_handshake() {
        let mut h = Harness::new();
        let mut req = join_req("", "c1", &[("range", b"m")]);
        req.requires_known_member_id = false;
        let t = h.join(req);
        let r = h.joined(t).expect("joined at once");
        assert_eq!((r.error, r.generation_id), (None, 1));
        assert!(!r.member_id.is_empty());
    }

    #[test]
    fn a_second_member_triggers_a_rebalance_and_both_get_assignments() {
        let mut h = Harness::new();
        let (a, g1) = h.solo();
        let b = h.handshake("c2");
        let tb = h.join(join_req(&b, "c2", &[("range", b"mb")]));
        assert!(h.joined(tb).is_none(), "parked until a rejoins");
        assert_eq!(h.g.state(), ClassicState::PreparingRebalance);
        assert_eq!(h.heartbeat(&a, g1), Err(GroupError::RebalanceInProgress));
        // A SyncGroup now is refused too.
        let s = h.sync(sync_req(&a, g1, &[]));
        assert_eq!(
            h.synced(s).map(|r| r.error),
            Some(Some(GroupError::RebalanceInProgress))
        );
        let ta = h.join(join_req(&a, "c1", &[("range", b"ma")]));
        let ra = h.joined(ta).expect("a answered");
        let rb = h.joined(tb).expect("b answered");
        assert_eq!(ra.generation_id, g1 + 1);
        assert_eq!(rb.generation_id, g1 + 1);
        assert_eq!(ra.leader, a, "the leader that rejoined stays leader");
        assert_eq!(rb.leader, a);
        assert_eq!(ra.members.len(), 2);
        assert!(rb.members.is_empty(), "followers do not see members");
        // The follower's sync waits for the leader's.
        let sb = h.sync(sync_req(&b, g1 + 1, &[]));
        assert!(h.synced(sb).is_none());
        let sa = h.sync(sync_req(&a, g1 + 1, &[(&a, b"pa"), (&b, b"pb")]));
        assert_eq!(
            h.synced(sa).map(|r| r.assignment),
            Some(Bytes::from_static(b"pa"))
        );
        let rb = h.synced(sb).expect("follower answered after the leader");
        assert_eq!((rb.error, rb.assignment), (None, Bytes::from_static(b"pb")));
        assert_eq!(rb.protocol_name.as_deref(), Some("range"));
        assert_eq!(h.g.state(), ClassicState::Stable);
        // A late SyncGroup in Stable gets the stored assignment.
        let again = h.sync(sync_req(&b, g1 + 1, &[]));
        assert_eq!(
            h.synced(again).map(|r| r.assignment),
            Some(Bytes::from_static(b"pb"))
        );
    }

    #[test]
    fn members_that_do_not_rejoin_are_removed_at_the_rebalance_timeout() {
        let mut h = Harness::new();
        let (a, _) = h.solo();
        let b = h.handshake("c2");
        let tb = h.join(join_req(&b, "c2", &[("range", b"mb")]));
        let ta = h.join(join_req(&a, "c1", &[("range", b"ma")]));
        let g2 = h.joined(ta).expect("a").generation_id;
        h.joined(tb).expect("b");
        let sa = h.sync(sync_req(&a, g2, &[(&a, b"x"), (&b, b"y")]));
        h.synced(sa).expect("a synced");
        let sb = h.sync(sync_req(&b, g2, &[]));
        h.synced(sb).expect("b synced");
        // c joins; only a rejoins; b keeps heartbeating but never rejoins.
        let c = h.handshake("c3");
        let tc = h.join(join_req(&c, "c3", &[("range", b"mc")]));
        let ta = h.join(join_req(&a, "c1", &[("range", b"ma")]));
        for _ in 0..5 {
            h.advance(5_000);
            assert_eq!(h.heartbeat(&b, g2), Err(GroupError::RebalanceInProgress));
        }
        assert!(h.joined(ta).is_none());
        h.advance(5_000); // 30 s: the rebalance timeout.
        let ra = h.joined(ta).expect("a answered at the timeout");
        let rc = h.joined(tc).expect("c answered at the timeout");
        assert_eq!(ra.generation_id, g2 + 1);
        assert_eq!(rc.generation_id, g2 + 1);
        assert_eq!(ra.members.len(), 2);
        assert!(!h.g.has_member(&b));
        assert_eq!(h.heartbeat(&b, g2), Err(GroupError::UnknownMemberId));
    }

    #[test]
    fn a_member_that_stops_heartbeating_is_removed_and_triggers_a_rebalance() {
        let mut h = Harness::new();
        let (a, _) = h.solo();
        let b = h.handshake("c2");
        let tb = h.join(join_req(&b, "c2", &[("range", b"mb")]));
        let ta = h.join(join_req(&a, "c1", &[("range", b"ma")]));
        let g = h.joined(ta).expect("a").generation_id;
        h.joined(tb).expect("b");
        let sa = h.sync(sync_req(&a, g, &[(&a, b"x"), (&b, b"y")]));
        let sb = h.sync(sync_req(&b, g, &[]));
        h.synced(sa).expect("a");
        h.synced(sb).expect("b");
        // a heartbeats every 3 s; b is silent.
        let mut removed_at = None;
        for i in 1..=5 {
            h.advance(3_000);
            let e = h.heartbeat(&a, g);
            if e == Err(GroupError::RebalanceInProgress) && removed_at.is_none() {
                removed_at = Some(i * 3_000);
            }
        }
        assert_eq!(
            removed_at,
            Some(12_000),
            "b's 10 s session ran out between 9 s and 12 s"
        );
        assert!(!h.g.has_member(&b));
        assert_eq!(h.g.state(), ClassicState::PreparingRebalance);
        let ta = h.join(join_req(&a, "c1", &[("range", b"ma")]));
        let r = h
            .joined(ta)
            .expect("a alone completes the join phase at once");
        assert_eq!((r.generation_id, r.members.len()), (g + 1, 1));
    }

    #[test]
    fn pending_members_expire_after_the_session_timeout() {
        let mut h = Harness::new();
        let id = h.handshake("c1");
        assert!(h.g.is_pending_member(&id));
        assert_eq!(h.g.next_deadline(), Some(SESSION as u64));
        h.advance(SESSION as u64);
        assert!(!h.g.is_pending_member(&id));
        let t = h.join(join_req(&id, "c1", &[("range", b"m")]));
        assert_eq!(
            h.joined(t).map(|r| r.error),
            Some(Some(GroupError::UnknownMemberId))
        );
    }

    #[test]
    fn members_that_never_sync_are_removed() {
        let mut h = Harness::new();
        let (a, _) = h.solo();
        let b = h.handshake("c2");
        let tb = h.join(join_req(&b, "c2", &[("range", b"mb")]));
        let ta = h.join(join_req(&a, "c1", &[("range", b"ma")]));
        let g = h.joined(ta).expect("a").generation_id;
        h.joined(tb).expect("b");
        // The leader syncs, b never does (nor heartbeats: its session is
        // 10 s, the sync deadline is the 30 s rebalance timeout).
        let sa = h.sync(sync_req(&a, g, &[(&a, b"x"), (&b, b"y")]));
        h.synced(sa).expect("a");
        for _ in 0..3 {
            h.advance(3_000);
            assert_eq!(h.heartbeat(&a, g), Ok(()));
        }
        h.advance(1_000); // b's session (10 s after its join response) ends.
        assert!(!h.g.has_member(&b));
        assert_eq!(h.g.state(), ClassicState::PreparingRebalance);
    }

    #[test]
    fn the_leader_rejoining_forces_a_rebalance_a_follower_does_not() {
        let mut h = Harness::new();
        let (a, _) = h.solo();
        let b = h.handshake("c2");
        let tb = h.join(join_req(&b, "c2", &[("range", b"mb")]));
        let ta = h.join(join_req(&a, "c1", &[("range", b"ma")]));
        let g = h.joined(ta).expect("a").generation_id;
        h.joined(tb).expect("b");
        let sa = h.sync(sync_req(&a, g, &[(&a, b"x"), (&b, b"y")]));
        let sb = h.sync(sync_req(&b, g, &[]));
        h.synced(sa).expect("a");
        h.synced(sb).expect("b");
        // Follower with unchanged metadata: current generation at once.
        let t = h.join(join_req(&b, "c2", &[("range", b"mb")]));
        let r = h.joined(t).expect("answered at once");
        assert_eq!(
            (r.error, r.generation_id, r.leader.as_str()),
            (None, g, a.as_str())
        );
        assert_eq!(h.g.state(), ClassicState::Stable);
        // Follower with changed metadata: rebalance.
        let t = h.join(join_req(&b, "c2", &[("range", b"changed")]));
        assert!(h.joined(t).is_none());
        assert_eq!(h.g.state(), ClassicState::PreparingRebalance);
        let ta = h.join(join_req(&a, "c1", &[("range", b"ma")]));
        assert_eq!(h.joined(ta).map(|r| r.generation_id), Some(g + 1));
        assert_eq!(h.joined(t).map(|r| r.generation_id), Some(g + 1));
        // The leader rejoining (unchanged) also rebalances.
        let sa = h.sync(sync_req(&a, g + 1, &[]));
        h.synced(sa).expect("a");
        let ta = h.join(join_req(&a, "c1", &[("range", b"ma")]));
        assert!(h.joined(ta).is_none());
        assert_eq!(h.g.state(), ClassicState::PreparingRebalance);
    }

    #[test]
    fn protocols_are_chosen_by_vote_among_common_ones() {
        let mut h = Harness::new();
        let mut tokens = Vec::new();
        let protos: [&[(&str, &'static [u8])]; 3] = [
            &[("range", b"1"), ("roundrobin", b"1"), ("only-a", b"1")],
            &[("roundrobin", b"2"), ("range", b"2")],
            &[("roundrobin", b"3"), ("range", b"3")],
        ];
        let cfg = GroupConfig {
            initial_rebalance_delay_ms: 100,
            ..GroupConfig::default()
        };
        h.g = ClassicGroup::new("g", cfg);
        for (i, p) in protos.iter().enumerate() {
            let mut req = join_req("", &format!("c{i}"), p);
            req.requires_known_member_id = false;
            tokens.push(h.join(req));
        }
        h.advance(100);
        h.advance(100);
        h.advance(100);
        let r = h.joined(tokens[0]).expect("joined");
        assert_eq!(r.protocol_name.as_deref(), Some("roundrobin"));
        assert_eq!(r.members.len(), 3);
        assert!(r.members.iter().all(|m| m.metadata.len() == 1));
        // A member supporting none of the group's protocols is refused.
        let t = h.join(join_req("", "x", &[("sticky", b"")]));
        assert_eq!(
            h.joined(t).map(|r| r.error),
            Some(Some(GroupError::InconsistentGroupProtocol))
        );
        let mut other = join_req("", "x", &[("roundrobin", b"")]);
        other.protocol_type = "connect".into();
        let t = h.join(other);
        assert_eq!(
            h.joined(t).map(|r| r.error),
            Some(Some(GroupError::InconsistentGroupProtocol))
        );
    }

    #[test]
    fn the_initial_rebalance_delay_gathers_members_into_one_generation() {
        let cfg = GroupConfig {
            initial_rebalance_delay_ms: 3_000,
            ..GroupConfig::default()
        };
        let mut h = Harness::with(cfg);
        let a = h.handshake("c1");
        let ta = h.join(join_req(&a, "c1", &[("range", b"m")]));
        h.advance(2_000);
        let b = h.handshake("c2");
        let tb = h.join(join_req(&b, "c2", &[("range", b"m")]));
        h.advance(1_000); // first delay over, but b arrived: extended
        assert!(h.joined(ta).is_none());
        h.advance(3_000);
        let ra = h.joined(ta).expect("a");
        let rb = h.joined(tb).expect("b");
        assert_eq!((ra.generation_id, rb.generation_id), (1, 1));
        assert_eq!(ra.members.len(), 2);
    }

    #[test]
    fn static_members_come_back_without_a_rebalance() {
        let mut h = Harness::new();
        let t = h.join(static_req("", "i1", &[("range", b"m")]));
        let r = h.joined(t).expect("static members skip the handshake");
        let old = r.member_id.clone();
        assert!(old.starts_with("i1-"));
        let g = r.generation_id;
        let s = h.sync(sync_req(&old, g, &[(&old, b"mine")]));
        h.synced(s).expect("synced");
        assert_eq!(h.g.state(), ClassicState::Stable);
        // The process restarts: same instance id, no member id.
        let t = h.join(static_req("", "i1", &[("range", b"m")]));
        let r = h.joined(t).expect("answered at once");
        assert_eq!(r.error, None);
        assert_eq!(r.generation_id, g, "no new generation");
        assert_ne!(r.member_id, old);
        assert_eq!(r.leader, r.member_id);
        assert!(r.skip_assignment, "v9+: the leader keeps the assignment");
        assert_eq!(h.g.state(), ClassicState::Stable);
        let new = r.member_id;
        let mut s = sync_req(&new, g, &[]);
        s.group_instance_id = Some("i1".into());
        let s = h.sync(s);
        assert_eq!(
            h.synced(s).map(|r| r.assignment),
            Some(Bytes::from_static(b"mine"))
        );
        // The old incarnation is fenced.
        assert_eq!(
            h.g.heartbeat(h.now, &old, Some("i1"), g),
            Err(GroupError::FencedInstanceId)
        );
        assert_eq!(h.g.heartbeat(h.now, &new, Some("i1"), g), Ok(()));
        // A change of the selected protocol does rebalance.
        let t = h.join(static_req(
            "",
            "i1",
            &[("roundrobin", b"m"), ("range", b"m")],
        ));
        let r = h
            .joined(t)
            .expect("alone: the join phase completes at once");
        assert_eq!(r.generation_id, g + 1);
        assert_eq!(r.protocol_name.as_deref(), Some("roundrobin"));
    }

    #[test]
    fn a_parked_static_member_is_fenced_by_its_replacement() {
        let mut h = Harness::new();
        let (a, g) = h.solo();
        let t1 = h.join(static_req("", "i1", &[("range", b"m")]));
        assert!(h.joined(t1).is_none(), "parked in the rebalance");
        let t2 = h.join(static_req("", "i1", &[("range", b"m")]));
        assert_eq!(
            h.joined(t1).map(|r| r.error),
            Some(Some(GroupError::FencedInstanceId))
        );
        // The new incarnation is parked in its place; a completes the phase.
        let ta = h.join(join_req(&a, "c1", &[("range", b"m")]));
        assert_eq!(h.joined(ta).map(|r| r.members.len()), Some(2));
        assert_eq!(h.joined(t2).map(|r| r.generation_id), Some(g + 1));
    }

    #[test]
    fn errors_are_kafkas() {
        let mut h = Harness::new();
        let (a, g) = h.solo();
        assert_eq!(h.heartbeat(&a, g + 1), Err(GroupError::IllegalGeneration));
        assert_eq!(h.heartbeat("nobody", g), Err(GroupError::UnknownMemberId));
        let s = h.sync(sync_req(&a, g - 1, &[]));
        assert_eq!(
            h.synced(s).map(|r| r.error),
            Some(Some(GroupError::IllegalGeneration))
        );
        let s = h.sync(sync_req("nobody", g, &[]));
        assert_eq!(
            h.synced(s).map(|r| r.error),
            Some(Some(GroupError::UnknownMemberId))
        );
        let mut bad = sync_req(&a, g, &[]);
        bad.protocol_name = Some("roundrobin".into());
        let s = h.sync(bad);
        assert_eq!(
            h.synced(s).map(|r| r.error),
            Some(Some(GroupError::InconsistentGroupProtocol))
        );
        let t = h.join(join_req("nobody", "c", &[("range", b"m")]));
        assert_eq!(
            h.joined(t).map(|r| r.error),
            Some(Some(GroupError::UnknownMemberId))
        );
        assert_eq!(
            h.g.heartbeat(h.now, &a, Some("unknown-instance"), g),
            Err(GroupError::UnknownMemberId)
        );
        // Deleting a non-empty group.
        assert_eq!(h.g.validate_delete(), Err(GroupError::NonEmptyGroup));
        // Empty protocol lists never form a group.
        let mut e = Harness::new();
        let t = e.join(join_req("", "c", &[]));
        assert_eq!(
            e.joined(t).map(|r| r.error),
            Some(Some(GroupError::InconsistentGroupProtocol))
        );
        assert_eq!(e.g.validate_delete(), Ok(()));
    }

    #[test]
    fn leaving_members_trigger_a_rebalance() {
        let mut h = Harness::new();
        let (a, _) = h.solo();
        let b = h.handshake("c2");
        let tb = h.join(join_req(&b, "c2", &[("range", b"mb")]));
        let ta = h.join(join_req(&a, "c1", &[("range", b"ma")]));
        let g = h.joined(ta).expect("a").generation_id;
        h.joined(tb).expect("b");
        let sa = h.sync(sync_req(&a, g, &[]));
        let sb = h.sync(sync_req(&b, g, &[]));
        h.synced(sa).expect("a");
        h.synced(sb).expect("b");
        let codes =
            h.g.leave(
                h.now,
                &[
                    LeaveMember {
                        member_id: a.clone(),
                        group_instance_id: None,
                    },
                    LeaveMember {
                        member_id: "ghost".into(),
                        group_instance_id: None,
                    },
                ],
                &mut h.out,
            )
            .expect("not dead");
        assert_eq!(codes, vec![Ok(()), Err(GroupError::UnknownMemberId)]);
        assert_eq!(h.g.state(), ClassicState::PreparingRebalance);
        assert_eq!(
            h.g.leader(),
            Some(b.as_str()),
            "leadership moves to a member left"
        );
        let tb = h.join(join_req(&b, "c2", &[("range", b"mb")]));
        let r = h.joined(tb).expect("b alone");
        assert_eq!((r.generation_id, r.leader), (g + 1, b.clone()));
        // The last member leaving empties the group.
        let sb = h.sync(sync_req(&b, g + 1, &[]));
        h.synced(sb).expect("b");
        h.g.leave(
            h.now,
            &[LeaveMember {
                member_id: b,
                group_instance_id: None,
            }],
            &mut h.out,
        )
        .expect("left");
        assert_eq!(h.g.state(), ClassicState::Empty);
        assert_eq!(h.g.generation_id(), g + 2);
    }

    #[test]
    fn static_members_can_be_removed_by_instance_id() {
        let mut h = Harness::new();
        let t = h.join(static_req("", "i1", &[("range", b"m")]));
        let id = h.joined(t).expect("joined").member_id;
        let codes =
            h.g.leave(
                h.now,
                &[
                    LeaveMember {
                        member_id: String::new(),
                        group_instance_id: Some("i1".into()),
                    },
                    LeaveMember {
                        member_id: String::new(),
                        group_instance_id: Some("i2".into()),
                    },
                ],
                &mut h.out,
            )
            .expect("left");
        assert_eq!(codes, vec![Ok(()), Err(GroupError::UnknownMemberId)]);
        assert!(!h.g.has_member(&id));
    }

    #[test]
    fn offset_commit_validation() {
        let mut h = Harness::new();
        // Simple commits into an empty group.
        assert_eq!(h.g.validate_offset_commit("", None, -1), Ok(()));
        assert_eq!(
            h.g.validate_offset_commit("m", None, 1),
            Err(GroupError::UnknownMemberId)
        );
        let id = h.handshake("c1");
        let t = h.join(join_req(&id, "c1", &[("range", b"m")]));
        let g = h.joined(t).expect("joined").generation_id;
        assert_eq!(
            h.g.validate_offset_commit(&id, None, g),
            Err(GroupError::RebalanceInProgress),
            "CompletingRebalance"
        );
        let s = h.sync(sync_req(&id, g, &[]));
        h.synced(s).expect("synced");
        assert_eq!(h.g.validate_offset_commit(&id, None, g), Ok(()));
        assert_eq!(
            h.g.validate_offset_commit(&id, None, g + 1),
            Err(GroupError::IllegalGeneration)
        );
        assert_eq!(
            h.g.validate_offset_commit("", None, -1),
            Err(GroupError::UnknownMemberId),
            "simple commits only into empty groups"
        );
        // A commit keeps the session alive.
        h.advance(9_000);
        h.g.on_offset_commit(h.now, &id);
        h.advance(9_000);
        assert!(h.g.has_member(&id));
    }

    #[test]
    fn abort_answers_everything_parked() {
        let mut h = Harness::new();
        let (a, _) = h.solo();
        let b = h.handshake("c2");
        let tb = h.join(join_req(&b, "c2", &[("range", b"mb")]));
        let ta = h.join(join_req(&a, "c1", &[("range", b"ma")]));
        let g = h.joined(ta).expect("a").generation_id;
        h.joined(tb).expect("b");
        let sb = h.sync(sync_req(&b, g, &[]));
        h.g.abort_all(GroupError::NotCoordinator, &mut h.out);
        assert_eq!(
            h.synced(sb).map(|r| r.error),
            Some(Some(GroupError::NotCoordinator))
        );
    }
}
