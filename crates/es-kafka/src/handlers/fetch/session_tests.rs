//! Fetch sessions and the shape of a Fetch answer, through the real
//! dispatcher, against what Kafka's FetchManager and KafkaApis answer.

use std::sync::Arc;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::{ApiKey, BrokerId, FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::errors::{code, ResponseError, NONE};
use crate::handlers::wire_client::{broker_with_topic, call};
use crate::topics::Topic;
use crate::{Broker, BrokerConfig};
use es_storage::{RecordBatchBuf, RecordMeta};

async fn open(dir: &std::path::Path) -> (Arc<Broker>, Arc<Topic>) {
    let cfg = BrokerConfig::new(dir.join("data"), "127.0.0.1:9092");
    let (b, t) = broker_with_topic(cfg, "t").await;
    append(&t, 3).await;
    (b, t)
}

/// Appends `n` records to partition 0 of `t`.
async fn append(t: &Arc<Topic>, n: usize) {
    let log = t.partition(0).expect("partition 0").log.storage().clone();
    tokio::task::spawn_blocking(move || {
        let mut batch = RecordBatchBuf::new();
        for i in 0..n {
            let v = format!("v{i}");
            batch.push(
                1_000,
                None,
                Some(v.as_bytes()),
                std::iter::empty(),
                &RecordMeta::default(),
            );
        }
        let info = log.append(&mut batch).expect("append");
        log.wait_durable(info.last_offset + 1).expect("durable");
    })
    .await
    .expect("join");
}

fn part(p: i32, offset: i64) -> FetchPartition {
    let mut fp = FetchPartition::default();
    fp.partition = p;
    fp.fetch_offset = offset;
    fp.partition_max_bytes = 1 << 20;
    fp.log_start_offset = -1;
    fp.current_leader_epoch = -1;
    fp.last_fetched_epoch = -1;
    fp
}

fn topic(name: &str, parts: Vec<FetchPartition>) -> FetchTopic {
    let mut t = FetchTopic::default();
    t.topic = TopicName(StrBytes::from_string(name.to_string()));
    t.partitions = parts;
    t
}

fn request(session_id: i32, epoch: i32, topics: Vec<FetchTopic>) -> FetchRequest {
    let mut req = FetchRequest::default();
    req.replica_id = BrokerId(-1);
    req.max_wait_ms = 0;
    req.min_bytes = 0;
    req.max_bytes = 1 << 20;
    req.session_id = session_id;
    req.session_epoch = epoch;
    req.topics = topics;
    req
}

async fn fetch(b: &Arc<Broker>, req: &FetchRequest) -> FetchResponse {
    call(b, ApiKey::Fetch, 12, req).await
}

/// (topic, partition, error) of every partition answered, in order.
fn shape(r: &FetchResponse) -> Vec<(String, i32, i16)> {
    r.responses
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.topic.0.to_string(), p.partition_index, p.error_code))
        })
        .collect()
}

#[tokio::test]
async fn a_session_answers_only_what_changed() {
    let dir = tempfile::tempdir().expect("tmp");
    let (b, t) = open(dir.path()).await;
    let opened = fetch(&b, &request(0, 0, vec![topic("t", vec![part(0, 0)])])).await;
    assert_eq!(opened.error_code, NONE);
    assert_ne!(opened.session_id, 0, "epoch 0 opens a session");
    assert_eq!(shape(&opened), vec![("t".into(), 0, NONE)]);
    let id = opened.session_id;

    // The client moves to the end (3): no records and the same high
    // watermark, so the partition is left out.
    let same = fetch(&b, &request(id, 1, vec![topic("t", vec![part(0, 3)])])).await;
    assert_eq!((same.error_code, same.session_id), (NONE, id));
    assert!(same.responses.is_empty(), "{:?}", shape(&same));

    // New records move the high watermark: the partition is back, read from
    // the offset the session holds.
    append(&t, 2).await;
    let moved = fetch(&b, &request(id, 2, vec![])).await;
    assert_eq!(shape(&moved), vec![("t".into(), 0, NONE)]);
    let p = &moved.responses[0].partitions[0];
    assert_eq!(p.high_watermark, 5);
    assert_eq!(
        p.records.as_ref().map(|r| &r[..8]),
        Some(&3i64.to_be_bytes()[..])
    );

    // A repeated epoch, an unknown session, session 0 with a later epoch.
    let stale = fetch(&b, &request(id, 2, vec![])).await;
    assert_eq!(
        (stale.error_code, stale.session_id),
        (code(ResponseError::InvalidFetchSessionEpoch), 0)
    );
    let unknown = fetch(&b, &request(id ^ 0x55, 1, vec![])).await;
    assert_eq!(
        unknown.error_code,
        code(ResponseError::FetchSessionIdNotFound)
    );
    let zero = fetch(&b, &request(0, 1, vec![])).await;
    assert_eq!(zero.error_code, code(ResponseError::FetchSessionIdNotFound));

    // Forgetting the last partition closes the session.
    let mut req = request(id, 3, vec![]);
    let mut f = ForgottenTopic::default();
    f.topic = TopicName(StrBytes::from_static_str("t"));
    f.partitions = vec![0];
    req.forgotten_topics_data = vec![f];
    let closed = fetch(&b, &req).await;
    assert_eq!((closed.error_code, closed.session_id), (NONE, 0));
    let after = fetch(&b, &request(id, 4, vec![])).await;
    assert_eq!(
        after.error_code,
        code(ResponseError::FetchSessionIdNotFound)
    );
}

#[tokio::test]
async fn a_full_fetch_closes_the_session_it_names() {
    let dir = tempfile::tempdir().expect("tmp");
    let (b, _t) = open(dir.path()).await;
    let parts = || vec![topic("t", vec![part(0, 0)])];
    let id = fetch(&b, &request(0, 0, parts())).await.session_id;
    // Session id -1 or the live one with epoch -1: sessionless, all data.
    for sid in [-1, id] {
        let r = fetch(&b, &request(sid, -1, parts())).await;
        assert_eq!((r.error_code, r.session_id), (NONE, 0));
        assert_eq!(shape(&r), vec![("t".into(), 0, NONE)]);
    }
    let gone = fetch(&b, &request(id, 1, vec![])).await;
    assert_eq!(gone.error_code, code(ResponseError::FetchSessionIdNotFound));
    // A session id no shard of Kafka's cache owns fails the request.
    let r = fetch(&b, &request(i32::MAX, -1, parts())).await;
    assert_eq!(
        (r.error_code, r.session_id),
        (code(ResponseError::UnknownServerError), i32::MAX)
    );
    assert_eq!(shape(&r), vec![("t".into(), 0, -1)]);
}

#[tokio::test]
async fn unknown_partitions_come_last_and_repeats_once() {
    let dir = tempfile::tempdir().expect("tmp");
    let (b, _t) = open(dir.path()).await;
    let req = request(
        0,
        -1,
        vec![
            topic("nope", vec![part(0, 0)]),
            topic("t", vec![part(7, 0), part(0, 0)]),
            topic("t", vec![part(0, 1)]),
            topic("empty", vec![]),
        ],
    );
    let r = fetch(&b, &req).await;
    let unknown = code(ResponseError::UnknownTopicOrPartition);
    assert_eq!(
        shape(&r),
        vec![
            ("t".into(), 0, NONE),
            ("nope".into(), 0, unknown),
            ("t".into(), 7, unknown),
        ]
    );
    let p = &r.responses[2].partitions[0];
    assert_eq!((p.high_watermark, p.log_start_offset), (-1, -1));
    assert_eq!(p.aborted_transactions.as_deref(), Some(&[][..]));
}

#[tokio::test]
async fn replicas_and_unknown_isolation_levels_are_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    let (b, t) = open(dir.path()).await;
    let mut req = request(0, -1, vec![topic("t", vec![part(0, 0)])]);
    req.replica_id = BrokerId(0);
    let r = fetch(&b, &req).await;
    assert_eq!(
        shape(&r),
        vec![("t".into(), 0, code(ResponseError::NotLeaderOrFollower))]
    );
    assert_eq!(r.responses[0].partitions[0].high_watermark, -1);

    let mut req = request(0, -1, vec![topic("t", vec![part(0, 0)])]);
    req.isolation_level = 5;
    let r = fetch(&b, &req).await;
    assert_eq!(r.error_code, code(ResponseError::UnknownServerError));
    assert_eq!(shape(&r), vec![("t".into(), 0, -1)]);
    let r: FetchResponse = call(&b, ApiKey::Fetch, 13, &{
        let mut req = req.clone();
        req.topics[0].topic_id = t.id;
        req
    })
    .await;
    assert_eq!(r.error_code, code(ResponseError::UnknownServerError));
    assert!(r.responses.is_empty());
}

#[tokio::test]
async fn a_negative_budget_fails_the_read_as_in_kafka() {
    let dir = tempfile::tempdir().expect("tmp");
    let (b, _t) = open(dir.path()).await;
    let mut req = request(0, -1, vec![topic("t", vec![part(0, 0)])]);
    req.max_bytes = -1;
    let r = fetch(&b, &req).await;
    assert_eq!(shape(&r), vec![("t".into(), 0, -1)]);
    let mut req = request(0, -1, vec![topic("t", vec![part(0, 0)])]);
    req.topics[0].partitions[0].partition_max_bytes = -1;
    let r = fetch(&b, &req).await;
    assert_eq!(shape(&r), vec![("t".into(), 0, -1)]);
    // At the end of the log there is nothing to read, and no failure.
    let mut req = request(0, -1, vec![topic("t", vec![part(0, 3)])]);
    req.max_bytes = -1;
    let r = fetch(&b, &req).await;
    assert_eq!(shape(&r), vec![("t".into(), 0, NONE)]);
}
