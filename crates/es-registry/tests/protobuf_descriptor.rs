//! Protobuf schemas sent as the base64 of a serialized `FileDescriptorProto`
//! (what confluent-kafka-python's `ProtobufSerializer` registers), over real
//! HTTP: registration and lookup, imports resolved through references, the
//! `.proto` text Confluent prints for a descriptor stored and returned, the
//! same id for the same schema sent as text, `?format=serialized`, a bad
//! descriptor refused with 42201, and all of it after a restart.

use base64::Engine;
use prost_reflect::prost::Message;
use prost_reflect::prost_types::{
    field_descriptor_proto::{Label, Type},
    DescriptorProto, FieldDescriptorProto, FileDescriptorProto,
};
use serde_json::{json, Value};

mod common;

use common::{client, send, Server};

fn field(name: &str, number: i32, ty: Type, type_name: Option<&str>) -> FieldDescriptorProto {
    FieldDescriptorProto {
        name: Some(name.into()),
        number: Some(number),
        label: Some(Label::Optional as i32),
        r#type: Some(ty as i32),
        type_name: type_name.map(Into::into),
        ..Default::default()
    }
}

/// As protoc compiles `es/compat/money.proto` (no json_name, as the
/// descriptors embedded in generated code are).
fn money() -> FileDescriptorProto {
    FileDescriptorProto {
        name: Some("es/compat/money.proto".into()),
        package: Some("es.compat".into()),
        syntax: Some("proto3".into()),
        message_type: vec![DescriptorProto {
            name: Some("Money".into()),
            field: vec![
                field("currency_code", 1, Type::String, None),
                field("units", 2, Type::Int64, None),
            ],
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// `es/compat/rec.proto`, importing money.proto.
fn rec() -> FileDescriptorProto {
    let mut tags = field("tags", 3, Type::String, None);
    tags.label = Some(Label::Repeated as i32);
    FileDescriptorProto {
        name: Some("es/compat/rec.proto".into()),
        package: Some("es.compat".into()),
        dependency: vec!["es/compat/money.proto".into()],
        syntax: Some("proto3".into()),
        message_type: vec![DescriptorProto {
            name: Some("Rec".into()),
            field: vec![
                field("name", 1, Type::String, None),
                field("price", 2, Type::Message, Some(".es.compat.Money")),
                tags,
            ],
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn b64(fdp: &FileDescriptorProto) -> String {
    base64::engine::general_purpose::STANDARD.encode(fdp.encode_to_vec())
}

/// What Confluent stores and returns for `money()` (its
/// `ProtobufSchemaUtils.toString` of the descriptor).
const MONEY_TEXT: &str = "syntax = \"proto3\";\npackage es.compat;\n\nmessage Money {\n  string currency_code = 1;\n  int64 units = 2;\n}\n";
const REC_TEXT: &str = "syntax = \"proto3\";\npackage es.compat;\n\nimport \"es/compat/money.proto\";\n\nmessage Rec {\n  string name = 1;\n  .es.compat.Money price = 2;\n  repeated string tags = 3;\n}\n";

fn body(schema: &str, refs: Value) -> Option<String> {
    Some(json!({"schemaType": "PROTOBUF", "schema": schema, "references": refs}).to_string())
}

#[test]
fn descriptors_register_look_up_and_print_as_confluent_does() {
    let dir = tempfile::tempdir().expect("tmp");
    let refs = json!([{"name": "es/compat/money.proto", "subject": "money", "version": 1}]);
    {
        let s = Server::start(dir.path()).expect("starts");
        let c = client();
        let (st, v) = send(
            &c,
            "POST",
            &s.url("/subjects/money/versions"),
            body(&b64(&money()), json!([])),
        );
        assert_eq!((st, v), (200, json!({"id": 1})));
        let (st, v) = send(
            &c,
            "POST",
            &s.url("/subjects/rec-value/versions"),
            body(&b64(&rec()), refs.clone()),
        );
        assert_eq!((st, v), (200, json!({"id": 2})));

        // Stored and returned as Confluent prints the descriptor.
        let (st, v) = send(&c, "GET", &s.url("/schemas/ids/1"), None);
        assert_eq!(
            (st, v),
            (200, json!({"schemaType": "PROTOBUF", "schema": MONEY_TEXT}))
        );
        let (st, v) = send(&c, "GET", &s.url("/subjects/rec-value/versions/1"), None);
        assert_eq!(st, 200);
        assert_eq!(v["schema"], json!(REC_TEXT));
        assert_eq!(v["references"], refs);

        // The same descriptor again, and the same schema as text (with
        // comments, its own spacing, a relative type name): the same id.
        let (st, v) = send(
            &c,
            "POST",
            &s.url("/subjects/rec-value/versions"),
            body(&b64(&rec()), refs.clone()),
        );
        assert_eq!((st, v), (200, json!({"id": 2})));
        let text = "// the record\nsyntax = \"proto3\";\npackage es.compat;\nimport \"es/compat/money.proto\";\nmessage Rec {\n  string name = 1; // its name\n  Money price = 2;\n  repeated string tags = 3;\n}\n";
        let (st, v) = send(
            &c,
            "POST",
            &s.url("/subjects/rec-value"),
            body(text, refs.clone()),
        );
        assert_eq!(st, 200, "{v}");
        assert_eq!(
            (v["id"].clone(), v["version"].clone()),
            (json!(2), json!(1))
        );
        let (st, v) = send(
            &c,
            "POST",
            &s.url("/subjects/money-text/versions"),
            body(
                "syntax = \"proto3\"; package es.compat; message Money { string currency_code = 1; int64 units = 2; }",
                json!([]),
            ),
        );
        assert_eq!((st, v), (200, json!({"id": 1})));
        // Lookup by descriptor.
        let (st, v) = send(
            &c,
            "POST",
            &s.url("/subjects/rec-value"),
            body(&b64(&rec()), refs.clone()),
        );
        assert_eq!(
            (st, v["id"].clone(), v["schema"].clone()),
            (200, json!(2), json!(REC_TEXT))
        );

        // A descriptor that is not one: 42201.
        let (st, v) = send(
            &c,
            "POST",
            &s.url("/subjects/bad/versions"),
            body("////", json!([])),
        );
        assert_eq!((st, v["error_code"].clone()), (422, json!(42201)));
        // A descriptor whose import is not referenced: 42201.
        let (st, v) = send(
            &c,
            "POST",
            &s.url("/subjects/bad/versions"),
            body(&b64(&rec()), json!([])),
        );
        assert_eq!((st, v["error_code"].clone()), (422, json!(42201)));
    }

    // After a restart the printed text parses again and keeps its ids.
    let s = Server::start(dir.path()).expect("restarts");
    let c = client();
    let (st, v) = send(
        &c,
        "POST",
        &s.url("/subjects/rec-value/versions"),
        body(&b64(&rec()), refs),
    );
    assert_eq!((st, v), (200, json!({"id": 2})));

    // ?format=serialized: the compiled file as base64, as Confluent's
    // Protobuf deserializers ask for it.
    for path in [
        "/schemas/ids/2?format=serialized",
        "/subjects/rec-value/versions/1?format=serialized",
    ] {
        let (st, v) = send(&c, "GET", &s.url(path), None);
        assert_eq!(st, 200, "{path}");
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(v["schema"].as_str().expect("schema"))
            .expect("base64");
        let fdp = FileDescriptorProto::decode(bytes.as_slice()).expect("descriptor");
        assert_eq!(fdp.package(), "es.compat", "{path}");
        assert_eq!(fdp.dependency, vec!["es/compat/money.proto".to_string()]);
        assert_eq!(fdp.message_type[0].name(), "Rec");
        assert_eq!(fdp.message_type[0].field[1].type_name(), ".es.compat.Money");
    }
    // Other formats and types: the stored text.
    let (_, v) = send(&c, "GET", &s.url("/schemas/ids/1?format=default"), None);
    assert_eq!(v["schema"], json!(MONEY_TEXT));
}
