//! JoinGroup (v0-9): the request checks Kafka makes before its coordinator
//! (group id, session timeout bounds, then whether this broker coordinates
//! the group), the join parked until the group's
//! join phase completes, and the response fields by version.

use bytes::Bytes;
use es_auth::acl::{AclOperation, ResourceType};
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse};

use super::{client_host, client_id, group_id, s};
use crate::errors::group_code;
use crate::groups::classic::{self, JoinRequest, Protocol};
use crate::groups::error::GroupError;
use crate::handlers::{Ctx, RequestError};
use crate::turn::Turn;

pub async fn join_group(
    ctx: &Ctx,
    req: JoinGroupRequest,
    mut turn: Turn,
) -> Result<Option<Bytes>, RequestError> {
    let v = ctx.version;
    let coord = ctx.broker.groups();
    let cfg = *coord.config();
    let gid = group_id(&req.group_id);
    let member_id = req.member_id.to_string();
    let denied = !ctx.allowed(AclOperation::Read, ResourceType::Group, &gid);
    let precheck = if denied {
        Some(GroupError::GroupAuthorizationFailed)
    } else if gid.is_empty() {
        Some(GroupError::InvalidGroupId)
    } else if req.session_timeout_ms < cfg.min_session_timeout_ms
        || req.session_timeout_ms > cfg.max_session_timeout_ms
    {
        Some(GroupError::InvalidSessionTimeout)
    } else {
        ctx.broker.owns_group(&gid).err().map(GroupError::from)
    };
    turn.wait().await;
    let outcome = match precheck {
        Some(e) => {
            turn.finish();
            // Kafka answers an unauthorized join without a member id.
            classic::JoinResponse::error(e, if denied { "" } else { &member_id })
        }
        None => {
            let jr = JoinRequest {
                member_id: member_id.clone(),
                group_instance_id: if v >= 5 {
                    req.group_instance_id.as_ref().map(|i| i.to_string())
                } else {
                    None
                },
                client_id: client_id(ctx),
                client_host: client_host(ctx),
                session_timeout_ms: req.session_timeout_ms,
                rebalance_timeout_ms: if v >= 1 {
                    req.rebalance_timeout_ms
                } else {
                    req.session_timeout_ms
                },
                protocol_type: req.protocol_type.to_string(),
                protocols: req
                    .protocols
                    .iter()
                    .map(|p| Protocol {
                        name: p.name.to_string(),
                        metadata: p.metadata.clone(),
                    })
                    .collect(),
                requires_known_member_id: v >= 4,
                supports_skip_assignment: v >= 9,
            };
            let rx = coord.join(&gid, jr);
            turn.finish();
            rx.await.unwrap_or_else(|_| {
                classic::JoinResponse::error(GroupError::CoordinatorNotAvailable, &member_id)
            })
        }
    };
    let mut r = JoinGroupResponse::default();
    r.error_code = group_code(&outcome.error);
    r.generation_id = outcome.generation_id;
    if v >= 7 {
        r.protocol_type = outcome.protocol_type.map(s);
        r.protocol_name = outcome.protocol_name.map(s);
    } else {
        // Not nullable before v7: Kafka sends "".
        r.protocol_name = Some(s(outcome.protocol_name.unwrap_or_default()));
    }
    r.leader = s(outcome.leader);
    if v >= 9 {
        r.skip_assignment = outcome.skip_assignment;
    }
    r.member_id = s(outcome.member_id);
    r.members = outcome
        .members
        .into_iter()
        .map(|m| {
            let mut x = JoinGroupResponseMember::default();
            x.member_id = s(m.member_id);
            if v >= 5 {
                x.group_instance_id = m.group_instance_id.map(s);
            }
            x.metadata = m.metadata;
            x
        })
        .collect();
    ctx.respond(&r)
}
