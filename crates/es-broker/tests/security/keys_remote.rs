//! `es-broker keys ... --bootstrap`: API keys created, listed and revoked
//! through a running broker's SASL_SSL listener as a super user; refused to
//! a principal without ALTER on the cluster; the secret never stored.

use std::path::Path;
use std::process::{Command, Output};

use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};

use crate::common::{client_config, Broker, ES_BROKER};
use crate::create_key;
use crate::pki::Pki;

/// Whether librdkafka logs in over SASL_SSL PLAIN as `user` and gets
/// metadata.
fn logs_in(addr: &str, ca: &Path, user: &str, password: &str) -> bool {
    let c: BaseConsumer = client_config(addr)
        .set("security.protocol", "SASL_SSL")
        .set("sasl.mechanisms", "PLAIN")
        .set("sasl.username", user)
        .set("sasl.password", password)
        .set("ssl.ca.location", ca.to_str().expect("utf-8"))
        .create()
        .expect("client");
    c.fetch_metadata(None, Duration::from_secs(10)).is_ok()
}

fn keys_remote(bootstrap: &str, config: &Path, args: &[&str]) -> Output {
    Command::new(ES_BROKER)
        .arg("keys")
        .arg(args[0])
        .args(["--bootstrap", bootstrap, "--command-config"])
        .arg(config)
        .args(&args[1..])
        .output()
        .expect("run keys")
}

fn client_properties(path: &Path, ca: &Path, user: &str, password: &str) {
    std::fs::write(
        path,
        format!(
            "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n\
             sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"{user}\" password=\"{password}\";\n\
             ssl.truststore.type=PEM\nssl.truststore.location={}\n",
            ca.display()
        ),
    )
    .expect("write properties");
}

#[test]
fn keys_are_managed_through_a_running_broker_by_a_super_user_only() {
    let dir = tempfile::tempdir().expect("tmp");
    let data = dir.path().join("data");
    let pki = Pki::new(&dir.path().join("pki"));
    let (admin, admin_secret) = create_key(&data, "User:admin");
    let s = |p: &Path| p.to_str().expect("utf-8").to_string();
    let b = Broker::start(
        Path::new(ES_BROKER),
        &data,
        &[
            "--listener",
            "SASL_SSL://127.0.0.1:0",
            "--ssl-cert",
            &s(&pki.server_cert),
            "--ssl-key",
            &s(&pki.server_key),
            "--set",
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "--set",
            "super.users=User:admin",
        ],
    );
    // The certificate names localhost: connect by that name.
    let port = b.addr.rsplit_once(':').expect("port").1.to_string();
    let bootstrap = format!("localhost:{port}");
    let admin_cfg = dir.path().join("admin.properties");
    client_properties(&admin_cfg, &pki.ca, &admin, &admin_secret);

    let out = keys_remote(
        &bootstrap,
        &admin_cfg,
        &["create", "--principal", "User:bob", "--id", "bob"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8(out.stdout).expect("utf-8");
    let (id, secret) = line.trim().split_once(' ').expect("ID SECRET");
    assert_eq!(id, "bob");
    assert!(logs_in(&b.addr, &pki.ca, "bob", secret), "bob logs in");

    let listed = keys_remote(&bootstrap, &admin_cfg, &["list"]);
    let listed = String::from_utf8(listed.stdout).expect("utf-8");
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("bob\tUser:bob\t") && l.contains("active")),
        "{listed}"
    );
    assert!(
        !listed.contains(secret) && !listed.contains("argon2"),
        "{listed}"
    );
    // The node's copy holds the hash, never the secret.
    let file = std::fs::read_to_string(data.join("api_keys.json")).expect("file");
    assert!(file.contains("\"bob\"") && !file.contains(secret), "{file}");

    // bob is no super user: no ALTER on the cluster.
    let bob_cfg = dir.path().join("bob.properties");
    client_properties(&bob_cfg, &pki.ca, "bob", secret);
    let refused = keys_remote(
        &bootstrap,
        &bob_cfg,
        &["create", "--principal", "User:bob2"],
    );
    assert!(!refused.status.success());
    let why = String::from_utf8_lossy(&refused.stderr);
    assert!(why.contains("Cluster authorization failed"), "{why}");
    // Nor with a wrong secret.
    client_properties(&bob_cfg, &pki.ca, "bob", "wrong");
    let wrong = keys_remote(&bootstrap, &bob_cfg, &["list"]);
    assert!(!wrong.status.success());
    assert!(
        String::from_utf8_lossy(&wrong.stderr).contains("authentication failed"),
        "{}",
        String::from_utf8_lossy(&wrong.stderr)
    );

    let out = keys_remote(&bootstrap, &admin_cfg, &["revoke", "bob"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!logs_in(&b.addr, &pki.ca, "bob", secret), "bob revoked");
    let again = keys_remote(&bootstrap, &admin_cfg, &["revoke", "bob"]);
    assert!(!again.status.success(), "a second revocation");
    b.stop();
}
