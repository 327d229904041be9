//! DescribeCluster, DescribeLogDirs and DescribeTopicPartitions: the
//! cluster's live brokers and its partitions' leadership (from this broker's
//! applied copy of the metadata log), and this broker's one log directory
//! with the partitions it hosts.

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use es_auth::acl::{AclOperation, ResourceType, CLUSTER_NAME};
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::describe_topic_partitions_response::{
    self as dtp, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeClusterRequest, DescribeClusterResponse, DescribeLogDirsRequest,
    DescribeLogDirsResponse, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse,
    TopicName,
};

use super::s;
use crate::errors::{code, ResponseError, NONE};
use crate::handlers::{
    blocking, Ctx, RequestError, AUTHORIZED_OPERATIONS_OMITTED, CLUSTER_OPERATIONS_ALL,
    TOPIC_OPERATIONS_ALL,
};
use crate::topics::{is_internal, validate_topic_name};
use es_meta::image::NO_LEADER;

/// DescribeCluster's endpoint type for brokers (2 is controllers).
const ENDPOINT_TYPE_BROKER: i8 = 1;

/// Default `response_partition_limit` of DescribeTopicPartitions (Kafka's).
pub const DESCRIBE_PARTITIONS_LIMIT_DEFAULT: i32 = 2000;

pub fn describe_cluster(
    ctx: &Ctx,
    req: DescribeClusterRequest,
) -> Result<Option<Bytes>, RequestError> {
    let v = ctx.version;
    let b = &ctx.broker;
    let mut r = DescribeClusterResponse::default();
    // Endpoint type 1 = brokers, 2 = controllers. Kafka's brokers answer
    // type 1 only: any other is UNSUPPORTED_ENDPOINT_TYPE, with the
    // response's defaults (no brokers, controller -1).
    if v >= 1 && req.endpoint_type != ENDPOINT_TYPE_BROKER {
        r.error_code = code(ResponseError::UnsupportedEndpointType);
        r.error_message = Some(s(format!(
            "The broker does not support DescribeCluster requests for endpoint type {}",
            req.endpoint_type
        )));
        r.controller_id = BrokerId(-1);
        return ctx.respond(&r);
    }
    r.cluster_id = s(b.cluster_id());
    let image = b.image();
    r.controller_id = BrokerId(b.controller_id(image.as_deref()));
    r.brokers = b
        .live_brokers(image.as_deref())
        .into_iter()
        .map(|e| {
            let mut node = DescribeClusterBroker::default();
            node.broker_id = BrokerId(e.id);
            node.host = s(e.host);
            node.port = e.port;
            node.rack = e.rack.map(s);
            node
        })
        .collect();
    r.cluster_authorized_operations = if req.include_cluster_authorized_operations {
        cluster_operations(ctx)
    } else {
        AUTHORIZED_OPERATIONS_OMITTED
    };
    ctx.respond(&r)
}

/// Kafka's cluster authorized operations: computed only for a client that
/// may describe the cluster, else none.
pub(crate) fn cluster_operations(ctx: &Ctx) -> i32 {
    if ctx.allowed_on_cluster(AclOperation::Describe) {
        ctx.authorized_operations(CLUSTER_OPERATIONS_ALL, ResourceType::Cluster, CLUSTER_NAME)
    } else {
        0
    }
}

pub async fn describe_log_dirs(
    ctx: &Ctx,
    req: DescribeLogDirsRequest,
) -> Result<Option<Bytes>, RequestError> {
    if !ctx.allowed_on_cluster(AclOperation::Describe) {
        let mut r = DescribeLogDirsResponse::default();
        r.error_code = code(ResponseError::ClusterAuthorizationFailed);
        return respond_log_dirs(ctx, &r);
    }
    let b = ctx.broker.clone();
    // Kafka reads the request into a set of topic partitions: each is
    // described once, a topic with no partitions not at all.
    let wanted: Option<Vec<(String, Vec<i32>)>> = req.topics.map(|ts| {
        let mut out: Vec<(String, Vec<i32>)> = Vec::new();
        let mut at: HashMap<String, usize> = HashMap::new();
        for t in ts {
            if t.partitions.is_empty() {
                continue;
            }
            let name = t.topic.0.to_string();
            let i = *at.entry(name.clone()).or_insert_with(|| {
                out.push((name, Vec::new()));
                out.len() - 1
            });
            out[i].1.extend(t.partitions);
        }
        out
    });
    let want_sizes = ctx.version >= 4;
    let data_dir = ctx.broker.data_dir().to_path_buf();
    let (topics, path, sizes) = blocking(move || {
        let mut out = Vec::new();
        let list: Vec<(String, Option<HashSet<i32>>)> = match wanted {
            None => b.topics().iter().map(|t| (t.name.clone(), None)).collect(),
            Some(w) => w
                .into_iter()
                .map(|(n, p)| (n, Some(p.into_iter().collect::<HashSet<i32>>())))
                .collect(),
        };
        for (name, parts) in list {
            let Some(t) = b.topic(&name) else { continue };
            let mut dt = DescribeLogDirsTopic::default();
            dt.name = TopicName(s(name));
            for p in t.partitions() {
                if parts.as_ref().is_some_and(|ps| !ps.contains(&p.index)) {
                    continue;
                }
                let mut dp = DescribeLogDirsPartition::default();
                dp.partition_index = p.index;
                dp.partition_size = p.log.size_bytes() as i64;
                dp.offset_lag = 0;
                dt.partitions.push(dp);
            }
            if !dt.partitions.is_empty() {
                out.push(dt);
            }
        }
        let path = std::fs::canonicalize(&data_dir).unwrap_or(data_dir);
        // The file system's size and the space an unprivileged writer may
        // use, as Java's FileStore.getTotalSpace / getUsableSpace (v4+);
        // unknown (-1) if the file system cannot say, and before v4, which
        // has no such fields.
        let sizes = want_sizes
            .then(|| rustix::fs::statvfs(&path).ok())
            .flatten()
            .map(|fs| {
                let bytes = |blocks: u64| {
                    i64::try_from(blocks.saturating_mul(fs.f_frsize)).unwrap_or(i64::MAX)
                };
                (bytes(fs.f_blocks), bytes(fs.f_bavail))
            });
        (out, path, sizes)
    })
    .await?;
    let mut dir = DescribeLogDirsResult::default();
    dir.log_dir = s(path.display().to_string());
    dir.topics = topics;
    if let Some((total, usable)) = sizes {
        dir.total_bytes = total;
        dir.usable_bytes = usable;
    }
    let mut r = DescribeLogDirsResponse::default();
    r.results = vec![dir];
    respond_log_dirs(ctx, &r)
}

/// A DescribeLogDirs response at the request's version (v5 past the crate).
fn respond_log_dirs(ctx: &Ctx, r: &DescribeLogDirsResponse) -> Result<Option<Bytes>, RequestError> {
    if ctx.version >= 5 {
        ctx.respond(&crate::handlers::past_crate::DescribeLogDirsV5(r))
    } else {
        ctx.respond(r)
    }
}

pub fn describe_topic_partitions(
    ctx: &Ctx,
    req: DescribeTopicPartitionsRequest,
) -> Result<Option<Bytes>, RequestError> {
    let b = &ctx.broker;
    let image = b.image();
    // Kafka: max(min(max.request.partition.size.limit, the request's), 1).
    let limit = req
        .response_partition_limit
        .clamp(1, DESCRIBE_PARTITIONS_LIMIT_DEFAULT) as usize;
    // An empty topic name fails Kafka's handler whole: every topic named
    // answers UNKNOWN_SERVER_ERROR, with nothing else.
    if req.topics.iter().any(|t| t.name.0.is_empty()) {
        let mut r = DescribeTopicPartitionsResponse::default();
        for t in req.topics {
            let mut e = DescribeTopicPartitionsResponseTopic::default();
            e.name = Some(t.name);
            e.error_code = code(ResponseError::UnknownServerError);
            r.topics.push(e);
        }
        return ctx.respond(&r);
    }
    // Requested names (sorted, as Kafka answers), or every topic.
    // All topics: those the client may not describe are left out.
    let describable = |n: &str| ctx.allowed(AclOperation::Describe, ResourceType::Topic, n);
    let mut names: Vec<String> = if req.topics.is_empty() {
        b.topics()
            .iter()
            .map(|t| t.name.clone())
            .filter(|n| describable(n))
            .collect()
    } else {
        req.topics.iter().map(|t| t.name.0.to_string()).collect()
    };
    names.sort();
    names.dedup();
    let (cursor_topic, cursor_partition) = req.cursor.as_ref().map_or((None, 0), |c| {
        (Some(c.topic_name.0.to_string()), c.partition_index.max(0))
    });
    let mut r = DescribeTopicPartitionsResponse::default();
    let mut emitted = 0usize;
    for name in names {
        if let Some(ct) = &cursor_topic {
            if name < *ct {
                continue;
            }
        }
        let mut t = DescribeTopicPartitionsResponseTopic::default();
        t.name = Some(TopicName(s(name.clone())));
        // A named topic the client may not describe: refused, whether it
        // exists or not.
        if !describable(&name) {
            t.error_code = code(ResponseError::TopicAuthorizationFailed);
            r.topics.push(t);
            continue;
        }
        let Some(topic) = b.topic(&name) else {
            // Kafka answers a name that cannot be a topic INVALID_TOPIC_EXCEPTION,
            // with the operations it would allow on it.
            if validate_topic_name(&name).is_err() {
                t.error_code = code(ResponseError::InvalidTopicException);
                t.topic_authorized_operations = TOPIC_OPERATIONS_ALL;
            } else {
                t.error_code = code(ResponseError::UnknownTopicOrPartition);
                // With an authorizer Kafka reports what the client may do
                // with the name it asked for.
                if ctx.broker.security().authorizer().is_some() {
                    t.topic_authorized_operations =
                        ctx.authorized_operations(TOPIC_OPERATIONS_ALL, ResourceType::Topic, &name);
                }
            }
            r.topics.push(t);
            continue;
        };
        t.topic_id = topic.id;
        t.is_internal = is_internal(&name);
        t.topic_authorized_operations =
            ctx.authorized_operations(TOPIC_OPERATIONS_ALL, ResourceType::Topic, &name);
        let start = if cursor_topic.as_deref() == Some(name.as_str()) {
            cursor_partition
        } else {
            0
        };
        for index in start.max(0)..topic.partition_count() {
            let Some(l) = b.leadership(image.as_deref(), &name, index) else {
                continue;
            };
            if emitted == limit {
                let mut c = dtp::Cursor::default();
                c.topic_name = TopicName(s(name.clone()));
                c.partition_index = index;
                r.next_cursor = Some(c);
                break;
            }
            let mut dp = DescribeTopicPartitionsResponsePartition::default();
            dp.error_code = if l.leader == NO_LEADER {
                code(ResponseError::LeaderNotAvailable)
            } else {
                NONE
            };
            dp.partition_index = index;
            dp.leader_id = BrokerId(l.leader);
            dp.leader_epoch = l.leader_epoch;
            dp.offline_replicas = l.offline.into_iter().map(BrokerId).collect();
            dp.replica_nodes = l.replicas.into_iter().map(BrokerId).collect();
            dp.isr_nodes = l.isr.into_iter().map(BrokerId).collect();
            dp.eligible_leader_replicas = Some(Vec::new());
            dp.last_known_elr = Some(Vec::new());
            t.partitions.push(dp);
            emitted += 1;
        }
        // A topic the limit cuts before its first partition is not listed
        // (Kafka's cursor names it).
        if r.next_cursor.is_none() || !t.partitions.is_empty() {
            r.topics.push(t);
        }
        if r.next_cursor.is_some() {
            break;
        }
    }
    ctx.respond(&r)
}
