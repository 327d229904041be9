//! One partition's replication state on this broker: whether it leads the
//! partition, follows another broker, or neither; as leader, what each
//! follower has made durable, the high watermark that follows from it, and
//! the acks=all produces waiting for it.
//!
//! The rule es keeps (docs/replication.md): the high watermark is the
//! smallest *fsynced* log end over the in-sync replicas. A follower fetches
//! from its own fsynced end, so the offset of its fetch is what it has on
//! disk; the leader's own part is its group-commit durable mark, which is
//! never behind what it serves followers (a leader serves only durable
//! records). While the ISR is the leader alone, storage's own durable mark
//! is the high watermark and acks=all waits on the leader's fsync, as on a
//! single node; with followers in the ISR, this module moves the high
//! watermark and answers the waits.
//!
//! The ISR used for the high watermark is Kafka's *maximal* ISR: the
//! committed ISR plus a replica being added, never minus one being removed
//! until the metadata says so. Every ISR change itself is proposed to the
//! metadata quorum by the broker (`broker::replicas`); this module only
//! says which change is due.
//!
//! Lock: one mutex per partition; callbacks (the waits' completions) run
//! after it is released.

use std::collections::BTreeMap;

use parking_lot::Mutex;

/// The role of this broker for one partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Leads it: serves clients and followers.
    Leader,
    /// Follows `leader`: fetches from it, serves no client.
    Follower { leader: i32 },
    /// Neither (no leader is known, or this broker is not a replica).
    Offline,
}

/// Why an acks=all wait did not succeed.
#[derive(Debug)]
pub enum WaitError {
    /// The local fsync failed (the partition is fenced).
    Storage(es_storage::StorageError),
    /// Leadership moved away before the records were replicated.
    NotLeader,
    /// The records are replicated, but the ISR shrank below
    /// `min.insync.replicas` meanwhile (NOT_ENOUGH_REPLICAS_AFTER_APPEND).
    NotEnoughReplicasAfterAppend,
}

/// Completes an acks=all wait.
pub type WaitDone = Box<dyn FnOnce(Result<(), WaitError>) + Send>;

/// A high watermark that moved (None: it did not), and the acks=all waits
/// it decided, to run once the caller has set it in storage.
pub type Advance = (Option<u64>, Vec<(WaitDone, Result<(), WaitError>)>);

/// What the leader knows of one follower.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// The follower's fsynced log end (the offset it last fetched from).
    pub end: u64,
    /// When it last was caught up with the leader (Kafka's
    /// `lastCaughtUpTimeMs`), in the broker clock's ms.
    pub caught_up_ms: i64,
    /// The leader's log end at its previous fetch, and that fetch's time:
    /// a follower that reaches the former was caught up at the latter.
    prev_leader_end: u64,
    prev_fetch_ms: i64,
}

/// The leadership facts from the metadata a role is built from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assignment {
    pub leader: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
}

#[derive(Default)]
struct Inner {
    role: Option<Role>,
    me: i32,
    assignment: Option<Assignment>,
    /// An ISR change proposed and not applied yet.
    pending_isr: Option<Vec<i32>>,
    followers: BTreeMap<i32, Progress>,
    /// The high watermark this module last computed (leader with followers
    /// in the ISR).
    hw: u64,
    /// The leader epoch's first offset (a follower joins the ISR only once
    /// it has reached it).
    epoch_start: u64,
    /// When this broker became leader (followers get a full lag period
    /// from then before they count as lagging).
    leader_since_ms: i64,
    waiters: Vec<(u64, usize, WaitDone)>,
}

/// See the module documentation.
#[derive(Default)]
pub struct Replica {
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for Replica {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let i = self.inner.lock();
        f.debug_struct("Replica")
            .field("role", &i.role)
            .field("assignment", &i.assignment)
            .field("hw", &i.hw)
            .finish()
    }
}

/// What a change of role asks the caller to do with storage and waits.
pub struct Transition {
    pub role: Role,
    /// Whether the role or the leader epoch changed (a new leadership).
    pub changed: bool,
    /// Waits to fail: leadership moved away.
    pub failed: Vec<WaitDone>,
}

impl Replica {
    /// A replica that leads alone until the metadata says otherwise (a
    /// single node, or a partition before the quorum has started).
    pub fn solo() -> Replica {
        Replica::default()
    }

    /// The current role; `Leader` until an assignment has been applied.
    pub fn role(&self) -> Role {
        self.inner.lock().role.unwrap_or(Role::Leader)
    }

    /// The applied assignment, if any.
    pub fn assignment(&self) -> Option<Assignment> {
        self.inner.lock().assignment.clone()
    }

    /// The ISR as it counts now: the committed one, plus a replica being
    /// added (Kafka's maximal ISR). `None` before any assignment.
    pub fn maximal_isr(&self) -> Option<Vec<i32>> {
        let i = self.inner.lock();
        i.assignment
            .as_ref()
            .map(|a| maximal(&a.isr, &i.pending_isr))
    }

    /// Whether followers take part in the high watermark: leader with an
    /// ISR larger than itself.
    pub fn replicated(&self) -> bool {
        let i = self.inner.lock();
        replicated(&i)
    }

    /// The outcome of an acks=all wait on a leader alone in its ISR, once
    /// the records are on its disk: NOT_LEADER_OR_FOLLOWER if it no longer
    /// leads (a deposed leader's records may be truncated by its
    /// successor), NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR is smaller
    /// than `min_isr`.
    pub fn solo_ack(&self, min_isr: usize) -> Result<(), WaitError> {
        let i = self.inner.lock();
        if i.role.is_some_and(|r| r != Role::Leader) {
            return Err(WaitError::NotLeader);
        }
        min_isr_check(&i, min_isr)
    }

    /// The committed ISR's size (1 before any assignment: a replica that
    /// leads alone). Copies nothing: the produce path asks per partition.
    pub fn isr_len(&self) -> usize {
        self.inner
            .lock()
            .assignment
            .as_ref()
            .map_or(1, |a| a.isr.len())
    }

    /// Applies the metadata's assignment for this partition (this broker is
    /// `me`). `epoch_start` is the log end when this broker becomes leader
    /// of a new epoch (where the epoch's records start).
    pub fn apply(&self, me: i32, a: Assignment, log_end: u64, now_ms: i64) -> Transition {
        let mut i = self.inner.lock();
        i.me = me;
        let role = if a.leader == me {
            Role::Leader
        } else if a.leader >= 0 && a.replicas.contains(&me) {
            Role::Follower { leader: a.leader }
        } else {
            Role::Offline
        };
        let changed = i.role != Some(role)
            || i.assignment.as_ref().map(|o| o.leader_epoch) != Some(a.leader_epoch);
        let mut failed = Vec::new();
        if changed {
            i.followers.clear();
            i.hw = 0;
            if role == Role::Leader {
                i.epoch_start = log_end;
                i.leader_since_ms = now_ms;
            } else {
                failed = i.waiters.drain(..).map(|(_, _, d)| d).collect();
            }
        }
        if let Some(p) = &i.pending_isr {
            // Applied (or overtaken): the metadata's ISR is the truth.
            if *p == a.isr
                || changed
                || i.assignment.as_ref().map(|o| o.partition_epoch) != Some(a.partition_epoch)
            {
                i.pending_isr = None;
            }
        }
        i.role = Some(role);
        i.assignment = Some(a);
        Transition {
            role,
            changed,
            failed,
        }
    }

    /// Notes a proposed ISR change (the high watermark counts a replica
    /// being added at once, one being removed only once applied).
    pub fn propose_isr(&self, isr: Vec<i32>) {
        self.inner.lock().pending_isr = Some(isr);
    }

    /// A proposal failed: the committed ISR stays in force.
    pub fn proposal_failed(&self) {
        self.inner.lock().pending_isr = None;
    }

    /// Whether an ISR change is in flight.
    pub fn proposing(&self) -> bool {
        self.inner.lock().pending_isr.is_some()
    }

    /// A follower fetched from `end` (its fsynced log end) while the
    /// leader's log ended at `leader_end`; `durable` is the leader's own
    /// durable end. Returns the new high watermark if it moved, and the
    /// waits it completes (to run after the caller has set the high
    /// watermark in storage).
    pub fn follower_fetched(
        &self,
        follower: i32,
        end: u64,
        leader_end: u64,
        durable: u64,
        now_ms: i64,
    ) -> Advance {
        let mut i = self.inner.lock();
        if i.role != Some(Role::Leader) {
            return (None, Vec::new());
        }
        let p = i.followers.entry(follower).or_default();
        if end >= leader_end {
            p.caught_up_ms = now_ms;
        } else if end >= p.prev_leader_end && p.prev_fetch_ms > 0 {
            p.caught_up_ms = p.caught_up_ms.max(p.prev_fetch_ms);
        }
        p.end = end;
        p.prev_leader_end = leader_end;
        p.prev_fetch_ms = now_ms;
        advance(&mut i, durable)
    }

    /// The leader's own durable end moved (or the ISR changed): recomputes
    /// the high watermark.
    pub fn recompute(&self, durable: u64) -> Advance {
        let mut i = self.inner.lock();
        if i.role != Some(Role::Leader) {
            return (None, Vec::new());
        }
        advance(&mut i, durable)
    }

    /// Registers an acks=all wait for the records below `end`, with
    /// `min_isr` (`min.insync.replicas`) checked when it completes. Returns
    /// the wait back when it is already decided (the caller runs it).
    pub fn wait_replicated(
        &self,
        end: u64,
        min_isr: usize,
        done: WaitDone,
    ) -> Option<(WaitDone, Result<(), WaitError>)> {
        let mut i = self.inner.lock();
        if i.role.is_some_and(|r| r != Role::Leader) {
            return Some((done, Err(WaitError::NotLeader)));
        }
        if i.hw >= end {
            let r = min_isr_check(&i, min_isr);
            return Some((done, r));
        }
        i.waiters.push((end, min_isr, done));
        None
    }

    /// Followers in the ISR whose last catch-up is older than `lag_max_ms`
    /// (Kafka's `replica.lag.time.max.ms`): the ISR without them, if any.
    pub fn shrink_due(&self, now_ms: i64, lag_max_ms: i64) -> Option<Vec<i32>> {
        let i = self.inner.lock();
        if i.role != Some(Role::Leader) || i.pending_isr.is_some() {
            return None;
        }
        let a = i.assignment.as_ref()?;
        let since = i.leader_since_ms;
        let lagging = |r: &i32| {
            let caught_up = i
                .followers
                .get(r)
                .map_or(since, |p| p.caught_up_ms.max(since));
            *r != i.me && now_ms - caught_up > lag_max_ms
        };
        if !a.isr.iter().any(lagging) {
            return None;
        }
        let keep: Vec<i32> = a.isr.iter().copied().filter(|r| !lagging(r)).collect();
        Some(keep)
    }

    /// `follower`, out of the ISR, has caught up with the high watermark
    /// and the leader epoch's start: the ISR with it, if so. Asked on that
    /// follower's own fetch only (a follower that stopped fetching keeps
    /// its old end, which must not bring it back).
    pub fn expand_due(&self, follower: i32) -> Option<Vec<i32>> {
        let i = self.inner.lock();
        if i.role != Some(Role::Leader) || i.pending_isr.is_some() {
            return None;
        }
        let a = i.assignment.as_ref()?;
        let p = i.followers.get(&follower)?;
        let joining = !a.isr.contains(&follower)
            && a.replicas.contains(&follower)
            && p.end >= i.hw
            && p.end >= i.epoch_start;
        if !joining {
            return None;
        }
        let mut isr = a.isr.clone();
        isr.push(follower);
        Some(isr)
    }

    /// The high watermark this module computed (meaningful while
    /// [`Replica::replicated`]).
    pub fn high_watermark(&self) -> u64 {
        self.inner.lock().hw
    }

    /// Sets the high watermark (a leader taking it from storage when
    /// followers join the ISR; never backwards).
    pub fn seed_high_watermark(&self, hw: u64) {
        let mut i = self.inner.lock();
        i.hw = i.hw.max(hw);
    }

    /// Hands every open wait back with the end it waits for (the leader is
    /// alone in the ISR again: its own fsync decides them).
    pub fn take_waiters(&self) -> Vec<(u64, WaitDone)> {
        self.inner
            .lock()
            .waiters
            .drain(..)
            .map(|(end, _, d)| (end, d))
            .collect()
    }
}

fn maximal(isr: &[i32], pending: &Option<Vec<i32>>) -> Vec<i32> {
    let mut out = isr.to_vec();
    if let Some(p) = pending {
        for r in p {
            if !out.contains(r) {
                out.push(*r);
            }
        }
    }
    out
}

/// The maximal ISR's members, without collecting them (the produce and
/// replica-fetch paths ask per request): the committed ISR, then the ones a
/// pending change adds (a member may come twice).
fn maximal_members<'a>(
    isr: &'a [i32],
    pending: &'a Option<Vec<i32>>,
) -> impl Iterator<Item = i32> + 'a {
    isr.iter().chain(pending.iter().flatten()).copied()
}

fn replicated(i: &Inner) -> bool {
    i.role == Some(Role::Leader)
        && i.assignment
            .as_ref()
            .is_some_and(|a| maximal_members(&a.isr, &i.pending_isr).any(|r| r != i.me))
}

fn min_isr_check(i: &Inner, min_isr: usize) -> Result<(), WaitError> {
    let size = i.assignment.as_ref().map_or(1, |a| a.isr.len());
    if size < min_isr {
        Err(WaitError::NotEnoughReplicasAfterAppend)
    } else {
        Ok(())
    }
}

/// Recomputes the high watermark from the maximal ISR's fsynced ends and
/// collects the waits it completes.
fn advance(i: &mut Inner, durable: u64) -> Advance {
    let Some(a) = i.assignment.as_ref() else {
        return (None, Vec::new());
    };
    let mut hw = durable;
    for r in maximal_members(&a.isr, &i.pending_isr) {
        if r != i.me {
            hw = hw.min(i.followers.get(&r).map_or(0, |p| p.end));
        }
    }
    if hw <= i.hw {
        return (None, Vec::new());
    }
    i.hw = hw;
    let mut done = Vec::new();
    let mut keep = Vec::with_capacity(i.waiters.len());
    for (end, min_isr, d) in std::mem::take(&mut i.waiters) {
        if end <= hw {
            let r = min_isr_check(i, min_isr);
            done.push((d, r));
        } else {
            keep.push((end, min_isr, d));
        }
    }
    i.waiters = keep;
    (Some(hw), done)
}

#[cfg(test)]
#[path = "replica_tests.rs"]
mod tests;
