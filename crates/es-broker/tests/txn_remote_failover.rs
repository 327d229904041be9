//! Transactional offsets held by a group's coordinator for a transaction
//! another broker coordinates survive the loss of the group's coordinator,
//! with real es-broker processes on loopback.
//!
//! Two transactions coordinated by node A each send TxnOffsetCommit for a
//! group coordinated by node B ≠ A (the offsets wait there, in the metadata
//! quorum, for the transaction's marker). B is killed with SIGKILL; once the
//! groups' `__consumer_offsets` partitions have new leaders, the new group
//! coordinator holds the pending offsets (OffsetFetch with require_stable
//! answers UNSTABLE_OFFSET_COMMIT), EndTxn(commit) of the first makes its
//! offset the group's committed offset, and EndTxn(abort) of the second
//! drops its offset (nothing committed, nothing pending).
//!
//! When one node coordinates both the transaction and the group, the
//! offsets wait in the same place (the metadata quorum, under the group):
//! the group's `__consumer_offsets` partition reassigned away from that
//! node before EndTxn, its new coordinator holds them pending and the
//! marker of the (unmoved) transaction coordinator settles them there.
//!
//! Waits are bounded polls on conditions.

mod common;

use std::time::Duration;

use common::cluster::Cluster;
use common::replicas::{create, name, reassign, shown};
use common::txn::{agreed_coordinator, end_txn, init_producer_id, GROUP_KEY, TRANSACTION_KEY};
use es_test_support::wait::eventually;
use es_test_support::wire::KafkaClient;
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const TOPIC: &str = "remote-in";
const UNSTABLE_OFFSET_COMMIT: i16 = 88;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn client(addr: &str) -> KafkaClient {
    KafkaClient::connect_with_timeout(addr, "txn-remote-test", Duration::from_secs(60))
}

fn add_offsets(addr: &str, id: &str, pid: i64, epoch: i16, group: &str) -> i16 {
    let mut req = AddOffsetsToTxnRequest::default();
    req.transactional_id = TransactionalId(s(id));
    req.producer_id = ProducerId(pid);
    req.producer_epoch = epoch;
    req.group_id = GroupId(s(group));
    let r: AddOffsetsToTxnResponse = client(addr).call(ApiKey::AddOffsetsToTxn, 3, &req);
    r.error_code
}

/// TxnOffsetCommit (v3, no membership) of `offset` for partition 0 of
/// `TOPIC`: the partition's error code.
fn txn_offset_commit(addr: &str, id: &str, pid: i64, epoch: i16, group: &str, offset: i64) -> i16 {
    let mut p = TxnOffsetCommitRequestPartition::default();
    p.partition_index = 0;
    p.committed_offset = offset;
    p.committed_leader_epoch = -1;
    p.committed_metadata = Some(s("txn"));
    let mut t = TxnOffsetCommitRequestTopic::default();
    t.name = name(TOPIC);
    t.partitions = vec![p];
    let mut req = TxnOffsetCommitRequest::default();
    req.transactional_id = TransactionalId(s(id));
    req.group_id = GroupId(s(group));
    req.producer_id = ProducerId(pid);
    req.producer_epoch = epoch;
    req.generation_id = -1;
    req.member_id = s("");
    req.topics = vec![t];
    let r: TxnOffsetCommitResponse = client(addr).call(ApiKey::TxnOffsetCommit, 3, &req);
    r.topics[0].partitions[0].error_code
}

/// OffsetFetch v8 (require_stable) of partition 0 of `TOPIC` for `group`:
/// (group error, partition error, committed offset).
fn fetch(addr: &str, group: &str) -> (i16, i16, i64) {
    let mut t = OffsetFetchRequestTopics::default();
    t.name = name(TOPIC);
    t.partition_indexes = vec![0];
    let mut g = OffsetFetchRequestGroup::default();
    g.group_id = GroupId(s(group));
    g.topics = Some(vec![t]);
    let mut req = OffsetFetchRequest::default();
    req.groups = vec![g];
    req.require_stable = true;
    let r: OffsetFetchResponse = client(addr).call(ApiKey::OffsetFetch, 8, &req);
    let g = &r.groups[0];
    let p = g.topics.first().and_then(|t| t.partitions.first());
    (
        g.error_code,
        p.map_or(-1, |p| p.error_code),
        p.map_or(-1, |p| p.committed_offset),
    )
}

/// A transactional id whose coordinator is `coord` (searched by name).
fn id_on(c: &Cluster, prefix: &str, coord: i32) -> String {
    (0..200)
        .map(|i| format!("{prefix}-{i}"))
        .find(|id| agreed_coordinator(c, TRANSACTION_KEY, id, None) == coord)
        .expect("a transactional id on the node")
}

/// A group whose coordinator is `coord` (searched by name).
fn group_on(c: &Cluster, prefix: &str, coord: i32) -> String {
    (0..200)
        .map(|i| format!("{prefix}-{i}"))
        .find(|g| agreed_coordinator(c, GROUP_KEY, g, None) == coord)
        .expect("a group on the node")
}

/// Three nodes with `offsets_partitions` partitions of `__consumer_offsets`
/// and three of `__transaction_state`, both internal topics created (by
/// the first lookups) and in sync on three replicas, and topic [`TOPIC`].
fn three_nodes(dir: &std::path::Path, offsets_partitions: &str) -> Cluster {
    let c = Cluster::start_with(
        dir,
        3,
        3,
        &[
            "--offsets-topic-num-partitions",
            offsets_partitions,
            "--transaction-state-log-num-partitions",
            "3",
        ],
    );
    c.leader();
    // Right after the quorum forms, a node may not be registered yet
    // (INVALID_REPLICATION_FACTOR, 38): wait until all three are.
    let created = eventually(Duration::from_secs(30), "three brokers to place on", || {
        let e = create(&c.addr(1), TOPIC, 3, &[]);
        (e != 38).then_some(e)
    });
    assert_eq!(created, 0);
    agreed_coordinator(&c, TRANSACTION_KEY, "probe", None);
    agreed_coordinator(&c, GROUP_KEY, "probe", None);
    for t in ["__consumer_offsets", "__transaction_state"] {
        eventually(Duration::from_secs(60), "internal topic in sync", || {
            let s = shown(&c.addr(1), t);
            (s.2.len() == 3 && s.3.len() == 3).then_some(())
        });
    }
    c
}

#[test]
fn pending_offsets_move_with_the_group_coordinator_and_are_settled_by_the_marker() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut c = three_nodes(dir.path(), "3");
    let a = agreed_coordinator(&c, TRANSACTION_KEY, "remote-commit-0", None);
    let commit_id = id_on(&c, "remote-commit", a);
    let abort_id = id_on(&c, "remote-abort", a);
    let b = *c.nodes.keys().find(|n| **n != a).expect("another node");
    let commit_group = group_on(&c, "remote-committed", b);
    let abort_group = group_on(&c, "remote-aborted", b);

    // Both transactions take an offset at B, the groups' coordinator.
    let mut txns = Vec::new();
    for (id, group, offset) in [
        (&commit_id, &commit_group, 42),
        (&abort_id, &abort_group, 7),
    ] {
        let (e, pid, epoch) = init_producer_id(&c.addr(a), id, 120_000);
        assert_eq!(e, 0, "InitProducerId {id}");
        assert_eq!(add_offsets(&c.addr(a), id, pid, epoch, group), 0);
        // B may not have applied its own leadership yet: NOT_COORDINATOR
        // until it has, which clients retry.
        eventually(Duration::from_secs(30), "TxnOffsetCommit at B", || {
            (txn_offset_commit(&c.addr(b), id, pid, epoch, group, offset) == 0).then_some(())
        });
        assert_eq!(
            fetch(&c.addr(b), group),
            (0, UNSTABLE_OFFSET_COMMIT, -1),
            "pending at B"
        );
        txns.push((id.clone(), group.clone(), pid, epoch, offset));
    }

    // B dies before the transactions end.
    c.nodes.remove(&b).expect("B").kill();
    for (_, group, ..) in &txns {
        let next = agreed_coordinator(&c, GROUP_KEY, group, Some(b));
        // Settled by WriteTxnMarkers to `next`, or (next == A) by the
        // transaction coordinator itself.
        println!("group {group}: coordinator {b} killed, now {next}; transactions on {a}");
        // The new coordinator loaded the offsets still pending.
        eventually(
            Duration::from_secs(60),
            "pending at the new coordinator",
            || (fetch(&c.addr(next), group) == (0, UNSTABLE_OFFSET_COMMIT, -1)).then_some(()),
        );
    }
    assert_eq!(agreed_coordinator(&c, TRANSACTION_KEY, &commit_id, None), a);

    for (id, group, pid, epoch, offset) in &txns {
        let commit = id == &commit_id;
        assert_eq!(
            end_txn(&c.addr(a), id, *pid, *epoch, commit),
            0,
            "EndTxn {id}"
        );
        let want = if commit { *offset } else { -1 };
        let got = eventually(Duration::from_secs(90), "the marker settled them", || {
            let next = agreed_coordinator(&c, GROUP_KEY, group, Some(b));
            let (e, pe, o) = fetch(&c.addr(next), group);
            (e == 0 && pe == 0).then_some(o)
        });
        assert_eq!(got, want, "{group} after EndTxn(commit={commit})");
    }
    for (_, p) in std::mem::take(&mut c.nodes) {
        p.stop();
    }
}

#[test]
fn offsets_of_a_transaction_and_group_coordinated_together_follow_the_group_when_it_moves() {
    let dir = tempfile::tempdir().expect("tmp");
    // One __consumer_offsets partition, so that moving it moves the group.
    let mut c = three_nodes(dir.path(), "1");
    let group = "together";
    let id = "together-txn";
    let a = agreed_coordinator(&c, TRANSACTION_KEY, id, None);
    // The group's partition on A alone first, so that A coordinates both
    // (where placement put the leaders is not this test's business).
    assert_eq!(reassign(&c.addr(a), "__consumer_offsets", &[a]), 0);
    eventually(Duration::from_secs(60), "A coordinates the group", || {
        (agreed_coordinator(&c, GROUP_KEY, group, None) == a).then_some(())
    });
    let (e, pid, epoch) = init_producer_id(&c.addr(a), id, 120_000);
    assert_eq!(e, 0, "InitProducerId {id}");
    assert_eq!(add_offsets(&c.addr(a), id, pid, epoch, group), 0);
    eventually(Duration::from_secs(30), "TxnOffsetCommit at A", || {
        (txn_offset_commit(&c.addr(a), id, pid, epoch, group, 42) == 0).then_some(())
    });
    assert_eq!(fetch(&c.addr(a), group), (0, UNSTABLE_OFFSET_COMMIT, -1));

    // The group's partition moves to the two other nodes; A keeps the
    // transaction.
    let others: Vec<i32> = c.nodes.keys().copied().filter(|n| *n != a).collect();
    assert_eq!(reassign(&c.addr(a), "__consumer_offsets", &others), 0);
    let next = agreed_coordinator(&c, GROUP_KEY, group, Some(a));
    println!("group {group}: coordinator {a}, now {next}; transaction {id} stays on {a}");
    eventually(
        Duration::from_secs(60),
        "pending at the new coordinator",
        || (fetch(&c.addr(next), group) == (0, UNSTABLE_OFFSET_COMMIT, -1)).then_some(()),
    );
    assert_eq!(agreed_coordinator(&c, TRANSACTION_KEY, id, None), a);
    assert_eq!(end_txn(&c.addr(a), id, pid, epoch, true), 0, "EndTxn");
    let got = eventually(Duration::from_secs(60), "the marker settled them", || {
        let (e, pe, o) = fetch(&c.addr(next), group);
        (e == 0 && pe == 0).then_some(o)
    });
    assert_eq!(got, 42);
    for (_, p) in std::mem::take(&mut c.nodes) {
        p.stop();
    }
}
