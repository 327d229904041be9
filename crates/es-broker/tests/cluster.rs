//! The metadata quorum with real es-broker processes on loopback.
//!
//! - A data directory written by a single-node es before the quorum existed
//!   (topics, a dynamic broker config) opens unchanged: its topics keep
//!   their ids, and the import happens once (one Raft entry).
//! - Three nodes, all voters, form a quorum from `--controller-quorum-voters`;
//!   CreateTopics sent to any node is forwarded to the controller leader and
//!   answered once committed; every node lists the topic; DescribeQuorum
//!   names the leader and three voters from any node.
//! - Groups and transactional ids are placed as Kafka places them: with six
//!   partitions of `__consumer_offsets` and `__transaction_state` over
//!   three nodes, every node names the same coordinator for a key, keys
//!   land on more than one node, and every group and transactional-id API
//!   sent to a node that is not the key's coordinator answers
//!   NOT_COORDINATOR where Kafka puts it, while the coordinator serves it.
//! - kill -9 of the controller leader during a stream of CreateTopics: every
//!   topic whose creation was acknowledged exists afterwards on every node,
//!   none twice; a new leader is elected; the stream goes on; the killed
//!   node, restarted, catches up.
//!
//! - Partitions are spread over the brokers; every node answers Metadata
//!   alike; a partition request to a broker that does not lead it gets
//!   NOT_LEADER_OR_FOLLOWER with the leader named (KIP-951); a killed
//!   broker is fenced after its session times out, its partitions have no
//!   leader until it returns, then it leads them at a new epoch.
//!
//! - Client quotas set through one node are described by every node, and
//!   each node throttles a producer over its client id's byte rate.
//!
//! Waits are bounded polls on conditions; the election time printed is a
//! measurement, not an assertion.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use es_test_support::process::BrokerProcess;
use es_test_support::wait::eventually;
use es_test_support::wire::KafkaClient;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

mod common;

use common::cluster::{quorum, topics, Cluster, EXE};

/// Creates one topic through `addr`; the error code.
fn create_topic(addr: &str, name: &str) -> Option<i16> {
    let mut c = KafkaClient::connect_with_timeout(addr, "cluster-test", Duration::from_secs(40));
    let mut t = CreatableTopic::default();
    t.name = TopicName(StrBytes::from_string(name.to_string()));
    t.num_partitions = 1;
    t.replication_factor = -1;
    let mut req = CreateTopicsRequest::default();
    req.topics = vec![t];
    req.timeout_ms = 30_000;
    c.send(ApiKey::CreateTopics, 7, &req);
    let buf = es_test_support::wire::read_frame(&mut c.stream)?;
    let r: CreateTopicsResponse =
        es_test_support::wire::decode_response(ApiKey::CreateTopics, 7, 7, 1, &buf);
    r.topics.first().map(|t| t.error_code)
}

#[test]
fn a_pre_quorum_data_directory_opens_unchanged() {
    let dir = tempfile::tempdir().expect("tmp");
    let data = dir.path().join("data");
    // What a single-node es wrote before the quorum: meta.json, topics.
    std::fs::create_dir_all(data.join("topics")).expect("mkdir");
    std::fs::write(
        data.join("meta.json"),
        r#"{"cluster_id":"AAAAAAAAAAAAAAAAAAAAAA","node_id":0}"#,
    )
    .expect("meta.json");
    let id = uuid::Uuid::new_v4();
    let storage = es_storage::Storage::new(std::sync::Arc::new(es_storage::RealFs));
    let defaults =
        es_kafka::broker::BrokerConfig::new(data.clone(), "127.0.0.1:0").topic_defaults();
    let config = es_kafka::config::TopicConfig::new(
        BTreeMap::from([("retention.ms".to_string(), "12345".to_string())]),
        defaults,
    )
    .expect("config");
    // A single node hosts every partition.
    let t = es_kafka::topics::create_topic(
        &storage,
        &data.join("topics"),
        "legacy",
        id,
        3,
        config,
        &es_kafka::topics::host_all,
    )
    .expect("legacy topic");
    t.close().expect("close");
    drop(t);
    assert!(!data.join("meta").exists());

    let b = BrokerProcess::start(Path::new(EXE), &data, &[]);
    let listed = topics(&b.addr);
    assert_eq!(listed.get("legacy"), Some(&id), "{listed:?}");
    let topic_json =
        std::fs::read_to_string(data.join("topics/legacy/topic.json")).expect("topic.json");
    assert!(topic_json.contains("12345"), "{topic_json}");
    b.stop();

    // A second start imports nothing again: the log holds one CreateTopics.
    let b = BrokerProcess::start(Path::new(EXE), &data, &[]);
    assert_eq!(topics(&b.addr).get("legacy"), Some(&id));
    assert_eq!(create_topic(&b.addr, "new"), Some(0));
    b.stop();
    let mut log = Vec::new();
    for e in std::fs::read_dir(data.join("meta")).expect("meta dir") {
        let p = e.expect("entry").path();
        if p.extension().is_some_and(|x| x == "raftlog") {
            log.extend(std::fs::read(&p).expect("read"));
        }
    }
    let text = String::from_utf8_lossy(&log);
    assert_eq!(text.matches("\"legacy\"").count(), 1, "imported once");
    assert_eq!(
        text.matches("create_topics.v1").count(),
        2,
        "one entry per request"
    );
}

#[test]
fn three_nodes_form_a_quorum_and_survive_the_loss_of_the_leader() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut c = Cluster::start(dir.path(), 3, 3);
    let leader = c.leader();
    let (_, _, voters) = quorum(&c.addr(1)).expect("quorum");
    assert_eq!(voters.len(), 3);
    for id in 1..=3 {
        assert_eq!(quorum(&c.addr(id)).map(|q| q.0), Some(leader), "node {id}");
    }
    // Created through a node that is not the leader.
    let follower = *c.nodes.keys().find(|id| **id != leader).expect("follower");
    assert_eq!(create_topic(&c.addr(follower), "first"), Some(0));
    for id in 1..=3 {
        let addr = c.addr(id);
        eventually(Duration::from_secs(20), "the topic on every node", || {
            topics(&addr).contains_key("first").then_some(())
        });
    }

    // A stream of CreateTopics through one surviving node; the leader dies mid-way.
    let via = follower;
    let mut acked = Vec::new();
    let mut killed_at: Option<Instant> = None;
    let mut elected_after = None;
    for i in 0..40 {
        if i == 15 {
            let p = c.nodes.remove(&leader).expect("leader process");
            p.kill();
            let t = Instant::now();
            killed_at = Some(t);
            // How long the survivors take to elect a leader (a measurement,
            // printed; polled every 20 ms).
            let survivor = c.addr(via);
            eventually(Duration::from_secs(30), "a new leader", || {
                quorum(&survivor).filter(|q| q.0 != leader).map(|_| ())
            });
            elected_after = Some(t.elapsed());
        }
        let name = format!("s{i}");
        if create_topic(&c.addr(via), &name) == Some(0) {
            acked.push(name);
        }
    }
    let new_leader = c.leader();
    assert_ne!(new_leader, leader);
    println!(
        "new leader {new_leader} elected {:?} after the kill; {} of 40 creations acknowledged (the stream took {:?} after the kill)",
        elected_after,
        acked.len(),
        killed_at.map(|t| t.elapsed())
    );
    assert!(
        acked.len() >= 25,
        "the stream went on after the fail-over: {acked:?}"
    );
    // Every surviving node lists every acknowledged topic (a node that is
    // not the leader applies the log a moment later).
    for id in c.nodes.keys().copied().collect::<Vec<_>>() {
        let addr = c.addr(id);
        eventually(Duration::from_secs(30), "every acknowledged topic", || {
            let listed = topics(&addr);
            acked.iter().all(|n| listed.contains_key(n)).then_some(())
        });
    }

    // The old leader comes back and catches up.
    let mut p = c.spawn(leader);
    p.wait_listening();
    c.nodes.insert(leader, p);
    let addr = c.addr(leader);
    let want = topics(&c.addr(new_leader));
    eventually(
        Duration::from_secs(30),
        "the restarted node caught up",
        || (topics(&addr) == want).then_some(()),
    );
    for (_, p) in std::mem::take(&mut c.nodes) {
        p.stop();
    }
}

/// `es-broker keys SUBCOMMAND --data-dir DIR ARGS`: its output.
fn keys_cli(data_dir: &Path, sub: &str, args: &[&str]) -> String {
    let out = std::process::Command::new(EXE)
        .args(["keys", sub, "--data-dir"])
        .arg(data_dir)
        .args(args)
        .output()
        .expect("run keys");
    assert!(
        out.status.success(),
        "keys {sub} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// Key `id` as node data directory `dir`'s `api_keys.json` holds it.
fn key_in_file(dir: &Path, id: &str) -> Option<serde_json::Value> {
    let text = std::fs::read_to_string(dir.join("api_keys.json")).ok()?;
    let file: serde_json::Value = serde_json::from_str(&text).ok()?;
    file["keys"]
        .as_array()?
        .iter()
        .find(|k| k["id"] == id)
        .cloned()
}

/// API keys live in the cluster metadata: a key created with `keys create
/// --data-dir` beside one running node reaches the other's keys file (only
/// the metadata writes it there), a revocation on the other node comes
/// back, and a node whose file is lost gets it back from the metadata.
#[test]
fn api_keys_reach_every_node_through_the_metadata() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut c = Cluster::start(dir.path(), 2, 2);
    c.leader();
    let d1 = c.nodes[&1].data_dir.clone();
    let d2 = c.nodes[&2].data_dir.clone();
    let line = keys_cli(
        &d1,
        "create",
        &["--principal", "User:alice", "--id", "alice"],
    );
    assert!(line.starts_with("alice "), "{line}");
    let on1 = key_in_file(&d1, "alice").expect("the key on node 1");
    let on2 = eventually(Duration::from_secs(30), "the key on node 2", || {
        key_in_file(&d2, "alice")
    });
    assert_eq!(on2, on1, "node 2 holds the key as created");
    assert_eq!(on2["principal"], "User:alice");
    assert!(on2["hash"]
        .as_str()
        .is_some_and(|h| h.starts_with("$argon2id$")));

    assert_eq!(keys_cli(&d2, "revoke", &["alice"]).trim(), "revoked alice");
    eventually(Duration::from_secs(30), "the revocation on node 1", || {
        key_in_file(&d1, "alice").filter(|k| k["revoked"] == true)
    });

    let p2 = c.nodes.remove(&2).expect("node 2");
    p2.stop();
    std::fs::remove_file(d2.join("api_keys.json")).expect("remove the file");
    let mut p = c.spawn(2);
    p.wait_listening();
    c.nodes.insert(2, p);
    let back = eventually(Duration::from_secs(30), "the file rewritten", || {
        key_in_file(&d2, "alice")
    });
    assert_eq!(back["revoked"], true);
    assert_eq!(back["hash"], "");
    for (_, p) in std::mem::take(&mut c.nodes) {
        p.stop();
    }
}

/// A client id's quota through `addr`: AlterClientQuotas, its result code.
fn set_client_quota(addr: &str, client: &str, key: &str, value: f64) -> i16 {
    use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
    let mut d = EntityData::default();
    d.entity_type = sb("client-id");
    d.entity_name = Some(sb(client));
    let mut op = OpData::default();
    op.key = sb(key);
    op.value = value;
    let mut e = EntryData::default();
    e.entity = vec![d];
    e.ops = vec![op];
    let mut req = AlterClientQuotasRequest::default();
    req.entries = vec![e];
    let mut c = KafkaClient::connect_with_timeout(addr, "cluster-test", Duration::from_secs(40));
    let r: AlterClientQuotasResponse = c.call(ApiKey::AlterClientQuotas, 1, &req);
    r.entries[0].error_code
}

/// The client ids with a quota, as `addr` describes them.
fn quota_clients(addr: &str) -> Vec<String> {
    let req = DescribeClientQuotasRequest::default();
    let mut c = KafkaClient::connect(addr, "cluster-test");
    let r: DescribeClientQuotasResponse = c.call(ApiKey::DescribeClientQuotas, 1, &req);
    r.entries
        .unwrap_or_default()
        .iter()
        .flat_map(|e| e.entity.iter())
        .filter_map(|d| d.entity_name.as_ref().map(|n| n.to_string()))
        .collect()
}

#[test]
fn client_quotas_reach_every_node_and_each_enforces_them() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut c = Cluster::start(dir.path(), 2, 2);
    c.leader();
    assert_eq!(
        set_client_quota(&c.addr(1), "metered", "producer_byte_rate", 1024.0),
        0
    );
    for id in 1..=2 {
        let addr = c.addr(id);
        eventually(Duration::from_secs(30), "the quota on every node", || {
            (quota_clients(&addr) == ["metered"]).then_some(())
        });
    }
    assert_eq!(create_topic(&c.addr(2), "metered"), Some(0));
    // Every node counts the produce bytes it receives against the quota
    // (quotas are per broker, as in Kafka), whether it leads the partition
    // or answers NOT_LEADER_OR_FOLLOWER: 20 KiB at once is twice what ten
    // windows of 1024 B/s allow.
    for id in 1..=2 {
        let mut batch = es_test_support::batch::KafkaBatch::new();
        let value = vec![b'm'; 20 * 1024];
        batch.record(
            1_700_000_000_000,
            None,
            Some(&value),
            &[],
            &Default::default(),
        );
        let mut pd = produce_request::PartitionProduceData::default();
        pd.index = 0;
        pd.records = Some(batch.encode().into());
        let mut td = produce_request::TopicProduceData::default();
        td.name = TopicName(sb("metered"));
        td.partition_data = vec![pd];
        let mut req = ProduceRequest::default();
        req.acks = -1;
        req.timeout_ms = 30_000;
        req.topic_data = vec![td];
        let mut k = KafkaClient::connect(&c.addr(id), "metered");
        let r: ProduceResponse = k.call(ApiKey::Produce, 9, &req);
        assert!(r.throttle_time_ms > 0, "node {id}: {r:?}");
    }
    for (_, p) in std::mem::take(&mut c.nodes) {
        p.stop();
    }
}

/// `es-broker quorum` over a node's Raft listener.
fn quorum_cli(controller: &str, args: &[&str]) -> String {
    let out = std::process::Command::new(EXE)
        .args(["quorum", "--controller", controller])
        .args(args)
        .output()
        .expect("es-broker quorum");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "es-broker quorum {args:?}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

#[test]
fn a_learner_is_made_a_voter_and_back_with_the_quorum_subcommand() {
    let dir = tempfile::tempdir().expect("tmp");
    let c = Cluster::start(dir.path(), 3, 2);
    let controller = format!("127.0.0.1:{}", c.raft_ports[&1]);
    let voters = |text: &str| text.lines().filter(|l| l.starts_with("Voter:")).count();
    let learners = |text: &str| text.lines().filter(|l| l.starts_with("Learner:")).count();
    let d = quorum_cli(&controller, &["describe"]);
    assert_eq!((voters(&d), learners(&d)), (2, 1), "{d}");
    // Kafka's DescribeQuorum, from a broker, says the same.
    eventually(
        Duration::from_secs(20),
        "two voters in DescribeQuorum",
        || quorum(&c.addr(3)).filter(|q| q.2.len() == 2).map(|_| ()),
    );

    assert_eq!(
        quorum_cli(&controller, &["add-voter", "--node-id", "3"]).trim(),
        "done"
    );
    let d = quorum_cli(&controller, &["describe"]);
    assert_eq!((voters(&d), learners(&d)), (3, 0), "{d}");
    eventually(
        Duration::from_secs(20),
        "three voters in DescribeQuorum",
        || quorum(&c.addr(1)).filter(|q| q.2.len() == 3).map(|_| ()),
    );

    let out = quorum_cli(
        &controller,
        &["remove-voter", "--node-id", "3", "--keep-as-learner"],
    );
    assert_eq!(out.trim(), "done");
    let d = quorum_cli(&controller, &["describe"]);
    assert_eq!((voters(&d), learners(&d)), (2, 1), "{d}");
    // Still a cluster: a topic created through the learner exists everywhere.
    assert_eq!(create_topic(&c.addr(3), "after-changes"), Some(0));
    for id in 1..=3 {
        let addr = c.addr(id);
        eventually(Duration::from_secs(20), "the topic on every node", || {
            topics(&addr).contains_key("after-changes").then_some(())
        });
    }
}

/// Creates `name` with `partitions` partitions through `addr`; the error code.
/// One replica per partition: what this file's placement and fencing
/// checks are about (tests/replication.rs covers replicated partitions).
fn create_spread_topic(addr: &str, name: &str, partitions: i32) -> i16 {
    let mut c = KafkaClient::connect_with_timeout(addr, "cluster-test", Duration::from_secs(40));
    let mut t = CreatableTopic::default();
    t.name = TopicName(StrBytes::from_string(name.to_string()));
    t.num_partitions = partitions;
    t.replication_factor = 1;
    let mut req = CreateTopicsRequest::default();
    req.topics = vec![t];
    req.timeout_ms = 30_000;
    let r: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 7, &req);
    r.topics[0].error_code
}

/// A partition as Metadata shows it: (error, leader, leader epoch, offline replicas).
type Shown = (i16, i32, i32, Vec<i32>);
/// (node id, port) of a broker.
type NodePort = (i32, i32);

/// One topic's Metadata (v12) from `addr`: the brokers listed and each
/// partition.
fn placement(addr: &str, topic: &str) -> (Vec<NodePort>, Vec<Shown>) {
    let mut c = KafkaClient::connect(addr, "cluster-test");
    let mut t = kafka_protocol::messages::metadata_request::MetadataRequestTopic::default();
    t.name = Some(TopicName(StrBytes::from_string(topic.to_string())));
    let mut req = MetadataRequest::default();
    req.topics = Some(vec![t]);
    let r: MetadataResponse = c.call(ApiKey::Metadata, 12, &req);
    let brokers = r.brokers.iter().map(|b| (b.node_id.0, b.port)).collect();
    let parts = r.topics[0]
        .partitions
        .iter()
        .map(|p| {
            (
                p.error_code,
                p.leader_id.0,
                p.leader_epoch,
                p.offline_replicas.iter().map(|r| r.0).collect(),
            )
        })
        .collect();
    (brokers, parts)
}

/// Produces one record to `topic`/`partition` through `addr` (Produce v11):
/// (error, base offset, current leader hint, endpoints hinted).
fn produce_one(
    addr: &str,
    topic: &str,
    partition: i32,
    value: &str,
) -> (i16, i64, (i32, i32), Vec<NodePort>) {
    let r = common::replicas::produce_to(addr, topic, partition, value);
    let p = &r.responses[0].partition_responses[0];
    (
        p.error_code,
        p.base_offset,
        (p.current_leader.leader_id.0, p.current_leader.leader_epoch),
        r.node_endpoints
            .iter()
            .map(|e| (e.node_id.0, e.port))
            .collect(),
    )
}

/// ListOffsets (v7, latest) of `topic`/`partition` through `addr`: (error, offset).
fn latest_offset(addr: &str, topic: &str, partition: i32) -> (i16, i64) {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    let mut p = ListOffsetsPartition::default();
    p.partition_index = partition;
    p.timestamp = -1;
    p.current_leader_epoch = -1;
    let mut t = ListOffsetsTopic::default();
    t.name = TopicName(StrBytes::from_string(topic.to_string()));
    t.partitions = vec![p];
    let mut req = kafka_protocol::messages::ListOffsetsRequest::default();
    req.replica_id = kafka_protocol::messages::BrokerId(-1);
    req.topics = vec![t];
    let mut c = KafkaClient::connect(addr, "cluster-test");
    let r: kafka_protocol::messages::ListOffsetsResponse = c.call(ApiKey::ListOffsets, 7, &req);
    let p = &r.topics[0].partitions[0];
    (p.error_code, p.offset)
}

const NOT_LEADER_OR_FOLLOWER: i16 = 6;
const LEADER_NOT_AVAILABLE: i16 = 5;

#[test]
fn partitions_are_spread_over_the_brokers_and_served_by_their_leaders() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut c = Cluster::start(dir.path(), 3, 3);
    c.leader();
    assert_eq!(create_spread_topic(&c.addr(2), "spread", 6), 0);
    let ports: BTreeMap<i32, i32> = c
        .nodes
        .iter()
        .map(|(id, p)| {
            (
                *id,
                p.addr
                    .rsplit(':')
                    .next()
                    .expect("port")
                    .parse()
                    .expect("port"),
            )
        })
        .collect();
    // Every node answers the same placement once it has applied the
    // creation: the three brokers with their ports, two partitions each.
    let want = placement(&c.addr(1), "spread");
    for id in 1..=3 {
        let addr = c.addr(id);
        eventually(
            Duration::from_secs(20),
            "the same placement on every node",
            || (placement(&addr, "spread") == want).then_some(()),
        );
    }
    let (brokers, parts) = want;
    assert_eq!(
        brokers,
        ports.iter().map(|(k, v)| (*k, *v)).collect::<Vec<_>>()
    );
    assert_eq!(parts.len(), 6);
    for id in 1..=3 {
        assert_eq!(parts.iter().filter(|p| p.1 == id).count(), 2, "{parts:?}");
    }
    assert!(
        parts.iter().all(|p| p.0 == 0 && p.3.is_empty()),
        "{parts:?}"
    );

    // A manual assignment is kept as given, through any node; a broker that
    // is not registered, one named twice, or lists of different lengths are
    // refused.
    let assign = |name: &str, lists: &[&[i32]]| -> i16 {
        use kafka_protocol::messages::create_topics_request::CreatableReplicaAssignment;
        let mut t = CreatableTopic::default();
        t.name = TopicName(StrBytes::from_string(name.to_string()));
        t.num_partitions = -1;
        t.replication_factor = -1;
        t.assignments = lists
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let mut a = CreatableReplicaAssignment::default();
                a.partition_index = i as i32;
                a.broker_ids = l
                    .iter()
                    .map(|b| kafka_protocol::messages::BrokerId(*b))
                    .collect();
                a
            })
            .collect();
        let mut req = CreateTopicsRequest::default();
        req.topics = vec![t];
        req.timeout_ms = 30_000;
        let mut client = KafkaClient::connect(&c.addr(1), "cluster-test");
        let r: CreateTopicsResponse = client.call(ApiKey::CreateTopics, 7, &req);
        r.topics[0].error_code
    };
    const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
    assert_eq!(assign("manual", &[&[3], &[2], &[3]]), 0);
    assert_eq!(assign("nobody", &[&[9]]), INVALID_REPLICA_ASSIGNMENT);
    assert_eq!(assign("twice", &[&[1, 1]]), INVALID_REPLICA_ASSIGNMENT);
    assert_eq!(
        assign("uneven", &[&[1, 2], &[3]]),
        INVALID_REPLICA_ASSIGNMENT
    );
    assert_eq!(assign("two", &[&[1, 2]]), 0);
    let leaders: Vec<i32> = eventually(Duration::from_secs(20), "the manual topic", || {
        let (_, p) = placement(&c.addr(2), "manual");
        (p.len() == 3).then(|| p.iter().map(|p| p.1).collect())
    });
    assert_eq!(leaders, vec![3, 2, 3]);

    // Partition 0 through a broker that does not lead it: refused with the
    // leader named (KIP-951); through its leader: stored.
    let (leader, epoch) = (parts[0].1, parts[0].2);
    let other = (1..=3).find(|id| *id != leader).expect("another node");
    let (err, _, hint, endpoints) = produce_one(&c.addr(other), "spread", 0, "misrouted");
    assert_eq!(err, NOT_LEADER_OR_FOLLOWER);
    assert_eq!(hint, (leader, epoch));
    assert_eq!(endpoints, vec![(leader, ports[&leader])]);
    assert_eq!(
        latest_offset(&c.addr(other), "spread", 0).0,
        NOT_LEADER_OR_FOLLOWER
    );
    let (err, base, _, _) = produce_one(&c.addr(leader), "spread", 0, "kept");
    assert_eq!((err, base), (0, 0));
    assert_eq!(latest_offset(&c.addr(leader), "spread", 0), (0, 1));

    // The leader stops heartbeating (kill -9): after the session timeout it
    // is fenced, its partitions have no leader (one replica each) and it is
    // listed offline; restarted, it leads them again at a higher epoch and
    // still has the record.
    let p = c.nodes.remove(&leader).expect("leader process");
    p.kill();
    let survivor = c.addr(other);
    let t = Instant::now();
    let (brokers, parts) = eventually(Duration::from_secs(40), "the dead broker fenced", || {
        let (b, p) = placement(&survivor, "spread");
        (p[0].1 == -1).then_some((b, p))
    });
    println!("broker {leader} fenced {:?} after kill -9", t.elapsed());
    assert!(!brokers.iter().any(|b| b.0 == leader), "{brokers:?}");
    assert_eq!(parts[0].0, LEADER_NOT_AVAILABLE);
    assert_eq!(parts[0].3, vec![leader]);
    let mut p = c.spawn(leader);
    p.wait_listening();
    c.nodes.insert(leader, p);
    let parts = eventually(Duration::from_secs(30), "the broker leads again", || {
        let (_, p) = placement(&survivor, "spread");
        (p[0].1 == leader).then_some(p)
    });
    assert!(parts[0].2 > epoch, "a new leader epoch: {parts:?}");
    assert_eq!(latest_offset(&c.addr(leader), "spread", 0), (0, 1));
    for (_, p) in std::mem::take(&mut c.nodes) {
        p.stop();
    }
}
/// Coordinator key types of FindCoordinator.
const GROUP: i8 = 0;
const TRANSACTION: i8 = 1;

/// FindCoordinator v4 for `keys` through `addr`: each key's coordinator
/// node, or `None` while any key has none (the coordinators' topic is still
/// being created or applied on this node).
fn coordinators(addr: &str, key_type: i8, keys: &[String]) -> Option<Vec<i32>> {
    let mut c = KafkaClient::connect_with_timeout(addr, "cluster-test", Duration::from_secs(40));
    let mut req = FindCoordinatorRequest::default();
    req.key_type = key_type;
    req.coordinator_keys = keys
        .iter()
        .map(|k| StrBytes::from_string(k.clone()))
        .collect();
    let r: FindCoordinatorResponse = c.call(ApiKey::FindCoordinator, 4, &req);
    assert_eq!(r.coordinators.len(), keys.len());
    r.coordinators
        .iter()
        .map(|x| (x.error_code == 0).then_some(x.node_id.0))
        .collect()
}

/// Keys `<prefix>-<i>` covering every one of `partitions` partitions.
fn keys_over(prefix: &str, partitions: i32) -> Vec<String> {
    let mut keys = Vec::new();
    let mut covered = std::collections::BTreeSet::new();
    for i in 0.. {
        let k = format!("{prefix}-{i}");
        if covered.insert(es_kafka::broker::key_partition(&k, partitions)) {
            keys.push(k);
        }
        if covered.len() == partitions as usize {
            break;
        }
    }
    keys
}

/// JoinGroup v5 of a new member through `addr`: the error code
/// (MEMBER_ID_REQUIRED from the group's coordinator).
fn join_group(addr: &str, group: &str) -> i16 {
    let mut c = KafkaClient::connect(addr, "cluster-test");
    let mut p = JoinGroupRequestProtocol::default();
    p.name = StrBytes::from_static_str("range");
    let mut req = JoinGroupRequest::default();
    req.group_id = GroupId(StrBytes::from_string(group.to_string()));
    req.session_timeout_ms = 10_000;
    req.rebalance_timeout_ms = 10_000;
    req.protocol_type = StrBytes::from_static_str("consumer");
    req.protocols = vec![p];
    let r: JoinGroupResponse = c.call(ApiKey::JoinGroup, 5, &req);
    r.error_code
}

/// OffsetFetch v8 of every offset of `group` through `addr`: the group's
/// error code.
fn offset_fetch(addr: &str, group: &str) -> i16 {
    let mut c = KafkaClient::connect(addr, "cluster-test");
    let mut g = OffsetFetchRequestGroup::default();
    g.group_id = GroupId(StrBytes::from_string(group.to_string()));
    g.topics = None;
    let mut req = OffsetFetchRequest::default();
    req.groups = vec![g];
    let r: OffsetFetchResponse = c.call(ApiKey::OffsetFetch, 8, &req);
    r.groups[0].error_code
}

/// InitProducerId v4 for transactional id `id` through `addr`.
fn init_producer_id(addr: &str, id: &str) -> InitProducerIdResponse {
    let mut c = KafkaClient::connect_with_timeout(addr, "cluster-test", Duration::from_secs(40));
    let mut req = InitProducerIdRequest::default();
    req.transactional_id = Some(TransactionalId(StrBytes::from_string(id.to_string())));
    req.transaction_timeout_ms = 60_000;
    req.producer_id = ProducerId(-1);
    req.producer_epoch = -1;
    c.call(ApiKey::InitProducerId, 4, &req)
}

#[test]
fn groups_and_transactional_ids_are_coordinated_where_kafka_places_them() {
    const NOT_COORDINATOR: i16 = 16;
    const MEMBER_ID_REQUIRED: i16 = 79;
    const COORDINATOR_NOT_AVAILABLE: i16 = 15;
    let dir = tempfile::tempdir().expect("tmp");
    let c = Cluster::start_with(
        dir.path(),
        3,
        3,
        &[
            "--offsets-topic-num-partitions",
            "6",
            "--transaction-state-log-num-partitions",
            "6",
        ],
    );
    c.leader();
    let groups = keys_over("group", 6);
    let ids = keys_over("txn", 6);
    // (node each key's coordinator is on), per key type.
    let mut placed: BTreeMap<i8, Vec<i32>> = BTreeMap::new();
    for (key_type, keys) in [(GROUP, &groups), (TRANSACTION, &ids)] {
        // The first lookup, through node 1, creates the topic.
        let first = eventually(Duration::from_secs(30), "every key placed", || {
            coordinators(&c.addr(1), key_type, keys)
        });
        let nodes: std::collections::BTreeSet<i32> = first.iter().copied().collect();
        assert!(
            nodes.len() > 1 && nodes.iter().all(|n| (1..=3).contains(n)),
            "key type {key_type}: the keys spread over the nodes: {first:?}"
        );
        // Every node names the same coordinators (once it has applied the
        // topic's creation).
        for id in 2..=3 {
            let addr = c.addr(id);
            let seen = eventually(Duration::from_secs(30), "every key placed", || {
                coordinators(&addr, key_type, keys)
            });
            assert_eq!(seen, first, "key type {key_type}: node {id} agrees");
        }
        placed.insert(key_type, first);
    }

    // A group's APIs: NOT_COORDINATOR from another node, served by its own.
    let group = &groups[0];
    let owner = placed[&GROUP][0];
    let other = (1..=3).find(|n| *n != owner).expect("another node");
    assert_eq!(join_group(&c.addr(other), group), NOT_COORDINATOR);
    assert_eq!(offset_fetch(&c.addr(other), group), NOT_COORDINATOR);
    assert_eq!(join_group(&c.addr(owner), group), MEMBER_ID_REQUIRED);
    assert_eq!(offset_fetch(&c.addr(owner), group), 0);
    // Every other group API likewise: refused by the other node, answered
    // (whatever the coordinator's own answer) by the coordinator.
    assert_eq!(create_topic(&c.addr(1), "t"), Some(0));
    for id in 1..=3 {
        let addr = c.addr(id);
        eventually(Duration::from_secs(20), "t on every node", || {
            topics(&addr).contains_key("t").then_some(())
        });
    }
    for (api, code) in group_api_codes(&c.addr(other), group) {
        assert_eq!(code, NOT_COORDINATOR, "{api} through node {other}");
    }
    for (api, code) in group_api_codes(&c.addr(owner), group) {
        assert!(
            code != NOT_COORDINATOR && code != COORDINATOR_NOT_AVAILABLE,
            "{api} through the coordinator: {code}"
        );
    }

    // A transactional id's: the same.
    let id = &ids[0];
    let owner = placed[&TRANSACTION][0];
    let other = (1..=3).find(|n| *n != owner).expect("another node");
    let refused = init_producer_id(&c.addr(other), id);
    assert_eq!(
        (refused.error_code, refused.producer_id.0),
        (NOT_COORDINATOR, -1)
    );
    let served = init_producer_id(&c.addr(owner), id);
    assert_eq!(served.error_code, 0);
    assert!(served.producer_id.0 >= 0 && served.producer_epoch >= 0);
    for (api, code) in txn_api_codes(&c.addr(other), id) {
        assert_eq!(code, NOT_COORDINATOR, "{api} through node {other}");
    }
    for (api, code) in txn_api_codes(&c.addr(owner), id) {
        assert!(
            code != NOT_COORDINATOR && code != COORDINATOR_NOT_AVAILABLE,
            "{api} through the coordinator: {code}"
        );
    }
}

fn sb(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// Every group API but JoinGroup and OffsetFetch, for `group` through
/// `addr`: (API, the error code where Kafka puts a coordinator error).
/// Topic `t` (one partition) exists.
fn group_api_codes(addr: &str, group: &str) -> Vec<(&'static str, i16)> {
    let mut c = KafkaClient::connect(addr, "cluster-test");
    let gid = GroupId(sb(group));
    let t = TopicName(sb("t"));
    let mut out = Vec::new();

    let mut req = SyncGroupRequest::default();
    req.group_id = gid.clone();
    req.generation_id = 1;
    req.member_id = sb("m");
    req.protocol_type = Some(sb("consumer"));
    req.protocol_name = Some(sb("range"));
    let r: SyncGroupResponse = c.call(ApiKey::SyncGroup, 5, &req);
    out.push(("SyncGroup", r.error_code));

    let mut req = HeartbeatRequest::default();
    req.group_id = gid.clone();
    req.generation_id = 1;
    req.member_id = sb("m");
    let r: HeartbeatResponse = c.call(ApiKey::Heartbeat, 4, &req);
    out.push(("Heartbeat", r.error_code));

    let mut req = LeaveGroupRequest::default();
    req.group_id = gid.clone();
    let mut m = MemberIdentity::default();
    m.member_id = sb("m");
    req.members = vec![m];
    let r: LeaveGroupResponse = c.call(ApiKey::LeaveGroup, 5, &req);
    out.push(("LeaveGroup", r.error_code));

    let mut req = OffsetCommitRequest::default();
    req.group_id = gid.clone();
    req.generation_id_or_member_epoch = -1;
    let mut p = OffsetCommitRequestPartition::default();
    p.committed_offset = 1;
    let mut ct = OffsetCommitRequestTopic::default();
    ct.name = t.clone();
    ct.partitions = vec![p];
    req.topics = vec![ct];
    let r: OffsetCommitResponse = c.call(ApiKey::OffsetCommit, 8, &req);
    out.push(("OffsetCommit", r.topics[0].partitions[0].error_code));

    let mut req = OffsetDeleteRequest::default();
    req.group_id = gid.clone();
    let mut dt = OffsetDeleteRequestTopic::default();
    dt.name = t.clone();
    dt.partitions = vec![OffsetDeleteRequestPartition::default()];
    req.topics = vec![dt];
    let r: OffsetDeleteResponse = c.call(ApiKey::OffsetDelete, 0, &req);
    out.push(("OffsetDelete", r.error_code));

    let mut req = DescribeGroupsRequest::default();
    req.groups = vec![gid.clone()];
    let r: DescribeGroupsResponse = c.call(ApiKey::DescribeGroups, 5, &req);
    out.push(("DescribeGroups", r.groups[0].error_code));

    let mut req = ConsumerGroupHeartbeatRequest::default();
    req.group_id = gid.clone();
    req.member_id = sb("cluster-test-member-0001");
    req.rebalance_timeout_ms = 30_000;
    req.subscribed_topic_names = Some(vec![t.clone()]);
    req.topic_partitions = Some(Vec::new());
    let r: ConsumerGroupHeartbeatResponse = c.call(ApiKey::ConsumerGroupHeartbeat, 1, &req);
    out.push(("ConsumerGroupHeartbeat", r.error_code));

    let mut req = ConsumerGroupDescribeRequest::default();
    req.group_ids = vec![gid.clone()];
    let r: ConsumerGroupDescribeResponse = c.call(ApiKey::ConsumerGroupDescribe, 0, &req);
    out.push(("ConsumerGroupDescribe", r.groups[0].error_code));

    let mut req = TxnOffsetCommitRequest::default();
    req.transactional_id = TransactionalId(sb("some-transaction"));
    req.group_id = gid.clone();
    req.producer_id = ProducerId(1);
    req.generation_id = -1;
    let mut p = TxnOffsetCommitRequestPartition::default();
    p.committed_offset = 1;
    let mut tt = TxnOffsetCommitRequestTopic::default();
    tt.name = t.clone();
    tt.partitions = vec![p];
    req.topics = vec![tt];
    let r: TxnOffsetCommitResponse = c.call(ApiKey::TxnOffsetCommit, 3, &req);
    out.push(("TxnOffsetCommit", r.topics[0].partitions[0].error_code));

    // Last: on the coordinator it deletes the group.
    let mut req = DeleteGroupsRequest::default();
    req.groups_names = vec![gid];
    let r: DeleteGroupsResponse = c.call(ApiKey::DeleteGroups, 2, &req);
    out.push(("DeleteGroups", r.results[0].error_code));
    out
}

/// Every transactional-id API but InitProducerId for `id` through `addr`,
/// as [`group_api_codes`]. Topic `t` exists.
fn txn_api_codes(addr: &str, id: &str) -> Vec<(&'static str, i16)> {
    let mut c = KafkaClient::connect(addr, "cluster-test");
    let tid = TransactionalId(sb(id));
    let mut out = Vec::new();

    let mut req = AddPartitionsToTxnRequest::default();
    req.v3_and_below_transactional_id = tid.clone();
    req.v3_and_below_producer_id = ProducerId(1);
    let mut t = AddPartitionsToTxnTopic::default();
    t.name = TopicName(sb("t"));
    t.partitions = vec![0];
    req.v3_and_below_topics = vec![t];
    let r: AddPartitionsToTxnResponse = c.call(ApiKey::AddPartitionsToTxn, 3, &req);
    out.push((
        "AddPartitionsToTxn",
        r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
    ));

    let mut req = AddOffsetsToTxnRequest::default();
    req.transactional_id = tid.clone();
    req.producer_id = ProducerId(1);
    req.group_id = GroupId(sb("some-group"));
    let r: AddOffsetsToTxnResponse = c.call(ApiKey::AddOffsetsToTxn, 3, &req);
    out.push(("AddOffsetsToTxn", r.error_code));

    let mut req = EndTxnRequest::default();
    req.transactional_id = tid.clone();
    req.producer_id = ProducerId(1);
    let r: EndTxnResponse = c.call(ApiKey::EndTxn, 3, &req);
    out.push(("EndTxn", r.error_code));

    let mut req = DescribeTransactionsRequest::default();
    req.transactional_ids = vec![tid];
    let r: DescribeTransactionsResponse = c.call(ApiKey::DescribeTransactions, 0, &req);
    out.push(("DescribeTransactions", r.transaction_states[0].error_code));
    out
}
// ----- transactions across brokers ------------------------------------------

mod txn {
    use super::*;
    use crate::common::txn::{read_committed, Batch};
    use es_kafka::broker::key_partition;
    use es_test_support::batch::{producer_meta, KafkaBatch};
    use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::txn_offset_commit_request::{
        TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::{
        AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
        AddPartitionsToTxnResponse, BrokerId, EndTxnRequest, EndTxnResponse, FetchRequest,
        FetchResponse, GroupId, InitProducerIdRequest, InitProducerIdResponse, OffsetFetchRequest,
        OffsetFetchResponse, ProduceRequest, ProduceResponse, ProducerId, TransactionalId,
        TxnOffsetCommitRequest, TxnOffsetCommitResponse,
    };

    const TOPIC: &str = "txn-spread";
    const TXN_ID: &str = "spread-1";
    const GROUP: &str = "spread-group";
    /// Enough partitions that the quorum's placement puts some on each node.
    const PARTITIONS: i32 = 6;

    fn s(v: &str) -> StrBytes {
        StrBytes::from_string(v.to_string())
    }

    fn client(addr: &str) -> KafkaClient {
        KafkaClient::connect_with_timeout(addr, "cluster-txn-test", Duration::from_secs(60))
    }

    /// Creates `name` with `n` partitions placed by the quorum; the error
    /// code.
    fn create_spread(addr: &str, name: &str, n: i32) -> i16 {
        let mut t = CreatableTopic::default();
        t.name = TopicName(s(name));
        t.num_partitions = n;
        t.replication_factor = -1;
        let mut req = CreateTopicsRequest::default();
        req.topics = vec![t];
        req.timeout_ms = 30_000;
        let r: CreateTopicsResponse = client(addr).call(ApiKey::CreateTopics, 7, &req);
        r.topics[0].error_code
    }

    /// The error of a read_uncommitted Fetch of `topic`-`partition` from
    /// `addr` (NONE only where the partition is hosted).
    fn fetch_error(addr: &str, topic: &str, partition: i32) -> i16 {
        let mut p = FetchPartition::default();
        p.partition = partition;
        p.partition_max_bytes = 1024;
        let mut t = FetchTopic::default();
        t.topic = TopicName(s(topic));
        t.partitions = vec![p];
        let mut req = FetchRequest::default();
        req.replica_id = BrokerId(-1);
        req.max_bytes = 1024;
        req.topics = vec![t];
        let r: FetchResponse = client(addr).call(ApiKey::Fetch, 11, &req);
        r.responses
            .first()
            .and_then(|t| t.partitions.first())
            .map_or(-1, |p| p.error_code)
    }

    fn produce(addr: &str, partition: i32, pid: i64, epoch: i16, seq: i32, value: &str) -> i16 {
        let mut b = KafkaBatch::new();
        b.record(
            1_700_000_000_000,
            None,
            Some(value.as_bytes()),
            &[],
            &producer_meta(pid, epoch, seq, true),
        );
        let mut pd = PartitionProduceData::default();
        pd.index = partition;
        pd.records = Some(b.encode().into());
        let mut td = TopicProduceData::default();
        td.name = TopicName(s(TOPIC));
        td.partition_data = vec![pd];
        let mut req = ProduceRequest::default();
        req.transactional_id = Some(TransactionalId(s(TXN_ID)));
        req.acks = -1;
        req.timeout_ms = 30_000;
        req.topic_data = vec![td];
        let r: ProduceResponse = client(addr).call(ApiKey::Produce, 9, &req);
        r.responses[0].partition_responses[0].error_code
    }

    fn add_partitions(c: &mut KafkaClient, pid: i64, epoch: i16, ps: &[i32]) {
        let mut t = AddPartitionsToTxnTopic::default();
        t.name = TopicName(s(TOPIC));
        t.partitions = ps.to_vec();
        let mut req = AddPartitionsToTxnRequest::default();
        req.v3_and_below_transactional_id = TransactionalId(s(TXN_ID));
        req.v3_and_below_producer_id = ProducerId(pid);
        req.v3_and_below_producer_epoch = epoch;
        req.v3_and_below_topics = vec![t];
        let r: AddPartitionsToTxnResponse = c.call(ApiKey::AddPartitionsToTxn, 3, &req);
        for t in &r.results_by_topic_v3_and_below {
            for p in &t.results_by_partition {
                assert_eq!(
                    p.partition_error_code, 0,
                    "AddPartitionsToTxn {}",
                    p.partition_index
                );
            }
        }
    }

    fn end_txn(c: &mut KafkaClient, pid: i64, epoch: i16, commit: bool) {
        let mut req = EndTxnRequest::default();
        req.transactional_id = TransactionalId(s(TXN_ID));
        req.producer_id = ProducerId(pid);
        req.producer_epoch = epoch;
        req.committed = commit;
        let r: EndTxnResponse = c.call(ApiKey::EndTxn, 3, &req);
        assert_eq!(r.error_code, 0, "EndTxn commit={commit}");
    }

    /// A read_committed fetch of `partition` from its leader: (last stable
    /// offset, batches, first offsets of aborted transactions).
    fn fetch_committed(addr: &str, partition: i32) -> (i64, Vec<Batch>, Vec<(i64, i64)>) {
        let (e, lso, bs, aborted) = read_committed(addr, TOPIC, partition);
        assert_eq!(e, 0, "fetch {TOPIC}-{partition} from {addr}");
        (lso, bs, aborted)
    }

    fn committed_offset(addr: &str) -> i64 {
        let mut t = OffsetFetchRequestTopic::default();
        t.name = TopicName(s(TOPIC));
        t.partition_indexes = vec![0];
        let mut req = OffsetFetchRequest::default();
        req.group_id = GroupId(s(GROUP));
        req.topics = Some(vec![t]);
        let r: OffsetFetchResponse = client(addr).call(ApiKey::OffsetFetch, 7, &req);
        r.topics[0].partitions[0].committed_offset
    }

    #[test]
    fn a_transaction_spans_partitions_on_every_node() {
        let dir = tempfile::tempdir().expect("tempdir");
        let c = Cluster::start(dir.path(), 3, 3);
        c.leader();
        let any = c.addr(1);
        // The coordinators' topics (one partition each) and the data
        // topic (three), placed by the quorum, which balances partitions by
        // count: the coordinators land on two different nodes and the data
        // topic on all three. Replication factor 1: a partition's only
        // replica leads it. Retried until all three brokers are registered.
        let created = |name: &str, n: i32| {
            eventually(Duration::from_secs(30), &format!("{name} created"), || {
                let e = create_spread(&any, name, n);
                (e == 0 || e == 36).then_some(())
            })
        };
        created("__transaction_state", 1);
        created("__consumer_offsets", 1);
        created(TOPIC, PARTITIONS);
        let host = |topic: &str, p: i32| -> i32 {
            eventually(
                Duration::from_secs(30),
                &format!("the host of {topic}-{p}"),
                || {
                    let on: Vec<i32> = (1..=3)
                        .filter(|&n| fetch_error(&c.addr(n), topic, p) == 0)
                        .collect();
                    (on.len() == 1).then(|| on[0])
                },
            )
        };
        let placement: Vec<i32> = (0..PARTITIONS).map(|p| host(TOPIC, p)).collect();
        // One partition on each node: the transaction writes to these.
        let parts: Vec<(i32, i32)> = (1..=3)
            .filter_map(|n| {
                placement
                    .iter()
                    .position(|&h| h == n)
                    .map(|p| (p as i32, n))
            })
            .collect();
        assert_eq!(parts.len(), 3, "a partition on every node: {placement:?}");
        let txn_node = host("__transaction_state", key_partition(TXN_ID, 1));
        let group_node = host("__consumer_offsets", key_partition(GROUP, 1));
        assert_ne!(
            txn_node, group_node,
            "the coordinators are on different nodes"
        );
        let leader_addr = |p: i32| c.addr(placement[p as usize]);
        let ps: Vec<i32> = parts.iter().map(|&(p, _)| p).collect();

        let mut coord = client(&c.addr(txn_node));
        let mut req = InitProducerIdRequest::default();
        req.transactional_id = Some(TransactionalId(s(TXN_ID)));
        req.transaction_timeout_ms = 60_000;
        let r: InitProducerIdResponse = coord.call(ApiKey::InitProducerId, 4, &req);
        assert_eq!(r.error_code, 0);
        let (pid, epoch) = (r.producer_id.0, r.producer_epoch);

        // Transaction 1: a record on every node and the group's offset; commit.
        add_partitions(&mut coord, pid, epoch, &ps);
        let mut req = AddOffsetsToTxnRequest::default();
        req.transactional_id = TransactionalId(s(TXN_ID));
        req.producer_id = ProducerId(pid);
        req.producer_epoch = epoch;
        req.group_id = GroupId(s(GROUP));
        let r: AddOffsetsToTxnResponse = coord.call(ApiKey::AddOffsetsToTxn, 3, &req);
        assert_eq!(r.error_code, 0);
        for &p in &ps {
            assert_eq!(
                produce(&leader_addr(p), p, pid, epoch, 0, "committed"),
                0,
                "produce {p}"
            );
        }
        let mut part = TxnOffsetCommitRequestPartition::default();
        part.partition_index = 0;
        part.committed_offset = 17;
        part.committed_leader_epoch = -1;
        let mut t = TxnOffsetCommitRequestTopic::default();
        t.name = TopicName(s(TOPIC));
        t.partitions = vec![part];
        let mut req = TxnOffsetCommitRequest::default();
        req.transactional_id = TransactionalId(s(TXN_ID));
        req.group_id = GroupId(s(GROUP));
        req.producer_id = ProducerId(pid);
        req.producer_epoch = epoch;
        req.generation_id = -1;
        req.topics = vec![t];
        let r: TxnOffsetCommitResponse =
            client(&c.addr(group_node)).call(ApiKey::TxnOffsetCommit, 3, &req);
        assert_eq!(r.topics[0].partitions[0].error_code, 0, "TxnOffsetCommit");
        assert!(
            committed_offset(&c.addr(group_node)) < 0,
            "not before the commit"
        );
        end_txn(&mut coord, pid, epoch, true);
        for &p in &ps {
            let (lso, bs, aborted) = eventually(Duration::from_secs(30), "commit marker", || {
                let f = fetch_committed(&leader_addr(p), p);
                (f.0 == 2).then_some(f)
            });
            assert_eq!(lso, 2);
            assert!(aborted.is_empty(), "{aborted:?}");
            assert_eq!(bs.len(), 2, "partition {p}: {bs:?}");
            assert_eq!(
                (bs[0].base_offset, bs[0].producer_id, bs[0].control),
                (0, pid, None)
            );
            assert_eq!(
                (bs[1].base_offset, bs[1].control),
                (1, Some(1)),
                "a COMMIT marker"
            );
        }
        eventually(Duration::from_secs(30), "the transaction's offset", || {
            (committed_offset(&c.addr(group_node)) == 17).then_some(())
        });

        // A leader on another node than the coordinator asks it first
        // (AddPartitionsToTxn verify_only): a partition not in the open
        // transaction is refused (INVALID_TXN_STATE at Produce v9).
        let (remote_p, _) = *parts
            .iter()
            .find(|&&(_, n)| n != txn_node)
            .expect("a remote leader");
        assert_eq!(
            produce(
                &leader_addr(remote_p),
                remote_p,
                pid,
                epoch,
                1,
                "unverified"
            ),
            48,
            "a partition outside the transaction"
        );

        // Transaction 2: a record on every node; abort.
        add_partitions(&mut coord, pid, epoch, &ps);
        for &p in &ps {
            assert_eq!(produce(&leader_addr(p), p, pid, epoch, 1, "aborted"), 0);
        }
        end_txn(&mut coord, pid, epoch, false);
        for &p in &ps {
            let (_, bs, aborted) = eventually(Duration::from_secs(30), "abort marker", || {
                let f = fetch_committed(&leader_addr(p), p);
                (f.0 == 4).then_some(f)
            });
            // The aborted record is either left out or listed as aborted
            // (the client drops it): read_committed never shows it.
            let visible: Vec<i64> = bs
                .iter()
                .filter(|b| b.control.is_none())
                .filter(|b| {
                    !aborted
                        .iter()
                        .any(|&(q, first)| q == b.producer_id && first <= b.base_offset)
                })
                .map(|b| b.base_offset)
                .collect();
            assert_eq!(visible, vec![0], "partition {p}: {bs:?} {aborted:?}");
            let markers: Vec<(i64, Option<i16>)> = bs
                .iter()
                .filter(|b| b.control.is_some())
                .map(|b| (b.base_offset, b.control))
                .collect();
            assert_eq!(markers, vec![(1, Some(1)), (3, Some(0))], "partition {p}");
        }
        assert_eq!(
            committed_offset(&c.addr(group_node)),
            17,
            "the abort left the offset"
        );
        for (_, n) in c.nodes {
            n.stop();
        }
    }
}
