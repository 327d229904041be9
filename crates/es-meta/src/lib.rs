//! es-meta: the cluster metadata, replicated by one openraft group (the
//! controller quorum, as Kafka's KRaft).
//!
//! The state machine ([`image::MetaImage`]) holds what KRaft's records hold:
//! the cluster id, brokers (id, incarnation, endpoints, rack, epoch, fenced),
//! topics (id, name, partitions, replica assignment, leader, leader epoch,
//! ISR, partition epoch), topic and broker configs, producer-id blocks. Every
//! change is one Raft entry ([`records::MetaRequest`], one kind per change,
//! versioned in its tag), applied deterministically: an entry is validated
//! where it is applied, so every node reaches the same answer at the same
//! index. What an applied entry changes is handed to a [`Materializer`], which
//! writes the documented files (`topics/<t>/topic.json`, ...) so a data
//! directory keeps the layout of the storage document.
//!
//! Modules: [`records`] (the entry kinds), [`image`] (the state and its
//! apply, with the replication rules: ISR changes, elections, controlled
//! shutdown, reassignments, as KRaft's ReplicationControlManager), [`store`] (the Raft log, vote and snapshots on disk under
//! `data/meta/`), [`net`] (Raft RPCs between nodes on their own listener),
//! [`rt`] (the runtime openraft runs on, seedable for the simulation),
//! [`session`] (broker registration, heartbeats, fencing),
//! [`control`] (the requests nodes send each other besides Raft's own),
//! [`node`] (one node of the quorum, as the broker uses it), [`quotas`]
//! (client quotas: entities, Kafka's checks of an alteration, describe
//! filters).
//! It knows nothing of Kafka's wire protocol.

pub mod control;
pub mod image;
pub mod mirror;
pub mod net;
pub mod node;
pub mod quotas;
pub mod records;
pub mod rt;
pub mod session;
pub mod store;

pub use image::{MetaEvent, MetaImage};
pub use records::{MetaRequest, MetaResponse};

/// A member of the quorum as the membership records it: where its Raft
/// listener is, and the id of its data directory (random, made when the
/// directory is first used), so that a node whose directory was wiped is
/// told apart from the node the quorum knows and refused.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NodeAddr {
    pub addr: String,
    pub directory_id: String,
}

impl std::fmt::Display for NodeAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (directory {})", self.addr, self.directory_id)
    }
}

/// The node id type of the quorum (Kafka's `node.id`, never negative).
pub type NodeId = u64;

openraft::declare_raft_types!(
    /// The openraft types of the metadata group.
    pub MetaTypes:
        D = MetaRequest,
        R = MetaResponse,
        NodeId = NodeId,
        Node = NodeAddr,
        Entry = openraft::Entry<MetaTypes>,
        SnapshotData = std::io::Cursor<Vec<u8>>,
        AsyncRuntime = rt::EsRuntime,
);

/// Receives what each applied entry changed, on every node, before the
/// entry's apply returns: the broker writes topic.json and partition
/// directories here. Called on a blocking thread; an error stops the state
/// machine (openraft treats it as a storage error), because a node whose
/// files disagree with its applied state must not go on.
///
/// It must be idempotent: entries after the last snapshot are applied
/// again at every restart, and opening the store materializes the
/// snapshot's whole image once more (see `store::snapshot`).
pub trait Materializer: Send + Sync + std::fmt::Debug + 'static {
    fn materialize(&self, image: &MetaImage, events: &[MetaEvent]) -> std::io::Result<()>;
}

/// A materializer that writes nothing (tests, simulation).
#[derive(Debug, Default)]
pub struct NoFiles;

impl Materializer for NoFiles {
    fn materialize(&self, _: &MetaImage, _: &[MetaEvent]) -> std::io::Result<()> {
        Ok(())
    }
}
