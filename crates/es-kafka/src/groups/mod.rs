//! The group coordinator: consumer groups, their rebalances and their
//! committed offsets, for the one node that coordinates every group.
//!
//! Layers, following "sans-io cores, thin async shells":
//! - [`classic`]: the classic group state machine (Empty, PreparingRebalance,
//!   CompletingRebalance, Stable, Dead) as Kafka 4's `GroupMetadataManager` /
//!   `ClassicGroup` define it. It takes events (join, sync, heartbeat, leave,
//!   offset-commit validation, timer ticks at a given millisecond) and emits
//!   responses for parked requests; it owns no clock, no channel, no file.
//! - [`consumer`]: the KIP-848 consumer group (ConsumerGroupHeartbeat) with
//!   the server-side [`assignor`]s `uniform` and `range`, also sans-io.
//! - [`share`]: the KIP-932 share group (ShareGroupHeartbeat: join, leave,
//!   epochs, session timeouts, no revocation) with its `simple` assignor
//!   [`share_assignor`], both sans-io, run by the coordinator like the
//!   others (the share-partitions' record states are `crate::shares`').
//! - [`store`]: the on-disk form, `data/groups/<group>.json`, written with
//!   es-storage's atomic replace, and its loading at startup.
//! - [`coordinator`]: the async shell. It owns every group behind one short
//!   lock, parks JoinGroup/SyncGroup callers on oneshot channels, runs one
//!   timer task that ticks groups at their next deadline, and makes offset
//!   commits durable with at most one writer per group file (later commits
//!   coalesce into the next write).
//!
//! Time in the cores is "milliseconds since the coordinator started"
//! ([`Millis`]), so tests drive timeouts with a fake clock and no sleeps.

pub mod assignor;
pub mod classic;
pub mod consumer;
pub mod coordinator;
pub mod error;
pub mod share;
pub mod share_assignor;
pub mod store;

pub use coordinator::Coordinator;

use crate::config::GroupOverrides;

/// A monotonic instant in milliseconds, relative to the coordinator's start.
pub type Millis = u64;

/// Identifies a parked request (a JoinGroup or SyncGroup waiting for the
/// group), so that the core can answer it later.
pub type Token = u64;

/// Kafka's `ConsumerProtocol.PROTOCOL_TYPE`: the protocol type of consumers.
pub const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

/// Kafka's `ShareGroup.PROTOCOL_TYPE`: the protocol type ListGroups shows
/// for a share group.
pub const SHARE_PROTOCOL_TYPE: &str = "share";

/// Group settings, named after Kafka's broker configs. Defaults are Kafka 4's
/// except where noted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupConfig {
    /// `group.min.session.timeout.ms`.
    pub min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms`.
    pub max_session_timeout_ms: i32,
    /// `group.initial.rebalance.delay.ms`. Kafka's default is 3000: a new
    /// group waits 3 s (extended while members keep arriving, up to the
    /// rebalance timeout) before its first generation, so that a fleet of
    /// consumers starting together lands in one generation. es defaults to
    /// [`INITIAL_REBALANCE_DELAY_MS`] = 0 (what Kafka's own test setups use):
    /// a single-node broker is mostly used by tests and small deployments
    /// where the 3 s wait is pure latency; late members trigger a normal
    /// rebalance instead.
    pub initial_rebalance_delay_ms: u64,
    /// `group.classic.new.member.join.timeout` (internal, 5 minutes): how long
    /// a brand-new member's parked JoinGroup may wait.
    pub new_member_join_timeout_ms: u64,
    /// `group.classic.max.size` / `group.consumer.max.size`. Kafka's default is
    /// unbounded; es bounds the members (and pending members) of one group so
    /// a misbehaving client cannot grow a group without limit.
    pub members_max: usize,
    /// `offset.metadata.max.bytes`.
    pub offset_metadata_bytes_max: usize,
    /// `group.consumer.session.timeout.ms` (KIP-848 groups).
    pub consumer_session_timeout_ms: i32,
    /// `group.consumer.heartbeat.interval.ms` (KIP-848 groups).
    pub consumer_heartbeat_interval_ms: i32,
    /// `group.consumer.assignment.interval.ms` (KIP-1263, Kafka 4.3+): the
    /// least time between two target assignments of a KIP-848 group. A
    /// heartbeat that bumps the group epoch sooner keeps the last target
    /// (the group is "Assigning"); a heartbeat after the interval computes
    /// the next one. 0 computes it at every bump, as Kafka before 4.3 did.
    pub consumer_assignment_interval_ms: i32,
    /// `group.share.session.timeout.ms`, `group.share.heartbeat.interval.ms`,
    /// `group.share.assignment.interval.ms` and `group.share.max.size`: the
    /// share groups' settings ([`share::ShareGroupConfig`]).
    pub share: share::ShareGroupConfig,
}

impl GroupConfig {
    /// These settings with a group's own configs (the GROUP config
    /// resource) in place of the broker's.
    pub fn with_overrides(mut self, o: &GroupOverrides) -> GroupConfig {
        if let Some(v) = o.consumer_session_timeout_ms {
            self.consumer_session_timeout_ms = v;
        }
        if let Some(v) = o.consumer_heartbeat_interval_ms {
            self.consumer_heartbeat_interval_ms = v;
        }
        if let Some(v) = o.consumer_assignment_interval_ms {
            self.consumer_assignment_interval_ms = v;
        }
        if let Some(v) = o.share_session_timeout_ms {
            self.share.session_timeout_ms = v;
        }
        if let Some(v) = o.share_heartbeat_interval_ms {
            self.share.heartbeat_interval_ms = v;
        }
        if let Some(v) = o.share_assignment_interval_ms {
            self.share.assignment_interval_ms = v;
        }
        self
    }
}

/// es's `group.initial.rebalance.delay.ms` default (Kafka's is 3000); see
/// [`GroupConfig::initial_rebalance_delay_ms`].
pub const INITIAL_REBALANCE_DELAY_MS: u64 = 0;

/// Most members (plus members pending their second join) one group holds.
pub const GROUP_MEMBERS_MAX: usize = 10_000;

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig {
            min_session_timeout_ms: 6_000,
            max_session_timeout_ms: 1_800_000,
            initial_rebalance_delay_ms: INITIAL_REBALANCE_DELAY_MS,
            new_member_join_timeout_ms: 5 * 60 * 1000,
            members_max: GROUP_MEMBERS_MAX,
            offset_metadata_bytes_max: 4096,
            consumer_session_timeout_ms: 45_000,
            consumer_heartbeat_interval_ms: 5_000,
            consumer_assignment_interval_ms: 1_000,
            share: share::ShareGroupConfig::default(),
        }
    }
}

/// Generates a member id as Kafka does: `<client id or instance id>-<uuid>`.
pub fn new_member_id(client_id: &str, group_instance_id: Option<&str>) -> String {
    format!(
        "{}-{}",
        group_instance_id.unwrap_or(client_id),
        uuid::Uuid::new_v4()
    )
}
