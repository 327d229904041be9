//! Lookups for a broker's produce-time validation (nothing of Kafka is
//! known here): whether a schema id is registered under a subject, and the
//! record name Confluent's `RecordNameStrategy` derives from a schema.

use crate::format::Parsed;

use super::Registry;

impl Registry {
    /// Whether a live (not soft-deleted) version of `subject` names schema
    /// `id`.
    pub fn is_registered(&self, subject: &str, id: i32) -> bool {
        self.subject(subject)
            .is_some_and(|s| s.versions.values().any(|v| v.id == id && !v.deleted))
    }

    /// The fully-qualified record name of schema `id`, as Confluent's
    /// serializers name it for `RecordNameStrategy`: an Avro record's (or
    /// enum's, fixed's) full name; a Protobuf schema's first message, with
    /// its package; a JSON Schema's `title`. None when the id is unknown,
    /// the schema does not parse, or it has no such name (an Avro primitive,
    /// a `.proto` without messages, a JSON Schema without a string `title`).
    pub fn record_name(&self, id: i32) -> Option<String> {
        let stored = self.state.schemas.get(&id)?;
        match self.parse_stored(stored).ok()? {
            Parsed::Avro(a) => match &a.schema {
                apache_avro::Schema::Record(r) => Some(r.name.fullname(None)),
                apache_avro::Schema::Enum(e) => Some(e.name.fullname(None)),
                apache_avro::Schema::Fixed(f) => Some(f.name.fullname(None)),
                _ => None,
            },
            Parsed::Protobuf(p) => p
                .file()?
                .messages()
                .next()
                .map(|m| m.full_name().to_string()),
            Parsed::Json(j) => j.root.get("title")?.as_str().map(str::to_string),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::model::{NewSchema, SchemaType};
    use crate::registry::Registry;

    fn register(r: &mut Registry, subject: &str, t: SchemaType, text: &str) -> i32 {
        let s = NewSchema {
            schema_type: t,
            schema: text.to_string(),
            references: Vec::new(),
            metadata: None,
            rule_set: None,
            id: None,
            version: None,
        };
        r.register(subject, &s, false).expect("registers").id
    }

    #[test]
    fn ids_are_registered_under_their_live_subjects_only() {
        let mut r = Registry::new();
        let id = register(&mut r, "t-value", SchemaType::Avro, r#""string""#);
        assert!(r.is_registered("t-value", id));
        assert!(!r.is_registered("t-key", id));
        assert!(!r.is_registered("t-value", id + 1));
        r.delete_subject("t-value", false).expect("soft delete");
        assert!(!r.is_registered("t-value", id));
        assert_eq!(r.record_name(id), None, "a primitive has no record name");
    }

    #[test]
    fn record_names_per_format() {
        let mut r = Registry::new();
        let avro = register(
            &mut r,
            "a",
            SchemaType::Avro,
            r#"{"type":"record","name":"User","namespace":"com.example","fields":[]}"#,
        );
        let dotted = register(
            &mut r,
            "b",
            SchemaType::Avro,
            r#"{"type":"record","name":"org.x.Order","fields":[]}"#,
        );
        let proto = register(
            &mut r,
            "c",
            SchemaType::Protobuf,
            "syntax = \"proto3\";\npackage shop.v1;\nmessage Cart { int32 n = 1; }\nmessage Other {}\n",
        );
        let json = register(
            &mut r,
            "d",
            SchemaType::Json,
            r#"{"title":"com.example.Event","type":"object"}"#,
        );
        let untitled = register(&mut r, "e", SchemaType::Json, r#"{"type":"object"}"#);
        assert_eq!(r.record_name(avro).as_deref(), Some("com.example.User"));
        assert_eq!(r.record_name(dotted).as_deref(), Some("org.x.Order"));
        assert_eq!(r.record_name(proto).as_deref(), Some("shop.v1.Cart"));
        assert_eq!(r.record_name(json).as_deref(), Some("com.example.Event"));
        assert_eq!(r.record_name(untitled), None);
        assert_eq!(r.record_name(999), None);
    }
}
