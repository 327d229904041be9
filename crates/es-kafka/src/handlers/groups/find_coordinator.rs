//! FindCoordinator (v0-6): this broker coordinates every group and every
//! transactional id; a group lookup first makes sure `__consumer_offsets`
//! exists.

use bytes::Bytes;
use kafka_protocol::messages::find_coordinator_response::Coordinator as FcCoordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};

use super::s;
use crate::errors::{code, ResponseError, NONE};
use crate::handlers::{Ctx, RequestError};

/// Coordinator key types (KIP-98, KIP-932).
const KEY_TYPE_GROUP: i8 = 0;
pub(super) const KEY_TYPE_TRANSACTION: i8 = 1;

/// FindCoordinator. A group lookup first makes sure `__consumer_offsets`
/// exists, as Kafka creates its offsets topic there; if that fails (a disk
/// error, a colliding topic name) group keys answer COORDINATOR_NOT_AVAILABLE,
/// Kafka's answer while its offsets topic is not there.
pub async fn find_coordinator(
    ctx: &Ctx,
    req: FindCoordinatorRequest,
) -> Result<Option<Bytes>, RequestError> {
    let v = ctx.version;
    let b = &ctx.broker;
    let key_type = if v >= 1 { req.key_type } else { KEY_TYPE_GROUP };
    let any_key = v < 4 || !req.coordinator_keys.is_empty();
    let offsets_topic_missing = key_type == KEY_TYPE_GROUP
        && any_key
        && match b.offsets_topic().await {
            Ok(_) => false,
            Err(e) => {
                tracing::warn!(code = e.code, message = %e.message, "cannot create __consumer_offsets; group coordinator lookups answer COORDINATOR_NOT_AVAILABLE");
                true
            }
        };
    // (error, node, host, port, Kafka's message for the error)
    let (error, node, host, port, message) = if key_type == KEY_TYPE_GROUP && offsets_topic_missing
    {
        (
            code(ResponseError::CoordinatorNotAvailable),
            -1,
            String::new(),
            -1,
            "The coordinator is not available.",
        )
    } else if key_type == KEY_TYPE_GROUP || key_type == KEY_TYPE_TRANSACTION {
        (
            NONE,
            b.node_id(),
            b.config().advertised_host.clone(),
            b.config().advertised_port,
            "NONE",
        )
    } else {
        // Share coordinators (2) and anything else: not here.
        (
            code(ResponseError::InvalidRequest),
            -1,
            String::new(),
            -1,
            "The request is invalid.",
        )
    };
    let mut r = FindCoordinatorResponse::default();
    if v >= 4 {
        r.coordinators = req
            .coordinator_keys
            .iter()
            .map(|k| {
                let mut c = FcCoordinator::default();
                c.key = k.clone();
                c.node_id = BrokerId(node);
                c.host = s(host.clone());
                c.port = port;
                c.error_code = error;
                c.error_message = (error != NONE).then(|| s(message));
                c
            })
            .collect();
    } else {
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
