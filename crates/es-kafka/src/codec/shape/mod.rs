//! The pre-decode bounds check: every length and count in a request is
//! checked against the bytes that follow it before anything is allocated.
//!
//! The kafka-protocol crate (0.18) sizes a `Vec` from an array count read off
//! the wire before it decodes one element (`Vec::with_capacity(n)`), and a
//! byte string from its length before it checks that the bytes are there, so
//! a 30-byte request claiming four billion topics makes it ask the allocator
//! for hundreds of gigabytes, and the process aborts. Kafka's own generated
//! code refuses such a request ("Tried to allocate a collection of size N,
//! but there are only M bytes remaining") and closes the connection; so do
//! we, before the crate sees the body.
//!
//! [`check_request`] walks a body by the table in `table/` (one file per API family)
//! (generated from Kafka's JSON message specs by `scripts/gen-request-shapes`):
//! fixed-size fields are skipped, strings and byte strings must fit in what
//! remains, and an array of `n` elements must satisfy
//! `n * min_bytes(element) <= remaining`, where `min_bytes` is the smallest
//! encoding of one element at that version (at least one byte). Tagged fields
//! are walked within their declared size. The walk is linear in the body and
//! allocates nothing; after it, what the crate allocates for any array is at
//! most the body's size times (in-memory size / smallest wire size) of its
//! element, a small constant. It checks layout only: nullability, value
//! ranges and meanings stay with the crate and the handlers.
//!
//! Strings that are not valid UTF-8 are the one thing the walk repairs
//! rather than refuses. Kafka reads every string with Java's
//! `new String(bytes, UTF_8)`, which replaces each malformed sequence with
//! U+FFFD and answers the request (a topic named "\u{FFFD}(" is unknown,
//! a group id so named is just a group id); the crate refuses the whole
//! request instead. [`check_frame`] therefore returns a copy of the frame
//! with each such string replaced by its lossy decoding (its length prefix,
//! and the size of any tagged field around it, rewritten), so es answers
//! as Kafka does. Valid requests are never copied.

use std::fmt;

use table::DATA;

mod table;

/// An inclusive version range; empty when `lo > hi`.
#[derive(Clone, Copy, Debug)]
pub struct V(pub i16, pub i16);

impl V {
    pub const fn contains(self, v: i16) -> bool {
        self.0 <= v && v <= self.1
    }
}

/// A field's wire type.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    Bool,
    Int8,
    Int16,
    UInt16,
    Int32,
    UInt32,
    Int64,
    Float64,
    Uuid,
    String,
    Bytes,
    Records,
    Struct(&'static [Field]),
}

/// One field of a message or struct, as the spec declares it.
#[derive(Clone, Copy, Debug)]
pub struct Field {
    pub name: &'static str,
    pub kind: Kind,
    pub array: bool,
    pub versions: V,
    pub nullable: V,
    /// The tag and the versions in which the field is tagged.
    pub tag: Option<(u32, V)>,
}

impl Field {
    fn tagged_at(&self, v: i16) -> bool {
        self.tag.is_some_and(|(_, tv)| tv.contains(v))
    }
}

/// A top-level message: its api key (-1 for embedded data), valid and
/// flexible versions, fields.
#[derive(Clone, Copy, Debug)]
pub struct Message {
    pub name: &'static str,
    pub api_key: i16,
    pub valid: V,
    pub flexible: V,
    pub fields: &'static [Field],
}

/// Why a body cannot be what it claims: a length or count past the bytes
/// that follow it, a negative length Kafka never writes, or a varint longer
/// than five bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShapeError {
    /// The field whose length or count is wrong.
    pub field: &'static str,
    pub problem: Problem,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// A count of `count` elements of at least `element_bytes` each, with
    /// `remaining` bytes left.
    ArrayTooLong {
        count: u64,
        element_bytes: u64,
        remaining: usize,
    },
    /// A length of `length` bytes with `remaining` left.
    TooLong { length: u64, remaining: usize },
    /// A length below -1.
    NegativeLength(i64),
    /// A fixed-size field, a length or a count cut off by the end.
    Truncated,
    /// An unsigned varint longer than five bytes (Kafka's limit).
    BadVarint,
    /// A known tagged field whose value takes `used` of its `declared` bytes.
    TaggedSize { declared: u64, used: usize },
}

impl fmt::Display for ShapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.problem {
            Problem::ArrayTooLong {
                count,
                element_bytes,
                remaining,
            } => write!(
                f,
                "{}: {count} elements of at least {element_bytes} bytes with {remaining} bytes remaining",
                self.field
            ),
            Problem::TooLong { length, remaining } => write!(
                f,
                "{}: length {length} with {remaining} bytes remaining",
                self.field
            ),
            Problem::NegativeLength(n) => write!(f, "{}: negative length {n}", self.field),
            Problem::Truncated => write!(f, "{}: cut off by the end of the request", self.field),
            Problem::BadVarint => write!(f, "{}: varint longer than five bytes", self.field),
            Problem::TaggedSize { declared, used } => write!(
                f,
                "{}: tagged field of {declared} bytes whose value takes {used}",
                self.field
            ),
        }
    }
}

impl std::error::Error for ShapeError {}

/// The request message of `api_key`, if Kafka's specs define one.
pub fn request(api_key: i16) -> Option<&'static Message> {
    table::request(api_key)
}

/// An embedded data message by name (`ConsumerProtocolSubscription`, ...).
pub fn data(name: &str) -> Option<&'static Message> {
    DATA.iter().find(|m| m.name == name)
}

/// Checks a request body (the bytes after the request header) of `api_key`
/// at `version`. Returns how many bytes the body's fields take; an api key
/// without a spec passes unchecked (0), as there is no layout to hold it to.
/// Invalid UTF-8 in a string is not an error here (see [`check_frame`]).
pub fn check_request(api_key: i16, version: i16, body: &[u8]) -> Result<usize, ShapeError> {
    match request(api_key) {
        Some(m) => check(m, version, body),
        None => Ok(0),
    }
}

/// Checks `body` against `message` at `version`; see [`check_request`].
pub fn check(message: &Message, version: i16, body: &[u8]) -> Result<usize, ShapeError> {
    let mut w = Walk::new(body, 0);
    w.message(message, version)?;
    Ok(w.pos)
}

/// Checks a whole request frame (header and body, after the size prefix)
/// of `api_key` at `version`, whose header has `header_version`. `Ok(None)`:
/// the frame is sound as it is. `Ok(Some(copy))`: sound once its strings
/// that are not valid UTF-8 are replaced by their lossy decoding, as Kafka
/// reads them; decode the copy instead.
pub fn check_frame(
    frame: &[u8],
    api_key: i16,
    version: i16,
    header_version: i16,
) -> Result<Option<Vec<u8>>, ShapeError> {
    let mut w = Walk::new(frame, 0);
    w.take(REQUEST_HEADER_PREFIX_BYTES, "request header")?;
    // client_id is a nullable string with an int16 length in every header
    // version (KIP-482 kept it so, for ApiVersions' sake).
    w.string(false, "client_id")?;
    if header_version >= 2 {
        w.tagged(&[], version)?;
    }
    if let Some(m) = request(api_key) {
        w.message(m, version)?;
    }
    Ok(w.repaired())
}

/// api_key i16 + api_version i16 + correlation_id i32.
const REQUEST_HEADER_PREFIX_BYTES: usize = super::frame::REQUEST_HEADER_PREFIX_BYTES;

/// A replacement of `frame[start..end]` by `bytes`.
#[derive(Debug)]
struct Patch {
    start: usize,
    end: usize,
    bytes: Vec<u8>,
}

impl Patch {
    fn growth(&self) -> i64 {
        self.bytes.len() as i64 - (self.end - self.start) as i64
    }
}

/// A walk over `buf`, whose first byte is at `base` in the whole frame;
/// the patches (absolute positions) that repair its strings.
struct Walk<'a> {
    buf: &'a [u8],
    base: usize,
    pos: usize,
    patches: Vec<Patch>,
}

impl<'a> Walk<'a> {
    fn new(buf: &'a [u8], base: usize) -> Self {
        Walk {
            buf,
            base,
            pos: 0,
            patches: Vec::new(),
        }
    }

    /// The frame with every patch applied, if there is any.
    fn repaired(mut self) -> Option<Vec<u8>> {
        if self.patches.is_empty() {
            return None;
        }
        self.patches.sort_by_key(|p| p.start);
        let growth: i64 = self.patches.iter().map(Patch::growth).sum();
        let mut out = Vec::with_capacity((self.buf.len() as i64 + growth.max(0)) as usize);
        let mut at = 0;
        for p in &self.patches {
            out.extend_from_slice(&self.buf[at..p.start]);
            out.extend_from_slice(&p.bytes);
            at = p.end;
        }
        out.extend_from_slice(&self.buf[at..]);
        Some(out)
    }

    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], ShapeError> {
        if n > self.remaining() {
            return Err(err(field, Problem::Truncated));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn int(&mut self, n: usize, field: &'static str) -> Result<i64, ShapeError> {
        let b = self.take(n, field)?;
        Ok(match n {
            2 => i64::from(i16::from_be_bytes([b[0], b[1]])),
            _ => i64::from(i32::from_be_bytes([b[0], b[1], b[2], b[3]])),
        })
    }

    /// Kafka's unsigned varint: at most five bytes.
    fn uvarint(&mut self, field: &'static str) -> Result<u64, ShapeError> {
        let mut out = 0u64;
        for i in 0..5 {
            let b = self.take(1, field)?[0];
            out |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(out);
            }
        }
        Err(err(field, Problem::BadVarint))
    }

    /// A length or count: compact (varint + 1, 0 = null) in flexible
    /// versions, else `width` bytes (-1 = null). `None` is null.
    fn length(
        &mut self,
        flexible: bool,
        width: usize,
        field: &'static str,
    ) -> Result<Option<u64>, ShapeError> {
        if flexible {
            Ok(self.uvarint(field)?.checked_sub(1))
        } else {
            match self.int(width, field)? {
                -1 => Ok(None),
                n if n < -1 => Err(err(field, Problem::NegativeLength(n))),
                n => Ok(Some(n.unsigned_abs())),
            }
        }
    }

    fn skip_len(&mut self, len: u64, field: &'static str) -> Result<&'a [u8], ShapeError> {
        let remaining = self.remaining();
        match usize::try_from(len) {
            Ok(n) if n <= remaining => self.take(n, field),
            _ => Err(err(
                field,
                Problem::TooLong {
                    length: len,
                    remaining,
                },
            )),
        }
    }

    /// A string; one that is not UTF-8 gets a patch to its lossy decoding.
    fn string(&mut self, flexible: bool, field: &'static str) -> Result<(), ShapeError> {
        let start = self.pos;
        let Some(len) = self.length(flexible, 2, field)? else {
            return Ok(());
        };
        let raw = self.skip_len(len, field)?;
        if std::str::from_utf8(raw).is_err() {
            let text = String::from_utf8_lossy(raw);
            let mut bytes = Vec::with_capacity(text.len() + 5);
            if flexible {
                put_uvarint(&mut bytes, text.len() as u64 + 1);
            } else {
                // Each malformed byte may become three: past an int16
                // length, the request cannot be answered as Kafka would.
                let n = i16::try_from(text.len()).map_err(|_| {
                    err(
                        field,
                        Problem::TooLong {
                            length: text.len() as u64,
                            remaining: i16::MAX as usize,
                        },
                    )
                })?;
                bytes.extend_from_slice(&n.to_be_bytes());
            }
            bytes.extend_from_slice(text.as_bytes());
            self.patches.push(Patch {
                start: self.base + start,
                end: self.base + self.pos,
                bytes,
            });
        }
        Ok(())
    }

    fn message(&mut self, message: &Message, version: i16) -> Result<(), ShapeError> {
        let flexible = message.flexible.contains(version);
        self.walk_struct(message.fields, version, flexible)
    }

    fn walk_struct(
        &mut self,
        fields: &'static [Field],
        v: i16,
        flexible: bool,
    ) -> Result<(), ShapeError> {
        for f in fields {
            if !f.versions.contains(v) || (flexible && f.tagged_at(v)) {
                continue;
            }
            self.field(f, v, flexible)?;
        }
        if flexible {
            self.tagged(fields, v)?;
        }
        Ok(())
    }

    /// The tagged-field section: a count, then (tag, size, value) each.
    /// Known tags are walked inside their declared size; unknown ones are
    /// skipped.
    fn tagged(&mut self, fields: &'static [Field], v: i16) -> Result<(), ShapeError> {
        const SECTION: &str = "tagged fields";
        let count = self.uvarint(SECTION)?;
        // Each tagged field takes at least two bytes (tag and size).
        check_count(count, 2, self.remaining(), SECTION)?;
        for _ in 0..count {
            let tag = self.uvarint(SECTION)?;
            let size_at = self.pos;
            let size = self.uvarint(SECTION)?;
            let value_at = self.pos;
            let value = self.skip_len(size, SECTION)?;
            let known = fields.iter().find(|f| {
                f.versions.contains(v)
                    && f.tagged_at(v)
                    && f.tag.map(|t| u64::from(t.0)) == Some(tag)
            });
            if let Some(f) = known {
                let mut inner = Walk::new(value, self.base + value_at);
                inner.field(f, v, true)?;
                // The crate reads a known tagged field by its own layout,
                // not by its declared size, and goes on where the field
                // ends: bytes of the size that the field leaves unread would
                // be read as whatever follows (a count, unchecked).
                if inner.pos != value.len() {
                    return Err(ShapeError {
                        field: f.name,
                        problem: Problem::TaggedSize {
                            declared: size,
                            used: inner.pos,
                        },
                    });
                }
                let growth: i64 = inner.patches.iter().map(Patch::growth).sum();
                if growth != 0 {
                    // The value's size changes with the strings in it.
                    let mut bytes = Vec::with_capacity(5);
                    put_uvarint(&mut bytes, (size as i64 + growth).unsigned_abs());
                    self.patches.push(Patch {
                        start: self.base + size_at,
                        end: self.base + value_at,
                        bytes,
                    });
                }
                self.patches.append(&mut inner.patches);
            }
        }
        Ok(())
    }

    fn field(&mut self, f: &Field, v: i16, flexible: bool) -> Result<(), ShapeError> {
        if f.array {
            let Some(count) = self.length(flexible, 4, f.name)? else {
                return Ok(());
            };
            check_count(
                count,
                min_bytes(f.kind, v, flexible),
                self.remaining(),
                f.name,
            )?;
            for _ in 0..count {
                self.value(f, v, flexible)?;
            }
            return Ok(());
        }
        if matches!(f.kind, Kind::Struct(_)) && f.nullable.contains(v) {
            // A nullable struct starts with a presence byte: -1 null, 1 present.
            if (self.take(1, f.name)?[0] as i8) < 0 {
                return Ok(());
            }
        }
        self.value(f, v, flexible)
    }

    fn value(&mut self, f: &Field, v: i16, flexible: bool) -> Result<(), ShapeError> {
        match f.kind {
            Kind::String => self.string(flexible, f.name)?,
            Kind::Bytes | Kind::Records => {
                if let Some(len) = self.length(flexible, 4, f.name)? {
                    self.skip_len(len, f.name)?;
                }
            }
            Kind::Struct(fields) => self.walk_struct(fields, v, flexible)?,
            fixed => {
                self.take(fixed_bytes(fixed), f.name)?;
            }
        }
        Ok(())
    }
}

fn put_uvarint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn err(field: &'static str, problem: Problem) -> ShapeError {
    ShapeError { field, problem }
}

fn check_count(
    count: u64,
    element_bytes: u64,
    remaining: usize,
    field: &'static str,
) -> Result<(), ShapeError> {
    let element_bytes = element_bytes.max(1);
    if count.saturating_mul(element_bytes) > remaining as u64 {
        return Err(err(
            field,
            Problem::ArrayTooLong {
                count,
                element_bytes,
                remaining,
            },
        ));
    }
    Ok(())
}

fn fixed_bytes(kind: Kind) -> usize {
    match kind {
        Kind::Bool | Kind::Int8 => 1,
        Kind::Int16 | Kind::UInt16 => 2,
        Kind::Int32 | Kind::UInt32 => 4,
        Kind::Int64 | Kind::Float64 => 8,
        Kind::Uuid => 16,
        // Variable-size kinds are not fixed; their smallest encoding is in
        // `min_bytes`.
        Kind::String | Kind::Bytes | Kind::Records | Kind::Struct(_) => 0,
    }
}

/// The fewest bytes one value of `kind` takes at version `v`: a null or
/// empty string, byte string or array, a struct of such fields.
fn min_bytes(kind: Kind, v: i16, flexible: bool) -> u64 {
    match kind {
        Kind::String if !flexible => 2,
        Kind::Bytes | Kind::Records if !flexible => 4,
        Kind::String | Kind::Bytes | Kind::Records => 1,
        Kind::Struct(fields) => {
            let own: u64 = fields
                .iter()
                .filter(|f| f.versions.contains(v) && !(flexible && f.tagged_at(v)))
                .map(|f| field_min_bytes(f, v, flexible))
                .sum();
            own + u64::from(flexible)
        }
        fixed => fixed_bytes(fixed) as u64,
    }
}

fn field_min_bytes(f: &Field, v: i16, flexible: bool) -> u64 {
    if f.array {
        return if flexible { 1 } else { 4 };
    }
    if matches!(f.kind, Kind::Struct(_)) && f.nullable.contains(v) {
        return 1;
    }
    min_bytes(f.kind, v, flexible)
}

#[cfg(test)]
#[path = "shape_tests.rs"]
mod tests;
