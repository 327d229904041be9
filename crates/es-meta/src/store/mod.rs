//! The metadata group's storage under `data/meta/`: the Raft log
//! ([`LogStore`]: append-only `.raftlog` segments with group commit, the
//! vote, the committed and purged log ids) and the state machine
//! ([`StateMachine`]: the [`crate::MetaImage`], its snapshot file, and the
//! [`crate::Materializer`] it feeds). Every byte goes through the
//! es-storage file-system seam ([`Fs`]), so tests run it on `SimFs`.
//!
//! Files: `<first index, 20 digits>.raftlog` (see `frame.rs` for the frame),
//! `vote.json`, `committed.json`, `purged.json`, `snapshot.json`; the JSON
//! files are replaced atomically. See docs/storage.md, "The metadata log".

mod files;
mod frame;
mod log;
mod log_store;
mod snapshot;
mod state_machine;
mod syncer;

use std::io;
use std::path::Path;
use std::sync::Arc;

use es_storage::fs::Fs;

pub use log_store::{LogReader, LogStore};
pub use snapshot::SnapshotFile;
pub use state_machine::{Applied, SnapshotBuilder, StateMachine};

use crate::Materializer;

/// Where the store's blocking work (fsyncs, snapshot files, the
/// materializer) runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Io {
    /// On threads of their own (a group-commit thread, tokio's blocking
    /// pool), so the runtime never waits on a disk: what nodes run.
    Threads,
    /// On the calling task. The deterministic simulation runs so: with
    /// tokio's paused clock, work on another thread would let the clock jump
    /// ahead while the runtime waits for it, and no run would repeat.
    Inline,
}

/// The last log index covered by the snapshot on disk, plus one (0: no
/// snapshot), shared by the state machine (which persists snapshots) and
/// the log (which must not purge past it).
#[derive(Debug)]
pub struct DurableSnapshot(tokio::sync::watch::Sender<Reach>);

/// How far the snapshot on disk reaches, and whether one is being received.
#[derive(Clone, Copy, Debug, Default)]
pub struct Reach {
    /// Last covered index plus one (0: none).
    end: u64,
    /// A snapshot from the leader is being received and not yet on disk.
    receiving: bool,
}

impl Default for DurableSnapshot {
    fn default() -> Self {
        DurableSnapshot(tokio::sync::watch::Sender::new(Reach::default()))
    }
}

/// How long a purge waits for the snapshot it needs to be on disk.
const SNAPSHOT_WAIT: std::time::Duration = std::time::Duration::from_secs(120);

impl DurableSnapshot {
    /// The snapshot on disk covers the log up to `index`.
    pub fn covers(&self, index: u64) {
        let v = index.saturating_add(1);
        self.0.send_modify(|cur| {
            cur.end = cur.end.max(v);
            cur.receiving = false;
        });
    }

    /// A snapshot from the leader is being received (or its install failed:
    /// `false`).
    pub fn receiving(&self, on: bool) {
        self.0.send_modify(|cur| cur.receiving = on);
    }

    /// While a snapshot from the leader is being received, waits until the
    /// snapshot on disk covers the log up to `index`.
    pub async fn wait_covers(&self, index: u64) -> io::Result<()> {
        let v = index.saturating_add(1);
        let mut rx = self.0.subscribe();
        let waited = tokio::time::timeout(
            SNAPSHOT_WAIT,
            rx.wait_for(|cur| cur.end >= v || !cur.receiving),
        )
        .await
        .map(|r| r.map(|_| ()));
        match waited {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(io::Error::other("the state machine is gone")),
            Err(_) => Err(io::Error::other(format!(
                "no snapshot on disk covers index {index} after {SNAPSHOT_WAIT:?}: not purging past it"
            ))),
        }
    }
}

/// [`open_with`] with [`Io::Threads`].
pub fn open(
    fs: Arc<dyn Fs>,
    dir: &Path,
    materializer: Arc<dyn Materializer>,
) -> io::Result<(LogStore, StateMachine)> {
    open_with(fs, dir, materializer, Io::Threads)
}

/// Opens (creating it, mode 0700, if missing) the metadata directory `dir`
/// (`data/meta`): recovers the log (cutting a torn tail of the last
/// segment, refusing any other damage) and starts the state machine from the
/// persisted snapshot, if any, materializing that snapshot's whole image
/// again (the materializer is idempotent). openraft then re-applies the
/// committed entries after it.
pub fn open_with(
    fs: Arc<dyn Fs>,
    dir: &Path,
    materializer: Arc<dyn Materializer>,
    io_mode: Io,
) -> io::Result<(LogStore, StateMachine)> {
    es_storage::fs::create_dir_durable(fs.as_ref(), dir)?;
    es_storage::meta::remove_temp_files(fs.as_ref(), dir).map_err(files::to_io)?;
    let log = log::Log::open(fs.clone(), dir)?;
    let vote = files::read_vote(fs.as_ref(), dir)?;
    let sm = StateMachine::open(fs.clone(), dir.to_path_buf(), materializer, io_mode)?;
    let fresh = vote.is_none() && log.is_empty() && !sm.has_snapshot();
    let store = LogStore::new(
        fs,
        dir.to_path_buf(),
        log,
        fresh,
        io_mode,
        sm.durable_snapshot(),
    )?;
    Ok((store, sm))
}

#[cfg(test)]
#[path = "log_tests.rs"]
mod log_tests;

#[cfg(test)]
#[path = "sm_tests.rs"]
mod sm_tests;
