//! A share group as ShareGroupDescribe shows it: state, group epoch,
//! assignment epoch, the assignor `simple`, and each member with its
//! subscription and current partitions by topic id and name.

use uuid::Uuid;

use super::{ShareDescribed, ShareDescribedMember, ShareGroup, Topics};
use crate::groups::share_assignor::SIMPLE;

impl ShareGroup {
    /// The describe view; topic names come from `topics` (the topics now),
    /// else from the subscription metadata (a topic deleted since).
    pub fn describe(&self, topics: &Topics) -> ShareDescribed {
        let name_of = |id: Uuid| -> String {
            topics
                .iter()
                .chain(self.subscription_metadata.iter())
                .find(|(_, (i, _))| *i == id)
                .map(|(n, _)| n.clone())
                .unwrap_or_default()
        };
        ShareDescribed {
            state: self.state().name(),
            group_epoch: self.group_epoch,
            assignment_epoch: self.assignment_epoch,
            assignor_name: SIMPLE,
            members: self
                .members
                .values()
                .map(|m| ShareDescribedMember {
                    member_id: m.member_id.clone(),
                    rack_id: m.rack_id.clone(),
                    member_epoch: m.member_epoch,
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    subscribed_topic_names: m.subscribed.clone(),
                    assignment: m
                        .assigned
                        .iter()
                        .map(|(t, ps)| (*t, name_of(*t), ps.iter().copied().collect()))
                        .collect(),
                })
                .collect(),
        }
    }
}
