//! The target assignment of a consumer group: the server-side assignor the
//! members prefer, and the target it computes from the members'
//! subscriptions and the subscription metadata once the group epoch passes
//! the assignment epoch.

use std::collections::BTreeMap;

use super::ConsumerGroup;
use crate::groups::assignor::{self, AssignMember, Assignment};
use crate::groups::Millis;

impl ConsumerGroup {
    /// The assignor the members prefer (the most named; `uniform` if none).
    pub(super) fn preferred_assignor(&self) -> String {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(a) = &m.server_assignor {
                *counts.entry(a.as_str()).or_default() += 1;
            }
        }
        let mut best: Option<(&str, usize)> = None;
        for (a, c) in counts {
            if best.is_none_or(|(_, b)| c > b) {
                best = Some((a, c));
            }
        }
        best.map_or(assignor::UNIFORM, |(a, _)| a).to_string()
    }

    /// Kafka's `canComputeNextTargetAssignment`: no target yet, no
    /// interval, or the interval has passed since the last one.
    pub(super) fn may_compute_target(&self, now: Millis) -> bool {
        let interval = u64::try_from(self.config.consumer_assignment_interval_ms).unwrap_or(0);
        match self.assignment_timestamp {
            None => true,
            Some(_) if interval == 0 => true,
            Some(at) => now >= at.saturating_add(interval),
        }
    }

    pub(super) fn compute_target_assignment(&mut self, now: Millis) {
        let name = self.preferred_assignor();
        let empty = Assignment::new();
        let subscriptions: Vec<Vec<String>> = self
            .members
            .values()
            .map(|m| self.member_subscription(m))
            .collect();
        let members: Vec<AssignMember<'_>> = self
            .members
            .values()
            .zip(&subscriptions)
            .map(|(m, subscribed)| AssignMember {
                member_id: &m.member_id,
                instance_id: m.instance_id.as_deref(),
                subscribed,
                current: self.targets.get(&m.member_id).unwrap_or(&empty),
            })
            .collect();
        let targets = assignor::assign(&name, &members, &self.subscription_metadata);
        self.targets = targets.into_iter().collect();
        self.assignment_epoch = self.group_epoch;
        self.assignment_timestamp = Some(now);
        tracing::debug!(group = %self.group_id, epoch = self.assignment_epoch, assignor = %name, "computed target assignment");
    }
}
