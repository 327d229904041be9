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
mod consumer_tests;
