//! Partition reassignments (Kafka's AlterPartitionReassignments and
//! ListPartitionReassignments, KIP-455), as KRaft's
//! `ReplicationControlManager` runs them.
//!
//! Setting a target makes the replicas the target followed by the current
//! replicas it drops, with `adding` (target minus current) and `removing`
//! (current minus target) kept in the partition. The reassignment completes
//! in the change that makes the ISR, without the replicas being removed,
//! hold every target replica: at once when it only reorders or drops
//! replicas that leave an ISR, otherwise when a leader's AlterPartition
//! adds the last new replica to the ISR. Then the replicas become the
//! target, the removed leave the ISR, and a removed leader hands over to
//! the first target replica in the ISR. Cancelling drops the replicas
//! being added (from the ISR too) and keeps those being removed; if that
//! empties the ISR, the first remaining replica is its only member, which
//! is an unclean election and needs the topic to allow one.

use std::collections::BTreeSet;

use crate::records::{
    code, BrokerId, MetaResponse, PartitionResult, Reassignment, TopicPartitions,
};

use super::change::{self, Target};
use super::replication::{election_result, Changed};
use super::{MetaEvent, MetaImage};

/// An ongoing reassignment (ListPartitionReassignments' answer).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OngoingReassignment {
    pub topic: String,
    pub partition: i32,
    /// Target followed by the replicas being removed.
    pub replicas: Vec<BrokerId>,
    pub adding: Vec<BrokerId>,
    pub removing: Vec<BrokerId>,
}

impl MetaImage {
    /// AlterPartitionReassignments: one result per partition, in request
    /// order: UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT (a
    /// target empty, with a repeat or an unregistered broker; a cancel that
    /// would need a forbidden unclean election), NO_REASSIGNMENT_IN_PROGRESS
    /// (a cancel of none).
    pub(crate) fn alter_reassignments(
        &mut self,
        items: &[Reassignment],
        ev: &mut Vec<MetaEvent>,
    ) -> MetaResponse {
        let mut changed = Changed::default();
        let results = items
            .iter()
            .map(|r| self.reassign_one(r, &mut changed))
            .collect();
        changed.emit(ev);
        MetaResponse::Partitions { results }
    }

    fn reassign_one(&mut self, r: &Reassignment, changed: &mut Changed) -> PartitionResult {
        let fail =
            |error_code, why: String| election_result(&r.topic, r.partition, error_code, Some(why));
        let Some(topic) = self.topics.get(&r.topic) else {
            return fail(
                code::UNKNOWN_TOPIC_OR_PARTITION,
                format!("Unable to find a topic named {}.", r.topic),
            );
        };
        let index = usize::try_from(r.partition).ok();
        if index.and_then(|i| topic.partitions.get(i)).is_none() {
            return fail(
                code::UNKNOWN_TOPIC_OR_PARTITION,
                format!("Unable to find partition {}:{}.", r.topic, r.partition),
            );
        }
        if let Some(target) = &r.replicas {
            if let Err(why) = self.check_target(target) {
                return fail(code::INVALID_REPLICA_ASSIGNMENT, why);
            }
        }
        let election = self.election_for_reassignment(&r.topic);
        let unclean_allowed = self.unclean_election_enabled(&r.topic);
        let active: Vec<BrokerId> = self.active().map(|b| b.id).collect();
        let Some(p) = index.and_then(|i| self.topics.get_mut(&r.topic)?.partitions.get_mut(i))
        else {
            return fail(
                code::UNKNOWN_TOPIC_OR_PARTITION,
                format!("Unable to find partition {}:{}.", r.topic, r.partition),
            );
        };
        let mut t = Target::of(p, election);
        match &r.replicas {
            None => {
                if p.adding.is_empty() && p.removing.is_empty() {
                    return fail(
                        code::NO_REASSIGNMENT_IN_PROGRESS,
                        "No partition reassignment is in progress.".into(),
                    );
                }
                // PartitionReassignmentRevert: drop what was being added.
                t.replicas.retain(|b| !p.adding.contains(b));
                t.isr.retain(|b| !p.adding.contains(b));
                if t.isr.is_empty() {
                    let Some(&first) = t.replicas.first() else {
                        return fail(
                            code::INVALID_REPLICA_ASSIGNMENT,
                            "Invalid replica assignment: addingReplicas contains all replicas."
                                .into(),
                        );
                    };
                    if !unclean_allowed {
                        return fail(code::INVALID_REPLICA_ASSIGNMENT, format!("Unable to revert partition assignment for {}:{} because it would require an unclean leader election.", r.topic, r.partition));
                    }
                    t.isr = vec![first];
                }
                t.adding.clear();
                t.removing.clear();
            }
            Some(target) => {
                // PartitionReassignmentReplicas: target, then the removed.
                let removing: Vec<BrokerId> = p
                    .replicas
                    .iter()
                    .copied()
                    .filter(|b| !target.contains(b))
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect();
                let adding: Vec<BrokerId> = target
                    .iter()
                    .copied()
                    .filter(|b| !p.replicas.contains(b))
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect();
                let mut replicas = target.clone();
                replicas.extend(&removing);
                t.replicas = replicas;
                t.adding = adding;
                t.removing = removing;
            }
        }
        let outcome = change::settle(p, t, &|b| active.contains(&b));
        if outcome.changed {
            changed.add(&r.topic, r.partition);
        }
        PartitionResult {
            leader: p.leader,
            unclean: outcome.unclean,
            ..election_result(&r.topic, r.partition, code::NONE, None)
        }
    }

    fn election_for_reassignment(&self, topic: &str) -> change::Election {
        if self.unclean_election_enabled(topic) {
            change::Election::Unclean
        } else {
            change::Election::Online
        }
    }

    /// Kafka's validateManualPartitionAssignment, without a factor to match.
    fn check_target(&self, target: &[BrokerId]) -> Result<(), String> {
        if target.is_empty() {
            return Err("The manual partition assignment includes an empty replica list.".into());
        }
        let mut sorted = target.to_vec();
        sorted.sort_unstable();
        for (i, b) in sorted.iter().enumerate() {
            if !self.brokers.contains_key(b) {
                return Err(format!("The manual partition assignment includes broker {b}, but no such broker is registered."));
            }
            if i > 0 && sorted[i - 1] == *b {
                return Err(format!(
                    "The manual partition assignment includes the broker {b} more than once."
                ));
            }
        }
        Ok(())
    }

    /// Ongoing reassignments (ListPartitionReassignments): of every topic,
    /// or of the listed partitions only (unknown ones are left out, as
    /// Kafka does), in topic and partition order.
    pub fn reassignments(&self, only: Option<&[TopicPartitions]>) -> Vec<OngoingReassignment> {
        let wanted = |topic: &str, i: i32| {
            only.is_none_or(|l| {
                l.iter()
                    .any(|t| t.topic == topic && t.partitions.contains(&i))
            })
        };
        let mut out = Vec::new();
        for t in self.topics.values() {
            for (i, p) in t.partitions.iter().enumerate() {
                let i = i as i32;
                if (p.adding.is_empty() && p.removing.is_empty()) || !wanted(&t.name, i) {
                    continue;
                }
                out.push(OngoingReassignment {
                    topic: t.name.clone(),
                    partition: i,
                    replicas: p.replicas.clone(),
                    adding: p.adding.clone(),
                    removing: p.removing.clone(),
                });
            }
        }
        out
    }
}

#[cfg(test)]
#[path = "reassign_tests.rs"]
mod tests;
