//! The share-group offsets admin APIs in a cluster of three real es-broker
//! processes on loopback, where the group's coordinator and the partitions'
//! leaders are different nodes (docs/share-groups-design.md §3.10, §5 item
//! 23): topic `jobs` has three partitions of one replica each, two led by
//! the other nodes and one by the coordinator, so the coordinator reaches
//! two leaders over ES_SHARE_ADMIN and itself by a function call.
//!
//! - AlterShareGroupOffsets on the coordinator sets each start offset, each
//!   share-partition's files are on its leader only, and
//!   DescribeShareGroupOffsets v1 reads them back with Kafka's lag.
//! - A share consumer (raw ShareFetch / ShareAcknowledge) on one leader
//!   acknowledges records: the coordinator's describe shows the start moved.
//! - DeleteShareGroupOffsets and DeleteGroups on the coordinator remove the
//!   files on every leader.
//! - A leader stopped (SIGSTOP): Alter answers its partition
//!   COORDINATOR_NOT_AVAILABLE and the others NONE, Describe reads it as
//!   having no state (Kafka's answers when its share state cannot be
//!   reached); once it runs again, Alter reaches it.
//!
//! Waits are bounded polls on conditions, no assertion is on time.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use common::cluster::{signal, topics, Cluster};
use common::replicas::{name, produce_to};
use common::share::{ack_request, acquired, fetch_request, Acquired};
use es_kafka::codec::share_wire::DescribeShareGroupOffsetsResponseV1;
use es_kafka::shares::store::ShareFiles;
use es_test_support::wait::eventually;
use es_test_support::wire::{read_frame, request_bytes, size_prefixed, KafkaClient};
use kafka_protocol::messages::alter_share_group_offsets_request::{
    AlterShareGroupOffsetsRequestPartition, AlterShareGroupOffsetsRequestTopic,
};
use kafka_protocol::messages::create_topics_request::{CreatableReplicaAssignment, CreatableTopic};
use kafka_protocol::messages::delete_share_group_offsets_request::DeleteShareGroupOffsetsRequestTopic;
use kafka_protocol::messages::describe_share_group_offsets_request::{
    DescribeShareGroupOffsetsRequestGroup, DescribeShareGroupOffsetsRequestTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, StrBytes};
use uuid::Uuid;

const GROUP: &str = "admin-queue";
const TOPIC: &str = "jobs";
const COORDINATOR_NOT_AVAILABLE: i16 = 15;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn client(addr: &str) -> KafkaClient {
    KafkaClient::connect_with_timeout(addr, "share-admin-test", Duration::from_secs(60))
}

/// FindCoordinator v4 of `GROUP` (key type 0, as Kafka's share clients ask)
/// through `addr`: the coordinator's node id, if one is known.
fn coordinator(addr: &str) -> Option<i32> {
    let mut req = FindCoordinatorRequest::default();
    req.key_type = 0;
    req.coordinator_keys = vec![s(GROUP)];
    let r: FindCoordinatorResponse = client(addr).call(ApiKey::FindCoordinator, 4, &req);
    r.coordinators
        .first()
        .filter(|x| x.error_code == 0)
        .map(|x| x.node_id.0)
}

/// Creates `TOPIC` through `addr` with one replica per partition, partition
/// `p` on `nodes[p]`: the topic's error code.
fn create(addr: &str, nodes: &[i32]) -> i16 {
    let mut t = CreatableTopic::default();
    t.name = name(TOPIC);
    t.num_partitions = -1;
    t.replication_factor = -1;
    t.assignments = nodes
        .iter()
        .enumerate()
        .map(|(p, n)| {
            let mut a = CreatableReplicaAssignment::default();
            a.partition_index = p as i32;
            a.broker_ids = vec![BrokerId(*n)];
            a
        })
        .collect();
    let mut req = CreateTopicsRequest::default();
    req.topics = vec![t];
    req.timeout_ms = 30_000;
    let r: CreateTopicsResponse = client(addr).call(ApiKey::CreateTopics, 7, &req);
    r.topics[0].error_code
}

/// The leaders of `TOPIC`'s partitions as Metadata v12 from `addr` shows
/// them, by partition.
fn leaders(addr: &str) -> Vec<i32> {
    let mut t = metadata_request::MetadataRequestTopic::default();
    t.name = Some(name(TOPIC));
    let mut req = MetadataRequest::default();
    req.topics = Some(vec![t]);
    let r: MetadataResponse = client(addr).call(ApiKey::Metadata, 12, &req);
    let mut ps: Vec<(i32, i32)> = r
        .topics
        .first()
        .map(|t| {
            t.partitions
                .iter()
                .map(|p| (p.partition_index, p.leader_id.0))
                .collect()
        })
        .unwrap_or_default();
    ps.sort_unstable();
    ps.into_iter().map(|(_, l)| l).collect()
}

/// AlterShareGroupOffsets of `TOPIC` through `addr`, (partition, start)
/// pairs: the top-level code and each partition's, by partition.
fn alter(addr: &str, starts: &[(i32, i64)]) -> (i16, Vec<(i32, i16)>) {
    let mut t = AlterShareGroupOffsetsRequestTopic::default();
    t.topic_name = name(TOPIC);
    t.partitions = starts
        .iter()
        .map(|&(p, o)| {
            let mut x = AlterShareGroupOffsetsRequestPartition::default();
            x.partition_index = p;
            x.start_offset = o;
            x
        })
        .collect();
    let mut req = AlterShareGroupOffsetsRequest::default();
    req.group_id = GroupId(s(GROUP));
    req.topics = vec![t];
    let r: AlterShareGroupOffsetsResponse =
        client(addr).call(ApiKey::AlterShareGroupOffsets, 0, &req);
    let mut parts: Vec<(i32, i16)> = r
        .responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| (p.partition_index, p.error_code))
        .collect();
    parts.sort_unstable();
    (r.error_code, parts)
}

/// One partition as DescribeShareGroupOffsets v1 answers it.
#[derive(Debug, PartialEq, Eq)]
struct Offsets {
    partition: i32,
    start_offset: i64,
    lag: i64,
    error: i16,
}

/// DescribeShareGroupOffsets v1 of `GROUP` through `addr`: partitions
/// `parts` of `TOPIC`, or every recorded one (`None`), by partition. The
/// v1 response (Lag) is read with es's hand codec; kafka-protocol knows v0.
fn describe(addr: &str, parts: Option<&[i32]>) -> Vec<Offsets> {
    let mut g = DescribeShareGroupOffsetsRequestGroup::default();
    g.group_id = GroupId(s(GROUP));
    g.topics = parts.map(|ps| {
        let mut t = DescribeShareGroupOffsetsRequestTopic::default();
        t.topic_name = name(TOPIC);
        t.partitions = ps.to_vec();
        vec![t]
    });
    let mut req = DescribeShareGroupOffsetsRequest::default();
    req.groups = vec![g];
    let key = ApiKey::DescribeShareGroupOffsets;
    // The v1 request body is v0's.
    let frame = size_prefixed(&request_bytes(key, 1, 0, 9, "share-admin-test", &req));
    let mut c = client(addr);
    std::io::Write::write_all(&mut c.stream, &frame).expect("send");
    let body = read_frame(&mut c.stream).expect("a response");
    let mut buf = Bytes::from(body);
    let h = ResponseHeader::decode(&mut buf, key.response_header_version(1)).expect("header");
    assert_eq!(h.correlation_id, 9);
    let r = DescribeShareGroupOffsetsResponseV1::decode(&mut buf, 1).expect("v1 response");
    assert!(buf.is_empty(), "trailing bytes");
    let g = &r.response.groups[0];
    assert_eq!(g.error_code, 0, "{:?}", g.error_message);
    let mut lags = r.lags.iter();
    let mut out: Vec<Offsets> = g
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| Offsets {
            partition: p.partition_index,
            start_offset: p.start_offset,
            lag: *lags.next().expect("a lag per partition"),
            error: p.error_code,
        })
        .collect();
    out.sort_by_key(|o| o.partition);
    out
}

fn offsets(partition: i32, start_offset: i64, lag: i64) -> Offsets {
    Offsets {
        partition,
        start_offset,
        lag,
        error: 0,
    }
}

/// ShareFetch v1 of partition `p` as `member` (session epoch `epoch`):
/// (first, last, delivery count) of each AcquiredRecords.
fn share_fetch(c: &mut KafkaClient, tid: Uuid, p: i32, member: &str, epoch: i32) -> Vec<Acquired> {
    let r: ShareFetchResponse = c.call(
        ApiKey::ShareFetch,
        1,
        &fetch_request(GROUP, tid, p, member, epoch),
    );
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    let (code, got) = acquired(&r);
    assert_eq!(code, 0);
    got
}

/// ShareAcknowledge v1 of `[first, last]` of partition `p`, accepted: the
/// partition's code.
fn accept(
    c: &mut KafkaClient,
    tid: Uuid,
    p: i32,
    member: &str,
    epoch: i32,
    first: i64,
    last: i64,
) -> i16 {
    let req = ack_request(GROUP, tid, p, member, epoch, first, last, 1);
    let r: ShareAcknowledgeResponse = c.call(ApiKey::ShareAcknowledge, 1, &req);
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    r.responses[0].partitions[0].error_code
}

/// DeleteShareGroupOffsets of `TOPIC` through `addr`: (top level, topic).
fn delete_offsets(addr: &str) -> (i16, i16) {
    let mut t = DeleteShareGroupOffsetsRequestTopic::default();
    t.topic_name = name(TOPIC);
    let mut req = DeleteShareGroupOffsetsRequest::default();
    req.group_id = GroupId(s(GROUP));
    req.topics = vec![t];
    let r: DeleteShareGroupOffsetsResponse =
        client(addr).call(ApiKey::DeleteShareGroupOffsets, 0, &req);
    (
        r.error_code,
        r.responses.first().map_or(-1, |t| t.error_code),
    )
}

/// DeleteGroups v2 of `GROUP` through `addr`: the group's code.
fn delete_group(addr: &str) -> i16 {
    let mut req = DeleteGroupsRequest::default();
    req.groups_names = vec![GroupId(s(GROUP))];
    let r: DeleteGroupsResponse = client(addr).call(ApiKey::DeleteGroups, 2, &req);
    r.results[0].error_code
}

/// Whether node `dir` has share state files of partition `p` of `TOPIC`.
fn has_files(dir: &Path, p: i32) -> bool {
    let f = ShareFiles::new(dir, GROUP, TOPIC, p);
    f.journal.exists() || f.snapshot.exists()
}

#[test]
fn the_coordinator_alters_describes_and_deletes_share_state_on_the_leaders() {
    let dir = tempfile::tempdir().expect("tmp");
    let c = Cluster::start_with(dir.path(), 3, 3, &["--offsets-topic-num-partitions", "1"]);
    let raft_leader = c.leader();
    let node_dir = |id: i32| -> PathBuf { dir.path().join(format!("node-{id}")) };

    // The group's coordinator; the partitions: 0 and 1 led by the two
    // other nodes, 2 by the coordinator itself.
    let k = eventually(Duration::from_secs(60), "a group coordinator", || {
        coordinator(&c.addr(1))
    });
    let others: Vec<i32> = (1..=3).filter(|id| *id != k).collect();
    let (a, b) = (others[0], others[1]);
    assert_eq!(create(&c.addr(1), &[a, b, k]), 0);
    for id in 1..=3 {
        eventually(
            Duration::from_secs(60),
            "the topic's leaders everywhere",
            || (leaders(&c.addr(id)) == vec![a, b, k]).then_some(()),
        );
    }
    let tid = *topics(&c.addr(1)).get(TOPIC).expect("topic id");
    let lead = [a, b, k];
    for (p, leader) in lead.iter().enumerate() {
        for i in 0..10 {
            let r = produce_to(&c.addr(*leader), TOPIC, p as i32, &format!("job-{p}-{i}"));
            assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
        }
    }

    // Alter on the coordinator: every leader's share-partition starts
    // where it was told (the coordinator may still be loading its
    // partition of __consumer_offsets: NOT_COORDINATOR until then).
    let starts = [(0, 3), (1, 5), (2, 7)];
    let (top, parts) = eventually(Duration::from_secs(60), "an answered Alter", || {
        let r = alter(&c.addr(k), &starts);
        (r.0 == 0).then_some(r)
    });
    assert_eq!(top, 0);
    assert_eq!(parts, vec![(0, 0), (1, 0), (2, 0)]);
    for (p, leader) in lead.iter().enumerate() {
        for id in 1..=3 {
            assert_eq!(
                has_files(&node_dir(id), p as i32),
                id == *leader,
                "partition {p}'s share state on node {id} (leader {leader})"
            );
        }
    }
    let set = vec![offsets(0, 3, 7), offsets(1, 5, 5), offsets(2, 7, 3)];
    assert_eq!(describe(&c.addr(k), Some(&[0, 1, 2])), set);
    assert_eq!(describe(&c.addr(k), None), set, "every recorded partition");

    // A share consumer on partition 0's leader takes 3-9 and accepts 3-5.
    let member = "m1-000000000000000000";
    let mut sc = client(&c.addr(a));
    assert_eq!(share_fetch(&mut sc, tid, 0, member, 0), vec![(3, 9, 1)]);
    assert_eq!(accept(&mut sc, tid, 0, member, 1, 3, 5), 0);
    assert_eq!(
        describe(&c.addr(k), Some(&[0]))[0],
        offsets(0, 6, 4),
        "the start moved on the leader"
    );
    drop(sc);

    // DeleteShareGroupOffsets: gone on every leader; named partitions read
    // -1, and the group records none.
    assert_eq!(delete_offsets(&c.addr(k)), (0, 0));
    for (p, leader) in lead.iter().enumerate() {
        assert!(!has_files(&node_dir(*leader), p as i32), "partition {p}");
    }
    let absent = vec![offsets(0, -1, -1), offsets(1, -1, -1), offsets(2, -1, -1)];
    assert_eq!(describe(&c.addr(k), Some(&[0, 1, 2])), absent);
    assert_eq!(describe(&c.addr(k), None), vec![]);

    // Alter again, then DeleteGroups: the group and its state everywhere.
    assert_eq!(
        alter(&c.addr(k), &starts),
        (0, vec![(0, 0), (1, 0), (2, 0)])
    );
    assert!(has_files(&node_dir(a), 0) && has_files(&node_dir(b), 1));
    assert_eq!(delete_group(&c.addr(k)), 0);
    for (p, leader) in lead.iter().enumerate() {
        assert!(!has_files(&node_dir(*leader), p as i32), "partition {p}");
    }
    assert_eq!(describe(&c.addr(k), Some(&[0, 1, 2])), absent);
    assert_eq!(
        delete_group(&c.addr(k)),
        69,
        "GROUP_ID_NOT_FOUND: it is gone"
    );

    // A leader that does not answer (stopped, and not the quorum's leader,
    // so the group's document can still be written): its partition is
    // COORDINATOR_NOT_AVAILABLE for Alter, without state for Describe; the
    // others are served.
    let (stopped, sp) = if a != raft_leader { (a, 0) } else { (b, 1) };
    let pid = c.nodes[&stopped].pid();
    signal(pid, "STOP");
    let (top, parts) = alter(&c.addr(k), &starts);
    assert_eq!(top, 0);
    for (p, code) in parts {
        let want = if p == sp {
            COORDINATOR_NOT_AVAILABLE
        } else {
            0
        };
        assert_eq!(code, want, "partition {p} with node {stopped} stopped");
    }
    let d = describe(&c.addr(k), Some(&[0, 1, 2]));
    assert_eq!(d[sp as usize], offsets(sp, -1, -1));
    signal(pid, "CONT");
    // Running again, it is reached (once the metadata has it back).
    eventually(
        Duration::from_secs(60),
        "the stopped leader reached",
        || (alter(&c.addr(k), &starts).1 == vec![(0, 0), (1, 0), (2, 0)]).then_some(()),
    );
    assert_eq!(describe(&c.addr(k), Some(&[0, 1, 2])), set);
    for (_, n) in c.nodes.iter() {
        assert!(!n.log_text().contains("panicked"), "{}", n.log_text());
    }
}
