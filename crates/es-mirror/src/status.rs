//! What the workers report for `es-broker mirror status`: per link its
//! last error, per mirror topic its last error and per partition the
//! source's high watermark and what was copied. Shared between the workers
//! (writers) and the service (reader); es's log ends are read when asked.

use std::collections::BTreeMap;

use parking_lot::Mutex;

use crate::copy::Copied;

/// One partition's counters.
#[derive(Clone, Copy, Debug, Default)]
pub struct PartitionStats {
    /// The source's high watermark when last asked (-1: never).
    pub source_hw: i64,
    pub records: u64,
    pub bytes: u64,
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

    pub fn set_source_hw(&self, topic: &str, partition: i32, hw: i64) {
        self.topics
            .lock()
            .entry(topic.to_string())
            .or_default()
            .partitions
            .entry(partition)
            .or_insert(PartitionStats {
                source_hw: -1,
                ..PartitionStats::default()
            })
            .source_hw = hw;
    }

    pub fn copied(&self, topic: &str, partition: i32, c: Copied) {
        let mut t = self.topics.lock();
        let s = t
            .entry(topic.to_string())
            .or_default()
            .partitions
            .entry(partition)
            .or_insert(PartitionStats {
                source_hw: -1,
                ..PartitionStats::default()
            });
        s.records += c.records;
        s.bytes += c.bytes;
    }

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
