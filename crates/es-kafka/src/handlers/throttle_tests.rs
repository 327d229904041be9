//! Quotas enforced through the dispatcher and the connection, on a broker
//! whose clock stands still (so every rate, and every throttle time, is
//! exact): produce bytes throttle a producer that still gets its records
//! in, acks=0 included; fetch bytes give an over-quota consumer an empty
//! throttled answer; handler time throttles any request; and a throttled
//! connection takes no further request before its mute ends.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes};
use es_test_support::batch::KafkaBatch;
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable};

use super::throttle::ConnThrottle;
use super::wire_client::{broker_with_topic, call, call_as, s, tn, CLIENT_ID};
use super::Client;
use crate::broker::{Broker, BrokerConfig};
use crate::turn::Turn;

async fn broker(dir: &std::path::Path) -> Arc<Broker> {
    let mut cfg = BrokerConfig::new(dir.join("data"), "127.0.0.1:9092");
    cfg.storage.clock = es_storage::ManualClock::new(1_700_000_000_000);
    broker_with_topic(cfg, "t").await.0
}

async fn set_quota(b: &Arc<Broker>, user: Option<&str>, key: &str, value: f64) {
    let mut d = EntityData::default();
    d.entity_type = s("user");
    d.entity_name = user.map(s);
    let mut op = OpData::default();
    op.key = s(key);
    op.value = value;
    let mut e = EntryData::default();
    e.entity = vec![d];
    e.ops = vec![op];
    let mut req = AlterClientQuotasRequest::default();
    req.entries = vec![e];
    let r: AlterClientQuotasResponse = call(b, ApiKey::AlterClientQuotas, 1, &req).await;
    assert_eq!(r.entries[0].error_code, 0, "{r:?}");
}

fn alice(conn: &Arc<ConnThrottle>) -> Client {
    Client {
        throttle: Some(conn.clone()),
        ..super::wire_client::as_principal("User:alice")
    }
}

fn produce_request(acks: i16, value_bytes: usize) -> ProduceRequest {
    let mut batch = KafkaBatch::new();
    let value = vec![b'v'; value_bytes];
    batch.record(
        1_700_000_000_000,
        None,
        Some(&value),
        &[],
        &Default::default(),
    );
    let mut pd = PartitionProduceData::default();
    pd.index = 0;
    pd.records = Some(Bytes::from(batch.encode()));
    let mut td = TopicProduceData::default();
    td.name = tn("t");
    td.partition_data = vec![pd];
    let mut req = ProduceRequest::default();
    req.acks = acks;
    req.timeout_ms = 30_000;
    req.topic_data = vec![td];
    req
}

/// The request's size as Kafka's produce quota counts it: header and body.
fn request_bytes<Req: Encodable>(key: ApiKey, v: i16, req: &Req) -> usize {
    es_test_support::wire::request_bytes(key, v, v, 77, CLIENT_ID, req).len()
}

/// Kafka's throttle for `bytes` recorded at once against `quota` bytes/s
/// with the default 11 one-second samples (the rate spread over 10 s).
fn expected_throttle(bytes: usize, quota: f64) -> i32 {
    let rate = bytes as f64 / 10.0;
    ((rate - quota) / quota * 10_000.0).round() as i32
}

#[tokio::test]
async fn a_producer_over_its_byte_rate_gets_its_records_in_and_is_throttled() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = broker(dir.path()).await;
    set_quota(&b, Some("alice"), "producer_byte_rate", 100.0).await;
    let conn = Arc::new(ConnThrottle::default());
    let req = produce_request(1, 5_000);
    let r: ProduceResponse = call_as(&b, alice(&conn), ApiKey::Produce, 9, &req).await;
    let p = &r.responses[0].partition_responses[0];
    assert_eq!((p.error_code, p.base_offset), (0, 0), "appended");
    let want = expected_throttle(request_bytes(ApiKey::Produce, 9, &req), 100.0);
    assert!(want > 0);
    assert_eq!(r.throttle_time_ms, want);
    assert!(conn.muted_until().is_some(), "the connection is muted");

    // Another user has no quota: not throttled.
    let bob = Arc::new(ConnThrottle::default());
    let client = Client {
        throttle: Some(bob.clone()),
        ..super::wire_client::as_principal("User:bob")
    };
    let r: ProduceResponse = call_as(&b, client, ApiKey::Produce, 9, &req).await;
    assert_eq!(r.throttle_time_ms, 0);
    assert!(bob.muted_until().is_none());

    // acks=0: no answer, records in, the connection muted all the same.
    let quiet = Arc::new(ConnThrottle::default());
    let frame = es_test_support::wire::request_bytes(
        ApiKey::Produce,
        9,
        9,
        78,
        CLIENT_ID,
        &produce_request(0, 5_000),
    );
    let out = super::handle_from(b.clone(), alice(&quiet), Bytes::from(frame), Turn::free())
        .await
        .expect("served");
    assert!(out.is_none(), "acks=0 has no response");
    assert!(quiet.muted_until().is_some());
    let t = b.topic("t").expect("topic");
    let hw = t.partition(0).expect("p0").log.high_watermark();
    assert_eq!(hw, 3, "all three produces appended");
}

#[tokio::test]
async fn a_consumer_over_its_byte_rate_gets_an_empty_throttled_answer() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = broker(dir.path()).await;
    let r: ProduceResponse = call(&b, ApiKey::Produce, 9, &produce_request(1, 5_000)).await;
    assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    let mut fp = FetchPartition::default();
    fp.partition = 0;
    fp.fetch_offset = 0;
    fp.partition_max_bytes = 1 << 20;
    let mut ft = FetchTopic::default();
    ft.topic = tn("t");
    ft.partitions = vec![fp];
    let mut req = FetchRequest::default();
    req.max_bytes = 1 << 20;
    req.max_wait_ms = 0;
    req.session_epoch = 0;
    req.topics = vec![ft];
    // Without a quota alice gets the record, and a session.
    let conn = Arc::new(ConnThrottle::default());
    let r: FetchResponse = call_as(&b, alice(&conn), ApiKey::Fetch, 12, &req).await;
    assert_eq!(r.throttle_time_ms, 0);
    assert!(r.session_id != 0);
    assert!(r.responses[0].partitions[0]
        .records
        .as_ref()
        .is_some_and(|x| x.len() > 5_000));

    set_quota(&b, Some("alice"), "consumer_byte_rate", 100.0).await;
    let r: FetchResponse = call_as(&b, alice(&conn), ApiKey::Fetch, 12, &req).await;
    assert!(r.throttle_time_ms > 0);
    assert!(
        r.responses.is_empty(),
        "a throttled fetch answers no partition"
    );
    assert_eq!(r.session_id, 0, "and opens no session");
    assert!(conn.muted_until().is_some());
    // The bytes of a throttled answer are taken back: the same fetch is
    // throttled exactly as much again, not more.
    let again: FetchResponse = call_as(&b, alice(&conn), ApiKey::Fetch, 12, &req).await;
    assert_eq!(again.throttle_time_ms, r.throttle_time_ms);
}

#[tokio::test]
async fn handler_time_over_request_percentage_throttles_any_request() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = broker(dir.path()).await;
    // A quota no handler can stay under: every request is over it, and
    // the request quota throttles for at most one window (1 s).
    set_quota(&b, None, "request_percentage", 1e-9).await;
    let conn = Arc::new(ConnThrottle::default());
    let r: MetadataResponse = call_as(
        &b,
        alice(&conn),
        ApiKey::Metadata,
        12,
        &MetadataRequest::default(),
    )
    .await;
    assert_eq!(r.throttle_time_ms, 1_000);
    assert!(conn.muted_until().is_some());
    let r: DescribeClusterResponse = call_as(
        &b,
        alice(&conn),
        ApiKey::DescribeCluster,
        0,
        &DescribeClusterRequest::default(),
    )
    .await;
    assert_eq!(r.throttle_time_ms, 1_000);
    // ApiVersions is not counted; requests made inside the broker neither.
    let fresh = Arc::new(ConnThrottle::default());
    let r: ApiVersionsResponse = call_as(
        &b,
        alice(&fresh),
        ApiKey::ApiVersions,
        3,
        &ApiVersionsRequest::default(),
    )
    .await;
    assert_eq!(r.throttle_time_ms, 0);
    assert!(fresh.muted_until().is_none());
    let r: MetadataResponse = call(&b, ApiKey::Metadata, 12, &MetadataRequest::default()).await;
    assert_eq!(r.throttle_time_ms, 0);
}

fn frame_of<Req: Encodable>(key: ApiKey, v: i16, correlation_id: i32, req: &Req) -> Vec<u8> {
    es_test_support::wire::size_prefixed(&es_test_support::wire::request_bytes(
        key,
        v,
        v,
        correlation_id,
        CLIENT_ID,
        req,
    ))
}

async fn read_response<Resp: Decodable>(
    r: &mut (impl tokio::io::AsyncRead + Unpin),
    key: ApiKey,
    v: i16,
) -> (i32, Resp) {
    use tokio::io::AsyncReadExt;
    let mut size = [0u8; 4];
    r.read_exact(&mut size).await.expect("size");
    let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
    r.read_exact(&mut body).await.expect("body");
    let mut body = Bytes::from(body);
    let h = ResponseHeader::decode(&mut body, key.response_header_version(v)).expect("header");
    let resp = Resp::decode(&mut body, v).expect("response");
    assert_eq!(body.remaining(), 0);
    (h.correlation_id, resp)
}

#[tokio::test]
async fn a_throttled_connection_takes_no_request_before_its_mute_ends() {
    use tokio::io::AsyncWriteExt;
    let dir = tempfile::tempdir().expect("tmp");
    let b = broker(dir.path()).await;
    let req = produce_request(1, 5_000);
    // A quota that makes this produce about 300 ms over.
    let size = request_bytes(ApiKey::Produce, 9, &req);
    let quota = (size as f64 * 10.0 / 103.0).floor();
    set_quota(&b, Some("alice"), "producer_byte_rate", quota).await;
    let want = expected_throttle(size, quota);
    assert!(want >= 250, "{want}");

    let (client, server) = tokio::io::duplex(1 << 20);
    let session = crate::connection::Session {
        listener: Some(Arc::from("CLIENTS")),
        principal: Arc::new("User:alice".parse().expect("principal")),
        sasl: None,
        connection: None,
    };
    let (_stop, shutdown) = tokio::sync::watch::channel(false);
    let serving = tokio::spawn(crate::connection::serve(
        b.clone(),
        server,
        "127.0.0.1:5555".into(),
        session,
        shutdown,
    ));
    let (mut rd, mut wr) = tokio::io::split(client);
    let sent = tokio::time::Instant::now();
    wr.write_all(&frame_of(ApiKey::Produce, 9, 1, &req))
        .await
        .expect("write");
    let (id, r): (i32, ProduceResponse) = read_response(&mut rd, ApiKey::Produce, 9).await;
    assert_eq!((id, r.throttle_time_ms), (1, want));
    // The next request waits for the mute, counted from when the produce
    // was throttled (after it was sent).
    wr.write_all(&frame_of(
        ApiKey::ApiVersions,
        3,
        2,
        &ApiVersionsRequest::default(),
    ))
    .await
    .expect("write");
    let (id, _): (i32, ApiVersionsResponse) = read_response(&mut rd, ApiKey::ApiVersions, 3).await;
    assert_eq!(id, 2);
    let waited = sent.elapsed();
    assert!(
        waited >= Duration::from_millis(want as u64),
        "answered after {waited:?}, muted for {want} ms"
    );
    drop(wr);
    drop(rd);
    let _ = tokio::time::timeout(Duration::from_secs(30), serving).await;
}
