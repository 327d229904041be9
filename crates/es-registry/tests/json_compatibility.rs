//! The JSON Schema compatibility verdicts, as a table: for each pair (an
//! old schema, a new one) whether the change is BACKWARD compatible
//! (Confluent diffs old to new) and FORWARD compatible (new to old), under
//! Confluent's strict rules, including its traps: a property added to an
//! open content model is not backward compatible, a property removed from
//! a closed one is not forward compatible.

mod common;

use es_registry::format::{incompatibilities, parse};
use es_registry::model::{Compatibility, NewSchema, Reference, SchemaType};
use es_registry::Registry;

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
    // Types and their widening.
    (
        "number to integer",
        r##"{"type":"number"}"##,
        r##"{"type":"integer"}"##,
        false,
        true,
    ),
    (
        "string or null to string",
        r##"{"type":["string","null"]}"##,
        r##"{"type":"string"}"##,
        false,
        true,
    ),
    (
        "boolean to null",
        r##"{"type":"boolean"}"##,
        r##"{"type":"null"}"##,
        false,
        false,
    ),
    (
        "string to empty schema",
        r##"{"type":"string"}"##,
        r##"{}"##,
        true,
        false,
    ),
    (
        "false to anything",
        r##"false"##,
        r##"{"type":"string"}"##,
        true,
        false,
    ),
    (
        "object to array",
        r##"{"type":"object"}"##,
        r##"{"type":"array"}"##,
        false,
        false,
    ),
    (
        "title and $id changed",
        r##"{"$id":"a","title":"A","type":"string"}"##,
        r##"{"$id":"b","title":"B","type":"string"}"##,
        true,
        true,
    ),
    (
        "default changed",
        r##"{"type":"string","default":"a"}"##,
        r##"{"type":"string","default":"b"}"##,
        true,
        true,
    ),
    // Bounds.
    (
        "maxLength decreased",
        r##"{"type":"string","maxLength":20}"##,
        r##"{"type":"string","maxLength":10}"##,
        false,
        true,
    ),
    (
        "pattern removed",
        r##"{"type":"string","pattern":"^a"}"##,
        r##"{"type":"string"}"##,
        true,
        false,
    ),
    (
        "exclusiveMinimum decreased",
        r##"{"type":"number","exclusiveMinimum":5}"##,
        r##"{"type":"number","exclusiveMinimum":1}"##,
        true,
        false,
    ),
    (
        "exclusiveMaximum added",
        r##"{"type":"number"}"##,
        r##"{"type":"number","exclusiveMaximum":100}"##,
        false,
        true,
    ),
    (
        "multipleOf changed to a coprime",
        r##"{"type":"number","multipleOf":3}"##,
        r##"{"type":"number","multipleOf":5}"##,
        false,
        false,
    ),
    (
        "minItems added",
        r##"{"type":"array","items":{"type":"string"}}"##,
        r##"{"type":"array","items":{"type":"string"},"minItems":1}"##,
        false,
        true,
    ),
    (
        "minProperties decreased",
        r##"{"type":"object","minProperties":2}"##,
        r##"{"type":"object","minProperties":1}"##,
        true,
        false,
    ),
    // Enums and consts.
    (
        "enum narrowed",
        r##"{"enum":["a","b","c"]}"##,
        r##"{"enum":["a","b"]}"##,
        false,
        true,
    ),
    (
        "enum reordered",
        r##"{"enum":["a","b"]}"##,
        r##"{"enum":["b","a"]}"##,
        true,
        true,
    ),
    (
        "string with enum loses its enum",
        r##"{"type":"string","enum":["red"]}"##,
        r##"{"type":"string"}"##,
        true,
        false,
    ),
    // Content models: the classic traps.
    (
        "required property added to an open content model",
        r##"{"type":"object","properties":{"a":{"type":"string"}}}"##,
        r##"{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["b"]}"##,
        false,
        true,
    ),
    (
        "property removed from a closed content model",
        r##"{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"additionalProperties":false}"##,
        r##"{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}"##,
        false,
        true,
    ),
    (
        "property set to false removed from a closed content model",
        r##"{"type":"object","properties":{"a":{"type":"string"},"b":false},"additionalProperties":false}"##,
        r##"{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}"##,
        true,
        true,
    ),
    (
        "open content model closed",
        r##"{"type":"object","properties":{"a":{"type":"string"}}}"##,
        r##"{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}"##,
        false,
        true,
    ),
    (
        "additionalProperties schema added",
        r##"{"type":"object"}"##,
        r##"{"type":"object","additionalProperties":{"type":"string"}}"##,
        false,
        true,
    ),
    (
        "additionalProperties schema widened",
        r##"{"type":"object","additionalProperties":{"type":"integer"}}"##,
        r##"{"type":"object","additionalProperties":{"type":"number"}}"##,
        true,
        false,
    ),
    (
        "property removed, covered by patternProperties",
        r##"{"type":"object","properties":{"x_a":{"type":"string"}},"patternProperties":{"^x_":{"type":"string"}}}"##,
        r##"{"type":"object","patternProperties":{"^x_":{"type":"string"}}}"##,
        true,
        true,
    ),
    (
        "property removed, not covered by patternProperties",
        r##"{"type":"object","properties":{"x_a":{"type":"integer"}},"patternProperties":{"^x_":{"type":"string"}}}"##,
        r##"{"type":"object","patternProperties":{"^x_":{"type":"string"}}}"##,
        false,
        false,
    ),
    (
        "required removed",
        r##"{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}"##,
        r##"{"type":"object","properties":{"a":{"type":"string"}}}"##,
        true,
        false,
    ),
    (
        "required added to a property with a default",
        r##"{"type":"object","properties":{"a":{"type":"string","default":"x"}}}"##,
        r##"{"type":"object","properties":{"a":{"type":"string","default":"x"}},"required":["a"]}"##,
        true,
        true,
    ),
    (
        "dependency array extended",
        r##"{"type":"object","dependencies":{"a":["b"]}}"##,
        r##"{"type":"object","dependencies":{"a":["b","c"]}}"##,
        false,
        true,
    ),
    // Arrays and tuples.
    (
        "tuple item added to an open model",
        r##"{"type":"array","items":[{"type":"string"}]}"##,
        r##"{"type":"array","items":[{"type":"string"},{"type":"integer"}]}"##,
        false,
        true,
    ),
    (
        "tuple item added to a closed model",
        r##"{"type":"array","items":[{"type":"string"}],"additionalItems":false}"##,
        r##"{"type":"array","items":[{"type":"string"},{"type":"integer"}],"additionalItems":false}"##,
        true,
        false,
    ),
    (
        "additionalItems removed",
        r##"{"type":"array","items":[{"type":"string"}]}"##,
        r##"{"type":"array","items":[{"type":"string"}],"additionalItems":false}"##,
        false,
        true,
    ),
    (
        "uniqueItems removed",
        r##"{"type":"array","uniqueItems":true}"##,
        r##"{"type":"array"}"##,
        true,
        false,
    ),
    // Combinations.
    (
        "oneOf narrowed",
        r##"{"oneOf":[{"type":"string"},{"type":"integer"}]}"##,
        r##"{"oneOf":[{"type":"string"}]}"##,
        false,
        true,
    ),
    (
        "allOf gains a part",
        r##"{"allOf":[{"type":"string"}]}"##,
        r##"{"allOf":[{"type":"string"},{"maxLength":5}]}"##,
        false,
        true,
    ),
    (
        "allOf with a duplicate part",
        r##"{"allOf":[{"type":"string"}]}"##,
        r##"{"allOf":[{"type":"string"},{"type":"string"}]}"##,
        true,
        true,
    ),
    (
        "anyOf to allOf with more parts",
        r##"{"anyOf":[{"type":"string"}]}"##,
        r##"{"allOf":[{"type":"number"},{"type":"string"}]}"##,
        false,
        true,
    ),
    (
        "string to oneOf including string",
        r##"{"type":"string"}"##,
        r##"{"oneOf":[{"type":"string"},{"type":"null"}]}"##,
        true,
        false,
    ),
    (
        "combined subschema changed",
        r##"{"anyOf":[{"type":"string"},{"type":"integer"}]}"##,
        r##"{"anyOf":[{"type":"string"},{"type":"boolean"}]}"##,
        false,
        false,
    ),
    // $ref and recursion.
    (
        "$ref replaced by its target inline",
        r##"{"definitions":{"s":{"type":"string"}},"type":"object","properties":{"a":{"$ref":"#/definitions/s"}}}"##,
        r##"{"type":"object","properties":{"a":{"type":"string"}}}"##,
        true,
        true,
    ),
    (
        "recursive schema gains a property deep inside",
        r##"{"$defs":{"n":{"type":"object","properties":{"v":{"type":"integer"},"next":{"$ref":"#/$defs/n"}}}},"$ref":"#/$defs/n"}"##,
        r##"{"$defs":{"n":{"type":"object","properties":{"v":{"type":"integer"},"w":{"type":"string"},"next":{"$ref":"#/$defs/n"}}}},"$ref":"#/$defs/n"}"##,
        false,
        true,
    ),
    (
        "recursive schema changes a type deep inside",
        r##"{"$defs":{"n":{"type":"object","properties":{"v":{"type":"integer"},"next":{"$ref":"#/$defs/n"}}}},"$ref":"#/$defs/n"}"##,
        r##"{"$defs":{"n":{"type":"object","properties":{"v":{"type":"number"},"next":{"$ref":"#/$defs/n"}}}},"$ref":"#/$defs/n"}"##,
        true,
        false,
    ),
    (
        "draft-04 to draft 2020-12 of the same object",
        r##"{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"a":{"type":"string"}}}"##,
        r##"{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"a":{"type":"string"}}}"##,
        true,
        true,
    ),
];

fn parsed(text: &str) -> es_registry::format::Parsed {
    parse(SchemaType::Json, text, &[]).unwrap_or_else(|e| panic!("{text} does not parse: {e}"))
}

#[test]
fn the_verdict_table_holds() {
    assert!(ROWS.len() >= 60, "{} rows", ROWS.len());
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

fn json(text: &str) -> NewSchema {
    NewSchema {
        metadata: None,
        rule_set: None,
        schema_type: SchemaType::Json,
        schema: text.to_string(),
        references: Vec::new(),
        id: None,
        version: None,
    }
}

/// The table through the registry itself: registering old then new under
/// each level is accepted exactly when the verdicts say so.
#[test]
fn the_registry_applies_each_level() {
    for (what, old, new, backward, forward) in ROWS {
        for level in [
            Compatibility::None,
            Compatibility::Backward,
            Compatibility::Forward,
            Compatibility::Full,
        ] {
            let mut r = Registry::new();
            r.set_config(None, level).expect("level");
            r.register("s", &json(old), false).expect("old");
            let expected = match level {
                Compatibility::None => true,
                Compatibility::Backward => *backward,
                Compatibility::Forward => *forward,
                _ => *backward && *forward,
            };
            let got = r.register("s", &json(new), false);
            assert_eq!(got.is_ok(), expected, "{what} under {level:?}: {got:?}");
        }
    }
}

#[test]
fn the_http_registry_applies_each_level() {
    common::table_over_http("JSON", ROWS);
}

#[test]
fn recursion_through_combinations_is_bounded() {
    // anyOf of recursive references, compared with itself and with a
    // change: answered, the same schema compatible.
    let s = r##"{"anyOf":[{"$ref":"#"},{"$ref":"#"},{"type":"string"}]}"##;
    let m = incompatibilities(&parsed(s), &parsed(s), "new", "old");
    assert!(m.is_empty(), "{m:?}");
    let t = r##"{"anyOf":[{"$ref":"#"},{"$ref":"#"},{"type":"integer"}]}"##;
    let m = incompatibilities(&parsed(t), &parsed(s), "new", "old");
    assert!(!m.is_empty());
    // Mutual recursion through objects and arrays.
    let a = r##"{"$defs":{"a":{"type":"object","properties":{"b":{"$ref":"#/$defs/b"}}},"b":{"type":"array","items":{"anyOf":[{"$ref":"#/$defs/a"},{"$ref":"#/$defs/b"}]}}},"$ref":"#/$defs/a"}"##;
    assert!(incompatibilities(&parsed(a), &parsed(a), "new", "old").is_empty());
    // Wide and self-similar: 40 alternatives, each the whole schema again.
    let wide = format!(
        r##"{{"anyOf":[{}{{"type":"string"}}]}}"##,
        r##"{"$ref":"#"},"##.repeat(40)
    );
    let _ = incompatibilities(&parsed(&wide), &parsed(s), "new", "old");
    // A cycle of bare $refs has no schema to compare: never compatible.
    let cycle = r##"{"definitions":{"a":{"$ref":"#/definitions/b"},"b":{"$ref":"#/definitions/a"}},"$ref":"#/definitions/a"}"##;
    let m = incompatibilities(
        &parsed(r##"{"type":"string"}"##),
        &parsed(cycle),
        "new",
        "old",
    );
    assert!(
        m.iter().any(|m| m.contains("COMPARISON_TOO_COMPLEX")),
        "{m:?}"
    );
    let _ = incompatibilities(&parsed(&wide), &parsed(&wide), "new", "old");
}

/// A schema of another subject, named by a reference and used by `$ref`.
#[test]
fn references_across_subjects() {
    let mut r = Registry::new();
    let address = r##"{"type":"object","properties":{"city":{"type":"string"}}}"##;
    r.register("address", &json(address), false)
        .expect("address");
    let with_ref = |text: &str, version: i32| NewSchema {
        references: vec![Reference {
            name: "address.json".into(),
            subject: "address".into(),
            version,
        }],
        ..json(text)
    };
    let user = r##"{"type":"object","properties":{"home":{"$ref":"address.json"}}}"##;
    r.register("user", &with_ref(user, 1), false).expect("user");
    // A $ref naming nothing the references give is invalid.
    let dangling = r##"{"type":"object","properties":{"home":{"$ref":"other.json"}}}"##;
    let e = r
        .register("user", &json(dangling), false)
        .expect_err("dangling");
    assert_eq!(e.code(), 42201);
    // Address v2 narrows city to an integer: a user pointing at it is not
    // backward compatible with one pointing at v1.
    r.set_config(Some("address"), Compatibility::None)
        .expect("none");
    let address2 = r##"{"type":"object","properties":{"city":{"type":"integer"}}}"##;
    r.register("address", &json(address2), false)
        .expect("address v2");
    let e = r
        .register("user", &with_ref(user, 2), false)
        .expect_err("incompatible through the reference");
    assert_eq!(e.code(), 409);
    assert!(e.to_string().contains("TYPE_CHANGED"), "{e}");
}

/// Confluent's messages, byte for byte (its JSON Schema messages close
/// with `'}`).
#[test]
fn messages_name_the_problem_and_its_place() {
    let old = r##"{"type":"object","properties":{"a":{"type":"string"}}}"##;
    let new = r##"{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}}}"##;
    let m = incompatibilities(&parsed(new), &parsed(old), "new", "old");
    assert_eq!(
        m,
        vec![
            "{errorType:\"TYPE_CHANGED\", description:\"A type at path '#/properties/a' is different between the new schema and the old schema'}",
            "{errorType:\"OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL\", description:\"The new schema has an open content model and has a property or item at path '#/properties/b' which is missing in the old schema'}",
        ]
    );
    let m = incompatibilities(
        &parsed(r##"{"type":"string","maxLength":5}"##),
        &parsed(r##"{"type":"string","maxLength":9}"##),
        "new",
        "old",
    );
    assert_eq!(m, vec!["{errorType:\"MAX_LENGTH_DECREASED\", description:\"The value at path '#/maxLength' in the new schema is less than its value in the old schema'}"]);
}
