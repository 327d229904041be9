//! The ShareManager on es-storage's simulated file system with a
//! `ManualClock`: lazy load and Init (each `share.auto.offset.reset`), the
//! restart rules after a crash, the fetch lock, lock expiry by the timer
//! task, renewals, acknowledgement durability (the ticket completes only
//! after its fsync; a failed fsync fences), connection close, unloading and
//! reloading, the fold at shutdown. The property test against the bare
//! core is in `manager_prop_tests.rs`, on the helpers here.

use std::sync::atomic::AtomicI64;
use std::time::Duration;

use es_storage::simfs::{SimFs, Tear};
use es_storage::ManualClock;
use uuid::Uuid;

use super::*;
use crate::shares::partition::{AcquireMode, RecordInfo, RecordState, ShareLimits, ShareSummary};
use crate::shares::sessions::{FetchContext, SessionKey, ShareFetchSession};
use crate::shares::store::ShareFiles;

pub(super) const GROUP: &str = "queue";
pub(super) const TOPIC: &str = "orders";
const STORAGE_ERROR: i16 = 56;
const BATCH: i64 = 5;

fn data_dir() -> PathBuf {
    PathBuf::from("/data")
}

pub(super) fn topic_id() -> Uuid {
    Uuid::from_bytes([9; 16])
}

pub(super) fn key(p: i32) -> ShareKey {
    ShareKey::new(GROUP, topic_id(), p)
}

pub(super) fn tp(p: i32) -> TopicPartition {
    TopicPartition {
        topic_id: topic_id(),
        partition: p,
    }
}

/// A log of `[start, hw)` in stored batches of [`BATCH`] records, one per
/// 10 ms of timestamps from 1_000.
#[derive(Debug, Default)]
pub(super) struct TestLog {
    pub(super) start: AtomicI64,
    pub(super) hw: AtomicI64,
}

impl TestLog {
    pub(super) fn new(start: i64, hw: i64) -> TestLog {
        TestLog {
            start: AtomicI64::new(start),
            hw: AtomicI64::new(hw),
        }
    }

    pub(super) fn start(&self) -> i64 {
        self.start.load(Ordering::SeqCst)
    }

    pub(super) fn hw(&self) -> i64 {
        self.hw.load(Ordering::SeqCst)
    }

    /// The stored batches a read from `offset` returns.
    pub(super) fn batches_from(&self, offset: i64) -> Vec<(i64, i64)> {
        let mut out = Vec::new();
        let from = offset.max(self.start());
        let mut b = from - from % BATCH;
        while b < self.hw() {
            let (first, last) = (b.max(self.start()), (b + BATCH - 1).min(self.hw() - 1));
            if first <= last {
                out.push((first, last));
            }
            b += BATCH;
        }
        out
    }
}

impl ShareLog for TestLog {
    fn log_start_offset(&self) -> i64 {
        self.start()
    }

    fn high_watermark(&self) -> i64 {
        self.hw()
    }

    fn leader_epoch(&self) -> i32 {
        3
    }

    fn offset_for_timestamp(&self, ts_ms: i64) -> Result<Option<i64>, StorageError> {
        let o = ((ts_ms - 1_000).max(0) + 9) / 10;
        Ok((o < self.hw()).then_some(o.max(self.start())))
    }
}

pub(super) struct Env {
    pub(super) fs: SimFs,
    pub(super) clock: Arc<ManualClock>,
    pub(super) mgr: Arc<ShareManager>,
    pub(super) log: TestLog,
    pub(super) config: ShareConfig,
}

fn config() -> ShareConfig {
    ShareConfig {
        limits: ShareLimits {
            delivery_count_limit: 3,
            max_record_locks: 200,
        },
        record_lock_duration_ms: 1_000,
        auto_offset_reset: AutoOffsetReset::Earliest,
        renew_allowed: true,
        read_committed: false,
    }
}

fn manager(fs: &SimFs, clock: &Arc<ManualClock>) -> Arc<ShareManager> {
    Arc::new(ShareManager::new(
        Arc::new(fs.clone()),
        data_dir(),
        clock.clone(),
        MAX_SESSIONS,
    ))
}

const MAX_SESSIONS: usize = 8;

impl Env {
    pub(super) fn new(log: TestLog) -> Env {
        let fs = SimFs::new();
        let clock = ManualClock::new(1_000_000);
        let mgr = manager(&fs, &clock);
        Env {
            fs,
            clock,
            mgr,
            log,
            config: config(),
        }
    }

    /// The broker again on what the disk holds now (a crash: only synced
    /// bytes), same log and clock.
    pub(super) fn crash(&self) -> Env {
        self.crash_torn(Tear::None)
    }

    /// [`Env::crash`] keeping `tear` of the unsynced bytes.
    pub(super) fn crash_torn(&self, tear: Tear) -> Env {
        let fs = self.fs.crash_image(tear);
        let mgr = manager(&fs, &self.clock);
        Env {
            fs,
            clock: self.clock.clone(),
            mgr,
            log: TestLog::new(self.log.start(), self.log.hw()),
            config: self.config,
        }
    }

    pub(super) fn target<'a>(&'a self, k: &'a ShareKey) -> ShareTarget<'a> {
        ShareTarget {
            key: k,
            topic: TOPIC,
            log: &self.log,
            config: &self.config,
        }
    }

    pub(super) fn advance(&self, ms: u64) {
        self.clock.advance(Duration::from_millis(ms));
    }

    /// One acquiring fetch of up to `max` records for `member`, without
    /// waiting for its ticket.
    pub(super) fn fetch_ticket(
        &self,
        k: &ShareKey,
        member: &str,
        max: i32,
    ) -> Result<FetchAcquired, ShareFailure> {
        let t = self.target(k);
        let Some(g) = self.mgr.begin_fetch(&t, max)? else {
            return Ok(FetchAcquired::default());
        };
        let batches = if g.max_records > 0 {
            self.log.batches_from(g.fetch_offset)
        } else {
            Vec::new()
        };
        let req = AcquireRequest {
            member,
            max_records: max,
            batch_size: 100,
            mode: AcquireMode::BatchOptimized,
        };
        let read = ReadView {
            log_start: self.log.start(),
            end: self.log.hw(),
            batches: &batches,
            aborted: &[],
        };
        self.mgr.finish_fetch(g, &t, &req, &read)
    }

    pub(super) async fn fetch(&self, k: &ShareKey, member: &str, max: i32) -> Vec<AcquiredRecords> {
        let got = self.fetch_ticket(k, member, max).expect("fetch");
        if let Some(t) = got.ticket {
            self.mgr.wait_durable(t).await.expect("durable");
        }
        got.records
    }

    pub(super) async fn ack(&self, k: &ShareKey, member: &str, first: i64, last: i64, t: i8) {
        let b = AckBatch {
            first,
            last,
            types: vec![t],
        };
        let ticket = self
            .mgr
            .acknowledge(&self.target(k), member, &[b])
            .expect("acknowledge");
        if let Some(t) = ticket {
            self.mgr.wait_durable(t).await.expect("durable");
        }
    }

    fn record(&self, k: &ShareKey, o: i64) -> Option<RecordInfo> {
        self.mgr.inspect(k, |c| c.record(o)).flatten()
    }

    fn state(&self, k: &ShareKey, o: i64) -> (RecordState, u16) {
        let r = self.record(k, o).expect("record in flight");
        (r.state, r.delivery_count)
    }

    fn summary(&self, k: &ShareKey) -> ShareSummary {
        self.mgr.inspect(k, |c| c.summary()).expect("loaded")
    }

    /// Loads the share-partition (a fetch that reads nothing).
    pub(super) fn touch(&self, k: &ShareKey) {
        let g = self.mgr.begin_fetch(&self.target(k), 0).expect("load");
        drop(g);
    }

    fn files(&self, p: i32) -> ShareFiles {
        ShareFiles::new(&data_dir(), GROUP, TOPIC, p)
    }
}

fn acquired(first: i64, last: i64, delivery_count: u16) -> AcquiredRecords {
    AcquiredRecords {
        first,
        last,
        delivery_count,
    }
}

#[tokio::test]
async fn a_first_load_writes_an_init_from_the_auto_offset_reset() {
    let mut env = Env::new(TestLog::new(10, 50));
    env.config.auto_offset_reset = AutoOffsetReset::Latest;
    env.touch(&key(0));
    assert_eq!(env.summary(&key(0)).start_offset, 50, "latest = the HW");
    env.config.auto_offset_reset = AutoOffsetReset::Earliest;
    env.touch(&key(1));
    assert_eq!(
        env.summary(&key(1)).start_offset,
        10,
        "earliest = log start"
    );
    // by_duration: the test log stamps offset o at 1_000 + 10 o; the wall
    // clock reads 1_000_000, so 1_000_000 − 998_800 ms is timestamp 1_200:
    // offset 20.
    env.config.auto_offset_reset = AutoOffsetReset::ByDuration {
        ms: 1_000_000 - 1_200,
    };
    env.touch(&key(2));
    assert_eq!(env.summary(&key(2)).start_offset, 20);
    env.config.auto_offset_reset = AutoOffsetReset::ByDuration { ms: 1 };
    env.touch(&key(3));
    assert_eq!(env.summary(&key(3)).start_offset, 50, "none that late: HW");
    // A second use does not initialise again, whatever the reset says now.
    env.config.auto_offset_reset = AutoOffsetReset::Earliest;
    env.log.hw.store(80, Ordering::SeqCst);
    env.touch(&key(0));
    assert_eq!(env.summary(&key(0)).start_offset, 50);

    // The Init is durable once the first acquisition's fsync is (journal
    // order): after a crash the start is kept although the reset moved.
    let got = env.fetch(&key(0), "m", 3).await;
    assert_eq!(got, vec![acquired(50, 54, 1)]);
    let env2 = env.crash();
    env2.touch(&key(0));
    assert_eq!(env2.summary(&key(0)).start_offset, 50);
    assert_eq!(env2.summary(&key(0)).next_offset, 55);
    // key(1) never synced anything: loading it again is a fresh Init.
    env2.touch(&key(1));
    assert_eq!(env2.summary(&key(1)).start_offset, 10);
}

#[tokio::test]
async fn a_restart_keeps_acknowledged_and_brings_acquired_back_available() {
    let env = Env::new(TestLog::new(0, 40));
    let k = key(0);
    assert_eq!(env.fetch(&k, "a", 10).await, vec![acquired(0, 9, 1)]);
    env.ack(&k, "a", 0, 4, 1).await; // accept
    env.ack(&k, "a", 5, 9, 2).await; // release: available, count 1
                                     // 5-9 again (count 2), 10-14 new (count 1).
    assert_eq!(
        env.fetch(&k, "b", 10).await,
        vec![acquired(5, 9, 2), acquired(10, 14, 1)]
    );
    env.ack(&k, "b", 5, 9, 2).await; // release: count 2
    assert_eq!(env.fetch(&k, "c", 5).await, vec![acquired(5, 9, 3)]);
    assert_eq!(env.state(&k, 7), (RecordState::Acquired, 3));

    // Crash with 5-9 (count 3 = the limit) and 10-14 (count 1) acquired.
    let env2 = env.crash();
    env2.touch(&k);
    let s = env2.summary(&k);
    assert_eq!(
        s.start_offset, 10,
        "0-4 acknowledged, 5-9 archived at the limit"
    );
    assert_eq!(s.next_offset, 15, "the cursor after the last stored offset");
    assert!(env2.record(&k, 7).is_none(), "below start");
    for o in 10..15 {
        assert_eq!(env2.state(&k, o), (RecordState::Available, 1), "offset {o}");
    }
    assert_eq!(env2.mgr.locks().deadline(&k), None, "nothing acquired");
    // An acknowledgement of a record acquired before the crash is refused
    // as Kafka refuses it after a leader change.
    let b = AckBatch {
        first: 10,
        last: 14,
        types: vec![1],
    };
    let e = env2
        .mgr
        .acknowledge(&env2.target(&k), "b", &[b])
        .expect_err("not acquired any more");
    assert_eq!(e.code(), 121);
    // Redelivered with count 2; new records follow the cursor.
    assert_eq!(
        env2.fetch(&k, "z", 10).await,
        vec![acquired(10, 14, 2), acquired(15, 19, 1)]
    );

    // The log start passed the stored start while the broker was down.
    let env3 = env2.crash();
    env3.log.start.store(12, Ordering::SeqCst);
    env3.touch(&k);
    assert_eq!(
        env3.summary(&k).start_offset,
        12,
        "never below the log start"
    );
    assert_eq!(env3.summary(&k).next_offset, 20);
    assert_eq!(env3.state(&k, 12), (RecordState::Available, 2));
    assert_eq!(env3.state(&k, 17), (RecordState::Available, 1));
}

#[tokio::test]
async fn the_restart_archives_at_the_limit_and_journals_it() {
    let env = Env::new(TestLog::new(0, 20));
    let k = key(0);
    for count in 1..=3u16 {
        assert_eq!(env.fetch(&k, "a", 5).await, vec![acquired(0, 4, count)]);
        if count < 3 {
            env.ack(&k, "a", 0, 4, 2).await;
        }
    }
    let env2 = env.crash();
    env2.touch(&k);
    assert_eq!(env2.summary(&k).start_offset, 5, "archived, then passed");
    // The archive was journaled: a clean close and another load agree
    // without the restart rule having anything left to do.
    env2.mgr.close().expect("close");
    let env3 = env2.crash();
    env3.touch(&k);
    assert_eq!(env3.summary(&k).start_offset, 5);
    assert_eq!(env3.fetch(&k, "b", 5).await, vec![acquired(5, 9, 1)]);
}

#[tokio::test]
async fn a_contended_fetch_lock_is_skipped_and_given_back() {
    let env = Env::new(TestLog::new(0, 40));
    let k = key(0);
    let t = env.target(&k);
    let g = env.mgr.begin_fetch(&t, 10).expect("begin").expect("lock");
    assert_eq!((g.fetch_offset, g.max_records), (0, 10));
    assert!(
        env.mgr.begin_fetch(&t, 10).expect("begin").is_none(),
        "a second acquiring fetch skips the share-partition"
    );
    // Acknowledgements do not take the fetch lock (this one finds nothing
    // acquired).
    let b = AckBatch {
        first: 0,
        last: 0,
        types: vec![1],
    };
    let e = env
        .mgr
        .acknowledge(&t, "m", &[b])
        .expect_err("nothing acquired");
    assert_eq!(e.code(), 121);
    drop(g);
    let g = env
        .mgr
        .begin_fetch(&t, 10)
        .expect("begin")
        .expect("given back on drop");
    let batches = env.log.batches_from(g.fetch_offset);
    let req = AcquireRequest {
        member: "m",
        max_records: 10,
        batch_size: 5,
        mode: AcquireMode::BatchOptimized,
    };
    let read = ReadView {
        log_start: 0,
        end: 40,
        batches: &batches,
        aborted: &[],
    };
    let got = env.mgr.finish_fetch(g, &t, &req, &read).expect("finish");
    assert_eq!(got.records, vec![acquired(0, 4, 1), acquired(5, 9, 1)]);
    drop(got.ticket);
    let g = env
        .mgr
        .begin_fetch(&t, 10)
        .expect("begin")
        .expect("given back");
    assert_eq!(g.fetch_offset, 10);
    // At the lock limit only records below the cursor may be acquired.
    drop(g);
    let mut small = env.config;
    small.limits.max_record_locks = 10;
    let t2 = ShareTarget {
        config: &small,
        ..t
    };
    let g = env.mgr.begin_fetch(&t2, 10).expect("begin").expect("lock");
    assert_eq!(g.max_records, 0, "10 in flight, none available");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_timer_expires_locks_and_wakes_parked_fetches() {
    let env = Env::new(TestLog::new(0, 40));
    let k = key(0);
    let timer = tokio::spawn(env.mgr.clone().run_lock_timer());
    assert_eq!(env.fetch(&k, "a", 5).await, vec![acquired(0, 4, 1)]);
    let deadline = env.mgr.locks().deadline(&k).expect("indexed");
    assert_eq!(deadline, env.mgr.now_ms() + 1_000);
    // A parked fetch's wait, registered before the clock moves.
    let notify = env.mgr.available(&k).expect("loaded");
    let parked = notify.notified();
    env.advance(999);
    env.mgr.locks().clock_moved();
    env.advance(1);
    env.mgr.locks().clock_moved();
    tokio::time::timeout(Duration::from_secs(60), parked)
        .await
        .expect("the expiry wakes the parked fetch");
    assert_eq!(env.state(&k, 2), (RecordState::Available, 1));
    assert_eq!(env.mgr.locks().deadline(&k), None);
    assert_eq!(env.mgr.stats().lock_expirations.load(Ordering::Relaxed), 5);
    // Redelivered with count 2.
    assert_eq!(env.fetch(&k, "b", 5).await, vec![acquired(0, 4, 2)]);
    env.mgr.shutdown();
    tokio::time::timeout(Duration::from_secs(60), timer)
        .await
        .expect("the timer ends at shutdown")
        .expect("task");
}

#[tokio::test]
async fn an_acknowledgement_racing_the_expiry_wins() {
    let env = Env::new(TestLog::new(0, 40));
    let k = key(0);
    assert_eq!(env.fetch(&k, "a", 5).await, vec![acquired(0, 4, 1)]);
    env.advance(1_000);
    // The timer found the share-partition due (its entry is out of the
    // index) but the acknowledgement took the mutex first.
    let due = env.mgr.locks().take_due(env.mgr.now_ms());
    assert_eq!(due, vec![k.clone()]);
    env.ack(&k, "a", 0, 4, 1).await;
    env.mgr.expire(&due);
    assert_eq!(
        env.summary(&k).start_offset,
        5,
        "acknowledged, not released"
    );
    assert_eq!(env.fetch(&k, "b", 5).await, vec![acquired(5, 9, 1)]);
}

#[tokio::test]
async fn renew_replaces_the_deadline() {
    let env = Env::new(TestLog::new(0, 40));
    let k = key(0);
    assert_eq!(env.fetch(&k, "a", 5).await, vec![acquired(0, 4, 1)]);
    let first = env.mgr.locks().deadline(&k).expect("indexed");
    env.advance(600);
    env.mgr.renew(&env.target(&k), "a", 0, 4).expect("renew");
    assert_eq!(env.mgr.locks().deadline(&k), Some(first + 600));
    env.advance(500);
    assert_eq!(env.mgr.expire_due(), 0, "the old deadline is gone");
    assert_eq!(env.state(&k, 0), (RecordState::Acquired, 1));
    env.advance(500);
    assert_eq!(env.mgr.expire_due(), 1);
    assert_eq!(env.state(&k, 0), (RecordState::Available, 1));
    // Renewing is refused when the group turned it off, and by a non-owner.
    assert_eq!(env.fetch(&k, "a", 5).await, vec![acquired(0, 4, 2)]);
    let mut off = env.config;
    off.renew_allowed = false;
    let t = ShareTarget {
        config: &off,
        ..env.target(&k)
    };
    let e = env.mgr.renew(&t, "a", 0, 4).expect_err("disabled");
    assert_eq!(e.code(), 121);
    let e = env
        .mgr
        .renew(&env.target(&k), "b", 0, 4)
        .expect_err("not owner");
    assert_eq!(e.code(), 121);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acknowledgement_is_answered_only_after_its_fsync() {
    let env = Arc::new(Env::new(TestLog::new(0, 40)));
    let k = key(0);
    assert_eq!(env.fetch(&k, "a", 5).await, vec![acquired(0, 4, 1)]);
    let b = AckBatch {
        first: 0,
        last: 4,
        types: vec![1],
    };
    env.fs.hold_syncs();
    let ticket = env
        .mgr
        .acknowledge(&env.target(&k), "a", &[b])
        .expect("acknowledge")
        .expect("an acceptance is journaled");
    let e = env.clone();
    let waiter = tokio::spawn(async move { e.mgr.wait_durable(ticket).await });
    let fs = env.fs.clone();
    let held = tokio::task::spawn_blocking(move || fs.await_held_syncs(1, Duration::from_secs(60)))
        .await
        .expect("task");
    assert!(held, "the fsync is running");
    assert!(
        !waiter.is_finished(),
        "not answered while the fsync is held"
    );
    // While the fsync is held the change is not on disk.
    let before = env.crash();
    before.touch(&k);
    assert_eq!(before.summary(&k).start_offset, 0);
    env.fs.release_syncs();
    waiter.await.expect("task").expect("durable");
    let after = env.crash();
    after.touch(&k);
    assert_eq!(after.summary(&k).start_offset, 5);
}

#[tokio::test]
async fn a_failed_fsync_fences_the_share_partition_until_restart() {
    let env = Env::new(TestLog::new(0, 40));
    let (k, other) = (key(0), key(1));
    assert_eq!(env.fetch(&k, "a", 10).await, vec![acquired(0, 9, 1)]);
    assert_eq!(env.fetch(&other, "a", 5).await, vec![acquired(0, 4, 1)]);
    env.fs.fail_sync_at(env.fs.sync_count() + 1);
    let b = AckBatch {
        first: 0,
        last: 4,
        types: vec![1],
    };
    let ticket = env
        .mgr
        .acknowledge(&env.target(&k), "a", std::slice::from_ref(&b))
        .expect("written")
        .expect("ticket");
    let e = env
        .mgr
        .wait_durable(ticket)
        .await
        .expect_err("fsync failed");
    assert_eq!(e.code(), STORAGE_ERROR);
    assert!(env.mgr.is_fenced(&k));
    assert_eq!(env.mgr.locks().deadline(&k), None);
    // Every later call answers the storage error; nothing is served from
    // memory.
    let e = env
        .mgr
        .acknowledge(&env.target(&k), "a", std::slice::from_ref(&b))
        .expect_err("fenced");
    assert_eq!(e.code(), STORAGE_ERROR);
    let e = env.mgr.begin_fetch(&env.target(&k), 5).expect_err("fenced");
    assert_eq!(e.code(), STORAGE_ERROR);
    assert!(env.mgr.inspect(&k, |c| c.start_offset()).is_none());
    assert_eq!(
        env.mgr.unload_idle(),
        0,
        "a fenced slot stays until restart"
    );
    assert!(env.mgr.is_fenced(&k));
    // Other share-partitions go on.
    env.ack(&other, "a", 0, 4, 1).await;
    // After a restart: the unanswered acceptance is not there; the records
    // are AVAILABLE with their count.
    let env2 = env.crash();
    env2.touch(&k);
    assert_eq!(env2.summary(&k).start_offset, 0);
    assert_eq!(env2.state(&k, 0), (RecordState::Available, 1));
    env2.touch(&other);
    assert_eq!(env2.summary(&other).start_offset, 5);
}

#[tokio::test]
async fn connection_close_removes_its_sessions_and_releases_their_records() {
    let env = Env::new(TestLog::new(0, 40));
    let (k0, k1) = (key(0), key(1));
    let (a, b) = (SessionKey::new(GROUP, "a"), SessionKey::new(GROUP, "b"));
    let parts = [tp(0), tp(1)];
    for (s, conn) in [(&a, 7), (&b, 8)] {
        let r = env.mgr.with_sessions(|c| {
            c.share_fetch(ShareFetchSession {
                key: s,
                epoch: 0,
                partitions: &parts,
                forgotten: &[],
                acknowledgements_present: false,
                connection: conn,
            })
        });
        assert!(matches!(r, Ok(FetchContext::Opened { .. })), "{r:?}");
    }
    assert_eq!(env.fetch(&k0, "a", 5).await, vec![acquired(0, 4, 1)]);
    assert_eq!(env.fetch(&k1, "a", 5).await, vec![acquired(0, 4, 1)]);
    assert_eq!(env.fetch(&k0, "b", 5).await, vec![acquired(5, 9, 1)]);
    let notify = env.mgr.available(&k0).expect("loaded");
    let parked = notify.notified();
    assert_eq!(env.mgr.connection_closed(7), 1);
    assert_eq!(env.mgr.connection_closed(7), 0, "once");
    tokio::time::timeout(Duration::from_secs(60), parked)
        .await
        .expect("the release wakes parked fetches");
    assert_eq!(env.mgr.with_sessions(|c| c.len()), 1);
    for k in [&k0, &k1] {
        // Count kept (Kafka 4.4), available at once.
        assert_eq!(env.state(k, 0), (RecordState::Available, 1));
    }
    assert_eq!(env.state(&k0, 5), (RecordState::Acquired, 1), "b's are b's");
    assert_eq!(env.mgr.locks().deadline(&k1), None);
    assert!(env.mgr.locks().deadline(&k0).is_some());
    // Another member gets them next, count 2.
    assert_eq!(env.fetch(&k0, "b", 5).await, vec![acquired(0, 4, 2)]);
}

/// Every offset's state of a loaded share-partition, for comparisons.
fn all_states(env: &Env, k: &ShareKey) -> (ShareSummary, Vec<Option<RecordInfo>>) {
    let s = env.summary(k);
    let recs = (s.start_offset..s.next_offset)
        .map(|o| env.record(k, o))
        .collect();
    (s, recs)
}

#[tokio::test]
async fn unloading_and_reloading_gives_the_same_state() {
    let env = Env::new(TestLog::new(0, 40));
    let k = key(0);
    assert_eq!(env.fetch(&k, "a", 20).await, vec![acquired(0, 19, 1)]);
    env.ack(&k, "a", 0, 2, 1).await;
    env.ack(&k, "a", 4, 4, 3).await;
    env.ack(&k, "a", 3, 3, 2).await;
    assert_eq!(env.mgr.unload_idle(), 0, "records acquired: kept");
    env.ack(&k, "a", 5, 19, 2).await;
    let before = all_states(&env, &k);
    // A session naming it keeps it loaded.
    let s = SessionKey::new(GROUP, "a");
    env.mgr
        .with_sessions(|c| {
            c.share_fetch(ShareFetchSession {
                key: &s,
                epoch: 0,
                partitions: &[tp(0)],
                forgotten: &[],
                acknowledgements_present: false,
                connection: 1,
            })
        })
        .expect("open");
    // A ticket not yet waited for keeps another one loaded.
    let held = env.fetch_ticket(&key(1), "a", 1).expect("fetch");
    assert_eq!(env.mgr.release_member(GROUP, "a", &[tp(1)]), 1);
    env.mgr.wait_syncs_idle();
    assert_eq!(env.mgr.unload_idle(), 0);
    drop(held);
    assert_eq!(env.mgr.connection_closed(1), 1);
    assert_eq!(env.mgr.unload_idle(), 2);
    assert_eq!(env.mgr.loaded(), 0);
    assert!(env.mgr.inspect(&k, |_| ()).is_none());
    env.touch(&k);
    assert_eq!(all_states(&env, &k), before);
    assert_eq!(
        env.fetch(&k, "b", 20).await,
        vec![acquired(3, 3, 2), acquired(5, 19, 2), acquired(20, 24, 1)]
    );
}

#[tokio::test]
async fn close_folds_every_loaded_share_partition() {
    let env = Env::new(TestLog::new(0, 40));
    for p in 0..3 {
        assert_eq!(env.fetch(&key(p), "a", 5).await, vec![acquired(0, 4, 1)]);
        env.ack(&key(p), "a", 0, 1, 1).await;
    }
    let before: Vec<_> = (0..3).map(|p| all_states(&env, &key(p))).collect();
    for p in 0..3 {
        assert!(!env
            .fs
            .read_all(&env.files(p).journal)
            .expect("journal")
            .is_empty());
    }
    env.mgr.close().expect("close");
    assert!(env.mgr.locks().is_shut_down());
    let env2 = env.crash();
    for p in 0..3 {
        let f = env.files(p);
        assert!(
            env2.fs.read_all(&f.journal).expect("journal").is_empty(),
            "folded"
        );
        assert!(!env2.fs.read_all(&f.snapshot).expect("snapshot").is_empty());
        env2.touch(&key(p));
        let (s, recs) = all_states(&env2, &key(p));
        assert_eq!(s, before[p as usize].0);
        // Acquired comes back available with its count.
        for (o, r) in recs.iter().enumerate() {
            let r = r.as_ref().expect("record");
            assert_eq!(
                (r.state, r.delivery_count),
                (RecordState::Available, 1),
                "offset {o}"
            );
        }
    }
}

#[tokio::test]
async fn the_journal_is_folded_after_answering_when_due() {
    let env = Env::new(TestLog::new(0, 400));
    env.mgr.set_fold_bytes(256);
    let k = key(0);
    for i in 0..10 {
        let got = env.fetch(&k, "a", 5).await;
        assert_eq!(got, vec![acquired(i * 5, i * 5 + 4, 1)]);
        env.ack(&k, "a", i * 5, i * 5 + 4, 1).await;
    }
    // The fsync task folds after the answers, once the journal is due: when
    // it is done the journal is below the fold size, the snapshot holds the
    // rest, and a crash loses nothing.
    env.mgr.wait_syncs_idle();
    let len = env
        .fs
        .read_all(&env.files(0).journal)
        .expect("journal")
        .len();
    assert!(len < 256, "journal of {len} bytes was folded");
    assert!(!env
        .fs
        .read_all(&env.files(0).snapshot)
        .expect("snapshot")
        .is_empty());
    let env2 = env.crash();
    env2.touch(&k);
    assert_eq!(env2.summary(&k).start_offset, 50);
}

#[tokio::test]
async fn a_topic_created_again_supersedes_the_share_partition_of_its_old_id() {
    let env = Env::new(TestLog::new(0, 40));
    let old = key(0);
    assert_eq!(env.fetch(&old, "a", 5).await, vec![acquired(0, 4, 1)]);
    env.ack(&old, "a", 0, 1, 1).await;
    // The topic is deleted and created again under the same name: a new id,
    // a new log.
    let new = ShareKey::new(GROUP, Uuid::from_bytes([10; 16]), 0);
    let env_new = Env {
        fs: env.fs.clone(),
        clock: env.clock.clone(),
        mgr: env.mgr.clone(),
        log: TestLog::new(0, 3),
        config: env.config,
    };
    env_new.touch(&new);
    assert_eq!(env_new.summary(&new).start_offset, 0, "a fresh Init");
    assert_eq!(env_new.fetch(&new, "b", 3).await, vec![acquired(0, 2, 1)]);
    env_new.ack(&new, "b", 0, 0, 1).await;
    // The old id's share-partition never writes the files again.
    assert!(env.mgr.is_fenced(&old));
    let e = env
        .mgr
        .begin_fetch(&env.target(&old), 5)
        .expect_err("superseded");
    assert_eq!(e.code(), STORAGE_ERROR);
    env.mgr.close().expect("close");
    let after = env_new.crash();
    after.touch(&new);
    assert_eq!(after.summary(&new).start_offset, 1, "the new topic's state");
    assert_eq!(after.state(&new, 1), (RecordState::Available, 1));
}

/// AlterShareGroupOffsets' reset and DeleteShareGroupOffsets' deletion, each
/// answered after its fsync, hold across a crash; a describe never creates
/// state.
#[tokio::test]
async fn resets_and_deletions_survive_a_crash() {
    let env = Env::new(TestLog::new(0, 40));
    let k = key(0);
    assert_eq!(
        env.mgr.describe_offsets(&env.target(&k)).expect("describe"),
        None
    );
    assert!(!env.files(0).exist(&env.fs), "a describe writes nothing");

    // A share-partition without state: the reset is its Init, at 12.
    let t = env.mgr.reset_offsets(&env.target(&k), 12).expect("reset");
    env.mgr
        .wait_durable(t.expect("a ticket"))
        .await
        .expect("durable");
    let env = env.crash();
    let o = env.mgr.describe_offsets(&env.target(&k)).expect("describe");
    assert_eq!(
        o.map(|o| (o.summary.start_offset, o.leader_epoch)),
        Some((12, 3))
    );

    // A loaded one with records acquired and acknowledged: the reset drops
    // them all, the member's acknowledgement is refused, and the next
    // fetch starts at the new start with a first delivery.
    assert_eq!(env.fetch(&k, "a", 10).await, vec![acquired(12, 24, 1)]);
    env.ack(&k, "a", 12, 13, 1).await;
    let t = env.mgr.reset_offsets(&env.target(&k), 5).expect("reset");
    env.mgr
        .wait_durable(t.expect("a ticket"))
        .await
        .expect("durable");
    assert_eq!(env.mgr.locks().deadline(&k), None, "no lock left");
    let b = AckBatch {
        first: 14,
        last: 14,
        types: vec![1],
    };
    let e = env
        .mgr
        .acknowledge(&env.target(&k), "a", &[b])
        .expect_err("not held after the reset");
    assert_eq!(e.code(), 121);
    let env = env.crash();
    env.touch(&k);
    let s = env.summary(&k);
    assert_eq!(
        (s.start_offset, s.next_offset, s.delivery_complete_count),
        (5, 5, 0)
    );
    assert_eq!(env.fetch(&k, "b", 10).await, vec![acquired(5, 14, 1)]);

    // Deleted while loaded (records held): gone at once and after a crash;
    // the next use starts from share.auto.offset.reset (earliest: 0).
    env.mgr.delete_offsets(&k, TOPIC).expect("delete");
    assert_eq!(
        env.mgr.describe_offsets(&env.target(&k)).expect("describe"),
        None
    );
    assert!(!env.files(0).exist(&env.fs));
    let env = env.crash();
    assert_eq!(
        env.mgr.describe_offsets(&env.target(&k)).expect("describe"),
        None
    );
    assert_eq!(env.fetch(&k, "c", 3).await, vec![acquired(0, 4, 1)]);

    // A negative reset is a deletion; delete_group removes the group's
    // directory with every share-partition in it, loaded or not.
    let t = env
        .mgr
        .reset_offsets(&env.target(&key(1)), 3)
        .expect("reset");
    env.mgr
        .wait_durable(t.expect("a ticket"))
        .await
        .expect("durable");
    let none = env.mgr.reset_offsets(&env.target(&k), -1).expect("reset");
    assert!(none.is_none(), "nothing to wait for");
    assert!(!env.files(0).exist(&env.fs));
    assert!(env.files(1).exist(&env.fs));
    env.mgr.delete_group(GROUP, &[]).expect("delete group");
    assert!(!env.fs.exists(&env.files(1).dir));
    let env = env.crash();
    assert!(!env.fs.exists(&env.files(1).dir));
    assert_eq!(
        env.mgr
            .describe_offsets(&env.target(&key(1)))
            .expect("describe"),
        None
    );
}

/// read_committed's cut of aborted offsets out of what a fetch acquired.
#[test]
fn aborted_ranges_are_cut_out_of_the_acquired_records() {
    let a = |first, last| acquired(first, last, 2);
    let got = vec![a(0, 9), a(20, 24)];
    let cut = overlaps(&got, &[(3, 4), (8, 21), (30, 40)]);
    assert_eq!(cut, vec![(3, 4), (8, 9), (20, 21)]);
    assert_eq!(without(got, &cut), vec![a(0, 2), a(5, 7), a(22, 24)]);
    assert_eq!(without(vec![a(5, 5)], &[(5, 5)]), vec![]);
    assert_eq!(overlaps(&[a(5, 6)], &[]), vec![]);
}
