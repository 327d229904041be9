//! JSON Schema parsing: the text must be a JSON object or boolean that
//! validates against its draft's meta-schema (drafts 4, 6, 7, 2019-09 and
//! 2020-12 as `$schema` names them, draft 7 without one, as Confluent;
//! through the `jsonschema` crate), and every `$ref` must
//! resolve, inside the document or into a referenced schema named by one
//! of the schema's references (which are checked the same way).

use std::collections::HashMap;

use serde_json::Value;

use super::json_compat::Json;

/// Deepest nesting searched for `$ref`s.
const DEPTH_MAX: usize = 512;

/// Parses `text`; `deps` are (name, text) of the schemas it references.
pub fn parse(text: &str, deps: &[(&str, &str)]) -> Result<Json, String> {
    let root = document(text)?;
    let mut referenced = HashMap::with_capacity(deps.len());
    for (name, dep) in deps {
        let value = document(dep).map_err(|e| format!("referenced schema {name:?}: {e}"))?;
        referenced.insert((*name).to_string(), value);
    }
    let json = Json { root, referenced };
    check_refs(&json.root, &json.root, &json, 0)?;
    Ok(json)
}

/// A JSON Schema document, checked against its meta-schema.
fn document(text: &str) -> Result<Value, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    if !value.is_object() && !value.is_boolean() {
        return Err("a JSON Schema is an object or a boolean".into());
    }
    if value.is_object() {
        meta_validate(&value)?;
    }
    Ok(value)
}

/// Validates `schema` against its draft's meta-schema: the one its
/// `$schema` names, or draft 7 without one (Confluent's default).
fn meta_validate(schema: &Value) -> Result<(), String> {
    let named = schema.get("$schema").map(|s| {
        let s = s.as_str().unwrap_or("");
        let s = s.trim_end_matches('#');
        s.trim_start_matches("https://")
            .trim_start_matches("http://")
            .to_string()
    });
    let result = match named.as_deref() {
        None | Some("json-schema.org/draft-07/schema") => {
            jsonschema::draft7::meta::validate(schema)
        }
        Some("json-schema.org/draft-04/schema") => jsonschema::draft4::meta::validate(schema),
        Some("json-schema.org/draft-06/schema") => jsonschema::draft6::meta::validate(schema),
        Some("json-schema.org/draft/2019-09/schema") => {
            jsonschema::draft201909::meta::validate(schema)
        }
        Some("json-schema.org/draft/2020-12/schema") => {
            jsonschema::draft202012::meta::validate(schema)
        }
        Some(other) => {
            return Err(format!(
                "unknown $schema {other:?} (drafts 4, 6, 7, 2019-09 and 2020-12 are known)"
            ))
        }
    };
    result.map_err(|e| e.to_string())
}

/// Every `$ref` under `v` (in document `doc`) resolves.
fn check_refs(v: &Value, doc: &Value, json: &Json, depth: usize) -> Result<(), String> {
    if depth > DEPTH_MAX {
        return Err(format!("nested deeper than {DEPTH_MAX}"));
    }
    match v {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get("$ref") {
                let (base, fragment) = r.split_once('#').unwrap_or((r, ""));
                let target = if base.is_empty() {
                    Some(doc)
                } else {
                    json.referenced.get(base).or_else(|| {
                        json.referenced
                            .iter()
                            .find(|(n, _)| base.ends_with(n.as_str()))
                            .map(|(_, v)| v)
                    })
                };
                let found = target.and_then(|t| {
                    if fragment.is_empty() {
                        Some(t)
                    } else {
                        t.pointer(fragment)
                    }
                });
                if found.is_none() {
                    return Err(format!("$ref {r:?} does not resolve (a reference of another subject must be named by one of the schema's references)"));
                }
            }
            for child in m.values() {
                check_refs(child, doc, json, depth + 1)?;
            }
        }
        Value::Array(items) => {
            for child in items {
                check_refs(child, doc, json, depth + 1)?;
            }
        }
        _ => {}
    }
    Ok(())
}
