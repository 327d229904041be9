//! The frame every message between nodes travels in on the Raft listener:
//! a big-endian `len u32` (the bytes that follow it), a `kind u8`, a
//! `crc32c u32` of the payload, then the payload (JSON). This module owns the
//! byte layout, the size limit and the checks; what a payload means is
//! [`super::rpc`]'s. See `docs/raft-protocol.md`.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The largest `len` a frame may declare (kind, CRC and payload). openraft
/// sends snapshots in chunks (`snapshot_max_chunk_size`) well below this.
pub const FRAME_MAX: usize = 64 * 1024 * 1024;

/// The bytes of a frame before its payload: len, kind, crc.
pub const HEADER_LEN: usize = 9;

/// The bytes `len` counts besides the payload: kind and crc.
const LEN_OVERHEAD: usize = 5;

/// What a frame holds: one kind per request and per reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// openraft's `VoteRequest`.
    Vote = 0x01,
    /// openraft's `AppendEntriesRequest`.
    AppendEntries = 0x02,
    /// openraft's `InstallSnapshotRequest` (one chunk).
    InstallSnapshot = 0x03,
    /// A [`crate::control::ControlRequest`].
    Control = 0x04,
    /// The answer to a `Vote`.
    VoteReply = 0x81,
    /// The answer to an `AppendEntries`.
    AppendEntriesReply = 0x82,
    /// The answer to an `InstallSnapshot`.
    InstallSnapshotReply = 0x83,
    /// The answer to a `Control`.
    ControlReply = 0x84,
    /// The request was refused before it was handled (wrong directory).
    Refused = 0xFF,
}

impl Kind {
    /// The kind of this byte, if it is one.
    pub fn from_u8(b: u8) -> Option<Kind> {
        Some(match b {
            0x01 => Kind::Vote,
            0x02 => Kind::AppendEntries,
            0x03 => Kind::InstallSnapshot,
            0x04 => Kind::Control,
            0x81 => Kind::VoteReply,
            0x82 => Kind::AppendEntriesReply,
            0x83 => Kind::InstallSnapshotReply,
            0x84 => Kind::ControlReply,
            0xFF => Kind::Refused,
            _ => return None,
        })
    }
}

/// Why a frame could not be read or written. Every one of these ends the
/// connection it happened on.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("frame length {0} is over the maximum {FRAME_MAX}")]
    TooLarge(usize),
    #[error("frame length {0} is shorter than kind and crc")]
    TooShort(u32),
    #[error("unknown frame kind {0:#04x}")]
    UnknownKind(u8),
    #[error("payload crc32c {actual:#010x} is not the frame's {expected:#010x}")]
    BadCrc { expected: u32, actual: u32 },
    #[error("payload of a {kind:?} frame does not decode: {source}")]
    Decode {
        kind: Kind,
        source: serde_json::Error,
    },
    #[error("a {kind:?} frame does not encode: {source}")]
    Encode {
        kind: Kind,
        source: serde_json::Error,
    },
    #[error("a {0:?} frame was not expected here")]
    UnexpectedKind(Kind),
}

/// Encodes `value` as JSON into a whole frame of `kind`, ready to write.
pub fn encode<T: serde::Serialize + ?Sized>(kind: Kind, value: &T) -> Result<Vec<u8>, FrameError> {
    let mut buf = vec![0u8; HEADER_LEN];
    serde_json::to_writer(&mut buf, value).map_err(|source| FrameError::Encode { kind, source })?;
    let len = buf.len() - HEADER_LEN + LEN_OVERHEAD;
    if len > FRAME_MAX {
        return Err(FrameError::TooLarge(len));
    }
    let crc = crc32c::crc32c(&buf[HEADER_LEN..]);
    // len <= FRAME_MAX < u32::MAX, checked above.
    buf[0..4].copy_from_slice(&(len as u32).to_be_bytes());
    buf[4] = kind as u8;
    buf[5..9].copy_from_slice(&crc.to_be_bytes());
    Ok(buf)
}

/// Decodes a payload read by [`read_frame`] as JSON.
pub fn decode<T: serde::de::DeserializeOwned>(kind: Kind, payload: &[u8]) -> Result<T, FrameError> {
    serde_json::from_slice(payload).map_err(|source| FrameError::Decode { kind, source })
}

/// Writes a frame made by [`encode`] and flushes it.
pub async fn write_frame<W: AsyncWrite + Unpin>(w: &mut W, frame: &[u8]) -> Result<(), FrameError> {
    w.write_all(frame).await?;
    w.flush().await?;
    Ok(())
}

/// Reads one frame: its kind and its payload, the CRC checked. `Ok(None)` is
/// a clean end of stream before the first byte of a frame. The length is
/// checked against [`FRAME_MAX`] and the kind against [`Kind`] before the
/// payload is read, and the payload buffer grows only as bytes arrive, so a
/// peer that declares a large frame and sends little holds little memory.
pub async fn read_frame<R: AsyncRead + Unpin>(
    r: &mut R,
) -> Result<Option<(Kind, Vec<u8>)>, FrameError> {
    let mut len_buf = [0u8; 4];
    let first = r.read(&mut len_buf).await?;
    if first == 0 {
        return Ok(None);
    }
    r.read_exact(&mut len_buf[first..]).await?;
    let len = u32::from_be_bytes(len_buf);
    let len_usize = usize::try_from(len).map_err(|_| FrameError::TooLarge(usize::MAX))?;
    if len_usize > FRAME_MAX {
        return Err(FrameError::TooLarge(len_usize));
    }
    if len_usize < LEN_OVERHEAD {
        return Err(FrameError::TooShort(len));
    }
    let mut head = [0u8; LEN_OVERHEAD];
    r.read_exact(&mut head).await?;
    let kind = Kind::from_u8(head[0]).ok_or(FrameError::UnknownKind(head[0]))?;
    let expected = u32::from_be_bytes([head[1], head[2], head[3], head[4]]);
    let want = len_usize - LEN_OVERHEAD;
    let mut payload = Vec::with_capacity(want.min(64 * 1024));
    let got = (&mut *r)
        .take(want as u64)
        .read_to_end(&mut payload)
        .await?;
    if got != want {
        return Err(FrameError::Io(std::io::ErrorKind::UnexpectedEof.into()));
    }
    let actual = crc32c::crc32c(&payload);
    if actual != expected {
        return Err(FrameError::BadCrc { expected, actual });
    }
    Ok(Some((kind, payload)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn round_trip_and_rejects() {
        let frame = encode(Kind::Control, &vec![1u32, 2, 3]).expect("encode");
        let mut r = &frame[..];
        let (kind, payload) = read_frame(&mut r).await.expect("read").expect("frame");
        assert_eq!(kind, Kind::Control);
        let v: Vec<u32> = decode(kind, &payload).expect("decode");
        assert_eq!(v, vec![1, 2, 3]);
        assert!(read_frame(&mut r).await.expect("eof").is_none());

        let mut bad = frame.clone();
        let last = bad.len() - 1;
        bad[last] ^= 0xFF;
        assert!(matches!(
            read_frame(&mut &bad[..]).await,
            Err(FrameError::BadCrc { .. })
        ));

        let mut unknown = frame.clone();
        unknown[4] = 0x42;
        assert!(matches!(
            read_frame(&mut &unknown[..]).await,
            Err(FrameError::UnknownKind(0x42))
        ));

        let huge = [0xFF, 0xFF, 0xFF, 0xF0, 1];
        assert!(matches!(
            read_frame(&mut &huge[..]).await,
            Err(FrameError::TooLarge(_))
        ));

        let short = [0, 0, 0, 2, 1, 0];
        assert!(matches!(
            read_frame(&mut &short[..]).await,
            Err(FrameError::TooShort(2))
        ));

        let truncated = &frame[..frame.len() - 1];
        assert!(matches!(
            read_frame(&mut &truncated[..]).await,
            Err(FrameError::Io(_))
        ));
    }
}
