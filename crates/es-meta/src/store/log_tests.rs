//! Tests of the metadata log on the simulated file system: reopen, torn
//! tails, corruption, group commit durability, truncate, purge, the vote.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use es_storage::fs::Fs;
use es_storage::simfs::{SimFs, Tear};
use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
use openraft::{CommittedLeaderId, EntryPayload, LogId, RaftLogReader, Vote};

use super::frame::Entry;
use super::log::segment_name;
use super::*;
use crate::{MetaRequest, NoFiles};

fn dir() -> PathBuf {
    PathBuf::from("/data/meta")
}

fn lid(term: u64, index: u64) -> LogId<u64> {
    LogId::new(CommittedLeaderId::new(term, 0), index)
}

fn ent(index: u64) -> Entry {
    Entry {
        log_id: lid(1, index),
        payload: EntryPayload::Normal(MetaRequest::InitCluster {
            cluster_id: format!("cluster-{index}"),
        }),
    }
}

fn open_sim(fs: &SimFs) -> std::io::Result<(LogStore, StateMachine)> {
    open(Arc::new(fs.clone()), &dir(), Arc::new(NoFiles))
}

async fn all(store: &mut LogStore) -> Vec<u64> {
    store
        .try_get_log_entries(0..)
        .await
        .expect("read entries")
        .iter()
        .map(|e| e.log_id.index)
        .collect()
}

async fn append(store: &mut LogStore, from: u64, to: u64) {
    store
        .blocking_append((from..to).map(ent))
        .await
        .expect("append");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fresh_then_reopen_returns_the_same_entries() {
    let fs = SimFs::new();
    let (mut store, _sm) = open_sim(&fs).expect("open");
    assert!(store.is_fresh());
    append(&mut store, 0, 3).await;
    append(&mut store, 3, 5).await;
    let before = store.try_get_log_entries(0..).await.expect("read");
    drop(store);
    let (mut store, _sm) = open_sim(&fs.crash_image(Tear::None)).expect("reopen");
    assert!(!store.is_fresh());
    let after = store.try_get_log_entries(0..).await.expect("read");
    assert_eq!(before, after);
    assert_eq!(
        store.get_log_state().await.expect("state").last_log_id,
        Some(lid(1, 4))
    );
    // Ranges, including empty and inverted ones, never panic.
    assert_eq!(store.try_get_log_entries(2..4).await.expect("r").len(), 2);
    let (hi, lo) = (4u64, 2u64);
    assert!(store
        .try_get_log_entries(hi..lo)
        .await
        .expect("r")
        .is_empty());
    assert!(store.try_get_log_entries(9..).await.expect("r").is_empty());
    // Appends go on from the recovered end.
    append(&mut store, 5, 6).await;
    assert_eq!(all(&mut store).await, vec![0, 1, 2, 3, 4, 5]);
}

/// A file system holding one segment with exactly `bytes`.
fn with_segment(bytes: &[u8]) -> SimFs {
    let fs = SimFs::new();
    es_storage::fs::create_dir_durable(&fs, &dir()).expect("dir");
    let f = fs.create_new(&dir().join(segment_name(0))).expect("create");
    f.write_all_at(bytes, 0).expect("write");
    f.sync_data().expect("sync");
    fs.sync_dir(&dir()).expect("sync dir");
    fs
}

async fn three_frames() -> (Vec<u8>, u64) {
    let fs = SimFs::new();
    let (mut store, _sm) = open_sim(&fs).expect("open");
    append(&mut store, 0, 2).await;
    let two = fs
        .read_all(&dir().join(segment_name(0)))
        .expect("read")
        .len() as u64;
    append(&mut store, 2, 3).await;
    (
        fs.read_all(&dir().join(segment_name(0))).expect("read"),
        two,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_torn_last_frame_is_cut_at_every_length() {
    let (bytes, two) = three_frames().await;
    for cut in two as usize..bytes.len() {
        let fs = with_segment(&bytes[..cut]);
        let (mut store, _sm) = open_sim(&fs).unwrap_or_else(|e| panic!("cut {cut}: {e}"));
        assert_eq!(all(&mut store).await, vec![0, 1], "cut at {cut}");
        let len = fs
            .read_all(&dir().join(segment_name(0)))
            .expect("read")
            .len();
        assert_eq!(len as u64, two, "file cut back to the good frames");
        append(&mut store, 2, 3).await;
        assert_eq!(all(&mut store).await, vec![0, 1, 2]);
    }
    // A whole frame of garbage or zeros after the good ones is a torn tail too.
    for fill in [0u8, 0xa5] {
        let mut b = bytes[..two as usize].to_vec();
        b.extend(std::iter::repeat_n(fill, 100));
        let (mut store, _sm) = open_sim(&with_segment(&b)).expect("open");
        assert_eq!(all(&mut store).await, vec![0, 1]);
    }
    // The intact file opens whole.
    let (mut store, _sm) = open_sim(&with_segment(&bytes)).expect("open");
    assert_eq!(all(&mut store).await, vec![0, 1, 2]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_torn_tail_from_a_crash_recovers() {
    for seed in 1..40u64 {
        let fs = SimFs::new();
        let (mut store, _sm) = open_sim(&fs).expect("open");
        append(&mut store, 0, 2).await;
        // Written but not synced: the crash keeps a random prefix.
        fs.hold_syncs();
        let mut s2 = store;
        let task = tokio::spawn(async move {
            let _ = s2.blocking_append((2..6).map(ent)).await;
            s2
        });
        let f2 = fs.clone();
        let held =
            tokio::task::spawn_blocking(move || f2.await_held_syncs(1, Duration::from_secs(10)))
                .await
                .expect("join");
        assert!(held);
        let img = fs.crash_image(Tear::Prefix(seed));
        fs.release_syncs();
        drop(task.await.expect("join"));
        let (mut store, _sm) = open_sim(&img).expect("open after crash");
        let got = all(&mut store).await;
        assert!(got.len() >= 2 && got.len() <= 6, "{got:?}");
        assert_eq!(got, (0..got.len() as u64).collect::<Vec<_>>());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corruption_before_the_tail_is_refused() {
    let (bytes, _) = three_frames().await;
    // A payload byte of the first frame, its length field, its index.
    for pos in [30usize, 2, 5] {
        let fs = with_segment(&bytes);
        fs.corrupt(&dir().join(segment_name(0)), pos, 0x40)
            .expect("corrupt");
        let err = open_sim(&fs).expect_err("corruption must be refused");
        assert_eq!(
            err.kind(),
            std::io::ErrorKind::InvalidData,
            "pos {pos}: {err}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gap_between_segments_is_refused() {
    let (bytes, _) = three_frames().await;
    let fs = with_segment(&bytes);
    let f = fs.create_new(&dir().join(segment_name(7))).expect("create");
    let (seven, _) = {
        let fs2 = SimFs::new();
        let (mut s, _sm) = open_sim(&fs2).expect("open");
        s.blocking_append([ent(7)]).await.expect("append");
        (
            fs2.read_all(&dir().join(segment_name(7))).expect("read"),
            (),
        )
    };
    f.write_all_at(&seven, 0).expect("write");
    f.sync_data().expect("sync");
    fs.sync_dir(&dir()).expect("sync dir");
    let err = open_sim(&fs).expect_err("gap must be refused");
    assert!(err.to_string().contains("starts at index 7"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callback_is_never_completed_before_the_sync() {
    let fs = SimFs::new();
    let (mut store, _sm) = open_sim(&fs).expect("open");
    append(&mut store, 0, 1).await;
    fs.hold_syncs();
    let task = tokio::spawn(async move {
        store
            .blocking_append([ent(1), ent(2)])
            .await
            .expect("append");
        store
    });
    let f2 = fs.clone();
    let held = tokio::task::spawn_blocking(move || f2.await_held_syncs(1, Duration::from_secs(10)))
        .await
        .expect("join");
    assert!(held);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!task.is_finished(), "completed before its sync");
    let (mut before, _sm) = open_sim(&fs.crash_image(Tear::None)).expect("open");
    assert_eq!(all(&mut before).await, vec![0]);
    fs.release_syncs();
    let mut store = task.await.expect("join");
    // Completed: it survives a crash.
    let (mut after, _sm) = open_sim(&fs.crash_image(Tear::None)).expect("open");
    assert_eq!(all(&mut after).await, vec![0, 1, 2]);
    append(&mut store, 3, 4).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_sync_fails_the_append_and_every_later_one() {
    let fs = SimFs::new();
    let (mut store, _sm) = open_sim(&fs).expect("open");
    append(&mut store, 0, 1).await;
    fs.fail_sync_at(fs.sync_count() + 1);
    assert!(store.blocking_append([ent(1)]).await.is_err());
    assert!(store.blocking_append([ent(2)]).await.is_err());
    // A restart recovers what was durable.
    let (mut again, _sm) = open_sim(&fs.crash_image(Tear::None)).expect("open");
    assert_eq!(all(&mut again).await, vec![0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncate_is_durable() {
    let fs = SimFs::new();
    let (mut store, _sm) = open_sim(&fs).expect("open");
    append(&mut store, 0, 6).await;
    store.truncate(lid(1, 3)).await.expect("truncate");
    assert_eq!(all(&mut store).await, vec![0, 1, 2]);
    let (mut again, _sm) = open_sim(&fs.crash_image(Tear::None)).expect("open");
    assert_eq!(all(&mut again).await, vec![0, 1, 2]);
    // Truncating everything removes the segment; the log starts again.
    store.truncate(lid(1, 0)).await.expect("truncate");
    assert!(!fs.exists(&dir().join(segment_name(0))));
    append(&mut store, 0, 2).await;
    assert_eq!(all(&mut store).await, vec![0, 1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_survives_a_restart_and_deletes_old_segments() {
    let fs = SimFs::new();
    let (mut store, _sm) = open_sim(&fs).expect("open");
    append(&mut store, 0, 6).await;
    store.purge(lid(1, 3)).await.expect("purge");
    assert_eq!(all(&mut store).await, vec![4, 5]);
    // The purge rolled the log: the next entry starts a new segment.
    append(&mut store, 6, 8).await;
    assert!(fs.exists(&dir().join(segment_name(6))));
    store.purge(lid(1, 5)).await.expect("purge");
    assert!(
        !fs.exists(&dir().join(segment_name(0))),
        "old segment deleted"
    );
    let fs = fs.crash_image(Tear::None);
    let (mut again, _sm) = open_sim(&fs).expect("open");
    let st = again.get_log_state().await.expect("state");
    assert_eq!(st.last_purged_log_id, Some(lid(1, 5)));
    assert_eq!(st.last_log_id, Some(lid(1, 7)));
    assert_eq!(all(&mut again).await, vec![6, 7]);
    assert!(!again.is_fresh());
    // Purging past the end leaves an empty log that goes on after the purge point.
    again.purge(lid(2, 20)).await.expect("purge");
    let st = again.get_log_state().await.expect("state");
    assert_eq!(st.last_log_id, Some(lid(2, 20)));
    again.blocking_append([ent(21)]).await.expect("append");
    let (mut third, _sm) = open_sim(&fs.crash_image(Tear::None)).expect("open");
    assert_eq!(all(&mut third).await, vec![21]);
    assert_eq!(
        third
            .get_log_state()
            .await
            .expect("state")
            .last_purged_log_id,
        Some(lid(2, 20))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_vote_survives_a_crash_only_once_saved() {
    let fs = SimFs::new();
    let (mut store, _sm) = open_sim(&fs).expect("open");
    let v1 = Vote::new(3, 1);
    // The machine dies at the vote's first fsync: save_vote fails, no vote.
    fs.crash_at_sync(fs.sync_count() + 1);
    assert!(store.save_vote(&v1).await.is_err());
    let img = fs.crash_image(Tear::None);
    let (mut s, _sm) = open_sim(&img).expect("open");
    assert_eq!(s.read_vote().await.expect("read"), None);
    assert!(s.is_fresh());
    // Saved: it survives.
    s.save_vote(&v1).await.expect("save");
    let img = img.crash_image(Tear::None);
    let (mut s2, _sm) = open_sim(&img).expect("open");
    assert_eq!(s2.read_vote().await.expect("read"), Some(v1));
    assert!(!s2.is_fresh());
    // So does the committed id, but one past this node's own log (the
    // entries it names were lost) is not reported.
    s2.save_committed(Some(lid(1, 4))).await.expect("save");
    let (mut s3, _sm) = open_sim(&img.crash_image(Tear::None)).expect("open");
    assert_eq!(s3.read_committed().await.expect("read"), None);
}

#[test]
fn segment_names_have_twenty_digits() {
    assert_eq!(segment_name(1), "00000000000000000001.raftlog");
    let _ = Path::new(&segment_name(u64::MAX));
}
