//! OffsetForLeaderEpoch (v2-4): where a leader epoch ends in this leader's
//! log, from the partition's leader-epoch history (Kafka's
//! `LeaderEpochFileCache.endOffsetFor`): followers truncate by it before
//! fetching from a new leader, consumers use it after a leader change to
//! detect truncation. A partition whose history is empty (written before
//! any leader epoch was recorded, or on a node without the metadata quorum)
//! has all its records in epoch 0: an epoch from 0 to the partition's
//! current leader epoch is answered with epoch 0 and the log end offset; a
//! later epoch and -1 are unknown (UNDEFINED, -1/-1), and an epoch below -1
//! precedes epoch 0 (itself and the log start). A partition led elsewhere,
//! or a stale or future current leader epoch, is answered as
//! [`super::route`] says; a follower asking (replica_id >= 0) gets the same
//! answer.

use bytes::Bytes;
use es_auth::acl::{AclOperation, ResourceType};
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};

use super::route::route;
use super::{Ctx, RequestError};
use crate::errors::{code, ResponseError, NONE};

pub fn handle(ctx: &Ctx, req: OffsetForLeaderEpochRequest) -> Result<Option<Bytes>, RequestError> {
    let b = &ctx.broker;
    let image = b.image();
    let mut r = OffsetForLeaderEpochResponse::default();
    // Brokers (CLUSTER_ACTION) may ask about any partition; clients need
    // DESCRIBE on the topic.
    let cluster_action = ctx.allowed_on_cluster(AclOperation::ClusterAction);
    for t in req.topics {
        let denied = !cluster_action
            && !ctx.allowed(
                AclOperation::Describe,
                ResourceType::Topic,
                t.topic.0.as_str(),
            );
        let topic = b.topic(t.topic.0.as_str());
        let mut tr = OffsetForLeaderTopicResult::default();
        tr.topic = t.topic;
        for p in t.partitions {
            let mut e = EpochEndOffset::default();
            e.partition = p.partition;
            e.leader_epoch = -1;
            e.end_offset = -1;
            if denied {
                e.error_code = code(ResponseError::TopicAuthorizationFailed);
                tr.partitions.push(e);
                continue;
            }
            let routed = route(
                b,
                image.as_deref(),
                topic.as_ref(),
                p.partition,
                p.current_leader_epoch,
            );
            match routed {
                Err(m) => e.error_code = code(m.error),
                Ok(r) => {
                    let s = r.slot;
                    e.error_code = NONE;
                    let storage = s.log.storage();
                    if storage.latest_leader_epoch().is_none() {
                        // Kafka's LeaderEpochFileCache.endOffsetFor: -1 is
                        // UNDEFINED; an epoch below every known one gets
                        // itself and the start of the first epoch (the log
                        // start).
                        if (0..=r.leader_epoch).contains(&p.leader_epoch) {
                            e.leader_epoch = 0;
                            e.end_offset = s.log.log_end_offset() as i64;
                        } else if p.leader_epoch < -1 {
                            e.leader_epoch = p.leader_epoch;
                            e.end_offset = s.log.log_start_offset() as i64;
                        }
                    } else {
                        let (epoch, end) = storage.end_offset_for_epoch(p.leader_epoch);
                        e.leader_epoch = epoch;
                        e.end_offset = end;
                    }
                }
            }
            tr.partitions.push(e);
        }
        r.topics.push(tr);
    }
    ctx.respond(&r)
}
