//! Loading a share-partition into [`ShareManager`] (docs/share-groups-design.md
//! §3.4, §2.2): its files opened and replayed, §3.4's restart rules applied
//! to the core, or, without state, an Init written where
//! `share.auto.offset.reset` (or AlterShareGroupOffsets) says it starts.

use std::sync::Arc;

use es_storage::StorageError;

use super::{Init, Live, LoadedLive, ShareManager, INITIAL_STATE_EPOCH};
use crate::shares::partition::{SharePartition, OFFSET_MAX};
use crate::shares::store::{Loaded, ShareStore};
use crate::shares::target::{AutoOffsetReset, ShareFailure, ShareTarget};

impl ShareManager {
    /// Loads a share-partition (§3.4). The error's flag says whether
    /// something was written before it failed (then the slot is fenced;
    /// otherwise the next use tries again).
    pub(super) fn load(
        &self,
        t: &ShareTarget<'_>,
        init: Init,
    ) -> Result<Option<LoadedLive>, (ShareFailure, bool)> {
        let (mut store, loaded) = ShareStore::open(
            self.fs.clone(),
            &self.data_dir,
            &t.key.group,
            t.topic,
            t.key.partition,
            t.key.topic_id,
            self.clock.clone(),
        )
        .map_err(|e| (ShareFailure::Storage(e), false))?;
        if let Some(b) = *self.fold_bytes.lock() {
            store.set_fold_bytes(b);
        }
        let store = Arc::new(store);
        let leader_epoch = t.log.leader_epoch();
        let log_start = t.log.log_start_offset().max(0);
        let limits = t.config.limits;
        let mut init_ticket = None;
        let core = match loaded {
            Loaded::Fresh | Loaded::Stale { .. } => {
                let start = match init {
                    Init::Absent => return Ok(None),
                    Init::At(start) => start.clamp(0, OFFSET_MAX),
                    Init::AutoReset => self
                        .reset_offset(t)
                        .map_err(|e| (ShareFailure::Storage(e), false))?,
                };
                // Not waited for by a fetch: the first acquisition's fsync
                // covers it (journal order), and before that a crash loses
                // nothing.
                init_ticket = Some(
                    store
                        .write_init(INITIAL_STATE_EPOCH, leader_epoch, start)
                        .map_err(|e| (ShareFailure::Storage(e), true))?,
                );
                SharePartition::new(start, limits)
            }
            Loaded::State(s) => {
                let (core, outcome) = s
                    .restore(log_start, limits)
                    .map_err(|e| (ShareFailure::Share(e), false))?;
                if let Some(u) = &outcome.update {
                    // The archives at the limit and a moved start; a crash
                    // before their fsync makes the next load do them again.
                    store
                        .write_update(leader_epoch, u)
                        .map_err(|e| (ShareFailure::Storage(e), true))?;
                }
                core
            }
        };
        self.replication.changed();
        tracing::debug!(group = %t.key.group, topic = t.topic, partition = t.key.partition,
            start = core.start_offset(), next = core.next_offset(), "share-partition loaded");
        Ok(Some((
            Live {
                core,
                store,
                topic: Arc::from(t.topic),
                leader_epoch,
                fetching: false,
            },
            init_ticket,
        )))
    }

    /// Where a share-partition without stored state starts (§2.2).
    fn reset_offset(&self, t: &ShareTarget<'_>) -> Result<i64, StorageError> {
        let log_start = t.log.log_start_offset().max(0);
        let hw = t.log.high_watermark().max(log_start);
        Ok(match t.config.auto_offset_reset {
            AutoOffsetReset::Latest => hw,
            AutoOffsetReset::Earliest => log_start,
            AutoOffsetReset::ByDuration { ms } => {
                let ts = self.clock.now_ms().saturating_sub(ms.max(0));
                t.log
                    .offset_for_timestamp(ts)?
                    .map_or(hw, |o| o.clamp(log_start, hw))
            }
        })
    }
}
