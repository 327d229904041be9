//! Shared broker state: configuration, cluster identity and the topic registry.
//!
//! One [`Broker`] is shared by every connection. Reads of the registry take a
//! short `parking_lot` read lock and clone an `Arc`; admin operations (create,
//! delete, grow, reconfigure) are serialised by one async mutex and do their
//! disk work on blocking threads, so a slow fsync never stalls the runtime and
//! two admin requests never race on the same directory.
//!
//! The background cleaners (retention and compaction, driven by the binary)
//! come through [`Broker::enforce_retention`] and [`Broker::compact`]: one
//! partition per call, on a blocking thread, with the topic's config read at
//! that moment and no broker-wide lock held.
//!
//! Dynamic broker configs (AlterConfigs on the BROKER resource) live in
//! `data/broker_configs.json`, replaced atomically before they take effect;
//! a change is then applied to every topic's in-memory config (its
//! `topic.json`, which holds only the topic's own overrides, is untouched).

use std::any::{Any, TypeId};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use es_storage::{
    meta, CompactionReport, Fs, RealFs, RetentionReport, SharedClock, Storage, StorageError,
};
use parking_lot::RwLock;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::config::{
    BrokerSettings, BrokerTopicDefaults, ConfigError, DynamicBrokerConfigs, TopicConfig,
    OFFSETS_TOPIC_PARTITIONS_DEFAULT, TRANSACTION_STATE_PARTITIONS_DEFAULT,
};
pub use crate::errors::AdminError;
use crate::errors::{code, ResponseError};
use crate::groups::{Coordinator, GroupConfig};
use crate::partition_log::PartitionLog;
use crate::security::{ListenerSpec, Security, SecurityConfig};
use crate::shares::manager::ShareManager;
use crate::shares::sessions::MAX_SHARE_SESSIONS_DEFAULT;
use crate::topics::{self, PartitionSlot, Topic};
use crate::txn::groups::{GroupsSink, TopicIds};
use crate::txn::markers::{GroupTarget, MarkerBatch, MarkerTarget};
use crate::txn::{Partitions, TopicPartition, TxnConfig, TxnCoordinator};

#[path = "broker_coordinators.rs"]
mod coordinators;
#[path = "broker_group_log.rs"]
mod group_log;
#[path = "broker_placement.rs"]
mod placement;
#[path = "broker_quorum.rs"]
mod quorum;
#[path = "broker_rebalance.rs"]
mod rebalance;
#[path = "broker_replicas.rs"]
mod replicas;
#[path = "broker_routing.rs"]
mod routing;
#[path = "broker_security.rs"]
mod security_state;
#[path = "broker_share_replicas.rs"]
mod share_replicas;
pub use coordinators::NotHere;
#[path = "broker_txn.rs"]
pub mod txn_cluster;
#[path = "broker_txn_failover.rs"]
pub mod txn_failover;
pub use quorum::{new_cluster_id, BrokerFiles};
pub use rebalance::LeaderRebalance;
pub use routing::{inter_broker_addr, key_partition, CoordinatorPlace, Leadership, NodeEndpoint};

/// Kafka's `socket.request.max.bytes` default: the largest frame we read.
pub const FRAME_BYTES_MAX_DEFAULT: usize = 100 * 1024 * 1024;
/// Requests one connection may have in flight (clients pipeline up to 5).
pub const IN_FLIGHT_MAX_DEFAULT: usize = 16;
/// Name of the broker identity file under the data directory.
pub const META_FILE: &str = "meta.json";
/// Name of the dynamic broker configs file under the data directory.
pub const BROKER_CONFIGS_FILE: &str = "broker_configs.json";
/// Kafka's `log.retention.check.interval.ms` default (5 minutes).
pub const RETENTION_CHECK_INTERVAL_DEFAULT: Duration = Duration::from_secs(5 * 60);
/// Kafka's `log.cleaner.backoff.ms` default (15 seconds): how often
/// compaction looks for work.
pub const COMPACTION_INTERVAL_DEFAULT: Duration = Duration::from_secs(15);

/// Everything the binary decides about the broker.
#[derive(Clone, Debug)]
pub struct BrokerConfig {
    pub data_dir: PathBuf,
    pub node_id: i32,
    /// The address the listener binds, for DescribeConfigs.
    pub listen: String,
    /// Host and port clients are told to connect to.
    pub advertised_host: String,
    pub advertised_port: i32,
    pub auto_create_topics: bool,
    pub default_partitions: i32,
    pub flush_every_records: u64,
    pub flush_interval: Duration,
    pub cold_storage_dir: Option<PathBuf>,
    pub frame_bytes_max: usize,
    pub in_flight_max: usize,
    /// How often retention visits every partition.
    pub retention_check_interval: Duration,
    /// How often compaction visits every partition.
    pub compaction_interval: Duration,
    /// Kafka's `group.min.session.timeout.ms`.
    pub group_min_session_timeout_ms: i32,
    /// Kafka's `group.max.session.timeout.ms`.
    pub group_max_session_timeout_ms: i32,
    /// Partitions of the `__consumer_offsets` this broker creates (Kafka's
    /// `offsets.topic.num.partitions`): they place the group coordinators.
    pub offsets_topic_partitions: i32,
    /// Partitions of the `__transaction_state` this broker creates (Kafka's
    /// `transaction.state.log.num.partitions`): they place the transaction
    /// coordinators.
    pub transaction_state_partitions: i32,
    /// Bytes of fetches read and encoded ahead, all partitions together
    /// (`--fetch-read-ahead-mb`; 0: none). See the fetch handler's read-ahead.
    pub fetch_read_ahead_bytes: usize,
    /// Kafka's `replica.lag.time.max.ms`: a follower that has not caught up
    /// with its leader for this long leaves the ISR.
    pub replica_lag_time_max_ms: i64,
    /// Kafka's `default.replication.factor` for topics created with -1;
    /// None: min(3, live brokers).
    pub default_replication_factor: Option<i16>,
    /// The automatic preferred-leader rebalance (Kafka's `auto.leader.*`).
    pub leader_rebalance: LeaderRebalance,
    /// Every listener, the inter-broker one first (empty: one PLAINTEXT
    /// listener at the advertised address).
    pub listeners: Vec<ListenerSpec>,
    /// TLS, SASL and authorization settings.
    pub security: SecurityConfig,
    /// Broker-level topic config defaults given at start (`log.retention.ms`).
    pub static_topic_configs: Arc<BTreeMap<String, String>>,
    /// The share groups' broker configs (`group.share.*`) given at start.
    pub share: crate::config::ShareBrokerConfig,
    /// The file system, sync pool, reclaimer and clock partitions are
    /// opened with (`--sync-mode` chooses the pool's mode).
    pub storage: Storage,
}

/// Default of [`BrokerConfig::replica_lag_time_max_ms`] (Kafka's, 30 s).
pub const REPLICA_LAG_TIME_MAX_MS_DEFAULT: i64 = 30_000;

/// Default of [`BrokerConfig::fetch_read_ahead_bytes`] (64 MiB).
pub const FETCH_READ_AHEAD_BYTES_DEFAULT: usize = 64 * 1024 * 1024;

impl BrokerConfig {
    /// Defaults as the CLI documents them, for `data_dir` and `listen`.
    pub fn new(data_dir: PathBuf, listen: &str) -> Self {
        let (host, port) =
            split_host_port(listen).unwrap_or_else(|| ("127.0.0.1".to_string(), 9092));
        BrokerConfig {
            data_dir,
            node_id: 0,
            listen: listen.to_string(),
            advertised_host: host,
            advertised_port: port,
            auto_create_topics: true,
            default_partitions: 1,
            flush_every_records: 1,
            flush_interval: Duration::from_secs(1),
            cold_storage_dir: None,
            frame_bytes_max: FRAME_BYTES_MAX_DEFAULT,
            in_flight_max: IN_FLIGHT_MAX_DEFAULT,
            retention_check_interval: RETENTION_CHECK_INTERVAL_DEFAULT,
            compaction_interval: COMPACTION_INTERVAL_DEFAULT,
            group_min_session_timeout_ms: GroupConfig::default().min_session_timeout_ms,
            group_max_session_timeout_ms: GroupConfig::default().max_session_timeout_ms,
            offsets_topic_partitions: OFFSETS_TOPIC_PARTITIONS_DEFAULT,
            transaction_state_partitions: TRANSACTION_STATE_PARTITIONS_DEFAULT,
            fetch_read_ahead_bytes: FETCH_READ_AHEAD_BYTES_DEFAULT,
            replica_lag_time_max_ms: REPLICA_LAG_TIME_MAX_MS_DEFAULT,
            default_replication_factor: None,
            leader_rebalance: LeaderRebalance::default(),
            listeners: Vec::new(),
            security: SecurityConfig::default(),
            static_topic_configs: Arc::default(),
            share: crate::config::ShareBrokerConfig::default(),
            storage: Storage::new(Arc::new(RealFs)),
        }
    }

    /// The group coordinator's settings these flags imply.
    pub fn group_config(&self) -> GroupConfig {
        GroupConfig {
            min_session_timeout_ms: self.group_min_session_timeout_ms,
            max_session_timeout_ms: self.group_max_session_timeout_ms,
            share: crate::groups::share::ShareGroupConfig::from_broker(&self.share),
            ..GroupConfig::default()
        }
    }

    /// The topic defaults the flags imply, without dynamic broker configs
    /// (see [`Broker::topic_defaults`]).
    pub fn topic_defaults(&self) -> BrokerTopicDefaults {
        BrokerTopicDefaults {
            flush_messages: self.flush_every_records.max(1),
            flush_ms: self.flush_interval.as_millis().min(u64::MAX as u128) as u64,
            dynamic: Arc::default(),
            static_configs: self.static_topic_configs.clone(),
        }
    }
}

/// A duration in whole milliseconds, saturating.
fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Splits `host:port` (`[v6]:port` too).
pub fn split_host_port(s: &str) -> Option<(String, i32)> {
    let (h, p) = s.rsplit_once(':')?;
    let port: u16 = p.parse().ok()?;
    let host = h.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return None;
    }
    Some((host.to_string(), i32::from(port)))
}

/// `data/meta.json`: the broker's stable identity.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct BrokerMeta {
    pub(crate) cluster_id: String,
    pub(crate) node_id: i32,
}

/// Reads `broker_configs.json` (absent: none), dropping with a warning any
/// entry that is not a valid dynamic broker config, as Kafka ignores invalid
/// persisted dynamic configs rather than refusing to start.
fn load_dynamic_configs(
    fs: &dyn Fs,
    data_dir: &Path,
) -> Result<DynamicBrokerConfigs, StorageError> {
    let path = data_dir.join(BROKER_CONFIGS_FILE);
    let Some(read) = meta::read_json::<DynamicBrokerConfigs>(fs, &path)? else {
        return Ok(DynamicBrokerConfigs::default());
    };
    let (configs, dropped) = read.sanitized();
    if !dropped.is_empty() {
        tracing::warn!(file = %path.display(), ?dropped, "ignoring invalid dynamic broker configs");
    }
    Ok(configs)
}

/// The shared state of a running broker.
#[derive(Debug)]
pub struct Broker {
    config: BrokerConfig,
    /// From `meta.json`; a node that joins a cluster takes the quorum's.
    cluster_id: RwLock<String>,
    fs: Arc<dyn Fs>,
    storage: Storage,
    topics_dir: PathBuf,
    topics: RwLock<BTreeMap<String, Arc<Topic>>>,
    /// This broker's node of the metadata quorum, once started
    /// ([`Broker::start_metadata`]); admin changes go through it.
    meta: OnceLock<Arc<es_meta::node::MetaNode>>,
    /// The group coordinator: consumer groups and their committed offsets.
    groups: Arc<Coordinator>,
    /// Share groups' share-partitions (KIP-932) and share sessions.
    shares: Arc<ShareManager>,
    /// Flips to true when shutdown begins: parked fetches answer at once.
    stopping: tokio::sync::watch::Sender<bool>,
    /// The transaction coordinator: producer ids, transactions, the producers journal.
    txn: Arc<TxnCoordinator>,
    /// Dynamic broker configs, as `broker_configs.json` holds them. Replaced
    /// (under `admin`) only after the file is.
    dynamic: RwLock<Arc<DynamicBrokerConfigs>>,
    /// State the request layer keeps per broker ([`Broker::extension`]).
    extensions: Extensions,
    /// Listeners' security, credentials, the authorizer.
    security: Arc<Security>,
}

/// Values the layers above the broker keep per broker, one per type (the
/// fetch read-ahead cache): made on first use, dropped with the broker. The
/// broker never looks inside, so the request layer owns its state without
/// the broker depending on it.
#[derive(Default)]
struct Extensions(parking_lot::Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>);

impl std::fmt::Debug for Extensions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extensions")
            .field("values", &self.0.lock().len())
            .finish()
    }
}

impl Broker {
    /// Opens the data directory: identity, then every topic (running each
    /// partition's recovery), then the coordinators (finishing transactions a
    /// crash left decided). Blocking; it starts no task: the [`Timers`] it
    /// returns are the coordinators' timeouts, for the caller to run.
    pub fn open(config: BrokerConfig) -> Result<(Arc<Broker>, Timers), StorageError> {
        let storage = config.storage.clone();
        let fs = storage.fs.clone();
        fs.create_dir_all(&config.data_dir)?;
        meta::remove_temp_files(fs.as_ref(), &config.data_dir)?;
        let meta_path = config.data_dir.join(META_FILE);
        let identity = match meta::read_json::<BrokerMeta>(fs.as_ref(), &meta_path)? {
            Some(m) => m,
            None => {
                let m = BrokerMeta {
                    cluster_id: new_cluster_id(),
                    node_id: config.node_id,
                };
                meta::write_json(fs.as_ref(), &meta_path, &m)?;
                tracing::info!(cluster_id = %m.cluster_id, "created new cluster identity");
                m
            }
        };
        if identity.node_id != config.node_id {
            return Err(StorageError::Metadata {
                file: meta_path.display().to_string(),
                why: format!(
                    "data belongs to node {} but this is node {}",
                    identity.node_id, config.node_id
                ),
            });
        }
        let dynamic = Arc::new(load_dynamic_configs(fs.as_ref(), &config.data_dir)?);
        let defaults = BrokerTopicDefaults {
            dynamic: dynamic.clone(),
            ..config.topic_defaults()
        };
        let topics_dir = config.data_dir.join("topics");
        let loaded = topics::load_topics(&storage, &topics_dir, defaults)?;
        let topics = loaded
            .into_iter()
            .map(|t| (t.name.clone(), Arc::new(t)))
            .collect();
        let groups = Coordinator::open(
            fs.clone(),
            &config.data_dir,
            config.group_config(),
            config.storage.clock.clone(),
        )?;
        let shares = Arc::new(ShareManager::new(
            fs.clone(),
            config.data_dir.clone(),
            config.storage.clock.clone(),
            usize::try_from(config.share.get("group.share.max.share.sessions"))
                .unwrap_or(MAX_SHARE_SESSIONS_DEFAULT),
        ));
        let txn = TxnCoordinator::open(
            fs.clone(),
            &config.data_dir,
            TxnConfig::default(),
            config.storage.clock.clone(),
        )?;
        let security =
            Security::open(config.security.clone(), &config.data_dir).map_err(|why| {
                StorageError::Metadata {
                    file: config.data_dir.display().to_string(),
                    why,
                }
            })?;
        let broker = Arc::new(Broker {
            security: Arc::new(security),
            cluster_id: RwLock::new(identity.cluster_id),
            fs,
            storage,
            topics_dir,
            topics: RwLock::new(topics),
            meta: OnceLock::new(),
            groups,
            shares,
            stopping: tokio::sync::watch::Sender::new(false),
            txn: Arc::new(txn),
            dynamic: RwLock::new(dynamic),
            extensions: Extensions::default(),
            config,
        });
        broker
            .shares
            .set_replication(Arc::new(share_replicas::BrokerShares(Arc::downgrade(
                &broker,
            ))));
        // Finish transactions a crash left decided.
        start_coordinators(&broker);
        let timers = Timers {
            broker: Arc::downgrade(&broker),
            groups: broker.groups.clone(),
            shares: broker.shares.clone(),
        };
        Ok((broker, timers))
    }

    /// [`Broker::open`] on a blocking thread, with its timers started on
    /// the current tokio runtime ([`Timers::spawn`]) and its metadata quorum
    /// the embedded one-voter default: for tests and tools.
    pub async fn open_running(config: BrokerConfig) -> Result<Arc<Broker>, StorageError> {
        let (broker, timers) = tokio::task::spawn_blocking(move || Broker::open(config))
            .await
            .map_err(|e| StorageError::Metadata {
                file: "data directory".into(),
                why: e.to_string(),
            })??;
        timers.spawn();
        broker
            .start_metadata(broker.single_node_metadata())
            .await
            .map_err(|e| StorageError::Metadata {
                file: "data/meta".into(),
                why: e.to_string(),
            })?;
        Ok(broker)
    }

    /// The metadata options of the embedded default: a one-voter quorum of
    /// this node, in `data/meta`, with no Raft listener.
    pub fn single_node_metadata(&self) -> es_meta::node::MetaOptions {
        es_meta::node::MetaOptions::new(
            u64::try_from(self.config.node_id).unwrap_or(0),
            self.config.data_dir.join("meta"),
            self.fs.clone(),
        )
    }

    /// Starts shutdown: long-polling fetches stop waiting and answer.
    pub fn begin_shutdown(&self) {
        self.stopping.send_replace(true);
        // Parked JoinGroup/SyncGroup calls answer NOT_COORDINATOR now rather
        // than holding the drain; acknowledged offsets are already on disk.
        self.groups.shutdown();
        // The share lock timer ends; a lock due meanwhile is released by
        // the restart (acquired records come back available).
        self.shares.shutdown();
    }

    /// Resolves once shutdown has begun.
    pub async fn stopping(&self) {
        let mut rx = self.stopping.subscribe();
        // An Err means the sender is gone, which also means we are stopping.
        let _ = rx.wait_for(|s| *s).await;
    }

    pub fn config(&self) -> &BrokerConfig {
        &self.config
    }

    /// The broker's clock (its storage's, [`Storage::clock`]).
    pub fn clock(&self) -> &SharedClock {
        &self.config.storage.clock
    }

    pub fn node_id(&self) -> i32 {
        self.config.node_id
    }

    pub fn cluster_id(&self) -> String {
        self.cluster_id.read().clone()
    }

    /// The transaction coordinator.
    pub fn txn(&self) -> &Arc<TxnCoordinator> {
        &self.txn
    }

    /// The group coordinator.
    pub fn groups(&self) -> &Arc<Coordinator> {
        &self.groups
    }

    /// The share-partitions of share groups and the share sessions.
    pub fn shares(&self) -> &Arc<ShareManager> {
        &self.shares
    }

    /// The broker's value of type `T`, made with `init` on first use.
    pub fn extension<T: Any + Send + Sync>(&self, init: impl FnOnce() -> T) -> Arc<T> {
        let mut values = self.extensions.0.lock();
        let value = values
            .entry(TypeId::of::<T>())
            .or_insert_with(|| Arc::new(init()))
            .clone();
        drop(values);
        match value.downcast::<T>() {
            Ok(v) => v,
            // The map is keyed by the type's id, so the value is a T.
            Err(_) => unreachable!("extension stored under another type's id"),
        }
    }

    pub fn data_dir(&self) -> &Path {
        &self.config.data_dir
    }

    pub fn settings(&self) -> BrokerSettings {
        BrokerSettings {
            node_id: self.config.node_id,
            log_dir: self.config.data_dir.display().to_string(),
            listener: self.listeners_setting(),
            advertised_listener: self.advertised_listeners_setting(),
            security: self.security_settings(),
            auto_create_topics: self.config.auto_create_topics,
            default_partitions: self.config.default_partitions,
            frame_bytes_max: self.config.frame_bytes_max,
            defaults: self.topic_defaults(),
            retention_check_interval_ms: duration_ms(self.config.retention_check_interval),
            compaction_interval_ms: duration_ms(self.config.compaction_interval),
            group_min_session_timeout_ms: self.config.group_min_session_timeout_ms,
            group_max_session_timeout_ms: self.config.group_max_session_timeout_ms,
            offsets_topic_partitions: self.config.offsets_topic_partitions,
            transaction_state_partitions: self.config.transaction_state_partitions,
            share: self.config.share.clone(),
        }
    }

    pub fn topic(&self, name: &str) -> Option<Arc<Topic>> {
        self.topics.read().get(name).cloned()
    }

    pub fn topic_by_id(&self, id: Uuid) -> Option<Arc<Topic>> {
        self.topics.read().values().find(|t| t.id == id).cloned()
    }

    /// Every topic, sorted by name.
    pub fn topics(&self) -> Vec<Arc<Topic>> {
        self.topics.read().values().cloned().collect()
    }

    /// What topics inherit: the flags and the dynamic broker configs.
    pub fn topic_defaults(&self) -> BrokerTopicDefaults {
        BrokerTopicDefaults {
            dynamic: self.dynamic.read().clone(),
            ..self.config.topic_defaults()
        }
    }

    /// The dynamic broker configs in force.
    pub fn dynamic_configs(&self) -> Arc<DynamicBrokerConfigs> {
        self.dynamic.read().clone()
    }

    /// Validates a topic config map against the broker defaults.
    pub fn topic_config(
        &self,
        overrides: BTreeMap<String, String>,
    ) -> Result<TopicConfig, ConfigError> {
        TopicConfig::new(overrides, self.topic_defaults())
    }

    /// Returns `__consumer_offsets`, creating it first if it does not exist,
    /// as Kafka creates it when a client first looks up a group coordinator
    /// (whatever `--auto-create-topics` says): `--offsets-topic-num-partitions`
    /// partitions with Kafka's configs for it. Concurrent callers get the
    /// same topic (creation is serialised under the admin lock).
    pub async fn offsets_topic(&self) -> Result<Arc<Topic>, AdminError> {
        self.get_or_create_with(
            topics::CONSUMER_OFFSETS_TOPIC,
            self.config.offsets_topic_partitions,
            topics::offsets_topic_overrides(),
        )
        .await
    }

    /// Returns the topic, creating it with the defaults when auto-creation is
    /// on and `allowed` (Metadata's `allow_auto_topic_creation`).
    /// `__consumer_offsets` is created as [`Broker::offsets_topic`] creates it,
    /// as Kafka's auto-creation gives it the group coordinator's settings,
    /// and `__transaction_state` as [`Broker::transaction_state_topic`] does.
    pub async fn get_or_create(&self, name: &str, allowed: bool) -> Result<Arc<Topic>, AdminError> {
        if let Some(t) = self.topic(name) {
            return Ok(t);
        }
        if !(allowed && self.config.auto_create_topics) {
            return Err(AdminError::new(
                ResponseError::UnknownTopicOrPartition,
                format!("unknown topic {name}"),
            ));
        }
        if name == topics::CONSUMER_OFFSETS_TOPIC {
            return self.offsets_topic().await;
        }
        if name == topics::TRANSACTION_STATE_TOPIC {
            return self.transaction_state_topic().await;
        }
        self.get_or_create_with(name, -1, BTreeMap::new()).await
    }

    /// Returns the topic, creating it with these settings if it does not
    /// exist, internal topics with [`Broker::internal_replication_factor`].
    async fn get_or_create_with(
        &self,
        name: &str,
        partitions: i32,
        overrides: BTreeMap<String, String>,
    ) -> Result<Arc<Topic>, AdminError> {
        if let Some(t) = self.topic(name) {
            return Ok(t);
        }
        let rf = self.internal_replication_factor(name);
        match self
            .create_topic_assigned(name, partitions, rf, Vec::new(), overrides, false)
            .await
        {
            Ok(Some(t)) => Ok(t),
            Ok(None) => Err(AdminError::new(
                ResponseError::UnknownServerError,
                "topic not created",
            )),
            Err(e) if e.code == code(ResponseError::TopicAlreadyExists) => {
                self.topic(name).ok_or(e)
            }
            Err(e) => Err(e),
        }
    }

    /// Runs every partition's time-based flush. Blocking; the binary calls it
    /// every flush interval.
    pub fn flush_due(&self) {
        for t in self.topics() {
            for p in t.partitions() {
                if let Err(e) = p.log.storage().flush_if_due() {
                    tracing::error!(topic = %t.name, partition = p.index, error = %e, "periodic flush failed");
                }
            }
        }
    }

    /// Every open partition with its topic: what one cleaner pass visits.
    /// A snapshot; the registry lock is not held while it is used.
    pub fn partitions_snapshot(&self) -> Vec<(Arc<Topic>, Arc<PartitionSlot>)> {
        self.topics()
            .into_iter()
            .flat_map(|t| {
                t.partitions()
                    .into_iter()
                    .map(move |p| (t.clone(), p))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// One retention pass over one partition, with its topic's config as it
    /// is now. `Ok(None)` when the topic's `cleanup.policy` has no `delete`
    /// or the topic was deleted. Blocking.
    pub fn enforce_retention(
        &self,
        topic: &Topic,
        slot: &PartitionSlot,
        now_ms: i64,
    ) -> Result<Option<RetentionReport>, StorageError> {
        let cold = self.config.cold_storage_dir.as_deref();
        topic
            .while_not_deleted(|| {
                let Some(policy) =
                    topics::retention_policy(&topic.config(), cold, &topic.name, slot.index)
                else {
                    return Ok(None);
                };
                slot.log
                    .storage()
                    .enforce_retention(&policy, now_ms)
                    .map(Some)
            })
            .unwrap_or(Ok(None))
    }

    /// One compaction pass over one partition, below its last stable offset,
    /// with its topic's config as it is now. `Ok(None)` when the topic's
    /// `cleanup.policy` has no `compact` or the topic was deleted. Blocking.
    pub fn compact(
        &self,
        topic: &Topic,
        slot: &PartitionSlot,
        now_ms: i64,
    ) -> Result<Option<CompactionReport>, StorageError> {
        self.compact_reporting(topic, slot, now_ms, &mut |_| {})
    }

    /// [`Broker::compact`], telling `progress` where its scans are
    /// (es-storage's `Partition::compact_reporting`). Blocking.
    pub fn compact_reporting(
        &self,
        topic: &Topic,
        slot: &PartitionSlot,
        now_ms: i64,
        progress: &mut dyn FnMut(es_storage::CompactionProgress),
    ) -> Result<Option<CompactionReport>, StorageError> {
        topic
            .while_not_deleted(|| {
                let stable = slot.log.last_stable_offset();
                let Some(policy) = topics::compaction_policy(&topic.config(), stable) else {
                    return Ok(None);
                };
                slot.log
                    .storage()
                    .compact_reporting(&policy, now_ms, progress)
                    .map(Some)
            })
            .unwrap_or(Ok(None))
    }

    /// Syncs and closes every partition. Blocking.
    pub fn close(&self) -> Result<(), StorageError> {
        // Parked group requests answer NOT_COORDINATOR; acknowledged offsets
        // are already on disk.
        self.groups.shutdown();
        let mut first = None;
        for t in self.topics() {
            if let Err(e) = t.close() {
                first.get_or_insert(e);
            }
        }
        // Fold every loaded share-partition's journal into its snapshot.
        if let Err(e) = self.shares.close() {
            first.get_or_insert(e);
        }
        // Fold the producers journal into producers.json.
        if let Err(e) = self.txn.close() {
            tracing::error!(error = %e, "folding the producers journal failed");
            first.get_or_insert(e);
        }
        first.map_or(Ok(()), Err)
    }
}

/// The transaction coordinator finds partitions in the topic registry.
impl Partitions for Broker {
    fn partition(&self, topic: &str, partition: i32) -> Option<PartitionLog> {
        self.topic(topic)
            .and_then(|t| t.partition(partition))
            .map(|s| s.log.clone())
    }

    fn min_insync_replicas(&self, topic: &str) -> usize {
        self.topic(topic)
            .map_or(1, |t| t.rules().min_insync_replicas)
    }

    fn for_each_partition(&self, f: &mut dyn FnMut(&PartitionLog)) {
        for t in self.topics() {
            for s in t.partitions() {
                f(&s.log);
            }
        }
    }

    fn marker_target(&self, topic: &str, partition: i32) -> MarkerTarget {
        self.txn_marker_target(topic, partition)
    }

    fn group_target(&self, group: &str) -> GroupTarget {
        self.txn_group_target(group)
    }

    fn send_markers(
        &self,
        broker: i32,
        batch: &MarkerBatch,
    ) -> Result<Vec<TopicPartition>, String> {
        self.txn_send_markers(broker, batch)
    }
}

/// Committed transactional offsets carry their topic's id.
impl TopicIds for Broker {
    fn topic_id(&self, name: &str) -> Option<Uuid> {
        self.topic(name).map(|t| t.id)
    }
}

/// Called once the broker is open: registers the group coordinator as the
/// receiver of transactional offsets and completes transactions a crash left
/// in a Prepare state. Blocking; starts nothing.
fn start_coordinators(broker: &Arc<Broker>) {
    let topics: Weak<dyn TopicIds> = Arc::downgrade(broker) as Weak<dyn TopicIds>;
    broker
        .txn()
        .set_offset_sink(Arc::new(GroupsSink::new(broker.groups().clone(), topics)));
    broker.txn().recover(broker.as_ref());
}

/// What an open broker needs driven besides its requests: the group
/// coordinator's timers (session, rebalance and join timeouts), the
/// transaction coordinator's (transaction timeouts, producer-id
/// expiration) and the share-partitions' (acquisition-lock expiry, unloading
/// idle share-partitions). [`Broker::open`] starts nothing; the binary runs these next
/// to its other background tasks, and a test or tool that opens a broker
/// directly calls [`Timers::spawn`] (or [`Broker::open_running`]).
#[derive(Debug)]
#[must_use = "no coordinator timeout fires unless the timers run"]
pub struct Timers {
    broker: Weak<Broker>,
    groups: Arc<Coordinator>,
    shares: Arc<ShareManager>,
}

impl Timers {
    /// Runs the group coordinator's timers until it shuts down
    /// ([`Broker::begin_shutdown`]).
    pub async fn run_groups(&self) {
        self.groups.clone().run_timers().await;
    }

    /// Runs the share-partitions' lock timer until shutdown begins
    /// ([`Broker::begin_shutdown`]).
    pub async fn run_shares(&self) {
        self.shares.clone().run_lock_timer().await;
    }

    /// How often [`Timers::tick_txn`] is due
    /// ([`TxnConfig::abort_check_interval_ms`]).
    pub fn txn_interval(&self) -> Duration {
        let ms = self
            .broker
            .upgrade()
            .map_or(1, |b| b.txn().config().abort_check_interval_ms);
        Duration::from_millis(ms.max(1))
    }

    /// One pass of the transaction coordinator's timer: aborts timed-out
    /// transactions, expires idle producer ids. Blocking. False once the
    /// broker is gone.
    pub fn tick_txn(&self) -> bool {
        let Some(b) = self.broker.upgrade() else {
            return false;
        };
        b.txn_failover_tick();
        b.txn().tick(b.as_ref());
        true
    }

    /// Runs [`Timers::tick_txn`] every [`Timers::txn_interval`] (on blocking
    /// threads) until the broker is dropped.
    pub async fn run_txn(self: Arc<Self>) {
        let mut tick = tokio::time::interval(self.txn_interval());
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The first tick fires at once; recovery already ran.
        tick.tick().await;
        loop {
            tick.tick().await;
            let me = self.clone();
            match tokio::task::spawn_blocking(move || me.tick_txn()).await {
                Ok(true) => {}
                Ok(false) => return,
                Err(e) => tracing::error!(error = %e, "transaction coordinator tick failed"),
            }
        }
    }

    /// Starts both timers on the current tokio runtime, for as long as the
    /// broker lives: for tests and tools that open a broker directly (the
    /// binary drives them with its other background tasks). Outside a
    /// runtime it starts nothing.
    pub fn spawn(self) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let me = Arc::new(self);
        let groups = me.clone();
        rt.spawn(async move { groups.run_groups().await });
        let shares = me.clone();
        rt.spawn(async move { shares.run_shares().await });
        rt.spawn(me.run_txn());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_ids_look_like_kafkas() {
        let a = new_cluster_id();
        assert_eq!(a.len(), 22);
        assert!(a
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'));
        assert_ne!(a, new_cluster_id());
    }

    #[tokio::test]
    async fn dynamic_broker_configs_reach_every_partition_and_new_topics() {
        let dir = tempfile::tempdir().expect("tmp");
        let b = Broker::open_running(BrokerConfig::new(dir.path().join("data"), "127.0.0.1:0"))
            .await
            .expect("open");
        b.create_topic("old", 2, BTreeMap::new(), false)
            .await
            .expect("create");
        let own = BTreeMap::from([("flush.messages".to_string(), "7".to_string())]);
        b.create_topic("own", 1, own, false).await.expect("create");
        b.update_dynamic_configs(false, |d| {
            d.broker
                .insert("log.flush.interval.messages".into(), "1234".into());
            d.cluster_default
                .insert("log.retention.bytes".into(), "4096".into());
            Ok(())
        })
        .await
        .expect("update");
        b.create_topic("new", 1, BTreeMap::new(), false)
            .await
            .expect("create");
        for name in ["old", "new"] {
            let t = b.topic(name).expect("topic");
            assert_eq!(t.config().flush_messages(), 1234, "{name}");
            assert_eq!(t.config().retention_bytes(), Some(4096), "{name}");
            for p in t.partitions() {
                assert_eq!(p.log.storage().config().flush.every_records, 1234, "{name}");
            }
        }
        // A topic's own override still wins.
        let own = b.topic("own").expect("topic");
        assert_eq!(own.config().flush_messages(), 7);
        // validate_only and refused changes leave everything as it was.
        b.update_dynamic_configs(true, |d| {
            d.broker.clear();
            Ok(())
        })
        .await
        .expect("validate");
        let refused = b
            .update_dynamic_configs(false, |d| {
                d.broker.clear();
                Err(AdminError::new(ResponseError::InvalidRequest, "no"))
            })
            .await;
        assert!(refused.is_err());
        assert_eq!(b.topic("old").expect("old").config().flush_messages(), 1234);
        // Written through: a reopened broker loads the same configs.
        b.stop_metadata().await;
        b.close().expect("close");
        let dynamic = b.dynamic_configs();
        drop(b);
        let b = Broker::open_running(BrokerConfig::new(dir.path().join("data"), "127.0.0.1:0"))
            .await
            .expect("reopen");
        assert_eq!(b.dynamic_configs(), dynamic);
        assert_eq!(b.topic("old").expect("old").config().flush_messages(), 1234);
        b.close().expect("close");
    }

    #[tokio::test]
    async fn invalid_persisted_dynamic_configs_are_dropped() {
        let dir = tempfile::tempdir().expect("tmp");
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).expect("mkdir");
        std::fs::write(
            data.join(BROKER_CONFIGS_FILE),
            r#"{"broker": {"log.retention.ms": "5", "broker.id": "3", "log.flush.interval.ms": "x"}}"#,
        )
        .expect("write");
        let b = Broker::open_running(BrokerConfig::new(data, "127.0.0.1:0"))
            .await
            .expect("open");
        let d = b.dynamic_configs();
        assert_eq!(
            d.broker,
            BTreeMap::from([("log.retention.ms".to_string(), "5".to_string())])
        );
        // The cluster level holds what Kafka's controller puts there.
        assert_eq!(
            d.cluster_default,
            BTreeMap::from([("min.insync.replicas".to_string(), "1".to_string())])
        );
        b.close().expect("close");
    }

    /// The coordinators read the broker's clock, and their timeouts fire
    /// only when the timers the broker hands over are driven: a transaction
    /// past its timeout by the clock is aborted by the next tick, not before.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn transaction_timeouts_follow_the_clock_and_the_timers() {
        use crate::txn::{TopicPartition, TxnState};
        let dir = tempfile::tempdir().expect("tmp");
        let clock = es_storage::ManualClock::new(1_700_000_000_000);
        let mut cfg = BrokerConfig::new(dir.path().join("data"), "127.0.0.1:0");
        cfg.storage.clock = clock.clone();
        let (b, timers) = tokio::task::spawn_blocking(move || Broker::open(cfg))
            .await
            .expect("join")
            .expect("open");
        b.start_metadata(b.single_node_metadata())
            .await
            .expect("metadata");
        b.create_topic("t", 1, BTreeMap::new(), false)
            .await
            .expect("create");
        let txn = b.txn().clone();
        let pe = txn
            .init_producer_id(b.as_ref(), Some("x"), 1_000, None)
            .expect("init");
        txn.add_partitions("x", pe.0, pe.1, &[TopicPartition::new("t", 0)], &[])
            .expect("add");
        let started = txn.describe("x").expect("x");
        assert_eq!(started.state, TxnState::Ongoing);
        assert_eq!(started.start_ms, 1_700_000_000_000, "the broker's clock");
        // Nothing runs the timers yet; time passes only by hand.
        clock.advance(Duration::from_millis(500));
        let timers = Arc::new(timers);
        let t = timers.clone();
        assert!(tokio::task::spawn_blocking(move || t.tick_txn())
            .await
            .expect("join"));
        assert_eq!(txn.describe("x").map(|r| r.state), Ok(TxnState::Ongoing));
        clock.advance(Duration::from_millis(1_000));
        let t = timers.clone();
        assert!(tokio::task::spawn_blocking(move || t.tick_txn())
            .await
            .expect("join"));
        assert_eq!(
            txn.describe("x").map(|r| r.state),
            Ok(TxnState::CompleteAbort)
        );
        b.close().expect("close");
        drop(b);
        drop(txn);
        assert!(!timers.tick_txn(), "the broker is gone");
    }

    #[test]
    fn host_port() {
        assert_eq!(
            split_host_port("127.0.0.1:9092"),
            Some(("127.0.0.1".into(), 9092))
        );
        assert_eq!(split_host_port("[::1]:1"), Some(("::1".into(), 1)));
        assert_eq!(split_host_port("nohost"), None);
        assert_eq!(split_host_port(":5"), None);
    }
}
