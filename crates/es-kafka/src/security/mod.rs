//! Listeners and their security, in Kafka's terms: which listeners exist,
//! the security protocol of each, the broker settings that govern TLS, SASL
//! and authorization (parsed once from Kafka-named settings and validated),
//! and which listener the request being handled came in on.
//!
//! - [`tls`]: rustls server configurations from PEM files, reloadable;
//! - [`alerts`]: the handshake alert es sends as Java's TLS does;
//! - [`sasl`]: one connection's SASL exchange (SaslHandshake,
//!   SaslAuthenticate, re-authentication) against [`credentials`];
//! - [`credentials`]: the API keys PLAIN checks and the SCRAM credentials.
//!
//! What an authenticated principal may do is es-auth's authorizer, applied
//! by the handlers.

pub mod alerts;
pub mod credentials;
pub mod sasl;
pub mod settings;
pub mod tls;

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;

use es_auth::acl::{Acls, Authorizer, AuthorizerConfig};
use es_auth::principal::{MappingRules, Principal};
use parking_lot::RwLock;

pub use settings::{ListenerSecurity, SecurityConfig};

/// A listener's security protocol (Kafka's `SecurityProtocol`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    /// Kafka's name.
    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    /// Whether the listener speaks TLS.
    pub fn tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    /// Whether clients authenticate with SASL before anything else.
    pub fn sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

impl fmt::Display for SecurityProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SecurityProtocol {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Ok(SecurityProtocol::Plaintext),
            "SSL" => Ok(SecurityProtocol::Ssl),
            "SASL_PLAINTEXT" => Ok(SecurityProtocol::SaslPlaintext),
            "SASL_SSL" => Ok(SecurityProtocol::SaslSsl),
            other => Err(format!(
                "{other:?} is not a security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)"
            )),
        }
    }
}

/// One listener as clients see it: its name, protocol and the address it
/// advertises. Where it binds is the binary's business.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListenerSpec {
    /// Kafka's listener name, upper case (`PLAINTEXT`, `SASL_SSL`, `CLIENT`).
    pub name: String,
    pub protocol: SecurityProtocol,
    /// Where it is bound, HOST:PORT.
    pub bind: String,
    pub advertised_host: String,
    pub advertised_port: i32,
}

impl ListenerSpec {
    /// The one PLAINTEXT listener es has without listener flags, bound
    /// where it is advertised.
    pub fn plaintext(host: &str, port: i32) -> Self {
        ListenerSpec {
            name: "PLAINTEXT".into(),
            protocol: SecurityProtocol::Plaintext,
            bind: format!("{host}:{port}"),
            advertised_host: host.to_string(),
            advertised_port: port,
        }
    }
}

/// Parses `NAME://HOST:PORT` (Kafka's listener syntax; `[v6]` hosts and an
/// empty host, meaning every interface, allowed). The name is upper-cased,
/// as Kafka's `ListenerName.normalised`.
pub fn parse_listener(s: &str) -> Result<(String, String, u16), String> {
    let (name, rest) = s
        .split_once("://")
        .ok_or_else(|| format!("{s:?} is not NAME://HOST:PORT"))?;
    let name = name.trim().to_ascii_uppercase();
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(format!("{s:?}: {name:?} is not a listener name"));
    }
    let (host, port) = rest
        .rsplit_once(':')
        .ok_or_else(|| format!("{s:?} is not NAME://HOST:PORT"))?;
    let port: u16 = port
        .parse()
        .map_err(|_| format!("{s:?}: {port:?} is not a port"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Ok((name, host.to_string(), port))
}

/// Kafka's `listener.security.protocol.map` default: each protocol's name
/// maps to itself.
pub fn default_protocol(name: &str) -> Option<SecurityProtocol> {
    name.parse().ok()
}

/// A broker's security at run time: its settings, the credentials SASL
/// checks, the mapping of certificate names to principals, and the
/// authorizer over the ACLs the metadata holds.
#[derive(Debug)]
pub struct Security {
    pub config: SecurityConfig,
    pub credentials: Arc<credentials::Credentials>,
    /// Client quotas, as the metadata has them, and the rates measured
    /// against them.
    pub quotas: Arc<crate::quota::ClientQuotaManagers>,
    mapping: MappingRules,
    /// Present when `authorizer.class.name` names the StandardAuthorizer;
    /// rebuilt whenever the applied ACLs change.
    authorizer: Option<RwLock<Arc<Authorizer>>>,
}

impl Security {
    /// The security of the broker whose data directory is `data_dir`.
    pub fn open(config: SecurityConfig, data_dir: &Path) -> Result<Self, String> {
        let mapping = MappingRules::parse(&config.principal_mapping_rules)
            .map_err(|e| format!("ssl.principal.mapping.rules: {e}"))?;
        let credentials = Arc::new(credentials::Credentials::open(data_dir)?);
        let authorizer = config.authorizer.then(|| {
            RwLock::new(Arc::new(Authorizer::new(
                &Acls::new(),
                Self::authorizer_config(&config),
            )))
        });
        let quotas = Arc::new(crate::quota::ClientQuotaManagers::new(config.quota_rate()));
        Ok(Security {
            config,
            credentials,
            quotas,
            mapping,
            authorizer,
        })
    }

    fn authorizer_config(config: &SecurityConfig) -> AuthorizerConfig {
        AuthorizerConfig {
            super_users: config.super_users.clone(),
            allow_everyone_if_no_acl_found: config.allow_everyone_if_no_acl_found,
        }
    }

    /// The authorizer over the ACLs applied so far; `None` when no
    /// authorizer is configured (every request is allowed, and the ACL APIs
    /// answer SECURITY_DISABLED, as Kafka without one).
    pub fn authorizer(&self) -> Option<Arc<Authorizer>> {
        self.authorizer.as_ref().map(|a| a.read().clone())
    }

    /// Takes the ACLs, SCRAM credentials and client quotas of the applied
    /// metadata.
    pub fn apply_metadata(&self, image: &es_meta::MetaImage) {
        self.quotas.set_quotas(&image.client_quotas);
        let (acls, scram) = (&image.acls, &image.scram);
        if let Some(a) = &self.authorizer {
            *a.write() = Arc::new(Authorizer::new(acls, Self::authorizer_config(&self.config)));
        }
        let mut all = BTreeMap::new();
        for (user, by_mech) in scram {
            for c in by_mech.values() {
                all.insert((user.clone(), c.mechanism), c.clone());
            }
        }
        self.credentials.set_scram(all);
    }

    /// Listener `name`'s settings (checked when the configuration was built).
    pub fn listener(&self, name: &str) -> ListenerSecurity {
        self.config.listener(name).unwrap_or_else(|e| {
            tracing::error!(error = %e, "listener settings unusable; using the broker-wide ones");
            self.config.broker_wide().clone()
        })
    }

    /// The principal a client certificate (DER) names, through
    /// `ssl.principal.mapping.rules`.
    pub fn principal_of_certificate(&self, der: &[u8]) -> Result<Principal, String> {
        es_auth::principal::principal_from_certificate(der, &self.mapping)
            .map_err(|e| e.to_string())
    }
}

tokio::task_local! {
    /// The listener the request being handled arrived on; set by the
    /// connection around each handler. Endpoints handed to a client
    /// (Metadata, FindCoordinator, leader hints) are those of this
    /// listener; tasks outside a request (replication, inter-broker calls)
    /// have none and use the inter-broker listener.
    static CURRENT_LISTENER: Arc<str>;
}

/// Runs `f` as a request that arrived on `listener`.
pub async fn on_listener<F: std::future::Future>(listener: Arc<str>, f: F) -> F::Output {
    CURRENT_LISTENER.scope(listener, f).await
}

/// The listener of the request being handled, if any.
pub fn current_listener() -> Option<Arc<str>> {
    CURRENT_LISTENER.try_with(|l| l.clone()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listeners_parse_as_kafka_writes_them() {
        assert_eq!(
            parse_listener("sasl_ssl://127.0.0.1:9093"),
            Ok(("SASL_SSL".into(), "127.0.0.1".into(), 9093))
        );
        assert_eq!(
            parse_listener("CLIENT://[::1]:0"),
            Ok(("CLIENT".into(), "::1".into(), 0))
        );
        assert_eq!(
            parse_listener("PLAINTEXT://:9092"),
            Ok(("PLAINTEXT".into(), String::new(), 9092))
        );
        assert!(parse_listener("127.0.0.1:9092").is_err());
        assert!(parse_listener("A B://h:1").is_err());
        assert!(parse_listener("X://h:99999").is_err());
        assert_eq!("sasl_ssl".parse(), Ok(SecurityProtocol::SaslSsl));
        assert!("TLS".parse::<SecurityProtocol>().is_err());
    }
}
