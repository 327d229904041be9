//! ListOffsets (v1-11): earliest (-2), latest (-1), max timestamp (-3),
//! earliest local (-4, the same as earliest here: no tiered storage) and
//! offset by timestamp.
//!
//! "Earliest" is the log start offset, which retention and DeleteRecords
//! move. "Latest" follows Kafka's rule: the high watermark for
//! `read_uncommitted` (isolation level 0), the last stable offset (below the
//! first open transaction, never above the high watermark) for
//! `read_committed` (1, v2+), so a read_committed consumer that resets to the
//! end never starts inside an open transaction.
//!
//! As Kafka: each partition is answered once, grouped by topic, a partition
//! named twice with INVALID_REQUEST; a special timestamp older than the
//! request version that introduced it gets UNSUPPORTED_VERSION; an offset
//! not found has no leader epoch (-1). A partition led by another broker
//! gets NOT_LEADER_OR_FOLLOWER, a stale or future current leader epoch
//! FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH ([`super::route`]).

use bytes::Bytes;
use es_auth::acl::AclOperation;
use indexmap::IndexMap;
use kafka_protocol::messages::list_offsets_request::ListOffsetsPartition;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse, TopicName};

use super::route::route;
use super::{blocking, Ctx, RequestError};
use crate::errors::{code, storage_error_code, ResponseError, NONE};

pub const LATEST: i64 = -1;
pub const EARLIEST: i64 = -2;
pub const MAX_TIMESTAMP: i64 = -3;
pub const EARLIEST_LOCAL: i64 = -4;
/// The last offset in tiered storage (v9+, KIP-1005): none here.
pub const LATEST_TIERED: i64 = -5;
/// The first offset not yet in tiered storage (v11+, KIP-1023): none here.
pub const EARLIEST_PENDING_UPLOAD: i64 = -6;
/// ListOffsets `isolation_level` of read_committed consumers.
pub const READ_COMMITTED: i8 = 1;

/// The first version that may ask for each special timestamp (Kafka answers
/// an older request for one with UNSUPPORTED_VERSION).
fn min_version_of(spec: i64) -> i16 {
    match spec {
        MAX_TIMESTAMP => 7,
        EARLIEST_LOCAL => 8,
        LATEST_TIERED => 9,
        EARLIEST_PENDING_UPLOAD => 11,
        _ => 0,
    }
}

pub async fn handle(ctx: &Ctx, req: ListOffsetsRequest) -> Result<Option<Bytes>, RequestError> {
    let v = ctx.version;
    let b = ctx.broker.clone();
    let read_committed = v >= 2 && req.isolation_level == READ_COMMITTED;
    // Kafka reads the isolation level of a consumer's request (replica -1)
    // for each partition it looks up, and fails that partition on one it
    // does not know.
    let bad_isolation = v >= 2 && req.replica_id.0 == -1 && !matches!(req.isolation_level, 0 | 1);
    // Kafka answers each partition once, grouped by topic in the order
    // they first appear, a partition named twice with INVALID_REQUEST, and a
    // topic that names no partition not at all.
    let mut wanted: IndexMap<(TopicName, i32), (ListOffsetsPartition, bool)> = IndexMap::new();
    for t in req.topics {
        for p in t.partitions {
            match wanted.entry((t.name.clone(), p.partition_index)) {
                indexmap::map::Entry::Occupied(mut e) => e.get_mut().1 = true,
                indexmap::map::Entry::Vacant(e) => {
                    e.insert((p, false));
                }
            }
        }
    }
    // DESCRIBE on each topic, as Kafka checks it: a topic the client may
    // not describe gets TOPIC_AUTHORIZATION_FAILED on every partition.
    let denied = ctx.denied_topics(
        AclOperation::Describe,
        wanted.keys().map(|(name, _)| name.0.as_str()),
    );
    let results = blocking(move || {
        let image = b.image();
        let mut out: IndexMap<TopicName, ListOffsetsTopicResponse> = IndexMap::new();
        for ((name, _), (p, duplicated)) in wanted {
            if denied.contains(name.0.as_str()) {
                let mut pr = ListOffsetsPartitionResponse::default();
                pr.partition_index = p.partition_index;
                pr.error_code = code(ResponseError::TopicAuthorizationFailed);
                pr.timestamp = -1;
                pr.offset = -1;
                if v >= 4 {
                    pr.leader_epoch = -1;
                }
                out.entry(name.clone())
                    .or_insert_with(|| {
                        let mut t = ListOffsetsTopicResponse::default();
                        t.name = name.clone();
                        t
                    })
                    .partitions
                    .push(pr);
                continue;
            }
            let topic = b.topic(name.0.as_str());
            let mut pr = ListOffsetsPartitionResponse::default();
            pr.partition_index = p.partition_index;
            let routed = route(
                &b,
                image.as_deref(),
                topic.as_ref(),
                p.partition_index,
                p.current_leader_epoch,
            );
            let epoch = routed.as_ref().map_or(-1, |r| r.leader_epoch);
            let (error, ts, off) = match routed.map(|r| r.slot) {
                _ if duplicated => (code(ResponseError::InvalidRequest), -1, -1),
                _ if bad_isolation => (code(ResponseError::UnknownServerError), -1, -1),
                Err(m) => (code(m.error), -1, -1),
                Ok(_) if v < min_version_of(p.timestamp) => {
                    (code(ResponseError::UnsupportedVersion), -1, -1)
                }
                Ok(s) => match p.timestamp {
                    LATEST => {
                        let hw = s.log.high_watermark();
                        let latest = if read_committed {
                            s.log.last_stable_offset().min(hw)
                        } else {
                            hw
                        };
                        (NONE, -1, latest as i64)
                    }
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
                    // LATEST_TIERED, EARLIEST_PENDING_UPLOAD and unknown
                    // negative specs name tiered-storage positions es
                    // does not have: no offset, as Kafka answers for a
                    // topic without remote storage.
                    _ => (NONE, -1, -1),
                },
            };
            pr.error_code = error;
            pr.timestamp = ts;
            pr.offset = off;
            if v >= 4 {
                // No offset found: no epoch either.
                pr.leader_epoch = if error == NONE && off >= 0 { epoch } else { -1 };
            }
            out.entry(name.clone())
                .or_insert_with(|| {
                    let mut tr = ListOffsetsTopicResponse::default();
                    tr.name = name;
                    tr
                })
                .partitions
                .push(pr);
        }
        out.into_values().collect()
    })
    .await?;
    let mut r = ListOffsetsResponse::default();
    r.topics = results;
    ctx.respond(&r)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::{Buf, BytesMut};
    use es_storage::{ProducerAppend, ProducerInfo, RecordBatchBuf, RecordMeta};
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use kafka_protocol::messages::{ApiKey, RequestHeader, TopicName};
    use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

    use super::*;
    use crate::broker::{Broker, BrokerConfig};
    use crate::handlers;
    use crate::turn::Turn;

    async fn list(b: &Arc<Broker>, v: i16, isolation: i8, spec: i64) -> i64 {
        let mut p = ListOffsetsPartition::default();
        p.partition_index = 0;
        p.timestamp = spec;
        let mut t = ListOffsetsTopic::default();
        t.name = TopicName(StrBytes::from_static_str("t"));
        t.partitions = vec![p];
        let mut req = ListOffsetsRequest::default();
        req.replica_id = kafka_protocol::messages::BrokerId(-1);
        req.isolation_level = if v >= 2 { isolation } else { 0 };
        req.topics = vec![t];
        let mut header = RequestHeader::default();
        header.request_api_key = ApiKey::ListOffsets as i16;
        header.request_api_version = v;
        let mut buf = BytesMut::new();
        header
            .encode(&mut buf, ApiKey::ListOffsets.request_header_version(v))
            .expect("header");
        // v11 goes on the wire with v10's body (crate::versions::PAST_CRATE).
        req.encode(
            &mut buf,
            crate::versions::crate_version(ApiKey::ListOffsets, v),
        )
        .expect("request");
        let mut frame = handlers::handle(b.clone(), buf.freeze(), Turn::free())
            .await
            .expect("handled")
            .expect("a response");
        frame.advance(4);
        kafka_protocol::messages::ResponseHeader::decode(
            &mut frame,
            ApiKey::ListOffsets.response_header_version(v),
        )
        .expect("response header");
        let r = ListOffsetsResponse::decode(
            &mut frame,
            crate::versions::crate_version(ApiKey::ListOffsets, v),
        )
        .expect("response");
        assert!(!frame.has_remaining(), "v{v}: bytes after the response");
        let p = &r.topics[0].partitions[0];
        assert_eq!(p.error_code, NONE);
        p.offset
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn latest_is_the_last_stable_offset_for_read_committed() {
        let dir = tempfile::tempdir().expect("tmp");
        let cfg = BrokerConfig::new(dir.path().join("data"), "127.0.0.1:9092");
        let (b, topic) = handlers::wire_client::broker_with_topic(cfg, "t").await;
        let log = topic
            .partition(0)
            .expect("partition 0")
            .log
            .storage()
            .clone();
        let plain = RecordMeta::default();
        let txn = RecordMeta {
            producer: Some(ProducerInfo {
                producer_id: 9,
                producer_epoch: 0,
                sequence: 0,
            }),
            transactional: true,
            control: false,
        };
        tokio::task::spawn_blocking(move || {
            let mut batch = RecordBatchBuf::new();
            for _ in 0..3 {
                batch.push(1, None, Some(b"v"), std::iter::empty(), &plain);
            }
            let info = log.append(&mut batch).expect("append");
            log.wait_durable(info.last_offset + 1).expect("durable");
            // An open transaction from offset 3; then more plain records.
            let mut batch = RecordBatchBuf::new();
            batch.push(1, None, Some(b"t"), std::iter::empty(), &txn);
            let p = ProducerAppend {
                producer_id: 9,
                producer_epoch: 0,
                base_sequence: 0,
                record_count: 1,
                transactional: true,
            };
            log.append_producer(&mut batch, Some(&p)).expect("append");
            let mut batch = RecordBatchBuf::new();
            batch.push(1, None, Some(b"v"), std::iter::empty(), &plain);
            let info = log.append(&mut batch).expect("append");
            log.wait_durable(info.last_offset + 1).expect("durable");
        })
        .await
        .expect("join");
        for v in 1..=11 {
            assert_eq!(list(&b, v, 0, LATEST).await, 5, "v{v} read_uncommitted");
            let committed = if v >= 2 { 3 } else { 5 };
            assert_eq!(
                list(&b, v, 1, LATEST).await,
                committed,
                "v{v} read_committed"
            );
            assert_eq!(list(&b, v, 1, EARLIEST).await, 0, "v{v} earliest");
        }
        let log = topic
            .partition(0)
            .expect("partition 0")
            .log
            .storage()
            .clone();
        let start = tokio::task::spawn_blocking(move || log.delete_records_before(2))
            .await
            .expect("join")
            .expect("delete records");
        assert_eq!(start, 2);
        assert_eq!(list(&b, 10, 0, EARLIEST).await, 2);
        assert_eq!(list(&b, 10, 0, EARLIEST_LOCAL).await, 2);
        assert_eq!(list(&b, 11, 0, EARLIEST_LOCAL).await, 2);
        // Tiered-storage positions: none without tiered storage, as Kafka.
        assert_eq!(list(&b, 9, 0, LATEST_TIERED).await, -1);
        assert_eq!(list(&b, 11, 0, EARLIEST_PENDING_UPLOAD).await, -1);
    }
}
