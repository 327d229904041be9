//! `RecordBatchBuf`: the records of one append, encoded once into one buffer.
//!
//! The protocol layer pushes records as it decodes a Kafka batch (no per-record
//! allocation: fields are copied straight into the buffer). The partition then
//! assigns offsets and computes CRCs under its write lock with [`RecordBatchBuf::seal`],
//! and writes the whole buffer with a single `write`.

use crate::record::{self, RecordMeta};

/// The records of one append, in the on-disk format, offsets not yet assigned.
#[derive(Debug, Default, Clone)]
pub struct RecordBatchBuf {
    buf: Vec<u8>,
    /// Start of each record in `buf`.
    starts: Vec<u32>,
    max_timestamp_ms: i64,
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
        for i in 0..self.starts.len() {
            let (s, e) = self.bounds(i);
            record::seal(&mut self.buf[s..e], base_offset + i as u64);
        }
        &self.buf
    }

    /// The encoded bytes (sealed or not).
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }
}
