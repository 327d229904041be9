//! The schema registry of a three-node cluster (docs/schema-registry.md,
//! "In a cluster"): its changes are entries of the metadata log, so every
//! node serves the same registry with the same ids.
//!
//! - A registration sent to a follower is forwarded to the quorum's leader
//!   and answered once applied; a read sent right after it to any other
//!   node sees it (a read index from the leader, no waiting in the test).
//! - Registrations through different nodes get distinct ids that every node
//!   names alike; a compatibility refusal and a config change made on one
//!   node hold on all.
//! - Each node's `schemas.json` follows as a copy.
//! - A node stopped while schemas are registered serves them after its
//!   restart (from the log).
//! - Produce-time validation: a schema registered through one node is
//!   accepted by the partition's leader, whichever node that is.
//! - The quorum's leader stopped: a write through a follower waits for the
//!   next leader and lands; the old leader, restarted, serves it.

mod common;

use std::time::Duration;

use common::cluster::Cluster;
use common::{admin, admin_opts, client_config};
use es_test_support::wait::eventually;
use rdkafka::admin::{NewTopic, TopicReplication};
use rdkafka::producer::{FutureProducer, FutureRecord};
use reqwest::blocking::Client;
use reqwest::Method;
use serde_json::{json, Value};

const ORDER: &str = r#"{"type":"record","name":"Order","fields":[{"name":"id","type":"long"}]}"#;
const ORDER2: &str = r#"{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"note","type":["null","string"],"default":null}]}"#;
const ORDER_BAD: &str =
    r#"{"type":"record","name":"Order","fields":[{"name":"id","type":"string"}]}"#;
const PAYMENT: &str =
    r#"{"type":"record","name":"Payment","fields":[{"name":"amount","type":"double"}]}"#;

fn call(http: &Client, method: Method, url: &str, body: Option<Value>) -> (u16, Value) {
    let mut req = http.request(method, url);
    if let Some(b) = body {
        req = req
            .header("Content-Type", "application/vnd.schemaregistry.v1+json")
            .body(b.to_string());
    }
    let r = req.send().expect("request");
    let status = r.status().as_u16();
    let text = r.text().expect("body");
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

fn register(http: &Client, url: &str, subject: &str, schema: &str) -> (u16, Value) {
    call(
        http,
        Method::POST,
        &format!("{url}/subjects/{subject}/versions"),
        Some(json!({ "schema": schema })),
    )
}

fn id_of((status, body): (u16, Value)) -> i64 {
    assert_eq!(status, 200, "{body}");
    body["id"].as_i64().expect("id")
}

#[test]
fn every_node_serves_one_registry_through_the_metadata_log() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut c = Cluster::start_with(
        dir.path(),
        3,
        3,
        &["--schema-registry-listen", "127.0.0.1:0"],
    );
    let leader = c.leader();
    let followers: Vec<i32> = (1..=3).filter(|id| *id != leader).collect();
    let url = |c: &mut Cluster, id: i32| c.nodes.get_mut(&id).expect("node").schema_registry_url();
    let urls: Vec<(i32, String)> = (1..=3).map(|id| (id, url(&mut c, id))).collect();
    let url_of = |id: i32| urls.iter().find(|(i, _)| *i == id).expect("url").1.clone();
    let http = Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("http");

    // A registration on a follower; read at once on the other nodes.
    let (f1, f2) = (followers[0], followers[1]);
    let order = id_of(register(&http, &url_of(f1), "orders-value", ORDER));
    for id in [f2, leader] {
        let u = url_of(id);
        assert_eq!(
            call(&http, Method::GET, &format!("{u}/subjects"), None),
            (200, json!(["orders-value"])),
            "node {id}"
        );
        let (st, by_id) = call(
            &http,
            Method::GET,
            &format!("{u}/schemas/ids/{order}"),
            None,
        );
        assert_eq!(st, 200, "node {id}: {by_id}");
        assert_eq!(
            serde_json::from_str::<Value>(by_id["schema"].as_str().expect("schema")).expect("json"),
            serde_json::from_str::<Value>(ORDER).expect("json")
        );
    }

    // Registrations through each node: distinct ids, named alike by all.
    let payment = id_of(register(&http, &url_of(f2), "payments-value", PAYMENT));
    let order2 = id_of(register(&http, &url_of(leader), "orders-value", ORDER2));
    let mut ids = vec![order, payment, order2];
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 3, "{order} {payment} {order2}");
    // The same schema again, on another node: the same id.
    assert_eq!(
        id_of(register(&http, &url_of(f1), "payments-value", PAYMENT)),
        payment
    );
    for (id, u) in &urls {
        let (st, versions) = call(
            &http,
            Method::GET,
            &format!("{u}/schemas/ids/{order2}/versions"),
            None,
        );
        assert_eq!(
            (st, versions),
            (200, json!([{"subject": "orders-value", "version": 2}])),
            "node {id}"
        );
    }
    // A refusal on one node, a config change on another.
    let (st, body) = register(&http, &url_of(f2), "orders-value", ORDER_BAD);
    assert_eq!(
        (st, body["error_code"].clone()),
        (409, json!(409)),
        "{body}"
    );
    let (st, body) = call(
        &http,
        Method::PUT,
        &format!("{}/config", url_of(f1)),
        Some(json!({"compatibility": "FULL"})),
    );
    assert_eq!((st, body), (200, json!({"compatibility": "FULL"})));
    for (id, u) in &urls {
        assert_eq!(
            call(&http, Method::GET, &format!("{u}/config"), None),
            (200, json!({"compatibilityLevel": "FULL"})),
            "node {id}"
        );
    }

    // Each node's schemas.json follows.
    for id in 1..=3 {
        let file = dir.path().join(format!("node-{id}/schemas.json"));
        eventually(
            Duration::from_secs(30),
            "schemas.json to hold both subjects",
            || {
                let text = std::fs::read_to_string(&file).ok()?;
                (text.contains("orders-value") && text.contains("payments-value")).then_some(())
            },
        );
    }

    // A follower stopped while a schema is registered serves it after.
    c.nodes.remove(&f2).expect("node").stop();
    let late = id_of(register(&http, &url_of(f1), "late-value", ORDER));
    assert_eq!(
        late, order,
        "the same schema keeps its id under a new subject"
    );
    let mut back = c.spawn(f2);
    back.wait_listening_or_exit();
    let f2_url = back.schema_registry_url();
    c.nodes.insert(f2, back);
    assert_eq!(
        call(&http, Method::GET, &format!("{f2_url}/subjects"), None),
        (200, json!(["late-value", "orders-value", "payments-value"]))
    );

    // Produce-time validation on whichever node leads the partition.
    let fresh = id_of(register(&http, &url_of(f1), "validated-value", PAYMENT));
    let bootstrap = c.addr(leader);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async move {
        let t = NewTopic::new("validated", 3, TopicReplication::Fixed(1))
            .set("confluent.value.schema.validation", "true");
        let created = admin(&bootstrap)
            .create_topics([&t], &admin_opts(Duration::from_secs(30)))
            .await
            .expect("create topics");
        assert!(created.iter().all(|r| r.is_ok()), "{created:?}");
        let mut cfg = client_config(&bootstrap);
        cfg.set("linger.ms", "0").set("message.timeout.ms", "30000");
        let p: FutureProducer = cfg.create().expect("producer");
        let mut value = vec![0u8];
        value.extend_from_slice(&(fresh as i32).to_be_bytes());
        value.extend_from_slice(b"payload");
        for partition in 0..3 {
            let r = p
                .send(
                    FutureRecord::<[u8], [u8]>::to("validated")
                        .partition(partition)
                        .payload(&value),
                    Duration::from_secs(30),
                )
                .await;
            assert!(r.is_ok(), "partition {partition}: {r:?}");
        }
    });

    // The quorum's leader stopped: a write through a follower waits for a
    // new leader and lands; read at once on the other follower; the old
    // leader, back, serves it.
    c.nodes.remove(&leader).expect("node").stop();
    let after = id_of(register(
        &http,
        &url_of(f1),
        "after-failover-value",
        PAYMENT,
    ));
    assert_eq!(after, payment, "the same schema keeps its id");
    let (st, subjects) = call(&http, Method::GET, &format!("{f2_url}/subjects"), None);
    assert_eq!(st, 200);
    assert!(
        subjects
            .as_array()
            .is_some_and(|a| a.contains(&json!("after-failover-value"))),
        "{subjects}"
    );
    let mut back = c.spawn(leader);
    back.wait_listening_or_exit();
    let u = back.schema_registry_url();
    c.nodes.insert(leader, back);
    assert_eq!(
        call(
            &http,
            Method::GET,
            &format!("{u}/subjects/after-failover-value/versions"),
            None
        ),
        (200, json!([1]))
    );
    for (_, n) in std::mem::take(&mut c.nodes) {
        n.stop();
    }
}
