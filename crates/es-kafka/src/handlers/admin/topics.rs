//! CreateTopics, DeleteTopics and CreatePartitions: the APIs that add and
//! remove topics and partitions, with the single-node replication checks
//! (a replication factor of -1 or 1, every replica on this node) they share.

use std::collections::{BTreeMap, HashSet};

use bytes::Bytes;
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
use crate::broker::AdminError;
use crate::config::{validate_topic_config, TopicConfig};
use crate::errors::ResponseError;
use crate::handlers::{Ctx, RequestError};

/// KRaft's metadata log: the one topic name CreateTopics refuses.
const CLUSTER_METADATA_TOPIC: &str = "__cluster_metadata";

fn check_replication(rf: i16) -> Result<(), AdminError> {
    if rf == -1 || rf == 1 {
        Ok(())
    } else {
        Err(AdminError::new(ResponseError::InvalidReplicationFactor, format!("Unable to replicate the partition {rf} time(s): The target replication factor of {rf} cannot be reached because only 1 broker(s) are registered.")))
    }
}

fn check_assignment(node: i32, ids: &[BrokerId]) -> Result<(), AdminError> {
    if ids.len() == 1 && ids[0].0 == node {
        Ok(())
    } else {
        Err(AdminError::new(
            ResponseError::InvalidReplicaAssignment,
            format!("every partition must be assigned to broker {node} alone"),
        ))
    }
}

pub async fn create_topics(
    ctx: &Ctx,
    req: CreateTopicsRequest,
) -> Result<Option<Bytes>, RequestError> {
    let v = ctx.version;
    let b = &ctx.broker;
    let mut seen = HashSet::new();
    let dup: HashSet<String> = req
        .topics
        .iter()
        .filter(|t| !seen.insert(t.name.0.to_string()))
        .map(|t| t.name.0.to_string())
        .collect();
    let mut r = CreateTopicsResponse::default();
    for t in req.topics {
        let name = t.name.0.to_string();
        let mut res = CreatableTopicResult::default();
        res.name = t.name.clone();
        res.error_message = None;
        let outcome: Result<Option<TopicConfig>, AdminError> = async {
            if dup.contains(&name) {
                return Err(AdminError::new(ResponseError::InvalidRequest, format!("Create topics request from client contains a duplicate topic: {name}")));
            }
            if name == CLUSTER_METADATA_TOPIC {
                return Err(AdminError::new(ResponseError::InvalidRequest, format!("Creation of internal topic {CLUSTER_METADATA_TOPIC} is prohibited.")));
            }
            let mut partitions = t.num_partitions;
            if !t.assignments.is_empty() {
                if t.num_partitions != -1 || t.replication_factor != -1 {
                    return Err(AdminError::new(ResponseError::InvalidRequest, "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time."));
                }
                let mut idx: Vec<i32> = t.assignments.iter().map(|a| a.partition_index).collect();
                idx.sort_unstable();
                if idx.iter().enumerate().any(|(i, p)| *p != i as i32) {
                    return Err(AdminError::new(ResponseError::InvalidReplicaAssignment, "partitions must be numbered 0..n without gaps"));
                }
                for a in &t.assignments {
                    check_assignment(b.node_id(), &a.broker_ids)?;
                }
                partitions = t.assignments.len() as i32;
            } else {
                check_replication(t.replication_factor)?;
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
            let created = b.create_topic(&name, partitions, overrides.clone(), req.validate_only).await?;
            let config = match created {
                Some(topic) => {
                    res.topic_id = topic.id;
                    topic.config()
                }
                None => b.topic_config(overrides)?,
            };
            res.num_partitions = if partitions == -1 { b.config().default_partitions } else { partitions };
            Ok(Some(config))
        }
        .await;
        match outcome {
            Ok(config) => {
                if v < 7 {
                    res.topic_id = uuid::Uuid::nil();
                }
                if v >= 5 {
                    res.replication_factor = 1;
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
                }
                if !req.validate_only {
                    tracing::debug!(topic = %name, "CreateTopics ok");
                }
            }
            Err(e) => {
                tracing::info!(topic = %name, code = e.code, message = %e.message, "CreateTopics refused");
                res.error_code = e.code;
                res.error_message = Some(s(e.message));
                res.topic_id = uuid::Uuid::nil();
                res.num_partitions = -1;
                res.replication_factor = -1;
                res.configs = if v >= 5 { None } else { Some(Vec::new()) };
                if v >= 5 {
                    res.topic_config_error_code = e.code;
                }
            }
        }
        r.topics.push(res);
    }
    ctx.respond(&r)
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
    for (name, id) in targets {
        let mut res = DeletableTopicResult::default();
        let resolved = match (&name, id.is_nil()) {
            (Some(n), _) => Ok(n.clone()),
            (None, false) => b.topic_by_id(id).map(|t| t.name.clone()).ok_or_else(|| {
                AdminError::new(
                    ResponseError::UnknownTopicId,
                    format!("unknown topic id {id}"),
                )
            }),
            (None, true) => Err(AdminError::new(
                ResponseError::InvalidRequest,
                "neither a topic name nor an id",
            )),
        };
        let outcome = match resolved {
            Ok(n) => b.delete_topic(&n).await.map(|t| (n, t.id)),
            Err(e) => Err(e),
        };
        match outcome {
            Ok((n, tid)) => {
                res.name = Some(TopicName(s(n)));
                if v >= 6 {
                    res.topic_id = tid;
                }
            }
            Err(e) => {
                res.name = name.map(|n| TopicName(s(n)));
                if res.name.is_none() && v < 6 {
                    res.name = Some(TopicName::default());
                }
                if v >= 6 {
                    res.topic_id = id;
                }
                res.error_code = e.code;
                if v >= 5 {
                    res.error_message = Some(s(e.message));
                }
            }
        }
        r.responses.push(res);
    }
    ctx.respond(&r)
}

pub async fn create_partitions(
    ctx: &Ctx,
    req: CreatePartitionsRequest,
) -> Result<Option<Bytes>, RequestError> {
    let b = &ctx.broker;
    let mut r = CreatePartitionsResponse::default();
    let mut seen = HashSet::new();
    for t in req.topics {
        let name = t.name.0.to_string();
        let mut res = CreatePartitionsTopicResult::default();
        res.name = t.name.clone();
        let outcome: Result<(), AdminError> = async {
            if !seen.insert(name.clone()) {
                return Err(AdminError::new(
                    ResponseError::InvalidRequest,
                    format!("duplicate topic {name}"),
                ));
            }
            // An empty list is treated like null (no manual assignment).
            if let Some(assignments) = t.assignments.as_ref().filter(|a| !a.is_empty()) {
                let current = b.topic(&name).map_or(0, |t| t.partition_count());
                if assignments.len() as i64 != i64::from(t.count) - i64::from(current) {
                    return Err(AdminError::new(
                        ResponseError::InvalidReplicaAssignment,
                        "the assignment must list exactly the new partitions",
                    ));
                }
                for a in assignments {
                    check_assignment(b.node_id(), &a.broker_ids)?;
                }
            }
            b.create_partitions(&name, t.count, req.validate_only).await
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
