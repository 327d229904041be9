//! Tests of share groups in the coordinator shell, on a simulated file
//! system and a manual clock: created by a first heartbeat, listed and
//! described as share groups, refused by every other protocol's requests
//! as Kafka refuses them, deleted only when empty, kept (Empty, with the
//! share-partitions they initialised) across a crash, members fenced when
//! their session ends, the group's own `share.*` configs applied, and only
//! initialised share-partitions assigned (Kafka 4.4's rule).

use crate::groups::coordinator::*;
use std::path::Path;

use es_storage::clock::ManualClock;
use es_storage::simfs::{SimFs, Tear};

use crate::config::GroupOverrides;
use crate::groups::classic::{self, JoinRequest, SyncRequest};
use crate::groups::consumer::{self, TopicView};
use crate::groups::share::ShareHeartbeatRequest;

const T: Uuid = Uuid::from_u128(0x7);
const U: Uuid = Uuid::from_u128(0x8);

/// Topics by name: (id, partition count).
struct View(BTreeMap<String, (Uuid, i32)>);

impl View {
    fn new(topics: &[(&str, Uuid, i32)]) -> View {
        View(
            topics
                .iter()
                .map(|(n, id, c)| (n.to_string(), (*id, *c)))
                .collect(),
        )
    }
}

impl TopicView for View {
    fn by_name(&self, name: &str) -> Option<(Uuid, i32)> {
        self.0.get(name).copied()
    }
    fn name_of(&self, id: Uuid) -> Option<String> {
        self.0
            .iter()
            .find(|(_, (i, _))| *i == id)
            .map(|(n, _)| n.clone())
    }
    fn names(&self) -> Vec<String> {
        self.0.keys().cloned().collect()
    }
    fn generation(&self) -> u64 {
        self.0.len() as u64
    }
}

fn open(fs: &SimFs, clock: &Arc<ManualClock>) -> Arc<Coordinator> {
    let fs: Arc<dyn Fs> = Arc::new(fs.clone());
    es_storage::fs::create_dir_durable(fs.as_ref(), Path::new("/data")).expect("dir");
    let clock: SharedClock = clock.clone();
    Coordinator::open(fs, Path::new("/data"), GroupConfig::default(), clock).expect("open")
}

fn hb(group: &str, member: &str, epoch: i32, topics: Option<&[&str]>) -> ShareHeartbeatRequest {
    ShareHeartbeatRequest {
        group_id: group.to_string(),
        member_id: member.to_string(),
        member_epoch: epoch,
        rack_id: None,
        subscribed_topic_names: topics.map(|ts| ts.iter().map(|t| t.to_string()).collect()),
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
    }
}

const M1: &str = "00000000-0000-0000-0000-0000000000a1";
const M2: &str = "00000000-0000-0000-0000-0000000000a2";

/// UNKNOWN_MEMBER_ID, "Member <M1> is not a member of group g."
fn not_a_member() -> GroupError {
    GroupError::NotAMember {
        member_id: M1.into(),
        group_id: "g".into(),
    }
}

fn join_request(member: &str) -> JoinRequest {
    JoinRequest {
        member_id: member.to_string(),
        group_instance_id: None,
        client_id: "c".into(),
        client_host: String::new(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 10_000,
        protocol_type: "consumer".into(),
        protocols: vec![classic::Protocol {
            name: "range".into(),
            metadata: bytes::Bytes::new(),
        }],
        requires_known_member_id: false,
        supports_skip_assignment: true,
    }
}

#[tokio::test]
async fn a_first_heartbeat_creates_a_share_group_listed_and_described_as_one() {
    let clock = ManualClock::new(1_000);
    let c = open(&SimFs::new(), &clock);
    let view = View::new(&[("t", T, 2)]);
    let r = c.share_heartbeat(hb("g", M1, 0, Some(&["t"])), &view);
    assert_eq!(r.error, None);
    assert_eq!(r.member_id.as_deref(), Some(M1));
    assert_eq!(r.member_epoch, 2, "the join bumped the group epoch to 2");
    assert_eq!(r.heartbeat_interval_ms, 5_000);
    // Kafka 4.4: no share-partition is initialised before this heartbeat,
    // so its target assigns none; the heartbeat initialises t's.
    assert_eq!(r.assignment, Some(vec![]));
    let recorded = c.share_partitions("g").expect("share group");
    assert_eq!(recorded.get("t"), Some(&(T, BTreeSet::from([0, 1]))));
    // A heartbeat once the assignment interval (1 s) has passed gets them.
    clock.advance(std::time::Duration::from_millis(1_000));
    let r = c.share_heartbeat(hb("g", M1, 2, None), &view);
    assert_eq!((r.error, r.member_epoch), (None, 3));
    assert_eq!(r.assignment, Some(vec![(T, vec![0, 1])]));

    let listed = c.list(&[], &[]);
    assert_eq!(
        listed,
        vec![Listed {
            group_id: "g".into(),
            protocol_type: "share".into(),
            state: "Stable".into(),
            group_type: "share",
        }]
    );
    assert_eq!(c.list(&[], &["SHARE".into()]).len(), 1);
    assert!(c.list(&[], &["consumer".into()]).is_empty());
    assert!(c.list(&["empty".into()], &[]).is_empty());
    assert_eq!(c.list(&["stable".into()], &["share".into()]).len(), 1);
    assert_eq!(c.describe("g"), ClassicDescribe::NotClassic);
    let d = c.share_describe("g", &view).expect("a share group");
    assert_eq!((d.state, d.assignor_name), ("Stable", "simple"));
    assert_eq!(d.members.len(), 1);
    assert_eq!(d.members[0].assignment, vec![(T, "t".into(), vec![0, 1])]);
    assert_eq!(d.members[0].client_host, "/127.0.0.1");
    assert_eq!(c.share_partitions("nope"), None);

    // A second member shares both partitions (one partition per member
    // at most twice: ceil(2 members / 2 partitions) = 1 member each), from
    // the first target computed an interval after the last.
    let r2 = c.share_heartbeat(hb("g", M2, 0, Some(&["t"])), &view);
    assert_eq!((r2.error, r2.assignment), (None, Some(vec![])));
    clock.advance(std::time::Duration::from_millis(1_000));
    let r1 = c.share_heartbeat(hb("g", M1, r.member_epoch, None), &view);
    assert_eq!((r1.error, r1.member_epoch), (None, 4));
    let r2 = c.share_heartbeat(hb("g", M2, r2.member_epoch, None), &view);
    assert_eq!((r2.error, r2.member_epoch), (None, 4));
    let a1 = r1.assignment.clone().expect("m1 gives one partition up");
    let a2 = r2.assignment.clone().expect("m2 gets one");
    let mut all: Vec<i32> = a1
        .iter()
        .chain(&a2)
        .flat_map(|(_, ps)| ps.clone())
        .collect();
    all.sort_unstable();
    assert_eq!(all, vec![0, 1], "{a1:?} {a2:?}");
}

#[tokio::test]
async fn other_protocols_are_refused_as_kafka_refuses_them() {
    let clock = ManualClock::new(1_000);
    let c = open(&SimFs::new(), &clock);
    let view = View::new(&[("t", T, 1)]);
    assert_eq!(
        c.share_heartbeat(hb("g", M1, 0, Some(&["t"])), &view).error,
        None
    );

    let j = c.join("g", join_request("")).await.expect("answered");
    assert_eq!(j.error, Some(GroupError::InconsistentGroupProtocol));
    assert_eq!(j.member_id, "");
    let sync = SyncRequest {
        member_id: M1.into(),
        group_instance_id: None,
        generation_id: 1,
        protocol_type: None,
        protocol_name: None,
        assignments: Vec::new(),
    };
    let s = c.sync("g", sync).await.expect("answered");
    assert_eq!(s.error, Some(GroupError::UnknownMemberId));
    assert_eq!(
        c.heartbeat("g", M1, None, 1),
        Err(GroupError::UnknownMemberId)
    );
    let leave = c
        .leave(
            "g",
            &[classic::LeaveMember {
                member_id: M1.into(),
                group_instance_id: None,
            }],
        )
        .expect("per member");
    assert_eq!(leave, vec![Err(GroupError::UnknownMemberId)]);

    let not_consumer = GroupError::NotAConsumerGroup {
        group_id: "g".into(),
    };
    let cg = consumer::HeartbeatRequest {
        api_version: 1,
        group_id: "g".into(),
        member_id: M2.into(),
        member_epoch: 0,
        rebalance_timeout_ms: 10_000,
        subscribed_topic_names: Some(vec!["t".into()]),
        topic_partitions: Some(Vec::new()),
        ..Default::default()
    };
    assert_eq!(
        c.consumer_heartbeat(cg, &view).error,
        Some(not_consumer.clone())
    );
    assert_eq!(
        c.consumer_describe("g", &view).err(),
        Some(not_consumer.clone())
    );
    let mut commit = CommitRequest {
        group_id: "g".into(),
        generation_id_or_member_epoch: -1,
        member_id: String::new(),
        group_instance_id: None,
        version: 9,
        transactional: false,
        topics: vec![CommitTopic {
            name: "t".into(),
            topic_id: T,
            partitions: vec![CommitPartition {
                partition: 0,
                offset: 1,
                leader_epoch: -1,
                metadata: None,
            }],
        }],
    };
    assert_eq!(c.commit(commit.clone()).err(), Some(not_consumer.clone()));
    commit.generation_id_or_member_epoch = 1;
    assert_eq!(c.commit(commit).err(), Some(not_consumer.clone()));
    let id = |_: &str| Some(T);
    assert_eq!(
        c.fetch_offsets("g", None, None, &id).err(),
        Some(not_consumer.clone())
    );
    assert_eq!(
        c.delete_offsets("g", &[("t".into(), vec![0])]).err(),
        Some(not_consumer)
    );

    // And the other way round: a classic group is not a share group.
    let j = c.join("classic", join_request("")).await.expect("answered");
    assert_eq!(j.error, None);
    let not_share = GroupError::NotAShareGroup {
        group_id: "classic".into(),
    };
    for epoch in [0, 3, -1] {
        let topics = (epoch == 0).then_some(&["t"][..]);
        let r = c.share_heartbeat(hb("classic", M1, epoch, topics), &view);
        assert_eq!(r.error, Some(not_share.clone()), "epoch {epoch}");
    }
    assert_eq!(c.share_describe("classic", &view).err(), Some(not_share));
    assert_eq!(
        c.share_describe("missing", &view).err(),
        Some(GroupError::GroupNotFound {
            group_id: "missing".into()
        })
    );
    assert_eq!(
        c.share_heartbeat(hb("missing", M1, 4, None), &view).error,
        Some(GroupError::ShareGroupNotFound {
            group_id: "missing".into()
        })
    );
}

#[tokio::test]
async fn a_share_group_is_deleted_only_when_empty() {
    let clock = ManualClock::new(1_000);
    let c = open(&SimFs::new(), &clock);
    let view = View::new(&[("t", T, 1)]);
    let r = c.share_heartbeat(hb("g", M1, 0, Some(&["t"])), &view);
    assert_eq!(c.delete("g").await, Err(GroupError::NonEmptyGroup));
    let left = c.share_heartbeat(hb("g", M1, -1, None), &view);
    assert_eq!((left.error, left.member_epoch), (None, -1));
    assert_eq!(left.member_id.as_deref(), Some(M1));
    assert_eq!(c.list(&[], &[])[0].state, "Empty");
    let _ = r;
    c.delete("g").await.expect("deleted");
    assert!(c.list(&[], &[]).is_empty());
    assert_eq!(c.delete("g").await, Err(GroupError::GroupIdNotFound));
    // A later member starts a new group.
    let again = c.share_heartbeat(hb("g", M2, 0, Some(&["t"])), &view);
    assert_eq!(again.error, None);
    assert_eq!(again.member_epoch, 2, "a new group starts at epoch 1");
}

#[tokio::test]
async fn a_share_group_and_its_share_partitions_survive_a_crash() {
    let clock = ManualClock::new(1_000);
    let fs = SimFs::new();
    let c = open(&fs, &clock);
    let view = View::new(&[("t", T, 3), ("u", U, 1)]);
    let r = c.share_heartbeat(hb("g", M1, 0, Some(&["t", "u"])), &view);
    assert_eq!(r.error, None);
    c.pending_write("g")
        .expect("the new group's document is being written")
        .wait()
        .await
        .expect("durable");
    let c2 = open(&fs.crash_image(Tear::None), &clock);
    assert_eq!(c2.list(&[], &[])[0].group_type, "share");
    assert_eq!(c2.list(&[], &[])[0].state, "Empty");
    let recorded = c2.share_partitions("g").expect("a share group");
    assert_eq!(recorded.get("t"), Some(&(T, BTreeSet::from([0, 1, 2]))));
    assert_eq!(recorded.get("u"), Some(&(U, BTreeSet::from([0]))));
    // Members rejoin: the old member's epoch is not known any more.
    let stale = c2.share_heartbeat(hb("g", M1, r.member_epoch, None), &view);
    assert_eq!(stale.error, Some(not_a_member()));
    let back = c2.share_heartbeat(hb("g", M1, 0, Some(&["t"])), &view);
    assert_eq!(back.error, None);
    assert_eq!(back.assignment, Some(vec![(T, vec![0, 1, 2])]));
    // A topic deleted and created again under the same name: its
    // share-partitions start over under the new id.
    let t2 = Uuid::from_u128(0x9);
    let view2 = View::new(&[("t", t2, 1)]);
    // (after the assignment interval, so that a new target is computed)
    clock.advance(std::time::Duration::from_millis(1_001));
    let again = c2.share_heartbeat(hb("g", M1, back.member_epoch, None), &view2);
    assert_eq!(again.error, None);
    let recorded = c2.share_partitions("g").expect("a share group");
    assert_eq!(recorded.get("t"), Some(&(t2, BTreeSet::from([0]))));
}

/// Share-partitions that AlterShareGroupOffsets initialised are assignable
/// at the first join (Kafka 4.4 initialises them in the share coordinator
/// there too); a topic nobody initialised waits for a later heartbeat.
#[tokio::test]
async fn share_partitions_initialised_by_the_offsets_admin_are_assigned_at_the_join() {
    let clock = ManualClock::new(1_000);
    let c = open(&SimFs::new(), &clock);
    let view = View::new(&[("t", T, 2), ("u", U, 1)]);
    c.share_offsets_alterable("g")
        .expect("an empty share group");
    assert!(c.share_partitions_record("g", "t", T, &[0, 1]).is_some());
    let r = c.share_heartbeat(hb("g", M1, 0, Some(&["t", "u"])), &view);
    assert_eq!(r.error, None);
    assert_eq!(r.assignment, Some(vec![(T, vec![0, 1])]), "u's waits");
    let recorded = c.share_partitions("g").expect("share group");
    assert_eq!(recorded.get("u"), Some(&(U, BTreeSet::from([0]))));
    clock.advance(std::time::Duration::from_millis(1_000));
    let r = c.share_heartbeat(hb("g", M1, r.member_epoch, None), &view);
    assert_eq!(r.assignment, Some(vec![(T, vec![0, 1]), (U, vec![0])]));
}

#[tokio::test]
async fn a_silent_member_is_fenced_after_its_session_timeout() {
    let clock = ManualClock::new(1_000);
    let c = open(&SimFs::new(), &clock);
    let view = View::new(&[("t", T, 1)]);
    let r1 = c.share_heartbeat(hb("g", M1, 0, Some(&["t"])), &view);
    assert_eq!(r1.error, None);
    clock.advance(std::time::Duration::from_millis(30_000));
    let r2 = c.share_heartbeat(hb("g", M2, 0, Some(&["t"])), &view);
    assert_eq!(r2.error, None);
    clock.advance(std::time::Duration::from_millis(15_001));
    // M1's 45 s session has passed; the coordinator's next look at the
    // group (here M2's heartbeat) fences it.
    let r2b = c.share_heartbeat(hb("g", M2, r2.member_epoch, None), &view);
    assert_eq!(r2b.error, None);
    let d = c.share_describe("g", &view).expect("group");
    let ids: Vec<&str> = d.members.iter().map(|m| m.member_id.as_str()).collect();
    assert_eq!(ids, vec![M2]);
    let late = c.share_heartbeat(hb("g", M1, r1.member_epoch, None), &view);
    assert_eq!(late.error, Some(not_a_member()));
}

#[tokio::test]
async fn a_group_s_own_share_configs_apply() {
    let clock = ManualClock::new(1_000);
    let c = open(&SimFs::new(), &clock);
    let view = View::new(&[("t", T, 1)]);
    c.set_group_overrides(
        "g",
        GroupOverrides {
            share_heartbeat_interval_ms: Some(7_000),
            share_session_timeout_ms: Some(50_000),
            ..Default::default()
        },
    );
    let r = c.share_heartbeat(hb("g", M1, 0, Some(&["t"])), &view);
    assert_eq!(r.heartbeat_interval_ms, 7_000);
    // Changed while the group runs: the next heartbeat carries it.
    c.set_group_overrides(
        "g",
        GroupOverrides {
            share_heartbeat_interval_ms: Some(6_000),
            ..Default::default()
        },
    );
    let r = c.share_heartbeat(hb("g", M1, r.member_epoch, None), &view);
    assert_eq!(r.heartbeat_interval_ms, 6_000);
}
