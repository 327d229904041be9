//! Tests of [`super`]: key lifecycle, the file, timing-independent verification and
//! Kafka's PlainSaslServer behaviour.

use super::*;
use proptest::prelude::*;

fn alice() -> Principal {
    Principal::user("alice")
}

#[test]
fn create_verify_revoke() {
    let mut keys = ApiKeys::new();
    let (key, secret) = keys
        .create(alice(), Some("ci".into()), 1_700_000_000_000)
        .expect("create");
    assert_eq!(key.id.len(), API_KEY_ID_CHARS);
    assert!(key
        .id
        .bytes()
        .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit()));
    assert_eq!(secret.len(), API_KEY_SECRET_CHARS);
    assert!(secret
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/'));
    assert!(
        key.hash.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"),
        "{}",
        key.hash
    );
    assert!(!key.hash.contains(&secret));
    assert_eq!(keys.get(&key.id), Some(&key));
    assert_eq!(keys.list().count(), 1);

    assert_eq!(keys.verify(&key.id, &secret), Some(alice()));
    assert_eq!(keys.verify(&key.id, "wrong"), None);
    assert_eq!(keys.verify("NOSUCHKEY0000000", &secret), None);

    assert!(keys.revoke(&key.id));
    assert!(!keys.revoke(&key.id));
    assert!(!keys.revoke("NOSUCHKEY0000000"));
    let tombstone = keys.get(&key.id).expect("tombstone");
    assert!(tombstone.revoked);
    assert!(tombstone.hash.is_empty());
    assert_eq!(keys.verify(&key.id, &secret), None);
}

#[test]
fn two_keys_have_different_salts_and_ids() {
    let mut keys = ApiKeys::new();
    let (a, _) = keys.create(alice(), None, 1).expect("a");
    let (b, _) = keys.create(alice(), None, 2).expect("b");
    assert_ne!(a.id, b.id);
    let salt = |h: &str| h.split('$').nth(4).map(str::to_string);
    assert_ne!(salt(&a.hash), salt(&b.hash));
}

#[test]
fn named_keys_take_the_operator_s_id_once() {
    let mut keys = ApiKeys::new();
    let (key, secret) = keys
        .create_named("svc-orders", alice(), None, 1)
        .expect("named");
    assert_eq!(key.id, "svc-orders");
    assert_eq!(keys.verify("svc-orders", &secret), Some(alice()));
    assert!(keys.create_named("svc-orders", alice(), None, 2).is_err());
    assert!(keys.revoke("svc-orders"));
    assert!(
        keys.create_named("svc-orders", alice(), None, 3).is_err(),
        "a revoked id was reused"
    );
    let long = "x".repeat(CREDENTIAL_BYTES_MAX + 1);
    for bad in ["", "has space", "colon:", "nul\0", "é", long.as_str()] {
        assert!(
            keys.create_named(bad, alice(), None, 4).is_err(),
            "{bad:?} accepted as an id"
        );
    }
}

#[test]
fn oversized_credentials_are_refused_unhashed() {
    let mut keys = ApiKeys::new();
    let (key, secret) = keys.create(alice(), None, 0).expect("create");
    let long = "x".repeat(CREDENTIAL_BYTES_MAX + 1);
    assert_eq!(keys.verify(&long, &secret), None);
    assert_eq!(keys.verify(&key.id, &long), None);
}

#[test]
fn insert_validates_and_keeps_revocations_final() {
    let mut source = ApiKeys::new();
    let (key, secret) = source.create(alice(), None, 5).expect("create");
    let mut replica = ApiKeys::new();
    replica.insert(key.clone()).expect("insert");
    assert_eq!(replica.verify(&key.id, &secret), Some(alice()));

    let mut revoked = key.clone();
    revoked.revoked = true;
    revoked.hash.clear();
    replica.insert(revoked).expect("tombstone");
    assert!(
        replica.insert(key.clone()).is_err(),
        "a revoked id cannot come back"
    );

    let mut bad = key.clone();
    bad.id = "OTHER".into();
    bad.hash = "$argon2id$v=19$m=4194304,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA".into();
    assert!(
        replica.insert(bad.clone()).is_err(),
        "memory cost over the limit"
    );
    bad.hash = "plaintext".into();
    assert!(replica.insert(bad.clone()).is_err());
    bad.hash = "$argon2i$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA".into();
    assert!(replica.insert(bad).is_err(), "argon2i is not argon2id");
}

#[test]
fn save_and_load_round_trip() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("api_keys.json");
    assert_eq!(
        ApiKeys::load(&path)
            .expect("missing is empty")
            .list()
            .count(),
        0
    );

    let mut keys = ApiKeys::new();
    let (live, secret) = keys
        .create(alice(), Some("live".into()), 10)
        .expect("create");
    let (dead, _) = keys
        .create(Principal::user("bob"), None, 11)
        .expect("create");
    assert!(keys.revoke(&dead.id));
    keys.save(&path).expect("save");

    let text = std::fs::read_to_string(&path).expect("read");
    let json: serde_json::Value = serde_json::from_str(&text).expect("json");
    assert_eq!(json["version"], 1);
    assert_eq!(json["keys"].as_array().map(Vec::len), Some(2));
    assert!(!text.contains(&secret), "the file never holds a secret");
    assert!(text.contains("\"principal\": \"User:alice\""));
    assert!(!dir.path().join("api_keys.json.tmp").exists());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).expect("stat").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    let loaded = ApiKeys::load(&path).expect("load");
    assert_eq!(
        loaded.list().cloned().collect::<Vec<_>>(),
        keys.list().cloned().collect::<Vec<_>>()
    );
    assert_eq!(loaded.verify(&live.id, &secret), Some(alice()));
    assert!(loaded.get(&dead.id).is_some_and(|k| k.revoked));

    // Saving again replaces the file.
    let mut more = loaded.clone();
    more.create(alice(), None, 12).expect("create");
    more.save(&path).expect("save again");
    assert_eq!(ApiKeys::load(&path).expect("load").list().count(), 3);
}

#[test]
fn load_errors_name_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("api_keys.json");
    let shown = path.display().to_string();

    std::fs::write(&path, "{not json").expect("write");
    let e = ApiKeys::load(&path).expect_err("garbage");
    assert!(matches!(e, ApiKeysError::Parse { .. }));
    assert!(e.to_string().starts_with(&shown), "{e}");

    std::fs::write(&path, r#"{"version":2,"keys":[]}"#).expect("write");
    assert!(matches!(
        ApiKeys::load(&path),
        Err(ApiKeysError::Version { version: 2, .. })
    ));

    let key = r#"{"id":"A","principal":"User:a","hash":"","created_ms":0,"revoked":true}"#;
    std::fs::write(&path, format!(r#"{{"version":1,"keys":[{key},{key}]}}"#)).expect("write");
    let e = ApiKeys::load(&path).expect_err("duplicate");
    assert!(e.to_string().contains("key A: appears twice"), "{e}");

    let live = r#"{"id":"B","principal":"User:b","hash":"nope","created_ms":0}"#;
    std::fs::write(&path, format!(r#"{{"version":1,"keys":[{live}]}}"#)).expect("write");
    assert!(matches!(
        ApiKeys::load(&path),
        Err(ApiKeysError::Invalid { .. })
    ));

    let file = std::fs::File::create(&path).expect("create");
    file.set_len(API_KEYS_FILE_BYTES_MAX + 1).expect("grow");
    let e = ApiKeys::load(&path).expect_err("too large");
    assert!(matches!(e, ApiKeysError::TooLarge { .. }));
    assert!(e.to_string().starts_with(&shown), "{e}");
}

/// Measures one argon2id hash with the production parameters. Run in release mode:
/// `cargo test --release -p es-auth -- --ignored --nocapture argon2_cost`.
#[test]
#[ignore]
fn argon2_cost() {
    let rounds = 20u32;
    let mut keys = ApiKeys::new();
    let (key, secret) = keys.create(alice(), None, 0).expect("create");
    let time = |f: &mut dyn FnMut()| {
        let start = std::time::Instant::now();
        for _ in 0..rounds {
            f();
        }
        start.elapsed() / rounds
    };
    // Alternate, so a busy neighbour skews each figure alike.
    for _ in 0..2 {
        let verify = time(&mut || assert!(keys.verify(&key.id, &secret).is_some()));
        let unknown = time(&mut || assert!(keys.verify("UNKNOWN000000000", &secret).is_none()));
        let hash = time(&mut || {
            hash_secret("measure me").expect("hash");
        });
        println!(
            "argon2id m={ARGON2_MEMORY_KIB} t={ARGON2_ITERATIONS} p={ARGON2_PARALLELISM}: \
             hash {hash:?}, verify {verify:?}, unknown id {unknown:?}"
        );
    }
}

// Kafka's PlainSaslServer: split, empty checks, then credentials, then authzid.
#[test]
fn plain_parsing_follows_kafka() {
    let ok = parse_plain(b"\0user\0pass").expect("ok");
    assert_eq!(
        (
            ok.authzid.as_str(),
            ok.username.as_str(),
            ok.password.as_str()
        ),
        ("", "user", "pass")
    );
    let ok = parse_plain(b"user\0user\0pass\0ignored").expect("ok");
    assert_eq!(
        (ok.authzid.as_str(), ok.password.as_str()),
        ("user", "pass")
    );
    assert!(
        !format!("{ok:?}").contains("pass\""),
        "Debug redacts the password"
    );

    assert_eq!(parse_plain(b""), Err(PlainError::UsernameNotSpecified));
    assert_eq!(parse_plain(b"user"), Err(PlainError::UsernameNotSpecified));
    assert_eq!(
        parse_plain(b"\0\0pass"),
        Err(PlainError::UsernameNotSpecified)
    );
    assert_eq!(
        parse_plain(b"\0user"),
        Err(PlainError::PasswordNotSpecified)
    );
    assert_eq!(
        parse_plain(b"\0user\0"),
        Err(PlainError::PasswordNotSpecified)
    );
    assert_eq!(
        parse_plain(&vec![b'a'; PLAIN_MESSAGE_BYTES_MAX + 1]),
        Err(PlainError::TooLarge(PLAIN_MESSAGE_BYTES_MAX + 1))
    );
    // Invalid UTF-8 is replaced as Java replaces it, not refused.
    let odd = parse_plain(b"\0us\xffer\0pass").expect("lossy");
    assert_eq!(odd.username, "us\u{FFFD}er");

    assert_eq!(
        PlainError::UsernameNotSpecified.client_message(false),
        "Authentication failed during authentication due to invalid credentials with SASL mechanism PLAIN"
    );
    assert_eq!(
        PlainError::PasswordNotSpecified.client_message(true),
        "Authentication failed during re-authentication due to invalid credentials with SASL mechanism PLAIN"
    );
    assert_eq!(
        PlainError::InvalidCredentials.client_message(false),
        "Authentication failed: Invalid username or password"
    );
    assert_eq!(
        PlainError::AuthorizationIdMismatch.client_message(false),
        "Authentication failed: Client requested an authorization id that is different from username"
    );
}

#[test]
fn plain_authentication_order_follows_kafka() {
    let mut keys = ApiKeys::new();
    let (key, secret) = keys.create(alice(), None, 0).expect("create");
    let msg =
        |authzid: &str, user: &str, pass: &str| format!("{authzid}\0{user}\0{pass}").into_bytes();

    assert_eq!(
        authenticate_plain(&keys, &msg("", &key.id, &secret)),
        Ok(alice())
    );
    assert_eq!(
        authenticate_plain(&keys, &msg(&key.id, &key.id, &secret)),
        Ok(alice())
    );
    assert_eq!(
        authenticate_plain(&keys, &msg("", &key.id, "wrong")),
        Err(PlainError::InvalidCredentials)
    );
    assert_eq!(
        authenticate_plain(&keys, &msg("", "UNKNOWN000000000", &secret)),
        Err(PlainError::InvalidCredentials)
    );
    // Kafka checks the password before the authorization id.
    assert_eq!(
        authenticate_plain(&keys, &msg("someone", &key.id, "wrong")),
        Err(PlainError::InvalidCredentials)
    );
    assert_eq!(
        authenticate_plain(&keys, &msg("someone", &key.id, &secret)),
        Err(PlainError::AuthorizationIdMismatch)
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn plain_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = parse_plain(&bytes);
    }
}

#[test]
fn overlays_add_keys_and_never_undo_a_revocation() {
    let mut a = ApiKeys::new();
    let (k1, _) = a.create_named("one", alice(), None, 1).expect("one");
    let mut b = ApiKeys::new();
    let (k2, _) = b.create_named("two", alice(), None, 2).expect("two");
    let (k1b, _) = b
        .create_named("one", Principal::user("bob"), None, 3)
        .expect("one'");

    // b has "two" that a lacks, and a different live "one".
    assert_eq!(b.missing_from(&a), vec![k2.clone()]);
    let mut merged = a.clone();
    assert!(merged.overlay(&b, false));
    assert_eq!(
        merged.get("one"),
        Some(&k1),
        "a live key kept without replace_live"
    );
    assert_eq!(merged.get("two"), Some(&k2));
    let mut replaced = a.clone();
    assert!(replaced.overlay(&b, true));
    assert_eq!(replaced.get("one"), Some(&k1b));
    assert!(!replaced.overlay(&b, true), "nothing new the second time");

    // A revocation travels both ways and is final.
    let mut revoked = a.clone();
    assert!(revoked.revoke("one"));
    assert_eq!(revoked.missing_from(&a).len(), 1);
    let mut back = a.clone();
    assert!(back.overlay(&revoked, false));
    assert!(back.get("one").is_some_and(|k| k.revoked));
    assert!(
        !back.overlay(&a, true),
        "a live key never replaces a tombstone"
    );
    assert!(back.get("one").is_some_and(|k| k.revoked));
    assert_eq!(ApiKeys::from_keys(back.list()), back);
}

#[test]
fn a_failed_save_leaves_the_old_file_and_no_temporary_one() {
    let dir = tempfile::tempdir().expect("tmp");
    // A directory where the file should be: the rename over it fails.
    let path = dir.path().join("api_keys.json");
    std::fs::create_dir(&path).expect("mkdir");
    let mut keys = ApiKeys::new();
    keys.create(alice(), None, 1).expect("create");
    assert!(keys.save(&path).is_err());
    assert!(path.is_dir(), "what was there is untouched");
    assert!(!dir.path().join("api_keys.json.tmp").exists());
}
