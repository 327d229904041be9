//! The broker's side of the metadata quorum (es-meta).
//!
//! Every admin change (create and delete topics, add partitions, topic and
//! broker configs) is validated here, proposed as one entry to the
//! controller quorum, and answered once the entry is committed and applied.
//! Applying an entry, on every node, calls [`BrokerFiles`], which makes the
//! topic directories, `topic.json` and `broker_configs.json` agree with the
//! applied metadata and updates the in-memory registry; it is idempotent,
//! because entries after the last snapshot are applied again at restart.
//!
//! A data directory written by a single-node es before the quorum existed
//! opens unchanged: at the first start with an empty `data/meta/`, its
//! topics (ids, partition counts, configs) and dynamic broker configs are
//! imported into the metadata log in one entry each.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock, Weak};

use es_meta::image::{collision_key, MetaEvent};
use es_meta::node::{MetaError, MetaNode, MetaOptions};
use es_meta::records::{
    code as meta_code, ConfigAlteration, ConfigResource, Endpoint, MetaRequest, MetaResponse,
    NewPartitions, NewTopic, RegisterBroker,
};
use es_meta::{Materializer, MetaImage};
use es_storage::{meta, StorageError};
use uuid::Uuid;

use super::rebalance::PeriodicElection;
use super::{AdminError, Broker, BROKER_CONFIGS_FILE};
use crate::config::{DynamicBrokerConfigs, GroupOverrides};
use crate::errors::ResponseError;
use crate::topics::{self, Topic, PARTITIONS_MAX};

/// How long a starting broker waits to see itself unfenced. The unfencing
/// is applied after the log before it, and applying a large image (10,000
/// partitions, each opened as its leadership is applied) took over 30 s on a
/// loaded 2-core machine; Kafka's broker waits for unfencing without a
/// deadline, es gives up after this and says so.
const UNFENCE_WAIT: std::time::Duration = std::time::Duration::from_secs(600);

/// Writes what applied metadata entries change into this broker's data
/// directory and registry.
#[derive(Debug, Default)]
pub struct BrokerFiles {
    broker: OnceLock<Weak<Broker>>,
}

impl Materializer for BrokerFiles {
    fn materialize(&self, image: &MetaImage, events: &[MetaEvent]) -> std::io::Result<()> {
        let Some(b) = self.broker.get().and_then(Weak::upgrade) else {
            return Ok(());
        };
        for e in events {
            b.materialize(image, e)
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            b.reconcile_event(image, e);
        }
        Ok(())
    }
}

/// A metadata answer other than the one expected: the entry's refusal, or
/// (a bug) some other kind of answer.
fn refused(answer: MetaResponse) -> AdminError {
    match answer {
        MetaResponse::Error {
            error_code,
            message,
        } => AdminError {
            code: error_code,
            message,
        },
        other => AdminError::new(
            ResponseError::UnknownServerError,
            format!("unexpected metadata answer {other:?}"),
        ),
    }
}

fn meta_error(e: MetaError) -> AdminError {
    match e {
        MetaError::NoLeader(_) | MetaError::Uncertain(_) => {
            AdminError::new(ResponseError::RequestTimedOut, e.to_string())
        }
        e => AdminError::new(ResponseError::UnknownServerError, e.to_string()),
    }
}

/// An applied request's answer as an admin result: its first failed item
/// (or the whole request's failure), else success.
fn answer(resp: MetaResponse) -> Result<(), AdminError> {
    let failed = match resp {
        MetaResponse::Items { results } => results
            .into_iter()
            .find(|r| r.error_code != meta_code::NONE)
            .map(|r| (r.error_code, r.message.unwrap_or_default())),
        MetaResponse::Error {
            error_code,
            message,
        } => Some((error_code, message)),
        MetaResponse::AlterPartition { results } => results
            .into_iter()
            .find(|r| r.error_code != meta_code::NONE)
            .map(|r| (r.error_code, r.message.unwrap_or_default())),
        MetaResponse::Partitions { results } => results
            .into_iter()
            .find(|r| r.error_code != meta_code::NONE)
            .map(|r| (r.error_code, r.message.unwrap_or_default())),
        _ => None,
    };
    match failed {
        Some((code, message)) if code != meta_code::NONE => Err(AdminError { code, message }),
        _ => Ok(()),
    }
}

impl Broker {
    /// Starts this broker's node of the metadata quorum, registers the
    /// broker, and imports a pre-quorum data directory on first start.
    /// Returns once the broker is registered and unfenced.
    pub async fn start_metadata(self: &Arc<Self>, opts: MetaOptions) -> Result<(), MetaError> {
        // Fetch loops start as the log is applied, replay included.
        self.fetchers()
            .set_runtime(tokio::runtime::Handle::current());
        let files = Arc::new(BrokerFiles::default());
        let _ = files.broker.set(Arc::downgrade(self));
        let node = MetaNode::start(opts, files).await?;
        let fresh = node.was_fresh();
        if self.meta.set(node.clone()).is_err() {
            return Err(MetaError::Config("metadata already started".into()));
        }
        if node.image().cluster_id.is_none() {
            // The first node to get here names the cluster; the others'
            // proposals are refused. Either way this node's own image has
            // the cluster's id once the entry is applied here.
            let req = MetaRequest::InitCluster {
                cluster_id: self.cluster_id(),
            };
            let (index, _) = node.write(req).await?;
            node.wait_applied(index).await?;
        }
        self.adopt_cluster_id(&node).await?;
        let registration = RegisterBroker {
            broker_id: self.node_id(),
            incarnation_id: Uuid::new_v4().to_string(),
            cluster_id: node.image().cluster_id.clone().unwrap_or_default(),
            endpoints: self
                .listener_specs()
                .into_iter()
                .map(|l| Endpoint {
                    name: l.name,
                    host: l.advertised_host,
                    port: u16::try_from(l.advertised_port).unwrap_or(0),
                    security_protocol: l.protocol.name().into(),
                })
                .collect(),
            rack: None,
        };
        let epoch = es_meta::session::register_broker(
            node.clone(),
            registration,
            self.stopping.subscribe(),
        )
        .await?;
        node.wait_unfenced(self.node_id(), epoch, UNFENCE_WAIT)
            .await?;
        // From now on producer ids come from the quorum: no two brokers
        // hand out the same one.
        self.txn()
            .set_pid_blocks(Arc::new(super::txn_cluster::QuorumPids::new(
                self,
                tokio::runtime::Handle::current(),
            )));
        if fresh {
            self.import(&node).await?;
        }
        self.follow_group_leadership().await;
        self.txn_failover_start().await?;
        let me = self.clone();
        tokio::task::spawn_blocking(move || {
            me.host_placed()?;
            me.sweep_placement()?;
            if let Some(image) = me.image() {
                me.reconcile_all(&image);
                me.security().apply_metadata(&image);
                me.apply_api_keys(&image);
                me.groups.set_all_group_overrides(
                    image
                        .group_configs
                        .iter()
                        .map(|(g, c)| (g.clone(), GroupOverrides::from_configs(c)))
                        .collect(),
                );
            }
            Ok::<(), StorageError>(())
        })
        .await
        .map_err(|e| MetaError::Fatal(e.to_string()))?
        .map_err(|e| MetaError::Io(std::io::Error::other(e.to_string())))?;
        tokio::spawn(Broker::isr_shrink_task(Arc::downgrade(self)));
        for kind in [PeriodicElection::Preferred, PeriodicElection::Unclean] {
            tokio::spawn(Broker::periodic_election_task(Arc::downgrade(self), kind));
        }
        Ok(())
    }

    /// Opens every partition the applied metadata places here that is not
    /// open yet (its directory was missing at load). Blocking.
    fn host_placed(&self) -> Result<(), StorageError> {
        let Some(image) = self.image() else {
            return Ok(());
        };
        for t in self.topics() {
            let hosted = |p: i32| self.hosts(Some(&image), &t.name, p);
            t.host(&self.storage, &hosted)?;
        }
        Ok(())
    }

    /// Takes the quorum's cluster id if it differs from `meta.json`'s: a
    /// node with no topics yet joins the cluster; one with topics of
    /// another cluster is refused.
    async fn adopt_cluster_id(&self, node: &MetaNode) -> Result<(), MetaError> {
        let Some(theirs) = node.image().cluster_id.clone() else {
            return Ok(());
        };
        let ours = self.cluster_id();
        if theirs == ours {
            return Ok(());
        }
        if !self.topics().is_empty() {
            return Err(MetaError::Config(format!(
                "this data directory belongs to cluster {ours}, but the controller quorum is cluster {theirs}"
            )));
        }
        let meta = super::BrokerMeta {
            cluster_id: theirs.clone(),
            node_id: self.node_id(),
        };
        let (fs, path) = (self.fs.clone(), self.config.data_dir.join(super::META_FILE));
        tokio::task::spawn_blocking(move || meta::write_json(fs.as_ref(), &path, &meta))
            .await
            .map_err(|e| MetaError::Fatal(e.to_string()))?
            .map_err(|e| MetaError::Io(std::io::Error::other(e.to_string())))?;
        tracing::info!(cluster_id = %theirs, "joined the cluster of the controller quorum");
        *self.cluster_id.write() = theirs;
        Ok(())
    }

    /// Kafka's controlled shutdown (on SIGTERM, before the listener
    /// closes): this broker asks the quorum to move every leadership it
    /// holds to another in-sync replica and to take it out of the ISRs, and
    /// waits (at most `timeout`) until the other brokers have applied that,
    /// so clients find the new leaders at once instead of after the
    /// broker's session expires. Nothing to hand over on a single node, or
    /// before the quorum has started.
    pub async fn controlled_shutdown(&self, timeout: std::time::Duration) {
        let (Some(node), Some(image)) = (self.meta.get(), self.image()) else {
            return;
        };
        let me = self.node_id();
        let Some(epoch) = image.brokers.get(&me).map(|b| b.epoch) else {
            return;
        };
        if image.active().all(|b| b.id == me) {
            return;
        }
        let started = std::time::Instant::now();
        let done = tokio::time::timeout(
            timeout,
            es_meta::session::controlled_shutdown(node, me, epoch, timeout),
        )
        .await;
        match done {
            Ok(Ok(true)) => tracing::info!(
                took_ms = started.elapsed().as_millis() as u64,
                "controlled shutdown: leaderships handed over"
            ),
            Ok(Ok(false)) | Err(_) => {
                tracing::warn!("controlled shutdown timed out; exiting anyway")
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "controlled shutdown failed; exiting anyway"),
        }
    }

    /// Stops this broker's node of the metadata quorum.
    pub async fn stop_metadata(&self) {
        if let Some(m) = self.meta.get() {
            m.shutdown().await;
        }
    }

    /// The metadata quorum node, once started.
    pub fn metadata(&self) -> Option<&Arc<MetaNode>> {
        self.meta.get()
    }

    /// Puts the topics and dynamic broker configs found on disk into a
    /// fresh metadata log (one entry each kind).
    async fn import(&self, node: &MetaNode) -> Result<(), MetaError> {
        let image = node.image();
        let me = self.node_id();
        let topics: Vec<NewTopic> = self
            .topics()
            .iter()
            .filter(|t| !image.topics.contains_key(&t.name))
            .map(|t| NewTopic {
                name: t.name.clone(),
                id: t.id.to_string(),
                partitions: t.partition_count(),
                replication_factor: 1,
                assignments: vec![vec![me]; t.partition_count().max(0) as usize],
                configs: t.config().overrides().clone(),
            })
            .collect();
        if !topics.is_empty() {
            tracing::info!(
                topics = topics.len(),
                "importing topics into the metadata log"
            );
            let (_, resp) = node.write(MetaRequest::CreateTopics { topics }).await?;
            if let Err(e) = answer(resp) {
                tracing::warn!(code = e.code, message = %e.message, "a topic was not imported");
            }
        }
        let dynamic = self.dynamic_configs();
        if *dynamic != DynamicBrokerConfigs::default() {
            node.write(MetaRequest::AlterConfigs {
                resources: broker_alterations(me, &dynamic),
            })
            .await?;
        }
        Ok(())
    }

    /// A block of `count` producer ids for this broker, starting at or
    /// after `at_least` (one entry; [`crate::txn::pid_blocks`]).
    pub(crate) async fn allocate_producer_ids(
        &self,
        count: i32,
        at_least: i64,
    ) -> Result<MetaResponse, AdminError> {
        self.propose(MetaRequest::AllocateProducerIdsFrom {
            broker_id: self.node_id(),
            count,
            at_least,
        })
        .await
    }

    /// Proposes an ElectLeaders or AlterReassignments entry: its
    /// per-partition results, in request order, once applied here too. A
    /// whole-request failure (no quorum, a refused entry) is the error.
    pub(crate) async fn propose_partitions(
        &self,
        req: MetaRequest,
    ) -> Result<Vec<es_meta::records::PartitionResult>, AdminError> {
        match self.propose(req).await? {
            MetaResponse::Partitions { results } => Ok(results),
            other => Err(refused(other)),
        }
    }

    /// Proposes a CreateAcls or DeleteAcls entry: its per-item results, in
    /// request order, once applied here too.
    pub(crate) async fn propose_acls(
        &self,
        req: MetaRequest,
    ) -> Result<Vec<es_meta::records::AclResult>, AdminError> {
        match self.propose(req).await? {
            MetaResponse::Acls { results } => Ok(results),
            other => Err(refused(other)),
        }
    }

    /// Proposes one entry; Ok once applied here too without a failed item.
    pub(crate) async fn propose_checked(&self, req: MetaRequest) -> Result<(), AdminError> {
        answer(self.propose(req).await?)
    }

    /// Proposes one entry; its answer once applied here too.
    pub(crate) async fn propose(&self, req: MetaRequest) -> Result<MetaResponse, AdminError> {
        let node = self.meta.get().ok_or_else(|| {
            AdminError::new(ResponseError::UnknownServerError, "metadata not started")
        })?;
        let (index, resp) = node.write(req).await.map_err(meta_error)?;
        node.wait_applied(index).await.map_err(meta_error)?;
        Ok(resp)
    }

    /// Applies one event of an applied entry to the data directory and the
    /// registry. Blocking; idempotent.
    fn materialize(&self, image: &MetaImage, e: &MetaEvent) -> Result<(), StorageError> {
        match e {
            MetaEvent::TopicCreated(name) | MetaEvent::PartitionsCreated { name, .. } => {
                let Some(t) = image.topics.get(name) else {
                    return Ok(());
                };
                let id = Uuid::parse_str(&t.id).map_err(|e| StorageError::Metadata {
                    file: "metadata log".into(),
                    why: format!("topic {name} has id {}: {e}", t.id),
                })?;
                let count = t.partitions.len() as i32;
                let hosted = |p: i32| self.hosts(Some(image), name, p);
                match self.topic(name) {
                    Some(local) if local.id == id => {
                        if local.partition_count() < count {
                            local.add_partitions(&self.storage, count, &hosted)?;
                        }
                        return local.host(&self.storage, &hosted);
                    }
                    Some(stale) => self.remove_local(&stale)?,
                    None => {}
                }
                let config = match self.topic_config(t.configs.clone()) {
                    Ok(c) => c,
                    Err(err) => {
                        tracing::error!(topic = %name, error = %err, "applied topic configs do not validate here; using the defaults");
                        self.topic_config(BTreeMap::new())
                            .map_err(|e| StorageError::Metadata {
                                file: "metadata log".into(),
                                why: e.to_string(),
                            })?
                    }
                };
                let topic = topics::create_topic(
                    &self.storage,
                    &self.topics_dir,
                    name,
                    id,
                    count,
                    config,
                    &hosted,
                )?;
                self.topics.write().insert(name.clone(), Arc::new(topic));
                tracing::info!(topic = %name, partitions = count, %id, "created topic");
            }
            MetaEvent::TopicDeleted { name, id } => {
                if let Some(local) = self.topic(name).filter(|t| t.id.to_string() == *id) {
                    self.remove_local(&local)?;
                    tracing::info!(topic = %name, "deleted topic");
                }
            }
            MetaEvent::TopicConfigs(name) => {
                let (Some(t), Some(local)) = (image.topics.get(name), self.topic(name)) else {
                    return Ok(());
                };
                if local.config().overrides() == &t.configs {
                    return Ok(());
                }
                match self.topic_config(t.configs.clone()) {
                    Ok(c) => {
                        local.set_config(self.fs.as_ref(), c)?;
                        tracing::info!(topic = %name, "altered topic config");
                    }
                    Err(err) => {
                        tracing::error!(topic = %name, error = %err, "applied topic configs do not validate here; keeping the old ones")
                    }
                }
            }
            MetaEvent::BrokerConfigs(_) => {
                let me = self.node_id().to_string();
                let mut next = DynamicBrokerConfigs {
                    broker: image.broker_configs.get(&me).cloned().unwrap_or_default(),
                    ..DynamicBrokerConfigs::default()
                };
                if let Some(d) = image.broker_configs.get("") {
                    next.cluster_default = d.clone();
                }
                if next == *self.dynamic_configs() {
                    return Ok(());
                }
                let path = self.config.data_dir.join(BROKER_CONFIGS_FILE);
                meta::write_json(self.fs.as_ref(), &path, &next)?;
                *self.dynamic.write() = Arc::new(next);
                let defaults = self.topic_defaults();
                for t in self.topics() {
                    t.apply_broker_defaults(defaults.clone());
                }
                tracing::info!("altered dynamic broker configs");
            }
            MetaEvent::GroupConfigs(group) => {
                let configs = image.group_configs.get(group).cloned().unwrap_or_default();
                self.groups
                    .set_group_overrides(group, GroupOverrides::from_configs(&configs));
            }
            MetaEvent::Leadership { name, partitions } => {
                self.place_partitions(image, name, partitions)?;
            }
            MetaEvent::CoordinatorState(touched) => self.materialize_groups(image, touched)?,
            MetaEvent::Acls | MetaEvent::ScramCredentials | MetaEvent::ClientQuotas => {
                self.security().apply_metadata(image)
            }
            MetaEvent::ApiKeys => self.apply_api_keys(image),
            // Mirrors are read from the image by the mirror service, the
            // registry by the schema registry's follower (es-broker).
            MetaEvent::ClusterId
            | MetaEvent::Broker(_)
            | MetaEvent::Mirrors
            | MetaEvent::Registry => {}
        }
        Ok(())
    }

    /// Takes a topic out of the registry, stops following its partitions
    /// and removes its directory and its share-group state.
    fn remove_local(&self, topic: &Arc<Topic>) -> Result<(), StorageError> {
        for slot in topic.partitions() {
            self.fetchers().stop_following(&topic.name, slot.index);
        }
        {
            let mut reg = self.topics.write();
            if reg.get(&topic.name).is_some_and(|t| Arc::ptr_eq(t, topic)) {
                reg.remove(&topic.name);
            }
        }
        // The share groups' state of the topic goes with its records; a
        // failure here leaves files a later load of a topic of the same
        // name removes as stale (their topic id differs).
        if let Err(e) = self
            .shares()
            .delete_topic(&topic.name, topic.id, topic.partition_count())
        {
            tracing::warn!(topic = %topic.name, error = %e, "removing the topic's share-group state failed");
        }
        topics::delete_topic(&self.fs, &self.topics_dir, topic)
    }

    /// Creates a topic (or only validates the request). `partitions` of -1
    /// means the broker default; the partitions are placed over the brokers.
    pub async fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        overrides: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<Option<Arc<Topic>>, AdminError> {
        self.create_topic_assigned(name, partitions, -1, Vec::new(), overrides, validate_only)
            .await
    }

    /// The replication factor a topic created with -1 gets: Kafka's
    /// `default.replication.factor` when set (`--default-replication-factor`),
    /// else min(3, brokers available), so that a cluster replicates by
    /// default and a single node keeps one copy.
    pub fn default_replication_factor(&self) -> i16 {
        match self.image() {
            Some(img) => img.resolve_replication_factor(
                -1,
                self.node_id(),
                self.config.default_replication_factor,
            ),
            None => self.config.default_replication_factor.unwrap_or(1),
        }
    }

    /// [`Broker::create_topic`] with a manual assignment: one replica list
    /// per partition (empty: placed over the brokers). The metadata
    /// validates the lists as Kafka's controller does (registered brokers,
    /// not all fenced).
    pub async fn create_topic_assigned(
        &self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        assignments: Vec<Vec<i32>>,
        overrides: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<Option<Arc<Topic>>, AdminError> {
        topics::validate_topic_name(name)
            .map_err(|m| AdminError::new(ResponseError::InvalidTopicException, m))?;
        let partitions = if partitions == -1 {
            self.config.default_partitions
        } else {
            partitions
        };
        if !(1..=PARTITIONS_MAX).contains(&partitions) {
            return Err(AdminError::new(
                ResponseError::InvalidPartitions,
                format!("number of partitions must be in [1, {PARTITIONS_MAX}], got {partitions}"),
            ));
        }
        self.topic_config(overrides.clone())?;
        if validate_only {
            if self.topic(name).is_some() {
                return Err(AdminError::new(
                    ResponseError::TopicAlreadyExists,
                    format!("Topic '{name}' already exists."),
                ));
            }
            if let Some(clash) = self
                .topics
                .read()
                .keys()
                .find(|k| collision_key(k) == collision_key(name))
            {
                return Err(AdminError::new(
                    ResponseError::InvalidTopicException,
                    format!("Topic '{name}' collides with existing topic: {clash}"),
                ));
            }
            return Ok(None);
        }
        let id = Uuid::new_v4().to_string();
        let req = MetaRequest::CreateTopics {
            topics: vec![NewTopic {
                name: name.to_string(),
                id: id.clone(),
                partitions,
                replication_factor: if replication_factor == -1 {
                    self.default_replication_factor()
                } else {
                    replication_factor
                },
                assignments,
                configs: overrides,
            }],
        };
        answer(self.propose(req).await?)?;
        self.topic(name)
            .filter(|t| t.id.to_string() == id)
            .map(Some)
            .ok_or_else(|| {
                AdminError::new(
                    ResponseError::UnknownServerError,
                    format!("topic {name} was created but is not hosted here"),
                )
            })
    }

    /// Deletes a topic.
    pub async fn delete_topic(&self, name: &str) -> Result<Arc<Topic>, AdminError> {
        let topic = self.topic(name).ok_or_else(|| {
            AdminError::new(
                ResponseError::UnknownTopicOrPartition,
                format!("unknown topic {name}"),
            )
        })?;
        let req = MetaRequest::DeleteTopics {
            names: vec![name.to_string()],
        };
        answer(self.propose(req).await?)?;
        Ok(topic)
    }

    /// Grows a topic to `count` partitions.
    pub async fn create_partitions(
        &self,
        name: &str,
        count: i32,
        assignments: Vec<Vec<i32>>,
        validate_only: bool,
    ) -> Result<(), AdminError> {
        let topic = self.topic(name).ok_or_else(|| {
            AdminError::new(
                ResponseError::UnknownTopicOrPartition,
                format!("unknown topic {name}"),
            )
        })?;
        let current = topic.partition_count();
        if count <= current {
            return Err(AdminError::new(ResponseError::InvalidPartitions, format!("Topic currently has {current} partitions, which is higher than the requested {count}.")));
        }
        if count > PARTITIONS_MAX {
            return Err(AdminError::new(
                ResponseError::InvalidPartitions,
                format!("at most {PARTITIONS_MAX} partitions"),
            ));
        }
        if validate_only {
            return Ok(());
        }
        let req = MetaRequest::CreatePartitions {
            topics: vec![NewPartitions {
                name: name.to_string(),
                count,
                assignments,
            }],
        };
        answer(self.propose(req).await?)
    }

    /// Replaces a topic's config overrides with `overrides` (validated first).
    pub async fn set_topic_config(
        &self,
        name: &str,
        overrides: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<(), AdminError> {
        if self.topic(name).is_none() {
            return Err(AdminError::new(
                ResponseError::UnknownTopicOrPartition,
                format!("unknown topic {name}"),
            ));
        }
        self.topic_config(overrides.clone())?;
        if validate_only {
            return Ok(());
        }
        let req = MetaRequest::AlterConfigs {
            resources: vec![ConfigAlteration {
                resource: ConfigResource::Topic(name.to_string()),
                replace: true,
                changes: overrides.into_iter().map(|(k, v)| (k, Some(v))).collect(),
            }],
        };
        answer(self.propose(req).await?)
    }

    /// A group's configs (the GROUP config resource), as the metadata holds
    /// them: only what was set.
    pub fn group_configs(&self, group_id: &str) -> BTreeMap<String, String> {
        self.image()
            .and_then(|i| i.group_configs.get(group_id).cloned())
            .unwrap_or_default()
    }

    /// Replaces group `group_id`'s configs with `configs` (validated by the
    /// caller), through the quorum; every broker applies them as the entry
    /// is.
    pub async fn set_group_configs(
        &self,
        group_id: &str,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<(), AdminError> {
        if validate_only || configs == self.group_configs(group_id) {
            return Ok(());
        }
        let req = MetaRequest::AlterConfigs {
            resources: vec![ConfigAlteration {
                resource: ConfigResource::Group(group_id.to_string()),
                replace: true,
                changes: configs.into_iter().map(|(k, v)| (k, Some(v))).collect(),
            }],
        };
        answer(self.propose(req).await?)
    }

    /// Changes the dynamic broker configs: `change` edits a copy (and may
    /// refuse); unless `validate_only`, the result is proposed to the
    /// quorum (this broker's set and the cluster default, one entry) and
    /// applied on every broker as the entry is.
    pub async fn update_dynamic_configs(
        &self,
        validate_only: bool,
        change: impl FnOnce(&mut DynamicBrokerConfigs) -> Result<(), AdminError>,
    ) -> Result<(), AdminError> {
        let current = self.dynamic_configs();
        let mut next = DynamicBrokerConfigs::clone(&current);
        change(&mut next)?;
        if validate_only || next == *current {
            return Ok(());
        }
        let req = MetaRequest::AlterConfigs {
            resources: broker_alterations(self.node_id(), &next),
        };
        answer(self.propose(req).await?)
    }
}

/// The entry items that set this broker's dynamic configs and the cluster
/// default to `d`.
fn broker_alterations(me: i32, d: &DynamicBrokerConfigs) -> Vec<ConfigAlteration> {
    let set = |m: &BTreeMap<String, String>| {
        m.iter()
            .map(|(k, v)| (k.clone(), Some(v.clone())))
            .collect()
    };
    vec![
        ConfigAlteration {
            resource: ConfigResource::Broker(me.to_string()),
            replace: true,
            changes: set(&d.broker),
        },
        ConfigAlteration {
            resource: ConfigResource::Broker(String::new()),
            replace: true,
            changes: set(&d.cluster_default),
        },
    ]
}

/// A Kafka cluster id: a random UUID in URL-safe base64 without padding (22 chars).
pub fn new_cluster_id() -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let bytes = Uuid::new_v4().into_bytes();
    let mut out = String::with_capacity(22);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}
