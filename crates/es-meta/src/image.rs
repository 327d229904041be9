//! The metadata image: the state the metadata log's entries build, and the
//! one function that applies an entry to it.
//!
//! Apply is deterministic (no clock, no randomness, no I/O): it depends on
//! the image and the entry alone, so every node that applies the same log
//! holds the same image. Validation happens here, not only at the proposer,
//! so two requests that race (two CreateTopics of one name sent to two
//! brokers) are ordered by the log and the second is refused on every node.
//!
//! Placement of new partitions ([`MetaImage::place`]) balances replicas by
//! count over the unfenced brokers and spreads each partition's replicas over
//! racks when racks are given (as Kafka's StripedReplicaPlacer aims to).
//!
//! The replication rules (AlterPartition, controlled shutdown, leader
//! elections, unclean election, reassignments, the default replication
//! factor) live in the submodules [`change`] (one partition's change, as
//! KRaft's PartitionChangeBuilder), `replication` and `reassign`; the
//! coordinators' state in `coordinator`; the schema registry's in `registry`.

use std::collections::{BTreeMap, BTreeSet};

use es_auth::acl::Acls;
use es_auth::api_keys::ApiKey;
use es_auth::scram::ScramCredential;
use serde::{Deserialize, Serialize};

use crate::quotas::ClientQuotas;

pub use registry::RegistryImage;

use crate::records::{
    code, BrokerId, ConfigAlteration, ConfigResource, Endpoint, ItemResult, LeaderRecovery,
    MetaRequest, MetaResponse, NewPartitions, NewTopic, PartitionChange, RegisterBroker,
};

pub(crate) mod change;
mod coordinator;
mod mirror;
mod reassign;
mod registry;
mod replication;
mod security;

pub use reassign::OngoingReassignment;
pub use replication::{
    AUTO_LEADER_REBALANCE_ENABLE, DEFAULT_REPLICATION_FACTOR, DEFAULT_REPLICATION_FACTOR_MAX,
    LEADER_IMBALANCE_PER_BROKER_PERCENTAGE, UNCLEAN_LEADER_ELECTION_ENABLE,
};

/// Kafka's "no leader".
pub const NO_LEADER: BrokerId = -1;
/// Most producer ids one allocation hands out.
pub const PRODUCER_ID_BLOCK_MAX: i32 = 10_000;

/// A registered broker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerInfo {
    pub id: BrokerId,
    pub incarnation_id: String,
    /// The log index of its registration (Kafka's broker epoch).
    pub epoch: i64,
    pub endpoints: Vec<Endpoint>,
    pub rack: Option<String>,
    /// A fenced broker leads nothing and is out of every ISR it can leave.
    pub fenced: bool,
    /// The index of its controlled shutdown entry, if it asked to stop: it
    /// then leads nothing and joins no ISR until it registers again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shutdown_index: Option<u64>,
}

/// One partition's replicas and leadership.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionInfo {
    pub replicas: Vec<BrokerId>,
    pub isr: Vec<BrokerId>,
    /// [`NO_LEADER`] when none of the ISR is available.
    pub leader: BrokerId,
    pub leader_epoch: i32,
    /// Bumped by every change of the partition.
    pub partition_epoch: i32,
    /// Replicas an ongoing reassignment adds (they are in `replicas` too).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adding: Vec<BrokerId>,
    /// Replicas an ongoing reassignment removes (still in `replicas`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removing: Vec<BrokerId>,
    /// `Recovering` after an unclean election, until the leader says it
    /// has recovered (an AlterPartition).
    #[serde(default, skip_serializing_if = "LeaderRecovery::is_recovered")]
    pub leader_recovery: LeaderRecovery,
}

/// A topic.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicInfo {
    pub id: String,
    pub name: String,
    pub partitions: Vec<PartitionInfo>,
    /// Config overrides only.
    pub configs: BTreeMap<String, String>,
}

/// What one applied entry changed, for the [`crate::Materializer`] and for
/// anyone watching the image.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetaEvent {
    ClusterId,
    Broker(BrokerId),
    TopicCreated(String),
    TopicDeleted {
        name: String,
        id: String,
    },
    /// Partitions `from..` were added.
    PartitionsCreated {
        name: String,
        from: i32,
    },
    TopicConfigs(String),
    /// `""` is the cluster default, otherwise a broker id.
    BrokerConfigs(String),
    /// The configs of this group id changed.
    GroupConfigs(String),
    /// Leader or ISR of these partitions changed.
    Leadership {
        name: String,
        partitions: Vec<i32>,
    },
    /// A coordinator changed these keys (or key prefixes) of its state:
    /// `(space, key)`.
    CoordinatorState(Vec<(String, String)>),
    /// ACL bindings were added or removed.
    Acls,
    /// SCRAM credentials were set or removed.
    ScramCredentials,
    /// Client quotas were set or removed.
    ClientQuotas,
    /// API keys were added or revoked.
    ApiKeys,
    /// Mirror links or mirror topics changed.
    Mirrors,
    /// The schema registry changed.
    Registry,
}

/// The cluster metadata, as of the last applied entry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetaImage {
    pub cluster_id: Option<String>,
    pub brokers: BTreeMap<BrokerId, BrokerInfo>,
    /// Ids of brokers that left for good: never registered again.
    pub retired: BTreeSet<BrokerId>,
    /// By name.
    pub topics: BTreeMap<String, TopicInfo>,
    /// Dynamic broker configs: `""` is the cluster default, otherwise a broker id.
    pub broker_configs: BTreeMap<String, BTreeMap<String, String>>,
    /// Group configs by group id (IncrementalAlterConfigs on GROUP).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub group_configs: BTreeMap<String, BTreeMap<String, String>>,
    /// The next producer id to hand out.
    pub next_producer_id: i64,
    /// The group and transaction coordinators' state, by space and key
    /// ([`crate::records::CoordinatorWrite`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub coordinator: BTreeMap<String, BTreeMap<String, serde_json::Value>>,
    /// ACL bindings (CreateAcls, DeleteAcls).
    #[serde(default, skip_serializing_if = "Acls::is_empty")]
    pub acls: Acls,
    /// SCRAM credentials by user, then mechanism type (1 SHA-256, 2 SHA-512).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub scram: BTreeMap<String, BTreeMap<i8, ScramCredential>>,
    /// Client quotas by entity (AlterClientQuotas).
    #[serde(default, skip_serializing_if = "ClientQuotas::is_empty")]
    pub client_quotas: ClientQuotas,
    /// API keys by id, revoked ones kept as tombstones (hashes only).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub api_keys: BTreeMap<String, ApiKey>,
    /// Mirror links by name (secrets included: see [`crate::mirror`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub mirror_links: BTreeMap<String, crate::mirror::MirrorLink>,
    /// Mirror topics by es topic name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub mirror_topics: BTreeMap<String, crate::mirror::MirrorTopic>,
    /// The schema registry every node serves (`--schema-registry-listen`).
    #[serde(default, skip_serializing_if = "RegistryImage::is_empty")]
    pub registry: RegistryImage,
}

/// The name with '.' and '_' made equal: two topics that differ only there
/// collide in Kafka's metric names, so Kafka refuses the second.
pub fn collision_key(name: &str) -> String {
    name.replace('.', "_")
}

/// A Leadership event for the partitions of `topic` that changed, if any.
fn leadership_event(topic: &str, changed: Vec<i32>, ev: &mut Vec<MetaEvent>) {
    if !changed.is_empty() {
        ev.push(MetaEvent::Leadership {
            name: topic.to_string(),
            partitions: changed,
        });
    }
}

impl MetaImage {
    /// The topic of this id.
    pub fn topic_by_id(&self, id: &str) -> Option<&TopicInfo> {
        self.topics.values().find(|t| t.id == id)
    }

    /// Brokers that are not fenced (they may be shutting down).
    pub fn unfenced(&self) -> impl Iterator<Item = &BrokerInfo> {
        self.brokers.values().filter(|b| !b.fenced)
    }

    /// Brokers that may lead, join ISRs and host new replicas: unfenced and
    /// not in controlled shutdown (Kafka's `isActive`).
    pub fn active(&self) -> impl Iterator<Item = &BrokerInfo> {
        self.brokers
            .values()
            .filter(|b| !b.fenced && b.shutdown_index.is_none())
    }

    /// Whether `id` is registered, unfenced and not shutting down.
    pub fn is_active(&self, id: BrokerId) -> bool {
        self.brokers
            .get(&id)
            .is_some_and(|b| !b.fenced && b.shutdown_index.is_none())
    }

    /// Applies one entry at log index `index`: the answer and what changed.
    pub fn apply(&mut self, index: u64, req: &MetaRequest) -> (MetaResponse, Vec<MetaEvent>) {
        let mut ev = Vec::new();
        let resp = match req {
            MetaRequest::InitCluster { cluster_id } => match &self.cluster_id {
                Some(c) if c != cluster_id => MetaResponse::Error {
                    error_code: code::INCONSISTENT_CLUSTER_ID,
                    message: format!("the cluster's id is {c}, not {cluster_id}"),
                },
                Some(_) => MetaResponse::None,
                None => {
                    self.cluster_id = Some(cluster_id.clone());
                    ev.push(MetaEvent::ClusterId);
                    MetaResponse::None
                }
            },
            MetaRequest::RegisterBroker(r) => self.register(index, r, &mut ev),
            MetaRequest::FenceBroker { broker_id, epoch } => {
                self.set_fenced(*broker_id, *epoch, true, &mut ev)
            }
            MetaRequest::UnfenceBroker { broker_id, epoch } => {
                self.set_fenced(*broker_id, *epoch, false, &mut ev)
            }
            MetaRequest::UnregisterBroker { broker_id } => {
                if self.brokers.remove(broker_id).is_none() {
                    MetaResponse::Error {
                        error_code: code::BROKER_ID_NOT_REGISTERED,
                        message: format!("broker {broker_id} is not registered"),
                    }
                } else {
                    self.retired.insert(*broker_id);
                    self.leave_partitions(*broker_id, &mut ev);
                    ev.push(MetaEvent::Broker(*broker_id));
                    MetaResponse::None
                }
            }
            MetaRequest::CreateTopics { topics } => MetaResponse::Items {
                results: topics
                    .iter()
                    .map(|t| self.create_topic(t, &mut ev))
                    .collect(),
            },
            MetaRequest::DeleteTopics { names } => MetaResponse::Items {
                results: names
                    .iter()
                    .map(|n| match self.topics.remove(n) {
                        Some(t) => {
                            if self.mirror_topics.remove(n).is_some() {
                                ev.push(MetaEvent::Mirrors);
                            }
                            ev.push(MetaEvent::TopicDeleted {
                                name: t.name,
                                id: t.id,
                            });
                            ItemResult::ok(n)
                        }
                        None => ItemResult::err(
                            n,
                            code::UNKNOWN_TOPIC_OR_PARTITION,
                            "This server does not host this topic-partition.",
                        ),
                    })
                    .collect(),
            },
            MetaRequest::CreatePartitions { topics } => MetaResponse::Items {
                results: topics
                    .iter()
                    .map(|t| self.create_partitions(t, &mut ev))
                    .collect(),
            },
            MetaRequest::AlterConfigs { resources } => MetaResponse::Items {
                results: resources
                    .iter()
                    .map(|a| self.alter_configs(a, &mut ev))
                    .collect(),
            },
            MetaRequest::PartitionChange { changes } => MetaResponse::Items {
                results: changes
                    .iter()
                    .map(|c| self.change_partition(c, &mut ev))
                    .collect(),
            },
            MetaRequest::AllocateProducerIds { broker_id, count } => {
                self.allocate_producer_ids(*broker_id, *count, 0)
            }
            MetaRequest::AllocateProducerIdsFrom {
                broker_id,
                count,
                at_least,
            } => self.allocate_producer_ids(*broker_id, *count, *at_least),
            MetaRequest::AlterPartition {
                broker_id,
                broker_epoch,
                partitions,
            } => self.alter_partition(*broker_id, *broker_epoch, partitions, &mut ev),
            MetaRequest::ControlledShutdown {
                broker_id,
                broker_epoch,
            } => self.controlled_shutdown(index, *broker_id, *broker_epoch, &mut ev),
            MetaRequest::ElectLeaders {
                election,
                partitions,
            } => self.elect_leaders(*election, partitions.as_deref(), &mut ev),
            MetaRequest::AlterReassignments { partitions } => {
                self.alter_reassignments(partitions, &mut ev)
            }
            MetaRequest::CoordinatorState(w) => self.coordinator_write(w, &mut ev),
            MetaRequest::CreateAcls { bindings } => self.create_acls(bindings, &mut ev),
            MetaRequest::DeleteAcls { filters } => self.delete_acls(filters, &mut ev),
            MetaRequest::AlterScramCredentials {
                deletions,
                upsertions,
            } => self.alter_scram(deletions, upsertions, &mut ev),
            MetaRequest::AlterClientQuotas { alterations } => {
                self.alter_client_quotas(alterations, &mut ev)
            }
            MetaRequest::PutApiKeys { keys } => self.put_api_keys(keys, &mut ev),
            MetaRequest::PutMirrorLink { link } => self.put_mirror_link(link, &mut ev),
            MetaRequest::DeleteMirrorLink { name } => self.delete_mirror_link(name, &mut ev),
            MetaRequest::PutMirrorTopics { topics } => self.put_mirror_topics(topics, &mut ev),
            MetaRequest::RegistryChange { change } => self.registry.apply(change, &mut ev),
        };
        (resp, ev)
    }

    /// The block `[first, first + count)` for `broker_id`, starting at the
    /// counter or at `at_least`, whichever is later; the counter moves past
    /// it. Blocks never overlap, whoever asks.
    fn allocate_producer_ids(
        &mut self,
        broker_id: BrokerId,
        count: i32,
        at_least: i64,
    ) -> MetaResponse {
        if !self.brokers.contains_key(&broker_id) {
            return MetaResponse::Error {
                error_code: code::BROKER_ID_NOT_REGISTERED,
                message: format!("broker {broker_id} is not registered"),
            };
        }
        if !(1..=PRODUCER_ID_BLOCK_MAX).contains(&count) || at_least < 0 {
            return MetaResponse::Error {
                error_code: code::INVALID_REQUEST,
                message: format!("a block of {count} producer ids from {at_least}"),
            };
        }
        let first = self.next_producer_id.max(at_least);
        let Some(next) = first.checked_add(i64::from(count)) else {
            return MetaResponse::Error {
                error_code: code::INVALID_REQUEST,
                message: "producer ids exhausted".into(),
            };
        };
        self.next_producer_id = next;
        MetaResponse::ProducerIds { first, count }
    }

    fn register(
        &mut self,
        index: u64,
        r: &RegisterBroker,
        ev: &mut Vec<MetaEvent>,
    ) -> MetaResponse {
        if self.retired.contains(&r.broker_id) {
            return MetaResponse::Error {
                error_code: code::DUPLICATE_BROKER_REGISTRATION,
                message: format!(
                    "node id {} was removed from the cluster and is never reused",
                    r.broker_id
                ),
            };
        }
        if let Some(c) = &self.cluster_id {
            if *c != r.cluster_id {
                return MetaResponse::Error {
                    error_code: code::INCONSISTENT_CLUSTER_ID,
                    message: format!(
                        "broker {} has cluster id {}, the cluster's is {c}",
                        r.broker_id, r.cluster_id
                    ),
                };
            }
        }
        if let Some(b) = self.brokers.get(&r.broker_id) {
            if b.incarnation_id == r.incarnation_id {
                // A retry of the registration that already applied.
                return MetaResponse::Registered {
                    broker_epoch: b.epoch,
                };
            }
        }
        let epoch = i64::try_from(index).unwrap_or(i64::MAX);
        self.brokers.insert(
            r.broker_id,
            BrokerInfo {
                id: r.broker_id,
                incarnation_id: r.incarnation_id.clone(),
                epoch,
                endpoints: r.endpoints.clone(),
                rack: r.rack.clone(),
                fenced: true,
                shutdown_index: None,
            },
        );
        // A new incarnation starts fenced: it leads nothing until unfenced.
        self.leave_partitions(r.broker_id, ev);
        ev.push(MetaEvent::Broker(r.broker_id));
        MetaResponse::Registered {
            broker_epoch: epoch,
        }
    }

    fn set_fenced(
        &mut self,
        id: BrokerId,
        epoch: i64,
        fenced: bool,
        ev: &mut Vec<MetaEvent>,
    ) -> MetaResponse {
        let Some(b) = self.brokers.get_mut(&id) else {
            return MetaResponse::Error {
                error_code: code::BROKER_ID_NOT_REGISTERED,
                message: format!("broker {id} is not registered"),
            };
        };
        if b.epoch != epoch {
            return MetaResponse::Error {
                error_code: code::STALE_BROKER_EPOCH,
                message: format!("broker {id} has epoch {}, not {epoch}", b.epoch),
            };
        }
        if b.fenced == fenced {
            return MetaResponse::None;
        }
        if !fenced && b.shutdown_index.is_some() {
            // Only a new registration ends a controlled shutdown.
            return MetaResponse::Error {
                error_code: code::INVALID_REQUEST,
                message: format!("broker {id} is in controlled shutdown: it must register again"),
            };
        }
        b.fenced = fenced;
        if fenced {
            self.leave_partitions(id, ev);
        } else {
            self.return_to_partitions(id, ev);
        }
        ev.push(MetaEvent::Broker(id));
        MetaResponse::None
    }

    /// A broker became unavailable: it leaves every ISR it is not the last
    /// member of, and every partition it led gets a new leader from the
    /// ISR, or none; or, when the topic allows unclean elections, any
    /// available replica, which becomes the ISR alone (`Recovering`). A
    /// reassignment the smaller ISR lets complete completes.
    fn leave_partitions(&mut self, id: BrokerId, ev: &mut Vec<MetaEvent>) {
        let available: BTreeSet<BrokerId> = self.active().map(|b| b.id).collect();
        let unclean_default = self.cluster_unclean_default();
        for t in self.topics.values_mut() {
            let unclean = replication::unclean_enabled(&t.configs, unclean_default);
            let mut changed = Vec::new();
            for (i, p) in t.partitions.iter_mut().enumerate() {
                let in_isr = p.isr.contains(&id);
                if !in_isr && p.leader != id {
                    continue;
                }
                if in_isr && p.isr.len() > 1 {
                    p.isr.retain(|r| *r != id);
                }
                if p.leader == id || p.leader == NO_LEADER {
                    let mut next = p
                        .isr
                        .iter()
                        .copied()
                        .find(|r| *r != id && available.contains(r))
                        .unwrap_or(NO_LEADER);
                    if next == NO_LEADER && unclean {
                        // Only a replicated partition has someone to elect:
                        // logs from before replication (one replica per
                        // partition) apply as they always did.
                        if let Some(r) = p
                            .replicas
                            .iter()
                            .copied()
                            .find(|r| *r != id && available.contains(r))
                        {
                            next = r;
                            p.isr = vec![r];
                            p.leader_recovery = LeaderRecovery::Recovering;
                        }
                    }
                    if next != p.leader {
                        p.leader = next;
                        p.leader_epoch += 1;
                    }
                }
                p.partition_epoch += 1;
                if !p.adding.is_empty() || !p.removing.is_empty() {
                    let election = if unclean {
                        change::Election::Unclean
                    } else {
                        change::Election::Online
                    };
                    let target = change::Target::of(p, election);
                    change::settle(p, target, &|r| r != id && available.contains(&r));
                }
                changed.push(i as i32);
            }
            leadership_event(&t.name, changed, ev);
        }
    }

    /// A broker is available again: partitions without a leader whose ISR
    /// holds it are led by it; those whose ISR does not, of topics that
    /// allow unclean elections, are led by their first available replica
    /// (`Recovering`, the ISR that replica alone).
    fn return_to_partitions(&mut self, id: BrokerId, ev: &mut Vec<MetaEvent>) {
        let available: BTreeSet<BrokerId> = self.active().map(|b| b.id).collect();
        let unclean_default = self.cluster_unclean_default();
        for t in self.topics.values_mut() {
            let unclean = replication::unclean_enabled(&t.configs, unclean_default);
            let mut changed = Vec::new();
            for (i, p) in t.partitions.iter_mut().enumerate() {
                if p.leader != NO_LEADER {
                    continue;
                }
                if p.isr.contains(&id) {
                    p.leader = id;
                    p.leader_epoch += 1;
                    p.partition_epoch += 1;
                    changed.push(i as i32);
                } else if unclean && p.replicas.contains(&id) {
                    let target = change::Target::of(p, change::Election::Unclean);
                    if change::settle(p, target, &|r| available.contains(&r)).changed {
                        changed.push(i as i32);
                    }
                }
            }
            leadership_event(&t.name, changed, ev);
        }
    }

    fn create_topic(&mut self, t: &NewTopic, ev: &mut Vec<MetaEvent>) -> ItemResult {
        if self.topics.contains_key(&t.name) {
            return ItemResult::err(
                &t.name,
                code::TOPIC_ALREADY_EXISTS,
                format!("Topic '{}' already exists.", t.name),
            );
        }
        let key = collision_key(&t.name);
        if let Some(other) = self.topics.keys().find(|n| collision_key(n) == key) {
            return ItemResult::err(
                &t.name,
                code::INVALID_TOPIC_EXCEPTION,
                format!("Topic '{}' collides with existing topic: {other}", t.name),
            );
        }
        if self.topic_by_id(&t.id).is_some() {
            return ItemResult::err(&t.name, code::INVALID_REQUEST, "topic id in use");
        }
        let assignments = if t.assignments.is_empty() {
            if t.partitions < 1 {
                return ItemResult::err(
                    &t.name,
                    code::INVALID_PARTITIONS,
                    "Number of partitions must be larger than 0.",
                );
            }
            match self.place(t.partitions as usize, t.replication_factor) {
                Ok(a) => a,
                Err(e) => return ItemResult::err(&t.name, code::INVALID_REPLICATION_FACTOR, e),
            }
        } else {
            if let Err(e) = self.check_assignments(&t.assignments, None) {
                return ItemResult::err(&t.name, code::INVALID_REPLICA_ASSIGNMENT, e);
            }
            t.assignments.clone()
        };
        let partitions = assignments
            .into_iter()
            .map(|r| self.new_partition(r))
            .collect();
        self.topics.insert(
            t.name.clone(),
            TopicInfo {
                id: t.id.clone(),
                name: t.name.clone(),
                partitions,
                configs: t.configs.clone(),
            },
        );
        ev.push(MetaEvent::TopicCreated(t.name.clone()));
        ItemResult::ok(&t.name)
    }

    fn new_partition(&self, replicas: Vec<BrokerId>) -> PartitionInfo {
        let isr: Vec<BrokerId> = replicas
            .iter()
            .copied()
            .filter(|r| self.is_active(*r))
            .collect();
        PartitionInfo {
            leader: isr.first().copied().unwrap_or(NO_LEADER),
            isr,
            replicas,
            leader_epoch: 0,
            partition_epoch: 0,
            adding: Vec::new(),
            removing: Vec::new(),
            leader_recovery: LeaderRecovery::Recovered,
        }
    }

    /// Explicit replica lists: each non-empty, without repeats, of registered
    /// brokers, all of one length (`rf` if given), with an available member.
    fn check_assignments(&self, lists: &[Vec<BrokerId>], rf: Option<usize>) -> Result<(), String> {
        let rf = rf.unwrap_or_else(|| lists.first().map_or(0, Vec::len));
        for (p, list) in lists.iter().enumerate() {
            if list.is_empty() {
                return Err(format!("The manual partition assignment includes an empty replica list for partition {p}."));
            }
            if list.len() != rf {
                return Err("All partitions should have the same number of replicas".into());
            }
            let distinct: BTreeSet<_> = list.iter().collect();
            if distinct.len() != list.len() {
                return Err(format!(
                    "The manual partition assignment includes the broker {} more than once.",
                    list[0]
                ));
            }
            if let Some(b) = list.iter().find(|b| !self.brokers.contains_key(b)) {
                return Err(format!("The manual partition assignment includes broker {b}, but no such broker is registered."));
            }
            if list.iter().all(|b| !self.is_active(*b)) {
                return Err(format!("All brokers specified in the manual partition assignment for partition {p} are fenced or in controlled shutdown."));
            }
        }
        Ok(())
    }

    /// Replica lists for `count` new partitions of `rf` replicas each, over
    /// the active brokers (unfenced, not shutting down), distinct within a
    /// partition: each partition's leader is the broker leading
    /// fewest partitions so far, its followers the least-loaded brokers on
    /// racks the partition does not use yet (then any rack). Ties go to the
    /// lower id, rotated by partition so equal brokers take turns.
    pub fn place(&self, count: usize, rf: i16) -> Result<Vec<Vec<BrokerId>>, String> {
        let live: Vec<&BrokerInfo> = self.active().collect();
        if rf < 1 {
            return Err(
                "Replication factor must be larger than 0, or -1 to use the default value.".into(),
            );
        }
        if live.len() < rf as usize {
            return Err(format!(
                "Unable to replicate the partition {rf} time(s): The target replication factor of {rf} cannot be reached because only {} broker(s) are registered.",
                live.len()
            ));
        }
        let mut load: BTreeMap<BrokerId, (usize, usize)> =
            live.iter().map(|b| (b.id, (0, 0))).collect();
        for t in self.topics.values() {
            for p in &t.partitions {
                for (i, r) in p.replicas.iter().enumerate() {
                    if let Some(l) = load.get_mut(r) {
                        l.0 += 1;
                        if i == 0 {
                            l.1 += 1;
                        }
                    }
                }
            }
        }
        let n = live.len();
        let mut out = Vec::with_capacity(count);
        for p in 0..count {
            let order: Vec<&BrokerInfo> = (0..n).map(|i| live[(i + p) % n]).collect();
            let mut chosen: Vec<BrokerId> = Vec::with_capacity(rf as usize);
            let mut racks: BTreeSet<Option<String>> = BTreeSet::new();
            for slot in 0..rf as usize {
                let pick = order
                    .iter()
                    .filter(|b| !chosen.contains(&b.id))
                    .min_by_key(|b| {
                        let (replicas, leaders) = load[&b.id];
                        let rack_used = b.rack.is_some() && racks.contains(&b.rack);
                        if slot == 0 {
                            (false, leaders, replicas)
                        } else {
                            (rack_used, replicas, leaders)
                        }
                    })
                    .copied();
                let Some(b) = pick else { break };
                chosen.push(b.id);
                racks.insert(b.rack.clone());
                if let Some(l) = load.get_mut(&b.id) {
                    l.0 += 1;
                    if slot == 0 {
                        l.1 += 1;
                    }
                }
            }
            out.push(chosen);
        }
        Ok(out)
    }

    fn create_partitions(&mut self, t: &NewPartitions, ev: &mut Vec<MetaEvent>) -> ItemResult {
        let Some(topic) = self.topics.get(&t.name) else {
            return ItemResult::err(
                &t.name,
                code::UNKNOWN_TOPIC_OR_PARTITION,
                format!("The topic '{}' does not exist.", t.name),
            );
        };
        let have = topic.partitions.len() as i32;
        if t.count < have {
            return ItemResult::err(
                &t.name,
                code::INVALID_PARTITIONS,
                format!(
                    "Topic currently has {have} partitions, which is higher than the requested {}.",
                    t.count
                ),
            );
        }
        if t.count == have {
            return ItemResult::err(
                &t.name,
                code::INVALID_PARTITIONS,
                format!("Topic already has {have} partitions."),
            );
        }
        let rf = topic.partitions.first().map_or(1, |p| p.replicas.len());
        let adding = (t.count - have) as usize;
        let lists = if t.assignments.is_empty() {
            match self.place(adding, rf as i16) {
                Ok(a) => a,
                Err(e) => return ItemResult::err(&t.name, code::INVALID_REPLICATION_FACTOR, e),
            }
        } else {
            if t.assignments.len() != adding {
                return ItemResult::err(&t.name, code::INVALID_REPLICA_ASSIGNMENT, format!("Attempted to add {adding} additional partition(s), but only {} assignment(s) were specified.", t.assignments.len()));
            }
            if let Err(e) = self.check_assignments(&t.assignments, Some(rf)) {
                return ItemResult::err(&t.name, code::INVALID_REPLICA_ASSIGNMENT, e);
            }
            t.assignments.clone()
        };
        let new: Vec<PartitionInfo> = lists.into_iter().map(|r| self.new_partition(r)).collect();
        if let Some(topic) = self.topics.get_mut(&t.name) {
            topic.partitions.extend(new);
        }
        ev.push(MetaEvent::PartitionsCreated {
            name: t.name.clone(),
            from: have,
        });
        ItemResult::ok(&t.name)
    }

    fn alter_configs(&mut self, a: &ConfigAlteration, ev: &mut Vec<MetaEvent>) -> ItemResult {
        let (set, name, event) = match &a.resource {
            ConfigResource::Topic(n) => match self.topics.get_mut(n) {
                Some(t) => (&mut t.configs, n, MetaEvent::TopicConfigs(n.clone())),
                None => {
                    return ItemResult::err(
                        n,
                        code::UNKNOWN_TOPIC_OR_PARTITION,
                        format!("The topic '{n}' does not exist."),
                    )
                }
            },
            ConfigResource::Broker(n) => (
                self.broker_configs.entry(n.clone()).or_default(),
                n,
                MetaEvent::BrokerConfigs(n.clone()),
            ),
            ConfigResource::Group(n) => (
                self.group_configs.entry(n.clone()).or_default(),
                n,
                MetaEvent::GroupConfigs(n.clone()),
            ),
        };
        if a.replace {
            set.clear();
        }
        for (k, v) in &a.changes {
            match v {
                Some(v) => {
                    set.insert(k.clone(), v.clone());
                }
                None => {
                    set.remove(k);
                }
            }
        }
        let name = name.clone();
        match &a.resource {
            ConfigResource::Broker(n) => {
                if self.broker_configs.get(n).is_some_and(BTreeMap::is_empty) {
                    self.broker_configs.remove(n);
                }
            }
            ConfigResource::Group(n) => {
                if self.group_configs.get(n).is_some_and(BTreeMap::is_empty) {
                    self.group_configs.remove(n);
                }
            }
            ConfigResource::Topic(_) => {}
        }
        ev.push(event);
        ItemResult::ok(&name)
    }

    fn change_partition(&mut self, c: &PartitionChange, ev: &mut Vec<MetaEvent>) -> ItemResult {
        let label = format!("{}:{}", c.topic_id, c.partition);
        let Some(t) = self.topics.values_mut().find(|t| t.id == c.topic_id) else {
            return ItemResult::err(
                &label,
                code::UNKNOWN_TOPIC_ID,
                "This server does not host this topic ID.",
            );
        };
        let Some(p) = usize::try_from(c.partition)
            .ok()
            .and_then(|i| t.partitions.get_mut(i))
        else {
            return ItemResult::err(
                &label,
                code::UNKNOWN_TOPIC_OR_PARTITION,
                "This server does not host this topic-partition.",
            );
        };
        if p.partition_epoch != c.partition_epoch {
            return ItemResult::err(
                &label,
                code::INVALID_UPDATE_VERSION,
                format!(
                    "partition epoch is {}, not {}",
                    p.partition_epoch, c.partition_epoch
                ),
            );
        }
        let isr = c.isr.clone().unwrap_or_else(|| p.isr.clone());
        let leader = c.leader.unwrap_or(p.leader);
        if isr.is_empty() || isr.iter().any(|r| !p.replicas.contains(r)) {
            return ItemResult::err(
                &label,
                code::INVALID_REQUEST,
                "the ISR must be a non-empty subset of the replicas",
            );
        }
        if leader != NO_LEADER && !isr.contains(&leader) {
            return ItemResult::err(
                &label,
                code::INVALID_REQUEST,
                "the leader must be in the ISR",
            );
        }
        if leader != p.leader {
            p.leader = leader;
            p.leader_epoch += 1;
        }
        p.isr = isr;
        p.partition_epoch += 1;
        ev.push(MetaEvent::Leadership {
            name: t.name.clone(),
            partitions: vec![c.partition],
        });
        ItemResult::ok(&label)
    }
}

#[cfg(test)]
#[path = "image_tests.rs"]
mod tests;

#[cfg(test)]
mod test_util;
