//! Every limit of the schema registry, in one place, named with its unit
//! last. A request or a file over one of them is refused before anything is
//! allocated for it (the HTTP body limit) or before it is stored (the rest).

/// Largest HTTP request body (a schema and its JSON envelope): 16 MiB.
/// Above it the answer is HTTP 413 with Confluent's 42209 "schema too large".
pub const REQUEST_BYTES_MAX: usize = 16 * 1024 * 1024;
/// Longest subject name, in bytes.
pub const SUBJECT_BYTES_MAX: usize = 1024;
/// Most references one schema may name.
pub const REFERENCES_MAX: usize = 1024;
/// Deepest chain of references (a schema naming a schema naming ...),
/// which also stops a reference cycle.
pub const REFERENCE_DEPTH_MAX: usize = 64;
/// Largest `schemas.json` read at start: es-storage's metadata limit.
pub const FILE_BYTES_MAX: u64 = es_storage::meta::META_BYTES_MAX;
/// Longest old schema quoted in an incompatibility message (as Confluent).
pub const MESSAGE_SCHEMA_CHARS_MAX: usize = 2000;
/// Most record names remembered for produce-time validation (one per
/// schema id; the whole memo is dropped when full).
pub const RECORD_NAMES_MAX: usize = 10_000;
/// Largest single allocation decoding an Avro value may make (a string,
/// bytes or an array's block), for the admin console's record browser:
/// apache-avro allocates a length read from the data before reading it.
/// Process-wide (apache-avro keeps one), set before the first decode.
pub const AVRO_DECODE_ALLOCATION_BYTES_MAX: usize = 8 * 1024 * 1024;
/// Most Protobuf message indexes a record's header may name.
pub const PROTOBUF_MESSAGE_INDEXES_MAX: usize = 64;
