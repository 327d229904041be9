//! KIP-848 consumer groups (ConsumerGroupHeartbeat) as a sans-io state
//! machine, plus the consumer protocol's embedded subscription format.
//!
//! Mirrors Kafka 4's `GroupMetadataManager.consumerGroupHeartbeat` and
//! `CurrentAssignmentBuilder`:
//! - a new group is at epoch 1 (Kafka 4.4's `ModernGroup`); the group epoch
//!   is bumped when a member joins with a subscription, leaves, is fenced or
//!   changes its subscription, when the preferred server assignor changes,
//!   or when the subscribed topics change (new partitions); the target
//!   assignment is recomputed by the server-side assignor
//!   ([`super::assignor`]) by a heartbeat that finds the group epoch past
//!   the assignment epoch, at most once per
//!   `group.consumer.assignment.interval.ms` (KIP-1263; until then members
//!   reconcile towards the last target and the group is Assigning);
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

//!
//! The machine is one [`ConsumerGroup`], its methods split by
//! responsibility, each file an `impl ConsumerGroup` block. This file owns
//! the types, the member records, the partition ownership bookkeeping
//! (which member epoch holds each partition: claim, release) and the small
//! queries every part uses. Calls between the files go one way:
//!
//! - `subscription.rs`: what members subscribe to: the consumer protocol's
//!   embedded subscription format, regex compilation and resolution against
//!   the topics, and the subscription metadata; calls only this file;
//! - `target.rs`: the assignor the members prefer and the target assignment
//!   it computes; calls `subscription.rs`;
//! - `reconcile.rs`: one member's step towards its target (Kafka's
//!   `CurrentAssignmentBuilder`: revoke, then assign what is free); calls
//!   only this file;
//! - `leave.rs`: a member leaving (epoch -1, or -2 for a static member
//!   leaving temporarily) and fencing, which removes a member and bumps the
//!   group epoch; calls `subscription.rs`;
//! - `heartbeat.rs`: ConsumerGroupHeartbeat itself (validation, the member
//!   and epoch checks, static member take-over, rejoining) driving the files
//!   above;
//! - `timers.rs` (session and rebalance timeouts, `tick`; calls `leave.rs`),
//!   `offsets.rs` (offset commit and fetch checks; calls only this file) and
//!   `describe.rs` (ConsumerGroupDescribe's view; calls `target.rs`): never
//!   called by the other files.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use regex::Regex;
use uuid::Uuid;

use super::assignor::Assignment;
use super::error::GroupError;
use super::{GroupConfig, Millis};

mod describe;
mod heartbeat;
mod leave;
mod offsets;
mod reconcile;
mod subscription;
mod target;
mod timers;

pub use heartbeat::validate as validate_heartbeat;
pub use subscription::{compile_topic_regex, subscription_topics, REGEX_COMPILED_BYTES_MAX};

/// Member epoch of a member leaving the group.
pub const LEAVE_GROUP_MEMBER_EPOCH: i32 = -1;
/// Member epoch of a static member leaving temporarily.
pub const LEAVE_GROUP_STATIC_MEMBER_EPOCH: i32 = -2;

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
    /// The request's version: from v1 the member id is the client's and
    /// always required.
    pub api_version: i16,
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
    /// When the last target assignment was computed (Kafka's
    /// `assignmentTimestamp`); `None` before the first.
    assignment_timestamp: Option<Millis>,
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

fn to_list(a: &Assignment) -> Vec<(Uuid, Vec<i32>)> {
    a.iter()
        .filter(|(_, ps)| !ps.is_empty())
        .map(|(t, ps)| (*t, ps.iter().copied().collect()))
        .collect()
}

fn timeout(ms: i32) -> u64 {
    u64::try_from(ms).unwrap_or(0)
}

impl ConsumerGroup {
    /// Runs with `config` from now on (a group config changed): deadlines
    /// already set keep their time; the next heartbeat of each member sets
    /// its session deadline and tells it the interval.
    pub fn set_config(&mut self, config: GroupConfig) {
        self.config = config;
    }

    pub fn new(group_id: &str, config: GroupConfig) -> Self {
        ConsumerGroup {
            group_id: group_id.to_string(),
            config,
            // Kafka 4.4's ModernGroup starts at group epoch 1, before any
            // target assignment (epoch 0): a first member subscribing to
            // topics bumps it to 2.
            group_epoch: 1,
            assignment_epoch: 0,
            assignment_timestamp: None,
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

    /// Members in the group now.
    pub fn member_count(&self) -> usize {
        self.members.len()
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

    /// The epoch of the member holding (or revoking) a partition; -1 when
    /// it is free.
    fn current_partition_epoch(&self, topic: Uuid, partition: i32) -> i32 {
        self.partition_epochs
            .get(&(topic, partition))
            .copied()
            .unwrap_or(-1)
    }

    /// Frees the partitions of `a` still held at `epoch`.
    fn release(&mut self, a: &Assignment, epoch: i32) {
        for (t, ps) in a {
            for p in ps {
                if self.partition_epochs.get(&(*t, *p)) == Some(&epoch) {
                    self.partition_epochs.remove(&(*t, *p));
                }
            }
        }
    }

    /// Marks the partitions of `a` as held at `epoch`.
    fn claim(&mut self, a: &Assignment, epoch: i32) {
        for (t, ps) in a {
            for p in ps {
                self.partition_epochs.insert((*t, *p), epoch);
            }
        }
    }
}

#[cfg(test)]
mod consumer_tests;
