//! Mirror topics (the migration issue): es follows topics of a source Kafka
//! cluster and keeps every record at the offset it has there, copies
//! consumer groups' committed offsets unchanged, and promotes a mirror
//! topic to an ordinary, writable one at cut-over.
//!
//! The metadata says what to mirror (links and mirror topics, es-meta's
//! `mirror` module, changed by `es-broker mirror ...` through es's own
//! admin request); this crate does it. [`MirrorService`] runs one
//! [`worker`] thread per link, started, restarted (when the link's
//! settings change) and stopped as the metadata says, and answers the
//! request layer's status and promote calls
//! ([`es_kafka::mirror::MirrorControl`]). The source is read with
//! librdkafka (the `rdkafka` crate): SASL, TLS, leader changes, fetch
//! sessions and read_committed filtering are those of a client thousands of
//! deployments use, not a second client written here.
//!
//! What a mirror copies: each committed record's key, value (null kept
//! distinct from empty), headers and timestamp, at its source offset;
//! aborted records, transaction markers and offsets compaction removed
//! stay gaps. What it does not: producer ids and sequences (a mirror topic
//! is written only by the mirror), compression (es stores records).

pub mod acls;
pub mod copy;
pub mod groups;
pub mod ids;
pub mod quotas;
pub mod schedule;
pub mod source;
pub mod status;
pub mod topics;
pub mod worker;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use es_kafka::broker::Broker;
use es_kafka::mirror::{BoxFuture, MirrorControl, MirrorSlot, PartitionStatus, TopicStatus};
use es_meta::mirror::{MirrorLink, MirrorState, MirrorTopic};
use parking_lot::Mutex;
use tokio::runtime::Handle;

use crate::status::Shared;
use crate::worker::Command;

/// How often the service compares the running workers with the metadata.
const RECONCILE: Duration = Duration::from_secs(1);
/// Wait between promotion attempts while a topic catches up.
const PROMOTE_RETRY: Duration = Duration::from_millis(500);

/// A running worker.
struct Running {
    link: MirrorLink,
    stop: Arc<AtomicBool>,
    commands: mpsc::Sender<Command>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Running {
    fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The mirror service of one broker.
pub struct MirrorService {
    me: Weak<MirrorService>,
    broker: Arc<Broker>,
    rt: Handle,
    shared: Arc<Shared>,
    running: Mutex<HashMap<String, Running>>,
}

impl std::fmt::Debug for MirrorService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MirrorService")
            .field("links", &self.running.lock().keys().collect::<Vec<_>>())
            .finish()
    }
}

impl MirrorService {
    /// Starts the service on `broker` (inside a tokio runtime) and
    /// registers it with the request layer.
    pub fn start(broker: Arc<Broker>) -> Arc<MirrorService> {
        let svc = Arc::new_cyclic(|me| MirrorService {
            me: me.clone(),
            broker: broker.clone(),
            rt: Handle::current(),
            shared: Arc::new(Shared::default()),
            running: Mutex::new(HashMap::new()),
        });
        broker
            .extension(MirrorSlot::default)
            .set(svc.clone() as Arc<dyn MirrorControl>);
        let weak = Arc::downgrade(&svc);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(RECONCILE);
            loop {
                tick.tick().await;
                let Some(svc) = weak.upgrade() else { return };
                // Most brokers have no link: looking costs a lock, and
                // only a change goes to a blocking thread (stopping a
                // worker joins its thread).
                if svc.in_step() {
                    continue;
                }
                let s = svc.clone();
                if tokio::task::spawn_blocking(move || s.reconcile())
                    .await
                    .is_err()
                {
                    return;
                }
            }
        });
        svc
    }

    /// Whether the running workers are exactly the metadata's links.
    fn in_step(&self) -> bool {
        let Some(image) = self.broker.image() else {
            return true;
        };
        let running = self.running.lock();
        running.len() == image.mirror_links.len()
            && running
                .iter()
                .all(|(name, r)| image.mirror_links.get(name) == Some(&r.link))
    }

    /// Starts, restarts and stops workers to match the metadata's links.
    fn reconcile(&self) {
        let Some(image) = self.broker.image() else {
            return;
        };
        let mut running = self.running.lock();
        let gone: Vec<String> = running
            .iter()
            .filter(|(name, r)| image.mirror_links.get(*name) != Some(&r.link))
            .map(|(name, _)| name.clone())
            .collect();
        for name in gone {
            if let Some(r) = running.remove(&name) {
                r.stop();
            }
            if !image.mirror_links.contains_key(&name) {
                let topics: Vec<String> = image
                    .mirror_topics
                    .values()
                    .filter(|t| t.link == name)
                    .map(|t| t.topic.clone())
                    .collect();
                self.shared.forget(&name, &topics);
            }
        }
        for (name, link) in &image.mirror_links {
            if running.contains_key(name) {
                continue;
            }
            let stop = Arc::new(AtomicBool::new(false));
            let (tx, rx) = mpsc::channel();
            let (b, rt, l, s, sh) = (
                self.broker.clone(),
                self.rt.clone(),
                link.clone(),
                stop.clone(),
                self.shared.clone(),
            );
            let thread = std::thread::Builder::new()
                .name(format!("mirror-{name}"))
                .spawn(move || worker::run(b, rt, l, s, rx, sh));
            match thread {
                Ok(t) => {
                    running.insert(
                        name.clone(),
                        Running {
                            link: link.clone(),
                            stop,
                            commands: tx,
                            thread: Some(t),
                        },
                    );
                }
                Err(e) => tracing::error!(link = %name, error = %e, "mirror worker not started"),
            }
        }
    }

    /// Stops every worker.
    pub fn shutdown(&self) {
        let all: Vec<Running> = self.running.lock().drain().map(|(_, r)| r).collect();
        for r in all {
            r.stop();
        }
    }

    fn topic_status(&self, t: &MirrorTopic) -> TopicStatus {
        let stats = self.shared.topic(&t.topic);
        let error = stats
            .error
            .clone()
            .or_else(|| self.shared.link_error_of(&t.link))
            .or_else(|| {
                stats
                    .partitions
                    .iter()
                    .find_map(|(p, s)| s.error.as_ref().map(|e| format!("partition {p}: {e}")))
            });
        let state = match t.state {
            MirrorState::Promoted => "promoted",
            MirrorState::Paused => "paused",
            MirrorState::Active if error.is_some() => "failed",
            MirrorState::Active => "active",
        };
        let mut partitions = Vec::new();
        if let Some(local) = self.broker.topic(&t.topic) {
            for slot in local.partitions() {
                let end = i64::try_from(slot.log.storage().log_end_offset()).unwrap_or(-1);
                let s = stats
                    .partitions
                    .get(&slot.index)
                    .cloned()
                    .unwrap_or_else(status::PartitionStats::unknown);
                partitions.push(PartitionStatus {
                    partition: slot.index,
                    source_high_watermark: s.source_hw,
                    mirrored_end: end,
                    lag: if s.source_hw < 0 {
                        -1
                    } else {
                        (s.source_hw - end).max(0)
                    },
                    records_copied: s.records,
                    bytes_copied: s.bytes,
                    records_per_second: s.records_per_second(),
                    offsets_skipped: s.skipped,
                    error: s.error,
                });
            }
        }
        TopicStatus {
            topic: t.topic.clone(),
            link: t.link.clone(),
            source_topic: t.source_topic.clone(),
            state: state.into(),
            error: if t.state == MirrorState::Promoted {
                None
            } else {
                error
            },
            partitions,
        }
    }

    async fn promote_topic(
        self: Arc<Self>,
        topic: String,
        max_lag: u64,
        timeout: Duration,
    ) -> Result<Vec<PartitionStatus>, String> {
        let deadline = Instant::now() + timeout;
        loop {
            let image = self.broker.image().ok_or("no metadata yet")?;
            let mt = image
                .mirror_topics
                .get(&topic)
                .cloned()
                .ok_or_else(|| format!("{topic} is not a mirror topic"))?;
            if mt.state == MirrorState::Promoted {
                return Err(format!("{topic} is already promoted"));
            }
            let tx = self
                .running
                .lock()
                .get(&mt.link)
                .map(|r| r.commands.clone())
                .ok_or_else(|| format!("link {} is not running on this node", mt.link))?;
            let (reply, rx) = tokio::sync::oneshot::channel();
            tx.send(Command::Promote {
                topic: topic.clone(),
                max_lag,
                reply,
            })
            .map_err(|_| "the link's worker stopped".to_string())?;
            match rx
                .await
                .map_err(|_| "the link's worker stopped".to_string())?
            {
                Ok(parts) => {
                    let promoted = MirrorTopic {
                        state: MirrorState::Promoted,
                        promoted_ms: Some(now_ms()),
                        ..mt
                    };
                    if let Err(e) = self.broker.put_mirror_topics(vec![promoted]).await {
                        let _ = tx.send(Command::Resume {
                            topic: topic.clone(),
                        });
                        return Err(format!("marking {topic} promoted: {}", e.message));
                    }
                    tracing::info!(%topic, "mirror topic promoted");
                    return Ok(parts);
                }
                Err(e) if Instant::now() + PROMOTE_RETRY < deadline => {
                    tracing::debug!(%topic, reason = %e, "not caught up yet");
                    tokio::time::sleep(PROMOTE_RETRY).await;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

impl MirrorControl for MirrorService {
    fn status(&self) -> Vec<TopicStatus> {
        let Some(image) = self.broker.image() else {
            return Vec::new();
        };
        image
            .mirror_topics
            .values()
            .map(|t| self.topic_status(t))
            .collect()
    }

    fn promote(
        &self,
        topic: String,
        max_lag: u64,
        timeout: Duration,
    ) -> BoxFuture<Result<Vec<PartitionStatus>, String>> {
        match self.me.upgrade() {
            Some(svc) => Box::pin(svc.promote_topic(topic, max_lag, timeout)),
            None => Box::pin(async { Err("the mirror service stopped".to_string()) }),
        }
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
