//! openraft's network over the Raft listener: [`Network`] is the
//! `RaftNetworkFactory` (and sends control requests, [`Network::call`]);
//! [`Connection`] is one target's `RaftNetwork`, holding one TCP connection
//! opened when first needed and dropped after any error (the next RPC opens
//! a new one). Every RPC is bounded by openraft's `RPCOption::hard_ttl`, the
//! connect by [`Network::connect_timeout`].
//!
//! Errors as openraft sees them: a refused or timed-out connect, an RPC past
//! its deadline, and a [`Refusal::WrongDirectory`] answer are `Unreachable`
//! (openraft backs off before trying again); any other failure of the
//! exchange is `NetworkError` (retried at once, on a new connection); an
//! error the remote Raft answered with is `RemoteError`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use openraft::error::{
    InstallSnapshotError, NetworkError, PayloadTooLarge, RPCError, RaftError, RemoteError,
    Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use tokio::io::BufReader;
use tokio::net::TcpStream;

use super::frame::{read_frame, write_frame, FrameError, Kind};
use super::rpc::{Refusal, Reply, Request};
use crate::control::{ControlReply, ControlRequest};
use crate::{MetaTypes, NodeAddr, NodeId};

/// How long a connect may take unless set otherwise.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a control request may take unless set otherwise (a forwarded
/// write waits for its commit).
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// A connection idle for longer is not used again but closed, well before
/// the server closes it ([`super::server::IDLE_TIMEOUT`]).
pub const IDLE_REUSE_MAX: Duration = Duration::from_secs(20);

/// An idle connection and when it was last used.
type Pooled = (Stream, Instant);

/// Idle connections kept per target for control requests.
const IDLE_PER_TARGET: usize = 4;

type Stream = BufReader<TcpStream>;

/// Why a request to another node failed.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    #[error("connecting to {addr}: {source}")]
    Connect {
        addr: String,
        source: std::io::Error,
    },
    #[error("connecting to {addr}: no answer within {after:?}")]
    ConnectTimeout { addr: String, after: Duration },
    #[error("no reply within {0:?}")]
    Timeout(Duration),
    #[error(transparent)]
    Frame(#[from] FrameError),
    #[error("the connection closed before the reply")]
    Closed,
    #[error("node {node_id} has data directory {directory_id:?}, not the one expected")]
    WrongDirectory {
        node_id: NodeId,
        directory_id: String,
    },
    #[error("a {0:?} reply does not answer this request")]
    UnexpectedReply(Kind),
}

impl NetError {
    /// Whether openraft should back off before trying this node again.
    pub fn is_unreachable(&self) -> bool {
        match self {
            NetError::Connect { .. }
            | NetError::ConnectTimeout { .. }
            | NetError::Timeout(_)
            | NetError::WrongDirectory { .. } => true,
            NetError::Frame(_) | NetError::Closed | NetError::UnexpectedReply(_) => false,
        }
    }

    fn into_rpc<E: std::error::Error>(self) -> RPCError<NodeId, NodeAddr, E> {
        if self.is_unreachable() {
            RPCError::Unreachable(Unreachable::new(&self))
        } else {
            RPCError::Network(NetworkError::new(&self))
        }
    }
}

async fn connect(addr: &str, after: Duration) -> Result<Stream, NetError> {
    match tokio::time::timeout(after, TcpStream::connect(addr)).await {
        Ok(Ok(s)) => {
            let _ = s.set_nodelay(true);
            Ok(BufReader::new(s))
        }
        Ok(Err(source)) => Err(NetError::Connect {
            addr: addr.to_string(),
            source,
        }),
        Err(_) => Err(NetError::ConnectTimeout {
            addr: addr.to_string(),
            after,
        }),
    }
}

/// Sends one request frame on `slot`'s connection (opened if there is none)
/// and reads its reply, all within `ttl`. After any error the connection is
/// dropped; a refusal is a reply like any other and keeps it.
async fn exchange(
    slot: &mut Option<Stream>,
    addr: &str,
    connect_timeout: Duration,
    ttl: Duration,
    frame: &[u8],
) -> Result<Reply, NetError> {
    let attempt = async {
        if slot.is_none() {
            *slot = Some(connect(addr, connect_timeout.min(ttl)).await?);
        }
        let s = slot.as_mut().ok_or(NetError::Closed)?;
        write_frame(s, frame).await?;
        match read_frame(s).await? {
            Some((kind, payload)) => Ok(Reply::decode(kind, &payload)?),
            None => Err(NetError::Closed),
        }
    };
    let res = match tokio::time::timeout(ttl, attempt).await {
        Ok(r) => r,
        Err(_) => Err(NetError::Timeout(ttl)),
    };
    if res.is_err() {
        *slot = None;
    }
    match res? {
        Reply::Refused(Refusal::WrongDirectory {
            node_id,
            directory_id,
        }) => Err(NetError::WrongDirectory {
            node_id,
            directory_id,
        }),
        reply => Ok(reply),
    }
}

struct Inner {
    connect_timeout: Duration,
    call_timeout: Duration,
    /// Each with the time it was last used.
    idle: parking_lot::Mutex<HashMap<(NodeId, String), Vec<Pooled>>>,
}

/// This node's network: openraft's connection factory and the sender of
/// control requests. Cheap to clone (the clones share idle connections).
#[derive(Clone)]
pub struct Network {
    my_id: NodeId,
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Network {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Network")
            .field("my_id", &self.my_id)
            .finish()
    }
}

impl Network {
    /// The network of node `my_id`, with the default timeouts.
    pub fn new(my_id: NodeId) -> Network {
        Network::with_timeouts(my_id, DEFAULT_CONNECT_TIMEOUT, DEFAULT_CALL_TIMEOUT)
    }

    /// The network of node `my_id`: connects give up after
    /// `connect_timeout`, control requests after `call_timeout`.
    pub fn with_timeouts(
        my_id: NodeId,
        connect_timeout: Duration,
        call_timeout: Duration,
    ) -> Network {
        Network {
            my_id,
            inner: Arc::new(Inner {
                connect_timeout,
                call_timeout,
                idle: parking_lot::Mutex::new(HashMap::new()),
            }),
        }
    }

    /// This node's id, as its requests carry it.
    pub fn my_id(&self) -> NodeId {
        self.my_id
    }

    /// How long a connect may take.
    pub fn connect_timeout(&self) -> Duration {
        self.inner.connect_timeout
    }

    /// Sends a control request to node `target_id` at `target` (whose
    /// `directory_id`, if not empty, the receiver must have) and waits for
    /// its reply, at most the call timeout. Not retried: a forwarded write
    /// may have been taken even if its reply was lost.
    pub async fn call(
        &self,
        target_id: NodeId,
        target: &NodeAddr,
        req: ControlRequest,
    ) -> Result<ControlReply, NetError> {
        let frame = Request::Control(req).encode(self.my_id, &target.directory_id)?;
        let key = (target_id, target.addr.clone());
        let mut slot = self
            .inner
            .idle
            .lock()
            .get_mut(&key)
            .and_then(Vec::pop)
            .filter(|(_, used)| used.elapsed() < IDLE_REUSE_MAX)
            .map(|(stream, _)| stream);
        let res = exchange(
            &mut slot,
            &target.addr,
            self.inner.connect_timeout,
            self.inner.call_timeout,
            &frame,
        )
        .await;
        if let Some(stream) = slot {
            let mut idle = self.inner.idle.lock();
            let streams = idle.entry(key).or_default();
            streams.retain(|(_, used)| used.elapsed() < IDLE_REUSE_MAX);
            if streams.len() < IDLE_PER_TARGET {
                streams.push((stream, Instant::now()));
            }
        }
        match res? {
            Reply::Control(reply) => Ok(reply),
            other => Err(NetError::UnexpectedReply(other.kind())),
        }
    }
}

impl RaftNetworkFactory<MetaTypes> for Network {
    type Network = Connection;

    async fn new_client(&mut self, target: NodeId, node: &NodeAddr) -> Connection {
        Connection {
            my_id: self.my_id,
            target,
            node: node.clone(),
            connect_timeout: self.inner.connect_timeout,
            stream: None,
            used: Instant::now(),
        }
    }
}

/// openraft's connection to one target: one TCP connection, opened when
/// first needed and again after any error.
pub struct Connection {
    my_id: NodeId,
    target: NodeId,
    node: NodeAddr,
    connect_timeout: Duration,
    stream: Option<Stream>,
    /// When `stream` was last used.
    used: Instant,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("my_id", &self.my_id)
            .field("target", &self.target)
            .field("node", &self.node)
            .field("connected", &self.stream.is_some())
            .finish()
    }
}

type RpcResult<T, E = openraft::error::Infallible> =
    Result<T, RPCError<NodeId, NodeAddr, RaftError<NodeId, E>>>;

impl Connection {
    async fn send<E: std::error::Error>(
        &mut self,
        req: Request,
        option: &RPCOption,
    ) -> Result<Reply, RPCError<NodeId, NodeAddr, RaftError<NodeId, E>>> {
        let entries = match &req {
            Request::AppendEntries(r) => r.entries.len(),
            _ => 0,
        };
        let frame = match req.encode(self.my_id, &self.node.directory_id) {
            Ok(f) => f,
            Err(FrameError::TooLarge(_)) if entries > 1 => {
                return Err(RPCError::PayloadTooLarge(
                    PayloadTooLarge::new_entries_hint((entries / 2) as u64),
                ))
            }
            Err(e) => return Err(NetError::from(e).into_rpc()),
        };
        if self.used.elapsed() >= IDLE_REUSE_MAX {
            // The server may have closed it: start afresh.
            self.stream = None;
        }
        let res = exchange(
            &mut self.stream,
            &self.node.addr,
            self.connect_timeout,
            option.hard_ttl(),
            &frame,
        )
        .await;
        self.used = Instant::now();
        res.map_err(NetError::into_rpc)
    }

    fn remote<E: std::error::Error>(
        &self,
        e: RaftError<NodeId, E>,
    ) -> RPCError<NodeId, NodeAddr, RaftError<NodeId, E>> {
        RPCError::RemoteError(RemoteError::new_with_node(
            self.target,
            self.node.clone(),
            e,
        ))
    }

    fn unexpected<E: std::error::Error>(
        &mut self,
        reply: &Reply,
    ) -> RPCError<NodeId, NodeAddr, RaftError<NodeId, E>> {
        // The connection answers out of step: start a new one.
        self.stream = None;
        NetError::UnexpectedReply(reply.kind()).into_rpc()
    }
}

impl RaftNetwork<MetaTypes> for Connection {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<MetaTypes>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>> {
        match self.send(Request::AppendEntries(rpc), &option).await? {
            Reply::AppendEntries(Ok(r)) => Ok(r),
            Reply::AppendEntries(Err(f)) => Err(self.remote(RaftError::Fatal(f))),
            other => Err(self.unexpected(&other)),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<MetaTypes>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<NodeId>, InstallSnapshotError> {
        match self.send(Request::InstallSnapshot(rpc), &option).await? {
            Reply::InstallSnapshot(Ok(r)) => Ok(r),
            Reply::InstallSnapshot(Err(e)) => Err(self.remote(e)),
            other => Err(self.unexpected(&other)),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> RpcResult<VoteResponse<NodeId>> {
        match self.send(Request::Vote(rpc), &option).await? {
            Reply::Vote(Ok(r)) => Ok(r),
            Reply::Vote(Err(f)) => Err(self.remote(RaftError::Fatal(f))),
            other => Err(self.unexpected(&other)),
        }
    }
}
