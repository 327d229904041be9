//! Static membership (KIP-345) of a classic group: the check that a
//! `group.instance.id` maps to the member id that uses it (FENCED_INSTANCE_ID
//! otherwise), and the replacement of a known static member that rejoins with
//! an unknown member id, which fences the old id and, when the selected
//! protocol does not change, hands back the current generation without a
//! rebalance.

use super::{timeout, ClassicGroup, ClassicState, Effect, JoinRequest, JoinResponse, SyncResponse};
use crate::groups::error::GroupError;
use crate::groups::{Millis, Token};

impl ClassicGroup {
    /// KIP-345: a known static member came back with an unknown member id.
    pub(super) fn replace_static_member_and_rejoin(
        &mut self,
        now: Millis,
        token: Token,
        req: JoinRequest,
        old_id: &str,
        new_id: String,
        out: &mut Vec<Effect>,
    ) {
        let Some(instance_id) = req.group_instance_id.clone() else {
            return;
        };
        let current_leader = self.leader_id.clone();
        let Some(index) = self.members.get_index_of(old_id) else {
            return;
        };
        let Some((_, mut m)) = self.members.shift_remove_index(index) else {
            return;
        };
        // Fence whatever the old incarnation had parked.
        if let Some(t) = m.awaiting_join.take() {
            let mut r = JoinResponse::error(GroupError::FencedInstanceId, old_id);
            r.generation_id = -1;
            out.push(Effect::Join(t, r));
        }
        if let Some(t) = m.awaiting_sync.take() {
            out.push(Effect::Sync(
                t,
                SyncResponse::error(GroupError::FencedInstanceId),
            ));
        }
        // Same place in the member order, new id, same assignment.
        m.member_id = new_id.clone();
        m.is_new = false;
        m.heartbeat_deadline = Some(now.saturating_add(timeout(m.session_timeout_ms)));
        self.members.shift_insert(index, new_id.clone(), m);
        if self.is_leader(old_id) {
            self.leader_id = Some(new_id.clone());
        }
        self.pending_sync.remove(old_id);
        self.static_members.insert(instance_id, new_id.clone());

        self.update_member(
            &new_id,
            req.protocols,
            req.rebalance_timeout_ms,
            req.session_timeout_ms,
            token,
            out,
        );
        match self.state {
            ClassicState::Stable => {
                let selected = self.select_protocol();
                if selected.is_some() && selected == self.protocol_name {
                    // No rebalance: hand back the current generation.
                    let is_leader = self.is_leader(&new_id);
                    let r = if req.supports_skip_assignment {
                        let members = if is_leader {
                            self.current_members()
                        } else {
                            Vec::new()
                        };
                        self.join_response(&new_id, members, is_leader)
                    } else {
                        let mut r = self.join_response(&new_id, Vec::new(), false);
                        // Before v9 the leader is told it is a follower, so it
                        // fetches its assignment with SyncGroup.
                        r.leader = current_leader.unwrap_or_default();
                        r
                    };
                    if let Some(m) = self.members.get_mut(&new_id) {
                        m.awaiting_join = None;
                    }
                    out.push(Effect::Join(token, r));
                } else {
                    self.maybe_prepare_rebalance_or_complete_join(now, out);
                }
            }
            ClassicState::CompletingRebalance => {
                // The leader may already be assigning with the old member id.
                self.prepare_rebalance(now, out);
            }
            ClassicState::PreparingRebalance => self.maybe_complete_join_phase(now, out),
            ClassicState::Empty | ClassicState::Dead => {
                self.maybe_prepare_rebalance_or_complete_join(now, out)
            }
        }
    }

    /// Kafka's `validateMember`: a static instance id must map to this member
    /// id (FENCED_INSTANCE_ID otherwise), and the member must exist.
    pub(super) fn validate_member(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<(), GroupError> {
        if let Some(iid) = instance_id {
            match self.static_members.get(iid) {
                None => return Err(GroupError::UnknownMemberId),
                Some(known) if known != member_id => {
                    tracing::info!(group = %self.group_id, member_id, instance_id = iid, current = %known, "fenced static member");
                    return Err(GroupError::FencedInstanceId);
                }
                Some(_) => {}
            }
        }
        if !self.members.contains_key(member_id) {
            return Err(GroupError::UnknownMemberId);
        }
        Ok(())
    }
}
