//! The schema registry of a broker with a SASL listener
//! (docs/schema-registry.md, "Authentication and ACLs"): HTTP basic
//! authentication with the broker's API keys and SCRAM users, and each
//! request authorized by the broker's ACLs through the documented mapping
//! (subject S is the topic `__schema_S`, the registry's global settings
//! are the cluster), with Confluent's 40101 and 40301 answers.

use es_auth::scram::ScramMechanism;
use reqwest::blocking::{Client, RequestBuilder};
use reqwest::Method;
use serde_json::{json, Value};

use super::{allow, create_key, handshake, plain, start_sasl, upsert_scram};

const ORDER: &str = r#"{"type":"record","name":"Order","fields":[{"name":"id","type":"long"}]}"#;
const ORDER2: &str = r#"{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"note","type":["null","string"],"default":null}]}"#;
const PAYMENT: &str =
    r#"{"type":"record","name":"Payment","fields":[{"name":"amount","type":"double"}]}"#;

/// Kafka's codes: resource types, pattern types, operations.
const TOPIC: i8 = 2;
const CLUSTER: i8 = 4;
const LITERAL: i8 = 3;
const PREFIXED: i8 = 4;
const READ: i8 = 3;
const WRITE: i8 = 4;
const DESCRIBE_CONFIGS: i8 = 10;

/// Sends `req`: (status, JSON body).
fn send(req: RequestBuilder) -> (u16, Value) {
    let r = req.send().expect("request");
    let status = r.status().as_u16();
    let text = r.text().expect("body");
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

struct As<'a> {
    http: &'a Client,
    url: &'a str,
    user: &'a str,
    password: &'a str,
}

impl As<'_> {
    fn call(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.url))
            .basic_auth(self.user, Some(self.password));
        if let Some(b) = body {
            req = req
                .header("Content-Type", "application/vnd.schemaregistry.v1+json")
                .body(b.to_string());
        }
        send(req)
    }

    fn get(&self, path: &str) -> (u16, Value) {
        self.call(Method::GET, path, None)
    }

    fn register(&self, subject: &str, schema: &str) -> (u16, Value) {
        self.call(
            Method::POST,
            &format!("/subjects/{subject}/versions"),
            Some(json!({ "schema": schema })),
        )
    }
}

/// A 403 with Confluent's 40301.
fn denied((status, body): (u16, Value)) {
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error_code"], 40301, "{body}");
}

#[test]
fn the_registry_asks_for_kafka_credentials_and_the_acls_decide() {
    let dir = tempfile::tempdir().expect("tmp");
    let data = dir.path().join("data");
    let (admin, admin_secret) = create_key(&data, "User:admin");
    let (alice, alice_secret) = create_key(&data, "User:alice");
    let mut b = start_sasl(&data, &["--schema-registry-listen", "127.0.0.1:0"]);
    let url = b.schema_registry_url();
    let http = Client::builder()
        .no_proxy()
        .timeout(super::TIMEOUT)
        .build()
        .expect("http");
    let admin_as = As {
        http: &http,
        url: &url,
        user: &admin,
        password: &admin_secret,
    };
    let alice_as = As {
        http: &http,
        url: &url,
        user: &alice,
        password: &alice_secret,
    };

    // Without credentials, or with wrong ones: 401, 40101, a challenge.
    let r = http
        .get(format!("{url}/subjects"))
        .send()
        .expect("anonymous");
    assert_eq!(r.status(), 401);
    assert_eq!(
        r.headers()
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok()),
        Some("Basic realm=\"es-schema-registry\"")
    );
    let body: Value = r.json().expect("json");
    assert_eq!(body["error_code"], 40101);
    let wrong = As {
        password: "not-the-secret",
        ..alice_as
    };
    assert_eq!(wrong.get("/subjects").0, 401);
    assert_eq!(wrong.get("/").0, 401);

    // The super user may do everything.
    let (st, orders) = admin_as.register("orders-value", ORDER);
    assert_eq!(st, 200, "{orders}");
    let (st, payments) = admin_as.register("payments-value", PAYMENT);
    assert_eq!(st, 200, "{payments}");
    let (orders_id, payments_id) = (orders["id"].clone(), payments["id"].clone());
    assert_eq!(
        admin_as.get("/subjects"),
        (200, json!(["orders-value", "payments-value"]))
    );

    // alice, with no ACL, is authenticated and sees nothing.
    assert_eq!(alice_as.get("/"), (200, json!({})));
    assert_eq!(alice_as.get("/subjects"), (200, json!([])));
    assert_eq!(alice_as.get("/schemas"), (200, json!([])));
    denied(alice_as.get("/subjects/orders-value/versions"));
    denied(alice_as.get("/subjects/orders-value/versions/1"));
    denied(alice_as.get(&format!("/schemas/ids/{orders_id}")));
    denied(alice_as.register("orders-value", ORDER2));
    denied(alice_as.get("/config"));
    // An id that names no schema is still 40403, not a denial.
    let (st, body) = alice_as.get("/schemas/ids/4242");
    assert_eq!((st, body["error_code"].clone()), (404, json!(40403)));

    // ACLs through the mapping: READ and WRITE on the orders subjects
    // (a prefix), DESCRIBE_CONFIGS on the cluster.
    let (mut c, _) = handshake(&b.addr, "PLAIN");
    assert_eq!(plain(&mut c, &admin, &admin_secret).error_code, 0);
    let alice_principal = "User:alice";
    allow(
        &mut c,
        TOPIC,
        "__schema_orders-",
        PREFIXED,
        alice_principal,
        READ,
    );
    allow(
        &mut c,
        TOPIC,
        "__schema_orders-value",
        LITERAL,
        alice_principal,
        WRITE,
    );
    allow(
        &mut c,
        CLUSTER,
        "kafka-cluster",
        LITERAL,
        alice_principal,
        DESCRIBE_CONFIGS,
    );

    // READ implies DESCRIBE: the subject is listed, its schemas read.
    assert_eq!(alice_as.get("/subjects"), (200, json!(["orders-value"])));
    assert_eq!(
        alice_as.get("/subjects/orders-value/versions"),
        (200, json!([1]))
    );
    let (st, v1) = alice_as.get("/subjects/orders-value/versions/1");
    assert_eq!((st, v1["id"].clone()), (200, orders_id.clone()), "{v1}");
    assert_eq!(alice_as.get(&format!("/schemas/ids/{orders_id}")).0, 200);
    assert_eq!(
        alice_as.get(&format!("/schemas/ids/{orders_id}/subjects")),
        (200, json!(["orders-value"]))
    );
    denied(alice_as.get(&format!("/schemas/ids/{payments_id}")));
    let (st, listed) = alice_as.get("/schemas");
    assert_eq!(st, 200);
    let listed: Vec<&str> = listed
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|s| s["subject"].as_str())
        .collect();
    assert_eq!(listed, ["orders-value"]);
    // WRITE on the literal subject registers; not on another subject.
    let (st, v2) = alice_as.register("orders-value", ORDER2);
    assert_eq!(st, 200, "{v2}");
    denied(alice_as.register("payments-value", ORDER));
    denied(alice_as.register("orders-key", ORDER));
    // Compatibility is a read: allowed on what she may read.
    let (st, verdict) = alice_as.call(
        Method::POST,
        "/compatibility/subjects/orders-value/versions/latest",
        Some(json!({ "schema": ORDER2 })),
    );
    assert_eq!((st, verdict["is_compatible"].clone()), (200, json!(true)));
    // Deleting needs DELETE; changing settings needs ALTER_CONFIGS.
    denied(alice_as.call(Method::DELETE, "/subjects/orders-value", None));
    denied(alice_as.call(Method::DELETE, "/subjects/orders-value/versions/2", None));
    assert_eq!(
        alice_as.get("/config"),
        (200, json!({"compatibilityLevel": "BACKWARD"}))
    );
    denied(alice_as.call(
        Method::PUT,
        "/config",
        Some(json!({"compatibility": "NONE"})),
    ));
    denied(alice_as.call(
        Method::PUT,
        "/config/orders-value",
        Some(json!({"compatibility": "NONE"})),
    ));
    denied(alice_as.call(Method::PUT, "/mode", Some(json!({"mode": "READONLY"}))));

    // A SCRAM user's password works as well; bob has no ACL.
    let r = upsert_scram(&mut c, "bob", ScramMechanism::Sha512, "bobs-password", 4096);
    assert!(r.results.iter().all(|x| x.error_code == 0), "{r:?}");
    let bob_as = As {
        http: &http,
        url: &url,
        user: "bob",
        password: "bobs-password",
    };
    assert_eq!(bob_as.get("/subjects"), (200, json!([])));
    let bob_wrong = As {
        password: "not-bobs",
        ..bob_as
    };
    assert_eq!(bob_wrong.get("/subjects").0, 401);
    b.stop();
}
