//! The registry's async shell: it loads `schemas.json`, binds the HTTP
//! listener, and serves [`crate::http::router`] until told to stop. Every
//! operation runs on tokio's blocking pool (parsing a large schema or
//! fsyncing the file must not stall the runtime's workers).
//!
//! Writes are group-committed ([`crate::commit`]): a change runs on a copy
//! of the working registry (so a refused change leaves nothing behind) and
//! the copy becomes the working registry at once; the request is answered
//! only when a write of `schemas.json` holding its change has been
//! fsync'd and renamed into place. Changes that arrive while a write is
//! under way wait and are written together by the next one, which runs
//! outside the lock, so one fsync serves many registrations. Reads see the
//! committed registry, the one the file holds, never a change that is not
//! yet durable. A request that changed nothing writes nothing (it waits
//! only for what it saw to be durable). After a failed write the registry
//! refuses every change (50001) until restart; reads go on.
//!
//! Readers (an HTTP read, or the broker's produce-time validation through
//! [`Shared::is_registered`] and [`Shared::record_name`]) take the committed
//! registry's read lock, which a write holds only to swap in what it made
//! durable: a reader never waits for a change's parse or fsync, and the
//! broker accepts a schema id only once its registration is durable (when
//! the client that registered it has its answer).

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

use std::collections::HashMap;

use parking_lot::{Condvar, Mutex, RwLock};
use serde_json::Value;

use crate::access::{Access, Remembered};
use crate::change::{Change, Replicated};
use crate::commit::{GroupCommit, Next};
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
    /// Authentication and authorization; None: open to everyone.
    pub access: Option<Arc<dyn Access>>,
    /// The log changes go through when several nodes serve one registry;
    /// None: this node's `schemas.json` alone, group-committed.
    pub replicated: Option<Arc<dyn Replicated>>,
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
    /// What `schemas.json` holds: the registry reads see.
    committed: RwLock<Registry>,
    /// The working registry (every change applied, durable or not) and the
    /// group-commit state. Lock order: `working`, then `committed`.
    working: Mutex<Working>,
    /// Signalled when a write finishes.
    written: Condvar,
    /// Record names by schema id (an id names one schema for ever, so a
    /// name found stays true), at most [`crate::limits::RECORD_NAMES_MAX`].
    record_names: Mutex<HashMap<i32, String>>,
    /// None: kept in memory only (tests of the HTTP layer).
    store: Option<Store>,
    cluster_id: String,
    access: Option<Arc<dyn Access>>,
    remembered: Remembered,
    replicated: Option<Arc<dyn Replicated>>,
}

#[derive(Debug)]
struct Working {
    registry: Registry,
    commit: GroupCommit,
}

impl Shared {
    pub fn new(registry: Registry, store: Option<Store>, cluster_id: String) -> Shared {
        Shared::with_access(registry, store, cluster_id, None, None)
    }

    /// A registry whose requests `access` authenticates and authorizes.
    pub fn with_access(
        registry: Registry,
        store: Option<Store>,
        cluster_id: String,
        access: Option<Arc<dyn Access>>,
        replicated: Option<Arc<dyn Replicated>>,
    ) -> Shared {
        Shared {
            inner: Arc::new(Inner {
                committed: RwLock::new(registry.clone()),
                working: Mutex::new(Working {
                    registry,
                    commit: GroupCommit::new(),
                }),
                written: Condvar::new(),
                record_names: Mutex::new(HashMap::new()),
                store,
                cluster_id,
                access,
                remembered: Remembered::default(),
                replicated,
            }),
        }
    }

    pub fn cluster_id(&self) -> &str {
        &self.inner.cluster_id
    }

    /// Who checks credentials and decides, if anyone.
    pub fn access(&self) -> Option<&Arc<dyn Access>> {
        self.inner.access.as_ref()
    }

    pub(crate) fn remembered(&self) -> &Remembered {
        &self.inner.remembered
    }

    /// Applies one change of the API: through the log when the registry
    /// is replicated, otherwise here, durable in `schemas.json` before the
    /// answer.
    pub async fn change(&self, change: Change) -> Result<Value> {
        match &self.inner.replicated {
            Some(log) => log.change(change).await,
            None => self.write(move |r| r.apply(&change)).await,
        }
    }

    /// The registry this node serves from now on: a replicated registry's
    /// embedder calls it with every registry its log's apply makes. (The
    /// working registry of local group commit is not used then.)
    pub fn set_committed(&self, registry: Registry) {
        *self.inner.committed.write() = registry;
    }

    /// Writes the registry reads see to `schemas.json` (a replicated
    /// registry's copy of its log's state). Blocking.
    pub fn save_committed(&self) -> std::result::Result<(), StoreError> {
        match &self.inner.store {
            Some(store) => store.save(&self.inner.committed.read()),
            None => Ok(()),
        }
    }

    /// Runs a read on the blocking pool, over the committed registry
    /// (when replicated, once this node has applied every change committed
    /// before the read began).
    pub async fn read<F>(&self, f: F) -> Result<Value>
    where
        F: FnOnce(&Registry) -> Result<Value> + Send + 'static,
    {
        if let Some(log) = &self.inner.replicated {
            log.barrier().await?;
        }
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || f(&inner.committed.read()))
            .await
            .map_err(|_| RegistryError::Store("the operation failed".into()))?
    }

    /// Runs a change on a copy of the working registry, keeps the copy, and
    /// answers once a write holding the change is durable (group commit:
    /// see the module's comment).
    pub async fn write<F>(&self, f: F) -> Result<Value>
    where
        F: FnOnce(&mut Registry) -> Result<Value> + Send + 'static,
    {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || inner.change(f))
            .await
            .map_err(|_| RegistryError::Store("the operation failed".into()))?
    }
}

impl Inner {
    fn change<F>(&self, f: F) -> Result<Value>
    where
        F: FnOnce(&mut Registry) -> Result<Value>,
    {
        let refused = || {
            RegistryError::Store(
                "an earlier write of the schema registry's file failed: restart es to go on".into(),
            )
        };
        let mut w = self.working.lock();
        if !w.commit.accepting() {
            return Err(refused());
        }
        let mut next = w.registry.clone();
        let out = f(&mut next)?;
        let seq = if next.generation() != w.registry.generation() {
            w.registry = next;
            w.commit.applied()
        } else {
            w.commit.current()
        };
        loop {
            match w.commit.next(seq) {
                Next::Durable => return Ok(out),
                Next::Failed => return Err(refused()),
                Next::Wait => self.written.wait(&mut w),
                Next::Write(upto) => {
                    let snapshot = w.registry.clone();
                    // The file is written and fsync'd without the lock:
                    // changes arriving meanwhile are applied and wait for
                    // the next write.
                    let saved = parking_lot::MutexGuard::unlocked(&mut w, || match &self.store {
                        Some(store) => store.save(&snapshot),
                        None => Ok(()),
                    });
                    let ok = match saved {
                        Ok(()) => {
                            // The old registry is dropped after the swap,
                            // outside the readers' lock.
                            let _old = std::mem::replace(&mut *self.committed.write(), snapshot);
                            true
                        }
                        Err(e) => {
                            tracing::error!(error = %e, "cannot write the schema registry's file; refusing changes until restart");
                            false
                        }
                    };
                    w.commit.written(upto, ok);
                    self.written.notify_all();
                }
            }
        }
    }
}

impl Shared {
    /// Whether a live version of `subject` names schema `id` in the
    /// committed registry (produce-time validation; waits only for a
    /// write's swap, never a change's parse or fsync).
    pub fn is_registered(&self, subject: &str, id: i32) -> bool {
        self.inner.committed.read().is_registered(subject, id)
    }

    /// Runs `f` on the registry as it is now (the broker's admin API reads
    /// subjects and schemas this way; waits only for a change's swap).
    pub fn with_registry<T>(&self, f: impl FnOnce(&Registry) -> T) -> T {
        f(&self.inner.committed.read())
    }

    /// The record name of schema `id` ([`Registry::record_name`]),
    /// remembered once found: the schema is parsed once per id.
    pub fn record_name(&self, id: i32) -> Option<String> {
        if let Some(n) = self.inner.record_names.lock().get(&id) {
            return Some(n.clone());
        }
        let name = self.inner.committed.read().record_name(id)?;
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
        shared: Shared::with_access(
            registry,
            Some(store),
            config.cluster_id,
            config.access,
            config.replicated,
        ),
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
        let app = crate::http::router(self.shared)
            .into_make_service_with_connect_info::<std::net::SocketAddr>();
        axum::serve(self.listener, app)
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
