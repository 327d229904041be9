//! The transaction coordinator's sans-io core: one state machine per
//! `transactional.id`, as Kafka 4's `TransactionCoordinator` and
//! `TransactionMetadata` define it for clients of transaction version 1
//! (every client that does not see the `transaction.version` feature
//! finalized at 2, which es never advertises).
//!
//! States: Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit,
//! CompleteAbort, Dead (plus Kafka's PrepareEpochFence, which es never keeps:
//! a fence is written straight as PrepareAbort with the bumped epoch).
//!
//! Every change is a [`Transition`]: the core validates a request, computes
//! the record the transactional id will have afterwards and marks the id
//! *pending*; the shell journals the record and then calls
//! [`Txns::finish`] (or [`Txns::cancel`] if the journal write failed). While
//! an id is pending, every other request for it gets CONCURRENT_TRANSACTIONS,
//! so the journal order of one id's records is the order they took effect.
//! The core owns no clock (times come in as wall-clock milliseconds), no
//! file and no lock.

use std::collections::{BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use super::error::TxnError;

/// Kafka's "no producer id".
pub const NO_PRODUCER_ID: i64 = -1;
/// Kafka's "no producer epoch".
pub const NO_PRODUCER_EPOCH: i16 = -1;

/// Kafka's `TransactionMetadata.isEpochExhausted`: epochs stop one short of
/// `i16::MAX`, so the coordinator can always fence the current holder.
pub fn epoch_exhausted(epoch: i16) -> bool {
    epoch >= i16::MAX - 1
}

/// The state of a transactional id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TxnState {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
    Dead,
    PrepareEpochFence,
}

impl TxnState {
    pub const ALL: [TxnState; 8] = [
        TxnState::Empty,
        TxnState::Ongoing,
        TxnState::PrepareCommit,
        TxnState::PrepareAbort,
        TxnState::CompleteCommit,
        TxnState::CompleteAbort,
        TxnState::Dead,
        TxnState::PrepareEpochFence,
    ];

    /// Kafka's state name (DescribeTransactions, ListTransactions filters).
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    pub fn from_name(name: &str) -> Option<TxnState> {
        TxnState::ALL.into_iter().find(|s| s.name() == name)
    }

    pub fn is_prepare(self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }

    fn is_complete_or_empty(self) -> bool {
        matches!(
            self,
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
        )
    }
}

/// A partition of a transaction.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
}

/// An offset committed inside a transaction (TxnOffsetCommit), handed to the
/// group coordinator when the transaction commits and dropped if it aborts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnOffset {
    pub group: String,
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
    /// The committing consumer as TxnOffsetCommit v3+ names it (member id,
    /// generation, instance id); "" and -1 when it does not.
    #[serde(default)]
    pub member_id: String,
    #[serde(default = "no_generation")]
    pub generation_id: i32,
    #[serde(default)]
    pub instance_id: Option<String>,
}

fn no_generation() -> i32 {
    -1
}

/// Everything the coordinator keeps about a transactional id: the record
/// written to `producers.journal` and `producers.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnRecord {
    pub producer_id: i64,
    /// The producer id before the last rotation (an InitProducerId retry
    /// after an exhausted epoch may still name it).
    pub prev_producer_id: i64,
    pub producer_epoch: i16,
    /// The epoch before the last InitProducerId bump (KIP-360 retries).
    pub last_producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    /// Partitions of the open (or completing) transaction.
    pub partitions: BTreeSet<TopicPartition>,
    /// Groups added with AddOffsetsToTxn.
    pub groups: BTreeSet<String>,
    /// Offsets committed in the transaction (TxnOffsetCommit), not yet visible.
    pub offsets: Vec<TxnOffset>,
    /// When the transaction started (its first AddPartitionsToTxn), -1 if none.
    pub start_ms: i64,
    pub last_update_ms: i64,
}

impl TxnRecord {
    fn new(producer_id: i64, timeout_ms: i32, now_ms: i64) -> Self {
        TxnRecord {
            producer_id,
            prev_producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            last_producer_epoch: NO_PRODUCER_EPOCH,
            timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            groups: BTreeSet::new(),
            offsets: Vec::new(),
            start_ms: -1,
            last_update_ms: now_ms,
        }
    }

    /// Whether the open transaction has run past its timeout at `now_ms`.
    pub fn timed_out(&self, now_ms: i64) -> bool {
        self.state == TxnState::Ongoing
            && self.start_ms >= 0
            && self.start_ms.saturating_add(i64::from(self.timeout_ms)) < now_ms
    }
}

/// A validated change of one transactional id, to be journaled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transition {
    pub id: String,
    pub rec: TxnRecord,
}

/// What an InitProducerId with a transactional id needs next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InitStep {
    /// Journal this record and answer with its producer id and epoch.
    Transit(Transition),
    /// The id has an open transaction: journal this PrepareAbort (with the
    /// epoch bumped, fencing the old producer), write the abort markers,
    /// complete it, then run InitProducerId again.
    Fence(Transition),
}

#[derive(Debug)]
struct Entry {
    rec: TxnRecord,
    pending: bool,
}

/// Every transactional id the coordinator knows.
#[derive(Debug, Default)]
pub struct Txns {
    map: HashMap<String, Entry>,
}

impl Txns {
    /// The core after a restart: the journaled records, none pending.
    pub fn from_records(records: impl IntoIterator<Item = (String, TxnRecord)>) -> Self {
        Txns {
            map: records
                .into_iter()
                .map(|(id, rec)| {
                    (
                        id,
                        Entry {
                            rec,
                            pending: false,
                        },
                    )
                })
                .collect(),
        }
    }

    pub fn get(&self, id: &str) -> Option<&TxnRecord> {
        self.map.get(id).map(|e| &e.rec)
    }

    pub fn is_pending(&self, id: &str) -> bool {
        self.map.get(id).is_some_and(|e| e.pending)
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &TxnRecord)> {
        self.map.iter().map(|(k, e)| (k, &e.rec))
    }

    fn begin(&mut self, id: &str, rec: TxnRecord) -> Transition {
        if let Some(e) = self.map.get_mut(id) {
            e.pending = true;
        }
        Transition {
            id: id.to_string(),
            rec,
        }
    }

    /// The journal holds `t`: apply it and end the pending state.
    pub fn finish(&mut self, t: Transition) {
        self.map.insert(
            t.id,
            Entry {
                rec: t.rec,
                pending: false,
            },
        );
    }

    /// The journal holds `t` (a Prepare record) and its markers are still to
    /// be written: apply it and stay pending.
    pub fn finish_keep_pending(&mut self, t: Transition) {
        self.map.insert(
            t.id,
            Entry {
                rec: t.rec,
                pending: true,
            },
        );
    }

    /// The journal write of the pending transition failed: nothing changes.
    pub fn cancel(&mut self, id: &str) {
        if let Some(e) = self.map.get_mut(id) {
            e.pending = false;
        }
    }

    /// Forgets an expired id (after its removal was journaled).
    pub fn remove(&mut self, id: &str) {
        self.map.remove(id);
    }

    /// Takes `rec` as the durable record of `id`, not pending: what a new
    /// coordinator loads, or what the metadata log applied for an id whose
    /// write this coordinator had given up on.
    pub fn load(&mut self, id: &str, rec: TxnRecord) {
        self.map.insert(
            id.to_string(),
            Entry {
                rec,
                pending: false,
            },
        );
    }

    /// Keeps only the ids `keep` accepts (a coordinator giving up the
    /// partitions that place the others); pending ones too.
    pub fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.map.retain(|id, _| keep(id));
    }

    /// Notes that markers reached these partitions (a later retry of the
    /// completion writes only the others). In memory only: after a restart
    /// every partition gets its marker again, which is harmless.
    pub fn markers_written(&mut self, id: &str, done: &[TopicPartition]) {
        if let Some(e) = self.map.get_mut(id) {
            if e.rec.state.is_prepare() {
                for tp in done {
                    e.rec.partitions.remove(tp);
                }
            }
        }
    }

    /// InitProducerId with a transactional id (Kafka's
    /// `handleInitProducerId` and `prepareInitProducerIdTransit`). The
    /// timeout was validated by the caller. `fresh_pid` is an unused
    /// producer id, taken when the id is new or its epochs are exhausted.
    pub fn init_producer_id(
        &mut self,
        id: &str,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
        fresh_pid: i64,
        now_ms: i64,
    ) -> Result<InitStep, TxnError> {
        let e = self.map.entry(id.to_string()).or_insert_with(|| Entry {
            rec: TxnRecord::new(fresh_pid, timeout_ms, now_ms),
            pending: false,
        });
        if e.pending {
            return Err(TxnError::ConcurrentTransactions);
        }
        let cur = &e.rec;
        if let Some((pid, epoch)) = expected {
            // Kafka's isValidProducerId: a new record, the current id, or a
            // retry naming the id we just rotated away from.
            let valid = cur.producer_epoch == NO_PRODUCER_EPOCH
                || pid == cur.producer_id
                || (pid == cur.prev_producer_id && epoch_exhausted(epoch));
            if !valid {
                return Err(TxnError::ProducerFenced);
            }
        }
        match cur.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                Err(TxnError::ConcurrentTransactions)
            }
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                let mut rec = cur.clone();
                let rotate = epoch_exhausted(cur.producer_epoch)
                    && expected.is_none_or(|(_, ep)| ep == cur.producer_epoch);
                if rotate {
                    rec.prev_producer_id = cur.producer_id;
                    rec.producer_id = fresh_pid;
                    rec.producer_epoch = 0;
                    rec.last_producer_epoch = if expected.is_some() {
                        cur.producer_epoch
                    } else {
                        NO_PRODUCER_EPOCH
                    };
                } else if epoch_exhausted(cur.producer_epoch) {
                    // The caller names an older epoch of an exhausted id.
                    return Err(TxnError::ProducerFenced);
                } else {
                    let bumped = cur.producer_epoch + 1;
                    let (epoch, last) = match expected {
                        None => (bumped, NO_PRODUCER_EPOCH),
                        Some((_, ep))
                            if cur.producer_epoch == NO_PRODUCER_EPOCH
                                || ep == cur.producer_epoch =>
                        {
                            (bumped, cur.producer_epoch)
                        }
                        // A retry of a bump whose answer was lost.
                        Some((_, ep)) if ep == cur.last_producer_epoch => {
                            (cur.producer_epoch, cur.last_producer_epoch)
                        }
                        Some(_) => return Err(TxnError::ProducerFenced),
                    };
                    rec.producer_epoch = epoch;
                    rec.last_producer_epoch = last;
                }
                rec.timeout_ms = timeout_ms;
                rec.state = TxnState::Empty;
                rec.partitions.clear();
                rec.groups.clear();
                rec.offsets.clear();
                rec.start_ms = -1;
                rec.last_update_ms = now_ms;
                Ok(InitStep::Transit(self.begin(id, rec)))
            }
            TxnState::Ongoing => {
                let rec = fenced_abort(cur, now_ms);
                Ok(InitStep::Fence(self.begin(id, rec)))
            }
            TxnState::Dead | TxnState::PrepareEpochFence => Err(TxnError::ConcurrentTransactions),
        }
    }

    /// Checks the producer against the id (the common prefix of every
    /// transactional request after InitProducerId).
    fn check_producer(&self, id: &str, pid: i64, epoch: i16) -> Result<&Entry, TxnError> {
        let e = self.map.get(id).ok_or(TxnError::InvalidProducerIdMapping)?;
        if e.rec.producer_id != pid {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        if e.rec.producer_epoch != epoch {
            return Err(TxnError::ProducerFenced);
        }
        Ok(e)
    }

    /// AddPartitionsToTxn (and AddOffsetsToTxn, whose group is added with
    /// `groups`). `Ok(None)`: everything is already in the open transaction.
    pub fn add_partitions(
        &mut self,
        id: &str,
        pid: i64,
        epoch: i16,
        partitions: &[TopicPartition],
        groups: &[String],
        now_ms: i64,
    ) -> Result<Option<Transition>, TxnError> {
        let e = self.check_producer(id, pid, epoch)?;
        if e.pending || e.rec.state.is_prepare() {
            return Err(TxnError::ConcurrentTransactions);
        }
        let cur = &e.rec;
        if cur.state == TxnState::Ongoing
            && partitions.iter().all(|p| cur.partitions.contains(p))
            && groups.iter().all(|g| cur.groups.contains(g))
        {
            return Ok(None);
        }
        let mut rec = cur.clone();
        if cur.state.is_complete_or_empty() {
            rec.start_ms = now_ms;
        }
        rec.state = TxnState::Ongoing;
        rec.partitions.extend(partitions.iter().cloned());
        rec.groups.extend(groups.iter().cloned());
        rec.last_update_ms = now_ms;
        Ok(Some(self.begin(id, rec)))
    }

    /// The KIP-890 verification (AddPartitionsToTxn `verify_only`, and every
    /// transactional produce): per partition NONE, or TRANSACTION_ABORTABLE
    /// when it is not in the transaction.
    pub fn verify(
        &self,
        id: &str,
        pid: i64,
        epoch: i16,
        partitions: &[TopicPartition],
    ) -> Result<Vec<Result<(), TxnError>>, TxnError> {
        let e = self.check_producer(id, pid, epoch)?;
        if e.rec.state.is_prepare() {
            return Err(TxnError::ConcurrentTransactions);
        }
        let open = e.rec.state == TxnState::Ongoing;
        Ok(partitions
            .iter()
            .map(|p| {
                if open && e.rec.partitions.contains(p) {
                    Ok(())
                } else {
                    Err(TxnError::TransactionAbortable)
                }
            })
            .collect())
    }

    /// TxnOffsetCommit: whether offsets of `group` may join transaction
    /// `id` now: the producer matches, the transaction is ongoing and not
    /// being decided, and AddOffsetsToTxn added the group (otherwise
    /// TRANSACTION_ABORTABLE, which the handler maps for older clients).
    /// The offsets themselves wait with the group (`TxnCoordinator::txn_offset_commit`);
    /// `TxnRecord::offsets` holds offsets only in records older versions wrote.
    pub fn check_offsets(
        &self,
        id: &str,
        pid: i64,
        epoch: i16,
        group: &str,
    ) -> Result<(), TxnError> {
        let e = self.check_producer(id, pid, epoch)?;
        if e.pending || e.rec.state.is_prepare() {
            return Err(TxnError::ConcurrentTransactions);
        }
        if e.rec.state != TxnState::Ongoing || !e.rec.groups.contains(group) {
            return Err(TxnError::TransactionAbortable);
        }
        Ok(())
    }

    /// EndTxn from a client (transaction version 1: the epoch must match).
    /// `Ok(None)`: a retry of a transaction that already ended this way.
    pub fn end_txn(
        &mut self,
        id: &str,
        pid: i64,
        epoch: i16,
        commit: bool,
        now_ms: i64,
    ) -> Result<Option<Transition>, TxnError> {
        let e = self.check_producer(id, pid, epoch)?;
        if e.pending {
            return Err(TxnError::ConcurrentTransactions);
        }
        let invalid = TxnError::InvalidTxnState;
        match (e.rec.state, commit) {
            (TxnState::Ongoing, _) => {
                let mut rec = e.rec.clone();
                rec.state = if commit {
                    TxnState::PrepareCommit
                } else {
                    TxnState::PrepareAbort
                };
                rec.last_update_ms = now_ms;
                Ok(Some(self.begin(id, rec)))
            }
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => Ok(None),
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                Err(TxnError::ConcurrentTransactions)
            }
            _ => Err(invalid),
        }
    }

    /// The markers of a Prepare transaction are written: the Complete record
    /// (partitions, groups and offsets cleared). `None` if `id` is not in a
    /// Prepare state.
    pub fn complete(&mut self, id: &str, now_ms: i64) -> Option<Transition> {
        let e = self.map.get(id)?;
        let state = match e.rec.state {
            TxnState::PrepareCommit => TxnState::CompleteCommit,
            TxnState::PrepareAbort => TxnState::CompleteAbort,
            _ => return None,
        };
        let mut rec = e.rec.clone();
        rec.state = state;
        rec.partitions.clear();
        rec.groups.clear();
        rec.offsets.clear();
        rec.last_update_ms = now_ms;
        Some(self.begin(id, rec))
    }

    /// Open transactions past their timeout, each turned into a fenced
    /// PrepareAbort (Kafka's `abortTimedOutTransactions`) and marked pending.
    pub fn timed_out(&mut self, now_ms: i64) -> Vec<Transition> {
        let ids: Vec<String> = self
            .map
            .iter()
            .filter(|(_, e)| !e.pending && e.rec.timed_out(now_ms))
            .map(|(k, _)| k.clone())
            .collect();
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(e) = self.map.get(&id) {
                let rec = fenced_abort(&e.rec, now_ms);
                out.push(self.begin(&id, rec));
            }
        }
        out
    }

    /// Prepare transactions nobody is completing (after a restart, or after
    /// a marker write failed): marked pending, to be completed by the caller.
    pub fn take_unfinished(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        for (id, e) in self.map.iter_mut() {
            if !e.pending && e.rec.state.is_prepare() {
                e.pending = true;
                out.push(id.clone());
            }
        }
        out
    }

    /// Ids idle (Empty or Complete) for longer than `expiration_ms`
    /// (`transactional.id.expiration.ms`), marked pending for removal.
    pub fn take_expired(&mut self, now_ms: i64, expiration_ms: i64) -> Vec<String> {
        let mut out = Vec::new();
        for (id, e) in self.map.iter_mut() {
            if !e.pending
                && e.rec.state.is_complete_or_empty()
                && e.rec.last_update_ms.saturating_add(expiration_ms) <= now_ms
            {
                e.pending = true;
                out.push(id.clone());
            }
        }
        out
    }

    /// Whether an open or completing transaction holds a pending offset for
    /// this group partition (OffsetFetch `require_stable`).
    pub fn has_pending_offset(&self, group: &str, topic: &str, partition: i32) -> bool {
        self.map.values().any(|e| {
            e.rec
                .offsets
                .iter()
                .any(|o| o.group == group && o.topic == topic && o.partition == partition)
        })
    }
}

/// Kafka's `prepareFenceProducerEpoch` followed by the abort it leads to:
/// the epoch is bumped (so the old producer's writes and markers are fenced)
/// and the transaction goes to PrepareAbort.
fn fenced_abort(cur: &TxnRecord, now_ms: i64) -> TxnRecord {
    let mut rec = cur.clone();
    rec.producer_epoch = rec.producer_epoch.saturating_add(1);
    rec.last_producer_epoch = NO_PRODUCER_EPOCH;
    rec.state = TxnState::PrepareAbort;
    rec.last_update_ms = now_ms;
    rec
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: i32 = 60_000;

    fn tp(t: &str, p: i32) -> TopicPartition {
        TopicPartition::new(t, p)
    }

    /// Runs InitProducerId to completion as the shell would (fences included).
    fn init(
        s: &mut Txns,
        id: &str,
        expected: Option<(i64, i16)>,
        fresh: i64,
        now: i64,
    ) -> Result<(i64, i16), TxnError> {
        for _ in 0..3 {
            match s.init_producer_id(id, T, expected, fresh, now)? {
                InitStep::Transit(t) => {
                    let out = (t.rec.producer_id, t.rec.producer_epoch);
                    s.finish(t);
                    return Ok(out);
                }
                InitStep::Fence(t) => {
                    assert_eq!(t.rec.state, TxnState::PrepareAbort);
                    s.finish_keep_pending(t);
                    let done = s.complete(id, now).expect("complete");
                    assert_eq!(done.rec.state, TxnState::CompleteAbort);
                    s.finish(done);
                }
            }
        }
        panic!("init did not settle")
    }

    fn add(s: &mut Txns, id: &str, pid: i64, epoch: i16, parts: &[TopicPartition], now: i64) {
        if let Some(t) = s
            .add_partitions(id, pid, epoch, parts, &[], now)
            .expect("add")
        {
            s.finish(t);
        }
    }

    #[test]
    fn new_id_gets_epoch_zero_and_reinit_bumps() {
        let mut s = Txns::default();
        assert_eq!(init(&mut s, "a", None, 7, 0), Ok((7, 0)));
        assert_eq!(init(&mut s, "a", None, 8, 0), Ok((7, 1)));
        let r = s.get("a").expect("a");
        assert_eq!(r.state, TxnState::Empty);
        assert_eq!(r.last_producer_epoch, NO_PRODUCER_EPOCH);
    }

    #[test]
    fn full_commit_cycle() {
        let mut s = Txns::default();
        let (pid, ep) = init(&mut s, "a", None, 1, 0).expect("init");
        add(&mut s, "a", pid, ep, &[tp("t", 0), tp("t", 1)], 10);
        let r = s.get("a").expect("a");
        assert_eq!(r.state, TxnState::Ongoing);
        assert_eq!(r.start_ms, 10);
        // Already added: no transition.
        assert_eq!(
            s.add_partitions("a", pid, ep, &[tp("t", 0)], &[], 11),
            Ok(None)
        );
        assert_eq!(
            s.verify("a", pid, ep, &[tp("t", 0), tp("t", 2)]),
            Ok(vec![Ok(()), Err(TxnError::TransactionAbortable)])
        );
        let t = s
            .end_txn("a", pid, ep, true, 20)
            .expect("end")
            .expect("transit");
        assert_eq!(t.rec.state, TxnState::PrepareCommit);
        s.finish_keep_pending(t);
        // While the markers are written everything else waits.
        assert_eq!(
            s.add_partitions("a", pid, ep, &[tp("t", 3)], &[], 21),
            Err(TxnError::ConcurrentTransactions)
        );
        assert_eq!(
            s.init_producer_id("a", T, None, 9, 21),
            Err(TxnError::ConcurrentTransactions)
        );
        assert_eq!(
            s.verify("a", pid, ep, &[tp("t", 0)]),
            Err(TxnError::ConcurrentTransactions)
        );
        let t = s.complete("a", 22).expect("complete");
        assert_eq!(t.rec.state, TxnState::CompleteCommit);
        assert!(t.rec.partitions.is_empty());
        s.finish(t);
        // A retried EndTxn(commit) is fine; an abort now is not.
        assert_eq!(s.end_txn("a", pid, ep, true, 23), Ok(None));
        assert_eq!(
            s.end_txn("a", pid, ep, false, 23),
            Err(TxnError::InvalidTxnState)
        );
        // The next transaction starts from CompleteCommit.
        add(&mut s, "a", pid, ep, &[tp("u", 0)], 30);
        assert_eq!(s.get("a").map(|r| r.start_ms), Some(30));
        assert_eq!(
            s.verify("a", pid, ep, &[tp("t", 0)]),
            Ok(vec![Err(TxnError::TransactionAbortable)])
        );
    }

    #[test]
    fn producer_checks() {
        let mut s = Txns::default();
        assert_eq!(
            s.add_partitions("nope", 1, 0, &[tp("t", 0)], &[], 0),
            Err(TxnError::InvalidProducerIdMapping)
        );
        let (pid, ep) = init(&mut s, "a", None, 1, 0).expect("init");
        assert_eq!(
            s.add_partitions("a", pid + 1, ep, &[tp("t", 0)], &[], 0),
            Err(TxnError::InvalidProducerIdMapping)
        );
        assert_eq!(
            s.add_partitions("a", pid, ep + 1, &[tp("t", 0)], &[], 0),
            Err(TxnError::ProducerFenced)
        );
        assert_eq!(
            s.end_txn("a", pid, ep, true, 0),
            Err(TxnError::InvalidTxnState)
        );
        assert_eq!(
            s.verify("a", pid, ep - 1, &[tp("t", 0)]),
            Err(TxnError::ProducerFenced)
        );
    }

    #[test]
    fn reinit_with_open_transaction_fences_and_aborts() {
        let mut s = Txns::default();
        let (pid, ep) = init(&mut s, "a", None, 1, 0).expect("init");
        add(&mut s, "a", pid, ep, &[tp("t", 0)], 10);
        let step = s.init_producer_id("a", T, None, 2, 20).expect("init");
        let InitStep::Fence(t) = step else {
            panic!("expected a fence, got {step:?}")
        };
        assert_eq!(t.rec.producer_epoch, ep + 1);
        assert_eq!(t.rec.state, TxnState::PrepareAbort);
        assert_eq!(t.rec.partitions.len(), 1);
        s.finish_keep_pending(t);
        let done = s.complete("a", 21).expect("complete");
        s.finish(done);
        assert_eq!(init(&mut s, "a", None, 3, 22), Ok((pid, ep + 2)));
        // The old producer is fenced.
        assert_eq!(
            s.add_partitions("a", pid, ep, &[tp("t", 0)], &[], 23),
            Err(TxnError::ProducerFenced)
        );
        assert_eq!(
            s.end_txn("a", pid, ep, true, 23),
            Err(TxnError::ProducerFenced)
        );
    }

    #[test]
    fn kip360_expected_epoch() {
        let mut s = Txns::default();
        let (pid, ep) = init(&mut s, "a", None, 1, 0).expect("init");
        // The producer recovers naming its current epoch: bumped, last kept.
        assert_eq!(init(&mut s, "a", Some((pid, ep)), 5, 0), Ok((pid, ep + 1)));
        assert_eq!(s.get("a").map(|r| r.last_producer_epoch), Some(ep));
        // A retry of that call (answer lost) gets the same epoch back.
        assert_eq!(init(&mut s, "a", Some((pid, ep)), 5, 0), Ok((pid, ep + 1)));
        // A stale epoch is fenced, and so is an unknown producer id.
        assert_eq!(
            s.init_producer_id("a", T, Some((pid, ep + 7)), 5, 0),
            Err(TxnError::ProducerFenced)
        );
        assert_eq!(
            s.init_producer_id("a", T, Some((pid + 100, 0)), 5, 0),
            Err(TxnError::ProducerFenced)
        );
        // A brand-new id accepts any expected producer (it was just created).
        assert_eq!(init(&mut s, "b", Some((77, 3)), 9, 0), Ok((9, 0)));
    }

    #[test]
    fn exhausted_epoch_rotates_the_producer_id() {
        let mut s = Txns::default();
        init(&mut s, "a", None, 1, 0).expect("init");
        if let Some(e) = s.map.get_mut("a") {
            e.rec.producer_epoch = i16::MAX - 1;
        }
        assert_eq!(init(&mut s, "a", None, 2, 0), Ok((2, 0)));
        let r = s.get("a").expect("a");
        assert_eq!(r.prev_producer_id, 1);
    }

    #[test]
    fn timeouts_abort_with_a_bumped_epoch() {
        let mut s = Txns::default();
        let (pid, ep) = init(&mut s, "a", None, 1, 0).expect("init");
        add(&mut s, "a", pid, ep, &[tp("t", 0)], 1_000);
        assert!(s.timed_out(1_000 + i64::from(T)).is_empty());
        let ts = s.timed_out(1_001 + i64::from(T));
        assert_eq!(ts.len(), 1);
        assert_eq!(ts[0].rec.state, TxnState::PrepareAbort);
        assert_eq!(ts[0].rec.producer_epoch, ep + 1);
        // Pending: not returned twice.
        assert!(s.timed_out(i64::MAX).is_empty());
        s.finish_keep_pending(ts[0].clone());
        let done = s.complete("a", 2_000_000).expect("complete");
        s.finish(done);
        assert_eq!(
            s.end_txn("a", pid, ep, true, 0),
            Err(TxnError::ProducerFenced)
        );
    }

    #[test]
    fn unfinished_prepares_are_taken_once() {
        let mut s = Txns::default();
        let (pid, ep) = init(&mut s, "a", None, 1, 0).expect("init");
        add(&mut s, "a", pid, ep, &[tp("t", 0), tp("t", 1)], 0);
        let t = s.end_txn("a", pid, ep, false, 0).expect("end").expect("t");
        s.finish(t); // as after a restart: Prepare, not pending
        assert_eq!(s.take_unfinished(), vec!["a".to_string()]);
        assert!(s.take_unfinished().is_empty());
        s.markers_written("a", &[tp("t", 0)]);
        assert_eq!(s.get("a").map(|r| r.partitions.len()), Some(1));
        s.cancel("a");
        assert_eq!(s.take_unfinished(), vec!["a".to_string()]);
    }

    #[test]
    fn offsets_need_the_group_and_are_cleared_on_completion() {
        let mut s = Txns::default();
        let (pid, ep) = init(&mut s, "a", None, 1, 0).expect("init");
        let off = |o: i64| TxnOffset {
            group: "g".into(),
            topic: "in".into(),
            partition: 0,
            offset: o,
            leader_epoch: -1,
            metadata: None,
            member_id: String::new(),
            generation_id: -1,
            instance_id: None,
        };
        assert_eq!(
            s.check_offsets("a", pid, ep, "g"),
            Err(TxnError::TransactionAbortable)
        );
        let t = s
            .add_partitions("a", pid, ep, &[], &["g".to_string()], 0)
            .expect("add")
            .expect("t");
        s.finish(t);
        assert_eq!(s.check_offsets("a", pid, ep, "g"), Ok(()));
        // A record an older version wrote carries the transaction's offsets.
        let mut rec = s.get("a").expect("a").clone();
        rec.offsets = vec![off(5)];
        s.load("a", rec);
        assert!(s.has_pending_offset("g", "in", 0));
        let t = s.end_txn("a", pid, ep, true, 0).expect("end").expect("t");
        s.finish_keep_pending(t);
        let done = s.complete("a", 0).expect("complete");
        s.finish(done);
        assert!(!s.has_pending_offset("g", "in", 0));
    }

    #[test]
    fn expiry_takes_only_idle_ids() {
        let mut s = Txns::default();
        let (pid, ep) = init(&mut s, "idle", None, 1, 0).expect("init");
        let _ = (pid, ep);
        let (p2, e2) = init(&mut s, "busy", None, 2, 0).expect("init");
        add(&mut s, "busy", p2, e2, &[tp("t", 0)], 0);
        assert!(s.take_expired(99, 100).is_empty());
        assert_eq!(s.take_expired(100, 100), vec!["idle".to_string()]);
        s.remove("idle");
        assert!(s.get("idle").is_none());
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn state_names_round_trip() {
        for st in TxnState::ALL {
            assert_eq!(TxnState::from_name(st.name()), Some(st));
        }
        assert_eq!(TxnState::from_name("Bogus"), None);
    }
}
