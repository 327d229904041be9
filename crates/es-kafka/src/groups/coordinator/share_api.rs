//! The coordinator's share-group requests (KIP-932): ShareGroupHeartbeat
//! (creating the group at a member's first heartbeat, recording every
//! share-partition it assigns in the group's document) and
//! ShareGroupDescribe.

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
        let r = c.heartbeat(now, &req, &all);
        // Every share-partition the group hands out is recorded (design
        // §3.8): what DescribeShareGroupOffsets without topics and
        // DeleteShareGroupOffsets read. Written without waiting, as the
        // group's type is: a member may fetch before the document lands.
        let mut recorded = false;
        for (topic_id, p) in c.assigned_partitions() {
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
