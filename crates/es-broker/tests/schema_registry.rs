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
