//! What the workers report for `es-broker mirror status`: per link its
//! last error, per mirror topic its last error and per partition the
//! source's high watermark, what was copied, what could not be (offsets the
//! source deleted first) and the partition's own error until it copies
//! again. Shared between the workers
//! (writers) and the service (reader); es's log ends are read when asked.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::copy::Copied;

/// The window a copy rate is measured over.
const RATE_WINDOW: Duration = Duration::from_secs(1);
/// A rate older than this reads as 0 (nothing was copied since).
const RATE_STALE: Duration = Duration::from_secs(5);

/// One partition's counters.
#[derive(Clone, Debug, Default)]
pub struct PartitionStats {
    /// The source's high watermark as last seen (-1: never).
    pub source_hw: i64,
    pub records: u64,
    pub bytes: u64,
    /// Offsets the source deleted before they were copied (gaps closed).
    pub skipped: u64,
    /// Why the partition does not copy, until it copies again.
    pub error: Option<String>,
    /// Records per second over the last full window.
    rate: u64,
    window: Option<(Instant, u64)>,
    last_copy: Option<Instant>,
}

impl PartitionStats {
    /// No source high watermark known yet, nothing copied.
    pub fn unknown() -> PartitionStats {
        PartitionStats {
            source_hw: -1,
            ..PartitionStats::default()
        }
    }

    /// Records per second copied lately (0 when nothing was for a while).
    pub fn records_per_second(&self) -> u64 {
        match self.last_copy {
            Some(t) if t.elapsed() < RATE_STALE => self.rate,
            _ => 0,
        }
    }
}

/// One mirror topic's state as its worker last saw it.
#[derive(Clone, Debug, Default)]
pub struct TopicStats {
    pub error: Option<String>,
    pub partitions: BTreeMap<i32, PartitionStats>,
}

/// Everything the workers of this node report.
#[derive(Debug, Default)]
pub struct Shared {
    links: Mutex<BTreeMap<String, Option<String>>>,
    topics: Mutex<BTreeMap<String, TopicStats>>,
}

impl Shared {
    pub fn link_error(&self, link: &str, error: Option<String>) {
        self.links.lock().insert(link.to_string(), error);
    }

    pub fn link_error_of(&self, link: &str) -> Option<String> {
        self.links.lock().get(link).cloned().flatten()
    }

    pub fn topic_error(&self, topic: &str, error: Option<String>) {
        self.topics
            .lock()
            .entry(topic.to_string())
            .or_default()
            .error = error;
    }

    /// Runs `f` on `partition`'s counters of `topic`, made if new.
    fn with_partition<R>(
        &self,
        topic: &str,
        partition: i32,
        f: impl FnOnce(&mut PartitionStats) -> R,
    ) -> R {
        let mut t = self.topics.lock();
        let s = t
            .entry(topic.to_string())
            .or_default()
            .partitions
            .entry(partition)
            .or_insert_with(PartitionStats::unknown);
        f(s)
    }

    pub fn set_source_hw(&self, topic: &str, partition: i32, hw: i64) {
        self.with_partition(topic, partition, |s| s.source_hw = hw);
    }

    /// [`Shared::set_source_hw`] of many partitions under one lock.
    pub fn set_source_hws(&self, hws: &[(&str, i32, i64)]) {
        if hws.is_empty() {
            return;
        }
        let mut t = self.topics.lock();
        for (topic, partition, hw) in hws {
            let stats = match t.get_mut(*topic) {
                Some(s) => s,
                None => t.entry((*topic).to_string()).or_default(),
            };
            stats
                .partitions
                .entry(*partition)
                .or_insert_with(PartitionStats::unknown)
                .source_hw = *hw;
        }
    }

    /// Sets (or clears, with `None`) `partition`'s own error.
    pub fn partition_error(&self, topic: &str, partition: i32, error: Option<String>) {
        self.with_partition(topic, partition, |s| s.error = error);
    }

    /// Counts `n` offsets the source deleted before they were copied.
    pub fn skipped(&self, topic: &str, partition: i32, n: u64) {
        self.with_partition(topic, partition, |s| {
            s.skipped = s.skipped.saturating_add(n)
        });
    }

    /// Counts an append; the partition copies, so its error is over.
    pub fn copied(&self, topic: &str, partition: i32, c: Copied) {
        self.with_partition(topic, partition, |s| s.count_copy(c));
    }
}

impl PartitionStats {
    /// Counts an append of `c` (see [`Shared::copied`]).
    fn count_copy(&mut self, c: Copied) {
        let s = self;
        s.error = None;
        s.records += c.records;
        s.bytes += c.bytes;
        let now = Instant::now();
        s.last_copy = Some(now);
        match s.window {
            Some((start, n)) if now.duration_since(start) >= RATE_WINDOW => {
                let secs = now.duration_since(start).as_secs_f64();
                s.rate = ((n + c.records) as f64 / secs) as u64;
                s.window = Some((now, 0));
            }
            Some((start, n)) => s.window = Some((start, n + c.records)),
            None => s.window = Some((now, 0)),
        }
    }
}

impl Shared {
    pub fn topic(&self, topic: &str) -> TopicStats {
        self.topics.lock().get(topic).cloned().unwrap_or_default()
    }

    /// Forgets a link's and its topics' reports (the link was deleted).
    pub fn forget(&self, link: &str, topics: &[String]) {
        self.links.lock().remove(link);
        let mut t = self.topics.lock();
        for x in topics {
            t.remove(x);
        }
    }
}
