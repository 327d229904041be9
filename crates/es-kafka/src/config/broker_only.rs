//! Kafka's dynamically reconfigurable broker configs that are not the
//! broker-level name of a topic config: the thread pools, the log cleaner's
//! tuning, and the listeners' Kerberos and login-refresh settings
//! (`DynamicBrokerConfig`'s reconfigurable sets). Kafka tools and clients'
//! suites alter them on a BROKER resource (librdkafka's 0081 sets
//! `sasl.kerberos.min.time.before.relogin` and `background.threads`), so es
//! accepts them with Kafka's names, types, defaults and ranges, keeps them
//! with the other dynamic broker configs and describes them. es has no
//! matching mechanism (its threads are tokio's, sized at start; its cleaner
//! has no throttle or dedupe buffer; it has no Kerberos and no OAUTHBEARER
//! login): a value set here changes nothing else, as each one's
//! documentation says. The exceptions are `max.connections` and
//! `max.connections.per.ip`, which the connection limiter reads on every
//! accept (`limits.rs`).

use super::table::{def, Check, ConfigType, TopicConfigDef, TOPIC_CONFIGS};

const IMAX: i64 = i32::MAX as i64;
const LMAX: i64 = i64::MAX;

/// Sorted by name.
pub const BROKER_ONLY_CONFIGS: &[TopicConfigDef] = &[
    def("background.threads", Some("background.threads"), "10", ConfigType::Int, Check::Int { min: 1, max: IMAX }, "The number of threads to use for various background processing tasks. es keeps this value for Kafka's tools; its background work runs on tokio's blocking pool, so the value changes nothing else."),
    def("log.cleaner.backoff.ms", Some("log.cleaner.backoff.ms"), "15000", ConfigType::Long, Check::Long { min: 0, max: LMAX }, "The amount of time to sleep when there are no logs to clean. es keeps this value for Kafka's tools; es compacts every --compaction-interval, so the value changes nothing else."),
    def("log.cleaner.dedupe.buffer.size", Some("log.cleaner.dedupe.buffer.size"), "134217728", ConfigType::Long, Check::Long { min: 0, max: LMAX }, "The total memory used for log deduplication across all cleaner threads. es keeps this value for Kafka's tools; it has no such setting of its own, so the value changes nothing else."),
    def("log.cleaner.io.buffer.load.factor", Some("log.cleaner.io.buffer.load.factor"), "0.9", ConfigType::Double, Check::Double { min: f64::MIN, max: f64::MAX }, "Log cleaner dedupe buffer load factor. es keeps this value for Kafka's tools; it has no such setting of its own, so the value changes nothing else."),
    def("log.cleaner.io.buffer.size", Some("log.cleaner.io.buffer.size"), "524288", ConfigType::Int, Check::Int { min: 0, max: IMAX }, "The total memory used for log cleaner I/O buffers across all cleaner threads. es keeps this value for Kafka's tools; it has no such setting of its own, so the value changes nothing else."),
    def("log.cleaner.io.max.bytes.per.second", Some("log.cleaner.io.max.bytes.per.second"), "1.7976931348623157E308", ConfigType::Double, Check::Double { min: f64::MIN, max: f64::MAX }, "The log cleaner will be throttled so that the sum of its read and write i/o will be less than this value on average. es keeps this value for Kafka's tools; it has no such setting of its own, so the value changes nothing else."),
    def("log.cleaner.threads", Some("log.cleaner.threads"), "1", ConfigType::Int, Check::Int { min: 0, max: IMAX }, "The number of background threads to use for log cleaning. es keeps this value for Kafka's tools; it has no such setting of its own, so the value changes nothing else."),
    def("max.connections", Some("max.connections"), "2147483647", ConfigType::Int, Check::Int { min: 0, max: IMAX }, "The maximum number of connections the broker accepts at any time, all listeners together (the inter-broker listener may exceed it when there are several). A connection over it is accepted and closed at once. es reads it on every accept, so a change applies to the connections accepted after it."),
    def("max.connections.per.ip", Some("max.connections.per.ip"), "2147483647", ConfigType::Int, Check::Int { min: 0, max: IMAX }, "The maximum number of connections the broker accepts from one address (max.connections.per.ip.overrides aside). A connection over it is accepted and closed at once. es reads it on every accept, so a change applies to the connections accepted after it."),
    def("num.io.threads", Some("num.io.threads"), "8", ConfigType::Int, Check::Int { min: 1, max: IMAX }, "The number of threads that the server uses for processing requests, which may include disk I/O. es keeps this value for Kafka's tools; requests run on tokio's worker threads, sized at start, so the value changes nothing else."),
    def("num.network.threads", Some("num.network.threads"), "3", ConfigType::Int, Check::Int { min: 1, max: IMAX }, "The number of threads that the server uses for receiving requests from the network and sending responses to the network. es keeps this value for Kafka's tools; it has no such setting of its own, so the value changes nothing else."),
    def("num.recovery.threads.per.data.dir", Some("num.recovery.threads.per.data.dir"), "2", ConfigType::Int, Check::Int { min: 1, max: IMAX }, "The number of threads per data directory to be used for log recovery at startup and flushing at shutdown. es keeps this value for Kafka's tools; it has no such setting of its own, so the value changes nothing else."),
    def("num.replica.fetchers", Some("num.replica.fetchers"), "1", ConfigType::Int, Check::Int { min: -IMAX - 1, max: IMAX }, "Number of fetcher threads used to replicate records from each source broker. es keeps this value for Kafka's tools; it has no such setting of its own, so the value changes nothing else."),
    def("sasl.kerberos.kinit.cmd", Some("sasl.kerberos.kinit.cmd"), "/usr/bin/kinit", ConfigType::String, Check::Any, "Kerberos kinit command path. es has no Kerberos (GSSAPI), so the value changes nothing else."),
    def("sasl.kerberos.min.time.before.relogin", Some("sasl.kerberos.min.time.before.relogin"), "60000", ConfigType::Long, Check::Long { min: -LMAX - 1, max: LMAX }, "Login thread sleep time between refresh attempts. es has no Kerberos (GSSAPI), so the value changes nothing else."),
    def("sasl.kerberos.principal.to.local.rules", Some("sasl.kerberos.principal.to.local.rules"), "DEFAULT", ConfigType::List, Check::Any, "A list of rules for mapping from principal names to short names. es has no Kerberos (GSSAPI), so the value changes nothing else."),
    def("sasl.kerberos.ticket.renew.jitter", Some("sasl.kerberos.ticket.renew.jitter"), "0.05", ConfigType::Double, Check::Double { min: f64::MIN, max: f64::MAX }, "Percentage of random jitter added to the renewal time. es has no Kerberos (GSSAPI), so the value changes nothing else."),
    def("sasl.kerberos.ticket.renew.window.factor", Some("sasl.kerberos.ticket.renew.window.factor"), "0.8", ConfigType::Double, Check::Double { min: f64::MIN, max: f64::MAX }, "Login thread will sleep until the specified window factor of time from last refresh to ticket's expiry has been reached. es has no Kerberos (GSSAPI), so the value changes nothing else."),
    def("sasl.login.refresh.buffer.seconds", Some("sasl.login.refresh.buffer.seconds"), "300", ConfigType::Short, Check::Int { min: 0, max: 3600 }, "The amount of buffer time before credential expiration to maintain when refreshing a credential. es has no OAUTHBEARER login, so the value changes nothing else."),
    def("sasl.login.refresh.min.period.seconds", Some("sasl.login.refresh.min.period.seconds"), "60", ConfigType::Short, Check::Int { min: 0, max: 900 }, "The desired minimum time for the login refresh thread to wait before refreshing a credential. es has no OAUTHBEARER login, so the value changes nothing else."),
    def("sasl.login.refresh.window.factor", Some("sasl.login.refresh.window.factor"), "0.8", ConfigType::Double, Check::Double { min: 0.5, max: 1.0 }, "Login refresh thread will sleep until the specified window factor relative to the credential's lifetime has been reached. es has no OAUTHBEARER login, so the value changes nothing else."),
    def("sasl.login.refresh.window.jitter", Some("sasl.login.refresh.window.jitter"), "0.05", ConfigType::Double, Check::Double { min: 0.0, max: 0.25 }, "The maximum amount of random jitter relative to the credential's lifetime that is added to the login refresh thread's sleep time. es has no OAUTHBEARER login, so the value changes nothing else."),
];

/// Looks up the topic config whose broker-level name is `broker_name`, or
/// one of the other reconfigurable broker configs
/// ([`BROKER_ONLY_CONFIGS`]): the broker configs es can
/// change at run time.
pub fn broker_dynamic_def(broker_name: &str) -> Option<&'static TopicConfigDef> {
    TOPIC_CONFIGS
        .iter()
        .find(|d| !d.internal && d.broker_name == Some(broker_name))
        .or_else(|| BROKER_ONLY_CONFIGS.iter().find(|d| d.name == broker_name))
}
