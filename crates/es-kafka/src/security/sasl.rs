//! One connection's SASL exchange on a SASL_PLAINTEXT or SASL_SSL listener,
//! as Kafka's `SaslServerAuthenticator` runs it.
//!
//! Until the client has authenticated, only ApiVersions (once, first) and
//! SaslHandshake are served; any other request closes the connection (Kafka:
//! "Unexpected Kafka request of type X during SASL handshake"). SaslHandshake
//! v1 is followed by SaslAuthenticate requests, v0 by raw size-prefixed
//! tokens. PLAIN checks an API key (its argon2id hash, on a blocking thread);
//! SCRAM-SHA-256/512 runs RFC 5802 against the stored credential. A failure
//! is answered after `connection.failed.authentication.delay.ms` and the
//! connection closes. Frames are capped at `sasl.server.max.receive.size`
//! until authentication completes.
//!
//! Re-authentication (KIP-368): with `connections.max.reauth.ms` set, the
//! session lives that long (SaslAuthenticate v1+ says so in
//! `session_lifetime_ms`); a SaslHandshake on the live connection starts a
//! new exchange, which must use the same mechanism and end with the same
//! principal; a request other than SaslHandshake after the session expired
//! closes the connection.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use es_auth::principal::Principal;
use es_auth::scram::{ScramMechanism, ScramServer};
use kafka_protocol::messages::{
    ApiKey, RequestHeader, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::credentials::Credentials;
use super::settings::ListenerSecurity;

/// Kafka's error codes used here.
const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
const SASL_AUTHENTICATION_FAILED: i16 = 58;

/// What the connection does with a frame it gave to [`SaslSession::on_frame`].
#[derive(Debug)]
pub enum Outcome {
    /// An ordinary request of an authenticated client (or the first
    /// ApiVersions): serve it.
    Serve,
    /// Send this whole frame (size prefix included) and go on.
    Reply(Bytes),
    /// Authentication failed: after the failure delay send `reply` (if
    /// any), then close.
    Fail {
        reply: Option<Bytes>,
        reason: String,
    },
    /// Close now, answering nothing.
    Close(String),
}

/// The mechanism of an exchange in progress.
enum Exchange {
    Plain,
    Scram(Box<ScramServer>),
}

enum State {
    /// Nothing received yet.
    Initial,
    /// ApiVersions answered; the handshake must come next.
    AfterVersions,
    /// Handshake accepted; tokens for `mechanism` follow.
    Authenticate {
        mechanism: String,
        /// v1 handshake: tokens come in SaslAuthenticate requests.
        kafka_headers: bool,
        exchange: Exchange,
    },
    /// A re-authentication asked for another mechanism; the next token fails.
    ReauthBadMechanism(String),
    /// Authenticated.
    Complete,
}

/// The SASL side of one connection.
pub struct SaslSession {
    listener: ListenerSecurity,
    credentials: Arc<Credentials>,
    failure_delay: Duration,
    max_receive: usize,
    state: State,
    principal: Option<Arc<Principal>>,
    /// The mechanism of the last completed authentication.
    mechanism: Option<String>,
    /// A re-authentication is in progress.
    reauthenticating: bool,
    expires: Option<Instant>,
}

impl std::fmt::Debug for SaslSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslSession")
            .field("principal", &self.principal)
            .field("mechanism", &self.mechanism)
            .finish()
    }
}

/// A frame with its size prefix.
fn framed(body: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(4 + body.len());
    out.put_u32(u32::try_from(body.len()).unwrap_or(u32::MAX));
    out.put_slice(body);
    out.freeze()
}

/// Encodes a response frame for `key` at `version`.
fn respond<T: Encodable>(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &T,
) -> Option<Bytes> {
    let header_version = key.response_header_version(version);
    let mut header = kafka_protocol::messages::ResponseHeader::default();
    header.correlation_id = correlation_id;
    let mut out = BytesMut::new();
    out.put_u32(0);
    header.encode(&mut out, header_version).ok()?;
    body.encode(&mut out, version).ok()?;
    let len = u32::try_from(out.len() - 4).ok()?;
    out[..4].copy_from_slice(&len.to_be_bytes());
    Some(out.freeze())
}

impl SaslSession {
    /// The mechanism being (or last) used, as the client named it; empty
    /// before a handshake (the label of es_authentication_failures_total).
    pub fn mechanism_name(&self) -> &str {
        match &self.state {
            State::Authenticate { mechanism, .. } | State::ReauthBadMechanism(mechanism) => {
                mechanism
            }
            _ => self.mechanism.as_deref().unwrap_or(""),
        }
    }

    pub fn new(
        listener: ListenerSecurity,
        credentials: Arc<Credentials>,
        failure_delay: Duration,
        max_receive: usize,
    ) -> Self {
        SaslSession {
            listener,
            credentials,
            failure_delay,
            max_receive,
            state: State::Initial,
            principal: None,
            mechanism: None,
            reauthenticating: false,
            expires: None,
        }
    }

    /// How long a failed authentication waits before its answer.
    pub fn failure_delay(&self) -> Duration {
        self.failure_delay
    }

    /// Whether the client has authenticated (a re-authentication in
    /// progress counts: the session it renews is still valid).
    pub fn authenticated(&self) -> bool {
        self.principal.is_some()
    }

    /// The authenticated principal, once there is one.
    pub fn principal(&self) -> Option<Arc<Principal>> {
        self.principal.clone()
    }

    /// The largest frame accepted now: `sasl.server.max.receive.size`
    /// until the client has authenticated, `normal` afterwards.
    pub fn frame_limit(&self, normal: usize) -> usize {
        match self.state {
            State::Complete => normal,
            _ => self.max_receive.min(normal),
        }
    }

    /// Handles one frame body (size prefix removed).
    pub async fn on_frame(&mut self, frame: &Bytes) -> Outcome {
        if let State::Authenticate {
            kafka_headers: false,
            ..
        } = self.state
        {
            // After a v0 handshake the frame is the token itself.
            return self.raw_token(frame).await;
        }
        if let State::ReauthBadMechanism(msg) = &self.state {
            return Outcome::Fail {
                reply: None,
                reason: msg.clone(),
            };
        }
        let Some(b) = frame.get(..8) else {
            return Outcome::Close("a frame too short for a request header".into());
        };
        let key_code = i16::from_be_bytes([b[0], b[1]]);
        let version = i16::from_be_bytes([b[2], b[3]]);
        let key = ApiKey::try_from(key_code).ok();
        match (&self.state, key) {
            (State::Complete, Some(ApiKey::SaslHandshake)) => {
                self.reauthenticating = true;
                self.handshake(frame, version)
            }
            (State::Complete, _) => {
                if self.expires.is_some_and(|e| Instant::now() >= e) {
                    Outcome::Close("the SASL session expired without re-authentication".into())
                } else {
                    Outcome::Serve
                }
            }
            (State::Initial, Some(ApiKey::ApiVersions)) => {
                // As Kafka: an ApiVersions of a version not served is
                // answered with UNSUPPORTED_VERSION and may be sent again
                // (clients start at their newest version and retry with the
                // broker's); a served one moves on to the handshake.
                if matches!(
                    crate::versions::classify(key_code, version),
                    crate::versions::Support::Served(_)
                ) {
                    self.state = State::AfterVersions;
                }
                Outcome::Serve
            }
            (State::Initial | State::AfterVersions, Some(ApiKey::SaslHandshake)) => {
                self.handshake(frame, version)
            }
            (State::Authenticate { .. }, Some(ApiKey::SaslAuthenticate)) => {
                self.authenticate(frame, version).await
            }
            (State::Authenticate { .. }, _) => Outcome::Fail {
                reply: None,
                reason: format!(
                    "Unexpected Kafka request of type {} during SASL authentication.",
                    api_name(key, key_code)
                ),
            },
            (_, _) => Outcome::Close(format!(
                "Unexpected Kafka request of type {} during SASL handshake.",
                api_name(key, key_code)
            )),
        }
    }

    fn handshake(&mut self, frame: &Bytes, version: i16) -> Outcome {
        if !(0..=1).contains(&version) {
            return Outcome::Close(format!("SaslHandshake v{version} is not supported"));
        }
        let Some((header, req)) =
            decode::<SaslHandshakeRequest>(frame, ApiKey::SaslHandshake, version)
        else {
            return Outcome::Close("cannot decode SaslHandshake".into());
        };
        let mechanism = req.mechanism.to_string();
        let mut resp = SaslHandshakeResponse::default();
        resp.mechanisms = self
            .listener
            .mechanisms
            .iter()
            .map(|m| StrBytes::from_string(m.clone()))
            .collect();
        if !self.listener.mechanisms.contains(&mechanism) {
            resp.error_code = UNSUPPORTED_SASL_MECHANISM;
            return Outcome::Fail {
                reply: respond(ApiKey::SaslHandshake, version, header.correlation_id, &resp),
                reason: format!("Unsupported SASL mechanism {mechanism}"),
            };
        }
        let Some(reply) = respond(ApiKey::SaslHandshake, version, header.correlation_id, &resp)
        else {
            return Outcome::Close("cannot encode SaslHandshake response".into());
        };
        if self.reauthenticating && self.mechanism.as_deref() != Some(mechanism.as_str()) {
            self.state = State::ReauthBadMechanism(format!(
                "SASL mechanism '{mechanism}' requested by client is not supported for re-authentication of mechanism '{}'",
                self.mechanism.as_deref().unwrap_or_default()
            ));
            return Outcome::Reply(reply);
        }
        let exchange = match mechanism.as_str() {
            "PLAIN" => Exchange::Plain,
            "SCRAM-SHA-256" => Exchange::Scram(Box::new(ScramServer::new(ScramMechanism::Sha256))),
            "SCRAM-SHA-512" => Exchange::Scram(Box::new(ScramServer::new(ScramMechanism::Sha512))),
            _ => return Outcome::Close(format!("mechanism {mechanism} has no server")),
        };
        self.state = State::Authenticate {
            mechanism,
            kafka_headers: version >= 1,
            exchange,
        };
        Outcome::Reply(reply)
    }

    /// A token after a v0 handshake: answered with a raw token.
    async fn raw_token(&mut self, frame: &Bytes) -> Outcome {
        match self.evaluate(frame).await {
            Ok(token) => Outcome::Reply(framed(&token)),
            Err(reason) => Outcome::Fail {
                reply: None,
                reason,
            },
        }
    }

    async fn authenticate(&mut self, frame: &Bytes, version: i16) -> Outcome {
        if !(0..=2).contains(&version) {
            return Outcome::Close(format!("SaslAuthenticate v{version} is not supported"));
        }
        let Some((header, req)) =
            decode::<SaslAuthenticateRequest>(frame, ApiKey::SaslAuthenticate, version)
        else {
            return Outcome::Close("cannot decode SaslAuthenticate".into());
        };
        let mut resp = SaslAuthenticateResponse::default();
        match self.evaluate(&req.auth_bytes).await {
            Ok(token) => {
                resp.auth_bytes = Bytes::from(token);
                if matches!(self.state, State::Complete) {
                    resp.session_lifetime_ms = self.listener.max_reauth_ms;
                }
                match respond(
                    ApiKey::SaslAuthenticate,
                    version,
                    header.correlation_id,
                    &resp,
                ) {
                    Some(r) => Outcome::Reply(r),
                    None => Outcome::Close("cannot encode SaslAuthenticate response".into()),
                }
            }
            Err(reason) => {
                resp.error_code = SASL_AUTHENTICATION_FAILED;
                resp.error_message = Some(StrBytes::from_string(reason.clone()));
                Outcome::Fail {
                    reply: respond(
                        ApiKey::SaslAuthenticate,
                        version,
                        header.correlation_id,
                        &resp,
                    ),
                    reason,
                }
            }
        }
    }

    /// Runs one token through the exchange: the token to send back, or the
    /// message of the failure (as Kafka words it for the client).
    async fn evaluate(&mut self, token: &[u8]) -> Result<Vec<u8>, String> {
        let State::Authenticate {
            mechanism,
            exchange,
            ..
        } = &mut self.state
        else {
            return Err("no SASL exchange in progress".into());
        };
        let mechanism = mechanism.clone();
        let (principal, reply) = match exchange {
            Exchange::Plain => {
                let creds = self.credentials.clone();
                let msg = token.to_vec();
                let reauth = self.reauthenticating;
                // At most as many argon2 checks at once as the machine has
                // cores: each holds ~19 MiB while it runs, and waiting
                // logins cost only their connection.
                let _permit = argon2_permits()
                    .acquire()
                    .await
                    .map_err(|e| format!("Authentication failed: {e}"))?;
                let principal = tokio::task::spawn_blocking(move || creds.authenticate_plain(&msg))
                    .await
                    .map_err(|e| format!("Authentication failed: {e}"))?
                    .map_err(|e| e.client_message(reauth))?;
                (principal, Vec::new())
            }
            Exchange::Scram(server) => {
                if !server.started() {
                    let creds = self.credentials.clone();
                    let mech = server.mechanism();
                    let first = server
                        .client_first(token, |user| creds.scram_credential(user, mech))
                        .map_err(|e| e.response_message(mech, self.reauthenticating))?;
                    return Ok(first);
                }
                let mech = server.mechanism();
                let (last, user) = server
                    .client_final(token)
                    .map_err(|e| e.response_message(mech, self.reauthenticating))?;
                (Principal::user(&user), last)
            }
        };
        if self.reauthenticating {
            if let Some(prev) = &self.principal {
                if **prev != principal {
                    return Err(format!(
                        "Cannot change principals during re-authentication from {}.{}: {}.{}",
                        prev.kind, prev.name, principal.kind, principal.name
                    ));
                }
            }
        }
        self.principal = Some(Arc::new(principal));
        self.mechanism = Some(mechanism);
        self.reauthenticating = false;
        self.expires = (self.listener.max_reauth_ms > 0).then(|| {
            Instant::now()
                + Duration::from_millis(u64::try_from(self.listener.max_reauth_ms).unwrap_or(0))
        });
        self.state = State::Complete;
        Ok(reply)
    }
}

fn api_name(key: Option<ApiKey>, code: i16) -> String {
    match key {
        Some(k) => format!("{k:?}"),
        None => format!("api key {code}"),
    }
}

/// Decodes a request's header and body at `version`.
fn decode<T: Decodable>(frame: &Bytes, key: ApiKey, version: i16) -> Option<(RequestHeader, T)> {
    let mut body = frame.clone();
    let header = RequestHeader::decode(&mut body, key.request_header_version(version)).ok()?;
    let req = T::decode(&mut body, version).ok()?;
    Some((header, req))
}

/// The permits of concurrent argon2 checks (API keys): one per core, so
/// that a flood of PLAIN logins with made-up keys holds at most that many
/// argon2 memory blocks (~19 MiB each) at once, instead of one per blocking
/// thread (tokio's pool has 512).
fn argon2_permits() -> &'static tokio::sync::Semaphore {
    static PERMITS: std::sync::OnceLock<tokio::sync::Semaphore> = std::sync::OnceLock::new();
    PERMITS.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
        tokio::sync::Semaphore::new(cores)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn session(dir: &std::path::Path) -> SaslSession {
        let listener = crate::security::SecurityConfig::default()
            .broker_wide()
            .clone();
        let creds = Arc::new(Credentials::open(dir).expect("credentials"));
        SaslSession::new(listener, creds, Duration::ZERO, 512 * 1024)
    }

    /// A request frame body: header v1 or v2 for `key` at `version`, then
    /// `rest`.
    fn request(key: ApiKey, version: i16, rest: &[u8]) -> Bytes {
        let mut h = RequestHeader::default();
        h.request_api_key = key as i16;
        h.request_api_version = version;
        h.correlation_id = 7;
        let mut out = BytesMut::new();
        h.encode(&mut out, key.request_header_version(version))
            .expect("header");
        out.put_slice(rest);
        out.freeze()
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    }

    /// franz-go's opening: ApiVersions at a version newer than es serves
    /// (answered UNSUPPORTED_VERSION by the server), again at a served one,
    /// then the handshake. A second served ApiVersions is refused as Kafka
    /// refuses it.
    #[test]
    fn an_unsupported_api_versions_may_be_retried() {
        let dir = tempfile::tempdir().expect("tmp");
        runtime().block_on(async {
            let mut s = session(dir.path());
            let too_new = request(ApiKey::ApiVersions, 99, &[]);
            assert!(matches!(s.on_frame(&too_new).await, Outcome::Serve));
            let v3 = request(ApiKey::ApiVersions, 3, &[0, 0, 0]);
            assert!(matches!(s.on_frame(&v3).await, Outcome::Serve));
            assert!(matches!(s.on_frame(&v3).await, Outcome::Close(_)));
            let mut s = session(dir.path());
            assert!(matches!(s.on_frame(&too_new).await, Outcome::Serve));
            assert!(matches!(s.on_frame(&v3).await, Outcome::Serve));
            let mut hs = SaslHandshakeRequest::default();
            hs.mechanism = StrBytes::from_static_str("PLAIN");
            let mut body = BytesMut::new();
            hs.encode(&mut body, 1).expect("handshake");
            let out = s.on_frame(&request(ApiKey::SaslHandshake, 1, &body)).await;
            assert!(matches!(out, Outcome::Reply(_)), "{out:?}");
        });
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Whatever bytes arrive, before and after a handshake for each
        /// mechanism, the exchange answers, fails or closes: it never
        /// panics and never lets an unauthenticated client through.
        #[test]
        fn arbitrary_frames_never_panic_nor_authenticate(
            frames in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 1..8),
            mechanism in prop_oneof![Just("PLAIN"), Just("SCRAM-SHA-256"), Just("SCRAM-SHA-512")],
            v1 in any::<bool>(),
        ) {
            let dir = tempfile::tempdir().expect("tmp");
            runtime().block_on(async {
                let mut s = session(dir.path());
                // Raw bytes first, then after a handshake as tokens and as
                // SaslAuthenticate payloads.
                for f in &frames {
                    let _ = s.on_frame(&Bytes::copy_from_slice(f)).await;
                }
                let mut s = session(dir.path());
                let mut hs = SaslHandshakeRequest::default();
                hs.mechanism = StrBytes::from_static_str(mechanism);
                let mut body = BytesMut::new();
                let version = if v1 { 1 } else { 0 };
                hs.encode(&mut body, version).expect("handshake");
                let out = s.on_frame(&request(ApiKey::SaslHandshake, version, &body)).await;
                prop_assert!(matches!(out, Outcome::Reply(_)), "{out:?}");
                for f in &frames {
                    let frame = if v1 {
                        let mut a = SaslAuthenticateRequest::default();
                        a.auth_bytes = Bytes::copy_from_slice(f);
                        let mut b = BytesMut::new();
                        a.encode(&mut b, 2).expect("authenticate");
                        request(ApiKey::SaslAuthenticate, 2, &b)
                    } else {
                        Bytes::copy_from_slice(f)
                    };
                    match s.on_frame(&frame).await {
                        Outcome::Fail { .. } | Outcome::Close(_) => break,
                        Outcome::Reply(_) | Outcome::Serve => {}
                    }
                }
                // No API keys and no SCRAM credentials exist: nobody can
                // have authenticated.
                prop_assert!(!s.authenticated());
                Ok(())
            })?;
        }
    }
}
