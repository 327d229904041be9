//! Tests of the share-group hand codecs (codec/share_wire.rs) against
//! Kafka's layout and against the kafka-protocol crate.
//!
//! - The fixtures in `share_wire_fixtures/` are Kafka 4.4's specs encoded by
//!   `scripts/gen-share-wire-fixtures` (through compat-tests/diff/kproto.py):
//!   every one decodes, consumes its bytes and encodes back to the same
//!   bytes; at the crate's version the crate agrees on the value and the
//!   bytes; the newer version of a case decodes to the same crate struct as
//!   the older one, plus the added fields.
//! - Property tests: at the crate's version the hand encoders write the
//!   crate's bytes for any value; the newer version is those bytes with the
//!   added fields at the place the spec puts them; any value round-trips;
//!   every truncation and any garbling returns an error or a value that
//!   itself round-trips, never a panic.

use std::collections::BTreeMap;
use std::path::Path;

use bytes::Bytes;
use kafka_protocol::messages::describe_share_group_offsets_response::{
    DescribeShareGroupOffsetsResponseGroup, DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::share_acknowledge_request::{AcknowledgePartition, AcknowledgeTopic};
use kafka_protocol::messages::share_acknowledge_response::{
    LeaderIdAndEpoch, NodeEndpoint, PartitionData, ShareAcknowledgeTopicResponse,
};
use kafka_protocol::messages::share_fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::{
    share_acknowledge_request, share_fetch_request, ApiKey, BrokerId,
    DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse, GroupId,
    ShareAcknowledgeRequest, ShareAcknowledgeResponse, ShareFetchRequest, ShareFetchResponse,
    TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use proptest::prelude::*;
use uuid::Uuid;

use super::share_wire::*;
use crate::versions::crate_version;

// ---- fixtures --------------------------------------------------------------

struct Fixture {
    file: String,
    message: String,
    version: i16,
    case: String,
    bytes: Vec<u8>,
}

fn fixtures() -> Vec<Fixture> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/codec/share_wire_fixtures");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("the fixture directory") {
        let path = entry.expect("an entry").path();
        let file = path
            .file_name()
            .and_then(|f| f.to_str())
            .expect("a file name")
            .to_string();
        let stem = file.strip_suffix(".hex").expect("only .hex files");
        let mut parts = stem.splitn(3, '-');
        let message = parts.next().expect("message").to_string();
        let version = parts
            .next()
            .and_then(|v| v.strip_prefix('v'))
            .and_then(|v| v.parse().ok())
            .expect("a version");
        let case = parts.next().expect("a case").to_string();
        let text = std::fs::read_to_string(&path).expect("readable");
        let hex: String = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .flat_map(|l| l.chars().filter(|c| !c.is_whitespace()))
            .collect();
        let bytes = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
            .collect();
        out.push(Fixture {
            file,
            message,
            version,
            case,
            bytes,
        });
    }
    out.sort_by(|a, b| a.file.cmp(&b.file));
    out
}

fn fixture(message: &str, version: i16, case: &str) -> Vec<u8> {
    fixtures()
        .into_iter()
        .find(|f| f.message == message && f.version == version && f.case == case)
        .unwrap_or_else(|| panic!("no fixture {message}-v{version}-{case}"))
        .bytes
}

const MESSAGES: &[(&str, i16, i16)] = &[
    ("ShareFetchRequest", 1, 2),
    ("ShareFetchResponse", 1, 2),
    ("ShareAcknowledgeRequest", 1, 2),
    ("ShareAcknowledgeResponse", 1, 2),
    ("DescribeShareGroupOffsetsRequest", 0, 1),
    ("DescribeShareGroupOffsetsResponse", 0, 1),
];

#[test]
fn fixtures_cover_every_message_version_and_edge() {
    let all = fixtures();
    for &(message, old, new) in MESSAGES {
        let cases = |v: i16| {
            let mut c: Vec<String> = all
                .iter()
                .filter(|f| f.message == message && f.version == v)
                .map(|f| f.case.clone())
                .collect();
            c.sort();
            c
        };
        assert!(cases(old).len() >= 2, "{message} v{old}: {:?}", cases(old));
        // Every case at both versions.
        assert_eq!(cases(old), cases(new), "{message}");
    }
    let changed = [
        "ShareFetchRequest",
        "ShareAcknowledgeRequest",
        "ShareAcknowledgeResponse",
        "DescribeShareGroupOffsetsResponse",
    ];
    for message in changed {
        for case in ["empty", "large", "tagged", "extremes"] {
            assert!(
                all.iter().any(|f| f.message == message && f.case == case),
                "{message} has no {case} fixture"
            );
        }
    }
    for message in ["ShareFetchRequest", "ShareAcknowledgeRequest"] {
        assert!(all
            .iter()
            .any(|f| f.message == message && f.case == "ack_types"));
    }
    assert!(all.len() >= 60, "{} fixtures", all.len());
}

/// What a fixture decodes to, for comparing its two versions.
#[derive(Debug, PartialEq)]
enum Value {
    Fetch(ShareFetchRequest, ShareFetchV2Extras),
    Ack(ShareAcknowledgeRequest, ShareAcknowledgeV2Extras),
    AckResponse(ShareAcknowledgeResponseV2),
    Offsets(DescribeShareGroupOffsetsResponseV1),
    OffsetsRequest(DescribeShareGroupOffsetsRequest),
    FetchResponse(ShareFetchResponse),
}

/// Decodes a fixture (every byte), checks that it encodes back to the same
/// bytes and, at the crate's version, that the crate agrees.
fn round_trip(f: &Fixture) -> Value {
    let name = &f.file;
    let v = f.version;
    let mut buf = Bytes::from(f.bytes.clone());
    let mut out = Vec::new();
    let value = match f.message.as_str() {
        "ShareFetchRequest" => {
            let (req, extras) = decode_share_fetch_request(&mut buf, v).expect(name);
            encode_share_fetch_request(&req, &extras, v, &mut out).expect(name);
            if v == 1 {
                assert_eq!(extras, ShareFetchV2Extras::default(), "{name}");
                let by_crate = ShareFetchRequest::decode(&mut Bytes::from(f.bytes.clone()), 1)
                    .expect("the crate decodes v1");
                assert_eq!(by_crate, req, "{name}");
                assert_eq!(crate_encode(&req, 1), f.bytes, "{name}");
            }
            Value::Fetch(req, extras)
        }
        "ShareAcknowledgeRequest" => {
            let (req, extras) = decode_share_acknowledge_request(&mut buf, v).expect(name);
            encode_share_acknowledge_request(&req, &extras, v, &mut out).expect(name);
            if v == 1 {
                assert_eq!(extras, ShareAcknowledgeV2Extras::default(), "{name}");
                let by_crate =
                    ShareAcknowledgeRequest::decode(&mut Bytes::from(f.bytes.clone()), 1)
                        .expect("the crate decodes v1");
                assert_eq!(by_crate, req, "{name}");
                assert_eq!(crate_encode(&req, 1), f.bytes, "{name}");
            }
            Value::Ack(req, extras)
        }
        "ShareAcknowledgeResponse" => {
            let r = ShareAcknowledgeResponseV2::decode(&mut buf, v).expect(name);
            r.encode_at(v, &mut out).expect(name);
            if v == 1 {
                assert_eq!(r.acquisition_lock_timeout_ms, 0, "{name}");
                let by_crate =
                    ShareAcknowledgeResponse::decode(&mut Bytes::from(f.bytes.clone()), 1)
                        .expect("the crate decodes v1");
                assert_eq!(by_crate, r.response, "{name}");
                assert_eq!(crate_encode(&r.response, 1), f.bytes, "{name}");
            } else {
                // As dispatch encodes it: at the crate's version, which the
                // v2 encoder ignores.
                let cv = crate_version(ApiKey::ShareAcknowledge, 2);
                assert_eq!(crate_encode(&r, cv), f.bytes, "{name}");
                assert_eq!(r.compute_size(cv).expect("size"), f.bytes.len(), "{name}");
            }
            Value::AckResponse(r)
        }
        "DescribeShareGroupOffsetsResponse" => {
            let r = DescribeShareGroupOffsetsResponseV1::decode(&mut buf, v).expect(name);
            assert_eq!(r.lags.len(), r.partition_count(), "{name}");
            r.encode_at(v, &mut out).expect(name);
            if v == 0 {
                assert!(
                    r.lags.iter().all(|&l| l == -1),
                    "{name}: v0 lags default to -1"
                );
                let by_crate =
                    DescribeShareGroupOffsetsResponse::decode(&mut Bytes::from(f.bytes.clone()), 0)
                        .expect("the crate decodes v0");
                assert_eq!(by_crate, r.response, "{name}");
                assert_eq!(crate_encode(&r.response, 0), f.bytes, "{name}");
            } else {
                let cv = crate_version(ApiKey::DescribeShareGroupOffsets, 1);
                assert_eq!(cv, 0);
                assert_eq!(crate_encode(&r, cv), f.bytes, "{name}");
                assert_eq!(r.compute_size(cv).expect("size"), f.bytes.len(), "{name}");
            }
            Value::Offsets(r)
        }
        "DescribeShareGroupOffsetsRequest" => {
            // v1 is v0's shape: the crate decodes it at v0 (PAST_CRATE).
            let cv = crate_version(ApiKey::DescribeShareGroupOffsets, v);
            assert_eq!(cv, 0);
            let r = DescribeShareGroupOffsetsRequest::decode(&mut buf, cv).expect(name);
            out = crate_encode(&r, cv);
            Value::OffsetsRequest(r)
        }
        "ShareFetchResponse" => {
            // v2 is v1's shape: the crate encodes it at v1.
            let cv = crate_version(ApiKey::ShareFetch, v);
            assert_eq!(cv, 1);
            let r = ShareFetchResponse::decode(&mut buf, cv).expect(name);
            out = crate_encode(&r, cv);
            Value::FetchResponse(r)
        }
        other => panic!("{name}: no codec for {other}"),
    };
    assert!(buf.is_empty(), "{name}: {} bytes left undecoded", buf.len());
    assert_eq!(out, f.bytes, "{name}: encoded again, the bytes differ");
    value
}

fn crate_encode<T: Encodable>(t: &T, version: i16) -> Vec<u8> {
    let mut out = Vec::new();
    t.encode(&mut out, version).expect("encodes");
    assert_eq!(t.compute_size(version).expect("size"), out.len());
    out
}

#[test]
fn every_fixture_decodes_and_encodes_to_its_bytes() {
    let all = fixtures();
    for f in &all {
        round_trip(f);
    }
    assert!(all.len() >= 60);
}

/// The newer version of a case decodes to the older one's crate struct; at
/// the older version the added fields read as their defaults.
#[test]
fn both_versions_of_a_case_hold_the_same_value() {
    let all = fixtures();
    let mut pairs = 0;
    for old in &all {
        let Some(&(_, o, n)) = MESSAGES.iter().find(|m| m.0 == old.message) else {
            panic!("{}: unknown message", old.file);
        };
        if old.version != o {
            continue;
        }
        let new = all
            .iter()
            .find(|f| f.message == old.message && f.version == n && f.case == old.case)
            .expect("the newer version of the case");
        match (round_trip(old), round_trip(new)) {
            (Value::Fetch(a, _), Value::Fetch(b, _)) => assert_eq!(a, b, "{}", new.file),
            (Value::Ack(a, _), Value::Ack(b, _)) => assert_eq!(a, b, "{}", new.file),
            (Value::AckResponse(a), Value::AckResponse(b)) => {
                assert_eq!(a.response, b.response, "{}", new.file)
            }
            (Value::Offsets(a), Value::Offsets(b)) => {
                assert_eq!(a.response, b.response, "{}", new.file);
                assert_eq!(a.lags.len(), b.lags.len());
            }
            (Value::OffsetsRequest(a), Value::OffsetsRequest(b)) => {
                assert_eq!(a, b, "{}", new.file);
                assert_eq!(old.bytes, new.bytes, "{}: v1 is v0's bytes", new.file);
            }
            (Value::FetchResponse(a), Value::FetchResponse(b)) => {
                assert_eq!(a, b, "{}", new.file);
                assert_eq!(old.bytes, new.bytes, "{}: v2 is v1's bytes", new.file);
            }
            (a, b) => panic!("{}: {a:?} against {b:?}", new.file),
        }
        pairs += 1;
    }
    assert!(pairs >= 30, "{pairs} pairs");
}

fn s(t: &str) -> StrBytes {
    StrBytes::from_string(t.to_string())
}

#[test]
fn fixture_values_are_the_generators() {
    // Every acknowledge type, and the v2 fields.
    let (req, extras) = decode_share_fetch_request(
        &mut Bytes::from(fixture("ShareFetchRequest", 2, "ack_types")),
        2,
    )
    .expect("decodes");
    assert_eq!(
        extras,
        ShareFetchV2Extras {
            acquire_mode: 1,
            is_renew_ack: true
        }
    );
    let batches = &req.topics[0].partitions[0].acknowledgement_batches;
    assert_eq!(batches[0].acknowledge_types, vec![0, 1, 2, 3, 4]);
    assert_eq!((batches[0].first_offset, batches[0].last_offset), (10, 14));
    for t in 0..5 {
        assert_eq!(batches[1 + t].acknowledge_types, vec![t as i8]);
    }
    let (req, extras) = decode_share_acknowledge_request(
        &mut Bytes::from(fixture("ShareAcknowledgeRequest", 2, "ack_types")),
        2,
    )
    .expect("decodes");
    assert!(extras.is_renew_ack);
    let batches = &req.topics[0].partitions[0].acknowledgement_batches;
    assert_eq!(batches[0].acknowledge_types, vec![0, 1, 2, 3, 4]);

    // Null and empty strings.
    let (req, _) = decode_share_fetch_request(
        &mut Bytes::from(fixture("ShareFetchRequest", 2, "empty")),
        2,
    )
    .expect("decodes");
    assert_eq!(req.group_id, None);
    assert_eq!(req.member_id, Some(s("")));
    assert_eq!(req.max_bytes, i32::MAX);
    let (req, extras) = decode_share_fetch_request(
        &mut Bytes::from(fixture("ShareFetchRequest", 2, "null_member")),
        2,
    )
    .expect("decodes");
    assert_eq!(req.group_id, Some(GroupId(s(""))));
    assert_eq!(req.member_id, None);
    assert_eq!(req.share_session_epoch, -1);
    assert_eq!(extras.acquire_mode, 1);
    assert!(!extras.is_renew_ack);

    // Extremes and long UTF-8.
    let (req, extras) = decode_share_fetch_request(
        &mut Bytes::from(fixture("ShareFetchRequest", 2, "extremes")),
        2,
    )
    .expect("decodes");
    assert_eq!(req.group_id, Some(GroupId(s(&"\u{e9}".repeat(100)))));
    assert_eq!(req.member_id, Some(s("\u{1F4A1}")));
    assert_eq!(extras.acquire_mode, -128);
    let b = &req.topics[0].partitions[0].acknowledgement_batches[0];
    assert_eq!((b.first_offset, b.last_offset), (i64::MIN, i64::MAX));

    // Large arrays: two- and three-byte counts.
    let (req, _) = decode_share_fetch_request(
        &mut Bytes::from(fixture("ShareFetchRequest", 2, "large")),
        2,
    )
    .expect("decodes");
    assert_eq!(req.topics.len(), 130);
    assert_eq!(req.topics[129].partitions.len(), 200);
    assert_eq!(
        req.topics[129].partitions[0].acknowledgement_batches[0]
            .acknowledge_types
            .len(),
        16_400
    );
    assert_eq!(req.forgotten_topics_data[0].partitions.len(), 300);

    // Unknown tagged fields, kept where they were.
    let (req, _) = decode_share_fetch_request(
        &mut Bytes::from(fixture("ShareFetchRequest", 2, "tagged")),
        2,
    )
    .expect("decodes");
    let top: BTreeMap<i32, Bytes> = [
        (0, Bytes::from_static(b"zero")),
        (300, Bytes::from_static(b"three hundred")),
    ]
    .into();
    assert_eq!(req.unknown_tagged_fields, top);
    let t = &req.topics[0];
    assert_eq!(t.unknown_tagged_fields[&0], Bytes::from_static(b"topic"));
    assert_eq!(t.partitions[0].unknown_tagged_fields[&300], Bytes::new());
    assert_eq!(
        t.partitions[0].acknowledgement_batches[0].unknown_tagged_fields[&7],
        Bytes::from_static(&[1, 2])
    );
    assert_eq!(
        req.forgotten_topics_data[0].unknown_tagged_fields[&20_000].len(),
        130
    );

    // The response fields v2 and v1 add.
    let r = ShareAcknowledgeResponseV2::decode(
        &mut Bytes::from(fixture("ShareAcknowledgeResponse", 2, "typical")),
        2,
    )
    .expect("decodes");
    assert_eq!(r.acquisition_lock_timeout_ms, 30_000);
    let p = &r.response.responses[0].partitions;
    assert_eq!(p[1].error_code, 121);
    assert_eq!(p[2].error_message, Some(s("")));
    assert_eq!(p[2].current_leader.leader_id, 2);
    assert_eq!(r.response.node_endpoints[1].rack, None);
    let r = DescribeShareGroupOffsetsResponseV1::decode(
        &mut Bytes::from(fixture("DescribeShareGroupOffsetsResponse", 1, "typical")),
        1,
    )
    .expect("decodes");
    assert_eq!(r.lags, vec![0, 42, -1]);
    assert_eq!(r.response.groups[1].error_code, 69);
    let r = DescribeShareGroupOffsetsResponseV1::decode(
        &mut Bytes::from(fixture("DescribeShareGroupOffsetsResponse", 1, "extremes")),
        1,
    )
    .expect("decodes");
    assert_eq!(r.lags, vec![i64::MIN, i64::MAX]);
}

/// Every strict prefix of every small fixture is an error.
#[test]
fn every_truncated_fixture_is_an_error() {
    let mut cuts = 0;
    for f in fixtures() {
        if f.bytes.len() > 2048 {
            continue;
        }
        for cut in 0..f.bytes.len() {
            let mut b = Bytes::copy_from_slice(&f.bytes[..cut]);
            let v = f.version;
            let failed = match f.message.as_str() {
                "ShareFetchRequest" => decode_share_fetch_request(&mut b, v).is_err(),
                "ShareAcknowledgeRequest" => decode_share_acknowledge_request(&mut b, v).is_err(),
                "ShareAcknowledgeResponse" => {
                    ShareAcknowledgeResponseV2::decode(&mut b, v).is_err()
                }
                "DescribeShareGroupOffsetsResponse" => {
                    DescribeShareGroupOffsetsResponseV1::decode(&mut b, v).is_err()
                }
                _ => continue,
            };
            assert!(failed, "{} cut at {cut} decoded", f.file);
            cuts += 1;
        }
    }
    assert!(cuts > 1000, "{cuts}");
}

// ---- hostile input ---------------------------------------------------------

/// A ShareFetch v2 body up to its Topics count: null group and member,
/// zeros, mode 0, not renew.
fn fetch_v2_prefix() -> Vec<u8> {
    let mut b = vec![0, 0];
    b.extend_from_slice(&[0; 24]);
    b.extend_from_slice(&[0, 0]);
    b
}

#[test]
fn hostile_lengths_and_counts_are_refused_before_allocating() {
    let decode = |b: Vec<u8>| decode_share_fetch_request(&mut Bytes::from(b), 2);
    // Topics: 2^32 - 2 elements in a few bytes.
    let mut b = fetch_v2_prefix();
    b.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
    b.extend_from_slice(&[0; 40]);
    assert!(matches!(
        decode(b),
        Err(WireError::TooMany {
            field: "Topics",
            count: 4_294_967_294,
            ..
        })
    ),);
    // One topic whose AcknowledgeTypes claims 100 entries in 10 bytes.
    let mut b = fetch_v2_prefix();
    b.push(2); // one topic
    b.extend_from_slice(&[7; 16]);
    b.push(2); // one partition
    b.extend_from_slice(&[0, 0, 0, 1]);
    b.push(2); // one batch
    b.extend_from_slice(&[0; 16]);
    b.push(101); // 100 types
    b.extend_from_slice(&[1; 10]);
    assert!(matches!(
        decode(b),
        Err(WireError::TooMany {
            field: "AcknowledgeTypes",
            count: 100,
            ..
        })
    ));
    // A group id claiming more bytes than remain.
    let mut b = vec![0x80, 0x01]; // 127 bytes
    b.extend_from_slice(b"short");
    assert!(matches!(
        decode(b),
        Err(WireError::Truncated {
            field: "GroupId",
            needed: 127,
            remaining: 5
        })
    ));
    // A six-byte varint, and one past 32 bits.
    assert!(matches!(
        decode(vec![0x80, 0x80, 0x80, 0x80, 0x80, 0x01]),
        Err(WireError::BadVarint { field: "GroupId" })
    ));
    assert!(matches!(
        decode(vec![0xff, 0xff, 0xff, 0xff, 0x7f]),
        Err(WireError::BadVarint { field: "GroupId" })
    ));
    // Null where the spec allows none.
    let mut b = fetch_v2_prefix();
    b.push(0);
    assert!(matches!(
        decode(b),
        Err(WireError::Null { field: "Topics" })
    ));
    // A group id that is not UTF-8.
    assert!(matches!(
        decode(vec![3, 0xc3, 0x28]),
        Err(WireError::NotUtf8 { field: "GroupId" })
    ));
    // Tagged fields: more than the bytes can hold, and a tag past i32.
    let mut b = fetch_v2_prefix();
    b.extend_from_slice(&[1, 1, 100, 0, 0]);
    assert!(matches!(
        decode(b),
        Err(WireError::TooMany {
            field: "tagged fields",
            count: 100,
            ..
        })
    ));
    let mut b = fetch_v2_prefix();
    b.extend_from_slice(&[1, 1, 1, 0x80, 0x80, 0x80, 0x80, 0x08, 0]);
    assert!(matches!(
        decode(b),
        Err(WireError::BadTag { tag: 2_147_483_648 })
    ));
    // Versions without a hand codec.
    for v in [0, 3] {
        assert!(matches!(
            decode_share_fetch_request(&mut Bytes::new(), v),
            Err(WireError::Version { .. })
        ));
    }
    assert!(decode_request(ApiKey::ShareFetch, 1, &mut Bytes::new()).is_err());
    assert!(decode_request(ApiKey::Fetch, 2, &mut Bytes::new()).is_err());
}

#[test]
fn a_lag_for_every_partition() {
    let mut r = DescribeShareGroupOffsetsResponseV1::default();
    let mut g = DescribeShareGroupOffsetsResponseGroup::default();
    let mut t = DescribeShareGroupOffsetsResponseTopic::default();
    t.partitions = vec![Default::default(), Default::default()];
    g.topics = vec![t];
    r.response.groups = vec![g];
    r.lags = vec![5];
    let mut out = Vec::new();
    assert_eq!(
        r.encode_at(1, &mut out),
        Err(WireError::LagCount {
            given: 1,
            partitions: 2
        })
    );
    assert!(r.compute_size(0).is_err(), "the Encodable writes v1");
    // v0 has no lags to count.
    assert!(r.encode_at(0, &mut out).is_ok());
    r.lags = vec![5, 6];
    assert!(r.encode_at(1, &mut Vec::new()).is_ok());
}

/// The v2 response goes out as dispatch frames it: response header v1,
/// then the v2 body.
#[test]
fn v2_response_frames_through_encode_response() {
    let mut r = ShareAcknowledgeResponseV2::default();
    r.response.error_code = 5;
    r.acquisition_lock_timeout_ms = 15_000;
    let frame =
        crate::handlers::encode_response(ApiKey::ShareAcknowledge, 2, 42, &r).expect("encodes");
    // size, correlation id, no header tags, throttle, error code, null
    // message, lock timeout, no responses, no endpoints, no tags.
    let body = [0, 0, 0, 0, 0, 5, 0, 0, 0, 0x3a, 0x98, 1, 1, 0];
    let mut expected = ((4 + 1 + body.len()) as i32).to_be_bytes().to_vec();
    expected.extend_from_slice(&42i32.to_be_bytes());
    expected.push(0);
    expected.extend_from_slice(&body);
    assert_eq!(&frame[..], &expected[..]);
}

// ---- properties --------------------------------------------------------------

fn str_bytes() -> impl Strategy<Value = StrBytes> {
    prop_oneof![
        Just(String::new()),
        "[a-z0-9._-]{1,20}",
        "\\PC{0,40}",
        "[a-z]{120,140}", // a two-byte compact length
    ]
    .prop_map(StrBytes::from_string)
}

fn uuid() -> impl Strategy<Value = Uuid> {
    any::<[u8; 16]>().prop_map(Uuid::from_bytes)
}

fn tags() -> impl Strategy<Value = BTreeMap<i32, Bytes>> {
    prop_oneof![
        3 => Just(BTreeMap::new()),
        1 => proptest::collection::btree_map(
            prop_oneof![0..5i32, 120..140i32, 16_000..17_000i32, Just(i32::MAX)],
            proptest::collection::vec(any::<u8>(), 0..140).prop_map(Bytes::from),
            0..3,
        ),
    ]
}

fn ack_types() -> impl Strategy<Value = Vec<i8>> {
    prop_oneof![
        4 => proptest::collection::vec(0..5i8, 0..6),
        1 => proptest::collection::vec(any::<i8>(), 120..140),
    ]
}

type Batch = (i64, i64, Vec<i8>, BTreeMap<i32, Bytes>);

fn batch() -> impl Strategy<Value = Batch> {
    (any::<i64>(), any::<i64>(), ack_types(), tags())
}

fn fetch_request() -> impl Strategy<Value = (ShareFetchRequest, ShareFetchV2Extras)> {
    let partition = (
        any::<i32>(),
        proptest::collection::vec(batch(), 0..3),
        tags(),
    )
        .prop_map(|(i, batches, tags)| {
            let mut p = FetchPartition::default();
            p.partition_index = i;
            p.acknowledgement_batches = batches
                .into_iter()
                .map(|(f, l, t, g)| {
                    let mut b = share_fetch_request::AcknowledgementBatch::default();
                    b.first_offset = f;
                    b.last_offset = l;
                    b.acknowledge_types = t;
                    b.unknown_tagged_fields = g;
                    b
                })
                .collect();
            p.unknown_tagged_fields = tags;
            p
        });
    let topic = (uuid(), proptest::collection::vec(partition, 0..3), tags()).prop_map(
        |(id, partitions, tags)| {
            let mut t = FetchTopic::default();
            t.topic_id = id;
            t.partitions = partitions;
            t.unknown_tagged_fields = tags;
            t
        },
    );
    let forgotten = (
        uuid(),
        proptest::collection::vec(any::<i32>(), 0..4),
        tags(),
    )
        .prop_map(|(id, partitions, tags)| {
            let mut t = ForgottenTopic::default();
            t.topic_id = id;
            t.partitions = partitions;
            t.unknown_tagged_fields = tags;
            t
        });
    (
        (
            proptest::option::of(str_bytes()),
            proptest::option::of(str_bytes()),
            any::<[i32; 6]>(),
        ),
        proptest::collection::vec(topic, 0..3),
        proptest::collection::vec(forgotten, 0..2),
        tags(),
        (any::<i8>(), any::<bool>()),
    )
        .prop_map(|((g, m, ints), topics, forgotten, tags, (mode, renew))| {
            let mut r = ShareFetchRequest::default();
            r.group_id = g.map(GroupId);
            r.member_id = m;
            r.share_session_epoch = ints[0];
            r.max_wait_ms = ints[1];
            r.min_bytes = ints[2];
            r.max_bytes = ints[3];
            r.max_records = ints[4];
            r.batch_size = ints[5];
            r.topics = topics;
            r.forgotten_topics_data = forgotten;
            r.unknown_tagged_fields = tags;
            (
                r,
                ShareFetchV2Extras {
                    acquire_mode: mode,
                    is_renew_ack: renew,
                },
            )
        })
}

fn acknowledge_request(
) -> impl Strategy<Value = (ShareAcknowledgeRequest, ShareAcknowledgeV2Extras)> {
    let partition = (
        any::<i32>(),
        proptest::collection::vec(batch(), 0..3),
        tags(),
    )
        .prop_map(|(i, batches, tags)| {
            let mut p = AcknowledgePartition::default();
            p.partition_index = i;
            p.acknowledgement_batches = batches
                .into_iter()
                .map(|(f, l, t, g)| {
                    let mut b = share_acknowledge_request::AcknowledgementBatch::default();
                    b.first_offset = f;
                    b.last_offset = l;
                    b.acknowledge_types = t;
                    b.unknown_tagged_fields = g;
                    b
                })
                .collect();
            p.unknown_tagged_fields = tags;
            p
        });
    let topic = (uuid(), proptest::collection::vec(partition, 0..3), tags()).prop_map(
        |(id, partitions, tags)| {
            let mut t = AcknowledgeTopic::default();
            t.topic_id = id;
            t.partitions = partitions;
            t.unknown_tagged_fields = tags;
            t
        },
    );
    (
        proptest::option::of(str_bytes()),
        proptest::option::of(str_bytes()),
        any::<i32>(),
        proptest::collection::vec(topic, 0..3),
        tags(),
        any::<bool>(),
    )
        .prop_map(|(g, m, epoch, topics, tags, renew)| {
            let mut r = ShareAcknowledgeRequest::default();
            r.group_id = g.map(GroupId);
            r.member_id = m;
            r.share_session_epoch = epoch;
            r.topics = topics;
            r.unknown_tagged_fields = tags;
            (
                r,
                ShareAcknowledgeV2Extras {
                    is_renew_ack: renew,
                },
            )
        })
}

fn acknowledge_response() -> impl Strategy<Value = ShareAcknowledgeResponseV2> {
    let partition = (
        any::<i32>(),
        any::<i16>(),
        proptest::option::of(str_bytes()),
        (any::<i32>(), any::<i32>(), tags()),
        tags(),
    )
        .prop_map(|(i, e, m, (lid, lep, ltags), tags)| {
            let mut p = PartitionData::default();
            p.partition_index = i;
            p.error_code = e;
            p.error_message = m;
            let mut l = LeaderIdAndEpoch::default();
            l.leader_id = lid;
            l.leader_epoch = lep;
            l.unknown_tagged_fields = ltags;
            p.current_leader = l;
            p.unknown_tagged_fields = tags;
            p
        });
    let topic = (uuid(), proptest::collection::vec(partition, 0..3), tags()).prop_map(
        |(id, partitions, tags)| {
            let mut t = ShareAcknowledgeTopicResponse::default();
            t.topic_id = id;
            t.partitions = partitions;
            t.unknown_tagged_fields = tags;
            t
        },
    );
    let node = (
        any::<i32>(),
        str_bytes(),
        any::<i32>(),
        proptest::option::of(str_bytes()),
        tags(),
    )
        .prop_map(|(id, host, port, rack, tags)| {
            let mut n = NodeEndpoint::default();
            n.node_id = BrokerId(id);
            n.host = host;
            n.port = port;
            n.rack = rack;
            n.unknown_tagged_fields = tags;
            n
        });
    (
        (
            any::<i32>(),
            any::<i16>(),
            proptest::option::of(str_bytes()),
        ),
        proptest::collection::vec(topic, 0..3),
        proptest::collection::vec(node, 0..3),
        tags(),
        any::<i32>(),
    )
        .prop_map(|((throttle, e, m), responses, nodes, tags, lock)| {
            let mut r = ShareAcknowledgeResponse::default();
            r.throttle_time_ms = throttle;
            r.error_code = e;
            r.error_message = m;
            r.responses = responses;
            r.node_endpoints = nodes;
            r.unknown_tagged_fields = tags;
            ShareAcknowledgeResponseV2 {
                response: r,
                acquisition_lock_timeout_ms: lock,
            }
        })
}

fn offsets_response() -> impl Strategy<Value = DescribeShareGroupOffsetsResponseV1> {
    let partition = (
        (any::<i32>(), any::<i64>(), any::<i32>(), any::<i64>()),
        (any::<i16>(), proptest::option::of(str_bytes()), tags()),
    )
        .prop_map(|((i, start, epoch, lag), (e, m, tags))| {
            let mut p = DescribeShareGroupOffsetsResponsePartition::default();
            p.partition_index = i;
            p.start_offset = start;
            p.leader_epoch = epoch;
            p.error_code = e;
            p.error_message = m;
            p.unknown_tagged_fields = tags;
            (p, lag)
        });
    let topic = (
        str_bytes(),
        uuid(),
        proptest::collection::vec(partition, 0..3),
        tags(),
    )
        .prop_map(|(name, id, partitions, tags)| {
            let mut t = DescribeShareGroupOffsetsResponseTopic::default();
            t.topic_name = TopicName(name);
            t.topic_id = id;
            let (parts, lags): (Vec<_>, Vec<_>) = partitions.into_iter().unzip();
            t.partitions = parts;
            t.unknown_tagged_fields = tags;
            (t, lags)
        });
    let group = (
        str_bytes(),
        proptest::collection::vec(topic, 0..3),
        any::<i16>(),
        proptest::option::of(str_bytes()),
        tags(),
    )
        .prop_map(|(id, topics, e, m, tags)| {
            let mut g = DescribeShareGroupOffsetsResponseGroup::default();
            g.group_id = GroupId(id);
            let (ts, lags): (Vec<_>, Vec<Vec<i64>>) = topics.into_iter().unzip();
            g.topics = ts;
            g.error_code = e;
            g.error_message = m;
            g.unknown_tagged_fields = tags;
            (g, lags.concat())
        });
    (any::<i32>(), proptest::collection::vec(group, 0..3), tags()).prop_map(
        |(throttle, groups, tags)| {
            let mut r = DescribeShareGroupOffsetsResponse::default();
            r.throttle_time_ms = throttle;
            let (gs, lags): (Vec<_>, Vec<Vec<i64>>) = groups.into_iter().unzip();
            r.groups = gs;
            r.unknown_tagged_fields = tags;
            DescribeShareGroupOffsetsResponseV1 {
                response: r,
                lags: lags.concat(),
            }
        },
    )
}

/// Bytes of `n` as an unsigned varint.
fn uvarint_len(n: u64) -> usize {
    let mut v = n;
    let mut bytes = 1;
    while v >= 0x80 {
        v >>= 7;
        bytes += 1;
    }
    bytes
}

/// Bytes of a compact length or count of `n`.
fn compact_len_bytes(n: usize) -> usize {
    uvarint_len(n as u64 + 1)
}

fn nullable_len(s: Option<&str>) -> usize {
    s.map_or(1, |s| compact_len_bytes(s.len()) + s.len())
}

/// `older` with `added` inserted at each offset (offsets into `older`).
fn insert_at(older: &[u8], inserts: &[(usize, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(older.len() + inserts.len() * 8);
    let mut at = 0;
    for (offset, bytes) in inserts {
        out.extend_from_slice(&older[at..*offset]);
        out.extend_from_slice(bytes);
        at = *offset;
    }
    out.extend_from_slice(&older[at..]);
    out
}

/// The bytes of a tagged-field section.
fn tags_len(tags: &BTreeMap<i32, Bytes>) -> usize {
    uvarint_len(tags.len() as u64)
        + tags
            .iter()
            .map(|(t, v)| uvarint_len(*t as u64) + uvarint_len(v.len() as u64) + v.len())
            .sum::<usize>()
}

/// Where v1 of a DescribeShareGroupOffsets response puts each Lag, as
/// offsets into the v0 bytes: after each partition's LeaderEpoch.
fn lag_offsets(r: &DescribeShareGroupOffsetsResponse) -> Vec<usize> {
    let mut at = 4 + compact_len_bytes(r.groups.len());
    let mut out = Vec::new();
    for g in &r.groups {
        at += compact_len_bytes(g.group_id.0.len()) + g.group_id.0.len();
        at += compact_len_bytes(g.topics.len());
        for t in &g.topics {
            at += compact_len_bytes(t.topic_name.0.len()) + t.topic_name.0.len() + 16;
            at += compact_len_bytes(t.partitions.len());
            for p in &t.partitions {
                at += 4 + 8 + 4;
                out.push(at);
                at += 2 + nullable_len(p.error_message.as_deref());
                at += tags_len(&p.unknown_tagged_fields);
            }
            at += tags_len(&t.unknown_tagged_fields);
        }
        at += 2 + nullable_len(g.error_message.as_deref()) + tags_len(&g.unknown_tagged_fields);
    }
    out
}

/// Decoding garbage returns an error or a value that round-trips.
fn garbage_is_harmless(bytes: &[u8]) {
    for v in [1, 2] {
        if let Ok((req, extras)) = decode_share_fetch_request(&mut Bytes::copy_from_slice(bytes), v)
        {
            let mut out = Vec::new();
            encode_share_fetch_request(&req, &extras, v, &mut out).expect("encodes");
            let again = decode_share_fetch_request(&mut Bytes::from(out), v).expect("decodes");
            assert_eq!(again, (req, extras));
        }
        if let Ok((req, extras)) =
            decode_share_acknowledge_request(&mut Bytes::copy_from_slice(bytes), v)
        {
            let mut out = Vec::new();
            encode_share_acknowledge_request(&req, &extras, v, &mut out).expect("encodes");
            let again =
                decode_share_acknowledge_request(&mut Bytes::from(out), v).expect("decodes");
            assert_eq!(again, (req, extras));
        }
        if let Ok(r) = ShareAcknowledgeResponseV2::decode(&mut Bytes::copy_from_slice(bytes), v) {
            let mut out = Vec::new();
            r.encode_at(v, &mut out).expect("encodes");
            let again =
                ShareAcknowledgeResponseV2::decode(&mut Bytes::from(out), v).expect("decodes");
            assert_eq!(again, r);
        }
    }
    for v in [0, 1] {
        if let Ok(r) =
            DescribeShareGroupOffsetsResponseV1::decode(&mut Bytes::copy_from_slice(bytes), v)
        {
            let mut out = Vec::new();
            r.encode_at(v, &mut out).expect("encodes");
            let again = DescribeShareGroupOffsetsResponseV1::decode(&mut Bytes::from(out), v)
                .expect("decodes");
            assert_eq!(again, r);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn share_fetch_v2_is_v1_with_mode_and_renew_after_batch_size(
        (req, extras) in fetch_request(),
        cut in any::<prop::sample::Index>(),
        flip in any::<(prop::sample::Index, u8)>(),
    ) {
        let mut v1 = Vec::new();
        encode_share_fetch_request(&req, &extras, 1, &mut v1).expect("v1");
        prop_assert_eq!(&v1, &crate_encode(&req, 1), "the crate's v1 bytes");
        let mut v2 = Vec::new();
        encode_share_fetch_request(&req, &extras, 2, &mut v2).expect("v2");
        let at = nullable_len(req.group_id.as_ref().map(|g| g.0.as_str()))
            + nullable_len(req.member_id.as_deref())
            + 6 * 4;
        let added = vec![extras.acquire_mode as u8, u8::from(extras.is_renew_ack)];
        prop_assert_eq!(&v2, &insert_at(&v1, &[(at, added)]));
        let mut b = Bytes::from(v2.clone());
        let back = decode_share_fetch_request(&mut b, 2).expect("decodes");
        prop_assert!(b.is_empty());
        prop_assert_eq!(&back, &(req.clone(), extras));
        let mut b = Bytes::from(v1);
        prop_assert_eq!(
            decode_share_fetch_request(&mut b, 1).expect("decodes"),
            (req, ShareFetchV2Extras::default())
        );
        let cut = cut.index(v2.len());
        prop_assert!(decode_share_fetch_request(&mut Bytes::copy_from_slice(&v2[..cut]), 2).is_err());
        let mut garbled = v2;
        let i = flip.0.index(garbled.len());
        garbled[i] ^= flip.1 | 1;
        garbage_is_harmless(&garbled);
    }

    #[test]
    fn share_acknowledge_v2_is_v1_with_renew_after_the_epoch(
        (req, extras) in acknowledge_request(),
        cut in any::<prop::sample::Index>(),
        flip in any::<(prop::sample::Index, u8)>(),
    ) {
        let mut v1 = Vec::new();
        encode_share_acknowledge_request(&req, &extras, 1, &mut v1).expect("v1");
        prop_assert_eq!(&v1, &crate_encode(&req, 1), "the crate's v1 bytes");
        let mut v2 = Vec::new();
        encode_share_acknowledge_request(&req, &extras, 2, &mut v2).expect("v2");
        let at = nullable_len(req.group_id.as_ref().map(|g| g.0.as_str()))
            + nullable_len(req.member_id.as_deref())
            + 4;
        prop_assert_eq!(&v2, &insert_at(&v1, &[(at, vec![u8::from(extras.is_renew_ack)])]));
        let mut b = Bytes::from(v2.clone());
        prop_assert_eq!(&decode_share_acknowledge_request(&mut b, 2).expect("decodes"), &(req, extras));
        prop_assert!(b.is_empty());
        let cut = cut.index(v2.len());
        prop_assert!(
            decode_share_acknowledge_request(&mut Bytes::copy_from_slice(&v2[..cut]), 2).is_err()
        );
        let mut garbled = v2;
        let i = flip.0.index(garbled.len());
        garbled[i] ^= flip.1 | 1;
        garbage_is_harmless(&garbled);
    }

    #[test]
    fn share_acknowledge_response_v2_is_v1_with_the_lock_timeout_after_the_message(
        r in acknowledge_response(),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut v1 = Vec::new();
        r.encode_at(1, &mut v1).expect("v1");
        prop_assert_eq!(&v1, &crate_encode(&r.response, 1), "the crate's v1 bytes");
        let v2 = crate_encode(&r, 1); // the Encodable writes v2 whatever it is told
        let at = 4 + 2 + nullable_len(r.response.error_message.as_deref());
        let added = r.acquisition_lock_timeout_ms.to_be_bytes().to_vec();
        prop_assert_eq!(&v2, &insert_at(&v1, &[(at, added)]));
        let mut b = Bytes::from(v2.clone());
        prop_assert_eq!(&ShareAcknowledgeResponseV2::decode(&mut b, 2).expect("decodes"), &r);
        prop_assert!(b.is_empty());
        let cut = cut.index(v2.len());
        prop_assert!(ShareAcknowledgeResponseV2::decode(&mut Bytes::copy_from_slice(&v2[..cut]), 2).is_err());
    }

    #[test]
    fn describe_share_group_offsets_v1_is_v0_with_a_lag_after_each_leader_epoch(
        r in offsets_response(),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut v0 = Vec::new();
        r.encode_at(0, &mut v0).expect("v0");
        prop_assert_eq!(&v0, &crate_encode(&r.response, 0), "the crate's v0 bytes");
        let v1 = crate_encode(&r, 0); // the Encodable writes v1 whatever it is told
        let inserts: Vec<(usize, Vec<u8>)> = lag_offsets(&r.response)
            .into_iter()
            .zip(&r.lags)
            .map(|(at, lag)| (at, lag.to_be_bytes().to_vec()))
            .collect();
        prop_assert_eq!(inserts.len(), r.lags.len());
        prop_assert_eq!(&v1, &insert_at(&v0, &inserts));
        let mut b = Bytes::from(v1.clone());
        prop_assert_eq!(&DescribeShareGroupOffsetsResponseV1::decode(&mut b, 1).expect("decodes"), &r);
        prop_assert!(b.is_empty());
        let cut = cut.index(v1.len());
        prop_assert!(
            DescribeShareGroupOffsetsResponseV1::decode(&mut Bytes::copy_from_slice(&v1[..cut]), 1).is_err()
        );
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        garbage_is_harmless(&bytes);
    }
}
