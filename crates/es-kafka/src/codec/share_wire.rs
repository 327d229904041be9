//! Hand codecs for the share-group wire versions the kafka-protocol crate
//! (0.18) does not know; see [`crate::versions::BY_HAND`] and
//! docs/share-groups-design.md §1.4.
//!
//! The crate's share structs stop at ShareFetch and ShareAcknowledge v1 and
//! DescribeShareGroupOffsets v0. Kafka 4.4's clients send the next version
//! of each, which differs from the crate's by one or two fields (Kafka's
//! `common/message/*.json`, 4.4.0):
//!
//! | message | the newer version is the older one plus |
//! |---|---|
//! | ShareFetchRequest v2 | ShareAcquireMode int8, IsRenewAck bool, after BatchSize |
//! | ShareFetchResponse v2 | nothing: encode with the crate at v1 |
//! | ShareAcknowledgeRequest v2 | IsRenewAck bool after ShareSessionEpoch |
//! | ShareAcknowledgeResponse v2 | AcquisitionLockTimeoutMs int32 after ErrorMessage |
//! | DescribeShareGroupOffsetsRequest v1 | nothing: decode with the crate at v0 |
//! | DescribeShareGroupOffsetsResponse v1 | Lag int64 after LeaderEpoch, per partition |
//!
//! This module reads and writes those four changed shapes, at both their
//! versions, into and out of the crate's structs, with the added fields
//! beside them ([`ShareFetchV2Extras`], [`ShareAcknowledgeV2Extras`],
//! [`ShareAcknowledgeResponseV2`], [`DescribeShareGroupOffsetsResponseV1`]),
//! so handlers see one type whatever the version. At the older version the
//! encoding is the crate's byte for byte (a test holds them together).
//!
//! Every message is flexible: compact strings and arrays (length + 1 as an
//! unsigned varint, 0 = null) and a tagged-field section after every struct.
//! None of these structs declares a tagged field at Kafka 4.4, so every
//! tagged field read is unknown: it is kept in the struct's
//! `unknown_tagged_fields` (as the crate and Kafka's generated readers keep
//! them) and written back, and means nothing to es.
//!
//! Every length and count is untrusted: it is held against the bytes that
//! remain before anything is allocated for it (an array of `n` elements
//! needs `n` times its element's smallest encoding), so a decode allocates
//! a small constant times the input at most; every failure is a
//! [`WireError`], never a panic. Strings must be UTF-8 (dispatch's bounds
//! check has already replaced malformed ones as Kafka reads them). A bool
//! is any byte, non-zero true, as Kafka and the crate read it.

use std::collections::BTreeMap;

use bytes::{Buf, Bytes};
use kafka_protocol::messages::describe_share_group_offsets_response::{
    DescribeShareGroupOffsetsResponseGroup, DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::share_acknowledge_request::{
    self, AcknowledgePartition, AcknowledgeTopic,
};
use kafka_protocol::messages::share_acknowledge_response::{
    LeaderIdAndEpoch, NodeEndpoint, PartitionData, ShareAcknowledgeTopicResponse,
};
use kafka_protocol::messages::share_fetch_request::{
    self, FetchPartition, FetchTopic, ForgottenTopic,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId, DescribeShareGroupOffsetsResponse, GroupId, ShareAcknowledgeRequest,
    ShareAcknowledgeResponse, ShareFetchRequest, TopicName,
};
use kafka_protocol::protocol::buf::ByteBufMut;
use kafka_protocol::protocol::{Encodable, StrBytes};
use uuid::Uuid;

/// Why a share message does not decode or encode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("{field}: needs {needed} bytes, {remaining} remain")]
    Truncated {
        field: &'static str,
        needed: u64,
        remaining: usize,
    },
    #[error("{field}: unsigned varint longer than five bytes or past 32 bits")]
    BadVarint { field: &'static str },
    #[error("{field}: {count} elements of at least {min_bytes} bytes each in {remaining} bytes")]
    TooMany {
        field: &'static str,
        count: u64,
        min_bytes: u64,
        remaining: usize,
    },
    #[error("{field}: null, and the field is not nullable")]
    Null { field: &'static str },
    #[error("{field}: not UTF-8")]
    NotUtf8 { field: &'static str },
    #[error("tagged field {tag}: a tag is 0 to 2^31 - 1")]
    BadTag { tag: i64 },
    #[error("{field}: {len} does not fit a compact length")]
    TooLong { field: &'static str, len: usize },
    #[error("Lag: {given} given for {partitions} partitions")]
    LagCount { given: usize, partitions: usize },
    #[error("{message} v{version} has no hand codec")]
    Version { message: &'static str, version: i16 },
}

/// What ShareFetchRequest v2 adds to v1 (after BatchSize).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShareFetchV2Extras {
    /// ShareAcquireMode: 0 batch-optimized (the default, and what v1
    /// means), 1 record-limit. Read as sent; its meaning is the handler's.
    pub acquire_mode: i8,
    /// IsRenewAck: the acknowledgements include Renew (type 4).
    pub is_renew_ack: bool,
}

/// What ShareAcknowledgeRequest v2 adds to v1 (after ShareSessionEpoch).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShareAcknowledgeV2Extras {
    /// IsRenewAck: the acknowledgements include Renew (type 4).
    pub is_renew_ack: bool,
}

/// A request body es decodes itself: one for each pair of
/// [`crate::versions::BY_HAND`].
#[derive(Debug, Clone, PartialEq)]
pub enum HandRequest {
    ShareFetch(ShareFetchRequest, ShareFetchV2Extras),
    ShareAcknowledge(ShareAcknowledgeRequest, ShareAcknowledgeV2Extras),
}

/// Decodes the body of a request at a wire version the crate does not know
/// (the pairs of [`crate::versions::BY_HAND`]). Bytes after the body are
/// left in `body`, as the crate's decoders leave them.
pub fn decode_request(
    key: ApiKey,
    version: i16,
    body: &mut Bytes,
) -> Result<HandRequest, WireError> {
    match (key, version) {
        (ApiKey::ShareFetch, 2) => {
            let (req, extras) = decode_share_fetch_request(body, version)?;
            Ok(HandRequest::ShareFetch(req, extras))
        }
        (ApiKey::ShareAcknowledge, 2) => {
            let (req, extras) = decode_share_acknowledge_request(body, version)?;
            Ok(HandRequest::ShareAcknowledge(req, extras))
        }
        _ => Err(WireError::Version {
            message: key_name(key),
            version,
        }),
    }
}

fn key_name(key: ApiKey) -> &'static str {
    match key {
        ApiKey::ShareFetch => "ShareFetchRequest",
        ApiKey::ShareAcknowledge => "ShareAcknowledgeRequest",
        _ => "request",
    }
}

// ---- smallest encodings (bytes) of one array element, for the count check ----

/// A compact array or string that is empty, or a tagged-field section with
/// nothing in it: one byte.
const EMPTY: u64 = 1;
/// A topic of any of these messages: TopicId, its Partitions, tags.
const TOPIC_MIN: u64 = 16 + EMPTY + EMPTY;
/// A request's partition: PartitionIndex, AcknowledgementBatches, tags.
const PARTITION_MIN: u64 = 4 + EMPTY + EMPTY;
/// FirstOffset, LastOffset, AcknowledgeTypes, tags.
const ACK_BATCH_MIN: u64 = 8 + 8 + EMPTY + EMPTY;
/// PartitionIndex, ErrorCode, ErrorMessage (null), CurrentLeader
/// (LeaderId, LeaderEpoch, tags), tags.
const ACK_PARTITION_RESPONSE_MIN: u64 = 4 + 2 + EMPTY + (4 + 4 + EMPTY) + EMPTY;
/// NodeId, Host, Port, Rack (null), tags.
const NODE_ENDPOINT_MIN: u64 = 4 + EMPTY + 4 + EMPTY + EMPTY;
/// GroupId, Topics, ErrorCode, ErrorMessage (null), tags.
const OFFSETS_GROUP_MIN: u64 = EMPTY + EMPTY + 2 + EMPTY + EMPTY;
/// TopicName, TopicId, Partitions, tags.
const OFFSETS_TOPIC_MIN: u64 = EMPTY + 16 + EMPTY + EMPTY;
/// PartitionIndex, StartOffset, LeaderEpoch, ErrorCode, ErrorMessage
/// (null), tags; v1 adds Lag.
const fn offsets_partition_min(version: i16) -> u64 {
    4 + 8 + 4 + if version >= 1 { 8 } else { 0 } + 2 + EMPTY + EMPTY
}
/// A tagged field: its tag and its size, one byte each at least.
const TAGGED_FIELD_MIN: u64 = 2;

// ---- reading ---------------------------------------------------------------

/// Checked reads off the front of a body.
struct Reader<'a> {
    buf: &'a mut Bytes,
}

impl Reader<'_> {
    fn need(&self, n: u64, field: &'static str) -> Result<usize, WireError> {
        let remaining = self.buf.remaining();
        match usize::try_from(n) {
            Ok(n) if n <= remaining => Ok(n),
            _ => Err(WireError::Truncated {
                field,
                needed: n,
                remaining,
            }),
        }
    }

    fn i8(&mut self, field: &'static str) -> Result<i8, WireError> {
        self.need(1, field)?;
        Ok(self.buf.get_i8())
    }

    fn bool(&mut self, field: &'static str) -> Result<bool, WireError> {
        Ok(self.i8(field)? != 0)
    }

    fn i16(&mut self, field: &'static str) -> Result<i16, WireError> {
        self.need(2, field)?;
        Ok(self.buf.get_i16())
    }

    fn i32(&mut self, field: &'static str) -> Result<i32, WireError> {
        self.need(4, field)?;
        Ok(self.buf.get_i32())
    }

    fn i64(&mut self, field: &'static str) -> Result<i64, WireError> {
        self.need(8, field)?;
        Ok(self.buf.get_i64())
    }

    fn uuid(&mut self, field: &'static str) -> Result<Uuid, WireError> {
        self.need(16, field)?;
        let mut raw = [0u8; 16];
        self.buf.copy_to_slice(&mut raw);
        Ok(Uuid::from_bytes(raw))
    }

    /// Kafka's unsigned varint: at most five bytes. A value past 32 bits is
    /// refused: no length or count in a frame can be that large, and a tag
    /// must fit an i32 anyway.
    fn uvarint(&mut self, field: &'static str) -> Result<u32, WireError> {
        let mut out = 0u64;
        for i in 0..5 {
            self.need(1, field)?;
            let b = self.buf.get_u8();
            out |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return u32::try_from(out).map_err(|_| WireError::BadVarint { field });
            }
        }
        Err(WireError::BadVarint { field })
    }

    /// A compact length or count: `None` for null.
    fn compact_len(&mut self, field: &'static str) -> Result<Option<u64>, WireError> {
        Ok(u64::from(self.uvarint(field)?).checked_sub(1))
    }

    fn nullable_string(&mut self, field: &'static str) -> Result<Option<StrBytes>, WireError> {
        let Some(len) = self.compact_len(field)? else {
            return Ok(None);
        };
        let n = self.need(len, field)?;
        let raw = self.buf.split_to(n);
        StrBytes::from_utf8(raw)
            .map(Some)
            .map_err(|_| WireError::NotUtf8 { field })
    }

    fn string(&mut self, field: &'static str) -> Result<StrBytes, WireError> {
        self.nullable_string(field)?
            .ok_or(WireError::Null { field })
    }

    /// A count of elements of at least `min_bytes` each, held against the
    /// bytes that remain; `None` for null.
    fn count(&mut self, field: &'static str, min_bytes: u64) -> Result<Option<usize>, WireError> {
        let Some(count) = self.compact_len(field)? else {
            return Ok(None);
        };
        let remaining = self.buf.remaining();
        let fits = count
            .checked_mul(min_bytes)
            .is_some_and(|bytes| bytes <= remaining as u64);
        if !fits {
            return Err(WireError::TooMany {
                field,
                count,
                min_bytes,
                remaining,
            });
        }
        // At most `remaining` since min_bytes >= 1.
        Ok(Some(count as usize))
    }

    /// A non-nullable compact array.
    fn array<T>(
        &mut self,
        field: &'static str,
        min_bytes: u64,
        mut element: impl FnMut(&mut Self) -> Result<T, WireError>,
    ) -> Result<Vec<T>, WireError> {
        let n = self
            .count(field, min_bytes)?
            .ok_or(WireError::Null { field })?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(element(self)?);
        }
        Ok(out)
    }

    /// A struct's tagged-field section (its count is a plain unsigned
    /// varint, not a compact length). All are unknown here and kept by tag;
    /// a repeated tag keeps its last value, as the crate does.
    fn tags(&mut self) -> Result<BTreeMap<i32, Bytes>, WireError> {
        const FIELD: &str = "tagged fields";
        let n = u64::from(self.uvarint(FIELD)?);
        let remaining = self.buf.remaining();
        if n.checked_mul(TAGGED_FIELD_MIN)
            .is_none_or(|b| b > remaining as u64)
        {
            return Err(WireError::TooMany {
                field: FIELD,
                count: n,
                min_bytes: TAGGED_FIELD_MIN,
                remaining,
            });
        }
        let mut out = BTreeMap::new();
        for _ in 0..n {
            let tag = self.uvarint(FIELD)?;
            let tag = i32::try_from(tag).map_err(|_| WireError::BadTag {
                tag: i64::from(tag),
            })?;
            let size = self.uvarint(FIELD)?;
            let size = self.need(u64::from(size), FIELD)?;
            out.insert(tag, self.buf.split_to(size));
        }
        Ok(out)
    }
}

// ---- writing ---------------------------------------------------------------

/// Where an encoding goes: a buffer, or a count of its bytes (so an
/// encoder's size is computed by the same code that writes it).
trait Out {
    fn put(&mut self, bytes: &[u8]);
}

impl Out for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// Counts what would be written.
struct Count(usize);

impl Out for Count {
    fn put(&mut self, bytes: &[u8]) {
        self.0 += bytes.len();
    }
}

/// Writes into one of the crate's buffers.
struct BufOut<'a, B>(&'a mut B);

impl<B: ByteBufMut> Out for BufOut<'_, B> {
    fn put(&mut self, bytes: &[u8]) {
        self.0.put_slice(bytes);
    }
}

struct Writer<'a, O: Out> {
    out: &'a mut O,
}

impl<O: Out> Writer<'_, O> {
    fn i8(&mut self, v: i8) {
        self.out.put(&v.to_be_bytes());
    }

    fn bool(&mut self, v: bool) {
        self.out.put(&[u8::from(v)]);
    }

    fn i16(&mut self, v: i16) {
        self.out.put(&v.to_be_bytes());
    }

    fn i32(&mut self, v: i32) {
        self.out.put(&v.to_be_bytes());
    }

    fn i64(&mut self, v: i64) {
        self.out.put(&v.to_be_bytes());
    }

    fn uuid(&mut self, v: &Uuid) {
        self.out.put(v.as_bytes());
    }

    fn uvarint(&mut self, mut v: u32) {
        let mut bytes = [0u8; 5];
        let mut n = 0;
        while v >= 0x80 {
            bytes[n] = (v as u8) | 0x80;
            v >>= 7;
            n += 1;
        }
        bytes[n] = v as u8;
        self.out.put(&bytes[..=n]);
    }

    /// A compact length (`len + 1`) or count.
    fn compact_len(&mut self, len: usize, field: &'static str) -> Result<(), WireError> {
        let n = u32::try_from(len)
            .ok()
            .and_then(|n| n.checked_add(1))
            .ok_or(WireError::TooLong { field, len })?;
        self.uvarint(n);
        Ok(())
    }

    fn nullable_string(&mut self, v: Option<&str>, field: &'static str) -> Result<(), WireError> {
        match v {
            None => self.uvarint(0),
            Some(s) => self.string(s, field)?,
        }
        Ok(())
    }

    fn string(&mut self, s: &str, field: &'static str) -> Result<(), WireError> {
        self.compact_len(s.len(), field)?;
        self.out.put(s.as_bytes());
        Ok(())
    }

    fn array<T>(
        &mut self,
        items: &[T],
        field: &'static str,
        mut element: impl FnMut(&mut Self, &T) -> Result<(), WireError>,
    ) -> Result<(), WireError> {
        self.compact_len(items.len(), field)?;
        items.iter().try_for_each(|item| element(self, item))
    }

    /// A tagged-field section, in tag order (Kafka's order).
    fn tags(&mut self, tags: &BTreeMap<i32, Bytes>) -> Result<(), WireError> {
        const FIELD: &str = "tagged fields";
        let n = u32::try_from(tags.len()).map_err(|_| WireError::TooLong {
            field: FIELD,
            len: tags.len(),
        })?;
        self.uvarint(n);
        for (&tag, value) in tags {
            let tag = u32::try_from(tag).map_err(|_| WireError::BadTag {
                tag: i64::from(tag),
            })?;
            self.uvarint(tag);
            let size = u32::try_from(value.len()).map_err(|_| WireError::TooLong {
                field: FIELD,
                len: value.len(),
            })?;
            self.uvarint(size);
            self.out.put(value);
        }
        Ok(())
    }
}

fn check_version(message: &'static str, version: i16, range: (i16, i16)) -> Result<(), WireError> {
    if (range.0..=range.1).contains(&version) {
        Ok(())
    } else {
        Err(WireError::Version { message, version })
    }
}

// ---- ShareFetchRequest v1-2 ------------------------------------------------

const SHARE_FETCH_REQUEST: &str = "ShareFetchRequest";

/// Decodes a ShareFetchRequest body at v1 or v2; at v1 the extras are
/// their defaults (what a v1 request means).
pub fn decode_share_fetch_request(
    buf: &mut Bytes,
    version: i16,
) -> Result<(ShareFetchRequest, ShareFetchV2Extras), WireError> {
    check_version(SHARE_FETCH_REQUEST, version, (1, 2))?;
    let mut r = Reader { buf };
    let mut req = ShareFetchRequest::default();
    let mut extras = ShareFetchV2Extras::default();
    req.group_id = r.nullable_string("GroupId")?.map(GroupId);
    req.member_id = r.nullable_string("MemberId")?;
    req.share_session_epoch = r.i32("ShareSessionEpoch")?;
    req.max_wait_ms = r.i32("MaxWaitMs")?;
    req.min_bytes = r.i32("MinBytes")?;
    req.max_bytes = r.i32("MaxBytes")?;
    req.max_records = r.i32("MaxRecords")?;
    req.batch_size = r.i32("BatchSize")?;
    if version >= 2 {
        extras.acquire_mode = r.i8("ShareAcquireMode")?;
        extras.is_renew_ack = r.bool("IsRenewAck")?;
    }
    req.topics = r.array("Topics", TOPIC_MIN, |r| {
        let mut t = FetchTopic::default();
        t.topic_id = r.uuid("TopicId")?;
        t.partitions = r.array("Partitions", PARTITION_MIN, |r| {
            let mut p = FetchPartition::default();
            p.partition_index = r.i32("PartitionIndex")?;
            p.acknowledgement_batches = r.array("AcknowledgementBatches", ACK_BATCH_MIN, |r| {
                let (first, last, types, tags) = ack_batch(r)?;
                let mut b = share_fetch_request::AcknowledgementBatch::default();
                b.first_offset = first;
                b.last_offset = last;
                b.acknowledge_types = types;
                b.unknown_tagged_fields = tags;
                Ok(b)
            })?;
            p.unknown_tagged_fields = r.tags()?;
            Ok(p)
        })?;
        t.unknown_tagged_fields = r.tags()?;
        Ok(t)
    })?;
    req.forgotten_topics_data = r.array("ForgottenTopicsData", TOPIC_MIN, |r| {
        let mut t = ForgottenTopic::default();
        t.topic_id = r.uuid("TopicId")?;
        t.partitions = r.array("Partitions", 4, |r| r.i32("Partitions"))?;
        t.unknown_tagged_fields = r.tags()?;
        Ok(t)
    })?;
    req.unknown_tagged_fields = r.tags()?;
    Ok((req, extras))
}

/// One AcknowledgementBatch (the same fields in ShareFetch and
/// ShareAcknowledge, two types in the crate).
type AckBatch = (i64, i64, Vec<i8>, BTreeMap<i32, Bytes>);

fn ack_batch(r: &mut Reader<'_>) -> Result<AckBatch, WireError> {
    let first = r.i64("FirstOffset")?;
    let last = r.i64("LastOffset")?;
    let types = r.array("AcknowledgeTypes", 1, |r| r.i8("AcknowledgeTypes"))?;
    Ok((first, last, types, r.tags()?))
}

fn put_ack_batch<O: Out>(
    w: &mut Writer<'_, O>,
    first: i64,
    last: i64,
    types: &[i8],
    tags: &BTreeMap<i32, Bytes>,
) -> Result<(), WireError> {
    w.i64(first);
    w.i64(last);
    w.array(types, "AcknowledgeTypes", |w, t| {
        w.i8(*t);
        Ok(())
    })?;
    w.tags(tags)
}

/// Encodes a ShareFetchRequest body at v1 (the extras are dropped, as
/// Kafka drops fields a version lacks) or v2.
pub fn encode_share_fetch_request(
    req: &ShareFetchRequest,
    extras: &ShareFetchV2Extras,
    version: i16,
    out: &mut Vec<u8>,
) -> Result<(), WireError> {
    check_version(SHARE_FETCH_REQUEST, version, (1, 2))?;
    let w = &mut Writer { out };
    w.nullable_string(req.group_id.as_ref().map(|g| g.0.as_str()), "GroupId")?;
    w.nullable_string(req.member_id.as_deref(), "MemberId")?;
    w.i32(req.share_session_epoch);
    w.i32(req.max_wait_ms);
    w.i32(req.min_bytes);
    w.i32(req.max_bytes);
    w.i32(req.max_records);
    w.i32(req.batch_size);
    if version >= 2 {
        w.i8(extras.acquire_mode);
        w.bool(extras.is_renew_ack);
    }
    w.array(&req.topics, "Topics", |w, t| {
        w.uuid(&t.topic_id);
        w.array(&t.partitions, "Partitions", |w, p| {
            w.i32(p.partition_index);
            w.array(
                &p.acknowledgement_batches,
                "AcknowledgementBatches",
                |w, b| {
                    put_ack_batch(
                        w,
                        b.first_offset,
                        b.last_offset,
                        &b.acknowledge_types,
                        &b.unknown_tagged_fields,
                    )
                },
            )?;
            w.tags(&p.unknown_tagged_fields)
        })?;
        w.tags(&t.unknown_tagged_fields)
    })?;
    w.array(&req.forgotten_topics_data, "ForgottenTopicsData", |w, t| {
        w.uuid(&t.topic_id);
        w.array(&t.partitions, "Partitions", |w, p| {
            w.i32(*p);
            Ok(())
        })?;
        w.tags(&t.unknown_tagged_fields)
    })?;
    w.tags(&req.unknown_tagged_fields)
}

// ---- ShareAcknowledgeRequest v1-2 ------------------------------------------

const SHARE_ACKNOWLEDGE_REQUEST: &str = "ShareAcknowledgeRequest";

/// Decodes a ShareAcknowledgeRequest body at v1 or v2; at v1 the extras
/// are their defaults.
pub fn decode_share_acknowledge_request(
    buf: &mut Bytes,
    version: i16,
) -> Result<(ShareAcknowledgeRequest, ShareAcknowledgeV2Extras), WireError> {
    check_version(SHARE_ACKNOWLEDGE_REQUEST, version, (1, 2))?;
    let mut r = Reader { buf };
    let mut req = ShareAcknowledgeRequest::default();
    let mut extras = ShareAcknowledgeV2Extras::default();
    req.group_id = r.nullable_string("GroupId")?.map(GroupId);
    req.member_id = r.nullable_string("MemberId")?;
    req.share_session_epoch = r.i32("ShareSessionEpoch")?;
    if version >= 2 {
        extras.is_renew_ack = r.bool("IsRenewAck")?;
    }
    req.topics = r.array("Topics", TOPIC_MIN, |r| {
        let mut t = AcknowledgeTopic::default();
        t.topic_id = r.uuid("TopicId")?;
        t.partitions = r.array("Partitions", PARTITION_MIN, |r| {
            let mut p = AcknowledgePartition::default();
            p.partition_index = r.i32("PartitionIndex")?;
            p.acknowledgement_batches = r.array("AcknowledgementBatches", ACK_BATCH_MIN, |r| {
                let (first, last, types, tags) = ack_batch(r)?;
                let mut b = share_acknowledge_request::AcknowledgementBatch::default();
                b.first_offset = first;
                b.last_offset = last;
                b.acknowledge_types = types;
                b.unknown_tagged_fields = tags;
                Ok(b)
            })?;
            p.unknown_tagged_fields = r.tags()?;
            Ok(p)
        })?;
        t.unknown_tagged_fields = r.tags()?;
        Ok(t)
    })?;
    req.unknown_tagged_fields = r.tags()?;
    Ok((req, extras))
}

/// Encodes a ShareAcknowledgeRequest body at v1 or v2.
pub fn encode_share_acknowledge_request(
    req: &ShareAcknowledgeRequest,
    extras: &ShareAcknowledgeV2Extras,
    version: i16,
    out: &mut Vec<u8>,
) -> Result<(), WireError> {
    check_version(SHARE_ACKNOWLEDGE_REQUEST, version, (1, 2))?;
    let w = &mut Writer { out };
    w.nullable_string(req.group_id.as_ref().map(|g| g.0.as_str()), "GroupId")?;
    w.nullable_string(req.member_id.as_deref(), "MemberId")?;
    w.i32(req.share_session_epoch);
    if version >= 2 {
        w.bool(extras.is_renew_ack);
    }
    w.array(&req.topics, "Topics", |w, t| {
        w.uuid(&t.topic_id);
        w.array(&t.partitions, "Partitions", |w, p| {
            w.i32(p.partition_index);
            w.array(
                &p.acknowledgement_batches,
                "AcknowledgementBatches",
                |w, b| {
                    put_ack_batch(
                        w,
                        b.first_offset,
                        b.last_offset,
                        &b.acknowledge_types,
                        &b.unknown_tagged_fields,
                    )
                },
            )?;
            w.tags(&p.unknown_tagged_fields)
        })?;
        w.tags(&t.unknown_tagged_fields)
    })?;
    w.tags(&req.unknown_tagged_fields)
}

// ---- ShareAcknowledgeResponse v1-2 -----------------------------------------

const SHARE_ACKNOWLEDGE_RESPONSE: &str = "ShareAcknowledgeResponse";

/// A ShareAcknowledge response with what v2 adds. As an [`Encodable`] it
/// writes v2 whatever version it is called with (dispatch passes the
/// crate's, 1: see [`crate::versions::crate_version`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ShareAcknowledgeResponseV2 {
    pub response: ShareAcknowledgeResponse,
    /// AcquisitionLockTimeoutMs (v2, ignorable): the share group's record
    /// lock duration; v1 has no place for it.
    pub acquisition_lock_timeout_ms: i32,
}

impl ShareAcknowledgeResponseV2 {
    /// Decodes a body at v1 (the lock timeout reads 0, its default) or v2.
    pub fn decode(buf: &mut Bytes, version: i16) -> Result<Self, WireError> {
        check_version(SHARE_ACKNOWLEDGE_RESPONSE, version, (1, 2))?;
        let mut r = Reader { buf };
        let mut resp = ShareAcknowledgeResponse::default();
        let mut lock_ms = 0;
        resp.throttle_time_ms = r.i32("ThrottleTimeMs")?;
        resp.error_code = r.i16("ErrorCode")?;
        resp.error_message = r.nullable_string("ErrorMessage")?;
        if version >= 2 {
            lock_ms = r.i32("AcquisitionLockTimeoutMs")?;
        }
        resp.responses = r.array("Responses", TOPIC_MIN, |r| {
            let mut t = ShareAcknowledgeTopicResponse::default();
            t.topic_id = r.uuid("TopicId")?;
            t.partitions = r.array("Partitions", ACK_PARTITION_RESPONSE_MIN, |r| {
                let mut p = PartitionData::default();
                p.partition_index = r.i32("PartitionIndex")?;
                p.error_code = r.i16("ErrorCode")?;
                p.error_message = r.nullable_string("ErrorMessage")?;
                let mut leader = LeaderIdAndEpoch::default();
                leader.leader_id = r.i32("LeaderId")?;
                leader.leader_epoch = r.i32("LeaderEpoch")?;
                leader.unknown_tagged_fields = r.tags()?;
                p.current_leader = leader;
                p.unknown_tagged_fields = r.tags()?;
                Ok(p)
            })?;
            t.unknown_tagged_fields = r.tags()?;
            Ok(t)
        })?;
        resp.node_endpoints = r.array("NodeEndpoints", NODE_ENDPOINT_MIN, |r| {
            let mut n = NodeEndpoint::default();
            n.node_id = BrokerId(r.i32("NodeId")?);
            n.host = r.string("Host")?;
            n.port = r.i32("Port")?;
            n.rack = r.nullable_string("Rack")?;
            n.unknown_tagged_fields = r.tags()?;
            Ok(n)
        })?;
        resp.unknown_tagged_fields = r.tags()?;
        Ok(Self {
            response: resp,
            acquisition_lock_timeout_ms: lock_ms,
        })
    }

    /// Encodes the body at v1 (without the lock timeout) or v2.
    pub fn encode_at(&self, version: i16, out: &mut Vec<u8>) -> Result<(), WireError> {
        self.write(version, out)
    }

    fn write<O: Out>(&self, version: i16, out: &mut O) -> Result<(), WireError> {
        check_version(SHARE_ACKNOWLEDGE_RESPONSE, version, (1, 2))?;
        let r = &self.response;
        let w = &mut Writer { out };
        w.i32(r.throttle_time_ms);
        w.i16(r.error_code);
        w.nullable_string(r.error_message.as_deref(), "ErrorMessage")?;
        if version >= 2 {
            w.i32(self.acquisition_lock_timeout_ms);
        }
        w.array(&r.responses, "Responses", |w, t| {
            w.uuid(&t.topic_id);
            w.array(&t.partitions, "Partitions", |w, p| {
                w.i32(p.partition_index);
                w.i16(p.error_code);
                w.nullable_string(p.error_message.as_deref(), "ErrorMessage")?;
                w.i32(p.current_leader.leader_id);
                w.i32(p.current_leader.leader_epoch);
                w.tags(&p.current_leader.unknown_tagged_fields)?;
                w.tags(&p.unknown_tagged_fields)
            })?;
            w.tags(&t.unknown_tagged_fields)
        })?;
        w.array(&r.node_endpoints, "NodeEndpoints", |w, n| {
            w.i32(n.node_id.0);
            w.string(&n.host, "Host")?;
            w.i32(n.port);
            w.nullable_string(n.rack.as_deref(), "Rack")?;
            w.tags(&n.unknown_tagged_fields)
        })?;
        w.tags(&r.unknown_tagged_fields)
    }
}

impl Encodable for ShareAcknowledgeResponseV2 {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, _version: i16) -> anyhow::Result<()> {
        Ok(self.write(2, &mut BufOut(buf))?)
    }

    fn compute_size(&self, _version: i16) -> anyhow::Result<usize> {
        let mut n = Count(0);
        self.write(2, &mut n)?;
        Ok(n.0)
    }
}

// ---- DescribeShareGroupOffsetsResponse v0-1 --------------------------------

const DESCRIBE_SHARE_GROUP_OFFSETS_RESPONSE: &str = "DescribeShareGroupOffsetsResponse";

/// A DescribeShareGroupOffsets response with what v1 adds. As an
/// [`Encodable`] it writes v1 whatever version it is called with (dispatch
/// passes the crate's, 0).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DescribeShareGroupOffsetsResponseV1 {
    pub response: DescribeShareGroupOffsetsResponse,
    /// Lag (v1, ignorable, default -1) of every partition of every topic of
    /// every group, in the order they are in `response`: one per partition,
    /// or encoding fails.
    pub lags: Vec<i64>,
}

impl DescribeShareGroupOffsetsResponseV1 {
    /// Partitions in the response, over every group and topic.
    pub fn partition_count(&self) -> usize {
        self.response
            .groups
            .iter()
            .flat_map(|g| &g.topics)
            .map(|t| t.partitions.len())
            .sum()
    }

    /// Decodes a body at v0 (every lag reads -1, its default) or v1.
    pub fn decode(buf: &mut Bytes, version: i16) -> Result<Self, WireError> {
        check_version(DESCRIBE_SHARE_GROUP_OFFSETS_RESPONSE, version, (0, 1))?;
        let mut r = Reader { buf };
        let mut resp = DescribeShareGroupOffsetsResponse::default();
        let mut lags = Vec::new();
        resp.throttle_time_ms = r.i32("ThrottleTimeMs")?;
        resp.groups = r.array("Groups", OFFSETS_GROUP_MIN, |r| {
            let mut g = DescribeShareGroupOffsetsResponseGroup::default();
            g.group_id = GroupId(r.string("GroupId")?);
            g.topics = r.array("Topics", OFFSETS_TOPIC_MIN, |r| {
                let mut t = DescribeShareGroupOffsetsResponseTopic::default();
                t.topic_name = TopicName(r.string("TopicName")?);
                t.topic_id = r.uuid("TopicId")?;
                t.partitions = r.array("Partitions", offsets_partition_min(version), |r| {
                    let mut p = DescribeShareGroupOffsetsResponsePartition::default();
                    p.partition_index = r.i32("PartitionIndex")?;
                    p.start_offset = r.i64("StartOffset")?;
                    p.leader_epoch = r.i32("LeaderEpoch")?;
                    lags.push(if version >= 1 { r.i64("Lag")? } else { -1 });
                    p.error_code = r.i16("ErrorCode")?;
                    p.error_message = r.nullable_string("ErrorMessage")?;
                    p.unknown_tagged_fields = r.tags()?;
                    Ok(p)
                })?;
                t.unknown_tagged_fields = r.tags()?;
                Ok(t)
            })?;
            g.error_code = r.i16("ErrorCode")?;
            g.error_message = r.nullable_string("ErrorMessage")?;
            g.unknown_tagged_fields = r.tags()?;
            Ok(g)
        })?;
        resp.unknown_tagged_fields = r.tags()?;
        Ok(Self {
            response: resp,
            lags,
        })
    }

    /// Encodes the body at v0 (the lags are dropped) or v1.
    pub fn encode_at(&self, version: i16, out: &mut Vec<u8>) -> Result<(), WireError> {
        self.write(version, out)
    }

    fn write<O: Out>(&self, version: i16, out: &mut O) -> Result<(), WireError> {
        check_version(DESCRIBE_SHARE_GROUP_OFFSETS_RESPONSE, version, (0, 1))?;
        let partitions = self.partition_count();
        if version >= 1 && self.lags.len() != partitions {
            return Err(WireError::LagCount {
                given: self.lags.len(),
                partitions,
            });
        }
        let r = &self.response;
        let mut lags = self.lags.iter();
        let w = &mut Writer { out };
        w.i32(r.throttle_time_ms);
        w.array(&r.groups, "Groups", |w, g| {
            w.string(&g.group_id.0, "GroupId")?;
            w.array(&g.topics, "Topics", |w, t| {
                w.string(&t.topic_name.0, "TopicName")?;
                w.uuid(&t.topic_id);
                w.array(&t.partitions, "Partitions", |w, p| {
                    w.i32(p.partition_index);
                    w.i64(p.start_offset);
                    w.i32(p.leader_epoch);
                    if version >= 1 {
                        // Counted above: one lag per partition.
                        w.i64(lags.next().copied().unwrap_or(-1));
                    }
                    w.i16(p.error_code);
                    w.nullable_string(p.error_message.as_deref(), "ErrorMessage")?;
                    w.tags(&p.unknown_tagged_fields)
                })?;
                w.tags(&t.unknown_tagged_fields)
            })?;
            w.i16(g.error_code);
            w.nullable_string(g.error_message.as_deref(), "ErrorMessage")?;
            w.tags(&g.unknown_tagged_fields)
        })?;
        w.tags(&r.unknown_tagged_fields)
    }
}

impl Encodable for DescribeShareGroupOffsetsResponseV1 {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, _version: i16) -> anyhow::Result<()> {
        Ok(self.write(1, &mut BufOut(buf))?)
    }

    fn compute_size(&self, _version: i16) -> anyhow::Result<usize> {
        let mut n = Count(0);
        self.write(1, &mut n)?;
        Ok(n.0)
    }
}
