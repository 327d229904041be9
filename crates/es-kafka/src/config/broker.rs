//! Broker-level configuration: the dynamic broker configs set at run time
//! (`data/broker_configs.json`), the broker settings topic configs inherit
//! ([`BrokerTopicDefaults`], most specific level first), and what
//! DescribeConfigs reports for a broker resource ([`BrokerSettings`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::broker_only::broker_dynamic_def;
use super::table::{BrokerDefault, ConfigSource, ConfigType, TopicConfigDef, TOPIC_CONFIGS};
use super::validate::validate_broker_config;

/// Default partitions of the `__consumer_offsets` es creates (the broker
/// config `offsets.topic.num.partitions`, `--offsets-topic-num-partitions`).
/// Kafka's default is 50; es keeps offsets in the group coordinator's files,
/// so on one node one partition is enough. In a cluster the count spreads
/// the group coordinators over the brokers (a group is coordinated by the
/// leader of partition `abs(hash(group)) % count`).
pub const OFFSETS_TOPIC_PARTITIONS_DEFAULT: i32 = 1;
/// Kafka's `offsets.topic.segment.bytes` default (100 MiB).
pub const OFFSETS_TOPIC_SEGMENT_BYTES: u64 = 100 * 1024 * 1024;
/// Default partitions of the `__transaction_state` es creates (the broker
/// config `transaction.state.log.num.partitions`,
/// `--transaction-state-log-num-partitions`), as
/// [`OFFSETS_TOPIC_PARTITIONS_DEFAULT`] for transactional ids. Kafka's
/// default is 50.
pub const TRANSACTION_STATE_PARTITIONS_DEFAULT: i32 = 1;
/// Kafka's `transaction.state.log.segment.bytes` default (100 MiB).
pub const TRANSACTION_STATE_SEGMENT_BYTES: u64 = 100 * 1024 * 1024;
/// `transaction.state.log.min.isr`: Kafka's default, 2, for its default
/// replication factor of 3 (es creates `__transaction_state` with the
/// default replication factor, min(3, brokers)). Nothing is appended to
/// that topic's log (the coordinator's state is in the metadata log), so on
/// a single node the setting refuses nothing.
pub const TRANSACTION_STATE_MIN_ISR: i32 = 2;
/// `transaction.state.log.replication.factor`: Kafka's default, capped at
/// the brokers registered when the topic is created.
pub const TRANSACTION_STATE_REPLICATION_FACTOR: i16 = 3;

/// `min.insync.replicas`: with eligible leader replicas on (Kafka 4.1+'s
/// default, KIP-966), Kafka keeps it at the cluster level only. Its
/// controller writes the cluster-level value when none is set (the static
/// value, 1 by default), refuses to remove it and refuses per-broker values.
pub const MIN_INSYNC_REPLICAS: &str = "min.insync.replicas";

/// Dynamic broker configs: broker-level names of topic configs (see
/// [`broker_dynamic_def`]) set at run time, as `data/broker_configs.json`
/// keeps them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DynamicBrokerConfigs {
    /// Resource `"<node id>"`: Kafka's DYNAMIC_BROKER_CONFIG.
    #[serde(default)]
    pub broker: BTreeMap<String, String>,
    /// Resource "": Kafka's DYNAMIC_DEFAULT_BROKER_CONFIG.
    #[serde(default)]
    pub cluster_default: BTreeMap<String, String>,
}

/// A new broker's: the cluster-level `min.insync.replicas` Kafka's
/// controller sets up ([`MIN_INSYNC_REPLICAS`]), nothing else.
impl Default for DynamicBrokerConfigs {
    fn default() -> Self {
        let mut cluster_default = BTreeMap::new();
        cluster_default.insert(MIN_INSYNC_REPLICAS.to_string(), "1".to_string());
        DynamicBrokerConfigs {
            broker: BTreeMap::new(),
            cluster_default,
        }
    }
}

impl DynamicBrokerConfigs {
    /// Kafka's rules for `min.insync.replicas` ([`MIN_INSYNC_REPLICAS`]):
    /// the message of the one a change breaks.
    pub fn min_insync_violation(&self) -> Option<&'static str> {
        if self.broker.contains_key(MIN_INSYNC_REPLICAS) {
            Some("Broker-level min.insync.replicas cannot be set while ELR is enabled.")
        } else if !self.cluster_default.contains_key(MIN_INSYNC_REPLICAS) {
            Some("Cluster-level min.insync.replicas cannot be removed while ELR is enabled.")
        } else {
            None
        }
    }

    /// The value of `name` at its most specific dynamic level: this
    /// broker's, else the cluster-wide default.
    pub fn value(&self, name: &str) -> Option<&String> {
        self.broker
            .get(name)
            .or_else(|| self.cluster_default.get(name))
    }

    /// The same configs without any entry that is not a valid dynamic
    /// broker config (a file from another version, or edited by hand), with
    /// the names of the entries dropped; a per-broker `min.insync.replicas`
    /// moves to the cluster level when none is set there, and the cluster
    /// level gets Kafka's value when it has none ([`MIN_INSYNC_REPLICAS`]).
    pub fn sanitized(mut self) -> (Self, Vec<String>) {
        let mut dropped = Vec::new();
        for map in [&mut self.broker, &mut self.cluster_default] {
            map.retain(|k, v| {
                let ok = validate_broker_config(k, Some(v)).is_ok();
                if !ok {
                    dropped.push(k.clone());
                }
                ok
            });
            for v in map.values_mut() {
                *v = v.trim().to_string();
            }
        }
        if let Some(v) = self.broker.remove(MIN_INSYNC_REPLICAS) {
            self.cluster_default
                .entry(MIN_INSYNC_REPLICAS.to_string())
                .or_insert(v);
        }
        self.cluster_default
            .entry(MIN_INSYNC_REPLICAS.to_string())
            .or_insert_with(|| "1".to_string());
        (self, dropped)
    }
}

/// Broker settings that topic configs inherit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerTopicDefaults {
    /// `--flush-every-records`.
    pub flush_messages: u64,
    /// `--flush-interval`, in milliseconds.
    pub flush_ms: u64,
    /// Dynamic broker configs, which win over the static ones, the flags
    /// and Kafka's defaults.
    pub dynamic: Arc<DynamicBrokerConfigs>,
    /// Broker-level names of topic configs given at start (`--config`,
    /// `--set`: `log.retention.ms=...`), Kafka's STATIC_BROKER_CONFIG.
    pub static_configs: Arc<BTreeMap<String, String>>,
}

impl Default for BrokerTopicDefaults {
    fn default() -> Self {
        BrokerTopicDefaults {
            flush_messages: 1,
            flush_ms: 1000,
            dynamic: Arc::default(),
            static_configs: Arc::default(),
        }
    }
}

impl BrokerTopicDefaults {
    /// The broker-level values of topic config `d`, most specific first:
    /// per-broker dynamic, cluster-wide dynamic, the broker flag, Kafka's
    /// default (always last). Each is (broker-level name, value, source).
    pub(super) fn levels(&self, d: &TopicConfigDef) -> Vec<(&'static str, String, ConfigSource)> {
        let name = d.broker_name.unwrap_or(d.name);
        let mut out = Vec::with_capacity(2);
        if d.broker_name.is_some() && !d.internal {
            if let Some(v) = self.dynamic.broker.get(name) {
                out.push((name, v.clone(), ConfigSource::DynamicBroker));
            }
            if let Some(v) = self.dynamic.cluster_default.get(name) {
                out.push((name, v.clone(), ConfigSource::DynamicDefaultBroker));
            }
            if let Some(v) = self.static_configs.get(name) {
                out.push((name, v.clone(), ConfigSource::StaticBroker));
            }
        }
        match d.from_broker {
            BrokerDefault::FlushMessages => out.push((
                name,
                self.flush_messages.to_string(),
                ConfigSource::StaticBroker,
            )),
            BrokerDefault::FlushMs => {
                out.push((name, self.flush_ms.to_string(), ConfigSource::StaticBroker))
            }
            BrokerDefault::None => {}
        }
        out.push((name, d.default.to_string(), ConfigSource::Default));
        out
    }
}

/// One broker config as DescribeConfigs reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerConfigEntry {
    pub name: &'static str,
    pub value: String,
    pub ty: ConfigType,
    pub source: ConfigSource,
    /// False for the dynamic broker configs (see [`broker_dynamic_def`]);
    /// the rest come from flags and cannot change at run time.
    pub read_only: bool,
    /// (name, value, source), most specific first.
    pub synonyms: Vec<(String, String, ConfigSource)>,
}

/// The broker settings DescribeConfigs reports for a broker resource.
#[derive(Clone, Debug)]
pub struct BrokerSettings {
    pub node_id: i32,
    pub log_dir: String,
    /// Kafka's `listeners`: `NAME://HOST:PORT,...`.
    pub listener: String,
    /// Kafka's `advertised.listeners`, in the same form.
    pub advertised_listener: String,
    /// Security settings as DescribeConfigs reports them: (name, value,
    /// type, whether the value is the default).
    pub security: Vec<(&'static str, String, ConfigType, bool)>,
    pub auto_create_topics: bool,
    pub default_partitions: i32,
    pub frame_bytes_max: usize,
    pub defaults: BrokerTopicDefaults,
    /// `--retention-check-interval` (Kafka's `log.retention.check.interval.ms`).
    pub retention_check_interval_ms: u64,
    /// `--compaction-interval` (Kafka's `log.cleaner.backoff.ms`).
    pub compaction_interval_ms: u64,
    /// `--group-min-session-timeout-ms`.
    pub group_min_session_timeout_ms: i32,
    /// `--group-max-session-timeout-ms`.
    pub group_max_session_timeout_ms: i32,
    /// `--offsets-topic-num-partitions`.
    pub offsets_topic_partitions: i32,
    /// `--transaction-state-log-num-partitions`.
    pub transaction_state_partitions: i32,
    /// The share groups' broker configs (`group.share.*`).
    pub share: super::ShareBrokerConfig,
}

impl BrokerSettings {
    /// Every broker config we report for this broker (resource
    /// `"<node id>"`), sorted by name.
    pub fn describe(&self) -> Vec<BrokerConfigEntry> {
        use ConfigSource::{Default as D, StaticBroker as S};
        use ConfigType as T;
        // A flag's value: its default's source unless it was changed.
        let flag = |value: i32, default: i32| if value == default { D } else { S };
        let e = |name: &'static str, value: String, ty: ConfigType, source: ConfigSource| {
            BrokerConfigEntry {
                name,
                synonyms: vec![(name.to_string(), value.clone(), source)],
                value,
                ty,
                source,
                read_only: true,
            }
        };
        let mut out = vec![
            e(
                "advertised.listeners",
                self.advertised_listener.clone(),
                T::String,
                S,
            ),
            e(
                "auto.create.topics.enable",
                self.auto_create_topics.to_string(),
                T::Boolean,
                S,
            ),
            e("broker.id", self.node_id.to_string(), T::Int, S),
            e("default.replication.factor", "1".into(), T::Int, D),
            e("delete.topic.enable", "true".into(), T::Boolean, D),
            e(
                "group.max.session.timeout.ms",
                self.group_max_session_timeout_ms.to_string(),
                T::Int,
                S,
            ),
            e(
                "group.min.session.timeout.ms",
                self.group_min_session_timeout_ms.to_string(),
                T::Int,
                S,
            ),
            e("listeners", self.listener.clone(), T::String, S),
            e(
                "log.cleaner.backoff.ms",
                self.compaction_interval_ms.to_string(),
                T::Long,
                S,
            ),
            e("log.dirs", self.log_dir.clone(), T::String, S),
            e(
                "log.retention.check.interval.ms",
                self.retention_check_interval_ms.to_string(),
                T::Long,
                S,
            ),
            e("node.id", self.node_id.to_string(), T::Int, S),
            e(
                "num.partitions",
                self.default_partitions.to_string(),
                T::Int,
                S,
            ),
            // What the `__consumer_offsets` es creates gets.
            e(
                "offsets.topic.num.partitions",
                self.offsets_topic_partitions.to_string(),
                T::Int,
                flag(
                    self.offsets_topic_partitions,
                    OFFSETS_TOPIC_PARTITIONS_DEFAULT,
                ),
            ),
            e("offsets.topic.replication.factor", "1".into(), T::Short, D),
            e(
                "offsets.topic.segment.bytes",
                OFFSETS_TOPIC_SEGMENT_BYTES.to_string(),
                T::Int,
                D,
            ),
            e("process.roles", "broker,controller".into(), T::List, S),
            // What the `__transaction_state` es creates gets.
            e(
                "transaction.state.log.min.isr",
                TRANSACTION_STATE_MIN_ISR.to_string(),
                T::Int,
                D,
            ),
            e(
                "transaction.state.log.num.partitions",
                self.transaction_state_partitions.to_string(),
                T::Int,
                flag(
                    self.transaction_state_partitions,
                    TRANSACTION_STATE_PARTITIONS_DEFAULT,
                ),
            ),
            e(
                "transaction.state.log.replication.factor",
                TRANSACTION_STATE_REPLICATION_FACTOR.to_string(),
                T::Short,
                D,
            ),
            e(
                "transaction.state.log.segment.bytes",
                TRANSACTION_STATE_SEGMENT_BYTES.to_string(),
                T::Int,
                D,
            ),
            e(
                "socket.request.max.bytes",
                self.frame_bytes_max.to_string(),
                T::Int,
                S,
            ),
        ];
        for (name, value, set) in self.share.describe() {
            out.push(e(name, value, T::Int, if set { S } else { D }));
        }
        for (name, value, ty, default) in &self.security {
            let mut entry = e(name, value.clone(), *ty, if *default { D } else { S });
            // The limits that are also dynamic broker configs
            // (`max.connections`, `max.connections.per.ip`): their most
            // specific level first, as for the topic configs below.
            if let Some(d) = super::broker_only::BROKER_ONLY_CONFIGS
                .iter()
                .find(|d| d.name == *name)
            {
                let mut levels: Vec<(String, String, ConfigSource)> = self
                    .defaults
                    .levels(d)
                    .into_iter()
                    .filter(|(_, _, s)| {
                        matches!(
                            s,
                            ConfigSource::DynamicBroker | ConfigSource::DynamicDefaultBroker
                        )
                    })
                    .map(|(n, v, s)| (n.to_string(), v, s))
                    .collect();
                levels.append(&mut entry.synonyms);
                if let Some((_, v, source)) = levels.first().cloned() {
                    entry.value = v;
                    entry.source = source;
                }
                entry.synonyms = levels;
                entry.read_only = false;
            }
            out.push(entry);
        }
        // The broker-level names of the topic configs: dynamic, each at its
        // most specific level.
        let broker_only = super::broker_only::BROKER_ONLY_CONFIGS.iter();
        for d in TOPIC_CONFIGS
            .iter()
            .filter(|d| !d.internal)
            .chain(broker_only)
        {
            let Some(bn) = d.broker_name else { continue };
            if out.iter().any(|x| x.name == bn) {
                continue;
            }
            let synonyms: Vec<(String, String, ConfigSource)> = self
                .defaults
                .levels(d)
                .into_iter()
                .map(|(n, v, s)| (n.to_string(), v, s))
                .collect();
            let Some((_, value, source)) = synonyms.first().cloned() else {
                continue;
            };
            out.push(BrokerConfigEntry {
                name: bn,
                value,
                ty: d.ty,
                source,
                read_only: false,
                synonyms,
            });
        }
        out.sort_by(|a, b| a.name.cmp(b.name));
        out
    }

    /// The cluster-wide dynamic defaults (resource ""), as Kafka lists them:
    /// only the configs set at that level, sorted by name.
    pub fn describe_cluster_default(&self) -> Vec<BrokerConfigEntry> {
        self.defaults
            .dynamic
            .cluster_default
            .iter()
            .filter_map(|(k, v)| {
                let d = broker_dynamic_def(k)?;
                let name = d.broker_name?;
                let source = ConfigSource::DynamicDefaultBroker;
                Some(BrokerConfigEntry {
                    name,
                    value: v.clone(),
                    ty: d.ty,
                    source,
                    read_only: false,
                    synonyms: vec![(name.to_string(), v.clone(), source)],
                })
            })
            .collect()
    }
}
