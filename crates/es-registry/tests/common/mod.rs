//! What the registry's integration tests share: a registry served over
//! real HTTP from a thread of its own, a client, and the check that runs a
//! verdict table through the HTTP API under BACKWARD, FORWARD and FULL.

#![allow(dead_code)]

use std::path::Path;

use reqwest::blocking::Client;
use serde_json::{json, Value};

pub const CT: &str = "application/vnd.schemaregistry.v1+json";

/// A registry served from a thread of its own until dropped.
pub struct Server {
    pub base: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    pub fn start(dir: &Path) -> Result<Server, es_registry::StartError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let config = es_registry::Config {
            listen: "127.0.0.1:0".into(),
            data_dir: dir.to_path_buf(),
            cluster_id: "test-cluster".into(),
            access: None,
            replicated: None,
        };
        let bound = rt.block_on(es_registry::bind(config))?;
        let base = format!("http://{}", bound.local_addr().expect("addr"));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            rt.block_on(bound.serve(async {
                let _ = rx.await;
            }))
            .expect("serves");
        });
        Ok(Server {
            base,
            stop: Some(tx),
            thread: Some(thread),
        })
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

pub fn client() -> Client {
    Client::builder().no_proxy().build().expect("client")
}

/// Sends a request with a JSON body; returns the status and the body
/// (as JSON when it is JSON).
pub fn send(c: &Client, method: &str, url: &str, body: Option<String>) -> (u16, Value) {
    let m = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
    let mut req = c.request(m, url);
    if let Some(b) = body {
        req = req.header("Content-Type", CT).body(b);
    }
    let resp = req.send().expect("send");
    let status = resp.status().as_u16();
    let text = resp.text().expect("body");
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// (what the row shows, old schema, new schema, backward, forward)
pub type Row<'a> = (&'a str, &'a str, &'a str, bool, bool);

/// Registers each row's old schema under a subject of its own (level
/// NONE), then for BACKWARD, FORWARD and FULL asks
/// `POST /compatibility/subjects/{s}/versions/latest` about the new one:
/// the answer must be the row's verdict.
pub fn table_over_http(schema_type: &str, rows: &[Row]) {
    let dir = tempfile::tempdir().expect("tmp");
    let s = Server::start(dir.path()).expect("starts");
    let c = client();
    let body = |schema: &str| json!({"schema": schema, "schemaType": schema_type}).to_string();
    let (st, _) = send(
        &c,
        "PUT",
        &s.url("/config"),
        Some(json!({"compatibility": "NONE"}).to_string()),
    );
    assert_eq!(st, 200);
    for (i, (what, old, _, _, _)) in rows.iter().enumerate() {
        let (st, v) = send(
            &c,
            "POST",
            &s.url(&format!("/subjects/t{i}/versions")),
            Some(body(old)),
        );
        assert_eq!(st, 200, "{what}: old schema refused: {v}");
    }
    let mut wrong = Vec::new();
    for level in ["BACKWARD", "FORWARD", "FULL"] {
        let (st, _) = send(
            &c,
            "PUT",
            &s.url("/config"),
            Some(json!({"compatibility": level}).to_string()),
        );
        assert_eq!(st, 200);
        for (i, (what, _, new, backward, forward)) in rows.iter().enumerate() {
            let want = match level {
                "BACKWARD" => *backward,
                "FORWARD" => *forward,
                _ => *backward && *forward,
            };
            let url = s.url(&format!(
                "/compatibility/subjects/t{i}/versions/latest?verbose=true"
            ));
            let (st, v) = send(&c, "POST", &url, Some(body(new)));
            if st != 200 || v["is_compatible"] != json!(want) {
                wrong.push(format!("{what} under {level}: {st} {v}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
