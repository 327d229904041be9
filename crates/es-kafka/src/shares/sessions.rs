//! Share sessions (KIP-932): the broker's cache of which share-partitions
//! each (group, member) is fetching from, with Kafka's `ShareSessionCache`
//! rules for ShareFetch and ShareAcknowledge (docs/share-groups-design.md
//! §2.6, §3.6). A sans-io core: no clock, no sockets, no share-partition
//! state. It owns the sessions, their epochs, their partition sets (in
//! insertion order, for the response rotation), which connection opened
//! each one, and the bound on how many there are. It never releases records
//! itself: closing a session (epoch -1, or its connection closing) hands the
//! caller the (group, member, partitions) whose records must be released.
//!
//! Invariants (checked by the property test in `sessions_tests.rs`):
//!
//! - at most one session per key (group id, member id), and never more than
//!   `max_sessions` (`group.share.max.share.sessions`) sessions;
//! - a session's epoch is always in `1..=i32::MAX`: it is 1 when opened and
//!   moves only by [`next_epoch`] on an accepted ShareFetch or
//!   ShareAcknowledge;
//! - every session is listed under exactly the connection that opened it, and
//!   a connection lists only live sessions; so a session's partitions are
//!   handed back at most once (a close or disconnect removes it);
//! - no input panics: every refusal is a [`SessionError`] with Kafka's code
//!   (`errors.rs`) and message.
//!
//! Where es differs from Kafka it says so at the spot.

use std::collections::{BTreeSet, HashMap};

use indexmap::IndexMap;
use uuid::Uuid;

/// `group.share.max.share.sessions`: the broker's default bound on sessions.
pub const MAX_SHARE_SESSIONS_DEFAULT: usize = 2000;

/// The epoch of a request that opens a session (Kafka's `INITIAL_EPOCH`).
pub const INITIAL_EPOCH: i32 = 0;
/// The epoch of a request that closes a session (Kafka's `FINAL_EPOCH`).
pub const FINAL_EPOCH: i32 = -1;

/// Kafka's texts for the session errors: the client sees each error's
/// default message (Kafka throws `Errors.X.exception()` without a text of its
/// own); [`LOG_ACKS_IN_INITIAL`] is what Kafka logs, not what it answers.
pub mod msg {
    /// SHARE_SESSION_NOT_FOUND (122).
    pub const NOT_FOUND: &str = "The share session was not found.";
    /// INVALID_SHARE_SESSION_EPOCH (123).
    pub const INVALID_EPOCH: &str = "The share session epoch is invalid.";
    /// SHARE_SESSION_LIMIT_REACHED (133).
    pub const LIMIT_REACHED: &str = "The limit of share sessions has been reached.";
    /// INVALID_REQUEST (42), Kafka's default text.
    pub const INVALID_REQUEST: &str = "This most likely occurs because of a request being \
        malformed by the client library or the message was sent to an incompatible broker. \
        See the broker logs for more details.";
    /// What Kafka logs for acknowledgements in an epoch-0 ShareFetch.
    pub const LOG_ACKS_IN_INITIAL: &str = "Acknowledge data present in Initial Fetch Request";
}

/// The id `connection.rs` gives each client connection.
pub type ConnectionId = u64;

/// One share-partition as ShareFetch names it (topic ids only, from v1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    pub topic_id: Uuid,
    pub partition: i32,
}

/// A session's key: one session per member of a group on this broker.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionKey {
    pub group_id: String,
    pub member_id: String,
}

impl SessionKey {
    pub fn new(group_id: impl Into<String>, member_id: impl Into<String>) -> Self {
        SessionKey {
            group_id: group_id.into(),
            member_id: member_id.into(),
        }
    }
}

/// A refused session step; the whole request is answered with its code at
/// the top level (`errors.rs` maps it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionError {
    /// No session for the key (SHARE_SESSION_NOT_FOUND, 122).
    NotFound,
    /// The request's epoch is not the session's, or is 0 in a
    /// ShareAcknowledge (INVALID_SHARE_SESSION_EPOCH, 123). `expected` is the
    /// session's epoch when there is one, for the log.
    InvalidEpoch { expected: Option<i32>, got: i32 },
    /// The cache is full (SHARE_SESSION_LIMIT_REACHED, 133). The caller waits
    /// the request's MaxWaitMs before answering it (§3.6).
    LimitReached,
    /// Acknowledgements in an epoch-0 ShareFetch (INVALID_REQUEST, 42).
    AcknowledgementsInInitial,
}

impl SessionError {
    /// The message Kafka answers with (its errors' default texts).
    pub fn message(&self) -> &'static str {
        match self {
            SessionError::NotFound => msg::NOT_FOUND,
            SessionError::InvalidEpoch { .. } => msg::INVALID_EPOCH,
            SessionError::LimitReached => msg::LIMIT_REACHED,
            SessionError::AcknowledgementsInInitial => msg::INVALID_REQUEST,
        }
    }
}

impl std::fmt::Display for SessionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SessionError::InvalidEpoch {
                expected: Some(e),
                got,
            } => write!(f, "{} (expected {e}, got {got})", self.message()),
            SessionError::AcknowledgementsInInitial => f.write_str(msg::LOG_ACKS_IN_INITIAL),
            _ => f.write_str(self.message()),
        }
    }
}

impl std::error::Error for SessionError {}

/// The epoch after `epoch` (Kafka's `ShareRequestMetadata.nextEpoch`): +1,
/// wrapping from `i32::MAX` to 1 (0 means "open"); a negative epoch stays
/// final.
pub const fn next_epoch(epoch: i32) -> i32 {
    if epoch < 0 {
        FINAL_EPOCH
    } else if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

/// What a ShareFetch brings to the session cache.
#[derive(Clone, Copy, Debug)]
pub struct ShareFetchSession<'a> {
    pub key: &'a SessionKey,
    /// ShareSessionEpoch.
    pub epoch: i32,
    /// The request's Topics/Partitions.
    pub partitions: &'a [TopicPartition],
    /// ForgottenTopicsData.
    pub forgotten: &'a [TopicPartition],
    /// Whether any partition carries AcknowledgementBatches.
    pub acknowledgements_present: bool,
    /// The connection the request came on.
    pub connection: ConnectionId,
}

/// A ShareFetch's session, accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FetchContext {
    /// Epoch 0: a new session holding the request's partitions (epoch 1
    /// now); `replaced` says a session of the key existed and was dropped.
    /// Its member keeps the records it holds (the member may still
    /// acknowledge them in the new session; Kafka's `newContext`, as read for
    /// this commit, drops the old session without a release), so nothing is
    /// handed back.
    Opened {
        partitions: Vec<TopicPartition>,
        replaced: bool,
    },
    /// Another epoch, accepted: the session after adding and forgetting,
    /// in its order, and the epoch the client sends next.
    Updated {
        partitions: Vec<TopicPartition>,
        next_epoch: i32,
    },
    /// Epoch -1: the session is closed; after applying the request's
    /// acknowledgements the caller releases the member's records on these.
    /// Nothing is fetched.
    Closed(Released),
}

/// A ShareAcknowledge's session, accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AckContext {
    /// The epoch advanced; the client sends `next_epoch` next.
    Advanced { next_epoch: i32 },
    /// Epoch -1: the session is closed; after applying the acknowledgements
    /// the caller releases the member's records on these partitions.
    Closed(Released),
}

/// A closed session: whose records to release, and on which partitions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Released {
    pub key: SessionKey,
    pub partitions: Vec<TopicPartition>,
}

/// What one partition brings to a response after an incremental ShareFetch
/// (Kafka's `CachedSharePartition.maybeUpdateResponseData` rule).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PartitionNews {
    /// Records were acquired for the member.
    pub records: bool,
    /// The partition answers an error.
    pub error: bool,
    /// The partition carries an acknowledgement result.
    pub acknowledgement: bool,
}

#[derive(Clone, Debug)]
struct Session {
    epoch: i32,
    /// The partitions, in insertion order; the flag is "added and not yet
    /// listed in a response".
    partitions: IndexMap<TopicPartition, bool>,
    connection: ConnectionId,
}

impl Session {
    fn partition_list(&self) -> Vec<TopicPartition> {
        self.partitions.keys().copied().collect()
    }
}

/// The broker's share sessions.
#[derive(Clone, Debug)]
pub struct ShareSessions {
    max_sessions: usize,
    sessions: HashMap<SessionKey, Session>,
    by_connection: HashMap<ConnectionId, BTreeSet<SessionKey>>,
}

impl Default for ShareSessions {
    fn default() -> Self {
        Self::new(MAX_SHARE_SESSIONS_DEFAULT)
    }
}

impl ShareSessions {
    /// A cache holding at most `max_sessions` sessions.
    pub fn new(max_sessions: usize) -> Self {
        ShareSessions {
            max_sessions,
            sessions: HashMap::new(),
            by_connection: HashMap::new(),
        }
    }

    /// Sessions held now.
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// The bound (`group.share.max.share.sessions`).
    pub fn max_sessions(&self) -> usize {
        self.max_sessions
    }

    /// The epoch the key's session expects next, if it has one.
    pub fn epoch(&self, key: &SessionKey) -> Option<i32> {
        self.sessions.get(key).map(|s| s.epoch)
    }

    /// The key's session's partitions, in order.
    pub fn partitions(&self, key: &SessionKey) -> Option<Vec<TopicPartition>> {
        self.sessions.get(key).map(Session::partition_list)
    }

    /// The connection that opened the key's session.
    pub fn connection(&self, key: &SessionKey) -> Option<ConnectionId> {
        self.sessions.get(key).map(|s| s.connection)
    }

    /// Kafka's `SharePartitionManager.newContext`: the session step of a
    /// ShareFetch (§2.6).
    ///
    /// - epoch 0 opens a session with the request's partitions, replacing any
    ///   session of the key; acknowledgements present are INVALID_REQUEST;
    ///   a full cache (with no session of the key to replace) is
    ///   SHARE_SESSION_LIMIT_REACHED;
    /// - epoch -1 closes the key's session (SHARE_SESSION_NOT_FOUND if none);
    /// - any other epoch must be the session's (SHARE_SESSION_NOT_FOUND,
    ///   INVALID_SHARE_SESSION_EPOCH); the request's partitions are added,
    ///   the forgotten ones removed, and the epoch advances.
    ///
    /// A refused request changes nothing.
    pub fn share_fetch(
        &mut self,
        req: ShareFetchSession<'_>,
    ) -> Result<FetchContext, SessionError> {
        match req.epoch {
            INITIAL_EPOCH => self.open(req),
            FINAL_EPOCH => match self.remove(req.key) {
                Some(released) => Ok(FetchContext::Closed(released)),
                None => Err(SessionError::NotFound),
            },
            epoch => {
                let s = self
                    .sessions
                    .get_mut(req.key)
                    .ok_or(SessionError::NotFound)?;
                if s.epoch != epoch {
                    return Err(SessionError::InvalidEpoch {
                        expected: Some(s.epoch),
                        got: epoch,
                    });
                }
                for tp in req.partitions {
                    // A partition already in the session keeps its place and
                    // its flag (Kafka: UPDATED, not ADDED).
                    s.partitions.entry(*tp).or_insert(true);
                }
                for tp in req.forgotten {
                    s.partitions.shift_remove(tp);
                }
                s.epoch = next_epoch(s.epoch);
                Ok(FetchContext::Updated {
                    partitions: s.partition_list(),
                    next_epoch: s.epoch,
                })
            }
        }
    }

    fn open(&mut self, req: ShareFetchSession<'_>) -> Result<FetchContext, SessionError> {
        if req.acknowledgements_present {
            return Err(SessionError::AcknowledgementsInInitial);
        }
        let replacing = self.sessions.contains_key(req.key);
        // Kafka removes the key's session before it asks for room, so a
        // replacement always fits; es checks first so that a refusal changes
        // nothing (the same outcome: only a new key can be refused).
        if !replacing && self.sessions.len() >= self.max_sessions {
            return Err(SessionError::LimitReached);
        }
        if replacing {
            // Dropped without a release (see [`FetchContext::Opened`]).
            let _ = self.remove(req.key);
        }
        let mut partitions = IndexMap::with_capacity(req.partitions.len());
        for tp in req.partitions {
            // New partitions are listed in the first response (the full
            // response of the opening fetch lists them all).
            partitions.insert(*tp, true);
        }
        let session = Session {
            epoch: next_epoch(INITIAL_EPOCH),
            partitions,
            connection: req.connection,
        };
        let list = session.partition_list();
        self.sessions.insert(req.key.clone(), session);
        self.by_connection
            .entry(req.connection)
            .or_default()
            .insert(req.key.clone());
        Ok(FetchContext::Opened {
            partitions: list,
            replaced: replacing,
        })
    }

    /// Kafka's `acknowledgeSessionUpdate` (and `releaseSession` on -1): the
    /// session step of a ShareAcknowledge. Epoch 0 is
    /// INVALID_SHARE_SESSION_EPOCH; no session is SHARE_SESSION_NOT_FOUND;
    /// -1 closes the session; any other epoch must be the session's
    /// (INVALID_SHARE_SESSION_EPOCH) and advances it. A refused request
    /// changes nothing.
    pub fn share_acknowledge(
        &mut self,
        key: &SessionKey,
        epoch: i32,
    ) -> Result<AckContext, SessionError> {
        if epoch == INITIAL_EPOCH {
            return Err(SessionError::InvalidEpoch {
                expected: self.epoch(key),
                got: epoch,
            });
        }
        if epoch == FINAL_EPOCH {
            return match self.remove(key) {
                Some(released) => Ok(AckContext::Closed(released)),
                None => Err(SessionError::NotFound),
            };
        }
        let s = self.sessions.get_mut(key).ok_or(SessionError::NotFound)?;
        if s.epoch != epoch {
            return Err(SessionError::InvalidEpoch {
                expected: Some(s.epoch),
                got: epoch,
            });
        }
        s.epoch = next_epoch(s.epoch);
        Ok(AckContext::Advanced {
            next_epoch: s.epoch,
        })
    }

    /// Whether a response must list `tp` of the key's session: it has
    /// records, an error or an acknowledgement result, or it was added to the
    /// session and no response has listed it yet. Answering true for a newly
    /// added partition marks it listed. A partition not in the session (or
    /// no session) is listed only for news of its own.
    pub fn must_list(
        &mut self,
        key: &SessionKey,
        tp: &TopicPartition,
        news: PartitionNews,
    ) -> bool {
        let mut listed = news.records || news.error || news.acknowledgement;
        if let Some(fresh) = self
            .sessions
            .get_mut(key)
            .and_then(|s| s.partitions.get_mut(tp))
        {
            listed |= *fresh;
            *fresh = false;
        }
        listed
    }

    /// Calls `f` with every session's key and each of its partitions (the
    /// manager keeps a share-partition that any session names loaded).
    pub fn for_each_partition(&self, mut f: impl FnMut(&SessionKey, &TopicPartition)) {
        for (k, s) in &self.sessions {
            for tp in s.partitions.keys() {
                f(k, tp);
            }
        }
    }

    /// The connection-close hook (Kafka's
    /// `ShareSessionCache.ClientConnectionDisconnectListener`): every session
    /// the connection opened is removed, and for each the caller releases the
    /// member's records on its partitions. Kafka tracks one session per
    /// connection (the last opened); es tracks all of them, so a connection
    /// carrying several members' sessions releases them all.
    pub fn connection_closed(&mut self, connection: ConnectionId) -> Vec<Released> {
        let keys = self.by_connection.remove(&connection).unwrap_or_default();
        keys.into_iter()
            .filter_map(|key| self.remove(&key))
            .collect()
    }

    /// Removes the key's session and its connection's note of it.
    fn remove(&mut self, key: &SessionKey) -> Option<Released> {
        let s = self.sessions.remove(key)?;
        if let Some(keys) = self.by_connection.get_mut(&s.connection) {
            keys.remove(key);
            if keys.is_empty() {
                self.by_connection.remove(&s.connection);
            }
        }
        Some(Released {
            key: key.clone(),
            partitions: s.partitions.into_keys().collect(),
        })
    }
}

#[cfg(test)]
#[path = "sessions_tests.rs"]
mod tests;
