//! Tests of the mapping between the transaction coordinator and the
//! metadata log, and of a single node's path through it (a pre-quorum
//! `producers.journal` imported once; the coordinator moving onto
//! `__transaction_state` when it is created).

use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::handlers::wire_client::open;
use crate::txn::state::{TopicPartition, TxnState};
use crate::txn::{TxnConfig, TxnCoordinator};

/// No partition is open (a transactional id's first InitProducerId needs none).
struct NoPartitions;

impl crate::txn::Partitions for NoPartitions {
    fn partition(&self, _: &str, _: i32) -> Option<crate::partition_log::PartitionLog> {
        None
    }
    fn for_each_partition(&self, _: &mut dyn FnMut(&crate::partition_log::PartitionLog)) {}
}

fn rec() -> TxnRecord {
    TxnRecord {
        producer_id: 7,
        prev_producer_id: -1,
        producer_epoch: 3,
        last_producer_epoch: 2,
        timeout_ms: 60_000,
        state: TxnState::Ongoing,
        partitions: [TopicPartition::new("t", 1)].into_iter().collect(),
        groups: ["g".to_string()].into_iter().collect(),
        offsets: Vec::new(),
        start_ms: 10,
        last_update_ms: 11,
    }
}

#[test]
fn journal_entries_map_to_state_changes_and_back() {
    let put = state_change(&LogEntry::Txn {
        id: "a".into(),
        txn: rec(),
    });
    match put {
        Some(StateChange::Put { space, key, value }) => {
            assert_eq!((space.as_str(), key.as_str()), (TXNS_SPACE, "a"));
            assert_eq!(record_of("a", &value), Some(rec()));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        state_change(&LogEntry::Remove { id: "a".into() }),
        Some(StateChange::Delete {
            space: TXNS_SPACE.into(),
            key: "a".into()
        })
    );
    assert_eq!(state_change(&LogEntry::ReservePids { until: 5 }), None);
    assert_eq!(record_of("a", &json!({"producer_id": "x"})), None);
    let w = state_write(
        2,
        TxnFence {
            partition: 4,
            leader_epoch: 9,
        },
        &[LogEntry::Remove { id: "a".into() }],
    );
    match w {
        MetaRequest::CoordinatorState(w) => {
            assert_eq!(
                w.fence,
                LeaderFence {
                    topic: TRANSACTION_STATE_TOPIC.into(),
                    partition: 4,
                    broker_id: 2,
                    leader_epoch: 9
                }
            );
            assert_eq!(w.changes.len(), 1);
        }
        other => panic!("{other:?}"),
    }
}

fn broker(id: i32) -> serde_json::Value {
    json!({"id": id, "incarnation_id": "x", "epoch": 1, "endpoints": [], "rack": null, "fenced": false})
}

fn partition(leader: i32, epoch: i32) -> serde_json::Value {
    json!({"replicas": [1, 2, 3], "isr": [1, 2, 3], "leader": leader, "leader_epoch": epoch, "partition_epoch": 0})
}

#[test]
fn placement_follows_the_leaders_of_transaction_state() {
    let mut img: MetaImage = serde_json::from_value(json!({
        "cluster_id": null, "brokers": {"1": broker(1)}, "retired": [], "topics": {},
        "broker_configs": {}, "next_producer_id": 0
    }))
    .expect("image");
    assert_eq!(placement(&img, 1), Placement::without_topic(true));
    img.brokers
        .insert(2, serde_json::from_value(broker(2)).expect("broker"));
    assert_eq!(placement(&img, 1), Placement::without_topic(false));
    img.topics.insert(
        TRANSACTION_STATE_TOPIC.into(),
        serde_json::from_value(json!({
            "id": "00000000-0000-0000-0000-000000000001",
            "name": TRANSACTION_STATE_TOPIC,
            "partitions": [partition(1, 4), partition(2, 7)],
            "configs": {}
        }))
        .expect("topic"),
    );
    let p = placement(&img, 2);
    assert_eq!(p.partitions, 2);
    assert_eq!(p.leaders[&0], (4, false));
    assert_eq!(p.leaders[&1], (7, true));
    let id = (0..100)
        .map(|i| format!("id-{i}"))
        .find(|k| crate::broker::key_partition(k, 2) == 1)
        .expect("an id on partition 1");
    assert_eq!(crate::broker::key_partition(&id, p.partitions), 1);
    assert_eq!(
        p.fence_at(1),
        Some(TxnFence {
            partition: 1,
            leader_epoch: 7
        })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pre_quorum_journal_is_imported_once_and_the_coordinator_moves_onto_its_topic() {
    let dir = tempfile::tempdir().expect("tmp");
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).expect("mkdir");
    let (pid, epoch) = {
        let c = TxnCoordinator::open(
            Arc::new(es_storage::RealFs),
            &data,
            TxnConfig::default(),
            es_storage::clock::system(),
        )
        .expect("open");
        let got = c
            .init_producer_id(&NoPartitions, Some("legacy"), 60_000, None)
            .expect("init");
        c.close().expect("fold");
        got
    };
    let b = open(dir.path()).await;
    assert!(b.txn().in_quorum());
    let image = b.image().expect("image");
    assert!(image
        .coordinator_space(TXNS_SPACE)
        .is_some_and(|m| m.contains_key("legacy")));
    assert!(b.txn().journaled_txns().is_empty(), "forgotten locally");
    assert_eq!(b.txn().describe("legacy").map(|r| r.producer_id), Ok(pid));
    // The topic appears: the coordinator reloads under its leader epoch
    // and goes on with the same ids.
    b.transaction_state_topic().await.expect("topic");
    let b2 = b.clone();
    let again = tokio::task::spawn_blocking(move || {
        b2.txn()
            .init_producer_id(b2.as_ref(), Some("legacy"), 60_000, None)
    })
    .await
    .expect("join");
    assert_eq!(again, Ok((pid, epoch + 1)));
    b.stop_metadata().await;
    drop(b);
    let b = open(dir.path()).await;
    assert_eq!(
        b.txn().describe("legacy").map(|r| r.producer_epoch),
        Ok(epoch + 1),
        "from the metadata log, not imported again"
    );
}
