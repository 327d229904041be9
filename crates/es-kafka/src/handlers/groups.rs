//! The group APIs: FindCoordinator (v0-6), JoinGroup (v0-9), SyncGroup
//! (v0-5), Heartbeat (v0-4), LeaveGroup (v0-5), DescribeGroups (v0-6),
//! ListGroups (v0-5), DeleteGroups (v0-2), OffsetCommit (v2-9), OffsetFetch
//! (v1-9), OffsetDelete (v0), ConsumerGroupHeartbeat (v0-1) and
//! ConsumerGroupDescribe (v0-1).
//!
//! Each handler converts between the wire messages and the coordinator
//! ([`crate::groups`]), does the checks Kafka's `KafkaApis` and
//! `GroupCoordinatorService` do before the coordinator (empty group ids,
//! session timeout bounds, unknown topics and partitions), and sets every
//! field only in the versions that carry it.
//!
//! Ordering: JoinGroup and SyncGroup park until the group answers, and
//! OffsetCommit / OffsetFetch / OffsetDelete wait for their group's document
//! to be durable. They take their connection [`Turn`] for the state change
//! (so it happens in the order the client sent its requests), release it,
//! and only then wait — a parked JoinGroup never holds up the connection's
//! heartbeats, as with Fetch.

use std::collections::HashSet;

use bytes::Bytes;
use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment as CgdAssignment, DescribedGroup as CgdGroup, Member as CgdMember,
    TopicPartitions as CgdTopicPartitions,
};
use kafka_protocol::messages::consumer_group_heartbeat_response::{
    Assignment as CghAssignment, TopicPartitions as CghTopicPartitions,
};
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::find_coordinator_response::Coordinator as FcCoordinator;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::list_groups_response::ListedGroup;
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
    BrokerId, ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, DeleteGroupsRequest,
    DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse, FindCoordinatorRequest,
    FindCoordinatorResponse, GroupId, HeartbeatRequest, HeartbeatResponse, JoinGroupRequest,
    JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse, ListGroupsRequest,
    ListGroupsResponse, OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest,
    OffsetDeleteResponse, OffsetFetchRequest, OffsetFetchResponse, SyncGroupRequest,
    SyncGroupResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::{Ctx, RequestError, AUTHORIZED_OPERATIONS_OMITTED};
use crate::broker::Broker;
use crate::errors::{code, group_code, group_result_code, ResponseError, NONE};
use crate::groups::classic::{self, JoinRequest, LeaveMember, Protocol, SyncRequest};
use crate::groups::consumer::{self, TopicView};
use crate::groups::coordinator::{
    ClassicDescribe, CommitPartition, CommitRequest, CommitTopic, DurableWait, FetchedTopic,
};
use crate::groups::error::GroupError;
use crate::turn::Turn;

/// Coordinator key types (KIP-98, KIP-932).
const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;

/// Group operations a broker without ACLs allows: READ(3), DELETE(6),
/// DESCRIBE(8), as Kafka's bit set.
pub const GROUP_OPERATIONS_ALL: i32 = (1 << 3) | (1 << 6) | (1 << 8);

fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

fn group_id(g: &GroupId) -> String {
    g.0.to_string()
}

fn client_id(ctx: &Ctx) -> String {
    ctx.header
        .client_id
        .as_ref()
        .map(|c| c.to_string())
        .unwrap_or_default()
}

/// The client's address as Kafka shows it ("/host").
fn client_host(ctx: &Ctx) -> String {
    ctx.client_host()
}

/// Topic ids and sizes from the broker's registry.
struct BrokerTopics<'a>(&'a Broker);

impl TopicView for BrokerTopics<'_> {
    fn by_name(&self, name: &str) -> Option<(Uuid, i32)> {
        self.0.topic(name).map(|t| (t.id, t.partition_count()))
    }
    fn name_of(&self, id: Uuid) -> Option<String> {
        self.0.topic_by_id(id).map(|t| t.name.clone())
    }
    /// Every topic, internal ones included: Kafka 4 matches regexes against
    /// all the topics of its metadata image (`refreshRegularExpressions`;
    /// only DESCRIBE ACLs filter, and es has none), so a regex that matches
    /// `__consumer_offsets` gets it assigned once it exists.
    fn names(&self) -> Vec<String> {
        self.0.topics().iter().map(|t| t.name.clone()).collect()
    }
    /// A commutative sum over the topic ids: ids are random and new for
    /// every created topic, so a created, deleted or re-created topic
    /// changes it, and the same set of topics always gives the same value.
    fn generation(&self) -> u64 {
        self.0.topics().iter().fold(0u64, |g, t| {
            let (hi, lo) = t.id.as_u64_pair();
            g.wrapping_add(hi ^ lo.rotate_left(29))
        })
    }
}

// ----- FindCoordinator -----------------------------------------------------

/// FindCoordinator. A group lookup first makes sure `__consumer_offsets`
/// exists, as Kafka creates its offsets topic there; if that fails (a disk
/// error, a colliding topic name) group keys answer COORDINATOR_NOT_AVAILABLE,
/// Kafka's answer while its offsets topic is not there.
pub async fn find_coordinator(
    ctx: &Ctx,
    req: FindCoordinatorRequest,
) -> Result<Option<Bytes>, RequestError> {
    let v = ctx.version;
    let b = &ctx.broker;
    let key_type = if v >= 1 { req.key_type } else { KEY_TYPE_GROUP };
    let any_key = v < 4 || !req.coordinator_keys.is_empty();
    let offsets_topic_missing = key_type == KEY_TYPE_GROUP
        && any_key
        && match b.offsets_topic().await {
            Ok(_) => false,
            Err(e) => {
                tracing::warn!(code = e.code, message = %e.message, "cannot create __consumer_offsets; group coordinator lookups answer COORDINATOR_NOT_AVAILABLE");
                true
            }
        };
    // (error, node, host, port, Kafka's message for the error)
    let (error, node, host, port, message) = if key_type == KEY_TYPE_GROUP && offsets_topic_missing
    {
        (
            code(ResponseError::CoordinatorNotAvailable),
            -1,
            String::new(),
            -1,
            "The coordinator is not available.",
        )
    } else if key_type == KEY_TYPE_GROUP || key_type == KEY_TYPE_TRANSACTION {
        (
            NONE,
            b.node_id(),
            b.config().advertised_host.clone(),
            b.config().advertised_port,
            "NONE",
        )
    } else {
        // Share coordinators (2) and anything else: not here.
        (
            code(ResponseError::InvalidRequest),
            -1,
            String::new(),
            -1,
            "The request is invalid.",
        )
    };
    let mut r = FindCoordinatorResponse::default();
    if v >= 4 {
        r.coordinators = req
            .coordinator_keys
            .iter()
            .map(|k| {
                let mut c = FcCoordinator::default();
                c.key = k.clone();
                c.node_id = BrokerId(node);
                c.host = s(host.clone());
                c.port = port;
                c.error_code = error;
                c.error_message = (error != NONE).then(|| s(message));
                c
            })
            .collect();
    } else {
        r.error_code = error;
        r.node_id = BrokerId(node);
        r.host = s(host);
        r.port = port;
        if v >= 1 {
            r.error_message = Some(s(message));
        }
    }
    ctx.respond(&r)
}

// ----- JoinGroup / SyncGroup / Heartbeat / LeaveGroup ---------------------

pub async fn join_group(
    ctx: &Ctx,
    req: JoinGroupRequest,
    mut turn: Turn,
) -> Result<Option<Bytes>, RequestError> {
    let v = ctx.version;
    let coord = ctx.broker.groups();
    let cfg = *coord.config();
    let gid = group_id(&req.group_id);
    let member_id = req.member_id.to_string();
    let precheck = if gid.is_empty() {
        Some(GroupError::InvalidGroupId)
    } else if req.session_timeout_ms < cfg.min_session_timeout_ms
        || req.session_timeout_ms > cfg.max_session_timeout_ms
    {
        Some(GroupError::InvalidSessionTimeout)
    } else {
        None
    };
    turn.wait().await;
    let outcome = match precheck {
        Some(e) => {
            turn.finish();
            classic::JoinResponse::error(e, &member_id)
        }
        None => {
            let jr = JoinRequest {
                member_id: member_id.clone(),
                group_instance_id: if v >= 5 {
                    req.group_instance_id.as_ref().map(|i| i.to_string())
                } else {
                    None
                },
                client_id: client_id(ctx),
                client_host: client_host(ctx),
                session_timeout_ms: req.session_timeout_ms,
                rebalance_timeout_ms: if v >= 1 {
                    req.rebalance_timeout_ms
                } else {
                    req.session_timeout_ms
                },
                protocol_type: req.protocol_type.to_string(),
                protocols: req
                    .protocols
                    .iter()
                    .map(|p| Protocol {
                        name: p.name.to_string(),
                        metadata: p.metadata.clone(),
                    })
                    .collect(),
                requires_known_member_id: v >= 4,
                supports_skip_assignment: v >= 9,
            };
            let rx = coord.join(&gid, jr);
            turn.finish();
            rx.await.unwrap_or_else(|_| {
                classic::JoinResponse::error(GroupError::CoordinatorNotAvailable, &member_id)
            })
        }
    };
    let mut r = JoinGroupResponse::default();
    r.error_code = group_code(&outcome.error);
    r.generation_id = outcome.generation_id;
    if v >= 7 {
        r.protocol_type = outcome.protocol_type.map(s);
        r.protocol_name = outcome.protocol_name.map(s);
    } else {
        // Not nullable before v7: Kafka sends "".
        r.protocol_name = Some(s(outcome.protocol_name.unwrap_or_default()));
    }
    r.leader = s(outcome.leader);
    if v >= 9 {
        r.skip_assignment = outcome.skip_assignment;
    }
    r.member_id = s(outcome.member_id);
    r.members = outcome
        .members
        .into_iter()
        .map(|m| {
            let mut x = JoinGroupResponseMember::default();
            x.member_id = s(m.member_id);
            if v >= 5 {
                x.group_instance_id = m.group_instance_id.map(s);
            }
            x.metadata = m.metadata;
            x
        })
        .collect();
    ctx.respond(&r)
}

pub async fn sync_group(
    ctx: &Ctx,
    req: SyncGroupRequest,
    mut turn: Turn,
) -> Result<Option<Bytes>, RequestError> {
    let v = ctx.version;
    let coord = ctx.broker.groups();
    let gid = group_id(&req.group_id);
    let precheck = if v >= 5 && (req.protocol_type.is_none() || req.protocol_name.is_none()) {
        // Mandatory from v5 on.
        Some(GroupError::InconsistentGroupProtocol)
    } else if gid.is_empty() {
        Some(GroupError::InvalidGroupId)
    } else {
        None
    };
    turn.wait().await;
    let outcome = match precheck {
        Some(e) => {
            turn.finish();
            classic::SyncResponse::error(e)
        }
        None => {
            let sr = SyncRequest {
                member_id: req.member_id.to_string(),
                group_instance_id: if v >= 3 {
                    req.group_instance_id.as_ref().map(|i| i.to_string())
                } else {
                    None
                },
                generation_id: req.generation_id,
                protocol_type: req.protocol_type.as_ref().map(|p| p.to_string()),
                protocol_name: req.protocol_name.as_ref().map(|p| p.to_string()),
                assignments: req
                    .assignments
                    .iter()
                    .map(|a| (a.member_id.to_string(), a.assignment.clone()))
                    .collect(),
            };
            let rx = coord.sync(&gid, sr);
            turn.finish();
            rx.await.unwrap_or_else(|_| {
                classic::SyncResponse::error(GroupError::CoordinatorNotAvailable)
            })
        }
    };
    let mut r = SyncGroupResponse::default();
    r.error_code = group_code(&outcome.error);
    if v >= 5 {
        r.protocol_type = outcome.protocol_type.map(s);
        r.protocol_name = outcome.protocol_name.map(s);
    }
    r.assignment = outcome.assignment;
    ctx.respond(&r)
}

pub fn heartbeat(ctx: &Ctx, req: HeartbeatRequest) -> Result<Option<Bytes>, RequestError> {
    let gid = group_id(&req.group_id);
    let outcome = if gid.is_empty() {
        Err(GroupError::InvalidGroupId)
    } else {
        let instance = if ctx.version >= 3 {
            req.group_instance_id.as_ref().map(|i| i.to_string())
        } else {
            None
        };
        ctx.broker.groups().heartbeat(
            &gid,
            req.member_id.as_str(),
            instance.as_deref(),
            req.generation_id,
        )
    };
    let mut r = HeartbeatResponse::default();
    r.error_code = group_result_code(&outcome);
    ctx.respond(&r)
}

pub fn leave_group(ctx: &Ctx, req: LeaveGroupRequest) -> Result<Option<Bytes>, RequestError> {
    let v = ctx.version;
    let gid = group_id(&req.group_id);
    let members: Vec<LeaveMember> = if v >= 3 {
        req.members
            .iter()
            .map(|m| LeaveMember {
                member_id: m.member_id.to_string(),
                group_instance_id: m.group_instance_id.as_ref().map(|i| i.to_string()),
            })
            .collect()
    } else {
        vec![LeaveMember {
            member_id: req.member_id.to_string(),
            group_instance_id: None,
        }]
    };
    let result = if gid.is_empty() {
        Err(GroupError::InvalidGroupId)
    } else {
        ctx.broker.groups().leave(&gid, &members)
    };
    let mut r = LeaveGroupResponse::default();
    match result {
        Err(e) => r.error_code = e.code(),
        Ok(codes) => {
            if v >= 3 {
                r.members = members
                    .iter()
                    .zip(codes)
                    .map(|(m, c)| {
                        let mut x = MemberResponse::default();
                        x.member_id = s(m.member_id.clone());
                        x.group_instance_id = m.group_instance_id.clone().map(s);
                        x.error_code = group_result_code(&c);
                        x
                    })
                    .collect();
            } else {
                r.error_code = codes
                    .iter()
                    .map(group_result_code)
                    .find(|c| *c != NONE)
                    .unwrap_or(NONE);
            }
        }
    }
    ctx.respond(&r)
}

// ----- DescribeGroups / ListGroups / DeleteGroups ---------------------------

pub fn describe_groups(
    ctx: &Ctx,
    req: DescribeGroupsRequest,
) -> Result<Option<Bytes>, RequestError> {
    let v = ctx.version;
    let coord = ctx.broker.groups();
    let include_ops = v >= 3 && req.include_authorized_operations;
    let mut r = DescribeGroupsResponse::default();
    for g in &req.groups {
        let gid = group_id(g);
        let mut d = DescribedGroup::default();
        d.group_id = g.clone();
        let not_found = |d: &mut DescribedGroup, message: String| {
            d.group_state = s("Dead");
            if v >= 6 {
                d.error_code = code(ResponseError::GroupIdNotFound);
                d.error_message = Some(s(message));
            }
        };
        match coord.describe(&gid) {
            ClassicDescribe::NotFound => not_found(&mut d, format!("Group {gid} not found.")),
            ClassicDescribe::NotClassic => {
                not_found(&mut d, format!("Group {gid} is not a classic group."))
            }
            ClassicDescribe::Found(x) => {
                d.group_state = s(x.state);
                d.protocol_type = s(x.protocol_type);
                d.protocol_data = s(x.protocol_data);
                d.members = x
                    .members
                    .into_iter()
                    .map(|m| {
                        let mut dm = DescribedGroupMember::default();
                        dm.member_id = s(m.member_id);
                        if v >= 4 {
                            dm.group_instance_id = m.group_instance_id.map(s);
                        }
                        dm.client_id = s(m.client_id);
                        dm.client_host = s(m.client_host);
                        dm.member_metadata = m.metadata;
                        dm.member_assignment = m.assignment;
                        dm
                    })
                    .collect();
                if v >= 3 {
                    d.authorized_operations = if include_ops {
                        GROUP_OPERATIONS_ALL
                    } else {
                        AUTHORIZED_OPERATIONS_OMITTED
                    };
                }
            }
        }
        r.groups.push(d);
    }
    ctx.respond(&r)
}

pub fn list_groups(ctx: &Ctx, req: ListGroupsRequest) -> Result<Option<Bytes>, RequestError> {
    let v = ctx.version;
    let states: Vec<String> = if v >= 4 {
        req.states_filter.iter().map(|x| x.to_string()).collect()
    } else {
        Vec::new()
    };
    let types: Vec<String> = if v >= 5 {
        req.types_filter.iter().map(|x| x.to_string()).collect()
    } else {
        Vec::new()
    };
    let mut r = ListGroupsResponse::default();
    r.groups = ctx
        .broker
        .groups()
        .list(&states, &types)
        .into_iter()
        .map(|l| {
            let mut g = ListedGroup::default();
            g.group_id = GroupId(s(l.group_id));
            g.protocol_type = s(l.protocol_type);
            if v >= 4 {
                g.group_state = s(l.state);
            }
            if v >= 5 {
                g.group_type = s(l.group_type);
            }
            g
        })
        .collect();
    ctx.respond(&r)
}

pub async fn delete_groups(
    ctx: &Ctx,
    req: DeleteGroupsRequest,
) -> Result<Option<Bytes>, RequestError> {
    let coord = ctx.broker.groups();
    let mut seen = HashSet::new();
    let mut r = DeleteGroupsResponse::default();
    for g in &req.groups_names {
        if !seen.insert(g.0.clone()) {
            continue;
        }
        let gid = group_id(g);
        let mut x = DeletableGroupResult::default();
        x.group_id = g.clone();
        x.error_code = group_result_code(&coord.delete(&gid).await);
        r.results.push(x);
    }
    ctx.respond(&r)
}

// ----- offsets ---------------------------------------------------------------

pub async fn offset_commit(
    ctx: &Ctx,
    req: OffsetCommitRequest,
    mut turn: Turn,
) -> Result<Option<Bytes>, RequestError> {
    let v = ctx.version;
    let b = &ctx.broker;
    let gid = group_id(&req.group_id);
    // Per partition: Some(code) decided here, None goes to the coordinator.
    let mut decided: Vec<Vec<Option<i16>>> = Vec::with_capacity(req.topics.len());
    let mut topics: Vec<CommitTopic> = Vec::new();
    let mut slots: Vec<(usize, usize)> = Vec::new();
    for (ti, t) in req.topics.iter().enumerate() {
        let name = t.name.0.to_string();
        let topic = b.topic(&name);
        let mut row = Vec::with_capacity(t.partitions.len());
        let mut ct = CommitTopic {
            name: name.clone(),
            topic_id: topic.as_ref().map_or_else(Uuid::nil, |x| x.id),
            partitions: Vec::new(),
        };
        for (pi, p) in t.partitions.iter().enumerate() {
            let exists = topic
                .as_ref()
                .is_some_and(|x| x.partition(p.partition_index).is_some());
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
        let codes: Vec<i16> = match ctx.broker.groups().commit(cr) {
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
    for (gid, topics, member) in wanted {
        let name = group_id(&gid);
        let member_ref = member.as_ref().map(|(m, e)| (m.as_str(), *e));
        match coord.fetch_offsets(&name, topics, member_ref, &topic_id) {
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
        let topic = b.topic(&name);
        let mut row = Vec::with_capacity(t.partitions.len());
        let mut parts = Vec::new();
        let mut where_ = Vec::new();
        for (pi, p) in t.partitions.iter().enumerate() {
            if topic
                .as_ref()
                .is_some_and(|x| x.partition(p.partition_index).is_some())
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
    let result = if gid.is_empty() {
        Err(GroupError::InvalidGroupId)
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
        .collect();
    ctx.respond(&r)
}

// ----- KIP-848 -----------------------------------------------------------------

pub fn consumer_group_heartbeat(
    ctx: &Ctx,
    req: ConsumerGroupHeartbeatRequest,
) -> Result<Option<Bytes>, RequestError> {
    let v = ctx.version;
    let gid = group_id(&req.group_id);
    let outcome = if gid.is_empty() {
        consumer::HeartbeatResponse::error(GroupError::InvalidRequest(
            "GroupId can't be empty.".to_string(),
        ))
    } else {
        let hr = consumer::HeartbeatRequest {
            group_id: gid,
            member_id: req.member_id.to_string(),
            member_epoch: req.member_epoch,
            instance_id: req.instance_id.as_ref().map(|x| x.to_string()),
            rack_id: req.rack_id.as_ref().map(|x| x.to_string()),
            rebalance_timeout_ms: req.rebalance_timeout_ms,
            subscribed_topic_names: req
                .subscribed_topic_names
                .as_ref()
                .map(|ts| ts.iter().map(|t| t.0.to_string()).collect()),
            subscribed_topic_regex: if v >= 1 {
                req.subscribed_topic_regex.as_ref().map(|x| x.to_string())
            } else {
                None
            },
            server_assignor: req.server_assignor.as_ref().map(|x| x.to_string()),
            topic_partitions: req.topic_partitions.as_ref().map(|ts| {
                ts.iter()
                    .map(|t| (t.topic_id, t.partitions.clone()))
                    .collect()
            }),
            client_id: client_id(ctx),
            client_host: client_host(ctx),
        };
        ctx.broker
            .groups()
            .consumer_heartbeat(hr, &BrokerTopics(&ctx.broker))
    };
    let mut r = ConsumerGroupHeartbeatResponse::default();
    r.error_code = group_code(&outcome.error);
    r.error_message = outcome.error.as_ref().and_then(GroupError::message).map(s);
    r.member_id = outcome.member_id.map(s);
    r.member_epoch = outcome.member_epoch;
    r.heartbeat_interval_ms = outcome.heartbeat_interval_ms;
    r.assignment = outcome.assignment.map(|a| {
        let mut x = CghAssignment::default();
        x.topic_partitions = a
            .into_iter()
            .map(|(t, ps)| {
                let mut tp = CghTopicPartitions::default();
                tp.topic_id = t;
                tp.partitions = ps;
                tp
            })
            .collect();
        x
    });
    ctx.respond(&r)
}

pub fn consumer_group_describe(
    ctx: &Ctx,
    req: ConsumerGroupDescribeRequest,
) -> Result<Option<Bytes>, RequestError> {
    let v = ctx.version;
    let coord = ctx.broker.groups();
    let view = BrokerTopics(&ctx.broker);
    let to_wire = |a: Vec<(Uuid, String, Vec<i32>)>| {
        let mut x = CgdAssignment::default();
        x.topic_partitions = a
            .into_iter()
            .map(|(id, name, ps)| {
                let mut tp = CgdTopicPartitions::default();
                tp.topic_id = id;
                tp.topic_name = TopicName(s(name));
                tp.partitions = ps;
                tp
            })
            .collect();
        x
    };
    let mut r = ConsumerGroupDescribeResponse::default();
    for g in &req.group_ids {
        let gid = group_id(g);
        let mut d = CgdGroup::default();
        d.group_id = g.clone();
        if gid.is_empty() {
            d.error_code = code(ResponseError::InvalidGroupId);
            r.groups.push(d);
            continue;
        }
        match coord.consumer_describe(&gid, &view) {
            Err(e) => {
                d.error_code = e.code();
                d.error_message = e.message().map(s);
            }
            Ok(x) => {
                d.group_state = s(x.state);
                d.group_epoch = x.group_epoch;
                d.assignment_epoch = x.assignment_epoch;
                d.assignor_name = s(x.assignor_name);
                d.authorized_operations = if req.include_authorized_operations {
                    GROUP_OPERATIONS_ALL
                } else {
                    AUTHORIZED_OPERATIONS_OMITTED
                };
                d.members = x
                    .members
                    .into_iter()
                    .map(|m| {
                        let mut cm = CgdMember::default();
                        cm.member_id = s(m.member_id);
                        cm.instance_id = m.instance_id.map(s);
                        cm.rack_id = m.rack_id.map(s);
                        cm.member_epoch = m.member_epoch;
                        cm.client_id = s(m.client_id);
                        cm.client_host = s(m.client_host);
                        cm.subscribed_topic_names = m
                            .subscribed_topic_names
                            .into_iter()
                            .map(|t| TopicName(s(t)))
                            .collect();
                        cm.subscribed_topic_regex = Some(s(m.subscribed_topic_regex));
                        cm.assignment = to_wire(m.assignment);
                        cm.target_assignment = to_wire(m.target_assignment);
                        if v >= 1 {
                            // KIP-1099: 1 is a member of the consumer protocol.
                            cm.member_type = 1;
                        }
                        cm
                    })
                    .collect();
            }
        }
        r.groups.push(d);
    }
    ctx.respond(&r)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use kafka_protocol::messages::*;

    use super::*;
    use crate::handlers::wire_client::{call, CLIENT_ID};
    use crate::versions::advertised;
    use crate::BrokerConfig;

    fn tn(v: &str) -> TopicName {
        TopicName(s(v))
    }

    fn gi(v: &str) -> GroupId {
        GroupId(s(v))
    }

    fn versions(key: ApiKey) -> std::ops::RangeInclusive<i16> {
        let a = advertised(key).unwrap_or_else(|| panic!("{key:?} is advertised"));
        a.min..=a.max
    }

    async fn broker_in(dir: &std::path::Path) -> Arc<Broker> {
        let cfg = BrokerConfig::new(dir.join("data"), "127.0.0.1:9092");
        let b = tokio::task::spawn_blocking(move || Broker::open_running(cfg))
            .await
            .expect("join")
            .expect("open");
        if b.topic("t").is_none() {
            b.create_topic("t", 3, Default::default(), false)
                .await
                .expect("create t");
        }
        b
    }

    fn protocol(
        name: &str,
        meta: &'static [u8],
    ) -> kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol {
        let mut p =
            kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol::default();
        p.name = s(name);
        p.metadata = Bytes::from_static(meta);
        p
    }

    fn join(group: &str, member: &str, instance: Option<&str>, v: i16) -> JoinGroupRequest {
        let mut r = JoinGroupRequest::default();
        r.group_id = gi(group);
        r.session_timeout_ms = 10_000;
        if v >= 1 {
            r.rebalance_timeout_ms = 10_000;
        }
        r.member_id = s(member);
        if v >= 5 {
            r.group_instance_id = instance.map(s);
        }
        r.protocol_type = s("consumer");
        r.protocols = vec![protocol("range", b"meta")];
        r
    }

    fn sync(
        group: &str,
        member: &str,
        generation: i32,
        v: i16,
        assign: Option<&'static [u8]>,
    ) -> SyncGroupRequest {
        let mut r = SyncGroupRequest::default();
        r.group_id = gi(group);
        r.generation_id = generation;
        r.member_id = s(member);
        if v >= 5 {
            r.protocol_type = Some(s("consumer"));
            r.protocol_name = Some(s("range"));
        }
        if let Some(a) = assign {
            let mut x =
                kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment::default();
            x.member_id = s(member);
            x.assignment = Bytes::from_static(a);
            r.assignments = vec![x];
        }
        r
    }

    /// Joins (with the handshake when the version has it) and syncs a
    /// one-member group; returns (member id, generation).
    async fn form_group(b: &Arc<Broker>, group: &str, jv: i16) -> (String, i32) {
        let sv = jv.min(5);
        let mut member = String::new();
        let r: JoinGroupResponse =
            call(b, ApiKey::JoinGroup, jv, &join(group, &member, None, jv)).await;
        let r = if jv >= 4 {
            assert_eq!(r.error_code, code(ResponseError::MemberIdRequired), "v{jv}");
            member = r.member_id.to_string();
            call(b, ApiKey::JoinGroup, jv, &join(group, &member, None, jv)).await
        } else {
            r
        };
        assert_eq!(r.error_code, NONE, "JoinGroup v{jv}");
        member = r.member_id.to_string();
        assert_eq!(r.leader.as_str(), member);
        assert_eq!(r.members.len(), 1);
        assert_eq!(r.protocol_name.as_ref().map(|p| p.as_str()), Some("range"));
        if jv >= 7 {
            assert_eq!(
                r.protocol_type.as_ref().map(|p| p.as_str()),
                Some("consumer")
            );
        }
        let g = r.generation_id;
        let sr: SyncGroupResponse = call(
            b,
            ApiKey::SyncGroup,
            sv,
            &sync(group, &member, g, sv, Some(b"asg")),
        )
        .await;
        assert_eq!(sr.error_code, NONE, "SyncGroup v{sv}");
        assert_eq!(sr.assignment, Bytes::from_static(b"asg"));
        (member, g)
    }

    #[tokio::test]
    async fn find_coordinator_at_every_version() {
        let dir = tempfile::tempdir().expect("tempdir");
        let b = broker_in(dir.path()).await;
        for v in versions(ApiKey::FindCoordinator) {
            let mut req = FindCoordinatorRequest::default();
            if v >= 4 {
                req.coordinator_keys = vec![s("g1"), s("g2")];
                req.key_type = KEY_TYPE_TRANSACTION;
            } else {
                req.key = s("g1");
            }
            let r: FindCoordinatorResponse = call(&b, ApiKey::FindCoordinator, v, &req).await;
            if v >= 4 {
                assert_eq!(r.coordinators.len(), 2);
                for c in &r.coordinators {
                    assert_eq!((c.error_code, c.node_id.0, c.port), (NONE, 0, 9092));
                    assert_eq!(c.host.as_str(), "127.0.0.1");
                }
                assert_eq!(r.coordinators[1].key.as_str(), "g2");
            } else {
                assert_eq!((r.error_code, r.node_id.0, r.port), (NONE, 0, 9092));
                assert_eq!(r.host.as_str(), "127.0.0.1");
            }
        }
        // Share coordinators are not served.
        let mut req = FindCoordinatorRequest::default();
        req.key_type = 2;
        req.coordinator_keys = vec![s("x")];
        let r: FindCoordinatorResponse = call(&b, ApiKey::FindCoordinator, 6, &req).await;
        assert_eq!(
            r.coordinators[0].error_code,
            code(ResponseError::InvalidRequest)
        );
    }

    #[tokio::test]
    async fn the_classic_protocol_at_every_version() {
        let dir = tempfile::tempdir().expect("tempdir");
        let b = broker_in(dir.path()).await;
        for jv in versions(ApiKey::JoinGroup) {
            let group = format!("g{jv}");
            let (member, g) = form_group(&b, &group, jv).await;
            let hv = jv.min(4);
            let mut hb = HeartbeatRequest::default();
            hb.group_id = gi(&group);
            hb.generation_id = g;
            hb.member_id = s(&member);
            let r: HeartbeatResponse = call(&b, ApiKey::Heartbeat, hv, &hb).await;
            assert_eq!(r.error_code, NONE, "Heartbeat v{hv}");
            hb.generation_id = g + 1;
            let r: HeartbeatResponse = call(&b, ApiKey::Heartbeat, hv, &hb).await;
            assert_eq!(r.error_code, code(ResponseError::IllegalGeneration));
            let lv = jv.min(5);
            let mut lr = LeaveGroupRequest::default();
            lr.group_id = gi(&group);
            if lv >= 3 {
                let mut m =
                    kafka_protocol::messages::leave_group_request::MemberIdentity::default();
                m.member_id = s(&member);
                let mut ghost = m.clone();
                ghost.member_id = s("ghost");
                lr.members = vec![m, ghost];
            } else {
                lr.member_id = s(&member);
            }
            let r: LeaveGroupResponse = call(&b, ApiKey::LeaveGroup, lv, &lr).await;
            assert_eq!(r.error_code, NONE, "LeaveGroup v{lv}");
            if lv >= 3 {
                let codes: Vec<i16> = r.members.iter().map(|m| m.error_code).collect();
                assert_eq!(codes, vec![NONE, code(ResponseError::UnknownMemberId)]);
            }
            // Leaving again: the member is unknown.
            let r: LeaveGroupResponse = call(&b, ApiKey::LeaveGroup, lv, &lr).await;
            if lv < 3 {
                assert_eq!(r.error_code, code(ResponseError::UnknownMemberId));
            }
        }
        // Bad input.
        let mut j = join("", "", None, 9);
        let r: JoinGroupResponse = call(&b, ApiKey::JoinGroup, 9, &j).await;
        assert_eq!(r.error_code, code(ResponseError::InvalidGroupId));
        j.group_id = gi("x");
        j.session_timeout_ms = 1000;
        let r: JoinGroupResponse = call(&b, ApiKey::JoinGroup, 9, &j).await;
        assert_eq!(r.error_code, code(ResponseError::InvalidSessionTimeout));
        j.session_timeout_ms = 1_800_001;
        let r: JoinGroupResponse = call(&b, ApiKey::JoinGroup, 9, &j).await;
        assert_eq!(r.error_code, code(ResponseError::InvalidSessionTimeout));
        let mut sr = sync("x", "m", 1, 5, None);
        sr.protocol_name = None;
        let r: SyncGroupResponse = call(&b, ApiKey::SyncGroup, 5, &sr).await;
        assert_eq!(r.error_code, code(ResponseError::InconsistentGroupProtocol));
        let r: SyncGroupResponse =
            call(&b, ApiKey::SyncGroup, 4, &sync("nope", "m", 1, 4, None)).await;
        assert_eq!(r.error_code, code(ResponseError::UnknownMemberId));
        let mut hb = HeartbeatRequest::default();
        hb.group_id = gi("");
        let r: HeartbeatResponse = call(&b, ApiKey::Heartbeat, 4, &hb).await;
        assert_eq!(r.error_code, code(ResponseError::InvalidGroupId));
    }

    #[tokio::test]
    async fn describe_list_and_delete_at_every_version() {
        let dir = tempfile::tempdir().expect("tempdir");
        let b = broker_in(dir.path()).await;
        let (member, _) = form_group(&b, "live", 9).await;
        let (gone, _) = form_group(&b, "gone", 5).await;
        let mut lr = LeaveGroupRequest::default();
        lr.group_id = gi("gone");
        lr.member_id = s(&gone);
        let r: LeaveGroupResponse = call(&b, ApiKey::LeaveGroup, 0, &lr).await;
        assert_eq!(r.error_code, NONE);
        for v in versions(ApiKey::DescribeGroups) {
            let mut req = DescribeGroupsRequest::default();
            req.groups = vec![gi("live"), gi("gone"), gi("unknown")];
            req.include_authorized_operations = v >= 3;
            let r: DescribeGroupsResponse = call(&b, ApiKey::DescribeGroups, v, &req).await;
            let live = &r.groups[0];
            assert_eq!(
                (live.error_code, live.group_state.as_str()),
                (NONE, "Stable")
            );
            assert_eq!(live.protocol_type.as_str(), "consumer");
            assert_eq!(live.protocol_data.as_str(), "range");
            assert_eq!(live.members[0].member_id.as_str(), member);
            assert_eq!(live.members[0].client_id.as_str(), CLIENT_ID);
            assert_eq!(live.members[0].client_host.as_str(), "/127.0.0.1");
            assert_eq!(
                live.members[0].member_assignment,
                Bytes::from_static(b"asg")
            );
            assert_eq!(live.members[0].member_metadata, Bytes::from_static(b"meta"));
            if v >= 3 {
                assert_eq!(live.authorized_operations, GROUP_OPERATIONS_ALL);
            }
            assert_eq!(r.groups[1].group_state.as_str(), "Empty");
            assert!(r.groups[1].members.is_empty());
            assert_eq!(r.groups[2].group_state.as_str(), "Dead");
            let want = if v >= 6 {
                code(ResponseError::GroupIdNotFound)
            } else {
                NONE
            };
            assert_eq!(r.groups[2].error_code, want);
        }
        for v in versions(ApiKey::ListGroups) {
            let mut req = ListGroupsRequest::default();
            let r: ListGroupsResponse = call(&b, ApiKey::ListGroups, v, &req).await;
            let mut names: Vec<String> =
                r.groups.iter().map(|g| g.group_id.0.to_string()).collect();
            names.sort();
            assert_eq!(names, vec!["gone", "live"], "v{v}");
            if v >= 4 {
                req.states_filter = vec![s("stable")];
                let r: ListGroupsResponse = call(&b, ApiKey::ListGroups, v, &req).await;
                assert_eq!(r.groups.len(), 1);
                assert_eq!(r.groups[0].group_state.as_str(), "Stable");
            }
            if v >= 5 {
                req.states_filter.clear();
                req.types_filter = vec![s("Consumer")];
                let r: ListGroupsResponse = call(&b, ApiKey::ListGroups, v, &req).await;
                assert!(r.groups.is_empty());
                req.types_filter = vec![s("classic")];
                let r: ListGroupsResponse = call(&b, ApiKey::ListGroups, v, &req).await;
                assert_eq!(r.groups.len(), 2);
                assert!(r.groups.iter().all(|g| g.group_type.as_str() == "classic"));
            }
        }
        for v in versions(ApiKey::DeleteGroups) {
            let mut req = DeleteGroupsRequest::default();
            req.groups_names = vec![gi("live"), gi("unknown"), gi("live")];
            let r: DeleteGroupsResponse = call(&b, ApiKey::DeleteGroups, v, &req).await;
            let codes: Vec<i16> = r.results.iter().map(|x| x.error_code).collect();
            assert_eq!(
                codes,
                vec![
                    code(ResponseError::NonEmptyGroup),
                    code(ResponseError::GroupIdNotFound)
                ]
            );
        }
        let mut req = DeleteGroupsRequest::default();
        req.groups_names = vec![gi("gone")];
        let r: DeleteGroupsResponse = call(&b, ApiKey::DeleteGroups, 2, &req).await;
        assert_eq!(r.results[0].error_code, NONE);
        assert!(matches!(
            b.groups().describe("gone"),
            ClassicDescribe::NotFound
        ));
    }

    fn commit(group: &str, topic: &str, partitions: &[(i32, i64)], v: i16) -> OffsetCommitRequest {
        let mut r = OffsetCommitRequest::default();
        r.group_id = gi(group);
        r.generation_id_or_member_epoch = -1;
        let mut t =
            kafka_protocol::messages::offset_commit_request::OffsetCommitRequestTopic::default();
        t.name = tn(topic);
        t.partitions = partitions
            .iter()
            .map(|(p, o)| {
                let mut x = kafka_protocol::messages::offset_commit_request::OffsetCommitRequestPartition::default();
                x.partition_index = *p;
                x.committed_offset = *o;
                if v >= 6 {
                    x.committed_leader_epoch = 0;
                }
                x.committed_metadata = Some(s("meta"));
                x
            })
            .collect();
        r.topics = vec![t];
        r
    }

    #[tokio::test]
    async fn offsets_at_every_version_and_across_a_restart() {
        let dir = tempfile::tempdir().expect("tempdir");
        let b = broker_in(dir.path()).await;
        for v in versions(ApiKey::OffsetCommit) {
            let group = format!("c{v}");
            let r: OffsetCommitResponse = call(
                &b,
                ApiKey::OffsetCommit,
                v,
                &commit(&group, "t", &[(0, 10 + i64::from(v)), (1, 20), (7, 1)], v),
            )
            .await;
            let codes: Vec<i16> = r.topics[0]
                .partitions
                .iter()
                .map(|p| p.error_code)
                .collect();
            assert_eq!(
                codes,
                vec![NONE, NONE, code(ResponseError::UnknownTopicOrPartition)],
                "OffsetCommit v{v}"
            );
            let r: OffsetCommitResponse = call(
                &b,
                ApiKey::OffsetCommit,
                v,
                &commit(&group, "missing", &[(0, 1)], v),
            )
            .await;
            assert_eq!(
                r.topics[0].partitions[0].error_code,
                code(ResponseError::UnknownTopicOrPartition)
            );
            // A member commit into an unknown group.
            let mut c = commit("nogroup", "t", &[(0, 1)], v);
            c.generation_id_or_member_epoch = 1;
            c.member_id = s("m");
            let r: OffsetCommitResponse = call(&b, ApiKey::OffsetCommit, v, &c).await;
            let want = if v >= 9 {
                code(ResponseError::GroupIdNotFound)
            } else {
                code(ResponseError::IllegalGeneration)
            };
            assert_eq!(r.topics[0].partitions[0].error_code, want, "v{v}");
        }
        for v in versions(ApiKey::OffsetFetch) {
            let mut req = OffsetFetchRequest::default();
            let mut topic =
                kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic::default();
            topic.name = tn("t");
            topic.partition_indexes = vec![0, 1, 2];
            if v >= 8 {
                let mut g1 = kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup::default();
                g1.group_id = gi("c9");
                let mut t = kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopics::default();
                t.name = tn("t");
                t.partition_indexes = vec![0, 1, 2];
                g1.topics = Some(vec![t]);
                let mut g2 = g1.clone();
                g2.group_id = gi("c2");
                g2.topics = None;
                req.groups = vec![g1, g2];
                req.require_stable = true;
            } else {
                req.group_id = gi("c9");
                req.topics = Some(vec![topic]);
                if v >= 7 {
                    req.require_stable = true;
                }
            }
            let r: OffsetFetchResponse = call(&b, ApiKey::OffsetFetch, v, &req).await;
            if v >= 8 {
                let g1 = &r.groups[0];
                assert_eq!(g1.error_code, NONE);
                let offs: Vec<i64> = g1.topics[0]
                    .partitions
                    .iter()
                    .map(|p| p.committed_offset)
                    .collect();
                assert_eq!(offs, vec![19, 20, -1]);
                assert_eq!(
                    g1.topics[0].partitions[0]
                        .metadata
                        .as_ref()
                        .map(|m| m.as_str()),
                    Some("meta")
                );
                assert_eq!(g1.topics[0].partitions[0].committed_leader_epoch, 0);
                assert_eq!(g1.topics[0].partitions[2].committed_leader_epoch, -1);
                // All partitions of c2 (committed with v2: no leader epoch).
                let g2 = &r.groups[1];
                let mut all: Vec<(i32, i64, i32)> = g2.topics[0]
                    .partitions
                    .iter()
                    .map(|p| {
                        (
                            p.partition_index,
                            p.committed_offset,
                            p.committed_leader_epoch,
                        )
                    })
                    .collect();
                all.sort();
                assert_eq!(all, vec![(0, 12, -1), (1, 20, -1)]);
            } else {
                if v >= 2 {
                    assert_eq!(r.error_code, NONE);
                }
                let offs: Vec<i64> = r.topics[0]
                    .partitions
                    .iter()
                    .map(|p| p.committed_offset)
                    .collect();
                assert_eq!(offs, vec![19, 20, -1], "OffsetFetch v{v}");
                if v >= 5 {
                    assert_eq!(r.topics[0].partitions[0].committed_leader_epoch, 0);
                }
            }
        }
        // OffsetDelete: the group is Empty, so offsets may go.
        let mut d = OffsetDeleteRequest::default();
        d.group_id = gi("c9");
        let mut t =
            kafka_protocol::messages::offset_delete_request::OffsetDeleteRequestTopic::default();
        t.name = tn("t");
        let mut p =
            kafka_protocol::messages::offset_delete_request::OffsetDeleteRequestPartition::default(
            );
        p.partition_index = 1;
        let mut p9 = p.clone();
        p9.partition_index = 9;
        t.partitions = vec![p, p9];
        d.topics = vec![t];
        let r: OffsetDeleteResponse = call(&b, ApiKey::OffsetDelete, 0, &d).await;
        assert_eq!(r.error_code, NONE);
        let codes: Vec<i16> = r.topics[0]
            .partitions
            .iter()
            .map(|p| p.error_code)
            .collect();
        assert_eq!(
            codes,
            vec![NONE, code(ResponseError::UnknownTopicOrPartition)]
        );
        d.group_id = gi("unknown");
        let r: OffsetDeleteResponse = call(&b, ApiKey::OffsetDelete, 0, &d).await;
        assert_eq!(r.error_code, code(ResponseError::GroupIdNotFound));
        // A non-empty consumer group refuses to delete offsets of topics it
        // subscribes to (its metadata is not a subscription here: unknown
        // subscriptions count as subscribed).
        let _ = form_group(&b, "busy", 9).await;
        d.group_id = gi("busy");
        let r: OffsetDeleteResponse = call(&b, ApiKey::OffsetDelete, 0, &d).await;
        assert_eq!(
            r.topics[0].partitions[0].error_code,
            code(ResponseError::GroupSubscribedToTopic)
        );

        // Restart: offsets come back, groups are Empty. (The group's protocol
        // type is written in the background; an OffsetFetch waits for it.)
        let (_, wait) = b
            .groups()
            .fetch_offsets("busy", None, None, &|_| None)
            .expect("fetch");
        if let Some(w) = wait {
            w.wait().await.expect("durable");
        }
        b.close().expect("close");
        drop(b);
        let b = broker_in(dir.path()).await;
        let (topics, _) = b
            .groups()
            .fetch_offsets("c9", None, None, &|n| b.topic(n).map(|t| t.id))
            .expect("fetch");
        let offs: Vec<(i32, i64)> = topics[0]
            .partitions
            .iter()
            .map(|p| (p.partition, p.offset))
            .collect();
        assert_eq!(offs, vec![(0, 19)]);
        let listed = b.groups().list(&[], &[]);
        assert!(listed.iter().all(|l| l.state == "Empty"), "{listed:?}");
        assert!(listed
            .iter()
            .any(|l| l.group_id == "busy" && l.protocol_type == "consumer"));
    }

    #[tokio::test]
    async fn offsets_of_a_deleted_topic_do_not_apply_to_its_successor() {
        let dir = tempfile::tempdir().expect("tempdir");
        let b = broker_in(dir.path()).await;
        let r: OffsetCommitResponse =
            call(&b, ApiKey::OffsetCommit, 9, &commit("g", "t", &[(0, 5)], 9)).await;
        assert_eq!(r.topics[0].partitions[0].error_code, NONE);
        b.delete_topic("t").await.expect("delete");
        b.create_topic("t", 1, Default::default(), false)
            .await
            .expect("recreate");
        let (topics, _) = b
            .groups()
            .fetch_offsets("g", Some(vec![("t".into(), vec![0])]), None, &|n| {
                b.topic(n).map(|t| t.id)
            })
            .expect("fetch");
        assert_eq!(topics[0].partitions[0].offset, -1);
    }

    #[tokio::test]
    async fn the_consumer_protocol_through_the_wire() {
        let dir = tempfile::tempdir().expect("tempdir");
        let b = broker_in(dir.path()).await;
        let tid = b.topic("t").expect("t").id;
        for v in versions(ApiKey::ConsumerGroupHeartbeat) {
            let group = format!("cg{v}");
            let mut req = ConsumerGroupHeartbeatRequest::default();
            req.group_id = gi(&group);
            req.member_id = s(format!("member-{v}"));
            req.member_epoch = 0;
            req.rebalance_timeout_ms = 30_000;
            req.subscribed_topic_names = Some(vec![tn("t")]);
            req.topic_partitions = Some(Vec::new());
            let r: ConsumerGroupHeartbeatResponse =
                call(&b, ApiKey::ConsumerGroupHeartbeat, v, &req).await;
            assert_eq!(r.error_code, NONE, "{:?}", r.error_message);
            assert_eq!(r.member_epoch, 1);
            let a = r.assignment.expect("assignment");
            assert_eq!(a.topic_partitions[0].topic_id, tid);
            assert_eq!(a.topic_partitions[0].partitions, vec![0, 1, 2]);
            assert_eq!(r.heartbeat_interval_ms, 5_000);

            // OffsetCommit with the member epoch.
            let mut c = commit(&group, "t", &[(0, 3)], 9);
            c.member_id = req.member_id.clone();
            c.generation_id_or_member_epoch = 1;
            let cr: OffsetCommitResponse = call(&b, ApiKey::OffsetCommit, 9, &c).await;
            assert_eq!(cr.topics[0].partitions[0].error_code, NONE);
            c.generation_id_or_member_epoch = 0;
            let cr: OffsetCommitResponse = call(&b, ApiKey::OffsetCommit, 9, &c).await;
            assert_eq!(
                cr.topics[0].partitions[0].error_code,
                code(ResponseError::StaleMemberEpoch)
            );
            let cr: OffsetCommitResponse = call(&b, ApiKey::OffsetCommit, 8, &c).await;
            assert_eq!(
                cr.topics[0].partitions[0].error_code,
                code(ResponseError::UnsupportedVersion)
            );

            for dv in versions(ApiKey::ConsumerGroupDescribe) {
                let mut d = ConsumerGroupDescribeRequest::default();
                d.group_ids = vec![gi(&group), gi("g-classic"), gi("nope")];
                let r: ConsumerGroupDescribeResponse =
                    call(&b, ApiKey::ConsumerGroupDescribe, dv, &d).await;
                let g = &r.groups[0];
                assert_eq!((g.error_code, g.group_state.as_str()), (NONE, "Stable"));
                assert_eq!((g.group_epoch, g.assignment_epoch), (1, 1));
                assert_eq!(g.assignor_name.as_str(), "uniform");
                let m = &g.members[0];
                assert_eq!(m.assignment.topic_partitions[0].topic_name.as_str(), "t");
                assert_eq!(m.client_id.as_str(), CLIENT_ID);
                assert_eq!(m.client_host.as_str(), "/127.0.0.1");
                assert_eq!(r.groups[2].error_code, code(ResponseError::GroupIdNotFound));
            }
            // Leave.
            let mut l = ConsumerGroupHeartbeatRequest::default();
            l.group_id = gi(&group);
            l.member_id = req.member_id.clone();
            l.member_epoch = -1;
            l.rebalance_timeout_ms = -1;
            let r: ConsumerGroupHeartbeatResponse =
                call(&b, ApiKey::ConsumerGroupHeartbeat, v, &l).await;
            assert_eq!((r.error_code, r.member_epoch), (NONE, -1));
            let listed = b.groups().list(&[], &["consumer".to_string()]);
            assert!(listed
                .iter()
                .any(|x| x.group_id == group && x.state == "Empty"));
        }
        // A classic group with members cannot be joined with the new protocol.
        let _ = form_group(&b, "g-classic", 9).await;
        let mut req = ConsumerGroupHeartbeatRequest::default();
        req.group_id = gi("g-classic");
        req.member_id = s("x");
        req.rebalance_timeout_ms = 30_000;
        req.subscribed_topic_names = Some(vec![tn("t")]);
        req.topic_partitions = Some(Vec::new());
        let r: ConsumerGroupHeartbeatResponse =
            call(&b, ApiKey::ConsumerGroupHeartbeat, 1, &req).await;
        assert_eq!(r.error_code, code(ResponseError::GroupIdNotFound));
        // And a consumer group is not described by DescribeGroups.
        req.group_id = gi("cg-live");
        let r: ConsumerGroupHeartbeatResponse =
            call(&b, ApiKey::ConsumerGroupHeartbeat, 1, &req).await;
        assert_eq!(r.error_code, NONE);
        let mut d = DescribeGroupsRequest::default();
        d.groups = vec![gi("cg-live")];
        let r: DescribeGroupsResponse = call(&b, ApiKey::DescribeGroups, 6, &d).await;
        assert_eq!(r.groups[0].error_code, code(ResponseError::GroupIdNotFound));
        let j: JoinGroupResponse =
            call(&b, ApiKey::JoinGroup, 9, &join("cg-live", "", None, 9)).await;
        assert_eq!(j.error_code, code(ResponseError::InconsistentGroupProtocol));
    }

    #[tokio::test]
    async fn regex_subscriptions_through_the_wire() {
        let dir = tempfile::tempdir().expect("tempdir");
        let b = broker_in(dir.path()).await;
        b.create_topic("re-a", 2, Default::default(), false)
            .await
            .expect("create re-a");
        let a = b.topic("re-a").expect("re-a").id;
        let mut req = ConsumerGroupHeartbeatRequest::default();
        req.group_id = gi("cg-re");
        req.member_id = s("member-re");
        req.rebalance_timeout_ms = 30_000;
        req.subscribed_topic_regex = Some(s("re-.*"));
        req.topic_partitions = Some(Vec::new());
        let r: ConsumerGroupHeartbeatResponse =
            call(&b, ApiKey::ConsumerGroupHeartbeat, 1, &req).await;
        assert_eq!(r.error_code, NONE, "{:?}", r.error_message);
        let got = r.assignment.expect("assignment");
        assert_eq!(got.topic_partitions.len(), 1);
        assert_eq!(got.topic_partitions[0].topic_id, a);
        assert_eq!(got.topic_partitions[0].partitions, vec![0, 1]);

        for dv in versions(ApiKey::ConsumerGroupDescribe) {
            let mut d = ConsumerGroupDescribeRequest::default();
            d.group_ids = vec![gi("cg-re")];
            let r: ConsumerGroupDescribeResponse =
                call(&b, ApiKey::ConsumerGroupDescribe, dv, &d).await;
            let m = &r.groups[0].members[0];
            assert_eq!(m.subscribed_topic_regex.as_deref(), Some("re-.*"));
            assert!(m.subscribed_topic_names.is_empty());
        }

        // A topic created later that matches is assigned on the next beat.
        b.create_topic("re-b", 1, Default::default(), false)
            .await
            .expect("create re-b");
        let rb = b.topic("re-b").expect("re-b").id;
        let mut hb = ConsumerGroupHeartbeatRequest::default();
        hb.group_id = gi("cg-re");
        hb.member_id = s("member-re");
        hb.member_epoch = 1;
        hb.rebalance_timeout_ms = -1;
        let r: ConsumerGroupHeartbeatResponse =
            call(&b, ApiKey::ConsumerGroupHeartbeat, 1, &hb).await;
        assert_eq!((r.error_code, r.member_epoch), (NONE, 2));
        let got = r.assignment.expect("assignment");
        let mut ids: Vec<Uuid> = got.topic_partitions.iter().map(|t| t.topic_id).collect();
        ids.sort();
        let mut want = vec![a, rb];
        want.sort();
        assert_eq!(ids, want);

        // An invalid regex: INVALID_REGULAR_EXPRESSION (128).
        let mut bad = req.clone();
        bad.member_id = s("member-bad");
        bad.subscribed_topic_regex = Some(s("re-[a"));
        let r: ConsumerGroupHeartbeatResponse =
            call(&b, ApiKey::ConsumerGroupHeartbeat, 1, &bad).await;
        assert_eq!(r.error_code, 128);
        assert_eq!(r.error_code, code(ResponseError::InvalidRegularExpression));
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn require_stable_waits_for_a_transaction_holding_an_offset() {
        let dir = tempfile::tempdir().expect("tempdir");
        let b = broker_in(dir.path()).await;
        let mut ip = InitProducerIdRequest::default();
        ip.transactional_id = Some(TransactionalId(s("tx")));
        ip.transaction_timeout_ms = 60_000;
        ip.producer_id = ProducerId(-1);
        ip.producer_epoch = -1;
        let r: InitProducerIdResponse = call(&b, ApiKey::InitProducerId, 4, &ip).await;
        assert_eq!(r.error_code, NONE);
        let (pid, epoch) = (r.producer_id, r.producer_epoch);
        let mut ao = AddOffsetsToTxnRequest::default();
        ao.transactional_id = TransactionalId(s("tx"));
        ao.producer_id = pid;
        ao.producer_epoch = epoch;
        ao.group_id = gi("stable");
        let r: AddOffsetsToTxnResponse = call(&b, ApiKey::AddOffsetsToTxn, 3, &ao).await;
        assert_eq!(r.error_code, NONE);
        let mut tp =
            kafka_protocol::messages::txn_offset_commit_request::TxnOffsetCommitRequestPartition::default();
        tp.partition_index = 0;
        tp.committed_offset = 5;
        let mut tt =
            kafka_protocol::messages::txn_offset_commit_request::TxnOffsetCommitRequestTopic::default();
        tt.name = tn("t");
        tt.partitions = vec![tp];
        let mut tc = TxnOffsetCommitRequest::default();
        tc.transactional_id = TransactionalId(s("tx"));
        tc.group_id = gi("stable");
        tc.producer_id = pid;
        tc.producer_epoch = epoch;
        tc.topics = vec![tt];
        let r: TxnOffsetCommitResponse = call(&b, ApiKey::TxnOffsetCommit, 3, &tc).await;
        assert_eq!(r.topics[0].partitions[0].error_code, NONE);

        // (error, offset) of partitions 0 and 1 of t for group "stable".
        let fetch = |v: i16, require_stable: bool| {
            let b = b.clone();
            async move {
                let mut req = OffsetFetchRequest::default();
                req.require_stable = require_stable;
                let parts: Vec<(i16, i64)> = if v >= 8 {
                    let mut t = kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopics::default();
                    t.name = tn("t");
                    t.partition_indexes = vec![0, 1];
                    let mut g = kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup::default();
                    g.group_id = gi("stable");
                    g.topics = Some(vec![t]);
                    req.groups = vec![g];
                    let r: OffsetFetchResponse = call(&b, ApiKey::OffsetFetch, v, &req).await;
                    assert_eq!(r.groups[0].error_code, NONE);
                    r.groups[0].topics[0]
                        .partitions
                        .iter()
                        .map(|p| (p.error_code, p.committed_offset))
                        .collect()
                } else {
                    let mut t = kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic::default();
                    t.name = tn("t");
                    t.partition_indexes = vec![0, 1];
                    req.group_id = gi("stable");
                    req.topics = Some(vec![t]);
                    let r: OffsetFetchResponse = call(&b, ApiKey::OffsetFetch, v, &req).await;
                    assert_eq!(r.error_code, NONE);
                    r.topics[0]
                        .partitions
                        .iter()
                        .map(|p| (p.error_code, p.committed_offset))
                        .collect()
                };
                parts
            }
        };
        let unstable = code(ResponseError::UnstableOffsetCommit);
        for v in 7..=9 {
            assert_eq!(
                fetch(v, true).await,
                vec![(unstable, -1), (NONE, -1)],
                "v{v} require_stable"
            );
            assert_eq!(fetch(v, false).await, vec![(NONE, -1), (NONE, -1)], "v{v}");
        }
        // Before v7 there is no require_stable: the committed state is answered.
        assert_eq!(fetch(6, false).await, vec![(NONE, -1), (NONE, -1)]);

        let mut end = EndTxnRequest::default();
        end.transactional_id = TransactionalId(s("tx"));
        end.producer_id = pid;
        end.producer_epoch = epoch;
        end.committed = true;
        let r: EndTxnResponse = call(&b, ApiKey::EndTxn, 3, &end).await;
        assert_eq!(r.error_code, NONE);
        for v in 7..=9 {
            assert_eq!(
                fetch(v, true).await,
                vec![(NONE, 5), (NONE, -1)],
                "v{v} after the commit"
            );
        }
    }

    #[tokio::test]
    async fn session_timeout_bounds_follow_the_broker_flags() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cfg = BrokerConfig::new(dir.path().join("data"), "127.0.0.1:9092");
        cfg.group_min_session_timeout_ms = 500;
        cfg.group_max_session_timeout_ms = 2_000;
        let b = tokio::task::spawn_blocking(move || Broker::open_running(cfg))
            .await
            .expect("join")
            .expect("open");
        let code_for = |timeout_ms: i32| {
            let b = b.clone();
            async move {
                let mut j = join("bounds", "", None, 9);
                j.session_timeout_ms = timeout_ms;
                let r: JoinGroupResponse = call(&b, ApiKey::JoinGroup, 9, &j).await;
                r.error_code
            }
        };
        let invalid = code(ResponseError::InvalidSessionTimeout);
        assert_eq!(code_for(499).await, invalid);
        assert_eq!(code_for(2_001).await, invalid);
        // In bounds: the first join of v4+ asks for a member id.
        assert_eq!(code_for(500).await, code(ResponseError::MemberIdRequired));
        assert_eq!(code_for(2_000).await, code(ResponseError::MemberIdRequired));
    }
}
