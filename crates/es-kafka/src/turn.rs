//! A request's place in its connection's order.
//!
//! Requests of one connection run concurrently, but their state changes
//! keep the order the client sent them in: each request holds a [`Turn`]
//! that resolves once the request before it has finished its ordered phase
//! (a produce's append, an admin change). The connection hands out the
//! turns ([`crate::connection`]); handlers wait for theirs and finish it as
//! soon as their ordered phase is over, so slow tails (fsync waits, long
//! polls) run outside it. Dropping a turn finishes it, so a handler that
//! fails or panics never blocks the requests behind it.

use tokio::sync::oneshot;

/// A request's place in its connection's order: [`Turn::wait`] resolves when
/// the previous request has called [`Turn::finish`] (or dropped its turn).
#[derive(Debug)]
pub struct Turn {
    prev: Option<oneshot::Receiver<()>>,
    done: Option<oneshot::Sender<()>>,
}

impl Turn {
    /// A turn with no predecessor.
    pub fn first() -> (Turn, oneshot::Receiver<()>) {
        let (tx, rx) = oneshot::channel();
        (
            Turn {
                prev: None,
                done: Some(tx),
            },
            rx,
        )
    }

    /// The turn after the one whose finish is `prev`.
    pub fn after(prev: oneshot::Receiver<()>) -> (Turn, oneshot::Receiver<()>) {
        let (tx, rx) = oneshot::channel();
        (
            Turn {
                prev: Some(prev),
                done: Some(tx),
            },
            rx,
        )
    }

    /// A turn that is already ours (tests, internal calls).
    pub fn free() -> Turn {
        Turn {
            prev: None,
            done: None,
        }
    }

    /// Waits until the previous request's ordered phase is over.
    pub async fn wait(&mut self) {
        if let Some(rx) = self.prev.take() {
            // An Err means the previous handler dropped its turn: also over.
            let _ = rx.await;
        }
    }

    /// Ends this request's ordered phase; the next request may proceed.
    pub fn finish(&mut self) {
        self.prev = None;
        if let Some(tx) = self.done.take() {
            let _ = tx.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn turns_chain_in_order() {
        let (mut a, next) = Turn::first();
        let (mut b, _next) = Turn::after(next);
        a.wait().await;
        let waiter = tokio::spawn(async move {
            b.wait().await;
            1
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        a.finish();
        assert_eq!(waiter.await.ok(), Some(1));
    }

    #[tokio::test]
    async fn a_dropped_turn_releases_the_next() {
        let (a, next) = Turn::first();
        let (mut b, _next) = Turn::after(next);
        drop(a);
        b.wait().await;
    }
}
