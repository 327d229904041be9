//! Share groups (KIP-932) against the real es-broker binary, over raw
//! requests: a member acquires and acknowledges, the broker is SIGKILLed and
//! restarted, then stopped cleanly and restarted. What was acknowledged is
//! never delivered again; what was acquired and not acknowledged comes back
//! with its delivery count raised (es journals acquisitions, so counts
//! survive a crash); DescribeShareGroupOffsets follows the start offset
//! across every restart.

mod common;

use std::time::Duration;

use common::cluster::topics;
use common::replicas::{create, name, produce};
use common::share::{ack_request, acquired, fetch_request, Acquired};
use es_kafka::kafka_protocol::messages::alter_share_group_offsets_request::{
    AlterShareGroupOffsetsRequestPartition, AlterShareGroupOffsetsRequestTopic,
};
use es_kafka::kafka_protocol::messages::describe_share_group_offsets_request::{
    DescribeShareGroupOffsetsRequestGroup, DescribeShareGroupOffsetsRequestTopic,
};
use es_kafka::kafka_protocol::messages::*;
use es_kafka::kafka_protocol::protocol::StrBytes;
use es_test_support::wire::KafkaClient;
use uuid::Uuid;

const GROUP: &str = "queue";
const TOPIC: &str = "jobs";

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn client(addr: &str) -> KafkaClient {
    KafkaClient::connect_with_timeout(addr, "share-test", Duration::from_secs(40))
}

/// One ShareFetch v1 of partition 0: (first, last, delivery count) of each
/// AcquiredRecords.
fn fetch(c: &mut KafkaClient, tid: Uuid, member: &str, epoch: i32) -> Vec<Acquired> {
    let r: ShareFetchResponse = c.call(
        ApiKey::ShareFetch,
        1,
        &fetch_request(GROUP, tid, 0, member, epoch),
    );
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    let (code, got) = acquired(&r);
    assert_eq!(code, 0);
    got
}

/// ShareAcknowledge v1 of `[first, last]` with one type: the partition's code.
fn acknowledge(
    c: &mut KafkaClient,
    tid: Uuid,
    member: &str,
    epoch: i32,
    first: i64,
    last: i64,
    kind: i8,
) -> i16 {
    let req = ack_request(GROUP, tid, 0, member, epoch, first, last, kind);
    let r: ShareAcknowledgeResponse = c.call(ApiKey::ShareAcknowledge, 1, &req);
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    r.responses[0].partitions[0].error_code
}

/// DescribeShareGroupOffsets v0 of partition 0: its start offset.
fn start_offset(addr: &str) -> i64 {
    let mut t = DescribeShareGroupOffsetsRequestTopic::default();
    t.topic_name = name(TOPIC);
    t.partitions = vec![0];
    let mut g = DescribeShareGroupOffsetsRequestGroup::default();
    g.group_id = GroupId(s(GROUP));
    g.topics = Some(vec![t]);
    let mut req = DescribeShareGroupOffsetsRequest::default();
    req.groups = vec![g];
    let r: DescribeShareGroupOffsetsResponse =
        client(addr).call(ApiKey::DescribeShareGroupOffsets, 0, &req);
    let p = &r.groups[0].topics[0].partitions[0];
    assert_eq!(p.error_code, 0, "{:?}", p.error_message);
    p.start_offset
}

#[test]
fn acknowledged_records_stay_done_and_acquired_ones_come_back_across_sigkill() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let b = common::start(&data, &[]);
    assert_eq!(create(&b.addr, TOPIC, 1, &[]), 0);
    for i in 0..20 {
        assert_eq!(produce(&b.addr, TOPIC, &format!("job-{i}")).0, 0);
    }
    let tid = *topics(&b.addr).get(TOPIC).expect("topic id");
    // The group's state starts at 0 (Kafka's default reset is latest).
    let mut p = AlterShareGroupOffsetsRequestPartition::default();
    p.partition_index = 0;
    p.start_offset = 0;
    let mut t = AlterShareGroupOffsetsRequestTopic::default();
    t.topic_name = name(TOPIC);
    t.partitions = vec![p];
    let mut req = AlterShareGroupOffsetsRequest::default();
    req.group_id = GroupId(s(GROUP));
    req.topics = vec![t];
    let r: AlterShareGroupOffsetsResponse =
        client(&b.addr).call(ApiKey::AlterShareGroupOffsets, 0, &req);
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    assert_eq!(r.responses[0].partitions[0].error_code, 0);

    // m1 takes 0-19 and accepts 0-4; then SIGKILL.
    let mut c = client(&b.addr);
    assert_eq!(
        fetch(&mut c, tid, "m1-000000000000000000", 0),
        vec![(0, 19, 1)]
    );
    assert_eq!(
        acknowledge(&mut c, tid, "m1-000000000000000000", 1, 0, 4, 1),
        0
    );
    drop(c);
    let data = b.kill();

    // After the crash: 0-4 never again; 5-19 again, each a second time.
    let b = common::start(&data, &[]);
    assert_eq!(start_offset(&b.addr), 5);
    let mut c = client(&b.addr);
    assert_eq!(
        fetch(&mut c, tid, "m2-000000000000000000", 0),
        vec![(5, 19, 2)]
    );
    // m2 rejects 5-6 (archived for good) and accepts 7-9; 10-19 stay held.
    assert_eq!(
        acknowledge(&mut c, tid, "m2-000000000000000000", 1, 5, 6, 3),
        0
    );
    assert_eq!(
        acknowledge(&mut c, tid, "m2-000000000000000000", 2, 7, 9, 1),
        0
    );
    drop(c);
    let log = b.stop();
    assert!(!log.contains("panicked"), "{log}");

    // After a clean stop: 10-19 come back a third time, nothing below.
    let b = common::start(&data, &[]);
    assert_eq!(start_offset(&b.addr), 10);
    let mut c = client(&b.addr);
    assert_eq!(
        fetch(&mut c, tid, "m3-000000000000000000", 0),
        vec![(10, 19, 3)]
    );
    assert_eq!(
        acknowledge(&mut c, tid, "m3-000000000000000000", 1, 10, 19, 1),
        0
    );
    assert_eq!(start_offset(&b.addr), 20);
    drop(c);
    let data = b.kill();
    let b = common::start(&data, &[]);
    assert_eq!(
        start_offset(&b.addr),
        20,
        "the last acknowledgement survived"
    );
    let mut c = client(&b.addr);
    assert_eq!(fetch(&mut c, tid, "m4-000000000000000000", 0), vec![]);
    b.stop();
}
