//! Who is asking the admin listener, and what they may do.
//!
//! Without SASL listeners the admin listener trusts whoever reaches it (it
//! listens on loopback by default): requests run as the broker's own
//! (internal, unauthorized) requests. With one, every request but the
//! health checks needs HTTP basic authentication with a Kafka client's
//! credentials: an API key and its secret (checked as SASL PLAIN is) or a
//! SCRAM user and password (checked against the stored SCRAM keys). The
//! JSON API then sends its Kafka requests as that principal on the first
//! SASL listener, so the authorizer decides as for a Kafka client; and
//! only `super.users` may change anything (`POST`, `PUT`, `DELETE`).
//!
//! A failed authentication answers after `connection.failed.authentication.delay.ms`,
//! as the Kafka listeners do. Checking a secret costs an argon2id hash or
//! thousands of HMACs, so a successful check is remembered for a minute
//! (the console polls every few seconds).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use es_auth::principal::Principal;
use es_auth::scram::{ScramCredential, ScramMechanism};
use es_kafka::handlers::Client;
use es_kafka::Broker;
use parking_lot::Mutex;

use super::Shared;

/// How long a successful check is remembered.
const REMEMBER: Duration = Duration::from_secs(60);
/// At most this many remembered checks.
const REMEMBERED_MAX: usize = 256;

/// The caller of one admin request, as the handlers see it.
#[derive(Clone, Debug)]
pub struct Caller {
    /// What the JSON API's Kafka requests are sent as.
    pub client_principal: Arc<Principal>,
    /// The listener they are sent on (None: internal, no authorizer).
    pub listener: Option<Arc<str>>,
    /// May change things.
    pub may_write: bool,
}

impl Caller {
    /// A Kafka client for the API's in-process requests.
    pub fn client(&self) -> Client {
        Client {
            peer: Some(std::net::IpAddr::from([127, 0, 0, 1])),
            principal: self.client_principal.clone(),
            listener: self.listener.clone(),
            throttle: None,
            connection: None,
        }
    }
}

/// Successful checks: the Authorization header's value, the principal,
/// when it was checked.
#[derive(Debug, Default)]
pub struct Remembered(Mutex<HashMap<String, (Principal, Instant)>>);

/// The first SASL listener's name, if the broker has one.
fn sasl_listener(broker: &Broker) -> Option<Arc<str>> {
    broker
        .listener_specs()
        .into_iter()
        .find(|l| l.protocol.sasl())
        .map(|l| Arc::from(l.name.as_str()))
}

/// The middleware: answers 401/403 or runs the request with its [`Caller`].
pub async fn require(State(s): State<Arc<Shared>>, mut req: Request, next: Next) -> Response {
    let Some(broker) = s.broker().cloned() else {
        // Before the broker is open nothing is known of its credentials:
        // only the metrics of recovery, and only without SASL configured.
        if s.options.sasl {
            return super::api::error(
                StatusCode::SERVICE_UNAVAILABLE,
                None,
                "the broker is still recovering its data directory",
            );
        }
        req.extensions_mut().insert(Caller {
            client_principal: Arc::new(Principal::anonymous()),
            listener: None,
            may_write: false,
        });
        return next.run(req).await;
    };
    let Some(listener) = sasl_listener(&broker) else {
        req.extensions_mut().insert(Caller {
            client_principal: Arc::new(Principal::anonymous()),
            listener: None,
            may_write: true,
        });
        return next.run(req).await;
    };
    let header = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let principal = match header {
        None => None,
        Some(h) => authenticate(&s, &broker, h).await,
    };
    let Some(principal) = principal else {
        let delay = broker.security().config.failed_authentication_delay_ms;
        tokio::time::sleep(Duration::from_millis(delay)).await;
        let mut r = super::api::error(
            StatusCode::UNAUTHORIZED,
            None,
            "authentication needed: HTTP basic with an API key and secret or a SCRAM user and password",
        );
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Basic realm=\"es\""),
        );
        return r;
    };
    let principal_text = principal.to_string();
    let is_super = broker
        .security()
        .config
        .super_users
        .contains(&principal_text);
    let writes = !matches!(*req.method(), Method::GET | Method::HEAD);
    if writes && !is_super {
        return super::api::error(
            StatusCode::FORBIDDEN,
            None,
            &format!(
                "{principal_text} is not a super user: only super users may change anything here"
            ),
        );
    }
    req.extensions_mut().insert(Caller {
        client_principal: Arc::new(principal),
        listener: Some(listener),
        may_write: is_super,
    });
    next.run(req).await
}

/// The principal of a `Basic` Authorization header, if its credentials
/// check out.
async fn authenticate(s: &Arc<Shared>, broker: &Arc<Broker>, header: String) -> Option<Principal> {
    {
        let mut known = s.remembered.0.lock();
        if let Some((p, at)) = known.get(&header) {
            if at.elapsed() < REMEMBER {
                return Some(p.clone());
            }
            known.remove(&header);
        }
    }
    let (user, password) = es_registry::access::basic_credentials(&header)?;
    let b = broker.clone();
    let checked = tokio::task::spawn_blocking(move || check(&b, &user, &password))
        .await
        .ok()??;
    let mut known = s.remembered.0.lock();
    if known.len() >= REMEMBERED_MAX {
        known.retain(|_, (_, at)| at.elapsed() < REMEMBER);
        if known.len() >= REMEMBERED_MAX {
            known.clear();
        }
    }
    known.insert(header, (checked.clone(), Instant::now()));
    Some(checked)
}

/// Checks `user`/`password` as an API key (SASL PLAIN) or a SCRAM user.
/// Blocking (a password hash). The schema registry checks its callers with
/// it too.
pub fn check(broker: &Broker, user: &str, password: &str) -> Option<Principal> {
    let credentials = &broker.security().credentials;
    let mut plain = Vec::with_capacity(user.len() + password.len() + 2);
    plain.push(0);
    plain.extend_from_slice(user.as_bytes());
    plain.push(0);
    plain.extend_from_slice(password.as_bytes());
    if let Ok(p) = credentials.authenticate_plain(&plain) {
        return Some(p);
    }
    for mechanism in [ScramMechanism::Sha256, ScramMechanism::Sha512] {
        let Some(stored) = credentials.scram_credential(user, mechanism) else {
            continue;
        };
        let salted =
            mechanism.salted_password(password.as_bytes(), &stored.salt, stored.iterations);
        let Ok(derived) = ScramCredential::from_salted_password(
            mechanism,
            stored.salt.clone(),
            &salted,
            stored.iterations,
        ) else {
            continue;
        };
        if constant_time_eq(&derived.stored_key, &stored.stored_key) {
            return Some(Principal::user(user));
        }
    }
    None
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
