//! registry_proto: es-registry's parser for Protobuf .proto text, as registration and
//! lookup call it (`format::stored_text`, `format::parse`,
//! `format::identity`), over any text.
//!
//! Input: a flag byte (bit 0: `normalize`), then the schema text (bytes
//! that are not UTF-8 are replaced: a JSON request body cannot carry them).
//!
//! Must hold: no panic (libFuzzer aborts on one even where the registry
//! catches it, so a parser's panic is a finding); a schema that parses has
//! an identity, and its stored text parses again to the same identity (what
//! the registry stores, it can load at the next start); for Protobuf, the
//! compiled file printed as Confluent prints a descriptor compiles to the
//! same identity.

#![no_main]

use es_registry::model::SchemaType;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, text)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(text);
    es_fuzz::registry::parse_and_reload(SchemaType::Protobuf, &text, flags & 1 == 1);
});
