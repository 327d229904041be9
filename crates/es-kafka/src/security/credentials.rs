//! What SASL checks credentials against: the API keys (PLAIN) and the SCRAM
//! credentials.
//!
//! API keys live in the cluster metadata (`put_api_keys.v1` entries), and
//! `data/api_keys.json` is their copy on each node, which the `keys`
//! commands edit directly. The keys a login is checked against are the
//! metadata's with the file's laid over them (a key only in the file counts
//! at once; a revocation on either side wins). The file is read again
//! whenever its modification time or size changes (a `stat` at each PLAIN
//! authentication, beside an argon2 hash), so keys created or revoked with
//! `es-broker keys` take effect without a restart; the broker then proposes
//! what the file has and the metadata lacks ([`Credentials::to_propose`]),
//! so that every node learns it, and writes what the metadata holds back
//! into the file ([`Credentials::set_metadata_keys`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use es_auth::api_keys::{ApiKey, ApiKeys, PlainError};
use es_auth::principal::Principal;
use es_auth::scram::{ScramCredential, ScramMechanism};
use parking_lot::RwLock;

pub use es_auth::api_keys::API_KEYS_FILE;

/// What identifies a version of the keys file on disk.
type Stamp = Option<(SystemTime, u64)>;

fn stamp(path: &Path) -> Stamp {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

/// The API keys as known from both sources, and the two combined.
#[derive(Debug, Default)]
struct Keys {
    file_stamp: Stamp,
    file: Arc<ApiKeys>,
    metadata: Arc<ApiKeys>,
    effective: Arc<ApiKeys>,
}

impl Keys {
    fn combine(&mut self) {
        let mut all = (*self.metadata).clone();
        all.overlay(&self.file, false);
        self.effective = Arc::new(all);
    }
}

/// The credentials a broker authenticates against.
#[derive(Debug)]
pub struct Credentials {
    data_dir: PathBuf,
    api_keys_path: PathBuf,
    keys: RwLock<Keys>,
    scram: RwLock<Arc<BTreeMap<(String, ScramMechanism), ScramCredential>>>,
}

impl Credentials {
    /// Credentials of the data directory `data_dir` (no file: no keys).
    pub fn open(data_dir: &Path) -> Result<Self, String> {
        let path = data_dir.join(API_KEYS_FILE);
        let file = ApiKeys::load(&path).map_err(|e| e.to_string())?;
        let mut keys = Keys {
            file_stamp: stamp(&path),
            file: Arc::new(file),
            ..Keys::default()
        };
        keys.combine();
        Ok(Credentials {
            data_dir: data_dir.to_path_buf(),
            keys: RwLock::new(keys),
            api_keys_path: path,
            scram: RwLock::default(),
        })
    }

    /// Reads the file again if it changed since it was last read.
    fn refresh_file(&self) {
        let now = stamp(&self.api_keys_path);
        if self.keys.read().file_stamp == now {
            return;
        }
        match ApiKeys::load(&self.api_keys_path) {
            Ok(file) => {
                let mut k = self.keys.write();
                k.file_stamp = now;
                k.file = Arc::new(file);
                k.combine();
                tracing::info!(
                    file = %self.api_keys_path.display(),
                    keys = k.file.list().count(),
                    "API keys file reloaded"
                );
            }
            Err(e) => {
                // A half-edited or damaged file keeps the keys already known.
                tracing::warn!(error = %e, "API keys file unreadable; keeping the keys loaded before");
            }
        }
    }

    /// The current API keys: the metadata's with the file's over them.
    pub fn api_keys(&self) -> Arc<ApiKeys> {
        self.refresh_file();
        self.keys.read().effective.clone()
    }

    /// What the file has that the metadata lacks (keys created or revoked
    /// with `es-broker keys --data-dir`): to be proposed.
    pub fn to_propose(&self) -> Vec<ApiKey> {
        self.refresh_file();
        let k = self.keys.read();
        k.file.missing_from(&k.metadata)
    }

    /// Takes the API keys of the applied metadata, and writes them into the
    /// file (under its lock, over what the file holds, keeping what only the
    /// file has until it is proposed). Blocking.
    pub fn set_metadata_keys(&self, keys: &BTreeMap<String, ApiKey>) -> Result<(), String> {
        let metadata = ApiKeys::from_keys(keys.values());
        {
            let mut k = self.keys.write();
            if *k.metadata == metadata {
                return Ok(());
            }
            k.metadata = Arc::new(metadata.clone());
            k.combine();
        }
        let _lock = es_auth::api_keys::lock_dir(&self.data_dir).map_err(|e| e.to_string())?;
        let mut file = ApiKeys::load(&self.api_keys_path).map_err(|e| e.to_string())?;
        if file.overlay(&metadata, true) {
            file.save(&self.api_keys_path).map_err(|e| e.to_string())?;
        }
        let mut k = self.keys.write();
        k.file_stamp = stamp(&self.api_keys_path);
        k.file = Arc::new(file);
        k.combine();
        Ok(())
    }

    /// PLAIN: the principal of the API key a PLAIN message names, if it
    /// carries that key's secret. Blocking (an argon2id hash, also for an
    /// unknown key): call it on a blocking thread.
    pub fn authenticate_plain(&self, msg: &[u8]) -> Result<Principal, PlainError> {
        es_auth::api_keys::authenticate_plain(&self.api_keys(), msg)
    }

    /// The SCRAM credential of `user` for `mechanism`.
    pub fn scram_credential(
        &self,
        user: &str,
        mechanism: ScramMechanism,
    ) -> Option<ScramCredential> {
        self.scram
            .read()
            .get(&(user.to_string(), mechanism))
            .cloned()
    }

    /// Replaces every SCRAM credential (from the applied metadata).
    pub fn set_scram(&self, all: BTreeMap<(String, ScramMechanism), ScramCredential>) {
        *self.scram.write() = Arc::new(all);
    }

    /// Every SCRAM credential.
    pub fn scram_all(&self) -> Arc<BTreeMap<(String, ScramMechanism), ScramCredential>> {
        self.scram.read().clone()
    }
}
