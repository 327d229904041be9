//! ShareFetch and ShareAcknowledge over the wire against a broker on a
//! temporary data directory: records produced with Produce, members joined
//! with ShareGroupHeartbeat, requests encoded as a client sends them (v2 with
//! the hand codec), answers decoded at the same version.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::{Buf, Bytes};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::share_acknowledge_request::{
    AcknowledgePartition, AcknowledgeTopic, AcknowledgementBatch as AckReqBatch,
};
use kafka_protocol::messages::share_fetch_request::{
    AcknowledgementBatch, FetchPartition, FetchTopic, ForgottenTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::records::RecordBatchDecoder;
use uuid::Uuid;

use crate::broker::Broker;
use crate::codec::share_wire::{
    encode_share_acknowledge_request, encode_share_fetch_request, ShareAcknowledgeResponseV2,
    ShareAcknowledgeV2Extras, ShareFetchV2Extras,
};
use crate::errors::{code, ResponseError, NONE};
use crate::handlers::wire_client::call;
use crate::BrokerConfig;
use es_storage::RecordMeta;
use es_test_support::batch::KafkaBatch;

const M1: &str = "member-one-0000000000";
const M2: &str = "member-two-0000000000";
const GROUP: &str = "sg";

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

async fn broker_in(dir: &std::path::Path) -> Arc<Broker> {
    let cfg = BrokerConfig::new(dir.join("data"), "127.0.0.1:9092");
    let b = Broker::open_running(cfg).await.expect("open");
    if b.topic("t").is_none() {
        b.create_topic("t", 1, BTreeMap::new(), false)
            .await
            .expect("create t");
    }
    b
}

async fn set_configs(b: &Arc<Broker>, pairs: &[(&str, &str)]) {
    let c: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    b.set_group_configs(GROUP, c, false)
        .await
        .expect("group configs");
}

/// Produces `n` records, values "v<i>", one Produce each.
async fn produce(b: &Arc<Broker>, n: usize) {
    for i in 0..n {
        let mut k = KafkaBatch::new();
        let v = format!("v{i}");
        k.record(
            1_700_000_000_000,
            None,
            Some(v.as_bytes()),
            &[],
            &RecordMeta::default(),
        );
        let mut pd = PartitionProduceData::default();
        pd.index = 0;
        pd.records = Some(Bytes::from(k.encode()));
        let mut td = TopicProduceData::default();
        td.name = TopicName(s("t"));
        td.partition_data = vec![pd];
        let mut req = ProduceRequest::default();
        req.acks = -1;
        req.timeout_ms = 10_000;
        req.topic_data = vec![td];
        let r: ProduceResponse = call(b, ApiKey::Produce, 9, &req).await;
        assert_eq!(r.responses[0].partition_responses[0].error_code, NONE);
    }
}

async fn join(b: &Arc<Broker>, member: &str) {
    let mut r = ShareGroupHeartbeatRequest::default();
    r.group_id = GroupId(s(GROUP));
    r.member_id = s(member);
    r.member_epoch = 0;
    r.subscribed_topic_names = Some(vec![TopicName(s("t"))]);
    let a: ShareGroupHeartbeatResponse = call(b, ApiKey::ShareGroupHeartbeat, 1, &r).await;
    assert_eq!(a.error_code, NONE, "{:?}", a.error_message);
}

/// A ShareFetch v2 body, written by the hand codec.
struct FetchV2(ShareFetchRequest, ShareFetchV2Extras);

impl Encodable for FetchV2 {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, _v: i16) -> anyhow::Result<()> {
        let mut out = Vec::new();
        encode_share_fetch_request(&self.0, &self.1, 2, &mut out)?;
        buf.put_slice(&out);
        Ok(())
    }
    fn compute_size(&self, _v: i16) -> anyhow::Result<usize> {
        let mut out = Vec::new();
        encode_share_fetch_request(&self.0, &self.1, 2, &mut out)?;
        Ok(out.len())
    }
}

/// A ShareAcknowledge v2 body, written by the hand codec.
struct AckV2(ShareAcknowledgeRequest, ShareAcknowledgeV2Extras);

impl Encodable for AckV2 {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, _v: i16) -> anyhow::Result<()> {
        let mut out = Vec::new();
        encode_share_acknowledge_request(&self.0, &self.1, 2, &mut out)?;
        buf.put_slice(&out);
        Ok(())
    }
    fn compute_size(&self, _v: i16) -> anyhow::Result<usize> {
        let mut out = Vec::new();
        encode_share_acknowledge_request(&self.0, &self.1, 2, &mut out)?;
        Ok(out.len())
    }
}

/// A ShareAcknowledge v2 response, read by the hand codec.
struct AckV2Response(ShareAcknowledgeResponseV2);

impl Decodable for AckV2Response {
    fn decode<B: ByteBuf>(buf: &mut B, _v: i16) -> anyhow::Result<Self> {
        let mut b = buf.get_bytes(buf.remaining());
        let r = ShareAcknowledgeResponseV2::decode(&mut b, 2)?;
        anyhow::ensure!(b.is_empty(), "trailing bytes");
        Ok(AckV2Response(r))
    }
}

/// One ShareFetch of partition 0 of `tid`.
struct Fetch {
    group: Option<&'static str>,
    member: &'static str,
    epoch: i32,
    max_records: i32,
    max_bytes: i32,
    acks: Vec<(i64, i64, Vec<i8>)>,
    renew: bool,
    mode: i8,
    forget: bool,
    /// MinBytes and MaxWaitMs (0, 0: answer at once).
    wait: (i32, i32),
}

impl Fetch {
    fn new(member: &'static str, epoch: i32, max_records: i32) -> Fetch {
        Fetch {
            group: Some(GROUP),
            member,
            epoch,
            max_records,
            max_bytes: 1 << 20,
            acks: Vec::new(),
            renew: false,
            mode: 0,
            forget: false,
            wait: (0, 0),
        }
    }

    fn ack(mut self, first: i64, last: i64, types: &[i8]) -> Fetch {
        self.acks.push((first, last, types.to_vec()));
        self
    }

    fn request(&self, tid: Uuid) -> ShareFetchRequest {
        let mut r = ShareFetchRequest::default();
        r.group_id = self.group.map(|g| GroupId(s(g)));
        r.member_id = Some(s(self.member));
        r.share_session_epoch = self.epoch;
        r.min_bytes = self.wait.0;
        r.max_wait_ms = self.wait.1;
        r.max_bytes = self.max_bytes;
        r.max_records = self.max_records;
        r.batch_size = self.max_records;
        if self.forget {
            let mut f = ForgottenTopic::default();
            f.topic_id = tid;
            f.partitions = vec![0];
            r.forgotten_topics_data = vec![f];
            return r;
        }
        let mut p = FetchPartition::default();
        p.partition_index = 0;
        p.acknowledgement_batches = self
            .acks
            .iter()
            .map(|(f, l, t)| {
                let mut b = AcknowledgementBatch::default();
                b.first_offset = *f;
                b.last_offset = *l;
                b.acknowledge_types = t.clone();
                b
            })
            .collect();
        let mut t = FetchTopic::default();
        t.topic_id = tid;
        t.partitions = vec![p];
        r.topics = vec![t];
        r
    }

    async fn send(&self, b: &Arc<Broker>, tid: Uuid) -> ShareFetchResponse {
        let x = ShareFetchV2Extras {
            acquire_mode: self.mode,
            is_renew_ack: self.renew,
        };
        call(b, ApiKey::ShareFetch, 2, &FetchV2(self.request(tid), x)).await
    }

    async fn send_v1(&self, b: &Arc<Broker>, tid: Uuid) -> ShareFetchResponse {
        call(b, ApiKey::ShareFetch, 1, &self.request(tid)).await
    }
}

fn ack_request(
    member: &str,
    epoch: i32,
    tid: Uuid,
    partition: i32,
    acks: &[(i64, i64, &[i8])],
) -> ShareAcknowledgeRequest {
    let mut r = ShareAcknowledgeRequest::default();
    r.group_id = Some(GroupId(s(GROUP)));
    r.member_id = Some(s(member));
    r.share_session_epoch = epoch;
    let mut p = AcknowledgePartition::default();
    p.partition_index = partition;
    p.acknowledgement_batches = acks
        .iter()
        .map(|(f, l, t)| {
            let mut b = AckReqBatch::default();
            b.first_offset = *f;
            b.last_offset = *l;
            b.acknowledge_types = t.to_vec();
            b
        })
        .collect();
    let mut t = AcknowledgeTopic::default();
    t.topic_id = tid;
    t.partitions = vec![p];
    r.topics = vec![t];
    r
}

async fn acknowledge(
    b: &Arc<Broker>,
    req: ShareAcknowledgeRequest,
    renew: bool,
) -> ShareAcknowledgeResponseV2 {
    let x = ShareAcknowledgeV2Extras {
        is_renew_ack: renew,
    };
    let r: AckV2Response = call(b, ApiKey::ShareAcknowledge, 2, &AckV2(req, x)).await;
    r.0
}

/// (first, last, delivery count) of each AcquiredRecords of the only
/// partition, and the offsets and values of the records sent.
fn acquired(r: &ShareFetchResponse) -> Vec<(i64, i64, i16)> {
    assert_eq!(r.error_code, NONE, "{:?}", r.error_message);
    r.responses
        .iter()
        .flat_map(|t| &t.partitions)
        .flat_map(|p| &p.acquired_records)
        .map(|a| (a.first_offset, a.last_offset, a.delivery_count))
        .collect()
}

fn records(r: &ShareFetchResponse) -> Vec<(i64, String)> {
    let mut out = Vec::new();
    for p in r.responses.iter().flat_map(|t| &t.partitions) {
        let mut bytes = p.records.clone().expect("records never null at v1+");
        if bytes.is_empty() {
            continue;
        }
        for set in RecordBatchDecoder::decode_all(&mut bytes).expect("batches decode") {
            for rec in set.records {
                let v = rec.value.map(|v| String::from_utf8_lossy(&v).into_owned());
                out.push((rec.offset, v.unwrap_or_default()));
            }
        }
    }
    out
}

fn only_partition(r: &ShareFetchResponse) -> &share_fetch_response::PartitionData {
    assert_eq!(r.responses.len(), 1, "{r:?}");
    assert_eq!(r.responses[0].partitions.len(), 1, "{r:?}");
    &r.responses[0].partitions[0]
}

fn ack_code(r: &ShareAcknowledgeResponseV2) -> i16 {
    assert_eq!(
        r.response.error_code, NONE,
        "{:?}",
        r.response.error_message
    );
    r.response.responses[0].partitions[0].error_code
}

async fn setup(dir: &std::path::Path, n: usize) -> (Arc<Broker>, Uuid) {
    let b = broker_in(dir).await;
    set_configs(&b, &[("share.auto.offset.reset", "earliest")]).await;
    produce(&b, n).await;
    let tid = b.topic("t").expect("t").id;
    (b, tid)
}

#[tokio::test]
async fn members_share_a_partition_and_acknowledge() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (b, tid) = setup(dir.path(), 10).await;
    join(&b, M1).await;
    join(&b, M2).await;

    // M1 opens a session and gets the first five records, delivered once.
    let r = Fetch::new(M1, 0, 5).send(&b, tid).await;
    assert_eq!(acquired(&r), vec![(0, 4, 1)]);
    assert_eq!(r.acquisition_lock_timeout_ms, 30_000, "Kafka's default");
    let got = records(&r);
    assert_eq!(
        got,
        (0..5).map(|i| (i, format!("v{i}"))).collect::<Vec<_>>()
    );
    // M2, on the same partition, gets the next five, not the same.
    let r = Fetch::new(M2, 0, 5).send(&b, tid).await;
    assert_eq!(acquired(&r), vec![(5, 9, 1)]);
    assert_eq!(records(&r).first().map(|x| x.0), Some(5));

    // M1 accepts 0-1 and releases 2-4 on its next fetch, which gets 2-4
    // back (delivery count 2).
    let r = Fetch::new(M1, 1, 5)
        .ack(0, 4, &[1, 1, 2, 2, 2])
        .send(&b, tid)
        .await;
    let p = only_partition(&r);
    assert_eq!(
        p.acknowledge_error_code, NONE,
        "{:?}",
        p.acknowledge_error_message
    );
    assert_eq!(acquired(&r), vec![(2, 4, 2)]);
    assert_eq!(
        records(&r).iter().map(|x| x.0).collect::<Vec<_>>(),
        vec![2, 3, 4]
    );

    // Accepting an accepted record again (below the start now) is no
    // error; accepting M2's record is INVALID_RECORD_STATE, per partition;
    // nothing left to fetch, and the partition is listed for the
    // acknowledgement result only.
    let r = Fetch::new(M1, 2, 0).ack(0, 0, &[1]).send(&b, tid).await;
    assert_eq!(only_partition(&r).acknowledge_error_code, NONE);
    let r = Fetch::new(M1, 3, 5).ack(5, 5, &[1]).send(&b, tid).await;
    let p = only_partition(&r);
    assert_eq!(
        p.acknowledge_error_code,
        code(ResponseError::InvalidRecordState)
    );
    assert!(p.acquired_records.is_empty());
    assert_eq!(p.records.as_ref().map(Bytes::len), Some(0));
    // A fetch with no news lists nothing.
    assert_eq!(
        p.acknowledge_error_message.as_deref(),
        Some("Member is not the owner of offset")
    );
    let r = Fetch::new(M1, 4, 5).send(&b, tid).await;
    assert!(r.responses.is_empty(), "{r:?}");

    // M2 rejects its records with ShareAcknowledge (epoch 1).
    let a = acknowledge(&b, ack_request(M2, 1, tid, 0, &[(5, 9, &[3])]), false).await;
    assert_eq!(ack_code(&a), NONE);
    assert_eq!(a.acquisition_lock_timeout_ms, 30_000);
    // Epoch errors: 0 is never a ShareAcknowledge epoch, a stale one is
    // refused, an unknown member has no session.
    let a = acknowledge(&b, ack_request(M2, 0, tid, 0, &[]), false).await;
    assert_eq!(
        a.response.error_code,
        code(ResponseError::InvalidShareSessionEpoch)
    );
    let a = acknowledge(&b, ack_request(M2, 1, tid, 0, &[]), false).await;
    assert_eq!(
        a.response.error_code,
        code(ResponseError::InvalidShareSessionEpoch)
    );
    let a = acknowledge(&b, ack_request("nobody-at-all", 1, tid, 0, &[]), false).await;
    assert_eq!(
        a.response.error_code,
        code(ResponseError::ShareSessionNotFound)
    );
    // A top-level refusal carries no lock duration (Kafka 4.4 answers 0,
    // seen in compat-tests/acl-matrix).
    assert_eq!(a.acquisition_lock_timeout_ms, 0);
    let r = Fetch::new(M2, 7, 5).send(&b, tid).await;
    assert_eq!(r.error_code, code(ResponseError::InvalidShareSessionEpoch));

    // M1 closes its session (-1) without acknowledging 2-4: released, and
    // M2's next fetch (epoch 2) gets them with delivery count 3.
    let r = Fetch::new(M1, -1, 0).send(&b, tid).await;
    assert_eq!(r.error_code, NONE);
    let r = Fetch::new(M2, 2, 5).send(&b, tid).await;
    assert_eq!(acquired(&r), vec![(2, 4, 3)]);
    // M1 has no session now.
    let r = Fetch::new(M1, 5, 5).send(&b, tid).await;
    assert_eq!(r.error_code, code(ResponseError::ShareSessionNotFound));

    // ShareAcknowledge -1 accepts and closes; a new record produced later
    // goes to M1's new session, nothing else is left.
    let a = acknowledge(&b, ack_request(M2, -1, tid, 0, &[(2, 4, &[1])]), false).await;
    assert_eq!(ack_code(&a), NONE);
    produce(&b, 1).await;
    let r = Fetch::new(M1, 0, 5).send_v1(&b, tid).await;
    assert_eq!(acquired(&r), vec![(10, 10, 1)]);
    assert_eq!(r.acquisition_lock_timeout_ms, 30_000);
}

#[tokio::test]
async fn requests_are_refused_in_kafkas_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (b, tid) = setup(dir.path(), 3).await;
    let mut f = Fetch::new(M1, 0, 5);
    f.group = None;
    let r = f.send(&b, tid).await;
    assert_eq!(r.error_code, code(ResponseError::InvalidRequest));
    assert_eq!(
        r.error_message.as_deref(),
        Some("Invalid group id in the request.")
    );
    let r = Fetch::new("", 0, 5).send(&b, tid).await;
    assert_eq!(r.error_code, code(ResponseError::InvalidRequest));
    assert_eq!(
        r.error_message.as_deref(),
        Some("Invalid member id in the request.")
    );
    // v2 IsRenewAck: every fetch bound must be 0.
    let mut f = Fetch::new(M1, 0, 5);
    f.renew = true;
    let r = f.send(&b, tid).await;
    assert_eq!(r.error_code, code(ResponseError::InvalidRequest));
    assert_eq!(
        r.error_message.as_deref(),
        Some("maxBytes must be set to 0, maxRecords must be set to 0, if isRenewAck is true.")
    );
    // Acknowledgements in the opening fetch.
    let r = Fetch::new(M1, 0, 5).ack(0, 0, &[1]).send(&b, tid).await;
    assert_eq!(r.error_code, code(ResponseError::InvalidRequest));
    // No session.
    let r = Fetch::new(M1, 3, 5).send(&b, tid).await;
    assert_eq!(r.error_code, code(ResponseError::ShareSessionNotFound));

    // An unknown topic id: UNKNOWN_TOPIC_ID for the partition.
    let r = Fetch::new(M2, 0, 5).send(&b, Uuid::from_u128(7)).await;
    assert_eq!(r.error_code, NONE);
    let p = only_partition(&r);
    assert_eq!(p.error_code, code(ResponseError::UnknownTopicId));
    assert_eq!(p.records.as_ref().map(Bytes::len), Some(0));

    // Invalid batches answer INVALID_REQUEST for the partition and apply
    // nothing: descending, a count that is not the range's, Renew without
    // IsRenewAck, a type past Renew.
    let r = Fetch::new(M1, 0, 3).send(&b, tid).await;
    assert_eq!(acquired(&r), vec![(0, 2, 1)]);
    let bad: [(i64, i64, &[i8]); 4] =
        [(2, 2, &[1]), (0, 1, &[1, 1, 1]), (0, 0, &[4]), (0, 0, &[5])];
    for (i, (f, l, t)) in bad.iter().enumerate() {
        let mut req = Fetch::new(M1, 1 + i as i32, 0);
        if i == 0 {
            req = req.ack(2, 2, &[1]).ack(*f - 2, *l - 2, t);
        } else {
            req = req.ack(*f, *l, t);
        }
        let r = req.send(&b, tid).await;
        let p = only_partition(&r);
        assert_eq!(
            p.acknowledge_error_code,
            code(ResponseError::InvalidRequest),
            "case {i}"
        );
    }
    // Nothing was applied: all three still acquired, acceptable now.
    let a = acknowledge(&b, ack_request(M1, 5, tid, 0, &[(0, 2, &[1])]), false).await;
    assert_eq!(ack_code(&a), NONE);
    // An unknown partition in a ShareAcknowledge.
    let a = acknowledge(&b, ack_request(M1, 6, tid, 9, &[(0, 0, &[1])]), false).await;
    assert_eq!(ack_code(&a), code(ResponseError::UnknownTopicOrPartition));
}

#[tokio::test]
async fn renew_at_v2_and_the_groups_lock_duration() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = broker_in(dir.path()).await;
    set_configs(
        &b,
        &[
            ("share.auto.offset.reset", "earliest"),
            ("share.record.lock.duration.ms", "15000"),
        ],
    )
    .await;
    produce(&b, 4).await;
    let tid = b.topic("t").expect("t").id;
    let r = Fetch::new(M1, 0, 4).send(&b, tid).await;
    assert_eq!(acquired(&r), vec![(0, 3, 1)]);
    assert_eq!(r.acquisition_lock_timeout_ms, 15_000);
    // Renew by ShareAcknowledge (IsRenewAck) and by a renew-only fetch.
    let a = acknowledge(&b, ack_request(M1, 1, tid, 0, &[(0, 1, &[4])]), true).await;
    assert_eq!(ack_code(&a), NONE);
    assert_eq!(a.acquisition_lock_timeout_ms, 15_000);
    let mut f = Fetch::new(M1, 2, 0).ack(2, 3, &[4]);
    f.renew = true;
    f.max_bytes = 0;
    let r = f.send(&b, tid).await;
    let p = only_partition(&r);
    assert_eq!(p.acknowledge_error_code, NONE);
    assert!(
        p.acquired_records.is_empty(),
        "a renew-only fetch fetches nothing"
    );
    // Renew without IsRenewAck is refused; renewed records are still the
    // member's to accept.
    let a = acknowledge(&b, ack_request(M1, 3, tid, 0, &[(0, 3, &[4])]), false).await;
    assert_eq!(ack_code(&a), code(ResponseError::InvalidRequest));
    let a = acknowledge(&b, ack_request(M1, 4, tid, 0, &[(0, 3, &[1])]), false).await;
    assert_eq!(ack_code(&a), NONE);
    let info = b
        .shares()
        .inspect(&crate::shares::locks::ShareKey::new(GROUP, tid, 0), |c| {
            c.start_offset()
        })
        .expect("loaded");
    assert_eq!(info, 4, "all four accepted");
}

#[tokio::test]
async fn a_restart_keeps_acknowledged_records_and_brings_acquired_ones_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (b, tid) = setup(dir.path(), 10).await;
    let r = Fetch::new(M1, 0, 10).send(&b, tid).await;
    assert_eq!(acquired(&r), vec![(0, 9, 1)]);
    let a = acknowledge(&b, ack_request(M1, 1, tid, 0, &[(0, 4, &[1])]), false).await;
    assert_eq!(ack_code(&a), NONE);
    b.begin_shutdown();
    let c = b.clone();
    tokio::task::spawn_blocking(move || c.close())
        .await
        .expect("task")
        .expect("close");
    drop(b);

    let b = broker_in(dir.path()).await;
    // The session is gone with the broker; a new one gets 5-9 again,
    // delivered a second time, and never 0-4.
    let r = Fetch::new(M1, 2, 10).send(&b, tid).await;
    assert_eq!(r.error_code, code(ResponseError::ShareSessionNotFound));
    let r = Fetch::new(M2, 0, 10).send(&b, tid).await;
    assert_eq!(acquired(&r), vec![(5, 9, 2)]);
    assert_eq!(records(&r).first().map(|x| x.0), Some(5));
}

#[tokio::test]
async fn forgotten_partitions_and_record_limit_mode() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (b, tid) = setup(dir.path(), 6).await;
    let mut f = Fetch::new(M1, 0, 2);
    f.mode = 1;
    let r = f.send(&b, tid).await;
    assert_eq!(acquired(&r), vec![(0, 1, 1)]);
    // Forgetting the partition: the next fetch fetches nothing from it.
    let mut f = Fetch::new(M1, 1, 2);
    f.forget = true;
    let r = f.send(&b, tid).await;
    assert!(r.responses.is_empty(), "{r:?}");
    // Naming it again adds it back and lists it.
    let r = Fetch::new(M1, 2, 2).send(&b, tid).await;
    assert_eq!(acquired(&r), vec![(2, 3, 1)]);
}

/// Waits (yielding, no sleep) until `n` fetches are parked on partition 0.
async fn parked(b: &Arc<Broker>, n: usize) {
    let slot = b.topic("t").expect("t").partition(0).expect("p0");
    for _ in 0..100_000 {
        if slot.waiters.len() >= n {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("no fetch parked");
}

#[tokio::test]
async fn a_parked_fetch_wakes_on_new_records_and_on_released_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (b, tid) = setup(dir.path(), 0).await;
    // Nothing to acquire: the fetch parks until a record arrives.
    let mut f = Fetch::new(M1, 0, 5);
    f.wait = (1, 60_000);
    let b2 = b.clone();
    let parked_fetch = tokio::spawn(async move { f.send(&b2, tid).await });
    parked(&b, 1).await;
    produce(&b, 3).await;
    let r = parked_fetch.await.expect("task");
    assert_eq!(acquired(&r)[0].0, 0, "woken by the new records");

    // M1 holds whatever it acquired; M2 parks until M1 releases them.
    let held = acquired(&r);
    let r = Fetch::new(M1, 1, 5).send(&b, tid).await;
    let mut all = held;
    all.extend(acquired(&r));
    assert_eq!(all.last().map(|a| a.1), Some(2), "M1 holds 0-2: {all:?}");
    let mut f = Fetch::new(M2, 0, 5);
    f.wait = (1, 60_000);
    let b2 = b.clone();
    let parked_fetch = tokio::spawn(async move { f.send(&b2, tid).await });
    parked(&b, 1).await;
    let a = acknowledge(&b, ack_request(M1, 2, tid, 0, &[(0, 2, &[2])]), false).await;
    assert_eq!(ack_code(&a), NONE);
    let r = parked_fetch.await.expect("task");
    // Delivered again (count 2), in the in-flight batches they were
    // acquired in.
    let offsets: Vec<(i64, i16)> = acquired(&r)
        .into_iter()
        .flat_map(|(f, l, n)| (f..=l).map(move |o| (o, n)))
        .collect();
    assert_eq!(
        offsets,
        vec![(0, 2), (1, 2), (2, 2)],
        "released, delivered again"
    );
}

/// The share counters of /metrics follow what the requests did.
#[tokio::test]
async fn the_share_counters_count_deliveries_acknowledgements_and_fsyncs() {
    use std::sync::atomic::Ordering::Relaxed;
    let dir = tempfile::tempdir().expect("tempdir");
    let (b, tid) = setup(dir.path(), 10).await;
    let st = b.shares().stats();
    let fsyncs0 = st.journal_fsyncs.load(Relaxed);
    let r = Fetch::new(M1, 0, 10).send(&b, tid).await;
    assert_eq!(acquired(&r), vec![(0, 9, 1)]);
    assert_eq!(st.acquired_records.load(Relaxed), 10);
    assert_eq!(b.shares().session_count(), 1);
    assert!(b.shares().loaded() >= 1);
    // Accept 0-3, release 4-5, reject 6, gap 7 (per offset), leave 8-9.
    let a = acknowledge(
        &b,
        ack_request(M1, 1, tid, 0, &[(0, 3, &[1]), (4, 7, &[2, 2, 3, 0])]),
        false,
    )
    .await;
    assert_eq!(ack_code(&a), NONE);
    let acks: Vec<u64> = st
        .acknowledged_records
        .iter()
        .map(|c| c.load(Relaxed))
        .collect();
    assert_eq!(
        acks,
        vec![1, 4, 2, 1, 0],
        "gap, accept, release, reject, renew"
    );
    assert!(
        st.journal_fsyncs.load(Relaxed) > fsyncs0,
        "the acquisition and the acknowledgement were fsynced"
    );
}

#[path = "offsets_tests.rs"]
mod offsets_tests;
