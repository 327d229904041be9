//! The record-batch compression codecs (attributes bits 0-2), in the framings
//! Kafka clients use on the wire:
//!
//! - gzip: a gzip stream (several members are accepted, like Java's
//!   `GZIPInputStream`); written as one member at level 1.
//! - snappy: Java's xerial framing (`\x82SNAPPY\0`, version i32, compat i32,
//!   then blocks of `[len i32][raw snappy]`, 32 KiB of input per block), or a
//!   bare raw snappy block, which librdkafka may send; we write xerial.
//! - lz4: the LZ4 frame format with 64 KiB independent blocks and no content
//!   size, the subset Java's `KafkaLZ4BlockInputStream` reads.
//! - zstd: a zstd frame (or several); written at level 1.
//!
//! Fetch re-compresses on every read, so the writer favours speed (gzip and
//! zstd at level 1) over ratio.
//!
//! Invariant: decompression never produces more than the caller's `limit`
//! bytes. Streaming codecs read through `take(limit + 1)` into a reused scratch
//! buffer that grows with what actually arrives; snappy checks each block's
//! announced length before allocating for it. A zip bomb costs at most
//! `limit` bytes of memory and is reported as [`DecompressError::TooLarge`].
//! What the codec libraries allocate for themselves is bounded too: a zstd
//! frame may not declare a window larger than the limit needs (libzstd
//! would otherwise reserve up to 128 MiB for it), and an lz4 batch must
//! start with a frame of the standard format, the one Java's reader takes:
//! the legacy format's 8 MiB blocks (and skippable frames) are refused
//! before decoding.

use std::io::{Read, Write};

/// A batch's compression codec.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Compression {
    #[default]
    None = 0,
    Gzip = 1,
    Snappy = 2,
    Lz4 = 3,
    Zstd = 4,
}

/// The low three bits of a batch's attributes.
pub const COMPRESSION_ATTR_MASK: i16 = 0x07;

impl Compression {
    pub const ALL: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    /// The codec with Kafka's id (0-4); `None` for 5-7 and anything else.
    pub fn from_id(id: i16) -> Option<Compression> {
        Some(match id {
            0 => Compression::None,
            1 => Compression::Gzip,
            2 => Compression::Snappy,
            3 => Compression::Lz4,
            4 => Compression::Zstd,
            _ => return None,
        })
    }

    /// Kafka's id, as stored in attributes bits 0-2.
    pub fn id(self) -> i16 {
        self as i16
    }

    /// The name used by Kafka's `compression.type` configs.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

/// Why compressed bytes could not be expanded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecompressError {
    /// The data expands beyond the limit.
    TooLarge,
    /// The data is not a valid stream of this codec.
    Malformed(&'static str),
}

/// Xerial snappy stream header: magic, version 1, compatible version 1.
pub const XERIAL_HEADER: [u8; 16] = *b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01";
const XERIAL_MAGIC_BYTES: usize = 8;
/// Input bytes per xerial block, as Java's `SnappyOutputStream` writes.
const XERIAL_BLOCK_BYTES: usize = 32 * 1024;
const GZIP_LEVEL: u32 = 1;
const ZSTD_LEVEL: i32 = 1;

/// Expands `input` (compressed with `codec`, which is not `None`) into
/// `out`, which is cleared first and reused across calls.
pub fn decompress(
    codec: Compression,
    input: &[u8],
    limit: usize,
    out: &mut Vec<u8>,
) -> Result<(), DecompressError> {
    out.clear();
    match codec {
        Compression::None => {
            if input.len() > limit {
                return Err(DecompressError::TooLarge);
            }
            out.extend_from_slice(input);
            Ok(())
        }
        Compression::Gzip => read_bounded(
            flate2::read::MultiGzDecoder::new(input),
            limit,
            out,
            "malformed gzip data",
        ),
        Compression::Snappy => snappy_decompress(input, limit, out),
        Compression::Lz4 => {
            lz4_standard_frames(input, limit)?;
            read_bounded(
                lz4_flex::frame::FrameDecoder::new(input),
                limit,
                out,
                "malformed lz4 frame",
            )
        }
        Compression::Zstd => {
            let mut dec = zstd::stream::read::Decoder::with_buffer(input)
                .map_err(|_| DecompressError::Malformed("zstd decoder unavailable"))?;
            dec.window_log_max(zstd_window_log_max(limit))
                .map_err(|_| DecompressError::Malformed("zstd decoder unavailable"))?;
            read_bounded(dec, limit, out, "malformed zstd data")
        }
    }
}

/// The largest zstd window (log2) a frame may declare when at most `limit`
/// bytes are wanted: enough for a window as large as the limit (a frame
/// compressed in one go declares at most its content's size), never below
/// libzstd's 8 MiB default for streaming decoders nor above its 128 MiB.
fn zstd_window_log_max(limit: usize) -> u32 {
    let need = usize::BITS - limit.saturating_sub(1).leading_zeros();
    need.clamp(23, 27)
}

/// The standard LZ4 frame's magic number.
const LZ4_FRAME_MAGIC: u32 = 0x184D_2204;

/// An lz4 batch must start with a standard frame, the one frame Java's
/// `KafkaLZ4BlockInputStream` reads (and lz4_flex's decoder, which stops at
/// the end of the first frame too), whose blocks are no larger than the
/// records may be (or 64 KiB, what clients write). A legacy frame (magic
/// 0x184C2102) would make the decoder allocate two 8 MiB block buffers
/// whatever the limit, a frame declaring 4 MiB blocks two of 4 MiB; a
/// skippable frame is nothing a Kafka client writes.
fn lz4_standard_frames(input: &[u8], limit: usize) -> Result<(), DecompressError> {
    let Some(magic) = input.get(..4) else {
        return Ok(());
    };
    if magic != LZ4_FRAME_MAGIC.to_le_bytes() {
        return Err(DecompressError::Malformed(
            "lz4 data that is not a standard LZ4 frame",
        ));
    }
    // BD: the block maximum size in bits 4-6 (4: 64 KiB ... 7: 4 MiB).
    if let Some(bd) = input.get(5) {
        let block = 1usize << (8 + 2 * ((bd >> 4) & 0x7));
        if block > limit.max(64 * 1024) {
            return Err(DecompressError::Malformed(
                "lz4 blocks larger than the records may be",
            ));
        }
    }
    Ok(())
}

fn read_bounded<R: Read>(
    r: R,
    limit: usize,
    out: &mut Vec<u8>,
    why: &'static str,
) -> Result<(), DecompressError> {
    let cap = (limit as u64).saturating_add(1);
    match r.take(cap).read_to_end(out) {
        Ok(n) if n > limit => Err(DecompressError::TooLarge),
        Ok(_) => Ok(()),
        Err(_) => Err(DecompressError::Malformed(why)),
    }
}

fn snappy_decompress(input: &[u8], limit: usize, out: &mut Vec<u8>) -> Result<(), DecompressError> {
    let mut dec = snap::raw::Decoder::new();
    if input.len() < XERIAL_HEADER.len()
        || input[..XERIAL_MAGIC_BYTES] != XERIAL_HEADER[..XERIAL_MAGIC_BYTES]
    {
        // Raw snappy, as Java's SnappyInputStream falls back to.
        return snappy_block(&mut dec, input, limit, out);
    }
    let mut rest = &input[XERIAL_HEADER.len()..];
    while !rest.is_empty() {
        // A concatenated xerial stream repeats the header; Java skips it.
        if rest.len() >= XERIAL_HEADER.len()
            && rest[..XERIAL_MAGIC_BYTES] == XERIAL_HEADER[..XERIAL_MAGIC_BYTES]
        {
            rest = &rest[XERIAL_HEADER.len()..];
            continue;
        }
        let Some(len) = rest.get(..4) else {
            return Err(DecompressError::Malformed("truncated xerial block length"));
        };
        let len = i32::from_be_bytes([len[0], len[1], len[2], len[3]]);
        let block = usize::try_from(len)
            .ok()
            .and_then(|n| rest.get(4..4usize.checked_add(n)?))
            .ok_or(DecompressError::Malformed(
                "xerial block longer than the data",
            ))?;
        snappy_block(&mut dec, block, limit, out)?;
        rest = &rest[4 + block.len()..];
    }
    Ok(())
}

/// Appends one raw snappy block to `out`, keeping `out` within `limit`.
fn snappy_block(
    dec: &mut snap::raw::Decoder,
    block: &[u8],
    limit: usize,
    out: &mut Vec<u8>,
) -> Result<(), DecompressError> {
    let n = snap::raw::decompress_len(block)
        .map_err(|_| DecompressError::Malformed("malformed snappy block"))?;
    let start = out.len();
    if n > limit - start {
        return Err(DecompressError::TooLarge);
    }
    out.resize(start + n, 0);
    match dec.decompress(block, &mut out[start..]) {
        Ok(written) if written == n => Ok(()),
        _ => Err(DecompressError::Malformed("malformed snappy block")),
    }
}

/// Reusable compression state for the fetch path.
#[derive(Default)]
pub struct Compressor {
    snappy: Option<snap::raw::Encoder>,
    gzip: Option<flate2::Compress>,
    zstd: Option<zstd::bulk::Compressor<'static>>,
}

impl std::fmt::Debug for Compressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compressor").finish_non_exhaustive()
    }
}

impl Compressor {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends `input` compressed with `codec` to `out`.
    pub fn compress(
        &mut self,
        codec: Compression,
        input: &[u8],
        out: &mut Vec<u8>,
    ) -> std::io::Result<()> {
        match codec {
            Compression::None => {
                out.extend_from_slice(input);
                Ok(())
            }
            Compression::Gzip => self.gzip(input, out),
            Compression::Snappy => self.snappy(input, out),
            Compression::Lz4 => {
                let info = lz4_flex::frame::FrameInfo::new()
                    .block_size(lz4_flex::frame::BlockSize::Max64KB)
                    .block_mode(lz4_flex::frame::BlockMode::Independent);
                let mut enc = lz4_flex::frame::FrameEncoder::with_frame_info(info, out);
                enc.write_all(input)?;
                enc.finish().map_err(std::io::Error::other)?;
                Ok(())
            }
            Compression::Zstd => {
                let z = match &mut self.zstd {
                    Some(z) => z,
                    None => self.zstd.insert(zstd::bulk::Compressor::new(ZSTD_LEVEL)?),
                };
                let start = out.len();
                out.reserve(zstd::zstd_safe::compress_bound(input.len()));
                let mut cursor = std::io::Cursor::new(&mut *out);
                cursor.set_position(start as u64);
                z.compress_to_buffer(input, &mut cursor)?;
                Ok(())
            }
        }
    }

    fn snappy(&mut self, input: &[u8], out: &mut Vec<u8>) -> std::io::Result<()> {
        let enc = self.snappy.get_or_insert_with(snap::raw::Encoder::new);
        out.extend_from_slice(&XERIAL_HEADER);
        for chunk in input.chunks(XERIAL_BLOCK_BYTES) {
            let len_pos = out.len();
            let max = snap::raw::max_compress_len(chunk.len());
            out.resize(len_pos + 4 + max, 0);
            let n = enc
                .compress(chunk, &mut out[len_pos + 4..])
                .map_err(std::io::Error::other)?;
            out.truncate(len_pos + 4 + n);
            out[len_pos..len_pos + 4].copy_from_slice(&(n as u32).to_be_bytes());
        }
        Ok(())
    }

    /// One gzip member: a fixed 10-byte header, raw deflate from a reused
    /// `Compress`, then CRC-32 and size (little-endian) as RFC 1952 says.
    fn gzip(&mut self, input: &[u8], out: &mut Vec<u8>) -> std::io::Result<()> {
        const HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
        let c = self.gzip.get_or_insert_with(|| {
            flate2::Compress::new(flate2::Compression::new(GZIP_LEVEL), false)
        });
        c.reset();
        out.extend_from_slice(&HEADER);
        let in_start = c.total_in();
        loop {
            let consumed = (c.total_in() - in_start) as usize;
            out.reserve(input.len() - consumed + 64);
            let status = c
                .compress_vec(&input[consumed..], out, flate2::FlushCompress::Finish)
                .map_err(std::io::Error::other)?;
            if status == flate2::Status::StreamEnd {
                break;
            }
        }
        let mut crc = flate2::Crc::new();
        crc.update(input);
        out.extend_from_slice(&crc.sum().to_le_bytes());
        out.extend_from_slice(&(input.len() as u32).to_le_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        (0..200_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect()
    }

    #[test]
    fn every_codec_round_trips() {
        let mut c = Compressor::new();
        for data in [Vec::new(), b"x".to_vec(), sample()] {
            for codec in Compression::ALL {
                let mut z = Vec::new();
                // Appends, leaving what was there.
                z.extend_from_slice(b"pre");
                c.compress(codec, &data, &mut z).expect("compresses");
                assert_eq!(&z[..3], b"pre");
                let mut out = vec![1, 2, 3];
                decompress(codec, &z[3..], data.len(), &mut out).expect("decompresses");
                assert_eq!(out, data, "{codec:?}");
                if !data.is_empty() {
                    assert_eq!(
                        decompress(codec, &z[3..], data.len() - 1, &mut out),
                        Err(DecompressError::TooLarge),
                        "{codec:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn lz4_legacy_and_skippable_frames_are_refused_before_decoding() {
        let mut c = Compressor::new();
        let mut z = Vec::new();
        c.compress(Compression::Lz4, &sample(), &mut z)
            .expect("compresses");
        let mut out = Vec::new();
        // The first frame is the batch's records, as Java reads them; what
        // follows it is not decoded.
        for rest in [z.clone(), 0x184C_2102u32.to_le_bytes().to_vec()] {
            let stream = [z.clone(), rest, vec![0u8; 16]].concat();
            decompress(Compression::Lz4, &stream, 1 << 20, &mut out).expect("first frame");
            assert!(out == sample(), "the first frame's records");
        }
        // A frame declaring 4 MiB blocks (BD 0x70) for a 1 MiB limit.
        let mut big_blocks = z.clone();
        big_blocks[5] = 0x70;
        assert_eq!(
            decompress(Compression::Lz4, &big_blocks, 1 << 20, &mut out),
            Err(DecompressError::Malformed(
                "lz4 blocks larger than the records may be"
            ))
        );
        for magic in [0x184C_2102u32, 0x184D_2A50] {
            let stream = [&magic.to_le_bytes()[..], &[0u8; 16]].concat();
            assert_eq!(
                decompress(Compression::Lz4, &stream, 1 << 20, &mut out),
                Err(DecompressError::Malformed(
                    "lz4 data that is not a standard LZ4 frame"
                )),
                "magic {magic:#x}"
            );
        }
    }

    /// A zstd frame declaring a 128 MiB window (libzstd's largest default)
    /// for a 1 MiB limit is refused instead of reserving the window.
    #[test]
    fn a_zstd_window_larger_than_the_limit_needs_is_refused() {
        assert_eq!(zstd_window_log_max(1 << 20), 23);
        assert_eq!(zstd_window_log_max(16 << 20), 24);
        assert_eq!(zstd_window_log_max((16 << 20) + 1), 25);
        assert_eq!(zstd_window_log_max(usize::MAX), 27);
        // Frame header: magic, descriptor (no content size), window
        // descriptor 2^27, then one last RLE block of 16 bytes.
        let frame = [
            0x28,
            0xb5,
            0x2f,
            0xfd,
            0x00,
            (27 - 10) << 3,
            0x83,
            0x00,
            0x00,
            0x00,
        ];
        let mut out = Vec::new();
        assert!(matches!(
            decompress(Compression::Zstd, &frame, 1 << 20, &mut out),
            Err(DecompressError::Malformed(_))
        ));
        // The same frame with an 8 MiB window decodes.
        let mut small = frame;
        small[5] = (23 - 10) << 3;
        decompress(Compression::Zstd, &small, 1 << 20, &mut out).expect("decodes");
        assert_eq!(out, vec![0u8; 16]);
    }

    #[test]
    fn zip_bomb_is_bounded() {
        let zeros = vec![0u8; 8 << 20];
        let mut c = Compressor::new();
        for codec in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let mut z = Vec::new();
            c.compress(codec, &zeros, &mut z).expect("compresses");
            let mut out = Vec::new();
            assert_eq!(
                decompress(codec, &z, 1 << 20, &mut out),
                Err(DecompressError::TooLarge)
            );
            assert!(
                out.capacity() <= 4 << 20,
                "{codec:?} grew to {}",
                out.capacity()
            );
        }
    }

    #[test]
    fn raw_snappy_and_foreign_streams() {
        let data = sample();
        let raw = snap::raw::Encoder::new()
            .compress_vec(&data)
            .expect("snappy");
        let mut out = Vec::new();
        decompress(Compression::Snappy, &raw, data.len(), &mut out).expect("raw snappy");
        assert_eq!(out, data);

        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&data[..1000]).expect("write");
        let mut two = gz.finish().expect("gzip");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&data[1000..]).expect("write");
        two.extend(gz.finish().expect("gzip"));
        decompress(Compression::Gzip, &two, data.len(), &mut out).expect("two gzip members");
        assert_eq!(out, data);

        let z = zstd::stream::encode_all(&data[..], 3).expect("zstd");
        decompress(Compression::Zstd, &z, data.len(), &mut out).expect("zstd stream");
        assert_eq!(out, data);
    }

    #[test]
    fn garbage_is_malformed() {
        let mut out = Vec::new();
        for codec in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            assert!(
                matches!(
                    decompress(codec, b"\xffnot compressed data at all", 1 << 20, &mut out),
                    Err(DecompressError::Malformed(_))
                ),
                "{codec:?}"
            );
        }
        let mut bad = XERIAL_HEADER.to_vec();
        bad.extend_from_slice(&100i32.to_be_bytes());
        bad.extend_from_slice(b"short");
        assert!(matches!(
            decompress(Compression::Snappy, &bad, 1 << 20, &mut out),
            Err(DecompressError::Malformed(_))
        ));
    }
}
