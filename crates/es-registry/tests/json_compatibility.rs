//! The JSON Schema compatibility verdicts, as a table: for each pair (an
//! old schema, a new one) whether the change is BACKWARD compatible
//! (Confluent diffs old to new) and FORWARD compatible (new to old), under
//! Confluent's strict rules, including its traps: a property added to an
//! open content model is not backward compatible, a property removed from
//! a closed one is not forward compatible.

use es_registry::format::{incompatibilities, parse};
use es_registry::model::SchemaType;

/// (what the row shows, old schema, new schema, backward, forward)
type Row = (&'static str, &'static str, &'static str, bool, bool);

const ROWS: &[Row] = &[
    (
        "same string",
        r##"{"type":"string"}"##,
        r##"{"type":"string"}"##,
        true,
        true,
    ),
    (
        "string to number",
        r##"{"type":"string"}"##,
        r##"{"type":"number"}"##,
        false,
        false,
    ),
    (
        "integer to number",
        r##"{"type":"integer"}"##,
        r##"{"type":"number"}"##,
        true,
        false,
    ),
    (
        "string to string or null",
        r##"{"type":"string"}"##,
        r##"{"type":["string","null"]}"##,
        true,
        false,
    ),
    (
        "maxLength increased",
        r##"{"type":"string","maxLength":10}"##,
        r##"{"type":"string","maxLength":20}"##,
        true,
        false,
    ),
    (
        "maxLength added",
        r##"{"type":"string"}"##,
        r##"{"type":"string","maxLength":20}"##,
        false,
        true,
    ),
    (
        "minLength decreased",
        r##"{"type":"string","minLength":5}"##,
        r##"{"type":"string","minLength":2}"##,
        true,
        false,
    ),
    (
        "pattern added",
        r##"{"type":"string"}"##,
        r##"{"type":"string","pattern":"^a"}"##,
        false,
        true,
    ),
    (
        "pattern changed",
        r##"{"type":"string","pattern":"^a"}"##,
        r##"{"type":"string","pattern":"^b"}"##,
        false,
        false,
    ),
    (
        "format added (not compared)",
        r##"{"type":"string"}"##,
        r##"{"type":"string","format":"email"}"##,
        true,
        true,
    ),
    (
        "maximum increased",
        r##"{"type":"number","maximum":10}"##,
        r##"{"type":"number","maximum":20}"##,
        true,
        false,
    ),
    (
        "minimum increased",
        r##"{"type":"number","minimum":0}"##,
        r##"{"type":"number","minimum":5}"##,
        false,
        true,
    ),
    (
        "minimum removed",
        r##"{"type":"number","minimum":0}"##,
        r##"{"type":"number"}"##,
        true,
        false,
    ),
    (
        "multipleOf expanded",
        r##"{"type":"number","multipleOf":2}"##,
        r##"{"type":"number","multipleOf":4}"##,
        false,
        true,
    ),
    (
        "enum extended",
        r##"{"enum":["a","b"]}"##,
        r##"{"enum":["a","b","c"]}"##,
        true,
        false,
    ),
    (
        "enum changed",
        r##"{"enum":["a","b"]}"##,
        r##"{"enum":["a","c"]}"##,
        false,
        false,
    ),
    (
        "const changed",
        r##"{"const":"a"}"##,
        r##"{"const":"b"}"##,
        false,
        false,
    ),
    (
        "description changed",
        r##"{"type":"string","description":"x"}"##,
        r##"{"type":"string","description":"y"}"##,
        true,
        true,
    ),
    ("empty to empty", r##"{}"##, r##"{}"##, true, true),
    (
        "true to string",
        r##"true"##,
        r##"{"type":"string"}"##,
        false,
        true,
    ),
    (
        "optional property added to an open content model",
        r##"{"type":"object","properties":{"a":{"type":"string"}}}"##,
        r##"{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}}}"##,
        false,
        true,
    ),
    (
        "property with an empty schema added to an open content model",
        r##"{"type":"object","properties":{"a":{"type":"string"}}}"##,
        r##"{"type":"object","properties":{"a":{"type":"string"},"b":{}}}"##,
        true,
        true,
    ),
    (
        "optional property added to a closed content model",
        r##"{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}"##,
        r##"{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"additionalProperties":false}"##,
        true,
        false,
    ),
    (
        "required property added to a closed content model",
        r##"{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}"##,
        r##"{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["b"],"additionalProperties":false}"##,
        false,
        false,
    ),
    (
        "required property with a default added to a closed content model",
        r##"{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}"##,
        r##"{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string","default":"x"}},"required":["b"],"additionalProperties":false}"##,
        true,
        false,
    ),
    (
        "property removed from an open content model",
        r##"{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}}}"##,
        r##"{"type":"object","properties":{"a":{"type":"string"}}}"##,
        true,
        false,
    ),
    (
        "property made required",
        r##"{"type":"object","properties":{"a":{"type":"string"}}}"##,
        r##"{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}"##,
        false,
        true,
    ),
    (
        "closed content model opened",
        r##"{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}"##,
        r##"{"type":"object","properties":{"a":{"type":"string"}}}"##,
        true,
        false,
    ),
    (
        "additionalProperties schema dropped",
        r##"{"type":"object","additionalProperties":{"type":"string"}}"##,
        r##"{"type":"object"}"##,
        true,
        false,
    ),
    (
        "property added, covered by a partially open content model",
        r##"{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":{"type":"string"}}"##,
        r##"{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"additionalProperties":{"type":"string"}}"##,
        true,
        true,
    ),
    (
        "property added, not covered by a partially open content model",
        r##"{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":{"type":"string"}}"##,
        r##"{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}},"additionalProperties":{"type":"string"}}"##,
        false,
        false,
    ),
    (
        "nested property type changed",
        r##"{"type":"object","properties":{"a":{"type":"object","properties":{"x":{"type":"string"}}}}}"##,
        r##"{"type":"object","properties":{"a":{"type":"object","properties":{"x":{"type":"number"}}}}}"##,
        false,
        false,
    ),
    (
        "maxProperties added",
        r##"{"type":"object"}"##,
        r##"{"type":"object","maxProperties":3}"##,
        false,
        true,
    ),
    (
        "array items type changed",
        r##"{"type":"array","items":{"type":"string"}}"##,
        r##"{"type":"array","items":{"type":"number"}}"##,
        false,
        false,
    ),
    (
        "array items integer to number",
        r##"{"type":"array","items":{"type":"integer"}}"##,
        r##"{"type":"array","items":{"type":"number"}}"##,
        true,
        false,
    ),
    (
        "maxItems increased",
        r##"{"type":"array","maxItems":5}"##,
        r##"{"type":"array","maxItems":10}"##,
        true,
        false,
    ),
    (
        "uniqueItems added",
        r##"{"type":"array"}"##,
        r##"{"type":"array","uniqueItems":true}"##,
        false,
        true,
    ),
    (
        "anyOf extended",
        r##"{"anyOf":[{"type":"string"},{"type":"number"}]}"##,
        r##"{"anyOf":[{"type":"string"},{"type":"number"},{"type":"boolean"}]}"##,
        true,
        false,
    ),
    (
        "oneOf to anyOf",
        r##"{"oneOf":[{"type":"string"},{"type":"number"}]}"##,
        r##"{"anyOf":[{"type":"string"},{"type":"number"}]}"##,
        true,
        false,
    ),
    (
        "allOf narrowed to one of its parts",
        r##"{"allOf":[{"type":"string"},{"maxLength":5}]}"##,
        r##"{"type":"string"}"##,
        true,
        false,
    ),
    (
        "not widened",
        r##"{"not":{"type":"string"}}"##,
        r##"{"not":{"type":["string","number"]}}"##,
        false,
        true,
    ),
    (
        "$ref target unchanged",
        r##"{"definitions":{"s":{"type":"string"}},"type":"object","properties":{"a":{"$ref":"#/definitions/s"}}}"##,
        r##"{"definitions":{"s":{"type":"string"}},"type":"object","properties":{"a":{"$ref":"#/definitions/s"}}}"##,
        true,
        true,
    ),
    (
        "$ref target type changed",
        r##"{"definitions":{"s":{"type":"string"}},"type":"object","properties":{"a":{"$ref":"#/definitions/s"}}}"##,
        r##"{"definitions":{"s":{"type":"boolean"}},"type":"object","properties":{"a":{"$ref":"#/definitions/s"}}}"##,
        false,
        false,
    ),
    (
        "recursive schema unchanged",
        r##"{"$defs":{"n":{"type":"object","properties":{"next":{"$ref":"#/$defs/n"}}}},"$ref":"#/$defs/n"}"##,
        r##"{"$defs":{"n":{"type":"object","properties":{"next":{"$ref":"#/$defs/n"}}}},"$ref":"#/$defs/n"}"##,
        true,
        true,
    ),
];

fn parsed(text: &str) -> es_registry::format::Parsed {
    parse(SchemaType::Json, text, &[]).unwrap_or_else(|e| panic!("{text} does not parse: {e}"))
}

#[test]
fn the_verdict_table_holds() {
    assert!(ROWS.len() >= 40, "{} rows", ROWS.len());
    let mut wrong = Vec::new();
    for (what, old, new, backward, forward) in ROWS {
        let (o, n) = (parsed(old), parsed(new));
        let b = incompatibilities(&n, &o, "new", "old");
        let f = incompatibilities(&o, &n, "old", "new");
        if b.is_empty() != *backward || f.is_empty() != *forward {
            wrong.push(format!(
                "{what}: expected backward {backward} forward {forward}, got {} {} ({b:?} {f:?})",
                b.is_empty(),
                f.is_empty()
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn invalid_json_schemas_are_refused() {
    for bad in [
        r##"{"type":"strin"}"##,
        r##"{"type":"object","properties":{"a":{"$ref":"#/definitions/missing"}}}"##,
        r##"{"$ref":"other.json"}"##,
        r##"{"minLength":-1}"##,
        r##""string""##,
        "{",
    ] {
        assert!(parse(SchemaType::Json, bad, &[]).is_err(), "{bad} parsed");
    }
    // A reference to another subject's schema, by its name.
    let other = r##"{"type":"object","properties":{"city":{"type":"string"}}}"##;
    let main = r##"{"type":"object","properties":{"home":{"$ref":"address.json"}}}"##;
    assert!(parse(SchemaType::Json, main, &[("address.json", other)]).is_ok());
}

#[test]
fn recursion_through_combinations_is_bounded() {
    // anyOf of recursive references: the comparison stops at its budget.
    let s = r##"{"anyOf":[{"$ref":"#"},{"$ref":"#"},{"type":"string"}]}"##;
    let m = incompatibilities(&parsed(s), &parsed(s), "new", "old");
    assert!(m.len() <= 1, "{m:?}");
}
