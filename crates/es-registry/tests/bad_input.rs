//! Hostile schemas of all three formats through the HTTP API: malformed,
//! nested 10,000 deep, huge, recursive and cyclic through `$ref`s and
//! imports, wide combinations that would make a naive diff exponential,
//! and random text (proptest). Every request must be answered (the test
//! finishing is the proof that nothing hangs), with 200, 409 or 42201 as
//! the schema deserves, never a panic (a panicking handler would drop the
//! connection) nor a 500; the process's peak memory stays bounded.

mod common;

use common::{client, send, Server};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use reqwest::blocking::Client;
use serde_json::{json, Value};

struct Api {
    server: Server,
    client: Client,
    _dir: tempfile::TempDir,
}

impl Api {
    fn new() -> Api {
        let dir = tempfile::tempdir().expect("tmp");
        let server = Server::start(dir.path()).expect("starts");
        Api {
            server,
            client: client(),
            _dir: dir,
        }
    }

    /// Registers `schema` under `subject`; the status and error code (0 on success).
    fn register(&self, subject: &str, t: &str, schema: &str, refs: Value) -> (u16, i64) {
        let body = json!({"schema": schema, "schemaType": t, "references": refs}).to_string();
        let url = self.server.url(&format!("/subjects/{subject}/versions"));
        let (st, v) = send(&self.client, "POST", &url, Some(body));
        (st, v["error_code"].as_i64().unwrap_or(0))
    }

    fn set_level(&self, subject: &str, level: &str) {
        let url = self.server.url(&format!("/config/{subject}"));
        let body = json!({"compatibility": level}).to_string();
        assert_eq!(send(&self.client, "PUT", &url, Some(body)).0, 200);
    }
}

fn invalid(got: (u16, i64), what: &str) {
    assert_eq!(got, (422, 42201), "{what}");
}

/// Answered as a schema that parsed: registered, or refused as incompatible.
fn answered(got: (u16, i64), what: &str) {
    assert!(matches!(got, (200, 0) | (409, 409)), "{what}: {got:?}");
}

fn nested(open: &str, inner: &str, close: &str, n: usize) -> String {
    let mut s = String::with_capacity((open.len() + close.len()) * n + inner.len());
    for _ in 0..n {
        s.push_str(open);
    }
    s.push_str(inner);
    for _ in 0..n {
        s.push_str(close);
    }
    s
}

const DEEP: usize = 10_000;

#[test]
fn deeply_nested_schemas_are_refused() {
    let api = Api::new();
    let none = json!([]);
    let avro = nested(r#"{"type":"array","items":"#, r#""int""#, "}", DEEP);
    invalid(
        api.register("a", "AVRO", &avro, none.clone()),
        "avro arrays",
    );
    let avro_union = nested("[", r#""int""#, "]", DEEP);
    invalid(
        api.register("a", "AVRO", &avro_union, none.clone()),
        "avro unions",
    );
    let json_props = nested(r#"{"properties":{"a":"#, "{}", "}}", DEEP);
    invalid(
        api.register("j", "JSON", &json_props, none.clone()),
        "json properties",
    );
    let json_arrays = nested(r#"{"allOf":["#, "{}", "]}", DEEP);
    invalid(
        api.register("j", "JSON", &json_arrays, none.clone()),
        "json allOf",
    );
    let proto = format!(
        "syntax = \"proto3\"; {}",
        nested("message A { ", "int32 a = 1;", " }", DEEP)
    );
    invalid(
        api.register("p", "PROTOBUF", &proto, none.clone()),
        "proto messages",
    );
    let options = format!(
        "syntax = \"proto3\"; message M {{ int32 a = 1 [(x) = {}]; }}",
        nested("{ a: ", "1", " }", DEEP)
    );
    invalid(
        api.register("p", "PROTOBUF", &options, none.clone()),
        "proto options",
    );
    let parens = format!(
        "syntax = \"proto3\"; option x = {};",
        nested("(", "1", ")", DEEP)
    );
    invalid(
        api.register("p", "PROTOBUF", &parens, none),
        "proto parentheses",
    );
}

#[test]
fn malformed_schemas_are_refused() {
    let api = Api::new();
    let none = json!([]);
    for t in ["AVRO", "JSON", "PROTOBUF"] {
        for bad in [
            "",
            "{",
            "}",
            "null",
            "12",
            "\"",
            "[[[",
            "\u{0}\u{1}\u{2}",
            "syntax = \"proto3\"; message",
            "{\"type\": }",
            "{\"$ref\": 12}",
            "/* open comment",
        ] {
            invalid(
                api.register("s", t, bad, none.clone()),
                &format!("{t} {bad:?}"),
            );
        }
    }
    // References to nothing, and a schema importing itself.
    let missing = json!([{"name": "x.proto", "subject": "nope", "version": 1}]);
    let importer = "syntax = \"proto3\"; import \"x.proto\"; message M { int32 a = 1; }";
    invalid(
        api.register("p", "PROTOBUF", importer, missing),
        "missing reference",
    );
    let own = format!(
        "syntax = \"proto3\"; import \"{}\"; message M {{ int32 a = 1; }}",
        es_registry::format::proto::MAIN_FILE
    );
    invalid(
        api.register("p", "PROTOBUF", &own, json!([])),
        "self import",
    );
    invalid(
        api.register(
            "j",
            "JSON",
            r#"{"$schema":"http://example.com/mine","type":"string"}"#,
            json!([]),
        ),
        "unknown $schema",
    );
}

/// Schemas whose diff a naive implementation could not finish:
/// self-referencing, mutually recursive, shared many times, wide.
#[test]
fn recursive_and_wide_schemas_are_answered() {
    let api = Api::new();
    let none = json!([]);
    // JSON: anyOf over recursive $refs (the case that kept JSON unwired).
    let j1 = format!(
        r##"{{"anyOf":[{}{{"type":"string"}}]}}"##,
        r##"{"$ref":"#"},"##.repeat(30)
    );
    let j2 = format!(
        r##"{{"anyOf":[{}{{"type":"integer"}}]}}"##,
        r##"{"$ref":"#"},"##.repeat(30)
    );
    answered(
        api.register("j1", "JSON", &j1, none.clone()),
        "json anyOf recursion",
    );
    answered(
        api.register("j1", "JSON", &j2, none.clone()),
        "json anyOf recursion changed",
    );
    // JSON: a $ref cycle with no schema in it, and mutual recursion.
    let cycle = r##"{"definitions":{"a":{"$ref":"#/definitions/b"},"b":{"$ref":"#/definitions/a"}},"$ref":"#/definitions/a"}"##;
    answered(
        api.register("j2", "JSON", cycle, none.clone()),
        "json $ref cycle",
    );
    answered(
        api.register("j2", "JSON", r##"{"type":"string"}"##, none.clone()),
        "after a $ref cycle",
    );
    // JSON: a chain of 2,000 definitions, each a property away from the next.
    let chain = |last: &str| {
        let defs: Vec<String> = (0..2000)
            .map(|i| format!(r##""d{i}":{{"type":"object","properties":{{"n":{{"$ref":"#/definitions/d{}"}}}}}}"##, i + 1))
            .collect();
        format!(
            r##"{{"definitions":{{{},"d2000":{{"type":"{last}"}}}},"$ref":"#/definitions/d0"}}"##,
            defs.join(",")
        )
    };
    answered(
        api.register("j3", "JSON", &chain("string"), none.clone()),
        "json chain",
    );
    answered(
        api.register("j3", "JSON", &chain("integer"), none.clone()),
        "json chain changed",
    );
    // JSON: 3,000 alternatives against 3,000.
    let wide = |t: &str| {
        let alts: Vec<String> = (0..3000)
            .map(|i| format!(r#"{{"type":"{t}","maxLength":{i}}}"#))
            .collect();
        format!(r#"{{"anyOf":[{}]}}"#, alts.join(","))
    };
    answered(
        api.register("j4", "JSON", &wide("string"), none.clone()),
        "json wide",
    );
    answered(
        api.register("j4", "JSON", &wide("integer"), none.clone()),
        "json wide changed",
    );
    // JSON: 100 large alternatives that differ only at their ends (the
    // duplicates search must not compare them pairwise in full).
    let big_alts = |t: &str| {
        let filler = format!(r#""description":"{}""#, "x".repeat(40_000));
        let alts: Vec<String> = (0..100)
            .map(|i| format!(r#"{{{filler},"type":"{t}","maxLength":{i}}}"#))
            .collect();
        format!(r#"{{"oneOf":[{}]}}"#, alts.join(","))
    };
    answered(
        api.register("j6", "JSON", &big_alts("string"), none.clone()),
        "json big alternatives",
    );
    answered(
        api.register("j6", "JSON", &big_alts("integer"), none.clone()),
        "json big alternatives changed",
    );
    // JSON: many patternProperties against many removed properties.
    let patterned = {
        let pats: Vec<String> = (0..500)
            .map(|i| format!(r#""^p{i}$":{{"type":"string"}}"#))
            .collect();
        let props: Vec<String> = (0..2000)
            .map(|i| format!(r#""q{i}":{{"type":"string"}}"#))
            .collect();
        (
            format!(
                r#"{{"type":"object","properties":{{{}}},"additionalProperties":false}}"#,
                props.join(",")
            ),
            format!(
                r#"{{"type":"object","patternProperties":{{{}}},"additionalProperties":false}}"#,
                pats.join(",")
            ),
        )
    };
    answered(
        api.register("j5", "JSON", &patterned.0, none.clone()),
        "json properties",
    );
    answered(
        api.register("j5", "JSON", &patterned.1, none.clone()),
        "json patterns",
    );

    // Avro: 40 records, each with two fields of the next (by name): a
    // DAG that a check without memo walks 2^40 times.
    let dag = |last: &str| {
        let mut s = format!(
            r#"{{"type":"record","name":"R40","fields":[{{"name":"v","type":"{last}"}}]}}"#
        );
        for i in (0..40).rev() {
            s = format!(
                r#"{{"type":"record","name":"R{i}","fields":[{{"name":"a","type":{s}}},{{"name":"b","type":"R{}"}}]}}"#,
                i + 1
            );
        }
        s
    };
    api.set_level("a1", "FULL");
    answered(
        api.register("a1", "AVRO", &dag("int"), none.clone()),
        "avro dag",
    );
    answered(
        api.register("a1", "AVRO", &dag("string"), none.clone()),
        "avro dag changed",
    );
    // Avro: a recursive record.
    let list = r#"{"type":"record","name":"L","fields":[{"name":"next","type":["null","L"]},{"name":"v","type":"int"}]}"#;
    let list2 = r#"{"type":"record","name":"L","fields":[{"name":"next","type":["null","L"]},{"name":"v","type":"string"}]}"#;
    answered(api.register("a2", "AVRO", list, none.clone()), "avro list");
    answered(
        api.register("a2", "AVRO", list2, none.clone()),
        "avro list changed",
    );

    // Protobuf: recursive messages, and a chain of 2,000 through fields.
    let tree = "syntax = \"proto3\"; message T { repeated T kids = 1; T parent = 2; int32 v = 3; }";
    let tree2 =
        "syntax = \"proto3\"; message T { repeated T kids = 1; T parent = 2; string v = 3; }";
    answered(
        api.register("p1", "PROTOBUF", tree, none.clone()),
        "proto tree",
    );
    answered(
        api.register("p1", "PROTOBUF", tree2, none.clone()),
        "proto tree changed",
    );
    let pchain = |t: &str| {
        let mut s = String::from("syntax = \"proto3\";");
        for i in 0..2000 {
            s.push_str(&format!(" message M{i} {{ M{} next = 1; }}", i + 1));
        }
        s.push_str(&format!(" message M2000 {{ {t} v = 1; }}"));
        s
    };
    answered(
        api.register("p2", "PROTOBUF", &pchain("int32"), none.clone()),
        "proto chain",
    );
    answered(
        api.register("p2", "PROTOBUF", &pchain("string"), none),
        "proto chain changed",
    );
}

#[test]
fn huge_schemas_are_answered() {
    let api = Api::new();
    let none = json!([]);
    let avro = |t: &str| {
        let fields: Vec<String> = (0..20_000)
            .map(|i| format!(r#"{{"name":"f{i}","type":"{t}"}}"#))
            .collect();
        format!(
            r#"{{"type":"record","name":"Big","fields":[{}]}}"#,
            fields.join(",")
        )
    };
    answered(
        api.register("a", "AVRO", &avro("int"), none.clone()),
        "avro big",
    );
    answered(
        api.register("a", "AVRO", &avro("long"), none.clone()),
        "avro big changed",
    );
    let symbols: Vec<String> = (0..50_000).map(|i| format!("\"S{i}\"")).collect();
    let e1 = format!(
        r#"{{"type":"enum","name":"E","symbols":[{}]}}"#,
        symbols.join(",")
    );
    let e2 = format!(
        r#"{{"type":"enum","name":"E","symbols":[{}]}}"#,
        symbols[1..].join(",")
    );
    answered(api.register("e", "AVRO", &e1, none.clone()), "avro enum");
    answered(
        api.register("e", "AVRO", &e2, none.clone()),
        "avro enum narrowed",
    );
    let json_big = |t: &str| {
        let props: Vec<String> = (0..20_000)
            .map(|i| format!(r#""p{i}":{{"type":"{t}"}}"#))
            .collect();
        let req: Vec<String> = (0..20_000).map(|i| format!(r#""p{i}""#)).collect();
        format!(
            r#"{{"type":"object","properties":{{{}}},"required":[{}]}}"#,
            props.join(","),
            req.join(",")
        )
    };
    answered(
        api.register("j", "JSON", &json_big("string"), none.clone()),
        "json big",
    );
    answered(
        api.register("j", "JSON", &json_big("number"), none.clone()),
        "json big changed",
    );
    let je1 = format!(r#"{{"enum":[{}]}}"#, symbols.join(","));
    let je2 = format!(r#"{{"enum":[{}]}}"#, symbols[1..].join(","));
    answered(api.register("je", "JSON", &je1, none.clone()), "json enum");
    answered(
        api.register("je", "JSON", &je2, none.clone()),
        "json enum narrowed",
    );
    let proto = |t: &str| {
        // 19000-19999 are reserved to Protobuf itself.
        let fields: String = (1..18_000).map(|i| format!(" {t} f{i} = {i};")).collect();
        format!("syntax = \"proto3\"; message Big {{{fields} }}")
    };
    answered(
        api.register("p", "PROTOBUF", &proto("int32"), none.clone()),
        "proto big",
    );
    answered(
        api.register("p", "PROTOBUF", &proto("string"), none.clone()),
        "proto big changed",
    );
    // Over the body limit: refused before it is read whole.
    let over = "x".repeat(es_registry::limits::REQUEST_BYTES_MAX + 1);
    assert_eq!(api.register("a", "AVRO", &over, none), (413, 42209));
}

/// Random text and random mutations of valid schemas: always answered.
#[test]
fn random_schemas_are_answered() {
    let api = Api::new();
    let valid = [
        ("AVRO", r#"{"type":"record","name":"R","fields":[{"name":"a","type":["null","int"],"default":null}]}"#),
        ("JSON", r##"{"type":"object","properties":{"a":{"$ref":"#/definitions/x"}},"definitions":{"x":{"anyOf":[{"type":"string"},{"$ref":"#"}]}}}"##),
        ("PROTOBUF", "syntax = \"proto3\"; package p; message M { oneof o { int32 a = 1; string b = 2; } map<string, M> m = 3; }"),
    ];
    let mut runner = TestRunner::new(Config {
        cases: 96,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (
        0..3usize,
        proptest::collection::vec(
            (any::<u16>(), "[{}\\[\\]\":,a-z0-9 #$/;=<>()-]{0,12}"),
            0..6,
        ),
        "[ -~]{0,64}",
    );
    runner
        .run(&strategy, |(format, edits, noise)| {
            let (t, base) = valid[format];
            let mut text = base.to_string();
            for (at, insert) in &edits {
                let mut i = (*at as usize) % (text.len() + 1);
                while !text.is_char_boundary(i) {
                    i -= 1;
                }
                text.insert_str(i, insert);
            }
            for schema in [text.as_str(), noise.as_str()] {
                let got = api.register("fuzz", t, schema, json!([]));
                prop_assert!(
                    matches!(got, (200, 0) | (409, 409) | (422, 42201)),
                    "{t} {schema:?}: {got:?}"
                );
            }
            Ok(())
        })
        .expect("every random schema answered");
}

/// The peak resident memory of this test process (all the tests above
/// share it) stays far below what an unbounded diff would take.
#[test]
fn peak_memory_is_bounded() {
    recursive_and_wide_schemas_are_answered();
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let peak_kib: u64 = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    println!("peak resident memory: {peak_kib} KiB");
    assert!(peak_kib < 1024 * 1024, "peak {peak_kib} KiB");
}

/// A chain of schemas, each importing the one before through a reference:
/// accepted up to the registry's reference depth, refused past it (a
/// cycle cannot be registered: a reference names a version that exists).
#[test]
fn reference_chains_are_bounded() {
    let api = Api::new();
    let depth = es_registry::limits::REFERENCE_DEPTH_MAX;
    for i in 0..=depth {
        let (import, refs, field) = if i == 0 {
            (String::new(), json!([]), "int32 v = 1;".to_string())
        } else {
            let prev = i - 1;
            (
                format!("import \"m{prev}.proto\";"),
                json!([{"name": format!("m{prev}.proto"), "subject": format!("m{prev}"), "version": 1}]),
                format!("M{prev} prev = 1;"),
            )
        };
        let text = format!("syntax = \"proto3\"; {import} message M{i} {{ {field} }}");
        let got = api.register(&format!("m{i}"), "PROTOBUF", &text, refs);
        if i < depth {
            assert_eq!(got, (200, 0), "link {i}");
        } else {
            invalid(got, "a chain past the reference depth");
        }
    }
}
