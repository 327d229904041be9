//! ConsumerGroupHeartbeat: request validation as Kafka's
//! `throwIfConsumerGroupHeartbeatRequestIsInvalid`, finding or creating the
//! member with Kafka's member id and epoch checks (static member take-over,
//! rejoining with epoch 0), updating its subscription, bumping the group
//! epoch and recomputing the target when needed, then reconciling the
//! member one step and answering with its epoch and assignment.

use uuid::Uuid;

use super::{
    compile_topic_regex, timeout, to_list, ConsumerGroup, HeartbeatRequest, HeartbeatResponse,
    Member, MemberState, ResolvedRegex, TopicView, LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
};
use crate::groups::assignor::{self, Assignment};
use crate::groups::error::GroupError;
use crate::groups::Millis;

/// Kafka's answer to a SubscribedTopicRegex that does not compile.
fn invalid_regex(pattern: &str, why: &str) -> HeartbeatResponse {
    HeartbeatResponse::error(GroupError::InvalidRegularExpression {
        pattern: pattern.to_string(),
        why: why.to_string(),
    })
}

/// Whether every owned partition is in `target` (a missing list is not).
fn is_subset(owned: Option<&[(Uuid, Vec<i32>)]>, target: &Assignment) -> bool {
    let Some(owned) = owned else {
        return false;
    };
    owned.iter().all(|(t, ps)| {
        ps.iter()
            .all(|p| target.get(t).is_some_and(|s| s.contains(p)))
    })
}

/// Kafka's request validation (`throwIfConsumerGroupHeartbeatRequestIsInvalid`
/// of GroupCoordinatorService), in its order. The coordinator runs it before it
/// looks the group up, so that an invalid request to an unknown group is
/// INVALID_REQUEST, not GROUP_ID_NOT_FOUND.
pub fn validate(req: &HeartbeatRequest) -> Result<(), GroupError> {
    let invalid = |m: &str| Err(GroupError::InvalidRequest(m.to_string()));
    let epoch = req.member_epoch;
    // From v1 the client generates its member id, so it is always required.
    if (req.api_version >= 1 || epoch > 0 || epoch == LEAVE_GROUP_MEMBER_EPOCH)
        && req.member_id.is_empty()
    {
        return invalid("MemberId can't be empty.");
    }
    if req.group_id.is_empty() {
        return invalid("GroupId can't be empty.");
    }
    if req.instance_id.as_deref() == Some("") {
        return invalid("InstanceId can't be empty.");
    }
    if req.rack_id.as_deref() == Some("") {
        return invalid("RackId can't be empty.");
    }
    if epoch == 0 {
        if req.rebalance_timeout_ms == -1 {
            return invalid("RebalanceTimeoutMs must be provided in first request.");
        }
        if req.topic_partitions.as_ref().is_none_or(|t| !t.is_empty()) {
            return invalid("TopicPartitions must be empty when (re-)joining.");
        }
        // Kafka 4 accepts an empty list of names or an empty regex: the
        // member is in the group, subscribed to nothing.
        if req.subscribed_topic_names.is_none() && req.subscribed_topic_regex.is_none() {
            return invalid(
                "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
            );
        }
    } else if epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH {
        if req.instance_id.is_none() {
            return invalid("InstanceId can't be null.");
        }
    } else if epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH {
        return invalid("MemberEpoch is invalid.");
    }
    if let Some(a) = &req.server_assignor {
        if !assignor::ASSIGNORS.contains(&a.as_str()) {
            return Err(GroupError::UnsupportedAssignor {
                assignor: a.clone(),
                supported: assignor::ASSIGNORS.join(", "),
            });
        }
    }
    Ok(())
}

impl ConsumerGroup {
    /// Handles a ConsumerGroupHeartbeat.
    pub fn heartbeat(
        &mut self,
        now: Millis,
        req: HeartbeatRequest,
        topics: &dyn TopicView,
    ) -> HeartbeatResponse {
        if let Err(e) = validate(&req) {
            return HeartbeatResponse::error(e);
        }
        let epoch = req.member_epoch;
        if epoch < 0 {
            return self.leave(now, &req);
        }
        let member_id = if req.member_id.is_empty() {
            Uuid::new_v4().to_string()
        } else {
            req.member_id.clone()
        };
        let known = self.members.contains_key(&member_id)
            || req
                .instance_id
                .as_ref()
                .is_some_and(|i| self.static_members.contains_key(i));
        if !known && self.members.len() >= self.config.members_max {
            return HeartbeatResponse::error(GroupError::ConsumerGroupFull {
                members_max: self.config.members_max,
            });
        }
        // A regex the group does not hold yet must compile; checked before
        // anything changes, so that a refused heartbeat changes nothing.
        let new_regex = match req.subscribed_topic_regex.as_deref() {
            Some(p) if !p.is_empty() && !self.regexes.contains_key(p) => {
                match compile_topic_regex(p) {
                    Ok(r) => Some(r),
                    Err(why) => return invalid_regex(p, &why),
                }
            }
            _ => None,
        };
        let owned = req.topic_partitions.as_deref();

        // Get or create the member (removing it from the maps while it is
        // updated; it goes back below).
        let old = match self.take_member(&member_id, &req, owned) {
            Ok(m) => m,
            Err(e) => return HeartbeatResponse::error(e),
        };
        let mut m = old.clone();
        if let Some(i) = &req.instance_id {
            m.instance_id = Some(i.clone());
        }
        if let Some(r) = &req.rack_id {
            m.rack_id = Some(r.clone());
        }
        if req.rebalance_timeout_ms != -1 {
            m.rebalance_timeout_ms = req.rebalance_timeout_ms;
        }
        if let Some(a) = &req.server_assignor {
            m.server_assignor = Some(a.clone());
        }
        if let Some(names) = &req.subscribed_topic_names {
            let mut s = names.clone();
            s.sort();
            s.dedup();
            m.subscribed = s;
        }
        if let Some(p) = &req.subscribed_topic_regex {
            // Null is "unchanged"; empty is "no regex".
            m.regex = (!p.is_empty()).then(|| p.clone());
        }
        let regex_changed = m.regex != old.regex;
        if regex_changed {
            tracing::info!(group = %self.group_id, member = %m.member_id, regex = %m.regex.as_deref().unwrap_or(""), "member changed its subscribed topic regex");
        }
        if let (Some(p), Some(regex)) = (&m.regex, new_regex) {
            self.regexes.entry(p.clone()).or_insert(ResolvedRegex {
                regex,
                topics: None,
            });
        }
        m.client_id = req.client_id.clone();
        m.client_host = req.client_host.clone();
        // Kafka bumps the group epoch when the member's topic names or regex
        // change (a new member joining with no subscription does not), or
        // when the group's preferred server assignor changes.
        let assignor_before = self.preferred_assignor();
        let mut bump = old.subscribed != m.subscribed || regex_changed;
        if let Some(iid) = &m.instance_id {
            self.static_members.insert(iid.clone(), m.member_id.clone());
        }
        self.members.insert(m.member_id.clone(), m);
        if self.preferred_assignor() != assignor_before {
            bump = true;
        }
        if regex_changed {
            self.drop_unused_regexes();
        }
        if self.resolve_regexes(topics) {
            bump = true;
        }

        // Subscription metadata: the subscribed topics as they are now.
        let metadata = self.compute_subscription_metadata(topics);
        if metadata != self.subscription_metadata {
            self.subscription_metadata = metadata;
            bump = true;
        }
        if bump {
            self.group_epoch += 1;
            tracing::info!(group = %self.group_id, epoch = self.group_epoch, "bumped consumer group epoch");
        }
        // KIP-1263: at most one target assignment per assignment interval;
        // until then the member reconciles towards the last one.
        if self.group_epoch > self.assignment_epoch && self.may_compute_target(now) {
            self.compute_target_assignment(now);
        }

        // Reconcile the member towards its target.
        let Some(before) = self.members.get(&member_id).cloned() else {
            return HeartbeatResponse::error(GroupError::UnknownServerError);
        };
        let mut after = self.reconcile(&before, owned);
        after.session_deadline =
            Some(now.saturating_add(timeout(self.config.consumer_session_timeout_ms)));
        if after.state == MemberState::UnrevokedPartitions {
            let changed = after.member_epoch != before.member_epoch
                || after.pending_revocation != before.pending_revocation
                || before.rebalance_deadline.is_none();
            if changed {
                after.rebalance_deadline = Some((
                    now.saturating_add(timeout(after.rebalance_timeout_ms)),
                    after.member_epoch,
                ));
            }
        } else {
            after.rebalance_deadline = None;
        }
        self.release(&before.assigned, before.member_epoch);
        self.release(&before.pending_revocation, before.member_epoch);
        self.claim(&after.assigned, after.member_epoch);
        self.claim(&after.pending_revocation, after.member_epoch);
        let full = epoch == 0
            || (req.rebalance_timeout_ms != -1
                && (req.subscribed_topic_names.is_some() || req.subscribed_topic_regex.is_some())
                && req.topic_partitions.is_some());
        let send_assignment = full || after.assigned != old.assigned;
        let r = HeartbeatResponse {
            error: None,
            member_id: Some(after.member_id.clone()),
            member_epoch: after.member_epoch,
            heartbeat_interval_ms: self.config.consumer_heartbeat_interval_ms,
            assignment: send_assignment.then(|| to_list(&after.assigned)),
        };
        self.members.insert(member_id, after);
        r
    }

    /// Finds (or creates) the member a heartbeat is for, applying Kafka's
    /// member and epoch checks; the member is left in the group.
    fn take_member(
        &mut self,
        member_id: &str,
        req: &HeartbeatRequest,
        owned: Option<&[(Uuid, Vec<i32>)]>,
    ) -> Result<Member, GroupError> {
        let epoch = req.member_epoch;
        let check_epoch = |m: &Member| -> Result<(), GroupError> {
            if epoch > m.member_epoch {
                return Err(GroupError::MemberEpochAhead {
                    got: epoch,
                    known: m.member_epoch,
                });
            }
            if epoch < m.member_epoch
                && (epoch != m.previous_member_epoch || !is_subset(owned, &m.assigned))
            {
                return Err(GroupError::MemberEpochBehind {
                    got: epoch,
                    known: m.member_epoch,
                });
            }
            Ok(())
        };
        match &req.instance_id {
            None => match self.members.get(member_id) {
                None if epoch != 0 => Err(GroupError::NotAMember {
                    member_id: member_id.to_string(),
                    group_id: self.group_id.clone(),
                }),
                None => {
                    tracing::info!(group = %self.group_id, member = member_id, "member joins the consumer group");
                    Ok(Member::new(member_id))
                }
                Some(m) if epoch == 0 => Ok(self.rejoin(m.clone())),
                Some(m) => {
                    check_epoch(m)?;
                    Ok(m.clone())
                }
            },
            Some(iid) => {
                let existing = self
                    .static_members
                    .get(iid)
                    .and_then(|id| self.members.get(id))
                    .cloned();
                if epoch == 0 {
                    match existing {
                        None => Ok(match self.members.get(member_id) {
                            Some(m) => self.rejoin(m.clone()),
                            None => Member::new(member_id),
                        }),
                        Some(m) if m.member_id == member_id => Ok(self.rejoin(m)),
                        Some(m) if m.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH => {
                            Err(GroupError::UnreleasedInstanceId {
                                member_id: member_id.to_string(),
                                instance_id: iid.clone(),
                                owner: m.member_id,
                            })
                        }
                        Some(m) => {
                            // The static member is back: it takes over the old
                            // member's assignment under its new member id.
                            tracing::info!(group = %self.group_id, instance = %iid, old = %m.member_id, new = member_id, "static member rejoins");
                            self.members.remove(&m.member_id);
                            self.release(&m.assigned, m.member_epoch);
                            if let Some(t) = self.targets.remove(&m.member_id) {
                                self.targets.insert(member_id.to_string(), t);
                            }
                            let mut n = m;
                            n.member_id = member_id.to_string();
                            n.member_epoch = 0;
                            n.previous_member_epoch = 0;
                            n.state = MemberState::Stable;
                            n.pending_revocation.clear();
                            n.rebalance_deadline = None;
                            self.claim(&n.assigned, 0);
                            Ok(n)
                        }
                    }
                } else {
                    let Some(m) = existing else {
                        return Err(GroupError::UnknownInstanceId {
                            instance_id: iid.clone(),
                        });
                    };
                    if m.member_id != member_id {
                        return Err(GroupError::NotTheStaticMember {
                            member_id: member_id.to_string(),
                            instance_id: iid.clone(),
                            owner: m.member_id,
                        });
                    }
                    check_epoch(&m)?;
                    Ok(m)
                }
            }
        }
    }

    /// A known member joining again with epoch 0 (it was fenced on its side
    /// and dropped its partitions): it starts over from no partitions, its
    /// target stays.
    fn rejoin(&mut self, mut m: Member) -> Member {
        self.release(&m.assigned, m.member_epoch);
        self.release(&m.pending_revocation, m.member_epoch);
        m.assigned.clear();
        m.pending_revocation.clear();
        m.member_epoch = 0;
        m.previous_member_epoch = 0;
        m.state = MemberState::Stable;
        m.rebalance_deadline = None;
        if let Some(stored) = self.members.get_mut(&m.member_id) {
            *stored = m.clone();
        }
        m
    }
}
