//! The REST API on axum: routes, query parameters, bodies and answers in
//! Confluent's shapes. Each handler parses its inputs, runs one operation
//! of the core through [`crate::server::Shared`], and turns the result or
//! the [`RegistryError`] into JSON. Bodies are read up to
//! [`REQUEST_BYTES_MAX`]; past it the answer is 413 with 42209.

use std::collections::HashMap;

use axum::body::{to_bytes, Body};
use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Extension;
use axum::Router;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::access::{self, Caller, Operation};
use crate::change::Change;
use crate::error::RegistryError;
use crate::limits::REQUEST_BYTES_MAX;
use crate::model::{
    Compatibility, Metadata, Mode, NewSchema, Reference, RuleSet, SchemaType, VersionSpec,
};
use crate::server::Shared;

/// The media type of every answer (Confluent's).
pub const CONTENT_TYPE: &str = "application/vnd.schemaregistry.v1+json";

type Params = Query<HashMap<String, String>>;

/// An answer: a JSON value or an error, both in Confluent's media type.
enum Answer {
    Json(Value),
    /// A schema's own text (`.../schema`), sent as it is stored.
    Raw(String),
    Error(RegistryError),
}

/// The answer to an error, in Confluent's shape.
pub(crate) fn error_response(e: RegistryError) -> Response {
    Answer::Error(e).into_response()
}

impl IntoResponse for Answer {
    fn into_response(self) -> Response {
        let (status, body) = match self {
            Answer::Json(v) => (StatusCode::OK, v.to_string()),
            Answer::Raw(s) => (StatusCode::OK, s),
            Answer::Error(e) => {
                let status =
                    StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                let body = json!({"error_code": e.code(), "message": e.to_string()});
                (status, body.to_string())
            }
        };
        (status, [(header::CONTENT_TYPE, CONTENT_TYPE)], body).into_response()
    }
}

impl From<Result<Value, RegistryError>> for Answer {
    fn from(r: Result<Value, RegistryError>) -> Answer {
        match r {
            Ok(v) => Answer::Json(v),
            Err(e) => Answer::Error(e),
        }
    }
}

/// A boolean query parameter: true only when it says `true` (as Jersey).
fn flag(q: &HashMap<String, String>, name: &str) -> bool {
    q.get(name).is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

/// The routes of the API over `shared`.
pub fn router(shared: Shared) -> Router {
    Router::new()
        .route("/", get(|| async { Answer::Json(json!({})) }))
        .route("/v1/metadata/id", get(metadata_id))
        .route("/subjects", get(subjects))
        .route("/subjects/{subject}", post(lookup).delete(delete_subject))
        .route("/subjects/{subject}/versions", get(versions).post(register))
        .route("/subjects/{subject}/metadata", get(latest_with_metadata))
        .route("/contexts", get(|| async { Answer::Json(json!(["."])) }))
        .route(
            "/subjects/{subject}/versions/{version}",
            get(version).delete(delete_version),
        )
        .route(
            "/subjects/{subject}/versions/{version}/schema",
            get(version_schema),
        )
        .route(
            "/subjects/{subject}/versions/{version}/referencedby",
            get(referenced_by),
        )
        .route("/schemas", get(schemas))
        .route("/schemas/types", get(schema_types))
        .route("/schemas/ids/{id}", get(schema_by_id))
        .route("/schemas/ids/{id}/schema", get(schema_by_id_raw))
        .route("/schemas/ids/{id}/subjects", get(subjects_by_id))
        .route("/schemas/ids/{id}/versions", get(versions_by_id))
        .route(
            "/config",
            get(get_config).put(put_config).delete(delete_config),
        )
        .route(
            "/config/{subject}",
            get(get_subject_config)
                .put(put_subject_config)
                .delete(delete_subject_config),
        )
        .route(
            "/compatibility/subjects/{subject}/versions/{version}",
            post(compatibility),
        )
        .route(
            "/compatibility/subjects/{subject}/versions",
            post(compatibility_all),
        )
        .route("/mode", get(get_mode).put(put_mode))
        .route(
            "/mode/{subject}",
            get(get_subject_mode)
                .put(put_subject_mode)
                .delete(delete_subject_mode),
        )
        .route_layer(axum::middleware::from_fn_with_state(
            shared.clone(),
            access::check,
        ))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(shared)
}

async fn not_found() -> Answer {
    Answer::Error(RegistryError::NoSuchResource)
}

async fn method_not_allowed() -> Response {
    plain_error(
        StatusCode::METHOD_NOT_ALLOWED,
        "HTTP 405 Method Not Allowed",
    )
}

/// Jersey's answer for a route or method that does not exist.
fn plain_error(status: StatusCode, message: &str) -> Response {
    let body = json!({"error_code": status.as_u16(), "message": message});
    (
        status,
        [(header::CONTENT_TYPE, CONTENT_TYPE)],
        body.to_string(),
    )
        .into_response()
}

/// Reads a body of at most [`REQUEST_BYTES_MAX`] bytes as JSON.
async fn json_body<T: for<'de> Deserialize<'de>>(body: Body) -> Result<T, RegistryError> {
    let bytes = to_bytes(body, REQUEST_BYTES_MAX)
        .await
        .map_err(|_| RegistryError::SchemaTooLarge)?;
    serde_json::from_slice(&bytes)
        .map_err(|e| RegistryError::BadRequest(format!("Unrecognized request body: {e}")))
}

/// The body of register, lookup and compatibility requests.
#[derive(Deserialize)]
struct SchemaBody {
    schema: Option<String>,
    #[serde(rename = "schemaType")]
    schema_type: Option<String>,
    #[serde(default)]
    references: Option<Vec<Reference>>,
    #[serde(default)]
    metadata: Option<Metadata>,
    #[serde(rename = "ruleSet", default)]
    rule_set: Option<RuleSet>,
    id: Option<i32>,
    version: Option<i32>,
}

impl SchemaBody {
    fn into_new(self) -> Result<NewSchema, RegistryError> {
        let schema = match self.schema {
            Some(s) if !s.trim().is_empty() => s,
            _ => return Err(RegistryError::InvalidSchema("Empty schema".into())),
        };
        Ok(NewSchema {
            schema_type: SchemaType::parse(self.schema_type.as_deref())?,
            schema,
            references: self.references.unwrap_or_default(),
            metadata: self.metadata,
            rule_set: self.rule_set,
            id: self.id.filter(|id| *id >= 0),
            version: self.version.filter(|v| *v > 0),
        })
    }
}

async fn schema_body(body: Body) -> Result<NewSchema, RegistryError> {
    json_body::<SchemaBody>(body).await?.into_new()
}

async fn metadata_id(State(s): State<Shared>) -> Answer {
    Answer::Json(json!({
        "scope": {
            "path": [],
            "clusters": {
                "kafka-cluster": s.cluster_id(),
                "schema-registry-cluster": "schema-registry",
            }
        }
    }))
}

/// The caller the access layer left (open: everyone may everything).
type CallerOf = Option<Extension<Caller>>;

fn caller(c: CallerOf) -> Caller {
    c.map(|Extension(c)| c).unwrap_or_default()
}

async fn subjects(State(s): State<Shared>, c: CallerOf, Query(q): Params) -> Answer {
    let prefix = q.get("subjectPrefix").cloned().unwrap_or_default();
    let deleted = flag(&q, "deleted");
    let c = caller(c);
    s.read(move |r| {
        let mut all = r.subjects(&prefix, deleted);
        all.retain(|sub| c.may(Operation::Describe, sub));
        Ok(json!(all))
    })
    .await
    .into()
}

async fn lookup(
    State(s): State<Shared>,
    Path(subject): Path<String>,
    Query(q): Params,
    body: Body,
) -> Answer {
    let new = match schema_body(body).await {
        Ok(n) => n,
        Err(e) => return Answer::Error(e),
    };
    let (normalize, deleted) = (flag(&q, "normalize"), flag(&q, "deleted"));
    s.read(move |r| Ok(json!(r.lookup(&subject, &new, normalize, deleted)?)))
        .await
        .into()
}

async fn delete_subject(
    State(s): State<Shared>,
    Path(subject): Path<String>,
    Query(q): Params,
) -> Answer {
    let permanent = flag(&q, "permanent");
    s.change(Change::DeleteSubject { subject, permanent })
        .await
        .into()
}

async fn versions(
    State(s): State<Shared>,
    Path(subject): Path<String>,
    Query(q): Params,
) -> Answer {
    let deleted = flag(&q, "deleted");
    s.read(move |r| Ok(json!(r.versions(&subject, deleted)?)))
        .await
        .into()
}

async fn register(
    State(s): State<Shared>,
    Path(subject): Path<String>,
    Query(q): Params,
    body: Body,
) -> Answer {
    let new = match schema_body(body).await {
        Ok(n) => n,
        Err(e) => return Answer::Error(e),
    };
    let normalize = flag(&q, "normalize");
    s.change(Change::Register {
        subject,
        schema: Box::new(new),
        normalize,
    })
    .await
    .into()
}

/// `GET /subjects/{s}/metadata?key=K&value=V...&deleted=`: keys and values
/// pair up in order (repeated parameters, as Confluent reads them).
async fn latest_with_metadata(
    State(s): State<Shared>,
    Path(subject): Path<String>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Answer {
    let keys = pairs
        .iter()
        .filter(|(k, _)| k == "key")
        .map(|(_, v)| v.clone());
    let values = pairs
        .iter()
        .filter(|(k, _)| k == "value")
        .map(|(_, v)| v.clone());
    let wanted: Vec<(String, String)> = keys.zip(values).collect();
    let deleted = pairs
        .iter()
        .any(|(k, v)| k == "deleted" && v.eq_ignore_ascii_case("true"));
    let fmt = pairs
        .iter()
        .find(|(k, _)| k == "format")
        .map(|(_, v)| v.clone());
    s.read(move |r| {
        let mut found = r.latest_with_metadata(&subject, &wanted, deleted)?;
        if let Some(f) = &fmt {
            found.schema = r.formatted(found.id, f)?;
        }
        Ok(json!(found))
    })
    .await
    .into()
}

async fn version(
    State(s): State<Shared>,
    Path((subject, v)): Path<(String, String)>,
    Query(q): Params,
) -> Answer {
    let deleted = flag(&q, "deleted");
    let fmt = q.get("format").cloned();
    s.read(move |r| {
        let mut found = r.version(&subject, VersionSpec::parse(&v)?, deleted)?;
        if let Some(f) = &fmt {
            found.schema = r.formatted(found.id, f)?;
        }
        Ok(json!(found))
    })
    .await
    .into()
}

async fn version_schema(
    State(s): State<Shared>,
    Path((subject, v)): Path<(String, String)>,
    Query(q): Params,
) -> Answer {
    let deleted = flag(&q, "deleted");
    let fmt = q.get("format").cloned();
    match s
        .read(move |r| {
            let found = r.version(&subject, VersionSpec::parse(&v)?, deleted)?;
            Ok(Value::String(match &fmt {
                Some(f) => r.formatted(found.id, f)?,
                None => found.schema,
            }))
        })
        .await
    {
        Ok(Value::String(text)) => Answer::Raw(text),
        Ok(other) => Answer::Json(other),
        Err(e) => Answer::Error(e),
    }
}

async fn referenced_by(
    State(s): State<Shared>,
    Path((subject, v)): Path<(String, String)>,
) -> Answer {
    s.read(move |r| Ok(json!(r.referenced_by(&subject, VersionSpec::parse(&v)?)?)))
        .await
        .into()
}

async fn delete_version(
    State(s): State<Shared>,
    Path((subject, v)): Path<(String, String)>,
    Query(q): Params,
) -> Answer {
    let permanent = flag(&q, "permanent");
    s.change(Change::DeleteVersion {
        subject,
        version: v,
        permanent,
    })
    .await
    .into()
}

async fn schemas(State(s): State<Shared>, c: CallerOf, Query(q): Params) -> Answer {
    let prefix = q.get("subjectPrefix").cloned().unwrap_or_default();
    let (deleted, latest) = (flag(&q, "deleted"), flag(&q, "latestOnly"));
    let c = caller(c);
    s.read(move |r| {
        let mut all = r.schemas(&prefix, deleted, latest);
        all.retain(|sv| c.may(Operation::Read, &sv.subject));
        Ok(json!(all))
    })
    .await
    .into()
}

async fn schema_types() -> Answer {
    let types: Vec<&str> = SchemaType::SUPPORTED.iter().map(|t| t.as_str()).collect();
    Answer::Json(json!(types))
}

/// A path's schema id; a path that is no id names no resource (404).
fn schema_id(id: &str) -> Result<i32, RegistryError> {
    id.parse::<i32>().map_err(|_| RegistryError::NoSuchResource)
}

async fn schema_by_id(
    State(s): State<Shared>,
    c: CallerOf,
    Path(id): Path<String>,
    Query(q): Params,
) -> Answer {
    let fmt = q.get("format").cloned();
    let c = caller(c);
    s.read(move |r| {
        let id = schema_id(&id)?;
        c.may_read_id(r, id)?;
        let mut found = r.schema_by_id(id)?;
        if let Some(f) = &fmt {
            found.schema = r.formatted(id, f)?;
        }
        Ok(json!(found))
    })
    .await
    .into()
}

async fn schema_by_id_raw(
    State(s): State<Shared>,
    c: CallerOf,
    Path(id): Path<String>,
    Query(q): Params,
) -> Answer {
    let fmt = q.get("format").cloned();
    let c = caller(c);
    match s
        .read(move |r| {
            let id = schema_id(&id)?;
            c.may_read_id(r, id)?;
            Ok(Value::String(match &fmt {
                Some(f) => r.formatted(id, f)?,
                None => r.schema_by_id(id)?.schema,
            }))
        })
        .await
    {
        Ok(Value::String(text)) => Answer::Raw(text),
        Ok(other) => Answer::Json(other),
        Err(e) => Answer::Error(e),
    }
}

async fn subjects_by_id(
    State(s): State<Shared>,
    c: CallerOf,
    Path(id): Path<String>,
    Query(q): Params,
) -> Answer {
    let deleted = flag(&q, "deleted");
    let c = caller(c);
    s.read(move |r| {
        let id = schema_id(&id)?;
        c.may_read_id(r, id)?;
        let mut all = r.subjects_by_id(id, deleted)?;
        all.retain(|sub| c.may(Operation::Read, sub));
        Ok(json!(all))
    })
    .await
    .into()
}

async fn versions_by_id(
    State(s): State<Shared>,
    c: CallerOf,
    Path(id): Path<String>,
    Query(q): Params,
) -> Answer {
    let deleted = flag(&q, "deleted");
    let c = caller(c);
    s.read(move |r| {
        let id = schema_id(&id)?;
        c.may_read_id(r, id)?;
        let pairs = r.versions_by_id(id, deleted)?;
        Ok(json!(pairs
            .into_iter()
            .filter(|(subject, _)| c.may(Operation::Read, subject))
            .map(|(subject, version)| json!({"subject": subject, "version": version}))
            .collect::<Vec<_>>()))
    })
    .await
    .into()
}

/// The body of `PUT /config`: Confluent's `compatibility` (or the
/// `compatibilityLevel` its GET answers with).
#[derive(Deserialize)]
struct ConfigBody {
    compatibility: Option<String>,
    #[serde(rename = "compatibilityLevel")]
    compatibility_level: Option<String>,
}

async fn config_level(body: Body) -> Result<Compatibility, RegistryError> {
    let b: ConfigBody = json_body(body).await?;
    let level = b
        .compatibility
        .or(b.compatibility_level)
        .ok_or(RegistryError::InvalidCompatibility)?;
    Compatibility::parse(&level)
}

async fn get_config(State(s): State<Shared>) -> Answer {
    s.read(|r| Ok(json!({"compatibilityLevel": r.config(None, true)?.as_str()})))
        .await
        .into()
}

async fn put_config(State(s): State<Shared>, body: Body) -> Answer {
    let level = match config_level(body).await {
        Ok(l) => l,
        Err(e) => return Answer::Error(e),
    };
    s.change(Change::SetConfig {
        subject: None,
        level,
    })
    .await
    .into()
}

async fn delete_config(State(s): State<Shared>) -> Answer {
    s.change(Change::DeleteConfig { subject: None })
        .await
        .into()
}

async fn get_subject_config(
    State(s): State<Shared>,
    Path(subject): Path<String>,
    Query(q): Params,
) -> Answer {
    let global = flag(&q, "defaultToGlobal");
    s.read(move |r| Ok(json!({"compatibilityLevel": r.config(Some(&subject), global)?.as_str()})))
        .await
        .into()
}

async fn put_subject_config(
    State(s): State<Shared>,
    Path(subject): Path<String>,
    body: Body,
) -> Answer {
    let level = match config_level(body).await {
        Ok(l) => l,
        Err(e) => return Answer::Error(e),
    };
    s.change(Change::SetConfig {
        subject: Some(subject),
        level,
    })
    .await
    .into()
}

async fn delete_subject_config(State(s): State<Shared>, Path(subject): Path<String>) -> Answer {
    s.change(Change::DeleteConfig {
        subject: Some(subject),
    })
    .await
    .into()
}

async fn run_compatibility(
    s: Shared,
    subject: String,
    spec: Option<String>,
    q: HashMap<String, String>,
    body: Body,
) -> Answer {
    let new = match schema_body(body).await {
        Ok(n) => n,
        Err(e) => return Answer::Error(e),
    };
    let (normalize, verbose) = (flag(&q, "normalize"), flag(&q, "verbose"));
    s.read(move |r| {
        let spec = spec.as_deref().map(VersionSpec::parse).transpose()?;
        let res = r.test_compatibility(&subject, spec, &new, normalize, verbose)?;
        Ok(if verbose {
            json!({"is_compatible": res.is_compatible, "messages": res.messages})
        } else {
            json!({"is_compatible": res.is_compatible})
        })
    })
    .await
    .into()
}

async fn compatibility(
    State(s): State<Shared>,
    Path((subject, v)): Path<(String, String)>,
    Query(q): Params,
    body: Body,
) -> Answer {
    run_compatibility(s, subject, Some(v), q, body).await
}

async fn compatibility_all(
    State(s): State<Shared>,
    Path(subject): Path<String>,
    Query(q): Params,
    body: Body,
) -> Answer {
    run_compatibility(s, subject, None, q, body).await
}

/// The body of `PUT /mode`.
#[derive(Deserialize)]
struct ModeBody {
    mode: Option<String>,
}

async fn mode_of_body(body: Body) -> Result<Mode, RegistryError> {
    let b: ModeBody = json_body(body).await?;
    Mode::parse(b.mode.as_deref().unwrap_or(""))
}

async fn get_mode(State(s): State<Shared>) -> Answer {
    s.read(|r| Ok(json!({"mode": r.mode(None, true)?.as_str()})))
        .await
        .into()
}

async fn put_mode(State(s): State<Shared>, Query(q): Params, body: Body) -> Answer {
    let mode = match mode_of_body(body).await {
        Ok(m) => m,
        Err(e) => return Answer::Error(e),
    };
    let force = flag(&q, "force");
    s.change(Change::SetMode {
        subject: None,
        mode,
        force,
    })
    .await
    .into()
}

async fn get_subject_mode(
    State(s): State<Shared>,
    Path(subject): Path<String>,
    Query(q): Params,
) -> Answer {
    let global = flag(&q, "defaultToGlobal");
    s.read(move |r| Ok(json!({"mode": r.mode(Some(&subject), global)?.as_str()})))
        .await
        .into()
}

async fn put_subject_mode(
    State(s): State<Shared>,
    Path(subject): Path<String>,
    Query(q): Params,
    body: Body,
) -> Answer {
    let mode = match mode_of_body(body).await {
        Ok(m) => m,
        Err(e) => return Answer::Error(e),
    };
    let force = flag(&q, "force");
    s.change(Change::SetMode {
        subject: Some(subject),
        mode,
        force,
    })
    .await
    .into()
}

async fn delete_subject_mode(State(s): State<Shared>, Path(subject): Path<String>) -> Answer {
    s.change(Change::DeleteMode { subject }).await.into()
}
