//! One partition's change of leader, ISR and replicas, decided as KRaft's
//! `PartitionChangeBuilder` decides it, for the entries of the replication
//! issue (AlterPartition, ElectLeaders, reassignments).
//!
//! The caller states targets (an ISR, replicas, the reassignment's adding
//! and removing lists, the leader recovery state) and an election kind;
//! [`settle`] completes a reassignment the target ISR allows, elects a
//! leader, and writes the result into the partition. Invariants it keeps:
//! the leader is in the ISR and acceptable (registered, unfenced, not
//! shutting down) or there is none; an unclean leader is the ISR's only
//! member and its partition is `Recovering`; the leader epoch moves when
//! the leader changes or a replica leaves the replica list (as KRaft from
//! metadata version 3.6: an ISR change alone does not move it); the
//! partition epoch moves on every change and only then, so a change that
//! changes nothing is no change.

use crate::records::{BrokerId, LeaderRecovery};

use super::{PartitionInfo, NO_LEADER};

/// How a leader is chosen (KRaft's `PartitionChangeBuilder.Election`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Election {
    /// Keep the leader if it may stay, else the first acceptable replica
    /// in the ISR, in replica order.
    Online,
    /// The first replica if it is acceptable and in the ISR, else as Online.
    Preferred,
    /// As Online, then any acceptable replica, ISR or not.
    Unclean,
}

/// What the partition should become.
#[derive(Clone, Debug)]
pub(crate) struct Target {
    pub replicas: Vec<BrokerId>,
    pub isr: Vec<BrokerId>,
    pub adding: Vec<BrokerId>,
    pub removing: Vec<BrokerId>,
    pub recovery: LeaderRecovery,
    pub election: Election,
}

impl Target {
    /// The partition as it is, with an election of kind `election`.
    pub fn of(p: &PartitionInfo, election: Election) -> Target {
        Target {
            replicas: p.replicas.clone(),
            isr: p.isr.clone(),
            adding: p.adding.clone(),
            removing: p.removing.clone(),
            recovery: p.leader_recovery,
            election,
        }
    }
}

/// What [`settle`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// Anything changed (the partition epoch moved).
    pub changed: bool,
    pub leader_changed: bool,
    /// The new leader came from outside the ISR.
    pub unclean: bool,
    /// An ongoing reassignment completed.
    pub reassignment_completed: bool,
}

/// Completes the target's reassignment if its ISR allows: once the ISR
/// without the replicas being removed holds every replica that stays, the
/// replicas become the target and the removed leave the ISR
/// (`PartitionReassignmentReplicas.maybeCompleteReassignment`).
fn complete_reassignment(t: &mut Target) -> bool {
    if t.adding.is_empty() && t.removing.is_empty() {
        return false;
    }
    let mut isr = t.isr.clone();
    let mut replicas = t.replicas.clone();
    if !t.removing.is_empty() {
        isr.retain(|r| !t.removing.contains(r));
        replicas.retain(|r| !t.removing.contains(r));
        if isr.is_empty() || replicas.is_empty() {
            return false;
        }
    }
    if !replicas.iter().all(|r| isr.contains(r)) {
        return false;
    }
    t.isr = isr;
    t.replicas = replicas;
    t.adding.clear();
    t.removing.clear();
    true
}

/// The leader the election chooses and whether it is unclean.
fn elect(p: &PartitionInfo, t: &Target, acceptable: &dyn Fn(BrokerId) -> bool) -> (BrokerId, bool) {
    let valid = |r: BrokerId| r != NO_LEADER && t.isr.contains(&r) && acceptable(r);
    if t.election == Election::Preferred {
        if let Some(&first) = t.replicas.first() {
            if valid(first) {
                return (first, false);
            }
        }
    }
    if valid(p.leader) {
        return (p.leader, false);
    }
    if let Some(&r) = t.replicas.iter().find(|r| valid(**r)) {
        return (r, false);
    }
    if t.election == Election::Unclean {
        if let Some(&r) = t
            .replicas
            .iter()
            .find(|r| **r != NO_LEADER && acceptable(**r))
        {
            return (r, true);
        }
    }
    (NO_LEADER, false)
}

/// Applies `t` to `p`: completes a reassignment if it may, elects, and
/// writes what changed, bumping the epochs as the module comment says.
pub(crate) fn settle(
    p: &mut PartitionInfo,
    mut t: Target,
    acceptable: &dyn Fn(BrokerId) -> bool,
) -> Outcome {
    let reassignment_completed = complete_reassignment(&mut t);
    let (leader, unclean) = elect(p, &t, acceptable);
    let leader_changed = leader != p.leader;
    if unclean {
        t.isr = vec![leader];
        t.recovery = LeaderRecovery::Recovering;
    }
    // An empty target ISR leaves the ISR as it is (the last member stays,
    // as KRaft without eligible leader replicas).
    let isr_changed = !t.isr.is_empty() && t.isr != p.isr;
    let replicas_changed = !t.replicas.is_empty() && t.replicas != p.replicas;
    let replica_removed = replicas_changed && p.replicas.iter().any(|r| !t.replicas.contains(r));
    let changed = leader_changed
        || isr_changed
        || replicas_changed
        || t.adding != p.adding
        || t.removing != p.removing
        || t.recovery != p.leader_recovery;
    if !changed {
        return Outcome::default();
    }
    if leader_changed || replica_removed {
        p.leader_epoch = p.leader_epoch.saturating_add(1);
    }
    p.leader = leader;
    if isr_changed {
        p.isr = t.isr;
    }
    if replicas_changed {
        p.replicas = t.replicas;
    }
    p.adding = t.adding;
    p.removing = t.removing;
    p.leader_recovery = t.recovery;
    p.partition_epoch = p.partition_epoch.saturating_add(1);
    Outcome {
        changed: true,
        leader_changed,
        unclean,
        reassignment_completed,
    }
}
