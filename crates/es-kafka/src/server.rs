//! The accept loops: one per listener, bounded connections, TLS handshakes,
//! graceful shutdown.
//!
//! A semaphore shared by every listener bounds how many connections are
//! served at once (`max.connections`); when it is exhausted the loops stop
//! accepting until one closes (the kernel's backlog holds the rest). On a
//! TLS listener the handshake runs in the connection's own task, bounded in
//! time, so a peer that opens a socket and says nothing (or speaks
//! plaintext) holds one permit for at most [`TLS_HANDSHAKE_TIMEOUT`] and
//! never the loop. Shutdown is a `watch` flag: the loops stop accepting,
//! every connection stops reading, answers what it already read, and the
//! server returns once all of them are gone (or `drain_timeout` passes).

use crate::metrics::{kafka_metrics, ListenerLabel, RejectedLabel};
use std::sync::Arc;
use std::time::Duration;

use es_auth::principal::Principal;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use crate::broker::Broker;
use crate::connection::{self, Session};
use crate::security::sasl::SaslSession;
use crate::security::tls::Tls;
use crate::security::ListenerSpec;

/// How long a TLS client has to finish its handshake.
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A listener with its socket bound.
#[derive(Debug)]
pub struct BoundListener {
    pub spec: ListenerSpec,
    pub socket: TcpListener,
    /// Present on SSL and SASL_SSL listeners.
    pub tls: Option<Arc<Tls>>,
}

impl BoundListener {
    /// A PLAINTEXT listener on `socket`, advertising its bound address.
    pub fn plaintext(socket: TcpListener) -> std::io::Result<Self> {
        let local = socket.local_addr()?;
        Ok(BoundListener {
            spec: ListenerSpec::plaintext(&local.ip().to_string(), i32::from(local.port())),
            socket,
            tls: None,
        })
    }
}

/// Accepts connections on every listener until `shutdown` becomes true,
/// then waits up to `drain_timeout` for open connections to finish their
/// requests.
pub async fn run(
    broker: Arc<Broker>,
    listeners: Vec<BoundListener>,
    shutdown: watch::Receiver<bool>,
    drain_timeout: Duration,
) {
    let limit = Arc::new(Semaphore::new(broker.config().connections_max.max(1)));
    let mut loops = JoinSet::new();
    for l in &listeners {
        zero_counters(&l.spec);
    }
    for l in listeners {
        loops.spawn(accept_loop(
            broker.clone(),
            l,
            limit.clone(),
            shutdown.clone(),
            drain_timeout,
        ));
    }
    while loops.join_next().await.is_some() {}
}

async fn accept_loop(
    broker: Arc<Broker>,
    listener: BoundListener,
    limit: Arc<Semaphore>,
    mut shutdown: watch::Receiver<bool>,
    drain_timeout: Duration,
) {
    let name: Arc<str> = Arc::from(listener.spec.name.as_str());
    let mut conns = JoinSet::new();
    loop {
        let permit = tokio::select! {
            p = limit.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            _ = shutdown.changed() => break,
        };
        let accepted = tokio::select! {
            a = listener.socket.accept() => a,
            _ = shutdown.changed() => break,
        };
        // Reap finished connections so the set stays bounded by the semaphore.
        while conns.try_join_next().is_some() {}
        match accepted {
            Ok((stream, addr)) => {
                let _ = stream.set_nodelay(true);
                let b = broker.clone();
                let rx = shutdown.clone();
                let tls = listener.tls.clone();
                let spec = listener.spec.clone();
                let name = name.clone();
                conns.spawn(async move {
                    tracing::debug!(peer = %addr, listener = %name, "accepted connection");
                    open(b, stream, addr.to_string(), spec, name, tls, rx, permit).await;
                });
            }
            Err(e) => {
                // Out of file descriptors and the like: back off briefly
                // instead of spinning, then keep serving.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    tracing::info!(
        listener = %name,
        open = conns.len(),
        "stopped accepting; draining connections"
    );
    // Parked fetches answer now instead of waiting out their max_wait_ms.
    broker.begin_shutdown();
    let drained = tokio::time::timeout(drain_timeout, async {
        while conns.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            listener = %name,
            open = conns.len(),
            "drain timed out; dropping remaining connections"
        );
        conns.abort_all();
    }
}

/// Sets up one accepted connection (TLS, the client's principal, SASL) and
/// serves it.
#[allow(clippy::too_many_arguments)]
async fn open(
    broker: Arc<Broker>,
    stream: TcpStream,
    peer: String,
    spec: ListenerSpec,
    name: Arc<str>,
    tls: Option<Arc<Tls>>,
    shutdown: watch::Receiver<bool>,
    permit: OwnedSemaphorePermit,
) {
    let _open = OpenConnection::new(&name);
    let security = broker.security();
    let sasl = spec.protocol.sasl().then(|| {
        let ls = security.listener(&spec.name);
        SaslSession::new(
            ls,
            security.credentials.clone(),
            Duration::from_millis(security.config.failed_authentication_delay_ms),
            security.config.sasl_max_receive_size,
        )
    });
    let Some(tls) = tls else {
        let session = Session {
            listener: Some(name),
            principal: Arc::new(Principal::anonymous()),
            sasl,
        };
        connection::serve(broker, stream, peer, session, shutdown).await;
        drop(permit);
        return;
    };
    let accept = tls
        .acceptor()
        .accept(crate::security::alerts::JavaHandshakeAlerts::new(stream));
    let stream = match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, accept).await {
        Ok(Ok(mut s)) => {
            s.get_mut().0.handshake_done();
            s
        }
        Ok(Err(e)) => {
            tracing::info!(%peer, listener = %name, error = %e, "TLS handshake failed");
            rejected(&name, "tls_handshake");
            return;
        }
        Err(_) => {
            tracing::info!(%peer, listener = %name, "TLS handshake timed out");
            rejected(&name, "tls_handshake");
            return;
        }
    };
    // On an SSL listener the client certificate names the principal
    // (through ssl.principal.mapping.rules); on SASL_SSL, SASL does.
    let mut principal = Principal::anonymous();
    if sasl.is_none() {
        if let Some(cert) = stream
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|c| c.first())
        {
            match security.principal_of_certificate(cert.as_ref()) {
                Ok(p) => principal = p,
                Err(e) => {
                    tracing::warn!(%peer, listener = %name, error = %e, "client certificate maps to no principal; closing");
                    rejected(&name, "principal_mapping");
                    return;
                }
            }
        }
    }
    let session = Session {
        listener: Some(name),
        principal: Arc::new(principal),
        sasl,
    };
    connection::serve(broker, stream, peer, session, shutdown).await;
    drop(permit);
}

/// One open client connection, counted in `es_connections` while it lives
/// (and in `es_connections_accepted_total` once).
struct OpenConnection(ListenerLabel);

impl OpenConnection {
    fn new(listener: &str) -> OpenConnection {
        let label = ListenerLabel {
            listener: listener.to_string(),
        };
        let m = kafka_metrics();
        m.connections_accepted.get_or_create(&label).inc();
        m.connections.get_or_create(&label).inc();
        m.connections_all
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        OpenConnection(label)
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        let m = kafka_metrics();
        m.connections.get_or_create(&self.0).dec();
        m.connections_all
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Counts a connection closed before its first request, and why.
fn rejected(listener: &str, reason: &'static str) {
    kafka_metrics()
        .connections_rejected
        .get_or_create(&RejectedLabel {
            listener: listener.to_string(),
            reason,
        })
        .inc();
}

/// Creates a listener's connection series at zero, so that they exist
/// (and `rate()` over them works) before the first event: the refusals of
/// a TLS listener, the authentication failures of a SASL one.
fn zero_counters(spec: &ListenerSpec) {
    let m = kafka_metrics();
    let label = ListenerLabel {
        listener: spec.name.clone(),
    };
    let _ = m.connections.get_or_create(&label);
    let _ = m.connections_accepted.get_or_create(&label);
    if spec.protocol.tls() {
        for reason in ["tls_handshake", "principal_mapping"] {
            let _ = m.connections_rejected.get_or_create(&RejectedLabel {
                listener: spec.name.clone(),
                reason,
            });
        }
    }
    if spec.protocol.sasl() {
        for mechanism in ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] {
            let _ = m
                .authentication_failures
                .get_or_create(&crate::metrics::AuthLabel {
                    listener: spec.name.clone(),
                    mechanism: mechanism.to_string(),
                });
        }
    }
}
