//! ShareAcknowledge v1-2 (docs/share-groups-design.md §2.4, §2.6): Kafka
//! 4.4's checks in its order (a null GroupId, READ on the group, the member
//! id), the session step (epoch 0 is INVALID_SHARE_SESSION_EPOCH, -1 closes
//! and releases, any other must be the session's and advances it), then
//! the acknowledgements, validated and applied per partition, each answered
//! after its fsync. v2 adds Renew (with IsRenewAck) and the response's
//! AcquisitionLockTimeoutMs (`codec::share_wire::ShareAcknowledgeResponseV2`).

use bytes::Bytes;
use kafka_protocol::messages::share_acknowledge_response::{
    LeaderIdAndEpoch, NodeEndpoint, PartitionData, ShareAcknowledgeTopicResponse,
};
use kafka_protocol::messages::{BrokerId, ShareAcknowledgeRequest, ShareAcknowledgeResponse};
use kafka_protocol::protocol::StrBytes;

use super::{
    acknowledge_parts, by_topic, check_request, lock_timeout_ms, release, share_config, AckPart,
    TopLevel,
};
use crate::codec::share_wire::{ShareAcknowledgeResponseV2, ShareAcknowledgeV2Extras};
use crate::handlers::route::LeaderEndpoints;
use crate::handlers::{Ctx, RequestError};
use crate::shares::partition::AckBatch;
use crate::shares::sessions::{AckContext, SessionKey, TopicPartition};

/// ShareAcknowledge, in Kafka 4.4's order.
pub async fn share_acknowledge(
    ctx: &Ctx,
    req: ShareAcknowledgeRequest,
    x: ShareAcknowledgeV2Extras,
) -> Result<Option<Bytes>, RequestError> {
    let (group, member) = match check_request(
        ctx,
        req.group_id.as_ref().map(|g| g.0.as_str()),
        req.member_id.as_deref(),
    ) {
        Ok(v) => v,
        Err(t) => return respond(ctx, top(t), 0),
    };
    let config = share_config(
        &ctx.broker.group_configs(&group),
        &ctx.broker.config().share,
    );
    let lock_ms = lock_timeout_ms(&config);
    let skey = SessionKey::new(group.as_str(), member.as_str());
    let session = ctx
        .broker
        .shares()
        .with_sessions(|c| c.share_acknowledge(&skey, req.share_session_epoch));
    let session = match session {
        Ok(s) => s,
        Err(e) => {
            let t = TopLevel {
                code: e.code(),
                message: Some(e.message().to_string()),
            };
            // Kafka 4.4 sends no lock duration with a top-level refusal.
            return respond(ctx, top(t), 0);
        }
    };
    let mut parts: Vec<AckPart> = Vec::new();
    for t in &req.topics {
        for p in &t.partitions {
            let tp = TopicPartition {
                topic_id: t.topic_id,
                partition: p.partition_index,
            };
            let batches = p
                .acknowledgement_batches
                .iter()
                .map(|b| AckBatch {
                    first: b.first_offset,
                    last: b.last_offset,
                    types: b.acknowledge_types.clone(),
                })
                .collect();
            // A partition named twice: the later entry wins (Kafka's map).
            match parts.iter_mut().find(|a| a.tp == tp) {
                Some(a) => a.batches = batches,
                None => parts.push(AckPart { tp, batches }),
            }
        }
    }
    let mut leaders = LeaderEndpoints::default();
    let answers = acknowledge_parts(
        ctx,
        &group,
        &member,
        parts,
        x.is_renew_ack,
        &config,
        &mut leaders,
    )
    .await?;
    if let AckContext::Closed(released) = session {
        release(ctx, released).await?;
    }
    let mut r = ShareAcknowledgeResponse::default();
    r.responses = by_topic(answers)
        .into_iter()
        .map(|(id, ps)| {
            let mut t = ShareAcknowledgeTopicResponse::default();
            t.topic_id = id;
            t.partitions = ps
                .into_iter()
                .map(|(partition, a)| {
                    let mut p = PartitionData::default();
                    p.partition_index = partition;
                    p.error_code = a.code;
                    p.error_message = a.message.map(StrBytes::from_string);
                    if let Some((id, epoch)) = a.leader {
                        let mut l = LeaderIdAndEpoch::default();
                        l.leader_id = id;
                        l.leader_epoch = epoch;
                        p.current_leader = l;
                    }
                    p
                })
                .collect();
            t
        })
        .collect();
    r.node_endpoints = leaders
        .into_endpoints()
        .map(|e| {
            let mut n = NodeEndpoint::default();
            n.node_id = BrokerId(e.id);
            n.host = StrBytes::from_string(e.host);
            n.port = e.port;
            n.rack = e.rack.map(StrBytes::from_string);
            n
        })
        .collect();
    respond(ctx, r, lock_ms)
}

fn top(t: TopLevel) -> ShareAcknowledgeResponse {
    let mut r = ShareAcknowledgeResponse::default();
    r.error_code = t.code;
    r.error_message = t.message.map(StrBytes::from_string);
    r
}

/// v1 with the crate; v2 with the lock timeout, by hand.
fn respond(
    ctx: &Ctx,
    r: ShareAcknowledgeResponse,
    lock_ms: i32,
) -> Result<Option<Bytes>, RequestError> {
    if ctx.version >= 2 {
        ctx.respond(&ShareAcknowledgeResponseV2 {
            response: r,
            acquisition_lock_timeout_ms: lock_ms,
        })
    } else {
        ctx.respond(&r)
    }
}
