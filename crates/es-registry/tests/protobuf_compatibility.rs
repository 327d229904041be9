//! The Protobuf compatibility verdicts, as a table: for each pair (an old
//! schema, a new one) whether the change is BACKWARD compatible (Confluent
//! diffs the old schema to the new) and FORWARD compatible (the new to the
//! old), under Confluent's rules (`protobuf.diff.SchemaDiff`), including
//! its traps: a renumbered field is a field removed and another added,
//! both compatible; a new top-level message is not forward compatible;
//! proto3 fields written without a label change label freely, proto2 and
//! `optional` numeric fields do not; reserved ranges are not compared.

mod common;

use es_registry::format::{incompatibilities, parse};
use es_registry::model::{Compatibility, NewSchema, Reference, SchemaType};
use es_registry::Registry;

/// (what the row shows, old, new, backward, forward). A schema that does
/// not start with `syntax` is the body of `message M` in a proto3 file of
/// package `p`.
type Row = (&'static str, &'static str, &'static str, bool, bool);

const ROWS: &[Row] = &[
    // Fields added, removed, renamed, renumbered.
    ("same message", "int32 a = 1;", "int32 a = 1;", true, true),
    ("field added", "int32 a = 1;", "int32 a = 1; string b = 2;", true, true),
    ("field removed", "int32 a = 1; string b = 2;", "int32 a = 1;", true, true),
    ("field renamed", "int32 a = 1;", "int32 renamed = 1;", true, true),
    ("field renumbered (removed and added)", "int32 a = 1;", "int32 a = 2;", true, true),
    ("fields swap numbers, same types", "int32 a = 1; int32 b = 2;", "int32 a = 2; int32 b = 1;", true, true),
    ("fields swap numbers, different types", "int32 a = 1; string b = 2;", "int32 a = 2; string b = 1;", false, false),
    ("field removed and its number reserved", "int32 a = 1; string b = 2;", "int32 a = 1; reserved 2;", true, true),
    ("field name reserved", "int32 a = 1; string b = 2;", "int32 a = 1; reserved \"b\";", true, true),
    ("reserved range added", "int32 a = 1;", "int32 a = 1; reserved 10 to 20;", true, true),
    ("reserved number reused by a new field", "int32 a = 1; reserved 2;", "int32 a = 1; string b = 2;", true, true),
    // Scalar groups.
    ("int32 to int64", "int32 a = 1;", "int64 a = 1;", true, true),
    ("int32 to uint64", "int32 a = 1;", "uint64 a = 1;", true, true),
    ("int64 to bool", "int64 a = 1;", "bool a = 1;", true, true),
    ("int32 to sint32", "int32 a = 1;", "sint32 a = 1;", false, false),
    ("sint32 to sint64", "sint32 a = 1;", "sint64 a = 1;", true, true),
    ("string to bytes", "string a = 1;", "bytes a = 1;", true, true),
    ("string to int32", "string a = 1;", "int32 a = 1;", false, false),
    ("fixed32 to sfixed32", "fixed32 a = 1;", "sfixed32 a = 1;", true, true),
    ("fixed32 to fixed64", "fixed32 a = 1;", "fixed64 a = 1;", false, false),
    ("fixed64 to sfixed64", "fixed64 a = 1;", "sfixed64 a = 1;", true, true),
    ("float to double", "float a = 1;", "double a = 1;", false, false),
    ("int32 to float", "int32 a = 1;", "float a = 1;", false, false),
    ("double to fixed64", "double a = 1;", "fixed64 a = 1;", false, false),
    ("enum to int32", "E a = 1; enum E { Z = 0; }", "int32 a = 1; enum E { Z = 0; }", true, true),
    ("int32 to enum", "int32 a = 1; enum E { Z = 0; }", "E a = 1; enum E { Z = 0; }", true, true),
    ("enum to string", "E a = 1; enum E { Z = 0; }", "string a = 1; enum E { Z = 0; }", false, false),
    // Kinds: scalar, message, map.
    ("scalar to message", "int32 a = 1; message N { int32 x = 1; }", "N a = 1; message N { int32 x = 1; }", false, false),
    ("message to map", "N a = 1; message N { int32 x = 1; }", "map<string, int32> a = 1; message N { int32 x = 1; }", false, false),
    ("map value int32 to int64", "map<string, int32> a = 1;", "map<string, int64> a = 1;", true, true),
    ("map value int32 to string", "map<string, int32> a = 1;", "map<string, string> a = 1;", false, false),
    ("map key string to int32", "map<string, int32> a = 1;", "map<int32, int32> a = 1;", false, false),
    ("map to repeated scalar", "map<string, int32> a = 1;", "repeated int32 a = 1;", false, false),
    // Labels.
    ("proto3 singular to repeated (no label written)", "int32 a = 1;", "repeated int32 a = 1;", true, true),
    ("proto3 singular to optional", "int32 a = 1;", "optional int32 a = 1;", true, true),
    ("proto3 optional to repeated", "optional int32 a = 1;", "repeated int32 a = 1;", false, false),
    ("proto3 optional string to repeated", "optional string a = 1;", "repeated string a = 1;", true, true),
    (
        "proto2 optional to repeated",
        "syntax = \"proto2\"; package p; message M { optional int32 a = 1; }",
        "syntax = \"proto2\"; package p; message M { repeated int32 a = 1; }",
        false,
        false,
    ),
    (
        "proto2 optional bytes to repeated",
        "syntax = \"proto2\"; package p; message M { optional bytes a = 1; }",
        "syntax = \"proto2\"; package p; message M { repeated bytes a = 1; }",
        true,
        true,
    ),
    (
        "proto2 required field added",
        "syntax = \"proto2\"; package p; message M { optional int32 a = 1; }",
        "syntax = \"proto2\"; package p; message M { optional int32 a = 1; required int32 b = 2; }",
        false,
        false,
    ),
    (
        "proto2 optional to required",
        "syntax = \"proto2\"; package p; message M { optional int32 a = 1; }",
        "syntax = \"proto2\"; package p; message M { required int32 a = 1; }",
        false,
        false,
    ),
    (
        "proto2 to proto3, same fields",
        "syntax = \"proto2\"; package p; message M { optional int32 a = 1; }",
        "syntax = \"proto3\"; package p; message M { int32 a = 1; }",
        true,
        true,
    ),
    // Oneofs.
    ("oneof added around a new field", "int32 a = 1;", "int32 a = 1; oneof o { string b = 2; }", true, true),
    ("field moved into a new oneof", "int32 a = 1;", "oneof o { int32 a = 1; }", true, true),
    ("two fields moved into a new oneof", "int32 a = 1; string b = 2;", "oneof o { int32 a = 1; string b = 2; }", false, true),
    ("field moved into an existing oneof", "int32 a = 1; oneof o { string b = 2; }", "oneof o { int32 a = 1; string b = 2; }", false, true),
    ("field moved out of its oneof", "oneof o { int32 a = 1; string b = 2; }", "int32 a = 1; oneof o { string b = 2; }", true, false),
    ("oneof field removed", "oneof o { int32 a = 1; string b = 2; }", "oneof o { int32 a = 1; }", false, true),
    ("oneof field added", "oneof o { int32 a = 1; }", "oneof o { int32 a = 1; string b = 2; }", true, false),
    ("whole oneof removed", "int32 x = 9; oneof o { int32 a = 1; string b = 2; }", "int32 x = 9;", true, true),
    ("oneof renamed", "oneof o { int32 a = 1; }", "oneof q { int32 a = 1; }", true, true),
    ("oneof field type changed", "oneof o { int32 a = 1; }", "oneof o { string a = 1; }", false, false),
    // Messages and enums.
    ("message added", "int32 a = 1;", "syntax = \"proto3\"; package p; message M { int32 a = 1; } message N { int32 b = 1; }", true, false),
    ("message removed", "syntax = \"proto3\"; package p; message M { int32 a = 1; } message N { int32 b = 1; }", "int32 a = 1;", false, true),
    ("message renamed", "int32 a = 1;", "syntax = \"proto3\"; package p; message Renamed { int32 a = 1; }", false, false),
    ("messages reordered", "syntax = \"proto3\"; package p; message A { int32 a = 1; } message B { int32 b = 1; }", "syntax = \"proto3\"; package p; message B { int32 b = 1; } message A { int32 a = 1; }", true, true),
    ("nested message gains a field", "N n = 1; message N { int32 x = 1; }", "N n = 1; message N { int32 x = 1; string y = 2; }", true, true),
    ("nested message field type changed", "N n = 1; message N { int32 x = 1; }", "N n = 1; message N { string x = 1; }", false, false),
    ("field type names another message", "N n = 1; message N { int32 x = 1; } message O { int32 x = 1; }", "O n = 1; message N { int32 x = 1; } message O { int32 x = 1; }", false, false),
    ("enum value added", "E e = 1; enum E { Z = 0; A = 1; }", "E e = 1; enum E { Z = 0; A = 1; B = 2; }", true, true),
    ("enum value removed", "E e = 1; enum E { Z = 0; A = 1; }", "E e = 1; enum E { Z = 0; }", true, true),
    ("enum value renamed", "E e = 1; enum E { Z = 0; A = 1; }", "E e = 1; enum E { Z = 0; B = 1; }", true, true),
    ("enum removed with its field", "E e = 1; enum E { Z = 0; }", "int32 x = 2;", true, true),
    ("recursive message gains a field", "M next = 1;", "M next = 1; int32 depth = 2;", true, true),
    ("recursive message changes a type", "M next = 1; int32 depth = 2;", "M next = 1; string depth = 2;", false, false),
    // Files.
    ("package changed", "int32 a = 1;", "syntax = \"proto3\"; package q; message M { int32 a = 1; }", false, false),
    ("package added", "syntax = \"proto3\"; message M { int32 a = 1; }", "int32 a = 1;", false, false),
    ("comments and spacing only", "int32 a = 1;", "syntax = \"proto3\";\n// a comment\npackage p;\nmessage M {\n  int32 a = 1; /* trailing */\n}\n", true, true),
    ("file option added", "int32 a = 1;", "syntax = \"proto3\"; package p; option java_package = \"com.example\"; message M { int32 a = 1; }", true, true),
    (
        "well-known type unchanged",
        "syntax = \"proto3\"; package p; import \"google/protobuf/timestamp.proto\"; message M { google.protobuf.Timestamp at = 1; }",
        "syntax = \"proto3\"; package p; import \"google/protobuf/timestamp.proto\"; message M { google.protobuf.Timestamp at = 1; int32 b = 2; }",
        true,
        true,
    ),
    (
        "well-known type replaced",
        "syntax = \"proto3\"; package p; import \"google/protobuf/timestamp.proto\"; message M { google.protobuf.Timestamp at = 1; }",
        "syntax = \"proto3\"; package p; import \"google/protobuf/duration.proto\"; message M { google.protobuf.Duration at = 1; }",
        false,
        false,
    ),
];

fn text(s: &str) -> String {
    if s.starts_with("syntax") {
        s.to_string()
    } else {
        format!("syntax = \"proto3\"; package p; message M {{ {s} }}")
    }
}

fn parsed(s: &str) -> es_registry::format::Parsed {
    let t = text(s);
    parse(SchemaType::Protobuf, &t, &[]).unwrap_or_else(|e| panic!("{t} does not parse: {e}"))
}

fn proto(s: &str) -> NewSchema {
    NewSchema {
        metadata: None,
        rule_set: None,
        schema_type: SchemaType::Protobuf,
        schema: text(s),
        references: Vec::new(),
        id: None,
        version: None,
    }
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
            r.register("s", &proto(old), false).expect("old");
            let expected = match level {
                Compatibility::None => true,
                Compatibility::Backward => *backward,
                Compatibility::Forward => *forward,
                _ => *backward && *forward,
            };
            let got = r.register("s", &proto(new), false);
            assert_eq!(got.is_ok(), expected, "{what} under {level:?}: {got:?}");
        }
    }
}

#[test]
fn the_http_registry_applies_each_level() {
    let texts: Vec<(String, String)> = ROWS.iter().map(|r| (text(r.1), text(r.2))).collect();
    let rows: Vec<common::Row> = ROWS
        .iter()
        .zip(&texts)
        .map(|(r, (o, n))| (r.0, o.as_str(), n.as_str(), r.3, r.4))
        .collect();
    common::table_over_http("PROTOBUF", &rows);
}

#[test]
fn messages_name_the_problem_and_its_place() {
    let m = incompatibilities(
        &parsed("string a = 1;"),
        &parsed("int32 a = 1;"),
        "new",
        "old",
    );
    assert_eq!(m, vec!["{errorType:\"FIELD_SCALAR_KIND_CHANGED\", description:\"The kind of a SCALAR field at path '#/M/1' in the new schema does not match its kind in the old schema\"}"]);
    let m = incompatibilities(
        &parsed("oneof o { int32 a = 1; }"),
        &parsed("oneof o { int32 a = 1; string b = 2; }"),
        "new",
        "old",
    );
    assert_eq!(m, vec!["{errorType:\"ONEOF_FIELD_REMOVED\", description:\"The new schema is missing a oneof field at path '#/M/o/2' in the old schema\"}"]);
}

#[test]
fn invalid_protobuf_schemas_are_refused() {
    for bad in [
        "syntax = \"proto3\"; message M { Nope a = 1; }",
        "syntax = \"proto3\"; message M { int32 a = 1; int32 b = 1; }",
        "syntax = \"proto3\"; message M { int32 a = 1; reserved 1; }",
        "syntax = \"proto3\"; import \"missing.proto\"; message M { int32 a = 1; }",
        "syntax = \"proto4\";",
        "message {",
        "",
    ] {
        assert!(
            parse(SchemaType::Protobuf, bad, &[]).is_err(),
            "{bad:?} parsed"
        );
    }
}

/// Imports resolved through references (the name is the import path); a
/// change in the referenced subject's schema is seen through the field.
#[test]
fn references_across_subjects() {
    let mut r = Registry::new();
    let addr = |t: &str| NewSchema {
        schema: format!("syntax = \"proto3\"; package a; message Addr {{ {t} }}"),
        ..proto("")
    };
    r.register("addr", &addr("string city = 1;"), false)
        .expect("addr v1");
    let user = |version: i32| {
        NewSchema {
        schema: "syntax = \"proto3\"; package p; import \"a/addr.proto\"; message User { a.Addr home = 1; }".into(),
        references: vec![Reference {
            name: "a/addr.proto".into(),
            subject: "addr".into(),
            version,
        }],
        ..proto("")
    }
    };
    r.register("user", &user(1), false).expect("user v1");
    // Without its reference the import does not resolve.
    let mut bare = user(1);
    bare.references.clear();
    assert_eq!(
        r.register("user", &bare, false).expect_err("bare").code(),
        42201
    );
    r.set_config(Some("addr"), Compatibility::None)
        .expect("none");
    r.register("addr", &addr("int32 city = 1;"), false)
        .expect("addr v2");
    let e = r
        .register("user", &user(2), false)
        .expect_err("incompatible");
    assert_eq!(e.code(), 409);
    assert!(e.to_string().contains("FIELD_NAMED_TYPE_CHANGED"), "{e}");
    // The same schema, written differently, is the same registration.
    let again = NewSchema {
        schema: "syntax=\"proto3\";\npackage p;\n// c\nimport \"a/addr.proto\";\nmessage User {\n  a.Addr home = 1;\n}\n".into(),
        ..user(1)
    };
    let first = r.lookup("user", &user(1), false, false).expect("v1").id;
    assert_eq!(r.register("user", &again, false).expect("same").id, first);
}
