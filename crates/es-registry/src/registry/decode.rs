//! A record's key or value as JSON, decoded with the schema its header
//! names (Confluent's wire format: magic byte 0, the schema id as 4 bytes
//! big-endian, then for Protobuf the message indexes, then the data), for
//! the admin console's record browser. Records are untrusted: every length
//! read from them is checked against what is left before anything is
//! allocated for it, and nothing here panics.

use std::collections::HashMap;

use serde_json::Value;

use super::Registry;
use crate::format::Parsed;
use crate::limits::{AVRO_DECODE_ALLOCATION_BYTES_MAX, PROTOBUF_MESSAGE_INDEXES_MAX};

impl Registry {
    /// The id `framed` names and its data as JSON; Err says why it could
    /// not be decoded (not the wire format, an unknown id, data that does
    /// not match the schema).
    pub fn decode(&self, framed: &[u8]) -> Result<(i32, Value), String> {
        self.decoder().decode(framed)
    }

    /// A decoder for many records: each schema is parsed once.
    pub fn decoder(&self) -> Decoder<'_> {
        Decoder {
            registry: self,
            parsed: HashMap::new(),
        }
    }
}

/// Decodes records with the schemas of one registry, parsing each schema
/// the first time a record names it.
pub struct Decoder<'a> {
    registry: &'a Registry,
    parsed: HashMap<i32, Result<Parsed, String>>,
}

impl Decoder<'_> {
    /// As [`Registry::decode`].
    pub fn decode(&mut self, framed: &[u8]) -> Result<(i32, Value), String> {
        let (id, data) = match framed {
            [0, a, b, c, d, rest @ ..] => (i32::from_be_bytes([*a, *b, *c, *d]), rest),
            _ => return Err("not in Confluent's wire format (magic byte 0, schema id)".into()),
        };
        let registry = self.registry;
        let parsed = self.parsed.entry(id).or_insert_with(|| {
            let stored = registry
                .state
                .schemas
                .get(&id)
                .ok_or_else(|| format!("schema {id} is not registered"))?;
            registry
                .parse_stored(stored)
                .map_err(|e| format!("schema {id} does not parse: {e}"))
        });
        let parsed = parsed.as_ref().map_err(|e| e.clone())?;
        Ok((id, decode_data(id, parsed, data)?))
    }
}

/// `data` (after the header) as JSON, per `parsed`.
fn decode_data(id: i32, parsed: &Parsed, data: &[u8]) -> Result<Value, String> {
    Ok(match parsed {
        Parsed::Avro(a) => {
            apache_avro::util::max_allocation_bytes(AVRO_DECODE_ALLOCATION_BYTES_MAX);
            let mut reader = data;
            let v = apache_avro::from_avro_datum_schemata(
                &a.schema,
                a.referenced.iter().collect(),
                &mut reader,
                None,
            )
            .map_err(|e| format!("not Avro of schema {id}: {e}"))?;
            if !reader.is_empty() {
                return Err(format!(
                    "{} bytes after the Avro value of schema {id}",
                    reader.len()
                ));
            }
            Value::try_from(v).map_err(|e| format!("Avro value of schema {id}: {e}"))?
        }
        Parsed::Json(_) => {
            serde_json::from_slice(data).map_err(|e| format!("not JSON (schema {id}): {e}"))?
        }
        Parsed::Protobuf(p) => {
            let (indexes, data) = message_indexes(data)?;
            let file = p.file().ok_or_else(|| format!("schema {id} has no file"))?;
            let mut message = file
                .messages()
                .nth(indexes[0])
                .ok_or_else(|| format!("schema {id} has no message {}", indexes[0]))?;
            for i in &indexes[1..] {
                let child = message.child_messages().nth(*i);
                message = child.ok_or_else(|| format!("schema {id}: no nested message {i}"))?;
            }
            let m = prost_reflect::DynamicMessage::decode(message.clone(), data)
                .map_err(|e| format!("not {} (schema {id}): {e}", message.full_name()))?;
            serde_json::to_value(&m).map_err(|e| format!("schema {id}: {e}"))?
        }
    })
}

/// Confluent's Protobuf message indexes: a zigzag varint count, then as
/// many zigzag varint indexes (a count of 0 means `[0]`, the first message).
fn message_indexes(data: &[u8]) -> Result<(Vec<usize>, &[u8]), String> {
    let mut rest = data;
    let count = zigzag(&mut rest)?;
    if count == 0 {
        return Ok((vec![0], rest));
    }
    let count = usize::try_from(count)
        .ok()
        .filter(|c| *c <= PROTOBUF_MESSAGE_INDEXES_MAX)
        .ok_or_else(|| format!("{count} message indexes"))?;
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let i = zigzag(&mut rest)?;
        out.push(usize::try_from(i).map_err(|_| format!("message index {i}"))?);
    }
    Ok((out, rest))
}

/// One zigzag-encoded varint (at most 10 bytes).
fn zigzag(rest: &mut &[u8]) -> Result<i64, String> {
    let mut v: u64 = 0;
    for shift in 0..10 {
        let (&b, tail) = rest.split_first().ok_or("the message indexes end early")?;
        *rest = tail;
        v |= u64::from(b & 0x7f) << (7 * shift);
        if b & 0x80 == 0 {
            return Ok(((v >> 1) as i64) ^ -((v & 1) as i64));
        }
    }
    Err("a message index longer than 10 bytes".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{NewSchema, SchemaType};
    use serde_json::json;

    fn register(r: &mut Registry, subject: &str, t: SchemaType, text: &str) -> i32 {
        let s = NewSchema {
            schema_type: t,
            schema: text.into(),
            references: Vec::new(),
            metadata: None,
            rule_set: None,
            id: None,
            version: None,
        };
        r.register(subject, &s, false).expect("register").id
    }

    fn framed(id: i32, data: &[u8]) -> Vec<u8> {
        let mut v = vec![0];
        v.extend_from_slice(&id.to_be_bytes());
        v.extend_from_slice(data);
        v
    }

    #[test]
    fn values_of_each_format_decode_to_json() {
        let mut r = Registry::new();
        let avro = register(
            &mut r,
            "a",
            SchemaType::Avro,
            r#"{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"note","type":"string"}]}"#,
        );
        // id 21 (zigzag 42), note "hi" (length 2 as zigzag 4).
        assert_eq!(
            r.decode(&framed(avro, &[42, 4, b'h', b'i'])),
            Ok((avro, json!({"id": 21, "note": "hi"})))
        );
        let js = register(&mut r, "j", SchemaType::Json, r#"{"type":"object"}"#);
        assert_eq!(
            r.decode(&framed(js, br#"{"x":1}"#)),
            Ok((js, json!({"x": 1})))
        );
        let proto = register(
            &mut r,
            "p",
            SchemaType::Protobuf,
            "syntax = \"proto3\";\nmessage A { int32 n = 1; }\nmessage B { string s = 1; message C { int64 v = 1; } }\n",
        );
        // [0] as the single byte 0; field 1 varint 7.
        assert_eq!(
            r.decode(&framed(proto, &[0, 0x08, 7])),
            Ok((proto, json!({"n": 7})))
        );
        // [1, 0]: B.C (count 2 and the indexes zigzag-encoded); v = 5.
        assert_eq!(
            r.decode(&framed(proto, &[4, 2, 0, 0x08, 5])),
            Ok((proto, json!({"v": "5"})))
        );
    }

    #[test]
    fn hostile_values_are_errors() {
        let mut r = Registry::new();
        let avro = register(&mut r, "a", SchemaType::Avro, r#""string""#);
        // A string claiming 2^40 bytes: refused before allocating.
        let huge = [0x80, 0x80, 0x80, 0x80, 0x80, 0x40];
        assert!(r.decode(&framed(avro, &huge)).is_err());
        assert!(
            r.decode(&framed(avro, &[4, b'h', b'i', b'!'])).is_err(),
            "trailing bytes"
        );
        assert!(r.decode(&framed(999, b"x")).is_err(), "unknown id");
        assert!(r.decode(b"\x01abcd").is_err(), "no magic byte");
        assert!(r.decode(&[0, 0]).is_err(), "short header");
        let proto = register(
            &mut r,
            "p",
            SchemaType::Protobuf,
            "syntax = \"proto3\";\nmessage A { int32 n = 1; }\n",
        );
        assert!(r.decode(&framed(proto, &[2, 8])).is_err(), "no message 4");
        assert!(
            r.decode(&framed(proto, &[0xff; 12])).is_err(),
            "endless varint"
        );
        assert!(
            r.decode(&framed(proto, &[0xfe, 0x01])).is_err(),
            "127 indexes"
        );
    }
}
