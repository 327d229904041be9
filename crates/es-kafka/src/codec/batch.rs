//! Kafka RecordBatch v2 (magic 2): the header layout, and decoding produced
//! batches into es-storage's [`RecordBatchBuf`].
//!
//! ```text
//! pos  field                 type
//!   0  baseOffset            i64
//!   8  batchLength           i32   bytes after this field
//!  12  partitionLeaderEpoch  i32
//!  16  magic                 i8    = 2
//!  17  crc                   u32   CRC-32C over attributes .. end of batch
//!  21  attributes            i16   bits 0-2 codec, 3 LogAppendTime,
//!                                  4 transactional, 5 control
//!  23  lastOffsetDelta       i32
//!  27  baseTimestamp         i64
//!  35  maxTimestamp          i64
//!  43  producerId            i64   -1 = none
//!  51  producerEpoch         i16
//!  53  baseSequence          i32   -1 = none
//!  57  recordCount           i32
//!  61  records               (compressed as a whole when codec != 0)
//!
//! record: length varint | attributes i8 | timestampDelta varlong |
//!         offsetDelta varint | keyLength varint (-1 = null) | key |
//!         valueLength varint (-1 = null) | value | headerCount varint |
//!         headers: keyLength varint | key | valueLength varint (-1 = null) | value
//! ```
//!
//! Decoding checks, in Kafka's order and with Kafka's error classes: the
//! batch length is sane and within the buffer, the magic, the size against
//! `max.message.bytes` (MESSAGE_TOO_LARGE), the CRC (CORRUPT_MESSAGE), then
//! the header rules Kafka's `LogValidator` applies to producers and the
//! record structure (INVALID_RECORD). Every count and length is checked
//! against the bytes that could hold it before it is used, so a batch that
//! claims two billion records in 70 bytes is refused without allocating.
//! Decompression is bounded by [`DecodeLimits::records_bytes_max`].
//!
//! Records are pushed into the caller's [`RecordBatchBuf`] as they are
//! parsed: key, value and headers are copied once, straight from the input
//! (or the reused decompression buffer), with no per-record allocation. A
//! compressed batch is noted with the buffer (codec and extent,
//! `RecordBatchBuf::push_batch_start`), which storage keeps beside the
//! records, so Fetch can serve the batch as it was produced; every record
//! stays plain unless it has headers, a null value or a producer id.

use es_storage::record::{self as disk, ProducerInfo, RecordMeta};
use es_storage::RecordBatchBuf;

use super::compression::{self, Compression, DecompressError, COMPRESSION_ATTR_MASK};
use super::varint::{read_varint, read_varlong};

/// Bytes before `batchLength` counts: baseOffset and batchLength itself.
pub const LOG_OVERHEAD_BYTES: usize = 12;
/// The fixed header before the records.
pub const BATCH_HEADER_BYTES: usize = 61;
/// The smallest `batchLength`: a header without records.
pub const BATCH_LENGTH_MIN: usize = BATCH_HEADER_BYTES - LOG_OVERHEAD_BYTES;
/// Field positions within a batch.
pub const BATCH_LENGTH_POS: usize = 8;
pub const PARTITION_LEADER_EPOCH_POS: usize = 12;
pub const MAGIC_POS: usize = 16;
pub const CRC_POS: usize = 17;
pub const ATTRIBUTES_POS: usize = 21;
pub const LAST_OFFSET_DELTA_POS: usize = 23;
pub const BASE_TIMESTAMP_POS: usize = 27;
pub const MAX_TIMESTAMP_POS: usize = 35;
pub const PRODUCER_ID_POS: usize = 43;
pub const PRODUCER_EPOCH_POS: usize = 51;
pub const BASE_SEQUENCE_POS: usize = 53;
pub const RECORD_COUNT_POS: usize = 57;
/// The only batch format es reads and writes.
pub const MAGIC_V2: i8 = 2;
/// Attribute bit: timestamps are the broker's append time.
pub const ATTR_LOG_APPEND_TIME: i16 = 1 << 3;
/// Attribute bit: the batch belongs to a transaction.
pub const ATTR_TRANSACTIONAL: i16 = 1 << 4;
/// Attribute bit: the batch holds a control record (commit/abort marker).
pub const ATTR_CONTROL: i16 = 1 << 5;
/// The smallest encoded record: length, attributes, timestamp delta, offset
/// delta, key length, value length and header count, one byte each.
pub const RECORD_BYTES_MIN: usize = 7;
/// The smallest encoded header: key length and value length.
const HEADER_BYTES_MIN: usize = 2;
/// Kafka's default `max.message.bytes` (1 MiB + the 12-byte log overhead).
pub const MAX_MESSAGE_BYTES_DEFAULT: usize = 1_048_588;
/// Default bound on decompressed record bytes from one input.
pub const RECORDS_BYTES_MAX_DEFAULT: usize = 64 * 1024 * 1024;
/// A produced batch may expand to this many times its topic's
/// `max.message.bytes` (docs/reliability.md), within
/// [`PRODUCED_RECORDS_BYTES_MIN`] and [`RECORDS_BYTES_MAX_DEFAULT`].
pub const DECOMPRESSED_MULTIPLE: usize = 16;
/// The least a produced batch may expand to, whatever its topic's
/// `max.message.bytes`.
pub const PRODUCED_RECORDS_BYTES_MIN: usize = 16 * 1024 * 1024;
/// Hard bound on [`DecodeLimits::records_bytes_max`]: every Kafka record is at
/// least 7 bytes and at most ~7.3 times that on disk, so this keeps a
/// [`RecordBatchBuf`] (u32 record positions) below 4 GiB.
pub const RECORDS_BYTES_HARD_MAX: usize = 512 * 1024 * 1024;
/// Kafka's "no producer id" / "no sequence" / "no epoch" values.
pub const NO_PRODUCER_ID: i64 = -1;
pub const NO_PRODUCER_EPOCH: i16 = -1;
pub const NO_SEQUENCE: i32 = -1;

/// Why a produced batch was refused; each variant is one Kafka error code
/// ([`BatchError::kafka_error_code`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    /// CORRUPT_MESSAGE (2): the batch framing or CRC is wrong.
    #[error("corrupt record batch: {0}")]
    CorruptMessage(&'static str),
    /// INVALID_RECORD (87): the batch is intact but breaks Kafka's rules.
    #[error("invalid record: {0}")]
    InvalidRecord(&'static str),
    /// UNSUPPORTED_COMPRESSION_TYPE (76): see [`check_produce_compression`].
    #[error("unsupported compression type: {0}")]
    UnsupportedCompressionType(&'static str),
    /// MESSAGE_TOO_LARGE (10): the batch or its decompressed records exceed a limit.
    #[error("message too large: {0}")]
    MessageTooLarge(&'static str),
}

impl BatchError {
    pub const CORRUPT_MESSAGE: i16 = 2;
    pub const MESSAGE_TOO_LARGE: i16 = 10;
    pub const UNSUPPORTED_COMPRESSION_TYPE: i16 = 76;
    pub const INVALID_RECORD: i16 = 87;

    /// The Kafka error code a produce response carries for this error.
    pub fn kafka_error_code(&self) -> i16 {
        match self {
            BatchError::CorruptMessage(_) => Self::CORRUPT_MESSAGE,
            BatchError::InvalidRecord(_) => Self::INVALID_RECORD,
            BatchError::UnsupportedCompressionType(_) => Self::UNSUPPORTED_COMPRESSION_TYPE,
            BatchError::MessageTooLarge(_) => Self::MESSAGE_TOO_LARGE,
        }
    }

    /// The reason, for the produce response's error message.
    pub fn reason(&self) -> &'static str {
        match self {
            BatchError::CorruptMessage(s)
            | BatchError::InvalidRecord(s)
            | BatchError::UnsupportedCompressionType(s)
            | BatchError::MessageTooLarge(s) => s,
        }
    }
}

/// Limits and rules for one decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeLimits {
    /// Largest batch, log overhead included (Kafka's `max.message.bytes`,
    /// compared like Kafka with `12 + batchLength`).
    pub batch_bytes_max: usize,
    /// Largest total of record bytes after decompression across the whole
    /// input; clamped to [`RECORDS_BYTES_HARD_MAX`].
    pub records_bytes_max: usize,
    /// Apply the rules Kafka applies to batches from producers: exactly one
    /// batch, record count >= 1 and equal to lastOffsetDelta + 1, no control
    /// batches, a base sequence >= 0 when there is a producer id. Off for
    /// trusted input (tools, replication, tests).
    pub produce_rules: bool,
}

impl Default for DecodeLimits {
    fn default() -> Self {
        DecodeLimits::produce(MAX_MESSAGE_BYTES_DEFAULT)
    }
}

impl DecodeLimits {
    /// Kafka's produce rules with the topic's `max.message.bytes`.
    /// A batch may expand to [`DECOMPRESSED_MULTIPLE`] times that (16 MiB
    /// with Kafka's default of 1 MiB), so a compression bomb costs at most
    /// that much memory before it is refused with MESSAGE_TOO_LARGE.
    pub fn produce(batch_bytes_max: usize) -> Self {
        DecodeLimits {
            batch_bytes_max,
            records_bytes_max: batch_bytes_max
                .saturating_mul(DECOMPRESSED_MULTIPLE)
                .clamp(PRODUCED_RECORDS_BYTES_MIN, RECORDS_BYTES_MAX_DEFAULT),
            produce_rules: true,
        }
    }

    /// Structural checks only: any number of batches, control batches allowed.
    pub fn trusted(batch_bytes_max: usize) -> Self {
        DecodeLimits {
            produce_rules: false,
            ..DecodeLimits::produce(batch_bytes_max)
        }
    }
}

/// What the broker needs to know about one decoded batch (idempotence,
/// transactions, the produce response).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchSummary {
    /// The batch's baseOffset field as sent (producers send 0).
    pub base_offset: i64,
    pub partition_leader_epoch: i32,
    pub last_offset_delta: i32,
    pub record_count: u32,
    /// baseTimestamp field.
    pub first_timestamp: i64,
    /// The largest record timestamp (Kafka computes it from the records; for
    /// a LogAppendTime batch it is the maxTimestamp field).
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub transactional: bool,
    pub control: bool,
    /// Attribute bit 3 (producers must not set it; Kafka answers INVALID_TIMESTAMP).
    pub log_append_time: bool,
    pub compression: Compression,
    /// Bytes of the batch on the wire, log overhead included.
    pub batch_bytes: usize,
    /// Bytes of its records after decompression.
    pub records_bytes: usize,
}

impl BatchSummary {
    pub fn has_producer_id(&self) -> bool {
        self.producer_id > NO_PRODUCER_ID
    }

    /// The sequence of the batch's last record, as Kafka computes it.
    pub fn last_sequence(&self) -> i32 {
        if self.base_sequence == NO_SEQUENCE {
            return NO_SEQUENCE;
        }
        increment_sequence(self.base_sequence, self.last_offset_delta)
    }
}

/// Kafka's `DefaultRecordBatch.incrementSequence`: sequences run from 0 to
/// i32::MAX and then wrap to 0 (not to i32::MIN). A negative `increment`
/// (never produced by a valid batch) counts as 0.
pub fn increment_sequence(sequence: i32, increment: i32) -> i32 {
    let increment = increment.max(0);
    if sequence > i32::MAX - increment {
        return increment - (i32::MAX - sequence) - 1;
    }
    sequence + increment
}

/// Kafka refuses zstd batches in produce requests before v7.
pub fn check_produce_compression(
    produce_api_version: i16,
    summary: &BatchSummary,
) -> Result<(), BatchError> {
    if produce_api_version < 7 && summary.compression == Compression::Zstd {
        return Err(BatchError::UnsupportedCompressionType(
            "produce requests before version 7 may not use zstd compression",
        ));
    }
    Ok(())
}

/// Decodes every batch in `input` into `out`, appending one summary per
/// batch to `summaries`. On error, `out` and `summaries` may hold the records
/// of the batches before the bad one: discard them (Kafka fails the whole
/// partition). Allocates only for compressed batches; use a [`BatchDecoder`]
/// to reuse that buffer across calls.
pub fn decode_batches(
    input: &[u8],
    out: &mut RecordBatchBuf,
    limits: &DecodeLimits,
    summaries: &mut Vec<BatchSummary>,
) -> Result<(), BatchError> {
    BatchDecoder::new().decode(input, out, limits, summaries)
}

/// Decoder state reused across requests: the decompression buffer.
#[derive(Debug, Default)]
pub struct BatchDecoder {
    scratch: Vec<u8>,
}

/// The parsed fixed header of one batch.
#[derive(Clone, Copy, Debug)]
struct Header {
    base_offset: i64,
    partition_leader_epoch: i32,
    attributes: i16,
    last_offset_delta: i32,
    first_timestamp: i64,
    max_timestamp: i64,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    record_count: i32,
}

fn be_i16(b: &[u8], p: usize) -> i16 {
    i16::from_be_bytes([b[p], b[p + 1]])
}

fn be_i32(b: &[u8], p: usize) -> i32 {
    i32::from_be_bytes([b[p], b[p + 1], b[p + 2], b[p + 3]])
}

fn be_i64(b: &[u8], p: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[p..p + 8]);
    i64::from_be_bytes(a)
}

impl Header {
    /// `b` is at least [`BATCH_HEADER_BYTES`] long.
    fn parse(b: &[u8]) -> Header {
        Header {
            base_offset: be_i64(b, 0),
            partition_leader_epoch: be_i32(b, PARTITION_LEADER_EPOCH_POS),
            attributes: be_i16(b, ATTRIBUTES_POS),
            last_offset_delta: be_i32(b, LAST_OFFSET_DELTA_POS),
            first_timestamp: be_i64(b, BASE_TIMESTAMP_POS),
            max_timestamp: be_i64(b, MAX_TIMESTAMP_POS),
            producer_id: be_i64(b, PRODUCER_ID_POS),
            producer_epoch: be_i16(b, PRODUCER_EPOCH_POS),
            base_sequence: be_i32(b, BASE_SEQUENCE_POS),
            record_count: be_i32(b, RECORD_COUNT_POS),
        }
    }
}

impl BatchDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// See [`decode_batches`].
    pub fn decode(
        &mut self,
        input: &[u8],
        out: &mut RecordBatchBuf,
        limits: &DecodeLimits,
        summaries: &mut Vec<BatchSummary>,
    ) -> Result<(), BatchError> {
        let records_bytes_max = limits.records_bytes_max.min(RECORDS_BYTES_HARD_MAX);
        let mut records_bytes_used = 0usize;
        let mut rest = input;
        let mut batches = 0usize;
        if rest.is_empty() && limits.produce_rules {
            return Err(BatchError::InvalidRecord(
                "a produce request must contain one record batch per partition",
            ));
        }
        while !rest.is_empty() {
            if batches == 1 && limits.produce_rules {
                return Err(BatchError::InvalidRecord(
                    "a produce request may contain only one record batch per partition",
                ));
            }
            let batch_bytes = frame_batch(rest, limits)?;
            let batch = &rest[..batch_bytes];
            rest = &rest[batch_bytes..];
            let summary = self.decode_one(
                batch,
                out,
                limits,
                records_bytes_max - records_bytes_used,
                None,
            )?;
            records_bytes_used += summary.records_bytes;
            summaries.push(summary);
            batches += 1;
        }
        Ok(())
    }

    /// Decodes one whole batch a leader served to this follower (framed by
    /// [`whole_batch_len`]): its records go into `out` with their timestamps
    /// as the leader stored them, and their offsets (the batch's base offset
    /// plus each record's delta) into `offsets`. Structural checks only.
    pub fn decode_replica(
        &mut self,
        batch: &[u8],
        out: &mut RecordBatchBuf,
        offsets: &mut Vec<u64>,
        limits: &DecodeLimits,
    ) -> Result<BatchSummary, BatchError> {
        let limits = DecodeLimits {
            produce_rules: false,
            ..*limits
        };
        let bytes = frame_batch(batch, &limits)?;
        if bytes != batch.len() {
            return Err(BatchError::CorruptMessage("not exactly one record batch"));
        }
        let left = limits.records_bytes_max.min(RECORDS_BYTES_HARD_MAX);
        self.decode_one(batch, out, &limits, left, Some(offsets))
    }

    fn decode_one(
        &mut self,
        batch: &[u8],
        out: &mut RecordBatchBuf,
        limits: &DecodeLimits,
        records_bytes_left: usize,
        offsets: Option<&mut Vec<u64>>,
    ) -> Result<BatchSummary, BatchError> {
        let h = Header::parse(batch);
        let compression = Compression::from_id(h.attributes & COMPRESSION_ATTR_MASK)
            .ok_or(BatchError::InvalidRecord("unknown compression codec"))?;
        let transactional = h.attributes & ATTR_TRANSACTIONAL != 0;
        let control = h.attributes & ATTR_CONTROL != 0;
        let log_append_time = h.attributes & ATTR_LOG_APPEND_TIME != 0;
        if h.record_count < 0 {
            return Err(BatchError::InvalidRecord("negative record count"));
        }
        if limits.produce_rules {
            if h.record_count == 0 {
                return Err(BatchError::InvalidRecord(
                    "a produced batch must hold at least one record",
                ));
            }
            if i64::from(h.last_offset_delta) + 1 != i64::from(h.record_count) {
                return Err(BatchError::InvalidRecord(
                    "inconsistent batch offset range and record count",
                ));
            }
            if control {
                return Err(BatchError::InvalidRecord(
                    "clients are not allowed to write control records",
                ));
            }
            if h.producer_id > NO_PRODUCER_ID && h.base_sequence < 0 {
                return Err(BatchError::InvalidRecord(
                    "invalid sequence number in a batch with a producer id",
                ));
            }
        }
        let count = h.record_count as usize;
        let section = &batch[BATCH_HEADER_BYTES..];
        // The plausibility check comes before decompression, so a batch
        // claiming more records than the limit could ever hold costs nothing.
        let records: &[u8] = if compression == Compression::None {
            if section.len() > records_bytes_left {
                return Err(BatchError::MessageTooLarge(
                    "decompressed records exceed the limit",
                ));
            }
            section
        } else {
            if count > records_bytes_left / RECORD_BYTES_MIN {
                return Err(BatchError::InvalidRecord(
                    "record count exceeds what the batch can hold",
                ));
            }
            compression::decompress(compression, section, records_bytes_left, &mut self.scratch)
                .map_err(|e| match e {
                    DecompressError::TooLarge => {
                        BatchError::MessageTooLarge("decompressed records exceed the limit")
                    }
                    DecompressError::Malformed(why) => BatchError::InvalidRecord(why),
                })?;
            &self.scratch
        };
        if count > records.len() / RECORD_BYTES_MIN {
            return Err(BatchError::InvalidRecord(
                "record count exceeds what the batch can hold",
            ));
        }
        // Room for the stored records in one step rather than a doubling
        // per growth; bounded by the checked section size and count.
        out.reserve_records(records.len(), count);
        let max_timestamp = decode_records(records, &h, compression, out, offsets)?;
        Ok(BatchSummary {
            base_offset: h.base_offset,
            partition_leader_epoch: h.partition_leader_epoch,
            last_offset_delta: h.last_offset_delta,
            record_count: count as u32,
            first_timestamp: h.first_timestamp,
            max_timestamp: if count == 0 {
                h.max_timestamp
            } else {
                max_timestamp
            },
            producer_id: h.producer_id,
            producer_epoch: h.producer_epoch,
            base_sequence: h.base_sequence,
            transactional,
            control,
            log_append_time,
            compression,
            batch_bytes: batch.len(),
            records_bytes: records.len(),
        })
    }
}

/// The size of the whole batch at the start of `buf` (log overhead
/// included), or None when `buf` holds only part of one (a fetch response
/// may end with a partial batch) or too little to tell.
pub fn whole_batch_len(buf: &[u8]) -> Option<usize> {
    if buf.len() < LOG_OVERHEAD_BYTES {
        return None;
    }
    let batch_length = usize::try_from(be_i32(buf, BATCH_LENGTH_POS)).ok()?;
    let total = LOG_OVERHEAD_BYTES.checked_add(batch_length)?;
    (total <= buf.len()).then_some(total)
}

/// Checks the framing of the batch at the start of `buf` (length, magic,
/// size limit, CRC) and returns its size, log overhead included.
fn frame_batch(buf: &[u8], limits: &DecodeLimits) -> Result<usize, BatchError> {
    if buf.len() < MAGIC_POS + 1 {
        return Err(BatchError::CorruptMessage("truncated record batch header"));
    }
    let batch_length = be_i32(buf, BATCH_LENGTH_POS);
    let magic = buf[MAGIC_POS] as i8;
    if magic == 0 || magic == 1 {
        // Kafka: produce v3+ may only carry magic 2 (INVALID_RECORD); es
        // has no v0/v1 message-set support at all.
        return Err(BatchError::InvalidRecord(
            "only record batches with magic version 2 are supported",
        ));
    }
    if magic != MAGIC_V2 {
        return Err(BatchError::CorruptMessage("unknown record batch magic"));
    }
    if batch_length < BATCH_LENGTH_MIN as i32 {
        return Err(BatchError::CorruptMessage(
            "record batch length below the header size",
        ));
    }
    let total = LOG_OVERHEAD_BYTES + batch_length as usize;
    if total > limits.batch_bytes_max {
        return Err(BatchError::MessageTooLarge(
            "record batch larger than max.message.bytes",
        ));
    }
    if buf.len() < total {
        return Err(BatchError::CorruptMessage("truncated record batch"));
    }
    let stored = be_i32(buf, CRC_POS) as u32;
    if crc32c::crc32c(&buf[ATTRIBUTES_POS..total]) != stored {
        return Err(BatchError::CorruptMessage("record batch CRC-32C mismatch"));
    }
    Ok(total)
}

const BAD_RECORD: BatchError = BatchError::InvalidRecord("malformed record");

/// Parses exactly `h.record_count` records filling `records` exactly and
/// pushes them; returns the largest timestamp. A compressed batch is noted
/// with the buffer (codec and extent).
fn decode_records(
    records: &[u8],
    h: &Header,
    compression: Compression,
    out: &mut RecordBatchBuf,
    mut offsets: Option<&mut Vec<u64>>,
) -> Result<i64, BatchError> {
    let transactional = h.attributes & ATTR_TRANSACTIONAL != 0;
    let control = h.attributes & ATTR_CONTROL != 0;
    let log_append_time = h.attributes & ATTR_LOG_APPEND_TIME != 0;
    if offsets.is_some() && h.base_offset < 0 {
        return Err(BatchError::InvalidRecord("negative base offset"));
    }
    // Control batches are es's own (markers), never recorded as produced.
    let record_batch = compression != Compression::None && !control;
    let mut rest = records;
    let mut max_timestamp = i64::MIN;
    let has_producer = h.producer_id > NO_PRODUCER_ID;
    for i in 0..h.record_count {
        let (len, used) = read_varint(rest).ok_or(BAD_RECORD)?;
        let body = usize::try_from(len)
            .ok()
            .and_then(|n| rest.get(used..used.checked_add(n)?))
            .ok_or(BatchError::InvalidRecord("record length beyond the batch"))?;
        rest = &rest[used + body.len()..];
        let r = parse_record(body)?;
        if let Some(o) = offsets.as_deref_mut() {
            let at = u64::try_from(r.offset_delta)
                .ok()
                .and_then(|d| (h.base_offset as u64).checked_add(d))
                .ok_or(BatchError::InvalidRecord("record offset out of range"))?;
            o.push(at);
        }
        let timestamp = if log_append_time {
            h.max_timestamp
        } else {
            h.first_timestamp.wrapping_add(r.timestamp_delta)
        };
        max_timestamp = max_timestamp.max(timestamp);
        // As Java's DefaultRecord: baseSequence + offsetDelta, wrapping to 0.
        let producer = has_producer.then(|| ProducerInfo {
            producer_id: h.producer_id,
            producer_epoch: h.producer_epoch,
            sequence: if h.base_sequence == NO_SEQUENCE {
                NO_SEQUENCE
            } else {
                increment_sequence(h.base_sequence, r.offset_delta)
            },
        });
        let meta = RecordMeta {
            producer,
            transactional,
            control,
        };
        if body.len() > DISK_CHECK_THRESHOLD_BYTES {
            let disk_len = disk::encoded_len(r.key, r.value, r.headers(), &meta);
            if disk_len > disk::LEN_PREFIX_BYTES + disk::BODY_BYTES_MAX {
                return Err(BatchError::MessageTooLarge(
                    "record larger than es can store",
                ));
            }
        }
        if record_batch && i == 0 {
            let codec = compression.id() as u8;
            out.push_batch_start(timestamp, r.key, r.value, r.headers(), &meta, codec);
        } else {
            out.push(timestamp, r.key, r.value, r.headers(), &meta);
        }
    }
    if record_batch {
        out.end_batch();
    }
    if !rest.is_empty() {
        return Err(BatchError::InvalidRecord(
            "bytes remain after the declared record count",
        ));
    }
    Ok(max_timestamp)
}

/// A record of at most this many bytes cannot exceed es-storage's record
/// limit (an on-disk record is at most 51 + 4x the Kafka record's bytes; a
/// produced batch's codec and extent are noted beside the records, not in
/// them).
const DISK_CHECK_THRESHOLD_BYTES: usize = disk::BODY_BYTES_MAX / 4 - 64;

/// One record's fields, borrowed from the records section.
#[derive(Clone, Copy, Debug)]
struct KafkaRecord<'a> {
    timestamp_delta: i64,
    offset_delta: i32,
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
    headers_raw: &'a [u8],
    header_count: u32,
}

impl<'a> KafkaRecord<'a> {
    fn headers(&self) -> KafkaHeaderIter<'a> {
        KafkaHeaderIter {
            rest: self.headers_raw,
            left: self.header_count,
        }
    }
}

/// Reads a varint length prefix; -1 (any negative, as Java reads it) = null.
fn nullable_bytes(b: &[u8]) -> Option<(Option<&[u8]>, usize)> {
    let (len, used) = read_varint(b)?;
    if len < 0 {
        return Some((None, used));
    }
    let end = used.checked_add(len as usize)?;
    Some((Some(b.get(used..end)?), end))
}

/// A header's key and value (a null value as `None`).
pub type HeaderPair<'a> = (&'a [u8], Option<&'a [u8]>);

/// Parses one header (key length must be >= 0) and returns its bytes used.
fn parse_header(b: &[u8]) -> Option<(HeaderPair<'_>, usize)> {
    let (klen, used) = read_varint(b)?;
    if klen < 0 {
        return None;
    }
    let kend = used.checked_add(klen as usize)?;
    let key = b.get(used..kend)?;
    let (value, vused) = nullable_bytes(&b[kend..])?;
    Some(((key, value), kend + vused))
}

/// Parses a record body (after its length); it must be consumed exactly.
fn parse_record(body: &[u8]) -> Result<KafkaRecord<'_>, BatchError> {
    // attributes (unused in v2)
    let mut p = 1usize;
    if body.is_empty() {
        return Err(BAD_RECORD);
    }
    let (timestamp_delta, n) = read_varlong(&body[p..]).ok_or(BAD_RECORD)?;
    p += n;
    let (offset_delta, n) = read_varint(&body[p..]).ok_or(BAD_RECORD)?;
    p += n;
    if offset_delta < 0 {
        return Err(BatchError::InvalidRecord("negative record offset delta"));
    }
    let (key, n) = nullable_bytes(&body[p..]).ok_or(BAD_RECORD)?;
    p += n;
    let (value, n) = nullable_bytes(&body[p..]).ok_or(BAD_RECORD)?;
    p += n;
    let (count, n) = read_varint(&body[p..]).ok_or(BAD_RECORD)?;
    p += n;
    if count < 0 {
        return Err(BatchError::InvalidRecord("negative record header count"));
    }
    let headers_raw = &body[p..];
    if count as usize > headers_raw.len() / HEADER_BYTES_MIN {
        return Err(BatchError::InvalidRecord(
            "header count exceeds what the record can hold",
        ));
    }
    let mut h = headers_raw;
    for _ in 0..count {
        let (_, used) =
            parse_header(h).ok_or(BatchError::InvalidRecord("malformed record header"))?;
        h = &h[used..];
    }
    if !h.is_empty() {
        return Err(BatchError::InvalidRecord(
            "record length disagrees with its fields",
        ));
    }
    Ok(KafkaRecord {
        timestamp_delta,
        offset_delta,
        key,
        value,
        headers_raw,
        header_count: count as u32,
    })
}

/// Lazily iterates a record's headers (validated by `parse_record`) without
/// allocating; yields (key, value) with a null value as `None`.
#[derive(Clone, Debug)]
pub struct KafkaHeaderIter<'a> {
    rest: &'a [u8],
    left: u32,
}

impl<'a> Iterator for KafkaHeaderIter<'a> {
    type Item = HeaderPair<'a>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        // Validated already; a failure here just ends the iteration.
        let (pair, used) = parse_header(self.rest)?;
        self.rest = &self.rest[used..];
        self.left -= 1;
        Some(pair)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left as usize))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::varint::{put_varint, put_varlong};
    use es_storage::RecordIter;

    /// Hand-built batch for error cases: records are given pre-encoded.
    struct Raw {
        attributes: i16,
        last_offset_delta: i32,
        producer_id: i64,
        base_sequence: i32,
        count: i32,
        records: Vec<u8>,
    }

    impl Raw {
        fn new(records: Vec<u8>, count: i32) -> Raw {
            Raw {
                attributes: 0,
                last_offset_delta: count - 1,
                producer_id: -1,
                base_sequence: -1,
                count,
                records,
            }
        }

        fn bytes(&self) -> Vec<u8> {
            let mut b = Vec::new();
            b.extend_from_slice(&0i64.to_be_bytes());
            b.extend_from_slice(&((BATCH_LENGTH_MIN + self.records.len()) as i32).to_be_bytes());
            b.extend_from_slice(&0i32.to_be_bytes());
            b.push(2);
            b.extend_from_slice(&[0; 4]);
            b.extend_from_slice(&self.attributes.to_be_bytes());
            b.extend_from_slice(&self.last_offset_delta.to_be_bytes());
            b.extend_from_slice(&1000i64.to_be_bytes());
            b.extend_from_slice(&1000i64.to_be_bytes());
            b.extend_from_slice(&self.producer_id.to_be_bytes());
            b.extend_from_slice(&0i16.to_be_bytes());
            b.extend_from_slice(&self.base_sequence.to_be_bytes());
            b.extend_from_slice(&self.count.to_be_bytes());
            b.extend_from_slice(&self.records);
            let crc = crc32c::crc32c(&b[ATTRIBUTES_POS..]);
            b[CRC_POS..CRC_POS + 4].copy_from_slice(&crc.to_be_bytes());
            b
        }
    }

    fn record(
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(&[u8], Option<&[u8]>)],
        delta: i32,
    ) -> Vec<u8> {
        let mut body = vec![0u8];
        put_varlong(&mut body, i64::from(delta));
        put_varint(&mut body, delta);
        for f in [key, value] {
            match f {
                Some(b) => {
                    put_varint(&mut body, b.len() as i32);
                    body.extend_from_slice(b);
                }
                None => put_varint(&mut body, -1),
            }
        }
        put_varint(&mut body, headers.len() as i32);
        for (k, v) in headers {
            put_varint(&mut body, k.len() as i32);
            body.extend_from_slice(k);
            match v {
                Some(v) => {
                    put_varint(&mut body, v.len() as i32);
                    body.extend_from_slice(v);
                }
                None => put_varint(&mut body, -1),
            }
        }
        let mut r = Vec::new();
        put_varint(&mut r, body.len() as i32);
        r.extend_from_slice(&body);
        r
    }

    fn decode(
        input: &[u8],
        limits: &DecodeLimits,
    ) -> Result<(RecordBatchBuf, Vec<BatchSummary>), BatchError> {
        let mut out = RecordBatchBuf::new();
        let mut s = Vec::new();
        decode_batches(input, &mut out, limits, &mut s)?;
        Ok((out, s))
    }

    #[test]
    fn nulls_empties_and_headers() {
        let mut recs = record(None, Some(b""), &[(b"h", None), (b"", Some(b""))], 0);
        recs.extend(record(Some(b""), None, &[], 1));
        recs.extend(record(Some(b"k"), Some(b"v"), &[(b"a", Some(b"b"))], 2));
        let (mut out, s) =
            decode(&Raw::new(recs, 3).bytes(), &DecodeLimits::default()).expect("decodes");
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].record_count, 3);
        assert_eq!(s[0].max_timestamp, 1002);
        let bytes = out.seal(10).to_vec();
        let got: Vec<_> = RecordIter::new(&bytes).map(|r| r.expect("valid")).collect();
        assert_eq!(got.len(), 3);
        assert_eq!((got[0].key, got[0].value), (None, Some(&b""[..])));
        assert_eq!(
            got[0].headers().collect::<Vec<_>>(),
            vec![(&b"h"[..], None), (&b""[..], Some(&b""[..]))]
        );
        assert_eq!((got[1].key, got[1].value), (Some(&b""[..]), None));
        assert_eq!(got[1].header_count(), 0);
        assert_eq!(
            (got[2].key, got[2].value),
            (Some(&b"k"[..]), Some(&b"v"[..]))
        );
        assert_eq!(got[2].timestamp_ms, 1002);
        assert_eq!(got[2].offset, 12);
    }

    #[test]
    fn compressed_batches_are_noted_beside_plain_records() {
        let mut recs = Vec::new();
        for i in 0..3 {
            recs.extend(record(Some(b"k"), Some(&[0u8; 100][..]), &[], i));
        }
        for codec in Compression::ALL {
            let mut raw = Raw::new(Vec::new(), 3);
            raw.attributes = codec.id();
            crate::codec::compression::Compressor::new()
                .compress(codec, &recs, &mut raw.records)
                .expect("compresses");
            // Two produced batches in one (trusted) input.
            let mut input = raw.bytes();
            input.extend(raw.bytes());
            let (mut out, _) = decode(&input, &DecodeLimits::trusted(1 << 20)).expect("decodes");
            let bytes = out.seal(0).to_vec();
            let got: Vec<_> = RecordIter::new(&bytes).map(|r| r.expect("valid")).collect();
            assert_eq!(got.len(), 6);
            let batch_len: usize = got[..3].iter().map(|r| r.encoded_len).sum();
            let want: Vec<_> = if codec == Compression::None {
                Vec::new()
            } else {
                [0u32, 3]
                    .iter()
                    .map(|&i| {
                        (
                            i,
                            es_storage::record::ProducedBatch {
                                codec: codec.id() as u8,
                                last_offset_delta: 2,
                                stored_bytes: batch_len as u32,
                            },
                        )
                    })
                    .collect()
            };
            assert_eq!(out.produced(), want.as_slice(), "{codec:?}");
            // The batches are noted beside the records, which stay plain
            // (no headers, producer or null value here), compressed or not.
            let mut pos = 0;
            for r in &got {
                assert_eq!(bytes[pos] & 0x80, 0, "{codec:?}: no extension");
                assert_eq!(r.batch, None);
                pos += r.encoded_len;
            }
        }
    }

    #[test]
    fn corrupt_crc_and_truncation() {
        let good = Raw::new(record(Some(b"k"), Some(b"v"), &[], 0), 1).bytes();
        assert!(decode(&good, &DecodeLimits::default()).is_ok());
        for i in ATTRIBUTES_POS..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x40;
            assert_eq!(
                decode(&bad, &DecodeLimits::default()).map(|_| ()),
                Err(BatchError::CorruptMessage("record batch CRC-32C mismatch")),
                "byte {i}"
            );
        }
        for n in 1..good.len() {
            let err = decode(&good[..n], &DecodeLimits::default())
                .map(|_| ())
                .expect_err("truncated");
            assert_eq!(
                err.kafka_error_code(),
                BatchError::CORRUPT_MESSAGE,
                "{n}: {err}"
            );
        }
        let mut short = good.clone();
        short[BATCH_LENGTH_POS..BATCH_LENGTH_POS + 4].copy_from_slice(&10i32.to_be_bytes());
        assert!(matches!(
            decode(&short, &DecodeLimits::default()),
            Err(BatchError::CorruptMessage(_))
        ));
        let mut neg = good.clone();
        neg[BATCH_LENGTH_POS..BATCH_LENGTH_POS + 4].copy_from_slice(&(-5i32).to_be_bytes());
        assert!(matches!(
            decode(&neg, &DecodeLimits::default()),
            Err(BatchError::CorruptMessage(_))
        ));
    }

    #[test]
    fn magic_and_size_limits() {
        let good = Raw::new(record(Some(b"k"), Some(b"v"), &[], 0), 1).bytes();
        for magic in [0u8, 1] {
            let mut b = good.clone();
            b[MAGIC_POS] = magic;
            assert_eq!(
                decode(&b, &DecodeLimits::default())
                    .map(|_| ())
                    .map_err(|e| e.kafka_error_code()),
                Err(BatchError::INVALID_RECORD)
            );
        }
        let mut b = good.clone();
        b[MAGIC_POS] = 3;
        assert!(matches!(
            decode(&b, &DecodeLimits::default()),
            Err(BatchError::CorruptMessage(_))
        ));
        let limits = DecodeLimits::produce(good.len() - 1);
        assert!(matches!(
            decode(&good, &limits),
            Err(BatchError::MessageTooLarge(_))
        ));
        assert!(decode(&good, &DecodeLimits::produce(good.len())).is_ok());
        let limits = DecodeLimits {
            records_bytes_max: good.len() - BATCH_HEADER_BYTES - 1,
            ..DecodeLimits::default()
        };
        assert!(matches!(
            decode(&good, &limits),
            Err(BatchError::MessageTooLarge(_))
        ));
    }

    #[test]
    fn huge_count_in_tiny_batch_is_refused_up_front() {
        let mut raw = Raw::new(record(None, Some(b"v"), &[], 0), i32::MAX);
        raw.last_offset_delta = i32::MAX - 1;
        let err = decode(&raw.bytes(), &DecodeLimits::default())
            .map(|_| ())
            .expect_err("implausible");
        assert_eq!(
            err,
            BatchError::InvalidRecord("record count exceeds what the batch can hold")
        );
        // Compressed: refused before decompressing anything.
        raw.attributes = Compression::Gzip.id();
        raw.records = b"not even gzip".to_vec();
        let err = decode(&raw.bytes(), &DecodeLimits::default())
            .map(|_| ())
            .expect_err("implausible");
        assert_eq!(
            err,
            BatchError::InvalidRecord("record count exceeds what the batch can hold")
        );
    }

    #[test]
    fn record_count_must_match_records() {
        let two = [
            record(None, Some(b"a"), &[], 0),
            record(None, Some(b"b"), &[], 1),
        ]
        .concat();
        // Header says 1 but 2 are present.
        let mut raw = Raw::new(two.clone(), 1);
        assert!(matches!(
            decode(&raw.bytes(), &DecodeLimits::default()),
            Err(BatchError::InvalidRecord(_))
        ));
        // Header says 3 but 2 are present (trusted mode, offsets consistent).
        raw = Raw::new(two.clone(), 3);
        raw.records.extend_from_slice(&[0; 8]);
        assert!(matches!(
            decode(&raw.bytes(), &DecodeLimits::trusted(1 << 20)),
            Err(BatchError::InvalidRecord(_))
        ));
        // lastOffsetDelta disagrees with the count: Kafka's produce rule only.
        raw = Raw::new(two, 2);
        raw.last_offset_delta = 5;
        assert!(matches!(
            decode(&raw.bytes(), &DecodeLimits::default()),
            Err(BatchError::InvalidRecord(_))
        ));
        assert!(decode(&raw.bytes(), &DecodeLimits::trusted(1 << 20)).is_ok());
    }

    #[test]
    fn malformed_records_are_invalid() {
        let good = record(Some(b"key"), Some(b"value"), &[(b"h", Some(b"v"))], 0);
        // Every truncation of the record section, with the length fixed up or not.
        for n in 0..good.len() {
            let raw = Raw::new(good[..n].to_vec(), 1);
            assert!(
                matches!(
                    decode(&raw.bytes(), &DecodeLimits::default()),
                    Err(BatchError::InvalidRecord(_))
                ),
                "{n}"
            );
        }
        // Negative header count, negative header key length.
        let mut body = vec![0u8, 0, 0, 1, 1];
        put_varint(&mut body, -2);
        let mut rec = Vec::new();
        put_varint(&mut rec, body.len() as i32);
        rec.extend_from_slice(&body);
        assert!(matches!(
            decode(&Raw::new(rec, 1).bytes(), &DecodeLimits::default()),
            Err(BatchError::InvalidRecord(_))
        ));
        let mut body = vec![0u8, 0, 0, 1, 1, 2];
        put_varint(&mut body, -1);
        body.push(1);
        let mut rec = Vec::new();
        put_varint(&mut rec, body.len() as i32);
        rec.extend_from_slice(&body);
        assert!(matches!(
            decode(&Raw::new(rec, 1).bytes(), &DecodeLimits::default()),
            Err(BatchError::InvalidRecord(_))
        ));
        // Overlong varint.
        let rec = vec![0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0, 0, 0, 0, 0, 0];
        assert!(matches!(
            decode(&Raw::new(rec, 1).bytes(), &DecodeLimits::default()),
            Err(BatchError::InvalidRecord(_))
        ));
        // Unknown codec.
        let mut raw = Raw::new(good, 1);
        raw.attributes = 5;
        assert_eq!(
            decode(&raw.bytes(), &DecodeLimits::default()).map(|_| ()),
            Err(BatchError::InvalidRecord("unknown compression codec"))
        );
    }

    #[test]
    fn produce_rules() {
        let one = Raw::new(record(None, Some(b"v"), &[], 0), 1);
        let two = [one.bytes(), one.bytes()].concat();
        assert!(matches!(
            decode(&two, &DecodeLimits::default()),
            Err(BatchError::InvalidRecord(_))
        ));
        let (_, s) = decode(&two, &DecodeLimits::trusted(1 << 20)).expect("trusted");
        assert_eq!(s.len(), 2);
        assert!(matches!(
            decode(&[], &DecodeLimits::default()),
            Err(BatchError::InvalidRecord(_))
        ));
        assert!(decode(&[], &DecodeLimits::trusted(1 << 20)).is_ok());

        let mut control = Raw::new(
            record(Some(&[0, 0, 0, 0]), Some(&[0, 0, 0, 0, 0, 0]), &[], 0),
            1,
        );
        control.attributes = ATTR_CONTROL | ATTR_TRANSACTIONAL;
        control.producer_id = 7;
        control.base_sequence = -1;
        assert!(matches!(
            decode(&control.bytes(), &DecodeLimits::default()),
            Err(BatchError::InvalidRecord(_))
        ));
        let (mut out, s) =
            decode(&control.bytes(), &DecodeLimits::trusted(1 << 20)).expect("trusted");
        assert!(s[0].control && s[0].transactional);
        let bytes = out.seal(0).to_vec();
        let r = RecordIter::new(&bytes).next().expect("one").expect("valid");
        assert!(r.meta.control && r.meta.transactional);
        assert_eq!(
            r.meta.producer,
            Some(ProducerInfo {
                producer_id: 7,
                producer_epoch: 0,
                sequence: NO_SEQUENCE
            })
        );

        let mut no_seq = Raw::new(record(None, Some(b"v"), &[], 0), 1);
        no_seq.producer_id = 3;
        assert!(matches!(
            decode(&no_seq.bytes(), &DecodeLimits::default()),
            Err(BatchError::InvalidRecord(_))
        ));
        let mut zero = Raw::new(Vec::new(), 0);
        zero.last_offset_delta = -1;
        assert!(matches!(
            decode(&zero.bytes(), &DecodeLimits::default()),
            Err(BatchError::InvalidRecord(_))
        ));
        let (_, s) = decode(&zero.bytes(), &DecodeLimits::trusted(1 << 20))
            .expect("empty batch is structurally fine");
        assert_eq!(s[0].record_count, 0);
    }

    #[test]
    fn sequences_wrap_like_kafka() {
        assert_eq!(increment_sequence(5, 3), 8);
        assert_eq!(increment_sequence(i32::MAX, 0), i32::MAX);
        assert_eq!(increment_sequence(i32::MAX, 1), 0);
        assert_eq!(increment_sequence(i32::MAX - 1, 3), 1);
        let recs: Vec<u8> = (0..3)
            .flat_map(|i| record(None, Some(b"v"), &[], i))
            .collect();
        let mut raw = Raw::new(recs, 3);
        raw.producer_id = 42;
        raw.base_sequence = i32::MAX - 1;
        let (mut out, s) = decode(&raw.bytes(), &DecodeLimits::default()).expect("decodes");
        assert_eq!(s[0].last_sequence(), 0);
        let bytes = out.seal(0).to_vec();
        let seqs: Vec<i32> = RecordIter::new(&bytes)
            .map(|r| r.expect("valid").meta.producer.expect("producer").sequence)
            .collect();
        assert_eq!(seqs, vec![i32::MAX - 1, i32::MAX, 0]);
    }

    #[test]
    fn zstd_needs_produce_v7() {
        let recs = record(None, Some(b"v"), &[], 0);
        let mut z = Vec::new();
        compression::Compressor::new()
            .compress(Compression::Zstd, &recs, &mut z)
            .expect("zstd");
        let mut raw = Raw::new(z, 1);
        raw.attributes = Compression::Zstd.id();
        let (_, s) = decode(&raw.bytes(), &DecodeLimits::default()).expect("decodes");
        assert_eq!(s[0].compression, Compression::Zstd);
        assert!(check_produce_compression(7, &s[0]).is_ok());
        assert_eq!(
            check_produce_compression(6, &s[0]).map_err(|e| e.kafka_error_code()),
            Err(BatchError::UNSUPPORTED_COMPRESSION_TYPE)
        );
    }

    fn reseal(b: &mut [u8]) {
        let crc = crc32c::crc32c(&b[ATTRIBUTES_POS..]);
        b[CRC_POS..CRC_POS + 4].copy_from_slice(&crc.to_be_bytes());
    }

    fn check_no_panic(b: &[u8]) {
        for limits in [DecodeLimits::default(), DecodeLimits::trusted(1 << 20)] {
            let mut out = RecordBatchBuf::new();
            let mut s = Vec::new();
            if decode_batches(b, &mut out, &limits, &mut s).is_ok() {
                let n: usize = s.iter().map(|s| s.record_count as usize).sum();
                assert_eq!(out.len(), n);
            }
        }
    }

    proptest::proptest! {
        /// Mutations behind a valid CRC reach the record parser: it must
        /// refuse or accept, never panic, and agree with the header count.
        #[test]
        fn mutated_batches_never_panic(
            values in proptest::collection::vec(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..20), 1..6),
            codec in 0i16..5,
            flips in proptest::collection::vec((proptest::prelude::any::<proptest::sample::Index>(), proptest::prelude::any::<u8>()), 1..6),
        ) {
            let recs: Vec<u8> = values
                .iter()
                .enumerate()
                .flat_map(|(i, v)| record(Some(b"k"), Some(v), &[(b"h", Some(v))], i as i32))
                .collect();
            let c = Compression::from_id(codec).expect("valid id");
            let mut section = Vec::new();
            compression::Compressor::new().compress(c, &recs, &mut section).expect("compresses");
            let mut raw = Raw::new(section, values.len() as i32);
            raw.attributes = codec;
            let good = raw.bytes();
            check_no_panic(&good);
            let mut bad = good.clone();
            for (at, byte) in flips {
                let i = ATTRIBUTES_POS + at.index(bad.len() - ATTRIBUTES_POS);
                bad[i] = byte;
            }
            reseal(&mut bad);
            check_no_panic(&bad);
        }

        #[test]
        fn random_record_sections_never_panic(
            section in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200),
            count in -2i32..40,
            codec in 0i16..8,
        ) {
            let mut raw = Raw::new(section, count);
            raw.attributes = codec;
            check_no_panic(&raw.bytes());
        }
    }
}
