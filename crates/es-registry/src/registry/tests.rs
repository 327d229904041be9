//! Unit tests of the core: every operation and every error code it can
//! answer with, on an in-memory registry.

use super::*;
use crate::model::{NewSchema, Registered};

const V1: &str = r#"{"type":"record","name":"User","fields":[{"name":"id","type":"long"}]}"#;
/// V1 plus a field with a default: backward and forward compatible.
const V2: &str = r#"{"type":"record","name":"User","fields":[{"name":"id","type":"long"},{"name":"email","type":"string","default":""}]}"#;
/// V1 plus a field without a default: not backward compatible.
const V3_BAD: &str = r#"{"type":"record","name":"User","fields":[{"name":"id","type":"long"},{"name":"age","type":"int"}]}"#;

fn avro(text: &str) -> NewSchema {
    NewSchema {
        metadata: None,
        rule_set: None,
        schema_type: SchemaType::Avro,
        schema: text.to_string(),
        references: Vec::new(),
        id: None,
        version: None,
    }
}

fn code<T: std::fmt::Debug>(r: Result<T>) -> u32 {
    r.expect_err("an error").code()
}

fn registered(r: &mut Registry, subject: &str, text: &str) -> Registered {
    r.register(subject, &avro(text), false).expect("registers")
}

#[test]
fn register_assigns_ids_and_versions_and_reuses_identical_schemas() {
    let mut r = Registry::new();
    let a = registered(&mut r, "s-value", V1);
    assert_eq!(a, Registered { id: 1, version: 1 });
    // The same schema again (white space and key order aside): same answer, no change.
    let g = r.generation();
    let again = registered(
        &mut r,
        "s-value",
        r#"{ "name": "User", "type": "record", "fields": [ {"type": "long", "name": "id"} ] }"#,
    );
    assert_eq!(again, a);
    assert_eq!(r.generation(), g);
    let b = registered(&mut r, "s-value", V2);
    assert_eq!(b, Registered { id: 2, version: 2 });
    // The same schema under another subject keeps its id.
    let c = registered(&mut r, "other", V1);
    assert_eq!(c, Registered { id: 1, version: 1 });
    assert_eq!(r.subjects("", false), vec!["other", "s-value"]);
    assert_eq!(r.subjects("s-", false), vec!["s-value"]);
    assert_eq!(r.versions("s-value", false).expect("versions"), vec![1, 2]);
    let latest = r
        .version("s-value", VersionSpec::Latest, false)
        .expect("latest");
    assert_eq!((latest.version, latest.id), (2, 2));
    assert_eq!(
        r.subjects_by_id(1, false).expect("subjects"),
        vec!["other", "s-value"]
    );
    assert_eq!(
        r.versions_by_id(1, false).expect("versions"),
        vec![("other".to_string(), 1), ("s-value".to_string(), 1)]
    );
    assert_eq!(r.schemas("", false, true).len(), 2);
    assert_eq!(r.schemas("", false, false).len(), 3);
}

#[test]
fn lookup_finds_the_version_or_answers_40401_40403() {
    let mut r = Registry::new();
    registered(&mut r, "s", V1);
    let found = r.lookup("s", &avro(V1), false, false).expect("found");
    assert_eq!((found.version, found.id), (1, 1));
    assert_eq!(code(r.lookup("nope", &avro(V1), false, false)), 40401);
    assert_eq!(code(r.lookup("s", &avro(V2), false, false)), 40403);
    assert_eq!(code(r.lookup("s", &avro("{"), false, false)), 42201);
}

#[test]
fn incompatible_schemas_answer_409_with_confluents_details() {
    let mut r = Registry::new();
    registered(&mut r, "s", V1);
    let e = r
        .register("s", &avro(V3_BAD), false)
        .expect_err("incompatible");
    assert_eq!((e.status(), e.code()), (409, 409));
    let m = e.to_string();
    assert!(m.starts_with("Schema being registered is incompatible with an earlier schema for subject \"s\", details: [{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE'"), "{m}");
    assert!(m.contains("The field 'age' at path '/fields/1' in the new schema has no default value and is missing in the old schema"), "{m}");
    assert!(m.contains("{oldSchemaVersion: 1}"), "{m}");
    assert!(m.contains("compatibility: 'BACKWARD'"), "{m}");
    // Nothing was registered.
    assert_eq!(r.versions("s", false).expect("versions"), vec![1]);
    // With NONE it goes in.
    r.set_config(Some("s"), Compatibility::None)
        .expect("config");
    assert_eq!(registered(&mut r, "s", V3_BAD).version, 2);
}

#[test]
fn transitive_levels_check_every_version() {
    let mut r = Registry::new();
    r.set_config(None, Compatibility::Backward).expect("config");
    let a = r#"{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}"#;
    let b = r#"{"type":"record","name":"R","fields":[{"name":"a","type":"int","default":0}]}"#;
    let c = r#"{"type":"record","name":"R","fields":[{"name":"b","type":"int","default":0}]}"#;
    let d = r#"{"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"b","type":"int","default":0}]}"#;
    registered(&mut r, "t", a);
    registered(&mut r, "t", b);
    registered(&mut r, "t", c);
    // d needs "a", which c (the latest) lacks: incompatible with c even non-transitively.
    assert_eq!(code(r.register("t", &avro(d), false)), 409);
    let e = r#"{"type":"record","name":"R","fields":[{"name":"a","type":"int","default":1},{"name":"b","type":"int"}]}"#;
    // e needs "b": v1 and v2 lack it; the latest (c) has it.
    r.set_config(Some("t"), Compatibility::BackwardTransitive)
        .expect("config");
    let err = r.register("t", &avro(e), false).expect_err("transitive");
    assert!(err.to_string().contains("{oldSchemaVersion: 2}"), "{err}");
    r.set_config(Some("t"), Compatibility::Backward)
        .expect("config");
    assert_eq!(registered(&mut r, "t", e).version, 4);
}

#[test]
fn versions_and_subjects_answer_40401_40402_42202() {
    let mut r = Registry::new();
    registered(&mut r, "s", V1);
    assert_eq!(code(r.versions("nope", false)), 40401);
    assert_eq!(
        code(r.version("nope", VersionSpec::Number(1), false)),
        40401
    );
    assert_eq!(code(r.version("s", VersionSpec::Number(7), false)), 40402);
    assert_eq!(code(VersionSpec::parse("0")), 42202);
    assert_eq!(code(VersionSpec::parse("latestt")), 42202);
    assert_eq!(VersionSpec::parse("-1").expect("-1"), VersionSpec::Latest);
    assert_eq!(
        VersionSpec::parse("LATEST").expect("latest"),
        VersionSpec::Latest
    );
    assert_eq!(code(r.schema_by_id(99)), 40403);
    assert_eq!(code(r.subjects_by_id(99, false)), 40403);
}

#[test]
fn soft_and_permanent_deletes_of_versions() {
    let mut r = Registry::new();
    registered(&mut r, "s", V1);
    registered(&mut r, "s", V2);
    // Permanent first: 40407.
    assert_eq!(
        code(r.delete_version("s", VersionSpec::Number(1), true)),
        40407
    );
    assert_eq!(r.delete_version("s", VersionSpec::Number(1), false), Ok(1));
    // Twice: 40406.
    assert_eq!(
        code(r.delete_version("s", VersionSpec::Number(1), false)),
        40406
    );
    // Hidden from reads, visible with deleted=true.
    assert_eq!(r.versions("s", false).expect("v"), vec![2]);
    assert_eq!(r.versions("s", true).expect("v"), vec![1, 2]);
    assert_eq!(code(r.version("s", VersionSpec::Number(1), false)), 40402);
    assert_eq!(
        r.version("s", VersionSpec::Number(1), true)
            .expect("deleted")
            .id,
        1
    );
    // The schema stays readable by id while a soft-deleted version names it.
    assert!(r.schema_by_id(1).is_ok());
    assert_eq!(r.delete_version("s", VersionSpec::Number(1), true), Ok(1));
    assert_eq!(code(r.schema_by_id(1)), 40403);
    assert_eq!(
        code(r.delete_version("s", VersionSpec::Number(1), true)),
        40402
    );
    // `latest` deletes the newest live version.
    assert_eq!(r.delete_version("s", VersionSpec::Latest, false), Ok(2));
    assert_eq!(
        code(r.delete_version("s", VersionSpec::Latest, false)),
        40401
    );
    // Ids are not reused.
    assert_eq!(registered(&mut r, "n", V3_BAD).id, 3);
}

#[test]
fn soft_and_permanent_deletes_of_subjects() {
    let mut r = Registry::new();
    registered(&mut r, "s", V1);
    registered(&mut r, "s", V2);
    r.set_config(Some("s"), Compatibility::Full)
        .expect("config");
    assert_eq!(code(r.delete_subject("nope", false)), 40401);
    assert_eq!(code(r.delete_subject("s", true)), 40405);
    assert_eq!(r.delete_subject("s", false), Ok(vec![1, 2]));
    assert_eq!(code(r.delete_subject("s", false)), 40404);
    assert_eq!(r.subjects("", false), Vec::<String>::new());
    assert_eq!(r.subjects("", true), vec!["s"]);
    // Registering again continues the versions, and a soft-deleted
    // version of the same schema goes for good.
    assert_eq!(
        registered(&mut r, "s", V1),
        Registered { id: 1, version: 3 }
    );
    assert_eq!(r.versions("s", true).expect("v"), vec![2, 3]);
    assert_eq!(r.delete_subject("s", false), Ok(vec![3]));
    assert_eq!(r.delete_subject("s", true), Ok(vec![2, 3]));
    assert_eq!(code(r.versions("s", true)), 40401);
    // The subject's settings went with it.
    assert_eq!(code(r.config(Some("s"), false)), 40408);
}

#[test]
fn references_resolve_and_protect_what_they_name() {
    let mut r = Registry::new();
    let address = r#"{"type":"record","name":"Address","namespace":"x","fields":[{"name":"city","type":"string"}]}"#;
    registered(&mut r, "address", address);
    let user = NewSchema {
        references: vec![Reference {
            name: "x.Address".into(),
            subject: "address".into(),
            version: 1,
        }],
        ..avro(r#"{"type":"record","name":"User","fields":[{"name":"home","type":"x.Address"}]}"#)
    };
    let reg = r
        .register("user", &user, false)
        .expect("registers with a reference");
    assert_eq!(reg, Registered { id: 2, version: 1 });
    assert_eq!(
        r.referenced_by("address", VersionSpec::Number(1))
            .expect("refs"),
        vec![2]
    );
    assert_eq!(r.schema_by_id(2).expect("by id").references.len(), 1);
    // The referenced version cannot go while referenced.
    assert_eq!(
        code(r.delete_version("address", VersionSpec::Number(1), false)),
        42206
    );
    assert_eq!(code(r.delete_subject("address", false)), 42206);
    // A reference to nothing, or without the reference at all: invalid.
    let dangling = NewSchema {
        references: vec![Reference {
            name: "x.Address".into(),
            subject: "address".into(),
            version: 9,
        }],
        ..user.clone()
    };
    assert_eq!(code(r.register("user2", &dangling, false)), 42201);
    assert_eq!(
        code(r.register(
            "user2",
            &NewSchema {
                references: vec![],
                ..user.clone()
            },
            false
        )),
        42201
    );
    // Once the referrer is gone for good, the reference no longer holds.
    r.delete_subject("user", false).expect("soft");
    r.delete_subject("user", true).expect("hard");
    assert_eq!(
        r.delete_version("address", VersionSpec::Number(1), false),
        Ok(1)
    );
}

#[test]
fn invalid_schemas_and_subjects_answer_42201_42208() {
    let mut r = Registry::new();
    assert_eq!(
        code(r.register("s", &avro("{\"type\":\"recrd\"}"), false)),
        42201
    );
    assert_eq!(code(r.register("s", &avro("not json"), false)), 42201);
    // A .proto that does not compile (an unknown type).
    let proto = NewSchema {
        schema_type: SchemaType::Protobuf,
        ..avro("syntax = \"proto3\"; message M { Nope a = 1; }")
    };
    assert_eq!(code(r.register("s", &proto, false)), 42201);
    let bad_json = NewSchema {
        schema_type: SchemaType::Json,
        ..avro("{\"type\":\"objec\"}")
    };
    assert_eq!(code(r.register("s", &bad_json, false)), 42201);
    assert_eq!(code(SchemaType::parse(Some("XML"))), 42201);
    assert_eq!(code(r.register("", &avro(V1), false)), 42208);
    assert_eq!(code(r.register("a\u{1}b", &avro(V1), false)), 42208);
    assert_eq!(code(r.register("__GLOBAL", &avro(V1), false)), 42208);
    assert_eq!(code(r.set_config(Some(""), Compatibility::Full)), 42208);
    assert_eq!(r.generation(), 0);
}

#[test]
fn config_levels_and_40408() {
    let mut r = Registry::new();
    assert_eq!(r.config(None, false), Ok(Compatibility::Backward));
    assert_eq!(code(r.config(Some("s"), false)), 40408);
    assert_eq!(r.config(Some("s"), true), Ok(Compatibility::Backward));
    r.set_config(None, Compatibility::Full).expect("set");
    assert_eq!(r.config(Some("s"), true), Ok(Compatibility::Full));
    r.set_config(Some("s"), Compatibility::None).expect("set");
    assert_eq!(r.config(Some("s"), false), Ok(Compatibility::None));
    assert_eq!(r.delete_config(Some("s")), Ok(Compatibility::None));
    assert_eq!(code(r.delete_config(Some("s"))), 40401);
    assert_eq!(r.delete_config(None), Ok(Compatibility::Full));
    assert_eq!(r.config(None, false), Ok(Compatibility::Backward));
    assert_eq!(code(Compatibility::parse("sideways")), 42203);
    assert_eq!(
        Compatibility::parse("full_transitive"),
        Ok(Compatibility::FullTransitive)
    );
    // Setting what is already set changes nothing.
    let g = r.generation();
    r.set_config(None, Compatibility::Backward).expect("set");
    r.set_config(None, Compatibility::Backward).expect("set");
    assert_eq!(r.generation(), g + 1);
}

#[test]
fn modes_readonly_import_and_42204_42205_42207_40409() {
    let mut r = Registry::new();
    assert_eq!(r.mode(None, false), Ok(Mode::Readwrite));
    assert_eq!(code(r.mode(Some("s"), false)), 40409);
    assert_eq!(code(Mode::parse("WRITEONLY")), 42204);
    registered(&mut r, "s", V1);
    // IMPORT over existing schemas needs force.
    assert_eq!(code(r.set_mode(None, Mode::Import, false)), 42205);
    // An id outside IMPORT mode: 42205.
    let with_id = NewSchema {
        id: Some(10),
        ..avro(V2)
    };
    assert_eq!(code(r.register("s", &with_id, false)), 42205);
    r.set_mode(Some("s"), Mode::Readonly, false)
        .expect("readonly");
    assert_eq!(code(r.register("s", &avro(V2), false)), 42205);
    assert_eq!(code(r.delete_subject("s", false)), 42205);
    assert_eq!(
        code(r.delete_version("s", VersionSpec::Latest, false)),
        42205
    );
    assert_eq!(r.delete_mode("s"), Ok(Mode::Readonly));
    assert_eq!(code(r.delete_mode("s")), 40401);

    r.set_mode(Some("imp"), Mode::Import, false)
        .expect("import on an empty subject");
    // IMPORT without an id: 42205.
    assert_eq!(code(r.register("imp", &avro(V1), false)), 42205);
    let imported = r
        .register(
            "imp",
            &NewSchema {
                id: Some(100),
                version: Some(5),
                ..avro(V3_BAD)
            },
            false,
        )
        .expect("import");
    assert_eq!(
        imported,
        Registered {
            id: 100,
            version: 5
        }
    );
    // Ids continue after the imported one.
    r.set_mode(Some("imp"), Mode::Readwrite, false)
        .expect("readwrite");
    assert_eq!(registered(&mut r, "fresh", V2).id, 101);
    r.set_mode(Some("imp"), Mode::Import, true)
        .expect("import, forced");
    // Another schema under an id in use: 42205.
    assert_eq!(
        code(r.register(
            "imp",
            &NewSchema {
                id: Some(100),
                version: Some(6),
                ..avro(V1)
            },
            false
        )),
        42205
    );
    // The subject holds this schema under id 100 already: 42207.
    assert_eq!(
        code(r.register(
            "imp",
            &NewSchema {
                id: Some(7),
                version: Some(6),
                ..avro(V3_BAD)
            },
            false
        )),
        42207
    );
    // The same import again is a no-op.
    let g = r.generation();
    assert_eq!(
        r.register(
            "imp",
            &NewSchema {
                id: Some(100),
                version: Some(5),
                ..avro(V3_BAD)
            },
            false
        ),
        Ok(imported)
    );
    assert_eq!(r.generation(), g);
}

#[test]
fn compatibility_tests_answer_without_registering() {
    let mut r = Registry::new();
    registered(&mut r, "s", V1);
    let ok = r
        .test_compatibility("s", Some(VersionSpec::Latest), &avro(V2), false, true)
        .expect("test");
    assert!(ok.is_compatible && ok.messages.is_empty());
    let bad = r
        .test_compatibility(
            "s",
            Some(VersionSpec::Number(1)),
            &avro(V3_BAD),
            false,
            true,
        )
        .expect("test");
    assert!(!bad.is_compatible);
    assert!(bad
        .messages
        .iter()
        .any(|m| m.contains("READER_FIELD_MISSING_DEFAULT_VALUE")));
    // Latest of a subject without versions: compatible; a numbered version: 40402.
    assert!(
        r.test_compatibility("none", Some(VersionSpec::Latest), &avro(V1), false, false)
            .expect("test")
            .is_compatible
    );
    assert_eq!(
        code(r.test_compatibility(
            "none",
            Some(VersionSpec::Number(1)),
            &avro(V1),
            false,
            false
        )),
        40402
    );
    assert_eq!(
        code(r.test_compatibility("s", Some(VersionSpec::Number(3)), &avro(V1), false, false)),
        40402
    );
    // An invalid schema: 42201, or with verbose an answer saying why.
    assert_eq!(
        code(r.test_compatibility("s", None, &avro("{"), false, false)),
        42201
    );
    let verbose = r
        .test_compatibility("s", None, &avro("{"), false, true)
        .expect("verbose");
    assert!(!verbose.is_compatible && verbose.messages[0].contains("Invalid schema"));
    assert_eq!(r.versions("s", false).expect("v"), vec![1]);
}

#[test]
fn normalize_stores_the_normal_form() {
    let mut r = Registry::new();
    let text = r#"{"type":"record","name":"N","fields":[{"type":"int","name":"a"}]}"#;
    let reg = r.register("s", &avro(text), true).expect("registers");
    let stored = r.schema_by_id(reg.id).expect("by id").schema;
    assert_eq!(
        stored,
        r#"{"fields":[{"name":"a","type":"int"}],"name":"N","type":"record"}"#
    );
    // Without normalize the client's text is kept (white space aside).
    let reg = r
        .register("t", &avro(&text.replace(',', ", ")), false)
        .expect("registers");
    assert_eq!(reg.id, 1, "the same schema: the same id");
}

#[test]
fn state_round_trips_and_bad_states_are_refused() {
    let mut r = Registry::new();
    registered(&mut r, "s", V1);
    registered(&mut r, "s", V2);
    r.delete_version("s", VersionSpec::Number(1), false)
        .expect("soft");
    let bytes = crate::store::encode(r.state()).expect("encode");
    let back = crate::store::parse(&bytes).expect("parse");
    assert_eq!(back.state(), r.state());
    assert_eq!(
        back.lookup("s", &avro(V2), false, false)
            .expect("lookup")
            .id,
        2
    );
    // A version naming a schema that is not there.
    let mut bad = r.state().clone();
    bad.schemas.remove(&2);
    assert!(Registry::from_state(bad).is_err());
    // An id at or past nextId.
    let mut bad = r.state().clone();
    bad.next_id = 2;
    assert!(Registry::from_state(bad).is_err());
    // A schema that no longer parses.
    let mut bad = r.state().clone();
    if let Some(s) = bad.schemas.get_mut(&1) {
        s.schema = "{\"type\":\"nope\"}".into();
    }
    let bytes = crate::store::encode(&bad).expect("encode");
    assert!(crate::store::parse(&bytes).is_err());
    assert!(crate::store::parse(b"{not json").is_err());
    assert!(crate::store::parse(b"{\"format\":2,\"nextId\":1}").is_err());
}
