//! Waiting for group-commit fsyncs from async handlers, with one cross-thread
//! wake per fsync rather than one per waiting request.
//!
//! es-storage runs a fsync on a sync-pool thread and then calls the callback
//! of every request it covered. If each callback woke its own task, the sync
//! thread would make one wake-up system call (futex or eventfd) per request,
//! and the runtime worker would park and be woken again between them: with a
//! producer's five requests in flight that chain cost more than the fsync.
//! Instead, the first callback of a burst wakes its task directly and the
//! others queue their results here; that task, now running on a runtime
//! worker, hands the queued results on ([`Durable::wait`] drains the queue),
//! which wakes the other tasks cheaply from inside the runtime.

use std::sync::Arc;

use es_storage::{DurableCallback, Partition, StorageError};
use parking_lot::Mutex;
use tokio::sync::oneshot;

type Done = (
    oneshot::Sender<Result<(), StorageError>>,
    Result<(), StorageError>,
);

struct Queue {
    items: Vec<Done>,
    /// A woken task is due to drain `items`.
    drainer: bool,
}

static QUEUE: Mutex<Queue> = Mutex::new(Queue {
    items: Vec::new(),
    drainer: false,
});

/// A registered wait for durability.
pub struct Durable {
    rx: oneshot::Receiver<Result<(), StorageError>>,
}

impl Durable {
    /// Registers interest in the records of `log` below `end_offset` becoming durable.
    pub fn register(log: &Arc<Partition>, end_offset: u64) -> Durable {
        let (tx, rx) = oneshot::channel();
        log.when_durable(end_offset, callback(&QUEUE, tx));
        Durable { rx }
    }

    /// Resolves once the records are durable (or with the error that
    /// prevents it), then passes on any results queued meanwhile.
    pub async fn wait(self) -> Result<(), StorageError> {
        let r = self.rx.await.unwrap_or(Err(StorageError::Closed));
        drain(&QUEUE);
        r
    }
}

fn callback(
    queue: &'static Mutex<Queue>,
    tx: oneshot::Sender<Result<(), StorageError>>,
) -> DurableCallback {
    Box::new(move |r| {
        let mut q = queue.lock();
        if q.drainer {
            q.items.push((tx, r));
            return;
        }
        q.drainer = true;
        drop(q);
        if tx.send(r).is_err() {
            // Nobody will drain: the waiting task is gone (its connection
            // closed). Deliver what queued behind it from here.
            drain(queue);
        }
    })
}

/// Sends every queued result and lets the next callback wake a task directly.
fn drain(queue: &Mutex<Queue>) {
    let items = {
        let mut q = queue.lock();
        q.drainer = false;
        std::mem::take(&mut q.items)
    };
    for (tx, r) in items {
        // A receiver that is gone belongs to a closed connection.
        let _ = tx.send(r);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue() -> &'static Mutex<Queue> {
        Box::leak(Box::new(Mutex::new(Queue {
            items: Vec::new(),
            drainer: false,
        })))
    }

    #[test]
    fn queued_results_reach_their_tasks_through_the_drainer() {
        let q = queue();
        let (tx1, mut rx1) = oneshot::channel();
        let (tx2, mut rx2) = oneshot::channel();
        let (tx3, mut rx3) = oneshot::channel();
        callback(q, tx1)(Ok(()));
        callback(q, tx2)(Err(StorageError::Closed));
        callback(q, tx3)(Ok(()));
        assert!(rx1.try_recv().unwrap().is_ok());
        assert!(
            rx2.try_recv().is_err(),
            "queued until the first task drains"
        );
        drain(q);
        assert!(matches!(rx2.try_recv(), Ok(Err(StorageError::Closed))));
        assert!(rx3.try_recv().unwrap().is_ok());
        // The next burst wakes its first task directly again.
        let (tx4, mut rx4) = oneshot::channel();
        callback(q, tx4)(Ok(()));
        assert!(rx4.try_recv().unwrap().is_ok());
    }

    #[test]
    fn a_gone_drainer_delivers_from_the_callback() {
        let q = queue();
        let (tx1, rx1) = oneshot::channel::<Result<(), StorageError>>();
        drop(rx1);
        let (tx2, mut rx2) = oneshot::channel();
        let (tx3, mut rx3) = oneshot::channel();
        // The first callback's task is gone: its send fails and the
        // callback drains; later callbacks must not be stranded.
        callback(q, tx1)(Ok(()));
        callback(q, tx2)(Ok(()));
        assert!(rx2.try_recv().unwrap().is_ok());
        q.lock().drainer = true;
        callback(q, tx3)(Ok(()));
        assert!(rx3.try_recv().is_err());
        drain(q);
        assert!(rx3.try_recv().unwrap().is_ok());
    }
}
