//! The requests nodes send each other besides Raft's own: a write forwarded
//! to the controller leader, a broker's heartbeat, and the greeting that
//! tells a node's data-directory id. They travel on the Raft listener in
//! the same frames as Raft's RPCs (see [`crate::net`]).

use serde::{Deserialize, Serialize};

use crate::records::{BrokerId, MetaRequest, MetaResponse};
use crate::{NodeAddr, NodeId};

/// A request to another node's controller.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ControlRequest {
    /// Propose this entry; answered once it is committed and applied.
    Write { request: MetaRequest },
    /// A broker's heartbeat: it is alive, and has applied the log up to
    /// `applied_index`.
    Heartbeat {
        broker_id: BrokerId,
        broker_epoch: i64,
        applied_index: u64,
    },
    /// Who are you: the receiver's node id and data-directory id.
    Hello,
    /// A node that is not a voter asks to follow the log as a learner.
    Join { node_id: NodeId, node: NodeAddr },
    /// Make a learner a voter (KIP-853's AddRaftVoter).
    AddVoter { node_id: NodeId },
    /// The quorum as its leader sees it (Kafka's DescribeQuorum).
    DescribeQuorum,
    /// Make a voter a learner again, or remove it entirely (RemoveRaftVoter).
    RemoveVoter {
        node_id: NodeId,
        keep_as_learner: bool,
    },
    /// The index a linearizable read must wait for: the leader confirms it
    /// still leads (a round of heartbeats) and names its commit index.
    ReadIndex,
}

/// The answer to a [`ControlRequest`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ControlReply {
    /// The entry was committed at `index` and applied with this answer.
    Written { index: u64, response: MetaResponse },
    /// The receiver is not the leader; this one is, if known.
    NotLeader { leader: Option<(NodeId, NodeAddr)> },
    /// The heartbeat was taken; whether the broker is fenced now, and,
    /// after its controlled shutdown entry, whether it may exit
    /// ([`crate::MetaImage::controlled_shutdown_done`]).
    Heartbeat {
        fenced: bool,
        #[serde(default)]
        may_shut_down: bool,
    },
    /// The receiver's identity, and the quorum's members as it knows them
    /// (empty when it was never initialized).
    Hello {
        node_id: NodeId,
        directory_id: String,
        members: Vec<(NodeId, NodeAddr)>,
    },
    /// A membership change was committed.
    Done,
    /// The answer to [`ControlRequest::DescribeQuorum`].
    Quorum(QuorumState),
    /// The answer to [`ControlRequest::ReadIndex`].
    ReadIndex { index: u64 },
    /// The request failed; the message says why.
    Error { message: String },
}

/// One member of the quorum, as the leader sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaState {
    pub node_id: NodeId,
    pub node: NodeAddr,
    /// The index after the last entry the leader knows this member holds
    /// (Kafka's log end offset); None if unknown.
    pub log_end: Option<u64>,
}

/// The quorum as its leader sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuorumState {
    pub leader_id: NodeId,
    /// The Raft term (Kafka's leader epoch).
    pub term: u64,
    /// The index after the last applied entry (Kafka's high watermark).
    pub high_watermark: u64,
    pub voters: Vec<ReplicaState>,
    /// Learners (Kafka's observers).
    pub observers: Vec<ReplicaState>,
}
