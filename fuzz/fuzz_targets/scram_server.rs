//! scram_server: a client-first and then a client-final message into
//! es-auth's `ScramServer`, for SCRAM-SHA-256 and SCRAM-SHA-512, against the
//! known credentials of `es_fuzz::scram`.
//!
//! Input: one flags byte, then
//! - template mode (flag 0x10 clear): the client-first bytes up to the first
//!   0xFF byte, the client-final template after it (`%N`, `%C`, `%P`, `%X`,
//!   see `es_fuzz::template`). Nothing about the messages is assumed.
//! - honest mode (flag 0x10 set): the bytes choose a well-formed exchange (user,
//!   nonce, authzid, extensions, a corrupted proof or not) that a right client
//!   would send.
//!
//! Flags: 0x01 SHA-512 (else SHA-256); 0x0e the credential lookup (known
//! users, nobody, the other mechanism's credential, a malformed one, one with
//! too few iterations); 0x20 and 0x40 pad the client-first / client-final
//! past `SCRAM_MESSAGE_BYTES_MAX`; 0x80 sends one more message afterwards.
//!
//! Must hold: no panic; a server-first only for a known user with its own
//! credential; success only when the client-final's proof is one the harness
//! computed from the password (never with `%X`), for the user looked up, with
//! the server signature a right server computes; honest exchanges succeed
//! exactly when they should; after the exchange every message is refused.

#![no_main]

use es_auth::scram::{ScramCredential, ScramMechanism, ScramServer, SCRAM_MESSAGE_BYTES_MAX};
use es_fuzz::scram::{self, FinalContext, Keys};
use libfuzzer_sys::arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lookup {
    Known,
    Nobody,
    OtherMechanism,
    Malformed,
    FewIterations,
}

impl Lookup {
    fn from_bits(bits: u8) -> Self {
        match bits & 7 {
            1 => Lookup::Nobody,
            2 => Lookup::OtherMechanism,
            3 => Lookup::Malformed,
            4 => Lookup::FewIterations,
            _ => Lookup::Known,
        }
    }

    /// What the lookup hands the server for `user`.
    fn credential(self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
        let other = match mechanism {
            ScramMechanism::Sha256 => ScramMechanism::Sha512,
            ScramMechanism::Sha512 => ScramMechanism::Sha256,
        };
        match self {
            Lookup::Known => scram::keys_of(user, mechanism).map(Keys::credential),
            Lookup::Nobody => None,
            Lookup::OtherMechanism => scram::keys_of(user, other).map(Keys::credential),
            Lookup::Malformed => scram::keys_of(user, mechanism).map(|k| {
                let mut c = k.credential();
                c.stored_key.pop();
                c
            }),
            Lookup::FewIterations => scram::keys_of(user, mechanism).map(|k| {
                let mut c = k.credential();
                c.iterations = scram::ITERATIONS / 2;
                c
            }),
        }
    }
}

/// Extends `msg` past the size the server accepts.
fn pad(msg: &mut Vec<u8>) {
    let len = msg.len().max(SCRAM_MESSAGE_BYTES_MAX + 1);
    msg.resize(len, b'a');
}

/// The server-first message for `keys` must be `r=<client nonce><server
/// nonce>,s=<salt>,i=4096`.
fn check_server_first(client_first: &[u8], server_first: &[u8], keys: &Keys) {
    let text = String::from_utf8_lossy(server_first);
    let expected_tail = format!(
        ",s={},i={}",
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &keys.salt),
        scram::ITERATIONS
    );
    assert!(text.starts_with("r="), "server-first {text:?}");
    assert!(text.ends_with(&expected_tail), "server-first {text:?}");
    let nonce = scram::field(server_first, b"r=").unwrap_or_default();
    let (_, bare) = scram::split_gs2(client_first);
    if let Some(client_nonce) = scram::field(bare, b"r=") {
        assert!(
            nonce.starts_with(client_nonce) && nonce.len() > client_nonce.len(),
            "server-first nonce {text:?} does not extend the client's"
        );
    }
}

/// After the exchange the server takes nothing more, and asks for no credential.
fn check_closed(server: &mut ScramServer, first_next: bool) {
    if first_next {
        let mut looked_up = false;
        let r = server.client_first(b"n,,n=user,r=abc", |_| {
            looked_up = true;
            None
        });
        assert!(
            r.is_err() && !looked_up,
            "client-first accepted after the exchange"
        );
    } else {
        assert!(
            server.client_final(b"c=biws,r=abc,p=AAAA").is_err(),
            "client-final accepted after the exchange"
        );
    }
}

fn template_exchange(mechanism: ScramMechanism, lookup: Lookup, flags: u8, rest: &[u8]) {
    let split = rest.iter().position(|&b| b == 0xFF);
    let (first, final_template) = match split {
        Some(at) => (&rest[..at], &rest[at + 1..]),
        None => (rest, &[][..]),
    };
    let mut first = first.to_vec();
    if flags & 0x20 != 0 {
        pad(&mut first);
    }
    let mut server = ScramServer::new(mechanism);
    let mut looked_up: Vec<String> = Vec::new();
    let server_first = server.client_first(&first, |user| {
        looked_up.push(user.to_string());
        lookup.credential(user, mechanism)
    });
    es_fuzz::trace!(
        "client-first {:?} -> {:?}",
        String::from_utf8_lossy(&first),
        server_first
            .as_ref()
            .map(|m| String::from_utf8_lossy(m).into_owned())
    );
    assert!(looked_up.len() <= 1, "credential looked up twice");
    assert!(server.started() && !server.is_complete());
    let keys = match &server_first {
        Ok(server_first) => {
            assert!(first.len() <= SCRAM_MESSAGE_BYTES_MAX);
            assert_eq!(
                lookup,
                Lookup::Known,
                "server-first with an unusable credential"
            );
            let user = looked_up.first().expect("server-first without a lookup");
            let keys = scram::keys_of(user, mechanism).expect("server-first for an unknown user");
            check_server_first(&first, server_first, keys);
            Some(keys)
        }
        Err(_) => None,
    };
    let server_first_bytes = server_first.as_deref().unwrap_or_default();
    let rendered = scram::render_final(
        final_template,
        FinalContext {
            client_first: &first,
            server_first: server_first_bytes,
            keys,
        },
    );
    let mut last = rendered.message;
    if flags & 0x40 != 0 {
        pad(&mut last);
    }
    let result = server.client_final(&last);
    es_fuzz::trace!(
        "client-final {:?} -> {:?}",
        String::from_utf8_lossy(&last),
        result
            .as_ref()
            .map(|(m, user)| (String::from_utf8_lossy(m).into_owned(), user))
    );
    match result {
        Ok((server_final, user)) => {
            assert!(server.is_complete());
            let keys = keys.expect("client-final accepted after a failed client-first");
            let sent = scram::proof_of(&last);
            let proof = rendered
                .proofs
                .iter()
                .find(|p| Some(&p.bytes) == sent.as_ref())
                .unwrap_or_else(|| {
                    panic!(
                        "authenticated without a proof computed from the password: {:?}",
                        String::from_utf8_lossy(&last)
                    )
                });
            assert_eq!(user, keys.user, "authenticated as another user");
            assert_eq!(
                server_final,
                proof.keys.server_final(&proof.auth_message),
                "wrong server signature"
            );
        }
        Err(_) => assert!(!server.is_complete()),
    }
    if flags & 0x80 != 0 {
        check_closed(&mut server, rest.len().is_multiple_of(2));
    }
}

/// Printable ASCII without `,` (RFC 5802's nonce characters).
fn nonce_char(b: u8) -> u8 {
    let c = 0x21 + b % 94;
    if c == b',' {
        b'~'
    } else {
        c
    }
}

fn honest_exchange(mechanism: ScramMechanism, lookup: Lookup, flags: u8, rest: &[u8]) {
    let mut u = Unstructured::new(rest);
    let choice: u8 = u.arbitrary().unwrap_or(0);
    let users = ["user", "alice,x=y"];
    let user = users[usize::from(choice & 1)];
    let with_authzid = choice & 2 != 0;
    let corrupt = choice & 4 != 0;
    let extension_count = usize::from((choice >> 4) & 3);
    let nonce_len = 1 + usize::from(u.arbitrary::<u8>().unwrap_or(0) % 32);
    let nonce: Vec<u8> = (0..nonce_len)
        .map(|_| nonce_char(u.arbitrary().unwrap_or(0)))
        .collect();
    let nonce = String::from_utf8(nonce).expect("ASCII");
    let name = scram::saslname(user);
    let gs2 = if with_authzid {
        format!("n,a={name},")
    } else {
        "n,,".to_string()
    };
    let mut bare = format!("n={name},r={nonce}");
    for key in ["ext", "abc", "Foo"].iter().take(extension_count) {
        let value_len = 1 + usize::from(u.arbitrary::<u8>().unwrap_or(0) % 8);
        let value: String = (0..value_len)
            .map(|_| char::from(nonce_char(u.arbitrary().unwrap_or(0))))
            .collect();
        bare.push_str(&format!(",{key}={value}"));
    }
    let mut first = format!("{gs2}{bare}").into_bytes();
    if flags & 0x20 != 0 {
        pad(&mut first);
    }
    // Kafka compares the still-escaped authzid with the decoded username.
    let authzid_ok = !with_authzid || name == user;
    let first_ok = lookup == Lookup::Known && flags & 0x20 == 0 && authzid_ok;

    let mut server = ScramServer::new(mechanism);
    let result = server.client_first(&first, |u| lookup.credential(u, mechanism));
    assert_eq!(
        result.is_ok(),
        first_ok,
        "honest client-first {:?}: {result:?}",
        String::from_utf8_lossy(&first)
    );
    let server_first = result.unwrap_or_default();
    let keys = scram::keys_of(user, mechanism).expect("known user");
    let combined = String::from_utf8_lossy(scram::field(&server_first, b"r=").unwrap_or_default())
        .into_owned();
    let without_proof = format!(
        "c={},r={combined}",
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, gs2.as_bytes())
    );
    let mut auth_message = bare.clone().into_bytes();
    auth_message.push(b',');
    auth_message.extend_from_slice(&server_first);
    auth_message.push(b',');
    auth_message.extend_from_slice(without_proof.as_bytes());
    let mut proof = keys.proof(&auth_message);
    if corrupt {
        let bit = usize::from(u.arbitrary::<u16>().unwrap_or(0)) % (proof.len() * 8);
        proof[bit / 8] ^= 1 << (bit % 8);
    }
    let mut last = format!(
        "{without_proof},p={}",
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &proof)
    )
    .into_bytes();
    if flags & 0x40 != 0 {
        pad(&mut last);
    }
    let final_ok = first_ok && !corrupt && flags & 0x40 == 0;
    let result = server.client_final(&last);
    es_fuzz::trace!(
        "honest exchange: {:?} then {:?} -> {:?}",
        String::from_utf8_lossy(&first),
        String::from_utf8_lossy(&last),
        result.as_ref().map(|(_, user)| user)
    );
    assert_eq!(
        result.is_ok(),
        final_ok,
        "honest client-final {:?}: {result:?}",
        String::from_utf8_lossy(&last)
    );
    assert_eq!(server.is_complete(), final_ok);
    if let Ok((server_final, authenticated)) = result {
        assert_eq!(authenticated, user);
        assert_eq!(
            server_final,
            keys.server_final(&auth_message),
            "wrong server signature"
        );
    }
    if flags & 0x80 != 0 {
        check_closed(&mut server, choice & 8 != 0);
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let mechanism = if flags & 1 == 0 {
        ScramMechanism::Sha256
    } else {
        ScramMechanism::Sha512
    };
    let lookup = Lookup::from_bits(flags >> 1);
    if flags & 0x10 != 0 {
        honest_exchange(mechanism, lookup, flags, rest);
    } else {
        template_exchange(mechanism, lookup, flags, rest);
    }
});
