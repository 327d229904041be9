//! Transactional offsets this broker took as a group's coordinator for a
//! transaction another broker coordinates.
//!
//! TxnOffsetCommit goes to the group's coordinator, EndTxn to the
//! transaction's. When they are the same broker the offsets ride in the
//! transaction's record (journaled, committed by
//! [`super::coordinator`] on completion). When they are not, the group's
//! broker keeps them here, keyed by producer id, until the transaction
//! coordinator sends WriteTxnMarkers for the group's `__consumer_offsets`
//! partition: COMMIT makes them the group's committed offsets (through the
//! [`super::TxnOffsetSink`]), ABORT drops them. Kafka keys them the same
//! way (pending transactional offsets per producer id in the group
//! metadata).
//!
//! Every change is journaled in the producers journal
//! (`LogEntry::RemoteOffsets`, the producer's whole pending set) before it
//! is applied, under the table's lock so journal order is table order; a
//! restart reloads them. Settling commits the offsets to the group first
//! and journals their removal after, so a crash in between leaves them
//! pending and a resent marker commits them again (the group's commit is
//! idempotent). It holds at most [`REMOTE_OFFSETS_MAX`] offsets.

use std::collections::{BTreeMap, HashMap};

use parking_lot::Mutex;

use super::error::TxnError;
use super::log::{LogEntry, RemotePending};
use super::state::TxnOffset;

/// Most pending offsets held for remote transactions, over all producers.
pub const REMOTE_OFFSETS_MAX: usize = 100_000;

/// (group, topic, partition).
type OffsetKey = (String, String, i32);

#[derive(Debug)]
struct Pending {
    epoch: i16,
    offsets: BTreeMap<OffsetKey, TxnOffset>,
}

/// Pending offsets by producer id.
#[derive(Debug, Default)]
pub struct RemoteOffsets {
    inner: Mutex<HashMap<i64, Pending>>,
}

/// Journals one entry (the coordinator's producers journal).
pub type Persist<'a> = &'a dyn Fn(LogEntry) -> Result<(), TxnError>;

fn entry(producer_id: i64, p: Option<&Pending>) -> LogEntry {
    LogEntry::RemoteOffsets {
        producer_id,
        epoch: p.map_or(0, |p| p.epoch),
        offsets: p.map_or_else(Vec::new, |p| p.offsets.values().cloned().collect()),
    }
}

impl RemoteOffsets {
    /// The table a replayed journal left.
    pub fn from_log(held: &BTreeMap<i64, RemotePending>) -> Self {
        let inner = held
            .iter()
            .map(|(pid, p)| {
                let offsets = p
                    .offsets
                    .iter()
                    .map(|o| ((o.group.clone(), o.topic.clone(), o.partition), o.clone()))
                    .collect();
                (
                    *pid,
                    Pending {
                        epoch: p.epoch,
                        offsets,
                    },
                )
            })
            .collect();
        RemoteOffsets {
            inner: Mutex::new(inner),
        }
    }

    /// Adds offsets of producer (`producer_id`, `epoch`), durably. A newer
    /// epoch replaces what an older one left; an older epoch is fenced.
    pub fn add(
        &self,
        producer_id: i64,
        epoch: i16,
        offsets: Vec<TxnOffset>,
        persist: Persist<'_>,
    ) -> Result<(), TxnError> {
        let mut m = self.inner.lock();
        let held: usize = m.values().map(|p| p.offsets.len()).sum();
        if held.saturating_add(offsets.len()) > REMOTE_OFFSETS_MAX {
            return Err(TxnError::CoordinatorNotAvailable);
        }
        let mut p = match m.get(&producer_id) {
            Some(p) if epoch < p.epoch => return Err(TxnError::ProducerFenced),
            Some(p) if epoch == p.epoch => Pending {
                epoch,
                offsets: p.offsets.clone(),
            },
            _ => Pending {
                epoch,
                offsets: BTreeMap::new(),
            },
        };
        for o in offsets {
            p.offsets
                .insert((o.group.clone(), o.topic.clone(), o.partition), o);
        }
        persist(entry(producer_id, Some(&p)))?;
        m.insert(producer_id, p);
        Ok(())
    }

    /// The offsets of `producer_id` (epoch at most `epoch`) whose group
    /// `owns` says the marker's partition covers, by group; unchanged.
    pub fn peek(
        &self,
        producer_id: i64,
        epoch: i16,
        owns: &dyn Fn(&str) -> bool,
    ) -> BTreeMap<String, Vec<TxnOffset>> {
        let m = self.inner.lock();
        let mut out: BTreeMap<String, Vec<TxnOffset>> = BTreeMap::new();
        if let Some(p) = m.get(&producer_id).filter(|p| p.epoch <= epoch) {
            for (k, o) in p.offsets.iter().filter(|(k, _)| owns(&k.0)) {
                out.entry(k.0.clone()).or_default().push(o.clone());
            }
        }
        out
    }

    /// Removes the offsets of `producer_id` (epoch at most `epoch`) whose
    /// group `owns` covers, durably.
    pub fn remove(
        &self,
        producer_id: i64,
        epoch: i16,
        owns: &dyn Fn(&str) -> bool,
        persist: Persist<'_>,
    ) -> Result<(), TxnError> {
        let mut m = self.inner.lock();
        let Some(p) = m.get(&producer_id).filter(|p| p.epoch <= epoch) else {
            return Ok(());
        };
        let left = Pending {
            epoch: p.epoch,
            offsets: p
                .offsets
                .iter()
                .filter(|(k, _)| !owns(&k.0))
                .map(|(k, o)| (k.clone(), o.clone()))
                .collect(),
        };
        if left.offsets.len() == p.offsets.len() {
            return Ok(());
        }
        if left.offsets.is_empty() {
            persist(entry(producer_id, None))?;
            m.remove(&producer_id);
        } else {
            persist(entry(producer_id, Some(&left)))?;
            m.insert(producer_id, left);
        }
        Ok(())
    }

    /// Whether an offset of this group partition is pending.
    pub fn has(&self, group: &str, topic: &str, partition: i32) -> bool {
        self.inner.lock().values().any(|p| {
            p.offsets
                .keys()
                .any(|k| k.0 == group && k.1 == topic && k.2 == partition)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn off(group: &str, partition: i32, offset: i64) -> TxnOffset {
        TxnOffset {
            group: group.into(),
            topic: "in".into(),
            partition,
            offset,
            leader_epoch: -1,
            metadata: None,
            member_id: String::new(),
            generation_id: -1,
            instance_id: None,
        }
    }

    fn ok(_: LogEntry) -> Result<(), TxnError> {
        Ok(())
    }

    #[test]
    fn offsets_are_kept_per_producer_and_settled_by_group() {
        let r = RemoteOffsets::default();
        r.add(7, 1, vec![off("a", 0, 5), off("b", 0, 6)], &ok)
            .unwrap();
        r.add(7, 1, vec![off("a", 0, 9)], &ok).unwrap();
        assert!(r.has("a", "in", 0) && r.has("b", "in", 0));
        assert_eq!(
            r.add(7, 0, vec![off("a", 1, 1)], &ok),
            Err(TxnError::ProducerFenced)
        );
        // A marker of an older epoch settles nothing.
        assert!(r.peek(7, 0, &|_| true).is_empty());
        let a = r.peek(7, 1, &|g| g == "a");
        assert_eq!(a["a"].len(), 1);
        assert_eq!(a["a"][0].offset, 9, "the last commit of a partition wins");
        r.remove(7, 1, &|g| g == "a", &ok).unwrap();
        assert!(!r.has("a", "in", 0) && r.has("b", "in", 0));
        // A newer epoch replaces what the fenced producer left.
        r.add(7, 2, vec![off("c", 0, 1)], &ok).unwrap();
        assert!(!r.has("b", "in", 0));
        assert_eq!(r.peek(7, 2, &|_| true).len(), 1);
        r.remove(7, 2, &|_| true, &ok).unwrap();
        assert!(r.inner.lock().is_empty());
    }

    #[test]
    fn a_failed_journal_write_changes_nothing_and_a_replay_restores() {
        let r = RemoteOffsets::default();
        let fail = |_: LogEntry| Err(TxnError::JournalFailed);
        assert_eq!(
            r.add(1, 0, vec![off("g", 0, 1)], &fail),
            Err(TxnError::JournalFailed)
        );
        assert!(!r.has("g", "in", 0));
        let log = std::cell::RefCell::new(crate::txn::log::LogState::default());
        let keep = |e: LogEntry| {
            log.borrow_mut().apply(&e);
            Ok(())
        };
        r.add(1, 0, vec![off("g", 0, 1), off("h", 0, 2)], &keep)
            .unwrap();
        r.remove(1, 0, &|g| g == "g", &keep).unwrap();
        let replayed = RemoteOffsets::from_log(&log.borrow().remote_offsets);
        assert!(!replayed.has("g", "in", 0) && replayed.has("h", "in", 0));
        r.remove(1, 0, &|_| true, &keep).unwrap();
        assert!(log.borrow().remote_offsets.is_empty());
    }

    #[test]
    fn the_table_is_bounded() {
        let r = RemoteOffsets::default();
        let many: Vec<TxnOffset> = (0..REMOTE_OFFSETS_MAX as i32)
            .map(|p| off("g", p, 1))
            .collect();
        r.add(1, 0, many, &ok).unwrap();
        assert_eq!(
            r.add(2, 0, vec![off("g", 0, 1)], &ok),
            Err(TxnError::CoordinatorNotAvailable)
        );
    }
}
