//! Metadata (v0-13): brokers, cluster id, topics and partitions, with topic
//! auto-creation when the broker and the request allow it.
//!
//! Fields exist only in some versions and the crate refuses to encode a field
//! its version lacks, so every versioned field is set under a version check.
//! Brokers, leaders, leader epochs, replicas and ISRs come from this broker's
//! applied copy of the metadata log (`Broker::image`): every live broker with
//! its endpoint, and for each partition its leader, or LEADER_NOT_AVAILABLE
//! with leader -1 when it has none (its replicas are fenced); replicas on
//! fenced brokers are listed as offline (v5+), as Kafka's KRaft metadata
//! cache does. The controller named is the quorum's leader.
//!
//! Internal topics ([`crate::topics::is_internal`]) are flagged `is_internal`,
//! also in the error answer for one that does not exist, as Kafka flags them
//! by name. `__consumer_offsets` is an ordinary stored topic once it exists
//! (created on the first group coordinator lookup, see
//! [`crate::broker::Broker::offsets_topic`]), so it is listed with its id
//! like any other; auto-creation through Metadata gives it Kafka's settings
//! for it.

use std::collections::HashSet;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use es_auth::acl::{AclOperation, ResourceType, CLUSTER_NAME};
use es_meta::image::NO_LEADER;

use super::{Ctx, RequestError, TOPIC_OPERATIONS_ALL};
use crate::broker::Leadership;
use crate::errors::{code, ResponseError};
use crate::topics::{is_internal, validate_topic_name, Topic};

pub async fn handle(ctx: &Ctx, req: MetadataRequest) -> Result<Option<Bytes>, RequestError> {
    let v = ctx.version;
    let b = &ctx.broker;
    let include_ops = v >= 8 && req.include_topic_authorized_operations;
    let mut r = MetadataResponse::default();
    let image = b.image();
    r.brokers = b
        .live_brokers(image.as_deref())
        .into_iter()
        .map(|e| {
            let mut broker = MetadataResponseBroker::default();
            broker.node_id = BrokerId(e.id);
            broker.host = StrBytes::from_string(e.host);
            broker.port = e.port;
            if v >= 1 {
                broker.rack = e.rack.map(StrBytes::from_string);
            }
            broker
        })
        .collect();
    if v >= 1 {
        r.controller_id = BrokerId(b.controller_id(image.as_deref()));
    }
    if v >= 2 {
        r.cluster_id = Some(StrBytes::from_string(b.cluster_id().to_string()));
    }
    if (8..=10).contains(&v) && req.include_cluster_authorized_operations {
        r.cluster_authorized_operations = super::admin::describe::cluster_operations(ctx);
    }
    // v0 has no null: an empty list means every topic.
    let requested = match req.topics {
        None => None,
        Some(list) if v == 0 && list.is_empty() => None,
        Some(list) => Some(list),
    };
    let describable = |name: &str| ctx.allowed(AclOperation::Describe, ResourceType::Topic, name);
    match requested {
        None => {
            // All topics: those the client may not describe are left out.
            for t in b.topics() {
                if ctx.allowed(AclOperation::Describe, ResourceType::Topic, &t.name) {
                    r.topics.push(describe(ctx, &t, include_ops));
                }
            }
        }
        Some(list) => {
            // Kafka refuses the whole request (its error answer: no brokers,
            // no cluster, every topic named with the error) for a topic id
            // before v12 or a missing name before v12 (INVALID_REQUEST), and
            // fails on a missing name given without an id from v12 on
            // (UNKNOWN_SERVER_ERROR).
            let ids: Vec<uuid::Uuid> = list
                .iter()
                .map(|t| t.topic_id)
                .filter(|id| !id.is_nil())
                .collect();
            let refused = if v < 12
                && list
                    .iter()
                    .any(|t| t.name.is_none() || !t.topic_id.is_nil())
            {
                Some(ResponseError::InvalidRequest)
            } else if ids.is_empty() && list.iter().any(|t| t.name.is_none()) {
                Some(ResponseError::UnknownServerError)
            } else {
                None
            };
            if let Some(e) = refused {
                return ctx.respond(&whole_error(v, &list, code(e)));
            }
            // With any topic id, Kafka looks topics up by id alone (names
            // are ignored); each id or name is answered once.
            if !ids.is_empty() {
                let mut seen = HashSet::new();
                for id in ids.into_iter().filter(|id| seen.insert(*id)) {
                    match b.topic_by_id(id) {
                        Some(topic) if !describable(&topic.name) => {
                            let mut e =
                                error_topic(v, None, code(ResponseError::TopicAuthorizationFailed));
                            e.topic_id = id;
                            r.topics.push(e);
                        }
                        Some(topic) => r.topics.push(describe(ctx, &topic, include_ops)),
                        None => {
                            let mut e = error_topic(v, None, code(ResponseError::UnknownTopicId));
                            e.topic_id = id;
                            r.topics.push(e);
                        }
                    }
                }
                return ctx.respond(&r);
            }
            // Kafka's default for v0-3 is to auto-create.
            let allow_create = v < 4 || req.allow_auto_topic_creation;
            // Auto-creation needs CREATE on the cluster or on the topic.
            let may_create_any = allow_create
                && b.config().auto_create_topics
                && ctx.allowed(AclOperation::Create, ResourceType::Cluster, CLUSTER_NAME);
            let mut seen = HashSet::new();
            let list: Vec<_> = list
                .into_iter()
                .filter(|t| t.name.as_ref().is_none_or(|n| seen.insert(n.0.to_string())))
                .collect();
            for t in list {
                match t.name {
                    Some(name) => {
                        let name = name.0.to_string();
                        if let Err(why) = validate_topic_name(&name) {
                            tracing::debug!(topic = %name, %why, "metadata for an invalid topic name");
                            r.topics.push(error_topic(
                                v,
                                Some(&name),
                                code(ResponseError::InvalidTopicException),
                            ));
                            continue;
                        }
                        // A topic the client may not describe gets
                        // TOPIC_AUTHORIZATION_FAILED whether it exists or not.
                        if !describable(&name) {
                            r.topics.push(error_topic(
                                v,
                                Some(&name),
                                code(ResponseError::TopicAuthorizationFailed),
                            ));
                            continue;
                        }
                        let may_create = allow_create
                            && (may_create_any
                                || ctx.allowed(AclOperation::Create, ResourceType::Topic, &name));
                        if allow_create
                            && b.config().auto_create_topics
                            && !may_create
                            && b.topic(&name).is_none()
                        {
                            r.topics.push(error_topic(
                                v,
                                Some(&name),
                                code(ResponseError::TopicAuthorizationFailed),
                            ));
                            continue;
                        }
                        match b.get_or_create(&name, may_create).await {
                            Ok(topic) => r.topics.push(describe(ctx, &topic, include_ops)),
                            Err(e) => r.topics.push(error_topic(v, Some(&name), e.code)),
                        }
                    }
                    None => match b.topic_by_id(t.topic_id) {
                        Some(topic) if v >= 10 && describable(&topic.name) => {
                            r.topics.push(describe(ctx, &topic, include_ops))
                        }
                        _ => {
                            let mut e = error_topic(v, None, code(ResponseError::UnknownTopicId));
                            if v >= 10 {
                                e.topic_id = t.topic_id;
                            }
                            r.topics.push(e);
                        }
                    },
                }
            }
        }
    }
    ctx.respond(&r)
}

/// Kafka's answer to a Metadata request it fails whole
/// (`MetadataRequest.getErrorResponse`): no brokers, no cluster id, no
/// controller, and each topic requested with the error (a missing name as
/// "").
fn whole_error(v: i16, list: &[MetadataRequestTopic], error_code: i16) -> MetadataResponse {
    let mut r = MetadataResponse::default();
    if v >= 1 {
        r.controller_id = BrokerId(-1);
    }
    if v >= 13 {
        r.error_code = error_code;
    }
    for t in list {
        let mut e = MetadataResponseTopic::default();
        e.error_code = error_code;
        e.name = Some(t.name.clone().unwrap_or_default());
        if v >= 10 {
            e.topic_id = t.topic_id;
        }
        r.topics.push(e);
    }
    r
}

fn error_topic(v: i16, name: Option<&str>, error_code: i16) -> MetadataResponseTopic {
    let mut t = MetadataResponseTopic::default();
    t.error_code = error_code;
    if v >= 1 {
        t.is_internal = name.is_some_and(is_internal);
    }
    t.name = match name {
        Some(n) => Some(TopicName(StrBytes::from_string(n.to_string()))),
        // Names are nullable from v12 on; before that an empty name stands in.
        None if v >= 12 => None,
        None => Some(TopicName(StrBytes::default())),
    };
    t
}

/// One partition's leadership as the metadata has it.
fn partition(v: i16, index: i32, l: Leadership) -> MetadataResponsePartition {
    let mut m = MetadataResponsePartition::default();
    m.partition_index = index;
    m.leader_id = BrokerId(l.leader);
    if l.leader == NO_LEADER {
        m.error_code = code(ResponseError::LeaderNotAvailable);
    }
    if v >= 7 {
        m.leader_epoch = l.leader_epoch;
    }
    if v >= 5 {
        m.offline_replicas = l.offline.into_iter().map(BrokerId).collect();
    }
    m.replica_nodes = l.replicas.into_iter().map(BrokerId).collect();
    m.isr_nodes = l.isr.into_iter().map(BrokerId).collect();
    m
}

fn describe(ctx: &Ctx, topic: &Arc<Topic>, include_ops: bool) -> MetadataResponseTopic {
    let v = ctx.version;
    let b = &ctx.broker;
    let image = b.image();
    let mut t = MetadataResponseTopic::default();
    t.name = Some(TopicName(StrBytes::from_string(topic.name.clone())));
    if v >= 1 {
        t.is_internal = is_internal(&topic.name);
    }
    if v >= 10 {
        t.topic_id = topic.id;
    }
    if include_ops {
        t.topic_authorized_operations =
            ctx.authorized_operations(TOPIC_OPERATIONS_ALL, ResourceType::Topic, &topic.name);
    }
    t.partitions = (0..topic.partition_count())
        .filter_map(|i| {
            let l = b.leadership(image.as_deref(), &topic.name, i)?;
            Some(partition(v, i, l))
        })
        .collect();
    t
}
