//! The group APIs: FindCoordinator (v0-6), JoinGroup (v0-9), SyncGroup
//! (v0-5), Heartbeat (v0-4), LeaveGroup (v0-5), DescribeGroups (v0-6),
//! ListGroups (v0-5), DeleteGroups (v0-2), OffsetCommit (v2-9), OffsetFetch
//! (v1-9), OffsetDelete (v0), ConsumerGroupHeartbeat (v0-1),
//! ConsumerGroupDescribe (v0-1), ShareGroupHeartbeat (v1),
//! ShareGroupDescribe (v1), DescribeShareGroupOffsets (v0-1),
//! AlterShareGroupOffsets (v0) and DeleteShareGroupOffsets (v0).
//!
//! Each handler converts between the wire messages and the coordinator
//! ([`crate::groups`]), does the checks Kafka's `KafkaApis` and
//! `GroupCoordinatorService` do before the coordinator (empty group ids,
//! session timeout bounds, unknown topics and partitions, then whether this
//! broker coordinates the group: [`Broker::owns_group`], NOT_COORDINATOR
//! where Kafka puts it), and sets every field only in the versions that
//! carry it.
//!
//! Ordering: JoinGroup and SyncGroup park until the group answers, and
//! OffsetCommit / OffsetFetch / OffsetDelete wait for their group's document
//! to be durable. They take their connection [`Turn`] for the state change
//! (so it happens in the order the client sent its requests), release it,
//! and only then wait — a parked JoinGroup never holds up the connection's
//! heartbeats, as with Fetch.
//!
//! Layout: one file per API or per family that shares its state
//! (`find_coordinator`, `join_group`, `sync_group`, `heartbeat`,
//! `leave_group`, `group_admin` for DescribeGroups / ListGroups /
//! DeleteGroups, `offsets` for OffsetCommit / OffsetFetch / OffsetDelete,
//! `consumer_group` for the KIP-848 APIs, `share_group` for the KIP-932
//! membership ones, `share_offsets` for their offsets admin, `share_leaders`
//! for how it reaches the share-partitions' leaders); this file holds the small helpers
//! they share and re-exports the handlers for the API dispatch.

use kafka_protocol::messages::GroupId;
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::Ctx;
use crate::broker::Broker;
use crate::groups::consumer::TopicView;
/// Group operations a broker without ACLs allows, as Kafka's bit set of
/// `AclEntry.supportedOperations(GROUP)`: READ(3), DELETE(6), DESCRIBE(8),
/// and since group configs (KIP-848) DESCRIBE_CONFIGS(10), ALTER_CONFIGS(11).
pub const GROUP_OPERATIONS_ALL: i32 = (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11);

fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

fn group_id(g: &GroupId) -> String {
    g.0.to_string()
}

fn client_id(ctx: &Ctx) -> String {
    ctx.header
        .client_id
        .as_ref()
        .map(|c| c.to_string())
        .unwrap_or_default()
}

/// The client's address as Kafka shows it ("/host").
fn client_host(ctx: &Ctx) -> String {
    ctx.client_host()
}

/// Topic ids and sizes from the broker's registry.
struct BrokerTopics<'a>(&'a Broker);

impl TopicView for BrokerTopics<'_> {
    fn by_name(&self, name: &str) -> Option<(Uuid, i32)> {
        self.0.topic(name).map(|t| (t.id, t.partition_count()))
    }
    fn name_of(&self, id: Uuid) -> Option<String> {
        self.0.topic_by_id(id).map(|t| t.name.clone())
    }
    /// Every topic, internal ones included: Kafka 4 matches regexes against
    /// all the topics of its metadata image (`refreshRegularExpressions`;
    /// only DESCRIBE ACLs filter, and es has none), so a regex that matches
    /// `__consumer_offsets` gets it assigned once it exists.
    fn names(&self) -> Vec<String> {
        self.0.topics().iter().map(|t| t.name.clone()).collect()
    }
    /// A commutative sum over the topic ids: ids are random and new for
    /// every created topic, so a created, deleted or re-created topic
    /// changes it, and the same set of topics always gives the same value.
    fn generation(&self) -> u64 {
        self.0.topics().iter().fold(0u64, |g, t| {
            let (hi, lo) = t.id.as_u64_pair();
            g.wrapping_add(hi ^ lo.rotate_left(29))
        })
    }
}

mod consumer_group;
mod find_coordinator;
mod group_admin;
mod heartbeat;
mod join_group;
mod leave_group;
mod offsets;
mod share_group;
mod share_leaders;
mod share_offsets;
mod sync_group;

pub use consumer_group::{consumer_group_describe, consumer_group_heartbeat};
pub use find_coordinator::find_coordinator;
pub use group_admin::{delete_groups, describe_groups, list_groups};
pub use heartbeat::heartbeat;
pub use join_group::join_group;
pub use leave_group::leave_group;
pub use offsets::{offset_commit, offset_delete, offset_fetch};
pub use share_group::{share_group_describe, share_group_heartbeat};
pub use share_offsets::{
    alter_share_group_offsets, delete_share_group_offsets, describe_share_group_offsets,
};
pub use sync_group::sync_group;

#[cfg(test)]
mod groups_tests;

#[cfg(test)]
mod share_group_tests;
