//! Sans-io framing of the Kafka byte stream: size-prefixed frames
//! (`length i32 big-endian | body`) split out of a receive buffer.
//!
//! Check, then take: [`check_frame`] looks only at the 4-byte prefix and the
//! buffered length, so a peer that announces a huge frame is refused (or
//! waited for) before anything is allocated for it. The limit is Kafka's
//! `socket.request.max.bytes` ([`FRAME_BYTES_MAX_DEFAULT`], 100 MiB) and, as
//! in Kafka, it bounds the announced body length. A negative length is an
//! error; the connection should be closed after any [`FrameError`], since
//! the stream can no longer be resynchronised.
//!
//! [`peek_request_header`] reads the fixed request-header prefix (api key,
//! api version, correlation id) without consuming anything, so the server can
//! choose how to decode the rest (and answer an unsupported version with the
//! right correlation id).

use bytes::{Buf, Bytes, BytesMut};

/// Size of the length prefix of every frame.
pub const FRAME_LEN_PREFIX_BYTES: usize = 4;
/// Kafka's default `socket.request.max.bytes`: the largest request body.
pub const FRAME_BYTES_MAX_DEFAULT: usize = 104_857_600;
/// api_key i16 + api_version i16 + correlation_id i32.
pub const REQUEST_HEADER_PREFIX_BYTES: usize = 8;

/// Why the stream cannot be framed (the connection must be closed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("negative frame length {0}")]
    NegativeLength(i32),
    #[error("frame of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge { len: usize, max: usize },
    #[error("request of {len} bytes is shorter than the 8-byte header prefix")]
    ShortHeader { len: usize },
}

/// A response frame ready for the socket (size prefix, response header,
/// body), in one part or in several that are written back to back: a Fetch
/// response keeps its record batches in the buffers they were encoded into
/// (see [`super::fetch_response`]) and the connection writes the parts with
/// one vectored write.
#[derive(Clone, Debug)]
pub struct ResponseFrame {
    parts: Parts,
}

#[derive(Clone, Debug)]
enum Parts {
    One(Bytes),
    Many(Vec<Bytes>),
}

impl ResponseFrame {
    /// A frame made of `parts`, in order.
    pub fn from_parts(parts: Vec<Bytes>) -> Self {
        ResponseFrame {
            parts: Parts::Many(parts),
        }
    }

    /// The parts, to be written in order.
    pub fn parts(&self) -> &[Bytes] {
        match &self.parts {
            Parts::One(b) => std::slice::from_ref(b),
            Parts::Many(v) => v,
        }
    }

    /// Total bytes of the frame.
    pub fn len(&self) -> usize {
        self.parts().iter().map(Bytes::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The frame as one buffer (copies only when it has several parts).
    pub fn into_bytes(self) -> Bytes {
        match self.parts {
            Parts::One(b) => b,
            Parts::Many(v) if v.len() == 1 => v.into_iter().next().unwrap_or_default(),
            Parts::Many(v) => {
                let mut out = BytesMut::with_capacity(v.iter().map(Bytes::len).sum());
                for p in &v {
                    out.extend_from_slice(p);
                }
                out.freeze()
            }
        }
    }
}

impl From<Bytes> for ResponseFrame {
    fn from(b: Bytes) -> Self {
        ResponseFrame {
            parts: Parts::One(b),
        }
    }
}

/// What the buffered bytes hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameStatus {
    /// A whole frame is buffered; its body is `body_bytes` long after the prefix.
    Complete { body_bytes: usize },
    /// More bytes are needed. `frame_bytes` is the whole frame's size (prefix
    /// included) once the prefix has arrived, so the caller may reserve it
    /// (it is already checked against the limit).
    Incomplete { frame_bytes: Option<usize> },
}

/// Decides whether `buf` starts with a whole frame, reading only its prefix.
pub fn check_frame(buf: &[u8], frame_bytes_max: usize) -> Result<FrameStatus, FrameError> {
    let Some(prefix) = buf.get(..FRAME_LEN_PREFIX_BYTES) else {
        return Ok(FrameStatus::Incomplete { frame_bytes: None });
    };
    let len = i32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
    if len < 0 {
        return Err(FrameError::NegativeLength(len));
    }
    let body_bytes = len as usize;
    if body_bytes > frame_bytes_max {
        return Err(FrameError::TooLarge {
            len: body_bytes,
            max: frame_bytes_max,
        });
    }
    let frame_bytes = FRAME_LEN_PREFIX_BYTES + body_bytes;
    if buf.len() < frame_bytes {
        return Ok(FrameStatus::Incomplete {
            frame_bytes: Some(frame_bytes),
        });
    }
    Ok(FrameStatus::Complete { body_bytes })
}

/// Takes the first whole frame out of `buf` and returns its body (without
/// the length prefix) as a zero-copy `Bytes`; `Ok(None)` when more bytes are
/// needed (`buf` is then untouched).
pub fn split_frame(
    buf: &mut BytesMut,
    frame_bytes_max: usize,
) -> Result<Option<Bytes>, FrameError> {
    match check_frame(buf, frame_bytes_max)? {
        FrameStatus::Incomplete { .. } => Ok(None),
        FrameStatus::Complete { body_bytes } => {
            buf.advance(FRAME_LEN_PREFIX_BYTES);
            Ok(Some(buf.split_to(body_bytes).freeze()))
        }
    }
}

/// The fixed start of every Kafka request header (all header versions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestHeaderPrefix {
    pub api_key: i16,
    pub api_version: i16,
    pub correlation_id: i32,
}

/// Reads the request-header prefix of a frame body without consuming it.
pub fn peek_request_header(body: &[u8]) -> Result<RequestHeaderPrefix, FrameError> {
    let Some(b) = body.get(..REQUEST_HEADER_PREFIX_BYTES) else {
        return Err(FrameError::ShortHeader { len: body.len() });
    };
    Ok(RequestHeaderPrefix {
        api_key: i16::from_be_bytes([b[0], b[1]]),
        api_version: i16::from_be_bytes([b[2], b[3]]),
        correlation_id: i32::from_be_bytes([b[4], b[5], b[6], b[7]]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn framed(bodies: &[Vec<u8>]) -> Vec<u8> {
        let mut out = Vec::new();
        for b in bodies {
            out.extend_from_slice(&(b.len() as i32).to_be_bytes());
            out.extend_from_slice(b);
        }
        out
    }

    #[test]
    fn prefix_only_decides_the_limit() {
        // A 2 GiB announcement is refused from the 4 prefix bytes alone.
        let mut buf = BytesMut::from(&0x7fff_ffffi32.to_be_bytes()[..]);
        assert_eq!(
            split_frame(&mut buf, FRAME_BYTES_MAX_DEFAULT),
            Err(FrameError::TooLarge {
                len: 0x7fff_ffff,
                max: FRAME_BYTES_MAX_DEFAULT
            })
        );
        let mut buf = BytesMut::from(&(-1i32).to_be_bytes()[..]);
        assert_eq!(
            split_frame(&mut buf, 100),
            Err(FrameError::NegativeLength(-1))
        );
        // Exactly at the limit is fine; one more is not.
        assert_eq!(
            check_frame(&100i32.to_be_bytes(), 100),
            Ok(FrameStatus::Incomplete {
                frame_bytes: Some(104)
            })
        );
        assert!(check_frame(&101i32.to_be_bytes(), 100).is_err());
    }

    #[test]
    fn incomplete_leaves_the_buffer_alone() {
        let mut buf = BytesMut::from(&[0u8, 0, 0][..]);
        assert_eq!(split_frame(&mut buf, 100), Ok(None));
        assert_eq!(buf.len(), 3);
        buf.extend_from_slice(&[5, 1, 2]);
        assert_eq!(split_frame(&mut buf, 100), Ok(None));
        assert_eq!(buf.len(), 6);
        buf.extend_from_slice(&[3, 4, 5, 9]);
        assert_eq!(
            split_frame(&mut buf, 100),
            Ok(Some(Bytes::from_static(&[1, 2, 3, 4, 5])))
        );
        assert_eq!(&buf[..], &[9]);
    }

    #[test]
    fn empty_frame_is_a_frame() {
        let mut buf = BytesMut::from(&[0u8, 0, 0, 0][..]);
        assert_eq!(split_frame(&mut buf, 100), Ok(Some(Bytes::new())));
        assert!(buf.is_empty());
    }

    #[test]
    fn header_prefix() {
        let body = [0, 3, 0, 12, 0, 0, 1, 0, 0xff];
        assert_eq!(
            peek_request_header(&body),
            Ok(RequestHeaderPrefix {
                api_key: 3,
                api_version: 12,
                correlation_id: 256
            })
        );
        assert_eq!(
            peek_request_header(&body[..7]),
            Err(FrameError::ShortHeader { len: 7 })
        );
    }

    proptest! {
        #[test]
        fn any_chunking_gives_the_same_frames(
            bodies in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..20),
            cuts in proptest::collection::vec(1usize..64, 0..200),
        ) {
            let stream = framed(&bodies);
            let mut buf = BytesMut::new();
            let mut got = Vec::new();
            let mut pos = 0;
            let mut cuts = cuts.into_iter();
            while pos < stream.len() {
                let n = cuts.next().unwrap_or(stream.len() - pos).min(stream.len() - pos);
                buf.extend_from_slice(&stream[pos..pos + n]);
                pos += n;
                while let Some(f) = split_frame(&mut buf, 300).expect("valid stream") {
                    got.push(f.to_vec());
                }
            }
            prop_assert!(buf.is_empty());
            prop_assert_eq!(got, bodies);
        }
    }
}
