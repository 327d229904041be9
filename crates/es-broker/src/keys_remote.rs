//! `es-broker keys ... --bootstrap HOST:PORT`: the `keys` commands through a
//! running broker's Kafka listener (es's API-keys request,
//! `es_kafka::handlers::api_keys`), logged in as a Kafka client properties
//! file says (`--command-config`, as Kafka's tools take it):
//! `security.protocol` PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL;
//! `sasl.mechanism=PLAIN` with the username and password of
//! `sasl.jaas.config` (an API key of a super user); `ssl.truststore.location`
//! (PEM) for TLS, and `ssl.keystore.location` (PEM: certificate chain and
//! key in one file) for a client certificate.

use std::collections::BTreeMap;
use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use bytes::{BufMut, Bytes, BytesMut};
use es_kafka::handlers::api_keys::{KeysRequest, KeysResponse, ES_API_KEYS};
use kafka_protocol::messages::{
    ApiKey, RequestHeader, ResponseHeader, SaslAuthenticateRequest, SaslAuthenticateResponse,
    SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

/// How long the broker may take to answer.
const TIMEOUT: Duration = Duration::from_secs(30);
/// Largest response read.
const RESPONSE_BYTES_MAX: usize = 16 * 1024 * 1024;

trait Stream: Read + Write {}
impl<T: Read + Write> Stream for T {}

/// A connection to a broker, authenticated.
pub struct Remote {
    stream: Box<dyn Stream>,
    correlation_id: i32,
}

/// The `username` and `password` of a `sasl.jaas.config` value.
fn jaas_credentials(jaas: &str) -> anyhow::Result<(String, String)> {
    let field = |name: &str| -> Option<String> {
        let start = jaas.find(&format!("{name}=\""))? + name.len() + 2;
        let len = jaas[start..].find('"')?;
        Some(jaas[start..start + len].to_string())
    };
    match (field("username"), field("password")) {
        (Some(u), Some(p)) => Ok((u, p)),
        _ => bail!("sasl.jaas.config needs username=\"...\" and password=\"...\""),
    }
}

fn pem_certificates(path: &str) -> anyhow::Result<Vec<rustls::pki_types::CertificateDer<'static>>> {
    let pem = std::fs::read(path).with_context(|| path.to_string())?;
    let certs: Vec<_> = rustls_pemfile::certs(&mut BufReader::new(&pem[..]))
        .collect::<Result<_, _>>()
        .with_context(|| format!("{path}: PEM certificates"))?;
    if certs.is_empty() {
        bail!("{path} holds no PEM certificate");
    }
    Ok(certs)
}

fn tls_config(props: &BTreeMap<String, String>) -> anyhow::Result<rustls::ClientConfig> {
    for k in ["ssl.truststore.type", "ssl.keystore.type"] {
        if props.get(k).is_some_and(|t| !t.eq_ignore_ascii_case("PEM")) {
            bail!("{k}: es-broker keys reads PEM files only");
        }
    }
    let ca = props
        .get("ssl.truststore.location")
        .context("TLS needs ssl.truststore.location (the CA, PEM)")?;
    let mut roots = rustls::RootCertStore::empty();
    for c in pem_certificates(ca)? {
        roots
            .add(c)
            .with_context(|| format!("{ca}: a CA certificate"))?;
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS versions")?
        .with_root_certificates(roots);
    Ok(match props.get("ssl.keystore.location") {
        Some(ks) => {
            let pem = std::fs::read(ks).with_context(|| ks.clone())?;
            let key = rustls_pemfile::private_key(&mut BufReader::new(&pem[..]))
                .with_context(|| format!("{ks}: private key"))?
                .with_context(|| format!("{ks} holds no unencrypted PEM private key"))?;
            builder
                .with_client_auth_cert(pem_certificates(ks)?, key)
                .with_context(|| format!("{ks}: certificate and key"))?
        }
        None => builder.with_no_client_auth(),
    })
}

impl Remote {
    /// Connects to `bootstrap` and logs in as `config` (a Kafka client
    /// properties file; none: PLAINTEXT) says.
    pub fn connect(bootstrap: &str, config: Option<&Path>) -> anyhow::Result<Remote> {
        Remote::connect_with_timeout(bootstrap, config, TIMEOUT)
    }

    /// [`Remote::connect`], waiting up to `timeout` for each answer.
    pub fn connect_with_timeout(
        bootstrap: &str,
        config: Option<&Path>,
        timeout: Duration,
    ) -> anyhow::Result<Remote> {
        let props: BTreeMap<String, String> = match config {
            Some(path) => crate::settings::read_properties(path)?
                .into_iter()
                .collect(),
            None => BTreeMap::new(),
        };
        let protocol = props
            .get("security.protocol")
            .map_or("PLAINTEXT".to_string(), |p| p.trim().to_ascii_uppercase());
        let (tls, sasl) = match protocol.as_str() {
            "PLAINTEXT" => (false, false),
            "SSL" => (true, false),
            "SASL_PLAINTEXT" => (false, true),
            "SASL_SSL" => (true, true),
            other => bail!("security.protocol {other}: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"),
        };
        let tcp =
            TcpStream::connect(bootstrap).with_context(|| format!("connecting to {bootstrap}"))?;
        tcp.set_read_timeout(Some(timeout))?;
        tcp.set_write_timeout(Some(TIMEOUT))?;
        let stream: Box<dyn Stream> = if tls {
            let host = bootstrap
                .rsplit_once(':')
                .map_or(bootstrap, |(h, _)| h)
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string();
            let name = rustls::pki_types::ServerName::try_from(host.clone())
                .with_context(|| format!("{host}: not a host name for TLS"))?;
            let conn = rustls::ClientConnection::new(Arc::new(tls_config(&props)?), name)
                .context("TLS client")?;
            Box::new(rustls::StreamOwned::new(conn, tcp))
        } else {
            Box::new(tcp)
        };
        let mut r = Remote {
            stream,
            correlation_id: 0,
        };
        if sasl {
            let mechanism = props.get("sasl.mechanism").map_or("GSSAPI", String::as_str);
            if mechanism != "PLAIN" {
                bail!("sasl.mechanism {mechanism}: es-broker keys logs in with PLAIN (an API key)");
            }
            let jaas = props
                .get("sasl.jaas.config")
                .context("SASL needs sasl.jaas.config")?;
            let (user, password) = jaas_credentials(jaas)?;
            r.login_plain(&user, &password)?;
        }
        Ok(r)
    }

    fn login_plain(&mut self, user: &str, password: &str) -> anyhow::Result<()> {
        let mut h = SaslHandshakeRequest::default();
        h.mechanism = StrBytes::from_static_str("PLAIN");
        let r: SaslHandshakeResponse = self.kafka_call(ApiKey::SaslHandshake, 1, &h)?;
        if r.error_code != 0 {
            bail!("SaslHandshake PLAIN refused (error {})", r.error_code);
        }
        let mut a = SaslAuthenticateRequest::default();
        a.auth_bytes = Bytes::from(format!("\0{user}\0{password}").into_bytes());
        let r: SaslAuthenticateResponse = self.kafka_call(ApiKey::SaslAuthenticate, 2, &a)?;
        if r.error_code != 0 {
            bail!(
                "authentication failed (error {}): {}",
                r.error_code,
                r.error_message.as_deref().unwrap_or("")
            );
        }
        Ok(())
    }

    fn send(&mut self, body: &[u8]) -> anyhow::Result<()> {
        let mut frame = BytesMut::with_capacity(4 + body.len());
        frame.put_i32(i32::try_from(body.len()).context("request too large")?);
        frame.put_slice(body);
        self.stream.write_all(&frame)?;
        self.stream.flush()?;
        Ok(())
    }

    fn receive(&mut self) -> anyhow::Result<Bytes> {
        let mut size = [0u8; 4];
        self.stream
            .read_exact(&mut size)
            .context("the broker closed the connection")?;
        let size = usize::try_from(i32::from_be_bytes(size)).context("negative response size")?;
        if size > RESPONSE_BYTES_MAX {
            bail!("a response of {size} bytes");
        }
        let mut body = vec![0u8; size];
        self.stream.read_exact(&mut body)?;
        Ok(Bytes::from(body))
    }

    fn kafka_call<Req: Encodable, Resp: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        req: &Req,
    ) -> anyhow::Result<Resp> {
        self.correlation_id += 1;
        let mut header = RequestHeader::default();
        header.request_api_key = key as i16;
        header.request_api_version = version;
        header.correlation_id = self.correlation_id;
        header.client_id = Some(StrBytes::from_static_str("es-broker-keys"));
        let mut body = BytesMut::new();
        header.encode(&mut body, key.request_header_version(version))?;
        req.encode(&mut body, version)?;
        self.send(&body)?;
        let mut resp = self.receive()?;
        ResponseHeader::decode(&mut resp, key.response_header_version(version))?;
        Resp::decode(&mut resp, version)
    }

    /// Sends one API-keys request; its answer, or its error.
    pub fn call(&mut self, req: &KeysRequest) -> anyhow::Result<KeysResponse> {
        let r: KeysResponse = self.call_json(ES_API_KEYS, req)?;
        if r.error_code != 0 {
            bail!(
                "the broker refused (error {}): {}",
                r.error_code,
                r.error_message.as_deref().unwrap_or("")
            );
        }
        Ok(r)
    }

    /// Sends one of es's own requests (api key `api_key`, version 0, a
    /// JSON body); its JSON answer.
    pub fn call_json<Req: serde::Serialize, Resp: serde::de::DeserializeOwned>(
        &mut self,
        api_key: i16,
        req: &Req,
    ) -> anyhow::Result<Resp> {
        self.correlation_id += 1;
        let mut body = BytesMut::new();
        body.put_i16(api_key);
        body.put_i16(0);
        body.put_i32(self.correlation_id);
        body.put_slice(&serde_json::to_vec(req)?);
        self.send(&body)?;
        let resp = self.receive()?;
        let json = resp
            .get(4..)
            .context("a response without its correlation id")?;
        serde_json::from_slice(json).context("the broker's answer")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jaas_credentials_are_read() {
        let jaas = r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="s3cret";"#;
        assert_eq!(
            jaas_credentials(jaas).expect("read"),
            ("admin".to_string(), "s3cret".to_string())
        );
        assert!(jaas_credentials("PlainLoginModule required;").is_err());
    }
}
