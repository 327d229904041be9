//! frame_split: es-kafka's frame splitter (`codec::frame::check_frame` and
//! `split_frame`, as the connection calls them) over any byte stream cut
//! into any chunks.
//!
//! Input: a limit byte (its low three bits choose `frame_bytes_max`: 0, 1, 8,
//! 64, 1 KiB, 64 KiB, 1 MiB or Kafka's 100 MiB), a count byte `n` (its low
//! four bits), `n` chunk sizes (one byte each, 0 an empty read), then the
//! stream. The stream arrives in chunks of those sizes, in turn, until it is
//! all delivered; after each chunk every whole frame is taken, as the
//! connection takes them.
//!
//! Must hold, against a splitter written here from the frame format (a
//! big-endian i32 length, then that many bytes):
//! - the stream read whole and the stream read in chunks give the same
//!   frames, in order, and stop for the same reason (a negative length, a
//!   length over the limit, or bytes left waiting for the rest of a frame);
//! - a bad length is refused as soon as its four bytes have arrived: in the
//!   same chunk, before any byte of the frame's body is buffered (so a frame
//!   longer than the limit costs nothing);
//! - while a frame is incomplete, the size `check_frame` offers for reserving
//!   is exactly the frame's (prefix included), hence at most the limit plus
//!   four bytes;
//! - `peek_request_header` of each frame reads its first eight bytes, and
//!   refuses a frame shorter than that.

#![no_main]

use bytes::BytesMut;
use es_fuzz::trace;
use es_kafka::codec::frame::{
    check_frame, peek_request_header, split_frame, FrameError, FrameStatus,
    FRAME_BYTES_MAX_DEFAULT, FRAME_LEN_PREFIX_BYTES, REQUEST_HEADER_PREFIX_BYTES,
};
use libfuzzer_sys::fuzz_target;

const LIMITS: [usize; 8] = [0, 1, 8, 64, 1024, 65_536, 1 << 20, FRAME_BYTES_MAX_DEFAULT];

/// How the model's split of a whole stream ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// Everything was taken, or bytes wait for the rest of a frame.
    Waiting,
    /// The frame starting at `at` has a negative length.
    Negative { at: usize },
    /// The frame starting at `at` is longer than the limit.
    TooLarge { at: usize, len: usize },
}

/// The frames of `stream` (start and body of each) and how the split ends.
fn model(stream: &[u8], max: usize) -> (Vec<(usize, &[u8])>, End) {
    let mut frames = Vec::new();
    let mut at = 0;
    loop {
        let rest = &stream[at..];
        if rest.len() < 4 {
            return (frames, End::Waiting);
        }
        let len = i32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]);
        if len < 0 {
            return (frames, End::Negative { at });
        }
        let len = len as usize;
        if len > max {
            return (frames, End::TooLarge { at, len });
        }
        if rest.len() < 4 + len {
            return (frames, End::Waiting);
        }
        frames.push((at, &rest[4..4 + len]));
        at += 4 + len;
    }
}

fn check_header(body: &[u8]) {
    match peek_request_header(body) {
        Ok(h) => {
            assert!(body.len() >= REQUEST_HEADER_PREFIX_BYTES);
            assert_eq!(h.api_key, i16::from_be_bytes([body[0], body[1]]));
            assert_eq!(h.api_version, i16::from_be_bytes([body[2], body[3]]));
            assert_eq!(
                h.correlation_id,
                i32::from_be_bytes([body[4], body[5], body[6], body[7]])
            );
        }
        Err(e) => {
            assert!(body.len() < REQUEST_HEADER_PREFIX_BYTES);
            assert_eq!(e, FrameError::ShortHeader { len: body.len() });
        }
    }
}

/// What the splitter's error must be for the model's end.
fn expected_error(end: End, max: usize, stream: &[u8]) -> Option<FrameError> {
    match end {
        End::Waiting => None,
        End::Negative { at } => Some(FrameError::NegativeLength(i32::from_be_bytes([
            stream[at],
            stream[at + 1],
            stream[at + 2],
            stream[at + 3],
        ]))),
        End::TooLarge { len, .. } => Some(FrameError::TooLarge { len, max }),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&limit, rest)) = data.split_first() else {
        return;
    };
    let Some((&count, rest)) = rest.split_first() else {
        return;
    };
    let n = usize::from(count & 0x0f).min(rest.len());
    let (chunks, stream) = rest.split_at(n);
    let max = LIMITS[usize::from(limit & 0x07)];
    let (frames, end) = model(stream, max);
    let want_err = expected_error(end, max, stream);
    trace!(
        "limit {max}, chunks {chunks:?}, {} stream bytes: {} frames, {end:?}",
        stream.len(),
        frames.len()
    );

    // The stream read whole.
    let mut buf = BytesMut::from(stream);
    let mut got = Vec::new();
    let err = loop {
        match split_frame(&mut buf, max) {
            Ok(Some(body)) => got.push(body),
            Ok(None) => break None,
            Err(e) => break Some(e),
        }
    };
    assert_eq!(got.len(), frames.len(), "frames of the whole stream");
    for (body, (_, want)) in got.iter().zip(&frames) {
        assert_eq!(&body[..], *want);
        check_header(body);
    }
    assert_eq!(err, want_err, "how the whole stream's split ends");

    // The stream read in chunks, as the connection reads it.
    let mut buf = BytesMut::new();
    let mut delivered = 0usize;
    let mut taken = 0usize;
    let mut step = 0usize;
    let mut err = None;
    // Chunks of nothing but empty reads would never deliver the stream.
    let whole = chunks.iter().all(|&c| c == 0);
    'stream: while delivered < stream.len() || step == 0 {
        let size = if whole {
            stream.len()
        } else {
            usize::from(chunks[step % chunks.len()])
        };
        step += 1;
        let before = delivered;
        let next = (delivered + size).min(stream.len());
        buf.extend_from_slice(&stream[delivered..next]);
        delivered = next;
        loop {
            let buffered_from = delivered - buf.len();
            match check_frame(&buf, max) {
                Err(e) => {
                    // Refused on the chunk that brought the length's last byte.
                    let at = match end {
                        End::Negative { at } | End::TooLarge { at, .. } => at,
                        End::Waiting => panic!("refused {e:?} a stream the model waits on"),
                    };
                    assert_eq!(buffered_from, at, "refused at a frame's start");
                    assert!(
                        before < at + FRAME_LEN_PREFIX_BYTES,
                        "the bad length arrived in an earlier chunk but was not refused then"
                    );
                    assert_eq!(split_frame(&mut buf, max), Err(e));
                    err = Some(e);
                    break 'stream;
                }
                Ok(FrameStatus::Incomplete { frame_bytes }) => {
                    match frame_bytes {
                        None => assert!(buf.len() < FRAME_LEN_PREFIX_BYTES),
                        Some(n) => {
                            let len = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
                            assert_eq!(n, FRAME_LEN_PREFIX_BYTES + len as usize);
                            assert!(n <= max + FRAME_LEN_PREFIX_BYTES);
                            assert!(buf.len() < n);
                        }
                    }
                    assert_eq!(split_frame(&mut buf, max), Ok(None));
                    break;
                }
                Ok(FrameStatus::Complete { body_bytes }) => {
                    let body = match split_frame(&mut buf, max) {
                        Ok(Some(b)) => b,
                        other => panic!("check_frame said complete, split_frame {other:?}"),
                    };
                    assert_eq!(body.len(), body_bytes);
                    let (start, want) = frames
                        .get(taken)
                        .unwrap_or_else(|| panic!("frame {taken} is not in the model"));
                    assert_eq!(*start, buffered_from);
                    assert_eq!(&body[..], *want);
                    taken += 1;
                }
            }
        }
    }
    assert_eq!(taken, frames.len(), "frames of the chunked stream");
    assert_eq!(err, want_err, "how the chunked stream's split ends");
});
