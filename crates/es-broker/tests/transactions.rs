//! Idempotent and transactional producers against the real es-broker
//! binary: raw Produce requests (kafka-protocol + the codec) across a
//! SIGKILL and restart, and librdkafka (the `rdkafka` crate) as a real
//! client: an idempotent producer whose produce responses a proxy drops (so
//! it retries), transactional commit and abort seen by read_committed and
//! read_uncommitted consumers, consume-transform-produce with offsets sent
//! to the transaction, and a broker killed with SIGKILL in the middle of a
//! transaction. Every wait is a bounded retry on a condition; nothing
//! asserts on timing.

mod common;

use std::collections::HashMap;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{admin_opts, client_config};
use es_kafka::kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use es_kafka::kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use es_kafka::kafka_protocol::messages::{
    ApiKey, DescribeTransactionsRequest, DescribeTransactionsResponse, InitProducerIdRequest,
    InitProducerIdResponse, MetadataRequest, MetadataResponse, ProduceRequest, ProduceResponse,
    TopicName, TransactionalId,
};
use es_kafka::kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use es_test_support::batch::{producer_meta, KafkaBatch};
use es_test_support::wait::eventually;
use es_test_support::wire::KafkaClient;
use es_test_support::wire::{try_read_frame, write_frame};
use rdkafka::admin::{AdminClient, NewTopic, TopicReplication};
use rdkafka::client::{ClientContext, DefaultClientContext};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::{Offset, TopicPartitionList};

/// Bound on every wait.
const TIMEOUT: Duration = Duration::from_secs(60);

// ----- raw requests ------------------------------------------------------------

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// Typed requests over one connection.
struct Raw {
    k: KafkaClient,
}

impl Raw {
    fn connect(addr: &str) -> Raw {
        Raw {
            k: KafkaClient::connect_with_timeout(addr, "txn-test", TIMEOUT),
        }
    }

    fn call<Req: Encodable, Resp: Decodable>(&mut self, key: ApiKey, v: i16, req: &Req) -> Resp {
        self.k.call(key, v, req)
    }

    fn init_producer_id(&mut self, txn: Option<&str>) -> (i64, i16) {
        let mut req = InitProducerIdRequest::default();
        req.transactional_id = txn.map(|t| TransactionalId(s(t)));
        req.transaction_timeout_ms = 60_000;
        let r: InitProducerIdResponse = self.call(ApiKey::InitProducerId, 4, &req);
        assert_eq!(r.error_code, 0);
        (r.producer_id.0, r.producer_epoch)
    }

    /// Creates `topic` as a client does, through Metadata (Produce creates
    /// no topic, as in Kafka).
    fn create_topic(&mut self, topic: &str) {
        let mut t = MetadataRequestTopic::default();
        t.name = Some(TopicName(s(topic)));
        let mut req = MetadataRequest::default();
        req.topics = Some(vec![t]);
        req.allow_auto_topic_creation = true;
        let r: MetadataResponse = self.call(ApiKey::Metadata, 12, &req);
        assert_eq!(r.topics[0].error_code, 0, "Metadata creates {topic}");
    }

    /// Produces one batch to `topic`/0: (error, base offset).
    fn produce(&mut self, topic: &str, records: Vec<u8>) -> (i16, i64) {
        let mut pd = PartitionProduceData::default();
        pd.index = 0;
        pd.records = Some(records.into());
        let mut td = TopicProduceData::default();
        td.name = TopicName(s(topic));
        td.partition_data = vec![pd];
        let mut req = ProduceRequest::default();
        req.acks = -1;
        req.timeout_ms = 30_000;
        req.topic_data = vec![td];
        let r: ProduceResponse = self.call(ApiKey::Produce, 9, &req);
        let p = &r.responses[0].partition_responses[0];
        (p.error_code, p.base_offset)
    }

    fn txn_state(&mut self, txn: &str) -> (String, i64, i16) {
        let mut req = DescribeTransactionsRequest::default();
        req.transactional_ids = vec![TransactionalId(s(txn))];
        let r: DescribeTransactionsResponse = self.call(ApiKey::DescribeTransactions, 0, &req);
        let st = &r.transaction_states[0];
        assert_eq!(st.error_code, 0, "DescribeTransactions {txn}");
        (
            st.transaction_state.to_string(),
            st.producer_id.0,
            st.producer_epoch,
        )
    }
}

/// One Kafka batch of `n` idempotent records from `pid`/`epoch` at `seq`.
fn batch(pid: i64, epoch: i16, seq: i32, n: u32) -> Vec<u8> {
    let mut b = KafkaBatch::new();
    for i in 0..n as i32 {
        let v = format!("seq-{}", seq + i);
        b.record(
            1_700_000_000_000,
            None,
            Some(v.as_bytes()),
            &[],
            &producer_meta(pid, epoch, seq + i, false),
        );
    }
    b.encode()
}

const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;

#[test]
fn raw_duplicate_is_recognised_after_sigkill() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = common::start(dir.path(), &[]);
    let mut raw = Raw::connect(&b.addr);
    let (pid, epoch) = raw.init_producer_id(None);
    raw.create_topic("dup");
    assert_eq!(raw.produce("dup", batch(pid, epoch, 0, 3)), (0, 0));
    assert_eq!(raw.produce("dup", batch(pid, epoch, 3, 2)), (0, 3));
    // A retry before the crash.
    assert_eq!(raw.produce("dup", batch(pid, epoch, 3, 2)), (0, 3));
    let data = b.kill();
    let b = common::start(&data, &[]);
    let mut raw = Raw::connect(&b.addr);
    // Retries of acknowledged batches are still duplicates.
    assert_eq!(raw.produce("dup", batch(pid, epoch, 3, 2)), (0, 3));
    assert_eq!(raw.produce("dup", batch(pid, epoch, 0, 3)), (0, 0));
    // The sequence continues; a gap is refused.
    assert_eq!(raw.produce("dup", batch(pid, epoch, 5, 1)), (0, 5));
    assert_eq!(
        raw.produce("dup", batch(pid, epoch, 9, 1)).0,
        OUT_OF_ORDER_SEQUENCE_NUMBER
    );
    // Producer ids are not reused after the crash.
    let (pid2, _) = raw.init_producer_id(None);
    assert!(pid2 > pid, "{pid2} after {pid}");
}

// ----- librdkafka ----------------------------------------------------------------

fn create_topics(bootstrap: &str, names: &[&str]) {
    let admin: AdminClient<DefaultClientContext> =
        client_config(bootstrap).create().expect("admin client");
    let topics: Vec<NewTopic<'_>> = names
        .iter()
        .map(|n| NewTopic::new(n, 1, TopicReplication::Fixed(1)))
        .collect();
    let opts = admin_opts(TIMEOUT);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let res = rt
        .block_on(admin.create_topics(topics.iter(), &opts))
        .expect("create_topics");
    for r in res {
        r.expect("topic created");
    }
}

/// Records every delivery report.
#[derive(Clone, Default)]
struct Deliveries(Arc<Mutex<Vec<Result<i64, String>>>>);

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = ();
    fn delivery(&self, r: &DeliveryResult<'_>, _: ()) {
        let v = match r {
            Ok(m) => Ok(m.offset()),
            Err((e, _)) => Err(e.to_string()),
        };
        self.0.lock().expect("deliveries").push(v);
    }
}

impl Deliveries {
    fn count(&self) -> usize {
        self.0.lock().expect("deliveries").len()
    }
    fn failures(&self) -> Vec<String> {
        self.0
            .lock()
            .expect("deliveries")
            .iter()
            .filter_map(|r| r.as_ref().err().cloned())
            .collect()
    }
}

fn producer(bootstrap: &str, extra: &[(&str, &str)]) -> (BaseProducer<Deliveries>, Deliveries) {
    let mut c = client_config(bootstrap);
    c.set("linger.ms", "5").set("message.timeout.ms", "60000");
    for (k, v) in extra {
        c.set(*k, *v);
    }
    let d = Deliveries::default();
    (c.create_with_context(d.clone()).expect("producer"), d)
}

fn send(p: &BaseProducer<Deliveries>, topic: &str, value: &str) {
    let key = value.to_string();
    let mut rec = BaseRecord::to(topic).partition(0).key(&key).payload(value);
    loop {
        match p.send(rec) {
            Ok(()) => return,
            Err((
                KafkaError::MessageProduction(rdkafka::types::RDKafkaErrorCode::QueueFull),
                r,
            )) => {
                rec = r;
                p.poll(Duration::from_millis(10));
            }
            Err((e, _)) => panic!("send {value}: {e}"),
        }
    }
}

/// Flushes and checks that `n` deliveries so far all succeeded.
fn flushed(p: &BaseProducer<Deliveries>, d: &Deliveries, n: usize) {
    p.flush(TIMEOUT).expect("flush");
    eventually(TIMEOUT, "delivery reports", || {
        p.poll(Duration::from_millis(10));
        (d.count() >= n).then_some(())
    });
    assert_eq!(d.failures(), Vec::<String>::new());
}

fn consumer(bootstrap: &str, isolation: &str, extra: &[(&str, &str)]) -> BaseConsumer {
    let mut c = client_config(bootstrap);
    c.set("group.id", "txn-test-reader")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .set("fetch.wait.max.ms", "100")
        .set("isolation.level", isolation);
    for (k, v) in extra {
        c.set(*k, *v);
    }
    c.create().expect("consumer")
}

/// Reads `topic`/0 from the beginning until the consumer's position reaches
/// `end` (every offset below it handled, markers included); returns the values.
fn read_all(c: &BaseConsumer, topic: &str, end: i64) -> Vec<String> {
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning)
        .expect("tpl");
    c.assign(&tpl).expect("assign");
    let mut out = Vec::new();
    eventually(TIMEOUT, &format!("reading {topic} up to {end}"), || {
        match c.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                out.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned())
            }
            Some(Err(e)) => panic!("consumer error: {e}"),
            None => {}
        }
        let pos = c.position().ok()?;
        match pos.find_partition(topic, 0)?.offset() {
            Offset::Offset(o) if o >= end => Some(()),
            _ => None,
        }
    });
    out
}

fn high_watermark(c: &BaseConsumer, topic: &str) -> i64 {
    c.fetch_watermarks(topic, 0, TIMEOUT).expect("watermarks").1
}

/// A TCP proxy in front of the broker that closes the connection instead of
/// forwarding chosen Produce responses (the batch is on the broker, the
/// client never hears of it and retries).
struct Proxy {
    addr: String,
    dropped: Arc<AtomicUsize>,
}

impl Proxy {
    fn start(listener: TcpListener, upstream: String, drop_nth: Vec<usize>) -> Proxy {
        let addr = listener.local_addr().expect("addr").to_string();
        let dropped = Arc::new(AtomicUsize::new(0));
        let produce_seen = Arc::new(AtomicUsize::new(0));
        let drop_nth = Arc::new(drop_nth);
        let d = dropped.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(&upstream) else {
                    return;
                };
                let keys: Arc<Mutex<HashMap<i32, i16>>> = Arc::default();
                let (c2, s2, k2) = (
                    client.try_clone().expect("clone"),
                    server.try_clone().expect("clone"),
                    keys.clone(),
                );
                // Client to broker: remember each request's api key.
                std::thread::spawn(move || {
                    let (mut from, mut to) = (c2, s2);
                    while let Ok(frame) = try_read_frame(&mut from) {
                        if frame.len() >= 8 {
                            let key = i16::from_be_bytes([frame[0], frame[1]]);
                            let corr = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
                            k2.lock().expect("keys").insert(corr, key);
                        }
                        if write_frame(&mut to, &frame).is_err() {
                            break;
                        }
                    }
                    let _ = to.shutdown(Shutdown::Both);
                });
                // Broker to client: maybe cut instead of answering a Produce.
                let (seen, nth, dropped) = (produce_seen.clone(), drop_nth.clone(), d.clone());
                std::thread::spawn(move || {
                    let (mut from, mut to) = (server, client);
                    while let Ok(frame) = try_read_frame(&mut from) {
                        let corr = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
                        let key = keys.lock().expect("keys").remove(&corr);
                        if key == Some(0) {
                            let n = seen.fetch_add(1, Ordering::SeqCst) + 1;
                            if nth.contains(&n) {
                                dropped.fetch_add(1, Ordering::SeqCst);
                                break;
                            }
                        }
                        if write_frame(&mut to, &frame).is_err() {
                            break;
                        }
                    }
                    let _ = to.shutdown(Shutdown::Both);
                    let _ = from.shutdown(Shutdown::Both);
                });
            }
        });
        Proxy { addr, dropped }
    }
}

#[test]
fn idempotent_producer_retries_are_not_duplicated() {
    let dir = tempfile::tempdir().expect("tempdir");
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind proxy");
    let proxy_addr = listener.local_addr().expect("addr").to_string();
    let b = common::start(dir.path(), &["--advertised-listener", &proxy_addr]);
    let proxy = Proxy::start(listener, b.addr.clone(), vec![3, 7, 12]);
    create_topics(&proxy.addr, &["idem"]);
    let (p, d) = producer(
        &proxy.addr,
        &[
            ("enable.idempotence", "true"),
            ("batch.num.messages", "4"),
            ("linger.ms", "1"),
            ("retry.backoff.ms", "20"),
        ],
    );
    let n = 120usize;
    for i in 0..n {
        send(&p, "idem", &format!("m{i:04}"));
        if i % 10 == 9 {
            p.poll(Duration::from_millis(1));
        }
    }
    flushed(&p, &d, n);
    assert!(
        proxy.dropped.load(Ordering::SeqCst) >= 1,
        "the proxy dropped no produce response"
    );
    let c = consumer(&proxy.addr, "read_uncommitted", &[]);
    assert_eq!(
        high_watermark(&c, "idem"),
        n as i64,
        "no duplicate was appended"
    );
    let got = read_all(&c, "idem", n as i64);
    let want: Vec<String> = (0..n).map(|i| format!("m{i:04}")).collect();
    assert_eq!(got, want, "every message once, in order");
}

#[test]
fn transactions_commit_and_abort_for_read_committed_consumers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = common::start(dir.path(), &[]);
    create_topics(&b.addr, &["txn"]);
    let (p, d) = producer(&b.addr, &[("transactional.id", "txn-basic")]);
    p.init_transactions(TIMEOUT).expect("init_transactions");
    p.begin_transaction().expect("begin");
    for i in 0..5 {
        send(&p, "txn", &format!("c{i}"));
    }
    p.commit_transaction(TIMEOUT).expect("commit");
    p.begin_transaction().expect("begin");
    for i in 0..5 {
        send(&p, "txn", &format!("a{i}"));
    }
    flushed(&p, &d, 10);
    p.abort_transaction(TIMEOUT).expect("abort");
    p.begin_transaction().expect("begin");
    for i in 0..3 {
        send(&p, "txn", &format!("d{i}"));
    }
    p.commit_transaction(TIMEOUT).expect("commit");
    assert_eq!(d.failures(), Vec::<String>::new());
    // 13 records and 3 markers.
    let rc = consumer(&b.addr, "read_committed", &[]);
    assert_eq!(high_watermark(&rc, "txn"), 16);
    let committed = read_all(&rc, "txn", 16);
    assert_eq!(
        committed,
        vec!["c0", "c1", "c2", "c3", "c4", "d0", "d1", "d2"],
        "read_committed sees exactly the committed records"
    );
    let ru = consumer(&b.addr, "read_uncommitted", &[]);
    let all = read_all(&ru, "txn", 16);
    assert_eq!(
        all.len(),
        13,
        "read_uncommitted sees aborted records too: {all:?}"
    );
    let mut raw = Raw::connect(&b.addr);
    assert_eq!(raw.txn_state("txn-basic").0, "CompleteCommit");
}

#[test]
fn consume_transform_produce_commits_offsets_with_the_transaction() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = common::start(dir.path(), &[]);
    create_topics(&b.addr, &["ctp-in", "ctp-out"]);
    let (p, d) = producer(&b.addr, &[]);
    let n = 20usize;
    for i in 0..n {
        send(&p, "ctp-in", &format!("in{i}"));
    }
    flushed(&p, &d, n);
    let group = [("group.id", "ctp-group"), ("auto.offset.reset", "earliest")];
    let c = consumer(&b.addr, "read_committed", &group);
    c.subscribe(&["ctp-in"]).expect("subscribe");
    let (tp, td) = producer(&b.addr, &[("transactional.id", "ctp-tx")]);
    tp.init_transactions(TIMEOUT).expect("init_transactions");
    let committed_offset = |c: &BaseConsumer| -> Offset {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition("ctp-in", 0);
        let got = c.committed_offsets(tpl, TIMEOUT).expect("committed");
        got.find_partition("ctp-in", 0).expect("partition").offset()
    };
    let next_batch = |c: &BaseConsumer, max: usize| -> Vec<String> {
        let mut out = Vec::new();
        eventually(TIMEOUT, "input records", || {
            if let Some(r) = c.poll(Duration::from_millis(100)) {
                let m = r.expect("consumer error");
                out.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned());
            }
            (out.len() >= max).then_some(())
        });
        out
    };
    // A first transaction that aborts: its output and its offsets vanish.
    let batch = next_batch(&c, 5);
    tp.begin_transaction().expect("begin");
    for v in &batch {
        send(&tp, "ctp-out", &v.to_uppercase());
    }
    let cgm = c.group_metadata().expect("group metadata");
    tp.send_offsets_to_transaction(&c.position().expect("position"), &cgm, TIMEOUT)
        .expect("send offsets");
    flushed(&tp, &td, batch.len());
    tp.abort_transaction(TIMEOUT).expect("abort");
    assert_eq!(
        committed_offset(&c),
        Offset::Invalid,
        "aborted offsets are not committed"
    );
    c.seek("ctp-in", 0, Offset::Beginning, TIMEOUT)
        .expect("seek back");
    // Then everything in committed transactions of 5.
    let mut processed = 0usize;
    while processed < n {
        let batch = next_batch(&c, 5);
        tp.begin_transaction().expect("begin");
        for v in &batch {
            send(&tp, "ctp-out", &v.to_uppercase());
        }
        let cgm = c.group_metadata().expect("group metadata");
        tp.send_offsets_to_transaction(&c.position().expect("position"), &cgm, TIMEOUT)
            .expect("send offsets");
        tp.commit_transaction(TIMEOUT).expect("commit");
        processed += batch.len();
        assert_eq!(committed_offset(&c), Offset::Offset(processed as i64));
    }
    assert_eq!(td.failures(), Vec::<String>::new());
    let out = consumer(&b.addr, "read_committed", &[]);
    let hw = high_watermark(&out, "ctp-out");
    let got = read_all(&out, "ctp-out", hw);
    let want: Vec<String> = (0..n).map(|i| format!("IN{i}")).collect();
    assert_eq!(
        got, want,
        "exactly the transformed records of committed transactions"
    );
}

#[test]
fn sigkill_mid_transaction_aborts_after_timeout_and_keeps_committed_data() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = common::start(dir.path(), &[]);
    create_topics(&b.addr, &["k9"]);
    let (p, d) = producer(
        &b.addr,
        &[
            ("transactional.id", "k9-tx"),
            ("transaction.timeout.ms", "3000"),
            ("message.timeout.ms", "3000"),
        ],
    );
    p.init_transactions(TIMEOUT).expect("init_transactions");
    p.begin_transaction().expect("begin");
    for i in 0..3 {
        send(&p, "k9", &format!("k{i}"));
    }
    p.commit_transaction(TIMEOUT).expect("commit");
    p.begin_transaction().expect("begin");
    for i in 0..3 {
        send(&p, "k9", &format!("x{i}"));
    }
    flushed(&p, &d, 6);
    let mut raw = Raw::connect(&b.addr);
    let (state, pid, epoch) = raw.txn_state("k9-tx");
    assert_eq!(state, "Ongoing");
    let data = b.kill();
    drop(p);
    let b = common::start(&data, &[]);
    let mut raw = Raw::connect(&b.addr);
    // The open transaction survives the crash and is aborted once its
    // timeout passes; its producer is fenced.
    let (after_pid, after_epoch) =
        eventually(TIMEOUT, "the timed-out transaction to abort", || {
            let (state, p, e) = raw.txn_state("k9-tx");
            (state == "CompleteAbort").then_some((p, e))
        });
    assert_eq!(after_pid, pid);
    assert!(after_epoch > epoch, "the old producer is fenced");
    let (sp, sd) = producer(&b.addr, &[]);
    send(&sp, "k9", "sentinel");
    flushed(&sp, &sd, 1);
    // 3 committed + marker, 3 aborted + marker, the sentinel.
    let rc = consumer(&b.addr, "read_committed", &[]);
    assert_eq!(high_watermark(&rc, "k9"), 9);
    let got = read_all(&rc, "k9", 9);
    assert_eq!(got, vec!["k0", "k1", "k2", "sentinel"]);
    let ru = consumer(&b.addr, "read_uncommitted", &[]);
    assert_eq!(read_all(&ru, "k9", 9).len(), 7);
}
