//! Metadata files (topic config, group offsets, producer state, keys) are
//! replaced atomically: written to a unique temporary file, fsynced, renamed
//! over the old one, and the directory fsynced. A crash leaves either the old
//! file or the new one, never a mix; stray temporary files are ignored and
//! removed by [`read_json`]'s callers at startup via [`remove_temp_files`].

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::{Result, StorageError};
use crate::fs::Fs;

/// Suffix of temporary files; never a valid metadata file name.
pub const TEMP_SUFFIX: &str = ".tmp";
/// Largest metadata file es will read (64 MiB).
pub const META_BYTES_MAX: u64 = 64 * 1024 * 1024;

static TEMP_SEQ: AtomicU64 = AtomicU64::new(0);

/// Atomically replaces `path` with `bytes`.
pub fn write_atomic(fs: &dyn Fs, path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| StorageError::Invalid(format!("{} has no parent", path.display())))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let seq = TEMP_SEQ.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}.{}.{seq}{TEMP_SUFFIX}", std::process::id()));
    let f = fs.create_new(&tmp)?;
    let res = (|| -> Result<()> {
        f.write_all_at(bytes, 0)?;
        f.sync_data()?;
        fs.rename(&tmp, path)?;
        Ok(())
    })();
    if res.is_err() {
        let _ = fs.remove_file(&tmp);
        return res;
    }
    fs.sync_dir(dir)?;
    Ok(())
}

/// Serialises `value` as pretty JSON and replaces `path` atomically.
pub fn write_json<T: Serialize>(fs: &dyn Fs, path: &Path, value: &T) -> Result<()> {
    let bytes = serde_json::to_vec_pretty(value).map_err(|e| StorageError::Metadata {
        file: path.display().to_string(),
        why: e.to_string(),
    })?;
    write_atomic(fs, path, &bytes)
}

/// Reads a whole file, refusing anything over [`META_BYTES_MAX`].
pub fn read_file(fs: &dyn Fs, path: &Path) -> Result<Vec<u8>> {
    let f = fs.open(path)?;
    let len = f.len()?;
    if len > META_BYTES_MAX {
        return Err(StorageError::Metadata {
            file: path.display().to_string(),
            why: format!("{len} bytes is over the limit"),
        });
    }
    let mut buf = vec![0u8; len as usize];
    let mut done = 0;
    while done < buf.len() {
        let n = f.read_at(&mut buf[done..], done as u64)?;
        if n == 0 {
            break;
        }
        done += n;
    }
    buf.truncate(done);
    Ok(buf)
}

/// Reads and parses a JSON metadata file; `Ok(None)` when it does not exist.
pub fn read_json<T: DeserializeOwned>(fs: &dyn Fs, path: &Path) -> Result<Option<T>> {
    if !fs.exists(path) {
        return Ok(None);
    }
    let bytes = read_file(fs, path)?;
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| StorageError::Metadata {
            file: path.display().to_string(),
            why: e.to_string(),
        })
}

/// Removes leftover temporary files in `dir` (from a crash mid-replace).
pub fn remove_temp_files(fs: &dyn Fs, dir: &Path) -> Result<()> {
    for name in fs.list(dir)? {
        if name.starts_with('.') && name.ends_with(TEMP_SUFFIX) {
            fs.remove_file(&dir.join(&name))?;
        }
    }
    Ok(())
}
