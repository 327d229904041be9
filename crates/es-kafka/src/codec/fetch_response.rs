//! Fetch responses (v4-18) written by hand, so that the record batches a
//! fetch encoded reach the socket without another copy.
//!
//! kafka-protocol's generic encoder would copy every partition's records
//! into one response buffer. [`FetchReply::encode`] writes the response's
//! own fields (header, topics, partitions, aborted transactions, length
//! prefixes) into one small buffer and returns a [`ResponseFrame`] whose parts
//! alternate between slices of that buffer and the record batches as the
//! fetch encoded them; the connection writes the parts with one vectored
//! write. The bytes are exactly what kafka-protocol's `FetchResponse` encoder
//! writes for the same fields (the tests compare them for every version), so
//! this module owns only the layout, not the meaning, of a Fetch response.
//!
//! What es never sets is not representable here: preferred_read_replica is
//! always -1, and the tagged fields diverging epoch and snapshot id are
//! always absent. The current leader (v12+) and the node endpoints (v16+)
//! are written when set: KIP-951's hints on NOT_LEADER_OR_FOLLOWER.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::TopicName;

use super::frame::ResponseFrame;

/// Records up to this size are copied into the fields buffer rather than
/// sent as a part of their own (an iovec costs more than a small copy).
pub const INLINE_RECORDS_BYTES_MAX: usize = 1024;
/// The versions this encoder writes (those es serves).
pub const FETCH_VERSIONS: std::ops::RangeInclusive<i16> = 4..=18;
/// First flexible version (compact arrays and strings, tagged fields).
const FLEXIBLE_VERSION_MIN: i16 = 12;

/// One aborted transaction of a read_committed fetch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Aborted {
    pub producer_id: i64,
    pub first_offset: i64,
}

/// One partition's answer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FetchedPartition {
    pub partition_index: i32,
    pub error_code: i16,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    /// Written from v5 on.
    pub log_start_offset: i64,
    /// `None` (null) unless the fetch is read_committed.
    pub aborted_transactions: Option<Vec<Aborted>>,
    /// Kafka RecordBatch v2 batches (possibly none).
    pub records: Bytes,
    /// The partition's leader id and epoch, with NOT_LEADER_OR_FOLLOWER
    /// (tagged field 1, v12+).
    pub current_leader: Option<(i32, i32)>,
}

impl FetchedPartition {
    /// A partition answered only with `error_code`: no offsets, no records
    /// (Kafka's `FetchResponse.partitionResponse` for an error).
    pub fn refused(partition_index: i32, error_code: i16) -> Self {
        FetchedPartition {
            partition_index,
            error_code,
            high_watermark: -1,
            last_stable_offset: -1,
            log_start_offset: -1,
            aborted_transactions: Some(Vec::new()),
            records: Bytes::new(),
            current_leader: None,
        }
    }
}

/// A broker named in [`FetchReply::node_endpoints`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Endpoint {
    pub node_id: i32,
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
}

/// One topic's answer: named before v13, by id from v13.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FetchedTopic {
    pub name: TopicName,
    pub id: uuid::Uuid,
    pub partitions: Vec<FetchedPartition>,
}

/// A whole Fetch response body.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FetchReply {
    pub throttle_time_ms: i32,
    /// Top-level error (v7+).
    pub error_code: i16,
    /// Fetch session id (v7+): 0 without a session.
    pub session_id: i32,
    pub topics: Vec<FetchedTopic>,
    /// The endpoints of the leaders named in `current_leader` (tagged
    /// field 0, v16+).
    pub node_endpoints: Vec<Endpoint>,
}

/// Why a reply cannot be encoded (a bug or an absurd request, never the
/// peer's bytes): the connection is closed.
#[derive(Debug, thiserror::Error)]
pub enum FetchEncodeError {
    #[error("Fetch v{0} is not written by this encoder")]
    Version(i16),
    #[error("{0} does not fit its length field")]
    TooLong(&'static str),
}

type Result<T> = std::result::Result<T, FetchEncodeError>;

fn put_uvarint(out: &mut BytesMut, mut v: u32) {
    while v >= 0x80 {
        out.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    out.put_u8(v as u8);
}

/// An array's (or nullable array's) length: INT32 before v12, UNSIGNED_VARINT
/// of length + 1 (0 = null) from v12.
fn put_array_len(
    out: &mut BytesMut,
    flexible: bool,
    len: Option<usize>,
    what: &'static str,
) -> Result<()> {
    match (flexible, len) {
        (false, None) => out.put_i32(-1),
        (false, Some(n)) => {
            out.put_i32(i32::try_from(n).map_err(|_| FetchEncodeError::TooLong(what))?)
        }
        (true, None) => put_uvarint(out, 0),
        (true, Some(n)) => put_uvarint(
            out,
            u32::try_from(n)
                .ok()
                .and_then(|n| n.checked_add(1))
                .ok_or(FetchEncodeError::TooLong(what))?,
        ),
    }
    Ok(())
}

/// Same layout as an array's length: INT32 bytes before v12, compact from v12.
fn put_bytes_len(out: &mut BytesMut, flexible: bool, len: usize, what: &'static str) -> Result<()> {
    put_array_len(out, flexible, Some(len), what)
}

fn put_string(out: &mut BytesMut, flexible: bool, s: &str) -> Result<()> {
    if flexible {
        put_bytes_len(out, true, s.len(), "topic name")?;
    } else {
        out.put_i16(i16::try_from(s.len()).map_err(|_| FetchEncodeError::TooLong("topic name"))?);
    }
    out.put_slice(s.as_bytes());
    Ok(())
}

impl FetchReply {
    /// The whole response frame: size prefix, response header
    /// (`correlation_id`, and empty tagged fields from v12) and body.
    pub fn encode(&self, version: i16, correlation_id: i32) -> Result<ResponseFrame> {
        if !FETCH_VERSIONS.contains(&version) {
            return Err(FetchEncodeError::Version(version));
        }
        let flexible = version >= FLEXIBLE_VERSION_MIN;
        let partitions: usize = self.topics.iter().map(|t| t.partitions.len()).sum();
        let mut out = BytesMut::with_capacity(64 + self.topics.len() * 64 + partitions * 64);
        // Records that go out as parts of their own: (position in `out`, bytes).
        let mut cuts: Vec<(usize, Bytes)> = Vec::new();
        out.put_i32(0); // frame size, patched below
        out.put_i32(correlation_id);
        if flexible {
            put_uvarint(&mut out, 0); // response header v1: no tagged fields
        }
        out.put_i32(self.throttle_time_ms);
        if version >= 7 {
            out.put_i16(self.error_code);
            out.put_i32(self.session_id);
        }
        put_array_len(&mut out, flexible, Some(self.topics.len()), "topic count")?;
        for t in &self.topics {
            if version >= 13 {
                out.put_slice(t.id.as_bytes());
            } else {
                put_string(&mut out, flexible, t.name.0.as_str())?;
            }
            put_array_len(
                &mut out,
                flexible,
                Some(t.partitions.len()),
                "partition count",
            )?;
            for p in &t.partitions {
                out.put_i32(p.partition_index);
                out.put_i16(p.error_code);
                out.put_i64(p.high_watermark);
                out.put_i64(p.last_stable_offset);
                if version >= 5 {
                    out.put_i64(p.log_start_offset);
                }
                let aborted = p.aborted_transactions.as_deref();
                put_array_len(&mut out, flexible, aborted.map(<[_]>::len), "aborted count")?;
                for a in aborted.unwrap_or_default() {
                    out.put_i64(a.producer_id);
                    out.put_i64(a.first_offset);
                    if flexible {
                        put_uvarint(&mut out, 0);
                    }
                }
                if version >= 11 {
                    out.put_i32(-1); // preferred_read_replica: none
                }
                put_bytes_len(&mut out, flexible, p.records.len(), "records")?;
                if p.records.len() <= INLINE_RECORDS_BYTES_MAX {
                    out.put_slice(&p.records);
                } else {
                    cuts.push((out.len(), p.records.clone()));
                }
                if flexible {
                    match p.current_leader {
                        Some((leader_id, leader_epoch)) => {
                            put_uvarint(&mut out, 1); // one tagged field
                            put_uvarint(&mut out, 1); // tag 1: current leader
                            put_uvarint(&mut out, 9); // its size
                            out.put_i32(leader_id);
                            out.put_i32(leader_epoch);
                            put_uvarint(&mut out, 0); // its tagged fields
                        }
                        None => put_uvarint(&mut out, 0),
                    }
                }
            }
            if flexible {
                put_uvarint(&mut out, 0); // topic tagged fields
            }
        }
        if version >= 16 && !self.node_endpoints.is_empty() {
            let mut ne = BytesMut::new();
            put_array_len(&mut ne, true, Some(self.node_endpoints.len()), "endpoints")?;
            for e in &self.node_endpoints {
                ne.put_i32(e.node_id);
                put_string(&mut ne, true, &e.host)?;
                ne.put_i32(e.port);
                match &e.rack {
                    Some(r) => put_string(&mut ne, true, r)?,
                    None => put_uvarint(&mut ne, 0),
                }
                put_uvarint(&mut ne, 0);
            }
            put_uvarint(&mut out, 1); // one tagged field
            put_uvarint(&mut out, 0); // tag 0: node endpoints
            put_uvarint(
                &mut out,
                u32::try_from(ne.len()).map_err(|_| FetchEncodeError::TooLong("endpoints"))?,
            );
            out.put_slice(&ne);
        } else if flexible {
            put_uvarint(&mut out, 0); // top-level tagged fields
        }
        let records: usize = cuts.iter().map(|(_, r)| r.len()).sum();
        let size = (out.len() - 4)
            .checked_add(records)
            .and_then(|n| i32::try_from(n).ok())
            .ok_or(FetchEncodeError::TooLong("response"))?;
        out[0..4].copy_from_slice(&size.to_be_bytes());
        let fields = out.freeze();
        if cuts.is_empty() {
            return Ok(ResponseFrame::from(fields));
        }
        let mut parts = Vec::with_capacity(cuts.len() * 2 + 1);
        let mut prev = 0;
        for (pos, r) in cuts {
            parts.push(fields.slice(prev..pos));
            parts.push(r);
            prev = pos;
        }
        parts.push(fields.slice(prev..));
        Ok(ResponseFrame::from_parts(parts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::encode::{BatchEncoder, CodecRules, EncodeOptions};
    use crate::codec::Compression;
    use crate::handlers::encode_response;
    use es_storage::record::{self as disk, ProducerInfo, RecordMeta};
    use es_storage::RecordIter;
    use kafka_protocol::messages::fetch_response::{
        AbortedTransaction, FetchableTopicResponse, NodeEndpoint, PartitionData,
    };
    use kafka_protocol::messages::{ApiKey, BrokerId, FetchResponse, ProducerId, ResponseHeader};
    use kafka_protocol::protocol::{Decodable, StrBytes};
    use kafka_protocol::records::RecordBatchDecoder;

    /// `n` stored records from `base` (every third with a producer, the
    /// last two transactional), encoded as Kafka batches with `codec`.
    fn batches(base: u64, n: u64, codec: Compression, value_len: usize) -> Bytes {
        let mut stored = Vec::new();
        for i in 0..n {
            let producer = (i % 3 == 0).then_some(ProducerInfo {
                producer_id: 7,
                producer_epoch: 1,
                sequence: i as i32,
            });
            let meta = RecordMeta {
                producer,
                transactional: producer.is_some() && i + 2 >= n,
                control: false,
            };
            let value = vec![b'a' + (i % 26) as u8; value_len];
            let headers: [(&[u8], Option<&[u8]>); 1] = [(b"h", Some(b"v"))];
            disk::encode(
                &mut stored,
                base + i,
                1_700_000_000_000 + i as i64,
                Some(format!("k{i}").as_bytes()),
                Some(&value),
                headers,
                &meta,
            );
        }
        let views = RecordIter::new(&stored).map(|r| r.expect("decodes"));
        let mut out = Vec::new();
        let opts = EncodeOptions {
            compression: codec,
            log_append_time: false,
            partition_leader_epoch: 0,
            max_bytes: usize::MAX,
        };
        BatchEncoder::new()
            .encode_with(views, &mut out, &opts, CodecRules::default())
            .expect("encodes");
        Bytes::from(out)
    }

    /// A reply with every shape the handler produces: errors, empty and
    /// large and small records, compressed batches, aborted transactions
    /// (present, empty, null), several topics.
    fn sample(read_committed: bool) -> FetchReply {
        let aborted = |v: Vec<Aborted>| read_committed.then_some(v);
        let part = |i: i32, error_code: i16, records: Bytes, ab: Vec<Aborted>| FetchedPartition {
            partition_index: i,
            error_code,
            high_watermark: 1000 + i64::from(i),
            last_stable_offset: 900 + i64::from(i),
            log_start_offset: 3,
            aborted_transactions: aborted(ab),
            records,
            current_leader: None,
        };
        FetchReply {
            throttle_time_ms: 0,
            error_code: 0,
            session_id: 0,
            topics: vec![
                FetchedTopic {
                    name: TopicName(StrBytes::from_static_str("orders")),
                    id: uuid::Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef),
                    partitions: vec![
                        part(0, 0, batches(10, 50, Compression::None, 300), vec![]),
                        part(
                            1,
                            0,
                            batches(0, 3, Compression::None, 5),
                            vec![Aborted {
                                producer_id: 7,
                                first_offset: 1,
                            }],
                        ),
                        FetchedPartition {
                            current_leader: Some((2, 7)),
                            ..part(2, 6, Bytes::new(), vec![])
                        },
                        part(
                            3,
                            0,
                            batches(5, 40, Compression::Lz4, 200),
                            vec![
                                Aborted {
                                    producer_id: 7,
                                    first_offset: 5,
                                },
                                Aborted {
                                    producer_id: 9,
                                    first_offset: 30,
                                },
                            ],
                        ),
                    ],
                },
                FetchedTopic {
                    name: TopicName(StrBytes::from_static_str("t")),
                    id: uuid::Uuid::from_u128(42),
                    partitions: vec![part(0, 0, batches(0, 20, Compression::Gzip, 100), vec![])],
                },
                FetchedTopic {
                    name: TopicName(StrBytes::from_static_str("none")),
                    id: uuid::Uuid::nil(),
                    partitions: vec![],
                },
            ],
            node_endpoints: vec![
                Endpoint {
                    node_id: 2,
                    host: "b2".into(),
                    port: 9092,
                    rack: Some("r2".into()),
                },
                Endpoint {
                    node_id: 3,
                    host: "b3".into(),
                    port: 9093,
                    rack: None,
                },
            ],
        }
    }

    /// The same reply as kafka-protocol's message.
    fn as_kafka(r: &FetchReply, version: i16) -> FetchResponse {
        let mut k = FetchResponse::default();
        k.throttle_time_ms = r.throttle_time_ms;
        k.error_code = r.error_code;
        k.session_id = r.session_id;
        for t in &r.topics {
            let mut kt = FetchableTopicResponse::default();
            if version >= 13 {
                kt.topic_id = t.id;
            } else {
                kt.topic = t.name.clone();
            }
            for p in &t.partitions {
                let mut kp = PartitionData::default();
                kp.partition_index = p.partition_index;
                kp.error_code = p.error_code;
                kp.high_watermark = p.high_watermark;
                kp.last_stable_offset = p.last_stable_offset;
                if version >= 5 {
                    kp.log_start_offset = p.log_start_offset;
                }
                kp.aborted_transactions = p.aborted_transactions.as_ref().map(|v| {
                    v.iter()
                        .map(|a| {
                            let mut t = AbortedTransaction::default();
                            t.producer_id = ProducerId(a.producer_id);
                            t.first_offset = a.first_offset;
                            t
                        })
                        .collect()
                });
                kp.records = Some(p.records.clone());
                if let (true, Some((id, epoch))) = (version >= 12, p.current_leader) {
                    kp.current_leader.leader_id = BrokerId(id);
                    kp.current_leader.leader_epoch = epoch;
                }
                kt.partitions.push(kp);
            }
            k.responses.push(kt);
        }
        if version >= 16 {
            k.node_endpoints = r
                .node_endpoints
                .iter()
                .map(|e| {
                    let mut n = NodeEndpoint::default();
                    n.node_id = BrokerId(e.node_id);
                    n.host = StrBytes::from_string(e.host.clone());
                    n.port = e.port;
                    n.rack = e.rack.clone().map(StrBytes::from_string);
                    n
                })
                .collect();
        }
        k
    }

    #[test]
    fn bytes_equal_kafka_protocol_for_every_version() {
        for read_committed in [false, true] {
            let reply = sample(read_committed);
            for v in FETCH_VERSIONS {
                let ours = reply.encode(v, 0x0102_0304).expect("encodes");
                assert!(
                    ours.parts().len() > 1,
                    "large records go out as their own parts"
                );
                let want = encode_response(ApiKey::Fetch, v, 0x0102_0304, &as_kafka(&reply, v))
                    .expect("kafka-protocol encodes");
                assert_eq!(ours.len(), want.len(), "v{v}");
                assert_eq!(
                    ours.into_bytes(),
                    want,
                    "v{v} read_committed={read_committed}"
                );
            }
        }
    }

    #[test]
    fn kafka_protocol_decodes_what_we_write() {
        let reply = sample(true);
        for v in FETCH_VERSIONS {
            let mut frame = reply.encode(v, 7).expect("encodes").into_bytes();
            let size = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
            assert_eq!(size as usize, frame.len() - 4);
            let mut body = frame.split_off(4);
            let header =
                ResponseHeader::decode(&mut body, ApiKey::Fetch.response_header_version(v))
                    .expect("header");
            assert_eq!(header.correlation_id, 7);
            let got = FetchResponse::decode(&mut body, v).expect("body decodes");
            assert!(body.is_empty(), "v{v}: trailing bytes");
            assert_eq!(got.responses.len(), reply.topics.len());
            for (kt, t) in got.responses.iter().zip(&reply.topics) {
                if v >= 13 {
                    assert_eq!(kt.topic_id, t.id);
                } else {
                    assert_eq!(kt.topic, t.name);
                }
                for (kp, p) in kt.partitions.iter().zip(&t.partitions) {
                    assert_eq!(kp.partition_index, p.partition_index);
                    assert_eq!(kp.high_watermark, p.high_watermark);
                    assert_eq!(
                        kp.aborted_transactions.as_ref().map(Vec::len),
                        p.aborted_transactions.as_ref().map(Vec::len)
                    );
                    let mut records = kp.records.clone().expect("records present");
                    assert_eq!(records, p.records);
                    if !records.is_empty() {
                        let sets =
                            RecordBatchDecoder::decode_all(&mut records).expect("batches decode");
                        assert!(!sets.is_empty());
                    }
                }
            }
        }
    }

    #[test]
    fn every_advertised_fetch_version_is_written() {
        let r = crate::versions::advertised(ApiKey::Fetch).expect("Fetch is served");
        assert!(FETCH_VERSIONS.contains(&r.min) && FETCH_VERSIONS.contains(&r.max));
    }

    #[test]
    fn small_and_empty_replies_are_one_part() {
        let mut reply = sample(false);
        for t in &mut reply.topics {
            for p in &mut t.partitions {
                p.records = Bytes::new();
            }
        }
        reply.topics[0].partitions[0].records = batches(0, 1, Compression::None, 10);
        for v in FETCH_VERSIONS {
            let ours = reply.encode(v, 1).expect("encodes");
            assert_eq!(ours.parts().len(), 1);
            let want = encode_response(ApiKey::Fetch, v, 1, &as_kafka(&reply, v)).expect("encodes");
            assert_eq!(ours.into_bytes(), want);
        }
        let err = FetchReply::default().encode(3, 1);
        assert!(matches!(err, Err(FetchEncodeError::Version(3))));
    }
}
