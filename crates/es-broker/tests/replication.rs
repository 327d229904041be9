//! Partition replication with real es-broker processes on loopback.
//!
//! - A topic created with replication factor 3 and min.insync.replicas 2
//!   has three replicas in its ISR; acks=all produces are answered once
//!   every in-sync replica has the records on disk.
//! - kill -9 of the partition's leader: a new leader is elected from the
//!   ISR, every acknowledged record is readable from it at the offset it
//!   was acknowledged with, and produces go on.
//! - The killed broker, restarted, truncates to the new leader's log where
//!   they diverge, catches up and rejoins the ISR; afterwards the three
//!   replicas' logs are byte for byte the same, and each passes the
//!   independent format checker.
//! - SIGTERM of a leader is a controlled shutdown: the leadership is
//!   handed over before the process exits.
//! - Unclean leader election (a topic that allows it): with its whole ISR
//!   gone, a returning out-of-sync replica is elected, logs what may be
//!   lost, and takes writes; the old leader, back, truncates the records
//!   the new leader never had and rejoins the ISR with an identical log.
//! - With min.insync.replicas 3 and one follower paused (SIGSTOP), the ISR
//!   shrinks after replica.lag.time.max.ms and acks=all is refused with
//!   NOT_ENOUGH_REPLICAS; once the follower runs again it rejoins the ISR
//!   and acks=all succeeds.
//!
//! Waits are bounded polls on conditions; times printed are measurements.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::cluster::Cluster;
use es_test_support::wait::eventually;
use es_test_support::wire::KafkaClient;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::RecordBatchDecoder;

const NOT_ENOUGH_REPLICAS: i16 = 19;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

/// Creates `topic` (one partition, `rf` replicas, `configs`) through `addr`.
fn create(addr: &str, topic: &str, rf: i16, configs: &[(&str, &str)]) -> i16 {
    create_on(addr, topic, rf, None, configs)
}

/// As [`create`], partition 0's replicas given (`rf` then -1).
fn create_on(
    addr: &str,
    topic: &str,
    rf: i16,
    replicas: Option<&[i32]>,
    configs: &[(&str, &str)],
) -> i16 {
    use kafka_protocol::messages::create_topics_request::CreatableReplicaAssignment;
    let mut c = KafkaClient::connect_with_timeout(addr, "repl-test", Duration::from_secs(40));
    let mut t = CreatableTopic::default();
    t.name = name(topic);
    t.num_partitions = 1;
    t.replication_factor = rf;
    if let Some(r) = replicas {
        let mut a = CreatableReplicaAssignment::default();
        a.partition_index = 0;
        a.broker_ids = r.iter().map(|b| BrokerId(*b)).collect();
        t.assignments = vec![a];
        t.num_partitions = -1;
        t.replication_factor = -1;
    }
    t.configs = configs
        .iter()
        .map(|(k, v)| {
            let mut x = CreatableTopicConfig::default();
            x.name = StrBytes::from_string(k.to_string());
            x.value = Some(StrBytes::from_string(v.to_string()));
            x
        })
        .collect();
    let mut req = CreateTopicsRequest::default();
    req.topics = vec![t];
    req.timeout_ms = 30_000;
    let r: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 7, &req);
    r.topics[0].error_code
}

/// Partition 0 of `topic` as Metadata (v12) from `addr` shows it:
/// (leader, leader epoch, replicas, isr).
fn shown(addr: &str, topic: &str) -> (i32, i32, Vec<i32>, Vec<i32>) {
    let mut c = KafkaClient::connect(addr, "repl-test");
    let mut t = metadata_request::MetadataRequestTopic::default();
    t.name = Some(name(topic));
    let mut req = MetadataRequest::default();
    req.topics = Some(vec![t]);
    let r: MetadataResponse = c.call(ApiKey::Metadata, 12, &req);
    let p = &r.topics[0].partitions[0];
    let ids = |v: &[BrokerId]| v.iter().map(|b| b.0).collect::<Vec<i32>>();
    (
        p.leader_id.0,
        p.leader_epoch,
        ids(&p.replica_nodes),
        ids(&p.isr_nodes),
    )
}

/// Produces one record, acks=all, to partition 0 of `topic` through `addr`:
/// (error, offset).
fn produce(addr: &str, topic: &str, value: &str) -> (i16, i64) {
    let mut batch = es_test_support::batch::KafkaBatch::new();
    batch.record(
        1_700_000_000_000,
        None,
        Some(value.as_bytes()),
        &[],
        &es_storage::record::RecordMeta::default(),
    );
    let mut pd = PartitionProduceData::default();
    pd.index = 0;
    pd.records = Some(batch.encode().into());
    let mut td = TopicProduceData::default();
    td.name = name(topic);
    td.partition_data = vec![pd];
    let mut req = ProduceRequest::default();
    req.acks = -1;
    req.timeout_ms = 30_000;
    req.topic_data = vec![td];
    let mut c = KafkaClient::connect_with_timeout(addr, "repl-test", Duration::from_secs(40));
    let r: ProduceResponse = c.call(ApiKey::Produce, 11, &req);
    let p = &r.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// Every record of partition 0 of `topic` from `addr` (the leader), by
/// offset.
fn read_all(addr: &str, topic: &str) -> BTreeMap<i64, String> {
    let mut c = KafkaClient::connect(addr, "repl-test");
    let mut out = BTreeMap::new();
    let mut offset = 0i64;
    loop {
        let mut p = FetchPartition::default();
        p.partition = 0;
        p.fetch_offset = offset;
        p.partition_max_bytes = 1 << 20;
        p.current_leader_epoch = -1;
        p.last_fetched_epoch = -1;
        let mut t = FetchTopic::default();
        t.topic = name(topic);
        t.partitions = vec![p];
        let mut req = FetchRequest::default();
        req.replica_id = BrokerId(-1);
        req.max_wait_ms = 0;
        req.max_bytes = 8 << 20;
        req.session_epoch = -1;
        req.topics = vec![t];
        let r: FetchResponse = c.call(ApiKey::Fetch, 12, &req);
        let p = &r.responses[0].partitions[0];
        assert_eq!(p.error_code, 0, "fetch from {addr}");
        let mut bytes = p.records.clone().unwrap_or_default();
        if bytes.is_empty() {
            return out;
        }
        let batches = RecordBatchDecoder::decode_all(&mut bytes).expect("batches");
        for b in batches {
            for r in b.records {
                let v = r.value.map(|v| String::from_utf8_lossy(&v).to_string());
                out.insert(r.offset, v.unwrap_or_default());
                offset = r.offset + 1;
            }
        }
    }
}

/// The record bytes of partition 0 of `topic` in `data_dir`: the segments
/// in order, preallocated zeros at the end cut.
fn log_bytes(data_dir: &Path, topic: &str) -> Vec<u8> {
    let dir = data_dir.join("topics").join(topic).join("0");
    let mut logs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("partition dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    logs.sort();
    let mut out = Vec::new();
    for l in logs {
        out.extend(std::fs::read(l).expect("segment"));
    }
    while out.last() == Some(&0) {
        out.pop();
    }
    out
}

fn check_format(data_dir: &Path, topic: &str) {
    let tool = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/tools/check-storage-format");
    if !tool.exists() {
        println!("{} not found: format check skipped", tool.display());
        return;
    }
    let out = std::process::Command::new(tool)
        .arg(data_dir)
        .arg(topic)
        .output()
        .expect("run check-storage-format");
    assert!(
        out.status.success(),
        "check-storage-format {}:\n{}{}",
        data_dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn acknowledged_records_survive_the_loss_of_the_leader_and_replicas_stay_identical() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut c = Cluster::start_with(dir.path(), 3, 3, &["--replica-lag-time-max-ms", "4000"]);
    c.leader();
    assert_eq!(
        create(&c.addr(1), "r", 3, &[("min.insync.replicas", "2")]),
        0
    );
    let (leader, epoch, _, _) = eventually(Duration::from_secs(30), "three in sync", || {
        let s = shown(&c.addr(1), "r");
        (s.0 >= 0 && s.3.len() == 3).then_some(s)
    });
    let mut acked: BTreeMap<i64, String> = BTreeMap::new();
    for i in 0..30 {
        let v = format!("before-{i}");
        let (e, off) = produce(&c.addr(leader), "r", &v);
        assert_eq!(e, 0, "acks=all produce {i} to the leader");
        acked.insert(off, v);
    }

    // The leader dies; another in-sync replica takes over.
    let killed = c.nodes.remove(&leader).expect("leader").kill();
    let _ = killed;
    let t = Instant::now();
    let survivor = *c.nodes.keys().next().expect("a survivor");
    let (new_leader, new_epoch, _, _) = eventually(Duration::from_secs(60), "a new leader", || {
        let s = shown(&c.addr(survivor), "r");
        (s.0 >= 0 && s.0 != leader).then_some(s)
    });
    assert!(new_epoch > epoch);
    let mut produced_after = None;
    for i in 0..30 {
        let v = format!("after-{i}");
        let (e, off) = eventually(Duration::from_secs(60), "produce to the new leader", || {
            let r = produce(&c.addr(new_leader), "r", &v);
            (r.0 == 0).then_some(r)
        });
        assert_eq!(e, 0);
        produced_after.get_or_insert_with(|| t.elapsed());
        acked.insert(off, v);
    }
    println!(
        "new leader {new_leader} (epoch {new_epoch}); first acknowledged produce {:?} after kill -9 of {leader}",
        produced_after
    );
    let read = read_all(&c.addr(new_leader), "r");
    for (off, v) in &acked {
        assert_eq!(read.get(off), Some(v), "acknowledged record at {off}");
    }

    // The old leader returns, catches up and rejoins the ISR.
    let mut p = c.spawn(leader);
    p.wait_listening();
    c.nodes.insert(leader, p);
    eventually(
        Duration::from_secs(60),
        "the restarted broker back in sync",
        || {
            let s = shown(&c.addr(new_leader), "r");
            (s.3.len() == 3).then_some(())
        },
    );
    let end = acked.keys().next_back().copied().expect("acked") + 1;

    // SIGTERM of the leader: a controlled shutdown hands the leadership to
    // another in-sync replica before the process exits, so the metadata
    // names the new leader as soon as it has gone (a crash leaves the
    // partition led by the dead broker until its session expires).
    let (leader_now, ..) = shown(&c.addr(new_leader), "r");
    let log = c.nodes.remove(&leader_now).expect("leader").stop();
    assert!(
        log.contains("controlled shutdown: leaderships handed over"),
        "{log}"
    );
    let other = *c.nodes.keys().next().expect("a broker");
    let (after, ..) = shown(&c.addr(other), "r");
    assert!(
        after >= 0 && after != leader_now,
        "led by {after} right after {leader_now} stopped"
    );
    for (_, p) in std::mem::take(&mut c.nodes) {
        p.stop();
    }
    let logs: Vec<(i32, Vec<u8>)> = (1..=3)
        .map(|id| {
            let d = dir.path().join(format!("node-{id}"));
            check_format(&d, "r");
            (id, log_bytes(&d, "r"))
        })
        .collect();
    assert!(!logs[0].1.is_empty());
    for (id, l) in &logs[1..] {
        assert!(
            *l == logs[0].1,
            "node {id}'s log ({} bytes) equals node {}'s ({} bytes); {end} records acknowledged",
            l.len(),
            logs[0].0,
            logs[0].1.len()
        );
    }
}

/// Sends `sig` (STOP, CONT) to process `pid`.
fn signal(pid: u32, sig: &str) {
    let ok = std::process::Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .expect("kill")
        .success();
    assert!(ok, "kill -{sig} {pid}");
}

#[test]
fn acks_all_is_refused_below_min_insync_replicas() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut c = Cluster::start_with(dir.path(), 3, 3, &["--replica-lag-time-max-ms", "2000"]);
    c.leader();
    assert_eq!(
        create(&c.addr(1), "m", 3, &[("min.insync.replicas", "3")]),
        0
    );
    let (leader, _, _, _) = eventually(Duration::from_secs(30), "three in sync", || {
        let s = shown(&c.addr(1), "m");
        (s.0 >= 0 && s.3.len() == 3).then_some(s)
    });
    assert_eq!(produce(&c.addr(leader), "m", "one").0, 0);
    // One follower paused: the ISR shrinks to two, below
    // min.insync.replicas, and acks=all is refused before anything is
    // appended.
    let paused = *c
        .nodes
        .keys()
        .find(|id| **id != leader)
        .expect("a follower");
    let pid = c.nodes[&paused].pid();
    signal(pid, "STOP");
    let code = eventually(Duration::from_secs(60), "NOT_ENOUGH_REPLICAS", || {
        let r = produce(&c.addr(leader), "m", "two");
        (r.0 == NOT_ENOUGH_REPLICAS).then_some(r.0)
    });
    assert_eq!(code, NOT_ENOUGH_REPLICAS);
    signal(pid, "CONT");
    eventually(Duration::from_secs(60), "the follower back in sync", || {
        (shown(&c.addr(leader), "m").3.len() == 3).then_some(())
    });
    assert_eq!(produce(&c.addr(leader), "m", "three").0, 0);
    for (_, p) in std::mem::take(&mut c.nodes) {
        p.stop();
    }
}

#[test]
fn an_unclean_election_takes_the_surviving_replica_and_the_old_leader_truncates() {
    let dir = tempfile::tempdir().expect("tmp");
    // Four nodes, three of them the quorum's voters, so that the quorum
    // outlives both replicas of the topic (on nodes 3 and 4).
    let mut c = Cluster::start_with(dir.path(), 4, 3, &["--replica-lag-time-max-ms", "4000"]);
    c.leader();
    let configs = [
        ("unclean.leader.election.enable", "true"),
        ("min.insync.replicas", "1"),
    ];
    assert_eq!(create_on(&c.addr(1), "u", -1, Some(&[4, 3]), &configs), 0);
    eventually(Duration::from_secs(30), "both in sync", || {
        let s = shown(&c.addr(1), "u");
        (s.0 == 4 && s.3.len() == 2).then_some(())
    });
    // Node 4 (a learner) may apply the topic's creation a moment later.
    let first = eventually(Duration::from_secs(30), "a write to node 4", || {
        let r = produce(&c.addr(4), "u", "a");
        (r.0 == 0).then_some(r)
    });
    assert_eq!(first, (0, 0));
    // The follower dies; once fenced it leaves the ISR; the leader takes a
    // record alone.
    c.nodes.remove(&3).expect("node 3").kill();
    eventually(Duration::from_secs(60), "ISR [4]", || {
        (shown(&c.addr(1), "u").3 == vec![4]).then_some(())
    });
    assert_eq!(produce(&c.addr(4), "u", "b"), (0, 1));
    // The leader dies too: no replica left to lead.
    c.nodes.remove(&4).expect("node 4").kill();
    eventually(Duration::from_secs(60), "no leader", || {
        (shown(&c.addr(1), "u").0 == -1).then_some(())
    });
    // Node 3 returns, out of sync: elected uncleanly, it leads without "b".
    let mut p = c.spawn(3);
    p.wait_listening();
    eventually(
        Duration::from_secs(60),
        "the unclean election logged",
        || {
            let log = p.log_text();
            log.contains("unclean leader election")
                .then_some(())
                .filter(|_| log.contains("records the previous in-sync replicas had"))
        },
    );
    c.nodes.insert(3, p);
    eventually(Duration::from_secs(60), "node 3 leads", || {
        let s = shown(&c.addr(1), "u");
        (s.0 == 3 && s.3 == vec![3]).then_some(())
    });
    let (e, off) = eventually(Duration::from_secs(60), "a write to node 3", || {
        let r = produce(&c.addr(3), "u", "c");
        (r.0 == 0).then_some(r)
    });
    assert_eq!((e, off), (0, 1), "c takes the offset b had");
    // Node 4 returns as a follower: truncates b, catches up, rejoins.
    let mut p = c.spawn(4);
    p.wait_listening();
    c.nodes.insert(4, p);
    eventually(Duration::from_secs(60), "node 4 back in sync", || {
        (shown(&c.addr(1), "u").3.len() == 2).then_some(())
    });
    let read = read_all(&c.addr(3), "u");
    assert_eq!(
        read.values().cloned().collect::<Vec<_>>(),
        vec!["a".to_string(), "c".to_string()]
    );
    for (_, p) in std::mem::take(&mut c.nodes) {
        p.stop();
    }
    let l3 = log_bytes(&dir.path().join("node-3"), "u");
    let l4 = log_bytes(&dir.path().join("node-4"), "u");
    assert!(!l3.is_empty() && l3 == l4, "node 4's log is node 3's");
}
