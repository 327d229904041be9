//! Where the state of transactional ids lives once it is in the metadata
//! quorum: the leaderships of `__transaction_state` a coordinator loaded
//! ([`Placement`]), the fence of a write ([`TxnFence`]) and the store the
//! writes go to ([`TxnStateStore`]). Plain data and one trait, so that the
//! coordinator ([`super::coordinator`]) and its fail-over
//! ([`super::failover`]) share them without depending on each other.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::error::TxnError;
use super::log::LogEntry;

/// The space of the metadata log's coordinator state that holds
/// transactional ids: key = the transactional id, value = its
/// [`TxnRecord`] as JSON.
pub const TXNS_SPACE: &str = "txns";

/// The partition of `__transaction_state` and the leader epoch a write is
/// made under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxnFence {
    pub partition: i32,
    pub leader_epoch: i32,
}

/// The leaderships of `__transaction_state` as this coordinator knew them
/// when it last loaded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    /// The topic's partition count; 0 while it does not exist.
    pub partitions: i32,
    /// By partition: (leader epoch, led by this broker). While the topic
    /// does not exist: partition 0 at epoch -1, led here when this broker
    /// is the whole cluster (the only writer the metadata log then accepts).
    pub leaders: BTreeMap<i32, (i32, bool)>,
}

impl Placement {
    /// The placement of a broker alone in a cluster with no
    /// `__transaction_state` yet (`alone`), or of one that holds nothing.
    pub fn without_topic(alone: bool) -> Placement {
        Placement {
            partitions: 0,
            leaders: [(0, (-1, alone))].into_iter().collect(),
        }
    }

    /// The fence of a write placed on partition `p`, if this broker
    /// leads it.
    pub fn fence_at(&self, p: i32) -> Option<TxnFence> {
        match self.leaders.get(&p) {
            Some(&(leader_epoch, true)) => Some(TxnFence {
                partition: p,
                leader_epoch,
            }),
            _ => None,
        }
    }

    /// `next` where it is not older than `self`: the topic appearing (or
    /// growing) takes `next` whole; otherwise each partition keeps the
    /// newer leader epoch of the two.
    pub fn advance(&self, next: &Placement) -> Placement {
        if next.partitions != self.partitions {
            return if next.partitions > self.partitions {
                next.clone()
            } else {
                self.clone()
            };
        }
        let mut out = next.clone();
        for (p, mine) in &self.leaders {
            match out.leaders.get(p) {
                Some(n) if n.0 >= mine.0 => {}
                _ => {
                    out.leaders.insert(*p, *mine);
                }
            }
        }
        out
    }

    /// The partitions `next` holds that must be loaded coming from `self`:
    /// held in `next` and not held at the same epoch in `self`.
    pub fn to_load(&self, next: &Placement) -> BTreeSet<i32> {
        let same_topic = self.partitions == next.partitions;
        next.leaders
            .iter()
            .filter(|(p, (epoch, mine))| {
                *mine && (!same_topic || self.leaders.get(p) != Some(&(*epoch, true)))
            })
            .map(|(p, _)| *p)
            .collect()
    }
}

/// Where the coordinator writes transactional ids' state once it lives in
/// the metadata quorum (the broker's implementation proposes a
/// `coordinator_state.v1` entry). Blocking, bounded by a timeout.
pub trait TxnStateStore: Send + Sync + std::fmt::Debug {
    /// The partition of `__transaction_state` (of `partitions`) that
    /// places `id` (Kafka's hash of the key).
    fn partition_of(&self, id: &str, partitions: i32) -> i32;

    /// Makes `entries` (`Txn` and `Remove` entries) durable under `fence`.
    /// Errors: refused by the fence, `JournalFailed` (NOT_COORDINATOR);
    /// no answer in time or no quorum, `CoordinatorNotAvailable`.
    fn write(&self, fence: TxnFence, entries: &[LogEntry]) -> Result<(), TxnError>;
}

/// What [`TxnCoordinator::apply_placement`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Loaded {
    /// Partitions loaded.
    pub partitions: Vec<i32>,
    /// Transactional ids loaded, and how many of them are in a Prepare
    /// state (to be completed).
    pub ids: usize,
    pub prepared: usize,
    /// Transactional ids dropped.
    pub dropped: usize,
}

/// What a coordinator whose state is in the metadata quorum holds: the
/// leaderships it loaded and the store its writes go to.
#[derive(Clone, Debug)]
pub struct Held {
    pub placement: Placement,
    pub store: Arc<dyn TxnStateStore>,
}

impl Held {
    /// The partition of `__transaction_state` that places `id`.
    pub fn partition_of(&self, id: &str) -> i32 {
        if self.placement.partitions <= 0 {
            0
        } else {
            self.store.partition_of(id, self.placement.partitions)
        }
    }

    /// The fence of a write of `id`, if this coordinator holds it.
    pub fn fence(&self, id: &str) -> Option<TxnFence> {
        self.placement.fence_at(self.partition_of(id))
    }
}
