//! Waiting for group-commit fsyncs (acks=1) and for the in-sync replicas
//! (acks=all) from async handlers.
//!
//! es-storage runs a fsync on a sync-pool thread and then calls the callback
//! of every request it covered; here each callback completes its own oneshot,
//! which wakes the waiting task. A request that touched several partitions
//! registers one wait per partition and may await them in any order: each
//! result is delivered to its own receiver, whatever order the fsyncs of the
//! partitions finish in.
//!
//! (A variant that woke only the first task of a burst and let it hand the
//! other results on stalled the broker: a produce awaiting partition A was
//! never polled for partition B's result, the hand-on never ran, and every
//! later result queued behind it. Measured on a quiet machine, it had not
//! raised throughput either; see docs/benchmarks.md.)

use es_storage::{DurableCallback, StorageError};

use crate::partition_log::PartitionLog;
use crate::replica::WaitError;
use tokio::sync::oneshot;

/// A registered wait for durability.
pub struct Durable {
    rx: oneshot::Receiver<Result<(), WaitError>>,
}

impl Durable {
    /// Registers interest in the records of `log` below `end_offset` becoming durable.
    pub fn register(log: &PartitionLog, end_offset: u64) -> Durable {
        let (tx, rx) = oneshot::channel();
        log.when_durable(end_offset, callback(tx));
        Durable { rx }
    }

    /// Registers interest in the records of `log` below `end_offset` being
    /// on every in-sync replica's disk (acks=all), `min_isr` checked when
    /// they are.
    pub fn replicated(log: &PartitionLog, end_offset: u64, min_isr: usize) -> Durable {
        let (tx, rx) = oneshot::channel();
        log.when_replicated(
            end_offset,
            min_isr,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        );
        Durable { rx }
    }

    /// Resolves once the records are durable, or with the error that
    /// prevents it (`Closed` if the partition dropped the callback unrun).
    pub async fn wait(self) -> Result<(), WaitError> {
        self.rx
            .await
            .unwrap_or(Err(WaitError::Storage(StorageError::Closed)))
    }
}

fn callback(tx: oneshot::Sender<Result<(), WaitError>>) -> DurableCallback {
    Box::new(move |r| {
        // A receiver that is gone belongs to a request that was dropped.
        let _ = tx.send(r.map_err(WaitError::Storage));
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A produce to partitions A and B awaits A first; B's fsync finishes
    /// first. Both results must arrive.
    #[tokio::test]
    async fn results_arrive_whatever_order_the_fsyncs_finish_in() {
        let (ta, ra) = oneshot::channel();
        let (tb, rb) = oneshot::channel();
        let (ca, cb) = (callback(ta), callback(tb));
        let a = Durable { rx: ra };
        let b = Durable { rx: rb };
        let waiter = tokio::spawn(async move {
            let ra = a.wait().await;
            let rb = b.wait().await;
            (ra.is_ok(), rb.is_err())
        });
        tokio::task::yield_now().await;
        std::thread::spawn(move || {
            cb(Err(StorageError::Closed));
            ca(Ok(()));
        })
        .join()
        .expect("callbacks");
        let got = tokio::time::timeout(std::time::Duration::from_secs(30), waiter)
            .await
            .expect("both waits resolve")
            .expect("task");
        assert_eq!(got, (true, true));
    }

    #[test]
    fn a_dropped_callback_resolves_as_closed() {
        let (tx, rx) = oneshot::channel();
        drop(callback(tx));
        let d = Durable { rx };
        let r = block_on(d.wait());
        assert!(matches!(r, Err(WaitError::Storage(StorageError::Closed))));
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
            .block_on(f)
    }
}
