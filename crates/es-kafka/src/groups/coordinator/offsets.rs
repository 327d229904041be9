//! The coordinator's offset requests: OffsetCommit (validated by the
//! group's state machine), the materialisation of a committed transaction's
//! offsets, OffsetFetch (which waits for what it shows to be durable) and
//! OffsetDelete. Each change bumps the group's version and hands the write
//! to the group's writer in `persist.rs`.

use std::sync::Arc;

use uuid::Uuid;

use super::{
    live, CommitOutcome, CommitRequest, CommitTopic, Committed, Coordinator, DurableWait,
    FetchedPartition, FetchedTopic, Kind, PartitionOutcome,
};
use crate::groups::classic::ClassicGroup;
use crate::groups::error::GroupError;
use crate::groups::CONSUMER_PROTOCOL_TYPE;

impl Coordinator {
    /// OffsetCommit: validates the committer, applies the offsets in memory
    /// and returns what to wait on before answering.
    pub fn commit(self: &Arc<Self>, req: CommitRequest) -> Result<CommitOutcome, GroupError> {
        let mut st = self.state.lock();
        if st.shut_down {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        let now = self.now();
        let group_id = req.group_id.clone();
        if !st.groups.contains_key(&group_id) {
            if req.generation_id_or_member_epoch >= 0 {
                return Err(if req.version >= 9 {
                    GroupError::GroupIdNotFound
                } else {
                    GroupError::IllegalGeneration
                });
            }
            // A "simple" group: offsets without group management.
            st.create(
                &group_id,
                Kind::Classic(ClassicGroup::new(&group_id, self.config)),
            )?;
        }
        let Some(g) = st.groups.get_mut(&group_id) else {
            return Err(GroupError::UnknownServerError);
        };
        if g.deleting {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        if g.fenced() {
            return Err(GroupError::NotCoordinator);
        }
        g.kind.refuse_offsets(&group_id)?;
        match &mut g.kind {
            Kind::Share(_) => {}
            Kind::Classic(c) => {
                c.validate_offset_commit(
                    &req.member_id,
                    req.group_instance_id.as_deref(),
                    req.generation_id_or_member_epoch,
                )?;
                c.on_offset_commit(now, &req.member_id);
            }
            Kind::Consumer(c) => c.validate_offset_commit(
                &req.member_id,
                req.group_instance_id.as_deref(),
                req.generation_id_or_member_epoch,
                req.transactional,
                req.version,
            )?,
        }
        let ts = self.clock.now_ms();
        let max = self.config.offset_metadata_bytes_max;
        let mut errors = Vec::with_capacity(req.topics.len());
        let mut changed = false;
        for t in req.topics {
            let mut codes = Vec::with_capacity(t.partitions.len());
            for p in t.partitions {
                if p.metadata.as_ref().is_some_and(|m| m.len() > max) {
                    codes.push(Err(GroupError::OffsetMetadataTooLarge));
                    continue;
                }
                g.offsets.entry(t.name.clone()).or_default().insert(
                    p.partition,
                    Committed {
                        offset: p.offset,
                        leader_epoch: p.leader_epoch,
                        metadata: p.metadata.unwrap_or_default(),
                        commit_timestamp_ms: ts,
                        topic_id: t.topic_id,
                    },
                );
                changed = true;
                codes.push(Ok(()));
            }
            errors.push(codes);
        }
        let mut spawn = false;
        let wait = if changed {
            g.version += 1;
            spawn = self.start_writer(g);
            Some(DurableWait {
                rx: g.durable.subscribe(),
                version: g.version,
            })
        } else {
            None
        };
        self.after_op(&mut st, &group_id, now, Vec::new());
        drop(st);
        if spawn {
            self.spawn_writer(&group_id);
        }
        Ok(CommitOutcome { errors, wait })
    }

    /// Writes offsets into a group without any member check: a committed
    /// transaction's offsets, which Kafka materialises whatever the group
    /// became since the TxnOffsetCommit (its `replayEndTransactionMarker`).
    /// A missing group is created as a simple (Empty, classic) group. Returns
    /// the durability wait.
    pub fn commit_transactional(
        self: &Arc<Self>,
        group_id: &str,
        topics: Vec<CommitTopic>,
    ) -> Result<Option<DurableWait>, GroupError> {
        let mut st = self.state.lock();
        if st.shut_down {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        let now = self.now();
        if !st.groups.contains_key(group_id) {
            st.create(
                group_id,
                Kind::Classic(ClassicGroup::new(group_id, self.config)),
            )?;
        }
        let Some(g) = st.groups.get_mut(group_id) else {
            return Err(GroupError::UnknownServerError);
        };
        if g.deleting {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        if g.fenced() {
            return Err(GroupError::NotCoordinator);
        }
        let ts = self.clock.now_ms();
        let mut changed = false;
        for t in topics {
            for p in t.partitions {
                g.offsets.entry(t.name.clone()).or_default().insert(
                    p.partition,
                    Committed {
                        offset: p.offset,
                        leader_epoch: p.leader_epoch,
                        metadata: p.metadata.unwrap_or_default(),
                        commit_timestamp_ms: ts,
                        topic_id: t.topic_id,
                    },
                );
                changed = true;
            }
        }
        let mut spawn = false;
        let wait = if changed {
            g.version += 1;
            spawn = self.start_writer(g);
            Some(DurableWait {
                rx: g.durable.subscribe(),
                version: g.version,
            })
        } else {
            None
        };
        self.after_op(&mut st, group_id, now, Vec::new());
        drop(st);
        if spawn {
            self.spawn_writer(group_id);
        }
        Ok(wait)
    }

    /// OffsetFetch of one group. `topics` of `None` means every partition
    /// with a committed offset. `topic_id` gives a topic's current id (None
    /// when it does not exist). `member` is (member id, epoch) when the
    /// request carries them (v9+), checked for KIP-848 groups.
    pub fn fetch_offsets(
        &self,
        group_id: &str,
        topics: Option<Vec<(String, Vec<i32>)>>,
        member: Option<(&str, i32)>,
        topic_id: &dyn Fn(&str) -> Option<Uuid>,
    ) -> Result<(Vec<FetchedTopic>, Option<DurableWait>), GroupError> {
        let st = self.state.lock();
        if st.shut_down {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        let group = st.groups.get(group_id).filter(|g| !g.deleting);
        if let Some(g) = group {
            if g.fenced() {
                return Err(GroupError::NotCoordinator);
            }
            g.kind.refuse_offsets(group_id)?;
            if let (Kind::Consumer(c), Some((m, epoch))) = (&g.kind, member) {
                c.validate_offset_fetch(m, epoch)?;
            }
        }
        let missing = |p: i32| FetchedPartition {
            partition: p,
            offset: -1,
            leader_epoch: -1,
            metadata: String::new(),
            error: None,
        };
        let found = |p: i32, c: &Committed| FetchedPartition {
            partition: p,
            offset: c.offset,
            leader_epoch: c.leader_epoch,
            metadata: c.metadata.clone(),
            error: None,
        };
        let out = match topics {
            Some(list) => list
                .into_iter()
                .map(|(name, parts)| {
                    let id = topic_id(&name);
                    let partitions = parts
                        .into_iter()
                        .map(|p| match group.and_then(|g| g.offset(&name, p, id)) {
                            Some(c) => found(p, c),
                            None => missing(p),
                        })
                        .collect();
                    FetchedTopic { name, partitions }
                })
                .collect(),
            None => group
                .map(|g| {
                    g.offsets
                        .iter()
                        .filter_map(|(name, ps)| {
                            let id = topic_id(name);
                            let partitions: Vec<FetchedPartition> = ps
                                .iter()
                                .filter(|(_, c)| live(c, id))
                                .map(|(p, c)| found(*p, c))
                                .collect();
                            (!partitions.is_empty()).then(|| FetchedTopic {
                                name: name.clone(),
                                partitions,
                            })
                        })
                        .collect()
                })
                .unwrap_or_default(),
        };
        let wait = group.and_then(|g| {
            (g.version > g.durable.borrow().version).then(|| DurableWait {
                rx: g.durable.subscribe(),
                version: g.version,
            })
        });
        Ok((out, wait))
    }

    /// OffsetDelete: a group-level error, or one code per partition (in
    /// request order) and the durability wait.
    pub fn delete_offsets(
        self: &Arc<Self>,
        group_id: &str,
        topics: &[(String, Vec<i32>)],
    ) -> Result<(Vec<Vec<PartitionOutcome>>, Option<DurableWait>), GroupError> {
        let mut st = self.state.lock();
        if st.shut_down {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        let now = self.now();
        let Some(g) = st.groups.get_mut(group_id).filter(|g| !g.deleting) else {
            return Err(GroupError::GroupIdNotFound);
        };
        if g.fenced() {
            return Err(GroupError::NotCoordinator);
        }
        let subscribed: Box<dyn Fn(&str) -> bool> = match &g.kind {
            Kind::Share(_) => return g.kind.refuse_offsets(group_id).map(|()| (Vec::new(), None)),
            Kind::Classic(c) => {
                c.validate_offset_delete()?;
                let topics = c.subscribed_topics();
                let consumer = c.protocol_type() == Some(CONSUMER_PROTOCOL_TYPE);
                Box::new(move |t: &str| topics.as_ref().map_or(consumer, |s| s.contains(t)))
            }
            Kind::Consumer(c) => {
                let topics = c.subscribed_topic_names();
                Box::new(move |t: &str| topics.contains(t))
            }
        };
        let mut changed = false;
        let mut codes = Vec::with_capacity(topics.len());
        for (name, parts) in topics {
            if subscribed(name) {
                codes.push(vec![Err(GroupError::GroupSubscribedToTopic); parts.len()]);
                continue;
            }
            if let Some(ps) = g.offsets.get_mut(name) {
                for p in parts {
                    changed |= ps.remove(p).is_some();
                }
                if ps.is_empty() {
                    g.offsets.remove(name);
                }
            }
            codes.push(vec![Ok(()); parts.len()]);
        }
        drop(subscribed);
        let mut spawn = false;
        let wait = if changed {
            g.version += 1;
            spawn = self.start_writer(g);
            Some(DurableWait {
                rx: g.durable.subscribe(),
                version: g.version,
            })
        } else {
            None
        };
        self.after_op(&mut st, group_id, now, Vec::new());
        drop(st);
        if spawn {
            self.spawn_writer(group_id);
        }
        Ok((codes, wait))
    }
}
