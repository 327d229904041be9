//! The group coordinator as the transaction coordinator's offset sink: how
//! TxnOffsetCommit's member checks run and how a committed transaction's
//! offsets reach the group, through the group coordinator's public API
//! (`Coordinator::commit` for the checks, `Coordinator::commit_transactional`
//! for the commit).
//!
//! - Member check: an OffsetCommit with no offsets runs the group's own
//!   commit checks (unknown group with a generation, unknown member, stale
//!   generation, fenced instance) and changes nothing; a missing group with
//!   generation -1 becomes a "simple" group, as Kafka's
//!   `validateTransactionalOffsetCommit` does.
//! - Commit: when the transaction commits, the offsets are written with
//!   `Coordinator::commit_transactional` (no member checks: Kafka
//!   materialises transactional offsets whatever the group became since the
//!   TxnOffsetCommit) and the call waits until the group's document is on
//!   disk. A failure (coordinator shutting down, a failed write) is
//!   returned, and the transaction's completion is retried.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Wake, Waker};

use uuid::Uuid;

use super::coordinator::TxnOffsetSink;
use super::error::TxnError;
use super::state::TxnOffset;
use crate::groups::coordinator::{CommitPartition, CommitRequest, CommitTopic};
use crate::groups::Coordinator;

/// The OffsetCommit version whose error codes TxnOffsetCommit shares
/// (ILLEGAL_GENERATION, not GROUP_ID_NOT_FOUND, for a missing group).
const COMMIT_VERSION: i16 = 8;

/// Where the sink looks up the ids of the topics whose offsets it commits
/// (the broker's topic registry).
pub trait TopicIds: Send + Sync {
    /// The id of topic `name`, if it exists.
    fn topic_id(&self, name: &str) -> Option<Uuid>;
}

/// Adapts [`Coordinator`] to [`TxnOffsetSink`].
#[derive(Debug)]
pub struct GroupsSink {
    groups: Arc<Coordinator>,
    topics: Weak<dyn TopicIds>,
}

impl GroupsSink {
    pub fn new(groups: Arc<Coordinator>, topics: Weak<dyn TopicIds>) -> Self {
        GroupsSink { groups, topics }
    }

    fn topic_id(&self, topic: &str) -> Uuid {
        self.topics
            .upgrade()
            .and_then(|t| t.topic_id(topic))
            .unwrap_or_else(Uuid::nil)
    }

    /// Groups offsets by topic as the group coordinator takes them.
    fn topics(&self, offsets: &[TxnOffset]) -> Vec<CommitTopic> {
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
        topics
            .into_iter()
            .map(|(name, partitions)| CommitTopic {
                name: name.to_string(),
                topic_id: self.topic_id(name),
                partitions,
            })
            .collect()
    }
}

/// The group's writer runs on the runtime; without one nothing would ever
/// make the offsets durable.
fn runtime_present() -> Result<(), TxnError> {
    tokio::runtime::Handle::try_current()
        .map(|_| ())
        .map_err(|_| TxnError::CoordinatorNotAvailable)
}

impl TxnOffsetSink for GroupsSink {
    fn validate_member(
        &self,
        group: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
    ) -> Result<(), TxnError> {
        runtime_present()?;
        // An OffsetCommit without offsets: the group's checks, no change.
        let req = CommitRequest {
            group_id: group.to_string(),
            generation_id_or_member_epoch: generation_id,
            member_id: member_id.to_string(),
            group_instance_id: instance_id.map(str::to_string),
            version: COMMIT_VERSION,
            transactional: true,
            topics: Vec::new(),
        };
        self.groups.commit(req)?;
        Ok(())
    }

    fn commit_offsets(&self, group: &str, offsets: &[TxnOffset]) -> Result<(), TxnError> {
        runtime_present()?;
        match self
            .groups
            .commit_transactional(group, self.topics(offsets))?
        {
            Some(wait) => Ok(block_on(wait.wait())?),
            None => Ok(()),
        }
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
