//! Helpers of the transaction tests across nodes (tests/cluster.rs,
//! tests/txn_failover.rs, tests/txn_remote_failover.rs): a read_committed
//! fetch and the batches of a record set, with each control batch's marker;
//! finding a key's coordinator; InitProducerId.

use std::time::Duration;

use es_test_support::wait::eventually;
use es_test_support::wire::KafkaClient;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::cluster::Cluster;

/// FindCoordinator's key types.
pub const GROUP_KEY: i8 = 0;
pub const TRANSACTION_KEY: i8 = 1;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn client(addr: &str) -> KafkaClient {
    KafkaClient::connect_with_timeout(addr, "txn-test", Duration::from_secs(60))
}

/// The coordinator FindCoordinator (v4) names for `key` through `addr`.
pub fn find_coordinator(addr: &str, key_type: i8, key: &str) -> Option<i32> {
    let mut req = FindCoordinatorRequest::default();
    req.key_type = key_type;
    req.coordinator_keys = vec![s(key)];
    let r: FindCoordinatorResponse = client(addr).call(ApiKey::FindCoordinator, 4, &req);
    let c = r.coordinators.first()?;
    (c.error_code == 0).then_some(c.node_id.0)
}

/// The coordinator of `key` once every live node of `c` names the same one,
/// other than `not`.
pub fn agreed_coordinator(c: &Cluster, key_type: i8, key: &str, not: Option<i32>) -> i32 {
    eventually(Duration::from_secs(90), "one coordinator named", || {
        let named: Vec<Option<i32>> = c
            .nodes
            .keys()
            .map(|&n| find_coordinator(&c.addr(n), key_type, key))
            .collect();
        let first = named[0]?;
        (named.iter().all(|x| *x == Some(first)) && Some(first) != not).then_some(first)
    })
}

/// InitProducerId (v4) for transactional id `id` at `addr` with a
/// transaction timeout of `timeout_ms`: (error, producer id, epoch).
pub fn init_producer_id(addr: &str, id: &str, timeout_ms: i32) -> (i16, i64, i16) {
    let mut req = InitProducerIdRequest::default();
    req.transactional_id = Some(TransactionalId(s(id)));
    req.transaction_timeout_ms = timeout_ms;
    req.producer_id = ProducerId(-1);
    req.producer_epoch = -1;
    let r: InitProducerIdResponse = client(addr).call(ApiKey::InitProducerId, 4, &req);
    (r.error_code, r.producer_id.0, r.producer_epoch)
}

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

/// EndTxn (v3) of `id`'s transaction (`pid`, `epoch`) at `addr`: the error.
pub fn end_txn(addr: &str, id: &str, pid: i64, epoch: i16, commit: bool) -> i16 {
    let mut req = EndTxnRequest::default();
    req.transactional_id = TransactionalId(s(id));
    req.producer_id = ProducerId(pid);
    req.producer_epoch = epoch;
    req.committed = commit;
    let r: EndTxnResponse = client(addr).call(ApiKey::EndTxn, 3, &req);
    r.error_code
}
