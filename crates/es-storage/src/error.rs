//! Storage errors. The protocol layer maps these to Kafka error codes in one place.

use std::io;

/// What went wrong in es-storage.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
    /// A failed fsync or an unrepairable partial write: the partition accepts no
    /// more writes until a restart runs recovery.
    #[error("partition {0} is fenced after an I/O failure; restart to recover")]
    Fenced(String),
    #[error("offset {offset} is out of range [{log_start}, {log_end}]")]
    OffsetOutOfRange {
        offset: u64,
        log_start: u64,
        log_end: u64,
    },
    #[error("corrupt data in {file} at byte {position}: {why}")]
    Corrupt {
        file: String,
        position: u64,
        why: String,
    },
    #[error("record of {0} bytes is too large")]
    RecordTooLarge(usize),
    #[error("partition is closed")]
    Closed,
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// The producer's sequence or epoch is refused.
    #[error("producer sequence check failed: {0:?}")]
    Sequence(crate::producers::SeqError),
    #[error("metadata file {file}: {why}")]
    Metadata { file: String, why: String },
}

pub type Result<T, E = StorageError> = std::result::Result<T, E>;
