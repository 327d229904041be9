//! Replica Fetch: a follower's fetch from this broker, the partition's
//! leader (Kafka's Fetch with `replica_id` >= 0, or `replica_state` from
//! v15).
//!
//! Per partition, as Kafka's `Partition.fetchRecords` for a follower: the
//! request's current leader epoch is checked (FENCED_LEADER_EPOCH,
//! UNKNOWN_LEADER_EPOCH), the follower's last fetched epoch is checked
//! against this leader's epoch history (a divergence is answered with
//! `diverging_epoch`, no records, and the follower truncates), the fetch
//! offset must lie within the log (OFFSET_OUT_OF_RANGE). The fetch offset
//! is the follower's fsynced end (its fetch loop waits for its fsync
//! before fetching again), so it moves the high watermark
//! ([`crate::replica::Replica::follower_fetched`]) and may add the follower
//! to the ISR.
//!
//! Records are served up to this leader's own durable end (never beyond:
//! a follower never holds a record its leader could lose in a crash), each
//! batch stamped with the leader epoch its records were written in, in
//! CreateTime with every produced batch as produced, so the follower can
//! store exactly the leader's records (docs/replication.md). The request
//! long-polls like a consumer's fetch, woken by new durable records.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use es_storage::epochs::EpochEntry;
use es_storage::record::RecordIter;
use es_storage::{ReadBuf, RecordView};
use kafka_protocol::messages::fetch_response::{
    EpochEndOffset, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::{FetchRequest, FetchResponse};
use tokio::sync::Notify;

use super::super::{blocking, Ctx, RequestError};
use crate::broker::Broker;
use crate::codec::compression::Compression;
use crate::codec::encode::{BatchEncoder, CodecRules, EncodeOptions};
use crate::codec::frame::ResponseFrame;
use crate::errors::ResponseError;
use crate::replica::Role;
use crate::topics::{PartitionSlot, Topic};

/// Longest a follower's fetch is held.
const MAX_WAIT_MS: i32 = 5_000;
/// Largest answer, whatever the follower asks.
const RESPONSE_BYTES_MAX: usize = 8 << 20;

fn code(e: ResponseError) -> i16 {
    e.code()
}

/// One partition the follower asked for.
#[derive(Clone)]
struct Asked {
    topic: Option<Arc<Topic>>,
    slot: Option<Arc<PartitionSlot>>,
    partition: i32,
    fetch_offset: i64,
    current_leader_epoch: i32,
    last_fetched_epoch: i32,
    max_bytes: usize,
}

pub async fn serve(
    ctx: &Ctx,
    req: FetchRequest,
    follower: i32,
) -> Result<Option<ResponseFrame>, RequestError> {
    let v = ctx.version;
    let b = ctx.broker.clone();
    let mut asked: Vec<(usize, Asked)> = Vec::new();
    let mut topics: Vec<FetchableTopicResponse> = Vec::new();
    for (ti, t) in req.topics.iter().enumerate() {
        let topic = if v >= 13 {
            b.topic_by_id(t.topic_id)
        } else {
            b.topic(&t.topic.0)
        };
        let mut out = FetchableTopicResponse::default();
        out.topic = t.topic.clone();
        out.topic_id = t.topic_id;
        topics.push(out);
        for p in &t.partitions {
            asked.push((
                ti,
                Asked {
                    slot: topic.as_ref().and_then(|t| t.partition(p.partition)),
                    topic: topic.clone(),
                    partition: p.partition,
                    fetch_offset: p.fetch_offset,
                    current_leader_epoch: p.current_leader_epoch,
                    last_fetched_epoch: p.last_fetched_epoch,
                    max_bytes: usize::try_from(p.partition_max_bytes).unwrap_or(0),
                },
            ));
        }
    }
    let max_wait = Duration::from_millis(req.max_wait_ms.clamp(0, MAX_WAIT_MS) as u64);
    let deadline = Instant::now() + max_wait;
    let max_bytes = usize::try_from(req.max_bytes)
        .unwrap_or(0)
        .min(RESPONSE_BYTES_MAX);
    let notify = Arc::new(Notify::new());
    let answers = loop {
        // Registered before every read pass: a wake takes the registration
        // with it (and leaves a permit, so one between the read and the
        // wait is not lost).
        for (_, a) in &asked {
            if let Some(s) = &a.slot {
                s.waiters.register(&notify);
            }
        }
        let bb = b.clone();
        let parts: Vec<Asked> = asked.iter().map(|(_, a)| a.clone()).collect();
        let answers = blocking(move || {
            let mut budget = max_bytes;
            parts
                .into_iter()
                .map(|a| {
                    let slot = a.topic.clone().zip(a.slot.clone());
                    let d = read_one(
                        &bb,
                        slot.as_ref(),
                        a.partition,
                        a.fetch_offset,
                        a.current_leader_epoch,
                        a.last_fetched_epoch,
                        follower,
                        a.max_bytes.min(budget),
                    );
                    budget = budget.saturating_sub(d.records.as_ref().map_or(0, Bytes::len));
                    d
                })
                .collect::<Vec<PartitionData>>()
        })
        .await?;
        let any = answers.iter().any(|d| {
            d.error_code != 0
                || d.records.as_ref().is_some_and(|r| !r.is_empty())
                || d.diverging_epoch.epoch >= 0
        });
        let now = Instant::now();
        if any || now >= deadline || b.is_stopping() {
            break answers;
        }
        if tokio::time::timeout(deadline - now, notify.notified())
            .await
            .is_err()
        {
            // One more read at the deadline, then answer.
            continue;
        }
    };
    for (_, a) in &asked {
        if let Some(s) = &a.slot {
            s.waiters.deregister(&notify);
        }
    }
    for ((ti, a), d) in asked.iter().zip(answers) {
        let _ = a;
        topics[*ti].partitions.push(d);
    }
    let mut r = FetchResponse::default();
    r.responses = topics;
    Ok(ctx.respond(&r)?.map(ResponseFrame::from))
}

fn refused(partition: i32, e: ResponseError) -> PartitionData {
    let mut d = PartitionData::default();
    d.partition_index = partition;
    d.error_code = code(e);
    d.high_watermark = -1;
    d.last_stable_offset = -1;
    d.log_start_offset = -1;
    d.records = Some(Bytes::new());
    // Kafka lists aborted transactions only for read_committed consumers.
    d.aborted_transactions = None;
    d
}

/// One partition's answer. Blocking (reads the log).
#[allow(clippy::too_many_arguments)]
fn read_one(
    b: &Arc<Broker>,
    slot: Option<&(Arc<Topic>, Arc<PartitionSlot>)>,
    partition: i32,
    fetch_offset: i64,
    current_leader_epoch: i32,
    last_fetched_epoch: i32,
    follower: i32,
    max_bytes: usize,
) -> PartitionData {
    let Some((topic, slot)) = slot else {
        return refused(partition, ResponseError::UnknownTopicOrPartition);
    };
    let replica = slot.log.replica();
    let Some(a) = replica.assignment() else {
        return refused(partition, ResponseError::NotLeaderOrFollower);
    };
    if replica.role() != Role::Leader {
        return refused(partition, ResponseError::NotLeaderOrFollower);
    }
    if current_leader_epoch >= 0 && current_leader_epoch < a.leader_epoch {
        return refused(partition, ResponseError::FencedLeaderEpoch);
    }
    if current_leader_epoch > a.leader_epoch {
        return refused(partition, ResponseError::UnknownLeaderEpoch);
    }
    // Only another replica of the partition is a follower (Kafka looks the
    // fetcher up among the leader's remote replicas).
    if follower == b.node_id() || !a.replicas.contains(&follower) {
        return refused(partition, ResponseError::NotLeaderOrFollower);
    }
    let storage = slot.log.storage();
    let mut d = PartitionData::default();
    d.partition_index = partition;
    d.records = Some(Bytes::new());
    d.aborted_transactions = None;
    d.log_start_offset = storage.log_start_offset() as i64;
    if last_fetched_epoch >= 0 {
        let (epoch, end) = storage.end_offset_for_epoch(last_fetched_epoch);
        if epoch < last_fetched_epoch || end < fetch_offset {
            let mut div = EpochEndOffset::default();
            div.epoch = epoch;
            div.end_offset = end;
            d.diverging_epoch = div;
            d.high_watermark = storage.high_watermark() as i64;
            d.last_stable_offset = storage.last_stable_offset() as i64;
            return d;
        }
    }
    let log_end = storage.log_end_offset();
    let Ok(offset) = u64::try_from(fetch_offset) else {
        return refused(partition, ResponseError::OffsetOutOfRange);
    };
    if offset > log_end || offset < storage.log_start_offset() {
        let mut r = refused(partition, ResponseError::OffsetOutOfRange);
        r.high_watermark = storage.high_watermark() as i64;
        r.log_start_offset = storage.log_start_offset() as i64;
        return r;
    }
    // The follower has `offset` on disk: the high watermark may move.
    let durable = storage.durable_end();
    let now = b.clock().now_ms();
    let (hw, done) = replica.follower_fetched(follower, offset, log_end, durable, now);
    if let Some(hw) = hw {
        storage.set_high_watermark(hw);
        slot.waiters.wake_all();
    }
    for (f, r) in done {
        f(r);
    }
    b.isr_expand_due(topic, slot, follower);
    d.high_watermark = storage.high_watermark() as i64;
    d.last_stable_offset = storage.last_stable_offset() as i64;
    if offset >= durable || max_bytes == 0 {
        return d;
    }
    match read_records(storage, offset, durable, max_bytes) {
        Ok(records) => d.records = Some(records),
        Err(e) => {
            tracing::error!(partition, error = %e, "reading for a follower failed");
            return refused(partition, ResponseError::KafkaStorageError);
        }
    }
    d
}

/// The records from `offset` below `end`, as Kafka batches stamped with
/// their leader epochs (one encode per epoch run).
fn read_records(
    storage: &es_storage::Partition,
    offset: u64,
    end: u64,
    max_bytes: usize,
) -> Result<Bytes, String> {
    let snap = storage.replica_snapshot(offset);
    let mut window = ReadBuf::new();
    let first = snap
        .read_into(offset, max_bytes.max(1), &mut window)
        .map_err(|e| e.to_string())?;
    // A produced batch goes whole or not at all: the follower must note the
    // same batch the leader did.
    let size = super::produced_batch_window(&first);
    let mut wider = ReadBuf::new();
    let chunk = match size {
        Some(size) => snap
            .read_into(offset, size, &mut wider)
            .map_err(|e| e.to_string())?,
        None => first,
    };
    let epochs = snap.leader_epochs();
    let mut out = Vec::with_capacity(chunk.data.len() + 128);
    let mut encoder = BatchEncoder::new();
    let mut records = RecordIter::read_checked(chunk.data).peekable();
    let mut left = max_bytes;
    while let Some(Ok(first)) = records.peek() {
        if first.offset >= end {
            break;
        }
        let (epoch, until) = epoch_run(epochs, first.offset);
        let yielded = std::cell::Cell::new(0usize);
        let run = std::iter::from_fn(|| {
            let next = records.peek()?.as_ref().ok()?;
            if next.offset >= end.min(until) {
                return None;
            }
            let mut r: RecordView<'_> = records.next()?.ok()?;
            if r.batch.is_none() {
                r.batch = chunk.batch_at(r.offset);
            }
            yielded.set(yielded.get() + 1);
            Some(r)
        });
        let opts = EncodeOptions {
            compression: Compression::None,
            log_append_time: false,
            partition_leader_epoch: epoch,
            max_bytes: left.max(1),
        };
        let before = out.len();
        let summary = encoder
            .encode_with(
                run,
                &mut out,
                &opts,
                CodecRules {
                    as_produced: true,
                    zstd_allowed: true,
                },
            )
            .map_err(|e| e.to_string())?;
        left = left.saturating_sub(out.len() - before);
        // Records taken but not written (the budget ran out) end the
        // answer: the next fetch starts with them.
        if summary.records == 0 || summary.records != yielded.get() || left == 0 {
            break;
        }
    }
    Ok(Bytes::from(out))
}

/// The leader epoch of `offset` and the first offset of the next epoch
/// (u64::MAX for the latest): records of one run share a batch epoch.
fn epoch_run(epochs: &[EpochEntry], offset: u64) -> (i32, u64) {
    let i = epochs.partition_point(|e| e.start_offset <= offset);
    let epoch = i.checked_sub(1).map_or(0, |j| epochs[j].epoch);
    let until = epochs.get(i).map_or(u64::MAX, |e| e.start_offset);
    (epoch, until)
}
