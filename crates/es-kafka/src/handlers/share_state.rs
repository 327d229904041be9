//! es's own request a follower sends its partition leader for the
//! share-group state it copies (docs/share-groups-design.md §3.10): api key
//! [`ES_SHARE_STATE`], version 0, a JSON [`ShareStateRequest`]; the answer a
//! JSON [`ShareStateResponse`] (the framing of `api_keys.rs`). Only brokers
//! send it: CLUSTER_ACTION on the cluster, as Kafka asks of a replica's
//! Fetch.
//!
//! The request says, per partition the follower follows, what it holds of
//! each share-partition in the leader's term and process; the leader
//! records that as confirmed (the answers waiting for the ISR go on) and
//! answers with what the follower lacks. With nothing to send the request
//! waits up to its `max_wait_ms` for a change, so a follower's copy runs a
//! round trip behind its leader.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use es_auth::acl::AclOperation;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::api_keys::{allowed_on_cluster, json_body, respond_json};
use super::Client;
use crate::broker::Broker;
use crate::errors::{code, ResponseError, NONE};
use crate::replica::Role;
use crate::shares::locks::ShareKey;
use crate::shares::manager::CopiedShare;

/// The api key of the share-state request.
pub const ES_SHARE_STATE: i16 = 32_002;
/// Largest JSON body accepted.
pub const SHARE_STATE_REQUEST_BYTES_MAX: usize = 1 << 20;
/// The longest a request may wait for a change.
pub const MAX_WAIT_MS_MAX: u64 = 5_000;

/// A follower's request.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShareStateRequest {
    pub replica_id: i32,
    pub max_wait_ms: u64,
    pub partitions: Vec<ShareStatePartition>,
}

/// One followed partition.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShareStatePartition {
    pub topic: String,
    pub topic_id: Uuid,
    pub partition: i32,
    /// The leader epoch the follower follows.
    pub leader_epoch: i32,
    /// What it holds of this term and leader process; `None`: nothing yet
    /// (the leader sends every share-partition whole).
    #[serde(default)]
    pub held: Option<Held>,
}

/// What a follower holds: the leader's process, and its sequence by group.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Held {
    pub incarnation: u64,
    pub groups: BTreeMap<String, u64>,
}

/// The leader's answer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShareStateResponse {
    pub error_code: i16,
    #[serde(default)]
    pub error_message: Option<String>,
    /// The leader's process ([`Held::incarnation`]).
    pub incarnation: u64,
    pub partitions: Vec<ShareStatePartitionAnswer>,
}

/// One partition's answer: every share-partition the leader has.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShareStatePartitionAnswer {
    pub topic: String,
    pub partition: i32,
    pub error_code: i16,
    pub shares: Vec<CopiedShare>,
}

impl ShareStateResponse {
    fn error(e: ResponseError, message: impl Into<String>) -> Self {
        ShareStateResponse {
            error_code: code(e),
            error_message: Some(message.into()),
            ..ShareStateResponse::default()
        }
    }
}

/// Answers one request frame; the response frame with its size prefix.
pub async fn handle(broker: &Arc<Broker>, client: &Client, frame: &Bytes) -> Bytes {
    let answer = answer(broker, client, frame).await;
    respond_json(frame, &answer)
}

async fn answer(broker: &Arc<Broker>, client: &Client, frame: &Bytes) -> ShareStateResponse {
    let body = match json_body(frame, SHARE_STATE_REQUEST_BYTES_MAX) {
        Ok(b) => b,
        Err((e, m)) => return ShareStateResponse::error(e, m),
    };
    let req: ShareStateRequest = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => return ShareStateResponse::error(ResponseError::InvalidRequest, e.to_string()),
    };
    if !allowed_on_cluster(
        broker,
        client,
        AclOperation::ClusterAction,
        "ShareState (es)",
    ) {
        return ShareStateResponse::error(
            ResponseError::ClusterAuthorizationFailed,
            super::authz::CLUSTER_AUTHORIZATION_FAILED,
        );
    }
    let shares = broker.shares().clone();
    let incarnation = shares.incarnation();
    let wait = Duration::from_millis(req.max_wait_ms.min(MAX_WAIT_MS_MAX));
    let deadline = tokio::time::Instant::now() + wait;
    let req = Arc::new(req);
    let mut confirm = true;
    loop {
        let since = shares.change_version();
        let (b, r) = (broker.clone(), req.clone());
        let parts = tokio::task::spawn_blocking(move || answer_partitions(&b, &r, confirm))
            .await
            .unwrap_or_default();
        confirm = false;
        let news = parts
            .iter()
            .zip(&req.partitions)
            .any(|(a, p)| has_news(a, p, incarnation));
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if news || left.is_zero() || broker.is_stopping() {
            return ShareStateResponse {
                error_code: NONE,
                error_message: None,
                incarnation,
                partitions: parts,
            };
        }
        shares.wait_change(since, left).await;
        if shares.change_version() == since {
            return ShareStateResponse {
                error_code: NONE,
                error_message: None,
                incarnation,
                partitions: parts,
            };
        }
    }
}

/// Whether an answer tells the follower something it does not hold.
fn has_news(a: &ShareStatePartitionAnswer, p: &ShareStatePartition, incarnation: u64) -> bool {
    let Some(held) = p.held.as_ref().filter(|h| h.incarnation == incarnation) else {
        return true;
    };
    a.error_code != NONE
        || a.shares.len() != held.groups.len()
        || a.shares.iter().any(|c| {
            c.state.is_some() || !c.writes.is_empty() || held.groups.get(&c.group) != Some(&c.seq)
        })
}

/// Each partition's answer (and, the first time, the confirmations the
/// request carries). Blocking.
fn answer_partitions(
    broker: &Arc<Broker>,
    req: &ShareStateRequest,
    confirm: bool,
) -> Vec<ShareStatePartitionAnswer> {
    let shares = broker.shares();
    let incarnation = shares.incarnation();
    req.partitions
        .iter()
        .map(|p| {
            let mut a = ShareStatePartitionAnswer {
                topic: p.topic.clone(),
                partition: p.partition,
                error_code: NONE,
                shares: Vec::new(),
            };
            let Some((topic, slot)) = broker
                .topic(&p.topic)
                .filter(|t| t.id == p.topic_id)
                .and_then(|t| t.partition(p.partition).map(|s| (t, s)))
            else {
                a.error_code = code(ResponseError::UnknownTopicOrPartition);
                return a;
            };
            if let Err(e) = leads_for(&slot, p.leader_epoch, req.replica_id) {
                a.error_code = code(e);
                return a;
            }
            let held = p
                .held
                .as_ref()
                .filter(|h| h.incarnation == incarnation)
                .map(|h| &h.groups);
            if confirm && held.is_some() {
                shares.follower_synced(topic.id, p.partition, req.replica_id);
            }
            if confirm {
                for (group, seq) in held.into_iter().flatten() {
                    let key = ShareKey::new(group, topic.id, p.partition);
                    shares.confirm(&key, req.replica_id, *seq);
                }
            }
            let share_broker = &broker.config().share;
            let config_of = |group: &str| {
                crate::handlers::share::share_config(&broker.group_configs(group), share_broker)
            };
            match shares.copy_for_follower(
                &topic.name,
                topic.id,
                p.partition,
                &slot.log,
                &config_of,
                held,
            ) {
                Ok(c) => a.shares = c,
                Err(e) => {
                    tracing::warn!(topic = %topic.name, partition = p.partition, error = %e, "reading share state for a follower failed");
                    a.error_code = e.code();
                }
            }
            a
        })
        .collect()
}

/// Whether this broker leads the partition in `epoch` for `replica`, one of
/// its replicas; else Kafka's error for a replica's Fetch.
fn leads_for(
    slot: &crate::topics::PartitionSlot,
    epoch: i32,
    replica: i32,
) -> Result<(), ResponseError> {
    let r = slot.log.replica();
    let Some(a) = r.assignment() else {
        return Err(ResponseError::NotLeaderOrFollower);
    };
    if r.role() != Role::Leader {
        return Err(ResponseError::NotLeaderOrFollower);
    }
    if epoch < a.leader_epoch {
        return Err(ResponseError::FencedLeaderEpoch);
    }
    if epoch > a.leader_epoch {
        return Err(ResponseError::UnknownLeaderEpoch);
    }
    if !a.replicas.contains(&replica) {
        return Err(ResponseError::NotLeaderOrFollower);
    }
    Ok(())
}
