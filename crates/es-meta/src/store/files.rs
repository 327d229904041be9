//! The small files of `data/meta/` beside the log: `vote.json`,
//! `committed.json` and `purged.json`, each replaced atomically (temporary
//! file, fsync, rename, directory fsync) with es-storage's metadata helpers,
//! and the error conversions the store shares.

use std::io;
use std::path::Path;

use es_storage::fs::Fs;
use openraft::{ErrorSubject, ErrorVerb, LogId, StorageError, Vote};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// The vote this node last granted or holds.
pub const VOTE_FILE: &str = "vote.json";
/// The last log id known committed.
pub const COMMITTED_FILE: &str = "committed.json";
/// The last log id purged from the log.
pub const PURGED_FILE: &str = "purged.json";

/// An es-storage error as an I/O error.
pub fn to_io(e: es_storage::error::StorageError) -> io::Error {
    match e {
        es_storage::error::StorageError::Io(e) => e,
        other => io::Error::other(other.to_string()),
    }
}

/// Replaces `dir/name` with `value` as JSON, durably.
pub fn write<T: Serialize>(fs: &dyn Fs, dir: &Path, name: &str, value: &T) -> io::Result<()> {
    es_storage::meta::write_json(fs, &dir.join(name), value).map_err(to_io)
}

/// Reads `dir/name`; `None` when it does not exist.
pub fn read<T: DeserializeOwned>(fs: &dyn Fs, dir: &Path, name: &str) -> io::Result<Option<T>> {
    es_storage::meta::read_json(fs, &dir.join(name)).map_err(to_io)
}

pub fn save_vote(fs: &dyn Fs, dir: &Path, vote: &Vote<u64>) -> io::Result<()> {
    write(fs, dir, VOTE_FILE, vote)
}

pub fn read_vote(fs: &dyn Fs, dir: &Path) -> io::Result<Option<Vote<u64>>> {
    read(fs, dir, VOTE_FILE)
}

pub fn save_committed(fs: &dyn Fs, dir: &Path, c: &Option<LogId<u64>>) -> io::Result<()> {
    write(fs, dir, COMMITTED_FILE, c)
}

pub fn read_committed(fs: &dyn Fs, dir: &Path) -> io::Result<Option<LogId<u64>>> {
    Ok(read::<Option<LogId<u64>>>(fs, dir, COMMITTED_FILE)?.flatten())
}

pub fn save_purged(fs: &dyn Fs, dir: &Path, p: &LogId<u64>) -> io::Result<()> {
    write(fs, dir, PURGED_FILE, p)
}

pub fn read_purged(fs: &dyn Fs, dir: &Path) -> io::Result<Option<LogId<u64>>> {
    read(fs, dir, PURGED_FILE)
}

/// An I/O error as openraft's storage error.
pub fn sto(subject: ErrorSubject<u64>, verb: ErrorVerb, e: io::Error) -> StorageError<u64> {
    StorageError::from_io_error(subject, verb, e)
}

pub fn write_logs(e: io::Error) -> StorageError<u64> {
    sto(ErrorSubject::Logs, ErrorVerb::Write, e)
}

pub fn read_logs(e: io::Error) -> StorageError<u64> {
    sto(ErrorSubject::Logs, ErrorVerb::Read, e)
}
