//! Tests of the replication rules: AlterPartition and its error codes,
//! unclean leader election, controlled shutdown, ElectLeaders, the
//! preferred-leader imbalance, the default replication factor, and that
//! old entries and images still apply and load.

use std::collections::BTreeMap;

use super::super::test_util::{partitions, Log};
use super::super::*;
use crate::records::{
    AlterPartitionItem, ElectionType, IsrMember, PartitionChange, PartitionState, Reassignment,
    TopicPartitions,
};

fn elect(l: &mut Log, election: ElectionType, topic: &str, ps: &[i32]) -> Vec<PartitionResult> {
    partitions(
        l.apply(MetaRequest::ElectLeaders {
            election,
            partitions: Some(vec![TopicPartitions {
                topic: topic.into(),
                partitions: ps.to_vec(),
            }]),
        })
        .0,
    )
}

fn shutdown(l: &mut Log, id: BrokerId) -> (MetaResponse, Vec<MetaEvent>) {
    let broker_epoch = l.epochs[&id];
    l.apply(MetaRequest::ControlledShutdown {
        broker_id: id,
        broker_epoch,
    })
}

use crate::records::PartitionResult;

#[test]
fn alter_partition_changes_the_isr_and_the_partition_epoch_not_the_leader_epoch() {
    let mut l = Log::with_brokers(3);
    l.topic("t", vec![vec![1, 2, 3]]);
    let e1 = l.epochs[&1];
    let item = l.isr_item("t", 0, &[1, 2]);
    let (r, ev) = l.apply(MetaRequest::AlterPartition {
        broker_id: 1,
        broker_epoch: e1,
        partitions: vec![item],
    });
    assert_eq!(
        r,
        MetaResponse::AlterPartition {
            results: vec![PartitionState {
                topic_id: "id-t".into(),
                partition: 0,
                error_code: code::NONE,
                message: None,
                leader: 1,
                leader_epoch: 0,
                isr: vec![1, 2],
                partition_epoch: 1,
                leader_recovery: LeaderRecovery::Recovered,
            }]
        }
    );
    assert_eq!(
        ev,
        vec![MetaEvent::Leadership {
            name: "t".into(),
            partitions: vec![0]
        }]
    );
    // The follower caught up: back in.
    let s = l.alter(1, l.isr_item("t", 0, &[1, 2, 3]));
    assert_eq!((s.error_code, s.leader_epoch, s.partition_epoch), (0, 0, 2));
    assert_eq!(l.part("t", 0).isr, vec![1, 2, 3]);
    // The same ISR again changes nothing and answers the state.
    let (r, ev) = l.apply(MetaRequest::AlterPartition {
        broker_id: 1,
        broker_epoch: e1,
        partitions: vec![l.isr_item("t", 0, &[1, 2, 3])],
    });
    assert!(ev.is_empty());
    let MetaResponse::AlterPartition { results } = r else {
        panic!("{r:?}")
    };
    assert_eq!((results[0].error_code, results[0].partition_epoch), (0, 2));
}

#[test]
fn alter_partition_refusals_answer_kafkas_codes_and_change_nothing() {
    let mut l = Log::with_brokers(3);
    l.topic("t", vec![vec![1, 2, 3]]);
    let e1 = l.epochs[&1];
    let before = l.img.clone();
    // The whole request: a stale or unknown broker epoch.
    for (broker_id, broker_epoch) in [(1, e1 - 1), (9, 1)] {
        let (r, ev) = l.apply(MetaRequest::AlterPartition {
            broker_id,
            broker_epoch,
            partitions: vec![l.isr_item("t", 0, &[1])],
        });
        assert!(
            matches!(
                r,
                MetaResponse::Error {
                    error_code: code::STALE_BROKER_EPOCH,
                    ..
                }
            ),
            "{r:?}"
        );
        assert!(ev.is_empty());
    }
    let base = l.isr_item("t", 0, &[1, 2]);
    let with = |f: &dyn Fn(&mut AlterPartitionItem)| {
        let mut it = base.clone();
        f(&mut it);
        it
    };
    let cases: Vec<(BrokerId, AlterPartitionItem, i16)> = vec![
        (
            1,
            with(&|i| i.topic_id = "nope".into()),
            code::UNKNOWN_TOPIC_ID,
        ),
        (
            1,
            with(&|i| i.partition = 5),
            code::UNKNOWN_TOPIC_OR_PARTITION,
        ),
        (
            1,
            with(&|i| i.partition = -1),
            code::UNKNOWN_TOPIC_OR_PARTITION,
        ),
        (1, with(&|i| i.leader_epoch = 1), code::NOT_CONTROLLER),
        (1, with(&|i| i.partition_epoch = 1), code::NOT_CONTROLLER),
        // Not the leader: Kafka answers INVALID_REQUEST.
        (2, base.clone(), code::INVALID_REQUEST),
        // Not a set of replicas, or without the leader.
        (1, l.isr_item("t", 0, &[1, 4]), code::INVALID_REQUEST),
        (1, l.isr_item("t", 0, &[1, 1]), code::INVALID_REQUEST),
        (1, l.isr_item("t", 0, &[2, 3]), code::INVALID_REQUEST),
        (1, l.isr_item("t", 0, &[]), code::INVALID_REQUEST),
        // Recovering with more than the leader; recovered to recovering.
        (
            1,
            with(&|i| i.leader_recovery = LeaderRecovery::Recovering),
            code::INVALID_REQUEST,
        ),
        (
            1,
            {
                let mut i = l.isr_item("t", 0, &[1]);
                i.leader_recovery = LeaderRecovery::Recovering;
                i
            },
            code::INVALID_REQUEST,
        ),
        // A member at another broker epoch.
        (
            1,
            with(&|i| {
                i.new_isr[1] = IsrMember {
                    broker_id: 2,
                    broker_epoch: 12345,
                }
            }),
            code::INELIGIBLE_REPLICA,
        ),
    ];
    for (broker, item, want) in cases {
        let s = l.alter(broker, item.clone());
        assert_eq!(s.error_code, want, "{item:?}: {s:?}");
        assert!(s.message.is_some());
    }
    l.index = 100;
    let mut after = l.img.clone();
    after.brokers = before.brokers.clone();
    assert_eq!(after, before, "refused entries change nothing");

    // An older partition epoch.
    assert_eq!(l.alter(1, l.isr_item("t", 0, &[1, 2])).error_code, 0);
    let mut stale = l.isr_item("t", 0, &[1]);
    stale.partition_epoch -= 1;
    assert_eq!(l.alter(1, stale).error_code, code::INVALID_UPDATE_VERSION);
    // Fenced and shutting-down members are ineligible.
    l.fence(3);
    let s = l.alter(1, l.isr_item("t", 0, &[1, 2, 3]));
    assert_eq!(s.error_code, code::INELIGIBLE_REPLICA, "{s:?}");
    assert!(s.message.unwrap().contains("fenced"));
    shutdown(&mut l, 2);
    let s = l.alter(1, l.isr_item("t", 0, &[1, 2]));
    assert_eq!(s.error_code, code::INELIGIBLE_REPLICA);
    assert!(s.message.unwrap().contains("shutting down"));
}

#[test]
fn alter_partition_with_an_old_leader_epoch_is_fenced() {
    let mut l = Log::with_brokers(2);
    l.topic("t", vec![vec![1, 2]]);
    let old = l.isr_item("t", 0, &[1, 2]);
    l.fence(1);
    assert_eq!((l.part("t", 0).leader, l.part("t", 0).leader_epoch), (2, 1));
    let mut from_2 = old.clone();
    from_2.new_isr.truncate(1);
    from_2.new_isr[0].broker_id = 2;
    assert_eq!(l.alter(2, from_2).error_code, code::FENCED_LEADER_EPOCH);
    // The old leader, fenced but registered, at the current epochs.
    assert_eq!(
        l.alter(1, l.isr_item("t", 0, &[2])).error_code,
        code::INVALID_REQUEST
    );
}

#[test]
fn last_isr_member_lost_elects_uncleanly_only_where_the_topic_allows() {
    let mut l = Log::with_brokers(2);
    l.topic("t", vec![vec![1, 2]]);
    l.topic("u", vec![vec![1, 2]]);
    l.topic_config("t", UNCLEAN_LEADER_ELECTION_ENABLE, "true");
    for name in ["t", "u"] {
        assert_eq!(l.alter(1, l.isr_item(name, 0, &[1])).error_code, 0);
    }
    let ev = l.fence(1);
    let t = l.part("t", 0).clone();
    assert_eq!(
        (t.leader, t.isr.clone(), t.leader_epoch, t.leader_recovery),
        (2, vec![2], 1, LeaderRecovery::Recovering)
    );
    let u = l.part("u", 0).clone();
    assert_eq!(
        (u.leader, u.isr.clone(), u.leader_recovery),
        (NO_LEADER, vec![1], LeaderRecovery::Recovered)
    );
    for name in ["t", "u"] {
        assert!(ev.contains(&MetaEvent::Leadership {
            name: name.into(),
            partitions: vec![0]
        }));
    }
    // The unclean leader may not grow its ISR while recovering ...
    let mut grow = l.isr_item("t", 0, &[2, 1]);
    grow.leader_recovery = LeaderRecovery::Recovering;
    assert_eq!(l.alter(2, grow).error_code, code::INVALID_REQUEST);
    // ... and says when it has recovered (no leader epoch change).
    let s = l.alter(2, l.isr_item("t", 0, &[2]));
    assert_eq!(
        (s.error_code, s.leader_recovery, s.leader_epoch),
        (0, LeaderRecovery::Recovered, 1)
    );
    // Broker 1 returns: it leads u again, and may rejoin t's ISR.
    l.unfence(1);
    assert_eq!(l.part("u", 0).leader, 1);
    assert_eq!(l.part("t", 0).leader, 2);
    assert_eq!(l.alter(2, l.isr_item("t", 0, &[2, 1])).error_code, 0);
}

#[test]
fn the_cluster_default_allows_unclean_elections_and_a_topic_override_wins() {
    let mut l = Log::with_brokers(2);
    l.topic("t", vec![vec![1, 2]]);
    l.topic("u", vec![vec![1, 2]]);
    l.configs(
        ConfigResource::Broker(String::new()),
        UNCLEAN_LEADER_ELECTION_ENABLE,
        "TRUE",
    );
    l.topic_config("u", UNCLEAN_LEADER_ELECTION_ENABLE, "false");
    assert!(l.img.unclean_election_enabled("t"));
    assert!(!l.img.unclean_election_enabled("u"));
    for name in ["t", "u"] {
        assert_eq!(l.alter(1, l.isr_item(name, 0, &[1])).error_code, 0);
    }
    l.fence(1);
    assert_eq!(l.part("t", 0).leader, 2);
    assert_eq!(l.part("u", 0).leader, NO_LEADER);
}

#[test]
fn a_returning_replica_is_elected_uncleanly_where_the_topic_allows() {
    let mut l = Log::with_brokers(2);
    l.topic("t", vec![vec![1, 2]]);
    l.topic("u", vec![vec![1, 2]]);
    l.topic_config("t", UNCLEAN_LEADER_ELECTION_ENABLE, "true");
    for name in ["t", "u"] {
        assert_eq!(l.alter(1, l.isr_item(name, 0, &[1])).error_code, 0);
    }
    l.fence(2);
    l.fence(1);
    assert_eq!(l.part("t", 0).leader, NO_LEADER, "nobody to elect");
    let le = l.part("t", 0).leader_epoch;
    l.unfence(2);
    let t = l.part("t", 0);
    assert_eq!(
        (t.leader, t.isr.clone(), t.leader_epoch, t.leader_recovery),
        (2, vec![2], le + 1, LeaderRecovery::Recovering)
    );
    assert_eq!(l.part("u", 0).leader, NO_LEADER);
    assert_eq!(l.part("u", 0).isr, vec![1]);
}

#[test]
fn controlled_shutdown_moves_leadership_and_keeps_the_broker_out_until_it_registers_again() {
    let mut l = Log::with_brokers(3);
    l.topic("a", vec![vec![2, 1, 3]]);
    l.topic("b", vec![vec![2]]);
    l.topic("c", vec![vec![1, 2]]);
    let (r, ev) = shutdown(&mut l, 2);
    let at = l.index;
    assert_eq!(r, MetaResponse::ShuttingDown { since_index: at });
    assert!(ev.contains(&MetaEvent::Broker(2)));
    let a = l.part("a", 0);
    assert_eq!(
        (a.leader, a.isr.clone(), a.leader_epoch),
        (1, vec![1, 3], 1)
    );
    let b = l.part("b", 0);
    assert_eq!((b.leader, b.isr.clone()), (NO_LEADER, vec![2]));
    assert_eq!(l.part("c", 0).isr, vec![1]);
    assert_eq!(l.img.leaderships(2), 0);
    assert!(!l.img.is_active(2));
    // Done once every other active broker has applied the entry.
    assert!(l.img.controlled_shutdown_done(2, |_| Some(at)));
    assert!(!l
        .img
        .controlled_shutdown_done(2, |b| Some(if b == 3 { at - 1 } else { at })));
    assert!(!l.img.controlled_shutdown_done(2, |_| None));
    assert!(
        !l.img.controlled_shutdown_done(1, |_| Some(at)),
        "1 did not ask"
    );
    assert!(
        l.img.controlled_shutdown_done(9, |_| None),
        "not registered"
    );
    // A retry answers the first index and changes nothing.
    let before = l.img.clone();
    let (r, ev) = shutdown(&mut l, 2);
    assert_eq!(r, MetaResponse::ShuttingDown { since_index: at });
    assert!(ev.is_empty());
    assert_eq!(l.img, before);
    // It may not join an ISR, lead, be placed on, or be unfenced.
    assert_eq!(
        l.alter(1, l.isr_item("c", 0, &[1, 2])).error_code,
        code::INELIGIBLE_REPLICA
    );
    let r = elect(&mut l, ElectionType::Preferred, "a", &[0]);
    assert_eq!(r[0].error_code, code::PREFERRED_LEADER_NOT_AVAILABLE);
    let r = l.create(NewTopic {
        name: "p".into(),
        id: "id-p".into(),
        partitions: 6,
        replication_factor: 2,
        assignments: vec![],
        configs: BTreeMap::new(),
    });
    assert_eq!(r.error_code, 0);
    assert!(l.img.topics["p"]
        .partitions
        .iter()
        .all(|p| !p.replicas.contains(&2)));
    l.fence(2);
    assert!(matches!(
        l.unfence(2),
        MetaResponse::Error {
            error_code: code::INVALID_REQUEST,
            ..
        }
    ));
    // Registering again ends it: b is led by 2 again.
    l.broker(2);
    assert!(l.img.is_active(2));
    assert_eq!(l.part("b", 0).leader, 2);
    // Refusals.
    let (r, _) = l.apply(MetaRequest::ControlledShutdown {
        broker_id: 2,
        broker_epoch: 1,
    });
    assert!(matches!(
        r,
        MetaResponse::Error {
            error_code: code::STALE_BROKER_EPOCH,
            ..
        }
    ));
    let (r, _) = l.apply(MetaRequest::ControlledShutdown {
        broker_id: 9,
        broker_epoch: 1,
    });
    assert!(matches!(
        r,
        MetaResponse::Error {
            error_code: code::BROKER_ID_NOT_REGISTERED,
            ..
        }
    ));
}

#[test]
fn preferred_election_moves_leadership_back_to_the_first_replica() {
    let mut l = Log::with_brokers(2);
    l.topic("t", vec![vec![1, 2], vec![2, 1]]);
    l.fence(1);
    l.unfence(1);
    assert_eq!(l.part("t", 0).leader, 2);
    // 1 is not in the ISR yet.
    let r = elect(&mut l, ElectionType::Preferred, "t", &[0]);
    assert_eq!(r[0].error_code, code::PREFERRED_LEADER_NOT_AVAILABLE);
    assert_eq!(r[0].leader, 2);
    assert_eq!(l.alter(2, l.isr_item("t", 0, &[2, 1])).error_code, 0);
    assert_eq!(
        l.img.preferred_leader_imbalance(10),
        vec![TopicPartitions {
            topic: "t".into(),
            partitions: vec![0]
        }]
    );
    let le = l.part("t", 0).leader_epoch;
    // Without a list: every partition, leaving out those not needing it.
    let (r, ev) = l.apply(MetaRequest::ElectLeaders {
        election: ElectionType::Preferred,
        partitions: None,
    });
    let r = partitions(r);
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(
        (r[0].partition, r[0].error_code, r[0].leader, r[0].unclean),
        (0, 0, 1, false)
    );
    assert_eq!(
        ev,
        vec![MetaEvent::Leadership {
            name: "t".into(),
            partitions: vec![0]
        }]
    );
    assert_eq!(l.part("t", 0).leader_epoch, le + 1);
    assert!(l.img.preferred_leader_imbalance(10).is_empty());
    let r = elect(&mut l, ElectionType::Preferred, "t", &[0, 1, 7]);
    let codes: Vec<i16> = r.iter().map(|r| r.error_code).collect();
    assert_eq!(
        codes,
        vec![
            code::ELECTION_NOT_NEEDED,
            code::ELECTION_NOT_NEEDED,
            code::UNKNOWN_TOPIC_OR_PARTITION
        ]
    );
    let r = elect(&mut l, ElectionType::Preferred, "nope", &[0]);
    assert_eq!(r[0].error_code, code::UNKNOWN_TOPIC_OR_PARTITION);
}

#[test]
fn unclean_election_by_request_elects_a_live_replica_outside_the_isr_whatever_the_config() {
    let mut l = Log::with_brokers(2);
    l.topic("t", vec![vec![1, 2]]);
    l.topic("u", vec![vec![1, 2]]);
    l.topic("one", vec![vec![1]]);
    for name in ["t", "u"] {
        assert_eq!(l.alter(1, l.isr_item(name, 0, &[1])).error_code, 0);
    }
    l.fence(1);
    assert_eq!(l.part("t", 0).leader, NO_LEADER);
    assert!(
        l.img.unclean_election_candidates().is_empty(),
        "not allowed"
    );
    let r = elect(&mut l, ElectionType::Unclean, "t", &[0]);
    assert_eq!((r[0].error_code, r[0].leader, r[0].unclean), (0, 2, true));
    let t = l.part("t", 0);
    assert_eq!(
        (t.isr.clone(), t.leader_recovery),
        (vec![2], LeaderRecovery::Recovering)
    );
    let r = elect(&mut l, ElectionType::Unclean, "t", &[0]);
    assert_eq!(r[0].error_code, code::ELECTION_NOT_NEEDED);
    let r = elect(&mut l, ElectionType::Unclean, "one", &[0]);
    assert_eq!(r[0].error_code, code::ELIGIBLE_LEADERS_NOT_AVAILABLE);
    // What a periodic task elects once a topic allows it.
    l.topic_config("one", UNCLEAN_LEADER_ELECTION_ENABLE, "true");
    assert!(
        l.img.unclean_election_candidates().is_empty(),
        "nobody live"
    );
    l.topic_config("u", UNCLEAN_LEADER_ELECTION_ENABLE, "true");
    assert_eq!(
        l.img.unclean_election_candidates(),
        vec![TopicPartitions {
            topic: "u".into(),
            partitions: vec![0]
        }]
    );
}

#[test]
fn imbalance_counts_per_preferred_broker_against_the_percentage() {
    let mut l = Log::with_brokers(2);
    l.topic("t", vec![vec![1, 2]; 10]);
    let mv = |l: &mut Log, i: i32| {
        let pe = l.part("t", i as usize).partition_epoch;
        l.apply(MetaRequest::PartitionChange {
            changes: vec![PartitionChange {
                topic_id: "id-t".into(),
                partition: i,
                partition_epoch: pe,
                leader: Some(2),
                isr: None,
            }],
        });
    };
    mv(&mut l, 0);
    assert!(
        l.img.preferred_leader_imbalance(10).is_empty(),
        "1 in 10 is not above 10%"
    );
    mv(&mut l, 1);
    assert_eq!(
        l.img.preferred_leader_imbalance(10),
        vec![TopicPartitions {
            topic: "t".into(),
            partitions: vec![0, 1]
        }]
    );
    assert!(l.img.preferred_leader_imbalance(20).is_empty());
    assert_eq!(l.img.auto_leader_rebalance(), Some(10));
    l.configs(
        ConfigResource::Broker(String::new()),
        LEADER_IMBALANCE_PER_BROKER_PERCENTAGE,
        "25",
    );
    assert_eq!(l.img.auto_leader_rebalance(), Some(25));
    l.configs(
        ConfigResource::Broker(String::new()),
        AUTO_LEADER_REBALANCE_ENABLE,
        "false",
    );
    assert_eq!(l.img.auto_leader_rebalance(), None);
}

#[test]
fn default_replication_factor_is_the_config_else_up_to_three_active_brokers() {
    assert_eq!(
        MetaImage::default().resolve_replication_factor(-1, 1, None),
        1
    );
    let mut l = Log::with_brokers(2);
    assert_eq!(l.img.resolve_replication_factor(-1, 1, None), 2);
    assert_eq!(l.img.resolve_replication_factor(5, 1, None), 5, "as asked");
    assert_eq!(
        l.img.resolve_replication_factor(-1, 1, Some(1)),
        1,
        "static"
    );
    for id in 3..=5 {
        l.broker(id);
    }
    assert_eq!(l.img.resolve_replication_factor(-1, 1, None), 3);
    l.configs(
        ConfigResource::Broker(String::new()),
        DEFAULT_REPLICATION_FACTOR,
        "2",
    );
    l.configs(
        ConfigResource::Broker("1".into()),
        DEFAULT_REPLICATION_FACTOR,
        "4",
    );
    assert_eq!(l.img.resolve_replication_factor(-1, 1, Some(1)), 4);
    assert_eq!(l.img.resolve_replication_factor(-1, 2, Some(1)), 2);
}

#[test]
fn replicated_topics_get_distinct_active_brokers_and_spread_leaders() {
    let mut l = Log::with_brokers(4);
    let r = l.create(NewTopic {
        name: "a".into(),
        id: "id-a".into(),
        partitions: 8,
        replication_factor: 3,
        assignments: vec![],
        configs: BTreeMap::new(),
    });
    assert_eq!(r.error_code, 0);
    let mut leaders = BTreeMap::new();
    for p in &l.img.topics["a"].partitions {
        let mut d = p.replicas.clone();
        d.sort_unstable();
        d.dedup();
        assert_eq!(d.len(), 3, "{p:?}");
        assert_eq!(p.isr, p.replicas);
        *leaders.entry(p.leader).or_insert(0) += 1;
    }
    assert_eq!(
        leaders.values().copied().collect::<Vec<_>>(),
        vec![2, 2, 2, 2]
    );
}

#[test]
fn settling_without_a_change_moves_no_epoch() {
    let mut l = Log::with_brokers(2);
    l.topic("t", vec![vec![1, 2]]);
    let mut p = l.part("t", 0).clone();
    let before = p.clone();
    let t = change::Target::of(&p, change::Election::Online);
    let out = change::settle(&mut p, t, &|_| true);
    assert!(!out.changed);
    assert_eq!(p, before);
}

#[test]
fn new_entry_kinds_round_trip_with_their_tags() {
    let reqs = vec![
        (
            MetaRequest::AlterPartition {
                broker_id: 1,
                broker_epoch: 7,
                partitions: vec![AlterPartitionItem {
                    topic_id: "x".into(),
                    partition: 0,
                    leader_epoch: 1,
                    partition_epoch: 2,
                    new_isr: vec![IsrMember {
                        broker_id: 1,
                        broker_epoch: -1,
                    }],
                    leader_recovery: LeaderRecovery::Recovering,
                }],
            },
            "alter_partition.v1",
        ),
        (
            MetaRequest::ControlledShutdown {
                broker_id: 1,
                broker_epoch: 7,
            },
            "controlled_shutdown.v1",
        ),
        (
            MetaRequest::ElectLeaders {
                election: ElectionType::Unclean,
                partitions: None,
            },
            "elect_leaders.v1",
        ),
        (
            MetaRequest::AlterReassignments {
                partitions: vec![Reassignment {
                    topic: "t".into(),
                    partition: 0,
                    replicas: None,
                }],
            },
            "alter_reassignments.v1",
        ),
    ];
    for (r, tag) in reqs {
        let s = serde_json::to_string(&r).unwrap();
        assert!(s.contains(&format!(r#""kind":"{tag}""#)), "{s}");
        assert_eq!(serde_json::from_str::<MetaRequest>(&s).unwrap(), r);
    }
    // Optional fields may be left out.
    let r: MetaRequest = serde_json::from_str(
        r#"{"kind":"alter_partition.v1","broker_id":1,"broker_epoch":2,"partitions":[{"topic_id":"x","partition":0,"leader_epoch":0,"partition_epoch":0,"new_isr":[{"broker_id":1}]}]}"#,
    )
    .unwrap();
    let MetaRequest::AlterPartition { partitions, .. } = r else {
        panic!()
    };
    assert_eq!(partitions[0].new_isr[0].broker_epoch, -1);
    assert_eq!(partitions[0].leader_recovery, LeaderRecovery::Recovered);
    let resps = vec![
        MetaResponse::ShuttingDown { since_index: 3 },
        MetaResponse::Partitions {
            results: vec![PartitionResult {
                topic: "t".into(),
                partition: 0,
                error_code: 0,
                message: None,
                leader: 2,
                unclean: true,
            }],
        },
    ];
    for r in resps {
        let s = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<MetaResponse>(&s).unwrap(), r);
    }
}

#[test]
fn images_and_logs_from_before_replication_still_load_and_apply_alike() {
    // A partition and a broker as older images hold them, and as a new
    // image still writes them when nothing new is in use.
    let old_p = r#"{"replicas":[1],"isr":[1],"leader":1,"leader_epoch":0,"partition_epoch":0}"#;
    let p: PartitionInfo = serde_json::from_str(old_p).unwrap();
    assert!(p.adding.is_empty() && p.removing.is_empty());
    assert_eq!(p.leader_recovery, LeaderRecovery::Recovered);
    assert_eq!(serde_json::to_string(&p).unwrap(), old_p);
    let old_b =
        r#"{"id":1,"incarnation_id":"i","epoch":2,"endpoints":[],"rack":null,"fenced":false}"#;
    let b: BrokerInfo = serde_json::from_str(old_b).unwrap();
    assert_eq!(b.shutdown_index, None);
    assert_eq!(serde_json::to_string(&b).unwrap(), old_b);

    // A log of the old tags only, with unclean elections switched on for a
    // topic of one replica per partition (all es could create): it applies
    // to what the old code made of it.
    let log = [
        r#"{"kind":"cluster.v1","cluster_id":"c"}"#,
        r#"{"kind":"register_broker.v1","broker_id":1,"incarnation_id":"a","cluster_id":"c","endpoints":[],"rack":null}"#,
        r#"{"kind":"register_broker.v1","broker_id":2,"incarnation_id":"b","cluster_id":"c","endpoints":[],"rack":null}"#,
        r#"{"kind":"unfence_broker.v1","broker_id":1,"epoch":2}"#,
        r#"{"kind":"unfence_broker.v1","broker_id":2,"epoch":3}"#,
        r#"{"kind":"create_topics.v1","topics":[{"name":"t","id":"x","partitions":2,"replication_factor":1}]}"#,
        r#"{"kind":"alter_configs.v1","resources":[{"resource":{"type":"topic","name":"t"},"changes":{"unclean.leader.election.enable":"true"}}]}"#,
        r#"{"kind":"fence_broker.v1","broker_id":1,"epoch":2}"#,
        r#"{"kind":"register_broker.v1","broker_id":1,"incarnation_id":"a2","cluster_id":"c","endpoints":[],"rack":null}"#,
        r#"{"kind":"unfence_broker.v1","broker_id":1,"epoch":9}"#,
        r#"{"kind":"partition_change.v1","changes":[{"topic_id":"x","partition":1,"partition_epoch":0,"leader":2,"isr":[2]}]}"#,
    ];
    let mut img = MetaImage::default();
    for (i, e) in log.iter().enumerate() {
        let req: MetaRequest = serde_json::from_str(e).unwrap();
        let (r, _) = img.apply(i as u64 + 1, &req);
        assert!(!matches!(r, MetaResponse::Error { .. }), "{e}: {r:?}");
    }
    let got: Vec<(Vec<BrokerId>, BrokerId, i32, i32)> = img.topics["t"]
        .partitions
        .iter()
        .map(|p| (p.isr.clone(), p.leader, p.leader_epoch, p.partition_epoch))
        .collect();
    assert_eq!(got, vec![(vec![1], 1, 2, 3), (vec![2], 2, 0, 1)]);
    let s = serde_json::to_string(&img).unwrap();
    for new in ["adding", "removing", "leader_recovery", "shutdown_index"] {
        assert!(!s.contains(new), "{s}");
    }
}
