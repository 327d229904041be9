//! Mirror links and mirror topics (the migration issue): what the metadata
//! keeps so that every node knows which source cluster a link reads, which
//! es topics follow which source topics, and which are promoted.
//!
//! A link holds the source's bootstrap servers and the client settings to
//! reach it in librdkafka's names (`security.protocol`, `sasl.*`, `ssl.*`),
//! secrets included: the mirror must log in to the source, so they cannot be
//! hashed. They are kept in clear in the metadata log (files of mode 0600;
//! no other file holds them) and never listed: [`MirrorLink::redacted`].
//! A mirror topic's records are written only by the mirror until it is
//! promoted; promotion is final.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Most links a cluster keeps.
pub const LINKS_MAX: usize = 64;
/// Most mirror topics a cluster keeps.
pub const MIRROR_TOPICS_MAX: usize = 10_000;
/// Most client settings of one link.
pub const LINK_SETTINGS_MAX: usize = 64;
/// Longest link name, setting name or value, group name or pattern.
pub const LINK_TEXT_BYTES_MAX: usize = 16 * 1024;
/// Most groups or group patterns one link names.
pub const LINK_GROUPS_MAX: usize = 1_000;
/// Kafka Cluster Linking's default interval between group offset syncs.
pub const GROUP_SYNC_INTERVAL_MS_DEFAULT: u64 = 5_000;

/// A connection to a source cluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MirrorLink {
    pub name: String,
    /// `host:port[,host:port...]`.
    pub source_bootstrap: String,
    /// librdkafka client settings for the source (security, SASL, TLS).
    #[serde(default)]
    pub source_config: BTreeMap<String, String>,
    /// Topics of the source mirrored by pattern (a regex over whole names),
    /// each with a prefix for the es name ("" keeps the name). Topics
    /// created later on the source that match are mirrored too.
    #[serde(default)]
    pub topic_patterns: Vec<TopicPattern>,
    /// Consumer groups whose committed offsets are copied, by name ...
    #[serde(default)]
    pub groups: Vec<String>,
    /// ... or by pattern (a regex over whole names).
    #[serde(default)]
    pub group_patterns: Vec<String>,
    /// How often group offsets are copied (and ACLs and quotas, with
    /// `sync_acls` and `sync_quotas`).
    #[serde(default = "default_sync")]
    pub group_sync_interval_ms: u64,
    /// Whether the source's ACL bindings are copied (crates/es-mirror's
    /// `acls`).
    #[serde(default)]
    pub sync_acls: bool,
    /// Whether the source's client quotas are copied (crates/es-mirror's
    /// `quotas`), at the group sync interval.
    #[serde(default)]
    pub sync_quotas: bool,
    pub created_ms: i64,
}

fn default_sync() -> u64 {
    GROUP_SYNC_INTERVAL_MS_DEFAULT
}

/// Source topics mirrored by name pattern.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicPattern {
    pub regex: String,
    #[serde(default)]
    pub prefix: String,
}

/// Whether a setting's value is a secret (never listed, never logged).
pub fn is_secret_setting(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n.contains("password")
        || n.contains("secret")
        || n.contains("jaas")
        || n == "ssl.key.pem"
        || n == "ssl.keystore.key"
        || n.ends_with("token")
}

impl MirrorLink {
    /// The link as it may be shown: secret settings' values replaced.
    pub fn redacted(&self) -> MirrorLink {
        let mut l = self.clone();
        for (k, v) in l.source_config.iter_mut() {
            if is_secret_setting(k) {
                *v = "[hidden]".into();
            }
        }
        l
    }

    /// Checks sizes and shapes: why it may not be stored.
    pub fn validate(&self) -> Result<(), String> {
        let long = |s: &str| s.len() > LINK_TEXT_BYTES_MAX;
        if self.name.is_empty()
            || long(&self.name)
            || !self
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        {
            return Err(format!(
                "a link name is 1 to {LINK_TEXT_BYTES_MAX} of [A-Za-z0-9._-]"
            ));
        }
        if self.source_bootstrap.trim().is_empty() || long(&self.source_bootstrap) {
            return Err("the source bootstrap servers are missing".into());
        }
        if self.source_config.len() > LINK_SETTINGS_MAX {
            return Err(format!("at most {LINK_SETTINGS_MAX} source settings"));
        }
        if self.source_config.iter().any(|(k, v)| long(k) || long(v)) {
            return Err(format!("a setting longer than {LINK_TEXT_BYTES_MAX} bytes"));
        }
        if self.groups.len() + self.group_patterns.len() + self.topic_patterns.len()
            > LINK_GROUPS_MAX
        {
            return Err(format!("at most {LINK_GROUPS_MAX} groups and patterns"));
        }
        let texts = self
            .groups
            .iter()
            .chain(&self.group_patterns)
            .chain(self.topic_patterns.iter().map(|p| &p.regex))
            .chain(self.topic_patterns.iter().map(|p| &p.prefix));
        if texts.into_iter().any(|t| long(t)) {
            return Err(format!(
                "a name or pattern longer than {LINK_TEXT_BYTES_MAX} bytes"
            ));
        }
        if self.group_sync_interval_ms == 0 {
            return Err("the group sync interval is at least 1 ms".into());
        }
        Ok(())
    }
}

/// Where a mirror topic is in its life.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MirrorState {
    /// Copying from the source; read-only to producers.
    #[default]
    Active,
    /// Not copying (the user paused it); still read-only.
    Paused,
    /// Cut over: no longer copied, writable. Final.
    Promoted,
}

/// An es topic that follows a source topic.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MirrorTopic {
    /// The es topic.
    pub topic: String,
    pub link: String,
    /// The source topic it follows.
    pub source_topic: String,
    #[serde(default)]
    pub state: MirrorState,
    /// When it was promoted (ms since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promoted_ms: Option<i64>,
    /// The source topic's id (Kafka's topic UUID, in Kafka's text form) as
    /// the mirror first saw it: a source topic deleted and created again
    /// under the same name has another id, and the mirror stops rather than
    /// append the new topic's records after the old one's. Recorded by the
    /// mirror's worker; `None` until then, for a source without topic ids
    /// (before Kafka 2.8) and in entries written before es recorded it.
    /// Once set it never changes: [`MirrorTopic::with_id_of`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_topic_id: Option<String>,
}

/// Longest source topic id kept (Kafka's text form is 22 characters).
pub const SOURCE_TOPIC_ID_BYTES_MAX: usize = 64;

impl MirrorTopic {
    /// `self` as it replaces `old`: an entry without a source topic id
    /// (a pause, resume or promotion proposed from a view older than the
    /// id's recording) keeps the one `old` recorded.
    pub fn with_id_of(&self, old: Option<&MirrorTopic>) -> MirrorTopic {
        let mut t = self.clone();
        if t.source_topic_id.is_none() {
            t.source_topic_id = old.and_then(|o| o.source_topic_id.clone());
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link() -> MirrorLink {
        MirrorLink {
            name: "src".into(),
            source_bootstrap: "kafka1:9092".into(),
            source_config: [
                ("security.protocol".to_string(), "SASL_SSL".to_string()),
                ("sasl.password".to_string(), "s3cret".to_string()),
            ]
            .into_iter()
            .collect(),
            topic_patterns: Vec::new(),
            groups: vec!["g".into()],
            group_patterns: Vec::new(),
            group_sync_interval_ms: 5_000,
            sync_acls: false,
            sync_quotas: false,
            created_ms: 1,
        }
    }

    #[test]
    fn secrets_are_never_listed() {
        let r = link().redacted();
        assert_eq!(r.source_config["sasl.password"], "[hidden]");
        assert_eq!(r.source_config["security.protocol"], "SASL_SSL");
        assert!(!format!("{r:?}").contains("s3cret"));
    }

    #[test]
    fn bad_links_are_refused() {
        assert_eq!(link().validate(), Ok(()));
        let mut l = link();
        l.name = "a b".into();
        assert!(l.validate().is_err());
        let mut l = link();
        l.source_bootstrap = " ".into();
        assert!(l.validate().is_err());
        let mut l = link();
        l.group_sync_interval_ms = 0;
        assert!(l.validate().is_err());
        let mut l = link();
        l.groups = vec!["x".repeat(LINK_TEXT_BYTES_MAX + 1)];
        assert!(l.validate().is_err());
    }

    #[test]
    fn old_entries_read_with_defaults() {
        let t: MirrorTopic =
            serde_json::from_str(r#"{"topic":"t","link":"src","source_topic":"t"}"#)
                .expect("parse");
        assert_eq!(t.state, MirrorState::Active);
        assert_eq!(t.source_topic_id, None);
    }

    #[test]
    fn an_entry_without_an_id_keeps_the_recorded_one() {
        let old = MirrorTopic {
            topic: "t".into(),
            link: "src".into(),
            source_topic: "t".into(),
            state: MirrorState::Active,
            promoted_ms: None,
            source_topic_id: Some("AAAAAAAAAAAAAAAAAAAAAQ".into()),
        };
        let paused = MirrorTopic {
            state: MirrorState::Paused,
            source_topic_id: None,
            ..old.clone()
        };
        let merged = paused.with_id_of(Some(&old));
        assert_eq!(merged.state, MirrorState::Paused);
        assert_eq!(merged.source_topic_id, old.source_topic_id);
        assert_eq!(paused.with_id_of(None).source_topic_id, None);
        let json = serde_json::to_string(&paused).expect("json");
        assert!(!json.contains("source_topic_id"), "{json}");
    }
}
