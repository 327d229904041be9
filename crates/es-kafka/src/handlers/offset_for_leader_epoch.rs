//! OffsetForLeaderEpoch (v2-4). With one replica per partition a log is
//! never truncated, so every record is stamped with epoch 0 and every epoch
//! from 0 to the partition's current leader epoch ends at the log end
//! offset: an epoch in that range is answered with epoch 0 and the log end
//! offset; a later epoch and -1 are unknown (Kafka answers those with
//! UNDEFINED, -1/-1), and an epoch below -1 precedes epoch 0 (Kafka answers
//! it with itself and the start offset of epoch 0, the log start).
//! Clients use it after a leader change to detect truncation; here there is
//! never any. A partition led elsewhere, or a stale or future current
//! leader epoch, is answered as [`super::route`] says.

use bytes::Bytes;
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};

use super::route::route;
use super::{Ctx, RequestError};
use crate::errors::{code, NONE};

pub fn handle(ctx: &Ctx, req: OffsetForLeaderEpochRequest) -> Result<Option<Bytes>, RequestError> {
    let b = &ctx.broker;
    let image = b.image();
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
                    // Kafka's LeaderEpochFileCache.endOffsetFor: -1 is
                    // UNDEFINED; an epoch below every known one gets itself
                    // and the start of the first epoch (the log start).
                    if (0..=r.leader_epoch).contains(&p.leader_epoch) {
                        e.leader_epoch = 0;
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
