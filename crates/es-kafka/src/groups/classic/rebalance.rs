//! The rebalance of a classic group: entering PreparingRebalance, the join
//! timers (the initial delay of KIP-134 and the rebalance timeout), completing
//! the join phase (removing dynamic members that did not rejoin, electing a
//! leader, selecting the protocol by vote, starting a new generation) and
//! handing the leader's assignment to the parked SyncGroups.
//!
//! Every phase that changes membership ends here; this file calls only the
//! member bookkeeping in `mod.rs`.

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use indexmap::IndexMap;

use super::{timeout, ClassicGroup, ClassicState, Effect, JoinTimer, SyncResponse};
use crate::groups::error::GroupError;
use crate::groups::Millis;

impl ClassicGroup {
    fn can_rebalance(&self) -> bool {
        matches!(
            self.state,
            ClassicState::Stable | ClassicState::CompletingRebalance | ClassicState::Empty
        )
    }

    pub(super) fn maybe_prepare_rebalance_or_complete_join(
        &mut self,
        now: Millis,
        out: &mut Vec<Effect>,
    ) {
        if self.can_rebalance() {
            self.prepare_rebalance(now, out);
        } else {
            self.maybe_complete_join_phase(now, out);
        }
    }

    pub(super) fn prepare_rebalance(&mut self, now: Millis, out: &mut Vec<Effect>) {
        if self.state == ClassicState::CompletingRebalance {
            for m in self.members.values_mut() {
                m.assignment = Bytes::new();
            }
            self.propagate_assignment(now, Some(GroupError::RebalanceInProgress), out);
        }
        self.pending_sync.clear();
        self.sync_timer = None;
        let initial = self.state == ClassicState::Empty;
        if initial {
            let delay = self.config.initial_rebalance_delay_ms;
            let remaining = self.rebalance_timeout_ms().saturating_sub(delay);
            self.join_timer = Some((
                now.saturating_add(delay),
                JoinTimer::Initial {
                    delay_ms: delay,
                    remaining_ms: remaining,
                },
            ));
        }
        self.transition(ClassicState::PreparingRebalance);
        if !initial {
            if self.has_all_members_joined() {
                self.complete_join(now, out);
            } else {
                self.join_timer = Some((
                    now.saturating_add(self.rebalance_timeout_ms()),
                    JoinTimer::Complete,
                ));
            }
        }
    }

    pub(super) fn maybe_complete_join_phase(&mut self, now: Millis, out: &mut Vec<Effect>) {
        if self.state == ClassicState::PreparingRebalance
            && self.previous_state != ClassicState::Empty
            && self.has_all_members_joined()
        {
            self.complete_join(now, out);
        }
    }

    pub(super) fn complete_join(&mut self, now: Millis, out: &mut Vec<Effect>) {
        self.join_timer = None;
        let gone: Vec<String> = self
            .members
            .values()
            .filter(|m| m.awaiting_join.is_none() && m.group_instance_id.is_none())
            .map(|m| m.member_id.clone())
            .collect();
        for id in &gone {
            self.remove_member(id, out);
        }
        if !gone.is_empty() {
            tracing::info!(group = %self.group_id, removed = ?gone, "removed dynamic members that did not rejoin");
        }
        if self.state == ClassicState::Dead {
            return;
        }
        if !self.maybe_elect_new_joined_leader() && !self.members.is_empty() {
            // Only static members that have not rejoined are left: wait
            // another rebalance timeout (or their session timeouts).
            self.join_timer = Some((
                now.saturating_add(self.rebalance_timeout_ms()),
                JoinTimer::Complete,
            ));
            return;
        }
        self.generation_id = self.generation_id.wrapping_add(1);
        if self.members.is_empty() {
            self.protocol_name = None;
            self.transition(ClassicState::Empty);
            self.pending_sync.clear();
            tracing::info!(group = %self.group_id, generation = self.generation_id, "group is now empty");
            return;
        }
        self.protocol_name = self.select_protocol();
        self.transition(ClassicState::CompletingRebalance);
        self.pending_sync.clear();
        tracing::info!(
            group = %self.group_id,
            generation = self.generation_id,
            members = self.members.len(),
            protocol = ?self.protocol_name,
            "stabilized group"
        );
        let leader_members = self.current_members();
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            let is_leader = self.is_leader(&id);
            let members = if is_leader {
                leader_members.clone()
            } else {
                Vec::new()
            };
            let r = self.join_response(&id, members, false);
            if let Some(m) = self.members.get_mut(&id) {
                if let Some(t) = m.awaiting_join.take() {
                    out.push(Effect::Join(t, r));
                }
                m.heartbeat_deadline = Some(now.saturating_add(timeout(m.session_timeout_ms)));
                m.is_new = false;
            }
            self.pending_sync.insert(id);
        }
        self.sync_timer = Some((
            now.saturating_add(self.rebalance_timeout_ms()),
            self.generation_id,
        ));
    }

    fn maybe_elect_new_joined_leader(&mut self) -> bool {
        let Some(leader) = self.leader_id.clone() else {
            return false;
        };
        let leader_rejoined = self
            .members
            .get(&leader)
            .is_some_and(|m| m.awaiting_join.is_some());
        if leader_rejoined {
            return true;
        }
        match self
            .members
            .values()
            .find(|m| m.awaiting_join.is_some())
            .map(|m| m.member_id.clone())
        {
            Some(new_leader) => {
                tracing::info!(group = %self.group_id, old = %leader, new = %new_leader, "leader did not rejoin; elected a new leader");
                self.leader_id = Some(new_leader);
                true
            }
            None => false,
        }
    }

    /// Each member votes for its most preferred protocol among those every
    /// member supports; the most votes wins (ties go to the protocol the
    /// earliest member voted for). A member listing a protocol twice
    /// supports it once (Kafka counts it twice, finds no common protocol
    /// and never answers the join: see compat-tests/diff/FINDINGS.md).
    pub(super) fn select_protocol(&self) -> Option<String> {
        let n = self.members.len();
        let mut support: HashMap<&str, usize> = HashMap::new();
        for m in self.members.values() {
            let names: HashSet<&str> = m.protocols.iter().map(|p| p.name.as_str()).collect();
            for name in names {
                *support.entry(name).or_default() += 1;
            }
        }
        let candidates: HashSet<&str> = support
            .into_iter()
            .filter(|&(_, c)| c == n)
            .map(|(p, _)| p)
            .collect();
        let mut votes: IndexMap<&str, usize> = IndexMap::new();
        for m in self.members.values() {
            if let Some(p) = m.vote(&candidates) {
                *votes.entry(p).or_default() += 1;
            }
        }
        let mut best: Option<(&str, usize)> = None;
        for (p, v) in votes {
            if best.is_none_or(|(_, b)| v > b) {
                best = Some((p, v));
            }
        }
        best.map(|(p, _)| p.to_string())
    }
    /// Answers every parked SyncGroup with the member's assignment (or with
    /// `error`), restarting the session timer of each member answered.
    pub(super) fn propagate_assignment(
        &mut self,
        now: Millis,
        error: Option<GroupError>,
        out: &mut Vec<Effect>,
    ) {
        let (ptype, pname) = if error.is_none() {
            (self.protocol_type.clone(), self.protocol_name.clone())
        } else {
            (None, None)
        };
        for m in self.members.values_mut() {
            if let Some(t) = m.awaiting_sync.take() {
                out.push(Effect::Sync(
                    t,
                    SyncResponse {
                        error: error.clone(),
                        protocol_type: ptype.clone(),
                        protocol_name: pname.clone(),
                        assignment: m.assignment.clone(),
                    },
                ));
                m.heartbeat_deadline = Some(now.saturating_add(timeout(m.session_timeout_ms)));
            }
        }
    }

    pub(super) fn initial_rebalance_timer(
        &mut self,
        now: Millis,
        delay_ms: u64,
        remaining_ms: u64,
        out: &mut Vec<Effect>,
    ) {
        if self.new_member_added && remaining_ms != 0 {
            // Members keep arriving: wait a little longer (KIP-134).
            self.new_member_added = false;
            let new_delay = self.config.initial_rebalance_delay_ms.min(remaining_ms);
            let new_remaining = remaining_ms.saturating_sub(delay_ms);
            self.join_timer = Some((
                now.saturating_add(new_delay),
                JoinTimer::Initial {
                    delay_ms: new_delay,
                    remaining_ms: new_remaining,
                },
            ));
        } else {
            self.complete_join(now, out);
        }
    }
}
