//! Helpers shared by es-storage's test binaries (each includes this module
//! with `mod common;`).

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
