//! The coordinator's KIP-848 requests: ConsumerGroupHeartbeat (creating the
//! group, or converting an empty classic group) and ConsumerGroupDescribe.

use std::sync::Arc;

use super::{Coordinator, Kind};
use crate::groups::consumer::{
    self, ConsumerGroup, HeartbeatRequest as CgHeartbeatRequest,
    HeartbeatResponse as CgHeartbeatResponse,
};
use crate::groups::error::GroupError;

impl Coordinator {
    /// ConsumerGroupHeartbeat. `topics` resolves a topic name to (id,
    /// partition count) and an id to its name, for the server-side assignor.
    pub fn consumer_heartbeat(
        self: &Arc<Self>,
        req: CgHeartbeatRequest,
        topics: &dyn consumer::TopicView,
    ) -> CgHeartbeatResponse {
        let mut st = self.state.lock();
        if st.shut_down {
            return CgHeartbeatResponse::error(GroupError::CoordinatorNotAvailable);
        }
        // Kafka validates the request before it looks the group up.
        if let Err(e) = consumer::validate_heartbeat(&req) {
            return CgHeartbeatResponse::error(e);
        }
        let now = self.now();
        let group_id = req.group_id.clone();
        let cfg = st.config_for(self.config, &group_id);
        match st.groups.get_mut(&group_id) {
            None => {
                // Kafka 4.4: GROUP_ID_NOT_FOUND for any epoch but 0 (a
                // heartbeat, or a member leaving, of a group that is gone).
                if req.member_epoch != 0 {
                    return CgHeartbeatResponse::error(GroupError::GroupNotFound { group_id });
                }
                let kind = Kind::Consumer(ConsumerGroup::new(&group_id, cfg));
                if let Err(e) = st.create(&group_id, kind) {
                    return CgHeartbeatResponse::error(e);
                }
            }
            Some(g) if g.deleting => {
                return CgHeartbeatResponse::error(GroupError::CoordinatorNotAvailable)
            }
            Some(g) => {
                if let Kind::Share(_) = &g.kind {
                    return CgHeartbeatResponse::error(GroupError::NotAConsumerGroup {
                        group_id: group_id.clone(),
                    });
                }
                if let Kind::Classic(c) = &g.kind {
                    if !c.is_empty() {
                        return CgHeartbeatResponse::error(GroupError::NotAConsumerGroup {
                            group_id: group_id.clone(),
                        });
                    }
                    tracing::info!(group = %group_id, "converting empty classic group to a consumer group");
                    g.kind = Kind::Consumer(ConsumerGroup::new(&group_id, cfg));
                }
            }
        }
        let r = match st.groups.get_mut(&group_id).map(|g| &mut g.kind) {
            Some(Kind::Consumer(c)) => c.heartbeat(now, req, topics),
            _ => CgHeartbeatResponse::error(GroupError::UnknownServerError),
        };
        self.after_op(&mut st, &group_id, now, Vec::new());
        r
    }

    /// ConsumerGroupDescribe of one group.
    pub fn consumer_describe(
        &self,
        group_id: &str,
        topics: &dyn consumer::TopicView,
    ) -> Result<consumer::Described, GroupError> {
        let st = self.state.lock();
        match st.groups.get(group_id) {
            Some(g) if !g.deleting => match &g.kind {
                Kind::Consumer(c) => Ok(c.describe(topics)),
                Kind::Classic(_) | Kind::Share(_) => Err(GroupError::NotAConsumerGroup {
                    group_id: group_id.to_string(),
                }),
            },
            _ => Err(GroupError::GroupNotFound {
                group_id: group_id.to_string(),
            }),
        }
    }
}
