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
//! [`check_request`] walks a body by the table in [`super::request_shapes`]
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

use std::fmt;

use super::request_shapes::{DATA, REQUESTS};

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
        }
    }
}

impl std::error::Error for ShapeError {}

/// The request message of `api_key`, if Kafka's specs define one.
pub fn request(api_key: i16) -> Option<&'static Message> {
    REQUESTS.iter().find(|m| m.api_key == api_key)
}

/// An embedded data message by name (`ConsumerProtocolSubscription`, ...).
pub fn data(name: &str) -> Option<&'static Message> {
    DATA.iter().find(|m| m.name == name)
}

/// Checks a request body (the bytes after the request header) of `api_key`
/// at `version`. Returns how many bytes the body's fields take; an api key
/// without a spec passes unchecked (0), as there is no layout to hold it to.
pub fn check_request(api_key: i16, version: i16, body: &[u8]) -> Result<usize, ShapeError> {
    match request(api_key) {
        Some(m) => check(m, version, body),
        None => Ok(0),
    }
}

/// Checks `body` against `message` at `version`; see [`check_request`].
pub fn check(message: &Message, version: i16, body: &[u8]) -> Result<usize, ShapeError> {
    let mut cur = Cursor { buf: body, pos: 0 };
    let flexible = message.flexible.contains(version);
    walk_struct(message.fields, version, flexible, &mut cur)?;
    Ok(cur.pos)
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
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

    fn skip_len(&mut self, len: u64, field: &'static str) -> Result<(), ShapeError> {
        let remaining = self.remaining();
        match usize::try_from(len) {
            Ok(n) if n <= remaining => {
                self.pos += n;
                Ok(())
            }
            _ => Err(err(
                field,
                Problem::TooLong {
                    length: len,
                    remaining,
                },
            )),
        }
    }
}

fn err(field: &'static str, problem: Problem) -> ShapeError {
    ShapeError { field, problem }
}

fn walk_struct(
    fields: &'static [Field],
    v: i16,
    flexible: bool,
    cur: &mut Cursor<'_>,
) -> Result<(), ShapeError> {
    for f in fields {
        if !f.versions.contains(v) || (flexible && f.tagged_at(v)) {
            continue;
        }
        walk_field(f, v, flexible, cur)?;
    }
    if flexible {
        walk_tagged(fields, v, cur)?;
    }
    Ok(())
}

/// The tagged-field section: a count, then (tag, size, value) each. Known
/// tags are walked inside their declared size; unknown ones are skipped.
fn walk_tagged(fields: &'static [Field], v: i16, cur: &mut Cursor<'_>) -> Result<(), ShapeError> {
    const SECTION: &str = "tagged fields";
    let count = cur.uvarint(SECTION)?;
    // Each tagged field takes at least two bytes (tag and size).
    check_count(count, 2, cur.remaining(), SECTION)?;
    for _ in 0..count {
        let tag = cur.uvarint(SECTION)?;
        let size = cur.uvarint(SECTION)?;
        let start = cur.pos;
        cur.skip_len(size, SECTION)?;
        let known = fields.iter().find(|f| {
            f.versions.contains(v) && f.tagged_at(v) && f.tag.map(|t| u64::from(t.0)) == Some(tag)
        });
        if let Some(f) = known {
            let mut inner = Cursor {
                buf: &cur.buf[start..cur.pos],
                pos: 0,
            };
            walk_field(f, v, true, &mut inner)?;
        }
    }
    Ok(())
}

fn walk_field(f: &Field, v: i16, flexible: bool, cur: &mut Cursor<'_>) -> Result<(), ShapeError> {
    if f.array {
        let Some(count) = cur.length(flexible, 4, f.name)? else {
            return Ok(());
        };
        check_count(
            count,
            min_bytes(f.kind, v, flexible),
            cur.remaining(),
            f.name,
        )?;
        for _ in 0..count {
            walk_value(f, v, flexible, cur)?;
        }
        return Ok(());
    }
    if matches!(f.kind, Kind::Struct(_)) && f.nullable.contains(v) {
        // A nullable struct starts with a presence byte: -1 null, 1 present.
        if (cur.take(1, f.name)?[0] as i8) < 0 {
            return Ok(());
        }
    }
    walk_value(f, v, flexible, cur)
}

fn walk_value(f: &Field, v: i16, flexible: bool, cur: &mut Cursor<'_>) -> Result<(), ShapeError> {
    match f.kind {
        Kind::String => {
            if let Some(len) = cur.length(flexible, 2, f.name)? {
                cur.skip_len(len, f.name)?;
            }
        }
        Kind::Bytes | Kind::Records => {
            if let Some(len) = cur.length(flexible, 4, f.name)? {
                cur.skip_len(len, f.name)?;
            }
        }
        Kind::Struct(fields) => walk_struct(fields, v, flexible, cur)?,
        fixed => {
            cur.take(fixed_bytes(fixed), f.name)?;
        }
    }
    Ok(())
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
