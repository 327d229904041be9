//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677): stored credentials and the
//! server side of the exchange, behaving as Kafka's `ScramSaslServer`.
//!
//! A [`ScramCredential`] holds what Kafka stores: salt, iteration count, StoredKey
//! and ServerKey, never the password or SaltedPassword. KIP-554's
//! AlterUserScramCredentials sends salt and SaltedPassword;
//! [`ScramCredential::from_salted_password`] derives the keys as Kafka's
//! `ScramControlManager` does, after [`validate_upsertion`]'s checks.
//!
//! [`ScramServer`] is a sans-io state machine: feed it the client-first message
//! (with a credential lookup) and then the client-final message; it returns the
//! server messages or a [`ScramError`]. It follows Kafka's parser (its regular
//! expressions, compiled here with the `regex` crate), its order of checks and its
//! error texts, including its quirks: the client-first-message-bare signed by the
//! proof is rebuilt from the parsed fields (a reserved `m=` dropped, repeated
//! extensions merged), the authzid is compared to the decoded username without
//! decoding it, and an unknown user fails at client-first. es differs in three
//! places, each stricter: `tokenauth=true` is refused (es has no delegation tokens),
//! the channel binding `c=` must decode to the GS2 header the client sent (RFC 5802
//! requires it; Kafka does not check), and every message and field is bounded
//! ([`SCRAM_MESSAGE_BYTES_MAX`], [`SCRAM_EXTENSIONS_MAX`], [`SALT_BYTES_MAX`]).
//!
//! Any error moves the exchange to `FAILED`; any message after `COMPLETE` or
//! `FAILED` is an error. Which errors Kafka shows the client is described on
//! [`ScramError`].

use std::fmt;
use std::sync::OnceLock;

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
use base64::Engine;
use hmac::{Hmac, Mac};
use rand::rngs::OsRng;
use rand::RngCore;
use regex::Regex;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256, Sha512};
use subtle::ConstantTimeEq;

use crate::principal::java;

/// Kafka's minimum iteration count (`ScramMechanism.minIterations`), enforced at
/// login and by AlterUserScramCredentials.
pub const MIN_ITERATIONS: u32 = 4096;
/// Kafka's maximum for AlterUserScramCredentials (`ScramControlManager.MAX_ITERATIONS`).
pub const MAX_ITERATIONS: u32 = 16384;
/// Longest client-first or client-final message accepted.
pub const SCRAM_MESSAGE_BYTES_MAX: usize = 8192;
/// Most extensions accepted in a client-first message (Kafka's clients send at most
/// `tokenauth`).
pub const SCRAM_EXTENSIONS_MAX: usize = 8;
/// Longest salt accepted in a credential.
pub const SALT_BYTES_MAX: usize = 1024;
/// Longest SaltedPassword accepted from AlterUserScramCredentials.
pub const SALTED_PASSWORD_BYTES_MAX: usize = 1024;
/// Longest password [`ScramCredential::from_password`] hashes.
pub const PASSWORD_BYTES_MAX: usize = 1024;

/// AlterUserScramCredentials error message texts (Kafka's `ScramControlManager`).
pub const TOO_FEW_ITERATIONS: &str = "Too few iterations";
/// See [`TOO_FEW_ITERATIONS`].
pub const TOO_MANY_ITERATIONS: &str = "Too many iterations";
/// See [`TOO_FEW_ITERATIONS`].
pub const EMPTY_USERNAME: &str = "Username must not be empty";
/// See [`TOO_FEW_ITERATIONS`].
pub const UNKNOWN_MECHANISM: &str = "Unknown SCRAM mechanism";
/// See [`TOO_FEW_ITERATIONS`] (DUPLICATE_RESOURCE).
pub const ALTERED_TWICE: &str = "A user credential cannot be altered twice in the same request";
/// See [`TOO_FEW_ITERATIONS`] (RESOURCE_NOT_FOUND).
pub const DELETE_MISSING: &str = "Attempt to delete a user credential that does not exist";

/// A SCRAM mechanism.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ScramMechanism {
    #[serde(rename = "SCRAM-SHA-256")]
    Sha256,
    #[serde(rename = "SCRAM-SHA-512")]
    Sha512,
}

impl ScramMechanism {
    /// Both mechanisms, in Kafka's type order.
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::Sha256, ScramMechanism::Sha512];

    /// The SASL mechanism name, `SCRAM-SHA-256` or `SCRAM-SHA-512`.
    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    /// The mechanism named `name` (exact, case-sensitive, as Kafka).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Kafka's type id (DescribeUserScramCredentials, AlterUserScramCredentials,
    /// UserScramCredentialRecord): 1 and 2; 0 is UNKNOWN.
    pub fn type_id(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    /// The mechanism with Kafka type id `id`.
    pub fn from_type_id(id: i8) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.type_id() == id)
    }

    /// 4096, Kafka's `ScramMechanism.minIterations()`.
    pub fn min_iterations(self) -> u32 {
        MIN_ITERATIONS
    }

    /// 16384, the most AlterUserScramCredentials accepts.
    pub fn max_iterations(self) -> u32 {
        MAX_ITERATIONS
    }

    /// Digest (and key) length in bytes.
    pub fn digest_bytes(self) -> usize {
        match self {
            ScramMechanism::Sha256 => 32,
            ScramMechanism::Sha512 => 64,
        }
    }

    /// Kafka's Java enum constant name, which appears in its messages.
    fn java_name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM_SHA_256",
            ScramMechanism::Sha512 => "SCRAM_SHA_512",
        }
    }

    pub(crate) fn hmac(self, key: &[u8], parts: &[&[u8]]) -> Option<Vec<u8>> {
        fn run<M: Mac + hmac::digest::KeyInit>(key: &[u8], parts: &[&[u8]]) -> Option<Vec<u8>> {
            let mut mac = <M as hmac::digest::KeyInit>::new_from_slice(key).ok()?;
            for part in parts {
                mac.update(part);
            }
            Some(mac.finalize().into_bytes().to_vec())
        }
        match self {
            ScramMechanism::Sha256 => run::<Hmac<Sha256>>(key, parts),
            ScramMechanism::Sha512 => run::<Hmac<Sha512>>(key, parts),
        }
    }

    pub(crate) fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => Sha256::digest(data).to_vec(),
            ScramMechanism::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    /// RFC 5802's SaltedPassword, `Hi(password, salt, iterations)`: what a
    /// client sends in an AlterUserScramCredentials upsertion.
    pub fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        self.hi(password, salt, iterations)
    }

    /// RFC 5802's Hi(): PBKDF2 with HMAC, one block.
    pub(crate) fn hi(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        let mut out = vec![0u8; self.digest_bytes()];
        match self {
            ScramMechanism::Sha256 => {
                pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out)
            }
            ScramMechanism::Sha512 => {
                pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out)
            }
        }
        out
    }
}

impl fmt::Display for ScramMechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The message Kafka sends the client in place of a `SaslException`'s own text
/// (which may reveal, for instance, whether the user exists). Shared with PLAIN.
pub fn generic_failure_message(mechanism: &str, reauthenticating: bool) -> String {
    let phase = if reauthenticating {
        "re-authentication"
    } else {
        "authentication"
    };
    format!("Authentication failed during {phase} due to invalid credentials with SASL mechanism {mechanism}")
}

/// Why an AlterUserScramCredentials upsertion or deletion is refused, with Kafka's
/// error code names and message texts; es-kafka maps them to codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AlterCredentialError {
    /// UNACCEPTABLE_CREDENTIAL.
    #[error("{0}")]
    UnacceptableCredential(&'static str),
    /// UNSUPPORTED_SASL_MECHANISM.
    #[error("{0}")]
    UnsupportedSaslMechanism(&'static str),
}

/// Kafka's `validateScramUsernameAndMechanism`, used for deletions and upsertions.
pub fn validate_name_and_mechanism(
    name: &str,
    mechanism_type: i8,
) -> Result<ScramMechanism, AlterCredentialError> {
    if name.is_empty() {
        return Err(AlterCredentialError::UnacceptableCredential(EMPTY_USERNAME));
    }
    ScramMechanism::from_type_id(mechanism_type).ok_or(
        AlterCredentialError::UnsupportedSaslMechanism(UNKNOWN_MECHANISM),
    )
}

/// Kafka's `validateUpsertion`: name, mechanism, then 4096 <= iterations <= 16384.
pub fn validate_upsertion(
    name: &str,
    mechanism_type: i8,
    iterations: i32,
) -> Result<ScramMechanism, AlterCredentialError> {
    let mechanism = validate_name_and_mechanism(name, mechanism_type)?;
    if i64::from(iterations) < i64::from(mechanism.min_iterations()) {
        return Err(AlterCredentialError::UnacceptableCredential(
            TOO_FEW_ITERATIONS,
        ));
    }
    if i64::from(iterations) > i64::from(mechanism.max_iterations()) {
        return Err(AlterCredentialError::UnacceptableCredential(
            TOO_MANY_ITERATIONS,
        ));
    }
    Ok(mechanism)
}

/// Why a credential could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScramCredentialError {
    /// Outside 4096..=16384 (Kafka's AlterUserScramCredentials texts).
    #[error("{0}")]
    Iterations(&'static str),
    /// An empty SaltedPassword (Java's HMAC refuses an empty key: "Empty key").
    #[error("Empty key")]
    EmptyKey,
    #[error("{what} is {len} bytes, more than the {max} es accepts")]
    TooLong {
        what: &'static str,
        len: usize,
        max: usize,
    },
}

/// A stored SCRAM credential (Kafka's `ScramCredential` / UserScramCredentialRecord).
/// Serialised with the byte fields as base64.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramCredential {
    pub mechanism: ScramMechanism,
    #[serde(with = "base64_bytes")]
    pub salt: Vec<u8>,
    #[serde(with = "base64_bytes")]
    pub stored_key: Vec<u8>,
    #[serde(with = "base64_bytes")]
    pub server_key: Vec<u8>,
    pub iterations: u32,
}

impl fmt::Debug for ScramCredential {
    /// Hides the salt and keys, as Kafka's `ScramCredentialValue.toString()` does.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScramCredential")
            .field("mechanism", &self.mechanism)
            .field("salt", &"[hidden]")
            .field("stored_key", &"[hidden]")
            .field("server_key", &"[hidden]")
            .field("iterations", &self.iterations)
            .finish()
    }
}

fn check_iterations(
    mechanism: ScramMechanism,
    iterations: u32,
) -> Result<(), ScramCredentialError> {
    if iterations < mechanism.min_iterations() {
        return Err(ScramCredentialError::Iterations(TOO_FEW_ITERATIONS));
    }
    if iterations > mechanism.max_iterations() {
        return Err(ScramCredentialError::Iterations(TOO_MANY_ITERATIONS));
    }
    Ok(())
}

fn check_len(what: &'static str, len: usize, max: usize) -> Result<(), ScramCredentialError> {
    if len > max {
        return Err(ScramCredentialError::TooLong { what, len, max });
    }
    Ok(())
}

impl ScramCredential {
    /// A credential for `password` with a fresh salt. The salt is what Kafka's
    /// `ScramFormatter.secureRandomBytes()` makes: the base-36 text of a 130-bit
    /// random number (130 bits of entropy in at most 26 ASCII bytes). Costs
    /// `iterations` HMACs; iterations must be 4096..=16384.
    pub fn from_password(
        mechanism: ScramMechanism,
        password: &str,
        iterations: u32,
    ) -> Result<Self, ScramCredentialError> {
        check_iterations(mechanism, iterations)?;
        check_len("password", password.len(), PASSWORD_BYTES_MAX)?;
        let salt = secure_random_string().into_bytes();
        // Kafka's normalize() is plain UTF-8 (no SASLprep).
        let salted = mechanism.hi(password.as_bytes(), &salt, iterations);
        Self::from_salted_password(mechanism, salt, &salted, iterations)
    }

    /// The credential for a salt and SaltedPassword, as AlterUserScramCredentials
    /// (KIP-554) sends them: StoredKey = H(HMAC(SaltedPassword, "Client Key")),
    /// ServerKey = HMAC(SaltedPassword, "Server Key").
    pub fn from_salted_password(
        mechanism: ScramMechanism,
        salt: Vec<u8>,
        salted_password: &[u8],
        iterations: u32,
    ) -> Result<Self, ScramCredentialError> {
        check_iterations(mechanism, iterations)?;
        check_len("salt", salt.len(), SALT_BYTES_MAX)?;
        check_len(
            "salted password",
            salted_password.len(),
            SALTED_PASSWORD_BYTES_MAX,
        )?;
        if salted_password.is_empty() {
            return Err(ScramCredentialError::EmptyKey);
        }
        let client_key = mechanism
            .hmac(salted_password, &[b"Client Key"])
            .ok_or(ScramCredentialError::EmptyKey)?;
        let server_key = mechanism
            .hmac(salted_password, &[b"Server Key"])
            .ok_or(ScramCredentialError::EmptyKey)?;
        Ok(ScramCredential {
            mechanism,
            salt,
            stored_key: mechanism.hash(&client_key),
            server_key,
            iterations,
        })
    }

    /// Whether the fields fit the mechanism (key lengths, salt size).
    fn is_well_formed(&self) -> bool {
        let n = self.mechanism.digest_bytes();
        self.stored_key.len() == n
            && self.server_key.len() == n
            && self.salt.len() <= SALT_BYTES_MAX
    }
}

/// `new BigInteger(130, secureRandom).toString(Character.MAX_RADIX)`: Kafka's server
/// nonce and salt.
fn secure_random_string() -> String {
    let mut n = [0u8; 17];
    OsRng.fill_bytes(&mut n);
    n[0] &= 0x03; // 130 bits
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut digits = Vec::with_capacity(26);
    while n.iter().any(|b| *b != 0) {
        let mut rem = 0u32;
        for byte in n.iter_mut() {
            let cur = rem * 256 + u32::from(*byte);
            *byte = (cur / 36) as u8;
            rem = cur % 36;
        }
        digits.push(DIGITS[rem as usize]);
    }
    if digits.is_empty() {
        digits.push(b'0');
    }
    digits.reverse();
    String::from_utf8_lossy(&digits).into_owned()
}

/// Why the exchange failed. The variant is Kafka's exception class, which decides
/// what the client sees in the SaslAuthenticate response (SASL_AUTHENTICATION_FAILED):
/// see [`ScramError::response_message`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScramError {
    /// Kafka's `SaslException`: the text is for the broker log only; the client gets
    /// [`generic_failure_message`].
    #[error("{0}")]
    Sasl(String),
    /// Kafka's `SaslAuthenticationException`: the text is sent to the client.
    #[error("{0}")]
    Authentication(String),
    /// Kafka's `IllegalSaslStateException`: a message in the wrong state. Kafka
    /// builds no response for it and closes the connection.
    #[error("{0}")]
    IllegalState(String),
}

impl ScramError {
    /// Whether Kafka sends this error's own text to the client.
    pub fn is_client_visible(&self) -> bool {
        matches!(self, ScramError::Authentication(_))
    }

    /// The text Kafka would send the client, if it sends this error's own text
    /// (`SaslAuthenticationException`); `None` when the client gets
    /// [`generic_failure_message`] instead.
    pub fn client_message(&self) -> Option<&str> {
        match self {
            ScramError::Authentication(text) => Some(text),
            _ => None,
        }
    }

    /// The `error_message` Kafka puts in the SaslAuthenticate response.
    pub fn response_message(&self, mechanism: ScramMechanism, reauthenticating: bool) -> String {
        match self.client_message() {
            Some(text) => text.to_string(),
            None => generic_failure_message(mechanism.name(), reauthenticating),
        }
    }
}

fn sasl(text: impl Into<String>) -> ScramError {
    ScramError::Sasl(text.into())
}

// Kafka's ScramMessages grammar, in the regex crate's syntax (same meaning: every
// class is ASCII).
const SASLNAME: &str = r"(?:[\x01-\x7F&&[^=,]]|=2C|=3D)+";
const VALUE: &str = r"[\x01-\x7F&&[^,]]+";
const PRINTABLE: &str = r"[\x21-\x7E&&[^,]]+";
const ALPHA: &str = "[A-Za-z]+";
const BASE64: &str = "(?:[a-zA-Z0-9/+]{4})*(?:[a-zA-Z0-9/+]{3}=|[a-zA-Z0-9/+]{2}==)?";

type StaticRegex = OnceLock<Result<Regex, String>>;

fn grammar(
    cell: &'static StaticRegex,
    source: fn() -> String,
) -> Result<&'static Regex, ScramError> {
    cell.get_or_init(|| Regex::new(&source()).map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| sasl(format!("internal error in the SCRAM grammar: {e}")))
}

fn client_first_grammar() -> Result<&'static Regex, ScramError> {
    static CELL: StaticRegex = OnceLock::new();
    grammar(&CELL, || {
        format!(
            r"\A(?P<gs2>n,(?:a=(?P<authzid>{SASLNAME}))?,)(?:m={VALUE},)?n=(?P<saslname>{SASLNAME}),r=(?P<nonce>{PRINTABLE})(?P<extensions>(?:,{ALPHA}={VALUE})*)\z"
        )
    })
}

fn client_final_grammar() -> Result<&'static Regex, ScramError> {
    static CELL: StaticRegex = OnceLock::new();
    grammar(&CELL, || {
        format!(
            r"\Ac=(?P<channel>{BASE64}),r=(?P<nonce>{PRINTABLE})(?:,{ALPHA}={VALUE})*,p=(?P<proof>{BASE64})\z"
        )
    })
}

/// Java's `Base64.getDecoder()`: unused trailing bits are ignored.
fn java_base64_decode(text: &str) -> Option<Vec<u8>> {
    const LENIENT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true),
    );
    LENIENT.decode(text).ok()
}

/// Kafka's `ScramFormatter.username(saslName)`: `=2C` is `,`, `=3D` is `=`. The
/// grammar already refused any other `=`.
fn decode_saslname(saslname: &str) -> String {
    saslname.replace("=2C", ",").replace("=3D", "=")
}

/// Kafka keeps extensions in a map: a repeated key keeps its first place and its
/// last value. Kafka signs them in its map's iteration order, which is not the
/// client's: a `HashMap` before Kafka 4, `Map.copyOf` (randomised per JVM) since, so
/// a client sending two or more extensions authenticates against Kafka only by
/// luck. es keeps the client's order, the one deterministic choice that lets such a
/// client in; with zero or one extension (every real client) the result is Kafka's.
fn dedupe_extensions(entries: Vec<(String, String)>) -> Vec<(String, String)> {
    let mut unique: Vec<(String, String)> = Vec::with_capacity(entries.len());
    for (key, value) in entries {
        match unique.iter_mut().find(|(k, _)| *k == key) {
            Some(entry) => entry.1 = value,
            None => unique.push((key, value)),
        }
    }
    unique
}

/// What the server remembers between client-first and client-final.
struct Exchange {
    gs2_header: String,
    client_first_bare: String,
    server_first: String,
    nonce: String,
    username: String,
    credential: ScramCredential,
}

enum State {
    ReceiveClientFirst,
    ReceiveClientFinal(Box<Exchange>),
    Complete,
    Failed,
}

impl State {
    /// Kafka's state names, which appear in its IllegalSaslStateException text.
    fn java_name(&self) -> &'static str {
        match self {
            State::ReceiveClientFirst => "RECEIVE_CLIENT_FIRST_MESSAGE",
            State::ReceiveClientFinal(_) => "RECEIVE_CLIENT_FINAL_MESSAGE",
            State::Complete => "COMPLETE",
            State::Failed => "FAILED",
        }
    }
}

/// The server side of one SCRAM exchange (Kafka's `ScramSaslServer`).
pub struct ScramServer {
    mechanism: ScramMechanism,
    state: State,
    /// Replaces the random server nonce (tests reproduce RFC 7677's exchange).
    server_nonce: Option<String>,
}

impl fmt::Debug for ScramServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScramServer")
            .field("mechanism", &self.mechanism)
            .field("state", &self.state.java_name())
            .finish()
    }
}

impl ScramServer {
    /// A server waiting for the client-first message.
    pub fn new(mechanism: ScramMechanism) -> Self {
        ScramServer {
            mechanism,
            state: State::ReceiveClientFirst,
            server_nonce: None,
        }
    }

    /// A server whose nonce is `server_nonce` instead of a random one.
    #[cfg(test)]
    pub(crate) fn with_server_nonce(mechanism: ScramMechanism, server_nonce: &str) -> Self {
        ScramServer {
            server_nonce: Some(server_nonce.to_string()),
            ..ScramServer::new(mechanism)
        }
    }

    /// The mechanism this exchange runs.
    pub fn mechanism(&self) -> ScramMechanism {
        self.mechanism
    }

    /// Whether the client-first message has been handled (successfully or not), so
    /// the next message is for [`ScramServer::client_final`].
    pub fn started(&self) -> bool {
        !matches!(self.state, State::ReceiveClientFirst)
    }

    /// Whether the client has been authenticated.
    pub fn is_complete(&self) -> bool {
        matches!(self.state, State::Complete)
    }

    fn unexpected(&mut self) -> ScramError {
        let error = ScramError::IllegalState(format!(
            "Unexpected challenge in Sasl server state {}",
            self.state.java_name()
        ));
        self.state = State::Failed;
        error
    }

    /// Handles the client-first message and returns the server-first message.
    /// `lookup` gets the decoded username and returns its credential for this
    /// mechanism, if any; it is called at most once.
    pub fn client_first(
        &mut self,
        msg: &[u8],
        lookup: impl FnOnce(&str) -> Option<ScramCredential>,
    ) -> Result<Vec<u8>, ScramError> {
        if !matches!(self.state, State::ReceiveClientFirst) {
            return Err(self.unexpected());
        }
        self.state = State::Failed;
        let exchange = self.first(msg, lookup)?;
        let reply = exchange.server_first.clone().into_bytes();
        self.state = State::ReceiveClientFinal(Box::new(exchange));
        Ok(reply)
    }

    fn first(
        &self,
        msg: &[u8],
        lookup: impl FnOnce(&str) -> Option<ScramCredential>,
    ) -> Result<Exchange, ScramError> {
        if msg.len() > SCRAM_MESSAGE_BYTES_MAX {
            return Err(sasl(format!(
                "Invalid SCRAM client first message: {} bytes, more than {SCRAM_MESSAGE_BYTES_MAX}",
                msg.len()
            )));
        }
        let message = java::utf8_lossy(msg);
        let caps = client_first_grammar()?.captures(&message).ok_or_else(|| {
            sasl(format!(
                "Invalid SCRAM client first message format: {message}"
            ))
        })?;
        let text = |name: &str| caps.name(name).map_or("", |m| m.as_str());
        let (saslname, client_nonce) = (text("saslname"), text("nonce"));
        let extensions: Vec<(String, String)> = text("extensions")
            .split(',')
            .skip(1)
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        if extensions.len() > SCRAM_EXTENSIONS_MAX {
            return Err(sasl(format!(
                "Invalid SCRAM client first message format: more than {SCRAM_EXTENSIONS_MAX} extensions"
            )));
        }
        let extensions = dedupe_extensions(extensions);
        let server_nonce = match &self.server_nonce {
            Some(nonce) => nonce.clone(),
            None => secure_random_string(),
        };
        let username = decode_saslname(saslname);
        // Boolean.parseBoolean: "true" in any case.
        let token_auth = extensions
            .iter()
            .any(|(k, v)| k == "tokenauth" && v.eq_ignore_ascii_case("true"));
        if token_auth {
            return Err(sasl(format!(
                "Token Authentication failed: Invalid tokenId : {username}"
            )));
        }
        let credential = lookup(&username)
            .filter(|c| c.mechanism == self.mechanism)
            .ok_or_else(|| sasl("Authentication failed: Invalid user credentials"))?;
        if !credential.is_well_formed() {
            return Err(sasl(
                "Authentication failed: Credentials could not be obtained",
            ));
        }
        // Kafka compares the still-escaped authzid with the decoded username.
        let authzid = text("authzid");
        if !authzid.is_empty() && authzid != username {
            return Err(ScramError::Authentication(
                "Authentication failed: Client requested an authorization id that is different from username".into(),
            ));
        }
        if credential.iterations < self.mechanism.min_iterations() {
            return Err(sasl(format!(
                "Iterations {} is less than the minimum {} for {}",
                credential.iterations,
                self.mechanism.min_iterations(),
                self.mechanism.java_name()
            )));
        }
        // Kafka re-serialises the bare message from what it parsed.
        let mut client_first_bare = format!("n={saslname},r={client_nonce}");
        for (k, v) in &extensions {
            client_first_bare.push(',');
            client_first_bare.push_str(k);
            client_first_bare.push('=');
            client_first_bare.push_str(v);
        }
        let nonce = format!("{client_nonce}{server_nonce}");
        let server_first = format!(
            "r={nonce},s={},i={}",
            STANDARD.encode(&credential.salt),
            credential.iterations
        );
        Ok(Exchange {
            gs2_header: text("gs2").to_string(),
            client_first_bare,
            server_first,
            nonce,
            username,
            credential,
        })
    }

    /// Handles the client-final message: on a valid proof returns the server-final
    /// message (`v=` + ServerSignature) and the authenticated username (Kafka's
    /// authorization id, for `User:` + name).
    pub fn client_final(&mut self, msg: &[u8]) -> Result<(Vec<u8>, String), ScramError> {
        let exchange = match std::mem::replace(&mut self.state, State::Failed) {
            State::ReceiveClientFinal(exchange) => exchange,
            other => {
                self.state = other;
                return Err(self.unexpected());
            }
        };
        let reply = final_step(self.mechanism, &exchange, msg)?;
        self.state = State::Complete;
        Ok((reply, exchange.username.clone()))
    }
}

fn final_step(
    mechanism: ScramMechanism,
    exchange: &Exchange,
    msg: &[u8],
) -> Result<Vec<u8>, ScramError> {
    if msg.len() > SCRAM_MESSAGE_BYTES_MAX {
        return Err(sasl(format!(
            "Invalid SCRAM client final message: {} bytes, more than {SCRAM_MESSAGE_BYTES_MAX}",
            msg.len()
        )));
    }
    let message = java::utf8_lossy(msg);
    let invalid = || {
        sasl(format!(
            "Invalid SCRAM client final message format: {message}"
        ))
    };
    let caps = client_final_grammar()?
        .captures(&message)
        .ok_or_else(invalid)?;
    let text = |name: &str| caps.name(name).map_or("", |m| m.as_str());
    let channel = java_base64_decode(text("channel")).ok_or_else(invalid)?;
    let proof = java_base64_decode(text("proof")).ok_or_else(invalid)?;
    let nonce = text("nonce");
    if nonce != exchange.nonce {
        return Err(sasl("Invalid client nonce in the final client message."));
    }
    // es only (RFC 5802 section 5.1): the channel binding must be the GS2 header.
    if channel != exchange.gs2_header.as_bytes() {
        return Err(sasl("Invalid channel binding in the final client message."));
    }
    let without_proof = format!("c={},r={nonce}", STANDARD.encode(&channel));
    let auth_message = [
        exchange.client_first_bare.as_bytes(),
        b",",
        exchange.server_first.as_bytes(),
        b",",
        without_proof.as_bytes(),
    ];
    let credential = &exchange.credential;
    let failed = || sasl("Invalid client credentials");
    let client_signature = mechanism
        .hmac(&credential.stored_key, &auth_message)
        .ok_or_else(failed)?;
    // Kafka throws IllegalArgumentException (and drops the connection) for a proof of
    // the wrong length; es reports it as the wrong proof it is.
    if proof.len() != client_signature.len() {
        return Err(failed());
    }
    let client_key: Vec<u8> = client_signature
        .iter()
        .zip(&proof)
        .map(|(a, b)| a ^ b)
        .collect();
    let computed_stored_key = mechanism.hash(&client_key);
    if !bool::from(computed_stored_key.ct_eq(&credential.stored_key)) {
        return Err(failed());
    }
    let server_signature = mechanism
        .hmac(&credential.server_key, &auth_message)
        .ok_or_else(failed)?;
    Ok(format!("v={}", STANDARD.encode(server_signature)).into_bytes())
}

/// Serde for byte fields as standard base64 strings, bounded on the way in.
mod base64_bytes {
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serializer};

    /// Longest base64 text accepted for one field.
    const TEXT_BYTES_MAX: usize = 4 * 1024;

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        if text.len() > TEXT_BYTES_MAX {
            return Err(serde::de::Error::custom(format!(
                "base64 field of {} bytes, more than {TEXT_BYTES_MAX}",
                text.len()
            )));
        }
        STANDARD.decode(text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
#[path = "scram_tests.rs"]
pub(crate) mod tests;
