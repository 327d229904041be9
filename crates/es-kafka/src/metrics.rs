//! What the Kafka layer counts for the broker's `/metrics`
//! (docs/metrics.md): requests per API and version, where each request's
//! time went (queue, handle, wait, send), traffic in and out per partition,
//! produce batch sizes, connections, authentication failures, ISR changes.
//!
//! Counters are prometheus-client atomics bumped where the work happens;
//! one set per process ([`kafka_metrics`]), registered by the broker's
//! admin listener ([`register`]). Traffic per partition lives on the
//! partition's slot ([`Traffic`]) and is read at scrape time, so a deleted
//! partition takes its series with it. What the broker already knows (log
//! sizes, group lag, Raft state) is not counted here: the admin listener's
//! collector reads it at scrape time.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::task::{Context, Poll};
use std::time::Instant;

use kafka_protocol::messages::ApiKey;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};

/// Bytes and records appended by Produce and returned to consumers by
/// Fetch, for one partition (Kafka's BrokerTopicMetrics, summed per topic
/// at scrape time).
#[derive(Debug, Default)]
pub struct Traffic {
    pub bytes_in: AtomicU64,
    pub records_in: AtomicU64,
    pub bytes_out: AtomicU64,
    pub records_out: AtomicU64,
    /// Produce requests for this partition refused with an error.
    pub produce_rejected: AtomicU64,
}

impl Traffic {
    pub fn appended(&self, bytes: u64, records: u64) {
        self.bytes_in.fetch_add(bytes, Ordering::Relaxed);
        self.records_in.fetch_add(records, Ordering::Relaxed);
    }

    pub fn fetched(&self, bytes: u64, records: u64) {
        self.bytes_out.fetch_add(bytes, Ordering::Relaxed);
        self.records_out.fetch_add(records, Ordering::Relaxed);
    }

    pub fn rejected(&self) {
        self.produce_rejected.fetch_add(1, Ordering::Relaxed);
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ApiLabel {
    pub api: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ApiVersionLabel {
    pub api: &'static str,
    pub version: i16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ListenerLabel {
    pub listener: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RejectedLabel {
    pub listener: String,
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ExpiredLabel {
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AuthLabel {
    pub listener: String,
    pub mechanism: String,
}

fn duration_histogram() -> Histogram {
    Histogram::new(es_storage::metrics::duration_buckets())
}

/// The Kafka layer's counters (see the module comment).
#[derive(Debug)]
pub struct KafkaMetrics {
    pub requests: Family<ApiVersionLabel, Counter>,
    pub request_queue: Family<ApiLabel, Histogram>,
    pub request_handle: Family<ApiLabel, Histogram>,
    pub request_wait: Family<ApiLabel, Histogram>,
    pub request_send: Family<ApiLabel, Histogram>,
    pub request_duration: Family<ApiLabel, Histogram>,
    pub produce_batch_bytes: Histogram,
    pub connections: Family<ListenerLabel, Gauge>,
    pub connections_accepted: Family<ListenerLabel, Counter>,
    pub connections_rejected: Family<RejectedLabel, Counter>,
    /// Bytes of `queued.max.request.bytes` free now (-1: no bound).
    pub request_memory_available: Gauge,
    /// Connections closed by es for `connections.max.idle.ms` or
    /// `request.read.timeout.ms`.
    pub connections_expired: Family<ExpiredLabel, Counter>,
    pub authentication_failures: Family<AuthLabel, Counter>,
    pub isr_shrinks: Counter,
    pub isr_expands: Counter,
    /// Followers behind their leader's high watermark (reassignment copies,
    /// replicas back after an outage), and by how many offsets in all.
    pub replica_catch_up_partitions: Gauge,
    pub replica_catch_up_lag: Gauge,
    /// Passes of the retention and compaction cleaners (es-broker's
    /// background tasks) and the bytes they freed.
    pub retention_runs: Counter,
    pub retention_freed_bytes: Counter,
    pub compaction_runs: Counter,
    pub compaction_freed_bytes: Counter,
    /// Every request counted in `requests`, whatever its labels (the
    /// console's request rate).
    pub requests_all: AtomicU64,
    /// Every open connection, whatever its listener.
    pub connections_all: std::sync::atomic::AtomicI64,
}

impl KafkaMetrics {
    /// Client connections open now.
    pub fn connections_open(&self) -> i64 {
        self.connections_all.load(Ordering::Relaxed)
    }
}

static METRICS: LazyLock<KafkaMetrics> = LazyLock::new(|| KafkaMetrics {
    requests: Family::default(),
    request_queue: Family::new_with_constructor(duration_histogram),
    request_handle: Family::new_with_constructor(duration_histogram),
    request_wait: Family::new_with_constructor(duration_histogram),
    request_send: Family::new_with_constructor(duration_histogram),
    request_duration: Family::new_with_constructor(duration_histogram),
    produce_batch_bytes: Histogram::new(exponential_buckets(64.0, 4.0, 10)),
    connections: Family::default(),
    connections_accepted: Family::default(),
    connections_rejected: Family::default(),
    request_memory_available: Gauge::default(),
    connections_expired: Family::default(),
    authentication_failures: Family::default(),
    isr_shrinks: Counter::default(),
    isr_expands: Counter::default(),
    replica_catch_up_partitions: Gauge::default(),
    replica_catch_up_lag: Gauge::default(),
    retention_runs: Counter::default(),
    retention_freed_bytes: Counter::default(),
    compaction_runs: Counter::default(),
    compaction_freed_bytes: Counter::default(),
    requests_all: AtomicU64::new(0),
    connections_all: std::sync::atomic::AtomicI64::new(0),
});

/// This process's Kafka-layer counters.
pub fn kafka_metrics() -> &'static KafkaMetrics {
    &METRICS
}

/// Registers the Kafka-layer counters with `registry` under their
/// docs/metrics.md names.
pub fn register(registry: &mut Registry) {
    let m = kafka_metrics();
    registry.register(
        "es_requests",
        "requests received, per API and version",
        m.requests.clone(),
    );
    let phases: [(&str, &str, &Family<ApiLabel, Histogram>); 5] = [
        (
            "es_request_queue",
            "from a request's whole frame read to its handler starting",
            &m.request_queue,
        ),
        (
            "es_request_handle",
            "time a request's handler ran (the CPU time of its polls)",
            &m.request_handle,
        ),
        (
            "es_request_wait",
            "time a request's handler waited: a produce's fsync and replication, a fetch's long poll, the connection's order",
            &m.request_wait,
        ),
        (
            "es_request_send",
            "from a request's response being ready to its bytes written to the socket",
            &m.request_send,
        ),
        (
            "es_request_duration",
            "from a request's whole frame read to its response written",
            &m.request_duration,
        ),
    ];
    for (name, help, family) in phases {
        registry.register_with_unit(name, help, Unit::Seconds, family.clone());
    }
    registry.register_with_unit(
        "es_produce_batch",
        "bytes of each record batch a Produce appended",
        Unit::Bytes,
        m.produce_batch_bytes.clone(),
    );
    registry.register(
        "es_connections",
        "client connections open, per listener",
        m.connections.clone(),
    );
    registry.register(
        "es_connections_accepted",
        "client connections accepted, per listener",
        m.connections_accepted.clone(),
    );
    registry.register(
        "es_connections_rejected",
        "client connections refused, per listener and reason (max_connections, max_connections_per_ip, tls_handshake, principal_mapping)",
        m.connections_rejected.clone(),
    );
    registry.register(
        "es_request_memory_available_bytes",
        "bytes of queued.max.request.bytes not held by requests read and not yet answered (-1: no bound)",
        m.request_memory_available.clone(),
    );
    registry.register(
        "es_connections_expired",
        "connections es closed, per reason (idle: connections.max.idle.ms; request_read: request.read.timeout.ms)",
        m.connections_expired.clone(),
    );
    registry.register(
        "es_authentication_failures",
        "failed SASL authentications, per listener and mechanism",
        m.authentication_failures.clone(),
    );
    registry.register(
        "es_isr_shrinks",
        "replicas removed from a partition's in-sync replicas",
        m.isr_shrinks.clone(),
    );
    for (name, help, c) in [
        (
            "es_retention_runs",
            "retention passes over every partition",
            &m.retention_runs,
        ),
        (
            "es_retention_freed_bytes",
            "bytes of segments retention deleted",
            &m.retention_freed_bytes,
        ),
        (
            "es_compaction_runs",
            "compaction passes over every partition",
            &m.compaction_runs,
        ),
        (
            "es_compaction_freed_bytes",
            "bytes compaction freed (log sizes before minus after)",
            &m.compaction_freed_bytes,
        ),
    ] {
        registry.register(name, help, c.clone());
    }
    registry.register(
        "es_replica_catch_up_partitions",
        "partitions this broker follows and is behind the leader's high watermark on (a reassignment's copy, a replica back after an outage)",
        m.replica_catch_up_partitions.clone(),
    );
    registry.register(
        "es_replica_catch_up_lag_records",
        "offsets those partitions are behind, summed",
        m.replica_catch_up_lag.clone(),
    );
    registry.register(
        "es_isr_expands",
        "replicas added back to a partition's in-sync replicas",
        m.isr_expands.clone(),
    );
}

/// Kafka's name of an API key (`Produce`, `Fetch`, ...), `EsApiKeys`,
/// `EsMirror` and `EsShareAdmin` for es's own APIs, `Unknown` otherwise.
pub fn api_name(key: i16) -> &'static str {
    static NAMES: LazyLock<Vec<(i16, &'static str)>> = LazyLock::new(|| {
        ApiKey::iter()
            .map(|k| {
                let name: &'static str = Box::leak(format!("{k:?}").into_boxed_str());
                (k as i16, name)
            })
            .collect()
    });
    // es's own admin APIs (handlers::api_keys, handlers::mirror_admin),
    // by number: this module depends on no other of the crate.
    match key {
        32_000 => return "EsApiKeys",
        32_001 => return "EsMirror",
        32_002 => return "EsShareState",
        32_003 => return "EsShareAdmin",
        _ => {}
    }
    NAMES
        .iter()
        .find(|(k, _)| *k == key)
        .map_or("Unknown", |(_, n)| n)
}

/// Where one request's time went, filled in as it goes: by the handler's
/// task ([`Timed`]) and by the connection's writer ([`RequestTiming::sent`]).
#[derive(Debug)]
pub struct RequestTiming {
    api: &'static str,
    received: Instant,
    /// Nanoseconds after `received`: the handler's first poll, and its end.
    started_nanos: AtomicU64,
    done_nanos: AtomicU64,
    /// Nanoseconds spent inside the handler's polls.
    handle_nanos: AtomicU64,
}

impl RequestTiming {
    /// A request of API `key`, version `version`, whose frame has just been
    /// read: counted now.
    pub fn received(key: i16, version: i16) -> Arc<RequestTiming> {
        let api = api_name(key);
        let m = kafka_metrics();
        m.requests_all.fetch_add(1, Ordering::Relaxed);
        m.requests
            .get_or_create(&ApiVersionLabel { api, version })
            .inc();
        Arc::new(RequestTiming {
            api,
            received: Instant::now(),
            started_nanos: AtomicU64::new(u64::MAX),
            done_nanos: AtomicU64::new(0),
            handle_nanos: AtomicU64::new(0),
        })
    }

    fn since_received(&self) -> u64 {
        u64::try_from(self.received.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// The response has been written (`written` true) or dropped: records
    /// the request's phases.
    pub fn sent(&self) {
        let total = self.since_received();
        let started = self.started_nanos.load(Ordering::Relaxed).min(total);
        let done = self
            .done_nanos
            .load(Ordering::Relaxed)
            .clamp(started, total);
        let handle = self.handle_nanos.load(Ordering::Relaxed);
        let wait = (done - started).saturating_sub(handle);
        let secs = |n: u64| n as f64 / 1e9;
        let m = kafka_metrics();
        let label = ApiLabel { api: self.api };
        m.request_queue.get_or_create(&label).observe(secs(started));
        m.request_handle.get_or_create(&label).observe(secs(handle));
        m.request_wait.get_or_create(&label).observe(secs(wait));
        m.request_send
            .get_or_create(&label)
            .observe(secs(total - done));
        m.request_duration
            .get_or_create(&label)
            .observe(secs(total));
    }
}

/// A request handler's future, timed into its [`RequestTiming`]: when it
/// first runs, the time inside its polls, when it ends.
pub struct Timed<F> {
    f: Pin<Box<F>>,
    timing: Arc<RequestTiming>,
}

impl<F: Future> Timed<F> {
    pub fn new(f: F, timing: Arc<RequestTiming>) -> Self {
        Timed {
            f: Box::pin(f),
            timing,
        }
    }
}

impl<F: Future> Future for Timed<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let t = &self.timing;
        let start = t.since_received();
        let _ =
            t.started_nanos
                .compare_exchange(u64::MAX, start, Ordering::Relaxed, Ordering::Relaxed);
        let r = self.f.as_mut().poll(cx);
        let end = self.timing.since_received();
        let t = &self.timing;
        t.handle_nanos
            .fetch_add(end.saturating_sub(start), Ordering::Relaxed);
        if r.is_ready() {
            t.done_nanos.store(end, Ordering::Relaxed);
        }
        r
    }
}
