//! The high-watermark checkpoint of a cluster node (Kafka's
//! `replication-offset-checkpoint`): `high_watermarks.json` in the data
//! directory holds, for every partition this node hosts, the high watermark
//! it last knew, written every `replica.high.watermark.checkpoint.interval.ms`
//! (5 s) while it changes and once more at a clean shutdown.
//!
//! Why: a replica's log may end in records it fsynced but the other in-sync
//! replicas never got (never acknowledged with acks=all). After a restart
//! those must stay invisible until the ISR has them again, or a consumer
//! could read records a later leader truncates. So a restarted node starts
//! each partition's replicated high watermark at its checkpointed value (the
//! log start when none was checkpointed, as Kafka does), and from there it
//! moves with the ISR as usual (`Partition::restore_high_watermark`). A
//! checkpoint is a lower bound: at most 5 s of committed records are hidden
//! until the followers have fetched once.
//!
//! The file is untrusted input: one that cannot be read or parsed is logged
//! and ignored (every partition then starts at its log start), and entries
//! are matched by topic id as well as name, so a topic deleted and created
//! again under the same name does not inherit its predecessor's value.

use std::collections::HashMap;
use std::path::Path;

use es_storage::{meta, StorageError};
use serde::{Deserialize, Serialize};

use crate::broker::Broker;

/// The checkpoint's file name in the data directory.
pub const FILE: &str = "high_watermarks.json";
/// Kafka's `replica.high.watermark.checkpoint.interval.ms`.
pub const INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub version: u32,
    pub partitions: Vec<Entry>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub topic: String,
    pub topic_id: String,
    pub partition: i32,
    pub high_watermark: u64,
}

/// Reads the checkpoint in `data_dir`; None when there is none or it cannot
/// be used (logged). Blocking.
pub fn read(fs: &dyn es_storage::Fs, data_dir: &Path) -> Option<Checkpoint> {
    let path = data_dir.join(FILE);
    match meta::read_json::<Checkpoint>(fs, &path) {
        Ok(Some(c)) if c.version == 1 => Some(c),
        Ok(Some(c)) => {
            tracing::warn!(file = %path.display(), version = c.version, "unknown high-watermark checkpoint version; ignored (partitions start at their log start)");
            None
        }
        Ok(None) => None,
        Err(e) => {
            tracing::warn!(file = %path.display(), error = %e, "unreadable high-watermark checkpoint; ignored (partitions start at their log start)");
            None
        }
    }
}

/// What `broker` hosts now: one entry per open partition. Blocking (takes
/// each partition's commit lock briefly).
pub fn collect(broker: &Broker) -> Checkpoint {
    let mut partitions: Vec<Entry> = broker
        .partitions_snapshot()
        .into_iter()
        .map(|(t, p)| Entry {
            topic: t.name.clone(),
            topic_id: t.id.to_string(),
            partition: p.index,
            high_watermark: p.log.storage().high_watermark(),
        })
        .collect();
    partitions.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
    Checkpoint {
        version: 1,
        partitions,
    }
}

/// Gives every open partition of `broker` the high watermark it starts at
/// when replication first switches on: its checkpointed value, or its log
/// start. Call after `Broker::open`, before the metadata assigns roles.
/// Blocking.
pub fn restore(broker: &Broker) {
    let fs = broker.config().storage.fs.clone();
    let cp = read(fs.as_ref(), &broker.config().data_dir).unwrap_or_default();
    let known: HashMap<(&str, &str, i32), u64> = cp
        .partitions
        .iter()
        .map(|e| {
            (
                (e.topic.as_str(), e.topic_id.as_str(), e.partition),
                e.high_watermark,
            )
        })
        .collect();
    let (mut found, mut missing) = (0usize, 0usize);
    for (t, p) in broker.partitions_snapshot() {
        let storage = p.log.storage();
        let id = t.id.to_string();
        let hw = match known.get(&(t.name.as_str(), id.as_str(), p.index)) {
            Some(&hw) => {
                found += 1;
                hw
            }
            None => {
                missing += 1;
                storage.log_start_offset()
            }
        };
        storage.restore_high_watermark(hw);
    }
    tracing::info!(
        checkpointed = found,
        from_log_start = missing,
        "high watermarks restored"
    );
}

/// Remembers what was last written, so an unchanged checkpoint costs no
/// write and no fsync.
#[derive(Default)]
pub struct Writer {
    last: Option<Checkpoint>,
}

impl Writer {
    /// Writes the checkpoint if it changed since the last write. Blocking.
    pub fn write(&mut self, broker: &Broker) -> Result<bool, StorageError> {
        let cp = collect(broker);
        if self.last.as_ref() == Some(&cp) {
            return Ok(false);
        }
        let path = broker.config().data_dir.join(FILE);
        meta::write_json(broker.config().storage.fs.as_ref(), &path, &cp)?;
        self.last = Some(cp);
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::BrokerConfig;
    use es_storage::simfs::SimFs;
    use es_storage::{Fs, RecordBatchBuf, RecordMeta};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reopened_broker_starts_replication_at_the_checkpoint() {
        let dir = tempfile::tempdir().expect("tmp");
        let cfg = || BrokerConfig::new(dir.path().join("data"), "127.0.0.1:0");
        let b = Broker::open_running(cfg()).await.expect("open");
        let t = b
            .create_topic("t", 2, Default::default(), false)
            .await
            .expect("create")
            .expect("t");
        for slot in t.partitions() {
            let mut batch = RecordBatchBuf::new();
            for _ in 0..10 {
                batch.push(0, None, Some(b"v"), [], &RecordMeta::default());
            }
            let p = slot.log.storage().clone();
            tokio::task::spawn_blocking(move || {
                p.append(&mut batch).expect("append");
                p.flush().expect("flush");
            })
            .await
            .expect("join");
        }
        let mut w = Writer::default();
        assert!(w.write(&b).expect("write"), "first write");
        assert!(!w.write(&b).expect("write"), "unchanged: not written again");
        // Partition 0 was checkpointed at 4 (its last 6 records reached no
        // other replica), partition 1 not at all; another topic's entry
        // under the same name but another id does not count.
        let data = b.config().data_dir.clone();
        let mut cp = read(b.config().storage.fs.as_ref(), &data).expect("checkpoint");
        assert_eq!(cp.partitions.len(), 2);
        assert!(cp.partitions.iter().all(|e| e.high_watermark == 10));
        cp.partitions[0].high_watermark = 4;
        cp.partitions[1].topic_id = "another-incarnation".into();
        let fs = b.config().storage.fs.clone();
        meta::write_json(fs.as_ref(), &data.join(FILE), &cp).expect("write");
        drop(t);
        b.stop_metadata().await;
        b.close().expect("close");
        drop(b);

        let b = Broker::open_running(cfg()).await.expect("reopen");
        restore(&b);
        let t = b.topic("t").expect("t");
        let starts: Vec<u64> = t
            .partitions()
            .iter()
            .map(|slot| {
                let p = slot.log.storage();
                assert_eq!(p.high_watermark(), 10, "not replicated: unchanged");
                p.set_replicated(true);
                p.high_watermark()
            })
            .collect();
        assert_eq!(starts, vec![4, 0]);
    }

    #[test]
    fn a_checkpoint_round_trips_and_a_bad_one_is_ignored() {
        let fs = SimFs::new();
        let dir = Path::new("/data");
        fs.create_dir_all(dir).expect("dir");
        assert_eq!(read(&fs, dir), None, "none yet");
        let cp = Checkpoint {
            version: 1,
            partitions: vec![Entry {
                topic: "t".into(),
                topic_id: "id".into(),
                partition: 2,
                high_watermark: 41,
            }],
        };
        meta::write_json(&fs, &dir.join(FILE), &cp).expect("write");
        assert_eq!(read(&fs, dir), Some(cp));
        for bad in [
            &b"{not json"[..],
            br#"{"version":2,"partitions":[]}"#,
            br#"{"version":1,"partitions":[{"topic":"t","partition":-1,"high_watermark":-5}]}"#,
        ] {
            meta::write_atomic(&fs, &dir.join(FILE), bad).expect("write");
            assert_eq!(read(&fs, dir), None, "{}", String::from_utf8_lossy(bad));
        }
    }
}
