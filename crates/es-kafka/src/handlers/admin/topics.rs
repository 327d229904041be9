//! CreateTopics, DeleteTopics and CreatePartitions: the APIs that add and
//! remove topics and partitions, with the replication checks they share (a
//! replication factor the available brokers can hold; manual assignments
//! of distinct registered brokers).

use std::collections::{BTreeMap, HashSet};

use bytes::Bytes;
use es_auth::acl::{AclOperation, ResourceType};
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{
    BrokerId, CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest,
    CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse, TopicName,
};

use super::s;
use crate::broker::{AdminError, Broker};
use crate::config::{validate_topic_config, TopicConfig};
use crate::errors::{code, ResponseError};
use crate::handlers::authz::TOPIC_AUTHORIZATION_FAILED;
use crate::handlers::{controller_deadline_passed, Ctx, RequestError};

/// KRaft's metadata log: the one topic name CreateTopics refuses.
const CLUSTER_METADATA_TOPIC: &str = "__cluster_metadata";

/// Kafka's `QuorumController.MAX_RECORDS_PER_USER_OP`: the most records one
/// admin operation may write (one per new partition); more is refused whole
/// with POLICY_VIOLATION.
const MAX_RECORDS_PER_USER_OP: i64 = 10_000;

/// The brokers registered in the metadata (this broker alone before the
/// quorum has started).
fn registered(b: &Broker) -> Vec<i32> {
    match b.image() {
        Some(img) => img.brokers.keys().copied().collect(),
        None => vec![b.node_id()],
    }
}

/// The replication factor a topic gets: -1 is the broker default; others
/// must be positive and at most the brokers available (Kafka's messages).
fn check_replication(b: &Broker, rf: i16) -> Result<i16, AdminError> {
    let rf = if rf == -1 {
        b.default_replication_factor()
    } else {
        rf
    };
    if rf < 1 {
        return Err(AdminError::new(
            ResponseError::InvalidReplicationFactor,
            "Replication factor must be larger than 0, or -1 to use the default value.",
        ));
    }
    let brokers = match b.image() {
        Some(img) => img.active().count(),
        None => 1,
    };
    if rf as usize > brokers {
        return Err(AdminError::new(
            ResponseError::InvalidReplicationFactor,
            format!("Unable to replicate the partition {rf} time(s): The target replication factor of {rf} cannot be reached because only {brokers} broker(s) are registered."),
        ));
    }
    Ok(rf)
}

/// A manual assignment's replica list: distinct registered brokers.
fn check_assignment(b: &Broker, ids: &[BrokerId]) -> Result<Vec<i32>, AdminError> {
    let bad = |m: String| AdminError::new(ResponseError::InvalidReplicaAssignment, m);
    if ids.is_empty() {
        return Err(bad(
            "The manual partition assignment includes an empty replica list.".into(),
        ));
    }
    let known = registered(b);
    let mut out: Vec<i32> = Vec::with_capacity(ids.len());
    for id in ids {
        if out.contains(&id.0) {
            return Err(bad(format!(
                "The manual partition assignment includes the broker {} more than once.",
                id.0
            )));
        }
        if !known.contains(&id.0) {
            return Err(bad(format!(
                "The manual partition assignment includes broker {}, but no such broker is registered.",
                id.0
            )));
        }
        out.push(id.0);
    }
    Ok(out)
}

pub async fn create_topics(
    ctx: &Ctx,
    req: CreateTopicsRequest,
) -> Result<Option<Bytes>, RequestError> {
    let v = ctx.version;
    let b = &ctx.broker;
    let mut r = CreateTopicsResponse::default();
    // Kafka's controller gives up on a request whose deadline (now +
    // timeout_ms) has passed before it runs: a timeout of 0 or less answers
    // REQUEST_TIMED_OUT for every topic named, and creates none.
    if let Some((e, message)) = controller_deadline_passed(req.timeout_ms) {
        for t in &req.topics {
            r.topics.push(create_topic_error(
                t.name.clone(),
                AdminError::new(e, message),
            ));
        }
        return ctx.respond(&r);
    }
    // As Kafka's ControllerApis: a name given more than once is answered
    // once, after the others, with INVALID_REQUEST; `__cluster_metadata`
    // after that.
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for t in &req.topics {
        *counts.entry(t.name.0.to_string()).or_default() += 1;
    }
    let mut dups: Vec<TopicName> = Vec::new();
    let mut dup_seen: HashSet<&str> = HashSet::new();
    let mut refused: Vec<CreatableTopicResult> = Vec::new();
    for t in &req.topics {
        let name = t.name.0.as_str();
        if counts.get(name).copied().unwrap_or(0) > 1 {
            if dup_seen.insert(name) {
                dups.push(t.name.clone());
            }
        } else if name == CLUSTER_METADATA_TOPIC {
            refused.push(create_topic_error(
                t.name.clone(),
                AdminError::new(
                    ResponseError::InvalidRequest,
                    format!("Creation of internal topic {CLUSTER_METADATA_TOPIC} is prohibited."),
                ),
            ));
        }
    }
    let dup_results: Vec<CreatableTopicResult> = dups
        .into_iter()
        .map(|n| {
            create_topic_error(
                n,
                AdminError::new(ResponseError::InvalidRequest, "Duplicate topic name."),
            )
        })
        .collect();
    // CREATE on the cluster or on the topic; the new topic's configs are
    // answered only with DESCRIBE_CONFIGS on it (Kafka's ControllerApis).
    let cluster_create = ctx.allowed_on_cluster(AclOperation::Create);
    for t in req.topics {
        let name = t.name.0.to_string();
        if counts.get(name.as_str()).copied().unwrap_or(0) > 1 || name == CLUSTER_METADATA_TOPIC {
            continue;
        }
        if !cluster_create && !ctx.allowed(AclOperation::Create, ResourceType::Topic, &name) {
            r.topics.push(create_topic_error(
                t.name,
                AdminError::new(
                    ResponseError::TopicAuthorizationFailed,
                    "Authorization failed.",
                ),
            ));
            continue;
        }
        let describe_configs =
            ctx.allowed(AclOperation::DescribeConfigs, ResourceType::Topic, &name);
        let mut res = CreatableTopicResult::default();
        res.name = t.name.clone();
        res.error_message = None;
        let outcome: Result<Option<TopicConfig>, AdminError> = async {
            let mut partitions = t.num_partitions;
            let rf: i16;
            let mut assigned: Vec<Vec<i32>> = Vec::new();
            if !t.assignments.is_empty() {
                if t.num_partitions != -1 || t.replication_factor != -1 {
                    return Err(AdminError::new(ResponseError::InvalidRequest, "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time."));
                }
                let mut idx: Vec<i32> = t.assignments.iter().map(|a| a.partition_index).collect();
                idx.sort_unstable();
                if idx.iter().enumerate().any(|(i, p)| *p != i as i32) {
                    return Err(AdminError::new(ResponseError::InvalidReplicaAssignment, "partitions must be numbered 0..n without gaps"));
                }
                let mut by_index: Vec<&_> = t.assignments.iter().collect();
                by_index.sort_by_key(|a| a.partition_index);
                for a in by_index {
                    assigned.push(check_assignment(b, &a.broker_ids)?);
                }
                partitions = t.assignments.len() as i32;
                rf = assigned.first().map_or(1, |a| a.len() as i16);
                if assigned.iter().any(|a| a.len() as i16 != rf) {
                    return Err(AdminError::new(ResponseError::InvalidReplicaAssignment, "All partitions in the manual partition assignment must have the same number of replicas."));
                }
            } else {
                rf = check_replication(b, t.replication_factor)?;
                if partitions == 0 || partitions < -1 {
                    return Err(AdminError::new(ResponseError::InvalidPartitions, "Number of partitions must be larger than 0."));
                }
            }
            let mut overrides = BTreeMap::new();
            for c in &t.configs {
                let key = c.name.to_string();
                let value = c.value.as_ref().map(|v| v.to_string());
                validate_topic_config(&key, value.as_deref())?;
                if let Some(v) = value {
                    overrides.insert(key, v);
                }
            }
            let created = b.create_topic_assigned(&name, partitions, rf, assigned, overrides.clone(), req.validate_only).await?;
            let config = match created {
                Some(topic) => {
                    res.topic_id = topic.id;
                    topic.config()
                }
                // validate_only: Kafka's controller answers the id it would
                // have given the topic, a fresh random one.
                None => {
                    res.topic_id = uuid::Uuid::new_v4();
                    b.topic_config(overrides)?
                }
            };
            res.num_partitions = if partitions == -1 { b.config().default_partitions } else { partitions };
            res.replication_factor = rf;
            Ok(Some(config))
        }
        .await;
        match outcome {
            Ok(config) => {
                if v < 7 {
                    res.topic_id = uuid::Uuid::nil();
                }
                if v >= 5 {
                    res.configs = config.map(|c| {
                        c.describe(None)
                            .into_iter()
                            .map(|d| {
                                let mut e = CreatableTopicConfigs::default();
                                e.name = s(d.name);
                                e.value = Some(s(d.value));
                                e.config_source = d.source as i8;
                                e
                            })
                            .collect()
                    });
                } else {
                    res.num_partitions = -1;
                    res.replication_factor = -1;
                }
                if !describe_configs {
                    res.num_partitions = -1;
                    res.replication_factor = -1;
                    res.topic_config_error_code = code(ResponseError::TopicAuthorizationFailed);
                    res.configs = Some(Vec::new());
                }
                if !req.validate_only {
                    tracing::debug!(topic = %name, "CreateTopics ok");
                }
                r.topics.push(res);
            }
            Err(e) => {
                tracing::info!(topic = %name, code = e.code, message = %e.message, "CreateTopics refused");
                r.topics.push(create_topic_error(t.name, e));
            }
        }
    }
    r.topics.extend(dup_results);
    r.topics.extend(refused);
    ctx.respond(&r)
}

/// A refused topic as Kafka answers it: the error, no id, -1 partitions and
/// replication factor, no configs (an empty list, the field's default) and
/// topic_config_error_code 0 (that code is only for a topic created whose
/// configs could not be described).
fn create_topic_error(name: TopicName, e: AdminError) -> CreatableTopicResult {
    let mut res = CreatableTopicResult::default();
    res.name = name;
    res.error_code = e.code;
    res.error_message = Some(s(e.message));
    res.topic_id = uuid::Uuid::nil();
    res.num_partitions = -1;
    res.replication_factor = -1;
    res.configs = Some(Vec::new());
    res
}

pub async fn delete_topics(
    ctx: &Ctx,
    req: DeleteTopicsRequest,
) -> Result<Option<Bytes>, RequestError> {
    let v = ctx.version;
    let b = &ctx.broker;
    // v6 names topics by name or id; before that by name only.
    let targets: Vec<(Option<String>, uuid::Uuid)> = if v >= 6 {
        req.topics
            .iter()
            .map(|t| (t.name.as_ref().map(|n| n.0.to_string()), t.topic_id))
            .collect()
    } else {
        req.topic_names
            .iter()
            .map(|n| (Some(n.0.to_string()), uuid::Uuid::nil()))
            .collect()
    };
    let mut r = DeleteTopicsResponse::default();
    let result = |name: Option<String>, id: uuid::Uuid, e: Option<AdminError>| {
        let mut res = DeletableTopicResult::default();
        res.name = name.map(|n| TopicName(s(n)));
        if res.name.is_none() && v < 6 {
            res.name = Some(TopicName::default());
        }
        if v >= 6 {
            res.topic_id = id;
        }
        if let Some(e) = e {
            res.error_code = e.code;
            if v >= 5 {
                res.error_message = Some(s(e.message));
            }
        }
        res
    };
    // A deadline already past (timeout_ms of 0 or less): Kafka's controller
    // gives up before deleting anything.
    if let Some((e, message)) = controller_deadline_passed(req.timeout_ms) {
        for (name, id) in targets {
            r.responses
                .push(result(name, id, Some(AdminError::new(e, message))));
        }
        return ctx.respond(&r);
    }
    // As Kafka's ControllerApis.deleteTopics: a name (or id) given more than
    // once is answered once, INVALID_REQUEST; so is an entry with both a name
    // and an id, or neither.
    let mut name_counts: BTreeMap<&str, usize> = BTreeMap::new();
    let mut id_counts: BTreeMap<uuid::Uuid, usize> = BTreeMap::new();
    for (name, id) in &targets {
        match name {
            Some(n) if id.is_nil() => *name_counts.entry(n.as_str()).or_default() += 1,
            None if !id.is_nil() => *id_counts.entry(*id).or_default() += 1,
            _ => {}
        }
    }
    let invalid = |m: &str| Some(AdminError::new(ResponseError::InvalidRequest, m));
    let cluster_delete = ctx.allowed_on_cluster(AclOperation::Delete);
    let describable =
        |n: &str| cluster_delete || ctx.allowed(AclOperation::Describe, ResourceType::Topic, n);
    let deletable =
        |n: &str| cluster_delete || ctx.allowed(AclOperation::Delete, ResourceType::Topic, n);
    let denied = || {
        AdminError::new(
            ResponseError::TopicAuthorizationFailed,
            TOPIC_AUTHORIZATION_FAILED,
        )
    };
    let mut answered_dups: HashSet<(Option<String>, uuid::Uuid)> = HashSet::new();
    for (name, id) in targets.iter().cloned() {
        let outcome = match (&name, id.is_nil()) {
            (None, true) => {
                r.responses.push(result(
                    None,
                    id,
                    invalid("Neither topic name nor id were specified."),
                ));
                continue;
            }
            (Some(_), false) => {
                r.responses.push(result(
                    name,
                    id,
                    invalid("You may not specify both topic name and topic id."),
                ));
                continue;
            }
            (Some(n), true) if name_counts.get(n.as_str()).copied().unwrap_or(0) > 1 => {
                if answered_dups.insert((name.clone(), id)) {
                    r.responses
                        .push(result(name, id, invalid("Duplicate topic name.")));
                }
                continue;
            }
            (None, false) if id_counts.get(&id).copied().unwrap_or(0) > 1 => {
                if answered_dups.insert((None, id)) {
                    r.responses
                        .push(result(None, id, invalid("Duplicate topic id.")));
                }
                continue;
            }
            // As Kafka's ControllerApis: DELETE on the cluster stands in
            // for DESCRIBE and DELETE on every topic; a topic the client
            // may not describe is refused before its existence is told.
            (Some(n), true) if !describable(n) => Err(denied()),
            (Some(n), true) if b.topic(n).is_some() && !deletable(n) => Err(denied()),
            (Some(n), true) => b.delete_topic(n).await.map(|t| (n.clone(), t.id)),
            (None, false) => match b.topic_by_id(id).map(|t| t.name.clone()) {
                Some(n) if !deletable(&n) => {
                    let shown = describable(&n).then_some(n);
                    r.responses.push(result(shown, id, Some(denied())));
                    continue;
                }
                Some(n) => b.delete_topic(&n).await.map(|t| (n, t.id)),
                None => Err(AdminError::new(
                    ResponseError::UnknownTopicId,
                    format!("unknown topic id {id}"),
                )),
            },
        };
        match outcome {
            Ok((n, tid)) => r.responses.push(result(Some(n), tid, None)),
            Err(e) => r.responses.push(result(name, id, Some(e))),
        }
    }
    ctx.respond(&r)
}

pub async fn create_partitions(
    ctx: &Ctx,
    req: CreatePartitionsRequest,
) -> Result<Option<Bytes>, RequestError> {
    let b = &ctx.broker;
    let mut r = CreatePartitionsResponse::default();
    let refuse_all = |r: &mut CreatePartitionsResponse, e: ResponseError, m: &str| {
        for t in &req.topics {
            let mut res = CreatePartitionsTopicResult::default();
            res.name = t.name.clone();
            res.error_code = code(e);
            res.error_message = Some(s(m));
            r.results.push(res);
        }
    };
    // A deadline already past: Kafka's controller gives up first.
    if let Some((e, message)) = controller_deadline_passed(req.timeout_ms) {
        refuse_all(&mut r, e, message);
        return ctx.respond(&r);
    }
    // Kafka's controller writes one record per new partition and refuses
    // an operation of more than MAX_RECORDS_PER_USER_OP records whole.
    let added: i64 = req
        .topics
        .iter()
        .map(|t| {
            let current = b
                .topic(t.name.0.as_str())
                .map_or(0, |x| x.partition_count());
            (i64::from(t.count) - i64::from(current)).max(0)
        })
        .sum();
    if added > MAX_RECORDS_PER_USER_OP {
        refuse_all(
            &mut r,
            ResponseError::PolicyViolation,
            "Unable to perform excessively large batch operation.",
        );
        return ctx.respond(&r);
    }
    // As Kafka's ControllerApis: each name given more than once is answered
    // first, once, with INVALID_REQUEST; then the others in order.
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for t in &req.topics {
        *counts.entry(t.name.0.as_str()).or_default() += 1;
    }
    let mut answered = HashSet::new();
    for t in &req.topics {
        let name = t.name.0.as_str();
        if counts.get(name).copied().unwrap_or(0) > 1 && answered.insert(name) {
            let mut res = CreatePartitionsTopicResult::default();
            res.name = t.name.clone();
            res.error_code = code(ResponseError::InvalidRequest);
            res.error_message = Some(s("Duplicate topic name."));
            r.results.push(res);
        }
    }
    for t in &req.topics {
        let name = t.name.0.to_string();
        if counts.get(name.as_str()).copied().unwrap_or(0) > 1 {
            continue;
        }
        let mut res = CreatePartitionsTopicResult::default();
        res.name = t.name.clone();
        if !ctx.allowed(AclOperation::Alter, ResourceType::Topic, &name) {
            res.error_code = code(ResponseError::TopicAuthorizationFailed);
            res.error_message = Some(s(TOPIC_AUTHORIZATION_FAILED));
            r.results.push(res);
            continue;
        }
        let outcome: Result<(), AdminError> = async {
            // A list, even empty, is a manual assignment of the new
            // partitions (null is none).
            // Kafka checks the topic and the count first.
            let additional = b
                .topic(&name)
                .map_or(0, |x| i64::from(t.count) - i64::from(x.partition_count()));
            let mut assigned: Vec<Vec<i32>> = Vec::new();
            if let Some(assignments) = t.assignments.as_ref().filter(|_| additional > 0) {
                if assignments.len() as i64 != additional {
                    return Err(AdminError::new(
                        ResponseError::InvalidReplicaAssignment,
                        format!("Attempted to add {additional} additional partition(s), but only {} assignment(s) were specified.", assignments.len()),
                    ));
                }
                for a in assignments {
                    assigned.push(check_assignment(b, &a.broker_ids)?);
                }
            }
            b.create_partitions(&name, t.count, assigned, req.validate_only).await
        }
        .await;
        if let Err(e) = outcome {
            tracing::info!(topic = %name, code = e.code, message = %e.message, "CreatePartitions refused");
            res.error_code = e.code;
            res.error_message = Some(s(e.message));
        }
        r.results.push(res);
    }
    ctx.respond(&r)
}
