//! registry_compat: es-registry's compatibility check
//! (`format::incompatibilities`, as registration and the compatibility test
//! call it in both directions) on two parsed schemas of one type.
//!
//! Input: a type byte (low two bits: 0 Avro, 1 JSON Schema, 2 and 3
//! Protobuf), then the old schema's text, a 0xFF byte, the new schema's text.
//! Inputs where either does not parse are skipped after parsing.
//!
//! Must hold: no panic, in either direction; every schema is compatible
//! with itself (no incompatibility from a schema to itself).

#![no_main]

use es_registry::format;
use es_registry::model::SchemaType;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&ty, rest)) = data.split_first() else {
        return;
    };
    let t = match ty & 3 {
        0 => SchemaType::Avro,
        1 => SchemaType::Json,
        _ => SchemaType::Protobuf,
    };
    let mut parts = rest.splitn(2, |b| *b == 0xFF);
    let old = String::from_utf8_lossy(parts.next().unwrap_or_default());
    let new = String::from_utf8_lossy(parts.next().unwrap_or_default());
    let (Ok(old), Ok(new)) = (format::parse(t, &old, &[]), format::parse(t, &new, &[])) else {
        return;
    };
    let _ = format::incompatibilities(&new, &old, "new", "old");
    let _ = format::incompatibilities(&old, &new, "old", "new");
    for s in [&old, &new] {
        let own = format::incompatibilities(s, s, "new", "old");
        assert!(
            own.is_empty(),
            "a schema is incompatible with itself: {own:?}"
        );
    }
});
