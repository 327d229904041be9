//! Partition reassignment and preferred leaders with real es-broker
//! processes on loopback.
//!
//! - A topic with two replicas on brokers 1 and 2 and some acks=all
//!   records, reassigned to brokers 2 and 3 with AlterPartitionReassignments:
//!   broker 3 copies the log through replication and joins the ISR, which
//!   completes the reassignment; ListPartitionReassignments then shows
//!   nothing in progress, Metadata shows replicas [2, 3] and ISR [2, 3],
//!   broker 3's log is byte for byte broker 2's and broker 1 no longer has
//!   the partition's directory.
//! - The preferred leader (broker 2) killed and restarted: broker 3 leads
//!   meanwhile and keeps leading; ElectLeaders (preferred) elects broker 2
//!   back, and a second one answers ELECTION_NOT_NEEDED.
//! - With the automatic rebalance checking every second, a preferred
//!   leader that was killed and restarted leads again without being asked.
//!
//! Waits are bounded polls on conditions.

mod common;

use std::time::Duration;

use common::cluster::Cluster;
use common::replicas::{
    check_format, create_assigned, log_bytes, name, produce, read_all, reassign, shown,
};
use es_test_support::wait::eventually;
use es_test_support::wire::KafkaClient;
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::*;

const ELECTION_NOT_NEEDED: i16 = 84;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;

/// One partition ListPartitionReassignments lists: topic, partition,
/// replicas, adding, removing.
type Ongoing = (String, i32, Vec<i32>, Vec<i32>, Vec<i32>);

/// ListPartitionReassignments (v0) of every partition.
fn ongoing(addr: &str) -> Vec<Ongoing> {
    let mut c = KafkaClient::connect(addr, "reassign-test");
    let mut req = ListPartitionReassignmentsRequest::default();
    req.timeout_ms = 30_000;
    req.topics = None;
    let r: ListPartitionReassignmentsResponse = c.call(ApiKey::ListPartitionReassignments, 0, &req);
    assert_eq!(r.error_code, 0);
    let ids = |v: &[BrokerId]| v.iter().map(|b| b.0).collect::<Vec<i32>>();
    r.topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                (
                    t.name.0.to_string(),
                    p.partition_index,
                    ids(&p.replicas),
                    ids(&p.adding_replicas),
                    ids(&p.removing_replicas),
                )
            })
        })
        .collect()
}

/// ElectLeaders (v2, preferred) of `partitions` of `topic`: each one's
/// (partition, error code).
fn elect_preferred(addr: &str, topic: &str, partitions: &[i32]) -> Vec<(i32, i16)> {
    let mut c = KafkaClient::connect_with_timeout(addr, "reassign-test", Duration::from_secs(40));
    let mut t = TopicPartitions::default();
    t.topic = name(topic);
    t.partitions = partitions.to_vec();
    let mut req = ElectLeadersRequest::default();
    req.election_type = 0;
    req.timeout_ms = 30_000;
    req.topic_partitions = Some(vec![t]);
    let r: ElectLeadersResponse = c.call(ApiKey::ElectLeaders, 2, &req);
    assert_eq!(r.error_code, 0, "{r:?}");
    r.replica_election_results[0]
        .partition_result
        .iter()
        .map(|p| (p.partition_id, p.error_code))
        .collect()
}

/// Kills broker `id` and waits until `topic` is led by another one.
fn kill_and_restart_leader(c: &mut Cluster, id: i32, survivor: i32, topic: &str) -> i32 {
    c.nodes.remove(&id).expect("node").kill();
    let (other, _, _, _) = eventually(Duration::from_secs(60), "a new leader", || {
        let s = shown(&c.addr(survivor), topic);
        (s.0 >= 0 && s.0 != id).then_some(s)
    });
    let mut p = c.spawn(id);
    p.wait_listening();
    c.nodes.insert(id, p);
    other
}

#[test]
fn a_reassignment_moves_the_data_and_preferred_elections_bring_leaders_back() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut c = Cluster::start_with(
        dir.path(),
        3,
        3,
        &[
            "--replica-lag-time-max-ms",
            "4000",
            "--auto-leader-rebalance-enable",
            "false",
        ],
    );
    c.leader();
    assert_eq!(create_assigned(&c.addr(1), "mv", 2, &[1, 2], &[]), 0);
    eventually(Duration::from_secs(30), "two in sync", || {
        let s = shown(&c.addr(1), "mv");
        (s.0 == 1 && s.3.len() == 2).then_some(())
    });
    for i in 0..20 {
        assert_eq!(
            produce(&c.addr(1), "mv", &format!("v{i}")).0,
            0,
            "produce {i}"
        );
    }
    let node = |id: i32| dir.path().join(format!("node-{id}"));
    assert!(!node(3).join("topics/mv/0").exists());

    let started = std::time::Instant::now();
    assert_eq!(reassign(&c.addr(3), "mv", &[2, 3]), 0);
    eventually(
        Duration::from_secs(60),
        "the reassignment completed",
        || {
            let s = shown(&c.addr(3), "mv");
            let mut isr = s.3.clone();
            isr.sort_unstable();
            (ongoing(&c.addr(1)).is_empty() && s.2 == [2, 3] && isr == [2, 3]).then_some(())
        },
    );
    println!(
        "reassignment completed {:?} after it was accepted",
        started.elapsed()
    );
    let (leader, _, replicas, _) = shown(&c.addr(2), "mv");
    assert_eq!(leader, 2, "the first target replica leads");
    assert_eq!(replicas, [2, 3]);
    eventually(Duration::from_secs(30), "node 1's replica removed", || {
        (!node(1).join("topics/mv/0").exists()).then_some(())
    });
    eventually(
        Duration::from_secs(30),
        "node 3's log equal to node 2's",
        || {
            let (two, three) = (log_bytes(&node(2), "mv"), log_bytes(&node(3), "mv"));
            (!two.is_empty() && two == three).then_some(())
        },
    );
    // The new leader's high watermark reaches its log end once the
    // follower has fetched from there (Kafka's rule for a new leader).
    let read = eventually(Duration::from_secs(30), "every record readable", || {
        let read = read_all(&c.addr(2), "mv");
        (read.len() == 20).then_some(read)
    });
    for i in 0..20 {
        assert_eq!(read.get(&i), Some(&format!("v{i}")), "record {i}");
    }
    // Acks=all still works with the new replica set.
    assert_eq!(produce(&c.addr(2), "mv", "after").0, 0);

    // The preferred leader (2) dies and returns: 3 keeps leading until a
    // preferred election.
    let other = kill_and_restart_leader(&mut c, 2, 3, "mv");
    assert_eq!(other, 3);
    eventually(Duration::from_secs(60), "2 back in the ISR", || {
        let s = shown(&c.addr(3), "mv");
        (s.0 == 3 && s.3.len() == 2).then_some(())
    });
    assert_eq!(
        elect_preferred(&c.addr(1), "mv", &[0, 7]),
        [(0, 0), (7, UNKNOWN_TOPIC_OR_PARTITION)]
    );
    assert_eq!(shown(&c.addr(1), "mv").0, 2);
    assert_eq!(
        elect_preferred(&c.addr(2), "mv", &[0]),
        [(0, ELECTION_NOT_NEEDED)]
    );
    assert_eq!(produce(&c.addr(2), "mv", "elected").0, 0);
    // Both replicas in the ISR acknowledged it: node 3 followed the
    // elected leader (its empty epoch as leader dropped from its history).
    assert_eq!(shown(&c.addr(2), "mv").3.len(), 2);
    for (_, p) in std::mem::take(&mut c.nodes) {
        p.stop();
    }
    for id in [2, 3] {
        check_format(&node(id), "mv");
    }
    assert_eq!(log_bytes(&node(2), "mv"), log_bytes(&node(3), "mv"));
}

#[test]
fn preferred_leaders_come_back_automatically() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut c = Cluster::start_with(
        dir.path(),
        3,
        3,
        &[
            "--replica-lag-time-max-ms",
            "4000",
            "--leader-imbalance-check-interval-seconds",
            "1",
        ],
    );
    c.leader();
    assert_eq!(create_assigned(&c.addr(1), "auto", 2, &[1, 2], &[]), 0);
    eventually(Duration::from_secs(30), "two in sync", || {
        let s = shown(&c.addr(2), "auto");
        (s.0 == 1 && s.3.len() == 2).then_some(())
    });
    assert_eq!(produce(&c.addr(1), "auto", "one").0, 0);
    let other = kill_and_restart_leader(&mut c, 1, 2, "auto");
    assert_eq!(other, 2);
    let restarted = std::time::Instant::now();
    // Once 1 is back in the ISR, the quorum leader's periodic check elects
    // it: nobody asks.
    eventually(Duration::from_secs(60), "1 leading again", || {
        let s = shown(&c.addr(3), "auto");
        (s.0 == 1 && s.3.len() == 2).then_some(())
    });
    println!(
        "preferred leader back {:?} after its restart",
        restarted.elapsed()
    );
    // Node 3 may have applied the election before node 1 has: node 1
    // answers NOT_LEADER_OR_FOLLOWER until it has.
    eventually(
        Duration::from_secs(30),
        "acks=all to the elected leader",
        || (produce(&c.addr(1), "auto", "two").0 == 0).then_some(()),
    );
    for (_, p) in std::mem::take(&mut c.nodes) {
        p.stop();
    }
}
