//! request_decode: es's decode boundary for every request, by (api key,
//! version), as `handlers::dispatch` runs it before any handler: the
//! classification against es's ApiVersions table (`versions::classify`),
//! then for a served version the pre-decode bounds check and UTF-8 repair
//! (`codec::shape::check_frame`), the request header, and the body decoded
//! by the kafka-protocol crate at the crate version es maps the wire version
//! to (`versions::crate_version`: ListOffsets v11 and DescribeLogDirs v5 are
//! decoded past the crate as v10 and v4), or by es's hand decoders for the
//! versions in `versions::BY_HAND` (`codec::share_wire`: ShareFetch and
//! ShareAcknowledge v2); for a known version es does not serve, the
//! UNSUPPORTED_VERSION answer (`handlers::unsupported::respond`, which
//! parses Produce v0-2 by hand); for an ApiVersions version past any es can
//! parse, the KIP-511 fallback answer. The BY_HAND versions are not
//! advertised yet, so they are classified as unserved; the harness runs
//! their decoding as if they were served all the same, so the hand decoders
//! are fuzzed before any client can reach them.
//!
//! Input: api key (i16, big-endian), api version (i16), then the rest of the
//! request after its correlation id (the harness writes 7): client id,
//! header tagged fields for flexible versions, the body.
//!
//! Must hold: no panic; no hang (libFuzzer's -timeout); and the bytes
//! allocated at once while one request is decoded stay below
//! `ALLOC_PER_INPUT_BYTE` times the request's size plus `ALLOC_SLACK_BYTES`
//! (a counting allocator, `es_fuzz::alloc`). The multiple: the bounds check
//! guarantees at least one wire byte per array element, and the largest
//! element the crate holds for one wire byte is a struct of a few dozen
//! bytes (the UTF-8 repair doubles the frame at most); 64 leaves room for
//! a `Vec`'s doubling and is still far from the gigabytes an unchecked
//! count of four billion asks for. The slack covers the fixed costs
//! (response buffers, `anyhow` errors with their context) of a short
//! request.
//!
//! Seeds: requests captured from clients (`scripts/fuzz-capture`), and one
//! request for every (api key, version) es serves, written by this target
//! when `ES_FUZZ_WRITE_SEEDS=DIR` is set: the crate's decoding of a body of
//! zero bytes (or of 0x01 bytes, for flexible versions, where a zero length
//! is null), encoded again, after a header with client id `es-fuzz`.
//!
//! At start the harness shows what the bounds check is for: a Metadata v12
//! request of 34 bytes claiming a million topics is refused by es's check,
//! and the crate alone, given it, allocates tens of megabytes (printed with
//! ES_FUZZ_TRACE).

#![no_main]

use std::sync::Once;

use bytes::{BufMut, Bytes, BytesMut};
use es_fuzz::alloc::{peak_during, Counting};
use es_fuzz::trace;
use es_kafka::codec::shape;
use es_kafka::codec::share_wire::{self, ShareAcknowledgeV2Extras, ShareFetchV2Extras};
use es_kafka::handlers::{api_versions, unsupported};
use es_kafka::kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind};
use es_kafka::kafka_protocol::protocol::Decodable;
use es_kafka::versions::{self, Support};
use libfuzzer_sys::fuzz_target;

#[global_allocator]
static ALLOC: Counting = Counting;

/// Bytes one request may allocate at once per byte of the request.
const ALLOC_PER_INPUT_BYTE: usize = 64;
/// Bytes any request may allocate besides.
const ALLOC_SLACK_BYTES: usize = 64 * 1024;
const CORRELATION_ID: i32 = 7;

/// What the boundary made of a request (read through `Debug`, in traces and
/// assertion messages).
#[derive(Debug)]
#[allow(dead_code)]
enum Outcome {
    UnknownKey,
    Unparseable,
    /// The UNSUPPORTED_VERSION answer, or why there is none.
    Unsupported(Result<Option<Bytes>, String>),
    /// Refused by the bounds check.
    Shape(String),
    Header(String),
    Body(String),
    /// Decoded (the repair copied the frame or not).
    Decoded {
        repaired: bool,
    },
}

/// The steps of `handlers::dispatch` up to the handler call.
fn decode(frame: Bytes) -> Outcome {
    let api_key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    match versions::classify(api_key, version) {
        Support::UnknownKey => Outcome::UnknownKey,
        Support::Unparseable(ApiKey::ApiVersions) => {
            let answer = api_versions::fallback(CORRELATION_ID);
            assert!(answer.is_ok(), "the ApiVersions fallback must encode");
            Outcome::Unparseable
        }
        Support::Unparseable(_) => Outcome::Unparseable,
        Support::Unsupported(key) if versions::by_hand(key, version) => {
            // What dispatch does today (must not panic either), then what
            // it will do once the version is advertised.
            let _ = unsupported::respond(key, version, frame.clone());
            decode_served(key, api_key, version, frame)
        }
        Support::Unsupported(key) => Outcome::Unsupported(
            unsupported::respond(key, version, frame).map_err(|e| e.to_string()),
        ),
        Support::Served(key) => decode_served(key, api_key, version, frame),
    }
}

/// A served request: bounds check, header, body.
fn decode_served(key: ApiKey, api_key: i16, version: i16, frame: Bytes) -> Outcome {
    let header_version = key.request_header_version(version);
    let (mut body, repaired) = match shape::check_frame(&frame, api_key, version, header_version) {
        Ok(None) => (frame, false),
        Ok(Some(copy)) => (Bytes::from(copy), true),
        Err(e) => return Outcome::Shape(e.to_string()),
    };
    if let Err(e) = RequestHeader::decode(&mut body, header_version) {
        return Outcome::Header(format!("{e:#}"));
    }
    if versions::by_hand(key, version) {
        return match share_wire::decode_request(key, version, &mut body) {
            Ok(_) => Outcome::Decoded { repaired },
            Err(e) => Outcome::Body(e.to_string()),
        };
    }
    match RequestKind::decode(key, &mut body, versions::crate_version(key, version)) {
        Ok(_) => Outcome::Decoded { repaired },
        Err(e) => Outcome::Body(format!("{e:#}")),
    }
}

/// Metadata v12 (flexible): a header with a null client id, then a compact
/// array count of 1,000,001 (varint), then nothing.
fn million_topics() -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(ApiKey::Metadata as i16);
    b.put_i16(12);
    b.put_i32(CORRELATION_ID);
    b.put_i16(-1); // client id
    b.put_u8(0); // header tagged fields
    let mut n: u32 = 1_000_001;
    while n >= 0x80 {
        b.put_u8((n as u8) | 0x80);
        n >>= 7;
    }
    b.put_u8(n as u8);
    b.put_slice(&[0; 20]);
    b.freeze()
}

fn show_the_guard() {
    let frame = million_topics();
    let refused = shape::check_frame(&frame, ApiKey::Metadata as i16, 12, 2);
    assert!(
        refused.is_err(),
        "es's bounds check must refuse a million topics in {} bytes",
        frame.len()
    );
    let mut body = frame.clone();
    let (_, peak) = peak_during(|| {
        let _ = RequestHeader::decode(&mut body, 2);
        let _ = RequestKind::decode(ApiKey::Metadata, &mut body, 12);
    });
    trace!(
        "Metadata v12, {} bytes claiming 1,000,000 topics: es refuses it ({}); the crate alone allocates {peak} bytes",
        frame.len(),
        refused.err().map(|e| e.to_string()).unwrap_or_default()
    );
}

/// Writes a minimal request for every (api key, version) es serves to `dir`.
fn write_seeds(dir: &str) {
    std::fs::create_dir_all(dir).expect("the seed directory");
    for range in versions::SUPPORTED {
        for version in range.min..=range.max {
            let key = range.key;
            let header_version = key.request_header_version(version);
            let crate_version = versions::crate_version(key, version);
            let body = [0x00u8, 0x01].iter().find_map(|&fill| {
                let mut zeros = Bytes::from(vec![fill; 64]);
                let req = RequestKind::decode(key, &mut zeros, crate_version).ok()?;
                let mut out = BytesMut::new();
                req.encode(&mut out, crate_version).ok()?;
                Some(out)
            });
            let Some(body) = body else {
                trace!("no seed for {key:?} v{version}");
                continue;
            };
            let mut seed = BytesMut::new();
            seed.put_i16(key as i16);
            seed.put_i16(version);
            seed.put_i16(7);
            seed.put_slice(b"es-fuzz");
            if header_version >= 2 {
                seed.put_u8(0);
            }
            seed.put_slice(&body);
            let name = format!("{dir}/{:02}-{key:?}-v{version}", key as i16);
            std::fs::write(name, &seed).expect("a seed file");
        }
    }
    for &(key, version) in versions::BY_HAND {
        let mut body = Vec::new();
        let encoded = match key {
            ApiKey::ShareFetch => share_wire::encode_share_fetch_request(
                &Default::default(),
                &ShareFetchV2Extras {
                    acquire_mode: 1,
                    is_renew_ack: true,
                },
                version,
                &mut body,
            ),
            ApiKey::ShareAcknowledge => share_wire::encode_share_acknowledge_request(
                &Default::default(),
                &ShareAcknowledgeV2Extras { is_renew_ack: true },
                version,
                &mut body,
            ),
            _ => continue,
        };
        encoded.expect("a default request encodes");
        let mut seed = BytesMut::new();
        seed.put_i16(key as i16);
        seed.put_i16(version);
        seed.put_i16(7);
        seed.put_slice(b"es-fuzz");
        seed.put_u8(0); // every BY_HAND version is flexible
        seed.put_slice(&body);
        let name = format!("{dir}/{:02}-{key:?}-v{version}", key as i16);
        std::fs::write(name, &seed).expect("a seed file");
    }
}

static START: Once = Once::new();

fuzz_target!(|data: &[u8]| {
    START.call_once(|| {
        if let Ok(dir) = std::env::var("ES_FUZZ_WRITE_SEEDS") {
            write_seeds(&dir);
        }
        show_the_guard();
    });
    if data.len() < 4 {
        return;
    }
    let mut frame = BytesMut::with_capacity(data.len() + 4);
    frame.put_slice(&data[..4]);
    frame.put_i32(CORRELATION_ID);
    frame.put_slice(&data[4..]);
    let frame = frame.freeze();
    let frame_bytes = frame.len();
    let (outcome, peak) = peak_during(|| decode(frame));
    trace!(
        "key {} v{} ({} bytes): {outcome:?}, peak {peak} bytes ({:.1} per byte)",
        i16::from_be_bytes([data[0], data[1]]),
        i16::from_be_bytes([data[2], data[3]]),
        frame_bytes,
        peak as f64 / frame_bytes as f64
    );
    let bound = ALLOC_PER_INPUT_BYTE * frame_bytes + ALLOC_SLACK_BYTES;
    assert!(
        peak <= bound,
        "decoding a request of {frame_bytes} bytes allocated {peak} bytes at once, over {bound} ({outcome:?})"
    );
});
