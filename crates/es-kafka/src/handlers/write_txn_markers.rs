//! WriteTxnMarkers (API 27, v1): the inter-broker request a transaction
//! coordinator sends to each partition leader when a transaction completes
//! ([`crate::txn::markers`]).
//!
//! For each marker (producer id and epoch, COMMIT or ABORT) and each
//! partition named:
//! - a partition this broker leads gets the control record
//!   (`append_marker`), answered once it is durable;
//! - a `__consumer_offsets` partition this broker leads settles the
//!   transactional offsets TxnOffsetCommit left here for that producer
//!   ([`crate::txn::remote_offsets`]): committed durably on COMMIT,
//!   dropped on ABORT, for every group the partition coordinates;
//! - a partition led by another broker is NOT_LEADER_OR_FOLLOWER, one the
//!   metadata does not know UNKNOWN_TOPIC_OR_PARTITION (the coordinator
//!   looks the leader up again and resends).

use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_protocol::messages::write_txn_markers_request::WritableTxnMarker;
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{WriteTxnMarkersRequest, WriteTxnMarkersResponse};

use super::{blocking, Ctx, RequestError};
use crate::broker::{key_partition, Broker};
use crate::errors::{code, storage_error_code, ResponseError, NONE};
use crate::topics::CONSUMER_OFFSETS_TOPIC;

pub async fn write_txn_markers(
    ctx: &Ctx,
    req: WriteTxnMarkersRequest,
) -> Result<Option<Bytes>, RequestError> {
    let b = ctx.broker.clone();
    let markers = blocking(move || {
        req.markers
            .into_iter()
            .map(|m| write_one(&b, m))
            .collect::<Vec<_>>()
    })
    .await?;
    let mut r = WriteTxnMarkersResponse::default();
    r.markers = markers;
    ctx.respond(&r)
}

/// One marker's partitions. Blocking (waits for the markers' fsync).
fn write_one(b: &Broker, m: WritableTxnMarker) -> WritableTxnMarkerResult {
    let (pid, epoch, commit) = (m.producer_id.0, m.producer_epoch, m.transaction_result);
    let now = b.clock().now_ms();
    let image = b.image();
    // Per (topic index, partition): the code, or the offset to wait for.
    let mut codes: Vec<Vec<(i32, i16)>> = Vec::with_capacity(m.topics.len());
    let mut to_sync = Vec::new();
    for (ti, t) in m.topics.iter().enumerate() {
        let topic = t.name.0.as_str();
        let mut parts = Vec::with_capacity(t.partition_indexes.len());
        for &p in &t.partition_indexes {
            let c = match b.leadership(image.as_deref(), topic, p) {
                None => code(ResponseError::UnknownTopicOrPartition),
                Some(l) if l.leader != b.node_id() => code(ResponseError::NotLeaderOrFollower),
                Some(_) if topic == CONSUMER_OFFSETS_TOPIC => {
                    let count = image
                        .as_deref()
                        .and_then(|i| i.topics.get(topic))
                        .map_or(crate::config::OFFSETS_TOPIC_PARTITIONS, |t| {
                            i32::try_from(t.partitions.len()).unwrap_or(i32::MAX)
                        });
                    let owns = |g: &str| key_partition(g, count) == p;
                    match b.txn().settle_remote_offsets(pid, epoch, commit, &owns) {
                        Ok(()) => NONE,
                        Err(e) => e.code(),
                    }
                }
                Some(_) => match b.topic(topic).and_then(|t| t.partition(p)) {
                    None => code(ResponseError::NotLeaderOrFollower),
                    Some(slot) => {
                        match slot
                            .log
                            .append_marker(pid, epoch, commit, m.coordinator_epoch, now)
                        {
                            Ok(info) => {
                                to_sync.push((ti, p, slot.log.clone(), info.last_offset + 1));
                                NONE
                            }
                            Err(e) => storage_error_code(&e),
                        }
                    }
                },
            };
            parts.push((p, c));
        }
        codes.push(parts);
    }
    for (ti, p, log, end) in to_sync {
        if let Err(e) = log.wait_durable(end) {
            if let Some(slot) = codes[ti].iter_mut().find(|(q, _)| *q == p) {
                slot.1 = storage_error_code(&e);
            }
        }
    }
    let mut by_name: BTreeMap<usize, WritableTxnMarkerTopicResult> = BTreeMap::new();
    for (ti, (t, parts)) in m.topics.into_iter().zip(codes).enumerate() {
        let mut tr = WritableTxnMarkerTopicResult::default();
        tr.name = t.name;
        tr.partitions = parts
            .into_iter()
            .map(|(p, c)| {
                let mut pr = WritableTxnMarkerPartitionResult::default();
                pr.partition_index = p;
                pr.error_code = c;
                pr
            })
            .collect();
        by_name.insert(ti, tr);
    }
    let mut r = WritableTxnMarkerResult::default();
    r.producer_id = m.producer_id;
    r.topics = by_name.into_values().collect();
    r
}
