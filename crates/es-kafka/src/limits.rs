//! Limits on what clients may hold of a broker: connections (all together and
//! per address), how long a connection may stay idle, how long a request may
//! take to arrive, and the bytes of requests read but not yet answered. The
//! settings keep Kafka's names and defaults (docs/reliability.md lists each
//! with its unit); they are parsed once at start, and the counts that enforce
//! them live here too.
//!
//! A connection over a limit is accepted and closed at once, so its client
//! sees the refusal immediately instead of waiting in the kernel's backlog
//! until its connect times out.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::DynamicBrokerConfigs;

/// Kafka's `connections.max.idle.ms` default (10 minutes).
pub const CONNECTIONS_MAX_IDLE_MS_DEFAULT: i64 = 600_000;
/// es's `request.read.timeout.ms` default (30 s, a client's own default
/// `request.timeout.ms`): a request must arrive whole within it of its first
/// byte. Kafka has no such bound; without one a client sending a byte a
/// second is never idle and holds its connection for ever.
pub const REQUEST_READ_TIMEOUT_MS_DEFAULT: u64 = 30_000;
/// es's `queued.max.request.bytes` default (256 MiB). Kafka's is -1 (no
/// bound); es bounds the memory of requests read and not yet answered, all
/// connections together, by default.
pub const QUEUED_MAX_REQUEST_BYTES_DEFAULT: i64 = 256 * 1024 * 1024;
/// What DescribeConfigs shows for a connection count that is not capped
/// (Kafka's default, `Int.MaxValue`).
pub const UNCAPPED: usize = i32::MAX as usize;

/// The setting names this module reads, all broker-wide.
pub const NAMES: &[&str] = &[
    "max.connections",
    "max.connections.per.ip",
    "max.connections.per.ip.overrides",
    "connections.max.idle.ms",
    "request.read.timeout.ms",
    "queued.max.request.bytes",
    "log.open.files.max",
];

/// The connection and request limits of a broker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// `max.connections`: connections served at once, all listeners
    /// together (the inter-broker listener's may exceed it, as in Kafka).
    pub max_connections: usize,
    /// `max.connections.per.ip`.
    pub max_connections_per_ip: usize,
    /// `max.connections.per.ip.overrides`: `host:count,...`, host names
    /// resolved at start.
    pub per_ip_overrides: HashMap<IpAddr, usize>,
    /// The overrides as given, for DescribeConfigs.
    pub per_ip_overrides_text: String,
    /// `connections.max.idle.ms`; `None` (a negative value): never.
    pub max_idle: Option<Duration>,
    /// `request.read.timeout.ms`.
    pub request_read_timeout: Duration,
    /// `queued.max.request.bytes`; `None` (-1 or 0): no bound.
    pub queued_max_request_bytes: Option<usize>,
    /// es's `log.open.files.max`: descriptors the partition logs keep open
    /// at once (es-storage's `CachingFs`); `None`: from the open-file limit
    /// ([`open_files_budget`]).
    pub log_open_files_max: Option<usize>,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_connections: UNCAPPED,
            max_connections_per_ip: UNCAPPED,
            per_ip_overrides: HashMap::new(),
            per_ip_overrides_text: String::new(),
            max_idle: Some(Duration::from_millis(
                CONNECTIONS_MAX_IDLE_MS_DEFAULT as u64,
            )),
            request_read_timeout: Duration::from_millis(REQUEST_READ_TIMEOUT_MS_DEFAULT),
            queued_max_request_bytes: Some(QUEUED_MAX_REQUEST_BYTES_DEFAULT as usize),
            log_open_files_max: None,
        }
    }
}

fn parse_num<T: std::str::FromStr>(name: &str, v: &str) -> Result<T, String> {
    v.trim()
        .parse()
        .map_err(|_| format!("{name}={v:?}: not a valid number"))
}

/// A count setting: Kafka's range, 0 to `Int.MaxValue`.
fn parse_count(name: &str, v: &str) -> Result<usize, String> {
    let n: i64 = parse_num(name, v)?;
    if !(0..=i64::from(i32::MAX)).contains(&n) {
        return Err(format!("{name}={v:?}: must be between 0 and {}", i32::MAX));
    }
    Ok(n as usize)
}

/// Kafka's `max.connections.per.ip.overrides`: `host:count` pairs separated
/// by commas; a host is an IP address or a name resolved now.
fn parse_overrides(v: &str) -> Result<HashMap<IpAddr, usize>, String> {
    let name = "max.connections.per.ip.overrides";
    let mut out = HashMap::new();
    for pair in v.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (host, count) = pair
            .rsplit_once(':')
            .ok_or_else(|| format!("{name}: {pair:?} is not host:count"))?;
        let count = parse_count(name, count)?;
        let host = host.trim().trim_start_matches('[').trim_end_matches(']');
        let ips: Vec<IpAddr> = match host.parse::<IpAddr>() {
            Ok(ip) => vec![ip],
            Err(_) => std::net::ToSocketAddrs::to_socket_addrs(&(host, 0))
                .map_err(|e| format!("{name}: cannot resolve {host:?}: {e}"))?
                .map(|a| a.ip())
                .collect(),
        };
        for ip in ips {
            out.insert(ip, count);
        }
    }
    Ok(out)
}

impl ConnectionLimits {
    /// Applies one setting of [`NAMES`].
    pub fn apply(&mut self, name: &str, v: &str) -> Result<(), String> {
        match name {
            "max.connections" => self.max_connections = parse_count(name, v)?,
            "max.connections.per.ip" => self.max_connections_per_ip = parse_count(name, v)?,
            "max.connections.per.ip.overrides" => {
                self.per_ip_overrides = parse_overrides(v)?;
                self.per_ip_overrides_text = v.trim().to_string();
            }
            "connections.max.idle.ms" => {
                let ms: i64 = parse_num(name, v)?;
                self.max_idle = (ms >= 0).then(|| Duration::from_millis(ms.max(1) as u64));
            }
            "request.read.timeout.ms" => {
                let ms: u64 = parse_num(name, v)?;
                if ms == 0 {
                    return Err(format!("{name} must be at least 1"));
                }
                self.request_read_timeout = Duration::from_millis(ms);
            }
            "queued.max.request.bytes" => {
                let n: i64 = parse_num(name, v)?;
                if n < -1 {
                    return Err(format!("{name}={v:?}: must be -1 (no bound) or positive"));
                }
                self.queued_max_request_bytes = (n > 0).then_some(n as usize);
            }
            "log.open.files.max" => {
                let n: usize = parse_num(name, v)?;
                if n < LOG_OPEN_FILES_MIN {
                    return Err(format!(
                        "{name}={v:?}: must be at least {LOG_OPEN_FILES_MIN}"
                    ));
                }
                self.log_open_files_max = Some(n);
            }
            _ => return Err(format!("{name} is not a setting es knows")),
        }
        Ok(())
    }

    /// Checks what depends on more than one setting, once all are applied.
    pub fn check(&self) -> Result<(), String> {
        if self.max_connections_per_ip == 0 && self.per_ip_overrides.is_empty() {
            // Kafka's rule: 0 refuses everybody unless some address has an override.
            return Err(
                "max.connections.per.ip=0 refuses every client: give max.connections.per.ip.overrides too"
                    .into(),
            );
        }
        Ok(())
    }

    /// The per-address limit for `ip`: its override, else `dynamic` (the
    /// dynamic `max.connections.per.ip`, if set), else the static value.
    pub fn per_ip(&self, ip: IpAddr, dynamic: Option<usize>) -> usize {
        self.per_ip_overrides
            .get(&ip)
            .copied()
            .or(dynamic)
            .unwrap_or(self.max_connections_per_ip)
    }

    /// (name, value, whether it is the default) for DescribeConfigs.
    pub fn describe(&self) -> Vec<(&'static str, String, bool)> {
        let d = ConnectionLimits::default();
        let ms = |t: Option<Duration>| t.map_or(-1, |t| t.as_millis() as i64);
        vec![
            (
                "max.connections",
                self.max_connections.to_string(),
                self.max_connections == d.max_connections,
            ),
            (
                "max.connections.per.ip",
                self.max_connections_per_ip.to_string(),
                self.max_connections_per_ip == d.max_connections_per_ip,
            ),
            (
                "max.connections.per.ip.overrides",
                self.per_ip_overrides_text.clone(),
                self.per_ip_overrides_text.is_empty(),
            ),
            (
                "connections.max.idle.ms",
                ms(self.max_idle).to_string(),
                self.max_idle == d.max_idle,
            ),
            (
                "request.read.timeout.ms",
                self.request_read_timeout.as_millis().to_string(),
                self.request_read_timeout == d.request_read_timeout,
            ),
            (
                "queued.max.request.bytes",
                self.queued_max_request_bytes
                    .map_or(-1, |n| n as i64)
                    .to_string(),
                self.queued_max_request_bytes == d.queued_max_request_bytes,
            ),
            (
                "log.open.files.max",
                open_files_budget(self.log_open_files_max).to_string(),
                self.log_open_files_max.is_none(),
            ),
        ]
    }
}

/// Why a connection was refused at accept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// `max.connections`.
    MaxConnections,
    /// `max.connections.per.ip` (or its override for the address).
    MaxConnectionsPerIp,
}

impl Refused {
    /// Every reason, for series created at zero.
    pub const ALL: [Refused; 2] = [Refused::MaxConnections, Refused::MaxConnectionsPerIp];

    /// The reason label of `es_connections_rejected_total`.
    pub fn label(self) -> &'static str {
        match self {
            Refused::MaxConnections => "max_connections",
            Refused::MaxConnectionsPerIp => "max_connections_per_ip",
        }
    }
}

/// The open connections of a broker, all together and per address.
#[derive(Debug)]
pub struct Connections {
    limits: ConnectionLimits,
    counts: Mutex<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
}

impl Connections {
    pub fn new(limits: ConnectionLimits) -> Arc<Connections> {
        Arc::new(Connections {
            limits,
            counts: Mutex::new(Counts::default()),
        })
    }

    /// Counts a connection from `ip` if the limits allow it; `exempt` (the
    /// inter-broker listener) is held to the per-address limit only, as in
    /// Kafka. The returned guard uncounts it when dropped.
    ///
    /// `dynamic`: the dynamic broker configs in force, whose
    /// `max.connections` and `max.connections.per.ip` (per broker, then
    /// cluster-wide) win over the static ones, as in Kafka.
    pub fn admit(
        self: &Arc<Self>,
        ip: IpAddr,
        exempt: bool,
        dynamic: &DynamicBrokerConfigs,
    ) -> Result<Admitted, Refused> {
        let at_level = |name: &str| dynamic.value(name)?.trim().parse::<usize>().ok();
        let max_connections = at_level("max.connections").unwrap_or(self.limits.max_connections);
        let per_ip = self.limits.per_ip(ip, at_level("max.connections.per.ip"));
        let mut c = self.counts.lock();
        if !exempt && c.total >= max_connections {
            return Err(Refused::MaxConnections);
        }
        let from_ip = c.per_ip.get(&ip).copied().unwrap_or(0);
        if from_ip >= per_ip {
            return Err(Refused::MaxConnectionsPerIp);
        }
        c.total += 1;
        c.per_ip.insert(ip, from_ip + 1);
        Ok(Admitted {
            connections: self.clone(),
            ip,
        })
    }

    /// Connections counted now.
    pub fn open(&self) -> usize {
        self.counts.lock().total
    }
}

/// One counted connection; uncounted when dropped.
#[derive(Debug)]
pub struct Admitted {
    connections: Arc<Connections>,
    ip: IpAddr,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut c = self.connections.counts.lock();
        c.total = c.total.saturating_sub(1);
        if let Some(n) = c.per_ip.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                c.per_ip.remove(&self.ip);
            }
        }
    }
}

/// The bytes of requests read and not yet answered, all connections
/// together (`queued.max.request.bytes`). A connection reserves a request's
/// size before it reads the request's body and gives it back once the
/// request is handled (Kafka releases a request's buffer then too); while the pool is empty it stops reading its socket,
/// so a client is held back by TCP rather than buffered. A request larger
/// than the whole pool takes all of it (Kafka's pool is not strict either),
/// so it waits for the others but is never refused for its size. The free
/// bytes are `es_request_memory_available_bytes` (Kafka's
/// `MemoryPoolAvailable`).
#[derive(Debug)]
pub struct RequestMemory {
    pool: Option<(Arc<Semaphore>, usize)>,
}

/// Bytes held in a [`RequestMemory`], given back when dropped.
#[derive(Debug)]
pub struct Reserved {
    permit: Option<OwnedSemaphorePermit>,
    pool: Arc<Semaphore>,
}

impl Drop for Reserved {
    fn drop(&mut self) {
        drop(self.permit.take());
        publish(&self.pool);
    }
}

fn publish(pool: &Semaphore) {
    crate::metrics::kafka_metrics()
        .request_memory_available
        .set(pool.available_permits() as i64);
}

impl RequestMemory {
    pub fn new(bytes: Option<usize>) -> RequestMemory {
        let pool = bytes.map(|b| {
            let b = b.clamp(1, Semaphore::MAX_PERMITS.min(u32::MAX as usize));
            (Arc::new(Semaphore::new(b)), b)
        });
        match &pool {
            Some((p, _)) => publish(p),
            None => {
                crate::metrics::kafka_metrics()
                    .request_memory_available
                    .set(-1);
            }
        }
        RequestMemory { pool }
    }

    /// Reserves `bytes`, waiting while the pool is short. `None` when there
    /// is no bound.
    pub async fn reserve(&self, bytes: usize) -> Option<Reserved> {
        let (pool, size) = self.pool.as_ref()?;
        let n = bytes.clamp(1, *size) as u32;
        let permit = pool.clone().acquire_many_owned(n).await.ok()?;
        publish(pool);
        Some(Reserved {
            permit: Some(permit),
            pool: pool.clone(),
        })
    }

    /// Bytes free in the pool now (`None`: no bound).
    pub fn available(&self) -> Option<usize> {
        self.pool.as_ref().map(|(p, _)| p.available_permits())
    }
}

/// Produce requests decoded at once on blocking threads (those over 256 KiB
/// of record bytes; smaller ones decode on the runtime's own threads, as
/// many at once as there are of those). Each may hold its decompression
/// bound (16 x `max.message.bytes`, 16-64 MiB), the codec's window and the
/// buffer growing to the bound while it decodes (up to about 45 MiB
/// measured), so their number bounds that memory across connections: one
/// per CPU, at least 2. Decoding is CPU work, so more at once would gain
/// nothing. A request waits for a slot before its batches are decoded.
#[derive(Debug)]
pub struct DecodeSlots(tokio::sync::Semaphore);

impl DecodeSlots {
    /// Slots for this machine (see the type).
    pub fn for_this_machine() -> DecodeSlots {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        DecodeSlots::new(cpus.max(2))
    }

    pub fn new(slots: usize) -> DecodeSlots {
        DecodeSlots(tokio::sync::Semaphore::new(slots.max(1)))
    }

    /// Waits for a slot; it is free again when the permit drops.
    pub async fn acquire(&self) -> Option<tokio::sync::SemaphorePermit<'_>> {
        self.0.acquire().await.ok()
    }
}

/// The smallest `log.open.files.max`: a roll holds four files of one
/// partition at once, a compaction swap a few more.
pub const LOG_OPEN_FILES_MIN: usize = 16;

/// Files in use by this process and its soft `RLIMIT_NOFILE`, where the
/// system says (`/proc/self/fd`).
pub fn open_files() -> Option<(u64, u64)> {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(u64::MAX);
    let in_use = std::fs::read_dir("/proc/self/fd").ok()?.count() as u64;
    Some((in_use, limit))
}

/// The descriptors the partition logs may keep open (`log.open.files.max`):
/// as configured, or by default the soft open-file limit less a quarter of
/// it (at least 256) for connections, the metadata log and the broker's own
/// files. Beyond it, es-storage closes the least recently used segment files
/// and reopens them when next read, so the number of partitions is bound by
/// neither. With the limit es raises itself to at start (a million where the
/// system allows) the default never closes anything in practice.
pub fn open_files_budget(configured: Option<usize>) -> usize {
    if let Some(n) = configured {
        return n.max(LOG_OPEN_FILES_MIN);
    }
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(u64::MAX);
    let reserve = (limit / 4).max(256);
    usize::try_from(limit.saturating_sub(reserve))
        .unwrap_or(usize::MAX)
        .max(LOG_OPEN_FILES_MIN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_in_kafka_names_with_kafka_defaults() {
        let mut l = ConnectionLimits::default();
        assert_eq!(l.max_connections, 2_147_483_647);
        assert_eq!(l.max_idle, Some(Duration::from_secs(600)));
        l.apply("max.connections.per.ip", "3").expect("apply");
        l.apply(
            "max.connections.per.ip.overrides",
            "127.0.0.2:5, [::1]:7,localhost:9",
        )
        .expect("apply");
        l.apply("connections.max.idle.ms", "-1").expect("apply");
        l.apply("queued.max.request.bytes", "-1").expect("apply");
        assert_eq!(l.per_ip("10.0.0.1".parse().expect("ip"), None), 3);
        assert_eq!(l.per_ip("127.0.0.2".parse().expect("ip"), Some(1)), 5);
        assert_eq!(l.per_ip("127.0.0.1".parse().expect("ip"), None), 9);
        assert_eq!(l.max_idle, None);
        assert_eq!(l.queued_max_request_bytes, None);
        assert!(l.apply("max.connections", "-1").is_err());
        assert!(l
            .apply("max.connections.per.ip.overrides", "nohost")
            .is_err());
        assert!(l.apply("queued.max.request.bytes", "-2").is_err());
        let mut zero = ConnectionLimits::default();
        zero.apply("max.connections.per.ip", "0").expect("apply");
        assert!(zero.check().is_err());
    }

    #[test]
    fn counts_refuse_at_each_limit_and_forget_closed_connections() {
        let limits = ConnectionLimits {
            max_connections: 3,
            max_connections_per_ip: 2,
            ..ConnectionLimits::default()
        };
        let c = Connections::new(limits);
        let none = DynamicBrokerConfigs::default();
        let a: IpAddr = "10.0.0.1".parse().expect("ip");
        let b: IpAddr = "10.0.0.2".parse().expect("ip");
        let a1 = c.admit(a, false, &none).expect("first");
        let _a2 = c.admit(a, false, &none).expect("second");
        assert_eq!(
            c.admit(a, false, &none).err(),
            Some(Refused::MaxConnectionsPerIp)
        );
        let _b1 = c.admit(b, false, &none).expect("other address");
        assert_eq!(
            c.admit(b, false, &none).err(),
            Some(Refused::MaxConnections)
        );
        // The inter-broker listener may exceed max.connections, not the per-address limit.
        let b2 = c.admit(b, true, &none).expect("inter-broker");
        assert_eq!(
            c.admit(b, true, &none).err(),
            Some(Refused::MaxConnectionsPerIp)
        );
        drop(a1);
        drop(b2);
        assert_eq!(c.open(), 2);
        let _a3 = c.admit(a, false, &none).expect("a slot was freed");
        // Dynamic values win, per broker over cluster-wide.
        let mut dynamic = DynamicBrokerConfigs::default();
        dynamic
            .cluster_default
            .insert("max.connections".into(), "100".into());
        let _b3 = c.admit(b, false, &dynamic).expect("max.connections raised");
        dynamic
            .broker
            .insert("max.connections.per.ip".into(), "1".into());
        assert_eq!(
            c.admit(b, false, &dynamic).err(),
            Some(Refused::MaxConnectionsPerIp)
        );
        dynamic.broker.insert("max.connections".into(), "3".into());
        let d: IpAddr = "10.0.0.4".parse().expect("ip");
        assert_eq!(
            c.admit(d, false, &dynamic).err(),
            Some(Refused::MaxConnections)
        );
    }

    #[test]
    fn the_log_keeps_a_quarter_of_the_open_file_limit_for_everything_else() {
        let (in_use, limit) = open_files().expect("/proc/self/fd");
        assert!(in_use > 0 && limit > in_use);
        let budget = open_files_budget(None) as u64;
        assert!(budget >= LOG_OPEN_FILES_MIN as u64);
        assert!(
            limit < 512 || budget <= limit - limit / 4,
            "{budget} of {limit}"
        );
        assert_eq!(open_files_budget(Some(5000)), 5000);
        assert_eq!(open_files_budget(Some(1)), LOG_OPEN_FILES_MIN);
        let mut l = ConnectionLimits::default();
        l.apply("log.open.files.max", "2000").expect("apply");
        assert_eq!(l.log_open_files_max, Some(2000));
        assert!(l.apply("log.open.files.max", "3").is_err());
    }

    #[tokio::test]
    async fn a_decode_waits_for_a_free_slot() {
        let slots = DecodeSlots::new(1);
        let first = slots.acquire().await.expect("slot");
        let mut second = Box::pin(slots.acquire());
        assert!(
            futures_poll(&mut second).is_none(),
            "waits while the slot is held"
        );
        drop(first);
        assert!(second.await.is_some());
        assert!(DecodeSlots::for_this_machine().0.available_permits() >= 2);
    }

    #[tokio::test]
    async fn the_pool_holds_back_a_request_until_bytes_are_given_back() {
        let m = RequestMemory::new(Some(1000));
        let first = m.reserve(700).await.expect("bounded");
        assert_eq!(m.available(), Some(300));
        // Larger than the pool: takes all of it once it is free.
        let mut big = Box::pin(m.reserve(5000));
        assert!(futures_poll(&mut big).is_none(), "waits while 700 are held");
        drop(first);
        let all = big.await.expect("bounded");
        assert_eq!(m.available(), Some(0));
        drop(all);
        assert!(RequestMemory::new(None).reserve(10).await.is_none());
    }

    /// Polls a future once.
    fn futures_poll<F: std::future::Future + Unpin>(f: &mut F) -> Option<F::Output> {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        match std::pin::Pin::new(f).poll(&mut cx) {
            std::task::Poll::Ready(v) => Some(v),
            std::task::Poll::Pending => None,
        }
    }
}
