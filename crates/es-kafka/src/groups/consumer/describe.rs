//! A consumer group as ConsumerGroupDescribe shows it: state, epochs, the
//! preferred assignor, and each member with its current and target
//! assignment by topic id and name.

use uuid::Uuid;

use super::{ConsumerGroup, Described, DescribedMember, TopicView};
use crate::groups::assignor::Assignment;

impl ConsumerGroup {
    pub fn describe(&self, topics: &dyn TopicView) -> Described {
        let named = |a: &Assignment| -> Vec<(Uuid, String, Vec<i32>)> {
            a.iter()
                .map(|(t, ps)| {
                    (
                        *t,
                        topics.name_of(*t).unwrap_or_default(),
                        ps.iter().copied().collect(),
                    )
                })
                .collect()
        };
        let empty = Assignment::new();
        Described {
            state: self.state_name(),
            group_epoch: self.group_epoch,
            assignment_epoch: self.assignment_epoch,
            assignor_name: self.preferred_assignor(),
            members: self
                .members
                .values()
                .map(|m| DescribedMember {
                    member_id: m.member_id.clone(),
                    instance_id: m.instance_id.clone(),
                    rack_id: m.rack_id.clone(),
                    member_epoch: m.member_epoch,
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    subscribed_topic_names: m.subscribed.clone(),
                    subscribed_topic_regex: m.regex.clone().unwrap_or_default(),
                    assignment: named(&m.assigned),
                    target_assignment: named(self.targets.get(&m.member_id).unwrap_or(&empty)),
                })
                .collect(),
        }
    }
}
