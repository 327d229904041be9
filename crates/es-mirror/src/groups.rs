//! Copying consumer group offsets from the source: for every group a link
//! names (or whose name matches one of its patterns), the offsets the
//! source has committed on the link's mirror topics are committed on es
//! unchanged (the mirror keeps every record at its source offset, so there
//! is nothing to translate), as a commit outside the group's membership
//! (generation -1, as AlterConsumerGroupOffsets does). Only groups this node
//! coordinates, and only while the group has no active member here: once
//! consumers run on es, their own commits win.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use es_kafka::broker::Broker;
use es_kafka::groups::coordinator::{CommitPartition, CommitRequest, CommitTopic};
use es_meta::mirror::{MirrorLink, MirrorTopic};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};
use regex::Regex;

use crate::source::{client_config, SOURCE_REQUEST_TIMEOUT};

/// Most groups one link copies per sync.
pub const GROUPS_PER_SYNC_MAX: usize = 1_000;

/// Longest a copied commit may take to become durable.
const COMMIT_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// States of a group with no active member.
const IDLE_STATES: &[&str] = &["Empty", "Dead", ""];

/// One group's copied offsets: (es topic, partition, offset).
pub type Synced = Vec<(String, i32, i64)>;

/// The groups a link copies: its names, and the source's groups matching
/// its patterns.
pub fn groups_of(link: &MirrorLink, source: &BaseConsumer) -> Result<Vec<String>, String> {
    let mut out: Vec<String> = link.groups.clone();
    if !link.group_patterns.is_empty() {
        let res: Vec<Regex> = link
            .group_patterns
            .iter()
            .filter_map(|p| Regex::new(&format!("^(?:{p})$")).ok())
            .collect();
        let list = source
            .fetch_group_list(None, SOURCE_REQUEST_TIMEOUT)
            .map_err(|e| format!("listing the source's groups: {e}"))?;
        for g in list.groups() {
            if res.iter().any(|r| r.is_match(g.name())) && !out.iter().any(|o| o == g.name()) {
                out.push(g.name().to_string());
            }
        }
    }
    out.truncate(GROUPS_PER_SYNC_MAX);
    Ok(out)
}

/// Consumers that read one group's committed offsets on the source, kept
/// between syncs.
#[derive(Default)]
pub struct GroupReaders {
    readers: HashMap<String, BaseConsumer>,
}

impl GroupReaders {
    /// Copies `groups`' offsets on `topics` (es topic -> source topic and
    /// partition count) from the source to es. Per group, what it
    /// committed, or why it was skipped.
    pub fn sync(
        &mut self,
        rt: &tokio::runtime::Handle,
        broker: &Arc<Broker>,
        link: &MirrorLink,
        groups: &[String],
        topics: &[(MirrorTopic, i32)],
    ) -> BTreeMap<String, Result<Synced, String>> {
        let mut out = BTreeMap::new();
        if topics.is_empty() {
            return out;
        }
        let states: HashMap<String, String> = broker
            .groups()
            .list(&[], &[])
            .into_iter()
            .map(|l| (l.group_id, l.state))
            .collect();
        for g in groups {
            if broker.owns_group(g).is_err() {
                continue;
            }
            if let Some(state) = states.get(g) {
                if !IDLE_STATES.contains(&state.as_str()) {
                    out.insert(g.clone(), Err(format!("active on es ({state})")));
                    continue;
                }
            }
            let r = self.sync_one(rt, broker, link, g, topics);
            out.insert(g.clone(), r);
        }
        out
    }

    fn sync_one(
        &mut self,
        rt: &tokio::runtime::Handle,
        broker: &Arc<Broker>,
        link: &MirrorLink,
        group: &str,
        topics: &[(MirrorTopic, i32)],
    ) -> Result<Synced, String> {
        if !self.readers.contains_key(group) {
            let c: BaseConsumer = client_config(link, group, false)
                .create()
                .map_err(|e| e.to_string())?;
            self.readers.insert(group.to_string(), c);
        }
        let Some(reader) = self.readers.get(group) else {
            return Err("no reader".into());
        };
        let mut tpl = TopicPartitionList::new();
        for (t, n) in topics {
            for p in 0..*n {
                tpl.add_partition(&t.source_topic, p);
            }
        }
        let committed = reader
            .committed_offsets(tpl, SOURCE_REQUEST_TIMEOUT)
            .map_err(|e| format!("reading the source's offsets: {e}"))?;
        let mut synced = Vec::new();
        let mut commit_topics = Vec::new();
        for (t, _) in topics {
            let Some(local) = broker.topic(&t.topic) else {
                continue;
            };
            let mut ct = CommitTopic {
                name: t.topic.clone(),
                topic_id: local.id,
                partitions: Vec::new(),
            };
            for e in committed.elements_for_topic(&t.source_topic) {
                if let Offset::Offset(o) = e.offset() {
                    ct.partitions.push(CommitPartition {
                        partition: e.partition(),
                        offset: o,
                        leader_epoch: -1,
                        metadata: Some(e.metadata().to_string()),
                    });
                    synced.push((t.topic.clone(), e.partition(), o));
                }
            }
            if !ct.partitions.is_empty() {
                commit_topics.push(ct);
            }
        }
        if commit_topics.is_empty() {
            return Ok(synced);
        }
        let req = CommitRequest {
            group_id: group.to_string(),
            generation_id_or_member_epoch: -1,
            member_id: String::new(),
            group_instance_id: None,
            version: 8,
            transactional: false,
            topics: commit_topics,
        };
        let outcome = broker.groups().commit(req).map_err(|e| e.to_string())?;
        if let Some(e) = outcome
            .errors
            .iter()
            .flatten()
            .find_map(|r| r.as_ref().err())
        {
            return Err(format!("es refused the commit: {e}"));
        }
        if let Some(w) = outcome.wait {
            rt.block_on(tokio::time::timeout(COMMIT_WAIT, w.wait()))
                .map_err(|_| "the commit did not become durable in time".to_string())?
                .map_err(|e| e.to_string())?;
        }
        Ok(synced)
    }
}
