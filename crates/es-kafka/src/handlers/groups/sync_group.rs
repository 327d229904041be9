//! SyncGroup (v0-5): the leader's assignment handed to the coordinator, each
//! member's SyncGroup parked until its assignment is known.

use bytes::Bytes;
use es_auth::acl::{AclOperation, ResourceType};
use kafka_protocol::messages::{SyncGroupRequest, SyncGroupResponse};

use super::{group_id, s};
use crate::errors::group_code;
use crate::groups::classic::{self, SyncRequest};
use crate::groups::error::GroupError;
use crate::handlers::{Ctx, RequestError};
use crate::turn::Turn;

pub async fn sync_group(
    ctx: &Ctx,
    req: SyncGroupRequest,
    mut turn: Turn,
) -> Result<Option<Bytes>, RequestError> {
    let v = ctx.version;
    let coord = ctx.broker.groups();
    let gid = group_id(&req.group_id);
    let precheck = if !ctx.allowed(AclOperation::Read, ResourceType::Group, &gid) {
        Some(GroupError::GroupAuthorizationFailed)
    } else if v >= 5 && (req.protocol_type.is_none() || req.protocol_name.is_none()) {
        // Mandatory from v5 on.
        Some(GroupError::InconsistentGroupProtocol)
    } else if gid.is_empty() {
        Some(GroupError::InvalidGroupId)
    } else {
        ctx.broker.owns_group(&gid).err().map(GroupError::from)
    };
    turn.wait().await;
    let outcome = match precheck {
        Some(e) => {
            turn.finish();
            classic::SyncResponse::error(e)
        }
        None => {
            let sr = SyncRequest {
                member_id: req.member_id.to_string(),
                group_instance_id: if v >= 3 {
                    req.group_instance_id.as_ref().map(|i| i.to_string())
                } else {
                    None
                },
                generation_id: req.generation_id,
                protocol_type: req.protocol_type.as_ref().map(|p| p.to_string()),
                protocol_name: req.protocol_name.as_ref().map(|p| p.to_string()),
                assignments: req
                    .assignments
                    .iter()
                    .map(|a| (a.member_id.to_string(), a.assignment.clone()))
                    .collect(),
            };
            let rx = coord.sync(&gid, sr);
            turn.finish();
            rx.await.unwrap_or_else(|_| {
                classic::SyncResponse::error(GroupError::CoordinatorNotAvailable)
            })
        }
    };
    let mut r = SyncGroupResponse::default();
    r.error_code = group_code(&outcome.error);
    if v >= 5 {
        r.protocol_type = outcome.protocol_type.map(s);
        r.protocol_name = outcome.protocol_name.map(s);
    }
    r.assignment = outcome.assignment;
    ctx.respond(&r)
}
