//! `RecordBatchBuf`: the records of one append, encoded once into one buffer.
//!
//! The protocol layer pushes records as it decodes a Kafka batch (no per-record
//! allocation: fields are copied straight into the buffer). The partition then
//! assigns offsets and computes CRCs under its write lock with [`RecordBatchBuf::seal`],
//! and writes the whole buffer with a single `write`.
//!
//! A batch the producer compressed is recorded on its first record (the
//! extension's batch fields, see `record.rs`): [`RecordBatchBuf::push_batch_start`]
//! writes that record with room for the batch's extent, and
//! [`RecordBatchBuf::end_batch`] fills the extent in once the batch's last
//! record is pushed, before the CRCs are computed.

use crate::record::{self, ProducedBatch, RecordMeta};

/// The records of one append, in the on-disk format, offsets not yet assigned.
#[derive(Debug, Default, Clone)]
pub struct RecordBatchBuf {
    buf: Vec<u8>,
    /// Start of each record in `buf`.
    starts: Vec<u32>,
    max_timestamp_ms: i64,
    /// The produced batch being pushed: its first record's index and the
    /// position of that record's batch fields.
    open_batch: Option<(usize, usize)>,
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
        if self.starts.is_empty() {
            self.max_timestamp_ms = i64::MIN;
        }
        let start = self.buf.len();
        self.starts.push(start as u32);
        // The extent is not known yet: end_batch fills it in.
        let batch = ProducedBatch {
            codec: codec.min(record::BATCH_CODEC_MAX),
            last_offset_delta: 0,
            stored_bytes: 0,
        };
        record::encode_unsealed_batch(
            &mut self.buf,
            timestamp_ms,
            key,
            value,
            headers,
            meta,
            Some(&batch),
        );
        self.open_batch = Some((
            self.starts.len() - 1,
            start + record::batch_fields_pos(meta),
        ));
        self.max_timestamp_ms = self.max_timestamp_ms.max(timestamp_ms);
    }

    /// Ends the batch [`RecordBatchBuf::push_batch_start`] began: records its
    /// extent (record count and bytes) on its first record. No-op without an
    /// open batch.
    pub fn end_batch(&mut self) {
        let Some((first, fields_pos)) = self.open_batch.take() else {
            return;
        };
        let start = self.starts[first] as usize;
        let last_offset_delta = (self.starts.len() - 1 - first) as u32;
        let stored_bytes = u32::try_from(self.buf.len() - start).unwrap_or(u32::MAX);
        let (s, e) = self.bounds(first);
        record::set_batch_extent(
            &mut self.buf[s..e],
            fields_pos - start,
            last_offset_delta,
            stored_bytes,
        );
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

    /// Assigns offsets `base_offset..` and computes every CRC. Returns the bytes
    /// to write. Called by the partition under its write lock.
    pub fn seal(&mut self, base_offset: u64) -> &[u8] {
        // A batch left open ends with the buffer.
        self.end_batch();
        for i in 0..self.starts.len() {
            let (s, e) = self.bounds(i);
            record::seal(&mut self.buf[s..e], base_offset + i as u64);
        }
        &self.buf
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
    fn produced_batches_record_their_extent_on_their_first_record() {
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
        let batches: Vec<_> = recs.iter().map(|r| r.batch).collect();
        let gzip_bytes = (recs[1].encoded_len + recs[2].encoded_len + recs[3].encoded_len) as u32;
        assert_eq!(
            batches,
            vec![
                None,
                Some(ProducedBatch {
                    codec: 1,
                    last_offset_delta: 2,
                    stored_bytes: gzip_bytes,
                }),
                None,
                None,
                Some(ProducedBatch {
                    codec: 4,
                    last_offset_delta: 0,
                    stored_bytes: recs[4].encoded_len as u32,
                }),
                Some(ProducedBatch {
                    codec: 2,
                    last_offset_delta: 1,
                    stored_bytes: (recs[5].encoded_len + recs[6].encoded_len) as u32,
                }),
                None,
            ]
        );
        // The plain records stay byte for byte the documented format.
        assert_eq!(bytes[0] & 0x80, 0);
        assert_eq!(recs[4].meta, idem(7));
        assert_eq!(recs[4].headers().count(), 1);
        assert_eq!(recs[3].value, None);
        assert_eq!(
            recs.iter().map(|r| r.offset).collect::<Vec<_>>(),
            (100..107).collect::<Vec<_>>()
        );
    }
}
