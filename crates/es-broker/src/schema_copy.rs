//! `es-broker mirror schemas --from URL --to URL`: copies a schema
//! registry's schemas (Confluent's API: Confluent Schema Registry, Redpanda,
//! Apicurio's ccompat, es) into es's registry with the same ids and
//! versions, so records mirrored at their source offsets still name
//! schemas by the ids their serializers wrote (magic byte 0, then the id).
//!
//! Each live version of the source (`GET /schemas`) is registered on the
//! target in IMPORT mode (`PUT /mode/{s}?force=true`, then `POST
//! /subjects/{s}/versions` with its `id` and `version`, then the subject's
//! mode put back), in id order, retrying versions whose references are not
//! there yet. A version the target already holds with the same id is left
//! alone, so the copy can run again at any time (before consumers start on
//! es, and once more at the cut-over); one it holds with another id is a
//! conflict, reported, and the command fails. The global compatibility
//! level and the subjects' own levels are copied after the schemas (a level
//! set before them could refuse the history).

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{bail, Context};
use reqwest::blocking::{Client, RequestBuilder};
use serde_json::{json, Value};

/// Confluent's media type.
const CONTENT_TYPE: &str = "application/vnd.schemaregistry.v1+json";

#[derive(Debug, clap::Args)]
pub struct SchemaCopyArgs {
    /// The source registry's base URL (for example http://kafka1:8081).
    #[arg(long)]
    from: String,
    /// es's registry's base URL.
    #[arg(long, default_value = "http://127.0.0.1:8081")]
    to: String,
    /// USER:PASSWORD for the source (HTTP basic auth).
    #[arg(long)]
    from_user_info: Option<String>,
    /// USER:PASSWORD for es's registry (an API key and secret, or a SCRAM
    /// user and password, of a principal that may write every subject).
    #[arg(long)]
    to_user_info: Option<String>,
    /// Only subjects starting with this.
    #[arg(long, default_value = "")]
    subject_prefix: String,
    /// Print what would be copied, change nothing.
    #[arg(long)]
    dry_run: bool,
}

/// One registry, as the copy talks to it.
struct Registry {
    http: Client,
    base: String,
    user_info: Option<(String, String)>,
}

impl Registry {
    fn new(http: &Client, base: &str, user_info: Option<&str>) -> anyhow::Result<Registry> {
        let user_info = match user_info {
            None => None,
            Some(u) => {
                let (user, password) = u
                    .split_once(':')
                    .context("user info must be USER:PASSWORD")?;
                Some((user.to_string(), password.to_string()))
            }
        };
        Ok(Registry {
            http: http.clone(),
            base: base.trim_end_matches('/').to_string(),
            user_info,
        })
    }

    fn request(&self, method: reqwest::Method, path: &str) -> RequestBuilder {
        let r = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("Accept", CONTENT_TYPE);
        match &self.user_info {
            Some((u, p)) => r.basic_auth(u, Some(p)),
            None => r,
        }
    }

    /// Sends and reads the answer: (HTTP status, JSON body).
    fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<(u16, Value)> {
        let mut r = self.request(method.clone(), path);
        if let Some(b) = body {
            r = r.header("Content-Type", CONTENT_TYPE).body(b.to_string());
        }
        let resp = r
            .send()
            .with_context(|| format!("{method} {}{path}", self.base))?;
        let status = resp.status().as_u16();
        let text = resp.text().unwrap_or_default();
        let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        if status == 401 || status == 403 {
            bail!("{method} {}{path}: HTTP {status}: {value}", self.base);
        }
        Ok((status, value))
    }

    fn get_ok(&self, path: &str) -> anyhow::Result<Value> {
        let (status, v) = self.call(reqwest::Method::GET, path, None)?;
        if status != 200 {
            bail!("GET {}{path}: HTTP {status}: {v}", self.base);
        }
        Ok(v)
    }

    /// Every live version, as `GET /schemas` lists them.
    fn versions(&self, prefix: &str) -> anyhow::Result<Vec<Value>> {
        let path = format!("/schemas?subjectPrefix={}", encode(prefix));
        match self.get_ok(&path)? {
            Value::Array(a) => Ok(a),
            other => bail!("GET {}{path} did not answer a list: {other}", self.base),
        }
    }

    /// A compatibility level: the subject's own, or the global one (None).
    fn level(&self, subject: Option<&str>) -> anyhow::Result<Option<String>> {
        let path = match subject {
            Some(s) => format!("/config/{}", encode(s)),
            None => "/config".into(),
        };
        let (status, v) = self.call(reqwest::Method::GET, &path, None)?;
        match status {
            200 => Ok(v["compatibilityLevel"]
                .as_str()
                .or_else(|| v["compatibility"].as_str())
                .map(str::to_string)),
            404 => Ok(None),
            _ => bail!("GET {}{path}: HTTP {status}: {v}", self.base),
        }
    }
}

/// Percent-encodes a path segment or query value.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// One source version to copy.
#[derive(Debug)]
struct Version {
    subject: String,
    version: i64,
    id: i64,
    body: Value,
}

fn version_of(v: &Value) -> anyhow::Result<Version> {
    let subject = v["subject"].as_str().context("a version without subject")?;
    let version = v["version"].as_i64().context("a version without number")?;
    let id = v["id"].as_i64().context("a version without id")?;
    let mut body = json!({"schema": v["schema"], "id": id, "version": version});
    for key in ["schemaType", "references", "metadata", "ruleSet"] {
        if !v[key].is_null() {
            body[key] = v[key].clone();
        }
    }
    Ok(Version {
        subject: subject.to_string(),
        version,
        id,
        body,
    })
}

/// What one run did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Copied {
    pub copied: usize,
    pub present: usize,
    pub levels: usize,
}

pub fn run(a: &SchemaCopyArgs) -> anyhow::Result<()> {
    let http = Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .context("HTTP client")?;
    let from = Registry::new(&http, &a.from, a.from_user_info.as_deref())?;
    let to = Registry::new(&http, &a.to, a.to_user_info.as_deref())?;
    let done = copy(&from, &to, &a.subject_prefix, a.dry_run)?;
    println!(
        "{} {} version(s), {} already there with the same id, {} compatibility level(s) set",
        if a.dry_run { "would copy" } else { "copied" },
        done.copied,
        done.present,
        done.levels
    );
    Ok(())
}

fn copy(from: &Registry, to: &Registry, prefix: &str, dry_run: bool) -> anyhow::Result<Copied> {
    let mut wanted: Vec<Version> = from
        .versions(prefix)?
        .iter()
        .map(version_of)
        .collect::<anyhow::Result<_>>()?;
    wanted.sort_by_key(|v| (v.id, v.version));
    let present: BTreeMap<(String, i64), i64> = to
        .versions(prefix)?
        .iter()
        .filter_map(|v| version_of(v).ok())
        .map(|v| ((v.subject, v.version), v.id))
        .collect();
    let mut done = Copied::default();
    let mut todo = Vec::new();
    for v in wanted {
        match present.get(&(v.subject.clone(), v.version)) {
            Some(id) if *id == v.id => done.present += 1,
            Some(id) => bail!(
                "{} version {} has id {} on the source and {id} on es: remove it from es (DELETE, then permanent=true) and copy again",
                v.subject,
                v.version,
                v.id
            ),
            None => todo.push(v),
        }
    }
    if dry_run {
        for v in &todo {
            println!("{} version {} id {}", v.subject, v.version, v.id);
        }
        done.copied = todo.len();
        return Ok(done);
    }
    // References may name versions later in id order: retry until a round
    // copies nothing.
    while !todo.is_empty() {
        let before = todo.len();
        let mut left = Vec::new();
        let mut last_error = String::new();
        for v in todo {
            match import(to, &v)? {
                Ok(()) => done.copied += 1,
                Err(why) => {
                    last_error = format!("{} version {}: {why}", v.subject, v.version);
                    left.push(v);
                }
            }
        }
        if left.len() == before {
            bail!(
                "{} version(s) could not be registered on es; the last: {last_error}",
                left.len()
            );
        }
        todo = left;
    }
    // Levels last: a level set first could refuse the history.
    if let Some(level) = from.level(None)? {
        if to.level(None)?.as_deref() != Some(level.as_str()) {
            put_level(to, None, &level)?;
            done.levels += 1;
        }
    }
    let subjects: Vec<String> =
        match from.get_ok(&format!("/subjects?subjectPrefix={}", encode(prefix)))? {
            Value::Array(a) => a
                .iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect(),
            _ => Vec::new(),
        };
    for s in subjects {
        let Some(level) = from.level(Some(&s))? else {
            continue;
        };
        if to.level(Some(&s))?.as_deref() != Some(level.as_str()) {
            put_level(to, Some(&s), &level)?;
            done.levels += 1;
        }
    }
    Ok(done)
}

fn put_level(to: &Registry, subject: Option<&str>, level: &str) -> anyhow::Result<()> {
    let path = match subject {
        Some(s) => format!("/config/{}", encode(s)),
        None => "/config".into(),
    };
    let (status, v) = to.call(
        reqwest::Method::PUT,
        &path,
        Some(json!({"compatibility": level})),
    )?;
    if status != 200 {
        bail!("PUT {}{path}: HTTP {status}: {v}", to.base);
    }
    Ok(())
}

/// Registers `v` on `to` with its id and version (IMPORT mode for the
/// subject, then its mode put back). The outer error stops the copy; the
/// inner one is a refusal worth retrying (a reference not there yet).
fn import(to: &Registry, v: &Version) -> anyhow::Result<Result<(), String>> {
    let subject = encode(&v.subject);
    let (status, mode) = to.call(reqwest::Method::GET, &format!("/mode/{subject}"), None)?;
    let own_mode = (status == 200)
        .then(|| mode["mode"].as_str().map(str::to_string))
        .flatten();
    let (status, answer) = to.call(
        reqwest::Method::PUT,
        &format!("/mode/{subject}?force=true"),
        Some(json!({"mode": "IMPORT"})),
    )?;
    if status != 200 {
        bail!("PUT {}/mode/{subject}: HTTP {status}: {answer}", to.base);
    }
    let (status, answer) = to.call(
        reqwest::Method::POST,
        &format!("/subjects/{subject}/versions"),
        Some(v.body.clone()),
    )?;
    let restored = match own_mode {
        Some(m) => to.call(
            reqwest::Method::PUT,
            &format!("/mode/{subject}?force=true"),
            Some(json!({ "mode": m })),
        )?,
        None => to.call(reqwest::Method::DELETE, &format!("/mode/{subject}"), None)?,
    };
    if restored.0 != 200 {
        bail!(
            "putting back the mode of {}: HTTP {}: {}",
            v.subject,
            restored.0,
            restored.1
        );
    }
    match status {
        200 if answer["id"].as_i64() == Some(v.id) => Ok(Ok(())),
        200 => bail!(
            "{} version {}: es gave id {} instead of {}",
            v.subject,
            v.version,
            answer["id"],
            v.id
        ),
        // An id es holds for another schema: a conflict no retry mends.
        422 if answer["error_code"] == 42207 => {
            bail!("{} version {}: {answer}", v.subject, v.version)
        }
        _ => Ok(Err(format!("HTTP {status}: {answer}"))),
    }
}
