//! The producer and transaction APIs: InitProducerId (v0-5),
//! AddPartitionsToTxn (v0-5, including the batched KIP-890 verify-only form
//! of v4+), AddOffsetsToTxn (v0-4), TxnOffsetCommit (v0-4), EndTxn (v0-4),
//! DescribeTransactions (v0), ListTransactions (v0-1) and DescribeProducers
//! (v0), mapped onto the transaction coordinator ([`crate::txn`]) and the
//! per-partition producer state in es-storage.
//!
//! es serves transaction version 1 (the `transaction.version` feature is
//! never finalized at 2), so EndTxn and TxnOffsetCommit stop at v4, where
//! clients of that version stop too. The version-dependent error rewrites
//! are Kafka's (clients older than PRODUCER_FENCED get INVALID_PRODUCER_EPOCH
//! instead, and verification errors are translated for the produce path as
//! Kafka's `ReplicaManager` and `AddPartitionsToTxnManager` do); they live
//! with the other error mappings, in [`crate::errors::txn_error_for_version`].
//!
//! Placement: a transactional id another broker coordinates answers
//! NOT_COORDINATOR ([`Broker::owns_transactional_id`]) where the
//! coordinator's own errors go (InitProducerId, AddOffsetsToTxn and EndTxn
//! in the response, AddPartitionsToTxn on every partition of the
//! transaction, DescribeTransactions in the id's entry); TxnOffsetCommit is
//! a group API and is placed by its group ([`Broker::owns_group`]).

use std::collections::BTreeMap;

use bytes::Bytes;
use es_auth::acl::{AclOperation, ResourceType};
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::list_transactions_response::TransactionState as ListedState;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse, ApiKey, DescribeProducersRequest, DescribeProducersResponse,
    DescribeTransactionsRequest, DescribeTransactionsResponse, EndTxnRequest, EndTxnResponse,
    InitProducerIdRequest, InitProducerIdResponse, ListTransactionsRequest,
    ListTransactionsResponse, ProducerId, TopicName, TransactionalId, TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::route::{route, NO_EPOCH};
use super::{blocking, Ctx, RequestError};
use crate::broker::Broker;
use crate::codec::batch::BatchSummary;
use crate::errors::{code, txn_error_for_version, txn_result_code, ResponseError, NONE};
use crate::topics::{is_internal, validate_topic_name};
use crate::txn::error::TxnError;
use crate::txn::{ProduceGuard, TopicPartition, TxnOffset};
use es_storage::ProducerAppend;

/// Kafka's `offset.metadata.max.bytes`.
pub const OFFSET_METADATA_BYTES_MAX: usize = 4096;

/// The producer fields of a produced partition's batch (Kafka's produce
/// rules allow exactly one), when it carries a producer id.
pub fn producer_append(summaries: &[BatchSummary]) -> Option<ProducerAppend> {
    match summaries {
        [s] if s.has_producer_id() => Some(ProducerAppend {
            producer_id: s.producer_id,
            producer_epoch: s.producer_epoch,
            base_sequence: s.base_sequence,
            record_count: s.record_count,
            transactional: s.transactional,
        }),
        _ => None,
    }
}

/// The transaction check of a produced batch: nothing for a batch outside a
/// transaction; for a transactional one, the request must name its
/// transactional id and the partition must be in the producer's open
/// transaction (KIP-890 verification, done in process). The guard is held
/// until the append is written, so the transaction's markers land after it.
///
/// `verified_elsewhere`: the produce handler had the batch verified by the
/// coordinator on another broker. Decided once per request, there: a batch
/// it did not send for verification (the coordinator was unavailable) must
/// not be taken as verified because the coordinator is elsewhere by the
/// time of the append. When this broker does not coordinate the id (any
/// more, or not yet), the batch is refused with NOT_ENOUGH_REPLICAS, which
/// the producer retries, as Kafka answers a verification that cannot reach
/// the coordinator.
pub fn check_transactional(
    broker: &Broker,
    produce_version: i16,
    transactional_id: Option<&str>,
    verified_elsewhere: bool,
    topic: &str,
    partition: i32,
    producer: Option<&ProducerAppend>,
) -> Result<Option<ProduceGuard>, (i16, String)> {
    let Some(p) = producer.filter(|p| p.transactional) else {
        return Ok(None);
    };
    let Some(id) = transactional_id else {
        return Err((
            code(ResponseError::TransactionalIdAuthorizationFailed),
            "transactional records need the request's transactional id".to_string(),
        ));
    };
    if verified_elsewhere {
        return Ok(None);
    }
    if let Err(n) = broker.owns_transactional_id(id) {
        return Err((
            code(ResponseError::NotEnoughReplicas),
            format!(
                "the coordinator of transaction {id:?} could not verify the batch ({})",
                n.message()
            ),
        ));
    }
    broker
        .txn()
        .verify_produce(id, p.producer_id, p.producer_epoch, topic, partition)
        .map(Some)
        .map_err(|e| {
            let e = e.code();
            (
                txn_error_for_version(ApiKey::Produce, produce_version, e),
                format!(
                    "partition {topic}-{partition} is not part of transaction {id:?} of producer {} epoch {} (error {e})",
                    p.producer_id, p.producer_epoch
                ),
            )
        })
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

// ----- InitProducerId ------------------------------------------------------

pub async fn init_producer_id(
    ctx: &Ctx,
    req: InitProducerIdRequest,
) -> Result<Option<Bytes>, RequestError> {
    let v = ctx.version;
    let producer = match (req.producer_id.0, req.producer_epoch) {
        (-1, -1) => Ok(None),
        (-1, _) | (_, -1) => Err(TxnError::InvalidRequest),
        (p, e) => Ok(Some((p, e))),
    };
    let id = req.transactional_id.map(|t| t.0.to_string());
    // WRITE on the transactional id; an idempotent producer needs
    // IDEMPOTENT_WRITE on the cluster or WRITE on some topic.
    let denied = match id.as_deref() {
        Some(t) if !ctx.allowed(AclOperation::Write, ResourceType::TransactionalId, t) => {
            Some(code(ResponseError::TransactionalIdAuthorizationFailed))
        }
        None if !ctx.allowed_on_cluster(AclOperation::IdempotentWrite)
            && !ctx.allowed_on_some(AclOperation::Write, ResourceType::Topic) =>
        {
            Some(code(ResponseError::ClusterAuthorizationFailed))
        }
        _ => None,
    };
    // Without a transactional id any broker hands out a producer id.
    let not_here = id
        .as_deref()
        .and_then(|t| ctx.broker.owns_transactional_id(t).err());
    let result = match (producer, not_here) {
        _ if denied.is_some() => Err(denied.unwrap_or_default()),
        (Err(e), _) => Err(e.code_for(ApiKey::InitProducerId, v)),
        (Ok(_), Some(n)) => Err(n.code()),
        (Ok(producer), None) => {
            let b = ctx.broker.clone();
            let timeout = req.transaction_timeout_ms;
            blocking(move || {
                b.txn()
                    .init_producer_id(b.as_ref(), id.as_deref(), timeout, producer)
            })
            .await?
            .map_err(|e| e.code_for(ApiKey::InitProducerId, v))
        }
    };
    let mut r = InitProducerIdResponse::default();
    match result {
        Ok((pid, epoch)) => {
            r.producer_id = ProducerId(pid);
            r.producer_epoch = epoch;
        }
        Err(code) => {
            r.error_code = code;
            r.producer_id = ProducerId(-1);
            r.producer_epoch = -1;
        }
    }
    ctx.respond(&r)
}

// ----- AddPartitionsToTxn --------------------------------------------------

/// One transaction of an AddPartitionsToTxn request.
struct AddTxn {
    id: String,
    producer_id: i64,
    epoch: i16,
    verify_only: bool,
    /// A client (v0-3) without WRITE on the transactional id.
    txn_denied: bool,
    /// Topics a client (v0-3) may not write.
    denied_topics: std::collections::HashSet<String>,
    /// (topic, partitions) in request order.
    topics: Vec<(TopicName, Vec<i32>)>,
}

/// Per (topic, partition) error codes of one transaction.
type AddResult = Vec<(TopicName, Vec<(i32, i16)>)>;

fn add_one(b: &Broker, version: i16, t: &AddTxn) -> AddResult {
    // The partition may be hosted by another broker: it must exist.
    let exists = |topic: &str, p: i32| b.topic(topic).is_some_and(|t| t.has_partition(p));
    let all = |code: &mut dyn FnMut(&str, i32) -> i16| -> AddResult {
        t.topics
            .iter()
            .map(|(name, ps)| {
                (
                    name.clone(),
                    ps.iter().map(|&p| (p, code(name, p))).collect(),
                )
            })
            .collect()
    };
    // A client (v0-3) may not write to an internal topic: Kafka leaves
    // those out of the WRITE-authorized topics, so they answer
    // TOPIC_AUTHORIZATION_FAILED; then unknown partitions
    // UNKNOWN_TOPIC_OR_PARTITION. Any such partition fails the whole
    // transaction, the others with OPERATION_NOT_ATTEMPTED.
    if t.txn_denied {
        let c = code(ResponseError::TransactionalIdAuthorizationFailed);
        return all(&mut |_, _| c);
    }
    let refused = |topic: &str, p: i32| -> Option<i16> {
        if t.denied_topics.contains(topic) || (version < 4 && is_internal(topic)) {
            Some(code(ResponseError::TopicAuthorizationFailed))
        } else if !exists(topic, p) {
            Some(code(ResponseError::UnknownTopicOrPartition))
        } else {
            None
        }
    };
    let any_refused = t
        .topics
        .iter()
        .any(|(name, ps)| ps.iter().any(|&p| refused(name, p).is_some()));
    if any_refused {
        return all(&mut |topic, p| {
            refused(topic, p).unwrap_or(code(ResponseError::OperationNotAttempted))
        });
    }
    if let Err(n) = b.owns_transactional_id(&t.id) {
        let c = n.code();
        return all(&mut |_, _| c);
    }
    let tps: Vec<TopicPartition> = t
        .topics
        .iter()
        .flat_map(|(name, ps)| ps.iter().map(|&p| TopicPartition::new(name.0.as_str(), p)))
        .collect();
    let coord = b.txn();
    if t.verify_only {
        match coord.verify_partitions(&t.id, t.producer_id, t.epoch, &tps) {
            Ok(outcomes) => {
                let mut it = outcomes.iter();
                all(&mut |_, _| it.next().map_or(NONE, txn_result_code))
            }
            Err(e) => all(&mut |_, _| e.code()),
        }
    } else {
        let e = match coord.add_partitions(&t.id, t.producer_id, t.epoch, &tps, &[]) {
            Ok(()) => NONE,
            Err(e) => e.code_for(ApiKey::AddPartitionsToTxn, version),
        };
        all(&mut |_, _| e)
    }
}

fn topic_results(res: AddResult) -> Vec<AddPartitionsToTxnTopicResult> {
    res.into_iter()
        .map(|(name, ps)| {
            let mut t = AddPartitionsToTxnTopicResult::default();
            t.name = name;
            t.results_by_partition = ps
                .into_iter()
                .map(|(p, e)| {
                    let mut r = AddPartitionsToTxnPartitionResult::default();
                    r.partition_index = p;
                    r.partition_error_code = e;
                    r
                })
                .collect();
            t
        })
        .collect()
}

pub async fn add_partitions_to_txn(
    ctx: &Ctx,
    req: AddPartitionsToTxnRequest,
) -> Result<Option<Bytes>, RequestError> {
    let v = ctx.version;
    let txns: Vec<AddTxn> = if v < 4 {
        let id = req.v3_and_below_transactional_id.0.to_string();
        vec![AddTxn {
            txn_denied: !ctx.allowed(AclOperation::Write, ResourceType::TransactionalId, &id),
            denied_topics: ctx.denied_topics(
                AclOperation::Write,
                req.v3_and_below_topics.iter().map(|t| t.name.0.as_str()),
            ),
            id,
            producer_id: req.v3_and_below_producer_id.0,
            epoch: req.v3_and_below_producer_epoch,
            verify_only: false,
            topics: req
                .v3_and_below_topics
                .into_iter()
                .map(|t| (t.name, t.partitions))
                .collect(),
        }]
    } else {
        req.transactions
            .into_iter()
            .map(|t| AddTxn {
                id: t.transactional_id.0.to_string(),
                producer_id: t.producer_id.0,
                epoch: t.producer_epoch,
                verify_only: t.verify_only,
                txn_denied: false,
                denied_topics: std::collections::HashSet::new(),
                topics: t
                    .topics
                    .into_iter()
                    .map(|t| (t.name, t.partitions))
                    .collect(),
            })
            .collect()
    };
    // v4+ comes from brokers only (CLUSTER_ACTION).
    if v >= 4 && !ctx.allowed_on_cluster(AclOperation::ClusterAction) {
        let mut r = AddPartitionsToTxnResponse::default();
        r.error_code = code(ResponseError::ClusterAuthorizationFailed);
        return ctx.respond(&r);
    }
    let b = ctx.broker.clone();
    let results = blocking(move || {
        txns.iter()
            .map(|t| (t.id.clone(), add_one(&b, v, t)))
            .collect::<Vec<_>>()
    })
    .await?;
    let mut r = AddPartitionsToTxnResponse::default();
    if v < 4 {
        if let Some((_, res)) = results.into_iter().next() {
            r.results_by_topic_v3_and_below = topic_results(res);
        }
    } else {
        r.results_by_transaction = results
            .into_iter()
            .map(|(id, res)| {
                let mut t = AddPartitionsToTxnResult::default();
                t.transactional_id = TransactionalId(s(&id));
                t.topic_results = topic_results(res);
                t
            })
            .collect();
    }
    ctx.respond(&r)
}

// ----- AddOffsetsToTxn -----------------------------------------------------

pub async fn add_offsets_to_txn(
    ctx: &Ctx,
    req: AddOffsetsToTxnRequest,
) -> Result<Option<Bytes>, RequestError> {
    let v = ctx.version;
    let b = ctx.broker.clone();
    let id = req.transactional_id.0.to_string();
    let group = req.group_id.0.to_string();
    let (pid, epoch) = (req.producer_id.0, req.producer_epoch);
    let mut r = AddOffsetsToTxnResponse::default();
    // WRITE on the transactional id, then READ on the group.
    if !ctx.allowed(AclOperation::Write, ResourceType::TransactionalId, &id) {
        r.error_code = code(ResponseError::TransactionalIdAuthorizationFailed);
        return ctx.respond(&r);
    }
    if !ctx.allowed(AclOperation::Read, ResourceType::Group, &group) {
        r.error_code = code(ResponseError::GroupAuthorizationFailed);
        return ctx.respond(&r);
    }
    if let Err(n) = b.owns_transactional_id(&id) {
        r.error_code = n.code();
        return ctx.respond(&r);
    }
    let res = blocking(move || b.txn().add_partitions(&id, pid, epoch, &[], &[group])).await?;
    r.error_code = match res {
        Ok(()) => NONE,
        Err(e) => e.code_for(ApiKey::AddOffsetsToTxn, v),
    };
    ctx.respond(&r)
}

// ----- TxnOffsetCommit -----------------------------------------------------

/// A partition of a TxnOffsetCommit: its error if decided before the
/// coordinator is asked.
type Decided = (i32, Option<i16>);

pub async fn txn_offset_commit(
    ctx: &Ctx,
    req: TxnOffsetCommitRequest,
) -> Result<Option<Bytes>, RequestError> {
    let v = ctx.version;
    let b = &ctx.broker;
    let group = req.group_id.0.to_string();
    let member_id = req.member_id.to_string();
    let instance_id = req.group_instance_id.as_ref().map(|i| i.to_string());
    // Per partition: Some(code) decided here, None to be committed.
    let mut plan: Vec<(TopicName, Vec<Decided>)> = Vec::with_capacity(req.topics.len());
    let mut offsets = Vec::new();
    // WRITE on the transactional id, then READ on the group (each refuses
    // every partition), then READ on each topic.
    let whole = if !ctx.allowed(
        AclOperation::Write,
        ResourceType::TransactionalId,
        req.transactional_id.0.as_str(),
    ) {
        Some(code(ResponseError::TransactionalIdAuthorizationFailed))
    } else if !ctx.allowed(AclOperation::Read, ResourceType::Group, &group) {
        Some(code(ResponseError::GroupAuthorizationFailed))
    } else {
        None
    };
    for t in &req.topics {
        let denied = whole.or_else(|| {
            (!ctx.allowed(AclOperation::Read, ResourceType::Topic, t.name.0.as_str()))
                .then(|| code(ResponseError::TopicAuthorizationFailed))
        });
        if let Some(c) = denied {
            plan.push((
                t.name.clone(),
                t.partitions
                    .iter()
                    .map(|p| (p.partition_index, Some(c)))
                    .collect(),
            ));
            continue;
        }
        let topic = b.topic(t.name.0.as_str());
        let mut parts = Vec::with_capacity(t.partitions.len());
        for p in &t.partitions {
            let known = topic
                .as_ref()
                .is_some_and(|tp| tp.has_partition(p.partition_index));
            if !known {
                parts.push((
                    p.partition_index,
                    Some(code(ResponseError::UnknownTopicOrPartition)),
                ));
                continue;
            }
            if p.committed_metadata
                .as_ref()
                .is_some_and(|m| m.len() > OFFSET_METADATA_BYTES_MAX)
            {
                parts.push((
                    p.partition_index,
                    Some(code(ResponseError::OffsetMetadataTooLarge)),
                ));
                continue;
            }
            offsets.push(TxnOffset {
                group: group.clone(),
                topic: t.name.0.to_string(),
                partition: p.partition_index,
                offset: p.committed_offset,
                leader_epoch: p.committed_leader_epoch,
                metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
                member_id: member_id.clone(),
                generation_id: req.generation_id,
                instance_id: instance_id.clone(),
            });
            parts.push((p.partition_index, None));
        }
        plan.push((t.name.clone(), parts));
    }
    let outcome = if offsets.is_empty() {
        NONE
    } else if group.is_empty() {
        // Kafka's group coordinator refuses an empty group id before it
        // looks at the transaction.
        code(ResponseError::InvalidGroupId)
    } else if let Err(n) = b.owns_group(&group) {
        n.code()
    } else {
        let b = b.clone();
        let id = req.transactional_id.0.to_string();
        let (pid, epoch, generation) = (req.producer_id.0, req.producer_epoch, req.generation_id);
        let res = blocking(move || {
            if b.txn_coordinated_elsewhere(&id) {
                // This broker is the group's coordinator only: it keeps the
                // offsets until the coordinator's marker settles them.
                return b.txn().txn_offset_commit_remote(
                    pid,
                    epoch,
                    &group,
                    &member_id,
                    instance_id.as_deref(),
                    generation,
                    offsets,
                );
            }
            b.txn().txn_offset_commit(
                &id,
                pid,
                epoch,
                &group,
                &member_id,
                instance_id.as_deref(),
                generation,
                offsets,
            )
        })
        .await?;
        match res {
            Ok(()) => NONE,
            Err(e) => e.code_for(ApiKey::TxnOffsetCommit, v),
        }
    };
    let mut r = TxnOffsetCommitResponse::default();
    // Kafka answers partitions, grouped by topic: a topic that names none
    // is not answered.
    r.topics = plan
        .into_iter()
        .filter(|(_, parts)| !parts.is_empty())
        .map(|(name, parts)| {
            let mut t = TxnOffsetCommitResponseTopic::default();
            t.name = name;
            t.partitions = parts
                .into_iter()
                .map(|(p, c)| {
                    let mut rp = TxnOffsetCommitResponsePartition::default();
                    rp.partition_index = p;
                    rp.error_code = c.unwrap_or(outcome);
                    rp
                })
                .collect();
            t
        })
        .collect();
    ctx.respond(&r)
}

// ----- EndTxn ----------------------------------------------------------------

pub async fn end_txn(ctx: &Ctx, req: EndTxnRequest) -> Result<Option<Bytes>, RequestError> {
    let v = ctx.version;
    let b = ctx.broker.clone();
    let id = req.transactional_id.0.to_string();
    let (pid, epoch, commit) = (req.producer_id.0, req.producer_epoch, req.committed);
    let mut r = EndTxnResponse::default();
    if !ctx.allowed(AclOperation::Write, ResourceType::TransactionalId, &id) {
        r.error_code = code(ResponseError::TransactionalIdAuthorizationFailed);
        return ctx.respond(&r);
    }
    if let Err(n) = b.owns_transactional_id(&id) {
        r.error_code = n.code();
        return ctx.respond(&r);
    }
    let res = blocking(move || b.txn().end_txn(b.as_ref(), &id, pid, epoch, commit)).await?;
    r.error_code = match res {
        Ok(()) => NONE,
        Err(e) => e.code_for(ApiKey::EndTxn, v),
    };
    ctx.respond(&r)
}

// ----- DescribeTransactions / ListTransactions -------------------------------

pub fn describe_transactions(
    ctx: &Ctx,
    req: DescribeTransactionsRequest,
) -> Result<Option<Bytes>, RequestError> {
    let b = &ctx.broker;
    let coord = b.txn();
    let mut r = DescribeTransactionsResponse::default();
    for id in req.transactional_ids {
        let mut st = TransactionState::default();
        if !ctx.allowed(
            AclOperation::Describe,
            ResourceType::TransactionalId,
            id.0.as_str(),
        ) {
            st.error_code = code(ResponseError::TransactionalIdAuthorizationFailed);
            st.transactional_id = id;
            r.transaction_states.push(st);
            continue;
        }
        let described = b
            .owns_transactional_id(id.0.as_str())
            .map_err(|n| n.code())
            .and_then(|()| coord.describe(id.0.as_str()).map_err(|e| e.code()));
        match described {
            Err(code) => st.error_code = code,
            Ok(rec) => {
                st.transaction_state = StrBytes::from_static_str(rec.state.name());
                st.transaction_timeout_ms = rec.timeout_ms;
                st.transaction_start_time_ms = rec.start_ms;
                st.producer_id = ProducerId(rec.producer_id);
                st.producer_epoch = rec.producer_epoch;
                let mut by_topic: BTreeMap<String, Vec<i32>> = BTreeMap::new();
                for tp in &rec.partitions {
                    by_topic
                        .entry(tp.topic.clone())
                        .or_default()
                        .push(tp.partition);
                }
                // Kafka's transaction holds the offsets partition of each
                // group AddOffsetsToTxn added.
                for g in &rec.groups {
                    let p = b.offsets_partition(g);
                    let ps = by_topic
                        .entry(crate::topics::CONSUMER_OFFSETS_TOPIC.to_string())
                        .or_default();
                    if !ps.contains(&p) {
                        ps.push(p);
                    }
                }
                // Topics the client may not describe are left out.
                st.topics = by_topic
                    .into_iter()
                    .filter(|(topic, _)| {
                        ctx.allowed(AclOperation::Describe, ResourceType::Topic, topic)
                    })
                    .map(|(topic, partitions)| {
                        let mut t = TopicData::default();
                        t.topic = TopicName(s(&topic));
                        t.partitions = partitions;
                        t
                    })
                    .collect();
            }
        }
        st.transactional_id = id;
        r.transaction_states.push(st);
    }
    ctx.respond(&r)
}

pub fn list_transactions(
    ctx: &Ctx,
    req: ListTransactionsRequest,
) -> Result<Option<Bytes>, RequestError> {
    let states: Vec<String> = req.state_filters.iter().map(|s| s.to_string()).collect();
    let pids: Vec<i64> = req.producer_id_filters.iter().map(|p| p.0).collect();
    let duration = if ctx.version >= 1 {
        req.duration_filter
    } else {
        -1
    };
    let (listed, unknown) = ctx.broker.txn().list(&states, &pids, duration);
    let mut r = ListTransactionsResponse::default();
    r.unknown_state_filters = unknown.iter().map(|u| s(u)).collect();
    r.transaction_states = listed
        .into_iter()
        .filter(|l| {
            ctx.allowed(
                AclOperation::Describe,
                ResourceType::TransactionalId,
                &l.transactional_id,
            )
        })
        .map(|l| {
            let mut t = ListedState::default();
            t.transactional_id = TransactionalId(s(&l.transactional_id));
            t.producer_id = ProducerId(l.producer_id);
            t.transaction_state = StrBytes::from_static_str(l.state.name());
            t
        })
        .collect();
    ctx.respond(&r)
}

// ----- DescribeProducers -----------------------------------------------------

pub async fn describe_producers(
    ctx: &Ctx,
    req: DescribeProducersRequest,
) -> Result<Option<Bytes>, RequestError> {
    let b = ctx.broker.clone();
    // READ on each topic, else TOPIC_AUTHORIZATION_FAILED per partition.
    let denied = ctx.denied_topics(
        AclOperation::Read,
        req.topics.iter().map(|t| t.name.0.as_str()),
    );
    let topics = blocking(move || {
        req.topics
            .into_iter()
            .map(|t| {
                let name = t.name.0.to_string();
                let topic_error = if denied.contains(&name) {
                    Some((code(ResponseError::TopicAuthorizationFailed), None))
                } else {
                    match validate_topic_name(&name) {
                        Err(why) => Some((code(ResponseError::InvalidTopicException), Some(why))),
                        Ok(()) => None,
                    }
                };
                let topic = b.topic(&name);
                let image = b.image();
                let mut tr = TopicResponse::default();
                tr.partitions = t
                    .partition_indexes
                    .iter()
                    .map(|&p| {
                        let mut pr = PartitionResponse::default();
                        pr.partition_index = p;
                        let slot = route(&b, image.as_deref(), topic.as_ref(), p, NO_EPOCH)
                            .map(|r| r.slot);
                        match (&topic_error, slot) {
                            (Some((e, why)), _) => {
                                pr.error_code = *e;
                                pr.error_message = why.as_deref().map(s);
                            }
                            (None, Err(m)) => {
                                pr.error_code = code(m.error);
                            }
                            (None, Ok(slot)) => {
                                let st = slot.log.producer_state();
                                pr.active_producers = st
                                    .producers
                                    .iter()
                                    .map(|(pid, e)| {
                                        let mut ps = ProducerState::default();
                                        ps.producer_id = ProducerId(*pid);
                                        ps.producer_epoch = i32::from(e.epoch);
                                        ps.last_sequence = e.last_seq().unwrap_or(-1);
                                        ps.last_timestamp = e.last_timestamp_ms;
                                        // Kafka starts a producer's coordinator
                                        // epoch at -1 and sets it with a
                                        // transaction marker: one no
                                        // transactional id owns has none.
                                        ps.coordinator_epoch =
                                            if b.txn().list(&[], &[*pid], -1).0.is_empty() {
                                                -1
                                            } else {
                                                e.coordinator_epoch
                                            };
                                        ps.current_txn_start_offset = e
                                            .txn_first_offset
                                            .and_then(|o| i64::try_from(o).ok())
                                            .unwrap_or(-1);
                                        ps
                                    })
                                    .collect();
                            }
                        }
                        pr
                    })
                    .collect();
                tr.name = t.name;
                tr
            })
            .collect::<Vec<_>>()
    })
    .await?;
    let mut r = DescribeProducersResponse::default();
    r.topics = topics;
    ctx.respond(&r)
}
