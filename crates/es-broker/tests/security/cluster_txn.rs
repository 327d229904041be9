//! A transactional producer on the SASL listener of a three-node cluster,
//! writing to a partition another node than its transaction coordinator
//! leads: the leader verifies the transaction with the coordinator over the
//! coordinator's inter-broker listener (PLAINTEXT), not over the SASL
//! listener the produce request came on, and the transaction commits.

use std::time::Duration;

use es_test_support::wait::eventually;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::ClientConfig;

use crate::common::client_config;
use crate::common::cluster::Cluster;
use crate::common::replicas::{create, shown};
use crate::common::txn::{agreed_coordinator, read_committed, TRANSACTION_KEY};
use crate::create_key;

const TOPIC: &str = "ledger";

fn sasl(bootstrap: &str, user: &str, password: &str) -> ClientConfig {
    let mut c = client_config(bootstrap);
    c.set("security.protocol", "SASL_PLAINTEXT")
        .set("sasl.mechanisms", "PLAIN")
        .set("sasl.username", user)
        .set("sasl.password", password);
    c
}

#[test]
fn a_transaction_on_a_sasl_listener_is_verified_over_the_inter_broker_listener() {
    let dir = tempfile::tempdir().expect("tmp");
    let c = Cluster::start_with(
        dir.path(),
        3,
        3,
        &[
            "--listener",
            "INTERNAL://127.0.0.1:0",
            "--listener",
            "CLIENT://127.0.0.1:0",
            "--listener-security-protocol-map",
            "INTERNAL:PLAINTEXT,CLIENT:SASL_PLAINTEXT",
            "--set",
            "inter.broker.listener.name=INTERNAL",
            "--set",
            "sasl.enabled.mechanisms=PLAIN",
            "--transaction-state-log-num-partitions",
            "3",
        ],
    );
    c.leader();
    // A key made on one running node reaches the others through the metadata.
    let (user, password) = create_key(&c.nodes[&1].data_dir, "User:alice");
    let client_addrs: Vec<String> = c
        .nodes
        .values()
        .map(|n| n.listener_addr("CLIENT"))
        .collect();
    for addr in &client_addrs {
        eventually(
            Duration::from_secs(30),
            "the key known on every node",
            || {
                let probe: BaseConsumer = sasl(addr, &user, &password).create().expect("client");
                probe.fetch_metadata(None, Duration::from_secs(5)).ok()
            },
        );
    }

    let created = eventually(Duration::from_secs(30), "three brokers to place on", || {
        let e = create(&c.addr(1), TOPIC, 3, &[]);
        (e != 38).then_some(e)
    });
    assert_eq!(created, 0);
    let leader = eventually(Duration::from_secs(30), "a leader in sync", || {
        let s = shown(&c.addr(1), TOPIC);
        (s.0 > 0 && s.3.len() == 3).then_some(s.0)
    });
    let id = (0..200)
        .map(|i| format!("ledger-writer-{i}"))
        .find(|id| agreed_coordinator(&c, TRANSACTION_KEY, id, None) != leader)
        .expect("a transactional id coordinated elsewhere");

    let p: BaseProducer = sasl(&client_addrs.join(","), &user, &password)
        .set("transactional.id", &id)
        .set("message.timeout.ms", "30000")
        .create()
        .expect("producer");
    p.init_transactions(Duration::from_secs(60))
        .expect("init_transactions");
    p.begin_transaction().expect("begin");
    for i in 0..3 {
        let v = format!("entry-{i}");
        p.send(BaseRecord::to(TOPIC).partition(0).key("k").payload(&v))
            .map_err(|(e, _)| e)
            .expect("send");
    }
    p.commit_transaction(Duration::from_secs(60))
        .expect("the transaction commits: the leader verified it with the coordinator");

    // Three records and the commit marker, all stable, on the leader.
    let (error, lso, _, aborted) = read_committed(&c.addr(leader), TOPIC, 0);
    assert_eq!(error, 0);
    assert_eq!(lso, 4, "three committed records and the marker");
    assert!(aborted.is_empty());
}
