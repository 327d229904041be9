//! The group coordinator's durable state in the metadata quorum, so that a
//! group's committed offsets survive the loss of its coordinator's node.
//!
//! Every change a coordinator makes durable (a group's type, its offsets,
//! its deletion) is one `coordinator_state.v1` entry: the keys of the
//! group's document that changed since the image last held it, in the
//! spaces [`GROUPS_SPACE`] (group id → type, protocol type and a share
//! group's assigned share-partitions) and [`OFFSETS_SPACE`] (group, topic,
//! partition → one committed offset). The
//! entry is fenced by the leader epoch of the group's `__consumer_offsets`
//! partition at which this broker took the partition over, so a deposed
//! coordinator's late write is refused by the log instead of overwriting
//! its successor's.
//!
//! Every node applies every entry and writes the group's document,
//! `data/groups/<group>.json`, from the image (the layout of the storage
//! document, on every replica). The coordinator in memory follows the
//! leadership of `__consumer_offsets`: when this broker starts leading a
//! partition it reloads that partition's groups from the image, when it
//! stops it unloads them ([`Broker::reconcile_groups`]), and with them the
//! transactional offsets pending for the groups (space
//! [`txn_remote::TXN_REMOTE_SPACE`], `broker_txn_remote.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Weak};

use es_meta::image::MetaEvent;
use es_meta::records::{CoordinatorWrite, LeaderFence, MetaRequest, MetaResponse, StateChange};
use es_meta::MetaImage;
use es_storage::StorageError;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use super::Broker;
use crate::groups::coordinator::{GroupLog, LogFuture};

#[path = "broker_txn_remote.rs"]
mod txn_remote;
use crate::groups::store::{self, GroupFile, OffsetEntry, ShareTopicEntry};
use crate::topics::CONSUMER_OFFSETS_TOPIC;

/// Group id → [`GroupMeta`].
pub const GROUPS_SPACE: &str = "groups";
/// [`offset_key`] → [`OffsetEntry`].
pub const OFFSETS_SPACE: &str = "offsets";

/// A group's type, protocol type and (a share group's) assigned
/// share-partitions: its document without the offsets.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct GroupMeta {
    #[serde(rename = "type")]
    group_type: String,
    #[serde(default)]
    protocol_type: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    share_partitions: Vec<ShareTopicEntry>,
}

/// The prefix of every offset key of `group`: the group id as a JSON
/// string (self-delimiting, no NUL inside), then NUL.
fn offsets_prefix(group: &str) -> String {
    let mut k = serde_json::Value::String(group.to_string()).to_string();
    k.push('\0');
    k
}

/// The key of one committed offset.
fn offset_key(group: &str, topic: &str, partition: i32) -> String {
    format!("{}{topic}\0{partition}", offsets_prefix(group))
}

/// The group an offset key belongs to.
fn group_of_offset_key(key: &str) -> Option<String> {
    let end = key.find('\0')?;
    serde_json::from_str(&key[..end]).ok()
}

/// The group's document as the image holds it.
fn image_document(image: &MetaImage, group: &str) -> Option<GroupFile> {
    let meta: GroupMeta =
        serde_json::from_value(image.coordinator_space(GROUPS_SPACE)?.get(group)?.clone()).ok()?;
    let prefix = offsets_prefix(group);
    let offsets = image
        .coordinator_prefix(OFFSETS_SPACE, &prefix)
        .filter_map(|(_, v)| serde_json::from_value::<OffsetEntry>(v.clone()).ok())
        .collect();
    Some(GroupFile {
        group: group.to_string(),
        group_type: meta.group_type,
        protocol_type: meta.protocol_type,
        offsets,
        share_partitions: meta.share_partitions,
    })
}

/// The changes that make the image hold `doc` for its group.
fn changes_to(image: &MetaImage, doc: &GroupFile) -> Vec<StateChange> {
    let mut out = Vec::new();
    let meta = GroupMeta {
        group_type: doc.group_type.clone(),
        protocol_type: doc.protocol_type.clone(),
        share_partitions: doc.share_partitions.clone(),
    };
    let meta = serde_json::to_value(&meta).unwrap_or_default();
    let held_meta = image
        .coordinator_space(GROUPS_SPACE)
        .and_then(|m| m.get(&doc.group));
    if held_meta != Some(&meta) {
        out.push(StateChange::Put {
            space: GROUPS_SPACE.into(),
            key: doc.group.clone(),
            value: meta,
        });
    }
    let prefix = offsets_prefix(&doc.group);
    let mut held: BTreeMap<&str, &serde_json::Value> = image
        .coordinator_prefix(OFFSETS_SPACE, &prefix)
        .map(|(k, v)| (k.as_str(), v))
        .collect();
    for o in &doc.offsets {
        let key = offset_key(&doc.group, &o.topic, o.partition);
        let value = serde_json::to_value(o).unwrap_or_default();
        if held.remove(key.as_str()) != Some(&value) {
            out.push(StateChange::Put {
                space: OFFSETS_SPACE.into(),
                key,
                value,
            });
        }
    }
    for key in held.into_keys() {
        out.push(StateChange::Delete {
            space: OFFSETS_SPACE.into(),
            key: key.to_string(),
        });
    }
    out
}

/// The `__consumer_offsets` partitions `me` leads in `image`, with their
/// leader epochs.
fn led_here(image: &MetaImage, me: i32) -> BTreeMap<i32, i32> {
    image
        .topics
        .get(CONSUMER_OFFSETS_TOPIC)
        .map(|t| {
            t.partitions
                .iter()
                .zip(0..)
                .filter(|(p, _)| p.leader == me)
                .map(|(p, i)| (i, p.leader_epoch))
                .collect()
        })
        .unwrap_or_default()
}

/// The `__consumer_offsets` partitions this broker coordinates, with the
/// leader epoch it took each over at; `None` until the coordinator follows
/// leadership ([`Broker::follow_group_leadership`]), so that the replay of
/// the log at startup does not reload groups before the import.
#[derive(Debug, Default)]
struct Led(Mutex<Option<BTreeMap<i32, i32>>>);

/// The [`GroupLog`] of a broker: the metadata quorum.
#[derive(Debug)]
pub(crate) struct QuorumGroups(pub(crate) Weak<Broker>);

impl GroupLog for QuorumGroups {
    fn write(&self, doc: GroupFile) -> LogFuture {
        let b = self.0.clone();
        Box::pin(async move {
            let b = b.upgrade().ok_or("the broker is shutting down")?;
            let Some(image) = b.image() else {
                return Err("metadata not started".into());
            };
            let changes = changes_to(&image, &doc);
            b.write_group_state(&doc.group, changes).await
        })
    }

    fn remove(&self, group: String) -> LogFuture {
        let b = self.0.clone();
        Box::pin(async move {
            let b = b.upgrade().ok_or("the broker is shutting down")?;
            let changes = vec![
                StateChange::DeletePrefix {
                    space: OFFSETS_SPACE.into(),
                    prefix: offsets_prefix(&group),
                },
                StateChange::Delete {
                    space: GROUPS_SPACE.into(),
                    key: group.clone(),
                },
            ];
            b.write_group_state(&group, changes).await
        })
    }
}

impl Broker {
    fn led_offsets(&self) -> Arc<Led> {
        self.extension(Led::default)
    }

    /// Who may write `group`'s state: this broker at the epoch it took the
    /// group's partition over at (or, before the topic exists, alone).
    fn group_fence(&self, group: &str) -> LeaderFence {
        let partition = self.offsets_partition(group);
        let leader_epoch = self
            .led_offsets()
            .0
            .lock()
            .as_ref()
            .and_then(|led| led.get(&partition).copied())
            .unwrap_or(-1);
        LeaderFence {
            topic: CONSUMER_OFFSETS_TOPIC.into(),
            partition,
            broker_id: self.node_id(),
            leader_epoch,
        }
    }

    async fn write_group_state(
        &self,
        group: &str,
        changes: Vec<StateChange>,
    ) -> Result<(), String> {
        if changes.is_empty() {
            return Ok(());
        }
        let req = MetaRequest::CoordinatorState(CoordinatorWrite {
            fence: self.group_fence(group),
            changes,
        });
        match self.propose(req).await {
            Ok(MetaResponse::Error { message, .. }) => Err(message),
            Ok(_) => Ok(()),
            Err(e) => Err(e.message),
        }
    }

    /// Writes the documents of the groups an applied entry touched from the
    /// image (or removes them). Blocking; idempotent.
    pub(crate) fn materialize_groups(
        &self,
        image: &MetaImage,
        touched: &[(String, String)],
    ) -> Result<(), StorageError> {
        let groups: BTreeSet<String> = touched
            .iter()
            .filter_map(|(space, key)| match space.as_str() {
                GROUPS_SPACE => Some(key.clone()),
                OFFSETS_SPACE => group_of_offset_key(key),
                _ => None,
            })
            .collect();
        let dir = self.config.data_dir.join(store::GROUPS_DIR);
        for g in groups {
            match image_document(image, &g) {
                Some(doc) => store::write(self.fs.as_ref(), &dir, &doc)?,
                None => store::remove(self.fs.as_ref(), &dir, &g)?,
            }
        }
        Ok(())
    }

    /// Follows the leadership of `__consumer_offsets` after an applied
    /// event (or at startup, with `None`): reloads the groups of every
    /// partition this broker now leads at a new epoch, unloads those of
    /// every partition it stopped leading.
    pub(crate) fn reconcile_groups(&self, image: &MetaImage, e: Option<&MetaEvent>) {
        if let Some(MetaEvent::CoordinatorState(touched)) = e {
            let led = self.led_offsets();
            let led = led.0.lock();
            self.remote_offsets_applied(image, touched, led.as_ref());
            return;
        }
        let relevant = match e {
            None => true,
            Some(MetaEvent::Leadership { name, .. })
            | Some(MetaEvent::TopicCreated(name))
            | Some(MetaEvent::PartitionsCreated { name, .. })
            | Some(MetaEvent::TopicDeleted { name, .. }) => name == CONSUMER_OFFSETS_TOPIC,
            _ => false,
        };
        if !relevant {
            return;
        }
        let now = led_here(image, self.node_id());
        let count = image
            .topics
            .get(CONSUMER_OFFSETS_TOPIC)
            .map_or(0, |t| i32::try_from(t.partitions.len()).unwrap_or(i32::MAX));
        let led = self.led_offsets();
        let mut led = led.0.lock();
        let Some(led) = led.as_mut() else {
            return;
        };
        let placed_on = |ps: BTreeSet<i32>| {
            move |g: &str| count > 0 && ps.contains(&super::key_partition(g, count))
        };
        let gained: BTreeSet<i32> = now
            .iter()
            .filter(|(p, e)| led.get(p) != Some(e))
            .map(|(p, _)| *p)
            .collect();
        let lost: BTreeSet<i32> = if e.is_none() {
            // At startup memory holds every group of the files: keep only
            // those of the partitions led here.
            (0..count).filter(|p| !now.contains_key(p)).collect()
        } else {
            led.keys()
                .filter(|p| !now.contains_key(p))
                .copied()
                .collect()
        };
        if !lost.is_empty() {
            let n = self.groups().unload(&placed_on(lost.clone()));
            tracing::info!(partitions = ?lost, groups = n, "no longer coordinating these __consumer_offsets partitions");
        }
        if !gained.is_empty() {
            let docs: Vec<GroupFile> = image
                .coordinator_space(GROUPS_SPACE)
                .into_iter()
                .flat_map(|m| m.keys())
                .filter(|g| gained.contains(&super::key_partition(g, count)))
                .filter_map(|g| image_document(image, g))
                .collect();
            let n = docs.len();
            self.groups().reload(docs, &placed_on(gained.clone()));
            tracing::info!(partitions = ?gained, groups = n, "coordinating these __consumer_offsets partitions");
        }
        self.reconcile_remote_offsets(image, &now, count, &gained, e.is_none());
        *led = now;
    }

    /// Sends the coordinator's writes to the quorum and makes it follow
    /// the leadership of `__consumer_offsets` from now on (startup, once
    /// this broker is registered). First, once, when the quorum holds no
    /// group yet: hands the groups this broker loaded from its own files (a
    /// data directory from before the groups' state was replicated) to the
    /// quorum, so that the first reload does not drop them.
    pub(crate) async fn follow_group_leadership(self: &Arc<Self>) {
        self.groups()
            .set_log(Arc::new(QuorumGroups(Arc::downgrade(self))));
        self.import_groups().await;
        *self.led_offsets().0.lock() = Some(BTreeMap::new());
        self.remote_offsets_enter_quorum();
        if let Some(image) = self.image() {
            self.reconcile_groups(&image, None);
        }
        self.import_remote_offsets().await;
    }

    async fn import_groups(&self) {
        let Some(image) = self.image() else {
            return;
        };
        if image.coordinator_space(GROUPS_SPACE).is_some() {
            return;
        }
        let docs = self.groups().group_documents();
        if docs.is_empty() {
            return;
        }
        *self.led_offsets().0.lock() = Some(led_here(&image, self.node_id()));
        let mut imported = 0;
        for doc in docs {
            let changes = changes_to(&image, &doc);
            match self.write_group_state(&doc.group, changes).await {
                Ok(()) => imported += 1,
                Err(e) => {
                    tracing::warn!(group = %doc.group, error = %e, "could not hand the group's offsets to the quorum")
                }
            }
        }
        tracing::info!(
            groups = imported,
            "handed the groups of this data directory to the quorum"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_keys_name_their_group_and_prefixes_do_not_overlap() {
        for g in ["", "g", "g\"x", "a\0b", "ü", "g\\"] {
            let k = offset_key(g, "t", 3);
            assert_eq!(group_of_offset_key(&k).as_deref(), Some(g));
            assert!(k.starts_with(&offsets_prefix(g)));
        }
        assert!(!offset_key("g\"x", "t", 0).starts_with(&offsets_prefix("g")));
        assert!(!offset_key("gx", "t", 0).starts_with(&offsets_prefix("g")));
    }

    #[test]
    fn a_share_group_s_partitions_travel_with_its_type() {
        let doc = |share_partitions: Vec<ShareTopicEntry>| GroupFile {
            group: "g".into(),
            group_type: store::TYPE_SHARE.into(),
            protocol_type: Some("share".into()),
            offsets: Vec::new(),
            share_partitions,
        };
        let image = MetaImage::default();
        let entries = vec![ShareTopicEntry {
            topic: "t".into(),
            topic_id: "00000000-0000-0000-0000-000000000007".into(),
            partitions: vec![0, 2],
        }];
        let changes = changes_to(&image, &doc(entries.clone()));
        let [StateChange::Put { space, key, value }] = changes.as_slice() else {
            panic!("one put of the group's meta: {changes:?}");
        };
        assert_eq!((space.as_str(), key.as_str()), (GROUPS_SPACE, "g"));
        let meta: GroupMeta = serde_json::from_value(value.clone()).expect("meta");
        assert_eq!(meta.share_partitions, entries);
        // A group without share-partitions keeps the value it always had,
        // so images written before share groups compare equal.
        let changes = changes_to(&image, &doc(Vec::new()));
        let [StateChange::Put { value, .. }] = changes.as_slice() else {
            panic!("one put: {changes:?}");
        };
        assert_eq!(
            value,
            &serde_json::json!({"type": "share", "protocol_type": "share"})
        );
    }
}
