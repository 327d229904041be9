//! The Avro compatibility verdicts, as a table: for each pair (an old
//! schema, a new one) whether the new schema reads data written with the
//! old (BACKWARD) and whether the old reads data written with the new
//! (FORWARD); FULL is both. The verdicts are the Avro specification's
//! schema-resolution rules as Avro's Java `SchemaCompatibility` (which
//! Confluent's registry runs) applies them, including its quirks: record
//! names compare without their namespaces, and a reader's enum default
//! accepts unknown symbols.

mod common;

use es_registry::format::{incompatibilities, parse};
use es_registry::model::{Compatibility, NewSchema, SchemaType};
use es_registry::Registry;

/// (what the row shows, old schema, new schema, backward, forward)
type Row = (&'static str, &'static str, &'static str, bool, bool);

fn rec(fields: &str) -> String {
    format!(r#"{{"type":"record","name":"R","fields":[{fields}]}}"#)
}

const ROWS: &[Row] = &[
    // Primitives and the promotions the specification allows.
    ("same int", r#""int""#, r#""int""#, true, true),
    ("same null", r#""null""#, r#""null""#, true, true),
    ("same boolean", r#""boolean""#, r#""boolean""#, true, true),
    ("same string", r#""string""#, r#""string""#, true, true),
    ("same bytes", r#""bytes""#, r#""bytes""#, true, true),
    ("int to long", r#""int""#, r#""long""#, true, false),
    ("int to float", r#""int""#, r#""float""#, true, false),
    ("int to double", r#""int""#, r#""double""#, true, false),
    ("long to float", r#""long""#, r#""float""#, true, false),
    ("long to double", r#""long""#, r#""double""#, true, false),
    ("float to double", r#""float""#, r#""double""#, true, false),
    ("long to int", r#""long""#, r#""int""#, false, true),
    ("double to float", r#""double""#, r#""float""#, false, true),
    ("string to bytes", r#""string""#, r#""bytes""#, true, true),
    ("bytes to string", r#""bytes""#, r#""string""#, true, true),
    ("int to string", r#""int""#, r#""string""#, false, false),
    ("string to int", r#""string""#, r#""int""#, false, false),
    ("boolean to int", r#""boolean""#, r#""int""#, false, false),
    ("null to int", r#""null""#, r#""int""#, false, false),
    ("int to boolean", r#""int""#, r#""boolean""#, false, false),
    (
        "double to string",
        r#""double""#,
        r#""string""#,
        false,
        false,
    ),
    ("bytes to int", r#""bytes""#, r#""int""#, false, false),
    (
        "primitive in object form",
        r#""int""#,
        r#"{"type":"int"}"#,
        true,
        true,
    ),
    // Logical types are their underlying types.
    (
        "int to date",
        r#""int""#,
        r#"{"type":"int","logicalType":"date"}"#,
        true,
        true,
    ),
    (
        "long to timestamp-millis",
        r#""long""#,
        r#"{"type":"long","logicalType":"timestamp-millis"}"#,
        true,
        true,
    ),
    (
        "date to timestamp-millis (int to long)",
        r#"{"type":"int","logicalType":"date"}"#,
        r#"{"type":"long","logicalType":"timestamp-millis"}"#,
        true,
        false,
    ),
    (
        "string to uuid",
        r#""string""#,
        r#"{"type":"string","logicalType":"uuid"}"#,
        true,
        true,
    ),
    (
        "bytes to decimal",
        r#""bytes""#,
        r#"{"type":"bytes","logicalType":"decimal","precision":4,"scale":2}"#,
        true,
        true,
    ),
    // Arrays and maps.
    (
        "array int to array long",
        r#"{"type":"array","items":"int"}"#,
        r#"{"type":"array","items":"long"}"#,
        true,
        false,
    ),
    (
        "array long to array int",
        r#"{"type":"array","items":"long"}"#,
        r#"{"type":"array","items":"int"}"#,
        false,
        true,
    ),
    (
        "map int to map long",
        r#"{"type":"map","values":"int"}"#,
        r#"{"type":"map","values":"long"}"#,
        true,
        false,
    ),
    (
        "map string to map int",
        r#"{"type":"map","values":"string"}"#,
        r#"{"type":"map","values":"int"}"#,
        false,
        false,
    ),
    (
        "array to map",
        r#"{"type":"array","items":"int"}"#,
        r#"{"type":"map","values":"int"}"#,
        false,
        false,
    ),
    (
        "array of string to array of bytes",
        r#"{"type":"array","items":"string"}"#,
        r#"{"type":"array","items":"bytes"}"#,
        true,
        true,
    ),
    // Enums: symbols and defaults.
    (
        "same enum",
        r#"{"type":"enum","name":"E","symbols":["A","B"]}"#,
        r#"{"type":"enum","name":"E","symbols":["A","B"]}"#,
        true,
        true,
    ),
    (
        "enum symbol added",
        r#"{"type":"enum","name":"E","symbols":["A","B"]}"#,
        r#"{"type":"enum","name":"E","symbols":["A","B","C"]}"#,
        true,
        false,
    ),
    (
        "enum symbol removed",
        r#"{"type":"enum","name":"E","symbols":["A","B","C"]}"#,
        r#"{"type":"enum","name":"E","symbols":["A","B"]}"#,
        false,
        true,
    ),
    (
        "enum symbol removed, new has a default",
        r#"{"type":"enum","name":"E","symbols":["A","B","C"]}"#,
        r#"{"type":"enum","name":"E","symbols":["A","B"],"default":"A"}"#,
        true,
        true,
    ),
    (
        "enum symbol added, old has a default",
        r#"{"type":"enum","name":"E","symbols":["A","B"],"default":"A"}"#,
        r#"{"type":"enum","name":"E","symbols":["A","B","C"]}"#,
        true,
        true,
    ),
    (
        "enum symbols reordered",
        r#"{"type":"enum","name":"E","symbols":["A","B"]}"#,
        r#"{"type":"enum","name":"E","symbols":["B","A"]}"#,
        true,
        true,
    ),
    (
        "enum renamed",
        r#"{"type":"enum","name":"E","symbols":["A"]}"#,
        r#"{"type":"enum","name":"F","symbols":["A"]}"#,
        false,
        false,
    ),
    (
        "enum renamed with an alias",
        r#"{"type":"enum","name":"E","symbols":["A"]}"#,
        r#"{"type":"enum","name":"F","aliases":["E"],"symbols":["A"]}"#,
        true,
        false,
    ),
    (
        "enum to string",
        r#"{"type":"enum","name":"E","symbols":["A"]}"#,
        r#""string""#,
        false,
        false,
    ),
    // Fixed.
    (
        "same fixed",
        r#"{"type":"fixed","name":"F","size":4}"#,
        r#"{"type":"fixed","name":"F","size":4}"#,
        true,
        true,
    ),
    (
        "fixed size changed",
        r#"{"type":"fixed","name":"F","size":4}"#,
        r#"{"type":"fixed","name":"F","size":8}"#,
        false,
        false,
    ),
    (
        "fixed renamed",
        r#"{"type":"fixed","name":"F","size":4}"#,
        r#"{"type":"fixed","name":"G","size":4}"#,
        false,
        false,
    ),
    (
        "fixed renamed with an alias",
        r#"{"type":"fixed","name":"F","size":4}"#,
        r#"{"type":"fixed","name":"G","aliases":["F"],"size":4}"#,
        true,
        false,
    ),
    (
        "fixed to bytes",
        r#"{"type":"fixed","name":"F","size":4}"#,
        r#""bytes""#,
        false,
        false,
    ),
    // Unions.
    (
        "int to union null int",
        r#""int""#,
        r#"["null","int"]"#,
        true,
        false,
    ),
    (
        "union null int to int",
        r#"["null","int"]"#,
        r#""int""#,
        false,
        true,
    ),
    (
        "union branch added",
        r#"["null","string"]"#,
        r#"["null","string","int"]"#,
        true,
        false,
    ),
    (
        "union branch removed",
        r#"["null","string","int"]"#,
        r#"["null","string"]"#,
        false,
        true,
    ),
    (
        "union branches reordered",
        r#"["int","string"]"#,
        r#"["string","int"]"#,
        true,
        true,
    ),
    (
        "union int promoted to long",
        r#"["null","int"]"#,
        r#"["null","long"]"#,
        true,
        false,
    ),
    (
        "single-branch union to its type",
        r#"["int"]"#,
        r#""int""#,
        true,
        true,
    ),
    (
        "int to union of long and string",
        r#""int""#,
        r#"["long","string"]"#,
        true,
        false,
    ),
    (
        "union int float to long (float reads long)",
        r#"["int","float"]"#,
        r#""long""#,
        false,
        true,
    ),
    (
        "union int long float double to float",
        r#"["int","long","float","double"]"#,
        r#""float""#,
        false,
        true,
    ),
    (
        "string to union null string",
        r#""string""#,
        r#"["null","string"]"#,
        true,
        false,
    ),
    // Records: fields, defaults and aliases.
    (
        "same record",
        r#"{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}"#,
        r#"{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}"#,
        true,
        true,
    ),
    (
        "field added with a default",
        r#"{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}"#,
        r#"{"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"b","type":"string","default":"x"}]}"#,
        true,
        true,
    ),
    (
        "field added without a default",
        r#"{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}"#,
        r#"{"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"b","type":"string"}]}"#,
        false,
        true,
    ),
    (
        "field removed (it had no default)",
        r#"{"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"b","type":"string"}]}"#,
        r#"{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}"#,
        true,
        false,
    ),
    (
        "field removed (it had a default)",
        r#"{"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"b","type":"string","default":""}]}"#,
        r#"{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}"#,
        true,
        true,
    ),
    (
        "optional field added with a null default",
        r#"{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}"#,
        r#"{"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"b","type":["null","string"],"default":null}]}"#,
        true,
        true,
    ),
    (
        "field type int to long",
        r#"{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}"#,
        r#"{"type":"record","name":"R","fields":[{"name":"a","type":"long"}]}"#,
        true,
        false,
    ),
    (
        "field type int to string",
        r#"{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}"#,
        r#"{"type":"record","name":"R","fields":[{"name":"a","type":"string"}]}"#,
        false,
        false,
    ),
    (
        "field made optional",
        r#"{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}"#,
        r#"{"type":"record","name":"R","fields":[{"name":"a","type":["null","int"],"default":null}]}"#,
        true,
        false,
    ),
    (
        "field renamed",
        r#"{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}"#,
        r#"{"type":"record","name":"R","fields":[{"name":"b","type":"int"}]}"#,
        false,
        false,
    ),
    (
        "field renamed with an alias",
        r#"{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}"#,
        r#"{"type":"record","name":"R","fields":[{"name":"b","aliases":["a"],"type":"int"}]}"#,
        true,
        false,
    ),
    (
        "field renamed with an alias and a default",
        r#"{"type":"record","name":"R","fields":[{"name":"a","type":"int","default":0}]}"#,
        r#"{"type":"record","name":"R","fields":[{"name":"b","aliases":["a"],"type":"int","default":0}]}"#,
        true,
        true,
    ),
    (
        "fields reordered",
        r#"{"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"b","type":"string"}]}"#,
        r#"{"type":"record","name":"R","fields":[{"name":"b","type":"string"},{"name":"a","type":"int"}]}"#,
        true,
        true,
    ),
    (
        "doc added",
        r#"{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}"#,
        r#"{"type":"record","name":"R","doc":"d","fields":[{"name":"a","type":"int","doc":"x"}]}"#,
        true,
        true,
    ),
    (
        "record renamed",
        r#"{"type":"record","name":"R","fields":[]}"#,
        r#"{"type":"record","name":"S","fields":[]}"#,
        false,
        false,
    ),
    (
        "record renamed with an alias",
        r#"{"type":"record","name":"R","fields":[]}"#,
        r#"{"type":"record","name":"S","aliases":["R"],"fields":[]}"#,
        true,
        false,
    ),
    (
        "record namespace changed (names compare unqualified)",
        r#"{"type":"record","name":"R","namespace":"a","fields":[]}"#,
        r#"{"type":"record","name":"R","namespace":"b","fields":[]}"#,
        true,
        true,
    ),
    (
        "empty record to record with a required field",
        r#"{"type":"record","name":"R","fields":[]}"#,
        r#"{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}"#,
        false,
        true,
    ),
    (
        "record to int",
        r#"{"type":"record","name":"R","fields":[]}"#,
        r#""int""#,
        false,
        false,
    ),
    (
        "nested record field promoted",
        r#"{"type":"record","name":"R","fields":[{"name":"n","type":{"type":"record","name":"N","fields":[{"name":"x","type":"int"}]}}]}"#,
        r#"{"type":"record","name":"R","fields":[{"name":"n","type":{"type":"record","name":"N","fields":[{"name":"x","type":"long"}]}}]}"#,
        true,
        false,
    ),
    (
        "nested record gains a required field",
        r#"{"type":"record","name":"R","fields":[{"name":"n","type":{"type":"record","name":"N","fields":[]}}]}"#,
        r#"{"type":"record","name":"R","fields":[{"name":"n","type":{"type":"record","name":"N","fields":[{"name":"y","type":"int"}]}}]}"#,
        false,
        true,
    ),
    (
        "array of records gains a defaulted field",
        r#"{"type":"array","items":{"type":"record","name":"I","fields":[]}}"#,
        r#"{"type":"array","items":{"type":"record","name":"I","fields":[{"name":"z","type":"int","default":1}]}}"#,
        true,
        true,
    ),
    (
        "recursive list int to long",
        r#"{"type":"record","name":"L","fields":[{"name":"v","type":"int"},{"name":"next","type":["null","L"]}]}"#,
        r#"{"type":"record","name":"L","fields":[{"name":"v","type":"long"},{"name":"next","type":["null","L"]}]}"#,
        true,
        false,
    ),
    (
        "recursive list unchanged",
        r#"{"type":"record","name":"L","fields":[{"name":"next","type":["null","L"]}]}"#,
        r#"{"type":"record","name":"L","fields":[{"name":"next","type":["null","L"]}]}"#,
        true,
        true,
    ),
    (
        "union of records gains a record",
        r#"[{"type":"record","name":"A","fields":[]}]"#,
        r#"[{"type":"record","name":"A","fields":[]},{"type":"record","name":"B","fields":[]}]"#,
        true,
        false,
    ),
    (
        "enum field gains a symbol",
        r#"{"type":"record","name":"R","fields":[{"name":"e","type":{"type":"enum","name":"E","symbols":["A"]}}]}"#,
        r#"{"type":"record","name":"R","fields":[{"name":"e","type":{"type":"enum","name":"E","symbols":["A","B"]}}]}"#,
        true,
        false,
    ),
    (
        "map of records gains a required field",
        r#"{"type":"map","values":{"type":"record","name":"V","fields":[]}}"#,
        r#"{"type":"map","values":{"type":"record","name":"V","fields":[{"name":"q","type":"string"}]}}"#,
        false,
        true,
    ),
];

fn parsed(text: &str) -> es_registry::format::Parsed {
    parse(SchemaType::Avro, text, &[]).unwrap_or_else(|e| panic!("{text} does not parse: {e}"))
}

#[test]
fn the_verdict_table_holds() {
    assert!(ROWS.len() >= 80, "{} rows", ROWS.len());
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

/// The table through the registry itself: registering old then new under
/// each level is accepted exactly when the verdicts say so.
#[test]
fn the_registry_applies_each_level() {
    let levels = [
        Compatibility::None,
        Compatibility::Backward,
        Compatibility::Forward,
        Compatibility::Full,
    ];
    for (what, old, new, backward, forward) in ROWS {
        for level in levels {
            let mut r = Registry::new();
            r.set_config(None, level).expect("level");
            let schema = |t: &str| NewSchema {
                metadata: None,
                rule_set: None,
                schema_type: SchemaType::Avro,
                schema: t.to_string(),
                references: Vec::new(),
                id: None,
                version: None,
            };
            r.register("s", &schema(old), false).expect("old");
            let expected = match level {
                Compatibility::None => true,
                Compatibility::Backward => *backward,
                Compatibility::Forward => *forward,
                _ => *backward && *forward,
            };
            let got = r.register("s", &schema(new), false);
            assert_eq!(got.is_ok(), expected, "{what} under {level:?}: {got:?}");
            if let Err(e) = got {
                assert_eq!((e.status(), e.code()), (409, 409), "{what}");
            }
        }
    }
}

#[test]
fn the_http_registry_applies_each_level() {
    common::table_over_http("AVRO", ROWS);
}

#[test]
fn messages_name_the_problem_and_its_place() {
    let old = rec(
        r#"{"name":"a","type":"int"},{"name":"e","type":{"type":"enum","name":"E","symbols":["X","Y"]}}"#,
    );
    let new = rec(
        r#"{"name":"a","type":"string"},{"name":"e","type":{"type":"enum","name":"E","symbols":["X"]}},{"name":"c","type":"int"}"#,
    );
    let m = incompatibilities(&parsed(&new), &parsed(&old), "new", "old");
    assert_eq!(m.len(), 3, "{m:?}");
    assert_eq!(m[0], "{errorType:'TYPE_MISMATCH', description:'The type (path '/fields/0/type') of a field in the new schema does not match with the old schema', additionalInfo:'reader type: STRING not compatible with writer type: INT'}");
    assert_eq!(m[1], "{errorType:'MISSING_ENUM_SYMBOLS', description:'The new schema is missing enum symbols '[Y]' at path '/fields/1/type/symbols' in the old schema', additionalInfo:'[Y]'}");
    assert_eq!(m[2], "{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'c' at path '/fields/2' in the new schema has no default value and is missing in the old schema', additionalInfo:'c'}");
    let u = incompatibilities(
        &parsed(r#"["null","int"]"#),
        &parsed(r#"["null","int","string"]"#),
        "new",
        "old",
    );
    assert_eq!(u, vec!["{errorType:'MISSING_UNION_BRANCH', description:'The new schema is missing a type inside a union field at path '/2' in the old schema', additionalInfo:'reader union lacking writer type: STRING'}"]);
    let f = incompatibilities(
        &parsed(r#"{"type":"fixed","name":"F","size":8}"#),
        &parsed(r#"{"type":"fixed","name":"G","size":4}"#),
        "new",
        "old",
    );
    assert_eq!(f.len(), 2, "{f:?}");
    assert!(
        f[0].contains("NAME_MISMATCH") && f[0].contains("expected: G"),
        "{f:?}"
    );
    assert!(
        f[1].contains("FIXED_SIZE_MISMATCH") && f[1].contains("expected: 4, found: 8"),
        "{f:?}"
    );
}
