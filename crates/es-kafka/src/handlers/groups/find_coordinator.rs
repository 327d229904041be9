//! FindCoordinator (v0-6): the broker that coordinates a group or a
//! transactional id, placed as Kafka places them (the leader of the key's
//! partition of `__consumer_offsets` or `__transaction_state`, see
//! [`crate::broker::Broker::coordinator_place`]). A lookup first makes sure
//! the placing topic exists, as Kafka creates it there.

use bytes::Bytes;
use es_auth::acl::{AclOperation, ResourceType};
use kafka_protocol::messages::find_coordinator_response::Coordinator as FcCoordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};

use super::s;
use crate::broker::{Broker, CoordinatorPlace};
use crate::errors::{code, ResponseError, NONE};
use crate::handlers::authz::GROUP_AUTHORIZATION_FAILED;
use crate::handlers::{Ctx, RequestError};
use crate::topics::{CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC};

/// Coordinator key types (KIP-98, KIP-932).
const KEY_TYPE_GROUP: i8 = 0;
pub(super) const KEY_TYPE_TRANSACTION: i8 = 1;

/// One key's answer: (error, node, host, port, Kafka's message for the
/// error).
type Answer = (i16, i32, String, i32, &'static str);

fn not_available() -> Answer {
    (
        code(ResponseError::CoordinatorNotAvailable),
        -1,
        String::new(),
        -1,
        "The coordinator is not available.",
    )
}

/// Where `key` is coordinated, placed over `topic` (which exists).
fn place(b: &Broker, topic: &str, key: &str) -> Answer {
    let endpoint = match b.coordinator_place(topic, key) {
        Some(CoordinatorPlace::Here) => b.own_endpoint(),
        Some(CoordinatorPlace::Elsewhere(e)) => e,
        // No leader now, or the topic went away since it was made sure of.
        Some(CoordinatorPlace::Unavailable) | None => return not_available(),
    };
    (NONE, endpoint.id, endpoint.host, endpoint.port, "NONE")
}

/// FindCoordinator. A lookup first makes sure the placing topic exists
/// (`__consumer_offsets` for groups, `__transaction_state` for
/// transactional ids); if that fails (a disk error, a colliding topic name,
/// no quorum leader) the keys answer COORDINATOR_NOT_AVAILABLE, Kafka's
/// answer while the topic is not there.
pub async fn find_coordinator(
    ctx: &Ctx,
    req: FindCoordinatorRequest,
) -> Result<Option<Bytes>, RequestError> {
    let v = ctx.version;
    let b = &ctx.broker;
    let key_type = if v >= 1 { req.key_type } else { KEY_TYPE_GROUP };
    let keys: Vec<String> = if v >= 4 {
        req.coordinator_keys.iter().map(|k| k.to_string()).collect()
    } else {
        vec![req.key.to_string()]
    };
    let topic = match key_type {
        KEY_TYPE_GROUP => Some(CONSUMER_OFFSETS_TOPIC),
        KEY_TYPE_TRANSACTION => Some(TRANSACTION_STATE_TOPIC),
        _ => None,
    };
    let topic_ready = match topic {
        Some(_) if keys.is_empty() => false,
        Some(t) => {
            let made = if key_type == KEY_TYPE_GROUP {
                b.offsets_topic().await
            } else {
                b.transaction_state_topic().await
            };
            match made {
                Ok(_) => true,
                Err(e) => {
                    tracing::warn!(topic = t, code = e.code, message = %e.message, "cannot create the coordinators' topic; its lookups answer COORDINATOR_NOT_AVAILABLE");
                    false
                }
            }
        }
        None => false,
    };
    // DESCRIBE on the group or transactional id, as Kafka checks it.
    let denied = |key: &str| -> Option<Answer> {
        let (rt, error, message) = match key_type {
            KEY_TYPE_GROUP => (
                ResourceType::Group,
                ResponseError::GroupAuthorizationFailed,
                GROUP_AUTHORIZATION_FAILED,
            ),
            KEY_TYPE_TRANSACTION => (
                ResourceType::TransactionalId,
                ResponseError::TransactionalIdAuthorizationFailed,
                "Transactional Id authorization failed.",
            ),
            _ => return None,
        };
        (!ctx.allowed(AclOperation::Describe, rt, key))
            .then(|| (code(error), -1, String::new(), -1, message))
    };
    let answer = |key: &str| -> Answer {
        if let Some(a) = denied(key) {
            return a;
        }
        match topic {
            Some(t) if topic_ready => place(b, t, key),
            Some(_) => not_available(),
            // Share coordinators (2) and anything else: not here.
            None => (
                code(ResponseError::InvalidRequest),
                -1,
                String::new(),
                -1,
                "The request is invalid.",
            ),
        }
    };
    let mut r = FindCoordinatorResponse::default();
    if v >= 4 {
        r.coordinators = keys
            .iter()
            .map(|k| {
                let (error, node, host, port, message) = answer(k);
                let mut c = FcCoordinator::default();
                c.key = s(k.as_str());
                c.node_id = BrokerId(node);
                c.host = s(host);
                c.port = port;
                c.error_code = error;
                c.error_message = (error != NONE).then(|| s(message));
                c
            })
            .collect();
    } else {
        let (error, node, host, port, message) = answer(keys.first().map_or("", String::as_str));
        r.error_code = error;
        r.node_id = BrokerId(node);
        r.host = s(host);
        r.port = port;
        if v >= 1 {
            r.error_message = Some(s(message));
        }
    }
    ctx.respond(&r)
}
