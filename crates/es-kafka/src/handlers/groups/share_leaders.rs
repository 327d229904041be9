//! How the group coordinator reaches the leaders of a group's
//! share-partitions for the offsets admin APIs and DeleteGroups
//! (docs/share-groups-design.md §3.10, last bullet): a share-partition's
//! state lives with its partition's leader, so each one is sent to its
//! leader as found in the metadata image, as a function call
//! ([`share_admin::serve`]) when that is this node and as an
//! [`ES_SHARE_ADMIN`] request over the inter-broker client otherwise (one
//! client per broker, [`Broker::extension`], one connection per peer; the
//! leaders are asked at the same time, at most
//! [`SHARE_ADMIN_PARTITIONS_MAX`] share-partitions a request).
//!
//! Leadership moves: a share-partition the callee does not lead
//! (NOT_LEADER_OR_FOLLOWER; UNKNOWN_TOPIC_OR_PARTITION too for a describe
//! or reset, as a new topic reaches the leader's metadata after the
//! coordinator's), one without a leader, or whose leader cannot be reached
//! is tried again with the image of that moment, backing off, for at most
//! [`RETRY_WINDOW_MS`] (each exchange bounded by [`EXCHANGE_TIMEOUT_MS`]).
//! Past that the caller gets the last answer, or [`Reached::Unreachable`],
//! which the handlers answer as Kafka 4.4 answers when its persister cannot
//! reach the share state's keeper (`share_offsets`).
//!
//! A peer's answer is not trusted: one that does not carry exactly the
//! share-partitions sent, in order, counts as no answer.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use es_meta::MetaImage;
use tokio::task::JoinSet;

use crate::broker::{inter_broker_addr, Broker};
use crate::errors::{code, ResponseError};
use crate::handlers::share_admin::{
    self, AdminAnswer, AdminPartition, ShareAdminOp, ShareAdminRequest, ShareAdminResponse,
    ES_SHARE_ADMIN, SHARE_ADMIN_PARTITIONS_MAX,
};
use crate::interbroker::InterBrokerClient;

/// How long a share-partition is tried again while its leader moves or
/// cannot be reached.
pub const RETRY_WINDOW_MS: u64 = 5_000;
/// How long one request to a leader may take (a reset waits for the
/// leader's fsync).
pub const EXCHANGE_TIMEOUT_MS: u64 = 10_000;
/// The first and the longest pause between two tries.
const BACKOFF_MIN_MS: u64 = 50;
const BACKOFF_MAX_MS: u64 = 1_000;

/// The inter-broker client of the share-admin requests: its own
/// connections, so that they never queue behind transaction markers.
#[derive(Debug, Default)]
struct ShareAdminClient(InterBrokerClient);

/// What became of one share-partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reached {
    /// Its leader's answer (the last one, when it kept refusing).
    Answer(AdminAnswer),
    /// No leader, or none that answered, within [`RETRY_WINDOW_MS`].
    Unreachable,
}

/// Whether a leader's answer is worth another try after a new look at the
/// metadata.
fn retry(op: ShareAdminOp, error_code: i16) -> bool {
    error_code == code(ResponseError::NotLeaderOrFollower)
        || (error_code == code(ResponseError::UnknownTopicOrPartition)
            && matches!(op, ShareAdminOp::Describe | ShareAdminOp::Reset))
}

/// The leader of a share-partition's partition in `image`, if it has one.
fn leader_of(b: &Broker, image: Option<&MetaImage>, p: &AdminPartition) -> Option<i32> {
    b.leader_and_epoch(image, &p.topic, p.partition)
        .map(|(leader, _)| leader)
        .filter(|l| *l >= 0)
}

/// Runs `op` on `parts` (share-partitions of `group`) on their leaders: one
/// [`Reached`] per share-partition, in order.
pub async fn reach(
    broker: &Arc<Broker>,
    op: ShareAdminOp,
    group: &str,
    parts: Vec<AdminPartition>,
) -> Vec<Reached> {
    let parts = Arc::new(parts);
    let mut out: Vec<Reached> = vec![Reached::Unreachable; parts.len()];
    let mut pending: Vec<usize> = (0..parts.len()).collect();
    let deadline = Instant::now() + Duration::from_millis(RETRY_WINDOW_MS);
    let mut backoff = Duration::from_millis(BACKOFF_MIN_MS);
    while !pending.is_empty() {
        let image = broker.image();
        let mut by_leader: BTreeMap<i32, Vec<usize>> = BTreeMap::new();
        let mut again = Vec::new();
        for i in pending.drain(..) {
            match leader_of(broker, image.as_deref(), &parts[i]) {
                Some(l) => by_leader.entry(l).or_default().push(i),
                None => {
                    out[i] = Reached::Unreachable;
                    again.push(i);
                }
            }
        }
        let mut calls = JoinSet::new();
        let mut sent: HashMap<tokio::task::Id, Vec<usize>> = HashMap::new();
        for (leader, idx) in by_leader {
            for chunk in idx.chunks(SHARE_ADMIN_PARTITIONS_MAX) {
                let req = ShareAdminRequest {
                    op,
                    group: group.to_string(),
                    partitions: chunk.iter().map(|&i| parts[i].clone()).collect(),
                };
                let addr = image.as_deref().and_then(|i| inter_broker_addr(i, leader));
                let b = broker.clone();
                let h = calls.spawn(async move { ask(&b, leader, addr, req).await });
                sent.insert(h.id(), chunk.to_vec());
            }
        }
        while let Some(done) = calls.join_next_with_id().await {
            let (id, answers) = match done {
                Ok((id, a)) => (id, a),
                Err(e) => (e.id(), None),
            };
            let Some(idx) = sent.remove(&id) else {
                continue;
            };
            match answers {
                None => {
                    for i in idx {
                        out[i] = Reached::Unreachable;
                        again.push(i);
                    }
                }
                Some(answers) => {
                    for (i, a) in idx.into_iter().zip(answers) {
                        if retry(op, a.error_code) {
                            again.push(i);
                        }
                        out[i] = Reached::Answer(a);
                    }
                }
            }
        }
        if again.is_empty() || Instant::now() + backoff > deadline {
            break;
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_millis(BACKOFF_MAX_MS));
        again.sort_unstable();
        pending = again;
    }
    out
}

/// One request to `leader` (this node: a function call): its answers, one
/// per share-partition sent, or `None` when it did not answer them.
async fn ask(
    broker: &Arc<Broker>,
    leader: i32,
    addr: Option<String>,
    req: ShareAdminRequest,
) -> Option<Vec<AdminAnswer>> {
    if leader == broker.node_id() {
        return Some(share_admin::serve(broker, req).await);
    }
    let addr = addr?;
    let client = broker.extension(ShareAdminClient::default);
    let timeout = Duration::from_millis(EXCHANGE_TIMEOUT_MS);
    let r: Result<ShareAdminResponse, _> = client
        .0
        .send_json(leader, &addr, ES_SHARE_ADMIN, &req, timeout)
        .await;
    let resp = match r {
        Ok(resp) => resp,
        Err(e) => {
            tracing::warn!(leader, %addr, error = %e, "a share-admin request to a leader failed");
            return None;
        }
    };
    if resp.error_code != 0 {
        tracing::warn!(
            leader,
            error = resp.error_code,
            message = ?resp.error_message,
            "a leader refused a share-admin request"
        );
        return None;
    }
    answers_match(&req, &resp).then_some(resp.partitions)
}

/// Whether `resp` answers exactly the share-partitions of `req`, in order.
pub fn answers_match(req: &ShareAdminRequest, resp: &ShareAdminResponse) -> bool {
    resp.partitions.len() == req.partitions.len()
        && req
            .partitions
            .iter()
            .zip(&resp.partitions)
            .all(|(p, a)| p.topic_id == a.topic_id && p.partition == a.partition)
}

/// Whether `image` describes a cluster of more than one broker (DeleteGroups
/// of a single node sweeps the group's whole directory as before).
pub fn in_cluster(image: Option<&MetaImage>) -> bool {
    image.is_some_and(|i| i.brokers.len() > 1)
}
