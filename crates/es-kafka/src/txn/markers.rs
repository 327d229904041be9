//! Where a transaction's markers go when it completes.
//!
//! Every partition of the transaction gets a COMMIT or ABORT marker from
//! its leader. The coordinator appends the markers of partitions this
//! broker leads itself; for the others it sends WriteTxnMarkers (API 27)
//! to their leaders, one request per broker, as Kafka's
//! `TransactionMarkerChannelManager` does. A group added with
//! AddOffsetsToTxn whose coordinator is another broker gets the marker of
//! its `__consumer_offsets` partition too: that broker then commits or
//! drops the offsets TxnOffsetCommit left with it
//! ([`super::remote_offsets`]).
//!
//! A marker that cannot be written now (no leader, a peer down, a timeout)
//! leaves the transaction in PrepareCommit/PrepareAbort; the coordinator's
//! tick sends the rest again every second, and recovery after a restart
//! does the same, until every marker is written. Partitions already
//! written are not sent again; offsets partitions are (settling them twice
//! is harmless: the second finds nothing pending).

use std::collections::BTreeMap;

use super::state::TopicPartition;
use crate::partition_log::PartitionLog;
use crate::topics::CONSUMER_OFFSETS_TOPIC;

/// Where one partition's marker is written.
#[derive(Debug)]
pub enum MarkerTarget {
    /// This broker leads it.
    Local(PartitionLog),
    /// Broker `id` leads it.
    Remote(i32),
    /// The topic or partition no longer exists: nothing to mark.
    Gone,
    /// No leader now (or not known yet): try again later.
    Unavailable,
}

/// Where a group's transactional offsets are settled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupTarget {
    /// This broker coordinates the group: the offsets are in the
    /// transaction's record.
    Here,
    /// Broker `broker` coordinates it through `__consumer_offsets`
    /// partition `partition`.
    Remote { broker: i32, partition: i32 },
    /// Its coordinator is unknown now: try again later.
    Unavailable,
}

/// One WriteTxnMarkers entry: the markers of one transaction for one broker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MarkerBatch {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub commit: bool,
    pub coordinator_epoch: i32,
    pub partitions: Vec<TopicPartition>,
}

/// The remote part of a completion: partitions (and offsets partitions)
/// by broker.
#[derive(Debug, Default)]
pub struct RemotePlan {
    pub by_broker: BTreeMap<i32, Vec<TopicPartition>>,
}

impl RemotePlan {
    pub fn add(&mut self, broker: i32, tp: TopicPartition) {
        let v = self.by_broker.entry(broker).or_default();
        if !v.contains(&tp) {
            v.push(tp);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.by_broker.is_empty()
    }
}

/// Whether `tp` is an offsets partition (its marker settles offsets; the
/// transaction's own partition list never holds it).
pub fn is_offsets_partition(tp: &TopicPartition) -> bool {
    tp.topic == CONSUMER_OFFSETS_TOPIC
}

/// Sends the markers of `rec`'s remote partitions (planned in `remote`)
/// and of its groups coordinated elsewhere, one WriteTxnMarkers per
/// broker; adds the data partitions written to `written`. Err names the
/// first thing that failed (the caller retries later).
pub(super) fn send_remote(
    parts: &dyn super::Partitions,
    rec: &super::TxnRecord,
    commit: bool,
    mut remote: RemotePlan,
    written: &mut Vec<TopicPartition>,
) -> Result<(), String> {
    let mut failure = None;
    for g in &rec.groups {
        match parts.group_target(g) {
            GroupTarget::Here => {}
            GroupTarget::Remote { broker, partition } => {
                remote.add(
                    broker,
                    TopicPartition::new(CONSUMER_OFFSETS_TOPIC, partition),
                );
            }
            GroupTarget::Unavailable => {
                failure = Some(format!("the coordinator of group {g} is not available"));
            }
        }
    }
    for (broker, partitions) in remote.by_broker {
        let batch = MarkerBatch {
            producer_id: rec.producer_id,
            producer_epoch: rec.producer_epoch,
            commit,
            coordinator_epoch: super::COORDINATOR_EPOCH,
            partitions,
        };
        match parts.send_markers(broker, &batch) {
            Ok(done) => {
                for tp in &batch.partitions {
                    if !done.contains(tp) {
                        failure = Some(format!(
                            "broker {broker} did not write the marker of {}-{}",
                            tp.topic, tp.partition
                        ));
                    } else if !is_offsets_partition(tp) {
                        written.push(tp.clone());
                    }
                }
            }
            Err(why) => failure = Some(format!("markers to broker {broker}: {why}")),
        }
    }
    failure.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use es_storage::RealFs;
    use parking_lot::Mutex;

    use super::*;
    use crate::txn::{Partitions, TxnConfig, TxnCoordinator, TxnState};

    /// Every partition of topic "r" is led by broker 2 and group "g" is
    /// coordinated by broker 3, whose links fail while `down` is set.
    #[derive(Default)]
    struct Remote {
        down: Mutex<bool>,
        sent: Mutex<Vec<(i32, MarkerBatch)>>,
    }

    impl Partitions for Remote {
        fn partition(&self, _: &str, _: i32) -> Option<PartitionLog> {
            None
        }
        fn for_each_partition(&self, _: &mut dyn FnMut(&PartitionLog)) {}
        fn marker_target(&self, topic: &str, _: i32) -> MarkerTarget {
            if topic == "r" {
                MarkerTarget::Remote(2)
            } else {
                MarkerTarget::Gone
            }
        }
        fn group_target(&self, _: &str) -> GroupTarget {
            GroupTarget::Remote {
                broker: 3,
                partition: 0,
            }
        }
        fn send_markers(
            &self,
            broker: i32,
            batch: &MarkerBatch,
        ) -> Result<Vec<TopicPartition>, String> {
            if *self.down.lock() {
                return Err("connection refused".into());
            }
            self.sent.lock().push((broker, batch.clone()));
            Ok(batch.partitions.clone())
        }
    }

    fn open(dir: &std::path::Path) -> TxnCoordinator {
        TxnCoordinator::open(
            Arc::new(RealFs),
            dir,
            TxnConfig::default(),
            es_storage::clock::system(),
        )
        .expect("open")
    }

    fn state(c: &TxnCoordinator) -> TxnState {
        c.describe("x").expect("x").state
    }

    #[test]
    fn remote_markers_are_resent_until_written_and_after_a_restart() {
        let dir = tempfile::tempdir().expect("tmp");
        let remote = Remote::default();
        let c = open(dir.path());
        let (pid, epoch) = c
            .init_producer_id(&remote, Some("x"), 60_000, None)
            .expect("init");
        let tps = [TopicPartition::new("r", 0), TopicPartition::new("r", 1)];
        c.add_partitions("x", pid, epoch, &tps, &["g".to_string()])
            .expect("add");
        *remote.down.lock() = true;
        // The outcome is decided (NONE) but the markers are not written.
        c.end_txn(&remote, "x", pid, epoch, true).expect("end");
        assert_eq!(state(&c), TxnState::PrepareCommit);
        c.tick(&remote);
        assert_eq!(state(&c), TxnState::PrepareCommit, "still unreachable");
        // A restart: recovery tries again, and so does every tick.
        drop(c);
        let c = open(dir.path());
        c.recover(&remote);
        assert_eq!(state(&c), TxnState::PrepareCommit);
        *remote.down.lock() = false;
        c.tick(&remote);
        assert_eq!(state(&c), TxnState::CompleteCommit);
        let sent = remote.sent.lock().clone();
        let to = |b: i32| -> Vec<MarkerBatch> {
            sent.iter()
                .filter(|(x, _)| *x == b)
                .map(|(_, m)| m.clone())
                .collect()
        };
        assert_eq!(to(2).len(), 1, "one request per leader");
        assert_eq!(to(2)[0].partitions, tps.to_vec());
        assert!(to(2)[0].commit && to(2)[0].producer_id == pid);
        assert_eq!(
            to(3)[0].partitions,
            vec![TopicPartition::new(CONSUMER_OFFSETS_TOPIC, 0)],
            "the group's offsets partition gets the marker too"
        );
    }
}
