//! Kafka wire codecs: frames and record batches.
//!
//! - [`frame`]: splitting the byte stream into size-prefixed requests; the
//!   response frame the connection writes.
//! - [`fetch_response`]: Fetch responses written around their record batches.
//! - [`batch`]: RecordBatch v2 layout and decoding produced batches into
//!   es-storage records.
//! - [`encode`]: encoding stored records as RecordBatch v2 for Fetch.
//! - [`compression`]: the gzip/snappy/lz4/zstd codecs with bounded output.
//! - [`varint`]: Kafka's zigzag varints.
//! - [`share_wire`]: hand codecs for the share-group versions the crate
//!   lacks (ShareFetch and ShareAcknowledge v2, DescribeShareGroupOffsets
//!   v1's response), the bodies of [`crate::versions::BY_HAND`].
//! - [`shape`]: the bounds check every request passes before the
//!   kafka-protocol crate decodes it, by the layout table in `shape/table/` (one file per API family)
//!   (generated from Kafka's message specs).

pub mod batch;
pub mod compression;
pub mod encode;
pub mod fetch_response;
pub mod frame;
pub mod shape;
pub mod share_wire;
#[cfg(test)]
mod share_wire_tests;
pub mod varint;

pub use batch::{decode_batches, BatchDecoder, BatchError, BatchSummary, DecodeLimits};
pub use compression::Compression;
pub use encode::{encode_records, BatchEncoder, EncodeError, EncodeOptions, EncodeSummary};
pub use frame::{
    check_frame, peek_request_header, split_frame, FrameError, FrameStatus, RequestHeaderPrefix,
    ResponseFrame,
};
