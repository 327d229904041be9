//! scripts/cluster and docker/compose.cluster.yml describe the same
//! three-node cluster (docs/cluster.md): three voters, the coordinators'
//! topics with six partitions, a schema registry on every node, flags
//! es-broker accepts. And the script itself works: start (every node
//! ready), status, kill -9 of a node, restart, stop, with the real binary.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

const EXE: &str = env!("CARGO_BIN_EXE_es-broker");

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn flags(text: &str) -> BTreeSet<String> {
    text.split(|c: char| c.is_whitespace() || c == '"' || c == ',' || c == '[' || c == ']')
        .filter(|t| t.starts_with("--") && t.len() > 2)
        .map(str::to_string)
        .collect()
}

#[test]
fn the_script_and_the_cluster_compose_file_describe_the_same_cluster() {
    let compose =
        std::fs::read_to_string(repo().join("docker/compose.cluster.yml")).expect("compose");
    let script = std::fs::read_to_string(repo().join("scripts/cluster")).expect("script");
    // The flags the script passes each node (its start_node invocation).
    let start = script
        .split("setsid \"$bin\"")
        .nth(1)
        .and_then(|s| s.split(">>").next())
        .expect("start_node's es-broker invocation");
    let help = Command::new(EXE).arg("--help").output().expect("--help");
    let help = String::from_utf8_lossy(&help.stdout).to_string();
    for f in flags(start) {
        assert!(help.contains(f.as_str()), "es-broker does not know {f}");
    }
    // Three voters, the coordinators' topics with six partitions, and a
    // schema registry on every node, in both. (scripts/docker-check runs
    // the compose file's environment through the image's entrypoint and
    // checks the flags it makes against `es-broker --help`.)
    assert!(script.contains("voters=${ES_CLUSTER_VOTERS:-3}"));
    assert!(script.contains("nodes=${ES_CLUSTER_NODES:-3}"));
    assert!(compose.contains("ES_CONTROLLER_QUORUM_VOTERS: 1@es1:9093,2@es2:9093,3@es3:9093"));
    for id in 1..=3 {
        assert!(
            compose.contains(&format!("ES_NODE_ID: \"{id}\"")),
            "node {id}"
        );
    }
    for (flag, var) in [
        (
            "--offsets-topic-num-partitions 6",
            "ES_SET_OFFSETS_TOPIC_NUM_PARTITIONS: \"6\"",
        ),
        (
            "--transaction-state-log-num-partitions 6",
            "ES_SET_TRANSACTION_STATE_LOG_NUM_PARTITIONS: \"6\"",
        ),
    ] {
        assert!(start.contains(flag), "the script lacks {flag}");
        assert!(compose.contains(var), "the compose file lacks {var}");
    }
    assert!(start.contains("--schema-registry-listen \"127.0.0.1:$(registry_port"));
    assert!(compose.contains("ES_SCHEMA_REGISTRY_LISTEN: 0.0.0.0:8081"));
}

fn cluster(dir: &Path, base: u16, args: &[&str]) -> (bool, String) {
    let out = Command::new(repo().join("scripts/cluster"))
        .args(args)
        .env("ES_BROKER", EXE)
        .env("ES_CLUSTER_DIR", dir)
        .env("ES_CLUSTER_BASE_PORT", base.to_string())
        .output()
        .expect("scripts/cluster");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// A base port with the twelve ports the script uses free.
fn free_base() -> u16 {
    for base in (31_000u16..60_000).step_by(997) {
        let ports =
            (1..=3).flat_map(|i| [base + i, base + 100 + i, base + 200 + i, base + 300 + i]);
        if ports
            .map(|p| std::net::TcpListener::bind(("127.0.0.1", p)))
            .all(|r| r.is_ok())
        {
            return base;
        }
    }
    panic!("no free ports");
}

#[test]
fn scripts_cluster_starts_kills_restarts_and_stops_three_nodes() {
    let dir = tempfile::tempdir().expect("tmp");
    let base = free_base();
    let (ok, out) = cluster(dir.path(), base, &["start"]);
    let logs = || {
        (1..=3)
            .map(|i| {
                std::fs::read_to_string(dir.path().join(format!("node-{i}.log")))
                    .unwrap_or_default()
            })
            .collect::<Vec<_>>()
            .join("\n---\n")
    };
    assert!(ok, "start failed: {out}\n{}", logs());
    let bootstrap = (1..=3)
        .map(|i| format!("127.0.0.1:{}", base + i))
        .collect::<Vec<_>>()
        .join(",");
    assert!(out.contains(&bootstrap), "{out}");
    let (ok, status) = cluster(dir.path(), base, &["status"]);
    assert!(ok);
    assert_eq!(status.matches("running pid").count(), 3, "{status}");
    let (ok, out) = cluster(dir.path(), base, &["kill", "2"]);
    assert!(ok, "{out}");
    let (_, status) = cluster(dir.path(), base, &["status"]);
    assert!(
        status.contains("node 2 (voter)") && status.matches("running pid").count() == 2,
        "{status}"
    );
    let (ok, out) = cluster(dir.path(), base, &["restart", "2"]);
    assert!(ok, "restart failed: {out}\n{}", logs());
    let (ok, out) = cluster(dir.path(), base, &["stop"]);
    assert!(ok, "{out}");
    let (_, status) = cluster(dir.path(), base, &["status"]);
    assert_eq!(status.matches("stopped").count(), 3, "{status}");
    // Every node's stop was clean.
    for i in 1..=3 {
        let log = std::fs::read_to_string(dir.path().join(format!("node-{i}.log"))).expect("log");
        assert!(log.contains("stopped"), "node {i}:\n{log}");
    }
}
