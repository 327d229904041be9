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

mod groups;
mod mirrors;
mod overview;
mod records;
mod security;
mod topics;
mod transactions;

type ApiResult = Result<Response, Response>;

pub fn router() -> Router<Arc<Shared>> {
    Router::new()
        .route("/overview", get(overview::overview))
        .route("/throughput", get(overview::throughput))
        .route("/topics", get(topics::topics).post(topics::create_topic))
        .route(
            "/topics/{name}",
            get(topics::topic).delete(topics::delete_topic),
        )
        .route("/topics/{name}/configs", put(topics::alter_configs))
        .route(
            "/topics/{name}/partitions/{p}/records",
            get(records::records),
        )
        .route("/groups", get(groups::groups))
        .route("/groups/{id}", get(groups::group))
        .route("/groups/{id}/reset-offsets", post(groups::reset_offsets))
        .route("/producers", get(transactions::producers))
        .route("/transactions", get(transactions::transactions))
        .route("/acls", get(security::acls))
        .route("/users", get(security::users))
        .route("/mirrors", get(mirrors::mirrors))
        .route("/schemas", get(records::schemas))
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
