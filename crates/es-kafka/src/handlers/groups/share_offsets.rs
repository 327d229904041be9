//! The share-group offsets admin APIs (KIP-932, docs/share-groups-design.md
//! §2.8): DescribeShareGroupOffsets (v0-1, v1 with Lag), AlterShareGroupOffsets
//! (v0) and DeleteShareGroupOffsets (v0), and the share-partition half of
//! DeleteGroups for share groups. The coordinator ([`crate::groups`]) owns
//! which share-partitions a group has recorded; the share-partitions' state
//! is [`crate::shares::manager::ShareManager`]'s, reached here on this
//! broker (the partition's leader on one node; in a cluster a partition led
//! elsewhere answers as having no state, design §3.10).
//!
//! Answers follow what Kafka 4.4 answers (checked with raw requests against
//! it): unknown topics and partitions in Describe read StartOffset -1 with
//! no error; Alter accepts any start offset and lists refused topics
//! first; Delete lists the deleted topics first, then the unknown ones,
//! then those without state ("There is no offset information to delete.").

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use bytes::Bytes;
use es_auth::acl::{AclOperation, ResourceType};
use kafka_protocol::messages::alter_share_group_offsets_response::{
    AlterShareGroupOffsetsResponsePartition, AlterShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::delete_share_group_offsets_response::DeleteShareGroupOffsetsResponseTopic;
use kafka_protocol::messages::describe_share_group_offsets_response::{
    DescribeShareGroupOffsetsResponseGroup, DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::{
    AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse, DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse, DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse, TopicName,
};
use uuid::Uuid;

use super::{group_id, s};
use crate::broker::Broker;
use crate::codec::share_wire::DescribeShareGroupOffsetsResponseV1;
use crate::errors::{code, ResponseError, NONE};
use crate::groups::error::GroupError;
use crate::handlers::share::share_config;
use crate::handlers::{blocking, Ctx, RequestError};
use crate::shares::locks::ShareKey;
use crate::shares::manager::{DurableTicket, ShareConfig, ShareTarget};
use crate::topics::Topic;

/// Kafka's message for a partition or topic it does not know.
const NOT_HOSTED: &str = "This server does not host this topic-partition.";
/// Kafka's message for a topic of the group without share state.
const NO_OFFSETS: &str = "There is no offset information to delete.";
/// Kafka's messages for top-level refusals it words itself.
const NOT_EMPTY: &str = "The group is not empty.";
const INVALID_GROUP_ID: &str = "The group id is invalid.";
/// Kafka's message for UNKNOWN_SERVER_ERROR.
const UNEXPECTED: &str = "The server experienced an unexpected error when processing the request.";

/// The (partition, start offset) pairs an Alter asks for, of one topic.
type Resets = Vec<(i32, i64)>;

/// A top-level refusal of Alter or Delete: code and message.
fn top_level(e: &GroupError) -> (i16, Option<String>) {
    let message = match e {
        GroupError::NonEmptyGroup => Some(NOT_EMPTY.to_string()),
        GroupError::InvalidGroupId => Some(INVALID_GROUP_ID.to_string()),
        other => other.message(),
    };
    (e.code(), message)
}

/// Whether a recorded share-partition entry is of the topic that has the
/// name now (not of one deleted since: its state went with it).
fn current(b: &Broker, name: &str, id: Uuid) -> bool {
    b.topic(name).is_some_and(|t| t.id == id)
}

/// The partition of `topic` served here, if it is.
fn local_partition(
    b: &Broker,
    image: Option<&es_meta::MetaImage>,
    topic: &Arc<Topic>,
    partition: i32,
) -> Option<Arc<crate::topics::PartitionSlot>> {
    crate::handlers::route::route(
        b,
        image,
        Some(topic),
        partition,
        crate::handlers::route::NO_EPOCH,
    )
    .ok()
    .map(|r| r.slot)
}

/// One partition as DescribeShareGroupOffsets answers it: StartOffset,
/// LeaderEpoch, Lag, and an error (code, message).
#[derive(Debug, Clone)]
struct Described {
    partition: i32,
    start_offset: i64,
    leader_epoch: i32,
    lag: i64,
    error: Option<(i16, String)>,
}

impl Described {
    /// No state: Kafka's -1 start offset and lag.
    fn absent(partition: i32) -> Self {
        Described {
            partition,
            start_offset: -1,
            leader_epoch: 0,
            lag: -1,
            error: None,
        }
    }
}

/// Reads one share-partition's offsets (blocking: it may load it).
fn describe_one(
    b: &Broker,
    image: Option<&es_meta::MetaImage>,
    group: &str,
    topic: &Arc<Topic>,
    partition: i32,
    config: &ShareConfig,
) -> Described {
    let Some(slot) = local_partition(b, image, topic, partition) else {
        return Described::absent(partition);
    };
    let key = ShareKey::new(group, topic.id, partition);
    let t = ShareTarget {
        key: &key,
        topic: &topic.name,
        log: &slot.log,
        config,
    };
    match b.shares().describe_offsets(&t) {
        Ok(None) => Described::absent(partition),
        Ok(Some(o)) => {
            let hw = i64::try_from(slot.log.high_watermark()).unwrap_or(i64::MAX);
            // Kafka's KIP-1226 lag: latest offset - start - records
            // already delivered past the start (negative when the start is
            // past the end, as Kafka answers).
            let lag = hw
                .saturating_sub(o.summary.start_offset)
                .saturating_sub(o.summary.delivery_complete_count);
            Described {
                partition,
                start_offset: o.summary.start_offset,
                leader_epoch: o.leader_epoch,
                lag,
                error: None,
            }
        }
        Err(e) => Described {
            error: Some((e.code(), e.to_string())),
            ..Described::absent(partition)
        },
    }
}

/// What one group's answer is made of before encoding: topics with their
/// id and partitions, or a group-level error.
struct GroupAnswer {
    group: String,
    topics: Vec<(String, Uuid, Vec<Described>)>,
    error: Option<(i16, Option<String>)>,
}

/// DescribeShareGroupOffsets: per group, DESCRIBE on the group; null
/// topics = every share-partition the group recorded (topics the client may
/// not DESCRIBE left out); an empty list answers nothing; named topics are
/// answered partition by partition, unknown ones with StartOffset -1 and a
/// zero topic id, denied ones with TOPIC_AUTHORIZATION_FAILED; what Kafka's
/// share state reader refuses (an empty group id, a topic without
/// partitions, a negative partition) fails the group as it does.
pub async fn describe_share_group_offsets(
    ctx: &Ctx,
    req: DescribeShareGroupOffsetsRequest,
) -> Result<Option<Bytes>, RequestError> {
    let mut answers = Vec::with_capacity(req.groups.len());
    for g in req.groups {
        let gid = group_id(&g.group_id);
        let mut a = GroupAnswer {
            group: gid.clone(),
            topics: Vec::new(),
            error: None,
        };
        if !ctx.allowed(AclOperation::Describe, ResourceType::Group, &gid) {
            a.error = Some((code(ResponseError::GroupAuthorizationFailed), None));
            answers.push(a);
            continue;
        }
        // An empty group id has no coordinator; it is answered below as
        // Kafka answers it (no topics, or refused with topics named).
        let not_here = match gid.is_empty() {
            true => None,
            false => ctx.broker.owns_group(&gid).err(),
        };
        if let Some(n) = not_here {
            a.error = Some((n.code(), Some(n.message().to_string())));
            answers.push(a);
            continue;
        }
        // (topic, partitions, allowed) to read.
        let wanted: Vec<(String, Vec<i32>, bool)> = match g.topics {
            None => ctx
                .broker
                .groups()
                .share_partitions(&gid)
                .unwrap_or_default()
                .into_iter()
                .filter(|(name, (id, _))| current(&ctx.broker, name, *id))
                .filter(|(name, _)| ctx.allowed(AclOperation::Describe, ResourceType::Topic, name))
                .map(|(name, (_, ps))| (name, ps.into_iter().collect(), true))
                .collect(),
            Some(ts) => {
                // Kafka's share state reader refuses an empty group id, a
                // topic without partitions and a negative partition for
                // the whole group (UNKNOWN_SERVER_ERROR); a topic named
                // twice is one, its partitions each once, ascending.
                let invalid = !ts.is_empty()
                    && (gid.is_empty()
                        || ts.iter().any(|t| {
                            t.partitions.is_empty() || t.partitions.iter().any(|p| *p < 0)
                        }));
                if invalid {
                    a.error = Some((
                        code(ResponseError::UnknownServerError),
                        Some(UNEXPECTED.to_string()),
                    ));
                    answers.push(a);
                    continue;
                }
                // Unknown topics are answered as named, each entry apart.
                let mut merged: Vec<(String, Vec<i32>, bool)> = Vec::new();
                for t in ts {
                    let name = t.topic_name.0.to_string();
                    let known = ctx.broker.topic(&name).is_some();
                    match merged
                        .iter_mut()
                        .find(|(n, _, k)| *k && known && *n == name)
                    {
                        Some((_, ps, _)) => ps.extend(t.partitions),
                        None => merged.push((name, t.partitions, known)),
                    }
                }
                merged
                    .into_iter()
                    .map(|(name, ps, known)| {
                        let ok = ctx.allowed(AclOperation::Describe, ResourceType::Topic, &name);
                        let ps = match known {
                            true => ps
                                .into_iter()
                                .collect::<BTreeSet<i32>>()
                                .into_iter()
                                .collect(),
                            false => ps,
                        };
                        (name, ps, ok)
                    })
                    .collect()
            }
        };
        let broker = ctx.broker.clone();
        let config = share_config(&broker.group_configs(&gid), &broker.config().share);
        let group = gid.clone();
        a.topics = blocking(move || {
            let image = broker.image();
            wanted
                .into_iter()
                .map(|(name, parts, allowed)| {
                    let topic = broker.topic(&name);
                    let id = topic.as_ref().map_or(Uuid::nil(), |t| t.id);
                    let described = parts
                        .into_iter()
                        .map(|p| match (&topic, allowed) {
                            (_, false) => Described {
                                error: Some((
                                    code(ResponseError::TopicAuthorizationFailed),
                                    String::new(),
                                )),
                                ..Described::absent(p)
                            },
                            (None, true) => Described::absent(p),
                            (Some(t), true) => {
                                describe_one(&broker, image.as_deref(), &group, t, p, &config)
                            }
                        })
                        .collect();
                    (name, if allowed { id } else { Uuid::nil() }, described)
                })
                .collect()
        })
        .await?;
        answers.push(a);
    }
    respond_describe(ctx, answers)
}

fn respond_describe(ctx: &Ctx, answers: Vec<GroupAnswer>) -> Result<Option<Bytes>, RequestError> {
    let mut r = DescribeShareGroupOffsetsResponse::default();
    let mut lags = Vec::new();
    for a in answers {
        let mut g = DescribeShareGroupOffsetsResponseGroup::default();
        g.group_id = kafka_protocol::messages::GroupId(s(a.group));
        if let Some((c, m)) = a.error {
            g.error_code = c;
            g.error_message = m.map(s);
        }
        for (name, id, parts) in a.topics {
            let mut t = DescribeShareGroupOffsetsResponseTopic::default();
            t.topic_name = TopicName(s(name));
            t.topic_id = id;
            for d in parts {
                let mut p = DescribeShareGroupOffsetsResponsePartition::default();
                p.partition_index = d.partition;
                p.start_offset = d.start_offset;
                p.leader_epoch = d.leader_epoch;
                if let Some((c, m)) = d.error {
                    p.error_code = c;
                    p.error_message = (!m.is_empty()).then(|| s(m));
                }
                lags.push(d.lag);
                t.partitions.push(p);
            }
            g.topics.push(t);
        }
        r.groups.push(g);
    }
    if ctx.version >= 1 {
        ctx.respond(&DescribeShareGroupOffsetsResponseV1 { response: r, lags })
    } else {
        ctx.respond(&r)
    }
}

/// Waits for every share-partition ticket; the failures by index.
async fn wait_tickets(
    b: &Arc<Broker>,
    tickets: Vec<(usize, DurableTicket)>,
) -> Vec<(usize, (i16, String))> {
    let mut failed = Vec::new();
    for (i, t) in tickets {
        if let Err(e) = b.shares().wait_durable(t).await {
            failed.push((i, (e.code(), e.to_string())));
        }
    }
    failed
}

/// AlterShareGroupOffsets: READ on the group (top level), an empty group
/// id refused, READ on each topic and the topic's existence (refused topics
/// come first in the answer, as Kafka lists them; a topic named twice is
/// answered once; without a known topic an existing group is only checked,
/// none created, as in Kafka;
/// a negative partition refuses the whole request, as Kafka's share
/// coordinator does), then the coordinator's
/// checks (the group created if missing; another type or members refuse
/// the whole request), then each partition reset and answered after its
/// fsync and the group's document.
pub async fn alter_share_group_offsets(
    ctx: &Ctx,
    req: AlterShareGroupOffsetsRequest,
) -> Result<Option<Bytes>, RequestError> {
    let gid = group_id(&req.group_id);
    let mut r = AlterShareGroupOffsetsResponse::default();
    let refuse = |r: &mut AlterShareGroupOffsetsResponse, c: i16, m: Option<String>| {
        r.error_code = c;
        r.error_message = m.map(s);
    };
    if !ctx.allowed(AclOperation::Read, ResourceType::Group, &gid) {
        refuse(&mut r, code(ResponseError::GroupAuthorizationFailed), None);
        return ctx.respond(&r);
    }
    if gid.is_empty() {
        let (c, m) = top_level(&GroupError::InvalidGroupId);
        refuse(&mut r, c, m);
        return ctx.respond(&r);
    }
    let mut refused = Vec::new();
    let mut known: Vec<(Arc<Topic>, Resets)> = Vec::new();
    // A topic named twice is one topic (Kafka's request map), its
    // partitions in request order.
    let mut topics: Vec<(TopicName, Vec<(i32, i64)>)> = Vec::new();
    for t in req.topics {
        let parts = t
            .partitions
            .iter()
            .map(|p| (p.partition_index, p.start_offset));
        match topics.iter_mut().find(|(n, _)| *n == t.topic_name) {
            Some((_, ps)) => ps.extend(parts),
            None => topics.push((t.topic_name, parts.collect())),
        }
    }
    for (topic_name, parts) in topics {
        let name = topic_name.0.to_string();
        let error = if !ctx.allowed(AclOperation::Read, ResourceType::Topic, &name) {
            Some((code(ResponseError::TopicAuthorizationFailed), None))
        } else {
            match ctx.broker.topic(&name) {
                Some(topic) => {
                    known.push((topic, parts.clone()));
                    None
                }
                None => Some((
                    code(ResponseError::UnknownTopicOrPartition),
                    Some(NOT_HOSTED),
                )),
            }
        };
        if let Some((c, m)) = error {
            let mut rt = AlterShareGroupOffsetsResponseTopic::default();
            rt.topic_name = topic_name.clone();
            // A denied topic that exists carries its id (Kafka 4.4 does,
            // seen in compat-tests/acl-matrix).
            rt.topic_id = ctx.broker.topic(&name).map_or(Uuid::nil(), |t| t.id);
            rt.partitions = parts
                .iter()
                .map(|&(p, _)| alter_partition(p, c, m.map(str::to_string)))
                .collect();
            refused.push(rt);
        }
    }
    if let Err(n) = ctx.broker.owns_group(&gid) {
        refuse(&mut r, n.code(), Some(n.message().to_string()));
        return ctx.respond(&r);
    }
    let coord = ctx.broker.groups();
    if known.is_empty() {
        // Nothing to initialise: Kafka refuses an existing group of another
        // type or with members, and otherwise answers the refused topics
        // without creating the group.
        if let Err(e) = coord.share_offsets_checkable(&gid) {
            let (c, m) = top_level(&e);
            refuse(&mut r, c, m);
        } else {
            r.responses = refused;
        }
        return ctx.respond(&r);
    }
    if let Err(e) = coord.share_offsets_alterable(&gid) {
        let (c, m) = top_level(&e);
        refuse(&mut r, c, m);
        return ctx.respond(&r);
    }
    // Kafka's share coordinator refuses a negative partition for the whole
    // request (UNKNOWN_SERVER_ERROR, no topics), the group already created.
    if let Some((t, p)) = known
        .iter()
        .find_map(|(t, ps)| ps.iter().find(|(p, _)| *p < 0).map(|(p, _)| (t, *p)))
    {
        refuse(
            &mut r,
            code(ResponseError::UnknownServerError),
            Some(format!(
                "Initialize share group parameters has invalid partitionId - {gid} {} {p}",
                t.name
            )),
        );
        return ctx.respond(&r);
    }
    // Recorded in the group's document first (Kafka marks them
    // initialising before its share coordinator writes them).
    let mut doc_waits = Vec::new();
    for (topic, parts) in &known {
        let ps: Vec<i32> = parts
            .iter()
            .map(|(p, _)| *p)
            .filter(|p| topic.has_partition(*p))
            .collect();
        if !ps.is_empty() {
            doc_waits.extend(coord.share_partitions_record(&gid, &topic.name, topic.id, &ps));
        }
    }
    let broker = ctx.broker.clone();
    let config = share_config(&broker.group_configs(&gid), &broker.config().share);
    let group = gid.clone();
    let work = known;
    let (mut topics, tickets) = blocking(move || {
        let image = broker.image();
        let mut tickets = Vec::new();
        let mut topics = Vec::with_capacity(work.len());
        let mut index = 0usize;
        for (topic, parts) in work {
            let mut rt = AlterShareGroupOffsetsResponseTopic::default();
            rt.topic_name = TopicName(s(topic.name.clone()));
            rt.topic_id = topic.id;
            for (p, start) in parts {
                let answer = if !topic.has_partition(p) {
                    let c = code(ResponseError::UnknownTopicOrPartition);
                    alter_partition(p, c, Some(NOT_HOSTED.into()))
                } else {
                    match local_partition(&broker, image.as_deref(), &topic, p) {
                        None => alter_partition(p, code(ResponseError::NotLeaderOrFollower), None),
                        Some(slot) => {
                            let key = ShareKey::new(&group, topic.id, p);
                            let t = ShareTarget {
                                key: &key,
                                topic: &topic.name,
                                log: &slot.log,
                                config: &config,
                            };
                            match broker.shares().reset_offsets(&t, start) {
                                Ok(ticket) => {
                                    if let Some(ticket) = ticket {
                                        tickets.push((index, ticket));
                                    }
                                    alter_partition(p, NONE, None)
                                }
                                Err(e) => alter_partition(p, e.code(), Some(e.to_string())),
                            }
                        }
                    }
                };
                rt.partitions.push(answer);
                index += 1;
            }
            topics.push(rt);
        }
        (topics, tickets)
    })
    .await?;
    let failed = wait_tickets(&ctx.broker, tickets).await;
    if !failed.is_empty() {
        let mut flat: Vec<&mut AlterShareGroupOffsetsResponsePartition> = topics
            .iter_mut()
            .flat_map(|t| t.partitions.iter_mut())
            .collect();
        for (i, (c, m)) in failed {
            if let Some(p) = flat.get_mut(i) {
                p.error_code = c;
                p.error_message = Some(s(m));
            }
        }
    }
    for w in doc_waits {
        if let Err(e) = w.wait().await {
            let (c, m) = top_level(&e);
            refuse(&mut r, c, m);
            return ctx.respond(&r);
        }
    }
    r.responses = refused;
    r.responses.extend(topics);
    ctx.respond(&r)
}

fn alter_partition(p: i32, c: i16, m: Option<String>) -> AlterShareGroupOffsetsResponsePartition {
    let mut x = AlterShareGroupOffsetsResponsePartition::default();
    x.partition_index = p;
    x.error_code = c;
    x.error_message = m.map(s);
    x
}

/// DeleteShareGroupOffsets: DELETE on the group (top level), an empty
/// group id refused, the coordinator's checks (unknown group, another type,
/// members), then per topic (each name once): READ on it, its existence,
/// whether the group has share state for it; the topic's share-partitions
/// are deleted and forgotten, answered after the group's document.
pub async fn delete_share_group_offsets(
    ctx: &Ctx,
    req: DeleteShareGroupOffsetsRequest,
) -> Result<Option<Bytes>, RequestError> {
    let gid = group_id(&req.group_id);
    let mut r = DeleteShareGroupOffsetsResponse::default();
    let refuse = |r: &mut DeleteShareGroupOffsetsResponse, c: i16, m: Option<String>| {
        r.error_code = c;
        r.error_message = m.map(s);
    };
    if !ctx.allowed(AclOperation::Delete, ResourceType::Group, &gid) {
        refuse(&mut r, code(ResponseError::GroupAuthorizationFailed), None);
        return ctx.respond(&r);
    }
    if gid.is_empty() {
        let (c, m) = top_level(&GroupError::InvalidGroupId);
        refuse(&mut r, c, m);
        return ctx.respond(&r);
    }
    if let Err(n) = ctx.broker.owns_group(&gid) {
        refuse(&mut r, n.code(), Some(n.message().to_string()));
        return ctx.respond(&r);
    }
    let coord = ctx.broker.groups();
    let recorded = match coord.share_offsets_deletable(&gid) {
        Ok(sp) => sp,
        Err(e) => {
            let (c, m) = top_level(&e);
            refuse(&mut r, c, m);
            return ctx.respond(&r);
        }
    };
    let mut seen = HashSet::new();
    let mut refused = Vec::new();
    let mut no_state = Vec::new();
    // (name, id, partitions) to delete.
    let mut work: Vec<(String, Uuid, Vec<i32>)> = Vec::new();
    for t in req.topics {
        let name = t.topic_name.0.to_string();
        if !seen.insert(name.clone()) {
            continue;
        }
        let answer = |c: ResponseError, m: Option<&str>| {
            let mut x = DeleteShareGroupOffsetsResponseTopic::default();
            x.topic_name = t.topic_name.clone();
            x.error_code = code(c);
            x.error_message = m.map(s);
            x
        };
        if !ctx.allowed(AclOperation::Read, ResourceType::Topic, &name) {
            refused.push(answer(ResponseError::TopicAuthorizationFailed, None));
        } else if ctx.broker.topic(&name).is_none() {
            refused.push(answer(
                ResponseError::UnknownTopicOrPartition,
                Some(NOT_HOSTED),
            ));
        } else {
            match recorded
                .get(&name)
                .filter(|(id, _)| current(&ctx.broker, &name, *id))
            {
                None => no_state.push(answer(
                    ResponseError::UnknownTopicOrPartition,
                    Some(NO_OFFSETS),
                )),
                Some((id, ps)) => work.push((name, *id, ps.iter().copied().collect())),
            }
        }
    }
    let broker = ctx.broker.clone();
    let group = gid.clone();
    let deleted = blocking(move || {
        work.into_iter()
            .map(|(name, id, ps)| {
                let mut failure = None;
                for p in ps {
                    if let Err(e) = broker
                        .shares()
                        .delete_offsets(&ShareKey::new(&group, id, p), &name)
                    {
                        failure.get_or_insert(e);
                    }
                }
                (name, id, failure)
            })
            .collect::<Vec<_>>()
    })
    .await?;
    let mut done = Vec::new();
    let mut waits = Vec::new();
    for (name, id, failure) in deleted {
        let mut x = DeleteShareGroupOffsetsResponseTopic::default();
        x.topic_name = TopicName(s(name.clone()));
        x.topic_id = id;
        match failure {
            None => waits.extend(coord.share_partitions_forget(&gid, &name)),
            Some(e) => {
                x.error_code = code(ResponseError::KafkaStorageError);
                x.error_message = Some(s(e.to_string()));
            }
        }
        done.push(x);
    }
    for w in waits {
        if let Err(e) = w.wait().await {
            let (c, m) = top_level(&e);
            refuse(&mut r, c, m);
            return ctx.respond(&r);
        }
    }
    r.responses = done;
    r.responses.extend(refused);
    r.responses.extend(no_state);
    ctx.respond(&r)
}

/// DeleteGroups' share half: for an empty share group, deletes every
/// share-partition it has (before the group itself, as Kafka does); `Err`
/// with the group's code when it cannot be deleted (NON_EMPTY_GROUP, a
/// storage failure), `Ok` for every other group (the ordinary deletion
/// answers those).
pub async fn delete_share_state(ctx: &Ctx, gid: &str) -> Result<Result<(), i16>, RequestError> {
    let Some(check) = ctx.broker.groups().share_group_deletable(gid) else {
        return Ok(Ok(()));
    };
    let recorded = match check {
        Ok(sp) => sp,
        Err(e) => return Ok(Err(e.code())),
    };
    // Entries of a topic deleted since (or created again) name no state of
    // the topic now of that name; the directory sweep takes what is left.
    let list: Vec<(String, Uuid, i32)> = recorded
        .into_iter()
        .filter(|(name, (id, _))| current(&ctx.broker, name, *id))
        .flat_map(|(name, (id, ps))| ps.into_iter().map(move |p| (name.clone(), id, p)))
        .collect();
    let broker = ctx.broker.clone();
    let group = gid.to_string();
    let r = blocking(move || broker.shares().delete_group(&group, &list)).await?;
    Ok(r.map_err(|e| {
        tracing::error!(group = gid, error = %e, "deleting a share group's share-partitions failed");
        GroupError::StorageFailed.code()
    }))
}
