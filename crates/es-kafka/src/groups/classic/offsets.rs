//! What offset commits and deletions ask of a classic group: Kafka's
//! `validateOffsetCommit` and `validateOffsetDelete`, the session a commit
//! keeps alive, and the topics the members subscribe to (which OffsetDelete
//! must not touch).

use std::collections::HashSet;

use super::{ClassicGroup, ClassicState};
use crate::groups::error::GroupError;
use crate::groups::{Millis, CONSUMER_PROTOCOL_TYPE};

impl ClassicGroup {
    /// Kafka's `ClassicGroup.validateOffsetCommit` (non-transactional).
    pub fn validate_offset_commit(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
    ) -> Result<(), GroupError> {
        if self.state == ClassicState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        if generation_id < 0 && self.state == ClassicState::Empty {
            // Admin clients and consumers without group management.
            return Ok(());
        }
        if generation_id >= 0 || !member_id.is_empty() || instance_id.is_some() {
            self.validate_member(member_id, instance_id)?;
            if generation_id != self.generation_id {
                return Err(GroupError::IllegalGeneration);
            }
        } else if self.state != ClassicState::Empty {
            return Err(GroupError::UnknownMemberId);
        }
        if self.state == ClassicState::CompletingRebalance {
            return Err(GroupError::RebalanceInProgress);
        }
        Ok(())
    }

    /// After an accepted commit: a commit keeps a member's session alive
    /// while the group is Stable or PreparingRebalance.
    pub fn on_offset_commit(&mut self, now: Millis, member_id: &str) {
        if matches!(
            self.state,
            ClassicState::Stable | ClassicState::PreparingRebalance
        ) {
            self.reschedule_heartbeat(now, member_id);
        }
    }

    /// Kafka's `validateOffsetDelete`.
    pub fn validate_offset_delete(&self) -> Result<(), GroupError> {
        match self.state {
            ClassicState::Dead => Err(GroupError::GroupIdNotFound),
            ClassicState::Stable
            | ClassicState::PreparingRebalance
            | ClassicState::CompletingRebalance
                if !self.uses_consumer_protocol() =>
            {
                Err(GroupError::NonEmptyGroup)
            }
            _ => Ok(()),
        }
    }

    fn uses_consumer_protocol(&self) -> bool {
        self.protocol_type.as_deref() == Some(CONSUMER_PROTOCOL_TYPE)
    }

    /// The topics the members subscribe to, when the group uses the consumer
    /// protocol and every subscription parses (Kafka's
    /// `computeSubscribedTopics`).
    pub fn subscribed_topics(&self) -> Option<HashSet<String>> {
        if !self.uses_consumer_protocol() {
            return None;
        }
        if self.members.is_empty() {
            return Some(HashSet::new());
        }
        let protocol = self.protocol_name.as_deref()?;
        let mut all = HashSet::new();
        for m in self.members.values() {
            let topics = crate::groups::consumer::subscription_topics(&m.metadata(Some(protocol)))?;
            all.extend(topics);
        }
        Some(all)
    }

    /// Whether OffsetDelete must refuse `topic` (GROUP_SUBSCRIBED_TO_TOPIC).
    pub fn is_subscribed_to_topic(&self, topic: &str) -> bool {
        match self.subscribed_topics() {
            Some(t) => t.contains(topic),
            None => self.uses_consumer_protocol(),
        }
    }
}
