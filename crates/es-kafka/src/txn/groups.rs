//! The group coordinator as the transaction coordinator's offset sink: how
//! TxnOffsetCommit's member checks run and how a committed transaction's
//! offsets reach the group, through the group coordinator's public API
//! (`Coordinator::commit`, an OffsetCommit as the group sees it).
//!
//! - Member check: an OffsetCommit with no offsets runs the group's own
//!   commit checks (unknown group with a generation, unknown member, stale
//!   generation, fenced instance) and changes nothing; a missing group with
//!   generation -1 becomes a "simple" group, as Kafka's
//!   `validateTransactionalOffsetCommit` does.
//! - Commit: when the transaction commits, the offsets are committed in the
//!   name of the member that sent them and the call waits until the group's
//!   document is on disk. Kafka materialises transactional offsets whatever
//!   the group became in between; es's group coordinator has no such entry
//!   point yet, so if the member is gone by then (a rebalance between
//!   TxnOffsetCommit and EndTxn) the offsets are committed as a simple commit
//!   when the group is empty, and otherwise dropped with an error log: the
//!   consumer then re-reads from its previous offset (at-least-once for that
//!   window, never loss). A transient failure (coordinator shutting down, a
//!   failed write) is returned, and the transaction's completion is retried.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Wake, Waker};

use uuid::Uuid;

use super::coordinator::TxnOffsetSink;
use super::state::TxnOffset;
use crate::broker::Broker;
use crate::errors::{code, ResponseError};
use crate::groups::coordinator::{CommitPartition, CommitRequest, CommitTopic};
use crate::groups::Coordinator;

/// The OffsetCommit version whose error codes TxnOffsetCommit shares
/// (ILLEGAL_GENERATION, not GROUP_ID_NOT_FOUND, for a missing group).
const COMMIT_VERSION: i16 = 8;

/// Adapts [`Coordinator`] to [`TxnOffsetSink`].
#[derive(Debug)]
pub struct GroupsSink {
    groups: Arc<Coordinator>,
    broker: Weak<Broker>,
}

impl GroupsSink {
    pub fn new(groups: Arc<Coordinator>, broker: Weak<Broker>) -> Self {
        GroupsSink { groups, broker }
    }

    fn topic_id(&self, topic: &str) -> Uuid {
        self.broker
            .upgrade()
            .and_then(|b| b.topic(topic))
            .map_or_else(Uuid::nil, |t| t.id)
    }

    fn commit_as(
        &self,
        group: &str,
        member: (&str, Option<&str>, i32),
        offsets: &[&TxnOffset],
    ) -> Result<(), i16> {
        let mut topics: BTreeMap<&str, Vec<CommitPartition>> = BTreeMap::new();
        for o in offsets {
            topics
                .entry(o.topic.as_str())
                .or_default()
                .push(CommitPartition {
                    partition: o.partition,
                    offset: o.offset,
                    leader_epoch: o.leader_epoch,
                    metadata: o.metadata.clone(),
                });
        }
        let req = CommitRequest {
            group_id: group.to_string(),
            generation_id_or_member_epoch: member.2,
            member_id: member.0.to_string(),
            group_instance_id: member.1.map(str::to_string),
            version: COMMIT_VERSION,
            topics: topics
                .into_iter()
                .map(|(name, partitions)| CommitTopic {
                    name: name.to_string(),
                    topic_id: self.topic_id(name),
                    partitions,
                })
                .collect(),
        };
        if tokio::runtime::Handle::try_current().is_err() {
            // The group's writer runs on the runtime; without one nothing
            // would ever make the offsets durable.
            return Err(code(ResponseError::CoordinatorNotAvailable));
        }
        let outcome = self.groups.commit(req)?;
        match outcome.wait {
            Some(wait) => block_on(wait.wait()),
            None => Ok(()),
        }
    }
}

/// Member errors: the committer is no longer what the group knows.
fn is_member_error(e: i16) -> bool {
    [
        ResponseError::IllegalGeneration,
        ResponseError::UnknownMemberId,
        ResponseError::FencedInstanceId,
        ResponseError::RebalanceInProgress,
        ResponseError::StaleMemberEpoch,
        ResponseError::GroupIdNotFound,
    ]
    .into_iter()
    .any(|r| code(r) == e)
}

impl TxnOffsetSink for GroupsSink {
    fn validate_member(
        &self,
        group: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
    ) -> Result<(), i16> {
        self.commit_as(group, (member_id, instance_id, generation_id), &[])
    }

    fn commit_offsets(&self, group: &str, offsets: &[TxnOffset]) -> Result<(), i16> {
        // Offsets of one transaction normally come from one member.
        let mut by_member: BTreeMap<(&str, Option<&str>, i32), Vec<&TxnOffset>> = BTreeMap::new();
        for o in offsets {
            by_member
                .entry((
                    o.member_id.as_str(),
                    o.instance_id.as_deref(),
                    o.generation_id,
                ))
                .or_default()
                .push(o);
        }
        for (member, list) in by_member {
            match self.commit_as(group, member, &list) {
                Ok(()) => {}
                Err(e) if is_member_error(e) => {
                    match self.commit_as(group, ("", None, -1), &list) {
                        Ok(()) => {}
                        Err(e2) if is_member_error(e2) => tracing::error!(
                            group,
                            member = member.0,
                            error = e,
                            "transactional offsets dropped: their member left the group before the commit"
                        ),
                        Err(e2) => return Err(e2),
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// Runs a future to completion on this (blocking) thread. The futures here
/// only wait on tokio channels, which need no reactor.
fn block_on<F: Future>(f: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        match f.as_mut().poll(&mut cx) {
            Poll::Ready(v) => return v,
            Poll::Pending => std::thread::park(),
        }
    }
}
