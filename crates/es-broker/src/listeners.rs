//! The listeners the flags and settings ask for, bound: each with its name,
//! security protocol, advertised address and, on SSL and SASL_SSL, its TLS
//! configuration (read now, so a bad certificate stops the start, and again
//! on SIGHUP).
//!
//! With no `--listener`, es has exactly one PLAINTEXT listener at `--listen`
//! (127.0.0.1:9092): the embedded default. The inter-broker listener
//! (`inter.broker.listener.name`, else the first) comes first; in a cluster
//! it must be PLAINTEXT, since nodes reach each other without credentials.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::{bail, Context};
use es_kafka::security::tls::Tls;
use es_kafka::security::{
    default_protocol, parse_listener, ListenerSpec, SecurityConfig, SecurityProtocol,
};
use es_kafka::server::BoundListener;
use tokio::net::TcpListener;

use crate::Args;

/// `--listen`'s default: the embedded default's one listener.
pub const LISTEN_DEFAULT: &str = "127.0.0.1:9092";

/// The bound listeners.
#[derive(Debug)]
pub struct Bound {
    /// The inter-broker listener first.
    pub listeners: Vec<BoundListener>,
    /// Where the first listener is bound, HOST:PORT.
    pub first_bind: String,
    /// Every TLS configuration, for SIGHUP.
    pub tls: Vec<Arc<Tls>>,
}

/// `NAME:PROTO,...`.
fn protocol_map(s: Option<&str>) -> anyhow::Result<BTreeMap<String, SecurityProtocol>> {
    let mut out = BTreeMap::new();
    for e in s
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
    {
        let (name, proto) = e.split_once(':').with_context(|| {
            format!("--listener-security-protocol-map: {e:?} is not NAME:PROTOCOL")
        })?;
        let proto: SecurityProtocol = proto
            .parse()
            .map_err(|m| anyhow::anyhow!("--listener-security-protocol-map: {m}"))?;
        out.insert(name.trim().to_ascii_uppercase(), proto);
    }
    Ok(out)
}

/// Binds every listener.
pub async fn bind(args: &Args, security: &SecurityConfig) -> anyhow::Result<Bound> {
    let wanted: Vec<(String, String, u16)> = if args.listeners.is_empty() {
        let (host, port) = es_kafka::broker::split_host_port(&args.listen)
            .with_context(|| format!("--listen {:?} is not HOST:PORT", args.listen))?;
        let port = u16::try_from(port).context("--listen port")?;
        vec![("PLAINTEXT".to_string(), host, port)]
    } else {
        if args.listen != LISTEN_DEFAULT {
            bail!("give either --listen (one PLAINTEXT listener) or --listener, not both");
        }
        args.listeners
            .iter()
            .map(|l| parse_listener(l).map_err(|e| anyhow::anyhow!("--listener {e}")))
            .collect::<anyhow::Result<_>>()?
    };
    let map = protocol_map(args.listener_security_protocol_map.as_deref())?;
    let mut advertised: BTreeMap<String, (String, i32)> = BTreeMap::new();
    for a in &args.advertised_listeners {
        let (name, host, port) = if a.contains("://") {
            parse_listener(a).map_err(|e| anyhow::anyhow!("--advertised-listener {e}"))?
        } else {
            // HOST:PORT: the first listener's (the one-listener shorthand).
            let (h, p) = es_kafka::broker::split_host_port(a).with_context(|| {
                format!("--advertised-listener {a:?} is not HOST:PORT or NAME://HOST:PORT")
            })?;
            (wanted[0].0.clone(), h, u16::try_from(p).context("port")?)
        };
        if !wanted.iter().any(|w| w.0 == name) {
            bail!("--advertised-listener {a:?}: there is no listener {name}");
        }
        advertised.insert(name, (host, i32::from(port)));
    }
    let mut seen = std::collections::BTreeSet::new();
    for (name, ..) in &wanted {
        if !seen.insert(name.clone()) {
            bail!("listener {name} is given twice");
        }
    }
    for name in map.keys().chain(
        security
            .configured_listeners()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .iter(),
    ) {
        if !seen.contains(name) {
            bail!("settings name listener {name}, which is not among the listeners");
        }
    }
    let mut listeners = Vec::new();
    let mut tls_all = Vec::new();
    for (name, host, port) in wanted {
        let protocol = match map.get(&name).copied().or_else(|| default_protocol(&name)) {
            Some(p) => p,
            None => bail!(
                "listener {name} has no security protocol: name it in --listener-security-protocol-map ({name}:SASL_SSL, ...)"
            ),
        };
        let bind_host = if host.is_empty() {
            "0.0.0.0".to_string()
        } else {
            host
        };
        let addr = if bind_host.contains(':') {
            format!("[{bind_host}]:{port}")
        } else {
            format!("{bind_host}:{port}")
        };
        let socket = TcpListener::bind(&addr)
            .await
            .with_context(|| format!("binding listener {name} on {addr}"))?;
        let local = socket.local_addr().context("reading the bound address")?;
        let (adv_host, adv_port) = match advertised.get(&name) {
            Some(a) => a.clone(),
            None if local.ip().is_unspecified() => {
                // Clients cannot connect to 0.0.0.0; loopback is the one
                // address that surely reaches us. Say so, since remote
                // clients need more.
                let host = if local.is_ipv4() { "127.0.0.1" } else { "::1" };
                tracing::warn!(
                    listener = %name,
                    "listening on {local} without an advertised listener; advertising {host}:{}, which only local clients can reach",
                    local.port()
                );
                (host.to_string(), i32::from(local.port()))
            }
            None => (local.ip().to_string(), i32::from(local.port())),
        };
        let tls = if protocol.tls() {
            let files = security
                .listener_tls(&name, protocol.sasl())
                .map_err(|e| anyhow::anyhow!(e))?;
            let t =
                Arc::new(Tls::load(files).map_err(|e| anyhow::anyhow!("listener {name}: {e}"))?);
            tls_all.push(t.clone());
            Some(t)
        } else {
            None
        };
        listeners.push(BoundListener {
            spec: ListenerSpec {
                name,
                protocol,
                bind: local.to_string(),
                advertised_host: adv_host,
                advertised_port: adv_port,
            },
            socket,
            tls,
        });
    }
    if let Some(ib) = &security.inter_broker_listener {
        let Some(i) = listeners.iter().position(|l| &l.spec.name == ib) else {
            bail!("inter.broker.listener.name={ib}, which is not among the listeners");
        };
        let l = listeners.remove(i);
        listeners.insert(0, l);
    }
    if args.controller_quorum_voters.is_some()
        && listeners[0].spec.protocol != SecurityProtocol::Plaintext
    {
        bail!(
            "in a cluster the inter-broker listener ({}) must be PLAINTEXT: add one (for example INTERNAL://HOST:PORT with INTERNAL:PLAINTEXT) and name it in inter.broker.listener.name",
            listeners[0].spec.name
        );
    }
    if args.controller_quorum_voters.is_some()
        && security.authorizer
        && !security.super_users.iter().any(|u| u == "User:ANONYMOUS")
    {
        // Nodes reach each other over the PLAINTEXT inter-broker listener,
        // as User:ANONYMOUS; replica fetches and transaction markers need
        // CLUSTER_ACTION (docs/security.md).
        tracing::warn!(
            "an authorizer in a cluster: other nodes connect as User:ANONYMOUS on {}; add it to super.users (and keep that listener private) or replication is refused",
            listeners[0].spec.name
        );
    }
    let first_bind = listeners[0]
        .socket
        .local_addr()
        .map(|a| a.to_string())
        .context("reading the bound address")?;
    Ok(Bound {
        listeners,
        first_bind,
        tls: tls_all,
    })
}

/// Reads every listener's certificates again on each SIGHUP; connections
/// already open keep theirs, and a reload that fails keeps the old ones.
/// The handler is installed before this returns (SIGHUP's default action
/// would end the process).
pub fn reload_on_sighup(tls: Vec<Arc<Tls>>) {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hup = match signal(SignalKind::hangup()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "cannot watch SIGHUP; certificates are read only at start");
            return;
        }
    };
    tokio::spawn(async move {
        while hup.recv().await.is_some() {
            for t in &tls {
                match t.reload() {
                    Ok(()) => tracing::info!("TLS certificates reloaded"),
                    Err(e) => {
                        tracing::error!(error = %e, "TLS certificates not reloaded; keeping the previous ones")
                    }
                }
            }
        }
    });
}
