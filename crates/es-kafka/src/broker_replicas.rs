//! This broker's part in replicating partition data: taking the roles the
//! metadata assigns (leader, follower, neither) and the followers' fetch
//! loops.
//!
//! Roles come from the applied metadata image only ([`Broker::reconcile_topic`],
//! run as each entry is applied): becoming leader of a new leader epoch
//! writes the epoch into the partition's leader-epoch history at the log end
//! before anything is appended in it; becoming a follower fails the acks=all
//! waits still open, and hands the partition to the fetch loop for its
//! leader. No broker decides a role on its own.
//!
//! A fetch loop ([`fetch_loop`]) runs per leader this broker follows. Each
//! round it first truncates partitions that have just started following
//! (OffsetForLeaderEpoch with their latest local epoch, as Kafka's followers
//! do), then sends one replica Fetch (Kafka's, `replica_id` = this broker)
//! from each partition's fsynced end, appends what comes back at the
//! leader's offsets with the leader's epochs, and waits for the group-commit
//! fsync before the next round: so the offset of every fetch is what the
//! follower has on disk, which is what the leader's high watermark is made
//! of.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use es_meta::image::MetaEvent;
use es_meta::records::{AlterPartitionItem, IsrMember, LeaderRecovery, MetaRequest};
use es_meta::MetaImage;
use es_storage::RecordBatchBuf;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{BrokerId, FetchRequest, OffsetForLeaderEpochRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use parking_lot::Mutex;
use tokio::sync::Notify;

use super::Broker;
use crate::codec::batch::{whole_batch_len, BatchDecoder, DecodeLimits};
use crate::interbroker::InterBrokerClient;
use crate::replica::{Assignment, Role, WaitError};
use crate::topics::{PartitionSlot, Topic};

/// Fetch version the followers send (topic names, diverging epochs).
const FETCH_VERSION: i16 = 12;
/// OffsetForLeaderEpoch version the followers send.
const EPOCHS_VERSION: i16 = 4;
/// How long a leader may hold a follower's fetch with nothing new.
const FETCH_MAX_WAIT_MS: i32 = 500;
/// Bytes one replica fetch asks for, in all and per partition.
const FETCH_MAX_BYTES: i32 = 8 << 20;
const FETCH_PARTITION_MAX_BYTES: i32 = 1 << 20;
/// Kafka's OFFSET_OUT_OF_RANGE.
const OFFSET_OUT_OF_RANGE: i16 = 1;
/// Pause after a failed round (leader unreachable, an error).
const RETRY_BACKOFF: Duration = Duration::from_millis(200);

/// One partition a fetch loop (and its share-state copy loop) replicates.
#[derive(Clone, Debug)]
pub(super) struct Following {
    pub(super) topic: Arc<Topic>,
    pub(super) slot: Arc<PartitionSlot>,
    pub(super) leader_epoch: i32,
    /// Truncate by OffsetForLeaderEpoch before the next fetch.
    truncate: bool,
    /// After the leader refused this partition's truncation: not asked
    /// again before then (Kafka's `replica.fetch.backoff.ms`, per
    /// partition, so the others go on).
    retry_at: Option<Instant>,
    /// Refusals in a row (the first is logged as a warning).
    refusals: u32,
}

/// The fetch loop of one leader, and its share-state copy loop
/// (`broker_share_replicas.rs`), over the same partitions.
#[derive(Debug, Default)]
pub(super) struct Loop {
    pub(super) parts: Mutex<BTreeMap<(String, i32), Following>>,
    wake: Notify,
    pub(super) share_wake: Notify,
}

/// The fetch loops, by leader.
#[derive(Debug, Default)]
pub(crate) struct Fetchers {
    runtime: OnceLock<tokio::runtime::Handle>,
    loops: Mutex<HashMap<i32, Arc<Loop>>>,
}

impl Fetchers {
    /// Remembers the runtime fetch loops run on (applied entries arrive on
    /// other threads).
    pub(crate) fn set_runtime(&self, h: tokio::runtime::Handle) {
        let _ = self.runtime.set(h);
    }

    pub(crate) fn stop_following(&self, topic: &str, partition: i32) {
        for l in self.loops.lock().values() {
            l.parts.lock().remove(&(topic.to_string(), partition));
        }
    }

    fn follow(&self, b: &Arc<Broker>, leader: i32, f: Following) {
        let key = (f.topic.name.clone(), f.slot.index);
        self.stop_following(&key.0, key.1);
        let mut loops = self.loops.lock();
        let l = match loops.get(&leader) {
            Some(l) => l.clone(),
            None => {
                let Some(rt) = self.runtime.get() else {
                    tracing::error!(leader, "no runtime for the fetch loop");
                    return;
                };
                let l = Arc::new(Loop::default());
                rt.spawn(fetch_loop(Arc::downgrade(b), leader, l.clone()));
                rt.spawn(super::share_replicas::share_loop(
                    Arc::downgrade(b),
                    leader,
                    l.clone(),
                ));
                loops.insert(leader, l.clone());
                l
            }
        };
        l.parts.lock().insert(key, f);
        l.wake.notify_one();
        l.share_wake.notify_one();
    }
}

impl Broker {
    pub(crate) fn fetchers(&self) -> Arc<Fetchers> {
        self.extension(Fetchers::default)
    }

    /// Whether shutdown has begun.
    pub fn is_stopping(&self) -> bool {
        *self.stopping.borrow()
    }

    /// Reacts to one applied metadata event: the roles of the partitions it
    /// touches.
    pub(crate) fn reconcile_event(self: &Arc<Self>, image: &MetaImage, e: &MetaEvent) {
        self.reconcile_groups(image, Some(e));
        self.txn_failover_event(image, e);
        match e {
            MetaEvent::Leadership { name, .. }
            | MetaEvent::TopicCreated(name)
            | MetaEvent::PartitionsCreated { name, .. } => {
                if let Some(t) = self.topic(name) {
                    self.reconcile_topic(image, &t);
                }
            }
            _ => {}
        }
    }

    /// Proposes the ISR with a follower that has caught up (called from
    /// that follower's fetch, as Kafka's `maybeExpandIsr`: only a fetch
    /// that reaches the high watermark puts a follower back), unless a
    /// change is in flight. Returns at once; the applied entry brings the
    /// new ISR.
    pub fn isr_expand_due(
        self: &Arc<Self>,
        topic: &Topic,
        slot: &Arc<PartitionSlot>,
        follower: i32,
    ) {
        if let Some(isr) = slot.log.replica().expand_due(follower) {
            // The share-group state too (§3.10 of docs/share-groups-design.md):
            // a replica that may be elected holds every acknowledgement answered.
            if !self.shares_caught_up(topic.id, slot.index, follower) {
                return;
            }
            self.alter_partition(topic, slot, isr, "ISR expand");
        }
    }

    /// Proposes the ISR without `followers` (in-sync followers that did not
    /// copy a share-state change within `replica.lag.time.max.ms`), unless
    /// a change is in flight or this broker does not lead the partition.
    pub(crate) fn isr_remove(
        self: &Arc<Self>,
        topic: &Topic,
        slot: &Arc<PartitionSlot>,
        followers: &[i32],
    ) {
        let r = slot.log.replica();
        if r.role() != Role::Leader || r.proposing() || followers.is_empty() {
            return;
        }
        let Some(a) = r.assignment() else {
            return;
        };
        let isr: Vec<i32> = a
            .isr
            .iter()
            .copied()
            .filter(|i| !followers.contains(i))
            .collect();
        if isr.len() < a.isr.len() && !isr.is_empty() {
            self.alter_partition(topic, slot, isr, "ISR shrink");
        }
    }

    /// Proposes the ISR without the followers that have not caught up
    /// within `replica.lag.time.max.ms`, unless a change is in flight.
    pub fn isr_shrink_due(self: &Arc<Self>, topic: &Topic, slot: &Arc<PartitionSlot>) {
        let lag_max = self.config.replica_lag_time_max_ms;
        if let Some(isr) = slot
            .log
            .replica()
            .shrink_due(self.clock().now_ms(), lag_max)
        {
            self.alter_partition(topic, slot, isr, "ISR shrink");
        }
    }

    /// After an unclean election: an AlterPartition with the ISR this
    /// leader alone and the partition recovered (once; retried by the next
    /// reconcile if refused).
    fn propose_recovered(self: &Arc<Self>, topic: &Topic, slot: &Arc<PartitionSlot>) {
        if slot.log.replica().proposing() {
            return;
        }
        self.alter_partition(topic, slot, vec![self.node_id()], "leader recovery");
    }

    /// Proposes this leader's AlterPartition for `slot`: the ISR `isr`, the
    /// partition recovered, at the leader and partition epochs it holds.
    /// Noted as in flight until applied (the applied entry brings it) or
    /// refused (`what` is logged).
    fn alter_partition(
        self: &Arc<Self>,
        topic: &Topic,
        slot: &Arc<PartitionSlot>,
        isr: Vec<i32>,
        what: &'static str,
    ) {
        let replica = slot.log.replica().clone();
        let (Some(a), Some(rt)) = (replica.assignment(), self.fetchers().runtime.get().cloned())
        else {
            return;
        };
        let me = self.node_id();
        let Some(broker_epoch) = self
            .image()
            .and_then(|i| i.brokers.get(&me).map(|b| b.epoch))
        else {
            return;
        };
        replica.propose_isr(isr.clone());
        let b = self.clone();
        let (name, partition, topic_id) = (topic.name.clone(), slot.index, topic.id.to_string());
        rt.spawn(async move {
            tracing::info!(topic = %name, partition, from = ?a.isr, to = ?isr, "proposing: {what}");
            let req = MetaRequest::AlterPartition {
                broker_id: me,
                broker_epoch,
                partitions: vec![AlterPartitionItem {
                    topic_id,
                    partition,
                    leader_epoch: a.leader_epoch,
                    partition_epoch: a.partition_epoch,
                    new_isr: isr
                        .iter()
                        .map(|r| IsrMember {
                            broker_id: *r,
                            broker_epoch: -1,
                        })
                        .collect(),
                    leader_recovery: LeaderRecovery::Recovered,
                }],
            };
            match b.propose_checked(req).await {
                Err(e) => {
                    tracing::info!(topic = %name, partition, error = %e.message, "refused: {what}");
                    replica.proposal_failed();
                }
                // Kafka's IsrShrinksPerSec / IsrExpandsPerSec: committed changes.
                Ok(_) => match what {
                    "ISR shrink" => {
                        crate::metrics::kafka_metrics().isr_shrinks.inc();
                    }
                    "ISR expand" => {
                        crate::metrics::kafka_metrics().isr_expands.inc();
                    }
                    _ => {}
                },
            }
        });
    }

    /// Every `replica.lag.time.max.ms / 2`, the ISR of each partition led
    /// here loses the followers that have not caught up within it.
    pub(crate) async fn isr_shrink_task(b: Weak<Broker>) {
        let Some(period) = b.upgrade().map(|me| {
            Duration::from_millis((me.config.replica_lag_time_max_ms / 2).max(100) as u64)
        }) else {
            return;
        };
        Broker::every(b, period, |me| async move {
            for (t, slot) in me.partitions_snapshot() {
                let r = slot.log.replica();
                if r.role() == Role::Leader && r.assignment().is_some() {
                    me.isr_shrink_due(&t, &slot);
                }
            }
        })
        .await
    }

    /// Runs `tick` every `period` until the broker is gone or stopping.
    /// Holds the broker weakly between ticks, so a task started with it
    /// never keeps it alive.
    pub(crate) async fn every<F, Fut>(b: Weak<Broker>, period: Duration, mut tick: F)
    where
        F: FnMut(Arc<Broker>) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        let Some(mut stop) = b.upgrade().map(|me| me.stopping.subscribe()) else {
            return;
        };
        loop {
            tokio::select! {
                _ = tokio::time::sleep(period) => {}
                _ = stop.changed() => return,
            }
            let Some(me) = b.upgrade() else {
                return;
            };
            if me.is_stopping() {
                return;
            }
            tick(me).await;
        }
    }

    /// Takes the roles the applied metadata gives this broker for every
    /// hosted partition.
    pub(crate) fn reconcile_all(self: &Arc<Self>, image: &MetaImage) {
        for t in self.topics() {
            self.reconcile_topic(image, &t);
        }
    }

    /// Takes the roles the applied metadata gives this broker for the
    /// hosted partitions of `topic`.
    pub(crate) fn reconcile_topic(self: &Arc<Self>, image: &MetaImage, topic: &Arc<Topic>) {
        let Some(info) = image.topics.get(&topic.name) else {
            return;
        };
        let me = self.node_id();
        let now = self.clock().now_ms();
        for slot in topic.partitions() {
            let Some(p) = usize::try_from(slot.index)
                .ok()
                .and_then(|i| info.partitions.get(i))
            else {
                continue;
            };
            let a = Assignment {
                leader: p.leader,
                leader_epoch: p.leader_epoch,
                partition_epoch: p.partition_epoch,
                replicas: p.replicas.clone(),
                isr: p.isr.clone(),
            };
            let storage = slot.log.storage().clone();
            let replica = slot.log.replica().clone();
            let t = replica.apply(me, a.clone(), storage.log_end_offset(), now);
            for d in t.failed {
                d(Err(WaitError::NotLeader));
            }
            match t.role {
                Role::Leader => {
                    self.fetchers().stop_following(&topic.name, slot.index);
                    if t.changed {
                        if let Err(e) = storage.assign_leader_epoch(a.leader_epoch) {
                            tracing::error!(topic = %topic.name, partition = slot.index, error = %e, "recording the new leader epoch failed");
                        }
                        tracing::info!(topic = %topic.name, partition = slot.index, epoch = a.leader_epoch, "leading");
                    }
                    self.set_replicated(&slot);
                    // The ISR may have changed: share answers waiting for
                    // followers look again.
                    self.shares().replicas_changed(topic.id, slot.index);
                    if !p.leader_recovery.is_recovered() {
                        // Elected from outside the ISR (unclean.leader.election.enable):
                        // this log is now the partition's, whatever the old ISR had
                        // beyond it is gone. Nothing else to rebuild here, so the leader
                        // says at once that it has recovered (KIP-704), after which the
                        // ISR may grow again.
                        if t.changed {
                            tracing::warn!(topic = %topic.name, partition = slot.index, epoch = a.leader_epoch, log_end = storage.log_end_offset(), "elected leader from outside the ISR (unclean leader election): records the previous in-sync replicas had beyond this log end are lost");
                        }
                        self.propose_recovered(topic, &slot);
                    }
                }
                Role::Follower { leader } => {
                    storage.set_replicated(true);
                    if t.changed {
                        self.shares().demote(topic.id, slot.index);
                        tracing::info!(topic = %topic.name, partition = slot.index, leader, epoch = a.leader_epoch, "following");
                        self.fetchers().follow(
                            self,
                            leader,
                            Following {
                                topic: topic.clone(),
                                slot: slot.clone(),
                                leader_epoch: a.leader_epoch,
                                truncate: true,
                                retry_at: None,
                                refusals: 0,
                            },
                        );
                    }
                }
                Role::Offline => {
                    self.fetchers().stop_following(&topic.name, slot.index);
                    storage.set_replicated(true);
                    if t.changed {
                        self.shares().demote(topic.id, slot.index);
                    }
                }
            }
            slot.waiters.wake_all();
        }
    }

    /// A leader's storage mode: its own durable end is the high watermark
    /// while it is alone in the ISR; with followers, the high watermark is
    /// the one the replica state computes (seeded from storage's when the
    /// mode changes, so it never goes back).
    pub(crate) fn set_replicated(&self, slot: &PartitionSlot) {
        let storage = slot.log.storage();
        let replica = slot.log.replica();
        if replica.replicated() {
            replica.seed_high_watermark(storage.high_watermark());
            storage.set_replicated(true);
            storage.set_high_watermark(replica.high_watermark());
            let (hw, done) = replica.recompute(storage.durable_end());
            if let Some(hw) = hw {
                storage.set_high_watermark(hw);
            }
            for (d, r) in done {
                d(r);
            }
        } else {
            storage.set_replicated(false);
            // Waits registered while followers counted: the leader's own
            // fsync now decides them.
            let durable = storage.durable_end();
            let (_, done) = replica.recompute(durable);
            for (d, r) in done {
                d(r);
            }
            for (end, d) in replica.take_waiters() {
                storage.when_durable(end, Box::new(move |r| d(r.map_err(WaitError::Storage))));
            }
        }
    }
}

/// The partitions of one request, by topic name.
struct ByTopic<'a>(BTreeMap<String, Vec<&'a Following>>);

impl<'a> ByTopic<'a> {
    fn of(parts: impl Iterator<Item = &'a Following>) -> Self {
        let mut m: BTreeMap<String, Vec<&Following>> = BTreeMap::new();
        for p in parts {
            m.entry(p.topic.name.clone()).or_default().push(p);
        }
        ByTopic(m)
    }

    /// The partition an answer names, if the request asked for it (an
    /// answer is untrusted: anything else is ignored).
    fn find(&self, topic: &str, partition: i32) -> Option<&'a Following> {
        self.0
            .get(topic)
            .and_then(|ps| ps.iter().find(|p| p.slot.index == partition))
            .copied()
    }
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

/// The `host:port` a follower reaches `leader` at, from the applied metadata.
pub(super) fn leader_addr(broker: &Broker, leader: i32) -> Option<String> {
    let image = broker.image();
    broker.inter_broker_addr(image.as_deref(), leader)
}

/// One leader's fetch loop; ends when the broker is gone or no partition is
/// left to follow from this leader.
async fn fetch_loop(b: Weak<Broker>, leader: i32, l: Arc<Loop>) {
    let client = InterBrokerClient::default();
    let mut decoder = BatchDecoder::new();
    loop {
        let Some(broker) = b.upgrade() else {
            return;
        };
        let parts: Vec<Following> = l.parts.lock().values().cloned().collect();
        if parts.is_empty() {
            drop(broker);
            l.wake.notified().await;
            continue;
        }
        let Some(addr) = leader_addr(&broker, leader) else {
            drop(broker);
            tokio::time::sleep(RETRY_BACKOFF).await;
            continue;
        };
        // Partitions that have just started following truncate first; a
        // partition the leader refuses waits alone, the others fetch.
        let now = Instant::now();
        let due: Vec<&Following> = parts
            .iter()
            .filter(|p| p.truncate && p.retry_at.is_none_or(|t| t <= now))
            .collect();
        if !due.is_empty() {
            if let Err(e) = truncate(&broker, &client, leader, &addr, &l, &due).await {
                tracing::warn!(leader, error = %e, "truncation by leader epoch failed; retrying");
                drop(broker);
                tokio::time::sleep(RETRY_BACKOFF).await;
            }
            continue;
        }
        let parts: Vec<Following> = parts.into_iter().filter(|p| !p.truncate).collect();
        if parts.is_empty() {
            drop(broker);
            tokio::select! {
                _ = tokio::time::sleep(RETRY_BACKOFF) => {}
                _ = l.wake.notified() => {}
            }
            continue;
        }
        match fetch_round(&broker, &client, &mut decoder, leader, &addr, &parts).await {
            Ok(true) => {}
            // Every partition refused (the leader's metadata is behind or
            // ahead of ours): wait for the metadata to settle.
            Ok(false) => {
                drop(broker);
                tokio::time::sleep(RETRY_BACKOFF).await;
            }
            Err(e) => {
                tracing::debug!(leader, error = %e, "replica fetch failed; retrying");
                drop(broker);
                tokio::time::sleep(RETRY_BACKOFF).await;
            }
        }
    }
}

/// Truncates the partitions `parts` by OffsetForLeaderEpoch: to the end of
/// the latest local epoch as the leader has it (Kafka's rules). A partition
/// the leader answers with an error stays marked and is backed off alone;
/// Err only when the request itself failed.
async fn truncate(
    b: &Arc<Broker>,
    client: &InterBrokerClient,
    leader: i32,
    addr: &str,
    l: &Loop,
    parts: &[&Following],
) -> Result<(), String> {
    let mut req = OffsetForLeaderEpochRequest::default();
    req.replica_id = BrokerId(b.node_id());
    let by_topic = ByTopic::of(parts.iter().copied());
    for (name, ps) in &by_topic.0 {
        let mut t = OffsetForLeaderTopic::default();
        t.topic = topic_name(name);
        t.partitions = ps
            .iter()
            .map(|p| {
                let mut q = OffsetForLeaderPartition::default();
                q.partition = p.slot.index;
                q.current_leader_epoch = p.leader_epoch;
                q.leader_epoch = p.slot.log.storage().latest_leader_epoch().unwrap_or(-1);
                q
            })
            .collect();
        req.topics.push(t);
    }
    let resp = client
        .send(leader, addr, EPOCHS_VERSION, &req)
        .await
        .map_err(|e| e.to_string())?;
    for t in resp.topics {
        for r in t.partitions {
            let name = t.topic.0.to_string();
            let Some(p) = by_topic.find(&name, r.partition) else {
                continue;
            };
            if r.error_code != 0 {
                // Unknown here yet, or no longer the leader, or the epochs
                // disagree: the metadata settles it (a new assignment
                // replaces this entry, a deletion removes it).
                refused(l, &name, p, r.error_code);
                continue;
            }
            let storage = p.slot.log.storage().clone();
            let log_end = storage.log_end_offset();
            let cut = if r.leader_epoch < 0 || r.end_offset < 0 {
                // The leader knows no epoch as old as ours: nothing it can
                // vouch for past its own log start; keep what we have up
                // to the high watermark.
                storage.high_watermark()
            } else {
                let (ours, our_end) = storage.end_offset_for_epoch(r.leader_epoch);
                let ours = if ours == r.leader_epoch {
                    our_end.max(0) as u64
                } else {
                    log_end
                };
                ours.min(r.end_offset as u64)
            }
            .min(log_end);
            if cut < log_end {
                tracing::warn!(topic = %name, partition = r.partition, from = log_end, to = cut, "truncating the log to the leader's");
                let s = storage.clone();
                tokio::task::spawn_blocking(move || s.truncate_to(cut))
                    .await
                    .map_err(|e| e.to_string())?
                    .map_err(|e| e.to_string())?;
            }
            if let Some(f) = l.parts.lock().get_mut(&(name.clone(), r.partition)) {
                if f.leader_epoch == p.leader_epoch {
                    f.truncate = false;
                }
            }
        }
    }
    Ok(())
}

/// Backs off one partition the leader refused to truncate.
fn refused(l: &Loop, name: &str, p: &Following, error: i16) {
    let mut parts = l.parts.lock();
    let Some(f) = parts.get_mut(&(name.to_string(), p.slot.index)) else {
        return;
    };
    if f.leader_epoch != p.leader_epoch {
        return;
    }
    if f.refusals == 0 {
        tracing::warn!(topic = %name, partition = p.slot.index, leader_epoch = p.leader_epoch, error, "the leader refused truncation by leader epoch; retrying this partition");
    } else {
        tracing::debug!(topic = %name, partition = p.slot.index, error, refusals = f.refusals, "the leader refused truncation by leader epoch again");
    }
    f.refusals = f.refusals.saturating_add(1);
    f.retry_at = Some(Instant::now() + RETRY_BACKOFF);
}

/// One replica fetch from `leader` and the appends it brings. Ok(false)
/// when the leader refused every partition.
async fn fetch_round(
    b: &Arc<Broker>,
    client: &InterBrokerClient,
    decoder: &mut BatchDecoder,
    leader: i32,
    addr: &str,
    parts: &[Following],
) -> Result<bool, String> {
    let mut req = FetchRequest::default();
    req.replica_id = BrokerId(b.node_id());
    req.max_wait_ms = FETCH_MAX_WAIT_MS;
    req.min_bytes = 1;
    req.max_bytes = FETCH_MAX_BYTES;
    req.isolation_level = 0;
    req.session_id = 0;
    req.session_epoch = -1;
    let by_topic = ByTopic::of(parts.iter());
    for (name, ps) in &by_topic.0 {
        let mut t = FetchTopic::default();
        t.topic = topic_name(name);
        t.partitions = ps
            .iter()
            .map(|p| {
                let storage = p.slot.log.storage();
                let mut q = FetchPartition::default();
                q.partition = p.slot.index;
                q.current_leader_epoch = p.leader_epoch;
                q.fetch_offset = storage.durable_end() as i64;
                q.last_fetched_epoch = storage.latest_leader_epoch().unwrap_or(-1);
                q.log_start_offset = storage.log_start_offset() as i64;
                q.partition_max_bytes = FETCH_PARTITION_MAX_BYTES;
                q
            })
            .collect();
        req.topics.push(t);
    }
    let resp = client
        .send(leader, addr, FETCH_VERSION, &req)
        .await
        .map_err(|e| e.to_string())?;
    if resp.error_code != 0 {
        return Err(format!("fetch error {}", resp.error_code));
    }
    // The topic's name is shared by its partitions' entries (no copy each).
    let mut appended: Vec<(Arc<str>, Arc<PartitionSlot>, i64)> = Vec::new();
    let mut served = 0usize;
    for t in resp.responses {
        let name: Arc<str> = Arc::from(t.topic.0.as_str());
        for r in t.partitions {
            let Some(p) = by_topic.find(&name, r.partition_index) else {
                continue;
            };
            let storage = p.slot.log.storage().clone();
            if r.error_code == OFFSET_OUT_OF_RANGE {
                // Below the leader's log start: start over at it; beyond
                // its end: back to its high watermark (Kafka's follower).
                let ours = storage.durable_end() as i64;
                let s = storage.clone();
                let (start, hw) = (r.log_start_offset, r.high_watermark);
                tracing::warn!(topic = %name, partition = r.partition_index, ours, start, hw, "fetch offset out of the leader's range");
                tokio::task::spawn_blocking(move || {
                    if ours < start {
                        s.truncate_fully_and_start_at(start.max(0) as u64)
                    } else {
                        s.truncate_to(hw.max(0) as u64)
                    }
                })
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())?;
                continue;
            }
            if r.error_code != 0 {
                tracing::debug!(topic = %name, partition = r.partition_index, error = r.error_code, "replica fetch refused");
                continue;
            }
            served += 1;
            if r.diverging_epoch.epoch >= 0 {
                let (ours, our_end) = storage.end_offset_for_epoch(r.diverging_epoch.epoch);
                let mut cut = r.diverging_epoch.end_offset.max(0) as u64;
                if ours == r.diverging_epoch.epoch {
                    cut = cut.min(our_end.max(0) as u64);
                }
                let cut = cut.min(storage.log_end_offset());
                tracing::warn!(topic = %name, partition = r.partition_index, to = cut, "the leader's log diverges; truncating");
                let s = storage.clone();
                tokio::task::spawn_blocking(move || s.truncate_to(cut))
                    .await
                    .map_err(|e| e.to_string())?
                    .map_err(|e| e.to_string())?;
                continue;
            }
            let records = r.records.unwrap_or_default();
            if !records.is_empty() {
                let limits = DecodeLimits::trusted(FETCH_MAX_BYTES as usize);
                append_fetched(&storage, decoder, &records, &limits)
                    .map_err(|e| format!("{name}-{}: {e}", r.partition_index))?;
            }
            appended.push((name.clone(), p.slot.clone(), r.high_watermark));
        }
    }
    for (name, slot, leader_hw) in appended {
        let storage = slot.log.storage().clone();
        let end = storage.log_end_offset();
        let s = storage.clone();
        tokio::task::spawn_blocking(move || s.wait_durable(end))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        let leader_hw = u64::try_from(leader_hw).unwrap_or(0);
        let hw = leader_hw.min(storage.durable_end());
        storage.set_high_watermark(hw);
        catch_up_progress(&name, slot.index, end, leader_hw);
    }
    Ok(served > 0)
}

/// A follower behind its leader's high watermark: a new replica of a
/// reassignment copying the log, or one back after an outage.
struct CatchUp {
    started: Instant,
    start_end: u64,
    lag: u64,
    reported: Instant,
    updated: Instant,
    logged: bool,
}

/// The partitions this broker follows and is behind on, by (topic, partition).
static CATCHING_UP: std::sync::LazyLock<Mutex<HashMap<(String, i32), CatchUp>>> =
    std::sync::LazyLock::new(|| Mutex::new(HashMap::new()));

/// How often a follower catching up says where it is.
const PROGRESS_INTERVAL: Duration = Duration::from_secs(5);
/// A partition not fetched for this long is no longer counted as catching up
/// (it stopped following here: moved away, deleted, or this broker leads it).
const CATCH_UP_FORGET: Duration = Duration::from_secs(60);

/// After a fetch of `topic`-`partition` that left its log at `end` with the
/// leader's high watermark at `leader_hw`: logs the copy's progress every
/// [`PROGRESS_INTERVAL`] while it is behind (and once when it has caught
/// up, if it said anything), and sets the catch-up gauges of /metrics.
fn catch_up_progress(topic: &str, partition: i32, end: u64, leader_hw: u64) {
    catch_up_progress_at(Instant::now(), topic, partition, end, leader_hw);
}

/// [`catch_up_progress`] at `now`; whether it logged a progress line.
fn catch_up_progress_at(
    now: Instant,
    topic: &str,
    partition: i32,
    end: u64,
    leader_hw: u64,
) -> bool {
    let mut said = false;
    let mut all = CATCHING_UP.lock();
    if end >= leader_hw && all.is_empty() {
        // The common case, every fetch of a follower in step: nothing to
        // forget, nothing to count (the gauges are already 0).
        return false;
    }
    let key = (topic.to_string(), partition);
    if end >= leader_hw {
        if let Some(c) = all.remove(&key) {
            if c.logged {
                tracing::info!(
                    topic,
                    partition,
                    end,
                    "replica catch-up done: {topic}-{partition} copied {} offsets in {:.1} s",
                    end.saturating_sub(c.start_end),
                    now.duration_since(c.started).as_secs_f64()
                );
            }
        }
    } else {
        let c = all.entry(key).or_insert(CatchUp {
            started: now,
            start_end: end,
            lag: 0,
            reported: now,
            updated: now,
            logged: false,
        });
        c.lag = leader_hw - end;
        c.updated = now;
        if now.duration_since(c.reported) >= PROGRESS_INTERVAL {
            let secs = now.duration_since(c.started).as_secs_f64().max(0.001);
            let rate = end.saturating_sub(c.start_end) as f64 / secs;
            let left = if rate > 0.0 {
                format!("{:.0} s", c.lag as f64 / rate)
            } else {
                "unknown".to_string()
            };
            tracing::info!(
                topic,
                partition,
                end,
                leader_high_watermark = leader_hw,
                lag = c.lag,
                "replica catch-up: {topic}-{partition} at {end} of the leader's {leader_hw} ({} behind), {rate:.0} offsets/s, time left {left}",
                c.lag
            );
            c.reported = now;
            c.logged = true;
            said = true;
        }
    }
    all.retain(|_, c| now.duration_since(c.updated) < CATCH_UP_FORGET);
    let m = crate::metrics::kafka_metrics();
    m.replica_catch_up_partitions
        .set(i64::try_from(all.len()).unwrap_or(i64::MAX));
    m.replica_catch_up_lag
        .set(i64::try_from(all.values().map(|c| c.lag).sum::<u64>()).unwrap_or(i64::MAX));
    said
}

/// Appends the whole batches of one partition's fetched records at the
/// leader's offsets, one storage append per run of batches of one leader
/// epoch. A partial batch at the end (a leader may cut one) is left for the
/// next fetch.
fn append_fetched(
    storage: &es_storage::Partition,
    decoder: &mut BatchDecoder,
    records: &[u8],
    limits: &DecodeLimits,
) -> Result<(), String> {
    let mut rest = records;
    let mut buf = RecordBatchBuf::new();
    let mut offsets: Vec<u64> = Vec::new();
    let mut run_epoch: Option<i32> = None;
    let flush = |buf: &mut RecordBatchBuf, offsets: &mut Vec<u64>, epoch: Option<i32>| {
        if let Some(epoch) = epoch.filter(|_| !offsets.is_empty()) {
            storage
                .append_replica(buf, offsets, epoch)
                .map_err(|e| e.to_string())?;
        }
        buf.clear();
        offsets.clear();
        Ok::<(), String>(())
    };
    while let Some(len) = whole_batch_len(rest) {
        let (batch, tail) = rest.split_at(len);
        rest = tail;
        let epoch = i32::from_be_bytes([batch[12], batch[13], batch[14], batch[15]]);
        if run_epoch.is_some_and(|e| e != epoch) {
            flush(&mut buf, &mut offsets, run_epoch)?;
        }
        run_epoch = Some(epoch);
        decoder
            .decode_replica(batch, &mut buf, &mut offsets, limits)
            .map_err(|e| e.to_string())?;
    }
    flush(&mut buf, &mut offsets, run_epoch)
}

#[cfg(test)]
mod catch_up_tests {
    use super::*;

    #[test]
    fn a_follower_behind_reports_every_interval_until_it_has_caught_up() {
        let t0 = Instant::now();
        let behind =
            |at: Duration, end: u64| catch_up_progress_at(t0 + at, "catch-up-test", 0, end, 1_000);
        assert!(!behind(Duration::ZERO, 0), "nothing said at once");
        assert!(
            !behind(Duration::from_secs(3), 300),
            "nor before the interval"
        );
        assert!(behind(Duration::from_secs(6), 600), "a line after 5 s");
        let gone = |key: &(String, i32)| !CATCHING_UP.lock().contains_key(key);
        let key = ("catch-up-test".to_string(), 0);
        assert_eq!(CATCHING_UP.lock().get(&key).map(|c| c.lag), Some(400));
        assert!(!behind(Duration::from_secs(8), 800), "not again within 5 s");
        assert!(behind(Duration::from_secs(11), 900));
        assert!(!behind(Duration::from_secs(12), 1_000), "caught up");
        assert!(gone(&key));
    }
}
