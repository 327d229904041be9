//! The member checks of offset commits and fetches in a consumer group, as
//! Kafka's `ConsumerGroup.validateOffsetCommit` and `validateOffsetFetch`:
//! the member must be known and at its current epoch.

use super::ConsumerGroup;
use crate::groups::error::GroupError;

impl ConsumerGroup {
    /// Kafka's `ConsumerGroup.validateOffsetCommit`.
    pub fn validate_offset_commit(
        &self,
        member_id: &str,
        _instance_id: Option<&str>,
        epoch: i32,
        transactional: bool,
        version: i16,
    ) -> Result<(), GroupError> {
        if epoch < 0 && self.members.is_empty() {
            return Ok(());
        }
        let Some(m) = self.members.get(member_id) else {
            return Err(GroupError::UnknownMemberId);
        };
        if !transactional && version < 9 {
            return Err(GroupError::UnsupportedVersion);
        }
        if epoch != m.member_epoch {
            return Err(GroupError::StaleMemberEpoch);
        }
        Ok(())
    }

    /// Kafka's `ConsumerGroup.validateOffsetFetch` (member id and epoch
    /// given).
    pub fn validate_offset_fetch(&self, member_id: &str, epoch: i32) -> Result<(), GroupError> {
        let Some(m) = self.members.get(member_id) else {
            return Err(GroupError::UnknownMemberId);
        };
        if epoch != m.member_epoch {
            return Err(GroupError::StaleMemberEpoch);
        }
        Ok(())
    }
}
