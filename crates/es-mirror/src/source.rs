//! The source cluster's clients: librdkafka configured from a link (its
//! bootstrap servers and the user's settings in librdkafka's names), plus
//! the settings a mirror must have, which a link cannot override.

use std::time::Duration;

use es_meta::mirror::MirrorLink;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::BaseConsumer;
use rdkafka::error::KafkaError;

/// Settings every mirror consumer has: only committed records (aborted
/// transactions are not copied, their offsets stay gaps), no commits of its
/// own (the es log is where a mirror resumes), an end-of-partition event so
/// that a probe knows when nothing more is copyable.
const FIXED: &[(&str, &str)] = &[
    ("isolation.level", "read_committed"),
    ("enable.auto.commit", "false"),
    ("enable.auto.offset.store", "false"),
    ("auto.offset.reset", "error"),
    ("check.crcs", "true"),
];

/// How long a request to the source may take before it counts as failed.
pub const SOURCE_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Settings a link may not carry: they would change what is copied or
/// where it is read from.
pub fn refused_setting(name: &str) -> bool {
    FIXED.iter().any(|(k, _)| *k == name)
        || matches!(
            name,
            "bootstrap.servers" | "metadata.broker.list" | "group.id" | "enable.partition.eof"
        )
}

/// A client configuration for `link`, as `client.id` `es-mirror-<link>` in
/// group `group` (the mirror's own, or a group whose offsets are read).
pub fn client_config(link: &MirrorLink, group: &str, eof: bool) -> ClientConfig {
    let mut c = ClientConfig::new();
    for (k, v) in &link.source_config {
        if !refused_setting(k) {
            c.set(k, v);
        }
    }
    c.set("bootstrap.servers", &link.source_bootstrap);
    c.set("client.id", format!("es-mirror-{}", link.name));
    c.set("group.id", group);
    for (k, v) in FIXED {
        c.set(*k, *v);
    }
    c.set("enable.partition.eof", if eof { "true" } else { "false" });
    c
}

/// The mirror's consumer for `link`.
pub fn consumer(link: &MirrorLink, eof: bool) -> Result<BaseConsumer, KafkaError> {
    client_config(link, &format!("es-mirror.{}", link.name), eof).create()
}
