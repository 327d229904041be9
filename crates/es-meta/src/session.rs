//! Broker sessions: registration and heartbeats on the broker's side, and
//! fencing on the controller leader's, as KRaft does.
//!
//! A broker registers (one entry; its epoch is that entry's index) and then
//! heartbeats every `broker.heartbeat.interval.ms` (2 s) to the leader,
//! saying how far it has applied the log. The leader unfences a registered
//! broker once it has applied at least up to its own registration (so it
//! knows the partitions it is given), and fences a broker it has not heard
//! from for `broker.session.timeout.ms` (9 s): its partitions get new
//! leaders from their ISR, or none. A new leader counts every broker as
//! heard at the moment it took over, so a change of leader fences nobody.
//! A broker in controlled shutdown is never unfenced (only registering
//! again ends it), and its heartbeats are answered with whether it may
//! exit yet.
//! Times are tokio's monotonic clock (paused and advanced by hand in the
//! simulation).

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::control::{ControlReply, ControlRequest};
use crate::node::{MetaError, MetaNode};
use crate::records::{BrokerId, MetaRequest, MetaResponse, RegisterBroker};

/// Kafka's `broker.heartbeat.interval.ms` default.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(2);
/// How often a broker in controlled shutdown asks whether it may exit.
const SHUTDOWN_POLL_INTERVAL: Duration = Duration::from_millis(250);
/// How often the leader looks for expired sessions.
const FENCE_CHECK_INTERVAL: Duration = Duration::from_millis(500);

#[derive(Clone, Copy, Debug)]
struct Heard {
    at: Instant,
    epoch: i64,
    applied_index: u64,
}

/// What the leader has heard from each broker.
#[derive(Debug)]
pub(crate) struct Sessions {
    timeout: Duration,
    heard: Mutex<HashMap<BrokerId, Heard>>,
    /// The leader term the table belongs to: a new term starts it afresh.
    term: Mutex<Option<u64>>,
    /// Woken by a heartbeat, so a broker that catches up is unfenced at
    /// once rather than at the next periodic check.
    beat: tokio::sync::Notify,
}

impl Sessions {
    pub(crate) fn new(timeout: Duration) -> Self {
        Sessions {
            timeout,
            heard: Mutex::new(HashMap::new()),
            term: Mutex::new(None),
            beat: tokio::sync::Notify::new(),
        }
    }

    pub(crate) fn heard(&self, broker_id: BrokerId, epoch: i64, applied_index: u64) {
        self.heard.lock().insert(
            broker_id,
            Heard {
                at: Instant::now(),
                epoch,
                applied_index,
            },
        );
        self.beat.notify_one();
    }

    /// How far `broker_id`, at `epoch`, has applied the log, as its last
    /// heartbeat said; None if not heard at that epoch.
    pub(crate) fn applied_index(&self, broker_id: BrokerId, epoch: i64) -> Option<u64> {
        self.heard
            .lock()
            .get(&broker_id)
            .filter(|h| h.epoch == epoch)
            .map(|h| h.applied_index)
    }
}

/// Runs on every node; acts while it leads: fences expired sessions and
/// unfences brokers that heartbeat and have caught up.
pub(crate) fn spawn_fencer(node: Weak<MetaNode>, mut shutdown: watch::Receiver<bool>) {
    tokio::spawn(async move {
        loop {
            let Some(sessions) = node.upgrade().map(|n| n.sessions().clone()) else {
                return;
            };
            let beat = sessions.beat.notified();
            tokio::select! {
                _ = tokio::time::sleep(FENCE_CHECK_INTERVAL) => {}
                _ = beat => {}
                _ = shutdown.changed() => return,
            }
            let Some(node) = node.upgrade() else { return };
            if *shutdown.borrow() {
                return;
            }
            if let Err(e) = check_sessions(&node).await {
                tracing::warn!(error = %e, "broker session check");
            }
        }
    });
}

async fn check_sessions(node: &MetaNode) -> Result<(), MetaError> {
    let metrics = node.raft().metrics().borrow().clone();
    let sessions = node.sessions();
    if metrics.state != openraft::ServerState::Leader {
        *sessions.term.lock() = None;
        return Ok(());
    }
    let now = Instant::now();
    {
        let mut term = sessions.term.lock();
        if *term != Some(metrics.current_term) {
            *term = Some(metrics.current_term);
            // A new leader: every broker counts as heard now, except that a
            // heartbeat already taken within the session stays (it says how
            // far the broker has applied, which unfencing needs).
            let mut heard = sessions.heard.lock();
            heard.retain(|_, h| now.duration_since(h.at) <= sessions.timeout);
            for b in node.image().brokers.values() {
                if heard.get(&b.id).is_none_or(|h| h.epoch != b.epoch) {
                    heard.insert(
                        b.id,
                        Heard {
                            at: now,
                            epoch: b.epoch,
                            applied_index: 0,
                        },
                    );
                }
            }
        }
    }
    let image = node.image();
    let mut proposals = Vec::new();
    {
        let heard = sessions.heard.lock();
        for b in image.brokers.values() {
            let h = heard.get(&b.id).filter(|h| h.epoch == b.epoch);
            let expired = h.is_none_or(|h| now.duration_since(h.at) > sessions.timeout);
            if !b.fenced && expired {
                tracing::warn!(broker = b.id, "broker session expired: fencing it");
                proposals.push(MetaRequest::FenceBroker {
                    broker_id: b.id,
                    epoch: b.epoch,
                });
            } else if b.fenced
                && b.shutdown_index.is_none()
                && !expired
                && h.is_some_and(|h| h.applied_index >= u64::try_from(b.epoch).unwrap_or(0))
            {
                tracing::info!(broker = b.id, "broker caught up: unfencing it");
                proposals.push(MetaRequest::UnfenceBroker {
                    broker_id: b.id,
                    epoch: b.epoch,
                });
            }
        }
    }
    for p in proposals {
        node.write(p).await?;
    }
    Ok(())
}

/// How many times a registration with an unknown outcome is sent again.
const REGISTER_ATTEMPTS: u32 = 50;
/// Pause between registration attempts.
const REGISTER_RETRY_BACKOFF: Duration = Duration::from_millis(200);

/// Registers this node's broker and heartbeats until `shutdown`. Returns
/// once registered, with the broker epoch; the heartbeats run on a task.
pub async fn register_broker(
    node: Arc<MetaNode>,
    registration: RegisterBroker,
    mut shutdown: watch::Receiver<bool>,
) -> Result<i64, MetaError> {
    let broker_id = registration.broker_id;
    // A registration whose fate is unknown (the leader moved, a connection
    // reset) is sent again: the same incarnation is answered with the epoch
    // it was registered at, as Kafka's controller answers a retry.
    let mut attempt = 0u32;
    let answer = loop {
        match node
            .write(MetaRequest::RegisterBroker(registration.clone()))
            .await
        {
            Ok((_, answer)) => break answer,
            Err(e @ (MetaError::NoLeader(_) | MetaError::Uncertain(_)))
                if attempt < REGISTER_ATTEMPTS && !*shutdown.borrow() =>
            {
                attempt += 1;
                tracing::warn!(error = %e, attempt, "broker registration; retrying");
                tokio::select! {
                    _ = tokio::time::sleep(REGISTER_RETRY_BACKOFF) => {}
                    _ = shutdown.changed() => return Err(e),
                }
            }
            Err(e) => return Err(e),
        }
    };
    let epoch = match answer {
        MetaResponse::Registered { broker_epoch } => broker_epoch,
        MetaResponse::Error { message, .. } => return Err(MetaError::Config(message)),
        other => return Err(MetaError::Fatal(format!("unexpected answer {other:?}"))),
    };
    tracing::info!(broker = broker_id, epoch, "broker registered");
    let weak = Arc::downgrade(&node);
    drop(node);
    tokio::spawn(async move {
        loop {
            let Some(node) = weak.upgrade() else { return };
            let applied_index = node.applied().borrow().last_applied.map_or(0, |l| l.index);
            let beat = ControlRequest::Heartbeat {
                broker_id,
                broker_epoch: epoch,
                applied_index,
            };
            // Each beat waits at most one interval: a beat stuck on a
            // leader that is gone must not keep the next one from reaching
            // the new leader before the session expires there.
            match tokio::time::timeout(HEARTBEAT_INTERVAL, node.forward(beat)).await {
                Ok(Ok(ControlReply::Heartbeat { .. })) => {}
                Ok(Ok(other)) => tracing::debug!(?other, "heartbeat answer"),
                Ok(Err(e)) => tracing::warn!(error = %e, "broker heartbeat"),
                Err(_) => tracing::warn!("broker heartbeat: no answer within the interval"),
            }
            drop(node);
            tokio::select! {
                _ = tokio::time::sleep(HEARTBEAT_INTERVAL) => {}
                _ = shutdown.changed() => return,
            }
        }
    });
    Ok(epoch)
}

/// A broker's controlled shutdown (on SIGTERM): proposes its
/// `controlled_shutdown.v1` entry (it then leads nothing and leaves the
/// ISRs it is not the last member of), then asks the leader with
/// heartbeats until it answers that the broker may exit (every other
/// active broker has applied the entry: the new leaders know) or until
/// `timeout` passes. `Ok(true)`: exit now; `Ok(false)`: the wait timed out
/// (exit anyway, as Kafka does after its controlled shutdown retries).
pub async fn controlled_shutdown(
    node: &MetaNode,
    broker_id: BrokerId,
    broker_epoch: i64,
    timeout: Duration,
) -> Result<bool, MetaError> {
    let deadline = Instant::now() + timeout;
    let (_, answer) = node
        .write(MetaRequest::ControlledShutdown {
            broker_id,
            broker_epoch,
        })
        .await?;
    match answer {
        MetaResponse::ShuttingDown { since_index } => {
            tracing::info!(
                broker = broker_id,
                since_index,
                "controlled shutdown: leading nothing"
            )
        }
        MetaResponse::Error { message, .. } => return Err(MetaError::Config(message)),
        other => return Err(MetaError::Fatal(format!("unexpected answer {other:?}"))),
    }
    loop {
        let applied_index = node.applied().borrow().last_applied.map_or(0, |l| l.index);
        let beat = ControlRequest::Heartbeat {
            broker_id,
            broker_epoch,
            applied_index,
        };
        match node.forward(beat).await {
            Ok(ControlReply::Heartbeat {
                may_shut_down: true,
                ..
            }) => return Ok(true),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "controlled shutdown heartbeat"),
        }
        if Instant::now() >= deadline {
            return Ok(false);
        }
        tokio::time::sleep(SHUTDOWN_POLL_INTERVAL).await;
    }
}
