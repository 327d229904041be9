//! TLS for a [`crate::Connection`]: rustls with aws-lc-rs, TLS 1.2 and 1.3,
//! the CA from the settings (or the system's), a client certificate when
//! one is given, and librdkafka's two relaxations:
//! `ssl.endpoint.identification.algorithm=none` (the chain is checked, the
//! host name is not) and `enable.ssl.certificate.verification=false`
//! (nothing is checked; the handshake's signatures still are).

use std::io::BufReader;
use std::net::TcpStream;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};

use crate::settings::{Pem, TlsSettings};
use crate::ClientError;

/// Largest PEM file read.
const PEM_BYTES_MAX: u64 = 4 << 20;

fn settings_error(what: String) -> ClientError {
    ClientError::Settings(what)
}

fn pem_bytes(p: &Pem) -> Result<(String, Vec<u8>), ClientError> {
    match p {
        Pem::Inline(text) => Ok(("the inline PEM".into(), text.clone().into_bytes())),
        Pem::File(path) => {
            let name = path.display().to_string();
            let len = std::fs::metadata(path)
                .map_err(|e| settings_error(format!("{name}: {e}")))?
                .len();
            if len > PEM_BYTES_MAX {
                return Err(settings_error(format!(
                    "{name}: {len} bytes, not a PEM file"
                )));
            }
            let bytes = std::fs::read(path).map_err(|e| settings_error(format!("{name}: {e}")))?;
            Ok((name, bytes))
        }
    }
}

fn certificates(p: &Pem) -> Result<Vec<CertificateDer<'static>>, ClientError> {
    let (name, pem) = pem_bytes(p)?;
    let certs: Vec<_> = rustls_pemfile::certs(&mut BufReader::new(&pem[..]))
        .collect::<Result<_, _>>()
        .map_err(|e| settings_error(format!("{name}: PEM certificates: {e}")))?;
    if certs.is_empty() {
        return Err(settings_error(format!("{name} holds no PEM certificate")));
    }
    Ok(certs)
}

fn private_key(p: &Pem) -> Result<PrivateKeyDer<'static>, ClientError> {
    let (name, pem) = pem_bytes(p)?;
    rustls_pemfile::private_key(&mut BufReader::new(&pem[..]))
        .map_err(|e| settings_error(format!("{name}: private key: {e}")))?
        .ok_or_else(|| settings_error(format!("{name} holds no unencrypted PEM private key")))
}

fn roots(t: &TlsSettings) -> Result<rustls::RootCertStore, ClientError> {
    let mut roots = rustls::RootCertStore::empty();
    match &t.ca {
        Some(ca) => {
            for c in certificates(ca)? {
                roots
                    .add(c)
                    .map_err(|e| settings_error(format!("a CA certificate: {e}")))?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(settings_error(
                    "no CA certificates in the system's store: set ssl.ca.location".into(),
                ));
            }
        }
    }
    Ok(roots)
}

/// The chain is checked against the roots; a certificate for another
/// host name is accepted (librdkafka's
/// `ssl.endpoint.identification.algorithm=none`).
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

/// Nothing about the certificate is checked
/// (`enable.ssl.certificate.verification=false`).
#[derive(Debug)]
struct Unchecked(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
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

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

fn config(t: &TlsSettings) -> Result<rustls::ClientConfig, ClientError> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| settings_error(format!("TLS versions: {e}")))?;
    let builder = if !t.verify_certificate {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Unchecked(provider)))
    } else if !t.verify_hostname {
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots(t)?), provider)
            .build()
            .map_err(|e| settings_error(format!("TLS verifier: {e}")))?;
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyName(webpki)))
    } else {
        builder.with_root_certificates(roots(t)?)
    };
    match (&t.certificate, &t.key) {
        (Some(cert), key) => {
            let key = private_key(key.as_ref().unwrap_or(cert))?;
            builder
                .with_client_auth_cert(certificates(cert)?, key)
                .map_err(|e| settings_error(format!("client certificate and key: {e}")))
        }
        (None, Some(_)) => Err(settings_error(
            "a private key without its certificate (ssl.certificate.location)".into(),
        )),
        (None, None) => Ok(builder.with_no_client_auth()),
    }
}

/// `tcp` to `addr` (HOST:PORT) as a TLS stream; the handshake runs on the
/// first read or write.
pub fn wrap(
    tcp: TcpStream,
    addr: &str,
    t: &TlsSettings,
) -> Result<rustls::StreamOwned<rustls::ClientConnection, TcpStream>, ClientError> {
    let host = addr
        .rsplit_once(':')
        .map_or(addr, |(h, _)| h)
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let name = ServerName::try_from(host.clone())
        .map_err(|_| settings_error(format!("{host}: not a host name for TLS")))?;
    let conn = rustls::ClientConnection::new(Arc::new(config(t)?), name)
        .map_err(|e| settings_error(format!("TLS client: {e}")))?;
    Ok(rustls::StreamOwned::new(conn, tcp))
}
