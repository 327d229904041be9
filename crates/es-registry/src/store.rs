//! `schemas.json`: the registry's file in the data directory. It holds the
//! whole [`State`] as JSON (`{"format": 1, "registry": {...}}`), and is replaced
//! atomically (es-storage's `write_atomic`: a temporary file of mode 0600,
//! fsync, rename, fsync of the directory) after every change and never
//! when nothing changed. At start it is read (bounded by
//! [`crate::limits::FILE_BYTES_MAX`]) and checked: the JSON, the registry's invariants,
//! and that every stored schema still parses. A file that fails any check
//! is an error naming the file; nothing is rewritten over it.

use std::path::{Path, PathBuf};

use es_storage::fs::Fs;
use es_storage::{meta, RealFs};
use serde::{Deserialize, Serialize};

use crate::registry::{Registry, State};

/// The file's name in the data directory.
pub const FILE_NAME: &str = "schemas.json";
/// The file format this code writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// The file's top level: a format number and the state.
#[derive(Deserialize)]
struct FileBody {
    format: u32,
    registry: State,
}

/// [`FileBody`] to write, borrowing the state.
#[derive(Serialize)]
struct FileBodyRef<'a> {
    format: u32,
    registry: &'a State,
}

/// Why the file could not be loaded or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{path}: {why}")]
    Corrupt { path: PathBuf, why: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: es_storage::StorageError,
    },
}

/// The file of one registry.
#[derive(Debug)]
pub struct Store {
    path: PathBuf,
}

impl Store {
    /// The file `schemas.json` in `data_dir`.
    pub fn in_dir(data_dir: &Path) -> Store {
        Store {
            path: data_dir.join(FILE_NAME),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads and checks the file; an empty registry when there is none.
    pub fn load(&self) -> Result<Registry, StoreError> {
        let fs = RealFs;
        if !fs.exists(&self.path) {
            return Ok(Registry::new());
        }
        let io = |source| StoreError::Io {
            path: self.path.clone(),
            source,
        };
        let corrupt = |why: String| StoreError::Corrupt {
            path: self.path.clone(),
            why,
        };
        // read_file refuses a file over FILE_BYTES_MAX before reading it.
        let bytes = meta::read_file(&fs, &self.path).map_err(io)?;
        parse(&bytes).map_err(corrupt)
    }

    /// Replaces the file with `registry`'s state.
    pub fn save(&self, registry: &Registry) -> Result<(), StoreError> {
        let bytes = encode(registry.state()).map_err(|why| StoreError::Corrupt {
            path: self.path.clone(),
            why,
        })?;
        meta::write_atomic(&RealFs, &self.path, &bytes).map_err(|source| StoreError::Io {
            path: self.path.clone(),
            source,
        })
    }
}

/// The file's bytes for `state`.
pub fn encode(state: &State) -> Result<Vec<u8>, String> {
    let body = FileBodyRef {
        format: FORMAT_VERSION,
        registry: state,
    };
    let mut bytes = serde_json::to_vec_pretty(&body).map_err(|e| e.to_string())?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// A registry from the file's bytes, checked.
pub fn parse(bytes: &[u8]) -> Result<Registry, String> {
    let body: FileBody =
        serde_json::from_slice(bytes).map_err(|e| format!("not a schemas file: {e}"))?;
    if body.format != FORMAT_VERSION {
        return Err(format!(
            "format {} is not the one this es reads ({FORMAT_VERSION})",
            body.format
        ));
    }
    // from_state checks the invariants and that every schema parses.
    Registry::from_state(body.registry)
}
