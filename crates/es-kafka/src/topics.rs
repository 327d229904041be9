//! Topics on disk and in memory: `data/topics/<name>/topic.json` plus one
//! directory per partition, as the storage document lays them out.
//!
//! Invariants:
//! - `topic.json` is written last when a topic is created (it is the commit
//!   point) and replaced atomically; a topic directory without it is the debris
//!   of a crash mid-create and is removed at startup.
//! - A deleted topic's directory is first renamed to a name that cannot be a
//!   topic (`<name>~<id>.deleted`, `~` is not a topic character), then removed;
//!   startup finishes any deletion a crash interrupted.
//! - Everything created here is mode 0700/0600 through the es-storage [`Fs`].
//!
//! The functions on disk are blocking; the async callers run them on
//! blocking threads.
//!
//! Hosting: in a cluster a topic's partitions are spread over the brokers,
//! and a broker opens only the partitions placed on it (the metadata
//! image's replica assignment). Every broker keeps the topic's
//! `topic.json`, so it knows the topic and its partition count; a
//! [`Topic`] answers [`Topic::partition`] only for a partition open here,
//! and [`Topic::has_partition`] for every partition the topic has. On a
//! single node every partition is hosted.
//!
//! The background cleaners' policies come from here too: a topic's Kafka
//! configs (`cleanup.policy`, `retention.ms`, `retention.bytes`,
//! `delete.retention.ms`, `min.cleanable.dirty.ratio`, `min.compaction.lag.ms`,
//! `max.compaction.lag.ms`) become es-storage's
//! [`RetentionPolicy`] and [`CompactionPolicy`], read afresh for every pass so
//! that AlterConfigs takes effect at the next one.
//!
//! Internal topics: Kafka calls a topic internal by its name alone
//! (`__consumer_offsets`, `__transaction_state`, `__share_group_state`), and
//! so does es ([`is_internal`]): Metadata flags them, clients cannot produce
//! to them or delete their records. The ones es creates itself are
//! `__consumer_offsets`, as an ordinary stored topic (with Kafka's configs
//! for it, [`offsets_topic_overrides`]) on the first group coordinator
//! lookup, and `__transaction_state` ([`transaction_state_overrides`]) on
//! the first transaction coordinator lookup. es keeps committed offsets in
//! the group coordinator's own files and transactions in the metadata log,
//! so their logs stay empty; their partitions place
//! the coordinators (a key's coordinator is the leader of its partition).
//! `__consumer_offsets` also exists so that every API sees the same topic,
//! with one id, that Kafka clients expect (KIP-848 regexes match it, a
//! consumer assigned to it can list offsets and fetch). Its id is random and
//! persisted in its `topic.json` like every topic's: a deleted and re-created
//! offsets topic gets a new id, as on Kafka, which is how clients and the
//! KIP-848 regex resolution notice a re-creation (a name-derived id would
//! hide it).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use es_storage::{
    meta, CompactionPolicy, FlushPolicy, Fs, Partition, PartitionConfig, RecordView,
    RetentionPolicy, Storage, StorageError,
};
use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;
use uuid::Uuid;

use crate::config::{
    BrokerTopicDefaults, TopicConfig, TopicRules, OFFSETS_TOPIC_SEGMENT_BYTES,
    TRANSACTION_STATE_MIN_ISR, TRANSACTION_STATE_SEGMENT_BYTES,
};
use crate::partition_log::PartitionLog;

/// Longest topic name Kafka allows.
pub const TOPIC_NAME_CHARS_MAX: usize = 249;
/// Most partitions one topic may have (a bound on directories and memory).
pub const PARTITIONS_MAX: i32 = 10_000;
/// Name of the topic metadata file.
pub const TOPIC_FILE: &str = "topic.json";
/// Suffix of a topic directory being deleted.
pub const DELETED_SUFFIX: &str = ".deleted";
/// A partition directory this broker no longer hosts is renamed to
/// `<index>.removed` inside its topic's directory before it is removed;
/// loading finishes an interrupted removal.
pub const REMOVED_SUFFIX: &str = ".removed";

/// Kafka's topic of committed offsets and group metadata.
pub const CONSUMER_OFFSETS_TOPIC: &str = "__consumer_offsets";
/// Kafka's topic of transaction states.
pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";
/// The names Kafka treats as internal topics (`Topic.INTERNAL_TOPICS`).
const INTERNAL_TOPICS: [&str; 3] = [
    CONSUMER_OFFSETS_TOPIC,
    TRANSACTION_STATE_TOPIC,
    "__share_group_state",
];

/// Whether Kafka treats a topic of this name as internal: flagged in
/// Metadata and DescribeTopicPartitions, closed to Produce and DeleteRecords.
pub fn is_internal(name: &str) -> bool {
    INTERNAL_TOPICS.contains(&name)
}

/// The config overrides Kafka gives `__consumer_offsets` when it creates it
/// (`GroupCoordinatorService.groupMetadataTopicConfigs`): compacted, the
/// producer's compression, 100 MiB segments. They show in DescribeConfigs
/// as topic overrides, as on Kafka.
pub fn offsets_topic_overrides() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("cleanup.policy".to_string(), "compact".to_string()),
        ("compression.type".to_string(), "producer".to_string()),
        (
            "segment.bytes".to_string(),
            OFFSETS_TOPIC_SEGMENT_BYTES.to_string(),
        ),
    ])
}

/// The config overrides Kafka gives `__transaction_state` when it creates
/// it (`TransactionStateManager.transactionTopicConfigs`): no unclean leader
/// election, uncompressed, compacted, `transaction.state.log.min.isr` as
/// its `min.insync.replicas` and `transaction.state.log.segment.bytes` as
/// its segments.
pub fn transaction_state_overrides() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("cleanup.policy".to_string(), "compact".to_string()),
        ("compression.type".to_string(), "uncompressed".to_string()),
        (
            "min.insync.replicas".to_string(),
            TRANSACTION_STATE_MIN_ISR.to_string(),
        ),
        (
            "segment.bytes".to_string(),
            TRANSACTION_STATE_SEGMENT_BYTES.to_string(),
        ),
        (
            "unclean.leader.election.enable".to_string(),
            "false".to_string(),
        ),
    ])
}

/// Checks a topic name as Kafka does: 1..=249 characters of `[a-zA-Z0-9._-]`,
/// and not `.` or `..`.
pub fn validate_topic_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("topic name is empty".into());
    }
    if name == "." || name == ".." {
        return Err(format!("topic name cannot be {name:?}"));
    }
    if name.len() > TOPIC_NAME_CHARS_MAX {
        return Err(format!(
            "topic name is longer than {TOPIC_NAME_CHARS_MAX} characters"
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '.' || *c == '_' || *c == '-'))
    {
        return Err(format!("topic name {name:?} contains {c:?}; only ASCII letters, digits, '.', '_' and '-' are allowed"));
    }
    Ok(())
}

/// The contents of `topic.json`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct TopicMeta {
    pub name: String,
    /// Kafka topic id (Fetch v13+, Metadata v10+).
    pub id: String,
    pub partitions: i32,
    /// Config overrides only; defaults are not stored.
    #[serde(default)]
    pub config: BTreeMap<String, String>,
}

/// Waiters for new data on one partition: long-polling fetches register a
/// [`Notify`] and the partition's listener wakes them all when the high
/// watermark advances. `notify_one` stores a permit, so a wake that races with
/// registration is never lost.
#[derive(Debug, Default)]
pub struct Waiters {
    list: Mutex<Vec<Arc<Notify>>>,
}

impl Waiters {
    pub fn register(&self, n: &Arc<Notify>) {
        let mut l = self.list.lock();
        if !l.iter().any(|x| Arc::ptr_eq(x, n)) {
            l.push(n.clone());
        }
    }

    pub fn deregister(&self, n: &Arc<Notify>) {
        self.list.lock().retain(|x| !Arc::ptr_eq(x, n));
    }

    pub fn wake_all(&self) {
        for n in self.list.lock().drain(..) {
            n.notify_one();
        }
    }

    pub fn len(&self) -> usize {
        self.list.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One open partition of a topic.
#[derive(Debug)]
pub struct PartitionSlot {
    pub index: i32,
    pub log: PartitionLog,
    pub waiters: Arc<Waiters>,
    /// Bytes and records in and out (docs/metrics.md).
    pub traffic: crate::metrics::Traffic,
}

/// An open topic.
#[derive(Debug)]
pub struct Topic {
    pub name: String,
    pub id: Uuid,
    dir: PathBuf,
    settings: RwLock<Settings>,
    partitions: RwLock<Hosted>,
    /// Held by a background cleaner while it works on one of this topic's
    /// partitions, and by [`delete_topic`] while it removes the topic, so a
    /// compaction never writes into a directory being deleted.
    cleaning: Mutex<()>,
    /// Set (under `cleaning`) once the topic is deleted: cleaners skip it.
    deleted: AtomicBool,
}

/// A topic's partitions: how many it has, and the ones open here (by index;
/// `None` for a partition another broker hosts).
#[derive(Debug, Default)]
struct Hosted {
    slots: Vec<Option<Arc<PartitionSlot>>>,
}

impl Hosted {
    fn open(&self) -> impl Iterator<Item = &Arc<PartitionSlot>> {
        self.slots.iter().flatten()
    }
}

/// Which partitions of a topic this broker hosts: all of them on a single
/// node, the ones the metadata image places here in a cluster.
pub type HostedFilter<'a> = &'a dyn Fn(i32) -> bool;

/// Hosts every partition.
pub fn host_all(_: i32) -> bool {
    true
}

/// A topic's config and the rules parsed from it, replaced together.
#[derive(Debug)]
struct Settings {
    config: TopicConfig,
    rules: TopicRules,
}

impl Settings {
    fn new(config: TopicConfig) -> Self {
        Settings {
            rules: config.rules(),
            config,
        }
    }
}

impl Topic {
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn config(&self) -> TopicConfig {
        self.settings.read().config.clone()
    }

    /// What produce and fetch requests check of the config, without
    /// cloning or parsing it.
    pub fn rules(&self) -> TopicRules {
        self.settings.read().rules
    }

    /// The partition, if it is open here.
    pub fn partition(&self, index: i32) -> Option<Arc<PartitionSlot>> {
        usize::try_from(index)
            .ok()
            .and_then(|i| self.partitions.read().slots.get(i).cloned().flatten())
    }

    /// Whether the topic has this partition (hosted here or elsewhere).
    pub fn has_partition(&self, index: i32) -> bool {
        (0..self.partition_count()).contains(&index)
    }

    /// The partitions open here.
    pub fn partitions(&self) -> Vec<Arc<PartitionSlot>> {
        self.partitions.read().open().cloned().collect()
    }

    /// How many partitions the topic has, on every broker.
    pub fn partition_count(&self) -> i32 {
        self.partitions.read().slots.len() as i32
    }

    /// Opens the partitions `hosted` names that are not open yet (a
    /// partition placed here after the topic was loaded). Blocking.
    pub fn host(&self, storage: &Storage, hosted: HostedFilter<'_>) -> Result<(), StorageError> {
        let cfg = self.config();
        let missing: Vec<i32> = {
            let h = self.partitions.read();
            (0..h.slots.len() as i32)
                .filter(|i| h.slots[*i as usize].is_none() && hosted(*i))
                .collect()
        };
        for i in missing {
            let slot = open_partition(storage, &self.dir, i, &cfg)?;
            let mut h = self.partitions.write();
            if let Some(s @ None) = h.slots.get_mut(i as usize) {
                *s = Some(slot);
            }
        }
        Ok(())
    }

    /// Closes partition `index` and removes its directory: this broker is
    /// no longer one of its replicas. The directory is renamed out of the
    /// way first (and the rename synced), so a crash mid-removal never
    /// leaves a half-removed partition that loads. Excludes the background
    /// cleaners as [`delete_topic`] does. Returns the closed slot (None if
    /// it was not open here). Blocking.
    pub fn unhost(
        &self,
        fs: &Arc<dyn Fs>,
        index: i32,
    ) -> Result<Option<Arc<PartitionSlot>>, StorageError> {
        let _cleaning = self.cleaning.lock();
        let Some(slot) = usize::try_from(index)
            .ok()
            .and_then(|i| self.partitions.write().slots.get_mut(i)?.take())
        else {
            return Ok(None);
        };
        if let Err(e) = slot.log.storage().close() {
            tracing::warn!(topic = %self.name, partition = index, error = %e, "closing a removed replica failed; removing it anyway");
        }
        let tomb = self.dir.join(format!("{index}{REMOVED_SUFFIX}"));
        fs.rename(&self.dir.join(index.to_string()), &tomb)?;
        fs.sync_dir(&self.dir)?;
        fs.remove_dir_all(&tomb)?;
        slot.log.storage().reclaim_files();
        Ok(Some(slot))
    }

    fn meta(&self) -> TopicMeta {
        TopicMeta {
            name: self.name.clone(),
            id: self.id.to_string(),
            partitions: self.partition_count(),
            config: self.settings.read().config.overrides().clone(),
        }
    }

    /// Replaces the config, persists `topic.json`, and applies it to every
    /// partition. Blocking.
    pub fn set_config(&self, fs: &dyn Fs, config: TopicConfig) -> Result<(), StorageError> {
        let mut m = self.meta();
        m.config = config.overrides().clone();
        meta::write_json(fs, &self.dir.join(TOPIC_FILE), &m)?;
        let pc = partition_config(&config);
        for p in self.partitions.read().open() {
            p.log.storage().set_config(pc);
        }
        *self.settings.write() = Settings::new(config);
        Ok(())
    }

    /// Puts the topic's overrides over new broker defaults (a dynamic broker
    /// config changed) and applies the result to every partition. Only the
    /// in-memory config changes: `topic.json` holds the overrides alone.
    /// The broker serialises this with [`Topic::set_config`] (its admin lock).
    pub fn apply_broker_defaults(&self, defaults: BrokerTopicDefaults) {
        let next = self.settings.read().config.with_broker(defaults);
        let pc = partition_config(&next);
        for p in self.partitions.read().open() {
            p.log.storage().set_config(pc);
        }
        *self.settings.write() = Settings::new(next);
    }

    /// Grows the topic to `count` partitions: opens the new partition
    /// directories `hosted` names, then rewrites `topic.json`. Blocking.
    pub fn add_partitions(
        &self,
        storage: &Storage,
        count: i32,
        hosted: HostedFilter<'_>,
    ) -> Result<(), StorageError> {
        let fs = &storage.fs;
        let cfg = self.config();
        let current = self.partition_count();
        let mut new = Vec::new();
        for i in current..count {
            new.push(if hosted(i) {
                Some(open_partition(storage, &self.dir, i, &cfg)?)
            } else {
                None
            });
        }
        let mut m = self.meta();
        m.partitions = count;
        meta::write_json(fs.as_ref(), &self.dir.join(TOPIC_FILE), &m)?;
        self.partitions.write().slots.extend(new);
        Ok(())
    }

    /// Runs `f` on `slot` unless the topic has been deleted, excluding a
    /// concurrent [`delete_topic`] while it runs. Blocking (waits for a
    /// deletion in progress); the background cleaners call it.
    pub fn while_not_deleted<T>(&self, f: impl FnOnce() -> T) -> Option<T> {
        let _g = self.cleaning.lock();
        if self.deleted.load(Ordering::Acquire) {
            return None;
        }
        Some(f())
    }

    /// Closes every partition (syncing it). Blocking.
    pub fn close(&self) -> Result<(), StorageError> {
        let mut first_err = None;
        for p in self.partitions.read().open() {
            if let Err(e) = p.log.storage().close() {
                tracing::error!(topic = %self.name, partition = p.index, error = %e, "closing partition failed");
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

/// The retention a topic's config asks for, or `None` when its
/// `cleanup.policy` does not contain `delete`. With `--cold-storage-dir`,
/// partition `p` of topic `t` is copied to `<cold_root>/<t>/<p>/` first.
pub fn retention_policy(
    c: &TopicConfig,
    cold_root: Option<&Path>,
    topic: &str,
    partition: i32,
) -> Option<RetentionPolicy> {
    if !c.cleanup_policy().delete {
        return None;
    }
    Some(RetentionPolicy {
        retention_ms: c.retention_ms(),
        retention_bytes: c.retention_bytes(),
        cold_dir: cold_root.map(|r| r.join(topic).join(partition.to_string())),
    })
}

/// The compaction a topic's config asks for, or `None` when its
/// `cleanup.policy` does not contain `compact`. `stable_offset` is the
/// partition's last stable offset: open transactions are never compacted.
pub fn compaction_policy(c: &TopicConfig, stable_offset: u64) -> Option<CompactionPolicy> {
    if !c.cleanup_policy().compact {
        return None;
    }
    Some(CompactionPolicy {
        delete_retention_ms: c.delete_retention_ms(),
        min_cleanable_dirty_ratio: c.min_cleanable_dirty_ratio(),
        min_compaction_lag_ms: c.min_compaction_lag_ms(),
        max_compaction_lag_ms: c.max_compaction_lag_ms(),
        stable_offset,
        control_kind: kafka_control_kind,
    })
}

/// Kafka's control record key is (version i16, type i16), type 0 an abort
/// marker and 1 a commit marker: `Some(true)` aborts, `Some(false)` commits,
/// `None` is any other control record (or a malformed key).
pub fn kafka_control_kind(r: &RecordView<'_>) -> Option<bool> {
    let k = r.key.filter(|k| k.len() >= 4)?;
    match i16::from_be_bytes([k[2], k[3]]) {
        0 => Some(true),
        1 => Some(false),
        _ => None,
    }
}

/// The storage settings a topic's config implies.
pub fn partition_config(c: &TopicConfig) -> PartitionConfig {
    PartitionConfig {
        segment_bytes: c.segment_bytes(),
        segment_ms: c.roll_ms(),
        index_interval_bytes: c.index_interval_bytes(),
        flush: FlushPolicy {
            every_records: c.flush_messages(),
            interval: Duration::from_millis(c.flush_ms()),
            ..FlushPolicy::default()
        },
        preallocate: c.preallocate(),
    }
}

fn open_partition(
    storage: &Storage,
    topic_dir: &Path,
    index: i32,
    cfg: &TopicConfig,
) -> Result<Arc<PartitionSlot>, StorageError> {
    let log = Partition::open(
        storage,
        topic_dir.join(index.to_string()),
        partition_config(cfg),
    )?;
    let waiters = Arc::new(Waiters::default());
    let w = Arc::downgrade(&waiters);
    log.set_listener(Box::new(move |_hw| {
        if let Some(w) = w.upgrade() {
            w.wake_all();
        }
    }));
    Ok(Arc::new(PartitionSlot {
        index,
        log: PartitionLog::local(log),
        waiters,
        traffic: Default::default(),
    }))
}

/// Creates a topic on disk and opens the partitions `hosted` names.
/// Blocking.
pub fn create_topic(
    storage: &Storage,
    topics_dir: &Path,
    name: &str,
    id: Uuid,
    partitions: i32,
    config: TopicConfig,
    hosted: HostedFilter<'_>,
) -> Result<Topic, StorageError> {
    let fs = &storage.fs;
    let dir = topics_dir.join(name);
    if fs.exists(&dir) {
        // Debris of a crashed create (the caller checked that no live topic has this name).
        fs.remove_dir_all(&dir)?;
    }
    fs.create_dir_all(&dir)?;
    let mut slots = Vec::with_capacity(partitions.max(0) as usize);
    for i in 0..partitions {
        slots.push(if hosted(i) {
            Some(open_partition(storage, &dir, i, &config)?)
        } else {
            None
        });
    }
    let m = TopicMeta {
        name: name.to_string(),
        id: id.to_string(),
        partitions,
        config: config.overrides().clone(),
    };
    meta::write_json(fs.as_ref(), &dir.join(TOPIC_FILE), &m)?;
    fs.sync_dir(topics_dir)?;
    Ok(Topic {
        name: name.to_string(),
        id,
        dir,
        settings: RwLock::new(Settings::new(config)),
        partitions: RwLock::new(Hosted { slots }),
        cleaning: Mutex::new(()),
        deleted: AtomicBool::new(false),
    })
}

/// Loads every topic under `topics_dir`, finishing interrupted deletes and
/// removing half-created topics. Blocking.
pub fn load_topics(
    storage: &Storage,
    topics_dir: &Path,
    broker: BrokerTopicDefaults,
) -> Result<Vec<Topic>, StorageError> {
    let fs = &storage.fs;
    fs.create_dir_all(topics_dir)?;
    meta::remove_temp_files(fs.as_ref(), topics_dir)?;
    let mut out = Vec::new();
    for entry in fs.list(topics_dir)? {
        let dir = topics_dir.join(&entry);
        if entry.ends_with(DELETED_SUFFIX) && validate_topic_name(&entry).is_err() {
            tracing::info!(dir = %dir.display(), "finishing interrupted topic deletion");
            fs.remove_dir_all(&dir)?;
            continue;
        }
        if validate_topic_name(&entry).is_err() {
            tracing::warn!(dir = %dir.display(), "ignoring entry that is not a topic");
            continue;
        }
        meta::remove_temp_files(fs.as_ref(), &dir)?;
        for e in fs.list(&dir)? {
            if e.ends_with(REMOVED_SUFFIX) {
                tracing::info!(topic = %entry, dir = %e, "finishing interrupted replica removal");
                fs.remove_dir_all(&dir.join(&e))?;
            }
        }
        let Some(m) = meta::read_json::<TopicMeta>(fs.as_ref(), &dir.join(TOPIC_FILE))? else {
            tracing::warn!(dir = %dir.display(), "removing topic directory without topic.json (interrupted create)");
            fs.remove_dir_all(&dir)?;
            continue;
        };
        let bad = |why: String| StorageError::Metadata {
            file: dir.join(TOPIC_FILE).display().to_string(),
            why,
        };
        if m.name != entry {
            return Err(bad(format!(
                "names topic {:?} but lives in {entry:?}",
                m.name
            )));
        }
        let id = Uuid::parse_str(&m.id).map_err(|e| bad(format!("bad topic id: {e}")))?;
        if !(1..=PARTITIONS_MAX).contains(&m.partitions) {
            return Err(bad(format!(
                "partition count {} out of range",
                m.partitions
            )));
        }
        let config =
            TopicConfig::new(m.config.clone(), broker.clone()).map_err(|e| bad(e.to_string()))?;
        // A partition without a directory is hosted by another broker (a
        // partition placed here whose directory is missing is opened empty
        // once the metadata image is known, see [`Topic::host`]).
        let mut slots = Vec::with_capacity(m.partitions as usize);
        let mut open = 0;
        for i in 0..m.partitions {
            slots.push(if fs.exists(&dir.join(i.to_string())) {
                open += 1;
                Some(open_partition(storage, &dir, i, &config)?)
            } else {
                None
            });
        }
        tracing::info!(topic = %m.name, partitions = m.partitions, open, "loaded topic");
        out.push(Topic {
            name: m.name,
            id,
            dir,
            settings: RwLock::new(Settings::new(config)),
            partitions: RwLock::new(Hosted { slots }),
            cleaning: Mutex::new(()),
            deleted: AtomicBool::new(false),
        });
    }
    Ok(out)
}

/// Closes and removes a topic: rename out of the namespace first, so a crash
/// mid-removal can never leave a half-deleted topic that loads. Blocking.
pub fn delete_topic(
    fs: &Arc<dyn Fs>,
    topics_dir: &Path,
    topic: &Topic,
) -> Result<(), StorageError> {
    // Wait for a cleaner working on this topic, and keep the next one out.
    let _cleaning = topic.cleaning.lock();
    topic.deleted.store(true, Ordering::Release);
    if let Err(e) = topic.close() {
        tracing::warn!(topic = %topic.name, error = %e, "closing deleted topic failed; removing it anyway");
    }
    let tomb = topics_dir.join(format!("{}~{}{DELETED_SUFFIX}", topic.name, topic.id));
    fs.rename(&topic.dir, &tomb)?;
    fs.sync_dir(topics_dir)?;
    fs.remove_dir_all(&tomb)?;
    // The names are gone; the space is freed gradually once the last
    // request using a partition lets go of it (es_storage::reclaim).
    for p in topic.partitions() {
        p.log.storage().reclaim_files();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names_follow_kafka() {
        assert!(validate_topic_name("orders").is_ok());
        assert!(validate_topic_name("a.b_c-D9").is_ok());
        assert!(validate_topic_name(".hidden").is_ok());
        assert!(validate_topic_name(&"x".repeat(249)).is_ok());
        assert!(validate_topic_name(&"x".repeat(250)).is_err());
        assert!(validate_topic_name("").is_err());
        assert!(validate_topic_name(".").is_err());
        assert!(validate_topic_name("..").is_err());
        assert!(validate_topic_name("a/b").is_err());
        assert!(validate_topic_name("a b").is_err());
        assert!(validate_topic_name("é").is_err());
        assert!(validate_topic_name("t~x.deleted").is_err());
    }

    #[test]
    fn a_broker_opens_only_the_partitions_it_hosts() {
        let dir = tempfile::tempdir().expect("tempdir");
        let even = |p: i32| p % 2 == 0;
        let (storage, topics, t) = three_partitions(dir.path(), &even);
        assert_eq!(t.partition_count(), 3);
        assert!(t.has_partition(1) && !t.has_partition(3) && !t.has_partition(-1));
        assert!(t.partition(0).is_some() && t.partition(1).is_none() && t.partition(2).is_some());
        assert_eq!(
            t.partitions().iter().map(|p| p.index).collect::<Vec<_>>(),
            vec![0, 2]
        );
        assert!(
            !topics.join("t").join("1").exists(),
            "no directory for a partition hosted elsewhere"
        );
        t.add_partitions(&storage, 5, &even).expect("grown");
        assert_eq!(t.partition_count(), 5);
        assert!(t.partition(3).is_none() && t.partition(4).is_some());
        t.close().expect("closed");

        // Loading opens the partitions that have directories; host() opens
        // one placed here later.
        let loaded = load_topics(&storage, &topics, BrokerTopicDefaults::default()).expect("load");
        let t = &loaded[0];
        assert_eq!(t.partition_count(), 5);
        assert_eq!(
            t.partitions().iter().map(|p| p.index).collect::<Vec<_>>(),
            vec![0, 2, 4]
        );
        t.host(&storage, &|p| p == 1).expect("hosted");
        assert!(t.partition(1).is_some() && t.partition(3).is_none());
        assert!(topics.join("t").join("1").exists());
        t.close().expect("closed");
    }

    #[test]
    fn a_replica_no_longer_placed_here_is_closed_and_its_directory_removed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (storage, topics, t) = three_partitions(dir.path(), &host_all);
        let slot = t
            .unhost(&storage.fs, 1)
            .expect("unhosted")
            .expect("was open");
        assert_eq!(slot.index, 1);
        assert!(t.unhost(&storage.fs, 1).expect("again").is_none());
        assert!(t.unhost(&storage.fs, -1).expect("bad index").is_none());
        assert!(t.partition(1).is_none() && t.has_partition(1));
        assert!(!topics.join("t").join("1").exists());
        assert!(!topics.join("t").join(format!("1{REMOVED_SUFFIX}")).exists());
        assert_eq!(
            t.partitions().iter().map(|p| p.index).collect::<Vec<_>>(),
            vec![0, 2]
        );
        t.close().expect("closed");

        // A crash between the rename and the removal: loading finishes it.
        let tomb = topics.join("t").join(format!("2{REMOVED_SUFFIX}"));
        std::fs::rename(topics.join("t").join("2"), &tomb).expect("rename");
        let loaded = load_topics(&storage, &topics, BrokerTopicDefaults::default()).expect("load");
        assert_eq!(
            loaded[0]
                .partitions()
                .iter()
                .map(|p| p.index)
                .collect::<Vec<_>>(),
            vec![0]
        );
        assert!(!tomb.exists());
        loaded[0].close().expect("closed");
    }

    #[test]
    fn topic_meta_round_trips() {
        let m = TopicMeta {
            name: "t".into(),
            id: Uuid::new_v4().to_string(),
            partitions: 3,
            config: BTreeMap::from([("retention.ms".to_string(), "5".to_string())]),
        };
        let j = serde_json::to_string(&m).expect("serialises");
        let back: TopicMeta = serde_json::from_str(&j).expect("parses");
        assert_eq!(back, m);
    }

    /// Topic "t" with three partitions under `dir/topics`, those `hosted`
    /// names open: the storage, the topics directory and the topic.
    fn three_partitions(dir: &Path, hosted: HostedFilter<'_>) -> (Storage, PathBuf, Topic) {
        let storage = Storage::new(Arc::new(es_storage::RealFs));
        let topics = dir.join("topics");
        storage.fs.create_dir_all(&topics).expect("topics dir");
        let t = create_topic(
            &storage,
            &topics,
            "t",
            Uuid::new_v4(),
            3,
            topic_config(&[]),
            hosted,
        )
        .expect("created");
        (storage, topics, t)
    }

    fn topic_config(pairs: &[(&str, &str)]) -> TopicConfig {
        TopicConfig::new(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            BrokerTopicDefaults::default(),
        )
        .expect("valid config")
    }

    #[test]
    fn rules_follow_every_config_change() {
        use crate::codec::compression::Compression;
        use crate::config::{DynamicBrokerConfigs, TimestampType};
        let dir = tempfile::tempdir().expect("tempdir");
        let storage = Storage::new(Arc::new(es_storage::RealFs));
        let fs = storage.fs.clone();
        let topics = dir.path().join("topics");
        fs.create_dir_all(&topics).expect("topics dir");
        let t = create_topic(
            &storage,
            &topics,
            "t",
            Uuid::new_v4(),
            1,
            topic_config(&[("max.message.bytes", "2048")]),
            &host_all,
        )
        .expect("created");
        assert_eq!(t.rules().max_message_bytes, 2048);
        assert_eq!(t.rules().timestamp_type, TimestampType::CreateTime);
        assert!(!t.rules().compact);
        assert!(
            t.rules().compression_as_produced,
            "Kafka's default: producer"
        );

        // AlterConfigs of the topic.
        t.set_config(
            fs.as_ref(),
            topic_config(&[
                ("message.timestamp.type", "LogAppendTime"),
                ("message.timestamp.after.max.ms", "5000"),
                ("cleanup.policy", "compact"),
                ("compression.type", "lz4"),
            ]),
        )
        .expect("set");
        let r = t.rules();
        assert_eq!(r.max_message_bytes, 1_048_588, "back to the default");
        assert_eq!(r.timestamp_type, TimestampType::LogAppendTime);
        assert_eq!(r.timestamp_after_max_ms, 5000);
        assert!(r.compact);
        assert_eq!(r.compression, Compression::Lz4);
        assert!(!r.compression_as_produced);

        // A dynamic broker config under the topic's own overrides.
        let dynamic = DynamicBrokerConfigs {
            broker: BTreeMap::from([("message.max.bytes".to_string(), "4096".to_string())]),
            ..DynamicBrokerConfigs::default()
        };
        let defaults = BrokerTopicDefaults {
            dynamic: Arc::new(dynamic),
            ..BrokerTopicDefaults::default()
        };
        t.apply_broker_defaults(defaults.clone());
        assert_eq!(t.rules().max_message_bytes, 4096);
        assert_eq!(t.rules(), t.config().rules());

        // Loaded from topic.json, the same rules.
        let loaded = load_topics(&storage, &topics, defaults).expect("loads");
        assert_eq!(loaded.len(), 1);
        assert_eq!(loaded[0].rules(), t.rules());
    }

    #[test]
    fn cleanup_policy_decides_which_cleaner_runs() {
        let delete = topic_config(&[("retention.bytes", "4096"), ("retention.ms", "-1")]);
        let r = retention_policy(&delete, Some(Path::new("/cold")), "orders", 3)
            .expect("delete is the default policy");
        assert_eq!(r.retention_bytes, Some(4096));
        assert_eq!(r.retention_ms, None);
        assert_eq!(r.cold_dir, Some(PathBuf::from("/cold/orders/3")));
        assert!(compaction_policy(&delete, 10).is_none());
        assert!(retention_policy(&delete, None, "orders", 3)
            .expect("policy")
            .cold_dir
            .is_none());

        let compact = topic_config(&[
            ("cleanup.policy", "compact"),
            ("delete.retention.ms", "0"),
            ("min.cleanable.dirty.ratio", "0.01"),
            ("min.compaction.lag.ms", "60000"),
            ("max.compaction.lag.ms", "3600000"),
            ("segment.ms", "86400000"),
        ]);
        assert!(retention_policy(&compact, None, "t", 0).is_none());
        let c = compaction_policy(&compact, 42).expect("compact");
        assert_eq!(c.delete_retention_ms, 0);
        assert_eq!(c.min_cleanable_dirty_ratio, 0.01);
        assert_eq!(c.min_compaction_lag_ms, 60_000);
        assert_eq!(c.max_compaction_lag_ms, 3_600_000);
        assert_eq!(c.stable_offset, 42);
        // The active segment rolls at the shorter of segment.ms and
        // max.compaction.lag.ms on a compacted topic, at segment.ms otherwise.
        assert_eq!(partition_config(&compact).segment_ms, 3_600_000);
        let delete_lag = topic_config(&[
            ("max.compaction.lag.ms", "3600000"),
            ("segment.ms", "86400000"),
        ]);
        assert_eq!(partition_config(&delete_lag).segment_ms, 86_400_000);

        let both = topic_config(&[("cleanup.policy", "delete,compact")]);
        assert!(retention_policy(&both, None, "t", 0).is_some());
        let c = compaction_policy(&both, 7).expect("compact");
        assert_eq!(c.delete_retention_ms, 86_400_000);
        assert_eq!(c.min_cleanable_dirty_ratio, 0.5);
        assert_eq!(c.min_compaction_lag_ms, 0);
        assert_eq!(c.max_compaction_lag_ms, i64::MAX);
    }

    #[test]
    fn control_records_are_classified_by_their_kafka_key() {
        let meta = es_storage::RecordMeta {
            producer: Some(es_storage::ProducerInfo {
                producer_id: 1,
                producer_epoch: 0,
                sequence: -1,
            }),
            transactional: true,
            control: true,
        };
        let kind = |key: Option<&[u8]>| {
            let mut buf = Vec::new();
            es_storage::record::encode(
                &mut buf,
                0,
                0,
                key,
                Some(&[0, 0, 0, 0, 0, 0]),
                std::iter::empty(),
                &meta,
            );
            let r = es_storage::RecordIter::new(&buf)
                .next()
                .expect("one record")
                .expect("valid record");
            kafka_control_kind(&r)
        };
        assert_eq!(kind(Some(&[0, 0, 0, 0])), Some(true), "abort");
        assert_eq!(kind(Some(&[0, 0, 0, 1])), Some(false), "commit");
        assert_eq!(kind(Some(&[0, 0, 0, 2])), None, "another control type");
        assert_eq!(kind(Some(&[0, 0])), None, "short key");
        assert_eq!(kind(None), None);
    }

    #[test]
    fn waiters_wake_and_deregister() {
        let w = Waiters::default();
        let n = Arc::new(Notify::new());
        w.register(&n);
        w.register(&n);
        assert_eq!(w.len(), 1);
        w.deregister(&n);
        assert!(w.is_empty());
        w.register(&n);
        w.wake_all();
        assert!(w.is_empty());
    }
}
