//! WriteTxnMarkers (API 27, v1): the inter-broker request a transaction
//! coordinator sends to each partition leader when a transaction completes
//! ([`crate::txn::markers`]).
//!
//! For each marker (producer id and epoch, COMMIT or ABORT) and each
//! partition named:
//! - a partition this broker leads gets the control record
//!   (`append_marker`), answered once it is on every in-sync replica's
//!   disk, as an acks=all produce (Kafka appends markers with acks=-1), so
//!   that a marker is never lost with its leader while the coordinator
//!   believes it written;
//! - a `__consumer_offsets` partition this broker leads settles the
//!   transactional offsets TxnOffsetCommit left here for that producer
//!   ([`crate::txn::remote_offsets`]): committed durably on COMMIT,
//!   dropped on ABORT, for every group the partition coordinates;
//! - a partition led by another broker is NOT_LEADER_OR_FOLLOWER, one the
//!   metadata does not know UNKNOWN_TOPIC_OR_PARTITION (the coordinator
//!   looks the leader up again and resends).

use bytes::Bytes;
use es_auth::acl::AclOperation;
use kafka_protocol::messages::write_txn_markers_request::WritableTxnMarker;
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{WriteTxnMarkersRequest, WriteTxnMarkersResponse};

use super::{blocking, Ctx, RequestError};
use crate::broker::Broker;
use crate::errors::{code, storage_error_code, ResponseError, NONE};
use crate::partition_log::AckError;
use crate::replica::WaitError;
use crate::topics::CONSUMER_OFFSETS_TOPIC;
use crate::txn::coordinator::MARKER_ACK_TIMEOUT;

pub async fn write_txn_markers(
    ctx: &Ctx,
    req: WriteTxnMarkersRequest,
) -> Result<Option<Bytes>, RequestError> {
    // Only brokers write markers: CLUSTER_ACTION (or ALTER) on the cluster,
    // else every partition is refused.
    if !ctx.allowed_on_cluster(AclOperation::ClusterAction)
        && !ctx.allowed_on_cluster(AclOperation::Alter)
    {
        let mut r = WriteTxnMarkersResponse::default();
        r.markers = req
            .markers
            .iter()
            .map(|m| {
                let mut res = WritableTxnMarkerResult::default();
                res.producer_id = m.producer_id;
                res.topics = m
                    .topics
                    .iter()
                    .map(|t| {
                        let mut tr = WritableTxnMarkerTopicResult::default();
                        tr.name = t.name.clone();
                        tr.partitions = t
                            .partition_indexes
                            .iter()
                            .map(|&p| {
                                let mut pr = WritableTxnMarkerPartitionResult::default();
                                pr.partition_index = p;
                                pr.error_code = code(ResponseError::ClusterAuthorizationFailed);
                                pr
                            })
                            .collect();
                        tr
                    })
                    .collect();
                res
            })
            .collect();
        return ctx.respond(&r);
    }
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

/// One marker's partitions. Blocking (waits for the markers to be
/// replicated).
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
                    let owns = |g: &str| b.offsets_partition(g) == p;
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
                                let min_isr =
                                    b.topic(topic).map_or(1, |t| t.rules().min_insync_replicas);
                                let log = slot.log.clone();
                                to_sync.push((ti, p, log, info.last_offset + 1, min_isr));
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
    for (ti, p, log, end, min_isr) in to_sync {
        if let Err(e) = log.wait_acknowledged(end, min_isr, MARKER_ACK_TIMEOUT) {
            tracing::warn!(producer_id = pid, partition = p, error = %e, "a transaction marker was not acknowledged");
            if let Some(slot) = codes[ti].iter_mut().find(|(q, _)| *q == p) {
                slot.1 = ack_error_code(&e);
            }
        }
    }
    let topics = m
        .topics
        .into_iter()
        .zip(codes)
        .map(|(t, parts)| {
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
            tr
        })
        .collect();
    let mut r = WritableTxnMarkerResult::default();
    r.producer_id = m.producer_id;
    r.topics = topics;
    r
}

/// The partition's error for a marker that was not acknowledged; the
/// coordinator sends it again.
fn ack_error_code(e: &AckError) -> i16 {
    match e {
        AckError::Wait(WaitError::Storage(e)) => storage_error_code(e),
        AckError::Wait(WaitError::NotLeader) => code(ResponseError::NotLeaderOrFollower),
        AckError::Wait(WaitError::NotEnoughReplicasAfterAppend) => {
            code(ResponseError::NotEnoughReplicasAfterAppend)
        }
        AckError::TimedOut => code(ResponseError::RequestTimedOut),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use crate::broker::key_partition;

    use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
    use kafka_protocol::messages::{ApiKey, GroupId, OffsetFetchRequest, OffsetFetchResponse};

    use super::*;
    use crate::broker::txn_cluster::write_txn_markers_request;
    use crate::handlers::wire_client::{c, call, open, s, tn};
    use crate::txn::markers::MarkerBatch;
    use crate::txn::{TopicPartition, TxnOffset};

    fn markers(pid: i64, commit: bool, tps: &[(&str, i32)]) -> WriteTxnMarkersRequest {
        write_txn_markers_request(&MarkerBatch {
            producer_id: pid,
            producer_epoch: 0,
            commit,
            coordinator_epoch: 0,
            partitions: tps
                .iter()
                .map(|(t, p)| TopicPartition::new(*t, *p))
                .collect(),
        })
    }

    fn codes(r: &WriteTxnMarkersResponse) -> Vec<(String, i32, i16)> {
        r.markers[0]
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|p| (t.name.0.to_string(), p.partition_index, p.error_code))
            })
            .collect()
    }

    async fn committed(b: &std::sync::Arc<Broker>, group: &str) -> i64 {
        let mut t = OffsetFetchRequestTopic::default();
        t.name = tn("t");
        t.partition_indexes = vec![0];
        let mut req = OffsetFetchRequest::default();
        req.group_id = GroupId(s(group));
        req.topics = Some(vec![t]);
        let r: OffsetFetchResponse = call(b, ApiKey::OffsetFetch, 7, &req).await;
        r.topics[0].partitions[0].committed_offset
    }

    /// The group's broker takes a TxnOffsetCommit of `g`'s offset of t-0
    /// for producer `pid`, whose transaction another broker coordinates.
    async fn hold_offset(b: &std::sync::Arc<Broker>, pid: i64, offset: i64) {
        let b = b.clone();
        tokio::task::spawn_blocking(move || {
            let o = TxnOffset {
                group: "g".into(),
                topic: "t".into(),
                partition: 0,
                offset,
                leader_epoch: -1,
                metadata: None,
                member_id: String::new(),
                generation_id: -1,
                instance_id: None,
            };
            b.txn()
                .txn_offset_commit_remote(pid, 0, "g", "", None, -1, vec![o])
        })
        .await
        .expect("join")
        .expect("offsets kept");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn markers_are_written_here_and_offsets_settled() {
        let dir = tempfile::tempdir().expect("tmp");
        let b = open(dir.path()).await;
        b.create_topic("t", 1, BTreeMap::new(), false)
            .await
            .expect("create");
        let offsets = b.offsets_topic().await.expect("offsets topic");
        let op = key_partition("g", offsets.partition_count());
        // The group's broker took a TxnOffsetCommit for producer 5 whose
        // transaction another broker coordinates.
        hold_offset(&b, 5, 3).await;
        assert!(b.txn().has_pending_offset("g", "t", 0));
        assert!(committed(&b, "g").await < 0);
        let req = markers(
            5,
            true,
            &[("t", 0), ("nope", 0), (CONSUMER_OFFSETS_TOPIC, op)],
        );
        let r: WriteTxnMarkersResponse = call(&b, ApiKey::WriteTxnMarkers, 1, &req).await;
        assert_eq!(
            codes(&r),
            vec![
                (CONSUMER_OFFSETS_TOPIC.to_string(), op, NONE),
                (
                    "nope".to_string(),
                    0,
                    c(ResponseError::UnknownTopicOrPartition)
                ),
                ("t".to_string(), 0, NONE),
            ]
        );
        let part = b
            .topic("t")
            .and_then(|t| t.partition(0))
            .expect("partition");
        assert_eq!(part.log.storage().high_watermark(), 1, "one control record");
        assert!(!b.txn().has_pending_offset("g", "t", 0));
        assert_eq!(committed(&b, "g").await, 3, "COMMIT made them the group's");
        // An ABORT drops what is pending.
        hold_offset(&b, 6, 9).await;
        let req = markers(6, false, &[(CONSUMER_OFFSETS_TOPIC, op)]);
        let r: WriteTxnMarkersResponse = call(&b, ApiKey::WriteTxnMarkers, 1, &req).await;
        assert_eq!(
            codes(&r),
            vec![(CONSUMER_OFFSETS_TOPIC.to_string(), op, NONE)]
        );
        assert!(!b.txn().has_pending_offset("g", "t", 0));
        assert_eq!(committed(&b, "g").await, 3);
    }
}
