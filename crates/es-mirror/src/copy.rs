//! Copying records into es at their source offsets: per partition, the
//! records a poll brought are gathered in one [`RecordBatchBuf`] with their
//! offsets and appended as a follower appends its leader's records
//! (`Partition::append_replica`: offsets given, gaps allowed), then waited
//! on until durable. A record below what the partition already holds is
//! dropped, and an append below the log end is refused, so a record is
//! never written twice, whatever the consumer redelivers.
//!
//! Offsets a read_committed read skips (aborted records, markers) are gaps
//! in the middle of the log, which readers step over to the next batch. A
//! gap at the end cannot be stepped over, so where the mirror must move its
//! end past such offsets (promotion, a source that deleted what was not
//! copied yet) it writes one commit marker with no producer at the last of
//! them ([`close_gap`]): every reader and follower skips a control record,
//! and the log ends where the source's does.

use std::collections::HashMap;
use std::sync::Arc;

use es_kafka::broker::Broker;
use es_storage::{Partition, RecordBatchBuf, RecordMeta};
use rdkafka::message::{BorrowedMessage, Headers, Message};

/// A buffer is appended once it holds this many records ...
pub const BATCH_RECORDS_MAX: usize = 10_000;
/// ... or this many bytes of keys, values and headers.
pub const BATCH_BYTES_MAX: usize = 4 * 1024 * 1024;

/// Records gathered for one partition.
#[derive(Default)]
pub struct Pending {
    buf: RecordBatchBuf,
    offsets: Vec<u64>,
    bytes: usize,
}

/// What one append copied.
#[derive(Clone, Copy, Debug, Default)]
pub struct Copied {
    pub records: u64,
    pub bytes: u64,
    /// The log end after them (what is waited on until durable).
    pub end: u64,
}

/// The buffers of every partition a worker copies.
#[derive(Default)]
pub struct Gather {
    /// By es topic, then partition: a record looks its buffer up without
    /// allocating.
    pending: HashMap<String, HashMap<i32, Pending>>,
}

impl Gather {
    /// Adds one source record for es topic `topic`, unless its offset is
    /// below `floor` (what the partition already holds); true when its
    /// buffer is full and should be appended.
    pub fn push(&mut self, topic: &str, m: &BorrowedMessage<'_>, floor: u64) -> bool {
        let Ok(offset) = u64::try_from(m.offset()) else {
            return false;
        };
        if offset < floor {
            return false;
        }
        if !self.pending.contains_key(topic) {
            self.pending.insert(topic.to_string(), HashMap::new());
        }
        let Some(by_partition) = self.pending.get_mut(topic) else {
            return false;
        };
        let p = by_partition.entry(m.partition()).or_default();
        if p.offsets.last().is_some_and(|&last| offset <= last) {
            return false;
        }
        let timestamp = m.timestamp().to_millis().unwrap_or(-1);
        let mut hs: Vec<(&[u8], Option<&[u8]>)> = Vec::new();
        if let Some(h) = m.headers() {
            for hd in h.iter() {
                hs.push((hd.key.as_bytes(), hd.value));
            }
        }
        let size = m.key_len()
            + m.payload_len()
            + hs.iter()
                .map(|(k, v)| k.len() + v.map_or(0, <[u8]>::len))
                .sum::<usize>();
        p.buf
            .push(timestamp, m.key(), m.payload(), hs, &RecordMeta::default());
        p.offsets.push(offset);
        p.bytes += size;
        p.offsets.len() >= BATCH_RECORDS_MAX || p.bytes >= BATCH_BYTES_MAX
    }

    /// Whether anything is waiting for `topic` (every topic when `None`).
    pub fn has(&self, topic: Option<&str>) -> bool {
        self.pending
            .iter()
            .filter(|(t, _)| topic.is_none_or(|x| x == t.as_str()))
            .any(|(_, ps)| ps.values().any(|p| !p.offsets.is_empty()))
    }

    /// Drops what is gathered for `topic` (not appended: its records are
    /// fetched again from the partition's log end, or never, when they are
    /// not its source topic's).
    pub fn discard(&mut self, topic: &str) {
        if let Some(ps) = self.pending.get_mut(topic) {
            for p in ps.values_mut() {
                p.buf.clear();
                p.offsets.clear();
                p.bytes = 0;
            }
        }
    }

    /// The partitions with records waiting: (es topic, partition).
    pub fn waiting(&self) -> impl Iterator<Item = (&str, i32)> {
        self.pending.iter().flat_map(|(t, ps)| {
            ps.iter()
                .filter(|(_, p)| !p.offsets.is_empty())
                .map(move |(partition, _)| (t.as_str(), *partition))
        })
    }

    /// Appends what is gathered (for `topic` only, when given) and waits
    /// until it is durable; per partition what was copied or why not.
    pub fn flush(
        &mut self,
        broker: &Arc<Broker>,
        topic: Option<&str>,
    ) -> Vec<((String, i32), Result<Copied, String>)> {
        let mut out = Vec::new();
        let entries = self
            .pending
            .iter_mut()
            .filter(|(t, _)| topic.is_none_or(|x| x == t.as_str()))
            .flat_map(|(t, ps)| ps.iter_mut().map(move |(partition, p)| (t, partition, p)));
        // Every partition's records are written first, then waited on:
        // their fsyncs overlap instead of following one another.
        let mut written = Vec::new();
        for (t, partition, p) in entries {
            if p.offsets.is_empty() {
                continue;
            }
            let result = match local_partition(broker, t, *partition) {
                Some(storage) => append(&storage, p).map(|c| (storage, c)),
                None => Err(format!("{t}-{partition} is not open on this node")),
            };
            p.buf.clear();
            p.offsets.clear();
            p.bytes = 0;
            written.push(((t.clone(), *partition), result));
        }
        for (key, result) in written {
            let result = result.and_then(|(storage, c)| {
                storage.wait_durable(c.end).map_err(|e| e.to_string())?;
                Ok(c)
            });
            out.push((key, result));
        }
        out
    }
}

/// The storage of `topic`'s partition, if this node holds it.
pub fn local_partition(broker: &Broker, topic: &str, partition: i32) -> Option<Arc<Partition>> {
    let slot = broker.topic(topic)?.partition(partition)?;
    Some(slot.log.storage().clone())
}

fn append(storage: &Partition, p: &mut Pending) -> Result<Copied, String> {
    let end = storage.log_end_offset();
    if p.offsets.first().is_some_and(|&first| first < end) {
        return Err(format!(
            "records from offset {} but the log ends at {end}: not written twice",
            p.offsets[0]
        ));
    }
    let epoch = storage.latest_leader_epoch().unwrap_or(0);
    let bytes = p.buf.bytes_len() as u64;
    storage
        .append_replica(&mut p.buf, &p.offsets, epoch)
        .map_err(|e| e.to_string())?;
    let last = p.offsets.last().copied().unwrap_or(0);
    Ok(Copied {
        records: p.offsets.len() as u64,
        bytes,
        end: last + 1,
    })
}

/// Makes `to` the log end when it ends below: a commit marker of no
/// producer (pid -1, so no transaction state changes) at offset `to - 1`,
/// the offsets between left as gaps; durable when this returns.
pub fn close_gap(storage: &Partition, to: u64) -> Result<(), String> {
    let end = storage.log_end_offset();
    if to <= end {
        return Ok(());
    }
    let mut key = [0u8; 4];
    key[2..].copy_from_slice(&es_storage::producers::CONTROL_COMMIT.to_be_bytes());
    let value = [0u8; 6];
    let meta = RecordMeta {
        producer: None,
        transactional: true,
        control: true,
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let mut buf = RecordBatchBuf::new();
    buf.push(now, Some(&key), Some(&value), std::iter::empty(), &meta);
    let epoch = storage.latest_leader_epoch().unwrap_or(0);
    storage
        .append_replica(&mut buf, &[to - 1], epoch)
        .map_err(|e| e.to_string())?;
    storage.wait_durable(to).map_err(|e| e.to_string())
}
