//! Compatibility levels and modes, registry-wide and per subject, and the
//! compatibility test that does not register (`POST /compatibility/...`).

use super::{check_subject, Registry, StoredSchema};
use crate::error::{RegistryError, Result};
use crate::format;
use crate::model::{Compatibility, Mode, NewSchema, VersionSpec};

/// The answer of a compatibility test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompatibilityResult {
    pub is_compatible: bool,
    /// Why not (Confluent's messages), or why the schema is invalid.
    pub messages: Vec<String>,
}

impl Registry {
    /// `GET /config` (None) or `GET /config/{s}`: a subject's own level,
    /// or with `default_to_global` the one in force.
    pub fn config(&self, subject: Option<&str>, default_to_global: bool) -> Result<Compatibility> {
        let global = self.state.compatibility.unwrap_or(Compatibility::DEFAULT);
        let Some(subject) = subject else {
            return Ok(global);
        };
        match self.subject(subject).and_then(|s| s.compatibility) {
            Some(c) => Ok(c),
            None if default_to_global => Ok(global),
            None => Err(RegistryError::CompatibilityNotConfigured(
                subject.to_string(),
            )),
        }
    }

    /// `PUT /config[/{s}]`.
    pub fn set_config(
        &mut self,
        subject: Option<&str>,
        level: Compatibility,
    ) -> Result<Compatibility> {
        match subject {
            None => {
                if self.state.mode == Some(Mode::Readonly) {
                    return Err(RegistryError::NotPermitted(
                        "The registry is in read-only mode".into(),
                    ));
                }
                if self.state.compatibility != Some(level) {
                    self.state.compatibility = Some(level);
                    self.changed();
                }
            }
            Some(subject) => {
                check_subject(subject)?;
                self.check_writable(subject)?;
                let s = self.state.subjects.entry(subject.to_string()).or_default();
                if s.compatibility != Some(level) {
                    s.compatibility = Some(level);
                    self.changed();
                }
            }
        }
        Ok(level)
    }

    /// `DELETE /config[/{s}]`: back to the default (the registry's, or the
    /// registry-wide level for a subject). Returns the level removed.
    pub fn delete_config(&mut self, subject: Option<&str>) -> Result<Compatibility> {
        match subject {
            None => {
                let old = self.state.compatibility.take();
                if old.is_some() {
                    self.changed();
                }
                Ok(old.unwrap_or(Compatibility::DEFAULT))
            }
            Some(subject) => {
                self.check_writable(subject)?;
                let old = self
                    .state
                    .subjects
                    .get_mut(subject)
                    .and_then(|s| s.compatibility.take())
                    .ok_or_else(|| RegistryError::SubjectNotFound(subject.to_string()))?;
                self.tidy(subject, &[]);
                self.changed();
                Ok(old)
            }
        }
    }

    /// `GET /mode` or `GET /mode/{s}` (as [`Registry::config`]).
    pub fn mode(&self, subject: Option<&str>, default_to_global: bool) -> Result<Mode> {
        let global = self.state.mode.unwrap_or(Mode::Readwrite);
        let Some(subject) = subject else {
            return Ok(global);
        };
        match self.subject(subject).and_then(|s| s.mode) {
            Some(m) => Ok(m),
            None if default_to_global => Ok(global),
            None => Err(RegistryError::ModeNotConfigured(subject.to_string())),
        }
    }

    /// `PUT /mode[/{s}]`. IMPORT over existing schemas needs `force`.
    pub fn set_mode(&mut self, subject: Option<&str>, mode: Mode, force: bool) -> Result<Mode> {
        if let Some(subject) = subject {
            check_subject(subject)?;
        }
        if mode == Mode::Import && !force {
            let has = match subject {
                None => self.state.subjects.values().any(|s| !s.versions.is_empty()),
                Some(s) => self.subject(s).is_some_and(|s| !s.versions.is_empty()),
            };
            if has {
                return Err(RegistryError::NotPermitted(
                    "Cannot import since found existing subjects".into(),
                ));
            }
        }
        let slot = match subject {
            None => &mut self.state.mode,
            Some(subject) => {
                &mut self
                    .state
                    .subjects
                    .entry(subject.to_string())
                    .or_default()
                    .mode
            }
        };
        if *slot != Some(mode) {
            *slot = Some(mode);
            self.changed();
        }
        Ok(mode)
    }

    /// `DELETE /mode/{s}`: the subject follows the registry-wide mode
    /// again. Returns the mode removed.
    pub fn delete_mode(&mut self, subject: &str) -> Result<Mode> {
        let old = self
            .state
            .subjects
            .get_mut(subject)
            .and_then(|s| s.mode.take())
            .ok_or_else(|| RegistryError::SubjectNotFound(subject.to_string()))?;
        self.tidy(subject, &[]);
        self.changed();
        Ok(old)
    }

    /// `POST /compatibility/subjects/{s}/versions/{v}` (a version) or
    /// `.../versions` (None: every live version the level asks for).
    /// `latest` of a subject without versions is compatible, as Confluent.
    /// An invalid schema is a 42201, or with `verbose` an incompatible
    /// answer saying why.
    pub fn test_compatibility(
        &self,
        subject: &str,
        spec: Option<VersionSpec>,
        new: &NewSchema,
        normalize: bool,
        verbose: bool,
    ) -> Result<CompatibilityResult> {
        let against: Vec<(i32, i32)> = match spec {
            None => self
                .subject(subject)
                .map(|s| {
                    s.versions
                        .iter()
                        .filter(|(_, v)| !v.deleted)
                        .map(|(n, v)| (*n, v.id))
                        .collect()
                })
                .unwrap_or_default(),
            Some(spec) => match self.resolve(subject, spec, false) {
                Ok((n, v)) => vec![(n, v.id)],
                Err(_) if spec == VersionSpec::Latest => Vec::new(),
                Err(RegistryError::SubjectNotFound(_)) => {
                    return Err(RegistryError::VersionNotFound(match spec {
                        VersionSpec::Number(n) => n.to_string(),
                        VersionSpec::Latest => "-1".into(),
                    }))
                }
                Err(e) => return Err(e),
            },
        };
        let candidate = StoredSchema {
            schema_type: new.schema_type,
            schema: format::stored_text(new.schema_type, &new.schema, normalize)?,
            references: new.references.clone(),
            metadata: None,
            rule_set: None,
        };
        let parsed = match self.parse_stored(&candidate) {
            Ok(p) => p,
            Err(RegistryError::InvalidSchema(why)) if verbose => {
                return Ok(CompatibilityResult {
                    is_compatible: false,
                    messages: vec![why],
                })
            }
            Err(e) => return Err(e),
        };
        let level = self.compatibility_of(subject);
        // A single named version is checked as the level says, transitive
        // or not: there is only one.
        let messages = self.check_against(&parsed, &against, level)?;
        Ok(CompatibilityResult {
            is_compatible: messages.is_empty(),
            messages,
        })
    }
}
