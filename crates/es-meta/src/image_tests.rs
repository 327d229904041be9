//! Tests of applying metadata entries to the image.

use super::*;
use crate::records::NewTopic;

fn broker(img: &mut MetaImage, index: u64, id: BrokerId, rack: Option<&str>) -> i64 {
    let (r, _) = img.apply(
        index,
        &MetaRequest::RegisterBroker(RegisterBroker {
            broker_id: id,
            incarnation_id: format!("inc-{id}-{index}"),
            cluster_id: "c".into(),
            endpoints: vec![],
            rack: rack.map(str::to_string),
        }),
    );
    let MetaResponse::Registered { broker_epoch } = r else {
        panic!("{r:?}")
    };
    img.apply(
        index + 1,
        &MetaRequest::UnfenceBroker {
            broker_id: id,
            epoch: broker_epoch,
        },
    );
    broker_epoch
}

fn topic(name: &str, partitions: i32, rf: i16) -> NewTopic {
    NewTopic {
        name: name.into(),
        id: format!("id-{name}"),
        partitions,
        replication_factor: rf,
        assignments: vec![],
        configs: BTreeMap::new(),
    }
}

fn create(img: &mut MetaImage, t: NewTopic) -> ItemResult {
    let (r, _) = img.apply(100, &MetaRequest::CreateTopics { topics: vec![t] });
    let MetaResponse::Items { mut results } = r else {
        panic!("{r:?}")
    };
    results.remove(0)
}

#[test]
fn placement_balances_leaders_and_replicas_by_count() {
    let mut img = MetaImage::default();
    for id in 1..=3 {
        broker(&mut img, id as u64 * 10, id, None);
    }
    assert_eq!(create(&mut img, topic("a", 6, 2)).error_code, code::NONE);
    let t = &img.topics["a"];
    let mut leaders = BTreeMap::new();
    let mut replicas = BTreeMap::new();
    for p in &t.partitions {
        assert_eq!(p.replicas.len(), 2);
        assert_ne!(p.replicas[0], p.replicas[1]);
        assert_eq!(p.leader, p.replicas[0]);
        assert_eq!(p.isr, p.replicas);
        *leaders.entry(p.leader).or_insert(0) += 1;
        for r in &p.replicas {
            *replicas.entry(*r).or_insert(0) += 1;
        }
    }
    assert_eq!(leaders.values().copied().collect::<Vec<_>>(), vec![2, 2, 2]);
    assert_eq!(
        replicas.values().copied().collect::<Vec<_>>(),
        vec![4, 4, 4]
    );
}

#[test]
fn placement_spreads_replicas_over_racks() {
    let mut img = MetaImage::default();
    broker(&mut img, 10, 1, Some("a"));
    broker(&mut img, 20, 2, Some("a"));
    broker(&mut img, 30, 3, Some("b"));
    broker(&mut img, 40, 4, Some("b"));
    assert_eq!(create(&mut img, topic("t", 8, 2)).error_code, code::NONE);
    for p in &img.topics["t"].partitions {
        let racks: BTreeSet<_> = p
            .replicas
            .iter()
            .map(|r| img.brokers[r].rack.clone())
            .collect();
        assert_eq!(racks.len(), 2, "{p:?}");
    }
}

#[test]
fn replication_factor_above_the_live_brokers_is_refused() {
    let mut img = MetaImage::default();
    broker(&mut img, 10, 1, None);
    let r = create(&mut img, topic("a", 1, 2));
    assert_eq!(r.error_code, code::INVALID_REPLICATION_FACTOR);
    assert!(img.topics.is_empty());
}

#[test]
fn second_create_of_a_name_is_refused_and_colliding_names_too() {
    let mut img = MetaImage::default();
    broker(&mut img, 10, 1, None);
    assert_eq!(create(&mut img, topic("a.b", 1, 1)).error_code, code::NONE);
    assert_eq!(
        create(&mut img, topic("a.b", 1, 1)).error_code,
        code::TOPIC_ALREADY_EXISTS
    );
    assert_eq!(
        create(&mut img, topic("a_b", 1, 1)).error_code,
        code::INVALID_TOPIC_EXCEPTION
    );
}

#[test]
fn fencing_the_only_replica_leaves_its_partitions_without_a_leader_until_it_returns() {
    let mut img = MetaImage::default();
    let e1 = broker(&mut img, 10, 1, None);
    broker(&mut img, 20, 2, None);
    assert_eq!(create(&mut img, topic("a", 2, 1)).error_code, code::NONE);
    let led_by_1: Vec<usize> = img.topics["a"]
        .partitions
        .iter()
        .enumerate()
        .filter(|(_, p)| p.leader == 1)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(led_by_1.len(), 1);
    let i = led_by_1[0];
    let (_, ev) = img.apply(
        200,
        &MetaRequest::FenceBroker {
            broker_id: 1,
            epoch: e1,
        },
    );
    let p = &img.topics["a"].partitions[i];
    assert_eq!(
        (p.leader, p.leader_epoch, p.isr.clone()),
        (NO_LEADER, 1, vec![1])
    );
    assert!(ev.contains(&MetaEvent::Leadership {
        name: "a".into(),
        partitions: vec![i as i32]
    }));
    let (r, _) = img.apply(
        201,
        &MetaRequest::UnfenceBroker {
            broker_id: 1,
            epoch: e1 - 1,
        },
    );
    assert!(matches!(
        r,
        MetaResponse::Error {
            error_code: code::STALE_BROKER_EPOCH,
            ..
        }
    ));
    img.apply(
        202,
        &MetaRequest::UnfenceBroker {
            broker_id: 1,
            epoch: e1,
        },
    );
    let p = &img.topics["a"].partitions[i];
    assert_eq!((p.leader, p.leader_epoch), (1, 2));
}

#[test]
fn fencing_a_leader_moves_leadership_within_the_isr() {
    let mut img = MetaImage::default();
    let e1 = broker(&mut img, 10, 1, None);
    broker(&mut img, 20, 2, None);
    assert_eq!(create(&mut img, topic("a", 2, 2)).error_code, code::NONE);
    img.apply(
        200,
        &MetaRequest::FenceBroker {
            broker_id: 1,
            epoch: e1,
        },
    );
    for p in &img.topics["a"].partitions {
        assert_eq!(p.leader, 2);
        assert_eq!(p.isr, vec![2]);
    }
}

#[test]
fn unregistered_ids_are_never_registered_again() {
    let mut img = MetaImage::default();
    broker(&mut img, 10, 1, None);
    img.apply(20, &MetaRequest::UnregisterBroker { broker_id: 1 });
    let (r, _) = img.apply(
        30,
        &MetaRequest::RegisterBroker(RegisterBroker {
            broker_id: 1,
            incarnation_id: "new".into(),
            cluster_id: "c".into(),
            endpoints: vec![],
            rack: None,
        }),
    );
    assert!(matches!(
        r,
        MetaResponse::Error {
            error_code: code::DUPLICATE_BROKER_REGISTRATION,
            ..
        }
    ));
}

#[test]
fn create_partitions_keeps_the_replication_factor_and_refuses_shrinking() {
    let mut img = MetaImage::default();
    broker(&mut img, 10, 1, None);
    broker(&mut img, 20, 2, None);
    assert_eq!(create(&mut img, topic("a", 1, 2)).error_code, code::NONE);
    let grow = |count| MetaRequest::CreatePartitions {
        topics: vec![NewPartitions {
            name: "a".into(),
            count,
            assignments: vec![],
        }],
    };
    let (r, ev) = img.apply(200, &grow(3));
    assert!(
        matches!(&r, MetaResponse::Items { results } if results[0].error_code == code::NONE),
        "{r:?}"
    );
    assert_eq!(
        ev,
        vec![MetaEvent::PartitionsCreated {
            name: "a".into(),
            from: 1
        }]
    );
    assert!(img.topics["a"]
        .partitions
        .iter()
        .all(|p| p.replicas.len() == 2));
    let (r, _) = img.apply(201, &grow(2));
    assert!(
        matches!(&r, MetaResponse::Items { results } if results[0].error_code == code::INVALID_PARTITIONS)
    );
}

#[test]
fn producer_id_blocks_do_not_overlap() {
    let mut img = MetaImage::default();
    broker(&mut img, 10, 1, None);
    let (a, _) = img.apply(
        20,
        &MetaRequest::AllocateProducerIds {
            broker_id: 1,
            count: 1000,
        },
    );
    let (b, _) = img.apply(
        21,
        &MetaRequest::AllocateProducerIds {
            broker_id: 1,
            count: 1000,
        },
    );
    assert_eq!(
        a,
        MetaResponse::ProducerIds {
            first: 0,
            count: 1000
        }
    );
    assert_eq!(
        b,
        MetaResponse::ProducerIds {
            first: 1000,
            count: 1000
        }
    );
}

#[test]
fn producer_id_blocks_honour_a_floor_and_never_go_back() {
    let mut img = MetaImage::default();
    broker(&mut img, 10, 1, None);
    broker(&mut img, 11, 2, None);
    let from = |broker_id, at_least| MetaRequest::AllocateProducerIdsFrom {
        broker_id,
        count: 1000,
        at_least,
    };
    // Broker 1's journal already handed out ids below 5000.
    let (a, _) = img.apply(20, &from(1, 5000));
    assert_eq!(
        a,
        MetaResponse::ProducerIds {
            first: 5000,
            count: 1000
        }
    );
    // A lower floor does not move the counter back.
    let (b, _) = img.apply(21, &from(2, 0));
    assert_eq!(
        b,
        MetaResponse::ProducerIds {
            first: 6000,
            count: 1000
        }
    );
    assert_eq!(img.next_producer_id, 7000);
    let (c, _) = img.apply(22, &from(3, 0));
    assert!(matches!(
        c,
        MetaResponse::Error {
            error_code: code::BROKER_ID_NOT_REGISTERED,
            ..
        }
    ));
    let (d, _) = img.apply(23, &from(1, i64::MAX - 10));
    assert!(matches!(
        d,
        MetaResponse::Error {
            error_code: code::INVALID_REQUEST,
            ..
        }
    ));
    assert_eq!(img.next_producer_id, 7000, "refused entries change nothing");
    let s = serde_json::to_string(&from(1, 7)).unwrap();
    assert!(s.contains(r#""kind":"producer_ids.v2""#), "{s}");
}

#[test]
fn entries_keep_their_versioned_tags() {
    let r = MetaRequest::DeleteTopics {
        names: vec!["a".into()],
    };
    let s = serde_json::to_string(&r).unwrap();
    assert_eq!(s, r#"{"kind":"delete_topics.v1","names":["a"]}"#);
    assert!(
        serde_json::from_str::<MetaRequest>(r#"{"kind":"delete_topics.v9","names":[]}"#).is_err()
    );
}

#[test]
fn client_quotas_apply_per_entity_and_announce_a_change() {
    use crate::quotas::{QuotaAlteration, QuotaEntity, QuotaOp, QuotaValue, USER};
    let mut img = MetaImage::default();
    let set = |name: Option<&str>, v: Option<f64>| QuotaAlteration {
        entity: QuotaEntity::of(&[(USER, name)]),
        ops: vec![QuotaOp {
            key: "producer_byte_rate".into(),
            value: v.map(QuotaValue),
        }],
    };
    let bad = QuotaAlteration {
        entity: QuotaEntity::of(&[(USER, Some("bob"))]),
        ops: vec![QuotaOp {
            key: "producer_byte_rate".into(),
            value: Some(QuotaValue(-1.0)),
        }],
    };
    let req = MetaRequest::AlterClientQuotas {
        alterations: vec![set(Some("alice"), Some(1024.0)), bad, set(None, Some(10.0))],
    };
    let (r, ev) = img.apply(1, &req);
    let MetaResponse::Items { results } = r else {
        panic!("{r:?}")
    };
    let codes: Vec<i16> = results.iter().map(|r| r.error_code).collect();
    assert_eq!(codes, vec![0, code::INVALID_REQUEST, 0]);
    assert_eq!(ev, vec![MetaEvent::ClientQuotas]);
    assert_eq!(img.client_quotas.0.len(), 2);
    // The same values again change nothing, and announce nothing.
    let (_, ev) = img.apply(2, &req);
    assert!(ev.is_empty());
    // The image (and so a snapshot) keeps them.
    let json = serde_json::to_string(&img).expect("json");
    let back: MetaImage = serde_json::from_str(&json).expect("back");
    assert_eq!(back, img);
    let (_, ev) = img.apply(
        3,
        &MetaRequest::AlterClientQuotas {
            alterations: vec![set(Some("alice"), None), set(None, None)],
        },
    );
    assert_eq!(ev, vec![MetaEvent::ClientQuotas]);
    assert!(img.client_quotas.is_empty());
}

#[test]
fn api_keys_are_added_and_revoked_for_good() {
    use es_auth::api_keys::ApiKeys;
    use es_auth::principal::Principal;
    let mut made = ApiKeys::new();
    let (key, _) = made
        .create_named("svc", Principal::user("svc"), None, 1)
        .expect("key");
    let (other, _) = ApiKeys::new()
        .create_named("svc", Principal::user("mallory"), None, 2)
        .expect("key");
    let mut img = MetaImage::default();
    let put = |img: &mut MetaImage, keys: Vec<es_auth::api_keys::ApiKey>| {
        let (resp, ev) = img.apply(1, &MetaRequest::PutApiKeys { keys });
        let MetaResponse::Items { results } = resp else {
            panic!("{resp:?}")
        };
        (
            results.iter().map(|r| r.error_code).collect::<Vec<_>>(),
            ev.contains(&MetaEvent::ApiKeys),
        )
    };
    assert_eq!(put(&mut img, vec![key.clone()]), (vec![0], true));
    assert_eq!(
        put(&mut img, vec![key.clone()]),
        (vec![0], false),
        "same key again"
    );
    assert_eq!(
        put(&mut img, vec![other.clone()]),
        (vec![code::INVALID_REQUEST], false),
        "another live key of the id"
    );
    let mut revoked = key.clone();
    revoked.revoked = true;
    revoked.hash.clear();
    assert_eq!(put(&mut img, vec![revoked.clone()]), (vec![0], true));
    assert_eq!(
        put(&mut img, vec![key.clone()]),
        (vec![code::INVALID_REQUEST], false),
        "a revocation is final"
    );
    let mut broken = other.clone();
    broken.hash = "not a hash".into();
    broken.id = "other".into();
    assert_eq!(
        put(&mut img, vec![broken]),
        (vec![code::INVALID_REQUEST], false)
    );
    assert_eq!(img.api_keys.get("svc"), Some(&revoked));
    let s = serde_json::to_string(&MetaRequest::PutApiKeys { keys: vec![] }).unwrap();
    assert_eq!(s, r#"{"kind":"put_api_keys.v1","keys":[]}"#);
}
