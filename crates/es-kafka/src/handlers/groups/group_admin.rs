//! The group admin APIs: DescribeGroups (v0-6), ListGroups (v0-5) with its
//! state and type filters, and DeleteGroups (v0-2). A group another broker
//! coordinates answers NOT_COORDINATOR in its own entry (DescribeGroups,
//! DeleteGroups); ListGroups lists the groups this broker's coordinator
//! holds.

use std::collections::HashSet;

use bytes::Bytes;
use es_auth::acl::{AclOperation, ResourceType};
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{
    DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse,
    GroupId, ListGroupsRequest, ListGroupsResponse,
};

use super::{group_id, s, GROUP_OPERATIONS_ALL};
use crate::errors::{code, group_result_code, ResponseError};
use crate::groups::coordinator::ClassicDescribe;
use crate::handlers::{Ctx, RequestError, AUTHORIZED_OPERATIONS_OMITTED};

pub fn describe_groups(
    ctx: &Ctx,
    req: DescribeGroupsRequest,
) -> Result<Option<Bytes>, RequestError> {
    let v = ctx.version;
    let coord = ctx.broker.groups();
    let include_ops = v >= 3 && req.include_authorized_operations;
    let mut r = DescribeGroupsResponse::default();
    for g in &req.groups {
        let gid = group_id(g);
        let mut d = DescribedGroup::default();
        d.group_id = g.clone();
        let not_found = |d: &mut DescribedGroup, message: String| {
            d.group_state = s("Dead");
            if v >= 6 {
                d.error_code = code(ResponseError::GroupIdNotFound);
                d.error_message = Some(s(message));
            }
        };
        if !ctx.allowed(AclOperation::Describe, ResourceType::Group, &gid) {
            d.error_code = code(ResponseError::GroupAuthorizationFailed);
            r.groups.push(d);
            continue;
        }
        if let Err(n) = ctx.broker.owns_group(&gid) {
            // Kafka's error entry: the group id and the code, nothing else.
            d.error_code = n.code();
            r.groups.push(d);
            continue;
        }
        match coord.describe(&gid) {
            ClassicDescribe::NotFound => not_found(&mut d, format!("Group {gid} not found.")),
            ClassicDescribe::NotClassic => {
                not_found(&mut d, format!("Group {gid} is not a classic group."))
            }
            ClassicDescribe::Found(x) => {
                d.group_state = s(x.state);
                d.protocol_type = s(x.protocol_type);
                d.protocol_data = s(x.protocol_data);
                d.members = x
                    .members
                    .into_iter()
                    .map(|m| {
                        let mut dm = DescribedGroupMember::default();
                        dm.member_id = s(m.member_id);
                        if v >= 4 {
                            dm.group_instance_id = m.group_instance_id.map(s);
                        }
                        dm.client_id = s(m.client_id);
                        dm.client_host = s(m.client_host);
                        dm.member_metadata = m.metadata;
                        dm.member_assignment = m.assignment;
                        dm
                    })
                    .collect();
                if v >= 3 {
                    d.authorized_operations = if include_ops {
                        ctx.authorized_operations(GROUP_OPERATIONS_ALL, ResourceType::Group, &gid)
                    } else {
                        AUTHORIZED_OPERATIONS_OMITTED
                    };
                }
            }
        }
        r.groups.push(d);
    }
    ctx.respond(&r)
}

pub fn list_groups(ctx: &Ctx, req: ListGroupsRequest) -> Result<Option<Bytes>, RequestError> {
    let v = ctx.version;
    let states: Vec<String> = if v >= 4 {
        req.states_filter.iter().map(|x| x.to_string()).collect()
    } else {
        Vec::new()
    };
    let types: Vec<String> = if v >= 5 {
        req.types_filter.iter().map(|x| x.to_string()).collect()
    } else {
        Vec::new()
    };
    let mut r = ListGroupsResponse::default();
    // Every group with DESCRIBE on the cluster, else those the client may
    // describe.
    let all = ctx.allowed_on_cluster(AclOperation::Describe);
    r.groups = ctx
        .broker
        .groups()
        .list(&states, &types)
        .into_iter()
        .filter(|l| all || ctx.allowed(AclOperation::Describe, ResourceType::Group, &l.group_id))
        .map(|l| {
            let mut g = ListedGroup::default();
            g.group_id = GroupId(s(l.group_id));
            g.protocol_type = s(l.protocol_type);
            if v >= 4 {
                g.group_state = s(l.state);
            }
            if v >= 5 {
                g.group_type = s(l.group_type);
            }
            g
        })
        .collect();
    ctx.respond(&r)
}

pub async fn delete_groups(
    ctx: &Ctx,
    req: DeleteGroupsRequest,
) -> Result<Option<Bytes>, RequestError> {
    let coord = ctx.broker.groups();
    let mut seen = HashSet::new();
    let mut r = DeleteGroupsResponse::default();
    for g in &req.groups_names {
        if !seen.insert(g.0.clone()) {
            continue;
        }
        let gid = group_id(g);
        let mut x = DeletableGroupResult::default();
        x.group_id = g.clone();
        x.error_code = match ctx.broker.owns_group(&gid) {
            _ if !ctx.allowed(AclOperation::Delete, ResourceType::Group, &gid) => {
                code(ResponseError::GroupAuthorizationFailed)
            }
            Err(n) => n.code(),
            Ok(()) => match super::share_offsets::delete_share_state(ctx, &gid).await? {
                Err(c) => c,
                Ok(()) => group_result_code(&coord.delete(&gid).await),
            },
        };
        r.results.push(x);
    }
    ctx.respond(&r)
}
