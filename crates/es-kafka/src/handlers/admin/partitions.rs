//! DeleteRecords and ElectLeaders: operations on the existing partitions
//! of a topic (moving the log start offset; the leader elections a single
//! node never needs).

use std::collections::HashMap;

use bytes::Bytes;
use kafka_protocol::messages::{
    delete_records_response, elect_leaders_response, DeleteRecordsRequest, DeleteRecordsResponse,
    ElectLeadersRequest, ElectLeadersResponse, TopicName,
};

use super::s;
use crate::errors::{code, ResponseError};
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
    let results = blocking(move || {
        let image = b.image();
        let mut out = Vec::with_capacity(topics.len());
        for (name, partitions) in topics {
            let topic = b.topic(name.0.as_str());
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

/// ElectLeaders (v0-2): this node leads every partition and is every
/// partition's preferred (and only) replica, so no election is ever needed.
/// Named partitions answer ELECTION_NOT_NEEDED (or UNKNOWN_TOPIC_OR_PARTITION);
/// "all partitions" (null) lists every topic with no partitions, as Kafka
/// 4.4 lists only the partitions it actually elected.
pub fn elect_leaders(ctx: &Ctx, req: ElectLeadersRequest) -> Result<Option<Bytes>, RequestError> {
    let b = &ctx.broker;
    let mut r = ElectLeadersResponse::default();
    // Refused whole as Kafka does: an election type it does not know
    // (preferred 0, unclean 1) is INVALID_REQUEST; a deadline already past
    // (timeout_ms of 0 or less) REQUEST_TIMED_OUT from its controller.
    let whole = if ctx.version >= 1 && !(0..=1).contains(&req.election_type) {
        Some((
            ResponseError::InvalidRequest,
            format!("Unknown election type {}", req.election_type),
        ))
    } else {
        controller_deadline_passed(req.timeout_ms).map(|(e, m)| (e, m.to_string()))
    };
    if let Some((e, message)) = whole {
        if ctx.version >= 1 {
            r.error_code = code(e);
        }
        for t in req.topic_partitions.into_iter().flatten() {
            let mut res = elect_leaders_response::ReplicaElectionResult::default();
            res.topic = t.topic;
            for p in t.partitions {
                let mut pr = elect_leaders_response::PartitionResult::default();
                pr.partition_id = p;
                pr.error_code = code(e);
                pr.error_message = Some(s(message.clone()));
                res.partition_result.push(pr);
            }
            r.replica_election_results.push(res);
        }
        return ctx.respond(&r);
    }
    let Some(named) = req.topic_partitions else {
        for t in b.topics() {
            let mut res = elect_leaders_response::ReplicaElectionResult::default();
            res.topic = TopicName(s(t.name.clone()));
            r.replica_election_results.push(res);
        }
        return ctx.respond(&r);
    };
    for t in named {
        let topic = b.topic(t.topic.0.as_str());
        let mut res = elect_leaders_response::ReplicaElectionResult::default();
        res.topic = t.topic;
        for p in t.partitions {
            let mut pr = elect_leaders_response::PartitionResult::default();
            pr.partition_id = p;
            let (error, message) = match topic.as_ref().filter(|t| t.has_partition(p)) {
                Some(_) => (
                    ResponseError::ElectionNotNeeded,
                    "Leader election not needed for topic partition.",
                ),
                None => (
                    ResponseError::UnknownTopicOrPartition,
                    "The partition does not exist.",
                ),
            };
            pr.error_code = code(error);
            pr.error_message = Some(s(message));
            res.partition_result.push(pr);
        }
        r.replica_election_results.push(res);
    }
    ctx.respond(&r)
}
