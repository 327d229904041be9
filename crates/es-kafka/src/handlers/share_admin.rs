//! es's own inter-broker request for share-group offsets admin
//! (docs/share-groups-design.md §3.10, last bullet): the group coordinator
//! asks a share-partition's leader, which keeps its state, to describe it
//! (start offset, leader epoch and the inputs of the lag), reset it
//! (AlterShareGroupOffsets) or delete it (DeleteShareGroupOffsets,
//! DeleteGroups). Framed as the API-keys request is ([`super::api_keys`]):
//! api key [`ES_SHARE_ADMIN`], version 0, a JSON [`ShareAdminRequest`] (at
//! most [`SHARE_ADMIN_REQUEST_BYTES_MAX`] bytes, [`SHARE_ADMIN_PARTITIONS_MAX`]
//! share-partitions of one group), a JSON [`ShareAdminResponse`]. Only
//! brokers send it: CLUSTER_ACTION on the cluster, as Kafka asks of its
//! broker-to-broker requests.
//!
//! Every share-partition is answered on its own, in the request's order,
//! with a Kafka error code: NOT_LEADER_OR_FOLLOWER when this node does not
//! lead the partition (the caller looks at its metadata again and
//! retries), UNKNOWN_TOPIC_OR_PARTITION when it does not know the topic
//! under that id, KAFKA_STORAGE_ERROR and the others as the local calls
//! answer. A reset is answered after its fsync. [`serve`] is also what the
//! coordinator calls for the share-partitions led on its own node: there it
//! is a function call, not a request.

use std::sync::Arc;

use bytes::Bytes;
use es_auth::acl::AclOperation;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::api_keys::{allowed_on_cluster, json_body, respond_json};
use super::route::{route, NO_EPOCH};
use super::Client;
use crate::broker::Broker;
use crate::errors::{code, ResponseError, NONE};
use crate::handlers::share::share_config;
use crate::shares::locks::ShareKey;
use crate::shares::manager::{DurableTicket, ShareTarget};

/// The api key of es's share-admin request.
pub const ES_SHARE_ADMIN: i16 = 32_003;
/// Largest JSON body accepted.
pub const SHARE_ADMIN_REQUEST_BYTES_MAX: usize = 1 << 20;
/// Most share-partitions in one request (the caller splits longer lists).
/// With Kafka's 249-byte topic names a full request stays far below
/// [`SHARE_ADMIN_REQUEST_BYTES_MAX`].
pub const SHARE_ADMIN_PARTITIONS_MAX: usize = 1_000;

/// Kafka's message for a partition or topic it does not know.
const NOT_HOSTED: &str = "This server does not host this topic-partition.";

/// What the coordinator asks of the share-partitions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ShareAdminOp {
    /// DescribeShareGroupOffsets: each one's [`AdminState`], if it has state.
    Describe,
    /// AlterShareGroupOffsets: each one starts over at its `start_offset`
    /// (a negative one deletes its state).
    Reset,
    /// DeleteShareGroupOffsets: each one's state is deleted.
    Delete,
    /// DeleteGroups of a share group: each one's state is deleted, then the
    /// group's directory if nothing is left in it.
    DeleteGroup,
}

/// The request: one operation on share-partitions of one group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShareAdminRequest {
    pub op: ShareAdminOp,
    pub group: String,
    pub partitions: Vec<AdminPartition>,
}

/// One share-partition of a request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminPartition {
    pub topic: String,
    /// The topic's id as the coordinator knows it: a topic of that name
    /// with another id is not this one.
    #[serde(with = "uuid_text")]
    pub topic_id: Uuid,
    pub partition: i32,
    /// The new start offset ([`ShareAdminOp::Reset`] only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_offset: Option<i64>,
}

/// The answer: a refusal of the whole request, or one answer per
/// share-partition in the request's order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShareAdminResponse {
    pub error_code: i16,
    #[serde(default)]
    pub error_message: Option<String>,
    #[serde(default)]
    pub partitions: Vec<AdminAnswer>,
}

impl ShareAdminResponse {
    fn error(e: ResponseError, message: impl Into<String>) -> Self {
        ShareAdminResponse {
            error_code: code(e),
            error_message: Some(message.into()),
            partitions: Vec::new(),
        }
    }
}

/// One share-partition's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminAnswer {
    #[serde(with = "uuid_text")]
    pub topic_id: Uuid,
    pub partition: i32,
    pub error_code: i16,
    #[serde(default)]
    pub error_message: Option<String>,
    /// [`ShareAdminOp::Describe`]: the state, `None` when it has none
    /// (Kafka's StartOffset -1).
    #[serde(default)]
    pub state: Option<AdminState>,
}

impl AdminAnswer {
    fn new(p: &AdminPartition, error_code: i16, error_message: Option<String>) -> Self {
        AdminAnswer {
            topic_id: p.topic_id,
            partition: p.partition,
            error_code,
            error_message,
            state: None,
        }
    }
}

/// What DescribeShareGroupOffsets shows of a share-partition with state:
/// the start offset and leader epoch, and the lag's inputs (the lag is
/// `latest_offset - start_offset - delivery_complete_count`, Kafka's
/// KIP-1226 formula).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminState {
    pub start_offset: i64,
    pub leader_epoch: i32,
    pub delivery_complete_count: i64,
    /// The partition's high watermark on its leader.
    pub latest_offset: i64,
}

impl AdminState {
    /// Kafka's lag: negative when the start is past the end, as Kafka
    /// answers.
    pub fn lag(&self) -> i64 {
        self.latest_offset
            .saturating_sub(self.start_offset)
            .saturating_sub(self.delivery_complete_count)
    }
}

/// Topic ids as their hyphenated text (the uuid crate is built without
/// serde here).
mod uuid_text {
    use serde::{Deserialize, Deserializer, Serializer};
    use uuid::Uuid;

    pub fn serialize<S: Serializer>(id: &Uuid, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&id.hyphenated())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Uuid, D::Error> {
        let text = String::deserialize(d)?;
        Uuid::parse_str(&text).map_err(serde::de::Error::custom)
    }
}

/// Decodes one request frame (the body after the size prefix): version 0,
/// a JSON body within the limits, a group named; else the error to answer.
pub fn decode(frame: &Bytes) -> Result<ShareAdminRequest, (ResponseError, String)> {
    let body = json_body(frame, SHARE_ADMIN_REQUEST_BYTES_MAX)?;
    let req: ShareAdminRequest =
        serde_json::from_slice(body).map_err(|e| (ResponseError::InvalidRequest, e.to_string()))?;
    if req.group.is_empty() {
        return Err((ResponseError::InvalidRequest, "no group named".into()));
    }
    if req.partitions.len() > SHARE_ADMIN_PARTITIONS_MAX {
        return Err((
            ResponseError::InvalidRequest,
            format!(
                "{} share-partitions, more than {SHARE_ADMIN_PARTITIONS_MAX}",
                req.partitions.len()
            ),
        ));
    }
    Ok(req)
}

/// Answers one request frame; the response frame with its size prefix.
pub async fn handle(broker: &Arc<Broker>, client: &Client, frame: &Bytes) -> Bytes {
    let answer = match decode(frame) {
        Err((e, m)) => ShareAdminResponse::error(e, m),
        Ok(_)
            if !allowed_on_cluster(broker, client, AclOperation::ClusterAction, "EsShareAdmin") =>
        {
            ShareAdminResponse::error(
                ResponseError::ClusterAuthorizationFailed,
                super::authz::CLUSTER_AUTHORIZATION_FAILED,
            )
        }
        Ok(req) => ShareAdminResponse {
            partitions: serve(broker, req).await,
            ..ShareAdminResponse::default()
        },
    };
    respond_json(frame, &answer)
}

/// Runs `req` on the share-partitions this node leads: one answer per
/// share-partition, in order. A reset is answered after its fsync.
pub async fn serve(broker: &Arc<Broker>, req: ShareAdminRequest) -> Vec<AdminAnswer> {
    let ShareAdminRequest {
        op,
        group,
        partitions,
    } = req;
    let b = broker.clone();
    let g = group.clone();
    let parts = partitions.clone();
    let ran = super::blocking(move || run(&b, op, &g, &parts)).await;
    let (mut answers, tickets) = match ran {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(group, error = %e, "a share-admin call failed");
            let failed = partitions
                .iter()
                .map(|p| {
                    let c = code(ResponseError::UnknownServerError);
                    AdminAnswer::new(p, c, Some(e.to_string()))
                })
                .collect();
            return failed;
        }
    };
    for (i, t) in tickets {
        if let Err(e) = broker.shares().wait_durable(t).await {
            if let Some(a) = answers.get_mut(i) {
                a.error_code = e.code();
                a.error_message = Some(e.to_string());
            }
        }
    }
    if op == ShareAdminOp::DeleteGroup {
        let b = broker.clone();
        let g = group.clone();
        // Files of share-partitions this node follows may still be there
        // (the replication's); the directory goes only when empty.
        let r = super::blocking(move || b.shares().remove_group_dir_if_empty(&g)).await;
        if let Ok(Err(e)) = r {
            tracing::warn!(group, error = %e, "removing a share group's directory failed");
        }
    }
    answers
}

/// The blocking part of [`serve`]: the answers and the reset tickets to
/// wait for (by answer index).
fn run(
    b: &Broker,
    op: ShareAdminOp,
    group: &str,
    parts: &[AdminPartition],
) -> (Vec<AdminAnswer>, Vec<(usize, DurableTicket)>) {
    let image = b.image();
    let config = share_config(&b.group_configs(group), &b.config().share);
    let mut tickets = Vec::new();
    let mut answers = Vec::with_capacity(parts.len());
    for (i, p) in parts.iter().enumerate() {
        let Some(topic) = b.topic(&p.topic).filter(|t| t.id == p.topic_id) else {
            let c = code(ResponseError::UnknownTopicOrPartition);
            answers.push(AdminAnswer::new(p, c, Some(NOT_HOSTED.into())));
            continue;
        };
        let slot = match route(b, image.as_deref(), Some(&topic), p.partition, NO_EPOCH) {
            Ok(r) => r.slot,
            Err(m) => {
                let message = (m.error == ResponseError::UnknownTopicOrPartition)
                    .then(|| NOT_HOSTED.to_string());
                answers.push(AdminAnswer::new(p, code(m.error), message));
                continue;
            }
        };
        let key = ShareKey::new(group, topic.id, p.partition);
        let t = ShareTarget {
            key: &key,
            topic: &topic.name,
            log: &slot.log,
            config: &config,
        };
        let answer = match op {
            ShareAdminOp::Describe => match b.shares().describe_offsets(&t) {
                Ok(None) => AdminAnswer::new(p, NONE, None),
                Ok(Some(o)) => AdminAnswer {
                    state: Some(AdminState {
                        start_offset: o.summary.start_offset,
                        leader_epoch: o.leader_epoch,
                        delivery_complete_count: o.summary.delivery_complete_count,
                        latest_offset: i64::try_from(slot.log.high_watermark()).unwrap_or(i64::MAX),
                    }),
                    ..AdminAnswer::new(p, NONE, None)
                },
                Err(e) => AdminAnswer::new(p, e.code(), Some(e.to_string())),
            },
            ShareAdminOp::Reset => match p.start_offset {
                None => AdminAnswer::new(
                    p,
                    code(ResponseError::InvalidRequest),
                    Some("a reset without a start offset".into()),
                ),
                Some(start) => match b.shares().reset_offsets(&t, start) {
                    Ok(ticket) => {
                        if let Some(ticket) = ticket {
                            tickets.push((i, ticket));
                        }
                        AdminAnswer::new(p, NONE, None)
                    }
                    Err(e) => AdminAnswer::new(p, e.code(), Some(e.to_string())),
                },
            },
            ShareAdminOp::Delete | ShareAdminOp::DeleteGroup => {
                match b.shares().delete_offsets(&key, &topic.name) {
                    Ok(()) => AdminAnswer::new(p, NONE, None),
                    Err(e) => AdminAnswer::new(
                        p,
                        code(ResponseError::KafkaStorageError),
                        Some(e.to_string()),
                    ),
                }
            }
        };
        answers.push(answer);
    }
    (answers, tickets)
}

#[cfg(test)]
#[path = "share_admin_tests.rs"]
mod tests;
