//! The one place where errors from the layers below become Kafka error codes.
//!
//! Storage errors ([`StorageError`]), record-batch codec errors and our own
//! protocol-level failures all end up as an `i16` in a response; the mapping
//! lives here so that every handler answers the same failure the same way.

use crate::codec::batch::BatchError;
use es_storage::producers::SeqError;
use es_storage::StorageError;
pub use kafka_protocol::ResponseError;

/// Kafka's "no error".
pub const NONE: i16 = 0;

/// The code of a Kafka error.
pub const fn code(e: ResponseError) -> i16 {
    e.code()
}

/// Maps a storage failure to the Kafka error a client understands.
///
/// - out of range reads are OFFSET_OUT_OF_RANGE, which consumers handle by
///   their reset policy;
/// - a record over the storage limit is MESSAGE_TOO_LARGE;
/// - corruption found on read is CORRUPT_MESSAGE (Kafka's KAFKA_STORAGE_ERROR
///   would make clients retry forever on bytes that will never heal);
/// - a refused producer sequence or epoch is OUT_OF_ORDER_SEQUENCE_NUMBER or
///   INVALID_PRODUCER_EPOCH, as Kafka's producer state check answers;
/// - a fenced or closed partition, or any I/O failure, is KAFKA_STORAGE_ERROR,
///   which clients treat as retriable (the partition comes back after a restart).
pub fn storage_error_code(e: &StorageError) -> i16 {
    let e = match e {
        StorageError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
        StorageError::RecordTooLarge(_) => ResponseError::MessageTooLarge,
        StorageError::Corrupt { .. } => ResponseError::CorruptMessage,
        StorageError::Invalid(_) => ResponseError::InvalidRequest,
        StorageError::Sequence(SeqError::StaleEpoch { .. }) => ResponseError::InvalidProducerEpoch,
        StorageError::Sequence(SeqError::OutOfOrder { .. }) => {
            ResponseError::OutOfOrderSequenceNumber
        }
        StorageError::Io(_)
        | StorageError::Fenced(_)
        | StorageError::Closed
        | StorageError::Metadata { .. } => ResponseError::KafkaStorageError,
    };
    e.code()
}

/// Maps a refused produced batch to its Kafka error: CORRUPT_MESSAGE for a
/// bad CRC or framing, MESSAGE_TOO_LARGE over `max.message.bytes`,
/// INVALID_RECORD for Kafka's producer rules, UNSUPPORTED_COMPRESSION_TYPE
/// for zstd before Produce v7. The codec names the class; this is where the
/// protocol layer takes it from.
pub fn batch_error_code(e: &BatchError) -> i16 {
    e.kafka_error_code()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_errors_map_to_kafka_codes() {
        assert_eq!(
            storage_error_code(&StorageError::OffsetOutOfRange {
                offset: 9,
                log_start: 0,
                log_end: 3
            }),
            1
        );
        assert_eq!(storage_error_code(&StorageError::RecordTooLarge(10)), 10);
        assert_eq!(storage_error_code(&StorageError::Fenced("t-0".into())), 56);
        assert_eq!(
            storage_error_code(&StorageError::Corrupt {
                file: "f".into(),
                position: 0,
                why: "x".into()
            }),
            2
        );
    }
}
