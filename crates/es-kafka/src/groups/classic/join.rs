//! JoinGroup for a classic group: the member limit, the member id handshake
//! (MEMBER_ID_REQUIRED and pending members), adding a new member or updating
//! a known one, and deciding whether the join starts or completes a
//! rebalance (the rebalance itself is in `rebalance.rs`).

use bytes::Bytes;

use super::{
    timeout, ClassicGroup, ClassicState, Effect, JoinRequest, JoinResponse, Member, Protocol,
};
use crate::groups::error::GroupError;
use crate::groups::{new_member_id, Millis, Token};

impl ClassicGroup {
    /// Handles a JoinGroup. The answer comes as an [`Effect::Join`] for
    /// `token`, now or when the join phase completes.
    pub fn join(&mut self, now: Millis, token: Token, req: JoinRequest, out: &mut Vec<Effect>) {
        if !self.accept_joining_member(&req.member_id) {
            // As Kafka: a member over the limit is kicked out (it may be a
            // late rejoiner of an oversized group).
            self.remove_member(&req.member_id, out);
            out.push(Effect::Join(
                token,
                JoinResponse::error(GroupError::GroupMaxSizeReached, ""),
            ));
            return;
        }
        if req.member_id.is_empty() {
            self.join_new_member(now, token, req, out);
        } else {
            self.join_existing_member(now, token, req, out);
        }
    }

    fn accept_joining_member(&self, member_id: &str) -> bool {
        let max = self.config.members_max;
        match self.state {
            ClassicState::Empty | ClassicState::Dead => true,
            ClassicState::PreparingRebalance => {
                self.members
                    .get(member_id)
                    .is_some_and(|m| m.awaiting_join.is_some())
                    || self.num_awaiting_join() + self.pending_join.len() < max
            }
            ClassicState::CompletingRebalance | ClassicState::Stable => {
                self.members.contains_key(member_id)
                    || self.members.len() + self.pending_join.len() < max
            }
        }
    }

    fn join_new_member(
        &mut self,
        now: Millis,
        token: Token,
        req: JoinRequest,
        out: &mut Vec<Effect>,
    ) {
        if self.state == ClassicState::Dead {
            out.push(Effect::Join(
                token,
                JoinResponse::error(GroupError::CoordinatorNotAvailable, ""),
            ));
            return;
        }
        if !self.supports_protocols(&req.protocol_type, &req.protocols) {
            out.push(Effect::Join(
                token,
                JoinResponse::error(GroupError::InconsistentGroupProtocol, ""),
            ));
            return;
        }
        let new_id = new_member_id(&req.client_id, req.group_instance_id.as_deref());
        if let Some(instance_id) = req.group_instance_id.clone() {
            match self.static_members.get(&instance_id).cloned() {
                Some(old_id) if self.members.contains_key(&old_id) => {
                    self.replace_static_member_and_rejoin(now, token, req, &old_id, new_id, out)
                }
                _ => self.add_member_then_rebalance(now, token, req, new_id, out),
            }
        } else if req.requires_known_member_id {
            let expires = now.saturating_add(timeout(req.session_timeout_ms));
            self.pending_join.insert(new_id.clone(), expires);
            out.push(Effect::Join(
                token,
                JoinResponse::error(GroupError::MemberIdRequired, &new_id),
            ));
        } else {
            self.add_member_then_rebalance(now, token, req, new_id, out);
        }
    }

    fn join_existing_member(
        &mut self,
        now: Millis,
        token: Token,
        req: JoinRequest,
        out: &mut Vec<Effect>,
    ) {
        let member_id = req.member_id.clone();
        if self.state == ClassicState::Dead {
            out.push(Effect::Join(
                token,
                JoinResponse::error(GroupError::CoordinatorNotAvailable, &member_id),
            ));
            return;
        }
        if !self.supports_protocols(&req.protocol_type, &req.protocols) {
            out.push(Effect::Join(
                token,
                JoinResponse::error(GroupError::InconsistentGroupProtocol, &member_id),
            ));
            return;
        }
        if self.pending_join.contains_key(&member_id) && req.group_instance_id.is_none() {
            self.add_member_then_rebalance(now, token, req, member_id, out);
            return;
        }
        if let Err(e) = self.validate_member(&member_id, req.group_instance_id.as_deref()) {
            out.push(Effect::Join(token, JoinResponse::error(e, &member_id)));
            return;
        }
        let (matches, is_leader) = match self.members.get(&member_id) {
            Some(m) => (m.matches(&req.protocols), self.is_leader(&member_id)),
            None => (false, false),
        };
        match self.state {
            ClassicState::PreparingRebalance => {
                self.update_member_then_rebalance(now, token, req, out);
            }
            ClassicState::CompletingRebalance => {
                if matches {
                    // The member lost its JoinGroup response: resend it.
                    let members = if is_leader {
                        self.current_members()
                    } else {
                        Vec::new()
                    };
                    let r = self.join_response(&member_id, members, false);
                    out.push(Effect::Join(token, r));
                } else {
                    self.update_member_then_rebalance(now, token, req, out);
                }
            }
            ClassicState::Stable => {
                if is_leader || !matches {
                    // The leader rejoining forces a rebalance (that is how a
                    // consumer reacts to metadata changes); so does any
                    // change of a member's protocols.
                    self.update_member_then_rebalance(now, token, req, out);
                } else {
                    let r = self.join_response(&member_id, Vec::new(), false);
                    out.push(Effect::Join(token, r));
                }
            }
            ClassicState::Empty | ClassicState::Dead => {
                out.push(Effect::Join(
                    token,
                    JoinResponse::error(GroupError::UnknownMemberId, &member_id),
                ));
            }
        }
    }

    fn add_member_then_rebalance(
        &mut self,
        now: Millis,
        token: Token,
        req: JoinRequest,
        member_id: String,
        out: &mut Vec<Effect>,
    ) {
        if self.state == ClassicState::PreparingRebalance
            && self.previous_state == ClassicState::Empty
        {
            self.new_member_added = true;
        }
        let member = Member {
            member_id: member_id.clone(),
            group_instance_id: req.group_instance_id,
            client_id: req.client_id,
            client_host: req.client_host,
            rebalance_timeout_ms: req.rebalance_timeout_ms,
            session_timeout_ms: req.session_timeout_ms,
            protocol_type: req.protocol_type,
            protocols: req.protocols,
            assignment: Bytes::new(),
            awaiting_join: Some(token),
            awaiting_sync: None,
            is_new: true,
            // A parked new member cannot heartbeat; its join is bounded by
            // the new-member join timeout instead.
            heartbeat_deadline: Some(now.saturating_add(self.config.new_member_join_timeout_ms)),
        };
        self.add(member);
        self.maybe_prepare_rebalance_or_complete_join(now, out);
    }
    fn update_member_then_rebalance(
        &mut self,
        now: Millis,
        token: Token,
        req: JoinRequest,
        out: &mut Vec<Effect>,
    ) {
        self.update_member(
            &req.member_id,
            req.protocols,
            req.rebalance_timeout_ms,
            req.session_timeout_ms,
            token,
            out,
        );
        self.maybe_prepare_rebalance_or_complete_join(now, out);
    }
    /// Whether a member with this protocol type and these protocols can join:
    /// an Empty group takes any non-empty set; otherwise the type must match
    /// and one protocol must be supported by every current member.
    fn supports_protocols(&self, protocol_type: &str, protocols: &[Protocol]) -> bool {
        if self.state == ClassicState::Empty {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        if self.protocol_type.as_deref() != Some(protocol_type) {
            return false;
        }
        let n = self.members.len();
        protocols.iter().any(|p| {
            self.members
                .values()
                .filter(|m| m.protocols.iter().any(|q| q.name == p.name))
                .count()
                == n
        })
    }
}
