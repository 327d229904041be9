//! Tests of the share group machine: heartbeats drive one group over a
//! fixed topic map and a fake clock (milliseconds passed in, no sleeps).
//! Every rule and error of docs/share-groups-design.md §2.7 has a named
//! case with Kafka's error code and message; a proptest drives random
//! joins, heartbeats, leaves, clock ticks, subscription and topic changes
//! against a small model of who is in the group.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use uuid::Uuid;

use super::*;

const G: &str = "g";

fn topic_id(n: u128) -> Uuid {
    Uuid::from_u128(n + 1)
}

/// Topics with fixed ids (the i-th topic of the list has id i+1).
fn topics(list: &[(&str, i32)]) -> Topics {
    list.iter()
        .enumerate()
        .map(|(i, (n, c))| (n.to_string(), (topic_id(i as u128), *c)))
        .collect()
}

fn req(member: &str, epoch: i32, subscribed: Option<&[&str]>) -> ShareHeartbeatRequest {
    ShareHeartbeatRequest {
        group_id: G.into(),
        member_id: member.into(),
        member_epoch: epoch,
        rack_id: None,
        subscribed_topic_names: subscribed.map(|s| s.iter().map(|t| t.to_string()).collect()),
        client_id: "client".into(),
        client_host: "/10.0.0.1".into(),
    }
}

fn join(
    g: &mut ShareGroup,
    now: Millis,
    member: &str,
    subscribed: &[&str],
    t: &Topics,
) -> ShareHeartbeatResponse {
    g.heartbeat(now, &req(member, 0, Some(subscribed)), t)
}

/// A heartbeat at the member's current epoch, sending nothing else.
fn beat(g: &mut ShareGroup, now: Millis, member: &str, t: &Topics) -> ShareHeartbeatResponse {
    let epoch = g.member_epoch(member).unwrap_or(1);
    g.heartbeat(now, &req(member, epoch, None), t)
}

/// (code, message) of a refused response.
fn refusal(r: &ShareHeartbeatResponse) -> (i16, String) {
    let e = r.error.as_ref().expect("a refusal");
    (e.code(), e.message().unwrap_or_default())
}

fn refused(e: GroupError) -> (i16, String) {
    (e.code(), e.message().unwrap_or_default())
}

fn parts(list: &[(Uuid, Vec<i32>)]) -> BTreeSet<(Uuid, i32)> {
    list.iter()
        .flat_map(|(t, ps)| ps.iter().map(move |p| (*t, *p)))
        .collect()
}

fn all_of(t: &Topics, names: &[&str]) -> BTreeSet<(Uuid, i32)> {
    names
        .iter()
        .filter_map(|n| t.get(*n))
        .flat_map(|(id, c)| (0..*c).map(move |p| (*id, p)))
        .collect()
}

fn config() -> ShareGroupConfig {
    ShareGroupConfig::default()
}

/// A group whose share-partitions of `t` are all initialised already (by
/// earlier members, or AlterShareGroupOffsets): the steady state most
/// assignment rules are about. A new group's first heartbeats are in
/// "---- initialisation".
fn ready(c: ShareGroupConfig, t: &Topics) -> ShareGroup {
    let mut g = ShareGroup::new(G, c);
    g.set_initialized(t.values().map(|(id, n)| (*id, (0..*n).collect())).collect());
    g
}

/// No assignment interval: a target at every bump.
fn at_once() -> ShareGroupConfig {
    ShareGroupConfig {
        assignment_interval_ms: 0,
        ..ShareGroupConfig::default()
    }
}

const INVALID_REQUEST: i16 = 42;
const UNKNOWN_MEMBER_ID: i16 = 25;
const GROUP_ID_NOT_FOUND: i16 = 69;
const FENCED_MEMBER_EPOCH: i16 = 110;
const GROUP_MAX_SIZE_REACHED: i16 = 81;

// ---- request validation ------------------------------------------------

fn invalid(m: &str) -> Result<(), GroupError> {
    Err(GroupError::InvalidRequest(m.to_string()))
}

#[test]
fn empty_member_id_is_invalid_request() {
    let r = req("", 0, Some(&["a"]));
    assert_eq!(validate(&r), invalid("MemberId can't be empty."));
    let mut g = ShareGroup::new(G, config());
    let resp = g.heartbeat(0, &r, &topics(&[("a", 1)]));
    assert_eq!(
        refusal(&resp),
        (INVALID_REQUEST, "MemberId can't be empty.".into())
    );
    assert!(g.is_empty());
}

#[test]
fn empty_group_id_is_invalid_request() {
    let mut r = req("m", 0, Some(&["a"]));
    r.group_id = String::new();
    assert_eq!(validate(&r), invalid("GroupId can't be empty."));
    // The member id is checked first.
    r.member_id = String::new();
    assert_eq!(validate(&r), invalid("MemberId can't be empty."));
}

#[test]
fn empty_rack_id_is_invalid_request_and_null_is_not() {
    let mut r = req("m", 0, Some(&["a"]));
    r.rack_id = Some(String::new());
    assert_eq!(validate(&r), invalid("RackId can't be empty."));
    let e = validate(&r).unwrap_err();
    assert_eq!(
        refused(e),
        (INVALID_REQUEST, "RackId can't be empty.".into())
    );
    r.rack_id = None;
    assert_eq!(validate(&r), Ok(()));
    r.rack_id = Some("rack-1".into());
    assert_eq!(validate(&r), Ok(()));
}

#[test]
fn first_request_needs_subscribed_topic_names() {
    let m = "SubscribedTopicNames must be set in first request.";
    assert_eq!(validate(&req("m", 0, None)), invalid(m));
    assert_eq!(validate(&req("m", 0, Some(&[]))), invalid(m));
    // Later heartbeats may leave it null, or empty (subscribed to nothing).
    assert_eq!(validate(&req("m", 3, None)), Ok(()));
    assert_eq!(validate(&req("m", 3, Some(&[]))), Ok(()));
    let mut g = ShareGroup::new(G, config());
    let resp = g.heartbeat(0, &req("m", 0, None), &topics(&[("a", 1)]));
    assert_eq!(refusal(&resp), (INVALID_REQUEST, m.into()));
    assert_eq!(g.group_epoch(), 1, "a refused join changes nothing");
}

#[test]
fn member_epoch_below_minus_one_is_invalid() {
    for epoch in [-2, -100, i32::MIN] {
        assert_eq!(
            validate(&req("m", epoch, Some(&["a"]))),
            invalid("MemberEpoch is invalid.")
        );
    }
    assert_eq!(validate(&req("m", -1, None)), Ok(()));
}

#[test]
fn member_id_check_of_the_request_layer() {
    let m = "Invalid member id in the request.";
    assert_eq!(check_member_id(""), invalid(m));
    let e = check_member_id(&"x".repeat(37)).unwrap_err();
    assert_eq!(refused(e), (INVALID_REQUEST, m.into()));
    assert_eq!(check_member_id(&"x".repeat(36)), Ok(()));
    assert_eq!(check_member_id(&Uuid::new_v4().to_string()), Ok(()));
    // Java counts UTF-16 units: 36 two-byte letters pass, 19 emoji (38
    // units) do not.
    assert_eq!(check_member_id(&"é".repeat(36)), Ok(()));
    assert_eq!(check_member_id(&"😀".repeat(19)), invalid(m));
}

// ---- group lookup --------------------------------------------------------

#[test]
fn group_lookup_as_kafka() {
    assert_eq!(check_group("g", Existing::Nothing, 0), Ok(true));
    assert_eq!(check_group("g", Existing::Share, 0), Ok(false));
    assert_eq!(check_group("g", Existing::Share, 7), Ok(false));
    assert_eq!(check_group("g", Existing::Share, -1), Ok(false));
    assert_eq!(
        refused(check_group("g", Existing::Nothing, 3).unwrap_err()),
        (GROUP_ID_NOT_FOUND, "Share group g not found.".into())
    );
    assert_eq!(
        refused(check_group("g", Existing::Nothing, -1).unwrap_err()),
        (GROUP_ID_NOT_FOUND, "Group g not found.".into())
    );
    for epoch in [0, 3, -1] {
        assert_eq!(
            refused(check_group("g", Existing::OtherType, epoch).unwrap_err()),
            (GROUP_ID_NOT_FOUND, "Group g is not a share group.".into())
        );
    }
}

// ---- joining and heartbeats -----------------------------------------------

#[test]
fn join_creates_the_member_bumps_the_epoch_and_assigns() {
    let t = topics(&[("a", 3)]);
    let mut g = ready(config(), &t);
    assert_eq!(g.state(), ShareGroupState::Empty);
    assert_eq!(g.group_epoch(), 1);
    let r = join(&mut g, 0, "m1", &["a"], &t);
    assert_eq!(r.error, None);
    assert_eq!(r.member_id.as_deref(), Some("m1"));
    assert_eq!(r.member_epoch, 2);
    assert_eq!(r.heartbeat_interval_ms, 5_000);
    assert_eq!(parts(r.assignment.as_deref().unwrap()), all_of(&t, &["a"]));
    assert_eq!((g.group_epoch(), g.assignment_epoch()), (2, 2));
    assert_eq!(g.state(), ShareGroupState::Stable);
    assert_eq!(g.state().name(), "Stable");
}

/// `c` with a group's own `share.*` configs, as the coordinator applies
/// them (`GroupOverrides`, `GroupConfig::with_overrides`).
fn with_group_configs(c: ShareGroupConfig, configs: &BTreeMap<String, String>) -> ShareGroupConfig {
    let base = crate::groups::GroupConfig {
        share: c,
        ..Default::default()
    };
    base.with_overrides(&crate::config::GroupOverrides::from_configs(configs))
        .share
}

#[test]
fn heartbeat_interval_comes_from_the_config() {
    let t = topics(&[("a", 1)]);
    let cfg = with_group_configs(
        config(),
        &BTreeMap::from([(
            "share.heartbeat.interval.ms".to_string(),
            "7000".to_string(),
        )]),
    );
    let mut g = ShareGroup::new(G, cfg);
    assert_eq!(
        join(&mut g, 0, "m1", &["a"], &t).heartbeat_interval_ms,
        7_000
    );
    assert_eq!(beat(&mut g, 1, "m1", &t).heartbeat_interval_ms, 7_000);
}

#[test]
fn group_configs_override_the_broker_defaults() {
    let d = ShareGroupConfig::default();
    assert_eq!(
        (
            d.session_timeout_ms,
            d.heartbeat_interval_ms,
            d.assignment_interval_ms,
            d.members_max
        ),
        (45_000, 5_000, 1_000, 200)
    );
    let c = with_group_configs(
        d,
        &BTreeMap::from([
            ("share.session.timeout.ms".to_string(), "60000".to_string()),
            (
                "share.assignment.interval.ms".to_string(),
                " 0 ".to_string(),
            ),
            ("share.heartbeat.interval.ms".to_string(), "x".to_string()),
            ("consumer.session.timeout.ms".to_string(), "1".to_string()),
        ]),
    );
    assert_eq!(
        (
            c.session_timeout_ms,
            c.heartbeat_interval_ms,
            c.assignment_interval_ms
        ),
        (60_000, 5_000, 0)
    );
}

#[test]
fn unknown_member_is_unknown_member_id() {
    let t = topics(&[("a", 1)]);
    let mut g = ShareGroup::new(G, config());
    join(&mut g, 0, "m1", &["a"], &t);
    let r = g.heartbeat(1, &req("m9", 2, None), &t);
    assert_eq!(
        refusal(&r),
        (
            UNKNOWN_MEMBER_ID,
            "Member m9 is not a member of group g.".into()
        )
    );
    assert_eq!(g.member_count(), 1);
}

#[test]
fn epoch_ahead_is_fenced_member_epoch() {
    let t = topics(&[("a", 1)]);
    let mut g = ShareGroup::new(G, config());
    join(&mut g, 0, "m1", &["a"], &t);
    let r = g.heartbeat(1, &req("m1", 3, None), &t);
    assert_eq!(
        refusal(&r),
        (
            FENCED_MEMBER_EPOCH,
            "The share group member has a greater member epoch (3) than the one known by the group coordinator (2). The member must abandon all its partitions and rejoin.".into()
        )
    );
    assert_eq!(g.member_epoch("m1"), Some(2), "a refusal changes nothing");
}

/// m1 at epoch 3 with previous epoch 2: epoch 2 is accepted (the response
/// that moved it on may have been lost), epoch 1 is fenced.
#[test]
fn epoch_behind_is_fenced_unless_it_is_the_previous_one() {
    let t = topics(&[("a", 2)]);
    let mut g = ShareGroup::new(G, at_once());
    join(&mut g, 0, "m1", &["a"], &t);
    join(&mut g, 0, "m2", &["a"], &t);
    assert_eq!(beat(&mut g, 0, "m1", &t).member_epoch, 3);
    let r = g.heartbeat(0, &req("m1", 1, None), &t);
    assert_eq!(
        refusal(&r),
        (
            FENCED_MEMBER_EPOCH,
            "The share group member has a smaller member epoch (1) than the one known by the group coordinator (3), and it does not match the previous member epoch (2). The member must abandon all its partitions and rejoin.".into()
        )
    );
    let r = g.heartbeat(0, &req("m1", 2, None), &t);
    assert_eq!(r.error, None);
    assert_eq!(r.member_epoch, 3);
}

#[test]
fn a_known_member_joining_again_starts_over() {
    let t = topics(&[("a", 2)]);
    let mut g = ready(at_once(), &t);
    join(&mut g, 0, "m1", &["a"], &t);
    let before = g.group_epoch();
    let r = join(&mut g, 5, "m1", &["a"], &t);
    assert_eq!(r.error, None);
    assert_eq!(r.member_epoch, before, "straight back to the target epoch");
    assert_eq!(parts(r.assignment.as_deref().unwrap()), all_of(&t, &["a"]));
    assert_eq!(g.group_epoch(), before, "same subscription: no bump");
    assert_eq!(g.member_count(), 1);
}

// ---- when the response carries the assignment ----------------------------

#[test]
fn assignment_is_sent_on_join_on_subscription_and_on_change_only() {
    let t = topics(&[("a", 2)]);
    let mut g = ready(at_once(), &t);
    let r = join(&mut g, 0, "m1", &["a"], &t);
    assert!(r.assignment.is_some(), "epoch 0");
    let r = beat(&mut g, 1, "m1", &t);
    assert_eq!(r.assignment, None, "nothing changed, nothing sent");
    let e = g.member_epoch("m1").unwrap();
    let r = g.heartbeat(2, &req("m1", e, Some(&["a"])), &t);
    assert_eq!(
        parts(r.assignment.as_deref().unwrap()),
        all_of(&t, &["a"]),
        "SubscribedTopicNames sent, even unchanged"
    );
    // m2 joins; 2 partitions, 2 members: one each, so m1's partitions change.
    join(&mut g, 3, "m2", &["a"], &t);
    let r = beat(&mut g, 4, "m1", &t);
    assert_eq!(r.assignment.map(|a| parts(&a).len()), Some(1));
}

// ---- no revocation ---------------------------------------------------------

#[test]
fn no_revocation_step_members_move_straight_to_the_target() {
    let t = topics(&[("a", 3)]);
    let mut g = ready(at_once(), &t);
    join(&mut g, 0, "m1", &["a"], &t);
    let r = join(&mut g, 0, "m2", &["a"], &t);
    // m2 gets its partitions at once although m1 still holds all three.
    let m2 = parts(r.assignment.as_deref().unwrap());
    assert!(!m2.is_empty());
    assert_eq!(
        g.member_assignment("m1")
            .unwrap()
            .values()
            .map(|s| s.len())
            .sum::<usize>(),
        3
    );
    // m1's next heartbeat: new epoch and the rest, in one step.
    let r = beat(&mut g, 1, "m1", &t);
    assert_eq!(r.member_epoch, g.group_epoch());
    let m1 = parts(r.assignment.as_deref().unwrap());
    assert_eq!(m1.len() + m2.len(), 3);
    assert!(m1.is_disjoint(&m2));
}

#[test]
fn one_partition_is_shared_by_every_member() {
    let t = topics(&[("a", 1)]);
    let mut g = ShareGroup::new(G, at_once());
    for m in ["m1", "m2", "m3"] {
        join(&mut g, 0, m, &["a"], &t);
    }
    for m in ["m1", "m2", "m3"] {
        beat(&mut g, 1, m, &t);
        assert_eq!(
            g.member_assignment(m).unwrap().get(&topic_id(0)),
            Some(&BTreeSet::from([0]))
        );
    }
}

// ---- leaving ---------------------------------------------------------------

#[test]
fn leave_echoes_the_member_and_minus_one_and_bumps_the_epoch() {
    let t = topics(&[("a", 1)]);
    let mut g = ShareGroup::new(G, config());
    join(&mut g, 0, "m1", &["a"], &t);
    let r = g.heartbeat(1, &req("m1", -1, None), &t);
    assert_eq!(
        r,
        ShareHeartbeatResponse {
            error: None,
            member_id: Some("m1".into()),
            member_epoch: -1,
            heartbeat_interval_ms: 0,
            assignment: None,
        }
    );
    assert_eq!(g.group_epoch(), 3);
    assert_eq!(g.state(), ShareGroupState::Empty);
    assert!(g.subscription_metadata().is_empty());
}

#[test]
fn leave_of_an_unknown_member_is_unknown_member_id() {
    let t = topics(&[("a", 1)]);
    let mut g = ShareGroup::new(G, config());
    join(&mut g, 0, "m1", &["a"], &t);
    let r = g.heartbeat(1, &req("m9", -1, None), &t);
    assert_eq!(
        refusal(&r),
        (
            UNKNOWN_MEMBER_ID,
            "Member m9 is not a member of group g.".into()
        )
    );
    assert_eq!(g.group_epoch(), 2);
}

#[test]
fn leaving_drops_the_topics_only_it_subscribed_without_a_second_bump() {
    let t = topics(&[("a", 1), ("b", 1)]);
    let mut g = ShareGroup::new(G, at_once());
    join(&mut g, 0, "m1", &["a"], &t);
    join(&mut g, 0, "m2", &["b"], &t);
    let e = g.member_epoch("m2").unwrap();
    g.heartbeat(1, &req("m2", -1, None), &t);
    let after_leave = g.group_epoch();
    let r = beat(&mut g, 2, "m1", &t);
    assert_eq!(g.group_epoch(), after_leave);
    assert_eq!(r.member_epoch, after_leave);
    assert!(e < after_leave);
    assert_eq!(g.subscription_metadata().keys().collect::<Vec<_>>(), ["a"]);
}

// ---- fencing by session timeout -------------------------------------------

#[test]
fn session_timeout_fences_with_a_fake_clock() {
    let t = topics(&[("a", 2)]);
    let mut g = ShareGroup::new(G, at_once());
    join(&mut g, 0, "m1", &["a"], &t);
    join(&mut g, 0, "m2", &["a"], &t);
    assert_eq!(g.next_deadline(), Some(45_000));
    // m2 heartbeats at 30 s: its session now ends at 75 s.
    beat(&mut g, 30_000, "m2", &t);
    assert_eq!(g.tick(44_999), Vec::<String>::new());
    let epoch = g.group_epoch();
    assert_eq!(g.tick(45_000), vec!["m1".to_string()]);
    assert_eq!(g.group_epoch(), epoch + 1);
    assert_eq!(g.member_ids().collect::<Vec<_>>(), ["m2"]);
    assert_eq!(g.next_deadline(), Some(75_000));
    let r = g.heartbeat(45_001, &req("m1", 2, None), &t);
    assert_eq!(
        refusal(&r),
        (
            UNKNOWN_MEMBER_ID,
            "Member m1 is not a member of group g.".into()
        )
    );
    // m2 takes both partitions at its next heartbeat.
    let r = beat(&mut g, 45_002, "m2", &t);
    assert_eq!(parts(r.assignment.as_deref().unwrap()), all_of(&t, &["a"]));
    assert_eq!(g.next_deadline(), Some(90_002));
    assert!(g.tick(90_001).is_empty());
    assert_eq!(g.tick(90_002), vec!["m2".to_string()]);
    assert_eq!(g.state(), ShareGroupState::Empty);
    assert_eq!(g.next_deadline(), None);
}

#[test]
fn session_timeout_comes_from_the_group_config() {
    let t = topics(&[("a", 1)]);
    let mut cfg = at_once();
    cfg.session_timeout_ms = 10_000;
    let mut g = ShareGroup::new(G, cfg);
    join(&mut g, 100, "m1", &["a"], &t);
    assert_eq!(g.next_deadline(), Some(10_100));
    assert!(g.tick(10_099).is_empty());
    assert_eq!(g.tick(10_100), vec!["m1".to_string()]);
}

// ---- group size ----------------------------------------------------------

#[test]
fn a_full_group_refuses_new_members_with_kafkas_message() {
    let t = topics(&[("a", 1)]);
    let mut g = ShareGroup::new(
        G,
        ShareGroupConfig {
            members_max: 2,
            ..at_once()
        },
    );
    join(&mut g, 0, "m1", &["a"], &t);
    join(&mut g, 0, "m2", &["a"], &t);
    let epoch = g.group_epoch();
    let full = (
        GROUP_MAX_SIZE_REACHED,
        "The share group has reached its maximum capacity of 2 members.".to_string(),
    );
    assert_eq!(refusal(&join(&mut g, 0, "m3", &["a"], &t)), full);
    // Kafka checks the size first: an unknown member with an epoch is
    // refused for the size, not as unknown.
    assert_eq!(refusal(&g.heartbeat(0, &req("m3", 5, None), &t)), full);
    assert_eq!(g.group_epoch(), epoch);
    // Members already in the group go on, and may rejoin.
    assert_eq!(beat(&mut g, 1, "m1", &t).error, None);
    assert_eq!(join(&mut g, 1, "m2", &["a"], &t).error, None);
    // Once one leaves, a new one fits.
    g.heartbeat(2, &req("m1", -1, None), &t);
    assert_eq!(join(&mut g, 2, "m3", &["a"], &t).error, None);
}

#[test]
fn the_default_max_size_is_200() {
    let t = topics(&[("a", 1)]);
    let mut g = ShareGroup::new(G, config());
    for i in 0..200 {
        assert_eq!(join(&mut g, 0, &format!("m{i}"), &["a"], &t).error, None);
    }
    assert_eq!(
        refusal(&join(&mut g, 0, "late", &["a"], &t)),
        (
            GROUP_MAX_SIZE_REACHED,
            "The share group has reached its maximum capacity of 200 members.".into()
        )
    );
}

// ---- epochs and the assignment interval ------------------------------------

#[test]
fn the_target_waits_for_the_assignment_interval() {
    let t = topics(&[("a", 2)]);
    let mut g = ShareGroup::new(G, config()); // 1000 ms
    join(&mut g, 0, "m1", &["a"], &t);
    assert_eq!((g.group_epoch(), g.assignment_epoch()), (2, 2));
    // m2 joins 100 ms later: the group epoch moves, the target does not.
    let r = join(&mut g, 100, "m2", &["a"], &t);
    assert_eq!((g.group_epoch(), g.assignment_epoch()), (3, 2));
    assert_eq!(r.member_epoch, 2);
    assert_eq!(r.assignment, Some(vec![]), "no target yet for m2");
    let r = beat(&mut g, 999, "m2", &t);
    assert_eq!((r.member_epoch, r.assignment), (2, None));
    // At 1000 ms the next heartbeat computes the target.
    let r = beat(&mut g, 1_000, "m2", &t);
    assert_eq!(g.assignment_epoch(), 3);
    assert_eq!(r.member_epoch, 3);
    assert_eq!(r.assignment.map(|a| parts(&a).len()), Some(1));
    let r = beat(&mut g, 1_001, "m1", &t);
    assert_eq!(r.member_epoch, 3);
    assert_eq!(r.assignment.map(|a| parts(&a).len()), Some(1));
}

#[test]
fn no_interval_computes_at_every_bump() {
    let t = topics(&[("a", 2)]);
    let mut g = ShareGroup::new(G, at_once());
    join(&mut g, 0, "m1", &["a"], &t);
    let r = join(&mut g, 0, "m2", &["a"], &t);
    assert_eq!(
        (g.group_epoch(), g.assignment_epoch(), r.member_epoch),
        (3, 3, 3)
    );
}

#[test]
fn a_subscription_change_bumps_the_epoch_and_reassigns() {
    let t = topics(&[("a", 1), ("b", 2)]);
    let mut g = ready(at_once(), &t);
    join(&mut g, 0, "m1", &["a"], &t);
    let e = g.member_epoch("m1").unwrap();
    // Same topics in another order and twice: no change.
    let r = g.heartbeat(1, &req("m1", e, Some(&["a", "a"])), &t);
    assert_eq!((g.group_epoch(), r.member_epoch), (2, 2));
    let r = g.heartbeat(2, &req("m1", e, Some(&["b", "a"])), &t);
    assert_eq!((g.group_epoch(), r.member_epoch), (3, 3));
    assert_eq!(
        parts(r.assignment.as_deref().unwrap()),
        all_of(&t, &["a", "b"])
    );
    assert_eq!(g.member_subscription("m1").unwrap(), ["a", "b"]);
    // Down to b only: a's partition goes at once.
    let r = g.heartbeat(3, &req("m1", 3, Some(&["b"])), &t);
    assert_eq!((g.group_epoch(), r.member_epoch), (4, 4));
    assert_eq!(parts(r.assignment.as_deref().unwrap()), all_of(&t, &["b"]));
}

#[test]
fn topic_metadata_changes_bump_the_epoch() {
    let mut t = topics(&[("a", 1)]);
    let mut g = ready(at_once(), &t);
    join(&mut g, 0, "m1", &["a", "later"], &t);
    assert_eq!(g.group_epoch(), 2);
    // Partitions added: a bump, but the new partitions are initialised
    // only after that heartbeat's target; the next heartbeat finds them
    // unassigned, bumps again and assigns them.
    t.insert("a".into(), (topic_id(0), 3));
    let r = beat(&mut g, 1, "m1", &t);
    assert_eq!(
        (g.group_epoch(), r.member_epoch, r.assignment),
        (3, 3, None)
    );
    let r = beat(&mut g, 2, "m1", &t);
    assert_eq!((g.group_epoch(), r.member_epoch), (4, 4));
    assert_eq!(parts(r.assignment.as_deref().unwrap()), all_of(&t, &["a"]));
    // A subscribed topic is created: the same two steps.
    t.insert("later".into(), (topic_id(9), 1));
    let r = beat(&mut g, 3, "m1", &t);
    assert_eq!((g.group_epoch(), r.assignment), (5, None));
    let r = beat(&mut g, 4, "m1", &t);
    assert_eq!(g.group_epoch(), 6);
    assert_eq!(
        parts(r.assignment.as_deref().unwrap()),
        all_of(&t, &["a", "later"])
    );
    // An unrelated topic changes nothing.
    t.insert("other".into(), (topic_id(10), 4));
    let r = beat(&mut g, 5, "m1", &t);
    assert_eq!((g.group_epoch(), r.assignment), (6, None));
    // A topic deleted: bump, and its partitions go.
    t.remove("a");
    let r = beat(&mut g, 6, "m1", &t);
    assert_eq!(g.group_epoch(), 7);
    assert_eq!(
        parts(r.assignment.as_deref().unwrap()),
        all_of(&t, &["later"])
    );
}

/// Deviation: while the target waits for the interval, a member is still
/// never handed a topic it left or one that was deleted.
#[test]
fn a_stale_target_never_hands_out_unsubscribed_or_deleted_topics() {
    let mut t = topics(&[("a", 1), ("b", 1)]);
    let mut g = ready(config(), &t);
    join(&mut g, 0, "m1", &["a", "b"], &t);
    let r = g.heartbeat(10, &req("m1", 2, Some(&["b"])), &t);
    assert_eq!(
        g.assignment_epoch(),
        2,
        "the interval holds the target back"
    );
    assert_eq!(parts(r.assignment.as_deref().unwrap()), all_of(&t, &["b"]));
    t.remove("b");
    let r = beat(&mut g, 20, "m1", &t);
    assert_eq!(r.assignment, Some(vec![]));
}

// ---- initialisation (Kafka 4.4; compat-tests/java/FINDINGS.md S2) ---------

/// One member in a new group, as Kafka 4.4 answers raw heartbeats: the
/// join's target has no partition (none initialised yet); the join
/// initialises the topic's; a heartbeat within the assignment interval
/// finds them unassigned and bumps the group epoch, but only the first
/// heartbeat an interval after the join computes the target with them.
#[test]
fn a_new_groups_first_target_has_no_partitions() {
    let t = topics(&[("a", 1)]);
    let mut g = ShareGroup::new(G, config());
    let r = join(&mut g, 0, "m1", &["a"], &t);
    assert_eq!((r.member_epoch, r.assignment), (2, Some(vec![])));
    assert_eq!(r.heartbeat_interval_ms, 5_000, "no shorter heartbeat");
    assert_eq!(
        g.initialized().get(&topic_id(0)),
        Some(&BTreeSet::from([0]))
    );
    let r = beat(&mut g, 300, "m1", &t);
    assert_eq!((r.member_epoch, r.assignment), (2, None));
    assert_eq!((g.group_epoch(), g.assignment_epoch()), (3, 2));
    let r = beat(&mut g, 999, "m1", &t);
    assert_eq!((r.member_epoch, r.assignment), (2, None));
    assert_eq!(g.group_epoch(), 3, "bumped once");
    let r = beat(&mut g, 1_000, "m1", &t);
    assert_eq!(r.member_epoch, 3);
    assert_eq!(parts(r.assignment.as_deref().unwrap()), all_of(&t, &["a"]));
    assert_eq!((g.group_epoch(), g.assignment_epoch()), (3, 3));
}

/// The Java test's three members (ShareConsumerTest.
/// threeConsumersShareOnePartitionEachRecordOnce), joined 60 ms apart as
/// the live Kafka 4.4 run of FINDINGS S2 did: all at epoch 2 with no
/// partition, and all get the one partition from the same target (epoch
/// 4), at their first heartbeat an interval after the first join; with a
/// client's 5 s heartbeats, at their second heartbeat. Before es followed
/// Kafka's initialisation rule the first member got the partition at its
/// join and the others 5 s later.
#[test]
fn members_joining_together_get_their_partitions_from_the_same_target() {
    let t = topics(&[("a", 1)]);
    for (first_beat, step) in [(1_008, 60), (5_000, 60)] {
        let mut g = ShareGroup::new(G, config());
        for (i, m) in ["m1", "m2", "m3"].into_iter().enumerate() {
            let r = join(&mut g, 60 * i as u64, m, &["a"], &t);
            assert_eq!((r.member_epoch, r.assignment), (2, Some(vec![])), "{m}");
        }
        assert_eq!((g.group_epoch(), g.assignment_epoch()), (4, 2));
        for (i, m) in ["m1", "m2", "m3"].into_iter().enumerate() {
            let r = beat(&mut g, first_beat + step * i as u64, m, &t);
            assert_eq!(r.member_epoch, 4, "{m}");
            assert_eq!(
                parts(r.assignment.as_deref().unwrap()),
                all_of(&t, &["a"]),
                "{m}"
            );
        }
    }
}

/// Share-partitions initialised before (by earlier members, or
/// AlterShareGroupOffsets) are assignable at once: a member joining a
/// group whose members all left gets them in its join response.
#[test]
fn initialised_partitions_are_assigned_at_the_join() {
    let t = topics(&[("a", 2)]);
    let mut g = ShareGroup::new(G, config());
    join(&mut g, 0, "m1", &["a"], &t);
    assert_eq!(beat(&mut g, 1_000, "m1", &t).member_epoch, 3);
    g.heartbeat(1_500, &req("m1", -1, None), &t);
    assert!(g.is_empty());
    let r = join(&mut g, 5_000, "m2", &["a"], &t);
    assert_eq!(parts(r.assignment.as_deref().unwrap()), all_of(&t, &["a"]));
}

// ---- states, describe ------------------------------------------------------

#[test]
fn states_empty_stable_dead() {
    let t = topics(&[("a", 1)]);
    let mut g = ShareGroup::new(G, config());
    assert_eq!(g.state().name(), "Empty");
    join(&mut g, 0, "m1", &["a"], &t);
    assert_eq!(g.state().name(), "Stable");
    assert_eq!(g.mark_dead().map_err(|e| e.code()), Err(68));
    g.heartbeat(1, &req("m1", -1, None), &t);
    assert_eq!(g.state().name(), "Empty");
    assert_eq!(g.mark_dead(), Ok(()));
    assert_eq!(g.state().name(), "Dead");
    // A group being deleted answers a retriable error.
    let r = join(&mut g, 2, "m2", &["a"], &t);
    assert_eq!(r.error.map(|e| e.code()), Some(15));
}

#[test]
fn describe_shows_epochs_assignor_and_members() {
    let t = topics(&[("a", 2), ("b", 1)]);
    let mut g = ready(at_once(), &t);
    let mut r1 = req("m1", 0, Some(&["b", "a"]));
    r1.rack_id = Some("r1".into());
    g.heartbeat(0, &r1, &t);
    let d = g.describe(&t);
    assert_eq!(
        d,
        ShareDescribed {
            state: "Stable",
            group_epoch: 2,
            assignment_epoch: 2,
            assignor_name: "simple",
            members: vec![ShareDescribedMember {
                member_id: "m1".into(),
                rack_id: Some("r1".into()),
                member_epoch: 2,
                client_id: "client".into(),
                client_host: "/10.0.0.1".into(),
                subscribed_topic_names: vec!["a".into(), "b".into()],
                assignment: vec![
                    (topic_id(0), "a".into(), vec![0, 1]),
                    (topic_id(1), "b".into(), vec![0]),
                ],
            }],
        }
    );
    // A topic deleted since keeps its name from the subscription metadata.
    let mut gone = t.clone();
    gone.remove("b");
    assert_eq!(g.describe(&gone).members[0].assignment[1].1, "b");
    assert_eq!(
        g.assigned_partitions(),
        BTreeSet::from([(topic_id(0), 0), (topic_id(0), 1), (topic_id(1), 0)])
    );
}

// ---- proptest ----------------------------------------------------------------

const TOPIC_NAMES: [&str; 3] = ["t0", "t1", "t2"];
const MEMBERS: usize = 6;
const SESSION_MS: u64 = 10_000;

#[derive(Clone, Debug)]
enum Op {
    Join(usize, u8),
    Beat(usize),
    /// A heartbeat at the member's epoch plus one (FENCED_MEMBER_EPOCH).
    Ahead(usize),
    Subscribe(usize, u8),
    Leave(usize),
    Advance(u64),
    /// Advance the clock exactly to the group's next session deadline.
    ToDeadline,
    /// Set a topic's partition count; 0 deletes it; a new id when re-created.
    Topic(usize, i32),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..MEMBERS, 1u8..8).prop_map(|(m, s)| Op::Join(m, s)),
        5 => (0..MEMBERS).prop_map(Op::Beat),
        1 => (0..MEMBERS).prop_map(Op::Ahead),
        2 => (0..MEMBERS, 0u8..8).prop_map(|(m, s)| Op::Subscribe(m, s)),
        1 => (0..MEMBERS).prop_map(Op::Leave),
        2 => (0u64..6_000).prop_map(Op::Advance),
        1 => Just(Op::ToDeadline),
        1 => (0..TOPIC_NAMES.len(), 0i32..5).prop_map(|(t, c)| Op::Topic(t, c)),
    ]
}

fn names(mask: u8) -> Vec<String> {
    TOPIC_NAMES
        .iter()
        .enumerate()
        .filter(|(i, _)| mask & (1 << i) != 0)
        .map(|(_, n)| n.to_string())
        .collect()
}

fn member_name(i: usize) -> String {
    format!("member-{i}")
}

/// Partitions of the topics a member subscribes to, as `topics` has them.
fn allowed(g: &ShareGroup, member: &str, t: &Topics) -> BTreeSet<(Uuid, i32)> {
    let subs: Vec<&str> = g
        .member_subscription(member)
        .unwrap_or(&[])
        .iter()
        .map(String::as_str)
        .collect();
    all_of(t, &subs)
}

fn flat(a: &Assignment) -> BTreeSet<(Uuid, i32)> {
    a.iter()
        .flat_map(|(t, ps)| ps.iter().map(move |p| (*t, *p)))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Random joins, heartbeats, stale epochs, subscription changes, leaves,
    /// clock ticks and topic changes against a model of who is in the
    /// group and when each session ends. After every step: the group epoch
    /// and assignment epoch never decrease; member epoch ≤ assignment epoch
    /// ≤ group epoch; a member's epoch never decreases except when it joins
    /// again; the members are the model's (fenced and departed members are
    /// gone, nobody else is); every member's session ends after now; a
    /// heartbeating member's partitions are partitions of its subscribed
    /// topics as they are now. At the end, once the interval has passed and
    /// every member has heartbeated: everyone is at the group epoch, every
    /// partition of every subscribed topic is held by someone, and nobody
    /// holds anything outside its subscription.
    #[test]
    fn invariants_under_random_sequences(
        ops in proptest::collection::vec(op(), 1..80),
        interval in prop_oneof![Just(0i32), Just(1_000i32)],
        members_max in 3usize..=MEMBERS,
    ) {
        let cfg = ShareGroupConfig {
            session_timeout_ms: SESSION_MS as i32,
            heartbeat_interval_ms: 5_000,
            assignment_interval_ms: interval,
            members_max,
        };
        let mut g = ShareGroup::new(G, cfg);
        let mut t: Topics = topics(&[("t0", 2), ("t1", 1), ("t2", 3)]);
        let mut next_id: u128 = 100;
        let mut now: Millis = 0;
        // Model: member -> session end.
        let mut model: BTreeMap<String, Millis> = BTreeMap::new();
        let mut epochs: BTreeMap<String, i32> = BTreeMap::new();
        let (mut group_epoch, mut assignment_epoch) = (g.group_epoch(), g.assignment_epoch());

        for op in ops {
            let mut rejoined: Option<String> = None;
            let mut beating: Option<String> = None;
            match op {
                Op::Join(i, mask) => {
                    let m = member_name(i);
                    let r = g.heartbeat(now, &ShareHeartbeatRequest {
                        group_id: G.into(),
                        member_id: m.clone(),
                        member_epoch: 0,
                        subscribed_topic_names: Some(names(mask)),
                        ..Default::default()
                    }, &t);
                    if model.contains_key(&m) || model.len() < members_max {
                        prop_assert_eq!(&r.error, &None);
                        prop_assert!(r.assignment.is_some());
                        model.insert(m.clone(), now + SESSION_MS);
                        rejoined = Some(m.clone());
                        beating = Some(m);
                    } else {
                        prop_assert_eq!(r.error.map(|e| e.code()), Some(GROUP_MAX_SIZE_REACHED));
                    }
                }
                Op::Beat(i) | Op::Subscribe(i, _) | Op::Ahead(i) => {
                    let m = member_name(i);
                    let known = g.member_epoch(&m);
                    let ahead = matches!(op, Op::Ahead(_));
                    let epoch = known.unwrap_or(1).saturating_add(i32::from(ahead)).max(1);
                    let subscribed = match op {
                        Op::Subscribe(_, mask) => Some(names(mask)),
                        _ => None,
                    };
                    let before = (g.group_epoch(), g.member_assignment(&m).cloned());
                    let r = g.heartbeat(now, &ShareHeartbeatRequest {
                        group_id: G.into(),
                        member_id: m.clone(),
                        member_epoch: epoch,
                        subscribed_topic_names: subscribed,
                        ..Default::default()
                    }, &t);
                    match (model.contains_key(&m), ahead) {
                        (false, _) if model.len() >= members_max => {
                            prop_assert_eq!(r.error.map(|e| e.code()), Some(GROUP_MAX_SIZE_REACHED));
                        }
                        (false, _) => {
                            prop_assert_eq!(r.error.map(|e| e.code()), Some(UNKNOWN_MEMBER_ID));
                        }
                        (true, true) => {
                            prop_assert_eq!(r.error.map(|e| e.code()), Some(FENCED_MEMBER_EPOCH));
                            prop_assert_eq!((g.group_epoch(), g.member_assignment(&m).cloned()), before);
                        }
                        (true, false) => {
                            prop_assert_eq!(&r.error, &None);
                            prop_assert_eq!(Some(r.member_epoch), g.member_epoch(&m));
                            model.insert(m.clone(), now + SESSION_MS);
                            beating = Some(m);
                        }
                    }
                }
                Op::Leave(i) => {
                    let m = member_name(i);
                    let r = g.heartbeat(now, &ShareHeartbeatRequest {
                        group_id: G.into(),
                        member_id: m.clone(),
                        member_epoch: -1,
                        ..Default::default()
                    }, &t);
                    if model.remove(&m).is_some() {
                        prop_assert_eq!(&r.error, &None);
                        prop_assert_eq!(r.member_epoch, -1);
                        epochs.remove(&m);
                    } else {
                        prop_assert_eq!(r.error.map(|e| e.code()), Some(UNKNOWN_MEMBER_ID));
                    }
                }
                Op::Advance(_) | Op::ToDeadline => {
                    now = match op {
                        Op::Advance(ms) => now + ms,
                        _ => g.next_deadline().unwrap_or(now).max(now),
                    };
                    let fenced: BTreeSet<String> = g.tick(now).into_iter().collect();
                    let expected: BTreeSet<String> = model
                        .iter()
                        .filter(|(_, end)| **end <= now)
                        .map(|(m, _)| m.clone())
                        .collect();
                    prop_assert_eq!(&fenced, &expected);
                    model.retain(|m, _| !fenced.contains(m));
                    epochs.retain(|m, _| !fenced.contains(m));
                }
                Op::Topic(i, count) => {
                    let name = TOPIC_NAMES[i].to_string();
                    if count == 0 {
                        t.remove(&name);
                    } else {
                        let id = match t.get(&name) {
                            Some((id, _)) => *id,
                            None => {
                                next_id += 1;
                                topic_id(next_id)
                            }
                        };
                        t.insert(name, (id, count));
                    }
                }
            }

            prop_assert!(g.group_epoch() >= group_epoch);
            prop_assert!(g.assignment_epoch() >= assignment_epoch);
            prop_assert!(g.assignment_epoch() <= g.group_epoch());
            group_epoch = g.group_epoch();
            assignment_epoch = g.assignment_epoch();
            let ids: BTreeSet<String> = g.member_ids().map(String::from).collect();
            let modelled: BTreeSet<String> = model.keys().cloned().collect();
            prop_assert_eq!(&ids, &modelled);
            prop_assert!(g.next_deadline().is_none_or(|d| d > now));
            for m in &ids {
                let e = g.member_epoch(m).unwrap_or(-1);
                prop_assert!(e <= g.assignment_epoch());
                if rejoined.as_deref() != Some(m.as_str()) {
                    if let Some(before) = epochs.get(m) {
                        prop_assert!(e >= *before, "member {} went from {} to {}", m, before, e);
                    }
                }
                epochs.insert(m.clone(), e);
            }
            if let Some(m) = beating {
                let held = flat(g.member_assignment(&m).unwrap_or(&Assignment::new()));
                prop_assert!(held.is_subset(&allowed(&g, &m, &t)));
            }
        }

        // Settle: the interval passes and every member heartbeats (the
        // first heartbeat initialises what the topics gained), twice more
        // (a target over everything initialised), then once more.
        let ids: Vec<String> = g.member_ids().map(String::from).collect();
        for round in 0..3 {
            if round < 2 {
                now += u64::try_from(interval).unwrap_or(0);
            }
            for m in &ids {
                let r = beat(&mut g, now, m, &t);
                prop_assert_eq!(&r.error, &None);
            }
        }
        let mut held_by_someone = BTreeSet::new();
        let mut subscribed_somewhere = BTreeSet::new();
        for m in &ids {
            prop_assert_eq!(g.member_epoch(m), Some(g.group_epoch()));
            let held = flat(g.member_assignment(m).unwrap_or(&Assignment::new()));
            let allowed = allowed(&g, m, &t);
            prop_assert!(held.is_subset(&allowed));
            held_by_someone.extend(held);
            subscribed_somewhere.extend(allowed);
        }
        if !ids.is_empty() {
            prop_assert_eq!(g.assignment_epoch(), g.group_epoch());
        }
        prop_assert_eq!(held_by_someone, subscribed_somewhere);
    }
}
