//! Produce (v3-13): decode each partition's RecordBatch into one storage
//! buffer, append it with one write, wait for durability, answer.
//!
//! Phases, per request:
//! 1. resolve topics (never creating one, as Kafka) and partitions;
//! 2. decode and validate every partition's batch (CRC, size against
//!    `max.message.bytes`, Kafka's producer rules, timestamps, keys on a
//!    compacted topic, schema ids where the topic asks:
//!    [`crate::schema_validation`]) into a
//!    [`RecordBatchBuf`] — concurrently with other requests, on a blocking
//!    thread only when the request is large;
//! 3. wait for this connection's [`Turn`], append every partition (one
//!    `write` each, a copy into the page cache; a segment roll is a pointer
//!    swap, its fsyncs run with the next group commit) right here, or on a
//!    blocking thread when an append would do more disk work than that
//!    (`Partition::try_append_producer`), release the turn so the next
//!    request may append, and await the group-commit fsync of each partition
//!    (`when_durable`: the sync pool runs the fsync and wakes this task; no
//!    thread blocks) — so appends keep the client's order while fsyncs overlap;
//! 4. respond (nothing at all for acks=0).
//!
//! Each partition's records go through typed phases, `Resolved` ->
//! `Decoded` -> `Appended`, each phase taking the previous one by value,
//! or stop at a `Refusal`: a per-partition error code; the request still
//! succeeds for the other partitions, as in Kafka.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use es_auth::acl::{AclOperation, ResourceType};
use es_storage::{AppendIntent, AppendOutcome, ProducerAppend, RecordBatchBuf};
use indexmap::IndexMap;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, NodeEndpoint, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{BrokerId, ProduceRequest, ProduceResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::durable::Durable;
use super::route::{route, LeaderEndpoints, Routed, NO_EPOCH};
use super::{blocking, txn, txn_verify, Ctx, RequestError};
use crate::broker::CoordinatorPlace;
use crate::codec::batch::{check_produce_compression, BatchDecoder, BatchSummary, DecodeLimits};
use crate::config::{TimestampType, TopicRules};
use crate::errors::{batch_error_code, code, storage_error_code, ResponseError, NONE};
use crate::limits::DecodeSlots;
use crate::quota::QuotaKind;
use crate::replica::WaitError;
use crate::schema_validation::{self, Invalid, SchemaIds};
use crate::topics::{is_internal, PartitionSlot, TRANSACTION_STATE_TOPIC};
use crate::turn::Turn;

/// Requests with at most this many record bytes are decoded on the runtime
/// thread; larger ones (decompression may take milliseconds) on a blocking one.
const INLINE_DECODE_BYTES_MAX: usize = 256 * 1024;

/// Which partition of the request an item is, whatever phase it is in.
struct Head {
    /// Index into the response's topic list.
    topic: usize,
    partition: i32,
    /// The topic's name (the transaction check names partitions by topic).
    topic_name: String,
}

/// Why a partition's records are not in the log: the response's error code
/// (mapped in [`crate::errors`]), its message, and what else Kafka answers
/// with it.
struct Refusal {
    error: i16,
    message: String,
    /// Per-record errors (batch index, message): Produce v8+ RecordErrors.
    record_errors: Vec<(i32, String)>,
    /// The partition's log start offset, where Kafka reports it with the error.
    log_start_offset: i64,
    /// The partition's leader (id, epoch) with NOT_LEADER_OR_FOLLOWER
    /// (KIP-951, v10+).
    leader: Option<(i32, i32)>,
}

impl Refusal {
    fn new(error: i16, message: impl Into<String>) -> Refusal {
        Refusal {
            error,
            message: message.into(),
            record_errors: Vec::new(),
            log_start_offset: -1,
            leader: None,
        }
    }
}

/// Phase 1 done: the partition exists and accepts appends.
struct Resolved {
    slot: Arc<PartitionSlot>,
    rules: TopicRules,
    records: Option<Bytes>,
    /// Tells the partition this append is coming, so that a group-commit
    /// fsync starting meanwhile waits for it; dropped once appended.
    intent: AppendIntent,
}

/// Phase 2 done: the records are decoded, checked and in the disk format.
struct Decoded {
    slot: Arc<PartitionSlot>,
    rules: TopicRules,
    buf: RecordBatchBuf,
    /// The batch's producer fields when it has a producer id (idempotent or
    /// transactional): checked and recorded atomically with the append.
    producer: Option<ProducerAppend>,
    intent: AppendIntent,
    /// The largest record timestamp of the batch as produced.
    max_timestamp: i64,
}

/// Phase 3 done: in the log (or already there: a retried batch), waiting
/// for durability when `end` is set.
struct Appended {
    slot: Arc<PartitionSlot>,
    /// The topic's `min.insync.replicas`, checked again when acks=all
    /// completes.
    min_insync_replicas: usize,
    base_offset: i64,
    log_append_time: i64,
    log_start_offset: i64,
    /// One past the last offset to wait for; None when nothing was appended.
    end: Option<u64>,
}

/// The outcome of one phase for one partition.
type Step<T> = Result<T, Refusal>;

/// An append attempt: done (appended or refused), or handed back because
/// it needs a blocking thread (see `append_one`).
enum Attempt {
    Done(Step<Appended>),
    Blocked(Decoded),
}

pub async fn handle(
    ctx: &Ctx,
    req: ProduceRequest,
    mut turn: Turn,
) -> Result<Option<Bytes>, RequestError> {
    let v = ctx.version;
    let acks = req.acks;
    let timeout_ms = req.timeout_ms;
    let transactional_id = req.transactional_id.as_ref().map(|t| t.0.to_string());
    let b = &ctx.broker;
    let topic_data = merge_repeats(v, req.topic_data);
    let mut topic_names: Vec<(TopicName, uuid::Uuid)> = Vec::with_capacity(topic_data.len());
    let mut items: Vec<(Head, Step<Resolved>)> = Vec::new();
    let acks_ok = matches!(acks, -1..=1);
    let image = b.image();
    let mut leaders = LeaderEndpoints::default();
    // Transactional records need WRITE on their transactional id, or the
    // whole request is refused (Kafka's KafkaApis.handleProduceRequest).
    let txn_denied = has_transactional_records(&topic_data)
        && !transactional_id
            .as_deref()
            .is_some_and(|id| ctx.allowed(AclOperation::Write, ResourceType::TransactionalId, id));
    // Phase 1: resolve topics and partitions.
    for (ti, td) in topic_data.into_iter().enumerate() {
        topic_names.push((td.name.clone(), td.topic_id));
        // v13 names topics by id; before that by name. A topic the client
        // may not write is refused before its existence is looked at.
        let denied = |name: &str| !ctx.allowed(AclOperation::Write, ResourceType::Topic, name);
        let resolved = if txn_denied {
            Err((
                code(ResponseError::TransactionalIdAuthorizationFailed),
                String::new(),
            ))
        } else if v >= 13 {
            match b.topic_by_id(td.topic_id) {
                Some(t) if denied(&t.name) => {
                    Err((code(ResponseError::TopicAuthorizationFailed), String::new()))
                }
                Some(t) => Ok(t),
                None => Err((
                    code(ResponseError::UnknownTopicId),
                    "unknown topic id".to_string(),
                )),
            }
        } else if denied(td.name.0.as_str()) {
            Err((code(ResponseError::TopicAuthorizationFailed), String::new()))
        } else {
            // Kafka's Produce creates no topic (clients ask Metadata to) and
            // answers one it does not have, whatever its name, with
            // UNKNOWN_TOPIC_OR_PARTITION.
            let name = td.name.0.as_str();
            b.topic(name).ok_or((
                code(ResponseError::UnknownTopicOrPartition),
                format!("unknown topic {name}"),
            ))
        };
        for pd in td.partition_data {
            let mut head = Head {
                topic: ti,
                partition: pd.index,
                topic_name: String::new(),
            };
            let step = if !acks_ok {
                Err(Refusal::new(
                    code(ResponseError::InvalidRequiredAcks),
                    format!("acks must be -1, 0 or 1, not {acks}"),
                ))
            } else {
                match &resolved {
                    Err((c, m)) => Err(Refusal::new(*c, m.clone())),
                    Ok(topic) => {
                        let mirror_refusal =
                            crate::mirror::produce_refusal(image.as_deref(), &topic.name);
                        match route(b, image.as_deref(), Some(topic), pd.index, NO_EPOCH) {
                            Err(m) => {
                                leaders.note(&m);
                                let message = if m.error == ResponseError::UnknownTopicOrPartition {
                                    format!("{} has no partition {}", topic.name, pd.index)
                                } else {
                                    format!("this broker does not lead {}-{}", topic.name, pd.index)
                                };
                                Err(Refusal {
                                    leader: m
                                        .leader
                                        .as_deref()
                                        .map(|(l, _)| (l.leader, l.leader_epoch)),
                                    ..Refusal::new(code(m.error), message)
                                })
                            }
                            // Kafka's ReplicaManager refuses clients' appends to
                            // an internal topic's partitions, however the topic
                            // was named (v13 by id too).
                            Ok(_) if is_internal(&topic.name) => Err(Refusal::new(
                                code(ResponseError::InvalidTopicException),
                                format!("Cannot append to internal topic {}", topic.name),
                            )),
                            // A mirror topic is written by its mirror only,
                            // until it is promoted.
                            Ok(_) if mirror_refusal.is_some() => Err(Refusal::new(
                                code(ResponseError::InvalidRequest),
                                mirror_refusal.clone().unwrap_or_default(),
                            )),
                            Ok(Routed { slot, .. })
                                if acks == -1
                                    && slot.log.isr_size() < topic.rules().min_insync_replicas =>
                            {
                                Err(Refusal::new(
                                    code(ResponseError::NotEnoughReplicas),
                                    format!(
                                        "The size of the current ISR {:?} is insufficient to satisfy the min.isr requirement of {} for partition {}-{}",
                                        slot.log.isr(),
                                        topic.rules().min_insync_replicas,
                                        topic.name,
                                        pd.index
                                    ),
                                ))
                            }
                            Ok(Routed { slot, .. }) => {
                                head.topic_name = topic.name.clone();
                                Ok(Resolved {
                                    intent: slot.log.announce_append(),
                                    slot,
                                    rules: topic.rules(),
                                    records: pd.records,
                                })
                            }
                        }
                    }
                }
            };
            items.push((head, step));
        }
    }

    // Phase 2: decode and validate before taking our turn. Small requests
    // (the common case: a few batches of 16 KiB) are decoded right here, big
    // ones (decompression can take milliseconds) on a blocking thread.
    let record_bytes: usize = items
        .iter()
        .filter_map(|(_, s)| s.as_ref().ok())
        .map(|r| r.records.as_ref().map_or(0, Bytes::len))
        .sum();
    let clock = ctx.broker.clock().clone();
    let broker = b.clone();
    let decode_all = move |items: Vec<(Head, Step<Resolved>)>| {
        let mut schema_ids = LazySchemaIds { broker, ids: None };
        let mut decoder = BatchDecoder::new();
        let mut summaries: Vec<BatchSummary> = Vec::with_capacity(1);
        let now = clock.now_ms();
        items
            .into_iter()
            .map(|(head, step)| {
                let step = step.and_then(|r| {
                    let ids = &mut schema_ids;
                    decode_one(&mut decoder, &mut summaries, &head, r, (v, now), ids)
                });
                (head, step)
            })
            .collect::<Vec<(Head, Step<Decoded>)>>()
    };
    let items = if record_bytes <= INLINE_DECODE_BYTES_MAX {
        decode_all(items)
    } else {
        // A bounded number at once: each may decompress to its bound.
        let slots = b.extension(DecodeSlots::for_this_machine);
        let _slot = slots.acquire().await;
        blocking(move || decode_all(items)).await?
    };

    // Phase 2b: transactional batches of a transaction another broker
    // coordinates are verified with it (handlers/txn_verify.rs).
    let mut items = items;
    let remote_coordinator = transactional_id.as_deref().and_then(|id| {
        match b.coordinator_place(TRANSACTION_STATE_TOPIC, id) {
            Some(CoordinatorPlace::Elsewhere(coord)) => Some((id, coord.id)),
            _ => None,
        }
    });
    let verified_elsewhere = remote_coordinator.is_some();
    if let Some((id, coord)) = remote_coordinator {
        let asked = items
            .iter()
            .map(|(h, s)| {
                let p = s.as_ref().ok().and_then(|d| d.producer);
                p.map(|p| (h.topic_name.clone(), h.partition, p))
            })
            .collect();
        let refused = txn_verify::verify_remote(b, v, id, coord, asked).await;
        for ((_, step), r) in items.iter_mut().zip(refused) {
            if let Some((c, m)) = r {
                *step = Err(Refusal::new(c, m));
            }
        }
    }

    // Phase 3: append in connection order: here, when an append is only
    // writes into the page cache (a roll onto the prepared segment
    // included); on a blocking thread, still in this turn, when it would do
    // more (seal a previous roll, create a file). Then release the turn and
    // wait for the group-commit fsyncs without holding any thread.
    turn.wait().await;
    let broker = ctx.broker.clone();
    let mut items: Vec<(Head, Attempt)> = items
        .into_iter()
        .map(|(head, step)| {
            let attempt = match step {
                Ok(d) => append_one(
                    &broker,
                    v,
                    (transactional_id.as_deref(), verified_elsewhere),
                    &head,
                    d,
                    true,
                ),
                Err(r) => Attempt::Done(Err(r)),
            };
            (head, attempt)
        })
        .collect();
    if items.iter().any(|(_, a)| matches!(a, Attempt::Blocked(_))) {
        items = blocking(move || {
            items
                .into_iter()
                .map(|(head, attempt)| {
                    let attempt = match attempt {
                        Attempt::Blocked(d) => append_one(
                            &broker,
                            v,
                            (transactional_id.as_deref(), verified_elsewhere),
                            &head,
                            d,
                            false,
                        ),
                        done => done,
                    };
                    (head, attempt)
                })
                .collect()
        })
        .await?;
    }
    let items: Vec<(Head, Step<Appended>)> = items
        .into_iter()
        .map(|(head, attempt)| {
            let step = match attempt {
                Attempt::Done(step) => step,
                // A blocking append never hands its records back.
                Attempt::Blocked(_) => Err(Refusal::new(
                    code(ResponseError::UnknownServerError),
                    "append not run",
                )),
            };
            (head, step)
        })
        .collect();
    turn.finish();
    // (wait, bounded by the request's timeout): only a wait for followers
    // is; the leader's own fsync, alone in its ISR as with acks=1, is not
    // (Kafka's leader alone completes at once).
    // Registered together: the sync pool is woken once all are queued, so
    // that one pass can cover every partition of the request.
    let waits: Vec<Option<(Durable, bool)>> = es_storage::syncer::together(|| {
        items
            .iter()
            .map(|(_, step)| {
                let a = step.as_ref().ok()?;
                let end = a.end?;
                let bounded = acks == -1 && a.slot.log.replica().replicated();
                let d = if acks == -1 {
                    Durable::replicated(&a.slot.log, end, a.min_insync_replicas)
                } else {
                    Durable::register(&a.slot.log, end)
                };
                Some((d, bounded))
            })
            .collect()
    });
    let mut items = items;
    // acks=all waits at most the request's timeout for the in-sync
    // replicas (Kafka's delayed produce), then answers REQUEST_TIMED_OUT.
    let deadline = tokio::time::Instant::now()
        + std::time::Duration::from_millis(u64::try_from(timeout_ms).unwrap_or(0));
    for ((head, step), wait) in items.iter_mut().zip(waits) {
        let Some((wait, bounded)) = wait else {
            continue;
        };
        let waited = if bounded {
            tokio::time::timeout_at(deadline, wait.wait()).await
        } else {
            Ok(wait.wait().await)
        };
        let refusal = match waited {
            Ok(Ok(())) => continue,
            Ok(Err(e)) => wait_refusal(head.partition, e),
            Err(_) => Refusal::new(
                code(ResponseError::RequestTimedOut),
                "the in-sync replicas did not have the records within the request's timeout",
            ),
        };
        let log_start_offset = step.as_ref().map_or(-1, |a| a.log_start_offset);
        *step = Err(Refusal {
            log_start_offset,
            ..refusal
        });
    }

    // Kafka records the request's bytes against the produce quota, and for
    // acks != 0 its handler time against the request quota, once the
    // records are in: a client over its quota still has them appended, and
    // is then throttled by the larger of the two.
    let throttle_ms = {
        let bandwidth = ctx.record_bytes(QuotaKind::Produce, ctx.request_bytes);
        let request = if acks == 0 {
            ctx.exempt_request_time();
            0
        } else {
            ctx.record_request_time()
        };
        let t = bandwidth.max(request);
        ctx.throttle_connection(t);
        t
    };
    if acks == 0 {
        // No response at all; but as in Kafka, a failed acks=0 produce closes
        // the connection, the only signal such a client gets to refresh its
        // metadata and notice the problem.
        if let Some((head, Err(bad))) = items.iter().find(|(_, s)| s.is_err()) {
            return Err(RequestError::AcksZeroFailed {
                partition: head.partition,
                error: bad.error,
                message: bad.message.clone(),
            });
        }
        return Ok(None);
    }
    let mut by_topic: HashMap<usize, Vec<PartitionProduceResponse>> = HashMap::new();
    for (head, step) in items {
        by_topic
            .entry(head.topic)
            .or_default()
            .push(partition_response(v, head.partition, step));
    }
    let mut r = ProduceResponse::default();
    r.throttle_time_ms = throttle_ms;
    for (ti, (name, id)) in topic_names.into_iter().enumerate() {
        let mut t = TopicProduceResponse::default();
        if v >= 13 {
            t.topic_id = id;
        } else {
            t.name = name;
        }
        t.partition_responses = by_topic.remove(&ti).unwrap_or_default();
        r.responses.push(t);
    }
    if v >= 10 {
        r.node_endpoints = leaders
            .into_endpoints()
            .map(|e| {
                let mut n = NodeEndpoint::default();
                n.node_id = BrokerId(e.id);
                n.host = StrBytes::from_string(e.host);
                n.port = e.port;
                n.rack = e.rack.map(StrBytes::from_string);
                n
            })
            .collect();
    }
    ctx.respond(&r)
}

/// A failed wait for durability or replication as a partition's refusal.
fn wait_refusal(partition: i32, e: WaitError) -> Refusal {
    match e {
        WaitError::Storage(e) => {
            tracing::error!(partition, error = %e, "waiting for durability failed");
            Refusal::new(storage_error_code(&e), e.to_string())
        }
        WaitError::NotLeader => Refusal::new(
            code(ResponseError::NotLeaderOrFollower),
            "leadership moved before the records were replicated",
        ),
        WaitError::NotEnoughReplicasAfterAppend => Refusal::new(
            code(ResponseError::NotEnoughReplicasAfterAppend),
            "the records were written, but the ISR shrank below min.insync.replicas",
        ),
    }
}

/// The request's partitions as Kafka's KafkaApis takes them: into a map
/// keyed by topic and partition, so a partition named twice is appended once,
/// with the records named last, a topic named twice is answered once, and a
/// topic naming no partition is not answered (v13 names topics by id).
fn merge_repeats(v: i16, topic_data: Vec<TopicProduceData>) -> Vec<TopicProduceData> {
    let mut topics: IndexMap<(TopicName, uuid::Uuid), IndexMap<i32, PartitionProduceData>> =
        IndexMap::new();
    for td in topic_data {
        let key = if v >= 13 {
            (TopicName::default(), td.topic_id)
        } else {
            (td.name, uuid::Uuid::nil())
        };
        let parts = topics.entry(key).or_default();
        for pd in td.partition_data {
            parts.insert(pd.index, pd);
        }
    }
    topics
        .into_iter()
        .filter(|(_, parts)| !parts.is_empty())
        .map(|((name, topic_id), parts)| {
            let mut td = TopicProduceData::default();
            td.name = name;
            td.topic_id = topic_id;
            td.partition_data = parts.into_values().collect();
            td
        })
        .collect()
}

/// One partition's part of the response, from the last phase it reached.
fn partition_response(v: i16, partition: i32, step: Step<Appended>) -> PartitionProduceResponse {
    let mut p = PartitionProduceResponse::default();
    p.index = partition;
    let (message, record_errors) = match step {
        Ok(a) => {
            p.error_code = NONE;
            p.base_offset = a.base_offset;
            p.log_append_time_ms = a.log_append_time;
            if v >= 5 {
                p.log_start_offset = a.log_start_offset;
            }
            (None, Vec::new())
        }
        Err(r) => {
            p.error_code = r.error;
            if let (true, Some((leader, epoch))) = (v >= 10, r.leader) {
                p.current_leader.leader_id = BrokerId(leader);
                p.current_leader.leader_epoch = epoch;
            }
            p.base_offset = -1;
            p.log_append_time_ms = -1;
            if v >= 5 {
                p.log_start_offset = r.log_start_offset;
            }
            // Kafka sends no message with an authorization failure.
            (
                (!r.message.is_empty()).then_some(r.message),
                r.record_errors,
            )
        }
    };
    if v >= 8 {
        p.error_message = message.map(StrBytes::from_string);
        p.record_errors = record_errors
            .into_iter()
            .map(|(index, message)| {
                let mut e = BatchIndexAndErrorMessage::default();
                e.batch_index = index;
                e.batch_index_error_message = Some(StrBytes::from_string(message));
                e
            })
            .collect();
    }
    p
}

/// Whether any partition's first batch is transactional (attributes bit 4,
/// at byte 21 of the batch header): Kafka's `hasTransactionalRecords`.
fn has_transactional_records(topics: &[TopicProduceData]) -> bool {
    const ATTRIBUTES_AT: usize = 21;
    const TRANSACTIONAL: u8 = 0x10;
    topics
        .iter()
        .flat_map(|t| t.partition_data.iter())
        .filter_map(|p| p.records.as_ref())
        .any(|r| {
            r.get(ATTRIBUTES_AT + 1)
                .is_some_and(|a| a & TRANSACTIONAL != 0)
        })
}

/// Appends one partition's records (the transactional check, LogAppendTime,
/// the idempotent sequence check and the write). With `inline` (on an async
/// worker) only if the append needs no disk work beyond page-cache writes;
/// if it would, the decoded records come back untouched in `Err`, to be
/// appended on a blocking thread.
fn append_one(
    broker: &Arc<crate::broker::Broker>,
    v: i16,
    (transactional_id, verified_elsewhere): (Option<&str>, bool),
    head: &Head,
    d: Decoded,
    inline: bool,
) -> Attempt {
    if d.buf.is_empty() {
        return Attempt::Done(Ok(Appended {
            min_insync_replicas: d.rules.min_insync_replicas,
            slot: d.slot,
            base_offset: -1,
            log_append_time: -1,
            log_start_offset: -1,
            end: None,
        }));
    }
    // A transactional batch must belong to its producer's open
    // transaction; the guard keeps the markers behind this append.
    let guard = match txn::check_transactional(
        broker,
        v,
        transactional_id,
        verified_elsewhere,
        &head.topic_name,
        head.partition,
        d.producer.as_ref(),
    ) {
        Ok(g) => g,
        Err((error, message)) => return Attempt::Done(Err(Refusal::new(error, message))),
    };
    let Decoded {
        slot,
        rules,
        mut buf,
        producer,
        intent,
        max_timestamp,
    } = d;
    let mut log_append_time = -1;
    if rules.timestamp_type == TimestampType::LogAppendTime {
        let now = broker.clock().now_ms();
        buf.set_all_timestamps(now);
        log_append_time = now;
    }
    // Idempotent batches: the sequence check and the append are one
    // step; a retried batch gets its original offsets (and still
    // waits for durability).
    let appended = if inline {
        match slot.log.try_append_producer(&mut buf, producer.as_ref()) {
            Ok(Some(outcome)) => Ok(outcome),
            Ok(None) => {
                // Needs a blocking thread; the intent stays announced.
                drop(guard);
                return Attempt::Blocked(Decoded {
                    slot,
                    rules,
                    buf,
                    producer,
                    intent,
                    max_timestamp,
                });
            }
            Err(e) => Err(e),
        }
    } else {
        slot.log.append_producer(&mut buf, producer.as_ref())
    };
    drop(guard);
    drop(intent);
    if let Ok(AppendOutcome::Appended(info)) = &appended {
        let bytes = buf.bytes_len() as u64;
        slot.traffic
            .appended(bytes, info.last_offset + 1 - info.base_offset);
        crate::metrics::kafka_metrics()
            .produce_batch_bytes
            .observe(bytes as f64);
    } else if appended.is_err() {
        slot.traffic.rejected();
    }
    Attempt::Done(match appended {
        Ok(AppendOutcome::Appended(info)) => Ok(Appended {
            min_insync_replicas: rules.min_insync_replicas,
            base_offset: info.base_offset as i64,
            log_append_time,
            log_start_offset: slot.log.log_start_offset() as i64,
            end: Some(info.last_offset + 1),
            slot,
        }),
        Ok(AppendOutcome::Duplicate(info)) => {
            tracing::debug!(
                partition = head.partition,
                base_offset = info.base_offset,
                "duplicate batch answered with its original offsets"
            );
            // Kafka answers a duplicate with its batch's timestamp as the
            // append time, on any topic: a retry carries the same batch, so
            // its largest timestamp (on a LogAppendTime topic, an append
            // time: this one, as es keeps none per batch).
            let batch_time = if rules.timestamp_type == TimestampType::LogAppendTime {
                log_append_time
            } else {
                max_timestamp
            };
            Ok(Appended {
                min_insync_replicas: rules.min_insync_replicas,
                base_offset: info.base_offset as i64,
                log_append_time: batch_time,
                log_start_offset: slot.log.log_start_offset() as i64,
                end: Some(info.last_offset + 1),
                slot,
            })
        }
        Err(e) => {
            tracing::warn!(partition = head.partition, error = %e, "append failed");
            let error = storage_error_code(&e);
            // Kafka answers a refused append (a sequence or epoch error)
            // with the partition's log start offset, a storage failure
            // without one.
            let log_start_offset = if error == code(ResponseError::KafkaStorageError) {
                -1
            } else {
                slot.log.log_start_offset() as i64
            };
            Err(Refusal {
                log_start_offset,
                ..Refusal::new(error, e.to_string())
            })
        }
    })
}

/// The broker's schema registry, looked up the first time a batch of the
/// request needs it: a topic without schema validation costs one flag read
/// per partition batch ([`TopicRules::validates_schemas`]) and nothing else.
struct LazySchemaIds {
    broker: Arc<crate::broker::Broker>,
    ids: Option<Option<Arc<dyn SchemaIds>>>,
}

impl LazySchemaIds {
    fn get(&mut self) -> Option<&dyn SchemaIds> {
        self.ids
            .get_or_insert_with(|| self.broker.schema_ids())
            .as_deref()
    }
}

/// Decodes and validates one partition's records into a storage buffer.
fn decode_one(
    decoder: &mut BatchDecoder,
    summaries: &mut Vec<BatchSummary>,
    head: &Head,
    r: Resolved,
    (version, now): (i16, i64),
    schema_ids: &mut LazySchemaIds,
) -> Step<Decoded> {
    let Resolved {
        slot,
        rules,
        records,
        intent,
    } = r;
    let Some(records) = records else {
        return Err(Refusal::new(
            code(ResponseError::InvalidRecord),
            "null records",
        ));
    };
    summaries.clear();
    let mut buf = RecordBatchBuf::new();
    let limits = DecodeLimits::produce(rules.max_message_bytes);
    if let Err(e) = decoder.decode(&records, &mut buf, &limits, summaries) {
        tracing::debug!(partition = head.partition, error = %e, "refused produced batch");
        return Err(Refusal::new(batch_error_code(&e), e.to_string()));
    }
    let producer = txn::producer_append(summaries);
    for s in summaries.iter() {
        if let Err(e) = check_produce_compression(version, s) {
            return Err(Refusal::new(batch_error_code(&e), e.to_string()));
        }
        if rules.timestamp_type == TimestampType::CreateTime {
            // Kafka checks each record; the batch's extremes bound them all.
            let after = rules.timestamp_after_max_ms;
            let before = rules.timestamp_before_max_ms;
            if s.max_timestamp.saturating_sub(now) > after
                || now.saturating_sub(s.first_timestamp.min(s.max_timestamp)) > before
            {
                return Err(Refusal::new(
                    code(ResponseError::InvalidTimestamp),
                    format!(
                        "timestamp out of range (now {now}, batch {}..{})",
                        s.first_timestamp, s.max_timestamp
                    ),
                ));
            }
        }
    }
    if rules.compact {
        refuse_keyless_records(head, &slot, &buf)?;
    }
    if rules.validates_schemas() {
        match schema_validation::check(&head.topic_name, &rules, &buf, schema_ids.get()) {
            Ok(()) => {}
            Err(Invalid::Records(errors)) => return Err(invalid_records(&slot, errors)),
            Err(Invalid::NoRegistry(message)) => {
                return Err(Refusal {
                    log_start_offset: slot.log.log_start_offset() as i64,
                    ..Refusal::new(code(ResponseError::InvalidRecord), message)
                })
            }
        }
    }
    let max_timestamp = summaries
        .iter()
        .map(|s| s.max_timestamp)
        .max()
        .unwrap_or(-1);
    Ok(Decoded {
        slot,
        rules,
        buf,
        producer,
        intent,
        max_timestamp,
    })
}

/// Kafka's LogValidator on a compacted topic: every record needs a key. If
/// any lacks one, the whole batch is refused ([`invalid_records`]) with
/// Kafka's message for each keyless record.
fn refuse_keyless_records(head: &Head, slot: &PartitionSlot, buf: &RecordBatchBuf) -> Step<()> {
    let keyless = keyless_records(buf);
    if keyless.is_empty() {
        return Ok(());
    }
    let tp = format!("{}-{}", head.topic_name, head.partition);
    let errors = keyless
        .into_iter()
        .map(|i| {
            (
                i,
                format!(
                    "Compacted topic cannot accept message without key in topic partition {tp}"
                ),
            )
        })
        .collect();
    Err(invalid_records(slot, errors))
}

/// Kafka's refusal of a batch with invalid records: INVALID_RECORD, one
/// RecordError per record (its index in the batch: Produce v3+ carries
/// exactly one batch per partition), Kafka's summary message, and the
/// partition's log start offset; nothing of the batch is appended.
fn invalid_records(slot: &PartitionSlot, errors: Vec<(i32, String)>) -> Refusal {
    let shown: Vec<String> = errors
        .iter()
        .take(3)
        .map(|(i, m)| format!("RecordError(batchIndex={i}, message='{m}')"))
        .collect();
    Refusal {
        error: code(ResponseError::InvalidRecord),
        message: format!(
            "One or more records have been rejected due to {} record errors in total, and only showing the first three errors at most: [{}]",
            errors.len(),
            shown.join(", ")
        ),
        record_errors: errors,
        log_start_offset: slot.log.log_start_offset() as i64,
        leader: None,
    }
}

/// Indexes of the records in `buf` without a key.
fn keyless_records(buf: &RecordBatchBuf) -> Vec<i32> {
    buf.records()
        .map_while(Result::ok)
        .enumerate()
        .filter(|(_, r)| r.key.is_none())
        .map(|(i, _)| i32::try_from(i).unwrap_or(i32::MAX))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use es_storage::{ProducerInfo, RecordMeta};

    #[test]
    fn keyless_records_are_found_with_and_without_the_extension() {
        let plain = RecordMeta::default();
        let idempotent = RecordMeta {
            producer: Some(ProducerInfo {
                producer_id: 7,
                producer_epoch: 1,
                sequence: 3,
            }),
            transactional: true,
            control: false,
        };
        let header: [(&[u8], Option<&[u8]>); 1] = [(b"h", Some(b"v"))];
        let mut buf = RecordBatchBuf::new();
        buf.push(1, None, Some(b"v"), [], &plain);
        buf.push(1, Some(b"k"), Some(b"v"), [], &plain);
        buf.push(1, None, None, header, &idempotent);
        buf.push(1, Some(b""), None, header, &idempotent);
        buf.push(1, None, Some(b""), [], &idempotent);
        buf.push(1, Some(b"\xff\xff\xff\xff"), Some(b"v"), [], &plain);
        assert_eq!(keyless_records(&buf), vec![0, 2, 4]);
        assert!(keyless_records(&RecordBatchBuf::new()).is_empty());
    }
}
