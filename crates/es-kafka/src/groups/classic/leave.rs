//! LeaveGroup for a classic group: removing members by member id, pending
//! member id or (administratively) by `group.instance.id`, then rebalancing
//! whoever is left.

use super::{ClassicGroup, ClassicState, Effect, LeaveMember};
use crate::groups::error::GroupError;
use crate::groups::Millis;

impl ClassicGroup {
    /// Handles a LeaveGroup: one outcome per member, or a group-level
    /// error.
    pub fn leave(
        &mut self,
        now: Millis,
        members: &[LeaveMember],
        out: &mut Vec<Effect>,
    ) -> Result<Vec<Result<(), GroupError>>, GroupError> {
        if self.state == ClassicState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        let mut codes = Vec::with_capacity(members.len());
        let mut any = false;
        for lm in members {
            let c = if lm.member_id.is_empty() {
                // Administrative removal by group.instance.id.
                match lm
                    .group_instance_id
                    .as_ref()
                    .and_then(|iid| self.static_members.get(iid).cloned())
                {
                    Some(id) => {
                        self.remove_member(&id, out);
                        Ok(())
                    }
                    None => Err(GroupError::UnknownMemberId),
                }
            } else if self.pending_join.contains_key(&lm.member_id) {
                self.pending_join.shift_remove(&lm.member_id);
                Ok(())
            } else {
                let valid = self.validate_member(&lm.member_id, lm.group_instance_id.as_deref());
                if valid.is_ok() {
                    self.remove_member(&lm.member_id, out);
                }
                valid
            };
            if c.is_ok() {
                any = true;
                tracing::info!(group = %self.group_id, member = %lm.member_id, "member left the group");
            }
            codes.push(c);
        }
        if any {
            match self.state {
                ClassicState::Stable | ClassicState::CompletingRebalance => {
                    self.maybe_prepare_rebalance_or_complete_join(now, out)
                }
                ClassicState::PreparingRebalance => self.maybe_complete_join_phase(now, out),
                ClassicState::Empty | ClassicState::Dead => {}
            }
        }
        Ok(codes)
    }
}
