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
//!   independent format checker; the leader stopped last has checkpointed
//!   the partition's high watermark (high_watermarks.json).
//! - SIGTERM of a leader is a controlled shutdown: the leadership is
//!   handed over before the process exits.
//! - An idempotent producer's retry after fail-over: a batch acknowledged by
//!   the old leader and sent again to the new one is answered with its
//!   original offset and stored once (the new leader's producer state was
//!   rebuilt from the replicated records); the next sequence goes on.
//! - Unclean leader election (a topic that allows it): with its whole ISR
//!   gone, a returning out-of-sync replica is elected, logs what may be
//!   lost, and takes writes; the old leader, back, truncates the records
//!   the new leader never had and rejoins the ISR with an identical log.
//! - A partition left without a leader by a topic that forbids unclean
//!   elections stays leaderless while an out-of-sync replica returns; once
//!   the topic allows them, the quorum leader's periodic check elects it.
//! - With min.insync.replicas 3 and one follower paused (SIGSTOP), the ISR
//!   shrinks after replica.lag.time.max.ms and acks=all is refused with
//!   NOT_ENOUGH_REPLICAS; once the follower runs again it rejoins the ISR
//!   and acks=all succeeds.
//! - A topic created and deleted while its leader was paused (the
//!   followers ask the leader about a partition it never opened, or no
//!   longer has) does not hold up replication of the leader's other
//!   partitions: acks=all to them still succeeds with min.insync.replicas
//!   equal to the replication factor.
//!
//! Waits are bounded polls on conditions; times printed are measurements.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::cluster::{signal, topics, Cluster};
use common::replicas::{
    alter_topic, check_format, create, create_assigned, delete, log_bytes, produce, produce_with,
    read_all, shown,
};
use es_test_support::wait::eventually;

const NOT_ENOUGH_REPLICAS: i16 = 19;

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
    // The leader that stopped last checkpointed the partition's high
    // watermark (every acknowledged record) on its way out.
    let path = dir
        .path()
        .join(format!("node-{leader_now}"))
        .join("high_watermarks.json");
    let cp: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).expect("checkpoint")).expect("json");
    let hw = cp["partitions"]
        .as_array()
        .expect("partitions")
        .iter()
        .find(|e| e["topic"] == "r" && e["partition"] == 0)
        .and_then(|e| e["high_watermark"].as_u64());
    assert_eq!(hw, Some(end as u64), "{cp}");
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
fn a_topic_deleted_behind_its_paused_leader_does_not_hold_up_the_leaders_other_partitions() {
    let dir = tempfile::tempdir().expect("tmp");
    // The default lag time: a stalled follower would hold acks=all for
    // 30 s, past the produce's own timeout.
    let mut c = Cluster::start_with(dir.path(), 3, 3, &["--replica-lag-time-max-ms", "30000"]);
    let q = c.leader();
    let n = *c.nodes.keys().find(|id| **id != q).expect("a non-leader");
    let others: Vec<i32> = c.nodes.keys().copied().filter(|id| *id != n).collect();
    let all = [n, others[0], others[1]];
    assert_eq!(
        create_assigned(&c.addr(q), "a", -1, &all, &[("min.insync.replicas", "3")]),
        0
    );
    // In sync as the leader itself has it (it answers the produce).
    eventually(Duration::from_secs(30), "three in sync", || {
        let s = shown(&c.addr(n), "a");
        (s.0 == n && s.3.len() == 3).then_some(())
    });
    assert_eq!(produce(&c.addr(n), "a", "one").0, 0);
    // The leader paused: the others learn of "x" (led by the paused node)
    // and of its deletion before it does.
    let pid = c.nodes[&n].pid();
    signal(pid, "STOP");
    assert_eq!(create_assigned(&c.addr(q), "x", -1, &all, &[]), 0);
    for o in &others {
        eventually(Duration::from_secs(30), "x created on the others", || {
            topics(&c.addr(*o)).contains_key("x").then_some(())
        });
    }
    assert_eq!(delete(&c.addr(q), "x"), 0);
    for o in &others {
        eventually(Duration::from_secs(30), "x deleted on the others", || {
            (!topics(&c.addr(*o)).contains_key("x")).then_some(())
        });
    }
    signal(pid, "CONT");
    for v in ["two", "three", "four"] {
        assert_eq!(produce(&c.addr(n), "a", v).0, 0, "acks=all of {v}");
    }
    let isr = shown(&c.addr(q), "a").3;
    assert_eq!(isr.len(), 3, "ISR {isr:?}");
    for (_, p) in std::mem::take(&mut c.nodes) {
        p.stop();
    }
}

/// On a cluster of four nodes (three voters), creates `topic` on nodes 4
/// (leader) and 3 with min.insync.replicas 1 and `unclean` as its
/// unclean.leader.election.enable, writes "a" with both in sync, kills
/// node 3 (the ISR shrinks to node 4), writes "b" on node 4 alone, kills
/// node 4: the partition is left without a leader, "b" only on node 4.
/// Returns the offset "b" got ("a" is at every offset below it).
fn whole_isr_lost(c: &mut Cluster, topic: &str, unclean: &str) -> i64 {
    c.leader();
    let configs = [
        ("unclean.leader.election.enable", unclean),
        ("min.insync.replicas", "1"),
    ];
    assert_eq!(create_assigned(&c.addr(1), topic, -1, &[4, 3], &configs), 0);
    eventually(Duration::from_secs(30), "both in sync", || {
        let s = shown(&c.addr(1), topic);
        (s.0 == 4 && s.3.len() == 2).then_some(())
    });
    // Node 4 (a learner) may apply the topic's creation a moment later.
    // One acks=all attempt may wait up to its 30 s timeout for node 3 to
    // fetch (or to be shrunk out): the window allows a second attempt, and
    // a failure shows what each one answered.
    let first = eventually(Duration::from_secs(75), "a write to node 4", || {
        let r = produce(&c.addr(4), topic, "a");
        if r.0 != 0 {
            eprintln!("a write to node 4: error {} at {:?}", r.0, Instant::now());
        }
        (r.0 == 0).then_some(r)
    });
    // An attempt that timed out was appended all the same: the one that
    // succeeded follows it, and every offset up to it holds "a".
    let a_last = first.1;
    assert!((0..3).contains(&a_last), "a at {a_last}");
    // The follower dies; once fenced it leaves the ISR; the leader takes a
    // record alone.
    c.nodes.remove(&3).expect("node 3").kill();
    eventually(Duration::from_secs(60), "ISR [4]", || {
        (shown(&c.addr(1), topic).3 == vec![4]).then_some(())
    });
    assert_eq!(produce(&c.addr(4), topic, "b"), (0, a_last + 1));
    // The leader dies too: no replica left to lead.
    c.nodes.remove(&4).expect("node 4").kill();
    eventually(Duration::from_secs(60), "no leader", || {
        (shown(&c.addr(1), topic).0 == -1).then_some(())
    });
    a_last + 1
}

/// After [`whole_isr_lost`] and node 3's unclean election: node 3 leads
/// alone, and a write there takes the offset "b" had on node 4 (`b_offset`).
fn node_3_leads_without_b(c: &Cluster, topic: &str, b_offset: i64) {
    eventually(Duration::from_secs(60), "node 3 leads", || {
        let s = shown(&c.addr(1), topic);
        (s.0 == 3 && s.3 == vec![3]).then_some(())
    });
    let (e, off) = eventually(Duration::from_secs(60), "a write to node 3", || {
        let r = produce(&c.addr(3), topic, "c");
        (r.0 == 0).then_some(r)
    });
    assert_eq!((e, off), (0, b_offset), "c takes the offset b had");
}

#[test]
fn an_unclean_election_takes_the_surviving_replica_and_the_old_leader_truncates() {
    let dir = tempfile::tempdir().expect("tmp");
    // Four nodes, three of them the quorum's voters, so that the quorum
    // outlives both replicas of the topic (on nodes 3 and 4).
    let mut c = Cluster::start_with(dir.path(), 4, 3, &["--replica-lag-time-max-ms", "4000"]);
    let b_offset = whole_isr_lost(&mut c, "u", "true");
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
    node_3_leads_without_b(&c, "u", b_offset);
    // Node 4 returns as a follower: truncates b, catches up, rejoins.
    let mut p = c.spawn(4);
    p.wait_listening();
    c.nodes.insert(4, p);
    eventually(Duration::from_secs(60), "node 4 back in sync", || {
        (shown(&c.addr(1), "u").3.len() == 2).then_some(())
    });
    let read = read_all(&c.addr(3), "u");
    let mut want = vec!["a".to_string(); b_offset as usize];
    want.push("c".to_string());
    assert_eq!(read.values().cloned().collect::<Vec<_>>(), want);
    for (_, p) in std::mem::take(&mut c.nodes) {
        p.stop();
    }
    let l3 = log_bytes(&dir.path().join("node-3"), "u");
    let l4 = log_bytes(&dir.path().join("node-4"), "u");
    assert!(!l3.is_empty() && l3 == l4, "node 4's log is node 3's");
}

#[test]
fn a_leaderless_partition_gets_an_unclean_leader_once_its_topic_allows_it() {
    let dir = tempfile::tempdir().expect("tmp");
    // As above, but the topic allows no unclean election when its ISR dies;
    // the quorum leader's periodic check (every 500 ms here, Kafka's
    // unclean.leader.election.interval.ms) elects once an operator allows it.
    let mut c = Cluster::start_with(
        dir.path(),
        4,
        3,
        &[
            "--replica-lag-time-max-ms",
            "4000",
            "--unclean-leader-election-interval-ms",
            "500",
        ],
    );
    let b_offset = whole_isr_lost(&mut c, "w", "false");
    // Node 3 returns out of sync: not elected while the topic forbids it.
    let mut p = c.spawn(3);
    p.wait_listening();
    c.nodes.insert(3, p);
    // Ready means registered and unfenced: a returning broker's own
    // trigger would have elected it by now.
    assert_eq!(shown(&c.addr(1), "w").0, -1, "no unclean election yet");
    assert_eq!(
        alter_topic(&c.addr(1), "w", "unclean.leader.election.enable", "true"),
        0
    );
    node_3_leads_without_b(&c, "w", b_offset);
    for (_, p) in std::mem::take(&mut c.nodes) {
        p.stop();
    }
}

/// One record `value` of idempotent producer `pid` (epoch 0) at `sequence`,
/// acks=all, to partition 0 of `topic` through `addr`: (error, offset).
fn produce_idempotent(addr: &str, topic: &str, pid: i64, sequence: i32, value: &str) -> (i16, i64) {
    let meta = es_test_support::batch::producer_meta(pid, 0, sequence, false);
    let r = produce_with(addr, topic, 0, value, &meta);
    let p = &r.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

#[test]
fn a_retried_idempotent_batch_is_deduplicated_by_the_new_leader() {
    use es_test_support::wire::KafkaClient;
    use kafka_protocol::messages::{
        ApiKey, InitProducerIdRequest, InitProducerIdResponse, ProducerId,
    };
    let dir = tempfile::tempdir().expect("tmp");
    let mut c = Cluster::start_with(dir.path(), 3, 3, &["--replica-lag-time-max-ms", "4000"]);
    c.leader();
    assert_eq!(
        create(&c.addr(1), "i", 3, &[("min.insync.replicas", "2")]),
        0
    );
    let (leader, ..) = eventually(Duration::from_secs(30), "three in sync", || {
        let s = shown(&c.addr(1), "i");
        (s.0 >= 0 && s.3.len() == 3).then_some(s)
    });
    let mut req = InitProducerIdRequest::default();
    req.transactional_id = None;
    req.transaction_timeout_ms = 60_000;
    req.producer_id = ProducerId(-1);
    req.producer_epoch = -1;
    let mut k = KafkaClient::connect(&c.addr(leader), "repl-test");
    // A broker without a block of producer ids from the quorum yet answers
    // COORDINATOR_LOAD_IN_PROGRESS (or times out), which clients retry (seen on a loaded
    // machine right after the cluster formed).
    let r = eventually(Duration::from_secs(30), "a producer id", || {
        let r: InitProducerIdResponse = k.call(ApiKey::InitProducerId, 4, &req);
        match r.error_code {
            0 => Some(r),
            7 | 14 | 15 | 16 => None,
            other => panic!("InitProducerId: error {other}"),
        }
    });
    let pid = r.producer_id.0;
    for seq in 0..3 {
        let got = produce_idempotent(&c.addr(leader), "i", pid, seq, &format!("v{seq}"));
        assert_eq!(got, (0, i64::from(seq)));
    }
    // The leader dies after acknowledging sequence 2; the producer, not
    // knowing, sends it again to the new leader.
    c.nodes.remove(&leader).expect("leader").kill();
    let survivor = *c.nodes.keys().next().expect("a survivor");
    let (new_leader, ..) = eventually(Duration::from_secs(60), "a new leader", || {
        let s = shown(&c.addr(survivor), "i");
        (s.0 >= 0 && s.0 != leader).then_some(s)
    });
    let retried = eventually(Duration::from_secs(60), "the retry answered", || {
        let r = produce_idempotent(&c.addr(new_leader), "i", pid, 2, "v2");
        (r.0 == 0).then_some(r)
    });
    assert_eq!(retried, (0, 2), "the retry gets the original offset");
    assert_eq!(
        produce_idempotent(&c.addr(new_leader), "i", pid, 3, "v3"),
        (0, 3)
    );
    let read = read_all(&c.addr(new_leader), "i");
    assert_eq!(
        read.values().cloned().collect::<Vec<_>>(),
        vec!["v0", "v1", "v2", "v3"]
    );
    for (_, p) in std::mem::take(&mut c.nodes) {
        p.stop();
    }
}
