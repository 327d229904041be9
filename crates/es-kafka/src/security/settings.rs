//! The security settings of a broker, in Kafka's names, parsed and checked
//! once at start: a name es does not know, or a value it cannot use, is an
//! error then, never ignored later.
//!
//! Per-listener values use Kafka's prefix `listener.name.<name lower
//! case>.` (`listener.name.sasl_ssl.ssl.client.auth=required`) and win
//! over the broker-wide value.

use std::collections::BTreeMap;
use std::path::PathBuf;

/// Kafka's `authorizer.class.name` for its KRaft authorizer: es's
/// authorizer has its semantics, so this is the one value that turns it on.
pub const STANDARD_AUTHORIZER: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";

/// SASL mechanisms es serves.
pub const MECHANISMS: [&str; 3] = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"];

/// Kafka's `connection.failed.authentication.delay.ms` default.
pub const FAILED_AUTHENTICATION_DELAY_MS_DEFAULT: u64 = 100;
/// Kafka's `sasl.server.max.receive.size` default (512 KiB).
pub const SASL_MAX_RECEIVE_SIZE_DEFAULT: usize = 524_288;

/// Broker-wide names es knows that [`SecurityConfig`] reads.
const BROKER_NAMES: &[&str] = &[
    "authorizer.class.name",
    "super.users",
    "allow.everyone.if.no.acl.found",
    "connection.failed.authentication.delay.ms",
    "sasl.server.max.receive.size",
    "ssl.principal.mapping.rules",
    "inter.broker.listener.name",
    "quota.window.num",
    "quota.window.size.seconds",
];

/// Names that may also be given per listener (`listener.name.<l>.<name>`).
const LISTENER_NAMES: &[&str] = &[
    "sasl.enabled.mechanisms",
    "connections.max.reauth.ms",
    "ssl.client.auth",
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.enabled.protocols",
];

/// Whether `name` is a security setting (broker-wide or per listener).
pub fn is_security_setting(name: &str) -> bool {
    if BROKER_NAMES.contains(&name)
        || LISTENER_NAMES.contains(&name)
        || crate::limits::NAMES.contains(&name)
    {
        return true;
    }
    listener_scoped(name).is_some()
}

/// `listener.name.<l>.<setting>` → (l upper-cased, setting).
fn listener_scoped(name: &str) -> Option<(String, &str)> {
    let rest = name.strip_prefix("listener.name.")?;
    let (l, setting) = rest.split_once('.')?;
    (!l.is_empty() && LISTENER_NAMES.contains(&setting)).then(|| (l.to_ascii_uppercase(), setting))
}

/// `ssl.client.auth`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ClientAuth {
    #[default]
    None,
    Requested,
    Required,
}

/// Where a TLS listener's certificate, key and client CA come from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsFiles {
    /// PEM certificate chain (the server's first).
    pub cert: Option<PathBuf>,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1); may be the `cert` file.
    pub key: Option<PathBuf>,
    /// PEM certificates of the CAs client certificates must chain to.
    pub ca: Option<PathBuf>,
    pub client_auth: ClientAuth,
    pub protocols: TlsProtocols,
}

/// `ssl.enabled.protocols`: which TLS versions a listener offers (Kafka's
/// default, both of the two es has).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TlsProtocols {
    pub tls12: bool,
    pub tls13: bool,
}

impl Default for TlsProtocols {
    fn default() -> Self {
        Self {
            tls12: true,
            tls13: true,
        }
    }
}

/// What one listener's connections need to know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListenerSecurity {
    /// SASL mechanisms offered, in the order configured.
    pub mechanisms: Vec<String>,
    /// Kafka's `connections.max.reauth.ms`: 0, sessions never expire.
    pub max_reauth_ms: i64,
    pub tls: TlsFiles,
}

/// Every security setting of a broker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecurityConfig {
    /// `authorizer.class.name` names the StandardAuthorizer.
    pub authorizer: bool,
    /// `super.users`, as principals (`User:admin`).
    pub super_users: Vec<String>,
    pub allow_everyone_if_no_acl_found: bool,
    pub failed_authentication_delay_ms: u64,
    pub sasl_max_receive_size: usize,
    /// `ssl.principal.mapping.rules`, as given (checked at start).
    pub principal_mapping_rules: String,
    /// `max.connections`, `max.connections.per.ip`, `connections.max.idle.ms`
    /// and the other limits of [`crate::limits`].
    pub connections: crate::limits::ConnectionLimits,
    /// `inter.broker.listener.name`, when set.
    pub inter_broker_listener: Option<String>,
    /// `quota.window.num`: the samples a client quota's rate is measured
    /// over.
    pub quota_window_num: u32,
    /// `quota.window.size.seconds`: the length of each sample.
    pub quota_window_size_seconds: u32,
    /// Broker-wide values of the per-listener settings.
    default_listener: ListenerSecurity,
    /// Per-listener overrides, by upper-case listener name.
    listeners: BTreeMap<String, BTreeMap<String, String>>,
}

impl Default for SecurityConfig {
    fn default() -> Self {
        SecurityConfig {
            authorizer: false,
            super_users: Vec::new(),
            allow_everyone_if_no_acl_found: false,
            failed_authentication_delay_ms: FAILED_AUTHENTICATION_DELAY_MS_DEFAULT,
            sasl_max_receive_size: SASL_MAX_RECEIVE_SIZE_DEFAULT,
            principal_mapping_rules: "DEFAULT".into(),
            connections: crate::limits::ConnectionLimits::default(),
            inter_broker_listener: None,
            quota_window_num: crate::quota::QUOTA_WINDOW_NUM_DEFAULT,
            quota_window_size_seconds: crate::quota::QUOTA_WINDOW_SIZE_SECONDS_DEFAULT,
            default_listener: ListenerSecurity {
                mechanisms: MECHANISMS.iter().map(|m| m.to_string()).collect(),
                max_reauth_ms: 0,
                tls: TlsFiles::default(),
            },
            listeners: BTreeMap::new(),
        }
    }
}

fn parse_bool(name: &str, v: &str) -> Result<bool, String> {
    match v.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(format!("{name}={v:?}: expected true or false")),
    }
}

fn parse_num<T: std::str::FromStr>(name: &str, v: &str) -> Result<T, String> {
    v.trim()
        .parse()
        .map_err(|_| format!("{name}={v:?}: not a valid number"))
}

fn parse_positive(name: &str, v: &str) -> Result<u32, String> {
    let n: u32 = parse_num(name, v)?;
    if n == 0 {
        return Err(format!("{name} must be at least 1"));
    }
    Ok(n)
}

impl SecurityConfig {
    /// How client quotas measure rates (`quota.window.num` samples of
    /// `quota.window.size.seconds`).
    pub fn quota_rate(&self) -> crate::quota::RateConfig {
        crate::quota::RateConfig {
            samples: self.quota_window_num,
            window_ms: u64::from(self.quota_window_size_seconds) * 1000,
        }
    }
}

fn list(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// Applies one per-listener setting to `l`.
fn apply_listener_setting(l: &mut ListenerSecurity, name: &str, v: &str) -> Result<(), String> {
    match name {
        "sasl.enabled.mechanisms" => {
            let ms = list(v);
            for m in &ms {
                if !MECHANISMS.contains(&m.as_str()) {
                    return Err(format!(
                        "sasl.enabled.mechanisms: {m} is not supported (es serves {})",
                        MECHANISMS.join(", ")
                    ));
                }
            }
            l.mechanisms = ms;
        }
        "connections.max.reauth.ms" => {
            let ms: i64 = parse_num(name, v)?;
            if ms < 0 {
                return Err(format!("{name} must not be negative"));
            }
            l.max_reauth_ms = ms;
        }
        "ssl.client.auth" => {
            l.tls.client_auth = match v.trim().to_ascii_lowercase().as_str() {
                "none" => ClientAuth::None,
                "requested" => ClientAuth::Requested,
                "required" => ClientAuth::Required,
                _ => {
                    return Err(format!(
                        "{name}={v:?}: expected none, requested or required"
                    ))
                }
            }
        }
        "ssl.keystore.type" | "ssl.truststore.type" => {
            if !v.trim().eq_ignore_ascii_case("PEM") {
                return Err(format!(
                    "{name}={v:?}: es reads PEM files only (set {name}=PEM)"
                ));
            }
        }
        "ssl.keystore.location" => {
            // Kafka's PEM key store: the private key and the certificate
            // chain in one file.
            l.tls.cert = Some(PathBuf::from(v.trim()));
            l.tls.key = Some(PathBuf::from(v.trim()));
        }
        "ssl.truststore.location" => l.tls.ca = Some(PathBuf::from(v.trim())),
        "ssl.enabled.protocols" => {
            let mut protocols = TlsProtocols {
                tls12: false,
                tls13: false,
            };
            for p in list(v) {
                match p.as_str() {
                    "TLSv1.2" => protocols.tls12 = true,
                    "TLSv1.3" => protocols.tls13 = true,
                    _ => {
                        return Err(format!(
                            "ssl.enabled.protocols: {p} is not supported (TLSv1.2 and TLSv1.3 only)"
                        ))
                    }
                }
            }
            if protocols
                == (TlsProtocols {
                    tls12: false,
                    tls13: false,
                })
            {
                return Err("ssl.enabled.protocols names no protocol".into());
            }
            l.tls.protocols = protocols;
        }
        _ => return Err(format!("{name} is not a setting es knows")),
    }
    Ok(())
}

impl SecurityConfig {
    /// Builds the configuration from Kafka-named `settings`; every name must
    /// be one [`is_security_setting`] accepts.
    pub fn from_settings(settings: &BTreeMap<String, String>) -> Result<Self, String> {
        let mut c = SecurityConfig::default();
        for (name, v) in settings {
            if let Some((l, setting)) = listener_scoped(name) {
                c.listeners
                    .entry(l)
                    .or_default()
                    .insert(setting.to_string(), v.clone());
                continue;
            }
            if LISTENER_NAMES.contains(&name.as_str()) {
                apply_listener_setting(&mut c.default_listener, name, v)?;
                continue;
            }
            match name.as_str() {
                "authorizer.class.name" => {
                    c.authorizer = match v.trim() {
                        "" => false,
                        STANDARD_AUTHORIZER => true,
                        other => {
                            return Err(format!(
                        "authorizer.class.name={other:?}: es's authorizer is {STANDARD_AUTHORIZER}"
                    ))
                        }
                    }
                }
                "super.users" => {
                    c.super_users = es_auth::acl::parse_super_users(v)
                        .map_err(|e| format!("super.users: {e}"))?
                }
                "allow.everyone.if.no.acl.found" => {
                    c.allow_everyone_if_no_acl_found = parse_bool(name, v)?
                }
                "connection.failed.authentication.delay.ms" => {
                    c.failed_authentication_delay_ms = parse_num(name, v)?
                }
                "sasl.server.max.receive.size" => {
                    let n: usize = parse_num(name, v)?;
                    if n < 1024 {
                        return Err(format!("{name} must be at least 1024"));
                    }
                    c.sasl_max_receive_size = n;
                }
                "ssl.principal.mapping.rules" => c.principal_mapping_rules = v.trim().to_string(),
                n if crate::limits::NAMES.contains(&n) => c.connections.apply(n, v)?,
                "inter.broker.listener.name" => {
                    c.inter_broker_listener = Some(v.trim().to_ascii_uppercase())
                }
                // Kafka's ranges: at least 1 sample, at least 1 second.
                "quota.window.num" => c.quota_window_num = parse_positive(name, v)?,
                "quota.window.size.seconds" => {
                    c.quota_window_size_seconds = parse_positive(name, v)?
                }
                _ => return Err(format!("{name} is not a setting es knows")),
            }
        }
        c.connections.check()?;
        // Per-listener values are checked now, not when a client connects.
        for name in c.listeners.keys() {
            c.listener(name)?;
        }
        Ok(c)
    }

    /// Sets the broker-wide TLS files (`--ssl-cert`, `--ssl-key`, `--ssl-ca`).
    pub fn set_tls_files(
        &mut self,
        cert: Option<PathBuf>,
        key: Option<PathBuf>,
        ca: Option<PathBuf>,
    ) {
        let t = &mut self.default_listener.tls;
        if cert.is_some() {
            t.cert = cert;
        }
        if key.is_some() {
            t.key = key;
        }
        if ca.is_some() {
            t.ca = ca;
        }
    }

    /// Listener `name`'s settings: the broker-wide ones with its own over them.
    pub fn listener(&self, name: &str) -> Result<ListenerSecurity, String> {
        let mut l = self.default_listener.clone();
        if let Some(own) = self.listeners.get(&name.to_ascii_uppercase()) {
            for (k, v) in own {
                apply_listener_setting(&mut l, k, v)
                    .map_err(|e| format!("listener {name}: {e}"))?;
            }
        }
        Ok(l)
    }

    /// Listener `name`'s TLS files. On a SASL_SSL listener (`sasl`) only a
    /// listener-prefixed `ssl.client.auth` counts, as in Kafka (KIP-684):
    /// the broker-wide one is for SSL listeners.
    pub fn listener_tls(&self, name: &str, sasl: bool) -> Result<TlsFiles, String> {
        let mut tls = self.listener(name)?.tls;
        let own = self
            .listeners
            .get(&name.to_ascii_uppercase())
            .is_some_and(|own| own.iter().any(|(k, _)| k == "ssl.client.auth"));
        if sasl && !own {
            tls.client_auth = ClientAuth::None;
        }
        Ok(tls)
    }

    /// The broker-wide values of the per-listener settings.
    pub fn broker_wide(&self) -> &ListenerSecurity {
        &self.default_listener
    }

    /// Names of listeners that have settings of their own.
    pub fn configured_listeners(&self) -> impl Iterator<Item = &str> {
        self.listeners.keys().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults_change_nothing() {
        let c = SecurityConfig::from_settings(&BTreeMap::new()).expect("empty");
        assert!(!c.authorizer);
        assert!(!c.allow_everyone_if_no_acl_found);
        assert_eq!(c.failed_authentication_delay_ms, 100);
        assert_eq!(c.sasl_max_receive_size, 524_288);
        let l = c.listener("PLAINTEXT").expect("listener");
        assert_eq!(l.max_reauth_ms, 0);
        assert_eq!(l.tls.client_auth, ClientAuth::None);
    }

    #[test]
    fn kafka_names_are_read_and_listener_values_win() {
        let c = SecurityConfig::from_settings(&settings(&[
            ("super.users", "User:admin; User:ops"),
            ("allow.everyone.if.no.acl.found", "true"),
            ("sasl.enabled.mechanisms", "SCRAM-SHA-512"),
            (
                "listener.name.sasl_ssl.sasl.enabled.mechanisms",
                "PLAIN,SCRAM-SHA-256",
            ),
            ("listener.name.sasl_ssl.connections.max.reauth.ms", "60000"),
            ("ssl.client.auth", "requested"),
            ("listener.name.ssl.ssl.client.auth", "required"),
        ]))
        .expect("valid");
        let authorizer = [("authorizer.class.name", STANDARD_AUTHORIZER)];
        assert_eq!(
            SecurityConfig::from_settings(&settings(&authorizer)).map(|c| c.authorizer),
            Ok(true)
        );
        assert_eq!(c.super_users, vec!["User:admin", "User:ops"]);
        assert!(c.allow_everyone_if_no_acl_found);
        let s = c.listener("SASL_SSL").expect("listener");
        assert_eq!(s.mechanisms, vec!["PLAIN", "SCRAM-SHA-256"]);
        assert_eq!(s.max_reauth_ms, 60_000);
        assert_eq!(s.tls.client_auth, ClientAuth::Requested);
        let other = c.listener("OTHER").expect("listener");
        assert_eq!(other.mechanisms, vec!["SCRAM-SHA-512"]);
        assert_eq!(
            c.listener("ssl").expect("listener").tls.client_auth,
            ClientAuth::Required
        );
        // KIP-684: on SASL_SSL only the listener's own ssl.client.auth counts.
        let tls = |name, sasl| c.listener_tls(name, sasl).expect("tls").client_auth;
        assert_eq!(tls("SASL_SSL", true), ClientAuth::None);
        assert_eq!(tls("SASL_SSL", false), ClientAuth::Requested);
        assert_eq!(tls("SSL", true), ClientAuth::Required);
    }

    #[test]
    fn enabled_protocols_are_applied() {
        let c = |v| SecurityConfig::from_settings(&settings(&[("ssl.enabled.protocols", v)]));
        let p = |v| c(v).expect("valid").broker_wide().tls.protocols;
        assert_eq!(
            p("TLSv1.2"),
            TlsProtocols {
                tls12: true,
                tls13: false
            }
        );
        assert_eq!(p("TLSv1.3, TLSv1.2"), TlsProtocols::default());
        assert!(c("").is_err());
        assert!(c("TLSv1.2,SSLv3").is_err());
        assert_eq!(
            SecurityConfig::from_settings(&settings(&[]))
                .expect("valid")
                .broker_wide()
                .tls
                .protocols,
            TlsProtocols::default()
        );
    }

    #[test]
    fn quota_windows_are_read_with_kafkas_defaults_and_ranges() {
        let c = SecurityConfig::from_settings(&settings(&[])).expect("defaults");
        assert_eq!(
            c.quota_rate(),
            crate::quota::RateConfig {
                samples: 11,
                window_ms: 1000
            }
        );
        let c = SecurityConfig::from_settings(&settings(&[
            ("quota.window.num", "5"),
            ("quota.window.size.seconds", "2"),
        ]))
        .expect("set");
        assert_eq!(
            c.quota_rate(),
            crate::quota::RateConfig {
                samples: 5,
                window_ms: 2000
            }
        );
        assert!(is_security_setting("quota.window.num"));
        for bad in [
            ("quota.window.num", "0"),
            ("quota.window.size.seconds", "x"),
        ] {
            assert!(
                SecurityConfig::from_settings(&settings(&[bad])).is_err(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn what_es_cannot_do_is_refused_at_start() {
        for bad in [
            (
                "authorizer.class.name",
                "kafka.security.authorizer.AclAuthorizer",
            ),
            ("sasl.enabled.mechanisms", "GSSAPI"),
            ("listener.name.x.sasl.enabled.mechanisms", "OAUTHBEARER"),
            ("ssl.client.auth", "sometimes"),
            ("ssl.keystore.type", "JKS"),
            ("super.users", "admin"),
            ("allow.everyone.if.no.acl.found", "yes"),
            ("ssl.enabled.protocols", "TLSv1.1"),
            ("no.such.setting", "1"),
        ] {
            assert!(
                SecurityConfig::from_settings(&settings(&[bad])).is_err(),
                "{bad:?} accepted"
            );
        }
        assert!(is_security_setting("listener.name.client.ssl.client.auth"));
        assert!(!is_security_setting("listener.name.client.log.dirs"));
        assert!(!is_security_setting("log.dirs"));
    }
}
