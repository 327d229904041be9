//! Applying the mirror entries (links and mirror topics, see
//! [`crate::mirror`]) to the image: each checked where it is applied, so a
//! proposer's stale view cannot break the rules (a link in use is not
//! deleted; a promoted topic stays promoted; an existing ordinary topic
//! does not become a mirror; a recorded source topic id is kept by an
//! entry without one and never replaced by another).

use super::{MetaEvent, MetaImage};
use crate::mirror::{
    MirrorLink, MirrorState, MirrorTopic, LINKS_MAX, MIRROR_TOPICS_MAX, SOURCE_TOPIC_ID_BYTES_MAX,
};
use crate::records::{code, ItemResult, MetaResponse};

impl MetaImage {
    pub(super) fn put_mirror_link(
        &mut self,
        link: &MirrorLink,
        ev: &mut Vec<MetaEvent>,
    ) -> MetaResponse {
        let refused = |c: i16, m: String| MetaResponse::Items {
            results: vec![ItemResult::err(&link.name, c, m)],
        };
        if let Err(why) = link.validate() {
            return refused(code::INVALID_REQUEST, why);
        }
        if !self.mirror_links.contains_key(&link.name) && self.mirror_links.len() >= LINKS_MAX {
            return refused(
                code::INVALID_REQUEST,
                format!("es keeps at most {LINKS_MAX} mirror links"),
            );
        }
        if self.mirror_links.get(&link.name) != Some(link) {
            self.mirror_links.insert(link.name.clone(), link.clone());
            ev.push(MetaEvent::Mirrors);
        }
        MetaResponse::Items {
            results: vec![ItemResult::ok(&link.name)],
        }
    }

    pub(super) fn delete_mirror_link(
        &mut self,
        name: &str,
        ev: &mut Vec<MetaEvent>,
    ) -> MetaResponse {
        let result = if !self.mirror_links.contains_key(name) {
            ItemResult::err(
                name,
                code::RESOURCE_NOT_FOUND,
                format!("no mirror link {name}"),
            )
        } else {
            let users: Vec<&str> = self
                .mirror_topics
                .values()
                .filter(|t| t.link == name && t.state != MirrorState::Promoted)
                .map(|t| t.topic.as_str())
                .collect();
            if users.is_empty() {
                self.mirror_links.remove(name);
                ev.push(MetaEvent::Mirrors);
                ItemResult::ok(name)
            } else {
                ItemResult::err(
                    name,
                    code::INVALID_REQUEST,
                    format!(
                        "mirror link {name} is used by mirror topics {}: promote or delete them first",
                        users.join(", ")
                    ),
                )
            }
        };
        MetaResponse::Items {
            results: vec![result],
        }
    }

    pub(super) fn put_mirror_topics(
        &mut self,
        topics: &[MirrorTopic],
        ev: &mut Vec<MetaEvent>,
    ) -> MetaResponse {
        let mut results = Vec::with_capacity(topics.len());
        let mut changed = false;
        for t in topics {
            let refused = |c: i16, m: String| ItemResult::err(&t.topic, c, m);
            let old = self.mirror_topics.get(&t.topic);
            let t = &t.with_id_of(old);
            let result = match old {
                Some(o) if o == t => ItemResult::ok(&t.topic),
                _ if t
                    .source_topic_id
                    .as_ref()
                    .is_some_and(|id| id.len() > SOURCE_TOPIC_ID_BYTES_MAX) =>
                {
                    refused(
                        code::INVALID_REQUEST,
                        format!("a source topic id is at most {SOURCE_TOPIC_ID_BYTES_MAX} bytes"),
                    )
                }
                Some(o)
                    if o.source_topic_id.is_some() && o.source_topic_id != t.source_topic_id =>
                {
                    refused(
                        code::INVALID_REQUEST,
                        format!(
                            "topic {} mirrors source topic {} of id {}: it cannot follow another topic",
                            t.topic,
                            o.source_topic,
                            o.source_topic_id.as_deref().unwrap_or("")
                        ),
                    )
                }
                Some(o) if o.state == MirrorState::Promoted => refused(
                    code::INVALID_REQUEST,
                    format!("topic {} was promoted: it is no longer a mirror", t.topic),
                ),
                Some(o) if o.link != t.link || o.source_topic != t.source_topic => refused(
                    code::INVALID_REQUEST,
                    format!(
                        "topic {} mirrors {} through link {}",
                        t.topic, o.source_topic, o.link
                    ),
                ),
                None if self.topics.contains_key(&t.topic) => refused(
                    code::TOPIC_ALREADY_EXISTS,
                    format!(
                        "Topic '{}' already exists and is not a mirror topic.",
                        t.topic
                    ),
                ),
                None if t.state != MirrorState::Active => refused(
                    code::INVALID_REQUEST,
                    format!("topic {} is not a mirror topic", t.topic),
                ),
                None if !self.mirror_links.contains_key(&t.link) => refused(
                    code::RESOURCE_NOT_FOUND,
                    format!("no mirror link {}", t.link),
                ),
                None if self.mirror_topics.len() >= MIRROR_TOPICS_MAX => refused(
                    code::INVALID_REQUEST,
                    format!("es keeps at most {MIRROR_TOPICS_MAX} mirror topics"),
                ),
                _ => {
                    self.mirror_topics.insert(t.topic.clone(), t.clone());
                    changed = true;
                    ItemResult::ok(&t.topic)
                }
            };
            results.push(result);
        }
        if changed {
            ev.push(MetaEvent::Mirrors);
        }
        MetaResponse::Items { results }
    }
}

#[cfg(test)]
mod tests {
    use crate::image::MetaImage;
    use crate::mirror::{MirrorLink, MirrorState, MirrorTopic};
    use crate::records::{code, MetaRequest, MetaResponse};

    fn link(name: &str) -> MirrorLink {
        MirrorLink {
            name: name.into(),
            source_bootstrap: "k:9092".into(),
            source_config: Default::default(),
            topic_patterns: Vec::new(),
            groups: Vec::new(),
            group_patterns: Vec::new(),
            group_sync_interval_ms: 5_000,
            sync_acls: false,
            sync_quotas: false,
            created_ms: 0,
        }
    }

    fn mt(topic: &str, state: MirrorState) -> MirrorTopic {
        MirrorTopic {
            topic: topic.into(),
            link: "src".into(),
            source_topic: topic.into(),
            state,
            promoted_ms: None,
            source_topic_id: None,
        }
    }

    fn codes(r: MetaResponse) -> Vec<i16> {
        match r {
            MetaResponse::Items { results } => results.iter().map(|r| r.error_code).collect(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn links_and_mirror_topics_follow_their_rules() {
        let mut img = MetaImage::default();
        let put = |img: &mut MetaImage, topics: Vec<MirrorTopic>| {
            codes(img.apply(1, &MetaRequest::PutMirrorTopics { topics }).0)
        };
        assert_eq!(
            put(&mut img, vec![mt("a", MirrorState::Active)]),
            vec![code::RESOURCE_NOT_FOUND]
        );
        assert_eq!(
            codes(
                img.apply(1, &MetaRequest::PutMirrorLink { link: link("src") })
                    .0
            ),
            vec![0]
        );
        assert_eq!(put(&mut img, vec![mt("a", MirrorState::Active)]), vec![0]);
        // In use: the link stays.
        let del = |img: &mut MetaImage| {
            codes(
                img.apply(1, &MetaRequest::DeleteMirrorLink { name: "src".into() })
                    .0,
            )
        };
        assert_eq!(del(&mut img), vec![code::INVALID_REQUEST]);
        // The worker records the source topic's id; a later entry without
        // one keeps it, one with another id is refused.
        let with_id = |id: &str| MirrorTopic {
            source_topic_id: Some(id.into()),
            ..mt("a", MirrorState::Active)
        };
        assert_eq!(put(&mut img, vec![with_id("old")]), vec![0]);
        assert_eq!(
            put(&mut img, vec![with_id("new")]),
            vec![code::INVALID_REQUEST]
        );
        assert_eq!(
            put(&mut img, vec![with_id(&"x".repeat(65))]),
            vec![code::INVALID_REQUEST]
        );
        assert_eq!(put(&mut img, vec![mt("a", MirrorState::Paused)]), vec![0]);
        assert_eq!(
            img.mirror_topics["a"].source_topic_id.as_deref(),
            Some("old")
        );
        assert_eq!(put(&mut img, vec![mt("a", MirrorState::Promoted)]), vec![0]);
        // Promotion is final.
        assert_eq!(
            put(&mut img, vec![mt("a", MirrorState::Active)]),
            vec![code::INVALID_REQUEST]
        );
        assert_eq!(del(&mut img), vec![0]);
        assert_eq!(del(&mut img), vec![code::RESOURCE_NOT_FOUND]);
        assert_eq!(img.mirror_topics["a"].state, MirrorState::Promoted);
    }
}
