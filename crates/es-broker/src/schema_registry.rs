//! `--schema-registry-listen`: starts es-registry's HTTP server beside the
//! Kafka listeners, with its data in `<data dir>/schemas.json`. The
//! registry is a guest: if it cannot start (its file is damaged, its port
//! is taken) it logs why and the broker serves Kafka without it.

use std::path::PathBuf;

use tokio::sync::watch;

/// The flag's default: Confluent Schema Registry's port, on loopback.
pub const LISTEN_DEFAULT: &str = "127.0.0.1:8081";

/// The address to listen on, or None for `none`.
pub fn listen_addr(flag: &str) -> Option<String> {
    let flag = flag.trim();
    (!flag.eq_ignore_ascii_case("none")).then(|| flag.to_string())
}

/// Starts the registry on `listen` until `stop` turns true.
pub fn spawn(
    listen: String,
    data_dir: PathBuf,
    cluster_id: String,
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
        cluster_id,
    };
    tokio::spawn(async move {
        let bound = match es_registry::bind(config).await {
            Ok(b) => b,
            Err(e) => {
                tracing::error!("{e}; the broker runs without the schema registry");
                return;
            }
        };
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
