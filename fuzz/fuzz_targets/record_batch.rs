//! record_batch: es-kafka's produce-path batch validation and decoding into
//! es records (`codec::batch::BatchDecoder`, as the produce handler and a
//! follower's fetch call it), for every codec: none, gzip, snappy (xerial
//! and raw), lz4 and zstd.
//!
//! Input: a flags byte, then bytes whose meaning the flags choose.
//! - bits 0-2, the mode: 0-4 compose a batch compressed with that codec,
//!   5-7 take the bytes as they are;
//! - bit 3: Kafka's produce rules (one batch, counts agree, no control
//!   batches), else the structural checks only;
//! - bits 4-5: the limit on decompressed record bytes (`records_bytes_max`):
//!   1 KiB, 16 KiB, 256 KiB or 1 MiB;
//! - bit 6 (raw mode): set each batch's length (when it does not fit) and
//!   CRC-32C, which a fuzzer would otherwise never get right;
//! - bit 7: decode as a follower does (`decode_replica`, one whole batch).
//!
//! Compose mode: the first 61 bytes are the batch header (zero-padded), the
//! rest the records as they are before compression; the harness compresses
//! them with es's own compressor, sets the codec bits, the length and the CRC.
//! Raw mode lets a fuzzer write compressed bytes itself (bombs, broken
//! streams, huge announced lengths).
//!
//! Must hold:
//! - no panic;
//! - a decoded batch holds at most the limit of record bytes, its records
//!   are as many as its count says, each summary's sizes are the batch's;
//! - memory: the bytes allocated at once stay below
//!   `ALLOC_PER_LIMIT_BYTE` times the limit plus `ALLOC_PER_INPUT_BYTE`
//!   times the input plus `ALLOC_SLACK_BYTES`, whatever the records would
//!   expand to. The limit's multiple: the decompression buffer grows by
//!   doubling to about twice the limit (a move charges old and new), and the
//!   stored records take the payload plus about 51 bytes per record of at
//!   least 7 bytes (about 8 times the payload). The slack covers the codecs'
//!   own state (zstd's context, lz4's and gzip's windows). So a bomb that
//!   would expand to gigabytes is refused having used a few megabytes;
//! - in compose mode the compressed batch decodes exactly as the same
//!   records uncompressed (same records, same summary but the codec and
//!   wire size), or both are refused.

#![no_main]

use es_fuzz::alloc::{peak_during, Counting};
use es_fuzz::trace;
use es_kafka::codec::batch::{
    BatchDecoder, BatchError, BatchSummary, DecodeLimits, ATTRIBUTES_POS, BATCH_HEADER_BYTES,
    BATCH_LENGTH_MIN, BATCH_LENGTH_POS, CRC_POS, LOG_OVERHEAD_BYTES,
};
use es_kafka::codec::compression::{Compression, Compressor, COMPRESSION_ATTR_MASK};
use es_storage::RecordBatchBuf;
use libfuzzer_sys::fuzz_target;

#[global_allocator]
static ALLOC: Counting = Counting;

const LIMITS: [usize; 4] = [1024, 16 * 1024, 256 * 1024, 1 << 20];
/// Large enough that only the decompressed limit decides.
const BATCH_BYTES_MAX: usize = 16 << 20;
const ALLOC_PER_LIMIT_BYTE: usize = 16;
const ALLOC_PER_INPUT_BYTE: usize = 64;
const ALLOC_SLACK_BYTES: usize = 2 << 20;

/// Sets the batch length and CRC-32C of the batch at the start of `b` (all
/// of `b` when its length field does not fit); returns its size.
fn seal(b: &mut [u8]) -> usize {
    let declared = i32::from_be_bytes([b[8], b[9], b[10], b[11]]);
    let fits = usize::try_from(declared)
        .ok()
        .filter(|&l| l >= BATCH_LENGTH_MIN && LOG_OVERHEAD_BYTES + l <= b.len());
    let len = match fits {
        Some(l) => l,
        None => {
            let l = b.len() - LOG_OVERHEAD_BYTES;
            let l32 = i32::try_from(l).unwrap_or(i32::MAX);
            b[BATCH_LENGTH_POS..BATCH_LENGTH_POS + 4].copy_from_slice(&l32.to_be_bytes());
            l
        }
    };
    let total = LOG_OVERHEAD_BYTES + len;
    let crc = crc32c::crc32c(&b[ATTRIBUTES_POS..total]);
    b[CRC_POS..CRC_POS + 4].copy_from_slice(&crc.to_be_bytes());
    total
}

/// Seals every batch of `b` in turn.
fn seal_all(b: &mut [u8]) {
    let mut at = 0;
    while b.len() - at >= BATCH_HEADER_BYTES {
        at += seal(&mut b[at..]);
    }
}

/// A batch of `header` (61 bytes) and `records` compressed with `codec`.
fn compose(header: &[u8], records: &[u8], codec: Compression) -> Vec<u8> {
    let mut b = header.to_vec();
    let attrs = i16::from_be_bytes([b[ATTRIBUTES_POS], b[ATTRIBUTES_POS + 1]]);
    let attrs = (attrs & !COMPRESSION_ATTR_MASK) | codec.id();
    b[ATTRIBUTES_POS..ATTRIBUTES_POS + 2].copy_from_slice(&attrs.to_be_bytes());
    Compressor::new()
        .compress(codec, records, &mut b)
        .expect("es compresses any bytes");
    // The length is set from the whole buffer.
    b[BATCH_LENGTH_POS..BATCH_LENGTH_POS + 4].copy_from_slice(&[0xff; 4]);
    seal(&mut b);
    b
}

type Decoded = (Result<Vec<BatchSummary>, BatchError>, RecordBatchBuf);

fn decode(input: &[u8], limits: &DecodeLimits, replica: bool) -> Decoded {
    let mut dec = BatchDecoder::new();
    let mut out = RecordBatchBuf::new();
    let r = if replica {
        let mut offsets = Vec::new();
        let r = dec.decode_replica(input, &mut out, &mut offsets, limits);
        if let Ok(s) = &r {
            assert_eq!(
                offsets.len(),
                s.record_count as usize,
                "an offset per record"
            );
        }
        r.map(|s| vec![s])
    } else {
        let mut summaries = Vec::new();
        dec.decode(input, &mut out, limits, &mut summaries)
            .map(|()| summaries)
    };
    (r, out)
}

fn check(input: &[u8], limits: &DecodeLimits, replica: bool, d: &Decoded) {
    let Ok(summaries) = &d.0 else {
        return;
    };
    let records: u64 = summaries.iter().map(|s| u64::from(s.record_count)).sum();
    assert_eq!(
        d.1.len() as u64,
        records,
        "one stored record per counted record"
    );
    let record_bytes: usize = summaries.iter().map(|s| s.records_bytes).sum();
    assert!(
        record_bytes <= limits.records_bytes_max,
        "records over the limit"
    );
    let wire: usize = summaries.iter().map(|s| s.batch_bytes).sum();
    assert_eq!(wire, input.len(), "the batches are the whole input");
    for s in summaries {
        assert!(s.batch_bytes <= limits.batch_bytes_max);
        if s.compression == Compression::None {
            assert_eq!(s.records_bytes, s.batch_bytes - BATCH_HEADER_BYTES);
        }
    }
    // A follower's decode keeps the structural checks only.
    if limits.produce_rules && !replica {
        assert_eq!(summaries.len(), 1, "a produced batch is one batch");
        let s = &summaries[0];
        assert!(s.record_count >= 1 && !s.control);
        assert_eq!(
            i64::from(s.last_offset_delta) + 1,
            i64::from(s.record_count)
        );
    }
}

/// The process's peak virtual and resident memory (`VmPeak`, `VmHWM`, KiB),
/// for traces: libzstd allocates with C's malloc, which the counting
/// allocator does not see.
fn vm_peak_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    (field("VmPeak:"), field("VmHWM:"))
}

fn bounded(input: &[u8], limits: &DecodeLimits, replica: bool) -> Decoded {
    let vm_before = if es_fuzz::tracing() {
        vm_peak_kib()
    } else {
        (0, 0)
    };
    let (d, peak) = peak_during(|| decode(input, limits, replica));
    if es_fuzz::tracing() {
        let vm = vm_peak_kib();
        trace!(
            "  VmPeak grew by {} KiB, VmHWM by {} KiB",
            vm.0 - vm_before.0,
            vm.1 - vm_before.1
        );
    }
    let bound = ALLOC_PER_LIMIT_BYTE * limits.records_bytes_max
        + ALLOC_PER_INPUT_BYTE * input.len()
        + ALLOC_SLACK_BYTES;
    trace!(
        "{} bytes, limit {}: {:?}, peak {peak} bytes",
        input.len(),
        limits.records_bytes_max,
        d.0
    );
    // Every input is held to the bound: es refuses LZ4's legacy frames and
    // blocks larger than the limit before lz4_flex allocates for them
    // (docs/fuzzing.md, Findings 3).
    assert!(
        peak <= bound,
        "decoding {} bytes with a limit of {} allocated {peak} bytes at once, over {bound} ({:?})",
        input.len(),
        limits.records_bytes_max,
        d.0
    );
    check(input, limits, replica, &d);
    d
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let limits = DecodeLimits {
        batch_bytes_max: BATCH_BYTES_MAX,
        records_bytes_max: LIMITS[usize::from(flags >> 4 & 0x03)],
        produce_rules: flags & 0x08 != 0,
    };
    let replica = flags & 0x80 != 0;
    match Compression::from_id(i16::from(flags & 0x07)) {
        None => {
            let mut input = rest.to_vec();
            if flags & 0x40 != 0 {
                seal_all(&mut input);
            }
            let _ = bounded(&input, &limits, replica);
        }
        Some(codec) => {
            let mut header = [0u8; BATCH_HEADER_BYTES];
            let n = rest.len().min(BATCH_HEADER_BYTES);
            header[..n].copy_from_slice(&rest[..n]);
            let records = &rest[n..];
            let plain = compose(&header, records, Compression::None);
            let packed = compose(&header, records, codec);
            let (p, p_out) = bounded(&plain, &limits, replica);
            let (c, c_out) = bounded(&packed, &limits, replica);
            match (&p, &c) {
                (Ok(ps), Ok(cs)) => {
                    assert_eq!(
                        p_out.as_bytes(),
                        c_out.as_bytes(),
                        "records differ by codec"
                    );
                    for (a, b) in ps.iter().zip(cs) {
                        let b = BatchSummary {
                            compression: a.compression,
                            batch_bytes: a.batch_bytes,
                            ..*b
                        };
                        assert_eq!(*a, b, "summaries differ by codec");
                    }
                }
                (Err(_), Err(_)) => {}
                _ => panic!("{codec:?}: uncompressed {p:?}, compressed {c:?}"),
            }
        }
    }
});
