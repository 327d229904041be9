//! Kafka RecordBatch v2 bytes, as a client would put in a Produce request.
//!
//! Records are written in es-storage's record format and encoded with
//! es-kafka's batch encoder (the fetch path's), so a test's batch is exactly
//! what the broker itself would send: magic 2, CRC-32C, the chosen codec,
//! offset deltas from 0 in the order the records were added.

use es_kafka::codec::{encode_records, Compression, EncodeOptions};
use es_storage::record::{self, ProducerInfo, RecordIter, RecordMeta};

/// One header of a record: key, value (None = null).
pub type Header<'a> = (&'a [u8], Option<&'a [u8]>);

/// Records collected for one Kafka batch (or several, when they exceed
/// [`KafkaBatch::max_bytes`]). Defaults: no compression, CreateTime,
/// partitionLeaderEpoch -1 (what a producer sends), 1 MiB.
pub struct KafkaBatch {
    records: Vec<u8>,
    count: u64,
    opts: EncodeOptions,
}

impl Default for KafkaBatch {
    fn default() -> Self {
        Self::new()
    }
}

impl KafkaBatch {
    pub fn new() -> KafkaBatch {
        KafkaBatch {
            records: Vec::new(),
            count: 0,
            opts: EncodeOptions {
                compression: Compression::None,
                log_append_time: false,
                partition_leader_epoch: -1,
                max_bytes: 1 << 20,
            },
        }
    }

    /// The batch's codec.
    pub fn compression(&mut self, c: Compression) -> &mut Self {
        self.opts.compression = c;
        self
    }

    /// The batch's partitionLeaderEpoch field.
    pub fn partition_leader_epoch(&mut self, epoch: i32) -> &mut Self {
        self.opts.partition_leader_epoch = epoch;
        self
    }

    /// Appends one record (its offset delta is the number added before it).
    pub fn record(
        &mut self,
        timestamp_ms: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header<'_>],
        meta: &RecordMeta,
    ) -> &mut Self {
        record::encode(
            &mut self.records,
            self.count,
            timestamp_ms,
            key,
            value,
            headers.iter().copied(),
            meta,
        );
        self.count += 1;
        self
    }

    /// The encoded batch.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        encode_records(
            RecordIter::new(&self.records).map(|r| r.expect("a record just written")),
            &mut out,
            &self.opts,
        )
        .expect("encode the batch");
        out
    }
}

/// The meta of a record from an idempotent (or, with `transactional`, a
/// transactional) producer `producer_id`/`epoch` at `sequence`.
pub fn producer_meta(
    producer_id: i64,
    epoch: i16,
    sequence: i32,
    transactional: bool,
) -> RecordMeta {
    RecordMeta {
        producer: Some(ProducerInfo {
            producer_id,
            producer_epoch: epoch,
            sequence,
        }),
        transactional,
        control: false,
    }
}
