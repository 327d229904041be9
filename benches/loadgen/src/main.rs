//! es-loadgen: the librdkafka load generator (the `rdkafka` crate) that
//! `benches/run` points at es and at Apache Kafka alike, so that both brokers
//! see the same client, the same settings and the same payload. Every command
//! prints one JSON object on stdout and exits non-zero on a failed run; every
//! loop is bounded by a record count or a deadline.
//!
//! ```text
//! es-loadgen produce --bootstrap B --topic T [--partitions N] (--records N | --duration-s S)
//!            [--record-size 256] [--producers 1] [--rate R] [--linger-ms 5]
//!            [--batch-size 16384] [--acks all] [--max-inflight 5] [--queue-kbytes 4096]
//!            [--idempotence false] [--timeout-s 120] [--ack-log PATH] [--connect-first false]
//! es-loadgen consume --bootstrap B --topic T --partitions N --records N [--timeout-s 120]
//!            [--connect-first false]
//! es-loadgen e2e     --bootstrap B --topic T --rate R --duration-s S [--record-size 256]
//!            [--linger-ms 0]
//! es-loadgen create  --bootstrap B --topic T --partitions N [--replication 1] [--config k=v]...
//! es-loadgen delete  --bootstrap B --topic T
//! ```
//!
//! Every command also takes `--client-config KEY=VALUE` (repeated): a librdkafka
//! setting for every client it makes, set after the generator's own so that it
//! wins; e.g. `security.protocol=SASL_SSL`, `sasl.mechanisms=PLAIN`,
//! `sasl.username=...`, `sasl.password=...`, `ssl.ca.location=ca.pem` for a TLS
//! or SASL listener (benches/tls). librdkafka is built with OpenSSL for it.
//! `produce` and `consume` also take `--connect-first true`: before the clock
//! starts, each partition's leader is asked for its offsets, so that the
//! connection to every leader (its TLS handshake and SASL authentication
//! included) is made outside the timed run; `connect_ms` in the output is how
//! long that took (librdkafka connects to a leader only once it needs it, apart
//! from the bootstrap connection, so without it the first records wait for it).
//!
//! Producer settings mirror the Java producer's defaults (acks=all, linger.ms=5,
//! batch.size=16384, 5 requests in flight per connection, TCP_NODELAY, no
//! compression, no idempotence unless asked). With `--partitions N` records go
//! round-robin in runs of one batch (batch.size / record size records) per
//! partition, the way the Java sticky partitioner fills one batch at a time;
//! producer k starts at partition k so that four producers spread at once.
//! Produce latency is measured from `send()` to the delivery report, in
//! microseconds, as Kafka's ProducerPerformance measures it (in milliseconds).
//! `--rate` paces the sends (records per second over all producers); latency
//! still runs from the actual `send()`, and `behind_ms` reports how far the
//! sender fell behind its schedule (non-zero means the rate was not met).
//! `--ack-log PATH` also writes one line per acknowledged record, `SENT_MS
//! ACKED_MS` in wall-clock milliseconds since the Unix epoch: the fail-over
//! measurement reads from it the first acknowledgement after a kill.

use std::collections::HashMap;
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::{Client, DefaultClientContext};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::{ClientContext, Offset, TopicPartitionList};

/// Latency samples kept per run; beyond it the rest are counted, not kept.
const LATENCY_SAMPLES_MAX: usize = 40_000_000;
/// Percentiles printed for the latency curves (chart x axis).
const CURVE: &[f64] = &[
    0.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99, 100.0,
];

type Res<T> = Result<T, String>;

struct Args {
    cmd: String,
    kv: HashMap<String, Vec<String>>,
}

impl Args {
    fn parse() -> Res<Args> {
        let mut it = std::env::args().skip(1);
        let cmd = it
            .next()
            .ok_or("usage: es-loadgen produce|consume|e2e|create|delete ...")?;
        let mut kv: HashMap<String, Vec<String>> = HashMap::new();
        while let Some(k) = it.next() {
            let key = k
                .strip_prefix("--")
                .ok_or_else(|| format!("expected --option, got {k:?}"))?
                .to_string();
            let v = it.next().ok_or_else(|| format!("--{key} needs a value"))?;
            kv.entry(key).or_default().push(v);
        }
        Ok(Args { cmd, kv })
    }
    fn str(&self, k: &str) -> Res<String> {
        self.opt_str(k).ok_or_else(|| format!("--{k} is required"))
    }
    fn opt_str(&self, k: &str) -> Option<String> {
        self.kv.get(k).and_then(|v| v.last().cloned())
    }
    fn num<T: std::str::FromStr>(&self, k: &str, default: Option<T>) -> Res<T> {
        match self.opt_str(k) {
            Some(s) => s
                .parse()
                .map_err(|_| format!("--{k} {s:?} is not a number")),
            None => default.ok_or_else(|| format!("--{k} is required")),
        }
    }
    fn opt_num<T: std::str::FromStr>(&self, k: &str) -> Res<Option<T>> {
        match self.opt_str(k) {
            Some(s) => s
                .parse()
                .map(Some)
                .map_err(|_| format!("--{k} {s:?} is not a number")),
            None => Ok(None),
        }
    }
    fn all(&self, k: &str) -> Vec<String> {
        self.kv.get(k).cloned().unwrap_or_default()
    }
}

fn main() {
    let r = Args::parse().and_then(|a| match a.cmd.as_str() {
        "produce" => produce(&a),
        "consume" => consume(&a),
        "e2e" => e2e(&a),
        "create" => create(&a),
        "delete" => delete(&a),
        other => Err(format!("unknown command {other:?}")),
    });
    match r {
        Ok(json) => println!("{json}"),
        Err(e) => {
            println!("{{\"ok\":false,\"error\":{}}}", jstr(&e));
            eprintln!("es-loadgen: {e}");
            std::process::exit(1);
        }
    }
}

fn jstr(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// Sorts the samples (microseconds) and renders mean, percentiles and the curve.
fn latency_json(v: &mut [u32]) -> String {
    if v.is_empty() {
        return "null".into();
    }
    v.sort_unstable();
    let pick = |q: f64| -> u32 {
        let i = ((q / 100.0) * v.len() as f64) as usize;
        v[i.min(v.len() - 1)]
    };
    let mean = v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64;
    let curve: Vec<String> = CURVE
        .iter()
        .map(|&q| format!("[{q},{}]", pick(q)))
        .collect();
    format!(
        "{{\"samples\":{},\"mean_us\":{:.1},\"p50_us\":{},\"p90_us\":{},\"p99_us\":{},\"p999_us\":{},\"max_us\":{},\"curve\":[{}]}}",
        v.len(),
        mean,
        pick(50.0),
        pick(90.0),
        pick(99.0),
        pick(99.9),
        v[v.len() - 1],
        curve.join(",")
    )
}

/// The client's queue is full: sleep a little, then take the delivery
/// reports that came meanwhile. Not `poll(1 ms)`: the rdkafka crate turns
/// the rest of a deadline into whole milliseconds, so the last millisecond of
/// every such poll is a busy loop of zero-timeout polls and clock reads. That
/// loop burned most of a core per producer thread while the queue was full,
/// taking the CPU from the broker under test, and more so the slower the
/// broker already was. The queue holds 4 MiB (16,384 records of 256 B), tens of
/// milliseconds of sending: a fifth of a millisecond asleep cannot starve a
/// broker. A zero-timeout poll serves one event (one batch's delivery
/// reports), so it repeats while the client's count of unfinished messages
/// still drops.
fn wait_for_room<C: ProducerContext>(p: &BaseProducer<C>) {
    thread::sleep(Duration::from_micros(200));
    loop {
        let before = p.in_flight_count();
        p.poll(Duration::ZERO);
        if p.in_flight_count() >= before {
            break;
        }
    }
}

/// Runs a future to completion on this thread (the admin client's futures are
/// plain channels completed by librdkafka's own thread).
fn block_on<F: Future>(f: F) -> F::Output {
    struct Unpark(thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        thread::park_timeout(Duration::from_millis(50));
    }
}

/// Applies `--client-config KEY=VALUE` (repeated) to a client's configuration,
/// over what the generator set itself.
fn client_config(a: &Args, c: &mut ClientConfig) -> Res<()> {
    for kv in a.all("client-config") {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| format!("--client-config {kv:?} is not key=value"))?;
        c.set(k, v);
    }
    Ok(())
}

/// `--connect-first true`: ListOffsets to the leader of each of the first
/// `partitions` partitions, so that the client is connected (and
/// authenticated) to every leader before the clock starts. Returns the
/// milliseconds it took, None without the option.
fn connect_first<C: ClientContext>(
    a: &Args,
    client: &Client<C>,
    topic: &str,
    partitions: i32,
) -> Res<Option<f64>> {
    if a.opt_str("connect-first").as_deref() != Some("true") {
        return Ok(None);
    }
    let t = Instant::now();
    for p in 0..partitions {
        client
            .fetch_watermarks(topic, p, Duration::from_secs(30))
            .map_err(|e| format!("connect first (offsets of {topic}/{p}): {e}"))?;
    }
    Ok(Some(t.elapsed().as_secs_f64() * 1e3))
}

fn fmt_ms(ms: Option<f64>) -> String {
    ms.map_or_else(|| "null".into(), |x| format!("{x:.2}"))
}

fn admin(a: &Args) -> Res<AdminClient<DefaultClientContext>> {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", a.str("bootstrap")?);
    client_config(a, &mut c)?;
    c.create().map_err(|e| format!("admin client: {e}"))
}

fn create(a: &Args) -> Res<String> {
    let topic = a.str("topic")?;
    let partitions: i32 = a.num("partitions", None)?;
    let configs: Vec<(String, String)> = a
        .all("config")
        .iter()
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) => Ok((k.to_string(), v.to_string())),
            None => Err(format!("--config {kv:?} is not key=value")),
        })
        .collect::<Res<_>>()?;
    let replicas: i32 = a.num("replication", Some(1))?;
    let mut t = NewTopic::new(&topic, partitions, TopicReplication::Fixed(replicas));
    for (k, v) in &configs {
        t = t.set(k, v);
    }
    let ad = admin(a)?;
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let r = block_on(ad.create_topics([&t], &opts)).map_err(|e| format!("create: {e}"))?;
    for x in r {
        if let Err((name, code)) = x {
            if code != RDKafkaErrorCode::TopicAlreadyExists {
                return Err(format!("create {name}: {code:?}"));
            }
        }
    }
    Ok(format!("{{\"ok\":true,\"topic\":{}}}", jstr(&topic)))
}

fn delete(a: &Args) -> Res<String> {
    let topic = a.str("topic")?;
    let ad = admin(a)?;
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let r =
        block_on(ad.delete_topics(&[topic.as_str()], &opts)).map_err(|e| format!("delete: {e}"))?;
    for x in r {
        if let Err((name, code)) = x {
            if code != RDKafkaErrorCode::UnknownTopicOrPartition {
                return Err(format!("delete {name}: {code:?}"));
            }
        }
    }
    Ok(format!("{{\"ok\":true,\"topic\":{}}}", jstr(&topic)))
}

struct Shared {
    t0: Instant,
    ok: AtomicU64,
    failed: AtomicU64,
    first_error: Mutex<Option<String>>,
    /// (sent, acknowledged) in nanoseconds since `t0`, kept with `--ack-log`.
    acks: Option<Mutex<Vec<(u64, u64)>>>,
}

struct Ctx {
    shared: Arc<Shared>,
    lat_us: Mutex<Vec<u32>>,
}

impl ClientContext for Ctx {}

impl ProducerContext for Ctx {
    type DeliveryOpaque = usize;
    fn delivery(&self, r: &DeliveryResult<'_>, sent_ns: usize) {
        let s = &self.shared;
        match r {
            Ok(_) => {
                s.ok.fetch_add(1, Ordering::Relaxed);
                let now = s.t0.elapsed().as_nanos() as u64;
                if let Some(Ok(mut acks)) = s.acks.as_ref().map(|a| a.lock()) {
                    if acks.len() < LATENCY_SAMPLES_MAX {
                        acks.push((sent_ns as u64, now));
                    }
                }
                let us = (now.saturating_sub(sent_ns as u64) / 1000).min(u32::MAX as u64) as u32;
                if let Ok(mut v) = self.lat_us.lock() {
                    if v.len() < LATENCY_SAMPLES_MAX {
                        v.push(us);
                    }
                }
            }
            Err((e, _)) => {
                s.failed.fetch_add(1, Ordering::Relaxed);
                if let Ok(mut f) = s.first_error.lock() {
                    if f.is_none() {
                        *f = Some(e.to_string());
                    }
                }
            }
        }
    }
}

fn producer_config(a: &Args, linger_default: u64) -> Res<ClientConfig> {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", a.str("bootstrap")?)
        .set("acks", a.opt_str("acks").unwrap_or_else(|| "all".into()))
        .set(
            "linger.ms",
            a.num::<u64>("linger-ms", Some(linger_default))?.to_string(),
        )
        .set(
            "batch.size",
            a.num::<u64>("batch-size", Some(16384))?.to_string(),
        )
        .set(
            "max.in.flight.requests.per.connection",
            a.num::<u64>("max-inflight", Some(5))?.to_string(),
        )
        .set(
            "enable.idempotence",
            a.opt_str("idempotence").unwrap_or_else(|| "false".into()),
        )
        .set("compression.type", "none")
        // The client-side queue is capped (4 MiB a producer by default, far
        // more than 5 requests in flight to 8 partitions need) so that a slow
        // target cannot pile up a backlog whose drain outlasts the run.
        .set(
            "queue.buffering.max.kbytes",
            a.num::<u64>("queue-kbytes", Some(4096))?.to_string(),
        )
        .set("socket.nagle.disable", "true")
        .set("message.timeout.ms", "120000");
    client_config(a, &mut c)?;
    Ok(c)
}

struct ProduceOut {
    sent: u64,
    send_secs: f64,
    lat: Vec<u32>,
    behind_ms: f64,
}

fn produce(a: &Args) -> Res<String> {
    let topic = a.str("topic")?;
    let size: usize = a.num("record-size", Some(256))?;
    let producers: u64 = a.num("producers", Some(1))?;
    let records: Option<u64> = a.opt_num("records")?;
    let duration_s: Option<f64> = a.opt_num("duration-s")?;
    let rate: f64 = a.num("rate", Some(0.0))?;
    let partitions: Option<u64> = a.opt_num("partitions")?;
    let batch: u64 = a.num("batch-size", Some(16384))?;
    let timeout = Duration::from_secs_f64(a.num("timeout-s", Some(120.0))?);
    if records.is_none() && duration_s.is_none() {
        return Err("give --records or --duration-s".into());
    }
    if producers == 0 || size == 0 {
        return Err("--producers and --record-size must be positive".into());
    }
    let ack_log = a.opt_str("ack-log");
    let cfg = producer_config(a, 5)?;
    let t0_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|e| format!("clock: {e}"))?;
    let shared = Arc::new(Shared {
        t0: Instant::now(),
        ok: AtomicU64::new(0),
        failed: AtomicU64::new(0),
        first_error: Mutex::new(None),
        acks: ack_log.as_ref().map(|_| Mutex::new(Vec::new())),
    });
    let chunk = (batch / size as u64).max(1);
    // Connect every producer before the clock starts.
    let mut made = Vec::new();
    let mut connect_ms: Option<f64> = None;
    for _ in 0..producers {
        let p: BaseProducer<Ctx> = cfg
            .create_with_context(Ctx {
                shared: shared.clone(),
                lat_us: Mutex::new(Vec::new()),
            })
            .map_err(|e| format!("producer: {e}"))?;
        let md = p
            .client()
            .fetch_metadata(Some(&topic), Duration::from_secs(30))
            .map_err(|e| format!("metadata: {e}"))?;
        let used = match partitions {
            Some(n) => n as i32,
            None => md
                .topics()
                .first()
                .map_or(1, |t| t.partitions().len() as i32),
        };
        if let Some(ms) = connect_first(a, p.client(), &topic, used)? {
            connect_ms = Some(connect_ms.unwrap_or(0.0).max(ms));
        }
        made.push(p);
    }
    let start = Instant::now();
    let deadline = duration_s.map(|d| start + Duration::from_secs_f64(d));
    let hard_deadline = start + timeout;
    let mut handles = Vec::new();
    for (k, p) in made.into_iter().enumerate() {
        let k = k as u64;
        let topic = topic.clone();
        let shared = shared.clone();
        let n = records.map(|r| r / producers + u64::from(k < r % producers));
        let per_rate = rate / producers as f64;
        handles.push(thread::spawn(move || -> Res<ProduceOut> {
            let payload = vec![b'x'; size];
            let mut i = 0u64;
            let mut behind = Duration::ZERO;
            loop {
                if n.is_some_and(|n| i >= n) {
                    break;
                }
                if i.is_multiple_of(64) {
                    let now = Instant::now();
                    if deadline.is_some_and(|d| now >= d) || now >= hard_deadline {
                        break;
                    }
                }
                if per_rate > 0.0 {
                    let due = start + Duration::from_secs_f64(i as f64 / per_rate);
                    let now = Instant::now();
                    if due > now {
                        p.poll(Duration::ZERO);
                        let wait = due - now;
                        if wait > Duration::from_micros(50) {
                            thread::sleep(wait.min(Duration::from_millis(1)));
                        }
                        continue;
                    }
                    behind = behind.max(now - due);
                }
                let sent_ns = shared.t0.elapsed().as_nanos() as usize;
                let mut rec = BaseRecord::<(), [u8], usize>::with_opaque_to(&topic, sent_ns)
                    .payload(&payload[..]);
                if let Some(parts) = partitions {
                    rec = rec.partition(((i / chunk + k) % parts) as i32);
                }
                match p.send(rec) {
                    Ok(()) => {
                        i += 1;
                        if i.is_multiple_of(256) {
                            p.poll(Duration::ZERO);
                        }
                    }
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                        wait_for_room(&p);
                    }
                    Err((e, _)) => return Err(format!("send: {e}")),
                }
            }
            let send_secs = start.elapsed().as_secs_f64();
            let left = hard_deadline.saturating_duration_since(Instant::now());
            p.flush(left.max(Duration::from_secs(1)))
                .map_err(|e| format!("flush: {e}"))?;
            let lat = std::mem::take(&mut *p.context().lat_us.lock().map_err(|_| "poisoned")?);
            Ok(ProduceOut {
                sent: i,
                send_secs,
                lat,
                behind_ms: behind.as_secs_f64() * 1e3,
            })
        }));
    }
    let mut lat = Vec::new();
    let mut sent = 0;
    let mut behind_ms: f64 = 0.0;
    let mut send_secs: f64 = 0.0;
    for h in handles {
        let o = h.join().map_err(|_| "producer thread panicked")??;
        sent += o.sent;
        lat.extend_from_slice(&o.lat);
        behind_ms = behind_ms.max(o.behind_ms);
        send_secs = send_secs.max(o.send_secs);
    }
    let secs = start.elapsed().as_secs_f64();
    let ok = shared.ok.load(Ordering::Relaxed);
    let failed = shared.failed.load(Ordering::Relaxed);
    if failed > 0 || ok < sent {
        let first = shared.first_error.lock().ok().and_then(|f| f.clone());
        return Err(format!(
            "{failed} of {sent} records failed, {ok} acknowledged (first error: {first:?})"
        ));
    }
    if let (Some(path), Some(acks)) = (&ack_log, &shared.acks) {
        write_ack_log(path, t0_unix, &acks.lock().map_err(|_| "poisoned")?)?;
    }
    let bytes = ok * size as u64;
    Ok(format!(
        "{{\"ok\":true,\"records\":{ok},\"bytes\":{bytes},\"secs\":{secs:.4},\"records_per_s\":{:.1},\"mb_per_s\":{:.2},\"offered_rate\":{rate},\"send_rate\":{:.1},\"behind_ms\":{behind_ms:.2},\"connect_ms\":{},\"latency\":{}}}",
        ok as f64 / secs,
        bytes as f64 / secs / 1e6,
        sent as f64 / send_secs.max(1e-9),
        fmt_ms(connect_ms),
        latency_json(&mut lat)
    ))
}

/// Writes `SENT_MS ACKED_MS` per acknowledged record, wall clock (ms since
/// the Unix epoch), from nanoseconds since the run's `t0` taken at `t0_unix`.
fn write_ack_log(path: &str, t0_unix: Duration, acks: &[(u64, u64)]) -> Res<()> {
    use std::fmt::Write as _;
    let base = t0_unix.as_secs_f64() * 1e3;
    let mut out = String::with_capacity(acks.len() * 32);
    for &(sent, acked) in acks {
        let _ = writeln!(
            out,
            "{:.3} {:.3}",
            base + sent as f64 / 1e6,
            base + acked as f64 / 1e6
        );
    }
    std::fs::write(path, out).map_err(|e| format!("{path}: {e}"))
}

fn consumer(a: &Args, extra: &[(&str, &str)]) -> Res<BaseConsumer> {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", a.str("bootstrap")?)
        // librdkafka wants a group id even for assign(); nothing is committed.
        .set("group.id", format!("es-loadgen-{}", std::process::id()))
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "false")
        .set("socket.nagle.disable", "true");
    for (k, v) in extra {
        c.set(*k, *v);
    }
    client_config(a, &mut c)?;
    c.create().map_err(|e| format!("consumer: {e}"))
}

fn consume(a: &Args) -> Res<String> {
    let topic = a.str("topic")?;
    let partitions: i32 = a.num("partitions", None)?;
    let want: u64 = a.num("records", None)?;
    let timeout = Duration::from_secs_f64(a.num("timeout-s", Some(120.0))?);
    // librdkafka postpones a partition's next fetch by fetch.queue.backoff.ms
    // (default 1000) whenever its local queue holds queued.min.messages: a
    // catch-up of 2,000,000 records then spent about a second of its 2.2 s
    // idle, against either broker (1.2 s with 10 ms). The consume case
    // measures the broker, so the pause is 10 ms (--client-config overrides).
    let c = consumer(a, &[("fetch.queue.backoff.ms", "10")])?;
    c.fetch_metadata(Some(&topic), Duration::from_secs(30))
        .map_err(|e| format!("metadata: {e}"))?;
    let connect_ms = connect_first(a, c.client(), &topic, partitions)?;
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(&topic, p, Offset::Beginning)
            .map_err(|e| format!("assign: {e}"))?;
    }
    let start = Instant::now();
    c.assign(&tpl).map_err(|e| format!("assign: {e}"))?;
    let (mut n, mut bytes) = (0u64, 0u64);
    while n < want {
        if start.elapsed() > timeout {
            return Err(format!("timed out after {n} of {want} records"));
        }
        match c.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                n += 1;
                bytes += m.payload_len() as u64;
            }
            Some(Err(e)) => return Err(format!("consume: {e}")),
            None => {}
        }
    }
    let secs = start.elapsed().as_secs_f64();
    Ok(format!(
        "{{\"ok\":true,\"records\":{n},\"bytes\":{bytes},\"secs\":{secs:.4},\"records_per_s\":{:.1},\"mb_per_s\":{:.2},\"connect_ms\":{}}}",
        n as f64 / secs,
        bytes as f64 / secs / 1e6,
        fmt_ms(connect_ms)
    ))
}

/// End-to-end latency: one producer sends at a fixed rate, each payload carrying
/// its send time; one consumer in the same process (same clock) reads the
/// partition from its end and records receive time minus send time.
fn e2e(a: &Args) -> Res<String> {
    let topic = a.str("topic")?;
    let size: usize = a.num::<usize>("record-size", Some(256))?.max(8);
    let rate: f64 = a.num("rate", None)?;
    let dur = Duration::from_secs_f64(a.num("duration-s", None)?);
    if rate <= 0.0 {
        return Err("--rate must be positive".into());
    }
    let t0 = Instant::now();
    let c = consumer(a, &[])?;
    let (_, high) = c
        .fetch_watermarks(&topic, 0, Duration::from_secs(30))
        .map_err(|e| format!("watermarks: {e}"))?;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(&topic, 0, Offset::Offset(high))
        .map_err(|e| format!("assign: {e}"))?;
    c.assign(&tpl).map_err(|e| format!("assign: {e}"))?;
    // Let the consumer reach the partition and park its first fetch.
    let settle = Instant::now();
    while settle.elapsed() < Duration::from_millis(500) {
        if let Some(Err(e)) = c.poll(Duration::from_millis(50)) {
            return Err(format!("consume: {e}"));
        }
    }
    let cfg = producer_config(a, 0)?;
    let shared = Arc::new(Shared {
        t0,
        ok: AtomicU64::new(0),
        failed: AtomicU64::new(0),
        first_error: Mutex::new(None),
        acks: None,
    });
    let p: BaseProducer<Ctx> = cfg
        .create_with_context(Ctx {
            shared: shared.clone(),
            lat_us: Mutex::new(Vec::new()),
        })
        .map_err(|e| format!("producer: {e}"))?;
    p.client()
        .fetch_metadata(Some(&topic), Duration::from_secs(30))
        .map_err(|e| format!("metadata: {e}"))?;
    let tp = topic.clone();
    let sender = thread::spawn(move || -> Res<u64> {
        let start = Instant::now();
        let mut payload = vec![b'x'; size];
        let mut i = 0u64;
        while start.elapsed() < dur {
            let due = start + Duration::from_secs_f64(i as f64 / rate);
            let now = Instant::now();
            if due > now {
                p.poll(Duration::ZERO);
                thread::sleep((due - now).min(Duration::from_millis(1)));
                continue;
            }
            let ns = t0.elapsed().as_nanos() as u64;
            payload[..8].copy_from_slice(&ns.to_be_bytes());
            let rec = BaseRecord::<(), [u8], usize>::with_opaque_to(&tp, ns as usize)
                .payload(&payload[..])
                .partition(0);
            match p.send(rec) {
                Ok(()) => {
                    i += 1;
                    p.poll(Duration::ZERO);
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                    wait_for_room(&p);
                }
                Err((e, _)) => return Err(format!("send: {e}")),
            }
        }
        p.flush(Duration::from_secs(30))
            .map_err(|e| format!("flush: {e}"))?;
        Ok(i)
    });
    // Receive while the sender runs, then up to 10 s more for the stragglers.
    let recv = |lat: &mut Vec<u32>| -> Res<()> {
        match c.poll(Duration::from_millis(20)) {
            Some(Ok(m)) => {
                let now = t0.elapsed().as_nanos() as u64;
                if let Some(b) = m.payload().and_then(|b| b.get(..8)) {
                    let mut a8 = [0u8; 8];
                    a8.copy_from_slice(b);
                    let us = now.saturating_sub(u64::from_be_bytes(a8)) / 1000;
                    lat.push(us.min(u32::MAX as u64) as u32);
                }
                Ok(())
            }
            Some(Err(e)) => Err(format!("consume: {e}")),
            None => Ok(()),
        }
    };
    let mut lat: Vec<u32> = Vec::new();
    // The sender stops by itself after `dur` plus at most 30 s of flush.
    while !sender.is_finished() {
        recv(&mut lat)?;
    }
    let n = sender.join().map_err(|_| "sender panicked")??;
    let tail_deadline = Instant::now() + Duration::from_secs(10);
    while (lat.len() as u64) < n && Instant::now() < tail_deadline {
        recv(&mut lat)?;
    }
    let got = lat.len() as u64;
    if got < n {
        return Err(format!("received {got} of {n} records"));
    }
    Ok(format!(
        "{{\"ok\":true,\"records\":{n},\"offered_rate\":{rate},\"latency\":{}}}",
        latency_json(&mut lat)
    ))
}
