//! What the request layer knows of mirror topics (the migration issue):
//! which topics producers may not write (a mirror topic until it is
//! promoted), and the face of the mirror service (crates/es-mirror), which
//! copies the source cluster and registers itself here at start
//! ([`MirrorSlot`]), for `es-broker mirror status` and `promote`.
//!
//! This crate never talks to a source cluster: the service does, with a
//! Kafka client library, so the protocol crate keeps no client of its own
//! for other clusters.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use es_meta::image::MetaImage;
use es_meta::mirror::MirrorState;
use serde::{Deserialize, Serialize};

use crate::broker::Broker;

/// One mirror topic as status reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicStatus {
    pub topic: String,
    pub link: String,
    pub source_topic: String,
    /// `active`, `paused`, `promoted`, or `failed` (with `error`).
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub partitions: Vec<PartitionStatus>,
}

/// One partition of a mirror topic.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionStatus {
    pub partition: i32,
    /// The source's high watermark when last asked (-1: not known).
    pub source_high_watermark: i64,
    /// es's log end offset for the partition.
    pub mirrored_end: i64,
    /// `source_high_watermark - mirrored_end` (offsets, including source
    /// transaction markers not copied yet counted; -1: not known).
    pub lag: i64,
    pub records_copied: u64,
    pub bytes_copied: u64,
    /// Records copied per second lately (this node, since it started).
    #[serde(default)]
    pub records_per_second: u64,
    /// Offsets the source deleted (retention, DeleteRecords) before they
    /// were copied, which the mirror stepped over (this node, since it
    /// started).
    #[serde(default)]
    pub offsets_skipped: u64,
    /// Why this partition does not copy (until it copies again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A future the service answers with.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// The mirror service, as the request layer calls it.
pub trait MirrorControl: Send + Sync + std::fmt::Debug {
    /// The live state of the mirror topics this node copies.
    fn status(&self) -> Vec<TopicStatus>;

    /// Waits until `topic` has caught up with its source (every partition
    /// within `max_lag` offsets), stops copying it, copies its groups'
    /// offsets one last time, moves its log ends to the source's and marks
    /// it promoted in the metadata; what it did, per partition.
    fn promote(
        &self,
        topic: String,
        max_lag: u64,
        timeout: Duration,
    ) -> BoxFuture<Result<Vec<PartitionStatus>, String>>;
}

/// Where the mirror service registers on a broker (a broker extension:
/// [`Broker::extension`]).
#[derive(Debug, Default)]
pub struct MirrorSlot(OnceLock<Arc<dyn MirrorControl>>);

impl MirrorSlot {
    /// Registers the service (once; later calls are ignored).
    pub fn set(&self, control: Arc<dyn MirrorControl>) {
        let _ = self.0.set(control);
    }

    pub fn get(&self) -> Option<&Arc<dyn MirrorControl>> {
        self.0.get()
    }
}

impl Broker {
    /// The mirror service, if one runs on this broker.
    pub fn mirror_control(&self) -> Option<Arc<dyn MirrorControl>> {
        self.extension(MirrorSlot::default).get().cloned()
    }
}

/// Why producers may not write `topic`: it is a mirror topic that is not
/// promoted (Kafka's Cluster Linking answers INVALID_REQUEST the same way).
pub fn produce_refusal(image: Option<&MetaImage>, topic: &str) -> Option<String> {
    let t = image?.mirror_topics.get(topic)?;
    (t.state != MirrorState::Promoted).then(|| {
        format!(
            "Topic {topic} is a mirror topic of {} through link {}: it is read-only until it is promoted (es-broker mirror promote).",
            t.source_topic, t.link
        )
    })
}

impl Broker {
    /// The ACL bindings applied on this node (what DescribeAcls shows).
    pub fn acl_bindings(&self) -> Vec<es_auth::acl::AclBinding> {
        self.image()
            .map(|i| i.acls.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// A mirror link's ACL sync: creates `create` and deletes exactly
    /// `delete`, through the metadata log as CreateAcls and DeleteAcls do.
    pub async fn sync_acls(
        &self,
        create: Vec<es_auth::acl::AclBinding>,
        delete: Vec<es_auth::acl::AclBinding>,
    ) -> Result<(), String> {
        use es_meta::records::MetaRequest;
        let mut failed = Vec::new();
        if !create.is_empty() {
            let r = self
                .propose_acls(MetaRequest::CreateAcls { bindings: create })
                .await
                .map_err(|e| e.message)?;
            failed.extend(r.into_iter().filter(|r| r.error_code != 0));
        }
        if !delete.is_empty() {
            let filters = delete.iter().map(Into::into).collect();
            let r = self
                .propose_acls(MetaRequest::DeleteAcls { filters })
                .await
                .map_err(|e| e.message)?;
            failed.extend(r.into_iter().filter(|r| r.error_code != 0));
        }
        match failed.first() {
            None => Ok(()),
            Some(f) => Err(format!(
                "{} ACL changes refused, the first: error {} {}",
                failed.len(),
                f.error_code,
                f.message.clone().unwrap_or_default()
            )),
        }
    }

    /// The client quotas applied on this node (what DescribeClientQuotas
    /// shows).
    pub fn client_quotas(&self) -> es_meta::quotas::ClientQuotas {
        self.image()
            .map(|i| i.client_quotas.clone())
            .unwrap_or_default()
    }

    /// A mirror link's quota sync: the alterations, each checked as
    /// AlterClientQuotas checks them, written through the metadata log as
    /// one AlterClientQuotas entry. An alteration es refuses (a key it does
    /// not know) is left out and named in the error; the others apply.
    pub async fn sync_client_quotas(
        &self,
        alterations: Vec<es_meta::quotas::QuotaAlteration>,
    ) -> Result<(), String> {
        use es_meta::quotas::validate_alteration;
        use es_meta::records::{MetaRequest, MetaResponse};
        let (valid, refused): (Vec<_>, Vec<_>) = alterations
            .into_iter()
            .partition(|a| validate_alteration(a).is_ok());
        if !valid.is_empty() {
            match self
                .propose(MetaRequest::AlterClientQuotas { alterations: valid })
                .await
                .map_err(|e| e.message)?
            {
                MetaResponse::Items { results } => {
                    if let Some(f) = results.iter().find(|r| r.error_code != 0) {
                        return Err(format!(
                            "quota change refused: error {} {}",
                            f.error_code,
                            f.message.clone().unwrap_or_default()
                        ));
                    }
                }
                other => return Err(format!("unexpected metadata answer {other:?}")),
            }
        }
        match refused.first() {
            None => Ok(()),
            Some(a) => Err(format!(
                "{} source quotas es does not take, the first: {} {:?}",
                refused.len(),
                es_meta::quotas::entity_text(&a.entity),
                a.ops.iter().map(|o| o.key.as_str()).collect::<Vec<_>>()
            )),
        }
    }

    /// Adds mirror topics or changes their state, through the metadata.
    pub async fn put_mirror_topics(
        &self,
        topics: Vec<es_meta::mirror::MirrorTopic>,
    ) -> Result<(), crate::broker::AdminError> {
        self.propose_checked(es_meta::records::MetaRequest::PutMirrorTopics { topics })
            .await
    }
}

/// What DescribeConfigs shows of a mirror topic: read-only entries named
/// `es.mirror.*` (link, source topic, state, the failure if any, the lag in
/// offsets over all partitions and per partition, records copied per
/// second), as this node's mirror service knows them. Empty for any other
/// topic.
pub fn config_entries(b: &Broker, topic: &str) -> Vec<(&'static str, String)> {
    let Some(st) = b
        .mirror_control()
        .and_then(|m| m.status().into_iter().find(|t| t.topic == topic))
    else {
        return Vec::new();
    };
    let known = || st.partitions.iter().filter(|p| p.lag >= 0);
    let per_partition: Vec<String> = st
        .partitions
        .iter()
        .map(|p| format!("{}={}", p.partition, p.lag))
        .collect();
    let mut out = vec![
        ("es.mirror.link", st.link.clone()),
        ("es.mirror.source.topic", st.source_topic.clone()),
        ("es.mirror.state", st.state.clone()),
        (
            "es.mirror.lag",
            known().map(|p| p.lag).sum::<i64>().to_string(),
        ),
        ("es.mirror.partition.lag", per_partition.join(",")),
        (
            "es.mirror.records.per.second",
            st.partitions
                .iter()
                .map(|p| p.records_per_second)
                .sum::<u64>()
                .to_string(),
        ),
    ];
    if let Some(e) = st.error {
        out.push(("es.mirror.error", e));
    }
    out
}
