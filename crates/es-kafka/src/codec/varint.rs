//! Kafka's zigzag varints (`varint` = sint32, `varlong` = sint64), as used
//! inside RecordBatch v2 records.
//!
//! Reading follows Java's `ByteUtils.readVarint`/`readVarlong`: at most 5
//! (resp. 10) bytes, bits beyond 32 (64) silently dropped, a longer encoding
//! is an error. Writing appends straight to a `Vec<u8>` without allocating
//! beyond its growth, or gathers a few varints on the stack first
//! ([`Varints`]); `varint_len`/`varlong_len` give the exact encoded size so
//! callers can compute a record's length before writing it.

/// Longest encoding of a varint (sint32).
pub const VARINT_BYTES_MAX: usize = 5;
/// Longest encoding of a varlong (sint64).
pub const VARLONG_BYTES_MAX: usize = 10;

#[inline]
fn zigzag32(v: i32) -> u32 {
    ((v << 1) ^ (v >> 31)) as u32
}

#[inline]
fn zigzag64(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Bytes of an unsigned varint whose value has `bits` significant bits
/// (1..=64): one per 7 bits, rounded up. `(bits * 9 + 64) / 64` equals
/// `ceil(bits / 7)` over that range, without a division; the encoder sizes
/// several varints per record with it.
#[inline]
fn uvarint_len_of_bits(bits: u32) -> usize {
    ((bits * 9 + 64) >> 6) as usize
}

/// Encoded size of `v` as a zigzag varint.
#[inline]
pub fn varint_len(v: i32) -> usize {
    uvarint_len_of_bits(32 - (zigzag32(v) | 1).leading_zeros())
}

/// Encoded size of `v` as a zigzag varlong.
#[inline]
pub fn varlong_len(v: i64) -> usize {
    uvarint_len_of_bits(64 - (zigzag64(v) | 1).leading_zeros())
}

/// Appends `v` as a zigzag varint.
#[inline]
pub fn put_varint(out: &mut Vec<u8>, v: i32) {
    put_uvarint(out, zigzag32(v));
}

/// Appends `z` as an unsigned varint (the protocol's compact lengths).
#[inline]
pub fn put_uvarint(out: &mut Vec<u8>, z: u32) {
    put_unsigned(out, u64::from(z));
}

/// Appends `v` as a zigzag varlong.
#[inline]
pub fn put_varlong(out: &mut Vec<u8>, v: i64) {
    put_unsigned(out, zigzag64(v));
}

/// One byte pushed, or the encoding [`Varints`] writes.
#[inline]
fn put_unsigned(out: &mut Vec<u8>, z: u64) {
    if z < 0x80 {
        out.push(z as u8);
        return;
    }
    let mut v = Varints::new();
    v.uvarint(z);
    out.extend_from_slice(v.as_slice());
}

/// Bytes [`Varints`] holds: enough for a record's length, attributes,
/// timestamp delta, offset delta and two field lengths (5 + 1 + 10 + 5 + 5 + 5).
const VARINTS_BYTES: usize = 32;

/// A few varints gathered on the stack, so that they reach an output buffer
/// in one copy instead of a push (and a capacity check) per byte. The
/// encoder writes each record's fields before its key and value with it.
pub struct Varints {
    buf: [u8; VARINTS_BYTES],
    len: usize,
}

impl Varints {
    pub fn new() -> Self {
        Varints {
            buf: [0; VARINTS_BYTES],
            len: 0,
        }
    }

    /// Appends one byte. Callers stay within the 32 bytes it holds by
    /// construction; a byte past it would be dropped, never written out of
    /// bounds.
    #[inline]
    pub fn byte(&mut self, b: u8) {
        debug_assert!(self.len < VARINTS_BYTES);
        if let Some(slot) = self.buf.get_mut(self.len) {
            *slot = b;
            self.len += 1;
        }
    }

    /// Appends `z` as an unsigned varint. One and two bytes (nearly every
    /// length and delta in a record) take no loop; the bounds on `n` make
    /// every index provably in range.
    #[inline]
    fn uvarint(&mut self, mut z: u64) {
        let mut n = self.len;
        if z < 0x80 && n < VARINTS_BYTES {
            self.buf[n] = z as u8;
            self.len = n + 1;
            return;
        }
        if z < 0x4000 && n + 1 < VARINTS_BYTES {
            self.buf[n] = (z as u8) | 0x80;
            self.buf[n + 1] = (z >> 7) as u8;
            self.len = n + 2;
            return;
        }
        while z >= 0x80 && n < VARINTS_BYTES {
            self.buf[n] = (z as u8) | 0x80;
            z >>= 7;
            n += 1;
        }
        debug_assert!(n < VARINTS_BYTES);
        if n < VARINTS_BYTES {
            self.buf[n] = z as u8;
            n += 1;
        }
        self.len = n;
    }

    /// Appends `v` as a zigzag varint.
    #[inline]
    pub fn varint(&mut self, v: i32) {
        self.uvarint(u64::from(zigzag32(v)));
    }

    /// Appends `v` as a zigzag varlong.
    #[inline]
    pub fn varlong(&mut self, v: i64) {
        self.uvarint(zigzag64(v));
    }

    /// The bytes appended since the last [`Varints::clear`].
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or_default()
    }

    #[inline]
    pub fn clear(&mut self) {
        self.len = 0;
    }
}

impl Default for Varints {
    fn default() -> Self {
        Self::new()
    }
}

/// Reads a zigzag varint from the front of `buf`, returning it and the bytes
/// used; `None` if the buffer ends first or the encoding is longer than 5 bytes.
#[inline]
pub fn read_varint(buf: &[u8]) -> Option<(i32, usize)> {
    let first = *buf.first()?;
    if first < 0x80 {
        return Some((unzigzag32(first as u32), 1));
    }
    let mut raw = 0u32;
    for i in 0..VARINT_BYTES_MAX {
        let b = *buf.get(i)?;
        // At i == 4 the shift is 28: the top 3 payload bits fall off, as in Java.
        raw |= ((b & 0x7f) as u32) << (7 * i);
        if b < 0x80 {
            return Some((unzigzag32(raw), i + 1));
        }
    }
    None
}

/// Reads a zigzag varlong from the front of `buf`; see [`read_varint`].
#[inline]
pub fn read_varlong(buf: &[u8]) -> Option<(i64, usize)> {
    let first = *buf.first()?;
    if first < 0x80 {
        return Some((unzigzag64(first as u64), 1));
    }
    let mut raw = 0u64;
    for i in 0..VARLONG_BYTES_MAX {
        let b = *buf.get(i)?;
        raw |= ((b & 0x7f) as u64) << (7 * i);
        if b < 0x80 {
            return Some((unzigzag64(raw), i + 1));
        }
    }
    None
}

#[inline]
fn unzigzag32(z: u32) -> i32 {
    ((z >> 1) as i32) ^ -((z & 1) as i32)
}

#[inline]
fn unzigzag64(z: u64) -> i64 {
    ((z >> 1) as i64) ^ -((z & 1) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_encodings() {
        // From Kafka's ByteUtilsTest.
        let cases: &[(i32, &[u8])] = &[
            (0, &[0x00]),
            (-1, &[0x01]),
            (1, &[0x02]),
            (63, &[0x7e]),
            (-64, &[0x7f]),
            (64, &[0x80, 0x01]),
            (i32::MAX, &[0xfe, 0xff, 0xff, 0xff, 0x0f]),
            (i32::MIN, &[0xff, 0xff, 0xff, 0xff, 0x0f]),
        ];
        for &(v, enc) in cases {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            assert_eq!(out, enc, "{v}");
            assert_eq!(varint_len(v), enc.len());
            assert_eq!(read_varint(enc), Some((v, enc.len())));
        }
    }

    #[test]
    fn lengths_match_the_encoding_at_every_boundary() {
        for bits in 1..=64u32 {
            assert_eq!(
                uvarint_len_of_bits(bits),
                bits.div_ceil(7) as usize,
                "{bits} bits"
            );
        }
        // Zigzag values 2^k - 1 and 2^k, whose encodings differ in length at
        // every multiple of 7 bits.
        for k in 0..64u32 {
            for z in [(1u64 << k) - 1, 1u64 << k] {
                let v = ((z >> 1) as i64) ^ -((z & 1) as i64);
                let mut out = Vec::new();
                put_varlong(&mut out, v);
                assert_eq!(varlong_len(v), out.len(), "zigzag {z}");
                if let Ok(v) = i32::try_from(v) {
                    out.clear();
                    put_varint(&mut out, v);
                    assert_eq!(varint_len(v), out.len(), "zigzag {z}");
                }
            }
        }
    }

    #[test]
    fn overlong_and_truncated_are_rejected() {
        assert_eq!(read_varint(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x01]), None);
        assert_eq!(read_varint(&[0x80, 0x80]), None);
        assert_eq!(read_varint(&[]), None);
        assert_eq!(read_varlong(&[0xff; 11]), None);
        assert_eq!(read_varlong(&[0x80]), None);
    }

    proptest! {
        #[test]
        fn varint_round_trips(v in any::<i32>(), tail in proptest::collection::vec(any::<u8>(), 0..4)) {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            prop_assert_eq!(out.len(), varint_len(v));
            out.extend_from_slice(&tail);
            prop_assert_eq!(read_varint(&out), Some((v, varint_len(v))));
        }

        #[test]
        fn varints_on_the_stack_decode_to_what_was_written(a in any::<i32>(), b in any::<i64>(), c in any::<i32>()) {
            // Checked with the reader, which shares no code with the writer
            // (put_varint and friends write through Varints).
            let mut v = Varints::new();
            v.varint(a);
            v.byte(7);
            v.varlong(b);
            v.varint(c);
            let out = v.as_slice();
            let (ra, n) = read_varint(out).expect("a");
            prop_assert_eq!((ra, n), (a, varint_len(a)));
            prop_assert_eq!(out[n], 7);
            let (rb, m) = read_varlong(&out[n + 1..]).expect("b");
            prop_assert_eq!((rb, m), (b, varlong_len(b)));
            let (rc, k) = read_varint(&out[n + 1 + m..]).expect("c");
            prop_assert_eq!((rc, k), (c, varint_len(c)));
            prop_assert_eq!(out.len(), n + 1 + m + k);
            v.clear();
            prop_assert!(v.as_slice().is_empty());
        }

        #[test]
        fn varlong_round_trips(v in any::<i64>()) {
            let mut out = Vec::new();
            put_varlong(&mut out, v);
            prop_assert_eq!(out.len(), varlong_len(v));
            prop_assert_eq!(read_varlong(&out), Some((v, out.len())));
        }
    }
}
