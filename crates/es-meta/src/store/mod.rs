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

/// Opens (creating it, mode 0700, if missing) the metadata directory `dir`
/// (`data/meta`): recovers the log (cutting a torn tail of the last
/// segment, refusing any other damage) and starts the state machine from the
/// persisted snapshot, if any, materializing that snapshot's whole image
/// again (the materializer is idempotent). openraft then re-applies the
/// committed entries after it.
pub fn open(
    fs: Arc<dyn Fs>,
    dir: &Path,
    materializer: Arc<dyn Materializer>,
) -> io::Result<(LogStore, StateMachine)> {
    es_storage::fs::create_dir_durable(fs.as_ref(), dir)?;
    es_storage::meta::remove_temp_files(fs.as_ref(), dir).map_err(files::to_io)?;
    let log = log::Log::open(fs.clone(), dir)?;
    let vote = files::read_vote(fs.as_ref(), dir)?;
    let sm = StateMachine::open(fs.clone(), dir.to_path_buf(), materializer)?;
    let fresh = vote.is_none() && log.is_empty() && !sm.has_snapshot();
    let store = LogStore::new(fs, dir.to_path_buf(), log, fresh)?;
    Ok((store, sm))
}

#[cfg(test)]
#[path = "log_tests.rs"]
mod log_tests;

#[cfg(test)]
#[path = "sm_tests.rs"]
mod sm_tests;
