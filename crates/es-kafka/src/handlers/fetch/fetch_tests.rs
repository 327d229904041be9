//! Read-ahead through the real dispatcher: a consumer reading a
//! partition from the start in small fetches gets, fetch after fetch,
//! exactly the bytes a broker without read-ahead returns, for both
//! isolation levels, and every fetch that left more to read has the
//! next one held or being prepared.

use std::path::Path;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{ApiKey, FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::*;
use crate::handlers::wire_client::{broker_with_topic, call};
use crate::{Broker, BrokerConfig};
use es_storage::{ProducerAppend, ProducerInfo, RecordBatchBuf, RecordMeta};

const RECORDS: u64 = 3_000;
const PARTITION_MAX_BYTES: i32 = 16 * 1024;

async fn open(dir: &Path, read_ahead: usize) -> Arc<Broker> {
    let mut cfg = BrokerConfig::new(dir.join("data"), "127.0.0.1:9092");
    cfg.fetch_read_ahead_bytes = read_ahead;
    let (b, topic) = broker_with_topic(cfg, "t").await;
    let log = topic
        .partition(0)
        .expect("partition 0")
        .log
        .storage()
        .clone();
    // The same records in both brokers: plain ones, with an aborted
    // transaction in the middle for read_committed.
    tokio::task::spawn_blocking(move || {
        let plain = RecordMeta::default();
        let mut i = 0u64;
        while i < RECORDS {
            let mut batch = RecordBatchBuf::new();
            for j in 0..50 {
                let key = format!("key-{}", (i + j) % 97);
                let value = format!("value-{}-{}", i + j, "v".repeat(150));
                batch.push(
                    1_000,
                    Some(key.as_bytes()),
                    Some(value.as_bytes()),
                    std::iter::empty(),
                    &plain,
                );
            }
            let info = log.append(&mut batch).expect("append");
            log.wait_durable(info.last_offset + 1).expect("durable");
            i += 50;
            if i == RECORDS / 2 {
                let mut batch = RecordBatchBuf::new();
                let txn = RecordMeta {
                    producer: Some(ProducerInfo {
                        producer_id: 4,
                        producer_epoch: 0,
                        sequence: 0,
                    }),
                    transactional: true,
                    control: false,
                };
                for _ in 0..20 {
                    batch.push(1_000, None, Some(b"aborted"), std::iter::empty(), &txn);
                }
                let p = ProducerAppend {
                    producer_id: 4,
                    producer_epoch: 0,
                    base_sequence: 0,
                    record_count: 20,
                    transactional: true,
                };
                log.append_producer(&mut batch, Some(&p)).expect("txn");
                let m = log.append_marker(4, 0, false, 1, 1_000).expect("abort");
                log.wait_durable(m.last_offset + 1).expect("durable");
                i += 21;
            }
        }
    })
    .await
    .expect("join");
    b
}

async fn fetch(b: &Arc<Broker>, offset: i64, isolation: i8) -> (Bytes, Vec<(i64, i64)>) {
    let mut p = FetchPartition::default();
    p.partition = 0;
    p.fetch_offset = offset;
    p.partition_max_bytes = PARTITION_MAX_BYTES;
    p.log_start_offset = -1;
    p.current_leader_epoch = -1;
    let mut t = FetchTopic::default();
    t.topic = TopicName(StrBytes::from_static_str("t"));
    t.partitions = vec![p];
    let mut req = FetchRequest::default();
    req.max_wait_ms = 0;
    req.min_bytes = 0;
    req.max_bytes = 1024 * 1024;
    req.isolation_level = isolation;
    req.session_epoch = -1;
    req.topics = vec![t];
    let r: FetchResponse = call(b, ApiKey::Fetch, 12, &req).await;
    let p = &r.responses[0].partitions[0];
    assert_eq!(p.error_code, NONE);
    let aborted = p
        .aborted_transactions
        .iter()
        .flatten()
        .map(|a| (a.producer_id.0, a.first_offset))
        .collect();
    (p.records.clone().unwrap_or_default(), aborted)
}

/// The offset after the last batch in `records` (Kafka batch v2 headers).
fn next_offset(records: &[u8]) -> Option<i64> {
    let mut pos = 0usize;
    let mut next = None;
    while pos + 27 <= records.len() {
        let base = i64::from_be_bytes(records[pos..pos + 8].try_into().ok()?);
        let len = i32::from_be_bytes(records[pos + 8..pos + 12].try_into().ok()?);
        let delta = i32::from_be_bytes(records[pos + 23..pos + 27].try_into().ok()?);
        next = Some(base + i64::from(delta) + 1);
        pos += 12 + usize::try_from(len).ok()?;
    }
    next
}

/// Reads the whole partition in small fetches: every response, in order.
async fn read_through(
    b: &Arc<Broker>,
    isolation: i8,
    expect_ahead: bool,
) -> Vec<(Bytes, Vec<(i64, i64)>)> {
    let slot = b.topic("t").and_then(|t| t.partition(0)).expect("slot");
    let ahead = ReadAheadCache::of(b).partition(&slot);
    let mut out = Vec::new();
    let mut offset = 0i64;
    loop {
        let (records, aborted) = fetch(b, offset, isolation).await;
        let Some(next) = next_offset(&records) else {
            break;
        };
        out.push((records, aborted));
        offset = next;
        let held = ahead.offsets();
        if expect_ahead && (next as u64) < slot.log.high_watermark() {
            // Only the next fetch: the one this fetch asked for was
            // taken (prepared by the fetch before it).
            assert_eq!(held, vec![next as u64], "fetch from {offset}");
            // A consumer that takes its time: the next fetch finds its
            // read done (one that comes back at once would wait for it,
            // and make the partition back off).
            let ra = ahead.clone();
            let ready = tokio::task::spawn_blocking(move || ra.wait_prepared(next as u64))
                .await
                .expect("join");
            assert!(ready, "the read from {next} was prepared");
        } else if !expect_ahead {
            assert!(held.is_empty(), "{held:?}");
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_ahead_serves_exactly_what_a_fresh_read_would() {
    let dir = tempfile::tempdir().expect("tmp");
    let with = open(
        &dir.path().join("a"),
        crate::broker::FETCH_READ_AHEAD_BYTES_DEFAULT,
    )
    .await;
    let without = open(&dir.path().join("b"), 0).await;
    for isolation in [0, 1] {
        let a = read_through(&with, isolation, true).await;
        let b = read_through(&without, isolation, false).await;
        assert!(a.len() > 30, "{} fetches", a.len());
        assert_eq!(a.len(), b.len());
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            assert_eq!(x, y, "fetch {i}, isolation {isolation}");
        }
        let aborted: Vec<_> = a.iter().flat_map(|(_, ab)| ab.clone()).collect();
        if isolation == 1 {
            assert!(
                !aborted.is_empty(),
                "read_committed is told of the aborted transaction"
            );
        }
    }
}
