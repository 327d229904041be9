//! Consumer groups end to end: the real `es-broker` binary and librdkafka
//! consumers (the `rdkafka` crate) in one group.
//!
//! - two and three members split a topic's partitions without overlap, with
//!   the eager (`range`) and the incremental (`cooperative-sticky`) protocol,
//!   and members leaving hand their partitions over;
//! - a member that dies (a child process killed with SIGKILL, so it never
//!   says goodbye) is removed after its session timeout and its partitions
//!   move to the survivor;
//! - a static member (`group.instance.id`) that restarts gets its partitions
//!   back without a rebalance of the others;
//! - committed offsets survive a `kill -9` of the broker, a new consumer
//!   resumes from them, and the lag (high watermark minus committed offset,
//!   what `kafka-consumer-groups.sh --describe` shows) is right;
//! - KIP-848 consumers (`group.protocol=consumer`) subscribe to a list of
//!   topics, and to a regex the broker resolves, including topics created
//!   after the subscription.
//!
//! Every wait is a bounded retry on a condition; nothing asserts on timing.

mod common;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use common::{admin_opts, client_config, Broker};
use rdkafka::admin::{AdminClient, NewTopic, TopicReplication};
use rdkafka::client::{ClientContext, DefaultClientContext};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{
    BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, StreamConsumer,
};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};

/// How long any one condition may take to come true.
const WAIT: Duration = Duration::from_secs(60);

/// Retries `f` (every 100 ms) until it returns `Some`, for at most [`WAIT`].
async fn eventually<T>(what: &str, b: &Broker, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; broker log:\n{}",
            b.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn create_topic(b: &Broker, name: &str, partitions: i32) {
    let admin: AdminClient<DefaultClientContext> = client_config(&b.addr).create().expect("admin");
    let opts = admin_opts(WAIT);
    let t = NewTopic::new(name, partitions, TopicReplication::Fixed(1));
    let res = admin
        .create_topics([&t], &opts)
        .await
        .expect("create_topics");
    assert_eq!(res, vec![Ok(name.to_string())]);
}

/// Produces `n` messages to each partition.
async fn produce(b: &Broker, topic: &str, partitions: i32, n: usize) {
    let p: FutureProducer = client_config(&b.addr)
        .set("linger.ms", "5")
        .create()
        .expect("producer");
    for part in 0..partitions {
        for i in 0..n {
            let payload = format!("{part}-{i}");
            p.send(
                FutureRecord::<(), _>::to(topic)
                    .partition(part)
                    .payload(&payload),
                WAIT,
            )
            .await
            .unwrap_or_else(|(e, _)| panic!("produce: {e}"));
        }
    }
}

/// Counts the rebalances a consumer goes through.
#[derive(Default)]
struct Counting {
    assigns: AtomicUsize,
    revokes: AtomicUsize,
}

impl ClientContext for Counting {}

impl ConsumerContext for Counting {
    fn post_rebalance(&self, _: &BaseConsumer<Self>, r: &Rebalance<'_>) {
        match r {
            Rebalance::Assign(_) => self.assigns.fetch_add(1, Ordering::SeqCst),
            Rebalance::Revoke(_) => self.revokes.fetch_add(1, Ordering::SeqCst),
            Rebalance::Error(_) => 0,
        };
    }
}

/// A group member driven by its own task (librdkafka serves rebalances
/// while the consumer is polled).
struct Member {
    consumer: Arc<StreamConsumer<Counting>>,
    task: tokio::task::JoinHandle<()>,
    received: Arc<Mutex<Vec<(i32, i64)>>>,
}

fn member(b: &Broker, group: &str, topic: &str, extra: &[(&str, &str)]) -> Member {
    let mut c = client_config(&b.addr);
    c.set("group.id", group)
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .set("session.timeout.ms", "10000")
        .set("heartbeat.interval.ms", "500")
        .set("fetch.wait.max.ms", "100");
    for (k, v) in extra {
        c.set(*k, *v);
    }
    let consumer: StreamConsumer<Counting> = c
        .create_with_context(Counting::default())
        .expect("consumer");
    consumer.subscribe(&[topic]).expect("subscribe");
    let consumer = Arc::new(consumer);
    let received = Arc::new(Mutex::new(Vec::new()));
    let (c2, r2) = (consumer.clone(), received.clone());
    let task = tokio::spawn(async move {
        loop {
            if let Ok(m) = c2.recv().await {
                r2.lock()
                    .expect("received")
                    .push((m.partition(), m.offset()));
            }
        }
    });
    Member {
        consumer,
        task,
        received,
    }
}

impl Member {
    fn assigned(&self) -> BTreeSet<i32> {
        self.consumer
            .assignment()
            .map(|l| l.elements().iter().map(|e| e.partition()).collect())
            .unwrap_or_default()
    }

    fn assigns(&self) -> usize {
        self.consumer.context().assigns.load(Ordering::SeqCst)
    }

    /// Closes the consumer (it leaves the group, unless it is static).
    async fn close(self) {
        self.task.abort();
        let _ = self.task.await;
        let c = self.consumer;
        tokio::task::spawn_blocking(move || drop(c))
            .await
            .expect("close");
    }
}

/// Some when the members' assignments are disjoint, cover `0..partitions`
/// and are as even as possible; returns them.
fn split(members: &[&Member], partitions: i32) -> Option<Vec<BTreeSet<i32>>> {
    let sets: Vec<BTreeSet<i32>> = members.iter().map(|m| m.assigned()).collect();
    let total: usize = sets.iter().map(BTreeSet::len).sum();
    let union: BTreeSet<i32> = sets.iter().flatten().copied().collect();
    let want: BTreeSet<i32> = (0..partitions).collect();
    let per = partitions as usize / members.len();
    let even = sets.iter().all(|s| s.len() == per || s.len() == per + 1);
    (total == partitions as usize && union == want && even).then_some(sets)
}

async fn members_split_and_hand_over(strategy: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = common::start(dir.path(), &[]);
    let topic = format!("split-{strategy}");
    let group = format!("g-{strategy}");
    create_topic(&b, &topic, 6).await;
    produce(&b, &topic, 6, 5).await;
    let cfg = [("partition.assignment.strategy", strategy)];

    let a = member(&b, &group, &topic, &cfg);
    eventually("a alone holds all six partitions", &b, || split(&[&a], 6)).await;
    let m1 = member(&b, &group, &topic, &cfg);
    eventually("two members split six partitions", &b, || {
        split(&[&a, &m1], 6)
    })
    .await;
    let m2 = member(&b, &group, &topic, &cfg);
    eventually("three members split six partitions", &b, || {
        split(&[&a, &m1, &m2], 6)
    })
    .await;
    // Every message was read, by exactly one member per partition position.
    eventually("all 30 messages consumed", &b, || {
        let mut all: Vec<(i32, i64)> = [&a, &m1, &m2]
            .iter()
            .flat_map(|m| m.received.lock().expect("received").clone())
            .collect();
        all.sort();
        all.dedup();
        (all.len() == 30).then_some(())
    })
    .await;

    m2.close().await;
    eventually("two members after one left", &b, || split(&[&a, &m1], 6)).await;
    m1.close().await;
    eventually("the last member takes everything", &b, || split(&[&a], 6)).await;
    a.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_split_partitions_eagerly_and_hand_them_over_on_leave() {
    members_split_and_hand_over("range").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_split_partitions_cooperatively_and_hand_them_over_on_leave() {
    members_split_and_hand_over("cooperative-sticky").await;
}

/// Environment variable that turns the test binary into a group member
/// (see [`child_consumer_process`]): `bootstrap|group|topic`.
const CHILD_ENV: &str = "ES_GROUPS_TEST_CHILD";
const CHILD_MARKER: &str = "CHILD-ASSIGNED";

/// Not a test by itself: run by the dying-member test as a separate process
/// so it can be killed with SIGKILL.
#[test]
#[ignore = "run as a child process by a_member_that_dies_is_replaced_after_its_session_timeout"]
fn child_consumer_process() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let parts: Vec<&str> = spec.split('|').collect();
    let [addr, group, topic] = parts[..] else {
        panic!("bad {CHILD_ENV}: {spec}");
    };
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("broker.address.family", "v4")
        .set("group.id", group)
        .set("session.timeout.ms", "6000")
        .set("heartbeat.interval.ms", "500")
        .create()
        .expect("consumer");
    c.subscribe(&[topic]).expect("subscribe");
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut told = false;
    while Instant::now() < deadline {
        let _ = c.poll(Duration::from_millis(100));
        if !told && c.assignment().map(|a| a.count() > 0).unwrap_or(false) {
            println!("{CHILD_MARKER}");
            told = true;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_dies_is_replaced_after_its_session_timeout() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut b = common::start(dir.path(), &[]);
    create_topic(&b, "dies", 4).await;
    let a = member(&b, "g-dies", "dies", &[("session.timeout.ms", "6000")]);
    eventually("a holds all partitions", &b, || split(&[&a], 4)).await;

    let exe = std::env::current_exe().expect("test binary");
    let mut child = Command::new(exe)
        .args([
            "child_consumer_process",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, format!("{}|g-dies|dies", b.addr))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn child consumer");
    let out = child.stdout.take().expect("child stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if line.contains(CHILD_MARKER) {
                let _ = tx.send(());
            }
        }
    });
    let got = tokio::task::spawn_blocking(move || rx.recv_timeout(WAIT))
        .await
        .expect("join");
    assert!(
        got.is_ok(),
        "the child never got partitions; broker log:\n{}",
        b.log_text()
    );
    eventually("a shares the partitions with the child", &b, || {
        let mine = a.assigned();
        (mine.len() == 2).then_some(())
    })
    .await;

    // SIGKILL: no LeaveGroup, the socket just closes.
    child.kill().expect("kill child");
    let _ = child.wait();
    eventually("a gets the dead member's partitions back", &b, || {
        split(&[&a], 4)
    })
    .await;
    // The broker removed it on its session timeout (the line may still be
    // on its way from the log reader).
    b.wait_for_line("member session expired", WAIT);
    a.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_member_restarts_without_a_rebalance() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = common::start(dir.path(), &[]);
    create_topic(&b, "static", 4).await;
    let a = member(&b, "g-static", "static", &[]);
    eventually("a holds all partitions", &b, || split(&[&a], 4)).await;
    let s = member(
        &b,
        "g-static",
        "static",
        &[("group.instance.id", "instance-1")],
    );
    let sets = eventually("a and the static member split", &b, || split(&[&a, &s], 4)).await;
    let static_had = sets[1].clone();
    let a_assigns = a.assigns();
    // The static member goes away (without LeaveGroup: it is static) and a
    // new process with the same instance id comes back.
    s.close().await;
    let s2 = member(
        &b,
        "g-static",
        "static",
        &[("group.instance.id", "instance-1")],
    );
    eventually("the new instance has the old partitions", &b, || {
        (s2.assigned() == static_had).then_some(())
    })
    .await;
    assert_eq!(a.assigns(), a_assigns, "a was not rebalanced");
    assert_eq!(split(&[&a, &s2], 4).map(|v| v[1].clone()), Some(static_had));
    s2.close().await;
    a.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_offsets_survive_a_broker_kill_and_show_the_lag() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data: PathBuf = dir.path().join("data");
    let b = common::start(&data, &[]);
    create_topic(&b, "durable", 2).await;
    produce(&b, "durable", 2, 10).await;
    let m = member(&b, "g-durable", "durable", &[]);
    eventually("m holds both partitions", &b, || split(&[&m], 2)).await;
    eventually("m read all 20 messages", &b, || {
        (m.received.lock().expect("received").len() == 20).then_some(())
    })
    .await;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("durable", 0, Offset::Offset(10))
        .expect("tpl");
    tpl.add_partition_offset("durable", 1, Offset::Offset(4))
        .expect("tpl");
    m.consumer.commit(&tpl, CommitMode::Sync).expect("commit");
    m.close().await;

    // kill -9 once the commit is acknowledged, then restart on the same data.
    b.kill();
    let b = common::start(&data, &[]);
    let mut c = client_config(&b.addr);
    c.set("group.id", "g-durable")
        .set("enable.auto.commit", "false");
    let probe: BaseConsumer = c.create().expect("probe");
    let committed = tokio::task::spawn_blocking(move || {
        let mut want = TopicPartitionList::new();
        want.add_partition("durable", 0);
        want.add_partition("durable", 1);
        let got = probe.committed_offsets(want, WAIT).expect("OffsetFetch");
        let offsets: Vec<Offset> = got.elements().iter().map(|e| e.offset()).collect();
        // Lag as kafka-consumer-groups.sh computes it: ListOffsets latest
        // minus the committed offset.
        let lag: Vec<i64> = [0, 1]
            .iter()
            .zip(&offsets)
            .map(|(p, o)| {
                let (_, high) = probe
                    .fetch_watermarks("durable", *p, WAIT)
                    .expect("ListOffsets");
                match o {
                    Offset::Offset(c) => high - c,
                    other => panic!("no committed offset: {other:?}"),
                }
            })
            .collect();
        (offsets, lag)
    })
    .await
    .expect("join");
    assert_eq!(committed.0, vec![Offset::Offset(10), Offset::Offset(4)]);
    assert_eq!(committed.1, vec![0, 6]);

    // A new member of the group resumes from the committed offsets.
    let n = member(&b, "g-durable", "durable", &[]);
    eventually("the new member read the 6 uncommitted messages", &b, || {
        let got = n.received.lock().expect("received").clone();
        (got.len() >= 6).then_some(got)
    })
    .await;
    let got = n.received.lock().expect("received").clone();
    assert!(
        got.iter().all(|(p, o)| *p == 1 && *o >= 4),
        "resumed from the commit: {got:?}"
    );
    n.close().await;
}

// ----- KIP-848 (group.protocol=consumer) -------------------------------------

/// A librdkafka consumer with the KIP-848 protocol, subscribed to
/// `subscription` (names, or regexes starting with `^`), recording every
/// (topic, partition, offset) it receives. librdkafka 2.12 sends the names as
/// SubscribedTopicNames and the regexes, combined, as SubscribedTopicRegex
/// (`""` when there is none).
struct Kip848 {
    consumer: Arc<StreamConsumer>,
    task: tokio::task::JoinHandle<()>,
    received: Arc<Mutex<BTreeSet<(String, i32, i64)>>>,
}

impl Kip848 {
    fn start(b: &Broker, group: &str, subscription: &[&str]) -> Kip848 {
        let consumer: StreamConsumer = client_config(&b.addr)
            .set("group.id", group)
            .set("group.protocol", "consumer")
            .set("auto.offset.reset", "earliest")
            .set("enable.auto.commit", "false")
            .set("fetch.wait.max.ms", "100")
            .create()
            .expect("consumer");
        consumer.subscribe(subscription).expect("subscribe");
        let consumer = Arc::new(consumer);
        let received = Arc::new(Mutex::new(BTreeSet::new()));
        let (c2, r2) = (consumer.clone(), received.clone());
        let task = tokio::spawn(async move {
            loop {
                // Errors (a fatal one included) leave `received` short, and
                // the waits below fail with the broker log.
                if let Ok(m) = c2.recv().await {
                    r2.lock().expect("received").insert((
                        m.topic().to_string(),
                        m.partition(),
                        m.offset(),
                    ));
                }
            }
        });
        Kip848 {
            consumer,
            task,
            received,
        }
    }

    /// How many records it received from `topic`.
    fn count(&self, topic: &str) -> usize {
        self.received
            .lock()
            .expect("received")
            .iter()
            .filter(|(t, _, _)| t == topic)
            .count()
    }

    async fn close(self) {
        self.task.abort();
        let _ = self.task.await;
        let c = self.consumer;
        tokio::task::spawn_blocking(move || drop(c))
            .await
            .expect("close");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kip848_consumer_subscribes_to_a_list_of_topics() {
    // librdkafka sends SubscribedTopicRegex "" with a plain list; es once
    // refused that heartbeat with INVALID_REQUEST.
    let dir = tempfile::tempdir().expect("tempdir");
    let b = common::start(dir.path(), &[]);
    create_topic(&b, "list-a", 2).await;
    create_topic(&b, "list-b", 1).await;
    produce(&b, "list-a", 2, 3).await;
    produce(&b, "list-b", 1, 4).await;
    let c = Kip848::start(&b, "g-848-list", &["list-a", "list-b"]);
    eventually("all 10 records of list-a and list-b consumed", &b, || {
        (c.count("list-a") == 6 && c.count("list-b") == 4).then_some(())
    })
    .await;
    let assigned: BTreeSet<(String, i32)> = c
        .consumer
        .assignment()
        .expect("assignment")
        .elements()
        .iter()
        .map(|e| (e.topic().to_string(), e.partition()))
        .collect();
    let want: BTreeSet<(String, i32)> = [("list-a", 0), ("list-a", 1), ("list-b", 0)]
        .iter()
        .map(|(t, p)| (t.to_string(), *p))
        .collect();
    assert_eq!(assigned, want);
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kip848_regex_subscription_gets_matching_topics_created_later() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = common::start(dir.path(), &[]);
    create_topic(&b, "rx-first", 2).await;
    create_topic(&b, "other", 1).await;
    create_topic(&b, "xrx-first", 1).await;
    produce(&b, "rx-first", 2, 2).await;
    produce(&b, "other", 1, 2).await;
    produce(&b, "xrx-first", 1, 2).await;
    let c = Kip848::start(&b, "g-848-regex", &["^rx-.*"]);
    eventually("the records of rx-first consumed", &b, || {
        (c.count("rx-first") == 4).then_some(())
    })
    .await;
    // librdkafka sent the regex to the broker (wrapped in parentheses), and
    // the broker resolved it: the client did not list the topic by name.
    eventually("the broker saw the member's regex", &b, || {
        b.log_text()
            .lines()
            .any(|l| {
                l.contains("member changed its subscribed topic regex") && l.contains("(^rx-.*)")
            })
            .then_some(())
    })
    .await;

    // A topic created after the subscription that matches is assigned to
    // the group (on a heartbeat after it exists) and consumed.
    create_topic(&b, "rx-second", 3).await;
    produce(&b, "rx-second", 3, 1).await;
    eventually("the records of rx-second consumed", &b, || {
        (c.count("rx-second") == 3).then_some(())
    })
    .await;
    // Whole-name matching: neither `other` nor `xrx-first` was assigned.
    let assigned: BTreeSet<String> = c
        .consumer
        .assignment()
        .expect("assignment")
        .elements()
        .iter()
        .map(|e| e.topic().to_string())
        .collect();
    assert_eq!(
        assigned,
        BTreeSet::from(["rx-first".to_string(), "rx-second".to_string()])
    );
    assert_eq!(c.count("other") + c.count("xrx-first"), 0);
    c.close().await;
}
