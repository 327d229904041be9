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
//! The table is in memory only: a restart of the group's broker between
//! TxnOffsetCommit and the marker loses them (the commit then commits no
//! offsets). Kafka keeps them in `__consumer_offsets`; es has no such log
//! yet. It holds at most [`REMOTE_OFFSETS_MAX`] offsets.

use std::collections::{BTreeMap, HashMap};

use parking_lot::Mutex;

use super::error::TxnError;
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

impl RemoteOffsets {
    /// Adds offsets of producer (`producer_id`, `epoch`). A newer epoch
    /// replaces what an older one left; an older epoch is fenced.
    pub fn add(
        &self,
        producer_id: i64,
        epoch: i16,
        offsets: Vec<TxnOffset>,
    ) -> Result<(), TxnError> {
        let mut m = self.inner.lock();
        let held: usize = m.values().map(|p| p.offsets.len()).sum();
        if held.saturating_add(offsets.len()) > REMOTE_OFFSETS_MAX {
            return Err(TxnError::CoordinatorNotAvailable);
        }
        let p = m.entry(producer_id).or_insert_with(|| Pending {
            epoch,
            offsets: BTreeMap::new(),
        });
        if epoch < p.epoch {
            return Err(TxnError::ProducerFenced);
        }
        if epoch > p.epoch {
            p.epoch = epoch;
            p.offsets.clear();
        }
        for o in offsets {
            p.offsets
                .insert((o.group.clone(), o.topic.clone(), o.partition), o);
        }
        Ok(())
    }

    /// Removes the offsets of `producer_id` (epoch at most `epoch`) whose
    /// group `owns` says the marker's partition covers, by group.
    pub fn take(
        &self,
        producer_id: i64,
        epoch: i16,
        owns: &dyn Fn(&str) -> bool,
    ) -> BTreeMap<String, Vec<TxnOffset>> {
        let mut m = self.inner.lock();
        let mut out: BTreeMap<String, Vec<TxnOffset>> = BTreeMap::new();
        let Some(p) = m.get_mut(&producer_id).filter(|p| p.epoch <= epoch) else {
            return out;
        };
        let keys: Vec<OffsetKey> = p.offsets.keys().filter(|k| owns(&k.0)).cloned().collect();
        for k in keys {
            if let Some(o) = p.offsets.remove(&k) {
                out.entry(k.0).or_default().push(o);
            }
        }
        if p.offsets.is_empty() {
            m.remove(&producer_id);
        }
        out
    }

    /// Puts offsets back after a failed commit (the marker is resent).
    pub fn restore(&self, producer_id: i64, epoch: i16, offsets: Vec<TxnOffset>) {
        let mut m = self.inner.lock();
        let p = m.entry(producer_id).or_insert_with(|| Pending {
            epoch,
            offsets: BTreeMap::new(),
        });
        if p.epoch == epoch {
            for o in offsets {
                p.offsets
                    .entry((o.group.clone(), o.topic.clone(), o.partition))
                    .or_insert(o);
            }
        }
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

    #[test]
    fn offsets_are_kept_per_producer_and_settled_by_group() {
        let r = RemoteOffsets::default();
        r.add(7, 1, vec![off("a", 0, 5), off("b", 0, 6)]).unwrap();
        r.add(7, 1, vec![off("a", 0, 9)]).unwrap();
        assert!(r.has("a", "in", 0) && r.has("b", "in", 0));
        assert_eq!(
            r.add(7, 0, vec![off("a", 1, 1)]),
            Err(TxnError::ProducerFenced)
        );
        // A marker of an older epoch settles nothing.
        assert!(r.take(7, 0, &|_| true).is_empty());
        let a = r.take(7, 1, &|g| g == "a");
        assert_eq!(a["a"].len(), 1);
        assert_eq!(a["a"][0].offset, 9, "the last commit of a partition wins");
        assert!(!r.has("a", "in", 0) && r.has("b", "in", 0));
        // A newer epoch replaces what the fenced producer left.
        r.add(7, 2, vec![off("c", 0, 1)]).unwrap();
        assert!(!r.has("b", "in", 0));
        assert_eq!(r.take(7, 2, &|_| true).len(), 1);
        assert!(r.inner.lock().is_empty());
    }

    #[test]
    fn the_table_is_bounded() {
        let r = RemoteOffsets::default();
        let many: Vec<TxnOffset> = (0..REMOTE_OFFSETS_MAX as i32)
            .map(|p| off("g", p, 1))
            .collect();
        r.add(1, 0, many).unwrap();
        assert_eq!(
            r.add(2, 0, vec![off("g", 0, 1)]),
            Err(TxnError::CoordinatorNotAvailable)
        );
    }
}
