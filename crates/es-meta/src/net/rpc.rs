//! The messages of the Raft listener: one request kind per openraft RPC plus
//! the control requests, each sent in an [`Envelope`] naming the sender and
//! the data directory it expects the receiver to have, and their replies.
//! This module owns the mapping between messages and frame kinds and their
//! JSON payloads; the frame itself is [`super::frame`]'s.
//!
//! Errors in replies: openraft's `RaftError<u64>` (vote, append-entries) has
//! no API error, so only its [`Fatal`] part travels; install-snapshot replies
//! carry the whole `RaftError<u64, InstallSnapshotError>`. Both are
//! openraft's own serde forms.

use openraft::error::{Fatal, InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::MessageSummary;
use serde::{Deserialize, Serialize};

use super::frame::{decode, encode, FrameError, Kind};
use crate::control::{ControlReply, ControlRequest};
use crate::{MetaTypes, NodeId};

/// How every request travels: the sender's node id, the data-directory id
/// the sender expects the receiver to have (`""`: not known yet, accepted),
/// and the request itself.
#[derive(Debug, Serialize, Deserialize)]
pub struct Envelope<T> {
    pub from: NodeId,
    pub directory_id: String,
    pub body: T,
}

/// A request to another node.
pub enum Request {
    Vote(VoteRequest<NodeId>),
    AppendEntries(AppendEntriesRequest<MetaTypes>),
    InstallSnapshot(InstallSnapshotRequest<MetaTypes>),
    Control(ControlRequest),
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Request::Vote(r) => write!(f, "Vote({})", r.summary()),
            Request::AppendEntries(r) => write!(f, "AppendEntries({})", r.summary()),
            Request::InstallSnapshot(r) => write!(f, "InstallSnapshot({r})"),
            Request::Control(r) => write!(f, "Control({r:?})"),
        }
    }
}

impl Request {
    /// The frame kind this request travels in.
    pub fn kind(&self) -> Kind {
        match self {
            Request::Vote(_) => Kind::Vote,
            Request::AppendEntries(_) => Kind::AppendEntries,
            Request::InstallSnapshot(_) => Kind::InstallSnapshot,
            Request::Control(_) => Kind::Control,
        }
    }

    /// The whole frame of this request from `from`, expecting the receiver's
    /// directory to be `directory_id`.
    pub fn encode(&self, from: NodeId, directory_id: &str) -> Result<Vec<u8>, FrameError> {
        fn env<'a, T>(from: NodeId, directory_id: &str, body: &'a T) -> Envelope<&'a T> {
            Envelope {
                from,
                directory_id: directory_id.to_string(),
                body,
            }
        }
        let kind = self.kind();
        match self {
            Request::Vote(r) => encode(kind, &env(from, directory_id, r)),
            Request::AppendEntries(r) => encode(kind, &env(from, directory_id, r)),
            Request::InstallSnapshot(r) => encode(kind, &env(from, directory_id, r)),
            Request::Control(r) => encode(kind, &env(from, directory_id, r)),
        }
    }

    /// Decodes a request frame's payload; a reply kind is refused.
    pub fn decode(kind: Kind, payload: &[u8]) -> Result<Envelope<Request>, FrameError> {
        fn open<T: serde::de::DeserializeOwned>(
            kind: Kind,
            payload: &[u8],
            wrap: fn(T) -> Request,
        ) -> Result<Envelope<Request>, FrameError> {
            let e: Envelope<T> = decode(kind, payload)?;
            Ok(Envelope {
                from: e.from,
                directory_id: e.directory_id,
                body: wrap(e.body),
            })
        }
        match kind {
            Kind::Vote => open(kind, payload, Request::Vote),
            Kind::AppendEntries => open(kind, payload, Request::AppendEntries),
            Kind::InstallSnapshot => open(kind, payload, Request::InstallSnapshot),
            Kind::Control => open(kind, payload, Request::Control),
            other => Err(FrameError::UnexpectedKind(other)),
        }
    }
}

/// Why a request was refused before it was handled.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Refusal {
    /// The receiver's data directory is not the one the sender expected: the
    /// receiver was wiped (or is another node at that address).
    WrongDirectory {
        node_id: NodeId,
        directory_id: String,
    },
}

/// The answer to a [`Request`].
#[derive(Debug)]
pub enum Reply {
    Vote(Result<VoteResponse<NodeId>, Fatal<NodeId>>),
    AppendEntries(Result<AppendEntriesResponse<NodeId>, Fatal<NodeId>>),
    InstallSnapshot(
        Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>,
    ),
    Control(ControlReply),
    Refused(Refusal),
}

/// The fatal part of an error that has no API error.
pub fn fatal_of(e: RaftError<NodeId>) -> Fatal<NodeId> {
    match e {
        RaftError::APIError(never) => match never {},
        RaftError::Fatal(f) => f,
    }
}

impl Reply {
    /// The frame kind this reply travels in.
    pub fn kind(&self) -> Kind {
        match self {
            Reply::Vote(_) => Kind::VoteReply,
            Reply::AppendEntries(_) => Kind::AppendEntriesReply,
            Reply::InstallSnapshot(_) => Kind::InstallSnapshotReply,
            Reply::Control(_) => Kind::ControlReply,
            Reply::Refused(_) => Kind::Refused,
        }
    }

    /// The whole frame of this reply.
    pub fn encode(&self) -> Result<Vec<u8>, FrameError> {
        let kind = self.kind();
        match self {
            Reply::Vote(r) => encode(kind, r),
            Reply::AppendEntries(r) => encode(kind, r),
            Reply::InstallSnapshot(r) => encode(kind, r),
            Reply::Control(r) => encode(kind, r),
            Reply::Refused(r) => encode(kind, r),
        }
    }

    /// Decodes a reply frame's payload; a request kind is refused.
    pub fn decode(kind: Kind, payload: &[u8]) -> Result<Reply, FrameError> {
        Ok(match kind {
            Kind::VoteReply => Reply::Vote(decode(kind, payload)?),
            Kind::AppendEntriesReply => Reply::AppendEntries(decode(kind, payload)?),
            Kind::InstallSnapshotReply => Reply::InstallSnapshot(decode(kind, payload)?),
            Kind::ControlReply => Reply::Control(decode(kind, payload)?),
            Kind::Refused => Reply::Refused(decode(kind, payload)?),
            other => return Err(FrameError::UnexpectedKind(other)),
        })
    }
}
