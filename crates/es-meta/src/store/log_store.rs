//! [`LogStore`], openraft's `RaftLogStorage` over the segment files
//! (`log.rs`), the group-commit syncer (`syncer.rs`) and the vote and
//! committed files (`files.rs`); and [`LogReader`], the cloneable reader
//! openraft's replication tasks use.

use std::fmt::Debug;
use std::ops::RangeBounds;
use std::path::PathBuf;
use std::sync::Arc;

use es_storage::fs::Fs;
use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{ErrorSubject, ErrorVerb, LogId, OptionalSend, RaftLogReader, StorageError, Vote};
use parking_lot::Mutex;

use super::files::{self, read_logs, sto, write_logs};
use super::frame::Entry;
use super::log::Log;
use super::syncer::{SyncReq, Syncer};
use crate::MetaTypes;

/// The metadata Raft log, vote and committed id of one node.
#[derive(Debug)]
pub struct LogStore {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    log: Arc<Mutex<Log>>,
    syncer: Syncer,
    fresh: bool,
    /// How far the snapshot on disk reaches: purges stop there.
    snapshot: Arc<super::DurableSnapshot>,
}

/// Reads log entries; clones share the log.
#[derive(Debug, Clone)]
pub struct LogReader {
    log: Arc<Mutex<Log>>,
}

impl LogStore {
    pub(super) fn new(
        fs: Arc<dyn Fs>,
        dir: PathBuf,
        log: Log,
        fresh: bool,
        io_mode: super::Io,
        snapshot: Arc<super::DurableSnapshot>,
    ) -> std::io::Result<Self> {
        let log = Arc::new(Mutex::new(log));
        let syncer = match io_mode {
            super::Io::Threads => Syncer::start(log.clone())?,
            super::Io::Inline => Syncer::inline(log.clone()),
        };
        Ok(LogStore {
            fs,
            dir,
            log,
            syncer,
            fresh,
            snapshot,
        })
    }

    /// True if no vote, no log entry and no snapshot were found at open:
    /// this node was never initialized.
    pub fn is_fresh(&self) -> bool {
        self.fresh
    }
}

fn get_entries<R: RangeBounds<u64>>(log: &Mutex<Log>, range: R) -> Vec<Entry> {
    log.lock().entries(range)
}

impl RaftLogReader<MetaTypes> for LogReader {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError<u64>> {
        Ok(get_entries(&self.log, range))
    }
}

impl RaftLogReader<MetaTypes> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError<u64>> {
        Ok(get_entries(&self.log, range))
    }
}

impl RaftLogStorage<MetaTypes> for LogStore {
    type LogReader = LogReader;

    async fn get_log_state(&mut self) -> Result<LogState<MetaTypes>, StorageError<u64>> {
        let log = self.log.lock();
        Ok(LogState {
            last_purged_log_id: log.purged(),
            last_log_id: log.last_log_id(),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        LogReader {
            log: self.log.clone(),
        }
    }

    async fn save_vote(&mut self, vote: &Vote<u64>) -> Result<(), StorageError<u64>> {
        files::save_vote(self.fs.as_ref(), &self.dir, vote)
            .map_err(|e| sto(ErrorSubject::Vote, ErrorVerb::Write, e))
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<u64>>, StorageError<u64>> {
        files::read_vote(self.fs.as_ref(), &self.dir)
            .map_err(|e| sto(ErrorSubject::Vote, ErrorVerb::Read, e))
    }

    async fn save_committed(
        &mut self,
        committed: Option<LogId<u64>>,
    ) -> Result<(), StorageError<u64>> {
        files::save_committed(self.fs.as_ref(), &self.dir, &committed).map_err(write_logs)
    }

    /// The committed log id saved last, unless it lies past this node's
    /// own log: a follower learns (and saves) the leader's commit index
    /// before its own copy of those entries is durable, and a crash between
    /// the two leaves a committed id the log cannot back. Then none is
    /// reported, and the leader tells this node again what is committed.
    async fn read_committed(&mut self) -> Result<Option<LogId<u64>>, StorageError<u64>> {
        let committed = files::read_committed(self.fs.as_ref(), &self.dir).map_err(read_logs)?;
        let last = self.log.lock().last_log_id();
        Ok(committed.filter(|c| last.is_some_and(|l| c.index <= l.index)))
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<MetaTypes>,
    ) -> Result<(), StorageError<u64>>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        let written = self.log.lock().append(entries);
        match written {
            Ok(file) => {
                self.syncer.submit(SyncReq {
                    file,
                    done: Box::new(move |res| callback.log_io_completed(res)),
                });
                Ok(())
            }
            Err(e) => {
                callback.log_io_completed(Err(std::io::Error::new(e.kind(), e.to_string())));
                Err(write_logs(e))
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId<u64>) -> Result<(), StorageError<u64>> {
        self.log.lock().truncate(log_id.index).map_err(write_logs)
    }

    /// Purges up to `log_id`. openraft 0.9 asks a follower installing a
    /// snapshot from the leader to purge up to it before the state machine
    /// has written it; a crash between the two would leave entries neither
    /// in the log nor in any snapshot. So while a snapshot is being
    /// received, the purge waits (bounded) until one on disk covers it.
    async fn purge(&mut self, log_id: LogId<u64>) -> Result<(), StorageError<u64>> {
        self.snapshot
            .wait_covers(log_id.index)
            .await
            .map_err(write_logs)?;
        self.log.lock().purge(log_id).map_err(write_logs)
    }
}
