//! The on-disk record: the documented format byte for byte, plus the one extension.
//!
//! ```text
//! record_len   u32   bytes that follow; top bit set = extension section present
//! offset       u64
//! timestamp_ms i64
//! [ext_len u32 | ext bytes]            only when the top bit of record_len is set
//! key_len      i32   -1 = no key
//! key          [u8]
//! value_len    u32
//! value        [u8]
//! crc32        u32   CRC-32C over offset .. end of value (extension included;
//!                    with the extension bit set it starts at record_len)
//! ```
//!
//! The extension (see docs/storage.md) carries what Kafka records need and the
//! documented format lacks: a null value (distinct from an empty one), producer
//! id / epoch / sequence, the transactional and control flags and headers. A
//! record that needs none of it is exactly the documented format. Flag 0x20
//! (a compressed batch's codec and extent on its first record) is read but no
//! longer written: es notes those batches beside the segment instead
//! (`batch_marks.rs`), so that compression never changes a record's format.
//!
//! Invariant: [`decode`] checks that the length is plausible and the CRC matches
//! before it hands out any field, and it never allocates: a [`RecordView`]
//! borrows from the buffer it was decoded from. [`check`] and [`Checker`]
//! check only the length and the CRC, for scans that need record boundaries
//! (a read window); one of the crate's two `unsafe` blocks is there (the
//! other is `sync_file_range` in `fs.rs`), issuing the SSE4.2 `crc32`
//! instruction for three records at once after the CPU was found to have it.

use std::fmt;

/// Size of the `record_len` prefix.
pub const LEN_PREFIX_BYTES: usize = 4;
/// Top bit of `record_len`: an extension section follows `timestamp_ms`.
pub const EXT_BIT: u32 = 0x8000_0000;
/// offset + timestamp + key_len + value_len + crc, the smallest possible body.
pub const BODY_BYTES_MIN: usize = 8 + 8 + 4 + 4 + 4;
/// The largest record body es writes or accepts when reading (256 MiB).
/// Anything larger is corruption, not data.
pub const BODY_BYTES_MAX: usize = 256 * 1024 * 1024;
/// Bytes from the start of a record to its `offset` field.
pub const OFFSET_FIELD_POS: usize = 4;
/// Bytes from the start of a record to its `timestamp_ms` field.
pub const TIMESTAMP_FIELD_POS: usize = 12;

/// Extension flag: the value is null (a Kafka tombstone); `value_len` is 0.
pub const EXT_VALUE_NULL: u8 = 0x01;
/// Extension flag: producer id (i64), epoch (i16) and sequence (i32) follow.
pub const EXT_PRODUCER: u8 = 0x02;
/// Extension flag: the record belongs to a transaction.
pub const EXT_TRANSACTIONAL: u8 = 0x04;
/// Extension flag: the record is a Kafka control record (commit/abort marker).
pub const EXT_CONTROL: u8 = 0x08;
/// Extension flag: a header list follows (count u32, then per header
/// key_len u32, key, value_len i32 (-1 = null), value).
pub const EXT_HEADERS: u8 = 0x10;
/// Extension flag: this record starts a batch as its producer sent it; the
/// batch fields ([`ProducedBatch`]: codec u8, last_offset_delta u32,
/// stored_bytes u32) follow the producer fields, before the headers. Written
/// by es until the `.batches` files replaced it; still read, so data written
/// then keeps its batches.
pub const EXT_BATCH: u8 = 0x20;
const EXT_KNOWN: u8 =
    EXT_VALUE_NULL | EXT_PRODUCER | EXT_TRANSACTIONAL | EXT_CONTROL | EXT_HEADERS | EXT_BATCH;
const PRODUCER_BYTES: usize = 8 + 2 + 4;
/// codec u8 + last_offset_delta u32 + stored_bytes u32.
pub const BATCH_FIELDS_BYTES: usize = 1 + 4 + 4;
/// The most the batch fields add to a record: the extension's length and
/// flags (when the record had no extension otherwise) and the fields.
pub const BATCH_FIELDS_OVERHEAD_BYTES_MAX: usize = 4 + 1 + BATCH_FIELDS_BYTES;
/// The largest codec id a batch may record (Kafka's ids: 0 none, 1 gzip,
/// 2 snappy, 3 lz4, 4 zstd).
pub const BATCH_CODEC_MAX: u8 = 4;
/// What storing a record usually adds to its key, value and headers: the
/// fixed fields and an extension with producer fields. For reserving room;
/// not a bound (headers and batch fields add more).
pub const TYPICAL_OVERHEAD_BYTES: usize =
    LEN_PREFIX_BYTES + BODY_BYTES_MIN + 4 + 1 + PRODUCER_BYTES;
/// Bytes from the start of a record to its extension's flags byte.
const EXT_FLAGS_POS: usize = TIMESTAMP_FIELD_POS + 8 + 4;

/// Producer identity of an idempotent or transactional record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProducerInfo {
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// This record's own sequence number (a Kafka batch's base sequence plus
    /// the record's offset delta).
    pub sequence: i32,
}

/// A batch as its producer sent it, noted in the segment's `.batches` file
/// (or, in data written by older es, on the batch's first record with
/// extension flag [`EXT_BATCH`]). es keeps records, not batches; this lets a
/// fetch re-create the producer's batch with its codec and boundaries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProducedBatch {
    /// Kafka's codec id the producer compressed the batch with (0-4).
    pub codec: u8,
    /// The batch holds this record's offset through offset + last_offset_delta
    /// (fewer records once compaction has removed some). At most `i32::MAX`.
    pub last_offset_delta: u32,
    /// On-disk bytes of the batch's records, this one included, as appended:
    /// a hint for reading the whole batch in one go (compaction can only make
    /// it an overestimate). Never trusted for bounds.
    pub stored_bytes: u32,
}

/// Everything in the extension section except headers and the null value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecordMeta {
    pub producer: Option<ProducerInfo>,
    pub transactional: bool,
    pub control: bool,
}

/// Why bytes are not a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// The buffer ends before the record does; `needed` bytes from the record's
    /// start would hold it (only reported when the length itself is plausible).
    Incomplete { needed: usize },
    /// The bytes cannot be a valid record.
    Corrupt(&'static str),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Incomplete { needed } => {
                write!(f, "incomplete record ({needed} bytes needed)")
            }
            DecodeError::Corrupt(why) => write!(f, "corrupt record: {why}"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// A decoded record, borrowing from the buffer it was decoded from.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct RecordView<'a> {
    pub offset: u64,
    pub timestamp_ms: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub meta: RecordMeta,
    /// Set on the first record of a batch the producer compressed.
    pub batch: Option<ProducedBatch>,
    /// Raw header section (without the count); iterate with [`RecordView::headers`].
    headers_raw: &'a [u8],
    header_count: u32,
    /// Total bytes of this record on disk, prefix and CRC included.
    pub encoded_len: usize,
}

impl fmt::Debug for RecordView<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordView")
            .field("offset", &self.offset)
            .field("timestamp_ms", &self.timestamp_ms)
            .field("key_len", &self.key.map(<[u8]>::len))
            .field("value_len", &self.value.map(<[u8]>::len))
            .field("meta", &self.meta)
            .field("batch", &self.batch)
            .field("header_count", &self.header_count)
            .finish()
    }
}

impl<'a> RecordView<'a> {
    /// Number of headers.
    pub fn header_count(&self) -> u32 {
        self.header_count
    }

    /// The headers in order, as (key, value) with a null value as `None`.
    pub fn headers(&self) -> HeaderIter<'a> {
        HeaderIter {
            rest: self.headers_raw,
            left: self.header_count,
        }
    }
}

/// Iterator over a record's headers; the section was validated by [`decode`].
#[derive(Clone, Debug)]
pub struct HeaderIter<'a> {
    rest: &'a [u8],
    left: u32,
}

impl<'a> Iterator for HeaderIter<'a> {
    type Item = (&'a [u8], Option<&'a [u8]>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        // decode() has validated the whole section, so these reads cannot fail;
        // parse_header still returns None instead of panicking if they did.
        let (k, v, used) = parse_header(self.rest)?;
        self.rest = &self.rest[used..];
        self.left -= 1;
        Some((k, v))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left as usize, Some(self.left as usize))
    }
}

/// A header's key, value and encoded length.
type ParsedHeader<'a> = (&'a [u8], Option<&'a [u8]>, usize);

fn parse_header(b: &[u8]) -> Option<ParsedHeader<'_>> {
    let kl = u32::from_be_bytes(b.get(0..4)?.try_into().ok()?) as usize;
    let key = b.get(4..4usize.checked_add(kl)?)?;
    let p = 4 + kl;
    let vl = i32::from_be_bytes(b.get(p..p + 4)?.try_into().ok()?);
    let p = p + 4;
    if vl < 0 {
        if vl != -1 {
            return None;
        }
        return Some((key, None, p));
    }
    let vl = vl as usize;
    let value = b.get(p..p.checked_add(vl)?)?;
    Some((key, Some(value), p + vl))
}

/// Reads the length prefix at the start of `buf` and returns the full encoded
/// size of the record (prefix and CRC included) if it is plausible.
pub fn peek_len(buf: &[u8]) -> Result<usize, DecodeError> {
    let Some(prefix) = buf.get(0..LEN_PREFIX_BYTES) else {
        return Err(DecodeError::Incomplete {
            needed: LEN_PREFIX_BYTES,
        });
    };
    let raw = u32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
    let body = (raw & !EXT_BIT) as usize;
    let min = if raw & EXT_BIT != 0 {
        BODY_BYTES_MIN + 4 + 1
    } else {
        BODY_BYTES_MIN
    };
    if body < min {
        return Err(DecodeError::Corrupt("record_len below the minimum"));
    }
    if body > BODY_BYTES_MAX {
        return Err(DecodeError::Corrupt("record_len above the maximum"));
    }
    Ok(LEN_PREFIX_BYTES + body)
}

/// The bytes the CRC of `rec` (exactly one whole record) covers: from
/// `offset` for a documented record, from `record_len` for one with the
/// extension (so that a flipped extension bit cannot turn one kind of record
/// into the other without the CRC noticing), to the end of the value.
fn crc_range(rec: &[u8]) -> std::ops::Range<usize> {
    // EXT_BIT is the top bit of record_len's first (big-endian) byte.
    let start = if rec.first().is_some_and(|&b| b & (EXT_BIT >> 24) as u8 != 0) {
        0
    } else {
        LEN_PREFIX_BYTES
    };
    start..rec.len() - 4
}

fn be_u32(b: &[u8], p: usize) -> u32 {
    u32::from_be_bytes([b[p], b[p + 1], b[p + 2], b[p + 3]])
}

fn be_u64(b: &[u8], p: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[p..p + 8]);
    u64::from_be_bytes(a)
}

/// Checks the record at the start of `buf` without parsing its fields: the
/// length must be plausible, the record whole and its CRC right. Returns its
/// offset and encoded length (prefix and CRC included). For scans that only
/// need record boundaries (a read window); [`decode`] (or
/// [`RecordIter::read_checked`], which checks every bound but not the CRC
/// again) parses the fields.
pub fn check(buf: &[u8]) -> Result<(u64, usize), DecodeError> {
    let total = peek_len(buf)?;
    let Some(rec) = buf.get(..total) else {
        return Err(DecodeError::Incomplete { needed: total });
    };
    if crc32c::crc32c(&rec[crc_range(rec)]) != be_u32(rec, total - 4) {
        return Err(DecodeError::Corrupt("CRC-32C mismatch"));
    }
    Ok((be_u64(rec, OFFSET_FIELD_POS), total))
}

/// Records whose CRCs [`Checker`] computes together.
const CHECK_GROUP: usize = 3;

/// [`check`] for the records of a window in order, with the CRCs of
/// three records computed together. A short record's CRC-32C is
/// bound by the latency of the CPU's crc32 instruction (3 cycles per 8 bytes,
/// one instruction per cycle), so three independent ones interleaved cost
/// about as much as one: on a fetch of 256-byte records the per-record check
/// was the broker's largest single cost. Every record is still checked, and
/// each answer is exactly [`check`]'s.
#[derive(Debug, Default)]
pub struct Checker {
    /// Records already checked ahead: (position, offset, encoded length).
    ahead: [(usize, u64, usize); CHECK_GROUP],
    /// `ahead[next..len]` are still to be handed out.
    next: usize,
    len: usize,
}

impl Checker {
    pub fn new() -> Self {
        Self::default()
    }

    /// [`check`] of the record at `buf[pos..]`. One checker serves one
    /// buffer, whose bytes do not change between calls (records checked
    /// ahead are remembered by position).
    pub fn check(&mut self, buf: &[u8], pos: usize) -> Result<(u64, usize), DecodeError> {
        if self.next < self.len && self.ahead[self.next].0 == pos {
            let (_, offset, len) = self.ahead[self.next];
            self.next += 1;
            return Ok((offset, len));
        }
        self.next = 0;
        self.len = 0;
        let rest = buf.get(pos..).unwrap_or_default();
        // The next CHECK_GROUP whole, plausible records, if there are as many.
        let mut spans = [(0usize, 0usize); CHECK_GROUP];
        let mut q = 0usize;
        for span in spans.iter_mut() {
            match peek_len(&rest[q..]) {
                Ok(total) if total <= rest.len() - q => {
                    *span = (q, total);
                    q += total;
                }
                // Fewer records, or a bad one: the plain check gives its answer.
                _ => return check(rest),
            }
        }
        let region = |(start, total): (usize, usize)| {
            let rec = &rest[start..start + total];
            &rec[crc_range(rec)]
        };
        let crcs = crc32c_3([region(spans[0]), region(spans[1]), region(spans[2])]);
        for (i, &(start, total)) in spans.iter().enumerate() {
            if crcs[i] != be_u32(rest, start + total - 4) {
                // The bad record's own check reports it when it is reached.
                break;
            }
            self.ahead[i] = (pos + start, be_u64(rest, start + OFFSET_FIELD_POS), total);
            self.len = i + 1;
        }
        if self.len == 0 {
            return Err(DecodeError::Corrupt("CRC-32C mismatch"));
        }
        self.next = 1;
        Ok((self.ahead[0].1, self.ahead[0].2))
    }
}

/// CRC-32C of three buffers, the common prefix length of the three computed
/// with interleaved crc32 instructions where the CPU has them.
fn crc32c_3(bufs: [&[u8]; 3]) -> [u32; 3] {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("sse4.2") {
            // SAFETY: crc32c_3_sse42 requires only SSE4.2, which the CPU has
            // (checked just above). There is no safe way to issue the crc32
            // instruction from code not compiled for SSE4.2, and the crc32c
            // crate interleaves only within one buffer of 768 bytes or more.
            #[allow(unsafe_code)]
            return unsafe { crc32c_3_sse42(bufs) };
        }
    }
    bufs.map(crc32c::crc32c)
}

/// [`crc32c_3`] with SSE4.2: the first `min len / 8 * 8` bytes of each buffer
/// in lockstep, then the rest of each on its own (words, then bytes).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
#[allow(unsafe_code)]
unsafe fn crc32c_3_sse42(bufs: [&[u8]; 3]) -> [u32; 3] {
    use std::arch::x86_64::{_mm_crc32_u64, _mm_crc32_u8};
    let common = bufs[0].len().min(bufs[1].len()).min(bufs[2].len()) / 8 * 8;
    let mut regs = [u64::from(u32::MAX); 3];
    // Whole words only: chunks_exact lets the loop run without bounds checks.
    let words = |i: usize| bufs[i][..common].chunks_exact(8).map(le64);
    for ((a, b), c) in words(0).zip(words(1)).zip(words(2)) {
        regs[0] = _mm_crc32_u64(regs[0], a);
        regs[1] = _mm_crc32_u64(regs[1], b);
        regs[2] = _mm_crc32_u64(regs[2], c);
    }
    let mut crcs = [0u32; 3];
    for ((crc, reg), buf) in crcs.iter_mut().zip(regs).zip(bufs) {
        let rest = buf.get(common..).unwrap_or_default();
        let mut reg = reg;
        let mut tail = rest.chunks_exact(8);
        for w in &mut tail {
            reg = _mm_crc32_u64(reg, le64(w));
        }
        let mut reg = reg as u32;
        for &byte in tail.remainder() {
            reg = _mm_crc32_u8(reg, byte);
        }
        // A CRC-32C is the complement of the register.
        *crc = !reg;
    }
    crcs
}

/// The little-endian word in `w` (8 bytes, from `chunks_exact(8)`).
#[inline(always)]
fn le64(w: &[u8]) -> u64 {
    u64::from_le_bytes(<[u8; 8]>::try_from(w).unwrap_or_default())
}

/// Decodes the record at the start of `buf`. The length is checked for
/// plausibility, then the CRC over exactly that length, and only then are the
/// fields parsed; every field must end exactly where `record_len` says.
pub fn decode(buf: &[u8]) -> Result<RecordView<'_>, DecodeError> {
    decode_with(buf, true)
}

fn decode_with(buf: &[u8], check_crc: bool) -> Result<RecordView<'_>, DecodeError> {
    let total = peek_len(buf)?;
    if buf.len() < total {
        return Err(DecodeError::Incomplete { needed: total });
    }
    let rec = &buf[..total];
    let has_ext = be_u32(rec, 0) & EXT_BIT != 0;
    let crc_pos = total - 4;
    let stored_crc = be_u32(rec, crc_pos);
    if check_crc && crc32c::crc32c(&rec[crc_range(rec)]) != stored_crc {
        return Err(DecodeError::Corrupt("CRC-32C mismatch"));
    }
    // From here the bytes are what the writer wrote; still check every bound,
    // since a CRC is not a proof against a buggy or hostile writer.
    let offset = be_u64(rec, OFFSET_FIELD_POS);
    let timestamp_ms = be_u64(rec, TIMESTAMP_FIELD_POS) as i64;
    let mut p = TIMESTAMP_FIELD_POS + 8;
    let mut meta = RecordMeta::default();
    let mut batch = None;
    let mut value_null = false;
    let mut headers_raw: &[u8] = &[];
    let mut header_count = 0u32;
    if has_ext {
        let ext_len = be_u32(rec, p) as usize;
        p += 4;
        let ext_end = p
            .checked_add(ext_len)
            .filter(|&e| e + 4 + 4 + 4 <= total)
            .ok_or(DecodeError::Corrupt("extension longer than the record"))?;
        let ext = &rec[p..ext_end];
        let (&flags, mut e) = ext
            .split_first()
            .ok_or(DecodeError::Corrupt("empty extension"))?;
        if flags & !EXT_KNOWN != 0 {
            return Err(DecodeError::Corrupt("unknown extension flag"));
        }
        value_null = flags & EXT_VALUE_NULL != 0;
        meta.transactional = flags & EXT_TRANSACTIONAL != 0;
        meta.control = flags & EXT_CONTROL != 0;
        if flags & EXT_PRODUCER != 0 {
            if e.len() < PRODUCER_BYTES {
                return Err(DecodeError::Corrupt("truncated producer fields"));
            }
            meta.producer = Some(ProducerInfo {
                producer_id: be_u64(e, 0) as i64,
                producer_epoch: i16::from_be_bytes([e[8], e[9]]),
                sequence: be_u32(e, 10) as i32,
            });
            e = &e[PRODUCER_BYTES..];
        }
        if flags & EXT_BATCH != 0 {
            if e.len() < BATCH_FIELDS_BYTES {
                return Err(DecodeError::Corrupt("truncated batch fields"));
            }
            let b = ProducedBatch {
                codec: e[0],
                last_offset_delta: be_u32(e, 1),
                stored_bytes: be_u32(e, 5),
            };
            if b.codec > BATCH_CODEC_MAX {
                return Err(DecodeError::Corrupt("unknown batch codec"));
            }
            if b.last_offset_delta > i32::MAX as u32 {
                return Err(DecodeError::Corrupt("batch offset delta out of range"));
            }
            batch = Some(b);
            e = &e[BATCH_FIELDS_BYTES..];
        }
        if flags & EXT_HEADERS != 0 {
            if e.len() < 4 {
                return Err(DecodeError::Corrupt("truncated header count"));
            }
            header_count = be_u32(e, 0);
            let mut rest = &e[4..];
            let start = rest;
            for _ in 0..header_count {
                let (_, _, used) =
                    parse_header(rest).ok_or(DecodeError::Corrupt("malformed header"))?;
                rest = &rest[used..];
            }
            headers_raw = &start[..start.len() - rest.len()];
            e = rest;
        }
        if !e.is_empty() {
            return Err(DecodeError::Corrupt(
                "extension length disagrees with its fields",
            ));
        }
        p = ext_end;
    }
    // key_len, key, value_len, value, crc must fill the rest exactly.
    if p + 4 > crc_pos {
        return Err(DecodeError::Corrupt("record too short for key_len"));
    }
    let key_len = be_u32(rec, p) as i32;
    p += 4;
    let key = if key_len < 0 {
        if key_len != -1 {
            return Err(DecodeError::Corrupt("negative key_len other than -1"));
        }
        None
    } else {
        let end = p
            .checked_add(key_len as usize)
            .filter(|&e| e + 4 <= crc_pos)
            .ok_or(DecodeError::Corrupt("key longer than the record"))?;
        let k = &rec[p..end];
        p = end;
        Some(k)
    };
    let value_len = be_u32(rec, p) as usize;
    p += 4;
    if p.checked_add(value_len) != Some(crc_pos) {
        return Err(DecodeError::Corrupt(
            "value does not end where record_len says",
        ));
    }
    let value = if value_null {
        if value_len != 0 {
            return Err(DecodeError::Corrupt("null value with a length"));
        }
        None
    } else {
        Some(&rec[p..crc_pos])
    };
    Ok(RecordView {
        offset,
        timestamp_ms,
        key,
        value,
        meta,
        batch,
        headers_raw,
        header_count,
        encoded_len: total,
    })
}

/// Iterates the records in a buffer of whole records (a read from a segment).
/// Stops with an error at the first record that does not decode.
#[derive(Clone, Debug)]
pub struct RecordIter<'a> {
    buf: &'a [u8],
    pos: usize,
    check_crc: bool,
}

impl<'a> RecordIter<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        RecordIter {
            buf,
            pos: 0,
            check_crc: true,
        }
    }

    /// For records whose CRC is not to be checked here: the data of a
    /// [`crate::ReadChunk`] ([`crate::Partition::read`] returns only records
    /// whose CRC it has just checked; on a fetch a second check was a quarter
    /// of the broker's CPU) and the records of a [`crate::RecordBatchBuf`]
    /// before its seal (no CRC yet). Every length and bound is still checked.
    pub fn read_checked(buf: &'a [u8]) -> Self {
        RecordIter {
            buf,
            pos: 0,
            check_crc: false,
        }
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }
}

impl<'a> Iterator for RecordIter<'a> {
    type Item = Result<RecordView<'a>, DecodeError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.buf.len() {
            return None;
        }
        match decode_with(&self.buf[self.pos..], self.check_crc) {
            Ok(r) => {
                self.pos += r.encoded_len;
                Some(Ok(r))
            }
            Err(e) => {
                self.pos = self.buf.len();
                Some(Err(e))
            }
        }
    }
}

/// Encoded size of a record with these fields (without batch fields, which
/// add at most [`BATCH_FIELDS_OVERHEAD_BYTES_MAX`]).
pub fn encoded_len<'h, H>(
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: H,
    meta: &RecordMeta,
) -> usize
where
    H: IntoIterator<Item = (&'h [u8], Option<&'h [u8]>)>,
{
    let mut n = LEN_PREFIX_BYTES
        + BODY_BYTES_MIN
        + key.map_or(0, <[u8]>::len)
        + value.map_or(0, <[u8]>::len);
    let mut ext = 0usize;
    let mut headers_present = false;
    let mut hbytes = 4usize;
    for (k, v) in headers {
        headers_present = true;
        hbytes += 4 + k.len() + 4 + v.map_or(0, <[u8]>::len);
    }
    if headers_present {
        ext += hbytes;
    }
    if meta.producer.is_some() {
        ext += PRODUCER_BYTES;
    }
    if ext > 0 || value.is_none() || meta.transactional || meta.control {
        n += 4 + 1 + ext;
    }
    n
}

/// Appends one record to `out` with a zero CRC; [`seal`] fills the offset and
/// CRC later (the partition assigns offsets under its write lock). Returns the
/// record's encoded length. No allocation beyond growing `out`.
pub fn encode_unsealed<'h, H>(
    out: &mut Vec<u8>,
    timestamp_ms: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: H,
    meta: &RecordMeta,
) -> usize
where
    H: IntoIterator<Item = (&'h [u8], Option<&'h [u8]>)>,
{
    encode_unsealed_batch(out, timestamp_ms, key, value, headers, meta, None)
}

/// [`encode_unsealed`] for a record that may start a produced batch. The
/// batch fields sit at [`batch_fields_pos`] from the record's start, so
/// [`set_batch_extent`] can fill them in once the batch's last record is
/// encoded.
pub fn encode_unsealed_batch<'h, H>(
    out: &mut Vec<u8>,
    timestamp_ms: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: H,
    meta: &RecordMeta,
    batch: Option<&ProducedBatch>,
) -> usize
where
    H: IntoIterator<Item = (&'h [u8], Option<&'h [u8]>)>,
{
    let start = out.len();
    out.extend_from_slice(&[0u8; 4]); // record_len, patched below
    out.extend_from_slice(&0u64.to_be_bytes()); // offset, set by seal()
    out.extend_from_slice(&timestamp_ms.to_be_bytes());
    let mut flags = 0u8;
    if value.is_none() {
        flags |= EXT_VALUE_NULL;
    }
    if meta.transactional {
        flags |= EXT_TRANSACTIONAL;
    }
    if meta.control {
        flags |= EXT_CONTROL;
    }
    if meta.producer.is_some() {
        flags |= EXT_PRODUCER;
    }
    if batch.is_some() {
        flags |= EXT_BATCH;
    }
    // Reserve the extension; dropped again below if nothing goes in it.
    let ext_pos = out.len();
    out.extend_from_slice(&[0u8; 5]);
    if let Some(p) = meta.producer {
        out.extend_from_slice(&p.producer_id.to_be_bytes());
        out.extend_from_slice(&p.producer_epoch.to_be_bytes());
        out.extend_from_slice(&p.sequence.to_be_bytes());
    }
    if let Some(b) = batch {
        debug_assert_eq!(out.len() - start, batch_fields_pos(meta));
        out.push(b.codec);
        out.extend_from_slice(&b.last_offset_delta.to_be_bytes());
        out.extend_from_slice(&b.stored_bytes.to_be_bytes());
    }
    let count_pos = out.len();
    out.extend_from_slice(&[0u8; 4]);
    let mut count = 0u32;
    for (k, v) in headers {
        count += 1;
        out.extend_from_slice(&(k.len() as u32).to_be_bytes());
        out.extend_from_slice(k);
        match v {
            Some(v) => {
                out.extend_from_slice(&(v.len() as i32).to_be_bytes());
                out.extend_from_slice(v);
            }
            None => out.extend_from_slice(&(-1i32).to_be_bytes()),
        }
    }
    if count > 0 {
        flags |= EXT_HEADERS;
        out[count_pos..count_pos + 4].copy_from_slice(&count.to_be_bytes());
    } else {
        out.truncate(count_pos);
    }
    let has_ext = flags != 0;
    if has_ext {
        let ext_len = (out.len() - ext_pos - 4) as u32;
        out[ext_pos..ext_pos + 4].copy_from_slice(&ext_len.to_be_bytes());
        out[ext_pos + 4] = flags;
    } else {
        out.truncate(ext_pos);
    }
    match key {
        Some(k) => {
            out.extend_from_slice(&(k.len() as i32).to_be_bytes());
            out.extend_from_slice(k);
        }
        None => out.extend_from_slice(&(-1i32).to_be_bytes()),
    }
    let v = value.unwrap_or(&[]);
    out.extend_from_slice(&(v.len() as u32).to_be_bytes());
    out.extend_from_slice(v);
    out.extend_from_slice(&[0u8; 4]); // crc, set by seal()
    let total = out.len() - start;
    let mut len = (total - LEN_PREFIX_BYTES) as u32;
    if has_ext {
        len |= EXT_BIT;
    }
    out[start..start + 4].copy_from_slice(&len.to_be_bytes());
    total
}

/// Where the batch fields of a record with these producer fields start,
/// counted from the record's first byte.
pub fn batch_fields_pos(meta: &RecordMeta) -> usize {
    EXT_FLAGS_POS
        + 1
        + if meta.producer.is_some() {
            PRODUCER_BYTES
        } else {
            0
        }
}

/// Fills in the extent of the batch an unsealed record starts (written by
/// [`encode_unsealed_batch`] with `batch`; `fields_pos` from
/// [`batch_fields_pos`]). Before [`seal`], which computes the CRC.
pub fn set_batch_extent(
    rec: &mut [u8],
    fields_pos: usize,
    last_offset_delta: u32,
    stored_bytes: u32,
) {
    debug_assert!(rec[EXT_FLAGS_POS] & EXT_BATCH != 0);
    let p = fields_pos + 1;
    rec[p..p + 4].copy_from_slice(&last_offset_delta.to_be_bytes());
    rec[p + 4..p + 8].copy_from_slice(&stored_bytes.to_be_bytes());
}

/// Writes `offset` into the record at the start of `rec` (exactly one encoded
/// record) and computes its CRC.
pub fn seal(rec: &mut [u8], offset: u64) {
    let n = rec.len();
    rec[OFFSET_FIELD_POS..OFFSET_FIELD_POS + 8].copy_from_slice(&offset.to_be_bytes());
    let crc = crc32c::crc32c(&rec[crc_range(rec)]);
    rec[n - 4..].copy_from_slice(&crc.to_be_bytes());
}

/// [`seal`] for every record of `buf`: record `i` starts at `starts[i]` and
/// ends where the next starts (the last at the end of `buf`); offsets are
/// `base_offset + i`. The CRCs of three records at a time are computed
/// together, as [`Checker`] checks them.
pub fn seal_all(buf: &mut [u8], starts: &[u32], base_offset: u64) {
    seal_all_by(buf, starts, |i| base_offset + i as u64)
}

/// [`seal_all`] with explicit offsets: record `i` gets `offsets[i]` (a
/// follower appending its leader's records, gaps and all). `offsets` has
/// one entry per record.
pub fn seal_all_at(buf: &mut [u8], starts: &[u32], offsets: &[u64]) {
    assert_eq!(offsets.len(), starts.len(), "one offset per record");
    seal_all_by(buf, starts, |i| offsets[i])
}

fn seal_all_by(buf: &mut [u8], starts: &[u32], offset_of: impl Fn(usize) -> u64) {
    let len = buf.len();
    let bounds = |i: usize| {
        let s = starts[i] as usize;
        (s, starts.get(i + 1).map_or(len, |&e| e as usize))
    };
    let mut i = 0;
    while i + CHECK_GROUP <= starts.len() {
        let recs = [bounds(i), bounds(i + 1), bounds(i + 2)];
        for (k, &(s, _)) in recs.iter().enumerate() {
            let offset = offset_of(i + k);
            buf[s + OFFSET_FIELD_POS..s + OFFSET_FIELD_POS + 8]
                .copy_from_slice(&offset.to_be_bytes());
        }
        let crcs = {
            let region = |(s, e): (usize, usize)| {
                let rec = &buf[s..e];
                &rec[crc_range(rec)]
            };
            crc32c_3([region(recs[0]), region(recs[1]), region(recs[2])])
        };
        for (&(_, e), crc) in recs.iter().zip(crcs) {
            buf[e - 4..e].copy_from_slice(&crc.to_be_bytes());
        }
        i += CHECK_GROUP;
    }
    for j in i..starts.len() {
        let (s, e) = bounds(j);
        seal(&mut buf[s..e], offset_of(j));
    }
}

/// Overwrites the timestamp of an encoded record (before [`seal`]).
pub fn set_timestamp(rec: &mut [u8], timestamp_ms: i64) {
    rec[TIMESTAMP_FIELD_POS..TIMESTAMP_FIELD_POS + 8].copy_from_slice(&timestamp_ms.to_be_bytes());
}

/// Encodes a complete, sealed record (tests and tools; the hot path uses
/// [`RecordBatchBuf`](crate::batch::RecordBatchBuf)).
pub fn encode<'h, H>(
    out: &mut Vec<u8>,
    offset: u64,
    timestamp_ms: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: H,
    meta: &RecordMeta,
) -> usize
where
    H: IntoIterator<Item = (&'h [u8], Option<&'h [u8]>)>,
{
    encode_with_batch(out, offset, timestamp_ms, key, value, headers, meta, None)
}

/// [`encode`] with the batch fields (tests and tools).
#[allow(clippy::too_many_arguments)]
pub fn encode_with_batch<'h, H>(
    out: &mut Vec<u8>,
    offset: u64,
    timestamp_ms: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: H,
    meta: &RecordMeta,
    batch: Option<&ProducedBatch>,
) -> usize
where
    H: IntoIterator<Item = (&'h [u8], Option<&'h [u8]>)>,
{
    let start = out.len();
    let n = encode_unsealed_batch(out, timestamp_ms, key, value, headers, meta, batch);
    seal(&mut out[start..], offset);
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    type Hdrs = Vec<(Vec<u8>, Option<Vec<u8>>)>;

    fn arb_meta() -> impl Strategy<Value = RecordMeta> {
        (
            proptest::option::of((any::<i64>(), any::<i16>(), any::<i32>())),
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(|(p, t, c)| RecordMeta {
                producer: p.map(|(producer_id, producer_epoch, sequence)| ProducerInfo {
                    producer_id,
                    producer_epoch,
                    sequence,
                }),
                transactional: t,
                control: c,
            })
    }

    fn bytes() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(any::<u8>(), 0..64)
    }

    fn arb_headers() -> impl Strategy<Value = Hdrs> {
        proptest::collection::vec((bytes(), proptest::option::of(bytes())), 0..4)
    }

    fn arb_batch() -> impl Strategy<Value = Option<ProducedBatch>> {
        proptest::option::of(
            (0..=BATCH_CODEC_MAX, 0..=i32::MAX as u32, any::<u32>()).prop_map(
                |(codec, last_offset_delta, stored_bytes)| ProducedBatch {
                    codec,
                    last_offset_delta,
                    stored_bytes,
                },
            ),
        )
    }

    fn enc(
        off: u64,
        ts: i64,
        k: &Option<Vec<u8>>,
        v: &Option<Vec<u8>>,
        h: &Hdrs,
        m: &RecordMeta,
    ) -> Vec<u8> {
        enc_batch(off, ts, k, v, h, m, None)
    }

    fn enc_batch(
        off: u64,
        ts: i64,
        k: &Option<Vec<u8>>,
        v: &Option<Vec<u8>>,
        h: &Hdrs,
        m: &RecordMeta,
        b: Option<ProducedBatch>,
    ) -> Vec<u8> {
        let mut out = Vec::new();
        let n = encode_with_batch(
            &mut out,
            off,
            ts,
            k.as_deref(),
            v.as_deref(),
            h.iter().map(|(a, b)| (a.as_slice(), b.as_deref())),
            m,
            b.as_ref(),
        );
        assert_eq!(n, out.len());
        let plain_len = encoded_len(
            k.as_deref(),
            v.as_deref(),
            h.iter().map(|(a, b)| (a.as_slice(), b.as_deref())),
            m,
        );
        if b.is_none() {
            assert_eq!(n, plain_len);
        } else {
            assert!(n > plain_len && n <= plain_len + BATCH_FIELDS_OVERHEAD_BYTES_MAX);
        }
        out
    }

    #[test]
    fn plain_record_is_the_documented_format() {
        let out = enc(
            7,
            1000,
            &Some(b"k".to_vec()),
            &Some(b"vv".to_vec()),
            &vec![],
            &RecordMeta::default(),
        );
        let mut want = Vec::new();
        let body_len = 8 + 8 + 4 + 1 + 4 + 2 + 4;
        want.extend_from_slice(&(body_len as u32).to_be_bytes());
        want.extend_from_slice(&7u64.to_be_bytes());
        want.extend_from_slice(&1000i64.to_be_bytes());
        want.extend_from_slice(&1i32.to_be_bytes());
        want.extend_from_slice(b"k");
        want.extend_from_slice(&2u32.to_be_bytes());
        want.extend_from_slice(b"vv");
        let crc = crc32c::crc32c(&want[4..]);
        want.extend_from_slice(&crc.to_be_bytes());
        assert_eq!(out, want);
    }

    #[test]
    fn batch_fields_follow_the_producer_fields() {
        // A plain record that starts a gzip batch of 3 records, 900 bytes on disk.
        let b = ProducedBatch {
            codec: 1,
            last_offset_delta: 2,
            stored_bytes: 900,
        };
        let mut out = Vec::new();
        encode_with_batch(
            &mut out,
            7,
            1000,
            None,
            Some(b"v"),
            [],
            &RecordMeta::default(),
            Some(&b),
        );
        let mut want = Vec::new();
        let body_len = 8 + 8 + (4 + 1 + 9) + 4 + 4 + 1 + 4;
        want.extend_from_slice(&(body_len as u32 | EXT_BIT).to_be_bytes());
        want.extend_from_slice(&7u64.to_be_bytes());
        want.extend_from_slice(&1000i64.to_be_bytes());
        want.extend_from_slice(&10u32.to_be_bytes()); // ext_len
        want.push(EXT_BATCH);
        want.push(1); // codec
        want.extend_from_slice(&2u32.to_be_bytes());
        want.extend_from_slice(&900u32.to_be_bytes());
        want.extend_from_slice(&(-1i32).to_be_bytes());
        want.extend_from_slice(&1u32.to_be_bytes());
        want.extend_from_slice(b"v");
        let crc = crc32c::crc32c(&want);
        want.extend_from_slice(&crc.to_be_bytes());
        assert_eq!(out, want);
        assert_eq!(batch_fields_pos(&RecordMeta::default()), 25);
        // With producer fields, the batch fields come after them.
        let meta = RecordMeta {
            producer: Some(ProducerInfo {
                producer_id: 1,
                producer_epoch: 0,
                sequence: 0,
            }),
            ..RecordMeta::default()
        };
        let mut out = Vec::new();
        encode_with_batch(&mut out, 0, 0, None, Some(b""), [], &meta, Some(&b));
        let p = batch_fields_pos(&meta);
        assert_eq!(p, 25 + 14);
        assert_eq!(out[p], 1);
        assert_eq!(decode(&out).expect("decodes").batch, Some(b));
    }

    /// docs/storage.md maps the extension byte by byte; keep the flags and
    /// the batch fields' sizes equal to it.
    #[test]
    fn the_extension_matches_docs_storage_md() {
        let doc = include_str!("../../../docs/storage.md");
        let flags_row = doc
            .lines()
            .find(|l| l.starts_with("| 1 | `flags` u8 |"))
            .expect("flags row");
        for (flag, words) in [
            (EXT_VALUE_NULL, "value is null"),
            (EXT_PRODUCER, "producer fields follow"),
            (EXT_TRANSACTIONAL, "transactional"),
            (EXT_CONTROL, "control record"),
            (EXT_HEADERS, "headers follow"),
            (EXT_BATCH, "batch fields follow"),
        ] {
            let want = format!("0x{flag:02x} {words}");
            assert!(flags_row.contains(&want), "{want} in {flags_row}");
        }
        let batch_rows: usize = doc
            .lines()
            .filter(|l| l.starts_with("| ") && l.contains("`batch_"))
            .map(|l| {
                l.trim_start_matches("| ")
                    .split(' ')
                    .next()
                    .and_then(|n| n.parse::<usize>().ok())
                    .expect("a size")
            })
            .sum();
        assert_eq!(batch_rows, BATCH_FIELDS_BYTES);
    }

    #[test]
    fn unknown_batch_codecs_and_deltas_are_corrupt() {
        let b = ProducedBatch {
            codec: BATCH_CODEC_MAX,
            last_offset_delta: 0,
            stored_bytes: 0,
        };
        let fresh = || {
            let mut out = Vec::new();
            encode_unsealed_batch(
                &mut out,
                0,
                None,
                Some(b"v"),
                [],
                &RecordMeta::default(),
                Some(&b),
            );
            out
        };
        let p = batch_fields_pos(&RecordMeta::default());
        let mut bad = fresh();
        bad[p] = BATCH_CODEC_MAX + 1;
        seal(&mut bad, 0);
        assert_eq!(
            decode(&bad),
            Err(DecodeError::Corrupt("unknown batch codec"))
        );
        let mut bad = fresh();
        set_batch_extent(&mut bad, p, i32::MAX as u32 + 1, 0);
        seal(&mut bad, 0);
        assert_eq!(
            decode(&bad),
            Err(DecodeError::Corrupt("batch offset delta out of range"))
        );
    }

    #[test]
    fn implausible_lengths_are_rejected_before_reading() {
        assert!(matches!(
            decode(&[0, 0, 0, 3]),
            Err(DecodeError::Corrupt(_))
        ));
        assert!(matches!(
            decode(&[0x7f, 0xff, 0xff, 0xff]),
            Err(DecodeError::Corrupt(_))
        ));
        assert!(matches!(
            decode(&[0, 0]),
            Err(DecodeError::Incomplete { .. })
        ));
        assert!(matches!(
            decode(&[0, 0, 0, 40, 1]),
            Err(DecodeError::Incomplete { needed: 44 })
        ));
    }

    /// What [`Checker`] must answer at every position: [`check`]'s answer.
    fn checker_agrees_with_check(buf: &[u8]) -> Result<(), TestCaseError> {
        let mut c = Checker::new();
        let mut p = 0;
        while p < buf.len() {
            let want = check(&buf[p..]);
            let got = c.check(buf, p);
            prop_assert_eq!(format!("{got:?}"), format!("{want:?}"), "at {}", p);
            match got {
                Ok((_, len)) => p += len,
                Err(_) => break,
            }
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn crc32c_3_is_three_crc32cs(a in proptest::collection::vec(any::<u8>(), 0..600), b in proptest::collection::vec(any::<u8>(), 0..600), c in proptest::collection::vec(any::<u8>(), 0..600)) {
            prop_assert_eq!(crc32c_3([&a, &b, &c]), [crc32c::crc32c(&a), crc32c::crc32c(&b), crc32c::crc32c(&c)]);
        }

        #[test]
        fn seal_all_is_seal_of_each(
            recs in proptest::collection::vec(
                (proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)),
                 proptest::option::of(proptest::collection::vec(any::<u8>(), 0..300)),
                 any::<bool>()),
                0..12),
            base in 0u64..1 << 40,
        ) {
            let mut buf = Vec::new();
            let mut starts = Vec::new();
            for (key, value, transactional) in &recs {
                starts.push(buf.len() as u32);
                let meta = RecordMeta { transactional: *transactional, ..RecordMeta::default() };
                encode_unsealed(&mut buf, 7, key.as_deref(), value.as_deref(), [], &meta);
            }
            let mut want = buf.clone();
            for (i, &s) in starts.iter().enumerate() {
                let e = starts.get(i + 1).map_or(want.len(), |&e| e as usize);
                seal(&mut want[s as usize..e], base + i as u64);
            }
            seal_all(&mut buf, &starts, base);
            prop_assert_eq!(&buf, &want);
            let offsets: Vec<u64> = RecordIter::new(&buf).map(|r| r.map(|r| r.offset)).collect::<Result<_, _>>().expect("sealed records decode");
            prop_assert_eq!(offsets, (0..recs.len() as u64).map(|i| base + i).collect::<Vec<_>>());
        }

        #[test]
        fn checker_answers_as_check_does(recs in proptest::collection::vec((proptest::option::of(bytes()), proptest::option::of(bytes()), arb_headers(), arb_meta()), 0..8), flip in proptest::option::of(any::<proptest::sample::Index>()), cut in any::<proptest::sample::Index>()) {
            let mut buf = Vec::new();
            for (i, (k, v, h, m)) in recs.iter().enumerate() {
                buf.extend_from_slice(&enc(100 + i as u64, 1, k, v, h, m));
            }
            checker_agrees_with_check(&buf)?;
            // A flipped bit (a bad CRC, length or anything) and a torn tail.
            if let (Some(f), false) = (flip, buf.is_empty()) {
                let i = f.index(buf.len() * 8);
                buf[i / 8] ^= 1 << (i % 8);
                checker_agrees_with_check(&buf)?;
            }
            let n = cut.index(buf.len() + 1);
            checker_agrees_with_check(&buf[..n])?;
        }

        #[test]
        fn round_trips(off in any::<u64>(), ts in any::<i64>(), k in proptest::option::of(bytes()), v in proptest::option::of(bytes()), h in arb_headers(), m in arb_meta(), b in arb_batch()) {
            let out = enc_batch(off, ts, &k, &v, &h, &m, b);
            let r = decode(&out).expect("decodes");
            prop_assert_eq!(r.encoded_len, out.len());
            prop_assert_eq!(r.offset, off);
            prop_assert_eq!(r.timestamp_ms, ts);
            prop_assert_eq!(r.key, k.as_deref());
            prop_assert_eq!(r.value, v.as_deref());
            prop_assert_eq!(r.meta, m);
            prop_assert_eq!(r.batch, b);
            let got: Hdrs = r.headers().map(|(a, b)| (a.to_vec(), b.map(<[u8]>::to_vec))).collect();
            prop_assert_eq!(got, h.clone());
            let plain = v.is_some() && h.is_empty() && m == RecordMeta::default() && b.is_none();
            prop_assert_eq!(out[0] & 0x80 == 0, plain);
        }

        #[test]
        fn batch_extent_is_filled_in_before_the_seal(m in arb_meta(), h in arb_headers(), codec in 0..=BATCH_CODEC_MAX, delta in 0..=i32::MAX as u32, stored in any::<u32>()) {
            let start = ProducedBatch { codec, last_offset_delta: 0, stored_bytes: 0 };
            let mut out = Vec::new();
            encode_unsealed_batch(&mut out, 5, Some(b"k"), Some(b"v"), h.iter().map(|(a, b)| (a.as_slice(), b.as_deref())), &m, Some(&start));
            set_batch_extent(&mut out, batch_fields_pos(&m), delta, stored);
            seal(&mut out, 9);
            let r = decode(&out).expect("decodes");
            prop_assert_eq!(r.batch, Some(ProducedBatch { codec, last_offset_delta: delta, stored_bytes: stored }));
            prop_assert_eq!(r.meta, m);
            prop_assert_eq!(r.headers().count(), h.len());
        }

        #[test]
        fn read_checked_iteration_skips_only_the_crc(k in proptest::option::of(bytes()), v in proptest::option::of(bytes()), h in arb_headers(), m in arb_meta(), bit in any::<proptest::sample::Index>()) {
            let mut buf = enc(1, 1, &k, &v, &h, &m);
            buf.extend_from_slice(&enc(2, 2, &k, &v, &h, &m));
            let a: Vec<_> = RecordIter::new(&buf).collect();
            let b: Vec<_> = RecordIter::read_checked(&buf).collect();
            prop_assert_eq!(format!("{a:?}"), format!("{b:?}"));
            // Damaged bytes never make it panic or read out of bounds.
            let mut bad = buf.clone();
            let i = bit.index(buf.len() * 8);
            bad[i / 8] ^= 1 << (i % 8);
            for r in RecordIter::read_checked(&bad).flatten() {
                prop_assert!(r.encoded_len <= bad.len());
            }
        }

        #[test]
        fn any_flipped_bit_is_detected(k in proptest::option::of(bytes()), v in proptest::option::of(bytes()), h in arb_headers(), m in arb_meta(), b in arb_batch(), bit in any::<proptest::sample::Index>()) {
            let out = enc_batch(42, 1, &k, &v, &h, &m, b);
            let mut bad = out.clone();
            let i = bit.index(out.len() * 8);
            bad[i / 8] ^= 1 << (i % 8);
            match decode(&bad) {
                Err(_) => {}
                Ok(r) => prop_assert!(false, "flipped bit {} accepted: {:?}", i, r),
            }
        }
    }
}
