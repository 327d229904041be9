//! The transaction coordinator's shell: the [`Txns`] core behind one short
//! lock, the producers journal ([`TxnLog`]), marker writing and the periodic
//! work. Every method is blocking (it may fsync); handlers call it from
//! blocking threads.
//!
//! A transition runs in three steps: validate and compute it under the core
//! lock (the id becomes *pending*), journal it with no lock held (fsync,
//! shared with concurrent appends), apply it under the lock. An EndTxn is
//! journaled as PrepareCommit/PrepareAbort; then the markers are written to
//! every partition of the transaction (`append_marker` + `wait_durable`), the
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
struct Inflight {
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
struct Core {
    txns: Txns,
    /// The next producer id to hand out.
    next_pid: i64,
    /// Ids below this are reserved in the journal.
    reserved_until: i64,
    inflight: HashMap<String, Arc<Inflight>>,
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
    log: TxnLog,
    core: Mutex<Core>,
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

fn storage_failed(what: &str, e: &StorageError) -> TxnError {
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

    /// TxnOffsetCommit: checks the member (when a sink is registered) and
    /// adds the offsets to the open transaction, durably.
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
        let sink = self.sink.read().clone();
        if let Some(sink) = sink {
            sink.validate_member(group, member_id, instance_id, generation_id)?;
        }
        let t = self.core.lock().txns.add_offsets(
            transactional_id,
            producer_id,
            epoch,
            group,
            offsets,
            self.clock.now_ms(),
        )?;
        self.journal(t, false)
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
            match self.log.append(&[LogEntry::Remove { id: id.clone() }]) {
                Ok(()) => {
                    let mut c = self.core.lock();
                    c.txns.remove(&id);
                    c.inflight.remove(&id);
                    tracing::info!(transactional_id = %id, "expired an idle transactional id");
                }
                Err(e) => {
                    storage_failed("expiring a transactional id", &e);
                    self.core.lock().txns.cancel(&id);
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
        if let Err(e) = self.log.append(&[entry]) {
            self.core.lock().txns.cancel(&t.id);
            return Err(storage_failed("transaction state change", &e));
        }
        let mut c = self.core.lock();
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
            match p.wait_durable(end) {
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

/// Kafka's `NO_PRODUCER_EPOCH`, re-exported for handlers.
pub const NO_EPOCH: i16 = NO_PRODUCER_EPOCH;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::PID_BLOCK_SIZE;
    use es_storage::partition::PartitionConfig;
    use es_storage::record::RecordIter;
    use es_storage::{Partition, ProducerAppend, RealFs, RecordBatchBuf, RecordMeta, Storage};

    #[derive(Default)]
    struct Map(HashMap<(String, i32), PartitionLog>);

    impl Partitions for Map {
        fn partition(&self, topic: &str, partition: i32) -> Option<PartitionLog> {
            self.0.get(&(topic.to_string(), partition)).cloned()
        }
        fn for_each_partition(&self, f: &mut dyn FnMut(&PartitionLog)) {
            for p in self.0.values() {
                f(p);
            }
        }
    }

    #[derive(Debug, Default)]
    struct Sink(Mutex<Vec<(String, Vec<TxnOffset>)>>);

    impl TxnOffsetSink for Sink {
        fn validate_member(
            &self,
            _: &str,
            m: &str,
            _: Option<&str>,
            g: i32,
        ) -> Result<(), TxnError> {
            if m == "stranger" {
                return Err(TxnError::Group(
                    crate::groups::error::GroupError::UnknownMemberId,
                ));
            }
            let _ = g;
            Ok(())
        }
        fn commit_offsets(&self, group: &str, offsets: &[TxnOffset]) -> Result<(), TxnError> {
            self.0.lock().push((group.to_string(), offsets.to_vec()));
            Ok(())
        }
    }

    struct Env {
        dir: tempfile::TempDir,
        parts: Map,
    }

    impl Env {
        fn new(partitions: &[(&str, i32)]) -> Env {
            let dir = tempfile::tempdir().expect("tmp");
            let mut parts = Map::default();
            for (t, p) in partitions {
                let pd = dir.path().join("topics").join(t).join(p.to_string());
                let part = Partition::open(
                    &Storage::new(Arc::new(RealFs)),
                    pd,
                    PartitionConfig::default(),
                )
                .expect("partition");
                parts
                    .0
                    .insert((t.to_string(), *p), PartitionLog::local(part));
            }
            Env { dir, parts }
        }

        fn coordinator(&self) -> TxnCoordinator {
            TxnCoordinator::open(
                Arc::new(RealFs),
                self.dir.path(),
                TxnConfig::default(),
                es_storage::clock::system(),
            )
            .expect("coordinator")
        }

        fn part(&self, t: &str, p: i32) -> Arc<Partition> {
            self.parts
                .partition(t, p)
                .expect("partition")
                .storage()
                .clone()
        }

        /// Appends one transactional record as the produce path does.
        fn produce(&self, c: &TxnCoordinator, id: &str, pe: (i64, i16), seq: i32, t: &str, p: i32) {
            let guard = c.verify_produce(id, pe.0, pe.1, t, p).expect("verified");
            let mut buf = RecordBatchBuf::new();
            let meta = RecordMeta {
                producer: Some(es_storage::ProducerInfo {
                    producer_id: pe.0,
                    producer_epoch: pe.1,
                    sequence: seq,
                }),
                transactional: true,
                control: false,
            };
            buf.push(0, None, Some(b"v"), std::iter::empty(), &meta);
            let app = ProducerAppend {
                producer_id: pe.0,
                producer_epoch: pe.1,
                base_sequence: seq,
                record_count: 1,
                transactional: true,
            };
            let part = self.part(t, p);
            part.append_producer(&mut buf, Some(&app)).expect("append");
            drop(guard);
            part.flush().expect("flush");
        }

        fn control_records(&self, t: &str, p: i32) -> Vec<bool> {
            let part = self.part(t, p);
            let chunk = part.read(part.log_start_offset(), 1 << 20).expect("read");
            RecordIter::new(&chunk.data)
                .filter_map(Result::ok)
                .filter(|r| r.meta.control)
                .map(|r| r.key.is_some_and(|k| k.get(3) == Some(&1)))
                .collect()
        }
    }

    #[test]
    fn producer_ids_are_unique_across_restarts() {
        let env = Env::new(&[]);
        let mut seen = std::collections::HashSet::new();
        for round in 0..3 {
            let c = env.coordinator();
            for _ in 0..(PID_BLOCK_SIZE + 5) {
                let pid = c.allocate_producer_id().expect("pid");
                assert!(seen.insert(pid), "round {round}: {pid} reused");
            }
            if round == 1 {
                c.close().expect("close");
            }
        }
    }

    #[test]
    fn idempotent_init_and_kip360_bump() {
        let env = Env::new(&[]);
        let c = env.coordinator();
        let (p, e) = c.init_producer_id(&env.parts, None, 0, None).expect("init");
        assert_eq!(e, 0);
        assert_eq!(
            c.init_producer_id(&env.parts, None, 0, Some((p, 0))),
            Ok((p, 1))
        );
        // An id we never issued gets a fresh one.
        let (q, e) = c
            .init_producer_id(&env.parts, None, 0, Some((1 << 40, 3)))
            .expect("init");
        assert_ne!(q, 1 << 40);
        assert_eq!(e, 0);
    }

    #[test]
    fn transactional_init_validates() {
        let env = Env::new(&[]);
        let c = env.coordinator();
        assert_eq!(
            c.init_producer_id(&env.parts, Some(""), 1000, None),
            Err(TxnError::InvalidRequest)
        );
        assert_eq!(
            c.init_producer_id(&env.parts, Some("t"), 900_001, None),
            Err(TxnError::InvalidTransactionTimeout)
        );
        assert_eq!(
            c.init_producer_id(&env.parts, Some("t"), 0, None),
            Err(TxnError::InvalidTransactionTimeout)
        );
        let (p, e) = c
            .init_producer_id(&env.parts, Some("t"), 900_000, None)
            .expect("ok");
        assert_eq!(e, 0);
        assert_eq!(
            c.init_producer_id(&env.parts, Some("t"), 1000, None),
            Ok((p, 1))
        );
    }

    #[test]
    fn commit_writes_markers_and_hands_over_offsets() {
        let env = Env::new(&[("t", 0), ("t", 1)]);
        let c = env.coordinator();
        let sink = Arc::new(Sink::default());
        c.set_offset_sink(sink.clone());
        let pe = c
            .init_producer_id(&env.parts, Some("x"), 60_000, None)
            .expect("init");
        let tps = [TopicPartition::new("t", 0), TopicPartition::new("t", 1)];
        c.add_partitions("x", pe.0, pe.1, &tps, &[]).expect("add");
        env.produce(&c, "x", pe, 0, "t", 0);
        env.produce(&c, "x", pe, 0, "t", 1);
        assert_eq!(env.part("t", 0).last_stable_offset(), 0);
        c.add_partitions("x", pe.0, pe.1, &[], &["g".to_string()])
            .expect("add group");
        let off = TxnOffset {
            group: "g".into(),
            topic: "in".into(),
            partition: 0,
            offset: 42,
            leader_epoch: -1,
            metadata: None,
            member_id: String::new(),
            generation_id: -1,
            instance_id: None,
        };
        assert_eq!(
            c.txn_offset_commit("x", pe.0, pe.1, "g", "stranger", None, 1, vec![off.clone()]),
            Err(TxnError::Group(
                crate::groups::error::GroupError::UnknownMemberId
            ))
        );
        c.txn_offset_commit("x", pe.0, pe.1, "g", "", None, -1, vec![off.clone()])
            .expect("txn offset commit");
        assert!(c.has_pending_offset("g", "in", 0));
        assert!(
            sink.0.lock().is_empty(),
            "offsets are not visible before the commit"
        );
        c.end_txn(&env.parts, "x", pe.0, pe.1, true)
            .expect("commit");
        assert_eq!(env.control_records("t", 0), vec![true]);
        assert_eq!(env.control_records("t", 1), vec![true]);
        assert_eq!(env.part("t", 0).last_stable_offset(), 2);
        assert_eq!(sink.0.lock().clone(), vec![("g".to_string(), vec![off])]);
        assert!(!c.has_pending_offset("g", "in", 0));
        assert_eq!(
            c.describe("x").map(|r| r.state),
            Ok(TxnState::CompleteCommit)
        );
        // Produce outside the transaction is refused now.
        assert_eq!(
            c.verify_produce("x", pe.0, pe.1, "t", 0).map(|_| ()),
            Err(TxnError::TransactionAbortable)
        );
    }

    #[test]
    fn abort_drops_offsets_and_records_the_aborted_range() {
        let env = Env::new(&[("t", 0)]);
        let c = env.coordinator();
        let sink = Arc::new(Sink::default());
        c.set_offset_sink(sink.clone());
        let pe = c
            .init_producer_id(&env.parts, Some("x"), 60_000, None)
            .expect("init");
        c.add_partitions(
            "x",
            pe.0,
            pe.1,
            &[TopicPartition::new("t", 0)],
            &["g".into()],
        )
        .expect("add");
        env.produce(&c, "x", pe, 0, "t", 0);
        env.produce(&c, "x", pe, 1, "t", 0);
        let off = TxnOffset {
            group: "g".into(),
            topic: "in".into(),
            partition: 0,
            offset: 1,
            leader_epoch: -1,
            metadata: None,
            member_id: String::new(),
            generation_id: -1,
            instance_id: None,
        };
        c.txn_offset_commit("x", pe.0, pe.1, "g", "", None, -1, vec![off])
            .expect("offsets");
        c.end_txn(&env.parts, "x", pe.0, pe.1, false)
            .expect("abort");
        assert!(sink.0.lock().is_empty());
        let p = env.part("t", 0);
        assert_eq!(env.control_records("t", 0), vec![false]);
        let aborted = p.aborted_transactions(0, 10);
        assert_eq!(aborted.len(), 1);
        assert_eq!((aborted[0].first_offset, aborted[0].last_offset), (0, 2));
        assert_eq!(p.last_stable_offset(), 3);
    }

    #[test]
    fn crash_after_prepare_completes_at_recovery() {
        let env = Env::new(&[("t", 0)]);
        let pe;
        {
            let c = env.coordinator();
            pe = c
                .init_producer_id(&env.parts, Some("x"), 60_000, None)
                .expect("init");
            c.add_partitions("x", pe.0, pe.1, &[TopicPartition::new("t", 0)], &[])
                .expect("add");
            env.produce(&c, "x", pe, 0, "t", 0);
            // Decide the commit but "crash" before the markers: journal the
            // Prepare record by hand.
            let t = c
                .core
                .lock()
                .txns
                .end_txn("x", pe.0, pe.1, true, es_storage::clock::wall_ms())
                .expect("end")
                .expect("t");
            c.journal(t, true).expect("journal");
            assert!(env.control_records("t", 0).is_empty());
        }
        let c = env.coordinator();
        assert_eq!(
            c.describe("x").map(|r| r.state),
            Ok(TxnState::PrepareCommit)
        );
        c.recover(&env.parts);
        assert_eq!(
            c.describe("x").map(|r| r.state),
            Ok(TxnState::CompleteCommit)
        );
        assert_eq!(env.control_records("t", 0), vec![true]);
        // A retried EndTxn(commit) from the client is answered NONE.
        assert_eq!(c.end_txn(&env.parts, "x", pe.0, pe.1, true), Ok(()));
    }

    #[test]
    fn open_transaction_survives_restart_and_times_out() {
        let env = Env::new(&[("t", 0)]);
        let pe;
        {
            let c = env.coordinator();
            pe = c
                .init_producer_id(&env.parts, Some("x"), 1_000, None)
                .expect("init");
            c.add_partitions("x", pe.0, pe.1, &[TopicPartition::new("t", 0)], &[])
                .expect("add");
            env.produce(&c, "x", pe, 0, "t", 0);
        }
        let c = env.coordinator();
        c.recover(&env.parts);
        let r = c.describe("x").expect("x");
        assert_eq!(r.state, TxnState::Ongoing);
        // Not yet timed out at its start; timed out after it.
        c.abort_timed_out(&env.parts, r.start_ms);
        assert_eq!(c.describe("x").map(|r| r.state), Ok(TxnState::Ongoing));
        c.abort_timed_out(&env.parts, r.start_ms + 1_001);
        let r = c.describe("x").expect("x");
        assert_eq!(r.state, TxnState::CompleteAbort);
        assert_eq!(r.producer_epoch, pe.1 + 1, "the old producer is fenced");
        assert_eq!(env.control_records("t", 0), vec![false]);
        assert_eq!(env.part("t", 0).last_stable_offset(), 2);
        // The fenced producer's next write is refused by the partition.
        let mut buf = RecordBatchBuf::new();
        buf.push(
            0,
            None,
            Some(b"late"),
            std::iter::empty(),
            &RecordMeta::default(),
        );
        let late = ProducerAppend {
            producer_id: pe.0,
            producer_epoch: pe.1,
            base_sequence: 1,
            record_count: 1,
            transactional: true,
        };
        assert!(matches!(
            env.part("t", 0).append_producer(&mut buf, Some(&late)),
            Err(StorageError::Sequence(
                es_storage::SeqError::StaleEpoch { .. }
            ))
        ));
        assert_eq!(
            c.end_txn(&env.parts, "x", pe.0, pe.1, true),
            Err(TxnError::ProducerFenced)
        );
    }

    #[test]
    fn list_filters() {
        let env = Env::new(&[("t", 0)]);
        let c = env.coordinator();
        let a = c
            .init_producer_id(&env.parts, Some("a"), 60_000, None)
            .expect("a");
        let b = c
            .init_producer_id(&env.parts, Some("b"), 60_000, None)
            .expect("b");
        c.add_partitions("b", b.0, b.1, &[TopicPartition::new("t", 0)], &[])
            .expect("add");
        let (all, unknown) = c.list(&[], &[], -1);
        assert_eq!(all.len(), 2);
        assert!(unknown.is_empty());
        let (ongoing, unknown) = c.list(&["Ongoing".into(), "Weird".into()], &[], -1);
        assert_eq!(ongoing.len(), 1);
        assert_eq!(ongoing[0].transactional_id, "b");
        assert_eq!(unknown, vec!["Weird".to_string()]);
        let (by_pid, _) = c.list(&[], &[a.0], -1);
        assert_eq!(by_pid.len(), 1);
        assert_eq!(by_pid[0].transactional_id, "a");
        // Kafka's duration filter compares with the start time, which an
        // Empty id does not have (-1): it is listed, the fresh one is not.
        let (long, _) = c.list(&[], &[], 3_600_000);
        assert_eq!(long.len(), 1);
        assert_eq!(long[0].transactional_id, "a");
        assert_eq!(c.describe("nope"), Err(TxnError::TransactionalIdNotFound));
    }

    #[test]
    fn idle_ids_expire_and_survive_only_until_then() {
        let env = Env::new(&[]);
        let c = env.coordinator();
        c.init_producer_id(&env.parts, Some("old"), 60_000, None)
            .expect("init");
        let now = es_storage::clock::wall_ms();
        c.expire_ids(now);
        assert!(c.describe("old").is_ok());
        c.expire_ids(now + c.config().transactional_id_expiration_ms + 1);
        assert!(c.describe("old").is_err());
        drop(c);
        let c = env.coordinator();
        assert!(c.describe("old").is_err(), "the removal is durable");
    }

    #[test]
    fn markers_wait_for_verified_appends() {
        let env = Env::new(&[("t", 0)]);
        let c = Arc::new(env.coordinator());
        let pe = c
            .init_producer_id(&env.parts, Some("x"), 60_000, None)
            .expect("init");
        c.add_partitions("x", pe.0, pe.1, &[TopicPartition::new("t", 0)], &[])
            .expect("add");
        let guard = c.verify_produce("x", pe.0, pe.1, "t", 0).expect("verified");
        let parts = Arc::new(env.parts);
        let (c2, p2) = (c.clone(), parts.clone());
        let ender = std::thread::spawn(move || c2.end_txn(p2.as_ref(), "x", pe.0, pe.1, true));
        // The EndTxn is now waiting for the guard (or about to): a new
        // verification is refused, and the append of the verified batch lands
        // before the marker.
        let deadline = Instant::now() + Duration::from_secs(30);
        while c.describe("x").map(|r| r.state) != Ok(TxnState::PrepareCommit) {
            assert!(
                Instant::now() < deadline,
                "EndTxn did not reach PrepareCommit"
            );
            std::thread::yield_now();
        }
        assert_eq!(
            c.verify_produce("x", pe.0, pe.1, "t", 0).map(|_| ()),
            Err(TxnError::ConcurrentTransactions)
        );
        let part = parts
            .partition("t", 0)
            .expect("partition")
            .storage()
            .clone();
        let mut buf = RecordBatchBuf::new();
        let meta = RecordMeta {
            producer: Some(es_storage::ProducerInfo {
                producer_id: pe.0,
                producer_epoch: pe.1,
                sequence: 0,
            }),
            transactional: true,
            control: false,
        };
        buf.push(0, None, Some(b"v"), std::iter::empty(), &meta);
        part.append(&mut buf).expect("append");
        drop(guard);
        assert_eq!(ender.join().expect("join"), Ok(()));
        let chunk = part.read(0, 1 << 20).expect("read");
        let kinds: Vec<bool> = RecordIter::new(&chunk.data)
            .filter_map(Result::ok)
            .map(|r| r.meta.control)
            .collect();
        assert_eq!(kinds, vec![false, true], "data first, then the marker");
    }
}
