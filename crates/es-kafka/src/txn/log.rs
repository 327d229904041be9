//! The producers journal: the durable form of the transaction coordinator,
//! `data/producers.journal` (append-only, CRC-checked entries; es-storage's
//! [`Journal`]) folded periodically into `data/producers.json` (replaced
//! atomically) and then truncated.
//!
//! Entries are JSON documents ([`LogEntry`]): a reserved block of producer
//! ids, the whole record of one transactional id after a change, the
//! removal of an expired id, or the offsets held for one producer of a
//! transaction another broker coordinates. Folding them in order gives a [`LogState`]; the
//! snapshot is a `LogState` plus the sequence of the last entry it folds.
//!
//! Invariants:
//! - an entry is applied to the in-memory fold in the same critical section
//!   as its journal write, so a fold never misses an entry that is in the
//!   journal and never holds one that is not;
//! - a fold first syncs the journal, then replaces the snapshot, then
//!   truncates the journal; a crash between the last two leaves entries the
//!   snapshot already holds, which replay skips by sequence number;
//! - replay at startup applies the snapshot, then every entry with a larger
//!   sequence, so recovering twice gives the same state.
//!
//! Producer ids: a block is journaled (and synced) before any id in it is
//! handed out, and a restart continues after the highest reserved block, so
//! ids are never reused.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use es_storage::journal::Journal;
use es_storage::{meta, Fs, SharedClock, StorageError};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use super::state::{TxnOffset, TxnRecord};

/// The journal file under the data directory.
pub const JOURNAL_FILE: &str = "producers.journal";
/// The snapshot file under the data directory.
pub const SNAPSHOT_FILE: &str = "producers.json";
/// Version of the snapshot document.
pub const SNAPSHOT_FORMAT: u32 = 1;
/// Fold once the journal holds this many bytes (1 MiB).
pub const FOLD_JOURNAL_BYTES: u64 = 1024 * 1024;

/// One journal entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum LogEntry {
    /// Producer ids below `until` may have been handed out.
    ReservePids { until: i64 },
    /// The record of transactional id `id` after a change.
    Txn { id: String, txn: TxnRecord },
    /// Transactional id `id` expired.
    Remove { id: String },
    /// The transactional offsets this broker holds, as a group's
    /// coordinator, for producer `producer_id` of a transaction another
    /// broker coordinates, after a change ([`super::remote_offsets`]); no
    /// offsets: none left. Written only by a coordinator without a broker
    /// (tests) and by data directories from before; a broker holds them in
    /// the metadata quorum and imports these once.
    RemoteOffsets {
        producer_id: i64,
        epoch: i16,
        offsets: Vec<TxnOffset>,
    },
}

/// Offsets held for one producer of a transaction coordinated elsewhere.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemotePending {
    pub epoch: i16,
    pub offsets: Vec<TxnOffset>,
}

/// The fold of every entry so far.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogState {
    /// Producer ids below this are reserved (maybe handed out).
    pub pids_reserved_until: i64,
    pub txns: BTreeMap<String, TxnRecord>,
    /// By producer id.
    #[serde(default, with = "pid_keys")]
    pub remote_offsets: BTreeMap<i64, RemotePending>,
}

/// A map keyed by producer id, as JSON writes it: keys are strings. Plain
/// integer keys do not read back inside the snapshot's flattened document
/// (serde hands flattened fields over as strings), so they are parsed here.
mod pid_keys {
    use std::collections::BTreeMap;

    use serde::{de::Error, Deserialize, Deserializer, Serialize, Serializer};

    use super::RemotePending;

    pub fn serialize<S: Serializer>(
        m: &BTreeMap<i64, RemotePending>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let by_string: BTreeMap<String, &RemotePending> =
            m.iter().map(|(k, v)| (k.to_string(), v)).collect();
        by_string.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<i64, RemotePending>, D::Error> {
        BTreeMap::<String, RemotePending>::deserialize(d)?
            .into_iter()
            .map(|(k, v)| {
                k.parse::<i64>()
                    .map(|k| (k, v))
                    .map_err(|_| D::Error::custom(format!("producer id {k:?}")))
            })
            .collect()
    }
}

impl LogState {
    pub fn apply(&mut self, e: &LogEntry) {
        match e {
            LogEntry::ReservePids { until } => {
                self.pids_reserved_until = self.pids_reserved_until.max(*until);
            }
            LogEntry::Txn { id, txn } => {
                self.txns.insert(id.clone(), txn.clone());
            }
            LogEntry::Remove { id } => {
                self.txns.remove(id);
            }
            LogEntry::RemoteOffsets {
                producer_id,
                epoch,
                offsets,
            } => {
                if offsets.is_empty() {
                    self.remote_offsets.remove(producer_id);
                } else {
                    let p = RemotePending {
                        epoch: *epoch,
                        offsets: offsets.clone(),
                    };
                    self.remote_offsets.insert(*producer_id, p);
                }
            }
        }
    }
}

/// `data/producers.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Snapshot {
    format: u32,
    /// Sequence of the last journal entry folded in (None: none ever).
    folded_seq: Option<u64>,
    #[serde(flatten)]
    state: LogState,
}

/// The coordinator's journal and snapshot.
#[derive(Debug)]
pub struct TxnLog {
    fs: Arc<dyn Fs>,
    snapshot_path: PathBuf,
    journal: Journal,
    folded: Mutex<LogState>,
    /// Stamps journal entries.
    clock: SharedClock,
}

fn bad(file: &Path, why: impl Into<String>) -> StorageError {
    StorageError::Metadata {
        file: file.display().to_string(),
        why: why.into(),
    }
}

impl TxnLog {
    /// Opens the snapshot and the journal under `data_dir`, replays them and
    /// returns the recovered state. Blocking.
    pub fn open(
        fs: Arc<dyn Fs>,
        data_dir: &Path,
        clock: SharedClock,
    ) -> Result<(TxnLog, LogState), StorageError> {
        let snapshot_path = data_dir.join(SNAPSHOT_FILE);
        let journal_path = data_dir.join(JOURNAL_FILE);
        let snap: Option<Snapshot> = meta::read_json(fs.as_ref(), &snapshot_path)?;
        let (folded_seq, mut state) = match snap {
            Some(s) if s.format != SNAPSHOT_FORMAT => {
                return Err(bad(
                    &snapshot_path,
                    format!("unknown snapshot format {}", s.format),
                ))
            }
            Some(s) => (s.folded_seq, s.state),
            None => (None, LogState::default()),
        };
        let (journal, rec) = Journal::open(fs.as_ref(), &journal_path)?;
        let mut replayed = 0usize;
        for e in &rec.entries {
            if folded_seq.is_some_and(|s| e.seq <= s) {
                continue;
            }
            let entry: LogEntry = serde_json::from_slice(&e.payload).map_err(|err| {
                bad(
                    &journal_path,
                    format!("entry {} does not parse: {err}", e.seq),
                )
            })?;
            state.apply(&entry);
            replayed += 1;
        }
        if let Some(s) = folded_seq {
            journal.ensure_next_seq(s + 1);
        }
        tracing::info!(
            transactional_ids = state.txns.len(),
            replayed,
            cut_bytes = rec.cut_bytes,
            "producers journal recovered"
        );
        let log = TxnLog {
            fs,
            snapshot_path,
            journal,
            folded: Mutex::new(state.clone()),
            clock,
        };
        Ok((log, state))
    }

    /// Appends `entries` and returns once they are durable. Blocking.
    pub fn append(&self, entries: &[LogEntry]) -> Result<(), StorageError> {
        let mut payloads = Vec::with_capacity(entries.len());
        for e in entries {
            let p = serde_json::to_vec(e)
                .map_err(|err| bad(self.journal.path(), format!("cannot encode entry: {err}")))?;
            payloads.push(p);
        }
        let refs: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
        let ticket = {
            let mut folded = self.folded.lock();
            let (ticket, _) = self.journal.write(&refs, self.clock.now_ms())?;
            for e in entries {
                folded.apply(e);
            }
            ticket
        };
        self.journal.sync(ticket)
    }

    /// Whether the journal has grown enough to fold.
    pub fn should_fold(&self) -> bool {
        self.journal.len_bytes() >= FOLD_JOURNAL_BYTES
    }

    /// Folds the journal into the snapshot and truncates it. Writers wait
    /// meanwhile (a few milliseconds). Blocking.
    pub fn fold(&self) -> Result<(), StorageError> {
        let folded = self.folded.lock();
        if self.journal.len_bytes() == 0 && self.fs.exists(&self.snapshot_path) {
            return Ok(());
        }
        self.journal.sync_all()?;
        let snap = Snapshot {
            format: SNAPSHOT_FORMAT,
            folded_seq: self.journal.last_seq(),
            state: folded.clone(),
        };
        meta::write_json(self.fs.as_ref(), &self.snapshot_path, &snap)?;
        self.journal.truncate()?;
        tracing::debug!(seq = ?snap.folded_seq, "producers journal folded into producers.json");
        Ok(())
    }

    /// A copy of the durable state (tests).
    pub fn state(&self) -> LogState {
        self.folded.lock().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::state::{TopicPartition, TxnState};
    use es_storage::simfs::{SimFs, Tear};

    fn dir() -> PathBuf {
        PathBuf::from("/data")
    }

    fn rec(epoch: i16, state: TxnState) -> TxnRecord {
        TxnRecord {
            producer_id: 3,
            prev_producer_id: -1,
            producer_epoch: epoch,
            last_producer_epoch: -1,
            timeout_ms: 60_000,
            state,
            partitions: [TopicPartition::new("t", 0)].into_iter().collect(),
            groups: Default::default(),
            offsets: Vec::new(),
            start_ms: 5,
            last_update_ms: 6,
        }
    }

    fn txn(id: &str, epoch: i16, state: TxnState) -> LogEntry {
        LogEntry::Txn {
            id: id.into(),
            txn: rec(epoch, state),
        }
    }

    #[test]
    fn replay_gives_the_last_record_per_id() {
        let fs = SimFs::new();
        let (log, st) =
            TxnLog::open(Arc::new(fs.clone()), &dir(), es_storage::clock::system()).expect("open");
        assert_eq!(st, LogState::default());
        log.append(&[LogEntry::ReservePids { until: 1000 }])
            .expect("append");
        log.append(&[txn("a", 0, TxnState::Empty), txn("b", 0, TxnState::Empty)])
            .expect("append");
        log.append(&[txn("a", 0, TxnState::Ongoing)])
            .expect("append");
        log.append(&[LogEntry::Remove { id: "b".into() }])
            .expect("append");
        let want = log.state();
        let (_, st) = TxnLog::open(
            Arc::new(fs.crash_image(Tear::None)),
            &dir(),
            es_storage::clock::system(),
        )
        .expect("reopen");
        assert_eq!(st, want);
        assert_eq!(st.pids_reserved_until, 1000);
        assert_eq!(st.txns.len(), 1);
        assert_eq!(st.txns["a"].state, TxnState::Ongoing);
    }

    #[test]
    fn fold_then_more_entries_then_crash_at_every_sync() {
        // Build a history with a fold in the middle; crash at every sync
        // point; the recovered state must be one of the acknowledged states
        // (every acknowledged append is there), and recovering twice agrees.
        let steps: Vec<Vec<LogEntry>> = vec![
            vec![LogEntry::ReservePids { until: 1000 }],
            vec![txn("a", 0, TxnState::Empty)],
            vec![txn("a", 0, TxnState::Ongoing)],
            vec![],
            vec![txn("a", 0, TxnState::PrepareCommit)],
            vec![
                txn("a", 0, TxnState::CompleteCommit),
                txn("b", 1, TxnState::Empty),
            ],
            vec![LogEntry::ReservePids { until: 2000 }],
        ];
        // Count the sync points of a clean run.
        let clean = SimFs::new();
        let (log, _) = TxnLog::open(Arc::new(clean.clone()), &dir(), es_storage::clock::system())
            .expect("open");
        for s in &steps {
            if s.is_empty() {
                log.fold().expect("fold");
            } else {
                log.append(s).expect("append");
            }
        }
        let total = clean.sync_count();
        for k in 1..=total + 1 {
            let fs = SimFs::new();
            let (log, _) = TxnLog::open(Arc::new(fs.clone()), &dir(), es_storage::clock::system())
                .expect("open");
            fs.crash_at_sync(fs.sync_count() + k);
            let mut acked = LogState::default();
            let mut states = vec![acked.clone()];
            for s in &steps {
                if s.is_empty() {
                    if log.fold().is_err() {
                        break;
                    }
                } else {
                    if log.append(s).is_err() {
                        // Not acknowledged: any prefix of its entries may be
                        // there (each entry is a journal record of its own;
                        // a torn write keeps the whole ones before the tear;
                        // the coordinator appends one entry at a time).
                        let mut maybe = acked.clone();
                        for e in s {
                            maybe.apply(e);
                            states.push(maybe.clone());
                        }
                        break;
                    }
                    for e in s {
                        acked.apply(e);
                    }
                    states.push(acked.clone());
                }
            }
            let img = fs.crash_image(Tear::Prefix(k * 7));
            let (_, got) = TxnLog::open(Arc::new(img.clone()), &dir(), es_storage::clock::system())
                .expect("recover");
            assert!(
                states.contains(&got),
                "crash at sync {k}: recovered {got:?}, acknowledged {acked:?}"
            );
            assert!(
                got.pids_reserved_until >= acked.pids_reserved_until,
                "crash at sync {k}: reserved ids went back"
            );
            let (_, again) = TxnLog::open(Arc::new(img), &dir(), es_storage::clock::system())
                .expect("recover again");
            assert_eq!(again, got, "crash at sync {k}: recovery is not idempotent");
        }
    }

    #[test]
    fn torn_journal_tail_is_cut() {
        let fs = SimFs::new();
        let (log, _) =
            TxnLog::open(Arc::new(fs.clone()), &dir(), es_storage::clock::system()).expect("open");
        log.append(&[txn("a", 0, TxnState::Empty)]).expect("append");
        let jp = dir().join(JOURNAL_FILE);
        let len = fs.read_all(&jp).expect("read").len();
        // Plant a half-written entry after the good one.
        let mut bytes = fs.read_all(&jp).expect("read");
        let half = bytes[..len / 2].to_vec();
        bytes.extend_from_slice(&half);
        drop(log);
        let real = tempfile::tempdir().expect("tmp");
        std::fs::write(real.path().join(JOURNAL_FILE), &bytes).expect("write");
        let (log2, st) = TxnLog::open(
            Arc::new(es_storage::RealFs),
            real.path(),
            es_storage::clock::system(),
        )
        .expect("reopen");
        assert_eq!(st.txns.len(), 1);
        assert_eq!(
            std::fs::metadata(real.path().join(JOURNAL_FILE))
                .expect("stat")
                .len(),
            len as u64
        );
        log2.append(&[txn("b", 0, TxnState::Empty)])
            .expect("append");
        let (_, st) = TxnLog::open(
            Arc::new(es_storage::RealFs),
            real.path(),
            es_storage::clock::system(),
        )
        .expect("again");
        assert_eq!(st.txns.len(), 2);
    }

    #[test]
    fn fold_truncates_and_replay_skips_folded_entries() {
        let fs = SimFs::new();
        let (log, _) =
            TxnLog::open(Arc::new(fs.clone()), &dir(), es_storage::clock::system()).expect("open");
        log.append(&[txn("a", 0, TxnState::Empty)]).expect("append");
        log.append(&[txn("a", 1, TxnState::Empty)]).expect("append");
        log.fold().expect("fold");
        assert_eq!(
            fs.read_all(&dir().join(JOURNAL_FILE)).expect("read").len(),
            0
        );
        log.append(&[txn("a", 2, TxnState::Empty)]).expect("append");
        let img = fs.crash_image(Tear::None);
        let (log2, st) = TxnLog::open(Arc::new(img.clone()), &dir(), es_storage::clock::system())
            .expect("reopen");
        assert_eq!(st.txns["a"].producer_epoch, 2);
        // Sequences keep increasing after a restart on a folded journal.
        log2.fold().expect("fold");
        log2.append(&[txn("a", 3, TxnState::Empty)])
            .expect("append");
        let (_, st) = TxnLog::open(
            Arc::new(img.crash_image(Tear::None)),
            &dir(),
            es_storage::clock::system(),
        )
        .expect("again");
        assert_eq!(st.txns["a"].producer_epoch, 3);
    }
}
