//! The coordinator's persistence: loading every group document at startup,
//! the on-disk form of a group, and the per-group writers that make offset
//! commits durable (at most one writer per group; commits arriving while it
//! writes coalesce into its next write; a failed write fences the group's
//! offsets until restart), with the per-file locks that order a group's
//! writes and its deletion.
//!
//! The decisions (what a request changes) are in the sibling files; they
//! bump a group's `version` and call `start_writer` and
//! `spawn_writer` here.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use es_storage::{Fs, SharedClock, StorageError};
use parking_lot::Mutex;
use tokio::sync::Notify;
use uuid::Uuid;

use super::{Committed, Coordinator, Group, Kind, State};
use crate::groups::classic::ClassicGroup;
use crate::groups::consumer::ConsumerGroup;
use crate::groups::share::ShareGroup;
use crate::groups::store::{
    self, GroupFile, OffsetEntry, ShareTopicEntry, TYPE_CONSUMER, TYPE_SHARE,
};
use crate::groups::GroupConfig;

impl Group {
    pub(super) fn document(&self) -> GroupFile {
        let (t, p) = self.meta();
        GroupFile {
            group: self.id.clone(),
            group_type: t.to_string(),
            protocol_type: p,
            share_partitions: self
                .share_partitions
                .iter()
                .map(|(topic, (id, ps))| ShareTopicEntry {
                    topic: topic.clone(),
                    topic_id: id.to_string(),
                    partitions: ps.iter().copied().collect(),
                })
                .collect(),
            offsets: self
                .offsets
                .iter()
                .flat_map(|(topic, ps)| {
                    ps.iter().map(move |(p, c)| OffsetEntry {
                        topic: topic.clone(),
                        partition: *p,
                        offset: c.offset,
                        leader_epoch: c.leader_epoch,
                        metadata: c.metadata.clone(),
                        commit_timestamp_ms: c.commit_timestamp_ms,
                        topic_id: (!c.topic_id.is_nil()).then(|| c.topic_id.to_string()),
                    })
                })
                .collect(),
        }
    }
}

/// How many times a quorum write of a group's state is tried before its
/// offsets are fenced (about ten seconds with [`QUORUM_RETRY_PAUSE`]).
const QUORUM_WRITE_ATTEMPTS: u32 = 20;
/// The pause between two tries.
const QUORUM_RETRY_PAUSE: std::time::Duration = std::time::Duration::from_millis(500);

impl State {
    /// The group `group_id` if it is still incarnation `incarnation` (not
    /// deleted, unloaded or replaced since a writer started for it).
    fn incarnation_of(&mut self, group_id: &str, incarnation: u64) -> Option<&mut Group> {
        self.groups
            .get_mut(group_id)
            .filter(|g| g.incarnation == incarnation)
    }

    /// Puts the group a document describes in memory (Empty, with its
    /// offsets), unless its file name belongs to another group.
    pub(super) fn adopt(&mut self, doc: GroupFile, config: GroupConfig) {
        let kind = if doc.group_type == TYPE_CONSUMER {
            let config = self.config_for(config, &doc.group);
            Kind::Consumer(ConsumerGroup::new(&doc.group, config))
        } else if doc.group_type == TYPE_SHARE {
            let config = self.config_for(config, &doc.group);
            Kind::Share(ShareGroup::new(&doc.group, config.share))
        } else {
            Kind::Classic(ClassicGroup::loaded(
                &doc.group,
                config,
                doc.protocol_type.clone(),
            ))
        };
        if self.create(&doc.group, kind).is_err() {
            return;
        }
        let Some(g) = self.groups.get_mut(&doc.group) else {
            return;
        };
        for t in doc.share_partitions {
            // An entry whose id does not parse is dropped: it can only name
            // a topic no longer known.
            if let Ok(id) = Uuid::parse_str(&t.topic_id) {
                g.share_partitions
                    .insert(t.topic, (id, t.partitions.into_iter().collect()));
            }
        }
        for o in doc.offsets {
            g.offsets.entry(o.topic).or_default().insert(
                o.partition,
                Committed {
                    offset: o.offset,
                    leader_epoch: o.leader_epoch,
                    metadata: o.metadata,
                    commit_timestamp_ms: o.commit_timestamp_ms,
                    topic_id: o
                        .topic_id
                        .as_deref()
                        .and_then(|s| Uuid::parse_str(s).ok())
                        .unwrap_or_else(Uuid::nil),
                },
            );
        }
        g.written_meta = Some(g.meta());
    }
}

impl Coordinator {
    /// Loads every group document under `data_dir/groups`. Blocking.
    pub fn open(
        fs: Arc<dyn Fs>,
        data_dir: &Path,
        config: GroupConfig,
        clock: SharedClock,
    ) -> Result<Arc<Coordinator>, StorageError> {
        let dir = data_dir.join(store::GROUPS_DIR);
        let docs = store::load_all(fs.as_ref(), &dir)?;
        let mut st = State::default();
        for doc in docs {
            st.adopt(doc, config);
        }
        tracing::info!(groups = st.groups.len(), "loaded consumer groups");
        Ok(Arc::new(Coordinator {
            config,
            fs,
            dir,
            epoch: clock.monotonic(),
            clock,
            state: Mutex::new(st),
            file_locks: Mutex::new(HashMap::new()),
            timer_wake: Notify::new(),
            writes: AtomicU64::new(0),
            log: std::sync::OnceLock::new(),
        }))
    }
    /// How many group documents have been written since startup.
    pub fn document_writes(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }

    /// Claims the writer role for a group; true when the caller must spawn it.
    pub(super) fn start_writer(&self, g: &mut Group) -> bool {
        if g.writing || g.fenced() {
            return false;
        }
        g.writing = true;
        true
    }

    pub(super) fn spawn_writer(self: &Arc<Self>, group_id: &str) {
        let me = self.clone();
        let id = group_id.to_string();
        match tokio::runtime::Handle::try_current() {
            Ok(h) => {
                h.spawn(async move { me.write_loop(id).await });
            }
            Err(_) => {
                // Only reachable outside a runtime, never in the broker (the
                // caller may hold the state lock, so it is not touched here).
                tracing::error!(group = group_id, "no runtime to write the group document");
            }
        }
    }

    /// Writes the group's document until it covers every change, then
    /// gives up the writer role (under the state lock, so a change made
    /// after the last check always finds the role free).
    async fn write_loop(self: Arc<Self>, group_id: String) {
        let file = store::file_name(&group_id);
        let lock = self.file_lock(&file);
        let incarnation = match self.state.lock().groups.get(&group_id) {
            Some(g) => g.incarnation,
            None => return,
        };
        let mut failures = 0u32;
        loop {
            let guard = lock.lock().await;
            let (version, doc) = {
                let mut st = self.state.lock();
                let Some(g) = st.incarnation_of(&group_id, incarnation) else {
                    return;
                };
                if g.version <= g.durable.borrow().version || g.fenced() {
                    g.writing = false;
                    return;
                }
                g.written_meta = Some(g.meta());
                (g.version, g.document())
            };
            self.writes.fetch_add(1, Ordering::Relaxed);
            let res = match self.log.get() {
                Some(log) => log.write(doc).await,
                None => {
                    let (fs, dir) = (self.fs.clone(), self.dir.clone());
                    tokio::task::spawn_blocking(move || store::write(fs.as_ref(), &dir, &doc))
                        .await
                        .map_err(|e| e.to_string())
                        .and_then(|r| r.map_err(|e| e.to_string()))
                }
            };
            drop(guard);
            let retry = {
                let mut st = self.state.lock();
                let Some(g) = st.incarnation_of(&group_id, incarnation) else {
                    return;
                };
                match res {
                    Ok(()) => {
                        g.durable
                            .send_modify(|d| d.version = d.version.max(version));
                        false
                    }
                    Err(e) if self.log.get().is_some() && failures < QUORUM_WRITE_ATTEMPTS => {
                        // A quorum write whose outcome is unknown (the quorum
                        // leader went away mid-request) or refused for now:
                        // the document is written again from memory, which
                        // the diff against the applied state makes
                        // idempotent. A coordinator that lost its partition
                        // unloads the group meanwhile, which ends this loop.
                        failures += 1;
                        tracing::warn!(group = %group_id, error = %e, attempt = failures, "writing the group's state failed; trying again");
                        true
                    }
                    Err(e) => {
                        tracing::error!(group = %group_id, error = %e, "writing the group document failed; its offsets are fenced until restart");
                        g.durable.send_modify(|d| d.failed = Some(e));
                        g.writing = false;
                        return;
                    }
                }
            };
            if retry {
                tokio::time::sleep(QUORUM_RETRY_PAUSE).await;
            }
        }
    }

    /// Removes a group's document (the caller holds the file's lock).
    pub(super) async fn remove_document(&self, group_id: &str) -> Result<(), String> {
        if let Some(log) = self.log.get() {
            return log.remove(group_id.to_string()).await;
        }
        let (fs, dir, id) = (self.fs.clone(), self.dir.clone(), group_id.to_string());
        tokio::task::spawn_blocking(move || store::remove(fs.as_ref(), &dir, &id))
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r.map_err(|e| e.to_string()))
    }

    pub(super) fn file_lock(&self, file: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.file_locks
            .lock()
            .entry(file.to_string())
            .or_default()
            .clone()
    }

    /// Drops a file's lock once nobody else holds or waits for it.
    pub(super) fn forget_file_lock(&self, file: &str, mine: Arc<tokio::sync::Mutex<()>>) {
        let mut locks = self.file_locks.lock();
        // Ours and the map's are the only references left.
        if Arc::strong_count(&mine) <= 2 {
            locks.remove(file);
        }
    }
}
