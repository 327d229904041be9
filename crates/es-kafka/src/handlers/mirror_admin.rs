//! es's own request for mirror links and mirror topics (`es-broker mirror
//! ...`), framed as the API-keys request is ([`super::api_keys`]): api key
//! [`ES_MIRROR`], version 0, a JSON [`MirrorRequest`], a JSON
//! [`MirrorResponse`]. Changes need ALTER on the cluster, reading DESCRIBE
//! (Kafka's Cluster Linking asks the same of its link APIs). Links and
//! mirror topics are metadata entries, so every node knows them; status
//! and promotion go to the mirror service of this node
//! ([`crate::mirror::MirrorControl`]). A link's secret settings are never
//! answered.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use es_auth::acl::AclOperation;
use es_meta::mirror::{MirrorLink, MirrorState, MirrorTopic, TopicPattern};
use es_meta::records::{MetaRequest, MetaResponse};
use serde::{Deserialize, Serialize};

use super::api_keys::{allowed_on_cluster, json_body, respond_json};
use super::Client;
use crate::broker::{AdminError, Broker};
use crate::errors::{code, ResponseError};
use crate::mirror::TopicStatus;

/// The api key of es's mirror request.
pub const ES_MIRROR: i16 = 32_001;
/// Largest JSON body accepted.
pub const MIRROR_REQUEST_BYTES_MAX: usize = 256 * 1024;
/// Longest a promotion may be asked to wait.
pub const PROMOTE_TIMEOUT_MS_MAX: u64 = 3_600_000;

/// What the command asks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum MirrorRequest {
    /// Creates a link (or, with `replace`, changes one).
    LinkCreate {
        link: MirrorLink,
        #[serde(default)]
        replace: bool,
    },
    LinkList,
    LinkDelete {
        name: String,
    },
    /// Mirrors one source topic (`source_topic`, default `topic`) as
    /// `topic`, or every source topic matching `pattern` (now and later),
    /// named `prefix` + its source name.
    TopicCreate {
        link: String,
        #[serde(default)]
        topic: Option<String>,
        #[serde(default)]
        source_topic: Option<String>,
        #[serde(default)]
        pattern: Option<String>,
        #[serde(default)]
        prefix: String,
    },
    /// The groups whose offsets the link copies (replacing the lists).
    Groups {
        link: String,
        #[serde(default)]
        groups: Vec<String>,
        #[serde(default)]
        patterns: Vec<String>,
        #[serde(default)]
        interval_ms: Option<u64>,
    },
    Status {
        #[serde(default)]
        topic: Option<String>,
    },
    Pause {
        topic: String,
    },
    Resume {
        topic: String,
    },
    /// Promotes `topics` (every mirror topic with `all`).
    Promote {
        #[serde(default)]
        topics: Vec<String>,
        #[serde(default)]
        all: bool,
        #[serde(default)]
        max_lag: u64,
        timeout_ms: u64,
    },
}

/// The answer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MirrorResponse {
    pub error_code: i16,
    pub error_message: Option<String>,
    /// Links, secrets hidden.
    #[serde(default)]
    pub links: Vec<MirrorLink>,
    #[serde(default)]
    pub topics: Vec<TopicStatus>,
}

impl MirrorResponse {
    fn error(e: ResponseError, message: impl Into<String>) -> Self {
        MirrorResponse {
            error_code: code(e),
            error_message: Some(message.into()),
            ..MirrorResponse::default()
        }
    }

    fn from_admin(e: AdminError) -> Self {
        MirrorResponse {
            error_code: e.code,
            error_message: Some(e.message),
            ..MirrorResponse::default()
        }
    }
}

/// Answers one request frame; the response frame with its size prefix.
pub async fn handle(broker: &Arc<Broker>, client: &Client, frame: &Bytes) -> Bytes {
    let answer = answer(broker, client, frame).await;
    respond_json(frame, &answer)
}

async fn answer(broker: &Arc<Broker>, client: &Client, frame: &Bytes) -> MirrorResponse {
    let body = match json_body(frame, MIRROR_REQUEST_BYTES_MAX) {
        Ok(b) => b,
        Err((e, m)) => return MirrorResponse::error(e, m),
    };
    let req: MirrorRequest = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => return MirrorResponse::error(ResponseError::InvalidRequest, e.to_string()),
    };
    let op = match req {
        MirrorRequest::LinkList | MirrorRequest::Status { .. } => AclOperation::Describe,
        _ => AclOperation::Alter,
    };
    if !allowed_on_cluster(broker, client, op, "Mirror (es)") {
        return MirrorResponse::error(
            ResponseError::ClusterAuthorizationFailed,
            super::authz::CLUSTER_AUTHORIZATION_FAILED,
        );
    }
    let Some(image) = broker.image() else {
        return MirrorResponse::error(ResponseError::CoordinatorNotAvailable, "no metadata yet");
    };
    match req {
        MirrorRequest::LinkList => MirrorResponse {
            links: image
                .mirror_links
                .values()
                .map(MirrorLink::redacted)
                .collect(),
            ..MirrorResponse::default()
        },
        MirrorRequest::LinkCreate { link, replace } => {
            if !replace && image.mirror_links.contains_key(&link.name) {
                return MirrorResponse::error(
                    ResponseError::InvalidRequest,
                    format!("a mirror link {} exists", link.name),
                );
            }
            let name = link.name.clone();
            let r = propose(broker, MetaRequest::PutMirrorLink { link }).await;
            with_links(broker, r, &name)
        }
        MirrorRequest::LinkDelete { name } => {
            propose(broker, MetaRequest::DeleteMirrorLink { name }).await
        }
        MirrorRequest::Groups {
            link,
            groups,
            patterns,
            interval_ms,
        } => {
            let Some(mut l) = image.mirror_links.get(&link).cloned() else {
                return MirrorResponse::error(
                    ResponseError::ResourceNotFound,
                    format!("no mirror link {link}"),
                );
            };
            l.groups = groups;
            l.group_patterns = patterns;
            if let Some(i) = interval_ms {
                l.group_sync_interval_ms = i;
            }
            let r = propose(broker, MetaRequest::PutMirrorLink { link: l }).await;
            with_links(broker, r, &link)
        }
        MirrorRequest::TopicCreate {
            link,
            topic,
            source_topic,
            pattern,
            prefix,
        } => topic_create(broker, link, topic, source_topic, pattern, prefix).await,
        MirrorRequest::Pause { topic } => {
            set_state(broker, &image, topic, MirrorState::Paused).await
        }
        MirrorRequest::Resume { topic } => {
            set_state(broker, &image, topic, MirrorState::Active).await
        }
        MirrorRequest::Status { topic } => {
            let topics = match broker.mirror_control() {
                Some(c) => c.status(),
                None => image
                    .mirror_topics
                    .values()
                    .map(|t| TopicStatus {
                        topic: t.topic.clone(),
                        link: t.link.clone(),
                        source_topic: t.source_topic.clone(),
                        state: format!("{:?}", t.state).to_lowercase(),
                        error: Some("no mirror service on this node".into()),
                        partitions: Vec::new(),
                    })
                    .collect(),
            };
            MirrorResponse {
                topics: topics
                    .into_iter()
                    .filter(|t| topic.as_ref().is_none_or(|x| *x == t.topic))
                    .collect(),
                ..MirrorResponse::default()
            }
        }
        MirrorRequest::Promote {
            topics,
            all,
            max_lag,
            timeout_ms,
        } => {
            let Some(control) = broker.mirror_control() else {
                return MirrorResponse::error(
                    ResponseError::InvalidRequest,
                    "no mirror service on this node",
                );
            };
            let names: Vec<String> = if all {
                image
                    .mirror_topics
                    .values()
                    .filter(|t| t.state != MirrorState::Promoted)
                    .map(|t| t.topic.clone())
                    .collect()
            } else {
                topics
            };
            let timeout = Duration::from_millis(timeout_ms.min(PROMOTE_TIMEOUT_MS_MAX));
            let mut out = MirrorResponse::default();
            for name in names {
                match control.promote(name.clone(), max_lag, timeout).await {
                    Ok(partitions) => out.topics.push(TopicStatus {
                        topic: name,
                        state: "promoted".into(),
                        partitions,
                        ..TopicStatus::default()
                    }),
                    Err(e) => {
                        out.error_code = code(ResponseError::InvalidRequest);
                        out.error_message = Some(format!("{name}: {e}"));
                        break;
                    }
                }
            }
            out
        }
    }
}

/// Pauses or resumes a mirror topic.
async fn set_state(
    broker: &Arc<Broker>,
    image: &es_meta::image::MetaImage,
    topic: String,
    state: MirrorState,
) -> MirrorResponse {
    let Some(mut t) = image.mirror_topics.get(&topic).cloned() else {
        return MirrorResponse::error(
            ResponseError::UnknownTopicOrPartition,
            format!("{topic} is not a mirror topic"),
        );
    };
    t.state = state;
    propose(broker, MetaRequest::PutMirrorTopics { topics: vec![t] }).await
}

async fn topic_create(
    broker: &Arc<Broker>,
    link: String,
    topic: Option<String>,
    source_topic: Option<String>,
    pattern: Option<String>,
    prefix: String,
) -> MirrorResponse {
    let Some(image) = broker.image() else {
        return MirrorResponse::error(ResponseError::CoordinatorNotAvailable, "no metadata yet");
    };
    let Some(mut l) = image.mirror_links.get(&link).cloned() else {
        return MirrorResponse::error(
            ResponseError::ResourceNotFound,
            format!("no mirror link {link}"),
        );
    };
    match (topic, pattern) {
        (Some(topic), None) => {
            if let Err(m) = crate::topics::validate_topic_name(&topic) {
                return MirrorResponse::error(ResponseError::InvalidTopicException, m);
            }
            let t = MirrorTopic {
                source_topic: source_topic.unwrap_or_else(|| topic.clone()),
                topic,
                link,
                state: MirrorState::Active,
                promoted_ms: None,
                source_topic_id: None,
            };
            propose(broker, MetaRequest::PutMirrorTopics { topics: vec![t] }).await
        }
        (None, Some(regex)) => {
            if let Err(e) = regex::Regex::new(&regex) {
                return MirrorResponse::error(
                    ResponseError::InvalidRequest,
                    format!("pattern {regex}: {e}"),
                );
            }
            if !l
                .topic_patterns
                .iter()
                .any(|p| p.regex == regex && p.prefix == prefix)
            {
                l.topic_patterns.push(TopicPattern { regex, prefix });
            }
            let r = propose(broker, MetaRequest::PutMirrorLink { link: l }).await;
            with_links(broker, r, &link)
        }
        _ => MirrorResponse::error(
            ResponseError::InvalidRequest,
            "name one topic or give a pattern",
        ),
    }
}

/// Proposes one entry of one item; its error as the answer's.
async fn propose(broker: &Arc<Broker>, req: MetaRequest) -> MirrorResponse {
    match broker.propose(req).await {
        Ok(MetaResponse::Items { results }) => {
            match results.into_iter().find(|r| r.error_code != 0) {
                None => MirrorResponse::default(),
                Some(r) => MirrorResponse {
                    error_code: r.error_code,
                    error_message: r.message,
                    ..MirrorResponse::default()
                },
            }
        }
        Ok(_) => MirrorResponse::default(),
        Err(e) => MirrorResponse::from_admin(e),
    }
}

/// `r`, with link `name` (secrets hidden) when it succeeded.
fn with_links(broker: &Broker, mut r: MirrorResponse, name: &str) -> MirrorResponse {
    if r.error_code == 0 {
        r.links = broker
            .image()
            .and_then(|i| i.mirror_links.get(name).map(MirrorLink::redacted))
            .into_iter()
            .collect();
    }
    r
}
