//! Tests of partition reassignments: moving, reordering and shrinking,
//! completion through AlterPartition, cancelling, listing, and Kafka's
//! error codes.

use super::super::test_util::{partitions, Log};
use super::super::*;
use crate::records::{PartitionResult, Reassignment, TopicPartitions};

fn reassign(
    l: &mut Log,
    topic: &str,
    partition: i32,
    replicas: Option<Vec<BrokerId>>,
) -> PartitionResult {
    let (r, _) = l.apply(MetaRequest::AlterReassignments {
        partitions: vec![Reassignment {
            topic: topic.into(),
            partition,
            replicas,
        }],
    });
    partitions(r).remove(0)
}

#[test]
fn a_move_completes_when_the_new_replica_joins_the_isr_and_the_leader_hands_over() {
    let mut l = Log::with_brokers(2);
    l.topic("t", vec![vec![1]]);
    let r = reassign(&mut l, "t", 0, Some(vec![2]));
    assert_eq!((r.error_code, r.leader), (0, 1));
    let p = l.part("t", 0).clone();
    assert_eq!(
        (p.replicas, p.adding, p.removing, p.isr, p.leader_epoch),
        (vec![2, 1], vec![2], vec![1], vec![1], 0)
    );
    assert_eq!(
        l.img.reassignments(None),
        vec![OngoingReassignment {
            topic: "t".into(),
            partition: 0,
            replicas: vec![2, 1],
            adding: vec![2],
            removing: vec![1],
        }]
    );
    // The leader adds the new replica to the ISR: that completes it.
    let e1 = l.epochs[&1];
    let (r, ev) = l.apply(MetaRequest::AlterPartition {
        broker_id: 1,
        broker_epoch: e1,
        partitions: vec![l.isr_item("t", 0, &[1, 2])],
    });
    let MetaResponse::AlterPartition { results } = r else {
        panic!("{r:?}")
    };
    assert_eq!(
        (
            results[0].error_code,
            results[0].leader,
            results[0].isr.clone()
        ),
        (code::NEW_LEADER_ELECTED, 2, vec![2])
    );
    assert_eq!(
        ev,
        vec![MetaEvent::Leadership {
            name: "t".into(),
            partitions: vec![0]
        }]
    );
    let p = l.part("t", 0);
    assert_eq!(
        (p.replicas.clone(), p.isr.clone(), p.leader, p.leader_epoch),
        (vec![2], vec![2], 2, 1)
    );
    assert!(p.adding.is_empty() && p.removing.is_empty());
    assert!(l.img.reassignments(None).is_empty());
}

#[test]
fn adding_a_replica_completes_without_moving_the_leader() {
    let mut l = Log::with_brokers(2);
    l.topic("t", vec![vec![1]]);
    assert_eq!(reassign(&mut l, "t", 0, Some(vec![1, 2])).error_code, 0);
    assert_eq!(l.part("t", 0).adding, vec![2]);
    let s = l.alter(1, l.isr_item("t", 0, &[1, 2]));
    assert_eq!((s.error_code, s.leader, s.leader_epoch), (0, 1, 0));
    assert_eq!(l.part("t", 0).replicas, vec![1, 2]);
    assert!(l.img.reassignments(None).is_empty());
}

#[test]
fn reordering_or_dropping_in_sync_replicas_completes_at_once() {
    let mut l = Log::with_brokers(3);
    l.topic("t", vec![vec![1, 2]]);
    l.topic("u", vec![vec![1, 2, 3]]);
    assert_eq!(reassign(&mut l, "t", 0, Some(vec![2, 1])).error_code, 0);
    let p = l.part("t", 0);
    assert_eq!(
        (
            p.replicas.clone(),
            p.leader,
            p.leader_epoch,
            p.partition_epoch
        ),
        (vec![2, 1], 1, 0, 1)
    );
    assert_eq!(reassign(&mut l, "u", 0, Some(vec![3, 2])).error_code, 0);
    let p = l.part("u", 0);
    assert_eq!(
        (p.replicas.clone(), p.isr.clone(), p.leader, p.leader_epoch),
        (vec![3, 2], vec![2, 3], 3, 1)
    );
    assert!(l.img.reassignments(None).is_empty());
}

#[test]
fn cancelling_drops_the_replicas_being_added() {
    let mut l = Log::with_brokers(3);
    l.topic("t", vec![vec![1], vec![1]]);
    assert_eq!(reassign(&mut l, "t", 0, Some(vec![2])).error_code, 0);
    assert_eq!(reassign(&mut l, "t", 1, Some(vec![3])).error_code, 0);
    assert_eq!(
        l.img
            .reassignments(Some(&[TopicPartitions {
                topic: "t".into(),
                partitions: vec![1, 5]
            }]))
            .len(),
        1
    );
    let le = l.part("t", 0).leader_epoch;
    let r = reassign(&mut l, "t", 0, None);
    assert_eq!((r.error_code, r.leader), (0, 1));
    let p = l.part("t", 0);
    assert_eq!((p.replicas.clone(), p.isr.clone()), (vec![1], vec![1]));
    assert!(p.adding.is_empty() && p.removing.is_empty());
    assert_eq!(p.leader_epoch, le + 1, "a replica left the list");
    assert_eq!(
        reassign(&mut l, "t", 0, None).error_code,
        code::NO_REASSIGNMENT_IN_PROGRESS
    );
}

#[test]
fn a_cancel_that_needs_an_unclean_election_is_refused_unless_the_topic_allows_it() {
    let mut l = Log::with_brokers(3);
    l.topic("t", vec![vec![1]]);
    assert_eq!(reassign(&mut l, "t", 0, Some(vec![2, 3])).error_code, 0);
    assert_eq!(l.alter(1, l.isr_item("t", 0, &[1, 2])).error_code, 0);
    l.fence(1);
    let p = l.part("t", 0);
    assert_eq!((p.leader, p.isr.clone()), (2, vec![2]));
    assert_eq!(
        reassign(&mut l, "t", 0, None).error_code,
        code::INVALID_REPLICA_ASSIGNMENT
    );
    l.topic_config("t", UNCLEAN_LEADER_ELECTION_ENABLE, "true");
    assert_eq!(reassign(&mut l, "t", 0, None).error_code, 0);
    let p = l.part("t", 0);
    assert_eq!(
        (p.replicas.clone(), p.isr.clone(), p.leader),
        (vec![1], vec![1], NO_LEADER)
    );
}

#[test]
fn a_removed_replica_that_is_fenced_lets_the_reassignment_complete() {
    let mut l = Log::with_brokers(3);
    l.topic("t", vec![vec![1, 2]]);
    assert_eq!(reassign(&mut l, "t", 0, Some(vec![2, 3])).error_code, 0);
    assert_eq!(
        l.alter(1, l.isr_item("t", 0, &[1, 2, 3])).error_code,
        code::NEW_LEADER_ELECTED
    );
    let p = l.part("t", 0);
    assert_eq!(
        (p.replicas.clone(), p.isr.clone(), p.leader),
        (vec![2, 3], vec![2, 3], 2)
    );
}

#[test]
fn bad_reassignments_answer_kafkas_codes_and_change_nothing() {
    let mut l = Log::with_brokers(2);
    l.topic("t", vec![vec![1]]);
    let before = l.img.clone();
    let cases = [
        ("nope", 0, Some(vec![1]), code::UNKNOWN_TOPIC_OR_PARTITION),
        ("t", 3, Some(vec![1]), code::UNKNOWN_TOPIC_OR_PARTITION),
        ("t", -1, None, code::UNKNOWN_TOPIC_OR_PARTITION),
        ("t", 0, Some(vec![]), code::INVALID_REPLICA_ASSIGNMENT),
        ("t", 0, Some(vec![2, 2]), code::INVALID_REPLICA_ASSIGNMENT),
        ("t", 0, Some(vec![1, 7]), code::INVALID_REPLICA_ASSIGNMENT),
        ("t", 0, None, code::NO_REASSIGNMENT_IN_PROGRESS),
    ];
    for (topic, partition, replicas, want) in cases {
        let r = reassign(&mut l, topic, partition, replicas.clone());
        assert_eq!(r.error_code, want, "{topic}:{partition} {replicas:?}");
        assert!(r.message.is_some());
    }
    assert_eq!(l.img, before);
}
