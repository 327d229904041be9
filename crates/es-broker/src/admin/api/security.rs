//! `/api/v1/acls` and `/api/v1/users` (DescribeAcls,
//! DescribeUserScramCredentials, API keys for super users).

use super::*;

/// Kafka's names of the ACL enums (AclOperation, AclPermissionType,
/// ResourceType, PatternType), by code.
fn acl_name(kind: &str, code: i8) -> &'static str {
    match (kind, code) {
        ("op", 2) => "ALL",
        ("op", 3) => "READ",
        ("op", 4) => "WRITE",
        ("op", 5) => "CREATE",
        ("op", 6) => "DELETE",
        ("op", 7) => "ALTER",
        ("op", 8) => "DESCRIBE",
        ("op", 9) => "CLUSTER_ACTION",
        ("op", 10) => "DESCRIBE_CONFIGS",
        ("op", 11) => "ALTER_CONFIGS",
        ("op", 12) => "IDEMPOTENT_WRITE",
        ("op", 13) => "CREATE_TOKENS",
        ("op", 14) => "DESCRIBE_TOKENS",
        ("perm", 2) => "DENY",
        ("perm", 3) => "ALLOW",
        ("res", 2) => "TOPIC",
        ("res", 3) => "GROUP",
        ("res", 4) => "CLUSTER",
        ("res", 5) => "TRANSACTIONAL_ID",
        ("res", 6) => "DELEGATION_TOKEN",
        ("res", 7) => "USER",
        ("pat", 3) => "LITERAL",
        ("pat", 4) => "PREFIXED",
        _ => "UNKNOWN",
    }
}

pub(super) async fn acls(
    State(sh): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
) -> ApiResult {
    let b = broker_of(&sh)?;
    let mut req = DescribeAclsRequest::default();
    // ANY of everything: every binding the caller may describe.
    req.resource_type_filter = 1;
    req.pattern_type_filter = 1;
    req.operation = 1;
    req.permission_type = 1;
    let r: DescribeAclsResponse = call(&b, &caller, ApiKey::DescribeAcls, 3, &req).await?;
    // SECURITY_DISABLED: no authorizer, so no ACLs.
    if r.error_code == 54 {
        return ok(json!([]));
    }
    if r.error_code != 0 {
        return Err(kafka_error(r.error_code, r.error_message.as_ref()));
    }
    let out: Vec<Value> = r
        .resources
        .iter()
        .flat_map(|res| {
            res.acls.iter().map(move |a| {
                json!({
                    "resource_type": acl_name("res", res.resource_type),
                    "resource_name": res.resource_name.to_string(),
                    "pattern_type": acl_name("pat", res.pattern_type),
                    "principal": a.principal.to_string(),
                    "host": a.host.to_string(),
                    "operation": acl_name("op", a.operation),
                    "permission": acl_name("perm", a.permission_type),
                })
            })
        })
        .collect();
    ok(Value::Array(out))
}

pub(super) async fn users(
    State(sh): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
) -> ApiResult {
    let b = broker_of(&sh)?;
    let req = DescribeUserScramCredentialsRequest::default();
    let r: DescribeUserScramCredentialsResponse =
        call(&b, &caller, ApiKey::DescribeUserScramCredentials, 0, &req).await?;
    if r.error_code != 0 {
        return Err(kafka_error(r.error_code, r.error_message.as_ref()));
    }
    let scram: Vec<Value> = r
        .results
        .iter()
        .filter(|u| u.error_code == 0)
        .map(|u| {
            let mechanisms: Vec<Value> = u
                .credential_infos
                .iter()
                .map(|c| {
                    let name = es_auth::scram::ScramMechanism::from_type_id(c.mechanism)
                        .map_or("UNKNOWN", |m| m.name());
                    json!({"mechanism": name, "iterations": c.iterations})
                })
                .collect();
            json!({"user": u.user.to_string(), "mechanisms": mechanisms})
        })
        .collect();
    // API keys have no Kafka request to describe them (es-broker keys
    // list reads them): shown to super users only, ids and principals,
    // never hashes.
    let api_keys: Vec<Value> = if caller.may_write {
        b.security()
            .credentials
            .api_keys()
            .list()
            .map(|k| {
                json!({
                    "key": k.id,
                    "principal": k.principal.to_string(),
                    "created_ms": k.created_ms,
                    "description": k.description,
                    "revoked": k.revoked,
                })
            })
            .collect()
    } else {
        Vec::new()
    };
    ok(json!({
        "scram": scram,
        "api_keys": api_keys,
        "super_users": b.security().config.super_users,
    }))
}
