//! The replication rules of the metadata image, as KRaft's
//! `ReplicationControlManager` applies them: a leader's AlterPartition
//! (ISR changes), a broker's controlled shutdown, ElectLeaders (preferred
//! and unclean), the preferred-leader imbalance a periodic task acts on,
//! unclean leader election's switch, and the default replication factor.
//!
//! Everything here is deterministic: it reads the image and the entry
//! only. Every input is untrusted: a bad entry is answered with Kafka's
//! error code and changes nothing.

use std::collections::BTreeMap;

use crate::records::{
    code, AlterPartitionItem, BrokerId, ElectionType, LeaderRecovery, MetaResponse,
    PartitionResult, PartitionState, TopicPartitions,
};

use super::change::{self, Election, Target};
use super::{MetaEvent, MetaImage, NO_LEADER};

/// Topic config (and cluster default): elect a replica outside the ISR
/// rather than leave a partition without a leader. Kafka's default: false.
pub const UNCLEAN_LEADER_ELECTION_ENABLE: &str = "unclean.leader.election.enable";
/// Broker config: the replication factor of a CreateTopics that says -1.
pub const DEFAULT_REPLICATION_FACTOR: &str = "default.replication.factor";
/// es's default when `default.replication.factor` is not set: this many,
/// or every active broker if fewer (Kafka's default is 1).
pub const DEFAULT_REPLICATION_FACTOR_MAX: i16 = 3;
/// Broker config: whether the periodic preferred-leader election runs
/// (Kafka's default: true).
pub const AUTO_LEADER_REBALANCE_ENABLE: &str = "auto.leader.rebalance.enable";
/// Broker config: a broker's share of partitions it should lead but does
/// not, in percent, above which they are moved back (Kafka's default: 10).
pub const LEADER_IMBALANCE_PER_BROKER_PERCENTAGE: &str = "leader.imbalance.per.broker.percentage";

/// Kafka's boolean config parsing: "true" in any case, spaces trimmed.
fn parse_bool(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

/// Whether a topic with these overrides allows unclean elections, the
/// cluster default being `default`.
pub(crate) fn unclean_enabled(configs: &BTreeMap<String, String>, default: bool) -> bool {
    configs
        .get(UNCLEAN_LEADER_ELECTION_ENABLE)
        .and_then(|v| parse_bool(v))
        .unwrap_or(default)
}

/// Of one preferred broker: how many partitions it is preferred for, and
/// those of them it does not lead.
type Preferred<'a> = (u64, Vec<(&'a str, i32)>);

/// Partitions that changed, by topic name, turned into Leadership events.
#[derive(Default)]
pub(crate) struct Changed(BTreeMap<String, Vec<i32>>);

impl Changed {
    pub(crate) fn add(&mut self, topic: &str, partition: i32) {
        let list = self.0.entry(topic.to_string()).or_default();
        if !list.contains(&partition) {
            list.push(partition);
        }
    }

    pub(crate) fn emit(self, ev: &mut Vec<MetaEvent>) {
        for (name, partitions) in self.0 {
            ev.push(MetaEvent::Leadership { name, partitions });
        }
    }
}

fn refused(topic_id: &str, partition: i32, error_code: i16, message: String) -> PartitionState {
    PartitionState {
        topic_id: topic_id.to_string(),
        partition,
        error_code,
        message: Some(message),
        leader: NO_LEADER,
        leader_epoch: -1,
        isr: Vec::new(),
        partition_epoch: -1,
        leader_recovery: LeaderRecovery::Recovered,
    }
}

pub(crate) fn election_result(
    topic: &str,
    partition: i32,
    error_code: i16,
    message: Option<String>,
) -> PartitionResult {
    PartitionResult {
        topic: topic.to_string(),
        partition,
        error_code,
        message,
        leader: NO_LEADER,
        unclean: false,
    }
}

impl MetaImage {
    /// The cluster default of `unclean.leader.election.enable` (broker
    /// configs `""`), else Kafka's false.
    pub(crate) fn cluster_unclean_default(&self) -> bool {
        self.broker_configs
            .get("")
            .and_then(|c| c.get(UNCLEAN_LEADER_ELECTION_ENABLE))
            .and_then(|v| parse_bool(v))
            .unwrap_or(false)
    }

    /// Whether the topic named `topic` allows unclean leader elections.
    pub fn unclean_election_enabled(&self, topic: &str) -> bool {
        let default = self.cluster_unclean_default();
        self.topics
            .get(topic)
            .is_some_and(|t| unclean_enabled(&t.configs, default))
    }

    fn election_for(&self, topic: &str) -> Election {
        if self.unclean_election_enabled(topic) {
            Election::Unclean
        } else {
            Election::Online
        }
    }

    /// AlterPartition: the leader `broker_id` sets the ISR of partitions it
    /// leads. Checked in Kafka's order (validateAlterPartitionData): the
    /// broker epoch for the whole request (STALE_BROKER_EPOCH), then per
    /// partition: UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION, a leader or
    /// partition epoch newer than the image's (NOT_CONTROLLER), an older
    /// leader epoch (FENCED_LEADER_EPOCH), not the leader (INVALID_REQUEST,
    /// as Kafka), an older partition epoch (INVALID_UPDATE_VERSION), an ISR
    /// that is not a set of replicas holding the leader, or more than the
    /// leader while recovering, or a move back to recovering
    /// (INVALID_REQUEST), a member not registered, fenced, shutting down or
    /// of another broker epoch (INELIGIBLE_REPLICA).
    pub(crate) fn alter_partition(
        &mut self,
        broker_id: BrokerId,
        broker_epoch: i64,
        items: &[AlterPartitionItem],
        ev: &mut Vec<MetaEvent>,
    ) -> MetaResponse {
        match self.brokers.get(&broker_id) {
            None => {
                return MetaResponse::Error {
                    error_code: code::STALE_BROKER_EPOCH,
                    message: format!("No broker registration found for broker id {broker_id}"),
                }
            }
            Some(b) if b.epoch != broker_epoch => {
                return MetaResponse::Error {
                    error_code: code::STALE_BROKER_EPOCH,
                    message: format!(
                        "Expected broker epoch {}, but got broker epoch {broker_epoch}",
                        b.epoch
                    ),
                }
            }
            Some(_) => {}
        }
        let mut changed = Changed::default();
        let results = items
            .iter()
            .map(|it| self.alter_one(broker_id, it, &mut changed))
            .collect();
        changed.emit(ev);
        MetaResponse::AlterPartition { results }
    }

    fn alter_one(
        &mut self,
        broker_id: BrokerId,
        it: &AlterPartitionItem,
        changed: &mut Changed,
    ) -> PartitionState {
        let tid = &it.topic_id;
        let Some(name) = self.topic_by_id(tid).map(|t| t.name.clone()) else {
            return refused(
                tid,
                it.partition,
                code::UNKNOWN_TOPIC_ID,
                "This server does not host this topic ID.".into(),
            );
        };
        let index = usize::try_from(it.partition).ok();
        let Some(p) = index.and_then(|i| self.topics[&name].partitions.get(i)) else {
            return refused(
                tid,
                it.partition,
                code::UNKNOWN_TOPIC_OR_PARTITION,
                "This server does not host this topic-partition.".into(),
            );
        };
        let at = format!("{name}-{}", it.partition);
        let fail = |code, why: String| Some((code, why));
        let new_isr: Vec<BrokerId> = it.new_isr.iter().map(|m| m.broker_id).collect();
        let mut distinct = new_isr.clone();
        distinct.sort_unstable();
        distinct.dedup();
        let problem = if it.leader_epoch > p.leader_epoch || it.partition_epoch > p.partition_epoch
        {
            fail(code::NOT_CONTROLLER, format!("{at} is at leader epoch {} and partition epoch {}, behind the request's {} and {}", p.leader_epoch, p.partition_epoch, it.leader_epoch, it.partition_epoch))
        } else if it.leader_epoch < p.leader_epoch {
            fail(
                code::FENCED_LEADER_EPOCH,
                format!(
                    "the current leader epoch of {at} is {}, not {}",
                    p.leader_epoch, it.leader_epoch
                ),
            )
        } else if broker_id != p.leader {
            fail(
                code::INVALID_REQUEST,
                format!(
                    "the current leader of {at} is {}, not {broker_id}",
                    p.leader
                ),
            )
        } else if it.partition_epoch < p.partition_epoch {
            fail(
                code::INVALID_UPDATE_VERSION,
                format!(
                    "the current partition epoch of {at} is {}, not {}",
                    p.partition_epoch, it.partition_epoch
                ),
            )
        } else if distinct.len() != new_isr.len() || new_isr.iter().any(|r| !p.replicas.contains(r))
        {
            fail(
                code::INVALID_REQUEST,
                format!(
                    "the ISR {new_isr:?} of {at} is not a set of its replicas {:?}",
                    p.replicas
                ),
            )
        } else if !new_isr.contains(&p.leader) {
            fail(
                code::INVALID_REQUEST,
                format!(
                    "the ISR {new_isr:?} of {at} does not include its leader {}",
                    p.leader
                ),
            )
        } else if it.leader_recovery == LeaderRecovery::Recovering && new_isr.len() > 1 {
            fail(code::INVALID_REQUEST, format!("the ISR {new_isr:?} of {at} has more than its leader while the leader is recovering from an unclean election"))
        } else if p.leader_recovery == LeaderRecovery::Recovered
            && it.leader_recovery == LeaderRecovery::Recovering
        {
            fail(
                code::INVALID_REQUEST,
                format!(
                    "the leader recovery state of {at} cannot change from recovered to recovering"
                ),
            )
        } else {
            it.new_isr.iter().find_map(|m| {
                let why = match self.brokers.get(&m.broker_id) {
                    None => "not registered".to_string(),
                    Some(b) if b.shutdown_index.is_some() => "shutting down".into(),
                    Some(b) if b.fenced => "fenced".into(),
                    Some(b) if m.broker_epoch != -1 && m.broker_epoch != b.epoch => format!(
                        "broker epoch mismatch: requested={} VS expected={}",
                        m.broker_epoch, b.epoch
                    ),
                    Some(_) => return None,
                };
                fail(
                    code::INELIGIBLE_REPLICA,
                    format!(
                        "replica {} in the new ISR {new_isr:?} of {at} is ineligible: {why}",
                        m.broker_id
                    ),
                )
            })
        };
        if let Some((error_code, why)) = problem {
            return refused(tid, it.partition, error_code, why);
        }
        let mut target = Target::of(p, self.election_for(&name));
        target.isr = new_isr;
        target.recovery = it.leader_recovery;
        let active: Vec<BrokerId> = self.active().map(|b| b.id).collect();
        let Some(p) = index.and_then(|i| self.topics.get_mut(&name)?.partitions.get_mut(i)) else {
            return refused(
                tid,
                it.partition,
                code::UNKNOWN_TOPIC_OR_PARTITION,
                "This server does not host this topic-partition.".into(),
            );
        };
        let outcome = change::settle(p, target, &|r| active.contains(&r));
        if outcome.changed {
            changed.add(&name, it.partition);
        }
        let mut state = PartitionState {
            topic_id: tid.clone(),
            partition: it.partition,
            error_code: code::NONE,
            message: None,
            leader: p.leader,
            leader_epoch: p.leader_epoch,
            isr: p.isr.clone(),
            partition_epoch: p.partition_epoch,
            leader_recovery: p.leader_recovery,
        };
        if p.leader != broker_id {
            // Completing a reassignment moved the leadership: the change
            // stands, and the old leader is told to learn the new state
            // (Kafka's NEW_LEADER_ELECTED, AlterPartition v2+).
            state.error_code = code::NEW_LEADER_ELECTED;
            state.message = Some(format!(
                "{at} completed its reassignment and is now led by {}",
                p.leader
            ));
        }
        state
    }

    /// A broker's controlled shutdown (KRaft's
    /// `handleBrokerInControlledShutdown`): it is marked shutting down, so
    /// it may neither lead nor join an ISR until it registers again; every
    /// partition it leads gets another leader from the ISR (or an unclean
    /// one where the topic allows it, or none), and it leaves every ISR it
    /// is not the last member of. A retry answers the first index.
    pub(crate) fn controlled_shutdown(
        &mut self,
        index: u64,
        broker_id: BrokerId,
        broker_epoch: i64,
        ev: &mut Vec<MetaEvent>,
    ) -> MetaResponse {
        let Some(b) = self.brokers.get_mut(&broker_id) else {
            return MetaResponse::Error {
                error_code: code::BROKER_ID_NOT_REGISTERED,
                message: format!("broker {broker_id} is not registered"),
            };
        };
        if b.epoch != broker_epoch {
            return MetaResponse::Error {
                error_code: code::STALE_BROKER_EPOCH,
                message: format!(
                    "broker {broker_id} has epoch {}, not {broker_epoch}",
                    b.epoch
                ),
            };
        }
        if let Some(since_index) = b.shutdown_index {
            return MetaResponse::ShuttingDown { since_index };
        }
        b.shutdown_index = Some(index);
        self.leave_partitions(broker_id, ev);
        ev.push(MetaEvent::Broker(broker_id));
        MetaResponse::ShuttingDown { since_index: index }
    }

    /// How many partitions `broker_id` leads.
    pub fn leaderships(&self, broker_id: BrokerId) -> usize {
        self.topics
            .values()
            .flat_map(|t| &t.partitions)
            .filter(|p| p.leader == broker_id)
            .count()
    }

    /// Whether a broker in controlled shutdown may exit: it leads no
    /// partition, and every other active broker has applied the log up to
    /// its shutdown entry (`applied_index` says how far each has, as its
    /// heartbeats report; unknown is not far enough), so the new leaders
    /// know they lead before the old one goes (Kafka's controlled shutdown
    /// offset against the lowest active offset). A broker that is not
    /// registered has nothing to wait for; one that did not ask to stop is
    /// not done.
    pub fn controlled_shutdown_done(
        &self,
        broker_id: BrokerId,
        applied_index: impl Fn(BrokerId) -> Option<u64>,
    ) -> bool {
        let Some(b) = self.brokers.get(&broker_id) else {
            return true;
        };
        let Some(since) = b.shutdown_index else {
            return false;
        };
        self.leaderships(broker_id) == 0
            && self
                .active()
                .filter(|o| o.id != broker_id)
                .all(|o| applied_index(o.id).is_some_and(|i| i >= since))
    }

    /// ElectLeaders (KRaft's `electLeaders`): per partition,
    /// UNKNOWN_TOPIC_OR_PARTITION, ELECTION_NOT_NEEDED (preferred: the
    /// first replica leads already; unclean: there is a leader), or
    /// PREFERRED_LEADER_NOT_AVAILABLE / ELIGIBLE_LEADERS_NOT_AVAILABLE when
    /// no election changes anything. Without a list, every partition, and
    /// those not needing an election are left out of the answer.
    pub(crate) fn elect_leaders(
        &mut self,
        election: ElectionType,
        partitions: Option<&[TopicPartitions]>,
        ev: &mut Vec<MetaEvent>,
    ) -> MetaResponse {
        let mut changed = Changed::default();
        let results = match partitions {
            Some(list) => list
                .iter()
                .flat_map(|t| t.partitions.iter().map(move |p| (t.topic.as_str(), *p)))
                .map(|(t, p)| self.elect_one(t, p, election, &mut changed))
                .collect(),
            None => {
                let all: Vec<(String, i32)> = self
                    .topics
                    .values()
                    .flat_map(|t| (0..t.partitions.len() as i32).map(|i| (t.name.clone(), i)))
                    .collect();
                all.iter()
                    .map(|(t, p)| self.elect_one(t, *p, election, &mut changed))
                    .filter(|r| r.error_code != code::ELECTION_NOT_NEEDED)
                    .collect()
            }
        };
        changed.emit(ev);
        MetaResponse::Partitions { results }
    }

    fn elect_one(
        &mut self,
        topic: &str,
        partition: i32,
        election: ElectionType,
        changed: &mut Changed,
    ) -> PartitionResult {
        let active: Vec<BrokerId> = self.active().map(|b| b.id).collect();
        let Some(p) = self
            .topics
            .get_mut(topic)
            .and_then(|t| t.partitions.get_mut(usize::try_from(partition).ok()?))
        else {
            return election_result(
                topic,
                partition,
                code::UNKNOWN_TOPIC_OR_PARTITION,
                Some(format!("No such partition as {topic}-{partition}")),
            );
        };
        let (not_needed, kind, unavailable) = match election {
            ElectionType::Preferred => (
                p.replicas.first() == Some(&p.leader),
                Election::Preferred,
                code::PREFERRED_LEADER_NOT_AVAILABLE,
            ),
            ElectionType::Unclean => (
                p.leader != NO_LEADER,
                Election::Unclean,
                code::ELIGIBLE_LEADERS_NOT_AVAILABLE,
            ),
        };
        if not_needed {
            let mut r = election_result(topic, partition, code::ELECTION_NOT_NEEDED, None);
            r.leader = p.leader;
            return r;
        }
        let target = Target::of(p, kind);
        let outcome = change::settle(p, target, &|r| active.contains(&r));
        if !outcome.changed {
            let mut r = election_result(topic, partition, unavailable, None);
            r.leader = p.leader;
            return r;
        }
        changed.add(topic, partition);
        PartitionResult {
            leader: p.leader,
            unclean: outcome.unclean,
            ..election_result(topic, partition, code::NONE, None)
        }
    }

    /// The periodic preferred-leader election's settings from the cluster
    /// default broker configs: `None` when `auto.leader.rebalance.enable`
    /// is false, else `leader.imbalance.per.broker.percentage` (Kafka's
    /// defaults: true, 10).
    pub fn auto_leader_rebalance(&self) -> Option<u32> {
        let defaults = self.broker_configs.get("");
        let get = |k: &str| defaults.and_then(|c| c.get(k));
        if get(AUTO_LEADER_REBALANCE_ENABLE).and_then(|v| parse_bool(v)) == Some(false) {
            return None;
        }
        Some(
            get(LEADER_IMBALANCE_PER_BROKER_PERCENTAGE)
                .and_then(|v| v.trim().parse::<u32>().ok())
                .unwrap_or(10),
        )
    }

    /// Partitions whose preferred replica (the first) is active and in the
    /// ISR but does not lead, for the brokers whose share of such
    /// partitions, among those they are preferred for, exceeds
    /// `percentage` (Kafka's auto leader rebalance with
    /// `leader.imbalance.per.broker.percentage`). Partitions being
    /// reassigned are left alone. A periodic task proposes an
    /// ElectLeaders (preferred) of the answer when it is not empty.
    pub fn preferred_leader_imbalance(&self, percentage: u32) -> Vec<TopicPartitions> {
        // Per preferred broker: partitions it is preferred for, and those
        // it does not lead.
        let mut per: BTreeMap<BrokerId, Preferred> = BTreeMap::new();
        for t in self.topics.values() {
            for (i, p) in t.partitions.iter().enumerate() {
                let Some(&first) = p.replicas.first() else {
                    continue;
                };
                let e = per.entry(first).or_default();
                e.0 += 1;
                if p.leader != first {
                    e.1.push((&t.name, i as i32));
                }
            }
        }
        let mut out: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for (broker, (total, imbalanced)) in per {
            if !self.is_active(broker)
                || imbalanced.len() as u64 * 100 <= u64::from(percentage) * total
            {
                continue;
            }
            for (topic, i) in imbalanced {
                let p = &self.topics[topic].partitions[i as usize];
                if p.isr.contains(&broker) && p.adding.is_empty() && p.removing.is_empty() {
                    out.entry(topic).or_default().push(i);
                }
            }
        }
        out.into_iter()
            .map(|(topic, partitions)| TopicPartitions {
                topic: topic.to_string(),
                partitions,
            })
            .collect()
    }

    /// Partitions without a leader, of topics that allow unclean
    /// elections, that have an active replica to elect: what a periodic
    /// task proposes an ElectLeaders (unclean) for, after the topic's
    /// config was switched on (KRaft's `maybeElectUncleanLeaders`; a
    /// fenced or returning broker triggers the election itself).
    pub fn unclean_election_candidates(&self) -> Vec<TopicPartitions> {
        let default = self.cluster_unclean_default();
        self.topics
            .values()
            .filter(|t| unclean_enabled(&t.configs, default))
            .filter_map(|t| {
                let partitions: Vec<i32> = t
                    .partitions
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| {
                        p.leader == NO_LEADER && p.replicas.iter().any(|r| self.is_active(*r))
                    })
                    .map(|(i, _)| i as i32)
                    .collect();
                (!partitions.is_empty()).then(|| TopicPartitions {
                    topic: t.name.clone(),
                    partitions,
                })
            })
            .collect()
    }

    /// The replication factor of a new topic whose request says
    /// `requested`: itself unless it is -1, else the broker config
    /// `default.replication.factor` (dynamic for `broker`, then the
    /// dynamic cluster default, then `static_value`, the broker's own
    /// config file), else es's default: the active brokers, at most
    /// [`DEFAULT_REPLICATION_FACTOR_MAX`] (and at least 1, so that an empty
    /// cluster is refused for its brokers, not for the factor).
    ///
    /// The proposer calls this on its applied image and puts the number in
    /// the CreateTopics entry: the static config exists only on the
    /// proposer, and `create_topics.v1` has always refused -1, so resolving
    /// it at apply would change what old entries mean. Apply checks the
    /// factor against the active brokers again, so a count that changed in
    /// between is refused (INVALID_REPLICATION_FACTOR) on every node alike.
    pub fn resolve_replication_factor(
        &self,
        requested: i16,
        broker: BrokerId,
        static_value: Option<i16>,
    ) -> i16 {
        if requested != -1 {
            return requested;
        }
        let dynamic = |key: &str| {
            self.broker_configs
                .get(key)
                .and_then(|c| c.get(DEFAULT_REPLICATION_FACTOR))
                .and_then(|v| v.trim().parse::<i16>().ok())
                .filter(|rf| *rf > 0)
        };
        dynamic(&broker.to_string())
            .or_else(|| dynamic(""))
            .or(static_value.filter(|rf| *rf > 0))
            .unwrap_or_else(|| {
                let active = i16::try_from(self.active().count()).unwrap_or(i16::MAX);
                active.clamp(1, DEFAULT_REPLICATION_FACTOR_MAX)
            })
    }
}

#[cfg(test)]
#[path = "replication_tests.rs"]
mod tests;
