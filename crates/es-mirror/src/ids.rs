//! The source topics' ids (issue 26). Kafka gives every topic an id (a
//! UUID, KIP-516, Kafka 2.8 on) when it is created; a topic deleted and
//! created again under the same name has another id, and its offsets start
//! over at 0. A mirror records its source topic's id when it first follows
//! it (es-meta's `MirrorTopic::source_topic_id`) and compares it at every
//! refresh and before every append ([`crate::worker`]), so that another
//! topic's records are never appended after the ones it copied.
//!
//! librdkafka's metadata in the rdkafka crate has no topic ids, so they
//! are read with es's own client ([`es_client`]), logged in with the
//! link's settings as [`crate::quotas`] is: ApiVersions once per
//! connection, then Metadata for the topic names at the source's highest
//! version up to 12. The connection is kept while it works and opened again
//! after a failure. Ids are shown in Kafka's text form (URL-safe base64 of
//! the 16 bytes, as `kafka-topics --describe` prints `TopicId`).
//!
//! A source without ids skips the check, logged once per worker: Metadata
//! below v10 (Kafka before 2.8), an id of all zeros (a cluster not yet on
//! the 2.8 protocol), or settings es's client cannot log in with (a SASL
//! mechanism other than PLAIN and SCRAM, a keystore that is not PEM): the
//! mirror then copies as it did before ids were checked. The source's
//! answers are not trusted: a malformed one is an error, never a panic.

use std::collections::HashMap;

use base64::Engine;
use es_client::{ClientError, Connection};
use es_meta::mirror::MirrorLink;
use kafka_protocol::messages::{
    metadata_request::MetadataRequestTopic, ApiKey, ApiVersionsRequest, ApiVersionsResponse,
    MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::source::SOURCE_REQUEST_TIMEOUT;

/// The first Metadata version with topic ids.
const METADATA_IDS_MIN: i16 = 10;
/// The highest Metadata version asked (v13 adds only a top-level error).
const METADATA_MAX: i16 = 12;
/// Kafka's UNKNOWN_TOPIC_OR_PARTITION.
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;

/// What the source says of one topic name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    /// The topic exists with this id (Kafka's text form).
    Id(String),
    /// No topic of that name.
    Absent,
    /// The source has no id for it (all zeros): not checked.
    NoId,
    /// The source refused to say (error code): not known this time.
    Failed(i16),
}

/// The reader of one worker.
#[derive(Default)]
pub struct SourceIds {
    /// The connection and the Metadata version it uses.
    conn: Option<(Connection, i16)>,
    /// Why the source's ids are not checked, once known.
    unchecked: Option<String>,
    /// A zero id was logged.
    logged_no_id: bool,
}

impl SourceIds {
    /// What the source says now of each of `names`; `None` when the source
    /// has no topic ids (the check is skipped; logged once). An error when
    /// the source could not be asked: the ids are unknown this time, which
    /// says nothing about a recreation.
    pub fn read(
        &mut self,
        link: &MirrorLink,
        names: &[&str],
    ) -> Result<Option<HashMap<String, Seen>>, String> {
        if self.unchecked.is_some() {
            return Ok(None);
        }
        if names.is_empty() {
            return Ok(Some(HashMap::new()));
        }
        // A kept connection the source closed (a restart, an idle
        // timeout) is opened again once.
        let kept = self.conn.take();
        let reused = kept.is_some();
        let (mut conn, mut version) = match kept {
            Some(c) => c,
            None => match self.connect(link)? {
                Some(c) => c,
                None => return Ok(None),
            },
        };
        let seen = match ask(&mut conn, version, names) {
            Ok(seen) => seen,
            Err(_) if reused => match self.connect(link)? {
                Some((c, v)) => {
                    (conn, version) = (c, v);
                    ask(&mut conn, version, names).map_err(|e| format!("source topic ids: {e}"))?
                }
                None => return Ok(None),
            },
            Err(e) => return Err(format!("source topic ids: {e}")),
        };
        self.conn = Some((conn, version));
        if !self.logged_no_id && seen.values().any(|s| *s == Seen::NoId) {
            self.logged_no_id = true;
            tracing::warn!(link = %link.name, "the source gives a topic no id (a cluster not yet on Kafka 2.8's protocol): that topic's recreation is not detected");
        }
        Ok(Some(seen))
    }
}

impl SourceIds {
    /// A connection and its Metadata version; `None` when the source's ids
    /// cannot be checked (logged once, remembered).
    fn connect(&mut self, link: &MirrorLink) -> Result<Option<(Connection, i16)>, String> {
        match connect(link) {
            Ok(c) => Ok(Some(c)),
            Err(Unchecked(why)) => {
                tracing::warn!(link = %link.name, reason = %why, "the source's topic ids are not checked: a source topic deleted and created again under the same name is not detected");
                self.unchecked = Some(why);
                Ok(None)
            }
            Err(Failed(e)) => Err(e),
        }
    }
}

/// Why a connection gave no reader.
enum ConnectError {
    /// The source has no ids, or es's client cannot log in as the link
    /// says: not checked.
    Unchecked(String),
    /// Not reachable now.
    Failed(String),
}
use ConnectError::{Failed, Unchecked};

/// A connection to the link's source and the Metadata version to ask
/// with.
fn connect(link: &MirrorLink) -> Result<(Connection, i16), ConnectError> {
    let mut settings = crate::source::client_settings(link)
        .map_err(|e| Unchecked(format!("es's client cannot use the link's settings: {e}")))?;
    settings.timeout = settings.timeout.min(SOURCE_REQUEST_TIMEOUT);
    let mut conn =
        Connection::open_any(&link.source_bootstrap, &settings).map_err(|e| match e {
            ClientError::Settings(_) => {
                Unchecked(format!("es's client cannot use the link's settings: {e}"))
            }
            e => Failed(format!("source topic ids: {e}")),
        })?;
    let r: ApiVersionsResponse = conn
        .call(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default())
        .map_err(|e| Failed(format!("source topic ids: ApiVersions: {e}")))?;
    if r.error_code != 0 {
        return Err(Failed(format!(
            "source topic ids: ApiVersions refused (error {})",
            r.error_code
        )));
    }
    let max = r
        .api_keys
        .iter()
        .find(|k| k.api_key == ApiKey::Metadata as i16)
        .map_or(-1, |k| k.max_version);
    if max < METADATA_IDS_MIN {
        return Err(Unchecked(format!(
            "the source's Metadata goes up to v{max}, topic ids come with v{METADATA_IDS_MIN} (Kafka 2.8)"
        )));
    }
    Ok((conn, max.min(METADATA_MAX)))
}

/// One Metadata request for `names` (never creating a topic).
fn ask(
    conn: &mut Connection,
    version: i16,
    names: &[&str],
) -> Result<HashMap<String, Seen>, String> {
    let mut req = MetadataRequest::default();
    req.allow_auto_topic_creation = false;
    req.topics = Some(
        names
            .iter()
            .map(|n| {
                let mut t = MetadataRequestTopic::default();
                t.name = Some(TopicName(StrBytes::from_string((*n).to_string())));
                t
            })
            .collect(),
    );
    let r: MetadataResponse = conn
        .call(ApiKey::Metadata, version, &req)
        .map_err(|e| e.to_string())?;
    let mut out = HashMap::with_capacity(names.len());
    for t in r.topics {
        let Some(name) = t.name else { continue };
        let seen = match t.error_code {
            0 if t.topic_id.is_nil() => Seen::NoId,
            0 => Seen::Id(text(t.topic_id.as_bytes())),
            UNKNOWN_TOPIC_OR_PARTITION => Seen::Absent,
            code => Seen::Failed(code),
        };
        out.insert(name.0.to_string(), seen);
    }
    Ok(out)
}

/// Kafka's text form of a topic id.
pub fn text(id: &[u8; 16]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id)
}

/// Why a mirror topic stopped: its source topic is another one now.
pub fn recreated(source_topic: &str, old: &str, new: &str) -> String {
    format!(
        "the source topic {source_topic} was deleted and created again (topic id {old}, now {new}): its offsets started over, so nothing more is copied and no record of the new topic is appended. What was copied stays; promote the mirror topic to keep it as it is (es-broker mirror promote), or delete the mirror topic and mirror the source topic again to copy the new one"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_read_as_kafka_prints_them() {
        // Kafka's Uuid.toString() of 00000000-0000-0001-0000-000000000001.
        let mut id = [0u8; 16];
        id[7] = 1;
        id[15] = 1;
        assert_eq!(text(&id), "AAAAAAAAAAEAAAAAAAAAAQ");
    }

    #[test]
    fn the_recreation_reason_names_both_ids_and_what_to_do() {
        let r = recreated("orders", "A", "B");
        assert!(r.contains("orders was deleted and created again"), "{r}");
        assert!(r.contains("topic id A, now B"), "{r}");
        assert!(
            r.contains("promote") && r.contains("delete the mirror topic"),
            "{r}"
        );
    }
}
