//! The client side of SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677),
//! as Kafka's `ScramSaslClient` runs it: es logging in to another Kafka
//! cluster (a mirror link's admin requests librdkafka has no call for).
//!
//! [`ScramClient`] is a sans-io state machine: [`ScramClient::client_first`],
//! then [`ScramClient::client_final`] with the server-first message, then
//! [`ScramClient::verify_server_final`]. The server is not trusted: its
//! messages are bounded ([`SCRAM_MESSAGE_BYTES_MAX`]), its nonce must extend
//! the client's, its iteration count must lie between Kafka's minimum and
//! [`CLIENT_ITERATIONS_MAX`] (PBKDF2 work a hostile server could ask for),
//! and its signature is checked in constant time.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use rand::rngs::OsRng;
use rand::RngCore;
use subtle::ConstantTimeEq;

use crate::scram::{ScramMechanism, SALT_BYTES_MAX, SCRAM_MESSAGE_BYTES_MAX};

/// The most PBKDF2 iterations a server may ask this client for (Kafka's
/// brokers store at most 16384; older ones could hold more).
pub const CLIENT_ITERATIONS_MAX: u32 = 1_000_000;

/// What the client keeps between its messages.
enum State {
    Initial,
    /// Client-first sent.
    First {
        bare: String,
    },
    /// Client-final sent: the server signature expected.
    Final {
        server_signature: Vec<u8>,
    },
    Done,
}

/// One SCRAM exchange from the client's side.
pub struct ScramClient {
    mechanism: ScramMechanism,
    username: String,
    password: String,
    nonce: String,
    state: State,
}

impl std::fmt::Debug for ScramClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the password.
        f.debug_struct("ScramClient")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .finish()
    }
}

/// RFC 5802's saslname: `,` and `=` escaped.
fn saslname(username: &str) -> String {
    username.replace('=', "=3D").replace(',', "=2C")
}

impl ScramClient {
    /// An exchange for `username` and `password`, with a random nonce.
    pub fn new(mechanism: ScramMechanism, username: &str, password: &str) -> ScramClient {
        let mut raw = [0u8; 24];
        OsRng.fill_bytes(&mut raw);
        // Printable and free of ',': base64 without padding or '/'.
        let nonce: String = STANDARD
            .encode(raw)
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .collect();
        ScramClient::with_nonce(mechanism, username, password, &nonce)
    }

    /// An exchange with the client nonce `nonce` (tests replay a transcript).
    pub fn with_nonce(
        mechanism: ScramMechanism,
        username: &str,
        password: &str,
        nonce: &str,
    ) -> ScramClient {
        ScramClient {
            mechanism,
            username: username.to_string(),
            password: password.to_string(),
            nonce: nonce.to_string(),
            state: State::Initial,
        }
    }

    /// The client-first message (`n,,n=USER,r=NONCE`).
    pub fn client_first(&mut self) -> Result<Vec<u8>, String> {
        if !matches!(self.state, State::Initial) {
            return Err("SCRAM: client-first sent twice".into());
        }
        let bare = format!("n={},r={}", saslname(&self.username), self.nonce);
        let msg = format!("n,,{bare}").into_bytes();
        self.state = State::First { bare };
        Ok(msg)
    }

    /// The client-final message answering `server_first`.
    pub fn client_final(&mut self, server_first: &[u8]) -> Result<Vec<u8>, String> {
        let State::First { bare } = std::mem::replace(&mut self.state, State::Done) else {
            return Err("SCRAM: unexpected server-first message".into());
        };
        if server_first.len() > SCRAM_MESSAGE_BYTES_MAX {
            return Err(format!(
                "SCRAM: a server-first message of {} bytes",
                server_first.len()
            ));
        }
        let text = std::str::from_utf8(server_first)
            .map_err(|_| "SCRAM: the server-first message is not UTF-8".to_string())?;
        if let Some(e) = text.strip_prefix("e=") {
            return Err(format!("SCRAM: the server refused: {e}"));
        }
        let field = |name: &str| {
            text.split(',')
                .find_map(|kv| kv.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
        };
        let nonce = field("r").ok_or("SCRAM: server-first without a nonce")?;
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err("SCRAM: the server's nonce does not extend the client's".into());
        }
        let salt = field("s")
            .and_then(|s| STANDARD.decode(s).ok())
            .ok_or("SCRAM: server-first without a valid salt")?;
        if salt.is_empty() || salt.len() > SALT_BYTES_MAX {
            return Err(format!("SCRAM: a salt of {} bytes", salt.len()));
        }
        let iterations: u32 = field("i")
            .and_then(|i| i.parse().ok())
            .ok_or("SCRAM: server-first without an iteration count")?;
        if iterations < self.mechanism.min_iterations() || iterations > CLIENT_ITERATIONS_MAX {
            return Err(format!(
                "SCRAM: {iterations} iterations, outside {}..={CLIENT_ITERATIONS_MAX}",
                self.mechanism.min_iterations()
            ));
        }
        let m = self.mechanism;
        let salted = m.hi(self.password.as_bytes(), &salt, iterations);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{bare},{text},{without_proof}");
        let keys = (|| {
            let client_key = m.hmac(&salted, &[b"Client Key"])?;
            let stored_key = m.hash(&client_key);
            let signature = m.hmac(&stored_key, &[auth_message.as_bytes()])?;
            let server_key = m.hmac(&salted, &[b"Server Key"])?;
            let server_signature = m.hmac(&server_key, &[auth_message.as_bytes()])?;
            let proof: Vec<u8> = client_key
                .iter()
                .zip(&signature)
                .map(|(k, s)| k ^ s)
                .collect();
            Some((proof, server_signature))
        })();
        let (proof, server_signature) = keys.ok_or("SCRAM: HMAC key refused")?;
        self.state = State::Final { server_signature };
        Ok(format!("{without_proof},p={}", STANDARD.encode(proof)).into_bytes())
    }

    /// Checks the server-final message: the server proved it holds the
    /// credential (or refused, with its reason).
    pub fn verify_server_final(&mut self, server_final: &[u8]) -> Result<(), String> {
        let State::Final { server_signature } = std::mem::replace(&mut self.state, State::Done)
        else {
            return Err("SCRAM: unexpected server-final message".into());
        };
        if server_final.len() > SCRAM_MESSAGE_BYTES_MAX {
            return Err("SCRAM: an oversized server-final message".into());
        }
        let text = String::from_utf8_lossy(server_final);
        if let Some(e) = text.strip_prefix("e=") {
            return Err(format!("SCRAM: the server refused: {e}"));
        }
        let given = text
            .split(',')
            .find_map(|kv| kv.strip_prefix("v="))
            .and_then(|v| STANDARD.decode(v).ok())
            .ok_or("SCRAM: server-final without a signature")?;
        if given.ct_eq(&server_signature).into() {
            Ok(())
        } else {
            Err("SCRAM: the server's signature is wrong".into())
        }
    }
}

#[cfg(test)]
#[path = "scram_client_tests.rs"]
mod tests;
