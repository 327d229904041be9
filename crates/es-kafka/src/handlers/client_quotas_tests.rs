//! DescribeClientQuotas and AlterClientQuotas through the dispatcher: who
//! may call them, Kafka's checks and messages, validate_only, removal,
//! filters, and quotas kept in the metadata and enforced from it.

use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::{
    AlterClientQuotasRequest, AlterClientQuotasResponse, ApiKey, DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
};

use super::wire_client::{as_principal, c, call, call_as, open, open_with, s};
use crate::broker::BrokerConfig;
use crate::errors::ResponseError;

fn entity(parts: &[(&str, Option<&str>)]) -> Vec<EntityData> {
    parts
        .iter()
        .map(|(t, n)| {
            let mut d = EntityData::default();
            d.entity_type = s(t);
            d.entity_name = n.map(s);
            d
        })
        .collect()
}

fn op(key: &str, value: Option<f64>) -> OpData {
    let mut o = OpData::default();
    o.key = s(key);
    o.value = value.unwrap_or(0.0);
    o.remove = value.is_none();
    o
}

fn alter(
    entries: Vec<(Vec<EntityData>, Vec<OpData>)>,
    validate_only: bool,
) -> AlterClientQuotasRequest {
    let mut r = AlterClientQuotasRequest::default();
    r.validate_only = validate_only;
    r.entries = entries
        .into_iter()
        .map(|(entity, ops)| {
            let mut e = EntryData::default();
            e.entity = entity;
            e.ops = ops;
            e
        })
        .collect();
    r
}

fn results(r: &AlterClientQuotasResponse) -> Vec<(i16, Option<String>)> {
    r.entries
        .iter()
        .map(|e| {
            (
                e.error_code,
                e.error_message.as_ref().map(|m| m.to_string()),
            )
        })
        .collect()
}

fn filter(components: &[(&str, i8, Option<&str>)], strict: bool) -> DescribeClientQuotasRequest {
    let mut r = DescribeClientQuotasRequest::default();
    r.strict = strict;
    r.components = components
        .iter()
        .map(|(t, m, x)| {
            let mut c = ComponentData::default();
            c.entity_type = s(t);
            c.match_type = *m;
            c._match = x.map(s);
            c
        })
        .collect();
    r
}

/// Each described entry as `type=name,...` and `key=value,...`.
fn described(r: &DescribeClientQuotasResponse) -> Vec<(String, String)> {
    r.entries
        .as_ref()
        .expect("entries")
        .iter()
        .map(|e| {
            let entity = e
                .entity
                .iter()
                .map(|d| {
                    let name = d
                        .entity_name
                        .as_ref()
                        .map_or("<default>".into(), |n| n.to_string());
                    format!("{}={name}", d.entity_type)
                })
                .collect::<Vec<_>>()
                .join(",");
            let values = e
                .values
                .iter()
                .map(|v| format!("{}={}", v.key, v.value))
                .collect::<Vec<_>>()
                .join(",");
            (entity, values)
        })
        .collect()
}

const INVALID: i16 = 42;

#[tokio::test]
async fn alterations_are_checked_as_kafkas_controller_checks_them() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = open(dir.path()).await;
    let alice = || entity(&[("user", Some("alice"))]);
    let req = alter(
        vec![
            (alice(), vec![op("producer_byte_rate", Some(1024.0))]),
            (entity(&[]), vec![op("producer_byte_rate", Some(1.0))]),
            (entity(&[("group", Some("g"))]), vec![]),
            (entity(&[("user", Some(""))]), vec![]),
            (entity(&[("client-id", None)]), vec![op("bytes", Some(1.0))]),
            (
                entity(&[("user", None)]),
                vec![op("request_percentage", Some(0.0))],
            ),
            (
                entity(&[("client-id", Some("c"))]),
                vec![op("consumer_byte_rate", Some(2.5))],
            ),
            (entity(&[("ip", Some("10.0.0.1")), ("user", None)]), vec![]),
            (
                entity(&[("ip", None)]),
                vec![op("connection_creation_rate", Some(10.0))],
            ),
            (
                entity(&[("ip", Some("10.0.0.1"))]),
                vec![op("producer_byte_rate", Some(10.0))],
            ),
            (
                entity(&[("user", Some("dup"))]),
                vec![
                    op("producer_byte_rate", Some(1.0)),
                    op("producer_byte_rate", Some(2.0)),
                ],
            ),
            (alice(), vec![op("consumer_byte_rate", Some(1.0))]),
        ],
        true,
    );
    let r: AlterClientQuotasResponse = call(&b, ApiKey::AlterClientQuotas, 1, &req).await;
    let m = |t: &str| Some(t.to_string());
    assert_eq!(
        results(&r),
        vec![
            // alice's twice: the second makes the entity's one result.
            (INVALID, m("Ignoring duplicate entity ClientQuotaEntity(entries={user=alice})")),
            (INVALID, m("Invalid empty client quota entity")),
            (INVALID, m("Unhandled client quota entity type: group")),
            (INVALID, m("Empty user not supported")),
            (INVALID, m("Invalid configuration key bytes")),
            (INVALID, m("Quota request_percentage must be greater than 0")),
            (INVALID, m("consumer_byte_rate cannot be a fractional value.")),
            (
                INVALID,
                m("Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId")
            ),
            (0, None),
            (INVALID, m("Invalid configuration key producer_byte_rate")),
            (INVALID, m("Ignoring duplicate entity ClientQuotaEntity(entries={user=dup})")),
        ]
    );
    // The entities come back as Kafka lists them.
    let e: Vec<Vec<(String, Option<String>)>> = r
        .entries
        .iter()
        .map(|e| {
            e.entity
                .iter()
                .map(|d| {
                    (
                        d.entity_type.to_string(),
                        d.entity_name.as_ref().map(|n| n.to_string()),
                    )
                })
                .collect()
        })
        .collect();
    assert_eq!(
        e[7],
        vec![
            ("user".into(), None),
            ("ip".into(), Some("10.0.0.1".into()))
        ]
    );
    // validate_only: nothing was stored.
    let d: DescribeClientQuotasResponse =
        call(&b, ApiKey::DescribeClientQuotas, 1, &filter(&[], false)).await;
    assert_eq!(d.error_code, 0);
    assert!(described(&d).is_empty());
}

#[tokio::test]
async fn quotas_are_stored_described_by_filter_removed_and_enforced() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = open(dir.path()).await;
    let req = alter(
        vec![
            (
                entity(&[("user", Some("alice"))]),
                vec![op("producer_byte_rate", Some(1024.0))],
            ),
            (
                entity(&[("user", Some("alice")), ("client-id", Some("c1"))]),
                vec![
                    op("consumer_byte_rate", Some(2048.0)),
                    op("request_percentage", Some(12.5)),
                ],
            ),
            (
                entity(&[("user", None)]),
                vec![op("producer_byte_rate", Some(100.0))],
            ),
            (
                entity(&[("client-id", None)]),
                vec![op("producer_byte_rate", Some(50.0))],
            ),
            (
                entity(&[("ip", Some("127.0.0.1"))]),
                vec![op("connection_creation_rate", Some(3.0))],
            ),
        ],
        false,
    );
    let r: AlterClientQuotasResponse = call(&b, ApiKey::AlterClientQuotas, 1, &req).await;
    assert!(
        results(&r).iter().all(|x| *x == (0, None)),
        "{:?}",
        results(&r)
    );

    let all: DescribeClientQuotasResponse =
        call(&b, ApiKey::DescribeClientQuotas, 1, &filter(&[], false)).await;
    assert_eq!(
        all.error_message.as_deref().map(|m| m.to_string()),
        Some(String::new())
    );
    assert_eq!(described(&all).len(), 5);
    let d = |f: DescribeClientQuotasRequest| {
        let b = b.clone();
        async move {
            let r: DescribeClientQuotasResponse =
                call(&b, ApiKey::DescribeClientQuotas, 0, &f).await;
            described(&r)
        }
    };
    assert_eq!(
        d(filter(&[("user", 0, Some("alice"))], true)).await,
        vec![("user=alice".into(), "producer_byte_rate=1024".into())]
    );
    let mut loose = d(filter(&[("user", 0, Some("alice"))], false)).await;
    loose.sort();
    assert_eq!(
        loose,
        vec![
            (
                "client-id=c1,user=alice".into(),
                "request_percentage=12.5,consumer_byte_rate=2048".into()
            ),
            ("user=alice".into(), "producer_byte_rate=1024".into()),
        ]
    );
    assert_eq!(
        d(filter(&[("user", 1, None)], false)).await,
        vec![("user=<default>".into(), "producer_byte_rate=100".into())]
    );
    assert_eq!(d(filter(&[("client-id", 2, None)], true)).await.len(), 1);
    assert_eq!(d(filter(&[("ip", 2, None)], false)).await.len(), 1);
    // A bad filter: Kafka's error at the top, no entries.
    let bad: DescribeClientQuotasResponse = call(
        &b,
        ApiKey::DescribeClientQuotas,
        1,
        &filter(&[("user", 0, None)], false),
    )
    .await;
    assert_eq!(bad.error_code, INVALID);
    assert!(bad.entries.is_none());
    let bad: DescribeClientQuotasResponse = call(
        &b,
        ApiKey::DescribeClientQuotas,
        1,
        &filter(&[("topic", 2, None)], false),
    )
    .await;
    assert_eq!(bad.error_code, c(ResponseError::UnsupportedVersion));

    // Every node enforces what the metadata holds: the managers resolve it.
    let q = &b.security().quotas;
    assert_eq!(q.produce.quota("alice", "c9"), Some(1024.0));
    assert_eq!(q.produce.quota("bob", "c9"), Some(100.0));
    assert_eq!(q.fetch.quota("alice", "c1"), Some(2048.0));
    assert_eq!(q.request.quota("alice", "c1"), Some(12.5));
    assert_eq!(q.fetch.quota("alice", "c2"), None);

    // Removal: a key that is not there is no error; the entity goes with
    // its last value.
    let rm = alter(
        vec![
            (
                entity(&[("user", Some("alice"))]),
                vec![op("producer_byte_rate", None), op("nope", None)],
            ),
            (
                entity(&[("user", None)]),
                vec![op("consumer_byte_rate", None)],
            ),
        ],
        false,
    );
    let r: AlterClientQuotasResponse = call(&b, ApiKey::AlterClientQuotas, 0, &rm).await;
    assert_eq!(results(&r), vec![(0, None), (0, None)]);
    assert!(d(filter(&[("user", 0, Some("alice"))], true))
        .await
        .is_empty());
    assert_eq!(d(filter(&[("user", 1, None)], true)).await.len(), 1);
    assert_eq!(q.produce.quota("alice", "c9"), Some(100.0));
}

#[tokio::test]
async fn the_quota_apis_need_the_cluster_config_operations() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut cfg = BrokerConfig::new(dir.path().join("data"), "127.0.0.1:9092");
    cfg.security.authorizer = true;
    cfg.security.super_users = vec!["User:admin".into()];
    let b = open_with(cfg).await;
    let (admin, alice) = (as_principal("User:admin"), as_principal("User:alice"));
    let req = alter(
        vec![(
            entity(&[("user", Some("carol"))]),
            vec![op("producer_byte_rate", Some(1024.0))],
        )],
        false,
    );
    let r: AlterClientQuotasResponse =
        call_as(&b, alice.clone(), ApiKey::AlterClientQuotas, 1, &req).await;
    assert_eq!(
        results(&r),
        vec![(
            c(ResponseError::ClusterAuthorizationFailed),
            Some("Cluster authorization failed.".into())
        )]
    );
    let d: DescribeClientQuotasResponse = call_as(
        &b,
        alice,
        ApiKey::DescribeClientQuotas,
        1,
        &filter(&[], false),
    )
    .await;
    assert_eq!(d.error_code, c(ResponseError::ClusterAuthorizationFailed));
    assert!(d.error_message.is_none() && d.entries.is_none());
    let r: AlterClientQuotasResponse =
        call_as(&b, admin.clone(), ApiKey::AlterClientQuotas, 1, &req).await;
    assert_eq!(results(&r), vec![(0, None)]);
    let d: DescribeClientQuotasResponse = call_as(
        &b,
        admin,
        ApiKey::DescribeClientQuotas,
        1,
        &filter(&[], false),
    )
    .await;
    assert_eq!(
        described(&d),
        vec![("user=carol".into(), "producer_byte_rate=1024".into())]
    );
}

#[tokio::test]
async fn a_request_writing_too_many_records_is_refused_whole() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = open(dir.path()).await;
    // Kafka's controller writes at most 10,000 records for one request;
    // one more is POLICY_VIOLATION on every entry, validate_only or not.
    let entries = |n: usize| {
        (0..n)
            .map(|i| {
                let name = format!("user-{i}");
                (
                    entity(&[("user", Some(name.as_str()))]),
                    vec![op("producer_byte_rate", Some(1024.0))],
                )
            })
            .collect::<Vec<_>>()
    };
    let r: AlterClientQuotasResponse = call(
        &b,
        ApiKey::AlterClientQuotas,
        1,
        &alter(entries(10_001), true),
    )
    .await;
    assert_eq!(r.entries.len(), 10_001);
    assert!(r
        .entries
        .iter()
        .all(|e| e.error_code == c(ResponseError::PolicyViolation)
            && e.error_message.as_deref().map(|m| m.to_string())
                == Some("Unable to perform excessively large batch operation.".into())));
    let r: AlterClientQuotasResponse = call(
        &b,
        ApiKey::AlterClientQuotas,
        1,
        &alter(entries(10_000), true),
    )
    .await;
    assert!(r.entries.iter().all(|e| e.error_code == 0));
}
