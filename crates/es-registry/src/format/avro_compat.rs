//! Avro schema resolution as a compatibility check: can a reader with one
//! schema decode data written with another? The rules are the Avro
//! specification's "Schema Resolution", checked the way Avro's Java
//! `SchemaCompatibility` (which Confluent's registry runs) checks them:
//! every incompatibility is collected, each with its type, its location
//! (`/fields/1/type`) and the detail Java gives, and Confluent's sentence
//! for it ("The field 'x' at path '/fields/1' in the new schema has no
//! default value and is missing in the old schema").
//!
//! Logical types are checked as their underlying types (a `date` is an
//! `int`), as Java does. A record reached again while it is being checked
//! (a recursive schema) counts as compatible there, and a record pair
//! checked once is not checked again, as Java's memo does; at most
//! [`FOUND_MAX`] incompatibilities are reported.

use std::collections::{BTreeSet, HashMap, HashSet};

use apache_avro::schema::{EnumSchema, Name, RecordField, RecordSchema, UnionSchema};
use apache_avro::Schema;

use super::avro::Avro;

/// What kind of incompatibility (Java's `SchemaIncompatibilityType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    NameMismatch,
    FixedSizeMismatch,
    MissingEnumSymbols,
    ReaderFieldMissingDefaultValue,
    TypeMismatch,
    MissingUnionBranch,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::NameMismatch => "NAME_MISMATCH",
            Kind::FixedSizeMismatch => "FIXED_SIZE_MISMATCH",
            Kind::MissingEnumSymbols => "MISSING_ENUM_SYMBOLS",
            Kind::ReaderFieldMissingDefaultValue => "READER_FIELD_MISSING_DEFAULT_VALUE",
            Kind::TypeMismatch => "TYPE_MISMATCH",
            Kind::MissingUnionBranch => "MISSING_UNION_BRANCH",
        }
    }
}

/// One reason a reader cannot read a writer's data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incompatibility {
    pub kind: Kind,
    /// Where, as a path into the reader's schema (`/fields/0/type`).
    pub location: String,
    /// Java's message: a field name, missing symbols, the expected name...
    pub detail: String,
}

impl Incompatibility {
    /// Confluent's sentence, with `reader` and `writer` naming the two
    /// schemas ("new" and "old", or the other way round).
    pub fn describe(&self, reader: &str, writer: &str) -> String {
        let path = &self.location;
        let detail = &self.detail;
        let description = match self.kind {
            Kind::FixedSizeMismatch => format!(
                "The size of FIXED type field at path '{path}' in the {reader} schema does not match with the {writer} schema"
            ),
            Kind::TypeMismatch => format!(
                "The type (path '{path}') of a field in the {reader} schema does not match with the {writer} schema"
            ),
            Kind::NameMismatch => format!("The name of the schema has changed (path '{path}')"),
            Kind::MissingEnumSymbols => format!(
                "The {reader} schema is missing enum symbols '{detail}' at path '{path}' in the {writer} schema"
            ),
            Kind::MissingUnionBranch => format!(
                "The {reader} schema is missing a type inside a union field at path '{path}' in the {writer} schema"
            ),
            Kind::ReaderFieldMissingDefaultValue => format!(
                "The field '{detail}' at path '{path}' in the {reader} schema has no default value and is missing in the {writer} schema"
            ),
        };
        format!(
            "{{errorType:'{}', description:'{description}', additionalInfo:'{detail}'}}",
            self.kind.as_str()
        )
    }
}

/// Most incompatibilities one check reports (a recursive or widely shared
/// record could otherwise multiply them without bound).
const FOUND_MAX: usize = 1_000;

/// Every reason `reader` cannot read data written with `writer` (empty:
/// it can).
pub fn check(reader: &Avro, writer: &Avro) -> Vec<Incompatibility> {
    let mut c = Checker {
        reader_names: reader.names(),
        writer_names: writer.names(),
        in_progress: HashSet::new(),
        memo: HashMap::new(),
        location: Vec::new(),
        found: Vec::new(),
    };
    c.check(&reader.schema, &writer.schema);
    c.found
}

/// A schema as resolution sees it: logical types as their underlying type,
/// references resolved.
#[derive(Clone, Copy)]
enum Base<'a> {
    Null,
    Boolean,
    Int,
    Long,
    Float,
    Double,
    Bytes,
    String,
    Array(&'a Schema),
    Map(&'a Schema),
    Union(&'a UnionSchema),
    Record(&'a RecordSchema),
    Enum(&'a EnumSchema),
    /// A fixed type: its name (none for `duration`, which apache-avro keeps
    /// without one), aliases and size.
    Fixed(Option<&'a Name>, &'a [apache_avro::schema::Alias], usize),
    /// A reference to a name neither schema defines (cannot happen for a
    /// schema that parsed; treated as a type of its own).
    Unknown,
}

impl Base<'_> {
    /// Java's `Schema.Type` name.
    fn type_name(&self) -> &'static str {
        match self {
            Base::Null => "NULL",
            Base::Boolean => "BOOLEAN",
            Base::Int => "INT",
            Base::Long => "LONG",
            Base::Float => "FLOAT",
            Base::Double => "DOUBLE",
            Base::Bytes => "BYTES",
            Base::String => "STRING",
            Base::Array(_) => "ARRAY",
            Base::Map(_) => "MAP",
            Base::Union(_) => "UNION",
            Base::Record(_) => "RECORD",
            Base::Enum(_) => "ENUM",
            Base::Fixed(..) => "FIXED",
            Base::Unknown => "UNKNOWN",
        }
    }
}

fn base<'a>(s: &'a Schema, names: &HashMap<String, &'a Schema>) -> Base<'a> {
    base_depth(s, names, 0)
}

fn base_depth<'a>(s: &'a Schema, names: &HashMap<String, &'a Schema>, depth: u8) -> Base<'a> {
    match s {
        Schema::Null => Base::Null,
        Schema::Boolean => Base::Boolean,
        Schema::Int | Schema::Date | Schema::TimeMillis => Base::Int,
        Schema::Long
        | Schema::TimeMicros
        | Schema::TimestampMillis
        | Schema::TimestampMicros
        | Schema::TimestampNanos
        | Schema::LocalTimestampMillis
        | Schema::LocalTimestampMicros
        | Schema::LocalTimestampNanos => Base::Long,
        Schema::Float => Base::Float,
        Schema::Double => Base::Double,
        Schema::Bytes | Schema::BigDecimal => Base::Bytes,
        Schema::String | Schema::Uuid => Base::String,
        Schema::Array(a) => Base::Array(&a.items),
        Schema::Map(m) => Base::Map(&m.types),
        Schema::Union(u) => Base::Union(u),
        Schema::Record(r) => Base::Record(r),
        Schema::Enum(e) => Base::Enum(e),
        Schema::Fixed(f) => Base::Fixed(Some(&f.name), f.aliases.as_deref().unwrap_or(&[]), f.size),
        Schema::Duration => Base::Fixed(None, &[], 12),
        Schema::Decimal(d) if depth < 2 => base_depth(&d.inner, names, depth + 1),
        Schema::Ref { name } if depth < 2 => match names.get(&name.fullname(None)) {
            Some(target) => base_depth(target, names, depth + 1),
            None => Base::Unknown,
        },
        Schema::Decimal(_) | Schema::Ref { .. } => Base::Unknown,
    }
}

struct Checker<'a> {
    reader_names: HashMap<String, &'a Schema>,
    writer_names: HashMap<String, &'a Schema>,
    /// Record pairs being checked (reader full name, writer full name).
    in_progress: HashSet<(String, String)>,
    /// What each record pair checked so far found (as Java's memo, whose
    /// results keep the location they were first found at): a record
    /// reached along many paths is checked once.
    memo: HashMap<(String, String), Vec<Incompatibility>>,
    location: Vec<String>,
    found: Vec<Incompatibility>,
}

impl<'a> Checker<'a> {
    fn incompatible(&mut self, kind: Kind, detail: String) {
        if self.found.len() >= FOUND_MAX {
            return;
        }
        let location = if self.location.is_empty() {
            "/".to_string()
        } else {
            format!("/{}", self.location.join("/"))
        };
        self.found.push(Incompatibility {
            kind,
            location,
            detail,
        });
    }

    /// Checks with `token` pushed onto the location.
    fn check_at(&mut self, token: &str, reader: &'a Schema, writer: &'a Schema) -> bool {
        self.location.push(token.to_string());
        let ok = self.check(reader, writer);
        self.location.pop();
        ok
    }

    /// Whether `reader` can read `writer`'s data; records why not.
    fn check(&mut self, reader: &'a Schema, writer: &'a Schema) -> bool {
        let before = self.found.len();
        let r = base(reader, &self.reader_names);
        let w = base(writer, &self.writer_names);
        self.check_base(r, w);
        self.found.len() == before
    }

    /// Whether `reader` could read `writer` (nothing recorded).
    fn compatible(&mut self, reader: &'a Schema, writer: &'a Schema) -> bool {
        let before = self.found.len();
        let ok = self.check(reader, writer);
        self.found.truncate(before);
        ok
    }

    fn check_base(&mut self, r: Base<'a>, w: Base<'a>) {
        match (r, w) {
            (Base::Null, Base::Null)
            | (Base::Boolean, Base::Boolean)
            | (Base::Int, Base::Int)
            | (Base::Long, Base::Long)
            | (Base::Float, Base::Float)
            | (Base::Double, Base::Double)
            | (Base::Bytes, Base::Bytes)
            | (Base::String, Base::String) => {}
            (Base::Array(ri), Base::Array(wi)) => {
                self.check_at("items", ri, wi);
            }
            (Base::Map(rv), Base::Map(wv)) => {
                self.check_at("values", rv, wv);
            }
            (Base::Fixed(rn, ra, rs), Base::Fixed(wn, _, ws)) => {
                if let (Some(rn), Some(wn)) = (rn, wn) {
                    let aliases = alias_names(rn, Some(ra));
                    self.check_name(rn, &aliases, wn);
                }
                if rs != ws {
                    self.location.push("size".into());
                    self.incompatible(
                        Kind::FixedSizeMismatch,
                        format!("expected: {ws}, found: {rs}"),
                    );
                    self.location.pop();
                }
            }
            (Base::Enum(re), Base::Enum(we)) => {
                let aliases = alias_names(&re.name, re.aliases.as_deref());
                self.check_name(&re.name, &aliases, &we.name);
                self.check_enum_symbols(re, we);
            }
            (Base::Record(rr), Base::Record(wr)) => {
                let aliases = alias_names(&rr.name, rr.aliases.as_deref());
                self.check_name(&rr.name, &aliases, &wr.name);
                let key = (rr.name.fullname(None), wr.name.fullname(None));
                if let Some(found) = self.memo.get(&key) {
                    let room = FOUND_MAX.saturating_sub(self.found.len());
                    let found: Vec<Incompatibility> = found.iter().take(room).cloned().collect();
                    self.found.extend(found);
                } else if self.in_progress.insert(key.clone()) {
                    let before = self.found.len();
                    self.check_record_fields(rr, wr);
                    let found = self.found.get(before..).unwrap_or_default().to_vec();
                    self.memo.insert(key.clone(), found);
                    self.in_progress.remove(&key);
                }
            }
            (Base::Union(ru), Base::Union(wu)) => {
                // Every branch the writer may have written must be readable.
                for (i, wb) in wu.variants().iter().enumerate() {
                    self.location.push(i.to_string());
                    if !self.compatible_with_union(ru, wb) {
                        let t = base(wb, &self.writer_names).type_name();
                        self.incompatible(
                            Kind::MissingUnionBranch,
                            format!("reader union lacking writer type: {t}"),
                        );
                    }
                    self.location.pop();
                }
            }
            (_, Base::Union(wu)) => {
                // A reader that is no union must read every writer branch.
                for (i, wb) in wu.variants().iter().enumerate() {
                    self.location.push(i.to_string());
                    let wb = base(wb, &self.writer_names);
                    self.check_base(r, wb);
                    self.location.pop();
                }
            }
            (Base::Union(ru), _) => {
                let fits = ru.variants().iter().any(|rb| {
                    let before = self.found.len();
                    let rb = base(rb, &self.reader_names);
                    self.check_base(rb, w);
                    let ok = self.found.len() == before;
                    self.found.truncate(before);
                    ok
                });
                if !fits {
                    self.incompatible(
                        Kind::MissingUnionBranch,
                        format!("reader union lacking writer type: {}", w.type_name()),
                    );
                }
            }
            // The promotions the specification allows.
            (Base::Long, Base::Int)
            | (Base::Float, Base::Int | Base::Long)
            | (Base::Double, Base::Int | Base::Long | Base::Float)
            | (Base::Bytes, Base::String)
            | (Base::String, Base::Bytes) => {}
            _ => self.incompatible(
                Kind::TypeMismatch,
                format!(
                    "reader type: {} not compatible with writer type: {}",
                    r.type_name(),
                    w.type_name()
                ),
            ),
        }
    }

    /// Whether some branch of the reader's union reads `writer`.
    fn compatible_with_union(&mut self, ru: &'a UnionSchema, writer: &'a Schema) -> bool {
        let w = base(writer, &self.writer_names);
        if let Base::Union(_) = w {
            return false;
        }
        ru.variants().iter().any(|rb| self.compatible(rb, writer))
    }

    /// Java's `schemaNameEquals`: the same unqualified name, or the
    /// writer's full name among the reader's aliases.
    fn check_name(&mut self, reader: &Name, reader_aliases: &[String], writer: &Name) {
        let writer_full = writer.fullname(None);
        if reader.name == writer.name || reader_aliases.contains(&writer_full) {
            return;
        }
        self.location.push("name".into());
        self.incompatible(Kind::NameMismatch, format!("expected: {writer_full}"));
        self.location.pop();
    }

    fn check_enum_symbols(&mut self, r: &EnumSchema, w: &EnumSchema) {
        let reader_symbols: HashSet<&String> = r.symbols.iter().collect();
        let missing: BTreeSet<&String> = w
            .symbols
            .iter()
            .filter(|s| !reader_symbols.contains(s))
            .collect();
        if missing.is_empty() {
            return;
        }
        // A reader default that is one of its symbols takes unknown ones.
        if r.default.as_ref().is_some_and(|d| r.symbols.contains(d)) {
            return;
        }
        let list: Vec<&str> = missing.iter().map(|s| s.as_str()).collect();
        self.location.push("symbols".into());
        self.incompatible(Kind::MissingEnumSymbols, format!("[{}]", list.join(", ")));
        self.location.pop();
    }

    fn check_record_fields(&mut self, r: &'a RecordSchema, w: &'a RecordSchema) {
        // The writer's fields by name only (its aliases play no part, as
        // in Java's `Schema.getField`).
        let by_name: HashMap<&str, &'a RecordField> =
            w.fields.iter().map(|f| (f.name.as_str(), f)).collect();
        self.location.push("fields".into());
        for (pos, rf) in r.fields.iter().enumerate() {
            self.location.push(pos.to_string());
            let wf = by_name.get(rf.name.as_str()).or_else(|| {
                rf.aliases
                    .iter()
                    .flatten()
                    .find_map(|a| by_name.get(a.as_str()))
            });
            match wf {
                Some(wf) => {
                    self.check_at("type", &rf.schema, &wf.schema);
                }
                None if rf.default.is_some() => {}
                None => match &rf.schema {
                    // Java checks an enum with a default against the
                    // writer's record itself (which never matches).
                    Schema::Enum(e) if e.default.is_some() => {
                        self.location.push("type".into());
                        let rb = base(&rf.schema, &self.reader_names);
                        self.check_base(rb, Base::Record(w));
                        self.location.pop();
                    }
                    _ => self.incompatible(Kind::ReaderFieldMissingDefaultValue, rf.name.clone()),
                },
            }
            self.location.pop();
        }
        self.location.pop();
    }
}

/// A named type's aliases as full names (an alias without a namespace
/// takes the type's).
fn alias_names(name: &Name, aliases: Option<&[apache_avro::schema::Alias]>) -> Vec<String> {
    aliases
        .unwrap_or(&[])
        .iter()
        .map(|a| a.fullname(name.namespace.clone()))
        .collect()
}
