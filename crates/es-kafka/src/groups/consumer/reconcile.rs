//! One member's step towards its target assignment, as Kafka's
//! `CurrentAssignmentBuilder`: partitions it must give up are revoked first
//! (UNREVOKED_PARTITIONS, at its current epoch, until its heartbeat no longer
//! lists them); then it moves to the assignment epoch and gets the partitions
//! no other member holds, the others coming later (UNRELEASED_PARTITIONS).

use std::collections::BTreeSet;

use uuid::Uuid;

use super::{ConsumerGroup, Member, MemberState, LEAVE_GROUP_STATIC_MEMBER_EPOCH};
use crate::groups::assignor::Assignment;

/// Whether the member still reports owning a partition pending revocation
/// (a missing list counts as "yes").
fn owns_revoked(owned: Option<&[(Uuid, Vec<i32>)]>, revoking: &Assignment) -> bool {
    let Some(owned) = owned else {
        return true;
    };
    owned.iter().any(|(t, ps)| {
        revoking
            .get(t)
            .is_some_and(|r| ps.iter().any(|p| r.contains(p)))
    })
}

impl ConsumerGroup {
    /// Kafka's `CurrentAssignmentBuilder.build`.
    pub(super) fn reconcile(&self, m: &Member, owned: Option<&[(Uuid, Vec<i32>)]>) -> Member {
        if m.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH
            || m.is_reconciled_to(self.assignment_epoch)
        {
            return m.clone();
        }
        match m.state {
            MemberState::Stable => {
                if m.member_epoch != self.assignment_epoch {
                    self.next_assignment(m, m.member_epoch, owned)
                } else {
                    m.clone()
                }
            }
            MemberState::UnrevokedPartitions => {
                if owns_revoked(owned, &m.pending_revocation) {
                    m.clone()
                } else {
                    self.next_assignment(m, m.member_epoch + 1, owned)
                }
            }
            MemberState::UnreleasedPartitions => self.next_assignment(m, m.member_epoch, owned),
        }
    }

    fn next_assignment(
        &self,
        m: &Member,
        member_epoch: i32,
        owned: Option<&[(Uuid, Vec<i32>)]>,
    ) -> Member {
        let empty = Assignment::new();
        let target = self.targets.get(&m.member_id).unwrap_or(&empty);
        let mut assigned = Assignment::new();
        let mut revoking = Assignment::new();
        let mut adding = Assignment::new();
        let mut unreleased = false;
        let topics: BTreeSet<Uuid> = target.keys().chain(m.assigned.keys()).copied().collect();
        for t in topics {
            let tgt = target.get(&t).cloned().unwrap_or_default();
            let cur = m.assigned.get(&t).cloned().unwrap_or_default();
            let keep: BTreeSet<i32> = cur.intersection(&tgt).copied().collect();
            let revoke: BTreeSet<i32> = cur.difference(&keep).copied().collect();
            let mut add: BTreeSet<i32> = tgt.difference(&keep).copied().collect();
            let before = add.len();
            add.retain(|p| self.current_partition_epoch(t, *p) == -1);
            unreleased |= add.len() != before;
            if !keep.is_empty() {
                assigned.insert(t, keep);
            }
            if !revoke.is_empty() {
                revoking.insert(t, revoke);
            }
            if !add.is_empty() {
                adding.insert(t, add);
            }
        }
        let mut n = m.clone();
        let set_epoch = |n: &mut Member, e: i32| {
            if n.member_epoch != e {
                n.previous_member_epoch = n.member_epoch;
                n.member_epoch = e;
            }
        };
        if !revoking.is_empty() && owns_revoked(owned, &revoking) {
            n.state = MemberState::UnrevokedPartitions;
            set_epoch(&mut n, member_epoch);
            n.assigned = assigned;
            n.pending_revocation = revoking;
        } else {
            for (t, ps) in adding {
                assigned.entry(t).or_default().extend(ps);
            }
            n.state = if unreleased {
                MemberState::UnreleasedPartitions
            } else {
                MemberState::Stable
            };
            set_epoch(&mut n, self.assignment_epoch);
            n.assigned = assigned;
            n.pending_revocation.clear();
        }
        n
    }
}
