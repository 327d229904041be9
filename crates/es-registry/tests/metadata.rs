//! Schema metadata and rule sets (Confluent's data contracts) over real
//! HTTP: kept with each schema, returned by version, by id, by lookup and in
//! the registration's answer; part of a schema's identity (the same text
//! with other metadata is another schema); inherited from the latest
//! version when a registration or lookup gives none; `confluent:version`
//! when a registration names its version; `GET /subjects/{s}/metadata`;
//! kept across a restart, and a file written before metadata was kept
//! still loads.

use serde_json::{json, Value};

mod common;

use common::{client, send, Server};

const USER: &str = r#"{"type":"record","name":"User","fields":[{"name":"id","type":"long"}]}"#;

fn body(extra: Value) -> Option<String> {
    let mut b = json!({"schema": USER});
    if let (Some(b), Some(extra)) = (b.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            b.insert(k.clone(), v.clone());
        }
    }
    Some(b.to_string())
}

#[test]
fn metadata_and_rule_sets_are_kept_returned_and_part_of_identity() {
    let dir = tempfile::tempdir().expect("tmp");
    let meta_a = json!({"properties": {"fileName": "a.avsc", "owner": "x"}, "tags": {"id": ["PII"]}, "sensitive": ["id"]});
    let rules = json!({"domainRules": [{"name": "checkId", "kind": "CONDITION", "mode": "WRITE", "type": "CEL", "expr": "message.id > 0", "disabled": false}]});
    {
        let s = Server::start(dir.path()).expect("starts");
        let c = client();
        let url = s.url("/subjects/u/versions");
        let (st, v) = send(
            &c,
            "POST",
            &url,
            body(json!({"metadata": meta_a, "ruleSet": rules})),
        );
        assert_eq!(
            (st, v),
            (200, json!({"id": 1, "metadata": meta_a, "ruleSet": rules}))
        );
        let (st, v) = send(&c, "GET", &s.url("/subjects/u/versions/1"), None);
        assert_eq!(st, 200);
        assert_eq!(
            (v["metadata"].clone(), v["ruleSet"].clone()),
            (meta_a.clone(), rules.clone())
        );
        let (_, v) = send(&c, "GET", &s.url("/schemas/ids/1"), None);
        assert_eq!(
            (v["metadata"].clone(), v["ruleSet"].clone()),
            (meta_a.clone(), rules.clone())
        );

        // Lookup: as given, or without metadata (the latest version's is
        // taken), but not with other metadata.
        let lookup = |extra: Value| send(&c, "POST", &s.url("/subjects/u"), body(extra));
        let (st, v) = lookup(json!({"metadata": meta_a, "ruleSet": rules}));
        assert_eq!(
            (st, v["id"].clone(), v["metadata"].clone()),
            (200, json!(1), meta_a.clone())
        );
        let (st, v) = lookup(json!({}));
        assert_eq!(
            (st, v["id"].clone(), v["version"].clone()),
            (200, json!(1), json!(1))
        );
        let (st, v) = lookup(json!({"metadata": {"properties": {"fileName": "b.avsc"}}}));
        assert_eq!((st, v["error_code"].clone()), (404, json!(40403)));

        // The same text with other metadata is another schema: a new id and
        // version, its rule set inherited from version 1.
        let meta_b = json!({"properties": {"fileName": "b.avsc"}});
        let (st, v) = send(&c, "POST", &url, body(json!({"metadata": meta_b})));
        assert_eq!(
            (st, v),
            (200, json!({"id": 2, "metadata": meta_b, "ruleSet": rules}))
        );
        // Without metadata: the latest version's, so version 2 again.
        let (st, v) = send(&c, "POST", &url, body(json!({})));
        assert_eq!((st, v["id"].clone()), (200, json!(2)));
        assert_eq!(
            send(&c, "GET", &s.url("/subjects/u/versions"), None),
            (200, json!([1, 2]))
        );
        // A registration naming its version: confluent:version is set.
        let meta_c = json!({"properties": {"fileName": "c.avsc"}});
        let (st, v) = send(
            &c,
            "POST",
            &url,
            body(json!({"metadata": meta_c, "version": 3})),
        );
        assert_eq!(st, 200, "{v}");
        assert_eq!(
            v["metadata"],
            json!({"properties": {"fileName": "c.avsc", "confluent:version": "3"}})
        );
        assert_eq!(v["id"], json!(3));

        // The newest version whose metadata has the properties asked for.
        let by_meta = |q: &str| {
            send(
                &c,
                "GET",
                &s.url(&format!("/subjects/u/metadata?{q}")),
                None,
            )
        };
        let (st, v) = by_meta("key=fileName&value=a.avsc");
        assert_eq!((st, v["version"].clone()), (200, json!(1)));
        let (st, v) = by_meta("key=fileName&value=a.avsc&key=owner&value=x");
        assert_eq!((st, v["version"].clone()), (200, json!(1)));
        let (st, v) = by_meta("key=fileName&value=a.avsc&key=owner&value=y");
        assert_eq!((st, v["error_code"].clone()), (404, json!(40403)));
        let (st, v) = by_meta("");
        assert_eq!((st, v["version"].clone()), (200, json!(3)));
        let (st, v) = send(
            &c,
            "GET",
            &s.url("/subjects/nope/metadata?key=a&value=b"),
            None,
        );
        assert_eq!((st, v["error_code"].clone()), (404, json!(40401)));
        assert_eq!(
            send(&c, "GET", &s.url("/contexts"), None),
            (200, json!(["."]))
        );
    }
    // Kept across a restart.
    let s = Server::start(dir.path()).expect("restarts");
    let c = client();
    let (_, v) = send(&c, "GET", &s.url("/subjects/u/versions/1"), None);
    assert_eq!(
        (v["metadata"].clone(), v["ruleSet"].clone()),
        (meta_a, rules)
    );
    let (_, v) = send(&c, "GET", &s.url("/subjects/u/versions/3"), None);
    assert_eq!(v["metadata"]["properties"]["confluent:version"], json!("3"));
}

#[test]
fn a_file_written_before_metadata_was_kept_still_loads() {
    let dir = tempfile::tempdir().expect("tmp");
    let old = json!({"format": 1, "registry": {
        "nextId": 2,
        "schemas": {"1": {"schemaType": "AVRO", "schema": USER}},
        "subjects": {"u": {"versions": {"1": {"id": 1}}}}
    }});
    std::fs::write(dir.path().join("schemas.json"), old.to_string()).expect("write");
    let s = Server::start(dir.path()).expect("loads");
    let c = client();
    let (st, v) = send(&c, "GET", &s.url("/subjects/u/versions/1"), None);
    assert_eq!(
        (st, v),
        (
            200,
            json!({"subject": "u", "version": 1, "id": 1, "schema": USER})
        )
    );
    // The same schema without metadata is still the same schema.
    let (st, v) = send(&c, "POST", &s.url("/subjects/u/versions"), body(json!({})));
    assert_eq!((st, v), (200, json!({"id": 1})));
}
