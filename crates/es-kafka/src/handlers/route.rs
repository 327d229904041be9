//! Whether a partition request may be served here, checked as Kafka's
//! `ReplicaManager.getPartitionOrError` and `Partition.localLogWithEpoch`
//! check it:
//!
//! 1. a partition the metadata does not have: UNKNOWN_TOPIC_OR_PARTITION;
//! 2. a partition whose replicas do not include this broker:
//!    NOT_LEADER_OR_FOLLOWER;
//! 3. the request's current leader epoch (-1 means none given): below the
//!    partition's, FENCED_LEADER_EPOCH; above it, UNKNOWN_LEADER_EPOCH;
//! 4. this broker is not the leader (it is fenced, so the partition has
//!    none): NOT_LEADER_OR_FOLLOWER.
//!
//! A NOT_LEADER_OR_FOLLOWER answer carries the leader the client should
//! use, when there is one (KIP-951: Produce v10+ and Fetch v16+ return it
//! with its endpoint, so the client need not refresh its metadata first).

use std::collections::BTreeMap;
use std::sync::Arc;

use es_meta::MetaImage;

use crate::broker::{Broker, Leadership, NodeEndpoint};
use crate::errors::ResponseError;
use crate::topics::{PartitionSlot, Topic};

/// The leader epoch that means "not given" in a request.
pub const NO_EPOCH: i32 = -1;
/// The leader epoch of records written before the partition's leader-epoch
/// history has an entry (a node without the metadata quorum, or data from
/// before the cluster): epoch 0, as Kafka stamps a new partition's first
/// leader's batches.
pub const RECORD_LEADER_EPOCH: i32 = 0;

/// A partition this broker leads, with its current leader epoch.
#[derive(Debug)]
pub struct Routed {
    pub slot: Arc<PartitionSlot>,
    pub leader_epoch: i32,
}

/// Why a partition request is not served here.
#[derive(Debug)]
pub struct Misrouted {
    pub error: ResponseError,
    /// The leader and its endpoint, for NOT_LEADER_OR_FOLLOWER.
    pub leader: Option<Box<(Leadership, NodeEndpoint)>>,
    /// The partition, hosted here, when only the request's leader epoch was
    /// wrong (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH): Fetch still
    /// answers its offsets.
    pub hosted: Option<Arc<PartitionSlot>>,
}

impl Misrouted {
    fn new(error: ResponseError) -> Self {
        Misrouted {
            error,
            leader: None,
            hosted: None,
        }
    }

    fn epoch(error: ResponseError, slot: Arc<PartitionSlot>) -> Self {
        Misrouted {
            hosted: Some(slot),
            ..Misrouted::new(error)
        }
    }

    /// A partition the metadata does not have.
    pub fn unknown() -> Self {
        Misrouted::new(ResponseError::UnknownTopicOrPartition)
    }
}

/// Checks one partition request: the partition if it is served here.
pub fn route(
    b: &Broker,
    image: Option<&MetaImage>,
    topic: Option<&Arc<Topic>>,
    partition: i32,
    current_leader_epoch: i32,
) -> Result<Routed, Misrouted> {
    let Some(topic) = topic.filter(|t| t.has_partition(partition)) else {
        return Err(Misrouted::new(ResponseError::UnknownTopicOrPartition));
    };
    let not_leader = || Misrouted {
        leader: b.leader_hint(image, &topic.name, partition).map(Box::new),
        ..Misrouted::new(ResponseError::NotLeaderOrFollower)
    };
    let Some(slot) = topic.partition(partition) else {
        return Err(not_leader());
    };
    let l = b.leader_and_epoch(image, &topic.name, partition);
    let leader_epoch = l.map_or(0, |(_, epoch)| epoch);
    if current_leader_epoch != NO_EPOCH {
        if current_leader_epoch < leader_epoch {
            return Err(Misrouted::epoch(ResponseError::FencedLeaderEpoch, slot));
        }
        if current_leader_epoch > leader_epoch {
            return Err(Misrouted::epoch(ResponseError::UnknownLeaderEpoch, slot));
        }
    }
    if l.is_some_and(|(leader, _)| leader != b.node_id()) {
        return Err(not_leader());
    }
    Ok(Routed { slot, leader_epoch })
}

/// The endpoints of the leaders named in a response's NOT_LEADER_OR_FOLLOWER
/// answers, once each, by node id (KIP-951's `node_endpoints`).
#[derive(Debug, Default)]
pub struct LeaderEndpoints(BTreeMap<i32, NodeEndpoint>);

impl LeaderEndpoints {
    /// Notes the leader of a misrouted partition.
    pub fn note(&mut self, m: &Misrouted) {
        if let Some((_, e)) = m.leader.as_deref() {
            self.0.insert(e.id, e.clone());
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn into_endpoints(self) -> impl Iterator<Item = NodeEndpoint> {
        self.0.into_values()
    }
}
