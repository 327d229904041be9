//! The ShareManager as the broker holds it, over a real `PartitionLog` on
//! real files: the reset offsets read from the log (high watermark, log
//! start after DeleteRecords, a timestamp), an acquisition over what the log
//! holds made durable, the broker's timer task expiring its lock with the
//! broker's `ManualClock`, and the fold when the broker closes.

use std::collections::BTreeMap;
use std::time::Duration;

use es_storage::{Clock, ManualClock};

use super::*;
use crate::broker::{Broker, BrokerConfig};
use crate::shares::partition::{AcquireMode, RecordState};
use crate::shares::store::ShareFiles;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_broker_runs_share_partitions_over_a_real_log() {
    let dir = tempfile::tempdir().expect("tmp");
    let clock = ManualClock::new(1_700_000_000_000);
    let mut cfg = BrokerConfig::new(dir.path().join("data"), "127.0.0.1:0");
    cfg.storage.clock = clock.clone();
    let b = Broker::open_running(cfg).await.expect("open");
    let topic = b
        .create_topic("orders", 1, BTreeMap::new(), false)
        .await
        .expect("create")
        .expect("created");
    let log = topic.partition(0).expect("partition").log.clone();
    let l = log.clone();
    tokio::task::spawn_blocking(move || {
        // One record per stored batch, stamped 1_000 + 10 × offset.
        for i in 0..20i64 {
            let mut buf = es_storage::RecordBatchBuf::new();
            buf.push(
                1_000 + 10 * i,
                None,
                Some(&b"v"[..]),
                [],
                &es_storage::RecordMeta::default(),
            );
            let info = l.storage().append(&mut buf).expect("append");
            l.wait_durable(info.last_offset + 1).expect("durable");
        }
        l.delete_records_before(4).expect("delete records");
    })
    .await
    .expect("appends");
    assert_eq!(ShareLog::high_watermark(&log), 20);
    assert_eq!(ShareLog::log_start_offset(&log), 4);

    let shares = b.shares().clone();
    let start_of = |group: &str, reset: AutoOffsetReset| {
        let key = ShareKey::new(group, topic.id, 0);
        let config = ShareConfig {
            auto_offset_reset: reset,
            ..ShareConfig::default()
        };
        let t = ShareTarget {
            key: &key,
            topic: "orders",
            log: &log,
            config: &config,
        };
        drop(shares.begin_fetch(&t, 0).expect("load"));
        shares.inspect(&key, |c| c.start_offset()).expect("loaded")
    };
    assert_eq!(start_of("latest", AutoOffsetReset::Latest), 20);
    assert_eq!(start_of("earliest", AutoOffsetReset::Earliest), 4);
    let back = clock.now_ms() - 1_105;
    assert_eq!(
        start_of("dated", AutoOffsetReset::ByDuration { ms: back }),
        11,
        "the first record stamped at or after 1_105"
    );

    // An acquisition over the stored batches, made durable on real files.
    let key = ShareKey::new("earliest", topic.id, 0);
    let config = ShareConfig::default();
    let t = ShareTarget {
        key: &key,
        topic: "orders",
        log: &log,
        config: &config,
    };
    let g = shares.begin_fetch(&t, 8).expect("begin").expect("lock");
    assert_eq!((g.fetch_offset, g.max_records), (4, 8));
    let batches: Vec<(i64, i64)> = (g.fetch_offset..20).map(|o| (o, o)).collect();
    let req = AcquireRequest {
        member: "m",
        max_records: 8,
        batch_size: 100,
        mode: AcquireMode::BatchOptimized,
    };
    let read = ReadView {
        log_start: 4,
        end: 20,
        batches: &batches,
        aborted: &[],
    };
    let got = shares.finish_fetch(g, &t, &req, &read).expect("acquire");
    assert_eq!(
        got.records,
        vec![crate::shares::partition::AcquiredRecords {
            first: 4,
            last: 11,
            delivery_count: 1
        }]
    );
    shares
        .wait_durable(got.ticket.expect("journaled"))
        .await
        .expect("durable");

    // The broker's timer task expires the lock when the broker's clock
    // passes it.
    let notify = shares.available(&key).expect("loaded");
    let parked = notify.notified();
    clock.advance(Duration::from_millis(
        u64::try_from(config.record_lock_duration_ms).expect("positive"),
    ));
    shares.locks().clock_moved();
    tokio::time::timeout(Duration::from_secs(60), parked)
        .await
        .expect("the broker's timer expired the lock");
    let r = shares
        .inspect(&key, |c| c.record(7))
        .flatten()
        .expect("in flight");
    assert_eq!((r.state, r.delivery_count), (RecordState::Available, 1));

    // Closing the broker folds the journals into snapshots.
    let files = ShareFiles::new(b.data_dir(), "earliest", "orders", 0);
    assert!(!files.snapshot.exists());
    b.begin_shutdown();
    let c = b.clone();
    tokio::task::spawn_blocking(move || c.close())
        .await
        .expect("task")
        .expect("close");
    assert!(files.snapshot.exists(), "folded at close");
    assert_eq!(
        std::fs::metadata(&files.journal).expect("journal").len(),
        0,
        "the journal is empty after the fold"
    );
}
