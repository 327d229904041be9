//! Throttling of clients over their quotas, as Kafka does it (KIP-219):
//! each request's usage is recorded against the client's quotas
//! ([`crate::quota`]), the response says for how long the client is
//! throttled (`throttle_time_ms`), and the connection takes no further
//! request for that long ([`ConnThrottle`], the connection's mute, which
//! [`crate::connection`] honours before it dispatches the next frame).
//!
//! What is recorded: produce request bytes (`producer_byte_rate`), fetch
//! response bytes (`consumer_byte_rate`; Produce and Fetch do that
//! themselves), and for every request the time its handler spent running
//! (`request_percentage`): the time inside the polls of its future
//! ([`Timed`]), the counterpart of Kafka's request-thread time, so waits for
//! fsyncs, replicas, long polls and the connection's turn do not count.
//! A produce with acks=0 counts no request time (as in Kafka) but is muted
//! for its bytes. Requests made inside the broker, inter-broker requests
//! (WriteTxnMarkers, follower fetches) and the SASL and ApiVersions
//! requests are not recorded.
//!
//! Pipelining differs from Kafka in one way: Kafka reads one request of a
//! connection at a time, so a muted connection has nothing in flight; es
//! reads ahead (up to the in-flight bound), and requests read before the
//! mute began still run. The mute stops every request after them.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use es_auth::principal::Principal;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::StrBytes;
use parking_lot::Mutex;

use super::Ctx;
use crate::quota::{QuotaKind, QuotaManager};

/// A connection's mute: no request of the connection is dispatched before
/// the instant it holds.
#[derive(Debug, Default)]
pub struct ConnThrottle {
    until: Mutex<Option<tokio::time::Instant>>,
}

impl ConnThrottle {
    /// Mutes the connection for `ms` from now (a longer mute already set
    /// stays).
    pub fn throttle(&self, ms: i32) {
        let Ok(ms) = u64::try_from(ms) else {
            return;
        };
        if ms == 0 {
            return;
        }
        let end = tokio::time::Instant::now() + std::time::Duration::from_millis(ms);
        let mut until = self.until.lock();
        if until.is_none_or(|u| u < end) {
            *until = Some(end);
        }
    }

    /// When the mute ends, if it has not yet.
    pub fn muted_until(&self) -> Option<tokio::time::Instant> {
        let mut until = self.until.lock();
        match *until {
            Some(u) if u > tokio::time::Instant::now() => Some(u),
            _ => {
                *until = None;
                None
            }
        }
    }
}

/// One request's usage, as its handler runs.
#[derive(Debug, Default)]
pub struct Usage {
    /// Time spent inside the polls of the handler's future.
    handler_nanos: AtomicU64,
    /// The handler recorded its request time itself (Produce, Fetch).
    recorded: AtomicBool,
}

/// A future that adds the time spent in each of its polls to a [`Usage`].
pub struct Timed<F> {
    f: Pin<Box<F>>,
    usage: Arc<Usage>,
}

impl<F: Future> Timed<F> {
    pub fn new(f: F, usage: Arc<Usage>) -> Self {
        Timed {
            f: Box::pin(f),
            usage,
        }
    }
}

impl<F: Future> Future for Timed<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let start = Instant::now();
        let r = self.f.as_mut().poll(cx);
        let spent = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.usage.handler_nanos.fetch_add(spent, Ordering::Relaxed);
        r
    }
}

/// Kafka's `NanosToPercentagePerSecond`: a handler's nanoseconds as the
/// percent of one thread-second they are.
fn nanos_to_percentage(nanos: u64) -> f64 {
    nanos as f64 * 100.0 / 1e9
}

/// Where `throttle_time_ms` is in the body of `key`'s response at
/// `version` (bytes after the response header), for the responses the
/// dispatcher completes; `None` where the version has no such field or
/// the handler sets it (Produce, Fetch). From Kafka's message specs: the
/// first field from these versions on, OffsetDelete's second.
pub fn throttle_offset(key: ApiKey, version: i16) -> Option<usize> {
    let first_from = match key {
        ApiKey::Produce
        | ApiKey::Fetch
        | ApiKey::ApiVersions
        | ApiKey::SaslHandshake
        | ApiKey::SaslAuthenticate
        | ApiKey::DescribeQuorum
        | ApiKey::WriteTxnMarkers => return None,
        ApiKey::OffsetDelete => return Some(2),
        ApiKey::ListOffsets
        | ApiKey::JoinGroup
        | ApiKey::CreateTopics
        | ApiKey::OffsetForLeaderEpoch => 2,
        ApiKey::Metadata | ApiKey::OffsetCommit | ApiKey::OffsetFetch => 3,
        ApiKey::FindCoordinator
        | ApiKey::Heartbeat
        | ApiKey::LeaveGroup
        | ApiKey::SyncGroup
        | ApiKey::DescribeGroups
        | ApiKey::ListGroups
        | ApiKey::DeleteTopics => 1,
        _ => 0,
    };
    (version >= first_from).then_some(0)
}

/// Requests that count no handler time: the handler records its own
/// (Produce, Fetch), or Kafka exempts them (inter-broker requests, the
/// connection's own SASL and ApiVersions exchange).
fn exempt(key: ApiKey) -> bool {
    matches!(
        key,
        ApiKey::Produce
            | ApiKey::Fetch
            | ApiKey::ApiVersions
            | ApiKey::SaslHandshake
            | ApiKey::SaslAuthenticate
            | ApiKey::WriteTxnMarkers
    )
}

/// Writes `ms` into the `throttle_time_ms` of an encoded response frame
/// (size, header, body) of `key` at `version`, if the version has one.
pub fn patch(frame: Bytes, key: ApiKey, version: i16, ms: i32) -> Bytes {
    let Some(at) = throttle_offset(key, version) else {
        return frame;
    };
    // Size, correlation id, and in a v1 header its (empty) tagged fields.
    let header = 4 + 4 + usize::from(key.response_header_version(version) >= 1);
    let at = header + at;
    if frame.len() < at + 4 {
        return frame;
    }
    let mut out = BytesMut::from(&frame[..]);
    out[at..at + 4].copy_from_slice(&ms.to_be_bytes());
    out.freeze()
}

/// What the dispatcher needs to finish a request's throttling after its
/// handler is done.
pub struct Finish {
    pub key: ApiKey,
    pub version: i16,
    /// (principal, client id), shared with the request rather than copied;
    /// `None` for requests made inside the broker.
    pub subject: Option<(Arc<Principal>, StrBytes)>,
    pub usage: Arc<Usage>,
    pub conn: Option<Arc<ConnThrottle>>,
}

impl Finish {
    /// Records the request's handler time unless exempt or recorded by the
    /// handler; when the client is over its request quota, mutes the
    /// connection and writes the throttle time into the response.
    pub fn finish(self, broker: &crate::broker::Broker, response: Option<Bytes>) -> Option<Bytes> {
        if exempt(self.key) || self.usage.recorded.load(Ordering::Relaxed) {
            return response;
        }
        let Some((user, client_id)) = &self.subject else {
            return response;
        };
        let quotas = &broker.security().quotas;
        let nanos = self.usage.handler_nanos.load(Ordering::Relaxed);
        let t = quotas.request.record(
            &user.name,
            client_id,
            nanos_to_percentage(nanos),
            broker.clock().now_ms(),
        );
        if t <= 0 {
            return response;
        }
        if let Some(c) = &self.conn {
            c.throttle(t);
        }
        response.map(|r| patch(r, self.key, self.version, t))
    }
}

impl Ctx {
    /// Who the quotas see: the principal's name and the client id; `None`
    /// for a request made inside the broker.
    pub fn quota_subject(&self) -> Option<(&str, &str)> {
        if self.internal {
            return None;
        }
        let client_id = self.header.client_id.as_deref().unwrap_or("");
        Some((self.principal.name.as_str(), client_id))
    }

    fn record(&self, m: &QuotaManager, value: f64) -> i32 {
        match self.quota_subject() {
            Some((user, client)) => m.record(user, client, value, self.broker.clock().now_ms()),
            None => 0,
        }
    }

    /// Records `bytes` against the client's `kind` quota: the throttle
    /// time if it is now over it.
    pub fn record_bytes(&self, kind: QuotaKind, bytes: usize) -> i32 {
        let q = &self.broker.security().quotas;
        let m = match kind {
            QuotaKind::Produce => &q.produce,
            QuotaKind::Fetch => &q.fetch,
            QuotaKind::Request => &q.request,
        };
        self.record(m, bytes as f64)
    }

    /// Takes back fetch bytes recorded for a response that is not sent.
    pub fn unrecord_fetch_bytes(&self, bytes: usize) {
        if let Some((user, client)) = self.quota_subject() {
            let now = self.broker.clock().now_ms();
            (self.broker.security().quotas.fetch).unrecord(user, client, bytes as f64, now);
        }
    }

    /// Records the handler's time so far against the client's request
    /// quota (once; the dispatcher records no more): the throttle time if
    /// it is now over it.
    pub fn record_request_time(&self) -> i32 {
        if self.usage.recorded.swap(true, Ordering::Relaxed) {
            return 0;
        }
        let nanos = self.usage.handler_nanos.load(Ordering::Relaxed);
        self.record(
            &self.broker.security().quotas.request,
            nanos_to_percentage(nanos),
        )
    }

    /// Marks the request's time as accounted for without recording it
    /// (Kafka exempts acks=0 produce requests from the request quota).
    pub fn exempt_request_time(&self) {
        self.usage.recorded.store(true, Ordering::Relaxed);
    }

    /// Whether any quota the fetch path records is set (else it records
    /// nothing and builds its response once).
    pub fn fetch_quotas_enabled(&self) -> bool {
        let q = &self.broker.security().quotas;
        self.quota_subject().is_some() && (q.fetch.enabled() || q.request.enabled())
    }

    /// Kafka's cap on a consumer's fetch: the bytes its quota allows in one
    /// quota window (`usize::MAX` without a quota).
    pub fn fetch_quota_window_bytes(&self) -> usize {
        let Some((user, client)) = self.quota_subject() else {
            return usize::MAX;
        };
        match self
            .broker
            .security()
            .quotas
            .fetch
            .max_value_in_window(user, client)
        {
            // Java's (int) of a double: saturating, at least 0.
            Some(b) if b < i32::MAX as f64 => b.max(0.0) as usize,
            _ => usize::MAX,
        }
    }

    /// Mutes the request's connection for `ms` (KIP-219).
    pub fn throttle_connection(&self, ms: i32) {
        if let Some(c) = &self.conn {
            c.throttle(ms);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::*;
    use kafka_protocol::protocol::Encodable;

    const MARK: i32 = 0x1122_3344;

    /// For every served (key, version) whose response the dispatcher
    /// completes: the offset agrees with where the crate writes the field.
    macro_rules! check {
        ($($k:ident => $t:ty),* $(,)?) => {{
            let mut checked = 0;
            let mut keys = Vec::new();
            $(
                let key = ApiKey::$k;
                keys.push(key);
                let range = crate::versions::SUPPORTED
                    .iter()
                    .find(|r| r.key == key)
                    .expect("served");
                for v in range.min.max(key.valid_versions().min)..=range.max {
                    let cv = crate::versions::crate_version(key, v);
                    let mut r = <$t>::default();
                    r.throttle_time_ms = MARK;
                    let framed = |r: &$t| super::super::encode_response(key, v, 1, r).expect("encodes");
                    let with = framed(&r);
                    r.throttle_time_ms = 0;
                    let without = framed(&r);
                    let patched = patch(without.clone(), key, v, MARK);
                    assert_eq!(patched, with, "{key:?} v{v} (crate v{cv})");
                    let _ = r.compute_size(cv);
                    checked += 1;
                }
            )*
            (checked, keys)
        }};
    }

    #[test]
    fn throttle_offsets_agree_with_the_crate() {
        let (n, patched) = check! {
            ListOffsets => ListOffsetsResponse, Metadata => MetadataResponse,
            OffsetCommit => OffsetCommitResponse, OffsetFetch => OffsetFetchResponse,
            FindCoordinator => FindCoordinatorResponse, JoinGroup => JoinGroupResponse,
            Heartbeat => HeartbeatResponse, LeaveGroup => LeaveGroupResponse,
            SyncGroup => SyncGroupResponse, DescribeGroups => DescribeGroupsResponse,
            ListGroups => ListGroupsResponse, CreateTopics => CreateTopicsResponse,
            DeleteTopics => DeleteTopicsResponse, DeleteRecords => DeleteRecordsResponse,
            InitProducerId => InitProducerIdResponse,
            OffsetForLeaderEpoch => OffsetForLeaderEpochResponse,
            AddPartitionsToTxn => AddPartitionsToTxnResponse,
            AddOffsetsToTxn => AddOffsetsToTxnResponse, EndTxn => EndTxnResponse,
            TxnOffsetCommit => TxnOffsetCommitResponse, DescribeAcls => DescribeAclsResponse,
            CreateAcls => CreateAclsResponse, DeleteAcls => DeleteAclsResponse,
            DescribeConfigs => DescribeConfigsResponse, AlterConfigs => AlterConfigsResponse,
            AlterReplicaLogDirs => AlterReplicaLogDirsResponse,
            DescribeLogDirs => DescribeLogDirsResponse,
            CreatePartitions => CreatePartitionsResponse, DeleteGroups => DeleteGroupsResponse,
            ElectLeaders => ElectLeadersResponse,
            IncrementalAlterConfigs => IncrementalAlterConfigsResponse,
            AlterPartitionReassignments => AlterPartitionReassignmentsResponse,
            ListPartitionReassignments => ListPartitionReassignmentsResponse,
            OffsetDelete => OffsetDeleteResponse,
            DescribeClientQuotas => DescribeClientQuotasResponse,
            AlterClientQuotas => AlterClientQuotasResponse,
            DescribeUserScramCredentials => DescribeUserScramCredentialsResponse,
            AlterUserScramCredentials => AlterUserScramCredentialsResponse,
            DescribeCluster => DescribeClusterResponse,
            DescribeProducers => DescribeProducersResponse,
            DescribeTransactions => DescribeTransactionsResponse,
            ListTransactions => ListTransactionsResponse,
            ConsumerGroupHeartbeat => ConsumerGroupHeartbeatResponse,
            ConsumerGroupDescribe => ConsumerGroupDescribeResponse,
            ShareGroupHeartbeat => ShareGroupHeartbeatResponse,
            ShareGroupDescribe => ShareGroupDescribeResponse,
            ShareFetch => ShareFetchResponse,
            ShareAcknowledge => ShareAcknowledgeResponse,
            DescribeShareGroupOffsets => DescribeShareGroupOffsetsResponse,
            AlterShareGroupOffsets => AlterShareGroupOffsetsResponse,
            DeleteShareGroupOffsets => DeleteShareGroupOffsetsResponse,
            ListConfigResources => ListConfigResourcesResponse,
            DescribeTopicPartitions => DescribeTopicPartitionsResponse,
        };
        assert!(n > 100, "{n} versions checked");
        // Every served API not checked above is one the dispatcher does not
        // patch: a newly served API lands in neither until it is listed.
        for r in crate::versions::SUPPORTED {
            if !patched.contains(&r.key) {
                assert_eq!(throttle_offset(r.key, r.max), None, "{:?}", r.key);
            }
        }
    }

    #[tokio::test]
    async fn a_mute_ends_when_its_time_is_up_and_the_longest_wins() {
        let c = ConnThrottle::default();
        assert!(c.muted_until().is_none());
        c.throttle(0);
        assert!(c.muted_until().is_none());
        c.throttle(60_000);
        let long = c.muted_until().expect("muted");
        c.throttle(10);
        assert_eq!(
            c.muted_until(),
            Some(long),
            "a shorter mute does not cut a longer one"
        );
    }

    #[tokio::test]
    async fn timed_counts_the_time_inside_polls() {
        let usage = Arc::new(Usage::default());
        let spin = std::time::Duration::from_millis(5);
        let f = Timed::new(
            async move {
                // A wait (not counted), then work inside a poll (counted).
                tokio::task::yield_now().await;
                let start = Instant::now();
                while start.elapsed() < spin {
                    std::hint::spin_loop();
                }
            },
            usage.clone(),
        );
        f.await;
        let spent = usage.handler_nanos.load(Ordering::Relaxed);
        assert!(spent >= 5_000_000, "{spent} ns");
    }
}
