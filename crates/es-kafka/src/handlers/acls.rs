//! ACL APIs (DescribeAcls, CreateAcls, DeleteAcls, v1-3) as Kafka 4.4
//! answers them with no authorizer configured, which is what es is until
//! ACLs arrive with SASL (see docs/protocol.md):
//!
//! - DescribeAcls: SECURITY_DISABLED at the top, "No Authorizer is
//!   configured on the broker", no resources;
//! - CreateAcls: one SECURITY_DISABLED result per creation, "No Authorizer
//!   is configured.";
//! - DeleteAcls: one SECURITY_DISABLED result per filter, same message, no
//!   matching ACLs.
//!
//! Kafka validates these requests while parsing them and closes the
//! connection when a filter or creation carries an UNKNOWN (0) resource
//! type, pattern type, operation or permission type; so do we.

use bytes::Bytes;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::DeleteAclsFilterResult;
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::{Ctx, RequestError};
use crate::errors::{code, ResponseError};

/// Kafka's DescribeAcls message without an authorizer.
pub const NO_AUTHORIZER_DESCRIBE: &str = "No Authorizer is configured on the broker";
/// Kafka's CreateAcls / DeleteAcls message without an authorizer.
pub const NO_AUTHORIZER: &str = "No Authorizer is configured.";

/// The UNKNOWN code of ResourceType, PatternType, AclOperation and
/// AclPermissionType.
const UNKNOWN: i8 = 0;

fn any_unknown(codes: [i8; 4]) -> bool {
    codes.contains(&UNKNOWN)
}

pub fn describe_acls(ctx: &Ctx, req: DescribeAclsRequest) -> Result<Option<Bytes>, RequestError> {
    if any_unknown([
        req.resource_type_filter,
        req.pattern_type_filter,
        req.operation,
        req.permission_type,
    ]) {
        return Err(RequestError::InvalidRequest(
            "DescribeAclsRequest contains UNKNOWN elements".into(),
        ));
    }
    let mut r = DescribeAclsResponse::default();
    r.error_code = code(ResponseError::SecurityDisabled);
    r.error_message = Some(StrBytes::from_static_str(NO_AUTHORIZER_DESCRIBE));
    ctx.respond(&r)
}

pub fn create_acls(ctx: &Ctx, req: CreateAclsRequest) -> Result<Option<Bytes>, RequestError> {
    if req.creations.iter().any(|c| {
        any_unknown([
            c.resource_type,
            c.resource_pattern_type,
            c.operation,
            c.permission_type,
        ])
    }) {
        return Err(RequestError::InvalidRequest(
            "CreatableAcls contain unknown elements".into(),
        ));
    }
    let mut r = CreateAclsResponse::default();
    r.results = req
        .creations
        .iter()
        .map(|_| {
            let mut res = AclCreationResult::default();
            res.error_code = code(ResponseError::SecurityDisabled);
            res.error_message = Some(StrBytes::from_static_str(NO_AUTHORIZER));
            res
        })
        .collect();
    ctx.respond(&r)
}

pub fn delete_acls(ctx: &Ctx, req: DeleteAclsRequest) -> Result<Option<Bytes>, RequestError> {
    if req.filters.iter().any(|f| {
        any_unknown([
            f.resource_type_filter,
            f.pattern_type_filter,
            f.operation,
            f.permission_type,
        ])
    }) {
        return Err(RequestError::InvalidRequest(
            "Filters contain UNKNOWN elements".into(),
        ));
    }
    let mut r = DeleteAclsResponse::default();
    r.filter_results = req
        .filters
        .iter()
        .map(|_| {
            let mut res = DeleteAclsFilterResult::default();
            res.error_code = code(ResponseError::SecurityDisabled);
            res.error_message = Some(StrBytes::from_static_str(NO_AUTHORIZER));
            res
        })
        .collect();
    ctx.respond(&r)
}
