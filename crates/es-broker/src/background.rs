//! The broker's background tasks: the time-based flush, retention and
//! compaction, the high-watermark checkpoint of a cluster node, and the
//! coordinators' timers ([`coordinator_timers`]: group
//! session and rebalance timeouts, transaction timeouts, producer-id
//! expiration), which `Broker::open` hands over instead of starting them, and
//! the API keys of `api_keys.json` proposed to the metadata
//! ([`api_keys_loop`]).
//!
//! Each is a loop that sleeps its interval, runs one pass, and stops when the
//! shutdown flag flips. Retention and compaction visit every partition of
//! every topic, one partition at a time on a blocking thread (es-storage's
//! calls are blocking and may read and write whole segments), with no
//! broker-wide lock held: the partition list is a snapshot, each topic's
//! config is read when its partition's turn comes (so AlterConfigs takes
//! effect at the next pass), and a topic deleted meanwhile is skipped.
//! Shutdown is checked between partitions; the binary waits for the loops to
//! end before it closes the partitions, so no pass ever runs against a closed
//! log. A failed partition is logged and retried at the next pass (a cold copy
//! that failed leaves its segment in place, as es-storage promises). A pass
//! that changed something logs one summary line.

use std::sync::Arc;
use std::time::Duration;

use es_kafka::broker::{Broker, Timers};
use es_kafka::hw_checkpoint;
use es_storage::{CompactionReport, RetentionReport, StorageError};
use tokio::sync::watch;

/// Which cleaner a loop runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cleaner {
    /// Deletes old segments of topics whose `cleanup.policy` has `delete`.
    Retention,
    /// Compacts topics whose `cleanup.policy` has `compact`.
    Compaction,
}

impl Cleaner {
    fn name(self) -> &'static str {
        match self {
            Cleaner::Retention => "retention",
            Cleaner::Compaction => "compaction",
        }
    }
}

/// What one partition's turn did.
#[derive(Debug)]
enum Outcome {
    Retention(RetentionReport),
    /// With the bytes it freed.
    Compaction(CompactionReport, u64),
}

/// The sum of one pass, for its log line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PassSummary {
    /// Partitions the pass applied to (their topic's policy asked for it).
    pub partitions: usize,
    /// Partitions where something was deleted or rewritten.
    pub changed: usize,
    pub segments_deleted: usize,
    pub bytes_deleted: u64,
    pub cold_copy_failures: usize,
    pub records_dropped: u64,
    pub segments_replaced: usize,
    pub segments_written: usize,
    /// Bytes compaction freed (log sizes before minus after).
    pub bytes_compacted_away: u64,
    /// Partitions whose turn failed (logged one by one, retried next pass).
    pub errors: usize,
}

impl PassSummary {
    fn add(&mut self, o: &Outcome) {
        self.partitions += 1;
        match o {
            Outcome::Retention(r) => {
                if !r.deleted_segments.is_empty() {
                    self.changed += 1;
                }
                self.segments_deleted += r.deleted_segments.len();
                self.bytes_deleted += r.deleted_bytes;
                self.cold_copy_failures += usize::from(r.cold_copy_failed);
            }
            Outcome::Compaction(c, freed) => {
                self.bytes_compacted_away += freed;
                if c.skipped.is_none() && c.segments_replaced > 0 {
                    self.changed += 1;
                }
                self.records_dropped += c.records_dropped;
                self.segments_replaced += c.segments_replaced;
                self.segments_written += c.segments_written;
            }
        }
    }

    /// Whether the pass deserves its log line.
    pub fn did_something(&self) -> bool {
        self.changed > 0 || self.cold_copy_failures > 0 || self.errors > 0
    }
}

/// Runs the coordinators' timers: the group coordinator's until it shuts
/// down (the server's shutdown begins it), the transaction coordinator's
/// every `abort_check_interval_ms` until `stop` flips, checked between
/// ticks so that no tick runs once the partitions close.
pub async fn coordinator_timers(timers: Timers, mut stop: watch::Receiver<bool>) {
    let timers = Arc::new(timers);
    let groups = {
        let t = timers.clone();
        tokio::spawn(async move { t.run_groups().await })
    };
    let mut tick = tokio::time::interval(timers.txn_interval());
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The first tick fires at once; recovery already ran when the broker opened.
    tick.tick().await;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => break,
        }
        let t = timers.clone();
        match tokio::task::spawn_blocking(move || t.tick_txn()).await {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => tracing::error!(error = %e, "transaction coordinator tick failed"),
        }
    }
    if let Err(e) = groups.await {
        tracing::error!(error = %e, "group coordinator timers failed");
    }
}

/// How often the API keys file is compared with the metadata.
const API_KEYS_SYNC_INTERVAL: Duration = Duration::from_secs(1);

/// Proposes to the metadata, now and then every [`API_KEYS_SYNC_INTERVAL`]
/// until `stop` flips, the keys `es-broker keys --data-dir` created or
/// revoked in this node's `api_keys.json` (a `stat` when nothing changed).
pub async fn api_keys_loop(broker: Arc<Broker>, mut stop: watch::Receiver<bool>) {
    loop {
        if let Err(e) = broker.sync_api_keys().await {
            tracing::warn!(code = e.code, error = %e.message, "API keys of the keys file not proposed yet; retrying");
        }
        tokio::select! {
            _ = tokio::time::sleep(API_KEYS_SYNC_INTERVAL) => {}
            _ = stop.changed() => return,
        }
    }
}

/// How often a long pass logs its progress.
const PROGRESS_INTERVAL: Duration = Duration::from_secs(5);

/// Runs `cleaner` every `interval` (after each pass ends) until `stop` flips.
pub async fn cleaner_loop(
    broker: Arc<Broker>,
    cleaner: Cleaner,
    interval: Duration,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = stop.changed() => return,
        }
        let Some(summary) = pass(&broker, cleaner, &stop).await else {
            return;
        };
        let m = es_kafka::metrics::kafka_metrics();
        match cleaner {
            Cleaner::Retention => {
                m.retention_runs.inc();
                m.retention_freed_bytes.inc_by(summary.bytes_deleted);
            }
            Cleaner::Compaction => {
                m.compaction_runs.inc();
                m.compaction_freed_bytes
                    .inc_by(summary.bytes_compacted_away);
            }
        }
        if summary.did_something() {
            log_pass(cleaner, &summary);
        }
    }
}

fn log_pass(cleaner: Cleaner, s: &PassSummary) {
    match cleaner {
        Cleaner::Retention => tracing::info!(
            partitions = s.partitions,
            changed = s.changed,
            segments_deleted = s.segments_deleted,
            bytes_deleted = s.bytes_deleted,
            cold_copy_failures = s.cold_copy_failures,
            errors = s.errors,
            "retention pass deleted {} segments from {} partitions",
            s.segments_deleted,
            s.changed
        ),
        Cleaner::Compaction => tracing::info!(
            partitions = s.partitions,
            changed = s.changed,
            records_dropped = s.records_dropped,
            segments_replaced = s.segments_replaced,
            segments_written = s.segments_written,
            errors = s.errors,
            "compaction pass compacted {} partitions, dropped {} records",
            s.changed,
            s.records_dropped
        ),
    }
}

/// One pass over every partition; `None` when shutdown began mid-pass.
pub async fn pass(
    broker: &Arc<Broker>,
    cleaner: Cleaner,
    stop: &watch::Receiver<bool>,
) -> Option<PassSummary> {
    let mut summary = PassSummary::default();
    let all = broker.partitions_snapshot();
    let total = all.len();
    // A pass over many partitions says where it is every few seconds.
    let mut reported = std::time::Instant::now();
    for (done, (topic, slot)) in all.into_iter().enumerate() {
        if *stop.borrow() {
            return None;
        }
        if reported.elapsed() >= PROGRESS_INTERVAL {
            reported = std::time::Instant::now();
            tracing::info!(
                done,
                total,
                "{} pass: {done} of {total} partitions",
                cleaner.name()
            );
        }
        // Topics this cleaner has nothing to do for cost no blocking task.
        // (The blocking side reads the config again: it may change meanwhile.)
        let policy = topic.config().cleanup_policy();
        let applies = match cleaner {
            Cleaner::Retention => policy.delete,
            Cleaner::Compaction => policy.compact,
        };
        if !applies {
            continue;
        }
        let b = broker.clone();
        let (t, p) = (topic.clone(), slot.clone());
        let turn = tokio::task::spawn_blocking(move || -> Result<Option<Outcome>, StorageError> {
            let now = b.clock().now_ms();
            Ok(match cleaner {
                Cleaner::Retention => b.enforce_retention(&t, &p, now)?.map(Outcome::Retention),
                Cleaner::Compaction => {
                    let before = p.log.size_bytes();
                    let r = b.compact(&t, &p, now)?;
                    let freed = before.saturating_sub(p.log.size_bytes());
                    r.map(|c| Outcome::Compaction(c, freed))
                }
            })
        })
        .await;
        match turn {
            Ok(Ok(Some(o))) => summary.add(&o),
            Ok(Ok(None)) => {}
            Ok(Err(e)) => {
                summary.errors += 1;
                tracing::warn!(topic = %topic.name, partition = slot.index, error = %e, "{} failed; retried next pass", cleaner.name());
            }
            Err(e) => {
                summary.errors += 1;
                tracing::error!(topic = %topic.name, partition = slot.index, error = %e, "{} task failed", cleaner.name());
            }
        }
    }
    Some(summary)
}

/// Runs every partition's time-based flush once per interval until shutdown.
pub async fn flush_loop(broker: Arc<Broker>, interval: Duration, mut stop: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        let b = broker.clone();
        if let Err(e) = tokio::task::spawn_blocking(move || b.flush_due()).await {
            tracing::error!(error = %e, "flush task failed");
        }
    }
}

/// Writes the high-watermark checkpoint (es_kafka::hw_checkpoint) every
/// interval while it changes, until shutdown begins; returns the writer for
/// the binary's last write once the listener has drained.
pub async fn hw_checkpoint_loop(
    broker: Arc<Broker>,
    mut stop: watch::Receiver<bool>,
) -> hw_checkpoint::Writer {
    let mut writer = hw_checkpoint::Writer::default();
    let mut tick = tokio::time::interval(hw_checkpoint::INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return writer,
        }
        writer = write_hw_checkpoint(broker.clone(), writer).await;
    }
}

/// One checkpoint write on a blocking thread (logged if it fails).
pub async fn write_hw_checkpoint(
    broker: Arc<Broker>,
    mut writer: hw_checkpoint::Writer,
) -> hw_checkpoint::Writer {
    let done = tokio::task::spawn_blocking(move || {
        let r = writer.write(&broker);
        (writer, r)
    })
    .await;
    match done {
        Ok((writer, Ok(_))) => writer,
        Ok((writer, Err(e))) => {
            tracing::error!(error = %e, "writing the high-watermark checkpoint failed");
            writer
        }
        Err(e) => {
            tracing::error!(error = %e, "high-watermark checkpoint task failed");
            hw_checkpoint::Writer::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use es_test_support::in_process;

    #[test]
    fn summaries_count_what_changed() {
        let mut s = PassSummary::default();
        s.add(&Outcome::Retention(RetentionReport::default()));
        assert!(!s.did_something(), "a pass that deleted nothing is quiet");
        s.add(&Outcome::Retention(RetentionReport {
            deleted_segments: vec![0, 10],
            deleted_bytes: 2048,
            log_start_offset: 20,
            cold_copy_failed: false,
        }));
        assert!(s.did_something());
        assert_eq!((s.partitions, s.changed, s.segments_deleted), (2, 1, 2));
        assert_eq!(s.bytes_deleted, 2048);

        let mut c = PassSummary::default();
        c.add(&Outcome::Compaction(
            CompactionReport {
                skipped: Some("nothing to drop"),
                ..CompactionReport::default()
            },
            0,
        ));
        assert!(!c.did_something());
        c.add(&Outcome::Compaction(
            CompactionReport {
                skipped: None,
                records_read: 10,
                records_dropped: 4,
                segments_replaced: 3,
                segments_written: 1,
            },
            700,
        ));
        assert!(c.did_something());
        assert_eq!(
            (c.changed, c.records_dropped, c.segments_written),
            (1, 4, 1)
        );
        assert_eq!(c.bytes_compacted_away, 700);

        let mut f = PassSummary::default();
        f.add(&Outcome::Retention(RetentionReport {
            cold_copy_failed: true,
            ..RetentionReport::default()
        }));
        assert!(f.did_something(), "a failed cold copy is worth a line");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_pass_stops_when_shutdown_has_begun() {
        let dir = tempfile::tempdir().expect("tmp");
        let cfg = in_process::config_in(dir.path(), "127.0.0.1:0");
        let b = in_process::open_running(cfg).await;
        in_process::create_topic(&b, "t", 2).await;
        let (tx, rx) = watch::channel(false);
        let s = pass(&b, Cleaner::Retention, &rx)
            .await
            .expect("a whole pass");
        assert_eq!(s.partitions, 2, "delete is the default cleanup.policy");
        let s = pass(&b, Cleaner::Compaction, &rx)
            .await
            .expect("a whole pass");
        assert_eq!(s.partitions, 0, "no topic is compacted");
        tx.send(true).expect("send");
        assert!(pass(&b, Cleaner::Retention, &rx).await.is_none());
    }
}
