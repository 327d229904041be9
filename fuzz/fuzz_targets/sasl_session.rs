//! sasl_session: what a client sends on a SASL listener before it has
//! authenticated, into es-kafka's per-connection `SaslSession`, framed as the
//! connection frames it (`codec::frame::check_frame` against the session's
//! `frame_limit`, so oversized and negative size prefixes end the
//! connection as they would).
//!
//! Input: one configuration byte, then records separated by `|~|`, each an
//! operation letter and its payload:
//! - `r` raw bytes appended to the stream (size prefixes included, or not);
//! - `f` one frame of the payload (the size prefix added);
//! - `h` SaslHandshake: version (1 byte, signed), then the mechanism name;
//! - `a` SaslAuthenticate: version (1 byte, signed), then the token template;
//! - `t` a raw token (after a v0 handshake), the template framed as it is;
//! - `q` another request: api key and version (2 bytes each), then the body.
//!
//! Token templates take the placeholders of `es_fuzz::template`: the PLAIN
//! keys' ids and secrets, and for SCRAM the nonce and a right (`%P`) or wrong
//! (`%X`) proof computed from the server-first message the session last sent.
//! Configuration: 0x03 the mechanisms enabled (all, PLAIN, the two SCRAM,
//! SCRAM-SHA-512 and PLAIN), 0x04 `connections.max.reauth.ms` of an hour,
//! 0x08 `sasl.server.max.receive.size` of 256 bytes (else Kafka's 512 KiB).
//!
//! Must hold: no panic; before authentication nothing is served but
//! ApiVersions before the handshake (one at a version es serves, after any
//! number of retries at versions it does not, as Kafka), and frames are held
//! to `sasl.server.max.receive.size`; the session is authenticated only as a
//! principal whose credential the input presented (a live key's id and secret in a PLAIN message, or a SCRAM proof
//! the harness computed from the password), and a re-authentication never
//! changes the principal; every reply is one well-formed frame.
//!
//! As in sasl_plain, a PLAIN token naming an unknown or revoked id costs a
//! full-price argon2id verification: one in 64 is sent, at the others the
//! input ends (the connection closes) before it.

#![no_main]

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use es_auth::principal::Principal;
use es_fuzz::scram::{self, FinalContext};
use es_fuzz::{plain, split_records, template, Sampler};
use es_kafka::codec::frame::{check_frame, split_frame, FrameStatus};
use es_kafka::kafka_protocol::messages::{
    ApiKey, RequestHeader, ResponseHeader, SaslAuthenticateRequest, SaslAuthenticateResponse,
    SaslHandshakeRequest,
};
use es_kafka::kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use es_kafka::security::credentials::{Credentials, API_KEYS_FILE};
use es_kafka::security::sasl::{Outcome, SaslSession};
use es_kafka::security::settings::TlsFiles;
use es_kafka::security::ListenerSecurity;
use libfuzzer_sys::fuzz_target;

/// The normal frame limit the connection passes to `frame_limit`
/// (Kafka's `socket.request.max.bytes`).
const NORMAL_FRAME_BYTES_MAX: usize = es_kafka::codec::frame::FRAME_BYTES_MAX_DEFAULT;
/// The record separator of an input.
const SEPARATOR: &[u8] = b"|~|";
const API_VERSIONS: i16 = 18;
const SASL_HANDSHAKE: i16 = 17;
const SASL_AUTHENTICATE: i16 = 36;

static DUMMY_HASH: Sampler = Sampler::new(64);

struct World {
    runtime: tokio::runtime::Runtime,
    credentials: Arc<Credentials>,
}

/// The data directory of this process, holding the key set; directories
/// left by earlier processes that are gone are removed.
fn data_dir() -> PathBuf {
    let tmp = std::env::temp_dir();
    let prefix = "es-fuzz-sasl-session-";
    if let Ok(entries) = std::fs::read_dir(&tmp) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(pid) = name.strip_prefix(prefix) {
                if !PathBuf::from(format!("/proc/{pid}")).exists() {
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        }
    }
    let dir = tmp.join(format!("{prefix}{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("data directory");
    dir
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let dir = data_dir();
        plain::key_set()
            .save(&dir.join(API_KEYS_FILE))
            .expect("save the key set");
        let credentials = Arc::new(Credentials::open(&dir).expect("credentials"));
        credentials.set_scram(
            scram::users()
                .iter()
                .map(|k| ((k.user.to_string(), k.mechanism), k.credential()))
                .collect(),
        );
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        World {
            runtime,
            credentials,
        }
    })
}

fn listener(config: u8) -> ListenerSecurity {
    let mechanisms: &[&str] = match config & 3 {
        0 => &["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"],
        1 => &["PLAIN"],
        2 => &["SCRAM-SHA-256", "SCRAM-SHA-512"],
        _ => &["SCRAM-SHA-512", "PLAIN"],
    };
    ListenerSecurity {
        mechanisms: mechanisms.iter().map(|m| m.to_string()).collect(),
        max_reauth_ms: if config & 4 != 0 { 3_600_000 } else { 0 },
        tls: TlsFiles::default(),
    }
}

/// A request frame body: a header for `key` at `version`, then `body`.
fn request(key: i16, version: i16, correlation_id: i32, body: &[u8]) -> Vec<u8> {
    let header_version = ApiKey::try_from(key)
        .map(|k| k.request_header_version(version))
        .unwrap_or(1);
    let mut header = RequestHeader::default();
    header.request_api_key = key;
    header.request_api_version = version;
    header.correlation_id = correlation_id;
    header.client_id = Some(StrBytes::from_static_str("es-fuzz"));
    let mut out = BytesMut::new();
    header
        .encode(&mut out, header_version.clamp(1, 2))
        .expect("request header");
    out.put_slice(body);
    out.to_vec()
}

fn framed(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&u32::try_from(body.len()).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(body);
    out
}

/// The api key and version a frame body starts with.
fn prefix(body: &[u8]) -> Option<(i16, i16)> {
    let b = body.get(..4)?;
    Some((
        i16::from_be_bytes([b[0], b[1]]),
        i16::from_be_bytes([b[2], b[3]]),
    ))
}

/// The auth bytes of a SaslAuthenticate v0-v2 frame, decoded as the session
/// decodes it.
fn authenticate_token(body: &Bytes) -> Option<Bytes> {
    let (key, version) = prefix(body)?;
    if key != SASL_AUTHENTICATE || !(0..=2).contains(&version) {
        return None;
    }
    let mut buf = body.clone();
    RequestHeader::decode(
        &mut buf,
        ApiKey::SaslAuthenticate.request_header_version(version),
    )
    .ok()?;
    let request = SaslAuthenticateRequest::decode(&mut buf, version).ok()?;
    Some(request.auth_bytes)
}

/// The mechanism of a SaslHandshake v0-v1 frame and whether it is v0.
fn handshake_mechanism(body: &Bytes) -> Option<(String, bool)> {
    let (key, version) = prefix(body)?;
    if key != SASL_HANDSHAKE || !(0..=1).contains(&version) {
        return None;
    }
    let mut buf = body.clone();
    RequestHeader::decode(&mut buf, 1).ok()?;
    let request = SaslHandshakeRequest::decode(&mut buf, version).ok()?;
    Some((request.mechanism.to_string(), version == 0))
}

/// The auth bytes of a SaslAuthenticate response frame (size prefix included).
fn response_token(frame: &Bytes, version: i16) -> Option<Bytes> {
    let mut buf = frame.slice(4..);
    ResponseHeader::decode(
        &mut buf,
        ApiKey::SaslAuthenticate.response_header_version(version),
    )
    .ok()?;
    let response = SaslAuthenticateResponse::decode(&mut buf, version).ok()?;
    Some(response.auth_bytes)
}

/// A reply the session hands the connection must be exactly one frame.
fn check_reply(frame: &Bytes) {
    assert!(frame.len() >= 4, "reply shorter than its size prefix");
    let len = u32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
    assert_eq!(len as usize, frame.len() - 4, "reply size prefix wrong");
}

/// What the harness believes of the exchange, from the frames it could
/// decode: used to send SCRAM finals and to foresee the cost of a frame,
/// never by the oracle.
#[derive(Default)]
struct Belief {
    /// Mechanism of the accepted handshake and whether tokens come raw (v0).
    exchange: Option<(String, bool)>,
    /// The last client-first and server-first messages.
    client_first: Vec<u8>,
    server_first: Vec<u8>,
}

impl Belief {
    fn raw_tokens(&self) -> bool {
        matches!(self.exchange, Some((_, true)))
    }

    fn plain(&self) -> bool {
        matches!(&self.exchange, Some((m, _)) if m == "PLAIN")
    }

    /// The token the session will take from `body`, if it takes one.
    fn token(&self, body: &Bytes) -> Option<Bytes> {
        if self.raw_tokens() {
            Some(body.clone())
        } else {
            authenticate_token(body)
        }
    }
}

struct Connection {
    session: SaslSession,
    max_receive: usize,
    buf: BytesMut,
    /// A SaslHandshake has been answered.
    handshake_seen: bool,
    /// An ApiVersions at a served version has been served.
    served_api_versions: bool,
    correlation_id: i32,
    belief: Belief,
    /// Principals whose credential the input has presented.
    presented: BTreeSet<Principal>,
    /// The first principal authenticated.
    principal: Option<Principal>,
}

impl Connection {
    /// Renders a token template in the current exchange.
    fn render(&mut self, template_bytes: &[u8]) -> Vec<u8> {
        let plain_done = template::substitute(template_bytes, |l, _| plain::placeholder(l));
        let rendered = scram::render_final(
            &plain_done,
            FinalContext {
                client_first: &self.belief.client_first,
                server_first: &self.belief.server_first,
                keys: scram::keys_of_server_first(&self.belief.server_first),
            },
        );
        for proof in &rendered.proofs {
            self.presented.insert(Principal::user(proof.keys.user));
        }
        rendered.message
    }

    /// Appends the bytes of one record to the stream.
    fn append(&mut self, record: &[u8]) {
        let Some((&op, payload)) = record.split_first() else {
            return;
        };
        self.correlation_id = self.correlation_id.wrapping_add(1);
        let id = self.correlation_id;
        let version = |p: &[u8]| i16::from(p.first().copied().unwrap_or(0) as i8);
        let bytes = match op {
            b'f' => framed(payload),
            b'h' => {
                let v = version(payload);
                let mut handshake = SaslHandshakeRequest::default();
                let name = String::from_utf8_lossy(payload.get(1..).unwrap_or_default());
                handshake.mechanism = StrBytes::from_string(name.into_owned());
                let mut body = BytesMut::new();
                handshake
                    .encode(&mut body, v.clamp(0, 1))
                    .expect("handshake");
                framed(&request(SASL_HANDSHAKE, v, id, &body))
            }
            b'a' => {
                let v = version(payload);
                let token = self.render(payload.get(1..).unwrap_or_default());
                let mut authenticate = SaslAuthenticateRequest::default();
                authenticate.auth_bytes = Bytes::from(token);
                let mut body = BytesMut::new();
                authenticate
                    .encode(&mut body, v.clamp(0, 2))
                    .expect("authenticate");
                framed(&request(SASL_AUTHENTICATE, v, id, &body))
            }
            b't' => framed(&self.render(payload)),
            b'q' if payload.len() >= 4 => {
                let key = i16::from_be_bytes([payload[0], payload[1]]);
                let v = i16::from_be_bytes([payload[2], payload[3]]);
                framed(&request(key, v, id, &payload[4..]))
            }
            _ => payload.to_vec(),
        };
        self.buf.extend_from_slice(&bytes);
    }

    /// Feeds every whole frame buffered; false once the connection closes.
    async fn drain(&mut self) -> bool {
        loop {
            let limit = self.session.frame_limit(NORMAL_FRAME_BYTES_MAX);
            if !self.session.authenticated() {
                assert_eq!(limit, self.max_receive.min(NORMAL_FRAME_BYTES_MAX));
            }
            match check_frame(&self.buf, limit) {
                Err(e) => {
                    es_fuzz::trace!("stream closed: {e}");
                    return false;
                }
                Ok(FrameStatus::Incomplete { .. }) => return true,
                Ok(FrameStatus::Complete { .. }) => {}
            }
            let body = match split_frame(&mut self.buf, limit) {
                Ok(Some(body)) => body,
                Ok(None) => return true,
                Err(_) => return false,
            };
            if !self.feed(body).await {
                return false;
            }
        }
    }

    /// One frame through the session and the oracle; false once the
    /// connection closes.
    async fn feed(&mut self, body: Bytes) -> bool {
        let token = self.belief.token(&body);
        if self.belief.plain()
            && token.as_deref().is_some_and(plain::costs_dummy_hash)
            && !DUMMY_HASH.allow()
        {
            es_fuzz::trace!("a PLAIN token for an unknown id: input ends here (not sampled)");
            return false;
        }
        // Any PLAIN message in the frame with a live key's secret presents
        // that key, however the session reads the frame.
        for candidate in [Some(body.clone()), authenticate_token(&body)]
            .into_iter()
            .flatten()
        {
            if let Some(key) = plain::presented_key(&candidate) {
                self.presented.insert(plain::principal(key));
            }
        }
        let was_authenticated = self.session.authenticated();
        let raw_before = self.belief.raw_tokens();

        let outcome = self.session.on_frame(&body).await;
        es_fuzz::trace!(
            "frame {:?} ({} bytes) -> {}; authenticated as {:?}",
            prefix(&body),
            body.len(),
            match &outcome {
                Outcome::Serve => "serve".to_string(),
                Outcome::Reply(r) => format!("reply of {} bytes", r.len()),
                Outcome::Fail { reason, .. } => format!("fail: {reason}"),
                Outcome::Close(reason) => format!("close: {reason}"),
            },
            self.session.principal()
        );

        if let Some(principal) = self.session.principal() {
            assert!(self.session.authenticated());
            assert!(
                self.presented.contains(&principal),
                "authenticated as {principal:?} without presenting its credential"
            );
            match &self.principal {
                None => self.principal = Some((*principal).clone()),
                Some(first) => assert_eq!(
                    first, &*principal,
                    "re-authentication changed the principal"
                ),
            }
        } else {
            assert!(!self.session.authenticated());
        }
        match &outcome {
            Outcome::Serve => {
                if !was_authenticated {
                    // Kafka's rule: before the handshake, ApiVersions only;
                    // one at a version es serves, after any number at
                    // versions it answers UNSUPPORTED_VERSION.
                    let (key, version) = prefix(&body).unwrap_or_default();
                    assert!(
                        key == API_VERSIONS && !self.handshake_seen && !self.served_api_versions,
                        "served {:?} before authentication",
                        prefix(&body)
                    );
                    self.served_api_versions = matches!(
                        es_kafka::versions::classify(key, version),
                        es_kafka::versions::Support::Served(_)
                    );
                }
                true
            }
            Outcome::Reply(frame) => {
                check_reply(frame);
                self.handshake_seen |= !raw_before && handshake_mechanism(&body).is_some();
                self.learn(&body, frame, token, raw_before);
                true
            }
            Outcome::Fail { reply, .. } => {
                if let Some(frame) = reply {
                    check_reply(frame);
                }
                false
            }
            Outcome::Close(_) => false,
        }
    }

    /// Updates the belief from a frame and the session's reply to it.
    fn learn(&mut self, body: &Bytes, reply: &Bytes, token: Option<Bytes>, raw_before: bool) {
        if let Some(exchange) = handshake_mechanism(body) {
            if !raw_before {
                self.belief.exchange = Some(exchange);
                return;
            }
        }
        let reply_token = if raw_before {
            Some(reply.slice(4..))
        } else {
            match prefix(body) {
                Some((SASL_AUTHENTICATE, v)) => response_token(reply, v),
                _ => None,
            }
        };
        if let (Some(sent), Some(answer)) = (token, reply_token) {
            if answer.starts_with(b"r=") {
                self.belief.client_first = sent.to_vec();
                self.belief.server_first = answer.to_vec();
            } else {
                // PLAIN's empty answer or SCRAM's server-final: done.
                self.belief.exchange = None;
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&config, rest)) = data.split_first() else {
        return;
    };
    let world = world();
    let max_receive = if config & 8 != 0 { 256 } else { 524_288 };
    let mut connection = Connection {
        session: SaslSession::new(
            listener(config),
            world.credentials.clone(),
            Duration::ZERO,
            max_receive,
        ),
        max_receive,
        buf: BytesMut::new(),
        handshake_seen: false,
        served_api_versions: false,
        correlation_id: 0,
        belief: Belief::default(),
        presented: BTreeSet::new(),
        principal: None,
    };
    world.runtime.block_on(async {
        for record in split_records(rest, SEPARATOR) {
            connection.append(record);
            if !connection.drain().await {
                break;
            }
        }
    });
});
