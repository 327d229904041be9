//! The transaction coordinator's cluster side, as the broker provides it:
//! producer-id blocks granted by the metadata quorum ([`QuorumPids`]) and
//! the routing of commit/abort markers to partitions led by other brokers.
//!
//! The coordinator is blocking (it runs on blocking threads and fsyncs);
//! the quorum and the inter-broker client are async. [`run_on`] bridges
//! the two: the future runs on the broker's runtime and the blocking caller
//! waits for its answer with a timeout, so a lost quorum or a silent peer
//! costs a bounded wait and an error the caller retries, never a hang.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Weak};
use std::time::Duration;

use es_meta::image::NO_LEADER;
use es_meta::records::MetaResponse;
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{ProducerId, TopicName, WriteTxnMarkersRequest};
use kafka_protocol::protocol::StrBytes;
use tokio::runtime::Handle;

use super::routing::CoordinatorPlace;
use super::Broker;
use crate::interbroker::InterBrokerClient;
use crate::topics::{CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC};
use crate::txn::error::TxnError;
use crate::txn::markers::{GroupTarget, MarkerBatch, MarkerTarget};
use crate::txn::{PidBlocks, TopicPartition, PID_BLOCK_SIZE};

/// How long a producer-id block may take to be granted (one Raft round
/// trip; longer means the quorum has no leader).
pub const PID_BLOCK_TIMEOUT_MS: u64 = 10_000;

/// Runs `f` on `rt` and waits for it on this (blocking) thread for at most
/// `timeout`. `None` when it did not finish in time (it is left to finish
/// or fail on its own).
pub fn run_on<F>(rt: &Handle, f: F, timeout: Duration) -> Option<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    rt.spawn(async move {
        let _ = tx.send(f.await);
    });
    rx.recv_timeout(timeout).ok()
}

/// Producer-id blocks from the metadata quorum, for this broker.
#[derive(Debug)]
pub struct QuorumPids {
    broker: Weak<Broker>,
    rt: Handle,
}

impl QuorumPids {
    pub fn new(broker: &Arc<Broker>, rt: Handle) -> Self {
        QuorumPids {
            broker: Arc::downgrade(broker),
            rt,
        }
    }
}

impl PidBlocks for QuorumPids {
    fn next_block(&self, at_least: i64) -> Result<(i64, i64), TxnError> {
        let broker = self
            .broker
            .upgrade()
            .ok_or(TxnError::CoordinatorNotAvailable)?;
        let timeout = Duration::from_millis(PID_BLOCK_TIMEOUT_MS);
        let count = i32::try_from(PID_BLOCK_SIZE).unwrap_or(i32::MAX);
        let answer = run_on(
            &self.rt,
            async move { broker.allocate_producer_ids(count, at_least).await },
            timeout,
        );
        match answer {
            Some(Ok(MetaResponse::ProducerIds { first, count })) => first
                .checked_add(i64::from(count))
                .map(|until| (first, until))
                .ok_or(TxnError::ProducerIdsExhausted),
            Some(Ok(other)) => {
                tracing::warn!(answer = ?other, "the quorum refused a producer-id block");
                Err(TxnError::CoordinatorNotAvailable)
            }
            Some(Err(e)) => {
                tracing::warn!(error = %e.message, "no producer-id block from the quorum");
                Err(TxnError::CoordinatorNotAvailable)
            }
            None => {
                tracing::warn!("no producer-id block from the quorum in time");
                Err(TxnError::CoordinatorNotAvailable)
            }
        }
    }
}

/// How long one WriteTxnMarkers round trip to a leader may take before the
/// coordinator gives up for this round (the next tick retries).
pub const MARKERS_TIMEOUT_MS: u64 = 15_000;
/// The WriteTxnMarkers version sent (flexible; Kafka 4's brokers send 1+).
pub const WRITE_TXN_MARKERS_VERSION: i16 = 1;

impl Broker {
    /// Where the marker of `topic`-`partition` goes, from the applied
    /// metadata: written here when this broker leads it, sent to its
    /// leader otherwise.
    pub(super) fn txn_marker_target(&self, topic: &str, partition: i32) -> MarkerTarget {
        let image = self.image();
        match self.leadership(image.as_deref(), topic, partition) {
            None => MarkerTarget::Gone,
            Some(l) if l.leader == self.node_id() => self
                .topic(topic)
                .and_then(|t| t.partition(partition))
                .map_or(MarkerTarget::Unavailable, |s| {
                    MarkerTarget::Local(s.log.clone())
                }),
            // No leader now, or (before the quorum has started) hosted
            // elsewhere: wait until the metadata says who leads it.
            Some(l) if l.leader == NO_LEADER => MarkerTarget::Unavailable,
            Some(l) => MarkerTarget::Remote(l.leader),
        }
    }

    /// Which broker settles `group`'s transactional offsets: the leader of
    /// its `__consumer_offsets` partition.
    pub(super) fn txn_group_target(&self, group: &str) -> GroupTarget {
        match self.coordinator_place(CONSUMER_OFFSETS_TOPIC, group) {
            None | Some(CoordinatorPlace::Here) => GroupTarget::Here,
            Some(CoordinatorPlace::Elsewhere(e)) => GroupTarget::Remote {
                broker: e.id,
                partition: self.offsets_partition(group),
            },
            Some(CoordinatorPlace::Unavailable) => GroupTarget::Unavailable,
        }
    }

    /// Sends one WriteTxnMarkers to broker `broker`; the partitions it
    /// wrote (answered NONE). Blocking, bounded by [`MARKERS_TIMEOUT_MS`].
    pub(super) fn txn_send_markers(
        &self,
        broker: i32,
        batch: &MarkerBatch,
    ) -> Result<Vec<TopicPartition>, String> {
        let rt = Handle::try_current().map_err(|_| "no runtime to send markers on".to_string())?;
        let image = self.image();
        let addr = self
            .inter_broker_addr(image.as_deref(), broker)
            .ok_or_else(|| format!("broker {broker} has no endpoint"))?;
        let req = write_txn_markers_request(batch);
        let client = self.extension(InterBrokerClient::default);
        let sent = run_on(
            &rt,
            async move {
                client
                    .send(broker, &addr, WRITE_TXN_MARKERS_VERSION, &req)
                    .await
            },
            Duration::from_millis(MARKERS_TIMEOUT_MS),
        );
        let resp = match sent {
            None => return Err("timed out".into()),
            Some(Err(e)) => return Err(e.to_string()),
            Some(Ok(r)) => r,
        };
        let mut done = Vec::new();
        for m in resp.markers {
            if m.producer_id.0 != batch.producer_id {
                continue;
            }
            for t in m.topics {
                for p in t.partitions {
                    if p.error_code == 0 {
                        done.push(TopicPartition::new(t.name.0.as_str(), p.partition_index));
                    } else {
                        tracing::warn!(
                            broker,
                            topic = %t.name.0,
                            partition = p.partition_index,
                            error = p.error_code,
                            "a leader refused a transaction marker"
                        );
                    }
                }
            }
        }
        Ok(done)
    }
}

/// The WriteTxnMarkers request of one batch.
pub fn write_txn_markers_request(batch: &MarkerBatch) -> WriteTxnMarkersRequest {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in &batch.partitions {
        by_topic
            .entry(tp.topic.as_str())
            .or_default()
            .push(tp.partition);
    }
    let mut m = WritableTxnMarker::default();
    m.producer_id = ProducerId(batch.producer_id);
    m.producer_epoch = batch.producer_epoch;
    m.transaction_result = batch.commit;
    m.coordinator_epoch = batch.coordinator_epoch;
    m.topics = by_topic
        .into_iter()
        .map(|(name, partitions)| {
            let mut t = WritableTxnMarkerTopic::default();
            t.name = TopicName(StrBytes::from_string(name.to_string()));
            t.partition_indexes = partitions;
            t
        })
        .collect();
    let mut r = WriteTxnMarkersRequest::default();
    r.markers = vec![m];
    r
}

impl Broker {
    /// Whether another broker coordinates transactional id `id` (false when
    /// this one does, or when nothing places it yet: a single node).
    pub fn txn_coordinated_elsewhere(&self, id: &str) -> bool {
        matches!(
            self.coordinator_place(TRANSACTION_STATE_TOPIC, id),
            Some(CoordinatorPlace::Elsewhere(_))
        )
    }
}

#[cfg(test)]
mod tests {
    use crate::handlers::wire_client::open;
    use crate::txn::PID_BLOCK_SIZE;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_single_node_takes_its_blocks_from_its_quorum() {
        let dir = tempfile::tempdir().expect("tmp");
        let b = open(dir.path()).await;
        let b2 = b.clone();
        let pids = tokio::task::spawn_blocking(move || {
            (0..PID_BLOCK_SIZE + 1)
                .map(|_| b2.txn().allocate_producer_id().expect("pid"))
                .collect::<Vec<_>>()
        })
        .await
        .expect("join");
        let image = b.image().expect("image");
        assert_eq!(pids[0], 0);
        assert_eq!(pids.last().copied(), Some(PID_BLOCK_SIZE));
        assert_eq!(
            image.next_producer_id,
            2 * PID_BLOCK_SIZE,
            "two blocks, one entry each"
        );
    }
}
