//! Members going away: a heartbeat leaving the group (epoch -1,
//! `shareGroupLeave`), and fencing when a session expires
//! (`share.session.timeout.ms`, restarted by every heartbeat). Either
//! removes the member and its target and bumps the group epoch; the records
//! it holds are released by its share sessions, not here.

use std::collections::BTreeSet;

use super::{ShareGroup, ShareHeartbeatRequest, ShareHeartbeatResponse, LEAVE_GROUP_MEMBER_EPOCH};
use crate::groups::error::GroupError;
use crate::groups::Millis;

impl ShareGroup {
    pub(super) fn leave(&mut self, req: &ShareHeartbeatRequest) -> ShareHeartbeatResponse {
        if !self.members.contains_key(&req.member_id) {
            return ShareHeartbeatResponse::error(GroupError::NotAMember {
                member_id: req.member_id.clone(),
                group_id: self.group_id.clone(),
            });
        }
        tracing::info!(group = %self.group_id, member = %req.member_id, "member left the share group");
        self.fence(&req.member_id);
        ShareHeartbeatResponse {
            error: None,
            member_id: Some(req.member_id.clone()),
            member_epoch: LEAVE_GROUP_MEMBER_EPOCH,
            heartbeat_interval_ms: 0,
            assignment: None,
        }
    }

    /// Removes a member and its target and bumps the group epoch; topics
    /// no remaining member subscribes to leave the subscription metadata
    /// with it (Kafka writes both in one go, so the next heartbeat does not
    /// bump again).
    fn fence(&mut self, member_id: &str) {
        if self.members.remove(member_id).is_none() {
            return;
        }
        self.targets.remove(member_id);
        let subscribed: BTreeSet<&str> = self
            .members
            .values()
            .flat_map(|m| m.subscribed.iter().map(String::as_str))
            .collect();
        self.subscription_metadata
            .retain(|name, _| subscribed.contains(name.as_str()));
        self.group_epoch = self.group_epoch.saturating_add(1);
    }

    /// The earliest session deadline, when the coordinator must tick.
    pub fn next_deadline(&self) -> Option<Millis> {
        self.members.values().map(|m| m.session_deadline).min()
    }

    /// Fences the members whose session expired at `now`; returns their
    /// ids (for the shell: their share sessions may be closed).
    pub fn tick(&mut self, now: Millis) -> Vec<String> {
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| m.session_deadline <= now)
            .map(|m| m.member_id.clone())
            .collect();
        for id in &expired {
            tracing::info!(group = %self.group_id, member = %id, "fencing share group member: the member session expired");
            self.fence(id);
        }
        expired
    }
}
