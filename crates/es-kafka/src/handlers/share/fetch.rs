//! ShareFetch v1-2 (docs/share-groups-design.md §2.3, §3.7): Kafka 4.4's
//! checks in its order, the share session, the piggybacked
//! acknowledgements, then per partition the acquisition: the fetch lock
//! ([`ShareManager::begin_fetch`]), a read of the log from the next fetch
//! offset encoded as Fetch encodes (`codec/encode.rs`' `BatchEncoder`), the
//! acquisition over the batches that encoding produced
//! ([`ShareManager::finish_fetch`]), and the records sliced to the batches
//! that hold acquired offsets (Kafka's `maybeSliceFetchRecords`). All of the
//! reading and acquiring runs on one blocking thread; every durability
//! ticket is awaited before the answer.
//!
//! The wait (Kafka's `DelayedShareFetch`): a fetch that acquired nothing,
//! met no error and has fewer than MinBytes parks until MaxWaitMs (at most
//! [`FETCH_WAIT_MS_MAX`]), woken by new records in one of its partitions
//! (the partition's waiters, as Fetch parks) or by records of one of its
//! share-partitions becoming available again (release, lock expiry:
//! [`ShareManager::available`]), and then tries again. Both wake-ups are
//! armed before the state is read, so none is missed. A full session cache
//! answers SHARE_SESSION_LIMIT_REACHED after MaxWaitMs, as Kafka does.
//!
//! [`ShareManager::begin_fetch`]: crate::shares::manager::ShareManager::begin_fetch
//! [`ShareManager::finish_fetch`]: crate::shares::manager::ShareManager::finish_fetch
//! [`ShareManager::available`]: crate::shares::manager::ShareManager::available

use std::cell::Cell;
use std::collections::HashMap;
use std::future::Future as _;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use tokio::sync::futures::Notified;
use tokio::sync::Notify;
use tokio::time::Instant;

use bytes::Bytes;
use kafka_protocol::messages::share_fetch_response::{
    AcquiredRecords as WireAcquired, LeaderIdAndEpoch, NodeEndpoint, PartitionData,
    ShareFetchableTopicResponse,
};
use kafka_protocol::messages::{BrokerId, ShareFetchRequest, ShareFetchResponse};
use kafka_protocol::protocol::StrBytes;

use super::{
    acknowledge_parts, by_topic, check_request, failure_answer, is_error, key_of, lock_timeout_ms,
    release, resolve, share_config, AckPart, PartAnswer, Served, TopLevel,
};
use crate::codec::batch::{BATCH_LENGTH_POS, LAST_OFFSET_DELTA_POS, LOG_OVERHEAD_BYTES};
use crate::codec::encode::{BatchEncoder, EncodeOptions};
use crate::codec::share_wire::ShareFetchV2Extras;
use crate::errors::{code, storage_error_code, ResponseError};
use crate::handlers::fetch::{
    compression_for, produced_batch_window, FETCH_RESPONSE_BYTES_MAX, FETCH_WAIT_MS_MAX,
};
use crate::handlers::route::{LeaderEndpoints, RECORD_LEADER_EPOCH};
use crate::handlers::{blocking, Ctx, RequestError};
use crate::shares::locks::ShareKey;
use crate::shares::manager::{AcquireRequest, ReadView, ShareConfig, ShareTarget};
use crate::shares::partition::{AckBatch, AcquireMode, AcquiredRecords};
use crate::shares::sessions::{
    FetchContext, PartitionNews, SessionError, SessionKey, ShareFetchSession, TopicPartition,
};
use crate::topics::PartitionSlot;
use es_storage::record::RecordIter;
use es_storage::{Isolation, ReadBuf, StorageError};

/// ShareFetch, in Kafka 4.4's order (§2.3): a null GroupId, READ on the
/// group, the member id, v2's IsRenewAck rules and ShareAcquireMode, the
/// session, the acknowledgements, then the partitions.
pub async fn share_fetch(
    ctx: &Ctx,
    req: ShareFetchRequest,
    x: ShareFetchV2Extras,
) -> Result<Option<Bytes>, RequestError> {
    let (group, member) = match check_request(
        ctx,
        req.group_id.as_ref().map(|g| g.0.as_str()),
        req.member_id.as_deref(),
    ) {
        Ok(v) => v,
        Err(t) => return respond_top(ctx, t),
    };
    let config = share_config(
        &ctx.broker.group_configs(&group),
        &ctx.broker.config().share,
    );
    if ctx.version >= 2 && x.is_renew_ack {
        if let Some(m) = renew_ack_violation(&req) {
            return respond_top(ctx, TopLevel::new(ResponseError::InvalidRequest, Some(&m)));
        }
    }
    let mode = match x.acquire_mode {
        0 => AcquireMode::BatchOptimized,
        1 => AcquireMode::RecordLimit,
        other => {
            // Kafka's `ShareAcquireMode.forId` refuses an id it does not
            // know; es answers INVALID_REQUEST with the reason.
            let m = format!("Unknown share acquire mode id: {other}");
            return respond_top(ctx, TopLevel::new(ResponseError::InvalidRequest, Some(&m)));
        }
    };

    // The request's partitions once each (Kafka keys them by topic id and
    // partition), with their acknowledgements.
    let mut partitions: Vec<TopicPartition> = Vec::new();
    let mut acks: HashMap<TopicPartition, Vec<AckBatch>> = HashMap::new();
    for t in &req.topics {
        for p in &t.partitions {
            let tp = TopicPartition {
                topic_id: t.topic_id,
                partition: p.partition_index,
            };
            if !acks.contains_key(&tp) {
                partitions.push(tp);
            }
            let batches = p
                .acknowledgement_batches
                .iter()
                .map(|b| AckBatch {
                    first: b.first_offset,
                    last: b.last_offset,
                    types: b.acknowledge_types.clone(),
                })
                .collect();
            acks.insert(tp, batches);
        }
    }
    let forgotten: Vec<TopicPartition> = req
        .forgotten_topics_data
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|&partition| TopicPartition {
                topic_id: t.topic_id,
                partition,
            })
        })
        .collect();
    let acks_present = acks.values().any(|b| !b.is_empty());
    let skey = SessionKey::new(group.as_str(), member.as_str());
    let session = ctx.broker.shares().with_sessions(|c| {
        c.share_fetch(ShareFetchSession {
            key: &skey,
            epoch: req.share_session_epoch,
            partitions: &partitions,
            forgotten: &forgotten,
            acknowledgements_present: acks_present,
            connection: ctx.connection.unwrap_or(0),
        })
    });
    let session = match session {
        Ok(s) => s,
        Err(e) => {
            if e == SessionError::LimitReached {
                // Kafka answers a full cache after MaxWaitMs.
                tokio::select! {
                    _ = tokio::time::sleep(wait_of(req.max_wait_ms)) => {}
                    _ = ctx.broker.stopping() => {}
                }
            }
            return respond_top(
                ctx,
                TopLevel {
                    code: e.code(),
                    message: Some(e.message().to_string()),
                },
            );
        }
    };

    let mut leaders = LeaderEndpoints::default();
    let ack_parts: Vec<AckPart> = partitions
        .iter()
        .filter_map(|tp| {
            let batches = acks.remove(tp)?;
            (!batches.is_empty()).then_some(AckPart { tp: *tp, batches })
        })
        .collect();
    let ack_answers = acknowledge_parts(
        ctx,
        &group,
        &member,
        ack_parts,
        x.is_renew_ack,
        &config,
        &mut leaders,
    )
    .await?;

    let to_fetch = match session {
        FetchContext::Opened { partitions, .. } | FetchContext::Updated { partitions, .. } => {
            if x.is_renew_ack {
                // Such a request only acknowledges (§2.3 step 5).
                Vec::new()
            } else {
                partitions
            }
        }
        FetchContext::Closed(released) => {
            release(ctx, released).await?;
            Vec::new()
        }
    };
    let fetched = fetch_waiting(
        ctx,
        &group,
        &member,
        &to_fetch,
        Budget {
            max_bytes: req.max_bytes,
            max_records: req.max_records,
            batch_size: req.batch_size,
            mode,
        },
        &config,
        &mut leaders,
        (req.min_bytes, req.max_wait_ms),
    )
    .await?;

    // The answer: the session's partitions as `must_list` says, then
    // partitions that only carry an acknowledgement result.
    let mut ack_by: HashMap<TopicPartition, PartAnswer> = ack_answers.into_iter().collect();
    let mut listed: Vec<(TopicPartition, PartitionData)> = Vec::new();
    let shares = ctx.broker.shares();
    for (tp, f) in fetched {
        let ack = ack_by.remove(&tp);
        let news = PartitionNews {
            records: !f.acquired.is_empty(),
            error: is_error(&f.answer),
            acknowledgement: ack.is_some(),
        };
        if shares.with_sessions(|c| c.must_list(&skey, &tp, news)) {
            listed.push((tp, partition_data(&tp, &f, ack.as_ref())));
        }
    }
    let rest: Vec<TopicPartition> = partitions
        .iter()
        .filter(|tp| ack_by.contains_key(tp))
        .copied()
        .collect();
    for tp in rest {
        let ack = ack_by.remove(&tp);
        let f = Fetched::default();
        listed.push((tp, partition_data(&tp, &f, ack.as_ref())));
    }

    let mut r = ShareFetchResponse::default();
    r.acquisition_lock_timeout_ms = lock_timeout_ms(&config);
    r.responses = by_topic(listed)
        .into_iter()
        .map(|(id, ps)| {
            let mut t = ShareFetchableTopicResponse::default();
            t.topic_id = id;
            t.partitions = ps.into_iter().map(|(_, p)| p).collect();
            t
        })
        .collect();
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
    ctx.respond(&r)
}

/// Kafka's IsRenewAck rule (v2): MaxBytes, MinBytes, MaxRecords and
/// MaxWaitMs must all be 0; the message names each that is not.
fn renew_ack_violation(req: &ShareFetchRequest) -> Option<String> {
    let fields = [
        ("maxBytes", req.max_bytes),
        ("minBytes", req.min_bytes),
        ("maxRecords", req.max_records),
        ("maxWaitMs", req.max_wait_ms),
    ];
    let mut m = String::new();
    for (name, v) in fields {
        if v != 0 {
            m.push_str(name);
            m.push_str(" must be set to 0, ");
        }
    }
    (!m.is_empty()).then(|| m + "if isRenewAck is true.")
}

fn respond_top(ctx: &Ctx, t: TopLevel) -> Result<Option<Bytes>, RequestError> {
    let mut r = ShareFetchResponse::default();
    r.error_code = t.code;
    r.error_message = t.message.map(StrBytes::from_string);
    ctx.respond(&r)
}

/// What the request allows the acquisition.
#[derive(Clone, Copy)]
struct Budget {
    max_bytes: i32,
    max_records: i32,
    batch_size: i32,
    mode: AcquireMode,
}

/// One partition's fetch result.
#[derive(Default)]
struct Fetched {
    answer: PartAnswer,
    records: Bytes,
    acquired: Vec<AcquiredRecords>,
}

fn partition_data(tp: &TopicPartition, f: &Fetched, ack: Option<&PartAnswer>) -> PartitionData {
    let mut p = PartitionData::default();
    p.partition_index = tp.partition;
    p.error_code = f.answer.code;
    p.error_message = f.answer.message.clone().map(StrBytes::from_string);
    if let Some(a) = ack {
        p.acknowledge_error_code = a.code;
        p.acknowledge_error_message = a.message.clone().map(StrBytes::from_string);
    }
    if let Some((id, epoch)) = f.answer.leader.or(ack.and_then(|a| a.leader)) {
        let mut l = LeaderIdAndEpoch::default();
        l.leader_id = id;
        l.leader_epoch = epoch;
        p.current_leader = l;
    }
    // Never null at v1+: an empty set is zero bytes.
    p.records = Some(f.records.clone());
    p.acquired_records = f
        .acquired
        .iter()
        .map(|a| {
            let mut w = WireAcquired::default();
            w.first_offset = a.first;
            w.last_offset = a.last;
            w.delivery_count = i16::try_from(a.delivery_count).unwrap_or(i16::MAX);
            w
        })
        .collect();
    p
}

/// MaxWaitMs as a duration, at most [`FETCH_WAIT_MS_MAX`].
fn wait_of(max_wait_ms: i32) -> Duration {
    Duration::from_millis(
        u64::try_from(max_wait_ms)
            .unwrap_or(0)
            .min(FETCH_WAIT_MS_MAX),
    )
}

/// [`fetch_parts`], parked between passes while nothing was acquired, no
/// partition answered an error, fewer than MinBytes were read and
/// MaxWaitMs has not passed (item 10 of §5). Each pass arms its wake-ups
/// first: the partitions' waiters (new records) and the share-partitions'
/// "available again" notifies.
#[allow(clippy::too_many_arguments)]
async fn fetch_waiting(
    ctx: &Ctx,
    group: &str,
    member: &str,
    list: &[TopicPartition],
    budget: Budget,
    config: &ShareConfig,
    leaders: &mut LeaderEndpoints,
    (min_bytes, max_wait_ms): (i32, i32),
) -> Result<Vec<(TopicPartition, Fetched)>, RequestError> {
    let b = &ctx.broker;
    let deadline = Instant::now() + wait_of(max_wait_ms);
    let min_bytes = usize::try_from(min_bytes).unwrap_or(0);
    let slots: Vec<Arc<PartitionSlot>> = list
        .iter()
        .filter_map(|tp| b.topic_by_id(tp.topic_id)?.partition(tp.partition))
        .collect();
    let keys: Vec<ShareKey> = list.iter().map(|tp| key_of(group, tp)).collect();
    let data = Arc::new(Notify::new());
    let mut stopping = false;
    let fetched = loop {
        let may_wait = !stopping
            && min_bytes > 0
            && !list.is_empty()
            && budget.max_records > 0
            && budget.max_bytes > 0
            && Instant::now() < deadline;
        let avails: Vec<Arc<Notify>> = if may_wait {
            for s in &slots {
                s.waiters.register(&data);
            }
            keys.iter()
                .filter_map(|k| b.shares().available(k))
                .collect()
        } else {
            Vec::new()
        };
        let mut again: Vec<Pin<Box<Notified<'_>>>> =
            avails.iter().map(|a| Box::pin(a.notified())).collect();
        for n in &mut again {
            n.as_mut().enable();
        }
        let fetched = fetch_parts(ctx, group, member, list, budget, config, leaders).await?;
        let bytes: usize = fetched.iter().map(|(_, f)| f.records.len()).sum();
        let news = fetched
            .iter()
            .any(|(_, f)| !f.acquired.is_empty() || is_error(&f.answer));
        let now = Instant::now();
        if !may_wait || news || bytes >= min_bytes || now >= deadline {
            break fetched;
        }
        tokio::select! {
            _ = tokio::time::timeout(deadline - now, data.notified()) => {}
            _ = any_notified(&mut again) => {}
            _ = b.stopping() => stopping = true,
        }
    };
    for s in &slots {
        s.waiters.deregister(&data);
    }
    Ok(fetched)
}

/// Ready when any of `ns` is notified (never, when there are none).
async fn any_notified(ns: &mut [Pin<Box<Notified<'_>>>]) {
    std::future::poll_fn(|cx| {
        for n in ns.iter_mut() {
            if n.as_mut().poll(cx).is_ready() {
                return Poll::Ready(());
            }
        }
        Poll::Pending
    })
    .await
}

/// Resolves, reads and acquires every partition to fetch, in order, and
/// waits for the acquisitions' fsyncs.
async fn fetch_parts(
    ctx: &Ctx,
    group: &str,
    member: &str,
    list: &[TopicPartition],
    budget: Budget,
    config: &ShareConfig,
    leaders: &mut LeaderEndpoints,
) -> Result<Vec<(TopicPartition, Fetched)>, RequestError> {
    let image = ctx.broker.image();
    let mut out: Vec<(TopicPartition, Fetched)> = Vec::with_capacity(list.len());
    let mut work: Vec<(usize, TopicPartition, Served)> = Vec::new();
    for tp in list {
        let answer = match resolve(
            ctx,
            image.as_deref(),
            leaders,
            tp,
            ResponseError::UnknownTopicId,
        ) {
            Ok(s) => {
                work.push((out.len(), *tp, s));
                PartAnswer::default()
            }
            Err(a) => a,
        };
        out.push((
            *tp,
            Fetched {
                answer,
                ..Fetched::default()
            },
        ));
    }
    if work.is_empty() || budget.max_records <= 0 || budget.max_bytes <= 0 {
        return Ok(out);
    }
    let broker = ctx.broker.clone();
    let (group_s, member_s, cfg) = (group.to_string(), member.to_string(), *config);
    let done = blocking(move || {
        let mut records_left = budget.max_records;
        let mut bytes_left = usize::try_from(budget.max_bytes)
            .unwrap_or(0)
            .min(FETCH_RESPONSE_BYTES_MAX);
        let mut any = false;
        let mut encoder = BatchEncoder::new();
        let mut window = ReadBuf::default();
        let mut done = Vec::with_capacity(work.len());
        for (i, tp, s) in work {
            if records_left <= 0 || (any && bytes_left == 0) {
                break;
            }
            let key = key_of(&group_s, &tp);
            let t = ShareTarget {
                key: &key,
                topic: &s.topic.name,
                log: &s.slot.log,
                config: &cfg,
            };
            let shares = broker.shares();
            let guard = match shares.begin_fetch(&t, records_left) {
                Ok(Some(g)) if g.max_records > 0 => g,
                // Contended (another fetch is acquiring here) or nothing
                // may be acquired: nothing this round.
                Ok(_) => continue,
                Err(e) => {
                    done.push((i, Err(failure_answer(&e))));
                    continue;
                }
            };
            let cursor = shares
                .inspect(&key, |c| c.next_offset())
                .unwrap_or(guard.fetch_offset);
            // Nothing past the cursor plus the records allowed can be
            // acquired: stop the read there.
            let offset_limit = cursor
                .max(guard.fetch_offset)
                .saturating_add(guard.max_records);
            let read = match read_records(
                &s,
                guard.fetch_offset,
                offset_limit,
                bytes_left.min(share_read_bytes(guard.max_records)).max(1),
                !any,
                None,
                cfg.read_committed,
                &mut encoder,
                &mut window,
            ) {
                Ok(r) => r,
                Err(code) => {
                    done.push((
                        i,
                        Err(PartAnswer {
                            code,
                            ..PartAnswer::default()
                        }),
                    ));
                    continue;
                }
            };
            if read.batches.is_empty() {
                continue;
            }
            let spans: Vec<(i64, i64)> = read.batches.iter().map(|b| (b.0, b.1)).collect();
            let acquired = shares.finish_fetch(
                guard,
                &t,
                &AcquireRequest {
                    member: &member_s,
                    max_records: records_left,
                    batch_size: budget.batch_size,
                    mode: budget.mode,
                },
                &ReadView {
                    log_start: read.log_start,
                    end: read.end,
                    batches: &spans,
                    aborted: &read.aborted,
                },
            );
            match acquired {
                Err(e) => done.push((i, Err(failure_answer(&e)))),
                Ok(a) if a.records.is_empty() => drop(a.ticket),
                Ok(a) => {
                    let bytes = if covered(&read, &a.records) {
                        slice(&read, &a.records)
                    } else {
                        // A batch holds offsets not acquired (another
                        // member's, or acknowledged): encode only the
                        // acquired records, so none is sent that the
                        // member does not own.
                        let last = a.records.last().map_or(0, |r| r.last);
                        match read_records(
                            &s,
                            a.records.first().map_or(0, |r| r.first),
                            last.saturating_add(1),
                            bytes_left.max(1),
                            !any,
                            Some(&a.records),
                            cfg.read_committed,
                            &mut encoder,
                            &mut window,
                        ) {
                            Ok(r) => Bytes::from(r.buf),
                            Err(_) => slice(&read, &a.records),
                        }
                    };
                    let count: i64 = a.records.iter().map(|r| r.last - r.first + 1).sum();
                    records_left = records_left
                        .saturating_sub(i32::try_from(count).unwrap_or(i32::MAX))
                        .max(0);
                    bytes_left = bytes_left.saturating_sub(bytes.len());
                    any = true;
                    done.push((i, Ok((bytes, a.records, a.ticket))));
                }
            }
        }
        done
    })
    .await?;
    for (i, r) in done {
        match r {
            Err(a) => out[i].1.answer = a,
            Ok((bytes, acquired, ticket)) => {
                if let Some(t) = ticket {
                    if let Err(e) = ctx.broker.shares().wait_acquired(t).await {
                        out[i].1.answer = failure_answer(&e);
                        continue;
                    }
                }
                out[i].1.records = bytes;
                out[i].1.acquired = acquired;
            }
        }
    }
    Ok(out)
}

/// What one partition's read encoded: the Kafka batches and where each is
/// in `buf`.
struct Read {
    buf: Vec<u8>,
    /// (first offset, last offset, byte start, byte end), ascending.
    batches: Vec<(i64, i64, usize, usize)>,
    log_start: i64,
    end: i64,
    /// read_committed: the offsets read that belong to aborted
    /// transactions, as ascending inclusive ranges.
    aborted: Vec<(i64, i64)>,
}

/// Bytes read per record a share-partition may acquire: a ShareFetch hands out
/// at most its MaxRecords (500 by the Java client's default), however large
/// its MaxBytes (50 MiB by default), so the read is sized by the records, not
/// the bytes: reading, checking and copying the whole byte budget to hand out
/// a few hundred records cost es a hundred times the bytes it sent
/// (docs/benchmarks.md, "Share groups"). Larger records come fewer per fetch;
/// a produced batch larger than the read is still read whole.
const SHARE_READ_BYTES_PER_RECORD: usize = 4 * 1024;
/// The bounds of one share-partition's read.
const SHARE_READ_BYTES_MIN: usize = 64 * 1024;
const SHARE_READ_BYTES_MAX: usize = 8 * 1024 * 1024;

/// The most bytes one share-partition's read takes when it may acquire
/// `max_records` records.
fn share_read_bytes(max_records: i64) -> usize {
    usize::try_from(max_records.max(0))
        .unwrap_or(usize::MAX)
        .saturating_mul(SHARE_READ_BYTES_PER_RECORD)
        .clamp(SHARE_READ_BYTES_MIN, SHARE_READ_BYTES_MAX)
}

/// Reads the partition from `from` (or from the start of the produced batch
/// that holds it) below the high watermark (the last stable offset with
/// `read_committed`, which also collects the offsets of aborted
/// transactions' records) and `offset_limit`, about `budget` bytes, and
/// encodes the records as Fetch does. Errors are Kafka codes. With `keep`,
/// only the records of those acquired ranges are encoded, each as a plain
/// record (a producer's batch is never sent in part).
#[allow(clippy::too_many_arguments)]
fn read_records(
    s: &Served,
    from: i64,
    offset_limit: i64,
    budget: usize,
    first: bool,
    keep: Option<&[AcquiredRecords]>,
    read_committed: bool,
    encoder: &mut BatchEncoder,
    window: &mut ReadBuf,
) -> Result<Read, i16> {
    let from = u64::try_from(from).unwrap_or(0);
    let isolation = match read_committed {
        true => Isolation::ReadCommitted,
        false => Isolation::ReadUncommitted,
    };
    let snap = s.slot.log.snapshot(from, isolation);
    let hw = match read_committed {
        true => snap.last_stable_offset(),
        false => snap.high_watermark(),
    };
    let mut out = Read {
        buf: Vec::new(),
        batches: Vec::new(),
        log_start: i64::try_from(snap.log_start_offset()).unwrap_or(i64::MAX),
        end: i64::try_from(hw).unwrap_or(i64::MAX),
        aborted: Vec::new(),
    };
    let start = snap.start();
    if start >= hw {
        return Ok(out);
    }
    let read_error = |e: StorageError| {
        tracing::error!(partition = s.slot.index, offset = start, error = %e, "share fetch read failed");
        storage_error_code(&e)
    };
    let first_read = match snap.read_into(start, budget, window) {
        Ok(r) => r,
        // The log start passed the offset since the share-partition looked:
        // nothing to read this round.
        Err(StorageError::OffsetOutOfRange { .. }) => return Ok(out),
        Err(e) => return Err(read_error(e)),
    };
    let chunk = match produced_batch_window(&first_read) {
        Some(size) => snap.read_into(start, size, window).map_err(read_error)?,
        None => first_read,
    };
    let limit = hw
        .min(snap.next_epoch_start(start).unwrap_or(u64::MAX))
        .min(u64::try_from(offset_limit).unwrap_or(0));
    let epoch = snap.epoch_at(start).unwrap_or(RECORD_LEADER_EPOCH);
    let txns = match read_committed {
        true => snap.aborted_between(start, limit.max(start)),
        false => Vec::new(),
    };
    let is_aborted = |r: &es_storage::record::RecordView<'_>| {
        r.meta.transactional
            && !r.meta.control
            && r.meta.producer.is_some_and(|p| {
                txns.iter().any(|a| {
                    a.producer_id == p.producer_id
                        && a.first_offset <= r.offset
                        && r.offset <= a.last_offset
                })
            })
    };
    let mut aborted: Vec<(i64, i64)> = Vec::new();
    let corrupt = Cell::new(false);
    let kept = |o: u64| {
        keep.is_none_or(|k| {
            let o = i64::try_from(o).unwrap_or(i64::MAX);
            k.iter().any(|a| a.first <= o && o <= a.last)
        })
    };
    let records = RecordIter::read_checked(chunk.data).map_while(|r| match r {
        Ok(mut r) if r.offset < limit => {
            if keep.is_some() {
                r.batch = None;
            } else if r.batch.is_none() {
                r.batch = chunk.batch_at(r.offset);
            }
            Some(r)
        }
        Ok(_) => None,
        Err(e) => {
            tracing::error!(partition = s.slot.index, error = %e, "undecodable record in storage");
            corrupt.set(true);
            None
        }
    })
    .inspect(|r| {
        if !txns.is_empty() && is_aborted(r) {
            let o = i64::try_from(r.offset).unwrap_or(i64::MAX);
            match aborted.last_mut() {
                Some(last) if last.1 + 1 == o => last.1 = o,
                _ => aborted.push((o, o)),
            }
        }
    })
    .filter(|r| kept(r.offset));
    let rules = s.topic.rules();
    let (compression, codec_rules) = compression_for(Some(&rules));
    let opts = EncodeOptions {
        compression,
        log_append_time: rules.timestamp_type == crate::config::TimestampType::LogAppendTime,
        partition_leader_epoch: epoch,
        max_bytes: budget,
    };
    let mut buf = Vec::with_capacity(chunk.data.len().min(budget) + 128);
    let summary = encoder
        .encode_with(records, &mut buf, &opts, codec_rules)
        .map_err(|e| {
            tracing::error!(partition = s.slot.index, error = %e, "encoding share-fetched records failed");
            code(ResponseError::KafkaStorageError)
        })?;
    if corrupt.get() && summary.records == 0 {
        return Err(code(ResponseError::CorruptMessage));
    }
    if !first && buf.len() > budget {
        // Only the response's first records may overshoot (KIP-74).
        buf.clear();
    }
    out.batches = batch_spans(&buf);
    out.buf = buf;
    out.aborted = aborted;
    Ok(out)
}

/// The batches of an encoded record set: (first, last, byte range). The
/// bytes are our own encoder's; a short tail (never written) ends the walk.
fn batch_spans(buf: &[u8]) -> Vec<(i64, i64, usize, usize)> {
    let mut spans = Vec::new();
    let mut pos = 0usize;
    while pos + LAST_OFFSET_DELTA_POS + 4 <= buf.len() {
        let at = |i: usize, n: usize| &buf[pos + i..pos + i + n];
        let base = i64::from_be_bytes(at(0, 8).try_into().unwrap_or([0; 8]));
        let len = i32::from_be_bytes(at(BATCH_LENGTH_POS, 4).try_into().unwrap_or([0; 4]));
        let delta = i32::from_be_bytes(at(LAST_OFFSET_DELTA_POS, 4).try_into().unwrap_or([0; 4]));
        let Ok(len) = usize::try_from(len) else { break };
        let end = pos + LOG_OVERHEAD_BYTES + len;
        if end > buf.len() {
            break;
        }
        spans.push((base, base + i64::from(delta), pos, end));
        pos = end;
    }
    spans
}

/// Whether every batch of the read that holds an acquired offset holds
/// only acquired offsets.
fn covered(read: &Read, acquired: &[AcquiredRecords]) -> bool {
    read.batches.iter().all(|&(f, l, _, _)| {
        let overlapping: Vec<&AcquiredRecords> = acquired
            .iter()
            .filter(|a| a.first <= l && a.last >= f)
            .collect();
        if overlapping.is_empty() {
            return true;
        }
        // The acquired ranges are ascending and disjoint: covered when they
        // tile [f, l] without a hole.
        let mut next = f;
        for a in overlapping {
            if a.first > next {
                return false;
            }
            next = next.max(a.last.saturating_add(1));
        }
        next > l
    })
}

/// The read's batches that hold an acquired offset (Kafka's
/// `maybeSliceFetchRecords`): the client keeps only the acquired records,
/// so batches with none are left out.
fn slice(read: &Read, acquired: &[AcquiredRecords]) -> Bytes {
    let mut out = Vec::with_capacity(read.buf.len());
    for &(f, l, s, e) in &read.batches {
        if acquired.iter().any(|a| a.first <= l && a.last >= f) {
            out.extend_from_slice(&read.buf[s..e]);
        }
    }
    Bytes::from(out)
}
