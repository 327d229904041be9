//! The share-group offsets admin APIs (KIP-932, docs/share-groups-design.md
//! §2.8): DescribeShareGroupOffsets (v0-1, v1 with Lag), AlterShareGroupOffsets
//! (v0) and DeleteShareGroupOffsets (v0), and the share-partition half of
//! DeleteGroups for share groups. The coordinator ([`crate::groups`]) owns
//! which share-partitions a group has recorded; the share-partitions' state
//! is [`crate::shares::manager::ShareManager`]'s on each partition's leader,
//! reached through [`super::share_leaders`] (a function call for those led
//! here, an inter-broker request for the others, design §3.10).
//!
//! Answers follow what Kafka 4.4 answers (checked with raw requests against
//! it): unknown topics and partitions in Describe read StartOffset -1 with
//! no error; Alter accepts any start offset and lists refused topics
//! first; Delete lists the deleted topics first, then the unknown ones,
//! then those without state ("There is no offset information to delete.").
//!
//! A leader that cannot be reached (none, or none answering within
//! [`super::share_leaders::RETRY_WINDOW_MS`]) is answered as Kafka 4.4
//! answers when its persister cannot reach the share state's keeper
//! (`GroupCoordinatorService`, `PersisterStateManager`): Describe reads
//! StartOffset -1, LeaderEpoch 0, Lag -1 without an error ("treated as
//! absence of data"); Alter answers the partition, Delete the topic,
//! DeleteGroups the group with COORDINATOR_NOT_AVAILABLE, which clients
//! retry (Kafka's code when its share coordinator cannot be found).

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

use super::share_leaders::{in_cluster, reach, Reached};
use super::{group_id, s};
use crate::broker::Broker;
use crate::codec::share_wire::DescribeShareGroupOffsetsResponseV1;
use crate::errors::{code, ResponseError};
use crate::groups::error::GroupError;
use crate::handlers::share_admin::{AdminAnswer, AdminPartition, ShareAdminOp};
use crate::handlers::{blocking, Ctx, RequestError};
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

/// Kafka's message of an error code (its `Errors.message()`).
fn default_message(c: i16) -> String {
    ResponseError::try_from_code(c).map_or_else(String::new, |e| e.to_string())
}

/// What a leader that could not be reached is answered with (Kafka's code
/// when its share coordinator cannot be found).
fn unreachable() -> (i16, String) {
    let e = ResponseError::CoordinatorNotAvailable;
    (code(e), e.to_string())
}

/// A leader's refusal: its code and message (Kafka's own when it gave none).
fn refusal(a: &AdminAnswer) -> (i16, String) {
    let m = a
        .error_message
        .clone()
        .unwrap_or_else(|| default_message(a.error_code));
    (a.error_code, m)
}

/// The request's entry for partition `p` of `topic`.
fn admin_partition(topic: &Topic, p: i32, start_offset: Option<i64>) -> AdminPartition {
    AdminPartition {
        topic: topic.name.clone(),
        topic_id: topic.id,
        partition: p,
        start_offset,
    }
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

/// A share-partition as its leader described it. Not led where asked
/// after the retries, or no leader reached: no state, as Kafka answers when
/// its persister fails for a partition.
fn described(partition: i32, r: Reached) -> Described {
    let a = match r {
        Reached::Unreachable => return Described::absent(partition),
        Reached::Answer(a) => a,
    };
    let moved = a.error_code == code(ResponseError::NotLeaderOrFollower)
        || a.error_code == code(ResponseError::UnknownTopicOrPartition);
    match (a.error_code, a.state) {
        (0, None) => Described::absent(partition),
        (0, Some(st)) => Described {
            partition,
            start_offset: st.start_offset,
            leader_epoch: st.leader_epoch,
            lag: st.lag(),
            error: None,
        },
        _ if moved => Described::absent(partition),
        (c, _) => Described {
            error: Some((c, a.error_message.unwrap_or_default())),
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
        // Named partitions of known topics are asked of their leaders; the
        // others are answered here.
        let mut asks = Vec::new();
        let mut at = Vec::new();
        let mut topics = Vec::with_capacity(wanted.len());
        for (name, parts, allowed) in wanted {
            let topic = ctx.broker.topic(&name);
            let id = topic.as_ref().map_or(Uuid::nil(), |t| t.id);
            let mut described = Vec::with_capacity(parts.len());
            for p in parts {
                let d = match (&topic, allowed) {
                    (_, false) => Described {
                        error: Some((code(ResponseError::TopicAuthorizationFailed), String::new())),
                        ..Described::absent(p)
                    },
                    (Some(t), true) if t.has_partition(p) => {
                        asks.push(admin_partition(t, p, None));
                        at.push((topics.len(), described.len()));
                        Described::absent(p)
                    }
                    (_, true) => Described::absent(p),
                };
                described.push(d);
            }
            topics.push((name, if allowed { id } else { Uuid::nil() }, described));
        }
        let reached = reach(&ctx.broker, ShareAdminOp::Describe, &gid, asks).await;
        for ((t, i), r) in at.into_iter().zip(reached) {
            if let Some(d) = topics.get_mut(t).and_then(|t| t.2.get_mut(i)) {
                *d = described(d.partition, r);
            }
        }
        a.topics = topics;
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
    // Each partition of a known topic is reset by its leader, answered after
    // its fsync there.
    let mut asks = Vec::new();
    let mut at = Vec::new();
    let mut topics = Vec::with_capacity(known.len());
    for (topic, parts) in known {
        let mut rt = AlterShareGroupOffsetsResponseTopic::default();
        rt.topic_name = TopicName(s(topic.name.clone()));
        rt.topic_id = topic.id;
        for (p, start) in parts {
            if topic.has_partition(p) {
                asks.push(admin_partition(&topic, p, Some(start)));
                at.push((topics.len(), rt.partitions.len()));
                rt.partitions.push(alter_partition(p, 0, None));
            } else {
                let c = code(ResponseError::UnknownTopicOrPartition);
                rt.partitions
                    .push(alter_partition(p, c, Some(NOT_HOSTED.into())));
            }
        }
        topics.push(rt);
    }
    let reached = reach(&ctx.broker, ShareAdminOp::Reset, &gid, asks).await;
    for ((t, i), r) in at.into_iter().zip(reached) {
        let Some(x) = topics.get_mut(t).and_then(|t| t.partitions.get_mut(i)) else {
            continue;
        };
        let (c, m) = match r {
            Reached::Answer(a) => (a.error_code, a.error_message),
            Reached::Unreachable => {
                let (c, m) = unreachable();
                (c, Some(m))
            }
        };
        x.error_code = c;
        x.error_message = m.map(s);
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
    // Every recorded partition of each topic is deleted by its leader; a
    // topic is forgotten only when all of its are gone.
    let mut asks = Vec::new();
    let mut owner = Vec::new();
    for (t, (name, id, ps)) in work.iter().enumerate() {
        for p in ps {
            asks.push(AdminPartition {
                topic: name.clone(),
                topic_id: *id,
                partition: *p,
                start_offset: None,
            });
            owner.push(t);
        }
    }
    let reached = reach(&ctx.broker, ShareAdminOp::Delete, &gid, asks).await;
    let mut failures: Vec<Option<(i16, String)>> = vec![None; work.len()];
    for (t, r) in owner.into_iter().zip(reached) {
        let failure = match r {
            Reached::Unreachable => Some(unreachable()),
            Reached::Answer(a) => deletion_failure(&a),
        };
        if let (Some(f), Some(slot)) = (failure, failures.get_mut(t)) {
            slot.get_or_insert(f);
        }
    }
    let deleted = work
        .into_iter()
        .zip(failures)
        .map(|((name, id, _), f)| (name, id, f));
    let mut done = Vec::new();
    let mut waits = Vec::new();
    for (name, id, failure) in deleted {
        let mut x = DeleteShareGroupOffsetsResponseTopic::default();
        x.topic_name = TopicName(s(name.clone()));
        x.topic_id = id;
        match failure {
            None => waits.extend(coord.share_partitions_forget(&gid, &name)),
            Some((c, m)) => {
                x.error_code = c;
                x.error_message = Some(s(m));
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
    let image = ctx.broker.image();
    if !in_cluster(image.as_deref()) {
        // One node: every share-partition is here; the group's directory
        // goes with whatever else it holds.
        let broker = ctx.broker.clone();
        let group = gid.to_string();
        let r = blocking(move || broker.shares().delete_group(&group, &list)).await?;
        return Ok(r.map_err(|e| {
            tracing::error!(group = gid, error = %e, "deleting a share group's share-partitions failed");
            GroupError::StorageFailed.code()
        }));
    }
    // A cluster: each leader deletes those it leads (followers' copies are
    // the replication's).
    let asks = list
        .into_iter()
        .map(|(topic, topic_id, partition)| AdminPartition {
            topic,
            topic_id,
            partition,
            start_offset: None,
        })
        .collect();
    let reached = reach(&ctx.broker, ShareAdminOp::DeleteGroup, gid, asks).await;
    let failure = reached.into_iter().find_map(|r| match r {
        Reached::Unreachable => Some(unreachable()),
        Reached::Answer(a) => deletion_failure(&a),
    });
    Ok(match failure {
        None => Ok(()),
        Some((c, m)) => {
            tracing::error!(group = gid, error = c, message = %m, "deleting a share group's share-partitions failed");
            // A storage failure is the group's as on one node; anything else
            // (the leader kept moving) is one clients retry.
            Err(if c == code(ResponseError::KafkaStorageError) {
                GroupError::StorageFailed.code()
            } else {
                unreachable().0
            })
        }
    })
}

/// A leader's answer to a deletion, as a failure: none when deleted, or
/// when the leader does not know the topic under that id (its share state
/// went with the topic).
fn deletion_failure(a: &AdminAnswer) -> Option<(i16, String)> {
    let gone = a.error_code == 0 || a.error_code == code(ResponseError::UnknownTopicOrPartition);
    (!gone).then(|| refusal(a))
}
