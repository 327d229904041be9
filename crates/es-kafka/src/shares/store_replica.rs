//! The followers' side of a share-partition's files (docs/share-groups-design.md
//! §3.10): on the leader, the latest writes kept for followers ([`Recent`])
//! and what a follower lacks ([`ShareStore::replica_view`]); on a follower,
//! taking the leader's whole state ([`ShareStore::install`]) or one of its
//! writes ([`ShareStore::write_copied`]) into its own files.

use std::sync::Arc;

use es_storage::journal::Ticket;
use es_storage::StorageError;

use super::{check_batch, check_offset, decode_entry, Entry, Replay, ShareState, ShareStore};

/// Writes this store made lately, as followers copy them: each write's
/// entries (one change, so a follower writes them together too) with the
/// sequence of its last entry. Bounded by [`RECENT_WRITES_MAX`] and
/// [`RECENT_BYTES_MAX`]; a follower further behind takes the whole state.
#[derive(Default)]
pub(super) struct Recent {
    writes: std::collections::VecDeque<(u64, Arc<Vec<Vec<u8>>>)>,
    bytes: usize,
}

/// The most writes [`Recent`] keeps (a follower is a round trip behind).
pub const RECENT_WRITES_MAX: usize = 256;
/// The most entry bytes [`Recent`] keeps.
pub const RECENT_BYTES_MAX: usize = 256 * 1024;

impl Recent {
    pub(super) fn push(&mut self, last_seq: u64, payloads: &[Vec<u8>]) {
        let n: usize = payloads.iter().map(Vec::len).sum();
        self.writes
            .push_back((last_seq, Arc::new(payloads.to_vec())));
        self.bytes += n;
        while self.writes.len() > RECENT_WRITES_MAX
            || (self.bytes > RECENT_BYTES_MAX && self.writes.len() > 1)
        {
            if let Some((_, w)) = self.writes.pop_front() {
                self.bytes -= w.iter().map(Vec::len).sum::<usize>();
            }
        }
    }

    /// The writes after sequence `after`, if every one of them is still
    /// here and `after` ends a write (writes are contiguous in sequence).
    fn after(&self, after: u64) -> Option<Vec<Arc<Vec<Vec<u8>>>>> {
        let oldest = self.oldest_first_seq()?;
        let aligned = after.checked_add(1) == Some(oldest)
            || self.writes.iter().any(|(last, _)| *last == after);
        if !aligned {
            return None;
        }
        Some(
            self.writes
                .iter()
                .filter(|(last, _)| *last > after)
                .map(|(_, w)| w.clone())
                .collect(),
        )
    }

    /// The sequence of the first entry of the oldest write kept.
    fn oldest_first_seq(&self) -> Option<u64> {
        self.writes
            .front()
            .map(|(last, w)| last + 1 - w.len() as u64)
    }
}

/// What a follower needs of this store to hold what the leader holds
/// ([`ShareStore::replica_view`]).
#[derive(Clone, Debug)]
pub enum ReplicaView {
    /// The follower's copy is current.
    Current { seq: u64 },
    /// The writes after the follower's sequence, in order, up to `seq`.
    Writes {
        seq: u64,
        writes: Vec<Arc<Vec<Vec<u8>>>>,
    },
    /// The whole state, at `seq`.
    Full { seq: u64, state: ShareState },
}

impl ShareStore {
    /// What a follower holding this store's state up to sequence `after`
    /// (`None`: nothing) needs to hold all of it (§3.10): nothing, the
    /// writes since, or the whole state when those are no longer kept here
    /// or `after` is not a point of this store's history. `None` when the
    /// store has no state (the follower removes its copy).
    pub fn replica_view(&self, after: Option<u64>) -> Option<ReplicaView> {
        let g = self.inner.lock();
        if g.fenced.is_some() {
            return None;
        }
        let state = g.state.as_ref()?;
        let seq = self.journal.last_seq().unwrap_or(0);
        let full = || ReplicaView::Full {
            seq,
            state: state.clone(),
        };
        Some(match after {
            Some(a) if a == seq => ReplicaView::Current { seq },
            Some(a) if a < seq => match g.recent.after(a) {
                Some(writes) => ReplicaView::Writes { seq, writes },
                None => full(),
            },
            _ => full(),
        })
    }

    /// A follower's copy takes the leader's whole state (§3.10): a snapshot
    /// of `state` replaces the files at once (the snapshot's sequence is
    /// past every entry of the journal, so a crash before the journal is
    /// emptied replays none of them), then the journal is emptied. Durable
    /// when this returns. Blocking.
    pub fn install(&self, state: &ShareState) -> Result<(), StorageError> {
        if state.topic_id != self.topic_id {
            return Err(StorageError::Invalid(format!(
                "a share state of topic id {} for topic id {}",
                state.topic_id, self.topic_id
            )));
        }
        check_offset("start offset", state.view.start_offset())
            .map_err(|e| StorageError::Invalid(e.to_string()))?;
        for b in state.view.batches() {
            check_batch(&b).map_err(|e| StorageError::Invalid(e.to_string()))?;
        }
        let mut g = self.inner.lock();
        if let Some(why) = &g.fenced {
            return Err(StorageError::Fenced(format!(
                "{}: {why}",
                self.files.journal.display()
            )));
        }
        let seq = self.journal.last_seq().map_or(0, |s| s + 1);
        self.journal.ensure_next_seq(seq + 1);
        let res = self.replace_snapshot(state, seq);
        match &res {
            Ok(()) => {
                g.state = Some(state.clone());
                g.recent = Recent::default();
            }
            Err(e) => {
                tracing::error!(journal = %self.files.journal.display(), error = %e, "installing a leader's share state failed; fenced until restart");
                g.fenced = Some(format!("install failed: {e}"));
            }
        }
        res
    }

    /// A follower's copy takes one write of the leader (§3.10): `payloads`
    /// are one change's entries as the leader wrote them, untrusted: each
    /// must decode, a split Update must be whole, an Init must name this
    /// store's topic id, and the change must apply (an Update needs state).
    /// Written as one write, so a torn tail never leaves half of it. Not
    /// durable until [`ShareStore::sync`].
    pub fn write_copied(&self, payloads: &[Vec<u8>]) -> Result<Ticket, StorageError> {
        if payloads.is_empty() {
            return Err(StorageError::Invalid("an empty copied write".into()));
        }
        let mut entries = Vec::with_capacity(payloads.len());
        for p in payloads {
            let e = decode_entry(p).map_err(|e| StorageError::Invalid(e.to_string()))?;
            if let Entry::Init { topic_id, .. } = &e {
                if *topic_id != self.topic_id {
                    return Err(StorageError::Invalid(format!(
                        "an init of topic id {topic_id} for topic id {}",
                        self.topic_id
                    )));
                }
            }
            entries.push(e);
        }
        let last = entries.len() - 1;
        for (i, e) in entries.iter().enumerate() {
            let part = matches!(e, Entry::Update { last: false, .. });
            let closes = matches!(e, Entry::Update { last: true, .. });
            if (i < last && !part) || (i == last && part) || (i > 0 && i == last && !closes) {
                return Err(StorageError::Invalid(
                    "a copied write is not one whole change".into(),
                ));
            }
        }
        let mut g = self.inner.lock();
        if let Some(why) = &g.fenced {
            return Err(StorageError::Fenced(format!(
                "{}: {why}",
                self.files.journal.display()
            )));
        }
        let mut replay = Replay {
            state: g.state.clone(),
            parts: Vec::new(),
        };
        for e in entries {
            replay.push(e).map_err(StorageError::Invalid)?;
        }
        let refs: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
        let (ticket, last_seq) = self.journal.write(&refs, self.clock.now_ms())?;
        g.state = replay.state;
        g.recent.push(last_seq, payloads);
        Ok(ticket)
    }
}
