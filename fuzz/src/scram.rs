//! The SCRAM users the targets know, and a SCRAM client (RFC 5802) written
//! with `hmac` and `sha2` rather than es-auth's code, so that the targets'
//! oracle does not share a bug with the server it checks.
//!
//! Users: `user` / `pencil` (RFC 7677's example) and `alice,x=y` /
//! `kafka-pässword` (the user of the Kafka 4.4 transcripts in es-auth's tests,
//! whose name needs SCRAM's `=2C` / `=3D` escapes). Each (user, mechanism) has
//! its own salt, so a server-first message names the credential it is for.
//! [`users`] checks the derivation against RFC 7677's proof and server
//! signature and against the StoredKeys of Kafka's transcripts.

use std::sync::OnceLock;

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
use base64::Engine;
use es_auth::scram::{ScramCredential, ScramMechanism};
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};

/// The iteration count of every known credential (Kafka's minimum).
pub const ITERATIONS: u32 = 4096;

/// What the harness knows of one user's credential for one mechanism.
#[derive(Debug, Clone)]
pub struct Keys {
    pub user: &'static str,
    pub mechanism: ScramMechanism,
    pub salt: Vec<u8>,
    pub client_key: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
}

impl Keys {
    /// What the server stores.
    pub fn credential(&self) -> ScramCredential {
        ScramCredential {
            mechanism: self.mechanism,
            salt: self.salt.clone(),
            stored_key: self.stored_key.clone(),
            server_key: self.server_key.clone(),
            iterations: ITERATIONS,
        }
    }

    /// ClientProof = ClientKey XOR HMAC(StoredKey, AuthMessage).
    pub fn proof(&self, auth_message: &[u8]) -> Vec<u8> {
        let signature = hmac(self.mechanism, &self.stored_key, auth_message);
        self.client_key
            .iter()
            .zip(&signature)
            .map(|(a, b)| a ^ b)
            .collect()
    }

    /// The server-final message a right server sends: `v=` + base64 of
    /// HMAC(ServerKey, AuthMessage).
    pub fn server_final(&self, auth_message: &[u8]) -> Vec<u8> {
        let signature = hmac(self.mechanism, &self.server_key, auth_message);
        format!("v={}", STANDARD.encode(signature)).into_bytes()
    }
}

pub fn hmac(mechanism: ScramMechanism, key: &[u8], data: &[u8]) -> Vec<u8> {
    match mechanism {
        ScramMechanism::Sha256 => {
            let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key");
            mac.update(data);
            mac.finalize().into_bytes().to_vec()
        }
        ScramMechanism::Sha512 => {
            let mut mac = Hmac::<Sha512>::new_from_slice(key).expect("HMAC takes any key");
            mac.update(data);
            mac.finalize().into_bytes().to_vec()
        }
    }
}

fn hash(mechanism: ScramMechanism, data: &[u8]) -> Vec<u8> {
    match mechanism {
        ScramMechanism::Sha256 => Sha256::digest(data).to_vec(),
        ScramMechanism::Sha512 => Sha512::digest(data).to_vec(),
    }
}

/// RFC 5802's Hi(): PBKDF2 with HMAC, one block, by the definition.
fn hi(mechanism: ScramMechanism, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
    let mut block = salt.to_vec();
    block.extend_from_slice(&1u32.to_be_bytes());
    let mut u = hmac(mechanism, password, &block);
    let mut out = u.clone();
    for _ in 1..iterations {
        u = hmac(mechanism, password, &u);
        for (o, x) in out.iter_mut().zip(&u) {
            *o ^= x;
        }
    }
    out
}

fn derive(user: &'static str, password: &str, mechanism: ScramMechanism, salt: Vec<u8>) -> Keys {
    let salted = hi(mechanism, password.as_bytes(), &salt, ITERATIONS);
    let client_key = hmac(mechanism, &salted, b"Client Key");
    let keys = Keys {
        user,
        mechanism,
        stored_key: hash(mechanism, &client_key),
        server_key: hmac(mechanism, &salted, b"Server Key"),
        client_key,
        salt,
    };
    // es-auth's derivation (AlterUserScramCredentials' path) agrees.
    let es =
        ScramCredential::from_salted_password(mechanism, keys.salt.clone(), &salted, ITERATIONS)
            .expect("es-auth credential");
    assert!(
        es == keys.credential(),
        "es-auth derives other keys for {user}"
    );
    keys
}

fn b64(text: &str) -> Vec<u8> {
    STANDARD.decode(text).expect("base64 constant")
}

/// Every known credential, derived once and checked against the RFC and
/// Kafka's transcripts.
pub fn users() -> &'static [Keys] {
    static USERS: OnceLock<Vec<Keys>> = OnceLock::new();
    USERS.get_or_init(|| {
        use ScramMechanism::{Sha256, Sha512};
        let all = vec![
            derive("user", "pencil", Sha256, b64("W22ZaJ0SNY7soEsUEjb6gQ==")),
            derive("user", "pencil", Sha512, b"es-fuzz: user, SCRAM-SHA-512".to_vec()),
            derive(
                "alice,x=y",
                "kafka-pässword",
                Sha256,
                b64("MWZrNjFvaGhjcmp0bThnZnpmazJrM3dmaWw="),
            ),
            derive(
                "alice,x=y",
                "kafka-pässword",
                Sha512,
                b64("eGY0dWJ1N291czF3em41M2xrNGJ0ZmQ3ag=="),
            ),
        ];
        // RFC 7677 section 3.
        let rfc_auth = b"n=user,r=rOprNGfwEbeRWgbNEkqO,\
r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,\
c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
        assert_eq!(
            STANDARD.encode(all[0].proof(rfc_auth)),
            "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        assert_eq!(
            all[0].server_final(rfc_auth),
            b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
        );
        // Kafka 4.4's StoredKeys for alice,x=y.
        assert_eq!(
            STANDARD.encode(&all[2].stored_key),
            "iSvSyBdA4Hc+NZez/k3gLF52W9gaN1N3IbB4Z0UmxFE="
        );
        assert_eq!(
            STANDARD.encode(&all[3].stored_key),
            "EzwaWe7mAduw32bc4IJIZK8Bie4Dzcshw9ySJfsMB9VwQVLfzDpGqw+3bqx9Vwb0THsCqH3SZbC/EEbivKdSpg=="
        );
        all
    })
}

/// The credential of `user` for `mechanism`, if the harness knows one.
pub fn keys_of(user: &str, mechanism: ScramMechanism) -> Option<&'static Keys> {
    users()
        .iter()
        .find(|k| k.user == user && k.mechanism == mechanism)
}

/// The credential whose salt a server-first message carries, if any.
pub fn keys_of_server_first(server_first: &[u8]) -> Option<&'static Keys> {
    let salt = field(server_first, b"s=")?;
    let salt = STANDARD.decode(salt).ok()?;
    users().iter().find(|k| k.salt == salt)
}

/// The value of the first `name` attribute (`r=`, `s=`, ...) of a
/// comma-separated SCRAM message.
pub fn field<'a>(msg: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    msg.split(|&b| b == b',')
        .find_map(|part| part.strip_prefix(name))
}

/// Kafka's escaping of a username into a saslname.
pub fn saslname(user: &str) -> String {
    user.replace('=', "=3D").replace(',', "=2C")
}

/// A client-first message split into its GS2 header (`n,,`, `n,a=x,`, up
/// to the second comma) and the bare message after it.
pub fn split_gs2(client_first: &[u8]) -> (&[u8], &[u8]) {
    let mut commas = client_first
        .iter()
        .enumerate()
        .filter(|(_, &b)| b == b',')
        .map(|(i, _)| i);
    match (commas.next(), commas.next()) {
        (Some(_), Some(second)) => client_first.split_at(second + 1),
        _ => (client_first, &[]),
    }
}

/// Java's `Base64.getDecoder()`, which ignores unused trailing bits (as the
/// server decodes proofs).
pub fn lenient_base64(text: &[u8]) -> Option<Vec<u8>> {
    const LENIENT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true),
    );
    LENIENT.decode(text).ok()
}

/// The proof a client-final message carries: what follows its last `,p=`.
pub fn proof_of(client_final: &[u8]) -> Option<Vec<u8>> {
    let at = client_final.windows(3).rposition(|w| w == b",p=")?;
    lenient_base64(&client_final[at + 3..])
}

/// One right proof the harness put in a message, with the AuthMessage it
/// signs.
#[derive(Debug, Clone)]
pub struct Proof {
    pub keys: &'static Keys,
    pub bytes: Vec<u8>,
    pub auth_message: Vec<u8>,
}

/// The exchange a client-final template is rendered in.
#[derive(Debug, Clone, Copy, Default)]
pub struct FinalContext<'a> {
    /// The client-first message as sent.
    pub client_first: &'a [u8],
    /// The server's answer to it.
    pub server_first: &'a [u8],
    /// The credential the proof is for; `None`: `%P` and `%X` become a
    /// proof of zeros.
    pub keys: Option<&'static Keys>,
}

/// A rendered client-final message and the right proofs in it.
#[derive(Debug, Default)]
pub struct Rendered {
    pub message: Vec<u8>,
    pub proofs: Vec<Proof>,
}

/// Replaces `%N`, `%C`, `%P` and `%X` in `template` (other placeholders are
/// left as they are). A proof signs RFC 5802's AuthMessage: the bare
/// client-first as sent, the server-first, and the client-final up to the
/// placeholder without its `,p=`.
pub fn render_final(template: &[u8], ctx: FinalContext<'_>) -> Rendered {
    let (gs2, bare) = split_gs2(ctx.client_first);
    let mut proofs = Vec::new();
    let message = crate::template::substitute(template, |letter, before| match letter {
        b'N' => Some(field(ctx.server_first, b"r=").unwrap_or_default().to_vec()),
        b'C' => Some(STANDARD.encode(gs2).into_bytes()),
        b'P' | b'X' => {
            let without_proof = before.strip_suffix(b",p=").unwrap_or(before);
            let Some(keys) = ctx.keys else {
                return Some(STANDARD.encode([0u8; 32]).into_bytes());
            };
            let mut auth_message = bare.to_vec();
            auth_message.push(b',');
            auth_message.extend_from_slice(ctx.server_first);
            auth_message.push(b',');
            auth_message.extend_from_slice(without_proof);
            let mut bytes = keys.proof(&auth_message);
            if letter == b'X' {
                let bit = (template.len() * 7 + before.len()) % (bytes.len() * 8);
                bytes[bit / 8] ^= 1 << (bit % 8);
            } else {
                proofs.push(Proof {
                    keys,
                    bytes: bytes.clone(),
                    auth_message,
                });
            }
            Some(STANDARD.encode(bytes).into_bytes())
        }
        _ => None,
    });
    Rendered { message, proofs }
}
