//! ShareFetch (key 78, v1-2) and ShareAcknowledge (key 79, v1-2), KIP-932's
//! record APIs (docs/share-groups-design.md §2.3, §2.4, §2.6, §3.7). This
//! module owns what the two handlers share: the request checks Kafka 4.4's
//! `KafkaApis` makes before the session (group id, READ on the group, the
//! member id), the acknowledgement batches' validation
//! (`validateAcknowledgementBatches`) and their application through
//! [`crate::shares::manager::ShareManager`] (off the tokio workers), the
//! partition lookup by topic id with its per-partition errors, the
//! durability waits, and the group's `share.*` configs as a [`ShareConfig`].
//! `fetch.rs` acquires and encodes records; `acknowledge.rs` answers
//! ShareAcknowledge.
//!
//! Invariants: nothing a client sends panics (every refusal is Kafka's code);
//! an acknowledgement or acquisition is answered only after the fsync that
//! covers its journal entry (a failed fsync answers KAFKA_STORAGE_ERROR for
//! that partition); the share state is touched only through the manager.

use std::collections::BTreeMap;
use std::sync::Arc;

use es_auth::acl::{AclOperation, ResourceType};
use uuid::Uuid;

use super::route::{route, LeaderEndpoints, Misrouted, NO_EPOCH};
use super::{blocking, Ctx, RequestError};
use crate::broker::Broker;
use crate::errors::{code, ResponseError, NONE};
use crate::shares::locks::ShareKey;
use crate::shares::manager::{DurableTicket, ShareConfig, ShareTarget};
use crate::shares::partition::{AckBatch, ShareLimits};
use crate::shares::sessions::TopicPartition;
use crate::shares::target::AutoOffsetReset;
use crate::topics::{PartitionSlot, Topic};

mod acknowledge;
mod fetch;
#[cfg(test)]
mod share_tests;

pub use acknowledge::share_acknowledge;
pub use fetch::share_fetch;

/// Kafka's top-level message for a null GroupId.
pub const INVALID_GROUP_ID_MESSAGE: &str = "Invalid group id in the request.";
/// The highest acknowledge type at v1 (Reject) and at v2 (Renew).
const ACK_TYPE_MAX_V1: i8 = 3;
const ACK_TYPE_MAX_V2: i8 = 4;
/// AcknowledgeType Renew (v2).
const ACK_TYPE_RENEW: i8 = 4;

/// The group's `share.*` configs, with the broker's `group.share.*` configs
/// (`broker`) where the group sets none (§2.10); a stored value that does
/// not parse (the config layer validated it, so only a bug) falls back to
/// the broker's too.
pub fn share_config(
    configs: &BTreeMap<String, String>,
    broker: &crate::config::ShareBrokerConfig,
) -> ShareConfig {
    let d = ShareConfig::from_broker(broker);
    let get = |k: &str| configs.get(k).map(|v| v.trim());
    let num = |k: &str| get(k).and_then(|v| v.parse::<i64>().ok());
    ShareConfig {
        limits: ShareLimits {
            delivery_count_limit: num("share.delivery.count.limit")
                .and_then(|v| u16::try_from(v).ok())
                .unwrap_or(d.limits.delivery_count_limit),
            max_record_locks: num("share.partition.max.record.locks")
                .unwrap_or(d.limits.max_record_locks),
        },
        record_lock_duration_ms: num("share.record.lock.duration.ms")
            .unwrap_or(d.record_lock_duration_ms),
        auto_offset_reset: auto_offset_reset(get("share.auto.offset.reset")),
        renew_allowed: get("share.renew.acknowledge.enable")
            .map_or(d.renew_allowed, |v| !v.eq_ignore_ascii_case("false")),
        read_committed: get("share.isolation.level") == Some("read_committed"),
    }
}

/// `share.auto.offset.reset`: `latest` (also when unset), `earliest`, or
/// `by_duration:<ISO-8601 duration>` (Java's `Duration.parse` format,
/// non-negative, as the config layer checked it).
fn auto_offset_reset(v: Option<&str>) -> AutoOffsetReset {
    match v {
        Some("earliest") => AutoOffsetReset::Earliest,
        Some(v) => v
            .strip_prefix("by_duration:")
            .and_then(crate::config::group::iso8601_duration_ms)
            .map_or(AutoOffsetReset::Latest, |ms| AutoOffsetReset::ByDuration {
                ms: i64::try_from(ms).unwrap_or(i64::MAX),
            }),
        None => AutoOffsetReset::Latest,
    }
}

/// The lock duration as the responses' AcquisitionLockTimeoutMs.
fn lock_timeout_ms(c: &ShareConfig) -> i32 {
    i32::try_from(c.record_lock_duration_ms).unwrap_or(i32::MAX)
}

/// A top-level refusal: its code and message.
#[derive(Debug, Clone)]
struct TopLevel {
    code: i16,
    message: Option<String>,
}

impl TopLevel {
    fn new(e: ResponseError, message: Option<&str>) -> Self {
        TopLevel {
            code: code(e),
            message: message.map(str::to_string),
        }
    }
}

/// Kafka's checks before the session, in its order (§2.3 steps 2-4): a
/// null GroupId, READ on the group, the member id.
fn check_request(
    ctx: &Ctx,
    group: Option<&str>,
    member: Option<&str>,
) -> Result<(String, String), TopLevel> {
    let Some(group) = group else {
        return Err(TopLevel::new(
            ResponseError::InvalidRequest,
            Some(INVALID_GROUP_ID_MESSAGE),
        ));
    };
    if !ctx.allowed(AclOperation::Read, ResourceType::Group, group) {
        return Err(TopLevel::new(ResponseError::GroupAuthorizationFailed, None));
    }
    let member = member.unwrap_or("");
    if let Err(e) = crate::groups::share::check_member_id(member) {
        return Err(TopLevel {
            code: e.code(),
            message: e.message(),
        });
    }
    Ok((group.to_string(), member.to_string()))
}

/// Kafka's `validateAcknowledgementBatches` for one partition: false means
/// the partition answers INVALID_REQUEST (no message) and none of its
/// batches apply.
fn batches_valid(batches: &[AckBatch], version: i16, is_renew_ack: bool) -> bool {
    let type_max = if version >= 2 {
        ACK_TYPE_MAX_V2
    } else {
        ACK_TYPE_MAX_V1
    };
    let mut prev_last: Option<i64> = None;
    for b in batches {
        if b.first > b.last || prev_last.is_some_and(|p| b.first < p) || b.types.is_empty() {
            return false;
        }
        let len = i128::from(b.last) - i128::from(b.first) + 1;
        if b.types.len() > 1 && len != b.types.len() as i128 {
            return false;
        }
        if b.types
            .iter()
            .any(|&t| t < 0 || t > type_max || (t == ACK_TYPE_RENEW && !is_renew_ack))
        {
            return false;
        }
        prev_last = Some(b.last);
    }
    true
}

/// One partition's answer: its code and message, and the leader to use
/// for NOT_LEADER_OR_FOLLOWER.
#[derive(Debug, Clone, Default)]
struct PartAnswer {
    code: i16,
    message: Option<String>,
    /// (leader id, leader epoch).
    leader: Option<(i32, i32)>,
}

impl PartAnswer {
    fn error(e: ResponseError) -> Self {
        PartAnswer {
            code: code(e),
            ..PartAnswer::default()
        }
    }

    fn misrouted(m: &Misrouted) -> Self {
        PartAnswer {
            code: code(m.error),
            message: None,
            leader: m.leader.as_deref().map(|(l, _)| (l.leader, l.leader_epoch)),
        }
    }
}

/// A partition served here: its topic and its log.
#[derive(Clone)]
struct Served {
    topic: Arc<Topic>,
    slot: Arc<PartitionSlot>,
}

/// Finds a partition by topic id for a share request, with Kafka's
/// per-partition errors: READ on the topic, the topic id (`unknown_id`:
/// the code for an id the broker does not know), the partition, the
/// leader.
fn resolve(
    ctx: &Ctx,
    image: Option<&es_meta::MetaImage>,
    leaders: &mut LeaderEndpoints,
    tp: &TopicPartition,
    unknown_id: ResponseError,
) -> Result<Served, PartAnswer> {
    let b = &ctx.broker;
    let Some(topic) = b.topic_by_id(tp.topic_id) else {
        return Err(PartAnswer::error(unknown_id));
    };
    if !ctx.allowed(AclOperation::Read, ResourceType::Topic, &topic.name) {
        return Err(PartAnswer::error(ResponseError::TopicAuthorizationFailed));
    }
    match route(b, image, Some(&topic), tp.partition, NO_EPOCH) {
        Ok(r) => Ok(Served {
            topic,
            slot: r.slot,
        }),
        Err(m) => {
            leaders.note(&m);
            Err(PartAnswer::misrouted(&m))
        }
    }
}

/// The share-partition key of `tp` in `group`.
fn key_of(group: &str, tp: &TopicPartition) -> ShareKey {
    ShareKey::new(group, tp.topic_id, tp.partition)
}

/// A share failure as a partition's answer.
fn failure_answer(e: &crate::shares::manager::ShareFailure) -> PartAnswer {
    PartAnswer {
        code: e.code(),
        message: Some(e.to_string()),
        leader: None,
    }
}

/// One partition's acknowledgements as a request carries them.
struct AckPart {
    tp: TopicPartition,
    batches: Vec<AckBatch>,
}

/// Validates and applies acknowledgements, partition by partition (§2.4),
/// and waits for every durability ticket. Returns each partition's answer
/// in request order.
async fn acknowledge_parts(
    ctx: &Ctx,
    group: &str,
    member: &str,
    parts: Vec<AckPart>,
    is_renew_ack: bool,
    config: &ShareConfig,
    leaders: &mut LeaderEndpoints,
) -> Result<Vec<(TopicPartition, PartAnswer)>, RequestError> {
    let image = ctx.broker.image();
    let mut answers: Vec<(TopicPartition, PartAnswer)> = Vec::with_capacity(parts.len());
    let mut work: Vec<(usize, Served, AckPart)> = Vec::new();
    for part in parts {
        let i = answers.len();
        if part.batches.is_empty() {
            answers.push((part.tp, PartAnswer::default()));
            continue;
        }
        if !batches_valid(&part.batches, ctx.version, is_renew_ack) {
            answers.push((part.tp, PartAnswer::error(ResponseError::InvalidRequest)));
            continue;
        }
        match resolve(
            ctx,
            image.as_deref(),
            leaders,
            &part.tp,
            ResponseError::UnknownTopicOrPartition,
        ) {
            Err(a) => answers.push((part.tp, a)),
            Ok(s) => {
                answers.push((part.tp, PartAnswer::default()));
                work.push((i, s, part));
            }
        }
    }
    if work.is_empty() {
        return Ok(answers);
    }
    let broker = ctx.broker.clone();
    let (group_s, member_s, cfg) = (group.to_string(), member.to_string(), *config);
    let applied = blocking(move || {
        work.into_iter()
            .map(|(i, s, part)| {
                let key = key_of(&group_s, &part.tp);
                let t = ShareTarget {
                    key: &key,
                    topic: &s.topic.name,
                    log: &s.slot.log,
                    config: &cfg,
                };
                (i, broker.shares().acknowledge(&t, &member_s, &part.batches))
            })
            .collect::<Vec<_>>()
    })
    .await?;
    let mut tickets = Vec::new();
    for (i, r) in applied {
        match r {
            Ok(Some(t)) => tickets.push((i, t)),
            Ok(None) => {}
            Err(e) => answers[i].1 = failure_answer(&e),
        }
    }
    for (i, e) in wait_all(&ctx.broker, tickets).await {
        answers[i].1 = failure_answer(&e);
    }
    Ok(answers)
}

/// Waits for every ticket; returns the failures by their index.
async fn wait_all(
    b: &Arc<Broker>,
    tickets: Vec<(usize, DurableTicket)>,
) -> Vec<(usize, crate::shares::manager::ShareFailure)> {
    let mut failed = Vec::new();
    for (i, t) in tickets {
        if let Err(e) = b.shares().wait_durable(t).await {
            failed.push((i, e));
        }
    }
    failed
}

/// Releases a closed session's records (epoch -1), on a blocking thread.
async fn release(
    ctx: &Ctx,
    released: crate::shares::sessions::Released,
) -> Result<(), RequestError> {
    let b = ctx.broker.clone();
    blocking(move || {
        b.shares().release_session(&released);
    })
    .await
}

/// Groups `(topic id, partition, value)` by topic in first-seen order.
fn by_topic<T>(items: Vec<(TopicPartition, T)>) -> Vec<(Uuid, Vec<(i32, T)>)> {
    let mut out: Vec<(Uuid, Vec<(i32, T)>)> = Vec::new();
    for (tp, v) in items {
        match out.iter_mut().find(|(id, _)| *id == tp.topic_id) {
            Some((_, ps)) => ps.push((tp.partition, v)),
            None => out.push((tp.topic_id, vec![(tp.partition, v)])),
        }
    }
    out
}

/// Whether an answer is an error.
fn is_error(a: &PartAnswer) -> bool {
    a.code != NONE
}
