//! Who may use the registry: HTTP basic authentication and, per request,
//! the operation and resource an authorizer is asked about.
//!
//! The registry knows no users or ACLs of its own: whoever embeds it hands
//! [`crate::Config::access`] an [`Access`] that checks credentials and
//! decides (es-broker: its API keys and SCRAM users, and its Kafka ACLs
//! through a documented mapping). Without one the registry is open, as
//! Confluent's is by default.
//!
//! [`check`] runs before every handler (an axum route layer, so that the
//! route's template is known): it authenticates the `Authorization` header
//! (401 and 40101 without valid credentials), maps the route to one
//! operation on one resource as Confluent's Schema Registry ACL authorizer
//! and Redpanda's Schema Registry Authorization do (the table is
//! [`required`]), and refuses with 403 and 40301 what the authorizer
//! denies. Routes that list subjects filter their answer instead, through
//! the [`Caller`] the layer leaves in the request.

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, FromRequestParts, MatchedPath, RawPathParams, Request, State};
use axum::http::{header, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use parking_lot::Mutex;

use crate::error::RegistryError;
use crate::registry::Registry;
use crate::server::Shared;

/// What a request does, in the operations of Kafka's ACLs (Redpanda's
/// Schema Registry Authorization uses the same names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// Read a schema (by version or id), look one up, test compatibility.
    Read,
    /// Register a schema.
    Write,
    /// Delete a version or a subject.
    Delete,
    /// See that a subject exists and list its versions.
    Describe,
    /// Read a compatibility level or mode.
    DescribeConfigs,
    /// Change a compatibility level or mode.
    AlterConfigs,
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Operation::Read => "Read",
            Operation::Write => "Write",
            Operation::Delete => "Delete",
            Operation::Describe => "Describe",
            Operation::DescribeConfigs => "DescribeConfigs",
            Operation::AlterConfigs => "AlterConfigs",
        })
    }
}

/// What a request acts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resource<'a> {
    /// One subject.
    Subject(&'a str),
    /// The registry as a whole (global compatibility level and mode).
    Registry,
}

impl fmt::Display for Resource<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Resource::Subject(s) => write!(f, "subject '{s}'"),
            Resource::Registry => f.write_str("the registry"),
        }
    }
}

/// An authenticated caller, as the [`Access`] that checked it names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    /// For example `User:alice`.
    pub name: String,
    /// The address the request came from.
    pub host: IpAddr,
}

/// Credentials and decisions, provided by whoever embeds the registry.
pub trait Access: Send + Sync + fmt::Debug + 'static {
    /// The principal of a user and password, if they check out. Blocking
    /// (a password hash): called on the blocking pool.
    fn authenticate(&self, user: &str, password: &str, host: IpAddr) -> Option<Principal>;

    /// May `who` do `operation` on `resource`?
    fn allowed(&self, who: &Principal, operation: Operation, resource: Resource<'_>) -> bool;

    /// How long a failed authentication waits before its answer.
    fn failed_authentication_delay(&self) -> Duration {
        Duration::from_millis(100)
    }
}

/// The caller of one request, left in the request's extensions by
/// [`check`] for the handlers that filter what they list.
#[derive(Clone, Debug, Default)]
pub struct Caller(Option<(Arc<dyn Access>, Principal)>);

impl Caller {
    /// May the caller do `operation` on `subject`? Always, when the
    /// registry is open.
    pub fn may(&self, operation: Operation, subject: &str) -> bool {
        match &self.0 {
            None => true,
            Some((access, who)) => access.allowed(who, operation, Resource::Subject(subject)),
        }
    }

    /// `/schemas/ids/{id}...` (Confluent's rule): Ok when the caller may
    /// read a subject the id is registered under, or when `r` has no
    /// schema `id` (the handler answers 40403). Checked in the handler on
    /// the registry it answers from, so that a schema registered between
    /// a check and the read is never served unchecked.
    pub fn may_read_id(&self, r: &Registry, id: i32) -> Result<(), RegistryError> {
        let Some((access, who)) = &self.0 else {
            return Ok(());
        };
        let Ok(subjects) = r.subjects_by_id(id, true) else {
            return Ok(());
        };
        if subjects
            .iter()
            .any(|sub| access.allowed(who, Operation::Read, Resource::Subject(sub)))
        {
            return Ok(());
        }
        Err(RegistryError::Forbidden(format!(
            "User {} is denied operation Read on every subject of schema {id}",
            who.name
        )))
    }
}

/// How long a successful authentication is remembered.
const REMEMBER: Duration = Duration::from_secs(60);
/// At most this many remembered authentications.
const REMEMBERED_MAX: usize = 256;
/// Longest user name or password read from a header, in bytes.
const CREDENTIAL_BYTES_MAX: usize = 1024;

/// Successful authentications by `Authorization` header and address, so
/// that a client's every request does not cost a password hash.
#[derive(Debug, Default)]
pub struct Remembered(Mutex<HashMap<(String, IpAddr), (Principal, Instant)>>);

/// What a route needs.
#[derive(Debug, PartialEq, Eq)]
pub enum Required<'a> {
    /// Only to be authenticated (the root, metadata, schema types).
    Authenticated,
    /// `operation` on one resource.
    One(Operation, Resource<'a>),
    /// Read on at least one subject the schema id is registered under
    /// (Confluent's rule for `/schemas/ids/...`): the handler checks it
    /// ([`Caller::may_read_id`]) and filters what it lists.
    ReadOfId,
    /// Nothing up front: the handler lists only the subjects the caller
    /// may `Operation`.
    Filtered(Operation),
}

/// The table: what the route `template` (axum's, e.g.
/// `/subjects/{subject}/versions`) with `method` needs, given its
/// `subject` path parameter.
pub fn required<'a>(method: &Method, template: &str, subject: Option<&'a str>) -> Required<'a> {
    use Operation::*;
    let read = matches!(*method, Method::GET | Method::HEAD);
    let on_subject = |op| match subject {
        Some(s) => Required::One(op, Resource::Subject(s)),
        None => Required::Authenticated,
    };
    match template {
        "/subjects" | "/schemas" => Required::Filtered(if template == "/subjects" {
            Describe
        } else {
            Read
        }),
        "/subjects/{subject}" => on_subject(if *method == Method::DELETE {
            Delete
        } else {
            Read
        }),
        "/subjects/{subject}/versions" => on_subject(if read { Describe } else { Write }),
        "/subjects/{subject}/versions/{version}" => on_subject(if read { Read } else { Delete }),
        "/subjects/{subject}/metadata"
        | "/subjects/{subject}/versions/{version}/schema"
        | "/subjects/{subject}/versions/{version}/referencedby"
        | "/compatibility/subjects/{subject}/versions/{version}"
        | "/compatibility/subjects/{subject}/versions" => on_subject(Read),
        "/schemas/ids/{id}"
        | "/schemas/ids/{id}/schema"
        | "/schemas/ids/{id}/subjects"
        | "/schemas/ids/{id}/versions" => Required::ReadOfId,
        "/config/{subject}" | "/mode/{subject}" => {
            on_subject(if read { DescribeConfigs } else { AlterConfigs })
        }
        "/config" | "/mode" => Required::One(
            if read { DescribeConfigs } else { AlterConfigs },
            Resource::Registry,
        ),
        _ => Required::Authenticated,
    }
}

/// The route layer: authentication, then the table's check.
pub async fn check(State(s): State<Shared>, req: Request, next: Next) -> Response {
    let Some(access) = s.access().cloned() else {
        return next.run(req).await;
    };
    let host = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip())
        .unwrap_or(IpAddr::from([127, 0, 0, 1]));
    let header = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let who = match header {
        Some(h) => authenticate(&s, &access, h, host).await,
        None => None,
    };
    let Some(who) = who else {
        tokio::time::sleep(access.failed_authentication_delay()).await;
        let mut r = error(RegistryError::Unauthenticated);
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Basic realm=\"es-schema-registry\""),
        );
        return r;
    };
    let (mut parts, body) = req.into_parts();
    let template = parts
        .extensions
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_string())
        .unwrap_or_default();
    let params: Vec<(String, String)> =
        match RawPathParams::from_request_parts(&mut parts, &()).await {
            Ok(p) => p
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            Err(_) => Vec::new(),
        };
    let param = |name: &str| {
        params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    if let Required::One(op, resource) = required(&parts.method, &template, param("subject")) {
        if !access.allowed(&who, op, resource) {
            return error(denial(&who, op, resource));
        }
    }
    parts.extensions.insert(Caller(Some((access, who))));
    next.run(Request::from_parts(parts, body)).await
}

/// Confluent's answer to a denied operation.
fn denial(who: &Principal, op: Operation, resource: Resource<'_>) -> RegistryError {
    RegistryError::Forbidden(format!(
        "User {} is denied operation {op} on {resource}",
        who.name
    ))
}

/// The principal of a `Basic` Authorization header, if its credentials
/// check out (remembered for [`REMEMBER`]).
async fn authenticate(
    s: &Shared,
    access: &Arc<dyn Access>,
    header: String,
    host: IpAddr,
) -> Option<Principal> {
    let key = (header, host);
    {
        let mut known = s.remembered().0.lock();
        if let Some((p, at)) = known.get(&key) {
            if at.elapsed() < REMEMBER {
                return Some(p.clone());
            }
            known.remove(&key);
        }
    }
    let (user, password) = basic_credentials(&key.0)?;
    let a = access.clone();
    let who = tokio::task::spawn_blocking(move || a.authenticate(&user, &password, host))
        .await
        .ok()??;
    let mut known = s.remembered().0.lock();
    if known.len() >= REMEMBERED_MAX {
        known.retain(|_, (_, at)| at.elapsed() < REMEMBER);
        if known.len() >= REMEMBERED_MAX {
            known.clear();
        }
    }
    known.insert(key, (who.clone(), Instant::now()));
    Some(who)
}

/// The user and password of a `Basic` header's value.
pub fn basic_credentials(header: &str) -> Option<(String, String)> {
    let encoded = header.strip_prefix("Basic ")?.trim();
    if encoded.len() > 4 * CREDENTIAL_BYTES_MAX {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    if user.is_empty() || user.len() > CREDENTIAL_BYTES_MAX || password.len() > CREDENTIAL_BYTES_MAX
    {
        return None;
    }
    Some((user.to_string(), password.to_string()))
}

fn error(e: RegistryError) -> Response {
    crate::http::error_response(e).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_names_one_operation_per_route() {
        use Operation::*;
        let (get, post, put, delete) = (Method::GET, Method::POST, Method::PUT, Method::DELETE);
        let s = Some("orders-value");
        let subject = |op| Required::One(op, Resource::Subject("orders-value"));
        assert_eq!(
            required(&get, "/subjects", None),
            Required::Filtered(Describe)
        );
        assert_eq!(required(&get, "/schemas", None), Required::Filtered(Read));
        assert_eq!(required(&post, "/subjects/{subject}", s), subject(Read));
        assert_eq!(required(&delete, "/subjects/{subject}", s), subject(Delete));
        assert_eq!(
            required(&get, "/subjects/{subject}/versions", s),
            subject(Describe)
        );
        assert_eq!(
            required(&post, "/subjects/{subject}/versions", s),
            subject(Write)
        );
        assert_eq!(
            required(&get, "/subjects/{subject}/versions/{version}", s),
            subject(Read)
        );
        assert_eq!(
            required(&delete, "/subjects/{subject}/versions/{version}", s),
            subject(Delete)
        );
        assert_eq!(
            required(
                &post,
                "/compatibility/subjects/{subject}/versions/{version}",
                s
            ),
            subject(Read)
        );
        assert_eq!(
            required(&put, "/config/{subject}", s),
            subject(AlterConfigs)
        );
        assert_eq!(
            required(&delete, "/mode/{subject}", s),
            subject(AlterConfigs)
        );
        assert_eq!(
            required(&get, "/mode/{subject}", s),
            subject(DescribeConfigs)
        );
        assert_eq!(
            required(&put, "/config", None),
            Required::One(AlterConfigs, Resource::Registry)
        );
        assert_eq!(
            required(&get, "/mode", None),
            Required::One(DescribeConfigs, Resource::Registry)
        );
        assert_eq!(
            required(&get, "/schemas/ids/{id}/versions", None),
            Required::ReadOfId
        );
        assert_eq!(
            required(&get, "/schemas/types", None),
            Required::Authenticated
        );
        assert_eq!(required(&get, "/", None), Required::Authenticated);
    }

    #[test]
    fn basic_credentials_are_read_and_bounded() {
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        assert_eq!(
            basic_credentials(&format!("Basic {}", b64("alice:pw:with:colons"))),
            Some(("alice".into(), "pw:with:colons".into()))
        );
        assert_eq!(basic_credentials(&format!("Basic {}", b64(":pw"))), None);
        assert_eq!(basic_credentials(&format!("Bearer {}", b64("a:b"))), None);
        assert_eq!(basic_credentials("Basic !!!"), None);
        let long = "x".repeat(CREDENTIAL_BYTES_MAX + 1);
        assert_eq!(
            basic_credentials(&format!("Basic {}", b64(&format!("a:{long}")))),
            None
        );
    }
}
