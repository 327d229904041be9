//! The ACL and SCRAM admin APIs with an authorizer: who may call them, and
//! bindings created, described and deleted through the metadata log.

use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::{
    ApiKey, CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse, DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
};

use super::wire_client::{as_principal, c, call, call_as, open_with, s};
use crate::broker::BrokerConfig;
use crate::errors::ResponseError;

fn creation(name: &str, principal: &str, op: i8, permission: i8) -> AclCreation {
    let mut a = AclCreation::default();
    a.resource_type = 2; // TOPIC
    a.resource_name = s(name);
    a.resource_pattern_type = 3; // LITERAL
    a.principal = s(principal);
    a.host = s("*");
    a.operation = op;
    a.permission_type = permission;
    a
}

fn any_filter() -> DescribeAclsRequest {
    let mut f = DescribeAclsRequest::default();
    f.resource_type_filter = 1;
    f.resource_name_filter = None;
    f.principal_filter = None;
    f.host_filter = None;
    f.pattern_type_filter = 1;
    f.operation = 1;
    f.permission_type = 1;
    f
}

#[tokio::test]
async fn acl_apis_need_the_cluster_and_change_the_metadata() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut cfg = BrokerConfig::new(dir.path().join("data"), "127.0.0.1:9092");
    cfg.security.authorizer = true;
    cfg.security.super_users = vec!["User:admin".into()];
    let b = open_with(cfg).await;
    let (admin, alice) = (as_principal("User:admin"), as_principal("User:alice"));

    // alice may not change or read ACLs: CLUSTER_AUTHORIZATION_FAILED.
    let mut req = CreateAclsRequest::default();
    req.creations = vec![
        creation("orders", "User:alice", 3, 3), // READ, ALLOW
        creation("orders", "User:bob", 4, 2),   // WRITE, DENY
        creation("orders", "User:alice", 3, 3), // again: a success no-op
        creation("", "User:alice", 3, 3),       // empty name: INVALID_REQUEST
    ];
    let r: CreateAclsResponse = call_as(&b, alice.clone(), ApiKey::CreateAcls, 3, &req).await;
    assert!(r
        .results
        .iter()
        .all(|x| x.error_code == c(ResponseError::ClusterAuthorizationFailed)));
    let d: DescribeAclsResponse =
        call_as(&b, alice.clone(), ApiKey::DescribeAcls, 3, &any_filter()).await;
    assert_eq!(d.error_code, c(ResponseError::ClusterAuthorizationFailed));

    // The super user creates them; Kafka's per-binding answers.
    let r: CreateAclsResponse = call_as(&b, admin.clone(), ApiKey::CreateAcls, 3, &req).await;
    let got: Vec<(i16, Option<String>)> = r
        .results
        .iter()
        .map(|x| {
            (
                x.error_code,
                x.error_message.as_ref().map(|m| m.to_string()),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (0, None),
            (0, None),
            (0, None),
            (
                c(ResponseError::InvalidRequest),
                Some("Invalid empty resource name".into())
            )
        ]
    );
    let d: DescribeAclsResponse =
        call_as(&b, admin.clone(), ApiKey::DescribeAcls, 3, &any_filter()).await;
    assert_eq!(d.error_code, 0);
    assert_eq!(d.resources.len(), 1);
    assert_eq!(d.resources[0].resource_name.as_str(), "orders");
    assert_eq!(d.resources[0].acls.len(), 2);
    // Now alice may read orders, bob may not write it, and the authorizer
    // every request consults says so.
    let authz = b.security().authorizer().expect("an authorizer");
    use es_auth::acl::{AclOperation as Op, ResourceType as Rt};
    assert!(
        authz
            .authorize("User:alice", "127.0.0.1", Op::Read, Rt::Topic, "orders")
            .allowed
    );
    assert!(
        authz
            .authorize("User:alice", "127.0.0.1", Op::Describe, Rt::Topic, "orders")
            .allowed
    );
    assert!(
        !authz
            .authorize("User:alice", "127.0.0.1", Op::Write, Rt::Topic, "orders")
            .allowed
    );
    assert!(
        !authz
            .authorize("User:bob", "127.0.0.1", Op::Write, Rt::Topic, "orders")
            .allowed
    );

    // DeleteAcls: the matching bindings, removed once.
    let mut f = DeleteAclsFilter::default();
    f.resource_type_filter = 2;
    f.resource_name_filter = Some(s("orders"));
    f.pattern_type_filter = 3;
    f.principal_filter = Some(s("User:bob"));
    f.host_filter = None;
    f.operation = 1;
    f.permission_type = 1;
    let mut del = DeleteAclsRequest::default();
    del.filters = vec![f.clone(), f];
    let r: DeleteAclsResponse = call_as(&b, admin.clone(), ApiKey::DeleteAcls, 3, &del).await;
    assert_eq!(r.filter_results.len(), 2);
    assert_eq!(r.filter_results[0].matching_acls.len(), 1);
    assert_eq!(r.filter_results[1].matching_acls.len(), 1);
    let d: DescribeAclsResponse =
        call_as(&b, admin.clone(), ApiKey::DescribeAcls, 3, &any_filter()).await;
    assert_eq!(d.resources[0].acls.len(), 1);
    // The authorizer was rebuilt from the applied bindings.
    assert_eq!(authz.acl_count(), 2);
    assert_eq!(
        b.security().authorizer().expect("authorizer").acl_count(),
        1
    );

    // SCRAM credentials are the cluster's too.
    let r: DescribeUserScramCredentialsResponse = call_as(
        &b,
        alice,
        ApiKey::DescribeUserScramCredentials,
        0,
        &DescribeUserScramCredentialsRequest::default(),
    )
    .await;
    assert_eq!(r.error_code, c(ResponseError::ClusterAuthorizationFailed));
    // A request made inside the broker is never refused.
    let d: DescribeAclsResponse = call(&b, ApiKey::DescribeAcls, 3, &any_filter()).await;
    assert_eq!(d.error_code, 0);
}

#[tokio::test]
async fn without_an_authorizer_the_acl_apis_are_disabled_as_in_kafka() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = open_with(BrokerConfig::new(dir.path().join("data"), "127.0.0.1:9092")).await;
    let d: DescribeAclsResponse = call_as(
        &b,
        as_principal("User:alice"),
        ApiKey::DescribeAcls,
        3,
        &any_filter(),
    )
    .await;
    assert_eq!(d.error_code, c(ResponseError::SecurityDisabled));
    assert_eq!(
        d.error_message.as_deref(),
        Some(super::acls::NO_AUTHORIZER_DESCRIBE)
    );
}
