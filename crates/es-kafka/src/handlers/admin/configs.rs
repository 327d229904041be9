//! DescribeConfigs, AlterConfigs and IncrementalAlterConfigs on TOPIC,
//! BROKER and GROUP resources: mapping [`crate::config`]'s entries to Kafka's shapes,
//! checking which resources a request may change, and applying
//! incremental operations to a set of overrides.

use std::collections::{BTreeMap, HashSet};

use bytes::Bytes;
use es_auth::acl::{AclOperation, ResourceType};
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{
    alter_configs_response, incremental_alter_configs_response, AlterConfigsRequest,
    AlterConfigsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};

use super::s;
use crate::broker::AdminError;
use crate::config::{
    broker_dynamic_def, describe_group, group_config_def, topic_config_def, validate_broker_config,
    validate_group_config_in, validate_topic_config, ConfigSource, ConfigType,
};
use crate::errors::{code, ResponseError};
use crate::handlers::authz::{
    CLUSTER_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED,
};
use crate::handlers::{Ctx, RequestError};
use crate::topics::validate_topic_name;

/// Kafka's ConfigResource.Type codes.
pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;
pub const RESOURCE_BROKER_LOGGER: i8 = 8;
pub const RESOURCE_CLIENT_METRICS: i8 = 16;
pub const RESOURCE_GROUP: i8 = 32;
/// Every type Kafka's `ConfigResource.Type.forId` knows (the rest are UNKNOWN).
const KNOWN_RESOURCE_TYPES: [i8; 5] = [
    RESOURCE_TOPIC,
    RESOURCE_BROKER,
    RESOURCE_BROKER_LOGGER,
    RESOURCE_CLIENT_METRICS,
    RESOURCE_GROUP,
];

/// IncrementalAlterConfigs operations.
pub const OP_SET: i8 = 0;
pub const OP_DELETE: i8 = 1;
pub const OP_APPEND: i8 = 2;
pub const OP_SUBTRACT: i8 = 3;

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
    // Kafka's ConfigHelper throws for a resource type it does not know
    // before describing anything: the whole request answers INVALID_REQUEST,
    // every resource with no configs.
    if let Some(bad) = req
        .resources
        .iter()
        .find(|res| !KNOWN_RESOURCE_TYPES.contains(&res.resource_type))
    {
        let message = format!(
            "Unexpected resource type {} for resource {}",
            bad.resource_type, bad.resource_name
        );
        for res in req.resources {
            let mut out = DescribeConfigsResult::default();
            out.resource_type = res.resource_type;
            out.resource_name = res.resource_name;
            out.error_code = code(ResponseError::InvalidRequest);
            out.error_message = Some(s(message.clone()));
            r.results.push(out);
        }
        return ctx.respond(&r);
    }
    for res in req.resources {
        let mut out = DescribeConfigsResult::default();
        out.resource_type = res.resource_type;
        out.resource_name = res.resource_name.clone();
        out.error_message = None;
        let denied = config_denied(
            ctx,
            res.resource_type,
            res.resource_name.as_str(),
            AclOperation::DescribeConfigs,
        );
        if let Err(e) = denied {
            out.error_code = e.code;
            out.error_message = Some(s(e.message));
            r.results.push(out);
            continue;
        }
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
                None if validate_topic_name(&name).is_err() => {
                    out.error_code = code(ResponseError::InvalidTopicException);
                    out.error_message = validate_topic_name(&name).err().map(s);
                }
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
                    // A mirror topic's state, read-only, as a topic config
                    // (so kafka-configs --describe lists it).
                    for (n, value) in crate::mirror::config_entries(b, &name) {
                        if keys.as_ref().is_some_and(|ks| !ks.iter().any(|k| k == n)) {
                            continue;
                        }
                        let entry = Entry {
                            name: n,
                            value,
                            source: ConfigSource::DynamicTopic as i8,
                            ty: ConfigType::String,
                            read_only: true,
                            doc: "The mirror's state (es-broker mirror status); read-only.",
                            synonyms: Vec::new(),
                        };
                        out.configs.push(config_result(
                            v,
                            entry,
                            req.include_synonyms,
                            include_doc,
                        ));
                    }
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
            RESOURCE_GROUP if name.is_empty() => {
                out.error_code = code(ResponseError::InvalidRequest);
                out.error_message = Some(s("Group name must not be empty"));
            }
            RESOURCE_GROUP => {
                let set = b.group_configs(&name);
                out.configs = describe_group(&set, keys.as_deref())
                    .into_iter()
                    .map(|d| {
                        let mut synonyms = Vec::new();
                        if d.set_on_group {
                            synonyms.push((
                                d.def.name.to_string(),
                                d.value.clone(),
                                ConfigSource::Group as i8,
                            ));
                        }
                        synonyms.push((
                            d.def.broker_name.to_string(),
                            d.def.default.to_string(),
                            ConfigSource::Default as i8,
                        ));
                        config_result(
                            v,
                            Entry {
                                name: d.def.name,
                                value: d.value,
                                source: synonyms[0].2,
                                ty: d.def.ty,
                                read_only: false,
                                doc: d.def.doc,
                                synonyms,
                            },
                            req.include_synonyms,
                            include_doc,
                        )
                    })
                    .collect();
            }
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

/// Resource-level checks shared by both alter APIs for everything but a
/// BROKER resource (see [`alter_broker`]), in the order Kafka makes them:
/// the broker's preprocessing (the resource type; loggers through the
/// legacy API are an unknown type), then the controller's validation of a
/// topic name. Whether the topic exists is checked after its configs, as
/// Kafka's controller does ([`topic_exists`]).
/// Kafka's check of a config resource: DESCRIBE_CONFIGS or ALTER_CONFIGS
/// (`op`) on the topic, the cluster for a broker or its loggers, the group.
fn config_denied(
    ctx: &Ctx,
    resource_type: i8,
    name: &str,
    op: AclOperation,
) -> Result<(), AdminError> {
    let (allowed, error, message) = match resource_type {
        RESOURCE_TOPIC => (
            ctx.allowed(op, ResourceType::Topic, name),
            ResponseError::TopicAuthorizationFailed,
            TOPIC_AUTHORIZATION_FAILED,
        ),
        RESOURCE_GROUP => (
            ctx.allowed(op, ResourceType::Group, name),
            ResponseError::GroupAuthorizationFailed,
            GROUP_AUTHORIZATION_FAILED,
        ),
        _ => (
            ctx.allowed_on_cluster(op),
            ResponseError::ClusterAuthorizationFailed,
            CLUSTER_AUTHORIZATION_FAILED,
        ),
    };
    if allowed {
        Ok(())
    } else {
        Err(AdminError::new(error, message))
    }
}

fn alter_target(resource_type: i8, name: &str) -> Result<(), AdminError> {
    match resource_type {
        RESOURCE_TOPIC => {
            if name.is_empty() {
                return Err(AdminError::new(
                    ResponseError::InvalidRequest,
                    "Default topic resources are not allowed.",
                ));
            }
            validate_topic_name(name)
                .map_err(|m| AdminError::new(ResponseError::InvalidTopicException, m))
        }
        RESOURCE_BROKER_LOGGER => Err(AdminError::new(
            ResponseError::InvalidRequest,
            "es log levels come from --log-level and cannot be altered at run time",
        )),
        other => Err(AdminError::new(
            ResponseError::InvalidRequest,
            format!("Unknown resource type {other}"),
        )),
    }
}

fn topic_exists(ctx: &Ctx, name: &str) -> Result<(), AdminError> {
    ctx.broker.topic(name).map(|_| ()).ok_or_else(|| {
        AdminError::new(
            ResponseError::UnknownTopicOrPartition,
            format!("Topic '{name}' does not exist."),
        )
    })
}

/// Kafka's broker-side preprocessing of both alter APIs
/// (`ConfigAdminManager.preprocess`), for one resource: a resource named
/// twice in the request, a config named twice, or a value missing (null,
/// except for a DELETE) is INVALID_REQUEST before anything else.
fn preprocess<'a>(
    dup_resource: bool,
    configs: impl Iterator<Item = (&'a str, i8, bool)> + Clone,
) -> Result<(), AdminError> {
    let invalid = |m: String| AdminError::new(ResponseError::InvalidRequest, m);
    if dup_resource {
        return Err(invalid("Each resource must appear at most once.".into()));
    }
    let mut seen = HashSet::new();
    if configs.clone().any(|(name, _, _)| !seen.insert(name)) {
        return Err(invalid("Error due to duplicate config keys".into()));
    }
    let nulls: Vec<&str> = configs
        .filter(|(_, op, has_value)| *op != OP_DELETE && !has_value)
        .map(|(name, _, _)| name)
        .collect();
    if !nulls.is_empty() {
        return Err(invalid(format!(
            "Null value not supported for : {}",
            nulls.join(", ")
        )));
    }
    Ok(())
}

/// Which (type, name) pairs a request names more than once.
fn duplicated<'a>(resources: impl Iterator<Item = (i8, &'a str)>) -> HashSet<(i8, String)> {
    let mut seen = HashSet::new();
    let mut dups = HashSet::new();
    for (t, n) in resources {
        if !seen.insert((t, n)) {
            dups.insert((t, n.to_string()));
        }
    }
    dups
}

pub async fn alter_configs(
    ctx: &Ctx,
    req: AlterConfigsRequest,
) -> Result<Option<Bytes>, RequestError> {
    let mut r = AlterConfigsResponse::default();
    let dups = duplicated(
        req.resources
            .iter()
            .map(|res| (res.resource_type, res.resource_name.as_str())),
    );
    for res in req.resources {
        let name = res.resource_name.to_string();
        let outcome: Result<(), AdminError> = async {
            let dup = dups.contains(&(res.resource_type, name.clone()));
            if !dup {
                config_denied(ctx, res.resource_type, &name, AclOperation::AlterConfigs)?;
            }
            preprocess(
                dup,
                res.configs
                    .iter()
                    .map(|c| (c.name.as_str(), OP_SET, c.value.is_some())),
            )?;
            if res.resource_type == RESOURCE_BROKER || res.resource_type == RESOURCE_GROUP {
                let ops: Vec<ConfigOp> = res
                    .configs
                    .iter()
                    .map(|c| ConfigOp {
                        name: c.name.to_string(),
                        op: OP_SET,
                        value: c.value.as_ref().map(|v| v.to_string()),
                    })
                    .collect();
                if res.resource_type == RESOURCE_GROUP {
                    return alter_group(ctx, &name, &ops, true, req.validate_only).await;
                }
                return alter_broker(ctx, &name, &ops, true, req.validate_only).await;
            }
            alter_target(res.resource_type, &name)?;
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
            topic_exists(ctx, &name)?;
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
    apply_op(overrides, d.ty, d.default, name, op, value, |v| {
        validate_topic_config(name, v).map_err(AdminError::from)
    })
}

/// Applies one incremental operation on config `name` (of type `ty`,
/// default `default`) to `map`, checking every value it stores with
/// `validate`.
#[allow(clippy::too_many_arguments)]
fn apply_op(
    map: &mut BTreeMap<String, String>,
    ty: ConfigType,
    default: &str,
    name: &str,
    op: i8,
    value: Option<&str>,
    validate: impl Fn(Option<&str>) -> Result<(), AdminError>,
) -> Result<(), AdminError> {
    let is_list = ty == ConfigType::List;
    let current = || {
        map.get(name)
            .cloned()
            .unwrap_or_else(|| default.to_string())
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
                "Config value append/subtract is not allowed for config key {name} of type {ty:?}"
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

/// One requested change to a broker or group config (legacy AlterConfigs
/// is a SET of every config named, replacing the rest).
struct ConfigOp {
    name: String,
    op: i8,
    value: Option<String>,
}

/// Kafka's dynamic broker configs of replication throttles. es applies no
/// throttle, so setting them is refused like any config es does not keep;
/// deleting them (which `kafka-reassign-partitions.sh --verify` does on
/// every broker once a reassignment completes) is a no-op, as deleting an
/// unset dynamic config is on Kafka.
const THROTTLE_RATES: [&str; 3] = [
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
];

/// AlterConfigs / IncrementalAlterConfigs on a BROKER resource. The dynamic
/// configs are the broker-level names of the topic configs; anything else
/// is refused as Kafka refuses a read-only broker config, except deletes of
/// the [`THROTTLE_RATES`] (no-ops). Errors are INVALID_REQUEST, as Kafka
/// reports broker config validation (KAFKA-13609).
async fn alter_broker(
    ctx: &Ctx,
    name: &str,
    ops: &[ConfigOp],
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
        .filter(|o| !(o.op == OP_DELETE && THROTTLE_RATES.contains(&o.name.as_str())))
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
                apply_op(
                    map,
                    d.ty,
                    d.default,
                    &o.name,
                    o.op,
                    o.value.as_deref(),
                    |v| validate_broker_config(&o.name, v).map_err(AdminError::from),
                )
                .map_err(as_invalid_request)?;
            }
            match all.min_insync_violation() {
                Some(m) => Err(AdminError::new(ResponseError::InvalidConfig, m)),
                None => Ok(()),
            }
        })
        .await
}

/// AlterConfigs / IncrementalAlterConfigs on a GROUP resource, as Kafka's
/// controller: the group name, then each operation over the group's
/// current configs, then every resulting value (INVALID_CONFIG with
/// Kafka's message). The group need not exist.
async fn alter_group(
    ctx: &Ctx,
    name: &str,
    ops: &[ConfigOp],
    replace: bool,
    validate_only: bool,
) -> Result<(), AdminError> {
    if name.is_empty() {
        return Err(AdminError::new(
            ResponseError::InvalidRequest,
            "Default group resources are not allowed.",
        ));
    }
    let invalid_config = |m: String| AdminError::new(ResponseError::InvalidConfig, m);
    let mut configs = if replace {
        BTreeMap::new()
    } else {
        ctx.broker.group_configs(name)
    };
    for o in ops {
        let Some(d) = group_config_def(&o.name) else {
            return Err(invalid_config(format!(
                "Unknown group config name: {}",
                o.name
            )));
        };
        apply_op(
            &mut configs,
            d.ty,
            d.default,
            &o.name,
            o.op,
            o.value.as_deref(),
            |_| Ok(()),
        )?;
    }
    for (k, v) in &configs {
        validate_group_config_in(k, Some(v), &ctx.broker.config().share).map_err(invalid_config)?;
    }
    ctx.broker
        .set_group_configs(name, configs, validate_only)
        .await
}

pub async fn incremental_alter_configs(
    ctx: &Ctx,
    req: IncrementalAlterConfigsRequest,
) -> Result<Option<Bytes>, RequestError> {
    let mut r = IncrementalAlterConfigsResponse::default();
    let dups = duplicated(
        req.resources
            .iter()
            .map(|res| (res.resource_type, res.resource_name.as_str())),
    );
    for res in req.resources {
        let name = res.resource_name.to_string();
        let outcome: Result<(), AdminError> = async {
            let dup = dups.contains(&(res.resource_type, name.clone()));
            if !dup {
                config_denied(ctx, res.resource_type, &name, AclOperation::AlterConfigs)?;
            }
            preprocess(
                dup,
                res.configs
                    .iter()
                    .map(|c| (c.name.as_str(), c.config_operation, c.value.is_some())),
            )?;
            if res.resource_type == RESOURCE_BROKER || res.resource_type == RESOURCE_GROUP {
                let ops: Vec<ConfigOp> = res
                    .configs
                    .iter()
                    .map(|c| ConfigOp {
                        name: c.name.to_string(),
                        op: c.config_operation,
                        value: c.value.as_ref().map(|v| v.to_string()),
                    })
                    .collect();
                if res.resource_type == RESOURCE_GROUP {
                    return alter_group(ctx, &name, &ops, false, req.validate_only).await;
                }
                return alter_broker(ctx, &name, &ops, false, req.validate_only).await;
            }
            alter_target(res.resource_type, &name)?;
            // Kafka's controller reads each operation's type before it looks
            // at the topic: one it does not know fails there, as
            // UNKNOWN_SERVER_ERROR.
            if let Some(c) = res
                .configs
                .iter()
                .find(|c| !(OP_SET..=OP_SUBTRACT).contains(&c.config_operation))
            {
                return Err(AdminError::new(
                    ResponseError::UnknownServerError,
                    format!("unknown config operation {}", c.config_operation),
                ));
            }
            let mut overrides = ctx
                .broker
                .topic(&name)
                .map(|t| t.config().overrides().clone())
                .unwrap_or_default();
            for c in &res.configs {
                apply_incremental(
                    &mut overrides,
                    c.name.as_str(),
                    c.config_operation,
                    c.value.as_ref().map(|v| v.as_str()),
                )?;
            }
            topic_exists(ctx, &name)?;
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
