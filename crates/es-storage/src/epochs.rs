//! A partition's leader-epoch history: which leader epoch each offset was
//! written in, as Kafka's `LeaderEpochFileCache` keeps it, in the file
//! `leader_epochs.json` beside the partition's segments.
//!
//! Records do not carry their epoch on disk: the history is the one place
//! it is kept. An entry `(epoch, start_offset)` says that records from
//! `start_offset` up to the next entry's start (or the log end) were
//! written while `epoch` was the partition's leader epoch. Epochs strictly
//! increase along the history and start offsets never decrease.
//!
//! What uses it: a leader assigns its new epoch at the log end before it
//! appends in that epoch; a fetch stamps each batch with the epoch of its
//! first record; OffsetForLeaderEpoch answers with [`EpochHistory::end_offset_for`];
//! a follower truncates by it before fetching from a new leader
//! ([`EpochHistory::truncate_from_end`]); retention moves its start with
//! the log start ([`EpochHistory::truncate_from_start`]).
//!
//! Every change replaces the file atomically (es-storage's metadata files:
//! temporary file, fsync, rename, directory fsync) before the call returns;
//! changes are rare (a leadership change, a truncation). The file is
//! untrusted when read: a history that breaks the ordering rules is refused.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Result, StorageError};
use crate::fs::Fs;
use crate::meta;

/// The history's file in a partition directory.
pub const EPOCHS_FILE: &str = "leader_epochs.json";
/// The file's format version.
const EPOCHS_FILE_VERSION: u32 = 1;
/// Most entries a history may hold when read (a bound on what a damaged or
/// hostile file can make es allocate; one entry per leader change).
pub const EPOCH_ENTRIES_MAX: usize = 1_000_000;
/// Kafka's "no epoch" (`UNDEFINED_EPOCH`).
pub const UNDEFINED_EPOCH: i32 = -1;
/// Kafka's "no offset" (`UNDEFINED_EPOCH_OFFSET`).
pub const UNDEFINED_OFFSET: i64 = -1;

/// One epoch's first offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EpochEntry {
    pub epoch: i32,
    pub start_offset: u64,
}

/// The contents of [`EPOCHS_FILE`].
#[derive(Debug, Serialize, Deserialize)]
struct EpochsFile {
    version: u32,
    epochs: Vec<EpochEntry>,
}

/// A partition's leader-epoch history, persisted in [`EPOCHS_FILE`].
#[derive(Debug)]
pub struct EpochHistory {
    path: PathBuf,
    entries: Vec<EpochEntry>,
}

impl EpochHistory {
    /// Reads the history of the partition in `dir` (empty when the file
    /// does not exist). Blocking.
    pub fn open(fs: &dyn Fs, dir: &Path) -> Result<EpochHistory> {
        let path = dir.join(EPOCHS_FILE);
        let bad = |why: String| StorageError::Metadata {
            file: path.display().to_string(),
            why,
        };
        let entries = match meta::read_json::<EpochsFile>(fs, &path)? {
            None => Vec::new(),
            Some(f) if f.version != EPOCHS_FILE_VERSION => {
                return Err(bad(format!("unknown version {}", f.version)))
            }
            Some(f) => f.epochs,
        };
        if entries.len() > EPOCH_ENTRIES_MAX {
            return Err(bad(format!("{} entries", entries.len())));
        }
        if let Some(e) = entries.iter().find(|e| e.epoch < 0) {
            return Err(bad(format!("negative epoch {}", e.epoch)));
        }
        if let Some(w) = entries
            .windows(2)
            .find(|w| w[1].epoch <= w[0].epoch || w[1].start_offset < w[0].start_offset)
        {
            return Err(bad(format!(
                "epoch {} at {} follows epoch {} at {}",
                w[1].epoch, w[1].start_offset, w[0].epoch, w[0].start_offset
            )));
        }
        Ok(EpochHistory { path, entries })
    }

    /// The entries, oldest first.
    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    /// The newest entry.
    pub fn latest(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }

    /// Records that `epoch` starts at `start_offset` (a leader taking the
    /// partition at its log end, or a follower appending the first batch
    /// of a new epoch), as Kafka's `assign`: entries of this epoch or
    /// later, or starting at or after `start_offset`, are replaced by it.
    /// Nothing is written when the newest entry is already this epoch from
    /// this offset or before (Kafka's `isUpdateNeeded`).
    /// Blocking (persists the change). Returns whether it changed.
    pub fn assign(&mut self, fs: &dyn Fs, epoch: i32, start_offset: u64) -> Result<bool> {
        if epoch < 0 {
            return Err(StorageError::Invalid(format!(
                "leader epoch {epoch} is negative"
            )));
        }
        if self
            .latest()
            .is_some_and(|l| l.epoch == epoch && l.start_offset <= start_offset)
        {
            return Ok(false);
        }
        let mut next = self.entries.clone();
        next.retain(|e| e.epoch < epoch && e.start_offset < start_offset);
        next.push(EpochEntry {
            epoch,
            start_offset,
        });
        self.replace(fs, next)?;
        Ok(true)
    }

    /// The epoch the record at `offset` was written in, if the history
    /// covers it.
    pub fn epoch_at(&self, offset: u64) -> Option<i32> {
        let i = self.entries.partition_point(|e| e.start_offset <= offset);
        i.checked_sub(1).map(|i| self.entries[i].epoch)
    }

    /// Kafka's `endOffsetFor`: the largest epoch at or below `requested`
    /// and the offset where it ends (the start of the next epoch, or
    /// `log_end` for the newest). `requested` above every epoch, -1, or an
    /// empty history: (-1, -1). Below every epoch: `requested` itself and
    /// the start of the first.
    pub fn end_offset_for(&self, requested: i32, log_end: u64) -> (i32, i64) {
        let undefined = (UNDEFINED_EPOCH, UNDEFINED_OFFSET);
        if requested == UNDEFINED_EPOCH {
            return undefined;
        }
        let as_i64 = |o: u64| i64::try_from(o).unwrap_or(i64::MAX);
        match self.latest() {
            Some(l) if l.epoch == requested => return (requested, as_i64(log_end)),
            None => return undefined,
            Some(_) => {}
        }
        let higher = self.entries.partition_point(|e| e.epoch <= requested);
        let Some(h) = self.entries.get(higher) else {
            return undefined;
        };
        match higher.checked_sub(1) {
            None => (requested, as_i64(h.start_offset)),
            Some(f) => (self.entries[f].epoch, as_i64(h.start_offset)),
        }
    }

    /// The log was cut at `end_offset` (a follower truncating to its
    /// leader, or recovery cutting a torn tail): entries starting at or
    /// after it go. Blocking (persists a change).
    pub fn truncate_from_end(&mut self, fs: &dyn Fs, end_offset: u64) -> Result<()> {
        if self.latest().is_none_or(|l| l.start_offset < end_offset) {
            return Ok(());
        }
        let next = self
            .entries
            .iter()
            .copied()
            .filter(|e| e.start_offset < end_offset)
            .collect();
        self.replace(fs, next)
    }

    /// The log now starts at `start_offset` (retention, DeleteRecords):
    /// entries that end at or before it go, and the one containing it
    /// starts there. Blocking (persists a change).
    pub fn truncate_from_start(&mut self, fs: &dyn Fs, start_offset: u64) -> Result<()> {
        let keep_from = self
            .entries
            .partition_point(|e| e.start_offset <= start_offset)
            .saturating_sub(1);
        let mut next: Vec<EpochEntry> = self.entries[keep_from..].to_vec();
        if let Some(first) = next.first_mut() {
            first.start_offset = first.start_offset.max(start_offset);
        }
        if next == self.entries {
            return Ok(());
        }
        self.replace(fs, next)
    }

    fn replace(&mut self, fs: &dyn Fs, next: Vec<EpochEntry>) -> Result<()> {
        let file = EpochsFile {
            version: EPOCHS_FILE_VERSION,
            epochs: next,
        };
        meta::write_json(fs, &self.path, &file)?;
        self.entries = file.epochs;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::RealFs;

    fn e(epoch: i32, start_offset: u64) -> EpochEntry {
        EpochEntry {
            epoch,
            start_offset,
        }
    }

    fn history(entries: &[(i32, u64)]) -> (tempfile::TempDir, EpochHistory) {
        let dir = tempfile::tempdir().expect("tmp");
        let mut h = EpochHistory::open(&RealFs, dir.path()).expect("open");
        for (epoch, start) in entries {
            h.assign(&RealFs, *epoch, *start).expect("assign");
        }
        (dir, h)
    }

    #[test]
    fn assign_persists_and_reopens() {
        let (dir, mut h) = history(&[(0, 0), (2, 10), (5, 30)]);
        assert!(!h.assign(&RealFs, 5, 40).expect("same epoch"), "no change");
        assert!(h.assign(&RealFs, 5, 25).expect("same epoch, earlier"));
        let again = EpochHistory::open(&RealFs, dir.path()).expect("reopen");
        assert_eq!(again.entries(), &[e(0, 0), e(2, 10), e(5, 25)]);
        // A new epoch at an offset inside older epochs replaces them (Kafka's assign).
        h.assign(&RealFs, 6, 10).expect("assign");
        assert_eq!(h.entries(), &[e(0, 0), e(6, 10)]);
        assert!(h.assign(&RealFs, -2, 50).is_err());
    }

    #[test]
    fn epochs_of_offsets() {
        let (_d, h) = history(&[(1, 5), (3, 10)]);
        assert_eq!(h.epoch_at(4), None);
        assert_eq!(h.epoch_at(5), Some(1));
        assert_eq!(h.epoch_at(9), Some(1));
        assert_eq!(h.epoch_at(10), Some(3));
        assert_eq!(h.epoch_at(1_000), Some(3));
    }

    #[test]
    fn end_offsets_follow_kafka() {
        let (_d, h) = history(&[(1, 5), (3, 10), (7, 20)]);
        let log_end = 25;
        assert_eq!(h.end_offset_for(-1, log_end), (-1, -1));
        assert_eq!(
            h.end_offset_for(7, log_end),
            (7, 25),
            "the newest ends at the log end"
        );
        assert_eq!(h.end_offset_for(3, log_end), (3, 20));
        assert_eq!(
            h.end_offset_for(5, log_end),
            (3, 20),
            "an unknown epoch: the one below it"
        );
        assert_eq!(
            h.end_offset_for(0, log_end),
            (0, 5),
            "below every epoch: itself, first start"
        );
        assert_eq!(h.end_offset_for(8, log_end), (-1, -1), "above every epoch");
        let (_d, empty) = history(&[]);
        assert_eq!(empty.end_offset_for(0, 0), (-1, -1));
    }

    #[test]
    fn truncation_from_either_end() {
        let (dir, mut h) = history(&[(1, 5), (3, 10), (7, 20)]);
        h.truncate_from_end(&RealFs, 21).expect("cut");
        assert_eq!(h.entries().len(), 3, "epoch 7 still has offset 20");
        h.truncate_from_end(&RealFs, 20).expect("cut");
        assert_eq!(h.entries(), &[e(1, 5), e(3, 10)]);
        h.truncate_from_start(&RealFs, 12).expect("start");
        assert_eq!(h.entries(), &[e(3, 12)]);
        h.truncate_from_start(&RealFs, 2).expect("start before");
        assert_eq!(
            h.entries(),
            &[e(3, 12)],
            "a start below the first changes nothing"
        );
        let again = EpochHistory::open(&RealFs, dir.path()).expect("reopen");
        assert_eq!(again.entries(), &[e(3, 12)]);
    }

    #[test]
    fn a_history_out_of_order_is_refused() {
        let dir = tempfile::tempdir().expect("tmp");
        for bad in [
            r#"{"version":1,"epochs":[{"epoch":3,"start_offset":0},{"epoch":2,"start_offset":5}]}"#,
            r#"{"version":1,"epochs":[{"epoch":1,"start_offset":9},{"epoch":2,"start_offset":5}]}"#,
            r#"{"version":1,"epochs":[{"epoch":-4,"start_offset":0}]}"#,
            r#"{"version":9,"epochs":[]}"#,
            r#"{"version":1,"epochs":"#,
        ] {
            std::fs::write(dir.path().join(EPOCHS_FILE), bad).expect("write");
            assert!(
                EpochHistory::open(&RealFs, dir.path()).is_err(),
                "refused: {bad}"
            );
        }
    }
}
