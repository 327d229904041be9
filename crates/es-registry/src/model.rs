//! The registry's vocabulary: schema types, compatibility levels, modes,
//! references, and the request and answer bodies of the REST API in
//! Confluent's JSON field names. Pure data; the rules live in
//! [`crate::registry`].

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::error::{RegistryError, Result};

/// A schema's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum SchemaType {
    Avro,
    Json,
    Protobuf,
}

impl SchemaType {
    /// Parses a request's `schemaType` (absent: AVRO, as Confluent).
    pub fn parse(s: Option<&str>) -> Result<SchemaType> {
        match s.map(str::to_ascii_uppercase).as_deref() {
            None | Some("AVRO") | Some("") => Ok(SchemaType::Avro),
            Some("JSON") => Ok(SchemaType::Json),
            Some("PROTOBUF") => Ok(SchemaType::Protobuf),
            Some(other) => Err(RegistryError::InvalidSchema(format!(
                "Invalid schema type {other}"
            ))),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SchemaType::Avro => "AVRO",
            SchemaType::Json => "JSON",
            SchemaType::Protobuf => "PROTOBUF",
        }
    }

    /// What `GET /schemas/types` lists: the formats this registry parses, in
    /// the order Confluent lists them.
    pub const SUPPORTED: [SchemaType; 3] =
        [SchemaType::Json, SchemaType::Protobuf, SchemaType::Avro];
}

/// A compatibility level (Confluent's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Compatibility {
    None,
    Backward,
    BackwardTransitive,
    Forward,
    ForwardTransitive,
    Full,
    FullTransitive,
}

impl Compatibility {
    /// Confluent's default.
    pub const DEFAULT: Compatibility = Compatibility::Backward;

    /// Parses a level, case-insensitively as Confluent does.
    pub fn parse(s: &str) -> Result<Compatibility> {
        use Compatibility::*;
        Ok(match s.to_ascii_uppercase().as_str() {
            "NONE" => None,
            "BACKWARD" => Backward,
            "BACKWARD_TRANSITIVE" => BackwardTransitive,
            "FORWARD" => Forward,
            "FORWARD_TRANSITIVE" => ForwardTransitive,
            "FULL" => Full,
            "FULL_TRANSITIVE" => FullTransitive,
            _ => return Err(RegistryError::InvalidCompatibility),
        })
    }

    pub fn as_str(self) -> &'static str {
        use Compatibility::*;
        match self {
            None => "NONE",
            Backward => "BACKWARD",
            BackwardTransitive => "BACKWARD_TRANSITIVE",
            Forward => "FORWARD",
            ForwardTransitive => "FORWARD_TRANSITIVE",
            Full => "FULL",
            FullTransitive => "FULL_TRANSITIVE",
        }
    }

    /// Whether the new schema must read data written with the old ones.
    pub fn backward(self) -> bool {
        use Compatibility::*;
        matches!(self, Backward | BackwardTransitive | Full | FullTransitive)
    }

    /// Whether the old schemas must read data written with the new one.
    pub fn forward(self) -> bool {
        use Compatibility::*;
        matches!(self, Forward | ForwardTransitive | Full | FullTransitive)
    }

    /// Whether every earlier version is checked, not only the latest.
    pub fn transitive(self) -> bool {
        use Compatibility::*;
        matches!(
            self,
            BackwardTransitive | ForwardTransitive | FullTransitive
        )
    }
}

/// A registry or subject mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Mode {
    /// Registration with compatibility checks; ids assigned by the registry.
    Readwrite,
    /// No registration, deletion or configuration change.
    Readonly,
    /// Registration with the ids (and versions) the client gives, no checks.
    Import,
}

impl Mode {
    pub fn parse(s: &str) -> Result<Mode> {
        match s.to_ascii_uppercase().as_str() {
            "READWRITE" => Ok(Mode::Readwrite),
            "READONLY" => Ok(Mode::Readonly),
            "IMPORT" => Ok(Mode::Import),
            _ => Err(RegistryError::InvalidMode),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Readwrite => "READWRITE",
            Mode::Readonly => "READONLY",
            Mode::Import => "IMPORT",
        }
    }
}

/// A schema's reference to another subject's version (Confluent's
/// `SchemaReference`): `name` is how the schema names it (an Avro full
/// name, a JSON Schema `$ref` URL, a Protobuf import path).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Reference {
    pub name: String,
    pub subject: String,
    pub version: i32,
}

/// A schema's metadata (Confluent's data contracts): free properties,
/// tags by schema path, and the names of sensitive fields. Sorted, as
/// Confluent keeps them, so that equal metadata is equal JSON; an empty
/// member is left out of the JSON (Confluent's `NON_EMPTY`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Metadata {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, BTreeSet<String>>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub properties: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub sensitive: BTreeSet<String>,
}

/// The property Confluent keeps a schema's version in, once a client has
/// asked for it (a registration naming its version).
pub const CONFLUENT_VERSION: &str = "confluent:version";

/// One rule of a rule set (Confluent's `Rule`), kept as given: es stores
/// and returns rules, it does not run them (clients do).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Rule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doc: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub rule_type: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub tags: BTreeSet<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expr: Option<String>,
    #[serde(rename = "onSuccess", default, skip_serializing_if = "Option::is_none")]
    pub on_success: Option<String>,
    #[serde(rename = "onFailure", default, skip_serializing_if = "Option::is_none")]
    pub on_failure: Option<String>,
    #[serde(default)]
    pub disabled: bool,
}

/// A schema's rule set (Confluent's `RuleSet`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RuleSet {
    #[serde(
        rename = "migrationRules",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub migration_rules: Vec<Rule>,
    #[serde(rename = "domainRules", default, skip_serializing_if = "Vec::is_empty")]
    pub domain_rules: Vec<Rule>,
    #[serde(
        rename = "encodingRules",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub encoding_rules: Vec<Rule>,
    #[serde(rename = "enableAt", default, skip_serializing_if = "Option::is_none")]
    pub enable_at: Option<String>,
}

/// A schema as a request gives it (register, lookup, compatibility test).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewSchema {
    pub schema_type: SchemaType,
    pub schema: String,
    pub references: Vec<Reference>,
    pub metadata: Option<Metadata>,
    pub rule_set: Option<RuleSet>,
    /// IMPORT mode: the id the schema must get.
    pub id: Option<i32>,
    /// IMPORT mode: the version the schema must get.
    pub version: Option<i32>,
}

/// One version of a subject, as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SubjectVersion {
    pub subject: String,
    pub version: i32,
    pub id: i32,
    #[serde(rename = "schemaType", skip_serializing_if = "is_avro")]
    pub schema_type: SchemaType,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub references: Vec<Reference>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    #[serde(rename = "ruleSet", skip_serializing_if = "Option::is_none")]
    pub rule_set: Option<RuleSet>,
    pub schema: String,
}

/// A schema by id, as `GET /schemas/ids/{id}` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SchemaById {
    #[serde(rename = "schemaType", skip_serializing_if = "is_avro")]
    pub schema_type: SchemaType,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub references: Vec<Reference>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    #[serde(rename = "ruleSet", skip_serializing_if = "Option::is_none")]
    pub rule_set: Option<RuleSet>,
    pub schema: String,
}

/// The answer to a registration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Registered {
    pub id: i32,
    pub version: i32,
}

/// A version is named by a number, `latest` or `-1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VersionSpec {
    Latest,
    Number(i32),
}

impl VersionSpec {
    /// Parses a path's `{version}`: 1 to 2^31-1, `latest` or `-1` (42202 otherwise).
    pub fn parse(s: &str) -> Result<VersionSpec> {
        if s.eq_ignore_ascii_case("latest") {
            return Ok(VersionSpec::Latest);
        }
        match s.parse::<i32>() {
            Ok(-1) => Ok(VersionSpec::Latest),
            Ok(n) if n >= 1 => Ok(VersionSpec::Number(n)),
            _ => Err(RegistryError::InvalidVersion(s.to_string())),
        }
    }
}

fn is_avro(t: &SchemaType) -> bool {
    *t == SchemaType::Avro
}
