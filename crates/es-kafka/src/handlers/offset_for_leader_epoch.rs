//! OffsetForLeaderEpoch (v2-4): every partition has had one leader epoch,
//! 0, since it was created, so epoch 0 ends at the log end offset, any
//! later epoch and -1 are unknown (Kafka answers those with UNDEFINED,
//! -1/-1), and an epoch below -1 precedes epoch 0 (Kafka answers it with
//! itself and the start offset of epoch 0, the log start).
//! Clients use it after a leader change to detect truncation; here there is
//! never any.

use bytes::Bytes;
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};

use super::metadata::LEADER_EPOCH;
use super::{Ctx, RequestError};
use crate::errors::{code, ResponseError, NONE};

pub fn handle(ctx: &Ctx, req: OffsetForLeaderEpochRequest) -> Result<Option<Bytes>, RequestError> {
    let b = &ctx.broker;
    let mut r = OffsetForLeaderEpochResponse::default();
    for t in req.topics {
        let topic = b.topic(t.topic.0.as_str());
        let mut tr = OffsetForLeaderTopicResult::default();
        tr.topic = t.topic;
        for p in t.partitions {
            let mut e = EpochEndOffset::default();
            e.partition = p.partition;
            e.leader_epoch = -1;
            e.end_offset = -1;
            match topic.as_ref().and_then(|t| t.partition(p.partition)) {
                None => e.error_code = code(ResponseError::UnknownTopicOrPartition),
                Some(_) if p.current_leader_epoch > LEADER_EPOCH => {
                    e.error_code = code(ResponseError::UnknownLeaderEpoch)
                }
                Some(s) => {
                    e.error_code = NONE;
                    // Kafka's LeaderEpochFileCache.endOffsetFor: -1 is
                    // UNDEFINED; an epoch below every known one gets itself
                    // and the start of the first epoch (the log start).
                    if p.leader_epoch == LEADER_EPOCH {
                        e.leader_epoch = LEADER_EPOCH;
                        e.end_offset = s.log.log_end_offset() as i64;
                    } else if p.leader_epoch < -1 {
                        e.leader_epoch = p.leader_epoch;
                        e.end_offset = s.log.log_start_offset() as i64;
                    }
                }
            }
            tr.partitions.push(e);
        }
        r.topics.push(tr);
    }
    ctx.respond(&r)
}
