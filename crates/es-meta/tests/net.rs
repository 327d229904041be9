//! The Raft listener end to end on real sockets (127.0.0.1, port 0): real
//! openraft instances wired with `es_meta::net`, on a minimal in-memory log
//! store and state machine written here (the file-backed store is not this
//! test's concern), a cluster that forms and commits, control requests, bad
//! frames that close their connection only, and the wrong-directory refusal.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::io::Cursor;
use std::ops::RangeBounds;
use std::sync::Arc;
use std::time::Duration;

use es_meta::control::{ControlReply, ControlRequest};
use es_meta::net::frame::{encode, Kind};
use es_meta::net::{serve, ControlHandler, NetError, Network};
use es_meta::{MetaImage, MetaRequest, MetaResponse, MetaTypes, NodeAddr, NodeId};
use openraft::error::RPCError;
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::VoteRequest;
use openraft::storage::{LogFlushed, RaftLogStorage, RaftStateMachine};
use openraft::{
    Config, Entry, EntryPayload, LogId, LogState, OptionalSend, Raft, RaftLogReader,
    RaftSnapshotBuilder, Snapshot, SnapshotMeta, StorageError, StoredMembership, Vote,
};
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

const WAIT: Duration = Duration::from_secs(20);

// ---- in-memory storage ----

#[derive(Default)]
struct LogInner {
    vote: Option<Vote<NodeId>>,
    committed: Option<LogId<NodeId>>,
    log: BTreeMap<u64, Entry<MetaTypes>>,
    last_purged: Option<LogId<NodeId>>,
}

#[derive(Clone, Default)]
struct MemLog(Arc<Mutex<LogInner>>);

impl RaftLogReader<MetaTypes> for MemLog {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<MetaTypes>>, StorageError<NodeId>> {
        Ok(self
            .0
            .lock()
            .log
            .range(range)
            .map(|(_, e)| e.clone())
            .collect())
    }
}

impl RaftLogStorage<MetaTypes> for MemLog {
    type LogReader = MemLog;

    async fn get_log_state(&mut self) -> Result<LogState<MetaTypes>, StorageError<NodeId>> {
        let i = self.0.lock();
        let last = i
            .log
            .values()
            .next_back()
            .map(|e| e.log_id)
            .or(i.last_purged);
        Ok(LogState {
            last_purged_log_id: i.last_purged,
            last_log_id: last,
        })
    }
    async fn get_log_reader(&mut self) -> MemLog {
        self.clone()
    }
    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError<NodeId>> {
        self.0.lock().vote = Some(*vote);
        Ok(())
    }
    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError<NodeId>> {
        Ok(self.0.lock().vote)
    }
    async fn save_committed(
        &mut self,
        c: Option<LogId<NodeId>>,
    ) -> Result<(), StorageError<NodeId>> {
        self.0.lock().committed = c;
        Ok(())
    }
    async fn read_committed(&mut self) -> Result<Option<LogId<NodeId>>, StorageError<NodeId>> {
        Ok(self.0.lock().committed)
    }
    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<MetaTypes>,
    ) -> Result<(), StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<MetaTypes>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        {
            let mut i = self.0.lock();
            for e in entries {
                i.log.insert(e.log_id.index, e);
            }
        }
        callback.log_io_completed(Ok(()));
        Ok(())
    }
    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        self.0.lock().log.split_off(&log_id.index);
        Ok(())
    }
    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        let mut i = self.0.lock();
        i.last_purged = Some(log_id);
        i.log = i.log.split_off(&(log_id.index + 1));
        Ok(())
    }
}

#[derive(Default)]
struct SmInner {
    applied: Option<LogId<NodeId>>,
    membership: StoredMembership<NodeId, NodeAddr>,
    image: MetaImage,
    snapshot: Option<(SnapshotMeta<NodeId, NodeAddr>, Vec<u8>)>,
    snapshots: u64,
}

#[derive(Clone, Default)]
struct MemSm(Arc<Mutex<SmInner>>);

impl MemSm {
    fn cluster_id(&self) -> Option<String> {
        self.0.lock().image.cluster_id.clone()
    }
}

impl RaftSnapshotBuilder<MetaTypes> for MemSm {
    async fn build_snapshot(&mut self) -> Result<Snapshot<MetaTypes>, StorageError<NodeId>> {
        let mut i = self.0.lock();
        i.snapshots += 1;
        let data = serde_json::to_vec(&(&i.image, &i.membership)).expect("the snapshot encodes");
        let meta = SnapshotMeta {
            last_log_id: i.applied,
            last_membership: i.membership.clone(),
            snapshot_id: format!("snap-{}", i.snapshots),
        };
        i.snapshot = Some((meta.clone(), data.clone()));
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl RaftStateMachine<MetaTypes> for MemSm {
    type SnapshotBuilder = MemSm;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<NodeId>>, StoredMembership<NodeId, NodeAddr>), StorageError<NodeId>>
    {
        let i = self.0.lock();
        Ok((i.applied, i.membership.clone()))
    }
    async fn apply<I>(&mut self, entries: I) -> Result<Vec<MetaResponse>, StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<MetaTypes>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut i = self.0.lock();
        let mut out = Vec::new();
        for e in entries {
            i.applied = Some(e.log_id);
            out.push(match e.payload {
                EntryPayload::Blank => MetaResponse::None,
                EntryPayload::Normal(req) => i.image.apply(e.log_id.index, &req).0,
                EntryPayload::Membership(m) => {
                    i.membership = StoredMembership::new(Some(e.log_id), m);
                    MetaResponse::None
                }
            });
        }
        Ok(out)
    }
    async fn get_snapshot_builder(&mut self) -> MemSm {
        self.clone()
    }
    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<Cursor<Vec<u8>>>, StorageError<NodeId>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }
    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, NodeAddr>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<NodeId>> {
        let data = snapshot.into_inner();
        let (image, membership): (MetaImage, StoredMembership<NodeId, NodeAddr>) =
            serde_json::from_slice(&data).expect("the snapshot decodes");
        let mut i = self.0.lock();
        i.image = image;
        i.membership = membership;
        i.applied = meta.last_log_id;
        i.snapshot = Some((meta.clone(), data));
        Ok(())
    }
    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<MetaTypes>>, StorageError<NodeId>> {
        Ok(self.0.lock().snapshot.clone().map(|(meta, data)| Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        }))
    }
}

// ---- a control handler and a node ----

/// Answers Hello with its identity, Heartbeat with `fenced` = odd broker id,
/// and Write by proposing to its Raft.
struct TestControl {
    node_id: NodeId,
    directory_id: String,
    raft: Raft<MetaTypes>,
}

impl ControlHandler for TestControl {
    fn handle(
        &self,
        req: ControlRequest,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ControlReply> + Send + '_>> {
        Box::pin(async move {
            match req {
                ControlRequest::Hello => ControlReply::Hello {
                    node_id: self.node_id,
                    directory_id: self.directory_id.clone(),
                    members: vec![],
                },
                ControlRequest::Heartbeat { broker_id, .. } => ControlReply::Heartbeat {
                    fenced: broker_id % 2 == 1,
                    may_shut_down: false,
                },
                ControlRequest::Join { .. }
                | ControlRequest::DescribeQuorum
                | ControlRequest::AddVoter { .. }
                | ControlRequest::RemoveVoter { .. }
                | ControlRequest::ReadIndex => ControlReply::Error {
                    message: "not in this test".into(),
                },
                ControlRequest::Write { request } => match self.raft.client_write(request).await {
                    Ok(r) => ControlReply::Written {
                        index: r.log_id.index,
                        response: r.data,
                    },
                    Err(e) => match e.forward_to_leader() {
                        Some(f) => ControlReply::NotLeader {
                            leader: f.leader_id.zip(f.leader_node.clone()),
                        },
                        None => ControlReply::Error {
                            message: e.to_string(),
                        },
                    },
                },
            }
        })
    }
}

struct TestNode {
    id: NodeId,
    addr: NodeAddr,
    raft: Raft<MetaTypes>,
    sm: MemSm,
    stop: watch::Sender<bool>,
}

fn config() -> Config {
    Config {
        cluster_name: "es-net-test".into(),
        heartbeat_interval: 50,
        election_timeout_min: 150,
        election_timeout_max: 300,
        ..Default::default()
    }
}

async fn start(id: NodeId) -> TestNode {
    start_with(id, config()).await
}

async fn start_with(id: NodeId, config: Config) -> TestNode {
    let config = Arc::new(config.validate().expect("a valid config"));
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1");
    let addr = NodeAddr {
        addr: listener
            .local_addr()
            .expect("the bound address")
            .to_string(),
        directory_id: format!("dir-{id}"),
    };
    let network = Network::with_timeouts(id, Duration::from_millis(500), Duration::from_secs(5));
    let sm = MemSm::default();
    let raft = Raft::new(id, config, network, MemLog::default(), sm.clone())
        .await
        .expect("raft starts");
    let control = Arc::new(TestControl {
        node_id: id,
        directory_id: addr.directory_id.clone(),
        raft: raft.clone(),
    });
    let (stop, stopped) = watch::channel(false);
    tokio::spawn(serve(
        listener,
        id,
        addr.directory_id.clone(),
        raft.clone(),
        control,
        stopped,
    ));
    TestNode {
        id,
        addr,
        raft,
        sm,
        stop,
    }
}

async fn hello(net: &Network, node: &TestNode) -> Result<ControlReply, NetError> {
    net.call(node.id, &node.addr, ControlRequest::Hello).await
}

// ---- tests ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_elect_a_leader_and_commit() {
    let nodes = [start(1).await, start(2).await, start(3).await];
    let members: BTreeMap<NodeId, NodeAddr> =
        nodes.iter().map(|n| (n.id, n.addr.clone())).collect();
    nodes[0].raft.initialize(members).await.unwrap();

    let m = nodes[0]
        .raft
        .wait(Some(WAIT))
        .metrics(|m| m.current_leader.is_some(), "a leader")
        .await
        .unwrap();
    let leader_id = m.current_leader.unwrap();
    let leader = nodes.iter().find(|n| n.id == leader_id).unwrap();

    let w = leader
        .raft
        .client_write(MetaRequest::InitCluster {
            cluster_id: "c1".into(),
        })
        .await
        .unwrap();
    let index = w.log_id.index;
    for n in &nodes {
        n.raft
            .wait(Some(WAIT))
            .applied_index_at_least(Some(index), "the write applied")
            .await
            .unwrap();
        assert_eq!(n.sm.cluster_id().as_deref(), Some("c1"), "node {}", n.id);
        let voters: BTreeSet<NodeId> = n
            .raft
            .metrics()
            .borrow()
            .membership_config
            .voter_ids()
            .collect();
        assert_eq!(voters, BTreeSet::from([1, 2, 3]));
    }

    // A control write through the network: a follower answers NotLeader
    // naming the leader, the leader commits it.
    let net = Network::new(99);
    let follower = nodes.iter().find(|n| n.id != leader_id).unwrap();
    let write = |id: &str| ControlRequest::Write {
        request: MetaRequest::InitCluster {
            cluster_id: id.into(),
        },
    };
    match net
        .call(follower.id, &follower.addr, write("c1"))
        .await
        .unwrap()
    {
        ControlReply::NotLeader { leader: named } => {
            assert_eq!(named, Some((leader_id, leader.addr.clone())))
        }
        other => panic!("expected NotLeader, got {other:?}"),
    }
    match net
        .call(leader.id, &leader.addr, write("c2"))
        .await
        .unwrap()
    {
        ControlReply::Written { index: i, response } => {
            assert!(i > index);
            assert!(
                matches!(response, MetaResponse::Error { .. }),
                "{response:?}"
            );
        }
        other => panic!("expected Written, got {other:?}"),
    }

    for n in &nodes {
        n.raft.shutdown().await.unwrap();
        n.stop.send(true).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_requests_round_trip() {
    let node = start(7).await;
    let net = Network::new(1);
    assert_eq!(
        hello(&net, &node).await.unwrap(),
        ControlReply::Hello {
            node_id: 7,
            directory_id: "dir-7".into(),
            members: vec![],
        }
    );
    for (broker_id, fenced) in [(3, true), (4, false)] {
        let reply = net
            .call(
                node.id,
                &node.addr,
                ControlRequest::Heartbeat {
                    broker_id,
                    broker_epoch: 10,
                    applied_index: 5,
                },
            )
            .await
            .unwrap();
        assert_eq!(
            reply,
            ControlReply::Heartbeat {
                fenced,
                may_shut_down: false
            }
        );
    }
    // Unknown directory ("" = not known yet) is accepted.
    let blank = NodeAddr {
        addr: node.addr.addr.clone(),
        directory_id: String::new(),
    };
    assert!(matches!(
        net.call(node.id, &blank, ControlRequest::Hello).await,
        Ok(ControlReply::Hello { node_id: 7, .. })
    ));
    node.stop.send(true).unwrap();
}

/// Sends `bytes` on a fresh connection and waits until the server closes it.
async fn closed_after(addr: &str, bytes: &[u8]) {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    // The server may close before it read everything: a reset is a close too.
    let _ = s.write_all(bytes).await;
    let mut buf = [0u8; 64];
    let r = tokio::time::timeout(WAIT, s.read(&mut buf))
        .await
        .expect("the server closes the connection");
    assert!(
        matches!(r, Ok(0) | Err(_)),
        "the connection answered: {r:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_frames_close_only_their_connection() {
    let node = start(1).await;
    let net = Network::new(2);
    let addr = node.addr.addr.clone();
    // A connection opened before the bad ones keeps working.
    assert!(hello(&net, &node).await.is_ok());

    let good = encode(
        Kind::Control,
        &serde_json::json!({"from": 2, "directory_id": "", "body": {"kind": "hello"}}),
    )
    .unwrap();
    let mut bad_crc = good.clone();
    bad_crc[8] ^= 0x01;
    let mut unknown_kind = good.clone();
    unknown_kind[4] = 0x42;
    let mut reply_kind = good.clone();
    reply_kind[4] = Kind::ControlReply as u8;
    let not_json = {
        let payload = b"{not json";
        let mut f = ((payload.len() + 5) as u32).to_be_bytes().to_vec();
        f.push(Kind::Control as u8);
        f.extend_from_slice(&crc32c::crc32c(payload).to_be_bytes());
        f.extend_from_slice(payload);
        f
    };
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("garbage", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("oversized", vec![0xFF, 0xFF, 0xFF, 0xF0, 0x04, 0, 0, 0, 0]),
        ("too short", vec![0, 0, 0, 1, 0x04]),
        ("bad crc", bad_crc),
        ("unknown kind", unknown_kind),
        ("reply kind as request", reply_kind),
        ("undecodable json", not_json),
    ];
    for (what, bytes) in cases {
        closed_after(&addr, &bytes).await;
        // A fresh connection still works, and the node is still running.
        let fresh = Network::new(3);
        assert!(
            matches!(hello(&fresh, &node).await, Ok(ControlReply::Hello { .. })),
            "after {what}"
        );
    }
    // The valid frame itself gets an answer on a raw connection.
    let mut s = TcpStream::connect(&addr).await.unwrap();
    s.write_all(&good).await.unwrap();
    let mut head = [0u8; 9];
    s.read_exact(&mut head).await.unwrap();
    assert_eq!(head[4], Kind::ControlReply as u8);
    // The pooled connection from before still answers.
    assert!(hello(&net, &node).await.is_ok());
    assert!(node.raft.metrics().borrow().running_state.is_ok());
    node.stop.send(true).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_directory_is_refused() {
    let node = start(5).await;
    let net = Network::new(1);
    let wiped = NodeAddr {
        addr: node.addr.addr.clone(),
        directory_id: "dir-before-the-wipe".into(),
    };
    match net.call(node.id, &wiped, ControlRequest::Hello).await {
        Err(NetError::WrongDirectory {
            node_id,
            directory_id,
        }) => {
            assert_eq!(node_id, 5);
            assert_eq!(directory_id, "dir-5");
        }
        other => panic!("expected WrongDirectory, got {other:?}"),
    }
    // openraft sees the refusal as Unreachable.
    let mut factory = Network::new(1);
    let mut conn = factory.new_client(node.id, &wiped).await;
    let opt = RPCOption::new(Duration::from_secs(5));
    let r = conn
        .vote(VoteRequest::new(Vote::new(1, 1), None), opt.clone())
        .await;
    assert!(matches!(r, Err(RPCError::Unreachable(_))), "{r:?}");
    // The right directory gets openraft's answer.
    let mut conn = factory.new_client(node.id, &node.addr).await;
    let r = conn
        .vote(VoteRequest::new(Vote::new(1, 1), None), opt)
        .await;
    assert!(r.is_ok(), "{r:?}");
    node.stop.send(true).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_target() {
    // A port nothing listens on: bind, note it, close.
    let addr = {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap().to_string()
    };
    let target = NodeAddr {
        addr,
        directory_id: String::new(),
    };
    let mut factory = Network::new(1);
    let mut conn = factory.new_client(9, &target).await;
    let r = conn
        .vote(
            VoteRequest::new(Vote::new(1, 1), None),
            RPCOption::new(Duration::from_secs(2)),
        )
        .await;
    assert!(matches!(r, Err(RPCError::Unreachable(_))), "{r:?}");
    let e = factory
        .call(9, &target, ControlRequest::Hello)
        .await
        .unwrap_err();
    assert!(e.is_unreachable(), "{e}");
}

/// An idle connection, and one that trickles a frame, are closed after the
/// server's idle timeout (paused time: it passes at once); a client's pooled
/// connection older than it is not reused, so calls go on working.
#[tokio::test(start_paused = true)]
async fn idle_and_trickling_connections_are_closed_and_clients_reconnect() {
    use es_meta::net::server::IDLE_TIMEOUT;
    let node = start(1).await;
    let net = Network::new(2);
    assert!(hello(&net, &node).await.is_ok());
    let addr = node.addr.addr.clone();

    let mut idle = TcpStream::connect(&addr).await.expect("connect");
    let mut trickle = TcpStream::connect(&addr).await.expect("connect");
    // Half a header now, the rest never.
    trickle.write_all(&[0, 0, 0]).await.expect("write");
    tokio::time::sleep(IDLE_TIMEOUT + Duration::from_secs(1)).await;
    let mut buf = [0u8; 16];
    assert_eq!(
        idle.read(&mut buf).await.unwrap_or(0),
        0,
        "idle connection closed"
    );
    assert_eq!(
        trickle.read(&mut buf).await.unwrap_or(0),
        0,
        "trickling connection closed"
    );

    // The client's pooled connection is older than the server's timeout:
    // the next call opens a new one and succeeds.
    assert!(hello(&net, &node).await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_node_catches_up_from_a_chunked_snapshot() {
    let n1 = start_with(
        1,
        Config {
            // Many small chunks, and no log kept behind the snapshot.
            snapshot_max_chunk_size: 64,
            max_in_snapshot_log_to_keep: 0,
            ..config()
        },
    )
    .await;
    n1.raft
        .initialize(BTreeMap::from([(1, n1.addr.clone())]))
        .await
        .unwrap();
    n1.raft
        .wait(Some(WAIT))
        .metrics(|m| m.current_leader == Some(1), "node 1 leads")
        .await
        .unwrap();
    let mut index = 0;
    for _ in 0..3 {
        let w = n1
            .raft
            .client_write(MetaRequest::InitCluster {
                cluster_id: "c1".into(),
            })
            .await
            .unwrap();
        index = w.log_id.index;
    }
    n1.raft.trigger().snapshot().await.unwrap();
    n1.raft
        .wait(Some(WAIT))
        .metrics(
            |m| m.snapshot.is_some_and(|s| s.index >= index),
            "snapshot built",
        )
        .await
        .unwrap();
    n1.raft.trigger().purge_log(index).await.unwrap();
    n1.raft
        .wait(Some(WAIT))
        .metrics(|m| m.purged.is_some_and(|p| p.index >= index), "log purged")
        .await
        .unwrap();

    // Node 2 can only catch up by the snapshot, sent in chunks over the wire.
    let n2 = start(2).await;
    n1.raft.add_learner(2, n2.addr.clone(), true).await.unwrap();
    n2.raft
        .wait(Some(WAIT))
        .applied_index_at_least(Some(index), "node 2 caught up")
        .await
        .unwrap();
    assert_eq!(n2.sm.cluster_id().as_deref(), Some("c1"));
    assert!(
        n2.sm.0.lock().snapshot.is_some(),
        "installed from a snapshot"
    );
    for n in [&n1, &n2] {
        n.raft.shutdown().await.unwrap();
        n.stop.send(true).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_limit_are_closed() {
    let node = start(1).await;
    let addr = node.addr.addr.clone();
    let mut held = Vec::new();
    for _ in 0..es_meta::net::MAX_CONNECTIONS {
        held.push(TcpStream::connect(&addr).await.unwrap());
    }
    // All permits are held: the next connection is closed at once.
    let probe = Network::new(2);
    closed_after(&addr, &[]).await;
    drop(held.pop());
    // Once the server has seen that one close, a new connection is served.
    tokio::time::timeout(WAIT, async {
        while hello(&probe, &node).await.is_err() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("a connection is served again");
    drop(held);
    node.stop.send(true).unwrap();
}
