//! Share groups (KIP-932, ShareGroupHeartbeat) as a sans-io state machine,
//! in the style of [`super::consumer`]: heartbeats, leaves and clock ticks
//! go in (time as [`Millis`], topics as name -> (id, partition count)),
//! responses and the fenced members come out. No clock, no file, no lock.
//!
//! Kafka's rules (`GroupMetadataManager.shareGroupHeartbeat`,
//! `shareGroupLeave`, `throwIfShareGroupMemberEpochIsInvalid`,
//! `ShareGroupAssignmentBuilder`), docs/share-groups-design.md §2.7:
//! - a new group is at group epoch 1 with no target (assignment epoch 0),
//!   as the KIP-848 groups here; the group epoch is bumped when a member
//!   joins, leaves, is fenced or changes its subscription, and when the
//!   subscribed topics' metadata (ids, partition counts) changes;
//! - a heartbeat that finds the group epoch past the assignment epoch
//!   recomputes the target with the `simple` assignor
//!   ([`super::share_assignor::assign_share_assignable`]), at most once per
//!   `share.assignment.interval.ms`; until then members move to the last
//!   target. No timer recomputes it: only a heartbeat does;
//! - only *initialised* share-partitions are assignable (Kafka's
//!   `isPartitionAssignable`). A heartbeat initialises, after its target
//!   step, every partition of the subscribed topics not yet initialised
//!   (Kafka sends InitializeShareGroupState then; here it takes effect at
//!   once), so the heartbeat that first sees a topic leaves it out of the
//!   target, and a later one that finds the target missing initialised
//!   partitions (Kafka's `initializedAssignmentPending`) bumps the group
//!   epoch to assign them. A new group's members therefore get their
//!   partitions at the first heartbeat at least an assignment interval
//!   after the first join, as on Kafka 4.4 (compat-tests/java/FINDINGS.md
//!   S2);
//! - there is no revocation step: share-partitions may be held by several
//!   members, so a member moves straight to the target epoch and its target
//!   partitions at its next heartbeat;
//! - a member is fenced (removed, the group epoch bumped) when it leaves
//!   (epoch -1) or its session (`share.session.timeout.ms`) expires; a
//!   heartbeat with an epoch ahead of the member's, or behind it and not its
//!   previous epoch, is FENCED_MEMBER_EPOCH;
//! - `group.share.max.size` bounds the members.
//!
//! Deviations, each said at its spot: a known member joining again with
//! epoch 0 starts over (as [`super::consumer`] does) rather than being
//! fenced; a member is never handed partitions of topics it no longer
//! subscribes to or that no longer exist, even while the target that still
//! names them waits for the assignment interval (Kafka hands the stale
//! target over until the next computation).
//!
//! Invariants (checked by `share_tests.rs`'s proptest): the group epoch,
//! the assignment epoch and each member's epoch (between its own joins)
//! never decrease; member epoch ≤ assignment epoch ≤ group epoch; a member's
//! partitions are partitions of topics it subscribes to.
//!
//! Files: this one owns the types, the config and the small queries;
//! `heartbeat.rs` request validation, joining and heartbeats (and the target
//! assignment); `leave.rs` leaving, fencing and session timeouts;
//! `describe.rs` the ShareGroupDescribe view.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::assignor::Assignment;
use super::error::GroupError;
use super::Millis;

mod describe;
mod heartbeat;
mod leave;

pub use heartbeat::{check_member_id, validate};

/// Member epoch of a member leaving the group.
pub const LEAVE_GROUP_MEMBER_EPOCH: i32 = -1;

/// Kafka's longest member id a share group member may send, in UTF-16
/// units as Java counts (a UUID's string form; the request layer's check,
/// [`check_member_id`]).
pub const MEMBER_ID_CHARS_MAX: usize = 36;

/// Topics as the group sees them: name -> (topic id, partition count).
pub type Topics = BTreeMap<String, (Uuid, i32)>;

/// The settings one share group runs with: its `share.*` group configs,
/// each defaulting to its broker config (docs/share-groups-design.md §2.10),
/// and the broker's `group.share.max.size`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShareGroupConfig {
    /// `share.session.timeout.ms` / `group.share.session.timeout.ms`.
    pub session_timeout_ms: i32,
    /// `share.heartbeat.interval.ms` / `group.share.heartbeat.interval.ms`.
    pub heartbeat_interval_ms: i32,
    /// `share.assignment.interval.ms` / `group.share.assignment.interval.ms`:
    /// the least time between two target assignments; 0 computes one at
    /// every group epoch bump.
    pub assignment_interval_ms: i32,
    /// `group.share.max.size`.
    pub members_max: usize,
}

impl Default for ShareGroupConfig {
    fn default() -> Self {
        ShareGroupConfig {
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 5_000,
            assignment_interval_ms: 1_000,
            members_max: 200,
        }
    }
}

impl ShareGroupConfig {
    /// The settings a share group runs with unless it sets its own: the
    /// broker's `group.share.*` configs.
    pub fn from_broker(c: &crate::config::ShareBrokerConfig) -> Self {
        ShareGroupConfig {
            session_timeout_ms: c.get_i32("group.share.session.timeout.ms"),
            heartbeat_interval_ms: c.get_i32("group.share.heartbeat.interval.ms"),
            assignment_interval_ms: c.get_i32("group.share.assignment.interval.ms"),
            members_max: usize::try_from(c.get("group.share.max.size")).unwrap_or(200),
        }
    }
}

/// A ShareGroupHeartbeat request, with the caller's client id and host.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShareHeartbeatRequest {
    pub group_id: String,
    pub member_id: String,
    pub member_epoch: i32,
    /// Null is "unchanged".
    pub rack_id: Option<String>,
    /// Null is "unchanged".
    pub subscribed_topic_names: Option<Vec<String>>,
    pub client_id: String,
    pub client_host: String,
}

/// A ShareGroupHeartbeat response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareHeartbeatResponse {
    /// The refusal; its message is the response's error message.
    pub error: Option<GroupError>,
    pub member_id: Option<String>,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// The member's partitions by topic id, when they must be sent.
    pub assignment: Option<Vec<(Uuid, Vec<i32>)>>,
}

impl ShareHeartbeatResponse {
    pub fn error(error: GroupError) -> Self {
        ShareHeartbeatResponse {
            error: Some(error),
            member_id: None,
            member_epoch: 0,
            heartbeat_interval_ms: 0,
            assignment: None,
        }
    }
}

/// Kafka's `ShareGroup.ShareGroupState`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShareGroupState {
    Empty,
    Stable,
    Dead,
}

impl ShareGroupState {
    /// The name ListGroups and ShareGroupDescribe show.
    pub fn name(self) -> &'static str {
        match self {
            ShareGroupState::Empty => "Empty",
            ShareGroupState::Stable => "Stable",
            ShareGroupState::Dead => "Dead",
        }
    }
}

/// What the coordinator holds under a group id, for [`check_group`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Existing {
    /// Nothing, or a share group that is Dead (being deleted).
    Nothing,
    /// A live share group.
    Share,
    /// A classic, consumer or streams group.
    OtherType,
}

/// Kafka's group lookup of a ShareGroupHeartbeat (already validated):
/// epoch 0 creates a missing group (`Ok(true)`: the caller creates it),
/// epoch > 0 needs it ("Share group <g> not found."), a leave needs it too
/// ("Group <g> not found."), and a group of another type is never a share
/// group. `Ok(false)`: use the existing share group.
pub fn check_group(
    group_id: &str,
    existing: Existing,
    member_epoch: i32,
) -> Result<bool, GroupError> {
    match existing {
        Existing::Share => Ok(false),
        Existing::OtherType => Err(GroupError::NotAShareGroup {
            group_id: group_id.to_string(),
        }),
        Existing::Nothing if member_epoch == 0 => Ok(true),
        Existing::Nothing if member_epoch == LEAVE_GROUP_MEMBER_EPOCH => {
            Err(GroupError::GroupNotFound {
                group_id: group_id.to_string(),
            })
        }
        Existing::Nothing => Err(GroupError::ShareGroupNotFound {
            group_id: group_id.to_string(),
        }),
    }
}

/// A member as ShareGroupDescribe shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareDescribedMember {
    pub member_id: String,
    pub rack_id: Option<String>,
    pub member_epoch: i32,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    /// (topic id, topic name, partitions).
    pub assignment: Vec<(Uuid, String, Vec<i32>)>,
}

/// A share group as ShareGroupDescribe shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareDescribed {
    pub state: &'static str,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub assignor_name: &'static str,
    pub members: Vec<ShareDescribedMember>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Member {
    member_id: String,
    rack_id: Option<String>,
    client_id: String,
    client_host: String,
    /// SubscribedTopicNames, sorted and de-duplicated.
    subscribed: Vec<String>,
    member_epoch: i32,
    previous_member_epoch: i32,
    assigned: Assignment,
    session_deadline: Millis,
}

impl Member {
    fn new(member_id: &str) -> Self {
        Member {
            member_id: member_id.to_string(),
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            subscribed: Vec::new(),
            member_epoch: 0,
            previous_member_epoch: 0,
            assigned: Assignment::new(),
            session_deadline: 0,
        }
    }
}

/// One share group.
#[derive(Debug)]
pub struct ShareGroup {
    group_id: String,
    config: ShareGroupConfig,
    dead: bool,
    group_epoch: i32,
    assignment_epoch: i32,
    /// When the last target was computed; `None` before the first.
    assignment_timestamp: Option<Millis>,
    members: BTreeMap<String, Member>,
    /// member id -> target partitions (at `assignment_epoch`).
    targets: BTreeMap<String, Assignment>,
    /// Subscribed topics that exist: name -> (id, partition count), as
    /// last seen by a heartbeat.
    subscription_metadata: Topics,
    /// The share-partitions initialised for this group, by topic id: the
    /// only ones a target may assign. The coordinator sets it from the
    /// group's document before each heartbeat ([`ShareGroup::set_initialized`])
    /// and records what the heartbeat added.
    initialized: Initialized,
}

/// Share-partitions by topic id.
pub type Initialized = BTreeMap<Uuid, BTreeSet<i32>>;

fn to_list(a: &Assignment) -> Vec<(Uuid, Vec<i32>)> {
    a.iter()
        .filter(|(_, ps)| !ps.is_empty())
        .map(|(t, ps)| (*t, ps.iter().copied().collect()))
        .collect()
}

fn millis(ms: i32) -> u64 {
    u64::try_from(ms).unwrap_or(0)
}

impl ShareGroup {
    pub fn new(group_id: &str, config: ShareGroupConfig) -> Self {
        ShareGroup {
            group_id: group_id.to_string(),
            config,
            dead: false,
            group_epoch: 1,
            assignment_epoch: 0,
            assignment_timestamp: None,
            members: BTreeMap::new(),
            targets: BTreeMap::new(),
            subscription_metadata: Topics::new(),
            initialized: Initialized::new(),
        }
    }

    /// The share-partitions initialised for this group (what a target may
    /// assign); a heartbeat adds the partitions of the topics it subscribes.
    pub fn initialized(&self) -> &Initialized {
        &self.initialized
    }

    /// Sets the initialised share-partitions: the group's document, which
    /// AlterShareGroupOffsets adds to and DeleteShareGroupOffsets removes
    /// from.
    pub fn set_initialized(&mut self, initialized: Initialized) {
        self.initialized = initialized;
    }

    /// Runs with `config` from now on (a group config changed): session
    /// deadlines already set keep their time.
    pub fn set_config(&mut self, config: ShareGroupConfig) {
        self.config = config;
    }

    pub fn group_id(&self) -> &str {
        &self.group_id
    }

    pub fn group_epoch(&self) -> i32 {
        self.group_epoch
    }

    pub fn assignment_epoch(&self) -> i32 {
        self.assignment_epoch
    }

    pub fn member_count(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    pub fn state(&self) -> ShareGroupState {
        if self.dead {
            ShareGroupState::Dead
        } else if self.members.is_empty() {
            ShareGroupState::Empty
        } else {
            ShareGroupState::Stable
        }
    }

    /// An Empty group's assignment is at the group epoch (a group that
    /// AlterShareGroupOffsets created: Kafka shows it at epochs 1 and 1).
    pub fn settle_empty(&mut self) {
        if self.members.is_empty() {
            self.assignment_epoch = self.group_epoch;
        }
    }

    /// DeleteGroups: an Empty group becomes Dead (the coordinator then drops
    /// it); a group with members is NON_EMPTY_GROUP.
    pub fn mark_dead(&mut self) -> Result<(), GroupError> {
        if !self.members.is_empty() {
            return Err(GroupError::NonEmptyGroup);
        }
        self.dead = true;
        Ok(())
    }

    /// Undoes [`ShareGroup::mark_dead`]: the deletion failed (its file could
    /// not be removed) and the group stays.
    pub fn revive(&mut self) {
        self.dead = false;
    }

    /// The subscribed topics as the last heartbeat saw them (what a target
    /// assignment is computed over).
    pub fn subscription_metadata(&self) -> &Topics {
        &self.subscription_metadata
    }

    /// A member's current partitions, or `None` for an unknown member.
    pub fn member_assignment(&self, member_id: &str) -> Option<&Assignment> {
        self.members.get(member_id).map(|m| &m.assigned)
    }

    /// A member's current epoch, or `None` for an unknown member.
    pub fn member_epoch(&self, member_id: &str) -> Option<i32> {
        self.members.get(member_id).map(|m| m.member_epoch)
    }

    /// A member's subscribed topic names, or `None` for an unknown member.
    pub fn member_subscription(&self, member_id: &str) -> Option<&[String]> {
        self.members.get(member_id).map(|m| m.subscribed.as_slice())
    }

    /// The ids of the members, in order.
    pub fn member_ids(&self) -> impl Iterator<Item = &str> {
        self.members.keys().map(String::as_str)
    }

    /// Every share-partition some member holds now (what the coordinator
    /// records as initialised, design §3.8).
    pub fn assigned_partitions(&self) -> BTreeSet<(Uuid, i32)> {
        self.members
            .values()
            .flat_map(|m| {
                m.assigned
                    .iter()
                    .flat_map(|(t, ps)| ps.iter().map(move |p| (*t, *p)))
            })
            .collect()
    }
}

#[cfg(test)]
mod share_tests;
