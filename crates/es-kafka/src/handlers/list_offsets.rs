//! ListOffsets (v1-10): earliest (-2), latest (-1), max timestamp (-3),
//! earliest local (-4, the same as earliest here: no tiered storage) and
//! offset by timestamp.
//!
//! "Latest" is the high watermark (what consumers may read), for both
//! isolation levels: es has no open transactions yet, so the last stable
//! offset equals it.

use bytes::Bytes;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};

use super::metadata::LEADER_EPOCH;
use super::{blocking, Ctx, RequestError};
use crate::errors::{code, storage_error_code, ResponseError, NONE};

pub const LATEST: i64 = -1;
pub const EARLIEST: i64 = -2;
pub const MAX_TIMESTAMP: i64 = -3;
pub const EARLIEST_LOCAL: i64 = -4;

pub async fn handle(ctx: &Ctx, req: ListOffsetsRequest) -> Result<Option<Bytes>, RequestError> {
    let v = ctx.version;
    let b = ctx.broker.clone();
    let topics = req.topics;
    let results = blocking(move || {
        let mut out = Vec::with_capacity(topics.len());
        for t in topics {
            let topic = b.topic(t.name.0.as_str());
            let mut tr = ListOffsetsTopicResponse::default();
            tr.name = t.name;
            for p in t.partitions {
                let mut pr = ListOffsetsPartitionResponse::default();
                pr.partition_index = p.partition_index;
                pr.timestamp = -1;
                pr.offset = -1;
                let slot = topic.as_ref().and_then(|t| t.partition(p.partition_index));
                let (error, ts, off) = match slot {
                    None => (code(ResponseError::UnknownTopicOrPartition), -1, -1),
                    Some(_) if p.current_leader_epoch > LEADER_EPOCH => {
                        (code(ResponseError::UnknownLeaderEpoch), -1, -1)
                    }
                    Some(s) => match p.timestamp {
                        LATEST => (NONE, -1, s.log.high_watermark() as i64),
                        EARLIEST | EARLIEST_LOCAL => (NONE, -1, s.log.log_start_offset() as i64),
                        MAX_TIMESTAMP => match s.log.max_timestamp() {
                            Ok(Some((o, ts))) => (NONE, ts, o as i64),
                            Ok(None) => (NONE, -1, -1),
                            Err(e) => (storage_error_code(&e), -1, -1),
                        },
                        ts if ts >= 0 => match s.log.offset_for_timestamp(ts) {
                            Ok(Some((o, found))) => (NONE, found, o as i64),
                            Ok(None) => (NONE, -1, -1),
                            Err(e) => (storage_error_code(&e), -1, -1),
                        },
                        // Other negative specs (e.g. -5, earliest pending
                        // upload) name tiered-storage positions es does not have.
                        _ => (NONE, -1, -1),
                    },
                };
                pr.error_code = error;
                pr.timestamp = ts;
                pr.offset = off;
                if v >= 4 {
                    pr.leader_epoch = if error == NONE { LEADER_EPOCH } else { -1 };
                }
                tr.partitions.push(pr);
            }
            out.push(tr);
        }
        out
    })
    .await?;
    let mut r = ListOffsetsResponse::default();
    r.topics = results;
    ctx.respond(&r)
}
