//! The scrape-time part of `/metrics`: what the broker already knows, read
//! when Prometheus asks rather than counted on the hot path
//! (docs/metrics.md). Traffic per topic (summed from each partition's
//! counters), log sizes and offsets, partition health, consumer group
//! members and lag, share groups' record work, the metadata quorum's
//! state, mirror lag, uptime.
//!
//! Per-partition series are bounded: only the `--metrics-partition-labels`
//! partitions with the largest logs (and, for lag, the largest lags) get
//! their own `partition` label; the rest of each topic is one series with
//! `partition="other"`, so 10,000 partitions do not make a huge scrape.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use es_kafka::mirror::MirrorSlot;
use es_kafka::Broker;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;

use super::Shared;

/// Every request counted so far (the console's request rate).
pub fn requests_total() -> u64 {
    es_kafka::metrics::kafka_metrics()
        .requests_all
        .load(Ordering::Relaxed)
}

type Labels = Vec<(&'static str, String)>;

/// The admin listener's collector (see the module comment).
#[derive(Debug)]
pub struct BrokerCollector {
    shared: Weak<Shared>,
}

impl BrokerCollector {
    pub fn new(shared: Weak<Shared>) -> Self {
        BrokerCollector { shared }
    }
}

/// One family of gauges.
fn gauges(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: &[(Labels, f64)],
) -> std::fmt::Result {
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, v) in rows {
        if labels.is_empty() {
            m.encode_gauge(v)?;
        } else {
            m.encode_family(labels)?.encode_gauge(v)?;
        }
    }
    Ok(())
}

/// One family of counters (`name` without `_total`: the encoder adds it).
fn counters(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: &[(Labels, u64)],
) -> std::fmt::Result {
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, v) in rows {
        if labels.is_empty() {
            m.encode_counter::<NoLabelSet, _, u64>(v, None)?;
        } else {
            m.encode_family(labels)?
                .encode_counter::<NoLabelSet, _, u64>(v, None)?;
        }
    }
    Ok(())
}

fn gauge(enc: &mut DescriptorEncoder, name: &str, help: &str, v: f64) -> std::fmt::Result {
    gauges(enc, name, help, &[(Vec::new(), v)])
}

/// One partition hosted here, as the scrape sees it.
struct Part {
    topic: String,
    partition: i32,
    size: u64,
    start: u64,
    end: u64,
}

impl Collector for BrokerCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(shared) = self.shared.upgrade() else {
            return Ok(());
        };
        let mut build = enc.encode_descriptor(
            "es_build",
            "the es version running (always 1)",
            None,
            MetricType::Info,
        )?;
        build.encode_info(&vec![("version", env!("CARGO_PKG_VERSION").to_string())])?;
        gauge(
            &mut enc,
            "es_uptime_seconds",
            "seconds since the broker process started",
            shared.started.elapsed().as_secs_f64(),
        )?;
        let Some(broker) = shared.broker().cloned() else {
            return Ok(());
        };
        let top_n = shared.options.partition_labels;
        encode_topics(&mut enc, &broker, top_n)?;
        encode_groups(&mut enc, &broker, top_n)?;
        encode_shares(&mut enc, &broker)?;
        encode_quorum(&mut enc, &broker, &shared)?;
        encode_mirrors(&mut enc, &broker)
    }
}

fn encode_topics(enc: &mut DescriptorEncoder, broker: &Broker, top_n: usize) -> std::fmt::Result {
    // Per topic: bytes in, bytes out, records in, records out, rejected.
    let mut traffic: BTreeMap<String, [u64; 5]> = BTreeMap::new();
    let mut parts = Vec::new();
    for topic in broker.topics() {
        let t = traffic.entry(topic.name.clone()).or_default();
        for slot in topic.partitions() {
            let tr = &slot.traffic;
            t[0] += tr.bytes_in.load(Ordering::Relaxed);
            t[1] += tr.bytes_out.load(Ordering::Relaxed);
            t[2] += tr.records_in.load(Ordering::Relaxed);
            t[3] += tr.records_out.load(Ordering::Relaxed);
            t[4] += tr.produce_rejected.load(Ordering::Relaxed);
            let log = slot.log.storage();
            parts.push(Part {
                topic: topic.name.clone(),
                partition: slot.index,
                size: slot.log.size_bytes(),
                start: log.log_start_offset(),
                end: log.log_end_offset(),
            });
        }
    }
    let health = crate::admin::health::health(broker);
    let per_topic = |i: usize| -> Vec<(Labels, u64)> {
        traffic
            .iter()
            .map(|(name, t)| (vec![("topic", name.clone())], t[i]))
            .collect()
    };
    counters(
        enc,
        "es_topic_bytes_in",
        "record-batch bytes appended by Produce, per topic (BytesInPerSec)",
        &per_topic(0),
    )?;
    counters(
        enc,
        "es_topic_bytes_out",
        "record-batch bytes returned to consumers by Fetch, per topic (BytesOutPerSec)",
        &per_topic(1),
    )?;
    counters(
        enc,
        "es_topic_records_in",
        "records appended by Produce, per topic (MessagesInPerSec)",
        &per_topic(2),
    )?;
    counters(
        enc,
        "es_topic_records_out",
        "offsets returned to consumers by Fetch, per topic",
        &per_topic(3),
    )?;
    counters(
        enc,
        "es_topic_produce_rejected",
        "partition appends refused with an error, per topic (FailedProduceRequestsPerSec)",
        &per_topic(4),
    )?;
    let storage: u64 = parts.iter().map(|p| p.size).sum();
    // The largest logs keep their partition label; the rest are folded
    // into one series per topic.
    parts.sort_by(|a, b| b.size.cmp(&a.size).then(a.topic.cmp(&b.topic)));
    let (named, rest) = parts.split_at(top_n.min(parts.len()));
    let mut sizes: Vec<(Labels, f64)> = named
        .iter()
        .map(|p| {
            (
                part_labels(&p.topic, &p.partition.to_string()),
                p.size as f64,
            )
        })
        .collect();
    let mut other: BTreeMap<&str, u64> = BTreeMap::new();
    for p in rest {
        *other.entry(&p.topic).or_default() += p.size;
    }
    sizes.extend(
        other
            .into_iter()
            .map(|(t, size)| (part_labels(t, "other"), size as f64)),
    );
    gauges(
        enc,
        "es_log_size_bytes",
        "bytes of a partition's log (Log.Size); partition=\"other\" sums a topic's partitions without their own label",
        &sizes,
    )?;
    let offsets = |f: fn(&Part) -> u64| -> Vec<(Labels, f64)> {
        named
            .iter()
            .map(|p| (part_labels(&p.topic, &p.partition.to_string()), f(p) as f64))
            .collect()
    };
    gauges(
        enc,
        "es_log_end_offset",
        "a partition's log end offset (Log.LogEndOffset), for the labelled partitions",
        &offsets(|p| p.end),
    )?;
    gauges(
        enc,
        "es_log_start_offset",
        "a partition's log start offset (Log.LogStartOffset), for the labelled partitions",
        &offsets(|p| p.start),
    )?;
    gauge(
        enc,
        "es_storage_bytes",
        "bytes of every partition log hosted here",
        storage as f64,
    )?;
    gauge(
        enc,
        "es_partitions",
        "partition replicas hosted here (PartitionCount)",
        health.hosted as f64,
    )?;
    gauge(
        enc,
        "es_leader_partitions",
        "partitions led here (LeaderCount)",
        health.led as f64,
    )?;
    gauge(
        enc,
        "es_under_replicated_partitions",
        "partitions led here whose ISR is smaller than their replica set",
        health.led_under_replicated as f64,
    )?;
    gauge(
        enc,
        "es_under_min_isr_partitions",
        "partitions led here whose ISR is below min.insync.replicas",
        health.led_under_min_isr as f64,
    )?;
    gauge(
        enc,
        "es_offline_partitions",
        "partitions without a leader, as this node's metadata sees them",
        health.offline as f64,
    )
}

fn part_labels(topic: &str, partition: &str) -> Labels {
    vec![
        ("topic", topic.to_string()),
        ("partition", partition.to_string()),
    ]
}

/// One group's committed offset of a partition and how far behind it is.
pub(crate) struct Lag {
    pub(crate) group: String,
    pub(crate) topic: String,
    pub(crate) partition: i32,
    pub(crate) lag: u64,
}

/// The groups coordinated here (with their member counts).
pub(crate) type Groups = Vec<(es_kafka::groups::coordinator::Listed, usize)>;

/// Every committed offset of the groups coordinated here, with its lag
/// (high watermark minus committed, never negative) where the partition
/// is hosted here.
pub(crate) fn group_lags(broker: &Broker) -> (Groups, Vec<Lag>) {
    let groups = broker.groups().member_counts();
    let mut out = Vec::new();
    for (g, _) in &groups {
        let Ok((topics, _)) = broker
            .groups()
            .fetch_offsets(&g.group_id, None, None, &|t| broker.topic(t).map(|t| t.id))
        else {
            continue;
        };
        for t in topics {
            let Some(topic) = broker.topic(&t.name) else {
                continue;
            };
            for p in t.partitions {
                if p.offset < 0 {
                    continue;
                }
                let Some(slot) = topic.partition(p.partition) else {
                    continue;
                };
                let hw = slot.log.high_watermark();
                let lag = hw.saturating_sub(u64::try_from(p.offset).unwrap_or(0));
                out.push(Lag {
                    group: g.group_id.clone(),
                    topic: t.name.clone(),
                    partition: p.partition,
                    lag,
                });
            }
        }
    }
    (groups, out)
}

fn encode_groups(enc: &mut DescriptorEncoder, broker: &Broker, top_n: usize) -> std::fmt::Result {
    let (groups, committed) = group_lags(broker);
    let mut by_state: BTreeMap<String, f64> = BTreeMap::new();
    let mut members = Vec::new();
    for (g, n) in &groups {
        *by_state.entry(g.state.clone()).or_default() += 1.0;
        members.push((vec![("group", g.group_id.clone())], *n as f64));
    }
    gauges(
        enc,
        "es_consumer_groups",
        "consumer groups coordinated here, per state",
        &by_state
            .into_iter()
            .map(|(s, n)| (vec![("state", s)], n))
            .collect::<Vec<_>>(),
    )?;
    gauges(
        enc,
        "es_consumer_group_members",
        "members of each group coordinated here",
        &members,
    )?;
    let mut lags = committed;
    let mut sums: BTreeMap<String, u64> = BTreeMap::new();
    for l in &lags {
        *sums.entry(l.group.clone()).or_default() += l.lag;
    }
    lags.sort_by_key(|l| std::cmp::Reverse(l.lag));
    let (named, rest) = lags.split_at(top_n.min(lags.len()));
    let mut rows: Vec<(Labels, f64)> = named
        .iter()
        .map(|l| {
            (
                vec![
                    ("group", l.group.clone()),
                    ("topic", l.topic.clone()),
                    ("partition", l.partition.to_string()),
                ],
                l.lag as f64,
            )
        })
        .collect();
    let mut other: BTreeMap<(&str, &str), u64> = BTreeMap::new();
    for l in rest {
        *other.entry((&l.group, &l.topic)).or_default() += l.lag;
    }
    rows.extend(other.into_iter().map(|((g, t), lag)| {
        (
            vec![
                ("group", g.to_string()),
                ("topic", t.to_string()),
                ("partition", "other".to_string()),
            ],
            lag as f64,
        )
    }));
    gauges(
        enc,
        "es_consumer_group_lag",
        "high watermark minus committed offset, per group and partition (the largest; partition=\"other\" sums the rest of a topic)",
        &rows,
    )?;
    gauges(
        enc,
        "es_consumer_group_lag_sum",
        "a group's lag summed over its committed partitions",
        &sums
            .into_iter()
            .map(|(g, lag)| (vec![("group", g)], lag as f64))
            .collect::<Vec<_>>(),
    )
}

fn encode_quorum(
    enc: &mut DescriptorEncoder,
    broker: &Broker,
    shared: &Arc<Shared>,
) -> std::fmt::Result {
    let Some(node) = broker.metadata() else {
        return Ok(());
    };
    let m = node.raft().metrics().borrow().clone();
    gauge(
        enc,
        "es_raft_term",
        "the metadata quorum's current term (raft-metrics current-epoch)",
        m.current_term as f64,
    )?;
    gauge(
        enc,
        "es_raft_commit_index",
        "the last metadata log index applied here (raft-metrics high-watermark)",
        m.last_applied.map_or(0.0, |l| l.index as f64),
    )?;
    gauge(
        enc,
        "es_raft_leader",
        "the metadata quorum's leader as this node knows it (-1: none)",
        m.current_leader.map_or(-1.0, |l| l as f64),
    )?;
    counters(
        enc,
        "es_raft_leader_changes",
        "metadata quorum leaders seen by this node since it started",
        &[(
            Vec::new(),
            shared.throughput.leader_changes.load(Ordering::Relaxed),
        )],
    )
}

/// Share groups' record work (KIP-932; counted by the share-partitions as
/// it happens) and what is open now.
fn encode_shares(enc: &mut DescriptorEncoder, broker: &Broker) -> std::fmt::Result {
    use es_kafka::shares::manager::ShareStats;
    let shares = broker.shares();
    let st = shares.stats();
    let load = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    counters(
        enc,
        "es_share_acquired_records",
        "records handed out by ShareFetch (each delivery counts)",
        &[(Vec::new(), load(&st.acquired_records))],
    )?;
    let acks: Vec<(Labels, u64)> = ShareStats::ACK_TYPES
        .iter()
        .zip(&st.acknowledged_records)
        .map(|(t, c)| (vec![("type", t.to_string())], load(c)))
        .collect();
    counters(
        enc,
        "es_share_acknowledged_records",
        "records acknowledged by share consumers, per acknowledgement type",
        &acks,
    )?;
    counters(
        enc,
        "es_share_lock_expirations",
        "acquired records whose acquisition lock expired",
        &[(Vec::new(), load(&st.lock_expirations))],
    )?;
    counters(
        enc,
        "es_share_journal_fsyncs",
        "fsyncs of share-partition journals (one covers every change waiting)",
        &[(Vec::new(), load(&st.journal_fsyncs))],
    )?;
    gauge(
        enc,
        "es_share_sessions",
        "share sessions open on this broker",
        shares.session_count() as f64,
    )?;
    gauge(
        enc,
        "es_share_partitions_loaded",
        "share-partitions held in memory on this broker",
        shares.loaded() as f64,
    )
}

fn encode_mirrors(enc: &mut DescriptorEncoder, broker: &Broker) -> std::fmt::Result {
    let statuses = broker
        .extension(MirrorSlot::default)
        .get()
        .map(|c| c.status())
        .unwrap_or_default();
    let rows: Vec<(Labels, f64)> = statuses
        .iter()
        .filter(|t| t.state != "promoted")
        .map(|t| {
            let lag: i64 = t.partitions.iter().map(|p| p.lag.max(0)).sum();
            (
                vec![("link", t.link.clone()), ("topic", t.topic.clone())],
                lag as f64,
            )
        })
        .collect();
    gauges(
        enc,
        "es_mirror_lag_records",
        "offsets a mirror topic is behind its source, summed over its partitions",
        &rows,
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;
    use std::time::Instant;

    use es_kafka::{Broker, BrokerConfig};
    use es_storage::simfs::SimFs;
    use es_storage::Storage;

    /// The scrape with 10,000 partitions (docs/benchmarks.md): a broker on
    /// es-storage's in-memory file system (10,000 real partitions keep
    /// 40,000 files open, more than this machine's descriptor limit lets
    /// one process have), 100 topics of 100 partitions, a record in every
    /// tenth partition, then /metrics' text encoded as a scrape encodes it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "a benchmark: cargo test --release -p es-broker --bin es-broker scrape_with -- --ignored --nocapture"]
    async fn scrape_with_10000_partitions() {
        let mut config = BrokerConfig::new("/data".into(), "127.0.0.1:0");
        config.storage = Storage::new(Arc::new(SimFs::new()));
        let broker = Broker::open_running(config).await.expect("broker");
        let started = Instant::now();
        for t in 0..100 {
            broker
                .create_topic(&format!("scrape-{t:03}"), 100, BTreeMap::new(), false)
                .await
                .expect("create");
        }
        println!("created 10,000 partitions in {:?}", started.elapsed());
        let b = broker.clone();
        tokio::task::spawn_blocking(move || {
            for (_, slot) in b.partitions_snapshot() {
                if slot.index % 10 == 0 {
                    let mut buf = es_storage::RecordBatchBuf::new();
                    let value = vec![b'x'; 100 + slot.index as usize];
                    buf.push(
                        0,
                        None,
                        Some(&value[..]),
                        [],
                        &es_storage::RecordMeta::default(),
                    );
                    slot.log.storage().append(&mut buf).expect("append");
                }
            }
        })
        .await
        .expect("appends");
        for labels in [100, 10_000] {
            let admin = super::super::spawn(
                "127.0.0.1:0".into(),
                super::super::Options {
                    partition_labels: labels,
                    sasl: false,
                },
            );
            admin.set_broker(broker.clone());
            let shared = admin.shared.clone();
            let mut times = Vec::new();
            let mut size = 0;
            for _ in 0..10 {
                let t = Instant::now();
                let mut out = String::new();
                prometheus_client::encoding::text::encode(&mut out, &shared.registry)
                    .expect("encode");
                times.push(t.elapsed());
                size = out.len();
            }
            times.sort();
            println!(
                "labels={labels} partitions=10000 scrape_bytes={size} median={:?} max={:?}",
                times[times.len() / 2],
                times[times.len() - 1]
            );
            assert!(size > 0);
        }
    }
}
