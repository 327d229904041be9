//! LeaveGroup (v0-5): one member (v0-2) or a batch of members by member id
//! or `group.instance.id` (v3+), with per-member outcomes.

use bytes::Bytes;
use es_auth::acl::{AclOperation, ResourceType};
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};

use super::{group_id, s};
use crate::errors::{group_result_code, NONE};
use crate::groups::classic::LeaveMember;
use crate::groups::error::GroupError;
use crate::handlers::{Ctx, RequestError};

pub fn leave_group(ctx: &Ctx, req: LeaveGroupRequest) -> Result<Option<Bytes>, RequestError> {
    let v = ctx.version;
    let gid = group_id(&req.group_id);
    let members: Vec<LeaveMember> = if v >= 3 {
        req.members
            .iter()
            .map(|m| LeaveMember {
                member_id: m.member_id.to_string(),
                group_instance_id: m.group_instance_id.as_ref().map(|i| i.to_string()),
            })
            .collect()
    } else {
        vec![LeaveMember {
            member_id: req.member_id.to_string(),
            group_instance_id: None,
        }]
    };
    let result = if !ctx.allowed(AclOperation::Read, ResourceType::Group, &gid) {
        Err(GroupError::GroupAuthorizationFailed)
    } else if gid.is_empty() {
        Err(GroupError::InvalidGroupId)
    } else if let Err(n) = ctx.broker.owns_group(&gid) {
        Err(n.into())
    } else {
        ctx.broker.groups().leave(&gid, &members)
    };
    let mut r = LeaveGroupResponse::default();
    match result {
        Err(e) => r.error_code = e.code(),
        Ok(codes) => {
            if v >= 3 {
                r.members = members
                    .iter()
                    .zip(codes)
                    .map(|(m, c)| {
                        let mut x = MemberResponse::default();
                        x.member_id = s(m.member_id.clone());
                        x.group_instance_id = m.group_instance_id.clone().map(s);
                        x.error_code = group_result_code(&c);
                        x
                    })
                    .collect();
            } else {
                r.error_code = codes
                    .iter()
                    .map(group_result_code)
                    .find(|c| *c != NONE)
                    .unwrap_or(NONE);
            }
        }
    }
    ctx.respond(&r)
}
