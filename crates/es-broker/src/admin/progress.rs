//! Long work reporting progress, and the samples the console plots.
//!
//! - [`Recovery`]: start-up recovery logs its progress every 5 s (segments and bytes of
//!   segments checked of the total, rate, time left) and when it ends; the
//!   same figures are in /metrics (`es_recovery_*`).
//! - Mirror catch-up: every 5 s, each mirror topic still behind its source
//!   logs its lag and copy rate ([`spawn_watchers`]), and a topic seen
//!   behind logs once when every partition has caught up
//!   ([`MirrorCatchUp`]; again only after it falls behind again).
//! - [`Throughput`]: once a second, the broker's traffic counters become a
//!   rate, kept for 10 minutes for the console's plots
//!   (`/api/v1/throughput`).
//! - Raft leader changes are counted as they happen (the metadata quorum's
//!   own watch), for `es_raft_leader_changes_total`.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use es_kafka::mirror::{MirrorSlot, TopicStatus};
use es_kafka::Broker;
use parking_lot::Mutex;
use serde::Serialize;

use super::Shared;

/// How often long work says where it is.
pub const PROGRESS_INTERVAL: Duration = Duration::from_secs(5);
/// Throughput samples kept: 10 minutes of one a second.
const SAMPLES_KEPT: usize = 600;

/// Start-up recovery of the partitions, reporting as it goes.
#[derive(Debug)]
pub struct Recovery {
    started: Instant,
    done: Arc<AtomicBool>,
}

impl Recovery {
    /// Recovery of `data_dir` begins: measures what it has to check and
    /// starts the reporter.
    pub fn begin(data_dir: &Path) -> Recovery {
        let (total, segments) = super::log_bytes_under(data_dir);
        es_storage::metrics::recovery_begin(total, segments);
        let done = Arc::new(AtomicBool::new(false));
        let started = Instant::now();
        let d = done.clone();
        let reporter = std::thread::Builder::new()
            .name("es-recovery-progress".into())
            .spawn(move || {
                let mut last = (started, 0u64);
                loop {
                    std::thread::park_timeout(PROGRESS_INTERVAL);
                    if d.load(Ordering::Relaxed) {
                        return;
                    }
                    let p = es_storage::metrics::recovery_progress();
                    let (checked, total) = (p.bytes_checked, p.bytes_total);
                    let now = Instant::now();
                    let rate = checked.saturating_sub(last.1) as f64
                        / now.duration_since(last.0).as_secs_f64().max(0.001);
                    last = (now, checked);
                    let left = if rate > 0.0 {
                        format!("{:.0} s", total.saturating_sub(checked) as f64 / rate)
                    } else {
                        "unknown".to_string()
                    };
                    tracing::info!(
                        checked_bytes = checked,
                        total_bytes = total,
                        checked_segments = p.segments_checked,
                        total_segments = p.segments_total,
                        bytes_per_second = rate as u64,
                        "recovery: {} of {} checked ({:.0}%), {} of {} segments, {}/s, time left {left}",
                        human_bytes(checked),
                        human_bytes(total),
                        percent(checked, total),
                        p.segments_checked,
                        p.segments_total,
                        human_bytes(rate as u64),
                    );
                }
            });
        if let Err(e) = reporter {
            tracing::warn!(error = %e, "no recovery progress reports: cannot start their thread");
        }
        Recovery { started, done }
    }

    /// Recovery has ended (the broker is open).
    pub fn done(self) {
        self.done.store(true, Ordering::Relaxed);
        let secs = self.started.elapsed().as_secs_f64();
        es_storage::metrics::recovery_done(secs);
        let p = es_storage::metrics::recovery_progress();
        tracing::info!(
            checked_bytes = p.bytes_checked,
            checked_segments = p.segments_checked,
            seconds = secs,
            "recovery done: {} in {} segments checked in {secs:.1} s",
            human_bytes(p.bytes_checked),
            p.segments_checked
        );
    }
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        100.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// `1.5 GiB`, `20.0 MiB`, `512 B`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// One second of traffic, as rates.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Sample {
    pub time_ms: i64,
    pub bytes_in: f64,
    pub bytes_out: f64,
    pub records_in: f64,
    pub records_out: f64,
    pub requests: f64,
}

/// The last [`SAMPLES_KEPT`] samples.
#[derive(Debug, Default)]
pub struct Throughput {
    samples: Mutex<VecDeque<Sample>>,
    /// Raft leaders seen (es_raft_leader_changes_total).
    pub leader_changes: AtomicU64,
}

impl Throughput {
    /// The samples of the last `seconds`, oldest first.
    pub fn last(&self, seconds: usize) -> Vec<Sample> {
        let s = self.samples.lock();
        let skip = s.len().saturating_sub(seconds);
        s.iter().skip(skip).copied().collect()
    }
}

/// The broker's traffic counters summed: (bytes in, bytes out, records in,
/// records out, requests).
fn totals(broker: &Broker) -> [u64; 5] {
    let mut t = [0u64; 5];
    for (_, slot) in broker.partitions_snapshot() {
        let tr = &slot.traffic;
        t[0] += tr.bytes_in.load(Ordering::Relaxed);
        t[1] += tr.bytes_out.load(Ordering::Relaxed);
        t[2] += tr.records_in.load(Ordering::Relaxed);
        t[3] += tr.records_out.load(Ordering::Relaxed);
    }
    t[4] = super::metrics::requests_total();
    t
}

/// Starts the throughput sampler, the Raft leader watch and the mirror
/// catch-up reports; each ends with the broker.
pub fn spawn_watchers(shared: Arc<Shared>, broker: Arc<Broker>) {
    let weak = Arc::downgrade(&broker);
    let s = shared.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut prev: Option<(Instant, [u64; 5])> = None;
        loop {
            tick.tick().await;
            let Some(b) = weak.upgrade() else { return };
            let now = Instant::now();
            let t = tokio::task::spawn_blocking(move || totals(&b))
                .await
                .unwrap_or_default();
            if let Some((at, p)) = prev {
                let secs = now.duration_since(at).as_secs_f64().max(0.001);
                // A deleted partition takes its counters with it: never
                // a negative rate.
                let rate = |i: usize| t[i].saturating_sub(p[i]) as f64 / secs;
                let sample = Sample {
                    time_ms: now_ms(),
                    bytes_in: rate(0),
                    bytes_out: rate(1),
                    records_in: rate(2),
                    records_out: rate(3),
                    requests: rate(4),
                };
                let mut q = s.throughput.samples.lock();
                if q.len() == SAMPLES_KEPT {
                    q.pop_front();
                }
                q.push_back(sample);
            }
            prev = Some((now, t));
        }
    });

    if let Some(node) = broker.metadata() {
        let mut rx = node.raft().metrics();
        let s = shared.clone();
        tokio::spawn(async move {
            let mut leader = rx.borrow().current_leader;
            if leader.is_some() {
                s.throughput.leader_changes.fetch_add(1, Ordering::Relaxed);
            }
            while rx.changed().await.is_ok() {
                let now = rx.borrow().current_leader;
                if now != leader && now.is_some() {
                    s.throughput.leader_changes.fetch_add(1, Ordering::Relaxed);
                }
                leader = now;
            }
        });
    }

    let weak = Arc::downgrade(&broker);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(PROGRESS_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut catch_up = MirrorCatchUp::default();
        loop {
            tick.tick().await;
            let Some(b) = weak.upgrade() else { return };
            let Some(control) = b.extension(MirrorSlot::default).get().cloned() else {
                continue;
            };
            let statuses = tokio::task::spawn_blocking(move || control.status())
                .await
                .unwrap_or_default();
            for t in statuses.iter().filter(|t| t.state == "active") {
                let lag: i64 = t.partitions.iter().map(|p| p.lag.max(0)).sum();
                if lag == 0 {
                    continue;
                }
                let rate: u64 = t.partitions.iter().map(|p| p.records_per_second).sum();
                let left = (lag as u64)
                    .checked_div(rate)
                    .map_or_else(|| "unknown".to_string(), |s| format!("{s} s"));
                tracing::info!(
                    topic = %t.topic,
                    link = %t.link,
                    lag,
                    records_per_second = rate,
                    "mirror catch-up: {} behind its source by {lag} offsets, {rate} records/s, time left {left}",
                    t.topic
                );
            }
            for done in catch_up.observe(&statuses, Instant::now()) {
                tracing::info!(
                    topic = %done.topic,
                    link = %done.link,
                    seconds = done.seconds,
                    "mirror catch-up done: {} caught up with its source (behind for {:.0} s)",
                    done.topic,
                    done.seconds
                );
            }
        }
    });
}

/// A mirror topic that has caught up with its source.
#[derive(Clone, Debug, PartialEq)]
pub struct CaughtUp {
    pub topic: String,
    pub link: String,
    /// Since it was first seen behind.
    pub seconds: f64,
}

/// The active mirror topics last seen behind their source (by link and
/// topic, with when they were first seen so), so that catching up is
/// reported once per time behind.
#[derive(Debug, Default)]
pub struct MirrorCatchUp {
    behind: HashMap<(String, String), Instant>,
}

impl MirrorCatchUp {
    /// Notes the topics' lags as of `now`; returns those that were behind
    /// and now have every partition's lag known and zero. A topic no longer
    /// active (paused, promoted, failed, gone) is forgotten: it reports
    /// again only after it is seen behind again.
    pub fn observe(&mut self, statuses: &[TopicStatus], now: Instant) -> Vec<CaughtUp> {
        let mut done = Vec::new();
        let mut active = HashSet::new();
        for t in statuses.iter().filter(|t| t.state == "active") {
            let key = (t.link.clone(), t.topic.clone());
            let caught_up = !t.partitions.is_empty() && t.partitions.iter().all(|p| p.lag == 0);
            let behind = t.partitions.iter().any(|p| p.lag > 0);
            if behind {
                self.behind.entry(key.clone()).or_insert(now);
            } else if caught_up {
                if let Some(since) = self.behind.remove(&key) {
                    done.push(CaughtUp {
                        topic: t.topic.clone(),
                        link: t.link.clone(),
                        seconds: now.saturating_duration_since(since).as_secs_f64(),
                    });
                }
            }
            active.insert(key);
        }
        self.behind.retain(|k, _| active.contains(k));
        done
    }
}

/// Milliseconds since the epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use es_kafka::mirror::PartitionStatus;

    fn topic(state: &str, lags: &[i64]) -> TopicStatus {
        TopicStatus {
            topic: "orders".into(),
            link: "old".into(),
            state: state.into(),
            partitions: lags
                .iter()
                .enumerate()
                .map(|(i, &lag)| PartitionStatus {
                    partition: i as i32,
                    lag,
                    ..PartitionStatus::default()
                })
                .collect(),
            ..TopicStatus::default()
        }
    }

    #[test]
    fn a_mirror_topic_that_catches_up_is_reported_once_per_time_behind() {
        let mut c = MirrorCatchUp::default();
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        assert!(
            c.observe(&[topic("active", &[0, 0])], at(0)).is_empty(),
            "never behind: nothing to report"
        );
        assert!(c.observe(&[topic("active", &[5, 0])], at(5)).is_empty());
        assert!(
            c.observe(&[topic("active", &[0, -1])], at(10)).is_empty(),
            "a lag not known is not caught up"
        );
        assert!(c.observe(&[topic("active", &[2, 1])], at(15)).is_empty());
        let done = c.observe(&[topic("active", &[0, 0])], at(20));
        assert_eq!(
            done,
            vec![CaughtUp {
                topic: "orders".into(),
                link: "old".into(),
                seconds: 15.0
            }]
        );
        assert!(
            c.observe(&[topic("active", &[0, 0])], at(25)).is_empty(),
            "once"
        );
        assert!(c.observe(&[topic("active", &[1, 0])], at(30)).is_empty());
        assert_eq!(c.observe(&[topic("active", &[0, 0])], at(35)).len(), 1);

        // Behind, then paused: forgotten, so resuming at zero lag is quiet.
        assert!(c.observe(&[topic("active", &[9])], at(40)).is_empty());
        assert!(c.observe(&[topic("paused", &[9])], at(45)).is_empty());
        assert!(c.observe(&[topic("active", &[0])], at(50)).is_empty());
        assert!(c.observe(&[], at(55)).is_empty());
    }
}
