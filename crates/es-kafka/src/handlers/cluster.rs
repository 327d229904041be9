//! Cluster-shape APIs a single node answers plainly, with what Kafka 4.4
//! answers on a one-node KRaft cluster (broker and controller in one
//! process): DescribeQuorum, ListPartitionReassignments,
//! AlterPartitionReassignments, AlterReplicaLogDirs, ListConfigResources.
//!
//! DescribeQuorum reports es's metadata quorum (es-meta) as its leader sees
//! it: the Raft term as the leader epoch, Raft indexes as offsets of
//! `__cluster_metadata`-0. Every partition's only replica is this node in its one log
//! directory (the data directory), so no reassignment is ever in progress
//! and the only valid target is the current one.

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
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
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
    AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse, BrokerId, DescribeQuorumRequest,
    DescribeQuorumResponse, ListConfigResourcesRequest, ListConfigResourcesResponse,
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::admin::{RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_TOPIC};
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

/// ListPartitionReassignments (v0): nothing is ever being reassigned; Kafka
/// answers an empty list even for topics that do not exist.
pub fn list_partition_reassignments(
    ctx: &Ctx,
    _req: ListPartitionReassignmentsRequest,
) -> Result<Option<Bytes>, RequestError> {
    let mut r = ListPartitionReassignmentsResponse::default();
    r.error_message = None;
    ctx.respond(&r)
}

/// Why a reassignment target is refused, as Kafka's
/// `ReplicationControlManager.validateManualPartitionAssignment` says it.
fn check_target(node: i32, replicas: &[BrokerId]) -> Result<(), (ResponseError, String)> {
    if replicas.is_empty() {
        return Err((
            ResponseError::InvalidReplicaAssignment,
            "The manual partition assignment includes an empty replica list.".into(),
        ));
    }
    let mut sorted: Vec<i32> = replicas.iter().map(|r| r.0).collect();
    sorted.sort_unstable();
    let mut prev = None;
    for id in sorted {
        if id != node {
            return Err((
                ResponseError::InvalidReplicaAssignment,
                format!("The manual partition assignment includes broker {id}, but no such broker is registered."),
            ));
        }
        if prev == Some(id) {
            return Err((
                ResponseError::InvalidReplicaAssignment,
                format!("The manual partition assignment includes the broker {id} more than once."),
            ));
        }
        prev = Some(id);
    }
    Ok(())
}

/// AlterPartitionReassignments (v0-1): the only possible target is this
/// node alone, which is where the partition already is (nothing to do);
/// cancelling answers NO_REASSIGNMENT_IN_PROGRESS.
pub fn alter_partition_reassignments(
    ctx: &Ctx,
    req: AlterPartitionReassignmentsRequest,
) -> Result<Option<Bytes>, RequestError> {
    let b = &ctx.broker;
    let node = b.node_id();
    let mut r = AlterPartitionReassignmentsResponse::default();
    r.allow_replication_factor_change = req.allow_replication_factor_change;
    r.error_message = None;
    // A deadline already past (timeout_ms of 0 or less): Kafka's controller
    // gives up first, and every partition answers REQUEST_TIMED_OUT.
    if let Some((e, message)) = super::controller_deadline_passed(req.timeout_ms) {
        let e = code(e);
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
        return ctx.respond(&r);
    }
    for t in req.topics {
        let name = t.name.0.to_string();
        let topic = b.topic(&name);
        let mut tr = ReassignableTopicResponse::default();
        tr.name = t.name;
        for p in t.partitions {
            let mut pr = ReassignablePartitionResponse::default();
            pr.partition_index = p.partition_index;
            pr.error_message = None;
            let outcome = match &topic {
                None => Err((
                    ResponseError::UnknownTopicOrPartition,
                    Some(format!("Unable to find a topic named {name}.")),
                )),
                Some(t) if !t.has_partition(p.partition_index) => Err((
                    ResponseError::UnknownTopicOrPartition,
                    Some(format!(
                        "Unable to find partition {name}:{}.",
                        p.partition_index
                    )),
                )),
                // Kafka's message for this one is the error's default: null.
                Some(_) => match &p.replicas {
                    None => Err((ResponseError::NoReassignmentInProgress, None)),
                    Some(replicas) => check_target(node, replicas).map_err(|(e, m)| (e, Some(m))),
                },
            };
            if let Err((e, message)) = outcome {
                pr.error_code = code(e);
                pr.error_message = message.map(s);
            }
            tr.partitions.push(pr);
        }
        r.responses.push(tr);
    }
    ctx.respond(&r)
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
                let error_code = if !dir_ok {
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
/// resources that have configs. This broker and its loggers, and every
/// topic; es has no client-metrics subscriptions and no group configs. A
/// type Kafka does not know answers UNSUPPORTED_VERSION, as Kafka does.
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
    ctx.respond(&r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reassignment_targets_follow_kafkas_checks() {
        assert!(check_target(0, &[BrokerId(0)]).is_ok());
        let msg = |r: Result<(), (ResponseError, String)>| r.err().map(|(_, m)| m);
        assert_eq!(
            msg(check_target(0, &[])).as_deref(),
            Some("The manual partition assignment includes an empty replica list.")
        );
        assert_eq!(
            msg(check_target(0, &[BrokerId(0), BrokerId(9)])).as_deref(),
            Some("The manual partition assignment includes broker 9, but no such broker is registered.")
        );
        assert_eq!(
            msg(check_target(0, &[BrokerId(0), BrokerId(0)])).as_deref(),
            Some("The manual partition assignment includes the broker 0 more than once.")
        );
    }
}
