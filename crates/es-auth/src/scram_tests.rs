//! Tests of [`super`]: RFC 7677's exchange, a SHA-512 round trip with a client
//! written here, and Kafka's failure cases and texts.

use super::*;
use proptest::prelude::*;

/// RFC 7677 section 3.
const RFC_CLIENT_FIRST: &str = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
const RFC_SERVER_NONCE: &str = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
const RFC_SERVER_FIRST: &str =
    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
const RFC_CLIENT_FINAL: &str = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
const RFC_SERVER_FINAL: &str = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

fn rfc_credential() -> ScramCredential {
    let mech = ScramMechanism::Sha256;
    let salt = STANDARD.decode("W22ZaJ0SNY7soEsUEjb6gQ==").expect("salt");
    let salted = mech.hi(b"pencil", &salt, 4096);
    ScramCredential::from_salted_password(mech, salt, &salted, 4096).expect("credential")
}

#[test]
fn rfc7677_exchange() {
    let mut server = ScramServer::with_server_nonce(ScramMechanism::Sha256, RFC_SERVER_NONCE);
    assert!(!server.started());
    let mut looked_up = None;
    let first = server
        .client_first(RFC_CLIENT_FIRST.as_bytes(), |user| {
            looked_up = Some(user.to_string());
            Some(rfc_credential())
        })
        .expect("client first");
    assert_eq!(looked_up.as_deref(), Some("user"));
    assert_eq!(String::from_utf8_lossy(&first), RFC_SERVER_FIRST);
    assert!(!server.is_complete());
    let (last, user) = server
        .client_final(RFC_CLIENT_FINAL.as_bytes())
        .expect("client final");
    assert_eq!(String::from_utf8_lossy(&last), RFC_SERVER_FINAL);
    assert_eq!(user, "user");
    assert!(server.is_complete());
    // Nothing is accepted after completion.
    let e = server
        .client_final(RFC_CLIENT_FINAL.as_bytes())
        .expect_err("complete");
    assert_eq!(
        e,
        ScramError::IllegalState("Unexpected challenge in Sasl server state COMPLETE".into())
    );
    let e = server
        .client_first(RFC_CLIENT_FIRST.as_bytes(), |_| Some(rfc_credential()))
        .expect_err("still done");
    assert!(matches!(e, ScramError::IllegalState(_)));
}

/// Exchanges between Kafka 4.4's own `ScramSaslClient` and `ScramSaslServer` (Java
/// 17), for user "alice,x=y" and password "kafka-pässword": (mechanism, salt,
/// StoredKey, ServerKey, client-first, server-first, client-final, server-final).
pub(crate) const KAFKA_TRANSCRIPTS: &[(ScramMechanism, &str, &str, &str, [&str; 4])] = &[
    (
        ScramMechanism::Sha256,
        "MWZrNjFvaGhjcmp0bThnZnpmazJrM3dmaWw=",
        "iSvSyBdA4Hc+NZez/k3gLF52W9gaN1N3IbB4Z0UmxFE=",
        "WEKl4a5fA5WaR08TQ+vB+u0tGxNZ1kutmjYI2Qngt3o=",
        [
            "n,,n=alice=2Cx=3Dy,r=x537nwlunhbdux4yezrwbrxe9",
            "r=x537nwlunhbdux4yezrwbrxe91ih5hgg49kk0a342115shnev1r,s=MWZrNjFvaGhjcmp0bThnZnpmazJrM3dmaWw=,i=4096",
            "c=biws,r=x537nwlunhbdux4yezrwbrxe91ih5hgg49kk0a342115shnev1r,p=H3f6gUxx/5BwFBS1RVpFe2dJIK4UkZOUqoVc7f3fqCM=",
            "v=38Q/MIX49y1dWSmHH5LmD/wqFzI0lFRuT9PTwX28olk=",
        ],
    ),
    (
        ScramMechanism::Sha512,
        "eGY0dWJ1N291czF3em41M2xrNGJ0ZmQ3ag==",
        "EzwaWe7mAduw32bc4IJIZK8Bie4Dzcshw9ySJfsMB9VwQVLfzDpGqw+3bqx9Vwb0THsCqH3SZbC/EEbivKdSpg==",
        "bl13InVN3VRimucSBH4JPRpUS7Rl14EbhgiEpsENsEGIH4aQp2Y/FDxWsb5L2qjk9C/JH7EomPKK97eeN6LYZQ==",
        [
            "n,,n=alice=2Cx=3Dy,r=bnm5va1t9clw6ecus2vsqvqr8",
            "r=bnm5va1t9clw6ecus2vsqvqr8or8oils7zhja7k9w9x4d4ndy9,s=eGY0dWJ1N291czF3em41M2xrNGJ0ZmQ3ag==,i=4096",
            "c=biws,r=bnm5va1t9clw6ecus2vsqvqr8or8oils7zhja7k9w9x4d4ndy9,p=afrNjf56bLkv69w664OJpU0jSZd4X4IxbgytPwddpF9X7DUx2UQnsHviliqeW/0gBQIb5MQ4QySoREPWpEjHQw==",
            "v=SUuIhnkjZZNL3AX2CHaUCwR2MYo7rRLcEMioubp3pB5joUGVU9GN6LbHx/xEiwQEls4X04wVkyegRZZITGxZCQ==",
        ],
    ),
];

#[test]
fn kafka_client_transcripts_replay() {
    for (mech, salt, stored, server_key, [c1, s1, c2, s2]) in KAFKA_TRANSCRIPTS {
        let salt = STANDARD.decode(salt).expect("salt");
        // Kafka's derivation from the password gives the same keys.
        let salted = mech.hi("kafka-pässword".as_bytes(), &salt, 4096);
        let cred = ScramCredential::from_salted_password(*mech, salt, &salted, 4096).expect("cred");
        assert_eq!(STANDARD.encode(&cred.stored_key), *stored);
        assert_eq!(STANDARD.encode(&cred.server_key), *server_key);
        let client_nonce = c1.rsplit("r=").next().expect("nonce");
        let server_nonce = s1
            .split(',')
            .next()
            .and_then(|r| r.strip_prefix("r="))
            .and_then(|r| r.strip_prefix(client_nonce))
            .expect("server nonce");
        let mut server = ScramServer::with_server_nonce(*mech, server_nonce);
        let mut user = String::new();
        let first = server
            .client_first(c1.as_bytes(), |u| {
                user = u.to_string();
                Some(cred.clone())
            })
            .expect("first");
        assert_eq!(user, "alice,x=y");
        assert_eq!(String::from_utf8_lossy(&first), *s1);
        let (last, name) = server.client_final(c2.as_bytes()).expect("final");
        assert_eq!(String::from_utf8_lossy(&last), *s2);
        assert_eq!(name, "alice,x=y");
    }
}

/// A SCRAM client, as Kafka's ScramSaslClient computes it.
struct Client {
    mechanism: ScramMechanism,
    password: String,
    gs2: String,
    bare: String,
}

impl Client {
    fn new(mechanism: ScramMechanism, user_saslname: &str, password: &str) -> Self {
        Self::with_header(
            mechanism,
            "n,,",
            &format!("n={user_saslname},r=clientnonce123"),
            password,
        )
    }

    fn with_header(mechanism: ScramMechanism, gs2: &str, bare: &str, password: &str) -> Self {
        Client {
            mechanism,
            password: password.into(),
            gs2: gs2.into(),
            bare: bare.into(),
        }
    }

    fn first(&self) -> Vec<u8> {
        format!("{}{}", self.gs2, self.bare).into_bytes()
    }

    /// The client-final message for `server_first`, and the server signature the
    /// client expects back.
    fn last(&self, server_first: &[u8], channel: &str) -> (Vec<u8>, String) {
        let server_first = String::from_utf8_lossy(server_first).into_owned();
        let mut nonce = "";
        let mut salt = Vec::new();
        let mut iterations = 0;
        for part in server_first.split(',') {
            if let Some(v) = part.strip_prefix("r=") {
                nonce = v;
            } else if let Some(v) = part.strip_prefix("s=") {
                salt = STANDARD.decode(v).expect("salt");
            } else if let Some(v) = part.strip_prefix("i=") {
                iterations = v.parse().expect("iterations");
            }
        }
        let m = self.mechanism;
        let salted = m.hi(self.password.as_bytes(), &salt, iterations);
        let client_key = m.hmac(&salted, &[b"Client Key"]).expect("hmac");
        let stored_key = m.hash(&client_key);
        let without_proof = format!("c={channel},r={nonce}");
        let auth = format!("{},{server_first},{without_proof}", self.bare);
        let signature = m.hmac(&stored_key, &[auth.as_bytes()]).expect("hmac");
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(a, b)| a ^ b)
            .collect();
        let server_key = m.hmac(&salted, &[b"Server Key"]).expect("hmac");
        let server_signature = m.hmac(&server_key, &[auth.as_bytes()]).expect("hmac");
        (
            format!("{without_proof},p={}", STANDARD.encode(proof)).into_bytes(),
            format!("v={}", STANDARD.encode(server_signature)),
        )
    }

    fn channel(&self) -> String {
        STANDARD.encode(&self.gs2)
    }
}

fn credential(mechanism: ScramMechanism, password: &str) -> ScramCredential {
    ScramCredential::from_password(mechanism, password, 4096).expect("credential")
}

/// A valid credential without the cost of Hi(), for the property tests.
fn cheap_credential(mechanism: ScramMechanism) -> ScramCredential {
    let salted = vec![7u8; mechanism.digest_bytes()];
    ScramCredential::from_salted_password(mechanism, b"salt".to_vec(), &salted, 4096)
        .expect("credential")
}

fn run(client: &Client, cred: &ScramCredential) -> Result<(Vec<u8>, String), ScramError> {
    let mut server = ScramServer::new(client.mechanism);
    let cred = cred.clone();
    let first = server.client_first(&client.first(), move |_| Some(cred))?;
    let (last, _) = client.last(&first, &client.channel());
    server.client_final(&last)
}

#[test]
fn sha512_round_trip() {
    let cred = credential(ScramMechanism::Sha512, "s3cret pässword");
    let client = Client::new(ScramMechanism::Sha512, "alice", "s3cret pässword");
    let mut server = ScramServer::new(ScramMechanism::Sha512);
    let first = server
        .client_first(&client.first(), |u| (u == "alice").then(|| cred.clone()))
        .expect("first");
    let text = String::from_utf8_lossy(&first).into_owned();
    assert!(text.starts_with("r=clientnonce123"), "{text}");
    let server_part = text
        .split(',')
        .next()
        .and_then(|r| r.strip_prefix("r=clientnonce123"))
        .expect("server nonce");
    assert!(!server_part.is_empty() && server_part.len() <= 26);
    assert!(server_part
        .bytes()
        .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase()));
    assert!(text.ends_with(",i=4096"));
    let (last, expected) = client.last(&first, &client.channel());
    let (reply, user) = server.client_final(&last).expect("final");
    assert_eq!(String::from_utf8_lossy(&reply), expected);
    assert_eq!(user, "alice");

    // With an authzid equal to the username, and an ignored extension.
    let client = Client::with_header(
        ScramMechanism::Sha512,
        "n,a=alice,",
        "n=alice,r=xyz,ext=1",
        "s3cret pässword",
    );
    assert_eq!(run(&client, &cred).expect("authzid").1, "alice");
}

#[test]
fn wrong_proof_fails_for_good() {
    let cred = credential(ScramMechanism::Sha256, "right");
    let client = Client::new(ScramMechanism::Sha256, "bob", "wrong");
    let e = run(&client, &cred).expect_err("wrong password");
    assert_eq!(e, ScramError::Sasl("Invalid client credentials".into()));
    assert!(!e.is_client_visible());
    assert_eq!(e.client_message(), None);
    assert_eq!(
        e.response_message(ScramMechanism::Sha256, false),
        "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
    );

    // A failed server stays failed, whatever comes next.
    let good = Client::new(ScramMechanism::Sha256, "bob", "right");
    let mut server = ScramServer::new(ScramMechanism::Sha256);
    let first = server
        .client_first(&good.first(), |_| Some(cred.clone()))
        .expect("first");
    let (mut last, _) = good.last(&first, &good.channel());
    let n = last.len();
    last[n - 3] ^= 1; // corrupt the proof
    assert!(server.client_final(&last).is_err());
    let (last, _) = good.last(&first, &good.channel());
    assert_eq!(
        server.client_final(&last),
        Err(ScramError::IllegalState(
            "Unexpected challenge in Sasl server state FAILED".into()
        ))
    );

    // A proof of the wrong length is a wrong proof.
    let mut server = ScramServer::new(ScramMechanism::Sha256);
    let first = server
        .client_first(&good.first(), |_| Some(cred.clone()))
        .expect("first");
    let nonce = String::from_utf8_lossy(&first)
        .split(',')
        .next()
        .map(str::to_string)
        .expect("r");
    let short = format!("c=biws,{nonce},p=AAAA");
    assert_eq!(
        server.client_final(short.as_bytes()),
        Err(ScramError::Sasl("Invalid client credentials".into()))
    );
}

#[test]
fn unknown_user_fails_at_client_first() {
    let mut server = ScramServer::new(ScramMechanism::Sha256);
    let e = server
        .client_first(b"n,,n=nobody,r=abc", |_| None)
        .expect_err("unknown");
    assert_eq!(
        e,
        ScramError::Sasl("Authentication failed: Invalid user credentials".into())
    );
    // A credential of the other mechanism does not count.
    let mut server = ScramServer::new(ScramMechanism::Sha256);
    let cred = credential(ScramMechanism::Sha512, "p");
    assert!(server
        .client_first(b"n,,n=u,r=abc", |_| Some(cred))
        .is_err());
}

#[test]
fn bad_nonce_and_channel_binding() {
    let cred = credential(ScramMechanism::Sha256, "pw");
    let client = Client::new(ScramMechanism::Sha256, "u", "pw");
    let mut server = ScramServer::new(ScramMechanism::Sha256);
    let first = server
        .client_first(&client.first(), |_| Some(cred.clone()))
        .expect("first");
    let forged = String::from_utf8_lossy(&first).replace("r=clientnonce123", "r=clientnonce124");
    let (last, _) = client.last(forged.as_bytes(), &client.channel());
    assert_eq!(
        server.client_final(&last),
        Err(ScramError::Sasl(
            "Invalid client nonce in the final client message.".into()
        ))
    );

    let mut server = ScramServer::new(ScramMechanism::Sha256);
    let first = server
        .client_first(&client.first(), |_| Some(cred.clone()))
        .expect("first");
    let (last, _) = client.last(&first, &STANDARD.encode("y,,"));
    assert_eq!(
        server.client_final(&last),
        Err(ScramError::Sasl(
            "Invalid channel binding in the final client message.".into()
        ))
    );
}

#[test]
fn gs2_headers_kafka_refuses() {
    let cred = credential(ScramMechanism::Sha256, "pw");
    for msg in [
        "y,,n=u,r=abc",
        "p=tls-unique,,n=u,r=abc",
        "n=u,r=abc",
        "n,,n=u",
        "n,,n=,r=abc",
        "n,,n=u,r=",
        "n,,n=u,r=a b",
        "n,,n=u,r=abc,",
        "n,,n=u,r=abc,1=x",
        "n,,n=u\u{e9},r=abc",
        "n,,n=u\0,r=abc",
        "n,a=,n=u,r=abc",
    ] {
        let mut server = ScramServer::new(ScramMechanism::Sha256);
        let e = server
            .client_first(msg.as_bytes(), |_| Some(cred.clone()))
            .expect_err(msg);
        assert_eq!(
            e,
            ScramError::Sasl(format!("Invalid SCRAM client first message format: {msg}"))
        );
    }
    // An authzid other than the username is refused, and Kafka shows the client why.
    let mut server = ScramServer::new(ScramMechanism::Sha256);
    let e = server
        .client_first(b"n,a=admin,n=u,r=abc", |_| Some(cred.clone()))
        .expect_err("authzid");
    assert!(e.is_client_visible());
    assert_eq!(
        e.response_message(ScramMechanism::Sha256, true),
        "Authentication failed: Client requested an authorization id that is different from username"
    );
    assert_eq!(e.client_message(), Some(e.to_string().as_str()));
    // ...but only once the user is known (Kafka looks the user up first).
    let mut server = ScramServer::new(ScramMechanism::Sha256);
    let e = server
        .client_first(b"n,a=admin,n=u,r=abc", |_| None)
        .expect_err("unknown");
    assert!(!e.is_client_visible());
}

#[test]
fn saslname_escapes() {
    let cred = credential(ScramMechanism::Sha256, "pw");
    let mut seen = String::new();
    let mut server = ScramServer::new(ScramMechanism::Sha256);
    server
        .client_first(b"n,,n=a=2Cb=3Dc,r=abc", |u| {
            seen = u.to_string();
            Some(cred.clone())
        })
        .expect("escaped");
    assert_eq!(seen, "a,b=c");
    // The full exchange signs the escaped form.
    let client = Client::new(ScramMechanism::Sha256, "a=2Cb=3Dc", "pw");
    assert_eq!(run(&client, &cred).expect("run").1, "a,b=c");
    for bad in [
        "n,,n=a=2Db,r=abc",
        "n,,n=a=b,r=abc",
        "n,,n=a=,r=abc",
        "n,,n=a,b,r=abc",
    ] {
        let mut server = ScramServer::new(ScramMechanism::Sha256);
        assert!(
            server
                .client_first(bad.as_bytes(), |_| Some(cred.clone()))
                .is_err(),
            "{bad}"
        );
    }
    // Kafka compares the raw authzid with the decoded name: an escaped authzid of a
    // name with a comma never matches.
    let mut server = ScramServer::new(ScramMechanism::Sha256);
    let e = server
        .client_first(b"n,a=a=2Cb,n=a=2Cb,r=abc", |_| Some(cred.clone()))
        .expect_err("kafka quirk");
    assert!(matches!(e, ScramError::Authentication(_)));
}

#[test]
fn delegation_tokens_are_refused() {
    let cred = credential(ScramMechanism::Sha256, "pw");
    for ext in ["tokenauth=true", "tokenauth=TRUE"] {
        let mut server = ScramServer::new(ScramMechanism::Sha256);
        let msg = format!("n,,n=tok,r=abc,{ext}");
        let e = server
            .client_first(msg.as_bytes(), |_| Some(cred.clone()))
            .expect_err(ext);
        assert_eq!(
            e,
            ScramError::Sasl("Token Authentication failed: Invalid tokenId : tok".into())
        );
    }
    let client = Client::with_header(
        ScramMechanism::Sha256,
        "n,,",
        "n=u,r=abc,tokenauth=false",
        "pw",
    );
    assert!(run(&client, &cred).is_ok());
    let many = format!("n,,n=u,r=abc{}", ",e=1".repeat(SCRAM_EXTENSIONS_MAX + 1));
    let mut server = ScramServer::new(ScramMechanism::Sha256);
    assert!(server
        .client_first(many.as_bytes(), |_| Some(cred.clone()))
        .is_err());
}

#[test]
fn kafka_rebuilds_the_bare_message() {
    let cred = credential(ScramMechanism::Sha256, "pw");
    // A reserved m= is dropped from what the server signs, so the proof fails.
    let client = Client::with_header(ScramMechanism::Sha256, "n,,", "m=x,n=u,r=abc", "pw");
    assert_eq!(
        run(&client, &cred),
        Err(ScramError::Sasl("Invalid client credentials".into()))
    );
    // Several extensions, signed in the order sent.
    let client = Client::with_header(ScramMechanism::Sha256, "n,,", "n=u,r=abc,z=1,a=2", "pw");
    assert!(run(&client, &cred).is_ok());
}

#[test]
fn repeated_extensions_merge() {
    let pairs = |v: &[(&str, &str)]| {
        v.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        dedupe_extensions(pairs(&[("z", "1"), ("a", "2"), ("z", "3")])),
        pairs(&[("z", "3"), ("a", "2")])
    );
    let cred = credential(ScramMechanism::Sha256, "pw");
    // The server signs "z=3,a=2" for a client that sent "z=1,a=2,z=3".
    let client = Client::with_header(ScramMechanism::Sha256, "n,,", "n=u,r=abc,z=3,a=2", "pw");
    let mut server = ScramServer::new(ScramMechanism::Sha256);
    let first = server
        .client_first(b"n,,n=u,r=abc,z=1,a=2,z=3", |_| Some(cred.clone()))
        .expect("first");
    let (last, _) = client.last(&first, &client.channel());
    assert!(server.client_final(&last).is_ok());
}

#[test]
fn iterations_below_kafkas_minimum_fail_at_login() {
    let mut cred = credential(ScramMechanism::Sha256, "pw");
    cred.iterations = 1000;
    let mut server = ScramServer::new(ScramMechanism::Sha256);
    let e = server
        .client_first(b"n,,n=u,r=abc", |_| Some(cred))
        .expect_err("weak");
    assert_eq!(
        e,
        ScramError::Sasl("Iterations 1000 is less than the minimum 4096 for SCRAM_SHA_256".into())
    );
    let mut cred = credential(ScramMechanism::Sha256, "pw");
    cred.stored_key.pop();
    let mut server = ScramServer::new(ScramMechanism::Sha256);
    let e = server
        .client_first(b"n,,n=u,r=abc", |_| Some(cred))
        .expect_err("malformed");
    assert_eq!(
        e,
        ScramError::Sasl("Authentication failed: Credentials could not be obtained".into())
    );
}

#[test]
fn mechanisms_and_alter_validation() {
    use ScramMechanism::*;
    assert_eq!(Sha256.name(), "SCRAM-SHA-256");
    assert_eq!(Sha512.to_string(), "SCRAM-SHA-512");
    assert_eq!(ScramMechanism::from_name("SCRAM-SHA-512"), Some(Sha512));
    assert_eq!(ScramMechanism::from_name("scram-sha-512"), None);
    assert_eq!((Sha256.type_id(), Sha512.type_id()), (1, 2));
    assert_eq!(ScramMechanism::from_type_id(0), None);
    assert_eq!(ScramMechanism::from_type_id(2), Some(Sha512));
    assert_eq!(
        (Sha256.min_iterations(), Sha512.max_iterations()),
        (4096, 16384)
    );

    assert_eq!(validate_upsertion("u", 1, 4096), Ok(Sha256));
    assert_eq!(validate_upsertion("u", 2, 16384), Ok(Sha512));
    let unacceptable = AlterCredentialError::UnacceptableCredential;
    assert_eq!(
        validate_upsertion("u", 1, 4095),
        Err(unacceptable(TOO_FEW_ITERATIONS))
    );
    assert_eq!(
        validate_upsertion("u", 1, 16385),
        Err(unacceptable(TOO_MANY_ITERATIONS))
    );
    assert_eq!(
        validate_upsertion("u", 1, -1),
        Err(unacceptable(TOO_FEW_ITERATIONS))
    );
    assert_eq!(
        validate_upsertion("", 1, 4096),
        Err(unacceptable(EMPTY_USERNAME))
    );
    assert_eq!(
        validate_upsertion("u", 3, 4096),
        Err(AlterCredentialError::UnsupportedSaslMechanism(
            UNKNOWN_MECHANISM
        ))
    );
    assert_eq!(
        validate_upsertion("u", 1, 4095).map_err(|e| e.to_string()),
        Err("Too few iterations".into())
    );
}

#[test]
fn credentials() {
    let mech = ScramMechanism::Sha256;
    let cred = credential(mech, "pencil");
    assert!(cred.salt.len() <= 26 && cred.salt.iter().all(|b| b.is_ascii_alphanumeric()));
    let salted = mech.hi(b"pencil", &cred.salt, 4096);
    let again = ScramCredential::from_salted_password(mech, cred.salt.clone(), &salted, 4096)
        .expect("same");
    assert_eq!(again, cred);
    assert_ne!(
        credential(mech, "pencil").salt,
        cred.salt,
        "fresh salt each time"
    );

    assert_eq!(
        ScramCredential::from_password(mech, "p", 4095),
        Err(ScramCredentialError::Iterations(TOO_FEW_ITERATIONS))
    );
    assert_eq!(
        ScramCredential::from_password(mech, "p", 16385),
        Err(ScramCredentialError::Iterations(TOO_MANY_ITERATIONS))
    );
    assert_eq!(
        ScramCredential::from_salted_password(mech, vec![1], &[], 4096),
        Err(ScramCredentialError::EmptyKey)
    );
    assert!(
        ScramCredential::from_salted_password(mech, vec![0; SALT_BYTES_MAX + 1], &[1], 4096)
            .is_err()
    );

    let json = serde_json::to_value(&cred).expect("ser");
    assert_eq!(json["mechanism"], "SCRAM-SHA-256");
    assert_eq!(json["iterations"], 4096);
    assert_eq!(json["stored_key"], STANDARD.encode(&cred.stored_key));
    let back: ScramCredential = serde_json::from_value(json).expect("de");
    assert_eq!(back, cred);
    let debug = format!("{cred:?}");
    assert!(debug.contains("[hidden]") && !debug.contains(&STANDARD.encode(&cred.stored_key)));
    let long = serde_json::json!({
        "mechanism": "SCRAM-SHA-256", "salt": "A".repeat(8192),
        "stored_key": "", "server_key": "", "iterations": 4096
    });
    assert!(serde_json::from_value::<ScramCredential>(long).is_err());
}

#[test]
fn oversized_messages_are_refused() {
    let cred = credential(ScramMechanism::Sha256, "pw");
    let big = format!("n,,n=u,r={}", "a".repeat(SCRAM_MESSAGE_BYTES_MAX));
    let mut server = ScramServer::new(ScramMechanism::Sha256);
    assert!(server
        .client_first(big.as_bytes(), |_| Some(cred.clone()))
        .is_err());
    let mut server = ScramServer::new(ScramMechanism::Sha256);
    server
        .client_first(b"n,,n=u,r=abc", |_| Some(cred.clone()))
        .expect("first");
    assert!(server
        .client_final(&vec![b'c'; SCRAM_MESSAGE_BYTES_MAX + 1])
        .is_err());
}

#[test]
fn random_strings_look_like_kafkas() {
    for _ in 0..100 {
        let s = secure_random_string();
        assert!(!s.is_empty() && s.len() <= 26, "{s}");
        assert!(s
            .bytes()
            .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase()));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    #[test]
    fn client_first_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let mut server = ScramServer::new(ScramMechanism::Sha256);
        let cred = cheap_credential(ScramMechanism::Sha256);
        let _ = server.client_first(&bytes, |_| Some(cred));
        let _ = server.client_final(&bytes);
    }

    #[test]
    fn client_final_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let mut server = ScramServer::with_server_nonce(ScramMechanism::Sha256, RFC_SERVER_NONCE);
        let cred = cheap_credential(ScramMechanism::Sha256);
        server.client_first(RFC_CLIENT_FIRST.as_bytes(), |_| Some(cred)).expect("first");
        prop_assert!(server.client_final(&bytes).is_err());
    }

    #[test]
    fn structured_client_final_never_panics(
        c in "[A-Za-z0-9+/=]{0,12}",
        r in "[!-~]{0,60}",
        p in "[A-Za-z0-9+/=]{0,90}",
    ) {
        let mut server = ScramServer::with_server_nonce(ScramMechanism::Sha256, RFC_SERVER_NONCE);
        let cred = cheap_credential(ScramMechanism::Sha256);
        server.client_first(RFC_CLIENT_FIRST.as_bytes(), |_| Some(cred)).expect("first");
        let msg = format!("c={c},r={r},p={p}");
        prop_assert!(server.client_final(msg.as_bytes()).is_err());
    }

    #[test]
    fn structured_client_first_never_panics(
        header in "(n|y|p=x),(a=[a-z=23CD]{0,6})?,",
        name in "[a-z=23CD,]{0,10}",
        rest in "[!-~]{0,30}",
    ) {
        let mut server = ScramServer::new(ScramMechanism::Sha512);
        let cred = cheap_credential(ScramMechanism::Sha512);
        let msg = format!("{header}n={name},r={rest}");
        let _ = server.client_first(msg.as_bytes(), |_| Some(cred));
    }
}
