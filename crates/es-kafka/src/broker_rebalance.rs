//! Automatic preferred-leader rebalance (Kafka's
//! `auto.leader.rebalance.enable`): on the broker whose metadata node leads
//! the quorum (es's active controller), a periodic task proposes one
//! preferred ElectLeaders for the partitions
//! `MetaImage::preferred_leader_imbalance` names, i.e. those whose first
//! replica is live and in the ISR but does not lead, of the brokers whose
//! share of them exceeds `leader.imbalance.per.broker.percentage`.
//!
//! Beside it, the periodic unclean election (Kafka's
//! `unclean.leader.election.interval.ms`, 5 min): the quorum leader proposes
//! an unclean ElectLeaders for the leaderless partitions of topics that
//! allow it (`MetaImage::unclean_election_candidates`): the way a partition
//! whose whole ISR is gone comes back after an operator switches
//! `unclean.leader.election.enable` on (a broker that is fenced or returns
//! triggers the election itself; ElectLeaders does it on request).
//!
//! The tasks hold the broker weakly and end when it is dropped or
//! shutting down. Every node runs it; only the quorum leader proposes, so
//! one election per period is proposed at most, and the metadata decides it
//! as it decides any ElectLeaders (a leader that moved since is simply not
//! elected again).

use std::sync::{Arc, Weak};
use std::time::Duration;

use es_meta::image::LEADER_IMBALANCE_PER_BROKER_PERCENTAGE;
use es_meta::records::{ElectionType, MetaRequest, PartitionResult, TopicPartitions};
use es_meta::MetaImage;

use super::{AdminError, Broker};

/// Kafka's `leader.imbalance.check.interval.seconds` default.
pub const LEADER_IMBALANCE_CHECK_INTERVAL_DEFAULT: Duration = Duration::from_secs(300);
/// Kafka's `leader.imbalance.per.broker.percentage` default.
pub const LEADER_IMBALANCE_PER_BROKER_PERCENTAGE_DEFAULT: u32 = 10;
/// Kafka's `unclean.leader.election.interval.ms` default.
pub const UNCLEAN_LEADER_ELECTION_INTERVAL_DEFAULT: Duration = Duration::from_secs(300);

/// The broker's static settings of the rebalance (its flags).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderRebalance {
    /// Kafka's `auto.leader.rebalance.enable` (default true). The cluster
    /// default broker config of that name, when set to false, also turns
    /// the task off (the metadata honours it; es's AlterConfigs does not
    /// accept the name yet).
    pub enable: bool,
    /// Kafka's `leader.imbalance.check.interval.seconds` (default 300 s).
    pub check_interval: Duration,
    /// Kafka's `leader.imbalance.per.broker.percentage` (default 10); the
    /// cluster default broker config of that name wins when set.
    pub per_broker_percentage: u32,
    /// Kafka's `unclean.leader.election.interval.ms` (default 5 min): how
    /// often the quorum leader looks for leaderless partitions to elect a
    /// leader for uncleanly (independent of `enable`).
    pub unclean_interval: Duration,
}

impl Default for LeaderRebalance {
    fn default() -> Self {
        LeaderRebalance {
            enable: true,
            check_interval: LEADER_IMBALANCE_CHECK_INTERVAL_DEFAULT,
            per_broker_percentage: LEADER_IMBALANCE_PER_BROKER_PERCENTAGE_DEFAULT,
            unclean_interval: UNCLEAN_LEADER_ELECTION_INTERVAL_DEFAULT,
        }
    }
}

/// The two elections the quorum leader runs periodically.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PeriodicElection {
    /// Preferred leaders back ([`Broker::rebalance_leaders`]).
    Preferred,
    /// Leaders outside the ISR ([`Broker::elect_unclean_leaders`]).
    Unclean,
}

impl Broker {
    /// Runs `kind` every `leader.imbalance.check.interval.seconds` (not at
    /// all when `auto.leader.rebalance.enable` is off) or every
    /// `unclean.leader.election.interval.ms`. Holds the broker weakly: ends
    /// when it is gone or stopping.
    pub(crate) async fn periodic_election_task(b: Weak<Broker>, kind: PeriodicElection) {
        let Some(first) = b.upgrade() else {
            return;
        };
        let settings = &first.config.leader_rebalance;
        let period = match kind {
            PeriodicElection::Preferred if !settings.enable => return,
            PeriodicElection::Preferred => settings.check_interval,
            PeriodicElection::Unclean => settings.unclean_interval,
        }
        .max(Duration::from_millis(100));
        drop(first);
        Broker::every(b, period, move |me| async move {
            let results = match kind {
                PeriodicElection::Preferred => me.rebalance_leaders().await,
                PeriodicElection::Unclean => me.elect_unclean_leaders().await,
            };
            match results {
                Ok(results) if !results.is_empty() => {
                    let partitions = results.len();
                    let elected = results.iter().filter(|r| r.error_code == 0).count();
                    match kind {
                        PeriodicElection::Preferred => tracing::info!(
                            partitions,
                            elected,
                            "automatic preferred leader election"
                        ),
                        PeriodicElection::Unclean => tracing::warn!(
                            partitions,
                            elected,
                            "periodic unclean leader election: leaderless partitions of topics with unclean.leader.election.enable=true take a replica outside their ISR; what the old ISR had beyond its log is lost"
                        ),
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::info!(election = ?kind, code = e.code, message = %e.message, "periodic leader election failed")
                }
            }
        })
        .await
    }

    /// One check of the periodic unclean election: when this broker's
    /// metadata node leads the quorum, proposes an unclean ElectLeaders of
    /// the candidates. The results (empty when nothing was proposed).
    pub async fn elect_unclean_leaders(&self) -> Result<Vec<PartitionResult>, AdminError> {
        let Some(image) = self.image_if_quorum_leader() else {
            return Ok(Vec::new());
        };
        self.propose_election(ElectionType::Unclean, image.unclean_election_candidates())
            .await
    }

    /// The metadata image, when this broker's metadata node leads the
    /// quorum (es's active controller, the one that runs the periodic
    /// elections).
    fn image_if_quorum_leader(&self) -> Option<Arc<MetaImage>> {
        let node = self.metadata()?;
        node.is_leader().then(|| node.image())
    }

    /// Proposes an ElectLeaders of `partitions` (none: nothing proposed).
    async fn propose_election(
        &self,
        election: ElectionType,
        partitions: Vec<TopicPartitions>,
    ) -> Result<Vec<PartitionResult>, AdminError> {
        if partitions.is_empty() {
            return Ok(Vec::new());
        }
        self.propose_partitions(MetaRequest::ElectLeaders {
            election,
            partitions: Some(partitions),
        })
        .await
    }

    /// One check of the automatic rebalance: when this broker's metadata
    /// node leads the quorum and the rebalance is on, proposes a preferred
    /// ElectLeaders of the imbalanced partitions. The results (empty when
    /// nothing was proposed).
    pub async fn rebalance_leaders(&self) -> Result<Vec<PartitionResult>, AdminError> {
        let Some(image) = self.image_if_quorum_leader() else {
            return Ok(Vec::new());
        };
        let Some(dynamic) = image.auto_leader_rebalance() else {
            return Ok(Vec::new());
        };
        let set_dynamically = image
            .broker_configs
            .get("")
            .is_some_and(|c| c.contains_key(LEADER_IMBALANCE_PER_BROKER_PERCENTAGE));
        let percentage = if set_dynamically {
            dynamic
        } else {
            self.config.leader_rebalance.per_broker_percentage
        };
        self.propose_election(
            ElectionType::Preferred,
            image.preferred_leader_imbalance(percentage),
        )
        .await
    }
}
