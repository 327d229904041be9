//! The transaction coordinator's shell: the [`Txns`] core behind one short
//! lock, the producers journal ([`TxnLog`]), marker writing and the periodic
//! work. Every method is blocking (it may fsync); handlers call it from
//! blocking threads.
//!
//! A transition runs in three steps: validate and compute it under the core
//! lock (the id becomes *pending*), make it durable with no lock held (once
//! the metadata quorum has started, an entry of the metadata log fenced by
//! the `__transaction_state` leadership the id was loaded under,
//! [`super::failover`]; before, the producers journal, fsync shared with
//! concurrent appends), apply it under the lock. An EndTxn is
//! journaled as PrepareCommit/PrepareAbort; then the markers are written to
//! every partition of the transaction (`append_marker`, then waiting until
//! it is on every in-sync replica, `wait_acknowledged`), the
//! transaction's offsets are handed to the group coordinator (commit only),
//! and CompleteCommit/CompleteAbort is journaled. Once the Prepare record is
//! durable the outcome is decided: if a marker cannot be written the client
//! is still answered NONE and the periodic task retries, as after a crash.
//!
//! Ordering of markers after data: a transactional append first passes
//! [`TxnCoordinator::verify_produce`] (the partition must be in the open
//! transaction) and holds a [`ProduceGuard`] until its write is done.
//! Verification fails once the transaction is Prepare-ing, and completion
//! waits for the guards taken before that, so a verified batch can never land
//! after its transaction's marker.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::partition_log::PartitionLog;
use es_storage::{Fs, SharedClock, StorageError};
use parking_lot::{Condvar, Mutex, RwLock};

use super::error::TxnError;
use super::log::{LogEntry, TxnLog};
use super::markers::{send_remote, GroupTarget, MarkerBatch, MarkerTarget, RemotePlan};
use super::pid_blocks::{adopt_block, next_block, PidBlocks};
use super::placement::{Held, TxnFence};
use super::remote_offsets::RemoteOffsets;
use super::state::{
    epoch_exhausted, InitStep, TopicPartition, Transition, TxnOffset, TxnRecord, TxnState, Txns,
    NO_PRODUCER_EPOCH, NO_PRODUCER_ID,
};
use super::{TxnConfig, COORDINATOR_EPOCH};

/// Where the coordinator finds partitions (the broker's topic registry; a
/// plain map in tests).
pub trait Partitions: Send + Sync {
    fn partition(&self, topic: &str, partition: i32) -> Option<PartitionLog>;
    /// The topic's `min.insync.replicas`, which a marker's wait checks as
    /// an acks=all produce's does; by default 1.
    fn min_insync_replicas(&self, _topic: &str) -> usize {
        1
    }
    /// Calls `f` with every open partition.
    fn for_each_partition(&self, f: &mut dyn FnMut(&PartitionLog));

    /// Where the marker of a partition goes ([`super::markers`]); by
    /// default a partition that is not open here is gone.
    fn marker_target(&self, topic: &str, partition: i32) -> MarkerTarget {
        self.partition(topic, partition)
            .map_or(MarkerTarget::Gone, MarkerTarget::Local)
    }

    /// Which broker settles a group's transactional offsets; by default
    /// this one.
    fn group_target(&self, _group: &str) -> GroupTarget {
        GroupTarget::Here
    }

    /// Sends `batch` to broker `broker` (WriteTxnMarkers) and returns the
    /// partitions whose markers it wrote. Blocking, bounded by a timeout.
    fn send_markers(
        &self,
        broker: i32,
        batch: &MarkerBatch,
    ) -> Result<Vec<TopicPartition>, String> {
        let _ = batch;
        Err(format!("no route to broker {broker}"))
    }
}

/// The group coordinator's side of transactional offsets. The group
/// coordinator implements it and registers itself with
/// [`TxnCoordinator::set_offset_sink`].
pub trait TxnOffsetSink: Send + Sync + std::fmt::Debug {
    /// TxnOffsetCommit v3+ (KIP-447) names the consumer's member id,
    /// instance id and generation: checks them against the group as an
    /// OffsetCommit would (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
    /// FENCED_INSTANCE_ID). A member id of "" with generation -1 is a
    /// commit without group membership.
    fn validate_member(
        &self,
        group: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
    ) -> Result<(), TxnError>;

    /// The transaction committed: `offsets` (all of `group`) become the
    /// group's committed offsets, durably, before this returns. Called from a
    /// blocking thread; called again with the same offsets if the broker
    /// crashed before the commit was recorded, so it must be idempotent.
    fn commit_offsets(&self, group: &str, offsets: &[TxnOffset]) -> Result<(), TxnError>;
}

/// Transactional appends in flight for one transactional id.
#[derive(Debug, Default)]
pub(super) struct Inflight {
    n: Mutex<usize>,
    zero: Condvar,
}

impl Inflight {
    fn wait_zero(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut n = self.n.lock();
        while *n > 0 {
            if self.zero.wait_until(&mut n, deadline).timed_out() {
                return *n == 0;
            }
        }
        true
    }
}

/// Held by a transactional append between its verification and the end of
/// its write; the transaction's markers wait for it.
#[derive(Debug)]
pub struct ProduceGuard {
    inflight: Arc<Inflight>,
}

impl Drop for ProduceGuard {
    fn drop(&mut self) {
        let mut n = self.inflight.n.lock();
        *n = n.saturating_sub(1);
        if *n == 0 {
            self.inflight.zero.notify_all();
        }
    }
}

#[derive(Debug)]
pub(super) struct Core {
    pub(super) txns: Txns,
    /// The next producer id to hand out.
    next_pid: i64,
    /// Ids below this are reserved in the journal.
    reserved_until: i64,
    pub(super) inflight: HashMap<String, Arc<Inflight>>,
    /// Where the state of transactional ids lives ([`super::failover`]):
    /// `None`, in the producers journal (before the metadata quorum has
    /// started, and in tests of the coordinator alone); else in the
    /// metadata log, for the ids of the `__transaction_state` partitions
    /// this broker led when it loaded them.
    pub(super) held: Option<Held>,
    /// What the metadata log applied for an id while a write of it was in
    /// flight here, by id (`None`: removed): the truth when that write then
    /// reports a failure (it timed out, yet was applied).
    pub(super) applied: HashMap<String, Option<TxnRecord>>,
}

/// A transaction as DescribeTransactions and ListTransactions show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnListing {
    pub transactional_id: String,
    pub producer_id: i64,
    pub state: TxnState,
}

/// The transaction coordinator of this broker.
#[derive(Debug)]
pub struct TxnCoordinator {
    config: TxnConfig,
    pub(super) log: TxnLog,
    pub(super) core: Mutex<Core>,
    sink: RwLock<Option<Arc<dyn TxnOffsetSink>>>,
    /// Where producer-id blocks come from (the metadata quorum); without
    /// one, the journal's own counter ([`super::pid_blocks`]).
    pids: RwLock<Option<Arc<dyn PidBlocks>>>,
    /// TxnOffsetCommits this broker took as group coordinator for
    /// transactions coordinated elsewhere ([`super::remote_offsets`]).
    pub(super) remote_offsets: RemoteOffsets,
    last_id_expiry_ms: AtomicI64,
    last_producer_expiry_ms: AtomicI64,
    /// Where transaction deadlines and producer-id expiry read the time.
    clock: SharedClock,
}

pub(super) fn storage_failed(what: &str, e: &StorageError) -> TxnError {
    tracing::error!(error = %e, "{what}: producers journal write failed");
    // Kafka maps a failed transaction-log append (KAFKA_STORAGE_ERROR) to
    // NOT_COORDINATOR: the client looks the coordinator up again and retries.
    TxnError::JournalFailed
}

impl TxnCoordinator {
    /// Opens `producers.json` and `producers.journal` under `data_dir` and
    /// replays them. Transactions left in a Prepare state are completed by
    /// [`TxnCoordinator::recover`] once the partitions are open. Blocking.
    pub fn open(
        fs: Arc<dyn Fs>,
        data_dir: &Path,
        config: TxnConfig,
        clock: SharedClock,
    ) -> Result<TxnCoordinator, StorageError> {
        let (log, state) = TxnLog::open(fs, data_dir, clock.clone())?;
        let now = clock.now_ms();
        Ok(TxnCoordinator {
            config,
            log,
            core: Mutex::new(Core {
                txns: Txns::from_records(state.txns),
                next_pid: state.pids_reserved_until,
                reserved_until: state.pids_reserved_until,
                inflight: HashMap::new(),
                held: None,
                applied: HashMap::new(),
            }),
            sink: RwLock::new(None),
            pids: RwLock::new(None),
            remote_offsets: RemoteOffsets::from_log(&state.remote_offsets),
            last_id_expiry_ms: AtomicI64::new(now),
            last_producer_expiry_ms: AtomicI64::new(now),
            clock,
        })
    }

    pub fn config(&self) -> &TxnConfig {
        &self.config
    }

    /// Journals one entry (fsync); refused entries change nothing.
    pub(super) fn journal_entry(&self, e: LogEntry) -> Result<(), TxnError> {
        self.log
            .append(&[e])
            .map_err(|e| storage_failed("transactional offsets", &e))
    }

    /// The group coordinator that receives committed offsets, if registered.
    pub(super) fn offset_sink(&self) -> Option<Arc<dyn TxnOffsetSink>> {
        self.sink.read().clone()
    }

    /// Registers the group coordinator that receives committed offsets.
    pub fn set_offset_sink(&self, sink: Arc<dyn TxnOffsetSink>) {
        *self.sink.write() = Some(sink);
    }

    /// Takes producer-id blocks from `source` from now on.
    pub fn set_pid_blocks(&self, source: Arc<dyn PidBlocks>) {
        *self.pids.write() = Some(source);
    }

    /// Completes every transaction a crash left in a Prepare state (startup).
    pub fn recover(&self, parts: &dyn Partitions) {
        self.finish_unfinished(parts);
    }

    /// Folds the journal into `producers.json` (shutdown). Blocking.
    pub fn close(&self) -> Result<(), StorageError> {
        self.log.fold()
    }

    // ----- producer ids --------------------------------------------------

    /// A producer id never handed out before, in this run or any earlier
    /// one, by this broker or (with a [`PidBlocks`] source) any other.
    pub fn allocate_producer_id(&self) -> Result<i64, TxnError> {
        for _ in 0..4 {
            let floor = {
                let mut c = self.core.lock();
                if c.next_pid < c.reserved_until {
                    let p = c.next_pid;
                    c.next_pid += 1;
                    return Ok(p);
                }
                c.reserved_until
            };
            let source = self.pids.read().clone();
            let (first, until) = next_block(source.as_deref(), floor)?;
            // Reserve the block durably before handing out any id from it.
            self.log
                .append(&[LogEntry::ReservePids { until }])
                .map_err(|e| {
                    tracing::error!(error = %e, "cannot reserve producer ids");
                    TxnError::CoordinatorNotAvailable
                })?;
            let c = &mut *self.core.lock();
            adopt_block(&mut c.next_pid, &mut c.reserved_until, first, until);
        }
        Err(TxnError::CoordinatorNotAvailable)
    }

    // ----- requests -------------------------------------------------------

    /// InitProducerId. `producer` is the (id, epoch) the client already has
    /// (KIP-360), or None. Returns the producer id and epoch to use.
    pub fn init_producer_id(
        &self,
        parts: &dyn Partitions,
        transactional_id: Option<&str>,
        timeout_ms: i32,
        producer: Option<(i64, i16)>,
    ) -> Result<(i64, i16), TxnError> {
        let Some(id) = transactional_id else {
            return self.init_idempotent(producer);
        };
        if id.is_empty() {
            return Err(TxnError::InvalidRequest);
        }
        if timeout_ms <= 0 || timeout_ms > self.config.transaction_max_timeout_ms {
            return Err(TxnError::InvalidTransactionTimeout);
        }
        for _ in 0..3 {
            let needs_fresh = self
                .core
                .lock()
                .txns
                .get(id)
                .is_none_or(|r| epoch_exhausted(r.producer_epoch));
            let fresh = if needs_fresh {
                self.allocate_producer_id()?
            } else {
                NO_PRODUCER_ID
            };
            let step = {
                let mut c = self.core.lock();
                let needs = c
                    .txns
                    .get(id)
                    .is_none_or(|r| epoch_exhausted(r.producer_epoch));
                if needs && fresh == NO_PRODUCER_ID {
                    // Raced with another InitProducerId: let the client retry.
                    return Err(TxnError::ConcurrentTransactions);
                }
                c.txns
                    .init_producer_id(id, timeout_ms, producer, fresh, self.clock.now_ms())?
            };
            match step {
                InitStep::Transit(t) => {
                    let out = (t.rec.producer_id, t.rec.producer_epoch);
                    self.journal(t, false)?;
                    tracing::info!(
                        transactional_id = id,
                        producer_id = out.0,
                        producer_epoch = out.1,
                        "initialized transactional producer"
                    );
                    return Ok(out);
                }
                InitStep::Fence(t) => {
                    tracing::info!(
                        transactional_id = id,
                        producer_epoch = t.rec.producer_epoch,
                        "fencing the previous producer and aborting its transaction"
                    );
                    self.journal(t, true)?;
                    if let Err(why) = self.complete(parts, id) {
                        tracing::warn!(transactional_id = id, error = %why, "abort of the fenced transaction is not complete yet");
                        return Err(TxnError::ConcurrentTransactions);
                    }
                }
            }
        }
        Err(TxnError::ConcurrentTransactions)
    }

    /// InitProducerId without a transactional id: a new producer id at
    /// epoch 0, or (KIP-360) the same id with the next epoch when the client
    /// names an id we issued and its epoch can still grow.
    fn init_idempotent(&self, producer: Option<(i64, i16)>) -> Result<(i64, i16), TxnError> {
        if let Some((pid, epoch)) = producer {
            let issued = pid >= 0 && pid < self.core.lock().next_pid;
            if issued && epoch >= 0 && !epoch_exhausted(epoch) {
                return Ok((pid, epoch + 1));
            }
        }
        Ok((self.allocate_producer_id()?, 0))
    }

    /// AddPartitionsToTxn / AddOffsetsToTxn (a group joins with `groups`).
    pub fn add_partitions(
        &self,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: &[TopicPartition],
        groups: &[String],
    ) -> Result<(), TxnError> {
        if transactional_id.is_empty() {
            return Err(TxnError::InvalidRequest);
        }
        let t = self.core.lock().txns.add_partitions(
            transactional_id,
            producer_id,
            epoch,
            partitions,
            groups,
            self.clock.now_ms(),
        )?;
        match t {
            None => Ok(()),
            Some(t) => self.journal(t, false),
        }
    }

    /// AddPartitionsToTxn with `verify_only` (KIP-890): per partition NONE or
    /// TRANSACTION_ABORTABLE, or one error for all.
    pub fn verify_partitions(
        &self,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: &[TopicPartition],
    ) -> Result<Vec<Result<(), TxnError>>, TxnError> {
        if transactional_id.is_empty() {
            return Err(TxnError::InvalidRequest);
        }
        self.core
            .lock()
            .txns
            .verify(transactional_id, producer_id, epoch, partitions)
    }

    /// Verifies a transactional append to `topic`/`partition` (the partition
    /// must be in the producer's open transaction) and returns the guard the
    /// append holds until its write is done. The error is the coordinator's
    /// (TRANSACTION_ABORTABLE, PRODUCER_FENCED, ...); the produce handler
    /// maps it for its version.
    pub fn verify_produce(
        &self,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
        topic: &str,
        partition: i32,
    ) -> Result<ProduceGuard, TxnError> {
        let tp = [TopicPartition::new(topic, partition)];
        let mut c = self.core.lock();
        let codes = c.txns.verify(transactional_id, producer_id, epoch, &tp)?;
        if let Some(Err(e)) = codes.into_iter().next() {
            return Err(e);
        }
        let inflight = c
            .inflight
            .entry(transactional_id.to_string())
            .or_default()
            .clone();
        *inflight.n.lock() += 1;
        Ok(ProduceGuard { inflight })
    }

    /// TxnOffsetCommit at a broker that coordinates both the transaction and
    /// the group: checks the member (when a sink is registered) and the
    /// transaction, then holds the offsets as the group's coordinator holds
    /// them for a transaction coordinated elsewhere
    /// ([`TxnCoordinator::txn_offset_commit_remote`]: in the metadata
    /// quorum, under the group). So they move with the group: should its
    /// coordinator move before the transaction ends, the completion's marker
    /// for the group's offsets partition settles them at the new one, as
    /// Kafka's coordinator settles every group's (here, the completion
    /// settles them itself while the group stays).
    #[allow(clippy::too_many_arguments)]
    pub fn txn_offset_commit(
        &self,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
        group: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
        offsets: Vec<TxnOffset>,
    ) -> Result<(), TxnError> {
        if transactional_id.is_empty() {
            return Err(TxnError::InvalidRequest);
        }
        self.core
            .lock()
            .txns
            .check_offsets(transactional_id, producer_id, epoch, group)?;
        self.txn_offset_commit_remote(
            producer_id,
            epoch,
            group,
            member_id,
            instance_id,
            generation_id,
            offsets,
        )
    }

    /// EndTxn: decides the outcome durably, writes the markers, records the
    /// completion. NONE once the decision is durable, even if a marker could
    /// not be written yet (the periodic task finishes it).
    pub fn end_txn(
        &self,
        parts: &dyn Partitions,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
        commit: bool,
    ) -> Result<(), TxnError> {
        if transactional_id.is_empty() {
            return Err(TxnError::InvalidRequest);
        }
        let t = self.core.lock().txns.end_txn(
            transactional_id,
            producer_id,
            epoch,
            commit,
            self.clock.now_ms(),
        )?;
        let Some(t) = t else { return Ok(()) };
        self.journal(t, true)?;
        if let Err(why) = self.complete(parts, transactional_id) {
            tracing::warn!(transactional_id, error = %why, "transaction decided but not complete; will retry");
        }
        Ok(())
    }

    /// DescribeTransactions of one id.
    pub fn describe(&self, transactional_id: &str) -> Result<TxnRecord, TxnError> {
        if transactional_id.is_empty() {
            return Err(TxnError::InvalidRequest);
        }
        self.core
            .lock()
            .txns
            .get(transactional_id)
            .filter(|r| r.state != TxnState::Dead)
            .cloned()
            .ok_or(TxnError::TransactionalIdNotFound)
    }

    /// ListTransactions: the ids matching every filter given (state names,
    /// producer ids, running longer than `min_duration_ms` if >= 0), and the
    /// state names that are not Kafka's.
    pub fn list(
        &self,
        states: &[String],
        producer_ids: &[i64],
        min_duration_ms: i64,
    ) -> (Vec<TxnListing>, Vec<String>) {
        let mut wanted = Vec::new();
        let mut unknown = Vec::new();
        for s in states {
            match TxnState::from_name(s) {
                Some(st) => wanted.push(st),
                None => unknown.push(s.clone()),
            }
        }
        let now = self.clock.now_ms();
        let c = self.core.lock();
        let mut out: Vec<TxnListing> = c
            .txns
            .iter()
            .filter(|(_, r)| r.state != TxnState::Dead)
            .filter(|(_, r)| producer_ids.is_empty() || producer_ids.contains(&r.producer_id))
            .filter(|(_, r)| states.is_empty() || wanted.contains(&r.state))
            .filter(|(_, r)| min_duration_ms < 0 || now - r.start_ms > min_duration_ms)
            .map(|(id, r)| TxnListing {
                transactional_id: id.clone(),
                producer_id: r.producer_id,
                state: r.state,
            })
            .collect();
        out.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
        (out, unknown)
    }

    /// Whether a transaction holds an uncommitted offset for this group
    /// partition (OffsetFetch with `require_stable` answers
    /// UNSTABLE_OFFSET_COMMIT then).
    pub fn has_pending_offset(&self, group: &str, topic: &str, partition: i32) -> bool {
        self.core
            .lock()
            .txns
            .has_pending_offset(group, topic, partition)
            || self.remote_offsets.has(group, topic, partition)
    }

    // ----- periodic work --------------------------------------------------

    /// One round of periodic work (the broker's timer calls it every
    /// [`TxnConfig::abort_check_interval_ms`]). Blocking.
    pub fn tick(&self, parts: &dyn Partitions) {
        let now = self.clock.now_ms();
        self.abort_timed_out(parts, now);
        self.finish_unfinished(parts);
        let last = self.last_id_expiry_ms.load(Ordering::Relaxed);
        if now - last >= self.config.expired_id_check_interval_ms {
            self.last_id_expiry_ms.store(now, Ordering::Relaxed);
            self.expire_ids(now);
        }
        let last = self.last_producer_expiry_ms.load(Ordering::Relaxed);
        if now - last >= self.config.producer_expiration_check_interval_ms {
            self.last_producer_expiry_ms.store(now, Ordering::Relaxed);
            self.expire_producers(parts, now);
        }
        if self.log.should_fold() {
            if let Err(e) = self.log.fold() {
                tracing::error!(error = %e, "folding the producers journal failed");
            }
        }
    }

    /// Aborts open transactions past their timeout, fencing their producer.
    pub fn abort_timed_out(&self, parts: &dyn Partitions, now: i64) {
        let timed_out = self.core.lock().txns.timed_out(now);
        for t in timed_out {
            let id = t.id.clone();
            tracing::info!(transactional_id = %id, producer_id = t.rec.producer_id, "aborting a transaction past its timeout");
            if self.journal(t, true).is_err() {
                continue;
            }
            if let Err(why) = self.complete(parts, &id) {
                tracing::warn!(transactional_id = %id, error = %why, "abort of a timed-out transaction is not complete yet");
            }
        }
    }

    fn finish_unfinished(&self, parts: &dyn Partitions) {
        let ids = self.core.lock().txns.take_unfinished();
        for id in ids {
            match self.complete(parts, &id) {
                Ok(()) => tracing::info!(transactional_id = %id, "completed a decided transaction"),
                Err(why) => {
                    tracing::warn!(transactional_id = %id, error = %why, "decided transaction still not complete")
                }
            }
        }
    }

    /// Forgets transactional ids idle for `transactional.id.expiration.ms`.
    pub fn expire_ids(&self, now: i64) {
        let ids = self
            .core
            .lock()
            .txns
            .take_expired(now, self.config.transactional_id_expiration_ms);
        for id in ids {
            match self.persist(&id, LogEntry::Remove { id: id.clone() }) {
                Ok(fence) => {
                    let mut c = self.core.lock();
                    c.applied.remove(&id);
                    if still_held(&c, &id, fence) {
                        c.txns.remove(&id);
                        c.inflight.remove(&id);
                        tracing::info!(transactional_id = %id, "expired an idle transactional id");
                    }
                }
                Err(e) => {
                    tracing::warn!(transactional_id = %id, error = %e, "expiring a transactional id failed");
                    self.settle_failed(&id);
                }
            }
        }
    }

    /// Drops per-partition state of producers idle for `producer.id.expiration.ms`.
    pub fn expire_producers(&self, parts: &dyn Partitions, now: i64) {
        let mut n = 0usize;
        parts.for_each_partition(&mut |p| {
            n += p.expire_producers(now, self.config.producer_id_expiration_ms);
        });
        if n > 0 {
            tracing::info!(producers = n, "expired idle producers");
        }
    }

    // ----- internals ------------------------------------------------------

    /// Journals a pending transition and applies it; `keep_pending` for a
    /// Prepare record whose markers are still to be written.
    fn journal(&self, t: Transition, keep_pending: bool) -> Result<(), TxnError> {
        let entry = LogEntry::Txn {
            id: t.id.clone(),
            txn: t.rec.clone(),
        };
        let fence = match self.persist(&t.id, entry) {
            Ok(f) => f,
            Err(e) => {
                self.settle_failed(&t.id);
                return Err(e);
            }
        };
        let mut c = self.core.lock();
        c.applied.remove(&t.id);
        if !still_held(&c, &t.id, fence) {
            // The partition that places the id moved while the write was in
            // flight: the new coordinator has it (from the metadata log);
            // this one no longer keeps it.
            return Err(TxnError::JournalFailed);
        }
        if keep_pending {
            c.txns.finish_keep_pending(t);
        } else {
            c.txns.finish(t);
        }
        Ok(())
    }

    /// Completes the pending Prepare transaction `id`: markers, offsets,
    /// Complete record. On failure the id is left Prepare and not pending, so
    /// the next tick retries.
    fn complete(&self, parts: &dyn Partitions, id: &str) -> Result<(), String> {
        let (rec, inflight) = {
            let c = self.core.lock();
            let rec = c
                .txns
                .get(id)
                .cloned()
                .ok_or_else(|| format!("transactional id {id} vanished"))?;
            (rec, c.inflight.get(id).cloned())
        };
        let commit = match rec.state {
            TxnState::PrepareCommit => true,
            TxnState::PrepareAbort => false,
            other => {
                self.core.lock().txns.cancel(id);
                return Err(format!(
                    "cannot complete a transaction in state {}",
                    other.name()
                ));
            }
        };
        if let Some(i) = inflight {
            if !i.wait_zero(Duration::from_millis(self.config.inflight_wait_ms)) {
                tracing::warn!(
                    transactional_id = id,
                    "transactional appends still in flight; writing markers anyway"
                );
            }
        }
        let now = self.clock.now_ms();
        let mut written: Vec<TopicPartition> = Vec::with_capacity(rec.partitions.len());
        let mut to_sync = Vec::with_capacity(rec.partitions.len());
        let mut failure: Option<String> = None;
        let mut remote = RemotePlan::default();
        for tp in &rec.partitions {
            let p = match parts.marker_target(&tp.topic, tp.partition) {
                MarkerTarget::Local(p) => p,
                MarkerTarget::Gone => {
                    // The topic is gone: nothing to mark.
                    written.push(tp.clone());
                    continue;
                }
                MarkerTarget::Remote(broker) => {
                    remote.add(broker, tp.clone());
                    continue;
                }
                MarkerTarget::Unavailable => {
                    failure = Some(format!("{}-{} has no leader now", tp.topic, tp.partition));
                    continue;
                }
            };
            match p.append_marker(
                rec.producer_id,
                rec.producer_epoch,
                commit,
                COORDINATOR_EPOCH,
                now,
            ) {
                Ok(info) => to_sync.push((tp.clone(), p, info.last_offset + 1)),
                Err(e) => failure = Some(format!("marker for {}-{}: {e}", tp.topic, tp.partition)),
            }
        }
        for (tp, p, end) in to_sync {
            let min_isr = parts.min_insync_replicas(&tp.topic);
            match p.wait_acknowledged(end, min_isr, MARKER_ACK_TIMEOUT) {
                Ok(()) => written.push(tp),
                Err(e) => failure = Some(format!("marker for {}-{}: {e}", tp.topic, tp.partition)),
            }
        }
        if let Err(why) = send_remote(parts, &rec, commit, remote, &mut written) {
            failure = Some(why);
        }
        if let Some(why) = failure {
            let mut c = self.core.lock();
            c.txns.markers_written(id, &written);
            c.txns.cancel(id);
            return Err(why);
        }
        if commit && !rec.offsets.is_empty() {
            let sink = self.sink.read().clone();
            match sink {
                Some(sink) => {
                    let mut by_group: BTreeMap<&str, Vec<TxnOffset>> = BTreeMap::new();
                    for o in &rec.offsets {
                        by_group
                            .entry(o.group.as_str())
                            .or_default()
                            .push(o.clone());
                    }
                    for (group, offsets) in by_group {
                        if let Err(e) = sink.commit_offsets(group, &offsets) {
                            let mut c = self.core.lock();
                            c.txns.markers_written(id, &written);
                            c.txns.cancel(id);
                            return Err(format!("committing offsets of group {group}: error {e}"));
                        }
                    }
                }
                None => tracing::warn!(
                    transactional_id = id,
                    offsets = rec.offsets.len(),
                    "no group coordinator registered; transactional offsets dropped"
                ),
            }
        }
        // A group coordinated here: its pending offsets (TxnOffsetCommit
        // taken here, or at its former coordinator before the group moved
        // here or this broker took the transaction over) are settled as if
        // the marker of its offsets partition had arrived. (`rec.offsets`
        // holds offsets only in transactions journaled by older versions.)
        let here: Vec<&str> = rec
            .groups
            .iter()
            .filter(|g| parts.group_target(g) == GroupTarget::Here)
            .map(String::as_str)
            .collect();
        if !here.is_empty() {
            let owns = |g: &str| here.contains(&g);
            if let Err(e) =
                self.settle_remote_offsets(rec.producer_id, rec.producer_epoch, commit, &owns)
            {
                let mut c = self.core.lock();
                c.txns.markers_written(id, &written);
                c.txns.cancel(id);
                return Err(format!("settling the offsets held for {here:?}: error {e}"));
            }
        }
        let t = self
            .core
            .lock()
            .txns
            .complete(id, self.clock.now_ms())
            .ok_or_else(|| format!("transactional id {id} left its Prepare state"))?;
        self.journal(t, false)
            .map_err(|e| format!("journaling the completion failed (error {e})"))?;
        tracing::debug!(transactional_id = id, commit, "transaction complete");
        Ok(())
    }
}

/// How long a marker waits to be on every in-sync replica before the
/// transaction's completion is left to the periodic retry (below the
/// coordinator's WriteTxnMarkers timeout, `MARKERS_TIMEOUT_MS`, so the
/// answer arrives).
pub const MARKER_ACK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Whether this coordinator still holds `id` under the fence its write was
/// made with (always, for a write to the producers journal).
fn still_held(c: &Core, id: &str, fence: Option<TxnFence>) -> bool {
    match fence {
        None => true,
        Some(f) => c.held.as_ref().and_then(|h| h.fence(id)) == Some(f),
    }
}

/// Kafka's `NO_PRODUCER_EPOCH`, re-exported for handlers.
pub const NO_EPOCH: i16 = NO_PRODUCER_EPOCH;

#[cfg(test)]
#[path = "coordinator_tests.rs"]
mod tests;
