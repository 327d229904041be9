//! ShareGroupHeartbeat: the request checks (the request layer's member id
//! check and the coordinator's `throwIfShareGroupHeartbeatRequestIsInvalid`),
//! the group size and member epoch checks, joining, updating the member's
//! subscription, bumping the group epoch, computing the target with the
//! `simple` assignor over the initialised share-partitions, moving the
//! member straight to its target, and initialising the share-partitions of
//! the subscribed topics.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::{
    millis, to_list, Member, ShareGroup, ShareHeartbeatRequest, ShareHeartbeatResponse, Topics,
    LEAVE_GROUP_MEMBER_EPOCH, MEMBER_ID_CHARS_MAX,
};
use crate::groups::assignor::{AssignMember, Assignment};
use crate::groups::error::GroupError;
use crate::groups::share_assignor::assign_share_assignable;
use crate::groups::Millis;

/// The request layer's member id check (Kafka's `KafkaApis`, after the
/// group's authorization and before the coordinator): a member id that is
/// empty or longer than a UUID's 36 characters (counted as Java does, in
/// UTF-16 units) is INVALID_REQUEST.
pub fn check_member_id(member_id: &str) -> Result<(), GroupError> {
    if member_id.is_empty() || member_id.encode_utf16().count() > MEMBER_ID_CHARS_MAX {
        return Err(GroupError::InvalidRequest(
            "Invalid member id in the request.".to_string(),
        ));
    }
    Ok(())
}

/// Kafka's request validation (`throwIfShareGroupHeartbeatRequestIsInvalid`),
/// in its order. The coordinator runs it before it looks the group up, so
/// that an invalid request to an unknown group is INVALID_REQUEST.
pub fn validate(req: &ShareHeartbeatRequest) -> Result<(), GroupError> {
    let invalid = |m: &str| Err(GroupError::InvalidRequest(m.to_string()));
    if req.member_id.is_empty() {
        return invalid("MemberId can't be empty.");
    }
    if req.group_id.is_empty() {
        return invalid("GroupId can't be empty.");
    }
    if req.rack_id.as_deref() == Some("") {
        return invalid("RackId can't be empty.");
    }
    if req.member_epoch == 0 {
        if req
            .subscribed_topic_names
            .as_ref()
            .is_none_or(Vec::is_empty)
        {
            return invalid("SubscribedTopicNames must be set in first request.");
        }
    } else if req.member_epoch < LEAVE_GROUP_MEMBER_EPOCH {
        return invalid("MemberEpoch is invalid.");
    }
    Ok(())
}

/// Kafka's `throwIfShareGroupMemberEpochIsInvalid`: the member's epoch, or
/// its previous one (the response that moved it on may have been lost).
fn check_epoch(m: &Member, got: i32) -> Result<(), GroupError> {
    if got > m.member_epoch {
        return Err(GroupError::ShareMemberEpochAhead {
            got,
            known: m.member_epoch,
        });
    }
    if got < m.member_epoch && got != m.previous_member_epoch {
        return Err(GroupError::ShareMemberEpochBehind {
            got,
            known: m.member_epoch,
            previous: m.previous_member_epoch,
        });
    }
    Ok(())
}

impl ShareGroup {
    /// Handles a ShareGroupHeartbeat (join with epoch 0, heartbeat, or
    /// leave with epoch -1) at `now`, with `topics` the broker's topics.
    pub fn heartbeat(
        &mut self,
        now: Millis,
        req: &ShareHeartbeatRequest,
        topics: &Topics,
    ) -> ShareHeartbeatResponse {
        if let Err(e) = validate(req) {
            return ShareHeartbeatResponse::error(e);
        }
        if self.dead {
            // DeleteGroups is removing this group; the coordinator drops it
            // and a later join creates a new one.
            return ShareHeartbeatResponse::error(GroupError::CoordinatorNotAvailable);
        }
        let epoch = req.member_epoch;
        if epoch == LEAVE_GROUP_MEMBER_EPOCH {
            return self.leave(req);
        }
        // Kafka checks the size before it looks the member up, so a full
        // group refuses any member it does not hold, whatever its epoch.
        if self.members.len() >= self.config.members_max
            && !self.members.contains_key(&req.member_id)
        {
            return ShareHeartbeatResponse::error(GroupError::ShareGroupFull {
                members_max: self.config.members_max,
            });
        }
        let old = match self.members.get(&req.member_id) {
            None if epoch != 0 => {
                return ShareHeartbeatResponse::error(GroupError::NotAMember {
                    member_id: req.member_id.clone(),
                    group_id: self.group_id.clone(),
                })
            }
            None => {
                tracing::info!(group = %self.group_id, member = %req.member_id, "member joins the share group");
                Member::new(&req.member_id)
            }
            // Deviation: a known member joining again (it dropped its
            // partitions after an error) starts over from epoch 0 with no
            // partitions and gets its target in this response, as the
            // KIP-848 groups here do; it keeps its subscription unless it
            // sends a new one.
            Some(m) if epoch == 0 => Member {
                member_epoch: 0,
                previous_member_epoch: 0,
                assigned: Assignment::new(),
                ..m.clone()
            },
            Some(m) => {
                if let Err(e) = check_epoch(m, epoch) {
                    return ShareHeartbeatResponse::error(e);
                }
                m.clone()
            }
        };
        let mut m = old.clone();
        if let Some(r) = &req.rack_id {
            m.rack_id = Some(r.clone());
        }
        if let Some(names) = &req.subscribed_topic_names {
            let mut s = names.clone();
            s.sort();
            s.dedup();
            m.subscribed = s;
        }
        m.client_id.clone_from(&req.client_id);
        m.client_host.clone_from(&req.client_host);
        // A new member always bumps: it must subscribe to at least one
        // topic (validation), and a new member subscribes to none.
        let mut bump = m.subscribed != old.subscribed;
        if bump {
            tracing::info!(group = %self.group_id, member = %m.member_id, topics = ?m.subscribed, "share group member subscription changed");
        }
        let member_id = m.member_id.clone();
        self.members.insert(member_id.clone(), m);
        // Kafka's `initializedAssignmentPending`: with no target pending,
        // initialised partitions of subscribed topics that the target does
        // not cover bump the group epoch, so that they get assigned.
        if !bump
            && self.assignment_epoch >= self.group_epoch
            && self.initialized_assignment_pending()
        {
            bump = true;
            tracing::debug!(group = %self.group_id, "initialised share-partitions wait for an assignment");
        }

        let metadata = self.compute_subscription_metadata(topics);
        if metadata != self.subscription_metadata {
            self.subscription_metadata = metadata;
            bump = true;
        }
        if bump {
            self.group_epoch = self.group_epoch.saturating_add(1);
            tracing::info!(group = %self.group_id, epoch = self.group_epoch, "bumped share group epoch");
        }
        if self.group_epoch > self.assignment_epoch && self.may_compute_target(now) {
            self.compute_target_assignment(now);
        }

        // No revocation: straight to the target epoch and partitions.
        let target = self.member_target(&member_id);
        let Some(m) = self.members.get_mut(&member_id) else {
            return ShareHeartbeatResponse::error(GroupError::UnknownServerError);
        };
        if m.member_epoch != self.assignment_epoch {
            m.previous_member_epoch = m.member_epoch;
            m.member_epoch = self.assignment_epoch;
        }
        m.assigned = target;
        m.session_deadline = now.saturating_add(millis(self.config.session_timeout_ms));
        let send_assignment =
            epoch == 0 || req.subscribed_topic_names.is_some() || m.assigned != old.assigned;
        let response = ShareHeartbeatResponse {
            error: None,
            member_id: Some(member_id),
            member_epoch: m.member_epoch,
            heartbeat_interval_ms: self.config.heartbeat_interval_ms,
            assignment: send_assignment.then(|| to_list(&m.assigned)),
        };
        // Kafka's `maybeCreateInitializeShareGroupStateRequest`, after the
        // target: the subscribed topics' partitions not initialised yet are
        // initialised now, to be assigned by a later heartbeat.
        self.initialize_subscribed();
        response
    }

    /// The subscribed topics that exist: each topic some member subscribes
    /// to, with its id and partition count now.
    fn compute_subscription_metadata(&self, topics: &Topics) -> Topics {
        let mut out = Topics::new();
        for m in self.members.values() {
            for name in &m.subscribed {
                if let Some(t) = topics.get(name) {
                    out.insert(name.clone(), *t);
                }
            }
        }
        out
    }

    /// Kafka's `initializedAssignmentPending`: some existing subscribed
    /// topic has initialised partitions and the target (over all members)
    /// does not hold exactly those. False for an empty group.
    fn initialized_assignment_pending(&self) -> bool {
        if self.members.is_empty() {
            return false;
        }
        let mut held: BTreeMap<Uuid, BTreeSet<i32>> = BTreeMap::new();
        for a in self.targets.values() {
            for (t, ps) in a {
                held.entry(*t).or_default().extend(ps.iter().copied());
            }
        }
        // Partitions past the topic's count are left out: Kafka's topics
        // never shrink, so it has none; here they would wait forever.
        self.subscription_metadata.values().any(|(id, count)| {
            let Some(ps) = self.initialized.get(id) else {
                return false;
            };
            let ps: BTreeSet<i32> = ps.range(..*count).copied().collect();
            !ps.is_empty() && held.get(id) != Some(&ps)
        })
    }

    /// Initialises every partition of the subscribed topics that exist.
    fn initialize_subscribed(&mut self) {
        for (id, count) in self.subscription_metadata.values() {
            let ps = self.initialized.entry(*id).or_default();
            ps.extend(0..(*count).max(0));
        }
    }

    /// Kafka's `canComputeNextTargetAssignment`: no target yet, no
    /// interval, or the interval has passed since the last one.
    fn may_compute_target(&self, now: Millis) -> bool {
        let interval = millis(self.config.assignment_interval_ms);
        match self.assignment_timestamp {
            None => true,
            Some(_) if interval == 0 => true,
            Some(at) => now >= at.saturating_add(interval),
        }
    }

    fn compute_target_assignment(&mut self, now: Millis) {
        let empty = Assignment::new();
        let members: Vec<AssignMember<'_>> = self
            .members
            .values()
            .map(|m| AssignMember {
                member_id: &m.member_id,
                instance_id: None,
                subscribed: &m.subscribed,
                current: self.targets.get(&m.member_id).unwrap_or(&empty),
            })
            .collect();
        let initialized = &self.initialized;
        let assignable = |t: Uuid, p: i32| initialized.get(&t).is_some_and(|ps| ps.contains(&p));
        let targets = assign_share_assignable(&members, &self.subscription_metadata, &assignable);
        self.targets = targets;
        self.assignment_epoch = self.group_epoch;
        self.assignment_timestamp = Some(now);
        tracing::debug!(group = %self.group_id, epoch = self.assignment_epoch, "computed share group target assignment");
    }

    /// The member's target, less partitions of topics it does not
    /// subscribe to now or that no longer exist (deviation: Kafka hands the
    /// target over as it is until the next computation).
    fn member_target(&self, member_id: &str) -> Assignment {
        let (Some(m), Some(target)) = (self.members.get(member_id), self.targets.get(member_id))
        else {
            return Assignment::new();
        };
        let mut out = Assignment::new();
        for name in &m.subscribed {
            let Some((id, count)) = self.subscription_metadata.get(name) else {
                continue;
            };
            if let Some(ps) = target.get(id) {
                let kept: BTreeSet<i32> = ps.iter().copied().filter(|p| *p < *count).collect();
                if !kept.is_empty() {
                    out.insert(*id, kept);
                }
            }
        }
        out
    }
}
