//! Helpers of the transaction tests across nodes (tests/cluster.rs,
//! tests/txn_failover.rs): a read_committed fetch and the batches of a
//! record set, with each control batch's marker.

use std::time::Duration;

use es_test_support::wire::KafkaClient;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

/// One batch of a fetched partition.
#[derive(Debug, PartialEq, Eq)]
pub struct Batch {
    pub base_offset: i64,
    pub producer_id: i64,
    /// For a control batch: 1 COMMIT, 0 ABORT.
    pub control: Option<i16>,
}

fn varint(buf: &[u8], at: &mut usize) -> i64 {
    let mut v: u64 = 0;
    let mut shift = 0;
    loop {
        let b = buf[*at];
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return ((v >> 1) as i64) ^ -((v & 1) as i64);
        }
        shift += 7;
    }
}

fn be<const N: usize>(b: &[u8]) -> [u8; N] {
    b[..N].try_into().expect("a fixed-size field")
}

/// The batches of a v2 record set (header fields and, for control batches,
/// the marker type from the first record's key).
pub fn batches(mut buf: &[u8]) -> Vec<Batch> {
    let mut out = Vec::new();
    while buf.len() >= 61 {
        let base_offset = i64::from_be_bytes(be(&buf[0..]));
        let len = i32::from_be_bytes(be(&buf[8..])) as usize;
        let batch = &buf[..12 + len];
        let attributes = i16::from_be_bytes(be(&batch[21..]));
        let producer_id = i64::from_be_bytes(be(&batch[43..]));
        let control = (attributes & 0x20 != 0).then(|| {
            let mut at = 61;
            let _len = varint(batch, &mut at);
            at += 1; // attributes
            let _ts = varint(batch, &mut at);
            let _od = varint(batch, &mut at);
            let key_len = varint(batch, &mut at);
            assert_eq!(key_len, 4, "a control record's key");
            i16::from_be_bytes(be(&batch[at + 2..]))
        });
        out.push(Batch {
            base_offset,
            producer_id,
            control,
        });
        buf = &buf[12 + len..];
    }
    out
}

/// A read_committed fetch of `topic`/`partition` from `addr` (its leader),
/// from offset 0: (error, last stable offset, batches, (producer id, first
/// offset) of the aborted transactions).
pub fn read_committed(
    addr: &str,
    topic: &str,
    partition: i32,
) -> (i16, i64, Vec<Batch>, Vec<(i64, i64)>) {
    let mut p = FetchPartition::default();
    p.partition = partition;
    p.fetch_offset = 0;
    p.partition_max_bytes = 1 << 20;
    let mut t = FetchTopic::default();
    t.topic = TopicName(StrBytes::from_string(topic.to_string()));
    t.partitions = vec![p];
    let mut req = FetchRequest::default();
    req.replica_id = BrokerId(-1);
    req.max_wait_ms = 0;
    req.max_bytes = 1 << 20;
    req.isolation_level = 1;
    req.topics = vec![t];
    let mut c = KafkaClient::connect_with_timeout(addr, "txn-test", Duration::from_secs(60));
    let r: FetchResponse = c.call(ApiKey::Fetch, 11, &req);
    let p = &r.responses[0].partitions[0];
    let aborted = p
        .aborted_transactions
        .iter()
        .flatten()
        .map(|a| (a.producer_id.0, a.first_offset))
        .collect();
    let records = p.records.clone().unwrap_or_default();
    (
        p.error_code,
        p.last_stable_offset,
        batches(&records),
        aborted,
    )
}
