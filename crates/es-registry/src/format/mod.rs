//! The schema formats behind one door: [`parse`] a schema of any type
//! (with the schemas it references), [`incompatibilities`] between two
//! parsed schemas, and [`identity`], the text two registrations must share
//! to be the same schema. Avro is parsed and checked by [`avro`] and
//! [`avro_compat`], JSON Schema by [`json`] and [`json_compat`] (with
//! `json_shapes` and `json_messages`), Protobuf by [`proto`] and
//! [`proto_compat`], with [`proto_text`] for schemas sent as a base64
//! `FileDescriptorProto` (printed as `.proto` text before anything else). A parser that panics is caught: the schema is refused
//! as invalid (42201), so nothing unchecked is stored.

pub mod avro;
pub mod avro_compat;
pub mod json;
pub mod json_compat;
mod json_messages;
mod json_shapes;
pub mod proto;
pub mod proto_compat;
pub mod proto_text;
mod text;

use crate::error::RegistryError;
use crate::model::SchemaType;

pub use text::minify;

/// A schema that parsed.
#[derive(Debug, Clone)]
pub enum Parsed {
    Avro(avro::Avro),
    Json(json_compat::Json),
    Protobuf(proto::Proto),
}

impl Parsed {
    pub fn schema_type(&self) -> SchemaType {
        match self {
            Parsed::Avro(_) => SchemaType::Avro,
            Parsed::Json(_) => SchemaType::Json,
            Parsed::Protobuf(_) => SchemaType::Protobuf,
        }
    }
}

/// Parses `text` as a schema of type `t`; `deps` are the schemas it
/// references (all of them, transitively, each once) as (the name they are
/// referenced by, their text). A parser that panics on some input is
/// caught: the schema is invalid.
pub fn parse(t: SchemaType, text: &str, deps: &[(&str, &str)]) -> Result<Parsed, RegistryError> {
    let invalid = |why: String| {
        RegistryError::InvalidSchema(format!(
            "Invalid schema of type {}, details: {why}",
            t.as_str()
        ))
    };
    let caught = |_| invalid(format!("the {} parser failed on this schema", t.as_str()));
    match t {
        SchemaType::Avro => {
            let texts: Vec<&str> = deps.iter().map(|(_, text)| *text).collect();
            let parsed = std::panic::catch_unwind(|| avro::parse(text, &texts)).map_err(caught)?;
            parsed.map(Parsed::Avro).map_err(invalid)
        }
        SchemaType::Json => {
            let parsed = std::panic::catch_unwind(|| json::parse(text, deps)).map_err(caught)?;
            parsed.map(Parsed::Json).map_err(invalid)
        }
        SchemaType::Protobuf => {
            let parsed = std::panic::catch_unwind(|| proto::parse(text, deps)).map_err(caught)?;
            parsed.map(Parsed::Protobuf).map_err(invalid)
        }
    }
}

/// Confluent's messages for every reason a reader with schema `reader`
/// cannot read data written with `writer`; `reader_word` and `writer_word`
/// name them ("new" and "old").
pub fn incompatibilities(
    reader: &Parsed,
    writer: &Parsed,
    reader_word: &str,
    writer_word: &str,
) -> Vec<String> {
    match (reader, writer) {
        (Parsed::Avro(r), Parsed::Avro(w)) => avro_compat::check(r, w)
            .iter()
            .map(|i| i.describe(reader_word, writer_word))
            .collect(),
        // Confluent diffs the writer's schema (the original) to the
        // reader's (the update).
        (Parsed::Json(r), Parsed::Json(w)) => json_compat::incompatible(w, r)
            .iter()
            .map(|d| d.describe(reader_word, writer_word))
            .collect(),
        // The same: the original is the writer's schema.
        (Parsed::Protobuf(r), Parsed::Protobuf(w)) => proto_compat::incompatible(w, r)
            .iter()
            .map(|d| d.describe(reader_word, writer_word))
            .collect(),
        _ => vec!["Incompatible because of different schema type".to_string()],
    }
}

/// What makes two registrations the same schema: for Avro and JSON Schema
/// the text without insignificant differences (white space, the order of
/// object keys); for Protobuf the compiled file printed as Confluent prints
/// a descriptor (so comments, spacing, the order of declarations within a
/// section and a schema sent as text or as a descriptor do not matter).
pub fn identity(parsed: &Parsed, text: &str) -> String {
    match parsed {
        Parsed::Avro(_) | Parsed::Json(_) => {
            text::sorted_json(text).unwrap_or_else(|| minify(text))
        }
        Parsed::Protobuf(p) => proto_text::identity(p)
            .or_else(|| proto::normal_form(text).ok())
            .unwrap_or_else(|| text.to_string()),
    }
}

/// The text stored for a schema: the client's text without insignificant
/// white space, or with `normalize` its normal form (sorted keys). A
/// Protobuf schema sent as a base64 `FileDescriptorProto` is stored as the
/// `.proto` text Confluent prints for it.
pub fn stored_text(t: SchemaType, text: &str, normalize: bool) -> Result<String, RegistryError> {
    Ok(match t {
        SchemaType::Avro | SchemaType::Json if normalize => {
            text::sorted_json(text).unwrap_or_else(|| minify(text))
        }
        SchemaType::Avro | SchemaType::Json => minify(text),
        SchemaType::Protobuf if proto_text::is_base64(text) => {
            let fdp = proto_text::decode_base64(text).map_err(|why| {
                RegistryError::InvalidSchema(format!(
                    "Invalid schema of type PROTOBUF, details: Could not parse Protobuf - {why}"
                ))
            })?;
            let printed = proto_text::print(&fdp);
            if normalize {
                proto::normal_form(&printed).unwrap_or(printed)
            } else {
                printed
            }
        }
        SchemaType::Protobuf if normalize => {
            proto::normal_form(text).unwrap_or_else(|_| text.trim().to_string())
        }
        SchemaType::Protobuf => text.trim().to_string(),
    })
}
