//! Our ApiVersions table: the single source of what es advertises and decodes.
//!
//! Every request is checked against [`SUPPORTED`] by (api key, version) before
//! its body is decoded, and the ApiVersions response is built from the same
//! table, so we can never advertise a version we do not serve or serve one we
//! do not advertise. A version is listed only when its handler exists and is
//! tested. The one deliberate exception is Produce v0-2: Kafka 4 advertises
//! Produce from v0 because librdkafka refuses to compress unless it sees v0
//! (KAFKA-18659), and answers v0-2 with UNSUPPORTED_VERSION; we do the same.
//!
//! A few versions are newer than the kafka-protocol crate knows. They are
//! served when their request has the shape of a version the crate decodes
//! ([`PAST_CRATE`]): the body is decoded and encoded at that version
//! ([`crate_version`]), and the handler adds what the newer response carries.
//! Where the newer request itself differs, es decodes it by hand
//! ([`BY_HAND`], `codec::share_wire`) into the crate's structs of the
//! version before. Either way the version's layout is known, so a request
//! at it that is not advertised gets the answer of a known but unserved
//! version, not of an unparseable one.

use kafka_protocol::messages::ApiKey;

/// One advertised API: inclusive version range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApiRange {
    pub key: ApiKey,
    pub min: i16,
    pub max: i16,
}

const fn r(key: ApiKey, min: i16, max: i16) -> ApiRange {
    ApiRange { key, min, max }
}

/// Lowest Produce version we actually serve (v0-2 are advertised, then refused).
pub const PRODUCE_SERVED_MIN: i16 = 3;

/// Everything es advertises, ordered by api key.
pub const SUPPORTED: &[ApiRange] = &[
    r(ApiKey::Produce, 0, 13),
    r(ApiKey::Fetch, 4, 18),
    r(ApiKey::ListOffsets, 1, 11),
    r(ApiKey::Metadata, 0, 13),
    r(ApiKey::OffsetCommit, 2, 9),
    r(ApiKey::OffsetFetch, 1, 9),
    r(ApiKey::FindCoordinator, 0, 6),
    r(ApiKey::JoinGroup, 0, 9),
    r(ApiKey::Heartbeat, 0, 4),
    r(ApiKey::LeaveGroup, 0, 5),
    r(ApiKey::SyncGroup, 0, 5),
    r(ApiKey::DescribeGroups, 0, 6),
    r(ApiKey::ListGroups, 0, 5),
    r(ApiKey::SaslHandshake, 0, 1),
    r(ApiKey::ApiVersions, 0, 4),
    r(ApiKey::CreateTopics, 2, 7),
    r(ApiKey::DeleteTopics, 1, 6),
    r(ApiKey::DeleteRecords, 0, 2),
    r(ApiKey::InitProducerId, 0, 5),
    r(ApiKey::OffsetForLeaderEpoch, 2, 4),
    r(ApiKey::AddPartitionsToTxn, 0, 5),
    r(ApiKey::AddOffsetsToTxn, 0, 4),
    // EndTxn and TxnOffsetCommit stop at v4: v5 is transaction version 2,
    // which es does not finalize (see handlers/txn.rs).
    r(ApiKey::EndTxn, 0, 4),
    // Inter-broker: a transaction coordinator's markers for partitions
    // another broker leads (handlers/write_txn_markers.rs). v2 adds the
    // transaction version (2), which es does not finalize.
    r(ApiKey::WriteTxnMarkers, 1, 1),
    r(ApiKey::TxnOffsetCommit, 0, 4),
    // ACL APIs answer as Kafka does without an authorizer (handlers/acls.rs).
    r(ApiKey::DescribeAcls, 1, 3),
    r(ApiKey::CreateAcls, 1, 3),
    r(ApiKey::DeleteAcls, 1, 3),
    r(ApiKey::DescribeConfigs, 1, 4),
    r(ApiKey::AlterConfigs, 0, 2),
    r(ApiKey::AlterReplicaLogDirs, 1, 2),
    r(ApiKey::DescribeLogDirs, 1, 5),
    // SASL outside an exchange (handlers/sasl.rs); the exchange itself is
    // the connection's (security/sasl.rs).
    r(ApiKey::SaslAuthenticate, 0, 2),
    r(ApiKey::CreatePartitions, 0, 3),
    r(ApiKey::DeleteGroups, 0, 2),
    r(ApiKey::ElectLeaders, 0, 2),
    r(ApiKey::IncrementalAlterConfigs, 0, 1),
    r(ApiKey::AlterPartitionReassignments, 0, 1),
    r(ApiKey::ListPartitionReassignments, 0, 0),
    r(ApiKey::OffsetDelete, 0, 0),
    // KIP-546: client quotas in the metadata log (handlers/client_quotas.rs).
    r(ApiKey::DescribeClientQuotas, 0, 1),
    r(ApiKey::AlterClientQuotas, 0, 1),
    // KIP-554: SCRAM credentials in the metadata log (handlers/scram.rs).
    r(ApiKey::DescribeUserScramCredentials, 0, 0),
    r(ApiKey::AlterUserScramCredentials, 0, 0),
    r(ApiKey::DescribeQuorum, 0, 2),
    r(ApiKey::DescribeCluster, 0, 2),
    r(ApiKey::DescribeProducers, 0, 0),
    r(ApiKey::DescribeTransactions, 0, 0),
    // ListTransactions v2 filters by a regular expression; es stops at v1.
    r(ApiKey::ListTransactions, 0, 1),
    r(ApiKey::ConsumerGroupHeartbeat, 0, 1),
    r(ApiKey::ConsumerGroupDescribe, 0, 1),
    // ListConfigResources v0 is the former ListClientMetricsResources.
    r(ApiKey::ListConfigResources, 0, 1),
    r(ApiKey::DescribeTopicPartitions, 0, 0),
    // KIP-932 share groups: the membership APIs. v0 was Kafka 4.0's early
    // access, removed in 4.1.
    r(ApiKey::ShareGroupHeartbeat, 1, 1),
    r(ApiKey::ShareGroupDescribe, 1, 1),
    // The record APIs: v1 with the crate's structs, v2 decoded by hand
    // (BY_HAND); handlers::share serves both.
    r(ApiKey::ShareFetch, 1, 2),
    r(ApiKey::ShareAcknowledge, 1, 2),
    // The offsets admin (handlers::groups::share_offsets); v1 of
    // DescribeShareGroupOffsets by PAST_CRATE.
    r(ApiKey::DescribeShareGroupOffsets, 0, 1),
    r(ApiKey::AlterShareGroupOffsets, 0, 0),
    r(ApiKey::DeleteShareGroupOffsets, 0, 0),
];

/// Versions past the crate's newest that es serves: (api key, wire version,
/// the crate version with the same request and response shape). Both are the
/// newest versions Kafka 4.4 serves.
pub const PAST_CRATE: &[(ApiKey, i16, i16)] = &[
    // ListOffsets v11 (KIP-1023) adds only the timestamp spec -6, earliest
    // pending upload; request and response are v10's.
    (ApiKey::ListOffsets, 11, 10),
    // DescribeLogDirs v5 (KIP-1066) adds IsCordoned to each log directory of
    // the response; the request is v4's. handlers::admin encodes the v5
    // response itself.
    (ApiKey::DescribeLogDirs, 5, 4),
    // DescribeShareGroupOffsets v1 (KIP-1226) adds Lag to each partition of
    // the response; the request is v0's. The response is encoded by hand
    // (codec::share_wire::DescribeShareGroupOffsetsResponseV1).
    (ApiKey::DescribeShareGroupOffsets, 1, 0),
];

/// Wire versions one past the crate's newest whose *request* es decodes
/// itself (`codec::share_wire::decode_request`), into the crate's structs
/// of the version before plus what the newer one adds; dispatch routes
/// them there ([`by_hand`]). Their responses are encoded by the crate at
/// [`crate_version`] when the shape is unchanged (ShareFetch v2) and by hand
/// where it is not (ShareAcknowledge v2). Both are advertised and served by
/// `handlers::share`.
pub const BY_HAND: &[(ApiKey, i16)] = &[
    // ShareFetch v2 (KIP-1206, KIP-1222): ShareAcquireMode and IsRenewAck
    // after BatchSize; the response is v1's.
    (ApiKey::ShareFetch, 2),
    // ShareAcknowledge v2 (KIP-1222): IsRenewAck after ShareSessionEpoch;
    // the response adds AcquisitionLockTimeoutMs after ErrorMessage.
    (ApiKey::ShareAcknowledge, 2),
];

/// Whether es decodes the request body of `key` at wire `version` itself
/// ([`BY_HAND`]) instead of the kafka-protocol crate.
pub fn by_hand(key: ApiKey, version: i16) -> bool {
    BY_HAND.iter().any(|&(k, v)| k == key && v == version)
}

/// The version at which the kafka-protocol crate decodes and encodes the
/// bodies of `key` at wire version `version`: the same version except for
/// those in [`PAST_CRATE`] (the version of the same request shape) and
/// [`BY_HAND`] (the crate's newest, whose structs the hand decoder fills and
/// whose encoder writes a response of unchanged shape).
pub fn crate_version(key: ApiKey, version: i16) -> i16 {
    if by_hand(key, version) {
        return key.valid_versions().max;
    }
    PAST_CRATE
        .iter()
        .find(|(k, wire, _)| *k == key && *wire == version)
        .map_or(version, |(_, _, v)| *v)
}

/// How a request's (api key, version) relates to what we serve.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Support {
    /// Advertised and served.
    Served(ApiKey),
    /// A known API at a version the kafka-protocol crate can decode (or es by
    /// hand: [`PAST_CRATE`], [`BY_HAND`]) but we do not serve (including APIs
    /// we do not implement at all): answer with UNSUPPORTED_VERSION in the
    /// API's own response shape.
    Unsupported(ApiKey),
    /// A known API at a version nobody here can parse: the header itself is of
    /// unknown shape. ApiVersions is the exception (KIP-511 fallback).
    Unparseable(ApiKey),
    /// Not a Kafka API key we know.
    UnknownKey,
}

/// Looks up the advertised range of an api key.
pub fn advertised(key: ApiKey) -> Option<ApiRange> {
    SUPPORTED.iter().copied().find(|a| a.key == key)
}

/// Classifies a request by its header's api key and version.
pub fn classify(api_key: i16, version: i16) -> Support {
    let Ok(key) = ApiKey::try_from(api_key) else {
        return Support::UnknownKey;
    };
    let crate_range = key.valid_versions();
    if let Some(a) = advertised(key) {
        if version >= a.min && version <= a.max {
            if key == ApiKey::Produce && version < PRODUCE_SERVED_MIN {
                return Support::Unsupported(key);
            }
            return Support::Served(key);
        }
    }
    // Produce v0-2 are below the crate's range but have a known, simple shape.
    if key == ApiKey::Produce && (0..PRODUCE_SERVED_MIN).contains(&version) {
        return Support::Unsupported(key);
    }
    // A version past the crate is parseable when es knows its shape.
    let shape = crate_version(key, version);
    if shape >= crate_range.min && shape <= crate_range.max {
        Support::Unsupported(key)
    } else {
        Support::Unparseable(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_unique_and_within_the_crate() {
        for w in SUPPORTED.windows(2) {
            assert!(
                (w[0].key as i16) < (w[1].key as i16),
                "{:?} before {:?}",
                w[0].key,
                w[1].key
            );
        }
        for a in SUPPORTED {
            let c = a.key.valid_versions();
            assert!(a.min <= a.max);
            // Every advertised version is the crate's, or mapped onto the
            // crate's by PAST_CRATE or BY_HAND: nothing else can be decoded.
            for v in a.min..=a.max {
                let known = v <= c.max
                    || PAST_CRATE.iter().any(|&(k, w, _)| k == a.key && w == v)
                    || by_hand(a.key, v);
                assert!(known, "{:?} advertises v{v}, past the crate", a.key);
                assert!(crate_version(a.key, v) <= c.max, "{:?} v{v}", a.key);
            }
            if a.key != ApiKey::Produce {
                assert!(a.min >= c.min, "{:?} advertises below the crate", a.key);
            }
        }
    }

    /// A PAST_CRATE or BY_HAND version is advertised as the newest and served.
    fn served(key: ApiKey, wire: i16) {
        assert_eq!(advertised(key).map(|a| a.max), Some(wire));
        assert_eq!(classify(key as i16, wire), Support::Served(key));
    }

    #[test]
    fn versions_past_the_crate_map_to_its_newest() {
        for &(key, wire, v) in PAST_CRATE {
            let c = key.valid_versions();
            assert_eq!(v, c.max, "{key:?} v{wire} should map to the crate's newest");
            assert_eq!(wire, v + 1, "{key:?}: one version past the crate");
            assert!(!by_hand(key, wire), "{key:?} v{wire} in both tables");
            served(key, wire);
            assert_eq!(crate_version(key, wire), v);
            assert_eq!(crate_version(key, v), v);
        }
        assert_eq!(
            classify(ApiKey::ListOffsets as i16, 12),
            Support::Unparseable(ApiKey::ListOffsets)
        );
    }

    #[test]
    fn versions_decoded_by_hand_map_to_the_crates_newest() {
        assert!(!BY_HAND.is_empty());
        for &(key, wire) in BY_HAND {
            let c = key.valid_versions();
            assert_eq!(wire, c.max + 1, "{key:?}: one version past the crate");
            assert!(by_hand(key, wire));
            assert!(!by_hand(key, c.max), "the crate decodes {key:?} v{}", c.max);
            assert_eq!(crate_version(key, wire), c.max);
            assert_eq!(crate_version(key, c.max), c.max);
            served(key, wire);
            // The hand decoder takes every pair: an all-empty body (null
            // strings, zero numbers, empty arrays, no tagged fields) decodes.
            let mut body = body_with_empty_arrays(key).expect("a body for every BY_HAND key");
            let decoded = crate::codec::share_wire::decode_request(key, wire, &mut body);
            assert!(decoded.is_ok(), "{key:?} v{wire}: {decoded:?}");
            assert!(
                body.is_empty(),
                "{key:?} v{wire}: {} bytes left",
                body.len()
            );
            // One version further is unknown to everyone.
            assert_eq!(classify(key as i16, wire + 1), Support::Unparseable(key));
        }
        // Not in the tables: an unknown layout, as before.
        assert!(!by_hand(ApiKey::ShareFetch, 3));
        assert_eq!(crate_version(ApiKey::ShareFetch, 3), 3);
        assert_eq!(crate_version(ApiKey::ShareFetch, 1), 1);
    }

    /// The v2 body of a request with null strings, zero numbers, no
    /// elements and no tagged fields.
    fn body_with_empty_arrays(key: ApiKey) -> Option<bytes::Bytes> {
        let fixed = match key {
            // GroupId, MemberId, 6 int32s, ShareAcquireMode, IsRenewAck.
            ApiKey::ShareFetch => 2 + 24 + 2,
            // GroupId, MemberId, ShareSessionEpoch, IsRenewAck.
            ApiKey::ShareAcknowledge => 2 + 4 + 1,
            _ => return None,
        };
        let arrays = if key == ApiKey::ShareFetch { 2 } else { 1 };
        let mut b = vec![0u8; fixed];
        b.extend(std::iter::repeat_n(1u8, arrays)); // empty compact arrays
        b.push(0); // no tagged fields
        Some(bytes::Bytes::from(b))
    }

    #[test]
    fn classification() {
        assert_eq!(
            classify(ApiKey::Metadata as i16, 0),
            Support::Served(ApiKey::Metadata)
        );
        assert_eq!(
            classify(ApiKey::Metadata as i16, 13),
            Support::Served(ApiKey::Metadata)
        );
        assert_eq!(
            classify(ApiKey::Metadata as i16, 14),
            Support::Unparseable(ApiKey::Metadata)
        );
        assert_eq!(
            classify(ApiKey::Produce as i16, 0),
            Support::Unsupported(ApiKey::Produce)
        );
        assert_eq!(
            classify(ApiKey::Produce as i16, 2),
            Support::Unsupported(ApiKey::Produce)
        );
        assert_eq!(
            classify(ApiKey::Produce as i16, 3),
            Support::Served(ApiKey::Produce)
        );
        assert_eq!(
            classify(ApiKey::JoinGroup as i16, 5),
            Support::Served(ApiKey::JoinGroup)
        );
        // OffsetCommit v10 (topic ids) is known but not decodable here.
        assert_eq!(
            classify(ApiKey::OffsetCommit as i16, 10),
            Support::Unsupported(ApiKey::OffsetCommit)
        );
        assert_eq!(
            classify(ApiKey::ApiVersions as i16, 9),
            Support::Unparseable(ApiKey::ApiVersions)
        );
        // ShareFetch and ShareAcknowledge: v1 is the crate's, v2 es's by
        // hand, both served; v3 is nobody's.
        for key in [ApiKey::ShareFetch, ApiKey::ShareAcknowledge] {
            assert_eq!(classify(key as i16, 1), Support::Served(key));
            assert_eq!(classify(key as i16, 2), Support::Served(key));
            assert_eq!(classify(key as i16, 3), Support::Unparseable(key));
        }
        assert_eq!(classify(30_000, 0), Support::UnknownKey);
        assert_eq!(classify(-1, 0), Support::UnknownKey);
    }
}
