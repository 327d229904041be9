//! Share-group state fails over with its partition (docs/share-groups-design.md
//! §3.10), on three real es-broker processes over raw requests: what a
//! member acknowledged on the partition's leader is never delivered again by
//! the leader elected after a SIGKILL; what it had acquired comes back with
//! its delivery count; the killed broker, restarted, copies the state whole
//! before it rejoins the ISR and can lead again without losing any of it.

mod common;

use std::path::Path;
use std::time::Duration;

use common::cluster::{topics, Cluster};
use common::replicas::{create, name, produce, shown};
use common::share::{ack_request, acquired, fetch_request, Acquired};
use es_kafka::kafka_protocol::messages::*;
use es_test_support::wait::eventually;
use es_test_support::wire::KafkaClient;
use uuid::Uuid;

const GROUP: &str = "queue";
const TOPIC: &str = "jobs";

fn client(addr: &str) -> KafkaClient {
    KafkaClient::connect_with_timeout(addr, "share-failover", Duration::from_secs(40))
}

/// One ShareFetch v1 of partition 0 in a new session: the partition's error
/// and (first, last, delivery count) of each AcquiredRecords.
fn fetch(addr: &str, tid: Uuid, member: &str) -> (i16, Vec<Acquired>) {
    let req = fetch_request(GROUP, tid, 0, member, 0);
    let r: ShareFetchResponse = client(addr).call(ApiKey::ShareFetch, 1, &req);
    if r.error_code != 0 {
        return (r.error_code, Vec::new());
    }
    acquired(&r)
}

const ACCEPT: i8 = 1;
const RELEASE: i8 = 2;

/// ShareFetch then ShareAcknowledge of `[first, last]` (type `kind`) on one
/// connection, as a member does: the acquired records and the ack's code;
/// `None` when the fetch is refused (no leader there yet).
fn fetch_and_ack(
    addr: &str,
    tid: Uuid,
    member: &str,
    first: i64,
    last: i64,
    kind: i8,
) -> Option<(Vec<Acquired>, i16)> {
    let mut c = client(addr);
    let r: ShareFetchResponse = c.call(
        ApiKey::ShareFetch,
        1,
        &fetch_request(GROUP, tid, 0, member, 0),
    );
    let (code, got) = acquired(&r);
    if r.error_code != 0 || code != 0 {
        return None;
    }
    let ack = ack_request(GROUP, tid, 0, member, 1, first, last, kind);
    let r: ShareAcknowledgeResponse = c.call(ApiKey::ShareAcknowledge, 1, &ack);
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    Some((got, r.responses[0].partitions[0].error_code))
}

fn share_files(node_dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let root = node_dir.join("shares");
    for g in std::fs::read_dir(&root).into_iter().flatten().flatten() {
        for f in std::fs::read_dir(g.path()).into_iter().flatten().flatten() {
            out.push(format!(
                "{}/{}",
                g.file_name().to_string_lossy(),
                f.file_name().to_string_lossy()
            ));
        }
    }
    out.sort();
    out
}

/// The partition's leader as node `via` sees it, once it has one other
/// than `not` and that leader's high watermark covers all 20 records (a new
/// leader's may be a fetch round behind the old one's until its followers
/// fetch; share fetches read up to it).
fn leader_other_than(c: &Cluster, via: i32, not: i32) -> i32 {
    let leader = eventually(Duration::from_secs(60), "a new leader", || {
        let s = shown(&c.addr(via), TOPIC);
        (s.0 >= 0 && s.0 != not).then_some(s.0)
    });
    eventually(Duration::from_secs(60), "every record committed", || {
        (high_watermark(&c.addr(leader)) == (0, 20)).then_some(())
    });
    leader
}

/// ListOffsets (v7, latest) of partition 0: (error, the high watermark).
fn high_watermark(addr: &str) -> (i16, i64) {
    use es_kafka::kafka_protocol::messages::list_offsets_request::{
        ListOffsetsPartition, ListOffsetsTopic,
    };
    let mut p = ListOffsetsPartition::default();
    p.partition_index = 0;
    p.timestamp = -1;
    p.current_leader_epoch = -1;
    let mut t = ListOffsetsTopic::default();
    t.name = name(TOPIC);
    t.partitions = vec![p];
    let mut req = ListOffsetsRequest::default();
    req.replica_id = BrokerId(-1);
    req.topics = vec![t];
    let r: ListOffsetsResponse = client(addr).call(ApiKey::ListOffsets, 7, &req);
    let p = &r.topics[0].partitions[0];
    (p.error_code, p.offset)
}

#[test]
fn acknowledgements_survive_the_loss_of_the_leader_and_a_restarted_replica_copies_them() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut c = Cluster::start_with(dir.path(), 3, 3, &["--replica-lag-time-max-ms", "6000"]);
    c.leader();
    assert_eq!(
        create(&c.addr(1), TOPIC, 3, &[("min.insync.replicas", "2")]),
        0
    );
    let (leader, ..) = eventually(Duration::from_secs(30), "three in sync", || {
        let s = shown(&c.addr(1), TOPIC);
        (s.0 >= 0 && s.3.len() == 3).then_some(s)
    });
    let tid = *topics(&c.addr(leader)).get(TOPIC).expect("topic id");
    // The share-partition starts at the log end (Kafka's default reset,
    // latest): here 0, before anything is produced.
    assert_eq!(
        fetch(&c.addr(leader), tid, "m0-000000000000000000"),
        (0, vec![])
    );
    for i in 0..20 {
        assert_eq!(produce(&c.addr(leader), TOPIC, &format!("job-{i}")).0, 0);
    }

    // m1 takes 0-19 and accepts 0-4 on the leader: answered once both
    // followers hold it.
    let (got, code) = fetch_and_ack(&c.addr(leader), tid, "m1-000000000000000000", 0, 4, ACCEPT)
        .expect("a share fetch on the leader");
    assert_eq!(got, vec![(0, 19, 1)]);
    assert_eq!(code, 0);
    for id in c.nodes.keys() {
        let files = share_files(&dir.path().join(format!("node-{id}")));
        assert!(
            files.iter().any(|f| f.ends_with("jobs-0.journal")),
            "node {id} holds a copy: {files:?}"
        );
    }

    // The leader dies. On the new leader 0-4 never come again; 5-19 do, each
    // a second time (m2 releases them).
    c.nodes.remove(&leader).expect("leader").kill();
    let survivor = *c.nodes.keys().next().expect("a survivor");
    let second = leader_other_than(&c, survivor, leader);
    let (got, code) = eventually(
        Duration::from_secs(60),
        "a share fetch on the new leader",
        || {
            fetch_and_ack(
                &c.addr(second),
                tid,
                "m2-000000000000000000",
                5,
                19,
                RELEASE,
            )
        },
    );
    assert_eq!(got, vec![(5, 19, 2)], "after the loss of leader {leader}");
    assert_eq!(code, 0);

    // The killed broker returns, copies the state whole and rejoins the ISR.
    let mut p = c.spawn(leader);
    p.wait_listening();
    c.nodes.insert(leader, p);
    eventually(
        Duration::from_secs(90),
        "the restarted broker back in sync",
        || {
            let s = shown(&c.addr(second), TOPIC);
            (s.3.len() == 3).then_some(())
        },
    );
    // m3 takes 5-19 (a third time) and accepts 5-9.
    let (got, code) = fetch_and_ack(&c.addr(second), tid, "m3-000000000000000000", 5, 9, ACCEPT)
        .expect("a share fetch on the second leader");
    assert_eq!(got, vec![(5, 19, 3)]);
    assert_eq!(code, 0);

    // The second leader dies too: whoever leads now, the restarted broker
    // or the third, has every acknowledgement and delivery count.
    c.nodes.remove(&second).expect("second leader").kill();
    let via = *c.nodes.keys().next().expect("a survivor");
    let third = leader_other_than(&c, via, second);
    let got = eventually(
        Duration::from_secs(60),
        "a share fetch on the third leader",
        || {
            let (code, got) = fetch(&c.addr(third), tid, "m4-000000000000000000");
            (code == 0).then_some(got)
        },
    );
    assert_eq!(got, vec![(10, 19, 4)], "on leader {third}");
    for (_, p) in std::mem::take(&mut c.nodes) {
        let log = p.stop();
        assert!(!log.contains("panicked"), "{log}");
    }
}
