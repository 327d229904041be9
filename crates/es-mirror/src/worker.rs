//! One link's worker: a thread of its own (librdkafka's consumer blocks)
//! that follows the metadata and copies.
//!
//! Every [`REFRESH`](crate::schedule::REFRESH) (and whenever the metadata image changes; after a
//! failure with a growing back-off, [`crate::schedule`]) it reads the
//! link's mirror topics from the metadata, adds the source topics that match
//! the link's patterns, creates each es topic with the source's partition
//! count and topic configs (growing it when the source grows, keeping the
//! copied configs in sync), and assigns the source partitions whose es
//! partition this node leads, each at its es log end: the es log is where
//! a mirror resumes, so a restart of either side continues exactly there.
//! Between refreshes it polls the source and appends what arrives
//! ([`crate::copy`]), and takes the source's high watermark of each
//! partition from librdkafka's last fetch response (so the lag it reports
//! is current); every link's `group_sync_interval_ms` it copies group
//! offsets ([`crate::groups`]). When the source deleted offsets the mirror
//! had not copied (retention, DeleteRecords), librdkafka stops fetching the
//! partition (`auto.offset.reset=error`): the worker closes the gap at the
//! source's log start, reports it on the partition until it copies again,
//! and assigns the partition again. Promotion ([`Command::Promote`]) runs
//! here too, because it needs the consumer: see [`Worker::promote`].
//!
//! A source topic deleted and created again under the same name is another
//! topic whose offsets start over: librdkafka goes on fetching at the old
//! position, so without a check the new topic's records would follow the
//! old one's. The worker records the source topic's id when it first
//! follows it, compares it at every refresh (a topic whose id changed is
//! failed with the reason and not assigned) and before every append (the
//! records gathered are appended only if the source topic, asked after they
//! were polled, still has the recorded id: it had it when they were
//! fetched). See [`crate::ids`].

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::{Duration, Instant};

use es_auth::acl::AclBinding;
use es_kafka::broker::Broker;
use es_kafka::mirror::PartitionStatus;
use es_meta::image::MetaImage;
use es_meta::mirror::{MirrorLink, MirrorState, MirrorTopic};
use rdkafka::admin::AdminClient;
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::{Offset, TopicPartitionList};
use regex::Regex;
use tokio::runtime::Handle;

use crate::acls;
use crate::copy::{close_gap, local_partition, Gather};
use crate::groups::{groups_of, GroupReaders};
use crate::ids::{self, Seen, SourceIds};
use crate::quotas;
use crate::schedule::{Schedule, BACKOFF_MAX, BACKOFF_MIN};
use crate::source::{self, SOURCE_REQUEST_TIMEOUT};
use crate::status::Shared;
use crate::topics;

/// Longest one poll waits for records.
const POLL: Duration = Duration::from_millis(100);
/// Longest records gather before they are appended.
const GATHER: Duration = Duration::from_millis(50);
/// How often the source's high watermarks are taken from librdkafka's
/// cache of the last fetch responses (no request).
const WATERMARKS: Duration = Duration::from_millis(200);
/// How long the promotion probe waits for the source.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// What the service asks a worker.
pub enum Command {
    /// Promote `topic` if every partition is within `max_lag`.
    Promote {
        topic: String,
        max_lag: u64,
        reply: tokio::sync::oneshot::Sender<Result<Vec<PartitionStatus>, String>>,
    },
    /// A promotion did not complete: copy `topic` again.
    Resume { topic: String },
}

/// The state of one link's worker.
pub struct Worker {
    broker: Arc<Broker>,
    rt: Handle,
    link: MirrorLink,
    shared: Arc<Shared>,
    consumer: BaseConsumer,
    admin: AdminClient<DefaultClientContext>,
    /// Assigned: (es topic, partition) -> source topic.
    assigned: BTreeMap<(String, i32), String>,
    /// Source topic -> es topic, for the assigned ones.
    by_source: HashMap<String, String>,
    /// What each assigned partition holds (its log end when last looked).
    floors: HashMap<(String, i32), u64>,
    gather: Gather,
    groups: GroupReaders,
    /// Topics being promoted: not copied.
    promoting: HashSet<String>,
    schedule: Schedule,
    /// The next refresh assigns every partition again, even if the set is
    /// the same: a partition's fetch stopped (offset out of range) or its
    /// log end was moved past a gap.
    reassign_all: bool,
    /// The mirror topics the last refresh followed, with their source
    /// partition counts (what the group sync copies offsets of).
    followed: Vec<(MirrorTopic, i32)>,
    last_watermarks: Instant,
    last_image: Option<Arc<MetaImage>>,
    /// ACL bindings this worker created (the only ones it deletes).
    acls_made: HashSet<AclBinding>,
    /// Quota values this worker set (the only ones it removes).
    quotas_made: BTreeSet<quotas::QuotaKey>,
    /// The connection quotas are read through, while it works.
    quota_client: Option<es_client::Connection>,
    /// The reader of the source topics' ids.
    ids: SourceIds,
    /// Es topic -> the id its source topic had when first followed (as
    /// recorded in the metadata, or being recorded): what appends are
    /// checked against.
    recorded: HashMap<String, String>,
}

/// Runs `link`'s worker until `stop`.
pub fn run(
    broker: Arc<Broker>,
    rt: Handle,
    link: MirrorLink,
    stop: Arc<AtomicBool>,
    commands: Receiver<Command>,
    shared: Arc<Shared>,
) {
    // The broker's coordinators spawn their writes: this thread works in
    // the broker's runtime.
    let _in_runtime = rt.enter();
    let mut backoff = BACKOFF_MIN;
    let (consumer, admin) = loop {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let clients = source::consumer(&link, false)
            .map_err(|e| e.to_string())
            .and_then(|c| Ok((c, topics::admin_client(&link)?)));
        match clients {
            Ok(c) => break c,
            Err(e) => {
                shared.link_error(&link.name, Some(format!("source client: {e}")));
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
        }
    };
    let mut w = Worker {
        broker,
        rt,
        link,
        shared,
        consumer,
        admin,
        assigned: BTreeMap::new(),
        by_source: HashMap::new(),
        floors: HashMap::new(),
        gather: Gather::default(),
        groups: GroupReaders::default(),
        promoting: HashSet::new(),
        schedule: Schedule::new(Instant::now()),
        reassign_all: false,
        followed: Vec::new(),
        last_watermarks: Instant::now(),
        last_image: None,
        acls_made: HashSet::new(),
        quotas_made: BTreeSet::new(),
        quota_client: None,
        ids: SourceIds::default(),
        recorded: HashMap::new(),
    };
    tracing::info!(link = %w.link.name, source = %w.link.source_bootstrap, "mirror link started");
    while !stop.load(Ordering::Relaxed) {
        let image = w.broker.image();
        let changed = match (&image, &w.last_image) {
            (Some(a), Some(b)) => !Arc::ptr_eq(a, b),
            (a, b) => a.is_some() != b.is_some(),
        };
        if changed || w.schedule.refresh_due(Instant::now()) {
            w.last_image = image.clone();
            let ok = match image {
                Some(image) => match w.refresh(&image) {
                    Ok(all) => {
                        w.shared.link_error(&w.link.name, None);
                        all
                    }
                    Err(e) => {
                        tracing::warn!(link = %w.link.name, error = %e, retry_in = ?w.schedule.backoff(), "mirror refresh failed");
                        w.shared.link_error(&w.link.name, Some(e));
                        false
                    }
                },
                None => true,
            };
            w.schedule.refreshed(ok, Instant::now());
        }
        let interval = Duration::from_millis(w.link.group_sync_interval_ms);
        if w.schedule.groups_due(interval, Instant::now()) {
            w.schedule.groups_synced(Instant::now());
            w.sync_link_state();
        }
        w.poll_and_copy();
        while let Ok(cmd) = commands.try_recv() {
            w.command(cmd);
        }
    }
    w.flush(None);
    tracing::info!(link = %w.link.name, "mirror link stopped");
}

impl Worker {
    /// Follows the metadata and the source: topics, partitions, configs,
    /// the assignment. False when a topic could not be followed (reported
    /// on the topic).
    fn refresh(&mut self, image: &MetaImage) -> Result<bool, String> {
        if let Some(l) = image.mirror_links.get(&self.link.name) {
            self.link = l.clone();
        }
        self.promoting.retain(|t| {
            image
                .mirror_topics
                .get(t)
                .is_some_and(|m| m.state != MirrorState::Promoted)
        });
        self.discover(image)?;
        let mine: Vec<MirrorTopic> = image
            .mirror_topics
            .values()
            .filter(|t| t.link == self.link.name && t.state == MirrorState::Active)
            .filter(|t| !self.promoting.contains(&t.topic))
            .cloned()
            .collect();
        // The source topics' ids first: a topic that is another one now
        // is not followed. Not read (the source is down): a failed
        // refresh, the assignment stays.
        let names: BTreeSet<&str> = mine.iter().map(|t| t.source_topic.as_str()).collect();
        let names: Vec<&str> = names.into_iter().collect();
        let seen = self.ids.read(&self.link, &names)?;
        let mut want: BTreeMap<(String, i32), (String, u64)> = BTreeMap::new();
        let mut counts: Vec<(MirrorTopic, i32)> = Vec::new();
        let mut all = true;
        for mt in &mine {
            let followed = self
                .check_id(mt, seen.as_ref())
                .and_then(|()| self.follow_topic(image, mt, &mut want));
            match followed {
                Ok(n) => {
                    self.shared.topic_error(&mt.topic, None);
                    counts.push((mt.clone(), n));
                }
                Err(e) => {
                    tracing::warn!(topic = %mt.topic, error = %e, "mirror topic not followed");
                    self.shared.topic_error(&mt.topic, Some(e));
                    all = false;
                }
            }
        }
        self.followed = counts;
        self.reassign(want)?;
        Ok(all)
    }

    /// What follows the link's group sync interval: group offsets, and
    /// ACLs and client quotas when the link copies them. A failure is
    /// reported on the link and retried at the next interval.
    fn sync_link_state(&mut self) {
        let followed = self.followed.clone();
        if let Err(e) = self.sync_groups(&followed) {
            tracing::warn!(link = %self.link.name, error = %e, "group offsets not synced; retried at the next group sync");
            self.shared.link_error(&self.link.name, Some(e));
        }
        if self.link.sync_acls {
            if let Err(e) = self.sync_acls() {
                tracing::warn!(link = %self.link.name, error = %e, "ACLs not synced; retried at the next group sync");
            }
        }
        if self.link.sync_quotas {
            if let Err(e) = self.sync_quotas() {
                tracing::warn!(link = %self.link.name, error = %e, "client quotas not synced; retried at the next group sync");
            }
        }
    }

    /// Creates on es the source's ACL bindings es lacks and deletes those
    /// this worker created that the source no longer has ([`acls`]).
    fn sync_acls(&mut self) -> Result<(), String> {
        let source = acls::describe_source(&self.consumer, SOURCE_REQUEST_TIMEOUT)?;
        let on_es: HashSet<AclBinding> = self.broker.acl_bindings().into_iter().collect();
        let (create, delete) = acls::plan(&source, &on_es, &self.acls_made);
        if create.is_empty() && delete.is_empty() {
            return Ok(());
        }
        let b = self.broker.clone();
        let (c, d) = (create.clone(), delete.clone());
        self.rt.block_on(async move { b.sync_acls(c, d).await })?;
        tracing::info!(link = %self.link.name, created = create.len(), deleted = delete.len(), "ACLs synced from the source");
        for b in &delete {
            self.acls_made.remove(b);
        }
        self.acls_made.extend(create);
        Ok(())
    }

    /// Sets on es the source's client quotas and removes those this worker
    /// set that the source no longer has ([`quotas`]). The connection to
    /// the source is kept while it works and opened again after a failure.
    fn sync_quotas(&mut self) -> Result<(), String> {
        let mut client = match self.quota_client.take() {
            Some(c) => c,
            None => quotas::connect(&self.link)?,
        };
        let source = quotas::describe_source(&mut client)?;
        self.quota_client = Some(client);
        let (alterations, set, removed) =
            quotas::plan(&source, &self.broker.client_quotas(), &self.quotas_made);
        if !alterations.is_empty() {
            let b = self.broker.clone();
            let n = alterations.len();
            self.rt
                .block_on(async move { b.sync_client_quotas(alterations).await })?;
            tracing::info!(link = %self.link.name, entities = n, "client quotas synced from the source");
        }
        for k in &removed {
            self.quotas_made.remove(k);
        }
        self.quotas_made.extend(set);
        Ok(())
    }

    /// Adds, as mirror topics, the source topics the link's patterns match.
    fn discover(&mut self, image: &MetaImage) -> Result<(), String> {
        if self.link.topic_patterns.is_empty() {
            return Ok(());
        }
        let md = self
            .consumer
            .fetch_metadata(None, SOURCE_REQUEST_TIMEOUT)
            .map_err(|e| format!("source metadata: {e}"))?;
        let mut new = Vec::new();
        for p in &self.link.topic_patterns {
            let Ok(re) = Regex::new(&format!("^(?:{})$", p.regex)) else {
                continue;
            };
            for t in md.topics() {
                let name = t.name();
                if name.starts_with("__") || !re.is_match(name) {
                    continue;
                }
                let es_name = format!("{}{name}", p.prefix);
                if image.mirror_topics.contains_key(&es_name) || image.topics.contains_key(&es_name)
                {
                    continue;
                }
                new.push(MirrorTopic {
                    topic: es_name,
                    link: self.link.name.clone(),
                    source_topic: name.to_string(),
                    state: MirrorState::Active,
                    promoted_ms: None,
                    source_topic_id: None,
                });
            }
        }
        if new.is_empty() {
            return Ok(());
        }
        tracing::info!(link = %self.link.name, topics = new.len(), "new source topics match the link's patterns");
        let broker = self.broker.clone();
        self.rt
            .block_on(async move { broker.put_mirror_topics(new).await })
            .map_err(|e| format!("adding mirror topics: {}", e.message))
    }

    /// Whether `mt`'s source topic is still the one it first followed, by
    /// its id in `seen` (`None`: the source has no ids, not checked).
    /// Records the id when none is yet. An error when it is another topic
    /// now (the recreation reason) or its id could not be read or
    /// recorded; a topic the source does not have is left to
    /// [`Worker::follow_topic`] to report.
    fn check_id(
        &mut self,
        mt: &MirrorTopic,
        seen: Option<&HashMap<String, Seen>>,
    ) -> Result<(), String> {
        let Some(seen) = seen else {
            return Ok(());
        };
        let recorded = mt
            .source_topic_id
            .clone()
            .or_else(|| self.recorded.get(&mt.topic).cloned());
        let now = match seen.get(&mt.source_topic) {
            Some(Seen::Id(now)) => now,
            Some(Seen::Failed(code)) => {
                return Err(format!(
                    "source topic {}: the source did not give its metadata (error {code})",
                    mt.source_topic
                ))
            }
            Some(Seen::Absent | Seen::NoId) | None => {
                if let Some(id) = recorded {
                    self.recorded.insert(mt.topic.clone(), id);
                }
                return Ok(());
            }
        };
        match recorded {
            Some(old) if old == *now => {
                self.recorded.insert(mt.topic.clone(), old);
                Ok(())
            }
            Some(old) => {
                let why = ids::recreated(&mt.source_topic, &old, now);
                self.recorded.insert(mt.topic.clone(), old);
                Err(why)
            }
            None => {
                // The entry as it is now (not as this refresh's image has
                // it), so that a pause proposed since is kept.
                let current = self
                    .broker
                    .image()
                    .and_then(|i| i.mirror_topics.get(&mt.topic).cloned())
                    .filter(|c| c.state == MirrorState::Active)
                    .ok_or_else(|| format!("{} is no longer an active mirror topic", mt.topic))?;
                let with_id = MirrorTopic {
                    source_topic_id: Some(now.clone()),
                    ..current
                };
                let broker = self.broker.clone();
                self.rt
                    .block_on(async move { broker.put_mirror_topics(vec![with_id]).await })
                    .map_err(|e| format!("recording the source topic's id: {}", e.message))?;
                tracing::info!(topic = %mt.topic, source_topic = %mt.source_topic, id = %now, "source topic id recorded");
                self.recorded.insert(mt.topic.clone(), now.clone());
                Ok(())
            }
        }
    }

    /// Creates, grows and configures `mt`'s es topic after its source; adds
    /// the partitions this node leads to `want` with the offset each
    /// resumes at. The source's partition count.
    fn follow_topic(
        &mut self,
        image: &MetaImage,
        mt: &MirrorTopic,
        want: &mut BTreeMap<(String, i32), (String, u64)>,
    ) -> Result<i32, String> {
        let md = self
            .consumer
            .fetch_metadata(Some(&mt.source_topic), SOURCE_REQUEST_TIMEOUT)
            .map_err(|e| format!("source metadata: {e}"))?;
        let Some(t) = md.topics().iter().find(|t| t.name() == mt.source_topic) else {
            return Err(format!("source topic {} not found", mt.source_topic));
        };
        if let Some(e) = t.error() {
            if e == rdkafka::types::RDKafkaRespErr::RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART {
                return Err(format!(
                    "source topic {} does not exist (deleted on the source?); the mirror topic keeps what it copied",
                    mt.source_topic
                ));
            }
            return Err(format!("source topic {}: {e:?}", mt.source_topic));
        }
        let n = i32::try_from(t.partitions().len()).unwrap_or(i32::MAX);
        if n == 0 {
            return Err(format!(
                "source topic {} has no partitions",
                mt.source_topic
            ));
        }
        let configs = topics::source_configs(&self.rt, &self.admin, &mt.source_topic)?;
        topics::ensure_topic(&self.rt, &self.broker, &mt.topic, n, configs)?;
        let Some(info) = image.topics.get(&mt.topic) else {
            // Created just now: assigned at the next refresh, once the
            // metadata has it.
            self.schedule.refresh_now(Instant::now());
            return Ok(n);
        };
        for (p, pi) in info.partitions.iter().enumerate() {
            let p = i32::try_from(p).unwrap_or(i32::MAX);
            if pi.leader != self.broker.node_id() || p >= n {
                continue;
            }
            let Some(storage) = local_partition(&self.broker, &mt.topic, p) else {
                continue;
            };
            let (low, high) = self
                .consumer
                .fetch_watermarks(&mt.source_topic, p, SOURCE_REQUEST_TIMEOUT)
                .map_err(|e| format!("source offsets of {}-{p}: {e}", mt.source_topic))?;
            self.shared.set_source_hw(&mt.topic, p, high);
            let low = u64::try_from(low).unwrap_or(0);
            let high = u64::try_from(high).unwrap_or(0);
            let mut end = storage.log_end_offset();
            if end < low {
                if storage.log_start_offset() == end {
                    // Nothing copied yet: start where the source starts.
                    storage
                        .truncate_fully_and_start_at(low)
                        .map_err(|e| e.to_string())?;
                } else {
                    tracing::error!(topic = %mt.topic, partition = p, from = end, to = low, "the source deleted offsets before they were copied; the mirror continues at the source's log start");
                    close_gap(&storage, low)?;
                    self.shared.skipped(&mt.topic, p, low - end);
                    self.shared.partition_error(
                        &mt.topic,
                        p,
                        Some(format!(
                            "the source deleted offsets {end} to {} before they were copied (retention or DeleteRecords); the gap is closed and copying continues at {low}",
                            low - 1
                        )),
                    );
                }
                // librdkafka stopped fetching it at the old end (offset
                // out of range): it must be assigned again.
                self.reassign_all = true;
                end = low;
            } else if end > high {
                self.shared.partition_error(
                    &mt.topic,
                    p,
                    Some(format!(
                        "es holds offsets up to {} but the source's partition ends at {high}: the source lost records es copied; copying resumes when the source passes {end}",
                        end - 1
                    )),
                );
            } else if end == high {
                // Nothing to copy: whatever stopped it is over.
                self.shared.partition_error(&mt.topic, p, None);
            }
            want.insert((mt.topic.clone(), p), (mt.source_topic.clone(), end));
        }
        Ok(n)
    }

    /// Assigns exactly `want` (each at its es log end) if it changed, or
    /// if a partition must be assigned again ([`Worker::reassign_all`]).
    fn reassign(&mut self, want: BTreeMap<(String, i32), (String, u64)>) -> Result<(), String> {
        let same = want.len() == self.assigned.len()
            && want
                .iter()
                .all(|(k, (src, _))| self.assigned.get(k) == Some(src));
        if same && !std::mem::take(&mut self.reassign_all) {
            return Ok(());
        }
        self.reassign_all = false;
        self.flush(None);
        let mut tpl = TopicPartitionList::new();
        self.floors.clear();
        self.by_source.clear();
        self.assigned.clear();
        for ((topic, p), (src, _)) in &want {
            // The log end now, after the flush: where copying resumes.
            let end = local_partition(&self.broker, topic, *p)
                .map(|s| s.log_end_offset())
                .unwrap_or(0);
            let offset = i64::try_from(end).unwrap_or(i64::MAX);
            tpl.add_partition_offset(src, *p, Offset::Offset(offset))
                .map_err(|e| e.to_string())?;
            self.floors.insert((topic.clone(), *p), end);
            self.by_source.insert(src.clone(), topic.clone());
            self.assigned.insert((topic.clone(), *p), src.clone());
        }
        self.consumer
            .assign(&tpl)
            .map_err(|e| format!("assigning source partitions: {e}"))?;
        tracing::info!(link = %self.link.name, partitions = self.assigned.len(), "mirror assignment");
        Ok(())
    }

    /// Polls the source for up to [`GATHER`] and appends what came.
    fn poll_and_copy(&mut self) {
        if self.assigned.is_empty() {
            std::thread::sleep(POLL);
            return;
        }
        let until = Instant::now() + GATHER;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            match self.consumer.poll(left) {
                None => break,
                Some(Ok(m)) => {
                    use rdkafka::message::Message;
                    let Some(topic) = self.by_source.get(m.topic()).cloned() else {
                        continue;
                    };
                    let floor = self
                        .floors
                        .get(&(topic.clone(), m.partition()))
                        .copied()
                        .unwrap_or(0);
                    if self.gather.push(&topic, &m, floor) {
                        break;
                    }
                }
                Some(Err(KafkaError::PartitionEOF(_))) => {}
                Some(Err(e)) => {
                    tracing::warn!(link = %self.link.name, error = %e, "source consumer error");
                    self.shared
                        .link_error(&self.link.name, Some(format!("source: {e}")));
                    if matches!(
                        e.rdkafka_error_code(),
                        Some(
                            RDKafkaErrorCode::AutoOffsetReset | RDKafkaErrorCode::OffsetOutOfRange
                        )
                    ) {
                        // librdkafka stopped fetching a partition (which one
                        // its error does not say): the next refresh looks at
                        // the source's log starts and assigns again.
                        self.reassign_all = true;
                    }
                    self.schedule.source_failed(Instant::now());
                    break;
                }
            }
        }
        // Before the append: the high watermarks of the fetch responses
        // the records came from, so a reader never sees es's end past the
        // source's high watermark.
        self.note_watermarks();
        self.flush(None);
    }

    /// Takes the source high watermark of each partition with records
    /// to append, and every [`WATERMARKS`] of every assigned partition,
    /// from librdkafka's last fetch response for it.
    fn note_watermarks(&mut self) {
        let all = self.last_watermarks.elapsed() >= WATERMARKS;
        if all {
            self.last_watermarks = Instant::now();
        }
        let mut seen: Vec<(&str, i32, i64)> = Vec::new();
        let mut note = |topic, p, src: &str| {
            if let Some((_, high)) = source::cached_watermarks(&self.consumer, src, p) {
                seen.push((topic, p, high));
            }
        };
        if all {
            for ((topic, p), src) in &self.assigned {
                note(topic.as_str(), *p, src);
            }
        } else {
            // One key buffer for every lookup, not a String per partition.
            let mut key = (String::new(), 0);
            for (topic, p) in self.gather.waiting() {
                key.0.clear();
                key.0.push_str(topic);
                key.1 = p;
                if let Some(src) = self.assigned.get(&key) {
                    note(topic, p, src);
                }
            }
        }
        self.shared.set_source_hws(&seen);
    }

    /// Appends what is gathered (for `topic` only, when given), what
    /// [`Worker::verify_gathered`] keeps.
    fn flush(&mut self, topic: Option<&str>) {
        if !self.gather.has(topic) {
            return;
        }
        self.verify_gathered(topic);
        for ((t, p), r) in self.gather.flush(&self.broker, topic) {
            match r {
                Ok(c) => {
                    self.shared.copied(&t, p, c);
                    if let Some(s) = local_partition(&self.broker, &t, p) {
                        self.floors.insert((t.clone(), p), s.log_end_offset());
                    }
                }
                Err(e) => {
                    tracing::warn!(topic = %t, partition = p, error = %e, "mirror append failed; the partition is assigned again at its log end");
                    self.shared.topic_error(&t, Some(e));
                    self.assigned.clear();
                    self.schedule.refresh_now(Instant::now());
                }
            }
        }
    }

    /// Asks the source, after the records gathered (for `topic` only, when
    /// given) were polled, whether their source topics still have the ids
    /// recorded: if so they had them when the records were fetched (an id
    /// is never given again). A topic that is another one now, is gone, or
    /// whose id could not be read has its records dropped, not appended;
    /// every partition is then assigned again at its log end by the next
    /// refresh, which does not assign a topic whose source changed.
    fn verify_gathered(&mut self, topic: Option<&str>) {
        let mut waiting: BTreeMap<String, (String, String)> = BTreeMap::new();
        for (t, p) in self.gather.waiting() {
            if topic.is_some_and(|x| x != t) || waiting.contains_key(t) {
                continue;
            }
            let src = self.assigned.get(&(t.to_string(), p));
            if let (Some(src), Some(id)) = (src, self.recorded.get(t)) {
                waiting.insert(t.to_string(), (src.clone(), id.clone()));
            }
        }
        if waiting.is_empty() {
            return;
        }
        let names: BTreeSet<&str> = waiting.values().map(|(src, _)| src.as_str()).collect();
        let names: Vec<&str> = names.into_iter().collect();
        let (bad, source_down) = match self.ids.read(&self.link, &names) {
            Ok(None) => return,
            Ok(Some(seen)) => {
                let bad: Vec<(String, String)> = waiting
                    .iter()
                    .filter_map(|(t, (src, id))| {
                        let why = match seen.get(src) {
                            Some(Seen::Id(now)) if now == id => return None,
                            Some(Seen::NoId) => return None,
                            Some(Seen::Id(now)) => ids::recreated(src, id, now),
                            Some(Seen::Absent) | None => format!(
                                "source topic {src} does not exist (deleted on the source?); the mirror topic keeps what it copied"
                            ),
                            Some(Seen::Failed(code)) => format!(
                                "source topic {src}: the source did not give its id (error {code}); nothing is appended until it does"
                            ),
                        };
                        Some((t.clone(), why))
                    })
                    .collect();
                (bad, false)
            }
            Err(e) => {
                let why = format!(
                    "{e}; the records fetched are appended once the source topic's id is read"
                );
                (
                    waiting.keys().map(|t| (t.clone(), why.clone())).collect(),
                    true,
                )
            }
        };
        if bad.is_empty() {
            return;
        }
        for (t, why) in &bad {
            tracing::warn!(topic = %t, reason = %why, "mirror records not appended");
            self.gather.discard(t);
            self.shared.topic_error(t, Some(why.clone()));
        }
        self.assigned.clear();
        if source_down {
            self.schedule.source_failed(Instant::now());
        } else {
            self.schedule.refresh_now(Instant::now());
        }
    }

    fn sync_groups(&mut self, topics: &[(MirrorTopic, i32)]) -> Result<(), String> {
        if topics.is_empty() || (self.link.groups.is_empty() && self.link.group_patterns.is_empty())
        {
            return Ok(());
        }
        let groups = groups_of(&self.link, &self.consumer)?;
        for (g, r) in self
            .groups
            .sync(&self.rt, &self.broker, &self.link, &groups, topics)
        {
            if let Err(e) = r {
                tracing::debug!(group = %g, reason = %e, "group offsets not copied");
            }
        }
        Ok(())
    }

    fn command(&mut self, cmd: Command) {
        match cmd {
            Command::Promote {
                topic,
                max_lag,
                reply,
            } => {
                let r = self.promote(&topic, max_lag);
                if r.is_err() {
                    self.promoting.remove(&topic);
                    self.schedule.refresh_now(Instant::now());
                }
                let _ = reply.send(r);
            }
            Command::Resume { topic } => {
                self.promoting.remove(&topic);
                self.schedule.refresh_now(Instant::now());
            }
        }
    }

    /// Promotion's part that needs the source: every partition of `topic`
    /// this node leads must be within `max_lag` of the source's high
    /// watermark, and when it is not at it, a probe from its log end must
    /// find no record to copy (only markers or aborted records are left).
    /// Then copying stops, the group offsets are copied one last time and
    /// each log end moves to the source's, so that new records continue at
    /// the offsets consumers' committed offsets point to. A topic whose
    /// source topic was deleted and created again is promoted as it is:
    /// the source's offsets and groups are another topic's.
    fn promote(&mut self, topic: &str, max_lag: u64) -> Result<Vec<PartitionStatus>, String> {
        let image = self.broker.image().ok_or("no metadata yet")?;
        let mt = image
            .mirror_topics
            .get(topic)
            .filter(|m| m.link == self.link.name && m.state != MirrorState::Promoted)
            .cloned()
            .ok_or_else(|| format!("{topic} is not a mirror topic of link {}", self.link.name))?;
        let info = image
            .topics
            .get(topic)
            .ok_or("the topic does not exist yet")?;
        self.flush(Some(topic));
        let recreated = self.source_recreated(&mt)?;
        if let Some(why) = &recreated {
            tracing::info!(%topic, reason = %why, "promoting what was copied, as it is");
        }
        let mut parts = Vec::new();
        for (p, pi) in info.partitions.iter().enumerate() {
            let p = i32::try_from(p).unwrap_or(i32::MAX);
            if pi.leader != self.broker.node_id() {
                return Err(format!(
                    "{topic}-{p} is led by node {}: promote there",
                    pi.leader
                ));
            }
            let storage = local_partition(&self.broker, topic, p).ok_or("partition not open")?;
            if recreated.is_some() {
                let end = storage.log_end_offset();
                parts.push((p, storage, end, end, false));
                continue;
            }
            let (_, high) = self
                .consumer
                .fetch_watermarks(&mt.source_topic, p, SOURCE_REQUEST_TIMEOUT)
                .map_err(|e| format!("source offsets of {}-{p}: {e}", mt.source_topic))?;
            let high = u64::try_from(high).unwrap_or(0);
            let end = storage.log_end_offset();
            let lag = high.saturating_sub(end);
            let copyable = lag > 0 && self.probe(&mt.source_topic, p, end)?;
            // Only records left to copy hold a promotion back: offsets
            // past the last one (markers, aborted records) are not copied.
            if copyable && (max_lag == 0 || lag > max_lag) {
                return Err(format!(
                    "{topic}-{p} is {lag} offsets behind its source (high watermark {high}, mirrored to {end})"
                ));
            }
            parts.push((p, storage, high, end, copyable));
        }
        // Caught up: stop copying this topic.
        self.promoting.insert(topic.to_string());
        let keep: BTreeMap<(String, i32), (String, u64)> = self
            .assigned
            .iter()
            .filter(|((t, _), _)| t != topic)
            .map(|(k, src)| (k.clone(), (src.clone(), 0)))
            .collect();
        self.reassign(keep)?;
        let n = i32::try_from(info.partitions.len()).unwrap_or(i32::MAX);
        if recreated.is_none() {
            self.sync_groups(&[(mt.clone(), n)])?;
        }
        let mut out = Vec::new();
        for (p, storage, high, end, copyable) in parts {
            if !copyable && high > end {
                close_gap(&storage, high)?;
            }
            let now = storage.log_end_offset();
            out.push(PartitionStatus {
                partition: p,
                source_high_watermark: if recreated.is_some() {
                    -1
                } else {
                    i64::try_from(high).unwrap_or(-1)
                },
                mirrored_end: i64::try_from(now).unwrap_or(-1),
                lag: i64::try_from(high.saturating_sub(now)).unwrap_or(-1),
                ..PartitionStatus::default()
            });
        }
        Ok(out)
    }

    /// Why `mt`'s source topic is another topic than the one it followed
    /// (`None`: it is the same, has no id, or none was recorded).
    fn source_recreated(&mut self, mt: &MirrorTopic) -> Result<Option<String>, String> {
        let Some(old) = mt
            .source_topic_id
            .clone()
            .or_else(|| self.recorded.get(&mt.topic).cloned())
        else {
            return Ok(None);
        };
        let seen = self.ids.read(&self.link, &[mt.source_topic.as_str()])?;
        Ok(match seen.and_then(|mut s| s.remove(&mt.source_topic)) {
            Some(Seen::Id(now)) if now != old => Some(ids::recreated(&mt.source_topic, &old, &now)),
            _ => None,
        })
    }

    /// Whether a read_committed read of the source from `from` finds a
    /// record before the partition's end.
    fn probe(&self, source_topic: &str, p: i32, from: u64) -> Result<bool, String> {
        let c = source::consumer(&self.link, true).map_err(|e| e.to_string())?;
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(
            source_topic,
            p,
            Offset::Offset(i64::try_from(from).unwrap_or(i64::MAX)),
        )
        .map_err(|e| e.to_string())?;
        c.assign(&tpl).map_err(|e| e.to_string())?;
        let until = Instant::now() + PROBE_TIMEOUT;
        while Instant::now() < until {
            match c.poll(POLL) {
                Some(Ok(_)) => return Ok(true),
                Some(Err(KafkaError::PartitionEOF(_))) => return Ok(false),
                Some(Err(e)) => return Err(format!("probing {source_topic}-{p}: {e}")),
                None => {}
            }
        }
        Err(format!(
            "probing {source_topic}-{p}: no answer from the source"
        ))
    }
}
