//! TLS for SSL and SASL_SSL listeners: rustls (aws-lc-rs provider), TLS 1.2 and
//! 1.3 only, a certificate chain and key from PEM files, and client
//! certificates checked against a CA when `ssl.client.auth` asks for them.
//!
//! A [`Tls`] keeps the files it was built from; [`Tls::reload`] (on SIGHUP)
//! reads them again and swaps the configuration new handshakes use, so
//! renewed certificates take effect without a restart and open connections
//! keep theirs. A reload that fails leaves the old configuration in place.

use std::io::BufReader;
use std::path::Path;
use std::sync::Arc;

use parking_lot::RwLock;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

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
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS12, &rustls::version::TLS13])
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
            builder.with_client_cert_verifier(
                verifier
                    .build()
                    .map_err(|e| format!("client certificate verifier: {e}"))?,
            )
        }
    };
    builder
        .with_single_cert(chain, key)
        .map_err(|e| format!("certificate {} and its key: {e}", cert.display()))
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
