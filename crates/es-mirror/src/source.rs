//! The source cluster's clients: librdkafka configured from a link (its
//! bootstrap servers and the user's settings in librdkafka's names), plus
//! the settings a mirror must have, which a link cannot override; and the
//! watermarks librdkafka caches from each fetch response
//! ([`cached_watermarks`], the crate's one unsafe call outside
//! [`crate::acls`]).

use std::time::Duration;

use es_client::{ClientError, ClientSettings};
use es_meta::mirror::MirrorLink;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
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

/// es's own client's settings for `link` (the link's settings in
/// librdkafka's names, `client.id` `es-mirror-<link>`), for the requests
/// librdkafka has no API for ([`crate::ids`], [`crate::quotas`]).
pub fn client_settings(link: &MirrorLink) -> Result<ClientSettings, ClientError> {
    ClientSettings::from_librdkafka(&link.source_config, &format!("es-mirror-{}", link.name))
}

/// The mirror's consumer for `link`.
pub fn consumer(link: &MirrorLink, eof: bool) -> Result<BaseConsumer, KafkaError> {
    client_config(link, &format!("es-mirror.{}", link.name), eof).create()
}

/// The source's log start and high watermark of `topic`-`partition` as the
/// last fetch response for it said (librdkafka keeps them for every
/// partition it fetches: no request is made). `None` when none is known
/// yet (nothing fetched) or the name cannot be passed to librdkafka.
#[allow(unsafe_code)]
pub fn cached_watermarks(
    consumer: &BaseConsumer,
    topic: &str,
    partition: i32,
) -> Option<(i64, i64)> {
    use rdkafka::bindings as rd;
    let name = std::ffi::CString::new(topic).ok()?;
    let (mut low, mut high) = (-1i64, -1i64);
    // SAFETY: the client pointer is the live client `consumer` owns;
    // `name` is a NUL-terminated string that outlives the call, which only
    // reads it; `low` and `high` are valid for writes. The call takes the
    // partition's lock and copies two integers.
    let err = unsafe {
        rd::rd_kafka_get_watermark_offsets(
            consumer.client().native_ptr(),
            name.as_ptr(),
            partition,
            &mut low,
            &mut high,
        )
    };
    (err == rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR && high >= 0).then_some((low, high))
}
