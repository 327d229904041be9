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

/// Creates the ACL bindings `creations` as the super user.
async fn grant(b: &std::sync::Arc<crate::broker::Broker>, creations: Vec<AclCreation>) {
    let mut req = CreateAclsRequest::default();
    req.creations = creations;
    let r: CreateAclsResponse =
        call_as(b, as_principal("User:admin"), ApiKey::CreateAcls, 3, &req).await;
    assert!(r.results.iter().all(|x| x.error_code == 0), "{r:?}");
}

fn records() -> bytes::Bytes {
    let mut batch = es_test_support::batch::KafkaBatch::new();
    batch.record(
        1_700_000_000_000,
        None,
        Some(b"v"),
        &[],
        &es_storage::record::RecordMeta::default(),
    );
    bytes::Bytes::from(batch.encode())
}

async fn produce_as(b: &std::sync::Arc<crate::broker::Broker>, who: &str, topic: &str) -> i16 {
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    let mut pd = PartitionProduceData::default();
    pd.records = Some(records());
    let mut td = TopicProduceData::default();
    td.name = super::wire_client::tn(topic);
    td.partition_data = vec![pd];
    let mut req = kafka_protocol::messages::ProduceRequest::default();
    req.acks = -1;
    req.timeout_ms = 10_000;
    req.topic_data = vec![td];
    let r: kafka_protocol::messages::ProduceResponse =
        call_as(b, as_principal(who), ApiKey::Produce, 9, &req).await;
    r.responses[0].partition_responses[0].error_code
}

#[tokio::test]
async fn the_data_path_checks_topics_as_kafka() {
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use kafka_protocol::messages::{
        FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse, MetadataRequest,
        MetadataResponse,
    };
    let dir = tempfile::tempdir().expect("tmp");
    let mut cfg = BrokerConfig::new(dir.path().join("data"), "127.0.0.1:9092");
    cfg.security.authorizer = true;
    cfg.security.super_users = vec!["User:admin".into()];
    let b = open_with(cfg).await;
    for t in ["orders", "secret"] {
        b.create_topic(t, 1, std::collections::BTreeMap::new(), false)
            .await
            .expect("created");
    }
    grant(&b, vec![creation("orders", "User:alice", 3, 3)]).await; // READ
    let denied = c(ResponseError::TopicAuthorizationFailed);

    // Metadata: all topics lists only what alice may describe (READ
    // implies DESCRIBE); a named topic she may not describe is refused
    // whether it exists or not, and is not created.
    let mut all = MetadataRequest::default();
    all.topics = None;
    let r: MetadataResponse =
        call_as(&b, as_principal("User:alice"), ApiKey::Metadata, 12, &all).await;
    let names: Vec<String> = r
        .topics
        .iter()
        .filter_map(|t| t.name.as_ref().map(|n| n.0.to_string()))
        .collect();
    assert_eq!(names, vec!["orders"]);
    let mut named = MetadataRequest::default();
    named.allow_auto_topic_creation = true;
    named.topics = Some(
        ["secret", "missing", "orders"]
            .iter()
            .map(|n| {
                let mut t = MetadataRequestTopic::default();
                t.name = Some(super::wire_client::tn(n));
                t
            })
            .collect(),
    );
    let r: MetadataResponse =
        call_as(&b, as_principal("User:alice"), ApiKey::Metadata, 12, &named).await;
    let codes: Vec<i16> = r.topics.iter().map(|t| t.error_code).collect();
    assert_eq!(codes, vec![denied, denied, 0]);
    assert!(b.topic("missing").is_none(), "created without CREATE");

    // Produce needs WRITE: READ is not enough.
    assert_eq!(produce_as(&b, "User:alice", "orders").await, denied);
    assert_eq!(produce_as(&b, "User:alice", "secret").await, denied);
    assert_eq!(produce_as(&b, "User:alice", "nosuchtopic").await, denied);
    assert_eq!(produce_as(&b, "User:admin", "orders").await, 0);
    grant(&b, vec![creation("orders", "User:alice", 4, 3)]).await; // WRITE
    assert_eq!(produce_as(&b, "User:alice", "orders").await, 0);

    // Fetch needs READ; ListOffsets DESCRIBE.
    let fetch = |topic: &str| {
        use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
        let mut p = FetchPartition::default();
        p.partition_max_bytes = 1 << 20;
        let mut t = FetchTopic::default();
        t.topic = super::wire_client::tn(topic);
        t.partitions = vec![p];
        let mut req = FetchRequest::default();
        req.max_bytes = 1 << 20;
        req.replica_id = kafka_protocol::messages::BrokerId(-1);
        req.topics = vec![t];
        req
    };
    for (topic, want) in [("orders", 0), ("secret", denied)] {
        let r: FetchResponse = call_as(
            &b,
            as_principal("User:alice"),
            ApiKey::Fetch,
            12,
            &fetch(topic),
        )
        .await;
        assert_eq!(r.responses[0].partitions[0].error_code, want, "{topic}");
    }
    for (topic, want) in [("orders", 0), ("secret", denied)] {
        use kafka_protocol::messages::list_offsets_request::{
            ListOffsetsPartition, ListOffsetsTopic,
        };
        let mut p = ListOffsetsPartition::default();
        p.timestamp = -1;
        let mut t = ListOffsetsTopic::default();
        t.name = super::wire_client::tn(topic);
        t.partitions = vec![p];
        let mut req = ListOffsetsRequest::default();
        req.replica_id = kafka_protocol::messages::BrokerId(-1);
        req.topics = vec![t];
        let r: ListOffsetsResponse =
            call_as(&b, as_principal("User:alice"), ApiKey::ListOffsets, 7, &req).await;
        assert_eq!(r.topics[0].partitions[0].error_code, want, "{topic}");
    }
}
