//! Cluster-shape APIs, answered as Kafka 4.4's KRaft brokers answer them:
//! DescribeQuorum, ListPartitionReassignments,
//! AlterPartitionReassignments, AlterReplicaLogDirs, ListConfigResources.
//!
//! DescribeQuorum reports es's metadata quorum (es-meta) as its leader sees
//! it: the Raft term as the leader epoch, Raft indexes as offsets of
//! `__cluster_metadata`-0. Reassignments go through the metadata quorum
//! (`alter_reassignments.v1`) and are listed from its applied image; the
//! data moves by replication (docs/replication.md). Every replica lives in
//! its broker's one log directory (the data directory).

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use es_auth::acl::AclOperation;
use es_meta::records::{code as meta_code, MetaRequest, Reassignment, TopicPartitions};
use es_meta::MetaImage;
use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::alter_replica_log_dirs_response::{
    AlterReplicaLogDirPartitionResult, AlterReplicaLogDirTopicResult,
};
use kafka_protocol::messages::describe_quorum_response::{
    self as dq, Listener, Node, ReplicaState,
};
use kafka_protocol::messages::list_config_resources_response::ConfigResource;
use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
    AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse, BrokerId, DescribeQuorumRequest,
    DescribeQuorumResponse, ListConfigResourcesRequest, ListConfigResourcesResponse,
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::admin::{RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_TOPIC};
use super::authz::CLUSTER_AUTHORIZATION_FAILED;
use super::{Ctx, RequestError};
use crate::errors::{code, ResponseError, NONE};

/// KRaft's metadata topic, the one partition DescribeQuorum describes.
pub const METADATA_TOPIC: &str = "__cluster_metadata";
/// Kafka's ConfigResource.Type codes ListConfigResources knows besides
/// topic, broker and broker logger.
pub const RESOURCE_CLIENT_METRICS: i8 = 16;
pub const RESOURCE_GROUP: i8 = 32;

fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

/// DescribeQuorum (v0-2): the metadata quorum as its leader sees it,
/// forwarded there from any node. Voters' and observers' log end offsets
/// are the Raft index after the last entry the leader knows each holds;
/// the high watermark is the index after the leader's last applied entry.
/// Fetch times are known only for the leader itself (-1 for the others,
/// Kafka's "unknown"). The nodes' listeners are their Raft listeners
/// (CONTROLLER); a one-voter quorum without one reports the broker's own.
pub async fn describe_quorum(
    ctx: &Ctx,
    req: DescribeQuorumRequest,
) -> Result<Option<Bytes>, RequestError> {
    let v = ctx.version;
    let b = &ctx.broker;
    let now = b.clock().now_ms();
    let mut r = DescribeQuorumResponse::default();
    if v >= 2 {
        r.error_message = Some(StrBytes::default());
    }
    if !ctx.allowed_on_cluster(AclOperation::Describe) {
        r.error_code = code(ResponseError::ClusterAuthorizationFailed);
        if v >= 2 {
            r.error_message = Some(s(CLUSTER_AUTHORIZATION_FAILED));
        }
        return ctx.respond(&r);
    }
    // Kafka's KRaft client answers only a request for exactly one topic
    // with exactly one partition; anything else gets
    // UNKNOWN_TOPIC_OR_PARTITION for every partition it names.
    let one = req.topics.len() == 1 && req.topics.iter().all(|t| t.partitions.len() == 1);
    let wanted = one
        && req.topics.iter().all(|t| {
            t.topic_name.0.as_str() == METADATA_TOPIC
                && t.partitions.iter().all(|p| p.partition_index == 0)
        });
    let quorum = match (wanted, b.metadata()) {
        (true, Some(m)) => Some(m.describe_quorum().await),
        _ => None,
    };
    let mut nodes = Vec::new();
    for t in req.topics {
        let mut td = dq::TopicData::default();
        td.topic_name = t.topic_name;
        for p in t.partitions {
            let mut pd = dq::PartitionData::default();
            pd.partition_index = p.partition_index;
            match &quorum {
                Some(Ok(q)) => {
                    pd.error_code = NONE;
                    if v >= 2 {
                        pd.error_message = Some(StrBytes::default());
                    }
                    pd.leader_id = BrokerId(i32::try_from(q.leader_id).unwrap_or(-1));
                    pd.leader_epoch = i32::try_from(q.term).unwrap_or(i32::MAX);
                    pd.high_watermark = i64::try_from(q.high_watermark).unwrap_or(i64::MAX);
                    let replica = |rs: &es_meta::control::ReplicaState| {
                        let mut st = ReplicaState::default();
                        st.replica_id = BrokerId(i32::try_from(rs.node_id).unwrap_or(-1));
                        st.log_end_offset =
                            rs.log_end.and_then(|e| i64::try_from(e).ok()).unwrap_or(-1);
                        if v >= 1 {
                            let leader = rs.node_id == q.leader_id;
                            st.last_fetch_timestamp = if leader { now } else { -1 };
                            st.last_caught_up_timestamp = if leader { now } else { -1 };
                        }
                        if v >= 2 {
                            st.replica_directory_id =
                                uuid::Uuid::parse_str(&rs.node.directory_id).unwrap_or_default();
                        }
                        st
                    };
                    pd.current_voters = q.voters.iter().map(replica).collect();
                    pd.observers = q.observers.iter().map(replica).collect();
                    if v >= 2 && nodes.is_empty() {
                        nodes = q.voters.iter().map(|rs| quorum_node(ctx, rs)).collect();
                    }
                }
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "DescribeQuorum: no quorum leader");
                    pd.error_code = code(ResponseError::NotLeaderOrFollower);
                    if v >= 2 {
                        pd.error_message = Some(s(e.to_string()));
                    }
                }
                None => {
                    pd.error_code = code(ResponseError::UnknownTopicOrPartition);
                    if v >= 2 {
                        pd.error_message =
                            Some(s("This server does not host this topic-partition."));
                    }
                }
            }
            td.partitions.push(pd);
        }
        r.topics.push(td);
    }
    r.nodes = nodes;
    ctx.respond(&r)
}

/// A voter's entry in DescribeQuorum's `nodes`: its Raft listener, or
/// (a one-voter quorum without one) this broker's listener.
fn quorum_node(ctx: &Ctx, rs: &es_meta::control::ReplicaState) -> Node {
    let b = &ctx.broker;
    let mut n = Node::default();
    n.node_id = BrokerId(i32::try_from(rs.node_id).unwrap_or(-1));
    let mut l = Listener::default();
    match crate::broker::split_host_port(&rs.node.addr) {
        Some((host, port)) => {
            l.name = s("CONTROLLER");
            l.host = s(host);
            l.port = u16::try_from(port).unwrap_or(0);
        }
        None => {
            l.name = s("PLAINTEXT");
            l.host = s(b.config().advertised_host.clone());
            l.port = u16::try_from(b.config().advertised_port).unwrap_or(0);
        }
    }
    n.listeners = vec![l];
    n
}

/// ListPartitionReassignments (v0): the ongoing reassignments in the
/// applied metadata (`MetaImage::reassignments`), each with its replicas
/// (the target followed by those being removed), the replicas being added
/// and those being removed. Named partitions that do not exist or are not
/// being reassigned are left out, as Kafka does.
pub fn list_partition_reassignments(
    ctx: &Ctx,
    req: ListPartitionReassignmentsRequest,
) -> Result<Option<Bytes>, RequestError> {
    let mut r = ListPartitionReassignmentsResponse::default();
    r.error_message = None;
    if !ctx.allowed_on_cluster(AclOperation::Describe) {
        r.error_code = code(ResponseError::ClusterAuthorizationFailed);
        r.error_message = Some(s(CLUSTER_AUTHORIZATION_FAILED));
        return ctx.respond(&r);
    }
    let only: Option<Vec<TopicPartitions>> = req.topics.map(|ts| {
        ts.into_iter()
            .map(|t| TopicPartitions {
                topic: t.name.0.to_string(),
                partitions: t.partition_indexes,
            })
            .collect()
    });
    let ongoing = ctx
        .broker
        .image()
        .map(|i| i.reassignments(only.as_deref()))
        .unwrap_or_default();
    let ids = |v: &[i32]| v.iter().copied().map(BrokerId).collect::<Vec<_>>();
    for o in ongoing {
        if r.topics.last().is_none_or(|t| t.name.0.as_str() != o.topic) {
            let mut t = OngoingTopicReassignment::default();
            t.name = TopicName(s(o.topic.clone()));
            r.topics.push(t);
        }
        let mut p = OngoingPartitionReassignment::default();
        p.partition_index = o.partition;
        p.replicas = ids(&o.replicas);
        p.adding_replicas = ids(&o.adding);
        p.removing_replicas = ids(&o.removing);
        if let Some(t) = r.topics.last_mut() {
            t.partitions.push(p);
        }
    }
    ctx.respond(&r)
}

/// The replication factor a partition has, for
/// `allow_replication_factor_change`: the target's when a reassignment is
/// in progress (replicas without those being removed), else its replicas'.
fn replication_factor(image: &MetaImage, topic: &str, partition: i32) -> Option<usize> {
    let p = image
        .topics
        .get(topic)?
        .partitions
        .get(usize::try_from(partition).ok()?)?;
    Some(p.replicas.len() - p.removing.len().min(p.replicas.len()))
}

/// AlterPartitionReassignments (v0-1): one `alter_reassignments.v1` entry
/// through the metadata quorum for every partition of the request (a
/// target, or null to cancel), answered per partition with Kafka's codes:
/// UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT (an empty target,
/// a repeated or unregistered broker, a cancel that needs an unclean
/// election the topic forbids), NO_REASSIGNMENT_IN_PROGRESS (a cancel of
/// none), and, with v1's `allow_replication_factor_change` false, a target
/// of another size INVALID_REPLICATION_FACTOR (checked here, before the
/// entry). The data then moves by replication: see docs/replication.md.
pub async fn alter_partition_reassignments(
    ctx: &Ctx,
    req: AlterPartitionReassignmentsRequest,
) -> Result<Option<Bytes>, RequestError> {
    let b = &ctx.broker;
    let mut r = AlterPartitionReassignmentsResponse::default();
    r.allow_replication_factor_change = req.allow_replication_factor_change;
    r.error_message = None;
    if !ctx.allowed_on_cluster(AclOperation::Alter) {
        let e = code(ResponseError::ClusterAuthorizationFailed);
        return ctx.respond(&reassign_refused(r, req, e, CLUSTER_AUTHORIZATION_FAILED));
    }
    // A deadline already past (timeout_ms of 0 or less): Kafka's controller
    // gives up first, and every partition answers REQUEST_TIMED_OUT.
    if let Some((e, message)) = super::controller_deadline_passed(req.timeout_ms) {
        return ctx.respond(&reassign_refused(r, req, code(e), message));
    }
    let image = b.image();
    let allow_rf_change = ctx.version < 1 || req.allow_replication_factor_change;
    // Per partition: refused here, or the index of its item in the entry.
    let mut items: Vec<Reassignment> = Vec::new();
    let mut outcomes: Vec<Vec<Result<usize, (i16, String)>>> = Vec::new();
    for t in &req.topics {
        let name = t.name.0.to_string();
        let mut row = Vec::new();
        for p in &t.partitions {
            let target: Option<Vec<i32>> =
                p.replicas.as_ref().map(|v| v.iter().map(|b| b.0).collect());
            let current = image
                .as_deref()
                .and_then(|i| replication_factor(i, &name, p.partition_index));
            match (&target, current) {
                (Some(t), Some(rf)) if !allow_rf_change && !t.is_empty() && t.len() != rf => {
                    row.push(Err((
                        code(ResponseError::InvalidReplicationFactor),
                        format!("The replication factor is changed from {rf} to {}", t.len()),
                    )));
                }
                _ => {
                    row.push(Ok(items.len()));
                    items.push(Reassignment {
                        topic: name.clone(),
                        partition: p.partition_index,
                        replicas: target,
                    });
                }
            }
        }
        outcomes.push(row);
    }
    let results = if items.is_empty() {
        Vec::new()
    } else {
        match b
            .propose_partitions(MetaRequest::AlterReassignments { partitions: items })
            .await
        {
            Ok(results) => results,
            Err(e) => {
                tracing::info!(code = e.code, message = %e.message, "AlterPartitionReassignments not applied");
                return ctx.respond(&reassign_refused(r, req, e.code, &e.message));
            }
        }
    };
    for (t, row) in req.topics.into_iter().zip(outcomes) {
        let mut tr = ReassignableTopicResponse::default();
        tr.name = t.name;
        for (p, outcome) in t.partitions.into_iter().zip(row) {
            let mut pr = ReassignablePartitionResponse::default();
            pr.partition_index = p.partition_index;
            pr.error_message = None;
            let (error_code, message) = match outcome {
                Err((c, m)) => (c, Some(m)),
                Ok(i) => match results.get(i) {
                    Some(m) => (m.error_code, m.message.clone()),
                    None => (
                        code(ResponseError::UnknownServerError),
                        Some("no result for this partition".into()),
                    ),
                },
            };
            pr.error_code = error_code;
            // Kafka's NO_REASSIGNMENT_IN_PROGRESS carries no message.
            if error_code != NONE && error_code != meta_code::NO_REASSIGNMENT_IN_PROGRESS {
                pr.error_message = message.map(s);
            }
            tr.partitions.push(pr);
        }
        r.responses.push(tr);
    }
    ctx.respond(&r)
}

/// An AlterPartitionReassignments refused whole: `e` on the response and
/// on every partition.
fn reassign_refused(
    mut r: AlterPartitionReassignmentsResponse,
    req: AlterPartitionReassignmentsRequest,
    e: i16,
    message: &str,
) -> AlterPartitionReassignmentsResponse {
    r.error_code = e;
    r.error_message = Some(s(message));
    for t in req.topics {
        let mut tr = ReassignableTopicResponse::default();
        tr.name = t.name;
        for p in t.partitions {
            let mut pr = ReassignablePartitionResponse::default();
            pr.partition_index = p.partition_index;
            pr.error_code = e;
            pr.error_message = Some(s(message));
            tr.partitions.push(pr);
        }
        r.responses.push(tr);
    }
    r
}

/// AlterReplicaLogDirs (v1-2): es has one log directory, the data
/// directory. Moving a partition there is a no-op; any other path is
/// LOG_DIR_NOT_FOUND; a partition that does not exist is
/// UNKNOWN_TOPIC_OR_PARTITION. Results are grouped by topic, as Kafka's.
pub fn alter_replica_log_dirs(
    ctx: &Ctx,
    req: AlterReplicaLogDirsRequest,
) -> Result<Option<Bytes>, RequestError> {
    let b = &ctx.broker;
    let data_dir = b.data_dir();
    let mut known: HashSet<String> = HashSet::new();
    known.insert(data_dir.display().to_string());
    if let Ok(c) = std::fs::canonicalize(data_dir) {
        known.insert(c.display().to_string());
    }
    // Kafka reads the request into a map by topic partition: a partition
    // named twice is answered once (for the last path given), a topic with
    // no partitions not at all; results are grouped by topic.
    let mut results: Vec<AlterReplicaLogDirTopicResult> = Vec::new();
    let mut topic_at: HashMap<TopicName, usize> = HashMap::new();
    let mut partition_at: HashMap<(usize, i32), usize> = HashMap::new();
    let alter_allowed = ctx.allowed_on_cluster(AclOperation::Alter);
    for dir in req.dirs {
        let path = dir.path.as_str();
        let trimmed = if path.len() > 1 {
            path.trim_end_matches('/')
        } else {
            path
        };
        let dir_ok = known.contains(trimmed);
        for t in dir.topics {
            let topic = b.topic(t.name.0.as_str());
            for p in t.partitions {
                let at = *topic_at.entry(t.name.clone()).or_insert_with(|| {
                    let mut tr = AlterReplicaLogDirTopicResult::default();
                    tr.topic_name = t.name.clone();
                    results.push(tr);
                    results.len() - 1
                });
                let error_code = if !alter_allowed {
                    code(ResponseError::ClusterAuthorizationFailed)
                } else if !dir_ok {
                    code(ResponseError::LogDirNotFound)
                } else if topic.as_ref().and_then(|t| t.partition(p)).is_none() {
                    code(ResponseError::UnknownTopicOrPartition)
                } else {
                    NONE
                };
                let parts = &mut results[at].partitions;
                match partition_at.get(&(at, p)) {
                    Some(&i) => parts[i].error_code = error_code,
                    None => {
                        partition_at.insert((at, p), parts.len());
                        let mut pr = AlterReplicaLogDirPartitionResult::default();
                        pr.partition_index = p;
                        pr.error_code = error_code;
                        parts.push(pr);
                    }
                }
            }
        }
    }
    let mut r = AlterReplicaLogDirsResponse::default();
    r.results = results;
    ctx.respond(&r)
}

/// ListConfigResources (v0-1; v0 was ListClientMetricsResources): the
/// resources that have configs. This broker and its loggers, every topic,
/// and every group with configs of its own; es has no client-metrics
/// subscriptions. A type Kafka does not know answers UNSUPPORTED_VERSION, as
/// Kafka does.
pub fn list_config_resources(
    ctx: &Ctx,
    req: ListConfigResourcesRequest,
) -> Result<Option<Bytes>, RequestError> {
    const KNOWN: [i8; 5] = [
        RESOURCE_TOPIC,
        RESOURCE_BROKER,
        RESOURCE_BROKER_LOGGER,
        RESOURCE_CLIENT_METRICS,
        RESOURCE_GROUP,
    ];
    let mut r = ListConfigResourcesResponse::default();
    if !ctx.allowed_on_cluster(AclOperation::DescribeConfigs) {
        r.error_code = code(ResponseError::ClusterAuthorizationFailed);
        return ctx.respond(&r);
    }
    // v0 lists client-metrics resources only (it has no type filter).
    let wanted: Vec<i8> = if ctx.version == 0 {
        vec![RESOURCE_CLIENT_METRICS]
    } else if req.resource_types.is_empty() {
        KNOWN.to_vec()
    } else {
        req.resource_types
    };
    if wanted.iter().any(|t| !KNOWN.contains(t)) {
        r.error_code = code(ResponseError::UnsupportedVersion);
        return ctx.respond(&r);
    }
    let b = &ctx.broker;
    let resource = |name: String, ty: i8| {
        let mut c = ConfigResource::default();
        c.resource_name = s(name);
        c.resource_type = ty;
        c
    };
    if wanted.contains(&RESOURCE_BROKER_LOGGER) {
        r.config_resources
            .push(resource(b.node_id().to_string(), RESOURCE_BROKER_LOGGER));
    }
    if wanted.contains(&RESOURCE_BROKER) {
        r.config_resources
            .push(resource(b.node_id().to_string(), RESOURCE_BROKER));
    }
    if wanted.contains(&RESOURCE_TOPIC) {
        for t in b.topics() {
            r.config_resources
                .push(resource(t.name.clone(), RESOURCE_TOPIC));
        }
    }
    if wanted.contains(&RESOURCE_GROUP) {
        // The groups with dynamic configs of their own, as Kafka lists the
        // config resources of its metadata (a group that never had a member
        // is listed once it has a config: ConfigCommand relies on it).
        if let Some(image) = b.image() {
            for (g, configs) in &image.group_configs {
                if !configs.is_empty() {
                    r.config_resources.push(resource(g.clone(), RESOURCE_GROUP));
                }
            }
        }
    }
    ctx.respond(&r)
}
