//! OffsetForLeaderEpoch (v2-4): every partition has had one leader epoch,
//! 0, since it was created, so epoch 0 ends at the log end offset and any
//! later epoch is unknown (Kafka answers those with UNDEFINED, -1/-1).
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
                    if p.leader_epoch <= LEADER_EPOCH {
                        e.leader_epoch = LEADER_EPOCH;
                        e.end_offset = s.log.log_end_offset() as i64;
                    }
                }
            }
            tr.partitions.push(e);
        }
        r.topics.push(tr);
    }
    ctx.respond(&r)
}
