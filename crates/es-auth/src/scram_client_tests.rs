//! Tests of [`super`]: Kafka's own client's transcripts replayed byte for
//! byte, a round trip with es's server, and a hostile server refused.

use super::*;
use crate::scram::tests::KAFKA_TRANSCRIPTS;
use crate::scram::{ScramCredential, ScramServer};

const USER: &str = "alice,x=y";
const PASSWORD: &str = "kafka-pässword";

#[test]
fn kafka_client_transcripts_are_reproduced() {
    for (mech, _, _, _, [c1, s1, c2, s2]) in KAFKA_TRANSCRIPTS {
        let nonce = c1.rsplit("r=").next().expect("nonce");
        let mut c = ScramClient::with_nonce(*mech, USER, PASSWORD, nonce);
        assert_eq!(
            String::from_utf8(c.client_first().expect("first")).expect("utf8"),
            *c1
        );
        let last = c.client_final(s1.as_bytes()).expect("final");
        assert_eq!(String::from_utf8(last).expect("utf8"), *c2);
        c.verify_server_final(s2.as_bytes())
            .expect("server proved itself");
    }
}

#[test]
fn a_round_trip_with_es_s_server_authenticates_and_a_wrong_password_does_not() {
    for mech in [ScramMechanism::Sha256, ScramMechanism::Sha512] {
        let cred = ScramCredential::from_password(mech, PASSWORD, 4096).expect("cred");
        for (password, ok) in [(PASSWORD, true), ("wrong", false)] {
            let mut c = ScramClient::new(mech, USER, password);
            let mut s = ScramServer::new(mech);
            let first = s
                .client_first(&c.client_first().expect("first"), |u| {
                    (u == USER).then(|| cred.clone())
                })
                .expect("server first");
            let last = c.client_final(&first).expect("client final");
            match s.client_final(&last) {
                Ok((server_final, user)) => {
                    assert!(ok, "a wrong password got in");
                    assert_eq!(user, USER);
                    c.verify_server_final(&server_final).expect("verified");
                }
                Err(_) => assert!(!ok, "the right password was refused"),
            }
        }
    }
}

#[test]
fn a_hostile_server_is_refused() {
    let m = ScramMechanism::Sha256;
    let first = |c: &mut ScramClient| {
        c.client_first().expect("first");
    };
    let cases = [
        // The nonce does not extend the client's.
        "r=other,s=c2FsdA==,i=4096".to_string(),
        // The nonce is the client's alone.
        "r=abc,s=c2FsdA==,i=4096".to_string(),
        // Too few and too many iterations.
        "r=abcdef,s=c2FsdA==,i=1".to_string(),
        format!("r=abcdef,s=c2FsdA==,i={}", CLIENT_ITERATIONS_MAX + 1),
        // No or a bad salt.
        "r=abcdef,i=4096".to_string(),
        "r=abcdef,s=!!,i=4096".to_string(),
        // An error.
        "e=unknown-user".to_string(),
        // Too long.
        format!(
            "r=abcdef,s=c2FsdA==,i=4096,x={}",
            "y".repeat(SCRAM_MESSAGE_BYTES_MAX)
        ),
    ];
    for server_first in cases {
        let mut c = ScramClient::with_nonce(m, "u", "p", "abc");
        first(&mut c);
        assert!(
            c.client_final(server_first.as_bytes()).is_err(),
            "accepted {server_first:.60}"
        );
    }
    // A wrong server signature, and messages out of order.
    let mut c = ScramClient::with_nonce(m, "u", "p", "abc");
    first(&mut c);
    c.client_final(b"r=abcdef,s=c2FsdA==,i=4096")
        .expect("final");
    assert!(c.verify_server_final(b"v=AAAA").is_err());
    assert!(c.verify_server_final(b"v=AAAA").is_err(), "done");
    let mut c = ScramClient::with_nonce(m, "u", "p", "abc");
    assert!(c.client_final(b"r=abcdef,s=c2FsdA==,i=4096").is_err());
}
