//! Wire-level tests of idempotent and transactional producers: requests
//! encoded with kafka-protocol (record batches with the codec) go through
//! the real dispatcher ([`crate::handlers::handle`]) of a broker on a
//! temporary directory, and the responses are decoded at the same version.
//! A "crash" drops the broker without closing it (no producer snapshot, no
//! journal fold), so reopening replays the logs and the journal.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::*;

use crate::errors::{ResponseError, NONE};
use crate::handlers::wire_client::{c, call, open, s};
use crate::versions::advertised;
use crate::Broker;
use es_storage::record::RecordIter;
use es_test_support::batch::{producer_meta, KafkaBatch};

/// One Kafka batch of `n` records from producer `pid`/`epoch` starting at
/// sequence `seq` (the codec encodes stored records back into batches).
fn batch(pid: i64, epoch: i16, seq: i32, n: u32, transactional: bool) -> Bytes {
    let mut b = KafkaBatch::new();
    for i in 0..n {
        let seq = seq + i as i32;
        let v = format!("v{seq}");
        b.record(
            1_700_000_000_000,
            None,
            Some(v.as_bytes()),
            &[],
            &producer_meta(pid, epoch, seq, transactional),
        );
    }
    Bytes::from(b.encode())
}

/// Produces `records` to `topic`/0; returns (error, base offset).
async fn produce(
    b: &Arc<Broker>,
    v: i16,
    txn: Option<&str>,
    topic: &str,
    records: Bytes,
) -> (i16, i64) {
    let mut pd = PartitionProduceData::default();
    pd.index = 0;
    pd.records = Some(records);
    let mut td = TopicProduceData::default();
    td.name = TopicName(s(topic));
    td.partition_data = vec![pd];
    let mut req = ProduceRequest::default();
    req.transactional_id = txn.map(|t| TransactionalId(s(t)));
    req.acks = -1;
    req.timeout_ms = 30_000;
    req.topic_data = vec![td];
    let r: ProduceResponse = call(b, ApiKey::Produce, v, &req).await;
    let p = &r.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

async fn init(
    b: &Arc<Broker>,
    v: i16,
    txn: Option<&str>,
    producer: (i64, i16),
) -> InitProducerIdResponse {
    let mut req = InitProducerIdRequest::default();
    req.transactional_id = txn.map(|t| TransactionalId(s(t)));
    req.transaction_timeout_ms = 60_000;
    req.producer_id = ProducerId(producer.0);
    req.producer_epoch = producer.1;
    call(b, ApiKey::InitProducerId, v, &req).await
}

async fn add_partition(b: &Arc<Broker>, txn: &str, pe: (i64, i16), topic: &str) -> i16 {
    let mut t = AddPartitionsToTxnTopic::default();
    t.name = TopicName(s(topic));
    t.partitions = vec![0];
    let mut req = AddPartitionsToTxnRequest::default();
    req.v3_and_below_transactional_id = TransactionalId(s(txn));
    req.v3_and_below_producer_id = ProducerId(pe.0);
    req.v3_and_below_producer_epoch = pe.1;
    req.v3_and_below_topics = vec![t];
    let r: AddPartitionsToTxnResponse = call(b, ApiKey::AddPartitionsToTxn, 3, &req).await;
    r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
}

async fn end(b: &Arc<Broker>, txn: &str, pe: (i64, i16), commit: bool) -> i16 {
    let mut req = EndTxnRequest::default();
    req.transactional_id = TransactionalId(s(txn));
    req.producer_id = ProducerId(pe.0);
    req.producer_epoch = pe.1;
    req.committed = commit;
    let r: EndTxnResponse = call(b, ApiKey::EndTxn, 3, &req).await;
    r.error_code
}

async fn fetch(b: &Arc<Broker>, topic: &str, offset: i64, isolation: i8) -> PartitionData {
    let mut fp = FetchPartition::default();
    fp.partition = 0;
    fp.fetch_offset = offset;
    fp.partition_max_bytes = 1 << 20;
    let mut ft = FetchTopic::default();
    ft.topic = TopicName(s(topic));
    ft.partitions = vec![fp];
    let mut req = FetchRequest::default();
    req.max_wait_ms = 0;
    req.min_bytes = 0;
    req.max_bytes = 1 << 20;
    req.isolation_level = isolation;
    req.topics = vec![ft];
    let r: FetchResponse = call(b, ApiKey::Fetch, 11, &req).await;
    r.responses[0].partitions[0].clone()
}

/// Record values in fetched batches (control records excluded).
fn values(records: &Bytes) -> Vec<String> {
    let mut summaries = Vec::new();
    let mut storage = es_storage::RecordBatchBuf::new();
    let limits = crate::codec::batch::DecodeLimits::trusted(1 << 20);
    crate::codec::batch::decode_batches(records, &mut storage, &limits, &mut summaries)
        .expect("decode fetched batches");
    RecordIter::new(storage.seal(0))
        .map(|r| r.expect("record"))
        .filter(|r| !r.meta.control)
        .map(|r| String::from_utf8_lossy(r.value.unwrap_or_default()).into_owned())
        .collect()
}

async fn topic(b: &Arc<Broker>, name: &str) {
    b.create_topic(name, 1, Default::default(), false)
        .await
        .expect("create topic");
}

#[tokio::test(flavor = "multi_thread")]
async fn duplicate_batch_gets_its_original_offsets() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = open(dir.path()).await;
    topic(&b, "t").await;
    let r = init(&b, 4, None, (-1, -1)).await;
    assert_eq!(r.error_code, NONE);
    let (pid, ep) = (r.producer_id.0, r.producer_epoch);
    assert_eq!(
        produce(&b, 9, None, "t", batch(pid, ep, 0, 3, false)).await,
        (NONE, 0)
    );
    // Another producer in between.
    assert_eq!(
        produce(&b, 9, None, "t", batch(pid + 1000, 0, 0, 1, false)).await,
        (NONE, 3)
    );
    // The retry: NONE and the original base offset, nothing appended.
    assert_eq!(
        produce(&b, 9, None, "t", batch(pid, ep, 0, 3, false)).await,
        (NONE, 0)
    );
    assert_eq!(
        produce(&b, 3, None, "t", batch(pid, ep, 0, 3, false)).await,
        (NONE, 0)
    );
    assert_eq!(
        produce(&b, 9, None, "t", batch(pid, ep, 3, 2, false)).await,
        (NONE, 4)
    );
    let got = fetch(&b, "t", 0, 0).await;
    assert_eq!(got.high_watermark, 6);
    assert_eq!(values(got.records.as_ref().expect("records")).len(), 6);
    // No transaction marker ever touched this idempotent producer: Kafka
    // reports its coordinator epoch as -1.
    let mut tr = TopicRequest::default();
    tr.name = TopicName(s("t"));
    tr.partition_indexes = vec![0];
    let mut req = DescribeProducersRequest::default();
    req.topics = vec![tr];
    let r: DescribeProducersResponse = call(&b, ApiKey::DescribeProducers, 0, &req).await;
    let me = r.topics[0].partitions[0]
        .active_producers
        .iter()
        .find(|p| p.producer_id.0 == pid)
        .expect("our producer");
    assert_eq!((me.last_sequence, me.coordinator_epoch), (4, -1));
}

#[tokio::test(flavor = "multi_thread")]
async fn sequence_gap_is_out_of_order() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = open(dir.path()).await;
    topic(&b, "t").await;
    let r = init(&b, 4, None, (-1, -1)).await;
    let (pid, ep) = (r.producer_id.0, r.producer_epoch);
    assert_eq!(
        produce(&b, 9, None, "t", batch(pid, ep, 0, 2, false))
            .await
            .0,
        NONE
    );
    let (e, base) = produce(&b, 9, None, "t", batch(pid, ep, 5, 1, false)).await;
    assert_eq!(e, c(ResponseError::OutOfOrderSequenceNumber));
    assert_eq!(base, -1);
    // The gap did not advance anything: the right next sequence still works.
    assert_eq!(
        produce(&b, 9, None, "t", batch(pid, ep, 2, 1, false)).await,
        (NONE, 2)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn stale_epoch_after_kip360_bump() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = open(dir.path()).await;
    topic(&b, "t").await;
    let r = init(&b, 4, None, (-1, -1)).await;
    let (pid, ep) = (r.producer_id.0, r.producer_epoch);
    assert_eq!(
        produce(&b, 9, None, "t", batch(pid, ep, 0, 1, false))
            .await
            .0,
        NONE
    );
    // KIP-360: the producer recovers with its id and epoch and gets the next epoch.
    let r = init(&b, 4, None, (pid, ep)).await;
    assert_eq!(r.error_code, NONE);
    assert_eq!((r.producer_id.0, r.producer_epoch), (pid, ep + 1));
    assert_eq!(
        produce(&b, 9, None, "t", batch(pid, ep + 1, 0, 1, false)).await,
        (NONE, 1)
    );
    let (e, _) = produce(&b, 9, None, "t", batch(pid, ep, 1, 1, false)).await;
    assert_eq!(e, c(ResponseError::InvalidProducerEpoch));
    // Half a producer identity is an invalid request.
    assert_eq!(
        init(&b, 4, None, (pid, -1)).await.error_code,
        c(ResponseError::InvalidRequest)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn duplicate_after_crash_and_ids_not_reused() {
    let dir = tempfile::tempdir().expect("tmp");
    let (pid, ep);
    {
        let b = open(dir.path()).await;
        topic(&b, "t").await;
        let r = init(&b, 4, None, (-1, -1)).await;
        (pid, ep) = (r.producer_id.0, r.producer_epoch);
        assert_eq!(
            produce(&b, 9, None, "t", batch(pid, ep, 0, 4, false)).await,
            (NONE, 0)
        );
        assert_eq!(
            produce(&b, 9, None, "t", batch(pid, ep, 4, 1, false)).await,
            (NONE, 4)
        );
        // Dropped without close: no snapshot, no fold. (Its metadata
        // quorum node is stopped: one per data directory at a time.)
        b.stop_metadata().await;
    }
    let b = open(dir.path()).await;
    assert_eq!(
        produce(&b, 9, None, "t", batch(pid, ep, 4, 1, false)).await,
        (NONE, 4)
    );
    assert_eq!(
        produce(&b, 9, None, "t", batch(pid, ep, 0, 4, false)).await,
        (NONE, 0)
    );
    assert_eq!(
        produce(&b, 9, None, "t", batch(pid, ep, 5, 1, false)).await,
        (NONE, 5)
    );
    let (e, _) = produce(&b, 9, None, "t", batch(pid, ep, 9, 1, false)).await;
    assert_eq!(e, c(ResponseError::OutOfOrderSequenceNumber));
    let r = init(&b, 4, None, (-1, -1)).await;
    assert!(
        r.producer_id.0 > pid,
        "a producer id is never handed out twice"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn transactional_produce_needs_the_partition_in_the_transaction() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = open(dir.path()).await;
    topic(&b, "t").await;
    topic(&b, "u").await;
    let r = init(&b, 4, Some("tx"), (-1, -1)).await;
    assert_eq!(r.error_code, NONE);
    let pe = (r.producer_id.0, r.producer_epoch);
    // Not added: INVALID_TXN_STATE for old versions, TRANSACTION_ABORTABLE for v11.
    let tb = || batch(pe.0, pe.1, 0, 1, true);
    assert_eq!(
        produce(&b, 3, Some("tx"), "t", tb()).await.0,
        c(ResponseError::InvalidTxnState)
    );
    assert_eq!(
        produce(&b, 10, Some("tx"), "t", tb()).await.0,
        c(ResponseError::InvalidTxnState)
    );
    assert_eq!(
        produce(&b, 11, Some("tx"), "t", tb()).await.0,
        c(ResponseError::TransactionAbortable)
    );
    assert_eq!(
        produce(&b, 12, Some("tx"), "t", tb()).await.0,
        c(ResponseError::InvalidTxnState)
    );
    // No transactional id on the request.
    assert_eq!(
        produce(&b, 9, None, "t", tb()).await.0,
        c(ResponseError::TransactionalIdAuthorizationFailed)
    );
    assert_eq!(add_partition(&b, "tx", pe, "t").await, NONE);
    assert_eq!(produce(&b, 9, Some("tx"), "t", tb()).await, (NONE, 0));
    // A different (wrong) epoch is fenced.
    let stale = batch(pe.0, pe.1 - 1, 1, 1, true);
    assert_eq!(
        produce(&b, 9, Some("tx"), "t", stale).await.0,
        c(ResponseError::InvalidProducerEpoch)
    );
    // Unknown partitions fail the whole AddPartitionsToTxn.
    let mut t1 = AddPartitionsToTxnTopic::default();
    t1.name = TopicName(s("u"));
    t1.partitions = vec![0, 7];
    let mut req = AddPartitionsToTxnRequest::default();
    req.v3_and_below_transactional_id = TransactionalId(s("tx"));
    req.v3_and_below_producer_id = ProducerId(pe.0);
    req.v3_and_below_producer_epoch = pe.1;
    req.v3_and_below_topics = vec![t1];
    let r: AddPartitionsToTxnResponse = call(&b, ApiKey::AddPartitionsToTxn, 2, &req).await;
    let codes: Vec<i16> = r.results_by_topic_v3_and_below[0]
        .results_by_partition
        .iter()
        .map(|p| p.partition_error_code)
        .collect();
    assert_eq!(
        codes,
        vec![
            c(ResponseError::OperationNotAttempted),
            c(ResponseError::UnknownTopicOrPartition)
        ]
    );
    // The KIP-890 verify-only form (v4+).
    let mut vt = AddPartitionsToTxnTopic::default();
    vt.name = TopicName(s("t"));
    vt.partitions = vec![0];
    let mut vu = AddPartitionsToTxnTopic::default();
    vu.name = TopicName(s("u"));
    vu.partitions = vec![0];
    let mut tx = AddPartitionsToTxnTransaction::default();
    tx.transactional_id = TransactionalId(s("tx"));
    tx.producer_id = ProducerId(pe.0);
    tx.producer_epoch = pe.1;
    tx.verify_only = true;
    tx.topics = vec![vt, vu];
    let mut req = AddPartitionsToTxnRequest::default();
    req.transactions = vec![tx];
    let r: AddPartitionsToTxnResponse = call(&b, ApiKey::AddPartitionsToTxn, 5, &req).await;
    let res = &r.results_by_transaction[0];
    assert_eq!(
        res.topic_results[0].results_by_partition[0].partition_error_code,
        NONE
    );
    assert_eq!(
        res.topic_results[1].results_by_partition[0].partition_error_code,
        c(ResponseError::TransactionAbortable)
    );
    // Old clients get INVALID_PRODUCER_EPOCH instead of PRODUCER_FENCED.
    assert_eq!(
        end(&b, "tx", (pe.0, pe.1 + 3), true).await,
        c(ResponseError::ProducerFenced)
    );
    let mut req = EndTxnRequest::default();
    req.transactional_id = TransactionalId(s("tx"));
    req.producer_id = ProducerId(pe.0);
    req.producer_epoch = pe.1 + 3;
    req.committed = true;
    let r: EndTxnResponse = call(&b, ApiKey::EndTxn, 1, &req).await;
    assert_eq!(r.error_code, c(ResponseError::InvalidProducerEpoch));
    assert_eq!(end(&b, "tx", pe, true).await, NONE);
}

#[tokio::test(flavor = "multi_thread")]
async fn read_committed_fetch_stops_at_the_lso_and_lists_aborts() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = open(dir.path()).await;
    topic(&b, "t").await;
    let r = init(&b, 4, Some("tx"), (-1, -1)).await;
    let pe = (r.producer_id.0, r.producer_epoch);
    // A committed record before, then an open transaction.
    assert_eq!(
        produce(&b, 9, None, "t", batch(999_999, 0, 0, 1, false))
            .await
            .0,
        NONE
    );
    assert_eq!(add_partition(&b, "tx", pe, "t").await, NONE);
    assert_eq!(
        produce(&b, 9, Some("tx"), "t", batch(pe.0, pe.1, 0, 2, true)).await,
        (NONE, 1)
    );
    let open_rc = fetch(&b, "t", 0, 1).await;
    assert_eq!(open_rc.high_watermark, 3);
    assert_eq!(open_rc.last_stable_offset, 1);
    assert_eq!(
        values(open_rc.records.as_ref().expect("records")),
        vec!["v0"]
    );
    let open_ru = fetch(&b, "t", 0, 0).await;
    assert_eq!(open_ru.last_stable_offset, 1);
    assert_eq!(values(open_ru.records.as_ref().expect("records")).len(), 3);
    assert!(open_ru.aborted_transactions.is_none());
    // Describe while open.
    let mut req = DescribeTransactionsRequest::default();
    req.transactional_ids = vec![TransactionalId(s("tx")), TransactionalId(s("nope"))];
    let r: DescribeTransactionsResponse = call(&b, ApiKey::DescribeTransactions, 0, &req).await;
    let st = &r.transaction_states[0];
    assert_eq!(st.error_code, NONE);
    assert_eq!(st.transaction_state.as_str(), "Ongoing");
    assert_eq!(st.producer_id.0, pe.0);
    assert_eq!(st.topics.len(), 1);
    assert_eq!(st.topics[0].partitions, vec![0]);
    assert_eq!(
        r.transaction_states[1].error_code,
        c(ResponseError::TransactionalIdNotFound)
    );
    let mut req = ListTransactionsRequest::default();
    req.state_filters = vec![s("Ongoing"), s("Bogus")];
    req.duration_filter = -1;
    let r: ListTransactionsResponse = call(&b, ApiKey::ListTransactions, 1, &req).await;
    assert_eq!(r.transaction_states.len(), 1);
    assert_eq!(r.transaction_states[0].transactional_id.0.as_str(), "tx");
    assert_eq!(r.unknown_state_filters, vec![s("Bogus")]);
    let mut tr = TopicRequest::default();
    tr.name = TopicName(s("t"));
    tr.partition_indexes = vec![0, 5];
    let mut req = DescribeProducersRequest::default();
    req.topics = vec![tr];
    let r: DescribeProducersResponse = call(&b, ApiKey::DescribeProducers, 0, &req).await;
    let parts = &r.topics[0].partitions;
    assert_eq!(
        parts[1].error_code,
        c(ResponseError::UnknownTopicOrPartition)
    );
    let me = parts[0]
        .active_producers
        .iter()
        .find(|p| p.producer_id.0 == pe.0)
        .expect("our producer");
    assert_eq!(me.current_txn_start_offset, 1);
    assert_eq!(me.last_sequence, 1);
    // Abort: the LSO moves past the marker and the abort is listed.
    assert_eq!(end(&b, "tx", pe, false).await, NONE);
    let rc = fetch(&b, "t", 0, 1).await;
    assert_eq!(rc.high_watermark, 4);
    assert_eq!(rc.last_stable_offset, 4);
    let aborted = rc.aborted_transactions.expect("aborted list");
    assert_eq!(aborted.len(), 1);
    assert_eq!(
        (aborted[0].producer_id.0, aborted[0].first_offset),
        (pe.0, 1)
    );
    // The records are still there (the consumer skips them with the list).
    assert_eq!(values(rc.records.as_ref().expect("records")).len(), 3);
    // A fetch starting after the aborted range lists nothing.
    let after = fetch(&b, "t", 4, 1).await;
    assert_eq!(after.aborted_transactions.map(|a| a.len()), Some(0));
}

#[tokio::test(flavor = "multi_thread")]
async fn txn_offsets_reach_the_group_only_on_commit() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = open(dir.path()).await;
    topic(&b, "in").await;
    let r = init(&b, 4, Some("tx"), (-1, -1)).await;
    let pe = (r.producer_id.0, r.producer_epoch);
    let commit_offsets = |offset: i64, v: i16| {
        let mut p = TxnOffsetCommitRequestPartition::default();
        p.partition_index = 0;
        p.committed_offset = offset;
        let mut t = TxnOffsetCommitRequestTopic::default();
        t.name = TopicName(s("in"));
        t.partitions = vec![p];
        let mut req = TxnOffsetCommitRequest::default();
        req.transactional_id = TransactionalId(s("tx"));
        req.group_id = GroupId(s("g"));
        req.producer_id = ProducerId(pe.0);
        req.producer_epoch = pe.1;
        req.topics = vec![t];
        let b = b.clone();
        async move {
            let r: TxnOffsetCommitResponse = call(&b, ApiKey::TxnOffsetCommit, v, &req).await;
            r.topics[0].partitions[0].error_code
        }
    };
    // Without AddOffsetsToTxn the group is not in the transaction.
    assert_eq!(
        commit_offsets(5, 3).await,
        c(ResponseError::InvalidTxnState)
    );
    assert_eq!(
        commit_offsets(5, 4).await,
        c(ResponseError::TransactionAbortable)
    );
    let mut req = AddOffsetsToTxnRequest::default();
    req.transactional_id = TransactionalId(s("tx"));
    req.producer_id = ProducerId(pe.0);
    req.producer_epoch = pe.1;
    req.group_id = GroupId(s("g"));
    let r: AddOffsetsToTxnResponse = call(&b, ApiKey::AddOffsetsToTxn, 3, &req).await;
    assert_eq!(r.error_code, NONE);
    assert_eq!(commit_offsets(5, 3).await, NONE);
    let committed = |b: Arc<Broker>| async move {
        let (topics, _) = b
            .groups()
            .fetch_offsets("g", Some(vec![("in".to_string(), vec![0])]), None, &|n| {
                b.topic(n).map(|t| t.id)
            })
            .expect("fetch offsets");
        topics[0].partitions[0].offset
    };
    assert_eq!(
        committed(b.clone()).await,
        -1,
        "not visible before the commit"
    );
    assert!(b.txn().has_pending_offset("g", "in", 0));
    assert_eq!(end(&b, "tx", pe, false).await, NONE);
    assert_eq!(committed(b.clone()).await, -1, "dropped on abort");
    // Next transaction: commit.
    let r: AddOffsetsToTxnResponse = call(&b, ApiKey::AddOffsetsToTxn, 3, &req).await;
    assert_eq!(r.error_code, NONE);
    assert_eq!(commit_offsets(7, 3).await, NONE);
    assert_eq!(end(&b, "tx", pe, true).await, NONE);
    assert_eq!(committed(b.clone()).await, 7);
}

#[tokio::test(flavor = "multi_thread")]
async fn every_advertised_version_of_the_transaction_apis_answers() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = open(dir.path()).await;
    topic(&b, "t").await;
    let range = |k: ApiKey| {
        let a = advertised(k).expect("advertised");
        a.min..=a.max
    };
    for v in range(ApiKey::InitProducerId) {
        let r = init(&b, v, Some("every"), (-1, -1)).await;
        assert_eq!(r.error_code, NONE, "InitProducerId v{v}");
        let r = init(&b, v, None, (-1, -1)).await;
        assert_eq!(r.error_code, NONE, "InitProducerId v{v}");
    }
    let r = init(&b, 4, Some("every"), (-1, -1)).await;
    let pe = (r.producer_id, r.producer_epoch);
    for v in range(ApiKey::AddPartitionsToTxn) {
        let mut t = AddPartitionsToTxnTopic::default();
        t.name = TopicName(s("t"));
        t.partitions = vec![0];
        let mut req = AddPartitionsToTxnRequest::default();
        if v < 4 {
            req.v3_and_below_transactional_id = TransactionalId(s("every"));
            req.v3_and_below_producer_id = pe.0;
            req.v3_and_below_producer_epoch = pe.1;
            req.v3_and_below_topics = vec![t];
        } else {
            let mut tx = AddPartitionsToTxnTransaction::default();
            tx.transactional_id = TransactionalId(s("every"));
            tx.producer_id = pe.0;
            tx.producer_epoch = pe.1;
            tx.topics = vec![t];
            req.transactions = vec![tx];
        }
        let _: AddPartitionsToTxnResponse = call(&b, ApiKey::AddPartitionsToTxn, v, &req).await;
    }
    for v in range(ApiKey::AddOffsetsToTxn) {
        let mut req = AddOffsetsToTxnRequest::default();
        req.transactional_id = TransactionalId(s("every"));
        req.producer_id = pe.0;
        req.producer_epoch = pe.1;
        req.group_id = GroupId(s("g"));
        let r: AddOffsetsToTxnResponse = call(&b, ApiKey::AddOffsetsToTxn, v, &req).await;
        assert_eq!(r.error_code, NONE, "AddOffsetsToTxn v{v}");
    }
    for v in range(ApiKey::TxnOffsetCommit) {
        let mut p = TxnOffsetCommitRequestPartition::default();
        p.partition_index = 0;
        p.committed_offset = 1;
        let mut t = TxnOffsetCommitRequestTopic::default();
        t.name = TopicName(s("t"));
        t.partitions = vec![p];
        let mut req = TxnOffsetCommitRequest::default();
        req.transactional_id = TransactionalId(s("every"));
        req.group_id = GroupId(s("g"));
        req.producer_id = pe.0;
        req.producer_epoch = pe.1;
        req.topics = vec![t];
        let r: TxnOffsetCommitResponse = call(&b, ApiKey::TxnOffsetCommit, v, &req).await;
        assert_eq!(
            r.topics[0].partitions[0].error_code, NONE,
            "TxnOffsetCommit v{v}"
        );
    }
    for v in range(ApiKey::DescribeTransactions) {
        let mut req = DescribeTransactionsRequest::default();
        req.transactional_ids = vec![TransactionalId(s("every"))];
        let r: DescribeTransactionsResponse = call(&b, ApiKey::DescribeTransactions, v, &req).await;
        assert_eq!(r.transaction_states[0].error_code, NONE);
    }
    for v in range(ApiKey::ListTransactions) {
        let r: ListTransactionsResponse = call(
            &b,
            ApiKey::ListTransactions,
            v,
            &ListTransactionsRequest::default(),
        )
        .await;
        assert_eq!(r.error_code, NONE);
        assert!(!r.transaction_states.is_empty());
    }
    for v in range(ApiKey::DescribeProducers) {
        let mut tr = TopicRequest::default();
        tr.name = TopicName(s("t"));
        tr.partition_indexes = vec![0];
        let mut req = DescribeProducersRequest::default();
        req.topics = vec![tr];
        let r: DescribeProducersResponse = call(&b, ApiKey::DescribeProducers, v, &req).await;
        assert_eq!(r.topics[0].partitions[0].error_code, NONE);
    }
    for v in range(ApiKey::EndTxn) {
        let mut req = EndTxnRequest::default();
        req.transactional_id = TransactionalId(s("every"));
        req.producer_id = pe.0;
        req.producer_epoch = pe.1;
        req.committed = true;
        let r: EndTxnResponse = call(&b, ApiKey::EndTxn, v, &req).await;
        // The first commits; the retries find it committed.
        assert_eq!(r.error_code, NONE, "EndTxn v{v}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn fencing_a_producer_aborts_its_transaction() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = open(dir.path()).await;
    topic(&b, "t").await;
    let r = init(&b, 4, Some("tx"), (-1, -1)).await;
    let old = (r.producer_id.0, r.producer_epoch);
    assert_eq!(add_partition(&b, "tx", old, "t").await, NONE);
    assert_eq!(
        produce(&b, 9, Some("tx"), "t", batch(old.0, old.1, 0, 2, true))
            .await
            .0,
        NONE
    );
    // A new instance with the same transactional id.
    let r = init(&b, 4, Some("tx"), (-1, -1)).await;
    assert_eq!(r.error_code, NONE);
    assert_eq!(r.producer_id.0, old.0);
    assert!(r.producer_epoch > old.1);
    let rc = fetch(&b, "t", 0, 1).await;
    assert_eq!(rc.last_stable_offset, 3, "the old transaction was aborted");
    assert_eq!(rc.aborted_transactions.map(|a| a.len()), Some(1));
    // The zombie is fenced everywhere.
    assert_eq!(
        produce(&b, 9, Some("tx"), "t", batch(old.0, old.1, 2, 1, true))
            .await
            .0,
        c(ResponseError::InvalidProducerEpoch)
    );
    assert_eq!(
        end(&b, "tx", old, true).await,
        c(ResponseError::ProducerFenced)
    );
    let r = init(&b, 3, Some("tx"), (old.0, old.1)).await;
    assert_eq!(
        r.error_code,
        c(ResponseError::InvalidProducerEpoch),
        "v3 has no PRODUCER_FENCED"
    );
}

/// A share group with `share.isolation.level=read_committed` (KIP-932): its
/// fetches stop at the last stable offset, and records of an aborted
/// transaction are archived, never handed out; one with read_uncommitted
/// gets them all.
#[tokio::test(flavor = "multi_thread")]
async fn share_groups_read_committed_skip_aborted_records() {
    use kafka_protocol::messages::share_fetch_request::{
        FetchPartition as SharePartition, FetchTopic as ShareTopic,
    };
    let dir = tempfile::tempdir().expect("tmp");
    let b = open(dir.path()).await;
    topic(&b, "t").await;
    let tid = b.topic("t").expect("t").id;
    let configs = |isolation: &str| {
        [
            ("share.auto.offset.reset", "earliest"),
            ("share.isolation.level", isolation),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect::<std::collections::BTreeMap<_, _>>()
    };
    b.set_group_configs("rc", configs("read_committed"), false)
        .await
        .expect("rc configs");
    b.set_group_configs("ru", configs("read_uncommitted"), false)
        .await
        .expect("ru configs");
    let r = init(&b, 4, Some("tx"), (-1, -1)).await;
    let pe = (r.producer_id.0, r.producer_epoch);
    // 0: plain; 1-2: aborted (3: its marker); 4: plain; 5-6: still open.
    let plain = |seq: i32| batch(999_999, 0, seq, 1, false);
    assert_eq!(produce(&b, 9, None, "t", plain(0)).await, (NONE, 0));
    assert_eq!(add_partition(&b, "tx", pe, "t").await, NONE);
    assert_eq!(
        produce(&b, 9, Some("tx"), "t", batch(pe.0, pe.1, 0, 2, true)).await,
        (NONE, 1)
    );
    assert_eq!(end(&b, "tx", pe, false).await, NONE);
    assert_eq!(produce(&b, 9, None, "t", plain(1)).await, (NONE, 4));
    assert_eq!(add_partition(&b, "tx", pe, "t").await, NONE);
    assert_eq!(
        produce(&b, 9, Some("tx"), "t", batch(pe.0, pe.1, 2, 2, true)).await,
        (NONE, 5)
    );

    // (acquired offsets, delivered values) of one ShareFetch v1.
    let share_fetch = |group: &'static str, member: &'static str, epoch: i32| {
        let b = b.clone();
        async move {
            let mut p = SharePartition::default();
            p.partition_index = 0;
            let mut t = ShareTopic::default();
            t.topic_id = tid;
            t.partitions = vec![p];
            let mut req = ShareFetchRequest::default();
            req.group_id = Some(GroupId(s(group)));
            req.member_id = Some(s(member));
            req.share_session_epoch = epoch;
            req.max_bytes = 1 << 20;
            req.max_records = 100;
            req.batch_size = 100;
            req.topics = vec![t];
            let r: ShareFetchResponse = call(&b, ApiKey::ShareFetch, 1, &req).await;
            assert_eq!(r.error_code, NONE, "{:?}", r.error_message);
            let p = &r.responses[0].partitions[0];
            assert_eq!(p.error_code, NONE, "{:?}", p.error_message);
            let mut offsets = Vec::new();
            for a in &p.acquired_records {
                offsets.extend(a.first_offset..=a.last_offset);
            }
            let vals = p.records.as_ref().map(values).unwrap_or_default();
            (offsets, vals)
        }
    };
    // read_committed: the aborted records 1-2 are never acquired, nothing
    // at or past the open transaction (LSO 5) is read.
    let (offsets, vals) = share_fetch("rc", "member-rc-00000000000", 0).await;
    assert!(
        !offsets.contains(&1) && !offsets.contains(&2),
        "{offsets:?}"
    );
    assert!(offsets.iter().all(|&o| o < 5), "{offsets:?}");
    assert!(offsets.contains(&0) && offsets.contains(&4), "{offsets:?}");
    assert_eq!(vals, vec!["v0", "v1"]);
    // read_uncommitted: everything up to the high watermark.
    let (offsets, vals) = share_fetch("ru", "member-ru-00000000000", 0).await;
    assert!(
        [0, 1, 2, 4, 5, 6].iter().all(|o| offsets.contains(o)),
        "{offsets:?}"
    );
    assert_eq!(vals, vec!["v0", "v0", "v1", "v1", "v2", "v3"]);

    // The commit makes 5-6 readable for read_committed; 1-2 stay archived.
    assert_eq!(end(&b, "tx", pe, true).await, NONE);
    let (offsets, vals) = share_fetch("rc", "member-rc-00000000000", 1).await;
    assert!(offsets.contains(&5) && offsets.contains(&6), "{offsets:?}");
    assert!(offsets.iter().all(|&o| o >= 5), "{offsets:?}");
    assert_eq!(vals, vec!["v2", "v3"]);
}
