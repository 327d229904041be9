//! DeleteRecords and ElectLeaders: operations on the existing partitions
//! of a topic (moving the log start offset; leader elections, decided by
//! the metadata quorum).

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use es_auth::acl::AclOperation;
use kafka_protocol::messages::{
    delete_records_response, elect_leaders_response, DeleteRecordsRequest, DeleteRecordsResponse,
    ElectLeadersRequest, ElectLeadersResponse, TopicName,
};

use es_meta::records::{code as meta_code, ElectionType, MetaRequest, TopicPartitions};

use super::s;
use crate::errors::{code, ResponseError};
use crate::handlers::authz::CLUSTER_AUTHORIZATION_FAILED;
use crate::handlers::route::{route, NO_EPOCH};
use crate::handlers::{blocking, controller_deadline_passed, Ctx, RequestError};
use crate::topics::is_internal;

/// DeleteRecords (v0-2): moves each partition's log start offset forward
/// (durably, in es-storage); offset -1 means "up to the high watermark".
/// Answers the new low watermark, or OFFSET_OUT_OF_RANGE past the high
/// watermark, as Kafka does. A topic whose `cleanup.policy` lacks `delete`
/// (compact only) answers POLICY_VIOLATION, as Kafka's
/// `Partition.deleteRecordsOnLeader` does; an internal topic's partitions
/// INVALID_TOPIC_EXCEPTION, as Kafka's `ReplicaManager` refuses them first.
pub async fn delete_records(
    ctx: &Ctx,
    req: DeleteRecordsRequest,
) -> Result<Option<Bytes>, RequestError> {
    let b = ctx.broker.clone();
    // Kafka reads the request into a map by topic partition: a partition
    // named twice is answered once (the last offset given wins), a topic
    // with no partitions not at all.
    let mut topics: Vec<(TopicName, Vec<(i32, i64)>)> = Vec::new();
    let mut topic_at: HashMap<TopicName, usize> = HashMap::new();
    let mut partition_at: HashMap<(usize, i32), usize> = HashMap::new();
    for t in req.topics {
        for p in t.partitions {
            let at = *topic_at.entry(t.name.clone()).or_insert_with(|| {
                topics.push((t.name.clone(), Vec::new()));
                topics.len() - 1
            });
            let parts = &mut topics[at].1;
            match partition_at.get(&(at, p.partition_index)) {
                Some(&i) => parts[i].1 = p.offset,
                None => {
                    partition_at.insert((at, p.partition_index), parts.len());
                    parts.push((p.partition_index, p.offset));
                }
            }
        }
    }
    // DELETE on each topic, before its existence is looked at.
    let denied = ctx.denied_topics(
        AclOperation::Delete,
        topics.iter().map(|(name, _)| name.0.as_str()),
    );
    let results = blocking(move || {
        let image = b.image();
        let mut out = Vec::with_capacity(topics.len());
        for (name, partitions) in topics {
            let topic = b.topic(name.0.as_str());
            let denied = denied.contains(name.0.as_str());
            let mut tr = delete_records_response::DeleteRecordsTopicResult::default();
            tr.name = name;
            for (partition_index, offset) in partitions {
                let p = Requested {
                    partition_index,
                    offset,
                };
                let mut pr = delete_records_response::DeleteRecordsPartitionResult::default();
                pr.partition_index = p.partition_index;
                pr.low_watermark = -1;
                if denied {
                    pr.error_code = code(ResponseError::TopicAuthorizationFailed);
                    tr.partitions.push(pr);
                    continue;
                }
                let routed = route(&b, image.as_deref(), topic.as_ref(), p.partition_index, NO_EPOCH)
                    .map(|r| r.slot);
                match routed {
                    Err(m) => pr.error_code = code(m.error),
                    Ok(_) if is_internal(tr.name.0.as_str()) => {
                        pr.error_code = code(ResponseError::InvalidTopicException);
                    }
                    Ok(_) if topic.as_ref().is_some_and(|t| !t.config().cleanup_policy().delete) => {
                        pr.error_code = code(ResponseError::PolicyViolation);
                    }
                    Ok(slot) => {
                        let target = if p.offset == -1 { Some(slot.log.high_watermark()) } else { u64::try_from(p.offset).ok() };
                        match target.map(|o| slot.log.delete_records_before(o)) {
                            None => pr.error_code = code(ResponseError::OffsetOutOfRange),
                            Some(Ok(low)) => pr.low_watermark = low as i64,
                            Some(Err(e)) => {
                                tracing::info!(topic = %tr.name.0, partition = p.partition_index, error = %e, "DeleteRecords refused");
                                pr.error_code = crate::errors::storage_error_code(&e);
                            }
                        }
                    }
                }
                tr.partitions.push(pr);
            }
            out.push(tr);
        }
        out
    })
    .await?;
    let mut r = DeleteRecordsResponse::default();
    r.topics = results;
    ctx.respond(&r)
}

/// One partition of a DeleteRecords request, after merging duplicates.
struct Requested {
    partition_index: i32,
    offset: i64,
}

/// ElectLeaders (v0-2): one `elect_leaders.v1` entry through the metadata
/// quorum, answered per partition with Kafka's codes: ELECTION_NOT_NEEDED
/// (preferred: the first replica leads already; unclean: the partition has
/// a leader), PREFERRED_LEADER_NOT_AVAILABLE / ELIGIBLE_LEADERS_NOT_AVAILABLE
/// (no replica may be elected), UNKNOWN_TOPIC_OR_PARTITION, or NONE when a
/// leader was elected. "All partitions" (null) lists every topic, each with
/// only the partitions an election was tried for and needed (Kafka 4.4
/// leaves out those not needing one), so a single node lists every topic
/// with no partitions.
pub async fn elect_leaders(
    ctx: &Ctx,
    req: ElectLeadersRequest,
) -> Result<Option<Bytes>, RequestError> {
    let b = &ctx.broker;
    let mut r = ElectLeadersResponse::default();
    // Refused whole as Kafka does: an election type it does not know
    // (preferred 0, unclean 1) is INVALID_REQUEST; a deadline already past
    // (timeout_ms of 0 or less) REQUEST_TIMED_OUT from its controller.
    let whole = if !ctx.allowed_on_cluster(AclOperation::Alter) {
        Some((
            code(ResponseError::ClusterAuthorizationFailed),
            CLUSTER_AUTHORIZATION_FAILED.to_string(),
        ))
    } else if ctx.version >= 1 && !(0..=1).contains(&req.election_type) {
        Some((
            code(ResponseError::InvalidRequest),
            format!("Unknown election type {}", req.election_type),
        ))
    } else {
        controller_deadline_passed(req.timeout_ms).map(|(e, m)| (code(e), m.to_string()))
    };
    if let Some((e, message)) = whole {
        return ctx.respond(&elect_refused(ctx.version, req, e, &message));
    }
    // v0 has no election type: preferred.
    let election = if ctx.version >= 1 && req.election_type == 1 {
        ElectionType::Unclean
    } else {
        ElectionType::Preferred
    };
    let partitions = req.topic_partitions.as_ref().map(|l| {
        l.iter()
            .map(|t| TopicPartitions {
                topic: t.topic.0.to_string(),
                partitions: t.partitions.clone(),
            })
            .collect()
    });
    let results = match b
        .propose_partitions(MetaRequest::ElectLeaders {
            election,
            partitions,
        })
        .await
    {
        Ok(results) => results,
        Err(e) => {
            tracing::info!(code = e.code, message = %e.message, "ElectLeaders not applied");
            return ctx.respond(&elect_refused(ctx.version, req, e.code, &e.message));
        }
    };
    let mut results = results.into_iter();
    let partition_result = |m: es_meta::records::PartitionResult| {
        let mut pr = elect_leaders_response::PartitionResult::default();
        pr.partition_id = m.partition;
        pr.error_code = m.error_code;
        pr.error_message = m
            .message
            .or_else(|| election_message(m.error_code).map(str::to_string))
            .map(s);
        pr
    };
    match req.topic_partitions {
        // Results come in request order, one per named partition.
        Some(named) => {
            for t in named {
                let mut res = elect_leaders_response::ReplicaElectionResult::default();
                res.topic = t.topic;
                for _ in &t.partitions {
                    if let Some(m) = results.next() {
                        res.partition_result.push(partition_result(m));
                    }
                }
                r.replica_election_results.push(res);
            }
        }
        None => {
            let mut by_topic: BTreeMap<String, Vec<_>> = BTreeMap::new();
            for m in results {
                by_topic.entry(m.topic.clone()).or_default().push(m);
            }
            for t in b.topics() {
                let mut res = elect_leaders_response::ReplicaElectionResult::default();
                res.topic = TopicName(s(t.name.clone()));
                for m in by_topic.remove(&t.name).unwrap_or_default() {
                    res.partition_result.push(partition_result(m));
                }
                r.replica_election_results.push(res);
            }
        }
    }
    ctx.respond(&r)
}

/// Kafka's default message for an election's error code (the metadata
/// gives none for these).
fn election_message(error_code: i16) -> Option<&'static str> {
    match error_code {
        meta_code::ELECTION_NOT_NEEDED => Some("Leader election not needed for topic partition."),
        meta_code::PREFERRED_LEADER_NOT_AVAILABLE => {
            Some("The preferred leader was not available.")
        }
        meta_code::ELIGIBLE_LEADERS_NOT_AVAILABLE => {
            Some("Eligible topic partition leaders are not available.")
        }
        _ => None,
    }
}

/// An ElectLeaders refused whole: the code on the response (v1+) and on
/// every named partition.
fn elect_refused(
    version: i16,
    req: ElectLeadersRequest,
    e: i16,
    message: &str,
) -> ElectLeadersResponse {
    let mut r = ElectLeadersResponse::default();
    if version >= 1 {
        r.error_code = e;
    }
    for t in req.topic_partitions.into_iter().flatten() {
        let mut res = elect_leaders_response::ReplicaElectionResult::default();
        res.topic = t.topic;
        for p in t.partitions {
            let mut pr = elect_leaders_response::PartitionResult::default();
            pr.partition_id = p;
            pr.error_code = e;
            pr.error_message = Some(s(message));
            res.partition_result.push(pr);
        }
        r.replica_election_results.push(res);
    }
    r
}
