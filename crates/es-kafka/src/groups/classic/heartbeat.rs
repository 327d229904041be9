//! Heartbeats and timers of a classic group: Heartbeat itself, the session
//! timer it restarts, and the timer decisions (`next_deadline`, `tick`):
//! expiring a silent member's session, a pending member's id, and the members
//! that did not send SyncGroup within the rebalance timeout.

use super::{timeout, ClassicGroup, ClassicState, Effect, JoinTimer};
use crate::groups::error::GroupError;
use crate::groups::Millis;

impl ClassicGroup {
    /// Handles a Heartbeat.
    pub fn heartbeat(
        &mut self,
        now: Millis,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
    ) -> Result<(), GroupError> {
        if self.state == ClassicState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        self.validate_member(member_id, instance_id)?;
        if generation_id != self.generation_id {
            return Err(GroupError::IllegalGeneration);
        }
        match self.state {
            ClassicState::Empty | ClassicState::Dead => Err(GroupError::UnknownMemberId),
            ClassicState::PreparingRebalance => {
                self.reschedule_heartbeat(now, member_id);
                Err(GroupError::RebalanceInProgress)
            }
            ClassicState::CompletingRebalance | ClassicState::Stable => {
                self.reschedule_heartbeat(now, member_id);
                Ok(())
            }
        }
    }

    pub(super) fn reschedule_heartbeat(&mut self, now: Millis, member_id: &str) {
        if let Some(m) = self.members.get_mut(member_id) {
            m.heartbeat_deadline = Some(now.saturating_add(timeout(m.session_timeout_ms)));
        }
    }

    /// The earliest pending deadline, if any.
    pub fn next_deadline(&self) -> Option<Millis> {
        let members = self.members.values().filter_map(|m| m.heartbeat_deadline);
        let pending = self.pending_join.values().copied();
        let join = self.join_timer.map(|(d, _)| d);
        let sync = self.sync_timer.map(|(d, _)| d);
        members.chain(pending).chain(join).chain(sync).min()
    }

    /// Fires every timer due at `now`, earliest first.
    pub fn tick(&mut self, now: Millis, out: &mut Vec<Effect>) {
        // Each firing changes state (and may cancel or add timers), so look
        // again after each one. Bounded: every firing clears its deadline
        // and new ones are at or after `now` only when their delay is 0,
        // which the initial-rebalance timer allows once per added member.
        let mut firings_left = 4 * (self.members.len() + self.pending_join.len()) + 16;
        while firings_left > 0 {
            firings_left -= 1;
            let Some(due) = self.next_deadline().filter(|d| *d <= now) else {
                return;
            };
            if let Some((d, kind)) = self.join_timer {
                if d == due {
                    self.join_timer = None;
                    match kind {
                        JoinTimer::Complete => self.complete_join(now, out),
                        JoinTimer::Initial {
                            delay_ms,
                            remaining_ms,
                        } => self.initial_rebalance_timer(now, delay_ms, remaining_ms, out),
                    }
                    continue;
                }
            }
            if let Some((d, generation)) = self.sync_timer {
                if d == due {
                    self.sync_timer = None;
                    self.expire_pending_sync(now, generation, out);
                    continue;
                }
            }
            if let Some(id) = self
                .pending_join
                .iter()
                .find(|(_, d)| **d == due)
                .map(|(id, _)| id.clone())
            {
                self.pending_join.shift_remove(&id);
                tracing::info!(group = %self.group_id, member = %id, "pending member expired");
                if self.state == ClassicState::PreparingRebalance && self.has_all_members_joined() {
                    self.complete_join(now, out);
                }
                continue;
            }
            if let Some(id) = self
                .members
                .values()
                .find(|m| m.heartbeat_deadline == Some(due))
                .map(|m| m.member_id.clone())
            {
                self.expire_heartbeat(now, &id, out);
                continue;
            }
            debug_assert!(false, "a due deadline matched no timer");
            return;
        }
    }
    fn expire_heartbeat(&mut self, now: Millis, member_id: &str, out: &mut Vec<Effect>) {
        let Some(m) = self.members.get_mut(member_id) else {
            return;
        };
        m.heartbeat_deadline = None;
        if self.state == ClassicState::Dead || m.has_satisfied_heartbeat() {
            // A member parked in a join or sync is alive by definition; its
            // timer restarts when that request is answered.
            return;
        }
        tracing::info!(group = %self.group_id, member = member_id, "member session expired; removing it");
        self.remove_member(member_id, out);
        match self.state {
            ClassicState::Stable | ClassicState::CompletingRebalance => {
                self.maybe_prepare_rebalance_or_complete_join(now, out)
            }
            ClassicState::PreparingRebalance if self.has_all_members_joined() => {
                self.complete_join(now, out)
            }
            _ => {}
        }
    }

    fn expire_pending_sync(&mut self, now: Millis, generation: i32, out: &mut Vec<Effect>) {
        if generation != self.generation_id
            || !matches!(
                self.state,
                ClassicState::CompletingRebalance | ClassicState::Stable
            )
            || self.pending_sync.is_empty()
        {
            return;
        }
        let mut late: Vec<String> = self.pending_sync.iter().cloned().collect();
        late.sort();
        tracing::info!(group = %self.group_id, members = ?late, "removing members that did not send SyncGroup");
        for id in &late {
            self.remove_member(id, out);
        }
        self.prepare_rebalance(now, out);
    }
}
