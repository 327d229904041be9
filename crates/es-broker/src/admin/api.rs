//! The admin listener's JSON API under `/api/v1` (docs/admin-api.md), what
//! the console shows and scripts may use.
//!
//! Everything that Kafka's admin API can answer is asked of the broker as
//! Kafka requests, sent in process as the caller ([`super::auth::Caller`]):
//! the authorizer decides exactly as for a Kafka client, and the numbers
//! are the ones a Kafka admin client gets. What Kafka has no request for
//! (throughput samples, log sizes, lag, mirror state, the quorum) is read
//! from the broker directly.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Extension, Json, Router};
use base64::Engine;
use bytes::{Buf, Bytes, BytesMut};
use es_kafka::kafka_protocol::messages::create_topics_request::{
    CreatableTopic, CreatableTopicConfig,
};
use es_kafka::kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use es_kafka::kafka_protocol::messages::describe_producers_request::TopicRequest;
use es_kafka::kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use es_kafka::kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use es_kafka::kafka_protocol::messages::list_offsets_request::{
    ListOffsetsPartition, ListOffsetsTopic,
};
use es_kafka::kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use es_kafka::kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use es_kafka::kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use es_kafka::kafka_protocol::messages::*;
use es_kafka::kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use es_kafka::kafka_protocol::records::RecordBatchDecoder;
use es_kafka::mirror::MirrorSlot;
use es_kafka::Broker;
use serde::Deserialize;
use serde_json::{json, Value};

use super::auth::Caller;
use super::Shared;

type ApiResult = Result<Response, Response>;

pub fn router() -> Router<Arc<Shared>> {
    Router::new()
        .route("/overview", get(overview))
        .route("/throughput", get(throughput))
        .route("/topics", get(topics).post(create_topic))
        .route("/topics/{name}", get(topic).delete(delete_topic))
        .route("/topics/{name}/configs", put(alter_configs))
        .route("/topics/{name}/partitions/{p}/records", get(records))
        .route("/groups", get(groups))
        .route("/groups/{id}", get(group))
        .route("/groups/{id}/reset-offsets", post(reset_offsets))
        .route("/producers", get(producers))
        .route("/transactions", get(transactions))
        .route("/acls", get(acls))
        .route("/users", get(users))
        .route("/mirrors", get(mirrors))
        .route("/schemas", get(schemas))
        .fallback(|| async {
            error(
                StatusCode::NOT_FOUND,
                None,
                "no such API (docs/admin-api.md)",
            )
        })
}

/// An error answer: `{"error_code", "error", "message"}`.
pub fn error(status: StatusCode, code: Option<i16>, message: &str) -> Response {
    let name = code.map(error_name);
    (
        status,
        Json(json!({
            "error_code": code.unwrap_or(-1),
            "error": name.unwrap_or_else(|| status.canonical_reason().unwrap_or("ERROR").to_uppercase().replace(' ', "_")),
            "message": message,
        })),
    )
        .into_response()
}

/// Kafka's name of an error code (`TOPIC_ALREADY_EXISTS`).
fn error_name(code: i16) -> String {
    use es_kafka::kafka_protocol::ResponseError;
    match ResponseError::try_from_code(code) {
        Some(e) => {
            let debug = format!("{e:?}");
            // CamelCase to SCREAMING_SNAKE, as Kafka's Errors enum names it.
            let mut out = String::new();
            for (i, c) in debug.chars().enumerate() {
                if c.is_uppercase() && i > 0 {
                    out.push('_');
                }
                out.push(c.to_ascii_uppercase());
            }
            out
        }
        None if code == 0 => "NONE".to_string(),
        None => format!("ERROR_{code}"),
    }
}

/// The HTTP status for a Kafka error code.
fn status_of(code: i16) -> StatusCode {
    match code {
        // TOPIC_ALREADY_EXISTS, NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND(404 below)
        36 | 68 => StatusCode::CONFLICT,
        3 | 69 => StatusCode::NOT_FOUND,
        // *_AUTHORIZATION_FAILED
        29..=31 | 53 => StatusCode::FORBIDDEN,
        _ => StatusCode::BAD_REQUEST,
    }
}

fn kafka_error(code: i16, message: Option<&StrBytes>) -> Response {
    let msg = message
        .map(|m| m.to_string())
        .unwrap_or_else(|| error_name(code));
    error(status_of(code), Some(code), &msg)
}

fn broker_of(s: &Shared) -> Result<Arc<Broker>, Response> {
    s.broker().cloned().ok_or_else(|| {
        error(
            StatusCode::SERVICE_UNAVAILABLE,
            None,
            "the broker is still recovering its data directory",
        )
    })
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// Sends `req` as API `key` version `v` to the broker, as `caller`, and
/// decodes the answer.
async fn call<Req: Encodable, Resp: Decodable>(
    broker: &Arc<Broker>,
    caller: &Caller,
    key: ApiKey,
    v: i16,
    req: &Req,
) -> Result<Resp, Response> {
    let internal = |what: String| error(StatusCode::INTERNAL_SERVER_ERROR, None, &what);
    let mut header = RequestHeader::default();
    header.request_api_key = key as i16;
    header.request_api_version = v;
    header.correlation_id = 1;
    header.client_id = Some(s("es-admin"));
    let mut buf = BytesMut::new();
    header
        .encode(&mut buf, key.request_header_version(v))
        .map_err(|e| internal(format!("{key:?} header: {e}")))?;
    req.encode(&mut buf, v)
        .map_err(|e| internal(format!("{key:?} request: {e}")))?;
    let out = es_kafka::handlers::handle_from(
        broker.clone(),
        caller.client(),
        buf.freeze(),
        es_kafka::turn::Turn::free(),
    )
    .await
    .map_err(|e| internal(format!("{key:?}: {e}")))?;
    let mut frame = out
        .ok_or_else(|| internal(format!("{key:?}: no response")))?
        .into_bytes();
    if frame.remaining() < 4 {
        return Err(internal(format!("{key:?}: short response")));
    }
    frame.advance(4);
    ResponseHeader::decode(&mut frame, key.response_header_version(v))
        .map_err(|e| internal(format!("{key:?} response header: {e}")))?;
    Resp::decode(&mut frame, v).map_err(|e| internal(format!("{key:?} response: {e}")))
}

fn ok(v: Value) -> ApiResult {
    Ok(Json(v).into_response())
}

async fn overview(
    State(sh): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
) -> ApiResult {
    let b = broker_of(&sh)?;
    let image = b.image();
    let controller = b.metadata().map(|node| {
        let m = node.raft().metrics().borrow().clone();
        let voters: Vec<u64> = m.membership_config.membership().voter_ids().collect();
        let learners: Vec<u64> = m.membership_config.membership().learner_ids().collect();
        json!({
            "leader_id": m.current_leader,
            "term": m.current_term,
            "commit_index": m.last_applied.map(|l| l.index),
            "voters": voters,
            "learners": learners,
        })
    });
    let brokers: Vec<Value> = match image.as_deref() {
        Some(i) if !i.brokers.is_empty() => i
            .brokers
            .iter()
            .map(|(id, info)| {
                let e = b.endpoint_of(Some(i), *id);
                json!({
                    "node_id": id,
                    "host": e.as_ref().map(|e| e.host.clone()),
                    "port": e.as_ref().map(|e| e.port),
                    "rack": info.rack,
                    "fenced": info.fenced,
                })
            })
            .collect(),
        _ => {
            let e = b.own_endpoint();
            vec![
                json!({"node_id": b.node_id(), "host": e.host, "port": e.port, "rack": null, "fenced": false}),
            ]
        }
    };
    let bb = b.clone();
    let (health, groups) = tokio::task::spawn_blocking(move || {
        (partition_health(&bb), bb.groups().member_counts().len())
    })
    .await
    .map_err(|e| error(StatusCode::INTERNAL_SERVER_ERROR, None, &e.to_string()))?;
    ok(json!({
        "cluster_id": b.cluster_id(),
        "node_id": b.node_id(),
        "version": env!("CARGO_PKG_VERSION"),
        "uptime_ms": sh.started.elapsed().as_millis() as u64,
        "ready": sh.not_ready().is_none(),
        "controller": controller,
        "brokers": brokers,
        "topics": b.topics().len(),
        "partitions": health.0,
        "storage": {"log_bytes": health.1},
        "connections": es_kafka::metrics::kafka_metrics().connections_open(),
        "groups": groups,
        "caller": {"principal": caller.client_principal.to_string(), "may_write": caller.may_write},
    }))
}

/// Partition counts by health, and the bytes of every log hosted here.
fn partition_health(b: &Broker) -> (Value, u64) {
    let image = b.image();
    let me = b.node_id();
    let (mut total, mut led, mut offline, mut under, mut under_min, mut bytes) = (0, 0, 0, 0, 0, 0);
    for t in b.topics() {
        let min_isr = t.config().min_insync_replicas();
        for p in 0..t.partition_count() {
            let Some(l) = b.leadership(image.as_deref(), &t.name, p) else {
                continue;
            };
            total += 1;
            if l.leader < 0 {
                offline += 1;
            }
            if l.leader == me {
                led += 1;
            }
            if l.isr.len() < l.replicas.len() {
                under += 1;
            }
            if l.isr.len() < min_isr {
                under_min += 1;
            }
        }
        for slot in t.partitions() {
            bytes += slot.log.size_bytes();
        }
    }
    (
        json!({"total": total, "leader_here": led, "offline": offline,
               "under_replicated": under, "under_min_isr": under_min}),
        bytes,
    )
}

#[derive(Deserialize)]
struct SecondsQuery {
    seconds: Option<usize>,
}

async fn throughput(State(sh): State<Arc<Shared>>, Query(q): Query<SecondsQuery>) -> ApiResult {
    let samples = sh.throughput.last(q.seconds.unwrap_or(300).min(600));
    ok(json!({"interval_ms": 1000, "samples": samples}))
}

/// Metadata for `topics` (None: every topic), as the caller may see it.
async fn metadata(
    b: &Arc<Broker>,
    caller: &Caller,
    topics: Option<Vec<String>>,
) -> Result<MetadataResponse, Response> {
    let mut req = MetadataRequest::default();
    req.topics = topics.map(|ts| {
        ts.into_iter()
            .map(|t| {
                let mut rt = MetadataRequestTopic::default();
                rt.name = Some(TopicName(s(&t)));
                rt
            })
            .collect()
    });
    req.allow_auto_topic_creation = false;
    call(b, caller, ApiKey::Metadata, 12, &req).await
}

async fn topics(State(sh): State<Arc<Shared>>, Extension(caller): Extension<Caller>) -> ApiResult {
    let b = broker_of(&sh)?;
    let md = metadata(&b, &caller, None).await?;
    let mirrors = mirror_states(&b);
    let mut out = Vec::new();
    for t in md.topics.iter().filter(|t| t.error_code == 0) {
        let Some(name) = t.name.as_ref().map(|n| n.0.to_string()) else {
            continue;
        };
        let (mut bytes, mut records) = (0u64, 0u64);
        if let Some(local) = b.topic(&name) {
            for slot in local.partitions() {
                bytes += slot.log.size_bytes();
                records += slot
                    .log
                    .high_watermark()
                    .saturating_sub(slot.log.log_start_offset());
            }
        }
        let rf = t.partitions.first().map_or(0, |p| p.replica_nodes.len());
        out.push(json!({
            "name": name,
            "id": t.topic_id.to_string(),
            "internal": t.is_internal,
            "partitions": t.partitions.len(),
            "replication_factor": rf,
            "log_bytes": bytes,
            "records_estimate": records,
            "under_replicated": t.partitions.iter().filter(|p| p.isr_nodes.len() < p.replica_nodes.len()).count(),
            "offline": t.partitions.iter().filter(|p| p.leader_id.0 < 0).count(),
            "mirror": mirrors.get(&name),
        }));
    }
    out.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    ok(Value::Array(out))
}

/// Mirror topics' link and state, by topic.
fn mirror_states(b: &Broker) -> BTreeMap<String, Value> {
    b.extension(MirrorSlot::default)
        .get()
        .map(|c| c.status())
        .unwrap_or_default()
        .into_iter()
        .map(|t| (t.topic.clone(), json!({"link": t.link, "state": t.state})))
        .collect()
}

async fn topic(
    State(sh): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> ApiResult {
    let b = broker_of(&sh)?;
    topic_json(&b, &caller, &name)
        .await
        .map(|v| Json(v).into_response())
}

async fn topic_json(b: &Arc<Broker>, caller: &Caller, name: &str) -> Result<Value, Response> {
    let md = metadata(b, caller, Some(vec![name.to_string()])).await?;
    let Some(t) = md.topics.first() else {
        return Err(error(StatusCode::NOT_FOUND, Some(3), "no such topic"));
    };
    if t.error_code != 0 {
        return Err(kafka_error(t.error_code, None));
    }
    let local = b.topic(name);
    let partitions: Vec<Value> = t
        .partitions
        .iter()
        .map(|p| {
            let slot = local.as_ref().and_then(|l| l.partition(p.partition_index));
            let ids = |v: &Vec<BrokerId>| v.iter().map(|b| b.0).collect::<Vec<_>>();
            json!({
                "partition": p.partition_index,
                "leader": p.leader_id.0,
                "leader_epoch": p.leader_epoch,
                "replicas": ids(&p.replica_nodes),
                "isr": ids(&p.isr_nodes),
                "offline_replicas": ids(&p.offline_replicas),
                "log_start_offset": slot.as_ref().map(|s| s.log.log_start_offset()),
                "high_watermark": slot.as_ref().map(|s| s.log.high_watermark()),
                "last_stable_offset": slot.as_ref().map(|s| s.log.last_stable_offset()),
                "log_bytes": slot.as_ref().map(|s| s.log.size_bytes()),
            })
        })
        .collect();
    let mut req = DescribeConfigsRequest::default();
    let mut r = DescribeConfigsResource::default();
    r.resource_type = 2;
    r.resource_name = s(name);
    req.resources = vec![r];
    let dc: DescribeConfigsResponse = call(b, caller, ApiKey::DescribeConfigs, 4, &req).await?;
    let configs: Vec<Value> = dc
        .results
        .iter()
        .filter(|r| r.error_code == 0)
        .flat_map(|r| r.configs.iter())
        .map(|c| {
            json!({
                "name": c.name.to_string(),
                "value": c.value.as_ref().map(|v| v.to_string()),
                "source": config_source(c.config_source),
                "read_only": c.read_only,
                "sensitive": c.is_sensitive,
            })
        })
        .collect();
    Ok(json!({
        "name": name,
        "id": t.topic_id.to_string(),
        "internal": t.is_internal,
        "partitions": partitions,
        "configs": configs,
    }))
}

fn config_source(code: i8) -> &'static str {
    match code {
        1 => "DYNAMIC_TOPIC_CONFIG",
        2 => "DYNAMIC_BROKER_CONFIG",
        3 => "DYNAMIC_DEFAULT_BROKER_CONFIG",
        4 => "STATIC_BROKER_CONFIG",
        5 => "DEFAULT_CONFIG",
        6 => "DYNAMIC_BROKER_LOGGER_CONFIG",
        7 => "CLIENT_METRICS_CONFIG",
        8 => "GROUP_CONFIG",
        _ => "UNKNOWN",
    }
}

#[derive(Deserialize)]
struct NewTopic {
    name: String,
    #[serde(default = "minus_one")]
    partitions: i32,
    #[serde(default = "minus_one")]
    replication_factor: i32,
    #[serde(default)]
    configs: BTreeMap<String, String>,
}

fn minus_one() -> i32 {
    -1
}

async fn create_topic(
    State(sh): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Json(body): Json<NewTopic>,
) -> ApiResult {
    let b = broker_of(&sh)?;
    let mut t = CreatableTopic::default();
    t.name = TopicName(s(&body.name));
    t.num_partitions = body.partitions;
    t.replication_factor = i16::try_from(body.replication_factor).map_err(|_| {
        error(
            StatusCode::BAD_REQUEST,
            None,
            "replication_factor out of range",
        )
    })?;
    t.configs = body
        .configs
        .iter()
        .map(|(k, v)| {
            let mut c = CreatableTopicConfig::default();
            c.name = s(k);
            c.value = Some(s(v));
            c
        })
        .collect();
    let mut req = CreateTopicsRequest::default();
    req.topics = vec![t];
    req.timeout_ms = 30_000;
    let r: CreateTopicsResponse = call(&b, &caller, ApiKey::CreateTopics, 7, &req).await?;
    let Some(t) = r.topics.first() else {
        return Err(error(
            StatusCode::INTERNAL_SERVER_ERROR,
            None,
            "CreateTopics answered nothing",
        ));
    };
    if t.error_code != 0 {
        return Err(kafka_error(t.error_code, t.error_message.as_ref()));
    }
    let v = topic_json(&b, &caller, &body.name).await?;
    Ok((StatusCode::CREATED, Json(v)).into_response())
}

async fn delete_topic(
    State(sh): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> ApiResult {
    let b = broker_of(&sh)?;
    let mut req = DeleteTopicsRequest::default();
    req.topic_names = vec![TopicName(s(&name))];
    req.timeout_ms = 30_000;
    // v5: the last version naming topics in `topic_names`.
    let r: DeleteTopicsResponse = call(&b, &caller, ApiKey::DeleteTopics, 5, &req).await?;
    let Some(t) = r.responses.first() else {
        return Err(error(
            StatusCode::INTERNAL_SERVER_ERROR,
            None,
            "DeleteTopics answered nothing",
        ));
    };
    if t.error_code != 0 {
        return Err(kafka_error(t.error_code, t.error_message.as_ref()));
    }
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[derive(Deserialize)]
struct ConfigChange {
    #[serde(default)]
    set: BTreeMap<String, String>,
    #[serde(default)]
    delete: Vec<String>,
}

async fn alter_configs(
    State(sh): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    Json(body): Json<ConfigChange>,
) -> ApiResult {
    let b = broker_of(&sh)?;
    let mut r = AlterConfigsResource::default();
    r.resource_type = 2;
    r.resource_name = s(&name);
    for (k, v) in &body.set {
        let mut c = AlterableConfig::default();
        c.name = s(k);
        c.config_operation = 0;
        c.value = Some(s(v));
        r.configs.push(c);
    }
    for k in &body.delete {
        let mut c = AlterableConfig::default();
        c.name = s(k);
        c.config_operation = 1;
        r.configs.push(c);
    }
    let mut req = IncrementalAlterConfigsRequest::default();
    req.resources = vec![r];
    let resp: IncrementalAlterConfigsResponse =
        call(&b, &caller, ApiKey::IncrementalAlterConfigs, 1, &req).await?;
    let Some(r) = resp.responses.first() else {
        return Err(error(
            StatusCode::INTERNAL_SERVER_ERROR,
            None,
            "IncrementalAlterConfigs answered nothing",
        ));
    };
    if r.error_code != 0 {
        return Err(kafka_error(r.error_code, r.error_message.as_ref()));
    }
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[derive(Deserialize)]
struct RecordsQuery {
    offset: Option<i64>,
    timestamp: Option<i64>,
    max: Option<usize>,
    max_bytes: Option<i32>,
}

/// One partition's offset for `timestamp` (-2 earliest, -1 latest), as
/// ListOffsets answers it.
async fn list_offset(
    b: &Arc<Broker>,
    caller: &Caller,
    topic: &str,
    partition: i32,
    timestamp: i64,
) -> Result<i64, Response> {
    let mut p = ListOffsetsPartition::default();
    p.partition_index = partition;
    p.current_leader_epoch = -1;
    p.timestamp = timestamp;
    let mut t = ListOffsetsTopic::default();
    t.name = TopicName(s(topic));
    t.partitions = vec![p];
    let mut req = ListOffsetsRequest::default();
    req.replica_id = BrokerId(-1);
    req.isolation_level = 1;
    req.topics = vec![t];
    let r: ListOffsetsResponse = call(b, caller, ApiKey::ListOffsets, 8, &req).await?;
    let p = r
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .ok_or_else(|| error(StatusCode::NOT_FOUND, Some(3), "no such partition"))?;
    if p.error_code != 0 {
        return Err(kafka_error(p.error_code, None));
    }
    Ok(p.offset)
}

/// Bytes as the API shows them: text, base64, JSON when they parse.
fn bytes_json(b: Option<&Bytes>) -> Value {
    let Some(b) = b else { return Value::Null };
    let text = std::str::from_utf8(b).ok();
    let mut v = json!({
        "text": text,
        "base64": base64::engine::general_purpose::STANDARD.encode(b),
    });
    if let Some(parsed) = text.and_then(|t| serde_json::from_str::<Value>(t).ok()) {
        v["json"] = parsed;
    }
    v
}

async fn records(
    State(sh): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Path((topic, partition)): Path<(String, i32)>,
    Query(q): Query<RecordsQuery>,
) -> ApiResult {
    let b = broker_of(&sh)?;
    let max = q.max.unwrap_or(50).clamp(1, 500);
    let start = match (q.offset, q.timestamp) {
        (Some(o), _) => o,
        (None, Some(ts)) => list_offset(&b, &caller, &topic, partition, ts).await?,
        (None, None) => list_offset(&b, &caller, &topic, partition, -2).await?,
    };
    let mut fp = FetchPartition::default();
    fp.partition = partition;
    fp.fetch_offset = start.max(0);
    fp.current_leader_epoch = -1;
    fp.log_start_offset = -1;
    fp.partition_max_bytes = q.max_bytes.unwrap_or(1 << 20).clamp(1, 16 << 20);
    let mut ft = FetchTopic::default();
    ft.topic = TopicName(s(&topic));
    ft.partitions = vec![fp];
    let mut req = FetchRequest::default();
    req.replica_id = BrokerId(-1);
    req.max_wait_ms = 0;
    req.min_bytes = 0;
    req.max_bytes = 16 << 20;
    req.isolation_level = 1;
    req.topics = vec![ft];
    let r: FetchResponse = call(&b, &caller, ApiKey::Fetch, 12, &req).await?;
    if r.error_code != 0 {
        return Err(kafka_error(r.error_code, None));
    }
    let p = r
        .responses
        .first()
        .and_then(|t| t.partitions.first())
        .ok_or_else(|| error(StatusCode::NOT_FOUND, Some(3), "no such partition"))?;
    if p.error_code != 0 {
        return Err(kafka_error(p.error_code, None));
    }
    let aborted: Vec<(i64, i64)> = p
        .aborted_transactions
        .iter()
        .flatten()
        .map(|a| (a.producer_id.0, a.first_offset))
        .collect();
    let registry = b
        .extension(crate::schema_registry::RegistryHandle::default)
        .get()
        .cloned();
    let mut out = Vec::new();
    let mut next = start;
    let mut bytes = p.records.clone().unwrap_or_default();
    // `next_offset` is where the next page starts: after the last record
    // returned, or after the control and aborted records passed over.
    'batches: while bytes.has_remaining() {
        let Ok(set) = RecordBatchDecoder::decode(&mut bytes) else {
            break;
        };
        for rec in set.records {
            if rec.offset < start {
                continue;
            }
            if out.len() >= max {
                break 'batches;
            }
            next = rec.offset + 1;
            if rec.control {
                continue;
            }
            if rec.transactional
                && aborted
                    .iter()
                    .any(|(pid, first)| *pid == rec.producer_id && rec.offset >= *first)
            {
                continue;
            }
            let schema = rec
                .value
                .as_ref()
                .and_then(|v| schema_of(registry.as_ref(), v));
            out.push(json!({
                "offset": rec.offset,
                "timestamp_ms": rec.timestamp,
                "timestamp_type": match rec.timestamp_type {
                    es_kafka::kafka_protocol::records::TimestampType::LogAppend => "LogAppendTime",
                    _ => "CreateTime",
                },
                "key": bytes_json(rec.key.as_ref()),
                "value": bytes_json(rec.value.as_ref()),
                "headers": rec.headers.iter().map(|(k, v)| json!({"key": k.to_string(), "value": bytes_json(v.as_ref())})).collect::<Vec<_>>(),
                "schema": schema,
            }));
        }
    }
    ok(json!({
        "partition": partition,
        "high_watermark": p.high_watermark,
        "log_start_offset": p.log_start_offset,
        "next_offset": next,
        "records": out,
    }))
}

/// The registry's schema of a value in Confluent's wire format (magic 0,
/// a 4-byte schema id), when the registry knows the id.
fn schema_of(registry: Option<&es_registry::Shared>, value: &Bytes) -> Option<Value> {
    let registry = registry?;
    if value.len() < 5 || value[0] != 0 {
        return None;
    }
    let id = i32::from_be_bytes([value[1], value[2], value[3], value[4]]);
    registry.with_registry(|r| {
        let by_id = r.schema_by_id(id).ok()?;
        let subjects = r.subjects_by_id(id, false).unwrap_or_default();
        Some(json!({
            "id": id,
            "subject": subjects.first(),
            "type": serde_json::to_value(by_id.schema_type).ok(),
        }))
    })
}

async fn groups(State(sh): State<Arc<Shared>>, Extension(caller): Extension<Caller>) -> ApiResult {
    let b = broker_of(&sh)?;
    let req = ListGroupsRequest::default();
    let r: ListGroupsResponse = call(&b, &caller, ApiKey::ListGroups, 5, &req).await?;
    if r.error_code != 0 {
        return Err(kafka_error(r.error_code, None));
    }
    let bb = b.clone();
    let (counts, lags) = tokio::task::spawn_blocking(move || super::metrics::group_lags(&bb))
        .await
        .map_err(|e| error(StatusCode::INTERNAL_SERVER_ERROR, None, &e.to_string()))?;
    let mut out: Vec<Value> = r
        .groups
        .iter()
        .map(|g| {
            let id = g.group_id.0.to_string();
            let members = counts
                .iter()
                .find(|(l, _)| l.group_id == id)
                .map_or(0, |(_, n)| *n);
            let lag: u64 = lags.iter().filter(|l| l.group == id).map(|l| l.lag).sum();
            json!({
                "group_id": id,
                "state": g.group_state.to_string(),
                "protocol_type": g.protocol_type.to_string(),
                "type": g.group_type.to_string(),
                "members": members,
                "lag": lag,
            })
        })
        .collect();
    out.sort_by(|a, b| a["group_id"].as_str().cmp(&b["group_id"].as_str()));
    ok(Value::Array(out))
}

async fn group(
    State(sh): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> ApiResult {
    let b = broker_of(&sh)?;
    group_json(&b, &caller, &id)
        .await
        .map(|v| Json(v).into_response())
}

/// A group's description, members with their assignments, and its
/// committed offsets with their lag.
async fn group_json(b: &Arc<Broker>, caller: &Caller, id: &str) -> Result<Value, Response> {
    let mut req = DescribeGroupsRequest::default();
    req.groups = vec![GroupId(s(id))];
    let r: DescribeGroupsResponse = call(b, caller, ApiKey::DescribeGroups, 5, &req).await?;
    let g = r
        .groups
        .first()
        .ok_or_else(|| error(StatusCode::NOT_FOUND, Some(69), "no such group"))?;
    if g.error_code != 0 {
        return Err(kafka_error(g.error_code, g.error_message.as_ref()));
    }
    let members: Vec<Value> = g
        .members
        .iter()
        .map(|m| {
            let mut assignment = Vec::new();
            let mut a = m.member_assignment.clone();
            if a.remaining() >= 2 {
                let version = a.clone().get_i16();
                if let Ok(cpa) = ConsumerProtocolAssignment::decode(&mut a, version.clamp(0, 3)) {
                    for t in cpa.assigned_partitions {
                        assignment.push(
                            json!({"topic": t.topic.0.to_string(), "partitions": t.partitions}),
                        );
                    }
                }
            }
            json!({
                "member_id": m.member_id.to_string(),
                "group_instance_id": m.group_instance_id.as_ref().map(|s| s.to_string()),
                "client_id": m.client_id.to_string(),
                "client_host": m.client_host.to_string(),
                "assignment": assignment,
            })
        })
        .collect();
    let mut ofr = OffsetFetchRequestGroup::default();
    ofr.group_id = GroupId(s(id));
    ofr.topics = None;
    let mut req = OffsetFetchRequest::default();
    req.groups = vec![ofr];
    let of: OffsetFetchResponse = call(b, caller, ApiKey::OffsetFetch, 8, &req).await?;
    let mut offsets = Vec::new();
    for grp in &of.groups {
        if grp.error_code != 0 {
            return Err(kafka_error(grp.error_code, None));
        }
        for t in &grp.topics {
            let name = t.name.0.to_string();
            let local = b.topic(&name);
            for p in &t.partitions {
                if p.committed_offset < 0 {
                    continue;
                }
                let hw = local
                    .as_ref()
                    .and_then(|l| l.partition(p.partition_index))
                    .map(|s| s.log.high_watermark());
                offsets.push(json!({
                    "topic": name,
                    "partition": p.partition_index,
                    "committed_offset": p.committed_offset,
                    "high_watermark": hw,
                    "lag": hw.map(|hw| hw.saturating_sub(u64::try_from(p.committed_offset).unwrap_or(0))),
                    "metadata": p.metadata.as_ref().map(|m| m.to_string()).unwrap_or_default(),
                }));
            }
        }
    }
    Ok(json!({
        "group_id": id,
        "state": g.group_state.to_string(),
        "protocol_type": g.protocol_type.to_string(),
        "protocol": g.protocol_data.to_string(),
        "members": members,
        "offsets": offsets,
    }))
}

#[derive(Deserialize)]
struct Reset {
    topic: String,
    partitions: Option<Vec<i32>>,
    to: ResetTo,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ResetTo {
    Named(String),
    Offset { offset: i64 },
    Timestamp { timestamp_ms: i64 },
}

async fn reset_offsets(
    State(sh): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    Json(body): Json<Reset>,
) -> ApiResult {
    let b = broker_of(&sh)?;
    // As kafka-consumer-groups: only a group without active members.
    let mut req = DescribeGroupsRequest::default();
    req.groups = vec![GroupId(s(&id))];
    let r: DescribeGroupsResponse = call(&b, &caller, ApiKey::DescribeGroups, 5, &req).await?;
    if let Some(g) = r.groups.first() {
        if g.error_code != 0 && g.error_code != 69 {
            return Err(kafka_error(g.error_code, g.error_message.as_ref()));
        }
        let state = g.group_state.to_string();
        if !g.members.is_empty() || !(state == "Empty" || state == "Dead" || state.is_empty()) {
            return Err(error(
                StatusCode::CONFLICT,
                Some(68),
                &format!("group {id} has active members (state {state}): stop its consumers first"),
            ));
        }
    }
    let md = metadata(&b, &caller, Some(vec![body.topic.clone()])).await?;
    let t = md
        .topics
        .first()
        .filter(|t| t.error_code == 0)
        .ok_or_else(|| error(StatusCode::NOT_FOUND, Some(3), "no such topic"))?;
    let partitions: Vec<i32> = match &body.partitions {
        Some(ps) => ps.clone(),
        None => t.partitions.iter().map(|p| p.partition_index).collect(),
    };
    let mut commits = Vec::new();
    for p in partitions {
        let offset = match &body.to {
            ResetTo::Named(n) if n == "earliest" => {
                list_offset(&b, &caller, &body.topic, p, -2).await?
            }
            ResetTo::Named(n) if n == "latest" => {
                list_offset(&b, &caller, &body.topic, p, -1).await?
            }
            ResetTo::Named(n) => {
                return Err(error(
                    StatusCode::BAD_REQUEST,
                    None,
                    &format!("to: {n:?} is not earliest, latest, {{\"offset\": N}} or {{\"timestamp_ms\": T}}"),
                ))
            }
            ResetTo::Offset { offset } => *offset,
            ResetTo::Timestamp { timestamp_ms } => {
                let o = list_offset(&b, &caller, &body.topic, p, *timestamp_ms).await?;
                if o < 0 {
                    list_offset(&b, &caller, &body.topic, p, -1).await?
                } else {
                    o
                }
            }
        };
        let mut c = OffsetCommitRequestPartition::default();
        c.partition_index = p;
        c.committed_offset = offset;
        c.committed_leader_epoch = -1;
        c.committed_metadata = Some(s(""));
        commits.push(c);
    }
    let mut ct = OffsetCommitRequestTopic::default();
    ct.name = TopicName(s(&body.topic));
    ct.partitions = commits;
    let mut req = OffsetCommitRequest::default();
    req.group_id = GroupId(s(&id));
    req.generation_id_or_member_epoch = -1;
    req.member_id = s("");
    req.retention_time_ms = -1;
    req.topics = vec![ct];
    let r: OffsetCommitResponse = call(&b, &caller, ApiKey::OffsetCommit, 8, &req).await?;
    for t in &r.topics {
        for p in &t.partitions {
            if p.error_code != 0 {
                return Err(kafka_error(p.error_code, None));
            }
        }
    }
    group_json(&b, &caller, &id)
        .await
        .map(|v| Json(v).into_response())
}

async fn mirrors(State(sh): State<Arc<Shared>>) -> ApiResult {
    let b = broker_of(&sh)?;
    let statuses = b
        .extension(MirrorSlot::default)
        .get()
        .map(|c| c.status())
        .unwrap_or_default();
    let image = b.image();
    let mut out = Vec::new();
    if let Some(i) = image.as_deref() {
        for (name, link) in &i.mirror_links {
            let topics: Vec<Value> = statuses
                .iter()
                .filter(|t| &t.link == name)
                .map(|t| {
                    json!({
                        "topic": t.topic,
                        "source_topic": t.source_topic,
                        "state": t.state,
                        "error": t.error,
                        "lag": t.partitions.iter().map(|p| p.lag.max(0)).sum::<i64>(),
                        "partitions": t.partitions.len(),
                    })
                })
                .collect();
            out.push(json!({
                "link": name,
                "bootstrap": link.source_bootstrap,
                "topics": topics,
                "groups": link.groups,
            }));
        }
    }
    ok(Value::Array(out))
}

async fn schemas(State(sh): State<Arc<Shared>>) -> ApiResult {
    let b = broker_of(&sh)?;
    let Some(registry) = b
        .extension(crate::schema_registry::RegistryHandle::default)
        .get()
        .cloned()
    else {
        return ok(json!([]));
    };
    let out = registry.with_registry(|r| {
        r.schemas("", false, true)
            .into_iter()
            .map(|v| {
                let versions = r.versions(&v.subject, false).unwrap_or_default();
                let compatibility = r
                    .config(Some(&v.subject), true)
                    .ok()
                    .and_then(|c| serde_json::to_value(c).ok());
                json!({
                    "subject": v.subject,
                    "versions": versions,
                    "latest": {"version": v.version, "id": v.id,
                               "type": serde_json::to_value(v.schema_type).ok(),
                               "schema": v.schema},
                    "compatibility": compatibility,
                })
            })
            .collect::<Vec<_>>()
    });
    ok(Value::Array(out))
}

async fn producers(
    State(sh): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
) -> ApiResult {
    let b = broker_of(&sh)?;
    let md = metadata(&b, &caller, None).await?;
    let mut req = DescribeProducersRequest::default();
    for t in md.topics.iter().filter(|t| t.error_code == 0) {
        let Some(name) = &t.name else { continue };
        let mut tr = TopicRequest::default();
        tr.name = name.clone();
        tr.partition_indexes = t.partitions.iter().map(|p| p.partition_index).collect();
        req.topics.push(tr);
    }
    if req.topics.is_empty() {
        return ok(json!([]));
    }
    let r: DescribeProducersResponse =
        call(&b, &caller, ApiKey::DescribeProducers, 0, &req).await?;
    let mut out = Vec::new();
    for t in &r.topics {
        for p in &t.partitions {
            if p.error_code != 0 || p.active_producers.is_empty() {
                continue;
            }
            let producers: Vec<Value> = p
                .active_producers
                .iter()
                .map(|s| {
                    json!({
                        "producer_id": s.producer_id.0,
                        "producer_epoch": s.producer_epoch,
                        "last_sequence": s.last_sequence,
                        "last_timestamp_ms": s.last_timestamp,
                        "coordinator_epoch": s.coordinator_epoch,
                        "current_txn_start_offset": s.current_txn_start_offset,
                    })
                })
                .collect();
            out.push(json!({
                "topic": t.name.0.to_string(),
                "partition": p.partition_index,
                "producers": producers,
            }));
        }
    }
    ok(Value::Array(out))
}

async fn transactions(
    State(sh): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
) -> ApiResult {
    let b = broker_of(&sh)?;
    let mut lt = ListTransactionsRequest::default();
    lt.duration_filter = -1;
    let listed: ListTransactionsResponse =
        call(&b, &caller, ApiKey::ListTransactions, 1, &lt).await?;
    if listed.error_code != 0 {
        return Err(kafka_error(listed.error_code, None));
    }
    if listed.transaction_states.is_empty() {
        return ok(json!([]));
    }
    let mut dt = DescribeTransactionsRequest::default();
    dt.transactional_ids = listed
        .transaction_states
        .iter()
        .map(|t| t.transactional_id.clone())
        .collect();
    let described: DescribeTransactionsResponse =
        call(&b, &caller, ApiKey::DescribeTransactions, 0, &dt).await?;
    let out: Vec<Value> = described
        .transaction_states
        .iter()
        .filter(|t| t.error_code == 0)
        .map(|t| {
            let partitions: Vec<Value> = t
                .topics
                .iter()
                .flat_map(|tp| {
                    tp.partitions
                        .iter()
                        .map(move |p| json!({"topic": tp.topic.0.to_string(), "partition": p}))
                })
                .collect();
            json!({
                "transactional_id": t.transactional_id.0.to_string(),
                "producer_id": t.producer_id.0,
                "producer_epoch": t.producer_epoch,
                "state": t.transaction_state.to_string(),
                "timeout_ms": t.transaction_timeout_ms,
                "start_time_ms": t.transaction_start_time_ms,
                "partitions": partitions,
            })
        })
        .collect();
    ok(Value::Array(out))
}

/// Kafka's names of the ACL enums (AclOperation, AclPermissionType,
/// ResourceType, PatternType), by code.
fn acl_name(kind: &str, code: i8) -> &'static str {
    match (kind, code) {
        ("op", 2) => "ALL",
        ("op", 3) => "READ",
        ("op", 4) => "WRITE",
        ("op", 5) => "CREATE",
        ("op", 6) => "DELETE",
        ("op", 7) => "ALTER",
        ("op", 8) => "DESCRIBE",
        ("op", 9) => "CLUSTER_ACTION",
        ("op", 10) => "DESCRIBE_CONFIGS",
        ("op", 11) => "ALTER_CONFIGS",
        ("op", 12) => "IDEMPOTENT_WRITE",
        ("op", 13) => "CREATE_TOKENS",
        ("op", 14) => "DESCRIBE_TOKENS",
        ("perm", 2) => "DENY",
        ("perm", 3) => "ALLOW",
        ("res", 2) => "TOPIC",
        ("res", 3) => "GROUP",
        ("res", 4) => "CLUSTER",
        ("res", 5) => "TRANSACTIONAL_ID",
        ("res", 6) => "DELEGATION_TOKEN",
        ("res", 7) => "USER",
        ("pat", 3) => "LITERAL",
        ("pat", 4) => "PREFIXED",
        _ => "UNKNOWN",
    }
}

async fn acls(State(sh): State<Arc<Shared>>, Extension(caller): Extension<Caller>) -> ApiResult {
    let b = broker_of(&sh)?;
    let mut req = DescribeAclsRequest::default();
    // ANY of everything: every binding the caller may describe.
    req.resource_type_filter = 1;
    req.pattern_type_filter = 1;
    req.operation = 1;
    req.permission_type = 1;
    let r: DescribeAclsResponse = call(&b, &caller, ApiKey::DescribeAcls, 3, &req).await?;
    // SECURITY_DISABLED: no authorizer, so no ACLs.
    if r.error_code == 54 {
        return ok(json!([]));
    }
    if r.error_code != 0 {
        return Err(kafka_error(r.error_code, r.error_message.as_ref()));
    }
    let out: Vec<Value> = r
        .resources
        .iter()
        .flat_map(|res| {
            res.acls.iter().map(move |a| {
                json!({
                    "resource_type": acl_name("res", res.resource_type),
                    "resource_name": res.resource_name.to_string(),
                    "pattern_type": acl_name("pat", res.pattern_type),
                    "principal": a.principal.to_string(),
                    "host": a.host.to_string(),
                    "operation": acl_name("op", a.operation),
                    "permission": acl_name("perm", a.permission_type),
                })
            })
        })
        .collect();
    ok(Value::Array(out))
}

async fn users(State(sh): State<Arc<Shared>>, Extension(caller): Extension<Caller>) -> ApiResult {
    let b = broker_of(&sh)?;
    let req = DescribeUserScramCredentialsRequest::default();
    let r: DescribeUserScramCredentialsResponse =
        call(&b, &caller, ApiKey::DescribeUserScramCredentials, 0, &req).await?;
    if r.error_code != 0 {
        return Err(kafka_error(r.error_code, r.error_message.as_ref()));
    }
    let scram: Vec<Value> = r
        .results
        .iter()
        .filter(|u| u.error_code == 0)
        .map(|u| {
            let mechanisms: Vec<Value> = u
                .credential_infos
                .iter()
                .map(|c| {
                    let name = es_auth::scram::ScramMechanism::from_type_id(c.mechanism)
                        .map_or("UNKNOWN", |m| m.name());
                    json!({"mechanism": name, "iterations": c.iterations})
                })
                .collect();
            json!({"user": u.user.to_string(), "mechanisms": mechanisms})
        })
        .collect();
    // API keys have no Kafka request to describe them (es-broker keys
    // list reads them): shown to super users only, ids and principals,
    // never hashes.
    let api_keys: Vec<Value> = if caller.may_write {
        b.security()
            .credentials
            .api_keys()
            .list()
            .map(|k| {
                json!({
                    "key": k.id,
                    "principal": k.principal.to_string(),
                    "created_ms": k.created_ms,
                    "description": k.description,
                    "revoked": k.revoked,
                })
            })
            .collect()
    } else {
        Vec::new()
    };
    ok(json!({
        "scram": scram,
        "api_keys": api_keys,
        "super_users": b.security().config.super_users,
    }))
}
