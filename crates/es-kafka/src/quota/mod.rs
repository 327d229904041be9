//! Client quotas at run time, as Kafka's `ClientQuotaManager` (produce and
//! fetch bytes) and `ClientRequestQuotaManager` (request handler time)
//! enforce them: which quota applies to a (user principal, client id),
//! the rate each client has used, and how long a client over its quota is
//! throttled.
//!
//! The quotas come from the metadata ([`es_meta::quotas::ClientQuotas`],
//! applied on every node), so every broker enforces the same. Resolution is
//! Kafka's default quota callback: the most specific entity that has a
//! quota of the kind wins, in the order `/users/<u>/clients/<c>`,
//! `/users/<u>/clients/<default>`, `/users/<u>`,
//! `/users/<default>/clients/<c>`, `/users/<default>/clients/<default>`,
//! `/users/<default>`, `/clients/<c>`, `/clients/<default>`; and the rate
//! is shared by every client that resolves to the same entity (the
//! "metric tags": a `/users/<default>` quota gives each user one rate for
//! all its client ids). A kind without any quota records nothing.
//!
//! Sans-io: every call takes the time in milliseconds; the request layer
//! reads the broker's clock. The measured rates are bounded in number
//! ([`SENSORS_MAX`]); idle ones expire after an hour, as Kafka's sensors.

pub mod rate;

use std::collections::HashMap;
use std::sync::Arc;

use es_meta::quotas::{ClientQuotas, CLIENT_ID, USER};
use parking_lot::{Mutex, RwLock};

pub use rate::RateConfig;
use rate::{throttle_time_ms, Rate};

/// Kafka's `quota.window.num` default.
pub const QUOTA_WINDOW_NUM_DEFAULT: u32 = 11;
/// Kafka's `quota.window.size.seconds` default.
pub const QUOTA_WINDOW_SIZE_SECONDS_DEFAULT: u32 = 1;
/// Most rates kept per kind; past it the least recently used one goes.
pub const SENSORS_MAX: usize = 100_000;
/// A rate not recorded for this long is dropped (Kafka's
/// `InactiveSensorExpirationTimeSeconds`).
pub const SENSOR_IDLE_MS: i64 = 3_600_000;
/// How often idle rates are looked for.
const PRUNE_INTERVAL_MS: i64 = 60_000;

/// What a quota limits, and the key that sets it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuotaKind {
    /// Bytes of produce requests per second (`producer_byte_rate`).
    Produce,
    /// Bytes of fetch responses per second (`consumer_byte_rate`).
    Fetch,
    /// Percent of one handler thread's time (`request_percentage`).
    Request,
}

impl QuotaKind {
    pub fn key(self) -> &'static str {
        match self {
            QuotaKind::Produce => "producer_byte_rate",
            QuotaKind::Fetch => "consumer_byte_rate",
            QuotaKind::Request => "request_percentage",
        }
    }
}

/// One part (user or client id) of an entity, as a quota is keyed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Part {
    Absent,
    Default,
    Named(String),
}

impl Part {
    fn of(p: Option<Option<&str>>) -> Part {
        match p {
            None => Part::Absent,
            Some(None) => Part::Default,
            Some(Some(n)) => Part::Named(n.to_string()),
        }
    }
}

type Limits = HashMap<(Part, Part), f64>;

/// Kafka's metric tags: (user, client id), `""` where the part does not
/// count.
type Tags = (String, String);

struct Sensors {
    rates: HashMap<Tags, Rate>,
    pruned_ms: i64,
}

/// The quotas of one kind and the rates measured against them.
pub struct QuotaManager {
    kind: QuotaKind,
    config: RateConfig,
    /// The request quota bounds a throttle to one window (Kafka's
    /// `ClientRequestQuotaManager.maxThrottleTimeMs`); the byte quotas do
    /// not.
    throttle_max_ms: Option<i64>,
    limits: RwLock<Arc<Limits>>,
    sensors: Mutex<Sensors>,
}

impl std::fmt::Debug for QuotaManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuotaManager")
            .field("kind", &self.kind)
            .field("quotas", &self.limits.read().len())
            .finish()
    }
}

impl QuotaManager {
    pub fn new(kind: QuotaKind, config: RateConfig) -> Self {
        let window = i64::try_from(config.window_ms).unwrap_or(i64::MAX);
        QuotaManager {
            kind,
            config,
            throttle_max_ms: (kind == QuotaKind::Request).then_some(window),
            limits: RwLock::new(Arc::new(Limits::new())),
            sensors: Mutex::new(Sensors {
                rates: HashMap::new(),
                pruned_ms: 0,
            }),
        }
    }

    /// Whether any entity has a quota of this kind (else nothing is
    /// recorded, as in Kafka).
    pub fn enabled(&self) -> bool {
        !self.limits.read().is_empty()
    }

    /// Takes this kind's quotas from the applied metadata.
    pub fn set_quotas(&self, quotas: &ClientQuotas) {
        let mut limits = Limits::new();
        for (entity, values) in &quotas.0 {
            let Some(v) = values.get(self.kind.key()) else {
                continue;
            };
            let user = Part::of(entity.part(USER));
            let client = Part::of(entity.part(CLIENT_ID));
            if user == Part::Absent && client == Part::Absent {
                continue; // an IP entity
            }
            limits.insert((user, client), v.0);
        }
        *self.limits.write() = Arc::new(limits);
    }

    /// Kafka's `DefaultQuotaCallback.quotaMetricTags`: whose rate a request
    /// of `user` with `client_id` counts in.
    fn tags(limits: &Limits, user: &str, client_id: &str) -> Tags {
        let has = |u: Part, c: Part| limits.contains_key(&(u, c));
        let nu = || Part::Named(user.to_string());
        let nc = || Part::Named(client_id.to_string());
        let both = (user.to_string(), client_id.to_string());
        let user_only = (user.to_string(), String::new());
        if has(nu(), nc()) || has(nu(), Part::Default) {
            both
        } else if has(nu(), Part::Absent) {
            user_only
        } else if has(Part::Default, nc()) || has(Part::Default, Part::Default) {
            both
        } else if has(Part::Default, Part::Absent) {
            user_only
        } else {
            (String::new(), client_id.to_string())
        }
    }

    /// Kafka's `DefaultQuotaCallback.quotaLimit` of a rate's tags.
    fn limit(limits: &Limits, tags: &Tags) -> Option<f64> {
        let (user, client) = tags;
        let get = |u: Part, c: Part| limits.get(&(u, c)).copied();
        let nu = || Part::Named(user.clone());
        let nc = || Part::Named(client.clone());
        match (user.is_empty(), client.is_empty()) {
            (false, false) => get(nu(), nc())
                .or_else(|| get(nu(), Part::Default))
                .or_else(|| get(Part::Default, nc()))
                .or_else(|| get(Part::Default, Part::Default)),
            (false, true) => get(nu(), Part::Absent).or_else(|| get(Part::Default, Part::Absent)),
            (true, false) => get(Part::Absent, nc()).or_else(|| get(Part::Absent, Part::Default)),
            (true, true) => None,
        }
    }

    /// The quota that applies to `user` (a principal's name) with
    /// `client_id`, if any.
    pub fn quota(&self, user: &str, client_id: &str) -> Option<f64> {
        let limits = self.limits.read().clone();
        Self::limit(&limits, &Self::tags(&limits, user, client_id))
    }

    /// Kafka's `recordAndGetThrottleTimeMs`: adds `value` to the client's
    /// rate at `now_ms`; the throttle time when the rate is then over its
    /// quota, else 0. Nothing is recorded while no quota of this kind
    /// exists.
    pub fn record(&self, user: &str, client_id: &str, value: f64, now_ms: i64) -> i32 {
        let limits = self.limits.read().clone();
        if limits.is_empty() {
            return 0;
        }
        let tags = Self::tags(&limits, user, client_id);
        let bound = Self::limit(&limits, &tags);
        let mut sensors = self.sensors.lock();
        let rate = sensors.rate(tags, now_ms);
        rate.record(&self.config, value, now_ms);
        let Some(bound) = bound else {
            return 0;
        };
        let observed = rate.measure(&self.config, now_ms);
        if observed <= bound {
            return 0;
        }
        let window = rate.window_size_ms(&self.config, now_ms);
        let mut t = throttle_time_ms(observed, bound, window);
        if let Some(max) = self.throttle_max_ms {
            t = t.min(max);
        }
        tracing::debug!(
            kind = ?self.kind,
            user,
            client_id,
            observed,
            bound,
            throttle_ms = t,
            "client over its quota"
        );
        i32::try_from(t).unwrap_or(i32::MAX)
    }

    /// Kafka's `unrecordQuotaSensor`: takes back `value` (a throttled fetch
    /// sends nothing, so its bytes do not count).
    pub fn unrecord(&self, user: &str, client_id: &str, value: f64, now_ms: i64) {
        let limits = self.limits.read().clone();
        if limits.is_empty() {
            return;
        }
        let tags = Self::tags(&limits, user, client_id);
        let mut sensors = self.sensors.lock();
        sensors
            .rate(tags, now_ms)
            .record(&self.config, -value, now_ms);
    }

    /// Kafka's `getMaxValueInQuotaWindow`: the most that can be recorded at
    /// once without a certain throttle (a fetch's `max_bytes` is capped to
    /// it); `None` without a quota.
    pub fn max_value_in_window(&self, user: &str, client_id: &str) -> Option<f64> {
        let q = self.quota(user, client_id)?;
        let windows = f64::from(self.config.samples.saturating_sub(1));
        Some(q * windows * self.config.window_ms as f64 / 1000.0)
    }
}

impl Sensors {
    /// The rate of `tags`, made if new; idle rates are dropped now and
    /// then, and the least recently used one when there are too many.
    fn rate(&mut self, tags: Tags, now_ms: i64) -> &mut Rate {
        if now_ms - self.pruned_ms >= PRUNE_INTERVAL_MS {
            self.pruned_ms = now_ms;
            self.rates
                .retain(|_, r| now_ms - r.last_record_ms < SENSOR_IDLE_MS);
        }
        if !self.rates.contains_key(&tags) && self.rates.len() >= SENSORS_MAX {
            let oldest = self
                .rates
                .iter()
                .min_by_key(|(_, r)| r.last_record_ms)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                self.rates.remove(&k);
            }
        }
        self.rates.entry(tags).or_insert_with(|| Rate::new(now_ms))
    }
}

/// Kafka's `QuotaFactory`: the client quota managers of a broker.
#[derive(Debug)]
pub struct ClientQuotaManagers {
    pub produce: QuotaManager,
    pub fetch: QuotaManager,
    pub request: QuotaManager,
}

impl ClientQuotaManagers {
    pub fn new(config: RateConfig) -> Self {
        ClientQuotaManagers {
            produce: QuotaManager::new(QuotaKind::Produce, config),
            fetch: QuotaManager::new(QuotaKind::Fetch, config),
            request: QuotaManager::new(QuotaKind::Request, config),
        }
    }

    /// Takes the quotas of the applied metadata.
    pub fn set_quotas(&self, quotas: &ClientQuotas) {
        self.produce.set_quotas(quotas);
        self.fetch.set_quotas(quotas);
        self.request.set_quotas(quotas);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use es_meta::quotas::{QuotaAlteration, QuotaEntity, QuotaOp, QuotaValue};

    const C: RateConfig = RateConfig {
        samples: 11,
        window_ms: 1000,
    };

    /// A part of an entity: absent, the default, or named.
    type TestPart<'a> = Option<Option<&'a str>>;

    fn quotas(entries: &[(TestPart<'_>, TestPart<'_>, f64)]) -> ClientQuotas {
        let mut q = ClientQuotas::default();
        for (u, c, v) in entries {
            let mut parts = Vec::new();
            if let Some(u) = u {
                parts.push((USER, *u));
            }
            if let Some(c) = c {
                parts.push((CLIENT_ID, *c));
            }
            q.apply(&QuotaAlteration {
                entity: QuotaEntity::of(&parts),
                ops: vec![QuotaOp {
                    key: "producer_byte_rate".into(),
                    value: Some(QuotaValue(*v)),
                }],
            });
        }
        q
    }

    fn manager(q: &ClientQuotas) -> QuotaManager {
        let m = QuotaManager::new(QuotaKind::Produce, C);
        m.set_quotas(q);
        m
    }

    #[test]
    fn the_most_specific_entity_wins_in_kafkas_order() {
        let named = Some(Some("alice"));
        let default = Some(None);
        let c1 = Some(Some("c1"));
        // Each level, from the least specific up; each time the new one wins.
        let levels = [
            (None, default, 8.0),
            (None, c1, 7.0),
            (default, None, 6.0),
            (default, default, 5.0),
            (default, c1, 4.0),
            (named, None, 3.0),
            (named, default, 2.0),
            (named, c1, 1.0),
        ];
        for n in 1..=levels.len() {
            let m = manager(&quotas(&levels[..n]));
            assert_eq!(
                m.quota("alice", "c1"),
                Some(levels[n - 1].2),
                "with {n} levels"
            );
        }
        // Someone else: the defaults.
        let m = manager(&quotas(&levels));
        assert_eq!(m.quota("bob", "c1"), Some(4.0));
        assert_eq!(m.quota("bob", "c2"), Some(5.0));
        assert_eq!(m.quota("alice", "c2"), Some(2.0));
        // Only client quotas: a user's name does not matter.
        let m = manager(&quotas(&[(None, c1, 7.0)]));
        assert_eq!(m.quota("anyone", "c1"), Some(7.0));
        assert_eq!(m.quota("anyone", "c2"), None);
        assert_eq!(manager(&ClientQuotas::default()).quota("alice", "c1"), None);
    }

    #[test]
    fn a_default_user_quota_gives_each_user_one_rate_for_all_its_clients() {
        let m = manager(&quotas(&[(Some(None), None, 1000.0)]));
        // 10 windows of 1000 B/s is 10_000 B at once before a throttle.
        assert_eq!(m.record("alice", "c1", 6_000.0, 0), 0);
        // The same user with another client id shares the rate: 12_000 B
        // over 10 s is 1_200 B/s, 20% over, 2 s of throttle.
        assert_eq!(m.record("alice", "c2", 6_000.0, 0), 2_000);
        // Another user has its own.
        assert_eq!(m.record("bob", "c1", 6_000.0, 0), 0);
    }

    #[test]
    fn throttle_follows_the_clock_and_unrecord_takes_bytes_back() {
        let m = manager(&quotas(&[(Some(Some("alice")), None, 1000.0)]));
        assert_eq!(m.record("alice", "c", 20_000.0, 0), 10_000);
        // Five seconds on, the window still counts ten: no change.
        assert_eq!(m.record("alice", "c", 0.0, 5_000), 10_000);
        // At 10.5 s: 20_000 B over 10.5 s, 1_904.76 B/s, 9.5 s to go.
        assert_eq!(m.record("alice", "c", 0.0, 10_500), 9_500);
        // Taken back, the rate is 0: no throttle.
        m.unrecord("alice", "c", 20_000.0, 10_500);
        assert_eq!(m.record("alice", "c", 0.0, 10_500), 0);
        // Without a quota for the kind nothing is recorded.
        let none = manager(&ClientQuotas::default());
        assert_eq!(none.record("alice", "c", 1e12, 0), 0);
        assert!(!none.enabled());
    }

    #[test]
    fn request_throttle_is_at_most_one_window() {
        let mut q = ClientQuotas::default();
        q.apply(&QuotaAlteration {
            entity: QuotaEntity::of(&[(USER, None)]),
            ops: vec![QuotaOp {
                key: "request_percentage".into(),
                value: Some(QuotaValue(1.0)),
            }],
        });
        let m = QuotaManager::new(QuotaKind::Request, C);
        m.set_quotas(&q);
        // 50% of a thread for a second, against 1%: capped to 1 s.
        assert_eq!(m.record("alice", "", 50.0 * 1.0, 0), 1_000);
        assert_eq!(m.max_value_in_window("alice", ""), Some(10.0));
    }

    #[test]
    fn idle_rates_expire_and_their_number_is_bounded() {
        let m = manager(&quotas(&[(None, Some(None), 1e9)]));
        for i in 0..10 {
            m.record("u", &format!("c{i}"), 1.0, 0);
        }
        assert_eq!(m.sensors.lock().rates.len(), 10);
        m.record("u", "late", 1.0, SENSOR_IDLE_MS + PRUNE_INTERVAL_MS);
        assert_eq!(m.sensors.lock().rates.len(), 1);
    }
}
