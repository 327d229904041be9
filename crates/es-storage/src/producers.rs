//! Idempotent and transactional producer state of one partition.
//!
//! For every producer id the partition remembers its epoch and the sequence
//! ranges of its last [`BATCHES_KEPT`] appends, so that a retried batch is
//! answered with its original offsets instead of being appended twice, a gap
//! is refused, and a stale epoch is fenced. It also tracks open transactions
//! (the last stable offset) and aborted ones (for `read_committed` fetches).
//!
//! The state is checked and updated under the partition's write lock in the
//! same step as the append it describes, so a failed append never advances
//! it. It is durable because the records carry it: every record with a
//! producer id stores its id, epoch and sequence in the extension, and every
//! commit/abort marker is a control record. At open, the state is rebuilt by
//! replaying records from the snapshot (`producers.json` in the partition
//! directory, written at every roll and close) to the end of the log — the log
//! is the journal, synced by the same group commit as the data, at no extra
//! fsync.
//!
//! A control record's key is Kafka's: version i16, type i16 (0 abort, 1 commit).

use std::collections::{BTreeMap, HashMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::record::RecordView;

/// Appends remembered per producer (Kafka keeps 5).
pub const BATCHES_KEPT: usize = 5;
/// File name of the per-partition snapshot.
pub const SNAPSHOT_FILE: &str = "producers.json";
/// Control record type: abort.
pub const CONTROL_ABORT: i16 = 0;
/// Control record type: commit.
pub const CONTROL_COMMIT: i16 = 1;

/// The next sequence after `seq`, wrapping to 0 after i32::MAX as Kafka does.
pub fn next_sequence(seq: i32) -> i32 {
    if seq == i32::MAX {
        0
    } else {
        seq + 1
    }
}

/// One remembered append: sequences `first_seq..=last_seq` at offsets
/// `base_offset..=last_offset` (contiguous).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeqRange {
    pub first_seq: i32,
    pub last_seq: i32,
    pub base_offset: u64,
    pub last_offset: u64,
}

/// What the partition knows of one producer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerEntry {
    pub epoch: i16,
    pub batches: VecDeque<SeqRange>,
    /// Wall-clock time of the last append (for `producer.id.expiration.ms`).
    pub last_append_ms: i64,
    /// Largest record timestamp of the last append.
    pub last_timestamp_ms: i64,
    /// First offset of the producer's open transaction in this partition.
    pub txn_first_offset: Option<u64>,
    /// Coordinator epoch of the last marker.
    pub coordinator_epoch: i32,
}

impl ProducerEntry {
    pub fn last_seq(&self) -> Option<i32> {
        self.batches.back().map(|b| b.last_seq)
    }

    fn remember(&mut self, r: SeqRange) {
        if let Some(last) = self.batches.back_mut() {
            // Consecutive appends with no one else in between form one range.
            if r.first_seq == next_sequence(last.last_seq) && r.base_offset == last.last_offset + 1
            {
                last.last_seq = r.last_seq;
                last.last_offset = r.last_offset;
                return;
            }
        }
        self.batches.push_back(r);
        while self.batches.len() > BATCHES_KEPT {
            self.batches.pop_front();
        }
    }

    /// The offsets of a retried append of `first..=last`, if it was appended.
    fn find(&self, first: i32, last: i32) -> Option<(u64, u64)> {
        self.batches.iter().find_map(|b| {
            if first >= b.first_seq && last <= b.last_seq && first <= last {
                let base = b.base_offset + (first - b.first_seq) as u64;
                Some((base, base + (last - first) as u64))
            } else {
                None
            }
        })
    }
}

/// An aborted transaction: producer and the offsets from its first record to its marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: u64,
    pub last_offset: u64,
}

/// The producer fields of an append (one Kafka batch, or several from the
/// same producer): sequences `base_sequence ..` for `record_count` records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducerAppend {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub record_count: u32,
    pub transactional: bool,
}

impl ProducerAppend {
    pub fn last_sequence(&self) -> i32 {
        let mut s = self.base_sequence;
        for _ in 1..self.record_count {
            s = next_sequence(s);
        }
        s
    }
}

/// Why a producer's append is refused (mapped to Kafka's error codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeqError {
    /// The epoch is older than the producer's current one: INVALID_PRODUCER_EPOCH
    /// (or PRODUCER_FENCED for a transactional producer).
    StaleEpoch { current: i16 },
    /// A gap or reordering: OUT_OF_ORDER_SEQUENCE_NUMBER.
    OutOfOrder { expected: i32, got: i32 },
}

/// The outcome of checking an append against the producer state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeqCheck {
    /// Append it.
    Fresh,
    /// Already appended at these offsets: answer success, append nothing.
    Duplicate { base_offset: u64, last_offset: u64 },
}

/// The producer state of a partition, with the offset it is complete up to.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProducerState {
    pub producers: BTreeMap<i64, ProducerEntry>,
    pub aborted: Vec<AbortedTxn>,
    /// Every record below this offset has been applied.
    pub applied_up_to: u64,
}

impl ProducerState {
    /// Kafka's sequence rules for an append by `p`.
    pub fn check(&self, p: &ProducerAppend) -> Result<SeqCheck, SeqError> {
        let Some(e) = self.producers.get(&p.producer_id) else {
            // An unknown producer (new, or expired) may start anywhere.
            return Ok(SeqCheck::Fresh);
        };
        if p.producer_epoch < e.epoch {
            return Err(SeqError::StaleEpoch { current: e.epoch });
        }
        if p.producer_epoch > e.epoch {
            // A new epoch starts at 0 (Kafka: otherwise out of order).
            if p.base_sequence != 0 {
                return Err(SeqError::OutOfOrder {
                    expected: 0,
                    got: p.base_sequence,
                });
            }
            return Ok(SeqCheck::Fresh);
        }
        if let Some((base_offset, last_offset)) = e.find(p.base_sequence, p.last_sequence()) {
            return Ok(SeqCheck::Duplicate {
                base_offset,
                last_offset,
            });
        }
        match e.last_seq() {
            None => Ok(SeqCheck::Fresh),
            Some(last) if p.base_sequence == next_sequence(last) => Ok(SeqCheck::Fresh),
            Some(last) => Err(SeqError::OutOfOrder {
                expected: next_sequence(last),
                got: p.base_sequence,
            }),
        }
    }

    /// Records an append of `p` at `base_offset..=last_offset`.
    pub fn apply_append(
        &mut self,
        p: &ProducerAppend,
        base_offset: u64,
        last_offset: u64,
        max_ts: i64,
        now_ms: i64,
    ) {
        let e = self.producers.entry(p.producer_id).or_default();
        if p.producer_epoch != e.epoch {
            e.epoch = p.producer_epoch;
            e.batches.clear();
        }
        e.remember(SeqRange {
            first_seq: p.base_sequence,
            last_seq: p.last_sequence(),
            base_offset,
            last_offset,
        });
        e.last_append_ms = now_ms;
        e.last_timestamp_ms = max_ts;
        if p.transactional && e.txn_first_offset.is_none() {
            e.txn_first_offset = Some(base_offset);
        }
        self.applied_up_to = self.applied_up_to.max(last_offset + 1);
    }

    /// Records a commit/abort marker of `producer_id` at `offset`.
    pub fn apply_marker(
        &mut self,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
        offset: u64,
        now_ms: i64,
    ) {
        let e = self.producers.entry(producer_id).or_default();
        if epoch > e.epoch {
            e.epoch = epoch;
            e.batches.clear();
        }
        if let Some(first) = e.txn_first_offset.take() {
            if !commit {
                self.aborted.push(AbortedTxn {
                    producer_id,
                    first_offset: first,
                    last_offset: offset,
                });
            }
        }
        e.coordinator_epoch = coordinator_epoch;
        e.last_append_ms = now_ms;
        self.applied_up_to = self.applied_up_to.max(offset + 1);
    }

    /// Replays one record read from the log (recovery).
    pub fn replay(&mut self, r: &RecordView<'_>, now_ms: i64) {
        if r.offset < self.applied_up_to {
            return;
        }
        let Some(p) = r.meta.producer else {
            self.applied_up_to = r.offset + 1;
            return;
        };
        if r.meta.control {
            let kind = r
                .key
                .filter(|k| k.len() >= 4)
                .map(|k| i16::from_be_bytes([k[2], k[3]]));
            let coordinator_epoch = r
                .value
                .filter(|v| v.len() >= 6)
                .map_or(0, |v| i32::from_be_bytes([v[2], v[3], v[4], v[5]]));
            match kind {
                Some(CONTROL_COMMIT) => self.apply_marker(
                    p.producer_id,
                    p.producer_epoch,
                    true,
                    coordinator_epoch,
                    r.offset,
                    now_ms,
                ),
                Some(CONTROL_ABORT) => self.apply_marker(
                    p.producer_id,
                    p.producer_epoch,
                    false,
                    coordinator_epoch,
                    r.offset,
                    now_ms,
                ),
                _ => self.applied_up_to = r.offset + 1,
            }
            return;
        }
        let a = ProducerAppend {
            producer_id: p.producer_id,
            producer_epoch: p.producer_epoch,
            base_sequence: p.sequence,
            record_count: 1,
            transactional: r.meta.transactional,
        };
        self.apply_append(&a, r.offset, r.offset, r.timestamp_ms, now_ms);
    }

    /// First offset of the oldest open transaction.
    pub fn first_unstable_offset(&self) -> Option<u64> {
        self.producers
            .values()
            .filter_map(|e| e.txn_first_offset)
            .min()
    }

    /// Aborted transactions overlapping `from..to` (for a read_committed fetch).
    pub fn aborted_between(&self, from: u64, to: u64) -> Vec<AbortedTxn> {
        self.aborted
            .iter()
            .filter(|a| a.last_offset >= from && a.first_offset < to)
            .copied()
            .collect()
    }

    /// Forgets producers idle for longer than `expiration_ms` with no open
    /// transaction, and aborted transactions wholly below `log_start`.
    pub fn expire(&mut self, now_ms: i64, expiration_ms: i64, log_start: u64) -> usize {
        let before = self.producers.len();
        self.producers.retain(|_, e| {
            e.txn_first_offset.is_some() || now_ms.saturating_sub(e.last_append_ms) <= expiration_ms
        });
        self.aborted.retain(|a| a.last_offset >= log_start);
        before - self.producers.len()
    }
}

/// Producer ids seen in a partition with their state, for DescribeProducers.
pub type ProducerTable = HashMap<i64, ProducerEntry>;

#[cfg(test)]
mod tests {
    use super::*;

    fn app(pid: i64, epoch: i16, seq: i32, n: u32) -> ProducerAppend {
        ProducerAppend {
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            record_count: n,
            transactional: false,
        }
    }

    #[test]
    fn duplicates_gaps_and_epochs() {
        let mut s = ProducerState::default();
        assert_eq!(s.check(&app(1, 0, 0, 5)), Ok(SeqCheck::Fresh));
        s.apply_append(&app(1, 0, 0, 5), 10, 14, 0, 0);
        assert_eq!(
            s.check(&app(1, 0, 0, 5)),
            Ok(SeqCheck::Duplicate {
                base_offset: 10,
                last_offset: 14
            })
        );
        assert_eq!(s.check(&app(1, 0, 5, 2)), Ok(SeqCheck::Fresh));
        assert_eq!(
            s.check(&app(1, 0, 7, 2)),
            Err(SeqError::OutOfOrder {
                expected: 5,
                got: 7
            })
        );
        s.apply_append(&app(1, 0, 5, 2), 20, 21, 0, 0);
        assert_eq!(
            s.check(&app(1, 0, 5, 2)),
            Ok(SeqCheck::Duplicate {
                base_offset: 20,
                last_offset: 21
            })
        );
        assert_eq!(
            s.check(&app(1, 0, 0, 5)),
            Ok(SeqCheck::Duplicate {
                base_offset: 10,
                last_offset: 14
            })
        );
        // Only the last five appends are remembered.
        for k in 0..5u64 {
            s.apply_append(&app(1, 0, 7 + k as i32, 1), 30 + 2 * k, 30 + 2 * k, 0, 0);
        }
        // Epochs: older is stale, newer must start at 0.
        assert_eq!(
            s.check(&app(1, -1, 0, 1)),
            Err(SeqError::StaleEpoch { current: 0 })
        );
        assert_eq!(
            s.check(&app(1, 1, 3, 1)),
            Err(SeqError::OutOfOrder {
                expected: 0,
                got: 3
            })
        );
        assert_eq!(s.check(&app(1, 1, 0, 1)), Ok(SeqCheck::Fresh));
        // Unknown producers may start anywhere.
        assert_eq!(s.check(&app(2, 0, 42, 1)), Ok(SeqCheck::Fresh));
    }

    #[test]
    fn sequences_wrap() {
        let mut s = ProducerState::default();
        s.apply_append(&app(1, 0, i32::MAX - 1, 2), 0, 1, 0, 0);
        assert_eq!(s.check(&app(1, 0, 0, 1)), Ok(SeqCheck::Fresh));
        assert_eq!(app(1, 0, i32::MAX, 3).last_sequence(), 1);
    }

    #[test]
    fn transactions_track_lso_and_aborts() {
        let mut s = ProducerState::default();
        let t = ProducerAppend {
            transactional: true,
            ..app(7, 0, 0, 3)
        };
        s.apply_append(&t, 5, 7, 0, 0);
        s.apply_append(
            &ProducerAppend {
                base_sequence: 3,
                ..t
            },
            9,
            9,
            0,
            0,
        );
        assert_eq!(s.first_unstable_offset(), Some(5));
        s.apply_marker(7, 0, false, 0, 10, 0);
        assert_eq!(s.first_unstable_offset(), None);
        assert_eq!(
            s.aborted_between(0, 100),
            vec![AbortedTxn {
                producer_id: 7,
                first_offset: 5,
                last_offset: 10
            }]
        );
        assert!(s.aborted_between(11, 100).is_empty());
    }
}
