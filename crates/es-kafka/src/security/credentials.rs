//! What SASL checks credentials against: the API keys of
//! `data/api_keys.json` (PLAIN) and the SCRAM credentials.
//!
//! The API keys file is read again whenever its modification time or size
//! changes (checked at each PLAIN authentication, a `stat` beside an
//! argon2 hash), so keys created or revoked with `es-broker keys` take
//! effect without a restart.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use es_auth::api_keys::{ApiKeys, PlainError};
use es_auth::principal::Principal;
use es_auth::scram::{ScramCredential, ScramMechanism};
use parking_lot::RwLock;

/// The API keys file under the data directory.
pub const API_KEYS_FILE: &str = "api_keys.json";

/// What identifies a version of the keys file on disk.
type Stamp = Option<(SystemTime, u64)>;

fn stamp(path: &Path) -> Stamp {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

/// The credentials a broker authenticates against.
#[derive(Debug)]
pub struct Credentials {
    api_keys_path: PathBuf,
    api_keys: RwLock<(Stamp, Arc<ApiKeys>)>,
    scram: RwLock<Arc<BTreeMap<(String, ScramMechanism), ScramCredential>>>,
}

impl Credentials {
    /// Credentials of the data directory `data_dir` (no file: no keys).
    pub fn open(data_dir: &Path) -> Result<Self, String> {
        let path = data_dir.join(API_KEYS_FILE);
        let keys = ApiKeys::load(&path).map_err(|e| e.to_string())?;
        Ok(Credentials {
            api_keys: RwLock::new((stamp(&path), Arc::new(keys))),
            api_keys_path: path,
            scram: RwLock::default(),
        })
    }

    /// The current API keys, read again if the file changed.
    pub fn api_keys(&self) -> Arc<ApiKeys> {
        let now = stamp(&self.api_keys_path);
        {
            let cur = self.api_keys.read();
            if cur.0 == now {
                return cur.1.clone();
            }
        }
        match ApiKeys::load(&self.api_keys_path) {
            Ok(keys) => {
                let keys = Arc::new(keys);
                *self.api_keys.write() = (now, keys.clone());
                tracing::info!(
                    file = %self.api_keys_path.display(),
                    keys = keys.list().count(),
                    "API keys reloaded"
                );
                keys
            }
            Err(e) => {
                // A half-edited or damaged file keeps the keys already known.
                tracing::warn!(error = %e, "API keys file unreadable; keeping the keys loaded before");
                self.api_keys.read().1.clone()
            }
        }
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
