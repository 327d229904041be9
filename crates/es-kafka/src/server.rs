//! The accept loops: one per listener, bounded connections, TLS handshakes,
//! graceful shutdown.
//!
//! Every connection is counted ([`crate::limits::Connections`]): one over
//! `max.connections` or `max.connections.per.ip` is accepted and closed at
//! once, so its client sees the refusal at once instead of waiting in the
//! kernel's backlog (and the backlog never fills with clients nobody will
//! serve). On a TLS listener the handshake runs in the connection's own task, bounded in
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
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::broker::Broker;
use crate::connection::{self, Session};
use crate::limits::{Admitted, Connections};
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
    let counts = Connections::new(broker.config().security.connections.clone());
    // Kafka's rule: the inter-broker listener may exceed max.connections
    // when there are other listeners whose clients could crowd it out.
    let protected = (listeners.len() > 1)
        .then(|| broker.config().listeners.first().map(|l| l.name.clone()))
        .flatten();
    let mut loops = JoinSet::new();
    for l in &listeners {
        zero_counters(&l.spec);
    }
    for l in listeners {
        let exempt = protected.as_deref() == Some(l.spec.name.as_str());
        loops.spawn(accept_loop(
            broker.clone(),
            l,
            counts.clone(),
            exempt,
            shutdown.clone(),
            drain_timeout,
        ));
    }
    while loops.join_next().await.is_some() {}
}

async fn accept_loop(
    broker: Arc<Broker>,
    listener: BoundListener,
    counts: Arc<Connections>,
    exempt: bool,
    mut shutdown: watch::Receiver<bool>,
    drain_timeout: Duration,
) {
    let name: Arc<str> = Arc::from(listener.spec.name.as_str());
    let mut conns = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            a = listener.socket.accept() => a,
            _ = shutdown.changed() => break,
        };
        // Reap finished connections so the set holds open ones only.
        while conns.try_join_next().is_some() {}
        match accepted {
            Ok((stream, addr)) => {
                let permit = match counts.admit(addr.ip(), exempt, &broker.dynamic_configs()) {
                    Ok(p) => p,
                    Err(why) => {
                        // Closed at once (the stream is dropped here): the
                        // client sees its connection end, as from Kafka.
                        tracing::debug!(peer = %addr, listener = %name, reason = why.label(), "connection refused");
                        rejected(&name, why.label());
                        continue;
                    }
                };
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
    permit: Admitted,
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
            connection: None,
        };
        connection::serve(broker, stream, peer, session, shutdown).await;
        drop(permit);
        return;
    };
    // On the heap: the handshake's and a TLS connection's state are several
    // times a plaintext connection's, which must not pay for them.
    Box::pin(open_tls(
        broker, stream, peer, name, tls, shutdown, permit, sasl,
    ))
    .await;
}

/// [`open`] for a TLS listener: the handshake, the principal of a client
/// certificate, then the connection.
#[allow(clippy::too_many_arguments)]
async fn open_tls(
    broker: Arc<Broker>,
    stream: TcpStream,
    peer: String,
    name: Arc<str>,
    tls: Arc<Tls>,
    shutdown: watch::Receiver<bool>,
    permit: Admitted,
    sasl: Option<SaslSession>,
) {
    let security = broker.security();
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
        connection: None,
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
    for reason in ["idle", "request_read"] {
        let _ = m
            .connections_expired
            .get_or_create(&crate::metrics::ExpiredLabel { reason });
    }
    for why in crate::limits::Refused::ALL {
        let _ = m.connections_rejected.get_or_create(&RejectedLabel {
            listener: spec.name.clone(),
            reason: why.label(),
        });
    }
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    /// An idle connection costs little more than its task (docs/reliability.md:
    /// at most 10 KiB each, measured in es-broker's tests/limits.rs); the task
    /// of a plaintext connection must not carry a TLS handshake's state.
    #[tokio::test]
    async fn a_plaintext_connection_task_is_a_few_kib() {
        let dir = tempfile::tempdir().expect("tmp");
        let cfg = crate::broker::BrokerConfig::new(dir.path().to_path_buf(), "127.0.0.1:0");
        let (b, _) = crate::handlers::wire_client::broker_with_topic(cfg, "t").await;
        let l = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let _client = tokio::net::TcpStream::connect(l.local_addr().expect("addr"))
            .await
            .expect("connect");
        let (server, _) = l.accept().await.expect("accept");
        let (_stop, shutdown) = tokio::sync::watch::channel(false);
        let counts = crate::limits::Connections::new(Default::default());
        let admitted = counts
            .admit(
                "127.0.0.1".parse().expect("ip"),
                false,
                &crate::config::DynamicBrokerConfigs::default(),
            )
            .expect("admitted");
        let task = super::open(
            b.clone(),
            server,
            "127.0.0.1:1".into(),
            crate::security::ListenerSpec::plaintext("127.0.0.1", 1),
            Arc::from("PLAINTEXT"),
            None,
            shutdown,
            admitted,
        );
        let size = std::mem::size_of_val(&task);
        assert!(size <= 3 * 1024, "a connection's task is {size} bytes");
        drop(task);
    }
}
