//! The share-group offsets admin over the wire (DescribeShareGroupOffsets
//! v0-1, AlterShareGroupOffsets, DeleteShareGroupOffsets, DeleteGroups of a
//! share group) against a broker on a temporary data directory, with the
//! records of `super` (Produce, ShareGroupHeartbeat, ShareFetch,
//! ShareAcknowledge) moving the share-partition in between; and the
//! group's `share.*` configs as the share handlers read them
//! (`share.auto.offset.reset` by_duration among them).

use kafka_protocol::messages::alter_share_group_offsets_request::{
    AlterShareGroupOffsetsRequestPartition, AlterShareGroupOffsetsRequestTopic,
};
use kafka_protocol::messages::delete_share_group_offsets_request::DeleteShareGroupOffsetsRequestTopic;
use kafka_protocol::messages::describe_share_group_offsets_request::{
    DescribeShareGroupOffsetsRequestGroup, DescribeShareGroupOffsetsRequestTopic,
};

use super::*;
use crate::codec::share_wire::DescribeShareGroupOffsetsResponseV1;

/// A DescribeShareGroupOffsets v1 response, read by the hand codec.
struct DescribeV1(DescribeShareGroupOffsetsResponseV1);

impl Decodable for DescribeV1 {
    fn decode<B: ByteBuf>(buf: &mut B, _v: i16) -> anyhow::Result<Self> {
        let mut b = buf.get_bytes(buf.remaining());
        let r = DescribeShareGroupOffsetsResponseV1::decode(&mut b, 1)?;
        anyhow::ensure!(b.is_empty(), "trailing bytes");
        Ok(DescribeV1(r))
    }
}

/// (topic, partition, start offset, lag) of one group's answer, and its
/// error code.
type Offsets = (i16, Vec<(String, i32, i64, i64)>);

/// DescribeShareGroupOffsets v1 of GROUP: every recorded topic (`None`) or
/// partition 0 of `t`.
async fn describe(b: &Arc<Broker>, all: bool) -> Offsets {
    let mut g = DescribeShareGroupOffsetsRequestGroup::default();
    g.group_id = GroupId(s(GROUP));
    g.topics = (!all).then(|| {
        let mut t = DescribeShareGroupOffsetsRequestTopic::default();
        t.topic_name = TopicName(s("t"));
        t.partitions = vec![0];
        vec![t]
    });
    let mut req = DescribeShareGroupOffsetsRequest::default();
    req.groups = vec![g];
    let r: DescribeV1 = call(b, ApiKey::DescribeShareGroupOffsets, 1, &req).await;
    let mut lags = r.0.lags.iter();
    let g = &r.0.response.groups[0];
    let mut out = Vec::new();
    for t in &g.topics {
        for p in &t.partitions {
            assert_eq!(p.error_code, NONE, "{:?}", p.error_message);
            let lag = *lags.next().expect("one lag per partition");
            out.push((
                t.topic_name.0.to_string(),
                p.partition_index,
                p.start_offset,
                lag,
            ));
        }
    }
    (g.error_code, out)
}

/// AlterShareGroupOffsets of partition 0 of `t` to `start`: the top-level
/// code and the partition's.
async fn alter(b: &Arc<Broker>, start: i64) -> (i16, Option<i16>) {
    let mut p = AlterShareGroupOffsetsRequestPartition::default();
    p.partition_index = 0;
    p.start_offset = start;
    let mut t = AlterShareGroupOffsetsRequestTopic::default();
    t.topic_name = TopicName(s("t"));
    t.partitions = vec![p];
    let mut req = AlterShareGroupOffsetsRequest::default();
    req.group_id = GroupId(s(GROUP));
    req.topics = vec![t];
    let r: AlterShareGroupOffsetsResponse = call(b, ApiKey::AlterShareGroupOffsets, 0, &req).await;
    let part = r
        .responses
        .first()
        .and_then(|t| t.partitions.first())
        .map(|p| p.error_code);
    (r.error_code, part)
}

/// DeleteShareGroupOffsets of `t`: the top-level code and the topic's.
async fn delete(b: &Arc<Broker>) -> (i16, Option<(i16, Option<String>)>) {
    let mut t = DeleteShareGroupOffsetsRequestTopic::default();
    t.topic_name = TopicName(s("t"));
    let mut req = DeleteShareGroupOffsetsRequest::default();
    req.group_id = GroupId(s(GROUP));
    req.topics = vec![t];
    let r: DeleteShareGroupOffsetsResponse =
        call(b, ApiKey::DeleteShareGroupOffsets, 0, &req).await;
    let topic = r.responses.first().map(|t| {
        (
            t.error_code,
            t.error_message.as_ref().map(|m| m.to_string()),
        )
    });
    (r.error_code, topic)
}

async fn leave(b: &Arc<Broker>, member: &str) {
    let mut r = ShareGroupHeartbeatRequest::default();
    r.group_id = GroupId(s(GROUP));
    r.member_id = s(member);
    r.member_epoch = -1;
    let a: ShareGroupHeartbeatResponse = call(b, ApiKey::ShareGroupHeartbeat, 1, &r).await;
    assert_eq!(a.error_code, NONE, "{:?}", a.error_message);
}

async fn restart(b: Arc<Broker>, dir: &std::path::Path) -> Arc<Broker> {
    b.begin_shutdown();
    let c = b.clone();
    tokio::task::spawn_blocking(move || c.close())
        .await
        .expect("task")
        .expect("close");
    drop(b);
    broker_in(dir).await
}

fn group_dir(dir: &std::path::Path) -> std::path::PathBuf {
    crate::shares::store::ShareFiles::new(&dir.join("data"), GROUP, "t", 0).dir
}

#[tokio::test]
async fn alter_describe_and_delete_share_group_offsets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (b, tid) = setup(dir.path(), 10).await;
    // Nothing recorded: no topics; the named partition has no state.
    assert_eq!(describe(&b, true).await, (NONE, vec![]));
    assert_eq!(
        describe(&b, false).await,
        (NONE, vec![("t".into(), 0, -1, -1)])
    );
    assert!(
        !group_dir(dir.path()).exists(),
        "a describe creates no state"
    );

    // Alter creates the group and its state at 4: lag 10 - 4.
    assert_eq!(alter(&b, 4).await, (NONE, Some(NONE)));
    assert_eq!(
        describe(&b, true).await,
        (NONE, vec![("t".into(), 0, 4, 6)])
    );
    let d: ShareGroupDescribeResponse = {
        let mut r = ShareGroupDescribeRequest::default();
        r.group_ids = vec![GroupId(s(GROUP))];
        call(&b, ApiKey::ShareGroupDescribe, 1, &r).await
    };
    let g = &d.groups[0];
    assert_eq!(
        (g.error_code, g.group_epoch, g.assignment_epoch),
        (NONE, 1, 1)
    );
    assert_eq!(g.group_state.as_str(), "Empty");

    // A member gets 4-9 and accepts 4-6: the start moves to 7, lag 3.
    join(&b, M1).await;
    let r = Fetch::new(M1, 0, 10).send(&b, tid).await;
    assert_eq!(acquired(&r), vec![(4, 9, 1)]);
    let a = acknowledge(&b, ack_request(M1, 1, tid, 0, &[(4, 6, &[1])]), false).await;
    assert_eq!(ack_code(&a), NONE);
    assert_eq!(
        describe(&b, false).await,
        (NONE, vec![("t".into(), 0, 7, 3)])
    );
    // With a member, Alter and Delete refuse the whole request.
    let non_empty = code(ResponseError::NonEmptyGroup);
    assert_eq!(alter(&b, 0).await, (non_empty, None));
    assert_eq!(delete(&b).await, (non_empty, None));

    // The member leaves (its session's records go back); Alter to 2
    // starts over: a new member gets 2-9, each delivered once more.
    leave(&b, M1).await;
    assert_eq!(alter(&b, 2).await, (NONE, Some(NONE)));
    assert_eq!(
        describe(&b, false).await,
        (NONE, vec![("t".into(), 0, 2, 8)])
    );
    let b = restart(b, dir.path()).await;
    assert_eq!(
        describe(&b, false).await,
        (NONE, vec![("t".into(), 0, 2, 8)])
    );
    join(&b, M2).await;
    let r = Fetch::new(M2, 0, 10).send(&b, tid).await;
    assert_eq!(acquired(&r), vec![(2, 9, 1)]);
    leave(&b, M2).await;

    // Delete removes the state: describe shows none, the files are gone,
    // a second delete finds nothing, and a restart keeps it so.
    assert_eq!(delete(&b).await, (NONE, Some((NONE, None))));
    assert_eq!(describe(&b, true).await, (NONE, vec![]));
    assert_eq!(
        describe(&b, false).await,
        (NONE, vec![("t".into(), 0, -1, -1)])
    );
    let left: Vec<_> = std::fs::read_dir(group_dir(dir.path()))
        .expect("group dir")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "{left:?}");
    let again = delete(&b).await;
    let no_state = code(ResponseError::UnknownTopicOrPartition);
    assert_eq!(again.1.map(|t| t.0), Some(no_state));
    let b = restart(b, dir.path()).await;
    assert_eq!(
        describe(&b, false).await,
        (NONE, vec![("t".into(), 0, -1, -1)])
    );
    // The next member starts from share.auto.offset.reset (earliest).
    join(&b, M1).await;
    let r = Fetch::new(M1, 0, 10).send(&b, tid).await;
    assert_eq!(acquired(&r), vec![(0, 9, 1)]);
}

#[tokio::test]
async fn a_negative_start_uninitialises_and_delete_groups_removes_the_state() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (b, _tid) = setup(dir.path(), 5).await;
    assert_eq!(alter(&b, 3).await, (NONE, Some(NONE)));
    // -1 (Kafka's "not initialised"): recorded, without state.
    assert_eq!(alter(&b, -1).await, (NONE, Some(NONE)));
    assert_eq!(
        describe(&b, true).await,
        (NONE, vec![("t".into(), 0, -1, -1)])
    );
    assert_eq!(alter(&b, 1).await, (NONE, Some(NONE)));
    assert!(group_dir(dir.path()).exists());

    let mut req = DeleteGroupsRequest::default();
    req.groups_names = vec![GroupId(s(GROUP))];
    let r: DeleteGroupsResponse = call(&b, ApiKey::DeleteGroups, 2, &req).await;
    assert_eq!(r.results[0].error_code, NONE);
    assert!(
        !group_dir(dir.path()).exists(),
        "the group's share state is removed"
    );
    assert_eq!(describe(&b, true).await, (NONE, vec![]));
    let not_found = code(ResponseError::GroupIdNotFound);
    assert_eq!(delete(&b).await, (not_found, None));
    // A new group of the same name starts without state.
    let b = restart(b, dir.path()).await;
    assert_eq!(
        describe(&b, false).await,
        (NONE, vec![("t".into(), 0, -1, -1)])
    );
}

/// A group's `share.*` configs as ShareFetch reads them: each auto offset
/// reset, and the broker's defaults where the group sets none.
#[test]
fn share_configs_are_read_with_the_broker_defaults() {
    use crate::handlers::share::share_config;
    use crate::shares::target::AutoOffsetReset;
    let broker = crate::config::ShareBrokerConfig::default();
    let of = |pairs: &[(&str, &str)]| {
        let m: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        share_config(&m, &broker)
    };
    let d = of(&[]);
    assert_eq!(d.auto_offset_reset, AutoOffsetReset::Latest);
    assert_eq!(d.record_lock_duration_ms, 30_000);
    assert_eq!(d.limits.delivery_count_limit, 5);
    assert_eq!(d.limits.max_record_locks, 2_000);
    let reset = |v: &str| of(&[("share.auto.offset.reset", v)]).auto_offset_reset;
    assert_eq!(reset("earliest"), AutoOffsetReset::Earliest);
    assert_eq!(reset("latest"), AutoOffsetReset::Latest);
    assert_eq!(
        reset("by_duration:PT1H"),
        AutoOffsetReset::ByDuration { ms: 3_600_000 }
    );
    assert_eq!(
        reset("by_duration:P1DT2H3M4.5S"),
        AutoOffsetReset::ByDuration { ms: 93_784_500 }
    );
    let c = of(&[
        ("share.record.lock.duration.ms", "15000"),
        ("share.delivery.count.limit", "3"),
    ]);
    assert_eq!(
        (c.record_lock_duration_ms, c.limits.delivery_count_limit),
        (15_000, 3)
    );
}

/// `share.auto.offset.reset=by_duration:<d>` starts a new share-partition at
/// the first record no older than now − d (the records here are from 2023):
/// a duration reaching back past them starts at 0, a short one at the end.
#[tokio::test]
async fn by_duration_starts_at_the_first_record_young_enough() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (b, tid) = setup(dir.path(), 4).await;
    set_configs(&b, &[("share.auto.offset.reset", "by_duration:P36500D")]).await;
    join(&b, M1).await;
    let r = Fetch::new(M1, 0, 10).send(&b, tid).await;
    assert_eq!(acquired(&r), vec![(0, 3, 1)]);

    let dir = tempfile::tempdir().expect("tempdir");
    let (b, tid) = setup(dir.path(), 4).await;
    set_configs(&b, &[("share.auto.offset.reset", "by_duration:PT1H")]).await;
    join(&b, M1).await;
    let r = Fetch::new(M1, 0, 10).send(&b, tid).await;
    assert_eq!(acquired(&r), vec![]);
    produce(&b, 2).await;
    let r = Fetch::new(M1, 1, 10).send(&b, tid).await;
    assert_eq!(acquired(&r), vec![(4, 5, 1)], "only records past the start");
}

/// Deleting a topic removes its share-partitions' state in every group: the
/// files go, DescribeShareGroupOffsets no longer lists the topic, and a
/// topic created again under the name starts without state.
#[tokio::test]
async fn topic_deletion_removes_the_share_state() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (b, tid) = setup(dir.path(), 6).await;
    join(&b, M1).await;
    let r = Fetch::new(M1, 0, 3).send(&b, tid).await;
    assert!(!acquired(&r).is_empty());
    leave(&b, M1).await;
    assert_eq!(alter(&b, 2).await, (NONE, Some(NONE)));
    let files = crate::shares::store::ShareFiles::new(&dir.path().join("data"), GROUP, "t", 0);
    assert!(files.journal.exists() || files.snapshot.exists());

    b.delete_topic("t").await.expect("delete t");
    assert!(
        !files.journal.exists() && !files.snapshot.exists(),
        "share state removed"
    );
    assert_eq!(describe(&b, true).await, (NONE, vec![]));

    b.create_topic("t", 1, BTreeMap::new(), false)
        .await
        .expect("create t again");
    let tid2 = b.topic("t").expect("t").id;
    assert_ne!(tid, tid2);
    assert_eq!(describe(&b, true).await, (NONE, vec![]));
    assert_eq!(
        describe(&b, false).await,
        (NONE, vec![("t".into(), 0, -1, -1)])
    );
    produce(&b, 3).await;
    join(&b, M2).await;
    let r = Fetch::new(M2, 0, 10).send(&b, tid2).await;
    assert_eq!(acquired(&r), vec![(0, 2, 1)], "earliest of the new topic");
}

/// DeleteRecords moves the share-partition's start: the records removed
/// from the log are never delivered, and DescribeShareGroupOffsets shows the
/// new start with its lag.
#[tokio::test]
async fn delete_records_moves_the_start() {
    use kafka_protocol::messages::delete_records_request::{
        DeleteRecordsPartition, DeleteRecordsTopic,
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let (b, tid) = setup(dir.path(), 10).await;
    assert_eq!(alter(&b, 0).await, (NONE, Some(NONE)));
    assert_eq!(
        describe(&b, false).await,
        (NONE, vec![("t".into(), 0, 0, 10)])
    );

    let mut p = DeleteRecordsPartition::default();
    p.partition_index = 0;
    p.offset = 6;
    let mut t = DeleteRecordsTopic::default();
    t.name = TopicName(s("t"));
    t.partitions = vec![p];
    let mut req = DeleteRecordsRequest::default();
    req.topics = vec![t];
    req.timeout_ms = 10_000;
    let r: DeleteRecordsResponse = call(&b, ApiKey::DeleteRecords, 2, &req).await;
    assert_eq!(r.topics[0].partitions[0].error_code, NONE);
    assert_eq!(r.topics[0].partitions[0].low_watermark, 6);

    assert_eq!(
        describe(&b, false).await,
        (NONE, vec![("t".into(), 0, 6, 4)])
    );
    join(&b, M1).await;
    let r = Fetch::new(M1, 0, 10).send(&b, tid).await;
    assert_eq!(acquired(&r), vec![(6, 9, 1)]);
    assert_eq!(records(&r).first().map(|x| x.0), Some(6));
}

/// AlterShareGroupOffsets naming no known topic still refuses an existing
/// group of another type (GROUP_ID_NOT_FOUND) or with members
/// (NON_EMPTY_GROUP), and creates no group, as Kafka 4.4 answers.
#[tokio::test]
async fn an_alter_without_known_topics_checks_but_creates_no_group() {
    use kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let (b, _tid) = setup(dir.path(), 2).await;
    let alter_none = |group: &'static str| {
        let b = b.clone();
        async move {
            let mut req = AlterShareGroupOffsetsRequest::default();
            req.group_id = GroupId(s(group));
            let r: AlterShareGroupOffsetsResponse =
                call(&b, ApiKey::AlterShareGroupOffsets, 0, &req).await;
            r.error_code
        }
    };
    // A missing group: answered, not created.
    assert_eq!(alter_none("nobody").await, NONE);
    assert!(b.groups().share_partitions("nobody").is_none());
    // A classic group (committed offsets).
    let mut p = OffsetCommitRequestPartition::default();
    p.partition_index = 0;
    p.committed_offset = 1;
    let mut t = OffsetCommitRequestTopic::default();
    t.name = TopicName(s("t"));
    t.partitions = vec![p];
    let mut req = OffsetCommitRequest::default();
    req.group_id = GroupId(s("classic"));
    req.generation_id_or_member_epoch = -1;
    req.topics = vec![t];
    let _: OffsetCommitResponse = call(&b, ApiKey::OffsetCommit, 8, &req).await;
    assert_eq!(
        alter_none("classic").await,
        code(ResponseError::GroupIdNotFound)
    );
    // A share group with a member.
    join(&b, M1).await;
    assert_eq!(alter_none(GROUP).await, code(ResponseError::NonEmptyGroup));
}
