//! MetaNode over real sockets on loopback: a quorum forms from its voters'
//! flags, writes sent to any node are forwarded to the leader and answered
//! once applied, a learner joins and follows, the quorum survives the loss
//! of its leader, a restarted node catches up (by snapshot once the log it
//! missed is purged), a node whose data directory was wiped is refused, and
//! a broker's controlled shutdown hands its leadership over before it is
//! told it may exit.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use es_meta::control::{ControlReply, ControlRequest};
use es_meta::node::{MetaError, MetaNode, MetaOptions};
use es_meta::records::{MetaRequest, MetaResponse, NewTopic, RegisterBroker};
use es_meta::NoFiles;
use es_storage::RealFs;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

fn options(dir: &Path, id: u64, port: u16, voters: &BTreeMap<u64, String>) -> MetaOptions {
    let mut o = MetaOptions::new(
        id,
        dir.join(format!("node-{id}")).join("meta"),
        Arc::new(RealFs),
    );
    o.listen = Some(format!("127.0.0.1:{port}"));
    o.voters = voters.clone();
    o.heartbeat_ms = 50;
    o.election_min_ms = 300;
    o.election_max_ms = 600;
    o.snapshot_every = 20;
    o
}

fn topic(name: &str) -> MetaRequest {
    MetaRequest::CreateTopics {
        topics: vec![NewTopic {
            name: name.into(),
            id: format!("id-{name}"),
            partitions: 1,
            replication_factor: 1,
            assignments: vec![],
            configs: BTreeMap::new(),
        }],
    }
}

async fn start_all(
    dir: &Path,
    ports: &BTreeMap<u64, u16>,
    voters: &BTreeMap<u64, String>,
) -> BTreeMap<u64, Arc<MetaNode>> {
    let starts = ports.iter().map(|(id, port)| {
        let o = options(dir, *id, *port, voters);
        async move { (o.node_id, MetaNode::start(o, Arc::new(NoFiles)).await) }
    });
    let mut out = BTreeMap::new();
    for (id, r) in futures_join(starts).await {
        out.insert(id, r.unwrap_or_else(|e| panic!("node {id}: {e}")));
    }
    out
}

/// Runs the futures concurrently on this runtime.
async fn futures_join<F, T>(fs: impl Iterator<Item = F>) -> Vec<T>
where
    F: std::future::Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let handles: Vec<_> = fs.map(tokio::spawn).collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.expect("join"));
    }
    out
}

/// Registers broker `id` through `node` (heartbeats keep it unfenced).
async fn broker(node: &Arc<MetaNode>, id: i32, stop: &tokio::sync::watch::Receiver<bool>) {
    let reg = RegisterBroker {
        broker_id: id,
        incarnation_id: format!("inc-{id}"),
        cluster_id: String::new(),
        endpoints: vec![],
        rack: None,
    };
    let epoch = es_meta::session::register_broker(node.clone(), reg, stop.clone())
        .await
        .expect("register");
    node.wait_unfenced(id, epoch, es_meta::node::WRITE_TIMEOUT)
        .await
        .expect("unfenced");
}

/// The node that leads, waiting up to 60 s for an election (10 s was not
/// always enough on a loaded 2-core machine: the election timeouts fire
/// late when the runtime's threads are starved).
async fn leader_of(nodes: &BTreeMap<u64, Arc<MetaNode>>) -> u64 {
    for _ in 0..1200 {
        if let Some(n) = nodes.values().find(|n| n.is_leader()) {
            return n.id();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no leader elected");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_voters_form_a_quorum_forward_writes_and_survive_their_leader() {
    let dir = tempfile::tempdir().expect("tmp");
    let ports: BTreeMap<u64, u16> = (1..=3).map(|id| (id, free_port())).collect();
    let voters: BTreeMap<u64, String> = ports
        .iter()
        .map(|(id, p)| (*id, format!("127.0.0.1:{p}")))
        .collect();
    let mut nodes = start_all(dir.path(), &ports, &voters).await;
    let leader = leader_of(&nodes).await;
    let follower = *nodes.keys().find(|id| **id != leader).expect("follower");
    let (_stop_tx, stop) = tokio::sync::watch::channel(false);
    for (id, n) in &nodes {
        broker(n, *id as i32, &stop).await;
    }

    // A write sent to a follower is forwarded and answered once applied.
    let (index, resp) = nodes[&follower].write(topic("a")).await.expect("write");
    assert!(
        matches!(&resp, MetaResponse::Items { results } if results[0].error_code == 0),
        "{resp:?}"
    );
    for n in nodes.values() {
        n.wait_applied(index).await.expect("applied everywhere");
        assert!(n.image().topics.contains_key("a"));
    }
    // The same name again is refused by the state machine, on every node alike.
    let (_, again) = nodes[&leader].write(topic("a")).await.expect("write");
    assert!(matches!(&again, MetaResponse::Items { results } if results[0].error_code == 36));

    // Enough writes for snapshots and purges to happen.
    for i in 0..50 {
        nodes[&follower]
            .write(topic(&format!("t{i}")))
            .await
            .expect("write");
    }

    // Lose the leader: the other two elect one and go on.
    let old = nodes.remove(&leader).expect("leader");
    old.shutdown().await;
    drop(old);
    let new_leader = leader_of(&nodes).await;
    assert_ne!(new_leader, leader);
    let survivor = *nodes.keys().next().expect("node");
    let (index, _) = nodes[&survivor]
        .write(topic("after"))
        .await
        .expect("write after fail-over");
    for i in 0..30 {
        nodes[&survivor]
            .write(topic(&format!("u{i}")))
            .await
            .expect("write");
    }

    // The old leader comes back on its own data and catches up.
    let back = MetaNode::start(
        options(dir.path(), leader, ports[&leader], &voters),
        Arc::new(NoFiles),
    )
    .await
    .expect("restart");
    back.wait_applied(index + 30).await.expect("caught up");
    assert!(back.image().topics.contains_key("after"));
    assert!(back.image().topics.contains_key("u29"));
    assert_eq!(back.image().topics, nodes[&survivor].image().topics);
    back.shutdown().await;
    for n in nodes.values() {
        n.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learner_joins_and_a_wiped_voter_is_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    let ports: BTreeMap<u64, u16> = (1..=3).map(|id| (id, free_port())).collect();
    let voters: BTreeMap<u64, String> = ports
        .iter()
        .filter(|(id, _)| **id <= 2)
        .map(|(id, p)| (*id, format!("127.0.0.1:{p}")))
        .collect();
    let two: BTreeMap<u64, u16> = ports
        .iter()
        .filter(|(id, _)| **id <= 2)
        .map(|(a, b)| (*a, *b))
        .collect();
    let nodes = start_all(dir.path(), &two, &voters).await;
    let leader = leader_of(&nodes).await;
    let (_stop_tx, stop) = tokio::sync::watch::channel(false);
    broker(&nodes[&leader], leader as i32, &stop).await;
    let (index, _) = nodes[&leader].write(topic("x")).await.expect("write");

    // Node 3 is no voter: it joins as a learner and follows the log.
    let learner = MetaNode::start(
        options(dir.path(), 3, ports[&3], &voters),
        Arc::new(NoFiles),
    )
    .await
    .expect("learner");
    learner
        .wait_applied(index)
        .await
        .expect("learner caught up");
    assert!(learner.image().topics.contains_key("x"));
    // Writes through the learner are forwarded too.
    let (i2, _) = learner.write(topic("y")).await.expect("write via learner");
    nodes[&leader].wait_applied(i2).await.expect("applied");

    // Promote it, then demote it again: DescribeQuorum-like truth in the membership.
    let r = learner
        .forward(ControlRequest::AddVoter { node_id: 3 })
        .await
        .expect("add voter");
    assert_eq!(r, ControlReply::Done);
    let voters_now: Vec<u64> = nodes[&leader]
        .raft()
        .metrics()
        .borrow()
        .membership_config
        .membership()
        .voter_ids()
        .collect();
    assert_eq!(voters_now, vec![1, 2, 3]);
    let r = learner
        .forward(ControlRequest::RemoveVoter {
            node_id: 3,
            keep_as_learner: true,
        })
        .await
        .expect("remove voter");
    assert_eq!(r, ControlReply::Done);

    // Node 2 loses its data directory and starts again under the same id: refused.
    let n2 = nodes[&2].clone();
    n2.shutdown().await;
    drop(n2);
    std::fs::remove_dir_all(dir.path().join("node-2")).expect("wipe");
    let err = MetaNode::start(
        options(dir.path(), 2, ports[&2], &voters),
        Arc::new(NoFiles),
    )
    .await
    .expect_err("a wiped node must be refused");
    assert!(matches!(err, MetaError::Wiped { node_id: 2, .. }), "{err}");
    learner.shutdown().await;
    for n in nodes.values() {
        n.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_in_controlled_shutdown_hands_over_its_leadership_before_it_may_exit() {
    let dir = tempfile::tempdir().expect("tmp");
    let ports: BTreeMap<u64, u16> = (1..=3).map(|id| (id, free_port())).collect();
    let voters: BTreeMap<u64, String> = ports
        .iter()
        .map(|(id, p)| (*id, format!("127.0.0.1:{p}")))
        .collect();
    let nodes = start_all(dir.path(), &ports, &voters).await;
    leader_of(&nodes).await;
    let (_stop_tx, stop) = tokio::sync::watch::channel(false);
    for (id, n) in &nodes {
        broker(n, *id as i32, &stop).await;
    }
    let mut t = topic("r");
    if let MetaRequest::CreateTopics { topics } = &mut t {
        topics[0].assignments = vec![vec![2, 1, 3]];
    }
    let (_, resp) = nodes[&1].write(t).await.expect("create");
    assert!(matches!(&resp, MetaResponse::Items { results } if results[0].error_code == 0));
    let node = &nodes[&2];
    let epoch = node.image().brokers[&2].epoch;
    let may_exit = es_meta::session::controlled_shutdown(node, 2, epoch, Duration::from_secs(20))
        .await
        .expect("controlled shutdown");
    assert!(may_exit);
    let image = node.image();
    let p = &image.topics["r"].partitions[0];
    assert_eq!((p.leader, p.isr.clone()), (1, vec![1, 3]));
    assert_eq!(image.leaderships(2), 0);
    for n in nodes.values() {
        n.shutdown().await;
    }
}
