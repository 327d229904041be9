//! Tests of the KIP-848 consumer group machine: heartbeats drive one group
//! over a fake topic view and clock, covering joining, reconciliation
//! through revocation, session and rebalance timeouts, static members,
//! regex subscriptions, offset checks and request validation.

use bytes::Bytes;
use kafka_protocol::messages::ConsumerProtocolSubscription;

use super::*;
use crate::errors::{code, ResponseError};

/// An assignment from a response's list of (topic id, partitions).
fn to_assignment(list: &[(Uuid, Vec<i32>)]) -> Assignment {
    let mut a = Assignment::new();
    for (t, ps) in list {
        a.entry(*t).or_default().extend(ps.iter().copied());
    }
    a.retain(|_, ps| !ps.is_empty());
    a
}

pub struct Topics(pub BTreeMap<String, (Uuid, i32)>);

impl TopicView for Topics {
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
        self.0
            .values()
            .fold(0, |g, (id, _)| g.wrapping_add(id.as_u64_pair().0))
    }
}

fn topics(list: &[(&str, i32)]) -> Topics {
    Topics(
        list.iter()
            .map(|(n, c)| (n.to_string(), (Uuid::new_v4(), *c)))
            .collect(),
    )
}

/// Kafka before 4.3: a target assignment at every group epoch bump
/// (`group.consumer.assignment.interval.ms` = 0).
fn unbatched() -> GroupConfig {
    GroupConfig {
        consumer_assignment_interval_ms: 0,
        ..GroupConfig::default()
    }
}

fn join(member: &str, topics: &[&str]) -> HeartbeatRequest {
    HeartbeatRequest {
        group_id: "g".into(),
        member_id: member.into(),
        member_epoch: 0,
        rebalance_timeout_ms: 30_000,
        subscribed_topic_names: Some(topics.iter().map(|s| s.to_string()).collect()),
        topic_partitions: Some(Vec::new()),
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        ..Default::default()
    }
}

fn beat(member: &str, epoch: i32, owned: Option<Vec<(Uuid, Vec<i32>)>>) -> HeartbeatRequest {
    HeartbeatRequest {
        group_id: "g".into(),
        member_id: member.into(),
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        topic_partitions: owned,
        ..Default::default()
    }
}

fn count(r: &HeartbeatResponse) -> usize {
    r.assignment
        .as_ref()
        .map_or(0, |a| a.iter().map(|(_, p)| p.len()).sum())
}

#[test]
fn subscription_topics_parse_the_v0_prefix() {
    use bytes::BufMut;
    use kafka_protocol::protocol::{Encodable, StrBytes};
    let mut s = ConsumerProtocolSubscription::default();
    s.topics = vec![
        StrBytes::from_static_str("a"),
        StrBytes::from_static_str("b"),
    ];
    let mut buf = bytes::BytesMut::new();
    buf.put_i16(3);
    s.encode(&mut buf, 3).expect("encode");
    assert_eq!(
        subscription_topics(&buf.freeze()),
        Some(vec!["a".to_string(), "b".to_string()])
    );
    assert_eq!(subscription_topics(&Bytes::from_static(b"x")), None);
}

#[test]
fn one_member_gets_everything_then_shares_through_revocation() {
    let t = topics(&[("t", 4)]);
    let tid = t.0["t"].0;
    let mut g = ConsumerGroup::new("g", unbatched());
    let r1 = g.heartbeat(0, join("m1", &["t"]), &t);
    assert_eq!(r1.error, None);
    // Kafka 4.4: a new group is at epoch 1; m1's subscription bumps it.
    assert_eq!(r1.member_epoch, 2);
    assert_eq!(count(&r1), 4);
    assert_eq!(g.state_name(), "Stable");

    // m2 joins: epoch 3; its partitions are still m1's (unreleased).
    let r2 = g.heartbeat(10, join("m2", &["t"]), &t);
    assert_eq!(r2.member_epoch, 3);
    assert_eq!(count(&r2), 0);
    assert_eq!(g.state_name(), "Reconciling");

    // m1 is asked to revoke two partitions and stays at epoch 2.
    let r = g.heartbeat(20, beat("m1", 2, Some(vec![(tid, vec![0, 1, 2, 3])])), &t);
    assert_eq!(r.member_epoch, 2);
    assert_eq!(count(&r), 2);
    let kept: Vec<i32> = r.assignment.as_ref().expect("assignment")[0].1.clone();

    // m2 still waits.
    let r = g.heartbeat(25, beat("m2", 3, Some(vec![])), &t);
    assert_eq!(count(&r), 0);

    // m1 revoked: moves to epoch 3.
    let r = g.heartbeat(30, beat("m1", 2, Some(vec![(tid, kept.clone())])), &t);
    assert_eq!(r.member_epoch, 3);

    // m2 now gets the released partitions.
    let r = g.heartbeat(40, beat("m2", 3, Some(vec![])), &t);
    assert_eq!(r.member_epoch, 3);
    assert_eq!(count(&r), 2);
    let got: Vec<i32> = r.assignment.as_ref().expect("assignment")[0].1.clone();
    assert!(got.iter().all(|p| !kept.contains(p)));
    let r = g.heartbeat(50, beat("m2", 3, Some(vec![(tid, got)])), &t);
    assert_eq!(r.error, None);
    assert_eq!(g.state_name(), "Stable");

    // A stale epoch is fenced; an unknown member is unknown.
    let r = g.heartbeat(60, beat("m2", 2, Some(vec![])), &t);
    assert_eq!(
        r.error.as_ref().map(GroupError::code),
        Some(code(ResponseError::FencedMemberEpoch))
    );
    let r = g.heartbeat(60, beat("zz", 4, None), &t);
    assert_eq!(
        r.error.as_ref().map(GroupError::code),
        Some(code(ResponseError::UnknownMemberId))
    );

    // m1 leaves: m2 gets everything at the next epoch.
    let r = g.heartbeat(70, beat("m1", -1, None), &t);
    assert_eq!((r.error, r.member_epoch), (None, -1));
    let r = g.heartbeat(80, beat("m2", 3, None), &t);
    assert_eq!(r.member_epoch, 4);
    assert_eq!(count(&r), 4);
}

#[test]
fn transactional_commits_skip_the_offset_commit_v9_rule() {
    let t = topics(&[("t", 1)]);
    let mut g = ConsumerGroup::new("g", unbatched());
    let r = g.heartbeat(0, join("m1", &["t"]), &t);
    let epoch = r.member_epoch;
    assert_eq!(
        g.validate_offset_commit("m1", None, epoch, false, 8),
        Err(GroupError::UnsupportedVersion)
    );
    assert_eq!(g.validate_offset_commit("m1", None, epoch, true, 8), Ok(()));
    assert_eq!(
        g.validate_offset_commit("m1", None, epoch, false, 9),
        Ok(())
    );
    assert_eq!(
        g.validate_offset_commit("m1", None, epoch + 1, true, 8),
        Err(GroupError::StaleMemberEpoch)
    );
}

#[test]
fn session_timeout_fences_and_reassigns() {
    let t = topics(&[("t", 2)]);
    let cfg = unbatched();
    let mut g = ConsumerGroup::new("g", cfg);
    g.heartbeat(0, join("m1", &["t"]), &t);
    g.heartbeat(0, join("m2", &["t"]), &t);
    let session = timeout(cfg.consumer_session_timeout_ms);
    // m2 keeps heartbeating; m1 goes silent.
    g.heartbeat(session / 2, beat("m2", 3, Some(vec![])), &t);
    assert_eq!(g.next_deadline(), Some(session));
    g.tick(session);
    assert_eq!(g.members.len(), 1);
    let r = g.heartbeat(session + 1, beat("m2", 3, Some(vec![])), &t);
    assert_eq!(r.member_epoch, 4);
    assert_eq!(count(&r), 2);
}

#[test]
fn static_member_comes_back_with_its_partitions() {
    let t = topics(&[("t", 4)]);
    let mut g = ConsumerGroup::new("g", unbatched());
    let mut a = join("a1", &["t"]);
    a.instance_id = Some("ia".into());
    g.heartbeat(0, a, &t);
    let mut b = join("b1", &["t"]);
    b.instance_id = Some("ib".into());
    g.heartbeat(0, b, &t);
    // Settle.
    for now in 1..6 {
        let mut x = beat(
            "a1",
            g.members["a1"].member_epoch,
            Some(to_list(&g.members["a1"].assigned)),
        );
        x.instance_id = Some("ia".into());
        g.heartbeat(now, x, &t);
        let mut y = beat(
            "b1",
            g.members["b1"].member_epoch,
            Some(to_list(&g.members["b1"].assigned)),
        );
        y.instance_id = Some("ib".into());
        g.heartbeat(now, y, &t);
    }
    assert_eq!(g.state_name(), "Stable");
    let epoch = g.group_epoch();
    let before = g.members["a1"].assigned.clone();
    // a1 leaves temporarily.
    let mut l = beat("a1", LEAVE_GROUP_STATIC_MEMBER_EPOCH, None);
    l.instance_id = Some("ia".into());
    assert_eq!(g.heartbeat(10, l, &t).member_epoch, -2);
    // A new instance with the same instance id takes over.
    let mut a2 = join("a2", &["t"]);
    a2.instance_id = Some("ia".into());
    let r = g.heartbeat(20, a2, &t);
    assert_eq!(r.error, None);
    assert_eq!(g.group_epoch(), epoch, "no rebalance");
    assert_eq!(to_assignment(&r.assignment.expect("assignment")), before);
    // Someone else claiming an instance id in use is refused.
    let mut x = join("x", &["t"]);
    x.instance_id = Some("ib".into());
    assert_eq!(
        g.heartbeat(30, x, &t).error.as_ref().map(GroupError::code),
        Some(code(ResponseError::UnreleasedInstanceId))
    );
}

#[test]
fn a_member_that_does_not_revoke_is_fenced_at_its_rebalance_timeout() {
    let t = topics(&[("t", 2)]);
    let tid = t.0["t"].0;
    let mut g = ConsumerGroup::new("g", unbatched());
    g.heartbeat(0, join("m1", &["t"]), &t);
    g.heartbeat(0, join("m2", &["t"]), &t);
    // m1 is told to give one partition up and keeps reporting both.
    let r = g.heartbeat(1_000, beat("m1", 2, Some(vec![(tid, vec![0, 1])])), &t);
    assert_eq!((r.member_epoch, count(&r)), (2, 1));
    let owned_all = || Some(vec![(tid, vec![0, 1])]);
    for now in [5_000, 10_000, 20_000, 30_000] {
        g.tick(now);
        let r = g.heartbeat(now, beat("m1", 2, owned_all()), &t);
        assert_eq!(r.error, None, "still within its 30 s rebalance timeout");
        g.heartbeat(now, beat("m2", 3, Some(vec![])), &t);
    }
    g.tick(31_000);
    assert!(!g.members.contains_key("m1"), "fenced");
    let r = g.heartbeat(31_500, beat("m2", 3, Some(vec![])), &t);
    assert_eq!((r.member_epoch, count(&r)), (4, 2));
    let r = g.heartbeat(32_000, beat("m1", 2, owned_all()), &t);
    assert_eq!(
        r.error.as_ref().map(GroupError::code),
        Some(code(ResponseError::UnknownMemberId))
    );
}

#[test]
fn a_fenced_member_rejoins_with_epoch_zero_under_its_id() {
    let t = topics(&[("t", 2)]);
    let mut g = ConsumerGroup::new("g", unbatched());
    let r = g.heartbeat(0, join("m1", &["t"]), &t);
    assert_eq!((r.member_epoch, count(&r)), (2, 2));
    // The client lost its state and joins again with the same id.
    let r = g.heartbeat(10, join("m1", &["t"]), &t);
    assert_eq!(r.error, None);
    assert_eq!(
        (r.member_epoch, count(&r)),
        (2, 2),
        "same target, no new epoch"
    );
    assert_eq!(g.group_epoch(), 2);
}

fn join_regex(member: &str, names: &[&str], regex: &str) -> HeartbeatRequest {
    let mut r = join(member, names);
    r.subscribed_topic_regex = Some(regex.to_string());
    r
}

/// Topic names of an assignment, sorted.
fn assigned_names(t: &Topics, r: &HeartbeatResponse) -> Vec<String> {
    let mut names: Vec<String> = r
        .assignment
        .as_ref()
        .map(|a| a.iter().filter_map(|(id, _)| t.name_of(*id)).collect())
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn an_empty_regex_means_no_regex() {
    // librdkafka sends SubscribedTopicRegex "" with a plain subscription.
    let t = topics(&[("t", 2), ("u", 1)]);
    let mut g = ConsumerGroup::new("g", unbatched());
    let r = g.heartbeat(0, join_regex("m1", &["t"], ""), &t);
    assert_eq!(r.error, None, "{:?}", r.error);
    assert_eq!(assigned_names(&t, &r), vec!["t"]);
    assert!(g.regexes.is_empty());
    let d = g.describe(&t);
    assert_eq!(d.members[0].subscribed_topic_regex, "");
    // Joining with an empty list of names (and no regex) is allowed: the
    // member is in the group with nothing to consume.
    let r = g.heartbeat(0, join("m2", &[]), &t);
    assert_eq!(r.error, None, "{:?}", r.error);
    assert_eq!(count(&r), 0);
    // Neither names nor regex on a join is refused.
    let mut r = join("m3", &[]);
    r.subscribed_topic_names = None;
    assert_eq!(
        g.heartbeat(0, r, &t).error.as_ref().map(GroupError::code),
        Some(code(ResponseError::InvalidRequest))
    );
}

#[test]
fn a_regex_subscribes_to_matching_topics_and_later_ones() {
    let mut t = topics(&[("p-1", 2), ("q-1", 1), ("xp-1", 1)]);
    let mut g = ConsumerGroup::new("g", unbatched());
    let r = g.heartbeat(0, join_regex("m1", &[], "p-.*"), &t);
    assert_eq!(r.error, None, "{:?}", r.error);
    // Whole-name matching: `xp-1` does not match `p-.*`.
    assert_eq!(assigned_names(&t, &r), vec!["p-1"]);
    assert_eq!((r.member_epoch, count(&r)), (2, 2));
    let owned = r.assignment.clone();
    let d = g.describe(&t);
    assert_eq!(d.members[0].subscribed_topic_regex, "p-.*");
    assert!(d.members[0].subscribed_topic_names.is_empty());

    // Nothing changed: no new epoch, no assignment sent.
    let r = g.heartbeat(10, beat("m1", 2, owned.clone()), &t);
    assert_eq!((r.error, r.member_epoch, r.assignment), (None, 2, None));

    // A matching topic is created: the next heartbeat assigns it.
    t.0.insert("p-2".into(), (Uuid::new_v4(), 3));
    t.0.insert("q-2".into(), (Uuid::new_v4(), 3));
    let r = g.heartbeat(20, beat("m1", 2, owned), &t);
    assert_eq!(r.error, None);
    assert_eq!(r.member_epoch, 3);
    assert_eq!(assigned_names(&t, &r), vec!["p-1", "p-2"]);
    assert_eq!(count(&r), 5);

    // A second member with the same regex shares the resolved topics.
    let r = g.heartbeat(30, join_regex("m2", &[], "p-.*"), &t);
    assert_eq!((r.error, r.member_epoch), (None, 4));
    assert_eq!(g.regexes.len(), 1);

    // Deleting a matching topic drops it from the subscription.
    t.0.remove("p-2");
    let r = g.heartbeat(40, beat("m2", 4, Some(vec![])), &t);
    assert_eq!((r.error, r.member_epoch), (None, 5));
    assert!(!g.subscribed_topic_names().contains("p-2"));
}

#[test]
fn names_and_regex_are_a_union_and_an_empty_regex_drops_the_regex() {
    let t = topics(&[("a", 1), ("p-1", 1), ("p-2", 1), ("z", 1)]);
    let mut g = ConsumerGroup::new("g", unbatched());
    let r = g.heartbeat(0, join_regex("m1", &["a"], "p-1|p-2"), &t);
    assert_eq!(r.error, None, "{:?}", r.error);
    assert_eq!(assigned_names(&t, &r), vec!["a", "p-1", "p-2"]);
    let owned = r.assignment.clone();

    // A null regex leaves the regex as it is.
    let mut b = beat("m1", 2, owned.clone());
    b.subscribed_topic_names = Some(vec!["a".into(), "z".into()]);
    let r = g.heartbeat(10, b, &t);
    assert_eq!(r.member_epoch, 3);
    assert_eq!(assigned_names(&t, &r), vec!["a", "p-1", "p-2", "z"]);
    let owned = r.assignment.clone();

    // An empty regex removes it: its topics are revoked first.
    let mut b = beat("m1", 3, owned);
    b.subscribed_topic_regex = Some(String::new());
    let r = g.heartbeat(20, b, &t);
    assert_eq!(r.error, None);
    assert_eq!(assigned_names(&t, &r), vec!["a", "z"]);
    assert!(g.regexes.is_empty(), "no member uses the regex any more");
    assert_eq!(g.describe(&t).members[0].subscribed_topic_regex, "");
}

#[test]
fn an_invalid_regex_is_refused_and_changes_nothing() {
    let t = topics(&[("t", 1)]);
    let mut g = ConsumerGroup::new("g", unbatched());
    for bad in ["^.*[0", "a)|(b", "(?<", "x{2,1}"] {
        let r = g.heartbeat(0, join_regex("m1", &[], bad), &t);
        assert_eq!(
            r.error.as_ref().map(GroupError::code),
            Some(code(ResponseError::InvalidRegularExpression)),
            "{bad}"
        );
        let msg = r
            .error
            .as_ref()
            .and_then(GroupError::message)
            .expect("message");
        assert!(
            msg.starts_with(&format!("SubscribedTopicRegex `{bad}` is not a valid")),
            "{msg}"
        );
        assert!(g.is_empty());
        assert_eq!(g.group_epoch(), 1);
    }
    // A member in the group that switches to a bad regex keeps its
    // subscription.
    let r = g.heartbeat(0, join("m1", &["t"]), &t);
    assert_eq!(r.member_epoch, 2);
    let mut b = beat("m1", 2, r.assignment.clone());
    b.subscribed_topic_regex = Some("[".into());
    let r = g.heartbeat(10, b, &t);
    assert_eq!(
        r.error.as_ref().map(GroupError::code),
        Some(code(ResponseError::InvalidRegularExpression))
    );
    assert_eq!(g.group_epoch(), 2);
    assert!(g.regexes.is_empty());
}

#[test]
fn a_fenced_regex_member_releases_its_regex() {
    let t = topics(&[("p-1", 1)]);
    let cfg = unbatched();
    let mut g = ConsumerGroup::new("g", cfg);
    g.heartbeat(0, join_regex("m1", &[], "p-.*"), &t);
    assert_eq!(g.regexes.len(), 1);
    g.tick(timeout(cfg.consumer_session_timeout_ms));
    assert!(g.is_empty());
    assert!(g.regexes.is_empty());
    assert_eq!(g.regex_generation, None);
}

#[test]
fn regex_syntax_and_size_are_checked() {
    let re = compile_topic_regex("^prefix-.*").expect("valid");
    assert!(re.is_match("prefix-1"));
    assert!(!re.is_match("xprefix-1"));
    let re = compile_topic_regex("a|ab").expect("valid");
    assert!(re.is_match("ab"), "whole-name match, not leftmost-first");
    assert!(compile_topic_regex("a{1000}{1000}").is_err(), "too big");
}

#[test]
fn bad_requests_are_refused() {
    let t = topics(&[("t", 1)]);
    let mut g = ConsumerGroup::new("g", unbatched());
    let mut r = join("m", &["t"]);
    r.topic_partitions = None;
    assert_eq!(
        g.heartbeat(0, r, &t).error.as_ref().map(GroupError::code),
        Some(code(ResponseError::InvalidRequest))
    );
    let mut r = join("m", &["t"]);
    r.server_assignor = Some("sticky".into());
    assert_eq!(
        g.heartbeat(0, r, &t).error.as_ref().map(GroupError::code),
        Some(code(ResponseError::UnsupportedAssignor))
    );
    let r = beat("m", -3, None);
    assert_eq!(
        g.heartbeat(0, r, &t).error.as_ref().map(GroupError::code),
        Some(code(ResponseError::InvalidRequest))
    );
    assert!(g.is_empty());
}

#[test]
fn a_member_joining_with_no_subscription_does_not_bump_the_epoch() {
    let t = topics(&[("t", 2)]);
    let mut g = ConsumerGroup::new("g", unbatched());
    let r = g.heartbeat(0, join("m1", &[]), &t);
    assert_eq!((r.error, r.member_epoch), (None, 1));
    assert_eq!(g.group_epoch(), 1);
    // A subscription does; so does a change of the preferred assignor.
    let r = g.heartbeat(10, join("m2", &["t"]), &t);
    assert_eq!((r.member_epoch, count(&r)), (2, 2));
    let mut b = beat("m1", 1, Some(vec![]));
    b.server_assignor = Some("range".into());
    let r = g.heartbeat(20, b, &t);
    assert_eq!(r.error, None);
    assert_eq!(g.group_epoch(), 3);
}

/// KIP-1263 (Kafka 4.3+): at most one target assignment per
/// `group.consumer.assignment.interval.ms`; a member joining sooner gets the
/// last target's epoch and nothing, the group is "Assigning" until a
/// heartbeat after the interval computes the next target.
#[test]
fn targets_are_computed_at_most_once_per_assignment_interval() {
    let t = topics(&[("t", 3)]);
    let mut g = ConsumerGroup::new("g", GroupConfig::default());
    assert_eq!(g.config.consumer_assignment_interval_ms, 1_000);
    let r = g.heartbeat(0, join("m1", &["t"]), &t);
    assert_eq!((r.member_epoch, count(&r)), (2, 3));
    let r = g.heartbeat(100, join("m2", &["t"]), &t);
    assert_eq!((r.member_epoch, count(&r)), (2, 0));
    assert_eq!((g.group_epoch(), g.assignment_epoch), (3, 2));
    assert_eq!(g.state_name(), "Assigning");
    // Still within the interval: nothing moves.
    let r = g.heartbeat(999, beat("m2", 2, Some(vec![])), &t);
    assert_eq!((r.member_epoch, count(&r)), (2, 0));
    assert_eq!(g.assignment_epoch, 2);
    // The interval has passed: the next heartbeat computes the target.
    let r = g.heartbeat(1_000, beat("m2", 2, Some(vec![])), &t);
    assert_eq!(r.error, None);
    assert_eq!(g.assignment_epoch, 3);
    assert_eq!(g.state_name(), "Reconciling");
}
