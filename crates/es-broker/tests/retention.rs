//! Retention, compaction, cold storage and DeleteRecords end to end: a real
//! es-broker with short cleaner intervals, driven by librdkafka (the
//! `rdkafka` crate).
//!
//! - A compacted topic read from the beginning yields exactly the newest
//!   value of each key at its original offset (checked against a model built
//!   from what was produced), tombstones past `delete.retention.ms` are gone,
//!   and a fetch from an offset compaction removed starts at the next
//!   survivor.
//! - Retention by size (set with AlterConfigs after producing, so the change
//!   takes effect at the next pass) and by age (records with old CreateTime
//!   timestamps) deletes the oldest sealed segments and moves ListOffsets
//!   earliest; the deleted segments are in `--cold-storage-dir`, decoded and
//!   compared record by record.
//! - DeleteRecords moves the low watermark, survives a restart, and a fetch
//!   below it gets OFFSET_OUT_OF_RANGE.
//!
//! Every wait is a bounded poll on a condition (watermarks, what a consumer
//! reads); nothing asserts on timing. Small segments come from Kafka's
//! internal `internal.segment.bytes` (Kafka 4 refuses `segment.bytes` below
//! 1 MiB).

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{admin, admin_opts, client_config, now_ms, Broker};
use es_test_support::wait::eventually;
use rdkafka::admin::TopicReplication;
use rdkafka::admin::{AlterConfig, NewTopic, ResourceSpecifier};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};

const TIMEOUT: Duration = Duration::from_secs(30);
/// How long a cleaner may take to reach a condition (passes run every 100 ms).
const CLEANER_TIMEOUT: Duration = Duration::from_secs(60);
/// Segment size of the test topics: a handful of records each.
const SEGMENT_BYTES: &str = "1024";

/// The cleaner flags every broker here runs with.
const FAST_CLEANERS: [&str; 4] = [
    "--retention-check-interval",
    "100ms",
    "--compaction-interval",
    "100ms",
];

/// A record to produce: key, value (None = null), CreateTime timestamp.
type ToProduce = (Option<Vec<u8>>, Option<Vec<u8>>, i64);

/// A record as a consumer sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Rec {
    offset: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    timestamp: i64,
}

/// Small batches (a few records per Produce request, so per storage
/// append), so that the 1 KiB segments roll often.
fn producer(b: &Broker) -> FutureProducer {
    let mut c = client_config(&b.addr);
    c.set("linger.ms", "1")
        .set("batch.num.messages", "8")
        .set("acks", "all")
        .set("message.timeout.ms", "30000");
    c.create().expect("producer")
}

fn consumer(b: &Broker, extra: &[(&str, &str)]) -> BaseConsumer {
    let mut c = client_config(&b.addr);
    c.set("group.id", "es-retention-test")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .set("fetch.wait.max.ms", "100");
    for (k, v) in extra {
        c.set(*k, *v);
    }
    c.create().expect("consumer")
}

async fn create_topic(b: &Broker, name: &str, configs: &[(&str, &str)]) {
    let mut t = NewTopic::new(name, 1, TopicReplication::Fixed(1));
    for (k, v) in configs {
        t = t.set(k, v);
    }
    let res = admin(&b.addr)
        .create_topics([&t], &admin_opts(TIMEOUT))
        .await
        .expect("create_topics");
    assert_eq!(res, vec![Ok(name.to_string())]);
}

/// Produces `records` (key, value, timestamp) to partition 0, all in flight
/// together, and returns them with the offsets the broker assigned.
async fn produce(p: &FutureProducer, topic: &str, records: &[ToProduce]) -> Vec<Rec> {
    let mut pending = Vec::with_capacity(records.len());
    for (key, value, ts) in records {
        let mut r = FutureRecord::<[u8], [u8]>::to(topic)
            .partition(0)
            .timestamp(*ts);
        if let Some(k) = key {
            r = r.key(k);
        }
        if let Some(v) = value {
            r = r.payload(v);
        }
        pending.push(p.send_result(r).map_err(|(e, _)| e).expect("enqueued"));
    }
    let mut out = Vec::with_capacity(records.len());
    for ((key, value, ts), f) in records.iter().zip(pending) {
        let d = f
            .await
            .expect("delivery future")
            .unwrap_or_else(|(e, _)| panic!("produce failed: {e}"));
        out.push(Rec {
            offset: d.offset,
            key: key.clone(),
            value: value.clone(),
            timestamp: *ts,
        });
    }
    out
}

/// Reads partition 0 of `topic` from `from` until the record at `last`
/// (inclusive) has arrived or a short deadline passes; returns what it got.
fn read_until(b: &Broker, topic: &str, from: Offset, last: i64) -> Vec<Rec> {
    let c = consumer(b, &[]);
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, from).expect("tpl");
    c.assign(&tpl).expect("assign");
    let mut out: Vec<Rec> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while out.last().is_none_or(|r| r.offset < last) && Instant::now() < deadline {
        match c.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => out.push(Rec {
                offset: m.offset(),
                key: m.key().map(<[u8]>::to_vec),
                value: m.payload().map(<[u8]>::to_vec),
                timestamp: m.timestamp().to_millis().unwrap_or(-1),
            }),
            Some(Err(e)) => panic!("consumer error: {e}"),
            None => {}
        }
    }
    out
}

fn watermarks(b: &Broker, topic: &str) -> (i64, i64) {
    consumer(b, &[])
        .fetch_watermarks(topic, 0, TIMEOUT)
        .expect("watermarks")
}

/// Segment base offsets (from the `.log` names) in a partition directory.
fn segment_bases(dir: &Path) -> Vec<i64> {
    let mut bases: Vec<i64> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    name.strip_suffix(".log")?.parse().ok()
                })
                .collect()
        })
        .unwrap_or_default();
    bases.sort_unstable();
    bases
}

/// Every record of the segments copied to cold storage, decoded with
/// es-storage's reader (which checks each record's CRC).
fn cold_records(dir: &Path) -> Vec<Rec> {
    let mut out = Vec::new();
    for base in segment_bases(dir) {
        let bytes = std::fs::read(dir.join(format!("{base:020}.log"))).expect("read cold segment");
        assert!(
            dir.join(format!("{base:020}.index")).exists(),
            "the index is copied with its log"
        );
        for r in es_storage::RecordIter::new(&bytes) {
            let r = r.expect("a cold record decodes and passes its CRC");
            out.push(Rec {
                offset: r.offset as i64,
                key: r.key.map(<[u8]>::to_vec),
                value: r.value.map(<[u8]>::to_vec),
                timestamp: r.timestamp_ms,
            });
        }
    }
    out
}

/// Compaction's model: the newest record of each key, unless that is a
/// tombstone (gone after `delete.retention.ms` = 0), and every keyless record.
fn compacted(produced: &[Rec]) -> Vec<Rec> {
    let mut newest: BTreeMap<Vec<u8>, &Rec> = BTreeMap::new();
    let mut out: Vec<Rec> = Vec::new();
    for r in produced {
        match &r.key {
            Some(k) => {
                let e = newest.entry(k.clone()).or_insert(r);
                if r.offset > e.offset {
                    *e = r;
                }
            }
            None => out.push(r.clone()),
        }
    }
    out.extend(newest.into_values().filter(|r| r.value.is_some()).cloned());
    out.sort_by_key(|r| r.offset);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compacted_topic_keeps_the_newest_value_of_each_key_at_its_offset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = common::start(dir.path(), &FAST_CLEANERS);
    let topic = "compacted";
    create_topic(
        &b,
        topic,
        &[
            ("cleanup.policy", "compact"),
            ("internal.segment.bytes", SEGMENT_BYTES),
            ("min.cleanable.dirty.ratio", "0.01"),
            ("delete.retention.ms", "0"),
        ],
    )
    .await;
    // 300 records over 23 keys from a fixed pseudo-random sequence; one in
    // seven is a tombstone. Timestamps are a minute old, so tombstones are
    // past delete.retention.ms = 0 whenever a pass sees them.
    let old = now_ms() - 60_000;
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut workload = Vec::new();
    for i in 0..300u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let key = format!("key-{:02}", x % 23).into_bytes();
        let tombstone = matches!(x % 7, 0);
        let value = (!tombstone).then(|| format!("value-{i:04}-{}", "x".repeat(24)).into_bytes());
        workload.push((Some(key), value, old + i as i64));
    }
    let p = producer(&b);
    let mut produced = produce(&p, topic, &workload).await;
    // One record larger than a segment: its append rolls the active segment,
    // so every earlier record is in a sealed (compactable) segment. It needs a
    // key of its own: a compacted topic refuses records without one.
    let filler = vec![(Some(b"filler".to_vec()), Some(vec![b'f'; 1100]), now_ms())];
    produced.extend(produce(&p, topic, &filler).await);
    let last = produced.last().map(|r| r.offset).expect("produced");
    assert_eq!(last, 300, "offsets are contiguous from 0");
    let expected = compacted(&produced);
    assert!(expected.len() < 30, "the model drops most records");

    let got = eventually(CLEANER_TIMEOUT, "the compacted log", || {
        let got = read_until(&b, topic, Offset::Beginning, last);
        (got == expected).then_some(got)
    });
    assert_eq!(got.last().map(|r| r.offset), Some(last));
    // A fetch from an offset compaction removed starts at the next survivor.
    let removed = (0..last)
        .find(|o| expected.iter().all(|r| r.offset != *o))
        .expect("some offset was compacted away");
    let next = expected
        .iter()
        .find(|r| r.offset > removed)
        .expect("a survivor after it");
    let from_removed = read_until(&b, topic, Offset::Offset(removed), next.offset);
    assert_eq!(from_removed.first(), Some(next));
    // ListOffsets: nothing was deleted from the front, the end is unchanged.
    assert_eq!(watermarks(&b, topic), (0, last + 1));
    let log = b.stop();
    assert!(
        log.contains("compaction pass compacted"),
        "a pass that compacted logs one line:\n{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_by_size_and_age_deletes_old_segments_into_cold_storage() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cold = dir.path().join("cold");
    let data = dir.path().join("data");
    let cold_arg = cold.display().to_string();
    let mut flags = FAST_CLEANERS.to_vec();
    flags.extend(["--cold-storage-dir", &cold_arg]);
    let b = common::start(data.clone(), &flags);
    let p = producer(&b);
    let value = |i: usize| Some(format!("{i:04}-{}", "r".repeat(96)).into_bytes());

    // By size: produced with no limit (nothing may go), then limited to
    // 2 KiB with AlterConfigs, which the next pass applies.
    create_topic(&b, "by-size", &[("internal.segment.bytes", SEGMENT_BYTES)]).await;
    let now = now_ms();
    let records: Vec<_> = (0..60).map(|i| (None, value(i), now)).collect();
    let sized = produce(&p, "by-size", &records).await;
    assert_eq!(watermarks(&b, "by-size"), (0, 60));
    let alter = AlterConfig::new(ResourceSpecifier::Topic("by-size"))
        .set("internal.segment.bytes", SEGMENT_BYTES)
        .set("retention.bytes", "2048");
    let r = admin(&b.addr)
        .alter_configs([&alter], &admin_opts(TIMEOUT))
        .await
        .expect("alter");
    assert!(r.iter().all(Result::is_ok), "{r:?}");
    // Converged once the log start moved and the segments below it are
    // gone from the partition directory (they are unlinked just after the
    // log start moves).
    let part = data.join("topics/by-size/0");
    let (low, bases) = eventually(CLEANER_TIMEOUT, "retention by size", || {
        let (low, _) = watermarks(&b, "by-size");
        let bases = segment_bases(&part);
        (low > 0 && bases.first() == Some(&low)).then_some((low, bases))
    });
    let kept: u64 = bases
        .iter()
        .map(|base| {
            std::fs::metadata(part.join(format!("{base:020}.log")))
                .map(|m| m.len())
                .unwrap_or(0)
        })
        .sum();
    let first_len = std::fs::metadata(part.join(format!("{low:020}.log")))
        .map(|m| m.len())
        .unwrap_or(0);
    assert!(
        kept - first_len <= 2048,
        "the oldest segment that could go without going under 2 KiB went ({kept} bytes kept)"
    );
    assert_eq!(
        read_until(&b, "by-size", Offset::Beginning, 59),
        sized[low as usize..].to_vec(),
        "what is left is intact"
    );
    assert_eq!(
        cold_records(&cold.join("by-size/0")),
        sized[..low as usize].to_vec(),
        "every deleted record is in cold storage"
    );

    // By age: records an hour old, then fresh ones; retention.ms is 30 minutes.
    create_topic(
        &b,
        "by-age",
        &[
            ("internal.segment.bytes", SEGMENT_BYTES),
            ("retention.ms", "1800000"),
        ],
    )
    .await;
    let hour_ago = now_ms() - 3_600_000;
    let old: Vec<_> = (0..30)
        .map(|i| (None, value(i), hour_ago + i as i64))
        .collect();
    let mut aged = produce(&p, "by-age", &old).await;
    let fresh: Vec<_> = (30..45).map(|i| (None, value(i), now_ms())).collect();
    aged.extend(produce(&p, "by-age", &fresh).await);
    let first_fresh = aged[30].offset;
    assert_eq!(first_fresh, 30, "offsets are contiguous from 0");
    // A pass may run while the old records are still arriving and delete
    // only some of them; wait for the state every later pass converges to:
    // the log starts at the segment that holds the first fresh record, so
    // every segment of only old records went and no fresh record did.
    let part = data.join("topics/by-age/0");
    let low = eventually(CLEANER_TIMEOUT, "retention by age", || {
        let (low, _) = watermarks(&b, "by-age");
        assert!(
            low <= first_fresh,
            "no fresh record may be deleted (log start {low})"
        );
        let bases = segment_bases(&part);
        let converged = low > 0
            && bases.first() == Some(&low)
            && bases.get(1).is_none_or(|second| *second > first_fresh);
        converged.then_some(low)
    });
    assert_eq!(
        read_until(&b, "by-age", Offset::Beginning, 44),
        aged[low as usize..].to_vec()
    );
    assert_eq!(
        cold_records(&cold.join("by-age/0")),
        aged[..low as usize].to_vec()
    );
    let log = b.stop();
    assert!(
        log.contains("retention pass deleted"),
        "a pass that deleted logs one line:\n{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_records_moves_the_low_watermark_durably() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().to_path_buf();
    let topic = "trimmed";
    let produced = {
        let b = common::start(data.clone(), &FAST_CLEANERS);
        create_topic(&b, topic, &[]).await;
        let p = producer(&b);
        let now = now_ms();
        let records: Vec<_> = (0..10)
            .map(|i| (None, Some(format!("v{i}").into_bytes()), now))
            .collect();
        let produced = produce(&p, topic, &records).await;
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, 0, Offset::Offset(4))
            .expect("tpl");
        let r = admin(&b.addr)
            .delete_records(&tpl, &admin_opts(TIMEOUT))
            .await
            .expect("delete_records");
        let p0 = r.find_partition(topic, 0).expect("partition 0 answered");
        assert_eq!(p0.error(), Ok(()));
        assert_eq!(p0.offset(), Offset::Offset(4), "the new low watermark");
        assert_eq!(watermarks(&b, topic), (4, 10));

        // Below the log start: OFFSET_OUT_OF_RANGE, which with
        // auto.offset.reset=error the consumer reports instead of resetting.
        let c = consumer(&b, &[("auto.offset.reset", "error")]);
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, 0, Offset::Offset(1))
            .expect("tpl");
        c.assign(&tpl).expect("assign");
        let err = eventually(TIMEOUT, "an out-of-range error", || {
            match c.poll(Duration::from_millis(100)) {
                Some(Err(e)) => Some(e),
                Some(Ok(m)) => panic!("read offset {} below the log start", m.offset()),
                None => None,
            }
        });
        assert!(
            matches!(
                err,
                KafkaError::MessageConsumption(
                    RDKafkaErrorCode::AutoOffsetReset | RDKafkaErrorCode::OffsetOutOfRange
                )
            ),
            "{err:?}"
        );
        assert_eq!(
            read_until(&b, topic, Offset::Beginning, 9),
            produced[4..].to_vec()
        );
        b.stop();
        produced
    };
    let b = common::start(data, &FAST_CLEANERS);
    assert_eq!(
        watermarks(&b, topic),
        (4, 10),
        "the log start survives a restart"
    );
    assert_eq!(
        read_until(&b, topic, Offset::Beginning, 9),
        produced[4..].to_vec()
    );
}
