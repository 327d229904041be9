//! scripts/cluster and deploy/compose.yaml describe the same three-node
//! cluster (docs/cluster.md): the same es-broker flags (compose adds only
//! what containers need), the same voters, flags es-broker accepts. And the
//! script itself works: start (every node ready), status, kill -9 of a
//! node, restart, stop, with the real binary.

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
fn the_script_and_the_compose_file_start_the_same_nodes() {
    let compose = std::fs::read_to_string(repo().join("deploy/compose.yaml")).expect("compose");
    let script = std::fs::read_to_string(repo().join("scripts/cluster")).expect("script");
    let commands: Vec<&str> = compose
        .lines()
        .filter(|l| l.trim_start().starts_with("command:"))
        .collect();
    assert_eq!(commands.len(), 3, "three nodes in compose.yaml");
    // The flags the script passes each node (its start_node invocation).
    let start = script
        .split("setsid \"$bin\"")
        .nth(1)
        .and_then(|s| s.split(">>").next())
        .expect("start_node's es-broker invocation");
    let script_flags = flags(start);
    let help = Command::new(EXE).arg("--help").output().expect("--help");
    let help = String::from_utf8_lossy(&help.stdout).to_string();
    for (i, c) in commands.iter().enumerate() {
        let compose_flags = flags(c);
        let extra: BTreeSet<_> = compose_flags.difference(&script_flags).cloned().collect();
        let missing: BTreeSet<_> = script_flags
            .difference(&compose_flags)
            .filter(|f| *f != "--data-dir") // the image's entrypoint sets it
            .cloned()
            .collect();
        assert!(
            missing.is_empty(),
            "compose node {} lacks {missing:?}",
            i + 1
        );
        assert!(
            extra.iter().all(|f| f == "--advertised-listener"),
            "compose node {} has flags the script does not: {extra:?}",
            i + 1
        );
        for f in &compose_flags {
            assert!(help.contains(f.as_str()), "es-broker does not know {f}");
        }
        assert!(c.contains(&format!("\"--node-id\", \"{}\"", i + 1)));
        assert!(c.contains("1@es-1:9093,2@es-2:9093,3@es-3:9093"));
    }
    assert!(script.contains("voters=${ES_CLUSTER_VOTERS:-3}"));
    assert!(script.contains("nodes=${ES_CLUSTER_NODES:-3}"));
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

/// A base port with the six ports the script uses free.
fn free_base() -> u16 {
    for base in (31_000u16..60_000).step_by(997) {
        let ports = (1..=3).flat_map(|i| [base + i, base + 100 + i]);
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
