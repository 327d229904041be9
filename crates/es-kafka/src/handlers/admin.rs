//! Admin APIs: CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords,
//! ElectLeaders, DescribeConfigs, AlterConfigs, IncrementalAlterConfigs, DescribeCluster,
//! DescribeLogDirs, DescribeTopicPartitions.
//!
//! State changes go through [`crate::broker::Broker`], which serialises them
//! and persists `topic.json` atomically; this module maps requests and
//! results to Kafka's shapes and error codes. Replication: es is one node,
//! so a replication factor of -1 (broker default) or 1 is accepted and
//! anything else is INVALID_REPLICATION_FACTOR; a manual assignment must put
//! every partition on this node alone. Broker configs come from command-line
//! flags, except the dynamic ones (the broker-level names of topic configs,
//! `log.flush.interval.messages`, `log.retention.ms`, ...), which AlterConfigs
//! and IncrementalAlterConfigs change on BROKER `"<node id>"` and on the
//! cluster default ""; see [`crate::config`] for how topics inherit them.
//!
//! Internal topics, as Kafka 4.4 treats them (checked against it): only
//! `__cluster_metadata` is closed to CreateTopics, so a client may create
//! `__consumer_offsets` before the broker does (with the settings it asks
//! for) and gets TOPIC_ALREADY_EXISTS once it exists; DeleteTopics deletes
//! it (on Kafka that loses every committed offset; es keeps offsets in the
//! group coordinator's files, so nothing is lost, and the next group
//! coordinator lookup creates it again, with a new id); CreatePartitions and
//! DescribeConfigs work on it as on any topic; DeleteRecords refuses it with
//! INVALID_TOPIC_EXCEPTION.

use std::collections::{BTreeMap, HashSet};

use bytes::Bytes;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::describe_topic_partitions_response::{
    self as dtp, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{
    alter_configs_response, delete_records_response, elect_leaders_response,
    incremental_alter_configs_response, AlterConfigsRequest, AlterConfigsResponse, BrokerId,
    CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse,
    DeleteRecordsRequest, DeleteRecordsResponse, DeleteTopicsRequest, DeleteTopicsResponse,
    DescribeClusterRequest, DescribeClusterResponse, DescribeConfigsRequest,
    DescribeConfigsResponse, DescribeLogDirsRequest, DescribeLogDirsResponse,
    DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, ElectLeadersRequest,
    ElectLeadersResponse, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::metadata::LEADER_EPOCH;
use super::{
    blocking, Ctx, RequestError, AUTHORIZED_OPERATIONS_OMITTED, CLUSTER_OPERATIONS_ALL,
    TOPIC_OPERATIONS_ALL,
};
use crate::broker::AdminError;
use crate::config::{
    broker_dynamic_def, topic_config_def, validate_broker_config, validate_topic_config,
    ConfigError, ConfigType, TopicConfig, TopicConfigDef,
};
use crate::errors::{code, ResponseError, NONE};
use crate::topics::is_internal;

/// KRaft's metadata log: the one topic name CreateTopics refuses.
const CLUSTER_METADATA_TOPIC: &str = "__cluster_metadata";

/// Kafka's ConfigResource.Type codes.
pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;
pub const RESOURCE_BROKER_LOGGER: i8 = 8;

/// IncrementalAlterConfigs operations.
pub const OP_SET: i8 = 0;
pub const OP_DELETE: i8 = 1;
pub const OP_APPEND: i8 = 2;
pub const OP_SUBTRACT: i8 = 3;

/// Default `response_partition_limit` of DescribeTopicPartitions (Kafka's).
pub const DESCRIBE_PARTITIONS_LIMIT_DEFAULT: i32 = 2000;

fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

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

/// One config entry on its way into a DescribeConfigs response.
struct Entry<'a> {
    name: &'a str,
    value: String,
    source: i8,
    ty: ConfigType,
    read_only: bool,
    doc: &'a str,
    synonyms: Vec<(String, String, i8)>,
}

fn config_result(
    v: i16,
    c: Entry<'_>,
    include_synonyms: bool,
    include_doc: bool,
) -> DescribeConfigsResourceResult {
    let mut e = DescribeConfigsResourceResult::default();
    e.name = s(c.name);
    e.value = Some(s(c.value));
    e.read_only = c.read_only;
    e.config_source = c.source;
    e.is_sensitive = false;
    if include_synonyms {
        e.synonyms = c
            .synonyms
            .into_iter()
            .map(|(n, v, src)| {
                let mut y = DescribeConfigsSynonym::default();
                y.name = s(n);
                y.value = Some(s(v));
                y.source = src;
                y
            })
            .collect();
    }
    if v >= 3 {
        e.config_type = c.ty as i8;
        e.documentation = if include_doc { Some(s(c.doc)) } else { None };
    }
    e
}

pub fn describe_configs(
    ctx: &Ctx,
    req: DescribeConfigsRequest,
) -> Result<Option<Bytes>, RequestError> {
    let v = ctx.version;
    let b = &ctx.broker;
    let include_doc = v >= 3 && req.include_documentation;
    let mut r = DescribeConfigsResponse::default();
    for res in req.resources {
        let mut out = DescribeConfigsResult::default();
        out.resource_type = res.resource_type;
        out.resource_name = res.resource_name.clone();
        out.error_message = None;
        // Null asks for every config; so does an empty list (what the
        // crate's default and some clients send).
        let keys: Option<Vec<String>> = res
            .configuration_keys
            .as_ref()
            .filter(|ks| !ks.is_empty())
            .map(|ks| ks.iter().map(|k| k.to_string()).collect());
        let name = res.resource_name.to_string();
        match res.resource_type {
            RESOURCE_TOPIC => match b.topic(&name) {
                Some(t) => {
                    out.configs = t
                        .config()
                        .describe(keys.as_deref())
                        .into_iter()
                        .map(|d| {
                            let syn = d
                                .synonyms
                                .into_iter()
                                .map(|(n, v, src)| (n, v, src as i8))
                                .collect();
                            config_result(
                                v,
                                Entry {
                                    name: d.name,
                                    value: d.value,
                                    source: d.source as i8,
                                    ty: d.ty,
                                    read_only: false,
                                    doc: d.doc,
                                    synonyms: syn,
                                },
                                req.include_synonyms,
                                include_doc,
                            )
                        })
                        .collect();
                }
                None => {
                    out.error_code = code(ResponseError::UnknownTopicOrPartition);
                    out.error_message = Some(s(format!("Topic '{name}' does not exist.")));
                }
            },
            RESOURCE_BROKER => match broker_scope(b.node_id(), &name, true) {
                Ok(scope) => {
                    let settings = b.settings();
                    let entries = match scope {
                        BrokerScope::ThisBroker => settings.describe(),
                        BrokerScope::ClusterDefault => settings.describe_cluster_default(),
                    };
                    out.configs = entries
                        .into_iter()
                        .filter(|e| {
                            keys.as_ref()
                                .is_none_or(|ks| ks.iter().any(|k| k == e.name))
                        })
                        .map(|e| {
                            let syn = e
                                .synonyms
                                .into_iter()
                                .map(|(n, v, src)| (n, v, src as i8))
                                .collect();
                            config_result(
                                v,
                                Entry {
                                    name: e.name,
                                    value: e.value,
                                    source: e.source as i8,
                                    ty: e.ty,
                                    read_only: e.read_only,
                                    doc: "",
                                    synonyms: syn,
                                },
                                req.include_synonyms,
                                include_doc,
                            )
                        })
                        .collect();
                }
                Err(e) => {
                    out.error_code = e.code;
                    out.error_message = Some(s(e.message));
                }
            },
            RESOURCE_BROKER_LOGGER => {
                // Loggers are set by --log-level; report none.
                out.configs = Vec::new();
            }
            other => {
                out.error_code = code(ResponseError::InvalidRequest);
                out.error_message = Some(s(format!("unsupported resource type {other}")));
            }
        }
        r.results.push(out);
    }
    ctx.respond(&r)
}

/// Resource-level check shared by both alter APIs for everything but a
/// BROKER resource (see [`alter_broker`]): topics exist, loggers are
/// read-only.
fn alter_target(ctx: &Ctx, resource_type: i8, name: &str) -> Result<(), AdminError> {
    match resource_type {
        RESOURCE_TOPIC => ctx.broker.topic(name).map(|_| ()).ok_or_else(|| {
            AdminError::new(
                ResponseError::UnknownTopicOrPartition,
                format!("Topic '{name}' does not exist."),
            )
        }),
        RESOURCE_BROKER_LOGGER => Err(AdminError::new(
            ResponseError::InvalidRequest,
            "es log levels come from --log-level and cannot be altered at run time",
        )),
        other => Err(AdminError::new(
            ResponseError::InvalidRequest,
            format!("unsupported resource type {other}"),
        )),
    }
}

pub async fn alter_configs(
    ctx: &Ctx,
    req: AlterConfigsRequest,
) -> Result<Option<Bytes>, RequestError> {
    let mut r = AlterConfigsResponse::default();
    for res in req.resources {
        let name = res.resource_name.to_string();
        let outcome: Result<(), AdminError> = async {
            if res.resource_type == RESOURCE_BROKER {
                let ops: Vec<BrokerOp> = res
                    .configs
                    .iter()
                    .map(|c| BrokerOp {
                        name: c.name.to_string(),
                        op: OP_SET,
                        value: c.value.as_ref().map(|v| v.to_string()),
                    })
                    .collect();
                return alter_broker(ctx, &name, &ops, true, req.validate_only).await;
            }
            alter_target(ctx, res.resource_type, &name)?;
            // The legacy API replaces the whole set of overrides.
            let mut overrides = BTreeMap::new();
            for c in &res.configs {
                let key = c.name.to_string();
                let value = c.value.as_ref().map(|v| v.to_string());
                validate_topic_config(&key, value.as_deref())?;
                if let Some(v) = value {
                    overrides.insert(key, v);
                }
            }
            ctx.broker
                .set_topic_config(&name, overrides, req.validate_only)
                .await
        }
        .await;
        let mut out = alter_configs_response::AlterConfigsResourceResponse::default();
        out.resource_type = res.resource_type;
        out.resource_name = res.resource_name;
        out.error_message = None;
        if let Err(e) = outcome {
            tracing::info!(resource = %name, code = e.code, message = %e.message, "AlterConfigs refused");
            out.error_code = e.code;
            out.error_message = Some(s(e.message));
        }
        r.responses.push(out);
    }
    ctx.respond(&r)
}

/// Applies one incremental operation to a set of topic config overrides.
pub fn apply_incremental(
    overrides: &mut BTreeMap<String, String>,
    name: &str,
    op: i8,
    value: Option<&str>,
) -> Result<(), AdminError> {
    let d = topic_config_def(name).ok_or_else(|| {
        AdminError::new(
            ResponseError::InvalidConfig,
            format!("unknown topic config name: {name}"),
        )
    })?;
    apply_op(overrides, d, name, op, value, |v| {
        validate_topic_config(name, v)
    })
}

/// Applies one incremental operation on config `name` (defined by `d`) to
/// `map`, checking every value it stores with `validate`.
fn apply_op(
    map: &mut BTreeMap<String, String>,
    d: &TopicConfigDef,
    name: &str,
    op: i8,
    value: Option<&str>,
    validate: impl Fn(Option<&str>) -> Result<(), ConfigError>,
) -> Result<(), AdminError> {
    let is_list = d.ty == ConfigType::List;
    let current = || {
        map.get(name)
            .cloned()
            .unwrap_or_else(|| d.default.to_string())
    };
    match op {
        OP_SET => {
            validate(value)?;
            map.insert(
                name.to_string(),
                value.unwrap_or_default().trim().to_string(),
            );
        }
        OP_DELETE => {
            map.remove(name);
        }
        OP_APPEND | OP_SUBTRACT if is_list => {
            let cur = current();
            let mut items: Vec<String> = cur
                .split(',')
                .map(str::trim)
                .filter(|x| !x.is_empty())
                .map(String::from)
                .collect();
            let given: Vec<String> = value
                .unwrap_or_default()
                .split(',')
                .map(str::trim)
                .filter(|x| !x.is_empty())
                .map(String::from)
                .collect();
            if op == OP_APPEND {
                for g in given {
                    if !items.contains(&g) {
                        items.push(g);
                    }
                }
            } else {
                items.retain(|i| !given.contains(i));
            }
            let joined = items.join(",");
            validate(Some(&joined))?;
            map.insert(name.to_string(), joined);
        }
        OP_APPEND | OP_SUBTRACT => {
            return Err(AdminError::new(
                ResponseError::InvalidConfig,
                format!(
                "Config value append/subtract is not allowed for config key {name} of type {:?}",
                d.ty
            ),
            ))
        }
        other => {
            return Err(AdminError::new(
                ResponseError::InvalidRequest,
                format!("unknown config operation {other}"),
            ))
        }
    }
    Ok(())
}

/// Which dynamic configs a BROKER resource name addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BrokerScope {
    /// "<node id>": this broker's own (Kafka's DYNAMIC_BROKER_CONFIG).
    ThisBroker,
    /// "": the cluster-wide default (DYNAMIC_DEFAULT_BROKER_CONFIG).
    ClusterDefault,
}

/// Resolves a BROKER resource name as Kafka does, with its messages (which
/// differ between DescribeConfigs and the alter APIs).
fn broker_scope(node: i32, name: &str, describe: bool) -> Result<BrokerScope, AdminError> {
    if name.is_empty() {
        return Ok(BrokerScope::ClusterDefault);
    }
    let bad = |m: String| AdminError::new(ResponseError::InvalidRequest, m);
    let Ok(id) = name.parse::<i32>() else {
        return Err(bad(if describe {
            format!("Broker id must be an integer, but it is: {name}")
        } else {
            format!("Node id must be an integer, but it is: {name}")
        }));
    };
    if id != node {
        return Err(bad(if describe {
            format!("Unexpected broker id, expected {node} or empty string, but received {name}")
        } else {
            format!("Unexpected broker id, expected {node}, but received {name}")
        }));
    }
    Ok(BrokerScope::ThisBroker)
}

/// One requested change to a broker config (legacy AlterConfigs is a SET of
/// every config named, replacing the rest).
struct BrokerOp {
    name: String,
    op: i8,
    value: Option<String>,
}

/// AlterConfigs / IncrementalAlterConfigs on a BROKER resource. The dynamic
/// configs are the broker-level names of the topic configs; anything else
/// is refused as Kafka refuses a read-only broker config. Errors are
/// INVALID_REQUEST, as Kafka reports broker config validation (KAFKA-13609).
async fn alter_broker(
    ctx: &Ctx,
    name: &str,
    ops: &[BrokerOp],
    replace: bool,
    validate_only: bool,
) -> Result<(), AdminError> {
    let invalid = |m: String| AdminError::new(ResponseError::InvalidRequest, m);
    let mut seen = HashSet::new();
    if ops.iter().any(|o| !seen.insert(o.name.as_str())) {
        return Err(invalid("Error due to duplicate config keys".into()));
    }
    let nulls: Vec<&str> = ops
        .iter()
        .filter(|o| o.op != OP_DELETE && o.value.is_none())
        .map(|o| o.name.as_str())
        .collect();
    if !nulls.is_empty() {
        return Err(invalid(format!(
            "Null value not supported for : {}",
            nulls.join(", ")
        )));
    }
    let scope = broker_scope(ctx.broker.node_id(), name, false)?;
    let fixed: Vec<&str> = ops
        .iter()
        .filter(|o| broker_dynamic_def(&o.name).is_none())
        .map(|o| o.name.as_str())
        .collect();
    if !fixed.is_empty() {
        return Err(invalid(format!(
            "Cannot update these configs dynamically: [{}]",
            fixed.join(", ")
        )));
    }
    let as_invalid_request = |e: AdminError| AdminError {
        code: code(ResponseError::InvalidRequest),
        ..e
    };
    ctx.broker
        .update_dynamic_configs(validate_only, |all| {
            let map = match scope {
                BrokerScope::ThisBroker => &mut all.broker,
                BrokerScope::ClusterDefault => &mut all.cluster_default,
            };
            if replace {
                map.clear();
            }
            for o in ops {
                let Some(d) = broker_dynamic_def(&o.name) else {
                    continue;
                };
                apply_op(map, d, &o.name, o.op, o.value.as_deref(), |v| {
                    validate_broker_config(&o.name, v)
                })
                .map_err(as_invalid_request)?;
            }
            Ok(())
        })
        .await
}

pub async fn incremental_alter_configs(
    ctx: &Ctx,
    req: IncrementalAlterConfigsRequest,
) -> Result<Option<Bytes>, RequestError> {
    let mut r = IncrementalAlterConfigsResponse::default();
    for res in req.resources {
        let name = res.resource_name.to_string();
        let outcome: Result<(), AdminError> = async {
            if res.resource_type == RESOURCE_BROKER {
                let ops: Vec<BrokerOp> = res
                    .configs
                    .iter()
                    .map(|c| BrokerOp {
                        name: c.name.to_string(),
                        op: c.config_operation,
                        value: c.value.as_ref().map(|v| v.to_string()),
                    })
                    .collect();
                return alter_broker(ctx, &name, &ops, false, req.validate_only).await;
            }
            alter_target(ctx, res.resource_type, &name)?;
            let topic = ctx.broker.topic(&name).ok_or_else(|| {
                AdminError::new(
                    ResponseError::UnknownTopicOrPartition,
                    format!("Topic '{name}' does not exist."),
                )
            })?;
            let mut overrides = topic.config().overrides().clone();
            let mut seen = HashSet::new();
            for c in &res.configs {
                let key = c.name.to_string();
                if !seen.insert(key.clone()) {
                    return Err(AdminError::new(
                        ResponseError::InvalidRequest,
                        format!("Error due to duplicate config keys: {key}"),
                    ));
                }
                apply_incremental(
                    &mut overrides,
                    &key,
                    c.config_operation,
                    c.value.as_ref().map(|v| v.as_str()),
                )?;
            }
            ctx.broker
                .set_topic_config(&name, overrides, req.validate_only)
                .await
        }
        .await;
        let mut out = incremental_alter_configs_response::AlterConfigsResourceResponse::default();
        out.resource_type = res.resource_type;
        out.resource_name = res.resource_name;
        out.error_message = None;
        if let Err(e) = outcome {
            tracing::info!(resource = %name, code = e.code, message = %e.message, "IncrementalAlterConfigs refused");
            out.error_code = e.code;
            out.error_message = Some(s(e.message));
        }
        r.responses.push(out);
    }
    ctx.respond(&r)
}

pub fn describe_cluster(
    ctx: &Ctx,
    req: DescribeClusterRequest,
) -> Result<Option<Bytes>, RequestError> {
    let v = ctx.version;
    let b = &ctx.broker;
    let mut r = DescribeClusterResponse::default();
    // Endpoint type 1 = brokers, 2 = controllers; this node is both.
    if v >= 1 {
        r.endpoint_type = req.endpoint_type;
    }
    r.cluster_id = s(b.cluster_id());
    r.controller_id = BrokerId(b.node_id());
    let mut node = DescribeClusterBroker::default();
    node.broker_id = BrokerId(b.node_id());
    node.host = s(b.config().advertised_host.clone());
    node.port = b.config().advertised_port;
    r.brokers = vec![node];
    r.cluster_authorized_operations = if req.include_cluster_authorized_operations {
        CLUSTER_OPERATIONS_ALL
    } else {
        AUTHORIZED_OPERATIONS_OMITTED
    };
    ctx.respond(&r)
}

pub async fn describe_log_dirs(
    ctx: &Ctx,
    req: DescribeLogDirsRequest,
) -> Result<Option<Bytes>, RequestError> {
    let b = ctx.broker.clone();
    let wanted: Option<Vec<(String, Vec<i32>)>> = req.topics.map(|ts| {
        ts.into_iter()
            .map(|t| (t.topic.0.to_string(), t.partitions))
            .collect()
    });
    let topics = blocking(move || {
        let mut out = Vec::new();
        let list: Vec<(String, Option<Vec<i32>>)> = match wanted {
            None => b.topics().iter().map(|t| (t.name.clone(), None)).collect(),
            Some(w) => w.into_iter().map(|(n, p)| (n, Some(p))).collect(),
        };
        for (name, parts) in list {
            let Some(t) = b.topic(&name) else { continue };
            let mut dt = DescribeLogDirsTopic::default();
            dt.name = TopicName(s(name));
            for p in t.partitions() {
                if parts.as_ref().is_some_and(|ps| !ps.contains(&p.index)) {
                    continue;
                }
                let mut dp = DescribeLogDirsPartition::default();
                dp.partition_index = p.index;
                dp.partition_size = p.log.size_bytes() as i64;
                dp.offset_lag = 0;
                dt.partitions.push(dp);
            }
            out.push(dt);
        }
        out
    })
    .await?;
    let mut dir = DescribeLogDirsResult::default();
    let path = std::fs::canonicalize(ctx.broker.data_dir())
        .unwrap_or_else(|_| ctx.broker.data_dir().to_path_buf());
    dir.log_dir = s(path.display().to_string());
    dir.topics = topics;
    let mut r = DescribeLogDirsResponse::default();
    r.results = vec![dir];
    if ctx.version >= 5 {
        ctx.respond(&super::past_crate::DescribeLogDirsV5(&r))
    } else {
        ctx.respond(&r)
    }
}

pub fn describe_topic_partitions(
    ctx: &Ctx,
    req: DescribeTopicPartitionsRequest,
) -> Result<Option<Bytes>, RequestError> {
    let b = &ctx.broker;
    let node = BrokerId(b.node_id());
    let limit = if req.response_partition_limit > 0 {
        req.response_partition_limit
    } else {
        DESCRIBE_PARTITIONS_LIMIT_DEFAULT
    } as usize;
    // Requested names (sorted, as Kafka answers), or every topic.
    let mut names: Vec<String> = if req.topics.is_empty() {
        b.topics().iter().map(|t| t.name.clone()).collect()
    } else {
        req.topics.iter().map(|t| t.name.0.to_string()).collect()
    };
    names.sort();
    names.dedup();
    let (cursor_topic, cursor_partition) = req.cursor.as_ref().map_or((None, 0), |c| {
        (Some(c.topic_name.0.to_string()), c.partition_index.max(0))
    });
    let mut r = DescribeTopicPartitionsResponse::default();
    let mut emitted = 0usize;
    for name in names {
        if let Some(ct) = &cursor_topic {
            if name < *ct {
                continue;
            }
        }
        let mut t = DescribeTopicPartitionsResponseTopic::default();
        t.name = Some(TopicName(s(name.clone())));
        let Some(topic) = b.topic(&name) else {
            t.error_code = code(ResponseError::UnknownTopicOrPartition);
            r.topics.push(t);
            continue;
        };
        t.topic_id = topic.id;
        t.is_internal = is_internal(&name);
        t.topic_authorized_operations = TOPIC_OPERATIONS_ALL;
        let start = if cursor_topic.as_deref() == Some(name.as_str()) {
            cursor_partition
        } else {
            0
        };
        for p in topic.partitions().into_iter().filter(|p| p.index >= start) {
            if emitted == limit {
                let mut c = dtp::Cursor::default();
                c.topic_name = TopicName(s(name.clone()));
                c.partition_index = p.index;
                r.next_cursor = Some(c);
                break;
            }
            let mut dp = DescribeTopicPartitionsResponsePartition::default();
            dp.error_code = NONE;
            dp.partition_index = p.index;
            dp.leader_id = node;
            dp.leader_epoch = LEADER_EPOCH;
            dp.replica_nodes = vec![node];
            dp.isr_nodes = vec![node];
            dp.eligible_leader_replicas = Some(Vec::new());
            dp.last_known_elr = Some(Vec::new());
            t.partitions.push(dp);
            emitted += 1;
        }
        r.topics.push(t);
        if r.next_cursor.is_some() {
            break;
        }
    }
    ctx.respond(&r)
}

/// DeleteRecords (v0-2): moves each partition's log start offset forward
/// (durably, in es-storage); offset -1 means "up to the high watermark".
/// Answers the new low watermark, or OFFSET_OUT_OF_RANGE past the high
/// watermark, as Kafka does. A topic whose `cleanup.policy` lacks `delete`
/// (compact only) answers POLICY_VIOLATION, as Kafka's
/// `Partition.deleteRecordsOnLeader` does; an internal topic's partitions
/// INVALID_TOPIC_EXCEPTION, as Kafka's `ReplicaManager` refuses them first.
pub async fn delete_records(
    ctx: &Ctx,
    req: DeleteRecordsRequest,
) -> Result<Option<Bytes>, RequestError> {
    let b = ctx.broker.clone();
    let topics = req.topics;
    let results = blocking(move || {
        let mut out = Vec::with_capacity(topics.len());
        for t in topics {
            let topic = b.topic(t.name.0.as_str());
            let mut tr = delete_records_response::DeleteRecordsTopicResult::default();
            tr.name = t.name;
            for p in t.partitions {
                let mut pr = delete_records_response::DeleteRecordsPartitionResult::default();
                pr.partition_index = p.partition_index;
                pr.low_watermark = -1;
                match topic.as_ref().and_then(|t| t.partition(p.partition_index)) {
                    None => pr.error_code = code(ResponseError::UnknownTopicOrPartition),
                    Some(_) if is_internal(tr.name.0.as_str()) => {
                        pr.error_code = code(ResponseError::InvalidTopicException);
                    }
                    Some(_) if topic.as_ref().is_some_and(|t| !t.config().cleanup_policy().delete) => {
                        pr.error_code = code(ResponseError::PolicyViolation);
                    }
                    Some(slot) => {
                        let target = if p.offset == -1 { Some(slot.log.high_watermark()) } else { u64::try_from(p.offset).ok() };
                        match target.map(|o| slot.log.delete_records_before(o)) {
                            None => pr.error_code = code(ResponseError::OffsetOutOfRange),
                            Some(Ok(low)) => pr.low_watermark = low as i64,
                            Some(Err(e)) => {
                                tracing::info!(topic = %tr.name.0, partition = p.partition_index, error = %e, "DeleteRecords refused");
                                pr.error_code = crate::errors::storage_error_code(&e);
                            }
                        }
                    }
                }
                tr.partitions.push(pr);
            }
            out.push(tr);
        }
        out
    })
    .await?;
    let mut r = DeleteRecordsResponse::default();
    r.topics = results;
    ctx.respond(&r)
}

/// ElectLeaders (v0-2): this node leads every partition and is every
/// partition's preferred (and only) replica, so no election is ever needed.
/// Named partitions answer ELECTION_NOT_NEEDED (or UNKNOWN_TOPIC_OR_PARTITION);
/// "all partitions" (null) lists every topic with no partitions, as Kafka
/// 4.4 lists only the partitions it actually elected.
pub fn elect_leaders(ctx: &Ctx, req: ElectLeadersRequest) -> Result<Option<Bytes>, RequestError> {
    let b = &ctx.broker;
    let mut r = ElectLeadersResponse::default();
    let Some(named) = req.topic_partitions else {
        for t in b.topics() {
            let mut res = elect_leaders_response::ReplicaElectionResult::default();
            res.topic = TopicName(s(t.name.clone()));
            r.replica_election_results.push(res);
        }
        return ctx.respond(&r);
    };
    for t in named {
        let topic = b.topic(t.topic.0.as_str());
        let mut res = elect_leaders_response::ReplicaElectionResult::default();
        res.topic = t.topic;
        for p in t.partitions {
            let mut pr = elect_leaders_response::PartitionResult::default();
            pr.partition_id = p;
            let (error, message) = match topic.as_ref().and_then(|t| t.partition(p)) {
                Some(_) => (
                    ResponseError::ElectionNotNeeded,
                    "Leader election not needed for topic partition.",
                ),
                None => (
                    ResponseError::UnknownTopicOrPartition,
                    "The partition does not exist.",
                ),
            };
            pr.error_code = code(error);
            pr.error_message = Some(s(message));
            res.partition_result.push(pr);
        }
        r.replica_election_results.push(res);
    }
    ctx.respond(&r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incremental_ops() {
        let mut o = BTreeMap::new();
        apply_incremental(&mut o, "retention.ms", OP_SET, Some("5")).expect("set");
        assert_eq!(o.get("retention.ms").map(String::as_str), Some("5"));
        apply_incremental(&mut o, "retention.ms", OP_DELETE, None).expect("delete");
        assert!(o.is_empty());
        apply_incremental(&mut o, "cleanup.policy", OP_APPEND, Some("compact")).expect("append");
        assert_eq!(
            o.get("cleanup.policy").map(String::as_str),
            Some("delete,compact")
        );
        apply_incremental(&mut o, "cleanup.policy", OP_SUBTRACT, Some("delete")).expect("subtract");
        assert_eq!(o.get("cleanup.policy").map(String::as_str), Some("compact"));
        assert!(apply_incremental(&mut o, "retention.ms", OP_APPEND, Some("1")).is_err());
        assert!(apply_incremental(&mut o, "nope", OP_SET, Some("1")).is_err());
        assert!(apply_incremental(&mut o, "retention.ms", OP_SET, Some("x")).is_err());
        assert!(apply_incremental(&mut o, "retention.ms", 9, Some("1")).is_err());
    }
}
