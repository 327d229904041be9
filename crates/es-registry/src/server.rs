//! The registry's async shell: it loads `schemas.json`, binds the HTTP
//! listener, and serves [`crate::http::router`] until told to stop. Every
//! operation runs on tokio's blocking pool (parsing a large schema or
//! fsyncing the file must not stall the runtime's workers). A change runs
//! on a copy of the registry; the copy replaces the registry only after
//! `schemas.json` holds it, so a failed write answers 50001 and changes
//! nothing, and an operation that changed nothing writes nothing.
//!
//! Writers take a writer lock for the whole change (parse, check, fsync)
//! and the registry's read-write lock only to swap in the new registry, so
//! a reader (an HTTP read, or the broker's produce-time validation through
//! [`Shared::is_registered`] and [`Shared::record_name`]) never waits for a
//! registration's parse or fsync.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

use std::collections::HashMap;

use parking_lot::{Mutex, RwLock};
use serde_json::Value;

use crate::error::{RegistryError, Result};
use crate::registry::Registry;
use crate::store::{Store, StoreError};

/// What the registry serves and where.
#[derive(Debug, Clone)]
pub struct Config {
    /// HOST:PORT to listen on (port 0: a free one, logged).
    pub listen: String,
    /// The directory `schemas.json` lives in.
    pub data_dir: PathBuf,
    /// The Kafka cluster's id, for `/v1/metadata/id`.
    pub cluster_id: String,
}

/// Why the registry could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot load the schema registry's file: {0}")]
    Load(#[from] StoreError),
    #[error("cannot listen on {addr} for the schema registry: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
    #[error("the schema registry's HTTP server failed: {0}")]
    Serve(std::io::Error),
    #[error("loading the schema registry's file was interrupted")]
    Interrupted,
}

/// The registry as the handlers share it.
#[derive(Clone, Debug)]
pub struct Shared {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Held by a change from its copy to its swap: changes run one by one.
    writer: Mutex<()>,
    registry: RwLock<Registry>,
    /// Record names by schema id (an id names one schema for ever, so a
    /// name found stays true), at most [`crate::limits::RECORD_NAMES_MAX`].
    record_names: Mutex<HashMap<i32, String>>,
    /// None: kept in memory only (tests of the HTTP layer).
    store: Option<Store>,
    cluster_id: String,
}

impl Shared {
    pub fn new(registry: Registry, store: Option<Store>, cluster_id: String) -> Shared {
        Shared {
            inner: Arc::new(Inner {
                writer: Mutex::new(()),
                registry: RwLock::new(registry),
                record_names: Mutex::new(HashMap::new()),
                store,
                cluster_id,
            }),
        }
    }

    pub fn cluster_id(&self) -> &str {
        &self.inner.cluster_id
    }

    /// Runs a read on the blocking pool.
    pub async fn read<F>(&self, f: F) -> Result<Value>
    where
        F: FnOnce(&Registry) -> Result<Value> + Send + 'static,
    {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || f(&inner.registry.read()))
            .await
            .map_err(|_| RegistryError::Store("the operation failed".into()))?
    }

    /// Runs a change on a copy, stores the copy if it differs, and only
    /// then makes it the registry.
    pub async fn write<F>(&self, f: F) -> Result<Value>
    where
        F: FnOnce(&mut Registry) -> Result<Value> + Send + 'static,
    {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            let _writer = inner.writer.lock();
            let mut next = inner.registry.read().clone();
            let generation = next.generation();
            let out = f(&mut next)?;
            if next.generation() != generation {
                if let Some(store) = &inner.store {
                    store.save(&next).map_err(|e| {
                        tracing::error!(error = %e, "cannot write the schema registry's file");
                        RegistryError::Store(e.to_string())
                    })?;
                }
                *inner.registry.write() = next;
            }
            Ok(out)
        })
        .await
        .map_err(|_| RegistryError::Store("the operation failed".into()))?
    }
}

impl Shared {
    /// Whether a live version of `subject` names schema `id` (produce-time
    /// validation; waits only for a change's swap, never its fsync).
    pub fn is_registered(&self, subject: &str, id: i32) -> bool {
        self.inner.registry.read().is_registered(subject, id)
    }

    /// Runs `f` on the registry as it is now (the broker's admin API reads
    /// subjects and schemas this way; waits only for a change's swap).
    pub fn with_registry<T>(&self, f: impl FnOnce(&Registry) -> T) -> T {
        f(&self.inner.registry.read())
    }

    /// The record name of schema `id` ([`Registry::record_name`]),
    /// remembered once found: the schema is parsed once per id.
    pub fn record_name(&self, id: i32) -> Option<String> {
        if let Some(n) = self.inner.record_names.lock().get(&id) {
            return Some(n.clone());
        }
        let name = self.inner.registry.read().record_name(id)?;
        let mut names = self.inner.record_names.lock();
        if names.len() >= crate::limits::RECORD_NAMES_MAX {
            names.clear();
        }
        names.insert(id, name.clone());
        Some(name)
    }
}

/// A registry loaded and listening, not yet serving.
#[derive(Debug)]
pub struct Bound {
    listener: tokio::net::TcpListener,
    shared: Shared,
}

/// Loads the registry from `config.data_dir` and binds `config.listen`.
pub async fn bind(config: Config) -> Result<Bound, StartError> {
    let store = Store::in_dir(&config.data_dir);
    let (store, registry) = tokio::task::spawn_blocking(move || store.load().map(|r| (store, r)))
        .await
        .map_err(|_| StartError::Interrupted)??;
    let listener = tokio::net::TcpListener::bind(&config.listen)
        .await
        .map_err(|source| StartError::Bind {
            addr: config.listen.clone(),
            source,
        })?;
    tracing::info!(
        file = %store.path().display(),
        subjects = registry.subjects("", true).len(),
        "schema registry loaded"
    );
    Ok(Bound {
        listener,
        shared: Shared::new(registry, Some(store), config.cluster_id),
    })
}

impl Bound {
    /// The address the listener is bound to.
    pub fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.listener.local_addr()
    }

    /// The registry the server will serve, for lookups beside HTTP.
    pub fn shared(&self) -> Shared {
        self.shared.clone()
    }

    /// Serves until `stop` completes.
    pub async fn serve(
        self,
        stop: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), StartError> {
        axum::serve(self.listener, crate::http::router(self.shared))
            .with_graceful_shutdown(stop)
            .await
            .map_err(StartError::Serve)
    }
}

/// Loads the registry, listens (logging "schema registry listening on
/// ADDR"), and serves until `stop` completes.
pub async fn run(
    config: Config,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<(), StartError> {
    let bound = bind(config).await?;
    if let Ok(addr) = bound.local_addr() {
        tracing::info!("schema registry listening on {addr}");
    }
    bound.serve(stop).await
}
