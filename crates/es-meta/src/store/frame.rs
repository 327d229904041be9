//! The frame of one Raft log entry in a `.raftlog` segment, and reading
//! frames back from untrusted bytes.
//!
//! All integers are big-endian:
//!
//! | bytes | field | meaning |
//! |---|---|---|
//! | 4 | `len` u32 | bytes that follow (index through crc) |
//! | 8 | `index` u64 | the entry's log index |
//! | 8 | `term` u64 | the entry's term |
//! | n | `payload` | serde_json of the `openraft::Entry<MetaTypes>` |
//! | 4 | `crc` u32 | CRC-32C over `index` .. end of `payload` |
//!
//! `len` must be between [`FRAME_LEN_MIN`] and [`FRAME_LEN_MAX`] and fit the
//! file before anything is allocated for the frame.

use std::io;

use es_storage::fs::FileHandle;

use crate::MetaTypes;

/// The entry type stored.
pub type Entry = openraft::Entry<MetaTypes>;

/// Bytes of the `len` field.
pub const LEN_BYTES: u64 = 4;
/// Smallest `len`: index, term, one payload byte, crc.
pub const FRAME_LEN_MIN: u32 = 8 + 8 + 1 + 4;
/// Largest `len` (64 MiB): a metadata entry is far smaller.
pub const FRAME_LEN_MAX: u32 = 64 * 1024 * 1024;

/// Encodes one entry as a frame.
pub fn encode(entry: &Entry) -> io::Result<Vec<u8>> {
    let payload = serde_json::to_vec(entry).map_err(io::Error::other)?;
    let len = 8 + 8 + payload.len() + 4;
    let len32 = u32::try_from(len)
        .ok()
        .filter(|l| *l <= FRAME_LEN_MAX)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("log entry of {len} bytes is over the frame limit"),
            )
        })?;
    let mut out = Vec::with_capacity(4 + len);
    out.extend_from_slice(&len32.to_be_bytes());
    out.extend_from_slice(&entry.log_id.index.to_be_bytes());
    out.extend_from_slice(&entry.log_id.leader_id.term.to_be_bytes());
    out.extend_from_slice(&payload);
    let crc = crc32c::crc32c(&out[4..]);
    out.extend_from_slice(&crc.to_be_bytes());
    Ok(out)
}

/// Why the bytes at a position are not a good frame.
#[derive(Debug)]
pub enum Bad {
    /// Fewer bytes remain than the frame needs (a torn write looks like this).
    Short,
    /// The length field is out of bounds.
    Length(u32),
    /// The checksum does not match.
    Crc,
    /// The checksum matches but the content is wrong: never a torn write.
    Content(String),
}

impl std::fmt::Display for Bad {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Bad::Short => f.write_str("frame cut short by the end of the file"),
            Bad::Length(l) => write!(f, "frame length {l} is out of bounds"),
            Bad::Crc => f.write_str("checksum mismatch"),
            Bad::Content(why) => f.write_str(why),
        }
    }
}

/// Reads exactly `buf.len()` bytes at `pos`; false at the end of the file.
pub fn read_exact_at(file: &dyn FileHandle, buf: &mut [u8], pos: u64) -> io::Result<bool> {
    let mut done = 0;
    while done < buf.len() {
        let n = file.read_at(&mut buf[done..], pos + done as u64)?;
        if n == 0 {
            return Ok(false);
        }
        done += n;
    }
    Ok(true)
}

/// A frame read back: the entry and the frame's total size.
pub struct Decoded {
    pub entry: Entry,
    pub size: u64,
}

/// Reads the frame at `pos` of a file of `file_len` bytes. The outer error
/// is an I/O error; the inner one says why the bytes are not a frame.
pub fn read_frame(
    file: &dyn FileHandle,
    pos: u64,
    file_len: u64,
) -> io::Result<Result<Decoded, Bad>> {
    let Some(body) = read_body(file, pos, file_len)? else {
        return Ok(Err(Bad::Short));
    };
    let body = match body {
        Ok(b) => b,
        Err(bad) => return Ok(Err(bad)),
    };
    Ok(decode_body(&body).map(|entry| Decoded {
        entry,
        size: LEN_BYTES + body.len() as u64,
    }))
}

/// The bytes after `len` of the frame at `pos`, checked for length and crc.
/// `None` when even the length field is cut short.
fn read_body(
    file: &dyn FileHandle,
    pos: u64,
    file_len: u64,
) -> io::Result<Option<Result<Vec<u8>, Bad>>> {
    let mut len_buf = [0u8; 4];
    if pos.saturating_add(LEN_BYTES) > file_len || !read_exact_at(file, &mut len_buf, pos)? {
        return Ok(None);
    }
    let len = u32::from_be_bytes(len_buf);
    if !(FRAME_LEN_MIN..=FRAME_LEN_MAX).contains(&len) {
        return Ok(Some(Err(Bad::Length(len))));
    }
    if pos + LEN_BYTES + u64::from(len) > file_len {
        return Ok(Some(Err(Bad::Short)));
    }
    let mut body = vec![0u8; len as usize];
    if !read_exact_at(file, &mut body, pos + LEN_BYTES)? {
        return Ok(Some(Err(Bad::Short)));
    }
    let (data, crc) = body.split_at(body.len() - 4);
    let mut crc_buf = [0u8; 4];
    crc_buf.copy_from_slice(crc);
    if crc32c::crc32c(data) != u32::from_be_bytes(crc_buf) {
        return Ok(Some(Err(Bad::Crc)));
    }
    Ok(Some(Ok(body)))
}

fn be_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

/// Parses a crc-checked body (index, term, payload, crc).
fn decode_body(body: &[u8]) -> Result<Entry, Bad> {
    let index = be_u64(&body[0..8]);
    let term = be_u64(&body[8..16]);
    let payload = &body[16..body.len() - 4];
    let entry: Entry = serde_json::from_slice(payload)
        .map_err(|e| Bad::Content(format!("entry {index} does not parse: {e}")))?;
    if entry.log_id.index != index || entry.log_id.leader_id.term != term {
        return Err(Bad::Content(format!(
            "frame says index {index} term {term}, its entry says {}",
            entry.log_id
        )));
    }
    Ok(entry)
}

/// Whether an intact frame (length in bounds, crc matching) with an index
/// in `min_index ..= min_index + 1_000_000` starts anywhere in
/// `from .. file_len`. Recovery asks this after a bad frame: if one does,
/// the bad frame is corruption inside the log, not a torn tail.
pub fn intact_frame_after(
    file: &dyn FileHandle,
    from: u64,
    file_len: u64,
    min_index: u64,
) -> io::Result<bool> {
    const CHUNK: u64 = 1 << 20;
    let head = LEN_BYTES + 8;
    let mut chunk_start = from;
    while chunk_start + head <= file_len {
        let chunk_end = (chunk_start + CHUNK + head).min(file_len);
        let mut buf = vec![0u8; (chunk_end - chunk_start) as usize];
        if !read_exact_at(file, &mut buf, chunk_start)? {
            return Ok(false);
        }
        let last = buf.len() as u64 - head;
        for off in 0..=last.min(CHUNK - 1) {
            let o = off as usize;
            let mut lb = [0u8; 4];
            lb.copy_from_slice(&buf[o..o + 4]);
            let len = u32::from_be_bytes(lb);
            let index = be_u64(&buf[o + 4..o + 12]);
            if !(FRAME_LEN_MIN..=FRAME_LEN_MAX).contains(&len)
                || index < min_index
                || index - min_index > 1_000_000
            {
                continue;
            }
            if let Some(Ok(_)) = read_body(file, chunk_start + off, file_len)? {
                return Ok(true);
            }
        }
        chunk_start += CHUNK;
    }
    Ok(false)
}
