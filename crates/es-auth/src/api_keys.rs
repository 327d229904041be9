//! API keys: the credentials SASL/PLAIN checks, kept as argon2id hashes, never as
//! secrets (`data/api_keys.json`).
//!
//! An API key is an id (16 characters of `A-Z0-9`, like Confluent Cloud's) and a
//! secret (64 characters of `A-Za-z0-9+/`, 384 bits from the OS CSPRNG) bound to a
//! [`Principal`]. A PLAIN client sends the id as username and the secret as
//! password. The secret is shown once, at creation; es stores an argon2id PHC string
//! (`$argon2id$v=19$m=19456,t=2,p=1$salt$hash`) that carries its own parameters and
//! per-key salt, so parameters can change without invalidating old keys.
//!
//! Revoked keys stay as tombstones (`revoked: true`, hash emptied) so a revocation
//! made while a node was stopped can still be replayed into the cluster metadata.
//!
//! [`ApiKeys::verify`] takes the same time whether or not the id exists: an unknown
//! or revoked id is verified against a fixed dummy hash with the same parameters.
//! It is deliberately slow (see [`ARGON2_MEMORY_KIB`]) and blocking: callers run it
//! on a blocking thread (`tokio::task::spawn_blocking`), never on a reactor thread.
//!
//! The file is `{"version":1,"keys":[...]}`, written atomically (temporary file with
//! mode 0600, fsync, rename, fsync of the directory) and refused on load if larger
//! than [`API_KEYS_FILE_BYTES_MAX`].
//!
//! [`parse_plain`] and [`authenticate_plain`] are the server side of SASL/PLAIN with
//! the checks, order and messages of Kafka's `PlainSaslServer`.

use std::collections::BTreeMap;
use std::fmt;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};
use rand::rngs::OsRng;
use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::principal::{java, Principal};

/// argon2id memory cost in KiB: OWASP's minimum recommendation (19 MiB, t=2, p=1).
/// One hash or verification measured about 15 ms (20 to 24 ms for the first calls
/// of a process) in a release build on the 2-core development machine, so a core
/// verifies roughly 65 PLAIN logins a second. Measure with `cargo test --release -p
/// es-auth -- --ignored --nocapture argon2_cost`.
pub const ARGON2_MEMORY_KIB: u32 = 19_456;
/// argon2id passes over memory (OWASP minimum with 19 MiB).
pub const ARGON2_ITERATIONS: u32 = 2;
/// argon2id lanes.
pub const ARGON2_PARALLELISM: u32 = 1;
/// Largest argon2 parameters accepted in a stored hash (a replicated or hand-edited
/// key must not make one login cost gigabytes or minutes).
pub const ARGON2_MEMORY_KIB_MAX: u32 = 256 * 1024;
/// See [`ARGON2_MEMORY_KIB_MAX`].
pub const ARGON2_ITERATIONS_MAX: u32 = 16;
/// See [`ARGON2_MEMORY_KIB_MAX`].
pub const ARGON2_PARALLELISM_MAX: u32 = 16;

/// Characters in a generated key id.
pub const API_KEY_ID_CHARS: usize = 16;
/// Characters in a generated secret.
pub const API_KEY_SECRET_CHARS: usize = 64;
/// Longest id or secret [`ApiKeys::verify`] will hash; longer is refused unhashed.
pub const CREDENTIAL_BYTES_MAX: usize = 256;
/// The key store's file name under a broker's data directory.
pub const API_KEYS_FILE: &str = "api_keys.json";
/// Longest key description.
pub const DESCRIPTION_BYTES_MAX: usize = 1024;
/// Largest `api_keys.json` loaded.
pub const API_KEYS_FILE_BYTES_MAX: u64 = 16 * 1024 * 1024;
/// The `version` of the file format written and accepted.
pub const API_KEYS_FILE_VERSION: u32 = 1;
/// Largest SASL/PLAIN message accepted (RFC 4616 asks for 255 bytes per field).
pub const PLAIN_MESSAGE_BYTES_MAX: usize = 4096;

const ID_ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
const SECRET_ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// One API key. `hash` is an argon2id PHC string, empty once revoked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiKey {
    pub id: String,
    pub principal: Principal,
    pub hash: String,
    pub created_ms: i64,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub revoked: bool,
}

#[derive(Serialize, Deserialize)]
struct ApiKeysFile {
    version: u32,
    keys: Vec<ApiKey>,
}

/// Errors of the key store.
#[derive(Debug, thiserror::Error)]
pub enum ApiKeysError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {len} bytes, more than the {max} es loads", path.display())]
    TooLarge { path: PathBuf, len: u64, max: u64 },
    #[error("{}: not an API key file: {source}", path.display())]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{}: format version {version}, this es reads {API_KEYS_FILE_VERSION}", path.display())]
    Version { path: PathBuf, version: u32 },
    #[error("{}: {reason}", path.display())]
    Invalid { path: PathBuf, reason: String },
    /// A key handed to [`ApiKeys::insert`] or [`ApiKeys::create`] is unusable.
    #[error("invalid API key {id}: {reason}")]
    InvalidKey { id: String, reason: String },
    #[error("argon2: {0}")]
    Hash(String),
}

impl ApiKey {
    /// Whether the key is usable as stored: an id of 1 to
    /// [`CREDENTIAL_BYTES_MAX`] bytes, a bounded description, an argon2id hash
    /// with bounded parameters (none once revoked).
    pub fn validate(&self) -> Result<(), String> {
        check_key(self)
    }
}

/// Locks the key store of data directory `dir` (`DIR/api_keys.json.lock`,
/// an exclusive `flock`) until the returned file is dropped: every writer of
/// the file (the `keys` commands, a broker writing what the metadata holds)
/// takes it, so that no change is lost between a read and a write.
pub fn lock_dir(dir: &Path) -> Result<std::fs::File, ApiKeysError> {
    use std::os::unix::fs::OpenOptionsExt;
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ApiKeysError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let path = dir.join(format!("{API_KEYS_FILE}.lock"));
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(&path)
        .map_err(io(&path))?;
    f.lock().map_err(io(&path))?;
    Ok(f)
}

/// The set of API keys, by id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApiKeys {
    keys: BTreeMap<String, ApiKey>,
}

fn argon2() -> Result<Argon2<'static>, ApiKeysError> {
    let params = Params::new(
        ARGON2_MEMORY_KIB,
        ARGON2_ITERATIONS,
        ARGON2_PARALLELISM,
        None,
    )
    .map_err(|e| ApiKeysError::Hash(e.to_string()))?;
    Ok(Argon2::new(Algorithm::Argon2id, Version::V0x13, params))
}

fn hash_secret(secret: &str) -> Result<String, ApiKeysError> {
    let salt = SaltString::generate(&mut OsRng);
    argon2()?
        .hash_password(secret.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| ApiKeysError::Hash(e.to_string()))
}

/// The hash an unknown or revoked id is verified against, so that such a login
/// costs what a real one does. Computed once, with the current parameters.
fn dummy_hash() -> Option<&'static str> {
    static DUMMY: OnceLock<Option<String>> = OnceLock::new();
    DUMMY
        .get_or_init(|| hash_secret("es-auth dummy secret, matches no key").ok())
        .as_deref()
}

/// Checks that `hash` is an argon2id PHC string with bounded parameters.
fn check_hash(hash: &str) -> Result<(), String> {
    let parsed = PasswordHash::new(hash).map_err(|e| format!("hash is not a PHC string: {e}"))?;
    if parsed.algorithm.as_str() != "argon2id" {
        return Err(format!(
            "hash algorithm {} is not argon2id",
            parsed.algorithm
        ));
    }
    let params = Params::try_from(&parsed).map_err(|e| format!("argon2 parameters: {e}"))?;
    if params.m_cost() > ARGON2_MEMORY_KIB_MAX
        || params.t_cost() > ARGON2_ITERATIONS_MAX
        || params.p_cost() > ARGON2_PARALLELISM_MAX
    {
        return Err(format!(
            "argon2 parameters m={},t={},p={} exceed the limits m={ARGON2_MEMORY_KIB_MAX},t={ARGON2_ITERATIONS_MAX},p={ARGON2_PARALLELISM_MAX}",
            params.m_cost(),
            params.t_cost(),
            params.p_cost()
        ));
    }
    Ok(())
}

fn check_key(key: &ApiKey) -> Result<(), String> {
    if key.id.is_empty() || key.id.len() > CREDENTIAL_BYTES_MAX {
        return Err(format!("id must be 1 to {CREDENTIAL_BYTES_MAX} bytes"));
    }
    if key
        .description
        .as_ref()
        .is_some_and(|d| d.len() > DESCRIPTION_BYTES_MAX)
    {
        return Err(format!(
            "description longer than {DESCRIPTION_BYTES_MAX} bytes"
        ));
    }
    if key.revoked {
        if !key.hash.is_empty() {
            return Err("a revoked key must not keep its hash".into());
        }
        return Ok(());
    }
    check_hash(&key.hash)
}

fn random_string(alphabet: &[u8], len: usize) -> String {
    let mut rng = OsRng;
    (0..len)
        .map(|_| char::from(alphabet[rng.gen_range(0..alphabet.len())]))
        .collect()
}

impl ApiKeys {
    /// An empty set. Also computes the dummy hash, so the first failed login is not
    /// slower than later ones.
    pub fn new() -> Self {
        let _ = dummy_hash();
        ApiKeys::default()
    }

    /// Loads `path`; a missing file is an empty set.
    pub fn load(path: &Path) -> Result<ApiKeys, ApiKeysError> {
        let io = |source| ApiKeysError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = match std::fs::File::open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ApiKeys::new()),
            Err(e) => return Err(io(e)),
        };
        let len = file.metadata().map_err(io)?.len();
        if len > API_KEYS_FILE_BYTES_MAX {
            return Err(ApiKeysError::TooLarge {
                path: path.to_path_buf(),
                len,
                max: API_KEYS_FILE_BYTES_MAX,
            });
        }
        // Read at most one byte past the limit, in case the file grew since stat.
        let mut bytes = Vec::with_capacity(len as usize);
        file.take(API_KEYS_FILE_BYTES_MAX + 1)
            .read_to_end(&mut bytes)
            .map_err(io)?;
        if bytes.len() as u64 > API_KEYS_FILE_BYTES_MAX {
            return Err(ApiKeysError::TooLarge {
                path: path.to_path_buf(),
                len: bytes.len() as u64,
                max: API_KEYS_FILE_BYTES_MAX,
            });
        }
        let parsed: ApiKeysFile =
            serde_json::from_slice(&bytes).map_err(|source| ApiKeysError::Parse {
                path: path.to_path_buf(),
                source,
            })?;
        if parsed.version != API_KEYS_FILE_VERSION {
            return Err(ApiKeysError::Version {
                path: path.to_path_buf(),
                version: parsed.version,
            });
        }
        let mut keys = ApiKeys::new();
        for key in parsed.keys {
            let invalid = |reason: String| ApiKeysError::Invalid {
                path: path.to_path_buf(),
                reason: format!("key {}: {reason}", key.id),
            };
            check_key(&key).map_err(invalid)?;
            if keys.keys.contains_key(&key.id) {
                return Err(invalid("appears twice".into()));
            }
            keys.keys.insert(key.id.clone(), key);
        }
        Ok(keys)
    }

    /// Writes the set to `path` atomically: `path.tmp` (mode 0600), fsync, rename
    /// over `path`, fsync of the directory. When this returns Ok the file survives a
    /// crash; on error `path` holds either the old or the new contents.
    pub fn save(&self, path: &Path) -> Result<(), ApiKeysError> {
        let io = |p: &Path| {
            let p = p.to_path_buf();
            move |source| ApiKeysError::Io { path: p, source }
        };
        let file = ApiKeysFile {
            version: API_KEYS_FILE_VERSION,
            keys: self.keys.values().cloned().collect(),
        };
        let mut bytes = serde_json::to_vec_pretty(&file).map_err(|e| ApiKeysError::Invalid {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        bytes.push(b'\n');
        let mut tmp_name = path.as_os_str().to_owned();
        tmp_name.push(".tmp");
        let tmp = PathBuf::from(tmp_name);
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let written = (|| {
            let mut out = options.open(&tmp).map_err(io(&tmp))?;
            out.write_all(&bytes).map_err(io(&tmp))?;
            out.sync_all().map_err(io(&tmp))?;
            drop(out);
            std::fs::rename(&tmp, path).map_err(io(path))
        })();
        if let Err(e) = written {
            // Nothing of it is in `path`: the temporary file goes too.
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        let dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io(dir))?;
        Ok(())
    }

    /// Creates a key for `principal` and returns it with its secret, which is not
    /// stored anywhere and cannot be recovered. Blocking and CPU-heavy (one argon2id
    /// hash).
    pub fn create(
        &mut self,
        principal: Principal,
        description: Option<String>,
        now_ms: i64,
    ) -> Result<(ApiKey, String), ApiKeysError> {
        let mut id = random_string(ID_ALPHABET, API_KEY_ID_CHARS);
        // 36^16 ids: a collision is astronomically unlikely, but cheap to rule out.
        while self.keys.contains_key(&id) {
            id = random_string(ID_ALPHABET, API_KEY_ID_CHARS);
        }
        self.create_named(&id, principal, description, now_ms)
    }

    /// As [`ApiKeys::create`], with the id chosen by the operator (the PLAIN
    /// username clients give, e.g. a service's name): 1 to
    /// [`CREDENTIAL_BYTES_MAX`] bytes of ASCII letters, digits and `._@-`, not
    /// the id of any key, revoked ones included (a revoked id is never reused).
    pub fn create_named(
        &mut self,
        id: &str,
        principal: Principal,
        description: Option<String>,
        now_ms: i64,
    ) -> Result<(ApiKey, String), ApiKeysError> {
        let invalid = |reason: String| ApiKeysError::InvalidKey {
            id: id.to_string(),
            reason,
        };
        if !id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._@-".contains(&b))
        {
            return Err(invalid(
                "an id is made of ASCII letters, digits and ._@- only".into(),
            ));
        }
        if self.keys.contains_key(id) {
            return Err(invalid("a key with this id exists (or was revoked)".into()));
        }
        if description
            .as_ref()
            .is_some_and(|d| d.len() > DESCRIPTION_BYTES_MAX)
        {
            return Err(invalid(format!(
                "description longer than {DESCRIPTION_BYTES_MAX} bytes"
            )));
        }
        let secret = random_string(SECRET_ALPHABET, API_KEY_SECRET_CHARS);
        let key = ApiKey {
            id: id.to_string(),
            principal,
            hash: hash_secret(&secret)?,
            created_ms: now_ms,
            description,
            revoked: false,
        };
        check_key(&key).map_err(invalid)?;
        self.keys.insert(id.to_string(), key.clone());
        Ok((key, secret))
    }

    /// Lays `other`'s keys over these: a key not here is added, a revocation
    /// revokes, a revocation here is never undone, and a live key here that
    /// differs from `other`'s is replaced only with `replace_live`. True if
    /// anything changed.
    pub fn overlay(&mut self, other: &ApiKeys, replace_live: bool) -> bool {
        let mut changed = false;
        for (id, k) in &other.keys {
            let take = match self.keys.get(id) {
                None => true,
                Some(mine) if mine.revoked || mine == k => false,
                Some(_) => k.revoked || replace_live,
            };
            if take {
                self.keys.insert(id.clone(), k.clone());
                changed = true;
            }
        }
        changed
    }

    /// What these keys have that `base` lacks: keys it does not have, and
    /// revocations of keys it still has live.
    pub fn missing_from(&self, base: &ApiKeys) -> Vec<ApiKey> {
        self.keys
            .values()
            .filter(|k| match base.keys.get(&k.id) {
                None => true,
                Some(b) => k.revoked && !b.revoked,
            })
            .cloned()
            .collect()
    }

    /// The keys of `keys` (as the cluster metadata holds them), by id.
    pub fn from_keys<'a>(keys: impl IntoIterator<Item = &'a ApiKey>) -> ApiKeys {
        ApiKeys {
            keys: keys
                .into_iter()
                .map(|k| (k.id.clone(), k.clone()))
                .collect(),
        }
    }

    /// Every key, revoked ones included, by id.
    pub fn list(&self) -> impl Iterator<Item = &ApiKey> {
        self.keys.values()
    }

    /// The key `id`, revoked or not.
    pub fn get(&self, id: &str) -> Option<&ApiKey> {
        self.keys.get(id)
    }

    /// Revokes `id`, keeping a tombstone. False if there is no such key or it was
    /// already revoked.
    pub fn revoke(&mut self, id: &str) -> bool {
        match self.keys.get_mut(id) {
            Some(key) if !key.revoked => {
                key.revoked = true;
                key.hash.clear();
                true
            }
            _ => false,
        }
    }

    /// Adds or replaces a key as replicated from the cluster metadata. A revocation
    /// is final: a live key never replaces a tombstone with the same id.
    pub fn insert(&mut self, key: ApiKey) -> Result<(), ApiKeysError> {
        check_key(&key).map_err(|reason| ApiKeysError::InvalidKey {
            id: key.id.clone(),
            reason,
        })?;
        if self.keys.get(&key.id).is_some_and(|old| old.revoked) && !key.revoked {
            return Err(ApiKeysError::InvalidKey {
                id: key.id,
                reason: "the key was revoked".into(),
            });
        }
        self.keys.insert(key.id.clone(), key);
        Ok(())
    }

    /// The principal of key `id` if `secret` is its secret.
    ///
    /// Costs one argon2id verification whether or not `id` exists or is revoked (an
    /// unknown id is checked against a dummy hash), so response time does not reveal
    /// which ids exist. Ids or secrets over [`CREDENTIAL_BYTES_MAX`] are refused
    /// without hashing. Blocking and CPU-heavy: run it on a blocking thread.
    pub fn verify(&self, id: &str, secret: &str) -> Option<Principal> {
        if id.len() > CREDENTIAL_BYTES_MAX || secret.len() > CREDENTIAL_BYTES_MAX {
            return None;
        }
        let key = self.keys.get(id).filter(|k| !k.revoked);
        let hash = match key {
            Some(key) => key.hash.as_str(),
            None => dummy_hash()?,
        };
        let parsed = PasswordHash::new(hash).ok()?;
        // Parameters come from the PHC string; argon2's comparison is constant-time.
        let matches = Argon2::default()
            .verify_password(secret.as_bytes(), &parsed)
            .is_ok();
        match key {
            Some(key) if matches => Some(key.principal.clone()),
            _ => None,
        }
    }
}

/// A SASL/PLAIN message split as Kafka's `PlainSaslServer` splits it.
#[derive(Clone, PartialEq, Eq)]
pub struct PlainCredentials {
    /// The requested authorization id; empty when the client sent none.
    pub authzid: String,
    /// The authentication id: for es, the API key id.
    pub username: String,
    /// For es, the API key secret.
    pub password: String,
}

impl fmt::Debug for PlainCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PlainCredentials")
            .field("authzid", &self.authzid)
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// Why SASL/PLAIN failed, with Kafka's message texts.
///
/// Kafka sends the message of a `SaslAuthenticationException` to the client and
/// hides that of a plain `SaslException` behind a generic text;
/// [`PlainError::client_message`] gives what the client must see.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlainError {
    /// es's size limit (Kafka has only `sasl.server.max.receive.size`); hidden.
    #[error("Invalid SASL/PLAIN response: {0} bytes, more than {PLAIN_MESSAGE_BYTES_MAX}")]
    TooLarge(usize),
    /// Kafka's `SaslException`; hidden.
    #[error("Authentication failed: username not specified")]
    UsernameNotSpecified,
    /// Kafka's `SaslException`; hidden.
    #[error("Authentication failed: password not specified")]
    PasswordNotSpecified,
    /// Kafka's `SaslAuthenticationException`; sent to the client.
    #[error("Authentication failed: Invalid username or password")]
    InvalidCredentials,
    /// Kafka's `SaslAuthenticationException`; sent to the client.
    #[error("Authentication failed: Client requested an authorization id that is different from username")]
    AuthorizationIdMismatch,
}

impl PlainError {
    /// Whether Kafka sends this error's own message to the client.
    pub fn is_client_visible(&self) -> bool {
        matches!(
            self,
            PlainError::InvalidCredentials | PlainError::AuthorizationIdMismatch
        )
    }

    /// The `error_message` of the SaslAuthenticate response (error code
    /// SASL_AUTHENTICATION_FAILED).
    pub fn client_message(&self, reauthenticating: bool) -> String {
        if self.is_client_visible() {
            self.to_string()
        } else {
            crate::scram::generic_failure_message("PLAIN", reauthenticating)
        }
    }
}

/// Splits a PLAIN message (`[authzid] NUL authcid NUL passwd`) as Kafka 2.2+ does:
/// the bytes are decoded as Java decodes UTF-8, then cut at the first two NULs; a
/// missing field is empty and anything after a third NUL is ignored (so Kafka's old
/// "expected 3 tokens" error can no longer happen). An empty username or password
/// is an error. The authorization id is checked by [`authenticate_plain`], after
/// the password, as Kafka does.
pub fn parse_plain(msg: &[u8]) -> Result<PlainCredentials, PlainError> {
    if msg.len() > PLAIN_MESSAGE_BYTES_MAX {
        return Err(PlainError::TooLarge(msg.len()));
    }
    let text = java::utf8_lossy(msg);
    let mut tokens = text.split('\0');
    let authzid = tokens.next().unwrap_or("").to_string();
    let username = tokens.next().unwrap_or("").to_string();
    let password = tokens.next().unwrap_or("").to_string();
    if username.is_empty() {
        return Err(PlainError::UsernameNotSpecified);
    }
    if password.is_empty() {
        return Err(PlainError::PasswordNotSpecified);
    }
    Ok(PlainCredentials {
        authzid,
        username,
        password,
    })
}

/// The whole SASL/PLAIN server step, in Kafka's order: parse, verify the key, then
/// refuse an authorization id other than the username. Blocking and CPU-heavy (one
/// argon2id verification): run it on a blocking thread. On success the SaslAuthenticate
/// response carries empty auth bytes.
pub fn authenticate_plain(keys: &ApiKeys, msg: &[u8]) -> Result<Principal, PlainError> {
    let credentials = parse_plain(msg)?;
    let principal = keys
        .verify(&credentials.username, &credentials.password)
        .ok_or(PlainError::InvalidCredentials)?;
    if !credentials.authzid.is_empty() && credentials.authzid != credentials.username {
        return Err(PlainError::AuthorizationIdMismatch);
    }
    Ok(principal)
}

#[cfg(test)]
#[path = "api_keys_tests.rs"]
mod tests;
