//! The end of a consumer's fetch: its session answered, and the client's
//! fetch-byte and request quotas applied as Kafka's `handleFetchRequest`
//! does. The response is sized first (without touching the session); its
//! bytes and the handler's time are recorded; when either quota is over,
//! the bytes are taken back and the client gets an empty, throttled
//! response (no partitions; a full fetch opens no session, an incremental
//! one keeps its own), and its connection is muted. Without any such quota
//! the response is built once, as before.

use std::collections::HashMap;

use super::session::{Context, FetchSessions, PartKey, ReqData};
use super::{group_by_topic, respond};
use crate::codec::fetch_response::{FetchReply, FetchedPartition};
use crate::codec::frame::ResponseFrame;
use crate::errors::{code, ResponseError};
use crate::handlers::{Ctx, RequestError};
use crate::quota::QuotaKind;

/// Answers `answer` in `context`, throttled if the client is over a quota.
pub(super) fn answer(
    ctx: &Ctx,
    sessions: &FetchSessions,
    context: Context,
    by_id: bool,
    requested: &HashMap<PartKey, ReqData>,
    answer: Vec<(PartKey, FetchedPartition)>,
    r: FetchReply,
) -> Result<Option<ResponseFrame>, RequestError> {
    if !ctx.fetch_quotas_enabled() {
        return commit(ctx, sessions, context, by_id, requested, answer, r);
    }
    // Kafka's getResponseSize: the response as it would be sent.
    let preview = match context {
        Context::Incremental { id, epoch } => sessions
            .preview_incremental(id, epoch, answer.clone())
            .unwrap_or_default(),
        _ => answer.clone(),
    };
    let sized = FetchReply {
        topics: group_by_topic(preview),
        ..r.clone()
    };
    let size = respond(ctx, &sized)?.map_or(0, |f| f.len());
    let request = ctx.record_request_time();
    let bandwidth = ctx.record_bytes(QuotaKind::Fetch, size);
    let throttle = request.max(bandwidth);
    if throttle <= 0 {
        return commit(ctx, sessions, context, by_id, requested, answer, r);
    }
    ctx.unrecord_fetch_bytes(size);
    ctx.throttle_connection(throttle);
    let mut out = FetchReply {
        throttle_time_ms: throttle,
        ..FetchReply::default()
    };
    // Kafka's getThrottledResponse: a full or sessionless fetch answers
    // without a session; an incremental one with its own, or
    // INVALID_FETCH_SESSION_EPOCH when another fetch came in between.
    if let Context::Incremental { id, epoch } = context {
        out.session_id = id;
        if !sessions.at_epoch(id, epoch) {
            out.error_code = code(ResponseError::InvalidFetchSessionEpoch);
        }
    }
    respond(ctx, &out)
}

/// The unthrottled answer: the session opened or updated, the partitions
/// it must hold.
fn commit(
    ctx: &Ctx,
    sessions: &FetchSessions,
    context: Context,
    by_id: bool,
    requested: &HashMap<PartKey, ReqData>,
    mut answer: Vec<(PartKey, FetchedPartition)>,
    mut r: FetchReply,
) -> Result<Option<ResponseFrame>, RequestError> {
    match context {
        Context::Full => {
            r.session_id = sessions.open(by_id, requested, &answer);
        }
        Context::Incremental { id, epoch } => {
            r.session_id = id;
            match sessions.answer_incremental(id, epoch, answer) {
                Ok(a) => answer = a,
                Err(e) => {
                    r.error_code = e;
                    answer = Vec::new();
                }
            }
        }
        _ => {}
    }
    r.topics = group_by_topic(answer);
    respond(ctx, &r)
}
