//! Listeners with security, end to end against the real es-broker binary:
//! SASL_SSL with librdkafka (PLAIN on an API key), the SASL exchange as
//! Kafka runs it (what is served before authentication, unknown
//! mechanisms, failures answered after the delay, the pre-authentication
//! frame cap, re-authentication), SSL with client certificates, plaintext
//! clients refused on a TLS listener, and API keys created and revoked
//! beside a running broker.

mod admin_auth;
mod cluster_txn;
#[path = "../common/mod.rs"]
mod common;
mod keys_remote;
mod mirror_quotas;
mod pki;
mod registry_auth;
mod tls_alerts;

use std::io::Read;
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{client_config, Broker, ES_BROKER};
use es_auth::scram::ScramMechanism;
use es_test_support::process::rss_kib;
use es_test_support::wire::{read_frame, KafkaClient};
use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, ApiKey,
    ApiVersionsRequest, DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
    MetadataRequest, MetadataResponse, SaslAuthenticateRequest, SaslAuthenticateResponse,
    SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use pki::Pki;
use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};

const TIMEOUT: Duration = Duration::from_secs(30);

/// The errors librdkafka reports through its error callback.
#[derive(Clone, Default)]
struct ErrorLog(Arc<Mutex<Vec<(RDKafkaErrorCode, String)>>>);

impl ClientContext for ErrorLog {
    fn error(&self, error: KafkaError, reason: &str) {
        if let Some(code) = error.rdkafka_error_code() {
            self.0
                .lock()
                .expect("lock")
                .push((code, reason.to_string()));
        }
    }
}

impl ConsumerContext for ErrorLog {}

/// `es-broker keys create` on `data_dir`: (key id, secret).
fn create_key(data_dir: &Path, principal: &str) -> (String, String) {
    let out = Command::new(ES_BROKER)
        .args(["keys", "create", "--data-dir"])
        .arg(data_dir)
        .args(["--principal", principal])
        .output()
        .expect("run keys create");
    assert!(
        out.status.success(),
        "keys create: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8(out.stdout).expect("utf-8");
    let mut parts = line.split_whitespace();
    let id = parts.next().expect("key id").to_string();
    let secret = parts.next().expect("secret").to_string();
    assert!(parts.next().is_none(), "one line, KEY_ID SECRET: {line:?}");
    (id, secret)
}

fn keys(data_dir: &Path, args: &[&str]) -> String {
    let out = Command::new(ES_BROKER)
        .arg("keys")
        .arg(args[0])
        .arg("--data-dir")
        .arg(data_dir)
        .args(&args[1..])
        .output()
        .expect("run keys");
    assert!(
        out.status.success(),
        "keys {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// A raw connection that has sent ApiVersions and SaslHandshake v1 for
/// `mechanism`; returns it with the handshake's answer.
fn handshake(addr: &str, mechanism: &str) -> (KafkaClient, SaslHandshakeResponse) {
    let mut c = KafkaClient::connect(addr, "sasl-test");
    let _: kafka_protocol::messages::ApiVersionsResponse =
        c.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    let mut h = SaslHandshakeRequest::default();
    h.mechanism = StrBytes::from_string(mechanism.to_string());
    let r: SaslHandshakeResponse = c.call(ApiKey::SaslHandshake, 1, &h);
    (c, r)
}

fn plain(c: &mut KafkaClient, user: &str, password: &str) -> SaslAuthenticateResponse {
    let mut a = SaslAuthenticateRequest::default();
    a.auth_bytes = format!("\0{user}\0{password}").into_bytes().into();
    c.call(ApiKey::SaslAuthenticate, 2, &a)
}

/// Whether the broker closed `c` (end of stream, no frame).
fn closed(c: &mut KafkaClient) -> bool {
    read_frame(&mut c.stream).is_none()
}

fn metadata(c: &mut KafkaClient) -> MetadataResponse {
    c.call(ApiKey::Metadata, 12, &MetadataRequest::default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_ssl_plain_with_librdkafka() {
    let dir = tempfile::tempdir().expect("tmp");
    let data = dir.path().join("data");
    let pki = Pki::new(&dir.path().join("pki"));
    let (id, secret) = create_key(&data, "User:alice");
    let b = Broker::start(
        Path::new(ES_BROKER),
        &data,
        &[
            "--listener",
            "SASL_SSL://127.0.0.1:0",
            "--ssl-cert",
            pki.server_cert.to_str().expect("utf-8"),
            "--ssl-key",
            pki.server_key.to_str().expect("utf-8"),
        ],
    );
    let sasl = |user: &str, password: &str| {
        let mut c = client_config(&b.addr);
        c.set("security.protocol", "SASL_SSL")
            .set("sasl.mechanisms", "PLAIN")
            .set("sasl.username", user)
            .set("sasl.password", password)
            .set("ssl.ca.location", pki.ca.to_str().expect("utf-8"));
        c
    };
    let producer: FutureProducer = sasl(&id, &secret)
        .set("message.timeout.ms", "30000")
        .create()
        .expect("producer");
    for i in 0..50 {
        producer
            .send(
                FutureRecord::to("secure")
                    .key("k")
                    .payload(&format!("v{i}")),
                TIMEOUT,
            )
            .await
            .unwrap_or_else(|(e, _)| panic!("produce {i}: {e}"));
    }
    let consumer: BaseConsumer = sasl(&id, &secret)
        .set("group.id", "secure-readers")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("secure", 0, Offset::Beginning)
        .expect("tpl");
    consumer.assign(&tpl).expect("assign");
    let mut got = Vec::new();
    let deadline = Instant::now() + TIMEOUT;
    while got.len() < 50 && Instant::now() < deadline {
        if let Some(m) = consumer.poll(Duration::from_millis(200)) {
            let m = m.expect("message");
            got.push(String::from_utf8(m.payload().expect("payload").to_vec()).expect("utf-8"));
        }
    }
    let want: Vec<String> = (0..50).map(|i| format!("v{i}")).collect();
    assert_eq!(got, want);
    // Metadata names this listener's address, which the client reached.
    let md = consumer
        .fetch_metadata(Some("secure"), TIMEOUT)
        .expect("metadata");
    let broker = &md.brokers()[0];
    assert_eq!(format!("{}:{}", broker.host(), broker.port()), b.addr);
    // A wrong secret is refused, and librdkafka reports it as an
    // authentication failure.
    let errors = ErrorLog::default();
    let bad: BaseConsumer<ErrorLog> = sasl(&id, "not-the-secret")
        .create_with_context(errors.clone())
        .expect("client");
    assert!(
        bad.fetch_metadata(None, Duration::from_secs(5)).is_err(),
        "a wrong secret was served"
    );
    // Errors reach the callback as the client is polled.
    es_test_support::wait::eventually(TIMEOUT, "an authentication error", || {
        let _ = bad.poll(Duration::from_millis(100));
        let seen = errors.0.lock().expect("lock").clone();
        seen.iter()
            .any(|(code, reason)| {
                *code == RDKafkaErrorCode::Authentication
                    && reason.contains("Invalid username or password")
            })
            .then_some(())
    });
    b.stop();
}

#[test]
fn the_sasl_exchange_follows_kafka() {
    let dir = tempfile::tempdir().expect("tmp");
    let data = dir.path().join("data");
    let (alice, alice_secret) = create_key(&data, "User:alice");
    let (bob, bob_secret) = create_key(&data, "User:bob");
    let b = Broker::start(
        Path::new(ES_BROKER),
        &data,
        &[
            "--listener",
            "SASL_PLAINTEXT://127.0.0.1:0",
            "--listener",
            "REAUTH://127.0.0.1:0",
            "--listener-security-protocol-map",
            "SASL_PLAINTEXT:SASL_PLAINTEXT,REAUTH:SASL_PLAINTEXT",
            "--set",
            "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512",
            "--set",
            "listener.name.reauth.connections.max.reauth.ms=1500",
        ],
    );
    let addr = b.listener_addr("SASL_PLAINTEXT");

    // Before authentication only ApiVersions and SaslHandshake are served.
    let mut c = KafkaClient::connect(&addr, "early");
    c.send(ApiKey::Metadata, 12, &MetadataRequest::default());
    assert!(closed(&mut c), "Metadata before authentication was served");

    // An unknown mechanism: the enabled ones are listed, then the
    // connection closes.
    let (mut c, r) = handshake(&addr, "GSSAPI");
    assert_eq!(r.error_code, 33, "UNSUPPORTED_SASL_MECHANISM");
    let listed: Vec<String> = r.mechanisms.iter().map(|m| m.to_string()).collect();
    assert_eq!(listed, vec!["PLAIN", "SCRAM-SHA-512"]);
    assert!(closed(&mut c));

    // A wrong secret: SASL_AUTHENTICATION_FAILED, answered no sooner than
    // connection.failed.authentication.delay.ms (100), then closed.
    let (mut c, r) = handshake(&addr, "PLAIN");
    assert_eq!(r.error_code, 0);
    let t0 = Instant::now();
    let r = plain(&mut c, &alice, "wrong");
    assert!(
        t0.elapsed() >= Duration::from_millis(100),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(r.error_code, 58, "SASL_AUTHENTICATION_FAILED");
    assert_eq!(
        r.error_message.as_deref(),
        Some("Authentication failed: Invalid username or password")
    );
    assert!(closed(&mut c));
    // An unknown key id reads the same.
    let (mut c, _) = handshake(&addr, "PLAIN");
    let r = plain(&mut c, "NOSUCHKEY", &alice_secret);
    assert_eq!(r.error_code, 58);
    assert!(closed(&mut c));

    // The right secret: served from then on; no session lifetime here.
    let (mut c, _) = handshake(&addr, "PLAIN");
    let r = plain(&mut c, &alice, &alice_secret);
    assert_eq!((r.error_code, r.session_lifetime_ms), (0, 0));
    let md = metadata(&mut c);
    assert_eq!(md.brokers.len(), 1);
    assert_eq!(
        format!("{}:{}", md.brokers[0].host, md.brokers[0].port),
        addr,
        "the endpoint of the listener the client came in on"
    );
    // SaslAuthenticate after authentication is ILLEGAL_SASL_STATE.
    let r = plain(&mut c, &alice, &alice_secret);
    assert_eq!(r.error_code, 34, "ILLEGAL_SASL_STATE");

    // Frames before authentication are capped at sasl.server.max.receive.size.
    let mut c = KafkaClient::connect(&addr, "big");
    let mut frame = (600 * 1024i32).to_be_bytes().to_vec();
    frame.extend(std::iter::repeat_n(0u8, 1024));
    std::io::Write::write_all(&mut c.stream, &frame).expect("send");
    assert!(
        closed(&mut c),
        "a 600 KiB frame before authentication was read"
    );

    // Re-authentication on the REAUTH listener (connections.max.reauth.ms
    // 1500): the lifetime is announced, the same principal may
    // re-authenticate, another may not, and an expired session is closed.
    let reauth = b.listener_addr("REAUTH");
    let (mut c, _) = handshake(&reauth, "PLAIN");
    let r = plain(&mut c, &alice, &alice_secret);
    assert_eq!((r.error_code, r.session_lifetime_ms), (0, 1500));
    let mut h = SaslHandshakeRequest::default();
    h.mechanism = StrBytes::from_static_str("PLAIN");
    let r: SaslHandshakeResponse = c.call(ApiKey::SaslHandshake, 1, &h);
    assert_eq!(r.error_code, 0);
    let r = plain(&mut c, &alice, &alice_secret);
    assert_eq!((r.error_code, r.session_lifetime_ms), (0, 1500));
    metadata(&mut c);
    let r: SaslHandshakeResponse = c.call(ApiKey::SaslHandshake, 1, &h);
    assert_eq!(r.error_code, 0);
    let r = plain(&mut c, &bob, &bob_secret);
    assert_eq!(r.error_code, 58);
    assert!(
        r.error_message.as_deref().is_some_and(|m| m.starts_with(
            "Cannot change principals during re-authentication from User.alice: User.bob"
        )),
        "{:?}",
        r.error_message
    );
    assert!(closed(&mut c));
    // Another mechanism cannot re-authenticate a PLAIN session.
    let (mut c, _) = handshake(&reauth, "PLAIN");
    assert_eq!(plain(&mut c, &alice, &alice_secret).error_code, 0);
    let mut scram = SaslHandshakeRequest::default();
    scram.mechanism = StrBytes::from_static_str("SCRAM-SHA-512");
    let r: SaslHandshakeResponse = c.call(ApiKey::SaslHandshake, 1, &scram);
    assert_eq!(r.error_code, 0);
    let mut a = SaslAuthenticateRequest::default();
    a.auth_bytes = b"n,,n=alice,r=abcdefgh".to_vec().into();
    c.send(ApiKey::SaslAuthenticate, 2, &a);
    assert!(closed(&mut c));
    // A session past its lifetime is closed at its next request.
    let (mut c, _) = handshake(&reauth, "PLAIN");
    assert_eq!(plain(&mut c, &alice, &alice_secret).error_code, 0);
    let expiry = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < expiry + Duration::from_millis(50) {
        std::thread::sleep(Duration::from_millis(50));
    }
    c.send(ApiKey::Metadata, 12, &MetadataRequest::default());
    assert!(
        closed(&mut c),
        "a request after the session expired was served"
    );
    b.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ssl_with_client_certificates_and_plaintext_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    let pki = Pki::new(&dir.path().join("pki"));
    let (cert, key) = pki.client(
        "alice",
        &[
            (rcgen::DnType::CommonName, "alice"),
            (rcgen::DnType::OrganizationalUnitName, "es-test"),
        ],
    );
    let b = Broker::start(
        Path::new(ES_BROKER),
        dir.path().join("data"),
        &[
            "--listener",
            "SSL://127.0.0.1:0",
            "--ssl-cert",
            pki.server_cert.to_str().expect("utf-8"),
            "--ssl-key",
            pki.server_key.to_str().expect("utf-8"),
            "--ssl-ca",
            pki.ca.to_str().expect("utf-8"),
            "--set",
            "ssl.client.auth=required",
            "--set",
            "ssl.principal.mapping.rules=RULE:^CN=([^,]+),.*$/$1/L,DEFAULT",
        ],
    );
    let ssl = |with_cert: bool| {
        let mut c = client_config(&b.addr);
        c.set("security.protocol", "SSL")
            .set("ssl.ca.location", pki.ca.to_str().expect("utf-8"));
        if with_cert {
            c.set("ssl.certificate.location", cert.to_str().expect("utf-8"))
                .set("ssl.key.location", key.to_str().expect("utf-8"));
        }
        c
    };
    let with: BaseConsumer = ssl(true).create().expect("client");
    let md = with
        .fetch_metadata(None, TIMEOUT)
        .expect("metadata with a client certificate");
    assert_eq!(md.brokers().len(), 1);
    let without: BaseConsumer = ssl(false).create().expect("client");
    assert!(
        without
            .fetch_metadata(None, Duration::from_secs(10))
            .is_err(),
        "a client without a certificate was served with ssl.client.auth=required"
    );

    // A plaintext client on the TLS listener: refused every time, never
    // answered in Kafka's protocol, and the broker's memory stays flat.
    let mut probe = ApiVersionsRequest::default();
    probe.client_software_name = StrBytes::from_static_str("probe");
    let frame = es_test_support::wire::request_frame(ApiKey::ApiVersions, 3, 1, "probe", &probe);
    let before = rss_kib(b.pid());
    let mut accepted = 0;
    for _ in 0..1000 {
        let mut s = TcpStream::connect(&b.addr).expect("connect");
        s.set_read_timeout(Some(TIMEOUT)).expect("timeout");
        std::io::Write::write_all(&mut s, &frame).expect("send");
        let mut got = Vec::new();
        let _ = s.read_to_end(&mut got);
        // A TLS alert record (type 21) at most; a Kafka answer would start
        // with its size and correlation id 1.
        if got.len() >= 8 && got[4..8] == 1i32.to_be_bytes() {
            accepted += 1;
        }
        assert!(got.is_empty() || got[0] == 21, "not a TLS alert: {got:?}");
    }
    let after = rss_kib(b.pid());
    assert_eq!(accepted, 0);
    assert!(
        after.saturating_sub(before) < 64 * 1024,
        "RSS grew from {before} KiB to {after} KiB over 1,000 plaintext probes"
    );
    // Still serving TLS clients.
    with.fetch_metadata(None, TIMEOUT)
        .expect("metadata after the probes");
    b.stop();
}

#[test]
fn api_keys_are_hashed_and_revocations_apply_without_a_restart() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tmp");
    let data = dir.path().join("data");
    let (alice, alice_secret) = create_key(&data, "User:alice");
    let (ops, _) = create_key(&data, "User:ops");
    assert_ne!(alice, ops);
    let file = data.join("api_keys.json");
    let text = std::fs::read_to_string(&file).expect("api_keys.json");
    assert!(!text.contains(&alice_secret), "a secret is stored in clear");
    assert!(text.contains("$argon2id$"), "no argon2id hash: {text}");
    let mode = std::fs::metadata(&file).expect("meta").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let listed = keys(&data, &["list"]);
    assert!(
        listed.contains(&alice) && listed.contains("User:alice"),
        "{listed}"
    );
    assert!(
        listed.contains(&ops) && listed.contains("User:ops"),
        "{listed}"
    );
    assert!(!listed.contains(&alice_secret));

    let b = Broker::start(
        Path::new(ES_BROKER),
        &data,
        &["--listener", "SASL_PLAINTEXT://127.0.0.1:0"],
    );
    let (mut c, _) = handshake(&b.addr, "PLAIN");
    assert_eq!(plain(&mut c, &alice, &alice_secret).error_code, 0);
    // A key created while the broker runs is known at once.
    let (carol, carol_secret) = create_key(&data, "User:carol");
    let (mut c2, _) = handshake(&b.addr, "PLAIN");
    assert_eq!(plain(&mut c2, &carol, &carol_secret).error_code, 0);
    // Revoked: refused from the next authentication on.
    keys(&data, &["revoke", &alice]);
    assert!(keys(&data, &["list"])
        .lines()
        .any(|l| l.contains(&alice) && l.contains("revoked")));
    let (mut c3, _) = handshake(&b.addr, "PLAIN");
    assert_eq!(plain(&mut c3, &alice, &alice_secret).error_code, 58);
    b.stop();
}

/// AlterUserScramCredentials as `kafka-configs.sh --add-config
/// 'SCRAM-SHA-512=[iterations=N,password=P]'` sends it.
fn upsert_scram(
    c: &mut KafkaClient,
    user: &str,
    mechanism: ScramMechanism,
    password: &str,
    iterations: i32,
) -> AlterUserScramCredentialsResponse {
    let salt = b"a-test-salt-of-some-length".to_vec();
    let mut u = ScramCredentialUpsertion::default();
    u.name = StrBytes::from_string(user.to_string());
    u.mechanism = mechanism.type_id();
    u.iterations = iterations;
    u.salted_password = mechanism
        .salted_password(
            password.as_bytes(),
            &salt,
            u32::try_from(iterations.max(1)).unwrap_or(1),
        )
        .into();
    u.salt = salt.into();
    let mut req = AlterUserScramCredentialsRequest::default();
    req.upsertions.push(u);
    c.call(ApiKey::AlterUserScramCredentials, 0, &req)
}

fn describe_scram(
    c: &mut KafkaClient,
    users: Option<&[&str]>,
) -> DescribeUserScramCredentialsResponse {
    let mut req = DescribeUserScramCredentialsRequest::default();
    req.users = users.map(|us| {
        us.iter()
            .map(|u| {
                let mut n = UserName::default();
                n.name = StrBytes::from_string(u.to_string());
                n
            })
            .collect()
    });
    c.call(ApiKey::DescribeUserScramCredentials, 0, &req)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scram_credentials_are_managed_as_kip_554_and_authenticate() {
    let dir = tempfile::tempdir().expect("tmp");
    let data = dir.path().join("data");
    let args = [
        "--listener",
        "PLAINTEXT://127.0.0.1:0",
        "--listener",
        "SASL_PLAINTEXT://127.0.0.1:0",
    ];
    let b = Broker::start(Path::new(ES_BROKER), &data, &args);
    let admin_addr = b.listener_addr("PLAINTEXT");
    let sasl_addr = b.listener_addr("SASL_PLAINTEXT");
    let mut admin = KafkaClient::connect(&admin_addr, "admin");

    let r = upsert_scram(
        &mut admin,
        "alice",
        ScramMechanism::Sha512,
        "alice-secret",
        4096,
    );
    assert_eq!(r.results.len(), 1);
    assert_eq!(
        (r.results[0].user.as_str(), r.results[0].error_code),
        ("alice", 0)
    );
    let r = upsert_scram(
        &mut admin,
        "alice",
        ScramMechanism::Sha256,
        "alice-256",
        8192,
    );
    assert_eq!(r.results[0].error_code, 0);
    // Kafka's refusals, with its codes and messages.
    let r = upsert_scram(&mut admin, "bob", ScramMechanism::Sha512, "pw", 1000);
    assert_eq!(r.results[0].error_code, 93, "UNACCEPTABLE_CREDENTIAL");
    assert_eq!(
        r.results[0].error_message.as_deref(),
        Some("Too few iterations")
    );
    let r = upsert_scram(&mut admin, "bob", ScramMechanism::Sha512, "pw", 20_000);
    assert_eq!(
        r.results[0].error_message.as_deref(),
        Some("Too many iterations")
    );
    let mut twice = AlterUserScramCredentialsRequest::default();
    for m in [ScramMechanism::Sha256, ScramMechanism::Sha512] {
        let mut u = ScramCredentialUpsertion::default();
        u.name = StrBytes::from_static_str("carol");
        u.mechanism = m.type_id();
        u.iterations = 4096;
        u.salt = b"salt".to_vec().into();
        u.salted_password = m.salted_password(b"pw", b"salt", 4096).into();
        twice.upsertions.push(u);
    }
    let r: AlterUserScramCredentialsResponse =
        admin.call(ApiKey::AlterUserScramCredentials, 0, &twice);
    assert_eq!(r.results.len(), 1);
    assert_eq!(r.results[0].error_code, 92, "DUPLICATE_RESOURCE");
    assert_eq!(
        r.results[0].error_message.as_deref(),
        Some("A user credential cannot be altered twice in the same request")
    );
    let mut delete = AlterUserScramCredentialsRequest::default();
    let mut d = ScramCredentialDeletion::default();
    d.name = StrBytes::from_static_str("nobody");
    d.mechanism = ScramMechanism::Sha256.type_id();
    delete.deletions.push(d);
    let r: AlterUserScramCredentialsResponse =
        admin.call(ApiKey::AlterUserScramCredentials, 0, &delete);
    assert_eq!(r.results[0].error_code, 91, "RESOURCE_NOT_FOUND");

    // Describe: mechanisms and iterations, never keys.
    let d = describe_scram(&mut admin, None);
    assert_eq!(d.error_code, 0);
    assert_eq!(d.results.len(), 1);
    let mut infos: Vec<(i8, i32)> = d.results[0]
        .credential_infos
        .iter()
        .map(|i| (i.mechanism, i.iterations))
        .collect();
    infos.sort();
    assert_eq!(infos, vec![(1, 8192), (2, 4096)]);
    let d = describe_scram(&mut admin, Some(&["alice", "zed", "alice"]));
    let by_user: Vec<(String, i16, Option<String>)> = d
        .results
        .iter()
        .map(|r| {
            (
                r.user.to_string(),
                r.error_code,
                r.error_message.as_ref().map(|m| m.to_string()),
            )
        })
        .collect();
    assert!(by_user.contains(&(
        "alice".into(),
        92,
        Some(
            "Cannot describe SCRAM credentials for the same user twice in a single request: alice"
                .into()
        )
    )));
    assert!(by_user.contains(&(
        "zed".into(),
        91,
        Some("Attempt to describe a user credential that does not exist: zed".into())
    )));

    // librdkafka authenticates with SCRAM-SHA-512 and SHA-256; a wrong
    // password is refused.
    let scram = |mech: &str, password: &str| {
        let mut c = client_config(&sasl_addr);
        c.set("security.protocol", "SASL_PLAINTEXT")
            .set("sasl.mechanisms", mech)
            .set("sasl.username", "alice")
            .set("sasl.password", password);
        c
    };
    for (mech, pw) in [
        ("SCRAM-SHA-512", "alice-secret"),
        ("SCRAM-SHA-256", "alice-256"),
    ] {
        let ok: BaseConsumer = scram(mech, pw).create().expect("client");
        ok.fetch_metadata(None, TIMEOUT)
            .unwrap_or_else(|e| panic!("{mech}: {e}"));
    }
    let errors = ErrorLog::default();
    let bad: BaseConsumer<ErrorLog> = scram("SCRAM-SHA-512", "wrong")
        .create_with_context(errors.clone())
        .expect("client");
    assert!(bad.fetch_metadata(None, Duration::from_secs(5)).is_err());
    es_test_support::wait::eventually(TIMEOUT, "an authentication error", || {
        let _ = bad.poll(Duration::from_millis(100));
        let seen = errors.0.lock().expect("lock").clone();
        seen.iter()
            .any(|(code, _)| *code == RDKafkaErrorCode::Authentication)
            .then_some(())
    });
    drop(admin);
    b.stop();

    // The credentials are in the metadata log: they survive a restart.
    let b = Broker::start(Path::new(ES_BROKER), &data, &args);
    let mut admin = KafkaClient::connect(&b.listener_addr("PLAINTEXT"), "admin");
    assert_eq!(
        describe_scram(&mut admin, Some(&["alice"])).results[0]
            .credential_infos
            .len(),
        2
    );
    let mut c = client_config(&b.listener_addr("SASL_PLAINTEXT"));
    c.set("security.protocol", "SASL_PLAINTEXT")
        .set("sasl.mechanisms", "SCRAM-SHA-512")
        .set("sasl.username", "alice")
        .set("sasl.password", "alice-secret");
    let ok: BaseConsumer = c.create().expect("client");
    ok.fetch_metadata(None, TIMEOUT)
        .expect("SCRAM after a restart");
    b.stop();
}

#[test]
fn floods_of_half_open_and_unauthenticated_connections_cost_little() {
    let dir = tempfile::tempdir().expect("tmp");
    let data = dir.path().join("data");
    let pki = Pki::new(&dir.path().join("pki"));
    let (id, secret) = create_key(&data, "User:alice");
    let b = Broker::start(
        Path::new(ES_BROKER),
        &data,
        &[
            "--listener",
            "SASL_SSL://127.0.0.1:0",
            "--listener",
            "SASL_PLAINTEXT://127.0.0.1:0",
            "--ssl-cert",
            pki.server_cert.to_str().expect("utf-8"),
            "--ssl-key",
            pki.server_key.to_str().expect("utf-8"),
        ],
    );
    let tls_addr = b.listener_addr("SASL_SSL");
    let sasl_addr = b.listener_addr("SASL_PLAINTEXT");
    // One authenticated client on each listener first, so the memory a
    // key check takes (argon2: 19 MiB) and the first TLS session are in
    // the baseline: what is measured is the cost of the idle connections.
    let served = |what: &str| {
        let (mut c, _) = handshake(&sasl_addr, "PLAIN");
        assert_eq!(plain(&mut c, &id, &secret).error_code, 0, "{what}");
        assert_eq!(metadata(&mut c).brokers.len(), 1, "{what}");
        let mut cfg = client_config(&tls_addr);
        cfg.set("security.protocol", "SASL_SSL")
            .set("sasl.mechanisms", "PLAIN")
            .set("sasl.username", &id)
            .set("sasl.password", &secret)
            .set("ssl.ca.location", pki.ca.to_str().expect("utf-8"));
        let client: BaseConsumer = cfg.create().expect("client");
        client.fetch_metadata(None, TIMEOUT).expect(what);
    };
    served("before the flood");
    let before = rss_kib(b.pid());
    // 300 sockets that open a TLS connection and never say hello, and 300
    // that send ApiVersions on a SASL listener and never authenticate.
    let mut half_open = Vec::new();
    for _ in 0..300 {
        half_open.push(TcpStream::connect(&tls_addr).expect("connect"));
    }
    let mut unauthenticated = Vec::new();
    for _ in 0..300 {
        let mut c = KafkaClient::connect(&sasl_addr, "flood");
        let _: kafka_protocol::messages::ApiVersionsResponse =
            c.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
        unauthenticated.push(c);
    }
    // Meanwhile an authenticated client is served on both listeners.
    served("an authenticated client is served during the flood");
    let after = rss_kib(b.pid());
    assert!(
        after.saturating_sub(before) < 64 * 1024,
        "RSS grew from {before} KiB to {after} KiB for 600 idle connections"
    );
    // A TLS handshake that does not finish within its bound is dropped.
    let mut s = half_open.pop().expect("a socket");
    s.set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    assert!(got.is_empty(), "a half-open TLS connection got {got:?}");
    drop(half_open);
    drop(unauthenticated);
    b.stop();
}

/// CreateAcls of one LITERAL TOPIC binding, ALLOW, any host.
fn allow_on_topic(c: &mut KafkaClient, topic: &str, principal: &str, operation: i8) {
    allow(c, 2, topic, 3, principal, operation);
}

/// CreateAcls of one ALLOW binding for any host: Kafka's codes for the
/// resource type, pattern type and operation.
fn allow(c: &mut KafkaClient, rt: i8, name: &str, pattern: i8, principal: &str, op: i8) {
    use kafka_protocol::messages::create_acls_request::AclCreation;
    use kafka_protocol::messages::{CreateAclsRequest, CreateAclsResponse};
    let mut a = AclCreation::default();
    a.resource_type = rt;
    a.resource_name = StrBytes::from_string(name.to_string());
    a.resource_pattern_type = pattern;
    a.principal = StrBytes::from_string(principal.to_string());
    a.host = StrBytes::from_static_str("*");
    a.operation = op;
    a.permission_type = 3;
    let mut req = CreateAclsRequest::default();
    req.creations = vec![a];
    let r: CreateAclsResponse = c.call(ApiKey::CreateAcls, 3, &req);
    assert_eq!(r.results[0].error_code, 0, "{r:?}");
}

/// A broker with one SASL_PLAINTEXT listener, the StandardAuthorizer,
/// `User:admin` as super user and a short failed-authentication delay,
/// plus `extra` flags.
fn start_sasl(data: &Path, extra: &[&str]) -> Broker {
    let mut args = vec![
        "--listener",
        "SASL_PLAINTEXT://127.0.0.1:0",
        "--set",
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "--set",
        "super.users=User:admin",
        "--set",
        "connection.failed.authentication.delay.ms=10",
    ];
    args.extend_from_slice(extra);
    Broker::start(Path::new(ES_BROKER), data, &args)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acls_apply_to_principals_from_api_keys_and_certificates() {
    let dir = tempfile::tempdir().expect("tmp");
    let data = dir.path().join("data");
    let pki = Pki::new(&dir.path().join("pki"));
    let (admin, admin_secret) = create_key(&data, "User:admin");
    let (alice_cert, alice_key) = pki.client(
        "alice",
        &[
            (rcgen::DnType::OrganizationalUnitName, "es-test"),
            (rcgen::DnType::CommonName, "Alice"),
        ],
    );
    let (bob_cert, bob_key) = pki.client("bob", &[(rcgen::DnType::CommonName, "Bob")]);
    let b = Broker::start(
        Path::new(ES_BROKER),
        &data,
        &[
            "--listener",
            "SASL_PLAINTEXT://127.0.0.1:0",
            "--listener",
            "SSL://127.0.0.1:0",
            "--ssl-cert",
            pki.server_cert.to_str().expect("utf-8"),
            "--ssl-key",
            pki.server_key.to_str().expect("utf-8"),
            "--ssl-ca",
            pki.ca.to_str().expect("utf-8"),
            "--set",
            "ssl.client.auth=required",
            // Alice's DN (with OU=es-test, in either order) -> alice;
            // CN=Bob matches no rule but DEFAULT: User:CN=Bob.
            "--set",
            "ssl.principal.mapping.rules=RULE:^OU=es-test,CN=([^,]+)$/$1/L,RULE:^CN=([^,]+),OU=es-test$/$1/L,DEFAULT",
            "--set",
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "--set",
            "super.users=User:admin",
        ],
    );
    let sasl_addr = b.listener_addr("SASL_PLAINTEXT");
    let ssl_addr = b.listener_addr("SSL");
    // The super user (an API key) creates the topic and lets alice read it.
    let (mut admin_conn, _) = handshake(&sasl_addr, "PLAIN");
    assert_eq!(plain(&mut admin_conn, &admin, &admin_secret).error_code, 0);
    let mut create = kafka_protocol::messages::CreateTopicsRequest::default();
    let mut t = kafka_protocol::messages::create_topics_request::CreatableTopic::default();
    t.name = kafka_protocol::messages::TopicName(StrBytes::from_static_str("ledger"));
    t.num_partitions = 1;
    t.replication_factor = 1;
    create.topics = vec![t];
    create.timeout_ms = 10_000;
    let r: kafka_protocol::messages::CreateTopicsResponse =
        admin_conn.call(ApiKey::CreateTopics, 7, &create);
    assert_eq!(r.topics[0].error_code, 0);
    allow_on_topic(&mut admin_conn, "ledger", "User:alice", 3); // READ

    // Over SSL the certificate names the principal through the rules.
    let ssl = |cert: &Path, key: &Path| {
        let mut c = client_config(&ssl_addr);
        c.set("security.protocol", "SSL")
            .set("ssl.ca.location", pki.ca.to_str().expect("utf-8"))
            .set("ssl.certificate.location", cert.to_str().expect("utf-8"))
            .set("ssl.key.location", key.to_str().expect("utf-8"));
        c
    };
    let alice: BaseConsumer = ssl(&alice_cert, &alice_key).create().expect("client");
    let md = alice
        .fetch_metadata(Some("ledger"), TIMEOUT)
        .expect("metadata");
    assert_eq!(
        md.topics()[0].error(),
        None,
        "User:alice may describe ledger"
    );
    let bob: BaseConsumer = ssl(&bob_cert, &bob_key).create().expect("client");
    let md = bob
        .fetch_metadata(Some("ledger"), TIMEOUT)
        .expect("metadata");
    assert_eq!(
        md.topics()[0].error(),
        Some(rdkafka::types::RDKafkaRespErr::RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED),
        "User:Bob may not"
    );
    // alice may read but not write.
    let producer: FutureProducer = ssl(&alice_cert, &alice_key)
        .set("message.timeout.ms", "10000")
        .create()
        .expect("producer");
    let sent = producer
        .send(FutureRecord::to("ledger").key("k").payload("v"), TIMEOUT)
        .await;
    match sent {
        Err((KafkaError::MessageProduction(code), _)) => {
            assert_eq!(code, RDKafkaErrorCode::TopicAuthorizationFailed)
        }
        other => panic!("alice wrote without WRITE: {other:?}"),
    }
    b.stop();
}
