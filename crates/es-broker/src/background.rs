//! The broker's background tasks: the time-based flush, retention and
//! compaction, the high-watermark checkpoint of a cluster node, and the
//! coordinators' timers ([`coordinator_timers`]: group
//! session and rebalance timeouts, transaction timeouts, producer-id
//! expiration, share-group acquisition-lock expiry), which `Broker::open` hands over instead of starting them, and
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
//! that changed something, or that was long enough to report progress, logs
//! one summary line when it ends.
//!
//! A long pass says where it is at most every [`PROGRESS_INTERVAL`]
//! ([`Reporting`]): between partitions (`compaction pass: 120 of 400
//! partitions`) and inside one partition's compaction, from es-storage's
//! progress callback (`compaction pass: orders-3 read 1.2 GiB of 4.0 GiB
//! (30%), partition 5 of 40`, then `compaction of orders-3 done in 12.0 s`).
//! The compaction pass's figures are also gauges (es-storage's
//! `CompactionPassGauges`, `es_compaction_pass_*` in /metrics).

use std::sync::Arc;
use std::time::{Duration, Instant};

use es_kafka::broker::{Broker, Timers};
use es_kafka::hw_checkpoint;
use es_storage::metrics::CompactionPassGauges;
use es_storage::{CompactionProgress, CompactionReport, RetentionReport, StorageError};
use parking_lot::Mutex;
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
    /// The pass reported progress (it was long): its end is logged whatever
    /// it did.
    pub reported_progress: bool,
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

    /// Whether the pass changed or failed something.
    pub fn did_something(&self) -> bool {
        self.changed > 0 || self.cold_copy_failures > 0 || self.errors > 0
    }

    /// Whether the pass deserves its log line: it did something, or it
    /// reported progress and so must say that it ended.
    pub fn worth_a_line(&self) -> bool {
        self.did_something() || self.reported_progress
    }
}

/// Runs the coordinators' timers: the group coordinator's and the
/// share-partitions' until they shut down (the server's shutdown begins
/// it), the transaction coordinator's
/// every `abort_check_interval_ms` until `stop` flips, checked between
/// ticks so that no tick runs once the partitions close.
pub async fn coordinator_timers(timers: Timers, mut stop: watch::Receiver<bool>) {
    let timers = Arc::new(timers);
    let groups = {
        let t = timers.clone();
        tokio::spawn(async move { t.run_groups().await })
    };
    let shares = {
        let t = timers.clone();
        tokio::spawn(async move { t.run_shares().await })
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
    if let Err(e) = shares.await {
        tracing::error!(error = %e, "share-partition timers failed");
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
pub const PROGRESS_INTERVAL: Duration = Duration::from_secs(5);

/// What a long pass says about where it is.
#[derive(Clone, Debug, PartialEq)]
pub enum Report {
    /// Between partitions: `done` of the `total` partitions the cleaner
    /// applies to are behind it.
    Partitions {
        cleaner: Cleaner,
        done: usize,
        total: usize,
    },
    /// Inside one partition's compaction, the `done`+1-th of `total`.
    Compacting {
        topic: String,
        partition: i32,
        progress: CompactionProgress,
        done: usize,
        total: usize,
    },
    /// A partition whose compaction reported progress is done.
    Compacted {
        topic: String,
        partition: i32,
        seconds: f64,
    },
}

/// Where a pass's progress goes: how often at most ([`PROGRESS_INTERVAL`]
/// in the broker; a test makes it zero), the compaction gauges, and the
/// reports (the log in the broker).
#[derive(Clone)]
pub struct Reporting {
    pub every: Duration,
    pub gauges: CompactionPassGauges,
    pub sink: Arc<dyn Fn(&Report) + Send + Sync>,
}

impl Default for Reporting {
    fn default() -> Self {
        Reporting {
            every: PROGRESS_INTERVAL,
            gauges: es_storage::metrics::storage_metrics()
                .compaction_pass
                .clone(),
            sink: Arc::new(log_report),
        }
    }
}

/// When a pass last reported: shared with the blocking side of a
/// partition's compaction.
#[derive(Clone)]
struct Clock {
    last: Arc<Mutex<Instant>>,
    every: Duration,
}

impl Clock {
    /// Whether a report is due now (and, if so, the next one is `every` away).
    fn due(&self) -> bool {
        let mut last = self.last.lock();
        if last.elapsed() >= self.every {
            *last = Instant::now();
            true
        } else {
            false
        }
    }
}

/// The broker's sink: one log line per report.
fn log_report(r: &Report) {
    match r {
        Report::Partitions {
            cleaner,
            done,
            total,
        } => tracing::info!(
            done,
            total,
            "{} pass: {done} of {total} partitions",
            cleaner.name()
        ),
        Report::Compacting {
            topic,
            partition,
            progress,
            done,
            total,
        } => {
            let (read, all) = (progress.bytes_read, progress.bytes_total);
            tracing::info!(
                topic = %topic,
                partition,
                read_bytes = read,
                total_bytes = all,
                done,
                total,
                "compaction pass: {topic}-{partition} read {} of {} ({:.0}%), partition {} of {total}",
                crate::admin::human_bytes(read),
                crate::admin::human_bytes(all),
                if all == 0 { 100.0 } else { read as f64 * 100.0 / all as f64 },
                done + 1,
            );
        }
        Report::Compacted {
            topic,
            partition,
            seconds,
        } => tracing::info!(
            topic = %topic,
            partition,
            seconds,
            "compaction of {topic}-{partition} done in {seconds:.1} s"
        ),
    }
}

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
        if summary.worth_a_line() {
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
/// Reports its progress to the log and the compaction gauges.
pub async fn pass(
    broker: &Arc<Broker>,
    cleaner: Cleaner,
    stop: &watch::Receiver<bool>,
) -> Option<PassSummary> {
    pass_reporting(broker, cleaner, stop, &Reporting::default()).await
}

/// [`pass`], reporting to `reporting`.
pub async fn pass_reporting(
    broker: &Arc<Broker>,
    cleaner: Cleaner,
    stop: &watch::Receiver<bool>,
    reporting: &Reporting,
) -> Option<PassSummary> {
    let mut summary = PassSummary::default();
    let all = broker.partitions_snapshot();
    let applies = |topic: &es_kafka::topics::Topic| {
        let policy = topic.config().cleanup_policy();
        match cleaner {
            Cleaner::Retention => policy.delete,
            Cleaner::Compaction => policy.compact,
        }
    };
    // The partitions this cleaner has work for; a topic whose policy
    // changes during the pass is counted as its turn comes.
    let mut total = all.iter().filter(|(t, _)| applies(t)).count();
    let gauges = PassGauges::begin(cleaner, &reporting.gauges, total);
    let clock = Clock {
        last: Arc::new(Mutex::new(Instant::now())),
        every: reporting.every,
    };
    let mut done = 0usize;
    for (topic, slot) in all {
        if *stop.borrow() {
            return None;
        }
        // Topics this cleaner has nothing to do for cost no blocking task.
        // (The blocking side reads the config again: it may change meanwhile.)
        if !applies(&topic) {
            continue;
        }
        total = total.max(done + 1);
        if clock.due() {
            summary.reported_progress = true;
            (reporting.sink)(&Report::Partitions {
                cleaner,
                done,
                total,
            });
        }
        let b = broker.clone();
        let (t, p) = (topic.clone(), slot.clone());
        let (r, c, n, of) = (reporting.clone(), clock.clone(), done, total);
        let turn = tokio::task::spawn_blocking(
            move || -> Result<(Option<Outcome>, bool), StorageError> {
                let now = b.clock().now_ms();
                Ok(match cleaner {
                    Cleaner::Retention => (
                        b.enforce_retention(&t, &p, now)?.map(Outcome::Retention),
                        false,
                    ),
                    Cleaner::Compaction => {
                        let started = Instant::now();
                        let mut reported = false;
                        let before = p.log.size_bytes();
                        let res = b.compact_reporting(&t, &p, now, &mut |progress| {
                            r.gauges
                                .partition_progress(progress.bytes_read, progress.bytes_total);
                            if c.due() {
                                reported = true;
                                (r.sink)(&Report::Compacting {
                                    topic: t.name.to_string(),
                                    partition: p.index,
                                    progress,
                                    done: n,
                                    total: of,
                                });
                            }
                        });
                        if reported {
                            (r.sink)(&Report::Compacted {
                                topic: t.name.to_string(),
                                partition: p.index,
                                seconds: started.elapsed().as_secs_f64(),
                            });
                        }
                        let freed = before.saturating_sub(p.log.size_bytes());
                        (res?.map(|c| Outcome::Compaction(c, freed)), reported)
                    }
                })
            },
        )
        .await;
        done += 1;
        gauges.partition_done(done);
        match turn {
            Ok(Ok((o, reported))) => {
                summary.reported_progress |= reported;
                if let Some(o) = o {
                    summary.add(&o);
                }
            }
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
    drop(gauges);
    Some(summary)
}

/// One pass as the compaction gauges see it: begun when made (for the
/// compaction cleaner only), ended when dropped, however the pass ends.
struct PassGauges<'a>(Option<&'a CompactionPassGauges>);

impl<'a> PassGauges<'a> {
    fn begin(cleaner: Cleaner, gauges: &'a CompactionPassGauges, partitions: usize) -> Self {
        if cleaner != Cleaner::Compaction {
            return PassGauges(None);
        }
        gauges.begin_pass(partitions as u64);
        PassGauges(Some(gauges))
    }

    fn partition_done(&self, done: usize) {
        if let Some(g) = self.0 {
            g.partition_done(done as u64);
        }
    }
}

impl Drop for PassGauges<'_> {
    fn drop(&mut self) {
        if let Some(g) = self.0 {
            g.end_pass();
        }
    }
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

    /// A compaction pass reports inside a partition's compaction as well as
    /// between partitions, and when that partition is done; its gauges end
    /// with every partition and byte done. The interval is zero, so that
    /// every progress callback of es-storage's is a report: no timing.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_long_compaction_reports_its_progress_and_sets_its_gauges() {
        let dir = tempfile::tempdir().expect("tmp");
        let cfg = in_process::config_in(dir.path(), "127.0.0.1:0");
        let b = in_process::open_running(cfg).await;
        in_process::create_topic(&b, "plain", 1).await;
        let overrides = [
            ("cleanup.policy", "compact"),
            ("internal.segment.bytes", "1024"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let topic = b
            .create_topic("keyed", 2, overrides, false)
            .await
            .expect("create")
            .expect("created");
        tokio::task::spawn_blocking(move || {
            for index in 0..2 {
                let slot = topic.partition(index).expect("partition");
                let log = slot.log.storage();
                let value = [b'v'; 60];
                for i in 0..300u32 {
                    let key = format!("key-{}", i % 7);
                    let mut buf = es_storage::RecordBatchBuf::new();
                    buf.push(
                        1_000,
                        Some(key.as_bytes()),
                        Some(&value[..]),
                        [],
                        &es_storage::RecordMeta::default(),
                    );
                    let info = log.append(&mut buf).expect("append");
                    log.wait_durable(info.last_offset + 1).expect("durable");
                }
            }
        })
        .await
        .expect("appends");

        let reports = Arc::new(Mutex::new(Vec::<Report>::new()));
        let r = reports.clone();
        let reporting = Reporting {
            every: Duration::ZERO,
            gauges: CompactionPassGauges::default(),
            sink: Arc::new(move |x: &Report| r.lock().push(x.clone())),
        };
        let (_tx, rx) = watch::channel(false);
        let s = pass_reporting(&b, Cleaner::Compaction, &rx, &reporting)
            .await
            .expect("a whole pass");
        assert_eq!((s.partitions, s.changed), (2, 2), "{s:?}");
        assert!(s.reported_progress && s.worth_a_line());

        let reports = reports.lock().clone();
        let between: Vec<(usize, usize)> = reports
            .iter()
            .filter_map(|x| match x {
                Report::Partitions { done, total, .. } => Some((*done, *total)),
                _ => None,
            })
            .collect();
        assert_eq!(between, vec![(0, 2), (1, 2)], "{reports:?}");
        for index in 0..2 {
            let inside: Vec<CompactionProgress> = reports
                .iter()
                .filter_map(|x| match x {
                    Report::Compacting {
                        topic,
                        partition,
                        progress,
                        done,
                        total,
                    } if topic == "keyed" && *partition == index => {
                        assert_eq!((*done, *total), (index as usize, 2));
                        Some(*progress)
                    }
                    _ => None,
                })
                .collect();
            let total = inside.first().map(|p| p.bytes_total).unwrap_or(0);
            assert!(total > 0, "{reports:?}");
            assert!(
                inside
                    .iter()
                    .filter(|p| p.bytes_read > 0 && p.bytes_read < total)
                    .count()
                    > 3,
                "reports part way through partition {index}: {inside:?}"
            );
            assert!(inside
                .windows(2)
                .all(|w| w[0].bytes_read <= w[1].bytes_read));
            assert_eq!(inside.last().map(|p| p.bytes_read), Some(total));
            let ended = reports.iter().position(
                |x| matches!(x, Report::Compacted { topic, partition, .. } if topic == "keyed" && *partition == index),
            );
            let last_inside = reports.iter().rposition(
                |x| matches!(x, Report::Compacting { partition, .. } if *partition == index),
            );
            assert!(
                ended > last_inside,
                "its end is reported after its progress"
            );
        }
        let (done, total, read, bytes) = reporting.gauges.get();
        assert_eq!((done, total), (2, 2));
        assert!(bytes > 0 && read == bytes, "{read} of {bytes}");
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
