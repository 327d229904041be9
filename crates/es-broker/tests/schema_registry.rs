//! The schema registry inside a real es-broker process: started by
//! `--schema-registry-listen`, driven over HTTP, its schemas kept in
//! DATA_DIR/schemas.json across a restart with the same ids, and a
//! registry that cannot start (a damaged file, a port in use) leaving the
//! Kafka listener serving.

use std::path::Path;

use es_test_support::process::BrokerProcess;
use es_test_support::wire::KafkaClient;
use reqwest::blocking::Client;
use serde_json::{json, Value};

const EXE: &str = env!("CARGO_BIN_EXE_es-broker");
const CT: &str = "application/vnd.schemaregistry.v1+json";
const ORDER: &str = r#"{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"long"},{"name":"total","type":"double"}]}"#;
const ORDER2: &str = r#"{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"long"},{"name":"total","type":"double"},{"name":"note","type":["null","string"],"default":null}]}"#;

fn client() -> Client {
    Client::builder().no_proxy().build().expect("client")
}

fn call(method: reqwest::Method, url: &str, body: Option<Value>) -> (u16, Value) {
    let mut req = client().request(method, url);
    if let Some(b) = body {
        req = req.header("Content-Type", CT).body(b.to_string());
    }
    let resp = req.send().expect("request");
    let status = resp.status().as_u16();
    let text = resp.text().expect("body");
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

fn start(data: &Path) -> (BrokerProcess, String) {
    let mut b = BrokerProcess::start(
        Path::new(EXE),
        data,
        &["--schema-registry-listen", "127.0.0.1:0"],
    );
    let url = b.schema_registry_url();
    (b, url)
}

/// The broker still answers Kafka requests (ApiVersions).
fn kafka_serves(b: &BrokerProcess) {
    let mut c = KafkaClient::connect(&b.addr, "registry-test");
    let resp: kafka_protocol::messages::ApiVersionsResponse = c.call(
        kafka_protocol::messages::ApiKey::ApiVersions,
        2,
        &kafka_protocol::messages::ApiVersionsRequest::default(),
    );
    assert_eq!(resp.error_code, 0);
}

#[test]
fn schemas_are_served_and_survive_a_restart() {
    let dir = tempfile::tempdir().expect("tmp");
    let data = dir.path().join("data");
    let (b, url) = start(&data);
    use reqwest::Method as M;
    let (st, v) = call(
        M::POST,
        &format!("{url}/subjects/orders-value/versions"),
        Some(json!({"schema": ORDER})),
    );
    assert_eq!((st, v), (200, json!({"id": 1})));
    let (st, v) = call(
        M::POST,
        &format!("{url}/subjects/orders-value/versions"),
        Some(json!({"schema": ORDER2})),
    );
    assert_eq!((st, v), (200, json!({"id": 2})));
    // Incompatible: a required field the old data lacks.
    let bad = ORDER.replace(
        r#"{"name":"total","type":"double"}"#,
        r#"{"name":"total","type":"double"},{"name":"x","type":"int"}"#,
    );
    let (st, v) = call(
        M::POST,
        &format!("{url}/subjects/orders-value/versions"),
        Some(json!({"schema": bad})),
    );
    assert_eq!((st, v["error_code"].clone()), (409, json!(409)));
    kafka_serves(&b);
    let log = b.stop();
    assert!(log.contains("schema registry listening at"), "{log}");
    assert!(data.join("schemas.json").exists());

    let (b, url) = start(&data);
    assert_eq!(
        call(M::GET, &format!("{url}/subjects"), None),
        (200, json!(["orders-value"]))
    );
    assert_eq!(
        call(M::GET, &format!("{url}/schemas/ids/2"), None),
        (200, json!({"schema": ORDER2}))
    );
    let (_, latest) = call(
        M::GET,
        &format!("{url}/subjects/orders-value/versions/latest"),
        None,
    );
    assert_eq!(
        (latest["id"].clone(), latest["version"].clone()),
        (json!(2), json!(2))
    );
    // Registering again answers the ids given before the restart.
    assert_eq!(
        call(
            M::POST,
            &format!("{url}/subjects/other-value/versions"),
            Some(json!({"schema": ORDER}))
        ),
        (200, json!({"id": 1}))
    );
    b.stop();
}

#[test]
fn a_registry_that_cannot_start_leaves_kafka_serving() {
    let dir = tempfile::tempdir().expect("tmp");
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).expect("mkdir");
    std::fs::write(data.join("schemas.json"), b"{ damaged").expect("write");
    let mut b = BrokerProcess::start(
        Path::new(EXE),
        &data,
        &["--schema-registry-listen", "127.0.0.1:0"],
    );
    let line = b.wait_for_line(
        "the broker runs without the schema registry",
        es_test_support::process::START_TIMEOUT,
    );
    assert!(line.contains("schemas.json"), "{line}");
    kafka_serves(&b);
    // The damaged file is left as it was.
    assert_eq!(
        std::fs::read(data.join("schemas.json")).expect("read"),
        b"{ damaged"
    );
    b.stop();

    // A port in use: the same.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr").to_string();
    let other = dir.path().join("other");
    let mut b = BrokerProcess::start(Path::new(EXE), &other, &["--schema-registry-listen", &addr]);
    let line = b.wait_for_line(
        "the broker runs without the schema registry",
        es_test_support::process::START_TIMEOUT,
    );
    assert!(line.contains(&addr), "{line}");
    kafka_serves(&b);
    b.stop();
}

#[test]
fn none_turns_the_registry_off() {
    let dir = tempfile::tempdir().expect("tmp");
    // The harness passes `--schema-registry-listen none` itself.
    let b = BrokerProcess::start(Path::new(EXE), dir.path().join("data"), &[]);
    kafka_serves(&b);
    let log = b.stop();
    assert!(!log.contains("schema registry"), "{log}");
}

/// `es-broker mirror schemas`: (exit success, stdout + stderr).
fn copy_schemas(from: &str, to: &str) -> (bool, String) {
    let out = std::process::Command::new(EXE)
        .args(["mirror", "schemas", "--from", from, "--to", to])
        .output()
        .expect("es-broker mirror schemas");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn mirror_schemas_copies_a_registry_with_its_ids_and_levels() {
    use reqwest::Method as M;
    const MONEY: &str = r#"{"type":"record","name":"Money","namespace":"shop","fields":[{"name":"cents","type":"long"}]}"#;
    const PAY: &str = r#"{"type":"record","name":"Pay","namespace":"shop","fields":[{"name":"amount","type":"shop.Money"}]}"#;
    const TMP: &str = r#"{"type":"record","name":"Tmp","fields":[{"name":"t","type":"int"}]}"#;
    let dir = tempfile::tempdir().expect("tmp");
    let (src, from) = start(&dir.path().join("source"));
    let (dst, to) = start(&dir.path().join("target"));
    let post = |url: &str, path: &str, body: Value| {
        let (st, v) = call(M::POST, &format!("{url}{path}"), Some(body));
        assert_eq!(st, 200, "{path}: {v}");
        v
    };
    // The source: an id gap (a subject deleted for good), two versions, a
    // reference across subjects, a subject's own level.
    let order = post(
        &from,
        "/subjects/orders-value/versions",
        json!({"schema": ORDER}),
    );
    post(
        &from,
        "/subjects/tmp-value/versions",
        json!({"schema": TMP}),
    );
    assert_eq!(
        call(M::DELETE, &format!("{from}/subjects/tmp-value"), None).0,
        200
    );
    assert_eq!(
        call(
            M::DELETE,
            &format!("{from}/subjects/tmp-value?permanent=true"),
            None
        )
        .0,
        200
    );
    let order2 = post(
        &from,
        "/subjects/orders-value/versions",
        json!({"schema": ORDER2}),
    );
    let money = post(&from, "/subjects/money/versions", json!({"schema": MONEY}));
    let pay = post(
        &from,
        "/subjects/pay-value/versions",
        json!({"schema": PAY, "references": [{"name": "shop.Money", "subject": "money", "version": 1}]}),
    );
    assert_eq!(
        call(
            M::PUT,
            &format!("{from}/config/orders-value"),
            Some(json!({"compatibility": "NONE"}))
        )
        .0,
        200
    );
    let ids = [&order, &order2, &money, &pay].map(|v| v["id"].as_i64().expect("id"));
    assert_eq!(ids, [1, 3, 4, 5], "the source's ids, with the gap");

    let (ok, out) = copy_schemas(&from, &to);
    assert!(ok, "{out}");
    assert!(
        out.contains("copied 4 version(s), 0 already there"),
        "{out}"
    );
    for id in ids {
        assert_eq!(
            call(M::GET, &format!("{to}/schemas/ids/{id}"), None),
            call(M::GET, &format!("{from}/schemas/ids/{id}"), None),
            "schema {id}"
        );
    }
    assert_eq!(
        call(M::GET, &format!("{to}/schemas/ids/2"), None).0,
        404,
        "the gap stays a gap"
    );
    for (subject, versions) in [("orders-value", 2), ("money", 1), ("pay-value", 1)] {
        for v in 1..=versions {
            let path = format!("/subjects/{subject}/versions/{v}");
            assert_eq!(
                call(M::GET, &format!("{to}{path}"), None),
                call(M::GET, &format!("{from}{path}"), None),
                "{path}"
            );
        }
    }
    assert_eq!(
        call(M::GET, &format!("{to}/config/orders-value"), None),
        (200, json!({"compatibilityLevel": "NONE"}))
    );
    // Modes are put back: the subjects take registrations again.
    let (st, mode) = call(M::GET, &format!("{to}/mode/orders-value"), None);
    assert_eq!(
        (st, mode["error_code"].clone()),
        (404, json!(40409)),
        "{mode}"
    );
    assert_eq!(
        call(M::GET, &format!("{to}/mode"), None),
        (200, json!({"mode": "READWRITE"}))
    );

    // Again: nothing to copy.
    let (ok, out) = copy_schemas(&from, &to);
    assert!(
        ok && out.contains("copied 0 version(s), 4 already there"),
        "{out}"
    );

    // An id es already gave another schema: refused, and said why.
    let taken = post(&to, "/subjects/es-only/versions", json!({"schema": TMP}));
    let clash = post(
        &from,
        "/subjects/late-value/versions",
        json!({"schema": r#""string""#}),
    );
    assert_eq!(taken["id"], clash["id"], "both registries gave the next id");
    let (ok, out) = copy_schemas(&from, &to);
    assert!(!ok, "{out}");
    assert!(out.contains("late-value version 1"), "{out}");
    src.stop();
    dst.stop();
}
