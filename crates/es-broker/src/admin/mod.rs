//! `--admin-listen`: the admin HTTP listener (docs/admin-api.md). It serves
//! `/healthz`, `/readyz`, `/metrics` (Prometheus, [`metrics`]), the console
//! at `/` ([`console`]) and its JSON API under `/api/v1` ([`api`]), on
//! axum, the schema registry's HTTP stack.
//!
//! It starts before the data directory is opened, so that a supervisor
//! sees the process up (`/healthz`) and why it is not ready yet (`/readyz`:
//! recovery's progress) during a long recovery; the broker joins it once
//! open ([`Admin::set_broker`]) and it turns ready when the Kafka
//! listeners serve ([`Admin::set_ready`]). Like the registry it is a
//! guest: if its port is taken it logs why and the broker runs without it.
//!
//! With a SASL listener configured, everything but the health checks needs
//! HTTP basic authentication with a Kafka client's credentials
//! ([`auth`]), and only super users may change anything.

mod api;
mod auth;
mod console;
mod health;
mod metrics;
mod progress;

pub use auth::check as check_credentials;

use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use es_kafka::Broker;
use tokio::sync::watch;

pub use progress::{human_bytes, Recovery};

/// The flag's default: loopback only, as Redpanda's admin API.
pub const LISTEN_DEFAULT: &str = "127.0.0.1:9644";
/// Partitions written with their own labels in /metrics by default.
pub const PARTITION_LABELS_DEFAULT: usize = 100;

/// The address to listen on, or None for `none`.
pub fn listen_addr(flag: &str) -> Option<String> {
    let flag = flag.trim();
    (!flag.eq_ignore_ascii_case("none")).then(|| flag.to_string())
}

/// What the listener is told at start.
#[derive(Clone, Debug)]
pub struct Options {
    /// `--metrics-partition-labels`.
    pub partition_labels: usize,
    /// The broker has a SASL listener: the admin listener asks for
    /// credentials too.
    pub sasl: bool,
}

/// What every request handler shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) options: Options,
    pub(crate) started: Instant,
    broker: OnceLock<Arc<Broker>>,
    /// The broker's shutdown signal, once its listeners serve.
    serving: OnceLock<watch::Receiver<bool>>,
    pub(crate) registry: prometheus_client::registry::Registry,
    pub(crate) throughput: progress::Throughput,
    pub(crate) remembered: auth::Remembered,
}

impl Shared {
    pub(crate) fn broker(&self) -> Option<&Arc<Broker>> {
        self.broker.get()
    }

    /// Why the broker is not ready, or None when it is.
    pub(crate) fn not_ready(&self) -> Option<String> {
        let Some(stop) = self.serving.get() else {
            return Some(match self.broker.get() {
                None => {
                    let p = es_storage::metrics::recovery_progress();
                    format!(
                        "recovering the data directory: {} of {} bytes ({} of {} segments) checked",
                        p.bytes_checked, p.bytes_total, p.segments_checked, p.segments_total
                    )
                }
                Some(_) => "starting: metadata and listeners".to_string(),
            });
        };
        if *stop.borrow() {
            return Some("shutting down".to_string());
        }
        None
    }
}

/// The running admin listener's handle.
#[derive(Clone, Debug)]
pub struct Admin {
    shared: Arc<Shared>,
}

impl Admin {
    /// The broker is open: the API and the broker's metrics become
    /// available.
    pub fn set_broker(&self, broker: Arc<Broker>) {
        if self.shared.broker.set(broker.clone()).is_ok() {
            progress::spawn_watchers(self.shared.clone(), broker);
        }
    }

    /// The Kafka listeners serve until `stop` turns true: ready.
    pub fn set_ready(&self, stop: watch::Receiver<bool>) {
        let _ = self.shared.serving.set(stop);
    }
}

/// Starts the admin listener on `listen` (in the background; a failure to
/// bind is logged and the broker runs without it).
pub fn spawn(listen: String, options: Options) -> Admin {
    let mut registry = prometheus_client::registry::Registry::default();
    es_storage::metrics::register(&mut registry);
    es_kafka::metrics::register(&mut registry);
    let shared = Arc::new_cyclic(|me: &std::sync::Weak<Shared>| {
        registry.register_collector(Box::new(metrics::BrokerCollector::new(me.clone())));
        Shared {
            options,
            started: Instant::now(),
            broker: OnceLock::new(),
            serving: OnceLock::new(),
            registry,
            throughput: progress::Throughput::default(),
            remembered: auth::Remembered::default(),
        }
    });
    let s = shared.clone();
    tokio::spawn(async move {
        let socket = match tokio::net::TcpListener::bind(&listen).await {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(
                    "admin listener cannot listen on {listen}: {e}; the broker runs without it"
                );
                return;
            }
        };
        if let Ok(addr) = socket.local_addr() {
            tracing::info!(
                "admin listener at http://{addr} (/metrics, /healthz, /readyz, console)"
            );
        }
        if let Err(e) = axum::serve(socket, router(s)).await {
            tracing::error!("admin listener failed: {e}; the broker runs without it");
        }
    });
    Admin { shared }
}

fn router(shared: Arc<Shared>) -> Router {
    let guarded = Router::new()
        .route("/metrics", get(metrics_text))
        .nest("/api/v1", api::router())
        .fallback(console::serve)
        .layer(middleware::from_fn_with_state(
            shared.clone(),
            auth::require,
        ));
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .merge(guarded)
        .with_state(shared)
}

async fn readyz(State(s): State<Arc<Shared>>) -> Response {
    match s.not_ready() {
        None => (StatusCode::OK, "ready\n").into_response(),
        Some(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")).into_response(),
    }
}

async fn metrics_text(State(s): State<Arc<Shared>>) -> Response {
    // Encoding reads locks of the broker's maps: off the async workers.
    let text = tokio::task::spawn_blocking(move || {
        let mut out = String::with_capacity(64 * 1024);
        prometheus_client::encoding::text::encode(&mut out, &s.registry).map(|()| out)
    })
    .await;
    match text {
        Ok(Ok(body)) => (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            body,
        )
            .into_response(),
        _ => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// Bytes of `.log` files under `data_dir/topics` (what recovery checks).
pub(crate) fn log_bytes_under(data_dir: &Path) -> (u64, u64) {
    let (mut bytes, mut segments) = (0, 0);
    let Ok(topics) = std::fs::read_dir(data_dir.join("topics")) else {
        return (0, 0);
    };
    for t in topics.flatten() {
        let Ok(parts) = std::fs::read_dir(t.path()) else {
            continue;
        };
        for p in parts.flatten() {
            let Ok(files) = std::fs::read_dir(p.path()) else {
                continue;
            };
            for f in files.flatten() {
                if f.file_name().to_string_lossy().ends_with(".log") {
                    bytes += f.metadata().map_or(0, |m| m.len());
                    segments += 1;
                }
            }
        }
    }
    (bytes, segments)
}
