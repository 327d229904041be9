//! ShareGroupHeartbeat and ShareGroupDescribe over the wire, and what the
//! other group APIs answer for a share group, against a broker on a
//! temporary data directory: requests encoded as a client sends them,
//! answers decoded at the same version.

use std::sync::Arc;

use kafka_protocol::messages::*;

use super::*;
use crate::errors::{code, ResponseError, NONE};
use crate::handlers::wire_client::{call, CLIENT_ID};
use crate::BrokerConfig;

fn gi(v: &str) -> GroupId {
    GroupId(s(v))
}

const M1: &str = "5Qn8m3mzTgyO4aJ2v9b1ag";

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

fn heartbeat(
    group: &str,
    member: &str,
    epoch: i32,
    topics: Option<&[&str]>,
) -> ShareGroupHeartbeatRequest {
    let mut r = ShareGroupHeartbeatRequest::default();
    r.group_id = gi(group);
    r.member_id = s(member);
    r.member_epoch = epoch;
    r.subscribed_topic_names = topics.map(|ts| ts.iter().map(|t| TopicName(s(*t))).collect());
    r
}

async fn share_heartbeat(
    b: &Arc<Broker>,
    req: &ShareGroupHeartbeatRequest,
) -> ShareGroupHeartbeatResponse {
    call(b, ApiKey::ShareGroupHeartbeat, 1, req).await
}

async fn share_describe(b: &Arc<Broker>, groups: &[&str]) -> ShareGroupDescribeResponse {
    let mut d = ShareGroupDescribeRequest::default();
    d.group_ids = groups.iter().map(|g| gi(g)).collect();
    d.include_authorized_operations = true;
    call(b, ApiKey::ShareGroupDescribe, 1, &d).await
}

#[tokio::test]
async fn the_share_group_protocol_through_the_wire() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = broker_in(dir.path()).await;
    let tid = b.topic("t").expect("t").id;
    let r = share_heartbeat(&b, &heartbeat("sg", M1, 0, Some(&["t"]))).await;
    assert_eq!(r.error_code, NONE, "{:?}", r.error_message);
    assert_eq!(r.member_id.as_deref(), Some(M1));
    assert_eq!(r.member_epoch, 2, "Kafka 4.4: a new group is at epoch 1");
    assert_eq!(r.heartbeat_interval_ms, 5_000);
    // Kafka 4.4: the join's target has no share-partition yet (none was
    // initialised), so the assignment is empty.
    let a = r
        .assignment
        .expect("the first heartbeat carries the assignment");
    assert!(a.topic_partitions.is_empty(), "{a:?}");
    // Within the assignment interval (1 s) nothing new: no assignment.
    let again = share_heartbeat(&b, &heartbeat("sg", M1, 2, None)).await;
    assert_eq!((again.error_code, again.member_epoch), (NONE, 2));
    assert!(again.assignment.is_none());
    // After it, the next heartbeat gets the initialised partitions at a new
    // epoch.
    tokio::time::sleep(std::time::Duration::from_millis(1_100)).await;
    let r = share_heartbeat(&b, &heartbeat("sg", M1, 2, None)).await;
    assert_eq!((r.error_code, r.member_epoch), (NONE, 3));
    let a = r.assignment.expect("the partitions, at last");
    assert_eq!(a.topic_partitions.len(), 1);
    assert_eq!(a.topic_partitions[0].topic_id, tid);
    assert_eq!(a.topic_partitions[0].partitions, vec![0, 1, 2]);

    let d = share_describe(&b, &["sg", "nope", ""]).await;
    let g = &d.groups[0];
    assert_eq!(g.error_code, NONE);
    assert_eq!(g.group_state.as_str(), "Stable");
    assert_eq!((g.group_epoch, g.assignment_epoch), (3, 3));
    assert_eq!(g.assignor_name.as_str(), "simple");
    assert_eq!(g.authorized_operations, GROUP_OPERATIONS_ALL);
    let m = &g.members[0];
    assert_eq!(m.member_id.as_str(), M1);
    assert_eq!(m.member_epoch, 3);
    assert_eq!(m.client_id.as_str(), CLIENT_ID);
    assert_eq!(m.client_host.as_str(), "/127.0.0.1");
    assert_eq!(m.subscribed_topic_names, vec![TopicName(s("t"))]);
    let tp = &m.assignment.topic_partitions[0];
    assert_eq!((tp.topic_id, tp.topic_name.0.as_str()), (tid, "t"));
    assert_eq!(tp.partitions, vec![0, 1, 2]);
    assert_eq!(d.groups[1].error_code, code(ResponseError::GroupIdNotFound));
    assert_eq!(
        d.groups[1].error_message.as_deref(),
        Some("Group nope not found.")
    );
    assert_eq!(d.groups[2].error_code, code(ResponseError::InvalidGroupId));

    // ListGroups v5 shows the type; `kafka-share-groups.sh --list` filters by it.
    let mut lg = ListGroupsRequest::default();
    lg.types_filter = vec![s("share")];
    let l: ListGroupsResponse = call(&b, ApiKey::ListGroups, 5, &lg).await;
    assert_eq!(l.groups.len(), 1);
    assert_eq!(l.groups[0].group_id.0.as_str(), "sg");
    assert_eq!(l.groups[0].protocol_type.as_str(), "share");
    assert_eq!(l.groups[0].group_state.as_str(), "Stable");
    assert_eq!(l.groups[0].group_type.as_str(), "share");
    lg.types_filter = vec![s("consumer")];
    let l: ListGroupsResponse = call(&b, ApiKey::ListGroups, 5, &lg).await;
    assert!(l.groups.is_empty());

    // DescribeGroups: not a classic group.
    let mut dg = DescribeGroupsRequest::default();
    dg.groups = vec![gi("sg")];
    let r6: DescribeGroupsResponse = call(&b, ApiKey::DescribeGroups, 6, &dg).await;
    assert_eq!(
        r6.groups[0].error_code,
        code(ResponseError::GroupIdNotFound)
    );
    assert_eq!(
        r6.groups[0].error_message.as_deref(),
        Some("Group sg is not a classic group.")
    );
    assert_eq!(r6.groups[0].group_state.as_str(), "Dead");
    let r5: DescribeGroupsResponse = call(&b, ApiKey::DescribeGroups, 5, &dg).await;
    assert_eq!(r5.groups[0].error_code, NONE);
    assert_eq!(r5.groups[0].group_state.as_str(), "Dead");

    // No committed offsets in a share group.
    let mut of = OffsetFetchRequest::default();
    let mut g = offset_fetch_request::OffsetFetchRequestGroup::default();
    g.group_id = gi("sg");
    of.groups = vec![g];
    let f: OffsetFetchResponse = call(&b, ApiKey::OffsetFetch, 9, &of).await;
    assert_eq!(f.groups[0].error_code, code(ResponseError::GroupIdNotFound));

    // JoinGroup: another protocol.
    let mut j = JoinGroupRequest::default();
    j.group_id = gi("sg");
    j.session_timeout_ms = 10_000;
    j.rebalance_timeout_ms = 10_000;
    j.protocol_type = s("consumer");
    let jr: JoinGroupResponse = call(&b, ApiKey::JoinGroup, 9, &j).await;
    assert_eq!(
        jr.error_code,
        code(ResponseError::InconsistentGroupProtocol)
    );

    // DeleteGroups: only once the member has left.
    let mut del = DeleteGroupsRequest::default();
    del.groups_names = vec![gi("sg")];
    let dr: DeleteGroupsResponse = call(&b, ApiKey::DeleteGroups, 2, &del).await;
    assert_eq!(dr.results[0].error_code, code(ResponseError::NonEmptyGroup));
    let left = share_heartbeat(&b, &heartbeat("sg", M1, -1, None)).await;
    assert_eq!((left.error_code, left.member_epoch), (NONE, -1));
    assert_eq!(left.member_id.as_deref(), Some(M1));
    let dr: DeleteGroupsResponse = call(&b, ApiKey::DeleteGroups, 2, &del).await;
    assert_eq!(dr.results[0].error_code, NONE);
    let d = share_describe(&b, &["sg"]).await;
    assert_eq!(d.groups[0].error_code, code(ResponseError::GroupIdNotFound));
}

#[tokio::test]
async fn share_group_heartbeat_refuses_as_kafka_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = broker_in(dir.path()).await;
    let cases: Vec<(ShareGroupHeartbeatRequest, ResponseError, Option<&str>)> = vec![
        (
            heartbeat("sg", "", 0, Some(&["t"])),
            ResponseError::InvalidRequest,
            Some("Invalid member id in the request."),
        ),
        (
            heartbeat("sg", &"x".repeat(37), 0, Some(&["t"])),
            ResponseError::InvalidRequest,
            Some("Invalid member id in the request."),
        ),
        (
            heartbeat("", M1, 0, Some(&["t"])),
            ResponseError::InvalidRequest,
            Some("GroupId can't be empty."),
        ),
        (
            heartbeat("sg", M1, 0, None),
            ResponseError::InvalidRequest,
            Some("SubscribedTopicNames must be set in first request."),
        ),
        (
            heartbeat("sg", M1, -2, None),
            ResponseError::InvalidRequest,
            Some("MemberEpoch is invalid."),
        ),
        (
            heartbeat("sg", M1, 3, None),
            ResponseError::GroupIdNotFound,
            Some("Share group sg not found."),
        ),
        (
            heartbeat("sg", M1, -1, None),
            ResponseError::GroupIdNotFound,
            Some("Group sg not found."),
        ),
    ];
    for (req, err, msg) in cases {
        let r = share_heartbeat(&b, &req).await;
        assert_eq!(r.error_code, code(err), "{req:?}: {:?}", r.error_message);
        assert_eq!(r.error_message.as_deref(), msg, "{req:?}");
        assert_eq!(r.member_epoch, 0);
        assert!(r.assignment.is_none());
    }
    let mut rack = heartbeat("sg", M1, 0, Some(&["t"]));
    rack.rack_id = Some(s(""));
    let r = share_heartbeat(&b, &rack).await;
    assert_eq!(r.error_message.as_deref(), Some("RackId can't be empty."));

    // A topic that does not exist: the member joins with nothing assigned.
    let r = share_heartbeat(&b, &heartbeat("sg", M1, 0, Some(&["missing"]))).await;
    assert_eq!(r.error_code, NONE, "{:?}", r.error_message);
    let a = r
        .assignment
        .expect("the first heartbeat carries the assignment");
    assert!(a.topic_partitions.is_empty());
    // A classic group's id is not a share group's.
    let mut c = ConsumerGroupHeartbeatRequest::default();
    c.group_id = gi("sg");
    c.member_id = s("other");
    c.rebalance_timeout_ms = 10_000;
    c.subscribed_topic_names = Some(vec![TopicName(s("t"))]);
    c.topic_partitions = Some(Vec::new());
    let cr: ConsumerGroupHeartbeatResponse = call(&b, ApiKey::ConsumerGroupHeartbeat, 1, &c).await;
    assert_eq!(cr.error_code, code(ResponseError::GroupIdNotFound));
    assert_eq!(
        cr.error_message.as_deref(),
        Some("Group sg is not a consumer group.")
    );
}
