//! How a [`crate::Connection`] logs in: TLS and SASL settings, read from
//! Kafka's Java client properties or from librdkafka's names. A setting
//! this client cannot honour is refused with its name (an encrypted key, a
//! keystore that is not PEM, a mechanism other than PLAIN and SCRAM), never
//! silently dropped.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use es_auth::scram::ScramMechanism;

use crate::ClientError;

/// A SASL mechanism this client speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaslMechanism {
    Plain,
    Scram(ScramMechanism),
}

impl SaslMechanism {
    /// From its IANA name (`PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512`).
    pub fn from_name(name: &str) -> Result<SaslMechanism, ClientError> {
        let name = name.trim();
        if name.eq_ignore_ascii_case("PLAIN") {
            return Ok(SaslMechanism::Plain);
        }
        ScramMechanism::from_name(&name.to_ascii_uppercase())
            .map(SaslMechanism::Scram)
            .ok_or_else(|| {
                ClientError::Settings(format!(
                    "sasl mechanism {name}: es's client speaks PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512"
                ))
            })
    }

    /// Its IANA name.
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::Scram(m) => m.name(),
        }
    }
}

/// Who to log in as.
#[derive(Clone)]
pub struct SaslSettings {
    pub mechanism: SaslMechanism,
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for SaslSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the password.
        f.debug_struct("SaslSettings")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .finish()
    }
}

/// A PEM source: a file, or the PEM text itself.
#[derive(Clone, Debug)]
pub enum Pem {
    File(PathBuf),
    Inline(String),
}

/// How the broker is trusted and how this client proves itself.
#[derive(Clone, Debug, Default)]
pub struct TlsSettings {
    /// The CA certificates; none: the system's.
    pub ca: Option<Pem>,
    /// This client's certificate chain, for brokers that ask for one.
    pub certificate: Option<Pem>,
    /// Its private key (unencrypted PEM); may be in `certificate`'s file.
    pub key: Option<Pem>,
    /// Whether the broker's certificate is checked at all
    /// (`enable.ssl.certificate.verification`).
    pub verify_certificate: bool,
    /// Whether it must name the host connected to
    /// (`ssl.endpoint.identification.algorithm=https`).
    pub verify_hostname: bool,
}

/// Everything a connection needs besides its address.
#[derive(Clone, Debug)]
pub struct ClientSettings {
    pub tls: Option<TlsSettings>,
    pub sasl: Option<SaslSettings>,
    /// The longest a connect, a read or a write may take.
    pub timeout: Duration,
    /// The client id brokers see.
    pub client_id: String,
}

/// `security.protocol`: (TLS, SASL).
fn protocol(value: Option<&String>) -> Result<(bool, bool), ClientError> {
    let p = value.map_or("PLAINTEXT".to_string(), |p| p.trim().to_ascii_uppercase());
    match p.as_str() {
        "PLAINTEXT" => Ok((false, false)),
        "SSL" => Ok((true, false)),
        "SASL_PLAINTEXT" => Ok((false, true)),
        "SASL_SSL" => Ok((true, true)),
        other => Err(ClientError::Settings(format!(
            "security.protocol {other}: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"
        ))),
    }
}

/// The `username` and `password` of a `sasl.jaas.config` value.
pub fn jaas_credentials(jaas: &str) -> Result<(String, String), ClientError> {
    let field = |name: &str| -> Option<String> {
        let start = jaas.find(&format!("{name}=\""))? + name.len() + 2;
        let len = jaas[start..].find('"')?;
        Some(jaas[start..start + len].to_string())
    };
    match (field("username"), field("password")) {
        (Some(u), Some(p)) => Ok((u, p)),
        _ => Err(ClientError::Settings(
            "sasl.jaas.config needs username=\"...\" and password=\"...\"".into(),
        )),
    }
}

fn bool_setting(
    props: &BTreeMap<String, String>,
    name: &str,
    default: bool,
) -> Result<bool, ClientError> {
    match props.get(name).map(|v| v.trim().to_ascii_lowercase()) {
        None => Ok(default),
        Some(v) if v == "true" => Ok(true),
        Some(v) if v == "false" => Ok(false),
        Some(v) => Err(ClientError::Settings(format!("{name}={v}: true or false"))),
    }
}

impl ClientSettings {
    /// No TLS, no SASL.
    pub fn plaintext(client_id: &str) -> ClientSettings {
        ClientSettings {
            tls: None,
            sasl: None,
            timeout: crate::DEFAULT_TIMEOUT,
            client_id: client_id.to_string(),
        }
    }

    /// From Kafka's Java client properties: `security.protocol`,
    /// `sasl.mechanism` (default GSSAPI, which is refused) with
    /// `sasl.jaas.config`'s username and password,
    /// `ssl.truststore.location` and `ssl.keystore.location` as PEM files
    /// (`ssl.*store.type=PEM`), `ssl.endpoint.identification.algorithm`.
    pub fn from_java(
        props: &BTreeMap<String, String>,
        client_id: &str,
    ) -> Result<ClientSettings, ClientError> {
        let (tls, sasl) = protocol(props.get("security.protocol"))?;
        let mut s = ClientSettings::plaintext(client_id);
        if tls {
            for k in ["ssl.truststore.type", "ssl.keystore.type"] {
                if props.get(k).is_some_and(|t| !t.eq_ignore_ascii_case("PEM")) {
                    return Err(ClientError::Settings(format!(
                        "{k}: es reads PEM files only"
                    )));
                }
            }
            if props.contains_key("ssl.key.password") || props.contains_key("ssl.keystore.password")
            {
                return Err(ClientError::Settings(
                    "an encrypted key: es reads unencrypted PEM keys only".into(),
                ));
            }
            let keystore = props.get("ssl.keystore.location").map(PathBuf::from);
            s.tls = Some(TlsSettings {
                ca: props
                    .get("ssl.truststore.location")
                    .map(|p| Pem::File(p.into())),
                certificate: keystore.clone().map(Pem::File),
                key: keystore.map(Pem::File),
                verify_certificate: true,
                verify_hostname: props
                    .get("ssl.endpoint.identification.algorithm")
                    .is_none_or(|a| !a.trim().is_empty()),
            });
        }
        if sasl {
            let mechanism = SaslMechanism::from_name(
                props.get("sasl.mechanism").map_or("GSSAPI", String::as_str),
            )?;
            let jaas = props
                .get("sasl.jaas.config")
                .ok_or_else(|| ClientError::Settings("SASL needs sasl.jaas.config".into()))?;
            let (username, password) = jaas_credentials(jaas)?;
            s.sasl = Some(SaslSettings {
                mechanism,
                username,
                password,
            });
        }
        Ok(s)
    }

    /// From librdkafka's names: `security.protocol`, `sasl.mechanism` (or
    /// `sasl.mechanisms`; default GSSAPI, which is refused),
    /// `sasl.username`, `sasl.password`, `ssl.ca.location` / `ssl.ca.pem`,
    /// `ssl.certificate.location` / `ssl.certificate.pem`,
    /// `ssl.key.location` / `ssl.key.pem`,
    /// `enable.ssl.certificate.verification`,
    /// `ssl.endpoint.identification.algorithm` (`https`, librdkafka's
    /// default, or `none`).
    pub fn from_librdkafka(
        props: &BTreeMap<String, String>,
        client_id: &str,
    ) -> Result<ClientSettings, ClientError> {
        let (tls, sasl) = protocol(props.get("security.protocol"))?;
        let mut s = ClientSettings::plaintext(client_id);
        let pem = |file: &str, inline: &str| {
            props
                .get(inline)
                .map(|p| Pem::Inline(p.clone()))
                .or_else(|| props.get(file).map(|p| Pem::File(p.into())))
        };
        if tls {
            if props.contains_key("ssl.key.password") {
                return Err(ClientError::Settings(
                    "ssl.key.password: es reads unencrypted PEM keys only".into(),
                ));
            }
            for k in [
                "ssl.keystore.location",
                "ssl.certificate.store",
                "ssl.engine.location",
            ] {
                if props.contains_key(k) {
                    return Err(ClientError::Settings(format!(
                        "{k}: es reads PEM (ssl.certificate.location, ssl.key.location)"
                    )));
                }
            }
            let algorithm = props
                .get("ssl.endpoint.identification.algorithm")
                .map_or("https".to_string(), |a| a.trim().to_ascii_lowercase());
            s.tls = Some(TlsSettings {
                ca: pem("ssl.ca.location", "ssl.ca.pem")
                    .filter(|p| !matches!(p, Pem::File(f) if f.as_os_str() == "probe")),
                certificate: pem("ssl.certificate.location", "ssl.certificate.pem"),
                key: pem("ssl.key.location", "ssl.key.pem"),
                verify_certificate: bool_setting(
                    props,
                    "enable.ssl.certificate.verification",
                    true,
                )?,
                verify_hostname: match algorithm.as_str() {
                    "https" => true,
                    "none" => false,
                    a => {
                        return Err(ClientError::Settings(format!(
                            "ssl.endpoint.identification.algorithm={a}: https or none"
                        )))
                    }
                },
            });
        }
        if sasl {
            let name = props
                .get("sasl.mechanism")
                .or_else(|| props.get("sasl.mechanisms"))
                .map_or("GSSAPI", String::as_str);
            let mechanism = SaslMechanism::from_name(name)?;
            let field = |k: &str| {
                props
                    .get(k)
                    .cloned()
                    .ok_or_else(|| ClientError::Settings(format!("SASL {name} needs {k}")))
            };
            s.sasl = Some(SaslSettings {
                mechanism,
                username: field("sasl.username")?,
                password: field("sasl.password")?,
            });
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn jaas_credentials_are_read() {
        let jaas = r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="s3cret";"#;
        let (u, p) = jaas_credentials(jaas).expect("read");
        assert_eq!((u.as_str(), p.as_str()), ("admin", "s3cret"));
        assert!(jaas_credentials("PlainLoginModule required;").is_err());
    }

    #[test]
    fn librdkafka_names_are_read_and_what_cannot_be_honoured_is_refused() {
        let s = ClientSettings::from_librdkafka(
            &props(&[
                ("security.protocol", "sasl_ssl"),
                ("sasl.mechanisms", "SCRAM-SHA-512"),
                ("sasl.username", "u"),
                ("sasl.password", "s3cret-pw"),
                ("ssl.ca.location", "/ca.pem"),
                ("ssl.endpoint.identification.algorithm", "none"),
            ]),
            "t",
        )
        .expect("settings");
        let sasl = s.sasl.expect("sasl");
        assert_eq!(sasl.mechanism, SaslMechanism::Scram(ScramMechanism::Sha512));
        assert_eq!(
            (sasl.username.as_str(), sasl.password.as_str()),
            ("u", "s3cret-pw")
        );
        assert!(
            !format!("{sasl:?}").contains("s3cret"),
            "Debug shows no password"
        );
        let tls = s.tls.expect("tls");
        assert!(matches!(tls.ca, Some(Pem::File(ref f)) if f.as_os_str() == "/ca.pem"));
        assert!(tls.verify_certificate && !tls.verify_hostname);
        for bad in [
            vec![("security.protocol", "SASL_PLAINTEXT")],
            vec![
                ("security.protocol", "SASL_PLAINTEXT"),
                ("sasl.mechanism", "GSSAPI"),
            ],
            vec![("security.protocol", "SSL"), ("ssl.key.password", "x")],
            vec![
                ("security.protocol", "SSL"),
                ("ssl.keystore.location", "k.p12"),
            ],
            vec![("security.protocol", "kerberos")],
        ] {
            assert!(
                ClientSettings::from_librdkafka(&props(&bad), "t").is_err(),
                "{bad:?}"
            );
        }
        let plain = ClientSettings::from_librdkafka(&props(&[]), "t").expect("plaintext");
        assert!(plain.tls.is_none() && plain.sasl.is_none());
    }
}
