//! Produce (v3-13): decode each partition's RecordBatch into one storage
//! buffer, append it with one write, wait for durability, answer.
//!
//! Phases, per request:
//! 1. resolve topics (auto-creating when allowed) and partitions;
//! 2. decode and validate every partition's batch (CRC, size against
//!    `max.message.bytes`, Kafka's producer rules, timestamps) into a
//!    [`RecordBatchBuf`] — concurrently with other requests, on a blocking
//!    thread only when the request is large;
//! 3. wait for this connection's [`Turn`], append every partition (one
//!    `write` each, a copy into the page cache), release the turn so the next
//!    request may append, and await the group-commit fsync of each partition
//!    (`when_durable`: the sync pool runs the fsync and wakes this task; no
//!    thread blocks) — so appends keep the client's order while fsyncs overlap;
//! 4. respond (nothing at all for acks=0).
//!
//! Per-partition failures are per-partition error codes; the request still
//! succeeds for the other partitions, as in Kafka.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use es_storage::{AppendIntent, AppendOutcome, ProducerAppend, RecordBatchBuf};
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::durable::Durable;
use super::{blocking, txn, Ctx, RequestError};
use crate::codec::batch::{check_produce_compression, BatchDecoder, BatchSummary, DecodeLimits};
use crate::config::{TimestampType, TopicRules};
use crate::errors::{batch_error_code, code, storage_error_code, ResponseError, NONE};
use crate::topics::{is_internal, validate_topic_name, PartitionSlot};
use crate::turn::Turn;

/// Requests with at most this many record bytes are decoded on the runtime
/// thread; larger ones (decompression may take milliseconds) on a blocking one.
const INLINE_DECODE_BYTES_MAX: usize = 256 * 1024;

/// Records of one partition ready to append.
struct Item {
    /// Index into the response's topic list.
    topic: usize,
    partition: i32,
    slot: Option<Arc<PartitionSlot>>,
    rules: Option<TopicRules>,
    records: Option<Bytes>,
    buf: RecordBatchBuf,
    error: i16,
    message: Option<String>,
    base_offset: i64,
    log_append_time: i64,
    log_start_offset: i64,
    /// One past the last appended offset (0 until appended).
    partition_end: u64,
    /// The batch's producer fields when it has a producer id (idempotent or
    /// transactional): checked and recorded atomically with the append.
    producer: Option<ProducerAppend>,
    /// The topic's name (the transaction check names partitions by topic).
    topic_name: String,
    /// Per-record errors (batch index, message): Produce v8+ RecordErrors.
    record_errors: Vec<(i32, String)>,
    /// Tells the partition this append is coming, so that a group-commit
    /// fsync starting meanwhile waits for it; dropped once appended.
    intent: Option<AppendIntent>,
}

impl Item {
    fn fail(&mut self, error: i16, message: impl Into<String>) {
        self.error = error;
        self.message = Some(message.into());
        self.buf.clear();
    }
}

pub async fn handle(
    ctx: &Ctx,
    req: ProduceRequest,
    mut turn: Turn,
) -> Result<Option<Bytes>, RequestError> {
    let v = ctx.version;
    let acks = req.acks;
    let transactional_id = req.transactional_id.as_ref().map(|t| t.0.to_string());
    let b = &ctx.broker;
    let mut topic_names: Vec<(TopicName, uuid::Uuid)> = Vec::with_capacity(req.topic_data.len());
    let mut items: Vec<Item> = Vec::new();
    let acks_ok = matches!(acks, -1..=1);
    for (ti, td) in req.topic_data.into_iter().enumerate() {
        topic_names.push((td.name.clone(), td.topic_id));
        // v13 names topics by id; before that by name.
        let resolved = if v >= 13 {
            b.topic_by_id(td.topic_id).ok_or((
                code(ResponseError::UnknownTopicId),
                "unknown topic id".to_string(),
            ))
        } else {
            let name = td.name.0.as_str();
            match validate_topic_name(name) {
                Err(why) => Err((code(ResponseError::InvalidTopicException), why)),
                // Produce never creates an internal topic.
                Ok(()) => b
                    .get_or_create(name, !is_internal(name))
                    .await
                    .map_err(|e| (e.code, e.message)),
            }
        };
        for pd in td.partition_data {
            let mut item = Item {
                topic: ti,
                partition: pd.index,
                slot: None,
                rules: None,
                records: pd.records,
                buf: RecordBatchBuf::new(),
                error: NONE,
                message: None,
                base_offset: -1,
                log_append_time: -1,
                log_start_offset: -1,
                partition_end: 0,
                producer: None,
                topic_name: String::new(),
                record_errors: Vec::new(),
                intent: None,
            };
            if !acks_ok {
                item.fail(
                    code(ResponseError::InvalidRequiredAcks),
                    format!("acks must be -1, 0 or 1, not {acks}"),
                );
            } else {
                match &resolved {
                    Err((c, m)) => item.fail(*c, m.clone()),
                    Ok(topic) => match topic.partition(pd.index) {
                        None => item.fail(
                            code(ResponseError::UnknownTopicOrPartition),
                            format!("{} has no partition {}", topic.name, pd.index),
                        ),
                        // Kafka's ReplicaManager refuses clients' appends to
                        // an internal topic's partitions, however the topic
                        // was named (v13 by id too).
                        Some(_) if is_internal(&topic.name) => item.fail(
                            code(ResponseError::InvalidTopicException),
                            format!("Cannot append to internal topic {}", topic.name),
                        ),
                        Some(slot) => {
                            item.intent = Some(slot.log.announce_append());
                            item.slot = Some(slot);
                            item.rules = Some(topic.rules());
                            item.topic_name = topic.name.clone();
                        }
                    },
                }
            }
            items.push(item);
        }
    }

    // Phase 2: decode and validate before taking our turn. Small requests
    // (the common case: a few batches of 16 KiB) are decoded right here, big
    // ones (decompression can take milliseconds) on a blocking thread.
    let record_bytes: usize = items
        .iter()
        .map(|i| i.records.as_ref().map_or(0, Bytes::len))
        .sum();
    let clock = ctx.broker.clock().clone();
    let decode_all = move |mut items: Vec<Item>| {
        let mut decoder = BatchDecoder::new();
        let mut summaries: Vec<BatchSummary> = Vec::with_capacity(1);
        let now = clock.now_ms();
        for item in items.iter_mut().filter(|i| i.slot.is_some()) {
            decode_one(&mut decoder, &mut summaries, item, v, now);
        }
        items
    };
    let mut items = if record_bytes <= INLINE_DECODE_BYTES_MAX {
        decode_all(items)
    } else {
        blocking(move || decode_all(items)).await?
    };

    // Phase 3: append in connection order (one `write` per partition, done
    // here: it only copies into the page cache), release the turn, then wait
    // for the group-commit fsyncs without holding any thread.
    turn.wait().await;
    let broker = ctx.broker.clone();
    for item in items.iter_mut() {
        append_one(&broker, v, transactional_id.as_deref(), item);
        item.intent = None;
    }
    turn.finish();
    let mut waits = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let Some(slot) = item.slot.as_ref() else {
            continue;
        };
        if item.error != NONE || item.partition_end == 0 {
            continue;
        }
        waits.push((i, Durable::register(&slot.log, item.partition_end)));
    }
    for (i, wait) in waits {
        let res = wait.wait().await;
        if let Err(e) = res {
            let item = &mut items[i];
            tracing::error!(partition = item.partition, error = %e, "waiting for durability failed");
            item.fail(storage_error_code(&e), e.to_string());
            item.base_offset = -1;
            item.log_append_time = -1;
        }
    }

    if acks == 0 {
        // No response at all; but as in Kafka, a failed acks=0 produce closes
        // the connection, the only signal such a client gets to refresh its
        // metadata and notice the problem.
        if let Some(bad) = items.iter().find(|i| i.error != NONE) {
            return Err(RequestError::AcksZeroFailed {
                partition: bad.partition,
                error: bad.error,
                message: bad.message.clone().unwrap_or_default(),
            });
        }
        return Ok(None);
    }
    let mut by_topic: HashMap<usize, Vec<PartitionProduceResponse>> = HashMap::new();
    for item in items {
        let mut p = PartitionProduceResponse::default();
        p.index = item.partition;
        p.error_code = item.error;
        p.base_offset = item.base_offset;
        p.log_append_time_ms = item.log_append_time;
        if v >= 5 {
            p.log_start_offset = item.log_start_offset;
        }
        if v >= 8 {
            p.error_message = item.message.map(StrBytes::from_string);
            p.record_errors = item
                .record_errors
                .into_iter()
                .map(|(index, message)| {
                    let mut e = BatchIndexAndErrorMessage::default();
                    e.batch_index = index;
                    e.batch_index_error_message = Some(StrBytes::from_string(message));
                    e
                })
                .collect();
        }
        by_topic.entry(item.topic).or_default().push(p);
    }
    let mut r = ProduceResponse::default();
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
    ctx.respond(&r)
}

/// Appends one partition's records (the transactional check, LogAppendTime,
/// the idempotent sequence check and the write), recording the outcome.
fn append_one(
    broker: &Arc<crate::broker::Broker>,
    v: i16,
    transactional_id: Option<&str>,
    item: &mut Item,
) {
    let Some(slot) = item.slot.clone() else {
        return;
    };
    if item.error != NONE || item.buf.is_empty() {
        return;
    }
    // A transactional batch must belong to its producer's open
    // transaction; the guard keeps the markers behind this append.
    let guard = match txn::check_transactional(
        broker,
        v,
        transactional_id,
        &item.topic_name,
        item.partition,
        item.producer.as_ref(),
    ) {
        Ok(g) => g,
        Err((error, message)) => {
            item.fail(error, message);
            return;
        }
    };
    let log_append = item
        .rules
        .is_some_and(|r| r.timestamp_type == TimestampType::LogAppendTime);
    if log_append {
        let now = broker.clock().now_ms();
        item.buf.set_all_timestamps(now);
        item.log_append_time = now;
    }
    // Idempotent batches: the sequence check and the append are one
    // step; a retried batch gets its original offsets (and still
    // waits for durability below).
    let appended = slot
        .log
        .append_producer(&mut item.buf, item.producer.as_ref());
    drop(guard);
    match appended {
        Ok(AppendOutcome::Appended(info)) => {
            item.base_offset = info.base_offset as i64;
            item.log_start_offset = slot.log.log_start_offset() as i64;
            item.buf.clear();
            item.partition_end = info.last_offset + 1;
        }
        Ok(AppendOutcome::Duplicate(info)) => {
            tracing::debug!(
                partition = item.partition,
                base_offset = info.base_offset,
                "duplicate batch answered with its original offsets"
            );
            item.base_offset = info.base_offset as i64;
            item.log_start_offset = slot.log.log_start_offset() as i64;
            item.log_append_time = -1;
            item.buf.clear();
            item.partition_end = info.last_offset + 1;
        }
        Err(e) => {
            tracing::warn!(partition = item.partition, error = %e, "append failed");
            item.fail(storage_error_code(&e), e.to_string());
            item.log_append_time = -1;
        }
    }
}

/// Decodes and validates one partition's records into `item.buf`.
fn decode_one(
    decoder: &mut BatchDecoder,
    summaries: &mut Vec<BatchSummary>,
    item: &mut Item,
    version: i16,
    now: i64,
) {
    let Some(rules) = item.rules else {
        return;
    };
    let Some(records) = item.records.take() else {
        item.fail(code(ResponseError::InvalidRecord), "null records");
        return;
    };
    summaries.clear();
    let limits = DecodeLimits::produce(rules.max_message_bytes);
    if let Err(e) = decoder.decode(&records, &mut item.buf, &limits, summaries) {
        tracing::debug!(partition = item.partition, error = %e, "refused produced batch");
        item.fail(batch_error_code(&e), e.to_string());
        return;
    }
    item.producer = txn::producer_append(summaries);
    for s in summaries.iter() {
        if let Err(e) = check_produce_compression(version, s) {
            item.fail(batch_error_code(&e), e.to_string());
            return;
        }
        if rules.timestamp_type == TimestampType::CreateTime {
            // Kafka checks each record; the batch's extremes bound them all.
            let after = rules.timestamp_after_max_ms;
            let before = rules.timestamp_before_max_ms;
            if s.max_timestamp.saturating_sub(now) > after
                || now.saturating_sub(s.first_timestamp.min(s.max_timestamp)) > before
            {
                item.fail(
                    code(ResponseError::InvalidTimestamp),
                    format!(
                        "timestamp out of range (now {now}, batch {}..{})",
                        s.first_timestamp, s.max_timestamp
                    ),
                );
                return;
            }
        }
    }
    if rules.compact {
        refuse_keyless_records(item);
    }
}

/// Kafka's LogValidator on a compacted topic: every record needs a key. If
/// any lacks one, the whole batch is refused with INVALID_RECORD, one
/// RecordError per keyless record (its index in the batch: Produce v3+
/// carries exactly one batch per partition), Kafka's messages, and the
/// partition's log start offset; nothing is appended.
fn refuse_keyless_records(item: &mut Item) {
    let keyless = keyless_records(&item.buf);
    if keyless.is_empty() {
        return;
    }
    let tp = format!("{}-{}", item.topic_name, item.partition);
    let errors: Vec<(i32, String)> = keyless
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
    let shown: Vec<String> = errors
        .iter()
        .take(3)
        .map(|(i, m)| format!("RecordError(batchIndex={i}, message='{m}')"))
        .collect();
    item.fail(
        code(ResponseError::InvalidRecord),
        format!(
            "One or more records have been rejected due to {} record errors in total, and only showing the first three errors at most: [{}]",
            errors.len(),
            shown.join(", ")
        ),
    );
    item.record_errors = errors;
    if let Some(slot) = &item.slot {
        item.log_start_offset = slot.log.log_start_offset() as i64;
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
