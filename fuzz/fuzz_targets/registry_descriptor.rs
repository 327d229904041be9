//! registry_descriptor: a Protobuf schema sent as the base64 of a serialized
//! `FileDescriptorProto` (confluent-kafka-python's form), through
//! `format::stored_text` (decode, print as Confluent prints it), the
//! compiler and `format::identity`.
//!
//! Input: the serialized descriptor's bytes (the harness base64-encodes
//! them, as the client does); a first byte of 0xFF instead sends the rest as
//! text, so the base64 check itself is fuzzed too.
//!
//! Must hold: no panic; what decodes prints; printed text that compiles
//! gets an identity, and printing the compiled file again and compiling that
//! gives the same identity (the print is stable: a descriptor registered,
//! stored as text and loaded again is the same schema).

#![no_main]

use base64::Engine;
use es_registry::model::SchemaType;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = if data.first() == Some(&0xFF) {
        String::from_utf8_lossy(&data[1..]).into_owned()
    } else {
        base64::engine::general_purpose::STANDARD.encode(data)
    };
    es_fuzz::registry::parse_and_reload(SchemaType::Protobuf, &text, false);
});
