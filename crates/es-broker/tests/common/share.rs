//! The raw share-group requests the share tests send: ShareFetch and
//! ShareAcknowledge v1 of one partition, and the acquired records of an
//! answer.

use es_kafka::kafka_protocol::messages::share_acknowledge_request::{
    AcknowledgePartition, AcknowledgeTopic, AcknowledgementBatch,
};
use es_kafka::kafka_protocol::messages::share_fetch_request::{FetchPartition, FetchTopic};
use es_kafka::kafka_protocol::messages::{
    GroupId, ShareAcknowledgeRequest, ShareFetchRequest, ShareFetchResponse,
};
use es_kafka::kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

/// (first, last, delivery count) of one AcquiredRecords.
pub type Acquired = (i64, i64, i16);

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// ShareFetch of partition `p` of topic `tid` for `member` of `group` at
/// session epoch `epoch`: up to 100 records, no wait.
pub fn fetch_request(
    group: &str,
    tid: Uuid,
    p: i32,
    member: &str,
    epoch: i32,
) -> ShareFetchRequest {
    let mut fp = FetchPartition::default();
    fp.partition_index = p;
    let mut t = FetchTopic::default();
    t.topic_id = tid;
    t.partitions = vec![fp];
    let mut req = ShareFetchRequest::default();
    req.group_id = Some(GroupId(s(group)));
    req.member_id = Some(s(member));
    req.share_session_epoch = epoch;
    req.max_wait_ms = 0;
    req.max_bytes = 1 << 20;
    req.max_records = 100;
    req.batch_size = 100;
    req.topics = vec![t];
    req
}

/// ShareAcknowledge of `[first, last]` of partition `p` with one type.
#[allow(clippy::too_many_arguments)]
pub fn ack_request(
    group: &str,
    tid: Uuid,
    p: i32,
    member: &str,
    epoch: i32,
    first: i64,
    last: i64,
    kind: i8,
) -> ShareAcknowledgeRequest {
    let mut b = AcknowledgementBatch::default();
    b.first_offset = first;
    b.last_offset = last;
    b.acknowledge_types = vec![kind];
    let mut ap = AcknowledgePartition::default();
    ap.partition_index = p;
    ap.acknowledgement_batches = vec![b];
    let mut t = AcknowledgeTopic::default();
    t.topic_id = tid;
    t.partitions = vec![ap];
    let mut req = ShareAcknowledgeRequest::default();
    req.group_id = Some(GroupId(s(group)));
    req.member_id = Some(s(member));
    req.share_session_epoch = epoch;
    req.topics = vec![t];
    req
}

/// The first partition's error and acquired records of an answer (error
/// -1 when it names no partition).
pub fn acquired(r: &ShareFetchResponse) -> (i16, Vec<Acquired>) {
    let Some(p) = r.responses.first().and_then(|t| t.partitions.first()) else {
        return (-1, Vec::new());
    };
    let got = p
        .acquired_records
        .iter()
        .map(|a| (a.first_offset, a.last_offset, a.delivery_count))
        .collect();
    (p.error_code, got)
}
