//! The registry core, sans I/O: the state (schemas by id, subjects and
//! their versions, compatibility levels and modes) and every operation of
//! the REST API as a method that returns a value or a [`RegistryError`].
//! It never touches a file or a socket; the server ([`crate::server`])
//! runs each change on a copy and keeps the copy only once `schemas.json`
//! holds it, so a failed write changes nothing.
//!
//! Invariants: a schema id names one schema for ever (ids are never
//! reused, even after a permanent delete); every version of every subject
//! names a stored schema; a stored schema is named by at least one version
//! (a schema no version names is removed); `content` indexes every stored
//! schema by its identity; `generation` grows with every change, so the
//! shell knows whether to write.

mod decode;
mod lookup;
mod read;
mod settings;
mod write;

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::error::{RegistryError, Result};
use crate::format::{self, Parsed};
use crate::limits::REFERENCE_DEPTH_MAX;
use crate::model::{
    Compatibility, Metadata, Mode, Reference, RuleSet, SchemaType, VersionSpec, CONFLUENT_VERSION,
};

pub use settings::CompatibilityResult;

/// A stored schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredSchema {
    #[serde(rename = "schemaType")]
    pub schema_type: SchemaType,
    pub schema: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub references: Vec<Reference>,
    /// Confluent's data-contract metadata (absent in files written before
    /// es kept it: they load with none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    #[serde(rename = "ruleSet", default, skip_serializing_if = "Option::is_none")]
    pub rule_set: Option<RuleSet>,
}

/// One version of a subject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredVersion {
    pub id: i32,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleted: bool,
}

/// A subject: its versions and its own settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subject {
    #[serde(default)]
    pub versions: BTreeMap<i32, StoredVersion>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compatibility: Option<Compatibility>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
}

impl Subject {
    /// Whether the subject has a version (a live one, or any with `deleted`).
    fn has_versions(&self, deleted: bool) -> bool {
        self.versions.values().any(|v| deleted || !v.deleted)
    }

    /// The newest version (a live one, or any with `deleted`).
    fn latest(&self, deleted: bool) -> Option<(i32, StoredVersion)> {
        self.versions
            .iter()
            .rev()
            .find(|(_, v)| deleted || !v.deleted)
            .map(|(n, v)| (*n, *v))
    }

    /// Whether nothing is left to keep.
    fn is_empty(&self) -> bool {
        self.versions.is_empty() && self.compatibility.is_none() && self.mode.is_none()
    }
}

/// Everything `schemas.json` holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    /// The id the next new schema gets.
    #[serde(rename = "nextId")]
    pub next_id: i32,
    /// The registry-wide level (None: the default, BACKWARD).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compatibility: Option<Compatibility>,
    /// The registry-wide mode (None: READWRITE).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<Mode>,
    #[serde(default)]
    pub schemas: BTreeMap<i32, StoredSchema>,
    #[serde(default)]
    pub subjects: BTreeMap<String, Subject>,
}

impl Default for State {
    fn default() -> State {
        State {
            next_id: 1,
            compatibility: None,
            mode: None,
            schemas: BTreeMap::new(),
            subjects: BTreeMap::new(),
        }
    }
}

/// The registry: its state and the index derived from it.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    state: State,
    /// Stored schemas by [`content_key`].
    content: HashMap<String, i32>,
    /// Each stored schema's [`content_key`] (computed once, from the
    /// parsed schema).
    keys: HashMap<i32, String>,
    generation: u64,
}

/// The key two registrations of the same schema share: type, references,
/// metadata and rule set (Confluent's schema hash covers all four; none
/// differs from an empty one, as there) and [`format::identity`] of the
/// parsed schema.
fn content_key(s: &StoredSchema, parsed: &Parsed) -> String {
    let mut key = format!("{}\n", s.schema_type.as_str());
    for r in &s.references {
        key.push_str(&format!("{}\u{0}{}\u{0}{}\n", r.name, r.subject, r.version));
    }
    for (tag, part) in [
        (
            'M',
            s.metadata
                .as_ref()
                .and_then(|m| serde_json::to_string(m).ok()),
        ),
        (
            'R',
            s.rule_set
                .as_ref()
                .and_then(|r| serde_json::to_string(r).ok()),
        ),
    ] {
        if let Some(json) = part {
            key.push(tag);
            key.push_str(&json);
            key.push('\n');
        }
    }
    key.push('\n');
    key.push_str(&format::identity(parsed, &s.schema));
    key
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// A registry over `state` (as loaded from `schemas.json`), after
    /// checking its invariants.
    pub fn from_state(state: State) -> Result<Registry, String> {
        for (name, subject) in &state.subjects {
            for (n, v) in &subject.versions {
                if *n < 1 {
                    return Err(format!("subject {name:?} has version {n}"));
                }
                if !state.schemas.contains_key(&v.id) {
                    return Err(format!(
                        "subject {name:?} version {n} names schema {}, which is not stored",
                        v.id
                    ));
                }
            }
        }
        for id in state.schemas.keys() {
            if *id < 1 || *id >= state.next_id {
                return Err(format!(
                    "schema id {id} is outside 1..{} (nextId)",
                    state.next_id
                ));
            }
        }
        let mut registry = Registry {
            content: HashMap::with_capacity(state.schemas.len()),
            keys: HashMap::with_capacity(state.schemas.len()),
            state,
            generation: 0,
        };
        // Every stored schema must parse (with its references), as at
        // registration: a file edited by hand or damaged is refused whole.
        let mut keys = Vec::with_capacity(registry.state.schemas.len());
        for (id, s) in &registry.state.schemas {
            let parsed = registry
                .parse_stored(s)
                .map_err(|e| format!("schema {id} does not parse: {e}"))?;
            keys.push((*id, content_key(s, &parsed)));
        }
        for (id, key) in keys {
            registry.index(id, key);
        }
        Ok(registry)
    }

    /// Records `id`'s content key (the first id of a content wins).
    fn index(&mut self, id: i32, key: String) {
        self.content.entry(key.clone()).or_insert(id);
        self.keys.insert(id, key);
    }

    /// Forgets `id`'s content key.
    fn unindex(&mut self, id: i32) {
        if let Some(key) = self.keys.remove(&id) {
            if self.content.get(&key) == Some(&id) {
                self.content.remove(&key);
            }
        }
    }

    /// The state to store.
    pub fn state(&self) -> &State {
        &self.state
    }

    /// Grows with every change.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    fn changed(&mut self) {
        self.generation += 1;
    }

    fn subject(&self, name: &str) -> Option<&Subject> {
        self.state.subjects.get(name)
    }

    /// The subject, if it has versions (live ones, or any with `deleted`).
    fn subject_with_versions(&self, name: &str, deleted: bool) -> Result<&Subject> {
        match self.subject(name) {
            Some(s) if s.has_versions(deleted) => Ok(s),
            _ => Err(RegistryError::SubjectNotFound(name.to_string())),
        }
    }

    /// Resolves `spec` in `subject` to (version, stored version).
    fn resolve(
        &self,
        subject: &str,
        spec: VersionSpec,
        deleted: bool,
    ) -> Result<(i32, StoredVersion)> {
        let s = self.subject_with_versions(subject, deleted)?;
        let found = match spec {
            VersionSpec::Latest => s.latest(deleted),
            VersionSpec::Number(n) => s
                .versions
                .get(&n)
                .filter(|v| deleted || !v.deleted)
                .map(|v| (n, *v)),
        };
        found.ok_or_else(|| {
            RegistryError::VersionNotFound(match spec {
                VersionSpec::Latest => "-1".to_string(),
                VersionSpec::Number(n) => n.to_string(),
            })
        })
    }

    fn schema(&self, id: i32) -> Result<&StoredSchema> {
        self.state
            .schemas
            .get(&id)
            .ok_or(RegistryError::SchemaNotFound(id))
    }

    /// The level in force for `subject`.
    fn compatibility_of(&self, subject: &str) -> Compatibility {
        self.subject(subject)
            .and_then(|s| s.compatibility)
            .or(self.state.compatibility)
            .unwrap_or(Compatibility::DEFAULT)
    }

    /// The mode in force for `subject`.
    fn mode_of(&self, subject: &str) -> Mode {
        self.subject(subject)
            .and_then(|s| s.mode)
            .or(self.state.mode)
            .unwrap_or(Mode::Readwrite)
    }

    fn check_writable(&self, subject: &str) -> Result<()> {
        if self.mode_of(subject) == Mode::Readonly {
            return Err(RegistryError::NotPermitted(format!(
                "Subject {subject} is in read-only mode"
            )));
        }
        Ok(())
    }

    /// Every schema `refs` reach, each once, as (the name it is referenced
    /// by, its text), the deepest first (the order parsers want them in).
    /// A missing reference or a chain deeper than [`REFERENCE_DEPTH_MAX`]
    /// makes the schema invalid.
    fn dependencies<'a>(&'a self, refs: &'a [Reference]) -> Result<Vec<(&'a str, &'a str)>> {
        let mut out = Vec::new();
        let mut seen = std::collections::HashSet::new();
        self.collect_dependencies(refs, 0, &mut seen, &mut out)?;
        Ok(out)
    }

    fn collect_dependencies<'a>(
        &'a self,
        refs: &'a [Reference],
        depth: usize,
        seen: &mut std::collections::HashSet<i32>,
        out: &mut Vec<(&'a str, &'a str)>,
    ) -> Result<()> {
        if depth >= REFERENCE_DEPTH_MAX {
            return Err(RegistryError::InvalidSchema(format!(
                "Invalid schema: references nest deeper than {REFERENCE_DEPTH_MAX}"
            )));
        }
        for r in refs {
            let id = self
                .subject(&r.subject)
                .and_then(|s| s.versions.get(&r.version))
                .map(|v| v.id)
                .ok_or_else(|| {
                    RegistryError::InvalidSchema(format!(
                        "Invalid schema: reference {:?} to subject {:?} version {} not found",
                        r.name, r.subject, r.version
                    ))
                })?;
            if !seen.insert(id) {
                continue;
            }
            let s = self.schema(id)?;
            self.collect_dependencies(&s.references, depth + 1, seen, out)?;
            out.push((&r.name, &s.schema));
        }
        Ok(())
    }

    /// `base` with the metadata and rule set Confluent gives a registration
    /// (`maybeSetMetadataRuleSet`): what the request leaves out comes from
    /// the subject's latest live version; with `next_version` (a
    /// registration, not a lookup) `confluent:version` is set to it when the
    /// request named its version or the metadata already carries one.
    fn with_inherited(
        &self,
        subject: &str,
        base: &StoredSchema,
        next_version: Option<i32>,
        version_given: bool,
    ) -> StoredSchema {
        let prev = self
            .subject(subject)
            .and_then(|s| s.latest(false))
            .and_then(|(_, v)| self.state.schemas.get(&v.id));
        let mut out = base.clone();
        if out.metadata.is_none() {
            out.metadata = prev.and_then(|p| p.metadata.clone());
        }
        if out.rule_set.is_none() {
            out.rule_set = prev.and_then(|p| p.rule_set.clone());
        }
        if let Some(v) = next_version {
            let has = out
                .metadata
                .as_ref()
                .is_some_and(|m| m.properties.contains_key(CONFLUENT_VERSION));
            if version_given || has {
                out.metadata
                    .get_or_insert_with(Metadata::default)
                    .properties
                    .insert(CONFLUENT_VERSION.to_string(), v.to_string());
            }
        }
        out
    }

    /// Parses a stored schema with its references.
    fn parse_stored(&self, s: &StoredSchema) -> Result<Parsed> {
        let deps = self.dependencies(&s.references)?;
        format::parse(s.schema_type, &s.schema, &deps)
    }
}

/// Checks a subject name (42208): not empty, no control characters, not
/// one of Confluent's reserved names, at most [`crate::limits::SUBJECT_BYTES_MAX`].
pub fn check_subject(subject: &str) -> Result<()> {
    let ok = !subject.is_empty()
        && subject.len() <= crate::limits::SUBJECT_BYTES_MAX
        && !subject.chars().any(char::is_control)
        && subject != "__GLOBAL"
        && subject != "__EMPTY";
    if ok {
        Ok(())
    } else {
        Err(RegistryError::InvalidSubject(subject.to_string()))
    }
}

#[cfg(test)]
mod tests;
