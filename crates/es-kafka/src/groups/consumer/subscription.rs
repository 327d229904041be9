//! What the members of a consumer group subscribe to: the consumer
//! protocol's embedded subscription format (which classic members carry),
//! SubscribedTopicRegex compilation (whole-name matching, bounded in size)
//! and its resolution against the topics, once per distinct regex and
//! again when the set of topics changes, and the subscription metadata (the
//! subscribed topics that exist, with their ids and partition counts) whose
//! change bumps the group epoch.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use bytes::{Buf, Bytes};
use kafka_protocol::messages::ConsumerProtocolSubscription;
use kafka_protocol::protocol::Decodable;
use regex::{Regex, RegexBuilder};
use uuid::Uuid;

use super::{ConsumerGroup, Member, TopicView};

/// The topics of a serialized `ConsumerProtocolSubscription` (a version
/// prefix, then the body), read with the v0 layout every version starts
/// with, as Kafka does. `None` when it does not parse.
pub fn subscription_topics(metadata: &Bytes) -> Option<Vec<String>> {
    let mut buf = metadata.clone();
    if buf.remaining() < 2 {
        return None;
    }
    let _version = buf.get_i16();
    // The bytes are the client's: bound every count before the crate sizes
    // a Vec by it (codec::shape).
    let shape = crate::codec::shape::data("ConsumerProtocolSubscription")?;
    crate::codec::shape::check(shape, 0, &buf).ok()?;
    let s = ConsumerProtocolSubscription::decode(&mut buf, 0).ok()?;
    Some(s.topics.into_iter().map(|t| t.to_string()).collect())
}

/// Most bytes the compiled form of one subscription regex may take, and
/// most bytes of its lazy DFA cache (the `regex` crate's `size_limit` and
/// `dfa_size_limit`; its defaults are 10 MiB and 2 MiB). Topic-name patterns
/// are small; this bounds what one member's heartbeat makes the group hold.
pub const REGEX_COMPILED_BYTES_MAX: usize = 1 << 20;

/// Compiles a SubscribedTopicRegex for whole-name matching (RE2/J's
/// `matches()`), or explains why it is not a valid regular expression.
pub fn compile_topic_regex(pattern: &str) -> Result<Regex, String> {
    let build = |p: &str| {
        RegexBuilder::new(p)
            .size_limit(REGEX_COMPILED_BYTES_MAX)
            .dfa_size_limit(REGEX_COMPILED_BYTES_MAX)
            .build()
            .map_err(|e| {
                // The crate's syntax errors span several lines.
                e.to_string()
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
    };
    // The pattern alone first: wrapping an unbalanced one such as `a)|(b`
    // would make it valid.
    build(pattern)?;
    build(&format!("^(?:{pattern})$"))
}

impl ConsumerGroup {
    /// Every topic some member subscribes to, by name or through its regex.
    pub fn subscribed_topic_names(&self) -> HashSet<String> {
        let mut names: HashSet<String> = self
            .members
            .values()
            .flat_map(|m| m.subscribed.iter().cloned())
            .collect();
        for m in self.members.values() {
            names.extend(self.regex_topics(m).iter().cloned());
        }
        names
    }

    /// The topics the member's regex matched when last resolved.
    fn regex_topics(&self, m: &Member) -> &BTreeSet<String> {
        static NONE: BTreeSet<String> = BTreeSet::new();
        m.regex
            .as_ref()
            .and_then(|r| self.regexes.get(r))
            .and_then(|r| r.topics.as_ref())
            .unwrap_or(&NONE)
    }

    /// The member's whole subscription: its topic names and the topics its
    /// regex matches, sorted and de-duplicated.
    pub(super) fn member_subscription(&self, m: &Member) -> Vec<String> {
        let by_regex = self.regex_topics(m);
        if by_regex.is_empty() {
            return m.subscribed.clone();
        }
        let all: BTreeSet<&String> = m.subscribed.iter().chain(by_regex).collect();
        all.into_iter().cloned().collect()
    }

    /// Forgets the regexes no member subscribes with any more.
    pub(super) fn drop_unused_regexes(&mut self) {
        if self.regexes.is_empty() {
            return;
        }
        let used: HashSet<&str> = self
            .members
            .values()
            .filter_map(|m| m.regex.as_deref())
            .collect();
        self.regexes.retain(|r, _| used.contains(r.as_str()));
        if self.regexes.is_empty() {
            self.regex_generation = None;
        }
    }

    /// Resolves the regexes not resolved yet, or all of them when the set of
    /// topics changed since the last resolution. Returns whether the topics
    /// of some regex changed (the group epoch must then be bumped, as Kafka
    /// does when a refresh changes a resolved regex).
    pub(super) fn resolve_regexes(&mut self, topics: &dyn TopicView) -> bool {
        if self.regexes.is_empty() {
            return false;
        }
        // The generation before the names: a topic created in between makes
        // the next heartbeat resolve once more, never once too few.
        let generation = topics.generation();
        let stale = self.regex_generation != Some(generation);
        if !stale && self.regexes.values().all(|r| r.topics.is_some()) {
            return false;
        }
        let names = topics.names();
        let mut changed = false;
        for (pattern, r) in &mut self.regexes {
            if !stale && r.topics.is_some() {
                continue;
            }
            let matched: BTreeSet<String> = names
                .iter()
                .filter(|n| r.regex.is_match(n))
                .cloned()
                .collect();
            if r.topics.as_ref() != Some(&matched) {
                tracing::debug!(group = %self.group_id, regex = %pattern, topics = matched.len(), "resolved subscription regex");
                changed = true;
                r.topics = Some(matched);
            }
        }
        self.regex_generation = Some(generation);
        changed
    }

    pub(super) fn compute_subscription_metadata(
        &self,
        topics: &dyn TopicView,
    ) -> BTreeMap<String, (Uuid, i32)> {
        self.subscribed_topic_names()
            .into_iter()
            .filter_map(|t| topics.by_name(&t).map(|v| (t, v)))
            .collect()
    }
}
