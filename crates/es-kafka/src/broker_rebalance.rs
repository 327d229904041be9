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

use std::sync::Weak;
use std::time::Duration;

use es_meta::image::LEADER_IMBALANCE_PER_BROKER_PERCENTAGE;
use es_meta::records::{ElectionType, MetaRequest, PartitionResult};

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

impl Broker {
    /// Every `leader.imbalance.check.interval.seconds`, [`Broker::rebalance_leaders`].
    /// Holds the broker weakly: ends when it is gone or stopping.
    pub(crate) async fn leader_rebalance_task(b: Weak<Broker>) {
        let Some(first) = b.upgrade() else {
            return;
        };
        let settings = first.config.leader_rebalance.clone();
        if !settings.enable {
            return;
        }
        let period = settings.check_interval.max(Duration::from_millis(100));
        drop(first);
        Broker::every(b, period, |me| async move {
            match me.rebalance_leaders().await {
                Ok(results) if !results.is_empty() => {
                    let elected = results.iter().filter(|r| r.error_code == 0).count();
                    tracing::info!(
                        partitions = results.len(),
                        elected,
                        "automatic preferred leader election"
                    );
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::info!(code = e.code, message = %e.message, "automatic preferred leader election failed")
                }
            }
        })
        .await
    }

    /// Every `unclean.leader.election.interval.ms`,
    /// [`Broker::elect_unclean_leaders`]. Holds the broker weakly.
    pub(crate) async fn unclean_election_task(b: Weak<Broker>) {
        let Some(first) = b.upgrade() else {
            return;
        };
        let period = first
            .config
            .leader_rebalance
            .unclean_interval
            .max(Duration::from_millis(100));
        drop(first);
        Broker::every(b, period, |me| async move {
            match me.elect_unclean_leaders().await {
                Ok(results) if !results.is_empty() => {
                    let elected = results.iter().filter(|r| r.error_code == 0).count();
                    tracing::warn!(
                        partitions = results.len(),
                        elected,
                        "periodic unclean leader election: leaderless partitions of topics with unclean.leader.election.enable=true take a replica outside their ISR; what the old ISR had beyond its log is lost"
                    );
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::info!(code = e.code, message = %e.message, "periodic unclean leader election failed")
                }
            }
        })
        .await
    }

    /// One check of the periodic unclean election: when this broker's
    /// metadata node leads the quorum, proposes an unclean ElectLeaders of
    /// the candidates. The results (empty when nothing was proposed).
    pub async fn elect_unclean_leaders(&self) -> Result<Vec<PartitionResult>, AdminError> {
        let Some(node) = self.metadata() else {
            return Ok(Vec::new());
        };
        if !node.is_leader() {
            return Ok(Vec::new());
        }
        let partitions = node.image().unclean_election_candidates();
        if partitions.is_empty() {
            return Ok(Vec::new());
        }
        self.propose_partitions(MetaRequest::ElectLeaders {
            election: ElectionType::Unclean,
            partitions: Some(partitions),
        })
        .await
    }

    /// One check of the automatic rebalance: when this broker's metadata
    /// node leads the quorum and the rebalance is on, proposes a preferred
    /// ElectLeaders of the imbalanced partitions. The results (empty when
    /// nothing was proposed).
    pub async fn rebalance_leaders(&self) -> Result<Vec<PartitionResult>, AdminError> {
        let Some(node) = self.metadata() else {
            return Ok(Vec::new());
        };
        if !node.is_leader() {
            return Ok(Vec::new());
        }
        let image = node.image();
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
        let partitions = image.preferred_leader_imbalance(percentage);
        if partitions.is_empty() {
            return Ok(Vec::new());
        }
        self.propose_partitions(MetaRequest::ElectLeaders {
            election: ElectionType::Preferred,
            partitions: Some(partitions),
        })
        .await
    }
}
