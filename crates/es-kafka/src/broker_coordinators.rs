//! Which broker coordinates a group or a transactional id, and the topic
//! that places transactional ids (`__transaction_state`; the one that
//! places groups, `__consumer_offsets`, is [`Broker::offsets_topic`]).
//!
//! Kafka places a group on partition `abs(hash(group)) % n` of
//! `__consumer_offsets` and a transactional id on a partition of
//! `__transaction_state`; the leader of that partition coordinates the key
//! ([`Broker::coordinator_place`]). FindCoordinator answers with that
//! leader, and every API that names a group or a transactional id asks
//! [`Broker::owns_group`] or [`Broker::owns_transactional_id`] before its
//! coordinator acts: a key placed on another broker answers NOT_COORDINATOR
//! (the client looks its coordinator up again and retries there), a key
//! whose partition has no leader COORDINATOR_NOT_AVAILABLE. These two are
//! the one place the decision is made; each handler only puts the error
//! where its response carries it, as Kafka's do.
//!
//! Before the placing topic exists (no client has looked a coordinator up
//! yet): a broker that is the whole cluster coordinates every key, as a
//! single es always has; in a cluster the key answers NOT_COORDINATOR,
//! Kafka's answer while a broker owns no partition of the topic, and the
//! client's FindCoordinator then creates the topic.
//!
//! An empty key is never refused here: the coordinators refuse it
//! themselves (INVALID_GROUP_ID, INVALID_REQUEST), as Kafka checks it
//! before it looks at placement.

use std::sync::Arc;

use super::{AdminError, Broker, CoordinatorPlace};
use crate::groups::error::GroupError;
use crate::topics::{self, Topic};

/// Why this broker does not serve a group or transactional id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotHere {
    /// Another broker coordinates the key (or, in a cluster, its placing
    /// topic does not exist yet): NOT_COORDINATOR.
    NotCoordinator,
    /// The key's partition has no leader now: COORDINATOR_NOT_AVAILABLE.
    Unavailable,
}

impl NotHere {
    /// The Kafka error code (through [`GroupError`], whose codes live with
    /// the other error mappings in `crate::errors`).
    pub fn code(self) -> i16 {
        GroupError::from(self).code()
    }

    /// Kafka's message for the error, for the responses that carry one
    /// (ConsumerGroupHeartbeat: the exception's default message).
    pub fn message(self) -> &'static str {
        match self {
            NotHere::NotCoordinator => "This is not the correct coordinator.",
            NotHere::Unavailable => "The coordinator is not available.",
        }
    }
}

impl From<NotHere> for GroupError {
    fn from(n: NotHere) -> GroupError {
        match n {
            NotHere::NotCoordinator => GroupError::NotCoordinator,
            NotHere::Unavailable => GroupError::CoordinatorNotAvailable,
        }
    }
}

impl Broker {
    /// Returns `__transaction_state`, creating it first if it does not
    /// exist, as Kafka creates it when a client first looks up a
    /// transaction coordinator (whatever `--auto-create-topics` says):
    /// `--transaction-state-log-num-partitions` partitions with Kafka's
    /// configs for it. Concurrent callers get the same topic.
    pub async fn transaction_state_topic(&self) -> Result<Arc<Topic>, AdminError> {
        self.get_or_create_with(
            topics::TRANSACTION_STATE_TOPIC,
            self.config.transaction_state_partitions,
            topics::transaction_state_overrides(),
        )
        .await
    }

    /// The replication factor [`Broker::get_or_create_with`] gives topic
    /// `name` (-1: the default). The internal topics get Kafka's
    /// `transaction.state.log.replication.factor` and
    /// `offsets.topic.replication.factor`, 3, capped at the brokers there
    /// are: the coordinators' state lives in the metadata log and moves
    /// with their partitions' leadership (docs/replication.md, "What fails
    /// over with a partition").
    pub(super) fn internal_replication_factor(&self, name: &str) -> i16 {
        if topics::is_internal(name) {
            let active = self.image().map_or(1, |i| i.active().count());
            i16::try_from(active)
                .unwrap_or(i16::MAX)
                .clamp(1, crate::config::TRANSACTION_STATE_REPLICATION_FACTOR)
        } else {
            -1
        }
    }

    /// The `__consumer_offsets` partition of `group_id`, as Kafka's group
    /// coordinator picks it ([`super::key_partition`]) over the topic's
    /// real partition count (the configured count before it exists).
    pub fn offsets_partition(&self, group_id: &str) -> i32 {
        let count = self
            .topic(topics::CONSUMER_OFFSETS_TOPIC)
            .map_or(self.config.offsets_topic_partitions, |t| {
                t.partition_count()
            });
        super::key_partition(group_id, count)
    }

    /// Whether this broker coordinates `group_id` (see the module comment).
    pub fn owns_group(&self, group_id: &str) -> Result<(), NotHere> {
        self.owns(topics::CONSUMER_OFFSETS_TOPIC, group_id)
    }

    /// Whether this broker coordinates `transactional_id`.
    pub fn owns_transactional_id(&self, transactional_id: &str) -> Result<(), NotHere> {
        self.owns(topics::TRANSACTION_STATE_TOPIC, transactional_id)
    }

    fn owns(&self, topic: &str, key: &str) -> Result<(), NotHere> {
        if key.is_empty() {
            return Ok(());
        }
        match self.coordinator_place(topic, key) {
            Some(CoordinatorPlace::Here) => Ok(()),
            Some(CoordinatorPlace::Elsewhere(_)) => Err(NotHere::NotCoordinator),
            Some(CoordinatorPlace::Unavailable) => Err(NotHere::Unavailable),
            None if self.alone() => Ok(()),
            None => Err(NotHere::NotCoordinator),
        }
    }

    /// Whether this broker is the whole cluster: no quorum started, or no
    /// other broker registered.
    fn alone(&self) -> bool {
        let me = self.node_id();
        self.image()
            .is_none_or(|img| img.brokers.keys().all(|id| *id == me))
    }
}

#[cfg(test)]
mod tests {
    use super::NotHere;
    use crate::broker::key_partition;
    use crate::errors::{code, ResponseError};

    #[test]
    fn groups_map_to_kafkas_offsets_partitions() {
        // Kafka 4.4 with 50 partitions puts these groups on these partitions.
        assert_eq!(key_partition("diff-group-txn", 50), 36);
        assert_eq!(key_partition("", 50), 0);
        assert_eq!(key_partition("diff-group-txn", 1), 0);
    }

    #[test]
    fn refusals_are_kafkas_codes() {
        assert_eq!(
            NotHere::NotCoordinator.code(),
            code(ResponseError::NotCoordinator)
        );
        assert_eq!(
            NotHere::Unavailable.code(),
            code(ResponseError::CoordinatorNotAvailable)
        );
    }
}

#[cfg(test)]
#[path = "broker_coordinators_tests.rs"]
mod wire_tests;
