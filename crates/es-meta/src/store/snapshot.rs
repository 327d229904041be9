//! The state machine's snapshot: `data/meta/snapshot.json`, the JSON of
//! [`SnapshotFile`] (the snapshot's meta and the whole [`MetaImage`]),
//! replaced atomically, only the newest kept. The same bytes are what a
//! leader sends a follower.

use std::collections::BTreeSet;
use std::io;
use std::path::Path;

use es_storage::fs::Fs;
use openraft::SnapshotMeta;
use serde::{Deserialize, Serialize};

use super::files;
use crate::{MetaEvent, MetaImage, NodeAddr};

/// The snapshot file's name.
pub const SNAPSHOT_FILE: &str = "snapshot.json";

/// What a snapshot holds.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SnapshotFile {
    pub meta: SnapshotMeta<u64, NodeAddr>,
    pub image: MetaImage,
}

impl SnapshotFile {
    pub fn to_bytes(&self) -> io::Result<Vec<u8>> {
        serde_json::to_vec(self).map_err(io::Error::other)
    }

    /// Parses snapshot bytes (from disk or from the leader).
    pub fn from_bytes(bytes: &[u8]) -> io::Result<SnapshotFile> {
        serde_json::from_slice(bytes).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("metadata snapshot does not parse: {e}"),
            )
        })
    }
}

/// Replaces `dir/snapshot.json` with `bytes`, durably.
pub fn persist(fs: &dyn Fs, dir: &Path, bytes: &[u8]) -> io::Result<()> {
    es_storage::meta::write_atomic(fs, &dir.join(SNAPSHOT_FILE), bytes).map_err(files::to_io)
}

/// The persisted snapshot and its bytes, if any.
pub fn load(fs: &dyn Fs, dir: &Path) -> io::Result<Option<(SnapshotFile, Vec<u8>)>> {
    let path = dir.join(SNAPSHOT_FILE);
    if !fs.exists(&path) {
        return Ok(None);
    }
    let bytes = es_storage::meta::read_file(fs, &path).map_err(files::to_io)?;
    let snap = SnapshotFile::from_bytes(&bytes)?;
    Ok(Some((snap, bytes)))
}

/// The events that describe the whole of `new` to a materializer, given the
/// image it replaces: `ClusterId` (if set), `Broker` for every broker,
/// `TopicCreated` for every topic, `TopicDeleted` for every topic of `old`
/// whose id is gone, `BrokerConfigs` and `GroupConfigs` for every config set of either.
pub fn whole_image_events(old: &MetaImage, new: &MetaImage) -> Vec<MetaEvent> {
    let mut ev = Vec::new();
    if new.cluster_id.is_some() {
        ev.push(MetaEvent::ClusterId);
    }
    for id in new.brokers.keys() {
        ev.push(MetaEvent::Broker(*id));
    }
    let new_ids: BTreeSet<&str> = new.topics.values().map(|t| t.id.as_str()).collect();
    for t in old.topics.values() {
        if !new_ids.contains(t.id.as_str()) {
            ev.push(MetaEvent::TopicDeleted {
                name: t.name.clone(),
                id: t.id.clone(),
            });
        }
    }
    for name in new.topics.keys() {
        ev.push(MetaEvent::TopicCreated(name.clone()));
    }
    let sets: BTreeSet<&String> = old
        .broker_configs
        .keys()
        .chain(new.broker_configs.keys())
        .collect();
    for k in sets {
        ev.push(MetaEvent::BrokerConfigs(k.clone()));
    }
    let groups: BTreeSet<&String> = old
        .group_configs
        .keys()
        .chain(new.group_configs.keys())
        .collect();
    for g in groups {
        ev.push(MetaEvent::GroupConfigs(g.clone()));
    }
    let mut touched = Vec::new();
    for (space, keys) in old.coordinator.iter().chain(new.coordinator.iter()) {
        touched.extend(keys.keys().map(|k| (space.clone(), k.clone())));
    }
    if !touched.is_empty() {
        touched.sort();
        touched.dedup();
        ev.push(MetaEvent::CoordinatorState(touched));
    }
    ev
}
