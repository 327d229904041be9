//! `--schema-registry-listen`: starts es-registry's HTTP server beside the
//! Kafka listeners, with its data in `<data dir>/schemas.json`. The
//! registry is a guest: if it cannot start (its file is damaged, its port
//! is taken) it logs why and the broker serves Kafka without it.
//!
//! Once loaded, the registry is registered as the broker's
//! [`SchemaIds`] (an adapter: es-kafka knows no registry, es-registry no
//! Kafka), which produce-time schema id validation asks; until then, and
//! when it does not run, topics that validate refuse produce.
//!
//! In a cluster (`--controller-quorum-voters`) the registry's changes are
//! entries of the metadata log ([`MetaLog`]): a write on any node is sent
//! to the quorum's leader, ordered there, and answered once this node has
//! applied it; a read first waits until this node has applied everything
//! committed when it began (a read index from the leader), so a read on any
//! node sees every write answered before it. Every applied change is handed
//! to the registry and written to this node's `schemas.json` as a copy.
//!
//! When the broker has a SASL listener the registry requires HTTP basic
//! authentication with the broker's credentials (an API key and secret,
//! or a SCRAM user and password), and with an authorizer configured it
//! asks the broker's ACLs through [`BrokerAccess`]'s mapping: subject `S`
//! is the topic resource `__schema_S` ([`SUBJECT_PREFIX`]), the registry
//! as a whole (global compatibility and mode) is the cluster resource.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use es_meta::node::MetaNode;
use es_meta::{MetaRequest, MetaResponse};
use es_registry::change::{BoxFuture, Replicated};
use es_registry::{Change, RegistryError};
use parking_lot::Mutex;
use serde_json::Value;

use es_auth::acl::{java_host_address, AclOperation, ResourceType, CLUSTER_NAME};
use es_registry::access::{Access, Operation, Principal, Resource};

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

/// The running registry, for the admin API (a broker extension; empty
/// when no registry runs).
#[derive(Debug, Default)]
pub struct RegistryHandle(std::sync::OnceLock<es_registry::Shared>);

impl RegistryHandle {
    pub fn get(&self) -> Option<&es_registry::Shared> {
        self.0.get()
    }
}

/// The prefix that makes a subject's name a topic resource name in the
/// broker's ACLs (the name IBM Event Streams uses for the same purpose).
pub const SUBJECT_PREFIX: &str = "__schema_";

/// The registry's credentials and decisions, from the broker's.
#[derive(Debug)]
struct BrokerAccess(Arc<Broker>);

impl Access for BrokerAccess {
    fn authenticate(&self, user: &str, password: &str, host: IpAddr) -> Option<Principal> {
        let p = crate::admin::check_credentials(&self.0, user, password)?;
        Some(Principal {
            name: p.to_string(),
            host,
        })
    }

    fn allowed(&self, who: &Principal, operation: Operation, resource: Resource<'_>) -> bool {
        let Some(authorizer) = self.0.security().authorizer() else {
            // No authorizer configured: every authenticated caller may
            // do everything, as on the Kafka listeners.
            return true;
        };
        let operation = match operation {
            Operation::Read => AclOperation::Read,
            Operation::Write => AclOperation::Write,
            Operation::Delete => AclOperation::Delete,
            Operation::Describe => AclOperation::Describe,
            Operation::DescribeConfigs => AclOperation::DescribeConfigs,
            Operation::AlterConfigs => AclOperation::AlterConfigs,
        };
        let host = java_host_address(who.host);
        match resource {
            Resource::Subject(s) => authorizer.authorize(
                &who.name,
                &host,
                operation,
                ResourceType::Topic,
                &format!("{SUBJECT_PREFIX}{s}"),
            ),
            Resource::Registry => authorizer.authorize(
                &who.name,
                &host,
                operation,
                ResourceType::Cluster,
                CLUSTER_NAME,
            ),
        }
        .allowed
    }

    fn failed_authentication_delay(&self) -> Duration {
        Duration::from_millis(self.0.security().config.failed_authentication_delay_ms)
    }
}

/// The registry's changes through the cluster's metadata log.
#[derive(Debug, Clone)]
struct MetaLog {
    node: Arc<MetaNode>,
    /// The registry this node serves, once bound.
    shared: Arc<OnceLock<es_registry::Shared>>,
    /// The image's registry last handed to `shared`.
    served: Arc<Mutex<Option<Arc<es_registry::Registry>>>>,
}

impl MetaLog {
    /// Hands the applied image's registry to the registry if it changed
    /// since the last call; true if it did.
    fn sync(&self) -> bool {
        let Some(shared) = self.shared.get() else {
            return false;
        };
        let image = self.node.image();
        let current = image.registry.shared();
        let mut served = self.served.lock();
        if served.as_ref().is_some_and(|s| Arc::ptr_eq(s, current)) {
            return false;
        }
        shared.set_committed(es_registry::Registry::clone(current));
        *served = Some(current.clone());
        true
    }
}

fn unavailable(e: es_meta::node::MetaError) -> RegistryError {
    RegistryError::Store(format!("the cluster's metadata log: {e}"))
}

/// How often a change whose outcome was lost (the leader's connection
/// closed before its answer) is sent again, when sending it again is safe.
const UNCERTAIN_RETRIES: usize = 5;
/// The pause before sending it again (a new leader is being elected).
const UNCERTAIN_PAUSE: Duration = Duration::from_millis(300);

/// Whether applying `change` twice answers as applying it once: a
/// registration (the same schema gets the same id and version) and setting
/// a level or mode. Deletes are not (the second finds it deleted).
fn idempotent(change: &Change) -> bool {
    matches!(
        change,
        Change::Register { .. } | Change::SetConfig { .. } | Change::SetMode { .. }
    )
}

impl Replicated for MetaLog {
    fn change(&self, change: Change) -> BoxFuture<Result<Value, RegistryError>> {
        let log = self.clone();
        Box::pin(async move {
            let mut attempt = 0;
            let (index, response) = loop {
                let request = MetaRequest::RegistryChange {
                    change: change.clone(),
                };
                match log.node.write(request).await {
                    Ok(r) => break r,
                    Err(es_meta::node::MetaError::Uncertain(why))
                        if idempotent(&change) && attempt < UNCERTAIN_RETRIES =>
                    {
                        attempt += 1;
                        tracing::info!(%why, attempt, "a registry change's answer was lost; sending it again");
                        tokio::time::sleep(UNCERTAIN_PAUSE).await;
                    }
                    Err(e) => return Err(unavailable(e)),
                }
            };
            log.node.wait_applied(index).await.map_err(unavailable)?;
            log.sync();
            match response {
                MetaResponse::Registry { result } => result,
                other => Err(RegistryError::Store(format!(
                    "unexpected answer from the metadata log: {other:?}"
                ))),
            }
        })
    }

    fn barrier(&self) -> BoxFuture<Result<(), RegistryError>> {
        let log = self.clone();
        Box::pin(async move {
            log.node.read_barrier().await.map_err(unavailable)?;
            log.sync();
            Ok(())
        })
    }
}

/// Keeps the registry and `schemas.json` at the applied image's registry
/// (changes proposed by other nodes) until `stop`.
async fn follow(log: MetaLog, mut stop: watch::Receiver<bool>) {
    let mut applied = log.node.applied();
    loop {
        if log.sync() {
            if let Some(shared) = log.shared.get().cloned() {
                let saved = tokio::task::spawn_blocking(move || shared.save_committed()).await;
                if let Ok(Err(e)) = saved {
                    tracing::error!("cannot write the registry's copy in schemas.json: {e}");
                }
            }
        }
        tokio::select! {
            changed = applied.changed() => if changed.is_err() { return },
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// es-registry as produce-time validation asks it. In a cluster it asks
/// the applied metadata image, so that a schema is known to a partition's
/// leader as soon as the leader has applied the entry that registered it
/// (before the registry's copy follows).
#[derive(Debug)]
struct RegistryIds {
    shared: es_registry::Shared,
    node: Option<Arc<MetaNode>>,
}

impl SchemaIds for RegistryIds {
    fn is_registered(&self, subject: &str, id: i32) -> bool {
        match &self.node {
            Some(node) => node.image().registry.registry().is_registered(subject, id),
            None => self.shared.is_registered(subject, id),
        }
    }

    fn record_name(&self, id: i32) -> Option<String> {
        self.shared.record_name(id).or_else(|| {
            let node = self.node.as_ref()?;
            node.image().registry.registry().record_name(id)
        })
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
    let log = match (clustered, broker.meta_node()) {
        (true, Some(node)) => Some(MetaLog {
            node: node.clone(),
            shared: Arc::new(OnceLock::new()),
            served: Arc::new(Mutex::new(None)),
        }),
        _ => None,
    };
    let sasl = broker.listener_specs().iter().any(|l| l.protocol.sasl());
    let access: Option<Arc<dyn Access>> = sasl.then(|| {
        tracing::info!(
            "the schema registry requires HTTP basic authentication (the broker has a SASL listener)"
        );
        Arc::new(BrokerAccess(broker.clone())) as Arc<dyn Access>
    });
    let config = es_registry::Config {
        listen,
        data_dir,
        cluster_id: broker.cluster_id().to_string(),
        access,
        replicated: log.clone().map(|l| Arc::new(l) as Arc<dyn Replicated>),
    };
    tokio::spawn(async move {
        let bound = match es_registry::bind(config).await {
            Ok(b) => b,
            Err(e) => {
                tracing::error!("{e}; the broker runs without the schema registry");
                return;
            }
        };
        if let Some(log) = &log {
            let image = log.node.image();
            let local_only = bound.shared().with_registry(|local| {
                let n = local.subjects("", true).len();
                (n > 0 && local.state() != image.registry.registry().state()).then_some(n)
            });
            if let Some(subjects) = local_only {
                tracing::warn!(
                    subjects,
                    "this node's schemas.json differs from the cluster's registry (the metadata log): the cluster's is served and replaces the file"
                );
            }
            let _ = log.shared.set(bound.shared());
            log.sync();
            tokio::spawn(follow(log.clone(), stop.clone()));
        }
        broker
            .extension(SchemaSlot::default)
            .set(Arc::new(RegistryIds {
                shared: bound.shared(),
                node: log.as_ref().map(|l| l.node.clone()),
            }));
        let _ = broker
            .extension(RegistryHandle::default)
            .0
            .set(bound.shared());
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
