//! The durable files of one share-partition (docs/share-groups-design.md
//! §3.3, docs/storage.md "Share-group state"): a journal of small binary
//! entries (es-storage's [`Journal`]: CRC-32C records, group commit, torn
//! tails cut at open) and a JSON snapshot the journal is folded into,
//! replaced atomically (`meta::write_json`: tmp, fsync, rename, dir fsync).
//!
//! ```text
//! data/shares/<group stem>/<topic>-<partition>.journal
//! data/shares/<group stem>/<topic>-<partition>.snapshot.json
//! ```
//!
//! This module owns the entry format ([`Entry`], [`encode_update`],
//! [`decode_entry`]), replay ([`ShareState`], Kafka's combiner as
//! [`DurableView`] implements it), the fold, stale topic ids and deletion;
//! `store_files.rs` the files' names and their durable removal,
//! `store_replica.rs` what a follower copies of them.
//! It knows nothing of locks, sessions or requests: the shell
//! (`ShareManager`, a later commit) calls it with the changes the
//! [`super::partition::SharePartition`] core emits, in the core's critical
//! section, so the journal order is the memory order.
//!
//! Invariants:
//!
//! - the in-memory fold ([`ShareStore::state`]) is changed in the same
//!   critical section as the journal write, so a fold never misses an entry
//!   that is in the journal and never holds one that is not;
//! - a write is durable only once [`ShareStore::sync`] returned for its
//!   ticket (one fsync covers every writer waiting, [`Journal::sync`]);
//! - a fold syncs the journal, replaces the snapshot, then truncates the
//!   journal; a crash between the last two leaves entries the snapshot holds,
//!   which replay skips by sequence;
//! - an Update of more than [`UPDATE_BATCHES_MAX`] batches is written as
//!   several entries in one write: every one but the last is an UpdatePart
//!   (kind 4), which replay applies only together with the Update that
//!   closes it, so a torn write never leaves half a change (a deviation from
//!   §3.3's "several Update entries", which would);
//! - every byte read is untrusted: lengths are checked before anything is
//!   allocated, bad input is an error and never a panic; an entry that passed
//!   its CRC but does not decode stops the load (it is not a torn tail).

use std::path::Path;
use std::sync::Arc;

use es_storage::journal::{Journal, Ticket};
use es_storage::{meta, Fs, SharedClock, StorageError};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::partition::{
    DurableState, DurableView, Outcome, ShareError, ShareLimits, SharePartition, ShareUpdate,
    StateBatch, OFFSET_MAX,
};

/// The directory under the data directory holding every share group's files.
pub const SHARES_DIR: &str = "shares";
/// Suffix of a share-partition's journal.
pub const JOURNAL_SUFFIX: &str = ".journal";
/// Suffix of a share-partition's snapshot.
pub const SNAPSHOT_SUFFIX: &str = ".snapshot.json";
/// Appended to a file's name while it is being deleted.
pub const DELETED_SUFFIX: &str = ".deleted";
/// Version of the snapshot document.
pub const SNAPSHOT_FORMAT: u32 = 1;
/// Fold once the journal holds this many bytes (1 MiB).
pub const FOLD_JOURNAL_BYTES: u64 = 1024 * 1024;

/// The first byte of every entry.
pub const ENTRY_VERSION: u8 = 1;
pub const KIND_INIT: u8 = 1;
pub const KIND_UPDATE: u8 = 2;
pub const KIND_RESET: u8 = 3;
/// Not the last part of a split Update (see the module comment).
pub const KIND_UPDATE_PART: u8 = 4;
/// version + kind.
pub const HEADER_BYTES: usize = 2;
/// Init: topic id 16, state epoch 4, leader epoch 4, start offset 8.
pub const INIT_BYTES: usize = HEADER_BYTES + 16 + 4 + 4 + 8;
/// Update up to its batches: leader epoch 4, start offset 8, count 2.
pub const UPDATE_HEAD_BYTES: usize = HEADER_BYTES + 4 + 8 + 2;
/// Reset: state epoch 4, start offset 8.
pub const RESET_BYTES: usize = HEADER_BYTES + 4 + 8;
/// One batch: first 8, last 8, state 1, delivery count 2.
pub const BATCH_BYTES: usize = 8 + 8 + 1 + 2;
/// The most batches one Update entry holds (its count is a u16).
pub const UPDATE_BATCHES_MAX: usize = u16::MAX as usize;

/// One journal entry (§3.3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// First load without files: the topic id and the start offset.
    Init {
        topic_id: Uuid,
        state_epoch: i32,
        leader_epoch: i32,
        start_offset: i64,
    },
    /// A change of the core ([`ShareUpdate`]); `last` is false for every
    /// part of a split Update but its last.
    Update {
        leader_epoch: i32,
        update: ShareUpdate,
        last: bool,
    },
    /// AlterShareGroupOffsets: a new start offset, every batch dropped.
    Reset { state_epoch: i32, start_offset: i64 },
}

/// Why bytes are not an entry.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    #[error("entry of {0} bytes is too short")]
    Truncated(usize),
    #[error("entry has {0} bytes after its end")]
    Trailing(usize),
    #[error("unknown entry version {0}")]
    Version(u8),
    #[error("unknown entry kind {0}")]
    Kind(u8),
    #[error("bad field: {0}")]
    Field(String),
    #[error("update of {0} batches is over the limit of one entry")]
    TooManyBatches(usize),
}

/// Reads big-endian fields off a slice; every read is checked.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], EntryError> {
        let end = self.pos.checked_add(N).filter(|&e| e <= self.buf.len());
        let Some(end) = end else {
            return Err(EntryError::Truncated(self.buf.len()));
        };
        let mut out = [0u8; N];
        out.copy_from_slice(&self.buf[self.pos..end]);
        self.pos = end;
        Ok(out)
    }
    fn u8(&mut self) -> Result<u8, EntryError> {
        Ok(self.take::<1>()?[0])
    }
    fn u16(&mut self) -> Result<u16, EntryError> {
        Ok(u16::from_be_bytes(self.take()?))
    }
    fn i32(&mut self) -> Result<i32, EntryError> {
        Ok(i32::from_be_bytes(self.take()?))
    }
    fn i64(&mut self) -> Result<i64, EntryError> {
        Ok(i64::from_be_bytes(self.take()?))
    }
    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
}

fn check_offset(what: &str, o: i64) -> Result<(), EntryError> {
    if (0..=OFFSET_MAX).contains(&o) {
        Ok(())
    } else {
        Err(EntryError::Field(format!("{what} {o} out of range")))
    }
}

fn check_batch(b: &StateBatch) -> Result<(), EntryError> {
    check_offset("batch first offset", b.first)?;
    check_offset("batch last offset", b.last)?;
    if b.first > b.last {
        return Err(EntryError::Field(format!(
            "batch {}-{} is empty",
            b.first, b.last
        )));
    }
    Ok(())
}

/// Encodes one entry. An Update over [`UPDATE_BATCHES_MAX`] batches is
/// refused: [`encode_update`] splits it.
pub fn encode_entry(e: &Entry) -> Result<Vec<u8>, EntryError> {
    let mut out = Vec::new();
    out.push(ENTRY_VERSION);
    match e {
        Entry::Init {
            topic_id,
            state_epoch,
            leader_epoch,
            start_offset,
        } => {
            out.reserve(INIT_BYTES);
            out.push(KIND_INIT);
            out.extend_from_slice(topic_id.as_bytes());
            out.extend_from_slice(&state_epoch.to_be_bytes());
            out.extend_from_slice(&leader_epoch.to_be_bytes());
            out.extend_from_slice(&start_offset.to_be_bytes());
        }
        Entry::Update {
            leader_epoch,
            update,
            last,
        } => {
            let n = update.batches.len();
            let count = u16::try_from(n).map_err(|_| EntryError::TooManyBatches(n))?;
            out.reserve(UPDATE_HEAD_BYTES + n * BATCH_BYTES);
            out.push(if *last { KIND_UPDATE } else { KIND_UPDATE_PART });
            out.extend_from_slice(&leader_epoch.to_be_bytes());
            out.extend_from_slice(&update.start_offset.to_be_bytes());
            out.extend_from_slice(&count.to_be_bytes());
            for b in &update.batches {
                out.extend_from_slice(&b.first.to_be_bytes());
                out.extend_from_slice(&b.last.to_be_bytes());
                out.push(b.state.id());
                out.extend_from_slice(&b.delivery_count.to_be_bytes());
            }
        }
        Entry::Reset {
            state_epoch,
            start_offset,
        } => {
            out.reserve(RESET_BYTES);
            out.push(KIND_RESET);
            out.extend_from_slice(&state_epoch.to_be_bytes());
            out.extend_from_slice(&start_offset.to_be_bytes());
        }
    }
    Ok(out)
}

/// Encodes an Update as entries of at most `per_entry` batches (clamped to
/// 1..=[`UPDATE_BATCHES_MAX`]), each repeating the start offset; all but the
/// last are UpdateParts. An Update without batches is one entry.
pub fn encode_update(leader_epoch: i32, u: &ShareUpdate, per_entry: usize) -> Vec<Vec<u8>> {
    let per_entry = per_entry.clamp(1, UPDATE_BATCHES_MAX);
    let chunks: Vec<&[StateBatch]> = if u.batches.is_empty() {
        vec![&[]]
    } else {
        u.batches.chunks(per_entry).collect()
    };
    let n = chunks.len();
    chunks
        .into_iter()
        .enumerate()
        .filter_map(|(i, c)| {
            let e = Entry::Update {
                leader_epoch,
                update: ShareUpdate {
                    start_offset: u.start_offset,
                    batches: c.to_vec(),
                },
                last: i + 1 == n,
            };
            // A chunk is at most UPDATE_BATCHES_MAX batches: never refused.
            encode_entry(&e).ok()
        })
        .collect()
}

/// Decodes one entry, checking every length before allocating and every
/// field's range.
pub fn decode_entry(bytes: &[u8]) -> Result<Entry, EntryError> {
    let mut r = Reader { buf: bytes, pos: 0 };
    let version = r.u8()?;
    if version != ENTRY_VERSION {
        return Err(EntryError::Version(version));
    }
    let kind = r.u8()?;
    let e = match kind {
        KIND_INIT => {
            let topic_id = Uuid::from_bytes(r.take::<16>()?);
            let state_epoch = r.i32()?;
            let leader_epoch = r.i32()?;
            let start_offset = r.i64()?;
            check_offset("start offset", start_offset)?;
            Entry::Init {
                topic_id,
                state_epoch,
                leader_epoch,
                start_offset,
            }
        }
        KIND_UPDATE | KIND_UPDATE_PART => {
            let leader_epoch = r.i32()?;
            let start_offset = r.i64()?;
            check_offset("start offset", start_offset)?;
            let n = usize::from(r.u16()?);
            let need = n * BATCH_BYTES;
            if r.remaining() < need {
                return Err(EntryError::Truncated(bytes.len()));
            }
            let mut batches = Vec::with_capacity(n);
            for _ in 0..n {
                let first = r.i64()?;
                let last = r.i64()?;
                let id = r.u8()?;
                let state = DurableState::from_id(id)
                    .ok_or_else(|| EntryError::Field(format!("record state {id}")))?;
                let delivery_count = r.u16()?;
                let b = StateBatch {
                    first,
                    last,
                    state,
                    delivery_count,
                };
                check_batch(&b)?;
                batches.push(b);
            }
            Entry::Update {
                leader_epoch,
                update: ShareUpdate {
                    start_offset,
                    batches,
                },
                last: kind == KIND_UPDATE,
            }
        }
        KIND_RESET => {
            let state_epoch = r.i32()?;
            let start_offset = r.i64()?;
            check_offset("start offset", start_offset)?;
            Entry::Reset {
                state_epoch,
                start_offset,
            }
        }
        k => return Err(EntryError::Kind(k)),
    };
    if r.remaining() != 0 {
        return Err(EntryError::Trailing(r.remaining()));
    }
    Ok(e)
}

/// The durable state of one share-partition: what replay gives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareState {
    pub topic_id: Uuid,
    pub state_epoch: i32,
    pub leader_epoch: i32,
    /// The start offset and the batches above it (Kafka's combiner).
    pub view: DurableView,
}

impl ShareState {
    /// Applies one whole change. UpdateParts are gathered by the caller and
    /// applied with the Update that closes them ([`Replay`]). Returns false
    /// for an Update or Reset with no state to apply it to.
    fn apply(state: &mut Option<ShareState>, e: &Entry) -> bool {
        match e {
            Entry::Init {
                topic_id,
                state_epoch,
                leader_epoch,
                start_offset,
            } => {
                *state = Some(ShareState {
                    topic_id: *topic_id,
                    state_epoch: *state_epoch,
                    leader_epoch: *leader_epoch,
                    view: DurableView::new(*start_offset),
                });
                true
            }
            Entry::Update {
                leader_epoch,
                update,
                ..
            } => match state {
                Some(s) => {
                    s.leader_epoch = *leader_epoch;
                    s.view.apply(update);
                    true
                }
                None => false,
            },
            Entry::Reset {
                state_epoch,
                start_offset,
            } => match state {
                Some(s) => {
                    s.state_epoch = *state_epoch;
                    s.view = DurableView::new(*start_offset);
                    true
                }
                None => false,
            },
        }
    }

    /// A state from its parts as a snapshot (or a leader's copy, §3.10)
    /// holds them: `batches` as `[first, last, state, delivery count]`,
    /// ascending, not overlapping, above the start. Untrusted: each part is
    /// checked.
    pub fn from_parts(
        topic_id: Uuid,
        state_epoch: i32,
        leader_epoch: i32,
        start_offset: i64,
        parts: &[(i64, i64, u8, u16)],
    ) -> Result<ShareState, String> {
        check_offset("start offset", start_offset).map_err(|e| e.to_string())?;
        let mut batches = Vec::with_capacity(parts.len());
        let mut next = start_offset;
        for &(first, last, id, delivery_count) in parts {
            let state = DurableState::from_id(id).ok_or_else(|| format!("record state {id}"))?;
            let b = StateBatch {
                first,
                last,
                state,
                delivery_count,
            };
            check_batch(&b).map_err(|e| e.to_string())?;
            if first < next {
                return Err(format!("batch {first}-{last} overlaps or is out of order"));
            }
            next = last.saturating_add(1);
            batches.push(b);
        }
        let mut view = DurableView::new(start_offset);
        view.apply(&ShareUpdate {
            start_offset,
            batches,
        });
        Ok(ShareState {
            topic_id,
            state_epoch,
            leader_epoch,
            view,
        })
    }

    /// The batches as [`ShareState::from_parts`] takes them.
    pub fn parts(&self) -> Vec<(i64, i64, u8, u16)> {
        self.view
            .batches()
            .iter()
            .map(|b| (b.first, b.last, b.state.id(), b.delivery_count))
            .collect()
    }

    /// Rebuilds the core from this state (§3.4, [`SharePartition::restore`]);
    /// the Outcome's Update, if any, is for the caller to write.
    pub fn restore(
        &self,
        log_start: i64,
        limits: ShareLimits,
    ) -> Result<(SharePartition, Outcome), ShareError> {
        SharePartition::restore(
            self.view.start_offset(),
            &self.view.batches(),
            log_start,
            limits,
        )
    }
}

/// Replay of entries in order: UpdateParts wait for the Update that closes
/// them.
#[derive(Default)]
struct Replay {
    state: Option<ShareState>,
    parts: Vec<ShareUpdate>,
}

impl Replay {
    fn push(&mut self, e: Entry) -> Result<(), String> {
        match e {
            Entry::Update {
                leader_epoch,
                update,
                last: false,
            } => {
                let _ = leader_epoch;
                self.parts.push(update);
                Ok(())
            }
            e => {
                if matches!(e, Entry::Update { .. }) {
                    for u in std::mem::take(&mut self.parts) {
                        if let Some(s) = &mut self.state {
                            s.view.apply(&u);
                        }
                    }
                } else if !self.parts.is_empty() {
                    return Err("a split update is not closed by its last part".into());
                }
                if ShareState::apply(&mut self.state, &e) {
                    Ok(())
                } else {
                    Err("an update or reset before any init".into())
                }
            }
        }
    }
}

/// The snapshot document (§3.3).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Snapshot {
    format: u32,
    group: String,
    topic: String,
    topic_id: Uuid,
    partition: i32,
    state_epoch: i32,
    leader_epoch: i32,
    start_offset: i64,
    /// The sequence of the last journal entry folded in.
    seq: u64,
    /// `[first, last, state, delivery count]`, ascending, not overlapping.
    batches: Vec<(i64, i64, u8, u16)>,
}

/// What [`ShareStore::open`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Loaded {
    /// No files (or only the remains of a deletion): write an Init first.
    Fresh,
    /// The files were of an earlier topic of the same name and are removed.
    Stale { topic_id: Uuid },
    /// The recovered state.
    State(ShareState),
}

struct Inner {
    state: Option<ShareState>,
    /// Set by a failed fold or a deletion: every later call fails.
    fenced: Option<String>,
    /// The latest writes, for the followers' copies (§3.10).
    recent: Recent,
}

/// One share-partition's journal and snapshot.
pub struct ShareStore {
    fs: Arc<dyn Fs>,
    files: ShareFiles,
    /// The topic's current id, written in every Init.
    topic_id: Uuid,
    journal: Journal,
    inner: Mutex<Inner>,
    clock: SharedClock,
    /// Fold past this many journal bytes.
    fold_bytes: u64,
    /// Batches per Update entry (tests split small).
    batches_per_entry: usize,
}

impl std::fmt::Debug for ShareStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShareStore")
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

fn bad(file: &Path, why: impl Into<String>) -> StorageError {
    StorageError::Metadata {
        file: file.display().to_string(),
        why: why.into(),
    }
}

/// Reads and checks the snapshot; `None` when there is none.
fn read_snapshot(
    fs: &dyn Fs,
    files: &ShareFiles,
) -> Result<Option<(u64, ShareState)>, StorageError> {
    let path = &files.snapshot;
    let Some(s) = meta::read_json::<Snapshot>(fs, path)? else {
        return Ok(None);
    };
    if s.format != SNAPSHOT_FORMAT {
        return Err(bad(path, format!("unknown snapshot format {}", s.format)));
    }
    if s.group != files.group || s.topic != files.topic || s.partition != files.partition {
        return Err(bad(
            path,
            format!("snapshot is of {}/{}-{}", s.group, s.topic, s.partition),
        ));
    }
    let state = ShareState::from_parts(
        s.topic_id,
        s.state_epoch,
        s.leader_epoch,
        s.start_offset,
        &s.batches,
    )
    .map_err(|why| bad(path, why))?;
    Ok(Some((s.seq, state)))
}

impl ShareStore {
    /// Opens (creating the directory) the files of `(group, topic,
    /// partition)` under `data_dir` and replays them. Files of another topic
    /// id than `topic_id` are removed ([`Loaded::Stale`]); a deletion a crash
    /// interrupted is finished ([`Loaded::Fresh`]). Blocking.
    pub fn open(
        fs: Arc<dyn Fs>,
        data_dir: &Path,
        group: &str,
        topic: &str,
        partition: i32,
        topic_id: Uuid,
        clock: SharedClock,
    ) -> Result<(ShareStore, Loaded), StorageError> {
        let files = ShareFiles::new(data_dir, group, topic, partition);
        es_storage::fs::create_dir_durable(fs.as_ref(), &files.dir)?;
        files.remove_temp_files(fs.as_ref())?;
        if files.deletion_started(fs.as_ref()) {
            files.finish_removal(fs.as_ref())?;
        }
        let snap = read_snapshot(fs.as_ref(), &files)?;
        let (mut folded_seq, state) = match snap {
            Some((seq, s)) => (Some(seq), Some(s)),
            None => (None, None),
        };
        // Cuts a torn or unsynced tail.
        let (mut journal, rec) = Journal::open(fs.as_ref(), &files.journal)?;
        let mut replay = Replay {
            state,
            parts: Vec::new(),
        };
        let mut replayed = 0usize;
        for e in &rec.entries {
            if folded_seq.is_some_and(|s| e.seq <= s) {
                continue;
            }
            let entry = decode_entry(&e.payload).map_err(|err| {
                bad(
                    &files.journal,
                    format!("entry {} does not decode: {err}", e.seq),
                )
            })?;
            replay
                .push(entry)
                .map_err(|why| bad(&files.journal, format!("entry {}: {why}", e.seq)))?;
            replayed += 1;
        }
        // The tail of a split Update whose write never completed (so never
        // synced, never answered) is dropped; a fold below puts its entries
        // behind the snapshot's sequence so they never join a later Update.
        let orphan_parts = !replay.parts.is_empty();
        let mut loaded = match replay.state {
            Some(s) => Loaded::State(s),
            None => Loaded::Fresh,
        };
        if let Loaded::State(s) = &loaded {
            if s.topic_id != topic_id {
                let stale = s.topic_id;
                tracing::info!(group, topic, partition, stale = %stale, current = %topic_id,
                    "share-partition files of an earlier topic id removed");
                drop(journal);
                files.remove(fs.as_ref())?;
                journal = Journal::open(fs.as_ref(), &files.journal)?.0;
                folded_seq = None;
                loaded = Loaded::Stale { topic_id: stale };
            }
        }
        if let Some(s) = folded_seq {
            journal.ensure_next_seq(s + 1);
        }
        let state = match &loaded {
            Loaded::State(s) => Some(s.clone()),
            _ => None,
        };
        let store = ShareStore {
            fs,
            files,
            topic_id,
            journal,
            inner: Mutex::new(Inner {
                state,
                fenced: None,
                recent: Recent::default(),
            }),
            clock,
            fold_bytes: FOLD_JOURNAL_BYTES,
            batches_per_entry: UPDATE_BATCHES_MAX,
        };
        if orphan_parts && matches!(loaded, Loaded::State(_)) {
            store.fold()?;
        }
        tracing::debug!(
            group,
            topic,
            partition,
            replayed,
            cut_bytes = rec.cut_bytes,
            "share-partition files loaded"
        );
        Ok((store, loaded))
    }

    /// Folds once the journal passes `bytes` instead of
    /// [`FOLD_JOURNAL_BYTES`] (tests).
    pub fn set_fold_bytes(&mut self, bytes: u64) {
        self.fold_bytes = bytes;
    }

    /// Splits Updates into entries of at most `n` batches instead of
    /// [`UPDATE_BATCHES_MAX`] (tests).
    pub fn set_batches_per_entry(&mut self, n: usize) {
        self.batches_per_entry = n.clamp(1, UPDATE_BATCHES_MAX);
    }

    pub fn files(&self) -> &ShareFiles {
        &self.files
    }

    /// The fold of everything written (durable or not yet).
    pub fn state(&self) -> Option<ShareState> {
        self.inner.lock().state.clone()
    }

    /// Writes `payloads` (one change) and applies it to the fold, in one
    /// critical section; `needs_state` refuses a change before any Init.
    /// Not durable until [`ShareStore::sync`].
    fn write(
        &self,
        payloads: &[Vec<u8>],
        needs_state: bool,
        apply: impl FnOnce(&mut Option<ShareState>),
    ) -> Result<Ticket, StorageError> {
        let mut g = self.inner.lock();
        if let Some(why) = &g.fenced {
            return Err(StorageError::Fenced(format!(
                "{}: {why}",
                self.files.journal.display()
            )));
        }
        if needs_state && g.state.is_none() {
            return Err(StorageError::Invalid(
                "share-partition change before its init".into(),
            ));
        }
        let refs: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
        let (ticket, last_seq) = self.journal.write(&refs, self.clock.now_ms())?;
        apply(&mut g.state);
        g.recent.push(last_seq, payloads);
        Ok(ticket)
    }

    /// The sequence of the newest entry written (durable or not yet).
    pub fn last_seq(&self) -> Option<u64> {
        self.journal.last_seq()
    }

    /// Writes an Init entry with the topic's current id: a share-partition
    /// starting at `start_offset` with nothing in flight (first load, or
    /// replacing whatever was).
    pub fn write_init(
        &self,
        state_epoch: i32,
        leader_epoch: i32,
        start_offset: i64,
    ) -> Result<Ticket, StorageError> {
        let e = Entry::Init {
            topic_id: self.topic_id,
            state_epoch,
            leader_epoch,
            start_offset,
        };
        let p = self.encode(&e)?;
        self.write(&[p], false, |s| {
            ShareState::apply(s, &e);
        })
    }

    /// Writes a change of the core, split past the entry limit.
    pub fn write_update(&self, leader_epoch: i32, u: &ShareUpdate) -> Result<Ticket, StorageError> {
        check_offset("start offset", u.start_offset)
            .map_err(|e| StorageError::Invalid(e.to_string()))?;
        for b in &u.batches {
            check_batch(b).map_err(|e| StorageError::Invalid(e.to_string()))?;
        }
        let payloads = encode_update(leader_epoch, u, self.batches_per_entry);
        self.write(&payloads, true, |s| {
            if let Some(st) = s {
                st.leader_epoch = leader_epoch;
                st.view.apply(u);
            }
        })
    }

    /// Writes a Reset entry (AlterShareGroupOffsets).
    pub fn write_reset(&self, state_epoch: i32, start_offset: i64) -> Result<Ticket, StorageError> {
        let e = Entry::Reset {
            state_epoch,
            start_offset,
        };
        let p = self.encode(&e)?;
        self.write(&[p], true, |s| {
            ShareState::apply(s, &e);
        })
    }

    fn encode(&self, e: &Entry) -> Result<Vec<u8>, StorageError> {
        let start = match e {
            Entry::Init { start_offset, .. } | Entry::Reset { start_offset, .. } => *start_offset,
            Entry::Update { update, .. } => update.start_offset,
        };
        check_offset("start offset", start).map_err(|e| StorageError::Invalid(e.to_string()))?;
        encode_entry(e).map_err(|e| StorageError::Invalid(e.to_string()))
    }

    /// Returns once an fsync covers `ticket` (group commit): only then is the
    /// change durable and may be answered. A failed fsync fences the journal.
    pub fn sync(&self, ticket: Ticket) -> Result<(), StorageError> {
        self.journal.sync(ticket)
    }

    /// fsyncs of this share-partition's journal so far (metrics).
    pub fn fsyncs(&self) -> u64 {
        self.journal.fsyncs()
    }

    /// Whether the journal has passed the fold size.
    pub fn should_fold(&self) -> bool {
        self.journal.len_bytes() >= self.fold_bytes
    }

    /// Folds when the journal has passed the fold size.
    pub fn fold_if_due(&self) -> Result<bool, StorageError> {
        if !self.should_fold() {
            return Ok(false);
        }
        self.fold()?;
        Ok(true)
    }

    /// Folds the journal into the snapshot and truncates it (also at a clean
    /// shutdown). Writers wait meanwhile. A failure fences the store: the
    /// files are consistent on disk, but this process no longer knows which
    /// of them a restart will read. Blocking.
    pub fn fold(&self) -> Result<(), StorageError> {
        let mut g = self.inner.lock();
        if let Some(why) = &g.fenced {
            return Err(StorageError::Fenced(format!(
                "{}: {why}",
                self.files.journal.display()
            )));
        }
        let (Some(st), Some(seq)) = (&g.state, self.journal.last_seq()) else {
            return Ok(());
        };
        if self.journal.len_bytes() == 0 && self.fs.exists(&self.files.snapshot) {
            return Ok(());
        }
        let res = self.replace_snapshot(st, seq);
        if let Err(e) = &res {
            tracing::error!(journal = %self.files.journal.display(), error = %e, "share-partition fold failed; fenced until restart");
            g.fenced = Some(format!("fold failed: {e}"));
        }
        res
    }

    /// Syncs the journal, replaces the snapshot with `state` as of journal
    /// sequence `seq`, then empties the journal (a fold, a follower's
    /// install). Blocking.
    fn replace_snapshot(&self, state: &ShareState, seq: u64) -> Result<(), StorageError> {
        let snap = Snapshot {
            format: SNAPSHOT_FORMAT,
            group: self.files.group.clone(),
            topic: self.files.topic.clone(),
            topic_id: state.topic_id,
            partition: self.files.partition,
            state_epoch: state.state_epoch,
            leader_epoch: state.leader_epoch,
            start_offset: state.view.start_offset(),
            seq,
            batches: state.parts(),
        };
        self.journal
            .sync_all()
            .and_then(|()| meta::write_json(self.fs.as_ref(), &self.files.snapshot, &snap))
            .and_then(|()| self.journal.truncate())
    }

    /// Deletes the share-partition's files (DeleteShareGroupOffsets,
    /// DeleteGroups, topic deletion); durable when this returns. The store
    /// is unusable afterwards.
    pub fn delete(self) -> Result<(), StorageError> {
        self.remove_files()
    }

    /// [`ShareStore::delete`] for a store others may still hold (a fetch's
    /// durability wait, the fsync task): every later write, fsync and fold
    /// is refused.
    pub fn remove_files(&self) -> Result<(), StorageError> {
        let mut g = self.inner.lock();
        g.fenced = Some("deleted".into());
        g.state = None;
        self.files.remove(self.fs.as_ref())
    }
}

#[path = "store_files.rs"]
mod files;
pub use files::ShareFiles;

#[path = "store_replica.rs"]
mod replica;
use replica::Recent;
pub use replica::{ReplicaView, RECENT_BYTES_MAX, RECENT_WRITES_MAX};

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
