//! `--schema-registry-listen`: starts es-registry's HTTP server beside the
//! Kafka listeners, with its data in `<data dir>/schemas.json`. The
//! registry is a guest: if it cannot start (its file is damaged, its port
//! is taken) it logs why and the broker serves Kafka without it.
//!
//! Once loaded, the registry is registered as the broker's
//! [`SchemaIds`] (an adapter: es-kafka knows no registry, es-registry no
//! Kafka), which produce-time schema id validation asks; until then, and
//! when it does not run, topics that validate refuse produce.

use std::path::PathBuf;
use std::sync::Arc;

use es_kafka::schema_validation::{SchemaIds, SchemaSlot};
use es_kafka::Broker;

use tokio::sync::watch;

/// The flag's default: Confluent Schema Registry's port, on loopback.
pub const LISTEN_DEFAULT: &str = "127.0.0.1:8081";

/// The address to listen on, or None for `none`.
pub fn listen_addr(flag: &str) -> Option<String> {
    let flag = flag.trim();
    (!flag.eq_ignore_ascii_case("none")).then(|| flag.to_string())
}

/// es-registry as produce-time validation asks it.
#[derive(Debug)]
struct RegistryIds(es_registry::Shared);

impl SchemaIds for RegistryIds {
    fn is_registered(&self, subject: &str, id: i32) -> bool {
        self.0.is_registered(subject, id)
    }

    fn record_name(&self, id: i32) -> Option<String> {
        self.0.record_name(id)
    }
}

/// Starts the registry on `listen` until `stop` turns true, and registers
/// it with `broker` for produce-time validation.
pub fn spawn(
    listen: String,
    data_dir: PathBuf,
    broker: Arc<Broker>,
    clustered: bool,
    mut stop: watch::Receiver<bool>,
) {
    if clustered {
        tracing::warn!(
            "the schema registry keeps its schemas in this node's schemas.json: the nodes of a cluster do not share them yet"
        );
    }
    let config = es_registry::Config {
        listen,
        data_dir,
        cluster_id: broker.cluster_id().to_string(),
    };
    tokio::spawn(async move {
        let bound = match es_registry::bind(config).await {
            Ok(b) => b,
            Err(e) => {
                tracing::error!("{e}; the broker runs without the schema registry");
                return;
            }
        };
        broker
            .extension(SchemaSlot::default)
            .set(Arc::new(RegistryIds(bound.shared())));
        if let Ok(addr) = bound.local_addr() {
            tracing::info!("schema registry listening at http://{addr}");
        }
        let stopped = async move {
            let _ = stop.wait_for(|s| *s).await;
        };
        if let Err(e) = bound.serve(stopped).await {
            tracing::error!("{e}; the broker runs without the schema registry");
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn none_turns_it_off() {
        assert_eq!(listen_addr("none"), None);
        assert_eq!(listen_addr("NONE"), None);
        assert_eq!(listen_addr("127.0.0.1:0").as_deref(), Some("127.0.0.1:0"));
    }
}
