//! The registry over real HTTP: a server on a free loopback port with a
//! data directory of the test's own, driven by an HTTP client as a
//! Confluent client drives it. Covers the answers' shapes and media type,
//! the body limit (413 / 42209), routes that do not exist, the raw schema
//! endpoints, `schemas.json` (mode 0600, rewritten only on a change,
//! reloaded with the same ids, a corrupt one refused).

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use es_registry::limits::REQUEST_BYTES_MAX;
use serde_json::{json, Value};

mod common;

use common::{client, Server, CT};

/// Sends a request; returns the status, the media type and the body.
fn call(method: &str, url: &str, body: Option<Value>) -> (u16, String, String) {
    let c = client();
    let m = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
    let mut req = c.request(m, url);
    if let Some(b) = body {
        req = req.header("Content-Type", CT).body(b.to_string());
    }
    let resp = req.send().expect("send");
    let status = resp.status().as_u16();
    let ct = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    (status, ct, resp.text().expect("body"))
}

fn json_call(method: &str, url: &str, body: Option<Value>) -> (u16, Value) {
    let (status, ct, text) = call(method, url, body);
    assert_eq!(ct, CT, "{method} {url}");
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

const USER: &str = r#"{"type":"record","name":"User","fields":[{"name":"id","type":"long"}]}"#;
const USER2: &str = r#"{"type":"record","name":"User","fields":[{"name":"id","type":"long"},{"name":"name","type":"string","default":""}]}"#;

#[test]
fn the_api_answers_as_confluents_does() {
    let dir = tempfile::tempdir().expect("tmp");
    let s = Server::start(dir.path()).expect("starts");
    let u = |p: &str| format!("{}{p}", s.base);

    assert_eq!(json_call("GET", &u("/"), None), (200, json!({})));
    assert_eq!(json_call("GET", &u("/subjects"), None), (200, json!([])));
    assert_eq!(
        json_call("GET", &u("/schemas/types"), None),
        (200, json!(["JSON", "PROTOBUF", "AVRO"]))
    );
    let (_, meta) = json_call("GET", &u("/v1/metadata/id"), None);
    assert_eq!(meta["scope"]["clusters"]["kafka-cluster"], "test-cluster");

    let (st, v) = json_call(
        "POST",
        &u("/subjects/users-value/versions"),
        Some(json!({"schema": USER})),
    );
    assert_eq!((st, v), (200, json!({"id": 1})));
    // The same schema again: the same id.
    assert_eq!(
        json_call(
            "POST",
            &u("/subjects/users-value/versions"),
            Some(json!({"schema": USER, "schemaType": "AVRO"}))
        ),
        (200, json!({"id": 1}))
    );
    assert_eq!(
        json_call(
            "POST",
            &u("/subjects/users-value/versions"),
            Some(json!({"schema": USER2}))
        ),
        (200, json!({"id": 2}))
    );
    assert_eq!(
        json_call("GET", &u("/subjects/users-value/versions"), None),
        (200, json!([1, 2]))
    );
    let (st, latest) = json_call("GET", &u("/subjects/users-value/versions/latest"), None);
    assert_eq!(st, 200);
    assert_eq!(
        latest,
        json!({"subject": "users-value", "version": 2, "id": 2, "schema": USER2})
    );
    assert_eq!(
        json_call("GET", &u("/subjects/users-value/versions/-1"), None).1,
        latest
    );
    // The raw schema endpoints answer the schema itself.
    let (st, _, raw) = call("GET", &u("/subjects/users-value/versions/1/schema"), None);
    assert_eq!((st, raw.as_str()), (200, USER));
    let (st, _, raw) = call("GET", &u("/schemas/ids/2/schema"), None);
    assert_eq!((st, raw.as_str()), (200, USER2));
    assert_eq!(
        json_call("GET", &u("/schemas/ids/1"), None),
        (200, json!({"schema": USER}))
    );
    assert_eq!(
        json_call("GET", &u("/schemas/ids/1/subjects"), None),
        (200, json!(["users-value"]))
    );
    assert_eq!(
        json_call("GET", &u("/schemas/ids/1/versions"), None),
        (200, json!([{"subject": "users-value", "version": 1}]))
    );
    assert_eq!(
        json_call("GET", &u("/schemas?latestOnly=true"), None)
            .1
            .as_array()
            .map(Vec::len),
        Some(1)
    );
    // Lookup.
    let (st, found) = json_call(
        "POST",
        &u("/subjects/users-value"),
        Some(json!({"schema": USER})),
    );
    assert_eq!(
        (st, found["version"].clone(), found["id"].clone()),
        (200, json!(1), json!(1))
    );

    // Errors: status and error_code.
    let err = |m: &str, p: &str, b: Option<Value>| {
        let (st, v) = json_call(m, &u(p), b);
        (st, v["error_code"].as_u64().unwrap_or(0))
    };
    assert_eq!(err("GET", "/subjects/nope/versions", None), (404, 40401));
    assert_eq!(
        err("GET", "/subjects/users-value/versions/9", None),
        (404, 40402)
    );
    assert_eq!(
        err("GET", "/subjects/users-value/versions/zero", None),
        (422, 42202)
    );
    assert_eq!(err("GET", "/schemas/ids/77", None), (404, 40403));
    assert_eq!(err("GET", "/schemas/ids/x", None), (404, 404));
    assert_eq!(err("GET", "/no/such/route", None), (404, 404));
    assert_eq!(err("PATCH", "/subjects", None), (405, 405));
    assert_eq!(
        err(
            "POST",
            "/subjects/users-value/versions",
            Some(json!({"schema": "{\"type\":\"nope\"}"}))
        ),
        (422, 42201)
    );
    assert_eq!(
        err(
            "POST",
            "/subjects/users-value/versions",
            Some(json!({"schema": USER, "schemaType": "XML"}))
        ),
        (422, 42201)
    );
    assert_eq!(
        err(
            "POST",
            "/subjects/users-value/versions",
            Some(json!({"nothing": 1}))
        ),
        (422, 42201)
    );
    assert_eq!(
        err(
            "POST",
            "/subjects/users-value/versions",
            Some(
                json!({"schema": r#"{"type":"record","name":"User","fields":[{"name":"x","type":"int"}]}"#})
            )
        ),
        (409, 409)
    );
    assert_eq!(
        err("PUT", "/config", Some(json!({"compatibility": "SIDEWAYS"}))),
        (422, 42203)
    );
    assert_eq!(
        err("PUT", "/mode", Some(json!({"mode": "SOMETIMES"}))),
        (422, 42204)
    );
    assert_eq!(err("GET", "/config/users-value", None), (404, 40408));
    assert_eq!(err("GET", "/mode/users-value", None), (404, 40409));
    assert_eq!(
        err("PUT", "/mode", Some(json!({"mode": "IMPORT"}))),
        (422, 42205)
    );
    // Not JSON at all.
    let (st, _, body) = call_raw(
        &u("/subjects/s/versions"),
        "application/json",
        b"{not json".to_vec(),
    );
    assert_eq!(st, 400, "{body}");

    // Config and mode.
    assert_eq!(
        json_call("GET", &u("/config"), None),
        (200, json!({"compatibilityLevel": "BACKWARD"}))
    );
    assert_eq!(
        json_call(
            "PUT",
            &u("/config/users-value"),
            Some(json!({"compatibility": "full"}))
        ),
        (200, json!({"compatibility": "FULL"}))
    );
    assert_eq!(
        json_call("GET", &u("/config/users-value"), None),
        (200, json!({"compatibilityLevel": "FULL"}))
    );
    assert_eq!(
        json_call("GET", &u("/config/other?defaultToGlobal=true"), None),
        (200, json!({"compatibilityLevel": "BACKWARD"}))
    );
    assert_eq!(
        json_call("DELETE", &u("/config/users-value"), None),
        (200, json!({"compatibilityLevel": "FULL"}))
    );
    assert_eq!(
        json_call("GET", &u("/mode"), None),
        (200, json!({"mode": "READWRITE"}))
    );
    assert_eq!(
        json_call(
            "PUT",
            &u("/mode/users-value"),
            Some(json!({"mode": "READONLY"}))
        ),
        (200, json!({"mode": "READONLY"}))
    );
    assert_eq!(
        err(
            "POST",
            "/subjects/users-value/versions",
            Some(json!({"schema": USER2.replace("\"\"", "\"x\"")}))
        ),
        (422, 42205)
    );
    assert_eq!(
        json_call("DELETE", &u("/mode/users-value"), None),
        (200, json!({"mode": "READONLY"}))
    );

    // Compatibility tests.
    let bad = json!({"schema": r#"{"type":"record","name":"User","fields":[{"name":"x","type":"int"}]}"#});
    assert_eq!(
        json_call(
            "POST",
            &u("/compatibility/subjects/users-value/versions/latest"),
            Some(json!({"schema": USER2}))
        ),
        (200, json!({"is_compatible": true}))
    );
    let (st, v) = json_call(
        "POST",
        &u("/compatibility/subjects/users-value/versions/latest?verbose=true"),
        Some(bad.clone()),
    );
    assert_eq!((st, v["is_compatible"].clone()), (200, json!(false)));
    assert!(
        v["messages"].as_array().is_some_and(|m| !m.is_empty()),
        "{v}"
    );
    assert_eq!(
        json_call(
            "POST",
            &u("/compatibility/subjects/users-value/versions"),
            Some(bad)
        ),
        (200, json!({"is_compatible": false}))
    );

    // Deletes.
    assert_eq!(
        err("DELETE", "/subjects/users-value?permanent=true", None),
        (404, 40405)
    );
    assert_eq!(
        json_call("DELETE", &u("/subjects/users-value/versions/1"), None),
        (200, json!(1))
    );
    assert_eq!(
        err("DELETE", "/subjects/users-value/versions/1", None),
        (404, 40406)
    );
    assert_eq!(
        err(
            "DELETE",
            "/subjects/users-value/versions/2?permanent=true",
            None
        ),
        (404, 40407)
    );
    assert_eq!(
        json_call(
            "GET",
            &u("/subjects/users-value/versions?deleted=true"),
            None
        ),
        (200, json!([1, 2]))
    );
    assert_eq!(
        json_call("DELETE", &u("/subjects/users-value"), None),
        (200, json!([2]))
    );
    assert_eq!(err("DELETE", "/subjects/users-value", None), (404, 40404));
    assert_eq!(
        json_call("GET", &u("/subjects?deleted=true"), None),
        (200, json!(["users-value"]))
    );
    assert_eq!(
        json_call("DELETE", &u("/subjects/users-value?permanent=true"), None),
        (200, json!([1, 2]))
    );
    assert_eq!(
        err("GET", "/subjects/users-value/versions?deleted=true", None),
        (404, 40401)
    );
}

fn call_raw(url: &str, content_type: &str, body: Vec<u8>) -> (u16, String, String) {
    let resp = client()
        .post(url)
        .header("Content-Type", content_type)
        .body(body)
        .send()
        .expect("send");
    let status = resp.status().as_u16();
    let ct = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    (status, ct, resp.text().unwrap_or_default())
}

#[test]
fn media_types_and_the_body_limit() {
    let dir = tempfile::tempdir().expect("tmp");
    let s = Server::start(dir.path()).expect("starts");
    let url = format!("{}/subjects/t/versions", s.base);
    let body = json!({"schema": "\"string\""}).to_string().into_bytes();
    for ct in [
        "application/vnd.schemaregistry.v1+json",
        "application/vnd.schemaregistry+json",
        "application/json",
    ] {
        let (st, got, text) = call_raw(&url, ct, body.clone());
        assert_eq!(
            (st, got.as_str(), text.as_str()),
            (200, CT, "{\"id\":1}"),
            "{ct}"
        );
    }
    // One byte over the limit: 413 with 42209, and nothing stored.
    let mut big = b"{\"schema\":\"".to_vec();
    big.resize(REQUEST_BYTES_MAX + 1 - 2, b' ');
    big.extend_from_slice(b"\"}");
    assert_eq!(big.len(), REQUEST_BYTES_MAX + 1);
    let (st, ct, text) = call_raw(&format!("{}/subjects/big/versions", s.base), CT, big);
    assert_eq!((st, ct.as_str()), (413, CT));
    let v: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(v["error_code"], 42209);
    assert_eq!(
        json_call("GET", &format!("{}/subjects", s.base), None).1,
        json!(["t"])
    );
}

#[test]
fn schemas_json_survives_a_restart_and_is_written_only_on_change() {
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("schemas.json");
    let ids: Vec<Value>;
    {
        let s = Server::start(dir.path()).expect("starts");
        let u = |p: &str| format!("{}{p}", s.base);
        // Nothing registered: no file.
        assert_eq!(json_call("GET", &u("/subjects"), None).0, 200);
        assert!(!file.exists());
        let a = json_call(
            "POST",
            &u("/subjects/a/versions"),
            Some(json!({"schema": USER})),
        )
        .1;
        let b = json_call(
            "POST",
            &u("/subjects/b/versions"),
            Some(json!({"schema": USER2})),
        )
        .1;
        json_call(
            "PUT",
            &u("/config/b"),
            Some(json!({"compatibility": "NONE"})),
        );
        json_call("DELETE", &u("/subjects/a"), None);
        ids = vec![a, b];
        let meta = std::fs::metadata(&file).expect("file");
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        // A request that changes nothing does not replace the file.
        let inode = meta.ino();
        json_call(
            "POST",
            &u("/subjects/b/versions"),
            Some(json!({"schema": USER2})),
        );
        json_call(
            "PUT",
            &u("/config/b"),
            Some(json!({"compatibility": "NONE"})),
        );
        json_call("GET", &u("/subjects"), None);
        json_call(
            "POST",
            &u("/subjects/b/versions"),
            Some(json!({"schema": "{\"type\":\"bad\"}"})),
        );
        assert_eq!(std::fs::metadata(&file).expect("file").ino(), inode);
        json_call(
            "PUT",
            &u("/config/b"),
            Some(json!({"compatibility": "FULL"})),
        );
        assert_ne!(std::fs::metadata(&file).expect("file").ino(), inode);
    }
    let s = Server::start(dir.path()).expect("restarts");
    let u = |p: &str| format!("{}{p}", s.base);
    assert_eq!(json_call("GET", &u("/subjects"), None).1, json!(["b"]));
    assert_eq!(
        json_call("GET", &u("/subjects?deleted=true"), None).1,
        json!(["a", "b"])
    );
    assert_eq!(
        json_call("GET", &u("/config/b"), None).1,
        json!({"compatibilityLevel": "FULL"})
    );
    // The same schemas keep their ids; a new one gets the next.
    assert_eq!(
        json_call(
            "POST",
            &u("/subjects/b/versions"),
            Some(json!({"schema": USER2}))
        )
        .1,
        ids[1]
    );
    assert_eq!(
        json_call(
            "POST",
            &u("/subjects/c/versions"),
            Some(json!({"schema": USER}))
        )
        .1,
        ids[0]
    );
    assert_eq!(
        json_call(
            "POST",
            &u("/subjects/d/versions"),
            Some(json!({"schema": "\"int\""}))
        )
        .1,
        json!({"id": 3})
    );
    drop(s);

    // A damaged file stops the registry with an error naming it, and is left alone.
    std::fs::write(&file, b"{\"format\":1,\"registry\":{\"nextId\":").expect("damage");
    let e = Server::start(dir.path()).err().expect("refused");
    assert!(e.to_string().contains("schemas.json"), "{e}");
    assert_eq!(
        std::fs::read(&file).expect("kept"),
        b"{\"format\":1,\"registry\":{\"nextId\":"
    );
}

/// Group commit: many registrations at once (distinct schemas in distinct
/// subjects, and one schema from several clients) all get distinct ids
/// for distinct schemas and one id for the same schema, every answer is
/// durable (a restart finds exactly the ids answered), and the file keeps
/// mode 0600.
#[test]
fn concurrent_registrations_get_distinct_stable_ids() {
    const CLIENTS: usize = 16;
    const EACH: usize = 8;
    let dir = tempfile::tempdir().expect("tmp");
    let schema = |i: usize| {
        json!({"schema": format!(
            r#"{{"type":"record","name":"R{i}","fields":[{{"name":"f","type":"long"}}]}}"#
        )})
    };
    let mut answered: Vec<(String, u64)> = Vec::new();
    let shared_ids: Vec<u64>;
    {
        let s = Server::start(dir.path()).expect("starts");
        let base = s.base.clone();
        let threads: Vec<_> = (0..CLIENTS)
            .map(|t| {
                let base = base.clone();
                std::thread::spawn(move || {
                    let mut got = Vec::new();
                    for k in 0..EACH {
                        let i = t * EACH + k;
                        let subject = format!("s{i}");
                        let url = format!("{base}/subjects/{subject}/versions");
                        let (st, v) = json_call("POST", &url, Some(schema(i)));
                        assert_eq!(st, 200, "{v}");
                        got.push((subject, v["id"].as_u64().expect("id")));
                    }
                    // The same schema from every client, in one subject.
                    let url = format!("{base}/subjects/same/versions");
                    let (st, v) = json_call("POST", &url, Some(schema(10_000)));
                    assert_eq!(st, 200, "{v}");
                    (got, v["id"].as_u64().expect("id"))
                })
            })
            .collect();
        let mut same = Vec::new();
        for t in threads {
            let (got, id) = t.join().expect("client");
            answered.extend(got);
            same.push(id);
        }
        shared_ids = same;
    }
    let mut ids: Vec<u64> = answered.iter().map(|(_, id)| *id).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), CLIENTS * EACH, "distinct schemas, distinct ids");
    assert!(
        shared_ids.windows(2).all(|w| w[0] == w[1]),
        "{shared_ids:?}"
    );
    assert!(!ids.contains(&shared_ids[0]));
    let mode = std::fs::metadata(dir.path().join("schemas.json"))
        .expect("file")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);

    // Every answer survived: the restarted registry names the same ids.
    let s = Server::start(dir.path()).expect("restarts");
    for (subject, id) in &answered {
        let (st, v) = json_call(
            "GET",
            &format!("{}/subjects/{subject}/versions/1", s.base),
            None,
        );
        assert_eq!((st, v["id"].as_u64()), (200, Some(*id)), "{subject}");
    }
    let (st, v) = json_call("GET", &format!("{}/subjects/same/versions", s.base), None);
    assert_eq!((st, v), (200, json!([1])));
}

/// The two 422s a client meets only through IMPORT mode and odd subject
/// names, over HTTP as Confluent answers them: 42207 when an import names
/// an id other than the one the subject already holds the schema under,
/// 42208 for a subject Confluent refuses (a control character, a reserved
/// name, over `SUBJECT_BYTES_MAX`) on registration, config and mode. A
/// refused call leaves `schemas.json` as it was.
#[test]
fn import_id_mismatch_and_invalid_subjects_answer_42207_and_42208() {
    let dir = tempfile::tempdir().expect("tmp");
    let s = Server::start(dir.path()).expect("starts");
    let u = |p: &str| format!("{}{p}", s.base);
    let err = |m: &str, p: &str, b: Option<Value>| {
        let (st, v) = json_call(m, &u(p), b);
        (st, v["error_code"].as_u64().unwrap_or(0), v)
    };

    assert_eq!(
        json_call(
            "PUT",
            &u("/mode/imp?force=true"),
            Some(json!({"mode": "IMPORT"}))
        ),
        (200, json!({"mode": "IMPORT"}))
    );
    assert_eq!(
        json_call(
            "POST",
            &u("/subjects/imp/versions"),
            Some(json!({"schema": USER, "id": 100, "version": 1}))
        ),
        (200, json!({"id": 100}))
    );
    let file = dir.path().join("schemas.json");
    let before = std::fs::read(&file).expect("schemas.json");

    // The subject holds USER under id 100: importing it as id 7 is 42207.
    let (st, code, body) = err(
        "POST",
        "/subjects/imp/versions",
        Some(json!({"schema": USER, "id": 7, "version": 2})),
    );
    assert_eq!((st, code), (422, 42207), "{body}");
    assert!(
        body["message"].as_str().unwrap_or("").contains("id 100"),
        "{body}"
    );
    assert_eq!(
        json_call("GET", &u("/subjects/imp/versions"), None),
        (200, json!([1]))
    );
    assert_eq!(err("GET", "/schemas/ids/7", None).1, 40403);
    // The same import with the id it has is accepted as a no-op.
    assert_eq!(
        json_call(
            "POST",
            &u("/subjects/imp/versions"),
            Some(json!({"schema": USER, "id": 100, "version": 1}))
        ),
        (200, json!({"id": 100}))
    );

    // 42208: a control character, Confluent's reserved names, a name over
    // the limit; on registration, subject config and subject mode.
    let long = "a".repeat(es_registry::limits::SUBJECT_BYTES_MAX + 1);
    for (m, p, b) in [
        (
            "POST",
            "/subjects/a%01b/versions".to_string(),
            json!({"schema": USER}),
        ),
        (
            "POST",
            "/subjects/__GLOBAL/versions".to_string(),
            json!({"schema": USER}),
        ),
        (
            "POST",
            "/subjects/__EMPTY/versions".to_string(),
            json!({"schema": USER}),
        ),
        (
            "POST",
            format!("/subjects/{long}/versions"),
            json!({"schema": USER}),
        ),
        (
            "PUT",
            "/config/__GLOBAL".to_string(),
            json!({"compatibility": "FULL"}),
        ),
        (
            "PUT",
            format!("/config/{long}"),
            json!({"compatibility": "FULL"}),
        ),
        (
            "PUT",
            "/mode/a%01b".to_string(),
            json!({"mode": "READONLY"}),
        ),
        ("PUT", format!("/mode/{long}"), json!({"mode": "READONLY"})),
    ] {
        let (st, code, body) = err(m, &p, Some(b));
        assert_eq!(
            (st, code),
            (422, 42208),
            "{m} {}: {body}",
            &p[..p.len().min(40)]
        );
    }
    assert_eq!(
        json_call("GET", &u("/subjects"), None),
        (200, json!(["imp"]))
    );
    assert_eq!(std::fs::read(&file).expect("schemas.json"), before);

    // A name of exactly the limit is a subject like any other.
    let longest = "a".repeat(es_registry::limits::SUBJECT_BYTES_MAX);
    assert_eq!(
        json_call(
            "POST",
            &u(&format!("/subjects/{longest}/versions")),
            Some(json!({"schema": USER2}))
        ),
        (200, json!({"id": 101}))
    );
}
