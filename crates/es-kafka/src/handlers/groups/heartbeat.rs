//! Heartbeat (v0-4) of a classic group member.

use bytes::Bytes;
use es_auth::acl::{AclOperation, ResourceType};
use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};

use super::group_id;
use crate::errors::group_result_code;
use crate::groups::error::GroupError;
use crate::handlers::{Ctx, RequestError};

pub fn heartbeat(ctx: &Ctx, req: HeartbeatRequest) -> Result<Option<Bytes>, RequestError> {
    let gid = group_id(&req.group_id);
    let outcome = if !ctx.allowed(AclOperation::Read, ResourceType::Group, &gid) {
        Err(GroupError::GroupAuthorizationFailed)
    } else if gid.is_empty() {
        Err(GroupError::InvalidGroupId)
    } else if let Err(n) = ctx.broker.owns_group(&gid) {
        Err(n.into())
    } else {
        let instance = if ctx.version >= 3 {
            req.group_instance_id.as_ref().map(|i| i.to_string())
        } else {
            None
        };
        ctx.broker.groups().heartbeat(
            &gid,
            req.member_id.as_str(),
            instance.as_deref(),
            req.generation_id,
        )
    };
    let mut r = HeartbeatResponse::default();
    r.error_code = group_result_code(&outcome);
    ctx.respond(&r)
}
