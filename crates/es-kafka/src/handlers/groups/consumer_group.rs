//! The KIP-848 consumer group APIs: ConsumerGroupHeartbeat (v0-1) and
//! ConsumerGroupDescribe (v0-1), with the server-side assignor seeing the
//! broker's topics through `BrokerTopics`.

use bytes::Bytes;
use es_auth::acl::{AclOperation, ResourceType};
use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment as CgdAssignment, DescribedGroup as CgdGroup, Member as CgdMember,
    TopicPartitions as CgdTopicPartitions,
};
use kafka_protocol::messages::consumer_group_heartbeat_response::{
    Assignment as CghAssignment, TopicPartitions as CghTopicPartitions,
};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse, TopicName,
};
use uuid::Uuid;

use super::{client_host, client_id, group_id, s, BrokerTopics, GROUP_OPERATIONS_ALL};
use crate::errors::{code, group_code, ResponseError};
use crate::groups::consumer::{self};
use crate::groups::error::GroupError;
use crate::handlers::{Ctx, RequestError, AUTHORIZED_OPERATIONS_OMITTED};

pub fn consumer_group_heartbeat(
    ctx: &Ctx,
    req: ConsumerGroupHeartbeatRequest,
) -> Result<Option<Bytes>, RequestError> {
    let v = ctx.version;
    let gid = group_id(&req.group_id);
    let not_here = ctx.broker.owns_group(&gid).err();
    // READ on the group, then DESCRIBE on every topic it subscribes to by
    // name (a client may not learn of topics it cannot describe).
    let topics_denied = req.subscribed_topic_names.as_ref().is_some_and(|ts| {
        ts.iter()
            .any(|t| !ctx.allowed(AclOperation::Describe, ResourceType::Topic, t.0.as_str()))
    });
    let outcome = if !ctx.allowed(AclOperation::Read, ResourceType::Group, &gid) {
        consumer::HeartbeatResponse::error(GroupError::GroupAuthorizationFailed)
    } else if topics_denied {
        let mut r = ConsumerGroupHeartbeatResponse::default();
        r.error_code = code(ResponseError::TopicAuthorizationFailed);
        r.heartbeat_interval_ms = 0;
        return ctx.respond(&r);
    } else if gid.is_empty() {
        consumer::HeartbeatResponse::error(GroupError::InvalidRequest(
            "GroupId can't be empty.".to_string(),
        ))
    } else if let Some(n) = not_here {
        consumer::HeartbeatResponse::error(n.into())
    } else {
        let hr = consumer::HeartbeatRequest {
            api_version: v,
            group_id: gid,
            member_id: req.member_id.to_string(),
            member_epoch: req.member_epoch,
            instance_id: req.instance_id.as_ref().map(|x| x.to_string()),
            rack_id: req.rack_id.as_ref().map(|x| x.to_string()),
            rebalance_timeout_ms: req.rebalance_timeout_ms,
            subscribed_topic_names: req
                .subscribed_topic_names
                .as_ref()
                .map(|ts| ts.iter().map(|t| t.0.to_string()).collect()),
            subscribed_topic_regex: if v >= 1 {
                req.subscribed_topic_regex.as_ref().map(|x| x.to_string())
            } else {
                None
            },
            server_assignor: req.server_assignor.as_ref().map(|x| x.to_string()),
            topic_partitions: req.topic_partitions.as_ref().map(|ts| {
                ts.iter()
                    .map(|t| (t.topic_id, t.partitions.clone()))
                    .collect()
            }),
            client_id: client_id(ctx),
            client_host: client_host(ctx),
        };
        ctx.broker
            .groups()
            .consumer_heartbeat(hr, &BrokerTopics(&ctx.broker))
    };
    let mut r = ConsumerGroupHeartbeatResponse::default();
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
        let mut x = CghAssignment::default();
        x.topic_partitions = a
            .into_iter()
            .map(|(t, ps)| {
                let mut tp = CghTopicPartitions::default();
                tp.topic_id = t;
                tp.partitions = ps;
                tp
            })
            .collect();
        x
    });
    ctx.respond(&r)
}

pub fn consumer_group_describe(
    ctx: &Ctx,
    req: ConsumerGroupDescribeRequest,
) -> Result<Option<Bytes>, RequestError> {
    let v = ctx.version;
    let coord = ctx.broker.groups();
    let view = BrokerTopics(&ctx.broker);
    let to_wire = |a: Vec<(Uuid, String, Vec<i32>)>| {
        let mut x = CgdAssignment::default();
        x.topic_partitions = a
            .into_iter()
            .map(|(id, name, ps)| {
                let mut tp = CgdTopicPartitions::default();
                tp.topic_id = id;
                tp.topic_name = TopicName(s(name));
                tp.partitions = ps;
                tp
            })
            .collect();
        x
    };
    let mut r = ConsumerGroupDescribeResponse::default();
    for g in &req.group_ids {
        let gid = group_id(g);
        let mut d = CgdGroup::default();
        d.group_id = g.clone();
        if !ctx.allowed(AclOperation::Describe, ResourceType::Group, &gid) {
            d.error_code = code(ResponseError::GroupAuthorizationFailed);
            r.groups.push(d);
            continue;
        }
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
        match coord.consumer_describe(&gid, &view) {
            Err(e) => {
                d.error_code = e.code();
                d.error_message = e.message().map(s);
            }
            // A group whose members subscribe to or are assigned a topic
            // the client may not describe is refused whole.
            Ok(x)
                if x.members.iter().any(|m| {
                    m.subscribed_topic_names
                        .iter()
                        .chain(m.assignment.iter().map(|(_, n, _)| n))
                        .chain(m.target_assignment.iter().map(|(_, n, _)| n))
                        .any(|t| !ctx.allowed(AclOperation::Describe, ResourceType::Topic, t))
                }) =>
            {
                d.error_code = code(ResponseError::TopicAuthorizationFailed);
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
                        let mut cm = CgdMember::default();
                        cm.member_id = s(m.member_id);
                        cm.instance_id = m.instance_id.map(s);
                        cm.rack_id = m.rack_id.map(s);
                        cm.member_epoch = m.member_epoch;
                        cm.client_id = s(m.client_id);
                        cm.client_host = s(m.client_host);
                        cm.subscribed_topic_names = m
                            .subscribed_topic_names
                            .into_iter()
                            .map(|t| TopicName(s(t)))
                            .collect();
                        cm.subscribed_topic_regex = Some(s(m.subscribed_topic_regex));
                        cm.assignment = to_wire(m.assignment);
                        cm.target_assignment = to_wire(m.target_assignment);
                        if v >= 1 {
                            // KIP-1099: 1 is a member of the consumer protocol.
                            cm.member_type = 1;
                        }
                        cm
                    })
                    .collect();
            }
        }
        r.groups.push(d);
    }
    ctx.respond(&r)
}
