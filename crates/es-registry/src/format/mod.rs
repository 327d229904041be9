//! The schema formats behind one door: [`parse`] a schema of any type
//! (with the texts of the schemas it references), [`incompatibilities`]
//! between two parsed schemas, and [`identity`], the text two registrations
//! must share to be the same schema. Avro is parsed and checked by
//! [`avro`] and [`avro_compat`]; JSON Schema and Protobuf are not parsed
//! yet and are refused as invalid schemas (42201), so nothing unchecked is
//! stored.

pub mod avro;
pub mod avro_compat;
mod text;

use crate::error::RegistryError;
use crate::model::SchemaType;

pub use text::minify;

/// A schema that parsed.
#[derive(Debug, Clone)]
pub enum Parsed {
    Avro(avro::Avro),
}

impl Parsed {
    pub fn schema_type(&self) -> SchemaType {
        match self {
            Parsed::Avro(_) => SchemaType::Avro,
        }
    }
}

/// Parses `text` as a schema of type `t`; `deps` are the texts of the
/// schemas it references (all of them, transitively, each once).
/// A parser that panics on some input is caught: the schema is invalid.
pub fn parse(t: SchemaType, text: &str, deps: &[&str]) -> Result<Parsed, RegistryError> {
    let invalid = |why: String| {
        RegistryError::InvalidSchema(format!(
            "Invalid schema of type {}, details: {why}",
            t.as_str()
        ))
    };
    match t {
        SchemaType::Avro => {
            let parsed = std::panic::catch_unwind(|| avro::parse(text, deps))
                .map_err(|_| invalid("the Avro parser failed on this schema".into()))?;
            parsed.map(Parsed::Avro).map_err(invalid)
        }
        SchemaType::Json | SchemaType::Protobuf => Err(invalid(format!(
            "schemas of type {} are not supported by this registry yet (AVRO is)",
            t.as_str()
        ))),
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
    }
}

/// What makes two registrations the same schema: the type, and the text
/// with insignificant differences removed (for the JSON formats: white
/// space and the order of object keys).
pub fn identity(t: SchemaType, text: &str) -> String {
    match t {
        SchemaType::Avro | SchemaType::Json => {
            text::sorted_json(text).unwrap_or_else(|| minify(text))
        }
        SchemaType::Protobuf => text.trim().to_string(),
    }
}

/// The text stored for a schema: the client's text without insignificant
/// white space, or with `normalize` its normal form (sorted keys).
pub fn stored_text(t: SchemaType, text: &str, normalize: bool) -> String {
    match t {
        SchemaType::Avro | SchemaType::Json if normalize => {
            text::sorted_json(text).unwrap_or_else(|| minify(text))
        }
        SchemaType::Avro | SchemaType::Json => minify(text),
        SchemaType::Protobuf => text.trim().to_string(),
    }
}
