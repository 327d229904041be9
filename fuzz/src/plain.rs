//! The API keys the PLAIN targets log in with, and the PLAIN placeholders of
//! [`crate::template`].
//!
//! es hashes new secrets with OWASP's argon2id cost (19 MiB, two passes), but
//! [`ApiKeys::verify`] takes the parameters from each stored PHC string, so the
//! live keys here are hashed with the cheapest ones argon2 allows (8 KiB, one
//! pass): a right or wrong secret for them costs microseconds. What cannot be
//! made cheap without changing es is the check of an unknown or revoked id,
//! which runs against a dummy hash with es's real cost; the targets pay for it
//! only on a [`crate::Sampler`]'s schedule.

use argon2::password_hash::{PasswordHasher, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};
use es_auth::api_keys::{ApiKey, ApiKeys, CREDENTIAL_BYTES_MAX};
use es_auth::principal::Principal;

/// One API key the harness knows the secret of.
#[derive(Debug, Clone, Copy)]
pub struct Key {
    pub id: &'static str,
    pub secret: &'static str,
    /// The principal's name (`User:` + name).
    pub user: &'static str,
}

/// Key A (`%I`, `%S`).
pub const KEY_A: Key = Key {
    id: "FUZZKEYA00000001",
    secret: "Hq3v+Xk9Zt0aN2pLw7Rb/EeY5sUc1MdJgFo8iTlQyVrW4nKxC6hPzSjD3bGuAmIf",
    user: "plain-a",
};
/// Key B (`%J`, `%T`).
pub const KEY_B: Key = Key {
    id: "FUZZKEYB00000002",
    secret: "b7Tn2Wq+Lk4Rz9Xc0Vy/Hm5Pj8Ds3Fa6Ge1Bu4Ni7Ko2Ql9Mw0Er3St6Yx5Cv8Zh",
    user: "plain-b",
};
/// The revoked key's id (`%R`); its secret was key A's.
pub const REVOKED_ID: &str = "FUZZKEYR00000003";

/// The live keys.
pub const LIVE: [Key; 2] = [KEY_A, KEY_B];

/// The live key `id`, if any.
pub fn live_key(id: &str) -> Option<Key> {
    LIVE.into_iter().find(|k| k.id == id)
}

/// The principal `key` authenticates as.
pub fn principal(key: Key) -> Principal {
    Principal::user(key.user)
}

/// A PHC string for `secret` with argon2id's smallest cost and a fixed salt
/// (so every run of a target builds the same key set).
fn cheap_hash(secret: &str) -> String {
    let params = Params::new(8, 1, 1, None).expect("argon2 parameters");
    let salt = SaltString::from_b64("ZXNmdXp6c2FsdDAx").expect("salt");
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
        .hash_password(secret.as_bytes(), &salt)
        .expect("hash")
        .to_string()
}

/// Keys A and B, live, and the revoked key.
pub fn key_set() -> ApiKeys {
    let mut keys = ApiKeys::new();
    for key in LIVE {
        keys.insert(ApiKey {
            id: key.id.into(),
            principal: principal(key),
            hash: cheap_hash(key.secret),
            created_ms: 0,
            description: Some("es-fuzz".into()),
            revoked: false,
        })
        .expect("live key");
    }
    keys.insert(ApiKey {
        id: REVOKED_ID.into(),
        principal: Principal::user("revoked"),
        hash: String::new(),
        created_ms: 0,
        description: None,
        revoked: true,
    })
    .expect("revoked key");
    keys
}

/// The replacement for a PLAIN placeholder letter.
pub fn placeholder(letter: u8) -> Option<Vec<u8>> {
    let text = match letter {
        b'I' => KEY_A.id.to_string(),
        b'S' => KEY_A.secret.to_string(),
        b'J' => KEY_B.id.to_string(),
        b'T' => KEY_B.secret.to_string(),
        b'R' => REVOKED_ID.to_string(),
        b'W' => {
            let mut wrong = KEY_A.secret.to_string();
            wrong.pop();
            wrong.push('!');
            wrong
        }
        b'L' => "A".repeat(CREDENTIAL_BYTES_MAX + 1),
        _ => return None,
    };
    Some(text.into_bytes())
}

/// The three fields of a PLAIN message split at its first two NUL bytes, as
/// the RFC 4616 grammar reads them (authzid, authcid, passwd; a missing one
/// is empty, a third NUL ends the password).
pub fn split_fields(msg: &[u8]) -> [&[u8]; 3] {
    let mut parts = msg.splitn(3, |&b| b == 0);
    let authzid = parts.next().unwrap_or(&[]);
    let username = parts.next().unwrap_or(&[]);
    let rest = parts.next().unwrap_or(&[]);
    let password = rest.split(|&b| b == 0).next().unwrap_or(&[]);
    [authzid, username, password]
}

/// Whether verifying `msg` would cost a full-price argon2id verification: a
/// well-formed PLAIN message whose id is not a live key and whose id and
/// secret are short enough to be hashed.
pub fn costs_dummy_hash(msg: &[u8]) -> bool {
    match es_auth::api_keys::parse_plain(msg) {
        Ok(c) => {
            live_key(&c.username).is_none()
                && c.username.len() <= CREDENTIAL_BYTES_MAX
                && c.password.len() <= CREDENTIAL_BYTES_MAX
        }
        Err(_) => false,
    }
}

/// The live key whose id and secret `msg` carries (byte for byte), if any.
pub fn presented_key(msg: &[u8]) -> Option<Key> {
    let [_, username, password] = split_fields(msg);
    LIVE.into_iter()
        .find(|k| k.id.as_bytes() == username && k.secret.as_bytes() == password)
}
