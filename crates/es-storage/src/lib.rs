//! es-storage: the partition log.
//!
//! A partition is a directory of segments; a segment is a `.log` file of
//! length-prefixed, CRC-checked records (see [`record`]) and an `.index` file
//! of 16-byte sparse entries (and a `.batches` file noting the batches
//! producers compressed, see [`batch_marks`]). This crate owns the disk format, group-commit
//! durability, crash recovery, retention and compaction, and atomic metadata
//! files, and what Kafka-style replication needs of a log (leader epochs,
//! appends at a leader's offsets, truncation, an externally set high
//! watermark: see `partition/replica.rs`). It knows nothing of Kafka's wire
//! format and nothing of tokio: its API is blocking
//! and thread-safe, and callers on an async runtime call it from blocking threads.

pub mod batch;
pub mod batch_marks;
pub mod clock;
pub mod commit;
pub mod compaction;
pub mod context;
pub mod epochs;
pub mod error;
pub mod fd_cache;
pub mod fs;
pub mod meta;
pub mod metrics;
pub mod record;

pub use batch::RecordBatchBuf;
pub use clock::{Clock, ManualClock, SharedClock, SystemClock};
pub use context::Storage;
pub use epochs::EpochEntry;
pub use error::{Result, StorageError};
pub use fd_cache::CachingFs;
pub use fs::{FileHandle, Fs, RealFs};
pub use producers::{AbortedTxn, ProducerAppend, ProducerState, SeqCheck, SeqError};
pub use reclaim::Reclaimer;
pub use record::{ProducerInfo, RecordIter, RecordMeta, RecordView};
pub mod index;
pub mod journal;
pub mod partition;
pub mod prealloc;
pub mod producers;
pub mod reclaim;
pub mod segment;
pub mod segment_set;
pub mod simfs;
pub mod syncer;

pub use syncer::{SyncMode, SyncPool};

pub use compaction::{
    CompactionPolicy, CompactionProgress, CompactionReport, RetentionPolicy, RetentionReport,
};
pub use partition::{
    AppendInfo, AppendIntent, AppendOutcome, DurableCallback, FlushPolicy, Isolation, LogSnapshot,
    Partition, PartitionConfig, ReadBuf, ReadChunk, ReadView, RecoveryReport,
};
