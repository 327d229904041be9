//! The channel a partition's non-blocking durability callback reports on,
//! so that a test can wait (with a bound) for "durable" or the fsync error,
//! the way the produce path waits on its own callback.

use std::sync::mpsc::{channel, Receiver};
use std::sync::Arc;

use es_storage::{Partition, StorageError};

/// Where the durability callback of [`durable_channel`] reports.
pub type Durable = Receiver<Result<(), StorageError>>;

/// Registers for the durability of `p`'s records below `end` with the
/// non-blocking callback, as the produce path does; the result arrives on
/// the returned channel.
pub fn durable_channel(p: &Arc<Partition>, end: u64) -> Durable {
    let (tx, rx) = channel();
    p.when_durable(
        end,
        Box::new(move |r| {
            let _ = tx.send(r);
        }),
    );
    rx
}
