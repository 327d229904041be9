//! The registry's reads: subjects and their versions, schemas by id, and
//! the lookup of a schema under a subject.

use super::{content_key, Registry, StoredSchema};
use crate::error::{RegistryError, Result};
use crate::format;
use crate::model::{NewSchema, SchemaById, SubjectVersion, VersionSpec};

impl Registry {
    /// `GET /subjects`: subjects with a live version (or any, with
    /// `deleted`) whose names start with `prefix`, sorted.
    pub fn subjects(&self, prefix: &str, deleted: bool) -> Vec<String> {
        self.state
            .subjects
            .iter()
            .filter(|(name, s)| name.starts_with(prefix) && s.has_versions(deleted))
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// `GET /subjects/{s}/versions`.
    pub fn versions(&self, subject: &str, deleted: bool) -> Result<Vec<i32>> {
        let s = self.subject_with_versions(subject, deleted)?;
        Ok(s.versions
            .iter()
            .filter(|(_, v)| deleted || !v.deleted)
            .map(|(n, _)| *n)
            .collect())
    }

    fn subject_version(&self, subject: &str, version: i32, id: i32) -> Result<SubjectVersion> {
        let s = self.schema(id)?;
        Ok(SubjectVersion {
            subject: subject.to_string(),
            version,
            id,
            schema_type: s.schema_type,
            references: s.references.clone(),
            metadata: s.metadata.clone(),
            rule_set: s.rule_set.clone(),
            schema: s.schema.clone(),
        })
    }

    /// `GET /subjects/{s}/metadata`: the newest version (live, or any with
    /// `deleted`) whose metadata has every (key, value) of `wanted` among
    /// its properties (Confluent's `getLatestWithMetadata`): 40401 without
    /// the subject, 40403 without such a version.
    pub fn latest_with_metadata(
        &self,
        subject: &str,
        wanted: &[(String, String)],
        deleted: bool,
    ) -> Result<SubjectVersion> {
        let s = self.subject_with_versions(subject, deleted)?;
        for (n, v) in s.versions.iter().rev() {
            if v.deleted && !deleted {
                continue;
            }
            let matches = self.schema(v.id)?.metadata.as_ref().is_some_and(|m| {
                wanted
                    .iter()
                    .all(|(k, val)| m.properties.get(k) == Some(val))
            });
            if matches {
                return self.subject_version(subject, *n, v.id);
            }
        }
        Err(RegistryError::SchemaNotFoundUnder)
    }

    /// `GET /subjects/{s}/versions/{v}`.
    pub fn version(
        &self,
        subject: &str,
        spec: VersionSpec,
        deleted: bool,
    ) -> Result<SubjectVersion> {
        let (n, v) = self.resolve(subject, spec, deleted)?;
        self.subject_version(subject, n, v.id)
    }

    /// `GET /subjects/{s}/versions/{v}/referencedby`: the ids of the
    /// schemas (live versions of any subject) that reference this version.
    pub fn referenced_by(&self, subject: &str, spec: VersionSpec) -> Result<Vec<i32>> {
        let (n, _) = self.resolve(subject, spec, false)?;
        Ok(self.referrers(subject, n, false))
    }

    /// Ids of the schemas whose versions (live ones, or any with
    /// `deleted`) reference `subject` version `version`, sorted, each once.
    pub(super) fn referrers(&self, subject: &str, version: i32, deleted: bool) -> Vec<i32> {
        let mut ids: Vec<i32> = self
            .state
            .subjects
            .values()
            .flat_map(|s| s.versions.values())
            .filter(|v| deleted || !v.deleted)
            .map(|v| v.id)
            .filter(|id| {
                self.state.schemas.get(id).is_some_and(|s| {
                    s.references
                        .iter()
                        .any(|r| r.subject == subject && r.version == version)
                })
            })
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// `GET /schemas/ids/{id}`.
    pub fn schema_by_id(&self, id: i32) -> Result<SchemaById> {
        let s = self.schema(id)?;
        Ok(SchemaById {
            schema_type: s.schema_type,
            references: s.references.clone(),
            metadata: s.metadata.clone(),
            rule_set: s.rule_set.clone(),
            schema: s.schema.clone(),
        })
    }

    /// Schema `id`'s text in the `format` a request asks for (Confluent's
    /// `format` query parameter): `serialized` gives a Protobuf schema as
    /// the base64 of its compiled `FileDescriptorProto` (what Confluent's
    /// Protobuf deserializers ask for); any other format, and any format of
    /// the other types, the stored text (Confluent ignores formats it does
    /// not know).
    pub fn formatted(&self, id: i32, format: &str) -> Result<String> {
        let s = self.schema(id)?;
        if s.schema_type == crate::model::SchemaType::Protobuf
            && format.eq_ignore_ascii_case("serialized")
        {
            if let format::Parsed::Protobuf(p) = self.parse_stored(s)? {
                if let Some(b64) = format::proto_text::serialized(&p, "default") {
                    return Ok(b64);
                }
            }
        }
        Ok(s.schema.clone())
    }

    /// `GET /schemas/ids/{id}/versions`: (subject, version) pairs naming it.
    pub fn versions_by_id(&self, id: i32, deleted: bool) -> Result<Vec<(String, i32)>> {
        self.schema(id)?;
        Ok(self
            .state
            .subjects
            .iter()
            .flat_map(|(name, s)| {
                s.versions
                    .iter()
                    .filter(move |(_, v)| v.id == id && (deleted || !v.deleted))
                    .map(move |(n, _)| (name.clone(), *n))
            })
            .collect())
    }

    /// `GET /schemas/ids/{id}/subjects`.
    pub fn subjects_by_id(&self, id: i32, deleted: bool) -> Result<Vec<String>> {
        let mut out: Vec<String> = self
            .versions_by_id(id, deleted)?
            .into_iter()
            .map(|(s, _)| s)
            .collect();
        out.dedup();
        Ok(out)
    }

    /// `GET /schemas`: every version (live, or any with `deleted`) of the
    /// subjects starting with `prefix`, or only each subject's latest.
    pub fn schemas(&self, prefix: &str, deleted: bool, latest_only: bool) -> Vec<SubjectVersion> {
        let mut out = Vec::new();
        for (name, s) in self.state.subjects.range(prefix.to_string()..) {
            if !name.starts_with(prefix) {
                break;
            }
            let versions: Vec<(i32, i32)> = if latest_only {
                s.latest(deleted)
                    .map(|(n, v)| (n, v.id))
                    .into_iter()
                    .collect()
            } else {
                s.versions
                    .iter()
                    .filter(|(_, v)| deleted || !v.deleted)
                    .map(|(n, v)| (*n, v.id))
                    .collect()
            };
            for (n, id) in versions {
                if let Ok(v) = self.subject_version(name, n, id) {
                    out.push(v);
                }
            }
        }
        out
    }

    /// `POST /subjects/{s}`: the version of `subject` holding this schema
    /// (a live one, or any with `deleted`). The schema must parse.
    pub fn lookup(
        &self,
        subject: &str,
        new: &NewSchema,
        normalize: bool,
        deleted: bool,
    ) -> Result<SubjectVersion> {
        let s = self.subject_with_versions(subject, deleted)?;
        let candidate = StoredSchema {
            schema_type: new.schema_type,
            schema: format::stored_text(new.schema_type, &new.schema, normalize)?,
            references: new.references.clone(),
            metadata: new.metadata.clone(),
            rule_set: new.rule_set.clone(),
        };
        let parsed = self.parse_stored(&candidate)?;
        // As given, then with the latest version's metadata and rule set
        // where the request has none (as Confluent looks up).
        let inherited = self.with_inherited(subject, &candidate, None, false);
        for c in [&candidate, &inherited] {
            let Some(id) = self.content.get(&content_key(c, &parsed)).copied() else {
                continue;
            };
            if let Some((n, _)) = s
                .versions
                .iter()
                .rev()
                .find(|(_, v)| v.id == id && (deleted || !v.deleted))
            {
                return self.subject_version(subject, *n, id);
            }
        }
        Err(RegistryError::SchemaNotFoundUnder)
    }
}
