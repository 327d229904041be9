//! The throughput bench the storage document names: 256-byte records over
//! loopback against a real es-broker (fsync before every acknowledgement),
//! driven by librdkafka (the `rdkafka` crate). It prints records/s and MB/s
//! per case and asserts nothing about speed.
//!
//! `cargo test --release -p es-broker --test bench -- --ignored --nocapture`
//! (ES_BENCH_RECORDS sets records per case, default 500000).

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::{ClientContext, Offset, TopicPartitionList};

const RECORD_BYTES: usize = 256;

fn records_per_case() -> u64 {
    std::env::var("ES_BENCH_RECORDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(500_000)
}

#[derive(Default)]
struct Counter {
    ok: AtomicU64,
    failed: AtomicU64,
}

struct Ctx(Arc<Counter>);

impl ClientContext for Ctx {}

impl ProducerContext for Ctx {
    type DeliveryOpaque = ();
    fn delivery(&self, r: &DeliveryResult<'_>, _: ()) {
        match r {
            Ok(_) => self.0.ok.fetch_add(1, Ordering::Relaxed),
            Err(_) => self.0.failed.fetch_add(1, Ordering::Relaxed),
        };
    }
}

fn create_topic(addr: &str, topic: &str, partitions: i32) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let admin: rdkafka::admin::AdminClient<rdkafka::client::DefaultClientContext> =
            ClientConfig::new()
                .set("bootstrap.servers", addr)
                .create()
                .expect("admin");
        let t = rdkafka::admin::NewTopic::new(
            topic,
            partitions,
            rdkafka::admin::TopicReplication::Fixed(1),
        );
        let r = admin
            .create_topics([&t], &rdkafka::admin::AdminOptions::new())
            .await
            .expect("create");
        assert!(r.iter().all(|x| x.is_ok()), "{r:?}");
    });
}

/// Produces `n` records spread over `partitions` from `producers` clients; returns seconds.
fn produce(addr: &str, topic: &str, partitions: i32, producers: usize, n: u64) -> f64 {
    let payload = vec![b'x'; RECORD_BYTES];
    let start = Instant::now();
    let per = n / producers as u64;
    let hs: Vec<_> = (0..producers)
        .map(|pi| {
            let (addr, topic, payload) = (addr.to_string(), topic.to_string(), payload.clone());
            std::thread::spawn(move || {
                let counter = Arc::new(Counter::default());
                let p: ThreadedProducer<Ctx> = ClientConfig::new()
                    .set("bootstrap.servers", &addr)
                    .set("acks", "all")
                    .set("linger.ms", "5")
                    .set("queue.buffering.max.messages", "1000000")
                    .create_with_context(Ctx(counter.clone()))
                    .expect("producer");
                for i in 0..per {
                    let part = ((i + pi as u64) % partitions as u64) as i32;
                    let mut rec = BaseRecord::<(), [u8]>::to(&topic)
                        .payload(&payload)
                        .partition(part);
                    loop {
                        match p.send(rec) {
                            Ok(()) => break,
                            Err((
                                KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull),
                                r,
                            )) => {
                                rec = r;
                                std::thread::sleep(Duration::from_millis(1));
                            }
                            Err((e, _)) => panic!("send: {e}"),
                        }
                    }
                }
                p.flush(Duration::from_secs(120)).expect("flush");
                assert_eq!(counter.failed.load(Ordering::Relaxed), 0);
                assert_eq!(counter.ok.load(Ordering::Relaxed), per);
            })
        })
        .collect();
    for h in hs {
        h.join().expect("producer thread");
    }
    start.elapsed().as_secs_f64()
}

/// Consumes `n` records from all partitions from the beginning; returns seconds.
fn consume(addr: &str, topic: &str, partitions: i32, n: u64) -> f64 {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("group.id", "bench")
        .set("enable.auto.commit", "false")
        .set("fetch.max.bytes", "52428800")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .expect("tpl");
    }
    c.assign(&tpl).expect("assign");
    let start = Instant::now();
    let mut got = 0u64;
    let deadline = start + Duration::from_secs(300);
    while got < n {
        assert!(Instant::now() < deadline, "consumed {got} of {n}");
        if let Some(m) = c.poll(Duration::from_millis(100)) {
            let m = m.expect("message");
            assert_eq!(m.payload().map(<[u8]>::len), Some(RECORD_BYTES));
            got += 1;
        }
    }
    start.elapsed().as_secs_f64()
}

fn report(case: &str, n: u64, secs: f64) {
    let rate = n as f64 / secs;
    println!(
        "{case:<44} {n:>9} records {secs:>7.2} s {rate:>11.0} records/s {:>8.1} MB/s",
        rate * RECORD_BYTES as f64 / 1e6
    );
}

#[test]
#[ignore = "benchmark: run with --release -- --ignored --nocapture"]
fn bench_256_byte_records() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = common::start(dir.path(), &[]);
    let n = records_per_case();
    println!("es-broker bench: {RECORD_BYTES}-byte records, acks=all, fsync before ack, loopback, {n} records per case");
    for (partitions, producers) in [(1, 1), (8, 1), (1, 4), (8, 4)] {
        let topic = format!("bench-{partitions}p-{producers}w");
        create_topic(&b.addr, &topic, partitions);
        let secs = produce(&b.addr, &topic, partitions, producers, n);
        report(
            &format!("produce {partitions} partition(s), {producers} producer(s)"),
            n,
            secs,
        );
        if producers == 1 {
            let secs = consume(&b.addr, &topic, partitions, n);
            report(
                &format!("consume {partitions} partition(s) from the start"),
                n,
                secs,
            );
        }
    }
    b.stop();
}
