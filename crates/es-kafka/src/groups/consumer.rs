//! KIP-848 consumer groups (ConsumerGroupHeartbeat) as a sans-io state
//! machine, plus the consumer protocol's embedded subscription format.
//!
//! Mirrors Kafka 4's `GroupMetadataManager.consumerGroupHeartbeat` and
//! `CurrentAssignmentBuilder`:
//! - the group epoch is bumped when a member joins, leaves, is fenced or
//!   changes its subscription, or when the subscribed topics change (new
//!   partitions); the target assignment is recomputed by the server-side
//!   assignor ([`super::assignor`]) when the group epoch passes the
//!   assignment epoch;
//! - each member reconciles towards its target one step per heartbeat:
//!   partitions it must give up are first *revoked* (it stays at its epoch,
//!   state UNREVOKED_PARTITIONS, until its heartbeat no longer lists them);
//!   then it moves to the target epoch and receives the partitions that are
//!   free; partitions another member still holds are *unreleased* and come in
//!   a later heartbeat (state UNRELEASED_PARTITIONS);
//! - members are fenced (removed) when their session times out, or when they
//!   do not revoke within their rebalance timeout;
//! - static members (instance id) leaving with epoch -2 keep their partitions
//!   reserved until they rejoin (getting them back at once) or time out.
//!
//! Regular-expression subscriptions (KIP-848's SubscribedTopicRegex), as
//! Kafka 4 resolves them:
//! - a member's subscription is the union of its SubscribedTopicNames and
//!   the topics whose *whole* name matches its regex, internal topics such
//!   as `__consumer_offsets` included (RE2/J syntax; es uses
//!   the `regex` crate, whose syntax is RE2's and whose matching is linear
//!   time, so a hostile pattern cannot stall the coordinator);
//! - in a request, a null regex means "unchanged" and an empty one means "no
//!   regex" (librdkafka sends `""` with every plain subscription); a regex
//!   that does not compile is refused with INVALID_REGULAR_EXPRESSION before
//!   anything changes;
//! - the group resolves each distinct regex once for all its members, and
//!   again whenever the set of topics changed (a [`TopicView::generation`]
//!   that differs from the one of the last resolution), on the next
//!   heartbeat: a topic created later that matches joins the subscription,
//!   which bumps the group epoch and reassigns. Kafka re-resolves at most
//!   every 10 s per group from a background executor; es has no such
//!   executor and resolution is cheap (one pass over the topic names per
//!   changed topic set), so a new topic is picked up one heartbeat later.
//!
//! Classic members cannot join a consumer group (es keeps one protocol per
//! group; Kafka 4 can mix them).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use bytes::{Buf, Bytes};
use kafka_protocol::messages::ConsumerProtocolSubscription;
use kafka_protocol::protocol::Decodable;
use uuid::Uuid;

use regex::{Regex, RegexBuilder};

use super::assignor::{self, AssignMember, Assignment};
use super::error::GroupError;
use super::{GroupConfig, Millis};

/// Member epoch of a member leaving the group.
pub const LEAVE_GROUP_MEMBER_EPOCH: i32 = -1;
/// Member epoch of a static member leaving temporarily.
pub const LEAVE_GROUP_STATIC_MEMBER_EPOCH: i32 = -2;

/// The topics of a serialized `ConsumerProtocolSubscription` (a version
/// prefix, then the body), read with the v0 layout every version starts
/// with, as Kafka does. `None` when it does not parse.
pub fn subscription_topics(metadata: &Bytes) -> Option<Vec<String>> {
    let mut buf = metadata.clone();
    if buf.remaining() < 2 {
        return None;
    }
    let _version = buf.get_i16();
    let s = ConsumerProtocolSubscription::decode(&mut buf, 0).ok()?;
    Some(s.topics.into_iter().map(|t| t.to_string()).collect())
}

/// What the group needs to know about topics.
pub trait TopicView {
    /// (topic id, partition count) of an existing topic.
    fn by_name(&self, name: &str) -> Option<(Uuid, i32)>;
    /// The name of an existing topic id.
    fn name_of(&self, id: Uuid) -> Option<String>;
    /// The name of every topic a regex subscription may match: every topic
    /// that has a topic id (so that it can be assigned).
    fn names(&self) -> Vec<String>;
    /// A value that changes whenever the set of topics changes (a topic is
    /// created, deleted or re-created), so that regex subscriptions are
    /// resolved again only then. Equal values must mean equal topic sets
    /// (up to a negligible collision chance).
    fn generation(&self) -> u64;
}

/// Most bytes the compiled form of one subscription regex may take, and
/// most bytes of its lazy DFA cache (the `regex` crate's `size_limit` and
/// `dfa_size_limit`; its defaults are 10 MiB and 2 MiB). Topic-name patterns
/// are small; this bounds what one member's heartbeat makes the group hold.
pub const REGEX_COMPILED_BYTES_MAX: usize = 1 << 20;

/// Compiles a SubscribedTopicRegex for whole-name matching (RE2/J's
/// `matches()`), or explains why it is not a valid regular expression.
pub fn compile_topic_regex(pattern: &str) -> Result<Regex, String> {
    let build = |p: &str| {
        RegexBuilder::new(p)
            .size_limit(REGEX_COMPILED_BYTES_MAX)
            .dfa_size_limit(REGEX_COMPILED_BYTES_MAX)
            .build()
            .map_err(|e| {
                // The crate's syntax errors span several lines.
                e.to_string()
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
    };
    // The pattern alone first: wrapping an unbalanced one such as `a)|(b`
    // would make it valid.
    build(pattern)?;
    build(&format!("^(?:{pattern})$"))
}

/// One regex some members subscribe with, and the topics it matched.
#[derive(Clone, Debug)]
struct ResolvedRegex {
    regex: Regex,
    /// Names of the matching topics; `None` until first resolved.
    topics: Option<BTreeSet<String>>,
}

/// A ConsumerGroupHeartbeat request.
#[derive(Clone, Debug, Default)]
pub struct HeartbeatRequest {
    pub group_id: String,
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    /// -1 when not sent.
    pub rebalance_timeout_ms: i32,
    pub subscribed_topic_names: Option<Vec<String>>,
    pub subscribed_topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    /// The partitions the member owns, when it says.
    pub topic_partitions: Option<Vec<(Uuid, Vec<i32>)>>,
    pub client_id: String,
    pub client_host: String,
}

/// A ConsumerGroupHeartbeat response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeartbeatResponse {
    /// The refusal; its message (if it carries one) is the response's
    /// error message.
    pub error: Option<GroupError>,
    pub member_id: Option<String>,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// The member's assigned partitions, when they must be sent.
    pub assignment: Option<Vec<(Uuid, Vec<i32>)>>,
}

impl HeartbeatResponse {
    pub fn error(error: GroupError) -> Self {
        HeartbeatResponse {
            error: Some(error),
            member_id: None,
            member_epoch: 0,
            heartbeat_interval_ms: 0,
            assignment: None,
        }
    }
}

/// A member as ConsumerGroupDescribe shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribedMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub member_epoch: i32,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    /// The member's SubscribedTopicRegex; empty when it has none (as Kafka
    /// describes such a member).
    pub subscribed_topic_regex: String,
    /// (topic id, topic name, partitions).
    pub assignment: Vec<(Uuid, String, Vec<i32>)>,
    pub target_assignment: Vec<(Uuid, String, Vec<i32>)>,
}

/// A group as ConsumerGroupDescribe shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Described {
    pub state: &'static str,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub assignor_name: String,
    pub members: Vec<DescribedMember>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MemberState {
    Stable,
    UnrevokedPartitions,
    UnreleasedPartitions,
}

#[derive(Clone, Debug)]
struct Member {
    member_id: String,
    instance_id: Option<String>,
    rack_id: Option<String>,
    client_id: String,
    client_host: String,
    rebalance_timeout_ms: i32,
    server_assignor: Option<String>,
    /// SubscribedTopicNames, sorted and de-duplicated.
    subscribed: Vec<String>,
    /// SubscribedTopicRegex; never `Some("")`.
    regex: Option<String>,
    state: MemberState,
    member_epoch: i32,
    previous_member_epoch: i32,
    assigned: Assignment,
    pending_revocation: Assignment,
    session_deadline: Option<Millis>,
    /// (deadline, epoch): fence the member if it is still revoking at that
    /// epoch when the deadline passes.
    rebalance_deadline: Option<(Millis, i32)>,
}

impl Member {
    fn new(member_id: &str) -> Self {
        Member {
            member_id: member_id.to_string(),
            instance_id: None,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            rebalance_timeout_ms: -1,
            server_assignor: None,
            subscribed: Vec::new(),
            regex: None,
            state: MemberState::Stable,
            member_epoch: 0,
            previous_member_epoch: 0,
            assigned: Assignment::new(),
            pending_revocation: Assignment::new(),
            session_deadline: None,
            rebalance_deadline: None,
        }
    }

    fn is_reconciled_to(&self, epoch: i32) -> bool {
        self.state == MemberState::Stable && self.member_epoch == epoch
    }
}

/// A KIP-848 consumer group.
#[derive(Debug)]
pub struct ConsumerGroup {
    group_id: String,
    config: GroupConfig,
    group_epoch: i32,
    assignment_epoch: i32,
    members: BTreeMap<String, Member>,
    /// instance id -> member id.
    static_members: HashMap<String, String>,
    /// member id -> target assignment (at `assignment_epoch`).
    targets: HashMap<String, Assignment>,
    /// Epoch of the member owning (or revoking) each partition.
    partition_epochs: HashMap<(Uuid, i32), i32>,
    /// Subscribed topics that exist: name -> (id, partitions).
    subscription_metadata: BTreeMap<String, (Uuid, i32)>,
    /// Every regex some member subscribes with (and only those).
    regexes: BTreeMap<String, ResolvedRegex>,
    /// The [`TopicView::generation`] the resolved regexes were resolved at.
    regex_generation: Option<u64>,
}

fn invalid(message: &str) -> HeartbeatResponse {
    HeartbeatResponse::error(GroupError::InvalidRequest(message.to_string()))
}

/// Kafka's answer to a SubscribedTopicRegex that does not compile.
fn invalid_regex(pattern: &str, why: &str) -> HeartbeatResponse {
    HeartbeatResponse::error(GroupError::InvalidRegularExpression {
        pattern: pattern.to_string(),
        why: why.to_string(),
    })
}

#[cfg(test)]
fn to_assignment(list: &[(Uuid, Vec<i32>)]) -> Assignment {
    let mut a = Assignment::new();
    for (t, ps) in list {
        a.entry(*t).or_default().extend(ps.iter().copied());
    }
    a.retain(|_, ps| !ps.is_empty());
    a
}

fn to_list(a: &Assignment) -> Vec<(Uuid, Vec<i32>)> {
    a.iter()
        .filter(|(_, ps)| !ps.is_empty())
        .map(|(t, ps)| (*t, ps.iter().copied().collect()))
        .collect()
}

/// Whether every owned partition is in `target` (a missing list is not).
fn is_subset(owned: Option<&[(Uuid, Vec<i32>)]>, target: &Assignment) -> bool {
    let Some(owned) = owned else {
        return false;
    };
    owned.iter().all(|(t, ps)| {
        ps.iter()
            .all(|p| target.get(t).is_some_and(|s| s.contains(p)))
    })
}

/// Whether the member still reports owning a partition pending revocation
/// (a missing list counts as "yes").
fn owns_revoked(owned: Option<&[(Uuid, Vec<i32>)]>, revoking: &Assignment) -> bool {
    let Some(owned) = owned else {
        return true;
    };
    owned.iter().any(|(t, ps)| {
        revoking
            .get(t)
            .is_some_and(|r| ps.iter().any(|p| r.contains(p)))
    })
}

fn timeout(ms: i32) -> u64 {
    u64::try_from(ms).unwrap_or(0)
}

impl ConsumerGroup {
    pub fn new(group_id: &str, config: GroupConfig) -> Self {
        ConsumerGroup {
            group_id: group_id.to_string(),
            config,
            group_epoch: 0,
            assignment_epoch: 0,
            members: BTreeMap::new(),
            static_members: HashMap::new(),
            targets: HashMap::new(),
            partition_epochs: HashMap::new(),
            subscription_metadata: BTreeMap::new(),
            regexes: BTreeMap::new(),
            regex_generation: None,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    pub fn group_epoch(&self) -> i32 {
        self.group_epoch
    }

    /// Kafka's consumer group state name.
    pub fn state_name(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else if self.group_epoch > self.assignment_epoch {
            "Assigning"
        } else if self
            .members
            .values()
            .any(|m| !m.is_reconciled_to(self.assignment_epoch))
        {
            "Reconciling"
        } else {
            "Stable"
        }
    }

    /// Every topic some member subscribes to, by name or through its regex.
    pub fn subscribed_topic_names(&self) -> HashSet<String> {
        let mut names: HashSet<String> = self
            .members
            .values()
            .flat_map(|m| m.subscribed.iter().cloned())
            .collect();
        for m in self.members.values() {
            names.extend(self.regex_topics(m).iter().cloned());
        }
        names
    }

    /// The topics the member's regex matched when last resolved.
    fn regex_topics(&self, m: &Member) -> &BTreeSet<String> {
        static NONE: BTreeSet<String> = BTreeSet::new();
        m.regex
            .as_ref()
            .and_then(|r| self.regexes.get(r))
            .and_then(|r| r.topics.as_ref())
            .unwrap_or(&NONE)
    }

    /// The member's whole subscription: its topic names and the topics its
    /// regex matches, sorted and de-duplicated.
    fn member_subscription(&self, m: &Member) -> Vec<String> {
        let by_regex = self.regex_topics(m);
        if by_regex.is_empty() {
            return m.subscribed.clone();
        }
        let all: BTreeSet<&String> = m.subscribed.iter().chain(by_regex).collect();
        all.into_iter().cloned().collect()
    }

    /// Forgets the regexes no member subscribes with any more.
    fn drop_unused_regexes(&mut self) {
        if self.regexes.is_empty() {
            return;
        }
        let used: HashSet<&str> = self
            .members
            .values()
            .filter_map(|m| m.regex.as_deref())
            .collect();
        self.regexes.retain(|r, _| used.contains(r.as_str()));
        if self.regexes.is_empty() {
            self.regex_generation = None;
        }
    }

    /// Resolves the regexes not resolved yet, or all of them when the set of
    /// topics changed since the last resolution. Returns whether the topics
    /// of some regex changed (the group epoch must then be bumped, as Kafka
    /// does when a refresh changes a resolved regex).
    fn resolve_regexes(&mut self, topics: &dyn TopicView) -> bool {
        if self.regexes.is_empty() {
            return false;
        }
        // The generation before the names: a topic created in between makes
        // the next heartbeat resolve once more, never once too few.
        let generation = topics.generation();
        let stale = self.regex_generation != Some(generation);
        if !stale && self.regexes.values().all(|r| r.topics.is_some()) {
            return false;
        }
        let names = topics.names();
        let mut changed = false;
        for (pattern, r) in &mut self.regexes {
            if !stale && r.topics.is_some() {
                continue;
            }
            let matched: BTreeSet<String> = names
                .iter()
                .filter(|n| r.regex.is_match(n))
                .cloned()
                .collect();
            if r.topics.as_ref() != Some(&matched) {
                tracing::debug!(group = %self.group_id, regex = %pattern, topics = matched.len(), "resolved subscription regex");
                changed = true;
                r.topics = Some(matched);
            }
        }
        self.regex_generation = Some(generation);
        changed
    }

    /// The assignor the members prefer (the most named; `uniform` if none).
    fn preferred_assignor(&self) -> String {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(a) = &m.server_assignor {
                *counts.entry(a.as_str()).or_default() += 1;
            }
        }
        let mut best: Option<(&str, usize)> = None;
        for (a, c) in counts {
            if best.is_none_or(|(_, b)| c > b) {
                best = Some((a, c));
            }
        }
        best.map_or(assignor::UNIFORM, |(a, _)| a).to_string()
    }

    fn current_partition_epoch(&self, topic: Uuid, partition: i32) -> i32 {
        self.partition_epochs
            .get(&(topic, partition))
            .copied()
            .unwrap_or(-1)
    }

    fn release(&mut self, a: &Assignment, epoch: i32) {
        for (t, ps) in a {
            for p in ps {
                if self.partition_epochs.get(&(*t, *p)) == Some(&epoch) {
                    self.partition_epochs.remove(&(*t, *p));
                }
            }
        }
    }

    fn claim(&mut self, a: &Assignment, epoch: i32) {
        for (t, ps) in a {
            for p in ps {
                self.partition_epochs.insert((*t, *p), epoch);
            }
        }
    }

    /// Handles a ConsumerGroupHeartbeat.
    pub fn heartbeat(
        &mut self,
        now: Millis,
        req: HeartbeatRequest,
        topics: &dyn TopicView,
    ) -> HeartbeatResponse {
        // Request validation, as Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid.
        if req.instance_id.as_deref() == Some("") {
            return invalid("InstanceId can't be empty.");
        }
        if req.rack_id.as_deref() == Some("") {
            return invalid("RackId can't be empty.");
        }
        let epoch = req.member_epoch;
        if epoch > 0 || epoch == LEAVE_GROUP_MEMBER_EPOCH {
            if req.member_id.is_empty() {
                return invalid("MemberId can't be empty.");
            }
        } else if epoch == 0 {
            if req.rebalance_timeout_ms == -1 {
                return invalid("RebalanceTimeoutMs must be provided in first request.");
            }
            if req.topic_partitions.as_ref().is_none_or(|t| !t.is_empty()) {
                return invalid("TopicPartitions must be empty when (re-)joining.");
            }
            // Kafka 4 accepts an empty list of names or an empty regex: the
            // member is in the group, subscribed to nothing.
            if req.subscribed_topic_names.is_none() && req.subscribed_topic_regex.is_none() {
                return invalid(
                    "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
                );
            }
        } else if epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH {
            if req.member_id.is_empty() {
                return invalid("MemberId can't be empty.");
            }
            if req.instance_id.is_none() {
                return invalid("InstanceId can't be null.");
            }
        } else {
            return invalid("MemberEpoch is invalid.");
        }
        if let Some(a) = &req.server_assignor {
            if !assignor::ASSIGNORS.contains(&a.as_str()) {
                return HeartbeatResponse::error(GroupError::UnsupportedAssignor {
                    assignor: a.clone(),
                    supported: assignor::ASSIGNORS.join(", "),
                });
            }
        }
        if epoch < 0 {
            return self.leave(now, &req);
        }
        let member_id = if req.member_id.is_empty() {
            Uuid::new_v4().to_string()
        } else {
            req.member_id.clone()
        };
        let known = self.members.contains_key(&member_id)
            || req
                .instance_id
                .as_ref()
                .is_some_and(|i| self.static_members.contains_key(i));
        if !known && self.members.len() >= self.config.members_max {
            return HeartbeatResponse::error(GroupError::ConsumerGroupFull {
                members_max: self.config.members_max,
            });
        }
        // A regex the group does not hold yet must compile; checked before
        // anything changes, so that a refused heartbeat changes nothing.
        let new_regex = match req.subscribed_topic_regex.as_deref() {
            Some(p) if !p.is_empty() && !self.regexes.contains_key(p) => {
                match compile_topic_regex(p) {
                    Ok(r) => Some(r),
                    Err(why) => return invalid_regex(p, &why),
                }
            }
            _ => None,
        };
        let owned = req.topic_partitions.as_deref();

        // Get or create the member (removing it from the maps while it is
        // updated; it goes back below).
        let old = match self.take_member(&member_id, &req, owned) {
            Ok(m) => m,
            Err(e) => return HeartbeatResponse::error(e),
        };
        let mut m = old.clone();
        if let Some(i) = &req.instance_id {
            m.instance_id = Some(i.clone());
        }
        if let Some(r) = &req.rack_id {
            m.rack_id = Some(r.clone());
        }
        if req.rebalance_timeout_ms != -1 {
            m.rebalance_timeout_ms = req.rebalance_timeout_ms;
        }
        if let Some(a) = &req.server_assignor {
            m.server_assignor = Some(a.clone());
        }
        if let Some(names) = &req.subscribed_topic_names {
            let mut s = names.clone();
            s.sort();
            s.dedup();
            m.subscribed = s;
        }
        if let Some(p) = &req.subscribed_topic_regex {
            // Null is "unchanged"; empty is "no regex".
            m.regex = (!p.is_empty()).then(|| p.clone());
        }
        let regex_changed = m.regex != old.regex;
        if regex_changed {
            tracing::info!(group = %self.group_id, member = %m.member_id, regex = %m.regex.as_deref().unwrap_or(""), "member changed its subscribed topic regex");
        }
        if let (Some(p), Some(regex)) = (&m.regex, new_regex) {
            self.regexes.entry(p.clone()).or_insert(ResolvedRegex {
                regex,
                topics: None,
            });
        }
        m.client_id = req.client_id.clone();
        m.client_host = req.client_host.clone();
        let mut bump = old.subscribed != m.subscribed
            || regex_changed
            || old.member_epoch == 0
                && old.assigned.is_empty()
                && !self.targets.contains_key(&m.member_id);
        if let Some(iid) = &m.instance_id {
            self.static_members.insert(iid.clone(), m.member_id.clone());
        }
        self.members.insert(m.member_id.clone(), m);
        if regex_changed {
            self.drop_unused_regexes();
        }
        if self.resolve_regexes(topics) {
            bump = true;
        }

        // Subscription metadata: the subscribed topics as they are now.
        let metadata = self.compute_subscription_metadata(topics);
        if metadata != self.subscription_metadata {
            self.subscription_metadata = metadata;
            bump = true;
        }
        if bump {
            self.group_epoch += 1;
            tracing::info!(group = %self.group_id, epoch = self.group_epoch, "bumped consumer group epoch");
        }
        if self.group_epoch > self.assignment_epoch {
            self.compute_target_assignment();
        }

        // Reconcile the member towards its target.
        let Some(before) = self.members.get(&member_id).cloned() else {
            return HeartbeatResponse::error(GroupError::UnknownServerError);
        };
        let mut after = self.reconcile(&before, owned);
        after.session_deadline =
            Some(now.saturating_add(timeout(self.config.consumer_session_timeout_ms)));
        if after.state == MemberState::UnrevokedPartitions {
            let changed = after.member_epoch != before.member_epoch
                || after.pending_revocation != before.pending_revocation
                || before.rebalance_deadline.is_none();
            if changed {
                after.rebalance_deadline = Some((
                    now.saturating_add(timeout(after.rebalance_timeout_ms)),
                    after.member_epoch,
                ));
            }
        } else {
            after.rebalance_deadline = None;
        }
        self.release(&before.assigned, before.member_epoch);
        self.release(&before.pending_revocation, before.member_epoch);
        self.claim(&after.assigned, after.member_epoch);
        self.claim(&after.pending_revocation, after.member_epoch);
        let full = epoch == 0
            || (req.rebalance_timeout_ms != -1
                && (req.subscribed_topic_names.is_some() || req.subscribed_topic_regex.is_some())
                && req.topic_partitions.is_some());
        let send_assignment = full || after.assigned != old.assigned;
        let r = HeartbeatResponse {
            error: None,
            member_id: Some(after.member_id.clone()),
            member_epoch: after.member_epoch,
            heartbeat_interval_ms: self.config.consumer_heartbeat_interval_ms,
            assignment: send_assignment.then(|| to_list(&after.assigned)),
        };
        self.members.insert(member_id, after);
        r
    }

    /// Finds (or creates) the member a heartbeat is for, applying Kafka's
    /// member and epoch checks; the member is left in the group.
    fn take_member(
        &mut self,
        member_id: &str,
        req: &HeartbeatRequest,
        owned: Option<&[(Uuid, Vec<i32>)]>,
    ) -> Result<Member, GroupError> {
        let epoch = req.member_epoch;
        let check_epoch = |m: &Member| -> Result<(), GroupError> {
            if epoch > m.member_epoch {
                return Err(GroupError::MemberEpochAhead {
                    got: epoch,
                    known: m.member_epoch,
                });
            }
            if epoch < m.member_epoch
                && (epoch != m.previous_member_epoch || !is_subset(owned, &m.assigned))
            {
                return Err(GroupError::MemberEpochBehind {
                    got: epoch,
                    known: m.member_epoch,
                });
            }
            Ok(())
        };
        match &req.instance_id {
            None => match self.members.get(member_id) {
                None if epoch != 0 => Err(GroupError::NotAMember {
                    member_id: member_id.to_string(),
                    group_id: self.group_id.clone(),
                }),
                None => {
                    tracing::info!(group = %self.group_id, member = member_id, "member joins the consumer group");
                    Ok(Member::new(member_id))
                }
                Some(m) if epoch == 0 => Ok(self.rejoin(m.clone())),
                Some(m) => {
                    check_epoch(m)?;
                    Ok(m.clone())
                }
            },
            Some(iid) => {
                let existing = self
                    .static_members
                    .get(iid)
                    .and_then(|id| self.members.get(id))
                    .cloned();
                if epoch == 0 {
                    match existing {
                        None => Ok(match self.members.get(member_id) {
                            Some(m) => self.rejoin(m.clone()),
                            None => Member::new(member_id),
                        }),
                        Some(m) if m.member_id == member_id => Ok(self.rejoin(m)),
                        Some(m) if m.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH => {
                            Err(GroupError::UnreleasedInstanceId {
                                member_id: member_id.to_string(),
                                instance_id: iid.clone(),
                                owner: m.member_id,
                            })
                        }
                        Some(m) => {
                            // The static member is back: it takes over the old
                            // member's assignment under its new member id.
                            tracing::info!(group = %self.group_id, instance = %iid, old = %m.member_id, new = member_id, "static member rejoins");
                            self.members.remove(&m.member_id);
                            self.release(&m.assigned, m.member_epoch);
                            if let Some(t) = self.targets.remove(&m.member_id) {
                                self.targets.insert(member_id.to_string(), t);
                            }
                            let mut n = m;
                            n.member_id = member_id.to_string();
                            n.member_epoch = 0;
                            n.previous_member_epoch = 0;
                            n.state = MemberState::Stable;
                            n.pending_revocation.clear();
                            n.rebalance_deadline = None;
                            self.claim(&n.assigned, 0);
                            Ok(n)
                        }
                    }
                } else {
                    let Some(m) = existing else {
                        return Err(GroupError::UnknownInstanceId {
                            instance_id: iid.clone(),
                        });
                    };
                    if m.member_id != member_id {
                        return Err(GroupError::NotTheStaticMember {
                            member_id: member_id.to_string(),
                            instance_id: iid.clone(),
                            owner: m.member_id,
                        });
                    }
                    check_epoch(&m)?;
                    Ok(m)
                }
            }
        }
    }

    /// A known member joining again with epoch 0 (it was fenced on its side
    /// and dropped its partitions): it starts over from no partitions, its
    /// target stays.
    fn rejoin(&mut self, mut m: Member) -> Member {
        self.release(&m.assigned, m.member_epoch);
        self.release(&m.pending_revocation, m.member_epoch);
        m.assigned.clear();
        m.pending_revocation.clear();
        m.member_epoch = 0;
        m.previous_member_epoch = 0;
        m.state = MemberState::Stable;
        m.rebalance_deadline = None;
        if let Some(stored) = self.members.get_mut(&m.member_id) {
            *stored = m.clone();
        }
        m
    }

    fn leave(&mut self, now: Millis, req: &HeartbeatRequest) -> HeartbeatResponse {
        let _ = now;
        let mut r = HeartbeatResponse {
            error: None,
            member_id: Some(req.member_id.clone()),
            member_epoch: req.member_epoch,
            heartbeat_interval_ms: 0,
            assignment: None,
        };
        let member_id = match &req.instance_id {
            None => {
                if !self.members.contains_key(&req.member_id) {
                    return HeartbeatResponse::error(GroupError::NotAMember {
                        member_id: req.member_id.clone(),
                        group_id: self.group_id.clone(),
                    });
                }
                req.member_id.clone()
            }
            Some(iid) => {
                let Some(id) = self.static_members.get(iid).cloned() else {
                    return HeartbeatResponse::error(GroupError::UnknownInstanceId {
                        instance_id: iid.clone(),
                    });
                };
                if id != req.member_id {
                    return HeartbeatResponse::error(GroupError::NotTheStaticMember {
                        member_id: req.member_id.clone(),
                        instance_id: iid.clone(),
                        owner: id,
                    });
                }
                if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH {
                    // Temporarily gone: keep its partitions reserved.
                    if let Some(m) = self.members.get(&id).cloned() {
                        let mut n = m.clone();
                        n.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH;
                        n.pending_revocation.clear();
                        n.rebalance_deadline = None;
                        self.release(&m.assigned, m.member_epoch);
                        self.release(&m.pending_revocation, m.member_epoch);
                        self.claim(&n.assigned, n.member_epoch);
                        self.members.insert(id.clone(), n);
                    }
                    tracing::info!(group = %self.group_id, member = %id, instance = %iid, "static member left temporarily");
                    r.member_id = Some(id);
                    return r;
                }
                id
            }
        };
        tracing::info!(group = %self.group_id, member = %member_id, "member left the consumer group");
        self.fence(&member_id);
        r
    }

    /// Removes a member and bumps the group epoch.
    fn fence(&mut self, member_id: &str) {
        let Some(m) = self.members.remove(member_id) else {
            return;
        };
        self.release(&m.assigned, m.member_epoch);
        self.release(&m.pending_revocation, m.member_epoch);
        self.targets.remove(member_id);
        if let Some(iid) = &m.instance_id {
            if self.static_members.get(iid).map(String::as_str) == Some(member_id) {
                self.static_members.remove(iid);
            }
        }
        if m.regex.is_some() {
            self.drop_unused_regexes();
        }
        self.group_epoch += 1;
    }

    fn compute_subscription_metadata(
        &self,
        topics: &dyn TopicView,
    ) -> BTreeMap<String, (Uuid, i32)> {
        self.subscribed_topic_names()
            .into_iter()
            .filter_map(|t| topics.by_name(&t).map(|v| (t, v)))
            .collect()
    }

    fn compute_target_assignment(&mut self) {
        let name = self.preferred_assignor();
        let empty = Assignment::new();
        let subscriptions: Vec<Vec<String>> = self
            .members
            .values()
            .map(|m| self.member_subscription(m))
            .collect();
        let members: Vec<AssignMember<'_>> = self
            .members
            .values()
            .zip(&subscriptions)
            .map(|(m, subscribed)| AssignMember {
                member_id: &m.member_id,
                instance_id: m.instance_id.as_deref(),
                subscribed,
                current: self.targets.get(&m.member_id).unwrap_or(&empty),
            })
            .collect();
        let targets = assignor::assign(&name, &members, &self.subscription_metadata);
        self.targets = targets.into_iter().collect();
        self.assignment_epoch = self.group_epoch;
        tracing::debug!(group = %self.group_id, epoch = self.assignment_epoch, assignor = %name, "computed target assignment");
    }

    /// Kafka's `CurrentAssignmentBuilder.build`.
    fn reconcile(&self, m: &Member, owned: Option<&[(Uuid, Vec<i32>)]>) -> Member {
        if m.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH
            || m.is_reconciled_to(self.assignment_epoch)
        {
            return m.clone();
        }
        match m.state {
            MemberState::Stable => {
                if m.member_epoch != self.assignment_epoch {
                    self.next_assignment(m, m.member_epoch, owned)
                } else {
                    m.clone()
                }
            }
            MemberState::UnrevokedPartitions => {
                if owns_revoked(owned, &m.pending_revocation) {
                    m.clone()
                } else {
                    self.next_assignment(m, m.member_epoch + 1, owned)
                }
            }
            MemberState::UnreleasedPartitions => self.next_assignment(m, m.member_epoch, owned),
        }
    }

    fn next_assignment(
        &self,
        m: &Member,
        member_epoch: i32,
        owned: Option<&[(Uuid, Vec<i32>)]>,
    ) -> Member {
        let empty = Assignment::new();
        let target = self.targets.get(&m.member_id).unwrap_or(&empty);
        let mut assigned = Assignment::new();
        let mut revoking = Assignment::new();
        let mut adding = Assignment::new();
        let mut unreleased = false;
        let topics: BTreeSet<Uuid> = target.keys().chain(m.assigned.keys()).copied().collect();
        for t in topics {
            let tgt = target.get(&t).cloned().unwrap_or_default();
            let cur = m.assigned.get(&t).cloned().unwrap_or_default();
            let keep: BTreeSet<i32> = cur.intersection(&tgt).copied().collect();
            let revoke: BTreeSet<i32> = cur.difference(&keep).copied().collect();
            let mut add: BTreeSet<i32> = tgt.difference(&keep).copied().collect();
            let before = add.len();
            add.retain(|p| self.current_partition_epoch(t, *p) == -1);
            unreleased |= add.len() != before;
            if !keep.is_empty() {
                assigned.insert(t, keep);
            }
            if !revoke.is_empty() {
                revoking.insert(t, revoke);
            }
            if !add.is_empty() {
                adding.insert(t, add);
            }
        }
        let mut n = m.clone();
        let set_epoch = |n: &mut Member, e: i32| {
            if n.member_epoch != e {
                n.previous_member_epoch = n.member_epoch;
                n.member_epoch = e;
            }
        };
        if !revoking.is_empty() && owns_revoked(owned, &revoking) {
            n.state = MemberState::UnrevokedPartitions;
            set_epoch(&mut n, member_epoch);
            n.assigned = assigned;
            n.pending_revocation = revoking;
        } else {
            for (t, ps) in adding {
                assigned.entry(t).or_default().extend(ps);
            }
            n.state = if unreleased {
                MemberState::UnreleasedPartitions
            } else {
                MemberState::Stable
            };
            set_epoch(&mut n, self.assignment_epoch);
            n.assigned = assigned;
            n.pending_revocation.clear();
        }
        n
    }

    // ----- offsets -------------------------------------------------------

    /// Kafka's `ConsumerGroup.validateOffsetCommit`.
    pub fn validate_offset_commit(
        &self,
        member_id: &str,
        _instance_id: Option<&str>,
        epoch: i32,
        transactional: bool,
        version: i16,
    ) -> Result<(), GroupError> {
        if epoch < 0 && self.members.is_empty() {
            return Ok(());
        }
        let Some(m) = self.members.get(member_id) else {
            return Err(GroupError::UnknownMemberId);
        };
        if !transactional && version < 9 {
            return Err(GroupError::UnsupportedVersion);
        }
        if epoch != m.member_epoch {
            return Err(GroupError::StaleMemberEpoch);
        }
        Ok(())
    }

    /// Kafka's `ConsumerGroup.validateOffsetFetch` (member id and epoch
    /// given).
    pub fn validate_offset_fetch(&self, member_id: &str, epoch: i32) -> Result<(), GroupError> {
        let Some(m) = self.members.get(member_id) else {
            return Err(GroupError::UnknownMemberId);
        };
        if epoch != m.member_epoch {
            return Err(GroupError::StaleMemberEpoch);
        }
        Ok(())
    }

    // ----- timers --------------------------------------------------------

    pub fn next_deadline(&self) -> Option<Millis> {
        self.members
            .values()
            .flat_map(|m| [m.session_deadline, m.rebalance_deadline.map(|(d, _)| d)])
            .flatten()
            .min()
    }

    /// Fences members whose session expired or who did not revoke in time.
    pub fn tick(&mut self, now: Millis) {
        let expired: Vec<(String, &'static str)> = self
            .members
            .values()
            .filter_map(|m| {
                if m.session_deadline.is_some_and(|d| d <= now) {
                    Some((m.member_id.clone(), "the member session expired"))
                } else if m.rebalance_deadline.is_some_and(|(d, e)| {
                    d <= now && m.state == MemberState::UnrevokedPartitions && m.member_epoch == e
                }) {
                    Some((
                        m.member_id.clone(),
                        "the member failed to revoke partitions within the rebalance timeout",
                    ))
                } else {
                    None
                }
            })
            .collect();
        for (id, why) in expired {
            tracing::info!(group = %self.group_id, member = %id, reason = why, "fencing consumer group member");
            self.fence(&id);
        }
        // Rebalance deadlines that no longer apply.
        for m in self.members.values_mut() {
            if m.rebalance_deadline.is_some_and(|(d, _)| d <= now) {
                m.rebalance_deadline = None;
            }
        }
    }

    // ----- describe ------------------------------------------------------

    pub fn describe(&self, topics: &dyn TopicView) -> Described {
        let named = |a: &Assignment| -> Vec<(Uuid, String, Vec<i32>)> {
            a.iter()
                .map(|(t, ps)| {
                    (
                        *t,
                        topics.name_of(*t).unwrap_or_default(),
                        ps.iter().copied().collect(),
                    )
                })
                .collect()
        };
        let empty = Assignment::new();
        Described {
            state: self.state_name(),
            group_epoch: self.group_epoch,
            assignment_epoch: self.assignment_epoch,
            assignor_name: self.preferred_assignor(),
            members: self
                .members
                .values()
                .map(|m| DescribedMember {
                    member_id: m.member_id.clone(),
                    instance_id: m.instance_id.clone(),
                    rack_id: m.rack_id.clone(),
                    member_epoch: m.member_epoch,
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    subscribed_topic_names: m.subscribed.clone(),
                    subscribed_topic_regex: m.regex.clone().unwrap_or_default(),
                    assignment: named(&m.assigned),
                    target_assignment: named(self.targets.get(&m.member_id).unwrap_or(&empty)),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::errors::{code, ResponseError};

    pub struct Topics(pub BTreeMap<String, (Uuid, i32)>);

    impl TopicView for Topics {
        fn by_name(&self, name: &str) -> Option<(Uuid, i32)> {
            self.0.get(name).copied()
        }
        fn name_of(&self, id: Uuid) -> Option<String> {
            self.0
                .iter()
                .find(|(_, (i, _))| *i == id)
                .map(|(n, _)| n.clone())
        }
        fn names(&self) -> Vec<String> {
            self.0.keys().cloned().collect()
        }
        fn generation(&self) -> u64 {
            self.0
                .values()
                .fold(0, |g, (id, _)| g.wrapping_add(id.as_u64_pair().0))
        }
    }

    fn topics(list: &[(&str, i32)]) -> Topics {
        Topics(
            list.iter()
                .map(|(n, c)| (n.to_string(), (Uuid::new_v4(), *c)))
                .collect(),
        )
    }

    fn join(member: &str, topics: &[&str]) -> HeartbeatRequest {
        HeartbeatRequest {
            group_id: "g".into(),
            member_id: member.into(),
            member_epoch: 0,
            rebalance_timeout_ms: 30_000,
            subscribed_topic_names: Some(topics.iter().map(|s| s.to_string()).collect()),
            topic_partitions: Some(Vec::new()),
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            ..Default::default()
        }
    }

    fn beat(member: &str, epoch: i32, owned: Option<Vec<(Uuid, Vec<i32>)>>) -> HeartbeatRequest {
        HeartbeatRequest {
            group_id: "g".into(),
            member_id: member.into(),
            member_epoch: epoch,
            rebalance_timeout_ms: -1,
            topic_partitions: owned,
            ..Default::default()
        }
    }

    fn count(r: &HeartbeatResponse) -> usize {
        r.assignment
            .as_ref()
            .map_or(0, |a| a.iter().map(|(_, p)| p.len()).sum())
    }

    #[test]
    fn subscription_topics_parse_the_v0_prefix() {
        use bytes::BufMut;
        use kafka_protocol::protocol::{Encodable, StrBytes};
        let mut s = ConsumerProtocolSubscription::default();
        s.topics = vec![
            StrBytes::from_static_str("a"),
            StrBytes::from_static_str("b"),
        ];
        let mut buf = bytes::BytesMut::new();
        buf.put_i16(3);
        s.encode(&mut buf, 3).expect("encode");
        assert_eq!(
            subscription_topics(&buf.freeze()),
            Some(vec!["a".to_string(), "b".to_string()])
        );
        assert_eq!(subscription_topics(&Bytes::from_static(b"x")), None);
    }

    #[test]
    fn one_member_gets_everything_then_shares_through_revocation() {
        let t = topics(&[("t", 4)]);
        let tid = t.0["t"].0;
        let mut g = ConsumerGroup::new("g", GroupConfig::default());
        let r1 = g.heartbeat(0, join("m1", &["t"]), &t);
        assert_eq!(r1.error, None);
        assert_eq!(r1.member_epoch, 1);
        assert_eq!(count(&r1), 4);
        assert_eq!(g.state_name(), "Stable");

        // m2 joins: epoch 2; its partitions are still m1's (unreleased).
        let r2 = g.heartbeat(10, join("m2", &["t"]), &t);
        assert_eq!(r2.member_epoch, 2);
        assert_eq!(count(&r2), 0);
        assert_eq!(g.state_name(), "Reconciling");

        // m1 is asked to revoke two partitions and stays at epoch 1.
        let r = g.heartbeat(20, beat("m1", 1, Some(vec![(tid, vec![0, 1, 2, 3])])), &t);
        assert_eq!(r.member_epoch, 1);
        assert_eq!(count(&r), 2);
        let kept: Vec<i32> = r.assignment.as_ref().expect("assignment")[0].1.clone();

        // m2 still waits.
        let r = g.heartbeat(25, beat("m2", 2, Some(vec![])), &t);
        assert_eq!(count(&r), 0);

        // m1 revoked: moves to epoch 2.
        let r = g.heartbeat(30, beat("m1", 1, Some(vec![(tid, kept.clone())])), &t);
        assert_eq!(r.member_epoch, 2);

        // m2 now gets the released partitions.
        let r = g.heartbeat(40, beat("m2", 2, Some(vec![])), &t);
        assert_eq!(r.member_epoch, 2);
        assert_eq!(count(&r), 2);
        let got: Vec<i32> = r.assignment.as_ref().expect("assignment")[0].1.clone();
        assert!(got.iter().all(|p| !kept.contains(p)));
        let r = g.heartbeat(50, beat("m2", 2, Some(vec![(tid, got)])), &t);
        assert_eq!(r.error, None);
        assert_eq!(g.state_name(), "Stable");

        // A stale epoch is fenced; an unknown member is unknown.
        let r = g.heartbeat(60, beat("m2", 1, Some(vec![])), &t);
        assert_eq!(
            r.error.as_ref().map(GroupError::code),
            Some(code(ResponseError::FencedMemberEpoch))
        );
        let r = g.heartbeat(60, beat("zz", 3, None), &t);
        assert_eq!(
            r.error.as_ref().map(GroupError::code),
            Some(code(ResponseError::UnknownMemberId))
        );

        // m1 leaves: m2 gets everything at the next epoch.
        let r = g.heartbeat(70, beat("m1", -1, None), &t);
        assert_eq!((r.error, r.member_epoch), (None, -1));
        let r = g.heartbeat(80, beat("m2", 2, None), &t);
        assert_eq!(r.member_epoch, 3);
        assert_eq!(count(&r), 4);
    }

    #[test]
    fn transactional_commits_skip_the_offset_commit_v9_rule() {
        let t = topics(&[("t", 1)]);
        let mut g = ConsumerGroup::new("g", GroupConfig::default());
        let r = g.heartbeat(0, join("m1", &["t"]), &t);
        let epoch = r.member_epoch;
        assert_eq!(
            g.validate_offset_commit("m1", None, epoch, false, 8),
            Err(GroupError::UnsupportedVersion)
        );
        assert_eq!(g.validate_offset_commit("m1", None, epoch, true, 8), Ok(()));
        assert_eq!(
            g.validate_offset_commit("m1", None, epoch, false, 9),
            Ok(())
        );
        assert_eq!(
            g.validate_offset_commit("m1", None, epoch + 1, true, 8),
            Err(GroupError::StaleMemberEpoch)
        );
    }

    #[test]
    fn session_timeout_fences_and_reassigns() {
        let t = topics(&[("t", 2)]);
        let cfg = GroupConfig::default();
        let mut g = ConsumerGroup::new("g", cfg);
        g.heartbeat(0, join("m1", &["t"]), &t);
        g.heartbeat(0, join("m2", &["t"]), &t);
        let session = timeout(cfg.consumer_session_timeout_ms);
        // m2 keeps heartbeating; m1 goes silent.
        g.heartbeat(session / 2, beat("m2", 2, Some(vec![])), &t);
        assert_eq!(g.next_deadline(), Some(session));
        g.tick(session);
        assert_eq!(g.members.len(), 1);
        let r = g.heartbeat(session + 1, beat("m2", 2, Some(vec![])), &t);
        assert_eq!(r.member_epoch, 3);
        assert_eq!(count(&r), 2);
    }

    #[test]
    fn static_member_comes_back_with_its_partitions() {
        let t = topics(&[("t", 4)]);
        let mut g = ConsumerGroup::new("g", GroupConfig::default());
        let mut a = join("a1", &["t"]);
        a.instance_id = Some("ia".into());
        g.heartbeat(0, a, &t);
        let mut b = join("b1", &["t"]);
        b.instance_id = Some("ib".into());
        g.heartbeat(0, b, &t);
        // Settle.
        for now in 1..6 {
            let mut x = beat(
                "a1",
                g.members["a1"].member_epoch,
                Some(to_list(&g.members["a1"].assigned)),
            );
            x.instance_id = Some("ia".into());
            g.heartbeat(now, x, &t);
            let mut y = beat(
                "b1",
                g.members["b1"].member_epoch,
                Some(to_list(&g.members["b1"].assigned)),
            );
            y.instance_id = Some("ib".into());
            g.heartbeat(now, y, &t);
        }
        assert_eq!(g.state_name(), "Stable");
        let epoch = g.group_epoch();
        let before = g.members["a1"].assigned.clone();
        // a1 leaves temporarily.
        let mut l = beat("a1", LEAVE_GROUP_STATIC_MEMBER_EPOCH, None);
        l.instance_id = Some("ia".into());
        assert_eq!(g.heartbeat(10, l, &t).member_epoch, -2);
        // A new instance with the same instance id takes over.
        let mut a2 = join("a2", &["t"]);
        a2.instance_id = Some("ia".into());
        let r = g.heartbeat(20, a2, &t);
        assert_eq!(r.error, None);
        assert_eq!(g.group_epoch(), epoch, "no rebalance");
        assert_eq!(to_assignment(&r.assignment.expect("assignment")), before);
        // Someone else claiming an instance id in use is refused.
        let mut x = join("x", &["t"]);
        x.instance_id = Some("ib".into());
        assert_eq!(
            g.heartbeat(30, x, &t).error.as_ref().map(GroupError::code),
            Some(code(ResponseError::UnreleasedInstanceId))
        );
    }

    #[test]
    fn a_member_that_does_not_revoke_is_fenced_at_its_rebalance_timeout() {
        let t = topics(&[("t", 2)]);
        let tid = t.0["t"].0;
        let mut g = ConsumerGroup::new("g", GroupConfig::default());
        g.heartbeat(0, join("m1", &["t"]), &t);
        g.heartbeat(0, join("m2", &["t"]), &t);
        // m1 is told to give one partition up and keeps reporting both.
        let r = g.heartbeat(1_000, beat("m1", 1, Some(vec![(tid, vec![0, 1])])), &t);
        assert_eq!((r.member_epoch, count(&r)), (1, 1));
        let owned_all = || Some(vec![(tid, vec![0, 1])]);
        for now in [5_000, 10_000, 20_000, 30_000] {
            g.tick(now);
            let r = g.heartbeat(now, beat("m1", 1, owned_all()), &t);
            assert_eq!(r.error, None, "still within its 30 s rebalance timeout");
            g.heartbeat(now, beat("m2", 2, Some(vec![])), &t);
        }
        g.tick(31_000);
        assert!(!g.members.contains_key("m1"), "fenced");
        let r = g.heartbeat(31_500, beat("m2", 2, Some(vec![])), &t);
        assert_eq!((r.member_epoch, count(&r)), (3, 2));
        let r = g.heartbeat(32_000, beat("m1", 1, owned_all()), &t);
        assert_eq!(
            r.error.as_ref().map(GroupError::code),
            Some(code(ResponseError::UnknownMemberId))
        );
    }

    #[test]
    fn a_fenced_member_rejoins_with_epoch_zero_under_its_id() {
        let t = topics(&[("t", 2)]);
        let mut g = ConsumerGroup::new("g", GroupConfig::default());
        let r = g.heartbeat(0, join("m1", &["t"]), &t);
        assert_eq!((r.member_epoch, count(&r)), (1, 2));
        // The client lost its state and joins again with the same id.
        let r = g.heartbeat(10, join("m1", &["t"]), &t);
        assert_eq!(r.error, None);
        assert_eq!(
            (r.member_epoch, count(&r)),
            (1, 2),
            "same target, no new epoch"
        );
        assert_eq!(g.group_epoch(), 1);
    }

    fn join_regex(member: &str, names: &[&str], regex: &str) -> HeartbeatRequest {
        let mut r = join(member, names);
        r.subscribed_topic_regex = Some(regex.to_string());
        r
    }

    /// Topic names of an assignment, sorted.
    fn assigned_names(t: &Topics, r: &HeartbeatResponse) -> Vec<String> {
        let mut names: Vec<String> = r
            .assignment
            .as_ref()
            .map(|a| a.iter().filter_map(|(id, _)| t.name_of(*id)).collect())
            .unwrap_or_default();
        names.sort();
        names
    }

    #[test]
    fn an_empty_regex_means_no_regex() {
        // librdkafka sends SubscribedTopicRegex "" with a plain subscription.
        let t = topics(&[("t", 2), ("u", 1)]);
        let mut g = ConsumerGroup::new("g", GroupConfig::default());
        let r = g.heartbeat(0, join_regex("m1", &["t"], ""), &t);
        assert_eq!(r.error, None, "{:?}", r.error);
        assert_eq!(assigned_names(&t, &r), vec!["t"]);
        assert!(g.regexes.is_empty());
        let d = g.describe(&t);
        assert_eq!(d.members[0].subscribed_topic_regex, "");
        // Joining with an empty list of names (and no regex) is allowed: the
        // member is in the group with nothing to consume.
        let r = g.heartbeat(0, join("m2", &[]), &t);
        assert_eq!(r.error, None, "{:?}", r.error);
        assert_eq!(count(&r), 0);
        // Neither names nor regex on a join is refused.
        let mut r = join("m3", &[]);
        r.subscribed_topic_names = None;
        assert_eq!(
            g.heartbeat(0, r, &t).error.as_ref().map(GroupError::code),
            Some(code(ResponseError::InvalidRequest))
        );
    }

    #[test]
    fn a_regex_subscribes_to_matching_topics_and_later_ones() {
        let mut t = topics(&[("p-1", 2), ("q-1", 1), ("xp-1", 1)]);
        let mut g = ConsumerGroup::new("g", GroupConfig::default());
        let r = g.heartbeat(0, join_regex("m1", &[], "p-.*"), &t);
        assert_eq!(r.error, None, "{:?}", r.error);
        // Whole-name matching: `xp-1` does not match `p-.*`.
        assert_eq!(assigned_names(&t, &r), vec!["p-1"]);
        assert_eq!((r.member_epoch, count(&r)), (1, 2));
        let owned = r.assignment.clone();
        let d = g.describe(&t);
        assert_eq!(d.members[0].subscribed_topic_regex, "p-.*");
        assert!(d.members[0].subscribed_topic_names.is_empty());

        // Nothing changed: no new epoch, no assignment sent.
        let r = g.heartbeat(10, beat("m1", 1, owned.clone()), &t);
        assert_eq!((r.error, r.member_epoch, r.assignment), (None, 1, None));

        // A matching topic is created: the next heartbeat assigns it.
        t.0.insert("p-2".into(), (Uuid::new_v4(), 3));
        t.0.insert("q-2".into(), (Uuid::new_v4(), 3));
        let r = g.heartbeat(20, beat("m1", 1, owned), &t);
        assert_eq!(r.error, None);
        assert_eq!(r.member_epoch, 2);
        assert_eq!(assigned_names(&t, &r), vec!["p-1", "p-2"]);
        assert_eq!(count(&r), 5);

        // A second member with the same regex shares the resolved topics.
        let r = g.heartbeat(30, join_regex("m2", &[], "p-.*"), &t);
        assert_eq!((r.error, r.member_epoch), (None, 3));
        assert_eq!(g.regexes.len(), 1);

        // Deleting a matching topic drops it from the subscription.
        t.0.remove("p-2");
        let r = g.heartbeat(40, beat("m2", 3, Some(vec![])), &t);
        assert_eq!((r.error, r.member_epoch), (None, 4));
        assert!(!g.subscribed_topic_names().contains("p-2"));
    }

    #[test]
    fn names_and_regex_are_a_union_and_an_empty_regex_drops_the_regex() {
        let t = topics(&[("a", 1), ("p-1", 1), ("p-2", 1), ("z", 1)]);
        let mut g = ConsumerGroup::new("g", GroupConfig::default());
        let r = g.heartbeat(0, join_regex("m1", &["a"], "p-1|p-2"), &t);
        assert_eq!(r.error, None, "{:?}", r.error);
        assert_eq!(assigned_names(&t, &r), vec!["a", "p-1", "p-2"]);
        let owned = r.assignment.clone();

        // A null regex leaves the regex as it is.
        let mut b = beat("m1", 1, owned.clone());
        b.subscribed_topic_names = Some(vec!["a".into(), "z".into()]);
        let r = g.heartbeat(10, b, &t);
        assert_eq!(r.member_epoch, 2);
        assert_eq!(assigned_names(&t, &r), vec!["a", "p-1", "p-2", "z"]);
        let owned = r.assignment.clone();

        // An empty regex removes it: its topics are revoked first.
        let mut b = beat("m1", 2, owned);
        b.subscribed_topic_regex = Some(String::new());
        let r = g.heartbeat(20, b, &t);
        assert_eq!(r.error, None);
        assert_eq!(assigned_names(&t, &r), vec!["a", "z"]);
        assert!(g.regexes.is_empty(), "no member uses the regex any more");
        assert_eq!(g.describe(&t).members[0].subscribed_topic_regex, "");
    }

    #[test]
    fn an_invalid_regex_is_refused_and_changes_nothing() {
        let t = topics(&[("t", 1)]);
        let mut g = ConsumerGroup::new("g", GroupConfig::default());
        for bad in ["^.*[0", "a)|(b", "(?<", "x{2,1}"] {
            let r = g.heartbeat(0, join_regex("m1", &[], bad), &t);
            assert_eq!(
                r.error.as_ref().map(GroupError::code),
                Some(code(ResponseError::InvalidRegularExpression)),
                "{bad}"
            );
            let msg = r
                .error
                .as_ref()
                .and_then(GroupError::message)
                .expect("message");
            assert!(
                msg.starts_with(&format!("SubscribedTopicRegex `{bad}` is not a valid")),
                "{msg}"
            );
            assert!(g.is_empty());
            assert_eq!(g.group_epoch(), 0);
        }
        // A member in the group that switches to a bad regex keeps its
        // subscription.
        let r = g.heartbeat(0, join("m1", &["t"]), &t);
        assert_eq!(r.member_epoch, 1);
        let mut b = beat("m1", 1, r.assignment.clone());
        b.subscribed_topic_regex = Some("[".into());
        let r = g.heartbeat(10, b, &t);
        assert_eq!(
            r.error.as_ref().map(GroupError::code),
            Some(code(ResponseError::InvalidRegularExpression))
        );
        assert_eq!(g.group_epoch(), 1);
        assert!(g.regexes.is_empty());
    }

    #[test]
    fn a_fenced_regex_member_releases_its_regex() {
        let t = topics(&[("p-1", 1)]);
        let cfg = GroupConfig::default();
        let mut g = ConsumerGroup::new("g", cfg);
        g.heartbeat(0, join_regex("m1", &[], "p-.*"), &t);
        assert_eq!(g.regexes.len(), 1);
        g.tick(timeout(cfg.consumer_session_timeout_ms));
        assert!(g.is_empty());
        assert!(g.regexes.is_empty());
        assert_eq!(g.regex_generation, None);
    }

    #[test]
    fn regex_syntax_and_size_are_checked() {
        let re = compile_topic_regex("^prefix-.*").expect("valid");
        assert!(re.is_match("prefix-1"));
        assert!(!re.is_match("xprefix-1"));
        let re = compile_topic_regex("a|ab").expect("valid");
        assert!(re.is_match("ab"), "whole-name match, not leftmost-first");
        assert!(compile_topic_regex("a{1000}{1000}").is_err(), "too big");
    }

    #[test]
    fn bad_requests_are_refused() {
        let t = topics(&[("t", 1)]);
        let mut g = ConsumerGroup::new("g", GroupConfig::default());
        let mut r = join("m", &["t"]);
        r.topic_partitions = None;
        assert_eq!(
            g.heartbeat(0, r, &t).error.as_ref().map(GroupError::code),
            Some(code(ResponseError::InvalidRequest))
        );
        let mut r = join("m", &["t"]);
        r.server_assignor = Some("sticky".into());
        assert_eq!(
            g.heartbeat(0, r, &t).error.as_ref().map(GroupError::code),
            Some(code(ResponseError::UnsupportedAssignor))
        );
        let r = beat("m", -3, None);
        assert_eq!(
            g.heartbeat(0, r, &t).error.as_ref().map(GroupError::code),
            Some(code(ResponseError::InvalidRequest))
        );
        assert!(g.is_empty());
    }
}
