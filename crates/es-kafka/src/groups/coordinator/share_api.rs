//! The coordinator's share-group requests (KIP-932): ShareGroupHeartbeat
//! (creating the group at a member's first heartbeat; the group's document
//! holds its initialised share-partitions, which the heartbeat may assign,
//! and records those the heartbeat initialises) and ShareGroupDescribe.

use std::sync::Arc;

use super::{Coordinator, Kind};
use crate::groups::consumer::TopicView;
use crate::groups::error::GroupError;
use crate::groups::share::{
    self, Existing, ShareDescribed, ShareGroup, ShareHeartbeatRequest, ShareHeartbeatResponse,
    Topics,
};

/// Every topic of `view` as the share group core sees them.
fn all_topics(view: &dyn TopicView) -> Topics {
    view.names()
        .into_iter()
        .filter_map(|n| view.by_name(&n).map(|t| (n, t)))
        .collect()
}

impl Coordinator {
    /// ShareGroupHeartbeat. `topics` resolves topic names and ids for the
    /// `simple` assignor.
    pub fn share_heartbeat(
        self: &Arc<Self>,
        req: ShareHeartbeatRequest,
        topics: &dyn TopicView,
    ) -> ShareHeartbeatResponse {
        let mut st = self.state.lock();
        if st.shut_down {
            return ShareHeartbeatResponse::error(GroupError::CoordinatorNotAvailable);
        }
        // Kafka validates the request before it looks the group up.
        if let Err(e) = share::validate(&req) {
            return ShareHeartbeatResponse::error(e);
        }
        let now = self.now();
        let group_id = req.group_id.clone();
        let existing = match st.groups.get(&group_id) {
            None => Existing::Nothing,
            Some(g) if g.deleting => {
                return ShareHeartbeatResponse::error(GroupError::CoordinatorNotAvailable)
            }
            Some(g) => match g.kind {
                Kind::Share(_) => Existing::Share,
                Kind::Classic(_) | Kind::Consumer(_) => Existing::OtherType,
            },
        };
        match share::check_group(&group_id, existing, req.member_epoch) {
            Err(e) => return ShareHeartbeatResponse::error(e),
            Ok(true) => {
                let cfg = st.config_for(self.config, &group_id);
                let kind = Kind::Share(ShareGroup::new(&group_id, cfg.share));
                if let Err(e) = st.create(&group_id, kind) {
                    return ShareHeartbeatResponse::error(e);
                }
            }
            Ok(false) => {}
        }
        let all = all_topics(topics);
        let Some(g) = st.groups.get_mut(&group_id) else {
            return ShareHeartbeatResponse::error(GroupError::UnknownServerError);
        };
        let Kind::Share(c) = &mut g.kind else {
            return ShareHeartbeatResponse::error(GroupError::UnknownServerError);
        };
        // The document's share-partitions are the initialised ones, the
        // only ones a target assigns (design §3.8): those earlier heartbeats
        // initialised and AlterShareGroupOffsets added, less those
        // DeleteShareGroupOffsets removed.
        let mut initialized = share::Initialized::new();
        for (id, ps) in g.share_partitions.values() {
            initialized
                .entry(*id)
                .or_default()
                .extend(ps.iter().copied());
        }
        c.set_initialized(initialized);
        let r = c.heartbeat(now, &req, &all);
        // The share-partitions the heartbeat initialised are recorded: what
        // DescribeShareGroupOffsets without topics and
        // DeleteShareGroupOffsets read. Written without waiting, as the
        // group's type is: a member may fetch before the document lands.
        let mut recorded = false;
        let new: Vec<(uuid::Uuid, i32)> = c
            .initialized()
            .iter()
            .flat_map(|(t, ps)| ps.iter().map(move |p| (*t, *p)))
            .collect();
        for (topic_id, p) in new {
            let Some(name) = topics.name_of(topic_id) else {
                continue;
            };
            let entry = g
                .share_partitions
                .entry(name)
                .or_insert_with(|| (topic_id, Default::default()));
            if entry.0 != topic_id {
                // The topic was deleted and created again: the old
                // share-partitions are gone with it.
                *entry = (topic_id, Default::default());
            }
            recorded |= entry.1.insert(p);
        }
        let mut spawn = false;
        if recorded {
            g.version += 1;
            spawn = self.start_writer(g);
        }
        self.after_op(&mut st, &group_id, now, Vec::new());
        drop(st);
        if spawn {
            self.spawn_writer(&group_id);
        }
        r
    }

    /// ShareGroupDescribe of one group.
    pub fn share_describe(
        &self,
        group_id: &str,
        topics: &dyn TopicView,
    ) -> Result<ShareDescribed, GroupError> {
        let st = self.state.lock();
        match st.groups.get(group_id) {
            Some(g) if !g.deleting => match &g.kind {
                Kind::Share(c) => Ok(c.describe(&all_topics(topics))),
                Kind::Classic(_) | Kind::Consumer(_) => Err(GroupError::NotAShareGroup {
                    group_id: group_id.to_string(),
                }),
            },
            _ => Err(GroupError::GroupNotFound {
                group_id: group_id.to_string(),
            }),
        }
    }

    /// AlterShareGroupOffsets' checks (design §2.8): the share group,
    /// created Empty when missing (at group and assignment epoch 1, as
    /// Kafka shows one); a group of another type is GROUP_ID_NOT_FOUND
    /// ("Group <g> is not a share group."), one with members
    /// NON_EMPTY_GROUP.
    pub fn share_offsets_alterable(self: &Arc<Self>, group_id: &str) -> Result<(), GroupError> {
        let mut st = self.state.lock();
        if st.shut_down {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        if !st.groups.contains_key(group_id) {
            let cfg = st.config_for(self.config, group_id);
            let mut g = ShareGroup::new(group_id, cfg.share);
            g.settle_empty();
            st.create(group_id, Kind::Share(g))?;
            let now = self.now();
            self.after_op(&mut st, group_id, now, Vec::new());
        }
        self.share_group_empty(&st, group_id)
    }

    /// AlterShareGroupOffsets' checks when it names no known topic: an
    /// existing group of another type or with members refuses as
    /// [`Coordinator::share_offsets_alterable`] does, a missing one is
    /// neither refused nor created (as Kafka 4.4 answers).
    pub fn share_offsets_checkable(&self, group_id: &str) -> Result<(), GroupError> {
        let st = self.state.lock();
        if st.shut_down {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        if !st.groups.contains_key(group_id) {
            return Ok(());
        }
        self.share_group_empty(&st, group_id)
    }

    /// DeleteShareGroupOffsets' checks: the group's share-partitions, or
    /// GROUP_ID_NOT_FOUND ("Group <g> not found." / "... is not a share
    /// group.") or NON_EMPTY_GROUP.
    pub fn share_offsets_deletable(
        &self,
        group_id: &str,
    ) -> Result<super::SharePartitions, GroupError> {
        let st = self.state.lock();
        if st.shut_down {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        self.share_group_empty(&st, group_id)?;
        Ok(st
            .groups
            .get(group_id)
            .map(|g| g.share_partitions.clone())
            .unwrap_or_default())
    }

    /// DeleteGroups of a share group, before its share-partitions are
    /// deleted: `None` when the group is not a share group here (the
    /// ordinary deletion answers it), NON_EMPTY_GROUP with members, else
    /// its recorded share-partitions.
    pub fn share_group_deletable(
        &self,
        group_id: &str,
    ) -> Option<Result<super::SharePartitions, GroupError>> {
        let st = self.state.lock();
        let g = st.groups.get(group_id).filter(|g| !g.deleting)?;
        let Kind::Share(c) = &g.kind else {
            return None;
        };
        Some(if c.is_empty() {
            Ok(g.share_partitions.clone())
        } else {
            Err(GroupError::NonEmptyGroup)
        })
    }

    fn share_group_empty(&self, st: &super::State, group_id: &str) -> Result<(), GroupError> {
        match st.groups.get(group_id) {
            None => Err(GroupError::GroupNotFound {
                group_id: group_id.to_string(),
            }),
            Some(g) if g.deleting => Err(GroupError::CoordinatorNotAvailable),
            Some(g) => match &g.kind {
                Kind::Share(c) if c.is_empty() => Ok(()),
                Kind::Share(_) => Err(GroupError::NonEmptyGroup),
                Kind::Classic(_) | Kind::Consumer(_) => Err(GroupError::NotAShareGroup {
                    group_id: group_id.to_string(),
                }),
            },
        }
    }

    /// Records share-partitions of `topic` as initialised in a share
    /// group's document (AlterShareGroupOffsets); the wait for the document
    /// when it changed. A topic recorded under another id (deleted and
    /// created again) starts over.
    pub fn share_partitions_record(
        self: &Arc<Self>,
        group_id: &str,
        topic: &str,
        topic_id: uuid::Uuid,
        partitions: &[i32],
    ) -> Option<super::DurableWait> {
        self.change_share_partitions(group_id, |sp| {
            let entry = sp
                .entry(topic.to_string())
                .or_insert_with(|| (topic_id, Default::default()));
            let mut changed = false;
            if entry.0 != topic_id {
                *entry = (topic_id, Default::default());
                changed = true;
            }
            for p in partitions {
                changed |= entry.1.insert(*p);
            }
            changed
        })
    }

    /// Forgets a topic's share-partitions in a share group's document
    /// (DeleteShareGroupOffsets); the wait for the document when it changed.
    pub fn share_partitions_forget(
        self: &Arc<Self>,
        group_id: &str,
        topic: &str,
    ) -> Option<super::DurableWait> {
        self.change_share_partitions(group_id, |sp| sp.remove(topic).is_some())
    }

    fn change_share_partitions(
        self: &Arc<Self>,
        group_id: &str,
        change: impl FnOnce(&mut super::SharePartitions) -> bool,
    ) -> Option<super::DurableWait> {
        let mut st = self.state.lock();
        let g = st.groups.get_mut(group_id).filter(|g| !g.deleting)?;
        if !matches!(g.kind, Kind::Share(_)) || !change(&mut g.share_partitions) {
            return None;
        }
        g.version += 1;
        let spawn = self.start_writer(g);
        let wait = super::DurableWait {
            rx: g.durable.subscribe(),
            version: g.version,
        };
        drop(st);
        if spawn {
            self.spawn_writer(group_id);
        }
        Some(wait)
    }

    /// The share-partitions a share group has assigned, by topic name:
    /// (topic id, partitions). `None` when the group is not a share group
    /// here.
    pub fn share_partitions(&self, group_id: &str) -> Option<super::SharePartitions> {
        let st = self.state.lock();
        let g = st.groups.get(group_id).filter(|g| !g.deleting)?;
        matches!(g.kind, Kind::Share(_)).then(|| g.share_partitions.clone())
    }
}

#[cfg(test)]
#[path = "share_api_tests.rs"]
mod share_api_tests;
