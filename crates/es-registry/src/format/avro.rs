//! Avro schemas through the `apache-avro` crate: parsing (with the schemas
//! a schema references, which define the named types it uses), and the
//! table of named types the compatibility check ([`super::avro_compat`])
//! resolves references through.

use std::collections::HashMap;

use apache_avro::Schema;
use serde_json::{Map, Value};

/// A parsed Avro schema and the referenced schemas that define the named
/// types it may use.
#[derive(Debug, Clone)]
pub struct Avro {
    pub schema: Schema,
    pub referenced: Vec<Schema>,
}

/// Parses `text`, whose named types may come from `deps` (the referenced
/// schemas' texts, each a named type).
pub fn parse(text: &str, deps: &[&str]) -> Result<Avro, String> {
    check_names(text, deps)?;
    let parsed = if deps.is_empty() {
        Schema::parse_str(text).map(|s| (s, Vec::new()))
    } else {
        Schema::parse_str_with_list(text, deps.iter().copied())
    };
    let (schema, referenced) = parsed.map_err(|e| e.to_string())?;
    Ok(Avro { schema, referenced })
}

/// Refuses the names `apache-avro` 0.21 would panic on: its parser
/// unwraps the check of a named type's `name` and `aliases` (and of a
/// referenced schema's name and the name of its `type`) instead of
/// returning the error. So each name the parser will check that way is
/// checked here first, where the parser looks for it (named types, each
/// record field, which it parses as a schema too, and the referenced
/// schemas' roots), and nowhere else: a name it would not look at (a
/// primitive's custom `name`, a default value) is no reason to refuse.
/// Text that is not JSON is left to the parser's own error.
fn check_names(text: &str, deps: &[&str]) -> Result<(), String> {
    for dep in deps {
        let Ok(Value::Object(root)) = serde_json::from_str::<Value>(dep) else {
            continue;
        };
        full_name_ok(root.get("name"))?;
        if let Some(Value::Object(ty)) = root.get("type") {
            full_name_ok(ty.get("name"))?;
        }
        check_schema_names(&Value::Object(root))?;
    }
    match serde_json::from_str::<Value>(text) {
        Ok(v) => check_schema_names(&v),
        Err(_) => Ok(()),
    }
}

/// [`check_names`] for one schema (a JSON value in a schema's place).
fn check_schema_names(v: &Value) -> Result<(), String> {
    match v {
        Value::Array(variants) => variants.iter().try_for_each(check_schema_names),
        Value::Object(o) => check_complex_names(o),
        _ => Ok(()),
    }
}

fn check_complex_names(o: &Map<String, Value>) -> Result<(), String> {
    match o.get("type") {
        Some(Value::String(t)) => match t.as_str() {
            "record" | "enum" | "fixed" => {
                full_name_ok(o.get("name"))?;
                // Only a list of strings is taken as aliases.
                if let Some(Value::Array(aliases)) = o.get("aliases") {
                    if aliases.iter().all(Value::is_string) {
                        aliases.iter().try_for_each(|a| full_name_ok(Some(a)))?;
                    }
                }
                if let Some(Value::Array(fields)) = o.get("fields") {
                    for field in fields.iter().filter_map(Value::as_object) {
                        // A field is parsed as a schema of its own `type`.
                        check_complex_names(field)?;
                    }
                }
                Ok(())
            }
            "array" => o.get("items").map_or(Ok(()), check_schema_names),
            "map" => o.get("values").map_or(Ok(()), check_schema_names),
            _ => Ok(()),
        },
        Some(ty) => check_schema_names(ty),
        None => Ok(()),
    }
}

/// Whether `name`, when a string, is a valid Avro full name (Avro's
/// `[A-Za-z_][A-Za-z0-9_]*` parts joined by dots; a leading dot is the
/// null namespace), as `apache-avro` validates it.
fn full_name_ok(name: Option<&Value>) -> Result<(), String> {
    let Some(Value::String(name)) = name else {
        return Ok(());
    };
    let ident = |s: &str| {
        let mut chars = s.chars();
        matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    let ok = match name.rsplit_once('.') {
        None => ident(name),
        Some((ns, last)) => ident(last) && (ns.is_empty() || ns.split('.').all(ident)),
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "Invalid schema name {name}. It must match the regex '^((?P<namespace>([A-Za-z_][A-Za-z0-9_]*(\\.[A-Za-z_][A-Za-z0-9_]*)*)?)\\.)?(?P<name>[A-Za-z_][A-Za-z0-9_]*)$'"
        ))
    }
}

impl Avro {
    /// Records, enums and fixed types by full name, from the schema and its
    /// references (borrowed: built for one check, never cloned).
    pub fn names(&self) -> HashMap<String, &Schema> {
        let mut names = HashMap::new();
        for s in self.referenced.iter().chain(std::iter::once(&self.schema)) {
            collect_names(s, &mut names);
        }
        names
    }
}

/// Adds every named type defined inside `s` to `names`.
fn collect_names<'a>(s: &'a Schema, names: &mut HashMap<String, &'a Schema>) {
    match s {
        Schema::Record(r) => {
            names.insert(r.name.fullname(None), s);
            for f in &r.fields {
                collect_names(&f.schema, names);
            }
        }
        Schema::Enum(e) => {
            names.insert(e.name.fullname(None), s);
        }
        Schema::Fixed(f) => {
            names.insert(f.name.fullname(None), s);
        }
        Schema::Decimal(d) => collect_names(&d.inner, names),
        Schema::Array(a) => collect_names(&a.items, names),
        Schema::Map(m) => collect_names(&m.types, names),
        Schema::Union(u) => {
            for v in u.variants() {
                collect_names(v, names);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the registry_avro and registry_compat fuzz targets:
    /// `apache-avro` panicked (an unwrap) on a named type whose name is
    /// not an Avro name, where it should have refused the schema.
    #[test]
    fn a_bad_name_is_refused_not_a_panic() {
        for text in [
            r#"{"type":"record","name":"Us\u0087er","fields":[]}"#,
            r#"{"type":"record","name":"User\u00e4","namespace":"es.t","fields":[{"name":"id","type":"long"}]}"#,
            r#"{"type":"enum","name":"a..b","symbols":["A"]}"#,
            r#"{"type":"fixed","name":"1x","size":4}"#,
            r#"{"type":"record","name":"R","aliases":["ok","not ok"],"fields":[]}"#,
            r#"{"type":"record","name":"R","fields":[{"name":"f","type":"enum","symbols":["A"],"aliases":["b-c"]}]}"#,
            r#"{"type":"record","name":"R","fields":[{"name":"f","type":{"type":"array","items":{"type":"fixed","name":"x y","size":1}}}]}"#,
            r#"["null",{"type":"map","values":{"type":"enum","name":"","symbols":["A"]}}]"#,
        ] {
            let got = std::panic::catch_unwind(|| parse(text, &[]));
            let err = got.unwrap_or_else(|_| panic!("the parser panicked on {text}"));
            assert!(err.is_err(), "{text} was accepted");
        }
        for (text, dep) in [
            (
                r#""a.b""#,
                r#"{"type":"record","name":"bad name","fields":[]}"#,
            ),
            (
                r#""A""#,
                r#"{"name":"A","type":{"type":"int","name":"bad name"}}"#,
            ),
        ] {
            let got = std::panic::catch_unwind(|| parse(text, &[dep]));
            let err = got.unwrap_or_else(|_| panic!("the parser panicked on {dep}"));
            assert!(err.is_err(), "{dep} was accepted");
        }
    }

    #[test]
    fn good_names_and_names_the_parser_does_not_read_still_parse() {
        for text in [
            r#"{"type":"record","name":".R","aliases":["a.b.C","_d"],"fields":[{"name":"e","type":{"type":"enum","name":"x.E","symbols":["A"]}}]}"#,
            // A primitive's `name` is a custom attribute; aliases that are
            // not all strings are not read; defaults are values.
            r#"{"type":"record","name":"R","aliases":[1,"not ok"],"fields":[{"name":"i","type":{"type":"int","name":"not a name"},"default":1},{"name":"m","type":{"type":"map","values":"string"},"default":{"name":"x y"}}]}"#,
        ] {
            parse(text, &[]).unwrap_or_else(|e| panic!("{text}: {e}"));
        }
    }
}
