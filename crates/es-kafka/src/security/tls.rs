//! TLS for SSL and SASL_SSL listeners: rustls (aws-lc-rs provider), TLS 1.2 and
//! 1.3 only, a certificate chain and key from PEM files, and client
//! certificates checked against a CA when `ssl.client.auth` asks for them.
//!
//! A client certificate that does not verify (another CA, a bad signature,
//! expired) is refused with alert 42 (bad_certificate), the alert Java's TLS
//! sends and clients' tests expect (librdkafka's 0097 accepts no other), not
//! the more precise ones rustls sends (unknown_ca, decrypt_error, ...).
//!
//! A [`Tls`] keeps the files it was built from; [`Tls::reload`] (on SIGHUP)
//! reads them again and swaps the configuration new handshakes use, so
//! renewed certificates take effect without a restart and open connections
//! keep theirs. A reload that fails leaves the old configuration in place.

use std::io::BufReader;
use std::path::Path;
use std::sync::Arc;

use parking_lot::RwLock;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::{
    CertificateError, DigitallySignedStruct, DistinguishedName, RootCertStore, ServerConfig,
    SignatureScheme,
};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, UnixTime};

use super::settings::{ClientAuth, TlsFiles};

/// PEM files larger than this are refused before they are read.
pub const PEM_FILE_BYTES_MAX: u64 = 1024 * 1024;

/// Reads a PEM file, bounded in size.
fn read_pem(path: &Path, what: &str) -> Result<Vec<u8>, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{what} {}: {e}", path.display()))?;
    if meta.len() > PEM_FILE_BYTES_MAX {
        return Err(format!(
            "{what} {} is {} bytes, more than the {PEM_FILE_BYTES_MAX} a PEM file may have",
            path.display(),
            meta.len()
        ));
    }
    std::fs::read(path).map_err(|e| format!("{what} {}: {e}", path.display()))
}

fn certificates(path: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = read_pem(path, what)?;
    let certs: Vec<CertificateDer<'static>> = rustls_pemfile::certs(&mut BufReader::new(&pem[..]))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{what} {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "{what} {} holds no PEM certificate",
            path.display()
        ));
    }
    Ok(certs)
}

fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    let pem = read_pem(path, "key")?;
    rustls_pemfile::private_key(&mut BufReader::new(&pem[..]))
        .map_err(|e| format!("key {}: {e}", path.display()))?
        .ok_or_else(|| {
            format!(
                "key {} holds no unencrypted PEM private key (PKCS#8, PKCS#1 or SEC1)",
                path.display()
            )
        })
}

/// The rustls configuration `files` describe.
pub fn server_config(files: &TlsFiles) -> Result<ServerConfig, String> {
    let cert = files
        .cert
        .as_deref()
        .ok_or("a TLS listener needs a certificate (--ssl-cert or ssl.keystore.location)")?;
    let key = files
        .key
        .as_deref()
        .ok_or("a TLS listener needs a private key (--ssl-key or ssl.keystore.location)")?;
    let chain = certificates(cert, "certificate")?;
    let key = private_key(key)?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut versions = Vec::new();
    if files.protocols.tls12 {
        versions.push(&rustls::version::TLS12);
    }
    if files.protocols.tls13 {
        versions.push(&rustls::version::TLS13);
    }
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| format!("TLS versions: {e}"))?;
    let builder = match files.client_auth {
        ClientAuth::None => builder.with_no_client_auth(),
        auth => {
            let ca = files.ca.as_deref().ok_or(
                "ssl.client.auth=requested or required needs the client CA (--ssl-ca or ssl.truststore.location)",
            )?;
            let mut roots = RootCertStore::empty();
            for c in certificates(ca, "CA")? {
                roots
                    .add(c)
                    .map_err(|e| format!("CA {}: {e}", ca.display()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if auth == ClientAuth::Requested {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            let verifier = verifier
                .build()
                .map_err(|e| format!("client certificate verifier: {e}"))?;
            builder.with_client_cert_verifier(Arc::new(JavaAlerts(verifier)))
        }
    };
    builder
        .with_single_cert(chain, key)
        .map_err(|e| format!("certificate {} and its key: {e}", cert.display()))
}

/// A client certificate verifier that answers a refused certificate with
/// the alert Java's TLS sends, bad_certificate, and otherwise is `.0`.
#[derive(Debug)]
struct JavaAlerts(Arc<dyn ClientCertVerifier>);

impl ClientCertVerifier for JavaAlerts {
    fn offer_client_auth(&self) -> bool {
        self.0.offer_client_auth()
    }

    fn client_auth_mandatory(&self) -> bool {
        self.0.client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.0.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.0
            .verify_client_cert(end_entity, intermediates, now)
            .map_err(|e| match e {
                rustls::Error::InvalidCertificate(why) => {
                    tracing::debug!("client certificate refused: {why}");
                    // Java's server answers every certificate its trust
                    // manager refuses with bad_certificate, which rustls
                    // sends for this error.
                    rustls::Error::InvalidCertificate(CertificateError::BadEncoding)
                }
                other => other,
            })
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// A listener's TLS: the acceptor new connections use, reloadable.
pub struct Tls {
    files: TlsFiles,
    current: RwLock<tokio_rustls::TlsAcceptor>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").field("files", &self.files).finish()
    }
}

impl Tls {
    /// Reads `files` (an error names the file and what is wrong with it).
    pub fn load(files: TlsFiles) -> Result<Self, String> {
        let config = server_config(&files)?;
        Ok(Tls {
            files,
            current: RwLock::new(tokio_rustls::TlsAcceptor::from(Arc::new(config))),
        })
    }

    /// Reads the files again; new handshakes use them from now on.
    pub fn reload(&self) -> Result<(), String> {
        let config = server_config(&self.files)?;
        *self.current.write() = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        Ok(())
    }

    /// The acceptor for a new connection.
    pub fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        self.current.read().clone()
    }

    /// Whether client certificates are asked for.
    pub fn client_auth(&self) -> ClientAuth {
        self.files.client_auth
    }
}
