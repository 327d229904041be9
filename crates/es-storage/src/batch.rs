//! `RecordBatchBuf`: the records of one append, encoded once into one buffer.
//!
//! The protocol layer pushes records as it decodes a Kafka batch (no per-record
//! allocation: fields are copied straight into the buffer). The partition then
//! assigns offsets and computes CRCs under its write lock with [`RecordBatchBuf::seal`],
//! and writes the whole buffer with a single `write`.
//!
//! A batch the producer compressed is noted beside the records, not in them:
//! [`RecordBatchBuf::push_batch_start`] pushes its first record (a plain
//! record like any other) and opens the batch, [`RecordBatchBuf::end_batch`]
//! notes its extent, and the partition writes those notes to the segment's
//! `.batches` file with the append (see `batch_marks.rs`).

use crate::record::{self, ProducedBatch, RecordMeta};

/// The records of one append, in the on-disk format, offsets not yet assigned.
#[derive(Debug, Default, Clone)]
pub struct RecordBatchBuf {
    buf: Vec<u8>,
    /// Start of each record in `buf`.
    starts: Vec<u32>,
    max_timestamp_ms: i64,
    /// The produced batch being pushed: its first record's index and codec.
    open_batch: Option<(usize, u8)>,
    /// Produced batches pushed so far: the index of each one's first record
    /// and the batch.
    produced: Vec<(u32, ProducedBatch)>,
}

impl RecordBatchBuf {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_capacity(bytes: usize, records: usize) -> Self {
        RecordBatchBuf {
            buf: Vec::with_capacity(bytes),
            starts: Vec::with_capacity(records),
            max_timestamp_ms: i64::MIN,
            open_batch: None,
            produced: Vec::new(),
        }
    }

    /// Appends one record. Headers are (key, value) pairs, a null value as `None`.
    pub fn push<'h, H>(
        &mut self,
        timestamp_ms: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: H,
        meta: &RecordMeta,
    ) where
        H: IntoIterator<Item = (&'h [u8], Option<&'h [u8]>)>,
    {
        if self.starts.is_empty() {
            self.max_timestamp_ms = i64::MIN;
        }
        self.starts.push(self.buf.len() as u32);
        record::encode_unsealed(&mut self.buf, timestamp_ms, key, value, headers, meta);
        self.max_timestamp_ms = self.max_timestamp_ms.max(timestamp_ms);
    }

    /// Pushes the first record of a batch as its producer sent it, compressed
    /// with `codec` (Kafka's id, at most [`record::BATCH_CODEC_MAX`]). The
    /// records pushed after it, up to [`RecordBatchBuf::end_batch`], are that
    /// batch. Ends a batch still open.
    pub fn push_batch_start<'h, H>(
        &mut self,
        timestamp_ms: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: H,
        meta: &RecordMeta,
        codec: u8,
    ) where
        H: IntoIterator<Item = (&'h [u8], Option<&'h [u8]>)>,
    {
        debug_assert!(codec <= record::BATCH_CODEC_MAX);
        self.end_batch();
        self.push(timestamp_ms, key, value, headers, meta);
        self.open_batch = Some((self.starts.len() - 1, codec.min(record::BATCH_CODEC_MAX)));
    }

    /// Ends the batch [`RecordBatchBuf::push_batch_start`] began: notes its
    /// extent (record count and bytes). No-op without an open batch.
    pub fn end_batch(&mut self) {
        let Some((first, codec)) = self.open_batch.take() else {
            return;
        };
        let start = self.starts[first] as usize;
        let last_offset_delta = u32::try_from(self.starts.len() - 1 - first).unwrap_or(u32::MAX);
        let stored_bytes = u32::try_from(self.buf.len() - start).unwrap_or(u32::MAX);
        self.produced.push((
            first as u32,
            ProducedBatch {
                codec,
                last_offset_delta,
                stored_bytes,
            },
        ));
    }

    /// The produced batches pushed (ended ones; [`RecordBatchBuf::seal`]
    /// ends an open one): the index of each one's first record and the batch.
    pub fn produced(&self) -> &[(u32, ProducedBatch)] {
        &self.produced
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.starts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// Encoded bytes of all records.
    pub fn bytes_len(&self) -> usize {
        self.buf.len()
    }

    /// Largest timestamp pushed (i64::MIN when empty).
    pub fn max_timestamp_ms(&self) -> i64 {
        self.max_timestamp_ms
    }

    /// Overwrites every record's timestamp (Kafka's LogAppendTime).
    pub fn set_all_timestamps(&mut self, timestamp_ms: i64) {
        for i in 0..self.starts.len() {
            let (s, e) = self.bounds(i);
            record::set_timestamp(&mut self.buf[s..e], timestamp_ms);
        }
        self.max_timestamp_ms = timestamp_ms;
    }

    pub fn clear(&mut self) {
        self.buf.clear();
        self.starts.clear();
        self.max_timestamp_ms = i64::MIN;
        self.open_batch = None;
        self.produced.clear();
    }

    fn bounds(&self, i: usize) -> (usize, usize) {
        let s = self.starts[i] as usize;
        let e = self
            .starts
            .get(i + 1)
            .map_or(self.buf.len(), |&n| n as usize);
        (s, e)
    }

    /// Byte position of record `i` within the buffer.
    pub fn record_start(&self, i: usize) -> usize {
        self.starts[i] as usize
    }

    /// Assigns offsets `base_offset..` and computes every CRC (three records
    /// at a time, as [`record::Checker`] checks them). Returns the bytes to
    /// write. Called by the partition under its write lock.
    pub fn seal(&mut self, base_offset: u64) -> &[u8] {
        // A batch left open ends with the buffer.
        self.end_batch();
        record::seal_all(&mut self.buf, &self.starts, base_offset);
        &self.buf
    }

    /// [`RecordBatchBuf::seal`] with explicit offsets, one per record,
    /// strictly increasing (a follower appending its leader's records: the
    /// leader's offsets, gaps allowed). Checked by the caller
    /// ([`crate::Partition::append_replica`]).
    pub(crate) fn seal_at(&mut self, offsets: &[u64]) -> &[u8] {
        self.end_batch();
        record::seal_all_at(&mut self.buf, &self.starts, offsets);
        &self.buf
    }

    /// Makes room for `records` more records whose keys, values and headers
    /// come to about `payload_bytes`, so that a batch of known size is
    /// pushed without growing the buffer step by step. A hint: each record
    /// is counted with [`record::TYPICAL_OVERHEAD_BYTES`].
    pub fn reserve_records(&mut self, payload_bytes: usize, records: usize) {
        self.buf
            .reserve(payload_bytes + records * record::TYPICAL_OVERHEAD_BYTES);
        self.starts.reserve(records);
    }

    /// The records pushed so far, decoded (offsets and CRCs are set only by
    /// [`RecordBatchBuf::seal`], so CRCs are not checked).
    pub fn records(&self) -> record::RecordIter<'_> {
        record::RecordIter::read_checked(&self.buf)
    }

    /// The encoded bytes (sealed or not).
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{ProducerInfo, RecordIter};

    #[test]
    fn produced_batches_are_noted_beside_plain_records() {
        let idem = |seq| RecordMeta {
            producer: Some(ProducerInfo {
                producer_id: 3,
                producer_epoch: 0,
                sequence: seq,
            }),
            ..RecordMeta::default()
        };
        let plain = RecordMeta::default();
        let mut b = RecordBatchBuf::new();
        // An uncompressed record, a gzip batch of 3, a zstd batch of 1 with
        // producer fields and a header, and one left open until the seal.
        b.push(1, None, Some(b"a"), [], &plain);
        b.push_batch_start(2, Some(b"k"), Some(b"b"), [], &plain, 1);
        b.push(3, None, Some(b"c"), [], &plain);
        b.push(4, None, None, [], &plain);
        b.end_batch();
        let header: [(&[u8], Option<&[u8]>); 1] = [(b"h", Some(b"v"))];
        b.push_batch_start(5, None, Some(b"d"), header, &idem(7), 4);
        b.push_batch_start(6, None, Some(b"e"), [], &idem(8), 2);
        b.push(7, None, Some(b"f"), [], &idem(9));
        let bytes = b.seal(100).to_vec();
        let recs: Vec<_> = RecordIter::new(&bytes)
            .collect::<std::result::Result<_, _>>()
            .expect("valid");
        // Nothing of the batches is in the records.
        assert!(recs.iter().all(|r| r.batch.is_none()));
        let gzip_bytes = (recs[1].encoded_len + recs[2].encoded_len + recs[3].encoded_len) as u32;
        assert_eq!(
            b.produced(),
            &[
                (
                    1,
                    ProducedBatch {
                        codec: 1,
                        last_offset_delta: 2,
                        stored_bytes: gzip_bytes,
                    }
                ),
                (
                    4,
                    ProducedBatch {
                        codec: 4,
                        last_offset_delta: 0,
                        stored_bytes: recs[4].encoded_len as u32,
                    }
                ),
                (
                    5,
                    ProducedBatch {
                        codec: 2,
                        last_offset_delta: 1,
                        stored_bytes: (recs[5].encoded_len + recs[6].encoded_len) as u32,
                    }
                ),
            ]
        );
        // Records without headers, producer or null value stay byte for
        // byte the documented format, compressed batch or not.
        for i in [0, 1, 2] {
            let s = b.record_start(i);
            assert_eq!(bytes[s] & 0x80, 0, "record {i}");
        }
        assert_eq!(recs[4].meta, idem(7));
        assert_eq!(recs[4].headers().count(), 1);
        assert_eq!(recs[3].value, None);
        assert_eq!(
            recs.iter().map(|r| r.offset).collect::<Vec<_>>(),
            (100..107).collect::<Vec<_>>()
        );
        b.clear();
        assert!(b.produced().is_empty());
    }
}
