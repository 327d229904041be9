//! Tests of the metadata state machine: apply and the watch, the
//! materializer, snapshot build / install / restart round trips.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use es_storage::simfs::{SimFs, Tear};
use openraft::storage::RaftStateMachine;
use openraft::{
    CommittedLeaderId, EntryPayload, LogId, Membership, RaftSnapshotBuilder, StoredMembership,
};
use parking_lot::Mutex;

use super::frame::Entry;
use super::*;
use crate::{MetaEvent, MetaImage, MetaRequest, MetaResponse};

fn dir() -> PathBuf {
    PathBuf::from("/data/meta")
}

fn lid(index: u64) -> LogId<u64> {
    LogId::new(CommittedLeaderId::new(1, 0), index)
}

/// Records every call; fails when told to.
#[derive(Debug, Default)]
struct Recorder {
    calls: Mutex<Vec<Vec<MetaEvent>>>,
    fail: Mutex<bool>,
}

impl Materializer for Recorder {
    fn materialize(&self, _: &MetaImage, events: &[MetaEvent]) -> std::io::Result<()> {
        if *self.fail.lock() {
            return Err(std::io::Error::other("disk says no"));
        }
        self.calls.lock().push(events.to_vec());
        Ok(())
    }
}

fn open_rec(fs: &SimFs) -> (StateMachine, Arc<Recorder>) {
    let rec = Arc::new(Recorder::default());
    let (_log, sm) = open(Arc::new(fs.clone()), &dir(), rec.clone()).expect("open");
    (sm, rec)
}

fn entries() -> Vec<Entry> {
    let members: BTreeSet<u64> = [1, 2, 3].into_iter().collect();
    vec![
        Entry {
            log_id: lid(0),
            payload: EntryPayload::Membership(Membership::new(vec![members], None)),
        },
        Entry {
            log_id: lid(1),
            payload: EntryPayload::Blank,
        },
        Entry {
            log_id: lid(2),
            payload: EntryPayload::Normal(MetaRequest::InitCluster {
                cluster_id: "abc".into(),
            }),
        },
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_answers_materializes_and_publishes() {
    let fs = SimFs::new();
    let (mut sm, rec) = open_rec(&fs);
    let mut watch = sm.watch();
    let resp = sm.apply(entries()).await.expect("apply");
    assert_eq!(resp.len(), 3);
    assert_eq!(resp[0], MetaResponse::None);
    assert_eq!(resp[1], MetaResponse::None);
    assert!(watch.has_changed().expect("watch"));
    let applied = watch.borrow_and_update().clone();
    assert_eq!(applied.last_applied, Some(lid(2)));
    assert_eq!(applied.image.cluster_id.as_deref(), Some("abc"));
    assert_eq!(rec.calls.lock().clone(), vec![vec![MetaEvent::ClusterId]]);
    let (last, membership) = sm.applied_state().await.expect("state");
    assert_eq!(last, Some(lid(2)));
    assert_eq!(membership.log_id(), &Some(lid(0)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_materializer_error_is_a_storage_error() {
    let fs = SimFs::new();
    let (mut sm, rec) = open_rec(&fs);
    *rec.fail.lock() = true;
    assert!(sm.apply(entries()).await.is_err());
    // Nothing was taken as applied.
    assert_eq!(sm.applied_state().await.expect("state").0, None);
    assert_eq!(sm.watch().borrow().last_applied, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_build_install_and_restart_round_trip() {
    let fs = SimFs::new();
    let (mut leader, _rec) = open_rec(&fs);
    assert!(leader.get_current_snapshot().await.expect("get").is_none());
    leader.apply(entries()).await.expect("apply");
    let snap = leader
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .expect("build");
    assert_eq!(snap.meta.last_log_id, Some(lid(2)));
    assert_eq!(snap.meta.last_membership.log_id(), &Some(lid(0)));

    // The built snapshot is durable: a restart starts from it.
    let img = fs.crash_image(Tear::None);
    let (mut restarted, rec) = open_rec(&img);
    let cur = restarted
        .get_current_snapshot()
        .await
        .expect("get")
        .expect("persisted snapshot");
    assert_eq!(cur.meta, snap.meta);
    assert_eq!(
        restarted.applied_state().await.expect("state"),
        (Some(lid(2)), snap.meta.last_membership.clone())
    );
    assert_eq!(
        restarted.watch().borrow().image.cluster_id.as_deref(),
        Some("abc")
    );
    // The image is materialized again at open (idempotent).
    assert_eq!(rec.calls.lock().clone(), vec![vec![MetaEvent::ClusterId]]);

    // Installed on another node (from the bytes a leader sends).
    let fs2 = SimFs::new();
    let (mut follower, rec2) = open_rec(&fs2);
    let mut watch = follower.watch();
    let mut data = follower.begin_receiving_snapshot().await.expect("begin");
    *data = *cur.snapshot;
    follower
        .install_snapshot(&cur.meta, data)
        .await
        .expect("install");
    assert!(watch.has_changed().expect("watch"));
    assert_eq!(watch.borrow_and_update().last_applied, Some(lid(2)));
    assert_eq!(rec2.calls.lock().clone(), vec![vec![MetaEvent::ClusterId]]);
    assert_eq!(
        follower.applied_state().await.expect("state"),
        (Some(lid(2)), snap.meta.last_membership.clone())
    );
    let (mut f2, _rec) = open_rec(&fs2.crash_image(Tear::None));
    let got = f2
        .get_current_snapshot()
        .await
        .expect("get")
        .expect("persisted");
    assert_eq!(got.meta, snap.meta);
    assert_eq!(f2.watch().borrow().image.cluster_id.as_deref(), Some("abc"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_garbled_snapshot_is_refused() {
    let fs = SimFs::new();
    let (mut sm, _rec) = open_rec(&fs);
    let meta = openraft::SnapshotMeta {
        last_log_id: Some(lid(5)),
        last_membership: StoredMembership::default(),
        snapshot_id: "x".into(),
    };
    let data = Box::new(std::io::Cursor::new(b"{not json".to_vec()));
    assert!(sm.install_snapshot(&meta, data).await.is_err());
    assert_eq!(sm.applied_state().await.expect("state").0, None);
}

#[test]
fn whole_image_events_describe_every_part() {
    let mut old = MetaImage::default();
    old.topics.insert(
        "gone".into(),
        crate::image::TopicInfo {
            id: "id-gone".into(),
            name: "gone".into(),
            partitions: vec![],
            configs: Default::default(),
        },
    );
    let mut new = MetaImage {
        cluster_id: Some("c".into()),
        ..MetaImage::default()
    };
    new.broker_configs.insert(String::new(), Default::default());
    let ev = super::snapshot::whole_image_events(&old, &new);
    assert!(ev.contains(&MetaEvent::ClusterId));
    assert!(ev.contains(&MetaEvent::TopicDeleted {
        name: "gone".into(),
        id: "id-gone".into()
    }));
    assert!(ev.contains(&MetaEvent::BrokerConfigs(String::new())));
}
