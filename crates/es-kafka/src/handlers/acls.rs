//! ACL APIs (DescribeAcls, CreateAcls, DeleteAcls, v1-3), as Kafka 4.4
//! answers them.
//!
//! Requests are checked while parsing as Kafka checks them (an UNKNOWN (0)
//! resource type, pattern type, operation or permission type closes the
//! connection). Then:
//!
//! - without an authorizer, SECURITY_DISABLED: DescribeAcls at the top with
//!   "No Authorizer is configured on the broker", CreateAcls and DeleteAcls
//!   once per creation or filter with "No Authorizer is configured.";
//! - with one, DescribeAcls needs DESCRIBE on the cluster, CreateAcls and
//!   DeleteAcls ALTER (else CLUSTER_AUTHORIZATION_FAILED, at the top or per
//!   item). Bindings are created and deleted through the metadata log (one
//!   entry per request, checked where it is applied, docs/security.md), so
//!   every node enforces the same ACLs; DescribeAcls reads the applied ones.

use bytes::Bytes;
use es_auth::acl::{AclBinding, AclCreation, AclFilterCodes, AclOperation, FilterApi};
use es_meta::records::MetaRequest;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::authz::CLUSTER_AUTHORIZATION_FAILED;
use super::{Ctx, RequestError};
use crate::errors::{code, ResponseError};

/// Kafka's DescribeAcls message without an authorizer.
pub const NO_AUTHORIZER_DESCRIBE: &str = "No Authorizer is configured on the broker";
/// Kafka's CreateAcls / DeleteAcls message without an authorizer.
pub const NO_AUTHORIZER: &str = "No Authorizer is configured.";

fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

fn opt(v: Option<&StrBytes>) -> Option<String> {
    v.map(|x| x.to_string())
}

pub fn describe_acls(ctx: &Ctx, req: DescribeAclsRequest) -> Result<Option<Bytes>, RequestError> {
    let filter = AclFilterCodes {
        resource_type: req.resource_type_filter,
        resource_name: opt(req.resource_name_filter.as_ref()),
        pattern_type: req.pattern_type_filter,
        principal: opt(req.principal_filter.as_ref()),
        host: opt(req.host_filter.as_ref()),
        operation: req.operation,
        permission_type: req.permission_type,
    }
    .to_filter(ctx.version, FilterApi::DescribeAcls)
    .map_err(RequestError::InvalidRequest)?;
    let mut r = DescribeAclsResponse::default();
    if ctx.broker.security().authorizer().is_none() {
        r.error_code = code(ResponseError::SecurityDisabled);
        r.error_message = Some(StrBytes::from_static_str(NO_AUTHORIZER_DESCRIBE));
        return ctx.respond(&r);
    }
    if !ctx.allowed_on_cluster(AclOperation::Describe) {
        r.error_code = code(ResponseError::ClusterAuthorizationFailed);
        r.error_message = Some(StrBytes::from_static_str(CLUSTER_AUTHORIZATION_FAILED));
        return ctx.respond(&r);
    }
    let image = ctx.broker.image();
    let found: Vec<AclBinding> = image.map(|i| i.acls.describe(&filter)).unwrap_or_default();
    // One resource per pattern, its bindings in stored order.
    for b in found {
        let pos = r.resources.iter().position(|x| {
            x.resource_type == b.resource_type.code()
                && x.resource_name.as_str() == b.resource_name
                && x.pattern_type == b.pattern_type.code()
        });
        let i = match pos {
            Some(i) => i,
            None => {
                let mut res = DescribeAclsResource::default();
                res.resource_type = b.resource_type.code();
                res.resource_name = s(b.resource_name.clone());
                res.pattern_type = b.pattern_type.code();
                r.resources.push(res);
                r.resources.len() - 1
            }
        };
        let mut a = AclDescription::default();
        a.principal = s(b.principal);
        a.host = s(b.host);
        a.operation = b.operation.code();
        a.permission_type = b.permission_type.code();
        r.resources[i].acls.push(a);
    }
    ctx.respond(&r)
}

fn creation_result(code: i16, message: Option<String>) -> AclCreationResult {
    let mut res = AclCreationResult::default();
    res.error_code = code;
    res.error_message = message.map(s);
    res
}

pub async fn create_acls(ctx: &Ctx, req: CreateAclsRequest) -> Result<Option<Bytes>, RequestError> {
    let creations: Vec<AclCreation> = req
        .creations
        .iter()
        .map(|c| AclCreation {
            resource_type: c.resource_type,
            resource_name: c.resource_name.to_string(),
            pattern_type: c.resource_pattern_type,
            principal: c.principal.to_string(),
            host: c.host.to_string(),
            operation: c.operation,
            permission_type: c.permission_type,
        })
        .collect();
    if let Some(reason) = AclCreation::parse_error(ctx.version, &creations) {
        return Err(RequestError::InvalidRequest(reason.into()));
    }
    let mut r = CreateAclsResponse::default();
    let all = |c: i16, m: Option<&str>| -> Vec<AclCreationResult> {
        creations
            .iter()
            .map(|_| creation_result(c, m.map(str::to_string)))
            .collect()
    };
    if ctx.broker.security().authorizer().is_none() {
        r.results = all(code(ResponseError::SecurityDisabled), Some(NO_AUTHORIZER));
        return ctx.respond(&r);
    }
    if !ctx.allowed_on_cluster(AclOperation::Alter) {
        r.results = all(
            code(ResponseError::ClusterAuthorizationFailed),
            Some(CLUSTER_AUTHORIZATION_FAILED),
        );
        return ctx.respond(&r);
    }
    // A creation Kafka cannot even build a binding from fails the request.
    let Some(bindings) = creations
        .iter()
        .map(AclCreation::to_binding)
        .collect::<Option<Vec<_>>>()
    else {
        r.results = all(code(ResponseError::UnknownServerError), None);
        return ctx.respond(&r);
    };
    r.results = match ctx
        .broker
        .propose_acls(MetaRequest::CreateAcls { bindings })
        .await
    {
        Ok(results) => results
            .into_iter()
            .map(|a| creation_result(a.error_code, a.message))
            .collect(),
        Err(e) => all(e.code, Some(&e.message)),
    };
    ctx.respond(&r)
}

pub async fn delete_acls(ctx: &Ctx, req: DeleteAclsRequest) -> Result<Option<Bytes>, RequestError> {
    let filters = req
        .filters
        .iter()
        .map(|f| {
            AclFilterCodes {
                resource_type: f.resource_type_filter,
                resource_name: opt(f.resource_name_filter.as_ref()),
                pattern_type: f.pattern_type_filter,
                principal: opt(f.principal_filter.as_ref()),
                host: opt(f.host_filter.as_ref()),
                operation: f.operation,
                permission_type: f.permission_type,
            }
            .to_filter(ctx.version, FilterApi::DeleteAcls)
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(RequestError::InvalidRequest)?;
    let mut r = DeleteAclsResponse::default();
    let count = filters.len();
    let all = |c: i16, m: Option<&str>| -> Vec<DeleteAclsFilterResult> {
        (0..count)
            .map(|_| {
                let mut res = DeleteAclsFilterResult::default();
                res.error_code = c;
                res.error_message = m.map(|m| s(m.to_string()));
                res
            })
            .collect()
    };
    if ctx.broker.security().authorizer().is_none() {
        r.filter_results = all(code(ResponseError::SecurityDisabled), Some(NO_AUTHORIZER));
        return ctx.respond(&r);
    }
    if !ctx.allowed_on_cluster(AclOperation::Alter) {
        r.filter_results = all(
            code(ResponseError::ClusterAuthorizationFailed),
            Some(CLUSTER_AUTHORIZATION_FAILED),
        );
        return ctx.respond(&r);
    }
    r.filter_results = match ctx
        .broker
        .propose_acls(MetaRequest::DeleteAcls { filters })
        .await
    {
        Ok(results) => results
            .into_iter()
            .map(|a| {
                let mut res = DeleteAclsFilterResult::default();
                res.error_code = a.error_code;
                res.error_message = a.message.map(s);
                res.matching_acls = a
                    .bindings
                    .into_iter()
                    .map(|b| {
                        let mut m = DeleteAclsMatchingAcl::default();
                        m.resource_type = b.resource_type.code();
                        m.resource_name = s(b.resource_name);
                        m.pattern_type = b.pattern_type.code();
                        m.principal = s(b.principal);
                        m.host = s(b.host);
                        m.operation = b.operation.code();
                        m.permission_type = b.permission_type.code();
                        m
                    })
                    .collect();
                res
            })
            .collect(),
        Err(e) => all(e.code, Some(&e.message)),
    };
    ctx.respond(&r)
}
