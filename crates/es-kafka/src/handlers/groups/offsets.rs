//! The offset APIs: OffsetCommit (v2-9), OffsetFetch (v1-9, one group or a
//! batch, with `require_stable`'s UNSTABLE_OFFSET_COMMIT for pending
//! transactional offsets) and OffsetDelete (v0). Each takes the connection's
//! turn for its state change and waits for its group's document to be
//! durable after releasing it. A group another broker coordinates answers
//! NOT_COORDINATOR where its coordinator's errors go: every partition sent
//! to the coordinator (OffsetCommit), the group (OffsetFetch; v1 every
//! partition), the request (OffsetDelete).

use bytes::Bytes;
use es_auth::acl::{AclOperation, ResourceType};
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{
    GroupId, OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest, OffsetDeleteResponse,
    OffsetFetchRequest, OffsetFetchResponse, TopicName,
};
use uuid::Uuid;

use super::{group_id, s};
use crate::broker::Broker;
use crate::errors::{code, group_code, group_result_code, ResponseError, NONE};
use crate::groups::coordinator::{
    CommitPartition, CommitRequest, CommitTopic, DurableWait, FetchedTopic,
};
use crate::groups::error::GroupError;
use crate::handlers::{Ctx, RequestError};
use crate::turn::Turn;

pub async fn offset_commit(
    ctx: &Ctx,
    req: OffsetCommitRequest,
    mut turn: Turn,
) -> Result<Option<Bytes>, RequestError> {
    let v = ctx.version;
    let b = &ctx.broker;
    let gid = group_id(&req.group_id);
    // READ on the group (else every partition is refused), then READ on
    // each topic, before its existence is looked at.
    let group_denied = !ctx.allowed(AclOperation::Read, ResourceType::Group, &gid);
    // Per partition: Some(code) decided here, None goes to the coordinator.
    let mut decided: Vec<Vec<Option<i16>>> = Vec::with_capacity(req.topics.len());
    let mut topics: Vec<CommitTopic> = Vec::new();
    let mut slots: Vec<(usize, usize)> = Vec::new();
    for (ti, t) in req.topics.iter().enumerate() {
        let name = t.name.0.to_string();
        let denied = if group_denied {
            Some(code(ResponseError::GroupAuthorizationFailed))
        } else if !ctx.allowed(AclOperation::Read, ResourceType::Topic, &name) {
            Some(code(ResponseError::TopicAuthorizationFailed))
        } else {
            None
        };
        if let Some(c) = denied {
            decided.push(vec![Some(c); t.partitions.len()]);
            continue;
        }
        let topic = b.topic(&name);
        let mut row = Vec::with_capacity(t.partitions.len());
        let mut ct = CommitTopic {
            name: name.clone(),
            topic_id: topic.as_ref().map_or_else(Uuid::nil, |x| x.id),
            partitions: Vec::new(),
        };
        for (pi, p) in t.partitions.iter().enumerate() {
            // Known to the cluster; the partition need not be hosted here.
            let exists = topic
                .as_ref()
                .is_some_and(|x| x.has_partition(p.partition_index));
            if exists {
                row.push(None);
                slots.push((ti, pi));
                ct.partitions.push(CommitPartition {
                    partition: p.partition_index,
                    offset: p.committed_offset,
                    leader_epoch: if v >= 6 { p.committed_leader_epoch } else { -1 },
                    metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
                });
            } else {
                row.push(Some(code(ResponseError::UnknownTopicOrPartition)));
            }
        }
        if !ct.partitions.is_empty() {
            topics.push(ct);
        }
        decided.push(row);
    }
    turn.wait().await;
    let mut wait: Option<DurableWait> = None;
    if !topics.is_empty() {
        let cr = CommitRequest {
            group_id: gid,
            generation_id_or_member_epoch: req.generation_id_or_member_epoch,
            member_id: req.member_id.to_string(),
            group_instance_id: if v >= 7 {
                req.group_instance_id.as_ref().map(|i| i.to_string())
            } else {
                None
            },
            version: v,
            transactional: false,
            topics,
        };
        let committed = b
            .owns_group(&cr.group_id)
            .map_err(GroupError::from)
            .and_then(|()| b.groups().commit(cr));
        let codes: Vec<i16> = match committed {
            Err(e) => vec![e.code(); slots.len()],
            Ok(outcome) => {
                wait = outcome.wait;
                outcome
                    .errors
                    .iter()
                    .flatten()
                    .map(group_result_code)
                    .collect()
            }
        };
        for ((ti, pi), c) in slots.iter().zip(codes) {
            decided[*ti][*pi] = Some(c);
        }
    }
    turn.finish();
    if let Some(w) = wait {
        if let Err(e) = w.wait().await {
            for (ti, pi) in &slots {
                if decided[*ti][*pi] == Some(NONE) {
                    decided[*ti][*pi] = Some(e.code());
                }
            }
        }
    }
    let mut r = OffsetCommitResponse::default();
    r.topics = req
        .topics
        .iter()
        .zip(decided)
        .map(|(t, row)| {
            let mut rt = OffsetCommitResponseTopic::default();
            rt.name = t.name.clone();
            rt.partitions = t
                .partitions
                .iter()
                .zip(row)
                .map(|(p, c)| {
                    let mut rp = OffsetCommitResponsePartition::default();
                    rp.partition_index = p.partition_index;
                    rp.error_code = c.unwrap_or(code(ResponseError::UnknownServerError));
                    rp
                })
                .collect();
            rt
        })
        // Kafka's response builder adds a topic with its first partition:
        // a topic that lists none is not in the answer.
        .filter(|rt| !rt.partitions.is_empty())
        .collect();
    ctx.respond(&r)
}

/// One group of an OffsetFetch, answered.
struct FetchGroup {
    group_id: GroupId,
    error: Option<GroupError>,
    topics: Vec<FetchedTopic>,
}

pub async fn offset_fetch(
    ctx: &Ctx,
    req: OffsetFetchRequest,
    mut turn: Turn,
) -> Result<Option<Bytes>, RequestError> {
    let v = ctx.version;
    let b = ctx.broker.clone();
    let coord = b.groups();
    // (group id, topics or None for all, member id and epoch for v9+).
    type Wanted = (
        GroupId,
        Option<Vec<(String, Vec<i32>)>>,
        Option<(String, i32)>,
    );
    let wanted: Vec<Wanted> = if v >= 8 {
        req.groups
            .iter()
            .map(|g| {
                let topics = g.topics.as_ref().map(|ts| {
                    ts.iter()
                        .map(|t| (t.name.0.to_string(), t.partition_indexes.clone()))
                        .collect()
                });
                let member = if v >= 9 && (g.member_id.is_some() || g.member_epoch >= 0) {
                    Some((
                        g.member_id
                            .as_ref()
                            .map(|m| m.to_string())
                            .unwrap_or_default(),
                        g.member_epoch,
                    ))
                } else {
                    None
                };
                (g.group_id.clone(), topics, member)
            })
            .collect()
    } else {
        let topics = req.topics.as_ref().map(|ts| {
            ts.iter()
                .map(|t| (t.name.0.to_string(), t.partition_indexes.clone()))
                .collect()
        });
        vec![(req.group_id.clone(), topics, None)]
    };
    // v7+: the client would rather retry than see an offset a transaction
    // has committed but not yet completed.
    let require_stable = v >= 7 && req.require_stable;
    turn.wait().await;
    let topic_id = |name: &str| b.topic(name).map(|t| t.id);
    let mut answered: Vec<FetchGroup> = Vec::with_capacity(wanted.len());
    let mut waits: Vec<(usize, DurableWait)> = Vec::new();
    let describable = |t: &str| ctx.allowed(AclOperation::Describe, ResourceType::Topic, t);
    for (gid, topics, member) in wanted {
        let name = group_id(&gid);
        // DESCRIBE on the group; named topics the client may not describe
        // are answered TOPIC_AUTHORIZATION_FAILED after the others, and
        // left out of an all-topics answer.
        if !ctx.allowed(AclOperation::Describe, ResourceType::Group, &name) {
            answered.push(FetchGroup {
                group_id: gid,
                error: Some(GroupError::GroupAuthorizationFailed),
                topics: Vec::new(),
            });
            continue;
        }
        let all_topics = topics.is_none();
        let (topics, denied): (Option<Vec<_>>, Vec<_>) = match topics {
            None => (None, Vec::new()),
            Some(ts) => {
                let (ok, no): (Vec<_>, Vec<_>) = ts
                    .into_iter()
                    .partition(|(t, _): &(String, Vec<i32>)| describable(t));
                (Some(ok), no)
            }
        };
        let member_ref = member.as_ref().map(|(m, e)| (m.as_str(), *e));
        let fetched = b
            .owns_group(&name)
            .map_err(GroupError::from)
            .and_then(|()| coord.fetch_offsets(&name, topics, member_ref, &topic_id))
            .map(|(mut topics, wait)| {
                if all_topics {
                    topics.retain(|t| describable(&t.name));
                }
                topics.extend(denied.into_iter().map(|(t, ps)| {
                    FetchedTopic {
                        name: t,
                        partitions: ps
                            .into_iter()
                            .map(|p| crate::groups::coordinator::FetchedPartition {
                                partition: p,
                                offset: -1,
                                leader_epoch: -1,
                                metadata: String::new(),
                                error: Some(GroupError::TopicAuthorizationFailed),
                            })
                            .collect(),
                    }
                }));
                (topics, wait)
            });
        match fetched {
            Ok((mut topics, wait)) => {
                if require_stable {
                    mark_unstable(&b, &name, &mut topics);
                }
                if let Some(w) = wait {
                    waits.push((answered.len(), w));
                }
                answered.push(FetchGroup {
                    group_id: gid,
                    error: None,
                    topics,
                });
            }
            Err(e) => answered.push(FetchGroup {
                group_id: gid,
                error: Some(e),
                topics: Vec::new(),
            }),
        }
    }
    turn.finish();
    for (i, w) in waits {
        if let Err(e) = w.wait().await {
            answered[i].error = Some(e);
            answered[i].topics.clear();
        }
    }
    let mut r = OffsetFetchResponse::default();
    if v >= 8 {
        r.groups = answered
            .into_iter()
            .map(|g| {
                let mut rg = OffsetFetchResponseGroup::default();
                rg.group_id = g.group_id;
                rg.error_code = group_code(&g.error);
                rg.topics = g
                    .topics
                    .into_iter()
                    .map(|t| {
                        let mut rt = OffsetFetchResponseTopics::default();
                        rt.name = TopicName(s(t.name));
                        rt.partitions = t
                            .partitions
                            .into_iter()
                            .map(|p| {
                                let mut rp = OffsetFetchResponsePartitions::default();
                                rp.partition_index = p.partition;
                                rp.committed_offset = p.offset;
                                rp.committed_leader_epoch = p.leader_epoch;
                                rp.metadata = Some(s(p.metadata));
                                rp.error_code = group_code(&p.error);
                                rp
                            })
                            .collect();
                        rt
                    })
                    .collect();
                rg
            })
            .collect();
    } else if let Some(g) = answered.into_iter().next() {
        if v >= 2 {
            r.error_code = group_code(&g.error);
        }
        let group_error = g.error;
        let mut topics = g.topics;
        if group_error.is_some() && v < 2 {
            // v1 has no group-level error: every requested partition gets it.
            topics = req
                .topics
                .iter()
                .flatten()
                .map(|t| FetchedTopic {
                    name: t.name.0.to_string(),
                    partitions: t
                        .partition_indexes
                        .iter()
                        .map(|p| crate::groups::coordinator::FetchedPartition {
                            partition: *p,
                            offset: -1,
                            leader_epoch: -1,
                            metadata: String::new(),
                            error: group_error.clone(),
                        })
                        .collect(),
                })
                .collect();
        }
        r.topics = topics
            .into_iter()
            .map(|t| {
                let mut rt = OffsetFetchResponseTopic::default();
                rt.name = TopicName(s(t.name));
                rt.partitions = t
                    .partitions
                    .into_iter()
                    .map(|p| {
                        let mut rp = OffsetFetchResponsePartition::default();
                        rp.partition_index = p.partition;
                        rp.committed_offset = p.offset;
                        if v >= 5 {
                            rp.committed_leader_epoch = p.leader_epoch;
                        }
                        rp.metadata = Some(s(p.metadata));
                        rp.error_code = group_code(&p.error);
                        rp
                    })
                    .collect();
                rt
            })
            .collect();
    }
    ctx.respond(&r)
}

/// OffsetFetch with `require_stable`: a partition with a pending
/// transactional offset (TxnOffsetCommit of a transaction not yet ended)
/// answers UNSTABLE_OFFSET_COMMIT and no offset, as Kafka's
/// `OffsetMetadataManager` does, and the client retries.
fn mark_unstable(b: &Broker, group: &str, topics: &mut [FetchedTopic]) {
    for t in topics {
        for p in &mut t.partitions {
            if p.error.is_none() && b.txn().has_pending_offset(group, &t.name, p.partition) {
                p.error = Some(GroupError::UnstableOffsetCommit);
                p.offset = -1;
                p.leader_epoch = -1;
                p.metadata = String::new();
            }
        }
    }
}

pub async fn offset_delete(
    ctx: &Ctx,
    req: OffsetDeleteRequest,
    mut turn: Turn,
) -> Result<Option<Bytes>, RequestError> {
    let b = &ctx.broker;
    let gid = group_id(&req.group_id);
    // Per partition: Some(code) decided here, None goes to the coordinator.
    let mut decided: Vec<Vec<Option<i16>>> = Vec::with_capacity(req.topics.len());
    let mut asked: Vec<(String, Vec<i32>)> = Vec::new();
    let mut slots: Vec<Vec<(usize, usize)>> = Vec::new();
    for (ti, t) in req.topics.iter().enumerate() {
        let name = t.name.0.to_string();
        // READ on the topic, before its existence is looked at.
        if !ctx.allowed(AclOperation::Read, ResourceType::Topic, &name) {
            decided.push(vec![
                Some(code(ResponseError::TopicAuthorizationFailed));
                t.partitions.len()
            ]);
            continue;
        }
        let topic = b.topic(&name);
        let mut row = Vec::with_capacity(t.partitions.len());
        let mut parts = Vec::new();
        let mut where_ = Vec::new();
        for (pi, p) in t.partitions.iter().enumerate() {
            if topic
                .as_ref()
                .is_some_and(|x| x.has_partition(p.partition_index))
            {
                row.push(None);
                parts.push(p.partition_index);
                where_.push((ti, pi));
            } else {
                row.push(Some(code(ResponseError::UnknownTopicOrPartition)));
            }
        }
        if !parts.is_empty() {
            asked.push((name, parts));
            slots.push(where_);
        }
        decided.push(row);
    }
    turn.wait().await;
    let mut r = OffsetDeleteResponse::default();
    // DELETE on the group, else the whole request is refused.
    let result = if !ctx.allowed(AclOperation::Delete, ResourceType::Group, &gid) {
        Err(GroupError::GroupAuthorizationFailed)
    } else if gid.is_empty() {
        Err(GroupError::InvalidGroupId)
    } else if let Err(n) = b.owns_group(&gid) {
        Err(n.into())
    } else {
        b.groups().delete_offsets(&gid, &asked)
    };
    turn.finish();
    let (codes, wait) = match result {
        Err(e) => {
            r.error_code = e.code();
            return ctx.respond(&r);
        }
        Ok(x) => x,
    };
    for (where_, cs) in slots.iter().zip(codes) {
        for ((ti, pi), c) in where_.iter().zip(cs) {
            decided[*ti][*pi] = Some(group_result_code(&c));
        }
    }
    if let Some(w) = wait {
        if let Err(e) = w.wait().await {
            r.error_code = e.code();
            return ctx.respond(&r);
        }
    }
    r.topics = req
        .topics
        .iter()
        .zip(decided)
        .map(|(t, row)| {
            let mut rt = OffsetDeleteResponseTopic::default();
            rt.name = t.name.clone();
            rt.partitions = t
                .partitions
                .iter()
                .zip(row)
                .map(|(p, c)| {
                    let mut rp = OffsetDeleteResponsePartition::default();
                    rp.partition_index = p.partition_index;
                    rp.error_code = c.unwrap_or(code(ResponseError::UnknownServerError));
                    rp
                })
                .collect();
            rt
        })
        // As OffsetCommit: a topic that lists no partition is not answered.
        .filter(|rt| !rt.partitions.is_empty())
        .collect();
    ctx.respond(&r)
}
