//! The transaction coordinator's requests for transactions another broker
//! coordinates: TxnOffsetCommit taken as the group's coordinator, and the
//! WriteTxnMarkers that settles those offsets ([`super::remote_offsets`]
//! holds them in between, in the metadata quorum once the broker has
//! started it), and the one-time import of what `producers.journal` held.

use std::collections::BTreeMap;

use super::coordinator::TxnCoordinator;
use super::error::TxnError;
use super::log::{LogEntry, RemotePending};
use super::remote_offsets::RemoteOffsets;
use super::state::TxnOffset;

impl TxnCoordinator {
    /// TxnOffsetCommit at the group's coordinator for a transaction another
    /// broker coordinates: checks the member, keeps the offsets until the
    /// transaction's marker for the group's offsets partition arrives.
    #[allow(clippy::too_many_arguments)]
    pub fn txn_offset_commit_remote(
        &self,
        producer_id: i64,
        epoch: i16,
        group: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
        offsets: Vec<TxnOffset>,
    ) -> Result<(), TxnError> {
        if producer_id < 0 || epoch < 0 {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        if let Some(sink) = self.offset_sink() {
            sink.validate_member(group, member_id, instance_id, generation_id)?;
        }
        self.remote_offsets
            .add(group, producer_id, epoch, offsets, &|e| {
                self.journal_entry(e)
            })
    }

    /// WriteTxnMarkers for an offsets partition: commits (durably, before
    /// returning) or drops the pending offsets of the groups `owns` covers.
    /// The commit comes first, the removal after: a crash in between leaves
    /// them pending, and the resent marker commits again.
    pub fn settle_remote_offsets(
        &self,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        owns: &dyn Fn(&str) -> bool,
    ) -> Result<(), TxnError> {
        let sink = self.offset_sink();
        let commit_to = |group: &str, offsets: &[TxnOffset]| match &sink {
            Some(sink) => sink.commit_offsets(group, offsets),
            None => {
                tracing::warn!(
                    producer_id,
                    group,
                    "no group coordinator registered; offsets dropped"
                );
                Ok(())
            }
        };
        self.remote_offsets
            .settle(producer_id, epoch, commit, owns, &commit_to, &|e| {
                self.journal_entry(e)
            })
    }

    /// The offsets held for transactions other brokers coordinate, for the
    /// broker to mirror the metadata log into ([`RemoteOffsets`]).
    pub fn remote_offsets(&self) -> &RemoteOffsets {
        &self.remote_offsets
    }

    /// The pending offsets `producers.journal` holds (written before they
    /// moved to the metadata quorum), by producer id.
    pub fn journaled_remote_offsets(&self) -> BTreeMap<i64, RemotePending> {
        self.log.state().remote_offsets
    }

    /// The journal keeps only `left` of producer `producer_id` (the rest
    /// was imported into the metadata quorum); then folds. Blocking.
    pub fn forget_journaled_remote(
        &self,
        left: &BTreeMap<i64, RemotePending>,
        producers: &[i64],
    ) -> Result<(), es_storage::StorageError> {
        if producers.is_empty() {
            return Ok(());
        }
        let entries: Vec<LogEntry> = producers
            .iter()
            .map(|pid| {
                let p = left.get(pid);
                LogEntry::RemoteOffsets {
                    producer_id: *pid,
                    epoch: p.map_or(0, |p| p.epoch),
                    offsets: p.map_or_else(Vec::new, |p| p.offsets.clone()),
                }
            })
            .collect();
        self.log.append(&entries)?;
        self.log.fold()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use es_storage::RealFs;

    use super::*;
    use crate::txn::TxnConfig;

    fn open(dir: &std::path::Path) -> TxnCoordinator {
        TxnCoordinator::open(
            Arc::new(RealFs),
            dir,
            TxnConfig::default(),
            es_storage::clock::system(),
        )
        .expect("open")
    }

    #[test]
    fn held_offsets_survive_a_restart_until_settled() {
        let dir = tempfile::tempdir().expect("tmp");
        let o = TxnOffset {
            group: "g".into(),
            topic: "t".into(),
            partition: 0,
            offset: 4,
            leader_epoch: -1,
            metadata: None,
            member_id: String::new(),
            generation_id: -1,
            instance_id: None,
        };
        open(dir.path())
            .txn_offset_commit_remote(9, 2, "g", "", None, -1, vec![o])
            .expect("held");
        let c = open(dir.path());
        assert!(
            c.has_pending_offset("g", "t", 0),
            "replayed from the journal"
        );
        // A marker of an older epoch leaves them; the transaction's settles.
        c.settle_remote_offsets(9, 1, false, &|_| true)
            .expect("older");
        assert!(c.has_pending_offset("g", "t", 0));
        c.settle_remote_offsets(9, 2, false, &|_| true)
            .expect("abort");
        assert!(!c.has_pending_offset("g", "t", 0));
        c.close().expect("fold");
        drop(c);
        assert!(!open(dir.path()).has_pending_offset("g", "t", 0));
    }
}
