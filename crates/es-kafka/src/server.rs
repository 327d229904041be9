//! The accept loop: bounded connections and graceful shutdown.
//!
//! A semaphore bounds how many connections are served at once; when it is
//! exhausted the loop stops accepting until one closes (the kernel's backlog
//! holds the rest). Shutdown is a `watch` flag: the loop stops accepting,
//! every connection stops reading, answers what it already read, and the
//! server returns once all of them are gone (or `drain_timeout` passes).

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

use crate::broker::Broker;
use crate::connection;

/// Accepts connections on `listener` until `shutdown` becomes true, then waits
/// up to `drain_timeout` for open connections to finish their requests.
pub async fn run(
    broker: Arc<Broker>,
    listener: TcpListener,
    mut shutdown: watch::Receiver<bool>,
    drain_timeout: Duration,
) {
    let limit = Arc::new(Semaphore::new(broker.config().connections_max.max(1)));
    let mut conns = JoinSet::new();
    loop {
        let permit = tokio::select! {
            p = limit.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            _ = shutdown.changed() => break,
        };
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = shutdown.changed() => break,
        };
        // Reap finished connections so the set stays bounded by the semaphore.
        while conns.try_join_next().is_some() {}
        match accepted {
            Ok((stream, addr)) => {
                let _ = stream.set_nodelay(true);
                let b = broker.clone();
                let rx = shutdown.clone();
                conns.spawn(async move {
                    tracing::debug!(peer = %addr, "accepted connection");
                    connection::serve(b, stream, addr.to_string(), rx).await;
                    drop(permit);
                });
            }
            Err(e) => {
                // Out of file descriptors and the like: back off briefly
                // instead of spinning, then keep serving.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    tracing::info!(
        open = conns.len(),
        "stopped accepting; draining connections"
    );
    // Parked fetches answer now instead of waiting out their max_wait_ms.
    broker.begin_shutdown();
    let drained = tokio::time::timeout(drain_timeout, async {
        while conns.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            open = conns.len(),
            "drain timed out; dropping remaining connections"
        );
        conns.abort_all();
    }
}
