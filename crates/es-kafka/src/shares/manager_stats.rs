//! The counters of [`super::ShareManager`] that `/metrics` reads
//! (docs/metrics.md "Share groups"): counted where the work happens, read
//! at scrape time.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::shares::partition::AckBatch;

/// What the share-partitions did since the broker started, for /metrics
/// (docs/metrics.md `es_share_*`): counted where it happens, read at
/// scrape time.
#[derive(Debug, Default)]
pub struct ShareStats {
    /// Records handed out by ShareFetch (each delivery counts).
    pub acquired_records: AtomicU64,
    /// Records acknowledged, by AcknowledgeType: 0 Gap, 1 Accept, 2
    /// Release, 3 Reject, 4 Renew.
    pub acknowledged_records: [AtomicU64; 5],
    /// Records whose acquisition lock expired.
    pub lock_expirations: AtomicU64,
    /// fsyncs of share journals (one covers every change waiting).
    pub journal_fsyncs: AtomicU64,
}

impl ShareStats {
    /// The label of AcknowledgeType `t` (0-4) in `es_share_acknowledged_records_total`.
    pub const ACK_TYPES: [&'static str; 5] = ["gap", "accept", "release", "reject", "renew"];

    pub(super) fn count_acks(&self, batches: &[AckBatch]) {
        for b in batches {
            if let [t] = b.types[..] {
                self.add_ack(t, b.last - b.first + 1);
            } else {
                for &t in &b.types {
                    self.add_ack(t, 1);
                }
            }
        }
    }

    fn add_ack(&self, t: i8, n: i64) {
        if let Some(c) = usize::try_from(t)
            .ok()
            .and_then(|i| self.acknowledged_records.get(i))
        {
            c.fetch_add(u64::try_from(n).unwrap_or(0), Ordering::Relaxed);
        }
    }
}
