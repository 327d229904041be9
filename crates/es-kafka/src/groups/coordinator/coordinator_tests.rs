//! Tests of the coordinator shell on a simulated file system: a commit is
//! durable before it is acknowledged (also across a crash at every sync
//! point), concurrent commits coalesce, a failed write fences the group,
//! deletion removes the document, and parked joins are answered.

use super::*;
use std::path::Path;

use es_storage::simfs::{SimFs, Tear};
use es_storage::StorageError;

use crate::groups::classic::{JoinRequest, SyncRequest};

fn commit_req(group: &str, topic: &str, partition: i32, offset: i64) -> CommitRequest {
    CommitRequest {
        group_id: group.to_string(),
        generation_id_or_member_epoch: -1,
        member_id: String::new(),
        group_instance_id: None,
        version: 9,
        transactional: false,
        topics: vec![CommitTopic {
            name: topic.to_string(),
            topic_id: Uuid::nil(),
            partitions: vec![CommitPartition {
                partition,
                offset,
                leader_epoch: 3,
                metadata: Some(format!("m{offset}")),
            }],
        }],
    }
}

fn exists(_: &str) -> Option<Uuid> {
    Some(Uuid::nil())
}

async fn committed(c: &Arc<Coordinator>, group: &str, topic: &str, partition: i32) -> i64 {
    let (topics, wait) = c
        .fetch_offsets(
            group,
            Some(vec![(topic.to_string(), vec![partition])]),
            None,
            &exists,
        )
        .expect("fetch");
    if let Some(w) = wait {
        w.wait().await.expect("durable");
    }
    topics[0].partitions[0].offset
}

fn try_open(fs: &SimFs) -> Result<Arc<Coordinator>, StorageError> {
    let fs: Arc<dyn Fs> = Arc::new(fs.clone());
    es_storage::fs::create_dir_durable(fs.as_ref(), Path::new("/data"))?;
    Coordinator::open(
        fs,
        Path::new("/data"),
        GroupConfig::default(),
        es_storage::clock::system(),
    )
}

fn open(fs: &SimFs) -> Arc<Coordinator> {
    try_open(fs).expect("open")
}

#[tokio::test]
async fn a_commit_is_durable_before_it_is_acknowledged() {
    let fs = SimFs::new();
    let c = open(&fs);
    let out = c.commit(commit_req("g", "t", 0, 42)).expect("accepted");
    assert_eq!(out.errors, vec![vec![Ok(())]]);
    out.wait.expect("a wait").wait().await.expect("durable");
    // Power loss right now: the offset is there.
    let img = fs.crash_image(Tear::None);
    let c2 = open(&img);
    assert_eq!(committed(&c2, "g", "t", 0).await, 42);
    let (all, _) = c2.fetch_offsets("g", None, None, &exists).expect("all");
    assert_eq!(all[0].partitions[0].metadata, "m42");
    assert_eq!(all[0].partitions[0].leader_epoch, 3);
    let listed = c2.list(&[], &[]);
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].state.as_str(), listed[0].group_type),
        ("Empty", "classic")
    );
    // Unknown groups and partitions answer -1, not an error.
    assert_eq!(committed(&c2, "g", "t", 1).await, -1);
    assert_eq!(committed(&c2, "nope", "t", 0).await, -1);
}

#[tokio::test]
async fn commits_during_a_write_are_coalesced_into_the_next() {
    let fs = SimFs::new();
    let c = open(&fs);
    let first = c.commit(commit_req("g", "t", 0, 0)).expect("first");
    first.wait.expect("wait").wait().await.expect("durable");
    assert_eq!(c.document_writes(), 1);
    // Hold the file as a writer would, then commit a burst.
    let lock = c.file_lock(&store::file_name("g"));
    let guard = lock.clone().lock_owned().await;
    let mut waits = Vec::new();
    for i in 1..=200 {
        let out = c
            .commit(commit_req("g", "t", i % 4, i64::from(i)))
            .expect("commit");
        waits.push(out.wait.expect("wait"));
    }
    drop(guard);
    for w in waits {
        w.wait().await.expect("durable");
    }
    assert_eq!(c.document_writes(), 2, "200 commits, one write");
    assert_eq!(committed(&c, "g", "t", 0).await, 200);
    assert_eq!(committed(&c, "g", "t", 3).await, 199);
}

#[tokio::test]
async fn acknowledged_commits_survive_a_crash_at_every_sync_point() {
    // Count the sync points of a run without faults, then crash at each.
    let run = |fs: SimFs| async move {
        let Ok(c) = try_open(&fs) else {
            return Vec::new();
        };
        let mut acked = Vec::new();
        for i in 0..4i64 {
            let Ok(out) = c.commit(commit_req("g", "t", 0, i)) else {
                break;
            };
            match out.wait.expect("wait").wait().await {
                Ok(()) => acked.push(i),
                Err(e) => {
                    assert_eq!(e, GroupError::NotCoordinator);
                    break;
                }
            }
        }
        acked
    };
    let clean = SimFs::new();
    assert_eq!(run(clean.clone()).await, vec![0, 1, 2, 3]);
    let total = clean.sync_count();
    assert!(total >= 8, "a file and a directory sync per write: {total}");
    for k in 1..=total {
        let fs = SimFs::new();
        fs.crash_at_sync(k);
        let acked = run(fs.clone()).await;
        let img = fs.crash_image(Tear::Prefix(k));
        let c = open(&img);
        let got = committed(&c, "g", "t", 0).await;
        match acked.last() {
            Some(last) => assert!(got >= *last, "crash at sync {k}: acked {last}, found {got}"),
            None => assert!(got >= -1),
        }
        // Recovering twice gives the same state.
        let again = open(&img);
        assert_eq!(committed(&again, "g", "t", 0).await, got);
    }
}

#[tokio::test]
async fn transactional_offsets_skip_the_member_checks() {
    let fs = SimFs::new();
    let c = open(&fs);
    let topics = commit_req("g", "t", 2, 9).topics;
    let wait = c.commit_transactional("g", topics).expect("written");
    wait.expect("wait").wait().await.expect("durable");
    assert_eq!(committed(&c, "g", "t", 2).await, 9);
    let img = fs.crash_image(Tear::None);
    assert_eq!(committed(&open(&img), "g", "t", 2).await, 9);
}

#[tokio::test]
async fn a_failed_write_fences_the_group_offsets() {
    let fs = SimFs::new();
    let c = open(&fs);
    let base = fs.sync_count();
    fs.fail_sync_at(base + 1);
    let out = c
        .commit(commit_req("g", "t", 0, 5))
        .expect("accepted in memory");
    assert_eq!(
        out.wait.expect("wait").wait().await,
        Err(GroupError::NotCoordinator)
    );
    assert_eq!(
        c.commit(commit_req("g", "t", 0, 6)).err(),
        Some(GroupError::NotCoordinator)
    );
    assert_eq!(
        c.fetch_offsets("g", None, None, &exists).err(),
        Some(GroupError::NotCoordinator)
    );
    // Other groups are unaffected.
    let ok = c.commit(commit_req("h", "t", 0, 1)).expect("other group");
    ok.wait.expect("wait").wait().await.expect("durable");
}

#[tokio::test]
async fn deleting_a_group_removes_its_document() {
    let fs = SimFs::new();
    let c = open(&fs);
    let out = c.commit(commit_req("g/1", "t", 0, 1)).expect("commit");
    out.wait.expect("wait").wait().await.expect("durable");
    let path = Path::new("/data/groups").join(store::file_name("g/1"));
    assert!(fs.read_all(&path).is_ok());
    assert_eq!(c.delete("g/1").await, Ok(()));
    assert_eq!(c.delete("g/1").await, Err(GroupError::GroupIdNotFound));
    assert!(fs.read_all(&path).is_err());
    assert!(c.list(&[], &[]).is_empty());
    let img = fs.crash_image(Tear::None);
    assert!(open(&img).list(&[], &[]).is_empty());
    // The name can be used again.
    let out = c.commit(commit_req("g/1", "t", 0, 7)).expect("commit");
    out.wait.expect("wait").wait().await.expect("durable");
    assert_eq!(committed(&c, "g/1", "t", 0).await, 7);
}

#[tokio::test]
async fn joins_are_parked_and_answered_and_the_group_type_is_persisted() {
    let fs = SimFs::new();
    let c = open(&fs);
    let req = |member: &str| JoinRequest {
        member_id: member.to_string(),
        group_instance_id: None,
        client_id: "c".into(),
        client_host: String::new(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 10_000,
        protocol_type: "consumer".into(),
        protocols: vec![classic::Protocol {
            name: "range".into(),
            metadata: bytes::Bytes::new(),
        }],
        requires_known_member_id: true,
        supports_skip_assignment: true,
    };
    let r = c.join("g", req("")).await.expect("answered");
    assert_eq!(r.error, Some(GroupError::MemberIdRequired));
    let r = c.join("g", req(&r.member_id)).await.expect("answered");
    assert_eq!((r.error, r.generation_id), (None, 1));
    // Unknown member into an unknown group.
    let e = c.join("other", req("m")).await.expect("answered");
    assert_eq!(e.error, Some(GroupError::UnknownMemberId));
    // A SyncGroup from the leader completes the generation.
    let s = c
        .sync(
            "g",
            SyncRequest {
                member_id: r.member_id.clone(),
                group_instance_id: None,
                generation_id: 1,
                protocol_type: None,
                protocol_name: None,
                assignments: vec![(r.member_id.clone(), bytes::Bytes::from_static(b"a"))],
            },
        )
        .await
        .expect("answered");
    assert_eq!(s.assignment, bytes::Bytes::from_static(b"a"));
    assert_eq!(c.heartbeat("g", &r.member_id, None, 1), Ok(()));
    // The protocol type goes to disk in the background; an OffsetFetch
    // waits for everything written so far.
    let (_, wait) = c.fetch_offsets("g", None, None, &exists).expect("fetch");
    wait.expect("a write is pending")
        .wait()
        .await
        .expect("durable");
    assert_eq!(c.document_writes(), 1);
    let img = fs.crash_image(Tear::None);
    let listed = open(&img).list(&[], &[]);
    assert_eq!(listed[0].protocol_type, "consumer");
    assert_eq!(listed[0].state, "Empty");
    // Shutdown answers parked requests.
    let m2 = c.join("g", req("")).await.expect("handshake").member_id;
    let parked = c.join("g", req(&m2));
    c.shutdown();
    assert_eq!(
        parked.await.expect("answered").error,
        Some(GroupError::NotCoordinator)
    );
}
