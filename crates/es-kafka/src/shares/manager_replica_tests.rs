//! The cluster side of the ShareManager (`manager_replica.rs`) between two
//! managers on their own simulated disks, a leader's and a follower's: the
//! copy of whole states and of writes, what a crashed follower loads when it
//! leads, removal of what the leader no longer has, and the leader's answers
//! waiting for its in-sync followers.

use std::collections::BTreeMap;
use std::time::Duration;

use uuid::Uuid;

use super::tests::{key, topic_id, Env, TestLog, TOPIC};
use super::*;

const ACCEPT: i8 = 1;
const REJECT: i8 = 3;

/// The follower applies the leader's answer for partition 0 given what it
/// holds (`None`: nothing of this term); returns what it holds after.
fn copy(
    leader: &Env,
    follower: &Env,
    held: Option<&BTreeMap<String, u64>>,
) -> (Vec<CopiedShare>, BTreeMap<String, u64>) {
    let config = leader.config;
    let shares = leader
        .mgr
        .copy_for_follower(TOPIC, topic_id(), 0, &leader.log, &|_| config, held)
        .expect("the leader's answer");
    let now = follower.mgr.copy_partition(
        TOPIC,
        topic_id(),
        0,
        shares.clone(),
        held.unwrap_or(&BTreeMap::new()),
        held.is_none(),
        &|| true,
    );
    (shares, now)
}

fn ranges(r: &[AcquiredRecords]) -> Vec<(i64, i64, u16)> {
    r.iter()
        .map(|a| (a.first, a.last, a.delivery_count))
        .collect()
}

#[tokio::test]
async fn a_followers_copy_holds_what_the_leader_acknowledged_and_loads_as_after_a_restart() {
    let leader = Env::new(TestLog::new(0, 20));
    let follower = Env::new(TestLog::new(0, 20));
    let k = key(0);
    assert_eq!(ranges(&leader.fetch(&k, "m1", 10).await), vec![(0, 9, 1)]);
    leader.ack(&k, "m1", 0, 4, ACCEPT).await;

    // Nothing held yet: the whole state.
    let (sent, held) = copy(&leader, &follower, None);
    assert_eq!(sent.len(), 1);
    assert!(
        sent[0].state.is_some() && sent[0].writes.is_empty(),
        "{sent:?}"
    );
    assert_eq!(held.get("queue"), Some(&sent[0].seq));

    // Then only what changed since.
    leader.ack(&k, "m1", 5, 6, REJECT).await;
    let (sent, held) = copy(&leader, &follower, Some(&held));
    assert!(
        sent[0].state.is_none() && !sent[0].writes.is_empty(),
        "{sent:?}"
    );
    // Current: nothing to send.
    let (again, held2) = copy(&leader, &follower, Some(&held));
    assert!(again[0].state.is_none() && again[0].writes.is_empty());
    assert_eq!(held2, held);

    // The follower crashes (only what it synced is kept) and leads: 0-4
    // accepted and 5-6 archived stay so; 7-9, acquired, come back.
    let promoted = follower.crash();
    assert_eq!(
        ranges(&promoted.fetch(&k, "m2", 100).await),
        vec![(7, 9, 2), (10, 19, 1)]
    );
    // As the leader itself would after a crash.
    let restarted = leader.crash();
    assert_eq!(
        ranges(&restarted.fetch(&k, "m2", 100).await),
        vec![(7, 9, 2), (10, 19, 1)]
    );
}

#[tokio::test]
async fn a_copy_from_another_history_is_replaced_whole_and_a_removed_state_is_removed() {
    let leader = Env::new(TestLog::new(0, 20));
    let follower = Env::new(TestLog::new(0, 20));
    let k = key(0);
    leader.fetch(&k, "m1", 10).await;
    copy(&leader, &follower, None);
    // The follower's copy goes its own way (it led for a while).
    follower.fetch(&k, "x", 20).await;
    follower.ack(&k, "x", 0, 19, ACCEPT).await;
    follower.mgr.demote(topic_id(), 0);
    // A new term: the whole state again, over what it had.
    let (sent, _) = copy(&leader, &follower, None);
    assert!(sent[0].state.is_some());
    let promoted = follower.crash();
    assert_eq!(
        ranges(&promoted.fetch(&k, "m2", 100).await),
        vec![(0, 9, 2), (10, 19, 1)]
    );

    // The leader deletes the share-partition: the copy goes too.
    let (_, held) = copy(&leader, &follower, None);
    leader.mgr.delete_offsets(&k, TOPIC).expect("delete");
    let (sent, now) = copy(&leader, &follower, Some(&held));
    assert!(sent.is_empty());
    assert!(now.is_empty());
    let files = crate::shares::store::ShareFiles::new(&PathBuf::from("/data"), "queue", TOPIC, 0);
    assert!(!files.exist(&follower.fs), "the copy's files are removed");
}

/// The broker's side as a test sets it.
struct Hook {
    followers: Mutex<Option<Vec<i32>>>,
    lagging: Mutex<Vec<i32>>,
    lag: Duration,
}

impl ShareReplication for Hook {
    fn followers(&self, _: Uuid, _: i32) -> Option<Vec<i32>> {
        self.followers.lock().clone()
    }
    fn lagging(&self, _: Uuid, _: i32, followers: &[i32]) {
        self.lagging.lock().extend_from_slice(followers);
    }
    fn lag_max(&self) -> Duration {
        self.lag
    }
}

fn hooked(env: &Env, followers: Vec<i32>, lag: Duration) -> Arc<Hook> {
    let hook = Arc::new(Hook {
        followers: Mutex::new(Some(followers)),
        lagging: Mutex::new(Vec::new()),
        lag,
    });
    env.mgr.set_replication(hook.clone());
    hook
}

#[tokio::test]
async fn an_answer_waits_until_every_in_sync_follower_holds_its_write() {
    let leader = Env::new(TestLog::new(0, 20));
    let k = key(0);
    let hook = hooked(&leader, vec![2, 3], Duration::from_secs(3600));
    let got = leader.fetch_ticket(&k, "m1", 10).expect("fetch");
    let ticket = got.ticket.expect("an acquisition is journaled");
    let mgr = leader.mgr.clone();
    let mut wait = tokio::spawn(async move { mgr.wait_durable(ticket).await });
    let seq = leader
        .mgr
        .copy_for_follower(TOPIC, topic_id(), 0, &leader.log, &|_| leader.config, None)
        .expect("answer")[0]
        .seq;
    leader.mgr.confirm(&k, 2, seq);
    // Node 3 has not confirmed: the answer still waits.
    assert!(
        tokio::time::timeout(Duration::from_millis(100), &mut wait)
            .await
            .is_err(),
        "answered before node 3 held the write"
    );
    // An acquisition's answer waits for the local fsync only.
    let other = leader.fetch_ticket(&key(1), "m1", 10).expect("fetch");
    leader
        .mgr
        .wait_acquired(other.ticket.expect("journaled"))
        .await
        .expect("durable here");
    // Node 3 leaves the ISR: node 2 is enough.
    *hook.followers.lock() = Some(vec![2]);
    leader.mgr.replicas_changed(topic_id(), 0);
    wait.await.expect("task").expect("replicated");

    // Losing the leadership fails what waits.
    let got = leader.fetch_ticket(&k, "m1", 10).expect("fetch");
    let ticket = got.ticket.expect("journaled");
    let mgr = leader.mgr.clone();
    let wait = tokio::spawn(async move { mgr.wait_durable(ticket).await });
    *hook.followers.lock() = None;
    leader.mgr.demote(topic_id(), 0);
    let e = wait.await.expect("task").expect_err("not the leader");
    assert_eq!(e.code(), 6, "NOT_LEADER_OR_FOLLOWER: {e}");
}

#[tokio::test]
async fn a_follower_that_does_not_copy_in_time_is_proposed_out_of_the_isr() {
    let leader = Env::new(TestLog::new(0, 20));
    let k = key(0);
    let hook = hooked(&leader, vec![2], Duration::from_millis(20));
    let got = leader.fetch_ticket(&k, "m1", 10).expect("fetch");
    let ticket = got.ticket.expect("journaled");
    let e = leader
        .mgr
        .wait_durable(ticket)
        .await
        .expect_err("never copied");
    assert_eq!(e.code(), 7, "REQUEST_TIMED_OUT: {e}");
    assert_eq!(*hook.lagging.lock(), vec![2]);
}

#[tokio::test]
async fn a_follower_joins_the_isr_only_once_it_holds_every_share_partition() {
    let leader = Env::new(TestLog::new(0, 20));
    let k = key(0);
    hooked(&leader, vec![], Duration::from_secs(3600));
    leader.fetch(&k, "m1", 10).await;
    assert!(!leader.mgr.follower_caught_up(topic_id(), 0, 2));
    let seq = leader
        .mgr
        .copy_for_follower(TOPIC, topic_id(), 0, &leader.log, &|_| leader.config, None)
        .expect("answer")[0]
        .seq;
    leader.mgr.follower_synced(topic_id(), 0, 2);
    assert!(
        !leader.mgr.follower_caught_up(topic_id(), 0, 2),
        "not confirmed yet"
    );
    leader.mgr.confirm(&k, 2, seq);
    assert!(leader.mgr.follower_caught_up(topic_id(), 0, 2));
    leader.ack(&k, "m1", 0, 0, ACCEPT).await;
    assert!(
        !leader.mgr.follower_caught_up(topic_id(), 0, 2),
        "a new write"
    );
}
