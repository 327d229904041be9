//! The admin listener of a broker with a SASL listener (docs/admin-api.md):
//! health checks open to all, everything else behind HTTP basic
//! authentication with a Kafka client's credentials (an API key and its
//! secret, or a SCRAM user and password), the JSON API answering as the
//! authorizer decides for that principal, and changes for super users only.

use es_auth::scram::ScramMechanism;
use serde_json::json;

use super::{create_key, handshake, plain, start_sasl, upsert_scram};

fn http() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(super::TIMEOUT)
        .build()
        .expect("http client")
}

#[test]
fn the_admin_listener_asks_for_kafka_credentials_and_lets_only_super_users_change_things() {
    let dir = tempfile::tempdir().expect("tmp");
    let data = dir.path().join("data");
    let (admin, admin_secret) = create_key(&data, "User:admin");
    let (alice, alice_secret) = create_key(&data, "User:alice");
    let mut b = start_sasl(&data, &["--admin-listen", "127.0.0.1:0"]);
    let url = b.admin_url();
    let h = http();
    // Health checks answer anyone.
    assert_eq!(
        h.get(format!("{url}/healthz"))
            .send()
            .expect("healthz")
            .status(),
        200
    );
    assert_eq!(
        h.get(format!("{url}/readyz"))
            .send()
            .expect("readyz")
            .status(),
        200
    );
    // Everything else asks for credentials.
    let r = h.get(format!("{url}/metrics")).send().expect("metrics");
    assert_eq!(r.status(), 401);
    assert_eq!(
        r.headers()
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok()),
        Some("Basic realm=\"es\"")
    );
    let wrong = h
        .get(format!("{url}/api/v1/topics"))
        .basic_auth(&alice, Some("not-the-secret"))
        .send()
        .expect("wrong secret");
    assert_eq!(wrong.status(), 401);
    // The super user creates a topic; alice sees nothing of it (no ACL
    // lets her describe it) and may not create one.
    let r = h
        .post(format!("{url}/api/v1/topics"))
        .basic_auth(&admin, Some(&admin_secret))
        .json(&json!({"name": "guarded", "partitions": 1}))
        .send()
        .expect("create");
    assert_eq!(r.status(), 201, "{:?}", r.text());
    let seen: serde_json::Value = h
        .get(format!("{url}/api/v1/topics"))
        .basic_auth(&alice, Some(&alice_secret))
        .send()
        .expect("alice lists")
        .json()
        .expect("json");
    assert_eq!(
        seen,
        json!([]),
        "the authorizer hides what alice may not describe"
    );
    let r = h
        .get(format!("{url}/api/v1/topics/guarded"))
        .basic_auth(&alice, Some(&alice_secret))
        .send()
        .expect("alice describes");
    assert_eq!(r.status(), 403, "{:?}", r.text());
    let r = h
        .post(format!("{url}/api/v1/topics"))
        .basic_auth(&alice, Some(&alice_secret))
        .json(&json!({"name": "alices", "partitions": 1}))
        .send()
        .expect("alice creates");
    assert_eq!(r.status(), 403);
    let r = h
        .get(format!("{url}/metrics"))
        .basic_auth(&alice, Some(&alice_secret))
        .send()
        .expect("alice scrapes");
    assert_eq!(r.status(), 200);
    let text = r.text().expect("text");
    assert!(
        text.contains(
            "es_authentication_failures_total{listener=\"SASL_PLAINTEXT\",mechanism=\"PLAIN\"} 0"
        ),
        "{text}"
    );
    // A SCRAM user's password works too.
    let (mut c, _) = handshake(&b.addr, "PLAIN");
    assert_eq!(plain(&mut c, &admin, &admin_secret).error_code, 0);
    let r = upsert_scram(&mut c, "bob", ScramMechanism::Sha256, "bobs-password", 4096);
    assert!(r.results.iter().all(|x| x.error_code == 0), "{r:?}");
    let over = h
        .get(format!("{url}/api/v1/overview"))
        .basic_auth("bob", Some("bobs-password"))
        .send()
        .expect("bob");
    assert_eq!(over.status(), 200);
    let over: serde_json::Value = over.json().expect("json");
    assert_eq!(over["caller"]["principal"], "User:bob");
    assert_eq!(over["caller"]["may_write"], false);
    let r = h
        .get(format!("{url}/api/v1/overview"))
        .basic_auth("bob", Some("not-bobs"))
        .send()
        .expect("bob, wrong");
    assert_eq!(r.status(), 401);
    b.stop();
}
