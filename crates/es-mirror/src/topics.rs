//! A mirror topic's es side follows its source topic's shape: the same
//! partition count (grown when the source grows) and the source's explicit
//! topic configs among those that change what is kept and how it is read
//! ([`COPIED_CONFIGS`]), checked by es before they are set.

use std::collections::BTreeMap;
use std::sync::Arc;

use es_kafka::broker::Broker;
use es_kafka::config::validate_topic_config;
use es_meta::mirror::MirrorLink;
use rdkafka::admin::{AdminClient, AdminOptions, ConfigSource, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use tokio::runtime::Handle;

use crate::source::{client_config, SOURCE_REQUEST_TIMEOUT};

/// The source's topic configs a mirror topic keeps in sync: retention,
/// cleanup policy, compaction settings, record size, timestamp type.
pub const COPIED_CONFIGS: &[&str] = &[
    "cleanup.policy",
    "delete.retention.ms",
    "max.compaction.lag.ms",
    "max.message.bytes",
    "message.timestamp.type",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "retention.bytes",
    "retention.ms",
];

/// The link's admin client on the source.
pub fn admin_client(link: &MirrorLink) -> Result<AdminClient<DefaultClientContext>, String> {
    client_config(link, &format!("es-mirror.{}", link.name), false)
        .create()
        .map_err(|e| format!("source admin client: {e}"))
}

/// The [`COPIED_CONFIGS`] the source topic sets explicitly (its
/// DYNAMIC_TOPIC_CONFIG entries) that es accepts.
pub fn source_configs(
    rt: &Handle,
    admin: &AdminClient<DefaultClientContext>,
    source_topic: &str,
) -> Result<BTreeMap<String, String>, String> {
    let opts = AdminOptions::new().request_timeout(Some(SOURCE_REQUEST_TIMEOUT));
    let res = rt
        .block_on(admin.describe_configs(&[ResourceSpecifier::Topic(source_topic)], &opts))
        .map_err(|e| format!("source topic configs: {e}"))?;
    let mut out = BTreeMap::new();
    for r in res {
        let r = r.map_err(|e| format!("source topic configs: {e:?}"))?;
        for e in r.entries {
            if e.source != ConfigSource::DynamicTopic || !COPIED_CONFIGS.contains(&e.name.as_str())
            {
                continue;
            }
            if let Some(v) = e.value {
                if validate_topic_config(&e.name, Some(&v)).is_ok() {
                    out.insert(e.name, v);
                }
            }
        }
    }
    Ok(out)
}

/// Creates `topic` with `partitions` and `configs`, or grows it and sets
/// the copied configs it differs in.
pub fn ensure_topic(
    rt: &Handle,
    broker: &Arc<Broker>,
    topic: &str,
    partitions: i32,
    configs: BTreeMap<String, String>,
) -> Result<(), String> {
    let Some(t) = broker.topic(topic) else {
        let b = broker.clone();
        let name = topic.to_string();
        rt.block_on(async move { b.create_topic(&name, partitions, configs, false).await })
            .map_err(|e| format!("creating {topic}: {}", e.message))?;
        tracing::info!(topic, partitions, "created mirror topic");
        return Ok(());
    };
    if t.partition_count() < partitions {
        let b = broker.clone();
        let name = topic.to_string();
        rt.block_on(async move {
            b.create_partitions(&name, partitions, Vec::new(), false)
                .await
        })
        .map_err(|e| format!("growing {topic}: {}", e.message))?;
        tracing::info!(topic, partitions, "mirror topic grew with its source");
    }
    let mut overrides = t.config().overrides().clone();
    let before = overrides.clone();
    overrides.retain(|k, _| !COPIED_CONFIGS.contains(&k.as_str()) || configs.contains_key(k));
    overrides.extend(configs);
    if overrides != before {
        let b = broker.clone();
        let name = topic.to_string();
        rt.block_on(async move { b.set_topic_config(&name, overrides, false).await })
            .map_err(|e| format!("configuring {topic}: {}", e.message))?;
        tracing::info!(topic, "mirror topic configs follow the source's");
    }
    Ok(())
}
