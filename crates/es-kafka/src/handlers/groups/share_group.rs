//! The share group APIs (KIP-932): ShareGroupHeartbeat (v1) and
//! ShareGroupDescribe (v1), with the `simple` assignor seeing the broker's
//! topics through `BrokerTopics`. The share-partitions' records are served
//! by ShareFetch and ShareAcknowledge (`crate::shares`), not here.

use bytes::Bytes;
use es_auth::acl::{AclOperation, ResourceType};
use kafka_protocol::messages::share_group_describe_response::{
    Assignment as SgdAssignment, DescribedGroup as SgdGroup, Member as SgdMember,
    TopicPartitions as SgdTopicPartitions,
};
use kafka_protocol::messages::share_group_heartbeat_response::{
    Assignment as SghAssignment, TopicPartitions as SghTopicPartitions,
};
use kafka_protocol::messages::{
    ShareGroupDescribeRequest, ShareGroupDescribeResponse, ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse, TopicName,
};

use super::{client_host, client_id, group_id, s, BrokerTopics, GROUP_OPERATIONS_ALL};
use crate::errors::{code, group_code, ResponseError};
use crate::groups::error::GroupError;
use crate::groups::share::{self, ShareHeartbeatRequest, ShareHeartbeatResponse};
use crate::handlers::{Ctx, RequestError, AUTHORIZED_OPERATIONS_OMITTED};

/// ShareGroupHeartbeat, in Kafka's order of checks: READ on the group, the
/// member id, DESCRIBE on every subscribed topic, the request's own rules,
/// then whether this broker coordinates the group.
pub fn share_group_heartbeat(
    ctx: &Ctx,
    req: ShareGroupHeartbeatRequest,
) -> Result<Option<Bytes>, RequestError> {
    let gid = group_id(&req.group_id);
    let hr = ShareHeartbeatRequest {
        group_id: gid.clone(),
        member_id: req.member_id.to_string(),
        member_epoch: req.member_epoch,
        rack_id: req.rack_id.as_ref().map(|x| x.to_string()),
        subscribed_topic_names: req
            .subscribed_topic_names
            .as_ref()
            .map(|ts| ts.iter().map(|t| t.0.to_string()).collect()),
        client_id: client_id(ctx),
        client_host: client_host(ctx),
    };
    let topics_denied = hr.subscribed_topic_names.as_ref().is_some_and(|ts| {
        ts.iter()
            .any(|t| !ctx.allowed(AclOperation::Describe, ResourceType::Topic, t))
    });
    let mut not_here = None;
    let outcome = if !ctx.allowed(AclOperation::Read, ResourceType::Group, &gid) {
        ShareHeartbeatResponse::error(GroupError::GroupAuthorizationFailed)
    } else if let Err(e) = share::check_member_id(&hr.member_id) {
        ShareHeartbeatResponse::error(e)
    } else if topics_denied {
        ShareHeartbeatResponse::error(GroupError::TopicAuthorizationFailed)
    } else if let Err(e) = share::validate(&hr) {
        ShareHeartbeatResponse::error(e)
    } else if let Err(n) = ctx.broker.owns_group(&gid) {
        not_here = Some(n);
        ShareHeartbeatResponse::error(n.into())
    } else {
        ctx.broker
            .groups()
            .share_heartbeat(hr, &BrokerTopics(&ctx.broker))
    };
    let mut r = ShareGroupHeartbeatResponse::default();
    r.error_code = group_code(&outcome.error);
    r.error_message = match not_here {
        // Kafka's NotCoordinatorException carries its default message.
        Some(n) => Some(s(n.message())),
        None => outcome.error.as_ref().and_then(GroupError::message).map(s),
    };
    r.member_id = outcome.member_id.map(s);
    r.member_epoch = outcome.member_epoch;
    r.heartbeat_interval_ms = outcome.heartbeat_interval_ms;
    r.assignment = outcome.assignment.map(|a| {
        let mut x = SghAssignment::default();
        x.topic_partitions = a
            .into_iter()
            .map(|(t, ps)| {
                let mut tp = SghTopicPartitions::default();
                tp.topic_id = t;
                tp.partitions = ps;
                tp
            })
            .collect();
        x
    });
    ctx.respond(&r)
}

/// ShareGroupDescribe, answered as Kafka 4.4's `handleShareGroupDescribe`
/// orders it: first every group the client may not DESCRIBE
/// (GROUP_AUTHORIZATION_FAILED, in request order), then the others in
/// request order. Unlike ConsumerGroupDescribe, Kafka 4.4 checks no topic
/// here: a member's subscribed topics are shown whatever the client may
/// describe (seen in compat-tests/acl-matrix), and es does the same.
pub fn share_group_describe(
    ctx: &Ctx,
    req: ShareGroupDescribeRequest,
) -> Result<Option<Bytes>, RequestError> {
    let coord = ctx.broker.groups();
    let view = BrokerTopics(&ctx.broker);
    let mut r = ShareGroupDescribeResponse::default();
    let (allowed, denied): (Vec<_>, Vec<_>) = req
        .group_ids
        .iter()
        .partition(|g| ctx.allowed(AclOperation::Describe, ResourceType::Group, &group_id(g)));
    for g in denied {
        let mut d = SgdGroup::default();
        d.group_id = g.clone();
        d.error_code = code(ResponseError::GroupAuthorizationFailed);
        r.groups.push(d);
    }
    for g in allowed {
        let gid = group_id(g);
        let mut d = SgdGroup::default();
        d.group_id = g.clone();
        if gid.is_empty() {
            d.error_code = code(ResponseError::InvalidGroupId);
            r.groups.push(d);
            continue;
        }
        if let Err(n) = ctx.broker.owns_group(&gid) {
            d.error_code = n.code();
            r.groups.push(d);
            continue;
        }
        match coord.share_describe(&gid, &view) {
            Err(e) => {
                d.error_code = e.code();
                d.error_message = e.message().map(s);
            }
            Ok(x) => {
                d.group_state = s(x.state);
                d.group_epoch = x.group_epoch;
                d.assignment_epoch = x.assignment_epoch;
                d.assignor_name = s(x.assignor_name);
                d.authorized_operations = if req.include_authorized_operations {
                    ctx.authorized_operations(GROUP_OPERATIONS_ALL, ResourceType::Group, &gid)
                } else {
                    AUTHORIZED_OPERATIONS_OMITTED
                };
                d.members = x
                    .members
                    .into_iter()
                    .map(|m| {
                        let mut sm = SgdMember::default();
                        sm.member_id = s(m.member_id);
                        sm.rack_id = m.rack_id.map(s);
                        sm.member_epoch = m.member_epoch;
                        sm.client_id = s(m.client_id);
                        sm.client_host = s(m.client_host);
                        sm.subscribed_topic_names = m
                            .subscribed_topic_names
                            .into_iter()
                            .map(|t| TopicName(s(t)))
                            .collect();
                        let mut a = SgdAssignment::default();
                        a.topic_partitions = m
                            .assignment
                            .into_iter()
                            .map(|(id, name, ps)| {
                                let mut tp = SgdTopicPartitions::default();
                                tp.topic_id = id;
                                tp.topic_name = TopicName(s(name));
                                tp.partitions = ps;
                                tp
                            })
                            .collect();
                        sm.assignment = a;
                        sm
                    })
                    .collect();
            }
        }
        r.groups.push(d);
    }
    ctx.respond(&r)
}
