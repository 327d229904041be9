//! Fetch sessions (KIP-227), kept as Kafka's `FetchManager` and
//! `FetchSessionCache` keep them, so that a client sees the same answers:
//!
//! - Session id 0 with epoch -1 (or any fetch before v7): a sessionless full
//!   fetch, answered with session id 0.
//! - Epoch 0 or -1 with any session id: a full fetch. A nonzero session id
//!   names a session to close first (gone or not). Epoch 0 opens a new session
//!   holding every partition of the answer (its id in the answer; 0 when the
//!   cache is full and no session can be evicted); epoch -1 opens none.
//! - Any other epoch: an incremental fetch of the session named. Unknown
//!   session: FETCH_SESSION_ID_NOT_FOUND; an epoch other than the session's
//!   next: INVALID_FETCH_SESSION_EPOCH; a session opened with topic ids
//!   (v13+) used by a request by name, or the reverse:
//!   FETCH_SESSION_TOPIC_ID_ERROR. Otherwise the request's partitions are
//!   added to (or update) the session, the forgotten ones leave it, and the
//!   session's partitions are read; the answer holds only those with records,
//!   an error, or a high watermark or log start offset that changed since the
//!   session last told the client. A partition that returned records moves to
//!   the end of the session (the next fetch reads it last). A session left
//!   with no partitions is closed and the fetch answered as sessionless.
//!
//! Kafka's cache is eight shards, each owning a range of session ids
//! (`i32::MAX / 8` wide); a full fetch that names a session id outside every
//! shard, or an incremental fetch of one, fails in Kafka's shard lookup with
//! UNKNOWN_SERVER_ERROR, and es answers those the same way.
//!
//! The cache holds [`SESSION_CACHE_SLOTS`] sessions (Kafka's
//! `max.incremental.fetch.session.cache.slots` default). When it is full, a
//! new session evicts one idle for [`SESSION_EVICTION_MS`], or else the
//! smallest session older than that with fewer partitions than the new one
//! (Kafka's rule, less its priority for follower sessions: es has no
//! followers); if none qualifies the fetch is answered without a session.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use indexmap::IndexMap;
use parking_lot::Mutex;
use uuid::Uuid;

use crate::codec::fetch_response::FetchedPartition;

/// Sessions the cache holds (Kafka's `max.incremental.fetch.session.cache.slots`).
pub const SESSION_CACHE_SLOTS: usize = 1000;
/// How long a session is protected from eviction after its last use or
/// its creation (the 120 s of Kafka's fetch session cache).
pub const SESSION_EVICTION_MS: u64 = 120_000;
/// Kafka's fetch session cache shards; each owns `i32::MAX / 8` session ids.
const CACHE_SHARDS: i32 = 8;
const SESSION_ID_RANGE: i32 = i32::MAX / CACHE_SHARDS;

/// A topic as a fetch names it: by id from v13, by name before.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TopicKey {
    Id(Uuid),
    Name(String),
}

/// One partition of a fetch.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PartKey {
    pub topic: TopicKey,
    pub partition: i32,
}

/// What a fetch asks of one partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReqData {
    pub fetch_offset: i64,
    pub max_bytes: i32,
    pub current_leader_epoch: i32,
    pub last_fetched_epoch: i32,
}

/// A partition a session holds: what the client last asked, and what it was
/// last told.
#[derive(Clone, Debug)]
struct Cached {
    req: ReqData,
    high_watermark: i64,
    log_start_offset: i64,
}

struct Session {
    epoch: i32,
    uses_topic_ids: bool,
    partitions: IndexMap<PartKey, Cached>,
    created: Instant,
    last_used: Instant,
}

/// How a fetch is answered, as decided from its session id and epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Context {
    /// No session: every partition answered, session id 0.
    Sessionless,
    /// A full fetch that opens a session with the partitions it answers.
    Full,
    /// An incremental fetch of session `id`, whose epoch is now `epoch`.
    Incremental { id: i32, epoch: i32 },
    /// A session error: this top-level error, no partitions, session id 0.
    Error(i16),
    /// Kafka's shard lookup failed: answered as an UNKNOWN_SERVER_ERROR of
    /// the whole request.
    ShardLookupFailed,
}

/// The broker's fetch sessions (one per broker, [`FetchSessions::of`]).
#[derive(Default)]
pub struct FetchSessions {
    sessions: Mutex<HashMap<i32, Session>>,
}

/// Kafka's `FetchMetadata.nextEpoch`.
pub fn next_epoch(epoch: i32) -> i32 {
    if epoch < 0 {
        -1
    } else if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

/// Whether Kafka's `getCacheShard(id)` finds a shard (Java's division
/// truncates towards zero, as Rust's does).
fn shard_exists(id: i32) -> bool {
    (0..CACHE_SHARDS).contains(&(id / SESSION_ID_RANGE))
}

impl FetchSessions {
    pub fn of(broker: &crate::Broker) -> std::sync::Arc<FetchSessions> {
        broker.extension(FetchSessions::default)
    }

    /// Kafka's `FetchManager.newContext`: how to answer a fetch with this
    /// session id and epoch, and the partitions to read (the request's, or
    /// for an incremental fetch the session's after the request updated it).
    pub fn new_context(
        &self,
        version: i16,
        session_id: i32,
        epoch: i32,
        fetch: Vec<(PartKey, ReqData)>,
        forget: &[PartKey],
    ) -> (Context, Vec<(PartKey, ReqData)>) {
        if version < 7 {
            return (Context::Sessionless, fetch);
        }
        if epoch == 0 || epoch == -1 {
            if session_id != 0 {
                if !shard_exists(session_id) {
                    return (Context::ShardLookupFailed, fetch);
                }
                self.sessions.lock().remove(&session_id);
            }
            let ctx = if epoch == -1 {
                Context::Sessionless
            } else {
                Context::Full
            };
            return (ctx, fetch);
        }
        if !shard_exists(session_id) {
            return (Context::ShardLookupFailed, fetch);
        }
        let mut sessions = self.sessions.lock();
        let Some(s) = sessions.get_mut(&session_id) else {
            return (
                Context::Error(crate::errors::code(
                    crate::errors::ResponseError::FetchSessionIdNotFound,
                )),
                Vec::new(),
            );
        };
        if s.epoch != epoch {
            return (
                Context::Error(crate::errors::code(
                    crate::errors::ResponseError::InvalidFetchSessionEpoch,
                )),
                Vec::new(),
            );
        }
        if s.uses_topic_ids != (version >= 13) {
            return (
                Context::Error(crate::errors::code(
                    crate::errors::ResponseError::FetchSessionTopicIdError,
                )),
                Vec::new(),
            );
        }
        for (key, req) in &fetch {
            match s.partitions.get_mut(key) {
                Some(c) => c.req = *req,
                None => {
                    s.partitions.insert(
                        key.clone(),
                        Cached {
                            req: *req,
                            high_watermark: -1,
                            log_start_offset: -1,
                        },
                    );
                }
            }
        }
        for key in forget {
            s.partitions.shift_remove(key);
        }
        if s.partitions.is_empty() {
            sessions.remove(&session_id);
            // Kafka answers with the request's own partitions (none, unless
            // the request also forgot what it added).
            return (Context::Sessionless, fetch);
        }
        s.last_used = Instant::now();
        s.epoch = next_epoch(s.epoch);
        let parts = s
            .partitions
            .iter()
            .map(|(k, c)| (k.clone(), c.req))
            .collect();
        (
            Context::Incremental {
                id: session_id,
                epoch: s.epoch,
            },
            parts,
        )
    }

    /// Opens a session holding every partition of a full fetch's answer
    /// (`reqs`: what the request asked of each); its id, or 0 when the cache
    /// has no room.
    pub fn open(
        &self,
        uses_topic_ids: bool,
        reqs: &HashMap<PartKey, ReqData>,
        answer: &[(PartKey, FetchedPartition)],
    ) -> i32 {
        let now = Instant::now();
        let mut sessions = self.sessions.lock();
        if sessions.len() >= SESSION_CACHE_SLOTS && !evict_one(&mut sessions, answer.len(), now) {
            return 0;
        }
        let id = loop {
            let bytes = Uuid::new_v4().into_bytes();
            let r = i32::from_be_bytes([bytes[0] & 0x7f, bytes[1], bytes[2], bytes[3]]);
            let id = r % (SESSION_ID_RANGE * CACHE_SHARDS);
            if id != 0 && !sessions.contains_key(&id) {
                break id;
            }
        };
        let partitions = answer
            .iter()
            .filter_map(|(k, p)| {
                let req = reqs.get(k)?;
                Some((
                    k.clone(),
                    Cached {
                        req: *req,
                        high_watermark: p.high_watermark,
                        log_start_offset: p.log_start_offset,
                    },
                ))
            })
            .collect();
        sessions.insert(
            id,
            Session {
                epoch: next_epoch(0),
                uses_topic_ids,
                partitions,
                created: now,
                last_used: now,
            },
        );
        id
    }

    /// Kafka's `IncrementalFetchContext.updateAndGenerateResponseData`: the
    /// partitions of session `id` the answer must hold, each remembered as
    /// told; or INVALID_FETCH_SESSION_EPOCH when another fetch of the
    /// session came in between (the session's epoch is no longer `epoch`).
    pub fn answer_incremental(
        &self,
        id: i32,
        epoch: i32,
        answer: Vec<(PartKey, FetchedPartition)>,
    ) -> Result<Vec<(PartKey, FetchedPartition)>, i16> {
        let mut sessions = self.sessions.lock();
        let Some(s) = sessions.get_mut(&id).filter(|s| s.epoch == epoch) else {
            return Err(crate::errors::code(
                crate::errors::ResponseError::InvalidFetchSessionEpoch,
            ));
        };
        Ok(select_incremental(&mut s.partitions, answer))
    }

    /// What [`FetchSessions::answer_incremental`] would answer, the session
    /// left as it is (Kafka sizes a response before it decides to throttle,
    /// and a throttled fetch changes no session).
    pub fn preview_incremental(
        &self,
        id: i32,
        epoch: i32,
        answer: Vec<(PartKey, FetchedPartition)>,
    ) -> Result<Vec<(PartKey, FetchedPartition)>, i16> {
        let mut partitions = {
            let sessions = self.sessions.lock();
            match sessions.get(&id).filter(|s| s.epoch == epoch) {
                Some(s) => s.partitions.clone(),
                None => {
                    return Err(crate::errors::code(
                        crate::errors::ResponseError::InvalidFetchSessionEpoch,
                    ))
                }
            }
        };
        Ok(select_incremental(&mut partitions, answer))
    }

    /// Whether session `id` is still at `epoch` (Kafka's check of a
    /// throttled incremental fetch).
    pub fn at_epoch(&self, id: i32, epoch: i32) -> bool {
        self.sessions
            .lock()
            .get(&id)
            .is_some_and(|s| s.epoch == epoch)
    }
}

/// Kafka's `IncrementalFetchContext.updateAndGenerateResponseData` over a
/// session's partitions: those the answer must hold, each remembered as
/// told.
fn select_incremental(
    partitions: &mut IndexMap<PartKey, Cached>,
    answer: Vec<(PartKey, FetchedPartition)>,
) -> Vec<(PartKey, FetchedPartition)> {
    let mut out = Vec::new();
    for (key, p) in answer {
        let Some(c) = partitions.get_mut(&key) else {
            continue;
        };
        let mut must = !p.records.is_empty();
        if c.high_watermark != p.high_watermark {
            must = true;
            c.high_watermark = p.high_watermark;
        }
        if c.log_start_offset != p.log_start_offset {
            must = true;
            c.log_start_offset = p.log_start_offset;
        }
        if p.error_code != crate::errors::NONE {
            // Sent again once the error is gone.
            c.high_watermark = -1;
            must = true;
        }
        if must {
            if !p.records.is_empty() {
                if let Some(c) = partitions.shift_remove(&key) {
                    partitions.insert(key.clone(), c);
                }
            }
            out.push((key, p));
        }
    }
    out
}

/// Makes room for a session of `size` partitions in a full cache: Kafka's
/// `tryEvict`, less the follower priority.
fn evict_one(sessions: &mut HashMap<i32, Session>, size: usize, now: Instant) -> bool {
    let protect = Duration::from_millis(SESSION_EVICTION_MS);
    let stale = sessions
        .iter()
        .filter(|(_, s)| now.duration_since(s.last_used) >= protect)
        .min_by_key(|(id, s)| (s.last_used, **id))
        .map(|(id, _)| *id);
    let victim = stale.or_else(|| {
        sessions
            .iter()
            .filter(|(_, s)| now.duration_since(s.created) >= protect && s.partitions.len() < size)
            .min_by_key(|(id, s)| (s.partitions.len(), **id))
            .map(|(id, _)| *id)
    });
    match victim {
        Some(id) => {
            sessions.remove(&id);
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(p: i32) -> PartKey {
        PartKey {
            topic: TopicKey::Name("t".into()),
            partition: p,
        }
    }

    fn req(offset: i64) -> ReqData {
        ReqData {
            fetch_offset: offset,
            max_bytes: 1024,
            current_leader_epoch: -1,
            last_fetched_epoch: -1,
        }
    }

    fn answered(p: i32, hw: i64) -> (PartKey, FetchedPartition) {
        (
            key(p),
            FetchedPartition {
                partition_index: p,
                high_watermark: hw,
                ..FetchedPartition::default()
            },
        )
    }

    #[test]
    fn epochs_and_shards_follow_kafka() {
        assert_eq!(next_epoch(0), 1);
        assert_eq!(next_epoch(i32::MAX), 1);
        assert_eq!(next_epoch(-1), -1);
        assert!(shard_exists(-1) && shard_exists(1) && shard_exists(2_147_483_639));
        assert!(!shard_exists(i32::MAX) && !shard_exists(i32::MIN));
    }

    #[test]
    fn a_full_cache_evicts_only_what_kafka_would() {
        let s = FetchSessions::default();
        let reqs: HashMap<PartKey, ReqData> = (0..3).map(|p| (key(p), req(0))).collect();
        let big: Vec<_> = (0..3).map(|p| answered(p, 5)).collect();
        for _ in 0..SESSION_CACHE_SLOTS {
            assert_ne!(s.open(false, &reqs, &big[..1]), 0);
        }
        // Every session is fresh: no room for another.
        assert_eq!(s.open(false, &reqs, &big), 0);
        // One grows old: a larger session evicts it, a smaller one does not.
        let ago = |ms: u64| Instant::now().checked_sub(Duration::from_millis(ms));
        if let (Some(used), Some(created)) = (
            ago(SESSION_EVICTION_MS / 2),
            ago(SESSION_EVICTION_MS * 3 / 2),
        ) {
            let mut all = s.sessions.lock();
            let victim = all.values_mut().next().expect("a session");
            victim.created = created;
            victim.last_used = used;
        } else {
            // A clock that started less than three minutes ago.
            return;
        }
        assert_eq!(s.open(false, &reqs, &big[..1]), 0);
        assert_ne!(s.open(false, &reqs, &big), 0);
        assert_eq!(s.sessions.lock().len(), SESSION_CACHE_SLOTS);
    }

    #[test]
    fn partitions_with_records_move_to_the_end() {
        let s = FetchSessions::default();
        let reqs: HashMap<PartKey, ReqData> = (0..3).map(|p| (key(p), req(0))).collect();
        let id = s.open(
            false,
            &reqs,
            &[answered(0, 5), answered(1, 5), answered(2, 5)],
        );
        let (ctx, parts) = s.new_context(12, id, 1, Vec::new(), &[]);
        assert_eq!(ctx, Context::Incremental { id, epoch: 2 });
        assert_eq!(parts.len(), 3);
        let mut with_records = answered(0, 5);
        with_records.1.records = bytes::Bytes::from_static(b"x");
        let out = s
            .answer_incremental(id, 2, vec![with_records, answered(1, 5), answered(2, 6)])
            .expect("answer");
        let got: Vec<i32> = out.iter().map(|(k, _)| k.partition).collect();
        assert_eq!(got, vec![0, 2], "records and a new high watermark");
        let (_, parts) = s.new_context(12, id, 2, Vec::new(), &[]);
        let order: Vec<i32> = parts.iter().map(|(k, _)| k.partition).collect();
        assert_eq!(order, vec![1, 2, 0]);
        // A session opened by name refuses a request by id.
        let (ctx, _) = s.new_context(13, id, 3, Vec::new(), &[]);
        assert_eq!(
            ctx,
            Context::Error(crate::errors::code(
                crate::errors::ResponseError::FetchSessionTopicIdError
            ))
        );
    }
}
