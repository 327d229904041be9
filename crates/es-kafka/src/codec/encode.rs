//! Encoding records read from storage as Kafka RecordBatch v2, for Fetch.
//!
//! Produced batches: a batch its producer compressed is noted by storage
//! (codec and extent, in the segment's `.batches` file; the fetch path sets
//! it on the batch's first record, [`RecordView::batch`]). Such a record
//! starts a batch that holds exactly the records of that produced
//! batch (those compaction left), so consumers get the producer's batch
//! boundaries; with [`CodecRules::as_produced`] (`compression.type=producer`)
//! it is compressed with the producer's codec, as Kafka serves it.
//!
//! Other records (uncompressed produce, or the rest of a produced batch
//! when the records handed in start inside it) are batched in runs of records that share producer id and
//! epoch, the transactional flag and (for LogAppendTime topics) the
//! timestamp, with strictly increasing offsets. Gaps left by compaction stay
//! inside a batch (offset deltas may skip; lastOffsetDelta is the last
//! record's delta), but a gap that would break the producer's sequence
//! arithmetic (record sequence = baseSequence + offsetDelta) starts a new
//! batch. A control record always gets a batch of its own, uncompressed, as
//! Kafka writes them. A run's records section is kept near
//! [`UNCOMPRESSED_BATCH_RECORDS_BYTES_SOFT_MAX`] when it goes uncompressed
//! and [`BATCH_RECORDS_BYTES_SOFT_MAX`] before compression; a produced batch
//! is split only past [`PRODUCED_BATCH_RECORDS_BYTES_MAX`].
//!
//! Budget: whole batches only, never more than `max_bytes` in total, except
//! that the first batch is always written (Kafka returns an oversized first
//! batch so consumers make progress): a run holds at least its first record,
//! a produced batch all of its records in the input. Runs without
//! compression are cut at the exact record that would not fit; compressed
//! runs use the uncompressed size as the estimate. A produced batch is
//! measured after compression, and is dropped, unless it is the first, when
//! it does not fit or when the input ends before its last record (the next
//! fetch starts with it).
//!
//! Cost: a record's encoded length is computed from its field sizes, then the
//! record is written straight into the output (or the reused compression
//! buffer): no per-record allocation. The batch header is patched and the
//! CRC-32C (hardware) computed once per batch.

use es_storage::RecordView;

use super::batch::{
    increment_sequence, ATTRIBUTES_POS, ATTR_CONTROL, ATTR_LOG_APPEND_TIME, ATTR_TRANSACTIONAL,
    BASE_SEQUENCE_POS, BASE_TIMESTAMP_POS, BATCH_HEADER_BYTES, BATCH_LENGTH_POS, CRC_POS,
    LAST_OFFSET_DELTA_POS, LOG_OVERHEAD_BYTES, MAGIC_POS, MAGIC_V2, MAX_TIMESTAMP_POS,
    NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, PARTITION_LEADER_EPOCH_POS, PRODUCER_EPOCH_POS,
    PRODUCER_ID_POS, RECORD_COUNT_POS,
};
use super::compression::{Compression, Compressor};
use super::varint::{put_varint, varint_len, varlong_len, Varints};

/// A run's records section stops growing past this many (uncompressed)
/// bytes, so compression work and consumer memory per batch stay bounded.
pub const BATCH_RECORDS_BYTES_SOFT_MAX: usize = 1024 * 1024;
/// The same for a run sent uncompressed: nothing is gained by larger
/// batches, and a batch this small is still in the CPU's cache when its
/// CRC-32C is computed.
pub const UNCOMPRESSED_BATCH_RECORDS_BYTES_SOFT_MAX: usize = 64 * 1024;
/// A produced batch is re-created whole up to this many (uncompressed) record
/// bytes: the produce path's default bound on a request's decompressed
/// records, so only batches accepted under raised limits are split.
pub const PRODUCED_BATCH_RECORDS_BYTES_MAX: usize = 64 * 1024 * 1024;

/// How to encode one partition's records for a Fetch response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncodeOptions {
    /// The codec of every batch (a topic's compression.type), except under
    /// [`CodecRules::as_produced`], where it applies only to records outside
    /// a recorded produced batch.
    pub compression: Compression,
    /// The topic uses LogAppendTime: set attribute bit 3 (clients then take
    /// the batch's maxTimestamp as every record's timestamp).
    pub log_append_time: bool,
    /// partitionLeaderEpoch of every batch (0 on a single node).
    pub partition_leader_epoch: i32,
    /// Byte budget for this call's output (the partition's max_bytes, or
    /// what is left of the response's).
    pub max_bytes: usize,
}

/// What one encode call wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EncodeSummary {
    pub batches: usize,
    pub records: usize,
    /// Bytes appended to the output.
    pub bytes: usize,
    /// Offset of the last record written; the next fetch starts after it.
    /// Records the iterator yielded beyond it were not written.
    pub last_offset: Option<u64>,
}

/// Where batch codecs come from, beyond [`EncodeOptions::compression`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodecRules {
    /// `compression.type=producer`: a recorded produced batch gets the codec
    /// its producer used.
    pub as_produced: bool,
    /// The client reads zstd (Fetch v10+); otherwise zstd batches are sent
    /// uncompressed.
    pub zstd_allowed: bool,
}

impl Default for CodecRules {
    /// Every batch with [`EncodeOptions::compression`].
    fn default() -> Self {
        CodecRules {
            as_produced: false,
            zstd_allowed: true,
        }
    }
}

/// Why records could not be encoded.
#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    #[error("compression failed: {0}")]
    Compression(#[from] std::io::Error),
    #[error("offset {0} does not fit a Kafka offset (i64)")]
    OffsetOutOfRange(u64),
}

/// Encodes `records` as Kafka batches appended to `out`; see the module
/// docs. Allocates compression state per call; use a [`BatchEncoder`] to
/// reuse it.
pub fn encode_records<'a, I>(
    records: I,
    out: &mut Vec<u8>,
    opts: &EncodeOptions,
) -> Result<EncodeSummary, EncodeError>
where
    I: IntoIterator<Item = RecordView<'a>>,
{
    BatchEncoder::new().encode(records, out, opts)
}

/// Encoder state reused across fetches: the buffer records are gathered in
/// before compression, and the codecs' contexts.
#[derive(Debug, Default)]
pub struct BatchEncoder {
    scratch: Vec<u8>,
    compressor: Compressor,
}

/// The batch being built: fixed by its first record.
struct Run {
    base_offset: u64,
    base_timestamp: i64,
    producer: Option<(i64, i16)>,
    base_sequence: i32,
    transactional: bool,
    control: bool,
    last_offset: u64,
    max_timestamp: i64,
    count: i32,
}

impl Run {
    fn new(r: &RecordView<'_>) -> Run {
        Run {
            base_offset: r.offset,
            base_timestamp: r.timestamp_ms,
            producer: r.meta.producer.map(|p| (p.producer_id, p.producer_epoch)),
            base_sequence: r.meta.producer.map_or(NO_SEQUENCE, |p| p.sequence),
            transactional: r.meta.transactional,
            control: r.meta.control,
            last_offset: r.offset,
            max_timestamp: r.timestamp_ms,
            count: 1,
        }
    }

    /// The offset delta `r` would have in this batch, if it may join it.
    fn accepts(&self, r: &RecordView<'_>, log_append_time: bool) -> Option<i32> {
        if self.control || r.meta.control || self.count == i32::MAX {
            return None;
        }
        if r.meta.transactional != self.transactional
            || r.meta.producer.map(|p| (p.producer_id, p.producer_epoch)) != self.producer
            || (log_append_time && r.timestamp_ms != self.base_timestamp)
            || r.offset <= self.last_offset
        {
            return None;
        }
        let delta = i32::try_from(r.offset - self.base_offset).ok()?;
        if let Some(p) = r.meta.producer {
            let want = if self.base_sequence == NO_SEQUENCE {
                NO_SEQUENCE
            } else {
                increment_sequence(self.base_sequence, delta)
            };
            if p.sequence != want {
                return None;
            }
        }
        Some(delta)
    }

    fn add(&mut self, r: &RecordView<'_>) {
        self.last_offset = r.offset;
        self.max_timestamp = self.max_timestamp.max(r.timestamp_ms);
        self.count += 1;
    }
}

fn bytes_field_len(b: Option<&[u8]>) -> usize {
    match b {
        Some(b) => varint_len(b.len() as i32) + b.len(),
        None => 1,
    }
}

/// Encoded size of a record (its length prefix included).
fn record_len(r: &RecordView<'_>, timestamp_delta: i64, offset_delta: i32) -> (usize, usize) {
    let mut body = 1 + varlong_len(timestamp_delta) + varint_len(offset_delta);
    body += bytes_field_len(r.key) + bytes_field_len(r.value);
    body += varint_len(r.header_count() as i32);
    for (k, v) in r.headers() {
        body += varint_len(k.len() as i32) + k.len() + bytes_field_len(v);
    }
    (varint_len(body as i32) + body, body)
}

fn put_bytes_field(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        Some(b) => {
            put_varint(out, b.len() as i32);
            out.extend_from_slice(b);
        }
        None => put_varint(out, -1),
    }
}

fn write_record(
    out: &mut Vec<u8>,
    r: &RecordView<'_>,
    timestamp_delta: i64,
    offset_delta: i32,
    total: usize,
    body: usize,
) {
    out.reserve(total);
    let start = out.len();
    // The varints before the key and before the value go out in one copy
    // each (one in all without a key).
    let mut head = Varints::new();
    head.varint(body as i32);
    head.byte(0); // attributes
    head.varlong(timestamp_delta);
    head.varint(offset_delta);
    match r.key {
        Some(key) => {
            head.varint(key.len() as i32);
            out.extend_from_slice(head.as_slice());
            out.extend_from_slice(key);
            head.clear();
        }
        None => head.varint(-1),
    }
    match r.value {
        Some(value) => {
            head.varint(value.len() as i32);
            out.extend_from_slice(head.as_slice());
            out.extend_from_slice(value);
        }
        None => {
            head.varint(-1);
            out.extend_from_slice(head.as_slice());
        }
    }
    match r.header_count() {
        0 => out.push(0),
        count => {
            put_varint(out, count as i32);
            for (k, v) in r.headers() {
                put_varint(out, k.len() as i32);
                out.extend_from_slice(k);
                put_bytes_field(out, v);
            }
        }
    }
    debug_assert_eq!(out.len() - start, total);
}

impl BatchEncoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Frees the compression buffer if it holds more than `bytes_max`
    /// (for an encoder kept between fetches).
    pub fn shrink_to(&mut self, bytes_max: usize) {
        if self.scratch.capacity() > bytes_max {
            self.scratch = Vec::new();
        }
    }

    /// See [`encode_records`].
    pub fn encode<'a, I>(
        &mut self,
        records: I,
        out: &mut Vec<u8>,
        opts: &EncodeOptions,
    ) -> Result<EncodeSummary, EncodeError>
    where
        I: IntoIterator<Item = RecordView<'a>>,
    {
        self.encode_with(records, out, opts, CodecRules::default())
    }

    /// [`BatchEncoder::encode`] with codecs chosen by `rules`.
    pub fn encode_with<'a, I>(
        &mut self,
        records: I,
        out: &mut Vec<u8>,
        opts: &EncodeOptions,
        rules: CodecRules,
    ) -> Result<EncodeSummary, EncodeError>
    where
        I: IntoIterator<Item = RecordView<'a>>,
    {
        let start = out.len();
        let mut summary = EncodeSummary::default();
        let mut it = records.into_iter().peekable();
        // A produced batch split by the size cap (or by records that cannot
        // share a batch) continues in the next batch: (last offset, codec).
        let mut carry: Option<(u64, Compression)> = None;
        while let Some(first) = it.next() {
            if first.offset > i64::MAX as u64 {
                return Err(EncodeError::OffsetOutOfRange(first.offset));
            }
            let used = out.len() - start;
            let (first_total, first_body) = record_len(&first, 0, 0);
            let first_batch = summary.batches == 0;
            // The produced batch this record starts or continues.
            let produced = match (first.batch, carry.take()) {
                _ if first.meta.control => None,
                (Some(b), _) => Some((
                    first.offset.saturating_add(u64::from(b.last_offset_delta)),
                    Compression::from_id(i16::from(b.codec)).unwrap_or(Compression::None),
                )),
                (None, Some((end, codec))) if first.offset <= end => Some((end, codec)),
                (None, _) => None,
            };
            let produced_end = produced.map(|(end, _)| end);
            // A produced batch is measured once compressed: it needs room for
            // its header here, a run for its header and first record.
            let least = match produced {
                Some(_) => BATCH_HEADER_BYTES + 1,
                None => BATCH_HEADER_BYTES + first_total,
            };
            if !first_batch && used + least > opts.max_bytes {
                break;
            }
            let mut codec = match produced {
                _ if first.meta.control => Compression::None,
                Some((_, produced_codec)) if rules.as_produced => produced_codec,
                _ => opts.compression,
            };
            if codec == Compression::Zstd && !rules.zstd_allowed {
                codec = Compression::None;
            }
            let batch_start = out.len();
            out.extend_from_slice(&[0u8; BATCH_HEADER_BYTES]);
            if codec != Compression::None {
                self.scratch.clear();
            }
            let soft_max = if codec == Compression::None {
                UNCOMPRESSED_BATCH_RECORDS_BYTES_SOFT_MAX
            } else {
                BATCH_RECORDS_BYTES_SOFT_MAX
            };
            let mut run = Run::new(&first);
            let mut budget_hit = false;
            {
                let dst: &mut Vec<u8> = if codec == Compression::None {
                    &mut *out
                } else {
                    &mut self.scratch
                };
                let dst_start = dst.len();
                write_record(dst, &first, 0, 0, first_total, first_body);
                while let Some(next) = it.peek() {
                    // A recorded produced batch always starts a batch.
                    if next.batch.is_some() || produced_end.is_some_and(|end| next.offset > end) {
                        break;
                    }
                    let Some(delta) = run.accepts(next, opts.log_append_time) else {
                        break;
                    };
                    let ts_delta = next.timestamp_ms.wrapping_sub(run.base_timestamp);
                    let (total, body) = record_len(next, ts_delta, delta);
                    let records_bytes = dst.len() - dst_start;
                    if produced_end.is_some() {
                        if records_bytes + total > PRODUCED_BATCH_RECORDS_BYTES_MAX {
                            break;
                        }
                    } else {
                        if records_bytes + total > soft_max {
                            break;
                        }
                        if used + BATCH_HEADER_BYTES + records_bytes + total > opts.max_bytes {
                            budget_hit = true;
                            break;
                        }
                    }
                    write_record(dst, next, ts_delta, delta, total, body);
                    run.add(next);
                    it.next();
                }
            }
            if let Some((end, produced_codec)) = produced {
                match it.peek() {
                    // The rest of the produced batch is not in the input
                    // (the read window ended): unless this is the first
                    // batch, the next fetch starts with it, whole.
                    None if run.last_offset < end && !first_batch => {
                        out.truncate(batch_start);
                        break;
                    }
                    Some(next) if next.batch.is_none() && next.offset <= end => {
                        carry = Some((end, produced_codec));
                    }
                    _ => {}
                }
            }
            if codec != Compression::None {
                self.compressor.compress(codec, &self.scratch, out)?;
            }
            finish_batch(&mut out[batch_start..], &run, codec, opts);
            if !first_batch && out.len() - start > opts.max_bytes {
                // Compression did not shrink it enough; the next fetch gets it.
                out.truncate(batch_start);
                break;
            }
            summary.batches += 1;
            summary.records += run.count as usize;
            summary.last_offset = Some(run.last_offset);
            if budget_hit {
                break;
            }
        }
        summary.bytes = out.len() - start;
        Ok(summary)
    }
}

/// Fills the header of the batch in `b` (header and records written) and its CRC.
fn finish_batch(b: &mut [u8], run: &Run, codec: Compression, opts: &EncodeOptions) {
    let mut attributes = codec.id();
    if opts.log_append_time {
        attributes |= ATTR_LOG_APPEND_TIME;
    }
    if run.transactional {
        attributes |= ATTR_TRANSACTIONAL;
    }
    if run.control {
        attributes |= ATTR_CONTROL;
    }
    let (producer_id, producer_epoch) = run.producer.unwrap_or((NO_PRODUCER_ID, NO_PRODUCER_EPOCH));
    let batch_length = (b.len() - LOG_OVERHEAD_BYTES) as i32;
    let last_offset_delta = (run.last_offset - run.base_offset) as i32;
    b[0..8].copy_from_slice(&(run.base_offset as i64).to_be_bytes());
    b[BATCH_LENGTH_POS..BATCH_LENGTH_POS + 4].copy_from_slice(&batch_length.to_be_bytes());
    b[PARTITION_LEADER_EPOCH_POS..PARTITION_LEADER_EPOCH_POS + 4]
        .copy_from_slice(&opts.partition_leader_epoch.to_be_bytes());
    b[MAGIC_POS] = MAGIC_V2 as u8;
    b[ATTRIBUTES_POS..ATTRIBUTES_POS + 2].copy_from_slice(&attributes.to_be_bytes());
    b[LAST_OFFSET_DELTA_POS..LAST_OFFSET_DELTA_POS + 4]
        .copy_from_slice(&last_offset_delta.to_be_bytes());
    b[BASE_TIMESTAMP_POS..BASE_TIMESTAMP_POS + 8]
        .copy_from_slice(&run.base_timestamp.to_be_bytes());
    b[MAX_TIMESTAMP_POS..MAX_TIMESTAMP_POS + 8].copy_from_slice(&run.max_timestamp.to_be_bytes());
    b[PRODUCER_ID_POS..PRODUCER_ID_POS + 8].copy_from_slice(&producer_id.to_be_bytes());
    b[PRODUCER_EPOCH_POS..PRODUCER_EPOCH_POS + 2].copy_from_slice(&producer_epoch.to_be_bytes());
    b[BASE_SEQUENCE_POS..BASE_SEQUENCE_POS + 4].copy_from_slice(&run.base_sequence.to_be_bytes());
    b[RECORD_COUNT_POS..RECORD_COUNT_POS + 4].copy_from_slice(&run.count.to_be_bytes());
    let crc = crc32c::crc32c(&b[ATTRIBUTES_POS..]);
    b[CRC_POS..CRC_POS + 4].copy_from_slice(&crc.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::batch::{decode_batches, BatchSummary, DecodeLimits};
    use bytes::{Bytes, BytesMut};
    use es_storage::record::{self as disk, ProducerInfo, RecordMeta};
    use es_storage::{RecordBatchBuf, RecordIter};
    use indexmap::IndexMap;
    use kafka_protocol::protocol::StrBytes;
    use kafka_protocol::records::{
        Compression as KCompression, Record as KRecord, RecordBatchDecoder, RecordBatchEncoder,
        RecordEncodeOptions, TimestampType,
    };
    use proptest::prelude::*;

    type Headers = Vec<(Vec<u8>, Option<Vec<u8>>)>;

    /// A record as a test describes it.
    #[derive(Clone, Debug, PartialEq)]
    struct Rec {
        offset: u64,
        ts: i64,
        key: Option<Vec<u8>>,
        value: Option<Vec<u8>>,
        headers: Headers,
        meta: RecordMeta,
    }

    impl Rec {
        fn plain(offset: u64, value: &[u8]) -> Rec {
            Rec {
                offset,
                ts: 1_700_000_000_000 + offset as i64,
                key: Some(format!("k{offset}").into_bytes()),
                value: Some(value.to_vec()),
                headers: vec![],
                meta: RecordMeta::default(),
            }
        }

        fn from_view(r: &RecordView<'_>) -> Rec {
            Rec {
                offset: r.offset,
                ts: r.timestamp_ms,
                key: r.key.map(<[u8]>::to_vec),
                value: r.value.map(<[u8]>::to_vec),
                headers: r
                    .headers()
                    .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
                    .collect(),
                meta: r.meta,
            }
        }
    }

    /// The records in es-storage's on-disk format, as a fetch reads them.
    fn stored(recs: &[Rec]) -> Vec<u8> {
        let mut out = Vec::new();
        for r in recs {
            disk::encode(
                &mut out,
                r.offset,
                r.ts,
                r.key.as_deref(),
                r.value.as_deref(),
                r.headers.iter().map(|(k, v)| (k.as_slice(), v.as_deref())),
                &r.meta,
            );
        }
        out
    }

    fn views(buf: &[u8]) -> impl Iterator<Item = RecordView<'_>> {
        RecordIter::new(buf).map(|r| r.expect("stored record decodes"))
    }

    fn opts(compression: Compression, max_bytes: usize) -> EncodeOptions {
        EncodeOptions {
            compression,
            log_append_time: false,
            partition_leader_epoch: 0,
            max_bytes,
        }
    }

    fn encode_all(recs: &[Rec], o: &EncodeOptions) -> (Vec<u8>, EncodeSummary) {
        let buf = stored(recs);
        let mut out = Vec::new();
        let s = BatchEncoder::new()
            .encode(views(&buf), &mut out, o)
            .expect("encodes");
        assert_eq!(s.bytes, out.len());
        (out, s)
    }

    /// Decodes with our decoder (trusted: control batches allowed) and reads
    /// the records back through es-storage, offsets assigned from `base`.
    fn decode_ours(wire: &[u8], base: u64) -> (Vec<Rec>, Vec<BatchSummary>) {
        let mut buf = RecordBatchBuf::new();
        let mut summaries = Vec::new();
        decode_batches(
            wire,
            &mut buf,
            &DecodeLimits::trusted(usize::MAX),
            &mut summaries,
        )
        .expect("decodes");
        let bytes = buf.seal(base).to_vec();
        (
            views(&bytes).map(|r| Rec::from_view(&r)).collect(),
            summaries,
        )
    }

    fn kcodec(c: Compression) -> KCompression {
        match c {
            Compression::None => KCompression::None,
            Compression::Gzip => KCompression::Gzip,
            Compression::Snappy => KCompression::Snappy,
            Compression::Lz4 => KCompression::Lz4,
            Compression::Zstd => KCompression::Zstd,
        }
    }

    fn mixed() -> Vec<Rec> {
        let producer = |seq| RecordMeta {
            producer: Some(ProducerInfo {
                producer_id: 9,
                producer_epoch: 2,
                sequence: seq,
            }),
            transactional: false,
            control: false,
        };
        let mut v = vec![
            Rec::plain(0, b"a"),
            Rec {
                key: None,
                value: None,
                headers: vec![(b"h1".to_vec(), None), (b"h2".to_vec(), Some(vec![]))],
                ..Rec::plain(1, b"")
            },
            Rec {
                key: Some(vec![]),
                value: Some(vec![]),
                ..Rec::plain(2, b"")
            },
        ];
        for i in 0..5 {
            v.push(Rec {
                meta: producer(100 + i),
                ..Rec::plain(3 + i as u64, b"idempotent")
            });
        }
        v.push(Rec {
            meta: RecordMeta {
                transactional: true,
                ..producer(7)
            },
            ..Rec::plain(8, b"txn")
        });
        v.push(Rec {
            key: Some(vec![0, 0, 0, 1]),
            value: Some(vec![0, 0, 0, 0, 0, 0]),
            meta: RecordMeta {
                transactional: true,
                control: true,
                producer: producer(-1).producer,
            },
            ..Rec::plain(9, b"")
        });
        v.push(Rec::plain(10, &[7u8; 3000]));
        v
    }

    #[test]
    fn round_trip_every_codec() {
        let recs = mixed();
        for c in Compression::ALL {
            let (wire, s) = encode_all(&recs, &opts(c, usize::MAX));
            assert_eq!(s.records, recs.len());
            assert_eq!(s.last_offset, Some(10));
            // plain 0-2 | producer 3-7 | txn 8 | control 9 | plain 10
            assert_eq!(s.batches, 5, "{c:?}");
            let (got, summaries) = decode_ours(&wire, 0);
            assert_eq!(got, recs, "{c:?}");
            assert_eq!(summaries.len(), 5);
            assert_eq!(summaries[1].base_offset, 3);
            assert_eq!(summaries[1].base_sequence, 100);
            assert_eq!(summaries[1].last_sequence(), 104);
            assert_eq!(summaries[1].producer_id, 9);
            assert!(summaries[3].control && summaries[3].transactional);
            assert_eq!(
                summaries[3].compression,
                Compression::None,
                "control batches stay uncompressed"
            );
            assert_eq!(summaries[0].compression, c);
            assert_eq!(summaries[4].max_timestamp, recs[10].ts);
        }
    }

    #[test]
    fn gaps_stay_inside_a_batch_unless_sequences_break() {
        let recs = vec![
            Rec::plain(10, b"a"),
            Rec::plain(15, b"b"),
            Rec::plain(16, b"c"),
        ];
        let (wire, s) = encode_all(&recs, &opts(Compression::None, usize::MAX));
        assert_eq!(s.batches, 1);
        let sets = RecordBatchDecoder::decode_all(&mut Bytes::from(wire.clone()))
            .expect("kafka-protocol decodes");
        let offsets: Vec<i64> = sets[0].records.iter().map(|r| r.offset).collect();
        assert_eq!(offsets, vec![10, 15, 16]);
        let (_, summaries) = decode_ours(&wire, 0);
        assert_eq!(summaries[0].last_offset_delta, 6);
        assert_eq!(summaries[0].record_count, 3);

        // With a producer, offsets 0 and 2 carrying sequences 0 and 1 cannot
        // share a batch (sequence = base + offset delta).
        let meta = |seq| RecordMeta {
            producer: Some(ProducerInfo {
                producer_id: 1,
                producer_epoch: 0,
                sequence: seq,
            }),
            ..RecordMeta::default()
        };
        let recs = vec![
            Rec {
                meta: meta(0),
                ..Rec::plain(0, b"a")
            },
            Rec {
                meta: meta(1),
                ..Rec::plain(2, b"b")
            },
            Rec {
                meta: meta(2),
                ..Rec::plain(3, b"c")
            },
        ];
        let (wire, s) = encode_all(&recs, &opts(Compression::None, usize::MAX));
        assert_eq!(s.batches, 2);
        let sets =
            RecordBatchDecoder::decode_all(&mut Bytes::from(wire)).expect("kafka-protocol decodes");
        let got: Vec<(i64, i32)> = sets
            .iter()
            .flat_map(|s| s.records.iter().map(|r| (r.offset, r.sequence)))
            .collect();
        assert_eq!(got, vec![(0, 0), (2, 1), (3, 2)]);
    }

    #[test]
    fn log_append_time_batches_share_a_timestamp() {
        let mut recs: Vec<Rec> = (0..6).map(|i| Rec::plain(i, b"v")).collect();
        for (i, r) in recs.iter_mut().enumerate() {
            r.ts = 5000 + (i as i64 / 3);
        }
        let o = EncodeOptions {
            log_append_time: true,
            ..opts(Compression::Lz4, usize::MAX)
        };
        let (wire, s) = encode_all(&recs, &o);
        assert_eq!(s.batches, 2);
        let (got, summaries) = decode_ours(&wire, 0);
        assert!(summaries.iter().all(|s| s.log_append_time));
        assert_eq!(
            got.iter().map(|r| r.ts).collect::<Vec<_>>(),
            vec![5000, 5000, 5000, 5001, 5001, 5001]
        );
    }

    #[test]
    fn byte_budget() {
        let recs: Vec<Rec> = (0..100).map(|i| Rec::plain(i, &[i as u8; 100])).collect();
        for c in Compression::ALL {
            // Budget 0: still exactly one batch with the first record.
            let (wire, s) = encode_all(&recs, &opts(c, 0));
            assert_eq!(
                (s.batches, s.records, s.last_offset),
                (1, 1, Some(0)),
                "{c:?}"
            );
            assert_eq!(decode_ours(&wire, 0).0, recs[..1].to_vec());
            // A first record larger than the budget is still sent alone.
            let big = vec![Rec::plain(0, &[1u8; 5000]), Rec::plain(1, b"x")];
            let (_, s) = encode_all(&big, &opts(c, 1000));
            assert_eq!(s.records, 1, "{c:?}");
        }
        // Uncompressed cuts at the exact record: 61 + n * record size.
        let one = encode_all(&recs[..1], &opts(Compression::None, usize::MAX))
            .0
            .len()
            - BATCH_HEADER_BYTES;
        let (_, s) = encode_all(
            &recs,
            &opts(Compression::None, BATCH_HEADER_BYTES + 10 * one),
        );
        assert_eq!(s.records, 10);
        assert_eq!(s.bytes, BATCH_HEADER_BYTES + 10 * one);
        let (_, s) = encode_all(
            &recs,
            &opts(Compression::None, BATCH_HEADER_BYTES + 10 * one - 1),
        );
        assert_eq!(s.records, 9);
        // A new batch needs room for its header and first record.
        let mut two_runs = recs[..5].to_vec();
        for r in &recs[5..10] {
            two_runs.push(Rec {
                meta: RecordMeta {
                    transactional: true,
                    ..RecordMeta::default()
                },
                ..r.clone()
            });
        }
        let (_, s) = encode_all(
            &two_runs,
            &opts(Compression::None, BATCH_HEADER_BYTES * 2 + 6 * one - 1),
        );
        assert_eq!((s.batches, s.records, s.last_offset), (1, 5, Some(4)));
        let (_, s) = encode_all(
            &two_runs,
            &opts(Compression::None, BATCH_HEADER_BYTES * 2 + 6 * one),
        );
        assert_eq!((s.batches, s.records, s.last_offset), (2, 6, Some(5)));
    }

    #[test]
    fn big_runs_are_split_near_the_soft_max() {
        let recs: Vec<Rec> = (0..40).map(|i| Rec::plain(i, &[3u8; 100_000])).collect();
        let (wire, s) = encode_all(&recs, &opts(Compression::Zstd, usize::MAX));
        assert_eq!(s.batches, 4);
        assert_eq!(decode_ours(&wire, 0).0, recs);
    }

    fn to_krecords(recs: &[Rec]) -> Vec<KRecord> {
        recs.iter()
            .map(|r| {
                let p = r.meta.producer;
                KRecord {
                    transactional: r.meta.transactional,
                    control: r.meta.control,
                    delete_horizon: false,
                    partition_leader_epoch: 0,
                    producer_id: p.map_or(-1, |p| p.producer_id),
                    producer_epoch: p.map_or(-1, |p| p.producer_epoch),
                    timestamp_type: TimestampType::Creation,
                    offset: r.offset as i64,
                    sequence: p.map_or(-1, |p| p.sequence),
                    timestamp: r.ts,
                    key: r.key.clone().map(Bytes::from),
                    value: r.value.clone().map(Bytes::from),
                    headers: r
                        .headers
                        .iter()
                        .map(|(k, v)| {
                            (
                                StrBytes::from_string(
                                    String::from_utf8(k.clone()).expect("utf8 header key"),
                                ),
                                v.clone().map(Bytes::from),
                            )
                        })
                        .collect::<IndexMap<_, _>>(),
                }
            })
            .collect()
    }

    fn from_krecord(r: &KRecord) -> Rec {
        Rec {
            offset: r.offset as u64,
            ts: r.timestamp,
            key: r.key.as_ref().map(|b| b.to_vec()),
            value: r.value.as_ref().map(|b| b.to_vec()),
            headers: r
                .headers
                .iter()
                .map(|(k, v)| (k.as_bytes().to_vec(), v.as_ref().map(|b| b.to_vec())))
                .collect(),
            meta: RecordMeta {
                producer: (r.producer_id >= 0).then_some(ProducerInfo {
                    producer_id: r.producer_id,
                    producer_epoch: r.producer_epoch,
                    sequence: r.sequence,
                }),
                transactional: r.transactional,
                control: r.control,
            },
        }
    }

    #[test]
    fn kafka_protocol_encoder_to_our_decoder() {
        let recs = mixed();
        for c in Compression::ALL {
            let krecs = to_krecords(&recs);
            let mut wire = BytesMut::new();
            RecordBatchEncoder::encode(
                &mut wire,
                krecs.iter(),
                &RecordEncodeOptions {
                    version: 2,
                    compression: kcodec(c),
                },
            )
            .expect("kafka-protocol encodes");
            let (got, summaries) = decode_ours(&wire, 0);
            assert_eq!(got, recs, "{c:?}");
            // kafka-protocol compresses control batches too; we read them.
            assert!(summaries.iter().all(|s| s.compression == c), "{c:?}");
        }
    }

    #[test]
    fn our_encoder_to_kafka_protocol_decoder() {
        let recs = mixed();
        for c in Compression::ALL {
            let (wire, _) = encode_all(&recs, &opts(c, usize::MAX));
            let sets = RecordBatchDecoder::decode_all(&mut Bytes::from(wire))
                .expect("kafka-protocol decodes");
            let got: Vec<Rec> = sets
                .iter()
                .flat_map(|s| s.records.iter().map(from_krecord))
                .collect();
            assert_eq!(got, recs, "{c:?}");
            for set in &sets {
                let want = if set.records[0].control {
                    KCompression::None
                } else {
                    kcodec(c)
                };
                assert_eq!(set.compression, want);
            }
        }
    }

    #[test]
    fn produce_shaped_batch_passes_produce_rules() {
        // What a producer sends: one batch, offsets from 0, sequences from N.
        // Kafka's producer wraps sequences past i32::MAX to 0, as ours does.
        let recs: Vec<Rec> = (0..50u64)
            .map(|i| Rec {
                meta: RecordMeta {
                    producer: Some(ProducerInfo {
                        producer_id: 77,
                        producer_epoch: 1,
                        sequence: increment_sequence(i32::MAX - 20, i as i32),
                    }),
                    ..RecordMeta::default()
                },
                ..Rec::plain(i, b"payload")
            })
            .collect();
        for c in Compression::ALL {
            let (wire, s) = encode_all(&recs, &opts(c, usize::MAX));
            assert_eq!(s.batches, 1);
            let mut buf = RecordBatchBuf::new();
            let mut summaries = Vec::new();
            decode_batches(&wire, &mut buf, &DecodeLimits::default(), &mut summaries)
                .expect("produce rules");
            assert_eq!(summaries[0].base_sequence, i32::MAX - 20);
            assert_eq!(summaries[0].last_sequence(), 28);
            let bytes = buf.seal(0).to_vec();
            let got: Vec<Rec> = views(&bytes).map(|r| Rec::from_view(&r)).collect();
            assert_eq!(got, recs);
        }
    }

    /// Stored records as the produce path writes them, and the batches
    /// storage notes beside them, as a fetch reads both.
    struct Produced {
        bytes: Vec<u8>,
        marks: Vec<(u64, disk::ProducedBatch)>,
    }

    impl Produced {
        /// The records with their noted batches, as `read_one` hands them
        /// to the encoder.
        fn views(&self) -> impl Iterator<Item = RecordView<'_>> {
            views(&self.bytes).map(|mut r| {
                r.batch = self
                    .marks
                    .iter()
                    .find(|(o, _)| *o == r.offset)
                    .map(|(_, b)| *b);
                r
            })
        }
    }

    /// Stored records as the produce path writes them: each `(records,
    /// codec)` is one produced batch, decoded into es-storage's format
    /// (compressed batches noted beside the records), offsets from 0.
    fn produced(batches: &[(Vec<Rec>, Compression)]) -> Produced {
        let mut wire = Vec::new();
        for (recs, codec) in batches {
            wire.extend(one_batch(recs, *codec));
        }
        let mut buf = RecordBatchBuf::new();
        let mut summaries = Vec::new();
        decode_batches(
            &wire,
            &mut buf,
            &DecodeLimits::trusted(usize::MAX),
            &mut summaries,
        )
        .expect("decodes");
        let bytes = buf.seal(0).to_vec();
        let marks = buf
            .produced()
            .iter()
            .map(|&(i, b)| (u64::from(i), b))
            .collect();
        Produced { bytes, marks }
    }

    /// `recs` as one Kafka batch, however large, as a producer sends it.
    fn one_batch(recs: &[Rec], codec: Compression) -> Vec<u8> {
        let buf = stored(recs);
        let vs: Vec<RecordView<'_>> = views(&buf).collect();
        let mut run = Run::new(&vs[0]);
        let mut records = Vec::new();
        for (i, r) in vs.iter().enumerate() {
            let delta = (r.offset - vs[0].offset) as i32;
            let ts = r.timestamp_ms - run.base_timestamp;
            let (total, body) = record_len(r, ts, delta);
            write_record(&mut records, r, ts, delta, total, body);
            if i > 0 {
                run.add(r);
            }
        }
        let mut out = vec![0u8; BATCH_HEADER_BYTES];
        Compressor::default()
            .compress(codec, &records, &mut out)
            .expect("compresses");
        finish_batch(&mut out, &run, codec, &opts(codec, usize::MAX));
        out
    }

    /// (base offset, record count, codec) of each batch in `wire`.
    fn shape(wire: &[u8]) -> Vec<(i64, u32, Compression)> {
        let mut buf = RecordBatchBuf::new();
        let mut summaries = Vec::new();
        decode_batches(
            wire,
            &mut buf,
            &DecodeLimits::trusted(usize::MAX),
            &mut summaries,
        )
        .expect("decodes");
        summaries
            .iter()
            .map(|s| (s.base_offset, s.record_count, s.compression))
            .collect()
    }

    const AS_PRODUCED: CodecRules = CodecRules {
        as_produced: true,
        zstd_allowed: true,
    };

    fn recs(from: u64, n: u64, value: &[u8]) -> Vec<Rec> {
        (from..from + n).map(|i| Rec::plain(i, value)).collect()
    }

    #[test]
    fn produced_batches_keep_their_codec_and_boundaries() {
        let stored = produced(&[
            (recs(0, 3, b"gzip"), Compression::Gzip),
            (recs(3, 2, b"plain"), Compression::None),
            (recs(5, 2, b"plain"), Compression::None),
            (recs(7, 4, b"zstd"), Compression::Zstd),
            (recs(11, 1, b"snappy"), Compression::Snappy),
            (recs(12, 2, b"lz4"), Compression::Lz4),
        ]);
        let all: Vec<Rec> = stored.views().map(|r| Rec::from_view(&r)).collect();
        let mut enc = BatchEncoder::new();
        let mut wire = Vec::new();
        let s = enc
            .encode_with(
                stored.views(),
                &mut wire,
                &opts(Compression::None, usize::MAX),
                AS_PRODUCED,
            )
            .expect("encodes");
        assert_eq!(s.records, 14);
        // Uncompressed produce is not recorded: those records form one run.
        assert_eq!(
            shape(&wire),
            vec![
                (0, 3, Compression::Gzip),
                (3, 4, Compression::None),
                (7, 4, Compression::Zstd),
                (11, 1, Compression::Snappy),
                (12, 2, Compression::Lz4),
            ]
        );
        assert_eq!(decode_ours(&wire, 0).0, all);
        // A topic codec: every batch with it, still the producer's boundaries.
        wire.clear();
        enc.encode(
            stored.views(),
            &mut wire,
            &opts(Compression::Lz4, usize::MAX),
        )
        .expect("encodes");
        let got: Vec<(i64, u32)> = shape(&wire).iter().map(|s| (s.0, s.1)).collect();
        assert_eq!(got, vec![(0, 3), (3, 4), (7, 4), (11, 1), (12, 2)]);
        assert!(shape(&wire).iter().all(|s| s.2 == Compression::Lz4));
        // Old fetch versions cannot take zstd: that batch goes uncompressed.
        wire.clear();
        enc.encode_with(
            stored.views(),
            &mut wire,
            &opts(Compression::None, usize::MAX),
            CodecRules {
                zstd_allowed: false,
                ..AS_PRODUCED
            },
        )
        .expect("encodes");
        assert_eq!(shape(&wire)[2], (7, 4, Compression::None));
        assert_eq!(decode_ours(&wire, 0).0, all);
    }

    #[test]
    fn a_fetch_inside_a_produced_batch_gets_the_rest_uncompressed() {
        let stored = produced(&[
            (recs(0, 4, b"gzip"), Compression::Gzip),
            (recs(4, 2, b"gzip"), Compression::Gzip),
        ]);
        let from_2 = stored.views().skip(2);
        let mut wire = Vec::new();
        BatchEncoder::new()
            .encode_with(
                from_2,
                &mut wire,
                &opts(Compression::None, usize::MAX),
                AS_PRODUCED,
            )
            .expect("encodes");
        assert_eq!(
            shape(&wire),
            vec![(2, 2, Compression::None), (4, 2, Compression::Gzip)]
        );
    }

    #[test]
    fn produced_batches_are_measured_compressed_and_served_whole() {
        // Three 1 MiB values of zeros in one gzip batch (franz-go's
        // TestConsumeMaxDecompressBatchBytes), then a small batch.
        let big = vec![0u8; 1 << 20];
        let stored = produced(&[
            (recs(0, 3, &big), Compression::Gzip),
            (recs(3, 1, b"after"), Compression::Gzip),
        ]);
        let mut enc = BatchEncoder::new();
        for budget in [0, 1 << 20] {
            let mut wire = Vec::new();
            let s = enc
                .encode_with(
                    stored.views(),
                    &mut wire,
                    &opts(Compression::None, budget),
                    AS_PRODUCED,
                )
                .expect("encodes");
            // The first batch is whole whatever the budget; with 1 MiB the
            // second fits too, as the compressed batches are a few KiB.
            let want = if budget == 0 { 1 } else { 2 };
            assert_eq!(s.batches, want, "budget {budget}");
            assert_eq!(shape(&wire)[0], (0, 3, Compression::Gzip));
            assert!(wire.len() < 64 * 1024, "{} bytes", wire.len());
        }
        // A produced batch that does not fit after compression is left for
        // the next fetch, unless it is the first.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let noise: Vec<u8> = (0..4000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let stored = produced(&[
            (recs(0, 1, b"small"), Compression::Gzip),
            (recs(1, 2, &noise), Compression::Gzip),
        ]);
        let mut wire = Vec::new();
        let s = enc
            .encode_with(
                stored.views(),
                &mut wire,
                &opts(Compression::None, 2000),
                AS_PRODUCED,
            )
            .expect("encodes");
        assert_eq!((s.batches, s.records, s.last_offset), (1, 1, Some(0)));
        assert!(s.bytes <= 2000);
    }

    #[test]
    fn a_produced_batch_cut_by_the_read_window_waits_unless_first() {
        let stored = produced(&[
            (recs(0, 2, b"a"), Compression::Gzip),
            (recs(2, 3, b"b"), Compression::Snappy),
        ]);
        // The window ends after offset 3, inside the second batch.
        let window: Vec<RecordView<'_>> = stored.views().take(4).collect();
        let mut enc = BatchEncoder::new();
        let mut wire = Vec::new();
        let s = enc
            .encode_with(
                window.iter().copied(),
                &mut wire,
                &opts(Compression::None, usize::MAX),
                AS_PRODUCED,
            )
            .expect("encodes");
        assert_eq!((s.batches, s.last_offset), (1, Some(1)));
        assert_eq!(s.bytes, wire.len());
        assert_eq!(shape(&wire), vec![(0, 2, Compression::Gzip)]);
        // The first batch is served with what there is (compaction may have
        // removed the rest of it).
        wire.clear();
        let s = enc
            .encode_with(
                window[2..].iter().copied(),
                &mut wire,
                &opts(Compression::None, usize::MAX),
                AS_PRODUCED,
            )
            .expect("encodes");
        assert_eq!(s.last_offset, Some(3));
        assert_eq!(shape(&wire), vec![(2, 2, Compression::Snappy)]);
    }

    #[test]
    fn a_produced_batch_split_in_two_keeps_its_codec() {
        // Records of one produced batch that cannot share a Kafka batch
        // (here: the transactional flag changes, which a real producer never
        // does) are split, and both parts keep the producer's codec.
        let mut batch = recs(0, 4, b"v");
        for r in &mut batch[2..] {
            r.meta.transactional = true;
        }
        let mut stored = Vec::new();
        for (i, r) in batch.iter().enumerate() {
            let b = (i == 0).then_some(disk::ProducedBatch {
                codec: Compression::Zstd.id() as u8,
                last_offset_delta: 3,
                stored_bytes: 0,
            });
            disk::encode_with_batch(
                &mut stored,
                r.offset,
                r.ts,
                r.key.as_deref(),
                r.value.as_deref(),
                [],
                &r.meta,
                b.as_ref(),
            );
        }
        disk::encode(
            &mut stored,
            4,
            4,
            None,
            Some(b"w"),
            [],
            &RecordMeta::default(),
        );
        let mut wire = Vec::new();
        BatchEncoder::new()
            .encode_with(
                views(&stored),
                &mut wire,
                &opts(Compression::None, usize::MAX),
                AS_PRODUCED,
            )
            .expect("encodes");
        assert_eq!(
            shape(&wire),
            vec![
                (0, 2, Compression::Zstd),
                (2, 2, Compression::Zstd),
                (4, 1, Compression::None)
            ]
        );
    }

    fn arb_bytes() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(any::<u8>(), 0..40)
    }

    fn arb_recs() -> impl Strategy<Value = Vec<Rec>> {
        let one = (
            1u64..4,
            -1000i64..1000,
            proptest::option::of(arb_bytes()),
            proptest::option::of(arb_bytes()),
            proptest::collection::vec(("[a-z]{0,4}", proptest::option::of(arb_bytes())), 0..3),
            0u8..6,
        );
        proptest::collection::vec(one, 1..40).prop_map(|v| {
            let mut offset = 0u64;
            let mut seq = 0i32;
            v.into_iter()
                .map(|(gap, ts, key, value, headers, kind)| {
                    offset += gap;
                    seq += 1;
                    let producer = (kind >= 2).then_some(ProducerInfo {
                        producer_id: i64::from(kind % 2),
                        producer_epoch: 0,
                        sequence: seq,
                    });
                    let mut hdrs: Headers = Vec::new();
                    for (k, v) in headers {
                        // kafka-protocol keeps headers in a map: unique keys.
                        if !hdrs.iter().any(|(hk, _)| hk == k.as_bytes()) {
                            hdrs.push((k.into_bytes(), v));
                        }
                    }
                    Rec {
                        offset,
                        ts: 1_700_000_000_000 + ts,
                        key,
                        value,
                        headers: hdrs,
                        meta: RecordMeta {
                            producer,
                            transactional: kind == 5,
                            control: false,
                        },
                    }
                })
                .collect()
        })
    }

    fn arb_codec() -> impl Strategy<Value = Compression> {
        proptest::sample::select(Compression::ALL.to_vec())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn prop_round_trip(recs in arb_recs(), c in arb_codec()) {
            let (wire, s) = encode_all(&recs, &opts(c, usize::MAX));
            prop_assert_eq!(s.records, recs.len());
            // es renumbers on append, so compare everything but the offsets,
            // and the offsets through kafka-protocol.
            let (got, _) = decode_ours(&wire, 0);
            let strip = |v: &[Rec]| v.iter().map(|r| Rec { offset: 0, ..r.clone() }).collect::<Vec<_>>();
            prop_assert_eq!(strip(&got), strip(&recs));
            let sets = RecordBatchDecoder::decode_all(&mut Bytes::from(wire)).expect("kafka-protocol decodes");
            let theirs: Vec<Rec> = sets.iter().flat_map(|s| s.records.iter().map(from_krecord)).collect();
            prop_assert_eq!(theirs, recs);
        }

        #[test]
        fn prop_budget(recs in arb_recs(), c in arb_codec(), max_bytes in 0usize..3000) {
            let (wire, s) = encode_all(&recs, &opts(c, max_bytes));
            prop_assert!(s.records >= 1);
            prop_assert!(s.bytes <= max_bytes || s.batches == 1);
            let (got, _) = decode_ours(&wire, 0);
            prop_assert_eq!(got.len(), s.records);
            prop_assert_eq!(Some(recs[s.records - 1].offset), s.last_offset);
        }

        #[test]
        fn prop_consumer_gets_produced_batches_as_produced(
            batches in proptest::collection::vec((1u64..6, arb_codec(), 0usize..300), 1..12),
            budget in 0usize..4000,
        ) {
            // Produce the batches, then fetch from offset 0 to the end with
            // `budget` per fetch, as a consumer does.
            let mut offset = 0u64;
            let mut input = Vec::new();
            for (n, codec, len) in &batches {
                input.push((recs(offset, *n, &vec![b'x'; *len]), *codec));
                offset += n;
            }
            let stored = produced(&input);
            let all: Vec<Rec> = stored.views().map(|r| Rec::from_view(&r)).collect();
            let mut enc = BatchEncoder::new();
            let mut got = Vec::new();
            let mut shapes = Vec::new();
            let mut next = 0u64;
            while next < offset {
                let mut wire = Vec::new();
                let s = enc
                    .encode_with(
                        stored.views().filter(|r| r.offset >= next),
                        &mut wire,
                        &opts(Compression::None, budget),
                        AS_PRODUCED,
                    )
                    .expect("encodes");
                prop_assert!(s.records >= 1, "progress");
                prop_assert!(s.bytes <= budget || s.batches == 1);
                got.extend(decode_ours(&wire, next).0);
                shapes.extend(shape(&wire));
                next = s.last_offset.expect("records") + 1;
            }
            prop_assert_eq!(got, all);
            // Every compressed batch comes back whole with its codec.
            let mut base = 0i64;
            for (recs, codec) in &input {
                if *codec != Compression::None {
                    let want = (base, recs.len() as u32, *codec);
                    prop_assert!(shapes.contains(&want), "{:?} in {:?}", want, shapes);
                }
                base += recs.len() as i64;
            }
        }

        #[test]
        fn prop_kafka_protocol_to_ours(recs in arb_recs(), c in arb_codec()) {
            let krecs = to_krecords(&recs);
            let mut wire = BytesMut::new();
            RecordBatchEncoder::encode(&mut wire, krecs.iter(), &RecordEncodeOptions { version: 2, compression: kcodec(c) })
                .expect("kafka-protocol encodes");
            let (got, _) = decode_ours(&wire, 0);
            let strip = |v: &[Rec]| v.iter().map(|r| Rec { offset: 0, ..r.clone() }).collect::<Vec<_>>();
            prop_assert_eq!(strip(&got), strip(&recs));
        }
    }

    /// `cargo test -p es-kafka --release codec::encode::tests::throughput -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn throughput() {
        let n = 100_000u64;
        let recs: Vec<Rec> = (0..n)
            .map(|i| Rec {
                key: Some(format!("key-{i:08}").into_bytes()),
                value: Some((0..256).map(|j| (i as usize * 31 + j) as u8).collect()),
                ..Rec::plain(i, b"")
            })
            .collect();
        let buf = stored(&recs);
        let payload_mb = (n as f64 * 256.0) / 1e6;
        for c in Compression::ALL {
            let mut enc = BatchEncoder::new();
            let mut dec = crate::codec::batch::BatchDecoder::new();
            let mut wire = Vec::with_capacity(buf.len() * 2);
            let mut out = RecordBatchBuf::with_capacity(buf.len() * 2, n as usize);
            let mut summaries = Vec::new();
            let rounds = 5;
            let mut enc_s = 0.0;
            let mut dec_s = 0.0;
            for _ in 0..rounds {
                wire.clear();
                let t = std::time::Instant::now();
                let s = enc
                    .encode(views(&buf), &mut wire, &opts(c, usize::MAX))
                    .expect("encodes");
                enc_s += t.elapsed().as_secs_f64();
                assert_eq!(s.records, n as usize);
                out.clear();
                summaries.clear();
                let t = std::time::Instant::now();
                dec.decode(
                    &wire,
                    &mut out,
                    &DecodeLimits::trusted(usize::MAX),
                    &mut summaries,
                )
                .expect("decodes");
                dec_s += t.elapsed().as_secs_f64();
                assert_eq!(out.len(), n as usize);
            }
            println!(
                "{:>6}: encode (incl. storage read+CRC) {:8.1} MB/s, decode {:8.1} MB/s of 256-byte values; wire {} bytes",
                c.name(),
                payload_mb * rounds as f64 / enc_s,
                payload_mb * rounds as f64 / dec_s,
                wire.len()
            );
        }
    }
}
