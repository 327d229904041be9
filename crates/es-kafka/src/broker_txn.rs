//! The transaction coordinator's cluster side, as the broker provides it:
//! producer-id blocks granted by the metadata quorum ([`QuorumPids`]) and
//! the routing of commit/abort markers to partitions led by other brokers.
//!
//! The coordinator is blocking (it runs on blocking threads and fsyncs);
//! the quorum and the inter-broker client are async. [`run_on`] bridges
//! the two: the future runs on the broker's runtime and the blocking caller
//! waits for its answer with a timeout, so a lost quorum or a silent peer
//! costs a bounded wait and an error the caller retries, never a hang.

use std::future::Future;
use std::sync::{Arc, Weak};
use std::time::Duration;

use es_meta::records::MetaResponse;
use tokio::runtime::Handle;

use super::Broker;
use crate::txn::error::TxnError;
use crate::txn::{PidBlocks, PID_BLOCK_SIZE};

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
