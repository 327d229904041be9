//! sasl_plain: a SASL/PLAIN message (`[authzid] NUL authcid NUL passwd`)
//! into es-auth's `parse_plain` and `authenticate_plain`, against the key set
//! of `es_fuzz::plain` (keys A and B live, one revoked).
//!
//! Input: the message, a template in which `%I %S %J %T %R %W %L` stand for
//! the keys' ids and secrets (see `es_fuzz::template`).
//!
//! Must hold: no panic; `parse_plain` splits at the first two NUL bytes, refuses
//! an empty username or password and anything over `PLAIN_MESSAGE_BYTES_MAX`,
//! and gives back the fields as sent when they are UTF-8; `authenticate_plain`
//! succeeds exactly when the username is a live key's id, the password is its
//! secret byte for byte and the authzid is empty or the username, and then
//! names that key's principal.
//!
//! A well-formed message naming an unknown or revoked id costs es a full-price
//! argon2id verification (the dummy hash, about 20 ms); one such message in 64
//! is verified, the others are only parsed.

#![no_main]

use std::sync::OnceLock;

use es_auth::api_keys::{
    authenticate_plain, parse_plain, ApiKeys, PlainError, CREDENTIAL_BYTES_MAX,
    PLAIN_MESSAGE_BYTES_MAX,
};
use es_fuzz::{plain, template, Sampler};
use libfuzzer_sys::fuzz_target;

static DUMMY_HASH: Sampler = Sampler::new(64);

fn keys() -> &'static ApiKeys {
    static KEYS: OnceLock<ApiKeys> = OnceLock::new();
    KEYS.get_or_init(plain::key_set)
}

fuzz_target!(|data: &[u8]| {
    let msg = template::substitute(data, |letter, _| plain::placeholder(letter));
    let parsed = parse_plain(&msg);
    let [authzid, username, password] = plain::split_fields(&msg);

    // Parsing, against the byte-level split.
    if msg.len() > PLAIN_MESSAGE_BYTES_MAX {
        assert_eq!(parsed, Err(PlainError::TooLarge(msg.len())));
        return;
    }
    let credentials = match parsed {
        Err(PlainError::UsernameNotSpecified) => {
            assert!(username.is_empty(), "username {username:?} not seen");
            return;
        }
        Err(PlainError::PasswordNotSpecified) => {
            assert!(!username.is_empty() && password.is_empty());
            return;
        }
        Err(e) => panic!("parse_plain: unexpected {e:?}"),
        Ok(c) => c,
    };
    assert!(!username.is_empty() && !password.is_empty());
    for (field, text) in [
        (authzid, &credentials.authzid),
        (username, &credentials.username),
        (password, &credentials.password),
    ] {
        assert!(!text.contains('\0'));
        if let Ok(utf8) = std::str::from_utf8(field) {
            assert_eq!(utf8, text.as_str(), "field changed by parsing");
        }
    }

    // The API key check.
    let live = plain::live_key(&credentials.username);
    let hashed = credentials.username.len() <= CREDENTIAL_BYTES_MAX
        && credentials.password.len() <= CREDENTIAL_BYTES_MAX;
    if live.is_none() && hashed && !DUMMY_HASH.allow() {
        return;
    }
    let result = authenticate_plain(keys(), &msg);
    es_fuzz::trace!("{:?} -> {result:?}", String::from_utf8_lossy(&msg));
    let presented = plain::presented_key(&msg);
    let authzid_ok = credentials.authzid.is_empty() || credentials.authzid == credentials.username;
    match (&result, presented) {
        (Ok(principal), Some(key)) => {
            assert!(authzid_ok, "authzid {:?} accepted", credentials.authzid);
            assert_eq!(*principal, plain::principal(key));
        }
        (Ok(principal), None) => panic!(
            "authenticated as {principal:?} without a key's secret: {:?}",
            String::from_utf8_lossy(&msg)
        ),
        (Err(PlainError::AuthorizationIdMismatch), Some(_)) => assert!(!authzid_ok),
        (Err(e), Some(_)) => panic!("a right secret refused: {e:?}"),
        (Err(e), None) => assert_eq!(*e, PlainError::InvalidCredentials),
    }
    if let Err(e) = &result {
        assert!(e.is_client_visible());
        assert!(!e.client_message(false).is_empty());
    }
});
