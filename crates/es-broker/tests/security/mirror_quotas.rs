//! A mirror link's client-quota sync (`mirror link create --sync-quotas`)
//! from a source that takes SASL_SSL with SCRAM-SHA-512 only: es's own
//! client logs in with the link's librdkafka settings, the source's quotas
//! (user, default user and client-id entities) appear on es, one removed on
//! the source goes from es, one made on es by hand stays, and the link's
//! password is in neither broker's log.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use es_auth::scram::ScramMechanism;
use es_test_support::wait::eventually;
use es_test_support::wire::KafkaClient;
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::{
    AlterClientQuotasRequest, AlterClientQuotasResponse, ApiKey, DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::common::{Broker, ES_BROKER};
use super::pki::Pki;
use super::upsert_scram;

// ASCII: a properties file is ISO-8859-1, as Java reads it.
const PASSWORD: &str = "mirror-scram-s3cret";

/// One AlterClientQuotas entry: `entity` (type, name; None the default),
/// `key` set to `value` or removed.
fn alter(c: &mut KafkaClient, entity: &[(&str, Option<&str>)], key: &str, value: Option<f64>) {
    let mut e = EntryData::default();
    e.entity = entity
        .iter()
        .map(|(t, n)| {
            let mut d = EntityData::default();
            d.entity_type = StrBytes::from_string(t.to_string());
            d.entity_name = n.map(|n| StrBytes::from_string(n.to_string()));
            d
        })
        .collect();
    let mut op = OpData::default();
    op.key = StrBytes::from_string(key.to_string());
    op.value = value.unwrap_or(0.0);
    op.remove = value.is_none();
    e.ops = vec![op];
    let mut req = AlterClientQuotasRequest::default();
    req.entries = vec![e];
    let r: AlterClientQuotasResponse = c.call(ApiKey::AlterClientQuotas, 1, &req);
    assert_eq!(
        r.entries[0].error_code, 0,
        "{:?}",
        r.entries[0].error_message
    );
}

/// Every quota of the broker, as `type=name,... key=value` lines, sorted.
fn quotas(addr: &str) -> Vec<String> {
    let mut c = KafkaClient::connect(addr, "quotas");
    let r: DescribeClientQuotasResponse = c.call(
        ApiKey::DescribeClientQuotas,
        1,
        &DescribeClientQuotasRequest::default(),
    );
    assert_eq!(r.error_code, 0);
    let mut out = Vec::new();
    for e in r.entries.unwrap_or_default() {
        let mut entity: Vec<String> = e
            .entity
            .iter()
            .map(|d| {
                let n = d
                    .entity_name
                    .as_ref()
                    .map_or("<default>".into(), |n| n.to_string());
                format!("{}={n}", d.entity_type)
            })
            .collect();
        entity.sort();
        for v in &e.values {
            out.push(format!("{} {}={}", entity.join(","), v.key, v.value));
        }
    }
    out.sort();
    out
}

#[test]
fn a_link_syncs_the_sources_client_quotas_over_sasl_ssl_scram() {
    let dir = tempfile::tempdir().expect("tmp");
    let pki = Pki::new(&dir.path().join("pki"));
    let s = |p: &Path| p.to_str().expect("utf-8").to_string();
    let source = Broker::start(
        Path::new(ES_BROKER),
        dir.path().join("source"),
        &[
            "--listener",
            "PLAINTEXT://127.0.0.1:0",
            "--listener",
            "SASL_SSL://127.0.0.1:0",
            "--ssl-cert",
            &s(&pki.server_cert),
            "--ssl-key",
            &s(&pki.server_key),
            "--set",
            "sasl.enabled.mechanisms=SCRAM-SHA-512",
        ],
    );
    let admin_addr = source.listener_addr("PLAINTEXT");
    let mut admin = KafkaClient::connect(&admin_addr, "admin");
    let r = upsert_scram(&mut admin, "mirror", ScramMechanism::Sha512, PASSWORD, 4096);
    assert_eq!(r.results[0].error_code, 0);
    alter(
        &mut admin,
        &[("user", Some("alice"))],
        "producer_byte_rate",
        Some(1_048_576.0),
    );
    alter(
        &mut admin,
        &[("user", None)],
        "consumer_byte_rate",
        Some(2_097_152.0),
    );
    alter(
        &mut admin,
        &[("user", Some("alice")), ("client-id", Some("app"))],
        "request_percentage",
        Some(50.0),
    );

    let target = Broker::start(Path::new(ES_BROKER), dir.path().join("target"), &[]);
    let mut local = KafkaClient::connect(&target.addr, "admin");
    alter(
        &mut local,
        &[("user", Some("carol"))],
        "producer_byte_rate",
        Some(5.0),
    );

    // The link logs in as librdkafka's settings say; the certificate names
    // localhost.
    let port = source
        .listener_addr("SASL_SSL")
        .rsplit_once(':')
        .expect("port")
        .1
        .to_string();
    let config = dir.path().join("source.properties");
    std::fs::write(
        &config,
        format!(
            "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.username=mirror\n\
             sasl.password={PASSWORD}\nssl.ca.location={}\n",
            s(&pki.ca)
        ),
    )
    .expect("properties");
    let mirror = |args: &[&str]| {
        let out = Command::new(ES_BROKER)
            .arg("mirror")
            .args(args)
            .args(["--bootstrap", &target.addr])
            .output()
            .expect("es-broker mirror");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let bootstrap = format!("localhost:{port}");
    mirror(&[
        "link",
        "create",
        "src",
        "--source-bootstrap",
        &bootstrap,
        "--source-config",
        &s(&config),
        "--sync-quotas",
    ]);
    mirror(&["groups", "--link", "src", "--group-sync-interval-ms", "500"]);

    let synced = |want: &[&str]| {
        let want: Vec<String> = want.iter().map(|w| w.to_string()).collect();
        eventually(Duration::from_secs(60), "the quotas synced", || {
            (quotas(&target.addr) == want).then_some(())
        });
    };
    synced(&[
        "client-id=app,user=alice request_percentage=50",
        "user=<default> consumer_byte_rate=2097152",
        "user=alice producer_byte_rate=1048576",
        "user=carol producer_byte_rate=5",
    ]);
    // Removed on the source: removed on es; carol's, made by hand, stays.
    alter(
        &mut admin,
        &[("user", Some("alice"))],
        "producer_byte_rate",
        None,
    );
    alter(
        &mut admin,
        &[("user", None)],
        "consumer_byte_rate",
        Some(1_000.0),
    );
    synced(&[
        "client-id=app,user=alice request_percentage=50",
        "user=<default> consumer_byte_rate=1000",
        "user=carol producer_byte_rate=5",
    ]);
    let (t, src) = (target.stop(), source.stop());
    assert!(
        !t.contains(PASSWORD) && !src.contains(PASSWORD),
        "the link's password was logged"
    );
}
