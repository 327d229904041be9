//! es's share-admin request ([`super`]) in process: what [`decode`] refuses
//! (another version, a body past the limit, bad JSON, unknown fields, a bad
//! topic id, too many share-partitions, no group), and whole frames through
//! the real dispatcher against a broker on a temporary directory: a reset,
//! then a describe showing it, a partition past the topic's end, an unknown
//! topic id, a reset without an offset, a delete, and a principal without
//! CLUSTER_ACTION refused. (NOT_LEADER_OR_FOLLOWER needs another node:
//! es-broker's tests/share_admin_cluster.rs.)

use bytes::{Buf, BufMut, Bytes, BytesMut};
use uuid::Uuid;

use super::*;
use crate::broker::BrokerConfig;
use crate::handlers::wire_client::{as_principal, broker_with_topic, c};
use crate::turn::Turn;

const GROUP: &str = "sg";

/// A request frame as a peer sends it (after the size prefix): api key,
/// `version`, correlation id 5, `body`.
fn frame(version: i16, body: &[u8]) -> Bytes {
    let mut f = BytesMut::with_capacity(8 + body.len());
    f.put_i16(ES_SHARE_ADMIN);
    f.put_i16(version);
    f.put_i32(5);
    f.put_slice(body);
    f.freeze()
}

fn json(req: &ShareAdminRequest) -> Vec<u8> {
    serde_json::to_vec(req).expect("json")
}

fn request(op: ShareAdminOp, partitions: Vec<AdminPartition>) -> ShareAdminRequest {
    ShareAdminRequest {
        op,
        group: GROUP.into(),
        partitions,
    }
}

fn part(topic: &str, id: Uuid, partition: i32, start: Option<i64>) -> AdminPartition {
    AdminPartition {
        topic: topic.into(),
        topic_id: id,
        partition,
        start_offset: start,
    }
}

/// The refusal's code, or `None` when `frame` decodes.
fn refused(f: &Bytes) -> Option<i16> {
    decode(f).err().map(|(e, _)| c(e))
}

#[test]
fn decoding_refuses_what_a_peer_may_not_send() {
    let id = Uuid::from_u128(7);
    let good = json(&request(
        ShareAdminOp::Reset,
        vec![part("t", id, 0, Some(3))],
    ));
    assert_eq!(refused(&frame(0, &good)), None);
    let back = decode(&frame(0, &good)).expect("decodes");
    assert_eq!(back.partitions[0].topic_id, id);
    assert_eq!(back.partitions[0].start_offset, Some(3));

    // Another version.
    assert_eq!(
        refused(&frame(1, &good)),
        Some(c(ResponseError::UnsupportedVersion))
    );
    // A header cut short.
    assert_eq!(
        refused(&Bytes::from_static(&[0x7d])),
        Some(c(ResponseError::UnsupportedVersion))
    );
    // A body past the limit is refused before it is parsed.
    let big = vec![b' '; SHARE_ADMIN_REQUEST_BYTES_MAX + 1];
    assert_eq!(
        refused(&frame(0, &big)),
        Some(c(ResponseError::InvalidRequest))
    );
    // Not JSON, JSON of another shape, an unknown field or op, a bad id.
    let invalid = c(ResponseError::InvalidRequest);
    for body in [
        &b"{"[..],
        b"",
        b"[]",
        b"{\"op\":\"describe\",\"group\":\"g\"}",
        b"{\"op\":\"explode\",\"group\":\"g\",\"partitions\":[]}",
        b"{\"op\":\"describe\",\"group\":\"g\",\"partitions\":[],\"extra\":1}",
        b"{\"op\":\"describe\",\"group\":\"g\",\"partitions\":[{\"topic\":\"t\",\"topic_id\":\"nope\",\"partition\":0}]}",
        b"{\"op\":\"describe\",\"group\":\"g\",\"partitions\":[{\"topic\":\"t\",\"topic_id\":\"00000000-0000-0000-0000-000000000007\",\"partition\":99999999999}]}",
        b"\xff\xfe",
    ] {
        assert_eq!(refused(&frame(0, body)), Some(invalid), "{body:?}");
    }
    // No group, or more share-partitions than one request may carry.
    let mut no_group = request(ShareAdminOp::Describe, Vec::new());
    no_group.group.clear();
    assert_eq!(refused(&frame(0, &json(&no_group))), Some(invalid));
    let many = request(
        ShareAdminOp::Describe,
        (0..=SHARE_ADMIN_PARTITIONS_MAX as i32)
            .map(|p| part("t", id, p, None))
            .collect(),
    );
    assert_eq!(refused(&frame(0, &json(&many))), Some(invalid));
}

/// Sends `body` (version `version`) from `client` through the dispatcher:
/// the decoded answer, after checking its framing.
async fn send(b: &Arc<Broker>, client: Client, version: i16, body: &[u8]) -> ShareAdminResponse {
    let out = crate::handlers::handle_from(b.clone(), client, frame(version, body), Turn::free())
        .await
        .expect("dispatched")
        .expect("an answer")
        .into_bytes();
    let mut out = out;
    let size = out.get_i32() as usize;
    assert_eq!(size, out.remaining());
    assert_eq!(out.get_i32(), 5, "the correlation id");
    serde_json::from_slice(&out).expect("a JSON answer")
}

#[tokio::test]
async fn a_leader_resets_describes_and_deletes_and_refuses_what_it_does_not_know() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut cfg = BrokerConfig::new(dir.path().join("data"), "127.0.0.1:9092");
    cfg.security.authorizer = true;
    cfg.security.super_users = vec!["User:broker".into()];
    let (b, t) = broker_with_topic(cfg, "t").await;
    let peer = || as_principal("User:broker");

    // Reset partition 0 to 4; partition 5 does not exist; another id of
    // the same name is another topic.
    let other = Uuid::from_u128(99);
    let req = request(
        ShareAdminOp::Reset,
        vec![
            part("t", t.id, 0, Some(4)),
            part("t", t.id, 5, Some(1)),
            part("t", other, 0, Some(1)),
            part("t", t.id, 0, None),
        ],
    );
    let r = send(&b, peer(), 0, &json(&req)).await;
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    let codes: Vec<i16> = r.partitions.iter().map(|a| a.error_code).collect();
    let unknown = c(ResponseError::UnknownTopicOrPartition);
    assert_eq!(
        codes,
        vec![0, unknown, unknown, c(ResponseError::InvalidRequest)]
    );
    assert_eq!(
        (r.partitions[1].topic_id, r.partitions[1].partition),
        (t.id, 5)
    );

    // Describe shows it: start 4, nothing delivered, an empty log.
    let req = request(ShareAdminOp::Describe, vec![part("t", t.id, 0, None)]);
    let r = send(&b, peer(), 0, &json(&req)).await;
    let a = &r.partitions[0];
    assert_eq!(a.error_code, 0);
    let st = a.state.expect("state");
    assert_eq!((st.start_offset, st.delivery_complete_count), (4, 0));
    assert_eq!((st.latest_offset, st.lag()), (0, -4));

    // Delete: no state afterwards.
    let req = request(ShareAdminOp::Delete, vec![part("t", t.id, 0, None)]);
    assert_eq!(
        send(&b, peer(), 0, &json(&req)).await.partitions[0].error_code,
        0
    );
    let req = request(ShareAdminOp::Describe, vec![part("t", t.id, 0, None)]);
    let r = send(&b, peer(), 0, &json(&req)).await;
    assert_eq!(
        (r.partitions[0].error_code, r.partitions[0].state),
        (0, None)
    );

    // A client without CLUSTER_ACTION, another version, bad JSON: refused
    // whole, nothing answered per partition.
    let r = send(&b, as_principal("User:alice"), 0, &json(&req)).await;
    assert_eq!(r.error_code, c(ResponseError::ClusterAuthorizationFailed));
    assert!(r.partitions.is_empty());
    let r = send(&b, peer(), 3, &json(&req)).await;
    assert_eq!(r.error_code, c(ResponseError::UnsupportedVersion));
    let r = send(&b, peer(), 0, b"{\"op\":").await;
    assert_eq!(r.error_code, c(ResponseError::InvalidRequest));
    assert_eq!(crate::metrics::api_name(ES_SHARE_ADMIN), "EsShareAdmin");
}
