//! The transaction coordinator's requests for transactions another broker
//! coordinates: TxnOffsetCommit taken as the group's coordinator, and the
//! WriteTxnMarkers that settles those offsets ([`super::remote_offsets`]
//! holds them in between).

use super::coordinator::TxnCoordinator;
use super::error::TxnError;
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
        self.remote_offsets.add(producer_id, epoch, offsets)
    }

    /// WriteTxnMarkers for an offsets partition: commits (durably, before
    /// returning) or drops the pending offsets of the groups `owns` covers.
    pub fn settle_remote_offsets(
        &self,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        owns: &dyn Fn(&str) -> bool,
    ) -> Result<(), TxnError> {
        let by_group = self.remote_offsets.take(producer_id, epoch, owns);
        if !commit || by_group.is_empty() {
            return Ok(());
        }
        let Some(sink) = self.offset_sink() else {
            tracing::warn!(
                producer_id,
                "no group coordinator registered; offsets dropped"
            );
            return Ok(());
        };
        let mut failed: Option<TxnError> = None;
        for (group, offsets) in by_group {
            if failed.is_none() {
                match sink.commit_offsets(&group, &offsets) {
                    Ok(()) => continue,
                    Err(e) => failed = Some(e),
                }
            }
            self.remote_offsets.restore(producer_id, epoch, offsets);
        }
        failed.map_or(Ok(()), Err)
    }
}
