//! The registry's changes to schemas: registration (with its
//! compatibility check, the reuse of an existing id, and IMPORT mode's
//! given ids) and soft and permanent deletion of versions and subjects.

use super::{check_subject, content_key, Registry, StoredSchema, StoredVersion};
use crate::error::{RegistryError, Result};
use crate::format::{self, Parsed};
use crate::limits::{MESSAGE_SCHEMA_CHARS_MAX, REFERENCES_MAX};
use crate::model::{Compatibility, Mode, NewSchema, Reference, Registered, VersionSpec};

impl Registry {
    /// `POST /subjects/{s}/versions`.
    pub fn register(
        &mut self,
        subject: &str,
        new: &NewSchema,
        normalize: bool,
    ) -> Result<Registered> {
        let mode = self.mode_of(subject);
        if mode == Mode::Readonly {
            return Err(RegistryError::NotPermitted(format!(
                "Subject {subject} is in read-only mode"
            )));
        }
        match (new.id, mode) {
            (Some(_), Mode::Import) | (None, Mode::Readwrite) => {}
            (Some(_), _) => {
                return Err(RegistryError::NotPermitted(format!(
                    "Subject {subject} is not in import mode"
                )))
            }
            (None, _) => {
                return Err(RegistryError::NotPermitted(format!(
                    "Subject {subject} is not in read-write mode"
                )))
            }
        }
        check_subject(subject)?;
        if let Some(id) = new.id {
            if id < 1 {
                return Err(RegistryError::InvalidSchema(format!(
                    "Invalid schema id {id}: ids start at 1"
                )));
            }
        }
        let base = StoredSchema {
            schema_type: new.schema_type,
            schema: format::stored_text(new.schema_type, &new.schema, normalize)?,
            references: self.resolve_references(&new.references)?,
            metadata: new.metadata.clone(),
            rule_set: new.rule_set.clone(),
        };
        let parsed = self.parse_stored(&base)?;
        let next_version = self
            .subject(subject)
            .and_then(|s| s.versions.keys().next_back().copied())
            .unwrap_or(0)
            .checked_add(1)
            .ok_or_else(|| RegistryError::InvalidSchema("Subject has no versions left".into()))?;

        // The same schema registered before under this subject, as given or
        // with the latest version's metadata and rule set (Confluent's
        // lookup before it registers): its id and version.
        if new.version.is_none() {
            let inherited = self.with_inherited(subject, &base, None, false);
            for c in [&base, &inherited] {
                let Some(id) = self.content.get(&content_key(c, &parsed)).copied() else {
                    continue;
                };
                if new.id.is_some_and(|want| want != id) {
                    continue;
                }
                if let Some((n, _)) = self.subject(subject).and_then(|s| {
                    s.versions
                        .iter()
                        .rev()
                        .find(|(_, v)| v.id == id && !v.deleted)
                }) {
                    return Ok(Registered { id, version: *n });
                }
            }
        }
        let candidate = if mode == Mode::Import {
            base
        } else {
            self.with_inherited(subject, &base, Some(next_version), new.version.is_some())
        };
        let key = content_key(&candidate, &parsed);
        let existing = self.content.get(&key).copied();

        // IMPORT of a schema this subject holds under another id.
        if let (Some(want), Some(have)) = (new.id, existing) {
            let live_here = self
                .subject(subject)
                .is_some_and(|s| s.versions.values().any(|v| v.id == have && !v.deleted));
            if want != have && live_here {
                return Err(RegistryError::IdDoesNotMatch(format!(
                    "Schema already registered with id {have} instead of input id {want}"
                )));
            }
        }

        if mode != Mode::Import {
            let messages =
                self.check_against_versions(subject, &parsed, self.compatibility_of(subject))?;
            if !messages.is_empty() {
                return Err(RegistryError::Incompatible(format!(
                    "Schema being registered is incompatible with an earlier schema for subject \"{subject}\", details: [{}]",
                    messages.join(", ")
                )));
            }
        }

        let version = match new.version {
            None => next_version,
            Some(v) if v < 1 => return Err(RegistryError::InvalidVersion(v.to_string())),
            Some(v) if mode == Mode::Import => v,
            Some(v) if v == next_version => v,
            Some(_) => {
                return Err(RegistryError::InvalidSchema(
                    "Version is not one more than previous version".into(),
                ))
            }
        };
        if let Some(v) = self.subject(subject).and_then(|s| s.versions.get(&version)) {
            // IMPORT of a version that exists: the same schema is a no-op.
            if Some(v.id) == existing.or(new.id) && self.keys.get(&v.id) == Some(&key) {
                return Ok(Registered { id: v.id, version });
            }
            return Err(RegistryError::NotPermitted(format!(
                "Overwrite new schema with version {version} of subject {subject} is not permitted."
            )));
        }

        let id = match new.id {
            Some(id) => {
                if let Some(have) = self.keys.get(&id) {
                    if *have != key {
                        return Err(RegistryError::NotPermitted(format!(
                            "Overwrite new schema with id {id} is not permitted."
                        )));
                    }
                }
                id
            }
            None => match existing {
                Some(id) => id,
                None => {
                    let id = self.state.next_id;
                    // Ids are Java ints in Confluent's clients: the last one is never given.
                    if id == i32::MAX {
                        return Err(RegistryError::Store("no schema ids left".into()));
                    }
                    id
                }
            },
        };

        // From here on nothing fails: the change is made.
        if !self.state.schemas.contains_key(&id) {
            self.index(id, key);
            self.state.schemas.insert(id, candidate);
        }
        self.state.next_id = self.state.next_id.max(id.saturating_add(1));
        let s = self.state.subjects.entry(subject.to_string()).or_default();
        // A soft-deleted earlier version of the same schema goes for good
        // (as Confluent does), unless something references it.
        let stale: Vec<i32> = s
            .versions
            .iter()
            .filter(|(n, v)| v.deleted && v.id == id && **n < version)
            .map(|(n, _)| *n)
            .collect();
        s.versions
            .insert(version, StoredVersion { id, deleted: false });
        for n in stale {
            if self.referrers(subject, n, true).is_empty() {
                if let Some(s) = self.state.subjects.get_mut(subject) {
                    s.versions.remove(&n);
                }
            }
        }
        self.changed();
        Ok(Registered { id, version })
    }

    /// References with `-1` resolved to the subject's latest version.
    fn resolve_references(&self, refs: &[Reference]) -> Result<Vec<Reference>> {
        if refs.len() > REFERENCES_MAX {
            return Err(RegistryError::InvalidSchema(format!(
                "Invalid schema: more than {REFERENCES_MAX} references"
            )));
        }
        refs.iter()
            .map(|r| {
                let version = if r.version == -1 {
                    self.subject(&r.subject)
                        .and_then(|s| s.latest(false))
                        .map_or(-1, |(n, _)| n)
                } else {
                    r.version
                };
                Ok(Reference {
                    version,
                    ..r.clone()
                })
            })
            .collect()
    }

    /// Confluent's incompatibility messages for `parsed` against the live
    /// versions of `subject` under `level` (empty: compatible).
    pub(super) fn check_against_versions(
        &self,
        subject: &str,
        parsed: &Parsed,
        level: Compatibility,
    ) -> Result<Vec<String>> {
        let live: Vec<(i32, i32)> = self
            .subject(subject)
            .map(|s| {
                s.versions
                    .iter()
                    .filter(|(_, v)| !v.deleted)
                    .map(|(n, v)| (*n, v.id))
                    .collect()
            })
            .unwrap_or_default();
        self.check_against(parsed, &live, level)
    }

    /// Checks `parsed` against `versions` ((version, id), oldest first):
    /// the latest only, or with a transitive level every one, newest first,
    /// stopping at the first that fails (as Confluent).
    pub(super) fn check_against(
        &self,
        parsed: &Parsed,
        versions: &[(i32, i32)],
        level: Compatibility,
    ) -> Result<Vec<String>> {
        if level == Compatibility::None {
            return Ok(Vec::new());
        }
        let olds: Vec<&(i32, i32)> = if level.transitive() {
            versions.iter().rev().collect()
        } else {
            versions.last().into_iter().collect()
        };
        for (version, id) in olds {
            let stored = self.schema(*id)?;
            let old = self.parse_stored(stored)?;
            let mut messages = Vec::new();
            if old.schema_type() != parsed.schema_type() {
                messages.push("Incompatible because of different schema type".to_string());
            } else {
                // Confluent's order under FULL: what the old schema cannot
                // read first, then what the new one cannot.
                if level.forward() {
                    messages.extend(format::incompatibilities(&old, parsed, "old", "new"));
                }
                if level.backward() {
                    messages.extend(format::incompatibilities(parsed, &old, "new", "old"));
                }
            }
            if !messages.is_empty() {
                messages.push(format!("{{oldSchemaVersion: {version}}}"));
                let text = &stored.schema;
                if text.chars().count() <= MESSAGE_SCHEMA_CHARS_MAX {
                    messages.push(format!("{{oldSchema: '{text}'}}"));
                } else {
                    let head: String = text.chars().take(MESSAGE_SCHEMA_CHARS_MAX).collect();
                    messages.push(format!("{{oldSchema: <truncated> '{head}...'}}"));
                }
                messages.push(format!(
                    "{{validateFields: 'false', compatibility: '{}'}}",
                    level.as_str()
                ));
                return Ok(messages);
            }
        }
        Ok(Vec::new())
    }

    /// `DELETE /subjects/{s}/versions/{v}`: soft, or with `permanent` for
    /// good (only a soft-deleted version). Returns the version deleted.
    pub fn delete_version(
        &mut self,
        subject: &str,
        spec: VersionSpec,
        permanent: bool,
    ) -> Result<i32> {
        self.check_writable(subject)?;
        // The subject must have a live version (any, for a permanent
        // delete); the version itself may be soft-deleted, and is then
        // refused below (40406) rather than not found.
        self.subject_with_versions(subject, permanent)?;
        let (n, v) = self.resolve(subject, spec, true)?;
        if !permanent && v.deleted {
            return Err(RegistryError::VersionSoftDeleted(subject.to_string(), n));
        }
        if permanent && !v.deleted {
            return Err(RegistryError::VersionNotSoftDeleted(subject.to_string(), n));
        }
        if !self.referrers(subject, n, permanent).is_empty() {
            return Err(RegistryError::ReferenceExists(subject.to_string(), n));
        }
        if let Some(s) = self.state.subjects.get_mut(subject) {
            if permanent {
                s.versions.remove(&n);
                if s.versions.is_empty() {
                    // Confluent drops a subject's settings with its last version.
                    s.compatibility = None;
                    s.mode = None;
                }
            } else if let Some(v) = s.versions.get_mut(&n) {
                v.deleted = true;
            }
        }
        self.tidy(subject, &[v.id]);
        self.changed();
        Ok(n)
    }

    /// `DELETE /subjects/{s}`: every live version soft-deleted, or with
    /// `permanent` every (soft-deleted) version removed with the subject's
    /// settings. Returns the versions deleted.
    pub fn delete_subject(&mut self, subject: &str, permanent: bool) -> Result<Vec<i32>> {
        self.check_writable(subject)?;
        let s = self.subject_with_versions(subject, true)?;
        if !permanent && !s.has_versions(false) {
            return Err(RegistryError::SubjectSoftDeleted(subject.to_string()));
        }
        if permanent && s.has_versions(false) {
            return Err(RegistryError::SubjectNotSoftDeleted(subject.to_string()));
        }
        let targets: Vec<(i32, i32)> = s
            .versions
            .iter()
            .filter(|(_, v)| permanent || !v.deleted)
            .map(|(n, v)| (*n, v.id))
            .collect();
        for (n, _) in &targets {
            // References from the subject's own versions do not count.
            let outside = self
                .referrers(subject, *n, permanent)
                .into_iter()
                .any(|id| {
                    self.versions_by_id(id, permanent)
                        .is_ok_and(|vs| vs.iter().any(|(s, _)| s != subject))
                });
            if outside {
                return Err(RegistryError::ReferenceExists(subject.to_string(), *n));
            }
        }
        if permanent {
            self.state.subjects.remove(subject);
        } else if let Some(s) = self.state.subjects.get_mut(subject) {
            for v in s.versions.values_mut() {
                v.deleted = true;
            }
        }
        let ids: Vec<i32> = targets.iter().map(|(_, id)| *id).collect();
        self.tidy(subject, &ids);
        self.changed();
        Ok(targets.into_iter().map(|(n, _)| n).collect())
    }

    /// Drops the subject if nothing is left of it, and the schemas `ids`
    /// if no version names them any more.
    pub(super) fn tidy(&mut self, subject: &str, ids: &[i32]) {
        if self.subject(subject).is_some_and(|s| s.is_empty()) {
            self.state.subjects.remove(subject);
        }
        for id in ids {
            let named = self
                .state
                .subjects
                .values()
                .any(|s| s.versions.values().any(|v| v.id == *id));
            if !named && self.state.schemas.remove(id).is_some() {
                self.unindex(*id);
            }
        }
    }
}
