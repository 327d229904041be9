//! Members going away: a heartbeat leaving the group (epoch -1), a static
//! member leaving temporarily (epoch -2, its partitions stay reserved for
//! it), and fencing, which removes a member, releases its partitions and
//! bumps the group epoch.

use super::{ConsumerGroup, HeartbeatRequest, HeartbeatResponse, LEAVE_GROUP_STATIC_MEMBER_EPOCH};
use crate::groups::error::GroupError;
use crate::groups::Millis;

impl ConsumerGroup {
    pub(super) fn leave(&mut self, now: Millis, req: &HeartbeatRequest) -> HeartbeatResponse {
        let _ = now;
        let mut r = HeartbeatResponse {
            error: None,
            member_id: Some(req.member_id.clone()),
            member_epoch: req.member_epoch,
            heartbeat_interval_ms: 0,
            assignment: None,
        };
        let member_id = match &req.instance_id {
            None => {
                if !self.members.contains_key(&req.member_id) {
                    return HeartbeatResponse::error(GroupError::NotAMember {
                        member_id: req.member_id.clone(),
                        group_id: self.group_id.clone(),
                    });
                }
                req.member_id.clone()
            }
            Some(iid) => {
                let Some(id) = self.static_members.get(iid).cloned() else {
                    return HeartbeatResponse::error(GroupError::UnknownInstanceId {
                        instance_id: iid.clone(),
                    });
                };
                if id != req.member_id {
                    return HeartbeatResponse::error(GroupError::NotTheStaticMember {
                        member_id: req.member_id.clone(),
                        instance_id: iid.clone(),
                        owner: id,
                    });
                }
                if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH {
                    // Temporarily gone: keep its partitions reserved.
                    if let Some(m) = self.members.get(&id).cloned() {
                        let mut n = m.clone();
                        n.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH;
                        n.pending_revocation.clear();
                        n.rebalance_deadline = None;
                        self.release(&m.assigned, m.member_epoch);
                        self.release(&m.pending_revocation, m.member_epoch);
                        self.claim(&n.assigned, n.member_epoch);
                        self.members.insert(id.clone(), n);
                    }
                    tracing::info!(group = %self.group_id, member = %id, instance = %iid, "static member left temporarily");
                    r.member_id = Some(id);
                    return r;
                }
                id
            }
        };
        tracing::info!(group = %self.group_id, member = %member_id, "member left the consumer group");
        self.fence(&member_id);
        r
    }

    /// Removes a member and bumps the group epoch.
    pub(super) fn fence(&mut self, member_id: &str) {
        let Some(m) = self.members.remove(member_id) else {
            return;
        };
        self.release(&m.assigned, m.member_epoch);
        self.release(&m.pending_revocation, m.member_epoch);
        self.targets.remove(member_id);
        if let Some(iid) = &m.instance_id {
            if self.static_members.get(iid).map(String::as_str) == Some(member_id) {
                self.static_members.remove(iid);
            }
        }
        if m.regex.is_some() {
            self.drop_unused_regexes();
        }
        self.group_epoch += 1;
    }
}
