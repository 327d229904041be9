//! `log.preallocate=true` (Kafka's name; topic config `preallocate`): the
//! broker writes zeros ahead of a busy partition's active segment. Records
//! produced over them come back whole, the data directory passes the
//! independent format checker with the zeros in place (it allows them in
//! the newest segment only), and after a kill -9 recovery cuts them and
//! everything acknowledged is there. Waits are bounded retries on a
//! condition.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};

const TOPIC: &str = "pre";
const RECORDS: usize = 4_000;
const TIMEOUT: Duration = Duration::from_secs(60);

fn value(i: usize) -> String {
    format!("{i:08}-{}", "v".repeat(1000))
}

/// The newest segment's length and how many bytes at its end are zero.
fn segment_tail(data: &Path) -> (u64, u64) {
    let logs = common::replicas::segment_logs(data, TOPIC);
    let bytes = std::fs::read(logs.last().expect("a segment")).expect("read");
    let zeros = bytes.iter().rev().take_while(|&&b| b == 0).count();
    (bytes.len() as u64, zeros as u64)
}

fn metric(url: &str, name: &str) -> f64 {
    let text = reqwest::blocking::get(format!("{url}/metrics"))
        .and_then(|r| r.text())
        .expect("GET /metrics");
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or(0.0)
}

async fn produce(bootstrap: &str) {
    let p: FutureProducer = common::client_config(bootstrap)
        .set("acks", "all")
        .set("linger.ms", "5")
        .set("message.timeout.ms", "60000")
        .create()
        .expect("producer");
    let values: Vec<String> = (0..RECORDS).map(value).collect();
    let mut sends = Vec::new();
    for v in &values {
        let rec: FutureRecord<'_, str, str> = FutureRecord::to(TOPIC).partition(0).payload(v);
        sends.push(p.send_result(rec).map_err(|(e, _)| e).expect("queued"));
    }
    for (i, s) in sends.into_iter().enumerate() {
        let d = s
            .await
            .expect("delivery future")
            .unwrap_or_else(|(e, _)| panic!("delivery of {i} failed: {e}"));
        assert_eq!(d.offset, i as i64);
    }
}

fn consume_all(bootstrap: &str) -> Vec<String> {
    let c: BaseConsumer = common::client_config(bootstrap)
        .set("group.id", "pre-check")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(TOPIC, 0, Offset::Beginning)
        .expect("tpl");
    c.assign(&tpl).expect("assign");
    let mut out = Vec::new();
    let deadline = Instant::now() + TIMEOUT;
    while out.len() < RECORDS && Instant::now() < deadline {
        if let Some(m) = c.poll(Duration::from_millis(500)) {
            let m = m.expect("message");
            assert_eq!(m.offset(), out.len() as i64, "offsets in order, no gap");
            out.push(String::from_utf8_lossy(m.payload().expect("payload")).into_owned());
        }
    }
    out
}

#[test]
fn zeros_written_ahead_pass_the_checker_and_a_kill_loses_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let mut b = common::start(
        data.clone(),
        &[
            "--set",
            "log.preallocate=true",
            "--admin-listen",
            "127.0.0.1:0",
        ],
    );
    let url = b.admin_url();
    tokio::runtime::Runtime::new()
        .expect("runtime")
        .block_on(produce(&b.addr));
    // The es-prealloc thread writes the zeros after the appends that ask.
    let deadline = Instant::now() + TIMEOUT;
    while metric(&url, "es_preallocated_bytes_total") == 0.0 {
        assert!(Instant::now() < deadline, "no zeros written ahead");
        std::thread::sleep(Duration::from_millis(50));
    }
    let deadline = Instant::now() + TIMEOUT;
    while segment_tail(&data).1 < 64 * 1024 {
        assert!(Instant::now() < deadline, "zeros at the segment's end");
        std::thread::sleep(Duration::from_millis(50));
    }
    common::replicas::check_format(&data, TOPIC);
    let got = consume_all(&b.addr);
    assert_eq!(got.len(), RECORDS);
    assert!(got.iter().enumerate().all(|(i, v)| *v == value(i)));

    // kill -9: the zeros stay on disk, recovery cuts them.
    let (len_before, zeros) = segment_tail(&data);
    b.kill();
    let b = common::start(data.clone(), &[]);
    let (len_after, zeros_after) = segment_tail(&data);
    assert_eq!(len_after, len_before - zeros, "cut to the last record");
    assert_eq!(zeros_after, 0);
    assert!(
        b.log_text().contains("cut the zeros written ahead"),
        "recovery says what it cut:\n{}",
        b.log_text()
    );
    let got = consume_all(&b.addr);
    assert_eq!(got.len(), RECORDS, "everything acknowledged survived");
    assert!(got.iter().enumerate().all(|(i, v)| *v == value(i)));
    common::replicas::check_format(&data, TOPIC);
    b.stop();
}
