//! The timers of a consumer group: each member's session deadline
//! (restarted by every heartbeat) and its rebalance deadline while it
//! revokes; `tick` fences the members whose deadline passed.

use super::{ConsumerGroup, MemberState};
use crate::groups::Millis;

impl ConsumerGroup {
    pub fn next_deadline(&self) -> Option<Millis> {
        self.members
            .values()
            .flat_map(|m| [m.session_deadline, m.rebalance_deadline.map(|(d, _)| d)])
            .flatten()
            .min()
    }

    /// Fences members whose session expired or who did not revoke in time.
    pub fn tick(&mut self, now: Millis) {
        let expired: Vec<(String, &'static str)> = self
            .members
            .values()
            .filter_map(|m| {
                if m.session_deadline.is_some_and(|d| d <= now) {
                    Some((m.member_id.clone(), "the member session expired"))
                } else if m.rebalance_deadline.is_some_and(|(d, e)| {
                    d <= now && m.state == MemberState::UnrevokedPartitions && m.member_epoch == e
                }) {
                    Some((
                        m.member_id.clone(),
                        "the member failed to revoke partitions within the rebalance timeout",
                    ))
                } else {
                    None
                }
            })
            .collect();
        for (id, why) in expired {
            tracing::info!(group = %self.group_id, member = %id, reason = why, "fencing consumer group member");
            self.fence(&id);
        }
        // Rebalance deadlines that no longer apply.
        for m in self.members.values_mut() {
            if m.rebalance_deadline.is_some_and(|(d, _)| d <= now) {
                m.rebalance_deadline = None;
            }
        }
    }
}
