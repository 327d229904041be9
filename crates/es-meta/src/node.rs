//! One node of the controller quorum, as the broker uses it.
//!
//! [`MetaNode::start`] opens `data/meta/` (the Raft log, vote and snapshot),
//! starts openraft, serves the Raft listener when one is configured, and
//! forms or joins the quorum:
//! - no voters configured: a one-voter quorum of this node alone (the
//!   embedded default), initialized on first start;
//! - this node among the voters: on first start the lowest-id voter
//!   initializes the quorum once every voter has answered a hello (and said
//!   its data-directory id); the others wait to be reached;
//! - this node not among the voters: it asks the voters to add it as a
//!   learner, and follows the log.
//!
//! A node whose data directory was wiped is refused: the quorum's
//! membership records each member's directory id, and a fresh directory has
//! a new one ([`MetaError::Wiped`]).
//!
//! [`MetaNode::write`] proposes one entry and answers once it is committed
//! and applied, forwarding to the leader when this node is not it.
//! [`MetaNode::image`] is this node's applied copy of the metadata.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use es_storage::{meta, Fs};
use openraft::error::{ChangeMembershipError, CheckIsLeaderError, ClientWriteError, RaftError};
use openraft::{Config, Raft, ServerState};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::control::{ControlReply, ControlRequest, QuorumState, ReplicaState};
use crate::net::{ControlHandler, NetError, Network};
use crate::session::Sessions;
use crate::store::{self, Applied};
use crate::{Materializer, MetaImage, MetaRequest, MetaResponse, MetaTypes, NodeAddr, NodeId};

/// Name of the file that says which node a `data/meta/` belongs to.
pub const NODE_FILE: &str = "node.json";
/// How long a write waits for a leader before it fails.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// Pause between attempts while the leader is unknown.
const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// What a node is told at start.
#[derive(Clone, Debug)]
pub struct MetaOptions {
    pub node_id: NodeId,
    /// `data/meta`.
    pub dir: PathBuf,
    pub fs: Arc<dyn Fs>,
    /// Where the Raft listener binds (`--controller-listen`); None: no
    /// listener (a one-voter quorum needs none).
    pub listen: Option<String>,
    /// The address other nodes reach this one at (defaults to `listen`).
    pub advertised: Option<String>,
    /// `--controller-quorum-voters`: id to Raft address. Empty: this node alone.
    pub voters: BTreeMap<NodeId, String>,
    /// Kafka's `broker.session.timeout.ms`.
    pub session_timeout: Duration,
    /// Raft heartbeat and election timeouts (milliseconds).
    pub heartbeat_ms: u64,
    pub election_min_ms: u64,
    pub election_max_ms: u64,
    /// A snapshot is taken after this many entries since the last one.
    pub snapshot_every: u64,
}

impl MetaOptions {
    /// Defaults: Kafka's 9 s broker session, Raft heartbeats every 150 ms,
    /// an election after 0.5-1 s without one (randomised; KRaft's
    /// `controller.quorum.election.timeout.ms` is 1 s), a snapshot every
    /// 10,000 entries. openraft also keeps a leader lease of the longest
    /// election timeout (a follower that heard from the leader within it
    /// votes for nobody), so a leader's loss is noticed after 0.5-1 s and
    /// its successor usually elected within 1-2 s (docs/cluster.md).
    pub fn new(node_id: NodeId, dir: PathBuf, fs: Arc<dyn Fs>) -> Self {
        MetaOptions {
            node_id,
            dir,
            fs,
            listen: None,
            advertised: None,
            voters: BTreeMap::new(),
            session_timeout: Duration::from_secs(9),
            heartbeat_ms: 150,
            election_min_ms: 500,
            election_max_ms: 1000,
            snapshot_every: 10_000,
        }
    }
}

/// Why the metadata layer failed.
#[derive(Debug, thiserror::Error)]
pub enum MetaError {
    #[error("metadata storage: {0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Config(String),
    #[error("the data directory of node {node_id} was wiped: the quorum knows node {node_id} by data directory {known}, this one is {ours}; a node id is never reused: remove the node (RemoveRaftVoter) and add it under a new id")]
    Wiped {
        node_id: NodeId,
        known: String,
        ours: String,
    },
    #[error("no controller leader within {0:?}")]
    NoLeader(Duration),
    #[error("the request may or may not have been applied: {0}")]
    Uncertain(String),
    #[error("raft stopped: {0}")]
    Fatal(String),
}

/// `data/meta/node.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct NodeFile {
    node_id: NodeId,
    directory_id: String,
}

/// A running node of the quorum.
pub struct MetaNode {
    id: NodeId,
    directory_id: String,
    raft: Raft<MetaTypes>,
    network: Network,
    applied: watch::Receiver<Applied>,
    sessions: Arc<Sessions>,
    shutdown: watch::Sender<bool>,
    /// Whether `data/meta/` held nothing at start (a node never initialized).
    fresh: bool,
}

impl std::fmt::Debug for MetaNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetaNode").field("id", &self.id).finish()
    }
}

/// Reads `node.json`, or writes it with a new directory id; refuses a
/// directory that belongs to another node id.
fn node_file(fs: &dyn Fs, dir: &Path, node_id: NodeId) -> Result<NodeFile, MetaError> {
    es_storage::fs::create_dir_durable(fs, dir)?;
    let path = dir.join(NODE_FILE);
    let read = meta::read_json::<NodeFile>(fs, &path)
        .map_err(|e| MetaError::Config(format!("{}: {e}", path.display())))?;
    match read {
        Some(f) if f.node_id == node_id => Ok(f),
        Some(f) => Err(MetaError::Config(format!(
            "{} belongs to node {}, but this is node {node_id}",
            dir.display(),
            f.node_id
        ))),
        None => {
            let f = NodeFile {
                node_id,
                directory_id: uuid::Uuid::new_v4().to_string(),
            };
            meta::write_json(fs, &path, &f)
                .map_err(|e| MetaError::Config(format!("{}: {e}", path.display())))?;
            Ok(f)
        }
    }
}

impl MetaNode {
    /// Opens the metadata directory and starts this node (see the module
    /// comment for how the quorum forms).
    pub async fn start(
        opts: MetaOptions,
        materializer: Arc<dyn Materializer>,
    ) -> Result<Arc<MetaNode>, MetaError> {
        let fs = opts.fs.clone();
        let nf = {
            let (fs, dir, id) = (fs.clone(), opts.dir.clone(), opts.node_id);
            tokio::task::spawn_blocking(move || node_file(fs.as_ref(), &dir, id))
                .await
                .map_err(|e| MetaError::Fatal(e.to_string()))??
        };
        let (log, sm) = {
            let (fs, dir) = (fs.clone(), opts.dir.clone());
            tokio::task::spawn_blocking(move || store::open(fs, &dir, materializer))
                .await
                .map_err(|e| MetaError::Fatal(e.to_string()))??
        };
        let fresh = log.is_fresh();
        let applied = sm.watch();
        let config = Config {
            cluster_name: "es".into(),
            heartbeat_interval: opts.heartbeat_ms,
            election_timeout_min: opts.election_min_ms,
            election_timeout_max: opts.election_max_ms,
            snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(opts.snapshot_every),
            max_in_snapshot_log_to_keep: 1000,
            ..Config::default()
        }
        .validate()
        .map_err(|e| MetaError::Config(e.to_string()))?;
        let network = Network::new(opts.node_id);
        let raft = Raft::new(opts.node_id, Arc::new(config), network.clone(), log, sm)
            .await
            .map_err(|e| MetaError::Fatal(e.to_string()))?;
        let (shutdown, shutdown_rx) = watch::channel(false);
        let node = Arc::new(MetaNode {
            id: opts.node_id,
            directory_id: nf.directory_id.clone(),
            raft,
            network,
            applied,
            sessions: Arc::new(Sessions::new(opts.session_timeout)),
            shutdown,
            fresh,
        });
        let advertised = opts.advertised.clone().or_else(|| opts.listen.clone());
        if let Some(listen) = &opts.listen {
            let listener = tokio::net::TcpListener::bind(listen)
                .await
                .map_err(|e| MetaError::Config(format!("controller listener {listen}: {e}")))?;
            tokio::spawn(crate::net::serve(
                listener,
                node.id,
                node.directory_id.clone(),
                node.raft.clone(),
                Arc::new(Handler(Arc::downgrade(&node))),
                shutdown_rx.clone(),
            ));
        }
        let me = NodeAddr {
            addr: advertised.unwrap_or_default(),
            directory_id: nf.directory_id,
        };
        if opts.voters.is_empty() {
            if fresh {
                node.raft
                    .initialize(BTreeMap::from([(node.id, me)]))
                    .await
                    .map_err(|e| MetaError::Fatal(e.to_string()))?;
            } else {
                // The only voter: no need to wait out an election timeout
                // before it leads again.
                node.raft
                    .trigger()
                    .elect()
                    .await
                    .map_err(|e| MetaError::Fatal(e.to_string()))?;
            }
        } else {
            node.join(&opts.voters, me, fresh).await?;
        }
        crate::session::spawn_fencer(Arc::downgrade(&node), shutdown_rx);
        Ok(node)
    }

    /// Forms the quorum (lowest-id voter, first start), waits to be reached
    /// (other voters), or asks to be added as a learner.
    async fn join(
        self: &Arc<Self>,
        voters: &BTreeMap<NodeId, String>,
        me: NodeAddr,
        fresh: bool,
    ) -> Result<(), MetaError> {
        if !fresh {
            return Ok(());
        }
        let is_voter = voters.contains_key(&self.id);
        let mut dirs: BTreeMap<NodeId, String> = BTreeMap::new();
        dirs.insert(self.id, me.directory_id.clone());
        let deadline = tokio::time::Instant::now() + WRITE_TIMEOUT * 4;
        loop {
            for (id, addr) in voters {
                if *id == self.id || dirs.contains_key(id) && is_voter {
                    continue;
                }
                let target = NodeAddr {
                    addr: addr.clone(),
                    directory_id: String::new(),
                };
                let Ok(ControlReply::Hello {
                    directory_id,
                    members,
                    ..
                }) = self.network.call(*id, &target, ControlRequest::Hello).await
                else {
                    continue;
                };
                if let Some((_, known)) = members.iter().find(|(m, _)| *m == self.id) {
                    if known.directory_id != me.directory_id {
                        return Err(MetaError::Wiped {
                            node_id: self.id,
                            known: known.directory_id.clone(),
                            ours: me.directory_id.clone(),
                        });
                    }
                }
                if !members.is_empty() {
                    // The quorum exists. A voter listed in it waits to be
                    // reached; anyone else asks to join as a learner.
                    if is_voter && members.iter().any(|(m, _)| *m == self.id) {
                        return Ok(());
                    }
                    let join = ControlRequest::Join {
                        node_id: self.id,
                        node: me.clone(),
                    };
                    // Not a member yet, this node knows no leader: ask the
                    // voter, and the leader it names.
                    let mut to = (*id, target.clone());
                    for _ in 0..3 {
                        match self.network.call(to.0, &to.1, join.clone()).await {
                            Ok(ControlReply::Done) => return Ok(()),
                            Ok(ControlReply::NotLeader { leader: Some(l) }) => to = l,
                            Ok(ControlReply::Error { message }) => {
                                return Err(MetaError::Config(message))
                            }
                            _ => break,
                        }
                    }
                    continue;
                }
                dirs.insert(*id, directory_id);
            }
            if is_voter && dirs.len() == voters.len() {
                let lowest = voters.keys().next().copied();
                if lowest == Some(self.id) {
                    let members: BTreeMap<NodeId, NodeAddr> = voters
                        .iter()
                        .map(|(id, addr)| {
                            let directory_id = dirs.get(id).cloned().unwrap_or_default();
                            (
                                *id,
                                NodeAddr {
                                    addr: addr.clone(),
                                    directory_id,
                                },
                            )
                        })
                        .collect();
                    tracing::info!(?members, "forming the controller quorum");
                    self.raft
                        .initialize(members)
                        .await
                        .map_err(|e| MetaError::Fatal(e.to_string()))?;
                }
                return Ok(());
            }
            if tokio::time::Instant::now() > deadline {
                return Err(MetaError::Config(format!(
                    "could not reach the controller quorum voters {voters:?}"
                )));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    pub fn id(&self) -> NodeId {
        self.id
    }

    /// Whether `data/meta/` held nothing when this node started.
    pub fn was_fresh(&self) -> bool {
        self.fresh
    }

    /// Waits until this node has applied the log up to `index`.
    pub async fn wait_applied(&self, index: u64) -> Result<(), MetaError> {
        self.wait_until(WRITE_TIMEOUT, |a| {
            a.last_applied.is_some_and(|l| l.index >= index)
        })
        .await
    }

    /// Waits (at most `timeout`) until the image shows this broker
    /// registered with `epoch` and not fenced. The unfencing is applied
    /// after everything before it in the log, which at start can be a large
    /// image (every partition this broker leads is opened as it is applied),
    /// so the caller chooses how long that may take.
    pub async fn wait_unfenced(
        &self,
        broker_id: i32,
        epoch: i64,
        timeout: Duration,
    ) -> Result<(), MetaError> {
        self.wait_until(timeout, |a| {
            a.image
                .brokers
                .get(&broker_id)
                .is_some_and(|b| b.epoch == epoch && !b.fenced)
        })
        .await
    }

    /// Waits (at most `timeout`) until the applied state satisfies `done`.
    async fn wait_until(
        &self,
        timeout: Duration,
        done: impl FnMut(&Applied) -> bool,
    ) -> Result<(), MetaError> {
        let mut rx = self.applied.clone();
        let waited = tokio::time::timeout(timeout, rx.wait_for(done))
            .await
            .map(|r| r.map(|_| ()));
        match waited {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(MetaError::Fatal("state machine stopped".into())),
            Err(_) => Err(MetaError::NoLeader(timeout)),
        }
    }

    pub fn raft(&self) -> &Raft<MetaTypes> {
        &self.raft
    }

    /// This node's applied copy of the metadata.
    pub fn image(&self) -> Arc<MetaImage> {
        self.applied.borrow().image.clone()
    }

    /// Notified after every applied batch.
    pub fn applied(&self) -> watch::Receiver<Applied> {
        self.applied.clone()
    }

    /// The current leader, if known.
    pub fn leader(&self) -> Option<NodeId> {
        self.raft.metrics().borrow().current_leader
    }

    /// Whether this node leads the quorum now.
    pub fn is_leader(&self) -> bool {
        self.raft.metrics().borrow().state == ServerState::Leader
    }

    /// The broker sessions the leader tracks.
    pub(crate) fn sessions(&self) -> &Arc<Sessions> {
        &self.sessions
    }

    /// The quorum as its leader sees it.
    pub async fn describe_quorum(&self) -> Result<QuorumState, MetaError> {
        match self.forward(ControlRequest::DescribeQuorum).await? {
            ControlReply::Quorum(q) => Ok(q),
            other => Err(MetaError::Fatal(format!("unexpected reply {other:?}"))),
        }
    }

    /// Proposes one entry and answers once it is committed and applied:
    /// the log index and the state machine's answer.
    pub async fn write(&self, request: MetaRequest) -> Result<(u64, MetaResponse), MetaError> {
        match self.forward(ControlRequest::Write { request }).await? {
            ControlReply::Written { index, response } => Ok((index, response)),
            other => Err(MetaError::Fatal(format!("unexpected reply {other:?}"))),
        }
    }

    /// Waits until this node has applied every entry committed before the
    /// call (a read barrier: a read after it sees every write answered
    /// before it began, whichever node took the write).
    pub async fn read_barrier(&self) -> Result<(), MetaError> {
        match self.forward(ControlRequest::ReadIndex).await? {
            ControlReply::ReadIndex { index } => self.wait_applied(index).await,
            other => Err(MetaError::Fatal(format!("unexpected reply {other:?}"))),
        }
    }

    /// Runs a control request on the leader: here if this node leads,
    /// otherwise over the network, retrying while no leader is known.
    pub async fn forward(&self, req: ControlRequest) -> Result<ControlReply, MetaError> {
        let deadline = tokio::time::Instant::now() + WRITE_TIMEOUT;
        loop {
            let reply = self.handle_local(req.clone()).await;
            let leader = match reply {
                ControlReply::NotLeader { leader } => leader,
                ControlReply::Error { message } => return Err(MetaError::Fatal(message)),
                r => return Ok(r),
            };
            if let Some((id, addr)) = leader.filter(|(id, _)| *id != self.id) {
                match self.network.call(id, &addr, req.clone()).await {
                    Ok(ControlReply::NotLeader { .. }) => {}
                    Ok(ControlReply::Error { message }) => return Err(MetaError::Fatal(message)),
                    Ok(r) => return Ok(r),
                    // Not sent: safe to try again.
                    Err(NetError::Connect { .. } | NetError::ConnectTimeout { .. }) => {}
                    Err(e) => return Err(MetaError::Uncertain(e.to_string())),
                }
            }
            if tokio::time::Instant::now() > deadline {
                return Err(MetaError::NoLeader(WRITE_TIMEOUT));
            }
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }

    /// Answers a control request as this node can: the leader carries it
    /// out, a follower names the leader.
    pub async fn handle_local(&self, req: ControlRequest) -> ControlReply {
        match req {
            ControlRequest::Hello => {
                let members = self
                    .raft
                    .metrics()
                    .borrow()
                    .membership_config
                    .nodes()
                    .map(|(id, n)| (*id, n.clone()))
                    .collect();
                ControlReply::Hello {
                    node_id: self.id,
                    directory_id: self.directory_id.clone(),
                    members,
                }
            }
            ControlRequest::ReadIndex => match self.raft.ensure_linearizable().await {
                Ok(read) => ControlReply::ReadIndex {
                    index: read.map_or(0, |l| l.index),
                },
                Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f))) => {
                    ControlReply::NotLeader {
                        leader: f.leader_id.zip(f.leader_node),
                    }
                }
                Err(e) => ControlReply::Error {
                    message: e.to_string(),
                },
            },
            ControlRequest::Write { request } => match self.raft.client_write(request).await {
                Ok(r) => ControlReply::Written {
                    index: r.log_id.index,
                    response: r.data,
                },
                Err(e) => self.write_error(e),
            },
            ControlRequest::Heartbeat {
                broker_id,
                broker_epoch,
                applied_index,
            } => {
                if !self.is_leader() {
                    return self.not_leader();
                }
                self.sessions.heard(broker_id, broker_epoch, applied_index);
                let image = self.image();
                let fenced = image
                    .brokers
                    .get(&broker_id)
                    .is_none_or(|b| b.fenced || b.epoch != broker_epoch);
                let may_shut_down = image.controlled_shutdown_done(broker_id, |b| {
                    let epoch = image.brokers.get(&b).map(|b| b.epoch)?;
                    self.sessions.applied_index(b, epoch)
                });
                ControlReply::Heartbeat {
                    fenced,
                    may_shut_down,
                }
            }
            ControlRequest::DescribeQuorum => {
                let m = self.raft.metrics().borrow().clone();
                if m.state != ServerState::Leader {
                    return self.not_leader();
                }
                let membership = m.membership_config.membership();
                let replication = m.replication.clone().unwrap_or_default();
                let replica = |id: &NodeId, node: &NodeAddr| ReplicaState {
                    node_id: *id,
                    node: node.clone(),
                    log_end: if *id == self.id {
                        Some(m.last_log_index.map_or(0, |i| i + 1))
                    } else {
                        replication
                            .get(id)
                            .map(|l| l.as_ref().map_or(0, |l| l.index + 1))
                    },
                };
                let voter_ids: BTreeSet<NodeId> = membership.voter_ids().collect();
                let (voters, observers): (Vec<_>, Vec<_>) = membership
                    .nodes()
                    .map(|(id, n)| (voter_ids.contains(id), replica(id, n)))
                    .partition(|(v, _)| *v);
                ControlReply::Quorum(QuorumState {
                    leader_id: self.id,
                    term: m.current_term,
                    high_watermark: m.last_applied.map_or(0, |l| l.index + 1),
                    voters: voters.into_iter().map(|(_, r)| r).collect(),
                    observers: observers.into_iter().map(|(_, r)| r).collect(),
                })
            }
            ControlRequest::Join { node_id, node } => {
                let known = self
                    .raft
                    .metrics()
                    .borrow()
                    .membership_config
                    .membership()
                    .get_node(&node_id)
                    .cloned();
                if let Some(k) = known {
                    if k.directory_id != node.directory_id {
                        return ControlReply::Error {
                            message: MetaError::Wiped {
                                node_id,
                                known: k.directory_id,
                                ours: node.directory_id,
                            }
                            .to_string(),
                        };
                    }
                    return ControlReply::Done;
                }
                let deadline = tokio::time::Instant::now() + WRITE_TIMEOUT;
                loop {
                    match self.raft.add_learner(node_id, node.clone(), false).await {
                        Ok(_) => return ControlReply::Done,
                        Err(e) if in_progress(&e) && tokio::time::Instant::now() < deadline => {
                            tokio::time::sleep(RETRY_PAUSE).await;
                        }
                        Err(e) => return self.write_error(e),
                    }
                }
            }
            ControlRequest::AddVoter { node_id } => {
                let metrics = self.raft.metrics().borrow().clone();
                let mut voters: BTreeSet<NodeId> =
                    metrics.membership_config.membership().voter_ids().collect();
                if metrics
                    .membership_config
                    .membership()
                    .get_node(&node_id)
                    .is_none()
                {
                    return ControlReply::Error {
                        message: format!("node {node_id} is not following the log: start it first"),
                    };
                }
                voters.insert(node_id);
                self.change_voters(voters, true).await
            }
            ControlRequest::RemoveVoter {
                node_id,
                keep_as_learner,
            } => {
                let metrics = self.raft.metrics().borrow().clone();
                let mut voters: BTreeSet<NodeId> =
                    metrics.membership_config.membership().voter_ids().collect();
                if !voters.remove(&node_id) {
                    return ControlReply::Error {
                        message: format!("node {node_id} is not a voter"),
                    };
                }
                if voters.is_empty() {
                    return ControlReply::Error {
                        message: "the last voter cannot be removed".into(),
                    };
                }
                self.change_voters(voters, keep_as_learner).await
            }
        }
    }

    /// Changes the voter set, waiting (bounded) while an earlier change is
    /// still being committed.
    async fn change_voters(&self, voters: BTreeSet<NodeId>, retain: bool) -> ControlReply {
        let deadline = tokio::time::Instant::now() + WRITE_TIMEOUT;
        loop {
            match self.raft.change_membership(voters.clone(), retain).await {
                Ok(_) => return ControlReply::Done,
                Err(e) if in_progress(&e) && tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(RETRY_PAUSE).await;
                }
                Err(e) => return self.write_error(e),
            }
        }
    }

    fn not_leader(&self) -> ControlReply {
        let m = self.raft.metrics().borrow().clone();
        let leader = m.current_leader.and_then(|id| {
            m.membership_config
                .membership()
                .get_node(&id)
                .map(|n| (id, n.clone()))
        });
        ControlReply::NotLeader { leader }
    }

    fn write_error(
        &self,
        e: RaftError<NodeId, ClientWriteError<NodeId, NodeAddr>>,
    ) -> ControlReply {
        match e {
            RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => ControlReply::NotLeader {
                leader: f.leader_id.zip(f.leader_node),
            },
            e => ControlReply::Error {
                message: e.to_string(),
            },
        }
    }

    /// Stops Raft and the listener.
    pub async fn shutdown(&self) {
        self.shutdown.send_replace(true);
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!(error = %e, "raft shutdown");
        }
    }
}

/// Whether a membership change was refused because an earlier one is
/// still being committed (worth waiting for).
fn in_progress(e: &RaftError<NodeId, ClientWriteError<NodeId, NodeAddr>>) -> bool {
    matches!(
        e,
        RaftError::APIError(ClientWriteError::ChangeMembershipError(
            ChangeMembershipError::InProgress(_)
        ))
    )
}

/// The Raft listener's handler for control requests.
struct Handler(std::sync::Weak<MetaNode>);

impl ControlHandler for Handler {
    fn handle(
        &self,
        req: ControlRequest,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ControlReply> + Send + '_>> {
        Box::pin(async move {
            match self.0.upgrade() {
                Some(n) => n.handle_local(req).await,
                None => ControlReply::Error {
                    message: "node stopping".into(),
                },
            }
        })
    }
}
