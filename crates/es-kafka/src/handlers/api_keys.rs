//! es's own request for API keys through a running broker (`es-broker keys
//! --bootstrap`): Kafka has no API for them, so this one is es's, framed as a
//! Kafka request on the same listeners, after the same authentication.
//!
//! Request: the usual size prefix, then api key [`ES_API_KEYS`] (outside
//! Kafka's range, so no Kafka client ever sends it), version 0, a correlation
//! id, and a JSON [`KeysRequest`] (at most [`KEYS_REQUEST_BYTES_MAX`]
//! bytes). Response: size prefix, correlation id, JSON [`KeysResponse`].
//! Creating and revoking need ALTER on the cluster, listing DESCRIBE (as
//! Kafka's SCRAM credential APIs); without an authorizer, as in Kafka,
//! anyone on the listener may. A key arrives hashed: the secret never leaves
//! the command that made it. Changes go through the metadata, so every node
//! learns them.

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use es_auth::acl::{AclOperation, ResourceType, CLUSTER_NAME};
use es_auth::api_keys::ApiKey;
use es_meta::records::{MetaRequest, MetaResponse};
use serde::{Deserialize, Serialize};

use super::Client;
use crate::broker::Broker;
use crate::errors::{code, ResponseError};

/// The api key of es's API-keys request.
pub const ES_API_KEYS: i16 = 32_000;
/// Largest JSON body accepted.
pub const KEYS_REQUEST_BYTES_MAX: usize = 64 * 1024;

/// What the command asks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum KeysRequest {
    /// Adds a key (hashed by the command).
    Create { key: ApiKey },
    /// Revokes key `id`.
    Revoke { id: String },
    /// Lists every key (no hashes).
    List,
}

/// A key as listed: never its hash.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListedKey {
    pub id: String,
    pub principal: String,
    pub created_ms: i64,
    pub revoked: bool,
    pub description: Option<String>,
}

/// The answer: Kafka's error code and message, and the keys for a list.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeysResponse {
    pub error_code: i16,
    pub error_message: Option<String>,
    pub keys: Vec<ListedKey>,
}

impl KeysResponse {
    fn error(e: ResponseError, message: impl Into<String>) -> Self {
        KeysResponse {
            error_code: code(e),
            error_message: Some(message.into()),
            keys: Vec::new(),
        }
    }
}

/// Answers one request frame (the body after the size prefix); the response
/// frame with its size prefix.
pub async fn handle(broker: &Arc<Broker>, client: &Client, frame: &Bytes) -> Bytes {
    let answer = answer(broker, client, frame).await;
    respond_json(frame, &answer)
}

/// The response frame of es's own requests: size prefix, the request's
/// correlation id, the JSON answer.
pub(super) fn respond_json<T: Serialize>(frame: &Bytes, answer: &T) -> Bytes {
    let correlation_id = frame
        .get(4..8)
        .map_or(0, |b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]));
    let json = serde_json::to_vec(answer).unwrap_or_default();
    let mut out = BytesMut::with_capacity(8 + json.len());
    out.put_i32(i32::try_from(4 + json.len()).unwrap_or(i32::MAX));
    out.put_i32(correlation_id);
    out.put_slice(&json);
    out.freeze()
}

/// The JSON body of one of es's own requests (version 0, at most
/// `bytes_max` bytes), or the error to answer.
pub(super) fn json_body(frame: &Bytes, bytes_max: usize) -> Result<&[u8], (ResponseError, String)> {
    let version = frame.get(2..4).map(|b| i16::from_be_bytes([b[0], b[1]]));
    if version != Some(0) {
        return Err((ResponseError::UnsupportedVersion, "version 0 only".into()));
    }
    let body = frame.get(8..).unwrap_or_default();
    if body.len() > bytes_max {
        return Err((
            ResponseError::InvalidRequest,
            format!("a request of {} bytes, more than {bytes_max}", body.len()),
        ));
    }
    Ok(body)
}

async fn answer(broker: &Arc<Broker>, client: &Client, frame: &Bytes) -> KeysResponse {
    let body = match json_body(frame, KEYS_REQUEST_BYTES_MAX) {
        Ok(b) => b,
        Err((e, m)) => return KeysResponse::error(e, m),
    };
    let req: KeysRequest = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => return KeysResponse::error(ResponseError::InvalidRequest, e.to_string()),
    };
    let op = match req {
        KeysRequest::List => AclOperation::Describe,
        _ => AclOperation::Alter,
    };
    if !allowed(broker, client, op) {
        return KeysResponse::error(
            ResponseError::ClusterAuthorizationFailed,
            super::authz::CLUSTER_AUTHORIZATION_FAILED,
        );
    }
    let image_key = |id: &str| broker.image().and_then(|i| i.api_keys.get(id).cloned());
    let put = match req {
        KeysRequest::List => {
            let keys = broker
                .image()
                .map(|i| i.api_keys.values().map(listed).collect())
                .unwrap_or_default();
            return KeysResponse {
                keys,
                ..KeysResponse::default()
            };
        }
        KeysRequest::Create { key } => {
            if key.revoked {
                return KeysResponse::error(ResponseError::InvalidRequest, "a new key is live");
            }
            if image_key(&key.id).is_some() {
                return KeysResponse::error(
                    ResponseError::InvalidRequest,
                    format!("a key {} exists (or was revoked)", key.id),
                );
            }
            key
        }
        KeysRequest::Revoke { id } => match image_key(&id) {
            Some(mut k) if !k.revoked => {
                k.revoked = true;
                k.hash.clear();
                k
            }
            _ => {
                return KeysResponse::error(
                    ResponseError::ResourceNotFound,
                    format!("no active key {id}"),
                )
            }
        },
    };
    let id = put.id.clone();
    match broker
        .propose(MetaRequest::PutApiKeys { keys: vec![put] })
        .await
    {
        Ok(MetaResponse::Items { results }) => match results.into_iter().next() {
            Some(r) if r.error_code == 0 => {
                let keys = image_key(&id).map(|k| vec![listed(&k)]).unwrap_or_default();
                KeysResponse {
                    keys,
                    ..KeysResponse::default()
                }
            }
            Some(r) => KeysResponse {
                error_code: r.error_code,
                error_message: r.message,
                keys: Vec::new(),
            },
            None => KeysResponse::error(ResponseError::UnknownServerError, "no answer"),
        },
        Ok(other) => KeysResponse::error(
            ResponseError::UnknownServerError,
            format!("unexpected metadata answer {other:?}"),
        ),
        Err(e) => KeysResponse {
            error_code: e.code,
            error_message: Some(e.message),
            keys: Vec::new(),
        },
    }
}

fn listed(k: &ApiKey) -> ListedKey {
    ListedKey {
        id: k.id.clone(),
        principal: k.principal.to_string(),
        created_ms: k.created_ms,
        revoked: k.revoked,
        description: k.description.clone(),
    }
}

/// Whether the client may perform `op` on the cluster.
fn allowed(broker: &Broker, client: &Client, op: AclOperation) -> bool {
    allowed_on_cluster(broker, client, op, "ApiKeys (es)")
}

/// Whether the client of one of es's own requests (`api`) may perform `op`
/// on the cluster.
pub(super) fn allowed_on_cluster(
    broker: &Broker,
    client: &Client,
    op: AclOperation,
    api: &'static str,
) -> bool {
    let who = super::authz::Who {
        principal: &client.principal,
        peer: client.peer,
        internal: client.listener.is_none(),
    };
    super::authz::allowed(broker, &who, op, ResourceType::Cluster, CLUSTER_NAME, &api)
}
