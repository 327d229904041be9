//! Fetch (v4-18): read records from storage, re-encode them as Kafka
//! RecordBatch v2, and long-poll until `min_bytes` are there or `max_wait_ms`
//! has passed.
//!
//! Long poll: before every read pass the request registers one [`Notify`]
//! with each partition it reads; a partition's listener wakes it when the
//! high watermark advances (`notify_one` keeps a permit, so data that lands
//! between the read and the wait is not missed). No polling, no sleeps.
//!
//! Budget: `max_bytes` for the whole response and `partition_max_bytes` per
//! partition, with Kafka's exception (KIP-74) that the first batch of the
//! first non-empty partition is returned even when it is larger, so a consumer
//! always makes progress. The response is also capped at
//! [`FETCH_RESPONSE_BYTES_MAX`] whatever the client asks.
//!
//! Compression and batches: es stores records, not the producer's batches,
//! but notes every batch a producer compressed, its codec and extent, in a
//! `.batches` file beside the segment (docs/storage.md, "Produced batches").
//! Such a batch is served whole, as one batch with the producer's boundaries;
//! with the topic's `compression.type=producer` (the default) it is
//! compressed with the producer's codec, as Kafka serves it, and other
//! records go uncompressed; any other `compression.type` compresses every
//! batch with that codec. When a fetch's first record starts a produced batch
//! larger than the partition's budget, the read window grows to hold the
//! whole batch (KIP-74: the first batch is returned even when it is larger),
//! up to [`PRODUCED_BATCH_READ_BYTES_MAX`].
//!
//! Copies: a partition's records are read into a window the blocking thread
//! keeps between fetches (`ReadState`: no allocation, no zero-filling),
//! encoded once into the Bytes of that partition's batches, and the response
//! is written around those Bytes by [`crate::codec::fetch_response`], which
//! the connection sends with vectored writes: the records are copied once in
//! user space (disk format to Kafka batches), not three times.
//!
//! Read-ahead: a fetch that filled at least half its partition's budget and
//! left more to read has the partition's next fetch prepared on a blocking
//! thread after it is answered ([`read_ahead`]); the fetch
//! that asks for exactly that takes it instead of reading, so a consumer
//! catching up does not wait for the re-encoding of each fetch.
//!
//! Fetch sessions (KIP-227): kept as Kafka keeps them ([`session`]); a
//! full fetch with epoch 0 opens one, an incremental fetch reads the
//! session's partitions and answers only those that changed.
//!
//! Order: the answer lists the partitions it read in the request's (or the
//! session's) order, each once, then those of unknown topics or partitions,
//! as Kafka's KafkaApis does; consecutive partitions of one topic share its
//! entry.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use es_auth::acl::{AclOperation, ResourceType};
use indexmap::IndexMap;
use kafka_protocol::messages::{ApiKey, FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::Notify;

mod quota;
pub mod read_ahead;
pub mod replica;
pub mod session;
#[cfg(test)]
mod session_tests;

use super::route::{route, LeaderEndpoints, Misrouted, RECORD_LEADER_EPOCH};
use super::{blocking, Ctx, RequestError};
use crate::codec::compression::Compression;
use crate::codec::encode::{BatchEncoder, CodecRules, EncodeOptions};
use crate::codec::fetch_response::{Aborted, Endpoint, FetchReply, FetchedPartition, FetchedTopic};
use crate::codec::frame::ResponseFrame;
use crate::config::{TimestampType, TopicRules};
use crate::errors::{code, storage_error_code, ResponseError, NONE};
use crate::topics::PartitionSlot;
use es_storage::record::RecordIter;
use es_storage::{Isolation, LogSnapshot, ReadBuf, ReadView};
use read_ahead::{Preparation, Prepared, ReadAhead, ReadAheadCache};
use session::{Context, FetchSessions, PartKey, ReqData, TopicKey};

/// The largest response we build, whatever `max_bytes` says (64 MiB).
pub const FETCH_RESPONSE_BYTES_MAX: usize = 64 * 1024 * 1024;
/// The longest a fetch may park (Kafka clients use 500 ms by default).
pub const FETCH_WAIT_MS_MAX: u64 = 60_000;
/// The largest read window a produced batch may grow a partition's read to
/// (its records as stored, which exceed their Kafka encoding by about 20
/// bytes each). A larger batch is served in parts.
pub const PRODUCED_BATCH_READ_BYTES_MAX: usize = 64 * 1024 * 1024;
/// The read window and encoder buffers a blocking thread keeps between
/// fetches (`ReadState`); larger ones are freed after the fetch.
pub const READ_STATE_KEEP_BYTES_MAX: usize = 4 * 1024 * 1024;

/// What a blocking thread reuses from one fetch to the next: the read window
/// (so a read neither allocates nor zero-fills it) and the encoder's
/// compression buffer and codec contexts.
#[derive(Default)]
struct ReadState {
    window: ReadBuf,
    encoder: BatchEncoder,
}

thread_local! {
    static READ_STATE: RefCell<ReadState> = RefCell::new(ReadState::default());
}

/// One partition the request asks for.
#[derive(Clone)]
struct Want {
    partition: i32,
    slot: Option<Arc<PartitionSlot>>,
    /// The partition's read-ahead.
    read_ahead: Option<ReadAhead>,
    offset: i64,
    max_bytes: usize,
    /// partition_max_bytes as asked (Kafka fails a read whose budget is
    /// negative).
    raw_max_bytes: i32,
    error: i16,
    compression: Compression,
    codec_rules: CodecRules,
    log_append_time: bool,
    /// isolation_level 1: serve only records below the last stable offset.
    read_committed: bool,
}

/// What one read pass found for a partition.
#[derive(Default)]
struct Got {
    error: i16,
    high_watermark: i64,
    log_start_offset: i64,
    records: Bytes,
    last_stable_offset: i64,
    /// Aborted transactions overlapping the records returned (read_committed).
    aborted: Vec<Aborted>,
    /// Offsets the returned batches span (docs/metrics.md, records out).
    offsets: u64,
}

impl Got {
    /// A partition whose read failed: watermarks and log start unknown (-1).
    fn unknown() -> Got {
        Got {
            error: NONE,
            high_watermark: -1,
            log_start_offset: -1,
            records: Bytes::new(),
            last_stable_offset: -1,
            aborted: Vec::new(),
            offsets: 0,
        }
    }
}

/// One partition's read: its records and where they leave the consumer.
/// The aborted transactions a read_committed consumer must skip are looked
/// up from `start` and `next` when the read is answered, whether it was
/// read now or ahead.
struct PartRead {
    records: Bytes,
    high_watermark: i64,
    log_start_offset: i64,
    last_stable_offset: i64,
    /// Where the read began: the offset asked for, or the first record of
    /// the produced batch it lies in.
    start: u64,
    /// The offset after the last record returned (None: nothing returned).
    next: Option<u64>,
    /// Where reading stopped: the high watermark, or for read_committed the
    /// last stable offset.
    limit: u64,
}

/// A read to do ahead, after this fetch is answered.
struct Ahead {
    slot: Arc<PartitionSlot>,
    key: read_ahead::Key,
    want: Want,
}

/// The codecs fetched batches are encoded with, from the topic's
/// `compression.type`: that codec for every batch, or for "producer" (Kafka's
/// default) each produced batch's own codec and none for other records.
pub(super) fn compression_for(rules: Option<&TopicRules>) -> (Compression, CodecRules) {
    let codec_rules = CodecRules {
        as_produced: rules.is_some_and(|r| r.compression_as_produced),
        // Kafka 4 serves a zstd batch to every Fetch version (it no longer
        // converts batches down for old clients).
        zstd_allowed: true,
    };
    (
        rules.map_or(Compression::None, |r| r.compression),
        codec_rules,
    )
}

pub async fn handle(ctx: &Ctx, req: FetchRequest) -> Result<Option<ResponseFrame>, RequestError> {
    let v = ctx.version;
    let b = &ctx.broker;
    let follower = if v >= 15 {
        req.replica_state.replica_id.0
    } else {
        req.replica_id.0
    };
    if follower >= 0 {
        // Only brokers (CLUSTER_ACTION) fetch as replicas.
        if !ctx.allowed_on_cluster(AclOperation::ClusterAction) {
            return respond(
                ctx,
                &error_reply(&req, v, ResponseError::TopicAuthorizationFailed),
            );
        }
        return replica::serve(ctx, req, follower).await;
    }
    let by_id = v >= 13;
    let topic_key = |name: &TopicName, id: uuid::Uuid| {
        if by_id {
            TopicKey::Id(id)
        } else {
            TopicKey::Name(name.0.to_string())
        }
    };
    // The request's partitions in order, each once: Kafka's fetchData map
    // (a repeated partition keeps its first place and its last values).
    let mut fetch: IndexMap<PartKey, ReqData> = IndexMap::new();
    for ft in &req.topics {
        for fp in &ft.partitions {
            fetch.insert(
                PartKey {
                    topic: topic_key(&ft.topic, ft.topic_id),
                    partition: fp.partition,
                },
                ReqData {
                    fetch_offset: fp.fetch_offset,
                    max_bytes: fp.partition_max_bytes,
                    current_leader_epoch: fp.current_leader_epoch,
                    last_fetched_epoch: fp.last_fetched_epoch,
                },
            );
        }
    }
    let forget: Vec<PartKey> = req
        .forgotten_topics_data
        .iter()
        .flat_map(|t| {
            let topic = topic_key(&t.topic, t.topic_id);
            t.partitions.iter().map(move |&partition| PartKey {
                topic: topic.clone(),
                partition,
            })
        })
        .collect();
    let sessions = FetchSessions::of(b);
    let requested: HashMap<PartKey, ReqData> = if v >= 7 && req.session_epoch == 0 {
        fetch.iter().map(|(k, r)| (k.clone(), *r)).collect()
    } else {
        HashMap::new()
    };
    let (context, parts) = sessions.new_context(
        v,
        req.session_id,
        req.session_epoch,
        fetch.into_iter().collect(),
        &forget,
    );
    match context {
        Context::Error(e) => {
            tracing::debug!(
                session_id = req.session_id,
                epoch = req.session_epoch,
                error = e,
                "fetch session error"
            );
            let r = FetchReply {
                error_code: e,
                ..FetchReply::default()
            };
            return respond(ctx, &r);
        }
        Context::ShardLookupFailed => {
            return respond(
                ctx,
                &error_reply(&req, v, ResponseError::UnknownServerError),
            );
        }
        _ => {}
    }
    let read_committed = req.isolation_level == 1;
    let replica_id = if v >= 15 {
        req.replica_state.replica_id.0
    } else {
        req.replica_id.0
    };
    let cache = ReadAheadCache::of(b);
    // Partitions of topics or partitions that do not exist: answered after
    // the others, as Kafka does.
    let mut erroneous: Vec<(PartKey, FetchedPartition)> = Vec::new();
    let image = b.image();
    let mut leaders = LeaderEndpoints::default();
    let mut keys: Vec<PartKey> = Vec::new();
    let mut wants: Vec<Want> = Vec::new();
    for (key, rd) in parts {
        let topic = match &key.topic {
            TopicKey::Id(id) => b.topic_by_id(*id),
            TopicKey::Name(name) => b.topic(name),
        };
        let unknown_id = topic.is_none() && matches!(key.topic, TopicKey::Id(_));
        // A consumer needs READ on the topic; refused before its existence
        // is looked at (a topic named by an unknown id stays UNKNOWN_TOPIC_ID).
        let name = match (&key.topic, &topic) {
            (TopicKey::Name(n), _) => Some(n.as_str()),
            (TopicKey::Id(_), Some(t)) => Some(t.name.as_str()),
            (TopicKey::Id(_), None) => None,
        };
        if name.is_some_and(|n| !ctx.allowed(AclOperation::Read, ResourceType::Topic, n)) {
            let p = FetchedPartition::refused(
                key.partition,
                code(ResponseError::TopicAuthorizationFailed),
            );
            erroneous.push((key, p));
            continue;
        }
        let routed = route(
            b,
            image.as_deref(),
            topic.as_ref(),
            key.partition,
            rd.current_leader_epoch,
        );
        let (topic, slot, error) = match (topic, routed) {
            (Some(topic), Ok(r)) => (topic, r.slot, NONE),
            // A stale or future leader epoch is answered like a readable
            // partition (with its offsets).
            (
                Some(topic),
                Err(Misrouted {
                    error,
                    hosted: Some(slot),
                    ..
                }),
            ) => (topic, slot, code(error)),
            (_, routed) => {
                let m = routed.err().unwrap_or_else(Misrouted::unknown);
                let error = if unknown_id {
                    ResponseError::UnknownTopicId
                } else {
                    m.error
                };
                leaders.note(&m);
                let p = FetchedPartition {
                    partition_index: key.partition,
                    error_code: code(error),
                    high_watermark: -1,
                    last_stable_offset: -1,
                    log_start_offset: -1,
                    aborted_transactions: Some(Vec::new()),
                    records: Bytes::new(),
                    current_leader: m.leader.as_deref().map(|(l, _)| (l.leader, l.leader_epoch)),
                };
                erroneous.push((key, p));
                continue;
            }
        };
        let rules = topic.rules();
        let log_append_time = rules.timestamp_type == TimestampType::LogAppendTime;
        let error = if error != NONE {
            error
        } else if replica_id >= 0 {
            // A replica's fetch: this broker is the partition's only replica,
            // so the fetcher is no follower of it.
            code(ResponseError::NotLeaderOrFollower)
        } else if rd.fetch_offset < 0
            || rd.last_fetched_epoch
                > slot
                    .log
                    .storage()
                    .latest_leader_epoch()
                    .unwrap_or(RECORD_LEADER_EPOCH)
        {
            // Kafka cannot find the end of a leader epoch newer than its own.
            code(ResponseError::OffsetOutOfRange)
        } else {
            NONE
        };
        let (compression, codec_rules) = compression_for(Some(&rules));
        let partition = key.partition;
        keys.push(key);
        wants.push(Want {
            partition,
            read_ahead: Some(cache.partition(&slot)),
            slot: Some(slot),
            offset: rd.fetch_offset,
            max_bytes: usize::try_from(rd.max_bytes).unwrap_or(0),
            raw_max_bytes: rd.max_bytes,
            error,
            compression,
            codec_rules,
            log_append_time,
            read_committed,
        });
    }
    if !wants.is_empty() && !matches!(req.isolation_level, 0 | 1) {
        // Kafka reads the isolation level only to read partitions, and
        // fails the request on one it does not know.
        return respond(
            ctx,
            &error_reply(&req, v, ResponseError::UnknownServerError),
        );
    }
    // Kafka caps a consumer's fetch to what its quota allows in a window.
    let quota_bytes = ctx.fetch_quota_window_bytes();
    let max_bytes = usize::try_from(req.max_bytes)
        .unwrap_or(0)
        .min(FETCH_RESPONSE_BYTES_MAX)
        .min(quota_bytes);
    let limit = Limits {
        max_bytes,
        raw_max_bytes: req
            .max_bytes
            .min(i32::try_from(quota_bytes).unwrap_or(i32::MAX)),
    };
    let min_bytes = usize::try_from(req.min_bytes).unwrap_or(0).min(max_bytes);
    let wait = Duration::from_millis(
        u64::try_from(req.max_wait_ms)
            .unwrap_or(0)
            .min(FETCH_WAIT_MS_MAX),
    );
    let deadline = Instant::now() + wait;
    let notify = Arc::new(Notify::new());
    let wants = Arc::new(wants);
    let mut parked = false;
    let gots = loop {
        // Register before reading, so a write between the read and the wait still wakes us.
        let may_wait = Instant::now() < deadline && min_bytes > 0;
        if may_wait {
            for w in wants.iter() {
                if let Some(s) = &w.slot {
                    s.waiters.register(&notify);
                }
            }
        }
        let ws = wants.clone();
        let (gots, total, any_error, ahead) = blocking(move || read_pass(&ws, limit)).await?;
        let now = Instant::now();
        if !may_wait || total >= min_bytes || any_error || now >= deadline {
            break (gots, ahead);
        }
        if !parked {
            parked = true;
            tracing::debug!(
                partitions = wants.len(),
                min_bytes,
                wait_ms = (deadline - now).as_millis() as u64,
                "fetch parked waiting for data"
            );
        }
        let woken = tokio::select! {
            r = tokio::time::timeout(deadline - now, notify.notified()) => r.is_ok(),
            _ = b.stopping() => false,
        };
        if !woken {
            // Timed out (or shutting down): one last pass picks up anything
            // that raced the deadline.
            let ws = wants.clone();
            let (gots, _, _, ahead) = blocking(move || read_pass(&ws, limit)).await?;
            break (gots, ahead);
        }
    };
    let (gots, ahead) = gots;
    // The next fetches of consumers catching up, prepared while they handle
    // this one.
    let cap = b.config().fetch_read_ahead_bytes;
    for a in ahead {
        if let Some(prep) = a.want.read_ahead.as_ref().and_then(|r| r.begin(a.key, cap)) {
            tokio::task::spawn_blocking(move || prepare(a, prep));
        }
    }
    for w in wants.iter() {
        if let Some(s) = &w.slot {
            s.waiters.deregister(&notify);
        }
    }

    let mut answer: Vec<(PartKey, FetchedPartition)> = Vec::with_capacity(keys.len());
    for ((key, w), g) in keys.into_iter().zip(wants.iter()).zip(gots) {
        if let Some(s) = &w.slot {
            s.traffic.fetched(g.records.len() as u64, g.offsets);
        }
        let p = FetchedPartition {
            partition_index: w.partition,
            error_code: g.error,
            high_watermark: g.high_watermark,
            last_stable_offset: g.last_stable_offset,
            log_start_offset: g.log_start_offset,
            aborted_transactions: (read_committed && g.error == NONE).then_some(g.aborted),
            records: g.records,
            current_leader: None,
        };
        answer.push((key, p));
    }
    answer.extend(erroneous);
    let r = FetchReply {
        node_endpoints: leaders
            .into_endpoints()
            .map(|e| Endpoint {
                node_id: e.id,
                host: e.host,
                port: e.port,
                rack: e.rack,
            })
            .collect(),
        ..FetchReply::default()
    };
    quota::answer(ctx, &sessions, context, by_id, &requested, answer, r)
}

/// The answer's partitions as topics: consecutive partitions of one topic
/// share its entry (Kafka's `FetchResponse.toMessage`).
fn group_by_topic(answer: Vec<(PartKey, FetchedPartition)>) -> Vec<FetchedTopic> {
    let mut topics: Vec<(TopicKey, FetchedTopic)> = Vec::new();
    for (key, p) in answer {
        match topics.last_mut() {
            Some((k, t)) if *k == key.topic => t.partitions.push(p),
            _ => {
                let t = match &key.topic {
                    TopicKey::Id(id) => FetchedTopic {
                        name: TopicName::default(),
                        id: *id,
                        partitions: vec![p],
                    },
                    TopicKey::Name(name) => FetchedTopic {
                        name: TopicName(StrBytes::from_string(name.clone())),
                        id: uuid::Uuid::nil(),
                        partitions: vec![p],
                    },
                };
                topics.push((key.topic, t));
            }
        }
    }
    topics.into_iter().map(|(_, t)| t).collect()
}

/// Kafka's `FetchRequest.getErrorResponse`: the error at the top, and
/// before v13 on every partition the request names too (as it names them,
/// repeats included); the request's session id.
fn error_reply(req: &FetchRequest, version: i16, e: ResponseError) -> FetchReply {
    let mut r = FetchReply {
        error_code: code(e),
        session_id: req.session_id,
        ..FetchReply::default()
    };
    if version < 13 {
        r.topics = req
            .topics
            .iter()
            .map(|t| FetchedTopic {
                name: t.topic.clone(),
                id: t.topic_id,
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| FetchedPartition::refused(p.partition, code(e)))
                    .collect(),
            })
            .collect();
    }
    r
}

/// Encodes `r` as this request's response frame (by hand: the record
/// batches are not copied again; see [`crate::codec::fetch_response`]).
fn respond(ctx: &Ctx, r: &FetchReply) -> Result<Option<ResponseFrame>, RequestError> {
    r.encode(ctx.version, ctx.header.correlation_id)
        .map(Some)
        .map_err(|e| {
            tracing::error!(version = ctx.version, error = %e, "cannot encode Fetch response");
            RequestError::EncodeFailed {
                key: ApiKey::Fetch,
                version: ctx.version,
                detail: e.to_string(),
            }
        })
}

/// Reads every wanted partition once, within the budgets. Returns the
/// per-partition results, the record bytes gathered, and whether any
/// partition has an error (Kafka answers at once then).
fn read_pass(wants: &[Want], limit: Limits) -> (Vec<Got>, usize, bool, Vec<Ahead>) {
    with_read_state(|st| read_pass_with(st, wants, limit))
}

/// A fetch's response budget.
#[derive(Clone, Copy)]
struct Limits {
    /// max_bytes, capped at [`FETCH_RESPONSE_BYTES_MAX`].
    max_bytes: usize,
    /// max_bytes as asked: Kafka gives each partition in turn the least of
    /// its partition_max_bytes and what is left of this (never below 0
    /// after the first partition), and fails the read of a partition whose
    /// budget is negative with UNKNOWN_SERVER_ERROR.
    raw_max_bytes: i32,
}

/// Runs `f` with this thread's reused read buffers (fresh ones if they are
/// in use further up this thread, or the thread is exiting, which a pool
/// thread running a task never is).
fn with_read_state<T>(f: impl Fn(&mut ReadState) -> T) -> T {
    READ_STATE
        .try_with(|st| match st.try_borrow_mut() {
            Ok(mut st) => {
                let r = f(&mut st);
                st.window.shrink_to(READ_STATE_KEEP_BYTES_MAX);
                st.encoder.shrink_to(READ_STATE_KEEP_BYTES_MAX);
                r
            }
            Err(_) => f(&mut ReadState::default()),
        })
        .unwrap_or_else(|_| f(&mut ReadState::default()))
}

/// Prepares a read ahead ([`read_ahead`]) on a blocking
/// thread: the fetch `a.key` describes, read as the first partition of a
/// response. Whatever does not finish `prep` (nothing to read, an error, a
/// panic) gives it up when `prep` drops.
fn prepare(a: Ahead, prep: Preparation) {
    let Ahead { slot, key, want } = a;
    let Ok(offset) = i64::try_from(key.offset) else {
        return;
    };
    let w = Want { offset, ..want };
    let snap = slot.log.snapshot(key.offset, isolation(&w));
    if let Ok(r) = with_read_state(|st| read_fresh(st, &snap, &w, key.offset, key.budget, true)) {
        if !r.records.is_empty() {
            prep.finish(Prepared::new(r.start, r.records, r.next));
        }
    }
}

/// [`read_pass`] with the thread's reused buffers.
fn read_pass_with(
    st: &mut ReadState,
    wants: &[Want],
    limit: Limits,
) -> (Vec<Got>, usize, bool, Vec<Ahead>) {
    let max_bytes = limit.max_bytes;
    let mut out = Vec::with_capacity(wants.len());
    let mut ahead = Vec::new();
    let mut total = 0usize;
    let mut any_error = false;
    // Kafka's limitBytes: what is left of the request's max_bytes.
    let mut kafka_left = i64::from(limit.raw_max_bytes);
    let mut seen = 0usize;
    for (i, w) in wants.iter().enumerate() {
        if i > 0 {
            let read = i64::try_from(total - seen).unwrap_or(i64::MAX);
            kafka_left = kafka_left.saturating_sub(read).max(0);
        }
        seen = total;
        let kafka_budget = i64::from(w.raw_max_bytes).min(kafka_left);

        let mut g = Got {
            error: w.error,
            ..Got::unknown()
        };
        let Some(slot) = w.slot.as_ref().filter(|_| w.error == NONE) else {
            any_error = true;
            out.push(g);
            continue;
        };
        // One snapshot per partition: watermarks, records and aborted
        // transactions of the same moment.
        let snap = slot
            .log
            .snapshot(u64::try_from(w.offset).unwrap_or(u64::MAX), isolation(w));
        g.high_watermark = snap.high_watermark() as i64;
        g.log_start_offset = snap.log_start_offset() as i64;
        g.last_stable_offset = snap.last_stable_offset() as i64;
        let readable = if w.read_committed {
            g.last_stable_offset
        } else {
            g.high_watermark
        };
        if kafka_budget < 0 && (g.log_start_offset..readable).contains(&w.offset) {
            // Kafka's segment read refuses a negative size.
            out.push(Got {
                error: code(ResponseError::UnknownServerError),
                ..Got::unknown()
            });
            any_error = true;
            continue;
        }
        let remaining = max_bytes.saturating_sub(total);
        let first = total == 0;
        // The first non-empty partition may exceed the budgets by its first batch.
        let budget = w.max_bytes.min(remaining);
        if budget == 0 && !first {
            out.push(g);
            continue;
        }
        match read_one(st, &snap, w, budget, first) {
            Ok(r) => {
                // A consumer catching up (this read filled at least half
                // its budget, and there is more) gets its next fetch
                // prepared, if it will ask with the same budget: the whole
                // of its partition's, not what another partition left.
                let unconstrained = budget == w.max_bytes.min(max_bytes);
                if let Some(next) = r
                    .next
                    .filter(|&n| unconstrained && n < r.limit && r.records.len() >= budget / 2)
                {
                    ahead.push(Ahead {
                        slot: slot.clone(),
                        key: ahead_key(w, next, budget),
                        want: w.clone(),
                    });
                }
                total += r.records.len();
                g.offsets = r.next.map_or(0, |n| n.saturating_sub(r.start));
                g.records = r.records;
                g.high_watermark = r.high_watermark;
                g.log_start_offset = r.log_start_offset;
                g.last_stable_offset = r.last_stable_offset;
                g.aborted = match r.next {
                    Some(next) if w.read_committed => aborted_between(&snap, r.start, next),
                    _ => Vec::new(),
                };
            }
            Err(e) => {
                // As Kafka answers a read that failed: nothing known.
                g = Got {
                    error: e,
                    ..Got::unknown()
                };
                any_error = true;
            }
        }
        out.push(g);
    }
    (out, total, any_error, ahead)
}

/// What a read of `w` from `offset` within `budget` depends on.
fn ahead_key(w: &Want, offset: u64, budget: usize) -> read_ahead::Key {
    read_ahead::Key {
        offset,
        budget,
        compression: w.compression,
        codec_rules: w.codec_rules,
        log_append_time: w.log_append_time,
        read_committed: w.read_committed,
    }
}

/// Reads and encodes one partition, or takes what was prepared for exactly
/// this read.
fn read_one(
    st: &mut ReadState,
    snap: &LogSnapshot,
    w: &Want,
    budget: usize,
    first: bool,
) -> Result<PartRead, i16> {
    let offset = u64::try_from(w.offset).map_err(|_| code(ResponseError::OffsetOutOfRange))?;
    let key = ahead_key(w, offset, budget);
    if let Some(p) = w.read_ahead.as_ref().and_then(|r| r.claim(&key)) {
        if let Some(r) = serve_prepared(snap, w, p, budget, first) {
            return Ok(r);
        }
    }
    read_fresh(st, snap, w, offset, budget, first)
}

/// The isolation level a fetch reads at.
fn isolation(w: &Want) -> Isolation {
    if w.read_committed {
        Isolation::ReadCommitted
    } else {
        Isolation::ReadUncommitted
    }
}

/// A prepared read as this fetch's answer, with the watermarks and the log
/// start of `snap` (as they are now); None if it no longer fits (the log
/// start moved past it, it no longer starts where a read would, or it
/// exceeds the budget of a partition that is not the response's first).
fn serve_prepared(
    snap: &LogSnapshot,
    w: &Want,
    p: Prepared,
    budget: usize,
    first: bool,
) -> Option<PartRead> {
    let log_start = snap.log_start_offset();
    if p.start < log_start || p.start != snap.start() || (!first && p.records.len() > budget) {
        return None;
    }
    let hw = snap.high_watermark();
    let lso = snap.last_stable_offset();
    Some(PartRead {
        records: p.records.clone(),
        high_watermark: hw as i64,
        log_start_offset: log_start as i64,
        last_stable_offset: lso as i64,
        start: p.start,
        next: p.next,
        limit: if w.read_committed { lso } else { hw },
    })
}

/// Aborted transactions overlapping `from..to`, as a Fetch response lists them.
fn aborted_between(snap: &LogSnapshot, from: u64, to: u64) -> Vec<Aborted> {
    snap.aborted_between(from, to)
        .into_iter()
        .map(|a| Aborted {
            producer_id: a.producer_id,
            first_offset: a.first_offset as i64,
        })
        .collect()
}

/// Reads and encodes one partition from storage.
fn read_fresh(
    st: &mut ReadState,
    snap: &LogSnapshot,
    w: &Want,
    offset: u64,
    budget: usize,
    first: bool,
) -> Result<PartRead, i16> {
    let read_error = |e: es_storage::StorageError| {
        if !matches!(e, es_storage::StorageError::OffsetOutOfRange { .. }) {
            tracing::error!(partition = w.partition, offset, error = %e, "read failed");
        }
        storage_error_code(&e)
    };
    let ReadState { window, encoder } = st;
    // An offset inside a batch a producer compressed gets that batch whole,
    // from its first record, as from Kafka (the client skips the records
    // before its offset).
    let start = snap.start();
    let first_read = snap
        .read_into(start, budget.max(1), window)
        .map_err(read_error)?;
    let chunk = match produced_batch_window(&first_read) {
        // The first record starts a produced batch the window cut short:
        // read it whole (the encoder serves the first batch whatever its
        // size; a later partition's is dropped below if it does not fit).
        Some(size) => snap.read_into(start, size, window).map_err(read_error)?,
        None => first_read,
    };
    let hw = chunk.high_watermark;
    // Open transactions hold the last stable offset back; read_committed
    // consumers see only what is below it.
    let lso = snap.last_stable_offset();
    let limit = if w.read_committed { lso } else { hw };
    // Batches carry the leader epoch their records were written in; a read
    // stops where the next epoch starts (the next fetch goes on from there).
    let epoch = snap.epoch_at(start).unwrap_or(RECORD_LEADER_EPOCH);
    let epoch_end = snap.next_epoch_start(start).unwrap_or(u64::MAX);
    let corrupt = Cell::new(false);
    let records = Servable {
        records: RecordIter::read_checked(chunk.data),
        limit: limit.min(epoch_end),
        chunk: &chunk,
        corrupt: &corrupt,
        partition: w.partition,
        from: offset,
    };
    let opts = EncodeOptions {
        compression: w.compression,
        log_append_time: w.log_append_time,
        partition_leader_epoch: epoch,
        max_bytes: budget,
    };
    let mut buf = Vec::with_capacity(chunk.data.len().min(budget.max(1)) + 128);
    let summary = encoder
        .encode_with(records, &mut buf, &opts, w.codec_rules)
        .map_err(|e| {
            tracing::error!(partition = w.partition, error = %e, "encoding fetched records failed");
            code(ResponseError::KafkaStorageError)
        })?;
    if corrupt.get() && summary.records == 0 {
        return Err(code(ResponseError::CorruptMessage));
    }
    if !first && buf.len() > budget {
        // Only the first non-empty partition may overshoot (KIP-74).
        buf.clear();
    }
    let next = summary
        .last_offset
        .filter(|_| !buf.is_empty())
        .map(|l| l + 1);
    Ok(PartRead {
        records: Bytes::from(buf),
        high_watermark: hw as i64,
        log_start_offset: chunk.log_start_offset as i64,
        last_stable_offset: lso as i64,
        start,
        next,
        limit,
    })
}

/// The records of a read that a fetch serves: those below `limit` (the high
/// watermark or the last stable offset), each with the produced batch noted
/// beside the segment if it starts one (data written by older es notes it on
/// the record itself), up to the first that does not decode (`corrupt` is
/// then set). One iterator rather than a chain of adapters, so that the
/// encoder's loop gets each record without copying it from one adapter to
/// the next.
struct Servable<'a> {
    records: RecordIter<'a>,
    limit: u64,
    chunk: &'a ReadView<'a>,
    corrupt: &'a Cell<bool>,
    /// For the log line of an undecodable record: the partition, and the
    /// offset the fetch asked for.
    partition: i32,
    from: u64,
}

impl<'a> Iterator for Servable<'a> {
    type Item = es_storage::RecordView<'a>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        match self.records.next()? {
            Ok(mut r) if r.offset < self.limit => {
                if r.batch.is_none() {
                    r.batch = self.chunk.batch_at(r.offset);
                }
                Some(r)
            }
            Ok(_) => {
                self.records = RecordIter::read_checked(&[]);
                None
            }
            Err(e) => {
                tracing::error!(partition = self.partition, offset = self.from, error = %e, "undecodable record in storage");
                self.corrupt.set(true);
                None
            }
        }
    }
}

/// The read window that holds all of the produced batch the first record of
/// `chunk` starts, when `chunk` does not: its stored size, bounded by
/// [`PRODUCED_BATCH_READ_BYTES_MAX`]. The size is a hint from storage
/// (compaction can only shrink the batch); reads never trust it for bounds.
pub(super) fn produced_batch_window(chunk: &ReadView<'_>) -> Option<usize> {
    let data = chunk.data;
    let first = RecordIter::read_checked(data).next()?.ok()?;
    let batch = first.batch.or_else(|| chunk.batch_at(first.offset))?;
    let window = usize::try_from(batch.stored_bytes)
        .unwrap_or(usize::MAX)
        .min(PRODUCED_BATCH_READ_BYTES_MAX);
    (window > data.len()).then_some(window)
}

#[cfg(test)]
#[path = "fetch_tests.rs"]
mod tests;
