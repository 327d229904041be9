//! The group and transaction coordinators' state in the image
//! (`coordinator_state.v1`): spaces of keys to JSON documents that es-meta
//! stores and never interprets, so that every node holds every
//! coordinator's durable state and a coordinator that moves with the
//! leadership of its internal partition finds it already applied.
//!
//! The fence: a write names the internal partition that places its keys and
//! the leader epoch its proposer leads it at. It is refused
//! (NOT_COORDINATOR) unless that broker still leads the partition at that
//! epoch, so a deposed coordinator that has not heard of its successor yet
//! cannot overwrite what the successor wrote: the log orders the two, and
//! the later leadership wins. Before the internal topic exists only a broker
//! that is the whole cluster may write.

use crate::records::{code, CoordinatorWrite, LeaderFence, MetaResponse, StateChange};

use super::{MetaEvent, MetaImage};

impl MetaImage {
    /// The documents of one space, by key.
    pub fn coordinator_space(
        &self,
        space: &str,
    ) -> Option<&std::collections::BTreeMap<String, serde_json::Value>> {
        self.coordinator.get(space)
    }

    /// The documents of `space` whose key starts with `prefix`, in key order.
    pub fn coordinator_prefix<'a>(
        &'a self,
        space: &str,
        prefix: &'a str,
    ) -> impl Iterator<Item = (&'a String, &'a serde_json::Value)> + 'a {
        self.coordinator
            .get(space)
            .into_iter()
            .flat_map(move |m| m.range(prefix.to_string()..))
            .take_while(move |(k, _)| k.starts_with(prefix))
    }

    /// Why `fence` does not hold now, if it does not.
    fn fence_refusal(&self, f: &LeaderFence) -> Option<String> {
        let Some(t) = self.topics.get(&f.topic) else {
            let alone = self.brokers.len() == 1 && self.brokers.contains_key(&f.broker_id);
            return (!alone).then(|| {
                format!(
                    "{} does not exist and broker {} is not the whole cluster",
                    f.topic, f.broker_id
                )
            });
        };
        let p = usize::try_from(f.partition)
            .ok()
            .and_then(|i| t.partitions.get(i));
        match p {
            Some(p) if p.leader == f.broker_id && p.leader_epoch == f.leader_epoch => None,
            Some(p) => Some(format!(
                "{}-{} is led by {} at epoch {}, not by {} at epoch {}",
                f.topic, f.partition, p.leader, p.leader_epoch, f.broker_id, f.leader_epoch
            )),
            None => Some(format!("{} has no partition {}", f.topic, f.partition)),
        }
    }

    pub(super) fn coordinator_write(
        &mut self,
        w: &CoordinatorWrite,
        ev: &mut Vec<MetaEvent>,
    ) -> MetaResponse {
        if let Some(why) = self.fence_refusal(&w.fence) {
            return MetaResponse::Error {
                error_code: code::NOT_COORDINATOR,
                message: why,
            };
        }
        let mut touched = Vec::with_capacity(w.changes.len());
        for c in &w.changes {
            match c {
                StateChange::Put { space, key, value } => {
                    self.coordinator
                        .entry(space.clone())
                        .or_default()
                        .insert(key.clone(), value.clone());
                }
                StateChange::Delete { space, key } => {
                    if let Some(m) = self.coordinator.get_mut(space) {
                        m.remove(key);
                    }
                }
                StateChange::DeletePrefix { space, prefix } => {
                    if let Some(m) = self.coordinator.get_mut(space) {
                        m.retain(|k, _| !k.starts_with(prefix.as_str()));
                    }
                }
            }
            if self
                .coordinator
                .get(c.target().0)
                .is_some_and(|m| m.is_empty())
            {
                self.coordinator.remove(c.target().0);
            }
            let (space, key) = c.target();
            touched.push((space.to_string(), key.to_string()));
        }
        ev.push(MetaEvent::CoordinatorState(touched));
        MetaResponse::None
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::image::test_util::Log;
    use crate::records::MetaRequest;

    fn fence(broker_id: i32, leader_epoch: i32) -> LeaderFence {
        LeaderFence {
            topic: "__consumer_offsets".into(),
            partition: 0,
            broker_id,
            leader_epoch,
        }
    }

    fn put(key: &str, v: i64) -> StateChange {
        StateChange::Put {
            space: "offsets".into(),
            key: key.into(),
            value: json!({ "offset": v }),
        }
    }

    fn write(
        log: &mut Log,
        fence: LeaderFence,
        changes: Vec<StateChange>,
    ) -> (MetaResponse, Vec<MetaEvent>) {
        log.apply(MetaRequest::CoordinatorState(CoordinatorWrite {
            fence,
            changes,
        }))
    }

    fn refused(r: (MetaResponse, Vec<MetaEvent>)) -> bool {
        matches!(r, (MetaResponse::Error { error_code, .. }, ev)
            if error_code == code::NOT_COORDINATOR && ev.is_empty())
    }

    #[test]
    fn only_the_current_leader_at_its_epoch_writes() {
        let mut log = Log::with_brokers(3);
        log.topic("__consumer_offsets", vec![vec![1, 2, 3]]);
        let p = log.part("__consumer_offsets", 0).clone();
        assert_eq!(p.leader, 1);

        let ok = write(
            &mut log,
            fence(1, p.leader_epoch),
            vec![put("g\0t\x000", 5)],
        );
        assert_eq!(ok.0, MetaResponse::None);
        assert!(refused(write(
            &mut log,
            fence(2, p.leader_epoch),
            vec![put("g\0t\x000", 9)]
        )));
        assert!(refused(write(
            &mut log,
            fence(1, p.leader_epoch + 1),
            vec![put("g\0t\x000", 9)]
        )));
        let mut gone = fence(1, p.leader_epoch);
        gone.partition = 1;
        assert!(refused(write(&mut log, gone, vec![put("g\0t\x000", 9)])));

        // Leadership moves: the old leader's epoch no longer writes.
        log.fence(1);
        let p2 = log.part("__consumer_offsets", 0).clone();
        assert_ne!(p2.leader, 1);
        assert!(refused(write(
            &mut log,
            fence(1, p.leader_epoch),
            vec![put("g\0t\x000", 9)]
        )));
        let ok = write(
            &mut log,
            fence(p2.leader, p2.leader_epoch),
            vec![put("g\0t\x000", 7)],
        );
        assert_eq!(ok.0, MetaResponse::None);
        let m = log.img.coordinator_space("offsets").unwrap();
        assert_eq!(m["g\0t\x000"], json!({ "offset": 7 }));
    }

    #[test]
    fn without_the_topic_only_a_lone_broker_writes() {
        let mut alone = Log::with_brokers(1);
        assert_eq!(
            write(&mut alone, fence(1, -1), vec![put("k", 1)]).0,
            MetaResponse::None
        );
        let mut three = Log::with_brokers(3);
        assert!(refused(write(&mut three, fence(1, -1), vec![put("k", 1)])));
        assert!(three.img.coordinator.is_empty());
    }

    #[test]
    fn puts_deletes_and_prefix_deletes_apply_in_order_and_report_what_they_touched() {
        let mut log = Log::with_brokers(1);
        let changes = vec![
            put("a\0x", 1),
            put("a\0y", 2),
            put("ab\0x", 3),
            StateChange::DeletePrefix {
                space: "offsets".into(),
                prefix: "a\0".into(),
            },
            put("a\0z", 4),
        ];
        let (resp, ev) = write(&mut log, fence(1, -1), changes);
        assert_eq!(resp, MetaResponse::None);
        let keys: Vec<_> = log
            .img
            .coordinator_prefix("offsets", "a\0")
            .map(|(k, _)| k.clone())
            .collect();
        assert_eq!(keys, vec!["a\0z".to_string()]);
        assert!(log
            .img
            .coordinator_space("offsets")
            .unwrap()
            .contains_key("ab\0x"));
        match &ev[..] {
            [MetaEvent::CoordinatorState(t)] => {
                assert_eq!(t.len(), 5);
                assert_eq!(t[3], ("offsets".to_string(), "a\0".to_string()));
            }
            e => panic!("events {e:?}"),
        }
        // Deleting the last key drops the space, so an emptied image equals a
        // fresh one.
        let all = StateChange::DeletePrefix {
            space: "offsets".into(),
            prefix: String::new(),
        };
        write(&mut log, fence(1, -1), vec![all]);
        assert!(log.img.coordinator.is_empty());
    }
}
