//! Where producer ids come from: blocks of [`PID_BLOCK_SIZE`] ids, each
//! reserved in the producers journal before any id of it is handed out.
//!
//! In a cluster two brokers must never hand out the same id, so a block is
//! granted by the metadata quorum (one Raft entry per block, Kafka's
//! AllocateProducerIds: `[first, first + count)` to one broker, the next
//! block after the last). The source asks for a block starting at or after
//! this broker's journal high mark, so a data directory that handed out ids
//! before the quorum existed never hands them out again. Without a source
//! (a broker opened without the quorum, unit tests) the journal's own
//! counter is the block source, as it was before the quorum.
//!
//! Either way the journal records the block's end (`ReservePids`), and a
//! restart starts past it: ids of a block not used up before a restart are
//! skipped, never reused.

use super::error::TxnError;
use super::PID_BLOCK_SIZE;

/// A grantor of producer-id blocks (the metadata quorum).
pub trait PidBlocks: Send + Sync + std::fmt::Debug {
    /// A block `[first, until)` no one was ever granted, with `first >=
    /// at_least`. Blocking (a Raft round trip); bounded by a timeout.
    fn next_block(&self, at_least: i64) -> Result<(i64, i64), TxnError>;
}

/// The next block: from `source`, or the journal's counter after `floor`.
pub(super) fn next_block(
    source: Option<&dyn PidBlocks>,
    floor: i64,
) -> Result<(i64, i64), TxnError> {
    let (first, until) = match source {
        Some(s) => s.next_block(floor)?,
        None => (
            floor,
            floor
                .checked_add(PID_BLOCK_SIZE)
                .ok_or(TxnError::ProducerIdsExhausted)?,
        ),
    };
    if first < floor || until <= first {
        tracing::error!(first, until, floor, "producer-id block refused");
        return Err(TxnError::CoordinatorNotAvailable);
    }
    Ok((first, until))
}

/// Takes the block `[first, until)` into the counters when it is newer than
/// the one in use. A block that arrives after a newer one (two threads ran
/// out at once) is dropped: the ids left in it are skipped, never reused.
pub(super) fn adopt_block(next: &mut i64, reserved_until: &mut i64, first: i64, until: i64) {
    if until > *reserved_until {
        *next = (*next).max(first);
        *reserved_until = until;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use es_meta::records::{MetaRequest, MetaResponse, RegisterBroker};
    use es_meta::MetaImage;
    use es_storage::RealFs;
    use parking_lot::Mutex;

    use crate::txn::{TxnConfig, TxnCoordinator};

    /// One metadata image shared by several brokers, applied in order as
    /// the quorum's log would be.
    #[derive(Debug)]
    struct Quorum(Mutex<(MetaImage, u64)>);

    #[derive(Debug)]
    struct Grantor {
        quorum: Arc<Quorum>,
        broker: i32,
    }

    impl PidBlocks for Grantor {
        fn next_block(&self, at_least: i64) -> Result<(i64, i64), TxnError> {
            let mut q = self.quorum.0.lock();
            q.1 += 1;
            let index = q.1;
            let req = MetaRequest::AllocateProducerIdsFrom {
                broker_id: self.broker,
                count: PID_BLOCK_SIZE as i32,
                at_least,
            };
            match q.0.apply(index, &req).0 {
                MetaResponse::ProducerIds { first, count } => Ok((first, first + i64::from(count))),
                _ => Err(TxnError::CoordinatorNotAvailable),
            }
        }
    }

    fn quorum(brokers: &[i32]) -> Arc<Quorum> {
        let mut img = MetaImage::default();
        for (i, &b) in brokers.iter().enumerate() {
            let r = RegisterBroker {
                broker_id: b,
                incarnation_id: format!("i{b}"),
                cluster_id: String::new(),
                endpoints: Vec::new(),
                rack: None,
            };
            img.apply(i as u64 + 1, &MetaRequest::RegisterBroker(r));
        }
        Arc::new(Quorum(Mutex::new((img, 100))))
    }

    fn coordinator(dir: &std::path::Path, q: &Arc<Quorum>, broker: i32) -> TxnCoordinator {
        let c = TxnCoordinator::open(
            Arc::new(RealFs),
            dir,
            TxnConfig::default(),
            es_storage::clock::system(),
        )
        .expect("open");
        c.set_pid_blocks(Arc::new(Grantor {
            quorum: q.clone(),
            broker,
        }));
        c
    }

    #[test]
    fn brokers_never_share_ids_and_restarts_never_reuse() {
        let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let q = quorum(&[1, 2]);
        let mut seen = std::collections::HashSet::new();
        for round in 0..3 {
            let (a, b) = (coordinator(d1.path(), &q, 1), coordinator(d2.path(), &q, 2));
            // Interleaved, so the brokers' blocks alternate in the log.
            for i in 0..(PID_BLOCK_SIZE + 7) {
                for c in [&a, &b] {
                    let pid = c.allocate_producer_id().expect("pid");
                    assert!(seen.insert(pid), "round {round}, step {i}: {pid} twice");
                }
            }
        }
        // Three rounds of just over one block each, per broker: a restart
        // skips the rest of its block, so at most 2 blocks per round each.
        assert!(q.0.lock().0.next_producer_id <= 3 * 2 * 2 * PID_BLOCK_SIZE);
    }

    #[test]
    fn the_first_block_starts_past_the_journal_high_mark() {
        let dir = tempfile::tempdir().unwrap();
        // A data directory from before the quorum: ids from its journal.
        let old = TxnCoordinator::open(
            Arc::new(RealFs),
            dir.path(),
            TxnConfig::default(),
            es_storage::clock::system(),
        )
        .expect("open");
        let used: Vec<i64> = (0..(PID_BLOCK_SIZE * 2 + 3))
            .map(|_| old.allocate_producer_id().expect("pid"))
            .collect();
        drop(old);
        let q = quorum(&[1]);
        let c = coordinator(dir.path(), &q, 1);
        let next = c.allocate_producer_id().expect("pid");
        assert!(
            used.iter().all(|&u| u < next),
            "{next} was handed out before"
        );
        assert_eq!(
            next,
            3 * PID_BLOCK_SIZE,
            "the journal reserved three blocks"
        );
    }

    #[test]
    fn a_late_block_is_dropped() {
        let (mut next, mut until) = (1500, 2000);
        adopt_block(&mut next, &mut until, 1000, 2000);
        assert_eq!((next, until), (1500, 2000));
        adopt_block(&mut next, &mut until, 5000, 6000);
        assert_eq!((next, until), (5000, 6000));
    }
}
