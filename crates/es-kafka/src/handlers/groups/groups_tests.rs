//! Tests of the group APIs over the wire: requests encoded as a client
//! sends them, each version the broker advertises, answered by a broker on
//! a temporary data directory.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::*;

use super::find_coordinator::KEY_TYPE_TRANSACTION;
use super::*;
use crate::errors::{code, ResponseError, NONE};
use crate::groups::coordinator::ClassicDescribe;
use crate::handlers::wire_client::{call, CLIENT_ID};
use crate::versions::advertised;
use crate::BrokerConfig;

fn tn(v: &str) -> TopicName {
    TopicName(s(v))
}

fn gi(v: &str) -> GroupId {
    GroupId(s(v))
}

fn versions(key: ApiKey) -> std::ops::RangeInclusive<i16> {
    let a = advertised(key).unwrap_or_else(|| panic!("{key:?} is advertised"));
    a.min..=a.max
}

async fn broker_in(dir: &std::path::Path) -> Arc<Broker> {
    let cfg = BrokerConfig::new(dir.join("data"), "127.0.0.1:9092");
    let b = Broker::open_running(cfg).await.expect("open");
    if b.topic("t").is_none() {
        b.create_topic("t", 3, Default::default(), false)
            .await
            .expect("create t");
    }
    b
}

fn protocol(
    name: &str,
    meta: &'static [u8],
) -> kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol {
    let mut p = kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol::default();
    p.name = s(name);
    p.metadata = Bytes::from_static(meta);
    p
}

fn join(group: &str, member: &str, instance: Option<&str>, v: i16) -> JoinGroupRequest {
    let mut r = JoinGroupRequest::default();
    r.group_id = gi(group);
    r.session_timeout_ms = 10_000;
    if v >= 1 {
        r.rebalance_timeout_ms = 10_000;
    }
    r.member_id = s(member);
    if v >= 5 {
        r.group_instance_id = instance.map(s);
    }
    r.protocol_type = s("consumer");
    r.protocols = vec![protocol("range", b"meta")];
    r
}

fn sync(
    group: &str,
    member: &str,
    generation: i32,
    v: i16,
    assign: Option<&'static [u8]>,
) -> SyncGroupRequest {
    let mut r = SyncGroupRequest::default();
    r.group_id = gi(group);
    r.generation_id = generation;
    r.member_id = s(member);
    if v >= 5 {
        r.protocol_type = Some(s("consumer"));
        r.protocol_name = Some(s("range"));
    }
    if let Some(a) = assign {
        let mut x =
            kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment::default();
        x.member_id = s(member);
        x.assignment = Bytes::from_static(a);
        r.assignments = vec![x];
    }
    r
}

/// Joins (with the handshake when the version has it) and syncs a
/// one-member group; returns (member id, generation).
async fn form_group(b: &Arc<Broker>, group: &str, jv: i16) -> (String, i32) {
    let sv = jv.min(5);
    let mut member = String::new();
    let r: JoinGroupResponse =
        call(b, ApiKey::JoinGroup, jv, &join(group, &member, None, jv)).await;
    let r = if jv >= 4 {
        assert_eq!(r.error_code, code(ResponseError::MemberIdRequired), "v{jv}");
        member = r.member_id.to_string();
        call(b, ApiKey::JoinGroup, jv, &join(group, &member, None, jv)).await
    } else {
        r
    };
    assert_eq!(r.error_code, NONE, "JoinGroup v{jv}");
    member = r.member_id.to_string();
    assert_eq!(r.leader.as_str(), member);
    assert_eq!(r.members.len(), 1);
    assert_eq!(r.protocol_name.as_ref().map(|p| p.as_str()), Some("range"));
    if jv >= 7 {
        assert_eq!(
            r.protocol_type.as_ref().map(|p| p.as_str()),
            Some("consumer")
        );
    }
    let g = r.generation_id;
    let sr: SyncGroupResponse = call(
        b,
        ApiKey::SyncGroup,
        sv,
        &sync(group, &member, g, sv, Some(b"asg")),
    )
    .await;
    assert_eq!(sr.error_code, NONE, "SyncGroup v{sv}");
    assert_eq!(sr.assignment, Bytes::from_static(b"asg"));
    (member, g)
}

#[tokio::test]
async fn find_coordinator_at_every_version() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = broker_in(dir.path()).await;
    for v in versions(ApiKey::FindCoordinator) {
        let mut req = FindCoordinatorRequest::default();
        if v >= 4 {
            req.coordinator_keys = vec![s("g1"), s("g2")];
            req.key_type = KEY_TYPE_TRANSACTION;
        } else {
            req.key = s("g1");
        }
        let r: FindCoordinatorResponse = call(&b, ApiKey::FindCoordinator, v, &req).await;
        if v >= 4 {
            assert_eq!(r.coordinators.len(), 2);
            for c in &r.coordinators {
                assert_eq!((c.error_code, c.node_id.0, c.port), (NONE, 0, 9092));
                assert_eq!(c.host.as_str(), "127.0.0.1");
            }
            assert_eq!(r.coordinators[1].key.as_str(), "g2");
        } else {
            assert_eq!((r.error_code, r.node_id.0, r.port), (NONE, 0, 9092));
            assert_eq!(r.host.as_str(), "127.0.0.1");
        }
    }
    // Share coordinators are not served.
    let mut req = FindCoordinatorRequest::default();
    req.key_type = 2;
    req.coordinator_keys = vec![s("x")];
    let r: FindCoordinatorResponse = call(&b, ApiKey::FindCoordinator, 6, &req).await;
    assert_eq!(
        r.coordinators[0].error_code,
        code(ResponseError::InvalidRequest)
    );
}

#[tokio::test]
async fn the_classic_protocol_at_every_version() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = broker_in(dir.path()).await;
    for jv in versions(ApiKey::JoinGroup) {
        let group = format!("g{jv}");
        let (member, g) = form_group(&b, &group, jv).await;
        let hv = jv.min(4);
        let mut hb = HeartbeatRequest::default();
        hb.group_id = gi(&group);
        hb.generation_id = g;
        hb.member_id = s(&member);
        let r: HeartbeatResponse = call(&b, ApiKey::Heartbeat, hv, &hb).await;
        assert_eq!(r.error_code, NONE, "Heartbeat v{hv}");
        hb.generation_id = g + 1;
        let r: HeartbeatResponse = call(&b, ApiKey::Heartbeat, hv, &hb).await;
        assert_eq!(r.error_code, code(ResponseError::IllegalGeneration));
        let lv = jv.min(5);
        let mut lr = LeaveGroupRequest::default();
        lr.group_id = gi(&group);
        if lv >= 3 {
            let mut m = kafka_protocol::messages::leave_group_request::MemberIdentity::default();
            m.member_id = s(&member);
            let mut ghost = m.clone();
            ghost.member_id = s("ghost");
            lr.members = vec![m, ghost];
        } else {
            lr.member_id = s(&member);
        }
        let r: LeaveGroupResponse = call(&b, ApiKey::LeaveGroup, lv, &lr).await;
        assert_eq!(r.error_code, NONE, "LeaveGroup v{lv}");
        if lv >= 3 {
            let codes: Vec<i16> = r.members.iter().map(|m| m.error_code).collect();
            assert_eq!(codes, vec![NONE, code(ResponseError::UnknownMemberId)]);
        }
        // Leaving again: the member is unknown.
        let r: LeaveGroupResponse = call(&b, ApiKey::LeaveGroup, lv, &lr).await;
        if lv < 3 {
            assert_eq!(r.error_code, code(ResponseError::UnknownMemberId));
        }
    }
    // Bad input.
    let mut j = join("", "", None, 9);
    let r: JoinGroupResponse = call(&b, ApiKey::JoinGroup, 9, &j).await;
    assert_eq!(r.error_code, code(ResponseError::InvalidGroupId));
    j.group_id = gi("x");
    j.session_timeout_ms = 1000;
    let r: JoinGroupResponse = call(&b, ApiKey::JoinGroup, 9, &j).await;
    assert_eq!(r.error_code, code(ResponseError::InvalidSessionTimeout));
    j.session_timeout_ms = 1_800_001;
    let r: JoinGroupResponse = call(&b, ApiKey::JoinGroup, 9, &j).await;
    assert_eq!(r.error_code, code(ResponseError::InvalidSessionTimeout));
    let mut sr = sync("x", "m", 1, 5, None);
    sr.protocol_name = None;
    let r: SyncGroupResponse = call(&b, ApiKey::SyncGroup, 5, &sr).await;
    assert_eq!(r.error_code, code(ResponseError::InconsistentGroupProtocol));
    let r: SyncGroupResponse = call(&b, ApiKey::SyncGroup, 4, &sync("nope", "m", 1, 4, None)).await;
    assert_eq!(r.error_code, code(ResponseError::UnknownMemberId));
    let mut hb = HeartbeatRequest::default();
    hb.group_id = gi("");
    let r: HeartbeatResponse = call(&b, ApiKey::Heartbeat, 4, &hb).await;
    assert_eq!(r.error_code, code(ResponseError::InvalidGroupId));
}

#[tokio::test]
async fn describe_list_and_delete_at_every_version() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = broker_in(dir.path()).await;
    let (member, _) = form_group(&b, "live", 9).await;
    let (gone, _) = form_group(&b, "gone", 5).await;
    let mut lr = LeaveGroupRequest::default();
    lr.group_id = gi("gone");
    lr.member_id = s(&gone);
    let r: LeaveGroupResponse = call(&b, ApiKey::LeaveGroup, 0, &lr).await;
    assert_eq!(r.error_code, NONE);
    for v in versions(ApiKey::DescribeGroups) {
        let mut req = DescribeGroupsRequest::default();
        req.groups = vec![gi("live"), gi("gone"), gi("unknown")];
        req.include_authorized_operations = v >= 3;
        let r: DescribeGroupsResponse = call(&b, ApiKey::DescribeGroups, v, &req).await;
        let live = &r.groups[0];
        assert_eq!(
            (live.error_code, live.group_state.as_str()),
            (NONE, "Stable")
        );
        assert_eq!(live.protocol_type.as_str(), "consumer");
        assert_eq!(live.protocol_data.as_str(), "range");
        assert_eq!(live.members[0].member_id.as_str(), member);
        assert_eq!(live.members[0].client_id.as_str(), CLIENT_ID);
        assert_eq!(live.members[0].client_host.as_str(), "/127.0.0.1");
        assert_eq!(
            live.members[0].member_assignment,
            Bytes::from_static(b"asg")
        );
        assert_eq!(live.members[0].member_metadata, Bytes::from_static(b"meta"));
        if v >= 3 {
            // Kafka 4.4's answer: READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS,
            // ALTER_CONFIGS.
            assert_eq!(live.authorized_operations, 3400);
        }
        assert_eq!(r.groups[1].group_state.as_str(), "Empty");
        assert!(r.groups[1].members.is_empty());
        assert_eq!(r.groups[2].group_state.as_str(), "Dead");
        let want = if v >= 6 {
            code(ResponseError::GroupIdNotFound)
        } else {
            NONE
        };
        assert_eq!(r.groups[2].error_code, want);
    }
    for v in versions(ApiKey::ListGroups) {
        let mut req = ListGroupsRequest::default();
        let r: ListGroupsResponse = call(&b, ApiKey::ListGroups, v, &req).await;
        let mut names: Vec<String> = r.groups.iter().map(|g| g.group_id.0.to_string()).collect();
        names.sort();
        assert_eq!(names, vec!["gone", "live"], "v{v}");
        if v >= 4 {
            req.states_filter = vec![s("stable")];
            let r: ListGroupsResponse = call(&b, ApiKey::ListGroups, v, &req).await;
            assert_eq!(r.groups.len(), 1);
            assert_eq!(r.groups[0].group_state.as_str(), "Stable");
        }
        if v >= 5 {
            req.states_filter.clear();
            req.types_filter = vec![s("Consumer")];
            let r: ListGroupsResponse = call(&b, ApiKey::ListGroups, v, &req).await;
            assert!(r.groups.is_empty());
            req.types_filter = vec![s("classic")];
            let r: ListGroupsResponse = call(&b, ApiKey::ListGroups, v, &req).await;
            assert_eq!(r.groups.len(), 2);
            assert!(r.groups.iter().all(|g| g.group_type.as_str() == "classic"));
        }
    }
    for v in versions(ApiKey::DeleteGroups) {
        let mut req = DeleteGroupsRequest::default();
        req.groups_names = vec![gi("live"), gi("unknown"), gi("live")];
        let r: DeleteGroupsResponse = call(&b, ApiKey::DeleteGroups, v, &req).await;
        let codes: Vec<i16> = r.results.iter().map(|x| x.error_code).collect();
        assert_eq!(
            codes,
            vec![
                code(ResponseError::NonEmptyGroup),
                code(ResponseError::GroupIdNotFound)
            ]
        );
    }
    let mut req = DeleteGroupsRequest::default();
    req.groups_names = vec![gi("gone")];
    let r: DeleteGroupsResponse = call(&b, ApiKey::DeleteGroups, 2, &req).await;
    assert_eq!(r.results[0].error_code, NONE);
    assert!(matches!(
        b.groups().describe("gone"),
        ClassicDescribe::NotFound
    ));
}

fn commit(group: &str, topic: &str, partitions: &[(i32, i64)], v: i16) -> OffsetCommitRequest {
    let mut r = OffsetCommitRequest::default();
    r.group_id = gi(group);
    r.generation_id_or_member_epoch = -1;
    let mut t =
        kafka_protocol::messages::offset_commit_request::OffsetCommitRequestTopic::default();
    t.name = tn(topic);
    t.partitions = partitions
        .iter()
        .map(|(p, o)| {
            let mut x = kafka_protocol::messages::offset_commit_request::OffsetCommitRequestPartition::default();
            x.partition_index = *p;
            x.committed_offset = *o;
            if v >= 6 {
                x.committed_leader_epoch = 0;
            }
            x.committed_metadata = Some(s("meta"));
            x
        })
        .collect();
    r.topics = vec![t];
    r
}

#[tokio::test]
async fn offsets_at_every_version_and_across_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = broker_in(dir.path()).await;
    for v in versions(ApiKey::OffsetCommit) {
        let group = format!("c{v}");
        let r: OffsetCommitResponse = call(
            &b,
            ApiKey::OffsetCommit,
            v,
            &commit(&group, "t", &[(0, 10 + i64::from(v)), (1, 20), (7, 1)], v),
        )
        .await;
        let codes: Vec<i16> = r.topics[0]
            .partitions
            .iter()
            .map(|p| p.error_code)
            .collect();
        assert_eq!(
            codes,
            vec![NONE, NONE, code(ResponseError::UnknownTopicOrPartition)],
            "OffsetCommit v{v}"
        );
        let r: OffsetCommitResponse = call(
            &b,
            ApiKey::OffsetCommit,
            v,
            &commit(&group, "missing", &[(0, 1)], v),
        )
        .await;
        assert_eq!(
            r.topics[0].partitions[0].error_code,
            code(ResponseError::UnknownTopicOrPartition)
        );
        // A member commit into an unknown group.
        let mut c = commit("nogroup", "t", &[(0, 1)], v);
        c.generation_id_or_member_epoch = 1;
        c.member_id = s("m");
        let r: OffsetCommitResponse = call(&b, ApiKey::OffsetCommit, v, &c).await;
        let want = if v >= 9 {
            code(ResponseError::GroupIdNotFound)
        } else {
            code(ResponseError::IllegalGeneration)
        };
        assert_eq!(r.topics[0].partitions[0].error_code, want, "v{v}");
    }
    for v in versions(ApiKey::OffsetFetch) {
        let mut req = OffsetFetchRequest::default();
        let mut topic =
            kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic::default();
        topic.name = tn("t");
        topic.partition_indexes = vec![0, 1, 2];
        if v >= 8 {
            let mut g1 =
                kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup::default();
            g1.group_id = gi("c9");
            let mut t =
                kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopics::default();
            t.name = tn("t");
            t.partition_indexes = vec![0, 1, 2];
            g1.topics = Some(vec![t]);
            let mut g2 = g1.clone();
            g2.group_id = gi("c2");
            g2.topics = None;
            req.groups = vec![g1, g2];
            req.require_stable = true;
        } else {
            req.group_id = gi("c9");
            req.topics = Some(vec![topic]);
            if v >= 7 {
                req.require_stable = true;
            }
        }
        let r: OffsetFetchResponse = call(&b, ApiKey::OffsetFetch, v, &req).await;
        if v >= 8 {
            let g1 = &r.groups[0];
            assert_eq!(g1.error_code, NONE);
            let offs: Vec<i64> = g1.topics[0]
                .partitions
                .iter()
                .map(|p| p.committed_offset)
                .collect();
            assert_eq!(offs, vec![19, 20, -1]);
            assert_eq!(
                g1.topics[0].partitions[0]
                    .metadata
                    .as_ref()
                    .map(|m| m.as_str()),
                Some("meta")
            );
            assert_eq!(g1.topics[0].partitions[0].committed_leader_epoch, 0);
            assert_eq!(g1.topics[0].partitions[2].committed_leader_epoch, -1);
            // All partitions of c2 (committed with v2: no leader epoch).
            let g2 = &r.groups[1];
            let mut all: Vec<(i32, i64, i32)> = g2.topics[0]
                .partitions
                .iter()
                .map(|p| {
                    (
                        p.partition_index,
                        p.committed_offset,
                        p.committed_leader_epoch,
                    )
                })
                .collect();
            all.sort();
            assert_eq!(all, vec![(0, 12, -1), (1, 20, -1)]);
        } else {
            if v >= 2 {
                assert_eq!(r.error_code, NONE);
            }
            let offs: Vec<i64> = r.topics[0]
                .partitions
                .iter()
                .map(|p| p.committed_offset)
                .collect();
            assert_eq!(offs, vec![19, 20, -1], "OffsetFetch v{v}");
            if v >= 5 {
                assert_eq!(r.topics[0].partitions[0].committed_leader_epoch, 0);
            }
        }
    }
    // OffsetDelete: the group is Empty, so offsets may go.
    let mut d = OffsetDeleteRequest::default();
    d.group_id = gi("c9");
    let mut t =
        kafka_protocol::messages::offset_delete_request::OffsetDeleteRequestTopic::default();
    t.name = tn("t");
    let mut p =
        kafka_protocol::messages::offset_delete_request::OffsetDeleteRequestPartition::default();
    p.partition_index = 1;
    let mut p9 = p.clone();
    p9.partition_index = 9;
    t.partitions = vec![p, p9];
    d.topics = vec![t];
    let r: OffsetDeleteResponse = call(&b, ApiKey::OffsetDelete, 0, &d).await;
    assert_eq!(r.error_code, NONE);
    let codes: Vec<i16> = r.topics[0]
        .partitions
        .iter()
        .map(|p| p.error_code)
        .collect();
    assert_eq!(
        codes,
        vec![NONE, code(ResponseError::UnknownTopicOrPartition)]
    );
    d.group_id = gi("unknown");
    let r: OffsetDeleteResponse = call(&b, ApiKey::OffsetDelete, 0, &d).await;
    assert_eq!(r.error_code, code(ResponseError::GroupIdNotFound));
    // A non-empty consumer group refuses to delete offsets of topics it
    // subscribes to (its metadata is not a subscription here: unknown
    // subscriptions count as subscribed).
    let _ = form_group(&b, "busy", 9).await;
    d.group_id = gi("busy");
    let r: OffsetDeleteResponse = call(&b, ApiKey::OffsetDelete, 0, &d).await;
    assert_eq!(
        r.topics[0].partitions[0].error_code,
        code(ResponseError::GroupSubscribedToTopic)
    );

    // Restart: offsets come back, groups are Empty. (The group's protocol
    // type is written in the background; an OffsetFetch waits for it.)
    let (_, wait) = b
        .groups()
        .fetch_offsets("busy", None, None, &|_| None)
        .expect("fetch");
    if let Some(w) = wait {
        w.wait().await.expect("durable");
    }
    // One metadata quorum node per data directory at a time.
    b.stop_metadata().await;
    b.close().expect("close");
    drop(b);
    let b = broker_in(dir.path()).await;
    let (topics, _) = b
        .groups()
        .fetch_offsets("c9", None, None, &|n| b.topic(n).map(|t| t.id))
        .expect("fetch");
    let offs: Vec<(i32, i64)> = topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition, p.offset))
        .collect();
    assert_eq!(offs, vec![(0, 19)]);
    let listed = b.groups().list(&[], &[]);
    assert!(listed.iter().all(|l| l.state == "Empty"), "{listed:?}");
    assert!(listed
        .iter()
        .any(|l| l.group_id == "busy" && l.protocol_type == "consumer"));
}

#[tokio::test]
async fn offsets_of_a_deleted_topic_do_not_apply_to_its_successor() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = broker_in(dir.path()).await;
    let r: OffsetCommitResponse =
        call(&b, ApiKey::OffsetCommit, 9, &commit("g", "t", &[(0, 5)], 9)).await;
    assert_eq!(r.topics[0].partitions[0].error_code, NONE);
    b.delete_topic("t").await.expect("delete");
    b.create_topic("t", 1, Default::default(), false)
        .await
        .expect("recreate");
    let (topics, _) = b
        .groups()
        .fetch_offsets("g", Some(vec![("t".into(), vec![0])]), None, &|n| {
            b.topic(n).map(|t| t.id)
        })
        .expect("fetch");
    assert_eq!(topics[0].partitions[0].offset, -1);
}

#[tokio::test]
async fn the_consumer_protocol_through_the_wire() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = broker_in(dir.path()).await;
    let tid = b.topic("t").expect("t").id;
    for v in versions(ApiKey::ConsumerGroupHeartbeat) {
        let group = format!("cg{v}");
        let mut req = ConsumerGroupHeartbeatRequest::default();
        req.group_id = gi(&group);
        req.member_id = s(format!("member-{v}"));
        req.member_epoch = 0;
        req.rebalance_timeout_ms = 30_000;
        req.subscribed_topic_names = Some(vec![tn("t")]);
        req.topic_partitions = Some(Vec::new());
        let r: ConsumerGroupHeartbeatResponse =
            call(&b, ApiKey::ConsumerGroupHeartbeat, v, &req).await;
        assert_eq!(r.error_code, NONE, "{:?}", r.error_message);
        assert_eq!(r.member_epoch, 2, "Kafka 4.4: a new group is at epoch 1");
        let a = r.assignment.expect("assignment");
        assert_eq!(a.topic_partitions[0].topic_id, tid);
        assert_eq!(a.topic_partitions[0].partitions, vec![0, 1, 2]);
        assert_eq!(r.heartbeat_interval_ms, 5_000);

        // OffsetCommit with the member epoch.
        let mut c = commit(&group, "t", &[(0, 3)], 9);
        c.member_id = req.member_id.clone();
        c.generation_id_or_member_epoch = 2;
        let cr: OffsetCommitResponse = call(&b, ApiKey::OffsetCommit, 9, &c).await;
        assert_eq!(cr.topics[0].partitions[0].error_code, NONE);
        c.generation_id_or_member_epoch = 0;
        let cr: OffsetCommitResponse = call(&b, ApiKey::OffsetCommit, 9, &c).await;
        assert_eq!(
            cr.topics[0].partitions[0].error_code,
            code(ResponseError::StaleMemberEpoch)
        );
        let cr: OffsetCommitResponse = call(&b, ApiKey::OffsetCommit, 8, &c).await;
        assert_eq!(
            cr.topics[0].partitions[0].error_code,
            code(ResponseError::UnsupportedVersion)
        );

        for dv in versions(ApiKey::ConsumerGroupDescribe) {
            let mut d = ConsumerGroupDescribeRequest::default();
            d.group_ids = vec![gi(&group), gi("g-classic"), gi("nope")];
            let r: ConsumerGroupDescribeResponse =
                call(&b, ApiKey::ConsumerGroupDescribe, dv, &d).await;
            let g = &r.groups[0];
            assert_eq!((g.error_code, g.group_state.as_str()), (NONE, "Stable"));
            assert_eq!((g.group_epoch, g.assignment_epoch), (2, 2));
            assert_eq!(g.assignor_name.as_str(), "uniform");
            let m = &g.members[0];
            assert_eq!(m.assignment.topic_partitions[0].topic_name.as_str(), "t");
            assert_eq!(m.client_id.as_str(), CLIENT_ID);
            assert_eq!(m.client_host.as_str(), "/127.0.0.1");
            assert_eq!(r.groups[2].error_code, code(ResponseError::GroupIdNotFound));
        }
        // Leave.
        let mut l = ConsumerGroupHeartbeatRequest::default();
        l.group_id = gi(&group);
        l.member_id = req.member_id.clone();
        l.member_epoch = -1;
        l.rebalance_timeout_ms = -1;
        let r: ConsumerGroupHeartbeatResponse =
            call(&b, ApiKey::ConsumerGroupHeartbeat, v, &l).await;
        assert_eq!((r.error_code, r.member_epoch), (NONE, -1));
        let listed = b.groups().list(&[], &["consumer".to_string()]);
        assert!(listed
            .iter()
            .any(|x| x.group_id == group && x.state == "Empty"));
    }
    // A classic group with members cannot be joined with the new protocol.
    let _ = form_group(&b, "g-classic", 9).await;
    let mut req = ConsumerGroupHeartbeatRequest::default();
    req.group_id = gi("g-classic");
    req.member_id = s("x");
    req.rebalance_timeout_ms = 30_000;
    req.subscribed_topic_names = Some(vec![tn("t")]);
    req.topic_partitions = Some(Vec::new());
    let r: ConsumerGroupHeartbeatResponse = call(&b, ApiKey::ConsumerGroupHeartbeat, 1, &req).await;
    assert_eq!(r.error_code, code(ResponseError::GroupIdNotFound));
    // And a consumer group is not described by DescribeGroups.
    req.group_id = gi("cg-live");
    let r: ConsumerGroupHeartbeatResponse = call(&b, ApiKey::ConsumerGroupHeartbeat, 1, &req).await;
    assert_eq!(r.error_code, NONE);
    let mut d = DescribeGroupsRequest::default();
    d.groups = vec![gi("cg-live")];
    let r: DescribeGroupsResponse = call(&b, ApiKey::DescribeGroups, 6, &d).await;
    assert_eq!(r.groups[0].error_code, code(ResponseError::GroupIdNotFound));
    let j: JoinGroupResponse = call(&b, ApiKey::JoinGroup, 9, &join("cg-live", "", None, 9)).await;
    assert_eq!(j.error_code, code(ResponseError::InconsistentGroupProtocol));
}

/// Kafka 4.4 validates a ConsumerGroupHeartbeat before it looks the group
/// up (an invalid request creates no group), requires the member id from v1,
/// and answers GROUP_ID_NOT_FOUND for a heartbeat or leave of a group that
/// does not exist.
#[tokio::test]
async fn consumer_group_heartbeat_validation_comes_first() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = broker_in(dir.path()).await;
    let joining = |group: &str, member: &str| {
        let mut req = ConsumerGroupHeartbeatRequest::default();
        req.group_id = gi(group);
        req.member_id = s(member);
        req.member_epoch = 0;
        req.rebalance_timeout_ms = 30_000;
        req.subscribed_topic_names = Some(vec![tn("t")]);
        req.topic_partitions = Some(Vec::new());
        req
    };
    let invalid = code(ResponseError::InvalidRequest);
    // v1: the member id is the client's, never empty.
    let r: ConsumerGroupHeartbeatResponse = call(
        &b,
        ApiKey::ConsumerGroupHeartbeat,
        1,
        &joining("v1-empty", ""),
    )
    .await;
    assert_eq!((r.error_code, r.member_id), (invalid, None));
    // v0: the broker generates it when joining.
    let r: ConsumerGroupHeartbeatResponse = call(
        &b,
        ApiKey::ConsumerGroupHeartbeat,
        0,
        &joining("v0-empty", ""),
    )
    .await;
    assert_eq!(r.error_code, NONE);
    assert!(r.member_id.is_some_and(|m| !m.is_empty()));
    for (epoch, v, member, want) in [
        // An empty member id is refused before the group is looked up.
        (-1, 0, "", invalid),
        (7, 0, "", invalid),
        // A valid request for a group that does not exist.
        (-1, 1, "m", code(ResponseError::GroupIdNotFound)),
        (7, 1, "m", code(ResponseError::GroupIdNotFound)),
        (i32::MAX, 0, "m", code(ResponseError::GroupIdNotFound)),
    ] {
        let mut req = joining("nowhere", member);
        req.member_epoch = epoch;
        let r: ConsumerGroupHeartbeatResponse =
            call(&b, ApiKey::ConsumerGroupHeartbeat, v, &req).await;
        assert_eq!(r.error_code, want, "epoch {epoch} v{v} member {member:?}");
    }
    // Refused joins leave no group behind.
    for (i, edit) in [
        |r: &mut ConsumerGroupHeartbeatRequest| r.rack_id = Some(s("")),
        |r: &mut ConsumerGroupHeartbeatRequest| r.instance_id = Some(s("")),
        |r: &mut ConsumerGroupHeartbeatRequest| r.subscribed_topic_names = None,
        |r: &mut ConsumerGroupHeartbeatRequest| r.topic_partitions = None,
        |r: &mut ConsumerGroupHeartbeatRequest| r.server_assignor = Some(s("")),
    ]
    .into_iter()
    .enumerate()
    {
        let group = format!("refused-{i}");
        let mut req = joining(&group, "m");
        edit(&mut req);
        let r: ConsumerGroupHeartbeatResponse =
            call(&b, ApiKey::ConsumerGroupHeartbeat, 1, &req).await;
        assert_ne!(r.error_code, NONE, "{group}");
        assert!(
            b.groups()
                .list(&[], &[])
                .iter()
                .all(|g| g.group_id != group),
            "{group} was created"
        );
    }
}

/// Kafka's OffsetCommit and OffsetDelete answers add a topic with its first
/// partition: a topic that lists no partition is not in the answer.
#[tokio::test]
async fn a_topic_without_partitions_is_not_answered() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = broker_in(dir.path()).await;
    for v in versions(ApiKey::OffsetCommit) {
        let mut c = commit("empty-topics", "t", &[(0, 1)], v);
        let mut none = c.topics[0].clone();
        none.partitions.clear();
        c.topics.insert(0, none);
        let r: OffsetCommitResponse = call(&b, ApiKey::OffsetCommit, v, &c).await;
        assert_eq!(r.topics.len(), 1, "v{v}");
        assert_eq!(r.topics[0].partitions[0].error_code, NONE, "v{v}");
    }
    let mut d = OffsetDeleteRequest::default();
    d.group_id = gi("empty-topics");
    let mut t =
        kafka_protocol::messages::offset_delete_request::OffsetDeleteRequestTopic::default();
    t.name = tn("t");
    d.topics.push(t);
    let r: OffsetDeleteResponse = call(&b, ApiKey::OffsetDelete, 0, &d).await;
    assert_eq!(r.error_code, NONE);
    assert!(r.topics.is_empty());
}

#[tokio::test]
async fn regex_subscriptions_through_the_wire() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A manual clock: the group computes at most one target assignment per
    // `group.consumer.assignment.interval.ms`.
    let clock = es_storage::ManualClock::new(1_700_000_000_000);
    let mut cfg = BrokerConfig::new(dir.path().join("data"), "127.0.0.1:9092");
    cfg.storage.clock = clock.clone();
    let b = Broker::open_running(cfg).await.expect("open");
    b.create_topic("re-a", 2, Default::default(), false)
        .await
        .expect("create re-a");
    let a = b.topic("re-a").expect("re-a").id;
    let mut req = ConsumerGroupHeartbeatRequest::default();
    req.group_id = gi("cg-re");
    req.member_id = s("member-re");
    req.rebalance_timeout_ms = 30_000;
    req.subscribed_topic_regex = Some(s("re-.*"));
    req.topic_partitions = Some(Vec::new());
    let r: ConsumerGroupHeartbeatResponse = call(&b, ApiKey::ConsumerGroupHeartbeat, 1, &req).await;
    assert_eq!(r.error_code, NONE, "{:?}", r.error_message);
    let got = r.assignment.expect("assignment");
    assert_eq!(got.topic_partitions.len(), 1);
    assert_eq!(got.topic_partitions[0].topic_id, a);
    assert_eq!(got.topic_partitions[0].partitions, vec![0, 1]);

    for dv in versions(ApiKey::ConsumerGroupDescribe) {
        let mut d = ConsumerGroupDescribeRequest::default();
        d.group_ids = vec![gi("cg-re")];
        let r: ConsumerGroupDescribeResponse =
            call(&b, ApiKey::ConsumerGroupDescribe, dv, &d).await;
        let m = &r.groups[0].members[0];
        assert_eq!(m.subscribed_topic_regex.as_deref(), Some("re-.*"));
        assert!(m.subscribed_topic_names.is_empty());
    }

    // A topic created later that matches is assigned on the next beat.
    b.create_topic("re-b", 1, Default::default(), false)
        .await
        .expect("create re-b");
    let rb = b.topic("re-b").expect("re-b").id;
    let mut hb = ConsumerGroupHeartbeatRequest::default();
    hb.group_id = gi("cg-re");
    hb.member_id = s("member-re");
    hb.member_epoch = 2;
    hb.rebalance_timeout_ms = -1;
    // Within the assignment interval of the last target: the group epoch
    // moves, the member stays on the last target.
    let r: ConsumerGroupHeartbeatResponse = call(&b, ApiKey::ConsumerGroupHeartbeat, 1, &hb).await;
    assert_eq!((r.error_code, r.member_epoch), (NONE, 2));
    assert_eq!(r.assignment, None);
    clock.advance(std::time::Duration::from_millis(1_000));
    let r: ConsumerGroupHeartbeatResponse = call(&b, ApiKey::ConsumerGroupHeartbeat, 1, &hb).await;
    assert_eq!((r.error_code, r.member_epoch), (NONE, 3));
    let got = r.assignment.expect("assignment");
    let mut ids: Vec<Uuid> = got.topic_partitions.iter().map(|t| t.topic_id).collect();
    ids.sort();
    let mut want = vec![a, rb];
    want.sort();
    assert_eq!(ids, want);

    // An invalid regex: INVALID_REGULAR_EXPRESSION (128).
    let mut bad = req.clone();
    bad.member_id = s("member-bad");
    bad.subscribed_topic_regex = Some(s("re-[a"));
    let r: ConsumerGroupHeartbeatResponse = call(&b, ApiKey::ConsumerGroupHeartbeat, 1, &bad).await;
    assert_eq!(r.error_code, 128);
    assert_eq!(r.error_code, code(ResponseError::InvalidRegularExpression));
}

#[tokio::test(flavor = "multi_thread")]
async fn require_stable_waits_for_a_transaction_holding_an_offset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = broker_in(dir.path()).await;
    let mut ip = InitProducerIdRequest::default();
    ip.transactional_id = Some(TransactionalId(s("tx")));
    ip.transaction_timeout_ms = 60_000;
    ip.producer_id = ProducerId(-1);
    ip.producer_epoch = -1;
    let r: InitProducerIdResponse = call(&b, ApiKey::InitProducerId, 4, &ip).await;
    assert_eq!(r.error_code, NONE);
    let (pid, epoch) = (r.producer_id, r.producer_epoch);
    let mut ao = AddOffsetsToTxnRequest::default();
    ao.transactional_id = TransactionalId(s("tx"));
    ao.producer_id = pid;
    ao.producer_epoch = epoch;
    ao.group_id = gi("stable");
    let r: AddOffsetsToTxnResponse = call(&b, ApiKey::AddOffsetsToTxn, 3, &ao).await;
    assert_eq!(r.error_code, NONE);
    let mut tp =
        kafka_protocol::messages::txn_offset_commit_request::TxnOffsetCommitRequestPartition::default();
    tp.partition_index = 0;
    tp.committed_offset = 5;
    let mut tt =
        kafka_protocol::messages::txn_offset_commit_request::TxnOffsetCommitRequestTopic::default();
    tt.name = tn("t");
    tt.partitions = vec![tp];
    let mut tc = TxnOffsetCommitRequest::default();
    tc.transactional_id = TransactionalId(s("tx"));
    tc.group_id = gi("stable");
    tc.producer_id = pid;
    tc.producer_epoch = epoch;
    tc.topics = vec![tt];
    let r: TxnOffsetCommitResponse = call(&b, ApiKey::TxnOffsetCommit, 3, &tc).await;
    assert_eq!(r.topics[0].partitions[0].error_code, NONE);

    // (error, offset) of partitions 0 and 1 of t for group "stable".
    let fetch = |v: i16, require_stable: bool| {
        let b = b.clone();
        async move {
            let mut req = OffsetFetchRequest::default();
            req.require_stable = require_stable;
            let parts: Vec<(i16, i64)> = if v >= 8 {
                let mut t = kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopics::default();
                t.name = tn("t");
                t.partition_indexes = vec![0, 1];
                let mut g = kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup::default();
                g.group_id = gi("stable");
                g.topics = Some(vec![t]);
                req.groups = vec![g];
                let r: OffsetFetchResponse = call(&b, ApiKey::OffsetFetch, v, &req).await;
                assert_eq!(r.groups[0].error_code, NONE);
                r.groups[0].topics[0]
                    .partitions
                    .iter()
                    .map(|p| (p.error_code, p.committed_offset))
                    .collect()
            } else {
                let mut t = kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic::default();
                t.name = tn("t");
                t.partition_indexes = vec![0, 1];
                req.group_id = gi("stable");
                req.topics = Some(vec![t]);
                let r: OffsetFetchResponse = call(&b, ApiKey::OffsetFetch, v, &req).await;
                assert_eq!(r.error_code, NONE);
                r.topics[0]
                    .partitions
                    .iter()
                    .map(|p| (p.error_code, p.committed_offset))
                    .collect()
            };
            parts
        }
    };
    let unstable = code(ResponseError::UnstableOffsetCommit);
    for v in 7..=9 {
        assert_eq!(
            fetch(v, true).await,
            vec![(unstable, -1), (NONE, -1)],
            "v{v} require_stable"
        );
        assert_eq!(fetch(v, false).await, vec![(NONE, -1), (NONE, -1)], "v{v}");
    }
    // Before v7 there is no require_stable: the committed state is answered.
    assert_eq!(fetch(6, false).await, vec![(NONE, -1), (NONE, -1)]);

    let mut end = EndTxnRequest::default();
    end.transactional_id = TransactionalId(s("tx"));
    end.producer_id = pid;
    end.producer_epoch = epoch;
    end.committed = true;
    let r: EndTxnResponse = call(&b, ApiKey::EndTxn, 3, &end).await;
    assert_eq!(r.error_code, NONE);
    for v in 7..=9 {
        assert_eq!(
            fetch(v, true).await,
            vec![(NONE, 5), (NONE, -1)],
            "v{v} after the commit"
        );
    }
}

#[tokio::test]
async fn session_timeout_bounds_follow_the_broker_flags() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = BrokerConfig::new(dir.path().join("data"), "127.0.0.1:9092");
    cfg.group_min_session_timeout_ms = 500;
    cfg.group_max_session_timeout_ms = 2_000;
    let b = Broker::open_running(cfg).await.expect("open");
    let code_for = |timeout_ms: i32| {
        let b = b.clone();
        async move {
            let mut j = join("bounds", "", None, 9);
            j.session_timeout_ms = timeout_ms;
            let r: JoinGroupResponse = call(&b, ApiKey::JoinGroup, 9, &j).await;
            r.error_code
        }
    };
    let invalid = code(ResponseError::InvalidSessionTimeout);
    assert_eq!(code_for(499).await, invalid);
    assert_eq!(code_for(2_001).await, invalid);
    // In bounds: the first join of v4+ asks for a member id.
    assert_eq!(code_for(500).await, code(ResponseError::MemberIdRequired));
    assert_eq!(code_for(2_000).await, code(ResponseError::MemberIdRequired));
}
