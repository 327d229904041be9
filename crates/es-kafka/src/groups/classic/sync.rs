//! SyncGroup for a classic group: validating the member, generation and
//! protocol, parking followers until the leader sends the assignment, and
//! answering directly once the group is Stable.

use std::collections::HashMap;

use bytes::Bytes;

use super::{ClassicGroup, ClassicState, Effect, SyncRequest, SyncResponse};
use crate::groups::error::GroupError;
use crate::groups::{Millis, Token};

impl ClassicGroup {
    /// Handles a SyncGroup. The answer comes as an [`Effect::Sync`] for
    /// `token`, now or once the leader has sent the assignment.
    pub fn sync(&mut self, now: Millis, token: Token, req: SyncRequest, out: &mut Vec<Effect>) {
        let reply = |e: GroupError, out: &mut Vec<Effect>| {
            out.push(Effect::Sync(token, SyncResponse::error(e)))
        };
        if self.state == ClassicState::Empty {
            return reply(GroupError::UnknownMemberId, out);
        }
        if self.state == ClassicState::Dead {
            return reply(GroupError::CoordinatorNotAvailable, out);
        }
        if let Err(e) = self.validate_member(&req.member_id, req.group_instance_id.as_deref()) {
            return reply(e, out);
        }
        if req.generation_id != self.generation_id {
            return reply(GroupError::IllegalGeneration, out);
        }
        if inconsistent(req.protocol_type.as_deref(), self.protocol_type.as_deref())
            || inconsistent(req.protocol_name.as_deref(), self.protocol_name.as_deref())
        {
            return reply(GroupError::InconsistentGroupProtocol, out);
        }
        match self.state {
            ClassicState::PreparingRebalance => reply(GroupError::RebalanceInProgress, out),
            ClassicState::CompletingRebalance => {
                if let Some(m) = self.members.get_mut(&req.member_id) {
                    if let Some(old) = m.awaiting_sync.replace(token) {
                        out.push(Effect::Sync(
                            old,
                            SyncResponse::error(GroupError::RebalanceInProgress),
                        ));
                    }
                }
                self.remove_pending_sync_member(&req.member_id);
                if self.is_leader(&req.member_id) {
                    tracing::info!(group = %self.group_id, generation = self.generation_id, "assignment received from the leader");
                    let mut assignment: HashMap<String, Bytes> = HashMap::new();
                    for (id, a) in req.assignments {
                        assignment.insert(id, a);
                    }
                    for m in self.members.values_mut() {
                        m.assignment = assignment.remove(&m.member_id).unwrap_or_default();
                    }
                    self.propagate_assignment(now, None, out);
                    self.transition(ClassicState::Stable);
                }
            }
            ClassicState::Stable => {
                self.remove_pending_sync_member(&req.member_id);
                let assignment = self
                    .members
                    .get(&req.member_id)
                    .map(|m| m.assignment.clone())
                    .unwrap_or_default();
                out.push(Effect::Sync(
                    token,
                    SyncResponse {
                        error: None,
                        protocol_type: self.protocol_type.clone(),
                        protocol_name: self.protocol_name.clone(),
                        assignment,
                    },
                ));
            }
            ClassicState::Empty | ClassicState::Dead => reply(GroupError::UnknownMemberId, out),
        }
    }

    fn remove_pending_sync_member(&mut self, member_id: &str) {
        self.pending_sync.remove(member_id);
        if self.pending_sync.is_empty() {
            self.sync_timer = None;
        }
    }
}

fn inconsistent(request: Option<&str>, group: Option<&str>) -> bool {
    matches!((request, group), (Some(r), Some(g)) if r != g)
}
