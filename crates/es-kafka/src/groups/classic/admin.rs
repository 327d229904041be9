//! A classic group as the admin APIs see it: the DescribeGroups view and the
//! DeleteGroups checks (only an Empty group is deleted; it is Dead while its
//! deletion runs).

use bytes::Bytes;

use super::{ClassicGroup, ClassicState, Described, DescribedMember};
use crate::groups::error::GroupError;

impl ClassicGroup {
    /// Kafka's `validateDeleteGroup`.
    pub fn validate_delete(&self) -> Result<(), GroupError> {
        match self.state {
            ClassicState::Dead => Err(GroupError::GroupIdNotFound),
            ClassicState::Empty => Ok(()),
            _ => Err(GroupError::NonEmptyGroup),
        }
    }

    /// Marks the group Dead (it is being deleted), or back to Empty when
    /// the deletion failed.
    pub fn set_dead(&mut self, dead: bool) {
        if dead {
            self.transition(ClassicState::Dead);
        } else if self.state == ClassicState::Dead {
            self.transition(ClassicState::Empty);
        }
    }

    /// The DescribeGroups view: protocol metadata and assignments only while
    /// Stable, as Kafka.
    pub fn describe(&self) -> Described {
        let stable = self.state == ClassicState::Stable;
        let protocol = self.protocol_name.as_deref();
        Described {
            state: self.state.as_str(),
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            protocol_data: if stable {
                self.protocol_name.clone().unwrap_or_default()
            } else {
                String::new()
            },
            members: self
                .members
                .values()
                .map(|m| DescribedMember {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    metadata: if stable {
                        m.metadata(protocol)
                    } else {
                        Bytes::new()
                    },
                    assignment: if stable {
                        m.assignment.clone()
                    } else {
                        Bytes::new()
                    },
                })
                .collect(),
        }
    }
}
