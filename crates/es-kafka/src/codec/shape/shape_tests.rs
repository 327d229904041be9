//! Tests of the pre-decode bounds check: the generated table agrees with the
//! kafka-protocol crate's encoding at every served version, and hostile
//! counts and lengths are refused before anything is allocated.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use uuid::Uuid;

use super::*;
use crate::versions::{self, PRODUCE_SERVED_MIN};

fn encode<T: Encodable>(msg: &T, version: i16) -> Vec<u8> {
    let mut buf = BytesMut::new();
    msg.encode(&mut buf, version).expect("encodes");
    buf.to_vec()
}

/// Calls `$m! { Key => RequestType, ... }` with every served API.
macro_rules! served_types {
    ($m:ident, $($arg:tt)*) => {
        $m! { ($($arg)*)
        Produce => ProduceRequest, Fetch => FetchRequest, ListOffsets => ListOffsetsRequest,
        Metadata => MetadataRequest, OffsetCommit => OffsetCommitRequest,
        OffsetFetch => OffsetFetchRequest, FindCoordinator => FindCoordinatorRequest,
        JoinGroup => JoinGroupRequest, Heartbeat => HeartbeatRequest,
        LeaveGroup => LeaveGroupRequest, SyncGroup => SyncGroupRequest,
        DescribeGroups => DescribeGroupsRequest, ListGroups => ListGroupsRequest,
        SaslHandshake => SaslHandshakeRequest, SaslAuthenticate => SaslAuthenticateRequest,
        DescribeUserScramCredentials => DescribeUserScramCredentialsRequest,
        AlterUserScramCredentials => AlterUserScramCredentialsRequest,
        DescribeClientQuotas => DescribeClientQuotasRequest,
        AlterClientQuotas => AlterClientQuotasRequest,
        ApiVersions => ApiVersionsRequest, CreateTopics => CreateTopicsRequest,
        DeleteTopics => DeleteTopicsRequest, DeleteRecords => DeleteRecordsRequest,
        InitProducerId => InitProducerIdRequest,
        OffsetForLeaderEpoch => OffsetForLeaderEpochRequest,
        AddPartitionsToTxn => AddPartitionsToTxnRequest,
        AddOffsetsToTxn => AddOffsetsToTxnRequest, EndTxn => EndTxnRequest,
        WriteTxnMarkers => WriteTxnMarkersRequest,
        TxnOffsetCommit => TxnOffsetCommitRequest, DescribeAcls => DescribeAclsRequest,
        CreateAcls => CreateAclsRequest, DeleteAcls => DeleteAclsRequest,
        DescribeConfigs => DescribeConfigsRequest, AlterConfigs => AlterConfigsRequest,
        AlterReplicaLogDirs => AlterReplicaLogDirsRequest,
        DescribeLogDirs => DescribeLogDirsRequest, CreatePartitions => CreatePartitionsRequest,
        DeleteGroups => DeleteGroupsRequest, ElectLeaders => ElectLeadersRequest,
        IncrementalAlterConfigs => IncrementalAlterConfigsRequest,
        AlterPartitionReassignments => AlterPartitionReassignmentsRequest,
        ListPartitionReassignments => ListPartitionReassignmentsRequest,
        OffsetDelete => OffsetDeleteRequest, DescribeQuorum => DescribeQuorumRequest,
        DescribeCluster => DescribeClusterRequest, DescribeProducers => DescribeProducersRequest,
        DescribeTransactions => DescribeTransactionsRequest,
        ListTransactions => ListTransactionsRequest,
        ConsumerGroupHeartbeat => ConsumerGroupHeartbeatRequest,
        ConsumerGroupDescribe => ConsumerGroupDescribeRequest,
        ShareGroupHeartbeat => ShareGroupHeartbeatRequest,
        ShareGroupDescribe => ShareGroupDescribeRequest,
        ShareFetch => ShareFetchRequest, ShareAcknowledge => ShareAcknowledgeRequest,
        DescribeShareGroupOffsets => DescribeShareGroupOffsetsRequest,
        AlterShareGroupOffsets => AlterShareGroupOffsetsRequest,
        DeleteShareGroupOffsets => DeleteShareGroupOffsetsRequest,
        ListConfigResources => ListConfigResourcesRequest,
        DescribeTopicPartitions => DescribeTopicPartitionsRequest,
        }
    };
}

macro_rules! default_of {
    (($key:expr, $v:expr) $($k:ident => $t:ty),* $(,)?) => {
        match $key {
            $(ApiKey::$k => Some(encode(&<$t>::default(), $v)),)*
            _ => None,
        }
    };
}

macro_rules! decodes {
    (($key:expr, $v:expr, $buf:expr) $($k:ident => $t:ty),* $(,)?) => {
        match $key {
            $(ApiKey::$k => Some(<$t>::decode($buf, $v).is_ok()),)*
            _ => None,
        }
    };
}

/// The default request of every served API, encoded by the crate.
fn default_request(key: ApiKey, crate_version: i16) -> Option<Vec<u8>> {
    served_types!(default_of, key, crate_version)
}

/// The default request of a served API at wire version `v`: the crate's
/// encoding, or the hand codec's for a [`versions::BY_HAND`] version.
fn wire_default_request(key: ApiKey, v: i16) -> Option<Vec<u8>> {
    use crate::codec::share_wire;
    if !versions::by_hand(key, v) {
        return default_request(key, versions::crate_version(key, v));
    }
    let mut out = Vec::new();
    match key {
        ApiKey::ShareFetch => share_wire::encode_share_fetch_request(
            &ShareFetchRequest::default(),
            &Default::default(),
            v,
            &mut out,
        ),
        ApiKey::ShareAcknowledge => share_wire::encode_share_acknowledge_request(
            &ShareAcknowledgeRequest::default(),
            &Default::default(),
            v,
            &mut out,
        ),
        _ => return None,
    }
    .ok()?;
    Some(out)
}

/// Whether the crate decodes `buf` as `key`'s request (None: not served).
fn crate_decodes(key: ApiKey, version: i16, buf: &mut Bytes) -> Option<bool> {
    served_types!(decodes, key, version, buf)
}

fn served() -> impl Iterator<Item = (ApiKey, i16)> {
    versions::SUPPORTED.iter().flat_map(|a| {
        (a.min..=a.max)
            .filter(move |&v| a.key != ApiKey::Produce || v >= PRODUCE_SERVED_MIN)
            .map(move |v| (a.key, v))
    })
}

/// The generated lookup by api key finds the message of that key, for
/// every key Kafka defines and none other.
#[test]
fn lookup_by_key_finds_that_key() {
    let mut found = 0;
    for key in -1..=200 {
        if let Some(m) = request(key) {
            assert_eq!(m.api_key, key, "{}", m.name);
            found += 1;
        }
    }
    assert_eq!(found, 95, "Kafka 4.4 defines api keys 0-94");
}

#[test]
fn every_served_version_has_a_shape() {
    for (key, v) in served() {
        let m = request(key as i16).unwrap_or_else(|| panic!("{key:?} has no shape"));
        assert!(m.valid.contains(v), "{key:?} v{v} is outside {:?}", m.valid);
    }
}

/// The table and the crate agree on layout: the crate's encoding of every
/// served API's default request walks to exactly its end.
#[test]
fn default_requests_walk_to_their_end() {
    for (key, v) in served() {
        let body = wire_default_request(key, v)
            .unwrap_or_else(|| panic!("no default request for {key:?}"));
        assert_eq!(
            check_request(key as i16, v, &body),
            Ok(body.len()),
            "{key:?} v{v}"
        );
    }
}

fn metadata_with_topics(n: usize) -> MetadataRequest {
    let mut m = MetadataRequest::default();
    m.topics = Some(
        (0..n)
            .map(|i| {
                let mut t = MetadataRequestTopic::default();
                t.name = Some(TopicName(StrBytes::from_string(format!("topic-{i}"))));
                t
            })
            .collect(),
    );
    m
}

fn produce_request() -> ProduceRequest {
    let mut p = PartitionProduceData::default();
    p.index = 2;
    p.records = Some(Bytes::from_static(&[7u8; 61]));
    let mut t = TopicProduceData::default();
    t.name = TopicName(StrBytes::from_static_str("orders"));
    t.partition_data = vec![p.clone(), p];
    let mut r = ProduceRequest::default();
    r.acks = -1;
    r.timeout_ms = 30_000;
    r.transactional_id = Some(TransactionalId(StrBytes::from_static_str("tx")));
    r.topic_data = vec![t];
    r
}

fn fetch_request(v: i16) -> FetchRequest {
    let mut p = FetchPartition::default();
    p.partition = 1;
    p.fetch_offset = 42;
    p.partition_max_bytes = 1 << 20;
    let mut t = FetchTopic::default();
    t.topic = TopicName(StrBytes::from_static_str("orders"));
    t.partitions = vec![p.clone(), p];
    let mut f = ForgottenTopic::default();
    f.topic = TopicName(StrBytes::from_static_str("old"));
    f.partitions = vec![0, 1, 2];
    let mut r = FetchRequest::default();
    r.max_wait_ms = 500;
    r.topics = vec![t];
    if v >= 7 {
        r.session_id = 7;
        r.session_epoch = 1;
        r.forgotten_topics_data = vec![f];
    }
    if v >= 11 {
        r.rack_id = StrBytes::from_static_str("rack-a");
    }
    if v >= 12 {
        // A tagged field: walked inside its declared size.
        r.cluster_id = Some(StrBytes::from_static_str("cluster"));
    }
    r
}

/// Requests with nested arrays, byte strings and tagged fields walk to
/// their end at every served version.
#[test]
fn populated_requests_walk_to_their_end() {
    for v in PRODUCE_SERVED_MIN..=versions::advertised(ApiKey::Produce).expect("produce").max {
        let body = encode(&produce_request(), v);
        assert_eq!(check_request(0, v, &body), Ok(body.len()), "Produce v{v}");
    }
    let fetch = versions::advertised(ApiKey::Fetch).expect("fetch");
    for v in fetch.min..=fetch.max {
        let r = fetch_request(v);
        let body = encode(&r, v);
        assert_eq!(check_request(1, v, &body), Ok(body.len()), "Fetch v{v}");
    }
    for v in 0..=13 {
        let body = encode(&metadata_with_topics(3), v);
        assert_eq!(check_request(3, v, &body), Ok(body.len()), "Metadata v{v}");
    }
}

/// The request that aborted es: Metadata v12 whose topics array claims
/// 4,294,967,294 entries in a handful of bytes.
#[test]
fn an_oversized_compact_array_is_refused() {
    let mut body = vec![0xfe, 0xff, 0xff, 0xff, 0x0f]; // uvarint 2^32 - 2: 2^32 - 3 topics
    body.extend_from_slice(&[0, 0, 0]); // allow auto-creation, include ops, tags
    let e = check_request(3, 12, &body).expect_err("refused");
    assert_eq!(e.field, "topics");
    assert!(
        matches!(
            e.problem,
            Problem::ArrayTooLong {
                count: 4_294_967_293,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn an_oversized_array_is_refused() {
    // Metadata v1: i32 count, then one topic of two bytes' length prefix.
    let mut body = BytesMut::new();
    body.put_i32(i32::MAX);
    body.put_i16(1);
    body.put_u8(b'a');
    let e = check_request(3, 1, &body).expect_err("refused");
    assert!(matches!(e.problem, Problem::ArrayTooLong { .. }), "{e}");
    // Two topics claimed, each at least two bytes, three bytes present.
    let mut body = BytesMut::new();
    body.put_i32(2);
    body.put_i16(1);
    body.put_u8(b'a');
    let e = check_request(3, 1, &body).expect_err("refused");
    assert!(
        matches!(
            e.problem,
            Problem::ArrayTooLong {
                count: 2,
                element_bytes: 2,
                remaining: 3
            }
        ),
        "{e}"
    );
}

#[test]
fn lengths_past_the_end_negative_lengths_and_long_varints_are_refused() {
    // DeleteGroups v0: a one-element array of a string claiming 300 bytes.
    let mut body = BytesMut::new();
    body.put_i32(1);
    body.put_i16(300);
    body.put_slice(b"short");
    let e = check_request(42, 0, &body).expect_err("refused");
    assert!(
        matches!(
            e.problem,
            Problem::TooLong {
                length: 300,
                remaining: 5
            }
        ),
        "{e}"
    );

    let mut body = BytesMut::new();
    body.put_i32(1);
    body.put_i16(-2);
    let e = check_request(42, 0, &body).expect_err("refused");
    assert_eq!(e.problem, Problem::NegativeLength(-2));

    // DeleteGroups v2 (flexible): a six-byte varint count.
    let body = [0x81, 0x80, 0x80, 0x80, 0x80, 0x00];
    let e = check_request(42, 2, &body).expect_err("refused");
    assert_eq!(e.problem, Problem::BadVarint);

    // Produce v9: a record set claiming 2^31 - 2 bytes.
    let mut body = BytesMut::new();
    body.put_u8(0); // null transactional id
    body.put_i16(-1);
    body.put_i32(1000);
    body.put_u8(2); // one topic
    body.put_u8(2);
    body.put_u8(b't');
    body.put_u8(2); // one partition
    body.put_i32(0);
    body.put_slice(&[0xff, 0xff, 0xff, 0xff, 0x07]);
    let e = check_request(0, 9, &body).expect_err("refused");
    assert_eq!(e.field, "records");
    assert!(matches!(e.problem, Problem::TooLong { .. }), "{e}");
}

/// A known tagged field is walked within its declared size: an array
/// inside it cannot claim the bytes after it.
#[test]
fn a_known_tagged_field_is_held_to_its_size() {
    // Fetch v15's cluster id is tag 0 of the top-level struct, a compact
    // nullable string.
    let r = fetch_request(15);
    let good = encode(&r, 15);
    assert_eq!(check_request(1, 15, &good), Ok(good.len()));
    // The same request with its tagged section replaced by one tag-0 field
    // of declared size 2 whose string claims 100 bytes.
    let mut r2 = r.clone();
    r2.cluster_id = None;
    let mut body = encode(&r2, 15);
    assert_eq!(body.pop(), Some(0), "no top-level tags");
    body.extend_from_slice(&[1, 0, 2, 101, b'x']);
    let e = check_request(1, 15, &body).expect_err("refused");
    assert_eq!(e.field, "cluster_id");
    assert!(
        matches!(
            e.problem,
            Problem::TooLong {
                length: 100,
                remaining: 1
            }
        ),
        "{e}"
    );
}

/// A known tagged field must take exactly its declared size. The crate
/// reads such a field by its layout and goes on after it, so bytes of the
/// size left unread would be read as what follows: found by fuzzing
/// (request_decode), a Fetch v18 whose partition's ReplicaDirectoryId (tag 0,
/// a UUID) declared more than 16 bytes made the crate read a forgotten
/// topic's partition count of four billion from them and ask for 16 GiB.
#[test]
fn a_known_tagged_field_must_fill_its_size() {
    // Top level: Fetch v15's cluster id, "x" (2 bytes) declared as 3.
    let mut r = fetch_request(15);
    r.cluster_id = None;
    let mut body = encode(&r, 15);
    assert_eq!(body.pop(), Some(0), "no top-level tags");
    body.extend_from_slice(&[1, 0, 3, 2, b'x', 0]);
    let e = check_request(1, 15, &body).expect_err("refused");
    assert_eq!(e.field, "cluster_id");
    assert_eq!(
        e.problem,
        Problem::TaggedSize {
            declared: 3,
            used: 2
        }
    );
    // Inside an array: Fetch v17's ReplicaDirectoryId of one partition,
    // declared as 16 + 4 bytes, the 4 bytes the crate would read as the
    // topic's tagged fields, the forgotten topics, ...
    let mut r = fetch_request(17);
    r.topics[0].partitions.truncate(1);
    r.topics[0].partitions[0].replica_directory_id = Uuid::from_bytes([0xab; 16]);
    let good = encode(&r, 17);
    assert_eq!(check_request(1, 17, &good), Ok(good.len()));
    let at = good
        .windows(18)
        .position(|w| w[..2] == [0, 16] && w[2..] == [0xab; 16])
        .expect("the tagged uuid");
    let mut body = good[..at].to_vec();
    body.extend_from_slice(&[0, 20]);
    body.extend_from_slice(&[0xab; 16]);
    body.extend_from_slice(&[0xff, 0xff, 0xff, 0x0f]);
    body.extend_from_slice(&good[at + 18..]);
    let e = check_request(1, 17, &body).expect_err("refused");
    assert_eq!(e.field, "replica_directory_id");
    assert_eq!(
        e.problem,
        Problem::TaggedSize {
            declared: 20,
            used: 16
        }
    );
}

/// Every prefix of a valid request is either refused or walks within its
/// bounds; nothing panics.
#[test]
fn every_truncation_is_refused_without_panicking() {
    let cases: Vec<(i16, i16, Vec<u8>)> = vec![
        (0, 9, encode(&produce_request(), 9)),
        (0, 3, encode(&produce_request(), 3)),
        (1, 15, encode(&fetch_request(15), 15)),
        (1, 4, encode(&fetch_request(4), 4)),
        (3, 12, encode(&metadata_with_topics(4), 12)),
        (3, 4, encode(&metadata_with_topics(4), 4)),
    ];
    for (key, v, body) in cases {
        for cut in 0..body.len() {
            let r = check_request(key, v, &body[..cut]);
            assert!(
                r.is_err(),
                "api {key} v{v} cut at {cut} of {} passed",
                body.len()
            );
        }
    }
}

#[test]
fn the_consumer_subscription_is_checked_too() {
    let shape = data("ConsumerProtocolSubscription").expect("spec");
    let mut s = ConsumerProtocolSubscription::default();
    s.topics = vec![
        StrBytes::from_static_str("a"),
        StrBytes::from_static_str("bb"),
    ];
    let body = encode(&s, 0);
    assert_eq!(check(shape, 0, &body), Ok(body.len()));
    let mut hostile = BytesMut::new();
    hostile.put_i32(i32::MAX);
    assert!(check(shape, 0, &hostile).is_err());
}

/// A request frame (after the size prefix) as a client writes it: header
/// with `client_id`, then the crate's encoding of the body.
fn frame_of(key: ApiKey, version: i16, client_id: &[u8], body: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&(key as i16).to_be_bytes());
    f.extend_from_slice(&version.to_be_bytes());
    f.extend_from_slice(&7i32.to_be_bytes());
    f.extend_from_slice(&(client_id.len() as i16).to_be_bytes());
    f.extend_from_slice(client_id);
    if key.request_header_version(version) >= 2 {
        f.push(0);
    }
    f.extend_from_slice(body);
    f
}

/// Decodes a (repaired) frame with the crate as the handlers do.
fn decode_frame<T: kafka_protocol::protocol::Decodable>(
    key: ApiKey,
    version: i16,
    frame: Vec<u8>,
) -> (RequestHeader, T) {
    let mut b = Bytes::from(frame);
    let h = RequestHeader::decode(&mut b, key.request_header_version(version)).expect("header");
    let body = T::decode(&mut b, version).expect("body");
    (h, body)
}

fn check_whole(key: ApiKey, version: i16, frame: &[u8]) -> Result<Option<Vec<u8>>, ShapeError> {
    check_frame(
        frame,
        key as i16,
        version,
        key.request_header_version(version),
    )
}

#[test]
fn a_sound_frame_is_not_copied() {
    for v in [1, 12] {
        let f = frame_of(
            ApiKey::Metadata,
            v,
            b"client",
            &encode(&metadata_with_topics(2), v),
        );
        assert_eq!(check_whole(ApiKey::Metadata, v, &f), Ok(None), "v{v}");
    }
}

/// Kafka reads strings with Java's lossy UTF-8 decoding; es repairs such a
/// string to what Kafka reads, in compact and int16-length encodings.
#[test]
fn strings_that_are_not_utf8_read_as_kafka_reads_them() {
    for v in [1i16, 12] {
        let mut body = encode(&metadata_with_topics(1), v);
        // Rename "topic-0" (7 bytes) to the 2 invalid bytes c3 28 in place.
        let at = body
            .windows(7)
            .position(|w| w == b"topic-0")
            .expect("name in body");
        let flexible = v >= 9;
        let prefix_len = if flexible { 1 } else { 2 };
        let mut hostile = body[..at - prefix_len].to_vec();
        if flexible {
            hostile.push(3);
        } else {
            hostile.extend_from_slice(&2i16.to_be_bytes());
        }
        hostile.extend_from_slice(&[0xc3, 0x28]);
        hostile.extend_from_slice(&body[at + 7..]);
        body = hostile;
        let f = frame_of(ApiKey::Metadata, v, b"client", &body);
        let repaired = check_whole(ApiKey::Metadata, v, &f)
            .expect("sound")
            .expect("repaired");
        let (_, m): (_, MetadataRequest) = decode_frame(ApiKey::Metadata, v, repaired);
        let names: Vec<String> = m
            .topics
            .expect("topics")
            .into_iter()
            .map(|t| t.name.expect("name").to_string())
            .collect();
        assert_eq!(names, vec!["\u{fffd}(".to_string()], "v{v}");
    }
}

#[test]
fn a_client_id_that_is_not_utf8_is_repaired() {
    let v = 12;
    let f = frame_of(
        ApiKey::Metadata,
        v,
        &[0xff, 0xfe, b'x'],
        &encode(&metadata_with_topics(1), v),
    );
    let repaired = check_whole(ApiKey::Metadata, v, &f)
        .expect("sound")
        .expect("repaired");
    let (h, _): (_, MetadataRequest) = decode_frame(ApiKey::Metadata, v, repaired);
    assert_eq!(
        h.client_id.map(|c| c.to_string()),
        Some("\u{fffd}\u{fffd}x".to_string())
    );
}

/// A string inside a tagged field grows when repaired: the tagged field's
/// declared size grows with it.
#[test]
fn a_repaired_string_in_a_tagged_field_resizes_the_field() {
    let v = 15;
    let mut r = fetch_request(v);
    r.cluster_id = None;
    let mut body = encode(&r, v);
    assert_eq!(body.pop(), Some(0), "no top-level tags");
    // One tagged field: tag 0 (cluster id), size 3, compact string of 2
    // invalid bytes.
    body.extend_from_slice(&[1, 0, 3, 3, 0xc3, 0x28]);
    let f = frame_of(ApiKey::Fetch, v, b"client", &body);
    let repaired = check_whole(ApiKey::Fetch, v, &f)
        .expect("sound")
        .expect("repaired");
    let (_, got): (_, FetchRequest) = decode_frame(ApiKey::Fetch, v, repaired);
    assert_eq!(
        got.cluster_id.map(|c| c.to_string()),
        Some("\u{fffd}(".into())
    );
    assert_eq!(got.rack_id.to_string(), "rack-a");
}

mod hostile {
    use proptest::prelude::*;

    use super::*;

    /// Every served (api key, version) with its default request body.
    fn bodies() -> Vec<(ApiKey, i16, Vec<u8>)> {
        served()
            .filter_map(|(k, v)| {
                default_request(k, versions::crate_version(k, v))
                    .map(|b| (k, versions::crate_version(k, v), b))
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]

        /// Whatever a request body holds, the check never panics, and a
        /// body it passes decodes (or fails to) without the crate asking
        /// for more than the body can describe: a count the check let
        /// through unbounded would abort this test process.
        #[test]
        fn any_body_is_checked_then_decoded_without_harm(
            pick in any::<prop::sample::Index>(),
            edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..4), 0..6),
            tail in prop::collection::vec(any::<u8>(), 0..48),
        ) {
            let all = bodies();
            let (key, v, mut body) = all[pick.index(all.len())].clone();
            body.extend_from_slice(&tail);
            for (at, byte, how) in edits {
                let i = at.index(body.len().max(1)).min(body.len());
                // A random byte, or a huge int32 or varint count written
                // over whatever field starts at `i`.
                let patch: &[u8] = match how {
                    0 => &[byte],
                    1 => &[0x7f, 0xff, 0xff, byte],
                    2 => &[0xfe, 0xff, 0xff, 0xff, 0x0f],
                    _ => &[0xff, 0xff, 0xff, 0x7f],
                };
                let end = (i + patch.len()).min(body.len());
                body.splice(i..end, patch.iter().copied());
            }
            if check_request(key as i16, v, &body).is_ok() {
                let mut b = Bytes::from(body);
                let _ = crate_decodes(key, v, &mut b);
            }
        }
    }
}
