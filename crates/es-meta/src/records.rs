//! The kinds of metadata entry, one per change, as KRaft's records are.
//!
//! Each kind carries its version in its serialized tag (`"create_topics.v1"`),
//! so a later version is a new variant beside the old one, and a node that
//! meets a tag it does not know refuses the entry (its state machine stops)
//! rather than skip a change the others applied. Security, registry and mirror
//! state join as new kinds.
//!
//! Requests carry what must be decided once, by the proposer (a new topic's
//! id); everything else (placement, validation against the current state,
//! epochs) is decided where the entry is applied, deterministically, so every
//! node reaches the same state at the same index.

use std::collections::BTreeMap;

use es_auth::acl::{AclBinding, AclBindingFilter};
use es_auth::api_keys::ApiKey;
use es_auth::scram::ScramCredential;
use serde::{Deserialize, Serialize};

/// A broker's id (Kafka's `node.id`).
pub type BrokerId = i32;

/// Kafka error codes the state machine answers with (the numbers Kafka uses).
pub mod code {
    pub const NONE: i16 = 0;
    pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    pub const NOT_LEADER_OR_FOLLOWER: i16 = 6;
    pub const NOT_COORDINATOR: i16 = 16;
    pub const NOT_CONTROLLER: i16 = 41;
    pub const FENCED_LEADER_EPOCH: i16 = 74;
    pub const PREFERRED_LEADER_NOT_AVAILABLE: i16 = 80;
    pub const ELIGIBLE_LEADERS_NOT_AVAILABLE: i16 = 83;
    pub const ELECTION_NOT_NEEDED: i16 = 84;
    pub const NO_REASSIGNMENT_IN_PROGRESS: i16 = 85;
    pub const INELIGIBLE_REPLICA: i16 = 107;
    pub const NEW_LEADER_ELECTED: i16 = 108;
    pub const TOPIC_ALREADY_EXISTS: i16 = 36;
    pub const INVALID_PARTITIONS: i16 = 37;
    pub const INVALID_REPLICATION_FACTOR: i16 = 38;
    pub const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
    pub const INVALID_REQUEST: i16 = 42;
    pub const STALE_BROKER_EPOCH: i16 = 77;
    pub const INVALID_TOPIC_EXCEPTION: i16 = 17;
    pub const INVALID_UPDATE_VERSION: i16 = 95;
    pub const UNKNOWN_TOPIC_ID: i16 = 100;
    pub const DUPLICATE_BROKER_REGISTRATION: i16 = 101;
    pub const BROKER_ID_NOT_REGISTERED: i16 = 102;
    pub const INCONSISTENT_CLUSTER_ID: i16 = 104;
    pub const RESOURCE_NOT_FOUND: i16 = 91;
}

/// One listener of a broker, as it registers it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    pub name: String,
    pub host: String,
    pub port: u16,
    pub security_protocol: String,
}

/// A broker's registration request (Kafka's BrokerRegistration).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisterBroker {
    pub broker_id: BrokerId,
    /// Random per process start: a restart is a new incarnation.
    pub incarnation_id: String,
    pub cluster_id: String,
    pub endpoints: Vec<Endpoint>,
    pub rack: Option<String>,
}

/// A topic to create.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewTopic {
    pub name: String,
    /// Chosen by the proposer (a random UUID, or the id a single-node data
    /// directory already had, when it is imported).
    pub id: String,
    /// Partitions, when `assignments` is empty.
    pub partitions: i32,
    /// Replicas per partition, when `assignments` is empty.
    pub replication_factor: i16,
    /// Explicit replica lists, one per partition (CreateTopics' assignments).
    #[serde(default)]
    pub assignments: Vec<Vec<BrokerId>>,
    /// Config overrides.
    #[serde(default)]
    pub configs: BTreeMap<String, String>,
}

/// New partitions for an existing topic (CreatePartitions).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewPartitions {
    pub name: String,
    /// The total count wanted.
    pub count: i32,
    /// Replica lists for the new partitions only, if given.
    #[serde(default)]
    pub assignments: Vec<Vec<BrokerId>>,
}

/// Which config set an alteration applies to.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "type", content = "name", rename_all = "snake_case")]
pub enum ConfigResource {
    Topic(String),
    /// `""` is the cluster-wide default, otherwise a broker id.
    Broker(String),
    /// A group's configs (Kafka's GROUP config resource, KIP-848), by
    /// group id; the group need not exist.
    Group(String),
}

/// The config changes of one resource: values set (`Some`) or removed (`None`),
/// already resolved by the proposer (APPEND and SUBTRACT become a SET).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigAlteration {
    pub resource: ConfigResource,
    /// AlterConfigs (the legacy API) replaces the whole set.
    #[serde(default)]
    pub replace: bool,
    pub changes: BTreeMap<String, Option<String>>,
}

/// A change of one partition's leadership or ISR, decided by the controller
/// (the replication issue builds on it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionChange {
    pub topic_id: String,
    pub partition: i32,
    /// The partition epoch the proposer saw: a stale change is refused.
    pub partition_epoch: i32,
    pub leader: Option<BrokerId>,
    pub isr: Option<Vec<BrokerId>>,
}

/// Whether a partition's leader came from its ISR (Kafka's LeaderRecoveryState,
/// KIP-704): after an unclean election the leader is `Recovering` until it
/// says otherwise in an AlterPartition, and its ISR stays itself alone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LeaderRecovery {
    #[default]
    Recovered,
    /// Elected uncleanly: records the ISR had may be lost.
    Recovering,
}

impl LeaderRecovery {
    pub fn is_recovered(&self) -> bool {
        *self == LeaderRecovery::Recovered
    }
}

/// One member of a proposed ISR (AlterPartition v3's BrokerState).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IsrMember {
    pub broker_id: BrokerId,
    /// The broker epoch the leader knows this follower by; -1 skips the check.
    #[serde(default = "no_epoch")]
    pub broker_epoch: i64,
}

fn no_epoch() -> i64 {
    -1
}

/// One partition of an AlterPartition: the ISR its leader wants.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlterPartitionItem {
    pub topic_id: String,
    pub partition: i32,
    /// The leader epoch and partition epoch the leader holds.
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub new_isr: Vec<IsrMember>,
    #[serde(default)]
    pub leader_recovery: LeaderRecovery,
}

/// Kafka's ElectLeaders election types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ElectionType {
    /// The first replica, if it is live and in the ISR.
    Preferred,
    /// Any live replica for a partition without a leader, ISR or not.
    Unclean,
}

/// Partitions of one topic, by name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicPartitions {
    pub topic: String,
    pub partitions: Vec<i32>,
}

/// One partition of an AlterPartitionReassignments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reassignment {
    pub topic: String,
    pub partition: i32,
    /// The target replicas, the first preferred; `None` cancels the
    /// ongoing reassignment.
    pub replicas: Option<Vec<BrokerId>>,
}

/// One Raft entry of the metadata log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind")]
pub enum MetaRequest {
    /// The first entry of a cluster: its id.
    #[serde(rename = "cluster.v1")]
    InitCluster { cluster_id: String },
    #[serde(rename = "register_broker.v1")]
    RegisterBroker(RegisterBroker),
    /// The broker's session expired (no heartbeat for `broker.session.timeout.ms`).
    #[serde(rename = "fence_broker.v1")]
    FenceBroker { broker_id: BrokerId, epoch: i64 },
    /// The broker heartbeats again and has caught up with the log.
    #[serde(rename = "unfence_broker.v1")]
    UnfenceBroker { broker_id: BrokerId, epoch: i64 },
    /// A broker leaves for good (its id is never reused).
    #[serde(rename = "unregister_broker.v1")]
    UnregisterBroker { broker_id: BrokerId },
    /// One CreateTopics request.
    #[serde(rename = "create_topics.v1")]
    CreateTopics { topics: Vec<NewTopic> },
    /// One DeleteTopics request, by name.
    #[serde(rename = "delete_topics.v1")]
    DeleteTopics { names: Vec<String> },
    /// One CreatePartitions request.
    #[serde(rename = "create_partitions.v1")]
    CreatePartitions { topics: Vec<NewPartitions> },
    /// One AlterConfigs or IncrementalAlterConfigs request.
    #[serde(rename = "alter_configs.v1")]
    AlterConfigs { resources: Vec<ConfigAlteration> },
    /// Leadership and ISR changes.
    #[serde(rename = "partition_change.v1")]
    PartitionChange { changes: Vec<PartitionChange> },
    /// A block of producer ids for one broker (InitProducerId).
    #[serde(rename = "producer_ids.v1")]
    AllocateProducerIds { broker_id: BrokerId, count: i32 },
    /// A block of producer ids for one broker that starts at `at_least` or
    /// later: a broker whose own journal already handed out ids (a data
    /// directory from before the quorum) names its high mark, and the
    /// quorum's counter jumps past it. Kafka's AllocateProducerIds, plus
    /// that floor.
    #[serde(rename = "producer_ids.v2")]
    AllocateProducerIdsFrom {
        broker_id: BrokerId,
        count: i32,
        at_least: i64,
    },
    /// A partition leader changes its ISR (Kafka's AlterPartition).
    #[serde(rename = "alter_partition.v1")]
    AlterPartition {
        broker_id: BrokerId,
        broker_epoch: i64,
        partitions: Vec<AlterPartitionItem>,
    },
    /// A broker asks to stop (SIGTERM): it leads nothing afterwards, leaves
    /// the ISRs it is not the last member of, and may neither lead nor join
    /// an ISR until it registers again (Kafka's BrokerHeartbeat with
    /// `want_shut_down`).
    #[serde(rename = "controlled_shutdown.v1")]
    ControlledShutdown {
        broker_id: BrokerId,
        broker_epoch: i64,
    },
    /// Kafka's ElectLeaders; `partitions: None` is every partition.
    #[serde(rename = "elect_leaders.v1")]
    ElectLeaders {
        election: ElectionType,
        partitions: Option<Vec<TopicPartitions>>,
    },
    /// Kafka's AlterPartitionReassignments (KIP-455).
    #[serde(rename = "alter_reassignments.v1")]
    AlterReassignments { partitions: Vec<Reassignment> },
    /// A group or transaction coordinator's durable change (committed
    /// offsets, a transactional id's state), valid only while the proposer
    /// still leads the internal partition that places the key.
    #[serde(rename = "coordinator_state.v1")]
    CoordinatorState(CoordinatorWrite),
    /// One CreateAcls request: the bindings as the broker parsed them
    /// (Kafka's AccessControlEntryRecords); each is checked and added, or
    /// found present, where the entry is applied.
    #[serde(rename = "create_acls.v1")]
    CreateAcls { bindings: Vec<AclBinding> },
    /// One DeleteAcls request: every stored binding a filter matches goes.
    #[serde(rename = "delete_acls.v1")]
    DeleteAcls { filters: Vec<AclBindingFilter> },
    /// One AlterUserScramCredentials request (KIP-554), checked by the
    /// broker that received it: credentials removed, then set.
    #[serde(rename = "alter_scram.v1")]
    AlterScramCredentials {
        deletions: Vec<ScramKey>,
        upsertions: Vec<ScramUpsertion>,
    },
    /// One AlterClientQuotas request (not `validate_only`): the entities'
    /// changes the broker that received it found valid
    /// ([`crate::quotas::validate_alteration`]), checked again and applied
    /// in order.
    #[serde(rename = "alter_client_quotas.v1")]
    AlterClientQuotas {
        alterations: Vec<crate::quotas::QuotaAlteration>,
    },
    /// API keys (SASL/PLAIN) created or revoked on a node (`es-broker
    /// keys`, its data directory's `api_keys.json`): each key is added, or
    /// revokes the one of its id; a revocation is final, and a live key
    /// never replaces a different live key of its id. Hashes only.
    #[serde(rename = "put_api_keys.v1")]
    PutApiKeys { keys: Vec<ApiKey> },
    /// Creates or replaces a mirror link (`es-broker mirror link create`).
    #[serde(rename = "put_mirror_link.v1")]
    PutMirrorLink { link: crate::mirror::MirrorLink },
    /// Deletes a link that no active or paused mirror topic uses.
    #[serde(rename = "delete_mirror_link.v1")]
    DeleteMirrorLink { name: String },
    /// Adds mirror topics or changes their state (pause, resume, promote).
    #[serde(rename = "put_mirror_topics.v1")]
    PutMirrorTopics {
        topics: Vec<crate::mirror::MirrorTopic>,
    },
    /// One write of the schema registry's API (register, delete, config,
    /// mode), applied to the image's registry by es-registry's own rules.
    #[serde(rename = "registry_change.v1")]
    RegistryChange { change: es_registry::Change },
}

/// A user's credential for one SCRAM mechanism.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramKey {
    pub user: String,
    /// Kafka's mechanism type: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512.
    pub mechanism: i8,
}

/// A SCRAM credential to set (salted: the password never reaches the log).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramUpsertion {
    pub user: String,
    pub credential: ScramCredential,
}

/// The body of `coordinator_state.v1`: changes to the coordinators' state,
/// a map of spaces (`"offsets"`, `"txns"`, ...) of keys to JSON documents
/// that this crate stores and never interprets.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoordinatorWrite {
    pub fence: LeaderFence,
    pub changes: Vec<StateChange>,
}

/// Who may write: the leader of `partition` of `topic` at `leader_epoch`
/// (Kafka fences a coordinator's writes to `__consumer_offsets` and
/// `__transaction_state` by the partition's leader epoch the same way). While
/// `topic` does not exist, only a broker that is the whole cluster may write
/// (a lone broker coordinates every key before the topic is created).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaderFence {
    pub topic: String,
    pub partition: i32,
    pub broker_id: BrokerId,
    pub leader_epoch: i32,
}

/// One change to the coordinators' state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum StateChange {
    Put {
        space: String,
        key: String,
        value: serde_json::Value,
    },
    Delete {
        space: String,
        key: String,
    },
    /// Every key of `space` that starts with `prefix`.
    DeletePrefix {
        space: String,
        prefix: String,
    },
}

impl StateChange {
    /// The space and the key (or prefix) it touches.
    pub fn target(&self) -> (&str, &str) {
        match self {
            StateChange::Put { space, key, .. } | StateChange::Delete { space, key } => {
                (space, key)
            }
            StateChange::DeletePrefix { space, prefix } => (space, prefix),
        }
    }
}

/// The outcome of one item of a request (a topic, a resource).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ItemResult {
    pub name: String,
    pub error_code: i16,
    pub message: Option<String>,
}

impl ItemResult {
    pub fn ok(name: &str) -> Self {
        ItemResult {
            name: name.to_string(),
            error_code: code::NONE,
            message: None,
        }
    }
    pub fn err(name: &str, error_code: i16, message: impl Into<String>) -> Self {
        ItemResult {
            name: name.to_string(),
            error_code,
            message: Some(message.into()),
        }
    }
}

/// What applying an entry answered.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum MetaResponse {
    /// Entries openraft writes itself (blank, membership).
    #[default]
    None,
    /// The entry as a whole was refused.
    Error { error_code: i16, message: String },
    /// One result per item, in request order.
    Items { results: Vec<ItemResult> },
    /// A registered broker's epoch (the index of its registration entry).
    Registered { broker_epoch: i64 },
    /// A block of producer ids: `first .. first + count`.
    ProducerIds { first: i64, count: i32 },
    /// One result per partition of an AlterPartition, in request order.
    AlterPartition { results: Vec<PartitionState> },
    /// One result per partition of an ElectLeaders or an
    /// AlterReassignments, in request order.
    Partitions { results: Vec<PartitionResult> },
    /// One result per binding of a CreateAcls, or per filter of a
    /// DeleteAcls (with the bindings it removed), in request order.
    Acls { results: Vec<AclResult> },
    /// A controlled shutdown began at this index: the broker may exit once
    /// it leads nothing and every other live broker has applied this index
    /// ([`crate::MetaImage::controlled_shutdown_done`]).
    ShuttingDown { since_index: u64 },
    /// A registry change's answer: the API's JSON, or why it was refused.
    Registry {
        result: Result<serde_json::Value, es_registry::RegistryError>,
    },
}

/// One item of [`MetaResponse::Acls`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclResult {
    pub error_code: i16,
    pub message: Option<String>,
    /// DeleteAcls: the bindings the filter matched and removed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bindings: Vec<AclBinding>,
}

/// A partition's state after an AlterPartition, or why it was refused
/// (then only `error_code` and `message` mean something).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionState {
    pub topic_id: String,
    pub partition: i32,
    pub error_code: i16,
    pub message: Option<String>,
    pub leader: BrokerId,
    pub leader_epoch: i32,
    pub isr: Vec<BrokerId>,
    pub partition_epoch: i32,
    pub leader_recovery: LeaderRecovery,
}

/// The outcome of one partition of an ElectLeaders or AlterReassignments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionResult {
    pub topic: String,
    pub partition: i32,
    pub error_code: i16,
    pub message: Option<String>,
    /// The leader afterwards ([`crate::image::NO_LEADER`] if none).
    pub leader: BrokerId,
    /// The leader was elected from outside the ISR: records may be lost.
    #[serde(default)]
    pub unclean: bool,
}
