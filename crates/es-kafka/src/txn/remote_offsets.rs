//! Transactional offsets this broker took as a group's coordinator for a
//! transaction another broker coordinates.
//!
//! TxnOffsetCommit goes to the group's coordinator, EndTxn to the
//! transaction's. When they are the same broker the offsets ride in the
//! transaction's record (committed by [`super::coordinator`] on
//! completion). When they are not, the group's broker keeps them here,
//! keyed by (group, producer id) as Kafka keeps pending transactional
//! offsets in the group's metadata, until the transaction coordinator sends
//! WriteTxnMarkers for the group's `__consumer_offsets` partition: COMMIT
//! makes them the group's committed offsets (through the
//! [`super::TxnOffsetSink`]), ABORT drops them.
//!
//! Where they are durable:
//! - In a broker, in the metadata quorum ([`RemoteOffsetsStore`], one key
//!   per (group, producer id), fenced as the group's own writes), so that
//!   they move with the group's coordinator. Memory is then a mirror of
//!   what the log applied for the groups this broker coordinates: the
//!   broker loads a partition's entries when it starts leading the group's
//!   `__consumer_offsets` partition ([`RemoteOffsets::load`]), drops them
//!   when it stops ([`RemoteOffsets::unload`]), and hands over every
//!   applied change ([`RemoteOffsets::applied`]); a write returns once it is
//!   applied here, so memory already holds it. Writers of one (group,
//!   producer) take turns ([`WRITER_STRIPES`]); no lock of the table is
//!   held while the quorum is waited for, so the metadata log's apply thread
//!   never waits for a writer.
//! - Without a broker (tests of the coordinator alone), in the producers
//!   journal (`LogEntry::RemoteOffsets`, the producer's whole pending set,
//!   journaled under the table's lock before it is applied), as before the
//!   quorum held them. The journal entry has one epoch per producer, so
//!   there a newer epoch also drops what an older one left in other groups
//!   (they would be dropped by their marker anyway, see below).
//!
//! Epochs: an offset commit of an older epoch than the one held for the
//! (group, producer) is fenced; a newer one replaces what is held. A marker
//! of epoch E commits (COMMIT) or drops (ABORT) what is held at epoch E and
//! drops what is held at an older epoch: an older epoch's transaction has
//! ended (only an abort bumps the epoch, and a transaction completes before
//! the next begins), so its offsets must never be committed by a later
//! transaction. A marker older than what is held leaves it.
//!
//! Settling commits the offsets to the group first and removes the pending
//! entry after, so a crash in between leaves them pending and a resent
//! marker commits them again (the group's commit is idempotent). The table
//! holds at most [`REMOTE_OFFSETS_MAX`] offsets; loading from the log is
//! never refused (the log holds what coordinators accepted).

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use super::error::TxnError;
use super::log::{LogEntry, RemotePending};
use super::state::TxnOffset;

/// Most pending offsets held for remote transactions, over all producers.
pub const REMOTE_OFFSETS_MAX: usize = 100_000;
/// Writers of one (group, producer) take turns through one of this many
/// locks (chosen by hash): bounded memory, and writers of other keys rarely
/// wait.
pub const WRITER_STRIPES: usize = 64;

/// (group, producer id).
pub type RemoteKey = (String, i64);

/// What is pending for one (group, producer id).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Pending {
    epoch: i16,
    /// By (topic, partition).
    offsets: BTreeMap<(String, i32), TxnOffset>,
}

impl Pending {
    fn from_stored(p: &RemotePending) -> Pending {
        Pending {
            epoch: p.epoch,
            offsets: p
                .offsets
                .iter()
                .map(|o| ((o.topic.clone(), o.partition), o.clone()))
                .collect(),
        }
    }

    fn stored(&self) -> RemotePending {
        RemotePending {
            epoch: self.epoch,
            offsets: self.offsets.values().cloned().collect(),
        }
    }
}

/// Where the pending offsets of a (group, producer) are made durable when
/// they live in the metadata quorum (the broker proposes a
/// `coordinator_state.v1` entry fenced by the group's `__consumer_offsets`
/// partition). Blocking, bounded by a timeout.
pub trait RemoteOffsetsStore: Send + Sync + std::fmt::Debug {
    /// Makes `pending` (`None`: nothing) what is pending for (`group`,
    /// `producer_id`). Returns once the change is applied here, after
    /// [`RemoteOffsets::applied`] has seen it. Errors: refused by the
    /// fence, `JournalFailed` (NOT_COORDINATOR); no answer in time,
    /// `CoordinatorNotAvailable`.
    fn write(
        &self,
        group: &str,
        producer_id: i64,
        pending: Option<&RemotePending>,
    ) -> Result<(), TxnError>;
}

/// Journals one entry (the coordinator's producers journal).
pub type Persist<'a> = &'a dyn Fn(LogEntry) -> Result<(), TxnError>;

/// Commits one group's offsets (the group coordinator).
pub type CommitTo<'a> = &'a dyn Fn(&str, &[TxnOffset]) -> Result<(), TxnError>;

/// Pending offsets by (group, producer id).
#[derive(Debug)]
pub struct RemoteOffsets {
    table: Mutex<BTreeMap<RemoteKey, Pending>>,
    writers: Vec<Mutex<()>>,
    /// Set once, when the broker's metadata quorum has started.
    store: OnceLock<Arc<dyn RemoteOffsetsStore>>,
}

impl Default for RemoteOffsets {
    fn default() -> Self {
        RemoteOffsets {
            table: Mutex::new(BTreeMap::new()),
            writers: (0..WRITER_STRIPES).map(|_| Mutex::new(())).collect(),
            store: OnceLock::new(),
        }
    }
}

/// The journal entry of `producer_id`'s whole pending set in `table`.
fn journal_entry(table: &BTreeMap<RemoteKey, Pending>, producer_id: i64) -> LogEntry {
    let mine: Vec<&Pending> = table
        .iter()
        .filter(|(k, _)| k.1 == producer_id)
        .map(|(_, p)| p)
        .collect();
    LogEntry::RemoteOffsets {
        producer_id,
        epoch: mine.iter().map(|p| p.epoch).max().unwrap_or(0),
        offsets: mine
            .iter()
            .flat_map(|p| p.offsets.values().cloned())
            .collect(),
    }
}

fn held_count(table: &BTreeMap<RemoteKey, Pending>) -> usize {
    table.values().map(|p| p.offsets.len()).sum()
}

/// Splits a journaled producer's set by group.
pub fn split_by_group(producer_id: i64, p: &RemotePending) -> BTreeMap<RemoteKey, RemotePending> {
    let mut out: BTreeMap<RemoteKey, RemotePending> = BTreeMap::new();
    for o in &p.offsets {
        out.entry((o.group.clone(), producer_id))
            .or_insert_with(|| RemotePending {
                epoch: p.epoch,
                offsets: Vec::new(),
            })
            .offsets
            .push(o.clone());
    }
    out
}

impl RemoteOffsets {
    /// The table a replayed journal left.
    pub fn from_log(held: &BTreeMap<i64, RemotePending>) -> Self {
        let r = RemoteOffsets::default();
        {
            let mut t = r.table.lock();
            for (pid, p) in held {
                for (k, v) in split_by_group(*pid, p) {
                    t.insert(k, Pending::from_stored(&v));
                }
            }
        }
        r
    }

    /// From now on the pending offsets live in the metadata quorum, written
    /// through `store`; memory (what the journal held) is emptied, to be
    /// loaded from the log. Set once; later calls are ignored.
    pub fn enter_quorum(&self, store: Arc<dyn RemoteOffsetsStore>) {
        if self.store.set(store).is_ok() {
            self.table.lock().clear();
        }
    }

    /// Whether the offsets live in the metadata quorum.
    pub fn in_quorum(&self) -> bool {
        self.store.get().is_some()
    }

    fn writer(&self, key: &RemoteKey) -> &Mutex<()> {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        key.hash(&mut h);
        let i = usize::try_from(h.finish() % WRITER_STRIPES as u64).unwrap_or(0);
        &self.writers[i]
    }

    /// Adds offsets of producer (`producer_id`, `epoch`) for `group`,
    /// durably. A newer epoch replaces what an older one left; an older
    /// epoch is fenced.
    pub fn add(
        &self,
        group: &str,
        producer_id: i64,
        epoch: i16,
        offsets: Vec<TxnOffset>,
        persist: Persist<'_>,
    ) -> Result<(), TxnError> {
        let key: RemoteKey = (group.to_string(), producer_id);
        let merged = |held: Option<&Pending>| -> Result<Pending, TxnError> {
            let mut p = match held {
                Some(p) if epoch < p.epoch => return Err(TxnError::ProducerFenced),
                Some(p) if epoch == p.epoch => p.clone(),
                _ => Pending {
                    epoch,
                    offsets: BTreeMap::new(),
                },
            };
            for mut o in offsets.iter().cloned() {
                o.group = group.to_string();
                p.offsets.insert((o.topic.clone(), o.partition), o);
            }
            Ok(p)
        };
        let _turn = self.writer(&key).lock();
        let Some(store) = self.store.get() else {
            let mut t = self.table.lock();
            let p = merged(t.get(&key))?;
            let mut next = t.clone();
            // One epoch per producer in the journal: a newer one drops the
            // older epochs' offsets of other groups.
            next.retain(|k, q| k.1 != producer_id || q.epoch >= epoch);
            next.insert(key, p);
            let after = held_count(&next);
            if after > REMOTE_OFFSETS_MAX && after > held_count(&t) {
                return Err(TxnError::CoordinatorNotAvailable);
            }
            persist(journal_entry(&next, producer_id))?;
            *t = next;
            return Ok(());
        };
        let p = {
            let t = self.table.lock();
            let p = merged(t.get(&key))?;
            let before = t.get(&key).map_or(0, |q| q.offsets.len());
            let after = held_count(&t) - before + p.offsets.len();
            if after > REMOTE_OFFSETS_MAX && p.offsets.len() > before {
                return Err(TxnError::CoordinatorNotAvailable);
            }
            p
        };
        store.write(group, producer_id, Some(&p.stored()))
    }

    /// A marker for `producer_id` at `epoch` (`commit` or not) reached the
    /// groups `owns` selects: commits through `commit_to` (COMMIT, same
    /// epoch) and removes, durably, what they hold (see the module comment
    /// for epochs). The commit comes first, the removal after.
    pub fn settle(
        &self,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        owns: &dyn Fn(&str) -> bool,
        commit_to: CommitTo<'_>,
        persist: Persist<'_>,
    ) -> Result<(), TxnError> {
        let keys: Vec<RemoteKey> = self
            .table
            .lock()
            .iter()
            .filter(|(k, p)| k.1 == producer_id && p.epoch <= epoch && owns(&k.0))
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            let _turn = self.writer(&key).lock();
            let held = self.table.lock().get(&key).cloned();
            let Some(p) = held.filter(|p| p.epoch <= epoch) else {
                continue;
            };
            if commit && p.epoch == epoch {
                let offsets: Vec<TxnOffset> = p.offsets.values().cloned().collect();
                commit_to(&key.0, &offsets)?;
            }
            match self.store.get() {
                Some(store) => store.write(&key.0, producer_id, None)?,
                None => {
                    let mut t = self.table.lock();
                    let mut next = t.clone();
                    next.remove(&key);
                    persist(journal_entry(&next, producer_id))?;
                    *t = next;
                }
            }
        }
        Ok(())
    }

    /// Whether an offset of this group partition is pending.
    pub fn has(&self, group: &str, topic: &str, partition: i32) -> bool {
        let t = self.table.lock();
        let from = (group.to_string(), i64::MIN);
        t.range(from..)
            .take_while(|(k, _)| k.0 == group)
            .any(|(_, p)| p.offsets.contains_key(&(topic.to_string(), partition)))
    }

    /// The producers with offsets pending for `group` (tests, logs).
    pub fn producers_of(&self, group: &str) -> BTreeSet<i64> {
        let t = self.table.lock();
        let from = (group.to_string(), i64::MIN);
        t.range(from..)
            .take_while(|(k, _)| k.0 == group)
            .map(|(k, _)| k.1)
            .collect()
    }

    // ----- the mirror of the metadata log (in a broker) --------------------

    /// The metadata log applied `pending` (`None`: removed) for (`group`,
    /// `producer_id`), a group this broker coordinates. Called on the log's
    /// apply thread; never waits for a writer.
    pub fn applied(&self, group: &str, producer_id: i64, pending: Option<&RemotePending>) {
        let key = (group.to_string(), producer_id);
        let mut t = self.table.lock();
        match pending {
            Some(p) => {
                t.insert(key, Pending::from_stored(p));
            }
            None => {
                t.remove(&key);
            }
        }
    }

    /// This broker now coordinates the groups `placed` selects: replaces
    /// what memory holds for them with `entries` (from the log). Returns
    /// how many (group, producer) entries it loaded.
    pub fn load(
        &self,
        placed: &dyn Fn(&str) -> bool,
        entries: Vec<(RemoteKey, RemotePending)>,
    ) -> usize {
        let mut t = self.table.lock();
        t.retain(|k, _| !placed(&k.0));
        let mut n = 0;
        for (k, p) in entries {
            if placed(&k.0) {
                t.insert(k, Pending::from_stored(&p));
                n += 1;
            }
        }
        n
    }

    /// This broker no longer coordinates the groups `placed` selects: drops
    /// what it holds for them. Returns how many entries it dropped.
    pub fn unload(&self, placed: &dyn Fn(&str) -> bool) -> usize {
        let mut t = self.table.lock();
        let before = t.len();
        t.retain(|k, _| !placed(&k.0));
        before - t.len()
    }
}

#[cfg(test)]
#[path = "remote_offsets_tests.rs"]
mod tests;
